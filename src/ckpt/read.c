/*
 * read.c: ckpt_read_rows, canonical full rows assembled from the saving
 * ranks' files of an opened checkpoint.
 *
 * Row r of a table saved under placement P by a world of W lives at:
 *   ROW:        file (offset + r) % W, held row #(rows of the table before r
 *               that the same file holds): whole row;
 *   TABLE:      file owner, held row r;  REPLICATED: file 0, held row r;
 *   COLUMN:     every file k, held row r: columns [k*c, k*c + w_k); the
 *               state likewise (Adam: the m slice then the v slice), then
 *               the floats of the whole row (row-wise kinds), in file 0.
 * Every size was checked at open (manifest.c), so these reads stay inside
 * the mappings; memcpy keeps them free of alignment assumptions.
 */
#include <string.h>

#include "ckpt/ckpt_impl.h"
#include "data/data_error.h"

static void column_row(const ember_checkpoint *ck, int32_t t, int64_t r, float *v, float *s)
{
    const ckpt_table_info *ti = &ck->tables[t];
    int32_t W = ck->world, c = ti->local_dim, dim = ti->dim;
    for (int32_t k = 0; k < W; k++) {
        int64_t w = ckpt_slice_width(ti, k);
        if (w == 0)
            continue;
        const uint8_t *vp = ck->tv[(size_t)t * (size_t)W + (size_t)k];
        memcpy(v + (int64_t)k * c, vp + r * w * 4, (size_t)w * 4);
        if (!s || ti->state_floats == 0)
            continue;
        /* each vector's slice, one after the other, then (file 0) the row floats */
        const uint8_t *sp = ck->ts[(size_t)t * (size_t)W + (size_t)k] + r * ckpt_state_width(ti, k) * 4;
        int nv = ember_state_vectors(ti->opt.kind);
        for (int j = 0; j < nv; j++)
            memcpy(s + (int64_t)j * dim + (int64_t)k * c, sp + j * w * 4, (size_t)w * 4);
        if (k == 0)
            memcpy(s + (int64_t)nv * dim, sp + nv * w * 4, (size_t)ember_state_row_floats(ti->opt.kind) * 4);
    }
}

int ckpt_read_rows(const ember_checkpoint *ck, int32_t t, int64_t first, int64_t count, float *values,
                   float *state)
{
    if (!ck || t < 0 || t >= ck->num_tables || !values) {
        ember_data_set_error("ckpt_read_rows: no such table %d", (int)t);
        return EMBER_EINVAL;
    }
    const ckpt_table_info *ti = &ck->tables[t];
    if (first < 0 || count < 0 || first > ti->rows - count) {
        ember_data_set_error("table \"%s\": rows [%lld, %lld) outside [0, %lld)", ti->name, (long long)first,
                             (long long)(first + count), (long long)ti->rows);
        return EMBER_EINVAL;
    }
    int32_t W = ck->world, dim = ti->dim, sf = ti->state_floats;
    for (int64_t i = 0; i < count; i++) {
        int64_t r = first + i, held = r;
        float *v = values + i * dim, *s = state ? state + i * sf : NULL;
        int32_t k = 0;
        switch (ti->placement) {
        case EMBER_PLACE_COLUMN: column_row(ck, t, r, v, s); continue;
        case EMBER_PLACE_ROW:
            k = (int32_t)((ti->offset + r) % W);
            held = ckpt_residue_count(ti->offset + r, W, k) - ckpt_residue_count(ti->offset, W, k);
            break;
        case EMBER_PLACE_TABLE: k = ti->owner; break;
        default: k = 0; break;
        }
        size_t at = (size_t)t * (size_t)W + (size_t)k;
        memcpy(v, ck->tv[at] + held * dim * 4, (size_t)dim * 4);
        if (s && sf > 0)
            memcpy(s, ck->ts[at] + held * sf * 4, (size_t)sf * 4);
    }
    return EMBER_OK;
}

int ckpt_dyn_read(const ember_checkpoint *ck, int32_t t, int32_t r, ckpt_dyn_part *out)
{
    memset(out, 0, sizeof *out);
    if (t < 0 || t >= ck->num_tables || r < 0 || r >= ck->world || ck->tables[t].kind != EMBER_TABLE_DYNAMIC) {
        ember_data_set_error("%s: table %d of rank %d is not a dynamic table", ck->path, (int)t, (int)r);
        return EMBER_EINVAL;
    }
    const uint8_t *p = ck->tk[(size_t)t * (size_t)ck->world + (size_t)r];
    for (int i = 0; i < 8; i++)
        out->counters[i] = (int64_t)ckpt_get_u64(p + 8 * i);
    out->slots = p + CKPT_KEYS_HEAD;
    out->sketch = out->slots + CKPT_KEYS_SLOT * ck->tables[t].capacity;
    return EMBER_OK;
}

int ckpt_dyn_summarize(const ember_checkpoint *ck, int32_t t, ckpt_dyn_summary *out)
{
    memset(out, 0, sizeof *out);
    for (int32_t r = 0; r < ck->world; r++) {
        ckpt_dyn_part p;
        int st = ckpt_dyn_read(ck, t, r, &p);
        if (st != EMBER_OK)
            return st;
        int64_t n = 0;
        for (int64_t s = 0; s < ck->tables[t].capacity; s++)
            n += ckpt_get_u32(p.slots + CKPT_KEYS_SLOT * s + 12) != 0;
        out->resident += n;
        if (n > out->most_on_a_rank)
            out->most_on_a_rank = n;
        out->admitted += p.counters[0];
        out->evicted += p.counters[1];
        out->expired += p.counters[2];
        out->evicted_count_sum += p.counters[3];
        out->not_admitted += p.counters[4];
    }
    return EMBER_OK;
}
