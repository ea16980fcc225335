/*
 * bench_batches.c: what ember_bench_run measures on (bench.h): the
 * collection (one table and one SUM feature per table of the shape,
 * uniform init, every table with the measurement's placement, storage and
 * kind), and every batch drawn before the clock starts.  Every rank draws
 * the same global batches and keeps its samples [r*B/W, (r+1)*B/W)
 * (batch_slice.h); the distinct rows of the global batches are counted
 * per table for the line.  A dynamic table's keys are the ids scattered
 * over 64 bits by splitmix64's finaliser (a bijection), as open ids are.
 * d_pooled is this rank's rows of one global [B x W] draw.
 */
#include <stdlib.h>
#include <string.h>

#include "collection/collection.h"
#include "collection/config.h"
#include "api/batch_slice.h"
#include "api/bench.h"
#include "comm/comm.h"

/* splitmix64's finaliser: a bijection of 64-bit words. */
static uint64_t splitmix_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t splitmix(uint64_t *state) { return splitmix_mix(*state += 0x9e3779b97f4a7c15ULL); }

/* Table t's config. */
static ember_table_config table_of(const bench_run *r, int32_t t, const char *name)
{
    const ember_bench_config *c = r->c;
    ember_optimizer opt = ember_optimizer_default(c->optimizer);
    opt.lr = (float)c->lr;
    ember_table_config tc = ember_table_config_default();
    tc.name = name;
    tc.rows = c->shape.rows;
    tc.dim = c->dim;
    tc.init = EMBER_INIT_UNIFORM;
    tc.optimizer = opt;
    tc.placement = c->placement;
    tc.owner = c->placement == EMBER_PLACE_TABLE ? t % r->R : 0;
    tc.exchange = c->exchange;
    tc.hot_rows = c->hot_rows;
    tc.precision = c->precision;
    tc.rounding = c->rounding;
    if (ember_element_state(tc.optimizer.kind)) /* Adagrad, Adam */
        tc.state_precision = c->state_precision;
    tc.storage = c->storage;
    tc.cache_bytes = c->cache_bytes;
    tc.cache_policy = c->policy;
    if (c->dynamic) {
        tc.kind = EMBER_TABLE_DYNAMIC;
        tc.rows = 0;
        tc.capacity = (c->shape.rows + r->R - 1) / r->R;
        tc.admit_after = c->admit_after;
        tc.evict = c->evict;
        tc.ttl_steps = c->evict == EMBER_EVICT_TTL ? 8 : 0;
    }
    return tc;
}

/* --written: every row of every SSD store written with its initial values
 * (acquired, which computes a row never written, then released dirty:
 * 65536 rows a request batch, consecutive rows one request), so that no
 * row is left for the initializer.  (ember_table_write would do it one row
 * at a time.)  EMBER_OK, or a status with r->why. */
static int write_every_row(bench_run *r)
{
    const int64_t chunk = 65536;
    uint32_t *rows = malloc(sizeof(uint32_t) * (size_t)chunk);
    float **v = malloc(sizeof(float *) * (size_t)chunk), **sv = malloc(sizeof(float *) * (size_t)chunk);
    int st = rows && v && sv ? EMBER_OK : EMBER_ENOMEM;
    for (int32_t p = 0; p < r->coll->num_ptables && st == EMBER_OK; p++) {
        ember_store *s = r->coll->ptables[p].store;
        if (!s->staged)
            continue;
        for (int64_t first = 0; first < s->rows && st == EMBER_OK; first += chunk) {
            int64_t n = s->rows - first < chunk ? s->rows - first : chunk;
            for (int64_t i = 0; i < n; i++)
                rows[i] = (uint32_t)(first + i);
            if ((st = s->ops->acquire(s, rows, n, v, sv)) == EMBER_OK)
                st = s->ops->release(s, rows, n, 1);
            if (st != EMBER_OK)
                snprintf(r->why, sizeof r->why, "writing every row (--written): %s", s->errmsg);
        }
    }
    if (st == EMBER_ENOMEM)
        snprintf(r->why, sizeof r->why, "out of memory for writing every row (--written)");
    free(rows), free(v), free(sv);
    return st;
}

int bench_build_collection(bench_run *r)
{
    const ember_bench_config *c = r->c;
    const int32_t T = c->shape.tables;
    r->tcfg = calloc((size_t)T, sizeof *r->tcfg);
    r->fcfg = calloc((size_t)T, sizeof *r->fcfg);
    r->names = malloc((size_t)T * 32);
    if (!r->tcfg || !r->fcfg || !r->names) {
        snprintf(r->why, sizeof r->why, "out of memory for the config");
        return EMBER_ENOMEM;
    }
    for (int32_t t = 0; t < T; t++) {
        char *tn = r->names + (size_t)t * 32, *fn = tn + 16;
        snprintf(tn, 16, "t%d", t);
        snprintf(fn, 16, "f%d", t);
        r->tcfg[t] = table_of(r, t, tn);
        r->fcfg[t].name = fn;
        r->fcfg[t].table = t;
        r->fcfg[t].combiner = EMBER_COMBINER_SUM;
    }
    ember_collection_config *cc = &r->ccfg;
    *cc = ember_collection_config_default();
    cc->tables = r->tcfg;
    cc->num_tables = T;
    cc->features = r->fcfg;
    cc->num_features = T;
    cc->seed = c->shape.seed;
    cc->threads = c->threads;
    cc->ssd_dir = c->ssd_dir;
    cc->lookahead = c->lookahead;
    cc->lookahead_max = c->lookahead_max;
    cc->ssd_buffered = c->buffered;
    cc->io_threads = c->io_threads;
    cc->world = c->world;
    cc->schedule = c->schedule;
    double t0 = ember_now();
    int st = ember_collection_create(cc, &r->coll);
    if (st != EMBER_OK)
        snprintf(r->why, sizeof r->why, "ember_collection_create: %s: %s", ember_status_str(st), ember_errmsg(NULL));
    else if (c->written && c->storage == EMBER_STORAGE_SSD && !c->dynamic)
        st = write_every_row(r);
    r->create_ms = (ember_now() - t0) * 1e3;
    return st;
}

/* The buffers of the batches and of the iterations. */
static int alloc_buffers(bench_run *r)
{
    const int64_t W = ember_pooled_width(r->coll);
    const size_t lb = (size_t)(r->local_b > 0 ? r->local_b : 1);
    r->ids = malloc((size_t)r->nb * (size_t)(r->local_ids > 0 ? r->local_ids : 1) * sizeof *r->ids);
    r->lengths = malloc((size_t)r->c->shape.tables * lb * sizeof *r->lengths);
    r->pooled = malloc(lb * (size_t)W * sizeof *r->pooled);
    r->pooled_next = malloc(lb * (size_t)W * sizeof *r->pooled_next);
    r->d_pooled = malloc(lb * (size_t)W * sizeof *r->d_pooled);
    r->t_it = calloc((size_t)4 * r->c->iters, sizeof *r->t_it);
    r->pred = calloc((size_t)2 * r->R, sizeof *r->pred);
    r->by_rank = calloc((size_t)r->R, sizeof *r->by_rank);
    return r->ids && r->lengths && r->pooled && r->pooled_next && r->d_pooled && r->t_it && r->pred && r->by_rank
               ? EMBER_OK
               : EMBER_ENOMEM;
}

/* Distinct rows of each table of the global batch b, into r->distinct. */
static void count_distinct(bench_run *r, const ember_batch *b, uint64_t *seen, size_t words)
{
    const ember_synth_config *sh = &r->c->shape;
    const int64_t per_table = (int64_t)sh->batch_size * sh->pooling;
    for (int32_t t = 0; t < sh->tables; t++) {
        memset(seen, 0, words * sizeof *seen);
        const int64_t *p = b->ids + t * per_table;
        for (int64_t i = 0; i < per_table; i++) {
            uint64_t bit = 1ULL << (p[i] & 63);
            r->distinct += !(seen[p[i] >> 6] & bit);
            seen[p[i] >> 6] |= bit;
        }
    }
}

/* Draws the batches: this rank's share of each kept in r->ids.  EMBER_OK,
 * or a status with r->why. */
static int draw(bench_run *r, ember_synth *synth)
{
    const ember_bench_config *c = r->c;
    const size_t words = (size_t)((c->shape.rows + 63) / 64);
    uint64_t *seen = c->dynamic ? NULL : malloc(words * sizeof *seen);
    batch_slice slice = {0};
    int st = c->dynamic || seen ? EMBER_OK : EMBER_ENOMEM;
    if (st != EMBER_OK)
        snprintf(r->why, sizeof r->why, "out of memory for the pre-generated batches");
    for (int n = 0; n < r->nb && st == EMBER_OK; n++) {
        ember_batch b;
        if (ember_synth_next(synth, &b) != EMBER_OK) {
            snprintf(r->why, sizeof r->why, "ember_synth_next failed");
            st = EMBER_EINPUT;
            break;
        }
        if (!c->dynamic)
            count_distinct(r, &b, seen, words);
        if (r->R > 1) {
            if (batch_slice_take(&slice, &b, r->rank, r->R) || slice.batch.num_ids != r->local_ids) {
                snprintf(r->why, sizeof r->why, "could not slice the batch");
                st = EMBER_EINPUT;
                break;
            }
            b = slice.batch;
        }
        int64_t *dst = r->ids + (size_t)n * r->local_ids;
        memcpy(dst, b.ids, (size_t)r->local_ids * sizeof *dst);
        if (c->dynamic) /* keys: the ids scattered over 64 bits (a bijection), as open ids are */
            for (int64_t i = 0; i < r->local_ids; i++)
                dst[i] = (int64_t)splitmix_mix((uint64_t)dst[i]);
        if (n == 0) /* every bag holds `pooling` ids: one lengths array for all */
            memcpy(r->lengths, b.lengths, (size_t)c->shape.tables * r->local_b * sizeof *r->lengths);
    }
    batch_slice_free(&slice);
    free(seen);
    return st;
}

/* d_pooled: this rank's rows of one global [B x W] draw in [-1, 1); pooled
 * zeroed. */
static void fill_gradient(bench_run *r)
{
    const int64_t W = ember_pooled_width(r->coll), lo = (int64_t)r->first * W;
    uint64_t rs = r->c->shape.seed ^ 0x6a09e667f3bcc908ULL;
    for (int64_t i = 0; i < (int64_t)(r->first + r->local_b) * W; i++) {
        float v = (float)((double)(splitmix(&rs) >> 40) * 0x1.0p-23 - 1.0);
        if (i >= lo) {
            r->d_pooled[i - lo] = v;
            r->pooled[i - lo] = 0;
        }
    }
}

int bench_draw_batches(bench_run *r)
{
    const ember_bench_config *c = r->c;
    batch_slice_range(c->shape.batch_size, r->rank, r->R, &r->first, &r->local_b);
    r->local_ids = (int64_t)c->shape.tables * r->local_b * c->shape.pooling;
    double t0 = ember_now();
    ember_synth_config gen = c->shape; /* dynamic: the key space's law */
    if (c->dynamic && c->key_bits)
        gen.rows = INT64_C(1) << c->key_bits;
    ember_synth *synth = NULL;
    int st = ember_synth_create(&gen, &synth);
    if (st != EMBER_OK) {
        snprintf(r->why, sizeof r->why, "ember_synth_create: %s", ember_errmsg(NULL));
    } else if ((st = alloc_buffers(r)) != EMBER_OK) {
        snprintf(r->why, sizeof r->why, "out of memory for the pre-generated batches");
    } else {
        st = draw(r, synth);
    }
    r->gen_ms = (ember_now() - t0) * 1e3;
    ember_synth_destroy(synth);
    if (st == EMBER_OK)
        fill_gradient(r);
    return st;
}
