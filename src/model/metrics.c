/*
 * metrics.c: the evaluation metrics of a CTR model (metrics.h): exact AUC
 * and log loss.
 *
 * AUC is the Mann-Whitney statistic computed exactly: sort the (score,
 * label) pairs by score, walk groups of equal scores, and count for every
 * positive the negatives ranked below it, a tie counting one half.  It is
 * O(n log n) and needs no binning, so two runs that score the same samples
 * the same get the same AUC to the last bit.  NaN scores sort below every
 * number (and tie with each other), so a broken model gets a number, not a
 * crash.  Sums are in double: exact for counts below 2^53.
 */
#include <math.h>
#include <stdlib.h>

#include "model/metrics.h"

typedef struct scored {
    float score;
    int positive;
} scored;

static int cmp_scored(const void *a, const void *b)
{
    float x = ((const scored *)a)->score, y = ((const scored *)b)->score;
    int nx = isnan(x), ny = isnan(y);
    if (nx || ny)
        return ny - nx; /* NaN first */
    return (x > y) - (x < y);
}

double metric_auc(const float *score, const float *label, int64_t n)
{
    if (n <= 0)
        return 0.5;
    scored *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return NAN;
    double pos = 0, neg = 0;
    for (int64_t i = 0; i < n; i++) {
        v[i].score = score[i];
        v[i].positive = label[i] > 0.5f;
        pos += v[i].positive;
    }
    neg = (double)n - pos;
    if (pos == 0 || neg == 0) {
        free(v);
        return 0.5;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_scored);
    /* for each group of tied scores: its positives beat every negative
     * below the group, and half of the group's negatives */
    double below = 0, wins = 0;
    for (int64_t i = 0; i < n;) {
        int64_t j = i;
        double p = 0, q = 0;
        while (j < n && cmp_scored(&v[i], &v[j]) == 0) {
            p += v[j].positive;
            q += !v[j].positive;
            j++;
        }
        wins += p * below + 0.5 * p * q;
        below += q;
        i = j;
    }
    free(v);
    return wins / (pos * neg);
}

double metric_logloss(const float *prob, const float *label, int64_t n)
{
    if (n <= 0)
        return 0.0;
    const double lo = 1e-7, hi = 1.0 - 1e-7;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double p = prob[i];
        p = p < lo ? lo : p > hi ? hi : p;
        if (isnan(p))
            p = 0.5;
        double y = label[i];
        sum -= y * log(p) + (1.0 - y) * log(1.0 - p);
    }
    return sum / (double)n;
}
