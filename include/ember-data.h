/*
 * ember-data.h: labelled CTR samples from ember's readers, for a program
 * that trains its own model (the Python package's ember.Reader): the
 * built-in synthetic task of `ember train`, ember's binary files, and text
 * files read by a config's data.schema (docs/data.md).  The samples are
 * exactly those `ember train` reads with the same config, rank and world.
 */
#ifndef EMBER_DATA_H
#define EMBER_DATA_H

#include <stdint.h>

#include "ember.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ember_reader ember_reader;

/* One batch of local samples; the reader owns the arrays (valid until the
 * next call on it). */
typedef struct ember_samples {
    int32_t batch_size;
    int32_t num_dense;
    const float *labels;   /* [batch_size], 0 or 1 (or in [0, 1] for float labels) */
    const float *dense;    /* [batch_size][num_dense], transformed as the schema says */
    ember_batch sparse;    /* the features in the reader's order; weights NULL
                              unless a feature carries them                 */
    int64_t first_sample;  /* the source's index of sample 0 (messages)     */
} ember_samples;

/*
 * Opens a reader.  config: a config file (docs/config.md), or NULL for the
 * built-in synthetic task.  path: the file to read, or NULL for the
 * config's data.train_file (data.eval_file with eval = 1), or the
 * synthetic task's training stream (its held-out stream with eval = 1).  A
 * file is ember's binary format by its first bytes, else text by the
 * config's data.schema, else Criteo TSV.  An eval file read beside a text
 * training file takes that file's standardize statistics, as `ember train`
 * does.  rank, world: this process's share (0, 1: all of it).
 * 0, or an ember status with the message in ember_data_errmsg() (names the
 * file, line or key).
 */
int ember_reader_open(const char *config, const char *path, int eval, int32_t rank, int32_t world,
                      ember_reader **out);
void ember_reader_close(ember_reader *r);

/* The sparse features, in batch order: names and vocabulary (rows of the
 * table their ids index; 0 when they are 64-bit keys of a dynamic table). */
int32_t ember_reader_num_features(const ember_reader *r);
const char *ember_reader_feature_name(const ember_reader *r, int32_t f);
int64_t ember_reader_feature_rows(const ember_reader *r, int32_t f);
int32_t ember_reader_num_dense(const ember_reader *r);

/* Up to max_samples next samples into *out: the count, 0 when the share is
 * exhausted (ember_reader_rewind starts it again; the synthetic task never
 * ends), or a negative ember status with the message in
 * ember_reader_errmsg() (a bad line under data.bad_lines = "fail"). */
int64_t ember_reader_next(ember_reader *r, int32_t max_samples, ember_samples *out);
void ember_reader_rewind(ember_reader *r);
/* The synthetic task's teacher: its click probability for each sample of
 * the last batch (the best any model can do); NULL for files. */
const float *ember_reader_teacher(const ember_reader *r);
const char *ember_reader_errmsg(const ember_reader *r);
/* The reader's next max_samples samples (fewer if its share ends first:
 * *written, when not NULL, says how many) written to path in ember's
 * binary CTR format (docs/ctr-format.md), which `ember train --train-file`
 * reads back as the same samples: the synthetic task made once, so that
 * training reads it instead of generating it.  The file appears only when
 * complete (path.tmp, then renamed); on failure nothing is left.  0, or an
 * ember status with ember_reader_errmsg(). */
int ember_reader_write(ember_reader *r, const char *path, int64_t max_samples, int64_t *written);

#ifdef __cplusplus
}
#endif
#endif /* EMBER_DATA_H */
