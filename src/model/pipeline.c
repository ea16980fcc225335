/*
 * pipeline.c: pipeline stages over a world (pipeline.h; docs/pipeline.md).
 *
 * A step is a list of operations per rank, built by the schedule: F (m, j)
 * receives piece j's input for micro-batch m from the rank of piece j-1
 * (piece 0 reads the dense features), runs the piece forward and sends its
 * output on (the last piece computes the loss instead and keeps dlogit);
 * B (m, j) receives the output's gradient from the rank of piece j+1 (the
 * last piece takes its dlogit), runs the piece backward and sends the
 * input's gradient back.  Sends are non-blocking and waited for at the end
 * of the step, receives block, in the schedule's order; the three
 * schedules are deadlock-free under that rule (each receive's message is
 * sent by an operation that does not wait on this rank's later ones).
 * Tags: 2 (m P + j) for the input of piece j, + 1 for its output's
 * gradient.
 *
 * Activations: without recomputation every (m, j) in flight holds a model
 * of its own (dlrm_create_shared: the same parameters and gradients, its
 * own activations), taken from a pool at F and given back after B; with
 * it, F runs on one scratch model and keeps only the piece's input, and B
 * runs the piece forward again on the scratch model before its backward.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/collect.h"
#include "comm/comm.h"
#include "model/pipeline.h"

typedef struct pipe_op {
    int bwd;
    int32_t m, piece;
} pipe_op;

struct pipeline {
    pipe_config cfg;
    dlrm *model;
    ember_world *w;
    int32_t S, rank, P, nblocks, interaction;
    int32_t start[PIPE_MAX_PIECES + 1]; /* piece j: blocks [start[j], start[j+1]) */
    dlrm **pool;                        /* pool[0] is the caller's model          */
    int *busy;
    int32_t npool;
    pipe_stats st;
};

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return EMBER_EINVAL;
}

pipe_config pipe_config_default(pipe_schedule schedule)
{
    pipe_config c;
    memset(&c, 0, sizeof c);
    c.schedule = schedule;
    c.virtual_stages = schedule == PIPE_INTERLEAVED ? 2 : 1;
    return c;
}

const char *pipe_schedule_name(pipe_schedule schedule)
{
    static const char *const NAMES[] = {"fill-drain", "1f1b", "interleaved"};
    return (unsigned)schedule <= PIPE_INTERLEAVED ? NAMES[schedule] : NULL;
}

int pipe_pieces(const pipe_config *cfg, int32_t S, int32_t nblocks, int32_t *start, char *err, size_t errlen)
{
    const int32_t v = cfg->virtual_stages < 1 ? 1 : cfg->virtual_stages, P = S * v;
    if (P > PIPE_MAX_PIECES || P > nblocks)
        return fail(err, errlen, "pipeline: %d pieces (stages x virtual stages) for a model of %d blocks", (int)P,
                    (int)nblocks);
    start[0] = 0;
    start[P] = nblocks;
    if (!cfg->num_cuts) {
        for (int32_t j = 1; j < P; j++)
            start[j] = (int32_t)((int64_t)j * nblocks / P);
        return 0;
    }
    if (cfg->num_cuts != P - 1)
        return fail(err, errlen, "pipeline: %d cuts for %d pieces", (int)cfg->num_cuts, (int)P);
    for (int32_t j = 1; j < P; j++) {
        start[j] = cfg->cuts[j - 1];
        if (start[j] <= start[j - 1] || start[j] >= nblocks)
            return fail(err, errlen, "pipeline: cut %d at block %d is not after the previous one and inside the "
                        "model", (int)j, (int)cfg->cuts[j - 1]);
    }
    return 0;
}

int pipe_held(const pipe_config *cfg, int32_t S, int32_t s, int32_t nblocks, uint8_t *held, char *err,
              size_t errlen)
{
    int32_t start[PIPE_MAX_PIECES + 1];
    if (pipe_pieces(cfg, S, nblocks, start, err, errlen))
        return EMBER_EINVAL;
    const int32_t P = S * (cfg->virtual_stages < 1 ? 1 : cfg->virtual_stages);
    for (int32_t j = 0; j < P; j++)
        for (int32_t b = start[j]; b < start[j + 1]; b++)
            held[b] = j % S == s;
    return 0;
}

static int32_t piece_of(const pipeline *p, int32_t block);

int pipe_create(const pipe_config *cfg, dlrm *model, ember_world *stages, pipeline **out, char *err, size_t errlen)
{
    *out = NULL;
    const int32_t S = stages->size, v = cfg->virtual_stages < 1 ? 1 : cfg->virtual_stages;
    const int32_t nblocks = dlrm_num_blocks(model), P = S * v;
    if ((unsigned)cfg->schedule > PIPE_INTERLEAVED)
        return fail(err, errlen, "pipeline: unknown schedule %d", (int)cfg->schedule);
    if (v > 1 && cfg->schedule != PIPE_INTERLEAVED)
        return fail(err, errlen, "pipeline: %d virtual stages need the interleaved schedule", (int)v);
    pipeline *p = calloc(1, sizeof *p);
    if (!p)
        return fail(err, errlen, "pipeline: out of memory");
    p->cfg = *cfg;
    p->cfg.virtual_stages = v;
    p->model = model;
    p->w = stages;
    p->S = S;
    p->rank = stages->rank;
    p->P = P;
    p->nblocks = nblocks;
    p->interaction = dlrm_get_config(model)->num_bottom;
    if (pipe_pieces(cfg, S, nblocks, p->start, err, errlen)) {
        pipe_destroy(p);
        return EMBER_EINVAL;
    }
    for (int32_t b = 0; b < nblocks; b++)
        if (piece_of(p, b) % S == p->rank && !dlrm_holds(model, b)) {
            pipe_destroy(p);
            return fail(err, errlen, "pipeline: this rank runs block %d, its model does not hold it", (int)b);
        }
    p->pool = calloc(1, sizeof *p->pool);
    p->busy = calloc(1, sizeof *p->busy);
    if (!p->pool || !p->busy) {
        pipe_destroy(p);
        return fail(err, errlen, "pipeline: out of memory");
    }
    p->pool[0] = model;
    p->npool = 1;
    *out = p;
    return 0;
}

void pipe_destroy(pipeline *p)
{
    if (!p)
        return;
    for (int32_t i = 1; i < p->npool; i++)
        dlrm_destroy(p->pool[i]);
    free(p->pool);
    free(p->busy);
    free(p);
}

static int32_t piece_of(const pipeline *p, int32_t block)
{
    int32_t j = 0;
    while (j + 1 < p->P && p->start[j + 1] <= block)
        j++;
    return j;
}

int32_t pipe_owner(const pipeline *p, int32_t block) { return piece_of(p, block) % p->S; }
int pipe_runs(const pipeline *p, int32_t block) { return pipe_owner(p, block) == p->rank; }

void pipe_get_stats(const pipeline *p, pipe_stats *out) { *out = p->st; }
void pipe_reset_stats(pipeline *p) { memset(&p->st, 0, sizeof p->st); }

/* This rank's operations for k micro-batches into ops (room for 2 k v). */
static int32_t build_ops(const pipeline *p, int32_t k, pipe_op *ops)
{
    const int32_t S = p->S, s = p->rank, v = p->cfg.virtual_stages;
    int32_t n = 0;
    if (p->cfg.schedule == PIPE_FILL_DRAIN) {
        for (int32_t m = 0; m < k; m++)
            ops[n++] = (pipe_op){0, m, s};
        for (int32_t m = 0; m < k; m++)
            ops[n++] = (pipe_op){1, m, s};
        return n;
    }
    /* 1f1b is interleaved with v = 1 (micro-batch id, piece s), with S - s - 1
     * warm-up forwards; then one forward and one backward in turn, then the
     * backwards left */
    const int32_t total = k * v;
    int32_t warm = v == 1 ? S - s - 1 : 2 * (S - s - 1) + (v - 1) * S;
    warm = warm < total ? warm : total;
#define FWD(id) ((pipe_op){0, ((id) / (S * v)) * S + (id) % S, (((id) / S) % v) * S + s})
#define BWD(id) ((pipe_op){1, ((id) / (S * v)) * S + (id) % S, (v - 1 - ((id) / S) % v) * S + s})
    for (int32_t i = 0; i < warm; i++)
        ops[n++] = FWD(i);
    for (int32_t i = 0; i < total - warm; i++) {
        ops[n++] = FWD(warm + i);
        ops[n++] = BWD(i);
    }
    for (int32_t i = total - warm; i < total; i++)
        ops[n++] = BWD(i);
#undef FWD
#undef BWD
    return n;
}

/* A free model of the pool (a new one when all are in flight); -1 when out of memory. */
static int32_t take(pipeline *p)
{
    for (int32_t i = 0; i < p->npool; i++)
        if (!p->busy[i]) {
            p->busy[i] = 1;
            return i;
        }
    dlrm **pool = realloc(p->pool, (size_t)(p->npool + 1) * sizeof *pool);
    if (pool)
        p->pool = pool;
    int *busy = realloc(p->busy, (size_t)(p->npool + 1) * sizeof *busy);
    if (busy)
        p->busy = busy;
    if (!pool || !busy || dlrm_create_shared(p->model, &p->pool[p->npool]))
        return -1;
    p->busy[p->npool] = 1;
    return p->npool++;
}

/* Everything one step holds per (micro-batch, piece), freed at its end. */
typedef struct step_bufs {
    float **in, **out, **din, **dout, **dlogit;
    int32_t *inst;
    void **reqs;
    int32_t nreq;
    ember_world *w;
} step_bufs;

/* MPI moves a large message only while its sender is inside MPI (the
 * rendezvous protocol): the models call this after every layer, so a
 * stage's sends travel while it computes instead of when it next waits
 * (measured: without it the two stages of a 2-rank pipeline ran one after
 * the other, each about half busy).  Completed sends are forgotten. */
static void progress_sends(void *arg)
{
    step_bufs *sb = arg;
    for (int32_t r = 0; r < sb->nreq; r++) {
        int done = 0;
        if (sb->reqs[r]) {
            sb->w->ops->test(sb->w, sb->reqs[r], &done); /* done: freed, even on an error (which
                                                            the end of the step reports as MPI's) */
            if (done)
                sb->reqs[r] = NULL;
        }
    }
}

static float *alloc_floats(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }

/* Bytes piece j keeps per micro-batch of b samples for its backward. */
static int64_t kept_bytes(const pipeline *p, int32_t j, int32_t b)
{
    return dlrm_blocks_kept_floats(p->model, p->start[j], p->start[j + 1]) * b * (int64_t)sizeof(float);
}

static void held_update(pipeline *p, int32_t in_flight, int64_t bytes)
{
    if (in_flight > p->st.peak_in_flight)
        p->st.peak_in_flight = in_flight;
    if (bytes > p->st.peak_activation_bytes)
        p->st.peak_activation_bytes = bytes;
}

/* One step in progress: its arguments, the buffers it holds, and the
 * activation bytes it keeps for its backwards. */
typedef struct step_run {
    pipeline *p;
    int32_t n, b;
    const float *dense, *pooled, *labels;
    float scale;
    double *loss_sum;
    float *d_pooled;
    int64_t nd, pw;              /* dense floats and pooled floats per sample */
    step_bufs sb;
    float *scratch;              /* recomputation: one piece's outputs        */
    int32_t in_flight;           /* micro-batch pieces forward, not yet back  */
    int64_t held;                /* their activation bytes                    */
} step_run;

/* What an operation works on: micro-batch m (rows of it) through piece j,
 * blocks [b0, b1); its input and output floats. */
typedef struct op_shape {
    int32_t m, j, slot, rows, b0, b1;
    int last, has_int;           /* the last piece; it holds the interaction  */
    int64_t in_n, out_n;
    const float *pooled_m;       /* the micro-batch's pooled rows (has_int)   */
} op_shape;

static op_shape shape_of(const step_run *r, pipe_op op)
{
    const pipeline *p = r->p;
    op_shape o;
    o.m = op.m;
    o.j = op.piece;
    o.slot = o.m * p->P + o.j;
    int64_t left = (int64_t)r->n - (int64_t)o.m * r->b; /* the last micro-batch is short, padding ones empty */
    o.rows = (int32_t)(left < r->b ? (left > 0 ? left : 0) : r->b);
    o.b0 = p->start[o.j];
    o.b1 = p->start[o.j + 1];
    o.last = o.j == p->P - 1;
    o.has_int = o.b0 <= p->interaction && p->interaction < o.b1;
    o.in_n = (int64_t)o.rows * dlrm_block_in_width(p->model, o.b0);
    o.out_n = (int64_t)o.rows * dlrm_block_out_width(p->model, o.b1 - 1);
    o.pooled_m = o.has_int ? r->pooled + (int64_t)o.m * r->b * r->pw : NULL;
    return o;
}

/* F (m, j): the input received (piece 0 reads the dense features), the
 * piece forward on a model of the pool (the scratch model with
 * recomputation), the loss on the last piece, the output sent on. */
static int run_forward(step_run *r, const op_shape *o)
{
    pipeline *p = r->p;
    step_bufs *sb = &r->sb;
    const int32_t S = p->S, slot = o->slot;
    const float *in = r->dense + (int64_t)o->m * r->b * r->nd;
    int st;
    if (o->j > 0) {
        if (!(sb->in[slot] = alloc_floats(o->in_n)))
            return EMBER_ENOMEM;
        if ((st = ember_comm_recv(p->w, sb->in[slot], o->in_n * 4, (o->j - 1) % S, 2 * slot)) != EMBER_OK)
            return st;
        in = sb->in[slot];
    }
    const int32_t i = p->cfg.recompute ? 0 : take(p);
    if (!(sb->out[slot] = alloc_floats(o->out_n)) || i < 0 ||
        (o->last && !(sb->dlogit[o->m] = alloc_floats(o->rows))))
        return EMBER_ENOMEM;
    double t0 = ember_now();
    if (dlrm_forward_blocks(p->pool[i], o->rows, o->b0, o->b1, in, o->pooled_m, sb->out[slot]))
        return EMBER_ENOMEM;
    if (o->last)
        *r->loss_sum += dense_bce_logits(sb->out[slot], r->labels + (int64_t)o->m * r->b, o->rows, r->scale,
                                         sb->dlogit[o->m]);
    p->st.busy_s += ember_now() - t0;
    if (!o->last && (st = ember_comm_isend(p->w, sb->out[slot], o->out_n * 4, (o->j + 1) % S, 2 * (slot + 1),
                                           &sb->reqs[sb->nreq++])) != EMBER_OK)
        return st;
    r->in_flight++;
    if (p->cfg.recompute) { /* keep the input only (piece 0's is the caller's) */
        r->held += o->j > 0 ? o->in_n * 4 : 0;
        held_update(p, r->in_flight, r->held + kept_bytes(p, o->j, o->rows)); /* and one piece's, recomputed */
    } else {
        sb->inst[slot] = i;
        r->held += kept_bytes(p, o->j, o->rows);
        held_update(p, r->in_flight, r->held);
        free(sb->in[slot]); /* copied into the model's activations */
        sb->in[slot] = NULL;
    }
    return EMBER_OK;
}

/* B (m, j): the output's gradient received (the last piece has its
 * dlogit), the piece backward (after its forward again, with
 * recomputation), the input's gradient sent back. */
static int run_backward(step_run *r, const op_shape *o)
{
    pipeline *p = r->p;
    step_bufs *sb = &r->sb;
    const int32_t S = p->S, slot = o->slot;
    const float *dout = o->last ? sb->dlogit[o->m] : NULL;
    int st;
    if (!o->last) {
        if (!(sb->dout[slot] = alloc_floats(o->out_n)))
            return EMBER_ENOMEM;
        if ((st = ember_comm_recv(p->w, sb->dout[slot], o->out_n * 4, (o->j + 1) % S, 2 * slot + 1)) != EMBER_OK)
            return st;
        dout = sb->dout[slot];
    }
    if (o->j > 0 && !(sb->din[slot] = alloc_floats(o->in_n)))
        return EMBER_ENOMEM;
    double t0 = ember_now();
    int32_t i = sb->inst[slot];
    if (p->cfg.recompute) { /* the piece forward again, on the scratch model */
        float *grown = realloc(r->scratch, (size_t)(o->out_n > 0 ? o->out_n : 1) * sizeof *grown);
        if (!grown)
            return EMBER_ENOMEM;
        r->scratch = grown;
        i = 0;
        const float *in = o->j > 0 ? sb->in[slot] : r->dense + (int64_t)o->m * r->b * r->nd;
        if (dlrm_forward_blocks(p->pool[0], o->rows, o->b0, o->b1, in, o->pooled_m, r->scratch))
            return EMBER_ENOMEM;
    }
    dlrm_backward_blocks(p->pool[i], o->b0, o->b1, dout, o->j > 0 ? sb->din[slot] : NULL,
                         o->has_int ? r->d_pooled + (int64_t)o->m * r->b * r->pw : NULL);
    p->st.busy_s += ember_now() - t0;
    free(sb->dout[slot]); /* received, used: not needed past here */
    sb->dout[slot] = NULL;
    if (o->j > 0 && (st = ember_comm_isend(p->w, sb->din[slot], o->in_n * 4, (o->j - 1) % S, 2 * (slot - 1) + 1,
                                           &sb->reqs[sb->nreq++])) != EMBER_OK)
        return st;
    r->in_flight--;
    if (p->cfg.recompute) {
        r->held -= o->j > 0 ? o->in_n * 4 : 0;
        free(sb->in[slot]);
        sb->in[slot] = NULL;
    } else {
        r->held -= kept_bytes(p, o->j, o->rows);
        p->busy[i] = 0;
    }
    return EMBER_OK;
}

/* The step's buffers for nslots (micro-batch, piece) slots of k
 * micro-batches, all empty; 0, or -1 when out of memory. */
static int bufs_alloc(step_bufs *sb, int32_t nslots, int32_t k, ember_world *w)
{
    *sb = (step_bufs){calloc((size_t)nslots + 1, sizeof(float *)), calloc((size_t)nslots + 1, sizeof(float *)),
                      calloc((size_t)nslots + 1, sizeof(float *)), calloc((size_t)nslots + 1, sizeof(float *)),
                      calloc((size_t)k + 1, sizeof(float *)), malloc(((size_t)nslots + 1) * sizeof(int32_t)),
                      calloc((size_t)(2 * nslots) + 1, sizeof(void *)), 0, w};
    if (!sb->in || !sb->out || !sb->din || !sb->dout || !sb->dlogit || !sb->inst || !sb->reqs)
        return EMBER_ENOMEM;
    for (int32_t i = 0; i < nslots; i++)
        sb->inst[i] = -1;
    return 0;
}

static void bufs_free(step_bufs *sb, int32_t nslots, int32_t k)
{
    for (int32_t i = 0; i < nslots; i++) {
        if (sb->in)
            free(sb->in[i]);
        if (sb->out)
            free(sb->out[i]);
        if (sb->din)
            free(sb->din[i]);
        if (sb->dout)
            free(sb->dout[i]);
    }
    for (int32_t m = 0; sb->dlogit && m < k; m++)
        free(sb->dlogit[m]);
    free(sb->in), free(sb->out), free(sb->din), free(sb->dout), free(sb->dlogit), free(sb->inst), free(sb->reqs);
}

/* The schedule's operations run in order; the failure's message (unless
 * the operation wrote one), then every send waited for: its buffer is
 * ours until it completes. */
static int run_ops(step_run *r, const pipe_op *ops, int32_t nops, char *err, size_t errlen)
{
    pipeline *p = r->p;
    int st = EMBER_OK;
    for (int32_t o = 0; o < nops && st == EMBER_OK; o++) {
        op_shape shape = shape_of(r, ops[o]);
        st = ops[o].bwd ? run_backward(r, &shape) : run_forward(r, &shape);
    }
    if (st != EMBER_OK && err && errlen && !err[0])
        snprintf(err, errlen, "pipeline: %s", st == EMBER_ENOMEM ? "out of memory" : p->w->errmsg);
    for (int32_t i = 0; i < r->sb.nreq; i++)
        if (r->sb.reqs[i] && ember_comm_wait_send(p->w, r->sb.reqs[i]) != EMBER_OK && st == EMBER_OK) {
            st = EMBER_ECOMM;
            snprintf(err, errlen, "pipeline: %s", p->w->errmsg);
        }
    return st;
}

/* k micro-batches as a step runs them: the interleaved schedule adds empty
 * ones up to a multiple of S. */
static int32_t padded(const pipeline *p, int32_t k)
{
    return p->cfg.schedule == PIPE_INTERLEAVED ? (k + p->S - 1) / p->S * p->S : k;
}

/* p as a plan of cfg over S stages only (no model, no world, rank 0), and
 * room for one rank's operations over a step of k micro-batches, padded
 * (*kp): malloc'd, NULL when out of memory. */
static pipe_op *plan_ops(const pipe_config *cfg, int32_t S, int32_t k, pipeline *p, int32_t *kp)
{
    memset(p, 0, sizeof *p);
    p->cfg = *cfg;
    p->cfg.virtual_stages = cfg->virtual_stages < 1 ? 1 : cfg->virtual_stages;
    p->S = S, p->P = S * p->cfg.virtual_stages;
    *kp = padded(p, k);
    return malloc((size_t)(2 * *kp * p->P + 1) * sizeof(pipe_op));
}

int pipe_step(pipeline *p, int32_t n, int32_t b, const float *dense, const float *pooled, const float *labels,
              float scale, double *loss_sum, float *d_pooled, char *err, size_t errlen)
{
    const double t_step = ember_now();
    const dlrm_config *c = dlrm_get_config(p->model);
    *loss_sum = 0;
    if (n < 0 || b < 1) {
        fail(err, errlen, "pipeline: %d samples in micro-batches of %d", (int)n, (int)b);
        return EMBER_EINVAL;
    }
    /* ceil(n / b) micro-batches, the last one short; the interleaved schedule
     * rounds them up to a multiple of S with empty ones (no rows: nothing to
     * add, the same messages of no bytes) */
    int32_t k = (int32_t)(((int64_t)n + b - 1) / b);
    k = padded(p, k);
    const int32_t nslots = k * p->P;
    if (err && errlen)
        err[0] = '\0';
    dlrm_progress_hook saved;
    dlrm_get_progress(p->model, &saved);
    step_run r = {p, n, b, dense, pooled, labels, scale, loss_sum, d_pooled, c->num_dense,
                  (int64_t)c->num_sparse * c->emb_dim, {0}, NULL, 0, 0};
    pipe_op *ops = malloc((size_t)(2 * nslots) * sizeof *ops);
    int st = EMBER_OK;
    if (bufs_alloc(&r.sb, nslots, k, p->w) || !ops) {
        st = EMBER_ENOMEM;
        fail(err, errlen, "pipeline: out of memory");
    } else {
        for (int32_t i = 0; i < p->npool; i++)
            dlrm_set_progress(p->pool[i], progress_sends, &r.sb);
        st = run_ops(&r, ops, build_ops(p, k, ops), err, errlen);
    }
    for (int32_t i = 0; i < p->npool; i++) { /* every model free again, after an error too; the
                                                 caller's hook back on its model */
        p->busy[i] = 0;
        dlrm_set_progress(p->pool[i], i ? NULL : saved.fn, i ? NULL : saved.arg);
    }
    bufs_free(&r.sb, nslots, k);
    free(ops);
    free(r.scratch);
    p->st.step_s += ember_now() - t_step;
    return st;
}

int pipe_plan_in_flight(const pipe_config *cfg, int32_t S, int32_t k, int32_t *per_piece)
{
    pipeline p;
    int32_t kp;
    pipe_op *ops = plan_ops(cfg, S, k, &p, &kp);
    int32_t *now = calloc((size_t)p.P + 1, sizeof *now);
    if (!ops || !now) {
        free(ops), free(now);
        return -1;
    }
    memset(per_piece, 0, (size_t)p.P * sizeof *per_piece);
    for (p.rank = 0; p.rank < S; p.rank++) {
        const int32_t nops = build_ops(&p, kp, ops);
        for (int32_t i = 0; i < nops; i++) {
            const int32_t j = ops[i].piece;
            if (ops[i].m >= k) /* a padding micro-batch: nothing kept */
                continue;
            now[j] += ops[i].bwd ? -1 : 1;
            per_piece[j] = now[j] > per_piece[j] ? now[j] : per_piece[j];
        }
    }
    free(ops), free(now);
    return 0;
}

int64_t pipe_plan_kept_bytes(const pipe_config *cfg, const dlrm_config *mc, int32_t S, int32_t s, int32_t k,
                             int32_t b)
{
    pipeline p;
    int32_t kp;
    pipe_op *ops = plan_ops(cfg, S, k, &p, &kp);
    uint8_t none[DENSE_MAX_BLOCKS] = {0};
    p.rank = s;
    int ok = ops && dlrm_create_part(mc, none, &p.model, NULL, 0) == 0; /* the shape only */
    if (ok)
        p.nblocks = dlrm_num_blocks(p.model);
    if (!ok || pipe_pieces(cfg, S, p.nblocks, p.start, NULL, 0)) {
        free(ops);
        dlrm_destroy(p.model);
        return -1;
    }
    int64_t held = 0, peak = 0;
    const int32_t nops = build_ops(&p, kp, ops);
    for (int32_t i = 0; i < nops; i++) { /* run_forward's and run_backward's accounts; padding: empty */
        const int32_t j = ops[i].piece, rows = ops[i].m < k ? b : 0;
        const int64_t in = j > 0 ? (int64_t)rows * dlrm_block_in_width(p.model, p.start[j]) * 4 : 0;
        const int64_t kept = kept_bytes(&p, j, rows);
        if (p.cfg.recompute) {
            held += ops[i].bwd ? -in : in;
            if (!ops[i].bwd && held + kept > peak)
                peak = held + kept;
        } else {
            held += ops[i].bwd ? -kept : kept;
            peak = held > peak ? held : peak;
        }
    }
    free(ops);
    dlrm_destroy(p.model);
    return peak;
}

int pipe_forward(pipeline *p, int32_t n, int32_t b, const float *dense, const float *pooled, float *logit, char *err,
                 size_t errlen)
{
    const dlrm_config *c = dlrm_get_config(p->model);
    const int64_t nd = c->num_dense, pw = (int64_t)c->num_sparse * c->emb_dim;
    if (n < 0 || b < 1)
        return fail(err, errlen, "pipeline: %d samples in micro-batches of %d", (int)n, (int)b);
    const int32_t k = (int32_t)(((int64_t)n + b - 1) / b), S = p->S, last = (p->P - 1) % S;
    const int64_t widest = dlrm_widest_carry(p->model);
    /* a micro-batch's carries in and out, and the sends in flight (two buffers
     * of each: a send's buffer is not reused until it completed) */
    float *buf[3] = {alloc_floats(b * widest), alloc_floats(b * widest), alloc_floats(b * widest)};
    void *req[2] = {NULL, NULL};
    /* agreed before any message: a rank without its buffers stops every stage, not only itself */
    int64_t bad = !buf[0] || !buf[1] || !buf[2];
    int st = ember_comm_reduce_i64(p->w, &bad, 1, EMBER_REDUCE_MAX) != EMBER_OK ? EMBER_ECOMM
             : bad                                                               ? EMBER_ENOMEM
                                                                                 : EMBER_OK;
    int flip = 0;
    for (int32_t m = 0; m < k && st == EMBER_OK; m++) {
        const int32_t rows = n - m * b < b ? n - m * b : b;
        for (int32_t j = p->rank; j < p->P && st == EMBER_OK; j += S) {
            const int32_t b0 = p->start[j], b1 = p->start[j + 1], tag = 2 * (m * p->P + j);
            const int64_t in_n = (int64_t)rows * dlrm_block_in_width(p->model, b0);
            const int64_t out_n = (int64_t)rows * dlrm_block_out_width(p->model, b1 - 1);
            const float *in = dense + (int64_t)m * b * nd;
            if (j > 0 && (st = ember_comm_recv(p->w, buf[2], in_n * 4, (j - 1) % S, tag)) != EMBER_OK)
                break;
            if (j > 0)
                in = buf[2];
            if (req[flip] && (st = ember_comm_wait_send(p->w, req[flip])) != EMBER_OK)
                break;
            req[flip] = NULL;
            float *out = j == p->P - 1 ? logit + (int64_t)m * b : buf[flip];
            const int has_int = b0 <= p->interaction && p->interaction < b1;
            if (dlrm_forward_blocks(p->pool[0], rows, b0, b1, in, has_int ? pooled + (int64_t)m * b * pw : NULL,
                                    out)) {
                st = EMBER_ENOMEM;
                break;
            }
            if (j < p->P - 1 &&
                (st = ember_comm_isend(p->w, out, out_n * 4, (j + 1) % S, tag + 2, &req[flip])) == EMBER_OK)
                flip ^= 1;
        }
    }
    for (int i = 0; i < 2; i++)
        if (req[i] && ember_comm_wait_send(p->w, req[i]) != EMBER_OK && st == EMBER_OK)
            st = EMBER_ECOMM;
    if (st == EMBER_OK && S > 1 && n > 0) /* the logits to every stage */
        st = ember_comm_bcast(p->w, logit, (int64_t)n * 4, last);
    free(buf[0]), free(buf[1]), free(buf[2]);
    if (st == EMBER_OK)
        return EMBER_OK;
    fail(err, errlen, "pipeline: %s", st == EMBER_ENOMEM ? "out of memory" : p->w->errmsg);
    return st == EMBER_ENOMEM ? EMBER_ENOMEM : EMBER_ECOMM;
}
