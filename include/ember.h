/*
 * ember.h: the whole public API of libember.
 *
 * ember stores embedding tables, turns jagged sparse input into lookups, pools
 * them, and applies sparse gradients with fused optimizers.  This header is the
 * contract: every function states its semantics as naive pseudocode, the
 * errors it returns, and how long returned pointers stay valid.  The naive
 * reference implementations in src/ref/ follow these descriptions literally
 * and the tests compare the fast paths against them.
 *
 * Conventions
 *   - Every call returns an int status: EMBER_OK (0) or a negative ember_status.
 *     The detail of a failure has one accessor, ember_errmsg (below): every
 *     handle keeps the message of its last failure, ember_errmsg(handle); a
 *     call that has no handle to keep it (a failed open or create, a call
 *     that takes no handle) leaves it in this thread's message,
 *     ember_errmsg(NULL).
 *   - Nothing here prints or exits.  A failed call leaves every table as it was.
 *   - Handles are made by ember_X_create(..., &out) and freed by
 *     ember_X_destroy(), which accepts NULL.
 *   - Config structs come with ember_X_config_default(); new fields go at the end.
 */
#ifndef EMBER_H
#define EMBER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EMBER_VERSION_MAJOR 0
#define EMBER_VERSION_MINOR 1
#define EMBER_VERSION_PATCH 0

/* EMBER_API marks the library's public calls: libember.so is built with hidden
 * visibility, so these are the only names it exports. */
#ifndef EMBER_API
#if defined(__GNUC__) || defined(__clang__)
#define EMBER_API __attribute__((visibility("default")))
#else
#define EMBER_API
#endif
#endif

EMBER_API const char *ember_version(void);

/* ------------------------------------------------------------------ status */

typedef enum ember_status {
    EMBER_OK = 0,
    EMBER_EINVAL = -1,     /* a bad argument or config (names the field)          */
    EMBER_ENOMEM = -2,     /* an allocation failed                                */
    EMBER_EINPUT = -3,     /* a bad batch: length, id, weight (names feature,
                              sample and id)                                     */
    EMBER_ELIMIT = -4,     /* a per-partition limit overflowed under policy error
                              (names table, shard, observed and allowed counts)  */
    EMBER_ENUMERIC = -5,   /* debug checks found NaN/Inf (names table, row,
                              feature, sample)                                   */
    EMBER_EIO = -6,        /* a file could not be read or written                */
    EMBER_ESTATE = -7,     /* call out of order (backward without forward)       */
    EMBER_EPANIC = -8,     /* an earlier fatal error; the handle refuses work     */
    EMBER_EFORMAT = -9,    /* a file is not in the expected format               */
    EMBER_ECOMM = -10,     /* a communication call failed, or another rank
                              failed this collective call (names the operation
                              and the rank)                                    */
    EMBER_ECORRUPT = -11   /* a checksum did not match, or a file is shorter or
                              longer than its manifest says (names the file and
                              the part)                                        */
} ember_status;

/*
 * Why the last call failed, naming the table, feature, sample, file, line or
 * key at fault.  handle is any ember handle (ember_collection, ember_trainer,
 * ember_predictor, ember_reader, ember_batch_reader, ember_batch_writer,
 * ember_synth, ember_world, ember_plan, ember_limits, ember_scorer,
 * ember_output, ember_checkpoint, ember_conversion): the message of the last
 * failed call on it.  NULL: the message of the last failed call on this
 * thread that had no handle to keep it, namely a failed open or create
 * (*out NULL), a call that takes no handle (ember_predict,
 * ember_bundle_write, ember_bundle_inspect, ...), a call that frees its
 * handle (ember_output_commit), and ember_scorer_score and
 * ember_scorer_reload, which many threads call on one scorer at once, and
 * ember_predictor_score_body.  Never NULL; "" when nothing failed yet.
 * Valid until the next call on the same handle (NULL: on this thread).
 */
EMBER_API const char *ember_errmsg(const void *handle);

/* A static name and one-line meaning for a status; never NULL. */
EMBER_API const char *ember_status_str(int status);

/* ------------------------------------------------------------------ tables */

typedef enum ember_init_kind {
    EMBER_INIT_UNIFORM = 0, /* uniform on [-value, +value)                        */
    EMBER_INIT_NORMAL = 1,  /* normal(0, value^2) (Box-Muller)                    */
    EMBER_INIT_ZEROS = 2,
    EMBER_INIT_CONSTANT = 3 /* every element = value                              */
} ember_init_kind;

typedef enum ember_optimizer_kind {
    EMBER_OPT_SGD = 0,
    EMBER_OPT_ADAGRAD = 1,
    EMBER_OPT_ROWWISE_ADAGRAD = 2,
    EMBER_OPT_ADAM = 3,
    EMBER_OPT_MOMENTUM = 4, /* SGD with momentum (heavy ball, or Nesterov)     */
    EMBER_OPT_FTRL = 5,     /* FTRL-Proximal, per coordinate                   */
    EMBER_OPT_ROWWISE_ADAM = 6, /* FBGEMM's partial row-wise Adam: v per row    */
    EMBER_OPT_LAMB = 7,     /* Adam with a trust ratio per row (FBGEMM LAMB)   */
    EMBER_OPT_LARS = 8      /* SGD with momentum and a trust ratio per row     */
} ember_optimizer_kind;

typedef enum ember_decay_mode {
    EMBER_DECAY_L2 = 0,       /* g += weight_decay * w (torch's weight_decay)     */
    EMBER_DECAY_DECOUPLED = 1 /* w *= 1 - lr * weight_decay (AdamW's)            */
} ember_decay_mode;

/*
 * Optimizers, applied once per backward to every row touched by the batch,
 * with g = the row's summed gradient (see ember_backward) and w the row:
 *
 *   every kind first, when on: gradient clipping of the row's summed g
 *                      g[k] = clamp(g[k], -clip_value, clip_value)
 *                      then, if |g| (L2 over the row) > clip_norm,
 *                      g *= clip_norm / |g|     (counted: ember_stats)
 *   then:              g += weight_decay * w                  (L2, as torch)
 *                      or, weight_decay_mode DECOUPLED:
 *                      w *= 1 - lr * weight_decay          (g left as it is;
 *                      with ADAM: torch.optim.AdamW, on the batch's rows)
 *   SGD:               w -= lr * g
 *   ADAGRAD:           s += g*g                 (s: dim floats per row, init 0)
 *                      w -= lr * g / (sqrt(s) + eps)
 *   ROWWISE_ADAGRAD:   s += mean_k(g[k]^2)      (s: 1 float per row, FBGEMM)
 *                      w -= lr * g / (sqrt(s) + eps)
 *   ADAM (lazy):       m = beta1*m + (1-beta1)*g;  v = beta2*v + (1-beta2)*g*g
 *                      w -= lr * sqrt(1-beta2^t) / (1-beta1^t) * m / (sqrt(v) + eps)
 *                      Bias correction uses t = the collection's global step
 *                      (number of ember_backward calls so far, counting this
 *                      one), not a per-row count: rows that were not touched
 *                      keep m and v unchanged (as torch.optim.SparseAdam and
 *                      TF LazyAdam).
 *   MOMENTUM (lazy):   b = momentum*b + g           (b: dim floats per row, init 0)
 *                      w -= lr * (nesterov ? g + momentum*b : b)
 *                      torch.optim.SGD's rule (dampening 0) on the rows of
 *                      the batch: a row the batch does not touch keeps b and
 *                      does not move (torch moves every row by its b).
 *   FTRL (lazy):       n' = n + g*g               (z, n: 2*dim floats per row,
 *                      s = (n'^-p - n^-p) / lr     z then n, init 0;
 *                      z += g - s * w              p = lr_power <= 0)
 *                      n = n'
 *                      w = |z| <= l1 ? 0
 *                        : -(z - sign(z)*l1) / ((beta + n^-p) / lr + l2)
 *                      McMahan et al.'s FTRL-Proximal (lr = alpha): a weight
 *                      whose |z| stays <= l1 is exactly 0.  For p = -0.5,
 *                      n'^-p - n^-p is computed as g*g / (sqrt(n') + sqrt(n)).
 *   ROWWISE_ADAM:      m = beta1*m + (1-beta1)*g     (m: dim floats, then v:
 *   (lazy)             v = beta2*v + (1-beta2)*mean_k(g[k]^2)   1 per row)
 *                      w -= lr * m / (1-beta1^t) / (sqrt(v / (1-beta2^t)) + eps)
 *                      FBGEMM's PARTIAL_ROWWISE_ADAM (t as for ADAM; eps
 *                      added as FBGEMM adds it, outside the root).
 *   LAMB (lazy):       m, v as ADAM (2*dim floats per row, m then v)
 *                      r = m / (1-beta1^t) / (sqrt(v / (1-beta2^t)) + eps)
 *                      DECOUPLED: r += weight_decay * w   (FBGEMM's LAMB)
 *                      ratio = |w| / |r|  (L2 norms over the row; 1 when
 *                      either is 0: FBGEMM divides regardless)
 *                      w -= lr * ratio * r
 *   LARS (lazy):       (weight decay handled here, not as above: L2 is
 *                      FBGEMM's LARS_SGD, DECOUPLED shrinks w first, wd = 0)
 *                      q = eta * |w| / (|g| + wd * |w|)  (1 when |w| or the
 *                      denominator is 0)
 *                      b = momentum*b + lr * q * (g + wd*w)   (b: dim floats)
 *                      w -= b
 * The norms and means over a row are sums of squares in a fixed order:
 * deterministic like the rest.  Under COLUMN placement a row's sums add the
 * ranks' slices in rank order (docs/optimizers.md).  ROWWISE_ADAM, like
 * ROWWISE_ADAGRAD, keeps fp32 state.
 */
typedef struct ember_optimizer {
    ember_optimizer_kind kind;
    float lr;           /* default 0.01                                        */
    float eps;          /* default 1e-8 (Adam, Adagrad variants)               */
    float weight_decay; /* default 0                                           */
    float beta1, beta2; /* Adam kinds and LAMB; default 0.9, 0.999             */
    float momentum;     /* MOMENTUM and LARS: in [0, 1); default 0.9           */
    int32_t nesterov;   /* MOMENTUM only: 1 Nesterov's form; default 0         */
    ember_decay_mode weight_decay_mode; /* default L2                          */
    float beta, l1, l2; /* FTRL only: default 1, 0, 0 (each >= 0)              */
    float lr_power;     /* FTRL only: <= 0; default -0.5                       */
    float clip_value;   /* > 0: each element of g clipped to +-clip_value; 0 off */
    float clip_norm;    /* > 0: g scaled down to this L2 norm when above; 0 off */
    float eta;          /* LARS only: trust coefficient > 0; default 0.001     */
} ember_optimizer;

typedef enum ember_limit_policy {
    EMBER_LIMIT_ERROR = 0,    /* overflow -> EMBER_ELIMIT, nothing changes       */
    EMBER_LIMIT_DROP = 1,     /* ids past the limit are dropped, counted          */
    EMBER_LIMIT_MINIBATCH = 2 /* batch split into the fewest sequential
                                 mini-batches that fit; results equal unsplit    */
} ember_limit_policy;

/*
 * Placement of a table over the ranks of a world (the IPU's partition
 * strategies, SparseOperationKit, SparseCore's mod sharding).  In a world of one every placement is the same local table.
 *   ROW:        token strategy: physical row r lives on rank r % world, as
 *               local row r / world.
 *   COLUMN:     encoding strategy: every rank holds every row, columns
 *               [rank*c, rank*c + c) with c = ceil(dim / world) (the last
 *               slices padded with zero columns); ids are all-gathered and
 *               each rank pools its slice for every sample.
 *   TABLE:      the whole table on rank `owner`.
 *   REPLICATED: a copy on every rank; forward is local, and gradients from
 *               every rank are summed in the global order on every rank, so
 *               the copies stay bit-identical.
 * docs/distributed.md has the data flow of each.
 */
typedef enum ember_placement {
    EMBER_PLACE_ROW = 0,
    EMBER_PLACE_COLUMN = 1,
    EMBER_PLACE_TABLE = 2,
    EMBER_PLACE_REPLICATED = 3
} ember_placement;

/*
 * What the owners of a ROW or TABLE table send back in forward:
 *   ROWS:   each distinct requested row once; the requester pools in its own
 *           order, so results are bit-identical to a world of one.
 *   POOLED: per (sample, feature) bag, the owner's partial pooled sum
 *           (divided by the combiner divisor); the requester adds partials
 *           in rank order.  Fewer bytes when bags are long; forward equals
 *           ROWS up to float rounding.  Backward is the same for both.
 */
typedef enum ember_exchange {
    EMBER_EXCHANGE_ROWS = 0,
    EMBER_EXCHANGE_POOLED = 1
} ember_exchange;

/*
 * Where a table's rows and optimizer state live on each rank (docs/tiers.md).
 *   MEMORY: in DRAM (anonymous huge-page mappings).
 *   SSD:    in a store file on a local filesystem, with a DRAM row cache of
 *           cache_bytes in front.  The step makes its rows resident (reading
 *           missing ones, writing dirty victims back) and the kernels run on
 *           the cached rows: results are bit-identical to MEMORY for any
 *           cache size, policy, thread count and placement.  The store file
 *           is working space, not a checkpoint: it is created empty (rows
 *           never written are computed by the initializer), locked while the
 *           collection lives, and deleted by ember_collection_destroy.  Save
 *           with ember_save to keep a table.
 *   AUTO:   SSD when the collection's rule says so (ssd_min_bytes,
 *           memory_budget), else MEMORY.
 */
typedef enum ember_storage {
    EMBER_STORAGE_AUTO = 0,
    EMBER_STORAGE_MEMORY = 1,
    EMBER_STORAGE_SSD = 2
} ember_storage;

/*
 * Which cached row an SSD table evicts when it needs a slot.  Rows of the
 * current step are pinned and never evicted.
 *   LRU:       the least recently used row.
 *   LFU:       the row used in the fewest steps since it was loaded (ties:
 *              the least recently used).
 *   LOOKAHEAD: with batches announced by ember_prefetch: a row no announced
 *              batch uses, the least used first (as LFU); otherwise the row
 *              whose next use is farthest (Belady's rule inside the window).
 *              Announced rows are read in the background while the caller
 *              computes.  Without announcements it is LFU.
 *   DEFAULT:   the collection's ssd_policy.
 */
typedef enum ember_cache_policy {
    EMBER_CACHE_DEFAULT = 0,
    EMBER_CACHE_LRU = 1,
    EMBER_CACHE_LFU = 2,
    EMBER_CACHE_LOOKAHEAD = 3
} ember_cache_policy;

/*
 * What a table's ids are (docs/dynamic.md).
 *   FIXED:   row numbers in [0, rows).
 *   DYNAMIC: any int64 key (user ids, item ids, hashed crosses): no range
 *            check, no collisions.  A key gets a row the first time it is
 *            admitted (admit_after occurrences, counted in a sketch), with
 *            values from the initializer keyed by the key (row `key` of a
 *            fixed table with the same name and seed would start the same)
 *            and zero optimizer state.  A key without a row reads zeros and
 *            gets no update (its weight still counts in mean and sqrtn
 *            divisors, as a dropped id).  Rows are freed by the eviction
 *            policy when the table is full, by TTL, or on demand
 *            (ember_dynamic_evict); a freed row's key must be admitted anew
 *            and starts fresh.  The table holds `capacity` rows per rank, is
 *            placed row-wise by a hash of the key, never stacked, and `rows`
 *            must be 0.
 */
typedef enum ember_table_kind {
    EMBER_TABLE_FIXED = 0,
    EMBER_TABLE_DYNAMIC = 1
} ember_table_kind;

/*
 * Which row a full dynamic table frees for a new key.  Rows the current
 * batch uses are never chosen; ties go to the lower slot.
 *   LRU:  the row whose last use is oldest.
 *   LFU:  the row used least often (occurrences, counted from the key's
 *         first sighting), then the oldest.
 *   TTL:  as LRU, and rows expire.  Training steps are numbered as
 *         ember_stats.steps counts them (the training forward after s - 1
 *         completed backwards is step s).  A row whose key was last used in
 *         step s is kept through step s + ttl_steps; at the start of step
 *         s + ttl_steps + 1, before that step admits new keys, it is freed
 *         unless that step uses its key.  So a row is freed once it has gone
 *         more than ttl_steps steps unused, the running step counted, and a
 *         key back after at most ttl_steps idle steps keeps its row.
 *         Example, ttl_steps = 2: a key used in steps 1 and 4 keeps its row
 *         (2 idle steps); a key used in steps 1 and 5 is freed at the start
 *         of step 4 and admitted anew in step 5 with a fresh row; a key used
 *         only in step 1 holds a row after step 3 and none after step 4.
 *   NONE: nothing is freed: a batch that needs a row of a full table fails
 *         with EMBER_ELIMIT naming the table and its capacity.
 */
typedef enum ember_evict_policy {
    EMBER_EVICT_LRU = 0,
    EMBER_EVICT_LFU = 1,
    EMBER_EVICT_TTL = 2,
    EMBER_EVICT_NONE = 3
} ember_evict_policy;

/* How a table holds its rows (ember_table_config.rows_encoding). */
typedef enum ember_row_encoding {
    EMBER_ROWS_FP32 = 0,
    EMBER_ROWS_FP16 = 1, /* IEEE half per element                           */
    EMBER_ROWS_INT8 = 2, /* fp16 scale, fp16 bias, one byte per element      */
    EMBER_ROWS_INT4 = 3  /* fp16 scale, fp16 bias, two elements per byte     */
} ember_row_encoding;

/* The precision a table's rows train in (ember_table_config.precision;
 * docs/precision.md). */
typedef enum ember_row_precision {
    EMBER_PRECISION_FP32 = 0,
    EMBER_PRECISION_FP16 = 1, /* IEEE half: |x| <= 65504, 11 significant bits */
    EMBER_PRECISION_BF16 = 2  /* bfloat16: fp32's range, 8 significant bits   */
} ember_row_precision;

/* How an update is rounded into a half-precision row. */
typedef enum ember_rounding {
    EMBER_ROUND_STOCHASTIC = 0, /* up with probability = the fraction dropped */
    EMBER_ROUND_NEAREST = 1     /* to nearest, ties to even                  */
} ember_rounding;

typedef struct ember_table_config {
    const char *name; /* required, unique; keys the initializer (see below)     */
    int64_t rows;     /* >= 1                                                   */
    int32_t dim;      /* 1..1024                                                */
    ember_init_kind init;
    float init_value; /* uniform bound, normal sigma or constant; default 0.05  */
    ember_optimizer optimizer;
    /* Per-partition limits (as SparseCore's), 0 = unlimited.  The unit is a
     * distinct id within one bag (sample, feature): repeated ids in a bag
     * count once, whatever cfg.dedup says.  Counts are per (table, shard),
     * shard = physical_row % num_shards, as in ember_partition_counts().
     *
     * drop: per (table, shard), units sorted by (id, sample, feature order);
     *   walk them in that order with u = distinct ids so far, k = units kept:
     *       a unit whose id is new: u += 1
     *       keep it iff (max_unique == 0 || u <= max_unique) &&
     *                   (max_ids == 0 || k < max_ids);   if kept: k += 1
     *   A dropped unit contributes a zero row (all its occurrences in the
     *   bag); mean/sqrtn divisors still count it.  Counted in stats.
     * minibatch: samples [0, B) are cut greedily into sequential ranges, each
     *   as long as possible while every minibatch-policy table fits in every
     *   shard; a single sample that alone overflows is EMBER_ELIMIT.  Then
     *   error and drop tables are checked per mini-batch.  Outputs and
     *   updates are bit-identical to the unsplit batch.
     * error: any overflow -> EMBER_ELIMIT naming table, shard, both counts.
     * In a world of W ranks the counts are per rank, over that rank's local
     * batch (as in SparseCore: each core counts what it sends to every
     * partition); drops are decided locally; an error on one rank fails all
     * ranks; minibatch rounds are agreed (the world runs as many rounds as
     * the rank needing most, the others' extra rounds are empty). */
    int64_t max_ids_per_partition;
    int64_t max_unique_ids_per_partition;
    ember_limit_policy limit_policy;
    ember_placement placement; /* default ROW                                  */
    int32_t owner;             /* TABLE placement: the rank holding the table  */
    ember_exchange exchange;   /* ROW and TABLE placements; default ROWS       */
    int64_t hot_rows;          /* ROW placement, ROWS exchange, memory tier:
                                  at most this many rows of the table copied
                                  onto every rank (docs/distributed.md, "Hot
                                  rows"), chosen by ember_set_hot_rows or
                                  ember_refresh_hot_rows; results unchanged,
                                  bit for bit.  0 (default): none          */
    ember_storage storage;     /* default AUTO                                */
    int64_t cache_bytes;       /* SSD: DRAM for the cached rows, their state
                                  and the cache's bookkeeping, per rank; it
                                  holds min(rows, (cache_bytes - 8 x
                                  ceil(rows / 64)) / (record + 38, + 16 LFU,
                                  + 24 LOOKAHEAD)) rows, record = a row's
                                  values and state as held: 4 bytes an
                                  element, 2 for half rows (precision) or
                                  half state (state_precision); rows = the
                                  table's rows on the rank (docs/tiers.md,
                                  "The cache"); 0 = the collection's
                                  ssd_cache_bytes                             */
    ember_cache_policy cache_policy; /* SSD; default DEFAULT                  */
    const char *path;          /* SSD: folder of the store file; NULL = the
                                  collection's ssd_dir.  The file is
                                  <path>/<table>.rank<R>.ember-store         */
    /* Dynamic tables (kind DYNAMIC; docs/dynamic.md). */
    ember_table_kind kind;     /* default FIXED                               */
    int64_t capacity;          /* rows per rank, 1 .. 2^32-2; 0 = as many as
                                  capacity_bytes holds                        */
    int64_t capacity_bytes;    /* per rank: rows, optimizer state, key index,
                                  metadata and sketch (ember_dynamic_row_bytes)*/
    int32_t admit_after;       /* occurrences before a key gets a row;
                                  0 or 1 = its first use; at most 65535       */
    ember_evict_policy evict;  /* default LRU                                 */
    int32_t ttl_steps;         /* evict TTL: the most steps a row may go
                                  unused and stay (>= 1; EMBER_EVICT_TTL
                                  above).  Any other policy (and a fixed
                                  table) needs 0: create refuses the config
                                  with EMBER_EINVAL, naming the table      */
    int64_t sketch_bytes;      /* admission sketch per rank (admit_after > 1):
                                  4 rows of 16-bit counters; 64 B .. 16 GiB,
                                  rounded down to a power of two; 0 = 8 bytes
                                  per row of capacity but at least 64 KiB
                                  (sized by capacity_bytes: at most an
                                  eighth of them).  It may admit
                                  a key early (other keys sharing all its
                                  counters), never late: docs/dynamic.md,
                                  "Admission", for its size               */
    /* Simulated quantization (docs/inference.md), for a model that will be
     * served with quantized rows.  quant_buckets 0 = off (default); else
     * 2 .. 2^24 buckets over [quant_low, quant_high] (finite, low < high):
     * the forward reads every element x of this table's rows as
     *     step = (quant_high - quant_low) / (quant_buckets - 1)   (float)
     *     q(x) = fmaf(step, rint((min(max(x, low), high) - low) / step), low)
     * (rint: half to even), pooled outputs and sequence rows alike; the
     * backward passes the gradient straight through to the fp32 row (dq/dx
     * taken as 1), so rows and optimizer state stay fp32. */
    int32_t quant_buckets;
    float quant_low, quant_high;
    /* Encoded rows, for inference (docs/inference.md, "Quantized tables"):
     * FP32 (default) or the row-wise FP16, INT8, INT4 of inference bundles.
     * An encoded table is read-only: the forward pools its rows decoded
     * (bit-identical to pooling the decoded fp32 rows), ember_backward
     * refuses the collection (EMBER_EINVAL), row writes and ember_load
     * encode what they store (int8/int4: each row's own scale and bias from
     * its min and max; a row fp16 cannot hold fails, named: a write writes
     * nothing, a load disables the collection), reads decode, and optimizer
     * state reads as zeros (writes to it are dropped).  A dynamic table of
     * encoded rows holds the keys it is loaded with: every forward only
     * looks keys up (no key is counted, admitted or evicted, as in
     * evaluation), and a key it lacks reads zeros.  Memory tier, ROW, TABLE
     * or REPLICATED placement, no simulated quantization; anything else is
     * refused at create. */
    ember_row_encoding rows_encoding;
    /* Training precision of the rows (docs/precision.md): FP32 (default),
     * FP16 or BF16.  The forward reads the half rows and pools in fp32; the
     * backward computes each update in fp32 and writes the row back rounded
     * by `rounding`.  Stochastic rounding takes its random bits from
     * (seed, step, table name, row, column) only, so tables stay
     * bit-identical for any thread count.  Optimizer state: state_precision.
     * Row reads return the rows' values as fp32; row writes and loads round
     * to nearest (an fp16 table refuses values beyond 65504, named).
     * Either tier (fixed or dynamic tables, any placement, hot rows too in
     * memory; the SSD tier caches and stores the halves as they are, 2
     * bytes an element), no simulated quantization, rows_encoding FP32;
     * anything else is refused at create. */
    ember_row_precision precision;
    ember_rounding rounding;
    /* Precision of the optimizer state (docs/precision.md, "Optimizer
     * state"): FP32 (default), or FP16/BF16 for ADAGRAD and ADAM, whose
     * state is per element (row-wise Adagrad keeps its one float per row in
     * fp32; SGD has none: both refuse anything but FP32).  The backward
     * reads the state to fp32, steps it with the row in fp32, and stores it
     * rounded by `rounding`; stochastic rounding draws bits apart from the
     * row's (state vector j, Adagrad's sum or Adam's m then v, from stream
     * 4 + j).  State reads return the halves' values as fp32; writes and
     * loads round to nearest.  With rows of any precision, on either tier
     * (the SSD tier caches and stores the halves); not with encoded
     * inference rows.  Take BF16: typical gradients' squares fall below
     * fp16's range, and training with FP16 state can diverge. */
    ember_row_precision state_precision;
} ember_table_config;

/* rows 0, dim 0 (caller sets), uniform(0.05), SGD lr 0.01, no limits, error. */
EMBER_API ember_table_config ember_table_config_default(void);
EMBER_API ember_optimizer ember_optimizer_default(ember_optimizer_kind kind);

/* ------------------------------------------------------------------ world */

/*
 * The processes a collection is spread over.  A world of one needs no MPI
 * at run time; include/ember-mpi.h makes a world from an MPI communicator.
 * With a world of size W, every rank creates the collection with the same
 * config and calls forward and backward together (they are collective):
 * each rank passes its own local samples, and the global batch is the
 * concatenation of the local batches in rank order (local batch sizes may
 * differ, including 0).  A world must outlive the collections using it.
 *
 * Errors are agreed: when one rank's call fails (a bad id, a limit, a NaN
 * check), every rank's call returns the same status, before any table
 * changes, with the failing rank's message ("rank R: ...").  A failed MPI
 * call returns EMBER_ECOMM naming the operation and the rank; the collection
 * then refuses further work (EMBER_EPANIC), because the ranks may disagree
 * on what happened.  A rank that dies is not detected by ember: Open MPI's
 * mpirun ends the whole job when a process exits abnormally.
 */
typedef struct ember_world ember_world;
/* A world of one (rank 0 of 1). */
EMBER_API int ember_world_self(ember_world **out);
EMBER_API int32_t ember_world_rank(const ember_world *w);
EMBER_API int32_t ember_world_size(const ember_world *w);
EMBER_API void ember_world_destroy(ember_world *w);

/*
 * Small collectives over a world, for a program around ember's calls (the
 * `ember` tool: agreeing on a failure before the next collective call,
 * reducing its statistics, gathering scores).  A NULL world is a world of
 * one: nothing is sent, each call is a local no-op or a copy.  Otherwise
 * every rank makes the same calls in the same order.  Reductions combine
 * the ranks' values in rank order 0, 1, ..., W-1 on every rank, so every
 * rank gets the same bits:
 *   ember_world_reduce_i64(w, v, n, op):  for i < n:
 *       v[i] = op over ranks r = 0..W-1 of (rank r's v[i])   (MAX or SUM)
 * None of them counts in ember_stats' bytes.  Errors: EMBER_ECOMM (an MPI
 * call failed), EMBER_ENOMEM (gathers: rank 0 could not hold the values;
 * every rank then returns it); detail in ember_errmsg(w).
 */
typedef enum ember_world_op { EMBER_WORLD_MAX = 0, EMBER_WORLD_SUM = 1 } ember_world_op;
/* 1 on every rank when `failed` is non-zero on any rank (or the exchange
 * failed), else 0.  *first (may be NULL): the lowest failing rank, or -1
 * when none failed or the exchange itself failed. */
EMBER_API int ember_world_any_failed(ember_world *w, int failed, int32_t *first);
/* The largest `status` over the ranks (exit codes 0, 1, 2), on every rank;
 * 1 at least when the exchange failed. */
EMBER_API int ember_world_max_status(ember_world *w, int status);
EMBER_API int ember_world_reduce_i64(ember_world *w, int64_t *v, int64_t n, ember_world_op op);
EMBER_API int ember_world_reduce_double(ember_world *w, double *v, int64_t n, ember_world_op op);
/* Rank 0 gets every rank's n values in rank order, in a new array *out
 * (free() it) of *total values; the other ranks get *out NULL and *total.
 * On error every rank has *out NULL. */
EMBER_API int ember_world_gather_floats(ember_world *w, const float *v, int64_t n, float **out, int64_t *total);
EMBER_API int ember_world_gather_i64(ember_world *w, const int64_t *v, int64_t n, int64_t **out, int64_t *total);
/* Returns when every rank has called it. */
EMBER_API int ember_world_barrier(ember_world *w);
/* The ranks of w on this machine (those sharing its memory; when MPI
 * cannot tell, Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE, else w's size); 1
 * for a NULL world.  Local. */
EMBER_API int32_t ember_world_local_ranks(const ember_world *w);

/* ---------------------------------------------------------------- features */

typedef enum ember_combiner {
    EMBER_COMBINER_SUM = 0,   /* out = sum_i w_i * row(id_i)                     */
    EMBER_COMBINER_MEAN = 1,  /* out = sum_i w_i * row(id_i) / sum_i w_i         */
    EMBER_COMBINER_SQRTN = 2, /* out = sum_i w_i * row(id_i) / sqrt(sum_i w_i^2)  */
    EMBER_COMBINER_NONE = 3   /* one output row per id: w_i * row(id_i)           */
} ember_combiner;
/* w_i = 1 when the batch has no weights.  An empty bag, or a mean/sqrtn
 * divisor of 0, gives a zero row (never NaN).  Divisors are taken over the
 * bag's valid ids before dedup; an id dropped by a limit counts in the divisor
 * but contributes a zero row. */

typedef struct ember_feature_config {
    const char *name;  /* required, unique                                       */
    int32_t table;     /* index into ember_collection_config.tables             */
    ember_combiner combiner;
} ember_feature_config;

/* -------------------------------------------------------------- collection */

typedef enum ember_bounds_policy {
    EMBER_BOUNDS_ERROR = 0, /* an id outside [0, rows) -> EMBER_EINPUT           */
    EMBER_BOUNDS_DROP = 1   /* such ids are skipped and counted                  */
} ember_bounds_policy;

/* How a step's exchanges are scheduled against the caller's work, for the
 * split forward (ember_forward_begin / ember_forward_end; docs/distributed.md,
 * "Schedules"). */
typedef enum ember_schedule {
    EMBER_SCHEDULE_BLOCKING = 0, /* begin only validates and routes; the end
                                    exchanges and looks up                   */
    EMBER_SCHEDULE_OVERLAP = 1,  /* begin also sends the ids (non-blocking),
                                    the end receives them and looks up:
                                    results bit-identical to BLOCKING       */
    EMBER_SCHEDULE_STALE = 2     /* begin also looks up, reading the tables
                                    as they are before the current batch's
                                    backward; the vectors travel until the
                                    end: one step stale                      */
} ember_schedule;

typedef struct ember_collection_config {
    const ember_table_config *tables;
    int32_t num_tables;
    const ember_feature_config *features; /* output columns follow this order   */
    int32_t num_features;
    uint64_t seed;         /* initializer seed                                  */
    int32_t num_shards;    /* limit partitions (physical_row % num_shards);
                              0 (default) = the world size                   */
    int stack_tables;      /* 1 (default): tables with equal dim, optimizer
                              (every field bitwise equal), placement, owner,
                              exchange and simulated quantization (buckets,
                              low, high) share one physical
                              table: its rows are those tables' rows in config
                              order, so table t's physical row for id is
                              offset(t) + id, offset(t) = rows of the earlier
                              tables of its group; placed row-wise with S > 1
                              shards (num_shards), the k-th table of a group
                              (k from 0) starts at the first row at or after
                              that which is k modulo S (a few rows unused),
                              so each table's row 0 lands on its own shard,
                              and by default its own rank.  0: every offset
                              is 0.
                              Lookups and updates are identical either way;
                              only the shard of a row (physical_row % shards)
                              moves, which spreads each table's hot low ids
                              over the shards.                              */
    ember_bounds_policy bounds;
    int dedup;             /* 1: merge repeated ids within one bag (summing
                              their weights) before lookup; default 0          */
    int debug_checks;      /* 1: check outputs and gradients for NaN/Inf        */
    int32_t threads;       /* OpenMP threads; 0 = omp_get_max_threads()         */
    ember_world *world;    /* NULL: a world of one                              */
    /* Memory tiers (docs/tiers.md).  A table with storage AUTO goes to the SSD
     * tier when its rows + optimizer state on one rank exceed ssd_min_bytes
     * (0: no such rule), and, when memory_budget > 0 and the MEMORY tables
     * of a rank still need more than memory_budget bytes, the largest AUTO
     * tables move to SSD until they fit (cache bytes counted). */
    int64_t ssd_min_bytes;
    int64_t memory_budget;
    const char *ssd_dir;          /* default folder of store files; NULL = "." */
    int64_t ssd_cache_bytes;      /* default cache per SSD table and rank;
                                     0 = an equal share of what
                                     memory_budget leaves, or 256 MiB          */
    ember_cache_policy ssd_policy;/* default policy; DEFAULT = LOOKAHEAD      */
    int32_t lookahead;            /* batches ember_prefetch may announce ahead
                                     (1..63; 0 = 16)                          */
    int32_t lookahead_max;        /* > lookahead: the window follows the data
                                     between 1 and this (docs/tiers.md,
                                     "A window that follows the data");
                                     0: it stays `lookahead`                */
    int32_t io_threads;           /* I/O threads per SSD table; 0 = 32 (they
                                     block in the kernel: as many requests in
                                     flight as the device needs)              */
    ember_schedule schedule;      /* the split forward's schedule (default
                                     BLOCKING).  OVERLAP and STALE refuse
                                     dynamic tables, STALE the SSD tier.
                                     ember_forward is blocking always; the
                                     split forward refuses dynamic tables
                                     under every schedule.                 */
    int ssd_buffered;             /* 1: store files through the page cache;
                                     0 (default): O_DIRECT where the file
                                     system allows it (records padded to 512
                                     bytes), else buffered                   */
} ember_collection_config;

EMBER_API ember_collection_config ember_collection_config_default(void);

typedef struct ember_collection ember_collection;

/*
 * Creates all tables and initialises every row.  Element (row r, column c) of
 * table t is a function of (seed, XXH64(name of t), r, c) only:
 *   key = ember_rng_table_key(seed, XXH64(name, strlen(name), 0))
 *   u_s = ember_rng_uniform(key, r, c, s)   (src/core/rng.h; [0,1), 24 bits)
 *   uniform:  (float)((2*u_0 - 1) * value)
 *   normal:   (float)(value * sqrt(-2 ln(1 - u_1)) * cos(2 pi u_2))  (double math)
 * so it never depends on sharding, thread count, stacking or creation order.
 * Errors: EMBER_EINVAL (names the table or feature field), EMBER_ENOMEM.
 * On error *out is NULL; a message is in ember_errmsg(NULL) for this thread.
 */
EMBER_API int ember_collection_create(const ember_collection_config *cfg, ember_collection **out);
EMBER_API void ember_collection_destroy(ember_collection *coll);

/* ------------------------------------------------------------------- batch */

/*
 * A batch of local samples, KeyedJaggedTensor-like.  For feature f (config
 * order) and sample b, the bag is
 *     ids[off(f,b) .. off(f,b) + lengths[f*batch_size + b])
 * where off() walks lengths in order (feature-major, then sample).
 * weights, when not NULL, has one float per id.
 */
typedef struct ember_batch {
    int32_t batch_size;
    int32_t num_features; /* must equal the config's num_features               */
    const int32_t *lengths;
    const int64_t *ids;
    const float *weights;
    int64_t num_ids;      /* must equal the sum of lengths                       */
} ember_batch;

/* Floats per sample of the pooled output: sum of dims of the features whose
 * combiner is not NONE. */
EMBER_API int64_t ember_pooled_width(const ember_collection *coll);

/* Floats of the sequence output for this batch: sum over NONE features of
 * (ids of that feature) * dim. */
EMBER_API int64_t ember_sequence_size(const ember_collection *coll, const ember_batch *batch);

/*
 * Forward: validate and route the batch, look up and pool.
 *   for b in samples: for f in features (config order), combiner != NONE:
 *       pooled[b*W + col(f) ..+dim(f)] = combiner over the bag (f, b)
 *   for f with combiner NONE, for each id i of f in batch order:
 *       sequence[seq_off(f) + i*dim(f) ..+dim(f)] = w_i * row(id_i)
 * W = ember_pooled_width(); col(f) = sum of dims of earlier pooled features;
 * seq_off(f) = floats of earlier NONE features.  sequence may be NULL when no
 * feature has combiner NONE.  The routed batch is kept for ember_backward.
 * Errors: EMBER_EINPUT (names feature, sample, id; a negative length, a
 * lengths sum != num_ids, an id outside [0, rows) under bounds=error, a
 * non-finite weight), EMBER_ELIMIT (also: an SSD table's cache cannot hold
 * the batch's distinct rows at once; names the table, needed and allowed
 * bytes), EMBER_ENUMERIC, EMBER_EIO (an SSD table's store file failed: names
 * table, file and row).  Tables never change.
 */
EMBER_API int ember_forward(ember_collection *coll, const ember_batch *batch, float *pooled,
                  float *sequence);

/*
 * The forward in two calls, so that the next batch's exchanges run while
 * the caller works on the current one (docs/distributed.md, "Schedules"):
 *
 *   ember_forward(c, b0, p0, NULL);           // or begin + end
 *   for i = 0, 1, ...:
 *       ember_forward_begin(c, b[i+1], p1, NULL); // routed, exchanges begun
 *       dense forward and backward of batch i on p0,
 *           calling ember_forward_progress(c) now and then
 *       ember_backward(c, d0, NULL);          // batch i's update
 *       ember_forward_end(c);                 // p1 holds batch i+1's outputs
 *       swap(p0, p1)
 *
 * begin validates and routes the batch, agrees over the world, and does
 * what the collection's schedule says (ember_schedule); its output buffers
 * belong to the call until end returns.  Between them the current batch
 * (the last one ended, or the last ember_forward) is still the one
 * ember_backward updates; end makes the begun batch current.  With
 * BLOCKING and OVERLAP the outputs are those of ember_forward called at
 * end, bit-identical (lookups run at end, after the backward).  With STALE
 * they are looked up at begin: a row the backward between updates is read
 * as it was before, so batch i+1 sees the tables after batch i-1's update.
 * Both calls are collective.  Errors as ember_forward's, and EMBER_EINVAL
 * for a collection with a dynamic table (its keys become rows inside
 * ember_forward itself).  A failed begin leaves nothing begun and the
 * current batch as it was; a failed end leaves no current batch (backward
 * answers EMBER_ESTATE).  EMBER_ESTATE: begin while a batch is begun, end
 * without one, ember_forward while one is begun.  Destroying the collection
 * with a batch begun completes its exchanges first.  Tables never change.
 */
EMBER_API int ember_forward_begin(ember_collection *coll, const ember_batch *batch, float *pooled, float *sequence);
/* Drives the begun batch's exchanges on (MPI_Test); cheap, collective-free,
 * a no-op without a begun batch.  EMBER_ECOMM when MPI fails. */
EMBER_API int ember_forward_progress(ember_collection *coll);
EMBER_API int ember_forward_end(ember_collection *coll);

/*
 * Every table's learning rate is multiplied by `scale` from the next
 * ember_backward on (1, the default: as configured; Adam's step and weight
 * decay follow the scaled rate): the hook for warm-up and decay schedules,
 * which a caller computes per step.  Local (every rank sets the same).
 * EMBER_EINVAL for a negative or non-finite scale.
 */
EMBER_API int ember_set_lr_scale(ember_collection *coll, float scale);

/*
 * Hot rows (ember_table_config.hot_rows; docs/distributed.md, "Hot rows").
 * ember_set_hot_rows makes ids[0..count) (count <= hot_rows, every rank the
 * same list) table's hot rows, replacing its earlier ones;
 * ember_refresh_hot_rows makes every such table's hot rows the hot_rows ids
 * used most since the last refresh (counted by the forwards; ties to the
 * lower id).  Both are collective, copy the rows' values and state from
 * their owners, and change no result: the outputs and tables are those
 * without hot rows, bit for bit.  A world of one has nothing to copy: both
 * then only check their arguments.  EMBER_ESTATE between a forward and its
 * backward or while a batch is begun; EMBER_EINVAL for a table without hot
 * rows, too many ids, an id out of range.
 */
EMBER_API int ember_set_hot_rows(ember_collection *coll, int32_t table, const int64_t *ids, int64_t count);
EMBER_API int ember_refresh_hot_rows(ember_collection *coll);

/*
 * Limits that follow the data (docs/adaptive.md).  ember_limits_observe(coll, 1)
 * makes every forward count its batch as the per-partition limits count it
 * (per table and partition row % num_shards: a bag's distinct ids, before
 * any is dropped or split); 0 stops it.  Each batch's record is queued
 * when its forward is done; ember_limits_observed takes the oldest
 * max_batches of them (<= 0: all) and fills out[4 * num_tables]: per table
 * t, out[4t] and out[4t+1] the most ids and unique ids one partition had in
 * one of those batches, out[4t+2] and out[4t+3] the ids and unique ids over
 * the table's limits then, summed over partitions and batches (*batches:
 * how many it took; may be NULL; out NULL: they are dropped).  One batch per step gives the same
 * figures per step whatever the schedule (overlap ends the next batch's
 * forward inside a step).  Local: this rank's share of each batch.
 * ember_set_limits sets a table's two limits (0: none; the policy stays)
 * for the batches routed from then on; local: every rank sets the same.
 * EMBER_ESTATE while a batch is begun (observe, set) or with observation
 * off (observed); EMBER_EINVAL for a bad table or a negative limit.
 */
EMBER_API int ember_limits_observe(ember_collection *coll, int on);
EMBER_API int ember_limits_observed(ember_collection *coll, int64_t max_batches, int64_t *out, int64_t *batches);
EMBER_API int ember_set_limits(ember_collection *coll, int32_t table, int64_t max_ids, int64_t max_unique);

/*
 * Backward with the fused optimizer, for the batch of the last forward.
 *   for each table row r touched by that batch (ids dropped by a limit or by
 *   bounds=drop do not count):
 *       g = sum, over the batch's occurrences (b, f, i) of r in sample order
 *           (sample, then feature in config order, then position), of
 *           w_i * scale(f, b) * d_out(b, f, i)
 *       optimizer(r, g)                       (see ember_optimizer)
 * scale = 1 for SUM and NONE, 1/sum(w) for MEAN, 1/sqrt(sum(w^2)) for SQRTN;
 * d_out is the slice of d_pooled (or d_sequence for NONE features) that
 * forward wrote for that occurrence.  Sums run in that fixed order, so the
 * result is bit-identical for any thread count.  With cfg.dedup, repeated
 * ids of a bag were merged by forward (weights summed), so each merged
 * entry is one term of that sum: equal to the unmerged sum up to float
 * rounding, and still bit-identical for any thread count.
 * Errors: EMBER_ESTATE (no forward since the last backward), EMBER_ENUMERIC
 * (debug checks: names table, row, feature, sample); tables unchanged then.
 */
EMBER_API int ember_backward(ember_collection *coll, const float *d_pooled, const float *d_sequence);

/*
 * Announces a batch that a later ember_forward / ember_backward will train
 * on: the next one after those already announced (lookahead,
 * docs/tiers.md).  Each SSD table with policy LOOKAHEAD maps the batch's
 * ids to its rows now and reads the missing ones in the background while
 * the caller computes; a row an announced batch needs is evicted only when
 * nothing else can go, farthest next use first.  A dynamic table's keys are
 * looked up in their owner's key map, find only (nothing admitted, counted
 * or marked used): a key that holds a slot announces it, a key without a
 * row is skipped.  A training loop announces batch i + lookahead after
 * ember_forward of batch i; the window holds `lookahead` batches and later
 * announcements are ignored (counted in ember_tier_stats.ignored_hints).
 * The window moves on with each ember_backward; a forward without backward
 * (evaluation) does not move it.  It is a hint: it changes which rows are
 * cached, never a result (a slot announced and then given to another key
 * before its step only wastes a read); invalid ids are skipped here
 * (ember_forward reports them).  Without lookahead tables it does nothing.
 * Collective in a world of W > 1.
 * Errors: EMBER_EINPUT (lengths that do not add up), EMBER_EIO (a background
 * write-back of an earlier announcement failed; nothing was lost),
 * EMBER_ENOMEM, EMBER_ECOMM.
 */
EMBER_API int ember_prefetch(ember_collection *coll, const ember_batch *batch);
/* How many batches ahead ember_prefetch wants to hear of: the collection's
 * lookahead when it has an SSD table with policy LOOKAHEAD, else 0 (then
 * ember_prefetch does nothing).  With lookahead_max, the window of now,
 * which each ember_backward may move (grown or shrunk every 8 steps, from
 * the counts of every rank): a loop announces the batches up to the
 * current step + this.  ember_prefetch_depth_max: the most it can be (a
 * loop's read-ahead).  The same on every rank. */
EMBER_API int32_t ember_prefetch_depth(const ember_collection *coll);
EMBER_API int32_t ember_prefetch_depth_max(const ember_collection *coll);

/* ------------------------------------------------------ routing statistics */

/*
 * Observed per-partition counts for one batch, without lookup (the algorithm
 * of SparseCore's limit calculation): bags to COO, per-sample dedup of (sample, id) within each
 * feature (always, whatever cfg.dedup says), then for every remaining entry
 * of table t the shard s = physical_row % num_shards, where physical_row is
 * the id plus the table's offset inside its stacked table;
 *   ids[t * num_shards + s]    += 1
 *   unique[t * num_shards + s] += 1 the first time that id is seen there.
 * A dynamic table's keys are counted by destination: s = mix64(key) mod
 * num_shards (its owner when num_shards is the world size), unique = its
 * distinct keys there.
 * Both arrays hold num_tables * num_shards counts.  Invalid ids are an error
 * (EMBER_EINPUT) whatever the bounds policy.  Counts are of this rank's
 * batch only (not collective).  It reuses the routing buffers,
 * so it cancels a pending forward: call it before ember_forward or after
 * ember_backward (a backward in between returns EMBER_ESTATE).
 */
EMBER_API int ember_partition_counts(ember_collection *coll, const ember_batch *batch, int64_t *ids,
                           int64_t *unique);

typedef struct ember_stats {
    int64_t steps;            /* completed ember_backward calls                */
    int64_t dropped_bounds;   /* ids skipped under bounds=drop, all batches    */
    int64_t dropped_limit;    /* ids dropped under limit policy drop           */
    int64_t minibatches;      /* mini-batches of the last forward (1 = none)   */
    int64_t last_ids;         /* ids of the last forward's batch that passed
                                 validation (num_ids - dropped under bounds)   */
    int64_t last_unique_rows; /* distinct rows the last backward updated on
                                 this rank; 0 after a forward until its
                                 backward runs                                 */
    int64_t last_bytes_sent;  /* bytes this rank sent to other ranks in the
                                 last forward and backward (payload only,
                                 dynamic tables' key exchange included; the
                                 few bytes of error agreement excluded)        */
    int64_t last_bytes_received;
    double last_comm_seconds; /* wall time inside exchanges, same span       */
    int64_t clipped_values;   /* gradient elements clip_value clipped, and   */
    int64_t clipped_rows;     /* row gradients clip_norm scaled, in every
                                 backward so far, on this rank (each rank
                                 counts the rows it updates)                 */
} ember_stats;
EMBER_API void ember_collection_stats(const ember_collection *coll, ember_stats *out);

/* ------------------------------------------------------------- SSD tier */

/*
 * Counters of one SSD table on this rank since its collection was created
 * (docs/tiers.md).  An access is a distinct row of one step (pinned by the
 * forward); a load brings a row into the cache: read from the store file,
 * or computed by the initializer when it was never written.
 *   hit rate = 1 - (demand_loads + prefetch_used) / accesses
 * so a row read ahead for an announced batch counts, at its use, as a miss
 * that did not stall; a row read ahead and evicted before its use is a
 * wasted load (prefetch_wasted), extra I/O but no miss.
 */
typedef struct ember_tier_stats {
    int64_t cache_rows;      /* slots of the cache                           */
    int64_t resident_rows;   /* rows cached now                               */
    int64_t dirty_rows;      /* of those, changed since last written          */
    int64_t accesses;
    int64_t demand_loads;    /* loaded while a step waited                   */
    int64_t prefetch_loads;  /* loaded in the background (lookahead)         */
    int64_t init_loads;      /* loads that were never-written rows (no read) */
    int64_t evictions;
    int64_t writes;          /* rows written back (eviction, flush, release):
                                appended to the store's log               */
    int64_t bytes_read, bytes_written; /* of rows read, written back     */
    int64_t ignored_hints;   /* announced batches past the lookahead window  */
    double wait_seconds;     /* steps waiting for background reads           */
    double io_seconds;       /* steps doing synchronous reads and writes     */
    int64_t prefetch_used;   /* prefetched rows a step then used             */
    int64_t prefetch_wasted; /* prefetched rows evicted before any use       */
    int64_t reads;           /* read requests to the store file              */
    int64_t segment_writes;  /* segments the log wrote (sequential writes)   */
    int64_t file_bytes_written; /* their bytes: rows written back, rows moved
                                by compaction, segment footers           */
    int64_t moved_rows;      /* rows compaction moved (written again)        */
    int64_t cold_reloads;    /* lookahead: loads of rows evicted within the
                                last 64 steps while no announced batch used
                                them (a longer window would have known),
                                estimated on a sample of the rows          */
} ember_tier_stats;

/* Counters of the SSD store holding table t on this rank (a stacked table
 * shares its physical table's store and counters).  EMBER_EINVAL for a bad
 * table or a table in the memory tier.  Not collective. */
EMBER_API int ember_table_tier_stats(const ember_collection *coll, int32_t table, ember_tier_stats *out);
/* The same summed over every SSD store of this rank (each physical table
 * once); the number of such stores is returned (0: no SSD table here). */
EMBER_API int32_t ember_collection_tier_stats(const ember_collection *coll, ember_tier_stats *out);

/* --------------------------------------------------------- dynamic tables */

/*
 * Counters of one dynamic table on this rank (docs/dynamic.md).  Not
 * collective.  A key's use count is its occurrences in training batches
 * since it was first seen (the sketch's estimate before it was admitted).
 */
typedef struct ember_dynamic_stats {
    int64_t capacity;          /* rows of this rank                           */
    int64_t resident;          /* keys holding a row now                      */
    int64_t admitted;          /* keys given a row, since creation             */
    int64_t evicted;           /* rows freed to make room for a new key        */
    int64_t expired;           /* rows freed by TTL or ember_dynamic_evict     */
    int64_t evicted_count_sum; /* use counts of the keys freed (both kinds)    */
    int64_t not_admitted;      /* ids of training batches that read zeros      */
    int64_t last_evicted;      /* keys freed by the last training forward (or
                                  ember_dynamic_evict): ember_dynamic_evicted  */
    int64_t index_bytes;       /* key map, metadata and victims in DRAM        */
    int64_t sketch_bytes;      /* admission sketch                             */
} ember_dynamic_stats;
/* DRAM bytes per rank of a dynamic table of this config (its capacity, or
 * the capacity capacity_bytes holds): rows and optimizer state (encoded
 * rows, rows_encoding: their row bytes, no state), plus per row
 * the key map (16 bytes a bucket at load <= 0.9, a power of two), 24 of
 * metadata (key, last step, use count, generation, pin), 1 bit of free map,
 * the victims (LRU, TTL: 16 of age queue + 1 bit; LFU: 32 of heap; NONE:
 * 0), plus the sketch.  0 when the
 * config is not a valid dynamic table.  What ember_collection_memory counts. */
EMBER_API int64_t ember_dynamic_bytes(const ember_table_config *t);

/* EMBER_EINVAL for a bad or non-dynamic table. */
EMBER_API int ember_table_dynamic_stats(const ember_collection *coll, int32_t table, ember_dynamic_stats *out);

/* The keys this rank freed in the last training forward (or the last
 * ember_dynamic_evict) and their use counts, in the order they were freed:
 * copies min(max, *n) of them; *n = how many there are.  Not collective. */
EMBER_API int ember_dynamic_evicted(const ember_collection *coll, int32_t table, int64_t max, int64_t *keys,
                          int64_t *counts, int64_t *n);

/* Frees, on this rank, every row of the table not used in the last
 * idle_steps training steps (0: every row); *freed = how many (may be
 * NULL).  Not collective: each rank frees its own rows by the same rule. */
EMBER_API int ember_dynamic_evict(ember_collection *coll, int32_t table, int64_t idle_steps, int64_t *freed);

/* The keys that hold a row on this rank, ascending: *n = how many; the keys
 * are copied only when max >= *n.  Not collective. */
EMBER_API int ember_dynamic_keys(const ember_collection *coll, int32_t table, int64_t max, int64_t *keys, int64_t *n);

/* Rows by key: for each keys[i], found[i] = 1 and its row (dim floats at
 * values + i * dim) and optimizer state (ember_state_floats floats at state
 * + i * that) when it holds a row, else found[i] = 0 and zeros.  Any of
 * values, state, found may be NULL.  Collective like ember_table_read:
 * every rank passes the same keys and gets every answer.  Nothing changes
 * (no use is counted). */
EMBER_API int ember_dynamic_read(const ember_collection *coll, int32_t table, const int64_t *keys, int64_t n, float *values,
                       float *state, int8_t *found);

/* Training (1, the default) or evaluation (0).  In evaluation a forward
 * only looks keys up: no key is counted, admitted or evicted and no row's
 * last use changes, so evaluating on held-out data leaves the dynamic
 * tables as they were.  Fixed tables behave the same in both. */
EMBER_API int ember_collection_set_training(ember_collection *coll, int training);

/* ------------------------------------------------------------------ memory */

typedef struct ember_memory {
    int64_t row_bytes;       /* table values in DRAM (SSD tier: cached rows)   */
    int64_t state_bytes;     /* optimizer state in DRAM (SSD: cached rows)     */
    int64_t workspace_bytes; /* routing and kernel buffers (grow-only)         */
    int32_t physical_tables; /* after stacking                                 */
    int64_t cache_meta_bytes; /* SSD tier: cache bookkeeping in DRAM           */
    int64_t disk_bytes;      /* SSD tier: bytes of this rank's store files     */
    int64_t index_bytes;     /* dynamic tables: key maps, row metadata, victim
                                heaps and admission sketches                 */
} ember_memory;
EMBER_API void ember_collection_memory(const ember_collection *coll, ember_memory *out);

/* ------------------------------------------------------------ row access */

/* Copies rows [first, first+count) of table t (dim floats each) into out.
 * In a world of W > 1 the three row calls are collective: every rank calls
 * with the same arguments; a read returns the whole rows on every rank (each
 * part from the rank that holds it), a write stores on each rank the parts
 * it holds.  Errors: EMBER_EINVAL for a bad table or range. */
EMBER_API int ember_table_read(const ember_collection *coll, int32_t table, int64_t first, int64_t count,
                     float *out);
/* Overwrites rows [first, first+count) of table t from in (for tests, loading
 * and serving).  Optimizer state is not touched.  A table of encoded rows
 * encodes each row; EMBER_EINPUT (the table and row named, nothing
 * written) when a row holds a value fp16 cannot (not finite, |x| > 65504). */
EMBER_API int ember_table_write(ember_collection *coll, int32_t table, int64_t first, int64_t count,
                      const float *in);
/* Copies the optimizer state of rows [first, first+count): floats per row are
 * ember_state_floats(kind, dim) (0 SGD, dim ADAGRAD, 1 ROWWISE, 2*dim ADAM:
 * m then v, dim MOMENTUM: b, 2*dim FTRL: z then n, dim + 1 ROWWISE_ADAM: m
 * then v, 2*dim LAMB: m then v, dim LARS: b). */
EMBER_API int ember_table_read_state(const ember_collection *coll, int32_t table, int64_t first,
                           int64_t count, float *out);
EMBER_API int32_t ember_state_floats(ember_optimizer_kind kind, int32_t dim);
/* Overwrites the optimizer state of rows [first, first+count) from in (the
 * layout of ember_table_read_state); values are not touched. */
EMBER_API int ember_table_write_state(ember_collection *coll, int32_t table, int64_t first, int64_t count,
                            const float *in);

/* The world the collection was created over (never NULL). */
EMBER_API ember_world *ember_collection_world(const ember_collection *coll);

/* Changes the OpenMP thread count used by later calls (>= 1, or 0 for
 * omp_get_max_threads()).  Results do not depend on it. */
EMBER_API int ember_collection_set_threads(ember_collection *coll, int32_t threads);

/* ------------------------------------------------------- synthetic batches */

/*
 * Drifting ids (docs/adaptive.md, "Drifting ids"): every `drift_every` batches
 * (an epoch e = batch number / drift_every) the law moves.
 *   EMBER_DRIFT_ROTATE  rank k is drawn as rank ((k-1 + e*drift_rows) mod rows)
 *                       + 1: the hot set moves drift_rows ranks down the table
 *   EMBER_DRIFT_GROW    the ranks are drawn from the first
 *                       min(rows, drift_start + e*drift_rows) (drift_start
 *                       0: drift_rows): new ids join each epoch
 */
typedef enum ember_drift { EMBER_DRIFT_NONE = 0, EMBER_DRIFT_ROTATE = 1, EMBER_DRIFT_GROW = 2 } ember_drift;

/*
 * The benchmark workloads' input (docs/PERFORMANCE.md), the distribution of
 * the PyTorch peer: `tables` tables of `rows` rows,
 * one feature per table, every bag exactly `pooling` ids.  zipf: bounded
 * Zipf(alpha) over ranks 1..rows by rejection-inversion, rank k mapped to row
 * ((k-1) * 2654435761) % rows; otherwise uniform over rows (with a drift:
 * uniform over the epoch's ranks, mapped the same way).  Deterministic
 * from seed.
 */
typedef struct ember_synth_config {
    int32_t tables;
    int64_t rows;
    int32_t batch_size;
    int32_t pooling;
    int zipf;      /* 1: Zipf(alpha), 0: uniform                               */
    double alpha;  /* default 1.05                                             */
    int weighted;  /* 1: also draw a weight in [0.5, 1.5) per id               */
    uint64_t seed;
    ember_drift drift;     /* EMBER_DRIFT_NONE (default): the law stays        */
    int64_t drift_every;   /* batches per epoch, >= 1 with a drift             */
    int64_t drift_rows;    /* ranks per epoch (rotate: the shift; grow: added) */
    int32_t drift_tables;  /* the first this many tables drift; 0: all         */
    int64_t drift_start;   /* grow: ranks of epoch 0; 0: drift_rows            */
} ember_synth_config;
EMBER_API ember_synth_config ember_synth_config_default(void);

typedef struct ember_synth ember_synth;
EMBER_API int ember_synth_create(const ember_synth_config *cfg, ember_synth **out);
/* Fills *batch with the next batch; its arrays stay valid until the next call
 * on s or its destroy. */
EMBER_API int ember_synth_next(ember_synth *s, ember_batch *batch);
EMBER_API void ember_synth_destroy(ember_synth *s);

/* ------------------------------------------------------------ batch files */

/* A file of sparse batches, described in docs/batch-format.md: a header that
 * names the tables (rows) and the features (table of each), then batches.
 * Readers check magic, version and every count, and name the file, the batch
 * and the field at fault (EMBER_EFORMAT, EMBER_EIO). */
typedef struct ember_batch_file_info {
    int32_t num_tables;
    const int64_t *table_rows;     /* [num_tables]                             */
    int32_t num_features;
    const int32_t *feature_table;  /* [num_features]                           */
} ember_batch_file_info;

typedef struct ember_batch_writer ember_batch_writer;
EMBER_API int ember_batch_writer_create(const char *path, const ember_batch_file_info *info,
                              ember_batch_writer **out);
EMBER_API int ember_batch_writer_append(ember_batch_writer *w, const ember_batch *batch);
/* Flushes, fsyncs and closes; the file appears under path only on success
 * (written to path.tmp, then renamed). */
EMBER_API int ember_batch_writer_close(ember_batch_writer *w);
EMBER_API void ember_batch_writer_destroy(ember_batch_writer *w); /* abandons an unclosed file */

typedef struct ember_batch_reader ember_batch_reader;
EMBER_API int ember_batch_reader_open(const char *path, ember_batch_reader **out);
/* Valid until the reader is destroyed. */
EMBER_API const ember_batch_file_info *ember_batch_reader_info(const ember_batch_reader *r);
/* 1 and *batch filled (valid until the next call), 0 at the end, or < 0. */
EMBER_API int ember_batch_reader_next(ember_batch_reader *r, ember_batch *batch);
EMBER_API void ember_batch_reader_destroy(ember_batch_reader *r);

/* ----------------------------------------------------------- names, sizes */

/* The names config files, checkpoint manifests and the `ember` tool use
 * for the values of the enums above ("row", "rowwise_adagrad", "lookahead",
 * "stale", ...): static strings, "?" for a value out of range.  A program
 * reading a name back compares it with these. */
EMBER_API const char *ember_placement_name(ember_placement p);      /* row column table replicated  */
EMBER_API const char *ember_exchange_name(ember_exchange x);        /* rows pooled                  */
EMBER_API const char *ember_optimizer_name(ember_optimizer_kind k); /* sgd adagrad rowwise_adagrad adam momentum ftrl
                                                                       rowwise_adam lamb lars */
EMBER_API const char *ember_init_name(ember_init_kind k);           /* uniform normal zeros constant */
EMBER_API const char *ember_evict_name(ember_evict_policy e);       /* lru lfu ttl none             */
EMBER_API const char *ember_storage_name(ember_storage s);          /* auto memory ssd              */
EMBER_API const char *ember_cache_policy_name(ember_cache_policy p);/* default lru lfu lookahead    */
EMBER_API const char *ember_schedule_name(ember_schedule s);        /* blocking overlap stale       */
EMBER_API const char *ember_precision_name(ember_row_precision p);  /* fp32 fp16 bf16               */
EMBER_API const char *ember_rounding_name(ember_rounding r);        /* stochastic nearest           */
EMBER_API const char *ember_drift_name(ember_drift d);              /* none rotate grow             */

/* A size as config files write it (docs/config.md): a number, optionally
 * a unit K, M, G, T or P (powers of 1024, "iB" or "B" after it allowed),
 * or B:
 *   bytes = round(number * unit);  "64G" -> 68719476736, "512 MiB", "1.5K"
 * 0 and *out, or -1 (nothing set) for anything else, a negative number or
 * more than 9e18 bytes. */
EMBER_API int ember_parse_bytes(const char *text, int64_t *out);
/* Bytes in binary units as ember's messages and reports write them
 * ("512 B", "1.50 KiB", "64.0 GiB"): into buf (n bytes), which is
 * returned. */
EMBER_API const char *ember_format_bytes(double bytes, char *buf, size_t n);

/* ------------------------------------------------------------ file outputs */

/*
 * A file a program writes the way ember writes its own (docs/RELIABILITY.md,
 * "Files ember writes"): the `ember` tool's metrics, plots and scores.
 *   open(path):  the folder of path is opened once; a name that exists as
 *                a link, folder, device or FIFO is refused, and so is
 *                anything at path.tmp; nothing appears at path yet
 *   write ...:   every write is checked; the first failure is kept
 *   commit:      flush, fsync, then the file takes the name path by rename
 *                (a regular file there is replaced, never written through)
 *                and the folder is fsynced
 *   abort:       nothing is left at path (or what was there before stays)
 * flags: EMBER_OUTPUT_APPEND starts from the bytes of the regular file at
 * path, if there is one.  Errors: EMBER_EIO (EMBER_EINVAL for a path that
 * names no file: "", "dir/", "."), with ember_errmsg(o) (after open and
 * commit, which leave no handle: ember_errmsg(NULL)) naming the file and
 * the system's reason.  An output is used by one thread at a time.
 */
typedef struct ember_output ember_output;
#define EMBER_OUTPUT_APPEND 1
EMBER_API int ember_output_open(const char *path, int flags, ember_output **out);
/* Writes all n bytes: 0, or EMBER_EIO (the reason is kept for the commit). */
EMBER_API int ember_output_write(ember_output *o, const void *data, int64_t n);
/* A stdio stream on the output (NULL when out of memory): its bytes go
 * through ember_output_write, so every failure is found by the commit.
 * Valid until commit or abort, which close it. */
EMBER_API FILE *ember_output_stdio(ember_output *o);
/* Flushes the stream: 0, or EMBER_EIO for the first failed write (which
 * the commit reports too), ember_errmsg(o) naming the file and the reason. */
EMBER_API int ember_output_flush(ember_output *o);
/* Names the output at path now, before it is complete: for a log read
 * while it grows (the metrics of a run).  A failed commit or an abort then
 * takes it back: to the bytes it began with (APPEND), else the name goes. */
EMBER_API int ember_output_publish(ember_output *o);
/* Flushes, fsyncs, publishes at path and fsyncs the folder; on any failure
 * the output is removed and ember_errmsg(NULL) says why.  Frees o either
 * way (NULL: EMBER_OK). */
EMBER_API int ember_output_commit(ember_output *o);
/* Drops the output: nothing is published, nothing is left.  Frees o;
 * accepts NULL. */
EMBER_API void ember_output_abort(ember_output *o);

/* -------------------------------------------------------------- prediction */

/*
 * A predictor scores samples with a model trained by `ember train`
 * (docs/inference.md).  It opens a checkpoint (the newest under a root, or
 * one step-* folder) or an inference bundle (ember_bundle_write), builds
 * the collection and the dense model from its model description, loads the
 * tables at this world's size (any size: a checkpoint reshards, a bundle's
 * rows go where they belong, kept encoded where the table allows it; a
 * dynamic table's keys go to their owners, mix64(key) mod world) and the
 * dense parameters.  Nothing is declared by the caller.
 *
 *   scores[s] = sigmoid(dense model(dense[s], pooled embeddings of sample s))
 *
 * computed exactly as the trainer's own evaluation: the same forward, the
 * dense model run in chunks of the trainer's micro-batch, one BLAS thread,
 * so a checkpoint's (and an fp32 bundle's) scores are bit-identical to the
 * ones `ember train` evaluated; a quantized bundle scores its decoded rows.
 * Predictions admit and evict no dynamic key: a key the table does not hold
 * reads a zero row, which still counts in mean and sqrtn divisors (the
 * trainer's evaluation does the same), from a checkpoint or a bundle.
 *
 * Open and score are collective over the world (options.world; NULL: a
 * world of one): every rank calls them, each with its own samples.  Open's
 * errors, agreed over the world: EMBER_EIO, EMBER_EFORMAT, EMBER_ECORRUPT
 * (the checkpoint; a checkpoint without a model description is named),
 * EMBER_ENOMEM, or the collection's own; detail in ember_errmsg(NULL).
 * Score: EMBER_EINVAL for arguments that do not fit the model (that rank
 * alone; it still takes part in the exchange with no samples), or
 * ember_forward's errors; detail in ember_errmsg(p).
 */
typedef struct ember_predictor ember_predictor;
typedef struct ember_predictor_options {
    ember_world *world; /* NULL: a world of one                                */
    int32_t threads;    /* OpenMP threads for the embedding work; 0: 1          */
} ember_predictor_options;
EMBER_API int ember_predictor_open(const char *path, const ember_predictor_options *options, ember_predictor **out);
EMBER_API void ember_predictor_close(ember_predictor *p);
/* The model's collection (tables and features; names valid until close) and
 * its dense features per sample. */
EMBER_API const ember_collection_config *ember_predictor_config(const ember_predictor *p);
EMBER_API int32_t ember_predictor_num_dense(const ember_predictor *p);
/* dense [batch_size][num_dense]; sparse as ember_forward's batch (the
 * model's features, in order); scores [batch_size]. */
EMBER_API int ember_predictor_score(ember_predictor *p, int32_t batch_size, const float *dense, const ember_batch *sparse,
                          float *scores);

/*
 * `ember predict`: a model scores every sample of a data file.
 *   predictor = ember_predictor_open(model, {world, threads})
 *   data      = "synthetic": the held-out stream of the built-in task the
 *               model was trained on; else a file, ember's binary format by
 *               its first bytes, else Criteo TSV hashed into the model's
 *               rows (bad lines skipped); its features checked against
 *               the model's input
 *   scores    = ember_predictor_score over each rank's share of the data,
 *               in calls of the model's evaluation batch (at the training
 *               world size, the trainer's evaluation scores bit for bit);
 *               the first `samples` of the data (0: all of a file, 65536
 *               of the synthetic stream)
 *   out       = the scores gathered on rank 0 in data order, written to
 *               c->out (when not NULL) by ember_output's rule: float32
 *               little-endian; with tsv "index\tscore\tlabel" lines
 *               ("%lld\t%.9g\t%g"); with csv a header line, then
 *               "id,score,label" lines, the id the sample's line in a text
 *               file (from 1; a binary file's or the stream's sample index
 *               from 0), or with c->id that column's field of the line (a
 *               text file's column, by name: any header field, or any
 *               schema column of a headerless file), quoted as CSV needs.
 *               A text file without the label column (the header lacks
 *               it, or a headerless file's lines have one field fewer) is
 *               scored unlabeled: no label in the lines, no AUC
 *   result    = samples, AUC and log loss against the data's labels, the
 *               seconds of the whole call, the tables' bytes over the
 *               world, the largest process's peak RSS
 * The output is opened before scoring: a path that cannot take it fails
 * at once, and nothing is at its name until every score is written.
 * Collective over c->world; failures are agreed and the result is the same
 * on every rank.  Errors, detail in ember_errmsg(NULL) (a failure one rank
 * saw names it: "rank R: ..."): the predictor's, EMBER_EINVAL (data that
 * does not fit the model, "synthetic" for a model not trained on it),
 * EMBER_EIO, EMBER_ENOMEM, ember_predictor_score's; and EMBER_EIO after
 * scoring when the scores could not be written: *out is then filled
 * (scored 1), its out NULL.  Start from ember_predict_config_default(): a
 * zeroed config stops at a text file's first bad line.
 */
typedef struct ember_predict_config {
    const char *out;      /* the scores' file; NULL: none                    */
    int tsv;              /* 0 (default): float32; 1: text lines              */
    int64_t samples;      /* 0 (default): as above                           */
    int32_t threads;      /* embedding threads per rank; default 1            */
    ember_world *world;   /* NULL: a world of one                            */
    int csv;              /* 1: the CSV lines above (tsv must be 0)           */
    const char *id;       /* csv: the column naming each score; NULL: the line */
    double max_bad_fraction; /* text files: bad lines (skipped) above this share
                             of the lines read stop the call, naming the first
                             (judged as training judges them: docs/data.md,
                             "Bad lines"); default 0.01; 1: no limit        */
} ember_predict_config;
EMBER_API ember_predict_config ember_predict_config_default(void);

typedef struct ember_prediction {
    int64_t samples;      /* scored                                          */
    double auc, logloss;  /* NaN without samples or labels                   */
    int labeled;          /* 0: the data had no labels                       */
    int64_t bad_lines;    /* text lines skipped, over the world              */
    double seconds;       /* the whole call                                  */
    int32_t world;
    int64_t table_bytes;  /* rows held, summed over ranks                    */
    double peak_rss_mb;   /* the largest process's peak resident memory      */
    const char *out;      /* c->out when the scores were written, else NULL  */
    int scored;           /* 1: every sample was scored (the fields above
                             hold, even when writing failed)                */
} ember_prediction;
EMBER_API int ember_predict(const char *model, const char *data, const ember_predict_config *c, ember_prediction *out);
/* The result as one line of JSON, the way the trainer's events are written
 * (`ember predict --json`): {"event":"predict","samples","auc","logloss",
 * "seconds" (to the ms),"world","table_bytes","peak_rss_mb" (to 0.1),
 * "out" ("" none)}; reals with 8 significant digits, NaN as null.  free()
 * it; NULL out of memory. */
EMBER_API char *ember_prediction_json(const ember_prediction *p);

/* Writes an inference bundle (docs/inference.md, "Bundles") from a
 * checkpoint of `ember train`: every table's rows encoded row-wise as
 * `quantize` ("fp32", "fp16", "int8" or "int4"; per_table entries
 * "NAME=ENCODING" override it for some tables; a dynamic table as the keys
 * that hold a row, ascending, and their rows), the dense parameters and
 * the model description, each file checksummed (XXH3-64), published
 * atomically as the folder `out` (which must not exist).  A predictor
 * opens a bundle as it opens a checkpoint, at any world size.  Local (one
 * process: it loads every row).  Errors: the checkpoint's, EMBER_EINVAL
 * (bad encodings, an unknown table, out exists), EMBER_EINPUT (a row fp16
 * cannot hold, named by its row or key), EMBER_EIO; detail in
 * ember_errmsg(NULL); nothing is left behind on failure. */
EMBER_API int ember_bundle_write(const char *checkpoint, const char *out, const char *quantize, const char *const *per_table,
                       int32_t num_per_table);

/* ------------------------------------------------------------- checkpoints */

/*
 * A checkpoint root is a folder that holds complete checkpoints, each a
 * folder root/step-<step, 12 digits>/ with manifest.json and one data file
 * per rank of the world that saved it (docs/checkpoint-format.md: magic
 * numbers, version, xxHash checksums of every part).  A checkpoint holds
 * every table's rows, its optimizer state and the collection's optimizer
 * step count, plus the caller's blobs (a trainer's dense model, its data
 * position, its generators' state).
 *
 * Atomic: every rank writes and fsyncs its file under a temporary folder
 * name; when all ranks succeeded, rank 0 writes the manifest, renames the
 * folder to step-<step> and fsyncs the root.  Only folders named step-*
 * with a manifest count; a crash at any moment leaves the previous complete
 * checkpoint loadable, and leftovers are removed by the next save.
 */
typedef struct ember_blob {
    const char *name;  /* [A-Za-z0-9_.-], 1 to 63 characters, unique      */
    const void *data;
    int64_t bytes;
} ember_blob;

typedef struct ember_save_options {
    int64_t step;                 /* names the checkpoint, >= 0; larger is newer  */
    int32_t keep;                 /* complete checkpoints kept, this one included
                                     (older ones are deleted once this one is
                                     complete); 0 keeps all                        */
    const ember_blob *blobs;      /* state that is the same on every rank: saved
                                     once, from rank 0 (the other ranks pass the
                                     same names and sizes; their data is not
                                     read)                                          */
    int32_t num_blobs;
    const ember_blob *rank_blobs; /* this rank's own state (its data position):
                                     saved per rank, same names on every rank       */
    int32_t num_rank_blobs;
} ember_save_options;

/* Saves coll's tables and the blobs as root/step-<opt->step>.  Collective.
 * Creates root if needed; replaces an existing checkpoint of the same step
 * (the new one is complete before the old one goes).  Errors (EMBER_EIO
 * naming the path and the system's reason, EMBER_EINVAL for bad options, or
 * EMBER_ECOMM when another rank failed) leave every complete checkpoint and
 * every table as they were. */
EMBER_API int ember_save(ember_collection *coll, const char *root, const ember_save_options *opt);

typedef struct ember_checkpoint ember_checkpoint;

/* Opens a checkpoint: path is a root (its newest complete checkpoint is
 * taken; if that one does not verify, its error is returned: there is no
 * silent fallback to an older one) or one step-* folder.  Reads the
 * manifest and every data file and verifies magic numbers, version, sizes
 * and checksums; nothing is loaded anywhere (the data files stay mapped
 * read-only until close).  Errors: EMBER_EIO (a missing file or folder, named),
 * EMBER_EFORMAT (bad magic, version or manifest field, named), and
 * EMBER_ECORRUPT (a checksum or size that does not match: the file and the
 * part), with detail in ember_errmsg(NULL).  Not collective: each rank may
 * open the same checkpoint. */
EMBER_API int ember_checkpoint_open(const char *path, ember_checkpoint **out);
EMBER_API void ember_checkpoint_close(ember_checkpoint *ck);
EMBER_API int64_t ember_checkpoint_step(const ember_checkpoint *ck);
EMBER_API int32_t ember_checkpoint_world(const ember_checkpoint *ck);   /* ranks that saved it */
EMBER_API const char *ember_checkpoint_path(const ember_checkpoint *ck); /* the step-* folder  */
/* The tables ck holds, in the order they were saved, and table t's
 * configuration as saved: name (valid until close), kind, rows, dim, init,
 * optimizer, placement, owner and row and state precision; for a dynamic table its capacity per
 * saving rank, admission, eviction and sketch size.  What a checkpoint does
 * not record (limits, exchange, storage, rounding, simulated quantization) is
 * ember_table_config_default()'s.  A collection made of these configs (and
 * its own features) loads ck: nothing needs declaring again.  EMBER_EINVAL
 * when t is out of range or out is NULL. */
EMBER_API int32_t ember_checkpoint_num_tables(const ember_checkpoint *ck);
EMBER_API int ember_checkpoint_table(const ember_checkpoint *ck, int32_t t, ember_table_config *out);
/* A blob saved with ember_save_options.blobs (rank < 0) or rank_blobs of the
 * given saving rank; NULL when absent.  Valid until close. */
EMBER_API const void *ember_checkpoint_blob(const ember_checkpoint *ck, int32_t rank, const char *name,
                                  int64_t *bytes);

/* ------------------------------------------- checkpoints: what they hold */

/* What a checkpoint records besides its tables, for a report (`ember
 * inspect`); valid until close. */
typedef struct ember_checkpoint_summary {
    const char *ember_version;  /* the version that saved it; NULL: not said  */
    uint64_t seed;              /* the collection's initializer seed           */
    int64_t optimizer_steps;
    int32_t num_files;          /* one per saving rank                         */
    int32_t num_blobs;          /* saved once (ember_save_options.blobs)       */
    int32_t num_rank_blobs;     /* saved per rank (rank_blobs)                 */
} ember_checkpoint_summary;
EMBER_API int ember_checkpoint_summarize(const ember_checkpoint *ck, ember_checkpoint_summary *out);
/* File i (= saving rank i): its name in the step folder (valid until
 * close), its bytes and its XXH3-64, all verified at open.  Any of the
 * three may be NULL.  EMBER_EINVAL out of range. */
EMBER_API int ember_checkpoint_file(const ember_checkpoint *ck, int32_t i, const char **name, int64_t *bytes, uint64_t *xxh3);
/* The name of blob i, of the blobs saved once (per_rank 0) or of those
 * saved by every rank (1); NULL out of range.  Valid until close. */
EMBER_API const char *ember_checkpoint_blob_name(const ember_checkpoint *ck, int per_rank, int32_t i);

/*
 * Statistics of table t's rows as saved, streamed a few MiB at a time
 * (the table is never whole in memory), over its canonical rows whatever
 * the saving world and placement:
 *   norm            sqrt(sum over rows and columns of v^2)
 *   mean_row_norm   mean over rows of each row's L2 norm
 *   max_abs         max |v| (NaN when a value is NaN)
 *   untouched_rows  rows equal, bit for bit, to their initial values (the
 *                   initializer of ember_collection_create); -1 for a
 *                   dynamic table (its slots hold keys, not row numbers)
 *   state_norm, state_max_abs   the same over the optimizer state
 *   zero_values, zero_rows      values exactly 0 (either sign), and rows
 *                   whose every value is: the sparsity FTRL's l1 gives
 *   digest          XXH64 over each row's values then its state, in row
 *                   order: independent of the file layout, world and
 *                   placement, so two checkpoints of the same model state
 *                   have the same digests
 * and for a dynamic table its keys over every saving rank.  EMBER_EINVAL
 * (t out of range), EMBER_ENOMEM, or a read's error; detail in
 * ember_errmsg(ck).
 */
typedef struct ember_table_summary {
    int64_t rows;               /* as saved: a dynamic table's slots
                                   (capacity x world)                        */
    int32_t state_floats;       /* per row                                   */
    double norm, mean_row_norm, max_abs;
    int64_t untouched_rows;
    double state_norm, state_max_abs;
    uint64_t digest;
    /* dynamic tables */
    int64_t resident;           /* keys holding a row, every rank            */
    int64_t most_on_a_rank;     /* the fullest rank's                        */
    int64_t admitted, evicted, expired, evicted_count_sum, not_admitted;
    int64_t sketch_width;       /* counters per sketch row (0: no sketch)    */
    int64_t zero_values, zero_rows;
} ember_table_summary;
EMBER_API int ember_checkpoint_table_summary(const ember_checkpoint *ck, int32_t t, ember_table_summary *out);

/* A blob of ck (rank < 0: saved once; else the saving rank's): its bytes
 * (0 when absent) and the XXH64 of them, and, for the blobs `ember train`
 * saves (train.state, dense.params, dense.optim, dense.ranges,
 * data.position), what they hold as a JSON object and as a line of text
 * (both "" for any other). */
typedef struct ember_blob_summary {
    int64_t bytes;
    uint64_t digest;
    char content[512];
    char text[256];
} ember_blob_summary;
EMBER_API int ember_checkpoint_blob_summary(const ember_checkpoint *ck, int32_t rank, const char *name,
                                  ember_blob_summary *out);

/* The dense model of a checkpoint `ember train` saved, whole or in the
 * pieces its pipeline stages saved, read as the one vector of the whole
 * model: its parameters, the optimizer's state floats per parameter, the
 * ranks that saved pieces (0: saved whole), the parameters' L2 norm, and
 * XXH64 digests over the parameters and over the state (vector after
 * vector), so two checkpoints of the same model state have the same
 * digests whatever stages and cuts saved them.  EMBER_EFORMAT when ck has
 * no dense model (not saved by `ember train`) or a malformed one,
 * EMBER_ENOMEM; detail in ember_errmsg(ck). */
typedef struct ember_dense_summary {
    int64_t params;
    int32_t state_floats;
    int32_t pieces;
    double norm;
    uint64_t params_digest, state_digest;
} ember_dense_summary;
EMBER_API int ember_checkpoint_dense_summary(const ember_checkpoint *ck, ember_dense_summary *out);

/* 1 when dir holds an inference bundle (ember_bundle_write), else 0. */
EMBER_API int ember_bundle_is(const char *dir);
/* Verifies every file of the bundle in dir (sizes and XXH3-64 against its
 * manifest) and describes it as one JSON object, *report (free() it):
 *   {"path", "format": "ember-bundle", "version", "tables": [{"name",
 *    "kind" (version 3), "encoding", "rows", "dim", "row_bytes", "file",
 *    "bytes", "xxh3", "keys": {"file", "bytes", "xxh3"} (a dynamic table;
 *    its "rows" are its keys)}, ...],
 *    "dense": {"file", "bytes", "xxh3"}, "verified": true}
 * (the manifest's entries as they are).  Errors: EMBER_EIO, EMBER_EFORMAT,
 * EMBER_ECORRUPT naming the file, EMBER_ENOMEM; detail in
 * ember_errmsg(NULL). */
EMBER_API int ember_bundle_inspect(const char *dir, char **report);

/* Loads ck's tables into coll: rows, optimizer state and optimizer step
 * count, for any world size and any placement of either (resharding).
 * Every table of coll must be in ck under the same name with the same rows,
 * dim and optimizer kind; otherwise EMBER_EINVAL names the table and the
 * field (tables of ck that coll lacks are ignored).  Collective.  On any
 * error no table has changed. */
EMBER_API int ember_load(ember_collection *coll, const ember_checkpoint *ck);

/* Writes one table of ck as (key, row) records for serving, sorted by key
 * (signed): a fixed table every row, its row number the key; a dynamic
 * table every key that holds a row.  The file (docs/checkpoint-format.md,
 * "Exported rows"): a 64-byte header (magic "EMBRROWS", version 1, dim,
 * record count, kind, optimizer steps, XXH64 of the table's name), records
 * of an int64 key and dim floats, then the XXH3-64 of every byte before.
 * Written to path.tmp, fsynced and renamed over path.  Not collective.
 * Errors: EMBER_EINVAL (no such table), EMBER_EIO, EMBER_ENOMEM; detail in
 * ember_errmsg(ck). */
EMBER_API int ember_export(const ember_checkpoint *ck, const char *table, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* EMBER_H */
