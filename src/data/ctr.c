/*
 * ctr.c: the public calls of ctr.h shared by every CTR source: argument
 * checks, the sticky failure, statistics, and the batch buffers
 * (ctr_impl.h).  The sources themselves: ctr_synth.c, ctr_text.c,
 * ctr_bin.c.
 *
 * Buffers grow, never shrink: after the first batch of the largest size a
 * source allocates nothing more (ids of a file source grow with the longest
 * bags seen, then stop).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/ctr_impl.h"

int ctr_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return EMBER_EINVAL;
}

int ctr_check_world(const char *who, int32_t rank, int32_t world, char *err, size_t errlen)
{
    if (world < 1 || rank < 0 || rank >= world)
        return ctr_fail(err, errlen, "%s: rank %d of world %d: need 0 <= rank < world", who,
                        (int)rank, (int)world);
    return 0;
}

ctr_source *ctr_source_alloc(const ctr_source_ops *ops, void *impl, const ctr_schema *schema)
{
    ctr_source *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->ops = ops;
    s->impl = impl;
    s->schema = *schema;
    return s;
}

static int grow(void **p, size_t want, size_t sz)
{
    void *q = realloc(*p, (want > 0 ? want : 1) * sz);
    if (!q)
        return EMBER_ENOMEM;
    *p = q;
    return 0;
}

int ctr_buf_reserve(ctr_source *s, int32_t n, int stage)
{
    const size_t D = (size_t)s->schema.num_dense, S = (size_t)s->schema.num_sparse;
    if (n > s->cap) {
        if (grow((void **)&s->label, (size_t)n, sizeof(float)) ||
            grow((void **)&s->dense, (size_t)n * D, sizeof(float)) ||
            grow((void **)&s->lengths, (size_t)n * S, sizeof(int32_t)))
            return EMBER_ENOMEM;
        if (s->stage_len && grow((void **)&s->stage_len, (size_t)n * S, sizeof(int32_t)))
            return EMBER_ENOMEM;
        if (s->line_no && grow((void **)&s->line_no, (size_t)n, sizeof(int64_t)))
            return EMBER_ENOMEM;
        s->cap = n;
    }
    if (stage && !s->stage_len) {
        s->stage_len = malloc((s->cap > 0 ? (size_t)s->cap : 1) * S * sizeof(int32_t) + 1);
        if (!s->stage_len)
            return EMBER_ENOMEM;
    }
    return 0;
}

int ctr_schema_weighted(const ctr_schema *sc)
{
    for (int32_t f = 0; f < sc->num_sparse; f++)
        if (sc->weighted[f])
            return 1;
    return 0;
}

int ctr_buf_reserve_ids(ctr_source *s, int64_t n, int stage)
{
    int64_t *cap = stage ? &s->cap_stage : &s->cap_ids;
    int64_t **p = stage ? &s->stage_ids : &s->ids;
    float **w = stage ? &s->stage_w : &s->weights;
    const int weighted = ctr_schema_weighted(&s->schema);
    if (n <= *cap && *p && (!weighted || *w))
        return 0;
    int64_t want = *cap * 2 > n ? *cap * 2 : n;
    if (grow((void **)p, (size_t)want, sizeof(int64_t)) || (weighted && grow((void **)w, (size_t)want, sizeof(float))))
        return EMBER_ENOMEM;
    *cap = want;
    return 0;
}

int ctr_buf_transpose(ctr_source *s, int32_t n, int64_t nids)
{
    const int32_t S = s->schema.num_sparse;
    if (ctr_buf_reserve_ids(s, nids, 0))
        return EMBER_ENOMEM;
    /* off[f] = first id of feature f: ids of earlier features, all samples */
    int64_t off[CTR_MAX_FEATURES] = {0}, acc = 0;
    for (int32_t b = 0; b < n; b++)
        for (int32_t f = 0; f < S; f++) {
            int32_t len = s->stage_len[(int64_t)b * S + f];
            s->lengths[(int64_t)f * n + b] = len;
            off[f] += len;
        }
    for (int32_t f = 0; f < S; f++) {
        int64_t c = off[f];
        off[f] = acc;
        acc += c;
    }
    const int64_t *src = s->stage_ids;
    const float *wsrc = s->stage_w;
    const int weighted = ctr_schema_weighted(&s->schema);
    for (int32_t b = 0; b < n; b++) /* bags are short (one-hot: 0 or 1 id): a loop, not memcpy */
        for (int32_t f = 0; f < S; f++) {
            int32_t len = s->stage_len[(int64_t)b * S + f];
            int64_t *dst = s->ids + off[f];
            for (int32_t j = 0; j < len; j++)
                dst[j] = src[j];
            if (weighted) {
                float *wd = s->weights + off[f];
                for (int32_t j = 0; j < len; j++)
                    wd[j] = wsrc[j];
                wsrc += len;
            }
            off[f] += len;
            src += len;
        }
    s->num_ids = nids;
    return 0;
}

const ctr_schema *ctr_source_schema(const ctr_source *s)
{
    return s ? &s->schema : NULL;
}

int64_t ctr_source_next(ctr_source *s, int32_t max_samples, ctr_batch *out, char *err, size_t errlen)
{
    if (!s || !out)
        return ctr_fail(err, errlen, "ctr_source_next: %s is NULL", s ? "out" : "source");
    if (s->failed)
        return ctr_fail(err, errlen, "%s", s->errmsg);
    if (max_samples < 1)
        return ctr_fail(err, errlen, "ctr_source_next: max_samples = %d, must be >= 1", (int)max_samples);
    s->batch_size = 0;
    s->num_ids = 0;
    int64_t n = s->ops->next(s, max_samples, s->errmsg, sizeof s->errmsg);
    if (n < 0) {
        s->failed = 1;
        return ctr_fail(err, errlen, "%s", s->errmsg);
    }
    memset(out, 0, sizeof *out);
    out->batch_size = (int32_t)n;
    out->num_dense = s->schema.num_dense;
    out->num_sparse = s->schema.num_sparse;
    out->label = s->label;
    out->dense = s->dense;
    out->sparse.batch_size = (int32_t)n;
    out->sparse.num_features = s->schema.num_sparse;
    out->sparse.lengths = s->lengths;
    out->sparse.ids = s->ids;
    out->sparse.weights = ctr_schema_weighted(&s->schema) ? s->weights : NULL;
    out->sparse.num_ids = s->num_ids;
    out->first_sample = s->batch_first;
    s->stats.samples += n;
    return n;
}

void ctr_source_rewind(ctr_source *s)
{
    if (!s || s->failed)
        return;
    s->epochs++; /* first: a shuffled source orders the new epoch by it */
    s->ops->rewind(s);
}

int ctr_source_tell(const ctr_source *s, ctr_position *out)
{
    if (!s || !out)
        return EMBER_EINVAL;
    memset(out, 0, sizeof *out);
    s->ops->tell(s, out);
    out->epochs = s->epochs;
    return 0;
}

int ctr_source_shuffle(ctr_source *s, uint64_t seed, char *err, size_t errlen)
{
    if (!s)
        return ctr_fail(err, errlen, "ctr_source_shuffle: source is NULL");
    if (!s->ops->shuffle)
        return ctr_fail(err, errlen, "this source cannot be shuffled: shuffling takes a binary or a plain text file");
    return s->ops->shuffle(s, seed, err, errlen);
}

int ctr_source_seek(ctr_source *s, const ctr_position *pos, char *err, size_t errlen)
{
    if (!s || !pos)
        return ctr_fail(err, errlen, "ctr_source_seek: %s is NULL", s ? "pos" : "source");
    if (s->failed)
        return ctr_fail(err, errlen, "%s", s->errmsg);
    if (pos->epochs < 0)
        return ctr_fail(err, errlen, "ctr_source_seek: epochs %lld < 0", (long long)pos->epochs);
    s->epochs = pos->epochs; /* first: a shuffled source orders that epoch by it */
    if (s->ops->seek(s, pos->next, s->errmsg, sizeof s->errmsg)) {
        s->failed = 1;
        return ctr_fail(err, errlen, "%s", s->errmsg);
    }
    return 0;
}

void ctr_source_stats(const ctr_source *s, ctr_stats *out)
{
    if (!out)
        return;
    if (!s) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = s->stats;
}

const float *ctr_source_teacher_prob(const ctr_source *s)
{
    return s ? s->teacher_prob : NULL;
}

void ctr_source_destroy(ctr_source *s)
{
    if (!s)
        return;
    if (s->ops && s->ops->destroy)
        s->ops->destroy(s);
    free(s->label);
    free(s->dense);
    free(s->lengths);
    free(s->ids);
    free(s->stage_len);
    free(s->stage_ids);
    free(s->weights);
    free(s->stage_w);
    free(s->line_no);
    free(s);
}

const int64_t *ctr_source_lines(const ctr_source *s)
{
    return s->line_no;
}

void ctr_batch_empty(const ctr_schema *schema, ctr_batch *out)
{
    static const int32_t no_lengths[CTR_MAX_FEATURES];
    static const int64_t no_id;
    static const float no_weight;
    memset(out, 0, sizeof *out);
    out->num_dense = schema->num_dense;
    out->num_sparse = schema->num_sparse;
    out->sparse.num_features = schema->num_sparse;
    out->sparse.lengths = no_lengths;
    out->sparse.ids = &no_id;
    out->sparse.weights = ctr_schema_weighted(schema) ? &no_weight : NULL; /* as the other ranks' batches */
}
