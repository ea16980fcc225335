/*
 * write.c: one rank's data file of a checkpoint, written in one pass.
 *
 * Every size is known before the first byte (ckpt_layout), so the header
 * goes first and the whole-file and per-section XXH3-64 checksums are
 * computed while streaming: rows are fetched from the store in batches
 * (acquire/release, read only), packed in the saved layout (ckpt_impl.h:
 * the held rows in ascending order; under COLUMN the slice's real columns,
 * Adam's m slice then v slice) into a staging buffer, hashed and written
 * through a 4 MB buffer into an output of core/safe_file.h (unnamed until
 * complete, fsynced, named, the folder fsynced).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "ckpt/ckpt_impl.h"
#include "collection/collection.h"
#include "collection/shard.h"

#define MSG CKPT_MSG
#define BATCH_ROWS 1024
#define fmt ckpt_fmt

typedef struct writer {
    int fd;
    XXH3_state_t *file, *sec;
    uint8_t *buf;
    int64_t fill, cap, at;
    int err;
    char store_msg[400]; /* a store that could not give its rows (SSD tier) */
} writer;

static void flush(writer *w)
{
    int64_t off = 0;
    while (off < w->fill && !w->err) {
        ssize_t n = write(w->fd, w->buf + off, (size_t)(w->fill - off));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            w->err = n < 0 ? errno : EIO;
        else
            off += n;
    }
    w->fill = 0;
}

static void put(writer *w, const void *data, int64_t n, int hash)
{
    if (hash) {
        XXH3_64bits_update(w->file, data, (size_t)n);
        if (hash > 1)
            XXH3_64bits_update(w->sec, data, (size_t)n);
    }
    w->at += n;
    const uint8_t *p = data;
    while (n > 0) {
        int64_t k = w->cap - w->fill < n ? w->cap - w->fill : n;
        memcpy(w->buf + w->fill, p, (size_t)k);
        w->fill += k;
        p += k;
        n -= k;
        if (w->fill == w->cap)
            flush(w);
    }
}

static void pad_to(writer *w, int64_t at)
{
    static const uint8_t zero[CKPT_ALIGN];
    if (at > w->at)
        put(w, zero, at - w->at, 1);
}

/* Physical rows of table lt held by `rank`, ascending: the first and the
 * stride (0 when it holds none). */
static int64_t first_held(const ember_ptable *pt, const ember_ltable *lt, int32_t W, int32_t rank,
                          int64_t *stride)
{
    *stride = 1;
    switch (pt->placement) {
    case EMBER_PLACE_ROW:
        *stride = W;
        return lt->offset + ((rank - lt->offset % W) % W + W) % W;
    case EMBER_PLACE_TABLE: return rank == pt->owner ? lt->offset : INT64_MAX;
    case EMBER_PLACE_REPLICATED: return rank == 0 ? lt->offset : INT64_MAX;
    default: return lt->offset;
    }
}

/* Writes the held rows of logical table t: values (state 0) or state. */
/* A dynamic table's keys section: counters, then per slot (key, last
 * step, count; count 0 = free), then the sketch, all little-endian. */
static void put_keys(writer *w, const ember_dyn *d)
{
    uint8_t buf[CKPT_KEYS_SLOT * 256];
    int64_t head[8] = {d->total.admitted, d->total.evicted, d->total.expired, d->total.evicted_count_sum,
                       d->total.not_admitted, 0, 0, 0};
    for (int i = 0; i < 8; i++)
        ckpt_put_u64(buf + 8 * i, (uint64_t)head[i]);
    put(w, buf, CKPT_KEYS_HEAD, 2);
    for (int64_t s0 = 0; s0 < d->p.capacity; s0 += 256) {
        int64_t n = d->p.capacity - s0 < 256 ? d->p.capacity - s0 : 256;
        for (int64_t i = 0; i < n; i++) {
            int64_t s = s0 + i;
            int resident = !(d->free_bits[s >> 6] >> (s & 63) & 1);
            uint8_t *p = buf + CKPT_KEYS_SLOT * i;
            ckpt_put_u64(p, resident ? d->slot_key[s] : 0);
            ckpt_put_u32(p + 8, resident ? d->meta[s].last_step : 0);
            ckpt_put_u32(p + 12, resident ? d->meta[s].count : 0);
        }
        put(w, buf, CKPT_KEYS_SLOT * n, 2);
    }
    for (int64_t i0 = 0; i0 < 4 * d->p.sketch_width; i0 += 1024) {
        int64_t n = 4 * d->p.sketch_width - i0 < 1024 ? 4 * d->p.sketch_width - i0 : 1024;
        for (int64_t i = 0; i < n; i++) {
            buf[2 * i] = (uint8_t)d->sketch[i0 + i];
            buf[2 * i + 1] = (uint8_t)(d->sketch[i0 + i] >> 8);
        }
        put(w, buf, 2 * n, 2);
    }
}

static void put_rows(writer *w, ember_collection *c, const ckpt_table_info *info, int32_t t, int state,
                     float *stage, float **vp, float **sp, uint32_t *ids)
{
    const ember_ltable *lt = &c->tables[t];
    const ember_ptable *pt = &c->ptables[lt->ptable];
    int32_t W = c->world->size, rank = c->world->rank;
    int32_t width = state ? ckpt_state_width(info, rank) : ckpt_value_width(info, rank);
    int32_t slice = ckpt_value_width(info, rank), c0 = pt->local_dim;
    int64_t stride, end = lt->offset + lt->cfg.rows;
    int64_t phys = first_held(pt, lt, W, rank, &stride);
    if (width == 0)
        return;
    while (phys < end && !w->store_msg[0]) {
        int64_t n = 0;
        for (; phys < end && n < BATCH_ROWS; phys += stride)
            ids[n++] = ember_shard_local(pt, W, (uint32_t)phys);
        if (pt->store->ops->acquire(pt->store, ids, n, vp, sp) != EMBER_OK) {
            fmt(w->store_msg, sizeof w->store_msg, "%s", pt->store->errmsg);
            w->err = EIO;
            return;
        }
        for (int64_t i = 0; i < n; i++) {
            float *o = stage + i * width;
            if (!state) {
                memcpy(o, vp[i], sizeof(float) * (size_t)width);
            } else if (pt->placement == EMBER_PLACE_COLUMN) { /* each vector's slice, the row floats */
                int32_t nv = ember_state_vectors(info->opt.kind);
                for (int32_t j = 0; j < nv; j++)
                    memcpy(o + j * slice, sp[i] + j * c0, sizeof(float) * (size_t)slice);
                memcpy(o + nv * slice, sp[i] + nv * c0, sizeof(float) * (size_t)(width - nv * slice));
            } else {
                memcpy(o, sp[i], sizeof(float) * (size_t)width);
            }
        }
        pt->store->ops->release(pt->store, ids, n, 0);
        put(w, stage, n * width * (int64_t)sizeof(float), 2);
    }
}

/* Writes this rank's data file into dir; fills f's checksums. */
int ckpt_write_rank_file(ember_collection *c, const ember_checkpoint *ck, ckpt_file *f, const safe_dir *dir,
                         const ember_save_options *opt, char *msg)
{
    int32_t rank = c->world->rank;
    char dst[4400];
    safe_path(dir, f->name, dst, sizeof dst);
    safe_out out;
    int64_t table_at = ckpt_layout(f);
    int32_t maxw = 1;
    for (int32_t t = 0; t < ck->num_tables; t++)
        if (2 * ck->tables[t].dim > maxw)
            maxw = 2 * ck->tables[t].dim;
    writer w = {-1, XXH3_createState(), XXH3_createState(), malloc(1 << 22), 0, 1 << 22, 0, 0, ""};
    float *stage = malloc(sizeof(float) * (size_t)maxw * BATCH_ROWS);
    float **vp = malloc(sizeof(float *) * 2 * BATCH_ROWS);
    uint32_t *ids = malloc(sizeof(uint32_t) * BATCH_ROWS);
    int st = EMBER_OK;
    if (!w.file || !w.sec || !w.buf || !stage || !vp || !ids) {
        fmt(msg, MSG, "out of memory writing %s", dst);
        st = EMBER_ENOMEM;
        goto done;
    }
    if ((st = safe_out_open(&out, dir, f->name, 0, msg, MSG)) != EMBER_OK)
        goto done;
    w.fd = out.fd;
    XXH3_64bits_reset(w.file);
    uint8_t head[CKPT_HEADER_BYTES];
    ckpt_header_encode(head, rank, ck->world, ck->step, (uint32_t)f->num_sections, table_at, f->bytes);
    put(&w, head, CKPT_HEADER_BYTES, 1);
    for (int32_t i = 0; i < f->num_sections; i++) {
        ckpt_section *s = &f->sections[i];
        pad_to(&w, s->offset);
        XXH3_64bits_reset(w.sec);
        if (s->what == CKPT_VALUES || s->what == CKPT_STATE)
            put_rows(&w, c, &ck->tables[s->index], (int32_t)s->index, s->what == CKPT_STATE, stage, vp,
                     vp + BATCH_ROWS, ids);
        else if (s->what == CKPT_KEYS)
            put_keys(&w, &c->ptables[c->tables[s->index].ptable].dyn->d);
        else
            put(&w, s->what == CKPT_BLOB ? opt->blobs[s->index].data : opt->rank_blobs[s->index].data,
                s->bytes, 2);
        s->checksum = XXH3_64bits_digest(w.sec);
        EMBER_ASSERT(w.at == s->offset + s->bytes);
    }
    pad_to(&w, table_at);
    for (int32_t i = 0; i < f->num_sections; i++) {
        uint8_t e[CKPT_ENTRY_BYTES];
        const ckpt_section *s = &f->sections[i];
        ckpt_put_u32(e, s->what);
        ckpt_put_u32(e + 4, s->index);
        ckpt_put_u64(e + 8, (uint64_t)s->offset);
        ckpt_put_u64(e + 16, (uint64_t)s->bytes);
        ckpt_put_u64(e + 24, s->checksum);
        put(&w, e, CKPT_ENTRY_BYTES, 1);
    }
    uint8_t tail[CKPT_TRAILER_BYTES];
    ckpt_put_u64(tail, CKPT_END_MAGIC);
    put(&w, tail, 8, 1);
    f->checksum = XXH3_64bits_digest(w.file);
    ckpt_put_u64(tail + 8, f->checksum);
    put(&w, tail + 8, 8, 0);
    flush(&w);
    w.fd = -1; /* the output's own from here */
    if (w.err != 0) {
        if (w.store_msg[0])
            fmt(msg, MSG, "%s", w.store_msg);
        else
            fmt(msg, MSG, "cannot write %s: %s", dst, strerror(w.err));
        safe_out_abort(&out);
        st = EMBER_EIO;
    } else {
        st = safe_out_commit(&out, msg, MSG);
    }
done:
    XXH3_freeState(w.file);
    XXH3_freeState(w.sec);
    free(w.buf);
    free(stage);
    free(vp);
    free(ids);
    return st;
}

