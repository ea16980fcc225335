/*
 * replan.c: a training run places its "auto" tables again while it trains
 * (run.h; docs/adaptive.md, "Re-planning while training").
 *
 * Every rank keeps the sparse part of its last `window` batches.  Every
 * `every` steps (a step where the overlap and stale schedules drain):
 *   gather     the ranks' kept batches, all-gathered, so every rank holds
 *              the same global batches, in (step, rank) order
 *   statistics per table from their ids (plan_stats_builder, as `ember plan
 *              --data` measures a file), pooling from their lengths
 *   predict    the placements in force and the planner's (plan_make, the
 *              config's pins kept), each weighed as the planner does: the
 *              busiest rank's cost plus the mean rank's (a rank's cost: the
 *              larger of its bytes sent and received, plus its lookups)
 *   decide     move when the new plan differs and its cost is at least
 *              `gain` below the current one's
 *   move       a new collection with the new placements, the rows and
 *              optimizer state moved into it by all-to-all (ember_move_rows),
 *              the model switched to it, the old one freed
 *   tell       a "replan" event: predicted costs and bytes before and after,
 *              the measured busiest rank's bytes of the step before, the
 *              move's seconds against a step's; the next step's measured
 *              bytes follow as a "replan_measured" event.
 * Every rank computes the same from the same gathered ids, so all move
 * alike; the step after a move is the one the old placement would take
 * (bit for bit where both placements are world-independent: row- and
 * table-wise with the rows exchange, replicated).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "assemble/assemble.h"
#include "comm/collect.h"
#include "comm/comm.h"
#include "config/config_file.h"
#include "core/reserve.h"
#include "plan/plan.h"
#include "step/rows.h"
#include "train/run.h"

/* A kept batch as the ranks exchange it: batch size, features, ids, the
 * lengths (feature-major), the ids; int64 each. */
typedef struct kept_batch {
    int64_t *v;
    int64_t n, cap;
} kept_batch;

struct train_replan {
    int64_t every;
    int32_t window;
    double gain;
    kept_batch *ring;            /* [window] this rank's last batches     */
    int32_t kept, head;
    double last_record, step_s[64]; /* time between records: step seconds */
    int32_t nstep;
    int measure_next;            /* a move happened: measure the next step */
    double before_bytes;
    int64_t moves;
};

int train_replan_open(ember_trainer *s, char *err, size_t errlen)
{
    const cfg_train *t = &s->t;
    if (t->replan_every <= 0)
        return 0;
    if (!s->cf || !s->cf->num_features) {
        snprintf(err, errlen, "train.replan: needs a config's tables (the built-in student's are placed once)");
        return -1;
    }
    for (int32_t i = 0; i < s->cc.num_tables; i++) {
        const ember_table_config *tb = &s->cc.tables[i];
        if (tb->kind == EMBER_TABLE_DYNAMIC || tb->storage == EMBER_STORAGE_SSD) {
            snprintf(err, errlen, "train.replan: table '%s' is %s: re-planning moves fixed tables in memory", tb->name,
                     tb->kind == EMBER_TABLE_DYNAMIC ? "dynamic" : "on the SSD tier");
            return -1;
        }
    }
    if (s->size == 1) /* one rank: every placement is the same table, nothing to weigh */
        return 0;
    train_replan *p = calloc(1, sizeof *p);
    if (p)
        p->ring = calloc((size_t)t->replan_window, sizeof *p->ring);
    if (!p || !p->ring) {
        free(p);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    p->every = t->replan_every;
    p->window = t->replan_window;
    p->gain = t->replan_gain;
    p->last_record = ember_now();
    s->replan = p;
    return 0;
}

void train_replan_close(ember_trainer *s)
{
    train_replan *p = s->replan;
    if (!p)
        return;
    for (int32_t i = 0; i < p->window; i++)
        free(p->ring[i].v);
    free(p->ring);
    free(p);
    s->replan = NULL;
}

int train_replan_due(const ember_trainer *s, int64_t step)
{
    return s->replan && step % s->replan->every == 0 && step < s->t.steps;
}

/* The steps a re-plan reads: the last `window` up to each re-plan step
 * (every >= window); the others are not kept. */
static int read_later(const train_replan *p, int64_t step)
{
    int64_t in = step % p->every;
    return in == 0 || in > p->every - p->window;
}

/* A batch, as the ranks exchange it (kept_batch), into the ring. */
static kept_batch *next_slot(train_replan *p, int64_t n)
{
    kept_batch *k = &p->ring[p->head];
    if (ember_reserve((void **)&k->v, &k->cap, n + 1, sizeof(int64_t)))
        return NULL;
    k->n = n;
    p->head = (p->head + 1) % p->window;
    p->kept += p->kept < p->window;
    return k;
}

/* This rank's batch of the step, kept. */
static int keep(train_replan *p, const ember_batch *b)
{
    const int64_t nl = (int64_t)b->batch_size * b->num_features;
    kept_batch *k = next_slot(p, 3 + nl + b->num_ids);
    if (!k)
        return EMBER_ENOMEM;
    k->v[0] = b->batch_size, k->v[1] = b->num_features, k->v[2] = b->num_ids;
    for (int64_t j = 0; j < nl; j++)
        k->v[3 + j] = b->lengths[j];
    if (b->num_ids)
        memcpy(k->v + 3 + nl, b->ids, sizeof(int64_t) * (size_t)b->num_ids);
    return EMBER_OK;
}

/* The kept batches, oldest first, one after another. */
static int64_t *serialise(const train_replan *p, int64_t *n)
{
    int64_t total = 0, o = 0;
    for (int32_t i = 0; i < p->kept; i++)
        total += p->ring[(p->head - p->kept + i + p->window) % p->window].n;
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(total + 1));
    for (int32_t i = 0; v && i < p->kept; i++) {
        const kept_batch *k = &p->ring[(p->head - p->kept + i + p->window) % p->window];
        memcpy(v + o, k->v, sizeof(int64_t) * (size_t)k->n);
        o += k->n;
    }
    *n = total;
    return v;
}

/* Every rank's kept batches, the same on every rank: sizes all-gathered,
 * then blocks padded to the largest.  *all: W blocks of *block int64s. */
static int gather(ember_trainer *s, int64_t **all, int64_t *block)
{
    int64_t n = 0, *mine = serialise(s->replan, &n);
    int st = mine ? EMBER_OK : EMBER_ENOMEM;
    if (run_agree_status(s, st, "re-planning: out of memory")) {
        free(mine);
        return 1;
    }
    int64_t *sizes = calloc((size_t)s->size, sizeof *sizes), most = 0;
    st = sizes ? ember_comm_allgather(s->world, &n, sizeof n, sizes) : EMBER_ENOMEM;
    for (int32_t r = 0; st == EMBER_OK && r < s->size; r++)
        most = sizes[r] > most ? sizes[r] : most;
    int64_t *pad = st == EMBER_OK ? calloc((size_t)(most + 1), sizeof(int64_t)) : NULL;
    int64_t *out = pad ? malloc(sizeof(int64_t) * (size_t)(most * s->size + 1)) : NULL;
    if (st == EMBER_OK && !out)
        st = EMBER_ENOMEM;
    if (run_agree_status(s, st, "re-planning: out of memory")) {
        free(mine), free(sizes), free(pad), free(out);
        return 1;
    }
    memcpy(pad, mine, sizeof(int64_t) * (size_t)n);
    st = ember_comm_allgather(s->world, pad, most * (int64_t)sizeof(int64_t), out);
    free(mine), free(sizes), free(pad);
    if (run_agree_status(s, st, "re-planning: the ids' all-gather")) {
        free(out);
        return 1;
    }
    *all = out;
    *block = most;
    return 0;
}

/* Statistics of every table, and pooling and weights, from the gathered
 * batches (steps oldest first, ranks in order). */
static int measure(ember_trainer *s, const int64_t *all, int64_t block, plan_id_stats *st, double *pooling)
{
    const int32_t T = s->cc.num_tables, F = s->cc.num_features;
    plan_stats_builder **bl = calloc((size_t)T, sizeof *bl);
    double *ids = calloc((size_t)F + 1, sizeof *ids), samples = 0;
    int rc = bl && ids ? 0 : -1;
    for (int32_t t = 0; t < T && !rc; t++)
        rc = plan_stats_builder_create(s->cc.tables[t].rows, &bl[t]) ? -1 : 0;
    for (int32_t step = 0; step < s->replan->kept && !rc; step++)
        for (int32_t r = 0; r < s->size && !rc; r++) {
            const int64_t *v = all + (int64_t)r * block, *end = v + block;
            for (int32_t skip = 0; skip < step && v < end; skip++) /* to this step's batch */
                v += 3 + v[0] * v[1] + v[2];
            if (v + 3 > end)
                continue;
            int64_t bs = v[0], nf = v[1];
            const int64_t *len = v + 3, *x = len + bs * nf;
            samples += (double)bs;
            for (int64_t f = 0; f < nf && f < F && !rc; f++) {
                int64_t n = 0;
                for (int64_t b = 0; b < bs; b++)
                    n += len[f * bs + b];
                ids[f] += (double)n;
                rc = plan_stats_builder_add(bl[s->cc.features[f].table], x, n) ? -1 : 0;
                x += n;
            }
        }
    for (int32_t f = 0; f < F; f++)
        pooling[f] = samples > 0 ? ids[f] / samples : 0;
    for (int32_t t = 0; t < T && !rc; t++)
        rc = plan_stats_builder_finish(bl[t], &st[t]) ? -1 : 0;
    for (int32_t t = 0; bl && t < T; t++)
        plan_stats_builder_destroy(bl[t]);
    free(bl);
    free(ids);
    return rc;
}

/* A plan's cost as the planner weighs it (the busiest rank's cost plus the
 * mean rank's: docs/planner.md), and the busiest rank's bytes sent. */
static void weigh(const plan_rank_cost *rc, int32_t W, double lw, double *cost, double *bytes)
{
    double most = 0, sum = 0;
    *bytes = 0;
    for (int32_t r = 0; r < W; r++) {
        double c = plan_rank_weight(&rc[r], lw), b = rc[r].a2a_sent + rc[r].ag_sent;
        most = c > most ? c : most;
        sum += c;
        *bytes = b > *bytes ? b : *bytes;
    }
    *cost = most + sum / W;
}

static const char *placed(const ember_table_config *t, char *buf, size_t n)
{
    if (t->placement == EMBER_PLACE_REPLICATED)
        snprintf(buf, n, "replicated");
    else if (t->placement == EMBER_PLACE_TABLE)
        snprintf(buf, n, "table/%s on rank %d", config_exchange_name(t->exchange), (int)t->owner);
    else
        snprintf(buf, n, "%s/%s", config_placement_name(t->placement), config_exchange_name(t->exchange));
    return buf;
}

/* Placements as checkpoints hold them (train.placement): per table its
 * placement, owner and exchange. */
static void set_placement(ember_table_config *t, const int64_t *pl)
{
    t->placement = (ember_placement)pl[0];
    t->owner = (int32_t)pl[1];
    t->exchange = (ember_exchange)pl[2];
}

/* Placements that differ from those in force (an owner only where it
 * counts, an exchange except for replicated tables)? */
static int differs(const ember_trainer *s, const int64_t *pl)
{
    for (int32_t t = 0; t < s->cc.num_tables; t++) {
        const ember_table_config *tb = &s->cc.tables[t];
        const int64_t p = pl[3 * t], o = pl[3 * t + 1], x = pl[3 * t + 2];
        if (tb->placement != p || (p == EMBER_PLACE_TABLE && tb->owner != o) ||
            (p != EMBER_PLACE_REPLICATED && tb->exchange != x))
            return 1;
    }
    return 0;
}

/* The collection again with these placements, the rows moved, the model
 * switched.  Collective; 0, or 1 (agreed; the old collection stays). */
static int move_to(ember_trainer *s, const int64_t *pl)
{
    const int32_t T = s->cc.num_tables;
    ember_table_config *nt = malloc(sizeof *nt * (size_t)T);
    ember_collection *nc = NULL;
    int st = nt ? EMBER_OK : EMBER_ENOMEM;
    if (run_agree_status(s, st, "re-planning: out of memory")) {
        free(nt);
        return 1;
    }
    memcpy(nt, s->cc.tables, sizeof *nt * (size_t)T);
    for (int32_t t = 0; t < T; t++)
        set_placement(&nt[t], &pl[3 * t]);
    ember_collection_config ncc = s->cc;
    ncc.tables = nt;
    st = ember_collection_create_rows(&ncc, 0, &nc); /* every row is moved in next */
    char msg[1100];
    snprintf(msg, sizeof msg, "re-planning: %s", st == EMBER_OK ? "" : ember_errmsg(NULL));
    if (!run_agree_status(s, st, msg)) {
        st = ember_move_rows(s->coll, nc);
        if (st == EMBER_OK && s->limits && !limits_adapt_done(s->limits))
            st = ember_limits_observe(nc, 1);
        snprintf(msg, sizeof msg, "re-planning: moving the rows: %s", st == EMBER_OK ? "" : ember_errmsg(nc));
        if (!run_agree_status(s, st, msg)) {
            model_set_collection(s->model, nc);
            ember_collection_destroy(s->coll);
            s->coll = nc;
            memcpy((ember_table_config *)s->cc.tables, nt, sizeof *nt * (size_t)T);
            free(nt);
            return 0;
        }
    }
    ember_collection_destroy(nc);
    free(nt);
    return 1;
}

static double median_step(const train_replan *p)
{
    double v[64];
    int32_t n = p->nstep < 64 ? p->nstep : 64;
    memcpy(v, p->step_s, sizeof(double) * (size_t)n);
    for (int32_t i = 1; i < n; i++) /* insertion sort: a few values */
        for (int32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return n ? v[n / 2] : 0;
}

/* The busiest rank's bytes sent in the last step, over the world. */
static double measured_bytes(ember_trainer *s)
{
    ember_stats es;
    ember_collection_stats(s->coll, &es);
    double v = (double)es.last_bytes_sent;
    ember_comm_reduce_double(s->world, &v, 1, EMBER_REDUCE_MAX);
    return v;
}

int train_replan_step(ember_trainer *s, int64_t step, const ember_batch *sparse)
{
    train_replan *p = s->replan;
    if (!p)
        return 0;
    double now = ember_now();
    p->step_s[p->nstep++ % 64] = now - p->last_record;
    p->last_record = now;
    if (p->measure_next) { /* the step after a move: what it measured */
        p->measure_next = 0;
        double after = measured_bytes(s);
        if (s->rank == 0 && s->on_event) {
            json_t *j = json_pack("{s:s, s:I, s:f, s:f, s:o}", "event", "replan_measured", "step", (json_int_t)step,
                                  "busiest_bytes_before", p->before_bytes, "busiest_bytes_after", after, "ratio",
                                  p->before_bytes > 0 ? json_real(after / p->before_bytes) : json_null());
            train_event_emit(s, j);
        }
    }
    int st = read_later(p, step) ? keep(p, sparse) : EMBER_OK;
    if (run_agree_status(s, st, "re-planning: out of memory for the kept batches"))
        return 1;
    if (!train_replan_due(s, step))
        return 0;
    const int32_t T = s->cc.num_tables, F = s->cc.num_features, W = s->size;
    const config_file *cf = s->cf;
    int64_t *all = NULL, block = 0;
    if (gather(s, &all, &block))
        return 1;
    plan_id_stats *stats = calloc((size_t)T, sizeof *stats);
    double *pooling = calloc((size_t)F + 1, sizeof *pooling);
    plan_pin *pins = calloc((size_t)T, sizeof *pins);
    plan_rank_cost *cur = calloc((size_t)W, sizeof *cur);
    int64_t *pl = malloc(sizeof(int64_t) * (size_t)(3 * T + 1)); /* the planner's placements */
    plan_result res;
    memset(&res, 0, sizeof res);
    char err[700] = "";
    int failed = !stats || !pooling || !pins || !cur || !pl;
    if (!failed && measure(s, all, block, stats, pooling))
        failed = 1;
    free(all);
    plan_options po = plan_options_default();
    po.world = W;
    po.memory_per_rank = cf->planner.memory_per_rank;
    po.replicate_threshold = cf->planner.replicate_threshold;
    po.lookup_weight = cf->planner.lookup_weight;
    plan_workload w = {&s->cc, train_global_batch(s), pooling, config_file_weighted(cf), stats};
    if (!failed) {
        for (int32_t t = 0; t < T; t++)
            pins[t] = (plan_pin){cf->table_extra[t].placement_pin, cf->table_extra[t].owner_pin,
                                 cf->table_extra[t].exchange_pin};
        if (plan_predict(&w, W, cur, NULL) != EMBER_OK || plan_make(&w, pins, &po, &res) != EMBER_OK) {
            snprintf(err, sizeof err, "re-planning at step %lld: %s", (long long)step,
                     res.error[0] ? res.error : "the planner failed");
            failed = 1;
        }
    } else {
        snprintf(err, sizeof err, "re-planning at step %lld: out of memory", (long long)step);
    }
    if (run_agree(s, failed, EMBER_ENOMEM, err)) {
        plan_result_free(&res);
        free(stats), free(pooling), free(pins), free(cur), free(pl);
        return 1;
    }
    for (int32_t t = 0; t < T; t++)
        pl[3 * t] = res.placement[t], pl[3 * t + 1] = res.owner[t], pl[3 * t + 2] = res.exchange[t];
    double cost0, bytes0, cost1, bytes1;
    weigh(cur, W, po.lookup_weight, &cost0, &bytes0);
    weigh(res.ranks, W, po.lookup_weight, &cost1, &bytes1);
    const int move = differs(s, pl) && cost1 < (1.0 - p->gain) * cost0;
    double measured = measured_bytes(s), seconds = 0;
    json_t *moved = json_array();
    if (move) {
        char a[96], b[96];
        for (int32_t t = 0; t < T; t++) {
            ember_table_config nt = s->cc.tables[t];
            set_placement(&nt, &pl[3 * t]);
            placed(&s->cc.tables[t], a, sizeof a);
            placed(&nt, b, sizeof b);
            if (strcmp(a, b))
                json_array_append_new(moved, json_pack("{s:s, s:s, s:s}", "table", s->cc.tables[t].name, "from", a,
                                                       "to", b));
        }
        double t0 = ember_now();
        if (move_to(s, pl)) {
            json_decref(moved);
            plan_result_free(&res);
            free(stats), free(pooling), free(pins), free(cur), free(pl);
            return 1;
        }
        seconds = ember_now() - t0;
        p->moves++;
        p->measure_next = 1;
        p->before_bytes = measured;
        p->last_record = ember_now(); /* the move is not a step's time */
    }
    if (s->rank == 0 && s->on_event) {
        json_t *j = json_object();
        json_object_set_new(j, "event", json_string("replan"));
        json_object_set_new(j, "step", json_integer(step));
        json_object_set_new(j, "moved", json_boolean(move));
        json_object_set_new(j, "tables", moved);
        json_object_set_new(j, "predicted_cost", json_pack("[f, f]", cost0, cost1));
        json_object_set_new(j, "predicted_busiest_bytes", json_pack("[f, f]", bytes0, bytes1));
        json_object_set_new(j, "measured_busiest_bytes", json_real(measured));
        json_object_set_new(j, "move_seconds", json_real(seconds));
        json_object_set_new(j, "step_seconds", json_real(median_step(p)));
        json_object_set_new(j, "gain", json_real(cost0 > 0 ? 1.0 - cost1 / cost0 : 0));
        train_event_emit(s, j);
    } else {
        json_decref(moved);
    }
    plan_result_free(&res);
    free(stats), free(pooling), free(pins), free(cur), free(pl);
    return 0;
}

int64_t train_replan_moves(const ember_trainer *s) { return s->replan ? s->replan->moves : 0; }

/* ---------------------------------------------------------- checkpoints */

int64_t *train_replan_placement_blob(const ember_trainer *s, int64_t *bytes)
{
    const int32_t T = s->cc.num_tables;
    int64_t *b = malloc(sizeof(int64_t) * (size_t)(3 * T + 1));
    if (!b)
        return NULL;
    for (int32_t t = 0; t < T; t++) {
        b[3 * t] = s->cc.tables[t].placement;
        b[3 * t + 1] = s->cc.tables[t].owner;
        b[3 * t + 2] = s->cc.tables[t].exchange;
    }
    *bytes = 3 * T * (int64_t)sizeof(int64_t);
    return b;
}

int64_t *train_replan_kept_blob(const ember_trainer *s, int64_t *bytes)
{
    int64_t n = 0, *v = s->replan ? serialise(s->replan, &n) : NULL;
    *bytes = v ? n * (int64_t)sizeof(int64_t) : 0;
    return v;
}

int train_replan_restore(ember_trainer *s, const int64_t *placement, int64_t pbytes, const int64_t *kept,
                         int64_t kbytes, int same_world, char *err, size_t errlen)
{
    const int32_t T = s->cc.num_tables, W = s->size;
    int failed = pbytes != 3 * T * (int64_t)sizeof(int64_t);
    for (int32_t t = 0; t < T && !failed; t++) {
        const int64_t p = placement[3 * t], o = placement[3 * t + 1], x = placement[3 * t + 2];
        failed = p < EMBER_PLACE_ROW || p > EMBER_PLACE_REPLICATED || x < 0 || x > 1 ||
                 (p == EMBER_PLACE_TABLE && (o < 0 || o >= W));
    }
    if (failed)
        snprintf(err, errlen, "blob \"train.placement\": not %d tables' placements over %d ranks", (int)T, (int)W);
    if (run_agree(s, failed, EMBER_ECORRUPT, err))
        return 1;
    /* the kept batches of this rank, when the world is the one that saved them */
    train_replan *p = s->replan;
    if (p && same_world && kept && kbytes > 0) {
        const int64_t *v = kept, *end = kept + kbytes / (int64_t)sizeof(int64_t);
        while (v + 3 <= end && !failed) {
            const int64_t n = 3 + v[0] * v[1] + v[2];
            kept_batch *k = v[0] < 0 || v[1] < 0 || v[2] < 0 || n > end - v ? NULL : next_slot(p, n);
            failed = !k;
            if (k)
                memcpy(k->v, v, sizeof(int64_t) * (size_t)n);
            v += failed ? 0 : n;
        }
        snprintf(err, errlen, "blob \"train.replan_ids\": damaged, or out of memory for it");
    }
    if (run_agree(s, failed, EMBER_ECORRUPT, err))
        return 1;
    return differs(s, placement) ? move_to(s, placement) : 0;
}
