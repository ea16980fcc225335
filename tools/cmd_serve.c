/*
 * cmd_serve.c: `ember serve MODEL`: an HTTP scoring endpoint for a bundle
 * or a checkpoint (docs/inference.md, "Serving").  This file reads the
 * options, opens the scorer (include/ember-serve.h: the model once per
 * scoring thread), starts the endpoints (serve_http.c) and waits for
 * signals.  SIGHUP reloads the model from its path (the library swaps it
 * in without dropping a request; serve_ops.c says what happened on
 * stderr).  SIGTERM or SIGINT stops taking connections, lets the requests
 * in flight finish, prints the final statistics as one JSON line and exits.
 *
 * Signals reach a handler that only writes a byte to a pipe, so it does
 * not matter which of the many threads (connections, OpenMP) receives
 * them; the main thread sleeps on the pipe, and reloads in it.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "serve_http.h"

static int wake[2] = {-1, -1};
static volatile sig_atomic_t signals_seen; /* SIGTERM, SIGINT; 2: a second cuts the drain short */

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (sig != SIGHUP)
        signals_seen = signals_seen < 2 ? signals_seen + 1 : 2;
    if (write(wake[1], &b, 1) < 0) { /* non-blocking: a full pipe already holds a wake-up */
    }
    errno = saved;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ember serve MODEL [--port P] [--host ADDR] [--scorers N] [--threads T] [--max-batch N]\n"
               "                   [--max-wait-us U] [--max-body BYTES] [--max-request-samples N]\n"
               "                   [--connections N] [--drain-seconds S] [--admin]\n"
               "  MODEL                   a bundle of `ember export --quantize`, or a checkpoint of `ember train`\n"
               "  --port P                TCP port (default 8080; 0: any free port, printed at start)\n"
               "  --host ADDR             address to listen on (default 127.0.0.1, loopback only;\n"
               "                          0.0.0.0 or :: listen on every interface)\n"
               "  --scorers N             scoring threads taking micro-batches at once (default 1); each\n"
               "                          holds its own copy of the model: N times the tables' memory\n"
               "  --threads T             OpenMP threads for each scorer's embedding work (default 1)\n"
               "  --max-batch N           samples per micro-batch (default 512)\n"
               "  --max-wait-us U         how long the oldest waiting request waits for others (default 500)\n"
               "  --max-body BYTES        larger request bodies get 413 (default 67108864)\n"
               "  --max-request-samples N larger requests get 400 (default 65536)\n"
               "  --connections N         open connections at most (default 256)\n"
               "  --drain-seconds S       on SIGTERM, how long requests in flight may finish (default 30;\n"
               "                          a second SIGTERM or SIGINT stops at once)\n"
               "  --admin                 answer POST /admin/reload (off by default: whoever reaches the\n"
               "                          port can then load any model file the server can read)\n"
               "Endpoints: POST /score (JSON ids or {\"rows\": [...]} raw rows; text/csv or\n"
               "text/tab-separated-values lines as in the training file; binary ids with Content-Type\n"
               "application/octet-stream), GET /health (the model, its version, the last reload),\n"
               "GET /model (the input a request gives, the model's input schema), GET /stats,\n"
               "GET /metrics (Prometheus), POST /admin/reload (--admin; body empty or {\"model\": PATH}).\n"
               "Reloading: SIGHUP or POST /admin/reload opens the model again (from MODEL, or the path\n"
               "last loaded; the admin body may name another), checks it, and swaps it in while requests\n"
               "go on; a model that fails is refused and the old one serves on (docs/inference.md,\n"
               "\"Serving\").\n");
}

typedef struct serve_options {
    int64_t port, threads, max_batch, max_wait_us, max_body, max_samples, connections, drain_seconds, scorers;
    const char *host, *model;
    int admin;
} serve_options;

/* 0, or 2 after printing the usage error. */
static int parse(const tool_ctx *ctx, int argc, char **argv, serve_options *o)
{
    static const struct {
        const char *name;
        size_t at;
        int64_t lo, hi;
    } ints[] = {
        {"--port", offsetof(serve_options, port), 0, 65535},
        {"--threads", offsetof(serve_options, threads), 1, 1024},
        {"--max-batch", offsetof(serve_options, max_batch), 1, 1 << 24},
        {"--max-wait-us", offsetof(serve_options, max_wait_us), 0, 10000000},
        {"--max-body", offsetof(serve_options, max_body), 32, (int64_t)1 << 34},
        {"--max-request-samples", offsetof(serve_options, max_samples), 1, INT32_MAX},
        {"--connections", offsetof(serve_options, connections), 1, 65536},
        {"--drain-seconds", offsetof(serve_options, drain_seconds), 0, 86400},
        {"--scorers", offsetof(serve_options, scorers), 1, 64},
    };
    for (int i = 1; i < argc; i++) {
        size_t k = 0;
        while (k < sizeof ints / sizeof *ints && strcmp(argv[i], ints[k].name))
            k++;
        if (k < sizeof ints / sizeof *ints && i + 1 < argc) {
            char *end;
            long long v = strtoll(argv[i + 1], &end, 10);
            if (*end || end == argv[i + 1] || v < ints[k].lo || v > ints[k].hi) {
                fprintf(ctx->err, "ember serve: %s %s: expected an integer in [%lld, %lld]\n", argv[i], argv[i + 1],
                        (long long)ints[k].lo, (long long)ints[k].hi);
                return 2;
            }
            *(int64_t *)((char *)o + ints[k].at) = v;
            i++;
        } else if (!strcmp(argv[i], "--host") && i + 1 < argc) {
            o->host = argv[++i];
        } else if (!strcmp(argv[i], "--admin")) {
            o->admin = 1;
        } else if (argv[i][0] != '-' && !o->model) {
            o->model = argv[i];
        } else {
            fprintf(ctx->err, "ember serve: unexpected argument '%s' (ember serve --help)\n", argv[i]);
            return 2;
        }
    }
    if (!o->model) {
        usage(ctx->err);
        return 2;
    }
    return 0;
}

static int install_signals(void)
{
    if (pipe2(wake, O_CLOEXEC) != 0 || fcntl(wake[1], F_SETFL, O_NONBLOCK) != 0) /* the handler never blocks */
        return -1;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    struct sigaction ign = {0};
    ign.sa_handler = SIG_IGN;
    return sigaction(SIGTERM, &sa, NULL) | sigaction(SIGINT, &sa, NULL) | sigaction(SIGHUP, &sa, NULL) |
           sigaction(SIGPIPE, &ign, NULL);
}

int cmd_serve(const tool_ctx *ctx, int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    serve_options o = {8080, 1, 512, 500, 64 << 20, 65536, 256, 30, 1, "127.0.0.1", NULL, 0};
    int rc = parse(ctx, argc, argv, &o);
    if (rc)
        return rc;
    if (ctx->size > 1) {
        fprintf(ctx->err, "ember serve: runs in one process (not under mpirun); it scores with --scorers threads\n");
        return 2;
    }
    if (install_signals() != 0) {
        fprintf(stderr, "ember serve: cannot install the signal handlers: %s\n", strerror(errno));
        return 1;
    }
    serve_http h = {0};
    h.max_samples = (int32_t)o.max_samples;
    h.threads = (int32_t)o.threads;
    h.scorers = (int32_t)o.scorers;
    h.max_batch = (int32_t)o.max_batch;
    h.max_wait = (double)o.max_wait_us * 1e-6;
    h.max_body = (size_t)o.max_body;
    h.admin = o.admin;
    ember_predictor_options po = {NULL, (int32_t)o.threads};
    ember_scorer_config sc = {(int32_t)o.max_batch, h.max_wait, (int32_t)o.max_samples, (int32_t)o.scorers};
    char err[512];
    if (ember_scorer_open(o.model, &po, &sc, &h.scorer) != EMBER_OK) {
        fprintf(stderr, "ember serve: %s\n", ember_errmsg(NULL));
        return 1;
    }
    if (serve_http_start(&h, o.host, (int)o.port, (int)o.connections, err, sizeof err) != 0) {
        fprintf(stderr, "ember serve: %s\n", err);
        ember_scorer_destroy(h.scorer);
        return 1;
    }
    int v6 = strchr(o.host, ':') != NULL;
    ember_scorer_model *m = ember_scorer_model_acquire(h.scorer, NULL);
    ember_model_info mi;
    ember_scorer_model_info(m, &mi);
    ember_scorer_model_release(h.scorer, m);
    printf("ember serve: %s on http://%s%s%s:%d (%d tables, %d features, %d dense; max batch %d, max wait %lld us, "
           "%d scorers of %d threads%s)\n", o.model, v6 ? "[" : "", o.host, v6 ? "]" : "", serve_http_port(&h),
           (int)mi.num_tables, (int)mi.num_features, (int)mi.num_dense, (int)o.max_batch, (long long)o.max_wait_us,
           (int)o.scorers, (int)o.threads, o.admin ? "; admin endpoint on" : "");
    fflush(stdout);
    if (o.admin && strcmp(o.host, "127.0.0.1") && strcmp(o.host, "::1"))
        fprintf(stderr, "ember serve: --admin on %s: anyone who reaches the port can reload the model from any "
                "path this process can read (guard /admin/ with a proxy)\n", o.host);
    unsigned char sig = 0;
    for (;;) {
        while (read(wake[0], &sig, 1) < 0 && errno == EINTR)
            ;
        if (sig != SIGHUP)
            break;
        serve_ops_reload(&h, NULL, "SIGHUP");
    }
    fprintf(stderr, "ember serve: %s: draining %d requests in flight\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
            atomic_load(&h.active));
    int left = serve_http_drain(&h, (double)o.drain_seconds, &signals_seen);
    char *stats = serve_http_stats_json(&h);
    printf("%s", stats ? stats : "{}\n");
    free(stats);
    ember_scorer_destroy(h.scorer);
    if (left > 0)
        fprintf(stderr, "ember serve: %d requests still in flight after %lld s were cut off\n", left,
                (long long)o.drain_seconds);
    return left > 0;
}
