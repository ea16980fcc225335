/*
 * serve_http.c: `ember serve`'s endpoints over libmicrohttpd
 * (docs/inference.md, "Serving").
 *
 *   POST /score    JSON or binary body (Content-Type application/octet-
 *                  stream) -> {"scores": [...]} or little-endian float32
 *   GET  /health   {"status": "ok", "model", "version", ...}; 503 while
 *                  draining (serve_ops.c)
 *   GET  /model    the input a request gives: dense count, features by name
 *                  with their rows (0: 64-bit keys)
 *   GET  /stats    requests, errors, latency p50/p99, batch sizes, where
 *                  the time went
 *   GET  /metrics  the same for Prometheus (serve_ops.c)
 *   POST /admin/reload   with --admin only: a new model version (serve_ops.c)
 *
 * A thread per connection: a request's thread decodes its body, hands the
 * samples to the scorer and blocks until its micro-batch is scored, so a
 * slow client holds only its own thread.  Bodies are collected up to
 * max_body; a larger one (by Content-Length, or while it streams in) is
 * answered 413 without being kept.  Every client mistake is a 4xx with
 * {"error": reason}; nothing a body holds reaches the predictor unchecked.
 * That includes the mistakes libmicrohttpd refuses before on_request is
 * called (on_mhd_log below: a Content-Length that is not a number, ...).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve_http.h"
#include "tool_ctx.h"

typedef struct request {
    double t0;
    char *body;
    size_t len, cap;
    int too_big;
} request;

/* allow: the Allow header of a 405, else NULL; close: the connection closes
 * after this answer (as every answer's does while draining). */
static enum MHD_Result answer_allow(serve_http *h, struct MHD_Connection *c, unsigned code, const char *type,
                                    void *data, size_t len, const char *allow, int close)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(data);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (close || atomic_load(&h->draining))
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ok = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result answer(serve_http *h, struct MHD_Connection *c, unsigned code, const char *type, void *data,
                              size_t len)
{
    return answer_allow(h, c, code, type, data, len, NULL, 0);
}

static enum MHD_Result answer_json_allow(serve_http *h, struct MHD_Connection *c, unsigned code, json_t *j,
                                         const char *allow)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s) /* a string that is not UTF-8 (a path), or out of memory */
        s = strdup(code < 300 ? "{\"error\":\"cannot write the answer\"}"
                              : "{\"error\":\"(a message that is not UTF-8)\"}");
    if (!s)
        return MHD_NO;
    size_t n = strlen(s);
    s[n] = '\n'; /* the NUL becomes a newline: curl output ends its line */
    return answer_allow(h, c, code, "application/json", s, n + 1, allow, 0);
}

static enum MHD_Result answer_json(serve_http *h, struct MHD_Connection *c, unsigned code, json_t *j)
{
    return answer_json_allow(h, c, code, j, NULL);
}

/* {"error": why} and a newline (*len bytes, malloc'd, no NUL), or NULL when
 * out of memory.  why may quote the client's bytes, cut anywhere by the
 * message buffer: anything not ASCII becomes '?', so it is always JSON. */
static char *error_line(const char *why, size_t *len)
{
    char ascii[1024];
    size_t i = 0;
    for (; why[i] && i + 1 < sizeof ascii; i++)
        ascii[i] = (unsigned char)why[i] < 0x80 ? why[i] : '?';
    ascii[i] = 0;
    json_t *j = json_pack("{s:s}", "error", ascii);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s)
        return NULL;
    *len = strlen(s);
    s[(*len)++] = '\n'; /* the NUL becomes a newline: curl output ends its line */
    return s;
}

static enum MHD_Result answer_error_allow(serve_http *h, struct MHD_Connection *c, unsigned code, const char *why,
                                          const char *allow)
{
    size_t n;
    char *s = error_line(why, &n);
    return s ? answer_allow(h, c, code, "application/json", s, n, allow, 0) : MHD_NO;
}

static enum MHD_Result answer_error(serve_http *h, struct MHD_Connection *c, unsigned code, const char *why)
{
    return answer_error_allow(h, c, code, why, NULL);
}

static enum MHD_Result answer_scores(serve_http *h, struct MHD_Connection *c, int binary, const float *s, int32_t n)
{
    if (binary) {
        void *b = malloc(sizeof(float) * (size_t)n + 1);
        if (!b)
            return MHD_NO;
        memcpy(b, s, sizeof(float) * (size_t)n);
        return answer(h, c, MHD_HTTP_OK, "application/octet-stream", b, sizeof(float) * (size_t)n);
    }
    /* "%.9g" gives back every float exactly */
    size_t cap = 16 + 18 * (size_t)n, at = 0;
    char *b = malloc(cap);
    if (!b)
        return MHD_NO;
    at += (size_t)snprintf(b, cap, "{\"scores\":[");
    for (int32_t i = 0; i < n; i++) /* JSON has no NaN: a score that is not finite is null */
        at += (size_t)(isfinite(s[i]) ? snprintf(b + at, cap - at, i ? ",%.9g" : "%.9g", (double)s[i])
                                      : snprintf(b + at, cap - at, i ? ",null" : "null"));
    at += (size_t)snprintf(b + at, cap - at, "]}\n");
    return answer(h, c, MHD_HTTP_OK, "application/json", b, at);
}

char *serve_http_stats_json(const serve_http *h)
{
    ember_serve_stats st;
    ember_reload_status rs;
    ember_model_info mi;
    ember_scorer_stats(h->scorer, &st);
    ember_scorer_model *m = ember_scorer_model_acquire(h->scorer, &rs); /* and the reloads as of it */
    ember_scorer_model_info(m, &mi);
    ember_scorer_model_release(h->scorer, m);
    double n = st.requests > 0 ? (double)st.requests : 1;
    json_t *j = json_pack("{s:I,s:I,s:I,s:I,s:{s:f,s:f,s:f},s:{s:f,s:f,s:f},s:{s:f,s:f,s:f,s:f},"
                          "s:i,s:i,s:i,s:f,s:i,s:f,s:I,s:{s:I,s:I}}",
                          "requests", (json_int_t)st.requests, "errors", (json_int_t)st.errors, "samples",
                          (json_int_t)st.samples, "batches", (json_int_t)st.batches, "latency_ms", "p50",
                          st.latency_p50 * 1e3, "p99", st.latency_p99 * 1e3, "mean", st.latency_mean * 1e3,
                          "batch_size", "p50", st.batch_p50, "p99", st.batch_p99, "mean", st.batch_mean,
                          "ms_per_request", "decode", st.seconds_decode / n * 1e3, "wait",
                          st.seconds_wait / n * 1e3, "score", st.seconds_score / n * 1e3, "http",
                          (st.seconds_total - st.seconds_decode - st.seconds_wait - st.seconds_score) / n * 1e3,
                          "threads", (int)h->threads, "scorers", (int)st.scorers, "max_batch", (int)h->max_batch,
                          "max_wait_us", h->max_wait * 1e6, "in_flight", atomic_load(&h->active), "uptime_s",
                          tool_now() - h->started, "model_version", (json_int_t)mi.version, "reloads", "ok",
                          (json_int_t)rs.ok, "failed", (json_int_t)rs.failed);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(j);
    char *line = s ? realloc(s, strlen(s) + 2) : NULL; /* one line: a newline at the end */
    if (!line) {
        free(s);
        return NULL;
    }
    strcat(line, "\n");
    return line;
}

/* Whether a Content-Type is the media type t (parameters after ';' allowed). */
static int is_type(const char *type, const char *t)
{
    size_t n = strlen(t);
    return type && !strncasecmp(type, t, n) && (type[n] == 0 || type[n] == ';' || type[n] == ' ');
}

static enum MHD_Result on_score(serve_http *h, struct MHD_Connection *c, request *r)
{
    if (r->too_big) {
        char why[160];
        snprintf(why, sizeof why, "the body is larger than this server takes (%zu bytes; --max-body)", h->max_body);
        return answer_error(h, c, MHD_HTTP_CONTENT_TOO_LARGE, why);
    }
    const char *type = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    ember_body_format format = is_type(type, "application/octet-stream") ? EMBER_BODY_BINARY
                               : is_type(type, "text/csv")                 ? EMBER_BODY_CSV
                               : is_type(type, "text/tab-separated-values") ? EMBER_BODY_TSV
                                                                            : EMBER_BODY_JSON;
    int binary = format == EMBER_BODY_BINARY;
    ember_score_timing t;
    float *scores = NULL;
    int32_t n = 0;
    int st = ember_scorer_score(h->scorer, r->body, r->len, format, &scores, &n, &t);
    const char *err = ember_errmsg(NULL); /* this thread's: the scorer is shared */
    enum MHD_Result ok;
    if (st == EMBER_EINPUT || st == EMBER_ENOMEM) { /* the body; no memory to decode it: the server's fault */
        ember_scorer_record(h->scorer, 1, tool_now() - r->t0, NULL);
        return answer_error(h, c, st == EMBER_ENOMEM ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_BAD_REQUEST, err);
    }
    ok = st == EMBER_OK ? answer_scores(h, c, binary, scores, n)
                        : answer_error(h, c, st == EMBER_ESTATE ? MHD_HTTP_SERVICE_UNAVAILABLE
                                                                : MHD_HTTP_INTERNAL_SERVER_ERROR, err);
    ember_scorer_record(h->scorer, st != EMBER_OK, tool_now() - r->t0, st == EMBER_OK ? &t : NULL);
    free(scores);
    return ok;
}

/* Content-Length given more than once with different values: libmicrohttpd
 * reads the body by the first, which a proxy in front may not have done. */
typedef struct lengths {
    const char *first, *other;
} lengths;

static enum MHD_Result each_length(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    lengths *l = cls;
    if (!key || !value || strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH))
        return MHD_YES;
    if (!l->first)
        l->first = value;
    else if (strcmp(l->first, value))
        l->other = value;
    return l->other ? MHD_NO : MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *size, void **con_cls)
{
    serve_http *h = cls;
    request *r = *con_cls;
    if (!r) { /* headers are in: the request starts */
        if (!(r = calloc(1, sizeof *r)))
            return MHD_NO;
        r->t0 = tool_now();
        *con_cls = r;
        atomic_fetch_add(&h->active, 1);
        atomic_store(&h->last_start, r->t0);
        lengths l = {NULL, NULL};
        if (!MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
            MHD_get_connection_values(c, MHD_HEADER_KIND, each_length, &l);
        if (l.other) { /* where this body ends is unclear: answered before it is read, and closed */
            char why[160];
            snprintf(why, sizeof why, "Content-Length given twice, as \"%.40s\" and \"%.40s\"", l.first, l.other);
            size_t n;
            char *s = error_line(why, &n);
            return s ? answer_allow(h, c, MHD_HTTP_BAD_REQUEST, "application/json", s, n, NULL, 1) : MHD_NO;
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > h->max_body) { /* answered before the body is read (or continued) */
            r->too_big = 1;
            return on_score(h, c, r);
        }
        return MHD_YES;
    }
    if (*size > 0) { /* a piece of the body */
        if (!r->too_big && r->len + *size > h->max_body)
            r->too_big = 1;
        if (!r->too_big && r->len + *size + 1 > r->cap) {
            size_t cap = r->cap * 2 > r->len + *size + 1 ? r->cap * 2 : r->len + *size + 1;
            char *b = realloc(r->body, cap < h->max_body + 1 ? cap : h->max_body + 1);
            if (!b)
                return MHD_NO;
            r->body = b;
            r->cap = cap < h->max_body + 1 ? cap : h->max_body + 1;
        }
        if (!r->too_big) {
            memcpy(r->body + r->len, data, *size);
            r->len += *size;
        }
        *size = 0;
        return MHD_YES;
    }
    if (!strcmp(url, "/score"))
        return strcmp(method, "POST")
                   ? answer_error_allow(h, c, MHD_HTTP_METHOD_NOT_ALLOWED, "/score takes POST", "POST")
                   : on_score(h, c, r);
    if (!strcmp(url, "/admin/reload")) {
        if (!h->admin)
            return answer_error(h, c, MHD_HTTP_NOT_FOUND, "no such endpoint: the admin endpoints are off (ember "
                                "serve --admin turns them on)");
        if (strcmp(method, "POST"))
            return answer_error_allow(h, c, MHD_HTTP_METHOD_NOT_ALLOWED, "/admin/reload takes POST", "POST");
        if (r->too_big)
            return answer_error(h, c, MHD_HTTP_CONTENT_TOO_LARGE, "the body is larger than this server takes");
        unsigned code = 0;
        char *s = serve_ops_admin_reload(h, r->body, r->len, &code);
        return s ? answer(h, c, code, "application/json", s, strlen(s)) : MHD_NO;
    }
    int known = !strcmp(url, "/health") || !strcmp(url, "/stats") || !strcmp(url, "/model") ||
                !strcmp(url, "/metrics");
    if (known && strcmp(method, "GET") && strcmp(method, "HEAD"))
        return answer_error_allow(h, c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only", "GET, HEAD");
    if (!strcmp(url, "/health")) {
        unsigned code = 0;
        char *s = serve_ops_health(h, &code);
        return s ? answer(h, c, code, "application/json", s, strlen(s)) : MHD_NO;
    }
    if (!strcmp(url, "/metrics")) {
        char *s = serve_ops_metrics(h);
        return s ? answer(h, c, MHD_HTTP_OK, SERVE_METRICS_TYPE, s, strlen(s)) : MHD_NO;
    }
    if (!strcmp(url, "/model")) {
        ember_scorer_model *m = ember_scorer_model_acquire(h->scorer, NULL); /* a reload waits for it */
        ember_model_info mi;
        ember_scorer_model_info(m, &mi);
        json_t *fs = json_array();
        for (int32_t f = 0; fs && f < mi.num_features; f++) {
            int64_t rows = 0;
            const char *name = ember_scorer_model_feature(m, f, &rows);
            json_array_append_new(fs, json_pack("{s:s,s:I}", "name", name, "rows", (json_int_t)rows));
        }
        uint64_t xxh3 = 0;
        const char *why = "";
        const char *schema = ember_scorer_model_input_schema(m, &xxh3, &why);
        json_t *in = schema ? json_loads(schema, 0, NULL) : json_null();
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)xxh3);
        json_t *j = json_pack("{s:s?,s:I,s:i,s:o,s:i,s:o,s:s?,s:s?}", "model", mi.path, "version",
                              (json_int_t)mi.version, "dense", (int)mi.num_dense, "features", fs, "max_samples",
                              (int)h->max_samples, "input_schema", in ? in : json_null(), "schema_xxh3",
                              schema ? hex : NULL, "no_input_schema", schema ? NULL : why);
        ember_scorer_model_release(h->scorer, m);
        return answer_json(h, c, MHD_HTTP_OK, j);
    }
    if (!strcmp(url, "/stats")) {
        char *s = serve_http_stats_json(h);
        return s ? answer(h, c, MHD_HTTP_OK, "application/json", s, strlen(s)) : MHD_NO;
    }
    return answer_error(h, c, MHD_HTTP_NOT_FOUND,
                        "no such endpoint (POST /score, GET /health, /model, /stats, /metrics)");
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    serve_http *h = cls;
    atomic_fetch_add(&h->connections, code == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why)
{
    serve_http *h = cls;
    request *r = *con_cls;
    if (!r)
        return;
    free(r->body);
    free(r);
    *con_cls = NULL;
    atomic_fetch_sub(&h->active, 1);
}

/*
 * Requests libmicrohttpd refuses itself, before on_request is called (or
 * while it reads a body): a Content-Length that is not a number of bytes
 * ("abc", "-5", "" ...) or does not fit 64 bits, a header line without a
 * colon, headers larger than a connection's memory, a broken chunked body.
 * libmicrohttpd answers those with an HTML page, and 0.9.75 (Debian 12's)
 * sends the status line and headers of its Content-Length answers twice: the
 * second copy counts as the body, the page follows it, and no client can
 * frame the answer.  There is no hook to see the headers first, but
 * libmicrohttpd logs "Error processing request (HTTP response code is %u
 * ('%s'))" just before it builds such an answer, and it does so in the
 * connection's own thread (MHD_USE_THREAD_PER_CONNECTION; on_uri, called in
 * that thread when a request line is read, says which connection it serves).
 * on_mhd_log then writes ember's answer on the socket itself: the same
 * status, {"error": reason}, Connection: close; and it shuts the socket's
 * sending side, so libmicrohttpd's own answer is never sent (its send fails
 * and it closes the connection).
 */
static _Thread_local struct MHD_Connection *this_connection; /* the thread's (a thread per connection) */
static _Thread_local int answered_here; /* ember answered what libmicrohttpd refused: the connection ends */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    this_connection = c;
    return NULL; /* *con_cls stays NULL: on_request's first call starts the request */
}

/* 0: a number of bytes libmicrohttpd takes; 1: not a number (libmicrohttpd's
 * 400); 2: digits that do not fit 64 bits (its 413). */
static int content_length_fault(const char *v)
{
    uint64_t n = 0;
    if (!*v)
        return 1;
    for (; *v; v++) {
        if (*v < '0' || *v > '9')
            return 1;
        unsigned d = (unsigned)(*v - '0');
        if (n > (UINT64_MAX - d) / 10)
            return 2; /* the rest may not be digits either: libmicrohttpd says 413 then too */
        n = n * 10 + d;
    }
    return 0;
}

/* Sends all of buf on a socket libmicrohttpd may have made non-blocking,
 * waiting up to a second for room each time. */
static void send_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
            buf += k;
            n -= (size_t)k;
        } else if (k < 0 && errno == EINTR) {
            continue;
        } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {fd, POLLOUT, 0};
            if (poll(&p, 1, 1000) <= 0)
                return;
        } else {
            return;
        }
    }
}

static void answer_refused(serve_http *h, struct MHD_Connection *c, unsigned code, const char *page)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!info || info->connect_fd == MHD_INVALID_SOCKET)
        return;
    int fd = info->connect_fd;
    char why[256];
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    int fault = cl ? content_length_fault(cl) : 0;
    if (fault == 2 && code == MHD_HTTP_CONTENT_TOO_LARGE) {
        snprintf(why, sizeof why, "the body is larger than this server takes (%zu bytes; --max-body)", h->max_body);
    } else if (fault == 1 && code == MHD_HTTP_BAD_REQUEST) {
        snprintf(why, sizeof why, "Content-Length \"%.64s%s\" is not a number of bytes (decimal digits only)", cl,
                 strlen(cl) > 64 ? "..." : "");
    } else { /* the text of libmicrohttpd's page: "<html>...<body>Your HTTP ...</body></html>" */
        const char *b = strstr(page, "<body>");
        b = b ? b + 6 : page;
        size_t n = 0;
        for (int tag = 0; *b && n + 1 < sizeof why && strncmp(b, "</body>", 7); b++) {
            if (*b == '<' || *b == '>')
                tag = *b == '<';
            else if (!tag)
                why[n++] = *b;
        }
        why[n] = 0;
        if (!n)
            snprintf(why, sizeof why, "the HTTP request is malformed");
    }
    size_t len;
    char *body = error_line(why, &len);
    if (!body)
        return; /* out of memory: libmicrohttpd's own answer goes out */
    char date[64], head[320];
    struct tm tm;
    time_t now = time(NULL);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&now, &tm));
    const char *phrase = MHD_get_reason_phrase_for(code);
    int k = snprintf(head, sizeof head,
                     "HTTP/1.1 %u %s\r\nDate: %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     code, phrase && *phrase ? phrase : "Error", date, len);
    send_all(fd, head, (size_t)k);
    send_all(fd, body, len);
    free(body);
    shutdown(fd, SHUT_WR);
}

static void on_mhd_log(void *cls, const char *fm, va_list ap)
{
    static const char refused[] = "Error processing request (HTTP response code is %u ('%s'))";
    if (answered_here) /* "Failed to send the response headers ...": the answer never meant to go */
        return;
    va_list copy;
    va_copy(copy, ap);
    vfprintf(stderr, fm, copy); /* what MHD_USE_ERROR_LOG alone prints */
    va_end(copy);
    if (this_connection && !strncmp(fm, refused, sizeof refused - 1)) {
        unsigned code = va_arg(ap, unsigned);
        const char *page = va_arg(ap, const char *);
        answer_refused(cls, this_connection, code, page ? page : "");
        answered_here = 1; /* one answer: the connection closes, and its thread ends */
    }
}

int serve_http_start(serve_http *h, const char *host, int port, int connections, char *err, size_t errlen)
{
    struct sockaddr_in v4 = {0};
    struct sockaddr_in6 v6 = {0};
    const struct sockaddr *addr = NULL;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (inet_pton(AF_INET, host, &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons((uint16_t)port);
        addr = (const struct sockaddr *)&v4;
    } else if (inet_pton(AF_INET6, host, &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons((uint16_t)port);
        addr = (const struct sockaddr *)&v6;
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(err, errlen, "--host %s: not an IPv4 or IPv6 address", host);
        return -1;
    }
    h->started = tool_now();
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    h->started_unix = (double)wall.tv_sec + (double)wall.tv_nsec * 1e-9;
    /* the logger first, so that it gets every message (microhttpd.h) */
    h->daemon = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER,
                                 on_mhd_log, h, MHD_OPTION_URI_LOG_CALLBACK, on_uri, h, MHD_OPTION_SOCK_ADDR, addr,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_NOTIFY_CONNECTION,
                                 on_connection, h, MHD_OPTION_CONNECTION_LIMIT,
                                 (unsigned)connections, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_END);
    if (!h->daemon) {
        snprintf(err, errlen, "cannot listen on %s port %d (in use, not an address of this machine, or not permitted)",
                 host, port);
        return -1;
    }
    return 0;
}

int serve_http_port(const serve_http *h)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return i ? (int)i->port : -1;
}

int serve_http_drain(serve_http *h, double seconds, volatile sig_atomic_t *signals)
{
    atomic_store(&h->draining, 1);
    double t0 = tool_now(), until = t0 + seconds;
    MHD_socket fd = MHD_quiesce_daemon(h->daemon);
    if (fd != MHD_INVALID_SOCKET) {
        /* connections the kernel completed but MHD had not accepted yet are
         * served too; then the socket stops taking any (refused, not reset) */
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        for (;;) {
            struct sockaddr_storage a;
            socklen_t al = sizeof a;
            int cfd = accept(fd, (struct sockaddr *)&a, &al);
            if (cfd < 0)
                break;
            MHD_add_connection(h->daemon, cfd, (struct sockaddr *)&a, al); /* closes cfd if it fails */
        }
        shutdown(fd, SHUT_RDWR);
    }
    while (tool_now() < until && *signals < 2) {
        double quiet = tool_now() - (atomic_load(&h->last_start) > t0 ? atomic_load(&h->last_start) : t0);
        if (atomic_load(&h->active) == 0 && (atomic_load(&h->connections) == 0 || quiet > 0.25))
            break;
        usleep(2000);
    }
    int left = atomic_load(&h->active);
    ember_scorer_stop(h->scorer); /* scores what it holds; later requests get 503 */
    MHD_stop_daemon(h->daemon);   /* closes the connections left */
    h->daemon = NULL;
    if (fd != MHD_INVALID_SOCKET)
        close(fd); /* only now (microhttpd.h, MHD_quiesce_daemon) */
    return left;
}
