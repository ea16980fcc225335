/*
 * limits.c: ember_limits_run (include/ember-plan.h, "limits"), the scan
 * behind `ember limits`: observed per-partition id counts and suggested
 * limits (SparseCore's limit calculation, steps 1-7).
 *
 * The batches come from a batch file, a binary training file, the
 * synthetic generator or a config's data (limits_source.c).  A collection
 * shaped like the data (one table per data table, dim 1, SGD, zero init,
 * stacked unless asked not to, so the shard of an id is exactly what
 * training with those tables would see) answers ember_partition_counts()
 * for every batch; per table the batch's maximum over shards of the ids
 * and of the unique ids goes into a series, summarised as maximum,
 * percentiles and suggestions (src/plan/limits.c).  A config's dynamic
 * tables stay dynamic, and their keys are also counted by owner
 * (src/plan/limits_keys.c).
 *
 * Over a world every rank reads (or draws) the same global batches and
 * counts its contiguous share of the samples (batch_slice.h), because
 * limits are enforced per rank over its local batch (docs/distributed.md,
 * "Limits across ranks").  Per batch one reduction takes the maximum over
 * ranks of each (table, shard) count, the ranks' failures and the end of
 * the data together, so the suggested limits hold on every rank of a world
 * of that size.  Failures are agreed (comm/agree.h): every rank returns
 * the same status and message.
 */
#include <stdlib.h>
#include <string.h>

#include "api/limits_scan.h"
#include "comm/agree.h"
#include "comm/collect.h"
#include "comm/comm.h"
#include "data/data_error.h"

/* Agrees on this rank's failure (s->status, s->msg) before the next
 * collective step: 1 on every rank when any failed, with the agreed
 * status and message in s. */
static int agree(limits_scan *s)
{
    return comm_agree_error(s->c.world, s->status != EMBER_OK, &s->status, s->msg, sizeof s->msg);
}

/* Step 2: the collection shaped like the data, and the dynamic tables'
 * key counters.  EMBER_OK or a status with s->msg. */
static int build_collection(limits_scan *s)
{
    const int32_t T = s->info.num_tables, F = s->info.num_features;
    ember_table_config *tables = calloc((size_t)T + 1, sizeof *tables);
    ember_feature_config *features = calloc((size_t)F + 1, sizeof *features);
    int *dynamic = calloc((size_t)T + 1, sizeof *dynamic);
    int st = tables && features && dynamic ? EMBER_OK : EMBER_ENOMEM;
    for (int32_t t = 0; st == EMBER_OK && t < T; t++) {
        tables[t] = ember_table_config_default();
        tables[t].name = s->names[t];
        tables[t].rows = s->info.table_rows[t];
        tables[t].dim = 1;
        tables[t].init = EMBER_INIT_ZEROS;
        tables[t].optimizer = ember_optimizer_default(EMBER_OPT_SGD);
        if (s->capacity[t] > 0) { /* counting keys by owner needs no rows */
            tables[t].kind = EMBER_TABLE_DYNAMIC;
            tables[t].capacity = 1;
            dynamic[t] = 1;
        }
    }
    if (st == EMBER_OK)
        st = limits_keys_create(&s->info, dynamic, s->capacity, s->shards, &s->keys);
    if (st != EMBER_OK)
        snprintf(s->msg, sizeof s->msg, "out of memory");
    s->status = st;
    if (agree(s))
        goto done;
    for (int32_t f = 0; f < F; f++) {
        features[f].name = s->names[T + f];
        features[f].table = s->info.feature_table[f];
        features[f].combiner = EMBER_COMBINER_SUM;
    }
    ember_collection_config cc = ember_collection_config_default();
    cc.tables = tables;
    cc.num_tables = T;
    cc.features = features;
    cc.num_features = F;
    cc.num_shards = (int32_t)s->shards;
    cc.stack_tables = s->c.stack_tables;
    cc.world = s->c.world;
    if ((s->status = ember_collection_create(&cc, &s->coll)) != EMBER_OK)
        snprintf(s->msg, sizeof s->msg, "%s: %s", ember_status_str(s->status), ember_errmsg(NULL));
    agree(s);
done:
    free(tables);
    free(features);
    free(dynamic);
    return s->status;
}

/* This rank's counts of one global batch into s->counts (ids, unique per
 * (table, shard)) and its share of the totals.  EMBER_OK or a status with
 * s->msg. */
static int count_batch(limits_scan *s, const ember_batch *global, int64_t n)
{
    const int32_t T = s->info.num_tables;
    const int64_t TS = (int64_t)T * s->shards;
    if (s->keys && limits_keys_add(s->keys, global) != EMBER_OK) { /* the global batch's keys by owner */
        snprintf(s->msg, sizeof s->msg, "out of memory counting keys");
        return EMBER_ENOMEM;
    }
    ember_batch b = *global;
    if (s->size > 1) {
        int sl = batch_slice_take(&s->slice, global, s->rank, s->size);
        if (sl) {
            snprintf(s->msg, sizeof s->msg, "%s: batch %lld: %s", s->source, (long long)n,
                     sl == EMBER_ENOMEM ? "out of memory" : "malformed lengths");
            return sl == EMBER_ENOMEM ? EMBER_ENOMEM : EMBER_EINPUT;
        }
        b = s->slice.batch;
    }
    int rc = ember_partition_counts(s->coll, &b, s->counts, s->counts + TS);
    if (rc != EMBER_OK) {
        snprintf(s->msg, sizeof s->msg, "%s: batch %lld: %s: %s", s->source, (long long)n, ember_status_str(rc),
                 ember_errmsg(s->coll));
        return rc;
    }
    for (int32_t t = 0; t < T; t++)
        for (int64_t sh = 0; sh < s->shards; sh++)
            s->totals[T + t] += s->counts[(int64_t)t * s->shards + sh]; /* units: this rank's */
    for (int32_t f = 0; f < b.num_features; f++)
        for (int32_t i = 0; i < b.batch_size; i++)
            s->totals[s->info.feature_table[f]] += b.lengths[(int64_t)f * b.batch_size + i];
    return EMBER_OK;
}

/* After the reduction: per table the batch's maximum over shards. */
static void record_batch(limits_scan *s)
{
    const int64_t TS = (int64_t)s->info.num_tables * s->shards;
    const int64_t *ids = s->counts, *unique = s->counts + TS;
    for (int32_t t = 0; t < s->info.num_tables; t++) {
        int64_t mi = 0, mu = 0;
        for (int64_t sh = 0; sh < s->shards; sh++) {
            int64_t cell = (int64_t)t * s->shards + sh;
            mi = ids[cell] > mi ? ids[cell] : mi;
            mu = unique[cell] > mu ? unique[cell] : mu;
        }
        limits_series_add(&s->series[t], mi, mu);
    }
}

/* Step 3: every batch, this rank's counts per (table, shard), the max over
 * ranks of each, then the max over shards.  One reduction per batch
 * carries the counts, a failure anywhere and the end of the data. */
static int scan_batches(limits_scan *s)
{
    const int32_t T = s->info.num_tables;
    const int64_t TS = (int64_t)T * s->shards;
    int64_t n = 0;
    for (; s->batches < 0 || n < s->batches; n++) {
        ember_batch global = {0};
        int got = limits_source_next(s, n, &global);
        int failed = got < 0;
        if (got == 1 && (s->status = count_batch(s, &global, n)) != EMBER_OK)
            failed = 1;
        if (got != 1 || failed)
            memset(s->counts, 0, (size_t)(2 * TS) * sizeof *s->counts);
        for (int32_t t = 0; t < T && !failed; t++)
            if (limits_series_reserve(&s->series[t], n + 1) != EMBER_OK) {
                snprintf(s->msg, sizeof s->msg, "out of memory");
                s->status = EMBER_ENOMEM;
                failed = 1;
            }
        s->counts[2 * TS] = failed ? 2 : got == 0 ? 1 : 0;
        if (ember_comm_reduce_i64(s->c.world, s->counts, 2 * TS + 1, EMBER_REDUCE_MAX) != EMBER_OK) {
            s->status = EMBER_ECOMM;
            snprintf(s->msg, sizeof s->msg, "%s", s->c.world->errmsg);
            s->counts[2 * TS] = 2;
        }
        if (s->counts[2 * TS] == 2) { /* the failing rank says why */
            agree(s);
            return s->status != EMBER_OK ? s->status : EMBER_ECOMM;
        }
        if (s->counts[2 * TS] == 1)
            break;
        record_batch(s);
    }
    /* totals of the global batches: the sum over ranks of their shares */
    if (ember_comm_reduce_i64(s->c.world, s->totals, 2 * (int64_t)T, EMBER_REDUCE_SUM) != EMBER_OK) {
        s->status = EMBER_ECOMM;
        snprintf(s->msg, sizeof s->msg, "%s", s->c.world->errmsg);
        agree(s);
        return s->status;
    }
    s->done = n;
    return EMBER_OK;
}

/* Step 4: the report. */
static int make_report(limits_scan *s, double t0, ember_limits **out)
{
    const int32_t T = s->info.num_tables;
    ember_limits *l = calloc(1, sizeof *l);
    ember_limits_table *tables = calloc((size_t)T + 1, sizeof *tables);
    if (!l || !tables) {
        free(l);
        free(tables);
        return EMBER_ENOMEM;
    }
    ember_handle_begin(&l->head, l->msg, sizeof l->msg);
    ember_limits_summary *sum = &l->summary;
    for (int32_t t = 0; t < T; t++) {
        ember_limits_table *r = &tables[t];
        r->name = s->names[t];
        r->rows = s->info.table_rows[t];
        r->ids_total = s->totals[t];
        r->dedup_ids_total = s->totals[T + t];
        limits_series_summarise(&s->series[t], r);
        limits_keys_fill(s->keys, t, r);
        sum->ids_total += r->ids_total;
        sum->dedup_ids_total += r->dedup_ids_total;
        sum->max_ids = r->max_ids > sum->max_ids ? r->max_ids : sum->max_ids;
        sum->max_unique_ids = r->max_unique_ids > sum->max_unique_ids ? r->max_unique_ids : sum->max_unique_ids;
    }
    memcpy(l->source, s->source, sizeof l->source);
    l->names = s->names; /* the strings the tables point at */
    s->names = NULL;
    l->tables = tables;
    sum->source = l->source;
    sum->tables = T;
    sum->features = s->info.num_features;
    sum->ranks = s->size;
    sum->shards = s->shards;
    sum->batches = s->done;
    sum->stack_tables = s->c.stack_tables;
    sum->seconds = ember_now() - t0;
    *out = l;
    return EMBER_OK;
}

ember_limits_config ember_limits_config_default(void)
{
    ember_limits_config c;
    memset(&c, 0, sizeof c);
    c.batches = -1;
    c.stack_tables = 1;
    return c;
}

/* Steps 1 to 4, each agreed over the world before the next collective
 * one.  EMBER_OK, or the agreed status with s->msg. */
static int run(limits_scan *s, double t0, ember_limits **out)
{
    s->status = limits_source_open(s); /* every rank: the same global batches */
    if (agree(s))
        return s->status;
    s->status = limits_scan_alloc(s);
    if (agree(s) || build_collection(s) != EMBER_OK || scan_batches(s) != EMBER_OK)
        return s->status;
    if (make_report(s, t0, out) != EMBER_OK) {
        snprintf(s->msg, sizeof s->msg, "out of memory");
        return EMBER_ENOMEM;
    }
    return EMBER_OK;
}

int ember_limits_run(const ember_limits_config *c, ember_limits **out)
{
    double t0 = ember_now();
    if (!out || !c) {
        ember_data_set_error("ember_limits_run: NULL argument");
        return EMBER_EINVAL;
    }
    *out = NULL;
    limits_scan s;
    int st = limits_scan_init(&s, c); /* the config checked: s.msg says why not */
    if (st == EMBER_OK)
        st = run(&s, t0, out);
    if (st != EMBER_OK)
        ember_data_set_error("%s", s.msg);
    limits_scan_free(&s);
    return st;
}

void ember_limits_destroy(ember_limits *l)
{
    if (!l)
        return;
    free(l->names);
    free(l->tables);
    ember_handle_end(&l->head);
    free(l);
}

int ember_limits_summary_info(const ember_limits *l, ember_limits_summary *out)
{
    if (!l || !out)
        return ember_handle_fail(l ? &l->head : NULL, EMBER_EINVAL, "ember_limits_summary_info: %s is NULL",
                                 l ? "out" : "the report");
    *out = l->summary;
    return EMBER_OK;
}

int ember_limits_table_info(const ember_limits *l, int32_t t, ember_limits_table *out)
{
    if (!l || !out || t < 0 || t >= l->summary.tables)
        return ember_handle_fail(l ? &l->head : NULL, EMBER_EINVAL, "ember_limits_table_info: no table %d, or a "
                                 "NULL argument", (int)t);
    *out = l->tables[t];
    return EMBER_OK;
}
