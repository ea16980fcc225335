/*
 * ctr.h: CTR samples (a label, dense features, one bag of ids per sparse
 * feature) and the three sources `ember train` reads them from
 * (docs/training.md, docs/ctr-format.md):
 *
 *   synthetic  a generator whose labels come from a hidden teacher model,
 *              so the best achievable AUC is known (ctr_synth.c);
 *   tsv        Criteo display-advertising lines: label, 13 integers, 26
 *              hexadecimal categoricals, tab-separated (ctr_text.c);
 *   binary     ember's compact format, written by `ember convert`, read
 *              by mmap (ctr_bin*.c); version 2 also carries 64-bit keys.
 *
 * Every source splits its samples among the ranks of a world: rank r of W
 * reads its own contiguous share, so a step's global batch is the
 * concatenation of the ranks' local batches in rank order.  The synthetic
 * stream is infinite and a function of (seed, global sample index); every
 * rank passes the same max_samples m to ctr_source_next, each call is one
 * global batch of G = W*m, and call k returns samples [k*G + r*m, k*G +
 * (r+1)*m) (= [k*G + r*G/W, k*G + (r+1)*G/W)), for any W.  Files have N
 * samples; rank r takes [r*N/W, (r+1)*N/W) and reads it batch by batch, so
 * shares differ by at most one sample and a rank's last batch may be short
 * (TSV: N counts lines, bad ones included, counted once at open).
 *
 * Errors: -1 with a message naming the file and line (tsv), the byte offset
 * (binary) or the setting, e.g.
 *   day_0.tsv:1234: field 17 (C4): "zz12" is not hexadecimal
 * A bad line is counted and skipped (policy CTR_BAD_SKIP), or fails the
 * read (CTR_BAD_FAIL); ctr_source_stats() reports the counts.
 */
#ifndef EMBER_DATA_CTR_H
#define EMBER_DATA_CTR_H

#include <stddef.h>
#include <stdint.h>

#include "ember.h"

#define CTR_MAX_FEATURES 64
#define CTR_MAX_BAG_IDS 65535 /* ids of one bag in text and binary files */

/* A batch of local samples; the source owns and reuses its arrays. */
typedef struct ctr_batch {
    int32_t batch_size;   /* samples                                         */
    int32_t num_dense;    /* dense features per sample                       */
    int32_t num_sparse;   /* sparse features (bags) per sample               */
    const float *label;   /* [batch_size], 0 or 1                            */
    const float *dense;   /* [batch_size][num_dense], transformed            */
    ember_batch sparse;   /* lengths [num_sparse][batch_size], ids in [0, rows of the feature),
                             or any 64-bit key where the schema's rows is 0 */
    int64_t first_sample; /* index in the source of sample 0 (messages):
                             synthetic: global sample index; tsv: its line
                             number - 1; binary: sample index in the file   */
} ctr_batch;

/* What every source yields, fixed at open. */
typedef struct ctr_schema {
    int32_t num_dense, num_sparse;
    int64_t rows[CTR_MAX_FEATURES]; /* vocabulary (table rows) per sparse feature;
                                       0: its ids are 64-bit keys (a dynamic table) */
    char names[CTR_MAX_FEATURES][32];
    unsigned char weighted[CTR_MAX_FEATURES]; /* 1: the feature's ids carry weights; when
                                       any does, every batch has a weight per id
                                       (1 for the other features' ids)          */
    int float_label;                /* labels are any number in [0, 1], not only 0 or 1 */
    int unlabeled;                  /* the file has no label column (a text schema's
                                       label_optional): every label reads 0          */
} ctr_schema;

/* A text file's columns (docs/data.md, "The schema"). */
typedef enum ctr_col_type {
    CTR_COL_IGNORE = 0,
    CTR_COL_LABEL,
    CTR_COL_INT,          /* a dense feature, a decimal integer                  */
    CTR_COL_FLOAT,        /* a dense feature, a decimal number                   */
    CTR_COL_CATEGORICAL,  /* a sparse feature, one id (or none)                  */
    CTR_COL_MULTI_HOT     /* a sparse feature, separated ids                     */
} ctr_col_type;

typedef enum ctr_transform { CTR_TF_NONE = 0, CTR_TF_LOG1P, CTR_TF_CLIP, CTR_TF_STANDARDIZE } ctr_transform;
typedef enum ctr_encoding { CTR_ENC_STRING = 0, CTR_ENC_INT, CTR_ENC_HEX } ctr_encoding;

typedef struct ctr_column {
    char name[32];
    ctr_col_type type;
    int float_label;           /* label: 1 a number in [0, 1], 0: 0 or 1          */
    ctr_transform transform;   /* int, float                                     */
    double min, max;           /* clip                                           */
    int has_stats;             /* standardize: 1 mean and std given, 0 computed at open */
    double mean, std;
    ctr_encoding encoding;     /* categorical, multi_hot                          */
    char separator;            /* multi_hot                                      */
    int weighted;              /* multi_hot: items may be id:weight              */
    int64_t rows;              /* sparse: ids below rows; 0: 64-bit keys          */
} ctr_column;

#define CTR_MAX_COLUMNS 8192
#define CTR_TEXT_MAX_LINE_LIMIT (64 << 20)

typedef struct ctr_text_schema {
    char delimiter;            /* ',' (csv, with quoting) or '\t' (tsv)          */
    int header;                /* the first line names the columns               */
    int32_t max_line;          /* bytes; a longer line is bad                    */
    int32_t num_columns;
    const ctr_column *columns; /* [num_columns], the caller's (copied at open)   */
    const char *expect;        /* what a line holds, for the wrong-field-count
                                  message; NULL: "the schema's columns"          */
    int label_optional;        /* 1 (scoring): a file may lack the label column:
                                  with a header, by its absence there; without
                                  one, when the first line has one field fewer
                                  than the schema's columns.  Such a file is
                                  read unlabeled (ctr_schema.unlabeled)          */
    int header_optional;       /* 1 (scoring), with header: a first line that
                                  does not name every column the schema reads
                                  is data, and lines hold the training file's
                                  fields (file_fields) or else the schema's
                                  columns, in order                            */
    const char *const *file_fields; /* with header: the training file's header
                                  fields in order (NULL: not known)            */
    int32_t num_file_fields;
} ctr_text_schema;

/* The Criteo schema of ctr_source_tsv: label, I1..I13 int log1p, C1..C26
 * hex categoricals with these rows, 4096-byte lines.  cols must hold 40. */
void ctr_text_schema_criteo(const int64_t *rows, ctr_column *cols, ctr_text_schema *out);

/* A batch of no samples in schema's shape, for a rank whose share ran out
 * while the others still step (collective calls need every rank). */
void ctr_batch_empty(const ctr_schema *schema, ctr_batch *out);

/* The synthetic task.  Feature f has rows[f] ids drawn by a bounded
 * Zipf(alpha[f]) law over a scrambled order (as ember_synth), pooling[f]
 * ids per sample on average (1: one-hot; bag length 1 + Poisson(p - 1)).
 * Dense features are standard normal.  The teacher draws its own
 * embeddings (teacher_dim) per (feature, id) and a one-hidden-layer MLP
 * (teacher_hidden) over [dense, sum-pooled embeddings], all from seed; its
 * output is normalised to mean 0 and variance 1 over a calibration sample,
 * so teacher_scale is the standard deviation of the logit; label =
 * Bernoulli(sigmoid(teacher_scale * logit + bias)), bias set so the click
 * rate is near ctr_rate.  Bags are never empty. */
typedef struct ctr_synth_config {
    int32_t num_dense;                 /* default 13                       */
    int32_t num_sparse;                /* default 8                        */
    int64_t rows[CTR_MAX_FEATURES];    /* vocabulary: distinct ids drawn   */
    double alpha[CTR_MAX_FEATURES];
    double pooling[CTR_MAX_FEATURES];
    int keyed[CTR_MAX_FEATURES];       /* 1: ids go out as 64-bit keys, the
                                          bijection ctr_synth_key of the id
                                          (for dynamic tables); schema rows 0 */
    int64_t hash_rows[CTR_MAX_FEATURES]; /* > 0: ids go out as ctr_synth_key
                                          of the id mod hash_rows (a fixed
                                          table that hashes its keys)      */
    int32_t teacher_dim;               /* default 4                        */
    int32_t teacher_hidden;            /* default 16                       */
    double teacher_scale;              /* default 1.75 (teacher AUC ~0.85)  */
    double ctr_rate;                   /* default 0.25                     */
    uint64_t seed;
    uint64_t eval_offset;              /* eval stream: samples from this index on (default 2^40) */
    /* Drifting ids (docs/adaptive.md, "Drifting ids"): sample j of a stream
     * (counted from the stream's start) is in epoch j / drift_every, and
     * the first drift_features features (0: all) draw from that epoch's
     * law (ember_drift: rotate or grow by drift_rows ranks an epoch; grow
     * starts from drift_start ranks). */
    ember_drift drift;
    int64_t drift_every;               /* samples per epoch                */
    int64_t drift_rows;
    int32_t drift_features;
    int64_t drift_start;               /* grow: ranks of epoch 0; 0: drift_rows */
} ctr_synth_config;

/* The key a keyed feature f emits for vocabulary id `id`: splitmix64's
 * finaliser of id ^ a per-feature salt (a bijection: distinct ids, distinct
 * keys), spread over all 64 bits as open-vocabulary ids are. */
int64_t ctr_synth_key(const ctr_synth_config *cfg, int32_t f, int64_t id);

/* The built-in task of `ember train` with no arguments. */
ctr_synth_config ctr_synth_config_default(void);

typedef enum ctr_bad_policy { CTR_BAD_SKIP = 0, CTR_BAD_FAIL = 1 } ctr_bad_policy;

typedef struct ctr_stats {
    int64_t samples;       /* samples returned so far                        */
    int64_t lines;         /* lines read (tsv)                               */
    int64_t bad_lines;     /* skipped (tsv)                                  */
    char first_bad[256];   /* the first bad line's message, "" if none       */
} ctr_stats;

typedef struct ctr_source ctr_source;

/* rank, world: this rank's share.  eval: the synthetic task's held-out
 * stream (files: pass the eval file instead).  Returns 0 or -1 with err. */
int ctr_source_synth(const ctr_synth_config *cfg, int eval, int32_t rank, int32_t world, ctr_source **out,
                     char *err, size_t errlen);
/* Criteo TSV.  rows[f] (26 entries): each categorical's value (up to 8 hex
 * digits) is hashed (xxHash64, seeded by the feature index) into
 * [0, rows[f]), or, with rows[f] = 0 (a dynamic table), used whole as a
 * 64-bit key; an empty categorical is an empty bag (a zero embedding).
 * Integers: x -> log(1 + max(x, 0)); empty -> 0 (docs/ctr-format.md).
 * Fields are numbered from 0 (the label) in messages: C4 is field 17. */
int ctr_source_tsv(const char *path, const int64_t *rows, ctr_bad_policy policy, int32_t rank, int32_t world,
                   ctr_source **out, char *err, size_t errlen);
/* Text with a schema (docs/data.md): CSV or TSV, plain, gzip or zstd.
 * Open checks the schema (names, types, one label, at most 4096 dense and
 * 64 sparse features), reads the header when there is one, counts the
 * lines, and when a standardize column has no statistics, reads the whole
 * file for them (every rank alike).  Messages name file, line, field and
 * column: clicks.csv:18: field 3 (age): "3.5" is not an integer.
 * Lines are parsed by `threads` OpenMP threads (ctr_source_set_threads). */
int ctr_source_text(const char *path, const ctr_text_schema *schema, ctr_bad_policy policy, int32_t rank,
                    int32_t world, ctr_source **out, char *err, size_t errlen);
/* Text sources: lines parsed by this many threads (default 1); the
 * samples do not depend on it.  Other sources ignore it. */
void ctr_source_set_threads(ctr_source *s, int32_t threads);
/* Text sources under CTR_BAD_SKIP: the read fails once more than
 * max_lines bad lines (-1: no count limit) or more than max_fraction of
 * the lines read (>= 1: no limit) are counted, the lines read counting as
 * at least CTR_BAD_JUDGE_LINES, or this rank's whole share when shorter
 * (docs/data.md, "Bad lines").  Judged at each bad line, in line order;
 * the message gives the counts, the first bad line and what to do.  The
 * default is no limit; the config's data keys set one (data_open_file).
 * Other sources ignore it. */
#define CTR_BAD_JUDGE_LINES 4096
void ctr_source_set_bad_limit(ctr_source *s, double max_fraction, int64_t max_lines);
/* Text sources: the mean and std a standardize column used (given or
 * computed); 0, or -1 when column c is not one. */
int ctr_source_text_stats(const ctr_source *s, int32_t column, double *mean, double *std);
/* Text sources: count distinct keys (before `mod rows`) per sparse feature
 * from now on, exactly up to CTR_DISTINCT_CAP per feature. */
#define CTR_DISTINCT_CAP (INT64_C(1) << 22)
int ctr_source_count_keys(ctr_source *s, char *err, size_t errlen);
/* Distinct keys of feature f so far; CTR_DISTINCT_CAP + 1: more than the cap;
 * -1 when not counting. */
int64_t ctr_source_distinct_keys(const ctr_source *s, int32_t f);
/* Binary (docs/ctr-format.md, versions 1 to 3), mapped read-only.  Open
 * checks the header and the block index; each block is checked (checksum,
 * key mask, labels, bag lengths, ids < rows) when this rank first reads
 * from it.  A feature with rows 0 in the header (version 2) yields whole
 * 64-bit keys.  A read that fails leaves the position after the last good
 * batch (ctr_source_tell).  Blocks are checked and batches decoded by the
 * calling thread's OpenMP team (omp_get_max_threads); the batches do not
 * depend on its size. */
int ctr_source_binary(const char *path, int32_t rank, int32_t world, ctr_source **out, char *err, size_t errlen);
/* 1 when path begins with the binary format's magic ("EMBERCTR"), else 0
 * (also when it cannot be read: opening it then says why). */
int ctr_file_is_binary(const char *path);

const ctr_schema *ctr_source_schema(const ctr_source *s);
/* The line in the file (from 1) of each sample of the last batch a text
 * source returned; NULL for other sources. */
const int64_t *ctr_source_lines(const ctr_source *s);
/* 1 when a text source read a header line (its schema's header, unless
 * header_optional found data there); 0 otherwise. */
int ctr_source_text_header(const ctr_source *s);
/* A text source's header fields in order (*names valid while s lives):
 * their count, 0 without a header line. */
int32_t ctr_source_text_fields(const ctr_source *s, const char *const **names);

/* The next up-to-max_samples local samples into *out (valid until the next
 * call or destroy).  Returns the number of samples (0: this rank's share is
 * exhausted; ctr_source_rewind starts it again), or -1 with err.  A source
 * that failed stays failed: later calls return -1 with the same message. */
int64_t ctr_source_next(ctr_source *s, int32_t max_samples, ctr_batch *out, char *err, size_t errlen);
/* Back to the start of this rank's share (the eval stream's start for the
 * synthetic eval source).  Statistics keep counting: lines and bad_lines
 * count each line once, samples every sample returned. */
void ctr_source_rewind(ctr_source *s);
void ctr_source_stats(const ctr_source *s, ctr_stats *out);
void ctr_source_destroy(ctr_source *s);

/* Where a source stands, for checkpoints (docs/training.md, "Checkpoints
 * and resume"): what the next call to ctr_source_next returns first, and
 * how many times the share was rewound.
 *   synthetic  next: global index of the next call's first global sample
 *              (call k of a fresh stream with global batch G starts at
 *              k*G); begin = end = 0 (the stream has no end).
 *   tsv        next: index of the next line in the file (bad lines count);
 *              [begin, end): this rank's lines.
 *   binary     next: index of the next sample in the file; [begin, end):
 *              this rank's samples.
 * Only next and epochs are state: a source opened the same way (file or
 * config, rank, world) and seeked to a told position returns the same
 * batches as the source that told it. */
typedef struct ctr_position {
    int64_t next;
    int64_t epochs;       /* ctr_source_rewind calls so far                  */
    int64_t begin, end;   /* the share (files), for moving to another world  */
} ctr_position;

/* The position after the last batch returned.  0, or -1 when s or out is
 * NULL. */
int ctr_source_tell(const ctr_source *s, ctr_position *out);
/* Continues from pos (pos->begin and end are not used).  Files: next must
 * lie in this rank's share [begin, end] (end: the share is exhausted, the
 * next call returns 0); TSV re-reads the share's lines up to next without
 * parsing or counting them; binary checks the block on the next read.
 * Statistics are not restored.  0, or -1 with err (a position outside the
 * share, a read error, a failed source). */
int ctr_source_seek(ctr_source *s, const ctr_position *pos, char *err, size_t errlen);

/* Binary files: from now on each epoch reads this rank's share block by
 * block (blocks of the file, cut at the share's ends) in an order drawn
 * from (seed, rank, epoch) by Fisher-Yates over splitmix64, samples in
 * file order within a block; the current epoch is reordered from its
 * start.  A told position is then the ordinal in the epoch's order (plus
 * the share's begin), so seeking to it continues the same order.  The
 * same on every thread count.  0, or -1 with err (other sources). */
int ctr_source_shuffle(ctr_source *s, uint64_t seed, char *err, size_t errlen);

/* Synthetic only: the teacher's click probability of each sample of the
 * last batch returned, for the teacher's AUC on the same samples.  NULL for
 * file sources. */
const float *ctr_source_teacher_prob(const ctr_source *s);

/* `ember convert`: TSV to binary.  Returns 0 or -1 with err; stats says how
 * many lines were converted and skipped.  Writes bin_path.tmp, fsyncs it,
 * renames it over bin_path and fsyncs the folder; on failure bin_path is
 * untouched and the temporary file removed.  rows[f] <= 2^32, as
 * ctr_source_tsv takes them: rows[f] = 0 keeps feature f's whole 64-bit
 * keys and makes the file format version 2 (version 1 when no feature has
 * rows 0). */
int ctr_convert_tsv(const char *tsv_path, const char *bin_path, const int64_t *rows, ctr_bad_policy policy,
                    ctr_stats *stats, char *err, size_t errlen);

/* `ember convert` of any text source (ctr_source_text, or ctr_source_tsv
 * read as rank 0 of 1) to bin_path, as ctr_convert_tsv: the version is the
 * least that holds the data (2 for keys, 3 for weights or float labels). */
int ctr_convert_source(ctr_source *src, const char *bin_path, ctr_stats *stats, char *err, size_t errlen);
/* The same for at most max_samples samples (>= 0; the synthetic task never
 * ends, so it needs a limit): the file holds the source's next ones. */
int ctr_convert_source_n(ctr_source *src, const char *bin_path, int64_t max_samples, ctr_stats *stats,
                         char *err, size_t errlen);
/* The same in blocks of block_samples (>= 1) samples, not 4096 (tests). */
int ctr_convert_source_blocks(ctr_source *src, const char *bin_path, int64_t max_samples, int32_t block_samples,
                              ctr_stats *stats, char *err, size_t errlen);

#endif
