/*
 * model_plan.c: which dense blocks a rank will hold, and what they will
 * take, decided before the dense model is made (model.h: model_plan_dense,
 * model_plan_memory): the pipeline's cuts (the config's or the balance
 * rule's), the stage's blocks, and their bytes, as `ember plan` and the
 * trainer's memory checks need them.
 */
#include <string.h>

#include "model/model_impl.h"

pipe_config model_pipe_config(const model_config *cfg)
{
    pipe_config pc;
    memset(&pc, 0, sizeof pc);
    pc.schedule = (pipe_schedule)cfg->pipe_schedule;
    pc.virtual_stages = cfg->pipe_virtual;
    pc.recompute = cfg->pipe_recompute;
    pc.num_cuts = cfg->pipe_num_cuts;
    memcpy(pc.cuts, cfg->pipe_cuts, sizeof pc.cuts);
    return pc;
}

int model_balance(model_config *cfg, const dlrm_config *mc, ember_world *world, char *err, size_t errlen)
{
    const int32_t P = cfg->pipe_stages * (cfg->pipe_virtual > 0 ? cfg->pipe_virtual : 1);
    if (cfg->pipe_num_cuts || P <= 1 || P > dlrm_config_blocks(mc))
        return EMBER_OK; /* pipe_pieces says what is wrong with too many pieces */
    const int32_t shards = cfg->optim_group > 0 ? cfg->optim_group : 1;
    pipe_balance_config bc;
    memset(&bc, 0, sizeof bc);
    bc.by_memory = cfg->pipe_balance_memory;
    bc.micro_batch = cfg->micro_batch;
    bc.stages = cfg->pipe_stages;
    bc.pipe = model_pipe_config(cfg);
    bc.accumulate = cfg->accumulate;
    bc.threads = cfg->threads;
    bc.blas_threads = cfg->threads > 0 ? (cfg->blas_threads > 0 ? cfg->blas_threads : cfg->threads) : 0;
    bc.state_floats = (double)dense_optim_state_floats(cfg->dense_optim.kind) / shards;
    if (pipe_balance(mc, &bc, world, cfg->pipe_cuts, NULL, err, errlen))
        return EMBER_EINVAL;
    cfg->pipe_num_cuts = P - 1;
    return EMBER_OK;
}

int model_plan_dense(model_config *cfg, const dlrm_config *mc, ember_world *world, uint8_t *held, char *err,
                     size_t errlen)
{
    if (dlrm_validate(mc, err, errlen))
        return EMBER_EFORMAT;
    const int32_t n = dlrm_config_blocks(mc), S = cfg->pipe_stages, size = ember_world_size(world);
    if (S <= 1) {
        memset(held, 1, (size_t)n);
        return EMBER_OK;
    }
    if (size % S)
        return model_fail(err, errlen, EMBER_EINVAL, "trainer: train.pipeline.stages %d does not divide the world "
                          "of %d", S, size);
    int st = model_balance(cfg, mc, world, err, errlen);
    if (st != EMBER_OK)
        return st;
    pipe_config pc = model_pipe_config(cfg);
    char perr[300];
    if (pipe_held(&pc, S, ember_world_rank(world) % S, n, held, perr, sizeof perr))
        return model_fail(err, errlen, EMBER_EINVAL, "train.pipeline: %s", perr);
    return EMBER_OK;
}

int model_plan_memory(model_config *cfg, const dlrm_config *mc, int32_t s, int32_t replicas, model_memory *out,
                      char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (dlrm_validate(mc, err, errlen))
        return EMBER_EFORMAT;
    const int32_t n = dlrm_config_blocks(mc), S = cfg->pipe_stages > 1 ? cfg->pipe_stages : 1;
    uint8_t held[DENSE_MAX_BLOCKS];
    memset(held, 1, sizeof held);
    pipe_config pc = model_pipe_config(cfg);
    if (S > 1) {
        int st = model_balance(cfg, mc, NULL, err, errlen);
        if (st != EMBER_OK)
            return st;
        pc = model_pipe_config(cfg);
        char perr[300];
        if (pipe_held(&pc, S, s, n, held, perr, sizeof perr))
            return model_fail(err, errlen, EMBER_EINVAL, "train.pipeline: %s", perr);
    }
    dlrm *shape = NULL;
    uint8_t none[DENSE_MAX_BLOCKS] = {0};
    if (dlrm_create_part(mc, none, &shape, err, errlen))
        return EMBER_EINVAL;
    int64_t params = 0;
    for (int32_t b = 0; b < n; b++) {
        int64_t off, len;
        dlrm_block_params(shape, b, &off, &len);
        params += held[b] ? len : 0;
    }
    const int64_t kept = dlrm_blocks_kept_floats(shape, 0, n);
    dlrm_destroy(shape);
    /* sharded state: the busiest rank's share, its shard rounded up */
    const int32_t g = cfg->optim_group > 0 && replicas % cfg->optim_group == 0 ? cfg->optim_group : 1;
    out->params = out->grads = 4 * params;
    out->state = 4 * (int64_t)dense_optim_state_floats(cfg->dense_optim.kind) * ((params + g - 1) / g);
    out->activations = S > 1 ? pipe_plan_kept_bytes(&pc, mc, S, s, cfg->accumulate, cfg->micro_batch)
                             : 4 * kept * cfg->micro_batch;
    return out->activations < 0 ? model_fail(err, errlen, EMBER_ENOMEM, "out of memory") : EMBER_OK;
}

