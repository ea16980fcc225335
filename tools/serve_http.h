/*
 * serve_http.h: the HTTP face of `ember serve` (libmicrohttpd): requests
 * in, the library's scorer (include/ember-serve.h: bodies decoded and
 * scored in micro-batches, the model reloaded), answers out; and the
 * operations' endpoints (serve_ops.c: /health, /metrics, /admin/reload).
 */
#ifndef EMBER_TOOLS_SERVE_HTTP_H
#define EMBER_TOOLS_SERVE_HTTP_H

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ember-serve.h"

typedef struct serve_http {
    ember_scorer *scorer;
    int32_t max_samples;       /* per request (GET /model)                  */
    int32_t threads, scorers, max_batch;
    int admin;                 /* --admin: POST /admin/reload answers       */
    double max_wait, started;  /* started: monotonic (tool_now)             */
    double started_unix;       /* the same moment, Unix seconds             */
    size_t max_body;
    atomic_int active;         /* requests between headers and completion   */
    atomic_int connections;    /* open connections                           */
    _Atomic double last_start; /* when the latest request started            */
    atomic_int draining;       /* 1 after SIGTERM: answers close their connection */
    struct MHD_Daemon *daemon;
} serve_http;

/* Starts the daemon on host:port (port 0: any free port), thread per
 * connection, at most `connections` at once.  0, or -1 with err. */
int serve_http_start(serve_http *h, const char *host, int port, int connections, char *err, size_t errlen);
/* The port bound. */
int serve_http_port(const serve_http *h);
/* Shuts down gracefully: stops accepting connections (those the kernel
 * already queued are still served; later ones are refused), answers the
 * rest with Connection: close and /health with 503, waits up to `seconds`
 * (or until *signals reaches 2: a second SIGTERM) for the requests in
 * flight and for open connections to go quiet (no request started for
 * 0.25 s), then stops the scorer (scoring what it holds; reloads are
 * refused from then on) and the daemon.
 * Returns the requests still in flight when the wait ended. */
int serve_http_drain(serve_http *h, double seconds, volatile sig_atomic_t *signals);
/* The statistics as one JSON object (malloc'd). */
char *serve_http_stats_json(const serve_http *h);

/* serve_ops.c.  Each returns a malloc'd body (NULL: out of memory) and
 * sets *code to the HTTP status. */
/* GET /health: the model served (path, version, when loaded) and the last
 * reload's outcome; 503 while draining. */
char *serve_ops_health(serve_http *h, unsigned *code);
/* GET /metrics: Prometheus text exposition format 0.0.4. */
char *serve_ops_metrics(serve_http *h);
#define SERVE_METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"
/* POST /admin/reload: body empty, or {"model": "PATH"}.  Reloads (as
 * serve_ops_reload), answers 200 with the new version, 400 for a bad body,
 * 422 when the model was refused (the old one serves on), 503 while
 * draining. */
char *serve_ops_admin_reload(serve_http *h, const char *body, size_t len, unsigned *code);
/* Reloads the model from path (NULL: the path served now) and says so on
 * stderr, naming `who` asked (SIGHUP, POST /admin/reload) and, when the new
 * model was refused, why.  ember_scorer_reload's status. */
int serve_ops_reload(serve_http *h, const char *path, const char *who);

#endif
