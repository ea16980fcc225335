/*
 * dyn_util.h: the reference for dynamic tables (tests/test_dynamic.c,
 * tests/mpi_dynamic.c).
 *
 * A dynamic table in a world of W is checked against two naive parts: the
 * key rules of each owner rank (ref_dyn, src/ref/ref_dyn.c, fed with the
 * keys that owner receives, in the global batch order), and a FIXED table
 * of capacity * W + 1 rows in a collection of one rank, fed with the
 * translated ids (slot * W + owner; the last row, kept at zero, for keys
 * with no row) after writing each new key's row from the initializer
 * formula and zeroing its state.  So rows, state and outputs must be
 * bit-identical to the fixed path, which the other tests check against the
 * naive lookup and optimizer.
 */
#ifndef EMBER_TESTS_DYN_UTIL_H
#define EMBER_TESTS_DYN_UTIL_H

#include "core/rng.h"
#include "util.h"

typedef struct dyn_sim {
    int32_t W, table;          /* world size; index of the dynamic table  */
    int64_t capacity, zero_row;
    ref_dyn *owners;           /* [W]                                      */
    test_config *rcfg;         /* the reference collection's config       */
    ember_collection *R;       /* the FIXED twin, world of one            */
    ember_table_config tcfg;   /* the dynamic table's config (init)       */
    uint64_t seed;
    int32_t sf;                /* state floats per row                    */
} dyn_sim;

static inline uint32_t dyn_owner(int64_t key, int32_t W)
{
    return W == 1 ? 0 : (uint32_t)(ember_mix64((uint64_t)key) % (uint64_t)W);
}

/* The sketch width ember gives the table (docs/dynamic.md): sketch_bytes,
 * or 8 bytes per row of capacity but at least 64 KiB, rounded down to
 * 4 x 2 x a power of two. */
static inline int64_t dyn_sketch_width(const ember_table_config *t, int64_t capacity)
{
    if (t->admit_after <= 1)
        return 0;
    int64_t bytes = t->sketch_bytes ? t->sketch_bytes : 8 * capacity, w = 1;
    if (!t->sketch_bytes && bytes < 65536)
        bytes = 65536;
    if (bytes < 64)
        bytes = 64;
    while (8 * (w * 2) <= bytes)
        w *= 2;
    return w;
}

/* cfg: the dynamic collection's config; table: its dynamic table. */
static inline void dyn_sim_init(dyn_sim *s, const test_config *cfg, int32_t table, int32_t W)
{
    memset(s, 0, sizeof *s);
    s->W = W;
    s->table = table;
    s->tcfg = cfg->tables[table];
    s->capacity = s->tcfg.capacity;
    s->seed = cfg->cfg.seed;
    s->sf = ember_state_floats(s->tcfg.optimizer.kind, s->tcfg.dim);
    s->owners = calloc((size_t)W, sizeof *s->owners);
    uint64_t key = ref_table_key(cfg->cfg.seed, s->tcfg.name);
    for (int32_t o = 0; o < W; o++)
        if (ref_dyn_init(&s->owners[o], s->capacity, s->tcfg.admit_after, s->tcfg.evict, s->tcfg.ttl_steps,
                         dyn_sketch_width(&s->tcfg, s->capacity), key))
            abort();
    s->rcfg = test_config_copy(cfg);
    ember_table_config *rt = &s->rcfg->tables[table];
    rt->kind = EMBER_TABLE_FIXED;
    rt->rows = s->capacity * W + 1;
    rt->capacity = rt->capacity_bytes = rt->sketch_bytes = 0;
    rt->admit_after = rt->ttl_steps = 0;
    rt->evict = EMBER_EVICT_LRU;
    rt->storage = EMBER_STORAGE_MEMORY;
    s->rcfg->cfg.world = NULL;
    s->rcfg->cfg.threads = 1;
    s->zero_row = s->capacity * W;
    if (ember_collection_create(&s->rcfg->cfg, &s->R) != EMBER_OK) {
        fprintf(stderr, "dyn_sim: %s\n", ember_errmsg(NULL));
        abort();
    }
}

static inline void dyn_sim_free(dyn_sim *s)
{
    for (int32_t o = 0; o < s->W; o++)
        ref_dyn_free(&s->owners[o]);
    free(s->owners);
    ember_collection_destroy(s->R);
    test_config_free(s->rcfg);
    memset(s, 0, sizeof *s);
}

/* A deep copy of an owner (to undo a step that failed on another owner). */
static inline void dyn_owner_copy(ref_dyn *dst, const ref_dyn *src)
{
    ref_dyn_init(dst, src->capacity, src->admit_after, src->evict, src->ttl, src->width, src->seed);
    memcpy(dst->resident, src->resident, (size_t)src->capacity);
    memcpy(dst->key, src->key, 8 * (size_t)src->capacity);
    memcpy(dst->last, src->last, 4 * (size_t)src->capacity);
    memcpy(dst->count, src->count, 4 * (size_t)src->capacity);
    memcpy(dst->sketch, src->sketch, 2 * (size_t)(4 * src->width));
    memcpy(dst->ev_keys, src->ev_keys, 8 * (size_t)src->ev_n);
    memcpy(dst->ev_counts, src->ev_counts, 4 * (size_t)src->ev_n);
    dst->ev_n = src->ev_n;
    dst->admitted = src->admitted;
    dst->evicted = src->evicted;
    dst->expired = src->expired;
    dst->not_admitted = src->not_admitted;
    dst->count_sum = src->count_sum;
}

/*
 * One training step of the global batch g, split over W ranks at start[]
 * (start[r] .. start[r+1] are rank r's samples): every owner resolves the
 * keys it receives (ranks in order, each rank's ids of the table's features
 * in its batch order), the twin's new rows are written, and rb becomes g
 * with the table's keys replaced by twin rows.  EMBER_ELIMIT: nothing
 * changed (rb untouched).
 */
static inline int dyn_sim_step(dyn_sim *s, const ember_collection_config *cfg, const ember_batch *g,
                               const int32_t *start, uint32_t step, test_batch *rb)
{
    int32_t W = s->W, B = g->batch_size, F = g->num_features;
    int64_t n = g->num_ids;
    int64_t *bag = malloc(sizeof(int64_t) * ((size_t)F * B + 1)); /* first id of bag (f, s) */
    for (int64_t i = 0, k = 0; i < (int64_t)F * B; i++) {
        bag[i] = k;
        k += g->lengths[i];
    }
    uint64_t *keys = malloc(8 * (size_t)n + 8);
    int64_t *pos = malloc(8 * (size_t)n + 8), *slots = malloc(8 * (size_t)n + 8);
    int64_t *rs = malloc(8 * (size_t)n + 8), *at = calloc((size_t)W + 1, 8);
    uint64_t *rk = malloc(8 * (size_t)n + 8);
    int64_t *trans = malloc(8 * (size_t)n + 8);
    ref_dyn *saved = calloc((size_t)W, sizeof *saved);
    for (int32_t o = 0; o < W; o++)
        dyn_owner_copy(&saved[o], &s->owners[o]);
    int st = EMBER_OK;
    int64_t nreset = 0;
    float *row = malloc(sizeof(float) * (size_t)(s->tcfg.dim + s->sf + 1));
    for (int32_t o = 0; o < W && st == EMBER_OK; o++) {
        int64_t m = 0;
        for (int32_t r = 0; r < W; r++)
            for (int32_t f = 0; f < F; f++) {
                if (cfg->features[f].table != s->table)
                    continue;
                for (int32_t smp = start[r]; smp < start[r + 1]; smp++)
                    for (int64_t k = bag[(int64_t)f * B + smp]; k < bag[(int64_t)f * B + smp] + g->lengths[(int64_t)f * B + smp]; k++)
                        if ((int32_t)dyn_owner(g->ids[k], W) == o) {
                            keys[m] = (uint64_t)g->ids[k];
                            pos[m++] = k;
                        }
            }
        int64_t nr = 0;
        st = ref_dyn_step(&s->owners[o], keys, m, step, slots, rs + nreset, rk + nreset, &nr);
        if (st != EMBER_OK)
            break;
        for (int64_t i = 0; i < m; i++)
            trans[pos[i]] = slots[i] >= 0 ? slots[i] * W + o : s->zero_row;
        for (int64_t i = nreset; i < nreset + nr; i++)
            rs[i] = rs[i] * W + o; /* twin row */
        nreset += nr;
    }
    for (int64_t i = 0; i < nreset && st == EMBER_OK; i++) { /* every owner succeeded: the new rows */
        ref_init_row(&s->tcfg, s->seed, (int64_t)rk[i], row);
        if (ember_table_write(s->R, s->table, rs[i], 1, row) != EMBER_OK)
            abort();
        memset(row, 0, sizeof(float) * (size_t)(s->sf + 1));
        if (s->sf && ember_table_write_state(s->R, s->table, rs[i], 1, row) != EMBER_OK)
            abort();
    }
    if (st != EMBER_OK) {
        for (int32_t o = 0; o < W; o++) {
            ref_dyn_free(&s->owners[o]);
            s->owners[o] = saved[o];
        }
    } else {
        for (int32_t o = 0; o < W; o++)
            ref_dyn_free(&saved[o]);
        test_batch_alloc(rb, B, F, n, g->weights != NULL);
        memcpy(rb->lengths, g->lengths, sizeof(int32_t) * (size_t)F * B);
        if (g->weights)
            memcpy(rb->weights, g->weights, sizeof(float) * (size_t)n);
        for (int32_t f = 0; f < F && B > 0; f++)
            for (int64_t k = bag[(int64_t)f * B]; k < (f + 1 < F ? bag[(int64_t)(f + 1) * B] : n); k++)
                rb->ids[k] = cfg->features[f].table == s->table ? trans[k] : g->ids[k];
        /* the zero row: zeros, zero state, every step */
        memset(row, 0, sizeof(float) * (size_t)(s->tcfg.dim + s->sf + 1));
        ember_table_write(s->R, s->table, s->zero_row, 1, row);
        if (s->sf)
            ember_table_write_state(s->R, s->table, s->zero_row, 1, row);
    }
    free(saved);
    free(row);
    free(bag);
    free(keys);
    free(pos);
    free(slots);
    free(rs);
    free(at);
    free(rk);
    free(trans);
    return st;
}

static int cmp_i64_(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/*
 * Checks collection A (this rank `rank` of W) against the sim: this rank's
 * resident keys, its counters, the keys freed by the last step, and (a
 * collective read) every resident key's row and state against the twin,
 * bitwise.  Returns the number of mismatches (0 = equal).
 */
static inline int dyn_sim_compare(const dyn_sim *s, const ember_collection *A, int32_t rank, const char *what)
{
    int bad = 0;
    const ref_dyn *me = &s->owners[rank];
    int64_t nref = 0;
    int64_t *want = malloc(8 * (size_t)s->capacity + 8);
    for (int64_t i = 0; i < s->capacity; i++)
        if (me->resident[i])
            want[nref++] = (int64_t)me->key[i];
    qsort(want, (size_t)nref, 8, cmp_i64_);
    int64_t n = 0, *got = malloc(8 * (size_t)s->capacity + 8);
    ember_dynamic_keys(A, s->table, s->capacity, got, &n);
    if (n != nref || memcmp(got, want, 8 * (size_t)n)) {
        fprintf(stderr, "%s: rank %d resident keys differ (%lld vs reference %lld)\n", what, rank, (long long)n,
                (long long)nref);
        bad++;
    }
    ember_dynamic_stats ds;
    ember_table_dynamic_stats(A, s->table, &ds);
    if (ds.admitted != me->admitted || ds.evicted != me->evicted || ds.expired != me->expired ||
        ds.not_admitted != me->not_admitted || ds.evicted_count_sum != me->count_sum || ds.resident != nref) {
        fprintf(stderr,
                "%s: rank %d counters admitted %lld/%lld evicted %lld/%lld expired %lld/%lld not_admitted "
                "%lld/%lld count_sum %lld/%lld (ember/reference)\n",
                what, rank, (long long)ds.admitted, (long long)me->admitted, (long long)ds.evicted,
                (long long)me->evicted, (long long)ds.expired, (long long)me->expired, (long long)ds.not_admitted,
                (long long)me->not_admitted, (long long)ds.evicted_count_sum, (long long)me->count_sum);
        bad++;
    }
    int64_t ne = 0, *ek = malloc(8 * (size_t)(me->ev_n + 1)), *ec = malloc(8 * (size_t)(me->ev_n + 1));
    ember_dynamic_evicted(A, s->table, me->ev_n, ek, ec, &ne);
    uint64_t h1 = 0, h2 = 0; /* order-free comparison of (key, count) pairs */
    for (int64_t i = 0; i < (ne < me->ev_n ? ne : me->ev_n); i++)
        h1 += ember_mix64((uint64_t)ek[i] ^ ember_mix64((uint64_t)ec[i]));
    for (int64_t i = 0; i < me->ev_n; i++)
        h2 += ember_mix64(me->ev_keys[i] ^ ember_mix64(me->ev_counts[i]));
    if (ne != me->ev_n || h1 != h2) {
        fprintf(stderr, "%s: rank %d keys freed by the last step differ (%lld vs %lld)\n", what, rank, (long long)ne,
                (long long)me->ev_n);
        bad++;
    }
    /* rows by key, over every owner's keys (collective) */
    int64_t total = 0;
    for (int32_t o = 0; o < s->W; o++)
        for (int64_t i = 0; i < s->capacity; i++)
            total += s->owners[o].resident[i];
    int64_t *all = malloc(8 * (size_t)total + 8), *ids = malloc(8 * (size_t)total + 8);
    int64_t k = 0;
    for (int32_t o = 0; o < s->W; o++)
        for (int64_t i = 0; i < s->capacity; i++)
            if (s->owners[o].resident[i]) {
                all[k] = (int64_t)s->owners[o].key[i];
                ids[k++] = i * s->W + o;
            }
    int32_t dim = s->tcfg.dim;
    float *v = malloc(sizeof(float) * (size_t)(total * dim + 1)), *w = malloc(sizeof(float) * (size_t)(dim + 1));
    float *st = malloc(sizeof(float) * (size_t)(total * s->sf + 1)), *ws = malloc(sizeof(float) * (size_t)(s->sf + 1));
    int8_t *found = malloc((size_t)total + 1);
    if (ember_dynamic_read(A, s->table, all, total, v, st, found) != EMBER_OK) {
        fprintf(stderr, "%s: ember_dynamic_read: %s\n", what, ember_errmsg(A));
        bad++;
        total = 0;
    }
    for (int64_t i = 0; i < total; i++) {
        ember_table_read(s->R, s->table, ids[i], 1, w);
        if (s->sf)
            ember_table_read_state(s->R, s->table, ids[i], 1, ws);
        if (!found[i] || memcmp(v + i * dim, w, sizeof(float) * (size_t)dim) ||
            (s->sf && memcmp(st + i * s->sf, ws, sizeof(float) * (size_t)s->sf))) {
            if (bad < 8)
                fprintf(stderr, "%s: key %lld (twin row %lld): row or state differs from the reference (found %d): "
                        "%g vs %g\n", what, (long long)all[i], (long long)ids[i], found[i], v[i * dim], w[0]);
            bad++;
        }
    }
    free(want);
    free(got);
    free(ek);
    free(ec);
    free(all);
    free(ids);
    free(v);
    free(w);
    free(st);
    free(ws);
    free(found);
    return bad;
}

/* -------------------------------------------------- random key streams */

enum { F_POOLED, F_SECOND, F_FIXED, NUM_F };

typedef struct stream {
    uint64_t *pool; /* distinct keys; low indices are drawn most often */
    int64_t n;
} stream;

static inline void stream_init(test_rng *r, stream *s, int64_t n)
{
    s->n = n;
    s->pool = malloc(8 * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        uint64_t k = test_next(r);
        switch (i % 5) { /* extremes and small ids among random 64-bit keys */
        case 0: s->pool[i] = k; break;
        case 1: s->pool[i] = (uint64_t)(int64_t)test_range(r, -1000, 1000) * 997u; break;
        case 2: s->pool[i] = i == 2 ? (uint64_t)INT64_MIN : i == 7 ? (uint64_t)INT64_MAX : k; break;
        default: s->pool[i] = k | 1; break;
        }
    }
}

static inline int64_t stream_key(test_rng *r, const stream *s)
{
    double u = test_uniform(r);
    return (int64_t)s->pool[(int64_t)((double)s->n * u * u * u)];
}

/* A batch: features 0 and 1 read the dynamic table, 2 the fixed one. */
static inline void make_batch(test_rng *r, const stream *s, int32_t B, int32_t max_len, int weighted, test_batch *tb)
{
    int64_t n = 0;
    int32_t *len = malloc(sizeof(int32_t) * (size_t)(NUM_F * B + 1));
    for (int32_t i = 0; i < NUM_F * B; i++)
        n += len[i] = (int32_t)test_range(r, 0, max_len + 1);
    test_batch_alloc(tb, B, NUM_F, n, weighted);
    memcpy(tb->lengths, len, sizeof(int32_t) * (size_t)(NUM_F * B));
    for (int64_t k = 0, i = 0; i < NUM_F * B; i++)
        for (int32_t p = 0; p < len[i]; p++, k++) {
            tb->ids[k] = i / B == F_FIXED ? test_range(r, 0, 40) : stream_key(r, s);
            if (weighted)
                tb->weights[k] = test_float(r, 0.5f, 1.5f);
        }
    free(len);
}

static inline test_config *stream_config(test_rng *r, ember_evict_policy evict, int32_t admit, int64_t capacity)
{
    test_config *tc = test_config_new(2, NUM_F);
    tc->cfg.seed = test_next(r);
    tc->cfg.dedup = (int)test_range(r, 0, 2);
    ember_table_config *d = &tc->tables[0];
    snprintf(tc->table_names[0], 32, "dyn");
    d->kind = EMBER_TABLE_DYNAMIC;
    d->rows = 0;
    d->capacity = capacity;
    d->dim = (int32_t)test_dims[test_range(r, 0, 4)];
    d->optimizer = test_optimizer_random(r, (ember_optimizer_kind)test_range(r, 0, TEST_NUM_OPT));
    test_init_for_optimizer(d);
    d->admit_after = admit;
    d->evict = evict;
    d->ttl_steps = evict == EMBER_EVICT_TTL ? (int32_t)test_range(r, 1, 4) : 0;
    d->init = test_range(r, 0, 2) ? EMBER_INIT_UNIFORM : EMBER_INIT_NORMAL;
    tc->tables[1].rows = 40;
    tc->tables[1].dim = 4;
    tc->features[F_POOLED].table = 0;
    tc->features[F_POOLED].combiner = test_range(r, 0, 2) ? EMBER_COMBINER_SUM : EMBER_COMBINER_MEAN;
    tc->features[F_SECOND].table = 0;
    tc->features[F_SECOND].combiner = test_range(r, 0, 2) ? EMBER_COMBINER_NONE : EMBER_COMBINER_SQRTN;
    tc->features[F_FIXED].table = 1;
    return tc;
}

#endif
