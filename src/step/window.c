/*
 * window.c: the SSD tier's lookahead window that follows the data
 * (docs/tiers.md, "A window that follows the data").
 *
 * With cfg.lookahead_max, every WINDOW_PERIOD steps the collection sums its
 * lookahead stores' counters over the period and over the ranks (one
 * all-reduce of five numbers, inside ember_backward, which every rank
 * calls) and moves the window, the same on every rank:
 *   - try growing it (double, up to lookahead_max) while more than a quarter
 *     of the loads are cold reloads: rows the cache evicted as cold (no
 *     announced batch used them) and loaded again within 64 steps, which a
 *     longer window would have kept (estimated on a sample of the rows:
 *     tier/ssd.h, ember_store_ssd_window_counts);
 *   - try shrinking it by a quarter when they are under a sixteenth: a
 *     shorter window may keep as well, for less read-ahead;
 *   - nothing is tried before the cache has been full (evicting) for
 *     WINDOW_WARM periods;
 *   - a trial is judged two periods later (the first belongs to the cache
 *     catching up with the new window): a growth stays when the hit rate
 *     rose (by more than WINDOW_GAIN), a shrink when it did not fall (by
 *     more); otherwise the window goes back and holds for WINDOW_HOLD
 *     periods.
 * The window only changes which rows are cached, never a result.
 */
#include "comm/collect.h"
#include "exchange/exchange.h"
#include "step/step.h"
#include "tier/ssd.h"

#define WINDOW_PERIOD 8 /* steps between decisions */
#define WINDOW_HOLD 4   /* periods without a trial after one that did not pay */
#define WINDOW_GAIN 0.002 /* a growth pays when the hit rate rises more than this */
#define WINDOW_WARM 2   /* periods of a full cache before the first trial */

static int lookahead_store(const ember_ptable *pt)
{
    return pt->storage == EMBER_STORAGE_SSD && pt->policy == EMBER_CACHE_LOOKAHEAD && pt->store->staged;
}

void ember_window_init(ember_collection *c)
{
    c->window.now = c->cfg.lookahead;
    c->window.max = c->cfg.lookahead_max > c->cfg.lookahead ? c->cfg.lookahead_max : 0;
}

static void set_all(ember_collection *c)
{
    for (int32_t p = 0; p < c->num_ptables; p++)
        if (lookahead_store(&c->ptables[p]))
            ember_store_ssd_set_lookahead(c->ptables[p].store, c->window.now);
}

/* A trial's verdict, two periods after it: a growth stays when the hit rate
 * rose more than WINDOW_GAIN, a shrink when it fell less; else the window
 * goes back and holds. */
static void judge(ember_collection *c, double hit)
{
    const int kept = c->window.trial > 0 ? hit > c->window.hit_before + WINDOW_GAIN
                                         : hit >= c->window.hit_before - WINDOW_GAIN;
    c->window.trial = 0;
    if (!kept) {
        c->window.now = c->window.before;
        c->window.hold = WINDOW_HOLD;
        set_all(c);
    }
}

static void try_length(ember_collection *c, int32_t len, double hit, int trial)
{
    c->window.before = c->window.now;
    c->window.hit_before = hit;
    c->window.now = len;
    c->window.trial = trial;
    c->window.settle = 1;
    set_all(c);
}

int ember_window_step(ember_collection *c)
{
    if (c->window.max == 0 || c->stats.steps % WINDOW_PERIOD != 0)
        return EMBER_OK;
    /* the period's accesses, misses, and the sampled rows' loads and cold reloads */
    int64_t cur[5] = {0, 0, 0, 0, 0}, d[5];
    for (int32_t p = 0; p < c->num_ptables; p++) {
        if (!lookahead_store(&c->ptables[p]))
            continue;
        ember_ssd_window_counts w;
        ember_store_ssd_window_counts(c->ptables[p].store, &w);
        cur[0] += w.accesses, cur[1] += w.misses, cur[2] += w.sample_loads, cur[3] += w.sample_reloads;
        cur[4] += w.evictions;
    }
    for (int k = 0; k < 5; k++) {
        d[k] = cur[k] - c->window.base[k];
        c->window.base[k] = cur[k];
    }
    if (c->world->size > 1 && ember_comm_reduce_i64(c->world, d, 5, EMBER_REDUCE_SUM) != EMBER_OK)
        return ember_dist_comm_failed(c);
    if (d[0] == 0 || d[4] == 0) /* nothing accessed, or a cache not full yet: nothing to judge */
        return EMBER_OK;
    const double hit = 1.0 - (double)d[1] / (double)d[0];
    if (++c->window.periods <= WINDOW_WARM) /* the cold reloads need evictions behind them */
        return EMBER_OK;
    if (c->window.trial) {
        if (c->window.settle > 0) { /* the period after a change is the cache's, not the window's */
            c->window.settle--;
            return EMBER_OK;
        }
        judge(c, hit);
        return EMBER_OK;
    }
    if (c->window.hold > 0) {
        c->window.hold--;
        return EMBER_OK;
    }
    const int32_t now = c->window.now;
    if (4 * d[3] > d[2] && now < c->window.max) /* a quarter of the loads: rows a longer window keeps */
        try_length(c, 2 * now < c->window.max ? 2 * now : c->window.max, hit, 1);
    else if (16 * d[3] < d[2] && now > 1)
        try_length(c, now >= 4 ? now - now / 4 : now - 1, hit, -1);
    return EMBER_OK;
}
