/*
 * test_dynamic.c: dynamic tables (include/ember.h, docs/dynamic.md) in a
 * world of one, against the naive reference of dyn_util.h.
 *
 *   - the key map alone against a naive array (find, insert, erase), held
 *     full at loads 0.9 and 0.96 (chains of moves; it must not grow), and
 *     keys forced past their two lines into the stash and a doubling;
 *   - random key streams with heavy repetition through LRU, LFU, TTL and
 *     NONE tables, admit_after 1..3, every optimizer, two features on the
 *     table (one pooled, one sequence or sqrtn) and a fixed table beside it,
 *     at 1 and 2 threads, in memory or on the SSD tier (some with lookahead:
 *     the coming batches announced by ember_prefetch): resident keys,
 *     counters, freed keys, outputs, rows and state bit-identical to the
 *     reference after every step; with lookahead, the rows read ahead
 *     between what the announcements must and may read (counted by the
 *     test before every ember_prefetch: ahead_tally);
 *   - announcements reach a dynamic table's store (rows read ahead, then
 *     used); a key without a row is skipped and not counted; a batch with
 *     no row in the table still reads the next step's rows ahead;
 *   - a reused slot starts fresh (row from the initializer of its new key,
 *     state zero); admission exactly at the threshold; a failed forward
 *     (limit error, full table) changes nothing; evaluation changes nothing;
 *     eviction on demand; bad configs named.
 */
#include <sys/stat.h>

#include "collection/collection.h"
#include "collection/config.h"
#include "dyn/dyn.h"
#include "dyn/keymap.h"
#include "dyn_util.h"
#include "tier/ssd_impl.h"
#include "tier/tier.h"

static char tmpdir[256];

/* ------------------------------------------------------------- key map */

struct key_sum {
    int64_t n;
    uint64_t keys, slots;
};

static void add_key(void *ctx, uint64_t key, uint32_t slot)
{
    struct key_sum *t = ctx;
    t->n++;
    t->keys += key * 0x9e3779b97f4a7c15ULL;
    t->slots += slot;
}

/* Maps of 2^12 buckets held at their capacity (load 0.9, and 0.96 where
 * inserts need long chains of moves) while keys come and go: contents equal
 * the naive set, and the map never grows (a dynamic table's map must not
 * allocate in a step). */
static void test_keymap_full(test_rng *r)
{
    static const double loads[] = {0.9, 0.96};
    for (int li = 0; li < 2; li++) {
        int64_t cap = (int64_t)(loads[li] * 4096) - 1;
        ember_keymap m;
        CHECK(ember_keymap_init(&m, cap, loads[li], 0, test_next(r)) == EMBER_OK && m.buckets == 4096);
        int64_t pool = 4 * cap;
        uint64_t *keys = malloc(8 * (size_t)pool);
        int64_t *live = malloc(8 * (size_t)cap); /* indices of the keys in the map */
        for (int64_t i = 0; i < pool; i++)
            keys[i] = test_range(r, 0, 2) ? test_next(r) : (uint64_t)i;
        int8_t *in = calloc((size_t)pool, 1);
        int64_t next = 0, count = 0;
        int ok = 1;
        for (; next < cap; next++, count++) {
            ok &= ember_keymap_find_or_insert(&m, keys[next], (uint32_t)next) == EMBER_KEYMAP_NONE;
            live[next] = next;
            in[next] = 1;
        }
        for (int op = 0; op < 30 * cap && ok; op++) { /* one out, one new in */
            int64_t at = test_range(r, 0, cap), old = live[at];
            ok &= ember_keymap_erase(&m, keys[old]) == (uint32_t)old;
            in[old] = 0;
            int64_t k = test_range(r, 0, 2) && next < pool ? next++ : old; /* a new key, or the same again */
            ok &= ember_keymap_find_or_insert(&m, keys[k], (uint32_t)k) == EMBER_KEYMAP_NONE;
            live[at] = k;
            in[k] = 1;
        }
        CHECK_MSG(ok, "load %.2f: a full map's erase/insert differs from the naive set", loads[li]);
        uint32_t *got = malloc(4 * (size_t)pool);
        ember_keymap_find_batch(&m, keys, pool, got);
        struct key_sum want = {0, 0, 0}, seen = {0, 0, 0};
        for (int64_t i = 0; i < pool; i++) {
            ok &= got[i] == (in[i] ? (uint32_t)i : EMBER_KEYMAP_NONE);
            if (in[i])
                add_key(&want, keys[i], (uint32_t)i);
        }
        ember_keymap_each(&m, &seen, add_key);
        CHECK_MSG(ok && !memcmp(&want, &seen, sizeof want), "load %.2f: a full map's contents differ", loads[li]);
        CHECK_MSG(m.buckets == 4096 && ember_keymap_count(&m) == count, "load %.2f: the map grew to %lld buckets",
                  loads[li], (long long)m.buckets);
        free(got);
        free(keys);
        free(live);
        free(in);
        ember_keymap_free(&m);
    }
}

/* Keys whose two lines are the same pair, in a map of 4 lines: past 8 of
 * them the walk fails and the stash takes the homeless keys; with the stash
 * full the map doubles.  Every key stays findable throughout. */
static void test_keymap_stash(void)
{
    ember_keymap m;
    CHECK(ember_keymap_init(&m, 1, 0.9, 0, 11) == EMBER_OK && m.buckets == 16);
    uint64_t keys[18];
    int n = 0;
    for (uint64_t k = 0; n < 18; k++) {
        uint64_t l2, l1 = ember_keymap_lines(ember_keymap_hash(m.seed, k), 3, &l2);
        if ((l1 == 0 && l2 == 1) || (l1 == 1 && l2 == 0))
            keys[n++] = k;
    }
    int ok = 1, stashed = 0;
    for (int i = 0; i < 14; i++) {
        ember_keymap_insert(&m, keys[i], (uint32_t)i);
        stashed |= m.subs[0].stash_n > 0;
        for (int j = 0; j <= i; j++)
            ok &= ember_keymap_find(&m, keys[j]) == (uint32_t)j;
    }
    CHECK_MSG(ok && stashed && m.buckets == 16, "keys past their two lines: lost, or no stash used");
    for (int i = 0; i < 14; i += 3) /* out of lines and stash alike */
        ok &= ember_keymap_erase(&m, keys[i]) == (uint32_t)i;
    for (int i = 0; i < 14; i++)
        ok &= ember_keymap_find(&m, keys[i]) == (i % 3 ? (uint32_t)i : EMBER_KEYMAP_NONE);
    for (int i = 0; i < 14; i += 3)
        ember_keymap_insert(&m, keys[i], (uint32_t)i);
    for (int i = 14; i < 18; i++) /* the stash fills: the map doubles */
        ember_keymap_insert(&m, keys[i], (uint32_t)i);
    struct key_sum want = {0, 0, 0}, seen = {0, 0, 0};
    for (int i = 0; i < 18; i++) {
        ok &= ember_keymap_find(&m, keys[i]) == (uint32_t)i;
        add_key(&want, keys[i], (uint32_t)i);
    }
    ember_keymap_each(&m, &seen, add_key);
    CHECK_MSG(ok && m.buckets > 16 && ember_keymap_count(&m) == 18 && !memcmp(&want, &seen, sizeof want),
              "a map whose stash filled: keys lost after growing to %lld buckets", (long long)m.buckets);
    ember_keymap_free(&m);
}

static void test_keymap(test_rng *r)
{
    ember_keymap tiny; /* sub-maps of 16 buckets: full ones use their stash, then grow */
    CHECK(ember_keymap_init(&tiny, 1, 0.9, 4, 7) == EMBER_OK);
    int ends = 1, kept = 1;
    for (uint32_t i = 0; i < 200; i++)
        ember_keymap_insert(&tiny, (uint64_t)i * 0x9e3779b97f4a7c15ULL, i);
    for (uint32_t i = 200; i < 400; i++)
        ends &= ember_keymap_find(&tiny, (uint64_t)i * 0x9e3779b97f4a7c15ULL) == EMBER_KEYMAP_NONE &&
                ember_keymap_erase(&tiny, (uint64_t)i * 0x9e3779b97f4a7c15ULL) == EMBER_KEYMAP_NONE;
    for (uint32_t i = 0; i < 200; i++)
        kept &= ember_keymap_find(&tiny, (uint64_t)i * 0x9e3779b97f4a7c15ULL) == i;
    CHECK(ends && kept && ember_keymap_count(&tiny) == 200);
    ember_keymap_free(&tiny);
    test_keymap_full(r);
    test_keymap_stash();
    for (int trial = 0; trial < 20; trial++) {
        int64_t cap = test_range(r, 1, 3000);
        int32_t sub_bits = (int32_t)test_range(r, 0, 4);
        ember_keymap m;
        CHECK(ember_keymap_init(&m, cap, 0.9, sub_bits, test_next(r)) == EMBER_OK);
        uint64_t *keys = malloc(8 * (size_t)cap);
        int8_t *in = calloc((size_t)cap, 1);
        int64_t pool = cap, count = 0;
        for (int64_t i = 0; i < pool; i++) /* small keys too: hashing must spread them */
            keys[i] = test_range(r, 0, 2) ? test_next(r) : (uint64_t)i * 64;
        int ok = 1;
        for (int op = 0; op < 20 * cap && ok; op++) {
            int64_t i = test_range(r, 0, pool);
            int kind = (int)test_range(r, 0, 3);
            if (kind == 0) {
                uint32_t got = ember_keymap_find(&m, keys[i]);
                ok = in[i] ? got == (uint32_t)i : got == EMBER_KEYMAP_NONE;
            } else if (kind == 1) {
                uint32_t got = ember_keymap_find_or_insert(&m, keys[i], (uint32_t)i);
                ok = in[i] ? got == (uint32_t)i : got == EMBER_KEYMAP_NONE;
                count += !in[i];
                in[i] = 1;
            } else {
                uint32_t got = ember_keymap_erase(&m, keys[i]);
                ok = in[i] ? got == (uint32_t)i : got == EMBER_KEYMAP_NONE;
                count -= in[i];
                in[i] = 0;
            }
        }
        CHECK_MSG(ok, "trial %d: keymap find/insert/erase differs from the naive set", trial);
        CHECK(ember_keymap_count(&m) == count);
        uint32_t *got = malloc(4 * (size_t)pool);
        ember_keymap_find_batch(&m, keys, pool, got);
        int same = 1;
        for (int64_t i = 0; i < pool; i++)
            same &= got[i] == (in[i] ? (uint32_t)i : EMBER_KEYMAP_NONE);
        CHECK_MSG(same, "trial %d: batched find differs from the naive set", trial);
        free(got);
        free(keys);
        free(in);
        ember_keymap_free(&m);
    }
}

/* ------------------------------------------------------------ streams */

/* The fixed table (index 1) of a and b, values and state. */
static int fixed_identical(const ember_collection *a, const ember_collection *b, const test_config *tc)
{
    int same = 1;
    for (int state = 0; state < 2; state++) {
        int64_t per = state ? ember_state_floats(tc->tables[1].optimizer.kind, 4) : 4;
        float *x = malloc(sizeof(float) * (size_t)(40 * per + 1)), *y = malloc(sizeof(float) * (size_t)(40 * per + 1));
        if (state) {
            ember_table_read_state(a, 1, 0, 40, x);
            ember_table_read_state(b, 1, 0, 40, y);
        } else {
            ember_table_read(a, 1, 0, 40, x);
            ember_table_read(b, 1, 0, 40, y);
        }
        same &= !memcmp(x, y, sizeof(float) * (size_t)(40 * per));
        free(x);
        free(y);
    }
    return same;
}

static int outputs_equal(const float *a, const float *b, int64_t n) { return !n || !memcmp(a, b, sizeof(float) * (size_t)n); }

/*
 * What lookahead must read ahead in a stream trial, counted by the test.
 *
 * Whether an announcement reads anything depends on the draw: the rows of a
 * trial's keys may all still be in the cache when they are announced (in a
 * TTL table that admits after 2 sightings, the resident keys can stay below
 * the cache's 121 rows until the last steps), and a key that holds no row
 * when its batch is announced is skipped by design (its step admits it and
 * resets the slot).  So "some row was read ahead" is not a property of every
 * trial (seed 1795809912651494, trial 8: lookahead 1, 229 announced keys
 * held a row, every one of them cached when announced, nothing to read);
 * the test counts what the store was given to read instead.
 *
 * The store's rule (docs/tiers.md, "Lookahead"): each ember_prefetch reads,
 * in the background, the rows of the NEXT step's announced batch that are
 * not cached, each into a free slot or a cold one (a row that no announced
 * batch uses and this step has not pinned), until none is left.  The rows of
 * an announced batch are the slots its keys held at the announcement
 * (ember_dyn_find, find only, checked against the reference's residency).
 * Before every call the test takes
 *   missing = distinct rows of the next step's batch not in the cache now
 *   room    = the slots a claim may take: fresh, freed, cold, less the cold
 *             rows of the batch being announced (they stop being cold first)
 * and adds missing to `may` and min(missing, room) to `must`; a trial then
 * needs must <= prefetch_loads <= may (the two are equal unless the cache
 * ran out of room).  Announcements lost anywhere between ember_prefetch and
 * the store fail the lower bound; rows read that were never announced, or
 * read twice, fail the upper one.  After a failed step the steps and the
 * announcements' sequence numbers part (the test's step i is no longer the
 * collection's), so from then on only the lower bound built so far holds.
 */
typedef struct ahead_tally {
    uint32_t *rows[61]; /* [batch]: its distinct rows when announced (NULL: not yet) */
    int64_t n[61];
    int64_t must, may, calls_with_misses;
    int lost; /* a forward failed: only `must` so far is known */
} ahead_tally;

static ssd_store *dyn_store(const ember_collection *c)
{
    return (ssd_store *)c->ptables[c->tables[0].ptable].store;
}

/* Is key resident in the reference (world of one: owner 0)? */
static int sim_resident(const dyn_sim *sim, uint64_t key)
{
    const ref_dyn *o = &sim->owners[0];
    for (int64_t i = 0; i < o->capacity; i++)
        if (o->resident[i] && o->key[i] == key)
            return 1;
    return 0;
}

static int cmp_u32_(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Before ember_prefetch(c, batch j) after the forward of `step`: records
 * batch j's rows and tallies what the call must and may read (above).
 * Returns 0 when a key's row disagrees with the reference's residency. */
static int tally_announce(ahead_tally *a, const ember_collection *c, const dyn_sim *sim,
                          const test_config *tc, const test_batch *gs, int step, int j)
{
    const ember_batch *b = &gs[j].b;
    ssd_store *ss = dyn_store(c);
    int ok = 1;
    if (!a->rows[j]) {
        uint64_t *keys = malloc(8 * (size_t)b->num_ids + 8);
        uint32_t *rows = malloc(4 * (size_t)b->num_ids + 4);
        int64_t nk = 0, at = 0;
        for (int32_t f = 0; f < b->num_features; f++) {
            int64_t len = 0;
            for (int32_t i = 0; i < b->batch_size; i++)
                len += b->lengths[(int64_t)f * b->batch_size + i];
            if (tc->features[f].table == 0)
                for (int64_t i = at; i < at + len; i++)
                    keys[nk++] = (uint64_t)b->ids[i];
            at += len;
        }
        ember_dyn_find(&c->ptables[c->tables[0].ptable].dyn->d, keys, nk, 1, rows);
        int64_t m = 0;
        for (int64_t i = 0; i < nk; i++) {
            ok &= (rows[i] != EMBER_DYN_NONE) == sim_resident(sim, keys[i]);
            if (rows[i] != EMBER_DYN_NONE)
                rows[m++] = rows[i];
        }
        qsort(rows, (size_t)m, sizeof(uint32_t), cmp_u32_);
        int64_t u = 0;
        for (int64_t i = 0; i < m; i++)
            if (u == 0 || rows[i] != rows[u - 1])
                rows[u++] = rows[i];
        a->rows[j] = rows;
        a->n[j] = u;
        free(keys);
    }
    if (a->lost)
        return ok;
    int64_t room = (ss->cap - ss->used) + ss->nfree + ss->ncold, missing = 0;
    for (int64_t i = 0; i < a->n[j]; i++) {
        int64_t x = ssd_map_find(ss, a->rows[j][i]);
        room -= x >= 0 && ssd_policy_cold(ss, (int32_t)x);
    }
    for (int64_t i = 0; i < a->n[step + 1]; i++) /* batch step + 1: announced by now (j >= step + 1) */
        missing += ssd_map_find(ss, a->rows[step + 1][i]) < 0;
    a->may += missing;
    a->must += missing < room ? missing : room > 0 ? room : 0;
    a->calls_with_misses += missing > 0;
    return ok;
}

static void tally_free(ahead_tally *a)
{
    for (int j = 0; j < 61; j++)
        free(a->rows[j]);
    memset(a, 0, sizeof *a);
}

/* Random streams through fast collections at 1 and 2 threads and the sim. */
static void test_streams(test_rng *r)
{
    static const ember_evict_policy policies[] = {EMBER_EVICT_LRU, EMBER_EVICT_LFU, EMBER_EVICT_TTL,
                                                  EMBER_EVICT_NONE};
    for (int trial = 0; trial < 24; trial++) {
        ember_evict_policy evict = policies[trial / 3 % 4];
        int32_t admit = (int32_t)test_range(r, 0, trial % 3 == 2 ? 3 : 4);
        int64_t capacity = trial % 3 == 2 ? test_range(r, 300, 600) : test_range(r, 4, 120);
        test_config *tc = stream_config(r, evict, admit, capacity);
        int ssd = trial % 3 == 2; /* the dynamic table on the SSD tier, its cache smaller than the table */
        stream s;
        stream_init(r, &s, capacity * (ssd ? 4 : test_range(r, 1, 6)));
        ember_collection *A[2] = {NULL, NULL};
        char dirs[2][300];
        for (int t = 0; t < 2; t++) {
            tc->cfg.threads = t + 1;
            if (ssd) {
                ember_table_config *d = &tc->tables[0];
                snprintf(dirs[t], sizeof dirs[t], "%s/%d", tmpdir, t);
                mkdir(dirs[t], 0700);
                d->storage = EMBER_STORAGE_SSD;
                tc->cfg.io_threads = 2; /* tiny requests: 32 threads would only contend */
                if (d->evict == EMBER_EVICT_TTL)
                    d->ttl_steps = 30; /* rows must outlive the cache's capacity */
                d->path = dirs[t];
                if (t == 0) { /* every other SSD trial announces its batches (lookahead) */
                    d->cache_policy = trial % 2 ? EMBER_CACHE_LOOKAHEAD : (ember_cache_policy)test_range(r, 1, 4);
                    tc->cfg.lookahead = (int32_t)test_range(r, 1, 4);
                }
                d->cache_bytes = /* 121 rows: a batch's distinct rows fit (20 x 3 x 2); fewer than the table's */
                    ember_ssd_cache_bytes_for(121, d->capacity, test_ssd_record_bytes(d), d->cache_policy);
                if (d->cache_policy == EMBER_CACHE_LOOKAHEAD) { /* the fixed table too: rows and keys announced */
                    ember_table_config *f = &tc->tables[1];
                    f->storage = EMBER_STORAGE_SSD;
                    f->path = dirs[t];
                    f->cache_policy = EMBER_CACHE_LOOKAHEAD;
                    f->cache_bytes = ember_ssd_cache_bytes_for(40, f->rows, test_ssd_record_bytes(f),
                                                               EMBER_CACHE_LOOKAHEAD);
                }
            }
            CHECK_MSG(ember_collection_create(&tc->cfg, &A[t]) == EMBER_OK, "%s", ember_errmsg(NULL));
        }
        tc->tables[1].storage = EMBER_STORAGE_MEMORY; /* the reference's twin of the fixed table */
        dyn_sim sim;
        dyn_sim_init(&sim, tc, 0, 1);
        int64_t pw = ember_pooled_width(A[0]);
        int steps = ssd ? 60 : 30, bad = 0;
        int32_t ahead = ssd && tc->tables[0].cache_policy == EMBER_CACHE_LOOKAHEAD ? tc->cfg.lookahead : 0;
        test_batch gs[61]; /* every step's batch, drawn first: announcements need the later ones */
        ahead_tally tally[2];
        memset(tally, 0, sizeof tally);
        for (int step = 1; step <= steps; step++)
            make_batch(r, &s, (int32_t)test_range(r, 0, 20), (int32_t)test_range(r, 1, ssd ? 4 : 6),
                       (int)test_range(r, 0, 2), &gs[step]);
        for (int step = 1; step <= steps && !bad; step++) {
            test_batch g = gs[step], rb;
            int32_t B = g.b.batch_size;
            int32_t start[2] = {0, B};
            int64_t seqn = ember_sequence_size(A[0], &g.b);
            float *out[3], *seq[3];
            for (int k = 0; k < 3; k++) {
                out[k] = calloc((size_t)(B * pw + 1), sizeof(float));
                seq[k] = calloc((size_t)(seqn + 1), sizeof(float));
            }
            ember_stats es;
            ember_collection_stats(A[0], &es);
            uint32_t at = (uint32_t)(es.steps + 1);
            if (test_range(r, 0, 4) == 0) { /* a forward without a backward: the step is the same */
                test_batch x, xr;
                make_batch(r, &s, B, (int32_t)test_range(r, 1, 4), 0, &x);
                int xw = dyn_sim_step(&sim, &tc->cfg, &x.b, start, at, &xr);
                float *xo = calloc((size_t)(B * pw + 1), sizeof(float));
                float *xs = calloc((size_t)(ember_sequence_size(A[0], &x.b) + 1), sizeof(float));
                for (int k = 0; k < 2; k++)
                    CHECK_MSG(ember_forward(A[k], &x.b, xo, xs) == xw, "trial %d step %d: extra forward", trial, step);
                if (xw == EMBER_OK)
                    test_batch_free(&xr);
                test_batch_free(&x);
                free(xo);
                free(xs);
            }
            int want = dyn_sim_step(&sim, &tc->cfg, &g.b, start, at, &rb);
            int got0 = ember_forward(A[0], &g.b, out[0], seq[0]);
            int got1 = ember_forward(A[1], &g.b, out[1], seq[1]);
            for (int t = 0; t < 2; t++)
                tally[t].lost |= want != EMBER_OK;
            for (int k = 1; k <= ahead && step + k <= steps; k++) /* announce what is not yet */
                for (int t = 0; t < 2 && (step == 1 || k == ahead); t++) {
                    CHECK_MSG(tally_announce(&tally[t], A[t], &sim, tc, gs, step, step + k),
                              "trial %d step %d: an announced key's row disagrees with the reference", trial, step);
                    CHECK_MSG(ember_prefetch(A[t], &gs[step + k].b) == EMBER_OK, "prefetch: %s", ember_errmsg(A[t]));
                }
            char what[160];
            snprintf(what, sizeof what, "trial %d (evict %d, admit %d, capacity %lld) step %d", trial, evict, admit,
                     (long long)capacity, step);
            CHECK_MSG(got0 == want && got1 == want, "%s: forward %d/%d, reference %d (%s)", what, got0, got1, want,
                      ember_errmsg(A[0]));
            if (want == EMBER_OK && got0 == EMBER_OK && got1 == EMBER_OK) {
                CHECK(ember_forward(sim.R, &rb.b, out[2], seq[2]) == EMBER_OK);
                bad += !outputs_equal(out[0], out[2], B * pw) || !outputs_equal(out[1], out[2], B * pw) ||
                       !outputs_equal(seq[0], seq[2], seqn) || !outputs_equal(seq[1], seq[2], seqn);
                CHECK_MSG(!bad, "%s: forward outputs differ from the reference", what);
                test_fill(r, out[2], B * pw, -1, 1);
                test_fill(r, seq[2], seqn, -1, 1);
                for (int k = 0; k < 2; k++)
                    CHECK(ember_backward(A[k], out[2], seq[2]) == EMBER_OK);
                CHECK(ember_backward(sim.R, out[2], seq[2]) == EMBER_OK);
                test_batch_free(&rb);
            }
            for (int k = 0; k < 2 && (!ssd || step % 6 == 0 || step == steps); k++) /* SSD reads cost */
                bad += dyn_sim_compare(&sim, A[k], 0, what);
            bad += !fixed_identical(A[0], sim.R, tc);
            CHECK_MSG(!bad, "%s: tables differ from the reference", what);
            for (int k = 0; k < 3; k++) {
                free(out[k]);
                free(seq[k]);
            }
        }
        for (int step = 1; step <= steps; step++)
            test_batch_free(&gs[step]);
        for (int t = 0; t < 2 && ssd; t++) {
            ember_tier_stats ts;
            CHECK(ember_table_tier_stats(A[t], 0, &ts) == EMBER_OK);
            CHECK_MSG(ts.evictions > 0 && ts.writes > 0, "trial %d: the SSD cache never evicted (%lld rows cached)",
                      trial, (long long)ts.cache_rows);
            const ahead_tally *a = &tally[t];
            CHECK_MSG(ts.prefetch_loads >= a->must && (a->lost || ts.prefetch_loads <= a->may),
                      "trial %d (evict %d, admit %d, capacity %lld, lookahead %d), %d threads: %lld rows read ahead, "
                      "but the announcements left %lld to read (%lld with room for them, over %lld calls)%s",
                      trial, evict, admit, (long long)capacity, ahead, t + 1, (long long)ts.prefetch_loads,
                      (long long)a->may, (long long)a->must, (long long)a->calls_with_misses,
                      a->lost ? "; a step failed, so only the lower bound holds" : "");
        }
        for (int t = 0; t < 2; t++)
            tally_free(&tally[t]);
        for (int t = 0; t < 2; t++)
            ember_collection_destroy(A[t]);
        dyn_sim_free(&sim);
        free(s.pool);
        test_config_free(tc);
    }
}


/* ------------------------------------------------------ targeted cases */

/* A collection with one dynamic table "d" (dim 4, Adagrad) and one SUM
 * feature on it; optional fixed table "f" with a limit (second feature). */
static ember_collection *small(int64_t capacity, int32_t admit, ember_evict_policy evict, int32_t ttl, int with_fixed,
                               test_config **out)
{
    test_config *tc = test_config_new(with_fixed ? 2 : 1, with_fixed ? 2 : 1);
    tc->cfg.seed = 42;
    snprintf(tc->table_names[0], 32, "d");
    ember_table_config *d = &tc->tables[0];
    d->kind = EMBER_TABLE_DYNAMIC;
    d->rows = 0;
    d->capacity = capacity;
    d->dim = 4;
    d->optimizer = ember_optimizer_default(EMBER_OPT_ADAGRAD);
    d->optimizer.lr = 0.5f;
    d->admit_after = admit;
    d->evict = evict;
    d->ttl_steps = ttl;
    if (with_fixed) {
        tc->tables[1].rows = 10;
        tc->tables[1].dim = 4;
        tc->tables[1].max_ids_per_partition = 2;
        tc->features[1].table = 1;
    }
    ember_collection *c = NULL;
    if (ember_collection_create(&tc->cfg, &c) != EMBER_OK)
        fprintf(stderr, "create: %s\n", ember_errmsg(NULL));
    *out = tc;
    return c;
}

/* One training step of keys (one sample, one bag) with d_pooled = 1. */
static int train_keys(ember_collection *c, const int64_t *keys, int32_t n, int32_t nfixed, float *pooled)
{
    int32_t F = ember_pooled_width(c) / 4 > 1 ? 2 : 1, len[2] = {n, nfixed};
    int64_t ids[64];
    memcpy(ids, keys, sizeof(int64_t) * (size_t)n);
    for (int32_t i = 0; i < nfixed; i++)
        ids[n + i] = i;
    ember_batch b = {1, F, len, ids, NULL, n + (F > 1 ? nfixed : 0)};
    float out[8], grad[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    int st = ember_forward(c, &b, pooled ? pooled : out, NULL);
    if (st == EMBER_OK)
        st = ember_backward(c, grad, NULL);
    return st;
}

static void expect_init_row(const test_config *tc, int64_t key, const float *got, const char *what)
{
    float want[4];
    ref_init_row(&tc->tables[0], tc->cfg.seed, key, want);
    CHECK_MSG(!memcmp(got, want, sizeof want), "%s: row of key %lld is not its initial row", what, (long long)key);
}

static void test_fresh_slot(void)
{
    test_config *tc;
    ember_collection *c = small(1, 1, EMBER_EVICT_LRU, 0, 0, &tc);
    int64_t a = 7, b = -123456789012345LL;
    float pooled[4], st[4];
    int8_t found;
    CHECK(train_keys(c, &a, 1, 0, pooled) == EMBER_OK);
    expect_init_row(tc, a, pooled, "first use");
    CHECK(train_keys(c, &a, 1, 0, NULL) == EMBER_OK); /* a has state now */
    CHECK(ember_dynamic_read(c, 0, &a, 1, NULL, st, &found) == EMBER_OK && found && st[0] != 0);
    CHECK(train_keys(c, &b, 1, 0, pooled) == EMBER_OK); /* b takes a's slot */
    expect_init_row(tc, b, pooled, "reused slot");
    int64_t ek[2], ec[2], ne;
    CHECK(ember_dynamic_evicted(c, 0, 2, ek, ec, &ne) == EMBER_OK && ne == 1 && ek[0] == a && ec[0] == 2);
    /* b's state after one step is one Adagrad update from zero: g^2 = 1 */
    CHECK(ember_dynamic_read(c, 0, &b, 1, NULL, st, &found) == EMBER_OK && found && st[0] == 1.0f && st[3] == 1.0f);
    CHECK(ember_dynamic_read(c, 0, &a, 1, NULL, st, &found) == EMBER_OK && !found && st[0] == 0);
    CHECK(train_keys(c, &a, 1, 0, pooled) == EMBER_OK); /* a returns: fresh again */
    expect_init_row(tc, a, pooled, "returning key");
    ember_collection_destroy(c);
    test_config_free(tc);
}

static void test_admission(void)
{
    test_config *tc;
    ember_collection *c = small(8, 3, EMBER_EVICT_LRU, 0, 0, &tc);
    int64_t k = 99, three[3] = {5, 5, 5};
    float pooled[4], zero[4] = {0};
    for (int i = 1; i <= 3; i++) {
        CHECK(train_keys(c, &k, 1, 0, pooled) == EMBER_OK);
        if (i < 3)
            CHECK_MSG(!memcmp(pooled, zero, sizeof zero), "occurrence %d of %d: not admitted, reads zeros", i, 3);
        else
            expect_init_row(tc, k, pooled, "third occurrence");
    }
    CHECK(train_keys(c, three, 3, 0, pooled) == EMBER_OK); /* 3 occurrences in one batch: admitted in it */
    float want[4];
    ref_init_row(&tc->tables[0], tc->cfg.seed, 5, want);
    CHECK(fabsf(pooled[0] - 3 * want[0]) <= 1e-6f);
    ember_dynamic_stats ds;
    CHECK(ember_table_dynamic_stats(c, 0, &ds) == EMBER_OK && ds.admitted == 2 && ds.not_admitted == 2 && ds.resident == 2);
    CHECK(ds.sketch_bytes == 65536); /* 8 bytes per row of 8, at least 64 KiB */
    ember_collection_destroy(c);
    test_config_free(tc);
}

/* Snapshot of a dynamic table: keys, counters, rows by key. */
typedef struct snap {
    int64_t keys[64], n;
    ember_dynamic_stats ds;
    float rows[64 * 4], state[64 * 4];
} snap;

static void take(const ember_collection *c, snap *s)
{
    memset(s, 0, sizeof *s);
    ember_dynamic_keys(c, 0, 64, s->keys, &s->n);
    ember_table_dynamic_stats(c, 0, &s->ds);
    int8_t found[64];
    ember_dynamic_read(c, 0, s->keys, s->n, s->rows, s->state, found);
}

static void test_failed_forward(void)
{
    test_config *tc;
    ember_collection *c = small(4, 1, EMBER_EVICT_LRU, 0, 1, &tc);
    int64_t keys[4] = {1, 2, 3, 4}, more[3] = {1, 50, 60};
    CHECK(train_keys(c, keys, 4, 1, NULL) == EMBER_OK); /* full */
    snap before, after;
    take(c, &before);
    /* a limit error on the fixed table after the keys were resolved (50 and 60 evict two rows) */
    CHECK(train_keys(c, more, 3, 3, NULL) == EMBER_ELIMIT);
    take(c, &after);
    CHECK_MSG(!memcmp(&before, &after, sizeof before), "a forward failing on a limit changed the dynamic table");
    CHECK(train_keys(c, more, 3, 1, NULL) == EMBER_OK);
    ember_collection_destroy(c);
    test_config_free(tc);

    c = small(2, 1, EMBER_EVICT_NONE, 0, 0, &tc);
    CHECK(train_keys(c, keys, 2, 0, NULL) == EMBER_OK);
    take(c, &before);
    CHECK(train_keys(c, keys + 1, 2, 0, NULL) == EMBER_ELIMIT);
    CHECK_MSG(strstr(ember_errmsg(c), "'d'") && strstr(ember_errmsg(c), "2 rows"), "message: %s", ember_errmsg(c));
    take(c, &after);
    CHECK_MSG(!memcmp(&before, &after, sizeof before), "a full table's failed forward changed it");
    ember_collection_destroy(c);
    test_config_free(tc);

    c = small(2, 1, EMBER_EVICT_LRU, 0, 0, &tc); /* 3 new keys in one batch, 2 rows */
    CHECK(train_keys(c, keys, 3, 0, NULL) == EMBER_ELIMIT);
    CHECK_MSG(strstr(ember_errmsg(c), "this batch uses"), "message: %s", ember_errmsg(c));
    take(c, &after);
    CHECK(after.n == 0 && after.ds.admitted == 0);
    ember_collection_destroy(c);
    test_config_free(tc);
}

static void test_evaluation(void)
{
    test_config *tc;
    ember_collection *c = small(4, 1, EMBER_EVICT_TTL, 2, 0, &tc);
    int64_t keys[2] = {10, 20}, other = 30;
    CHECK(train_keys(c, keys, 2, 0, NULL) == EMBER_OK);
    snap before, after;
    take(c, &before);
    CHECK(ember_collection_set_training(c, 0) == EMBER_OK);
    int32_t len = 2;
    int64_t ids[2] = {20, 30};
    ember_batch b = {1, 1, &len, ids, NULL, 2};
    float pooled[4], want[4];
    for (int i = 0; i < 5; i++) /* evaluation never ages rows out (TTL 2) */
        CHECK(ember_forward(c, &b, pooled, NULL) == EMBER_OK);
    int8_t found;
    CHECK(ember_dynamic_read(c, 0, &keys[1], 1, want, NULL, &found) == EMBER_OK && found);
    CHECK(!memcmp(pooled, want, sizeof want)); /* key 30 has no row: zeros */
    take(c, &after);
    CHECK_MSG(!memcmp(&before, &after, sizeof before), "evaluation changed the dynamic table");
    CHECK(ember_collection_set_training(c, 1) == EMBER_OK);
    for (int i = 0; i < 3; i++)
        CHECK(train_keys(c, &other, 1, 0, NULL) == EMBER_OK);
    take(c, &after); /* TTL 2: 10 and 20 (last used at step 1) are gone by step 4 */
    CHECK(after.n == 1 && after.keys[0] == 30 && after.ds.expired == 2);
    int64_t freed;
    CHECK(ember_dynamic_evict(c, 0, 0, &freed) == EMBER_OK && freed == 1);
    take(c, &after);
    CHECK(after.n == 0 && after.ds.expired == 3);
    ember_collection_destroy(c);
    test_config_free(tc);
}

/* Whether key holds a row now. */
static int resident(const ember_collection *c, int64_t key)
{
    int8_t found = 0;
    ember_dynamic_read(c, 0, &key, 1, NULL, NULL, &found);
    return found;
}

/* The TTL rule at its boundary (ember.h, docs/dynamic.md "Eviction"): a
 * row last used in step s is kept through step s + ttl_steps, and in step
 * s + ttl_steps + 1 too when that step uses its key; otherwise it is freed
 * at the start of step s + ttl_steps + 1.  Checked on the collection and on
 * the naive reference (src/ref/ref_dyn.c) after every step, for ttl_steps
 * 1..3 (s = 1):
 *   key 10, step 1 only: a row after step 1 + ttl, none after step 2 + ttl;
 *   key 20, steps 1 and 2 + ttl (ttl idle steps): keeps its trained row;
 *   key 30, steps 1 and 3 + ttl (ttl + 1 idle steps): admitted anew, the
 *     forward reads its initial row;
 *   key 40, every step. */
static void test_ttl_boundary(void)
{
    for (int32_t ttl = 1; ttl <= 3; ttl++) {
        test_config *tc;
        ember_collection *c = small(8, 1, EMBER_EVICT_TTL, ttl, 0, &tc);
        ref_dyn ref;
        CHECK(ref_dyn_init(&ref, 8, 1, EMBER_EVICT_TTL, ttl, 0, 0) == 0);
        uint32_t back20 = (uint32_t)(2 + ttl), back30 = (uint32_t)(3 + ttl);
        for (uint32_t step = 1; step <= back30; step++) {
            int64_t keys[4], slots[4], rs[4], nres;
            uint64_t uk[4], rk[4];
            int32_t n = 0;
            keys[n++] = 40;
            if (step == 1)
                keys[n++] = 10;
            if (step == 1 || step == back20)
                keys[n++] = 20;
            if (step == 1 || step == back30)
                keys[n++] = 30;
            /* what the forward must read: 40's row and the returning key's, kept or initial */
            float r40[4] = {0}, rback[4] = {0}, want[4], pooled[4];
            int64_t k40 = 40, kback = step == back20 ? 20 : 30;
            int8_t found;
            if (step > 1)
                CHECK(ember_dynamic_read(c, 0, &k40, 1, r40, NULL, &found) == EMBER_OK && found);
            if (step == back20)
                CHECK(ember_dynamic_read(c, 0, &kback, 1, rback, NULL, &found) == EMBER_OK && found);
            if (step == back30)
                ref_init_row(&tc->tables[0], tc->cfg.seed, 30, rback);
            for (int i = 0; i < 4; i++)
                want[i] = 0.0f + r40[i] + rback[i];
            CHECK(train_keys(c, keys, n, 0, pooled) == EMBER_OK);
            if (step == back20 || step == back30)
                CHECK_MSG(!memcmp(pooled, want, sizeof want),
                          "ttl %d: key %lld back in step %u after %u idle steps did not read %s", ttl,
                          (long long)kback, step, step - 2, step == back20 ? "its kept row" : "its initial row");
            for (int32_t i = 0; i < n; i++)
                uk[i] = (uint64_t)keys[i];
            CHECK(ref_dyn_step(&ref, uk, n, step, slots, rs, rk, &nres) == EMBER_OK);
            for (int32_t j = 1; j <= 3; j++) {
                int64_t k = 10 * j;
                int want_row = k == 10 ? step <= (uint32_t)(1 + ttl)
                             : k == 20 ? 1
                                       : step <= (uint32_t)(1 + ttl) || step == back30;
                int ref_row = 0;
                for (int64_t s = 0; s < 8; s++)
                    ref_row |= ref.resident[s] && ref.key[s] == (uint64_t)k;
                CHECK_MSG(resident(c, k) == want_row && ref_row == want_row,
                          "ttl %d: after step %u key %lld %s a row (reference: %s); want %s", ttl, step,
                          (long long)k, resident(c, k) ? "holds" : "has no", ref_row ? "holds" : "none",
                          want_row ? "a row" : "none");
            }
        }
        ember_dynamic_stats ds;
        CHECK(ember_table_dynamic_stats(c, 0, &ds) == EMBER_OK);
        CHECK_MSG(ds.expired == 2 && ref.expired == 2,
                  "ttl %d: %lld rows expired (reference %lld); want 2 (keys 10 and 30)", ttl, (long long)ds.expired,
                  (long long)ref.expired);
        ref_dyn_free(&ref);
        ember_collection_destroy(c);
        test_config_free(tc);
    }
}

/* One step of n keys (one sample, one bag) that announces the next batch
 * (next_n keys) between its forward and its backward. */
static int train_announcing(ember_collection *c, const int64_t *keys, int32_t n, const int64_t *next, int32_t next_n)
{
    int64_t ids[2][16];
    int32_t len[2] = {n, next_n};
    memcpy(ids[0], keys, sizeof(int64_t) * (size_t)n);
    memcpy(ids[1], next, sizeof(int64_t) * (size_t)next_n);
    ember_batch b = {1, 1, &len[0], ids[0], NULL, n}, nb = {1, 1, &len[1], ids[1], NULL, next_n};
    float out[4], grad[4] = {1, 1, 1, 1};
    int st = ember_forward(c, &b, out, NULL);
    if (st == EMBER_OK)
        st = ember_prefetch(c, &nb);
    if (st == EMBER_OK)
        st = ember_backward(c, grad, NULL);
    return st;
}

/* Announcements of a dynamic SSD table reach its store: rows of keys that
 * hold a slot are read ahead and then used; a key without a row is skipped
 * and not counted (admit_after 2: an announced key still needs two
 * trained occurrences). */
static void test_lookahead(void)
{
    test_config *tc;
    ember_collection *c = small(64, 2, EMBER_EVICT_LRU, 0, 0, &tc);
    ember_collection_destroy(c);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/la", tmpdir);
    mkdir(dir, 0700);
    ember_table_config *d = &tc->tables[0];
    d->storage = EMBER_STORAGE_SSD;
    d->path = dir;
    d->cache_policy = EMBER_CACHE_LOOKAHEAD;
    d->cache_bytes =
        ember_ssd_cache_bytes_for(24, d->capacity, test_ssd_record_bytes(d), EMBER_CACHE_LOOKAHEAD);
    tc->cfg.lookahead = 2;
    tc->cfg.io_threads = 2;
    CHECK_MSG(ember_collection_create(&tc->cfg, &c) == EMBER_OK, "%s", ember_errmsg(NULL));
    CHECK(ember_prefetch_depth(c) == 2);
    int64_t keys[41][16]; /* step s: 8 keys of 48, each twice (admitted at first use) */
    for (int s = 0; s <= 40; s++)
        for (int i = 0; i < 8; i++)
            keys[s][2 * i] = keys[s][2 * i + 1] = 1000 + (s * 5 + i * 6) % 48;
    for (int s = 0; s < 40; s++)
        CHECK_MSG(train_announcing(c, keys[s], 16, keys[s + 1], 16) == EMBER_OK, "step %d: %s", s, ember_errmsg(c));
    ember_tier_stats ts;
    CHECK(ember_table_tier_stats(c, 0, &ts) == EMBER_OK);
    CHECK_MSG(ts.prefetch_loads > 0 && ts.prefetch_used > 0 && ts.evictions > 0,
              "announced keys read no row ahead: %lld read ahead, %lld used, %lld evictions",
              (long long)ts.prefetch_loads, (long long)ts.prefetch_used, (long long)ts.evictions);
    /* keys without a row: announced, skipped, nothing changes */
    int64_t fresh[4] = {77, 77, -5, 1LL << 62};
    snap before, after;
    take(c, &before);
    int32_t len = 4;
    ember_batch fb = {1, 1, &len, fresh, NULL, 4};
    CHECK_MSG(ember_prefetch(c, &fb) == EMBER_OK, "announcing keys without a row: %s", ember_errmsg(c));
    take(c, &after);
    CHECK_MSG(!memcmp(&before, &after, sizeof before), "announcing keys changed the dynamic table");
    int8_t found;
    CHECK(train_announcing(c, fresh, 1, fresh, 1) == EMBER_OK); /* the first trained occurrence of 77 */
    CHECK(ember_dynamic_read(c, 0, fresh, 1, NULL, NULL, &found) == EMBER_OK);
    CHECK_MSG(!found, "key 77 was admitted after one trained occurrence: its announcements were counted");
    CHECK(train_announcing(c, fresh, 1, fresh, 1) == EMBER_OK);
    CHECK(ember_dynamic_read(c, 0, fresh, 1, NULL, NULL, &found) == EMBER_OK && found);
    ember_collection_destroy(c);
    rmdir(dir);
    test_config_free(tc);
}

/* An announced batch that has no row in the table (its keys hold no slot
 * yet) is still an announcement: the store must read the next step's
 * missing rows at it and keep the batches announced before it.  Lookahead
 * 2, a cache of 20 rows; A, B, C, D (8 keys each, each twice: admitted at
 * first use) trained in turn leave A's rows on disk only.  Step 4 trains D
 * and announces D and A (steps 5, 6); step 5 trains D and announces keys
 * that hold no row (step 7), which must read A's 8 rows ahead; step 6
 * trains A without loading a row on demand. */
static void test_lookahead_no_rows(void)
{
    test_config *tc;
    ember_collection *c = small(64, 2, EMBER_EVICT_LRU, 0, 0, &tc);
    ember_collection_destroy(c);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/la0", tmpdir);
    mkdir(dir, 0700);
    ember_table_config *d = &tc->tables[0];
    d->storage = EMBER_STORAGE_SSD;
    d->path = dir;
    d->cache_policy = EMBER_CACHE_LOOKAHEAD;
    d->cache_bytes =
        ember_ssd_cache_bytes_for(20, d->capacity, test_ssd_record_bytes(d), EMBER_CACHE_LOOKAHEAD);
    tc->cfg.lookahead = 2;
    tc->cfg.io_threads = 2;
    CHECK_MSG(ember_collection_create(&tc->cfg, &c) == EMBER_OK, "%s", ember_errmsg(NULL));
    int64_t keys[4][16], none[4] = {9001, 9002, 9003, 9004}; /* A B C D; keys never trained */
    for (int s = 0; s < 4; s++)
        for (int i = 0; i < 16; i++)
            keys[s][i] = 1000 * (s + 1) + i / 2;
    int32_t len[3] = {16, 16, 4};
    ember_batch bd = {1, 1, &len[0], keys[3], NULL, 16}, ba = {1, 1, &len[1], keys[0], NULL, 16};
    ember_batch bn = {1, 1, &len[2], none, NULL, 4};
    float out[4], grad[4] = {1, 1, 1, 1};
    for (int s = 0; s < 4; s++)
        CHECK_MSG(train_keys(c, keys[s], 16, 0, NULL) == EMBER_OK, "step %d: %s", s, ember_errmsg(c));
    ember_tier_stats t0, t1, t2;
    CHECK(ember_table_tier_stats(c, 0, &t0) == EMBER_OK);
    CHECK(ember_forward(c, &bd, out, NULL) == EMBER_OK); /* step 4 */
    CHECK(ember_prefetch(c, &bd) == EMBER_OK && ember_prefetch(c, &ba) == EMBER_OK);
    CHECK(ember_backward(c, grad, NULL) == EMBER_OK);
    CHECK(ember_forward(c, &bd, out, NULL) == EMBER_OK); /* step 5 */
    CHECK(ember_prefetch(c, &bn) == EMBER_OK);
    CHECK(ember_backward(c, grad, NULL) == EMBER_OK);
    CHECK(ember_table_tier_stats(c, 0, &t1) == EMBER_OK);
    CHECK(ember_forward(c, &ba, out, NULL) == EMBER_OK); /* step 6 */
    CHECK(ember_backward(c, grad, NULL) == EMBER_OK);
    CHECK(ember_table_tier_stats(c, 0, &t2) == EMBER_OK);
    CHECK_MSG(t0.prefetch_loads == 0 && t0.evictions >= 8 && t2.prefetch_loads == 8 && t2.prefetch_used == 8 &&
                  t2.demand_loads == t1.demand_loads,
              "an announcement without rows read no row ahead: %lld evictions before, then %lld rows read ahead, "
              "%lld of them used, %lld loaded on demand by the step they were announced for",
              (long long)t0.evictions, (long long)t2.prefetch_loads, (long long)t2.prefetch_used,
              (long long)(t2.demand_loads - t1.demand_loads));
    ember_collection_destroy(c);
    rmdir(dir);
    test_config_free(tc);
}

static void expect_create_error(test_config *tc, const char *needle)
{
    ember_collection *c = NULL;
    int st = ember_collection_create(&tc->cfg, &c);
    CHECK_MSG(st == EMBER_EINVAL && strstr(ember_errmsg(NULL), needle), "expected '%s', got %d: %s", needle, st,
              ember_errmsg(NULL));
    ember_collection_destroy(c);
}

static void test_bad_config(void)
{
    test_config *tc = test_config_new(1, 1);
    ember_table_config *d = &tc->tables[0];
    d->kind = EMBER_TABLE_DYNAMIC;
    d->rows = 0;
    expect_create_error(tc, "capacity 0");
    d->capacity = 10;
    d->rows = 100;
    expect_create_error(tc, "rows must be 0");
    d->rows = 0;
    d->evict = EMBER_EVICT_TTL;
    expect_create_error(tc, "ttl_steps >= 1");
    /* ttl_steps with another policy: refused, the message names the table and the field */
    static const ember_evict_policy others[] = {EMBER_EVICT_LRU, EMBER_EVICT_LFU, EMBER_EVICT_NONE};
    static const char *const other_names[] = {"evict is lru", "evict is lfu", "evict is none"};
    for (int i = 0; i < 3; i++)
        for (int32_t ttl = -1; ttl <= 2; ttl += 3) {
            d->evict = others[i];
            d->ttl_steps = ttl;
            expect_create_error(tc, "table 'table0': ttl_steps is");
            CHECK_MSG(strstr(ember_errmsg(NULL), other_names[i]), "message: %s", ember_errmsg(NULL));
        }
    d->kind = EMBER_TABLE_FIXED; /* and on a fixed table */
    d->rows = 10;
    d->capacity = 0;
    d->evict = EMBER_EVICT_LRU;
    d->ttl_steps = 2;
    expect_create_error(tc, "table 'table0': capacity, capacity_bytes, admit_after, evict, ttl_steps and");
    d->kind = EMBER_TABLE_DYNAMIC;
    d->rows = 0;
    d->capacity = 10;
    d->ttl_steps = 0;
    d->evict = EMBER_EVICT_LRU;
    d->admit_after = 2;
    d->sketch_bytes = 8;
    expect_create_error(tc, "sketch_bytes 8 outside [64, 16 GiB] (0 = 8 per row of capacity, at least 64 KiB)");
    d->sketch_bytes = 0;
    d->admit_after = 70000;
    expect_create_error(tc, "admit_after 70000");
    d->admit_after = 0;
    d->placement = EMBER_PLACE_COLUMN;
    expect_create_error(tc, "placement row");
    d->placement = EMBER_PLACE_ROW;
    d->capacity = 0;
    d->capacity_bytes = 100;
    expect_create_error(tc, "holds no row");
    /* capacity from bytes: the largest that fits */
    d->capacity_bytes = 1 << 20;
    ember_collection *c = NULL;
    CHECK(ember_collection_create(&tc->cfg, &c) == EMBER_OK);
    ember_dynamic_stats ds;
    ember_memory mem;
    ember_table_dynamic_stats(c, 0, &ds);
    ember_collection_memory(c, &mem);
    CHECK(ds.capacity > 1000 && mem.row_bytes + mem.index_bytes <= (1 << 20));
    ember_collection_destroy(c);
    tc->tables[0] = ember_table_config_default();
    tc->tables[0].rows = 10;
    tc->tables[0].dim = 4;
    tc->tables[0].capacity = 5;
    tc->tables[0].name = tc->table_names[0];
    expect_create_error(tc, "are for dynamic tables");
    test_config_free(tc);
}

/* Two dynamic collections hold the same keys, rows, state and counters. */
static int same_dynamic(const ember_collection *a, const ember_collection *b, int counters)
{
    snap x, y;
    take(a, &x);
    take(b, &y);
    int same = x.n == y.n && !memcmp(x.keys, y.keys, sizeof x.keys) && !memcmp(x.rows, y.rows, sizeof x.rows) &&
               !memcmp(x.state, y.state, sizeof x.state);
    if (counters) /* the history: not the capacity, sizes or the last step's freed keys */
        same &= x.ds.resident == y.ds.resident && x.ds.admitted == y.ds.admitted && x.ds.evicted == y.ds.evicted &&
                x.ds.expired == y.ds.expired && x.ds.evicted_count_sum == y.ds.evicted_count_sum &&
                x.ds.not_admitted == y.ds.not_admitted;
    return same;
}

static void test_checkpoint(test_rng *r)
{
    test_config *tc;
    ember_collection *a = small(16, 2, EMBER_EVICT_LFU, 0, 0, &tc);
    stream s;
    stream_init(r, &s, 40);
    char root[300];
    snprintf(root, sizeof root, "%s/ckpt", tmpdir);
    int64_t keys[8];
    for (int step = 0; step < 30; step++) {
        for (int i = 0; i < 6; i++)
            keys[i] = stream_key(r, &s);
        CHECK(train_keys(a, keys, 6, 0, NULL) == EMBER_OK);
    }
    ember_save_options so = {30, 0, NULL, 0, NULL, 0};
    CHECK(ember_save(a, root, &so) == EMBER_OK);
    ember_checkpoint *ck = NULL;
    CHECK(ember_checkpoint_open(root, &ck) == EMBER_OK);
    /* the same layout: bit-identical continuation, evictions included */
    ember_collection *b = NULL;
    CHECK(ember_collection_create(&tc->cfg, &b) == EMBER_OK);
    CHECK(ember_load(b, ck) == EMBER_OK);
    CHECK_MSG(same_dynamic(a, b, 1), "a loaded dynamic table differs from the saved one");
    /* the checkpoint lists the dynamic table as configured: a collection of
     * the listed config loads it, bit-identical */
    ember_table_config listed[2];
    int ok = ember_checkpoint_num_tables(ck) == tc->cfg.num_tables;
    for (int32_t t = 0; t < tc->cfg.num_tables && ok; t++)
        ok = ember_checkpoint_table(ck, t, &listed[t]) == EMBER_OK;
    const ember_table_config *dt = &tc->tables[0];
    CHECK_MSG(ok && listed[0].kind == EMBER_TABLE_DYNAMIC && listed[0].capacity == dt->capacity &&
                  listed[0].admit_after == dt->admit_after && listed[0].evict == dt->evict &&
                  listed[0].ttl_steps == dt->ttl_steps && listed[0].rows == 0,
              "the listed dynamic table differs from its config");
    ember_collection_config lc = tc->cfg;
    lc.tables = listed;
    ember_collection *l = NULL;
    CHECK_MSG(ok && ember_collection_create(&lc, &l) == EMBER_OK && ember_load(l, ck) == EMBER_OK && same_dynamic(a, l, 1),
              "a collection of the listed tables does not load the checkpoint: %s", ember_errmsg(l));
    ember_collection_destroy(l);
    /* another capacity: keys get slots in key order; rows by key are kept */
    test_config *big = test_config_copy(tc);
    big->tables[0].capacity = 40;
    ember_collection *c = NULL;
    CHECK(ember_collection_create(&big->cfg, &c) == EMBER_OK);
    CHECK(ember_load(c, ck) == EMBER_OK);
    CHECK_MSG(same_dynamic(a, c, 1), "a dynamic table resharded to capacity 40 differs by key");
    /* too small: refused, nothing changed */
    test_config *tiny = test_config_copy(tc);
    tiny->tables[0].capacity = 3;
    ember_collection *d = NULL;
    CHECK(ember_collection_create(&tiny->cfg, &d) == EMBER_OK);
    snap before, after;
    take(d, &before);
    CHECK(ember_load(d, ck) == EMBER_EINVAL && strstr(ember_errmsg(d), "capacity is 3"));
    take(d, &after);
    CHECK(!memcmp(&before, &after, sizeof before));
    for (int step = 0; step < 20; step++) {
        for (int i = 0; i < 6; i++)
            keys[i] = stream_key(r, &s);
        CHECK(train_keys(a, keys, 6, 0, NULL) == EMBER_OK);
        CHECK(train_keys(b, keys, 6, 0, NULL) == EMBER_OK);
    }
    CHECK_MSG(same_dynamic(a, b, 1), "training after a load differs from training on");
    ember_checkpoint_close(ck);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0);
    ember_collection_destroy(a);
    ember_collection_destroy(b);
    ember_collection_destroy(c);
    ember_collection_destroy(d);
    free(s.pool);
    test_config_free(tc);
    test_config_free(big);
    test_config_free(tiny);
}

/* ember_partition_counts: keys counted by destination, against the naive one. */
/* Admission counts survive a reshard to a narrower and a wider sketch: a
 * key counted twice before the save (admit_after 3) is admitted at its next
 * occurrence after the load (an estimate is never below the true count).
 * The saved sketch is large enough that no key is admitted early (checked:
 * the keys are fixed). */
/* The default sketch (sketch_bytes 0): 8 bytes per row of capacity, at
 * least 64 KiB, rounded down to a power of two (docs/dynamic.md,
 * "Admission"): the floor at capacities up to 8191 (8 x 8191 would round
 * down to 32 KiB) and 16383, the per-row size from 16384; an explicit size
 * is kept however small; no sketch below admit_after 2. */
static void test_sketch_default_size(void)
{
    static const int64_t caps[] = {1, 57, 8191, 8192, 8193, 16383, 16384, 100000};
    static const int64_t want[] = {65536, 65536, 65536, 65536, 65536, 65536, 131072, 524288};
    ember_table_config t = ember_table_config_default();
    t.name = "d";
    t.kind = EMBER_TABLE_DYNAMIC;
    t.dim = 4;
    t.admit_after = 2;
    for (int i = 0; i < 8; i++) {
        t.capacity = caps[i];
        int64_t got = ember_dyn_sketch_bytes(ember_dyn_sketch_width(&t));
        CHECK_MSG(got == want[i], "capacity %lld: default sketch %lld bytes, want %lld", (long long)caps[i],
                  (long long)got, (long long)want[i]);
    }
    t.capacity = 57;
    t.sketch_bytes = 64;
    CHECK(ember_dyn_sketch_bytes(ember_dyn_sketch_width(&t)) == 64);
    t.sketch_bytes = 0;
    /* sized by bytes: the floor is at most an eighth of them (200K: 25,600 -> 16 KiB, a power of two) */
    t.capacity = 0;
    t.capacity_bytes = 200 << 10;
    CHECK_MSG(ember_dyn_sketch_bytes(ember_dyn_sketch_width(&t)) == 16384, "capacity_bytes 200K: sketch %lld bytes",
              (long long)ember_dyn_sketch_bytes(ember_dyn_sketch_width(&t)));
    t.dim = 256; /* 1 MiB of 1 KiB rows: an eighth is past the floor, 8 a row below it: the floor itself */
    t.capacity_bytes = 1 << 20;
    CHECK(ember_dyn_sketch_bytes(ember_dyn_sketch_width(&t)) == 65536);
    t.dim = 4;
    t.capacity_bytes = 0;
    t.capacity = 57;
    t.admit_after = 1;
    CHECK(ember_dyn_sketch_width(&t) == 0);
    test_config *tc; /* and what a collection reports */
    ember_collection *c = small(57, 2, EMBER_EVICT_LRU, 0, 0, &tc);
    ember_dynamic_stats ds;
    CHECK(c && ember_table_dynamic_stats(c, 0, &ds) == EMBER_OK && ds.sketch_bytes == 65536);
    ember_collection_destroy(c);
    test_config_free(tc);
}

/* Early admissions with the default sketch on a small table (capacity 57,
 * admit_after 2), fixed seed.  A count-min sketch never counts a key too
 * low, so no key is admitted late; it may count one too high and admit it
 * early.  Two streams, in batches of 28 keys:
 *   - 5,700 draws of Zipf(1.1) over 1,140 keys (20 x capacity, as
 *     configs/dynamic.cfg): early admissions under 1 % of admissions, and
 *     every key of a batch seen twice or more holds a row after it (none
 *     late);
 *   - 2,000 keys seen once each: under 1 % admitted.
 * (bench/sketch_admission.c measures the same; with the 256 bytes that
 * 8 bytes a row would give, about 21 % and 90 %.) */
static void test_sketch_early(void)
{
    enum { V = 1140, DRAWS = 5700, SINGLE = 2000, K = 28 };
    test_rng r = {20240611};
    double cdf[V], sum = 0;
    for (int k = 0; k < V; k++)
        cdf[k] = sum += pow(k + 1.0, -1.1);
    for (int once = 0; once < 2; once++) {
        test_config *tc;
        ember_collection *c = small(57, 2, EMBER_EVICT_LRU, 0, 0, &tc);
        static uint32_t count[V + SINGLE + 1];
        memset(count, 0, sizeof count);
        int64_t admitted = 0, early = 0, late = 0, n_total = once ? SINGLE : DRAWS;
        for (int64_t done = 0; done < n_total; done += K) {
            int64_t keys[K];
            int8_t before[K], after[K];
            int32_t n = (int32_t)(n_total - done < K ? n_total - done : K);
            for (int32_t i = 0; i < n; i++) {
                if (once) {
                    keys[i] = 1 + V + done + i;
                } else {
                    double u = test_uniform(&r) * sum;
                    int lo = 0, hi = V - 1;
                    while (lo < hi) {
                        int mid = (lo + hi) / 2;
                        if (cdf[mid] < u)
                            lo = mid + 1;
                        else
                            hi = mid;
                    }
                    keys[i] = 1 + lo;
                }
            }
            CHECK(ember_dynamic_read(c, 0, keys, n, NULL, NULL, before) == EMBER_OK);
            CHECK(train_keys(c, keys, n, 0, NULL) == EMBER_OK);
            CHECK(ember_dynamic_read(c, 0, keys, n, NULL, NULL, after) == EMBER_OK);
            for (int32_t i = 0; i < n; i++)
                count[keys[i]]++;
            for (int32_t i = 0; i < n; i++) {
                int first = 1;
                for (int32_t j = 0; j < i; j++)
                    first &= keys[j] != keys[i];
                if (!first)
                    continue;
                if (!before[i] && after[i]) {
                    admitted++;
                    early += count[keys[i]] < 2;
                }
                /* never late: a key of this batch seen twice or more holds a row after it
                 * (a batch's 28 keys always find room among 57 rows) */
                late += !after[i] && count[keys[i]] >= 2;
            }
        }
        CHECK_MSG(late == 0, "%lld keys seen twice or more had no row after their step", (long long)late);
        double rate = once ? (double)admitted / SINGLE : admitted ? (double)early / (double)admitted : 0;
        printf("default sketch, capacity 57, %s: %lld admitted, %lld early (%.3f %%)\n",
               once ? "2000 keys seen once" : "Zipf(1.1) over 1140 keys", (long long)admitted, (long long)early,
               100 * rate);
        CHECK_MSG(rate < 0.01, "%s: %.2f %% early admissions with the default sketch (want under 1 %%)",
                  once ? "keys seen once" : "Zipf stream", 100 * rate);
        ember_collection_destroy(c);
        test_config_free(tc);
    }
}

static void test_sketch_reshard(void)
{
    test_config *tc;
    ember_collection *a = small(512, 3, EMBER_EVICT_LRU, 0, 0, &tc);
    tc->tables[0].sketch_bytes = 65536; /* 200 keys: no key's four counters all shared */
    ember_collection_destroy(a);
    CHECK(ember_collection_create(&tc->cfg, &a) == EMBER_OK);
    int64_t keys[40];
    for (int rep = 0; rep < 2; rep++) /* keys 0..199 once, 0..99 twice */
        for (int i0 = 0; i0 < (rep ? 100 : 200); i0 += 40) {
            for (int i = 0; i < 40; i++)
                keys[i] = (int64_t)0x5eed00000000LL + (i0 + i) * 7919;
            CHECK(train_keys(a, keys, 40, 0, NULL) == EMBER_OK);
        }
    ember_dynamic_stats ds;
    CHECK(ember_table_dynamic_stats(a, 0, &ds) == EMBER_OK);
    CHECK_MSG(ds.resident == 0, "%lld keys admitted before their third occurrence", (long long)ds.resident);
    char root[300];
    snprintf(root, sizeof root, "%s/sketch", tmpdir);
    ember_save_options so = {4, 0, NULL, 0, NULL, 0};
    CHECK(ember_save(a, root, &so) == EMBER_OK);
    ember_checkpoint *ck = NULL;
    CHECK(ember_checkpoint_open(root, &ck) == EMBER_OK);
    const int64_t widths[2] = {8192, 262144};
    for (int w = 0; w < 2; w++) {
        test_config *o = test_config_copy(tc);
        o->tables[0].sketch_bytes = widths[w];
        ember_collection *b = NULL;
        CHECK(ember_collection_create(&o->cfg, &b) == EMBER_OK);
        CHECK(ember_load(b, ck) == EMBER_OK);
        int missed = 0;
        for (int i = 0; i < 100; i++) {
            int64_t k = (int64_t)0x5eed00000000LL + i * 7919;
            int8_t found = 0;
            CHECK(train_keys(b, &k, 1, 0, NULL) == EMBER_OK);
            CHECK(ember_dynamic_read(b, 0, &k, 1, NULL, NULL, &found) == EMBER_OK);
            missed += !found;
        }
        CHECK_MSG(missed == 0, "sketch of %lld bytes after a reshard from 65536: %d of 100 keys counted twice "
                  "were not admitted at their third occurrence", (long long)widths[w], missed);
        ember_collection_destroy(b);
        test_config_free(o);
    }
    ember_checkpoint_close(ck);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0);
    ember_collection_destroy(a);
    test_config_free(tc);
}

static void test_partition_counts(test_rng *r)
{
    for (int trial = 0; trial < 20; trial++) {
        test_config *tc = stream_config(r, EMBER_EVICT_LRU, 1, 50);
        tc->cfg.num_shards = (int32_t)test_range(r, 1, 6);
        stream s;
        stream_init(r, &s, 200);
        ember_collection *c = NULL;
        CHECK(ember_collection_create(&tc->cfg, &c) == EMBER_OK);
        test_batch g;
        make_batch(r, &s, (int32_t)test_range(r, 0, 20), 5, 0, &g);
        int64_t n = 2 * (int64_t)tc->cfg.num_shards, got[2][20], want[2][20];
        CHECK(ember_partition_counts(c, &g.b, got[0], got[1]) == EMBER_OK);
        ref_partition_counts(&tc->cfg, &g.b, want[0], want[1]);
        CHECK_MSG(!memcmp(got[0], want[0], 8 * (size_t)n) && !memcmp(got[1], want[1], 8 * (size_t)n),
                  "trial %d: partition counts of a dynamic table differ from the reference (%d shards)", trial,
                  tc->cfg.num_shards);
        test_batch_free(&g);
        ember_collection_destroy(c);
        free(s.pool);
        test_config_free(tc);
    }
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    const char *tmp = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/ember-test-dynamic-%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    mkdir(tmpdir, 0700);
    test_keymap(&r);
    test_streams(&r);
    test_fresh_slot();
    test_admission();
    test_failed_forward();
    test_evaluation();
    test_ttl_boundary();
    test_lookahead();
    test_lookahead_no_rows();
    test_bad_config();
    test_checkpoint(&r);
    test_sketch_reshard();
    test_sketch_default_size();
    test_sketch_early();
    test_partition_counts(&r);
    for (int t = 0; t < 2; t++) {
        char d[300];
        snprintf(d, sizeof d, "%s/%d", tmpdir, t);
        rmdir(d);
    }
    rmdir(tmpdir);
    return check_report("test_dynamic");
}
