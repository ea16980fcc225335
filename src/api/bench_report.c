/*
 * bench_report.c: the measured fields of ember_bench_run's line (bench.h),
 * after the iterations.
 *
 * Over the ranks: the iteration times are the maximum (the world's step
 * time), memory and page faults the largest rank's, bytes exchanged the
 * maximum and the sum (mean per step); the cost model's prediction
 * (src/plan: plan_predict_bytes_sent) is printed beside them.  The SSD
 * tier's counters, and Belady's offline optimum (tier.h) for the same
 * cache and ids, are this rank's timed iterations; Belady's in a world of
 * one only.  Values are rounded to the line's precision (bench_round).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/bench.h"
#include "comm/collect.h"
#include "plan/plan.h"
#include "tier/tier.h"

/* Rounded to a multiple of unit (the line's precision). */
static double bench_round(double x, double unit) { return (double)llround(x / unit) * unit; }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median of v[0..n), n >= 1 (sorts v) */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return (n & 1) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double max_of(const double *v, int32_t n)
{
    double m = v[0];
    for (int32_t i = 1; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

static double sum_of(const double *v, int32_t n)
{
    double s = 0;
    for (int32_t i = 0; i < n; i++)
        s += v[i];
    return s;
}

static json_t *json_doubles(const double *v, int32_t n, double unit)
{
    json_t *a = json_array();
    for (int32_t i = 0; i < n; i++)
        json_array_append_new(a, json_real(bench_round(v[i], unit)));
    return a;
}

static json_t *rounded(double v, double unit) { return json_real(bench_round(v, unit)); }

/* MiB of transparent huge pages mapped by this process (-1 if unknown). */
static double anon_huge_mb(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    double kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %lf kB", &kb) == 1)
            break;
    fclose(f);
    return kb < 0 ? -1 : kb / 1024.0;
}

/* The cost model's bytes per step (forward + backward) of every rank, for
 * the measurement's collection config: sent[r], recv[r].  0, or -1 when
 * the model refuses it. */
static int predict(const bench_run *r, double *sent, double *recv)
{
    const ember_synth_config *sh = &r->c->shape;
    const int32_t world = r->R;
    plan_id_stats *stats = malloc((size_t)sh->tables * sizeof *stats);
    double *pooling = malloc((size_t)sh->tables * sizeof *pooling);
    plan_rank_cost *cost = malloc((size_t)world * sizeof *cost);
    int rc = EMBER_EINVAL;
    if (!stats || !pooling || !cost || plan_stats_synth(sh, &stats[0]) != EMBER_OK)
        goto done;
    for (int32_t t = 0; t < sh->tables; t++) {
        stats[t] = stats[0]; /* every table draws from the same law */
        pooling[t] = sh->pooling;
    }
    plan_workload wl = {&r->ccfg, sh->batch_size, pooling, 0, stats};
    if (plan_predict(&wl, world, cost, NULL) != EMBER_OK)
        goto done;
    for (int32_t k = 0; k < world; k++) {
        sent[k] = plan_predict_bytes_sent(&wl, world, k); /* the planner's figure for last_bytes_sent */
        recv[k] = cost[k].a2a_recv + cost[k].ag_recv;
        if (sent[k] < 0)
            goto done;
    }
    rc = 0;
done:
    free(stats);
    free(pooling);
    free(cost);
    return rc;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Belady's loads for the measurement's own batches: every table stacked
 * into one physical table (row t * rows + id), each step's distinct rows. */
static int belady(const bench_run *r, int64_t cap, int64_t *acc, int64_t *loads)
{
    const ember_synth_config *sh = &r->c->shape;
    const int nb = r->nb;
    const int64_t local_ids = r->local_ids, per_table = local_ids / sh->tables;
    uint32_t **rows = calloc((size_t)nb, sizeof *rows);
    int64_t *n = calloc((size_t)nb, sizeof *n);
    int st = rows && n ? 0 : EMBER_EINVAL;
    for (int s = 0; s < nb && !st; s++) {
        uint32_t *v = malloc(sizeof(uint32_t) * (size_t)(local_ids + 1));
        if (!(rows[s] = v)) {
            st = EMBER_EINVAL;
            break;
        }
        for (int64_t i = 0; i < local_ids; i++)
            v[i] = (uint32_t)((i / per_table) * sh->rows + r->ids[(size_t)s * local_ids + i]);
        qsort(v, (size_t)local_ids, sizeof *v, cmp_u32);
        int64_t u = 0;
        for (int64_t i = 0; i < local_ids; i++)
            if (u == 0 || v[i] != v[u - 1])
                v[u++] = v[i];
        n[s] = u;
    }
    if (!st)
        st = ember_cache_sim_belady((const uint32_t *const *)rows, n, nb, (int64_t)sh->tables * sh->rows, cap,
                                    r->c->warmup, acc, loads);
    for (int s = 0; rows && s < nb; s++)
        free(rows[s]);
    free(rows);
    free(n);
    return st;
}

/* The SSD tier's counters over this rank's timed iterations. */
static void ssd_fields(const bench_run *r, const ember_memory *mem)
{
    json_t *j = r->j;
    const ember_tier_stats *a = &r->tier0, *b = &r->tier1;
    double it = (double)r->c->iters;
    if (r->c->belady && r->R == 1) {
        int64_t acc = 0, loads = 0;
        int bst = belady(r, b->cache_rows, &acc, &loads);
        json_object_set_new(j, "belady_hit_rate",
                            bst == 0 && acc ? rounded(1.0 - (double)loads / (double)acc, 1e-5) : json_null());
    }
    int64_t acc = b->accesses - a->accesses;
    int64_t loads = b->demand_loads - a->demand_loads + b->prefetch_used - a->prefetch_used;
    json_object_set_new(j, "cache_rows", json_integer(b->cache_rows));
    json_object_set_new(j, "hit_rate", json_real(acc ? bench_round(1.0 - (double)loads / (double)acc, 1e-5) : 0));
    json_object_set_new(j, "accesses_per_iter", rounded((double)acc / it, 0.1));
    json_object_set_new(j, "demand_loads_per_iter", rounded((double)(b->demand_loads - a->demand_loads) / it, 0.1));
    json_object_set_new(j, "prefetch_loads_per_iter",
                        rounded((double)(b->prefetch_loads - a->prefetch_loads) / it, 0.1));
    json_object_set_new(j, "prefetch_wasted_per_iter",
                        rounded((double)(b->prefetch_wasted - a->prefetch_wasted) / it, 0.1));
    json_object_set_new(j, "read_bytes_per_iter", rounded((double)(b->bytes_read - a->bytes_read) / it, 1));
    json_object_set_new(j, "written_bytes_per_iter", rounded((double)(b->bytes_written - a->bytes_written) / it, 1));
    json_object_set_new(j, "reads_per_iter", rounded((double)(b->reads - a->reads) / it, 0.1));
    json_object_set_new(j, "segment_writes_per_iter",
                        rounded((double)(b->segment_writes - a->segment_writes) / it, 0.01));
    json_object_set_new(j, "file_written_bytes_per_iter",
                        rounded((double)(b->file_bytes_written - a->file_bytes_written) / it, 1));
    json_object_set_new(j, "moved_rows_per_iter", rounded((double)(b->moved_rows - a->moved_rows) / it, 0.1));
    json_object_set_new(j, "io_wait_ms_per_iter", rounded((b->wait_seconds - a->wait_seconds) * 1e3 / it, 1e-3));
    json_object_set_new(j, "io_sync_ms_per_iter", rounded((b->io_seconds - a->io_seconds) * 1e3 / it, 1e-3));
    json_object_set_new(j, "cold_reloads_per_iter", rounded((double)(b->cold_reloads - a->cold_reloads) / it, 0.1));
    if (r->c->policy == EMBER_CACHE_LOOKAHEAD && r->window_n > 0) { /* the window over the timed iterations */
        json_object_set_new(j, "window_mean", rounded((double)r->window_sum / r->window_n, 0.01));
        json_object_set_new(j, "window_min", json_integer(r->window_min));
        json_object_set_new(j, "window_max", json_integer(r->window_max));
    }
    json_object_set_new(j, "disk_bytes", json_integer(mem->disk_bytes));
    json_object_set_new(j, "cache_meta_bytes", json_integer(mem->cache_meta_bytes));
    /* the operations behind the bytes: loads of rows never written (computed,
     * not read: reads_per_iter counts the others' requests), rows written back */
    json_object_set_new(j, "init_loads_per_iter", rounded((double)(b->init_loads - a->init_loads) / it, 0.1));
    json_object_set_new(j, "writes_per_iter", rounded((double)(b->writes - a->writes) / it, 0.1));
}

/* The dynamic tables' counters, summed over tables (this rank). */
static void dynamic_fields(const bench_run *r)
{
    json_t *j = r->j;
    ember_dynamic_stats ds, sum = {0};
    for (int32_t t = 0; t < r->c->shape.tables; t++) {
        ember_table_dynamic_stats(r->coll, t, &ds);
        sum.capacity += ds.capacity, sum.resident += ds.resident, sum.admitted += ds.admitted;
        sum.evicted += ds.evicted + ds.expired, sum.not_admitted += ds.not_admitted;
        sum.index_bytes += ds.index_bytes + ds.sketch_bytes;
    }
    json_object_set_new(j, "table_kind", json_string("dynamic"));
    json_object_set_new(j, "key_space_bits", json_integer(r->c->key_bits));
    json_object_set_new(j, "admit_after", json_integer(r->c->admit_after));
    json_object_set_new(j, "evict", json_string(ember_evict_name(r->c->evict)));
    json_object_set_new(j, "dyn_capacity", json_integer(sum.capacity));
    json_object_set_new(j, "dyn_resident", json_integer(sum.resident));
    json_object_set_new(j, "dyn_admitted", json_integer(sum.admitted));
    json_object_set_new(j, "dyn_evicted", json_integer(sum.evicted));
    json_object_set_new(j, "dyn_not_admitted", json_integer(sum.not_admitted));
    json_object_set_new(j, "dyn_index_bytes", json_integer(sum.index_bytes));
}

/* The reduced values the fields below read. */
typedef struct reduced {
    int64_t imax[8];  /* page faults, rows, state, workspace, rss over, sent, received */
    int64_t isum[3];  /* unique rows, sent, received                                  */
    double dmax[5];   /* create, gen, huge pages, peak RSS, target RSS                */
} reduced;

static void reduce_all(bench_run *r, const ember_memory *mem, reduced *v)
{
    ember_world *w = r->c->world;
    const int iters = r->c->iters;
    double peak_mb = (double)r->ru1.ru_maxrss / 1024.0;
    double target_mb = 1.1 * (double)(mem->row_bytes + mem->state_bytes) / 1048576.0 + 256.0;
    /* over the ranks: times and memory of the slowest / largest, bytes max and sum */
    ember_comm_reduce_double(w, r->t_it, 4 * (int64_t)iters, EMBER_REDUCE_MAX);
    int64_t imax[8] = {r->ru1.ru_minflt - r->ru0.ru_minflt, mem->row_bytes, mem->state_bytes,
                       mem->workspace_bytes, peak_mb > target_mb, r->bytes[0], r->bytes[1], 0};
    int64_t isum[3] = {r->stats.last_unique_rows, r->bytes[0], r->bytes[1]};
    double dmax[5] = {r->create_ms, r->gen_ms, anon_huge_mb(), peak_mb, target_mb};
    ember_comm_reduce_i64(w, imax, 8, EMBER_REDUCE_MAX);
    ember_comm_reduce_i64(w, isum, 3, EMBER_REDUCE_SUM);
    ember_comm_reduce_double(w, dmax, 5, EMBER_REDUCE_MAX);
    r->by_rank[r->rank] = (double)r->bytes[0] / iters;
    ember_comm_reduce_double(w, r->by_rank, r->R, EMBER_REDUCE_SUM); /* each rank fills its own slot */
    memcpy(v->imax, imax, sizeof imax);
    memcpy(v->isum, isum, sizeof isum);
    memcpy(v->dmax, dmax, sizeof dmax);
}

/* The step times: median, min, max, mean, forward and backward. */
static double time_fields(const bench_run *r)
{
    json_t *j = r->j;
    const int iters = r->c->iters;
    double *tt = r->t_it, *tf = tt + iters, *tb = tt + 2 * iters;
    double tmin = tt[0], tmax = tt[0], tsum = tt[0];
    for (int i = 1; i < iters; i++) {
        tsum += tt[i];
        tmin = tt[i] < tmin ? tt[i] : tmin;
        tmax = tt[i] > tmax ? tt[i] : tmax;
    }
    double med = median(tt, iters);
    json_object_set_new(j, "grad", json_string(r->train ? "fused" : "none"));
    json_object_set_new(j, "iters", json_integer(iters));
    json_object_set_new(j, "warmup", json_integer(r->c->warmup));
    json_object_set_new(j, "lr", r->train ? json_real(r->c->lr) : json_null());
    json_object_set_new(j, "seed", json_integer((json_int_t)r->c->shape.seed));
    json_object_set_new(j, "ms_per_iter_median", rounded(med * 1e3, 1e-3));
    json_object_set_new(j, "ms_per_iter_min", rounded(tmin * 1e3, 1e-3));
    json_object_set_new(j, "ms_per_iter_max", rounded(tmax * 1e3, 1e-3));
    json_object_set_new(j, "ms_per_iter_mean", rounded(tsum / iters * 1e3, 1e-3));
    json_object_set_new(j, "fwd_ms_median", rounded(median(tf, iters) * 1e3, 1e-3));
    json_object_set_new(j, "bwd_ms_median", r->train ? rounded(median(tb, iters) * 1e3, 1e-3) : json_null());
    return med;
}

/* Throughput, distinct rows, memory. */
static void work_fields(const bench_run *r, const reduced *v, const ember_memory *mem, double med)
{
    json_t *j = r->j;
    const ember_synth_config *sh = &r->c->shape;
    const int dyn = r->c->dynamic;
    json_object_set_new(j, "ids_per_iter", json_integer(r->ids_per_iter));
    json_object_set_new(j, "ids_per_s", rounded((double)r->ids_per_iter / med, 0.1));
    json_object_set_new(j, "row_gbytes_per_s", rounded((double)r->ids_per_iter * r->c->dim * 4 / med / 1e9, 1e-4));
    json_object_set_new(j, "distinct_rows_per_table_per_iter",
                        dyn ? json_null() : rounded(r->distinct / r->nb / sh->tables, 0.1));
    json_object_set_new(j, "unique_rows_per_iter", dyn ? json_null() : rounded(r->distinct / r->nb, 0.1));
    if (dyn)
        dynamic_fields(r);
    json_object_set_new(j, "lib_last_unique_rows", json_integer(v->isum[0]));
    json_object_set_new(j, "minflt_per_iter", rounded((double)v->imax[0] / r->c->iters, 0.1));
    json_object_set_new(j, "rows_bytes", json_integer(v->imax[1]));
    json_object_set_new(j, "state_bytes", json_integer(v->imax[2]));
    json_object_set_new(j, "workspace_bytes", json_integer(v->imax[3]));
    json_object_set_new(j, "physical_tables", json_integer(mem->physical_tables));
    json_object_set_new(j, "batch_bytes", json_integer((json_int_t)r->nb * r->local_ids * 8));
    json_object_set_new(j, "create_ms", rounded(v->dmax[0], 0.1));
    json_object_set_new(j, "gen_ms", rounded(v->dmax[1], 0.1));
    json_object_set_new(j, "anon_huge_mb", rounded(v->dmax[2], 0.1));
    json_object_set_new(j, "peak_rss_mb", rounded(v->dmax[3], 0.1));
    json_object_set_new(j, "target_rss_mb", rounded(v->dmax[4], 0.1));
    json_object_set_new(j, "rss_ok", json_boolean(!v->imax[4]));
}

/* The distributed step: world, bytes exchanged per step, the model's
 * prediction (of a whole step: none for forward only). */
static void exchange_fields(bench_run *r, const reduced *v, double med)
{
    json_t *j = r->j;
    const int32_t R = r->R;
    const int iters = r->c->iters;
    double comm_med = median(r->t_it + 3 * iters, iters);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    json_object_set_new(j, "local_batch_max", json_integer((r->c->shape.batch_size + R - 1) / R));
    json_object_set_new(j, "cpus", json_integer(cpus));
    json_object_set_new(j, "oversubscribed", json_boolean(cpus > 0 && (long)ember_comm_local_ranks(r->c->world) *
                                                                         r->c->threads > cpus));
    json_object_set_new(j, "bytes_sent_per_step_max", rounded((double)v->imax[5] / iters, 0.1));
    json_object_set_new(j, "bytes_sent_per_step_sum", rounded((double)v->isum[1] / iters, 0.1));
    json_object_set_new(j, "bytes_received_per_step_max", rounded((double)v->imax[6] / iters, 0.1));
    json_object_set_new(j, "bytes_received_per_step_sum", rounded((double)v->isum[2] / iters, 0.1));
    json_object_set_new(j, "bytes_sent_per_step_by_rank", json_doubles(r->by_rank, R, 0.1));
    json_object_set_new(j, "comm_ms_median", rounded(comm_med * 1e3, 1e-3));
    json_object_set_new(j, "comm_share", rounded(med > 0 ? comm_med / med : 0, 1e-4));
    double *pred = r->pred;
    if (r->train && predict(r, pred, pred + R) == 0) {
        double pmax = max_of(pred, R), psum = sum_of(pred, R);
        double msum = (double)v->isum[1] / iters, mmax = (double)v->imax[5] / iters;
        json_object_set_new(j, "predicted_bytes_sent_per_step_max", rounded(pmax, 0.1));
        json_object_set_new(j, "predicted_bytes_sent_per_step_sum", rounded(psum, 0.1));
        json_object_set_new(j, "predicted_bytes_received_per_step_max", rounded(max_of(pred + R, R), 0.1));
        json_object_set_new(j, "predicted_bytes_sent_by_rank", json_doubles(pred, R, 0.1));
        json_object_set_new(j, "measured_over_predicted_sum", psum > 0 ? rounded(msum / psum, 1e-4) : json_null());
        json_object_set_new(j, "measured_over_predicted_max", pmax > 0 ? rounded(mmax / pmax, 1e-4) : json_null());
    } else {
        json_object_set_new(j, "predicted_bytes_sent_per_step_max", json_null());
        json_object_set_new(j, "predicted_bytes_sent_per_step_sum", json_null());
    }
}

void bench_report(bench_run *r)
{
    ember_memory mem;
    ember_collection_stats(r->coll, &r->stats);
    ember_collection_memory(r->coll, &mem);
    reduced v;
    reduce_all(r, &mem, &v);
    if (r->c->storage == EMBER_STORAGE_SSD)
        ssd_fields(r, &mem);
    double med = time_fields(r);
    work_fields(r, &v, &mem, med);
    exchange_fields(r, &v, med);
}
