/*
 * model.c: the cost model (plan.h, docs/planner.md "The cost model").
 *
 * For a config whose tables carry placements, it predicts what every rank
 * sends and receives in one forward + backward, message by message as the
 * wire format of docs/distributed.md defines them, and what it looks up and
 * stores.  Everything is an expectation over the id law of each table
 * (stats.c), with bags of L independent draws:
 *   q_d        the id mass on owner d: the hot rows placed exactly by
 *              (offset + row) % W, the rest spread over the other rows;
 *   touch      a bag of L ids touches owner d with probability 1-(1-q_d)^L;
 *   D_d(n)     expected distinct rows of owner d among n ids, the same split
 *              of the distinct curve D(n).
 * Stacking is recomputed as the library does it (layout.c), because the
 * offset of a table inside its physical table decides which rank owns its
 * hot rows.  Sums over the other ranks are "over all ranks, minus this
 * one", so one table costs O(world + hot rows) whatever the world size.
 * Lookups are counted in 64-byte lines, and not at all for a share of a
 * table small enough (1 MiB) to stay in cache.
 *
 * A dynamic table is the row-wise table of capacity * W rows its keys
 * resolve to, with keyed statistics: a key's owner is mix64(key) mod W, so
 * the hot keys fall where they hash and the rest evenly; its distinct rows
 * per owner are its distinct keys per owner.  Before routing, every key
 * occurrence goes to its owner (8 bytes) and its slot comes back (4
 * bytes).  Its memory per rank is its capacity's rows and state plus its
 * key index (dynamic.c), which stays in DRAM on the SSD tier too.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collection/config.h"
#include "dyn/dyn.h"
#include "optim/optim.h"
#include "plan/plan.h"
#include "table/layout.h"
#include "tier/tier.h"

#define LINE 64.0 /* a random row access reads whole cache lines */
/* A rank's share of a table (rows + state) of at most this stays in the
 * core's L2 cache: its lookups cost no memory traffic and are not counted. */
#define CACHE_BYTES (1 << 20)


static double lines(double bytes) { return LINE * ceil(bytes / LINE); }

double plan_rank_weight(const plan_rank_cost *c, double lookup_weight)
{
    double s = c->a2a_sent + c->ag_sent, r = c->a2a_recv + c->ag_recv;
    return (s > r ? s : r) + lookup_weight * c->lookup_bytes;
}

static int is_dynamic(const ember_table_config *tb) { return tb->kind == EMBER_TABLE_DYNAMIC; }

/* Rows of the table as the library lays it out: a dynamic table's
 * capacity on each of the W ranks. */
static int64_t table_rows(const ember_table_config *tb, int32_t W)
{
    return is_dynamic(tb) ? plan_dynamic_capacity(tb) * W : tb->rows;
}

/* Physical tables as layout.c builds them: group[t], offset[t]
 * (ember_stack_offset), and the rows of each group (group_rows[g]);
 * members[g] counts its tables. */
static int same_group(const ember_table_config *a, const ember_table_config *b)
{
    if (is_dynamic(a) || is_dynamic(b))
        return 0; /* a dynamic table's rows are slot * W + owner: never offset */
    return a->dim == b->dim && !memcmp(&a->optimizer, &b->optimizer, sizeof a->optimizer) &&
           a->placement == b->placement && a->exchange == b->exchange &&
           (a->placement != EMBER_PLACE_TABLE || a->owner == b->owner) && a->storage == b->storage;
}

static void stack_tables(const ember_collection_config *cfg, int32_t W, int32_t *group, int64_t *offset,
                         int64_t *group_rows, int32_t *first, int32_t *members, int32_t *ngroups)
{
    int32_t n = 0;
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        int32_t g = -1;
        if (cfg->stack_tables)
            for (int32_t q = 0; q < n && g < 0; q++)
                if (same_group(&cfg->tables[first[q]], &cfg->tables[t]))
                    g = q;
        if (g < 0) {
            g = n++;
            first[g] = t;
            group_rows[g] = 0;
            members[g] = 0;
        }
        group[t] = g;
        offset[t] = ember_stack_offset(group_rows[g], members[g]++, cfg->tables[t].placement,
                                       cfg->num_shards > 0 ? cfg->num_shards : W);
        group_rows[g] = offset[t] + table_rows(&cfg->tables[t], W);
    }
    *ngroups = n;
}

/* Scratch of one table's per-owner quantities, [W] each. */
typedef struct owner_view {
    int32_t W;
    const plan_id_stats *s;
    int64_t offset;
    int32_t *hot_owner;  /* [PLAN_HOT_ROWS]                                */
    double *tail_cnt;    /* rows of the table on d that are not hot        */
    double tail_rows;    /* rows - hot                                     */
    double tail_mass;
    int32_t owner;       /* TABLE: the one owner; -1: ROW                  */
    const uint8_t *repl; /* [hot] 1: a hot row copied on every rank (hot
                            rows): no owner serves it; NULL: none          */
} owner_view;

static void view_init(owner_view *v, const plan_id_stats *s, int32_t W, int64_t offset,
                      int32_t owner)
{
    v->s = s;
    v->W = W;
    v->offset = offset;
    v->owner = owner;
    v->repl = NULL;
    if (owner >= 0)
        return;
    double hot_mass = 0;
    if (s->keyed) { /* keys hash to their owners: the tail evenly */
        for (int32_t d = 0; d < W; d++)
            v->tail_cnt[d] = (double)(s->rows - s->hot) / W;
        for (int32_t k = 0; k < s->hot; k++) {
            v->hot_owner[k] = (int32_t)ember_dyn_owner(s->hot_row[k], W);
            hot_mass += s->hot_p[k];
        }
        v->tail_rows = (double)(s->rows - s->hot);
        v->tail_mass = hot_mass < 1 ? 1 - hot_mass : 0;
        return;
    }
    int64_t R = s->rows, base = R / W, extra = R % W, o = offset % W;
    for (int32_t d = 0; d < W; d++) /* rows p in [offset, offset+R), p % W == d */
        v->tail_cnt[d] = (double)(base + (((d - o) % W + W) % W < extra ? 1 : 0));
    for (int32_t k = 0; k < s->hot; k++) {
        v->hot_owner[k] = (int32_t)((offset + s->hot_row[k]) % W);
        v->tail_cnt[v->hot_owner[k]] -= 1;
        hot_mass += s->hot_p[k];
    }
    v->tail_rows = (double)(R - s->hot);
    v->tail_mass = hot_mass < 1 ? 1 - hot_mass : 0;
}

/* out[d] = id mass on owner d */
static void view_mass(const owner_view *v, double *out)
{
    int32_t W = v->W;
    if (v->owner >= 0) {
        memset(out, 0, sizeof *out * (size_t)W);
        out[v->owner] = 1;
        return;
    }
    double per = v->tail_rows > 0 ? v->tail_mass / v->tail_rows : 0;
    for (int32_t d = 0; d < W; d++)
        out[d] = per * v->tail_cnt[d];
    for (int32_t k = 0; k < v->s->hot; k++)
        if (!v->repl || !v->repl[k])
            out[v->hot_owner[k]] += v->s->hot_p[k];
}

/* out[d] = expected distinct rows of owner d among n ids */
static void view_distinct(const owner_view *v, double n, double *out)
{
    int32_t W = v->W;
    double D = plan_stats_distinct(v->s, n);
    if (v->owner >= 0) {
        memset(out, 0, sizeof *out * (size_t)W);
        out[v->owner] = D;
        return;
    }
    memset(out, 0, sizeof *out * (size_t)W);
    double hot = 0;
    for (int32_t k = 0; k < v->s->hot; k++) {
        double g = plan_touch(v->s->hot_p[k], n);
        if (!v->repl || !v->repl[k])
            out[v->hot_owner[k]] += g;
        hot += g;
    }
    double rest = D > hot ? D - hot : 0, per = v->tail_rows > 0 ? rest / v->tail_rows : 0;
    for (int32_t d = 0; d < W; d++)
        out[d] += per * v->tail_cnt[d];
}

/* The per-step shape of one logical table's features. */
typedef struct table_shape {
    double n_ids;       /* ids per sample, all its features (N_t)          */
    double segs_all;    /* segments per sample: pooled bags + NONE ids     */
    double ents_all;    /* entries per sample after dedup                  */
} table_shape;

typedef struct model_ctx {
    const plan_workload *w;
    int32_t W;
    int64_t B;
    int64_t *b;          /* [W] local batch sizes                          */
    int64_t b_lo, b_hi, n_hi; /* the two sizes, ranks with b_hi            */
    double h, x;         /* header and entry bytes                         */
    owner_view v;
    double *q, *segps, *entps, *uq_lo, *uq_hi, *upd, *tmp; /* [W] each     */
} model_ctx;

/* Bytes of rows + state of table tb on the rank holding most of it. */
static int64_t share_bytes(const ember_table_config *tb, int32_t W)
{
    int32_t ld = tb->placement == EMBER_PLACE_COLUMN ? (tb->dim + W - 1) / W : tb->dim;
    int64_t lr = tb->placement == EMBER_PLACE_ROW ? (table_rows(tb, W) + W - 1) / W : tb->rows;
    return lr * (ember_row_bytes(tb, ld) + ember_row_state_bytes(tb, ld));
}

/* A dynamic table's key exchange before routing: every key occurrence of
 * rank r's samples to its owner (8 bytes), its slot back (4 bytes); q[r]
 * the key mass on owner r, n the keys per sample. */
static void key_exchange(const model_ctx *m, double n, plan_rank_cost *out, plan_table_cost *tc)
{
    for (int32_t r = 0; r < m->W && m->W > 1; r++) {
        double q = m->q[r] < 1 ? m->q[r] : 1;
        double away = (double)m->b[r] * n * (1 - q);             /* my keys, others' */
        double in = (double)(m->B - m->b[r]) * n * q;            /* others' keys, mine */
        double sent = 8 * away + 4 * in, recv = 4 * away + 8 * in;
        out[r].a2a_sent += sent;
        out[r].a2a_recv += recv;
        out[r].key_sent += sent;
        out[r].key_recv += recv;
        tc->a2a_bytes += sent;
        tc->key_bytes += sent;
    }
}

/* idx[0..n) ordered by p[idx] descending (then index): insertion sort of
 * at most PLAN_HOT_ROWS entries, once per table and prediction. */
static void sort_by_p(int32_t *idx, int32_t n, const double *p)
{
    for (int32_t i = 1; i < n; i++) {
        int32_t v = idx[i], j = i;
        while (j > 0 && p[idx[j - 1]] < p[v]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = v;
    }
}

/* Ids, segments and entries per sample of table t (all its features). */
static table_shape shape_of(const model_ctx *m, int32_t t, const plan_id_stats *s)
{
    const ember_collection_config *cfg = m->w->cfg;
    table_shape sh = {0, 0, 0};
    for (int32_t f = 0; f < cfg->num_features; f++) {
        if (cfg->features[f].table != t)
            continue;
        double L = m->w->pooling[f];
        sh.n_ids += L;
        if (cfg->features[f].combiner == EMBER_COMBINER_NONE) {
            sh.segs_all += L;
            sh.ents_all += L;
        } else {
            sh.segs_all += 1;
            sh.ents_all += cfg->dedup ? plan_stats_distinct(s, L) : L;
        }
    }
    return sh;
}

/* COLUMN and REPLICATED: ids all-gathered; column slices and gradient
 * slices travel, or every bag's gradient row is gathered.  U: rows
 * updated; in_memory: 0 when the share stays in cache. */
static void spread_cost(const model_ctx *m, const ember_table_config *tb, const table_shape *sh, double U,
                        double in_memory, plan_rank_cost *out, plan_table_cost *tc)
{
    const int32_t W = m->W;
    const int64_t B = m->B;
    const double row_sums = ember_optim_row_sums(tb->optimizer.kind) + (tb->optimizer.clip_norm > 0); /* floats a row */
    int col = tb->placement == EMBER_PLACE_COLUMN;
    int32_t c = col ? (tb->dim + W - 1) / W : tb->dim;
    double ids_ps = m->h * sh->segs_all + m->x * sh->ents_all; /* all-gathered */
    double grad_ps = 4.0 * c * sh->segs_all;
    for (int32_t r = 0; r < W; r++) {
        plan_rank_cost *o = &out[r];
        double br = (double)m->b[r], others = (double)(B - m->b[r]);
        double ag_s = (W - 1) * br * ids_ps, ag_r = others * ids_ps;
        double a2a_s = 0, a2a_r = 0, served, reads;
        if (col) {
            /* slices of the others' bags back to them; my bags'
             * gradient slices to every other rank (and the mirror) */
            a2a_s = grad_ps * others + grad_ps * (W - 1) * br;
            a2a_r = grad_ps * (W - 1) * br + grad_ps * others;
            if (row_sums > 0 && W > 1) { /* the row sums a slice's update needs */
                ag_s += (W - 1) * 4.0 * row_sums * U;
                ag_r += (W - 1) * 4.0 * row_sums * U;
            }
            served = (double)B * sh->ents_all;
        } else {
            ag_s += (W - 1) * br * grad_ps; /* every bag's gradient row */
            ag_r += others * grad_ps;
            served = br * sh->ents_all;
        }
        reads = served + U;
        o->a2a_sent += a2a_s;
        o->a2a_recv += a2a_r;
        o->ag_sent += ag_s;
        o->ag_recv += ag_r;
        o->ids_served += served;
        o->lookup_bytes += in_memory * reads * lines(4.0 * c);
        tc->a2a_bytes += a2a_s;
        tc->ag_bytes += ag_s;
        tc->ids_served += served;
    }
}

/* Hot rows (docs/distributed.md): the K likeliest rows the statistics
 * track are read from every rank's copy; their mass, and the expected
 * distinct rows read by the small and the large local batch and stepped
 * by the global batch. */
typedef struct hot_rows {
    int64_t K;
    uint8_t repl[PLAN_HOT_ROWS];
    double mass, lo, hi, upd;
} hot_rows;

static void mark_hot(model_ctx *m, const plan_id_stats *s, const table_shape *sh, hot_rows *hr)
{
    hr->mass = hr->lo = hr->hi = hr->upd = 0;
    if (hr->K <= 0)
        return;
    int32_t idx[PLAN_HOT_ROWS];
    for (int32_t k = 0; k < s->hot; k++)
        idx[k] = k;
    sort_by_p(idx, s->hot, s->hot_p);
    memset(hr->repl, 0, sizeof hr->repl);
    for (int32_t k = 0; k < s->hot && k < hr->K; k++)
        hr->repl[idx[k]] = 1;
    m->v.repl = hr->repl;
    /* every rank reads the copies its batch uses and steps every copy the
     * global batch touched */
    for (int32_t k = 0; k < s->hot; k++)
        if (hr->repl[k]) {
            hr->mass += s->hot_p[k];
            hr->lo += plan_touch(s->hot_p[k], (double)m->b_lo * sh->n_ids);
            hr->hi += plan_touch(s->hot_p[k], (double)m->b_hi * sh->n_ids);
            hr->upd += plan_touch(s->hot_p[k], (double)m->B * sh->n_ids);
        }
}

/* Per owner d: segments (segps[d]) and entries (entps[d]) per sample that
 * table t's features send it. */
static void owner_rates(model_ctx *m, int32_t t)
{
    const ember_collection_config *cfg = m->w->cfg;
    const int32_t W = m->W;
    memset(m->segps, 0, sizeof(double) * (size_t)W);
    memset(m->entps, 0, sizeof(double) * (size_t)W);
    for (int32_t f = 0; f < cfg->num_features; f++) {
        if (cfg->features[f].table != t)
            continue;
        double L = m->w->pooling[f];
        if (cfg->features[f].combiner == EMBER_COMBINER_NONE) {
            for (int32_t d = 0; d < W; d++) {
                m->segps[d] += L * m->q[d];
                m->entps[d] += L * m->q[d];
            }
            continue;
        }
        for (int32_t d = 0; d < W; d++)
            m->segps[d] += plan_touch(m->q[d], L);
        if (cfg->dedup) {
            view_distinct(&m->v, L, m->tmp);
            for (int32_t d = 0; d < W; d++)
                m->entps[d] += m->tmp[d];
        } else {
            for (int32_t d = 0; d < W; d++)
                m->entps[d] += L * m->q[d];
        }
    }
}

/* ROW and TABLE, once the per-owner quantities are known: every rank as
 * requester (headers, entries, distinct rows, gradients) and as owner
 * (rows or partial sums back), plus the hot rows' ring. */
static void owner_cost(const model_ctx *m, const ember_table_config *tb, const table_shape *sh, int rows_mode,
                       double in_memory, const hot_rows *hr, plan_rank_cost *out, plan_table_cost *tc)
{
    const int32_t W = m->W;
    const int64_t B = m->B, K = hr->K;
    /* sums over all owners, for "all but me" */
    double req_all = 0, seg_all = 0, uq_lo_all = 0, uq_hi_all = 0;
    double vec = 4.0 * tb->dim, row = (double)ember_row_bytes(tb, tb->dim); /* a row as stored and sent */
    for (int32_t d = 0; d < W; d++) {
        req_all += (m->h + vec) * m->segps[d] + m->x * m->entps[d];
        seg_all += m->segps[d];
        uq_lo_all += m->uq_lo[d];
        uq_hi_all += m->uq_hi[d];
    }
    double n_lo = (double)(W - m->n_hi), n_hi = (double)m->n_hi;
    for (int32_t r = 0; r < W; r++) {
        plan_rank_cost *o = &out[r];
        double br = (double)m->b[r], others = (double)(B - m->b[r]);
        int hi = m->b[r] == m->b_hi && m->b_hi != m->b_lo;
        double my_uq = hi ? m->uq_hi[r] : m->uq_lo[r];      /* my rows I request */
        double uq_all_mine = hi ? uq_hi_all : uq_lo_all;    /* all owners, my size */
        /* what all requesters ask of me: sum over s of uq_r(b_s) */
        double uq_from_all = n_lo * m->uq_lo[r] + n_hi * m->uq_hi[r];
        double req_me = (m->h + vec) * m->segps[r] + m->x * m->entps[r];
        /* requester: headers, entries, (distinct rows), gradients */
        double s_req = br * (req_all - req_me) + (rows_mode ? 4.0 * (uq_all_mine - my_uq) : 0);
        /* owner: rows or partial sums back to every other requester */
        double s_own = rows_mode ? row * (uq_from_all - my_uq) : vec * m->segps[r] * others;
        double r_own = req_me * others + (rows_mode ? 4.0 * (uq_from_all - my_uq) : 0);
        double r_req = rows_mode ? row * (uq_all_mine - my_uq) : vec * br * (seg_all - m->segps[r]);
        double served = (double)B * m->entps[r];
        double reads = (rows_mode ? uq_from_all : served) + m->upd[r];
        /* hot rows' sums: rank r to r+1 (r < W-1), then the totals on from
         * W-1 round to W-2 (every rank but W-2 sends), n * (dim + 1) floats */
        double ring = K > 0 ? 4.0 * (double)(K < tb->rows ? K : tb->rows) * (tb->dim + 1) : 0;
        double ring_s = ring * ((r < W - 1) + (r != W - 2)), ring_r = ring * ((r > 0) + (r != W - 1));
        o->a2a_sent += s_req + s_own + ring_s;
        o->a2a_recv += r_own + r_req + ring_r;
        served += br * sh->n_ids * hr->mass; /* hot ids: served by the rank's own copies */
        reads += (hi ? hr->hi : hr->lo) + hr->upd;
        o->ids_served += served;
        o->lookup_bytes += in_memory * reads * lines(row);
        tc->a2a_bytes += s_req + s_own + ring_s;
        tc->ids_served += served;
    }
}

/* Costs of logical table t on every rank, added into out[] and *tc. */
static void table_cost(model_ctx *m, int32_t t, int64_t offset, plan_rank_cost *out,
                       plan_table_cost *tc)
{
    const ember_table_config *tb = &m->w->cfg->tables[t];
    const plan_id_stats *s = &m->w->stats[t];
    const int32_t W = m->W;
    table_shape sh = shape_of(m, t, s);
    double U = plan_stats_distinct(s, (double)m->B * sh.n_ids); /* rows updated */
    double in_memory = share_bytes(tb, W) <= CACHE_BYTES ? 0.0 : 1.0; /* 0: in cache */
    memset(tc, 0, sizeof *tc);
    if (tb->placement == EMBER_PLACE_COLUMN || tb->placement == EMBER_PLACE_REPLICATED) {
        spread_cost(m, tb, &sh, U, in_memory, out, tc);
        return;
    }
    /* ROW and TABLE: per-owner quantities */
    int32_t owner = tb->placement == EMBER_PLACE_TABLE ? tb->owner : -1;
    int rows_mode = tb->exchange == EMBER_EXCHANGE_ROWS;
    view_init(&m->v, s, W, offset, owner);
    hot_rows hr;
    hr.K = owner < 0 && rows_mode && W > 1 && !is_dynamic(tb) ? tb->hot_rows : 0;
    mark_hot(m, s, &sh, &hr);
    view_mass(&m->v, m->q);
    owner_rates(m, t);
    if (is_dynamic(tb))
        key_exchange(m, sh.n_ids, out, tc);
    view_distinct(&m->v, (double)m->b_lo * sh.n_ids, m->uq_lo);
    view_distinct(&m->v, (double)m->b_hi * sh.n_ids, m->uq_hi);
    view_distinct(&m->v, (double)m->B * sh.n_ids, m->upd);
    owner_cost(m, tb, &sh, rows_mode, in_memory, &hr, out, tc);
    m->v.repl = NULL; /* hr's marks die with this call */
}

/* The cache policy an SSD table will use (the collection's default). */
static ember_cache_policy cache_policy(const ember_collection_config *cfg, const ember_table_config *tb)
{
    if (tb->cache_policy != EMBER_CACHE_DEFAULT)
        return tb->cache_policy;
    return cfg->ssd_policy != EMBER_CACHE_DEFAULT ? cfg->ssd_policy : EMBER_CACHE_LOOKAHEAD;
}

/* Memory of every physical table on every rank (as collection/shard.h).  An SSD
 * table's DRAM is its cache's, by the rule of collection create
 * (tier.h, ember_ssd_cache_dram): the rows cache_bytes holds after the
 * bitmap of the rank's rows, with their bookkeeping, plus that bitmap. */
static void memory_cost(const ember_collection_config *cfg, int32_t W, const int32_t *group,
                        const int64_t *group_rows, const int32_t *first, int32_t ngroups,
                        plan_rank_cost *out, plan_table_cost *tables)
{
    int64_t group_cache[ngroups > 0 ? ngroups : 1]; /* SSD: the tables' caches summed */
    memset(group_cache, 0, sizeof group_cache);
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        group_cache[group[t]] += cfg->tables[t].cache_bytes;
        int64_t index = plan_dynamic_index_bytes(&cfg->tables[t]); /* DRAM on either tier */
        for (int32_t r = 0; r < W && index > 0; r++)
            out[r].index_bytes += index;
    }
    for (int32_t g = 0; g < ngroups; g++) {
        const ember_table_config *tb = &cfg->tables[first[g]];
        int64_t R = group_rows[g];
        int32_t ld = tb->placement == EMBER_PLACE_COLUMN ? (tb->dim + W - 1) / W : tb->dim;
        int64_t rec = ember_row_bytes(tb, ld) + ember_row_state_bytes(tb, ld); /* as the store file holds it */
        for (int32_t r = 0; r < W; r++) {
            int64_t lr;
            switch (tb->placement) {
            case EMBER_PLACE_ROW: lr = is_dynamic(tb) ? R / W : R / W + (r < R % W ? 1 : 0); break;
            case EMBER_PLACE_TABLE: lr = r == tb->owner ? R : 0; break;
            default: lr = R;
            }
            if (tb->storage == EMBER_STORAGE_SSD && lr > 0) { /* DRAM: the cache */
                out[r].row_bytes += ember_ssd_cache_dram(group_cache[g], lr, rec, cache_policy(cfg, tb));
                out[r].ssd_bytes += ember_ssd_file_bytes(lr, rec);
                continue;
            }
            out[r].row_bytes += lr * ember_row_bytes(tb, ld);
            out[r].state_bytes += lr * ember_row_state_bytes(tb, ld);
        }
    }
    if (!tables)
        return;
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        const ember_table_config *tb = &cfg->tables[t];
        int32_t ld = tb->placement == EMBER_PLACE_COLUMN ? (tb->dim + W - 1) / W : tb->dim;
        int64_t R = table_rows(tb, W), copies = 1, most = R, index = plan_dynamic_index_bytes(tb);
        if (tb->placement == EMBER_PLACE_ROW)
            most = (R + W - 1) / W;
        else if (tb->placement == EMBER_PLACE_COLUMN || tb->placement == EMBER_PLACE_REPLICATED)
            copies = W;
        int64_t rb = ember_row_bytes(tb, ld);
        tables[t].row_bytes = R * rb * copies;
        tables[t].state_bytes = R * ember_row_state_bytes(tb, ld) * copies;
        tables[t].index_bytes = index * W;
        tables[t].max_rank_bytes = most * (rb + ember_row_state_bytes(tb, ld));
        if (tb->storage == EMBER_STORAGE_SSD) {
            int64_t rec = rb + ember_row_state_bytes(tb, ld);
            tables[t].ssd_bytes = ember_ssd_file_bytes(R, rec) * copies;
            tables[t].max_rank_bytes = ember_ssd_cache_dram(tb->cache_bytes, most, rec, cache_policy(cfg, tb));
        }
        tables[t].max_rank_bytes += index;
    }
}

static int check_workload(const plan_workload *w, int32_t world)
{
    const ember_collection_config *cfg = w ? w->cfg : NULL;
    if (!cfg || world < 1 || w->global_batch < 0 || !w->stats ||
        (cfg->num_features > 0 && !w->pooling) || cfg->num_tables < 0)
        return EMBER_EINVAL;
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        const ember_table_config *tb = &cfg->tables[t];
        const plan_id_stats *s = &w->stats[t];
        if (is_dynamic(tb)) { /* row-wise by key hash, keyed statistics */
            if (plan_dynamic_capacity(tb) < 1 || tb->placement != EMBER_PLACE_ROW || !s->keyed || s->rows < 1)
                return EMBER_EINVAL;
            continue;
        }
        if (tb->rows < 1 || tb->dim < 1 || (unsigned)tb->placement > EMBER_PLACE_REPLICATED ||
            (tb->placement == EMBER_PLACE_TABLE && (tb->owner < 0 || tb->owner >= world)) ||
            s->rows != tb->rows || s->keyed)
            return EMBER_EINVAL;
    }
    for (int32_t f = 0; f < cfg->num_features; f++)
        if (cfg->features[f].table < 0 || cfg->features[f].table >= cfg->num_tables ||
            !(w->pooling[f] >= 0) || !isfinite(w->pooling[f]))
            return EMBER_EINVAL;
    return EMBER_OK;
}

int plan_predict(const plan_workload *w, int32_t world, plan_rank_cost *out,
                 plan_table_cost *tables)
{
    int rc = check_workload(w, world);
    if (rc)
        return rc;
    const ember_collection_config *cfg = w->cfg;
    int32_t T = cfg->num_tables, W = world;
    size_t nt = (size_t)(T > 0 ? T : 1);
    model_ctx m;
    memset(&m, 0, sizeof m);
    m.w = w;
    m.W = W;
    m.B = w->global_batch;
    m.h = 8.0 + (cfg->debug_checks ? 8.0 : 0.0);
    m.x = 4.0 + (w->weighted || cfg->dedup ? 4.0 : 0.0);
    int32_t *group = malloc(nt * sizeof *group), *first = malloc(nt * sizeof *first);
    int32_t *members = malloc(nt * sizeof *members);
    int64_t *offset = malloc(nt * sizeof *offset), *grows = malloc(nt * sizeof *grows);
    m.b = malloc((size_t)W * sizeof *m.b);
    double *buf = malloc((size_t)W * 8 * sizeof *buf);
    m.v.hot_owner = malloc(PLAN_HOT_ROWS * sizeof *m.v.hot_owner);
    plan_table_cost *tc = malloc(nt * sizeof *tc);
    if (!group || !first || !members || !offset || !grows || !m.b || !buf || !m.v.hot_owner || !tc) {
        rc = EMBER_ENOMEM;
        goto done;
    }
    m.q = buf;
    m.segps = buf + W;
    m.entps = buf + 2 * W;
    m.uq_lo = buf + 3 * W;
    m.uq_hi = buf + 4 * W;
    m.upd = buf + 5 * W;
    m.tmp = buf + 6 * W;
    m.v.tail_cnt = buf + 7 * W;
    /* rank r holds samples [r*B/W, (r+1)*B/W) */
    m.b_lo = m.B / W;
    m.b_hi = m.b_lo + 1;
    for (int32_t r = 0; r < W; r++) {
        m.b[r] = (int64_t)(((__int128)m.B * (r + 1)) / W - ((__int128)m.B * r) / W);
        m.n_hi += m.b[r] == m.b_hi;
    }
    memset(out, 0, sizeof *out * (size_t)W);
    int32_t ngroups = 0;
    stack_tables(cfg, W, group, offset, grows, first, members, &ngroups);
    for (int32_t t = 0; t < T; t++)
        table_cost(&m, t, offset[t], out, &tc[t]);
    memory_cost(cfg, W, group, grows, first, ngroups, out, tc);
    if (tables)
        memcpy(tables, tc, sizeof *tc * (size_t)T);
done:
    free(group);
    free(first);
    free(members);
    free(offset);
    free(grows);
    free(m.b);
    free(buf);
    free(m.v.hot_owner);
    free(tc);
    return rc;
}

double plan_predict_bytes_sent(const plan_workload *w, int32_t world, int32_t rank)
{
    if (world < 1 || rank < 0 || rank >= world)
        return -1;
    plan_rank_cost *c = malloc(sizeof *c * (size_t)world);
    if (!c)
        return -1;
    double r = -1;
    if (plan_predict(w, world, c, NULL) == EMBER_OK)
        r = c[rank].a2a_sent + c[rank].ag_sent;
    free(c);
    return r;
}
