/*
 * route.c: host preprocessing of one batch (seed 004 §2-3): validation, then
 * jagged bags -> COO entries per physical table, in sample-major order.
 *
 * Validation reads everything before anything is written, so a bad batch
 * leaves no trace; its message names the feature, the sample and the id.
 * The build writes, per physical table, one entry per valid id (or per
 * distinct id of a bag with dedup) and one segment per output row.  Mean and
 * sqrtn scales are taken over the bag's valid ids before dedup, so dedup
 * only changes float rounding, never the result.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/collection.h"
#include "prep/route.h"

/* Sample of position i in feature f's id range (binary search of bag_off). */
static int32_t sample_of(const int64_t *off, int32_t B, int64_t i)
{
    int32_t lo = 0, hi = B; /* off[lo] <= i < off[hi] */
    while (hi - lo > 1) {
        int32_t mid = lo + (hi - lo) / 2;
        if (off[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

int ember_route_validate(ember_collection *c, const ember_batch *b)
{
    if (!b)
        return ember_fail(c, EMBER_EINVAL, "batch is NULL");
    int32_t F = c->cfg.num_features, B = b->batch_size;
    if (b->num_features != F)
        return ember_fail(c, EMBER_EINPUT, "batch has %d features, the collection %d", b->num_features, F);
    if (B < 0)
        return ember_fail(c, EMBER_EINPUT, "batch_size %d is negative", B);
    if (b->num_ids < 0)
        return ember_fail(c, EMBER_EINPUT, "num_ids %lld is negative", (long long)b->num_ids);
    if ((B > 0 && !b->lengths) || (b->num_ids > 0 && !b->ids))
        return ember_fail(c, EMBER_EINPUT, "batch lengths or ids is NULL");
    if (ember_reserve((void **)&c->bag_off, &c->bag_off_cap, (int64_t)F * (B + 1), sizeof(int64_t)))
        return ember_fail(c, EMBER_ENOMEM, "out of memory for %d x %d bags", F, B);
    int64_t off = 0;
    for (int32_t f = 0; f < F; f++) {
        int64_t *bo = c->bag_off + (int64_t)f * (B + 1);
        for (int32_t s = 0; s < B; s++) {
            int32_t len = b->lengths[(int64_t)f * B + s];
            if (len < 0)
                return ember_fail(c, EMBER_EINPUT, "feature '%s' sample %d: negative length %d",
                                  c->features[f].name, s, len);
            bo[s] = off;
            off += len;
        }
        bo[B] = off;
    }
    if (off != b->num_ids)
        return ember_fail(c, EMBER_EINPUT, "lengths sum to %lld but num_ids is %lld", (long long)off,
                          (long long)b->num_ids);
    for (int32_t f = 0; f < F; f++) {
        const int64_t *bo = c->bag_off + (int64_t)f * (B + 1);
        const ember_lfeature *fe = &c->features[f];
        int64_t rows = c->tables[fe->table].cfg.rows;
        int64_t bad = -1;
        if (c->cfg.bounds == EMBER_BOUNDS_ERROR) {
            for (int64_t i = bo[0]; i < bo[B]; i++)
                if ((uint64_t)b->ids[i] >= (uint64_t)rows) {
                    bad = i;
                    break;
                }
            if (bad >= 0)
                return ember_fail(c, EMBER_EINPUT,
                                  "feature '%s' sample %d: id %lld outside [0, %lld) of table '%s'",
                                  fe->name, sample_of(bo, B, bad), (long long)b->ids[bad],
                                  (long long)rows, c->tables[fe->table].cfg.name);
        }
        if (b->weights) {
            for (int64_t i = bo[0]; i < bo[B]; i++)
                if (!isfinite(b->weights[i])) {
                    bad = i;
                    break;
                }
            if (bad >= 0)
                return ember_fail(c, EMBER_EINPUT, "feature '%s' sample %d: weight %g of id %lld is not finite",
                                  fe->name, sample_of(bo, B, bad), b->weights[bad], (long long)b->ids[bad]);
        }
    }
    return EMBER_OK;
}

static int reserve_route(ember_route *r, int64_t n, int64_t nseg, int32_t B, int32_t nf)
{
    if (nf + 1 > r->cap_f) {
        void *p = realloc(r->feat_order, sizeof(int64_t) * ((size_t)nf + 1));
        if (!p)
            return EMBER_ENOMEM;
        r->feat_order = p;
        r->cap_f = nf + 1;
    }
    if (n + 1 > r->cap_n) {
        int64_t cap = n + 1 > r->cap_n * 3 / 2 ? n + 1 : r->cap_n * 3 / 2;
        void *a = realloc(r->row, sizeof(uint32_t) * cap), *w = realloc(r->weight, sizeof(float) * cap);
        if (a) r->row = a;
        if (w) r->weight = w;
        void *so = realloc(r->seg_of, sizeof(int32_t) * cap), *ld = realloc(r->leader, sizeof(int32_t) * cap);
        if (so) r->seg_of = so;
        if (ld) r->leader = ld;
        void *k = realloc(r->keys, sizeof(uint64_t) * cap), *kt = realloc(r->keys_tmp, sizeof(uint64_t) * cap);
        if (k) r->keys = k;
        if (kt) r->keys_tmp = kt;
        void *sof = realloc(r->src_off, sizeof(int64_t) * cap), *ssc = realloc(r->src_scale, sizeof(float) * cap);
        if (sof) r->src_off = sof;
        if (ssc) r->src_scale = ssc;
        void *mu = realloc(r->mult, sizeof(int32_t) * cap);
        if (mu) r->mult = mu;
        if (!a || !w || !so || !ld || !k || !kt || !sof || !ssc || !mu)
            return EMBER_ENOMEM;
        r->cap_n = cap;
    }
    if (nseg + 1 > r->cap_seg) {
        int64_t cap = nseg + 1 > r->cap_seg * 3 / 2 ? nseg + 1 : r->cap_seg * 3 / 2;
        void *st = realloc(r->seg_start, sizeof(int64_t) * cap), *o = realloc(r->seg_out, sizeof(int64_t) * cap);
        if (st) r->seg_start = st;
        if (o) r->seg_out = o;
        void *sc = realloc(r->seg_scale, sizeof(float) * cap), *sf = realloc(r->seg_feature, sizeof(int32_t) * cap);
        if (sc) r->seg_scale = sc;
        if (sf) r->seg_feature = sf;
        void *ss = realloc(r->seg_sample, sizeof(int32_t) * cap);
        if (ss) r->seg_sample = ss;
        void *so = realloc(r->seg_order, sizeof(int32_t) * cap);
        if (so) r->seg_order = so;
        if (!st || !o || !sc || !sf || !ss || !so)
            return EMBER_ENOMEM;
        r->cap_seg = cap;
    }
    if ((int64_t)B + 1 > r->cap_b) {
        void *p = realloc(r->sample_seg, sizeof(int64_t) * ((size_t)B + 1));
        if (!p)
            return EMBER_ENOMEM;
        r->sample_seg = p;
        r->cap_b = (int64_t)B + 1;
    }
    return EMBER_OK;
}

void ember_route_free(ember_route *r)
{
    free(r->row);
    free(r->weight);
    free(r->seg_of);
    free(r->leader);
    free(r->seg_start);
    free(r->seg_out);
    free(r->seg_scale);
    free(r->seg_feature);
    free(r->seg_sample);
    free(r->sample_seg);
    free(r->seg_order);
    free(r->feat_order);
    free(r->keys);
    free(r->keys_tmp);
    free(r->src_off);
    free(r->mult);
    free(r->src_scale);
    memset(r, 0, sizeof *r);
}

/* First entry in [lo, hi) with this row, or -1. Bags are short; a linear
 * scan beats hashing for them. */
static int64_t find_row(const uint32_t *row, int64_t lo, int64_t hi, uint32_t x)
{
    for (int64_t e = lo; e < hi; e++)
        if (row[e] == x)
            return e;
    return -1;
}

static float combiner_scale(ember_combiner cb, double sumw, double sumw2)
{
    if (cb == EMBER_COMBINER_MEAN)
        return sumw != 0 ? (float)(1.0 / sumw) : 0.0f;
    if (cb == EMBER_COMBINER_SQRTN)
        return sumw2 > 0 ? (float)(1.0 / sqrt(sumw2)) : 0.0f;
    return 1.0f;
}

/* Builds physical table p's route; returns the ids skipped by bounds=drop. */
static int64_t build_ptable(ember_collection *c, int32_t p, const ember_batch *b, int units)
{
    ember_ptable *pt = &c->ptables[p];
    ember_route *r = &pt->route;
    int32_t B = b->batch_size;
    int dedup = c->cfg.dedup;
    int weighted = b->weights != NULL || dedup;
    const float *win = b->weights;
    int64_t e = 0, g = 0, dropped = 0;
    int64_t *fo = r->feat_order;
    fo[0] = 0;
    for (int32_t i = 0; i < pt->num_features; i++) {
        int32_t f = pt->features[i];
        const int64_t *bo = c->bag_off + (int64_t)f * (B + 1);
        fo[i + 1] = fo[i] + (c->features[f].combiner == EMBER_COMBINER_NONE ? bo[B] - bo[0] : B);
    }
    for (int32_t s = 0; s < B; s++) {
        r->sample_seg[s] = g;
        for (int32_t i = 0; i < pt->num_features; i++) {
            int32_t f = pt->features[i];
            const ember_lfeature *fe = &c->features[f];
            const int64_t *bo = c->bag_off + (int64_t)f * (B + 1);
            int64_t lo = bo[s], hi = bo[s + 1];
            uint64_t rows = (uint64_t)c->tables[fe->table].cfg.rows;
            uint32_t base = (uint32_t)fe->offset;
            if (fe->combiner == EMBER_COMBINER_NONE) {
                int64_t bag0 = e; /* one segment per id, but units are per bag */
                for (int64_t k = lo; k < hi; k++) {
                    r->seg_order[fo[i] + (k - bo[0])] = (int32_t)g;
                    r->seg_start[g] = e;
                    r->seg_out[g] = -1 - (c->seq_off[f] + (k - bo[0]) * fe->dim);
                    r->seg_scale[g] = 1.0f;
                    r->seg_feature[g] = f;
                    r->seg_sample[g] = s;
                    if ((uint64_t)b->ids[k] < rows) {
                        r->row[e] = base + (uint32_t)b->ids[k];
                        if (weighted)
                            r->weight[e] = win ? win[k] : 1.0f;
                        r->seg_of[e] = (int32_t)g;
                        int64_t same = units ? find_row(r->row, bag0, e, r->row[e]) : -1;
                        r->leader[e] = (int32_t)(same >= 0 ? same : e);
                        r->mult[e] = 1;
                        e++;
                    } else {
                        dropped++;
                    }
                    g++;
                }
                continue;
            }
            int64_t e0 = e;
            double sumw = 0, sumw2 = 0;
            for (int64_t k = lo; k < hi; k++) {
                if ((uint64_t)b->ids[k] >= rows) {
                    dropped++;
                    continue;
                }
                uint32_t row = base + (uint32_t)b->ids[k];
                float w = win ? win[k] : 1.0f;
                sumw += w;
                sumw2 += (double)w * w;
                int64_t same = (dedup || units) ? find_row(r->row, e0, e, row) : -1;
                if (dedup && same >= 0) {
                    r->weight[same] += w;
                    r->mult[same]++;
                    continue;
                }
                r->row[e] = row;
                if (weighted)
                    r->weight[e] = w;
                r->seg_of[e] = (int32_t)g;
                r->leader[e] = (int32_t)(same >= 0 ? same : e);
                r->mult[e] = 1;
                e++;
            }
            r->seg_order[fo[i] + s] = (int32_t)g;
            r->seg_start[g] = e0;
            r->seg_out[g] = (int64_t)s * c->pooled_width + fe->out_col;
            r->seg_scale[g] = combiner_scale(fe->combiner, sumw, sumw2);
            r->seg_feature[g] = f;
            r->seg_sample[g] = s;
            g++;
        }
    }
    r->sample_seg[B] = g;
    r->seg_start[g] = e;
    r->n = e;
    r->nseg = g;
    r->nkeys = 0;
    r->sorted_all = 0;
    r->weighted = weighted;
    return dropped;
}

int ember_route_build(ember_collection *c, const ember_batch *b, int units, int64_t *dropped_bounds)
{
    int32_t B = b->batch_size, F = c->cfg.num_features;
    int64_t seq = 0;
    for (int32_t f = 0; f < F; f++) {
        c->seq_off[f] = seq;
        if (c->features[f].combiner == EMBER_COMBINER_NONE) {
            const int64_t *bo = c->bag_off + (int64_t)f * (B + 1);
            seq += (bo[B] - bo[0]) * c->features[f].dim;
        }
    }
    c->seq_floats = seq;
    c->batch_size = B;
    int64_t dropped = 0;
    for (int32_t p = 0; p < c->num_ptables; p++) {
        ember_ptable *pt = &c->ptables[p];
        int64_t n = 0, nseg = 0;
        for (int32_t i = 0; i < pt->num_features; i++) {
            int32_t f = pt->features[i];
            const int64_t *bo = c->bag_off + (int64_t)f * (B + 1);
            n += bo[B] - bo[0];
            nseg += c->features[f].combiner == EMBER_COMBINER_NONE ? bo[B] - bo[0] : B;
        }
        if (n >= INT32_MAX || nseg >= INT32_MAX)
            return ember_fail(c, EMBER_EINPUT, "batch routes %lld ids to one physical table (max 2^31-1)",
                              (long long)n);
        if (reserve_route(&pt->route, n, nseg, B, pt->num_features) != EMBER_OK)
            return ember_fail(c, EMBER_ENOMEM, "out of memory routing %lld ids", (long long)n);
        dropped += build_ptable(c, p, b, units);
    }
    *dropped_bounds = dropped;
    return EMBER_OK;
}
