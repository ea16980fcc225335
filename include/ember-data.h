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
 * 0, or an ember status with the message in ember_errmsg(NULL) (names the
 * file, line or key).
 */
EMBER_API int ember_reader_open(const char *config, const char *path, int eval, int32_t rank, int32_t world,
                      ember_reader **out);
EMBER_API void ember_reader_close(ember_reader *r);

/* The sparse features, in batch order: names and vocabulary (rows of the
 * table their ids index; 0 when they are 64-bit keys of a dynamic table). */
EMBER_API int32_t ember_reader_num_features(const ember_reader *r);
EMBER_API const char *ember_reader_feature_name(const ember_reader *r, int32_t f);
EMBER_API int64_t ember_reader_feature_rows(const ember_reader *r, int32_t f);
EMBER_API int32_t ember_reader_num_dense(const ember_reader *r);

/* Up to max_samples next samples into *out: the count, 0 when the share is
 * exhausted (ember_reader_rewind starts it again; the synthetic task never
 * ends), or a negative ember status with the message in
 * ember_errmsg(r) (a bad line under data.bad_lines = "fail", or skipped
 * bad lines past data.max_bad_fraction or data.max_bad_lines). */
EMBER_API int64_t ember_reader_next(ember_reader *r, int32_t max_samples, ember_samples *out);
EMBER_API void ember_reader_rewind(ember_reader *r);
/* The synthetic task's teacher: its click probability for each sample of
 * the last batch (the best any model can do); NULL for files. */
EMBER_API const float *ember_reader_teacher(const ember_reader *r);
/* The reader's next max_samples samples (fewer if its share ends first:
 * *written, when not NULL, says how many) written to path in ember's
 * binary CTR format (docs/ctr-format.md), which `ember train --train-file`
 * reads back as the same samples: the synthetic task made once, so that
 * training reads it instead of generating it.  The file appears only when
 * complete (path.tmp, then renamed); on failure nothing is left.  0, or an
 * ember status with ember_errmsg(r). */
EMBER_API int ember_reader_write(ember_reader *r, const char *path, int64_t max_samples, int64_t *written);

/* Opens one file as it is: every sample from the first, in file order (no
 * data.shuffle, no share of a world), read as ember_reader_open reads a
 * file (binary by its first bytes, else text by the config's data.schema,
 * else Criteo TSV) with the config's bad-line policy (config NULL: the
 * built-in task's settings) but without its limit (data.max_bad_fraction,
 * max_bad_lines): the counts say what was skipped.  What `ember inspect --samples` shows.
 * Errors as ember_reader_open's, and EMBER_EINVAL for an empty file (it
 * has no samples). */
EMBER_API int ember_reader_open_file(const char *config, const char *path, ember_reader **out);

/* What the reader has read so far: samples returned, and for text the
 * lines read, the bad lines skipped and the first one's message ("" when
 * none). */
typedef struct ember_reader_counts {
    int64_t samples, lines, bad_lines;
    char first_bad[256];
} ember_reader_counts;
EMBER_API void ember_reader_stats(const ember_reader *r, ember_reader_counts *out);

/* What a data file is, by its first bytes. */
typedef enum ember_file_kind {
    EMBER_FILE_NONE = 0,    /* it cannot be opened and read                   */
    EMBER_FILE_BATCHES = 1, /* a batch file of `ember gen` (docs/batch-format.md) */
    EMBER_FILE_CTR = 2,     /* ember's binary CTR format (docs/ctr-format.md)  */
    EMBER_FILE_OTHER = 3    /* anything else: text, to the readers             */
} ember_file_kind;
EMBER_API ember_file_kind ember_data_file_kind(const char *path);

/*
 * `ember convert`: text to ember's binary CTR format (docs/ctr-format.md),
 * which `ember train` maps instead of parsing text every epoch.
 *   in:  text by the config's data.schema (docs/data.md: CSV or TSV, plain,
 *        gzip or zstd), or without a config Criteo TSV (label, I1..I13,
 *        C1..C26), categorical f hashed into criteo_rows[f] buckets (0:
 *        its whole 64-bit key, for a dynamic table; the file is then
 *        format version 2)
 *   out: every good sample in order, written whole, fsynced and named (the
 *        rule of ember_output); the version is the least that holds the
 *        data (2 for keys, 3 for weights or float labels)
 * Lines are parsed by `threads` threads; the output is the same for any
 * count.  Bad lines are skipped and counted (bad_lines skip) or stop the
 * conversion at the first (fail); skipped ones stop it past the limit
 * (max_bad_fraction, max_bad_lines), out left as it was.  Distinct keys per sparse feature are
 * counted exactly up to EMBER_DISTINCT_KEYS_CAP.  Local.  *out is set even
 * on failure (the counts and the first bad line); destroy it either way.
 * Errors: EMBER_EINVAL (a config that does not load, criteo_rows with a
 * config), EMBER_EIO (in cannot be read as text, is already binary, has a
 * bad line under fail; out cannot be written), EMBER_ENOMEM; detail in
 * ember_errmsg(*result) (ember_errmsg(NULL) when *result is NULL).
 */
#define EMBER_DISTINCT_KEYS_CAP (INT64_C(1) << 22)
#define EMBER_CRITEO_ROWS 100000 /* buckets of a categorical without criteo_rows */
/* Start from ember_convert_config_default(): a zeroed config is not the
 * default, its max_bad_fraction 0 stops at the first bad line. */
typedef struct ember_convert_config {
    const char *config;         /* NULL: Criteo TSV                            */
    const int64_t *criteo_rows; /* [26]; NULL: EMBER_CRITEO_ROWS each (no
                                   config only)                               */
    int bad_lines;              /* -1 (default): the config's data.bad_lines
                                   (skip without one); 0 skip; 1 fail         */
    int32_t threads;            /* parsing threads; 0 (default): every core    */
    double max_bad_fraction;    /* < 0 (default): the config's
                                   data.max_bad_fraction (0.01 without one);
                                   else in [0, 1]: skipped bad lines above
                                   this fraction of the lines read stop the
                                   conversion (docs/data.md, "Bad lines")     */
    int64_t max_bad_lines;      /* -2 (default): the config's data.max_bad_lines
                                   (none without one); -1: no count limit;
                                   >= 0: more bad lines stop the conversion  */
    const char *model;          /* NULL, or a checkpoint or bundle whose input
                                   schema reads the text: its columns, rows
                                   and the statistics it was trained with, so
                                   the output scores as the text does (not
                                   with config)                              */
} ember_convert_config;
EMBER_API ember_convert_config ember_convert_config_default(void);

typedef struct ember_conversion ember_conversion;
EMBER_API int ember_convert(const char *in, const char *out, const ember_convert_config *c, ember_conversion **result);
/* samples written, lines read, bad lines skipped, the first bad one. */
EMBER_API void ember_conversion_stats(const ember_conversion *cv, ember_reader_counts *out);
/* The output's sparse features: name and distinct keys (-1: not counted;
 * EMBER_DISTINCT_KEYS_CAP + 1: more than the cap).  NULL out of range. */
EMBER_API int32_t ember_conversion_num_features(const ember_conversion *cv);
EMBER_API const char *ember_conversion_feature(const ember_conversion *cv, int32_t f, int64_t *distinct_keys);
/* Feature f's rows (*rows; 0: 64-bit keys) and the expected share of its
 * distinct keys d that share their row with another key when hashed into
 * those rows: 1 - (1 - 1/rows)^(d - 1) (0 for 64-bit keys; a lower bound
 * when d is over the cap; NaN out of range or not counted).  A share of a
 * few percent costs accuracy (docs/data.md, "Sizing the tables"). */
EMBER_API double ember_conversion_collisions(const ember_conversion *cv, int32_t f, int64_t *rows);
/* The schema's standardize columns whose statistics were computed on in
 * (not given by the config): name, mean and std, in column order.  NULL
 * out of range. */
EMBER_API int32_t ember_conversion_num_standardized(const ember_conversion *cv);
EMBER_API const char *ember_conversion_standardized(const ember_conversion *cv, int32_t i, double *mean, double *std);
EMBER_API void ember_conversion_destroy(ember_conversion *cv);

#ifdef __cplusplus
}
#endif
#endif /* EMBER_DATA_H */
