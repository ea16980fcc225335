/*
 * plan_text.c: `ember plan`'s text report (plan_print.h): the plan's
 * numbers are the library's (include/ember-plan.h); this file lays them
 * out and words the warnings of dynamic tables whose keys outgrow their
 * rows (docs/planner.md, "Dynamic tables").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "plan_print.h"

const char *plan_fmt_count(double v, char *buf, size_t n)
{
    if (!isfinite(v))
        snprintf(buf, n, "never");
    else if (v >= 1e9)
        snprintf(buf, n, "%.2fG", v / 1e9);
    else if (v >= 1e6)
        snprintf(buf, n, "%.2fM", v / 1e6);
    else if (v >= 1e4)
        snprintf(buf, n, "%.1fk", v / 1e3);
    else
        snprintf(buf, n, "%.0f", v);
    return buf;
}

/* The tables: widths from the names. */
static void print_tables(const plan_view *v)
{
    char b1[32], b2[32], b3[32];
    int32_t T = v->sum->tables;
    int nw = 5;
    for (int32_t t = 0; t < T; t++)
        if ((int)strlen(v->tables[t].name) > nw)
            nw = (int)strlen(v->tables[t].name);
    printf("%-*s %11s %4s %-15s %-10s %5s %-6s %10s %10s %10s  %s\n", nw, "table", "rows", "dim",
           "optimizer", "placement", "owner", "xchg", "per rank", "a2a sent", "ag sent", "why");
    for (int32_t t = 0; t < T; t++) {
        const ember_plan_table *tb = &v->tables[t];
        char owner[16] = "-";
        if (tb->placement == EMBER_PLACE_TABLE)
            snprintf(owner, sizeof owner, "%d", (int)tb->owner);
        const char *x = tb->placement == EMBER_PLACE_ROW || tb->placement == EMBER_PLACE_TABLE
                            ? ember_exchange_name(tb->exchange) : "-";
        char why[200];
        snprintf(why, sizeof why, "%s", tb->reason);
        if (tb->hot_rows)
            snprintf(why, sizeof why, "%s; hot rows %lld", tb->reason, (long long)tb->hot_rows);
        printf("%-*s %11lld %4d %-15s %-10s %5s %-6s %10s %10s %10s  %s\n", nw, tb->name, (long long)tb->rows,
               tb->dim, ember_optimizer_name(tb->optimizer), ember_placement_name(tb->placement), owner, x,
               ember_format_bytes((double)tb->max_rank_bytes, b1, sizeof b1),
               ember_format_bytes(tb->a2a_bytes, b2, sizeof b2), ember_format_bytes(tb->ag_bytes, b3, sizeof b3),
               why);
    }
}

/* The ranks shown: all, or the first 8 and the 8 busiest of the others. */
static char *ranks_shown(const plan_view *v)
{
    const int32_t W = v->sum->world;
    char *show = calloc((size_t)W, 1);
    if (!show)
        return NULL;
    int limited = W > 64 && !v->all_ranks;
    for (int32_t r = 0; r < W; r++)
        show[r] = !limited || r < 8;
    if (limited) /* and the 8 busiest of the others */
        for (int k = 0; k < 8; k++) {
            int32_t best = -1;
            for (int32_t r = 8; r < W; r++)
                if (!show[r] && (best < 0 || v->ranks[r].cost > v->ranks[best].cost))
                    best = r;
            if (best >= 0)
                show[best] = 1;
        }
    return show;
}

/* A rank's tables in 24 characters: its table-wise names and the count of
 * spread tables. */
static void rank_tables(const plan_view *v, int32_t r, char *more, size_t n)
{
    char list[25] = "";
    int own = 0, full = 0, shared = v->ranks[r].shared_tables;
    for (int32_t t = 0; t < v->sum->tables; t++) {
        if (v->tables[t].placement != EMBER_PLACE_TABLE || v->tables[t].owner != r)
            continue;
        own++;
        size_t L = strlen(list);
        if (!full && L + strlen(v->tables[t].name) + 2 < sizeof list - 4)
            snprintf(list + L, sizeof list - L, "%s%s", L ? "," : "", v->tables[t].name);
        else
            full = 1;
    }
    if (full)
        snprintf(list + strlen(list), sizeof list - strlen(list), ",..");
    if (shared)
        snprintf(more, n, "%s%s+%d spread", list, own ? " " : "", shared);
    else
        snprintf(more, n, "%s", list);
    if (strlen(more) > 24)
        snprintf(more, n, "%d own +%d spread", own, shared);
}

static void print_ranks(const plan_view *v)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], b7[32], b8[32];
    const int32_t W = v->sum->world;
    char *show = ranks_shown(v);
    if (!show)
        return;
    int ix = v->sum->max_rank_index > 0; /* a key index column for dynamic tables */
    printf("\n%5s  %-24s %10s %10s%*s %10s %10s %10s %10s %10s %10s\n", "rank", "tables", "rows",
           "state", ix ? 11 : 0, ix ? "key index" : "", "ids served", "lookups", "a2a sent", "ag sent",
           "received", "cost");
    int32_t hidden = 0;
    for (int32_t r = 0; r < W; r++) {
        if (!show[r]) {
            hidden++;
            continue;
        }
        const ember_plan_rank *c = &v->ranks[r];
        char more[64], index[32] = "";
        rank_tables(v, r, more, sizeof more);
        if (ix)
            ember_format_bytes((double)c->index_bytes, index, sizeof index);
        printf("%5d  %-24s %10s %10s%*s %10s %10s %10s %10s %10s %10s%s\n", (int)r, more,
               ember_format_bytes((double)c->row_bytes, b1, sizeof b1),
               ember_format_bytes((double)c->state_bytes, b2, sizeof b2), ix ? 11 : 0, index,
               plan_fmt_count(c->ids_served, b3, sizeof b3), ember_format_bytes(c->lookup_bytes, b4, sizeof b4),
               ember_format_bytes(c->a2a_sent, b5, sizeof b5), ember_format_bytes(c->ag_sent, b6, sizeof b6),
               ember_format_bytes(c->a2a_received + c->ag_received, b7, sizeof b7),
               ember_format_bytes(c->cost, b8, sizeof b8), r == v->sum->busiest_rank ? "  busiest" : "");
    }
    if (hidden)
        printf("  ... %d more ranks (--all-ranks lists them, --json has all)\n", (int)hidden);
    free(show);
}

/* The SSD tier's tables: cache and store file per rank, expected hit rate. */
static void print_tiers(const plan_view *v)
{
    char b1[32], b2[32], b3[32];
    int any = 0;
    for (int32_t t = 0; t < v->sum->tables; t++)
        any |= v->tables[t].storage == EMBER_STORAGE_SSD;
    if (!any)
        return;
    printf("\nSSD tier (docs/tiers.md): per rank at most %s in DRAM (rows, state%s and caches) and %s in "
           "store files\n", ember_format_bytes(v->sum->max_rank_memory, b1, sizeof b1),
           v->sum->max_rank_index ? ", key indexes" : "",
           ember_format_bytes((double)v->sum->max_rank_ssd_bytes, b2, sizeof b2));
    printf("  %-24s %12s %14s %20s\n", "table", "cache/rank", "store, total", "expected hit rate");
    for (int32_t t = 0; t < v->sum->tables; t++) {
        const ember_plan_table *tb = &v->tables[t];
        if (tb->storage != EMBER_STORAGE_SSD)
            continue;
        printf("  %-24s %12s %14s %19.1f%%\n", tb->name, ember_format_bytes((double)tb->cache_bytes, b1, sizeof b1),
               ember_format_bytes((double)tb->ssd_bytes, b3, sizeof b3), 100.0 * tb->expected_lru_hit_rate);
    }
    printf("  (hit rate: LRU by Che's approximation from the id statistics; lookahead does better)\n");
}

/* The warnings of one dynamic table, if its keys outgrow its rows. */
static void warn(const ember_plan_table *tb, int64_t horizon)
{
    const ember_plan_keys *d = &tb->keys;
    char k[32], f[48], m[32];
    if (d->over_capacity_per_step)
        printf("warning: dynamic table '%s': one step brings %s distinct keys to rank %d, more than its "
               "capacity of %lld rows per rank: once they hold keys, such a step fails (every row holds a key "
               "the batch uses)\n", tb->name, plan_fmt_count(d->keys_per_step, k, sizeof k), (int)d->busiest_rank,
               (long long)d->capacity);
    if (!d->over_capacity_over_horizon)
        return;
    plan_fmt_count(d->keys_over_horizon, k, sizeof k);
    double fill = ceil(d->fill_steps);
    snprintf(f, sizeof f, "%s step%s", plan_fmt_count(fill, m, sizeof m), fill == 1 ? "" : "s");
    printf("warning: dynamic table '%s': %s distinct keys per rank over %.0f steps, %.2fx its capacity of "
           "%lld rows per rank: ", tb->name, k, (double)horizon, d->keys_over_horizon / (double)d->capacity,
           (long long)d->capacity);
    if (tb->evict == EMBER_EVICT_NONE)
        printf("with evict = \"none\" its rows fill after about %s and the next step that needs a row "
               "fails\n", f);
    else
        printf("its rows fill after about %s, then about %s keys per step per rank find no row (LRU "
               "estimate): rows are evicted and reset, and evicted keys start again from the initializer\n",
               f, plan_fmt_count(d->keys_without_row_per_step, m, sizeof m));
}

/* One dynamic table's line. */
static void print_dynamic_table(const plan_view *v, const ember_plan_table *tb, int nw)
{
    const ember_plan_keys *d = &tb->keys;
    char b1[32], b2[32], k1[32], k2[32], f[48], m[32], over[48], rb[40];
    /* an SSD table's rows are in its store file (split evenly by key hash); in
     * memory it has its cache */
    int ssd = tb->ssd_bytes > 0;
    int64_t rows = ssd ? tb->ssd_bytes / v->sum->world : tb->max_rank_bytes - d->index_bytes;
    snprintf(over, sizeof over, "%s (%.2fx)", plan_fmt_count(d->keys_over_horizon, k2, sizeof k2),
             d->keys_over_horizon / (double)d->capacity);
    if (isfinite(d->fill_steps))
        snprintf(f, sizeof f, "%s step%s", plan_fmt_count(ceil(d->fill_steps), k1, sizeof k1),
                 ceil(d->fill_steps) == 1 ? "" : "s");
    else
        snprintf(f, sizeof f, "never");
    snprintf(rb, sizeof rb, "%s%s", ember_format_bytes((double)rows, b1, sizeof b1), ssd ? " (ssd)" : "");
    printf("  %-*s %13lld %15s %12s %14s %21s %12s %17s\n", nw, tb->name, (long long)d->capacity, rb,
           ember_format_bytes((double)d->index_bytes, b2, sizeof b2), plan_fmt_count(d->keys_per_step, k1, sizeof k1),
           over, f, plan_fmt_count(d->keys_without_row_per_step, m, sizeof m));
}

/* The "dynamic tables" section and its warnings (nothing without one). */
static void print_dynamic(const plan_view *v)
{
    int32_t T = v->sum->tables, nw = 5, any = 0;
    for (int32_t t = 0; t < T; t++)
        if (v->tables[t].kind == EMBER_TABLE_DYNAMIC) {
            any = 1;
            nw = (int)strlen(v->tables[t].name) > nw ? (int)strlen(v->tables[t].name) : nw;
        }
    if (!any)
        return;
    printf("\ndynamic tables (docs/dynamic.md): rank r owns the keys with mix64(key) mod %d = r; per rank, "
           "over %.0f steps of %lld samples (--horizon):\n", (int)v->sum->world, (double)v->sum->horizon,
           (long long)v->sum->global_batch);
    printf("  %-*s %13s %15s %12s %14s %21s %12s %17s\n", nw, "table", "capacity/rank", "rows + state",
           "key index", "keys/step", "keys over the horizon", "rows fill in", "no row, per step");
    for (int32_t t = 0; t < T; t++)
        if (v->tables[t].kind == EMBER_TABLE_DYNAMIC)
            print_dynamic_table(v, &v->tables[t], nw);
    printf("  (expected distinct keys of the rank their hottest keys hash to; admission is not modelled, so "
           "they are the rows wanted at most)\n");
    for (int32_t t = 0; t < T; t++)
        if (v->tables[t].kind == EMBER_TABLE_DYNAMIC)
            warn(&v->tables[t], v->sum->horizon);
}

/* The dense model per pipeline stage, when the config has one. */
static void print_dense(const plan_view *v)
{
    ember_plan_dense d;
    if (ember_plan_dense_info(v->plan, 0, &d) != EMBER_OK)
        return;
    if (d.stages > 1) {
        printf("\ndense model in %d pipeline stages (rank r runs stage r mod %d), cuts at blocks", (int)d.stages,
               (int)d.stages);
        for (int32_t i = 0; i < d.num_cuts; i++)
            printf("%s%d", i ? ", " : " ", (int)d.cuts[i]);
        printf("; per rank:\n");
    } else {
        printf("\ndense model, per rank:\n");
    }
    for (int32_t s = 0; s < d.stages && ember_plan_dense_info(v->plan, s, &d) == EMBER_OK; s++) {
        char b[4][32], who[32] = "";
        if (d.stages > 1)
            snprintf(who, sizeof who, "stage %d: ", (int)s);
        printf("  %sparameters %s, gradients %s, optimizer state %s, kept activations %s\n", who,
               ember_format_bytes((double)d.params, b[0], sizeof b[0]),
               ember_format_bytes((double)d.grads, b[1], sizeof b[1]),
               ember_format_bytes((double)d.state, b[2], sizeof b[2]),
               ember_format_bytes((double)d.activations, b[3], sizeof b[3]));
    }
}

void plan_print_text(const plan_view *v)
{
    const ember_plan_summary *s = v->sum;
    char b1[32], b2[32], b3[32];
    printf("ember plan: %s (%s): %d table%s, %d feature%s, global batch %lld, world %d, ", s->config, s->name,
           (int)s->tables, s->tables == 1 ? "" : "s", (int)s->features, s->features == 1 ? "" : "s",
           (long long)s->global_batch, (int)s->world);
    if (s->memory_per_rank > 0)
        printf("budget %s per rank\n", ember_format_bytes((double)s->memory_per_rank, b1, sizeof b1));
    else
        printf("no memory budget\n");
    printf("ids: %s; bytes are per step (forward + backward), expected values; planned in "
           "%.1f ms\n\n", s->id_statistics, 1e3 * s->seconds);
    print_tables(v);
    print_ranks(v);
    printf("\nper step, all ranks: all-to-all %s, all-gather %s sent; busiest rank %d: cost %s "
           "(max(sent, received) + %g x lookups)\n",
           ember_format_bytes(s->a2a_bytes, b1, sizeof b1), ember_format_bytes(s->ag_bytes, b2, sizeof b2),
           (int)s->busiest_rank, ember_format_bytes(v->ranks[s->busiest_rank].cost, b3, sizeof b3),
           s->lookup_weight);
    printf("imbalance, max / mean over ranks: ids served %.2f, rows + state %.2f, bytes sent %.2f, "
           "cost %.2f\n", s->imbalance_ids_served, s->imbalance_memory, s->imbalance_bytes_sent,
           s->imbalance_cost);
    printf("memory: at most %s of rows + state%s on a rank", ember_format_bytes(s->max_rank_memory, b1, sizeof b1),
           s->max_rank_index ? " + key indexes" : "");
    if (s->memory_per_rank > 0)
        printf(" (%.0f%% of the budget)", 100.0 * s->max_rank_memory / (double)s->memory_per_rank);
    printf("; plan cost (busiest + mean rank) %s\n", ember_format_bytes(s->cost, b2, sizeof b2));
    print_tiers(v);
    print_dynamic(v);
    print_dense(v);
}
