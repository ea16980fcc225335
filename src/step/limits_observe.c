/*
 * limits_observe.c: what the per-partition limits see, batch by batch, and
 * limits set while training (ember.h, "Limits that follow the data";
 * docs/adaptive.md).
 *
 * With observation on, every routed batch is counted as the limits count
 * it (prep/limits.c's ember_limits_count: per table and partition, a bag's
 * distinct ids, before anything is dropped or split), and each table's
 * figures are folded into four numbers: the most ids and unique ids of one
 * partition, and the ids and unique ids over the table's limits, summed
 * over its partitions.  A batch's record is queued when its forward is
 * done, and ember_limits_observed takes records from the front of the queue
 * a batch at a time: a caller that takes one batch per step reads the same
 * figures for each step whatever the schedule, though the overlap schedule
 * ends the next batch's forward inside this step.
 */
#include <stdlib.h>
#include <string.h>

#include "collection/collection.h"
#include "prep/limits.h"
#include "step/step.h"

enum { OBS_FIELDS = 4 }; /* max ids, max unique, ids over, unique over */

int ember_limits_observe(ember_collection *c, int on)
{
    if (!c)
        return EMBER_EINVAL;
    if (c->pending)
        return ember_fail(c, EMBER_ESTATE, "ember_limits_observe while a batch is begun (ember_forward_begin)");
    const int64_t T = c->cfg.num_tables, S = c->cfg.num_shards;
    if (on && !c->obs_record) {
        c->obs_record = calloc((size_t)(OBS_FIELDS * T) + 1, sizeof(int64_t));
        c->obs_counts = calloc((size_t)(2 * T * S), sizeof(int64_t));
        if (!c->obs_record || !c->obs_counts) {
            free(c->obs_record);
            free(c->obs_counts);
            c->obs_record = c->obs_counts = NULL;
            return ember_fail(c, EMBER_ENOMEM, "out of memory for the limits' observation");
        }
    }
    c->observe_limits = on != 0;
    c->obs_queued = c->obs_front = 0;
    c->obs_lost = 0;
    c->obs_routed = 0;
    return EMBER_OK;
}

int ember_limits_observed(ember_collection *c, int64_t max_batches, int64_t *out, int64_t *batches)
{
    if (!c)
        return EMBER_EINVAL;
    if (!c->observe_limits)
        return ember_fail(c, EMBER_ESTATE, "ember_limits_observed: observation is off (ember_limits_observe)");
    if (c->obs_lost) {
        c->obs_lost = 0;
        return ember_fail(c, EMBER_ENOMEM, "ember_limits_observed: out of memory for a batch's figures");
    }
    const int64_t T = c->cfg.num_tables, n = OBS_FIELDS * T;
    const int64_t take = max_batches > 0 && max_batches < c->obs_queued ? max_batches : c->obs_queued;
    if (out)
        memset(out, 0, sizeof(int64_t) * (size_t)n);
    for (int64_t b = 0; b < take && out; b++) {
        const int64_t *rec = c->obs_queue + ((c->obs_front + b) % c->obs_cap) * n;
        for (int64_t i = 0; i < n; i += OBS_FIELDS) {
            out[i] = rec[i] > out[i] ? rec[i] : out[i];
            out[i + 1] = rec[i + 1] > out[i + 1] ? rec[i + 1] : out[i + 1];
            out[i + 2] += rec[i + 2];
            out[i + 3] += rec[i + 3];
        }
    }
    c->obs_front = c->obs_cap ? (c->obs_front + take) % c->obs_cap : 0;
    c->obs_queued -= take;
    if (batches)
        *batches = take;
    return EMBER_OK;
}

int ember_set_limits(ember_collection *c, int32_t table, int64_t max_ids, int64_t max_unique)
{
    if (!c)
        return EMBER_EINVAL;
    if (table < 0 || table >= c->cfg.num_tables)
        return ember_fail(c, EMBER_EINVAL, "ember_set_limits: table %d outside [0, %d)", table, c->cfg.num_tables);
    if (max_ids < 0 || max_unique < 0)
        return ember_fail(c, EMBER_EINVAL, "ember_set_limits: table '%s': limits %lld and %lld, must be >= 0",
                          c->tables[table].cfg.name, (long long)max_ids, (long long)max_unique);
    if (c->pending)
        return ember_fail(c, EMBER_ESTATE, "ember_set_limits while a batch is begun (ember_forward_begin): it was "
                          "routed under the limits it had");
    c->tables[table].cfg.max_ids_per_partition = max_ids;
    c->tables[table].cfg.max_unique_ids_per_partition = max_unique;
    return EMBER_OK;
}

/* A routed batch's record, held in obs_record until its forward is done. */
void ember_limits_observe_batch(ember_collection *c)
{
    if (!c->observe_limits)
        return;
    ember_prep P = ember_collection_prep(c);
    const int64_t T = c->cfg.num_tables, S = c->cfg.num_shards;
    int64_t *ids = c->obs_counts, *uniq = ids + T * S, *rec = c->obs_record;
    memset(ids, 0, sizeof(int64_t) * 2 * (size_t)(T * S));
    ember_limits_count(&P, ids, uniq);
    for (int64_t t = 0; t < T; t++) {
        const ember_table_config *tc = &c->tables[t].cfg;
        int64_t *r = rec + OBS_FIELDS * t;
        memset(r, 0, sizeof(int64_t) * OBS_FIELDS);
        for (int64_t k = t * S; k < (t + 1) * S; k++) {
            r[0] = ids[k] > r[0] ? ids[k] : r[0];
            r[1] = uniq[k] > r[1] ? uniq[k] : r[1];
            if (tc->max_ids_per_partition > 0 && ids[k] > tc->max_ids_per_partition)
                r[2] += ids[k] - tc->max_ids_per_partition;
            if (tc->max_unique_ids_per_partition > 0 && uniq[k] > tc->max_unique_ids_per_partition)
                r[3] += uniq[k] - tc->max_unique_ids_per_partition;
        }
    }
    c->obs_routed = 1;
}

/* The forward of the routed batch is done: its record joins the queue
 * (grown when full; a record lost to a failed allocation makes the next
 * call of ember_limits_observed fail). */
void ember_limits_observe_done(ember_collection *c)
{
    if (!c->observe_limits || !c->obs_routed)
        return;
    const int64_t n = OBS_FIELDS * (int64_t)c->cfg.num_tables;
    c->obs_routed = 0;
    if (c->obs_queued == c->obs_cap) {
        int64_t cap = c->obs_cap ? 2 * c->obs_cap : 4;
        int64_t *q = malloc(sizeof(int64_t) * (size_t)(cap * n));
        if (!q) {
            c->obs_lost = 1;
            return;
        }
        for (int64_t b = 0; b < c->obs_queued; b++) /* in order, from the front */
            memcpy(q + b * n, c->obs_queue + ((c->obs_front + b) % c->obs_cap) * n, sizeof(int64_t) * (size_t)n);
        free(c->obs_queue);
        c->obs_queue = q;
        c->obs_cap = cap;
        c->obs_front = 0;
    }
    memcpy(c->obs_queue + ((c->obs_front + c->obs_queued) % c->obs_cap) * n, c->obs_record, sizeof(int64_t) * (size_t)n);
    c->obs_queued++;
}
