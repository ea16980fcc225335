/*
 * bench_measure.c: ember_bench_run (include/ember-bench.h), one measurement of the
 * step benchmark behind `ember bench`, from its config to its JSON line:
 * the size check (--max-gb), the collection and the batches
 * (bench_batches.c), the timed iterations (bench_loop.c), the report
 * (bench_report.c).  Every rank of the world runs it together; a failure
 * one rank sees is agreed before the next collective step (comm/agree.h),
 * so that no rank is left waiting, and every rank's line says the same.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collection/config.h"
#include "api/bench.h"
#include "comm/agree.h"

/* The instruction set ember's kernels were compiled for (the build's
 * -march): what a peer's "isa" is compared with. */
static const char *kernel_isa(void)
{
#if defined(__AVX512F__) && defined(__AVX512BW__)
    return "avx512";
#elif defined(__AVX2__)
    return "avx2";
#else
    return "baseline";
#endif
}

ember_bench_config ember_bench_config_default(void)
{
    ember_bench_config c;
    memset(&c, 0, sizeof c);
    c.shape = ember_synth_config_default();
    c.shape.tables = 8; /* the quick shape */
    c.shape.rows = 100000;
    c.shape.batch_size = 1024;
    c.shape.pooling = 20;
    c.shape.zipf = 1;
    c.dim = 64;
    c.optimizer = EMBER_OPT_SGD;
    c.lr = 0.01;
    c.threads = 1;
    c.iters = 10;
    c.warmup = 3;
    c.max_gb = 20;
    c.placement = EMBER_PLACE_ROW;
    c.exchange = EMBER_EXCHANGE_ROWS;
    c.schedule = EMBER_SCHEDULE_BLOCKING;
    c.storage = EMBER_STORAGE_MEMORY;
    c.policy = EMBER_CACHE_LOOKAHEAD;
    c.ssd_dir = ".";
    c.lookahead = 16;
    c.evict = EMBER_EVICT_LRU;
    return c;
}

json_t *bench_line_base(const ember_bench_config *c, int32_t ranks)
{
    const ember_synth_config *sh = &c->shape;
    char wl[128];
    if (c->workload)
        snprintf(wl, sizeof wl, "%s", c->workload);
    else
        snprintf(wl, sizeof wl, "t%d_r%lld_d%d_b%d_p%d_%s", sh->tables, (long long)sh->rows, c->dim,
                 sh->batch_size, sh->pooling, sh->zipf ? "zipf" : "uniform");
    json_t *j = json_object();
    json_object_set_new(j, "impl", json_string("ember"));
    json_object_set_new(j, "workload", json_string(wl));
    json_object_set_new(j, "threads", json_integer(c->threads));
    json_object_set_new(j, "optimizer", json_string(c->forward_only ? "none" : ember_optimizer_name(c->optimizer)));
    json_object_set_new(j, "tables", json_integer(sh->tables));
    json_object_set_new(j, "rows", json_integer(sh->rows));
    json_object_set_new(j, "dim", json_integer(c->dim));
    json_object_set_new(j, "batch", json_integer(sh->batch_size));
    json_object_set_new(j, "pooling", json_integer(sh->pooling));
    json_object_set_new(j, "dist", json_string(sh->zipf ? "zipf" : "uniform"));
    json_object_set_new(j, "alpha", sh->zipf ? json_real(sh->alpha) : json_null());
    if (sh->drift != EMBER_DRIFT_NONE) {
        json_object_set_new(j, "drift", json_string(ember_drift_name(sh->drift)));
        json_object_set_new(j, "drift_every", json_integer(sh->drift_every));
        json_object_set_new(j, "drift_rows", json_integer(sh->drift_rows));
        json_object_set_new(j, "drift_start", json_integer(sh->drift_start ? sh->drift_start : sh->drift_rows));
        json_object_set_new(j, "drift_tables", json_integer(sh->drift_tables ? sh->drift_tables : sh->tables));
    }
    json_object_set_new(j, "ranks", json_integer(ranks));
    json_object_set_new(j, "placement", json_string(ember_placement_name(c->placement)));
    json_object_set_new(j, "exchange", json_string(ember_exchange_name(c->exchange)));
    json_object_set_new(j, "storage", json_string(ember_storage_name(c->storage)));
    json_object_set_new(j, "schedule", json_string(ember_schedule_name(c->schedule)));
    json_object_set_new(j, "dense_ms", json_real(c->dense_ms));
    json_object_set_new(j, "hot_rows", json_integer(c->hot_rows));
    json_object_set_new(j, "precision", json_string(ember_precision_name(c->precision)));
    if (c->state_precision != EMBER_PRECISION_FP32 && ember_element_state(c->optimizer))
        json_object_set_new(j, "state_precision", json_string(ember_precision_name(c->state_precision)));
    if (c->precision != EMBER_PRECISION_FP32 || json_object_get(j, "state_precision"))
        json_object_set_new(j, "rounding", json_string(ember_rounding_name(c->rounding)));
    if (c->storage == EMBER_STORAGE_SSD) {
        json_object_set_new(j, "policy", json_string(ember_cache_policy_name(c->policy)));
        json_object_set_new(j, "io", json_string(c->buffered ? "buffered" : "direct"));
        json_object_set_new(j, "lookahead", json_integer(c->lookahead));
        if (c->lookahead_max > c->lookahead)
            json_object_set_new(j, "lookahead_max", json_integer(c->lookahead_max));
        json_object_set_new(j, "io_threads", json_integer(c->io_threads ? c->io_threads : 32));
        json_object_set_new(j, "cache_bytes", json_integer(c->cache_bytes ? c->cache_bytes : 256 << 20));
        json_object_set_new(j, "written", json_boolean(c->written && !c->dynamic));
    }
    json_object_set_new(j, "ember_version", json_string(ember_version()));
    json_object_set_new(j, "isa", json_string(kernel_isa()));
    return j;
}

/* The line's text (consumes j); NULL out of memory. */
static char *line_of(json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(12)) : NULL;
    json_decref(j);
    return s;
}

char *ember_bench_line(const ember_bench_config *c, const char *error)
{
    json_t *j = bench_line_base(c, ember_world_size(c->world));
    if (j && error)
        json_object_set_new(j, "error", json_string(error));
    return line_of(j);
}

/* Table bytes (rows + state) of the rank holding most, as a share of all. */
static double rank_share(const ember_bench_config *c, int32_t world)
{
    const ember_synth_config *sh = &c->shape;
    if (world == 1)
        return 1.0;
    switch (c->placement) {
    case EMBER_PLACE_ROW:
        return (double)((sh->rows + world - 1) / world) / (double)sh->rows;
    case EMBER_PLACE_COLUMN:
        return (double)((c->dim + world - 1) / world) / (double)c->dim;
    case EMBER_PLACE_TABLE:
        return (double)((sh->tables + world - 1) / world) / (double)sh->tables;
    default:
        return 1.0;
    }
}

/* The peer's --max-gb rule: rows plus optimizer state (of the rank holding
 * most).  1 with the "skipped" field set when over. */
static int over_budget(bench_run *r)
{
    const ember_bench_config *c = r->c;
    const ember_synth_config *sh = &c->shape;
    double elem = c->precision == EMBER_PRECISION_FP32 ? 4.0 : 2.0;
    double selem = c->state_precision == EMBER_PRECISION_FP32 || !ember_element_state(c->optimizer) ? 4.0 : 2.0;
    double est = (double)sh->tables * (double)sh->rows *
                 (c->dim * elem + (r->train ? selem * ember_state_floats(c->optimizer, c->dim) : 0.0)) *
                 rank_share(c, r->R);
    if (est <= c->max_gb * 1e9)
        return 0;
    char skip[128];
    snprintf(skip, sizeof skip, "estimated %.1f GB > --max-gb %g", est / 1e9, c->max_gb);
    json_object_set_new(r->j, "skipped", json_string(skip));
    return 1;
}

/* Agrees on this rank's failure (*st, r->why): 1 on every rank when any
 * failed, with the agreed status in *st and message in the line's "error". */
static int agree(bench_run *r, int *st)
{
    if (!comm_agree_error(r->c->world, *st != EMBER_OK, st, r->why, sizeof r->why))
        return 0;
    json_object_set_new(r->j, "error", json_string(r->why));
    return 1;
}

/* The collection, the batches, the iterations and the report. */
static int measure(bench_run *r)
{
    int st = bench_build_collection(r);
    if (agree(r, &st))
        return st;
    st = bench_draw_batches(r);
    if (agree(r, &st))
        return st;
    if ((st = bench_iterate(r)) != EMBER_OK) { /* a collective call's: the same on every rank */
        json_object_set_new(r->j, "error", json_string(r->why));
        return st;
    }
    bench_report(r);
    return EMBER_OK;
}

static void run_free(bench_run *r)
{
    ember_collection_destroy(r->coll);
    free(r->tcfg);
    free(r->fcfg);
    free(r->names);
    free(r->ids);
    free(r->lengths);
    free(r->pooled);
    free(r->pooled_next);
    free(r->d_pooled);
    free(r->t_it);
    free(r->pred);
    free(r->by_rank);
}

int ember_bench_run(const ember_bench_config *c, char **line)
{
    *line = NULL;
    bench_run r;
    memset(&r, 0, sizeof r);
    r.c = c;
    r.R = ember_world_size(c->world);
    r.rank = ember_world_rank(c->world);
    r.train = !c->forward_only;
    r.nb = c->warmup + c->iters;
    r.ids_per_iter = (int64_t)c->shape.tables * c->shape.batch_size * c->shape.pooling;
    r.j = bench_line_base(c, r.R);
    if (!r.j)
        return EMBER_ENOMEM;
    int st = EMBER_OK;
    if (c->iters < 1 || c->warmup < 0 || c->dim < 1 || c->threads < 0) {
        snprintf(r.why, sizeof r.why, "ember_bench_run: iters %d, warmup %d, dim %d, threads %d out of range",
                 (int)c->iters, (int)c->warmup, (int)c->dim, (int)c->threads);
        json_object_set_new(r.j, "error", json_string(r.why));
        st = EMBER_EINVAL;
    } else if (!over_budget(&r)) {
        st = measure(&r);
    }
    run_free(&r);
    *line = line_of(r.j);
    return *line ? st : EMBER_ENOMEM;
}
