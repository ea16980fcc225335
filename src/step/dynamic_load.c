/*
 * dynamic_load.c: a dynamic table filled with given (key, row) pairs
 * (dynamic_load.h), as a predictor takes a bundle's dynamic table.
 *
 * Each rank keeps the keys it owns (mix64(key) mod W, as a step routes
 * them) in slots 0, 1, ... in the order given, which is how ember_load
 * places the keys of a checkpoint it reshards, so a bundle and a checkpoint
 * give a key the same slot.  Rows arrive encoded as a bundle holds them: a
 * table of that encoding (store_quant.c) takes the bytes as they are, so
 * an int8 table never passes through fp32; an fp32 table takes them
 * decoded, with zero optimizer state.
 */
#include <stdlib.h>
#include <string.h>

#include "dyn/dyn.h"
#include "quant/quant.h"
#include "step/dynamic_load.h"

/* Physical table of dynamic table t, or NULL with a message on c. */
static ember_ptable *dyn_ptable(ember_collection *c, int32_t t)
{
    if (t < 0 || t >= c->cfg.num_tables) {
        ember_fail(c, EMBER_EINVAL, "table %d outside [0, %d)", t, c->cfg.num_tables);
        return NULL;
    }
    ember_ptable *pt = &c->ptables[c->tables[t].ptable];
    if (!pt->dyn)
        ember_fail(c, EMBER_EINVAL, "table '%s' is not dynamic", c->tables[t].cfg.name);
    return pt;
}

int ember_dyn_load_begin(ember_collection *c, int32_t t)
{
    ember_ptable *pt = dyn_ptable(c, t);
    if (!pt || !pt->dyn)
        return EMBER_EINVAL;
    ember_dyn_clear(&pt->dyn->d);
    return EMBER_OK;
}

/* Row `slot` of the store takes the encoded row: its bytes (a memory store
 * of that encoding), or decoded (an SSD store's slots are not rows). */
static int put_row(ember_collection *c, const ember_ptable *pt, uint32_t slot, const uint8_t *row, int encoding)
{
    ember_store *s = pt->store;
    if (s->encoding && !s->staged) {
        memcpy(s->qrows + (int64_t)slot * s->qrow_bytes, row, (size_t)s->qrow_bytes);
        return EMBER_OK;
    }
    float *v, *st;
    int rc = s->ops->acquire(s, &slot, 1, &v, &st);
    if (rc != EMBER_OK)
        return ember_fail(c, rc, "table '%s': %s", c->tables[pt->tables[0]].cfg.name, s->errmsg);
    ember_dequant_row((ember_encoding)encoding, s->dim, row, v);
    if (st && s->state_floats)
        memset(st, 0, sizeof(float) * (size_t)s->state_floats);
    rc = s->ops->release(s, &slot, 1, 1);
    return rc == EMBER_OK ? EMBER_OK
                          : ember_fail(c, rc, "table '%s': %s", c->tables[pt->tables[0]].cfg.name, s->errmsg);
}

int ember_dyn_load_rows(ember_collection *c, int32_t t, const int64_t *keys, int64_t n, const uint8_t *rows,
                        int encoding, int64_t row_bytes)
{
    ember_ptable *pt = dyn_ptable(c, t);
    if (!pt || !pt->dyn)
        return EMBER_EINVAL;
    const char *name = c->tables[t].cfg.name;
    ember_store *s = pt->store;
    const char *given = ember_encoding_name((ember_encoding)encoding);
    if (!given || ember_quant_row_bytes((ember_encoding)encoding, s->dim) != row_bytes ||
        (s->encoding && s->encoding != encoding))
        return ember_fail(c, EMBER_EINVAL, "table '%s': rows of %lld bytes as %s, the table holds %s rows of dim %d",
                          name, (long long)row_bytes, given ? given : "an unknown encoding",
                          s->encoding ? ember_encoding_name((ember_encoding)s->encoding) : "fp32", (int)s->dim);
    ember_dyn *d = &pt->dyn->d;
    int32_t W = c->world->size, rank = c->world->rank;
    for (int64_t i = 0; i < n; i++) {
        if ((int32_t)ember_dyn_owner(keys[i], W) != rank)
            continue;
        if (d->resident >= d->p.capacity)
            return ember_fail(c, EMBER_ELIMIT, "table '%s': rank %d owns more than its capacity of %lld keys "
                              "(key %lld)", name, (int)rank, (long long)d->p.capacity, (long long)keys[i]);
        if (ember_keymap_find(&d->map, (uint64_t)keys[i]) != EMBER_KEYMAP_NONE)
            return ember_fail(c, EMBER_EINVAL, "table '%s': key %lld given twice", name, (long long)keys[i]);
        uint32_t slot = (uint32_t)d->resident;
        ember_dyn_put(d, slot, (uint64_t)keys[i], 0, 1);
        int st = put_row(c, pt, slot, rows + i * row_bytes, encoding);
        if (st != EMBER_OK)
            return st;
    }
    return EMBER_OK;
}

void ember_dyn_load_end(ember_collection *c, int32_t t)
{
    ember_ptable *pt = dyn_ptable(c, t);
    if (pt && pt->dyn)
        ember_dyn_loaded(&pt->dyn->d);
}
