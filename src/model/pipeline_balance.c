/*
 * pipeline_balance.c: the balance rule (pipeline.h, pipe_balance;
 * docs/pipeline.md, "Cuts"): each block's cost, by time or by bytes, on
 * rank 0, then the linear-partition dynamic programme over them, and the
 * cuts sent to every rank.
 *
 * Times are taken on part models that hold one block each (dlrm_create_part),
 * made and freed one after another, so measuring never needs the whole
 * model in one process: the rule runs before a pipeline stage makes its own
 * part, for models no rank could hold whole.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "model/pipeline.h"

/* Seconds of block blk's forward and backward on m (inputs of b rows):
 * the median of 7. */
static double time_block(dlrm *m, int32_t blk, int32_t b, const float *in, const float *pooled, float *out,
                         float *dout, float *din, float *dpool)
{
    double t[7];
    for (int rep = 0; rep < 7; rep++) {
        double t0 = ember_now();
        dlrm_forward_blocks(m, b, blk, blk + 1, in, pooled, out);
        dlrm_backward_blocks(m, blk, blk + 1, dout, blk > 0 ? din : NULL, dpool);
        t[rep] = ember_now() - t0;
    }
    for (int i = 1; i < 7; i++) /* insertion sort: the median */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[3];
}

/* cost[blk] for every block: its forward and backward seconds, timed on a
 * part model that holds that block alone (so no rank ever holds more than
 * the largest block for it), after a warm-up pass.  0, or -1 when out of
 * memory. */
static int time_blocks(const dlrm_config *cfg, const pipe_balance_config *bc, int32_t n, double *cost)
{
    const int32_t b = bc->micro_batch;
    dlrm *shape = NULL;
    uint8_t *held = calloc((size_t)n, 1);
    if (!held || dlrm_create_part(cfg, held, &shape, NULL, 0)) {
        free(held);
        return -1;
    }
    const int64_t widest = dlrm_widest_carry(shape), pw = (int64_t)cfg->num_sparse * cfg->emb_dim;
    float *in = calloc((size_t)(b * widest), sizeof *in), *out = calloc((size_t)(b * widest), sizeof *out);
    float *dout = calloc((size_t)(b * widest), sizeof *dout), *din = calloc((size_t)(b * widest), sizeof *din);
    float *pooled = calloc((size_t)(b * pw), sizeof *pooled), *dpool = calloc((size_t)(b * pw), sizeof *dpool);
    int ok = in && out && dout && din && pooled && dpool;
    for (int64_t i = 0; ok && i < b * widest; i++) /* small values, no NaN or denormals on the way */
        in[i] = dout[i] = 0.01f * (float)((i * 7) % 13 - 6);
    for (int32_t blk = 0; ok && blk < n; blk++) {
        dlrm *m = NULL;
        memset(held, 0, (size_t)n);
        held[blk] = 1;
        ok = dlrm_create_part(cfg, held, &m, NULL, 0) == 0;
        if (ok) { /* timed with the model's thread counts; the first pass warms up */
            dlrm_set_threads(m, bc->threads, bc->blas_threads);
            time_block(m, blk, b, in, pooled, out, dout, din, dpool);
            cost[blk] = time_block(m, blk, b, in, pooled, out, dout, din, dpool);
        }
        dlrm_destroy(m);
    }
    dlrm_destroy(shape);
    free(held), free(in), free(out), free(dout), free(din), free(pooled), free(dpool);
    return ok ? 0 : -1;
}

/* A piece's cost, blocks j .. i-1 as piece q: by time the sum of the
 * blocks' (prefix sums in pre), by memory the bytes its stage holds for it
 * (pipeline.h, pipe_balance). */
typedef struct piece_cost {
    const double *pre;        /* time: prefix sums of the blocks' seconds             */
    double *params;           /* memory: prefix sums of parameters, grads and state   */
    double *kept;             /* memory: prefix sums of one micro-batch's kept bytes  */
    double *input;            /* memory: a piece's input for one micro-batch, by its
                                 first block                                          */
    int32_t *in_flight;       /* memory: micro-batches in flight, per piece           */
    int recompute;
} piece_cost;

static double cost_of(const piece_cost *pc, int32_t q, int32_t j, int32_t i)
{
    if (pc->pre)
        return pc->pre[i] - pc->pre[j];
    const double kept = pc->kept[i] - pc->kept[j], fl = pc->in_flight[q];
    return pc->params[i] - pc->params[j] + (pc->recompute ? fl * pc->input[j] + kept : fl * kept);
}

static void memory_free(piece_cost *pc)
{
    free(pc->params), free(pc->kept), free(pc->input), free(pc->in_flight);
}

/* The memory model of n blocks into pc (memory_free it), and each block's
 * bytes for one micro-batch in bytes[].  0, or -1 when out of memory. */
static int memory_costs(const dlrm_config *cfg, const pipe_balance_config *bc, int32_t n, piece_cost *pc,
                        double *bytes)
{
    dlrm *shape = NULL;
    uint8_t *held = calloc((size_t)n, 1);
    *pc = (piece_cost){NULL, calloc((size_t)n + 1, sizeof(double)), calloc((size_t)n + 1, sizeof(double)),
                       calloc((size_t)n + 1, sizeof(double)), calloc((size_t)PIPE_MAX_PIECES + 1, sizeof(int32_t)),
                       bc->pipe.recompute};
    int ok = held && pc->params && pc->kept && pc->input && pc->in_flight &&
             dlrm_create_part(cfg, held, &shape, NULL, 0) == 0 &&
             pipe_plan_in_flight(&bc->pipe, bc->stages, bc->accumulate, pc->in_flight) == 0;
    const double b4 = 4.0 * bc->micro_batch;
    for (int32_t blk = 0; ok && blk < n; blk++) {
        int64_t off, len;
        dlrm_block_params(shape, blk, &off, &len);
        const double p = 4.0 * (double)len * (2 + bc->state_floats);
        const double k = b4 * (double)dlrm_block_kept_floats(shape, blk);
        pc->params[blk + 1] = pc->params[blk] + p;
        pc->kept[blk + 1] = pc->kept[blk] + k;
        pc->input[blk] = blk > 0 ? b4 * dlrm_block_in_width(shape, blk) : 0; /* piece 0's input is the caller's */
        bytes[blk] = p + k;
    }
    dlrm_destroy(shape);
    free(held);
    return ok ? 0 : -1;
}

/* The linear-partition dynamic programme: the cuts of blocks 0 .. n-1 into
 * P consecutive pieces that make the costliest piece (cost) as cheap as it
 * can be, among the splits whose every piece's limit (NULL: none) is at
 * most bound; that cost, or HUGE_VAL when no split keeps to the bound (cuts
 * then untouched).  best and from hold (n + 1) (P + 1) entries each. */
static double partition(const piece_cost *cost, const piece_cost *limit, double bound, int32_t n, int32_t P,
                        int32_t *cuts, double *best, int32_t *from)
{
    /* best[i][q]: the costliest piece's cost for blocks 0 .. i-1 in q pieces */
#define BEST(i, q) best[(size_t)(i) * (size_t)(P + 1) + (size_t)(q)]
#define FROM(i, q) from[(size_t)(i) * (size_t)(P + 1) + (size_t)(q)]
    for (int32_t i = 0; i <= n; i++)
        for (int32_t q = 0; q <= P; q++)
            BEST(i, q) = HUGE_VAL;
    BEST(0, 0) = 0;
    for (int32_t q = 1; q <= P; q++)
        for (int32_t i = q; i <= n; i++)
            for (int32_t j = i - 1; j >= q - 1; j--) { /* the last piece, q - 1, is blocks j .. i-1 */
                if (limit && cost_of(limit, q - 1, j, i) > bound)
                    break; /* longer pieces only take longer */
                const double piece = cost_of(cost, q - 1, j, i);
                const double worst = BEST(j, q - 1) > piece ? BEST(j, q - 1) : piece;
                if (worst < BEST(i, q)) {
                    BEST(i, q) = worst;
                    FROM(i, q) = j;
                }
            }
    const double got = BEST(n, P);
    for (int32_t q = P, i = n; got < HUGE_VAL && q > 1; q--) {
        i = FROM(i, q);
        cuts[q - 2] = i;
    }
#undef BEST
#undef FROM
    return got;
}

int pipe_balance(const dlrm_config *cfg, const pipe_balance_config *bc, ember_world *w, int32_t *cuts, double *cost,
                 char *err, size_t errlen)
{
    const int32_t n = dlrm_config_blocks(cfg), b = bc->micro_batch;
    const int32_t P = bc->stages * (bc->pipe.virtual_stages > 1 ? bc->pipe.virtual_stages : 1);
    if (bc->stages < 1 || P > n || P > PIPE_MAX_PIECES || b < 1 || bc->accumulate < 1) {
        snprintf(err, errlen, "pipeline: %d pieces of a model of %d blocks", (int)P, (int)n);
        return EMBER_EINVAL;
    }
    double *c = calloc((size_t)n, sizeof *c), *pre = calloc((size_t)n + 1, sizeof *pre);
    double *bytes = calloc((size_t)n, sizeof *bytes), *best = calloc((size_t)(n + 1) * (size_t)(P + 1), sizeof *best);
    int32_t *from = calloc((size_t)(n + 1) * (size_t)(P + 1), sizeof *from);
    piece_cost mem = {NULL, NULL, NULL, NULL, NULL, 0};
    int ok = bytes && memory_costs(cfg, bc, n, &mem, bytes) == 0 && c && pre && best && from;
    if (ok && !bc->by_memory && (!w || w->rank == 0))
        ok = time_blocks(cfg, bc, n, c) == 0;
    int64_t okv = ok;
    int st = EMBER_OK;
    if ((w && ember_comm_bcast(w, &okv, sizeof okv, 0) != EMBER_OK) || !okv || !ok) {
        snprintf(err, errlen, "pipeline: measuring the blocks failed (out of memory or communication)");
        st = EMBER_EINVAL;
    } else if (!bc->by_memory && w && ember_comm_bcast(w, c, (int64_t)n * (int64_t)sizeof *c, 0) != EMBER_OK) {
        snprintf(err, errlen, "pipeline: sending the blocks' costs failed");
        st = EMBER_EINVAL;
    } else if (bc->by_memory) {
        memcpy(c, bytes, (size_t)n * sizeof *c);
        partition(&mem, NULL, HUGE_VAL, n, P, cuts, best, from);
    } else { /* the fastest split, then among those within PIPE_TIME_SLACK of it the leanest in bytes */
        for (int32_t i = 0; i < n; i++)
            pre[i + 1] = pre[i] + c[i];
        const piece_cost time = {pre, NULL, NULL, NULL, NULL, 0};
        const double fastest = partition(&time, NULL, HUGE_VAL, n, P, cuts, best, from);
        partition(&mem, &time, fastest * (1 + PIPE_TIME_SLACK), n, P, cuts, best, from);
    }
    if (st == EMBER_OK && cost)
        memcpy(cost, c, (size_t)n * sizeof *c);
    free(c), free(pre), free(bytes), free(best), free(from);
    memory_free(&mem);
    return st;
}
