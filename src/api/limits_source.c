/*
 * limits_source.c: where ember_limits_run's global batches come from
 * (limits_scan.h), and the shape of the data they give: tables (rows, 0
 * for a dynamic table's keys) and the table of every feature.
 *
 *   batch file      its header's tables and features, its batches as written
 *   binary file     a table per sparse feature (its names), batches of
 *                   c.batch (LIMITS_FILE_BATCH)
 *   synthetic       tables t0.. of the generator's rows, one feature each
 *   config          its tables and features, on the data `ember train
 *                   --config` reads (config/data_open.h: the synthetic task
 *                   or data.train_file, in file order), checked against them
 *
 * Every rank opens its source as a world of one: the ranks read the same
 * global batches, and ember_limits_run slices them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/limits_scan.h"
#include "config/data_open.h"
#include "plan/plan.h"

int limits_scan_init(limits_scan *s, const ember_limits_config *c)
{
    memset(s, 0, sizeof *s);
    s->c = *c;
    s->rank = ember_world_rank(c->world);
    s->size = ember_world_size(c->world);
    s->shards = c->shards ? c->shards : s->size;
    int sources = (c->data != NULL) + (c->synthetic != NULL) + (c->config != NULL);
    s->batches = c->batches >= 0 ? c->batches : c->synthetic || c->config ? 10 : -1;
    if (sources != 1)
        snprintf(s->msg, sizeof s->msg, "ember_limits_run: give one of data, synthetic and config (%d given)",
                 sources);
    else if (c->shards < 0 || c->shards > INT32_MAX || c->batch < 0 || c->batch > INT32_MAX)
        snprintf(s->msg, sizeof s->msg, "ember_limits_run: shards %lld and batch %lld must be in 0..2^31-1",
                 (long long)c->shards, (long long)c->batch);
    else
        return EMBER_OK;
    return EMBER_EINVAL;
}

/* The generator's tables t0.. of its rows, one feature each. */
static int open_synthetic(limits_scan *s)
{
    const ember_synth_config *sc = s->c.synthetic;
    snprintf(s->source, sizeof s->source, "synthetic %s (%d x %lld rows, batch %d, pooling %d, %s, seed %llu)",
             s->c.synthetic_name ? s->c.synthetic_name : "quick", (int)sc->tables, (long long)sc->rows,
             (int)sc->batch_size, (int)sc->pooling, sc->zipf ? "zipf" : "uniform", (unsigned long long)sc->seed);
    int rc = ember_synth_create(sc, &s->syn);
    if (rc != EMBER_OK) {
        snprintf(s->msg, sizeof s->msg, "%s: %s", ember_status_str(rc), ember_errmsg(NULL));
        return rc;
    }
    s->own_rows = malloc((size_t)sc->tables * sizeof *s->own_rows);
    s->own_ftab = malloc((size_t)sc->tables * sizeof *s->own_ftab);
    if (!s->own_rows || !s->own_ftab) {
        snprintf(s->msg, sizeof s->msg, "out of memory");
        return EMBER_ENOMEM;
    }
    for (int32_t t = 0; t < sc->tables; t++) {
        s->own_rows[t] = sc->rows;
        s->own_ftab[t] = t;
    }
    s->info = (ember_batch_file_info){sc->tables, s->own_rows, sc->tables, s->own_ftab};
    return EMBER_OK;
}

/* The data of a config's `ember train`: its source as a world of one. */
static int open_config_data(const config_file *cf, ctr_source **src, char *err, size_t n)
{
    const cfg_train *t = &cf->train;
    if (t->source == CFG_SOURCE_SYNTHETIC) {
        if (t->error[0]) {
            snprintf(err, n, "%s: no synthetic data for these tables: %s", cf->path, t->error);
            return EMBER_EINVAL;
        }
        return ctr_source_synth(&t->synth, 0, 0, 1, src, err, n);
    }
    return data_open_file(cf, t, t->train_file, DATA_FILE_TRAIN, NULL, 0, 1, src, err, n);
}

/* The data's features against the config's tables: "" when they fit. */
static void check_config_data(const config_file *c, const ctr_schema *sc, char *err, size_t n)
{
    if (sc->num_sparse != c->num_features)
        snprintf(err, n, "%s: %d features, but the data has %d sparse features", c->path, (int)c->num_features,
                 (int)sc->num_sparse);
    for (int32_t f = 0; !err[0] && f < c->num_features; f++) {
        const ember_table_config *tb = &c->tables[c->features[f].table];
        if ((tb->kind == EMBER_TABLE_DYNAMIC) != (sc->rows[f] == 0) || (sc->rows[f] && sc->rows[f] > tb->rows))
            snprintf(err, n, "%s: feature \"%s\": the data's ids do not fit table \"%s\" (%s)", c->path,
                     c->features[f].name, tb->name, sc->rows[f] ? "row numbers" : "64-bit keys");
    }
}

/* A config: its tables and features, on its data. */
static int open_config(limits_scan *s)
{
    char *err = s->msg;
    size_t n = sizeof s->msg;
    if (config_file_load(s->c.config, &s->cf, err, n) != 0)
        return EMBER_EINVAL;
    const config_file *c = s->cf;
    if (!c->num_features) {
        snprintf(err, n, "%s: no tables and features to count", s->c.config);
        return EMBER_EINVAL;
    }
    err[0] = '\0';
    if (open_config_data(c, &s->src, err, n) != 0)
        return EMBER_EIO;
    check_config_data(c, ctr_source_schema(s->src), err, n);
    if (err[0])
        return EMBER_EINVAL;
    s->own_rows = malloc(sizeof *s->own_rows * (size_t)c->num_tables);
    s->own_ftab = malloc(sizeof *s->own_ftab * (size_t)c->num_features);
    if (!s->own_rows || !s->own_ftab) {
        snprintf(err, n, "out of memory");
        return EMBER_ENOMEM;
    }
    for (int32_t t = 0; t < c->num_tables; t++)
        s->own_rows[t] = c->tables[t].rows; /* 0: dynamic */
    for (int32_t f = 0; f < c->num_features; f++)
        s->own_ftab[f] = c->features[f].table;
    s->info = (ember_batch_file_info){c->num_tables, s->own_rows, c->num_features, s->own_ftab};
    s->batch = s->c.batch ? s->c.batch : c->data.batch_size;
    static const char *const SRC[] = {"the synthetic task", "TSV", "binary"};
    snprintf(s->source, sizeof s->source, "%s (%s): %s%s%s, global batch %lld", c->path, c->name,
             SRC[c->train.source], c->train.source ? " " : "", c->train.source ? c->train.train_file : "",
             (long long)s->batch);
    return EMBER_OK;
}

/* The training data's binary format: a table per sparse feature. */
static int open_binary(limits_scan *s)
{
    char *err = s->msg;
    size_t n = sizeof s->msg;
    s->batch = s->c.batch ? s->c.batch : LIMITS_FILE_BATCH;
    snprintf(s->source, sizeof s->source, "%s (ember's binary format: a table per sparse feature, batches of %lld)",
             s->c.data, (long long)s->batch);
    err[0] = '\0';
    if (ctr_source_binary(s->c.data, 0, 1, &s->src, err, n) != 0)
        return EMBER_EIO;
    const ctr_schema *sc = ctr_source_schema(s->src);
    s->own_rows = malloc(sizeof *s->own_rows * (size_t)sc->num_sparse + 1);
    s->own_ftab = malloc(sizeof *s->own_ftab * (size_t)sc->num_sparse + 1);
    if (!s->own_rows || !s->own_ftab) {
        snprintf(err, n, "out of memory");
        return EMBER_ENOMEM;
    }
    for (int32_t f = 0; !err[0] && f < sc->num_sparse; f++) {
        if (sc->rows[f] == 0)
            snprintf(err, n, "%s: feature %s holds 64-bit keys: count it with --config, whose table for it is dynamic",
                     s->c.data, sc->names[f]);
        s->own_rows[f] = sc->rows[f];
        s->own_ftab[f] = f;
    }
    s->info = (ember_batch_file_info){sc->num_sparse, s->own_rows, sc->num_sparse, s->own_ftab};
    return err[0] ? EMBER_EINVAL : EMBER_OK;
}

int limits_source_open(limits_scan *s)
{
    if (s->c.synthetic)
        return open_synthetic(s);
    if (s->c.config)
        return open_config(s);
    if (ctr_file_is_binary(s->c.data))
        return open_binary(s);
    snprintf(s->source, sizeof s->source, "%s", s->c.data);
    int rc = ember_batch_reader_open(s->c.data, &s->reader);
    if (rc != EMBER_OK) {
        snprintf(s->msg, sizeof s->msg, "%s: %s", ember_status_str(rc), ember_errmsg(NULL));
        return rc;
    }
    s->info = *ember_batch_reader_info(s->reader);
    return EMBER_OK;
}

/* The names of the tables and features: a config's, a binary file's
 * features', or t0.. and f0... */
static void name_all(limits_scan *s)
{
    const int32_t T = s->info.num_tables, F = s->info.num_features;
    for (int32_t t = 0; t < T; t++) {
        if (s->cf)
            snprintf(s->names[t], sizeof s->names[t], "%.31s", s->cf->tables[t].name);
        else if (s->src) /* a binary file: its features' names */
            snprintf(s->names[t], sizeof s->names[t], "%.31s", ctr_source_schema(s->src)->names[t]);
        else
            snprintf(s->names[t], sizeof s->names[t], "t%d", (int)t);
        if (s->cf && s->cf->tables[t].kind == EMBER_TABLE_DYNAMIC)
            s->capacity[t] = plan_dynamic_capacity(&s->cf->tables[t]);
    }
    for (int32_t f = 0; f < F; f++) {
        if (s->cf)
            snprintf(s->names[T + f], sizeof s->names[T + f], "%.31s", s->cf->features[f].name);
        else
            snprintf(s->names[T + f], sizeof s->names[T + f], "f%d", (int)f);
    }
}

int limits_scan_alloc(limits_scan *s)
{
    const int32_t T = s->info.num_tables, F = s->info.num_features;
    const int64_t TS = (int64_t)T * s->shards;
    s->names = calloc((size_t)T + (size_t)F + 1, sizeof *s->names);
    s->capacity = calloc((size_t)T + 1, sizeof *s->capacity);
    s->series = calloc((size_t)T + 1, sizeof *s->series);
    s->counts = calloc((size_t)(2 * TS + 1), sizeof *s->counts);
    s->totals = calloc((size_t)(2 * T) + 1, sizeof *s->totals);
    if (!s->names || !s->capacity || !s->series || !s->counts || !s->totals) {
        snprintf(s->msg, sizeof s->msg, "out of memory");
        return EMBER_ENOMEM;
    }
    name_all(s);
    return EMBER_OK;
}

int limits_source_next(limits_scan *s, int64_t n, ember_batch *b)
{
    int rc;
    if (s->src) { /* a config's data, or a binary file */
        char err[512];
        ctr_batch cb;
        int64_t got = ctr_source_next(s->src, (int32_t)s->batch, &cb, err, sizeof err);
        if (got < 0) {
            snprintf(s->msg, sizeof s->msg, "batch %lld: %s", (long long)n, err);
            s->status = EMBER_EINPUT;
            return -1;
        }
        if (got > 0)
            *b = cb.sparse;
        return got > 0;
    }
    if (s->syn) {
        if ((rc = ember_synth_next(s->syn, b)) != EMBER_OK) {
            snprintf(s->msg, sizeof s->msg, "batch %lld: %s: %s", (long long)n, ember_status_str(rc),
                     ember_errmsg(s->syn));
            s->status = rc;
            return -1;
        }
        return 1;
    }
    rc = ember_batch_reader_next(s->reader, b);
    if (rc < 0) {
        snprintf(s->msg, sizeof s->msg, "%s: %s", ember_status_str(rc), ember_errmsg(s->reader));
        s->status = rc;
        return -1;
    }
    return rc;
}

void limits_scan_free(limits_scan *s)
{
    for (int32_t t = 0; s->series && t < s->info.num_tables; t++)
        limits_series_free(&s->series[t]);
    batch_slice_free(&s->slice);
    ember_collection_destroy(s->coll);
    ember_batch_reader_destroy(s->reader);
    ember_synth_destroy(s->syn);
    limits_keys_destroy(s->keys);
    ctr_source_destroy(s->src);
    config_file_free(s->cf);
    free(s->names);
    free(s->capacity);
    free(s->series);
    free(s->counts);
    free(s->totals);
    free(s->own_rows);
    free(s->own_ftab);
    memset(s, 0, sizeof *s);
}
