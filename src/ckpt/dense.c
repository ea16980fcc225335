/*
 * dense.c: the dense model's parameters and optimizer state in a
 * checkpoint, whole or in the pieces pipeline stages save (ckpt_dense.h).
 *
 * Reading copies each wanted range from the whole blobs, or from every
 * saved piece it overlaps; the pieces of a checkpoint do not overlap each
 * other, so counting the elements copied says whether every wanted one was
 * found.  Blobs sit at any byte offset of the mapped file: every read goes
 * through memcpy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_dense.h"

#define HEADER 5 /* magic, version, full, floats, n */

int64_t *ckpt_dense_ranges_blob(int64_t full, int32_t floats, const int64_t *ranges, int32_t n, int64_t *bytes)
{
    *bytes = (int64_t)(HEADER + 2 * (int64_t)n) * (int64_t)sizeof(int64_t);
    int64_t *b = malloc((size_t)*bytes);
    if (!b)
        return NULL;
    b[0] = CKPT_DENSE_MAGIC, b[1] = 1, b[2] = full, b[3] = floats, b[4] = n;
    memcpy(b + HEADER, ranges, (size_t)(2 * (int64_t)n) * sizeof(int64_t));
    return b;
}

static int64_t at64(const void *p, int64_t i)
{
    int64_t v;
    memcpy(&v, (const char *)p + i * (int64_t)sizeof v, sizeof v);
    return v;
}

static int bad(const ember_checkpoint *ck, char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "checkpoint %s: the dense model: %s", ember_checkpoint_path(ck), what);
    return EMBER_EFORMAT;
}

/* Rank r's pieces header, checked against the blob's size and full: 0 and
 * *n, *floats, *pairs; 1 when r saved none; -1 when malformed. */
static int piece_header(const ember_checkpoint *ck, int32_t r, int64_t full, int64_t *n, int32_t *floats,
                        const void **pairs, int64_t *total)
{
    int64_t bytes = 0;
    const void *b = ember_checkpoint_blob(ck, r, CKPT_DENSE_RANGES, &bytes);
    if (!b || bytes == 0)
        return 1;
    if (bytes < HEADER * 8 || at64(b, 0) != CKPT_DENSE_MAGIC || at64(b, 1) != 1 || at64(b, 3) < 0 ||
        at64(b, 3) > 64 || at64(b, 4) < 0 || bytes != (HEADER + 2 * at64(b, 4)) * 8 ||
        (full >= 0 && at64(b, 2) != full))
        return -1;
    *n = at64(b, 4);
    *floats = (int32_t)at64(b, 3);
    *pairs = (const char *)b + HEADER * 8;
    *total = 0;
    for (int64_t i = 0; i < *n; i++) {
        const int64_t off = at64(*pairs, 2 * i), len = at64(*pairs, 2 * i + 1);
        if (off < 0 || len < 0 || off + len > at64(b, 2))
            return -1;
        *total += len;
    }
    return 0;
}

int ckpt_dense_pieces(const ember_checkpoint *ck, int64_t *full, int32_t *floats)
{
    *full = -1;
    *floats = 0;
    for (int32_t r = 0; r < ember_checkpoint_world(ck); r++) {
        int64_t bytes = 0;
        const void *b = ember_checkpoint_blob(ck, r, CKPT_DENSE_RANGES, &bytes);
        if (b && bytes >= HEADER * 8) {
            *full = at64(b, 2);
            *floats = (int32_t)at64(b, 3);
            return 1;
        }
    }
    return 0;
}

/* The whole blobs' ranges into params and state. */
static int read_whole(const ember_checkpoint *ck, const void *pb, int64_t full, int32_t floats,
                      const int64_t *ranges, int32_t n, int64_t want, float *params, float *state, char *err,
                      size_t errlen)
{
    int64_t ob = 0;
    const char *sb = state && floats > 0 ? ember_checkpoint_blob(ck, -1, "dense.optim", &ob) : NULL;
    if (state && floats > 0 && (!sb || ob != (int64_t)floats * full * 4)) {
        char what[160];
        snprintf(what, sizeof what, "blob \"dense.optim\" has %lld bytes, this model's optimizer state %lld",
                 (long long)(sb ? ob : 0), (long long)floats * full * 4);
        return bad(ck, err, errlen, what);
    }
    int64_t dst = 0; /* where range i goes */
    for (int32_t i = 0; i < n; dst += ranges[2 * i + 1], i++) {
        const int64_t off = ranges[2 * i], len = ranges[2 * i + 1];
        memcpy(params + dst, (const char *)pb + off * 4, (size_t)len * 4);
        for (int32_t k = 0; sb && k < floats; k++)
            memcpy(state + k * want + dst, sb + ((int64_t)k * full + off) * 4, (size_t)len * 4);
    }
    return 0;
}

int ckpt_dense_read(const ember_checkpoint *ck, int64_t full, int32_t floats, const int64_t *ranges, int32_t n,
                    float *params, float *state, char *err, size_t errlen)
{
    int64_t want = 0;
    for (int32_t i = 0; i < n; i++) {
        if (ranges[2 * i] < 0 || ranges[2 * i + 1] < 0 || ranges[2 * i] + ranges[2 * i + 1] > full)
            return bad(ck, err, errlen, "a range outside the model (a bug of the caller)");
        want += ranges[2 * i + 1];
    }
    int64_t pbytes = 0;
    const void *pb = ember_checkpoint_blob(ck, -1, "dense.params", &pbytes);
    if (pb) {
        if (pbytes != full * 4) {
            char what[160];
            snprintf(what, sizeof what, "blob \"dense.params\" has %lld bytes, this model needs %lld",
                     (long long)pbytes, (long long)full * 4);
            return bad(ck, err, errlen, what);
        }
        return read_whole(ck, pb, full, floats, ranges, n, want, params, state, err, errlen);
    }
    int64_t found = 0;
    for (int32_t r = 0; r < ember_checkpoint_world(ck); r++) {
        int64_t np = 0, total = 0, bytes = 0, ob = 0;
        int32_t pf = 0;
        const void *pairs = NULL;
        const int h = piece_header(ck, r, full, &np, &pf, &pairs, &total);
        if (h == 1)
            continue;
        const char *src = h == 0 ? ember_checkpoint_blob(ck, r, "dense.params", &bytes) : NULL;
        const char *ssrc = h == 0 && state && floats > 0 ? ember_checkpoint_blob(ck, r, "dense.optim", &ob) : NULL;
        const char *why = h < 0 ? "a malformed \"dense.ranges\" blob, or one of a model of another size"
                          : !src || bytes != total * 4 ? "blob \"dense.params\" of another size than its ranges"
                          : state && floats > 0 && pf != floats ? "saved with another optimizer (other state floats)"
                          : state && floats > 0 && (!ssrc || ob != (int64_t)floats * total * 4)
                              ? "blob \"dense.optim\" of another size than its ranges"
                              : NULL;
        if (why) {
            char what[200];
            snprintf(what, sizeof what, "rank %d's pieces: %s", (int)r, why);
            return bad(ck, err, errlen, what);
        }
        int64_t at = 0; /* where the saved range starts in the piece */
        for (int64_t s = 0; s < np; s++) {
            const int64_t so = at64(pairs, 2 * s), sl = at64(pairs, 2 * s + 1);
            int64_t dpos = 0;
            for (int32_t i = 0; i < n; dpos += ranges[2 * i + 1], i++) {
                const int64_t wo = ranges[2 * i], wl = ranges[2 * i + 1];
                const int64_t lo = so > wo ? so : wo, hi = so + sl < wo + wl ? so + sl : wo + wl;
                if (lo >= hi)
                    continue;
                memcpy(params + dpos + (lo - wo), src + (at + lo - so) * 4, (size_t)(hi - lo) * 4);
                for (int32_t k = 0; ssrc && k < floats; k++)
                    memcpy(state + k * want + dpos + (lo - wo), ssrc + ((int64_t)k * total + at + lo - so) * 4,
                           (size_t)(hi - lo) * 4);
                found += hi - lo;
            }
            at += sl;
        }
    }
    if (found != want) {
        char what[200];
        snprintf(what, sizeof what, "%lld of the %lld parameters asked for are in its pieces%s", (long long)found,
                 (long long)want, found > want ? " (pieces overlap)" : ": no \"dense.params\" blob holds the rest");
        return bad(ck, err, errlen, what);
    }
    return 0;
}
