/*
 * ref_lookup.c: reference forward (pooling, sequence output) and backward
 * (per-row gradient sums, then the optimizer), as ember.h's pseudocode says.
 *
 * Everything is a plain loop in the documented order: samples outer,
 * features in config order, positions innermost.  The backward keeps one
 * dense gradient array per table (rows * dim floats) plus a touched flag per
 * row, so a row's gradient is summed over its occurrences in exactly the
 * order the spec names; it is slow and memory-hungry on purpose.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/assert.h"
#include "ref/ref.h"

/* off[f * B + b] = first id of bag (f, b); off[F * B] = num_ids. */
static int64_t *ref_bag_offsets(const ember_batch *b)
{
    int64_t n = (int64_t)b->num_features * b->batch_size;
    int64_t *off = malloc((size_t)(n + 1) * sizeof *off);
    EMBER_ASSERT(off != NULL);
    off[0] = 0;
    for (int64_t i = 0; i < n; i++)
        off[i + 1] = off[i] + b->lengths[i];
    return off;
}

static int ref_valid(const ref_model *m, int32_t f, int64_t id)
{
    return id >= 0 && id < m->tables[m->cfg.features[f].table].rows;
}

static float ref_w(const ember_batch *b, int64_t i)
{
    return b->weights ? b->weights[i] : 1.0f;
}

/* The combiner's scale of one bag: 1 (SUM, NONE), 1/sum(w) (MEAN),
 * 1/sqrt(sum(w^2)) (SQRTN), over valid ids including limit-dropped ones;
 * 0 when the divisor is 0, so such a bag is a zero row with zero gradient. */
static float ref_scale(const ref_model *m, const ember_batch *b, int32_t f, int64_t start,
                       int64_t len)
{
    ember_combiner c = m->cfg.features[f].combiner;
    if (c != EMBER_COMBINER_MEAN && c != EMBER_COMBINER_SQRTN)
        return 1.0f;
    float div = 0.0f;
    for (int64_t i = start; i < start + len; i++) {
        if (!ref_valid(m, f, b->ids[i]))
            continue;
        float w = ref_w(b, i);
        div += c == EMBER_COMBINER_MEAN ? w : w * w;
    }
    if (c == EMBER_COMBINER_SQRTN)
        div = sqrtf(div);
    return div == 0.0f ? 0.0f : 1.0f / div;
}

/* Float offset of each NONE feature in the sequence output (-1 otherwise),
 * and the pooled column of each other feature. */
static void ref_layout(const ref_model *m, const int64_t *off, int32_t B, int64_t *col,
                       int64_t *seq_off, int64_t *W)
{
    int64_t c = 0, s = 0;
    for (int32_t f = 0; f < m->cfg.num_features; f++) {
        int32_t dim = m->tables[m->cfg.features[f].table].dim;
        if (m->cfg.features[f].combiner == EMBER_COMBINER_NONE) {
            col[f] = -1;
            seq_off[f] = s;
            s += (off[(int64_t)(f + 1) * B] - off[(int64_t)f * B]) * dim;
        } else {
            col[f] = c;
            seq_off[f] = -1;
            c += dim;
        }
    }
    *W = c;
}

/* Element k of row id of table `table` as the forward reads it: through
 * the table's simulated quantization, if any. */
static float ref_read(const ref_model *m, int32_t table, int64_t id, int32_t k)
{
    const ember_table_config *tc = &m->cfg.tables[table];
    float x = m->tables[table].w[id * m->tables[table].dim + k];
    return tc->quant_buckets >= 2 ? ref_fake_quant(x, tc->quant_low, tc->quant_high, tc->quant_buckets) : x;
}

void ref_forward(const ref_model *m, const ember_batch *b, const uint8_t *keep, float *pooled,
                 float *sequence)
{
    int32_t B = b->batch_size, F = m->cfg.num_features;
    int64_t *off = ref_bag_offsets(b);
    int64_t *col = malloc((size_t)F * sizeof *col), *seq_off = malloc((size_t)F * sizeof *seq_off);
    int64_t W;
    ref_layout(m, off, B, col, seq_off, &W);

    for (int32_t s = 0; s < B; s++) {
        for (int32_t f = 0; f < F; f++) {
            const ember_feature_config *fc = &m->cfg.features[f];
            const ref_table *t = &m->tables[fc->table];
            int64_t start = off[(int64_t)f * B + s], len = b->lengths[(int64_t)f * B + s];
            if (fc->combiner == EMBER_COMBINER_NONE) {
                for (int64_t i = start; i < start + len; i++) {
                    float *out = sequence + seq_off[f] + (i - off[(int64_t)f * B]) * t->dim;
                    int live = ref_valid(m, f, b->ids[i]) && (!keep || keep[i]);
                    for (int32_t k = 0; k < t->dim; k++)
                        out[k] = live ? ref_w(b, i) * ref_read(m, fc->table, b->ids[i], k) : 0.0f;
                }
                continue;
            }
            float *out = pooled + (int64_t)s * W + col[f];
            for (int32_t k = 0; k < t->dim; k++)
                out[k] = 0.0f;
            for (int64_t i = start; i < start + len; i++) {
                if (!ref_valid(m, f, b->ids[i]) || (keep && !keep[i]))
                    continue;
                float w = ref_w(b, i);
                if (m->cfg.dedup) {
                    /* merge: the first live occurrence carries the summed
                     * weight of all live occurrences of its id in the bag */
                    int first = 1;
                    for (int64_t j = start; j < i && first; j++)
                        if (b->ids[j] == b->ids[i] && (!keep || keep[j]))
                            first = 0;
                    if (!first)
                        continue;
                    for (int64_t j = i + 1; j < start + len; j++)
                        if (b->ids[j] == b->ids[i] && (!keep || keep[j]))
                            w += ref_w(b, j);
                }
                for (int32_t k = 0; k < t->dim; k++)
                    out[k] += w * ref_read(m, fc->table, b->ids[i], k);
            }
            float scale = ref_scale(m, b, f, start, len);
            if (fc->combiner != EMBER_COMBINER_SUM)
                for (int32_t k = 0; k < t->dim; k++)
                    out[k] *= scale;
        }
    }
    free(off);
    free(col);
    free(seq_off);
}

void ref_backward(ref_model *m, const ember_batch *b, const uint8_t *keep, const float *d_pooled,
                  const float *d_sequence)
{
    int32_t B = b->batch_size, F = m->cfg.num_features;
    int64_t *off = ref_bag_offsets(b);
    int64_t *col = malloc((size_t)F * sizeof *col), *seq_off = malloc((size_t)F * sizeof *seq_off);
    int64_t W;
    ref_layout(m, off, B, col, seq_off, &W);
    m->step++;

    /* Tables are independent, so one gradient array at a time suffices; the
     * per-row order (sample, feature, position) is the same either way. */
    for (int32_t tix = 0; tix < m->cfg.num_tables; tix++) {
        ref_table *t = &m->tables[tix];
        float *g = calloc((size_t)t->rows * (size_t)t->dim, sizeof *g);
        uint8_t *touched = calloc((size_t)t->rows, 1);
        EMBER_ASSERT(g != NULL && touched != NULL);
        for (int32_t s = 0; s < B; s++) {
            for (int32_t f = 0; f < F; f++) {
                const ember_feature_config *fc = &m->cfg.features[f];
                if (fc->table != tix)
                    continue;
                int64_t start = off[(int64_t)f * B + s], len = b->lengths[(int64_t)f * B + s];
                float scale = ref_scale(m, b, f, start, len);
                for (int64_t i = start; i < start + len; i++) {
                    int64_t id = b->ids[i];
                    if (!ref_valid(m, f, id) || (keep && !keep[i]))
                        continue;
                    const float *d = fc->combiner == EMBER_COMBINER_NONE
                        ? d_sequence + seq_off[f] + (i - off[(int64_t)f * B]) * t->dim
                        : d_pooled + (int64_t)s * W + col[f];
                    float coef = ref_w(b, i) * scale;
                    touched[id] = 1;
                    for (int32_t k = 0; k < t->dim; k++)
                        g[id * t->dim + k] += coef * d[k];
                }
            }
        }
        const ember_optimizer *o = &m->cfg.tables[tix].optimizer;
        int32_t sf = ember_state_floats(o->kind, t->dim);
        for (int64_t r = 0; r < t->rows; r++)
            if (touched[r])
                ref_optimizer_apply(o, m->step, t->dim, t->w + r * t->dim, t->state + r * sf,
                                    g + r * t->dim);
        free(g);
        free(touched);
    }
    free(off);
    free(col);
    free(seq_off);
}
