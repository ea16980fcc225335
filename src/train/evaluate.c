/*
 * evaluate.c: a training run's evaluation on the held-out samples (run.h):
 * predict, gather to rank 0, score there.
 *
 * Which samples: the synthetic task's eval stream is global, so every rank
 * asks for the same count per call and each call's global batch is the next
 * W * n samples of the stream: the evaluation always sees the stream's
 * first eval_samples samples (rounded up to a multiple of W), whatever the
 * world size, and the same ones each time.  A file is split among the ranks
 * (ctr.h), so rank r scores the first eval_samples / W samples of its share.
 * Prediction is collective (the embedding lookup exchanges rows), so every
 * rank makes the same number of calls; a rank whose share ran out passes an
 * empty batch.  Scores, labels and the teacher's probabilities are gathered
 * to rank 0, which computes the exact AUC (metrics.c) over all of them.
 * With pipeline stages W counts the replica groups: the stages of a group
 * read the same samples and predict them together (model_predict), and
 * the first stage's rank alone hands the scores on.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/collect.h"
#include "comm/comm.h"
#include "train/run.h"

typedef struct vec {
    float *v;
    int64_t n, cap;
} vec;

static int vec_push(vec *x, const float *src, int64_t n)
{
    if (x->n + n > x->cap) {
        int64_t cap = x->cap * 2 > x->n + n ? x->cap * 2 : x->n + n;
        float *p = realloc(x->v, (size_t)(cap + 1) * sizeof *p);
        if (!p)
            return EMBER_ENOMEM;
        x->v = p;
        x->cap = cap;
    }
    memcpy(x->v + x->n, src, (size_t)n * sizeof *src);
    x->n += n;
    return 0;
}

/* Reads and predicts this rank's evaluation samples into prob/label/teacher. */
static int predict_all(ember_trainer *s, vec *prob, vec *label, vec *teacher, int *has_teacher,
                       char *err, size_t errlen)
{
    const int32_t S = s->t.pipe_stages > 1 ? s->t.pipe_stages : 1;
    const int64_t E = s->t.eval_samples, W = s->size / S, g = s->rank / S; /* replica groups; this rank's */
    const int32_t m = s->t.micro_batch * s->t.accumulate;
    const int synthetic = s->t.source == CFG_SOURCE_SYNTHETIC, scores = s->rank % S == 0;
    int64_t left = synthetic ? E : E * (g + 1) / W - E * g / W; /* global, or this group's */
    float *p = malloc((size_t)m * sizeof *p + 4);
    int st = 0, failed = !p;
    if (!p)
        snprintf(err, errlen, "evaluation: out of memory");
    ctr_source_rewind(s->eval_src);
    *has_teacher = synthetic; /* the same on every rank: the gathers are collective */
    for (;;) {
        int64_t want = synthetic ? (left + W - 1) / W : left;
        if (want > m)
            want = m;
        ctr_batch b;
        int64_t n = 0;
        if (!failed && want > 0 && (n = ctr_source_next(s->eval_src, (int32_t)want, &b, err, errlen)) < 0)
            failed = 1;
        int64_t agree[2] = {n > 0 && scores ? n : 0, failed}; /* a group's samples once */
        if (ember_comm_reduce_i64(s->world, agree, 2, EMBER_REDUCE_SUM) != EMBER_OK) {
            snprintf(err, errlen, "evaluation: %s", s->world->errmsg);
            st = EMBER_EINVAL; /* fatal: agreed by the caller */
            break;
        }
        if (agree[1]) {
            st = failed ? -1 : -2; /* -2: another rank failed */
            break;
        }
        if (agree[0] == 0)
            break;
        if (n == 0) { /* this rank is done, the others are not */
            ctr_batch_empty(&s->schema, &b);
        }
        if (model_predict(s->model, &b, p, err, errlen) != EMBER_OK) /* collective */
            failed = 1;
        const float *tp = ctr_source_teacher_prob(s->eval_src);
        if (!failed && scores &&
            (vec_push(prob, p, n) || vec_push(label, b.label, n) || (tp && vec_push(teacher, tp, n)))) {
            snprintf(err, errlen, "evaluation: out of memory");
            failed = 1; /* agreed at the top of the next round */
        }
        left -= synthetic ? agree[0] : n;
    }
    free(p);
    return st;
}

int train_evaluate(ember_trainer *s, train_eval_result *out)
{
    memset(out, 0, sizeof *out);
    out->auc = out->logloss = out->teacher_auc = out->teacher_logloss = NAN;
    double t0 = ember_now();
    vec prob = {0}, label = {0}, teacher = {0};
    char err[512] = "";
    int has_teacher = 0;
    int st = predict_all(s, &prob, &label, &teacher, &has_teacher, err, sizeof err);
    train_limits_forget(s); /* evaluation's forwards are no step's */
    if (run_agree(s, st != 0, EMBER_EIO, err[0] ? err : "evaluation failed")) {
        free(prob.v), free(label.v), free(teacher.v);
        return 1;
    }
    float *gp = NULL, *gl = NULL, *gt = NULL;
    int64_t np = 0, nl = 0, nt = 0;
    int bad = ember_comm_gather_floats(s->world, prob.v, prob.n, &gp, &np) != EMBER_OK;
    bad |= ember_comm_gather_floats(s->world, label.v, label.n, &gl, &nl) != EMBER_OK;
    if (has_teacher)
        bad |= ember_comm_gather_floats(s->world, teacher.v, teacher.n, &gt, &nt) != EMBER_OK;
    free(prob.v), free(label.v), free(teacher.v);
    snprintf(err, sizeof err, "evaluation: out of memory gathering %lld scores", (long long)np);
    if (run_agree(s, bad, EMBER_ENOMEM, err)) {
        free(gp), free(gl), free(gt);
        return 1;
    }
    out->samples = np;
    if (s->rank == 0 && np > 0) {
        out->auc = metric_auc(gp, gl, np);
        out->logloss = metric_logloss(gp, gl, np);
        if (gt && nt == np) {
            out->teacher_auc = metric_auc(gt, gl, np);
            out->teacher_logloss = metric_logloss(gt, gl, np);
        }
    }
    free(gp), free(gl), free(gt);
    /* every rank gets rank 0's figures: decisions on them (early stopping,
     * keep_best's checkpoint) are collective */
    double m[4] = {out->auc, out->logloss, out->teacher_auc, out->teacher_logloss};
    st = s->size > 1 ? ember_comm_bcast(s->world, m, (int64_t)sizeof m, 0) : EMBER_OK;
    if (run_agree_status(s, st, st == EMBER_OK ? "" : s->world->errmsg))
        return 1;
    out->auc = m[0], out->logloss = m[1], out->teacher_auc = m[2], out->teacher_logloss = m[3];
    out->seconds = ember_now() - t0;
    return 0;
}
