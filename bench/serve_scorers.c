/*
 * serve_scorers.c: the scorer's throughput by scoring threads, without HTTP
 * (include/ember-serve.h; docs/PERFORMANCE.md, "Serving").
 *
 *   bench_serve_scorers MODEL [SECONDS] [MAX_SCORERS] [BATCH]
 *
 * For scorers = 1 .. MAX_SCORERS (default 2): a scorer over MODEL
 * (ember_scorer_open, one OpenMP thread per predictor, micro-batches of
 * BATCH samples, default 512, no wait), and 2 x scorers client threads that
 * each submit one fixed binary request of BATCH samples of random ids
 * (one per feature) through ember_scorer_score, again and again, for
 * SECONDS (default 3).  One JSON line per run: samples/s, its ratio to one
 * scorer's in this run, the CPU the process used (user + system over wall:
 * cores' worth), and the resident memory.
 *
 * The limit beside it: how many cores' worth of CPU this process can get
 * at all right now, measured the same way by MAX_SCORERS threads spinning
 * for half a second (first line).  On a machine shared with other work, a
 * second scorer can only help as far as that goes.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_util.h"
#include "ember-serve.h"

static atomic_int stop;

static double cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec +
           (double)u.ru_stime.tv_usec * 1e-6;
}

static double rss_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lf", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb / 1024;
}

/* Sleeps (the main thread takes no CPU from the threads measured). */
static void nap(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void *spin(void *arg)
{
    volatile double x = 0;
    while (!atomic_load(&stop))
        for (int k = 0; k < 100000; k++)
            x += 1e-9 * k;
    return NULL;
}

/* Cores' worth of CPU that n spinning threads get over half a second. */
static double cores_available(int n)
{
    pthread_t t[64];
    atomic_store(&stop, 0);
    double c0 = cpu_seconds(), t0 = bench_now();
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, spin, NULL);
    nap(0.5);
    atomic_store(&stop, 1);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    return (cpu_seconds() - c0) / (bench_now() - t0);
}

typedef struct client {
    ember_scorer *s;
    const char *body;
    size_t len;
    int64_t samples;
    int failed;
} client;

static void *submit(void *arg)
{
    client *c = arg;
    while (!atomic_load(&stop)) {
        float *scores = NULL;
        int32_t n = 0;
        ember_score_timing t;
        if (ember_scorer_score(c->s, c->body, c->len, EMBER_BODY_BINARY, &scores, &n, &t) != EMBER_OK) {
            c->failed = 1;
            fprintf(stderr, "serve_scorers: %s\n", ember_errmsg(NULL));
            return NULL;
        }
        free(scores);
        c->samples += n;
    }
    return NULL;
}

/* A binary body (include/ember-serve.h) of b samples: dense 0.5, one
 * random id per feature. */
static char *make_body(ember_scorer *s, int32_t b, size_t *len)
{
    ember_model_info mi;
    ember_scorer_model *m = ember_scorer_model_acquire(s, NULL);
    ember_scorer_model_info(m, &mi);
    int32_t nd = mi.num_dense, nf = mi.num_features;
    size_t n = (size_t)b, at = 32;
    *len = 32 + 4 * n * (size_t)nd + 4 * n * (size_t)nf + 8 * n * (size_t)nf;
    char *body = calloc(1, *len);
    uint32_t head[5] = {1, (uint32_t)b, (uint32_t)nd, (uint32_t)nf, 0};
    uint64_t ids = n * (uint64_t)nf;
    memcpy(body, "EMBQ", 4);
    memcpy(body + 4, head, sizeof head);
    memcpy(body + 24, &ids, sizeof ids);
    for (size_t i = 0; i < n * (size_t)nd; i++, at += 4)
        memcpy(body + at, &(float){0.5f}, 4);
    for (size_t i = 0; i < n * (size_t)nf; i++, at += 4)
        memcpy(body + at, &(int32_t){1}, 4);
    uint64_t r = 88172645463325252ull;
    for (int32_t f = 0; f < nf; f++) {
        int64_t rows = 0;
        ember_scorer_model_feature(m, f, &rows);
        for (int32_t i = 0; i < b; i++, at += 8) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            int64_t id = (int64_t)(rows > 0 ? r % (uint64_t)rows : r >> 1);
            memcpy(body + at, &id, 8);
        }
    }
    ember_scorer_model_release(s, m);
    return body;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_serve_scorers MODEL [SECONDS] [MAX_SCORERS] [BATCH]\n");
        return 2;
    }
    double seconds = argc > 2 ? atof(argv[2]) : 3;
    int max_scorers = argc > 3 ? atoi(argv[3]) : 2, batch = argc > 4 ? atoi(argv[4]) : 512;
    if (max_scorers < 1 || max_scorers > 16 || batch < 1 || !(seconds > 0))
        return fprintf(stderr, "serve_scorers: MAX_SCORERS in [1, 16], BATCH >= 1, SECONDS > 0\n"), 2;
    printf("{\"bench\":\"serve_scorers\",\"limit\":\"cores_available\",\"threads\":%d,\"cores\":%.2f}\n", max_scorers,
           cores_available(max_scorers));
    double base = 0;
    for (int n = 1; n <= max_scorers; n++) {
        ember_scorer_config c = ember_scorer_config_default();
        c.scorers = n;
        c.max_batch = batch;
        c.max_wait = 0;
        ember_predictor_options po = {NULL, 1};
        ember_scorer *s = NULL;
        if (ember_scorer_open(argv[1], &po, &c, &s) != EMBER_OK)
            return fprintf(stderr, "serve_scorers: %s\n", ember_errmsg(NULL)), 1;
        size_t len;
        char *body = make_body(s, batch, &len);
        client cl[32];
        pthread_t t[32];
        int clients = 2 * n;
        atomic_store(&stop, 0);
        double c0 = cpu_seconds(), t0 = bench_now();
        for (int i = 0; i < clients; i++) {
            cl[i] = (client){s, body, len, 0, 0};
            pthread_create(&t[i], NULL, submit, &cl[i]);
        }
        nap(seconds);
        atomic_store(&stop, 1);
        int64_t samples = 0;
        int failed = 0;
        for (int i = 0; i < clients; i++) {
            pthread_join(t[i], NULL);
            samples += cl[i].samples;
            failed |= cl[i].failed;
        }
        double wall = bench_now() - t0, cores = (cpu_seconds() - c0) / wall, rate = (double)samples / wall;
        base = n == 1 ? rate : base;
        printf("{\"bench\":\"serve_scorers\",\"scorers\":%d,\"clients\":%d,\"batch\":%d,\"seconds\":%.2f,"
               "\"samples_per_s\":%.0f,\"vs_one_scorer\":%.3f,\"cpu_cores_used\":%.2f,\"rss_mb\":%.1f,\"failed\":%d}\n",
               n, clients, batch, wall, rate, rate / base, cores, rss_mb(), failed);
        fflush(stdout);
        ember_scorer_destroy(s);
        free(body);
        if (failed)
            return 1;
    }
    return 0;
}
