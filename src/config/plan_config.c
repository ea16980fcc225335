/*
 * plan_config.c: the planner's id statistics for a config's tables
 * (plan_config.h), shared by `ember plan` and `ember train`'s automatic
 * placement: from the config's id law, or measured on data (a batch file
 * of `ember gen`, or the training data: binary, or text by the schema).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/data_open.h"
#include "config/plan_config.h"

/* A dynamic table's keys as the synthetic task of `ember train` draws them:
 * each of its features from its own `keys` keys (docs/config.md), in
 * proportion to its pooling.  Without `keys`, capacity x world keys (room
 * for every key). */
static int stats_of_keys(const config_file *cf, int32_t t, int32_t world, const double *pooling,
                         plan_id_stats *st)
{
    const cfg_table_extra *x = &cf->table_extra[t];
    int32_t nf = 0, *feat = malloc(sizeof *feat * (size_t)(cf->num_features + 1));
    double *share = malloc(sizeof *share * (size_t)(cf->num_features + 1));
    int rc = feat && share ? EMBER_OK : EMBER_ENOMEM;
    for (int32_t f = 0; rc == EMBER_OK && f < cf->num_features; f++)
        if (cf->features[f].table == t) {
            feat[nf] = f;
            share[nf++] = pooling[f] > 0 ? pooling[f] : 1e-9;
        }
    if (rc == EMBER_OK && nf == 0) { /* no feature reads it: one stream of nothing */
        feat[nf] = 0;
        share[nf++] = 1;
    }
    int64_t keys = x->vocab ? x->vocab : plan_dynamic_capacity(&cf->tables[t]) * world;
    if (rc == EMBER_OK)
        rc = plan_stats_synth_keys(keys, x->zipf ? x->alpha : 0.0, cf->data.seed, nf, feat, share, st);
    free(feat);
    free(share);
    return rc;
}

/* Id statistics from the config's law, one computation per distinct law. */
int plan_config_stats_law(const config_file *cf, int32_t world, const double *pooling, plan_id_stats *st, char *err,
                          size_t errlen)
{
    for (int32_t t = 0; t < cf->num_tables; t++) {
        const cfg_table_extra *x = &cf->table_extra[t];
        int dyn = cf->tables[t].kind == EMBER_TABLE_DYNAMIC;
        int32_t same = -1;
        for (int32_t q = 0; q < t && same < 0 && !dyn; q++)
            if (cf->tables[q].kind != EMBER_TABLE_DYNAMIC && cf->tables[q].rows == cf->tables[t].rows &&
                cf->table_extra[q].zipf == x->zipf && (!x->zipf || cf->table_extra[q].alpha == x->alpha))
                same = q;
        int rc = dyn ? stats_of_keys(cf, t, world, pooling, &st[t])
                 : same >= 0 ? (st[t] = st[same], EMBER_OK)
                 : x->zipf ? plan_stats_zipf(cf->tables[t].rows, x->alpha, &st[t])
                           : plan_stats_uniform(cf->tables[t].rows, &st[t]);
        if (rc) {
            snprintf(err, errlen, "%s: table '%s': %s", cf->path, cf->tables[t].name,
                    ember_status_str(rc));
            return EMBER_EINVAL;
        }
    }
    return 0;
}

/* Samples per batch read from a binary training file. */
#define PLAN_FILE_BATCH 4096

/* The batches statistics are measured on: an `ember gen` batch file, or
 * the training data (binary, or text by the config) whose sparse feature
 * f feeds the config's feature f, described as a batch file would be. */
typedef struct plan_stream {
    ember_batch_reader *rd;      /* a batch file, or                         */
    ctr_source *src;             /* the training data                        */
    const ember_batch_file_info *info;
    ember_batch_file_info own;   /* the training data's: the config's tables */
    int64_t *own_rows;           /* [num_tables + 1]                          */
    int32_t own_ftab[CTR_MAX_FEATURES];
} plan_stream;

/* The training data at path as a stream: its features' ids must fit
 * their tables' rows (a dynamic table takes any key). */
static int open_training_data(const config_file *cf, const char *data, plan_stream *ps, char *err, size_t errlen)
{
    char cerr[512];
    if (data_open_file(cf, &cf->train, data, DATA_FILE_GIVEN, NULL, 0, 1, &ps->src, cerr, sizeof cerr)) {
        snprintf(err, errlen, "%s", cerr);
        return EMBER_EINVAL;
    }
    const ctr_schema *sc = ctr_source_schema(ps->src);
    ps->own.num_tables = cf->num_tables;
    ps->own.num_features = sc->num_sparse;
    for (int32_t t = 0; t < cf->num_tables; t++)
        ps->own_rows[t] = cf->tables[t].rows;
    for (int32_t f = 0; f < sc->num_sparse && f < cf->num_features; f++) {
        const ember_table_config *tb = &cf->tables[cf->features[f].table];
        ps->own_ftab[f] = cf->features[f].table;
        if (sc->rows[f] > tb->rows && tb->kind != EMBER_TABLE_DYNAMIC) {
            snprintf(err, errlen, "%s: feature %s has ids up to %lld, table '%s' of %s has %lld rows", data,
                     sc->names[f], (long long)sc->rows[f] - 1, tb->name, cf->path, (long long)tb->rows);
            return EMBER_EINVAL;
        }
    }
    return 0;
}

/* The stream of data; its tables and features must be the config's. */
static int open_stream(const config_file *cf, const char *data, plan_stream *ps, char *err, size_t errlen)
{
    int rc;
    ps->own = (ember_batch_file_info){0, ps->own_rows, 0, ps->own_ftab};
    ps->info = &ps->own;
    if (!data_is_batch_file(data)) {
        if (open_training_data(cf, data, ps, err, errlen))
            return EMBER_EINVAL;
    } else if ((rc = ember_batch_reader_open(data, &ps->rd)) != EMBER_OK) {
        snprintf(err, errlen, "%s: %s", ember_status_str(rc), ember_errmsg(NULL));
        return EMBER_EINVAL;
    } else {
        ps->info = ember_batch_reader_info(ps->rd);
    }
    const ember_batch_file_info *info = ps->info;
    if (info->num_tables != cf->num_tables || info->num_features != cf->num_features) {
        snprintf(err, errlen, "%s has %d tables and %d features, %s has %d and %d", data, (int)info->num_tables,
                 (int)info->num_features, cf->path, (int)cf->num_tables, (int)cf->num_features);
        return EMBER_EINVAL;
    }
    for (int32_t t = 0; t < cf->num_tables; t++) /* a dynamic table takes the ids as keys */
        if (info->table_rows[t] != cf->tables[t].rows && cf->tables[t].kind != EMBER_TABLE_DYNAMIC) {
            snprintf(err, errlen, "%s: table %d has %lld rows, but table '%s' of %s has %lld", data, (int)t,
                     (long long)info->table_rows[t], cf->tables[t].name, cf->path, (long long)cf->tables[t].rows);
            return EMBER_EINVAL;
        }
    for (int32_t f = 0; f < cf->num_features; f++)
        if (info->feature_table[f] != cf->features[f].table) {
            snprintf(err, errlen, "%s: feature %d reads table %d, but feature '%s' of %s reads table '%s'", data,
                     (int)f, (int)info->feature_table[f], cf->features[f].name, cf->path,
                     cf->tables[cf->features[f].table].name);
            return EMBER_EINVAL;
        }
    return 0;
}

/* The stream's next batch into *b: 1, 0 at the end, or -1 with err. */
static int next_batch(plan_stream *ps, ember_batch *b, char *err, size_t errlen)
{
    if (ps->src) {
        char cerr[512];
        ctr_batch cb;
        int64_t got = ctr_source_next(ps->src, PLAN_FILE_BATCH, &cb, cerr, sizeof cerr);
        if (got < 0)
            snprintf(err, errlen, "%s", cerr);
        else if (got > 0)
            *b = cb.sparse;
        return got < 0 ? -1 : got > 0;
    }
    int rc = ember_batch_reader_next(ps->rd, b);
    if (rc < 0)
        snprintf(err, errlen, "%s: %s", ember_status_str(rc), ember_errmsg(NULL));
    return rc < 0 ? -1 : rc != 0;
}

/* One batch's ids into their tables' builders and the features' counts. */
static int add_batch(const ember_batch *b, const ember_batch_file_info *info, plan_stats_builder **bl, double *ids)
{
    int64_t k = 0;
    for (int32_t f = 0; f < b->num_features; f++) {
        int64_t len = 0;
        for (int32_t s = 0; s < b->batch_size; s++)
            len += b->lengths[(int64_t)f * b->batch_size + s];
        if (plan_stats_builder_add(bl[info->feature_table[f]], b->ids + k, len))
            return EMBER_EINVAL;
        ids[f] += (double)len;
        k += len;
    }
    return 0;
}

/* Up to `batches` batches of the stream measured: the tables' statistics,
 * the features' pooling, whether any carries weights. */
static int measure(const config_file *cf, const char *data, plan_stream *ps, int64_t batches,
                   plan_stats_builder **bl, double *ids, plan_id_stats *st, double *pooling, int *weighted,
                   int64_t *batches_read, char *err, size_t errlen)
{
    int64_t samples = 0, n = 0;
    *weighted = 0;
    for (; n < batches; n++) {
        ember_batch b;
        int got = next_batch(ps, &b, err, errlen);
        if (got < 0)
            return EMBER_EINVAL;
        if (got == 0)
            break;
        *weighted |= b.weights != NULL;
        samples += b.batch_size;
        if (add_batch(&b, ps->info, bl, ids)) {
            snprintf(err, errlen, "out of memory");
            return EMBER_EINVAL;
        }
    }
    if (samples == 0) {
        snprintf(err, errlen, "%s holds no batches", data);
        return EMBER_EINVAL;
    }
    *batches_read = n;
    for (int32_t f = 0; f < cf->num_features; f++)
        pooling[f] = ids[f] / (double)samples;
    for (int32_t t = 0; t < cf->num_tables; t++)
        if (plan_stats_builder_finish(bl[t], &st[t])) {
            snprintf(err, errlen, "out of memory");
            return EMBER_EINVAL;
        }
    return 0;
}

/* A synthetic task as a stream, described as the config's tables. */
static int open_task(const config_file *cf, const ctr_synth_config *task, plan_stream *ps, char *err,
                     size_t errlen)
{
    if (ctr_source_synth(task, 0, 0, 1, &ps->src, err, errlen))
        return EMBER_EINVAL;
    ps->own = (ember_batch_file_info){cf->num_tables, ps->own_rows, cf->num_features, ps->own_ftab};
    ps->info = &ps->own;
    for (int32_t t = 0; t < cf->num_tables; t++)
        ps->own_rows[t] = cf->tables[t].rows;
    for (int32_t f = 0; f < cf->num_features && f < CTR_MAX_FEATURES; f++)
        ps->own_ftab[f] = cf->features[f].table;
    return 0;
}

/* Statistics measured on up to `batches` batches of data (a file) or of a
 * synthetic task (task not NULL). */
static int stats_of(const config_file *cf, const char *data, const ctr_synth_config *task, int64_t batches,
                    plan_id_stats *st, double *pooling, int *weighted, int64_t *batches_read, char *err,
                    size_t errlen)
{
    plan_stream ps;
    memset(&ps, 0, sizeof ps);
    ps.own_rows = calloc((size_t)cf->num_tables + 1, sizeof *ps.own_rows); /* any number of tables */
    plan_stats_builder **bl = calloc((size_t)cf->num_tables, sizeof *bl);
    double *ids = calloc((size_t)cf->num_features, sizeof *ids);
    int status = EMBER_EINVAL;
    if (!bl || !ids || !ps.own_rows) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    if (task ? open_task(cf, task, &ps, err, errlen) : open_stream(cf, data, &ps, err, errlen))
        goto done;
    for (int32_t t = 0; t < cf->num_tables; t++) /* rows 0 (dynamic): keys */
        if (plan_stats_builder_create(cf->tables[t].rows, &bl[t])) {
            snprintf(err, errlen, "out of memory");
            goto done;
        }
    status = measure(cf, task ? "the synthetic task" : data, &ps, batches, bl, ids, st, pooling, weighted,
                     batches_read, err, errlen);
done:
    if (bl)
        for (int32_t t = 0; t < cf->num_tables; t++)
            plan_stats_builder_destroy(bl[t]);
    free(bl);
    free(ids);
    free(ps.own_rows);
    ember_batch_reader_destroy(ps.rd);
    ctr_source_destroy(ps.src);
    return status;
}

int plan_config_stats_task(const config_file *cf, const ctr_synth_config *task, int64_t batches, plan_id_stats *st,
                           double *pooling, int *weighted, char *err, size_t errlen)
{
    int64_t read = 0;
    return stats_of(cf, NULL, task, batches, st, pooling, weighted, &read, err, errlen);
}

/* Id statistics, pooling and weights measured on a batch file, or on the
 * training data's binary format (ember convert's; its sparse feature f
 * feeds the config's feature f). */
int plan_config_stats_data(const config_file *cf, const char *data, int64_t batches, plan_id_stats *st,
                           double *pooling, int *weighted, int64_t *batches_read, char *err, size_t errlen)
{
    return stats_of(cf, data, NULL, batches, st, pooling, weighted, batches_read, err, errlen);
}
