/*
 * ctr_bin_decode.c: a batch of binary CTR samples decoded in parallel
 * (ctr_bin_decode.h).
 *
 * The file stores samples sample-major (a sample's label, dense floats, bag
 * lengths, then its ids); a batch is feature-major (every sample's bag of
 * feature 0, then of feature 1, ...).  Where a sample's ids go depends on
 * the bags before it, so the batch is cut into chunks of CB_CHUNK samples
 * (never across runs) and decoded in three passes:
 *
 *   1. each chunk, in parallel: labels, dense floats, bag lengths into the
 *      batch, and its ids per feature and per column (row ids, keys,
 *      weights) summed;
 *   2. one thread: prefix sums of those over the chunks give every chunk
 *      where its ids go in each feature and where they start in its
 *      block's columns;
 *   3. each chunk, in parallel: its ids (and weights) copied there.
 *
 * The chunks are fixed by the runs, not by the team, and every value lands
 * where the sample-by-sample reader puts it, so the batch is the same bits
 * for any thread count.  The team is the calling thread's
 * (omp_get_max_threads): the loop's threads in the trainer, one on a reader
 * thread.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/reserve.h"
#include "data/ctr_bin_decode.h"
#include "data/data_io.h"

#define CB_CHUNK 256

typedef struct chunk {
    int64_t run, row0, i0, n; /* its run, first batch row, first sample in the block, samples */
    int64_t col[3];           /* its ids, keys, weights in the run (pass 1), then where they start (pass 2) */
} chunk;

int cb_decoder_add_run(cb_decoder *d)
{
    return ember_reserve((void **)&d->runs, &d->cap_runs, d->nruns + 1, sizeof *d->runs);
}

void cb_decoder_free(cb_decoder *d)
{
    free(d->runs);
    free(d->chunks);
    free(d->sums);
    memset(d, 0, sizeof *d);
}

/* The runs cut into chunks; their count, or -1 out of memory. */
static int64_t make_chunks(cb_decoder *d, int64_t S)
{
    int64_t nc = 0;
    for (int64_t r = 0; r < d->nruns; r++)
        nc += (d->runs[r].n + CB_CHUNK - 1) / CB_CHUNK;
    if (ember_reserve(&d->chunks, &d->cap_chunks, nc, sizeof(chunk)) ||
        ember_reserve((void **)&d->sums, &d->cap_sums, nc * 2 * S, sizeof *d->sums))
        return -1;
    chunk *c = d->chunks;
    for (int64_t r = 0, k = 0, row = 0; r < d->nruns; r++)
        for (int64_t a = 0; a < d->runs[r].n; a += CB_CHUNK, k++) {
            int64_t len = d->runs[r].n - a < CB_CHUNK ? d->runs[r].n - a : CB_CHUNK;
            c[k] = (chunk){r, row, d->runs[r].i0 + a, len, {0, 0, 0}};
            row += len;
        }
    return nc;
}

/* Pass 1 for chunk c: label, dense and lengths of its samples; its ids per
 * feature into fsum[S] and per column into c->col. */
static void decode_heads(const cb_layout *l, const cb_block *blk, ctr_source *s, int64_t n, chunk *c, int64_t *fsum)
{
    const int64_t D = l->D, S = l->S;
    memset(fsum, 0, (size_t)S * sizeof *fsum);
    for (int64_t k = 0; k < c->n; k++) {
        const int64_t i = c->i0 + k, row = c->row0 + k;
        if (l->float_label) {
            uint32_t bits = get_u32(blk->lab + 4 * i);
            memcpy(&s->label[row], &bits, 4);
        } else {
            s->label[row] = (float)blk->lab[i];
        }
        float *dense = s->dense + row * D;
        for (int64_t j = 0; j < D; j++) {
            uint32_t bits = get_u32(blk->dense + 4 * (i * D + j));
            memcpy(&dense[j], &bits, 4);
        }
        for (int64_t f = 0; f < S; f++) {
            int32_t len = get_u16(blk->len + 2 * (i * S + f));
            s->lengths[f * n + row] = len;
            fsum[f] += len;
            c->col[l->keyed[f]] += len;
            if (l->weighted[f])
                c->col[2] += len;
        }
    }
}

/* Pass 3 for chunk c: its bags' ids (and weights) to dst[f], from its
 * columns' starts in c->col. */
static void decode_ids(const cb_layout *l, const cb_block *blk, ctr_source *s, int64_t n, const chunk *c, int64_t *dst)
{
    const int64_t S = l->S;
    int64_t p[3] = {c->col[0], c->col[1], c->col[2]};
    for (int64_t k = 0; k < c->n; k++) {
        const int64_t row = c->row0 + k;
        for (int64_t f = 0; f < S; f++) {
            const int32_t len = s->lengths[f * n + row];
            int64_t *ids = s->ids + dst[f];
            if (l->keyed[f]) {
                for (int32_t j = 0; j < len; j++)
                    ids[j] = (int64_t)get_u64(blk->keys + 8 * (p[1] + j));
                p[1] += len;
            } else {
                for (int32_t j = 0; j < len; j++)
                    ids[j] = get_u32(blk->ids + 4 * (p[0] + j));
                p[0] += len;
            }
            if (s->weights) {
                float *w = s->weights + dst[f];
                for (int32_t j = 0; j < len; j++) {
                    w[j] = 1.0f;
                    if (l->weighted[f]) {
                        uint32_t bits = get_u32(blk->w + 4 * p[2]++);
                        memcpy(&w[j], &bits, 4);
                    }
                }
            }
            dst[f] += len;
        }
    }
}

/* Pass 2: where each chunk's ids start in its block's columns and in each
 * feature of the batch; pos_end after the last run.  The ids in all. */
static int64_t place_chunks(cb_decoder *d, int64_t nc, int64_t S, int64_t pos_end[3])
{
    chunk *c = d->chunks;
    int64_t *fsum = d->sums, *dst = d->sums + nc * S;
    int64_t at[3] = {0, 0, 0}, base[CTR_MAX_FEATURES] = {0}, nids = 0;
    for (int64_t k = 0; k < nc; k++) {
        const cb_run *r = &d->runs[c[k].run];
        if (k == 0 || c[k].run != c[k - 1].run) /* a run starts: its own place, or on from the last */
            if (!r->cont)
                memcpy(at, r->pos, sizeof at);
        for (int q = 0; q < 3; q++) {
            int64_t m = c[k].col[q];
            c[k].col[q] = at[q];
            at[q] += m;
        }
        for (int64_t f = 0; f < S; f++) {
            dst[k * S + f] = base[f]; /* the ids of feature f before chunk k, for now */
            base[f] += fsum[k * S + f];
        }
    }
    for (int64_t f = 0; f < S; f++) { /* then feature f's ids follow every earlier feature's */
        int64_t total = base[f];
        for (int64_t k = 0; k < nc; k++)
            dst[k * S + f] += nids;
        nids += total;
    }
    memcpy(pos_end, at, sizeof at);
    return nids;
}

int cb_decode_runs(cb_decoder *d, const cb_layout *l, ctr_source *s, int64_t n, int64_t pos_end[3])
{
    const int64_t S = l->S;
    const int64_t nc = make_chunks(d, S);
    if (nc < 0)
        return EMBER_ENOMEM;
    chunk *c = d->chunks;
    const int par = nc > 1 && omp_get_max_threads() > 1;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t k = 0; k < nc; k++)
        decode_heads(l, &d->runs[c[k].run].blk, s, n, &c[k], d->sums + k * S);
    int64_t nids = place_chunks(d, nc, S, pos_end);
    if (ctr_buf_reserve_ids(s, nids, 0))
        return EMBER_ENOMEM;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t k = 0; k < nc; k++)
        decode_ids(l, &d->runs[c[k].run].blk, s, n, &c[k], d->sums + nc * S + k * S);
    s->num_ids = nids;
    return 0;
}
