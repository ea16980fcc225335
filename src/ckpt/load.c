/*
 * load.c: ember_load, a checkpoint into a live collection, resharding on
 * the way (any saving world and placement -> this world and placement).
 *
 * Every rank has the whole checkpoint open (mapped), so no row data moves
 * between ranks: each rank walks the rows it holds under its own placement,
 * asks ckpt_read_rows for the canonical full row and state, and stores the
 * parts it keeps (a column slice under COLUMN; for Adam the m and v slices;
 * row-wise Adagrad's one float on every rank).  Checks come first, for every
 * table, and are agreed over the world before any byte of any table is
 * written, so a failed load leaves the collection as it was.  Only the
 * optimizer kind must match; learning rate and the other hyper-parameters
 * are the collection's own.
 */
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_impl.h"
#include "collection/collection.h"
#include "collection/shard.h"
#include "dyn/dyn.h"
#include "exchange/exchange.h"
#include "exchange/hot.h"

#define CHUNK_ROWS 1024

typedef struct scratch {
    float *values, *state, **vp, **sp;
    uint32_t *ids;
} scratch;

/* ---------------------------------------------------------- dynamic tables
 * A dynamic table's keys go to their owners in this world (mix64(key) mod
 * W).  Saved by a world of the same size with the same capacity and sketch,
 * every rank takes its own file's slots, metadata, sketch and counters as
 * they were (and the rows, stale free ones included, as any ROW table), so
 * training continues bit for bit.  Otherwise each rank gathers the keys it
 * owns from every file, gives them slots 0, 1, ... in key order, reads
 * their rows, and takes the element-wise maximum of the saved sketches
 * (folded to its width: an estimate never drops below a key's count);
 * rank 0 takes the summed counters. */

typedef struct dyn_entry {
    uint64_t key;
    int64_t old_row;   /* slot * saving world + saving rank */
    uint32_t last, count;
} dyn_entry;

static int cmp_entry(const void *a, const void *b)
{
    uint64_t x = ((const dyn_entry *)a)->key, y = ((const dyn_entry *)b)->key;
    return (x > y) - (x < y);
}

static int same_layout(const ember_collection *c, const ckpt_table_info *ti, const ember_dyn *d)
{
    return ti->world == c->world->size && ti->capacity == d->p.capacity && ti->sketch_width == d->p.sketch_width;
}

/* The keys this rank owns in table j of ck (count only when out is NULL). */
static int64_t owned_entries(const ember_collection *c, const ember_checkpoint *ck, int32_t j, dyn_entry *out)
{
    const ckpt_table_info *ti = &ck->tables[j];
    int32_t W = c->world->size, rank = c->world->rank;
    int64_t n = 0;
    for (int32_t r = 0; r < ti->world; r++) {
        ckpt_dyn_part part;
        ckpt_dyn_read(ck, j, r, &part);
        for (int64_t s = 0; s < ti->capacity; s++) {
            const uint8_t *p = part.slots + CKPT_KEYS_SLOT * s;
            uint32_t count = ckpt_get_u32(p + 12);
            uint64_t key = ckpt_get_u64(p);
            if (count == 0 || (int32_t)ember_dyn_owner((int64_t)key, W) != rank)
                continue;
            if (out)
                out[n] = (dyn_entry){key, s * ti->world + r, ckpt_get_u32(p + 8), count};
            n++;
        }
    }
    return n;
}

static int check_dynamic(ember_collection *c, const ember_checkpoint *ck, int32_t t, int32_t j)
{
    const ember_dyn *d = &c->ptables[c->tables[t].ptable].dyn->d;
    const ckpt_table_info *ti = &ck->tables[j];
    if (same_layout(c, ti, d))
        return EMBER_OK;
    int64_t n = owned_entries(c, ck, j, NULL);
    if (n > d->p.capacity)
        return ember_fail(c, EMBER_EINVAL,
                          "table \"%s\": rank %d would own %lld of the checkpoint's keys, its capacity is %lld",
                          c->tables[t].cfg.name, (int)c->world->rank, (long long)n, (long long)d->p.capacity);
    return EMBER_OK;
}

static int store_rows(const ember_ptable *pt, int32_t dim, scratch *b, int64_t n);

/* The key index (and, resharding, the rows) of dynamic table t. */
static int load_dynamic(ember_collection *c, const ember_checkpoint *ck, int32_t t, int32_t j, scratch *b)
{
    const ember_ptable *pt = &c->ptables[c->tables[t].ptable];
    ember_dyn *d = &pt->dyn->d;
    const ckpt_table_info *ti = &ck->tables[j];
    int32_t rank = c->world->rank, dim = ti->dim, sf = ti->state_floats;
    ember_dyn_clear(d);
    if (same_layout(c, ti, d)) {
        ckpt_dyn_part part;
        ckpt_dyn_read(ck, j, rank, &part);
        for (int64_t s = 0; s < ti->capacity; s++) {
            const uint8_t *p = part.slots + CKPT_KEYS_SLOT * s;
            uint32_t count = ckpt_get_u32(p + 12);
            if (count)
                ember_dyn_put(d, (uint32_t)s, ckpt_get_u64(p), ckpt_get_u32(p + 8), count);
        }
        for (int64_t i = 0; ti->sketch_lines && i < 4 * d->p.sketch_width; i++)
            d->sketch[i] = (uint16_t)(part.sketch[2 * i] | part.sketch[2 * i + 1] << 8);
        d->total = (ember_dyn_counters){part.counters[0], part.counters[1], part.counters[2], part.counters[3],
                                        part.counters[4]};
        ember_dyn_loaded(d);
        return EMBER_OK; /* rows: load_table, as any ROW table */
    }
    int64_t n = owned_entries(c, ck, j, NULL);
    dyn_entry *e = malloc(sizeof *e * (size_t)(n + 1));
    if (!e)
        return EMBER_ENOMEM;
    owned_entries(c, ck, j, e);
    qsort(e, (size_t)n, sizeof *e, cmp_entry);
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        ember_dyn_put(d, (uint32_t)i, e[i].key, e[i].last, e[i].count);
        ckpt_read_rows(ck, j, e[i].old_row, 1, b->values + k * dim, b->state + k * sf);
        b->ids[k++] = (uint32_t)i;
        if (k == CHUNK_ROWS || i + 1 == n) {
            if (store_rows(pt, dim, b, k) != EMBER_OK) {
                free(e);
                return EMBER_EIO;
            }
            k = 0;
        }
    }
    free(e);
    for (int32_t r = 0; r < ti->world; r++) {
        ckpt_dyn_part part;
        ckpt_dyn_read(ck, j, r, &part);
        /* lines of 32 counters; a key's line is its hash mod lines, so new line
         * l takes the maximum over the saved lines congruent to l */
        int64_t lines = d->p.sketch_width / 8, saved_lines = ti->sketch_lines ? ti->sketch_width / 8 : 0;
        for (int64_t i = 0; d->sketch && saved_lines && i < 32 * lines; i++) {
            int64_t line = i / 32, within = i % 32;
            for (int64_t from = line & (saved_lines - 1); from < saved_lines; from += lines) {
                const uint8_t *p = part.sketch + 2 * (32 * from + within);
                uint16_t v = (uint16_t)(p[0] | p[1] << 8);
                if (v > d->sketch[i])
                    d->sketch[i] = v;
            }
        }
        if (rank == 0) {
            d->total.admitted += part.counters[0];
            d->total.evicted += part.counters[1];
            d->total.expired += part.counters[2];
            d->total.evicted_count_sum += part.counters[3];
            d->total.not_admitted += part.counters[4];
        }
    }
    ember_dyn_loaded(d);
    return EMBER_OK;
}

static int check_table(ember_collection *c, const ember_checkpoint *ck, int32_t t, int32_t *found)
{
    const ember_table_config *tc = &c->tables[t].cfg;
    *found = -1;
    for (int32_t j = 0; j < ck->num_tables && *found < 0; j++)
        if (strcmp(ck->tables[j].name, tc->name) == 0)
            *found = j;
    if (*found < 0)
        return ember_fail(c, EMBER_EINVAL, "table \"%s\": not in the checkpoint %s", tc->name, ck->path);
    const ckpt_table_info *ti = &ck->tables[*found];
    if ((ti->kind == EMBER_TABLE_DYNAMIC) != (tc->kind == EMBER_TABLE_DYNAMIC))
        return ember_fail(c, EMBER_EINVAL, "table \"%s\": checkpoint has a %s table, the collection a %s one",
                          tc->name, ti->kind == EMBER_TABLE_DYNAMIC ? "dynamic" : "fixed",
                          tc->kind == EMBER_TABLE_DYNAMIC ? "dynamic" : "fixed");
    if (ti->kind != EMBER_TABLE_DYNAMIC && ti->rows != tc->rows)
        return ember_fail(c, EMBER_EINVAL, "table \"%s\": checkpoint has rows %lld, the collection %lld",
                          tc->name, (long long)ti->rows, (long long)tc->rows);
    if (ti->dim != tc->dim)
        return ember_fail(c, EMBER_EINVAL, "table \"%s\": checkpoint has dim %d, the collection %d", tc->name,
                          (int)ti->dim, (int)tc->dim);
    if (ti->opt.kind != tc->optimizer.kind)
        return ember_fail(c, EMBER_EINVAL, "table \"%s\": checkpoint has optimizer %s, the collection %s",
                          tc->name, ckpt_optimizer_name(ti->opt.kind), ckpt_optimizer_name(tc->optimizer.kind));
    return ti->kind == EMBER_TABLE_DYNAMIC ? check_dynamic(c, ck, t, *found) : EMBER_OK;
}


/* Stores this rank's parts of n canonical rows (values v, state s) as the
 * local rows ids[0..n) of physical table pt. */
static int store_rows(const ember_ptable *pt, int32_t dim, scratch *b, int64_t n)
{
    int32_t c = pt->local_dim, sf = ember_state_floats(pt->opt.kind, dim);
    int column = pt->placement == EMBER_PLACE_COLUMN;
    int32_t c0 = column ? pt->col0 : 0, w = dim - c0;
    w = w < 0 ? 0 : w > c ? c : w;
    if (pt->store->ops->acquire(pt->store, b->ids, n, b->vp, b->sp) != EMBER_OK)
        return EMBER_EIO;
    for (int64_t i = 0; i < n; i++) {
        const float *v = b->values + i * dim, *s = b->state + i * sf;
        float *sv = b->sp[i];
        memcpy(b->vp[i], v + c0, sizeof(float) * (size_t)w);
        if (sf == 0)
            continue;
        if (!column) {
            memcpy(sv, s, sizeof(float) * (size_t)sf);
            continue;
        }
        int nv = ember_state_vectors(pt->opt.kind); /* each vector's columns (Adam: m, v), the row floats */
        for (int j = 0; j < nv; j++)
            memcpy(sv + (int64_t)j * c, s + (int64_t)j * dim + c0, sizeof(float) * (size_t)w);
        memcpy(sv + (int64_t)nv * c, s + (int64_t)nv * dim, sizeof(float) * (size_t)ember_state_row_floats(pt->opt.kind));
    }
    return pt->store->ops->release(pt->store, b->ids, n, 1);
}

/* Writes logical table t from checkpoint table j on this rank.  Only the
 * SSD tier can fail here (EMBER_EIO, message on its store). */
static int load_table(ember_collection *c, const ember_checkpoint *ck, int32_t t, int32_t j, scratch *b)
{
    const ember_ltable *lt = &c->tables[t];
    const ember_ptable *pt = &c->ptables[lt->ptable];
    if (pt->dyn) {
        int st = load_dynamic(c, ck, t, j, b);
        if (st != EMBER_OK || !same_layout(c, &ck->tables[j], &pt->dyn->d))
            return st;
    }
    int32_t W = c->world->size, rank = c->world->rank, dim = lt->cfg.dim;
    int32_t sf = ember_state_floats(pt->opt.kind, dim);
    int64_t n = 0;
    for (int64_t r = 0; r < lt->cfg.rows; r++) {
        uint32_t phys = (uint32_t)(lt->offset + r);
        if (!ember_shard_holds(pt, W, rank, phys))
            continue;
        ckpt_read_rows(ck, j, r, 1, b->values + n * dim, b->state + n * sf);
        b->ids[n++] = ember_shard_local(pt, W, phys);
        if (n == CHUNK_ROWS) {
            if (store_rows(pt, dim, b, n) != EMBER_OK)
                return EMBER_EIO;
            n = 0;
        }
    }
    return n > 0 ? store_rows(pt, dim, b, n) : EMBER_OK;
}

int ember_load(ember_collection *c, const ember_checkpoint *ck)
{
    if (!c)
        return EMBER_EINVAL;
    if (c->panicked)
        return ember_fail(c, EMBER_EPANIC, "collection disabled by an earlier fatal error");
    int32_t T = c->cfg.num_tables, maxdim = 1;
    int32_t *found = calloc((size_t)T + 1, sizeof *found);
    scratch b = {0};
    int st = found ? EMBER_OK : ember_fail(c, EMBER_ENOMEM, "out of memory");
    if (st == EMBER_OK && !ck)
        st = ember_fail(c, EMBER_EINVAL, "ember_load: no checkpoint (NULL)");
    if (st == EMBER_OK && c->pending)
        st = ember_fail(c, EMBER_ESTATE, "ember_load while a batch is begun (ember_forward_begin): end it first");
    for (int32_t t = 0; t < T && st == EMBER_OK; t++) {
        st = check_table(c, ck, t, &found[t]);
        if (c->tables[t].cfg.dim > maxdim)
            maxdim = c->tables[t].cfg.dim;
    }
    if (st == EMBER_OK) {
        b.values = malloc(sizeof(float) * (size_t)maxdim * CHUNK_ROWS);
        b.state = malloc(sizeof(float) * (size_t)maxdim * 2 * CHUNK_ROWS);
        b.vp = malloc(sizeof(float *) * 2 * CHUNK_ROWS);
        b.ids = malloc(sizeof(uint32_t) * CHUNK_ROWS);
        if (!b.values || !b.state || !b.vp || !b.ids)
            st = ember_fail(c, EMBER_ENOMEM, "out of memory for loading");
        b.sp = b.vp ? b.vp + CHUNK_ROWS : NULL;
    }
    /* one check over the world: the same checkpoint everywhere */
    int64_t mine[2] = {ck ? ck->step : -1, ck ? (int64_t)ck->files[0].checksum : 0}, *all = NULL;
    if (st == EMBER_OK && !(all = calloc(2 * (size_t)c->world->size, sizeof(int64_t))))
        st = ember_fail(c, EMBER_ENOMEM, "out of memory");
    int agreed = ember_dist_agree(c, st, NULL);
    if (agreed == EMBER_OK && ember_comm_allgather(c->world, mine, sizeof mine, all) != EMBER_OK) {
        c->panicked = 1;
        agreed = ember_fail(c, EMBER_ECOMM, "%s", c->world->errmsg);
    }
    for (int32_t r = 0; agreed == EMBER_OK && r < c->world->size; r++)
        if (all[2 * r] != all[0] || all[2 * r + 1] != all[1])
            agreed = ember_fail(c, EMBER_EINVAL, "rank %d opened another checkpoint than rank 0", (int)r);
    if (agreed == EMBER_OK) {
        int failed = -1;
        for (int32_t t = 0; t < T && failed < 0; t++)
            if (load_table(c, ck, t, found[t], &b) != EMBER_OK)
                failed = t;
        c->stats.steps = ck->opt_steps;
        c->routed = 0; /* a pending backward would apply to the old rows */
        if (failed >= 0) {
            /* an SSD store failed half-way: the tables are neither old nor
             * new, so the collection refuses further work */
            c->panicked = 1;
            agreed = ember_fail(c, EMBER_EIO, "loading table '%s': %s; the collection is disabled",
                                c->tables[failed].cfg.name, c->ptables[c->tables[failed].ptable].store->errmsg);
        }
        if ((agreed = ember_dist_agree(c, agreed, NULL)) != EMBER_OK)
            c->panicked = 1;
        for (int32_t p = 0; p < c->num_ptables && agreed == EMBER_OK; p++) /* the hot rows' copies (agreed) */
            if ((agreed = ember_hot_reload(c, p)) != EMBER_OK)
                c->panicked = 1; /* copies and tables would differ */
    }
    free(all);
    free(found);
    free(b.values);
    free(b.state);
    free(b.vp);
    free(b.ids);
    return agreed;
}
