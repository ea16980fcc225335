/*
 * prefetch.h: a reader thread that reads the training data's next batches
 * while the step runs (prefetch.c), for every shell's trainer: the batches
 * and their order are exactly those of calling ctr_source_next in the loop.
 */
#ifndef EMBER_TRAIN_PREFETCH_H
#define EMBER_TRAIN_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#include "data/ctr.h"

typedef struct train_prefetch train_prefetch;

/* Starts a thread that owns src from now on (until stop) and reads batches
 * of up to max_samples ahead (threaded = 0: no thread, next reads), its own
 * OpenMP regions on reader_threads threads, keeping `ahead` batches beyond
 * the one taken for train_prefetch_peek (0: none).  0, or -1 when no thread
 * could start. */
int train_prefetch_start(ctr_source *src, int32_t max_samples, int32_t reader_threads, int threaded, int32_t ahead,
                         train_prefetch **out);
/* From the next batch on: on, a reader thread (reader_threads in its
 * OpenMP regions) reads ahead; off, the caller's thread reads (after the
 * reader finished the batch it was reading).  The batches stay those of
 * calling ctr_source_next in the loop.  0, or -1 when no thread could
 * start (the caller's thread then reads). */
int train_prefetch_set_reader(train_prefetch *p, int on, int32_t reader_threads);
/* The next batch, as ctr_source_next would return it (a share that ran out
 * is rewound first); valid until the next call.  Samples, 0 (an empty
 * share), or -1 with err (and -1 again on every later call). */
int64_t train_prefetch_next(train_prefetch *p, ctr_batch *out, char *err, size_t errlen);
/* The batch j (1..ahead) after the one next returned last, read if needed;
 * valid until it has been taken and released.  Samples, 0, or -1. */
int64_t train_prefetch_peek(train_prefetch *p, int32_t j, ctr_batch *out);
/* The source's position after the last batch next returned (before the
 * first: where the source stood at start), however far the thread has read
 * ahead: what a checkpoint saves. */
void train_prefetch_position(const train_prefetch *p, ctr_position *out);
/* Ends the thread; src is the caller's again.  Accepts NULL. */
void train_prefetch_stop(train_prefetch *p);

#endif
