/*
 * plan.h: the placement planner and its cost model (docs/planner.md).
 *
 * Three parts, one file each:
 *   stats.c    what the ids of a table look like: the expected number of
 *              distinct rows among n ids (a curve), and the hottest rows with
 *              their probabilities; analytic for the synthetic Zipf/uniform
 *              generator, or measured from a sample of real ids.
 *   model.c    the cost model: for a collection config whose tables carry
 *              placements, the bytes every rank sends and receives per step
 *              (forward + backward), exactly the messages of the wire format
 *              in docs/distributed.md, split into all-to-all and all-gather,
 *              plus the lookups each rank serves and its row and state bytes.
 *   planner.c  picks a placement per table that fits a per-rank memory
 *              budget and minimises the model's cost: pins first, then
 *              "spread" placements (row, column, replicated) per table, then
 *              the table-wise set that lowers the cost most, bin-packed
 *              largest first onto the least-loaded rank (pack.c).
 *   dynamic.c  dynamic tables (docs/dynamic.md): their memory per rank, and
 *              their keys per step and over a horizon against capacity.
 *
 *   summary.c  the figures of a plan over its ranks, for a report.
 *   limits.h   `ember limits`' statistics (limits.c, limits_keys.c).
 *
 * Library-internal: the public face is include/ember-plan.h (src/api/
 * plan_handle.c and limits.c), and ember_bench_run predicts its bytes with it.
 * Nothing here needs MPI or allocates tables; a plan for 1024 ranks takes
 * milliseconds.
 */
#ifndef EMBER_PLAN_H
#define EMBER_PLAN_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "ember.h"

/* Chance that a row drawn with probability p appears in n independent draws:
 * 1 - (1 - p)^n, for n >= 0 and p in [0, 1]. */
static inline double plan_touch(double p, double n)
{
    if (n <= 0 || p <= 0)
        return 0;
    if (p >= 1)
        return 1;
    return -expm1(n * log1p(-p));
}

/* ------------------------------------------------------------ id statistics */

#define PLAN_CURVE_POINTS 180 /* n = 2^(i/4), i = 0..179: up to ~3e13 ids   */
#define PLAN_HOT_ROWS 1024    /* rows tracked one by one (all of a small table) */

/* The key space of measured keys: unknown, so as good as unbounded. */
#define PLAN_ANY_KEYS (INT64_C(1) << 62)

/*
 * How the ids of one logical table are drawn, as the model needs it.  Ids
 * are treated as independent draws from one distribution over the rows
 * (every feature of the table draws from it):
 *   distinct[i]  expected distinct rows among n_i = 2^(i/4) draws
 *                (plan_stats_distinct() interpolates in log-log)
 *   hot_row/p    the `hot` most likely rows and their probabilities; the
 *                rest of the mass (1 - sum p) is spread evenly over the
 *                other rows.  A table with at most PLAN_HOT_ROWS rows lists
 *                every row, so small tables are exact under any sharding.
 *   keyed        1: the ids are a dynamic table's keys (docs/dynamic.md):
 *                rows is the key space (the distinct keys that can occur,
 *                PLAN_ANY_KEYS when unknown), hot_row holds the hottest
 *                keys themselves, each owned by rank mix64(key) mod W, and
 *                the rest of the mass is spread evenly over the owners.
 * Plain values, no pointers: copy freely.
 */
typedef struct plan_id_stats {
    int64_t rows;
    int32_t keyed;                        /* ids are dynamic keys          */
    int32_t points;                       /* valid entries of distinct[]   */
    double distinct[PLAN_CURVE_POINTS];
    int32_t hot;
    int64_t hot_row[PLAN_HOT_ROWS];       /* distinct rows, in [0, rows)   */
    double hot_p[PLAN_HOT_ROWS];
} plan_id_stats;

/* The synthetic generator's laws (src/data/synth.c): bounded Zipf(alpha)
 * over ranks 1..rows, rank k at row ((k-1)*2654435761) % rows; or uniform.
 * Errors: EMBER_EINVAL (rows < 1, alpha <= 0). */
int plan_stats_zipf(int64_t rows, double alpha, plan_id_stats *out);
int plan_stats_uniform(int64_t rows, plan_id_stats *out);
/* The law of one table of an ember_synth_config (zipf or uniform). */
int plan_stats_synth(const ember_synth_config *sc, plan_id_stats *out);

/*
 * The keys of a dynamic table as `ember train`'s synthetic task draws them
 * (data/ctr.h): feature feat[i] of the table draws ids from its own `keys`
 * ids by the bounded Zipf(alpha) law (alpha <= 0: uniform), rank k at id
 * ((k-1)*2654435761) % keys, and sends the key ctr_synth_key(seed,
 * feat[i], id).  A table read by nf features thus sees nf disjoint key
 * sets; share[i] is the fraction of the table's ids that feat[i] draws (its
 * pooling over the table's).  Keyed statistics over nf * keys keys:
 *   D(n) = sum_i D_keys(share[i] * n)
 * and the hottest keys of all features with probabilities share[i] * p.
 * Errors: EMBER_EINVAL (keys < 1, nf < 1, shares not positive), ENOMEM.
 */
int plan_stats_synth_keys(int64_t keys, double alpha, uint64_t seed, int32_t nf, const int32_t *feat,
                          const double *share, plan_id_stats *out);

/* Measured statistics: feed one table's ids in stream order, then finish.
 * The curve is the distinct count of each prefix of the stream; past the
 * sample it grows at the rate of the sample's last doubling, up to rows.
 * rows 0: a dynamic table's keys (every id is a key; keyed statistics over
 * PLAN_ANY_KEYS keys). */
typedef struct plan_stats_builder plan_stats_builder;
int plan_stats_builder_create(int64_t rows, plan_stats_builder **out);
int plan_stats_builder_add(plan_stats_builder *b, const int64_t *ids, int64_t n);
int64_t plan_stats_builder_count(const plan_stats_builder *b); /* ids so far */
int64_t plan_stats_builder_distinct(const plan_stats_builder *b); /* distinct ids so far */
/* Keys only (rows 0): out[o] = the distinct keys seen so far that rank o
 * of a world of `world` owns (mix64(key) mod world, a dynamic table's
 * owner).  Errors: EMBER_EINVAL (not keys, world < 1). */
int plan_stats_builder_owners(const plan_stats_builder *b, int32_t world, int64_t *out);
int plan_stats_builder_finish(plan_stats_builder *b, plan_id_stats *out);
void plan_stats_builder_destroy(plan_stats_builder *b);

/* Expected distinct rows among n draws (n >= 0, real). */
double plan_stats_distinct(const plan_id_stats *s, double n);
/* The least n (to a relative 1e-9) with f(ctx, n) >= target, for f
 * increasing in n: doubling from `start` up to `cap`, then bisection in
 * log n.  Returns the upper end found (cap when f never reaches it). */
double plan_solve_increasing(double (*f)(const void *ctx, double n), const void *ctx, double target, double start,
                             double cap);

/*
 * Expected hit rate of an LRU cache of `cache_rows` rows for steps of n
 * draws each (accesses: a step's distinct rows), by Che's approximation:
 * the cache holds the distinct rows of the last T draws, D(T) = cache_rows,
 * and a row of a step hits when it was drawn in the T draws before, so
 *   hits = sum_i P(i in step) P(i in the T before) = D(n) + D(T) - D(n + T)
 *   hit rate = hits / D(n)
 * (D = plan_stats_distinct).  1 when the cache holds every row; 0 when it
 * cannot hold one step's rows.  Lookahead does better (docs/tiers.md).
 */
double plan_lru_hit_rate(const plan_id_stats *s, double n, double cache_rows);

/* ---------------------------------------------------------------- workload */

/*
 * One step of training as the model sees it.  The placements, owners and
 * exchanges are those of cfg->tables; stacking follows cfg->stack_tables
 * exactly as the library does (equal dim, optimizer, placement, owner and
 * exchange; dynamic tables never), dedup and debug_checks change the wire
 * bytes as the wire format says.  A dynamic table (kind DYNAMIC, rows 0,
 * placement ROW) has keyed statistics; it holds its capacity on every rank
 * and is the row-wise table of capacity * W rows its keys resolve to.  The
 * global batch is split as rank r holding samples [r*B/W, (r+1)*B/W).
 * Every bag of feature f holds pooling[f] ids (its mean); `weighted` says
 * the batch carries a weight per id.
 */
typedef struct plan_workload {
    const ember_collection_config *cfg;
    int64_t global_batch;       /* B: samples per step over all ranks       */
    const double *pooling;      /* [cfg->num_features] ids per sample       */
    int weighted;               /* the batch has weights                    */
    const plan_id_stats *stats; /* [cfg->num_tables]                        */
} plan_workload;

/* Predicted per step, for one rank; expectations, hence doubles. */
typedef struct plan_rank_cost {
    double a2a_sent, ag_sent;   /* bytes sent to other ranks: all-to-all
                                   messages and all-gather messages        */
    double a2a_recv, ag_recv;   /* bytes received from other ranks         */
    double ids_served;          /* entries whose rows this rank looks up
                                   in forward (owners; every rank for
                                   COLUMN; the rank's own for REPLICATED)  */
    double lookup_bytes;        /* rows read in forward + rows updated in
                                   backward, in 64-byte cache lines         */
    int64_t row_bytes, state_bytes; /* memory of the rank's shares (an SSD
                                   table: its cache, in row_bytes)          */
    int64_t index_bytes;        /* dynamic tables' key maps, row metadata,
                                   victim heaps and sketches (DRAM on
                                   either tier)                             */
    int64_t ssd_bytes;          /* SSD tables' store files on the rank      */
    double key_sent, key_recv;  /* dynamic tables' key exchange (keys to
                                   their owners, slots back): part of
                                   a2a_sent and a2a_recv                    */
} plan_rank_cost;

/* What a rank must hold in memory: rows, state and key indexes.  This is
 * what the planner fits into memory_per_rank. */
static inline int64_t plan_rank_memory(const plan_rank_cost *c)
{
    return c->row_bytes + c->state_bytes + c->index_bytes;
}

/* Per logical table: its share of the step, summed over ranks. */
typedef struct plan_table_cost {
    double a2a_bytes, ag_bytes; /* sent by all ranks for this table        */
    double ids_served;          /* lookups over all ranks                  */
    int64_t row_bytes, state_bytes; /* over all ranks (copies counted)      */
    int64_t index_bytes;        /* dynamic: key indexes over all ranks      */
    int64_t max_rank_bytes;     /* rows + state (+ key index) on the rank
                                   holding most (an SSD table: its cache
                                   there)                                   */
    int64_t ssd_bytes;          /* SSD: store files over all ranks          */
    double key_bytes;           /* dynamic: key exchange sent, all ranks    */
} plan_table_cost;

/*
 * The cost model.  Fills out[0..world) (and tables[0..num_tables) when not
 * NULL) for the placements in w->cfg.  Bytes follow docs/distributed.md's
 * wire format for every ordered pair src != dst: headers, entries, distinct
 * rows, rows / partial sums / column slices back, gradients, row-wise
 * Adagrad partial sums; see docs/planner.md for each formula.  O(tables *
 * (world + PLAN_HOT_ROWS)) time.  Errors: EMBER_EINVAL (a bad workload:
 * world < 1, owner out of range, negative pooling), EMBER_ENOMEM.
 */
int plan_predict(const plan_workload *w, int32_t world, plan_rank_cost *out,
                 plan_table_cost *tables);

/*
 * Predicted bytes `rank` sends to other ranks in one forward + backward:
 * a2a_sent + ag_sent of plan_predict() (a dynamic table's key exchange
 * included), the quantity ember_stats's last_bytes_sent measures.
 * Negative on error (a bad workload or rank).  For `ember bench`:
 * predicted vs measured.
 */
double plan_predict_bytes_sent(const plan_workload *w, int32_t world, int32_t rank);

/* ----------------------------------------------------------------- planner */

/* A user's pin for one table: -1 leaves that choice to the planner. */
typedef struct plan_pin {
    int placement; /* ember_placement or -1                                  */
    int32_t owner; /* TABLE: the rank, or -1                                 */
    int exchange;  /* ember_exchange or -1                                   */
} plan_pin;

typedef struct plan_options {
    int32_t world;
    int64_t memory_per_rank;     /* bytes of rows + state + key indexes per
                                    rank (plan_rank_memory); 0: none        */
    int64_t replicate_threshold; /* rows + state at most this may be
                                    replicated (when the model agrees)      */
    double lookup_weight;        /* cost of a looked-up byte relative to a
                                    byte on the network (default 1)         */
    int choose_hot_rows;         /* 1: also choose hot_rows for row-wise
                                    tables with the rows exchange in memory
                                    (docs/distributed.md, "Hot rows") whose
                                    config has none; 0 (default): keep the
                                    config's                                */
} plan_options;

plan_options plan_options_default(void); /* world 1, no budget, 1 MiB, 1.0 */

typedef struct plan_result {
    int32_t num_tables, world;
    ember_placement *placement; /* [num_tables]                             */
    int32_t *owner;             /* [num_tables] (TABLE; else 0)             */
    ember_exchange *exchange;   /* [num_tables]                             */
    int64_t *hot_rows;          /* [num_tables] the config's, or chosen     */
    char (*reason)[128];        /* [num_tables] why this placement          */
    plan_rank_cost *ranks;      /* [world] the model on the chosen plan     */
    plan_table_cost *tables;    /* [num_tables]                             */
    double cost;                /* max over ranks + mean over ranks of the
                                   rank cost (docs/planner.md)              */
    double seconds;             /* time the planner took                     */
    char error[512];            /* set when plan_make fails                 */
} plan_result;

/*
 * Places every table of w->cfg (its placement fields are ignored; pins, an
 * array of num_tables or NULL, are honoured).  A dynamic table is always
 * row-wise (owner = mix64(key) mod W); only its exchange is chosen.  On
 * success fills *out; free it with plan_result_free.  Errors: EMBER_EINVAL
 * with out->error naming the table (a pin out of range, a dynamic table
 * pinned to another placement, or nothing fits the memory budget: names
 * the table and the bytes it needs per rank), EMBER_ENOMEM.
 */
int plan_make(const plan_workload *w, const plan_pin *pins, const plan_options *o,
              plan_result *out);
void plan_result_free(plan_result *r);

/*
 * The figures of a plan over its ranks (summary.c), for a report:
 *   cost[r]       plan_rank_weight of rank r
 *   busiest       the rank of the largest cost (the lowest of equals)
 *   imb_X         max / mean over ranks of ids served, rows + state + key
 *                 indexes (plan_rank_memory), bytes sent, cost (1 when the
 *                 mean is 0)
 *   table_wise[r] tables placed whole on rank r; shared[r] tables spread
 *                 over the ranks with a share on r (every placement but
 *                 TABLE, a row-wise table only on ranks below its rows)
 * tables: the config's (a dynamic table counts capacity x world rows).
 * EMBER_OK or EMBER_ENOMEM; free with plan_summary_free.
 */
typedef struct plan_summary {
    double a2a, ag;             /* bytes sent over all ranks               */
    double sent_max, mem_max;   /* the largest rank's                      */
    int64_t index_max, ssd_max; /* key indexes, store files: the largest   */
    double imb_ids, imb_rows, imb_sent, imb_cost;
    int32_t busiest;
    double *cost;               /* [world]                                 */
    int32_t *table_wise, *shared; /* [world]                               */
} plan_summary;
int plan_summarise(const plan_result *res, const ember_table_config *tables, double lookup_weight, plan_summary *out);
void plan_summary_free(plan_summary *s);

/* Cost of one rank as the planner weighs it: the larger of its sent and
 * received bytes (links are full duplex) plus lookup_weight * lookups. */
double plan_rank_weight(const plan_rank_cost *c, double lookup_weight);

/*
 * Longest-processing-time bin packing (pack.c): items in decreasing order
 * of load (ties: lower index first), each onto the bin with the least load
 * among those with room (free[b] >= mem[i]; ties: lower bin).  Updates
 * bin_load and bin_free, sets bin_of[i].  Returns -1 when all fit, else the
 * index of the first item (in packing order) that fits no bin (bin_of of
 * it and of later items is -1).  Max load is at most 4/3 of the optimum
 * when memory does not bind (Graham 1969).
 */
int32_t plan_pack(int32_t items, const double *load, const int64_t *mem, int32_t bins,
                  double *bin_load, int64_t *bin_free, int32_t *bin_of);

/*
 * Tiers (tiers.c): which tables go to the SSD tier, by the collection's own
 * rules (ember.h: storage, ssd_min_bytes, memory_budget; collection/tier_rule.c) with
 * o->memory_per_rank as the budget when the config sets none, for a world
 * of o->world.  tables[] receives a copy of w->cfg->tables with storage,
 * cache_bytes and cache_policy resolved (plan with it: SSD tables then count
 * their cache as memory and their store file as ssd_bytes); hit[t] is the
 * expected LRU hit rate of an SSD table's cache on the workload's ids
 * (plan_lru_hit_rate, the ranks' caches together), -1 for memory tables.
 * A dynamic table moves by its capacity's rows and state; its key index
 * stays in memory and counts in the budget on either tier.
 * Errors: EMBER_ENOMEM.
 */
int plan_tiers(const plan_workload *w, const plan_options *o, ember_table_config *tables, double *hit);

/* ---------------------------------------------------------- dynamic tables */

/* Rows per rank of a dynamic table (its capacity, or what capacity_bytes
 * holds), and the DRAM per rank of its key map, row metadata, victim heap
 * and sketch (ember_dynamic_bytes less rows and state).  0 for a fixed
 * table or an invalid config. */
int64_t plan_dynamic_capacity(const ember_table_config *tb);
int64_t plan_dynamic_index_bytes(const ember_table_config *tb);

/*
 * A dynamic table's keys against its capacity (docs/planner.md, "Dynamic
 * tables").  With B the global batch, N the table's ids per sample, D_o(n)
 * the expected distinct keys that owner o receives among n draws (the hot
 * keys on their owners, the rest of D(n) spread evenly), and o* the owner
 * with the most keys per step (the one its hottest keys hash to):
 *   keys_step     D_o*(B N): distinct keys one step brings to a rank
 *   keys_horizon  D_o*(steps B N): distinct keys a rank sees in `steps`
 *                 steps, the rows it would need to keep them all
 *   fill_steps    s with D_o*(s B N) = capacity: steps until the rank has
 *                 seen as many keys as it has rows (INFINITY: never)
 *   miss_step     once full, the keys of a step at o* that find no row, by
 *                 Che's approximation of LRU: D_o*(B N + T) - capacity,
 *                 D_o*(T) = capacity (0 when every key fits)
 * Admission (admit_after) is not modelled: every key counts.  Errors:
 * EMBER_EINVAL (table t is not dynamic, or its statistics are not keyed).
 */
typedef struct plan_dynamic {
    int64_t capacity;           /* rows per rank                            */
    int64_t index_bytes;        /* key index etc. per rank                  */
    double steps;               /* the horizon                              */
    double keys_step, keys_horizon, fill_steps, miss_step;
    int32_t busiest;            /* o*                                       */
    int over_step;              /* keys_step > capacity: a step cannot give
                                   every key a row (EMBER_ELIMIT when full) */
    int over_horizon;           /* keys_horizon > capacity: rows are evicted */
} plan_dynamic;

int plan_dynamic_keys(const plan_workload *w, int32_t t, int32_t world, double steps, plan_dynamic *out);

/* "1.5 GiB", "512 B": bytes in binary units, into buf (returns buf). */
const char *plan_format_bytes(double bytes, char *buf, size_t n);

#endif
