/*
 * summary.c: the end of a training run (run.h): the phase times and data
 * counters reduced over the ranks, every rank's peak memory gathered to
 * rank 0, and the "summary" event's JSON object, which every rank then
 * holds (ember_trainer_summary).
 *
 * Times are the means over ranks; counters (lines, SSD tier) sums.  The
 * fields after "peak_rss_mb_per_rank" and the data lines (train_seconds,
 * stop_metric, first_bad, ssd_stores, ssd_loads, ssd_prefetch_loads,
 * ssd_io_s) are those the text summary of `ember train` needs besides.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <jansson.h>

#include "comm/collect.h"
#include "comm/comm.h"
#include "train/run.h"
#include "train/run_json.h"

/* Everything the summary shows, over all ranks. */
typedef struct summary_data {
    double phase[8];             /* data, emb_forward, exchange, dense,
                                    emb_backward, reduce, eval, checkpoint  */
    int64_t lines[2];            /* read, bad                               */
    int64_t tier[9];             /* stores, then ember_tier_stats' counters */
    double tier_s[2];            /* wait, synchronous I/O                   */
    float rss, *all_rss;         /* this rank's; every rank's (rank 0)      */
    float pipe[2], *all_pipe;    /* pipeline: busy share, kept activation MB */
    int32_t world;               /* ranks in all_rss                        */
    int64_t limits[2];           /* ids dropped by limits, ids (this run)   */
    int any_limit;               /* some table has a limit, or they adapt   */
} summary_data;

static void reduce_all(ember_trainer *s, summary_data *d, ctr_stats *cs)
{
    const train_loop_stats *ls = &s->ls;
    model_times tt;
    model_get_times(s->model, &tt);
    double v[8] = {ls->data_seconds, tt.emb_forward, tt.exchange, tt.dense, tt.emb_backward, tt.reduce,
                   ls->eval_seconds, ls->ckpt_seconds};
    ember_comm_reduce_double(s->world, v, 8, EMBER_REDUCE_SUM);
    for (int i = 0; i < 8; i++)
        d->phase[i] = v[i] / s->size;
    ctr_source_stats(s->train_src, cs);
    d->lines[0] = cs->lines;
    d->lines[1] = cs->bad_lines;
    ember_comm_reduce_i64(s->world, d->lines, 2, EMBER_REDUCE_SUM);
    if (s->t.pipe_stages > 1) /* every stage of a replica group read the same lines */
        d->lines[0] /= s->t.pipe_stages, d->lines[1] /= s->t.pipe_stages;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    d->rss = (float)((double)ru.ru_maxrss / 1024.0);
    int64_t n = 0;
    ember_comm_gather_floats(s->world, &d->rss, 1, &d->all_rss, &n);
    d->world = d->all_rss ? s->size : 1; /* out of memory for the gather: rank 0's alone */
    double busy;
    int64_t bytes;
    if (model_pipeline_stats(s->model, &busy, &bytes)) { /* the same answer on every rank */
        d->pipe[0] = (float)busy;
        d->pipe[1] = (float)((double)bytes / 1048576.0);
        ember_comm_gather_floats(s->world, d->pipe, 2, &d->all_pipe, &n);
    }
    d->limits[0] = ls->limit_dropped;
    d->limits[1] = ls->ids;
    ember_comm_reduce_i64(s->world, d->limits, 2, EMBER_REDUCE_SUM);
    d->any_limit = s->limits != NULL;
    for (int32_t t = 0; t < s->cc.num_tables; t++)
        d->any_limit |= s->cc.tables[t].max_ids_per_partition > 0 || s->cc.tables[t].max_unique_ids_per_partition > 0;
    ember_tier_stats ts;
    int64_t ti[9] = {ember_collection_tier_stats(s->coll, &ts), ts.accesses, ts.demand_loads, ts.prefetch_loads,
                     ts.evictions, ts.writes, ts.bytes_read, ts.bytes_written, ts.prefetch_used};
    double td[2] = {ts.wait_seconds, ts.io_seconds};
    ember_comm_reduce_i64(s->world, ti, 9, EMBER_REDUCE_SUM);
    ember_comm_reduce_double(s->world, td, 2, EMBER_REDUCE_SUM);
    memcpy(d->tier, ti, sizeof ti);
    memcpy(d->tier_s, td, sizeof td);
}

/* The SSD tier's figures (d->tier: stores, accesses, demand loads, prefetch
 * loads, evictions, writes, bytes read, bytes written, prefetches used). */
static void add_tier(json_t *j, const summary_data *d)
{
    double misses = (double)(d->tier[2] + d->tier[8]);
    json_object_set_new(j, "ssd_hit_rate", run_json_num(d->tier[1] ? 1.0 - misses / (double)d->tier[1] : NAN));
    json_object_set_new(j, "ssd_bytes_read", json_integer(d->tier[6]));
    json_object_set_new(j, "ssd_bytes_written", json_integer(d->tier[7]));
    json_object_set_new(j, "ssd_wait_s", run_json_num(d->tier_s[0]));
}

static json_t *summary_json(const ember_trainer *s, const summary_data *d, const ctr_stats *cs)
{
    const train_loop_stats *ls = &s->ls;
    const train_eval_result *e = &ls->eval;
    const int have = ls->have_eval;
    const float *rss = d->all_rss ? d->all_rss : &d->rss;
    double train_s = ls->seconds - ls->eval_seconds - ls->ckpt_seconds;
    float peak = 0;
    for (int32_t i = 0; i < d->world; i++)
        peak = rss[i] > peak ? rss[i] : peak;
    json_t *j = json_object();
    json_object_set_new(j, "event", json_string("summary"));
    json_object_set_new(j, "auc", run_json_num(have ? e->auc : NAN));
    json_object_set_new(j, "teacher_auc", run_json_num(have ? e->teacher_auc : NAN));
    json_object_set_new(j, "logloss", run_json_num(have ? e->logloss : NAN));
    json_object_set_new(j, "teacher_logloss", run_json_num(have ? e->teacher_logloss : NAN));
    json_object_set_new(j, "eval_samples", json_integer(have ? e->samples : 0));
    json_object_set_new(j, "samples_per_s", run_json_num(train_s > 0 ? (double)ls->run_samples / train_s : 0));
    json_object_set_new(j, "steps", json_integer(ls->steps));
    json_object_set_new(j, "samples", json_integer(ls->samples));
    json_object_set_new(j, "run_steps", json_integer(ls->run_steps));
    json_object_set_new(j, "run_samples", json_integer(ls->run_samples));
    json_object_set_new(j, "epochs",
                        run_json_num(s->file_samples > 0 ? (double)ls->samples / (double)s->file_samples : 0));
    json_object_set_new(j, "stopped_early", json_boolean(ls->stopped_at > 0));
    int64_t best_step = ls->best.have ? ls->best.step : 0;
    json_object_set_new(j, "best_step", json_integer(best_step));
    json_object_set_new(j, "best_metric", best_step > 0 ? run_json_num(ls->best.metric) : json_null());
    json_object_set_new(j, "global_batch", json_integer(train_global_batch(s)));
    json_object_set_new(j, "world", json_integer(d->world));
    json_object_set_new(j, "seconds", run_json_num(ls->seconds));
    static const char *const PHASES[8] = {"data",   "emb_forward", "exchange", "dense",
                                          "emb_backward", "reduce", "eval",     "checkpoint"};
    json_t *ts = json_object();
    for (int i = 0; i < 8; i++)
        json_object_set_new(ts, PHASES[i], run_json_num(d->phase[i]));
    json_object_set_new(j, "time_s", ts);
    json_t *per_rank = json_array();
    for (int32_t i = 0; i < d->world; i++)
        json_array_append_new(per_rank, json_real(round(10.0 * rss[i]) / 10.0));
    json_object_set_new(j, "peak_rss_mb", json_real(round(10.0 * peak) / 10.0));
    if (d->tier[0] > 0)
        add_tier(j, d);
    json_object_set_new(j, "peak_rss_mb_per_rank", per_rank);
    if (d->all_pipe && d->world == s->size) { /* pipeline stages: rank r is stage r mod S */
        json_t *busy = json_array(), *mb = json_array();
        for (int32_t i = 0; i < d->world; i++) {
            json_array_append_new(busy, json_real(round(1000.0 * d->all_pipe[2 * i]) / 1000.0));
            json_array_append_new(mb, json_real(round(10.0 * d->all_pipe[2 * i + 1]) / 10.0));
        }
        json_object_set_new(j, "pipeline_busy_share_per_rank", busy);
        json_object_set_new(j, "pipeline_activation_mb_per_rank", mb);
    }
    if (d->lines[0] > 0 || d->lines[1] > 0) {
        json_object_set_new(j, "lines", json_integer(d->lines[0]));
        json_object_set_new(j, "bad_lines", json_integer(d->lines[1]));
        if (cs->first_bad[0])
            json_object_set_new(j, "first_bad", run_json_string(cs->first_bad));
    }
    json_object_set_new(j, "train_seconds", run_json_num(train_s));
    if (s->replan) /* train.replan: the moves this run made */
        json_object_set_new(j, "replan_moves", json_integer(train_replan_moves(s)));
    if (d->any_limit) { /* this run's: ids the limits dropped, of all its ids; the adaptive limits' changes */
        json_t *l = json_object();
        json_object_set_new(l, "ids", json_integer(d->limits[1]));
        json_object_set_new(l, "dropped_ids", json_integer(d->limits[0]));
        json_object_set_new(l, "dropped_fraction",
                            run_json_num(d->limits[1] > 0 ? (double)d->limits[0] / (double)d->limits[1] : 0));
        if (s->limits) {
            json_object_set_new(l, "changes", json_integer(ls->limit_changes));
            int64_t b = limits_adapt_bytes(s->limits, -1);
            json_object_set_new(l, "limit_bytes", b == INT64_MAX ? json_null() : json_integer(b));
            /* the least limits that would have dropped nothing, seen in hindsight */
            int64_t pb = limits_adapt_peak_bytes(s->limits);
            json_object_set_new(l, "peak_bytes", pb == INT64_MAX ? json_null() : json_integer(pb));
            json_t *tabs = json_object(), *peaks = json_object();
            for (int32_t t = 0; t < s->cc.num_tables; t++) {
                if (!limits_adapt_adapted(s->limits, t))
                    continue;
                int64_t a, u;
                limits_adapt_limits(s->limits, t, &a, &u);
                json_object_set_new(tabs, s->cc.tables[t].name, json_pack("[I, I]", (json_int_t)a, (json_int_t)u));
                limits_adapt_peak(s->limits, t, &a, &u);
                json_object_set_new(peaks, s->cc.tables[t].name, json_pack("[I, I]", (json_int_t)a, (json_int_t)u));
            }
            json_object_set_new(l, "tables", tabs);
            json_object_set_new(l, "peak", peaks);
        }
        json_object_set_new(j, "limits", l);
    }
    /* rank 0's steps whose batch a thread taken from the step read ahead
     * (no spare core: src/train/arrange.c) */
    json_object_set_new(j, "reader_thread_steps", json_integer(s->ls.reader_steps));
    json_object_set_new(j, "reader_trials", json_integer(s->ls.reader_trials));
    json_object_set_new(j, "stop_metric", json_string(s->t.stop_metric_logloss ? "logloss" : "auc"));
    if (d->tier[0] > 0) {
        json_object_set_new(j, "ssd_stores", json_integer(d->tier[0]));
        json_object_set_new(j, "ssd_loads", json_integer(d->tier[2] + d->tier[3]));
        json_object_set_new(j, "ssd_prefetch_loads", json_integer(d->tier[3]));
        json_object_set_new(j, "ssd_io_s", run_json_num(d->tier_s[1]));
        if (s->ls.window_max > 0) /* the lookahead window's range over the run (ssd.lookahead_max: it moves) */
            json_object_set_new(j, "ssd_window", json_pack("[i, i]", (int)s->ls.window_min, (int)s->ls.window_max));
    }
    return j;
}

int train_summary(ember_trainer *s)
{
    summary_data d;
    ctr_stats cs;
    memset(&d, 0, sizeof d);
    reduce_all(s, &d, &cs);
    char *text = NULL;
    if (s->rank == 0) {
        json_t *j = summary_json(s, &d, &cs);
        text = run_json_dumps(j);
        json_decref(j);
    }
    free(d.all_rss);
    free(d.all_pipe);
    /* every rank gets rank 0's text: its length, agreed room, then the text */
    int64_t len = text ? (int64_t)strlen(text) : -1;
    int st = s->size > 1 ? ember_comm_bcast(s->world, &len, sizeof len, 0) : EMBER_OK;
    int failed = st != EMBER_OK || len < 0 || (s->rank != 0 && !(text = malloc((size_t)len + 1)));
    if (run_agree(s, failed, st != EMBER_OK ? st : EMBER_ENOMEM,
                  st != EMBER_OK ? s->world->errmsg : "the summary: out of memory") ||
        (s->size > 1 && run_agree_status(s, ember_comm_bcast(s->world, text, len, 0), "the summary's broadcast"))) {
        free(text);
        return 1;
    }
    text[len] = '\0';
    s->summary = text;
    return 0;
}
