/*
 * validate.c: the checks of a collection config, all of them before
 * create allocates anything big, so a bad config fails fast with the table,
 * feature or field named (the create message, ember_errmsg(NULL)).  The
 * checks run in a fixed order: the first failing one is reported.
 */
#include <math.h>
#include <string.h>

#include "assemble/assemble.h"
#include "collection/config.h"
#include "quant/quant.h"

static int check_finite_pos(float x) { return x == x && x > 0 && x < 1e30f; }

/* A table's training precisions and rounding (docs/precision.md): half rows
 * and half state go where the backward's rounding is built so far. */
static int check_precision(const ember_table_config *tc)
{
    const char *nm = tc->name;
    if (tc->precision < EMBER_PRECISION_FP32 || tc->precision > EMBER_PRECISION_BF16)
        return ember_fail_create(EMBER_EINVAL, "table '%s': unknown precision %d", nm, tc->precision);
    if (tc->rounding < EMBER_ROUND_STOCHASTIC || tc->rounding > EMBER_ROUND_NEAREST)
        return ember_fail_create(EMBER_EINVAL, "table '%s': unknown rounding %d", nm, tc->rounding);
    if (tc->state_precision < EMBER_PRECISION_FP32 || tc->state_precision > EMBER_PRECISION_BF16)
        return ember_fail_create(EMBER_EINVAL, "table '%s': unknown state_precision %d", nm, tc->state_precision);
    if (tc->state_precision != EMBER_PRECISION_FP32) {
        const char *why = tc->optimizer.kind == EMBER_OPT_ROWWISE_ADAGRAD ? "row-wise Adagrad, whose one float per "
                                                                            "row stays fp32"
                          : tc->optimizer.kind == EMBER_OPT_ROWWISE_ADAM  ? "row-wise Adam, whose float per row "
                                                                            "stays fp32"
                          : tc->optimizer.kind == EMBER_OPT_SGD            ? "SGD, which keeps no state"
                          : tc->rows_encoding != EMBER_ROWS_FP32           ? "encoded rows (rows_encoding)"
                                                                           : NULL;
        if (why)
            return ember_fail_create(EMBER_EINVAL, "table '%s': %s optimizer state does not go with %s; half state "
                                     "is for the optimizers whose state is per element (docs/precision.md)", nm,
                                     ember_precision_name(tc->state_precision), why);
    }
    if (tc->precision == EMBER_PRECISION_FP32)
        return EMBER_OK;
    const char *why = tc->rows_encoding != EMBER_ROWS_FP32    ? "encoded rows (rows_encoding)"
                      : tc->quant_buckets != 0                ? "simulated quantization"
                                                              : NULL;
    if (why)
        return ember_fail_create(EMBER_EINVAL, "table '%s': %s rows do not go with %s yet; half-precision rows "
                                 "train on either tier, without simulated quantization (docs/precision.md)", nm,
                                 ember_precision_name(tc->precision), why);
    return EMBER_OK;
}

/* Table t's name, kind, size, init, quantization and row encoding. */
static int check_table_shape(const ember_collection_config *cfg, int32_t t, int32_t W)
{
    const ember_table_config *tc = &cfg->tables[t];
    const char *nm = tc->name;
    if (!nm || !*nm)
        return ember_fail_create(EMBER_EINVAL, "table %d: name is empty", t);
    for (int32_t u = 0; u < t; u++)
        if (!strcmp(cfg->tables[u].name, nm))
            return ember_fail_create(EMBER_EINVAL, "table '%s': name used twice (tables %d and %d)",
                                     nm, u, t);
    char derr[400];
    if (ember_dyn_check_config(tc, W, derr, sizeof derr) != EMBER_OK)
        return ember_fail_create(EMBER_EINVAL, "%s", derr);
    if (tc->hot_rows < 0 || tc->hot_rows > tc->rows)
        return ember_fail_create(EMBER_EINVAL, "table '%s': hot_rows %lld outside [0, rows %lld]", nm,
                                 (long long)tc->hot_rows, (long long)tc->rows);
    if (tc->hot_rows > 0 && (tc->placement != EMBER_PLACE_ROW || tc->exchange != EMBER_EXCHANGE_ROWS ||
                             tc->kind != EMBER_TABLE_FIXED || tc->rows_encoding != EMBER_ROWS_FP32))
        return ember_fail_create(EMBER_EINVAL, "table '%s': hot rows need row placement, the rows exchange "
                                 "and a fixed table with fp32 rows", nm); /* the tier: once resolved */
    if (tc->kind != EMBER_TABLE_FIXED && cfg->schedule != EMBER_SCHEDULE_BLOCKING)
        return ember_fail_create(EMBER_EINVAL, "table '%s': a dynamic table needs the blocking schedule (its "
                                 "keys become rows in the forward itself)", nm);
    if (tc->kind == EMBER_TABLE_FIXED && (tc->rows < 1 || tc->rows >= (int64_t)UINT32_MAX))
        return ember_fail_create(EMBER_EINVAL, "table '%s': rows %lld outside [1, 2^32-1)", nm,
                                 (long long)tc->rows);
    if (tc->dim < 1 || tc->dim > 1024)
        return ember_fail_create(EMBER_EINVAL, "table '%s': dim %d outside [1, 1024]", nm, tc->dim);
    if (tc->init < EMBER_INIT_UNIFORM || tc->init > EMBER_INIT_CONSTANT)
        return ember_fail_create(EMBER_EINVAL, "table '%s': unknown init %d", nm, tc->init);
    if (tc->quant_buckets != 0 && (tc->quant_buckets < 2 || tc->quant_buckets > (1 << 24)))
        return ember_fail_create(EMBER_EINVAL, "table '%s': quantization buckets %d outside [2, 2^24] (0 = off)",
                                 nm, tc->quant_buckets);
    if (tc->quant_buckets != 0 &&
        !(isfinite(tc->quant_low) && isfinite(tc->quant_high) && tc->quant_low < tc->quant_high))
        return ember_fail_create(EMBER_EINVAL, "table '%s': quantization range [%g, %g] must be finite with "
                                 "low < high", nm, tc->quant_low, tc->quant_high);
    if (tc->rows_encoding < EMBER_ROWS_FP32 || tc->rows_encoding > EMBER_ROWS_INT4)
        return ember_fail_create(EMBER_EINVAL, "table '%s': unknown rows_encoding %d", nm, tc->rows_encoding);
    if (tc->rows_encoding != EMBER_ROWS_FP32) {
        const char *why = ember_encoding_refusal(tc);
        if (why)
            return ember_fail_create(EMBER_EINVAL, "table '%s': encoded rows (%s) do not go with %s; they are "
                                     "for inference in memory, placed ROW, TABLE or REPLICATED", nm,
                                     ember_encoding_name((ember_encoding)tc->rows_encoding), why);
    }
    return check_precision(tc);
}

/* Table t's optimizer, limits, placement and tier. */
static int check_table_training(const ember_collection_config *cfg, int32_t t, int32_t W)
{
    const ember_table_config *tc = &cfg->tables[t];
    const char *nm = tc->name;
    const ember_optimizer *o = &tc->optimizer;
    if (o->kind < EMBER_OPT_SGD || o->kind > EMBER_OPT_LAST)
        return ember_fail_create(EMBER_EINVAL, "table '%s': unknown optimizer %d", nm, o->kind);
    if (!check_finite_pos(o->lr))
        return ember_fail_create(EMBER_EINVAL, "table '%s': optimizer.lr %g must be > 0", nm, o->lr);
    if (o->kind != EMBER_OPT_SGD && o->kind != EMBER_OPT_MOMENTUM && o->kind != EMBER_OPT_FTRL &&
        o->kind != EMBER_OPT_LARS &&
        !check_finite_pos(o->eps))
        return ember_fail_create(EMBER_EINVAL, "table '%s': optimizer.eps %g must be > 0", nm, o->eps);
    if (!(o->weight_decay >= 0 && o->weight_decay < 1e30f))
        return ember_fail_create(EMBER_EINVAL, "table '%s': optimizer.weight_decay %g must be >= 0",
                                 nm, o->weight_decay);
    const char *betas = o->kind == EMBER_OPT_ADAM           ? "Adam"
                        : o->kind == EMBER_OPT_ROWWISE_ADAM ? "row-wise Adam"
                        : o->kind == EMBER_OPT_LAMB         ? "LAMB"
                                                            : NULL; /* the kinds with moments */
    if (betas && !(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1))
        return ember_fail_create(EMBER_EINVAL, "table '%s': %s betas (%g, %g) must be in [0, 1)", nm, betas,
                                 o->beta1, o->beta2);
    if (o->weight_decay_mode != EMBER_DECAY_L2 && o->weight_decay_mode != EMBER_DECAY_DECOUPLED)
        return ember_fail_create(EMBER_EINVAL, "table '%s': unknown weight_decay_mode %d", nm, (int)o->weight_decay_mode);
    if (o->weight_decay_mode == EMBER_DECAY_DECOUPLED && !(o->lr * o->weight_decay < 1.0f))
        return ember_fail_create(EMBER_EINVAL, "table '%s': decoupled weight decay needs lr * weight_decay < 1 "
                                 "(lr %g, weight_decay %g)", nm, o->lr, o->weight_decay);
    if (!(o->clip_value >= 0 && o->clip_value < 1e30f && o->clip_norm >= 0 && o->clip_norm < 1e30f))
        return ember_fail_create(EMBER_EINVAL, "table '%s': clip_value %g and clip_norm %g must be >= 0 (0: off)", nm,
                                 o->clip_value, o->clip_norm);
    if (o->kind == EMBER_OPT_LARS && !check_finite_pos(o->eta))
        return ember_fail_create(EMBER_EINVAL, "table '%s': LARS eta %g must be > 0", nm, o->eta);
    if (o->kind == EMBER_OPT_FTRL &&
        !(o->beta >= 0 && o->beta < 1e30f && o->l1 >= 0 && o->l1 < 1e30f && o->l2 >= 0 && o->l2 < 1e30f))
        return ember_fail_create(EMBER_EINVAL, "table '%s': FTRL beta %g, l1 %g, l2 %g must be >= 0", nm, o->beta,
                                 o->l1, o->l2);
    if (o->kind == EMBER_OPT_FTRL && !(o->lr_power <= 0 && o->lr_power >= -10))
        return ember_fail_create(EMBER_EINVAL, "table '%s': FTRL lr_power %g must be in [-10, 0]", nm, o->lr_power);
    if (o->kind == EMBER_OPT_FTRL && o->beta == 0 && o->l2 == 0)
        return ember_fail_create(EMBER_EINVAL, "table '%s': FTRL needs beta > 0 or l2 > 0 (a row's first step "
                                 "would divide by zero)", nm);
    if ((o->kind == EMBER_OPT_MOMENTUM || o->kind == EMBER_OPT_LARS) && !(o->momentum >= 0 && o->momentum < 1))
        return ember_fail_create(EMBER_EINVAL, "table '%s': momentum %g must be in [0, 1)", nm, o->momentum);
    if (o->kind == EMBER_OPT_MOMENTUM && o->nesterov != 0 && o->nesterov != 1)
        return ember_fail_create(EMBER_EINVAL, "table '%s': nesterov %d must be 0 or 1", nm, (int)o->nesterov);
    if (tc->max_ids_per_partition < 0 || tc->max_unique_ids_per_partition < 0)
        return ember_fail_create(EMBER_EINVAL, "table '%s': limits must be >= 0 (0 = unlimited)", nm);
    if (tc->limit_policy < EMBER_LIMIT_ERROR || tc->limit_policy > EMBER_LIMIT_MINIBATCH)
        return ember_fail_create(EMBER_EINVAL, "table '%s': unknown limit policy %d", nm,
                                 tc->limit_policy);
    if (tc->placement < EMBER_PLACE_ROW || tc->placement > EMBER_PLACE_REPLICATED)
        return ember_fail_create(EMBER_EINVAL, "table '%s': unknown placement %d", nm, tc->placement);
    if (tc->exchange != EMBER_EXCHANGE_ROWS && tc->exchange != EMBER_EXCHANGE_POOLED)
        return ember_fail_create(EMBER_EINVAL, "table '%s': unknown exchange %d", nm, tc->exchange);
    if (tc->placement == EMBER_PLACE_TABLE && (tc->owner < 0 || tc->owner >= W))
        return ember_fail_create(EMBER_EINVAL, "table '%s': owner rank %d outside the world [0, %d)",
                                 nm, tc->owner, W);
    if (tc->storage < EMBER_STORAGE_AUTO || tc->storage > EMBER_STORAGE_SSD)
        return ember_fail_create(EMBER_EINVAL, "table '%s': unknown storage %d", nm, tc->storage);
    if (tc->cache_policy < EMBER_CACHE_DEFAULT || tc->cache_policy > EMBER_CACHE_LOOKAHEAD)
        return ember_fail_create(EMBER_EINVAL, "table '%s': unknown cache policy %d", nm, tc->cache_policy);
    if (tc->cache_bytes < 0)
        return ember_fail_create(EMBER_EINVAL, "table '%s': cache_bytes %lld must be >= 0", nm,
                                 (long long)tc->cache_bytes);
    if (tc->path && (!*tc->path || strlen(tc->path) > 3000))
        return ember_fail_create(EMBER_EINVAL, "table '%s': path is empty or longer than 3000 bytes", nm);
    return EMBER_OK;
}

static int check_feature(const ember_collection_config *cfg, int32_t f)
{
    const ember_feature_config *fc = &cfg->features[f];
    if (!fc->name || !*fc->name)
        return ember_fail_create(EMBER_EINVAL, "feature %d: name is empty", f);
    for (int32_t g = 0; g < f; g++)
        if (!strcmp(cfg->features[g].name, fc->name))
            return ember_fail_create(EMBER_EINVAL, "feature '%s': name used twice", fc->name);
    if (fc->table < 0 || fc->table >= cfg->num_tables)
        return ember_fail_create(EMBER_EINVAL, "feature '%s': table %d outside [0, %d)", fc->name,
                                 fc->table, cfg->num_tables);
    if (fc->combiner < EMBER_COMBINER_SUM || fc->combiner > EMBER_COMBINER_NONE)
        return ember_fail_create(EMBER_EINVAL, "feature '%s': unknown combiner %d", fc->name,
                                 fc->combiner);
    return EMBER_OK;
}

int ember_validate_config(const ember_collection_config *cfg)
{
    int st;
    if (!cfg)
        return ember_fail_create(EMBER_EINVAL, "config is NULL");
    if (cfg->num_tables < 1 || !cfg->tables)
        return ember_fail_create(EMBER_EINVAL, "num_tables must be >= 1 (got %d)", cfg->num_tables);
    if (cfg->num_features < 1 || !cfg->features)
        return ember_fail_create(EMBER_EINVAL, "num_features must be >= 1 (got %d)",
                                 cfg->num_features);
    if (cfg->num_shards < 0)
        return ember_fail_create(EMBER_EINVAL, "num_shards must be >= 0 (0 = world size; got %d)",
                                 cfg->num_shards);
    int32_t W = ember_world_size(cfg->world);
    if (cfg->threads < 0)
        return ember_fail_create(EMBER_EINVAL, "threads must be >= 0 (got %d)", cfg->threads);
    if (cfg->bounds != EMBER_BOUNDS_ERROR && cfg->bounds != EMBER_BOUNDS_DROP)
        return ember_fail_create(EMBER_EINVAL, "bounds policy %d is not error or drop", cfg->bounds);
    if (cfg->schedule < EMBER_SCHEDULE_BLOCKING || cfg->schedule > EMBER_SCHEDULE_STALE)
        return ember_fail_create(EMBER_EINVAL, "unknown schedule %d", cfg->schedule);
    for (int32_t t = 0; t < cfg->num_tables; t++)
        if ((st = check_table_shape(cfg, t, W)) != EMBER_OK || (st = check_table_training(cfg, t, W)) != EMBER_OK)
            return st;
    if (cfg->ssd_min_bytes < 0 || cfg->memory_budget < 0 || cfg->ssd_cache_bytes < 0)
        return ember_fail_create(EMBER_EINVAL, "ssd_min_bytes, memory_budget and ssd_cache_bytes must be >= 0");
    if (cfg->ssd_policy < EMBER_CACHE_DEFAULT || cfg->ssd_policy > EMBER_CACHE_LOOKAHEAD)
        return ember_fail_create(EMBER_EINVAL, "unknown ssd_policy %d", cfg->ssd_policy);
    if (cfg->lookahead < 0 || cfg->lookahead >= 64)
        return ember_fail_create(EMBER_EINVAL, "lookahead %d outside [0, 63] (0 = 16)", cfg->lookahead);
    if (cfg->lookahead_max != 0 && (cfg->lookahead_max < (cfg->lookahead ? cfg->lookahead : 16) || cfg->lookahead_max >= 64))
        return ember_fail_create(EMBER_EINVAL, "lookahead_max %d outside [lookahead = %d, 63] (0: the window stays)",
                                 cfg->lookahead_max, cfg->lookahead ? cfg->lookahead : 16);
    if (cfg->io_threads < 0 || cfg->io_threads > 256)
        return ember_fail_create(EMBER_EINVAL, "io_threads %d outside [0, 256] (0 = 32)", cfg->io_threads);
    if (cfg->ssd_dir && (!*cfg->ssd_dir || strlen(cfg->ssd_dir) > 3000))
        return ember_fail_create(EMBER_EINVAL, "ssd_dir is empty or longer than 3000 bytes");
    for (int32_t f = 0; f < cfg->num_features; f++)
        if ((st = check_feature(cfg, f)) != EMBER_OK)
            return st;
    return EMBER_OK;
}
