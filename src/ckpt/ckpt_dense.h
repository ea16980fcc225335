/*
 * ckpt_dense.h: a trained model's dense parameters and their optimizer
 * state in a checkpoint, whole or in pieces, and the one reader of both
 * (docs/checkpoint-format.md, "Dense model").
 *
 * Whole: the blobs saved once, "dense.params" (the parameter vector of
 * every block, dense.h's layout) and "dense.optim" (state floats per
 * parameter, vector after vector: Adam's m[n] then v[n]).  That is what a
 * run without pipeline stages saves.
 *
 * In pieces: pipeline stages hold their own blocks only, so one rank of
 * each stage saves them, as rank blobs: "dense.ranges" says which ranges of
 * the whole vector (CKPT_DENSE_RANGES below), "dense.params" holds those
 * ranges' parameters one after another, and "dense.optim" each state vector
 * over the same ranges.  Other ranks save the three empty.  A reader asks
 * for the ranges it holds (a whole model: one range) and gets them from
 * whichever pieces have them, so a checkpoint loads into any cut, any
 * stage count, or none.
 */
#ifndef EMBER_CKPT_DENSE_H
#define EMBER_CKPT_DENSE_H

#include <stddef.h>
#include <stdint.h>

#include "ember.h"

#define CKPT_DENSE_RANGES "dense.ranges"
#define CKPT_DENSE_MAGIC 0x534543454950444eLL /* "NDPIECES" little-endian */

/* The "dense.ranges" blob for n ranges (off, len pairs of the whole
 * vector, increasing, not overlapping) of a model of `full` parameters with
 * `floats` state floats each: int64 [magic, version 1, full, floats, n,
 * off_0, len_0, ...]; malloc'd (free it), *bytes its size; NULL when out of
 * memory. */
int64_t *ckpt_dense_ranges_blob(int64_t full, int32_t floats, const int64_t *ranges, int32_t n, int64_t *bytes);

/* A "dense.ranges" blob read: 0 and *out when it is well formed (the
 * magic and version, 0 <= floats <= 64, 0 < full <= CKPT_DENSE_MAX_PARAMS,
 * n pairs that fill the blob exactly, increasing, not overlapping and
 * inside [0, full)); -1 otherwise.  out->pairs points into the blob (read
 * it with memcpy: a blob sits at any byte offset). */
#define CKPT_DENSE_MAX_PARAMS ((int64_t)1 << 40)
typedef struct ckpt_dense_ranges {
    int64_t full, n, held;  /* the whole model's parameters; ranges; their sum */
    int32_t floats;
    const void *pairs;      /* n (off, len) int64 pairs                        */
} ckpt_dense_ranges;
int ckpt_dense_ranges_parse(const void *blob, int64_t bytes, ckpt_dense_ranges *out);

/* The n ranges (off, len pairs of the whole vector) of a model of `full`
 * parameters from ck: their parameters into params (one after another)
 * and, when state is not NULL, state vector k's into state + k * sum(len)
 * for k < floats.  From the whole blobs when ck has them, else from the
 * pieces.  0, or EMBER_EFORMAT with err (params and state untouched): a
 * blob of another size, another model, a state of other floats, or a range
 * no piece holds. */
int ckpt_dense_read(const ember_checkpoint *ck, int64_t full, int32_t floats, const int64_t *ranges, int32_t n,
                    float *params, float *state, char *err, size_t errlen);

/* Whether ck holds its dense model in pieces: 1 with the whole model's
 * parameters and state floats as its first well-formed "dense.ranges"
 * says, 0 (and *full -1) when there are none. */
int ckpt_dense_pieces(const ember_checkpoint *ck, int64_t *full, int32_t *floats);

#endif
