/*
 * cmd_predict.c: `ember predict CHECKPOINT DATA [--out FILE]`: one score per
 * sample of a data file (Criteo TSV or ember's binary format) or of the
 * built-in task's held-out stream, with AUC and log loss against the labels
 * (docs/inference.md).  The library's predictor does the scoring; this file
 * reads the data, gathers the scores to rank 0 and writes them.
 *
 * Under mpirun every rank opens the predictor (tables loaded at this world
 * size) and scores its share of the data in calls of the model's evaluation
 * batch, as `ember train`'s evaluation does: at the training world size the
 * scores are the evaluation's, bit for bit.  Files are split by rank in
 * order, so rank order is file order; the synthetic stream interleaves the
 * ranks, so rank 0 puts its samples back in stream order.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "commands.h"
#include "comm/collect.h" /* TEMPORARY */
#include "comm/comm.h" /* TEMPORARY */
#include "core/safe_file.h"
#include "infer/bundle.h"
#include "infer/model.h"
#include "tool_ctx.h"
#include "train/run_json.h"
#include "train/train.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: ember predict CHECKPOINT DATA [--out FILE] [--format f32|tsv] [--samples N]\n"
               "                     [--threads T] [--json]\n"
               "  CHECKPOINT    a checkpoint of `ember train` (a root: its newest; or one step-* folder),\n"
               "                or a bundle of `ember export --quantize`\n"
               "  DATA          a Criteo TSV file, an ember binary file (`ember convert`), or `synthetic`:\n"
               "                the held-out stream of the built-in task the model was trained on\n"
               "  --out FILE    the scores, one per sample in the data's order\n"
               "  --format F    f32: little-endian float32 (default); tsv: index, score, label per line\n"
               "  --samples N   score the first N samples (synthetic: default 65536; files: all)\n"
               "  --threads T   threads per rank for the embedding work (default 1)\n"
               "  --json        one JSON line instead of text\n"
               "Prints the samples scored, AUC and log loss against the data's labels. Under mpirun\n"
               "every rank scores its share; at the training world size the scores are the ones\n"
               "`ember train` evaluated, bit for bit (docs/inference.md).\n");
}

typedef struct scored {
    float *score, *label;
    int64_t *index, n, cap;
} scored;

static int push(scored *s, const float *score, const float *label, int64_t first, int64_t n)
{
    if (s->n + n > s->cap) {
        int64_t cap = s->cap * 2 > s->n + n ? s->cap * 2 : s->n + n + 1024;
        float *a = realloc(s->score, sizeof(float) * (size_t)cap), *b = a ? realloc(s->label, sizeof(float) * (size_t)cap) : NULL;
        int64_t *c = b ? realloc(s->index, sizeof(int64_t) * (size_t)cap) : NULL;
        if (a)
            s->score = a;
        if (b)
            s->label = b;
        if (!c)
            return -1;
        s->index = c;
        s->cap = cap;
    }
    for (int64_t i = 0; i < n; i++) {
        s->score[s->n + i] = score[i];
        s->label[s->n + i] = label[i];
        s->index[s->n + i] = first + i;
    }
    s->n += n;
    return 0;
}

static int open_data(const tool_ctx *ctx, const ember_model *m, const char *data, ctr_source **src, char *err,
                     size_t len)
{
    if (!strcmp(data, "synthetic")) {
        if (!m->synthetic) {
            snprintf(err, len, "the model was not trained on the built-in task: name a data file");
            return -1;
        }
        return ctr_source_synth(&m->synth, 1, ctx->rank, ctx->size, src, err, len);
    }
    FILE *f = fopen(data, "rb");
    char magic[8] = {0};
    int binary = f && fread(magic, 1, 8, f) == 8 && !memcmp(magic, "EMBERCTR", 8);
    if (f)
        fclose(f);
    if (binary)
        return ctr_source_binary(data, ctx->rank, ctx->size, src, err, len);
    return ctr_source_tsv(data, m->input.rows, CTR_BAD_SKIP, ctx->rank, ctx->size, src, err, len);
}

/* The data's shape against the model's input. */
static int check_shape(const ember_model *m, const ctr_schema *d, const char *data, char *err, size_t len)
{
    if (d->num_dense != m->input.num_dense || d->num_sparse != m->input.num_sparse) {
        snprintf(err, len, "%s: %d dense and %d sparse features, the model takes %d and %d", data, (int)d->num_dense,
                 (int)d->num_sparse, (int)m->input.num_dense, (int)m->input.num_sparse);
        return -1;
    }
    for (int32_t f = 0; f < d->num_sparse; f++)
        if ((d->rows[f] == 0) != (m->input.rows[f] == 0) || d->rows[f] > m->input.rows[f]) {
            snprintf(err, len, "%s: feature %s has %s, the model's %s", data, d->names[f][0] ? d->names[f] : "?",
                     d->rows[f] ? "row numbers" : "64-bit keys",
                     m->input.rows[f] ? "ids below its rows" : "64-bit keys");
            return -1;
        }
    return 0;
}

/* Scores this rank's samples into out.  0, or -1 with err (-2: another
 * rank failed).  Collective. */
static int score_all(const tool_ctx *ctx, ember_predictor *p, ctr_source *src, int synthetic, int64_t limit,
                     scored *out, char *err, size_t len)
{
    const ember_model *m = ember_predictor_model(p);
    const int32_t W = ctx->size, batch = m->batch;
    int64_t left = synthetic ? limit : INT64_MAX; /* synthetic: global; files: until the share ends */
    float *sc = malloc(sizeof(float) * (size_t)batch + 4);
    int failed = !sc, st = 0;
    if (!sc)
        snprintf(err, len, "out of memory");
    for (;;) {
        int64_t want = synthetic ? (left + W - 1) / W : left;
        want = want > batch ? batch : want;
        ctr_batch b;
        int64_t n = 0;
        if (!failed && want > 0 && (n = ctr_source_next(src, (int32_t)want, &b, err, len)) < 0)
            failed = 1;
        int64_t agree[2] = {n > 0 ? n : 0, failed};
        ember_comm_reduce_i64(ctx->world, agree, 2, EMBER_REDUCE_SUM);
        if (agree[1]) {
            st = failed ? -1 : -2;
            break;
        }
        if (agree[0] == 0)
            break;
        if (n == 0) {
            ctr_batch_empty(ctr_source_schema(src), &b);
            b.num_dense = m->input.num_dense;
        }
        int rc = ember_predictor_score(p, b.batch_size, b.dense, &b.sparse, sc); /* collective */
        if (rc != EMBER_OK) {
            snprintf(err, len, "%s", ember_predictor_errmsg(p));
            failed = 1;
        } else if (n > 0) {
            int64_t first = synthetic ? b.first_sample - (int64_t)m->synth.eval_offset : 0;
            if (push(out, sc, b.label, first, n)) {
                snprintf(err, len, "out of memory for %lld scores", (long long)(out->n + n));
                failed = 1;
            }
        }
        left -= synthetic ? agree[0] : n;
    }
    free(sc);
    return st;
}

static int by_index(const void *a, const void *b)
{
    int64_t x = ((const int64_t *)a)[0], y = ((const int64_t *)b)[0];
    return (x > y) - (x < y);
}

/* Rank 0: the gathered samples in data order, written to the output and
 * committed (core/safe_file.h: a failed write leaves no file). */
static int write_scores(safe_out *o, int tsv, int synthetic, const float *score, const float *label,
                        const int64_t *index, int64_t n, char *err, size_t len)
{
    FILE *f = safe_out_stdio(o);
    int64_t *order = NULL;
    if (f && synthetic) { /* (index, position) pairs sorted by index */
        order = malloc(sizeof(int64_t) * 2 * (size_t)(n + 1));
        if (!order) {
            safe_out_abort(o);
            snprintf(err, len, "out of memory sorting %lld scores", (long long)n);
            return -1;
        }
        for (int64_t i = 0; i < n; i++)
            order[2 * i] = index[i], order[2 * i + 1] = i;
        qsort(order, (size_t)n, 2 * sizeof(int64_t), by_index);
    }
    for (int64_t k = 0; f && k < n && !ferror(f); k++) {
        int64_t i = order ? order[2 * k + 1] : k;
        if (tsv)
            fprintf(f, "%lld\t%.9g\t%g\n", (long long)(synthetic ? index[i] : k), score[i], label[i]);
        else
            fwrite(&score[i], sizeof(float), 1, f);
    }
    free(order);
    return safe_out_commit(o, err, len) == EMBER_OK ? 0 : -1; /* names the file and the reason */
}

/* The --json line, as the trainer writes its events (src/train/run_json.h):
 * a score that is not finite is null, the path escaped. */
static void print_json(int64_t ns, double auc, double ll, double sec, int32_t world, int64_t table_bytes,
                       double peak_mb, const char *out)
{
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("predict"));
    json_object_set_new(j, "samples", json_integer(ns));
    json_object_set_new(j, "auc", run_json_num(auc));
    json_object_set_new(j, "logloss", run_json_num(ll));
    json_object_set_new(j, "seconds", run_json_num(round(sec * 1000.0) / 1000.0));
    json_object_set_new(j, "world", json_integer(world));
    json_object_set_new(j, "table_bytes", json_integer(table_bytes));
    json_object_set_new(j, "peak_rss_mb", run_json_num(round(10.0 * peak_mb) / 10.0));
    json_object_set_new(j, "out", run_json_string(out ? out : ""));
    char *text = run_json_dumps(j);
    json_decref(j);
    if (text)
        printf("%s\n", text);
    free(text);
}
int cmd_predict(const tool_ctx *ctx, int argc, char **argv)
{
    const char *ck = NULL, *data = NULL, *out = NULL;
    int tsv = 0, json = 0;
    int64_t samples = -1, threads = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            if (ctx->rank == 0)
                usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
            const char *f = argv[++i];
            if (strcmp(f, "f32") && strcmp(f, "tsv")) {
                fprintf(ctx->err, "ember predict: --format %s: expected f32 or tsv\n", f);
                return 2;
            }
            tsv = !strcmp(f, "tsv");
        } else if ((!strcmp(argv[i], "--samples") || !strcmp(argv[i], "--threads")) && i + 1 < argc) {
            char *end;
            long long v = strtoll(argv[i + 1], &end, 10);
            if (*end || v < 1) {
                fprintf(ctx->err, "ember predict: %s %s: expected a positive integer\n", argv[i], argv[i + 1]);
                return 2;
            }
            *(argv[i][2] == 's' ? &samples : &threads) = v;
            i++;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (argv[i][0] != '-' && (!ck || !data)) {
            *(ck ? &data : &ck) = argv[i];
        } else {
            fprintf(ctx->err, "ember predict: unexpected argument '%s' (ember predict --help)\n", argv[i]);
            return 2;
        }
    }
    if (!ck || !data) {
        if (ctx->rank == 0)
            usage(ctx->err);
        return 2;
    }
    double t0 = ember_now();
    ember_predictor_options po = {ctx->world, (int32_t)threads};
    ember_predictor *p = NULL;
    int st = ember_predictor_open(ck, &po, &p); /* collective; failures agreed */
    if (st != EMBER_OK) {
        if (ctx->rank == 0)
            fprintf(ctx->err, "ember predict: %s\n", ember_data_errmsg());
        return 1;
    }
    const ember_model *m = ember_predictor_model(p);
    char err[768] = "";
    ctr_source *src = NULL;
    int synthetic = !strcmp(data, "synthetic");
    int failed = open_data(ctx, m, data, &src, err, sizeof err) ||
                 check_shape(m, ctr_source_schema(src), data, err, sizeof err);
    if (tool_agree_fail(ctx, "predict", failed, err)) {
        ctr_source_destroy(src);
        ember_predictor_close(p);
        return 1;
    }
    /* the output is opened before any scoring: a path that cannot take it
     * (a link, a folder, a missing folder) fails now, and nothing is at its
     * name until every score is written */
    safe_out o = SAFE_OUT_INIT;
    failed = ctx->rank == 0 && out && safe_out_open_path(&o, out, 0, err, sizeof err) != EMBER_OK;
    if (tool_agree_fail(ctx, "predict", failed, err)) {
        ctr_source_destroy(src);
        ember_predictor_close(p);
        return 1;
    }
    scored s = {0};
    int rc = score_all(ctx, p, src, synthetic, samples > 0 ? samples : synthetic ? 65536 : INT64_MAX, &s, err,
                       sizeof err);
    int32_t first = -1;
    if (ember_comm_any_failed(ctx->world, rc != 0, &first)) {
        if (first == ctx->rank || (first < 0 && rc != 0)) /* first < 0: the exchange failed */
            tool_local_error(ctx, "predict", "%s", err);
        free(s.score), free(s.label), free(s.index);
        ctr_source_destroy(src);
        ember_predictor_close(p);
        safe_out_abort(&o);
        return 1;
    }
    float *gs = NULL, *gl = NULL;
    int64_t *gi = NULL, ns = 0, nl = 0, ni = 0;
    int bad = ember_comm_gather_floats(ctx->world, s.score, s.n, &gs, &ns) |
              ember_comm_gather_floats(ctx->world, s.label, s.n, &gl, &nl) |
              ember_comm_gather_i64(ctx->world, s.index, s.n, &gi, &ni);
    free(s.score), free(s.label), free(s.index);
    ctr_source_destroy(src);
    ember_memory mem;
    ember_collection_memory(ember_predictor_collection(p), &mem);
    ember_predictor_close(p);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int64_t table_bytes = mem.row_bytes, peak_kb = ru.ru_maxrss; /* every rank's tables; the largest process */
    ember_comm_reduce_i64(ctx->world, &table_bytes, 1, EMBER_REDUCE_SUM);
    ember_comm_reduce_i64(ctx->world, &peak_kb, 1, EMBER_REDUCE_MAX);
    int status = 0;
    if (ctx->rank == 0) {
        if (bad) {
            fprintf(ctx->err, "ember predict: out of memory gathering %lld scores\n", (long long)ns);
            status = 1;
        } else {
            if (!synthetic && samples > 0 && ns > samples) /* files: the first N of the file */
                ns = samples;
            if (synthetic) { /* ranks ask for ceil(left / W): keep exactly the first N of the stream */
                int64_t limit = samples > 0 ? samples : 65536, k = 0;
                for (int64_t i = 0; i < ns; i++)
                    if (gi[i] < limit)
                        gs[k] = gs[i], gl[k] = gl[i], gi[k] = gi[i], k++;
                ns = k;
            }
            if (out && write_scores(&o, tsv, synthetic, gs, gl, gi, ns, err, sizeof err)) {
                fprintf(ctx->err, "ember predict: %s\n", err);
                status = 1;
                out = NULL; /* no line below names a file that is not there */
            }
            double auc = ns ? metric_auc(gs, gl, ns) : NAN, ll = ns ? metric_logloss(gs, gl, ns) : NAN;
            double sec = ember_now() - t0;
            if (json)
                print_json(ns, auc, ll, sec, ctx->size, table_bytes, (double)peak_kb / 1024.0, out);
            else
                fprintf(stdout, "scored %lld samples in %.2f s: AUC %.4f, log loss %.4f%s%s\n", (long long)ns, sec,
                        auc, ll, out ? "; scores in " : "", out ? out : "");
        }
    }
    safe_out_abort(&o); /* after a commit: nothing; after a failure before it: the output dropped */
    free(gs), free(gl), free(gi);
    int64_t agreed = status; /* every rank exits with rank 0's status */
    ember_comm_reduce_i64(ctx->world, &agreed, 1, EMBER_REDUCE_MAX);
    return (int)agreed;
}
