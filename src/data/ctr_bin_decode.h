/*
 * ctr_bin_decode.h: a batch of a binary CTR file's samples, decoded from
 * their checked blocks into the source's feature-major batch by the calling
 * thread's OpenMP team (ctr_bin_decode.c).  The reader (ctr_bin.c) plans the
 * batch as runs, each a stretch of consecutive samples of one block, and
 * checks the blocks; this file only moves bytes, so the batch is the same
 * for any team size.
 */
#ifndef EMBER_DATA_CTR_BIN_DECODE_H
#define EMBER_DATA_CTR_BIN_DECODE_H

#include <stdint.h>

#include "data/ctr_bin_block.h"
#include "data/ctr_impl.h"

/* Samples [i0, i0 + n) of a checked block, in order. */
typedef struct cb_run {
    cb_block blk;
    int64_t i0, n;
    int64_t pos[3]; /* where sample i0's row ids, keys and weights start in
                       the block's columns (cb_block_seek) ...            */
    int cont;       /* ... or 1: where the previous run (same block) ends */
} cb_run;

/* The decoder's scratch, grown to the largest batch seen. */
typedef struct cb_decoder {
    cb_run *runs;
    int64_t nruns, cap_runs;
    void *chunks;   /* [cap_chunks] chunk descriptors                     */
    int64_t *sums;  /* [chunks][2 S]: ids per feature, then destinations   */
    int64_t cap_chunks, cap_sums;
} cb_decoder;

/* Room for one more run at d->runs[d->nruns]: 0, or EMBER_ENOMEM. */
int cb_decoder_add_run(cb_decoder *d);

/* The d->nruns runs (n samples in all, the first run's pos given) into s's
 * batch: label, dense, lengths [S][n], ids (and weights, 1 for unweighted
 * features, when the schema has any) feature-major, num_ids; pos_end:
 * where the last run ends in its block's columns.  0, or EMBER_ENOMEM. */
int cb_decode_runs(cb_decoder *d, const cb_layout *l, ctr_source *s, int64_t n, int64_t pos_end[3]);

void cb_decoder_free(cb_decoder *d);

#endif
