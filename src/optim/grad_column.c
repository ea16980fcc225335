/*
 * grad_column.c: the backward's update of a COLUMN slice when it needs sums
 * over the row's whole columns (grad.h): clip_norm's norm of g, the
 * row-wise kinds' mean of g^2, LAMB's and LARS's norms.
 *
 * Each rank holds every row's columns [col0, col0 + dim) and the same
 * touched rows (COLUMN ids are all-gathered), so each rank sums its real
 * columns per run, the caller all-gathers the sums, and every rank adds
 * them in rank order and applies the same row factor to its slice.  The
 * runs go in row order (ord), which every rank shares.  Half rows and half
 * state are read to fp32 and written back rounded as the fused kernel does
 * (grad.c), with the slice's own column numbers.
 */
#include <stdlib.h>

#include "optim/grad.h"
#include "quant/round.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

void ember_grad_column_order(const ember_route *r, const ember_grad_runs *u, const ember_store *s, uint64_t *ord)
{
    /* an SSD store's runs come in slot order, which differs between ranks;
     * (row << 32 | run) sorted gives every rank the same order */
    for (int64_t k = 0; k < u->nu; k++)
        ord[k] = (uint64_t)ember_store_row_of(s, (uint32_t)(r->keys[u->starts[k]] >> 32)) << 32 | (uint64_t)k;
    if (s->staged)
        qsort(ord, (size_t)u->nu, sizeof(uint64_t), cmp_u64);
}

/* A run's local row (a staged store's slot) and the row the rounding draws for. */
static inline uint32_t run_row(const ember_route *r, const ember_grad_runs *u, int64_t run)
{
    return (uint32_t)(r->keys[u->starts[run]] >> 32);
}

static inline uint32_t round_row(const ember_store *s, uint32_t row) { return s->staged ? s->slot_row[row] : row; }

/* Row `row`'s values as fp32: in place, or half rows decoded into buf. */
static float *values_of(const ember_store *s, uint32_t row, int32_t dim, float *buf)
{
    if (!ember_enc_half(s->encoding))
        return s->values + (int64_t)row * dim;
    ember_half_decode_row(s->encoding, dim, (const uint16_t *)s->qrows + (int64_t)row * dim, buf);
    return buf;
}

/* Writes buf back to half rows (fp32 rows were updated in place). */
static void values_put(const ember_store *s, const ember_grad_rounding *rd, uint32_t row, int32_t dim,
                       const float *w)
{
    if (!ember_enc_half(s->encoding))
        return;
    uint64_t h = ember_grad_round_bits(rd, round_row(s, row), EMBER_ROUND_ROW);
    ember_half_encode_row(s->encoding, rd->stochastic, h, rd->col0, dim, w, (uint16_t *)s->qrows + (int64_t)row * dim);
}

/* Row `row`'s state as fp32: in place, or half state decoded into buf. */
static float *state_of(const ember_store *s, uint32_t row, float *buf)
{
    int32_t sf = s->state_floats;
    if (sf == 0)
        return NULL;
    if (!s->qstate)
        return s->state + (int64_t)row * sf;
    ember_half_decode_row(s->state_enc, sf, s->qstate + (int64_t)row * sf, buf);
    return buf;
}

static void state_put(const ember_store *s, const ember_grad_rounding *rd, uint32_t row, int32_t dim,
                      const float *st)
{
    if (s->qstate)
        ember_grad_round_state(rd, s->state_enc, -1, round_row(s, row), dim, s->state_floats, st,
                               s->qstate + (int64_t)row * s->state_floats);
}

void ember_grad_column_gradients(const ember_route *r, const ember_grad_runs *u, int32_t dim, int32_t real_cols,
                                 const uint64_t *ord, const float *dp, const float *ds, const ember_optim_step *o,
                                 float *g_all, float *mine, int threads)
{
    ember_optim_step local = *o;
    local.clip_norm = 0.0f; /* the row's norm is the ranks' (ember_grad_column_clip) */
    int64_t nu = u->nu;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t k = 0; k < nu; k++) {
        int64_t run = (int64_t)(uint32_t)ord[k];
        float *g = g_all + run * dim;
        ember_grad_run_gradient(r, u, run, dim, dp, ds, g);
        int64_t clips[2] = {0, 0};
        ember_optim_clip(&local, real_cols, g, clips);
        ember_optim_count_clips(o, clips);
        if (mine)
            mine[k] = ember_optim_sumsq(g, real_cols);
    }
}

/* Run k's total of the ranks' sums j (of nsum a run). */
static inline float total_of(const float *sq, int64_t nu, int32_t W, int nsum, int64_t k, int j)
{
    float t = 0.0f;
    for (int32_t q = 0; q < W; q++)
        t += sq[((int64_t)q * nu + k) * nsum + j];
    return t;
}

void ember_grad_column_clip(const ember_grad_runs *u, int32_t dim, int32_t real_cols, const uint64_t *ord,
                            const float *sq, int32_t W, float *g_all, const ember_optim_step *o, int threads)
{
    int64_t nu = u->nu, rows = 0;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(+ : rows)
    for (int64_t k = 0; k < nu; k++) {
        float norm = sqrtf(total_of(sq, nu, W, 1, k, 0));
        if (norm > o->clip_norm) {
            float scale = o->clip_norm / norm, *g = g_all + (int64_t)(uint32_t)ord[k] * dim;
            for (int32_t j = 0; j < real_cols; j++)
                g[j] *= scale;
            rows++;
        }
    }
    int64_t counts[2] = {0, rows};
    ember_optim_count_clips(o, counts);
}

void ember_grad_column_sums(const ember_route *r, const ember_grad_runs *u, ember_store *s, int32_t dim,
                            int32_t real_cols, const uint64_t *ord, const ember_optim_step *o,
                            const ember_grad_rounding *rd, float *g_all, float *mine, int threads)
{
    int64_t nu = u->nu;
    int nsum = ember_optim_row_sums(o->kind);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t k = 0; k < nu; k++) {
        int64_t run = (int64_t)(uint32_t)ord[k];
        uint32_t row = run_row(r, u, run);
        float *g = g_all + run * dim, *out = mine + k * nsum, wbuf[1024], sbuf[2048];
        const float *w = values_of(s, row, dim, wbuf);
        ember_optim_decay(o, real_cols, w, g);
        if (o->kind == EMBER_OPT_LAMB) {
            float *st = state_of(s, row, sbuf);
            ember_optim_lamb_direction(o, real_cols, w, st, st + dim, g);
            state_put(s, rd, row, dim, st);
            out[0] = ember_optim_sumsq(w, real_cols);
            out[1] = ember_optim_sumsq(g, real_cols);
        } else if (o->kind == EMBER_OPT_LARS) { /* |w| after a decoupled shrink, which apply makes */
            float shrunk[1024];
            for (int32_t j = 0; j < real_cols && o->shrink != 1.0f; j++)
                shrunk[j] = w[j] * o->shrink;
            out[0] = ember_optim_sumsq(o->shrink != 1.0f ? shrunk : w, real_cols);
            out[1] = ember_optim_sumsq(g, real_cols);
        } else { /* row-wise: the mean of g^2 */
            out[0] = ember_optim_sumsq(g, real_cols);
        }
    }
}

void ember_grad_column_apply(const ember_route *r, const ember_grad_runs *u, ember_store *s, int32_t dim,
                             int32_t real_cols, int32_t full_dim, const uint64_t *ord, const float *sq, int32_t W,
                             float *g_all, const ember_optim_step *o, const ember_grad_rounding *rd,
                             int threads)
{
    int64_t nu = u->nu;
    int nsum = ember_optim_row_sums(o->kind);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t k = 0; k < nu; k++) {
        int64_t run = (int64_t)(uint32_t)ord[k];
        uint32_t row = run_row(r, u, run);
        float *g = g_all + run * dim, wbuf[1024], sbuf[2048]; /* the kinds may use g as scratch */
        float *w = values_of(s, row, dim, wbuf), *st = state_of(s, row, sbuf);
        float t0 = nsum > 0 ? total_of(sq, nu, W, nsum, k, 0) : 0.0f;
        float t1 = nsum > 1 ? total_of(sq, nu, W, nsum, k, 1) : 0.0f;
        if (nsum == 0) { /* an element-wise kind after clip_norm: as the fused kernel */
            ember_optim_row(o, dim, w, st, g);
        } else {
            ember_optim_shrink(o, real_cols, w);
            switch (o->kind) {
            case EMBER_OPT_ROWWISE_ADAGRAD:
                ember_optim_rowwise(o, real_cols, w, st, g, t0 / (float)full_dim);
                break;
            case EMBER_OPT_ROWWISE_ADAM: /* m: the slice's columns, then v */
                ember_optim_rowwise_adam(o, real_cols, w, st, st + dim, g, t0 / (float)full_dim);
                break;
            case EMBER_OPT_LAMB: /* g holds r (ember_grad_column_sums) */
                ember_optim_lamb_step(o, real_cols, w, g, t0, t1);
                break;
            default: /* LARS */
                ember_optim_lars_step(o, real_cols, w, st, g, t0, t1);
                break;
            }
        }
        values_put(s, rd, row, dim, w);
        if (o->kind != EMBER_OPT_LAMB || nsum == 0) /* LAMB's state was written by the sums */
            state_put(s, rd, row, dim, st);
    }
}
