/*
 * ctr_bin_format.h: the layout of ember's binary CTR format
 * (docs/ctr-format.md): its constants, what a file's blocks hold (cb_layout,
 * made in ctr_bin_format.c) and the sizes of its header and blocks.  The
 * bottom of the format's files: the block checks (ctr_bin_block.h), the
 * reader (ctr_bin.c) and the writer (ctr_bin_write.c) build on it, and it
 * on nothing of theirs.
 *
 * Two versions.  Version 1 stores every id as a u32 row number.  Version 2
 * adds 64-bit keys, for features that feed dynamic tables: a feature whose
 * header rows is 0 carries keys, stored as i64 in a column of their own
 * after the u32 ids, and each block counts its keys beside its ids.  The
 * header is the same in both; a cb_layout says what a file's blocks hold.
 * A version 2 block also records which features carry keys (a bit mask),
 * so a header and blocks that disagree are caught naming the feature.
 */
#ifndef EMBER_DATA_CTR_BIN_FORMAT_H
#define EMBER_DATA_CTR_BIN_FORMAT_H

#include <stdint.h>

#include "data/ctr_impl.h"

#define CB_MAGIC "EMBERCTR"
#define CB_VERSION_ROWS 1u            /* u32 row ids only              */
#define CB_VERSION_KEYS 2u            /* + i64 keys (features of rows 0) */
#define CB_VERSION_WEIGHTS 3u         /* + f32 weights, f32 labels      */
#define CB_FLAG_FLOAT_LABEL 1u        /* version 3: labels are f32      */
#define CB_MARKER 0x4B4C4243u         /* "CBLK" as little-endian bytes */
#define CB_HEADER_FIXED 56
#define CB_MAX_DENSE 4096
#define CB_MAX_ROWS (INT64_C(1) << 32)
#define CB_MAX_BAG 65535              /* a u16 length                  */
#define CB_BLOCK_SAMPLES 4096         /* what ctr_convert_tsv writes   */

/* What a file's blocks hold, from its header. */
typedef struct cb_layout {
    uint32_t version;
    int64_t D, S;                          /* dense, sparse features     */
    int64_t block_fixed;                   /* marker, n, counts (, masks): 16, 32 or 48 */
    unsigned char keyed[CTR_MAX_FEATURES]; /* 1: the feature's ids are keys */
    uint64_t key_mask;                     /* bit f: keyed[f] (version 2 and 3 blocks) */
    unsigned char weighted[CTR_MAX_FEATURES]; /* 1: the feature's ids carry weights (version 3) */
    uint64_t weight_mask;                  /* bit f: weighted[f]                 */
    int float_label;                       /* version 3 with CB_FLAG_FLOAT_LABEL */
    int64_t label_bytes;                   /* 1 (u8) or 4 (f32)                  */
} cb_layout;

/* The layout of a file of this version whose features have these rows
 * (rows 0: the feature carries keys; versions 2 and 3), weights
 * (weight_mask, version 3) and labels (float_label, version 3). */
void cb_layout_init(cb_layout *l, uint32_t version, int64_t D, int64_t S, const int64_t *rows);
void cb_layout_weights(cb_layout *l, uint64_t weight_mask, int float_label);

static inline int64_t cb_header_size(uint32_t version, int64_t S)
{
    return CB_HEADER_FIXED + 40 * S + (version >= CB_VERSION_WEIGHTS ? 8 : 0) + 8;
}

/* Bytes of a block of n samples holding m row ids, q keys, w weights. */
static inline int64_t cb_block_size(const cb_layout *l, int64_t n, int64_t m, int64_t q, int64_t w)
{
    return l->block_fixed + n * l->label_bytes + 4 * n * l->D + 2 * n * l->S + 4 * m + 8 * q + 4 * w + 8;
}

#endif
