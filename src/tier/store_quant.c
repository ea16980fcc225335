/*
 * store_quant.c: the memory tier for encoded rows or state: fp16, int8 or
 * int4 inference rows (ember_table_config.rows_encoding; docs/inference.md,
 * "Quantized tables"; quant/quant.h's layout), half-precision training rows
 * and half optimizer state (precision, state_precision; docs/precision.md),
 * each in one huge-page mapping.
 *
 * The forward reads the encoded rows directly (lookup/pool.c hands them to the
 * fused dequantize-and-pool kernel).  Everything that goes through
 * acquire/release (row reads and writes, checkpoint loads, the initializer)
 * sees fp32: acquire decodes into a scratch row, release with dirty encodes
 * it back.  A one-row acquire uses the calling OpenMP thread's own scratch
 * row (the initializer acquires rows from many threads at once); a larger
 * one uses a shared buffer (one at a time, as store.h allows).  A release
 * checks every row before it encodes any, so a row the encoding refuses
 * changes nothing.  An inference table has no optimizer state: acquire hands out a zero row for
 * it, and what is written there is dropped.  A table that trains with half
 * rows (ember_table_config.precision: fp16 or bf16 rows) keeps its state
 * beside them, and acquire hands out fp32 state rows themselves; release
 * encodes the values to nearest (the backward rounds its own updates,
 * optim/grad.c).  Half optimizer state (state_precision) lives here too,
 * with rows of any precision: acquire decodes it into the scratch row and
 * release, when that acquire handed state out, encodes it back to nearest;
 * fp32 rows are then handed out directly.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/huge.h"
#include "ember.h"
#include "quant/quant.h"
#include "quant/round.h"
#include "tier/store_quant.h"

_Static_assert((int)EMBER_ROWS_FP16 == (int)EMBER_ENC_FP16 && (int)EMBER_ROWS_INT8 == (int)EMBER_ENC_INT8 &&
                   (int)EMBER_ROWS_INT4 == (int)EMBER_ENC_INT4,
               "ember.h's row encodings are quant.h's");

typedef struct quant_store {
    ember_store s;      /* first: the store handed out */
    int32_t threads;    /* per-thread scratch rows     */
    float *one;         /* [threads][dim + state]      */
    float *many;        /* grow buffer                 */
    int64_t many_rows;
    char *one_state;    /* [threads]: the scratch holds decoded state */
    char many_state;
} quant_store;

static int64_t row_floats(const ember_store *s) { return (int64_t)s->dim + s->state_floats; }

/* The scratch of an acquire of n rows by OpenMP thread t, and its flag
 * "holds decoded state". */
static float *scratch_of(quant_store *q, int64_t n, int t, char **flag)
{
    if (n == 1 && t < q->threads) {
        *flag = q->one_state + t;
        return q->one + t * row_floats(&q->s);
    }
    *flag = &q->many_state;
    return q->many;
}

static int quant_acquire(ember_store *st, const uint32_t *rows, int64_t n, float **values, float **state)
{
    quant_store *q = (quant_store *)st;
    ember_store *s = &q->s;
    int t = omp_get_thread_num();
    if (!(n == 1 && t < q->threads) && n > q->many_rows) {
        float *m = realloc(q->many, sizeof(float) * (size_t)(n * row_floats(s)));
        if (!m) {
            snprintf(s->errmsg, sizeof s->errmsg, "out of memory decoding %lld rows", (long long)n);
            return EMBER_ENOMEM;
        }
        q->many = m;
        q->many_rows = n;
    }
    char *decoded_state;
    float *buf = scratch_of(q, n, t, &decoded_state);
    *decoded_state = state && s->qstate;
    for (int64_t i = 0; i < n; i++) {
        float *v = buf + i * row_floats(s);
        if (s->values) {
            values[i] = s->values + (int64_t)rows[i] * s->dim;
        } else {
            ember_dequant_row(s->encoding, s->dim, s->qrows + (int64_t)rows[i] * s->qrow_bytes, v);
            values[i] = v;
        }
        if (!state)
            continue;
        if (s->state) {
            state[i] = s->state_floats ? s->state + (int64_t)rows[i] * s->state_floats : NULL;
            continue;
        }
        if (s->qstate)
            ember_half_decode_row(s->state_enc, s->state_floats, s->qstate + (int64_t)rows[i] * s->state_floats,
                                  v + s->dim);
        else
            memset(v + s->dim, 0, sizeof(float) * (size_t)s->state_floats);
        state[i] = s->state_floats ? v + s->dim : NULL;
    }
    return EMBER_OK;
}

static int quant_release(ember_store *st, const uint32_t *rows, int64_t n, int dirty)
{
    quant_store *q = (quant_store *)st;
    ember_store *s = &q->s;
    if (!dirty)
        return EMBER_OK;
    char *decoded_state;
    const float *buf = scratch_of(q, n, omp_get_thread_num(), &decoded_state);
    uint8_t check[4096]; /* an encoded row (dim <= 1024: fp16 2 KiB, int8 1 KiB + 4) */
    for (int64_t i = 0; !s->values && i < n; i++) /* first every row: a refusal changes nothing */
        if (ember_quant_row(s->encoding, s->dim, buf + i * row_floats(s), check) != 0) {
            snprintf(s->errmsg, sizeof s->errmsg, "local row %u: %s", rows[i], ember_quant_refusal(s->encoding));
            return EMBER_EINPUT;
        }
    for (int64_t i = 0; i < n; i++) {
        const float *v = buf + i * row_floats(s);
        if (*decoded_state) /* to nearest, as every write */
            ember_half_encode_row(s->state_enc, 0, 0, 0, s->state_floats, v + s->dim,
                                  s->qstate + (int64_t)rows[i] * s->state_floats);
        if (!s->values)
            ember_quant_row(s->encoding, s->dim, v, s->qrows + (int64_t)rows[i] * s->qrow_bytes);
    }
    return EMBER_OK;
}

static void quant_destroy(ember_store *st)
{
    quant_store *q = (quant_store *)st;
    ember_huge_free(q->s.values ? (void *)q->s.values : (void *)q->s.qrows, q->s.value_bytes);
    ember_huge_free(q->s.qstate ? (void *)q->s.qstate : (void *)q->s.state, q->s.state_bytes);
    free(q->one);
    free(q->many);
    free(q->one_state);
    free(q);
}

static const ember_store_ops QUANT_OPS = {quant_acquire, quant_release, quant_destroy, NULL, NULL, NULL, NULL, NULL};

int ember_store_quant_create(int64_t rows, int32_t dim, int32_t state_floats, int encoding, int train,
                             int state_enc, int32_t threads, ember_store **out)
{
    *out = NULL;
    quant_store *q = calloc(1, sizeof *q);
    if (!q)
        return EMBER_ENOMEM;
    ember_store *s = &q->s;
    s->ops = &QUANT_OPS;
    s->rows = rows;
    s->dim = dim;
    s->state_floats = state_floats;
    s->encoding = encoding;
    s->qrow_bytes = encoding ? ember_quant_row_bytes((ember_encoding)encoding, dim) : 0;
    s->value_bytes = rows * (encoding ? s->qrow_bytes : (int64_t)sizeof(float) * dim);
    q->threads = threads > omp_get_max_threads() ? threads : omp_get_max_threads();
    q->one = malloc(sizeof(float) * (size_t)(q->threads * row_floats(s)));
    q->one_state = calloc((size_t)q->threads, 1);
    void *v = ember_huge_alloc(s->value_bytes);
    if (encoding)
        s->qrows = v;
    else
        s->values = v;
    void *sv = NULL;
    if (train) {
        s->state_enc = state_enc;
        s->state_bytes = rows * state_floats * (int64_t)(state_enc ? 2 : sizeof(float));
        sv = ember_huge_alloc(s->state_bytes); /* zeroed: a fresh mapping (+0 in every format) */
        if (state_enc)
            s->qstate = sv;
        else
            s->state = sv;
    }
    if (!q->one || !q->one_state || (!v && s->value_bytes > 0) || (train && !sv && s->state_bytes > 0)) {
        quant_destroy(s);
        return EMBER_ENOMEM;
    }
    *out = s;
    return EMBER_OK;
}
