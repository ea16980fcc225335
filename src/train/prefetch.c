/*
 * prefetch.c: the trainer reads the next batch while the step runs
 * (prefetch.h).
 *
 * The synthetic task draws every sample through its teacher, which costs
 * about as much as the step itself on one thread; a reader thread
 * overlapping the two keeps a second core busy.  Design: one thread owns
 * the training source and fills two slots in turn (double buffering); the
 * loop takes slot after slot, and each batch it takes stays valid until its
 * next call.  The batches and their order are exactly those of calling
 * ctr_source_next in the loop, so results do not change, only the time:
 * what the loop still waits for is reported as the data time.  At the end
 * of this rank's share the reader rewinds (another epoch).  The reader
 * makes no MPI calls, and its own OpenMP regions (the synthetic task's
 * samples, a binary file's decoding) use a team of reader_threads: the
 * spare cores, not the step's.  Slots grow to the largest batch seen, then allocate nothing.
 * Without a spare core (ranks x threads >= cores on the node) the thread
 * would only take turns with the step and with MPI's polling, so the batch
 * is then read in the loop's own thread, through the same calls.
 *
 * With the SSD tier's lookahead (ember_prefetch), the loop also needs to see
 * K batches ahead: the slots are then a ring of K + 2 (the batch held, K
 * ahead, one being read), train_prefetch_peek waits for the batch j ahead,
 * and the reader fills slot after slot in ring order.  Without a spare core
 * the same ring is filled in the loop's thread, on demand.
 *
 * The reader can also be started and stopped mid-run
 * (train_prefetch_set_reader; src/train/arrange.c decides): it starts at
 * the slot the loop would read next and, stopped, leaves the slot after
 * the last it filled to the loop, so the batches keep their order.
 *
 * Checkpoints need the data position of the batches the steps consumed, not
 * of those read ahead: the reader records the source's position after each
 * batch in its slot (ctr_source_tell, in the reader's thread, right after
 * the read), and the loop's position becomes the slot's when it takes the
 * batch.  So train_prefetch_position is always "after the last batch taken",
 * whatever the reader has read since.
 */
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/prefetch.h"

typedef struct slot {
    int ready;                    /* filled, not yet taken               */
    int64_t n;                    /* samples, or -1 (err)                */
    ctr_batch b;                  /* points into the arrays below        */
    float *label, *dense;
    int32_t *lengths;
    int64_t *ids;
    float *weights;               /* a weighted source's: one per id      */
    int64_t cap, cap_ids;
    ctr_position pos;             /* the source's position after this batch */
    char err[512];
} slot;

struct train_prefetch {
    int threaded;                 /* 0: next reads in the caller's thread */
    ctr_source *src;
    int32_t max, reader_threads;  /* samples per batch; the reader's OpenMP team */
    pthread_t thread;
    int started, stop;
    pthread_mutex_t mu;
    pthread_cond_t filled, freed;
    slot *s;                      /* [nslots], a ring                    */
    int nslots;
    int take;                     /* the slot the loop takes next        */
    int held;                     /* the slot the loop holds, or -1      */
    int fill;                     /* the slot read next (not threaded; the
                                     reader starts there and leaves it)   */
    ctr_position pos;             /* after the last batch the loop took  */
};

static int grow(void **p, int64_t n, size_t sz)
{
    void *q = realloc(*p, (size_t)(n > 0 ? n : 1) * sz);
    if (!q)
        return EMBER_ENOMEM;
    *p = q;
    return 0;
}

/* The source's batch into the slot's own arrays. */
static int copy_batch(slot *sl, const ctr_batch *b)
{
    const int64_t n = b->batch_size, D = b->num_dense, F = b->num_sparse, ids = b->sparse.num_ids;
    if (n > sl->cap) {
        int64_t c = n + n / 4;
        if (grow((void **)&sl->label, c, sizeof(float)) || grow((void **)&sl->dense, c * D, sizeof(float)) ||
            grow((void **)&sl->lengths, c * F, sizeof(int32_t)))
            return EMBER_ENOMEM;
        sl->cap = c;
    }
    if (ids > sl->cap_ids) {
        int64_t c = ids + ids / 4;
        if (grow((void **)&sl->ids, c, sizeof(int64_t)) || grow((void **)&sl->weights, c, sizeof(float)))
            return EMBER_ENOMEM;
        sl->cap_ids = c;
    }
    memcpy(sl->label, b->label, (size_t)n * sizeof(float));
    memcpy(sl->dense, b->dense, (size_t)(n * D) * sizeof(float));
    memcpy(sl->lengths, b->sparse.lengths, (size_t)(n * F) * sizeof(int32_t));
    memcpy(sl->ids, b->sparse.ids, (size_t)ids * sizeof(int64_t));
    sl->b = *b;
    sl->b.label = sl->label;
    sl->b.dense = sl->dense;
    sl->b.sparse.lengths = sl->lengths;
    sl->b.sparse.ids = sl->ids;
    if (b->sparse.weights && ids > 0) /* weighted features keep their weights */
        memcpy(sl->weights, b->sparse.weights, (size_t)ids * sizeof(float));
    sl->b.sparse.weights = b->sparse.weights ? sl->weights : NULL;
    return 0;
}

/* Reads the source's next batch into sl (another epoch at the end of this
 * rank's share); its n (< 0: sl->err). */
static int64_t read_slot(train_prefetch *p, slot *sl)
{
    ctr_batch b;
    int64_t n = ctr_source_next(p->src, p->max, &b, sl->err, sizeof sl->err);
    if (n == 0) {
        ctr_source_rewind(p->src);
        n = ctr_source_next(p->src, p->max, &b, sl->err, sizeof sl->err);
    }
    if (n > 0 && copy_batch(sl, &b)) {
        snprintf(sl->err, sizeof sl->err, "out of memory for a batch of %lld samples", (long long)n);
        n = -1;
    }
    ctr_source_tell(p->src, &sl->pos);
    sl->n = n;
    return n;
}

static void *reader(void *arg)
{
    train_prefetch *p = arg;
    omp_set_num_threads(p->reader_threads); /* this thread's own setting */
    int k = p->fill;
    for (int failed = 0; !failed; k = (k + 1) % p->nslots) {
        slot *sl = &p->s[k];
        pthread_mutex_lock(&p->mu);
        while (sl->ready && !p->stop)
            pthread_cond_wait(&p->freed, &p->mu);
        int stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            break;
        /* the slot is the reader's until marked ready */
        failed = read_slot(p, sl) < 0;
        pthread_mutex_lock(&p->mu);
        sl->ready = 1;
        pthread_cond_broadcast(&p->filled);
        pthread_mutex_unlock(&p->mu);
    }
    p->fill = k; /* where the loop's own reads go on (joined before it looks) */
    return NULL;
}

/* Starts the reader at slot p->fill; 0, or EMBER_EINVAL. */
static int reader_start(train_prefetch *p)
{
    p->stop = 0;
    p->threaded = 1;
    if (pthread_create(&p->thread, NULL, reader, p) != 0) {
        p->threaded = 0;
        return EMBER_EINVAL;
    }
    p->started = 1;
    return 0;
}

/* Ends the reader after the slot it is reading; the loop reads on from the
 * slot after it. */
static void reader_stop(train_prefetch *p)
{
    if (!p->started)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->freed);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    p->started = 0;
    p->threaded = 0;
}

int train_prefetch_set_reader(train_prefetch *p, int on, int32_t reader_threads)
{
    if (!on) {
        reader_stop(p);
        return 0;
    }
    p->reader_threads = reader_threads > 0 ? reader_threads : 1;
    return p->started ? 0 : reader_start(p);
}

int train_prefetch_start(ctr_source *src, int32_t max_samples, int32_t reader_threads, int threaded, int32_t ahead,
                         train_prefetch **out)
{
    *out = NULL;
    train_prefetch *p = calloc(1, sizeof *p);
    if (!p)
        return EMBER_EINVAL;
    p->nslots = 2 + (ahead > 0 ? ahead : 0);
    if (!(p->s = calloc((size_t)p->nslots, sizeof *p->s))) {
        free(p);
        return EMBER_EINVAL;
    }
    p->src = src;
    p->max = max_samples;
    p->reader_threads = reader_threads > 0 ? reader_threads : 1;
    p->held = -1;
    ctr_source_tell(src, &p->pos);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->filled, NULL);
    pthread_cond_init(&p->freed, NULL);
    if (threaded && reader_start(p)) {
        train_prefetch_stop(p);
        return EMBER_EINVAL;
    }
    *out = p;
    return 0;
}

/* Slot k ready: waited for (threaded) or read now, in ring order. */
static slot *ready_slot(train_prefetch *p, int k)
{
    slot *sl = &p->s[k];
    if (p->threaded) {
        pthread_mutex_lock(&p->mu);
        while (!sl->ready)
            pthread_cond_wait(&p->filled, &p->mu);
        pthread_mutex_unlock(&p->mu);
        return sl;
    }
    while (!sl->ready) { /* read up to it in order; a failure stays (sticky) */
        slot *f = &p->s[p->fill];
        read_slot(p, f);
        f->ready = 1;
        p->fill = (p->fill + 1) % p->nslots;
    }
    return sl;
}

int64_t train_prefetch_next(train_prefetch *p, ctr_batch *out, char *err, size_t errlen)
{
    pthread_mutex_lock(&p->mu);
    if (p->held >= 0 && p->s[p->held].n >= 0) { /* the last batch goes back to the reader */
        p->s[p->held].ready = 0;
        p->held = -1;
        pthread_cond_broadcast(&p->freed);
    }
    pthread_mutex_unlock(&p->mu);
    slot *sl = ready_slot(p, p->take);
    if (sl->n < 0) { /* sticky: the slot stays ready with its message */
        snprintf(err, errlen, "%s", sl->err);
        return -1;
    }
    p->held = p->take;
    p->take = (p->take + 1) % p->nslots;
    p->pos = sl->pos;
    *out = sl->b;
    return sl->n;
}

int64_t train_prefetch_peek(train_prefetch *p, int32_t j, ctr_batch *out)
{
    if (j < 1 || j > p->nslots - 2)
        return -1;
    slot *sl = ready_slot(p, (p->take + j - 1) % p->nslots);
    if (sl->n <= 0)
        return sl->n < 0 ? -1 : 0;
    *out = sl->b;
    return sl->n;
}

void train_prefetch_position(const train_prefetch *p, ctr_position *out) { *out = p->pos; }

void train_prefetch_stop(train_prefetch *p)
{
    if (!p)
        return;
    reader_stop(p);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->filled);
    pthread_cond_destroy(&p->freed);
    for (int k = 0; k < p->nslots; k++) {
        free(p->s[k].label);
        free(p->s[k].dense);
        free(p->s[k].lengths);
        free(p->s[k].ids);
        free(p->s[k].weights);
    }
    free(p->s);
    free(p);
}
