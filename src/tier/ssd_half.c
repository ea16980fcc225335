/*
 * ssd_half.c: whole-row access to an SSD store that holds half rows or half
 * optimizer state (docs/precision.md).  What goes through acquire/release
 * (row reads and writes, checkpoints, loads, a dynamic table's resets) sees
 * fp32, as with the memory tier's store of half rows (store_quant.c), and
 * with the same codec, so both tiers hold the same bits.
 *
 * Acquire decodes every row into the scratch `dec`: a cached row from its
 * slot, another from its record (read from the file into bulk, or the
 * initializer's, rounded as the memory tier's initial rows are).  Release
 * with dirty first encodes every row to nearest into its record in bulk, so
 * that a row no half can hold (fp16 beyond 65504, not finite) refuses the
 * whole call before anything changes; then a cached row's record goes to its
 * slot (dirty) and the others to the file.  Half state rounds to nearest, a
 * value beyond fp16's range to infinity.
 */
#include <stdio.h>
#include <string.h>

#include "core/reserve.h"
#include "quant/quant.h"
#include "quant/round.h"
#include "tier/ssd_impl.h"

/* A record's parts, as held (v: vrow bytes, st: srow bytes), to the fp32
 * row out[dim + sf].  Records sit at even offsets: halves are aligned,
 * floats are copied. */
static void decode(const ssd_store *s, const char *v, const char *st, float *out)
{
    if (s->venc)
        ember_half_decode_row(s->venc, s->dim, (const uint16_t *)v, out);
    else
        memcpy(out, v, (size_t)s->vrow);
    if (!s->sf)
        return;
    if (s->senc)
        ember_half_decode_row(s->senc, s->sf, (const uint16_t *)st, out + s->dim);
    else
        memcpy(out + s->dim, st, (size_t)s->srow);
}

/* The fp32 row in[dim + sf] to a record's parts, to nearest.  0, or -1
 * (parts unspecified) when the values do not fit the rows' half. */
static int encode(const ssd_store *s, const float *in, char *v, char *st)
{
    if (!s->venc)
        memcpy(v, in, (size_t)s->vrow);
    else if (ember_quant_row((ember_encoding)s->venc, s->dim, in, (uint8_t *)v) != 0)
        return -1;
    if (s->sf && s->senc)
        ember_half_encode_row(s->senc, 0, 0, 0, s->sf, in + s->dim, (uint16_t *)st);
    else if (s->sf)
        memcpy(st, in + s->dim, (size_t)s->srow);
    return 0;
}

static char *slot_values(const ssd_store *s, int64_t x) { return s->vslot + x * s->vrow; }
static char *slot_state(const ssd_store *s, int64_t x) { return s->sf ? s->sslot + x * s->srow : NULL; }

int ssd_half_acquire(ssd_store *s, const uint32_t *rows, int64_t n, float **values, float **state)
{
    int st = ssd_bulk_reserve(s, n);
    if (st != EMBER_OK)
        return st;
    int64_t per = (int64_t)s->dim + s->sf, nq = 0;
    if (ember_reserve((void **)&s->dec, &s->dec_cap, n * per + 1, sizeof(float)))
        return ssd_fail(s, EMBER_ENOMEM, "%s: out of memory for decoding %lld rows", s->label, (long long)n);
    for (int64_t i = 0; i < n; i++) {
        int64_t x = ssd_map_find(s, rows[i]);
        float *d = s->dec + i * per;
        s->bulk_slot[i] = x;
        values[i] = d;
        if (state)
            state[i] = s->sf ? d + s->dim : NULL;
        if (x >= 0) {
            decode(s, slot_values(s, x), slot_state(s, x), d);
            continue;
        }
        ssd_fetch_record(s, &nq, rows[i], s->bulk + i * s->rec_bytes);
    }
    if ((st = ssd_bulk_run(s, nq)) != EMBER_OK)
        return st;
    for (int64_t i = 0; i < n; i++)
        if (s->bulk_slot[i] < 0) {
            const char *rec = s->bulk + i * s->rec_bytes;
            decode(s, rec, rec + s->vrow, s->dec + i * per);
        }
    return EMBER_OK;
}

int ssd_half_release(ssd_store *s, const uint32_t *rows, int64_t n)
{
    int64_t per = (int64_t)s->dim + s->sf;
    for (int64_t i = 0; i < n; i++) {
        char *rec = s->bulk + i * s->rec_bytes;
        if (encode(s, s->dec + i * per, rec, rec + s->vrow) != 0)
            return ssd_fail(s, EMBER_EINPUT, "%s: local row %u: %s; nothing was written", s->label, rows[i],
                            ember_quant_refusal((ember_encoding)s->venc));
    }
    for (int64_t i = 0; i < n; i++) {
        char *rec = s->bulk + i * s->rec_bytes;
        int64_t x = s->bulk_slot[i];
        if (x < 0) {
            int st = ssd_save_record(s, rows[i], rec, rec + s->vrow);
            if (st != EMBER_OK)
                return st;
            continue;
        }
        memcpy(slot_values(s, x), rec, (size_t)s->vrow);
        if (s->sf)
            memcpy(slot_state(s, x), rec + s->vrow, (size_t)s->srow);
        s->flags[x] |= F_DIRTY;
    }
    return EMBER_OK;
}
