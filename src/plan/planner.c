/*
 * planner.c: a placement per table (plan.h, docs/planner.md "Choosing").
 *
 * The cost of a plan is the busiest rank plus the average rank, where a
 * rank's cost is max(bytes sent, bytes received) + lookup_weight * lookup
 * bytes (model.c): the step waits for the busiest rank, and the average
 * counts the bytes everybody moves.  The search is small and explainable:
 *   1. Pins are kept as given.
 *   2. Each free table gets its cheapest "spread" placement, judged alone:
 *      row-wise with rows or pooled exchange, column-wise, or replicated
 *      when its rows + state are under the replicate threshold.
 *   3. Table-wise placement moves a whole table to one rank.  It saves
 *      bytes (a bag goes to one owner instead of many) but loads that rank,
 *      and the saving only pays once enough tables spread the load.  So the
 *      free tables are sorted by what table-wise saves them alone, and for
 *      every k the first k go table-wise, bin-packed largest first onto the
 *      least-loaded rank with room (pack.c); the cheapest k wins.
 *   4. The model is run once more on the chosen plan with exact stacking.
 * Memory is a constraint throughout: a placement whose rows + state (and
 * a dynamic table's key index) do not fit the per-rank budget is never
 * considered, and if no k fits, the error names the table that breaks the
 * budget.  A dynamic table is pinned row-wise: its keys' owners are
 * mix64(key) mod W, so only its exchange is a choice.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collection/config.h"
#include "plan/plan.h"

/* Replication costs no forward message: among spread placements within
 * this factor of the cheapest, a small table is replicated. */
#define REPLICATE_TIE 1.01

typedef struct load3 {
    double s, r, l; /* bytes sent, received, looked up */
} load3;

static double weight3(load3 a, double lw) { return (a.s > a.r ? a.s : a.r) + lw * a.l; }

static load3 of_cost(const plan_rank_cost *c)
{
    return (load3){c->a2a_sent + c->ag_sent, c->a2a_recv + c->ag_recv, c->lookup_bytes};
}

static const char *place_name(ember_placement p, ember_exchange x)
{
    switch (p) {
    case EMBER_PLACE_ROW: return x == EMBER_EXCHANGE_POOLED ? "row-wise (pooled)" : "row-wise (rows)";
    case EMBER_PLACE_COLUMN: return "column-wise";
    case EMBER_PLACE_TABLE: return x == EMBER_EXCHANGE_POOLED ? "table-wise (pooled)" : "table-wise (rows)";
    default: return "replicated";
    }
}

plan_options plan_options_default(void)
{
    plan_options o = {1, 0, INT64_C(1) << 20, 1.0, 0};
    return o;
}

/* One table alone, as a workload of one table and its features. */
typedef struct solo {
    ember_collection_config cfg;
    ember_table_config tb;
    ember_feature_config *feat;
    double *pool;
    plan_workload w;
    plan_rank_cost *vec; /* [W] */
} solo;

typedef struct table_plan {
    int free_spread, free_table;  /* options open to the planner          */
    int must_table;               /* table-wise is the only option        */
    int fixed;                    /* placement and owner pinned           */
    ember_placement sp;           /* chosen spread placement              */
    ember_exchange sx, tx;        /* spread / table-wise exchange          */
    double sp_cost, runner_cost;  /* its own cost, and the next best's     */
    ember_placement runner_p;
    ember_exchange runner_x;
    load3 *spread;                /* [W] its loads when spread (or fixed) */
    int64_t *spread_mem;          /* [W]                                  */
    load3 own;                    /* table-wise: the owner's load         */
    load3 *req;                   /* [W] table-wise: requesters' loads    */
    int64_t table_mem;            /* rows + state on the owner            */
    double saving;                /* total spread weight - total table-wise */
    double spread_total;          /* total spread weight (sum over ranks) */
    int32_t owner;                /* chosen owner (table-wise)            */
    int in_table;                 /* placed table-wise in the best plan   */
} table_plan;

static int solo_init(solo *s, const plan_workload *w, int32_t t, int32_t W)
{
    const ember_collection_config *cfg = w->cfg;
    int32_t nf = 0;
    for (int32_t f = 0; f < cfg->num_features; f++)
        nf += cfg->features[f].table == t;
    s->feat = malloc(sizeof *s->feat * (size_t)(nf > 0 ? nf : 1));
    s->pool = malloc(sizeof *s->pool * (size_t)(nf > 0 ? nf : 1));
    s->vec = malloc(sizeof *s->vec * (size_t)W);
    if (!s->feat || !s->pool || !s->vec)
        return EMBER_ENOMEM;
    nf = 0;
    for (int32_t f = 0; f < cfg->num_features; f++) {
        if (cfg->features[f].table != t)
            continue;
        s->feat[nf] = cfg->features[f];
        s->feat[nf].table = 0;
        s->pool[nf++] = w->pooling[f];
    }
    s->tb = cfg->tables[t];
    s->cfg = *cfg;
    s->cfg.tables = &s->tb;
    s->cfg.num_tables = 1;
    s->cfg.features = s->feat;
    s->cfg.num_features = nf;
    s->w = *w;
    s->w.cfg = &s->cfg;
    s->w.pooling = s->pool;
    s->w.stats = &w->stats[t];
    return EMBER_OK;
}

static void solo_free(solo *s)
{
    free(s->feat);
    free(s->pool);
    free(s->vec);
}

/* The table alone under (p, x, owner): fills s->vec; its plan cost. */
static int solo_eval(solo *s, ember_placement p, ember_exchange x, int32_t owner, int32_t W,
                     double lw, double *cost)
{
    s->tb.placement = p;
    s->tb.exchange = x;
    s->tb.owner = owner;
    int rc = plan_predict(&s->w, W, s->vec, NULL);
    if (rc)
        return rc;
    double mx = 0, sum = 0;
    for (int32_t r = 0; r < W; r++) {
        double c = weight3(of_cost(&s->vec[r]), lw);
        sum += c;
        if (c > mx)
            mx = c;
    }
    *cost = mx + sum / W;
    return EMBER_OK;
}

static int64_t mem_max(const plan_rank_cost *v, int32_t W)
{
    int64_t m = 0;
    for (int32_t r = 0; r < W; r++)
        if (plan_rank_memory(&v[r]) > m)
            m = plan_rank_memory(&v[r]);
    return m;
}

/* "1000 rows x 64", or a dynamic table's "dynamic, 20000 rows per rank x 16". */
static const char *table_desc(const ember_table_config *tb, char *buf, size_t n)
{
    if (tb->kind == EMBER_TABLE_DYNAMIC)
        snprintf(buf, n, "dynamic, %lld rows per rank x %d", (long long)plan_dynamic_capacity(tb), tb->dim);
    else
        snprintf(buf, n, "%lld rows x %d", (long long)tb->rows, tb->dim);
    return buf;
}

static int64_t table_bytes(const ember_table_config *tb)
{
    return tb->rows * (ember_row_bytes(tb, tb->dim) + ember_row_state_bytes(tb, tb->dim));
}

/* Options of table t: spread choice, table-wise loads.  by_memory: choose
 * the spread placement with the least memory instead of the least cost. */
static int table_options(const plan_workload *w, int32_t t, const plan_pin *pin,
                         const plan_options *o, int by_memory, table_plan *tp)
{
    int32_t W = o->world;
    int64_t budget = o->memory_per_rank > 0 ? o->memory_per_rank : INT64_MAX;
    double lw = o->lookup_weight;
    solo s;
    memset(&s, 0, sizeof s);
    int rc = solo_init(&s, w, t, W);
    if (rc)
        goto done;
    const ember_table_config *tb = &w->cfg->tables[t];
    static const struct { ember_placement p; ember_exchange x; } SPREAD[] = {
        {EMBER_PLACE_ROW, EMBER_EXCHANGE_ROWS},
        {EMBER_PLACE_ROW, EMBER_EXCHANGE_POOLED},
        {EMBER_PLACE_COLUMN, EMBER_EXCHANGE_ROWS},
        {EMBER_PLACE_REPLICATED, EMBER_EXCHANGE_ROWS},
    };
    double best = INFINITY, runner = INFINITY;
    int64_t best_mem = INT64_MAX;
    tp->free_spread = 0;
    tp->fixed = pin->placement >= 0 && (pin->placement != EMBER_PLACE_TABLE || pin->owner >= 0);
    for (size_t i = 0; i < sizeof SPREAD / sizeof SPREAD[0]; i++) {
        ember_placement p = SPREAD[i].p;
        ember_exchange x = SPREAD[i].x;
        if (pin->placement >= 0 && pin->placement != (int)p)
            continue;
        if (pin->exchange >= 0 && p == EMBER_PLACE_ROW && pin->exchange != (int)x)
            continue;
        if (pin->exchange >= 0 && p != EMBER_PLACE_ROW)
            x = (ember_exchange)pin->exchange; /* kept, though unused */
        if (p == EMBER_PLACE_REPLICATED && pin->placement < 0 &&
            table_bytes(tb) > o->replicate_threshold)
            continue;
        double c;
        if ((rc = solo_eval(&s, p, x, 0, W, lw, &c)))
            goto done;
        int64_t m = mem_max(s.vec, W);
        if (m > budget && pin->placement < 0)
            continue;
        /* a replicated table's forward sends nothing: it wins a tie (1%) */
        double score = p == EMBER_PLACE_REPLICATED ? c / REPLICATE_TIE : c;
        double best_score = tp->free_spread && tp->sp == EMBER_PLACE_REPLICATED
                                ? best / REPLICATE_TIE : best;
        int better = by_memory ? (m < best_mem || (m == best_mem && score < best_score))
                               : score < best_score;
        if (better) {
            if (tp->free_spread) {
                runner = best;
                tp->runner_p = tp->sp;
                tp->runner_x = tp->sx;
            }
            best = c;
            best_mem = m;
            tp->sp = p;
            tp->sx = x;
            tp->free_spread = 1;
            for (int32_t r = 0; r < W; r++) {
                tp->spread[r] = of_cost(&s.vec[r]);
                tp->spread_mem[r] = plan_rank_memory(&s.vec[r]);
            }
        } else if (c < runner) {
            runner = c;
            tp->runner_p = p;
            tp->runner_x = x;
        }
    }
    tp->sp_cost = best;
    tp->runner_cost = runner;
    /* table-wise: evaluated with owner 0 (pinned owner: that one) */
    tp->free_table = 0;
    tp->table_mem = table_bytes(tb);
    int table_ok = pin->placement < 0 || pin->placement == EMBER_PLACE_TABLE;
    if (table_ok && (tp->table_mem <= budget || pin->placement == EMBER_PLACE_TABLE)) {
        double tbest = INFINITY;
        int32_t owner = pin->owner >= 0 ? pin->owner : 0;
        for (int x = 0; x < 2; x++) {
            if (pin->exchange >= 0 && pin->exchange != x)
                continue;
            double c;
            if ((rc = solo_eval(&s, EMBER_PLACE_TABLE, (ember_exchange)x, owner, W, lw, &c)))
                goto done;
            double tot = 0;
            for (int32_t r = 0; r < W; r++)
                tot += weight3(of_cost(&s.vec[r]), lw);
            if (tot < tbest) {
                tbest = tot;
                tp->tx = (ember_exchange)x;
                tp->own = of_cost(&s.vec[owner]);
                for (int32_t r = 0; r < W; r++)
                    tp->req[r] = of_cost(&s.vec[r == owner ? (W > 1 ? (owner + 1) % W : r) : r]);
                if (W == 1)
                    tp->req[0] = (load3){0, 0, 0};
                if (tp->fixed) { /* a pinned owner: its exact loads */
                    for (int32_t r = 0; r < W; r++) {
                        tp->spread[r] = of_cost(&s.vec[r]);
                        tp->spread_mem[r] = plan_rank_memory(&s.vec[r]);
                    }
                    tp->sp = EMBER_PLACE_TABLE;
                    tp->sx = (ember_exchange)x;
                }
            }
        }
        tp->free_table = 1;
        double spread_tot = 0;
        for (int32_t r = 0; r < W && tp->free_spread; r++)
            spread_tot += weight3(tp->spread[r], lw);
        tp->saving = tp->free_spread ? spread_tot - tbest : INFINITY;
        tp->spread_total = spread_tot;
    }
    tp->must_table = !tp->fixed && tp->free_table && !tp->free_spread;
    if (tp->fixed && pin->placement == EMBER_PLACE_TABLE)
        tp->owner = pin->owner;
done:
    solo_free(&s);
    return rc;
}

typedef struct saving_key {
    double saving;
    int32_t t;
} saving_key;

static int cmp_saving_key(const void *a, const void *b)
{
    const saving_key *x = a, *y = b;
    if (x->saving != y->saving)
        return x->saving > y->saving ? -1 : 1;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* Working arrays of the k search. */
typedef struct search {
    int32_t W, T;
    double lw;
    int64_t budget;
    load3 *base, *load;        /* [W]                                      */
    int64_t *base_mem, *bin_free; /* [W]                                   */
    double *bin_load, *item_load; /* [W], [T]                              */
    int64_t *item_mem;         /* [T]                                      */
    int32_t *items, *bin_of;   /* [T]                                      */
} search;

/* Packs the table-wise set over the current base and returns the plan
 * cost, or INFINITY when something does not fit.  owner_out[t] set. */
static double evaluate(search *sr, table_plan *tp, const int32_t *set, int32_t nset,
                       int32_t *owner_out)
{
    int32_t W = sr->W;
    for (int32_t r = 0; r < W; r++) {
        if (sr->base_mem[r] > sr->budget)
            return INFINITY;
        sr->load[r] = sr->base[r];
        sr->bin_load[r] = weight3(sr->base[r], sr->lw);
        sr->bin_free[r] = sr->budget - sr->base_mem[r];
    }
    for (int32_t i = 0; i < nset; i++) {
        const table_plan *p = &tp[set[i]];
        double extra = weight3(p->own, sr->lw) - weight3(p->req[0], sr->lw);
        sr->item_load[i] = extra > 0 ? extra : 0;
        sr->item_mem[i] = p->table_mem;
    }
    if (plan_pack(nset, sr->item_load, sr->item_mem, W, sr->bin_load, sr->bin_free, sr->bin_of) >= 0)
        return INFINITY;
    for (int32_t i = 0; i < nset; i++) {
        const table_plan *p = &tp[set[i]];
        int32_t o = sr->bin_of[i];
        owner_out[set[i]] = o;
        sr->load[o].s += p->own.s - p->req[o].s;
        sr->load[o].r += p->own.r - p->req[o].r;
        sr->load[o].l += p->own.l - p->req[o].l;
    }
    double mx = 0, sum = 0;
    for (int32_t r = 0; r < W; r++) {
        double c = weight3(sr->load[r], sr->lw);
        sum += c;
        if (c > mx)
            mx = c;
    }
    return mx + sum / W;
}

static void add_loads(search *sr, const load3 *v, const int64_t *mem, double sign)
{
    for (int32_t r = 0; r < sr->W; r++) {
        sr->base[r].s += sign * v[r].s;
        sr->base[r].r += sign * v[r].r;
        sr->base[r].l += sign * v[r].l;
        if (mem)
            sr->base_mem[r] += (int64_t)sign * mem[r];
    }
}

/* The k search over the free tables sorted by saving.  Returns the best
 * cost (INFINITY: nothing fits); tp[].in_table and owner set for it. */
static double search_k(search *sr, table_plan *tp, int32_t *owner_best, int32_t *owner_tmp)
{
    int32_t T = sr->T, W = sr->W, nset = 0, ncand = 0;
    saving_key *cand = malloc(sizeof *cand * (size_t)(T > 0 ? T : 1));
    if (!cand)
        return INFINITY;
    memset(sr->base, 0, sizeof *sr->base * (size_t)W);
    memset(sr->base_mem, 0, sizeof *sr->base_mem * (size_t)W);
    for (int32_t t = 0; t < T; t++) {
        table_plan *p = &tp[t];
        p->in_table = 0;
        if (p->fixed || (p->free_spread && !p->free_table)) {
            add_loads(sr, p->spread, p->spread_mem, 1);
        } else if (p->must_table || (!p->free_spread && p->free_table)) {
            add_loads(sr, p->req, NULL, 1);
            sr->items[nset++] = t;
            p->in_table = 1;
        } else if (p->free_spread && p->free_table) {
            add_loads(sr, p->spread, p->spread_mem, 1);
            if (p->saving > 0)
                cand[ncand++] = (saving_key){p->saving, t};
        } else { /* fits nowhere: no plan */
            free(cand);
            return INFINITY;
        }
    }
    qsort(cand, (size_t)ncand, sizeof *cand, cmp_saving_key);
    double best = evaluate(sr, tp, sr->items, nset, owner_best);
    int32_t best_k = 0;
    for (int32_t k = 1; k <= ncand; k++) {
        table_plan *p = &tp[cand[k - 1].t];
        add_loads(sr, p->spread, p->spread_mem, -1);
        add_loads(sr, p->req, NULL, 1);
        sr->items[nset++] = cand[k - 1].t;
        double c = evaluate(sr, tp, sr->items, nset, owner_tmp);
        if (c < best * (1 - 1e-9)) {
            best = c;
            best_k = k;
            memcpy(owner_best, owner_tmp, sizeof *owner_tmp * (size_t)T);
        }
    }
    for (int32_t k = 0; k < best_k; k++)
        tp[cand[k].t].in_table = 1;
    free(cand);
    return best;
}

/* The table that breaks the budget: spread at least memory, largest
 * first, the first whose share no longer fits. */
static void explain_no_fit(const plan_workload *w, const plan_options *o, table_plan *tp,
                           char *err, size_t n)
{
    const ember_collection_config *cfg = w->cfg;
    int32_t T = cfg->num_tables, W = o->world;
    char b1[32], b2[32], b3[32];
    for (int32_t t = 0; t < T; t++)
        if (!tp[t].free_spread && !tp[t].free_table && !tp[t].fixed) {
            int64_t share = (cfg->tables[t].rows + W - 1) / W *
                            (int64_t)(cfg->tables[t].dim +
                                      ember_state_floats(cfg->tables[t].optimizer.kind,
                                                         cfg->tables[t].dim)) * 4;
            snprintf(err, n,
                     "nothing fits: table '%s' (%lld rows x %d, %s rows + state) needs %s per "
                     "rank row-wise at world %d, over the budget of %s per rank",
                     cfg->tables[t].name, (long long)cfg->tables[t].rows, cfg->tables[t].dim,
                     plan_format_bytes((double)table_bytes(&cfg->tables[t]), b1, sizeof b1),
                     plan_format_bytes((double)share, b2, sizeof b2), (int)W,
                     plan_format_bytes((double)o->memory_per_rank, b3, sizeof b3));
            return;
        }
    saving_key *ord = malloc(sizeof *ord * (size_t)(T > 0 ? T : 1));
    if (!ord) {
        snprintf(err, n, "nothing fits the memory budget");
        return;
    }
    for (int32_t t = 0; t < T; t++) {
        int64_t m = 0;
        for (int32_t r = 0; r < W; r++)
            if (tp[t].spread_mem[r] > m)
                m = tp[t].spread_mem[r];
        if (!tp[t].free_spread && tp[t].free_table)
            m = tp[t].table_mem / W;
        ord[t] = (saving_key){(double)m, t};
    }
    qsort(ord, (size_t)T, sizeof *ord, cmp_saving_key);
    double used = 0;
    char desc[96];
    for (int32_t i = 0; i < T; i++) {
        const ember_table_config *tb = &cfg->tables[ord[i].t];
        if (used + ord[i].saving > (double)o->memory_per_rank) {
            char need[160], index[96] = "", b4[32];
            if (tb->kind == EMBER_TABLE_DYNAMIC)
                snprintf(index, sizeof index, " (%s of it key index, in memory on either tier)",
                         plan_format_bytes((double)plan_dynamic_index_bytes(tb), b4, sizeof b4));
            snprintf(need, sizeof need, "%s per rank%s", plan_format_bytes(ord[i].saving, b1, sizeof b1), index);
            if (i == 0)
                snprintf(err, n, "nothing fits: table '%s' (%s) needs %s at world %d, over the budget of %s per "
                         "rank", tb->name, table_desc(tb, desc, sizeof desc), need, (int)W,
                         plan_format_bytes((double)o->memory_per_rank, b3, sizeof b3));
            else
                snprintf(err, n, "nothing fits: table '%s' (%s) needs %s at world %d, but %s of the %s budget "
                         "per rank is taken by %d larger table%s", tb->name, table_desc(tb, desc, sizeof desc),
                         need, (int)W, plan_format_bytes(used, b2, sizeof b2),
                         plan_format_bytes((double)o->memory_per_rank, b3, sizeof b3), (int)i, i == 1 ? "" : "s");
            free(ord);
            return;
        }
        used += ord[i].saving;
    }
    snprintf(err, n, "nothing fits the budget of %s per rank at world %d (table-wise tables "
             "cannot be packed)",
             plan_format_bytes((double)o->memory_per_rank, b3, sizeof b3), (int)W);
    free(ord);
}

static void write_reasons(const plan_workload *w, const plan_options *o, table_plan *tp,
                          const plan_pin *pins, plan_result *res)
{
    const ember_collection_config *cfg = w->cfg;
    char b1[32];
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        table_plan *p = &tp[t];
        char *out = res->reason[t];
        size_t n = sizeof res->reason[t];
        const plan_pin *pin = pins ? &pins[t] : NULL;
        if (cfg->tables[t].kind == EMBER_TABLE_DYNAMIC) {
            snprintf(out, n, "dynamic: row-wise by key hash (mix64(key) mod %d)%s", (int)res->world,
                     pin && pin->exchange < 0 && res->world > 1 ? "; exchange by cost" : "");
        } else if (res->world == 1 && !(pin && pin->placement >= 0)) {
            snprintf(out, n, "a world of one: every placement is the same local table");
        } else if (p->fixed) {
            snprintf(out, n, "pinned%s", pin && pin->exchange < 0 &&
                     (p->sp == EMBER_PLACE_ROW || p->sp == EMBER_PLACE_TABLE)
                     ? "; exchange by cost" : "");
        } else if (p->in_table) {
            if (pin && pin->placement == EMBER_PLACE_TABLE)
                snprintf(out, n, "pinned table-wise; bin-packed onto rank %d", (int)res->owner[t]);
            else if (!p->free_spread)
                snprintf(out, n, "table-wise: no spread placement fits the budget; rank %d",
                         (int)res->owner[t]);
            else
                snprintf(out, n, "table-wise on rank %d: %.0f%% cheaper than %s; bin-packed",
                         (int)res->owner[t],
                         p->spread_total > 0 ? 100.0 * p->saving / p->spread_total : 0.0,
                         place_name(p->sp, p->sx));
        } else {
            const char *name = place_name(p->sp, p->sx);
            if (pin && pin->placement >= 0)
                snprintf(out, n, "pinned %s", name);
            else if (!p->free_table && table_bytes(&cfg->tables[t]) > o->memory_per_rank &&
                     o->memory_per_rank > 0)
                snprintf(out, n, "%s: too big for one rank (%s)", name,
                         plan_format_bytes((double)table_bytes(&cfg->tables[t]), b1, sizeof b1));
            else if (p->sp == EMBER_PLACE_REPLICATED)
                snprintf(out, n, "replicated: %s, under the threshold; no forward message; "
                         "%s costs %.2fx", plan_format_bytes((double)table_bytes(&cfg->tables[t]),
                                                             b1, sizeof b1),
                         isfinite(p->runner_cost) ? place_name(p->runner_p, p->runner_x) : "nothing else",
                         isfinite(p->runner_cost) && p->sp_cost > 0 ? p->runner_cost / p->sp_cost : 0.0);
            else if (isfinite(p->runner_cost) && p->sp_cost > 0)
                snprintf(out, n, "%s: cheapest; %s costs %.2fx%s", name,
                         place_name(p->runner_p, p->runner_x), p->runner_cost / p->sp_cost,
                         p->free_table && p->saving > 0 ? "; table-wise would overload a rank" : "");
            else
                snprintf(out, n, "%s: cheapest", name);
        }
    }
}

void plan_result_free(plan_result *r)
{
    if (!r)
        return;
    free(r->placement);
    free(r->owner);
    free(r->exchange);
    free(r->hot_rows);
    free(r->reason);
    free(r->ranks);
    free(r->tables);
    r->placement = NULL;
    r->owner = NULL;
    r->exchange = NULL;
    r->hot_rows = NULL;
    r->reason = NULL;
    r->ranks = NULL;
    r->tables = NULL;
}

/* The planner's figure of merit: the busiest rank's cost plus the mean. */
static double plan_cost(const plan_rank_cost *ranks, int32_t W, double lookup_weight)
{
    double mx = 0, sum = 0;
    for (int32_t r = 0; r < W; r++) {
        double c = plan_rank_weight(&ranks[r], lookup_weight);
        sum += c;
        if (c > mx)
            mx = c;
    }
    return mx + sum / W;
}

/* Hot rows for every row-wise table with the rows exchange in memory whose
 * config has none: table by table, the number from {0, 16, 64, 256, 1024}
 * (at most its rows) that lowers the plan's cost most (ties: fewer), with
 * the tables before it at their choice.  Updates tabs, res->ranks, tables
 * and cost. */
static int choose_hot_rows(const plan_workload *w2, ember_table_config *tabs, const plan_options *o,
                           plan_result *res)
{
    static const int64_t CANDIDATES[] = {16, 64, 256, 1024};
    const ember_collection_config *cfg = w2->cfg;
    int32_t W = o->world;
    if (W < 2)
        return EMBER_OK;
    for (int32_t t = 0; t < cfg->num_tables; t++) {
        ember_table_config *tb = &tabs[t];
        /* what create accepts (collection.c), and memory for sure: an AUTO
         * table under a tier rule might move to the SSD tier */
        int may_be_ssd = tb->storage == EMBER_STORAGE_SSD ||
                         (tb->storage == EMBER_STORAGE_AUTO && (cfg->ssd_min_bytes > 0 || cfg->memory_budget > 0));
        if (tb->hot_rows > 0 || tb->placement != EMBER_PLACE_ROW || tb->exchange != EMBER_EXCHANGE_ROWS ||
            tb->kind != EMBER_TABLE_FIXED || tb->rows_encoding != EMBER_ROWS_FP32 || may_be_ssd)
            continue;
        int64_t best = 0;
        for (size_t k = 0; k < sizeof CANDIDATES / sizeof CANDIDATES[0] && CANDIDATES[k] <= tb->rows; k++) {
            tb->hot_rows = CANDIDATES[k];
            int rc = plan_predict(w2, W, res->ranks, res->tables);
            if (rc)
                return rc;
            double c = plan_cost(res->ranks, W, o->lookup_weight);
            if (c < res->cost) {
                res->cost = c;
                best = CANDIDATES[k];
            }
        }
        tb->hot_rows = best;
    }
    return plan_predict(w2, W, res->ranks, res->tables);
}

/* A user's pins against the world: EMBER_OK, or EMBER_EINVAL with
 * res->error naming the table and what is wrong. */
static int check_pins(const ember_collection_config *cfg, const plan_pin *pins, int32_t W, plan_result *res)
{
    for (int32_t t = 0; t < cfg->num_tables && pins; t++) {
        const plan_pin *p = &pins[t];
        const char *bad = NULL;
        if (cfg->tables[t].kind == EMBER_TABLE_DYNAMIC && p->placement >= 0 && p->placement != EMBER_PLACE_ROW)
            bad = "a dynamic table is placed row-wise by key hash";
        else if (p->placement > EMBER_PLACE_REPLICATED || p->exchange > EMBER_EXCHANGE_POOLED)
            bad = "unknown placement or exchange";
        else if (p->owner >= 0 && p->placement != EMBER_PLACE_TABLE)
            bad = "an owner pin needs placement table";
        else if (p->owner >= W)
            bad = "the pinned owner is not a rank of the world";
        if (!bad)
            continue;
        const char *pn = p->placement < 0 ? "auto"
                         : p->placement > EMBER_PLACE_REPLICATED || p->exchange > EMBER_EXCHANGE_POOLED
                             ? "unknown"
                             : place_name((ember_placement)p->placement,
                                          p->exchange < 0 ? EMBER_EXCHANGE_ROWS : (ember_exchange)p->exchange);
        char owner[32] = "";
        if (p->owner >= 0)
            snprintf(owner, sizeof owner, " on rank %d", (int)p->owner);
        snprintf(res->error, sizeof res->error, "table '%s': %s (pinned %s%s, world %d)", cfg->tables[t].name, bad,
                 pn, owner, (int)W);
        return EMBER_EINVAL;
    }
    return EMBER_OK;
}

/* What plan_make works with: per table its options, the pins it plans
 * with, the search's scratch and the chosen owners. */
typedef struct making {
    int32_t T, W;
    table_plan *tp;
    plan_pin *pin;              /* the pins, dynamic tables row-wise         */
    ember_table_config *tabs;   /* the chosen plan's tables                  */
    int32_t *owner_best, *owner_tmp;
    search sr;
} making;

static void making_free(making *m)
{
    for (int32_t t = 0; m->tp && t < m->T; t++) {
        free(m->tp[t].spread);
        free(m->tp[t].spread_mem);
        free(m->tp[t].req);
    }
    free(m->tp);
    free(m->pin);
    free(m->tabs);
    free(m->owner_best);
    free(m->owner_tmp);
    free(m->sr.base);
    free(m->sr.load);
    free(m->sr.base_mem);
    free(m->sr.bin_free);
    free(m->sr.bin_load);
    free(m->sr.item_load);
    free(m->sr.item_mem);
    free(m->sr.items);
    free(m->sr.bin_of);
}

/* The arrays of m and of res: EMBER_OK or EMBER_ENOMEM. */
static int making_alloc(making *m, int32_t T, int32_t W, const plan_options *o, plan_result *res)
{
    size_t nt = (size_t)(T > 0 ? T : 1), nw = (size_t)W;
    memset(m, 0, sizeof *m);
    m->T = T;
    m->W = W;
    m->tp = calloc(nt, sizeof *m->tp);
    m->pin = malloc(sizeof *m->pin * nt);
    m->tabs = malloc(sizeof *m->tabs * nt);
    m->owner_best = calloc(nt, sizeof *m->owner_best);
    m->owner_tmp = calloc(nt, sizeof *m->owner_tmp);
    res->placement = calloc(nt, sizeof *res->placement);
    res->owner = calloc(nt, sizeof *res->owner);
    res->exchange = calloc(nt, sizeof *res->exchange);
    res->hot_rows = calloc(nt, sizeof *res->hot_rows);
    res->reason = calloc(nt, sizeof *res->reason);
    res->ranks = calloc(nw, sizeof *res->ranks);
    res->tables = calloc(nt, sizeof *res->tables);
    search *sr = &m->sr;
    sr->base = malloc(sizeof *sr->base * nw);
    sr->load = malloc(sizeof *sr->load * nw);
    sr->base_mem = malloc(sizeof *sr->base_mem * nw);
    sr->bin_free = malloc(sizeof *sr->bin_free * nw);
    sr->bin_load = malloc(sizeof *sr->bin_load * nw);
    sr->item_load = malloc(sizeof *sr->item_load * nt);
    sr->item_mem = malloc(sizeof *sr->item_mem * nt);
    sr->items = malloc(sizeof *sr->items * nt);
    sr->bin_of = malloc(sizeof *sr->bin_of * nt);
    if (!m->tp || !m->pin || !m->tabs || !m->owner_best || !m->owner_tmp || !res->placement || !res->owner ||
        !res->exchange || !res->reason || !res->ranks || !res->tables || !sr->base || !sr->load ||
        !sr->base_mem || !sr->bin_free || !sr->bin_load || !sr->item_load || !sr->item_mem || !sr->items ||
        !sr->bin_of)
        return EMBER_ENOMEM;
    sr->W = W;
    sr->T = T;
    sr->lw = o->lookup_weight;
    sr->budget = o->memory_per_rank > 0 ? o->memory_per_rank : INT64_MAX;
    for (int32_t t = 0; t < T; t++) {
        m->tp[t].spread = malloc(sizeof *m->tp[t].spread * nw);
        m->tp[t].spread_mem = calloc(nw, sizeof *m->tp[t].spread_mem);
        m->tp[t].req = calloc(nw, sizeof *m->tp[t].req);
        if (!m->tp[t].spread || !m->tp[t].spread_mem || !m->tp[t].req)
            return EMBER_ENOMEM;
    }
    return EMBER_OK;
}

/* The pins plan_make plans with: the user's, a dynamic table row-wise
 * (whose slots must stay 32-bit rows).  EMBER_OK or EMBER_EINVAL. */
static int resolve_pins(making *m, const ember_collection_config *cfg, const plan_pin *pins, plan_result *res)
{
    const plan_pin none = {-1, -1, -1};
    for (int32_t t = 0; t < m->T; t++) {
        const ember_table_config *tb = &cfg->tables[t];
        m->pin[t] = pins ? pins[t] : none;
        if (tb->kind != EMBER_TABLE_DYNAMIC)
            continue;
        m->pin[t].placement = EMBER_PLACE_ROW;
        if (plan_dynamic_capacity(tb) * m->W >= (int64_t)UINT32_MAX) { /* slot * W + owner is 32 bits */
            snprintf(res->error, sizeof res->error, "table '%s': capacity %lld x %d ranks exceeds 2^32-1 rows",
                     tb->name, (long long)plan_dynamic_capacity(tb), (int)m->W);
            return EMBER_EINVAL;
        }
    }
    return EMBER_OK;
}

/* Every table's options, then the search for the table-wise set: within
 * the budget when any plan is (a second pass relaxes the options).
 * EMBER_OK, or a status with res->error. */
static int find_plan(making *m, const plan_workload *w, const plan_options *o, plan_result *res)
{
    double best = INFINITY;
    for (int pass = 0; pass < 2 && !isfinite(best); pass++) {
        for (int32_t t = 0; t < m->T; t++) {
            int rc = table_options(w, t, &m->pin[t], o, pass, &m->tp[t]);
            if (rc) {
                snprintf(res->error, sizeof res->error,
                         "table '%s': the cost model refused the workload (rows, dim, pooling "
                         "or id statistics)", w->cfg->tables[t].name);
                return rc;
            }
        }
        best = search_k(&m->sr, m->tp, m->owner_best, m->owner_tmp);
    }
    if (!isfinite(best)) {
        explain_no_fit(w, o, m->tp, res->error, sizeof res->error);
        return EMBER_EINVAL;
    }
    return EMBER_OK;
}

/* The chosen plan into res, evaluated exactly (and its hot rows chosen
 * when asked).  EMBER_OK or the model's status. */
static int evaluate_plan(making *m, const plan_workload *w, const plan_options *o, plan_result *res)
{
    const ember_collection_config *cfg = w->cfg;
    for (int32_t t = 0; t < m->T; t++) {
        ember_table_config *tb = &m->tabs[t];
        const table_plan *p = &m->tp[t];
        *tb = cfg->tables[t];
        if (p->in_table) {
            tb->placement = EMBER_PLACE_TABLE;
            tb->owner = m->owner_best[t];
            tb->exchange = p->tx;
        } else {
            tb->placement = p->sp;
            tb->owner = p->sp == EMBER_PLACE_TABLE ? p->owner : 0;
            tb->exchange = p->sx;
        }
        res->placement[t] = tb->placement;
        res->owner[t] = tb->owner;
        res->exchange[t] = tb->exchange;
    }
    ember_collection_config c2 = *cfg;
    c2.tables = m->tabs;
    plan_workload w2 = *w;
    w2.cfg = &c2;
    int rc = plan_predict(&w2, m->W, res->ranks, res->tables);
    if (rc)
        return rc;
    res->cost = plan_cost(res->ranks, m->W, o->lookup_weight);
    if (o->choose_hot_rows && (rc = choose_hot_rows(&w2, m->tabs, o, res)))
        return rc;
    for (int32_t t = 0; t < m->T; t++)
        res->hot_rows[t] = m->tabs[t].hot_rows;
    return EMBER_OK;
}

int plan_make(const plan_workload *w, const plan_pin *pins, const plan_options *o,
              plan_result *res)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memset(res, 0, sizeof *res);
    if (!w || !w->cfg || !o || o->world < 1 || !(o->lookup_weight >= 0)) {
        snprintf(res->error, sizeof res->error, "bad planner options (world %d)",
                 o ? (int)o->world : 0);
        return EMBER_EINVAL;
    }
    const int32_t T = w->cfg->num_tables, W = o->world;
    int rc = check_pins(w->cfg, pins, W, res);
    if (rc)
        return rc;
    making m;
    rc = making_alloc(&m, T, W, o, res);
    if (rc == EMBER_OK && T > 0 && !w->stats) {
        rc = EMBER_EINVAL;
        snprintf(res->error, sizeof res->error, "no id statistics");
    }
    if (rc == EMBER_OK && (rc = resolve_pins(&m, w->cfg, pins, res)) == EMBER_OK &&
        (rc = find_plan(&m, w, o, res)) == EMBER_OK && (rc = evaluate_plan(&m, w, o, res)) == EMBER_OK) {
        res->num_tables = T;
        res->world = W;
        write_reasons(w, o, m.tp, pins, res);
    }
    if (rc && !res->error[0])
        snprintf(res->error, sizeof res->error, "%s", ember_status_str(rc));
    making_free(&m);
    if (rc) {
        char keep[sizeof res->error];
        memcpy(keep, res->error, sizeof keep);
        plan_result_free(res);
        memcpy(res->error, keep, sizeof keep);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    res->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return rc;
}

const char *plan_format_bytes(double bytes, char *buf, size_t n)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    double v = bytes;
    while (fabs(v) >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, n, "%.0f B", v);
    else
        snprintf(buf, n, "%.*f %s", fabs(v) < 10 ? 2 : fabs(v) < 100 ? 1 : 0, v, unit[u]);
    return buf;
}
