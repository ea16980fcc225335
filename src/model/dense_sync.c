/*
 * dense_sync.c: the dense update over the ranks, optimizer state
 * replicated or sharded (dense_sync.h).
 *
 * Everything a step moves is planned at create as alltoallv counts and
 * displacements (bytes), so a step allocates nothing (the checkpoint's
 * state gather fills its own counts, also made at create, when it runs).
 * The three moves of a step:
 *   reduce  chunk c of every rank's gradients to rank c, summed there in
 *           rank order (both ways);
 *   spread  replicated: every summed chunk to every rank (gradients);
 *           sharded: each summed chunk to the ranks whose shard overlaps it
 *           (the part that overlaps);
 *   gather  sharded only: each rank's updated shard to the ranks of its
 *           group (parameters).
 * A world of one does none of them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "model/dense_sync.h"

typedef struct moves {
    int64_t *scount, *sdispl, *rcount, *rdispl; /* [R] each, bytes */
} moves;

struct dense_sync {
    ember_world *world;
    int32_t R, rank, group; /* group 0: replicated              */
    int64_t n;
    int64_t *off, *len;     /* chunk c: [off[c], off[c] + len[c]) */
    int64_t lo, cnt;        /* this rank's shard (all of n when replicated) */
    moves reduce, spread, gather, state;
    float *recv, *sum;      /* [R][len[rank]], [len[rank]]       */
    float *sgrad, *sbuf;    /* sharded: [cnt] each               */
    dense_optim *opt;       /* over [lo, lo + cnt)               */
    int64_t *mem;           /* every int64 array above           */
};

static int fail(char *err, size_t errlen, int status, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return status;
}

/* Part p of n cut into k contiguous parts. */
static int64_t part_lo(int64_t n, int64_t p, int64_t k) { return n * p / k; }

/* [a0, a1) and [b0, b1): the overlap's start and length (0 if none). */
static int64_t overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1, int64_t *start)
{
    *start = a0 > b0 ? a0 : b0;
    int64_t end = a1 < b1 ? a1 : b1;
    return end > *start ? end - *start : 0;
}

static void plan(dense_sync *s)
{
    const int32_t R = s->R, me = s->rank, g = s->group;
    const int64_t F = (int64_t)sizeof(float);
    for (int32_t c = 0; c < R; c++) {
        s->off[c] = part_lo(s->n, c, R);
        s->len[c] = part_lo(s->n, c + 1, R) - s->off[c];
    }
    if (g > 0) {
        s->lo = part_lo(s->n, me % g, g);
        s->cnt = part_lo(s->n, me % g + 1, g) - s->lo;
    } else {
        s->lo = 0;
        s->cnt = s->n;
    }
    for (int32_t r = 0; r < R; r++) {
        s->reduce.scount[r] = s->len[r] * F; /* chunk r of my grads to rank r */
        s->reduce.sdispl[r] = s->off[r] * F;
        s->reduce.rcount[r] = s->len[me] * F; /* my chunk from every rank      */
        s->reduce.rdispl[r] = r * s->len[me] * F;
        if (g == 0) { /* my summed chunk to every rank, rank r's into place */
            s->spread.scount[r] = s->len[me] * F;
            s->spread.sdispl[r] = 0;
            s->spread.rcount[r] = s->len[r] * F;
            s->spread.rdispl[r] = s->off[r] * F;
            continue;
        }
        /* sharded: what my chunk holds of rank r's shard, and what rank r's
         * chunk holds of mine */
        int64_t rlo = part_lo(s->n, r % g, g), rhi = part_lo(s->n, r % g + 1, g), at;
        s->spread.scount[r] = overlap(s->off[me], s->off[me] + s->len[me], rlo, rhi, &at) * F;
        s->spread.sdispl[r] = s->spread.scount[r] ? (at - s->off[me]) * F : 0;
        s->spread.rcount[r] = overlap(s->off[r], s->off[r] + s->len[r], s->lo, s->lo + s->cnt, &at) * F;
        s->spread.rdispl[r] = s->spread.rcount[r] ? (at - s->lo) * F : 0;
        int same = r / g == me / g; /* my shard to my group; theirs into place */
        s->gather.scount[r] = same ? s->cnt * F : 0;
        s->gather.sdispl[r] = 0;
        s->gather.rcount[r] = same ? (rhi - rlo) * F : 0;
        s->gather.rdispl[r] = rlo * F;
    }
}

int dense_sync_create(ember_world *w, int64_t n, int32_t group, const dense_optim_config *oc, dense_sync **out,
                      char *err, size_t errlen)
{
    *out = NULL;
    int32_t R = ember_world_size(w);
    if (group < 0 || (group > 0 && R % group != 0))
        return fail(err, errlen, EMBER_EINVAL, "dense optimizer sharding: groups of %d ranks do not divide the "
                    "world of %d (0: replicated state)", (int)group, (int)R);
    dense_sync *s = calloc(1, sizeof *s);
    if (!s)
        return fail(err, errlen, EMBER_ENOMEM, "out of memory");
    s->world = w;
    s->R = R;
    s->rank = ember_world_rank(w);
    s->group = group;
    s->n = n;
    s->mem = calloc((size_t)R * 18, sizeof(int64_t));
    if (!s->mem)
        goto oom;
    int64_t *a = s->mem;
    s->off = a, s->len = a + R;
    moves *m[4] = {&s->reduce, &s->spread, &s->gather, &s->state};
    for (int k = 0; k < 4; k++) {
        int64_t *b = a + (2 + 4 * k) * R;
        *m[k] = (moves){b, b + R, b + 2 * R, b + 3 * R};
    }
    plan(s);
    s->recv = malloc(sizeof(float) * (size_t)(R * s->len[s->rank] + 1));
    s->sum = malloc(sizeof(float) * (size_t)(s->len[s->rank] + 1));
    if (!s->recv || !s->sum)
        goto oom;
    if (group > 0 && (!(s->sgrad = malloc(sizeof(float) * (size_t)(s->cnt + 1))) ||
                      !(s->sbuf = malloc(sizeof(float) * (size_t)(s->cnt + 1)))))
        goto oom;
    if (dense_optim_create(oc, s->cnt, &s->opt) != 0) {
        dense_sync_destroy(s);
        int unknown = (unsigned)oc->kind >= DENSE_OPTIM_KINDS;
        return fail(err, errlen, unknown ? EMBER_EINVAL : EMBER_ENOMEM, "dense optimizer: %s",
                    unknown ? "unknown kind" : "out of memory");
    }
    *out = s;
    return EMBER_OK;
oom:
    dense_sync_destroy(s);
    return fail(err, errlen, EMBER_ENOMEM, "out of memory (the dense update of %lld parameters)", (long long)n);
}

void dense_sync_destroy(dense_sync *s)
{
    if (!s)
        return;
    dense_optim_destroy(s->opt);
    free(s->recv);
    free(s->sum);
    free(s->sgrad);
    free(s->sbuf);
    free(s->mem);
    free(s);
}

static int move(dense_sync *s, const moves *m, const void *send, void *recv, const char *what, char *err,
                size_t errlen)
{
    int st = ember_comm_alltoallv(s->world, send, m->scount, m->sdispl, recv, m->rcount, m->rdispl);
    return st == EMBER_OK ? EMBER_OK : fail(err, errlen, st, "dense update: %s: %s", what, s->world->errmsg);
}

int dense_sync_reduce(dense_sync *s, float *grads, char *err, size_t errlen)
{
    if (s->R == 1)
        return EMBER_OK;
    int st = move(s, &s->reduce, grads, s->recv, "gradient reduce-scatter", err, errlen);
    if (st != EMBER_OK)
        return st;
    int64_t k = s->len[s->rank];
    memcpy(s->sum, s->recv, sizeof(float) * (size_t)k);
    for (int32_t r = 1; r < s->R; r++) {
        const float *x = s->recv + r * k;
        for (int64_t i = 0; i < k; i++)
            s->sum[i] += x[i];
    }
    return move(s, &s->spread, s->sum, s->group ? (void *)s->sgrad : (void *)grads, "summed gradients", err,
                errlen);
}

void dense_sync_set_lr_scale(dense_sync *s, float scale) { dense_optim_set_lr_scale(s->opt, scale); }

void dense_sync_set_threads(dense_sync *s, int32_t threads) { dense_optim_set_threads(s->opt, threads); }

void dense_sync_apply(dense_sync *s, float *params, const float *grads)
{
    const float *g = s->group && s->R > 1 ? s->sgrad : grads + s->lo;
    dense_optim_step(s->opt, params + s->lo, g);
}

int dense_sync_gather(dense_sync *s, float *params, char *err, size_t errlen)
{
    if (!s->group || s->R == 1)
        return EMBER_OK;
    memcpy(s->sbuf, params + s->lo, sizeof(float) * (size_t)s->cnt);
    return move(s, &s->gather, s->sbuf, params, "parameter all-gather", err, errlen);
}

int64_t dense_sync_state_floats(const dense_sync *s)
{
    int64_t f = 0;
    dense_optim_state(s->opt, &f, NULL);
    return f;
}

int64_t dense_sync_state_bytes(const dense_sync *s)
{
    return dense_sync_state_floats(s) * s->cnt * (int64_t)sizeof(float);
}

int64_t dense_sync_steps(const dense_sync *s)
{
    int64_t step = 0;
    dense_optim_state(s->opt, NULL, &step);
    return step;
}

const float *dense_sync_state_whole(dense_sync *s)
{
    return !s->group || s->R == 1 ? dense_optim_state(s->opt, NULL, NULL) : NULL;
}

int dense_sync_gather_state(dense_sync *s, float *full, char *err, size_t errlen)
{
    int64_t f = 0;
    float *mine = dense_optim_state(s->opt, &f, NULL);
    if (f == 0)
        return EMBER_OK;
    if (!s->group || s->R == 1) { /* rank 0 holds it all */
        if (s->rank == 0)
            memcpy(full, mine, sizeof(float) * (size_t)(f * s->n));
        return EMBER_OK;
    }
    /* group 0 (ranks 0 .. g-1) holds every part: each sends its m, then its
     * v, straight into place on rank 0 (two moves of at most 4 n bytes, as a
     * step's) */
    const int32_t g = s->group;
    const int64_t F = (int64_t)sizeof(float);
    moves m = s->state;
    for (int32_t r = 0; r < s->R; r++)
        m.scount[r] = m.sdispl[r] = m.rcount[r] = m.rdispl[r] = 0;
    if (s->rank < g)
        m.scount[0] = s->cnt * F;
    for (int32_t r = 0; s->rank == 0 && r < g; r++) {
        m.rcount[r] = (part_lo(s->n, r + 1, g) - part_lo(s->n, r, g)) * F;
        m.rdispl[r] = part_lo(s->n, r, g) * F;
    }
    for (int64_t j = 0; j < f; j++) {
        int st = move(s, &m, mine + j * s->cnt, full ? full + j * s->n : NULL, "optimizer state gather", err,
                      errlen);
        if (st != EMBER_OK)
            return st;
    }
    return EMBER_OK;
}

void dense_sync_set_state(dense_sync *s, const float *full, int64_t steps)
{
    int64_t f = 0;
    float *mine = dense_optim_state(s->opt, &f, NULL);
    for (int64_t j = 0; j < f; j++)
        memcpy(mine + j * s->cnt, full + j * s->n + s->lo, sizeof(float) * (size_t)s->cnt);
    dense_optim_set_step(s->opt, steps);
}
