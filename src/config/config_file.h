/*
 * config_file.h: ember's config file (docs/config.md), read with libconfig.
 * In the library, so every shell (the CLI, Python) reads a config the same
 * way.
 *
 * One file describes a model's embeddings and how it is run: the tables and
 * features (an ember_collection_config, including per-table pins of the
 * placement, owner and exchange), the statistics of its ids (pooling per
 * feature, weighting, the id law per table), the synthetic data that stands
 * in for real data (global batch, law, seed) and the planner's settings.
 * `ember plan` and `ember train` read it; a file for `ember train` may
 * leave out tables and features (the built-in student's are used).
 *
 * Ownership: config_file owns every string and array it points to, and
 * `coll` points into them, so a config_file is never copied by value; free
 * it with config_file_free().  Errors name the file, the line and the key:
 *   configs/w1.cfg:12: tables[0].dim: must be in 1..1024, got 2000
 */
#ifndef EMBER_CONFIG_CONFIG_FILE_H
#define EMBER_CONFIG_CONFIG_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "data/ctr.h"
#include "dense/dense.h"
#include "ember.h"
#include "model/lr_schedule.h"
#include "plan/limits_adapt.h"

/* Per table, what the collection config cannot hold. */
typedef struct cfg_table_extra {
    int placement_pin;  /* ember_placement, or -1: the planner chooses      */
    int32_t owner_pin;  /* table placement: the rank, or -1                 */
    int exchange_pin;   /* ember_exchange, or -1                            */
    int zipf;           /* id law: 1 bounded Zipf(alpha), 0 uniform          */
    double alpha;
    int line;           /* line of the table's entry in the file             */
    int64_t vocab;      /* `keys`: the synthetic data's distinct keys, hashed
                           into the rows of a fixed table (0: rows)        */
    int path_line;      /* line of the entry's `path` (0: none)              */
    int entry;          /* index of the entry in `tables` (count expands one) */
} cfg_table_extra;

/* Per feature. */
typedef struct cfg_feature_extra {
    double pooling;     /* mean ids per sample (bag length)                  */
    int weighted;       /* the feature's ids carry weights                   */
    int line;
} cfg_feature_extra;

/* Synthetic data standing in for real data, and the id law's default. */
typedef struct cfg_data {
    int64_t batch_size; /* global batch: samples per step over all ranks     */
    int zipf;           /* default id law of the tables                      */
    double alpha;
    uint64_t seed;
} cfg_data;

typedef struct cfg_planner {
    int32_t world;               /* ranks to plan for                        */
    int64_t memory_per_rank;     /* bytes of rows + state per rank; 0: none  */
    int64_t replicate_threshold; /* rows + state at most this may be replicated */
    double lookup_weight;        /* a looked-up byte against a network byte   */
} cfg_planner;

/* `ember train` (docs/training.md, "The loop"): the data source (keys of
 * the data group), the dense model (model group) and the loop (train
 * group).  cfg_train_default() is the built-in task with no config file. */
typedef enum cfg_source {
    CFG_SOURCE_SYNTHETIC = 0,
    CFG_SOURCE_TSV = 1,
    CFG_SOURCE_BINARY = 2,
    CFG_SOURCE_TEXT = 3          /* any CSV/TSV by data.schema (docs/data.md) */
} cfg_source;

/* train.keep_best's checkpoint folder when neither the config nor the
 * command line names one: ember-checkpoints/<the config's name> in the
 * working folder, beside the metrics and the plot, one per config. */
#define TRAIN_DEFAULT_CHECKPOINT_DIR "ember-checkpoints"

/* train.reader (CFG_READERS): with no spare core, the batches are read by
 * the step's team, by a reader thread beside a team one thread smaller, or
 * by whichever trials find faster (src/train/arrange.c). */
enum { CFG_READER_AUTO = 0, CFG_READER_TEAM, CFG_READER_THREAD };

typedef struct cfg_train {
    int present;                 /* the file has a train or a model group      */
    cfg_source source;
    const char *train_file;      /* tsv, binary; owned by the config_file      */
    const char *eval_file;       /* NULL: no evaluation                        */
    ctr_bad_policy bad_lines;
    double max_bad_fraction;     /* data.max_bad_fraction (default 0.01), and */
    int64_t max_bad_lines;       /* data.max_bad_lines (-1: none): the limit of
                                    skipped bad lines (ctr_source_set_bad_limit) */
    int64_t hash_rows;           /* tsv without tables: buckets per categorical */
    ctr_synth_config synth;      /* with tables: rows, alpha, pooling of each
                                    feature follow its table and feature      */
    dlrm_config model;           /* with tables: num_sparse, emb_dim follow them */
    ember_optimizer emb_optimizer; /* the built-in tables (no `tables`)        */
    float emb_init_value;
    ember_row_precision emb_precision; /* every table's default (model.emb_precision) */
    ember_rounding emb_rounding;
    ember_row_precision emb_state_precision; /* model.emb_state_precision: the
                                    default of every table whose optimizer
                                    keeps state per element (Adagrad, Adam) */
    int precision_all, rounding_all, state_precision_all; /* 1: emb_precision,
                                    emb_rounding, emb_state_precision apply
                                    to every table, its own setting too
                                    (--precision, --rounding, --state-precision) */
    int32_t micro_batch, accumulate;
    ember_schedule schedule;     /* the embedding forward's schedule: blocking
                                    (default), overlap or stale              */
    int32_t optimizer_shards;    /* dense optimizer state over groups of this
                                    many ranks; 0: replicated (default)      */
    int32_t reader;              /* train.reader without a spare core:
                                    CFG_READER_AUTO (trials), _TEAM, _THREAD */
    int64_t steps, eval_every, eval_samples, log_every; /* 0: automatic      */
    int eval_samples_set;        /* the file gave eval_samples              */
    ctr_text_schema schema;      /* data.schema; num_columns 0: none          */
    ctr_column *schema_cols;     /* [schema.num_columns], owned                */
    const char **schema_tables;  /* [schema.num_columns]: a sparse column's table, or NULL */
    int schema_line;             /* line of data.schema                      */
    int shuffle;                 /* data.shuffle: binary files, a new block
                                    order every epoch                        */
    int steps_set;               /* train.steps or --steps was given         */
    int eval_every_set;          /* train.eval_every or --eval-every given   */
    int64_t epochs;              /* train.epochs: steps from passes over the
                                    training file; 0: train.steps            */
    dense_optim_config dense_optim;
    const char *metrics;         /* JSON lines; "" none                        */
    const char *plot;            /* PNG; "" none                               */
    const char *checkpoint_dir;  /* "" or NULL: no checkpoints                 */
    int64_t checkpoint_every;    /* steps between checkpoints; 0: at the end only */
    int32_t checkpoint_keep;     /* complete checkpoints kept; 0: all          */
    lr_schedule lr;              /* the learning rates' schedule (lr_schedule.h) */
    int64_t patience;            /* early stopping: evaluations without a
                                    better metric before the run stops; 0: off */
    int stop_metric_logloss;     /* 1: log loss (lower is better); 0: AUC   */
    double min_delta;            /* an improvement is more than this          */
    const char *plan_file;       /* train.plan: a saved `ember plan --json` for
                                    the "auto" tables; NULL: plan at start  */
    int keep_best;               /* the best evaluation's checkpoint in
                                    checkpoint_dir/best                      */
    int64_t hot_refresh_every;   /* steps between hot-row refreshes (tables
                                    with hot_rows); 0: never                 */
    limits_adapt_config limits;  /* train.limits: limits that follow the data */
    int64_t replan_every;        /* train.replan: steps between re-plans; 0 off */
    int32_t replan_window;       /* steps of ids the statistics read        */
    double replan_gain;          /* the least predicted gain that moves     */
    int replan_line;
    int limits_line;             /* its line (0: not in the file)           */
    int32_t pipe_stages;         /* train.pipeline.stages: 0 or 1 no pipeline */
    int32_t pipe_schedule;       /* pipe_schedule (model/pipeline.h)          */
    int32_t pipe_virtual;        /* pieces per rank (interleaved)             */
    int pipe_recompute;
    int32_t pipe_num_cuts;       /* 0: the balance rule                        */
    int32_t pipe_cuts[64];
    int32_t pipe_balance_memory; /* the rule balances: 0 time, 1 memory      */
    int64_t dense_memory_mb;     /* per rank: dense parameters, gradients and
                                    optimizer state at most; 0 no limit      */
    char error[512];             /* a file without train/model groups: why
                                    `ember train` cannot use it ("" if it can) */
    /* lines of the settings checked only when a run's settings are made
     * (train_settings.c, data_open.c), for their messages; 0: not in the
     * file, or replaced by an override */
    int keep_best_line, optimizer_shards_line, checkpoint_dir_line;
    const char *keep_best_dir;   /* keep_best's folder when none is named:
                                    ember-checkpoints/<config name>          */
    cfg_source file_source;      /* what data.source says the config's files
                                    are (data.schema alone: text); the run's
                                    `source` follows a --train-file instead */
    int file_source_line;        /* line of data.source, or of data.schema  */
    int train_file_line, eval_file_line; /* data.train_file, data.eval_file  */
} cfg_train;

/* The built-in synthetic task and student (tables built by the tool). */
void cfg_train_default(cfg_train *t);
/* eval_samples meaning every sample of an eval file (its default for file
 * data): more than any file holds. */
#define CFG_EVAL_ALL (INT64_C(1) << 40)

typedef struct config_file {
    char *path;                  /* as given                                 */
    char *name;                  /* the `name` setting, or the file's name   */
    ember_collection_config coll; /* tables and features point below        */
    ember_table_config *tables;
    ember_feature_config *features;
    cfg_table_extra *table_extra;
    cfg_feature_extra *feature_extra;
    int32_t num_tables, num_features;
    cfg_data data;
    cfg_planner planner;
    cfg_train train;             /* defaults unless the file has train/model  */
    char **strings;              /* every name, owned                         */
    int32_t num_strings;
    int ssd_dir_line;            /* line of ssd.dir (0: not set)              */
} config_file;

/* Reads and checks path.  0 and *out on success; otherwise -1, *out NULL
 * and a message in err naming file, line and key. */
int config_file_load(const char *path, config_file **out, char *err, size_t errlen);
void config_file_free(config_file *cf);

/* The SSD tier's folders the file names (ssd.dir, a table's path) exist
 * and are folders this process can create files in, checked before
 * anything is created (`ember train`; not at load, so that `ember plan` can
 * plan on a machine without them).  0, or -1 with a message naming file,
 * line and key:  x.cfg:3: ssd.dir: "/mnt/nvme/ember" does not exist */
int config_file_check_folders(const config_file *cf, char *err, size_t errlen);

/* Any feature weighted: the batch then carries a weight per id. */
int config_file_weighted(const config_file *cf);

/* "1.5 GiB", "64G", "1048576", "2T" -> bytes (binary units; K, M, G, T with
 * or without "iB"/"B").  0 on success. */
int config_parse_bytes(const char *s, int64_t *out);

/* The index of s in a NULL-ended list of names (cfg_read.h's CFG_*), or -1. */
int config_name_parse(const char *const *names, const char *s);
/* "blocking", "overlap", "stale" -> ember_schedule, or -1; and back. */
int config_schedule_parse(const char *s);
const char *config_schedule_name(ember_schedule s);
const char *config_lr_decay_name(lr_decay d); /* "none", "linear", "cosine", "step" */
const char *config_placement_name(int placement); /* "row", ..., "auto" for -1 */
const char *config_source_name(cfg_source source); /* "synthetic", "tsv", "binary", "text" */
const char *config_exchange_name(int exchange);
const char *config_optimizer_name(ember_optimizer_kind kind);

/* data.schema with each sparse column's rows taken from its feature's
 * table when the file has features (0 for a dynamic table), else the
 * column's own; cols holds schema.num_columns.  0, or -1 without a schema. */
int config_file_text_schema(const config_file *cf, ctr_column *cols, ctr_text_schema *out);

/* The rows feature f's ids are hashed into: its table's, 0 (whole 64-bit
 * keys) for a dynamic table. */
int64_t config_feature_rows(const config_file *cf, int32_t f);

#endif
