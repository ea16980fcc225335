/*
 * ctr_bin_block.h: one block of ember's binary CTR format
 * (docs/ctr-format.md): its checks and the samples read out of it
 * (ctr_bin_block.c), on the layout of ctr_bin_format.h.  The reader
 * (ctr_bin.c) uses it; the writer needs only the layout.
 */
#ifndef EMBER_DATA_CTR_BIN_BLOCK_H
#define EMBER_DATA_CTR_BIN_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "data/ctr_bin_format.h"

/* A checked block: where its columns start. */
typedef struct cb_block {
    int64_t index, first, n;     /* block number, its first sample, samples */
    const unsigned char *lab, *dense, *len, *ids, *keys, *w;
} cb_block;

/* Checks block b, bytes [off, stop) of map (size, marker, n = want_n,
 * counts, checksum, key mask against the header, labels, bag lengths
 * against the counts, row ids below their rows) and points *out at its
 * columns.  0, or -1 with a message
 * naming path, the block and its samples, and the sample and feature at
 * fault when there is one. */
int cb_block_check(const cb_layout *l, const ctr_schema *sc, const char *path, const unsigned char *map,
                   int64_t off, int64_t stop, int64_t b, int64_t first, int64_t want_n, cb_block *out, char *err,
                   size_t errlen);

/* "block 3 (byte 1234; samples 12288..16383)": block b at byte off,
 * holding count samples from first, for messages. */
void cb_block_where(char *buf, size_t size, int64_t b, int64_t off, int64_t first, int64_t count);

/* Where sample i of a checked block starts in its ids, keys and weights
 * columns: pos[0], pos[1], pos[2]. */
void cb_block_seek(const cb_layout *l, const cb_block *blk, int64_t i, int64_t pos[3]);

/* The S bag lengths of sample i of a checked block into len; their sum. */
int64_t cb_sample_lengths(const cb_layout *l, const cb_block *blk, int64_t i, int32_t *len);

/* Sample i of a checked block, whose lengths len gave: its label, its D
 * dense floats, and its bags' ids one feature after the other into ids
 * (row ids from pos[0], keys from pos[1], weights from pos[2], advanced);
 * with weights (not NULL) a weight per id, 1 for unweighted features. */
void cb_sample_read(const cb_layout *l, const cb_block *blk, int64_t i, const int32_t *len, int64_t pos[3],
                    float *label, float *dense, int64_t *ids, float *weights);

#endif
