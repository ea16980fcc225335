/*
 * reader.c: ember_reader (include/ember-data.h), the CTR data of a config
 * for a caller that trains its own model.  It opens the sources the way
 * `ember train` does (data_open.c for files, the synthetic task otherwise),
 * so a Python training loop reads the very samples the C trainer reads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/config_file.h"
#include "config/data_open.h"
#include "data/ctr.h"
#include "core/status.h"
#include "data/data_error.h"
#include "ember-data.h"

struct ember_reader {
    ember_handle_msg head; /* first: ember_errmsg's, over err             */
    config_file *cf;     /* NULL: the built-in task                          */
    cfg_train t;
    ctr_source *src;
    ctr_source *train;   /* while opening an eval file: the training source
                            whose statistics it takes                     */
    char err[1024];
};

static int fail(ember_reader *r, int status, const char *msg)
{
    ember_data_set_error("%s", msg);
    ember_reader_close(r);
    return status;
}

/* ember_reader_open, or with as_is one file as it is (ember_reader_open_file:
 * no shuffle, the whole file). */
static int reader_open(const char *config, const char *path, int eval, int32_t rank, int32_t world, int as_is,
                       ember_reader **out)
{
    if (!out || world < 1 || rank < 0 || rank >= world) {
        ember_data_set_error("ember_reader_open: rank %d of a world of %d", (int)rank, (int)world);
        return EMBER_EINVAL;
    }
    *out = NULL;
    ember_reader *r = calloc(1, sizeof *r);
    if (!r) {
        ember_data_set_error("ember_reader_open: out of memory");
        return EMBER_ENOMEM;
    }
    ember_handle_begin(&r->head, r->err, sizeof r->err);
    char err[1024];
    if (config) {
        if (config_file_load(config, &r->cf, err, sizeof err))
            return fail(r, EMBER_EINVAL, err);
        r->t = r->cf->train;
    } else {
        cfg_train_default(&r->t);
    }
    if (as_is) { /* a file as it is: every good sample, its bad lines counted (no limit to stop at) */
        r->t.max_bad_fraction = 1;
        r->t.max_bad_lines = -1;
    }
    const char *file = path ? path : eval ? r->t.eval_file : r->t.train_file;
    if (!file && (path || r->t.source != CFG_SOURCE_SYNTHETIC)) {
        snprintf(err, sizeof err, "%s: no data.%s to read", config ? config : "the built-in task",
                 eval ? "eval_file" : "train_file");
        return fail(r, EMBER_EINVAL, err);
    }
    struct stat sb; /* one file as it is: an empty one has no samples to give */
    if (as_is && stat(file, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0) {
        snprintf(err, sizeof err, "%s: the file is empty (0 bytes): no samples", file);
        return fail(r, EMBER_EINVAL, err);
    }
    if (!file) {
        if (ctr_source_synth(&r->t.synth, eval, rank, world, &r->src, err, sizeof err))
            return fail(r, EMBER_EINVAL, err);
    } else {
        /* a text eval file is scaled like the training file, as `ember train`
         * does (data_open.c): its statistics are taken at open, and a binary
         * training file has none to give (the same error as the trainer's) */
        const char *train_file = r->t.train_file;
        if (eval && train_file && strcmp(train_file, file) != 0 && !ctr_file_is_binary(file) &&
            data_open_file(r->cf, &r->t, train_file, DATA_FILE_TRAIN, NULL, rank, world, &r->train, err, sizeof err))
            return fail(r, EMBER_EIO, err);
        int rc = data_open_file(r->cf, &r->t, file, path ? DATA_FILE_GIVEN : eval ? DATA_FILE_EVAL : DATA_FILE_TRAIN,
                                r->train, rank, world, &r->src, err, sizeof err);
        ctr_source_destroy(r->train);
        r->train = NULL;
        if (rc)
            return fail(r, EMBER_EIO, err);
        /* data.shuffle: the training file's blocks in the trainer's order */
        if (!eval && !as_is && data_shuffle_train(&r->t, r->src, err, sizeof err))
            return fail(r, EMBER_EINVAL, err);
    }
    *out = r;
    return EMBER_OK;
}

int ember_reader_open(const char *config, const char *path, int eval, int32_t rank, int32_t world,
                      ember_reader **out)
{
    return reader_open(config, path, eval, rank, world, 0, out);
}

int ember_reader_open_file(const char *config, const char *path, ember_reader **out)
{
    if (!path) {
        ember_data_set_error("ember_reader_open_file: no file");
        return EMBER_EINVAL;
    }
    return reader_open(config, path, 0, 0, 1, 1, out);
}

void ember_reader_stats(const ember_reader *r, ember_reader_counts *out)
{
    ctr_stats st;
    ctr_source_stats(r->src, &st);
    *out = (ember_reader_counts){st.samples, st.lines, st.bad_lines, ""};
    snprintf(out->first_bad, sizeof out->first_bad, "%s", st.first_bad);
}

void ember_reader_close(ember_reader *r)
{
    if (!r)
        return;
    ctr_source_destroy(r->src);
    ctr_source_destroy(r->train);
    config_file_free(r->cf);
    ember_handle_end(&r->head);
    free(r);
}

int32_t ember_reader_num_features(const ember_reader *r)
{
    return ctr_source_schema(r->src)->num_sparse;
}

const char *ember_reader_feature_name(const ember_reader *r, int32_t f)
{
    const ctr_schema *s = ctr_source_schema(r->src);
    return f >= 0 && f < s->num_sparse ? s->names[f] : NULL;
}

int64_t ember_reader_feature_rows(const ember_reader *r, int32_t f)
{
    const ctr_schema *s = ctr_source_schema(r->src);
    return f >= 0 && f < s->num_sparse ? s->rows[f] : -1;
}

int32_t ember_reader_num_dense(const ember_reader *r)
{
    return ctr_source_schema(r->src)->num_dense;
}

int64_t ember_reader_next(ember_reader *r, int32_t max_samples, ember_samples *out)
{
    if (max_samples < 1) {
        snprintf(r->err, sizeof r->err, "ember_reader_next: max_samples %d must be at least 1", (int)max_samples);
        return EMBER_EINVAL;
    }
    ctr_batch b;
    int64_t n = ctr_source_next(r->src, max_samples, &b, r->err, sizeof r->err);
    if (n < 0)
        return EMBER_EINPUT;
    if (n == 0)
        ctr_batch_empty(ctr_source_schema(r->src), &b);
    out->batch_size = b.batch_size;
    out->num_dense = b.num_dense;
    out->labels = b.label;
    out->dense = b.dense;
    out->sparse = b.sparse;
    out->first_sample = b.first_sample;
    return n;
}

void ember_reader_rewind(ember_reader *r)
{
    ctr_source_rewind(r->src);
}

const float *ember_reader_teacher(const ember_reader *r)
{
    return ctr_source_teacher_prob(r->src);
}

int ember_reader_write(ember_reader *r, const char *path, int64_t max_samples, int64_t *written)
{
    if (written)
        *written = 0;
    if (!path || max_samples < 0) {
        snprintf(r->err, sizeof r->err, "ember_reader_write: %s", !path ? "no path" : "a negative sample count");
        return EMBER_EINVAL;
    }
    ctr_stats before, after;
    ctr_source_stats(r->src, &before);
    int rc = ctr_convert_source_n(r->src, path, max_samples, NULL, r->err, sizeof r->err);
    ctr_source_stats(r->src, &after);
    if (written)
        *written = after.samples - before.samples;
    return rc ? EMBER_EIO : EMBER_OK;
}
