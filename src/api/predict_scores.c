/*
 * predict_scores.c: the scores of ember_predict (predict_scores.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/predict_scores.h"
#include "comm/collect.h"
#include "infer/predictor.h"

static int push(predict_scores *s, const float *score, const float *label, const int64_t *lines, int64_t first,
                int64_t n)
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
            return EMBER_ENOMEM;
        s->index = c;
        s->cap = cap;
    }
    for (int64_t i = 0; i < n; i++) {
        s->score[s->n + i] = score[i];
        s->label[s->n + i] = label[i];
        s->index[s->n + i] = lines ? lines[i] : first + i;
    }
    s->n += n;
    return 0;
}

int predict_scores_collect(ember_predictor *p, ctr_source *src, ember_world *w, int synthetic, int64_t limit,
                           predict_scores *out, char *err, size_t len)
{
    const model_description *m = predictor_description(p);
    const int32_t W = ember_world_size(w), batch = m->batch;
    int64_t left = synthetic ? limit : INT64_MAX; /* synthetic: global; files: until the share ends */
    float *sc = malloc(sizeof(float) * (size_t)batch + 4);
    int failed = !sc, st = EMBER_OK;
    if (!sc)
        snprintf(err, len, "out of memory"), st = EMBER_ENOMEM;
    for (;;) {
        int64_t want = synthetic ? (left + W - 1) / W : left;
        want = want > batch ? batch : want;
        ctr_batch b;
        int64_t n = 0;
        if (!failed && want > 0 && (n = ctr_source_next(src, (int32_t)want, &b, err, len)) < 0)
            failed = 1, st = EMBER_EINPUT;
        int64_t agree[2] = {n > 0 ? n : 0, failed};
        ember_comm_reduce_i64(w, agree, 2, EMBER_REDUCE_SUM);
        if (agree[1]) {
            if (!failed)
                st = EMBER_ECOMM, err[0] = '\0';
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
            snprintf(err, len, "%s", ember_errmsg(p));
            failed = 1, st = rc;
        } else if (n > 0) {
            int64_t first = synthetic ? b.first_sample - (int64_t)m->synth.eval_offset : b.first_sample;
            if (push(out, sc, b.label, ctr_source_lines(src), first, n)) {
                snprintf(err, len, "out of memory for %lld scores", (long long)(out->n + n));
                failed = 1, st = EMBER_ENOMEM;
            }
        }
        left -= synthetic ? agree[0] : n;
    }
    free(sc);
    return st;
}

void predict_scores_keep_below(predict_scores *s, int64_t limit)
{
    int64_t k = 0;
    for (int64_t i = 0; i < s->n; i++)
        if (s->index[i] < limit)
            s->score[k] = s->score[i], s->label[k] = s->label[i], s->index[k] = s->index[i], k++;
    s->n = k;
}

static int by_index(const void *a, const void *b)
{
    int64_t x = ((const int64_t *)a)[0], y = ((const int64_t *)b)[0];
    return (x > y) - (x < y);
}

int predict_scores_sort(predict_scores *s)
{
    int64_t n = s->n, *order = malloc(sizeof(int64_t) * 2 * (size_t)(n + 1)); /* (index, position) pairs */
    float *sc = malloc(sizeof(float) * (size_t)(n + 1)), *lb = malloc(sizeof(float) * (size_t)(n + 1));
    if (!order || !sc || !lb) {
        free(order);
        free(sc);
        free(lb);
        return EMBER_ENOMEM;
    }
    for (int64_t i = 0; i < n; i++)
        order[2 * i] = s->index[i], order[2 * i + 1] = i;
    qsort(order, (size_t)n, 2 * sizeof(int64_t), by_index);
    for (int64_t k = 0; k < n; k++)
        sc[k] = s->score[order[2 * k + 1]], lb[k] = s->label[order[2 * k + 1]], s->index[k] = order[2 * k];
    free(s->score);
    free(s->label);
    free(order);
    s->score = sc;
    s->label = lb;
    return EMBER_OK;
}

int predict_scores_write(ember_output *o, int tsv, int labeled, const predict_scores *s, char *err, size_t len)
{
    FILE *f = ember_output_stdio(o);
    for (int64_t i = 0; f && i < s->n && !ferror(f); i++) {
        if (tsv && labeled)
            fprintf(f, "%lld\t%.9g\t%g\n", (long long)s->index[i], s->score[i], s->label[i]);
        else if (tsv)
            fprintf(f, "%lld\t%.9g\n", (long long)s->index[i], s->score[i]);
        else
            fwrite(&s->score[i], sizeof(float), 1, f);
    }
    int st = ember_output_commit(o);
    if (st != EMBER_OK) /* names the file and the reason */
        snprintf(err, len, "%s", ember_errmsg(NULL));
    return st;
}

void predict_scores_free(predict_scores *s)
{
    free(s->score);
    free(s->label);
    free(s->index);
    memset(s, 0, sizeof *s);
}
