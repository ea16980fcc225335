/*
 * serve_http.h: the HTTP face of `ember serve` (libmicrohttpd): requests
 * in, the library's scorer (include/ember-serve.h: bodies decoded and
 * scored in micro-batches), answers out.
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
    const char *model;         /* the path served, for /health           */
    int32_t num_tables, threads, max_batch;
    double max_wait, started;
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
 * 0.25 s), then stops the scorer (scoring what it holds) and the daemon.
 * Returns the requests still in flight when the wait ended. */
int serve_http_drain(serve_http *h, double seconds, volatile sig_atomic_t *signals);
/* The statistics as one JSON object (malloc'd). */
char *serve_http_stats_json(const serve_http *h);

#endif
