/*
 * limits_adapt.c: the limits that follow the data (limits_adapt.h).
 *
 * The state is small: the limits in force, a ring of the last `window`
 * steps' global maxima (per table, ids and unique ids), the steps waiting
 * for an agreement (local figures), and the excess summed since the last
 * decision.  Steps wait only until the next decision or checkpoint, so an
 * agreement is one reduction of at most `every` steps' figures.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/collect.h"
#include "core/status.h"
#include "plan/limits.h"
#include "plan/limits_adapt.h"

#define ADAPT_MAGIC 0x5444414c424d45LL /* "EMBLADT" */
#define ADAPT_VERSION 1

enum { OBS = 4 }; /* figures per table and step: max ids, max unique, ids over, unique over */

struct limits_adapt {
    limits_adapt_config cfg;
    int32_t T, S;
    int32_t *dim;          /* [T]                                           */
    uint8_t *adapted;      /* [T]                                           */
    int64_t *limit;        /* [2T] in force: ids, unique                    */
    int64_t *ring;         /* [window][T][2] per-step global maxima         */
    int64_t filled, head;  /* entries in the ring; the next one's slot      */
    int64_t *wait;         /* [every][T][OBS] local figures, not yet agreed */
    int64_t waiting, wait_cap;
    int64_t *over;         /* [2T] agreed excess since the last decision    */
    int64_t *peak;         /* [2T] the most of any agreed step so far       */
    int64_t decided;       /* decisions made                                */
    int64_t *scratch;      /* [(max(window, wait_cap) + 1) * 2T]            */
    int64_t *plan;         /* [6T] a decision's: wanted, floors, next       */
};

limits_adapt_config limits_adapt_config_default(void)
{
    limits_adapt_config c = {LIMITS_ADAPT_OFF, 100, 400, 0.999, 0.05, 0};
    return c;
}

static int adapted_table(const ember_table_config *t)
{
    return t->max_ids_per_partition > 0 || t->max_unique_ids_per_partition > 0 ||
           t->limit_policy == EMBER_LIMIT_DROP || t->limit_policy == EMBER_LIMIT_MINIBATCH;
}

int limits_adapt_create(const limits_adapt_config *cfg, const ember_collection_config *cc, limits_adapt **out,
                        char *err, size_t errlen)
{
    *out = NULL;
    if (cfg->every < 1 || cfg->window < 1 || !(cfg->quantile >= 0 && cfg->quantile <= 1) ||
        !(cfg->headroom >= 0 && cfg->headroom <= 100) || cfg->max_bytes < 0) {
        snprintf(err, errlen, "adaptive limits: every %lld and window %lld must be >= 1, quantile %g in [0, 1], "
                 "headroom %g in [0, 100], max_bytes %lld >= 0", (long long)cfg->every, (long long)cfg->window,
                 cfg->quantile, cfg->headroom, (long long)cfg->max_bytes);
        return EMBER_EINVAL;
    }
    limits_adapt *a = calloc(1, sizeof *a);
    if (!a)
        return EMBER_ENOMEM;
    a->cfg = *cfg;
    a->T = cc->num_tables;
    a->S = cc->num_shards > 0 ? cc->num_shards : (cc->world ? ember_world_size(cc->world) : 1);
    /* waits at most until the next decision; a first-window decision reads `window` steps */
    a->wait_cap = cfg->mode == LIMITS_ADAPT_FIRST ? cfg->window : cfg->every;
    const int64_t T = a->T, rows = cfg->window > a->wait_cap ? cfg->window : a->wait_cap;
    a->dim = calloc((size_t)T + 1, sizeof *a->dim);
    a->adapted = calloc((size_t)T + 1, 1);
    a->limit = calloc((size_t)(2 * T) + 1, sizeof *a->limit);
    a->over = calloc((size_t)(2 * T) + 1, sizeof *a->over);
    a->peak = calloc((size_t)(2 * T) + 1, sizeof *a->peak);
    a->ring = calloc((size_t)(cfg->window * 2 * T) + 1, sizeof *a->ring);
    a->wait = calloc((size_t)(a->wait_cap * OBS * T) + 1, sizeof *a->wait);
    a->scratch = calloc((size_t)((rows + 1) * 2 * T) + 1, sizeof *a->scratch); /* + the excess */
    a->plan = calloc((size_t)(6 * T) + 1, sizeof *a->plan);
    if (!a->dim || !a->adapted || !a->limit || !a->over || !a->peak || !a->ring || !a->wait || !a->scratch || !a->plan) {
        limits_adapt_destroy(a);
        return EMBER_ENOMEM;
    }
    for (int32_t t = 0; t < a->T; t++) {
        a->dim[t] = cc->tables[t].dim;
        a->adapted[t] = (uint8_t)adapted_table(&cc->tables[t]);
        a->limit[2 * t] = cc->tables[t].max_ids_per_partition;
        a->limit[2 * t + 1] = cc->tables[t].max_unique_ids_per_partition;
    }
    *out = a;
    return EMBER_OK;
}

void limits_adapt_destroy(limits_adapt *a)
{
    if (!a)
        return;
    free(a->dim);
    free(a->adapted);
    free(a->limit);
    free(a->over);
    free(a->peak);
    free(a->ring);
    free(a->wait);
    free(a->scratch);
    free(a->plan);
    free(a);
}

int limits_adapt_observe(limits_adapt *a, const int64_t *obs)
{
    if (limits_adapt_done(a))
        return EMBER_OK; /* decided once: nothing more to read */
    if (a->waiting >= a->wait_cap)
        return EMBER_ENOMEM;
    memcpy(a->wait + a->waiting * OBS * a->T, obs, sizeof(int64_t) * OBS * (size_t)a->T);
    a->waiting++;
    return EMBER_OK;
}

int limits_adapt_done(const limits_adapt *a) { return a->cfg.mode == LIMITS_ADAPT_FIRST && a->decided > 0; }

int limits_adapt_due(const limits_adapt *a, int64_t step)
{
    if (a->cfg.mode == LIMITS_ADAPT_FIRST)
        return step == a->cfg.window;
    return a->cfg.mode == LIMITS_ADAPT_RUNNING && step > 0 && step % a->cfg.every == 0;
}

int limits_adapt_agree(limits_adapt *a, ember_world *w)
{
    const int64_t T = a->T, n = a->waiting;
    int64_t *mx = a->scratch, *ov = a->scratch + n * 2 * T;
    memset(ov, 0, sizeof(int64_t) * 2 * (size_t)T);
    for (int64_t s = 0; s < n; s++)
        for (int64_t t = 0; t < T; t++) {
            const int64_t *o = a->wait + (s * T + t) * OBS;
            mx[(s * T + t) * 2] = o[0];
            mx[(s * T + t) * 2 + 1] = o[1];
            ov[2 * t] += o[2];
            ov[2 * t + 1] += o[3];
        }
    int st = EMBER_OK;
    if (w && ember_world_size(w) > 1) {
        st = ember_comm_reduce_i64(w, mx, n * 2 * T, EMBER_REDUCE_MAX);
        if (st == EMBER_OK)
            st = ember_comm_reduce_i64(w, ov, 2 * T, EMBER_REDUCE_SUM);
        if (st != EMBER_OK)
            return st;
    }
    for (int64_t s = 0; s < n; s++) {
        for (int64_t i = 0; i < 2 * T; i++)
            a->peak[i] = mx[s * 2 * T + i] > a->peak[i] ? mx[s * 2 * T + i] : a->peak[i];
        memcpy(a->ring + a->head * 2 * T, mx + s * 2 * T, sizeof(int64_t) * 2 * (size_t)T);
        a->head = (a->head + 1) % a->cfg.window;
        a->filled += a->filled < a->cfg.window;
    }
    for (int64_t i = 0; i < 2 * T; i++)
        a->over[i] += ov[i];
    a->waiting = 0;
    return EMBER_OK;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t p = *(const int64_t *)x, q = *(const int64_t *)y;
    return p < q ? -1 : p > q;
}

/* ceil(quantile of the window's field k (0 ids, 1 unique) x (1 + headroom)),
 * a rounding error above an integer staying it; at least 1. */
static int64_t wanted(limits_adapt *a, int32_t t, int k)
{
    int64_t *v = a->scratch;
    for (int64_t i = 0; i < a->filled; i++)
        v[i] = a->ring[(i * a->T + t) * 2 + k];
    qsort(v, (size_t)a->filled, sizeof *v, cmp_i64);
    double q = limits_percentile(v, a->filled, a->cfg.quantile) * (1.0 + a->cfg.headroom);
    int64_t w = (int64_t)ceil(q - 1e-9);
    return w < 1 ? 1 : w;
}

/* a + b, INT64_MAX (no bound) absorbing */
static int64_t add_bytes(int64_t a, int64_t b) { return a == INT64_MAX || b == INT64_MAX || a > INT64_MAX - b ? INT64_MAX : a + b; }

static int64_t table_bytes(const limits_adapt *a, int32_t t, int64_t ids, int64_t unique)
{
    if (ids <= 0 || unique <= 0)
        return INT64_MAX;
    double b = (double)a->S * (8.0 * (double)ids + 4.0 * (double)a->dim[t] * (double)unique);
    return b >= 9.2e18 ? INT64_MAX : (int64_t)b;
}

void limits_adapt_peak(const limits_adapt *a, int32_t table, int64_t *ids, int64_t *unique)
{
    *ids = a->peak[2 * table];
    *unique = a->peak[2 * table + 1];
}

static int64_t sum_bytes(const limits_adapt *a, const int64_t *limit)
{
    int64_t sum = 0;
    for (int32_t t = 0; t < a->T; t++) {
        if (!a->adapted[t])
            continue;
        sum = add_bytes(sum, table_bytes(a, t, limit[2 * t], limit[2 * t + 1]));
    }
    return sum;
}

int64_t limits_adapt_bytes(const limits_adapt *a, int32_t table)
{
    if (table >= 0)
        return table_bytes(a, table, a->limit[2 * table], a->limit[2 * table + 1]);
    return sum_bytes(a, a->limit);
}

int64_t limits_adapt_peak_bytes(const limits_adapt *a) { return sum_bytes(a, a->peak); }

/* Under the bound: the limits (*ids, *unique) cut back towards (lo_ids,
 * lo_unique) by one factor until their bytes fit `room`; never below lo. */
static void fit(const limits_adapt *a, int32_t t, int64_t room, int64_t lo_ids, int64_t lo_unique, int64_t *ids,
                int64_t *unique)
{
    double lo = 0, hi = 1;
    int64_t bi = lo_ids, bu = lo_unique;
    for (int it = 0; it < 60; it++) { /* the largest factor whose bytes fit */
        double mid = 0.5 * (lo + hi);
        int64_t i = (int64_t)floor((double)*ids * mid), u = (int64_t)floor((double)*unique * mid);
        i = i < lo_ids ? lo_ids : i;
        u = u < lo_unique ? lo_unique : u;
        if (table_bytes(a, t, i, u) <= room) {
            lo = mid;
            bi = i;
            bu = u;
        } else {
            hi = mid;
        }
    }
    *ids = bi;
    *unique = bu;
}

void limits_adapt_decide(limits_adapt *a, int64_t step, limits_change *changes, int32_t *n)
{
    *n = 0;
    if (!limits_adapt_due(a, step) || a->filled == 0)
        return;
    const double h = 1.0 + a->cfg.headroom;
    int64_t *want = a->plan, *lo = a->plan + 2 * a->T, *next = a->plan + 4 * a->T; /* [2T] each */
    int64_t floors = 0; /* the floors' bytes, summed */
    for (int32_t t = 0; t < a->T; t++) {
        if (!a->adapted[t])
            continue;
        for (int k = 0; k < 2; k++) {
            /* raise when below what the rule wants, shrink when more than the
             * headroom above it; a limit of 0 (none) always takes it.  The
             * floor, where the bound cuts back to: shrinks taken, raises not. */
            const int64_t old = a->limit[2 * t + k], w = wanted(a, t, k);
            want[2 * t + k] = w;
            next[2 * t + k] = old == 0 || old < w || (double)old > (double)w * h ? w : old;
            lo[2 * t + k] = old == 0 ? 1 : next[2 * t + k] < old ? next[2 * t + k] : old;
        }
        floors = add_bytes(floors, table_bytes(a, t, lo[2 * t], lo[2 * t + 1]));
    }
    int64_t used = 0; /* the decided tables' bytes, in config order */
    for (int32_t t = 0; t < a->T; t++) {
        if (!a->adapted[t])
            continue;
        const int64_t oi = a->limit[2 * t], ou = a->limit[2 * t + 1];
        int64_t ni = next[2 * t], nu = next[2 * t + 1];
        int capped = 0;
        if (a->cfg.max_bytes > 0) {
            /* room: the bound less the tables decided and the floors of those to come */
            const int64_t fb = table_bytes(a, t, lo[2 * t], lo[2 * t + 1]);
            floors = floors == INT64_MAX ? INT64_MAX : floors - fb;
            const int64_t room = floors == INT64_MAX || used == INT64_MAX ? 0 : a->cfg.max_bytes - used - floors;
            if (table_bytes(a, t, ni, nu) > room) { /* raises cut back, shrinks kept */
                fit(a, t, room, lo[2 * t], lo[2 * t + 1], &ni, &nu);
                capped = 1;
            }
            used = add_bytes(used, table_bytes(a, t, ni, nu));
        }
        if (ni != oi || nu != ou || capped) {
            changes[*n] = (limits_change){t, oi, ou, ni, nu, want[2 * t], want[2 * t + 1],
                                          a->over[2 * t], a->over[2 * t + 1], capped};
            (*n)++;
        }
        a->limit[2 * t] = ni;
        a->limit[2 * t + 1] = nu;
    }
    memset(a->over, 0, sizeof(int64_t) * 2 * (size_t)a->T);
    a->decided++;
}

void limits_adapt_limits(const limits_adapt *a, int32_t table, int64_t *max_ids, int64_t *max_unique)
{
    *max_ids = a->limit[2 * table];
    *max_unique = a->limit[2 * table + 1];
}

int limits_adapt_adapted(const limits_adapt *a, int32_t table) { return a->adapted[table]; }

/* The blob: magic, version, tables, window, filled, head, decided, then
 * limits [2T], excess [2T], peak [2T], ring [window * 2T]; int64 each. */
int limits_adapt_save(const limits_adapt *a, void **blob, int64_t *bytes)
{
    const int64_t T = a->T, n = 7 + 6 * T + a->cfg.window * 2 * T;
    int64_t *b = malloc(sizeof(int64_t) * (size_t)n);
    if (!b)
        return EMBER_ENOMEM;
    int64_t head[7] = {ADAPT_MAGIC, ADAPT_VERSION, T, a->cfg.window, a->filled, a->head, a->decided};
    memcpy(b, head, sizeof head);
    memcpy(b + 7, a->limit, sizeof(int64_t) * 2 * (size_t)T);
    memcpy(b + 7 + 2 * T, a->over, sizeof(int64_t) * 2 * (size_t)T);
    memcpy(b + 7 + 4 * T, a->peak, sizeof(int64_t) * 2 * (size_t)T);
    memcpy(b + 7 + 6 * T, a->ring, sizeof(int64_t) * (size_t)(a->cfg.window * 2 * T));
    *blob = b;
    *bytes = n * (int64_t)sizeof(int64_t);
    return EMBER_OK;
}

int limits_adapt_load(limits_adapt *a, const void *blob, int64_t bytes, char *err, size_t errlen)
{
    const int64_t T = a->T, n = 7 + 6 * T + a->cfg.window * 2 * T;
    const int64_t *b = blob;
    if (bytes != n * (int64_t)sizeof(int64_t) || b[0] != ADAPT_MAGIC || b[1] != ADAPT_VERSION || b[2] != T ||
        b[3] != a->cfg.window || b[4] < 0 || b[4] > a->cfg.window || b[5] < 0 || b[5] >= a->cfg.window ||
        b[6] < 0) {
        snprintf(err, errlen, "the adaptive limits' state (%lld bytes) is not one of %lld tables and a window of "
                 "%lld steps", (long long)bytes, (long long)T, (long long)a->cfg.window);
        return EMBER_EFORMAT;
    }
    for (int64_t i = 0; i < 2 * T; i++)
        if (b[7 + i] < 0 || b[7 + 2 * T + i] < 0 || b[7 + 4 * T + i] < 0) {
            snprintf(err, errlen, "the adaptive limits' state holds a negative limit or count");
            return EMBER_EFORMAT;
        }
    a->filled = b[4];
    a->head = b[5];
    a->decided = b[6];
    memcpy(a->limit, b + 7, sizeof(int64_t) * 2 * (size_t)T);
    memcpy(a->over, b + 7 + 2 * T, sizeof(int64_t) * 2 * (size_t)T);
    memcpy(a->peak, b + 7 + 4 * T, sizeof(int64_t) * 2 * (size_t)T);
    memcpy(a->ring, b + 7 + 6 * T, sizeof(int64_t) * (size_t)(a->cfg.window * 2 * T));
    a->waiting = 0;
    return EMBER_OK;
}
