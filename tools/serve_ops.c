/*
 * serve_ops.c: `ember serve`'s endpoints for operations (docs/inference.md,
 * "Serving"): GET /health (the model served, its version, the last
 * reload), GET /metrics (Prometheus text format 0.0.4) and POST
 * /admin/reload (with --admin).  The reload itself, and every number shown,
 * are the library's (ember_scorer_reload, ember_scorer_stats,
 * ember_scorer_reload_status); this file only words them, and says on
 * stderr what each reload did, whoever asked for it (SIGHUP or the admin
 * endpoint).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve_http.h"
#include "tool_ctx.h"

/* Unix seconds as "2026-11-24T09:30:00.250Z" (UTC). */
static void iso_time(double t, char *out, size_t len)
{
    time_t s = (time_t)t;
    struct tm tm;
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", gmtime_r(&s, &tm));
    snprintf(out, len, "%s.%03dZ", day, (int)((t - (double)s) * 1000));
}

/* A JSON string of s: as it is when it is UTF-8, else with every byte
 * outside ASCII as '?' (a path may be any bytes). */
static json_t *jstr(const char *s)
{
    if (!s)
        return json_null();
    json_t *j = json_string(s);
    if (j)
        return j;
    char *a = strdup(s);
    for (char *p = a; p && *p; p++)
        *p = (unsigned char)*p < 0x80 ? *p : '?';
    j = a ? json_string(a) : NULL;
    free(a);
    return j;
}

/* j as one line of compact JSON (malloc'd), j released. */
static char *dump_line(json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(j);
    char *line = s ? realloc(s, strlen(s) + 2) : NULL;
    if (!line) {
        free(s);
        return NULL;
    }
    strcat(line, "\n");
    return line;
}

/* The last reload as JSON, or null when there was none. */
static json_t *last_reload_json(const ember_reload_status *r)
{
    if (r->ok + r->failed == 0)
        return json_null();
    char at[48];
    iso_time(r->last_at, at, sizeof at);
    json_t *j = json_pack("{s:b,s:s,s:o,s:f}", "ok", r->last_ok, "at", at, "model", jstr(r->last_path), "seconds",
                          r->last_seconds);
    if (j && !r->last_ok)
        json_object_set_new(j, "error", jstr(r->last_error));
    if (j && r->last_note[0])
        json_object_set_new(j, "note", jstr(r->last_note));
    return j ? j : json_null();
}

/* The model serving now, pinned (release it), with the reloads as of it,
 * its description and its load time in ISO 8601. */
static ember_scorer_model *pin_current(serve_http *h, ember_reload_status *r, ember_model_info *mi, char *loaded,
                                       size_t len)
{
    ember_scorer_model *m = ember_scorer_model_acquire(h->scorer, r);
    ember_scorer_model_info(m, mi);
    iso_time(mi->loaded_at, loaded, len);
    return m;
}

char *serve_ops_health(serve_http *h, unsigned *code)
{
    if (atomic_load(&h->draining)) {
        *code = 503;
        return dump_line(json_pack("{s:s}", "status", "draining"));
    }
    ember_reload_status r;
    ember_model_info mi;
    char loaded[48];
    ember_scorer_model *m = pin_current(h, &r, &mi, loaded, sizeof loaded);
    json_t *j = json_pack("{s:s,s:o,s:o,s:I,s:s,s:i,s:i,s:i,s:i,s:{s:I,s:I},s:o}", "status", "ok", "model",
                          jstr(mi.path), "resolved", jstr(mi.resolved), "version", (json_int_t)mi.version, "loaded_at", loaded, "tables",
                          (int)mi.num_tables, "features", (int)mi.num_features, "dense", (int)mi.num_dense,
                          "scorers", (int)h->scorers, "reloads", "ok", (json_int_t)r.ok, "failed",
                          (json_int_t)r.failed, "last_reload", last_reload_json(&r));
    ember_scorer_model_release(h->scorer, m);
    *code = 200;
    return dump_line(j);
}

int serve_ops_reload(serve_http *h, const char *path, const char *who)
{
    int st = ember_scorer_reload(h->scorer, path);
    char why[1200];
    snprintf(why, sizeof why, "%s", ember_errmsg(NULL)); /* this thread's */
    ember_reload_status r;
    ember_model_info mi;
    ember_scorer_model *m = ember_scorer_model_acquire(h->scorer, &r); /* and the reloads as of it */
    ember_scorer_model_info(m, &mi);
    if (st == EMBER_OK)
        fprintf(stderr, "ember serve: %s: now serving %s (%s), version %lld (opened, checked and swapped in %.2f "
                "s)%s%s\n", who, mi.path, mi.resolved, (long long)mi.version, r.last_seconds,
                r.last_note[0] ? "; " : "", r.last_note);
    else
        fprintf(stderr, "ember serve: %s: reload refused (%s), version %lld of %s serves on: %s\n", who,
                ember_status_str(st), (long long)mi.version, mi.path, why);
    ember_scorer_model_release(h->scorer, m);
    return st;
}

/* The admin body: empty, or {"model": "PATH"}.  0 with *path (malloc'd, or
 * NULL: the path served now), or -1 with why. */
static int admin_body(const char *body, size_t len, char **path, char *why, size_t whylen)
{
    *path = NULL;
    size_t k = 0;
    while (k < len && (body[k] == ' ' || body[k] == '\t' || body[k] == '\r' || body[k] == '\n'))
        k++;
    if (k == len)
        return 0;
    json_error_t e;
    json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &e);
    const char *key;
    json_t *v;
    int bad = 0;
    if (!j) {
        snprintf(why, whylen, "JSON: line %d, column %d: %s", e.line, e.column, e.text);
        return -1;
    }
    if (!json_is_object(j))
        bad = snprintf(why, whylen, "the body is a JSON object ({\"model\": \"PATH\"}) or empty");
    json_object_foreach(j, key, v) {
        if (bad)
            break;
        if (strcmp(key, "model"))
            bad = snprintf(why, whylen, "unknown field \"%.100s\" (the body takes \"model\" only)", key);
        else if (!json_is_string(v) || !json_string_length(v))
            bad = snprintf(why, whylen, "\"model\": expected the path of a bundle or checkpoint");
        else if (!(*path = strdup(json_string_value(v))))
            bad = snprintf(why, whylen, "out of memory");
    }
    json_decref(j);
    return bad ? -1 : 0;
}

char *serve_ops_admin_reload(serve_http *h, const char *body, size_t len, unsigned *code)
{
    char why[256], *path = NULL;
    if (atomic_load(&h->draining)) {
        *code = 503;
        return dump_line(json_pack("{s:s}", "error", "the server is shutting down: no reload"));
    }
    if (admin_body(body, len, &path, why, sizeof why) != 0) {
        *code = 400;
        return dump_line(json_pack("{s:o}", "error", jstr(why)));
    }
    int st = serve_ops_reload(h, path, "POST /admin/reload");
    free(path);
    ember_reload_status r;
    ember_model_info mi;
    char loaded[48];
    ember_scorer_model *m = pin_current(h, &r, &mi, loaded, sizeof loaded);
    json_t *j;
    if (st == EMBER_OK) {
        *code = 200;
        j = json_pack("{s:b,s:o,s:o,s:I,s:s,s:f}", "ok", 1, "model", jstr(mi.path), "resolved", jstr(mi.resolved),
                      "version", (json_int_t)mi.version, "loaded_at", loaded, "seconds", r.last_seconds);
        if (j && r.last_note[0])
            json_object_set_new(j, "note", jstr(r.last_note));
    } else {
        *code = st == EMBER_ESTATE ? 503 : 422;
        j = json_pack("{s:b,s:o,s:{s:o,s:I,s:s}}", "ok", 0, "error", jstr(r.last_error), "serving", "model",
                      jstr(mi.path), "version", (json_int_t)mi.version, "loaded_at", loaded);
    }
    ember_scorer_model_release(h->scorer, m);
    return dump_line(j);
}

/* ------------------------------------------------------------ /metrics */

/* A label value as the text format wants it: \ " and newline escaped. */
static void label(FILE *f, const char *v)
{
    for (; v && *v; v++)
        fputs(*v == '\\' ? "\\\\" : *v == '"' ? "\\\"" : *v == '\n' ? "\\n" : (char[2]){*v, 0}, f);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(FILE *f, const char *name, const char *help, long long v)
{
    family(f, name, "counter", help);
    fprintf(f, "%s %lld\n", name, v);
}

static void gauge(FILE *f, const char *name, const char *help, double v)
{
    family(f, name, "gauge", help);
    fprintf(f, "%s %.17g\n", name, v);
}

/* The request latency: a histogram since the start, and a summary whose
 * quantiles are /stats' (the last 65,536 requests). */
static void latency(FILE *f, const ember_serve_stats *st)
{
    family(f, "ember_request_duration_seconds", "histogram",
           "Requests by the seconds from their first byte to their answer.");
    for (int i = 0; i < EMBER_SERVE_LATENCY_BUCKETS; i++)
        fprintf(f, "ember_request_duration_seconds_bucket{le=\"%g\"} %lld\n", st->latency_bound[i],
                (long long)st->latency_le[i]);
    fprintf(f, "ember_request_duration_seconds_bucket{le=\"+Inf\"} %lld\n", (long long)st->requests);
    fprintf(f, "ember_request_duration_seconds_sum %.17g\nember_request_duration_seconds_count %lld\n",
            st->seconds_total, (long long)st->requests);
    family(f, "ember_request_latency_seconds", "summary",
           "Request latency; the quantiles are over the last 65536 requests, as /stats'.");
    fprintf(f, "ember_request_latency_seconds{quantile=\"0.5\"} %.17g\n", st->latency_p50);
    fprintf(f, "ember_request_latency_seconds{quantile=\"0.99\"} %.17g\n", st->latency_p99);
    fprintf(f, "ember_request_latency_seconds_sum %.17g\nember_request_latency_seconds_count %lld\n",
            st->seconds_total, (long long)st->requests);
    family(f, "ember_batch_size_samples", "summary",
           "Samples per micro-batch; the quantiles are over the last 65536 micro-batches.");
    fprintf(f, "ember_batch_size_samples{quantile=\"0.5\"} %.17g\n", st->batch_p50);
    fprintf(f, "ember_batch_size_samples{quantile=\"0.99\"} %.17g\n", st->batch_p99);
    fprintf(f, "ember_batch_size_samples_sum %lld\nember_batch_size_samples_count %lld\n", (long long)st->samples,
            (long long)st->batches);
    family(f, "ember_request_phase_seconds_total", "counter",
           "Seconds spent per phase, summed over requests (http: the rest of a request's latency).");
    const char *phase[] = {"decode", "wait", "score", "http"};
    double v[] = {st->seconds_decode, st->seconds_wait, st->seconds_score,
                  st->seconds_total - st->seconds_decode - st->seconds_wait - st->seconds_score};
    for (int i = 0; i < 4; i++)
        fprintf(f, "ember_request_phase_seconds_total{phase=\"%s\"} %.17g\n", phase[i], v[i] > 0 ? v[i] : 0);
}

static void model(FILE *f, serve_http *h)
{
    ember_reload_status r;
    ember_model_info mi;
    ember_scorer_model *m = ember_scorer_model_acquire(h->scorer, &r); /* and the reloads as of it */
    ember_scorer_model_info(m, &mi);
    family(f, "ember_model_info", "gauge", "The model served: its path and version (1, then one more per reload).");
    fprintf(f, "ember_model_info{model=\"");
    label(f, mi.path);
    fprintf(f, "\",version=\"%lld\"} 1\n", (long long)mi.version);
    ember_scorer_model_release(h->scorer, m);
    gauge(f, "ember_model_version", "The version of the model served.", (double)mi.version);
    gauge(f, "ember_model_loaded_timestamp_seconds", "When the model served was loaded (Unix seconds).",
          mi.loaded_at);
    family(f, "ember_model_reloads_total", "counter", "Reloads, by result: ok (swapped in) or failed (refused).");
    fprintf(f, "ember_model_reloads_total{result=\"ok\"} %lld\nember_model_reloads_total{result=\"failed\"} %lld\n",
            (long long)r.ok, (long long)r.failed);
    gauge(f, "ember_model_last_reload_timestamp_seconds", "When the last reload ended (Unix seconds); 0: none yet.",
          r.last_at);
    gauge(f, "ember_model_last_reload_success", "1 when the last reload succeeded or there was none, 0 when it "
          "was refused.", r.ok + r.failed == 0 || r.last_ok ? 1 : 0);
}

char *serve_ops_metrics(serve_http *h)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    ember_serve_stats st;
    ember_scorer_stats(h->scorer, &st);
    counter(f, "ember_requests_total", "Requests answered, with scores or an error.", (long long)st.requests);
    counter(f, "ember_request_errors_total", "Requests answered with an error (4xx or 5xx).", (long long)st.errors);
    counter(f, "ember_samples_total", "Samples scored.", (long long)st.samples);
    counter(f, "ember_batches_total", "Micro-batches scored.", (long long)st.batches);
    latency(f, &st);
    gauge(f, "ember_requests_in_flight", "Requests between their headers and their answer.",
          (double)atomic_load(&h->active));
    gauge(f, "ember_scorers", "Scoring threads (--scorers), each with its own copy of the model.",
          (double)st.scorers);
    gauge(f, "ember_start_time_seconds", "When the server started (Unix seconds).", h->started_unix);
    model(f, h);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
