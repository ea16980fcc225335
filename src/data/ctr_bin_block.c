/*
 * ctr_bin_block.c: one block of ember's binary CTR format (ctr_bin_block.h,
 * docs/ctr-format.md): its checks, and the samples read out of it.
 *
 * A block is believed in steps: its size against its counts, then its
 * checksum, then (version 2) its key mask against the header, then its
 * contents, in two passes: labels and bag lengths first (every bag must
 * fit in the block's ids or keys, and the lengths must use them all), then
 * the row ids against their features' rows, so a message can name the
 * sample and the feature whose bag or id is wrong.  Keys (version 2) take
 * any 64-bit value.  The contents are first judged by the calling thread's
 * OpenMP team in chunks of samples (contents_ok), and only a block found
 * wrong goes through the serial passes, which name what is wrong.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "data/ctr_bin_block.h"
#include "data/data_io.h"

void cb_block_where(char *buf, size_t size, int64_t b, int64_t off, int64_t first, int64_t count)
{
    snprintf(buf, size, "block %lld (byte %lld; samples %lld..%lld)", (long long)b, (long long)off,
             (long long)first, (long long)(first + count - 1));
}

/* The block's counts against its bytes: 0, or -1 with err. */
static int check_size(const cb_layout *l, const char *path, const char *where, int64_t n, uint64_t m, uint64_t q,
                      uint64_t w, int64_t bytes, char *err, size_t errlen)
{
    char keys[96] = "";
    if (l->version >= CB_VERSION_WEIGHTS)
        snprintf(keys, sizeof keys, ", %llu keys and %llu weights", (unsigned long long)q, (unsigned long long)w);
    else if (l->version >= CB_VERSION_KEYS)
        snprintf(keys, sizeof keys, " and %llu keys", (unsigned long long)q);
    if (m > (uint64_t)bytes / 4 || q > (uint64_t)bytes / 8 || w > (uint64_t)bytes / 4)
        return ctr_fail(err, errlen, "%s: %s: %lld samples with %llu ids%s cannot fit in its %lld bytes (a corrupt "
                        "count or a truncated block)", path, where, (long long)n, (unsigned long long)m, keys,
                        (long long)bytes);
    int64_t need = cb_block_size(l, n, (int64_t)m, (int64_t)q, (int64_t)w);
    if (need != bytes)
        return ctr_fail(err, errlen, "%s: %s: %lld samples with %llu ids%s need %lld bytes, the block has %lld (%s)",
                        path, where, (long long)n, (unsigned long long)m, keys, (long long)need, (long long)bytes,
                        need > bytes ? "a corrupt count or a truncated block" : "a corrupt count");
    return 0;
}

/* Version 2: the features the block says carry keys are the header's. */
static int check_mask(const cb_layout *l, const ctr_schema *sc, const char *path, const char *where, uint64_t mask,
                      uint64_t wmask, char *err, size_t errlen)
{
    if (l->version >= CB_VERSION_WEIGHTS && wmask != l->weight_mask)
        return ctr_fail(err, errlen, "%s: %s: the block's weight mask 0x%016llx is not the header's 0x%016llx", path,
                        where, (unsigned long long)wmask, (unsigned long long)l->weight_mask);
    if (l->version < CB_VERSION_KEYS || mask == l->key_mask)
        return 0;
    for (int64_t f = 0; f < CTR_MAX_FEATURES; f++) {
        int keyed = (int)(mask >> f & 1);
        if (f >= l->S && keyed)
            return ctr_fail(err, errlen, "%s: %s: the block's key mask 0x%016llx names feature %lld, the file has %lld",
                            path, where, (unsigned long long)mask, (long long)f, (long long)l->S);
        if (f < l->S && keyed && !l->keyed[f])
            return ctr_fail(err, errlen, "%s: %s: %s carries 64-bit keys in this block, but the header gives it %lld "
                            "rows", path, where, sc->names[f], (long long)sc->rows[f]);
        if (f < l->S && !keyed && l->keyed[f])
            return ctr_fail(err, errlen, "%s: %s: %s carries row ids in this block, but the header gives it rows 0 "
                            "(64-bit keys)", path, where, sc->names[f]);
    }
    return 0;
}

/* Pass 1: labels 0/1, and every bag inside the ids (or keys) the block
 * counts, using them all. */
static int check_bags(const cb_layout *l, const ctr_schema *sc, const char *path, const char *where,
                      const unsigned char *map, const cb_block *blk, uint64_t m, uint64_t q, uint64_t w, char *err,
                      size_t errlen)
{
    uint64_t used[2] = {0, 0}, have[2] = {m, q}, wused = 0;
    static const char *const WHAT[2] = {"ids", "keys"};
    for (int64_t i = 0; i < blk->n; i++) {
        long long sample = (long long)(blk->first + i);
        if (l->float_label) {
            uint32_t bits = get_u32(blk->lab + 4 * i);
            float y;
            memcpy(&y, &bits, 4);
            if (!(y >= 0.0f && y <= 1.0f))
                return ctr_fail(err, errlen, "%s: sample %lld (block %lld, byte %lld): label %g is not in [0, 1]",
                                path, sample, (long long)blk->index, (long long)(blk->lab + 4 * i - map), (double)y);
        } else if (blk->lab[i] > 1)
            return ctr_fail(err, errlen, "%s: sample %lld (block %lld, byte %lld): label %u is not 0 or 1", path,
                            sample, (long long)blk->index, (long long)(blk->lab + i - map), blk->lab[i]);
        for (int64_t f = 0; f < l->S; f++) {
            const unsigned char *at = blk->len + 2 * (i * l->S + f);
            int k = l->keyed[f];
            uint64_t len = get_u16(at);
            if (len > have[k] - used[k])
                return ctr_fail(err, errlen, "%s: sample %lld (block %lld, byte %lld): %s: a bag of %llu %s runs "
                                "past the block's %llu %s", path, sample, (long long)blk->index,
                                (long long)(at - map), sc->names[f], (unsigned long long)len,
                                len == 1 ? (k ? "key" : "id") : WHAT[k], (unsigned long long)have[k], WHAT[k]);
            used[k] += len;
            if (l->weighted[f])
                wused += len;
        }
    }
    if (wused != w)
        return ctr_fail(err, errlen, "%s: %s: the weighted features' bags hold %llu ids, the block has %llu weights",
                        path, where, (unsigned long long)wused, (unsigned long long)w);
    if (used[0] != m || used[1] != q) {
        if (l->version < CB_VERSION_KEYS)
            return ctr_fail(err, errlen, "%s: %s: bag lengths sum to %llu ids, the block has %llu", path, where,
                            (unsigned long long)used[0], (unsigned long long)m);
        return ctr_fail(err, errlen, "%s: %s: bag lengths sum to %llu ids and %llu keys, the block has %llu ids and "
                        "%llu keys", path, where, (unsigned long long)used[0], (unsigned long long)used[1],
                        (unsigned long long)m, (unsigned long long)q);
    }
    return 0;
}

/* Pass 2: every row id below its feature's rows, every weight finite. */
static int check_ids(const cb_layout *l, const ctr_schema *sc, const char *path, const unsigned char *map,
                     const cb_block *blk, char *err, size_t errlen)
{
    int64_t k = 0, kw = 0;
    for (int64_t i = 0; i < blk->n; i++)
        for (int64_t f = 0; f < l->S; f++) {
            int64_t len = l->weighted[f] ? get_u16(blk->len + 2 * (i * l->S + f)) : 0;
            for (int64_t j = 0; j < len; j++, kw++) {
                uint32_t bits = get_u32(blk->w + 4 * kw);
                float w;
                memcpy(&w, &bits, 4);
                if (!isfinite(w))
                    return ctr_fail(err, errlen, "%s: sample %lld (block %lld, byte %lld): %s weight %g is not finite",
                                    path, (long long)(blk->first + i), (long long)blk->index,
                                    (long long)(blk->w + 4 * kw - map), sc->names[f], (double)w);
            }
        }
    for (int64_t i = 0; i < blk->n; i++)
        for (int64_t f = 0; f < l->S; f++) {
            int64_t len = get_u16(blk->len + 2 * (i * l->S + f));
            if (l->keyed[f])
                continue;
            for (int64_t j = k; j < k + len; j++) {
                uint32_t id = get_u32(blk->ids + 4 * j);
                if ((int64_t)id >= sc->rows[f])
                    return ctr_fail(err, errlen, "%s: sample %lld (block %lld, byte %lld): %s id %u outside [0, %lld)",
                                    path, (long long)(blk->first + i), (long long)blk->index,
                                    (long long)(blk->ids + 4 * j - map), sc->names[f], id, (long long)sc->rows[f]);
            }
            k += len;
        }
    return 0;
}

/* Passes 1 and 2 as one verdict, by the calling thread's OpenMP team over
 * chunks of samples: 1 when both would pass.  Each chunk sums its bags per
 * column first, so the second sweep knows where its ids start; a bag runs
 * past the block's ids exactly when the lengths sum past them, as lengths
 * only add.  On 0 the serial passes run again, for the message. */
#define CB_CHECK_CHUNK 512
static int contents_ok(const cb_layout *l, const ctr_schema *sc, const cb_block *blk, uint64_t m, uint64_t q,
                       uint64_t w)
{
    const int64_t S = l->S, nc = (blk->n + CB_CHECK_CHUNK - 1) / CB_CHECK_CHUNK;
    int64_t (*at)[3] = malloc((size_t)(nc > 0 ? nc : 1) * sizeof *at);
    if (!at)
        return 0;
    int ok = 1;
    const int par = nc > 1 && omp_get_max_threads() > 1;
#pragma omp parallel for schedule(static) reduction(&& : ok) if (par)
    for (int64_t c = 0; c < nc; c++) { /* labels, and each chunk's ids, keys and weights */
        int64_t u[3] = {0, 0, 0};
        for (int64_t i = c * CB_CHECK_CHUNK; i < blk->n && i < (c + 1) * CB_CHECK_CHUNK; i++) {
            if (l->float_label) {
                uint32_t bits = get_u32(blk->lab + 4 * i);
                float y;
                memcpy(&y, &bits, 4);
                ok = ok && y >= 0.0f && y <= 1.0f;
            } else {
                ok = ok && blk->lab[i] <= 1;
            }
            for (int64_t f = 0; f < S; f++) {
                int64_t len = get_u16(blk->len + 2 * (i * S + f));
                u[l->keyed[f]] += len;
                u[2] += l->weighted[f] ? len : 0;
            }
        }
        memcpy(at[c], u, sizeof u);
    }
    int64_t sum[3] = {0, 0, 0};
    for (int64_t c = 0; c < nc; c++)
        for (int k = 0; k < 3; k++) {
            int64_t v = at[c][k];
            at[c][k] = sum[k];
            sum[k] += v;
        }
    ok = ok && (uint64_t)sum[0] == m && (uint64_t)sum[1] == q && (uint64_t)sum[2] == w;
    if (ok) {
#pragma omp parallel for schedule(static) reduction(&& : ok) if (par)
        for (int64_t c = 0; c < nc; c++) { /* row ids below their rows, weights finite */
            int64_t id = at[c][0], kw = at[c][2];
            for (int64_t i = c * CB_CHECK_CHUNK; i < blk->n && i < (c + 1) * CB_CHECK_CHUNK; i++)
                for (int64_t f = 0; f < S; f++) {
                    int64_t len = get_u16(blk->len + 2 * (i * S + f));
                    for (int64_t j = 0; l->weighted[f] && j < len; j++, kw++) {
                        uint32_t bits = get_u32(blk->w + 4 * kw);
                        float x;
                        memcpy(&x, &bits, 4);
                        ok = ok && isfinite(x);
                    }
                    if (l->keyed[f])
                        continue;
                    int bad = 0; /* no early exit: a loop the compiler can unroll */
                    for (int64_t j = id; j < id + len; j++)
                        bad |= (int64_t)get_u32(blk->ids + 4 * j) >= sc->rows[f];
                    ok = ok && !bad;
                    id += len;
                }
        }
    }
    free(at);
    return ok;
}

int cb_block_check(const cb_layout *l, const ctr_schema *sc, const char *path, const unsigned char *map,
                   int64_t off, int64_t stop, int64_t b, int64_t first, int64_t want_n, cb_block *out, char *err,
                   size_t errlen)
{
    const unsigned char *p = map + off;
    int64_t bytes = stop - off;
    char where[128];
    cb_block_where(where, sizeof where, b, off, first, want_n);
    if (bytes < l->block_fixed + 8)
        return ctr_fail(err, errlen, "%s: %s: %lld bytes, too short for a block", path, where, (long long)bytes);
    if (get_u32(p) != CB_MARKER)
        return ctr_fail(err, errlen, "%s: %s: bad block marker 0x%08x", path, where, get_u32(p));
    int64_t n = get_u32(p + 4);
    if (n != want_n)
        return ctr_fail(err, errlen, "%s: %s: %lld samples, the header says %lld", path, where, (long long)n,
                        (long long)want_n);
    uint64_t m = get_u64(p + 8), q = l->version >= CB_VERSION_KEYS ? get_u64(p + 16) : 0;
    uint64_t w = l->version >= CB_VERSION_WEIGHTS ? get_u64(p + 24) : 0;
    if (check_size(l, path, where, n, m, q, w, bytes, err, errlen))
        return EMBER_EINVAL;
    uint64_t want = XXH64(p, (size_t)bytes - 8, 0), got = get_u64(p + bytes - 8);
    if (want != got)
        return ctr_fail(err, errlen, "%s: %s: checksum mismatch (stored %016llx, computed %016llx): the data is corrupt",
                        path, where, (unsigned long long)got, (unsigned long long)want);
    cb_block blk = {b, first, n, NULL, NULL, NULL, NULL, NULL, NULL};
    blk.lab = p + l->block_fixed;
    blk.dense = blk.lab + n * l->label_bytes;
    blk.len = blk.dense + 4 * n * l->D;
    blk.ids = blk.len + 2 * n * l->S;
    blk.keys = blk.ids + 4 * m;
    blk.w = blk.keys + 8 * q;
    const int v3 = l->version >= CB_VERSION_WEIGHTS;
    uint64_t kmask = l->version >= CB_VERSION_KEYS ? get_u64(p + (v3 ? 32 : 24)) : 0, wmask = v3 ? get_u64(p + 40) : 0;
    if (check_mask(l, sc, path, where, kmask, wmask, err, errlen))
        return EMBER_EINVAL;
    if (!contents_ok(l, sc, &blk, m, q, w) && (check_bags(l, sc, path, where, map, &blk, m, q, w, err, errlen) ||
                                               check_ids(l, sc, path, map, &blk, err, errlen)))
        return EMBER_EINVAL;
    *out = blk;
    return 0;
}

void cb_block_seek(const cb_layout *l, const cb_block *blk, int64_t i, int64_t pos[3])
{
    pos[0] = pos[1] = pos[2] = 0;
    for (int64_t s = 0; s < i; s++)
        for (int64_t f = 0; f < l->S; f++) {
            int64_t len = get_u16(blk->len + 2 * (s * l->S + f));
            pos[l->keyed[f]] += len;
            if (l->weighted[f])
                pos[2] += len;
        }
}

int64_t cb_sample_lengths(const cb_layout *l, const cb_block *blk, int64_t i, int32_t *len)
{
    int64_t sum = 0;
    for (int64_t f = 0; f < l->S; f++) {
        len[f] = get_u16(blk->len + 2 * (i * l->S + f));
        sum += len[f];
    }
    return sum;
}

void cb_sample_read(const cb_layout *l, const cb_block *blk, int64_t i, const int32_t *len, int64_t pos[3],
                    float *label, float *dense, int64_t *ids, float *weights)
{
    int64_t *ids_pos = &pos[0], *keys_pos = &pos[1];
    if (l->float_label) {
        uint32_t bits = get_u32(blk->lab + 4 * i);
        memcpy(label, &bits, 4);
    } else {
        *label = (float)blk->lab[i];
    }
    if (weights)
        for (int64_t f = 0; f < l->S; f++)
            for (int32_t j = 0; j < len[f]; j++) {
                float w = 1.0f;
                if (l->weighted[f]) {
                    uint32_t bits = get_u32(blk->w + 4 * pos[2]++);
                    memcpy(&w, &bits, 4);
                }
                *weights++ = w;
            }
    for (int64_t j = 0; j < l->D; j++) {
        uint32_t bits = get_u32(blk->dense + 4 * (i * l->D + j));
        memcpy(&dense[j], &bits, 4);
    }
    for (int64_t f = 0; f < l->S; f++) {
        if (l->keyed[f]) {
            for (int32_t j = 0; j < len[f]; j++)
                *ids++ = (int64_t)get_u64(blk->keys + 8 * (*keys_pos + j));
            *keys_pos += len[f];
        } else {
            for (int32_t j = 0; j < len[f]; j++)
                *ids++ = get_u32(blk->ids + 4 * (*ids_pos + j));
            *ids_pos += len[f];
        }
    }
}
