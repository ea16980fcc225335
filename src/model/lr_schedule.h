/*
 * lr_schedule.h: the learning-rate schedule of a training run
 * (docs/training.md, "Learning-rate schedule"): a factor per step that
 * multiplies every configured rate, dense and embedding alike
 * (lr_schedule.c).  The config reads it (train.lr_schedule), the loop
 * computes the factor of each step and gives it to the model
 * (model_set_lr_scale).
 */
#ifndef EMBER_MODEL_LR_SCHEDULE_H
#define EMBER_MODEL_LR_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

typedef enum lr_decay { LR_DECAY_NONE = 0, LR_DECAY_LINEAR, LR_DECAY_COSINE, LR_DECAY_STEP } lr_decay;

/* A factor on every learning rate, by step (1-based) of a run of `steps`:
 *   step <= warmup:  step / warmup                       (linear warm-up)
 *   after:           p = (step - warmup - 1) / (steps - warmup - 1), in [0, 1]
 *                    (0 when that span is empty)
 *     none    1
 *     linear  1 + (final - 1) p
 *     cosine  final + (1 - final) (1 + cos(pi p)) / 2
 *     step    gamma ^ floor((step - warmup - 1) / every)
 * In double, returned as float.  The zero schedule is "none". */
typedef struct lr_schedule {
    int64_t warmup;
    lr_decay decay;
    float final;         /* linear, cosine: the factor at the last step */
    int64_t every;       /* step: steps between decays                  */
    float gamma;         /* step: the factor each time                  */
} lr_schedule;

/* 0, or -1 with err naming the bad field. */
int lr_schedule_check(const lr_schedule *s, char *err, size_t errlen);
float lr_schedule_scale(const lr_schedule *s, int64_t step, int64_t steps);

#endif
