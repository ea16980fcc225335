/*
 * dense.c: the dense model's parameters and optimizer state in a
 * checkpoint, whole or in the pieces pipeline stages save (ckpt_dense.h).
 *
 * Reading copies each wanted range from the whole blobs, or from every
 * saved piece it overlaps; the pieces of a checkpoint do not overlap each
 * other, so counting the elements a read would copy says whether every
 * wanted one is there: every check runs, and that count, before a byte is
 * written, so a failed read leaves the caller's buffers as they were.  Blobs sit at any byte offset of the mapped file: every read goes
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

int ckpt_dense_ranges_parse(const void *b, int64_t bytes, ckpt_dense_ranges *out)
{
    memset(out, 0, sizeof *out);
    if (!b || bytes < HEADER * 8 || bytes % 8 || at64(b, 0) != CKPT_DENSE_MAGIC || at64(b, 1) != 1)
        return -1;
    out->full = at64(b, 2);
    out->floats = (int32_t)at64(b, 3);
    out->n = at64(b, 4);
    if (out->full <= 0 || out->full > CKPT_DENSE_MAX_PARAMS || at64(b, 3) < 0 || at64(b, 3) > 64 || out->n < 0 ||
        out->n != (bytes / 8 - HEADER) / 2 || (bytes / 8 - HEADER) % 2)
        return -1;
    out->pairs = (const char *)b + HEADER * 8;
    for (int64_t i = 0, end = 0; i < out->n; i++) { /* increasing, disjoint, inside the model */
        const int64_t off = at64(out->pairs, 2 * i), len = at64(out->pairs, 2 * i + 1);
        if (off < end || len < 0 || len > out->full - off)
            return -1;
        end = off + len;
        out->held += len;
    }
    return 0;
}

int ckpt_dense_pieces(const ember_checkpoint *ck, int64_t *full, int32_t *floats)
{
    *full = -1;
    *floats = 0;
    for (int32_t r = 0; r < ember_checkpoint_world(ck); r++) {
        int64_t bytes = 0;
        ckpt_dense_ranges h;
        const void *b = ember_checkpoint_blob(ck, r, CKPT_DENSE_RANGES, &bytes);
        if (ckpt_dense_ranges_parse(b, bytes, &h) == 0) {
            *full = h.full;
            *floats = h.floats;
            return 1;
        }
    }
    return 0;
}

static int cmp_off(const void *a, const void *b)
{
    const int64_t x = ((const int64_t *)a)[0], y = ((const int64_t *)b)[0];
    return x < y ? -1 : x > y;
}

/* Every saving rank's pieces, checked: well formed, of a model of `full`
 * parameters, their blobs of the sizes their ranges say (the state's when
 * floats > 0: the state is read), and disjoint over the ranks (so that
 * counting what a read would copy proves it finds everything).  0, or
 * EMBER_EFORMAT with err. */
static int check_pieces(const ember_checkpoint *ck, int64_t full, int32_t floats, char *err, size_t errlen)
{
    int64_t count = 0;
    for (int pass = 0; pass < 2; pass++) {
        int64_t *all = pass ? malloc((size_t)(2 * count + 2) * sizeof *all) : NULL, k = 0;
        if (pass && !all)
            return bad(ck, err, errlen, "out of memory");
        for (int32_t r = 0; r < ember_checkpoint_world(ck); r++) {
            int64_t bytes = 0, pb = -1, ob = -1;
            const void *b = ember_checkpoint_blob(ck, r, CKPT_DENSE_RANGES, &bytes);
            ckpt_dense_ranges h;
            if (!b || bytes == 0)
                continue;
            const int parsed = ckpt_dense_ranges_parse(b, bytes, &h) == 0 && h.full == full;
            if (parsed && !ember_checkpoint_blob(ck, r, "dense.params", &pb))
                pb = -1;
            if (parsed && floats > 0 && !ember_checkpoint_blob(ck, r, "dense.optim", &ob))
                ob = -1;
            const char *why = !parsed ? "a malformed \"" CKPT_DENSE_RANGES "\" blob, or one of a model of another size"
                              : pb != h.held * 4 ? "blob \"dense.params\" of another size than its ranges"
                              : floats > 0 && h.floats != floats ? "saved with another optimizer (other state floats)"
                              : floats > 0 && (ob < 0 || ob % (4 * (int64_t)floats) || ob / 4 / floats != h.held)
                                  ? "blob \"dense.optim\" of another size than its ranges"
                                  : NULL;
            if (why) {
                free(all);
                char what[200];
                snprintf(what, sizeof what, "rank %d's pieces: %s", (int)r, why);
                return bad(ck, err, errlen, what);
            }
            for (int64_t i = 0; pass && i < h.n; i++, k++)
                all[2 * k] = at64(h.pairs, 2 * i), all[2 * k + 1] = at64(h.pairs, 2 * i + 1);
            count += pass ? 0 : h.n;
        }
        if (!pass)
            continue;
        qsort(all, (size_t)count, 2 * sizeof *all, cmp_off);
        for (int64_t i = 1; i < count; i++)
            if (all[2 * i] < all[2 * i - 2] + all[2 * i - 1]) {
                free(all);
                return bad(ck, err, errlen, "pieces of two ranks overlap");
            }
        free(all);
    }
    return 0;
}

/* The elements of the n ranges (want of them) that the checked pieces
 * hold; copied into params and, for floats > 0, state when params is not
 * NULL (else only counted). */
static int64_t from_pieces(const ember_checkpoint *ck, const int64_t *ranges, int32_t n, int64_t want, int32_t floats,
                           float *params, float *state)
{
    int64_t found = 0;
    for (int32_t r = 0; r < ember_checkpoint_world(ck); r++) {
        int64_t bytes = 0;
        ckpt_dense_ranges h;
        const void *rb = ember_checkpoint_blob(ck, r, CKPT_DENSE_RANGES, &bytes);
        if (ckpt_dense_ranges_parse(rb, bytes, &h))
            continue; /* none saved here (check_pieces let nothing else through) */
        const char *src = params ? ember_checkpoint_blob(ck, r, "dense.params", NULL) : NULL;
        const char *ssrc = params && floats > 0 ? ember_checkpoint_blob(ck, r, "dense.optim", NULL) : NULL;
        int64_t at = 0; /* where the saved range starts in the piece */
        for (int64_t s = 0; s < h.n; s++) {
            const int64_t so = at64(h.pairs, 2 * s), sl = at64(h.pairs, 2 * s + 1);
            int64_t dpos = 0;
            for (int32_t i = 0; i < n; dpos += ranges[2 * i + 1], i++) {
                const int64_t wo = ranges[2 * i], wl = ranges[2 * i + 1];
                const int64_t lo = so > wo ? so : wo, hi = so + sl < wo + wl ? so + sl : wo + wl;
                if (lo >= hi)
                    continue;
                if (src)
                    memcpy(params + dpos + (lo - wo), src + (at + lo - so) * 4, (size_t)(hi - lo) * 4);
                for (int32_t k = 0; ssrc && k < floats; k++)
                    memcpy(state + k * want + dpos + (lo - wo), ssrc + ((int64_t)k * h.held + at + lo - so) * 4,
                           (size_t)(hi - lo) * 4);
                found += hi - lo;
            }
            at += sl;
        }
    }
    return found;
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
    if (full < 0 || full > CKPT_DENSE_MAX_PARAMS)
        return bad(ck, err, errlen, "more parameters than a model may have");
    for (int32_t i = 0; i < n; i++) {
        if (ranges[2 * i] < (i ? ranges[2 * i - 2] + ranges[2 * i - 1] : 0) || ranges[2 * i + 1] < 0 ||
            ranges[2 * i + 1] > full - ranges[2 * i])
            return bad(ck, err, errlen, "ranges not increasing or outside the model (a bug of the caller)");
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
    /* everything checked, and every element found, before a byte is written */
    const int32_t sf = state ? floats : 0;
    int st = check_pieces(ck, full, sf, err, errlen);
    if (st != 0)
        return st;
    const int64_t found = from_pieces(ck, ranges, n, want, sf, NULL, NULL);
    if (found != want) {
        char what[200];
        snprintf(what, sizeof what, "%lld of the %lld parameters asked for are in its pieces: no \"dense.params\" "
                 "blob holds the rest", (long long)found, (long long)want);
        return bad(ck, err, errlen, what);
    }
    from_pieces(ck, ranges, n, want, sf, params, state);
    return 0;
}
