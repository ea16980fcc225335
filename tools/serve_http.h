/*
 * serve_http.h: the HTTP face of `ember serve` (libmicrohttpd): requests
 * in, the library's decoder and scorer (src/serve/), answers out.
 */
#ifndef EMBER_TOOLS_SERVE_HTTP_H
#define EMBER_TOOLS_SERVE_HTTP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/request.h"
#include "serve/scorer.h"

typedef struct serve_http {
    serve_shape shape;
    serve_shape_store shape_store;
    serve_scorer *scorer;
    const char *model;         /* the path served, for /health           */
    int32_t num_tables, threads, max_batch;
    double max_wait, started;
    size_t max_body;
    atomic_int active;         /* requests between first byte and completion */
    atomic_int draining;       /* 1 after SIGTERM: answers close their connection */
    struct MHD_Daemon *daemon;
} serve_http;

/* Starts the daemon on host:port (port 0: any free port), thread per
 * connection, at most `connections` at once.  0, or -1 with err. */
int serve_http_start(serve_http *h, const char *host, int port, int connections, char *err, size_t errlen);
/* The port bound. */
int serve_http_port(const serve_http *h);
/* Stops accepting connections, waits up to `seconds` for the requests in
 * flight, stops the scorer (scoring what it holds), then the daemon.
 * Returns the requests still in flight when the wait ran out. */
int serve_http_drain(serve_http *h, double seconds);
/* The statistics as one JSON object (malloc'd). */
char *serve_http_stats_json(const serve_http *h);

#endif
