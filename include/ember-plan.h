/*
 * ember-plan.h: what a config's tables will cost before they are built:
 * the placement planner behind `ember plan` (docs/planner.md) and the
 * per-partition id counts and suggested limits behind `ember limits`.
 * Both are one call that reads a config or data and returns a report held
 * by a handle; the `ember` tool prints it as text or JSON, and any other
 * program can read the same numbers.
 *
 *   ember_plan_config c = ember_plan_config_default();
 *   c.config = "configs/cluster64.cfg";
 *   c.world = 64;
 *   ember_plan *p = NULL;
 *   if (ember_plan_create(&c, &p) != EMBER_OK)
 *       fprintf(stderr, "%s\n", ember_errmsg(NULL));
 *   ember_plan_table t;
 *   for (int32_t i = 0; p && ember_plan_table_info(p, i, &t) == EMBER_OK; i++)
 *       printf("%s: %s\n", t.name, ember_placement_name(t.placement));
 *   ember_plan_destroy(p);
 *
 * Strings in the reports are valid until the handle is destroyed.
 */
#ifndef EMBER_PLAN_API_H
#define EMBER_PLAN_API_H

#include <stdint.h>

#include "ember.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------------------------------------- planner */

/*
 * The plan of a config's tables for a world of `world` ranks (a number:
 * nothing runs on them, so a plan for 1024 ranks is made on a laptop):
 *
 *   stats  = per table, how its ids are drawn: the config's id law (the
 *            synthetic generator's Zipf or uniform, exactly; a dynamic
 *            table's keys as the synthetic task draws them), or measured on
 *            up to `batches` batches of `data` (pooling and weights as seen)
 *   tiers  = the tables the collection's rules put on the SSD tier with
 *            memory_per_rank as the budget, and their caches
 *   plan   = per table a placement (row, column, table, replicated) and an
 *            exchange that fit memory_per_rank and minimise
 *            max over ranks + mean over ranks of
 *                max(bytes sent, bytes received) + lookup_weight x lookups
 *            (pins of the config honoured; docs/planner.md has the model)
 *   keys   = per dynamic table, its distinct keys per step and over
 *            `horizon` steps against its capacity
 *
 * The global batch is `batch`, else a training config's micro_batch x
 * accumulate x world, else data.batch_size.  Not collective, no MPI.
 * Errors (detail in ember_errmsg(NULL), naming the file, the table or the
 * bytes a table needs): EMBER_EINVAL (a config or data that does not fit,
 * a config without tables, nothing fits the budget), EMBER_EIO, EMBER_ENOMEM.
 */
typedef struct ember_plan_config {
    const char *config;          /* required: a config file (docs/config.md)  */
    const char *data;            /* NULL: the config's id law; else a batch
                                    file or a training file in ember's binary
                                    format (its sparse features in the
                                    config's feature order)                  */
    int64_t batches;             /* batches of data to sample (default 20)    */
    int32_t world;               /* ranks; 0: the config's planner.world      */
    int64_t memory_per_rank;     /* rows + state + key indexes per rank;
                                    0: no limit; -1 (default): the config's   */
    int64_t replicate_threshold; /* -1 (default): the config's (1 MiB)        */
    double lookup_weight;        /* < 0 (default): the config's (1)           */
    int64_t batch;               /* global batch; 0 (default): as above       */
    int64_t horizon;             /* steps; 0 (default): train.steps, or 1     */
    int choose_hot_rows;         /* 1: also choose hot_rows for row-wise
                                    tables whose config has none            */
} ember_plan_config;
EMBER_API ember_plan_config ember_plan_config_default(void);

typedef struct ember_plan ember_plan;
EMBER_API int ember_plan_create(const ember_plan_config *c, ember_plan **out);
EMBER_API void ember_plan_destroy(ember_plan *p);

/* The plan as a whole; bytes are per step (forward + backward), expected
 * values. */
typedef struct ember_plan_summary {
    const char *config, *name;   /* the config's path and name                 */
    const char *id_statistics;   /* where the id statistics came from (text)   */
    int32_t tables, features, world;
    int64_t global_batch;
    int64_t memory_per_rank;     /* the budget used (0: none)                  */
    int64_t replicate_threshold;
    double lookup_weight;
    int64_t horizon;             /* steps, for the dynamic tables' keys        */
    double cost;                 /* busiest rank's cost + mean rank's cost     */
    double seconds;              /* the planner's time                         */
    double a2a_bytes, ag_bytes;  /* sent by all ranks: all-to-all, all-gather  */
    int32_t busiest_rank;        /* the rank of the largest cost               */
    double max_rank_memory;      /* rows + state + key indexes, most on a rank */
    int64_t max_rank_index;      /* key indexes, most on a rank                */
    int64_t max_rank_ssd_bytes;  /* store files, most on a rank                */
    /* max / mean over ranks (1 when the mean is 0) */
    double imbalance_ids_served, imbalance_memory, imbalance_bytes_sent, imbalance_cost;
} ember_plan_summary;
EMBER_API int ember_plan_summary_info(const ember_plan *p, ember_plan_summary *out);

/* A dynamic table's keys against its capacity (docs/planner.md, "Dynamic
 * tables"), for the busiest owner: the rank its hottest keys hash to. */
typedef struct ember_plan_keys {
    int64_t capacity;            /* rows per rank                              */
    int64_t index_bytes;         /* key map, metadata, victims, sketch per rank*/
    int32_t busiest_rank;
    double keys_per_step;        /* distinct keys one step brings it           */
    double keys_over_horizon;    /* distinct keys it sees in `horizon` steps   */
    double fill_steps;           /* steps until it has seen `capacity` keys
                                    (INFINITY: never)                         */
    double keys_without_row_per_step; /* once full, by Che's LRU estimate      */
    int over_capacity_per_step;  /* keys_per_step > capacity                   */
    int over_capacity_over_horizon; /* keys_over_horizon > capacity            */
} ember_plan_keys;

/* Table t (config order) as planned. */
typedef struct ember_plan_table {
    const char *name;
    const char *reason;          /* why this placement                         */
    ember_table_kind kind;
    int64_t rows;                /* as laid out: a dynamic table's capacity x
                                    world                                      */
    int32_t dim;
    ember_optimizer_kind optimizer;
    ember_placement placement;
    int32_t owner;               /* TABLE placement: the rank                  */
    ember_exchange exchange;     /* ROW and TABLE placements                   */
    int pinned;                  /* the config pins the placement              */
    int64_t hot_rows;            /* the config's, or chosen                    */
    int64_t row_bytes, state_bytes; /* over all ranks (copies counted)         */
    int64_t max_rank_bytes;      /* rows + state (+ key index) on the rank
                                    holding most (SSD: its cache there)        */
    double a2a_bytes, ag_bytes;  /* sent by all ranks for this table           */
    double ids_served;           /* lookups over all ranks                     */
    ember_storage storage;       /* MEMORY or SSD                              */
    int64_t cache_bytes;         /* SSD: the cache per rank                    */
    int64_t ssd_bytes;           /* SSD: store files over all ranks            */
    double expected_lru_hit_rate;/* SSD: by Che's approximation                */
    int64_t index_bytes;         /* dynamic: key indexes over all ranks        */
    double key_bytes;            /* dynamic: key exchange sent, all ranks      */
    ember_evict_policy evict;    /* dynamic                                    */
    ember_plan_keys keys;        /* dynamic                                    */
} ember_plan_table;
EMBER_API int ember_plan_table_info(const ember_plan *p, int32_t t, ember_plan_table *out);

/* Rank r as planned. */
typedef struct ember_plan_rank {
    int32_t table_wise;          /* tables placed whole on it                  */
    int32_t shared_tables;       /* spread tables with a share on it           */
    int64_t row_bytes, state_bytes, index_bytes, ssd_bytes;
    double ids_served;           /* entries whose rows it looks up             */
    double lookup_bytes;         /* rows read and updated, in cache lines      */
    double a2a_sent, ag_sent, a2a_received, ag_received;
    double cost;                 /* max(sent, received) + lookup_weight x
                                    lookups                                    */
} ember_plan_rank;
EMBER_API int ember_plan_rank_info(const ember_plan *p, int32_t r, ember_plan_rank *out);
/* The dense model on pipeline stage s (rank r runs stage r mod stages; s =
 * 0 without a pipeline), bytes per rank, for the config's train settings:
 * its pieces' parameters, their gradients, the dense optimizer's state (the
 * busiest rank's share when train.optimizer_shards shards it), and the
 * activations the schedule keeps for backwards at most over a step of full
 * micro-batches (unpipelined: one micro-batch's); what the trainer's start
 * event reports as dense_bytes_per_rank.  The cuts are the config's, or the
 * balance rule's: by memory as the trainer computes them, by time measured
 * on this machine (the trainer measures again, on its own). */
typedef struct ember_plan_dense {
    int32_t stages;              /* train.pipeline.stages (1: none)            */
    int32_t num_cuts, cuts[64];  /* the first block of each piece after the first */
    int64_t params, grads, state, activations;
} ember_plan_dense;
EMBER_API int ember_plan_dense_info(const ember_plan *p, int32_t s, ember_plan_dense *out);
/* The four return EMBER_EINVAL for an index out of range. */

/* ------------------------------------------------------------------ limits */

/*
 * Observed per-partition id counts, and suggested limits (SparseCore's
 * limit calculation; ember_table_config's max_ids_per_partition and
 * max_unique_ids_per_partition).  The batches come from one source:
 *   data       a batch file (`ember gen`), its tables and features; or a
 *              training file in ember's binary format, a table per sparse
 *              feature, read in batches of `batch` (default 4096)
 *   synthetic  the generator, tables t0.. with one feature each
 *   config     the config's tables and features on the data `ember train
 *              --config` reads (its synthetic task or data.train_file, in
 *              file order), in global batches of `batch` (default
 *              data.batch_size); its dynamic tables stay dynamic
 * A collection shaped like the data (dim 1, SGD, zeros; stacked unless
 * stack_tables is 0, num_shards = shards) counts, for every batch:
 *
 *   for each rank r of the world: its samples [r*B/W, (r+1)*B/W)
 *       ids[t][s], unique[t][s] = ember_partition_counts of them
 *   per (t, s): the max over ranks        (limits hold per rank)
 *   max_ids[t][batch]    = max over shards s of ids[t][s]
 *   max_unique[t][batch] = max over shards s of unique[t][s]
 *
 * and the report per table is the maximum and the percentiles p50, p99,
 * p99.9 of those per-batch maxima (linear between order statistics, as
 * numpy's default), with
 *   suggested limit = ceil(p99.9)   (to 1e-9: an integer stays itself)
 * (the maximum is the limit that never overflows on this data).  A dynamic
 * table's keys are also counted by owner (mix64(key) mod shards), per
 * global batch and over all batches, against its capacity per rank: the
 * working set `ember plan` predicts.  Collective over `world` (every rank
 * reads the same global batches); the report is the same on every rank.
 * Errors, agreed over the world (detail in ember_errmsg(NULL), naming the
 * failing rank "rank R: ..." in a world of more than one, the file, the
 * batch): EMBER_EINVAL (no source or more than one, a config or data that
 * does not fit), EMBER_EIO, EMBER_EFORMAT, EMBER_EINPUT, EMBER_ENOMEM,
 * EMBER_ECOMM.
 */
typedef struct ember_limits_config {
    const char *data;                     /* one of data, synthetic, config   */
    const ember_synth_config *synthetic;
    const char *synthetic_name;           /* named in the source line
                                             (NULL: "quick")                 */
    const char *config;
    int64_t batch;                        /* samples per global batch of a
                                             binary file or a config's data;
                                             0: as above (the generator's is
                                             its batch_size)                 */
    int64_t batches;                      /* at most this many; -1 (default):
                                             all of a file, 10 of the
                                             generator or a config's data    */
    int32_t shards;                       /* 0 (default): the world size     */
    int stack_tables;                     /* default 1                       */
    ember_world *world;                   /* NULL: a world of one            */
} ember_limits_config;
EMBER_API ember_limits_config ember_limits_config_default(void);

typedef struct ember_limits ember_limits;
EMBER_API int ember_limits_run(const ember_limits_config *c, ember_limits **out);
EMBER_API void ember_limits_destroy(ember_limits *l);

typedef struct ember_limits_summary {
    const char *source;          /* what was read (file, generator, config)   */
    int32_t tables, features, ranks;
    int64_t shards, batches;
    int stack_tables;
    int64_t ids_total;           /* ids of every feature, every batch          */
    int64_t dedup_ids_total;     /* after the per-sample dedup                 */
    int64_t max_ids, max_unique_ids; /* the largest over tables                */
    double seconds;              /* the whole call                             */
} ember_limits_summary;
EMBER_API int ember_limits_summary_info(const ember_limits *l, ember_limits_summary *out);

/* Table t's statistics. */
typedef struct ember_limits_table {
    const char *name;
    int64_t rows;                /* 0: a dynamic table (64-bit keys)           */
    int64_t ids_total, dedup_ids_total;
    int64_t max_ids, max_unique_ids;
    double p50_ids, p99_ids, p999_ids;
    double p50_unique_ids, p99_unique_ids, p999_unique_ids;
    int64_t suggested_max_ids_per_partition, suggested_max_unique_ids_per_partition;
    /* a config's dynamic table (dynamic = 1; else zeros) */
    int dynamic;
    int64_t capacity;            /* rows per rank                              */
    int64_t owners;              /* shards: owner = mix64(key) mod owners      */
    int64_t max_keys_per_owner_per_batch;  /* the busiest owner, largest batch */
    double mean_keys_per_owner_per_batch;  /* the busiest owner, mean batch    */
    int64_t distinct_keys_per_owner;       /* the busiest owner, all batches   */
    int64_t distinct_keys;                 /* all owners, all batches          */
    int over_capacity;           /* distinct_keys_per_owner > capacity         */
} ember_limits_table;
/* EMBER_EINVAL for t out of range. */
EMBER_API int ember_limits_table_info(const ember_limits *l, int32_t t, ember_limits_table *out);

#ifdef __cplusplus
}
#endif
#endif
