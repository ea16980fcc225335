/*
 * export.c: ember_export, one table of a checkpoint as (key, row) pairs for
 * serving (docs/checkpoint-format.md, "Exported rows").
 *
 * A fixed table exports every row with its row number as the key; a
 * dynamic table the keys that hold a row, from every saving rank's keys
 * section.  Records are sorted by key, so a server can binary-search the
 * file in place.  Written to path.tmp, fsynced, renamed: a failed export
 * leaves no file, and an older file at path stays until the new one is
 * complete.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "ckpt/ckpt_impl.h"
#include "data/data_error.h"

#define EXPORT_MAGIC 0x53574F5252424D45ull /* "EMBRROWS" little-endian */
#define EXPORT_VERSION 1
#define EXPORT_HEADER 64

typedef struct pair {
    uint64_t key;
    int64_t row; /* canonical row of the checkpoint table */
} pair;

static int cmp_pair(const void *a, const void *b)
{
    int64_t x = (int64_t)((const pair *)a)->key, y = (int64_t)((const pair *)b)->key;
    return (x > y) - (x < y);
}

/* The (key, row) pairs of table t, sorted by key (signed). */
static pair *pairs_of(const ember_checkpoint *ck, int32_t t, int64_t *n)
{
    const ckpt_table_info *ti = &ck->tables[t];
    *n = 0;
    if (ti->kind != EMBER_TABLE_DYNAMIC) {
        pair *p = malloc(sizeof *p * (size_t)(ti->rows + 1));
        for (int64_t r = 0; p && r < ti->rows; r++)
            p[r] = (pair){(uint64_t)r, r};
        *n = p ? ti->rows : 0;
        return p;
    }
    ckpt_dyn_summary ds;
    ckpt_dyn_summarize(ck, t, &ds);
    pair *p = malloc(sizeof *p * (size_t)(ds.resident + 1));
    if (!p)
        return NULL;
    for (int32_t r = 0; r < ck->world; r++) {
        ckpt_dyn_part part;
        ckpt_dyn_read(ck, t, r, &part);
        for (int64_t s = 0; s < ti->capacity; s++) {
            const uint8_t *q = part.slots + CKPT_KEYS_SLOT * s;
            if (ckpt_get_u32(q + 12))
                p[(*n)++] = (pair){ckpt_get_u64(q), s * ck->world + r};
        }
    }
    qsort(p, (size_t)*n, sizeof *p, cmp_pair);
    return p;
}

static int export_table(const ember_checkpoint *ck, const char *table, const char *path)
{
    ember_data_clear_error();
    if (!ck || !table || !path || !*path) {
        ember_data_set_error("ember_export: checkpoint, table or path is NULL or empty");
        return EMBER_EINVAL;
    }
    int32_t t = -1;
    for (int32_t i = 0; i < ck->num_tables && t < 0; i++)
        if (!strcmp(ck->tables[i].name, table))
            t = i;
    if (t < 0) {
        ember_data_set_error("%s: no table \"%s\"", ck->path, table);
        return EMBER_EINVAL;
    }
    const ckpt_table_info *ti = &ck->tables[t];
    int64_t n = 0;
    pair *p = pairs_of(ck, t, &n);
    float *row = malloc(sizeof(float) * (size_t)ti->dim);
    uint8_t *rec = malloc(8 + 4 * (size_t)ti->dim);
    if (!p || !row || !rec) {
        free(p), free(row), free(rec);
        ember_data_set_error("%s: out of memory exporting table \"%s\"", ck->path, table);
        return EMBER_ENOMEM;
    }
    char why[700] = "";
    safe_out out;
    FILE *f = safe_out_open_path(&out, path, 0, why, sizeof why) == EMBER_OK ? safe_out_stdio(&out) : NULL;
    int err = f ? 0 : -1;
    XXH3_state_t *h = XXH3_createState();
    XXH3_64bits_reset(h);
    uint8_t head[EXPORT_HEADER] = {0};
    ckpt_put_u64(head, EXPORT_MAGIC);
    ckpt_put_u32(head + 8, EXPORT_VERSION);
    ckpt_put_u32(head + 12, (uint32_t)ti->dim);
    ckpt_put_u64(head + 16, (uint64_t)n);
    ckpt_put_u32(head + 24, ti->kind == EMBER_TABLE_DYNAMIC);
    ckpt_put_u64(head + 32, (uint64_t)ckpt_optimizer_steps(ck));
    ckpt_put_u64(head + 40, XXH64(table, strlen(table), 0));
    if (!err)
        fwrite(head, 1, sizeof head, f);
    XXH3_64bits_update(h, head, sizeof head);
    for (int64_t i = 0; i < n && !err && !ferror(f); i++) {
        ckpt_read_rows(ck, t, p[i].row, 1, row, NULL);
        ckpt_put_u64(rec, p[i].key);
        memcpy(rec + 8, row, 4 * (size_t)ti->dim); /* little-endian hosts only (as checkpoints) */
        size_t len = 8 + 4 * (size_t)ti->dim;
        fwrite(rec, 1, len, f);
        XXH3_64bits_update(h, rec, len);
    }
    uint8_t tail[8];
    ckpt_put_u64(tail, XXH3_64bits_digest(h));
    if (!err)
        fwrite(tail, 1, 8, f);
    if (!err && safe_out_commit(&out, why, sizeof why) != EMBER_OK) /* checks every write, names the reason */
        err = -1;
    if (err) {
        safe_out_abort(&out);
        ember_data_set_error("%s", why[0] ? why : "out of memory");
    }
    XXH3_freeState(h);
    free(p), free(row), free(rec);
    return err ? EMBER_EIO : EMBER_OK;
}

int ember_export(const ember_checkpoint *ck, const char *table, const char *path)
{
    return ckpt_keep(ck, export_table(ck, table, path));
}
