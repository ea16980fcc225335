/*
 * routing.c: host preprocessing of one batch (as SparseCore's host
 * preprocessing): validation, then jagged bags -> COO entries per physical
 * table, in sample-major order (routing.h).
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

#include "core/reserve.h"
#include "core/status.h"
#include "prep/routing.h"

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

/* First i in [lo, hi) with ids[i] outside [0, rows), or -1; the same answer
 * for any thread count (a min reduction over chunks). */
static int64_t first_out_of_range(const int64_t *ids, int64_t lo, int64_t hi, uint64_t rows, int threads)
{
    int64_t first = INT64_MAX;
    if (hi - lo < 65536)
        threads = 1;
#pragma omp parallel for schedule(static) reduction(min : first) num_threads(threads)
    for (int64_t i = lo; i < hi; i++)
        if ((uint64_t)ids[i] >= rows && i < first)
            first = i;
    return first == INT64_MAX ? -1 : first;
}

int ember_route_validate(const ember_prep *P, const ember_batch *b, ember_batch_shape *bs)
{
    if (!b)
        return ember_fail_into(P->errmsg, EMBER_EINVAL, "batch is NULL");
    int32_t F = P->num_features, B = b->batch_size;
    if (b->num_features != F)
        return ember_fail_into(P->errmsg, EMBER_EINPUT, "batch has %d features, the collection %d", b->num_features, F);
    if (B < 0)
        return ember_fail_into(P->errmsg, EMBER_EINPUT, "batch_size %d is negative", B);
    if (b->num_ids < 0)
        return ember_fail_into(P->errmsg, EMBER_EINPUT, "num_ids %lld is negative", (long long)b->num_ids);
    if ((B > 0 && !b->lengths) || (b->num_ids > 0 && !b->ids))
        return ember_fail_into(P->errmsg, EMBER_EINPUT, "batch lengths or ids is NULL");
    if (ember_reserve((void **)&bs->bag_off, &bs->bag_off_cap, (int64_t)F * (B + 1), sizeof(int64_t)))
        return ember_fail_into(P->errmsg, EMBER_ENOMEM, "out of memory for %d x %d bags", F, B);
    int64_t off = 0;
    for (int32_t f = 0; f < F; f++) {
        int64_t *bo = bs->bag_off + (int64_t)f * (B + 1);
        for (int32_t s = 0; s < B; s++) {
            int32_t len = b->lengths[(int64_t)f * B + s];
            if (len < 0)
                return ember_fail_into(P->errmsg, EMBER_EINPUT, "feature '%s' sample %d: negative length %d",
                                  P->features[f].name, s, len);
            bo[s] = off;
            off += len;
        }
        bo[B] = off;
    }
    if (off != b->num_ids)
        return ember_fail_into(P->errmsg, EMBER_EINPUT, "lengths sum to %lld but num_ids is %lld", (long long)off,
                          (long long)b->num_ids);
    for (int32_t f = 0; f < F; f++) {
        const int64_t *bo = bs->bag_off + (int64_t)f * (B + 1);
        const ember_lfeature *fe = &P->features[f];
        int64_t rows = P->tables[fe->table].cfg.rows;
        int64_t bad = -1;
        if (P->bounds == EMBER_BOUNDS_ERROR && P->tables[fe->table].cfg.kind == EMBER_TABLE_FIXED) {
            bad = first_out_of_range(b->ids, bo[0], bo[B], (uint64_t)rows, P->threads);
            if (bad >= 0)
                return ember_fail_into(P->errmsg, EMBER_EINPUT,
                                  "feature '%s' sample %d: id %lld outside [0, %lld) of table '%s'",
                                  fe->name, sample_of(bo, B, bad), (long long)b->ids[bad],
                                  (long long)rows, P->tables[fe->table].cfg.name);
        }
        if (b->weights) {
            for (int64_t i = bo[0]; i < bo[B]; i++)
                if (!isfinite(b->weights[i])) {
                    bad = i;
                    break;
                }
            if (bad >= 0)
                return ember_fail_into(P->errmsg, EMBER_EINPUT, "feature '%s' sample %d: weight %g of id %lld is not finite",
                                  fe->name, sample_of(bo, B, bad), b->weights[bad], (long long)b->ids[bad]);
        }
    }
    return EMBER_OK;
}

/* First entry in [lo, hi) with this row, or -1.  A linear scan, for bags of
 * up to LONG_BAG ids; longer bags go through resolve_long_bag. */
static int64_t find_row(const uint32_t *row, int64_t lo, int64_t hi, uint32_t x)
{
    for (int64_t e = lo; e < hi; e++)
        if (row[e] == x)
            return e;
    return -1;
}

#define LONG_BAG 64

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Repeated ids of one long bag, entries [e0, *e), in O(n log n): sorts
 * (row, position) pairs in keys_tmp (free during routing; each chunk only
 * touches its own entry range), then sets every repeat's leader to the first
 * occurrence, or with merge adds its weight and multiplicity to the first
 * occurrence, in position order (the linear scan's order), and compacts. */
static void resolve_long_bag(ember_route *r, int64_t e0, int64_t *e, int merge, int units)
{
    int64_t n = *e - e0;
    uint64_t *tmp = r->keys_tmp + e0;
    for (int64_t i = 0; i < n; i++)
        tmp[i] = (uint64_t)r->row[e0 + i] << 32 | (uint64_t)i;
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_u64);
    for (int64_t j = 0, first = 0; j < n; j++) {
        if (j > 0 && tmp[j] >> 32 != tmp[j - 1] >> 32)
            first = j;
        int64_t lead = e0 + (int64_t)(uint32_t)tmp[first], at = e0 + (int64_t)(uint32_t)tmp[j];
        if (at == lead)
            continue;
        if (merge) {
            r->weight[lead] += r->weight[at];
            r->mult[lead] += r->mult[at];
            r->row[at] = EMBER_ROW_DROPPED; /* removed below */
        } else if (units) {
            r->leader[at] = (int32_t)lead;
        }
    }
    if (!merge)
        return;
    int64_t k = e0;
    for (int64_t i = e0; i < *e; i++) {
        if (r->row[i] == EMBER_ROW_DROPPED)
            continue;
        r->row[k] = r->row[i];
        r->weight[k] = r->weight[i];
        r->mult[k] = r->mult[i];
        if (units)
            r->leader[k] = (int32_t)k;
        k++;
    }
    *e = k;
}

/* The bag's divisor: sum(w) for mean, sqrt(sum(w^2)) for sqrtn, 1 otherwise;
 * 0 means "output zeros".  Kernels divide by it rather than multiply by its
 * reciprocal, which overflows float for tiny weights (1/1e-39). */
static float combiner_divisor(ember_combiner cb, double sumw, double sumw2)
{
    if (cb == EMBER_COMBINER_MEAN)
        return (float)sumw;
    if (cb == EMBER_COMBINER_SQRTN)
        return (float)sqrt(sumw2);
    return 1.0f;
}

/* Builds the entries and segments of samples [s0, s1) of physical table p,
 * entries from e (returned: one past the last) and segments from g.  Counts
 * ids skipped by bounds=drop into *dropped. */
static int64_t build_samples(const ember_prep *P, const ember_batch_shape *bs, int32_t p, const ember_batch *b,
                             int units, int32_t s0, int32_t s1, int64_t e, int64_t g, int64_t *dropped)
{
    const ember_prep_table *pt = &P->ptables[p];
    ember_route *r = pt->route;
    int32_t B = b->batch_size;
    int dedup = P->dedup, weighted = r->weighted;
    const float *win = b->weights;
    for (int32_t s = s0; s < s1; s++) {
        r->sample_seg[s] = g;
        for (int32_t i = 0; i < pt->num_features; i++) {
            int32_t f = pt->features[i];
            const ember_lfeature *fe = &P->features[f];
            const int64_t *bo = bs->bag_off + (int64_t)f * (B + 1);
            int64_t lo = bo[s], hi = bo[s + 1];
            uint64_t rows = (uint64_t)P->tables[fe->table].cfg.rows;
            uint32_t base = (uint32_t)fe->offset;
            if (fe->combiner == EMBER_COMBINER_NONE) {
                int64_t bag0 = e; /* one segment per id, but units are per bag */
                int long_bag = hi - lo > LONG_BAG;
                for (int64_t k = lo; k < hi; k++) {
                    r->seg_start[g] = e;
                    r->seg_out[g] = -1 - (bs->seq_off[f] + (k - bo[0]) * fe->dim);
                    r->seg_div[g] = 1.0f;
                    r->seg_feature[g] = f;
                    r->seg_sample[g] = s;
                    g++;
                    if ((uint64_t)b->ids[k] >= rows && b->ids[k] != EMBER_ID_UNSEEN) {
                        (*dropped)++;
                        continue;
                    }
                    r->row[e] = b->ids[k] == EMBER_ID_UNSEEN ? EMBER_ROW_DROPPED : base + (uint32_t)b->ids[k];
                    if (weighted)
                        r->weight[e] = win ? win[k] : 1.0f;
                    if (dedup)
                        r->mult[e] = 1;
                    if (units) {
                        int64_t same = long_bag ? -1 : find_row(r->row, bag0, e, r->row[e]);
                        r->leader[e] = (int32_t)(same >= 0 ? same : e);
                    }
                    e++;
                }
                if (units && long_bag)
                    resolve_long_bag(r, bag0, &e, 0, units);
                continue;
            }
            int64_t e0 = e;
            int long_bag = hi - lo > LONG_BAG;
            double sumw = 0, sumw2 = 0;
            if (!win && !dedup && !units) {
                /* the common bag: no weights, nothing merged or counted; the
                 * sums are the count of kept entries, exactly as adding 1s */
                const int64_t *ids = b->ids;
                for (int64_t k = lo; k < hi; k++) {
                    uint64_t id = (uint64_t)ids[k];
                    if (id >= rows && ids[k] != EMBER_ID_UNSEEN) {
                        (*dropped)++;
                        continue;
                    }
                    r->row[e++] = id < rows ? base + (uint32_t)id : EMBER_ROW_DROPPED;
                }
                sumw = sumw2 = (double)(e - e0);
            } else {
                for (int64_t k = lo; k < hi; k++) {
                    if ((uint64_t)b->ids[k] >= rows && b->ids[k] != EMBER_ID_UNSEEN) {
                        (*dropped)++;
                        continue;
                    }
                    /* a dynamic key with no row: a dropped entry (zeros, in the divisor) */
                    uint32_t row = b->ids[k] == EMBER_ID_UNSEEN ? EMBER_ROW_DROPPED : base + (uint32_t)b->ids[k];
                    float w = win ? win[k] : 1.0f;
                    sumw += w;
                    sumw2 += (double)w * w;
                    int64_t same = (dedup || units) && !long_bag ? find_row(r->row, e0, e, row) : -1;
                    if (dedup && same >= 0) {
                        r->weight[same] += w;
                        r->mult[same]++;
                        continue;
                    }
                    r->row[e] = row;
                    if (weighted)
                        r->weight[e] = w;
                    if (dedup)
                        r->mult[e] = 1;
                    if (units)
                        r->leader[e] = (int32_t)(same >= 0 ? same : e);
                    e++;
                }
            }
            if ((dedup || units) && long_bag)
                resolve_long_bag(r, e0, &e, dedup, units);
            r->seg_start[g] = e0;
            r->seg_out[g] = (int64_t)s * P->pooled_width + fe->out_col;
            r->seg_div[g] = combiner_divisor(fe->combiner, sumw, sumw2);
            r->seg_feature[g] = f;
            r->seg_sample[g] = s;
            g++;
        }
    }
    return e;
}

/* Entries (an upper bound: before drops and dedup) and segments of samples
 * [s0, s1) of physical table p. */
static void count_samples(const ember_prep *P, const ember_batch_shape *bs, const ember_prep_table *pt, int32_t B,
                          int32_t s0, int32_t s1, int64_t *n, int64_t *nseg)
{
    *n = *nseg = 0;
    for (int32_t i = 0; i < pt->num_features; i++) {
        int32_t f = pt->features[i];
        const int64_t *bo = bs->bag_off + (int64_t)f * (B + 1);
        *n += bo[s1] - bo[s0];
        *nseg += P->features[f].combiner == EMBER_COMBINER_NONE ? bo[s1] - bo[s0] : s1 - s0;
    }
}

/* Moves chunk entries [from, from + len) down to `to` and fixes the
 * entry indices its segments and leaders hold. */
static void compact_chunk(ember_route *r, int64_t from, int64_t to, int64_t len, int64_t g0, int64_t g1,
                          int units, int dedup)
{
    int64_t shift = from - to;
    if (shift == 0)
        return;
    memmove(r->row + to, r->row + from, sizeof(uint32_t) * (size_t)len);
    if (r->weighted)
        memmove(r->weight + to, r->weight + from, sizeof(float) * (size_t)len);
    if (dedup)
        memmove(r->mult + to, r->mult + from, sizeof(int32_t) * (size_t)len);
    if (units) {
        memmove(r->leader + to, r->leader + from, sizeof(int32_t) * (size_t)len);
        for (int64_t e = to; e < to + len; e++)
            r->leader[e] -= (int32_t)shift;
    }
    for (int64_t g = g0; g < g1; g++)
        r->seg_start[g] -= shift;
}

#define ROUTE_MAX_CHUNKS 64

/* Builds physical table p's route: samples split statically over threads,
 * each writing from its upper-bound entry offset; chunks are compacted only
 * when drops or dedup left gaps.  Returns the ids skipped by bounds=drop. */
static int64_t build_ptable(const ember_prep *P, const ember_batch_shape *bs, int32_t p, const ember_batch *b,
                            int units)
{
    const ember_prep_table *pt = &P->ptables[p];
    ember_route *r = pt->route;
    int32_t B = b->batch_size;
    r->weighted = b->weights != NULL || P->dedup;
    r->dedup = P->dedup;
    int64_t total, total_seg;
    count_samples(P, bs, pt, B, 0, B, &total, &total_seg);
    int chunks = total >= 32768 ? P->threads : 1;
    if (chunks > ROUTE_MAX_CHUNKS)
        chunks = ROUTE_MAX_CHUNKS;
    if (chunks > B)
        chunks = B > 0 ? B : 1;
    int64_t e_at[ROUTE_MAX_CHUNKS + 1], g_at[ROUTE_MAX_CHUNKS + 1], e_end[ROUTE_MAX_CHUNKS], drop[ROUTE_MAX_CHUNKS];
    e_at[0] = g_at[0] = 0;
    for (int k = 0; k < chunks; k++) {
        int64_t n, ns;
        count_samples(P, bs, pt, B, (int32_t)((int64_t)B * k / chunks), (int32_t)((int64_t)B * (k + 1) / chunks),
                      &n, &ns);
        e_at[k + 1] = e_at[k] + n;
        g_at[k + 1] = g_at[k] + ns;
        drop[k] = 0;
    }
#pragma omp parallel for schedule(static, 1) num_threads(chunks)
    for (int k = 0; k < chunks; k++)
        e_end[k] = build_samples(P, bs, p, b, units, (int32_t)((int64_t)B * k / chunks),
                                 (int32_t)((int64_t)B * (k + 1) / chunks), e_at[k], g_at[k], &drop[k]);
    int64_t e = 0, dropped = 0;
    for (int k = 0; k < chunks; k++) {
        compact_chunk(r, e_at[k], e, e_end[k] - e_at[k], g_at[k], g_at[k + 1], units, r->dedup);
        e += e_end[k] - e_at[k];
        dropped += drop[k];
    }
    for (int k = 0; k < EMBER_ROUTE_PAD; k++)
        r->row[e + k] = 0;
    r->sample_seg[B] = total_seg;
    r->seg_start[total_seg] = e;
    r->n = e;
    r->nseg = total_seg;
    r->nkeys = 0;
    r->sorted_all = 0;
    return dropped;
}

int ember_route_build(const ember_prep *P, const ember_batch *b, ember_batch_shape *bs, int units,
                      int64_t *dropped_bounds)
{
    int32_t B = b->batch_size, F = P->num_features;
    int64_t seq = 0;
    for (int32_t f = 0; f < F; f++) {
        bs->seq_off[f] = seq;
        if (P->features[f].combiner == EMBER_COMBINER_NONE) {
            const int64_t *bo = bs->bag_off + (int64_t)f * (B + 1);
            seq += (bo[B] - bo[0]) * P->features[f].dim;
        }
    }
    bs->seq_floats = seq;
    bs->batch_size = B;
    int64_t dropped = 0;
    for (int32_t p = 0; p < P->num_ptables; p++) {
        const ember_prep_table *pt = &P->ptables[p];
        int64_t n = 0, nseg = 0;
        for (int32_t i = 0; i < pt->num_features; i++) {
            int32_t f = pt->features[i];
            const int64_t *bo = bs->bag_off + (int64_t)f * (B + 1);
            n += bo[B] - bo[0];
            nseg += P->features[f].combiner == EMBER_COMBINER_NONE ? bo[B] - bo[0] : B;
        }
        if (n >= INT32_MAX || nseg >= INT32_MAX)
            return ember_fail_into(P->errmsg, EMBER_EINPUT, "batch routes %lld ids to one physical table (max "
                                   "2^31-1)", (long long)n);
        if (ember_route_reserve(pt->route, n, nseg, B) != EMBER_OK)
            return ember_fail_into(P->errmsg, EMBER_ENOMEM, "out of memory routing %lld ids", (long long)n);
        dropped += build_ptable(P, bs, p, b, units);
    }
    *dropped_bounds = dropped;
    return EMBER_OK;
}
