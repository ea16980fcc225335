/*
 * metrics.h: how well a CTR model's probabilities fit the labels
 * (metrics.c): exact AUC and log loss, for the trainer's evaluation and
 * for scoring a data file with a trained model.
 */
#ifndef EMBER_MODEL_METRICS_H
#define EMBER_MODEL_METRICS_H

#include <stdint.h>

/* Area under the ROC curve of scores against 0/1 labels; ties count one
 * half (the Mann-Whitney statistic).  0.5 when one class is absent. */
double metric_auc(const float *score, const float *label, int64_t n);
/* Mean log loss with p clamped to [1e-7, 1 - 1e-7]. */
double metric_logloss(const float *prob, const float *label, int64_t n);

#endif
