/*
 * limits.c: a training run's limits that follow the data (run.h;
 * docs/adaptive.md).  The decisions are src/plan/limits_adapt.c's; here the
 * run feeds it every step's figures (ember_limits_observed), agrees them at
 * its decision steps and before each checkpoint, sets the tables' new limits
 * (ember_set_limits) and tells each change as a "limits" event.  Decision
 * steps drain the overlap and stale schedules (loop.c), so no batch routed
 * under the old limits is in flight when they change.
 */
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "config/cfg_read.h"
#include "train/run.h"

int train_limits_open(ember_trainer *s)
{
    char err[512] = "";
    int st = EMBER_OK;
    if (s->t.limits.mode != LIMITS_ADAPT_OFF) {
        st = limits_adapt_create(&s->t.limits, &s->cc, &s->limits, err, sizeof err);
        if (st == EMBER_OK && !(s->limits_obs = malloc(sizeof(int64_t) * (size_t)(4 * s->cc.num_tables + 1))))
            st = EMBER_ENOMEM;
        if (st == EMBER_OK && (st = ember_limits_observe(s->coll, 1)) != EMBER_OK)
            snprintf(err, sizeof err, "%s", ember_errmsg(s->coll));
        else if (st == EMBER_ENOMEM)
            snprintf(err, sizeof err, "out of memory for the adaptive limits");
    }
    return run_agree(s, st != EMBER_OK, st, err);
}

void train_limits_close(ember_trainer *s)
{
    limits_adapt_destroy(s->limits);
    free(s->limits_obs);
    s->limits = NULL;
    s->limits_obs = NULL;
}

/* The limits in force into the collection. */
static int apply(ember_trainer *s)
{
    for (int32_t t = 0; t < s->cc.num_tables; t++) {
        int64_t ids, unique;
        limits_adapt_limits(s->limits, t, &ids, &unique);
        int st = ember_set_limits(s->coll, t, ids, unique);
        if (st != EMBER_OK)
            return st;
    }
    return EMBER_OK;
}

static void event_change(ember_trainer *s, int64_t step, const limits_change *c)
{
    if (s->rank != 0 || !s->on_event)
        return;
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("limits"));
    json_object_set_new(j, "step", json_integer(step));
    json_object_set_new(j, "table", json_string(s->cc.tables[c->table].name));
    json_object_set_new(j, "max_ids_per_partition", json_integer(c->new_ids));
    json_object_set_new(j, "max_unique_ids_per_partition", json_integer(c->new_unique));
    json_object_set_new(j, "was", json_pack("[I, I]", (json_int_t)c->old_ids, (json_int_t)c->old_unique));
    json_object_set_new(j, "wanted", json_pack("[I, I]", (json_int_t)c->want_ids, (json_int_t)c->want_unique));
    json_object_set_new(j, "over_ids", json_integer(c->over_ids));
    json_object_set_new(j, "over_unique_ids", json_integer(c->over_unique));
    json_object_set_new(j, "policy", json_string(CFG_POLICIES[s->cc.tables[c->table].limit_policy]));
    json_object_set_new(j, "capped", json_boolean(c->capped));
    int64_t bytes = limits_adapt_bytes(s->limits, -1);
    json_object_set_new(j, "limit_bytes", bytes == INT64_MAX ? json_null() : json_integer(bytes));
    train_event_emit(s, j);
}

int train_limits_step(ember_trainer *s, int64_t step)
{
    if (!s->limits || limits_adapt_done(s->limits))
        return 0;
    int st = ember_limits_observed(s->coll, 1, s->limits_obs, NULL);
    if (st == EMBER_OK)
        st = limits_adapt_observe(s->limits, s->limits_obs);
    if (run_agree(s, st != EMBER_OK, st, "step figures of the adaptive limits: out of memory"))
        return 1;
    if (!limits_adapt_due(s->limits, step) || step >= s->t.steps)
        return 0;
    st = limits_adapt_agree(s->limits, s->world);
    if (run_agree_status(s, st, "adaptive limits: cannot agree the figures"))
        return 1;
    limits_change *ch = malloc(sizeof *ch * (size_t)(s->cc.num_tables + 1));
    if (run_agree(s, !ch, EMBER_ENOMEM, "adaptive limits: out of memory"))
        return 1;
    int32_t n = 0;
    limits_adapt_decide(s->limits, step, ch, &n);
    st = apply(s);
    if (run_agree(s, st != EMBER_OK, st, ember_errmsg(s->coll))) {
        free(ch);
        return 1;
    }
    for (int32_t i = 0; i < n; i++)
        event_change(s, step, &ch[i]);
    s->ls.limit_changes += n;
    free(ch);
    if (limits_adapt_done(s->limits)) /* decided once: nothing more to count */
        ember_limits_observe(s->coll, 0);
    return 0;
}

void train_limits_forget(ember_trainer *s)
{
    if (s->limits)
        ember_limits_observed(s->coll, 0, NULL, NULL); /* dropped */
}

int train_limits_sync(ember_trainer *s)
{
    if (!s->limits)
        return 0;
    int st = limits_adapt_agree(s->limits, s->world);
    return run_agree_status(s, st, "adaptive limits: cannot agree the figures");
}

int train_limits_restore(ember_trainer *s, const void *blob, int64_t bytes, char *err, size_t errlen)
{
    if (!s->limits)
        return 0;
    int st = limits_adapt_load(s->limits, blob, bytes, err, errlen);
    if (st == EMBER_OK && (st = apply(s)) != EMBER_OK)
        snprintf(err, errlen, "%s", ember_errmsg(s->coll));
    if (st == EMBER_OK && limits_adapt_done(s->limits))
        ember_limits_observe(s->coll, 0);
    return st == EMBER_OK ? 0 : -1;
}
