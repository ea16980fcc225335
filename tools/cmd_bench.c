/*
 * cmd_bench.c: `ember bench`, the kernel throughput of one workload as JSON
 * lines, shaped like the PyTorch peer benchmark (docs/PERFORMANCE.md) so
 * the two can be put side by side.  The measurement is the library's
 * (ember_bench_run, include/ember-bench.h); this file reads the options,
 * runs one measurement per (optimizer, threads) pair of the lists and
 * prints each one's line.
 *
 * When the lists name more than one pair, every pair runs in a fresh child
 * (this program re-executed with one pair) so that peak_rss_mb belongs to
 * that measurement alone, and so that only one collection (W3 Adam:
 * 15 GB) exists at a time.  Under mpirun -np W the pairs run one after the
 * other in the same processes (a child could not rejoin the MPI job), so
 * peak_rss_mb is then the largest so far; only rank 0 prints.  The shape
 * options and presets are synth_args', shared with `ember gen` and
 * `ember limits`; --dim, when not given, is the preset's.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "ember-bench.h"
#include "ember.h"
#include "synth_args.h"

#define BENCH_MAX_LIST 16

typedef struct bench_opts {
    synth_args sa;
    ember_bench_config cfg;              /* one measurement's; the lists below */
    const char *workload;
    int num_opt, num_thr;
    const char *opt[BENCH_MAX_LIST];     /* none, sgd, ...    */
    int32_t thr[BENCH_MAX_LIST];
    char opt_buf[256], thr_buf[256];
} bench_opts;

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
            "  --drift rotate|grow     drifting ids: every --drift-every K batches (10) the hot set\n"
            "                          moves --drift-rows R ranks (rotate) or R new ids join\n"
            "                          (grow, from --drift-start S ranks); --drift-tables N: the\n"
            "                          first N tables only\n"
            "  --optimizer LIST        comma list of none,sgd,adagrad,rowwise_adagrad,adam,momentum,ftrl,\n"
            "                          rowwise_adam,lamb,lars\n"
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
            "  --lookahead-max K       the window follows the data between 1 and K (from --lookahead)\n"
            "  --buffered 1            store files through the page cache (default: O_DIRECT)\n"
            "  --io-threads N          I/O threads per SSD table (the library's default)\n"
            "  --belady 1              also Belady's offline hit rate for the same cache and ids\n"
            "                          (one process; the timed iterations, after the warm-up)\n"
            "  --written 1             every row written to the store files before the clock\n"
            "                          starts, as after loading a checkpoint: every load reads\n"
            "                          (default: rows never written are computed, not read)\n"
            "  --schedule S            blocking (ember_forward), overlap or stale: the next\n"
            "                          batch begun before this one's backward and ended after\n"
            "                          it (ember_forward_begin / _end; docs/distributed.md)\n"
            "  --hot-rows K            every table copies its K most used rows onto every rank\n"
            "                          (row placement, rows exchange, a training optimizer,\n"
            "                          blocking schedule), chosen from the warm-up's counts\n"
            "                          (ember_refresh_hot_rows) before the timed steps\n"
            "  --precision P           every table's rows: fp32 (default), fp16 or bf16\n"
            "  --rounding R            half rows' and state's rounding: stochastic (default) or nearest\n"
            "  --state-precision P     per-element optimizer state: fp32 (default), fp16 or bf16\n"
            "  --dense-ms X            a stand-in for the dense model between forward and\n"
            "                          backward: arithmetic that takes X ms alone, calling\n"
            "                          ember_forward_progress every 50 us of it (0)\n"
            "One JSON line per (optimizer, threads); several pairs run in fresh processes.\n"
            "Under mpirun -np N: the workload's global batch split over the ranks, step time =\n"
            "max over ranks, bytes exchanged per step measured and predicted; rank 0 prints;\n"
            "several pairs run one after the other in the same processes.\n");
}

/* "none": forward only (1), an optimizer's name (0, *kind), else -1. */
static int parse_optimizer(const char *s, ember_optimizer_kind *kind)
{
    for (int k = EMBER_OPT_SGD; k <= EMBER_OPT_LARS; k++)
        if (!strcmp(s, ember_optimizer_name((ember_optimizer_kind)k))) {
            *kind = (ember_optimizer_kind)k;
            return 0;
        }
    return strcmp(s, "none") ? -1 : 1;
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

/* The library's names of the enums, by value (ember.h, "names"). */
static const char *placement_name(int k) { return ember_placement_name((ember_placement)k); }
static const char *exchange_name(int k) { return ember_exchange_name((ember_exchange)k); }
static const char *storage_name(int k) { return ember_storage_name((ember_storage)k); }
static const char *policy_name(int k) { return ember_cache_policy_name((ember_cache_policy)k); }
static const char *evict_name(int k) { return ember_evict_name((ember_evict_policy)k); }
static const char *schedule_name(int k) { return ember_schedule_name((ember_schedule)k); }
static const char *precision_name(int k) { return ember_precision_name((ember_row_precision)k); }
static const char *rounding_name(int k) { return ember_rounding_name((ember_rounding)k); }

/* The value k in [lo, n) whose name is s, or -1. */
static int name_index(const char *s, const char *(*name_of)(int), int lo, int n)
{
    for (int k = lo; k < n; k++)
        if (!strcmp(s, name_of(k)))
            return k;
    return -1;
}

/* An option naming a value: 1 when name is one (*bad set for a bad
 * value), 0 when it is not. */
static int parse_enum_flag(bench_opts *o, const char *name, const char *val, int *bad)
{
    ember_bench_config *c = &o->cfg;
    int k;
    if (!strcmp(name, "--placement")) {
        if ((k = name_index(val, placement_name, 0, 4)) >= 0)
            c->placement = (ember_placement)k;
    } else if (!strcmp(name, "--exchange")) {
        if ((k = name_index(val, exchange_name, 0, 2)) >= 0)
            c->exchange = (ember_exchange)k;
    } else if (!strcmp(name, "--storage")) { /* memory or ssd: not auto */
        if ((k = name_index(val, storage_name, 1, 3)) >= 0)
            c->storage = (ember_storage)k;
    } else if (!strcmp(name, "--policy")) { /* not default */
        if ((k = name_index(val, policy_name, 1, 4)) >= 0)
            c->policy = (ember_cache_policy)k;
    } else if (!strcmp(name, "--evict")) {
        if ((k = name_index(val, evict_name, 0, 4)) >= 0)
            c->evict = (ember_evict_policy)k;
    } else if (!strcmp(name, "--schedule")) {
        if ((k = name_index(val, schedule_name, 0, 3)) >= 0)
            c->schedule = (ember_schedule)k;
    } else if (!strcmp(name, "--precision")) {
        if ((k = name_index(val, precision_name, 0, 3)) >= 0)
            c->precision = (ember_row_precision)k;
    } else if (!strcmp(name, "--state-precision")) {
        if ((k = name_index(val, precision_name, 0, 3)) >= 0)
            c->state_precision = (ember_row_precision)k;
    } else if (!strcmp(name, "--rounding")) {
        if ((k = name_index(val, rounding_name, 0, 2)) >= 0)
            c->rounding = (ember_rounding)k;
    } else if (!strcmp(name, "--table-kind")) {
        k = !strcmp(val, "fixed") || !strcmp(val, "dynamic") ? 0 : -1;
        c->dynamic = !strcmp(val, "dynamic");
    } else {
        return 0;
    }
    *bad = k < 0;
    return 1;
}

/* A number-valued option: 1 when name is one (*bad set for a bad value),
 * 0 when it is not. */
static int parse_number_flag(bench_opts *o, const char *name, const char *val, int *bad)
{
    ember_bench_config *c = &o->cfg;
    int64_t v = 0;
    if (!strcmp(name, "--lr")) {
        *bad = parse_double(val, &c->lr);
    } else if (!strcmp(name, "--max-gb")) {
        *bad = parse_double(val, &c->max_gb);
    } else if (!strcmp(name, "--dense-ms")) {
        *bad = parse_double(val, &c->dense_ms) || !(c->dense_ms >= 0 && c->dense_ms <= 1e4);
    } else if (!strcmp(name, "--cache-bytes")) {
        *bad = ember_parse_bytes(val, &v) != 0 || v < 1;
        c->cache_bytes = v;
    } else if (!strcmp(name, "--hot-rows")) {
        *bad = synth_parse_int64(val, 0, INT64_C(1) << 32, &c->hot_rows);
    } else if (!strcmp(name, "--buffered") || !strcmp(name, "--belady")) {
        *bad = synth_parse_int64(val, 0, 1, &v);
        *(name[2] == 'b' && name[3] == 'u' ? &c->buffered : &c->belady) = (int)v;
    } else if (!strcmp(name, "--written")) {
        *bad = synth_parse_int64(val, 0, 1, &v);
        c->written = (int)v;
    } else {
        static const struct {
            const char *name;
            int64_t lo, hi;
            size_t at;
        } ints[] = {
            {"--dim", 1, 1024, offsetof(ember_bench_config, dim)},
            {"--iters", 1, 100000, offsetof(ember_bench_config, iters)},
            {"--warmup", 0, 100000, offsetof(ember_bench_config, warmup)},
            {"--io-threads", 1, 256, offsetof(ember_bench_config, io_threads)},
            {"--lookahead", 1, 63, offsetof(ember_bench_config, lookahead)},
            {"--lookahead-max", 1, 63, offsetof(ember_bench_config, lookahead_max)},
            {"--key-space", 1, 62, offsetof(ember_bench_config, key_bits)},
            {"--admit-after", 0, 65535, offsetof(ember_bench_config, admit_after)},
        };
        size_t k = 0;
        while (k < sizeof ints / sizeof *ints && strcmp(name, ints[k].name))
            k++;
        if (k == sizeof ints / sizeof *ints)
            return 0;
        *bad = synth_parse_int64(val, ints[k].lo, ints[k].hi, &v);
        *(int32_t *)((char *)c + ints[k].at) = (int32_t)v; /* every one an int32_t field */
    }
    return 1;
}

/* One option and its value: 0, or 2 after printing the problem. */
static int parse_flag(FILE *err, bench_opts *o, const char *name, const char *val)
{
    int bad = 0;
    if (!strcmp(name, "--workload")) {
        o->workload = val;
    } else if (!strcmp(name, "--ssd-dir")) {
        o->cfg.ssd_dir = val;
    } else if (!strcmp(name, "--optimizer") || !strcmp(name, "--threads")) {
        bad = strlen(val) >= sizeof o->opt_buf;
        if (!bad)
            strcpy(name[2] == 'o' ? o->opt_buf : o->thr_buf, val);
    } else if (!parse_enum_flag(o, name, val, &bad) && !parse_number_flag(o, name, val, &bad)) {
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
    return 0;
}

/* The lists of optimizers and thread counts, and what --hot-rows needs:
 * 0, or 2 after printing the problem. */
static int check_lists(FILE *err, bench_opts *o)
{
    o->num_opt = split_list(o->opt_buf, o->opt, BENCH_MAX_LIST);
    for (int i = 0; i < o->num_opt; i++) {
        ember_optimizer_kind k;
        if (parse_optimizer(o->opt[i], &k) < 0) {
            fprintf(err, "ember bench: bad value '%s' for --optimizer (none, sgd, adagrad, rowwise_adagrad, adam, momentum, ftrl, "
                            "rowwise_adam, lamb, lars)\n",
                    o->opt[i]);
            return 2;
        }
    }
    const char *thr[BENCH_MAX_LIST];
    o->num_thr = split_list(o->thr_buf, thr, BENCH_MAX_LIST);
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
    const ember_bench_config *c = &o->cfg;
    if (c->hot_rows > 0 && (c->schedule != EMBER_SCHEDULE_BLOCKING || c->placement != EMBER_PLACE_ROW ||
                            c->exchange != EMBER_EXCHANGE_ROWS || c->warmup < 1)) {
        fprintf(err, "ember bench: --hot-rows needs --placement row, --exchange rows, the blocking schedule and "
                     "--warmup >= 1 (the hot rows come from the warm-up's counts)\n");
        return 2;
    }
    for (int i = 0; i < o->num_opt && c->hot_rows > 0; i++)
        if (!strcmp(o->opt[i], "none")) {
            fprintf(err, "ember bench: --hot-rows needs a training optimizer, not none\n");
            return 2;
        }
    return 0;
}

/* Parses argv[1..argc) into o; 0, -1 after --help, or 2 after printing the
 * problem on err. */
static int bench_parse(FILE *err, int argc, char **argv, bench_opts *o)
{
    memset(o, 0, sizeof *o);
    synth_args_init(&o->sa);
    o->sa.err = err;
    o->cfg = ember_bench_config_default();
    o->cfg.dim = 0; /* not given: the preset's */
    strcpy(o->opt_buf, "none,adagrad");
    strcpy(o->thr_buf, "1");
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
        if (parse_flag(err, o, name, val))
            return 2;
    }
    if (synth_args_config(&o->sa, "bench", &o->cfg.shape))
        return 2;
    if (!o->cfg.dim)
        o->cfg.dim = synth_args_dim(&o->sa);
    o->cfg.workload = o->workload ? o->workload : o->sa.preset;
    return check_lists(err, o);
}

/* o's measurement for one pair. */
static ember_bench_config pair_config(const tool_ctx *ctx, const bench_opts *o, const char *optimizer,
                                      int32_t threads)
{
    ember_bench_config c = o->cfg;
    c.forward_only = parse_optimizer(optimizer, &c.optimizer) != 0;
    c.threads = threads;
    c.world = ctx->world;
    return c;
}

/* Prints a line (rank 0's stdout; the other ranks' goes nowhere). */
static void emit(char *line)
{
    if (line)
        printf("%s\n", line);
    fflush(stdout);
    free(line);
}

/* One measurement in this process (in every rank of the world, together). */
static int bench_run_one(const tool_ctx *ctx, const bench_opts *o, const char *optimizer, int32_t threads)
{
    ember_bench_config c = pair_config(ctx, o, optimizer, threads);
    char *line = NULL;
    int st = ember_bench_run(&c, &line);
    emit(line);
    return st != EMBER_OK;
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
        ember_bench_config c = pair_config(ctx, o, optimizer, threads);
        emit(ember_bench_line(&c, why));
    }
    return 1;
}

int cmd_bench(const tool_ctx *ctx, int argc, char **argv)
{
    bench_opts o;
    int rc = bench_parse(ctx->err, argc, argv, &o);
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
