/*
 * ctr_visits.h: the order a shuffled file source reads its share in
 * (ctr_source_shuffle): the share [begin, end) of a file's items (binary
 * samples, text lines) is cut into the file's blocks of K items (the
 * first and last cut at the share's ends), and each epoch visits them in
 * an order drawn from (seed, rank, epoch) alone, by Fisher-Yates over
 * splitmix64; items in file order within a block.  A position in the
 * epoch is an ordinal, so a told position continues the same order.
 */
#ifndef EMBER_DATA_CTR_VISITS_H
#define EMBER_DATA_CTR_VISITS_H

#include <stdint.h>

typedef struct ctr_visits {
    uint64_t seed;
    int32_t rank;
    int64_t begin, end, K;      /* the share, the block size                */
    int64_t b0, nb;             /* the share's first block, its blocks      */
    int64_t *order;             /* [nb] visiting order (block - b0)         */
    int64_t *lstart;            /* [nb + 1] ordinal of each visit's first item */
    int64_t lpos, j;            /* ordinal of the next item, its visit      */
} ctr_visits;

/* The visits of [begin, end) in blocks of K, epoch's order, ordinal 0.
 * 0, or EMBER_ENOMEM. */
int ctr_visits_init(ctr_visits *v, uint64_t seed, int32_t rank, int64_t begin, int64_t end, int64_t K,
                    int64_t epoch);
void ctr_visits_free(ctr_visits *v);
/* The order of epoch, from ordinal lpos. */
void ctr_visits_start(ctr_visits *v, int64_t epoch, int64_t lpos);
/* The item at ordinal v->lpos (v->j moved on to its visit when the last
 * one is done); call with lpos below the share's size. */
int64_t ctr_visits_item(ctr_visits *v);
/* Items left in the visit of ordinal v->lpos (0 past the end). */
int64_t ctr_visits_left_in_block(ctr_visits *v);

#endif
