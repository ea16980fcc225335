/*
 * data_open.h: one way for every shell to open a config's CTR data
 * (data_open.c): `ember train`, `convert`, `inspect --samples`, `limits`
 * and `plan --data` read a file alike.
 */
#ifndef EMBER_CONFIG_DATA_OPEN_H
#define EMBER_CONFIG_DATA_OPEN_H

#include "config/config_file.h"

/* Where a data file was named: on the command line (or by a caller), or
 * by the config's data.train_file or data.eval_file. */
typedef enum data_file_role { DATA_FILE_GIVEN = 0, DATA_FILE_TRAIN, DATA_FILE_EVAL } data_file_role;

/* A data file by its first bytes: ember's binary format; else text by the
 * config's data.schema (docs/data.md); else Criteo TSV, each categorical
 * in its table's rows (t->hash_rows without tables; 0 for a dynamic
 * table: 64-bit keys).  cf may be NULL (no config file); t gives the
 * bad-line policy, its limit (data.max_bad_fraction and max_bad_lines) and
 * hash_rows.  A file the config names (role TRAIN or
 * EVAL with its line in t) must be what the config's data.source says:
 * "binary" opens it with the binary reader, whose checks name what it is
 * not; "text" or "tsv" refuse a binary file; either message names the
 * config's key and line.  A given file is read by its first bytes alone.
 * Any file that begins with a NUL byte (zero-filled: not written whole) is
 * refused by name.
 * train: NULL, or the training source an evaluation file must be scaled
 * like: its standardize statistics are taken (a text training source's),
 * never computed on the eval file itself.  0, or -1 with err. */
int data_open_file(const config_file *cf, const cfg_train *t, const char *path, data_file_role role,
                   const ctr_source *train, int32_t rank, int32_t world, ctr_source **out, char *err, size_t errlen);

/* How the training file at path becomes samples, for the model
 * description: a text schema as data_open_file reads it (train: the
 * training source opened from path; its standardize statistics are the
 * ones recorded), the Criteo TSV schema written out, or the kind of a
 * source without one (synthetic, binary: *cols NULL).  *cols (free it)
 * holds *sc's columns.  0, or a status with err. */
typedef enum data_input_kind {
    DATA_INPUT_TEXT = 1,
    DATA_INPUT_CRITEO_TSV,
    DATA_INPUT_SYNTHETIC,
    DATA_INPUT_BINARY
} data_input_kind;
int data_input_schema(const config_file *cf, const cfg_train *t, const char *path, const ctr_source *train,
                      data_input_kind *kind, ctr_column **cols, ctr_text_schema *sc, char *err, size_t errlen);

/* A file to be read as Criteo TSV whose first 100 lines hold no line of
 * its 40 tab-separated fields (a CSV, another layout): EMBER_EINVAL with
 * err saying so and naming the way out (data.schema); else 0 (a file that
 * cannot be read is the reader's to name). */
int data_refuse_not_criteo(const char *path, char *err, size_t errlen);

/* data.shuffle for the training file's source s (not read yet): its
 * blocks in the order the run's seed draws, or the source's error (a
 * compressed text file, the synthetic task).  Nothing without
 * data.shuffle.  0, or -1 with err. */
int data_shuffle_train(const cfg_train *t, ctr_source *s, char *err, size_t errlen);

/* 1 when path begins with the magic of ember's batch files (`ember gen`). */
int data_is_batch_file(const char *path);

#endif
