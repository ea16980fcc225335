/*
 * arrange.h: how a rank's threads split between the step and its data when
 * the rank has no spare core (arrange.c; docs/training.md, "Threads and
 * ranks per machine").
 */
#ifndef EMBER_TRAIN_ARRANGE_H
#define EMBER_TRAIN_ARRANGE_H

#include <stdint.h>

#include "model/model.h"
#include "train/prefetch.h"

#define ARRANGE_WARM 8      /* steps before the first trial                 */
#define ARRANGE_WINDOW 16   /* steps per window of a trial                  */
#define ARRANGE_SKIP 3      /* first steps of a window not timed (settling) */
#define ARRANGE_WINDOWS 4   /* windows per trial: step team, reader, again  */
#define ARRANGE_EVERY 1000  /* steps from one trial to the next ...          */
#define ARRANGE_TEAM_GAIN 0.9 /* the team way is kept when its mean step is
                               at most this share of the reader way's      */
#define ARRANGE_DRIFT 1.5   /* ... or sooner, when a window's mean step is
                               this many times the trial's, or as many times
                               shorter (the machine's load changed)        */

typedef struct train_arrange {
    ctr_model *model;
    train_prefetch *pf;
    int32_t threads;        /* the run's                                     */
    int on;                 /* 1: trials run; 2: the reader way always; 0: none */
    int reader;             /* now: 1 a reader thread and threads - 1 on the step */
    int choice;             /* the last trial's verdict                      */
    int64_t trial_at;       /* run step where the trial began, -1: none      */
    int64_t next_trial;     /* run step where the next one begins            */
    double t[2][ARRANGE_WINDOWS / 2 * ARRANGE_WINDOW]; /* timed steps per way */
    int nt[2];
    double base;            /* the kept way's mean step in the last trial    */
    double win[ARRANGE_WINDOW]; /* its steps since, a window at a time       */
    int nwin;
    int64_t trials;         /* trials begun                                  */
    int64_t reader_steps;   /* steps run with the reader thread               */
} train_arrange;

/* on: 0 every thread on the step, 1 trials, 2 a reader thread beside a
 * team one thread smaller from the first step on. */
void train_arrange_init(train_arrange *a, ctr_model *model, train_prefetch *pf, int32_t threads, int on);
/* Before the run's step j (0 for its first): the way for that step. */
void train_arrange_before(train_arrange *a, int64_t j);
/* After it: the seconds its batch and step took. */
void train_arrange_after(train_arrange *a, int64_t j, double seconds);
/* After the run's steps: every thread on the step again, no reader. */
void train_arrange_end(train_arrange *a);

#endif
