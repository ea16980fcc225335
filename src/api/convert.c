/*
 * convert.c: ember_convert (include/ember-data.h), the work of `ember
 * convert`: text lines, by a config's data.schema (docs/data.md) or Criteo
 * TSV without one, to ember's binary CTR format (docs/ctr-format.md).
 *
 * The source is opened the way every shell opens a config's data
 * (config/data_open.h) with the bad-line policy asked for; its lines are
 * parsed by `threads` threads (ctr_source_set_threads), its distinct keys
 * counted per sparse feature (ctr_source_count_keys), and
 * ctr_convert_source writes the file whole, fsynced and named (never
 * through a link: src/core/safe_file.h).  The result keeps what a report
 * needs after the source is gone: the counts, the first bad line, the
 * distinct keys and the standardize statistics computed on the input.
 */
#include <omp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_file.h"
#include "config/data_open.h"
#include "data/ctr.h"
#include "core/status.h"
#include "data/data_error.h"
#include "ember-data.h"
#include "infer/description.h"


_Static_assert(EMBER_DISTINCT_KEYS_CAP == CTR_DISTINCT_CAP, "the public cap is the reader's");

struct ember_conversion {
    ember_handle_msg head;        /* first: ember_errmsg's, over msg        */
    char msg[EMBER_THREAD_MSG_SIZE];
    int64_t samples, lines, bad_lines;
    char first_bad[256];          /* "" unless bad lines were skipped       */
    int32_t num_features;
    char (*feature_names)[64];
    int64_t *rows;                /* per sparse feature: ids below it; 0: keys */
    int64_t *distinct;
    int32_t num_columns;          /* standardize statistics computed here  */
    char (*column_names)[64];
    double *mean, *std;
};

ember_convert_config ember_convert_config_default(void)
{
    ember_convert_config c;
    memset(&c, 0, sizeof c);
    c.bad_lines = -1;
    c.max_bad_fraction = -1;
    c.max_bad_lines = -2;
    return c;
}

/* The source of in by the model's input schema: the columns, hashing,
 * rows and the statistics it was trained with. */
static int open_by_model(const char *in, const model_description *m, const cfg_train *t, ctr_source **src,
                         char *err, size_t errlen)
{
    if (m->in_error[0] || (m->in.source != DESC_INPUT_TEXT && m->in.source != DESC_INPUT_CRITEO_TSV)) {
        snprintf(err, errlen, "the model has no input schema to convert text with (%s): use --config",
                 m->in_error[0] ? m->in_error
                 : m->in.source == DESC_INPUT_BINARY ? "it was trained on a binary file"
                 : m->in.source == DESC_INPUT_SYNTHETIC ? "it was trained on the built-in task"
                                                        : "it was written before models carried one");
        return EMBER_EINVAL;
    }
    for (int32_t c = 0; c < m->in.schema.num_columns; c++) {
        const ctr_column *k = &m->in.schema.columns[c];
        if (k->transform == CTR_TF_STANDARDIZE && !k->has_stats) {
            snprintf(err, errlen, "the model's column %s has no standardize statistics (trained on a binary file "
                     "whose config gave none): use --config with mean and std", k->name);
            return EMBER_EINVAL;
        }
    }
    int rc = ctr_source_text(in, &m->in.schema, t->bad_lines, 0, 1, src, err, errlen);
    if (rc == 0)
        ctr_source_set_bad_limit(*src, t->max_bad_fraction, t->max_bad_lines);
    return rc;
}

/* The source of in: by the config (docs/data.md), or Criteo TSV with rows;
 * the bad-line policy and limit as c asks, else as the config says (its
 * defaults without one). */
static int open_input(const char *in, const config_file *cf, const model_description *m, const int64_t *rows,
                      const ember_convert_config *c, ctr_bad_policy policy, ctr_source **src, char *err,
                      size_t errlen)
{
    if (ctr_file_is_binary(in)) {
        snprintf(err, errlen, "%s is already in ember's binary format", in);
        return EMBER_EINVAL;
    }
    cfg_train t;
    if (cf)
        t = cf->train;
    else
        cfg_train_default(&t);
    t.bad_lines = policy;
    if (c->max_bad_fraction >= 0)
        t.max_bad_fraction = c->max_bad_fraction > 1 ? 1 : c->max_bad_fraction;
    if (c->max_bad_lines >= -1)
        t.max_bad_lines = c->max_bad_lines;
    if (m)
        return open_by_model(in, m, &t, src, err, errlen);
    if (cf)
        return data_open_file(cf, &t, in, DATA_FILE_GIVEN, NULL, 0, 1, src, err, errlen);
    if (data_refuse_not_criteo(in, err, errlen) != EMBER_OK) /* a CSV without its config */
        return EMBER_EINVAL;
    int rc = ctr_source_tsv(in, rows, policy, 0, 1, src, err, errlen);
    if (rc == 0)
        ctr_source_set_bad_limit(*src, t.max_bad_fraction, t.max_bad_lines);
    return rc;
}

/* What a report needs of the source: distinct keys per sparse feature and
 * the standardize statistics computed on the input.  0, or -1 out of
 * memory. */
static int keep_found(ember_conversion *cv, const config_file *cf, const ctr_source *src)
{
    const ctr_schema *sc = ctr_source_schema(src);
    int32_t ncol = cf ? cf->train.schema.num_columns : 0;
    cv->feature_names = calloc((size_t)sc->num_sparse + 1, sizeof *cv->feature_names);
    cv->distinct = calloc((size_t)sc->num_sparse + 1, sizeof *cv->distinct);
    cv->rows = calloc((size_t)sc->num_sparse + 1, sizeof *cv->rows);
    cv->column_names = calloc((size_t)ncol + 1, sizeof *cv->column_names);
    cv->mean = calloc((size_t)ncol + 1, sizeof *cv->mean);
    cv->std = calloc((size_t)ncol + 1, sizeof *cv->std);
    if (!cv->feature_names || !cv->distinct || !cv->rows || !cv->column_names || !cv->mean || !cv->std)
        return EMBER_ENOMEM;
    for (int32_t f = 0; f < sc->num_sparse; f++) {
        snprintf(cv->feature_names[f], sizeof cv->feature_names[f], "%s", sc->names[f]);
        cv->distinct[f] = ctr_source_distinct_keys(src, f);
        cv->rows[f] = sc->rows[f];
    }
    cv->num_features = sc->num_sparse;
    for (int32_t c = 0; c < ncol; c++) {
        const ctr_column *k = &cf->train.schema_cols[c];
        double mean, std;
        if (k->has_stats || ctr_source_text_stats(src, c, &mean, &std) != 0)
            continue;
        int32_t i = cv->num_columns++;
        snprintf(cv->column_names[i], sizeof cv->column_names[i], "%s", k->name);
        cv->mean[i] = mean;
        cv->std[i] = std;
    }
    return 0;
}

/* The conversion itself, the config loaded.  EMBER_OK, or a status with
 * err. */
static int convert(ember_conversion *cv, const char *in, const char *out, const ember_convert_config *c,
                   const config_file *cf, const model_description *m, char *err, size_t len)
{
    int64_t rows[26];
    for (int f = 0; f < 26; f++)
        rows[f] = c->criteo_rows ? c->criteo_rows[f] : EMBER_CRITEO_ROWS;
    ctr_bad_policy policy = c->bad_lines == 1 ? CTR_BAD_FAIL
                            : c->bad_lines == 0 || !cf ? CTR_BAD_SKIP
                                                       : cf->train.bad_lines;
    ctr_source *src = NULL;
    ctr_stats st;
    memset(&st, 0, sizeof st);
    int rc = open_input(in, cf, m, rows, c, policy, &src, err, len);
    if (rc == 0) {
        ctr_source_set_threads(src, c->threads > 0 ? c->threads : (int32_t)omp_get_num_procs());
        rc = ctr_source_count_keys(src, err, len);
    }
    if (rc == 0)
        rc = ctr_convert_source(src, out, &st, err, len);
    cv->samples = st.samples;
    cv->lines = st.lines;
    cv->bad_lines = st.bad_lines;
    if (st.bad_lines > 0 && policy == CTR_BAD_SKIP) /* under fail the message has it */
        snprintf(cv->first_bad, sizeof cv->first_bad, "%s", st.first_bad);
    if (rc == 0 && keep_found(cv, cf, src) != 0) {
        snprintf(err, len, "out of memory");
        rc = EMBER_ENOMEM;
    }
    ctr_source_destroy(src);
    return rc == 0 ? EMBER_OK : rc == EMBER_ENOMEM ? rc : EMBER_EIO;
}

int ember_convert(const char *in, const char *out, const ember_convert_config *c, ember_conversion **result)
{
    char err[1024] = "";
    if (!in || !out || !c || !result) {
        ember_data_set_error("ember_convert: NULL argument");
        return EMBER_EINVAL;
    }
    ember_conversion *cv = *result = calloc(1, sizeof *cv);
    if (!cv) {
        ember_data_set_error("out of memory");
        return EMBER_ENOMEM;
    }
    ember_handle_begin(&cv->head, cv->msg, sizeof cv->msg);
    config_file *cf = NULL;
    model_description m;
    int rc = EMBER_EINVAL, read = 0; /* read: m holds a description to free */
    if (c->config && c->model)
        snprintf(err, sizeof err, "convert: --config and --model both give a schema: name one");
    else if (c->model && c->criteo_rows)
        snprintf(err, sizeof err, "%s: --rows is for Criteo TSV without a model; the model's rows are its own",
                 c->model);
    else if (c->model && (read = 1) && (rc = description_read(c->model, &m, err, sizeof err)) != EMBER_OK)
        rc = rc == EMBER_ENOMEM ? rc : EMBER_EINVAL;
    else if (c->config && config_file_load(c->config, &cf, err, sizeof err))
        rc = EMBER_EINVAL;
    else if (c->config && c->criteo_rows)
        snprintf(err, sizeof err, "%s: --rows is for Criteo TSV without a config; with one the rows are the "
                 "tables' (or the schema's)", c->config);
    else
        rc = convert(cv, in, out, c, cf, read ? &m : NULL, err, sizeof err);
    if (read)
        description_free(&m);
    config_file_free(cf);
    if (rc != EMBER_OK)
        ember_data_set_error("%s", err);
    return ember_handle_keep(&cv->head, rc); /* *result is set: its message too */
}

void ember_conversion_stats(const ember_conversion *cv, ember_reader_counts *out)
{
    *out = (ember_reader_counts){cv->samples, cv->lines, cv->bad_lines, ""};
    memcpy(out->first_bad, cv->first_bad, sizeof out->first_bad);
}

int32_t ember_conversion_num_features(const ember_conversion *cv) { return cv->num_features; }

const char *ember_conversion_feature(const ember_conversion *cv, int32_t f, int64_t *distinct_keys)
{
    if (f < 0 || f >= cv->num_features)
        return NULL;
    if (distinct_keys)
        *distinct_keys = cv->distinct[f];
    return cv->feature_names[f];
}

int32_t ember_conversion_num_standardized(const ember_conversion *cv) { return cv->num_columns; }

const char *ember_conversion_standardized(const ember_conversion *cv, int32_t i, double *mean, double *std)
{
    if (i < 0 || i >= cv->num_columns)
        return NULL;
    if (mean)
        *mean = cv->mean[i];
    if (std)
        *std = cv->std[i];
    return cv->column_names[i];
}

void ember_conversion_destroy(ember_conversion *cv)
{
    if (!cv)
        return;
    free(cv->feature_names);
    free(cv->rows);
    free(cv->distinct);
    free(cv->column_names);
    free(cv->mean);
    free(cv->std);
    ember_handle_end(&cv->head);
    free(cv);
}

double ember_conversion_collisions(const ember_conversion *cv, int32_t f, int64_t *rows)
{
    if (f < 0 || f >= cv->num_features)
        return NAN;
    if (rows)
        *rows = cv->rows[f];
    int64_t d = cv->distinct[f], R = cv->rows[f];
    if (d < 0)
        return NAN;
    if (R == 0 || d <= 1) /* 64-bit keys: a row each (a dynamic table) */
        return 0.0;
    /* a key's row holds none of the other d - 1 keys with probability
     * (1 - 1/R)^(d - 1) when the hash spreads them uniformly */
    return -expm1((double)(d - 1) * log1p(-1.0 / (double)R));
}
