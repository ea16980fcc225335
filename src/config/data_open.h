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

/* data.shuffle for the training file at path (its source s, not read
 * yet): its blocks in the order the run's seed draws, or an error when the
 * file is not binary.  Nothing without data.shuffle.  0, or -1 with err. */
int data_shuffle_train(const cfg_train *t, const char *path, ctr_source *s, char *err, size_t errlen);

/* 1 when path begins with the magic of ember's batch files (`ember gen`). */
int data_is_batch_file(const char *path);

#endif
