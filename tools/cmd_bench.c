/*
 * cmd_bench.c: `ember bench`, the kernel throughput of one workload as JSON
 * lines, shaped like the PyTorch peer benchmark (docs/PERFORMANCE.md) so
 * the two can be put side by side.
 *
 * One measurement is one (optimizer, threads) pair: build a collection (one
 * table and one SUM feature per --tables, uniform init), draw warmup + iters
 * batches with ember_synth before the clock starts (every iteration gets a
 * fresh batch, as the peer does), then time each iteration: ember_forward
 * alone for optimizer none, ember_forward + ember_backward (optimizer fused)
 * against a fixed random d_pooled otherwise.  When the lists name more than
 * one pair, every pair runs in a fresh child (this program re-executed with
 * one pair) so that peak_rss_mb belongs to that measurement alone, and so
 * that only one collection (W3 Adam: 15 GB) exists at a time.  The shape
 * options and presets are synth_args', shared with `ember gen` and
 * `ember limits`; --dim, when not given, is the preset's.
 *
 * Under mpirun -np W (docs/PERFORMANCE.md, "Distributed step"): the global
 * batch stays the workload's; every rank draws the same global batches and
 * keeps its samples [r*B/W, (r+1)*B/W) (batch_slice.h); every table gets
 * --placement (TABLE: owner t % W) and --exchange.  Each timed iteration
 * starts after a barrier (untimed) and its time is the maximum over ranks,
 * so it is the world's step time.  Bytes exchanged are ember_stats'
 * last_bytes_sent/received of every iteration (mean per step; max and sum
 * over ranks), the exchange's time is last_comm_seconds (max over ranks),
 * and the cost model's prediction (src/plan, plan_predict_bytes_sent) is
 * printed beside them.  Several (optimizer, threads) pairs run one after
 * the other in the same processes (a child could not rejoin the MPI job),
 * so peak_rss_mb is then the largest so far.  Only rank 0 prints.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "plan/plan.h" /* the cost model's predicted bytes (library-internal) */
#include "tier/tier.h" /* Belady's offline optimum (library-internal) */
#include "api/batch_slice.h" /* TEMPORARY */
#include "config/config_file.h"
#include "commands.h"
#include "ember.h"
#include "synth_args.h"

#define BENCH_MAX_LIST 16

typedef struct bench_opts {
    synth_args sa;
    ember_synth_config shape;            /* from sa: ids and seed */
    const char *workload;
    int32_t dim;                         /* 0: not given      */
    double lr, max_gb;
    int iters, warmup;
    int num_opt, num_thr;
    const char *opt[BENCH_MAX_LIST];     /* none, sgd, ...    */
    int32_t thr[BENCH_MAX_LIST];
    ember_placement placement;           /* every table's     */
    ember_exchange exchange;
    ember_storage storage;               /* every table's     */
    int64_t cache_bytes;                 /* per table and rank */
    ember_cache_policy policy;
    const char *ssd_dir;
    int belady;                          /* also Belady's hit rate */
    int32_t lookahead;                   /* batches announced ahead */
    int buffered;                        /* store files through the page cache */
    int32_t io_threads;                  /* per SSD table; 0: the collection's */
    int dynamic;                         /* --table-kind dynamic */
    int32_t key_bits;                    /* --key-space: Zipf over 2^bits keys (0: rows) */
    int32_t admit_after;
    ember_evict_policy evict;
    ember_schedule schedule;             /* --schedule */
    int64_t hot_rows;                    /* --hot-rows, every table's */
    double dense_ms;                     /* --dense-ms: the dense model's stand-in */
} bench_opts;

static const char *const EVICT_NAMES[] = {"lru", "lfu", "ttl", "none"};

static const char *const PLACEMENT_NAMES[] = {"row", "column", "table", "replicated"};
static const char *const EXCHANGE_NAMES[] = {"rows", "pooled"};
static const char *const STORAGE_NAMES[] = {"auto", "memory", "ssd"};
static const char *const POLICY_NAMES[] = {"default", "lru", "lfu", "lookahead"};

static void bench_usage(FILE *f)
{
    fprintf(f,
            "usage: ember bench [options]\n"
            "  --preset W1|W2|W3       workload shape (default: 8 x 100000 x 64, batch 1024,\n"
            "                          pooling 20, zipf; a run of seconds)\n"
            "  --workload NAME         name in the JSON 'workload' field\n"
            "  --tables N --rows N --dim N --batch N --pooling N   override the shape\n"
            "  --dist zipf|uniform     id law (zipf: bounded Zipf(alpha), hot rows scattered)\n"
            "  --alpha A               Zipf exponent (1.05)\n"
            "  --optimizer LIST        comma list of none,sgd,adagrad,rowwise_adagrad,adam\n"
            "                          (none,adagrad)\n"
            "  --threads LIST          comma list of thread counts (1)\n"
            "  --iters N --warmup N    timed and untimed iterations (10, 3)\n"
            "  --lr X                  learning rate (0.01)\n"
            "  --seed N                ids, init and gradient seed (0)\n"
            "  --max-gb X              skip a measurement whose tables and state exceed X GB (20)\n"
            "                          (per rank under mpirun)\n"
            "  --placement P           every table's placement over the ranks: row, column,\n"
            "                          table (owner t %% ranks) or replicated (row)\n"
            "  --exchange E            what ROW/TABLE owners send back: rows or pooled (rows)\n"
            "  --table-kind fixed|dynamic  dynamic: tables take 64-bit keys (the ids scattered\n"
            "                          by splitmix64), rows/W rows per rank (fixed)\n"
            "  --key-space BITS        dynamic: keys from a Zipf law over 2^BITS ranks (rows)\n"
            "  --admit-after N --evict lru|lfu|ttl|none   dynamic tables' rules (1, lru;\n"
            "                          ttl frees rows unused for 8 steps)\n"
            "  --storage memory|ssd    where every table lives (memory); ssd: a store file per\n"
            "                          table in --ssd-dir (.) under a DRAM cache of --cache-bytes\n"
            "                          per table (256M; K, M, G suffixes) with --policy\n"
            "                          lru|lfu|lookahead (lookahead: the next 2 batches are\n"
            "                          announced with ember_prefetch after each forward)\n"
"  --lookahead K           batches announced ahead (16)\n"
            "  --buffered 1            store files through the page cache (default: O_DIRECT)\n"
            "  --io-threads N          I/O threads per SSD table (the library's default)\n"
            "  --belady 1              also Belady's offline hit rate for the same cache and ids\n"
            "                          (one process; the timed iterations, after the warm-up)\n"
            "  --schedule S            blocking (ember_forward), overlap or stale: the next\n"
            "                          batch begun before this one's backward and ended after\n"
            "                          it (ember_forward_begin / _end; docs/distributed.md)\n"
            "  --hot-rows K            every table copies its K most used rows onto every rank\n"
            "                          (row placement, rows exchange, a training optimizer,\n"
            "                          blocking schedule), chosen from the warm-up's counts\n"
            "                          (ember_refresh_hot_rows) before the timed steps\n"
            "  --dense-ms X            a stand-in for the dense model between forward and\n"
            "                          backward: arithmetic that takes X ms alone, calling\n"
            "                          ember_forward_progress every 50 us of it (0)\n"
            "One JSON line per (optimizer, threads); several pairs run in fresh processes.\n"
            "Under mpirun -np N: the workload's global batch split over the ranks, step time =\n"
            "max over ranks, bytes exchanged per step measured and predicted; rank 0 prints;\n"
            "several pairs run one after the other in the same processes.\n");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median of v[0..n), n >= 1 (sorts v) */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return (n & 1) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The dense model's stand-in: a fixed amount of dependent arithmetic
 * (calibrated once to take `ms` alone), driving the begun batch's
 * exchanges every ~50 us as the trainer's layers do.  Work, not wall
 * time: what the progress calls do adds to the step. */
static double arith(int64_t n)
{
    volatile double x = 1.0;
    for (int64_t k = 0; k < n; k++)
        x = x * 1.0000001 + 1e-9;
    return x;
}

/* Iterations of arith per microsecond, the same on every rank (the
 * fastest rank's: equal work everywhere, so the ranks stay in step). */
static double standin_rate(const tool_ctx *ctx)
{
    double t0 = ember_now();
    arith(4000000);
    double rate[1] = {4000000 / ((ember_now() - t0) * 1e6)};
    ember_comm_reduce_double(ctx->world, rate, 1, EMBER_REDUCE_MAX);
    return rate[0];
}

static void dense_standin(ember_collection *coll, double ms, double per_us)
{
    int64_t chunk = (int64_t)(50 * per_us) + 1, left = (int64_t)(ms * 1e3 * per_us);
    for (; left > 0; left -= chunk) {
        arith(left < chunk ? left : chunk);
        ember_forward_progress(coll);
    }
}

static double round_to(double x, double unit)
{
    return (double)llround(x / unit) * unit;
}

static int parse_optimizer(const char *s, ember_optimizer_kind *kind)
{
    static const struct {
        const char *name;
        ember_optimizer_kind kind;
    } names[] = {{"sgd", EMBER_OPT_SGD},
                 {"adagrad", EMBER_OPT_ADAGRAD},
                 {"rowwise_adagrad", EMBER_OPT_ROWWISE_ADAGRAD},
                 {"adam", EMBER_OPT_ADAM}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(s, names[i].name)) {
            *kind = names[i].kind;
            return 0;
        }
    return strcmp(s, "none") ? -1 : 1; /* 1: forward only */
}

/* Splits a comma list in place; returns the count or -1. */
static int split_list(char *s, const char **items, int max)
{
    int n = 0;
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        if (n == max)
            return -1;
        items[n++] = tok;
    }
    return n;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return (errno || end == s || *end) ? -1 : 0;
}

/* Index of s in names[n], or -1. */
static int name_index(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

/* Parses argv[1..argc) into o; 0, -1 after --help, or 2 after printing the
 * problem on err. */
static int bench_parse(FILE *err, int argc, char **argv, bench_opts *o, char *opt_buf,
                       char *thr_buf)
{
    memset(o, 0, sizeof *o);
    synth_args_init(&o->sa);
    o->sa.err = err;
    o->placement = EMBER_PLACE_ROW;
    o->exchange = EMBER_EXCHANGE_ROWS;
    o->storage = EMBER_STORAGE_MEMORY;
    o->policy = EMBER_CACHE_LOOKAHEAD;
    o->ssd_dir = ".";
    o->lookahead = 16;
    o->lr = 0.01;
    o->max_gb = 20;
    o->iters = 10;
    o->warmup = 3;
    strcpy(opt_buf, "none,adagrad");
    strcpy(thr_buf, "1");

    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i], *val = NULL;
        char name[64];
        const char *eq = strchr(flag, '=');
        if (!strcmp(flag, "--help") || !strcmp(flag, "-h")) {
            bench_usage(stdout);
            return -1;
        }
        if (strncmp(flag, "--", 2) || (eq ? (size_t)(eq - flag) : strlen(flag)) >= sizeof name) {
            fprintf(err, "ember bench: unexpected argument '%s'\n", flag);
            return 2;
        }
        if (eq) {
            memcpy(name, flag, (size_t)(eq - flag));
            name[eq - flag] = '\0';
            val = eq + 1;
        } else {
            strcpy(name, flag);
            if (i + 1 >= argc) {
                fprintf(err, "ember bench: %s needs a value\n", flag);
                return 2;
            }
            val = argv[++i];
        }
        int64_t v = 0;
        int bad = 0;
        if (!strcmp(name, "--workload")) {
            o->workload = val;
        } else if (!strcmp(name, "--dim")) {
            bad = synth_parse_int64(val, 1, 1024, &v);
            o->dim = (int32_t)v;
        } else if (!strcmp(name, "--lr")) {
            bad = parse_double(val, &o->lr);
        } else if (!strcmp(name, "--max-gb")) {
            bad = parse_double(val, &o->max_gb);
        } else if (!strcmp(name, "--iters")) {
            bad = synth_parse_int64(val, 1, 100000, &v);
            o->iters = (int)v;
        } else if (!strcmp(name, "--warmup")) {
            bad = synth_parse_int64(val, 0, 100000, &v);
            o->warmup = (int)v;
        } else if (!strcmp(name, "--optimizer")) {
            bad = strlen(val) >= 256;
            if (!bad)
                strcpy(opt_buf, val);
        } else if (!strcmp(name, "--threads")) {
            bad = strlen(val) >= 256;
            if (!bad)
                strcpy(thr_buf, val);
        } else if (!strcmp(name, "--placement")) {
            int k = name_index(val, PLACEMENT_NAMES, 4);
            bad = k < 0;
            o->placement = (ember_placement)(bad ? 0 : k);
        } else if (!strcmp(name, "--storage")) {
            int k = name_index(val, STORAGE_NAMES, 3);
            bad = k < 1;
            o->storage = (ember_storage)(bad ? 0 : k);
        } else if (!strcmp(name, "--policy")) {
            int k = name_index(val, POLICY_NAMES, 4);
            bad = k < 1;
            o->policy = (ember_cache_policy)(bad ? 0 : k);
        } else if (!strcmp(name, "--cache-bytes")) {
            bad = config_parse_bytes(val, &v) != 0 || v < 1;
            o->cache_bytes = v;
        } else if (!strcmp(name, "--ssd-dir")) {
            o->ssd_dir = val;
        } else if (!strcmp(name, "--io-threads")) {
            bad = synth_parse_int64(val, 1, 256, &v);
            o->io_threads = (int32_t)v;
        } else if (!strcmp(name, "--buffered")) {
            bad = synth_parse_int64(val, 0, 1, &v);
            o->buffered = (int)v;
        } else if (!strcmp(name, "--lookahead")) {
            bad = synth_parse_int64(val, 1, 63, &v);
            o->lookahead = (int32_t)v;
        } else if (!strcmp(name, "--belady")) {
            bad = synth_parse_int64(val, 0, 1, &v);
            o->belady = (int)v;
        } else if (!strcmp(name, "--table-kind")) {
            bad = strcmp(val, "fixed") && strcmp(val, "dynamic");
            o->dynamic = !strcmp(val, "dynamic");
        } else if (!strcmp(name, "--key-space")) {
            bad = synth_parse_int64(val, 1, 62, &v);
            o->key_bits = (int32_t)v;
        } else if (!strcmp(name, "--admit-after")) {
            bad = synth_parse_int64(val, 0, 65535, &v);
            o->admit_after = (int32_t)v;
        } else if (!strcmp(name, "--evict")) {
            int k = name_index(val, EVICT_NAMES, 4);
            bad = k < 0;
            o->evict = (ember_evict_policy)(bad ? 0 : k);
        } else if (!strcmp(name, "--schedule")) {
            int k = config_schedule_parse(val);
            bad = k < 0;
            o->schedule = (ember_schedule)(bad ? 0 : k);
        } else if (!strcmp(name, "--hot-rows")) {
            bad = synth_parse_int64(val, 0, INT64_C(1) << 32, &o->hot_rows);
        } else if (!strcmp(name, "--dense-ms")) {
            bad = parse_double(val, &o->dense_ms) || !(o->dense_ms >= 0 && o->dense_ms <= 1e4);
        } else if (!strcmp(name, "--exchange")) {
            int k = name_index(val, EXCHANGE_NAMES, 2);
            bad = k < 0;
            o->exchange = (ember_exchange)(bad ? 0 : k);
        } else {
            int used = 0, took = synth_args_take(&o->sa, "bench", name, val, &used);
            if (took < 0)
                return 2;
            if (!took || !used) { /* --weighted: the kernels here are unweighted */
                fprintf(err, "ember bench: unknown option '%s' (ember bench --help)\n", name);
                return 2;
            }
            bad = !strcmp(name, "--rows") && o->sa.rows > INT64_C(1) << 40; /* bench's cap */
        }
        if (bad) {
            fprintf(err, "ember bench: bad value '%s' for %s\n", val, name);
            return 2;
        }
    }

    if (synth_args_config(&o->sa, "bench", &o->shape))
        return 2;
    if (!o->dim)
        o->dim = synth_args_dim(&o->sa);

    o->num_opt = split_list(opt_buf, o->opt, BENCH_MAX_LIST);
    for (int i = 0; i < o->num_opt; i++) {
        ember_optimizer_kind k;
        if (parse_optimizer(o->opt[i], &k) < 0) {
            fprintf(err,
                    "ember bench: bad value '%s' for --optimizer "
                    "(none, sgd, adagrad, rowwise_adagrad, adam)\n",
                    o->opt[i]);
            return 2;
        }
    }
    const char *thr[BENCH_MAX_LIST];
    o->num_thr = split_list(thr_buf, thr, BENCH_MAX_LIST);
    for (int i = 0; i < o->num_thr; i++) {
        int64_t v;
        if (synth_parse_int64(thr[i], 1, 1024, &v)) {
            fprintf(err, "ember bench: bad value '%s' for --threads\n", thr[i]);
            return 2;
        }
        o->thr[i] = (int32_t)v;
    }
    if (o->num_opt < 1 || o->num_thr < 1) {
        fprintf(err, "ember bench: --optimizer and --threads need at least one item each\n");
        return 2;
    }
    if (o->hot_rows > 0 && (o->schedule != EMBER_SCHEDULE_BLOCKING || o->placement != EMBER_PLACE_ROW ||
                            o->exchange != EMBER_EXCHANGE_ROWS || o->warmup < 1)) {
        fprintf(err, "ember bench: --hot-rows needs --placement row, --exchange rows, the blocking schedule and "
                     "--warmup >= 1 (the hot rows come from the warm-up's counts)\n");
        return 2;
    }
    for (int i = 0; i < o->num_opt && o->hot_rows > 0; i++)
        if (!strcmp(o->opt[i], "none")) {
            fprintf(err, "ember bench: --hot-rows needs a training optimizer, not none\n");
            return 2;
        }
    return 0;
}

/* Common fields of every line of one measurement. */
static json_t *bench_base(const tool_ctx *ctx, const bench_opts *o, const char *optimizer,
                          int32_t threads)
{
    const ember_synth_config *sh = &o->shape;
    char wl[128];
    if (o->workload)
        snprintf(wl, sizeof wl, "%s", o->workload);
    else if (o->sa.preset)
        snprintf(wl, sizeof wl, "%s", o->sa.preset);
    else
        snprintf(wl, sizeof wl, "t%d_r%lld_d%d_b%d_p%d_%s", sh->tables, (long long)sh->rows, o->dim,
                 sh->batch_size, sh->pooling, sh->zipf ? "zipf" : "uniform");
    json_t *j = json_object();
    json_object_set_new(j, "impl", json_string("ember"));
    json_object_set_new(j, "workload", json_string(wl));
    json_object_set_new(j, "threads", json_integer(threads));
    json_object_set_new(j, "optimizer", json_string(optimizer));
    json_object_set_new(j, "tables", json_integer(sh->tables));
    json_object_set_new(j, "rows", json_integer(sh->rows));
    json_object_set_new(j, "dim", json_integer(o->dim));
    json_object_set_new(j, "batch", json_integer(sh->batch_size));
    json_object_set_new(j, "pooling", json_integer(sh->pooling));
    json_object_set_new(j, "dist", json_string(sh->zipf ? "zipf" : "uniform"));
    json_object_set_new(j, "alpha", sh->zipf ? json_real(sh->alpha) : json_null());
    json_object_set_new(j, "ranks", json_integer(ctx->size));
    json_object_set_new(j, "placement", json_string(PLACEMENT_NAMES[o->placement]));
    json_object_set_new(j, "exchange", json_string(EXCHANGE_NAMES[o->exchange]));
    json_object_set_new(j, "storage", json_string(STORAGE_NAMES[o->storage]));
    json_object_set_new(j, "schedule", json_string(config_schedule_name(o->schedule)));
    json_object_set_new(j, "dense_ms", json_real(o->dense_ms));
    json_object_set_new(j, "hot_rows", json_integer(o->hot_rows));
    if (o->storage == EMBER_STORAGE_SSD) {
        json_object_set_new(j, "policy", json_string(POLICY_NAMES[o->policy]));
        json_object_set_new(j, "io", json_string(o->buffered ? "buffered" : "direct"));
        json_object_set_new(j, "lookahead", json_integer(o->lookahead));
        json_object_set_new(j, "io_threads", json_integer(o->io_threads ? o->io_threads : 32));
        json_object_set_new(j, "cache_bytes", json_integer(o->cache_bytes ? o->cache_bytes : 256 << 20));
    }
    json_object_set_new(j, "ember_version", json_string(ember_version()));
    return j;
}

/* Prints j (rank 0's stdout; the other ranks' goes nowhere) and frees it. */
static void bench_emit(json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(12));
    if (s) {
        printf("%s\n", s);
        free(s);
    }
    fflush(stdout);
    json_decref(j);
}

/* Prints an error line for a measurement and returns 1.  For the status of
 * a collective ember call, which every rank gets alike (its message names
 * the failing rank): rank 0's line is the one printed. */
static int bench_fail(json_t *j, const char *fmt, const char *detail)
{
    char msg[768];
    snprintf(msg, sizeof msg, fmt, detail ? detail : "");
    json_object_set_new(j, "error", json_string(msg));
    bench_emit(j);
    return 1;
}

/*
 * Agrees on this rank's own failure (why: NULL when none) before the next
 * collective step, so that no rank is left waiting.  When any rank failed:
 * a failing rank says why on stderr (under mpirun), rank 0 prints the error
 * line (why, or which rank failed), j is consumed and 1 returned.
 */
static int bench_agree(const tool_ctx *ctx, json_t *j, const char *why)
{
    int32_t first;
    if (!ember_comm_any_failed(ctx->world, why != NULL, &first))
        return 0;
    char msg[768];
    if (why && ctx->size > 1)
        tool_local_error(ctx, "bench", "%s", why);
    if (why)
        snprintf(msg, sizeof msg, "%s%s", ctx->size > 1 ? "rank 0: " : "", why);
    else
        snprintf(msg, sizeof msg, "rank %d failed (its message is on its stderr)", (int)first);
    return bench_fail(j, "%s", msg);
}

/* MiB of transparent huge pages mapped by this process (-1 if unknown). */
static double anon_huge_mb(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    double kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %lf kB", &kb) == 1)
            break;
    fclose(f);
    return kb < 0 ? -1 : kb / 1024.0;
}

/* splitmix64's finaliser: a bijection of 64-bit words. */
static uint64_t splitmix_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t splitmix(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Table bytes (rows + state) of the rank holding most, as a share of all. */
static double bench_rank_share(const bench_opts *o, int32_t world)
{
    const ember_synth_config *sh = &o->shape;
    if (world == 1)
        return 1.0;
    switch (o->placement) {
    case EMBER_PLACE_ROW:
        return (double)((sh->rows + world - 1) / world) / (double)sh->rows;
    case EMBER_PLACE_COLUMN:
        return (double)((o->dim + world - 1) / world) / (double)o->dim;
    case EMBER_PLACE_TABLE:
        return (double)((sh->tables + world - 1) / world) / (double)sh->tables;
    default:
        return 1.0;
    }
}

/* The cost model's bytes per step (forward + backward) of every rank, for
 * the collection config cc on this workload: sent[r], recv[r].  0, or -1
 * when the model refuses it. */
static int bench_predict(const bench_opts *o, const ember_collection_config *cc, int32_t world,
                         double *sent, double *recv)
{
    const ember_synth_config *sh = &o->shape;
    plan_id_stats *stats = malloc((size_t)sh->tables * sizeof *stats);
    double *pooling = malloc((size_t)sh->tables * sizeof *pooling);
    plan_rank_cost *cost = malloc((size_t)world * sizeof *cost);
    int rc = -1;
    if (!stats || !pooling || !cost || plan_stats_synth(sh, &stats[0]) != EMBER_OK)
        goto done;
    for (int32_t t = 0; t < sh->tables; t++) {
        stats[t] = stats[0]; /* every table draws from the same law */
        pooling[t] = sh->pooling;
    }
    plan_workload wl = {cc, sh->batch_size, pooling, 0, stats};
    if (plan_predict(&wl, world, cost, NULL) != EMBER_OK)
        goto done;
    for (int32_t r = 0; r < world; r++) {
        /* PREDICTED BYTES: the planner's per-rank figure for last_bytes_sent */
        sent[r] = plan_predict_bytes_sent(&wl, world, r);
        recv[r] = cost[r].a2a_recv + cost[r].ag_recv;
        if (sent[r] < 0)
            goto done;
    }
    rc = 0;
done:
    free(stats);
    free(pooling);
    free(cost);
    return rc;
}

static double max_of(const double *v, int32_t n)
{
    double m = v[0];
    for (int32_t i = 1; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

static double sum_of(const double *v, int32_t n)
{
    double s = 0;
    for (int32_t i = 0; i < n; i++)
        s += v[i];
    return s;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Belady's loads for the bench's own batches: every table stacked into one
 * physical table (row t * rows + id), each step's distinct rows. */
static int belady(const ember_synth_config *sh, const int64_t *ids, int64_t local_ids, int nb, int64_t cap,
                  int first, int64_t *acc, int64_t *loads)
{
    uint32_t **rows = calloc((size_t)nb, sizeof *rows);
    int64_t *n = calloc((size_t)nb, sizeof *n);
    int st = rows && n ? 0 : -1;
    int64_t per_table = local_ids / sh->tables;
    for (int s = 0; s < nb && !st; s++) {
        uint32_t *v = malloc(sizeof(uint32_t) * (size_t)(local_ids + 1));
        if (!(rows[s] = v)) {
            st = -1;
            break;
        }
        for (int64_t i = 0; i < local_ids; i++)
            v[i] = (uint32_t)((i / per_table) * sh->rows + ids[(size_t)s * local_ids + i]);
        qsort(v, (size_t)local_ids, sizeof *v, cmp_u32);
        int64_t u = 0;
        for (int64_t i = 0; i < local_ids; i++)
            if (u == 0 || v[i] != v[u - 1])
                v[u++] = v[i];
        n[s] = u;
    }
    if (!st)
        st = ember_cache_sim_belady((const uint32_t *const *)rows, n, nb, (int64_t)sh->tables * sh->rows, cap,
                                    first, acc, loads);
    for (int s = 0; rows && s < nb; s++)
        free(rows[s]);
    free(rows);
    free(n);
    return st;
}

static json_t *json_doubles(const double *v, int32_t n, double unit)
{
    json_t *a = json_array();
    for (int32_t i = 0; i < n; i++)
        json_array_append_new(a, json_real(round_to(v[i], unit)));
    return a;
}

/* One measurement in this process (in every rank of the world, together). */
static int bench_run_one(const tool_ctx *ctx, const bench_opts *o, const char *optimizer,
                         int32_t threads)
{
    const ember_synth_config *sh = &o->shape;
    const int32_t R = ctx->size, rank = ctx->rank;
    json_t *j = bench_base(ctx, o, optimizer, threads);
    ember_optimizer_kind kind = EMBER_OPT_SGD;
    const int train = parse_optimizer(optimizer, &kind) == 0;
    const int nb = o->warmup + o->iters;
    const int64_t ids_per_iter = (int64_t)sh->tables * sh->batch_size * sh->pooling;
    int32_t first = 0, local_b = 0; /* this rank's samples of every batch */
    batch_slice_range(sh->batch_size, rank, R, &first, &local_b);
    const int64_t local_ids = (int64_t)sh->tables * local_b * sh->pooling;
    ember_table_config *tcfg = NULL;
    ember_feature_config *fcfg = NULL;
    char *names = NULL;
    ember_collection *coll = NULL;
    ember_synth *synth = NULL;
    batch_slice slice = {0};
    int64_t *ids = NULL;
    int32_t *lengths = NULL;
    uint64_t *seen = NULL;
    float *pooled = NULL, *pooled_next = NULL, *d_pooled = NULL;
    double *t_it = NULL; /* [4][iters]: step, forward, backward, exchange time */
    double *pred = NULL, *by_rank = NULL;
    const char *why = NULL;
    char whybuf[640];
    int rc = 1;

    /* the peer's --max-gb rule: rows plus optimizer state (of the rank holding most) */
    double est = (double)sh->tables * (double)sh->rows * o->dim * 4.0 *
                 (1.0 + (train ? (double)ember_state_floats(kind, o->dim) / o->dim : 0.0)) *
                 bench_rank_share(o, R);
    if (est > o->max_gb * 1e9) {
        char skip[128];
        snprintf(skip, sizeof skip, "estimated %.1f GB > --max-gb %g", est / 1e9, o->max_gb);
        json_object_set_new(j, "skipped", json_string(skip));
        bench_emit(j);
        return 0;
    }

    tcfg = calloc((size_t)sh->tables, sizeof *tcfg);
    fcfg = calloc((size_t)sh->tables, sizeof *fcfg);
    names = malloc((size_t)sh->tables * 32);
    if (!tcfg || !fcfg || !names)
        why = "out of memory for the config";
    if (bench_agree(ctx, j, why)) {
        j = NULL;
        goto done;
    }
    ember_optimizer opt = ember_optimizer_default(kind);
    opt.lr = (float)o->lr;
    for (int32_t t = 0; t < sh->tables; t++) {
        char *tn = names + (size_t)t * 32, *fn = tn + 16;
        snprintf(tn, 16, "t%d", t);
        snprintf(fn, 16, "f%d", t);
        tcfg[t] = ember_table_config_default();
        tcfg[t].name = tn;
        tcfg[t].rows = sh->rows;
        tcfg[t].dim = o->dim;
        tcfg[t].init = EMBER_INIT_UNIFORM;
        tcfg[t].optimizer = opt;
        tcfg[t].placement = o->placement;
        tcfg[t].owner = o->placement == EMBER_PLACE_TABLE ? t % R : 0;
        tcfg[t].exchange = o->exchange;
        tcfg[t].hot_rows = o->hot_rows;
        tcfg[t].storage = o->storage;
        tcfg[t].cache_bytes = o->cache_bytes;
        tcfg[t].cache_policy = o->policy;
        if (o->dynamic) {
            tcfg[t].kind = EMBER_TABLE_DYNAMIC;
            tcfg[t].rows = 0;
            tcfg[t].capacity = (sh->rows + R - 1) / R;
            tcfg[t].admit_after = o->admit_after;
            tcfg[t].evict = o->evict;
            tcfg[t].ttl_steps = o->evict == EMBER_EVICT_TTL ? 8 : 0;
        }
        fcfg[t].name = fn;
        fcfg[t].table = t;
        fcfg[t].combiner = EMBER_COMBINER_SUM;
    }
    ember_collection_config ccfg = ember_collection_config_default();
    ccfg.tables = tcfg;
    ccfg.num_tables = sh->tables;
    ccfg.features = fcfg;
    ccfg.num_features = sh->tables;
    ccfg.seed = sh->seed;
    ccfg.threads = threads;
    ccfg.ssd_dir = o->ssd_dir;
    ccfg.lookahead = o->lookahead;
    ccfg.ssd_buffered = o->buffered;
    ccfg.io_threads = o->io_threads;
    ccfg.world = ctx->world;
    ccfg.schedule = o->schedule;

    double t0 = ember_now();
    int st = ember_collection_create(&ccfg, &coll);
    double create_ms = (ember_now() - t0) * 1e3;
    if (st) {
        snprintf(whybuf, sizeof whybuf, "ember_collection_create: %s: %s", ember_status_str(st),
                 ember_errmsg(NULL));
        why = whybuf;
    }
    if (bench_agree(ctx, j, why)) {
        j = NULL;
        goto done;
    }

    /* every batch before the clock starts: the global batch, its distinct
     * rows counted per table, and this rank's samples of it kept */
    t0 = ember_now();
    ember_synth_config gen = *sh; /* dynamic: the key space's law */
    if (o->dynamic && o->key_bits)
        gen.rows = INT64_C(1) << o->key_bits;
    st = ember_synth_create(&gen, &synth);
    const int64_t W = ember_pooled_width(coll);
    const size_t words = (size_t)((sh->rows + 63) / 64);
    if (st == EMBER_OK) {
        ids = malloc((size_t)nb * (size_t)(local_ids > 0 ? local_ids : 1) * sizeof *ids);
        lengths = malloc((size_t)sh->tables * (size_t)(local_b > 0 ? local_b : 1) * sizeof *lengths);
        seen = malloc(words * sizeof *seen);
        pooled = malloc((size_t)(local_b > 0 ? local_b : 1) * (size_t)W * sizeof *pooled);
        pooled_next = malloc((size_t)(local_b > 0 ? local_b : 1) * (size_t)W * sizeof *pooled_next);
        d_pooled = malloc((size_t)(local_b > 0 ? local_b : 1) * (size_t)W * sizeof *d_pooled);
        t_it = calloc((size_t)4 * o->iters, sizeof *t_it);
        pred = calloc((size_t)2 * R, sizeof *pred);
        by_rank = calloc((size_t)R, sizeof *by_rank);
        if (!ids || !lengths || !seen || !pooled || !pooled_next || !d_pooled || !t_it || !pred || !by_rank)
            why = "out of memory for the pre-generated batches";
    } else {
        snprintf(whybuf, sizeof whybuf, "ember_synth_create: %s", ember_data_errmsg());
        why = whybuf;
    }
    double distinct = 0; /* summed over tables and batches, of the global batch */
    for (int n = 0; n < nb && !why; n++) {
        ember_batch b;
        if (ember_synth_next(synth, &b) != EMBER_OK) {
            why = "ember_synth_next failed";
            break;
        }
        const int64_t per_table = (int64_t)sh->batch_size * sh->pooling;
        for (int32_t t = 0; t < sh->tables && !o->dynamic; t++) {
            memset(seen, 0, words * sizeof *seen);
            const int64_t *p = b.ids + t * per_table;
            for (int64_t i = 0; i < per_table; i++) {
                uint64_t bit = 1ULL << (p[i] & 63);
                distinct += !(seen[p[i] >> 6] & bit);
                seen[p[i] >> 6] |= bit;
            }
        }
        if (R > 1) {
            if (batch_slice_take(&slice, &b, rank, R) || slice.batch.num_ids != local_ids) {
                why = "could not slice the batch";
                break;
            }
            b = slice.batch;
        }
        memcpy(ids + (size_t)n * local_ids, b.ids, (size_t)local_ids * sizeof *ids);
        if (o->dynamic) /* keys: the ids scattered over 64 bits (a bijection), as open ids are */
            for (int64_t i = 0; i < local_ids; i++)
                ids[(size_t)n * local_ids + i] = (int64_t)splitmix_mix((uint64_t)ids[(size_t)n * local_ids + i]);
        if (n == 0) /* every bag holds `pooling` ids: one lengths array for all */
            memcpy(lengths, b.lengths, (size_t)sh->tables * local_b * sizeof *lengths);
    }
    double gen_ms = (ember_now() - t0) * 1e3;
    ember_synth_destroy(synth);
    synth = NULL;
    batch_slice_free(&slice);
    if (bench_agree(ctx, j, why)) {
        j = NULL;
        goto done;
    }
    /* d_pooled: this rank's rows of one global [B x W] draw */
    uint64_t rs = sh->seed ^ 0x6a09e667f3bcc908ULL;
    for (int64_t i = 0; i < (int64_t)(first + local_b) * W; i++) {
        float v = (float)((double)(splitmix(&rs) >> 40) * 0x1.0p-23 - 1.0); /* [-1, 1) */
        if (i >= (int64_t)first * W) {
            d_pooled[i - (int64_t)first * W] = v;
            pooled[i - (int64_t)first * W] = 0;
        }
    }

    const double rate = o->dense_ms > 0 ? standin_rate(ctx) : 0;
    struct rusage ru0, ru1;
    int64_t bytes[2] = {0, 0}; /* this rank's bytes sent, received over the timed iterations */
    ember_tier_stats tier0, tier1; /* SSD tier counters at the warm-up's end and at the end */
    ember_stats stats;
    for (int n = 0; n < nb; n++) {
        if (n == o->warmup) {
            if (o->hot_rows > 0 && (st = ember_refresh_hot_rows(coll)) != EMBER_OK) { /* from the warm-up's counts */
                rc = bench_fail(j, "ember_refresh_hot_rows: %s", ember_errmsg(coll));
                j = NULL;
                goto done;
            }
            getrusage(RUSAGE_SELF, &ru0);
            ember_collection_tier_stats(coll, &tier0);
        }
        ember_batch b = {
            .batch_size = local_b,
            .num_features = sh->tables,
            .lengths = lengths,
            .ids = ids + (size_t)n * local_ids,
            .weights = NULL,
            .num_ids = local_ids,
        };
        if (R > 1)
            ember_comm_barrier(ctx->world); /* every rank starts the step together (untimed) */
        double a = ember_now();
        /* pipelined: batch n's outputs came from the last step's end;
         * batch n + 1 is begun now and ended after n's backward */
        const int pipelined = o->schedule != EMBER_SCHEDULE_BLOCKING, ahead = pipelined && n + 1 < nb;
        st = pipelined && n > 0 ? EMBER_OK : ember_forward(coll, &b, pooled, NULL);
        if (st == EMBER_OK && ahead) {
            ember_batch nx = b;
            nx.ids = ids + (size_t)(n + 1) * local_ids;
            st = ember_forward_begin(coll, &nx, pooled_next, NULL);
        }
        double m = ember_now();
        if (st) {
            char msg[640];
            snprintf(msg, sizeof msg, "%s: %s", ember_status_str(st), ember_errmsg(coll));
            rc = bench_fail(j, "ember_forward: %s", msg);
            j = NULL;
            goto done;
        }
        if (o->storage == EMBER_STORAGE_SSD && o->policy == EMBER_CACHE_LOOKAHEAD) {
            for (int k = n == 0 ? 1 : o->lookahead; k <= o->lookahead && n + k < nb; k++) {
                ember_batch nx = b;
                nx.ids = ids + (size_t)(n + k) * local_ids;
                st = ember_prefetch(coll, &nx);
                if (st) {
                    rc = bench_fail(j, "ember_prefetch: %s", ember_errmsg(coll));
                    j = NULL;
                    goto done;
                }
            }
        }
        dense_standin(coll, o->dense_ms, rate);
        double dd = ember_now();
        if (train) {
            st = ember_backward(coll, d_pooled, NULL);
            if (st) {
                char msg[640];
                snprintf(msg, sizeof msg, "%s: %s", ember_status_str(st), ember_errmsg(coll));
                rc = bench_fail(j, "ember_backward: %s", msg);
                j = NULL;
                goto done;
            }
        }
        ember_collection_stats(coll, &stats); /* batch n's, before n + 1 is ended */
        if (st == EMBER_OK && ahead) {
            st = ember_forward_end(coll);
            float *p = pooled;
            pooled = pooled_next;
            pooled_next = p;
            if (st) {
                rc = bench_fail(j, "ember_forward_end: %s", ember_errmsg(coll));
                j = NULL;
                goto done;
            }
        }
        double e = ember_now();
        if (n >= o->warmup) {
            const int i = n - o->warmup;
            t_it[i] = e - a;
            t_it[o->iters + i] = m - a;
            t_it[2 * o->iters + i] = e - dd;
            t_it[3 * o->iters + i] = stats.last_comm_seconds;
            bytes[0] += stats.last_bytes_sent;
            bytes[1] += stats.last_bytes_received;
        }
    }
    getrusage(RUSAGE_SELF, &ru1);
    ember_collection_tier_stats(coll, &tier1);

    ember_memory mem;
    ember_collection_stats(coll, &stats);
    ember_collection_memory(coll, &mem);
    double peak_mb = (double)ru1.ru_maxrss / 1024.0;
    double target_mb = 1.1 * (double)(mem.row_bytes + mem.state_bytes) / 1048576.0 + 256.0;

    /* over the ranks: times and memory of the slowest / largest, bytes max and sum */
    ember_comm_reduce_double(ctx->world, t_it, 4 * (int64_t)o->iters, EMBER_REDUCE_MAX);
    int64_t imax[8] = {ru1.ru_minflt - ru0.ru_minflt, mem.row_bytes, mem.state_bytes,
                       mem.workspace_bytes, peak_mb > target_mb, bytes[0], bytes[1], 0};
    int64_t isum[3] = {stats.last_unique_rows, bytes[0], bytes[1]};
    double dmax[5] = {create_ms, gen_ms, anon_huge_mb(), peak_mb, target_mb};
    ember_comm_reduce_i64(ctx->world, imax, 8, EMBER_REDUCE_MAX);
    ember_comm_reduce_i64(ctx->world, isum, 3, EMBER_REDUCE_SUM);
    ember_comm_reduce_double(ctx->world, dmax, 5, EMBER_REDUCE_MAX);
    by_rank[rank] = (double)bytes[0] / o->iters;
    ember_comm_reduce_double(ctx->world, by_rank, R, EMBER_REDUCE_SUM); /* each rank fills its own slot */

    double *tt = t_it, *tf = t_it + o->iters, *tb = t_it + 2 * o->iters, *tc = t_it + 3 * o->iters;
    double tmin = tt[0], tmax = tt[0], tsum = tt[0];
    for (int i = 1; i < o->iters; i++) {
        tsum += tt[i];
        tmin = tt[i] < tmin ? tt[i] : tmin;
        tmax = tt[i] > tmax ? tt[i] : tmax;
    }
    double med = median(tt, o->iters);
    double comm_med = median(tc, o->iters);
    peak_mb = dmax[3];
    target_mb = dmax[4];

    if (o->storage == EMBER_STORAGE_SSD && o->belady && R == 1) {
        int64_t acc = 0, loads = 0;
        int bst = belady(sh, ids, local_ids, nb, tier1.cache_rows, o->warmup, &acc, &loads);
        json_object_set_new(j, "belady_hit_rate",
                            bst == 0 && acc ? json_real(round_to(1.0 - (double)loads / (double)acc, 1e-5)) : json_null());
    }
    if (o->storage == EMBER_STORAGE_SSD) { /* this rank's timed iterations */
        double it = (double)o->iters;
        int64_t acc = tier1.accesses - tier0.accesses;
        int64_t loads = tier1.demand_loads - tier0.demand_loads + tier1.prefetch_used - tier0.prefetch_used;
        json_object_set_new(j, "cache_rows", json_integer(tier1.cache_rows));
        json_object_set_new(j, "hit_rate", json_real(acc ? round_to(1.0 - (double)loads / (double)acc, 1e-5) : 0));
        json_object_set_new(j, "accesses_per_iter", json_real(round_to((double)acc / it, 0.1)));
        json_object_set_new(j, "demand_loads_per_iter",
                            json_real(round_to((double)(tier1.demand_loads - tier0.demand_loads) / it, 0.1)));
        json_object_set_new(j, "prefetch_loads_per_iter",
                            json_real(round_to((double)(tier1.prefetch_loads - tier0.prefetch_loads) / it, 0.1)));
        json_object_set_new(j, "prefetch_wasted_per_iter",
                            json_real(round_to((double)(tier1.prefetch_wasted - tier0.prefetch_wasted) / it, 0.1)));
        json_object_set_new(j, "read_bytes_per_iter",
                            json_real(round_to((double)(tier1.bytes_read - tier0.bytes_read) / it, 1)));
        json_object_set_new(j, "written_bytes_per_iter",
                            json_real(round_to((double)(tier1.bytes_written - tier0.bytes_written) / it, 1)));
        json_object_set_new(j, "io_wait_ms_per_iter",
                            json_real(round_to((tier1.wait_seconds - tier0.wait_seconds) * 1e3 / it, 1e-3)));
        json_object_set_new(j, "io_sync_ms_per_iter",
                            json_real(round_to((tier1.io_seconds - tier0.io_seconds) * 1e3 / it, 1e-3)));
        json_object_set_new(j, "disk_bytes", json_integer(mem.disk_bytes));
        json_object_set_new(j, "cache_meta_bytes", json_integer(mem.cache_meta_bytes));
    }
    json_object_set_new(j, "grad", json_string(train ? "fused" : "none"));
    json_object_set_new(j, "iters", json_integer(o->iters));
    json_object_set_new(j, "warmup", json_integer(o->warmup));
    json_object_set_new(j, "lr", train ? json_real(o->lr) : json_null());
    json_object_set_new(j, "seed", json_integer((json_int_t)sh->seed));
    json_object_set_new(j, "ms_per_iter_median", json_real(round_to(med * 1e3, 1e-3)));
    json_object_set_new(j, "ms_per_iter_min", json_real(round_to(tmin * 1e3, 1e-3)));
    json_object_set_new(j, "ms_per_iter_max", json_real(round_to(tmax * 1e3, 1e-3)));
    json_object_set_new(j, "ms_per_iter_mean", json_real(round_to(tsum / o->iters * 1e3, 1e-3)));
    json_object_set_new(j, "fwd_ms_median", json_real(round_to(median(tf, o->iters) * 1e3, 1e-3)));
    json_object_set_new(j, "bwd_ms_median",
                        train ? json_real(round_to(median(tb, o->iters) * 1e3, 1e-3))
                              : json_null());
    json_object_set_new(j, "ids_per_iter", json_integer(ids_per_iter));
    json_object_set_new(j, "ids_per_s", json_real(round_to((double)ids_per_iter / med, 0.1)));
    json_object_set_new(j, "row_gbytes_per_s",
                        json_real(round_to((double)ids_per_iter * o->dim * 4 / med / 1e9, 1e-4)));
    json_object_set_new(j, "distinct_rows_per_table_per_iter",
                        o->dynamic ? json_null() : json_real(round_to(distinct / nb / sh->tables, 0.1)));
    json_object_set_new(j, "unique_rows_per_iter", o->dynamic ? json_null() : json_real(round_to(distinct / nb, 0.1)));
    if (o->dynamic) {
        ember_dynamic_stats ds, sum = {0};
        for (int32_t t = 0; t < sh->tables; t++) {
            ember_table_dynamic_stats(coll, t, &ds);
            sum.capacity += ds.capacity, sum.resident += ds.resident, sum.admitted += ds.admitted;
            sum.evicted += ds.evicted + ds.expired, sum.not_admitted += ds.not_admitted;
            sum.index_bytes += ds.index_bytes + ds.sketch_bytes;
        }
        json_object_set_new(j, "table_kind", json_string("dynamic"));
        json_object_set_new(j, "key_space_bits", json_integer(o->key_bits));
        json_object_set_new(j, "admit_after", json_integer(o->admit_after));
        json_object_set_new(j, "evict", json_string(EVICT_NAMES[o->evict]));
        json_object_set_new(j, "dyn_capacity", json_integer(sum.capacity));
        json_object_set_new(j, "dyn_resident", json_integer(sum.resident));
        json_object_set_new(j, "dyn_admitted", json_integer(sum.admitted));
        json_object_set_new(j, "dyn_evicted", json_integer(sum.evicted));
        json_object_set_new(j, "dyn_not_admitted", json_integer(sum.not_admitted));
        json_object_set_new(j, "dyn_index_bytes", json_integer(sum.index_bytes));
    }
    json_object_set_new(j, "lib_last_unique_rows", json_integer(isum[0]));
    json_object_set_new(j, "minflt_per_iter", json_real(round_to((double)imax[0] / o->iters, 0.1)));
    json_object_set_new(j, "rows_bytes", json_integer(imax[1]));
    json_object_set_new(j, "state_bytes", json_integer(imax[2]));
    json_object_set_new(j, "workspace_bytes", json_integer(imax[3]));
    json_object_set_new(j, "physical_tables", json_integer(mem.physical_tables));
    json_object_set_new(j, "batch_bytes", json_integer((json_int_t)nb * local_ids * 8));
    json_object_set_new(j, "create_ms", json_real(round_to(dmax[0], 0.1)));
    json_object_set_new(j, "gen_ms", json_real(round_to(dmax[1], 0.1)));
    json_object_set_new(j, "anon_huge_mb", json_real(round_to(dmax[2], 0.1)));
    json_object_set_new(j, "peak_rss_mb", json_real(round_to(peak_mb, 0.1)));
    json_object_set_new(j, "target_rss_mb", json_real(round_to(target_mb, 0.1)));
    json_object_set_new(j, "rss_ok", json_boolean(!imax[4]));

    /* the distributed step: world, bytes exchanged per step, the model's prediction */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    json_object_set_new(j, "local_batch_max", json_integer((sh->batch_size + R - 1) / R));
    json_object_set_new(j, "cpus", json_integer(cpus));
    json_object_set_new(j, "oversubscribed",
                        json_boolean(cpus > 0 && (long)ctx->local_ranks * threads > cpus));
    json_object_set_new(j, "bytes_sent_per_step_max", json_real(round_to((double)imax[5] / o->iters, 0.1)));
    json_object_set_new(j, "bytes_sent_per_step_sum", json_real(round_to((double)isum[1] / o->iters, 0.1)));
    json_object_set_new(j, "bytes_received_per_step_max",
                        json_real(round_to((double)imax[6] / o->iters, 0.1)));
    json_object_set_new(j, "bytes_received_per_step_sum",
                        json_real(round_to((double)isum[2] / o->iters, 0.1)));
    json_object_set_new(j, "bytes_sent_per_step_by_rank", json_doubles(by_rank, R, 0.1));
    json_object_set_new(j, "comm_ms_median", json_real(round_to(comm_med * 1e3, 1e-3)));
    json_object_set_new(j, "comm_share", json_real(round_to(med > 0 ? comm_med / med : 0, 1e-4)));
    /* the model predicts a whole step (forward + backward): none for forward only */
    int have_pred = train && bench_predict(o, &ccfg, R, pred, pred + R) == 0;
    if (have_pred) {
        double pmax = max_of(pred, R), psum = sum_of(pred, R);
        double msum = (double)isum[1] / o->iters, mmax = (double)imax[5] / o->iters;
        json_object_set_new(j, "predicted_bytes_sent_per_step_max", json_real(round_to(pmax, 0.1)));
        json_object_set_new(j, "predicted_bytes_sent_per_step_sum", json_real(round_to(psum, 0.1)));
        json_object_set_new(j, "predicted_bytes_received_per_step_max",
                            json_real(round_to(max_of(pred + R, R), 0.1)));
        json_object_set_new(j, "predicted_bytes_sent_by_rank", json_doubles(pred, R, 0.1));
        json_object_set_new(j, "measured_over_predicted_sum",
                            psum > 0 ? json_real(round_to(msum / psum, 1e-4)) : json_null());
        json_object_set_new(j, "measured_over_predicted_max",
                            pmax > 0 ? json_real(round_to(mmax / pmax, 1e-4)) : json_null());
    } else {
        json_object_set_new(j, "predicted_bytes_sent_per_step_max", json_null());
        json_object_set_new(j, "predicted_bytes_sent_per_step_sum", json_null());
    }
    bench_emit(j);
    j = NULL;
    rc = 0;

done:
    if (j)
        json_decref(j);
    ember_synth_destroy(synth);
    ember_collection_destroy(coll);
    batch_slice_free(&slice);
    free(tcfg);
    free(fcfg);
    free(names);
    free(ids);
    free(lengths);
    free(seen);
    free(pooled);
    free(pooled_next);
    free(d_pooled);
    free(t_it);
    free(pred);
    free(by_rank);
    return rc;
}

/* Runs one pair in a child: this program again, the lists replaced by it. */
static int bench_run_child(const tool_ctx *ctx, int argc, char **argv, const bench_opts *o,
                           const char *optimizer, int32_t threads)
{
    char thr[16];
    char **cargv = calloc((size_t)argc + 8, sizeof *cargv);
    int n = 0;
    if (!cargv)
        return 1;
    snprintf(thr, sizeof thr, "%d", threads);
    cargv[n++] = "ember";
    cargv[n++] = "bench";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int list = !strcmp(a, "--optimizer") || !strcmp(a, "--threads");
        if (list) {
            i++; /* and its value */
            continue;
        }
        if (!strncmp(a, "--optimizer=", 12) || !strncmp(a, "--threads=", 10))
            continue;
        cargv[n++] = argv[i];
    }
    cargv[n++] = "--optimizer";
    cargv[n++] = (char *)optimizer;
    cargv[n++] = "--threads";
    cargv[n++] = thr;
    cargv[n] = NULL;

    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        execv("/proc/self/exe", cargv);
        perror("ember bench: execv /proc/self/exe");
        _exit(127);
    }
    free(cargv);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) {
        perror("ember bench: fork");
        return 1;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    /* the child printed its own error line unless it died */
    if (WIFSIGNALED(status)) {
        char why[64];
        snprintf(why, sizeof why, "killed by signal %d", WTERMSIG(status));
        json_t *j = bench_base(ctx, o, optimizer, threads);
        json_object_set_new(j, "error", json_string(why));
        bench_emit(j);
    }
    return 1;
}

int cmd_bench(const tool_ctx *ctx, int argc, char **argv)
{
    bench_opts o;
    char opt_buf[256], thr_buf[256];
    int rc = bench_parse(ctx->err, argc, argv, &o, opt_buf, thr_buf);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (o.num_opt * o.num_thr == 1)
        return bench_run_one(ctx, &o, o.opt[0], o.thr[0]);
    int failed = 0;
    for (int i = 0; i < o.num_opt; i++)
        for (int k = 0; k < o.num_thr; k++)
            failed |= ctx->mpi ? bench_run_one(ctx, &o, o.opt[i], o.thr[k])
                               : bench_run_child(ctx, argc, argv, &o, o.opt[i], o.thr[k]);
    return failed;
}
