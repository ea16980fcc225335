/*
 * ref_ctr_bin.c: the naive reader of ember's binary CTR format (ref.h),
 * written from docs/ctr-format.md: header, then blocks of block_samples
 * samples, each block's columns read sample by sample in file order.  The
 * tests compare the library's batches, decoded in parallel, against it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref.h"

static uint64_t le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static float le_float(const unsigned char *p)
{
    uint32_t u = (uint32_t)le(p, 4);
    float x;
    memcpy(&x, &u, 4);
    return x;
}

void ref_ctr_file_free(ref_ctr_file *f)
{
    free(f->label);
    free(f->dense);
    free(f->w);
    free(f->len);
    free(f->first);
    free(f->ids);
    memset(f, 0, sizeof *f);
}

/* The whole file into memory; NULL when it cannot be read. */
static unsigned char *slurp(const char *path, long *size)
{
    FILE *fp = fopen(path, "rb");
    unsigned char *c = NULL;
    if (fp && fseek(fp, 0, SEEK_END) == 0 && (*size = ftell(fp)) > 0 && fseek(fp, 0, SEEK_SET) == 0 &&
        (c = malloc((size_t)*size)) && fread(c, 1, (size_t)*size, fp) != (size_t)*size) {
        free(c);
        c = NULL;
    }
    if (fp)
        fclose(fp);
    return c;
}

int ref_ctr_file_read(const char *path, ref_ctr_file *f)
{
    memset(f, 0, sizeof *f);
    long size = 0;
    unsigned char *c = slurp(path, &size);
    if (!c)
        return -1;
    const uint32_t version = (uint32_t)le(c + 8, 4), flags = (uint32_t)le(c + 12, 4);
    f->D = (int64_t)le(c + 16, 4);
    f->S = (int64_t)le(c + 20, 4);
    f->N = (int64_t)le(c + 24, 8);
    const int64_t K = (int64_t)le(c + 32, 4), S = f->S, D = f->D, N = f->N;
    const int64_t H = 56 + 40 * S + (version >= 3 ? 8 : 0) + 8;
    const uint64_t wmask = version >= 3 ? le(c + H - 16, 8) : 0;
    const int float_label = version >= 3 && (flags & 1);
    const int64_t fixed = version >= 3 ? 48 : version >= 2 ? 32 : 16;
    int keyed[64], weighted[64];
    int64_t total = 0;
    for (int64_t k = 0; k < S; k++) {
        keyed[k] = le(c + 56 + 8 * k, 8) == 0;
        weighted[k] = (int)(wmask >> k & 1);
    }
    f->label = malloc((size_t)(N + 1) * sizeof *f->label);
    f->dense = malloc((size_t)(N * D + 1) * sizeof *f->dense);
    f->len = malloc((size_t)(N * S + 1) * sizeof *f->len);
    f->first = malloc((size_t)(N * S + 1) * sizeof *f->first);
    f->ids = malloc((size_t)(size / 4 + 1) * sizeof *f->ids); /* ids take 4 bytes or more each */
    f->w = malloc((size_t)(size / 4 + 1) * sizeof *f->w);
    if (!f->label || !f->dense || !f->len || !f->first || !f->ids || !f->w) {
        free(c);
        ref_ctr_file_free(f);
        return -1;
    }
    const unsigned char *p = c + H;
    for (int64_t b0 = 0; b0 < N; b0 += K) {
        const int64_t n = (int64_t)le(p + 4, 4), m = (int64_t)le(p + 8, 8), q = version >= 2 ? (int64_t)le(p + 16, 8) : 0;
        const int64_t nw = version >= 3 ? (int64_t)le(p + 24, 8) : 0, lb = float_label ? 4 : 1;
        const unsigned char *lab = p + fixed, *dn = lab + n * lb, *ln = dn + 4 * n * D, *rid = ln + 2 * n * S;
        const unsigned char *key = rid + 4 * m, *wt = key + 8 * q;
        int64_t at_id = 0, at_key = 0, at_w = 0;
        for (int64_t i = 0; i < n; i++) {
            const int64_t s = b0 + i;
            f->label[s] = float_label ? le_float(lab + 4 * i) : (float)lab[i];
            for (int64_t j = 0; j < D; j++)
                f->dense[s * D + j] = le_float(dn + 4 * (i * D + j));
            for (int64_t k = 0; k < S; k++) {
                const int32_t len = (int32_t)le(ln + 2 * (i * S + k), 2);
                f->len[s * S + k] = len;
                f->first[s * S + k] = total;
                for (int32_t j = 0; j < len; j++, total++) {
                    f->ids[total] = keyed[k] ? (int64_t)le(key + 8 * at_key++, 8) : (int64_t)le(rid + 4 * at_id++, 4);
                    f->w[total] = weighted[k] ? le_float(wt + 4 * at_w++) : 1.0f;
                }
            }
        }
        p = wt + 4 * nw + 8;
    }
    free(c);
    return 0;
}
