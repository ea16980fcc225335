/*
 * arrange.c: which way a rank without a spare core uses its threads
 * (arrange.h): all T on the step, the batch read between steps by the same
 * team ("team"), or T - 1 on the step and a reader thread that reads the
 * next batch while the step runs ("reader"), as a run of T - 1 threads on
 * a machine with a spare core does.
 *
 * Neither way wins everywhere.  The team way splits the data's work too,
 * but pays it between steps; the reader way hides it, but the step has a
 * thread fewer.  Which is faster depends on how the data's cost compares
 * with the step's and on how well each splits over threads (a file's
 * blocks decode quickly and the team wins; the synthetic task's teacher
 * costs about a step per batch and the two come out close), and on what
 * else the machine runs: OpenMP's team spins at its barriers, so when
 * another process takes a core, a step on every core waits for the thread
 * that lost it.
 *
 * So the trainer measures.  After ARRANGE_WARM steps, and every
 * ARRANGE_EVERY steps after, a trial of ARRANGE_WINDOWS windows of
 * ARRANGE_WINDOW steps alternates the ways and times each step (its batch
 * and its step; the first ARRANGE_SKIP of a window left out while a switch
 * settles).  The reader way is kept unless the team way's mean step was
 * shorter by more than 1 - ARRANGE_TEAM_GAIN: the step spinning on every
 * core is the one a busy machine hurts most.  Means, not medians: another
 * process on a core leaves most of the team's steps as fast as ever and
 * makes a few many times slower, and the few are the cost.  The next trial
 * comes sooner when a window of the kept way's steps drifts ARRANGE_DRIFT
 * times away from the trial's mean (another process took a core, or gave
 * it back).  Every step still trains: with one BLAS thread the results are
 * the same bits for any thread count, and the reader hands over the
 * batches in the loop's order, so only the time changes.
 */
#include <omp.h>

#include "train/arrange.h"

static void set_way(train_arrange *a, int r);

void train_arrange_init(train_arrange *a, ctr_model *model, train_prefetch *pf, int32_t threads, int on)
{
    *a = (train_arrange){0};
    a->model = model;
    a->pf = pf;
    a->threads = threads;
    a->on = threads >= 2 ? on : 0;
    a->trial_at = -1;
    a->next_trial = ARRANGE_WARM;
    if (a->on == 2)
        set_way(a, 1);
}

/* The step's threads and the reader for way r (1: reader). */
static void set_way(train_arrange *a, int r)
{
    if (r == a->reader)
        return;
    if (r) {
        model_set_threads(a->model, a->threads - 1);
        omp_set_num_threads(a->threads - 1);
        if (train_prefetch_set_reader(a->pf, 1, 1) != 0) { /* no thread: the team way, for good */
            a->on = 0;
            r = 0;
        }
    } else {
        train_prefetch_set_reader(a->pf, 0, 0);
    }
    if (!r) {
        model_set_threads(a->model, a->threads);
        omp_set_num_threads(a->threads);
    }
    a->reader = r;
}

static double mean(const double *t, int n)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += t[i];
    return n > 0 ? sum / n : 0;
}

void train_arrange_before(train_arrange *a, int64_t j)
{
    if (a->on != 1)
        return;
    if (a->trial_at < 0 && j >= a->next_trial) {
        a->trial_at = j;
        a->nt[0] = a->nt[1] = 0;
        a->trials++;
    }
    if (a->trial_at < 0)
        return;
    int64_t w = (j - a->trial_at) / ARRANGE_WINDOW;
    if (w < ARRANGE_WINDOWS) {
        set_way(a, (int)(w % 2));
        return;
    }
    double team = mean(a->t[0], a->nt[0]), reader = mean(a->t[1], a->nt[1]);
    a->choice = !(team <= ARRANGE_TEAM_GAIN * reader);
    a->base = a->choice ? reader : team;
    a->nwin = 0;
    a->trial_at = -1;
    a->next_trial = j + ARRANGE_EVERY;
    set_way(a, a->choice);
}

void train_arrange_after(train_arrange *a, int64_t j, double seconds)
{
    a->reader_steps += a->reader;
    if (a->on != 1)
        return;
    if (a->trial_at < 0) { /* between trials: a drift of the step's time calls the next one now */
        if (a->base <= 0)
            return;
        a->win[a->nwin++] = seconds;
        if (a->nwin == ARRANGE_WINDOW) {
            double m = mean(a->win, a->nwin);
            a->nwin = 0;
            if (m > ARRANGE_DRIFT * a->base || m * ARRANGE_DRIFT < a->base)
                a->next_trial = j + 1;
        }
        return;
    }
    if ((j - a->trial_at) % ARRANGE_WINDOW < ARRANGE_SKIP)
        return;
    int r = a->reader, cap = (int)(sizeof a->t[0] / sizeof a->t[0][0]);
    if (a->nt[r] < cap)
        a->t[r][a->nt[r]++] = seconds;
}

void train_arrange_end(train_arrange *a)
{
    if (a->model)
        set_way(a, 0);
}
