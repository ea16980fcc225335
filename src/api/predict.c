/*
 * predict.c: ember_predict (ember.h, "prediction"), the work of `ember
 * predict`: a predictor, the data as its model reads it, every rank's
 * share scored in calls of the model's evaluation batch, the scores
 * gathered on rank 0 in data order and written, AUC and log loss.
 *
 * Files are split by rank in order, so rank order is file order; the
 * synthetic stream interleaves the ranks, so rank 0 puts its samples back
 * in stream order (by their index).  A text file is read with the model's
 * schema, its label column optional: a file to score may have none.  Every failure one rank sees is agreed
 * before the next collective call (comm/agree.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "api/predict_scores.h"
#include "comm/agree.h"
#include "comm/collect.h"
#include "comm/comm.h"
#include "data/data_error.h"
#include "dense/dense.h"
#include "infer/bundle.h"
#include "infer/predictor.h"
#include "model/metrics.h"
#include "train/run_json.h"

ember_predict_config ember_predict_config_default(void)
{
    ember_predict_config c;
    memset(&c, 0, sizeof c);
    c.threads = 1;
    c.max_bad_fraction = 0.01;
    return c;
}

/* The data as the model reads it. */
static int open_data(const model_description *m, const char *data, const ember_predict_config *c, int32_t rank,
                     int32_t size, ctr_source **src, char *err, size_t len)
{
    if (!strcmp(data, "synthetic")) {
        if (!m->synthetic) {
            snprintf(err, len, "the model was not trained on the built-in task: name a data file");
            return EMBER_EINVAL;
        }
        return ctr_source_synth(&m->synth, 1, rank, size, src, err, len);
    }
    if (ctr_file_is_binary(data))
        return ctr_source_binary(data, rank, size, src, err, len);
    if (m->in.source == DESC_INPUT_TEXT || m->in.source == DESC_INPUT_CRITEO_TSV) { /* read as training read */
        ctr_text_schema sc = m->in.schema;
        sc.label_optional = 1;
        sc.header_optional = 1;
        int rc = ctr_source_text(data, &sc, CTR_BAD_SKIP, rank, size, src, err, len);
        if (rc == 0)
            ctr_source_set_bad_limit(*src, c->max_bad_fraction, -1);
        return rc;
    }
    if (m->in_error[0]) { /* a schema this ember cannot read: never guess Criteo for it */
        snprintf(err, len, "%s: the model's input schema cannot be read (%s): score its binary conversion", data,
                 m->in_error);
        return EMBER_EINVAL;
    }
    return ctr_source_tsv(data, m->input.rows, CTR_BAD_SKIP, rank, size, src, err, len); /* an older model */
}

/* The data's shape against the model's input. */
static int check_shape(const model_description *m, const ctr_schema *d, const char *data, char *err, size_t len)
{
    if (d->num_dense != m->input.num_dense || d->num_sparse != m->input.num_sparse) {
        snprintf(err, len, "%s: %d dense and %d sparse features, the model takes %d and %d", data, (int)d->num_dense,
                 (int)d->num_sparse, (int)m->input.num_dense, (int)m->input.num_sparse);
        return EMBER_EINVAL;
    }
    for (int32_t f = 0; f < d->num_sparse; f++)
        if ((d->rows[f] == 0) != (m->input.rows[f] == 0) || d->rows[f] > m->input.rows[f]) {
            snprintf(err, len, "%s: feature %s has %s, the model's %s", data, d->names[f][0] ? d->names[f] : "?",
                     d->rows[f] ? "row numbers" : "64-bit keys",
                     m->input.rows[f] ? "ids below its rows" : "64-bit keys");
            return EMBER_EINVAL;
        }
    return 0;
}

/* One ember_predict: its inputs, what it holds, and this rank's failure. */
typedef struct predict_run {
    const ember_predict_config *c;
    const char *data;
    int32_t rank, size;
    int synthetic;
    ember_predictor *p;
    ctr_source *src;
    ember_output *out;          /* rank 0's, when c->out                   */
    predict_scores mine;        /* this rank's scores                       */
    int status;
    char msg[1024];
} predict_run;

/* What the CSV lines are written with. */
static predict_csv csv_of(const predict_run *r)
{
    int text = !r->synthetic && ctr_source_lines(r->src) != NULL; /* a text source has its lines */
    predict_csv c = {!ctr_source_schema(r->src)->unlabeled, text ? "line" : "sample", r->c->id, r->data,
                     text ? &predictor_description(r->p)->in.schema : NULL, ctr_source_text_header(r->src)};
    return c;
}

/* The id column can be read: refused before anything is scored. */
static int check_id(predict_run *r)
{
    predict_csv c = csv_of(r);
    if (!c.schema) {
        snprintf(r->msg, sizeof r->msg, "--id %s: ids come from a text file's columns; %s is not one (its scores "
                 "are named by their sample number without --id)", r->c->id, r->data);
        return EMBER_EINVAL;
    }
    return predict_csv_check(&c, r->msg, sizeof r->msg);
}

static int agree(predict_run *r)
{
    return comm_agree_error(r->c->world, r->status != EMBER_OK, &r->status, r->msg, sizeof r->msg);
}

/* The data, its shape, and rank 0's output, each agreed: EMBER_OK or the
 * agreed status. */
static int prepare(predict_run *r)
{
    const model_description *m = predictor_description(r->p);
    if (open_data(m, r->data, r->c, r->rank, r->size, &r->src, r->msg, sizeof r->msg) ||
        check_shape(m, ctr_source_schema(r->src), r->data, r->msg, sizeof r->msg))
        r->status = EMBER_EINVAL;
    else if (r->c->id && r->rank == 0)
        r->status = check_id(r);
    if (agree(r))
        return r->status;
    /* the output before any scoring: a path that cannot take it (a link, a
     * folder, a missing folder) fails now */
    if (r->rank == 0 && r->c->out)
        if ((r->status = ember_output_open(r->c->out, 0, &r->out)) != EMBER_OK)
            snprintf(r->msg, sizeof r->msg, "%s", ember_errmsg(NULL));
    agree(r);
    return r->status;
}

/* The numbers every rank reports, rank 0's. */
typedef struct shared {
    double samples, auc, logloss, wrote, status, labeled;
    char msg[1024];
} shared;

/* Rank 0: the gathered scores in data order, written and measured. */
static void finish_rank0(predict_run *r, predict_scores *all, shared *sh)
{
    const ember_predict_config *c = r->c;
    if (!r->synthetic && c->samples > 0 && all->n > c->samples) /* files: the first N of the file */
        all->n = c->samples;
    if (r->synthetic) /* ranks ask for ceil(left / W): exactly the first N of the stream */
        predict_scores_keep_below(all, c->samples > 0 ? c->samples : 65536);
    sh->samples = (double)all->n;
    const int labeled = !ctr_source_schema(r->src)->unlabeled;
    sh->labeled = labeled;
    if (r->out && r->synthetic && predict_scores_sort(all) != EMBER_OK) {
        ember_output_abort(r->out);
        r->out = NULL;
        sh->status = EMBER_ENOMEM;
        snprintf(sh->msg, sizeof sh->msg, "out of memory sorting %lld scores", (long long)all->n);
    }
    if (r->out) {
        predict_csv csv = csv_of(r);
        int st = c->csv ? predict_scores_write_csv(r->out, all, &csv, sh->msg, sizeof sh->msg)
                        : predict_scores_write(r->out, c->tsv, labeled, all, sh->msg, sizeof sh->msg);
        if (st == EMBER_OK)
            sh->wrote = 1;
        else
            sh->status = EMBER_EIO;
        r->out = NULL; /* committed or dropped */
    }
    sh->auc = all->n && labeled ? metric_auc(all->score, all->label, all->n) : NAN;
    sh->logloss = all->n && labeled ? metric_logloss(all->score, all->label, all->n) : NAN;
}

/* Scores, gathers and writes: EMBER_OK, or the agreed status. */
static int score_and_write(predict_run *r, double t0, ember_prediction *res)
{
    ember_world *w = r->c->world;
    int64_t limit = r->c->samples > 0 ? r->c->samples : r->synthetic ? 65536 : INT64_MAX;
    r->status = predict_scores_collect(r->p, r->src, w, r->synthetic, limit, &r->mine, r->msg, sizeof r->msg);
    if (agree(r))
        return r->status;
    predict_scores all = {0};
    int64_t ns = 0, nl = 0, ni = 0;
    int bad = ember_comm_gather_floats(w, r->mine.score, r->mine.n, &all.score, &ns) |
              ember_comm_gather_floats(w, r->mine.label, r->mine.n, &all.label, &nl) |
              ember_comm_gather_i64(w, r->mine.index, r->mine.n, &all.index, &ni);
    all.n = ns;
    ember_memory mem;
    ember_collection_memory(predictor_collection(r->p), &mem);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int64_t table_bytes = mem.row_bytes, peak_kb = ru.ru_maxrss; /* every rank's tables; the largest process */
    ctr_stats st;
    ctr_source_stats(r->src, &st);
    int64_t bad_lines = st.bad_lines;
    ember_comm_reduce_i64(w, &bad_lines, 1, EMBER_REDUCE_SUM);
    ember_comm_reduce_i64(w, &table_bytes, 1, EMBER_REDUCE_SUM);
    ember_comm_reduce_i64(w, &peak_kb, 1, EMBER_REDUCE_MAX);
    shared sh;
    memset(&sh, 0, sizeof sh);
    if (r->rank == 0 && bad) {
        sh.status = EMBER_ENOMEM;
        snprintf(sh.msg, sizeof sh.msg, "out of memory gathering %lld scores", (long long)ns);
    } else if (r->rank == 0) {
        finish_rank0(r, &all, &sh);
    }
    predict_scores_free(&all);
    if (r->size > 1 && ember_comm_bcast(w, &sh, (int64_t)sizeof sh, 0) != EMBER_OK) /* every rank: rank 0's */
        sh.status = EMBER_ECOMM;
    *res = (ember_prediction){(int64_t)sh.samples, sh.auc, sh.logloss, (int)sh.labeled, bad_lines, ember_now() - t0,
                              r->size, table_bytes,
                              (double)peak_kb / 1024.0, sh.wrote ? r->c->out : NULL,
                              sh.status == EMBER_OK || sh.status == EMBER_EIO};
    r->status = (int)sh.status;
    snprintf(r->msg, sizeof r->msg, "%s", sh.msg);
    return r->status;
}

int ember_predict(const char *model, const char *data, const ember_predict_config *c, ember_prediction *out)
{
    double t0 = ember_now();
    if (!model || !data || !c || !out || (c->csv && c->tsv) || (c->id && !c->csv) ||
        !(c->max_bad_fraction >= 0 && c->max_bad_fraction <= 1)) {
        ember_data_set_error(!model || !data || !c || !out ? "ember_predict: NULL argument"
                             : c->id && !c->csv ? "ember_predict: an id column (--id) needs the csv format"
                             : c->csv && c->tsv ? "ember_predict: csv and tsv are both asked for"
                                                : "ember_predict: max_bad_fraction outside [0, 1]");
        return EMBER_EINVAL;
    }
    memset(out, 0, sizeof *out);
    predict_run r;
    memset(&r, 0, sizeof r);
    r.c = c;
    r.data = data;
    r.rank = ember_world_rank(c->world);
    r.size = ember_world_size(c->world);
    r.synthetic = !strcmp(data, "synthetic");
    ember_predictor_options po = {c->world, c->threads};
    int st = ember_predictor_open(model, &po, &r.p); /* collective; failures agreed, with ember_errmsg */
    if (st != EMBER_OK)
        return st;
    /* OpenBLAS's process-wide count, the dense model's for the whole run
     * (no batch changes it), the caller's again at the end */
    int32_t blas_saved = dense_blas_threads();
    dense_set_blas_threads(predictor_blas_threads(r.p));
    if ((st = prepare(&r)) == EMBER_OK)
        st = score_and_write(&r, t0, out);
    if (st != EMBER_OK && st != EMBER_EIO)
        memset(out, 0, sizeof *out);
    if (st != EMBER_OK)
        ember_data_set_error("%s", r.msg);
    ember_output_abort(r.out); /* a failure before the commit: the output dropped */
    predict_scores_free(&r.mine);
    ctr_source_destroy(r.src);
    ember_predictor_close(r.p);
    dense_set_blas_threads(blas_saved);
    return st;
}

char *ember_prediction_json(const ember_prediction *p)
{
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("predict"));
    json_object_set_new(j, "samples", json_integer(p->samples));
    json_object_set_new(j, "auc", run_json_num(p->auc));
    json_object_set_new(j, "logloss", run_json_num(p->logloss));
    json_object_set_new(j, "labeled", json_boolean(p->labeled));
    json_object_set_new(j, "bad_lines", json_integer(p->bad_lines));
    json_object_set_new(j, "seconds", run_json_num(round(p->seconds * 1000.0) / 1000.0));
    json_object_set_new(j, "world", json_integer(p->world));
    json_object_set_new(j, "table_bytes", json_integer(p->table_bytes));
    json_object_set_new(j, "peak_rss_mb", run_json_num(round(10.0 * p->peak_rss_mb) / 10.0));
    json_object_set_new(j, "out", run_json_string(p->out ? p->out : ""));
    char *text = run_json_dumps(j);
    json_decref(j);
    return text;
}
