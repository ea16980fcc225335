/*
 * summary.c: the figures of a plan over its ranks (plan.h, plan_summary):
 * per rank its cost and its tables, and over ranks the totals, the maxima,
 * the busiest rank and the imbalances that `ember plan` reports.
 */
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

/* max / mean of v over W ranks (1 when the mean is 0) */
static double imbalance(const double *v, int32_t W)
{
    double mx = 0, sum = 0;
    for (int32_t r = 0; r < W; r++) {
        sum += v[r];
        if (v[r] > mx)
            mx = v[r];
    }
    return sum > 0 ? mx / (sum / W) : 1.0;
}

/* The tables of each rank: whole, or a share of a spread one. */
static void count_tables(const plan_result *res, const ember_table_config *tables, plan_summary *s)
{
    const int32_t W = res->world;
    for (int32_t t = 0; t < res->num_tables; t++) {
        const ember_table_config *tb = &tables[t];
        int64_t rows = tb->kind == EMBER_TABLE_DYNAMIC ? plan_dynamic_capacity(tb) * W : tb->rows;
        for (int32_t r = 0; r < W; r++) {
            if (res->placement[t] == EMBER_PLACE_TABLE)
                s->table_wise[r] += res->owner[t] == r;
            else if (res->placement[t] != EMBER_PLACE_ROW || rows > r)
                s->shared[r]++;
        }
    }
}

int plan_summarise(const plan_result *res, const ember_table_config *tables, double lookup_weight, plan_summary *s)
{
    const int32_t W = res->world;
    memset(s, 0, sizeof *s);
    double *v[3];
    for (int i = 0; i < 3; i++)
        v[i] = malloc(sizeof(double) * (size_t)W);
    s->cost = malloc(sizeof(double) * (size_t)W);
    s->table_wise = calloc((size_t)W, sizeof *s->table_wise);
    s->shared = calloc((size_t)W, sizeof *s->shared);
    int st = v[0] && v[1] && v[2] && s->cost && s->table_wise && s->shared ? EMBER_OK : EMBER_ENOMEM;
    for (int32_t r = 0; st == EMBER_OK && r < W; r++) {
        const plan_rank_cost *c = &res->ranks[r];
        v[0][r] = c->ids_served;
        v[1][r] = (double)plan_rank_memory(c);
        v[2][r] = c->a2a_sent + c->ag_sent;
        s->cost[r] = plan_rank_weight(c, lookup_weight);
        s->a2a += c->a2a_sent;
        s->ag += c->ag_sent;
        s->sent_max = v[2][r] > s->sent_max ? v[2][r] : s->sent_max;
        s->mem_max = v[1][r] > s->mem_max ? v[1][r] : s->mem_max;
        s->index_max = c->index_bytes > s->index_max ? c->index_bytes : s->index_max;
        s->ssd_max = c->ssd_bytes > s->ssd_max ? c->ssd_bytes : s->ssd_max;
        if (s->cost[r] > s->cost[s->busiest])
            s->busiest = r;
    }
    if (st == EMBER_OK) {
        s->imb_ids = imbalance(v[0], W);
        s->imb_rows = imbalance(v[1], W);
        s->imb_sent = imbalance(v[2], W);
        s->imb_cost = imbalance(s->cost, W);
        count_tables(res, tables, s);
    }
    for (int i = 0; i < 3; i++)
        free(v[i]);
    if (st != EMBER_OK)
        plan_summary_free(s);
    return st;
}

void plan_summary_free(plan_summary *s)
{
    free(s->cost);
    free(s->table_wise);
    free(s->shared);
    memset(s, 0, sizeof *s);
}
