/*
 * lr_schedule.c: the learning-rate schedule of a training run (lr_schedule.h,
 * docs/training.md "Learning-rate schedule"): a factor per step that
 * multiplies every configured rate, dense and embedding alike.
 *
 * A pure function of the step, computed in double: a resumed run gets the
 * same factors, and every rank the same bits.
 */
#include <math.h>
#include <stdio.h>

#include "model/lr_schedule.h"

int lr_schedule_check(const lr_schedule *s, char *err, size_t errlen)
{
    const char *why = NULL;
    if (s->warmup < 0)
        why = "warmup must be >= 0";
    else if (s->decay < LR_DECAY_NONE || s->decay > LR_DECAY_STEP)
        why = "unknown decay";
    else if (!(s->final >= 0) || !isfinite(s->final))
        why = "final must be finite and >= 0";
    else if (s->decay == LR_DECAY_STEP && (s->every < 1 || !(s->gamma >= 0) || !isfinite(s->gamma)))
        why = "step decay needs every >= 1 and a finite gamma >= 0";
    if (why && err && errlen)
        snprintf(err, errlen, "learning-rate schedule: %s", why);
    return why ? -1 : 0;
}

float lr_schedule_scale(const lr_schedule *s, int64_t step, int64_t steps)
{
    if (step <= s->warmup) /* 1/warmup, 2/warmup, ..., 1 */
        return (float)((double)step / (double)s->warmup);
    int64_t after = step - s->warmup - 1, span = steps - s->warmup - 1; /* 0 at the first step after */
    double p = span > 0 ? (double)(after < span ? after : span) / (double)span : 0.0;
    switch (s->decay) {
    case LR_DECAY_LINEAR: return (float)(1.0 + ((double)s->final - 1.0) * p);
    case LR_DECAY_COSINE: return (float)((double)s->final + (1.0 - (double)s->final) * 0.5 * (1.0 + cos(3.14159265358979323846 * p)));
    case LR_DECAY_STEP: return (float)pow((double)s->gamma, (double)(after / s->every));
    default: return 1.0f;
    }
}
