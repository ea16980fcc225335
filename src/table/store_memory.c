/*
 * store_memory.c: the memory tier: a physical table's values and optimizer
 * state in anonymous mappings that ask for transparent huge pages
 * (core/huge.h).
 */
#include <stdlib.h>

#include "core/huge.h"
#include "ember.h"
#include "table/store.h"

static int memory_acquire(ember_store *s, const uint32_t *rows, int64_t n, float **values,
                          float **state)
{
    for (int64_t i = 0; i < n; i++) {
        values[i] = s->values + (int64_t)rows[i] * s->dim;
        if (state)
            state[i] = s->state ? s->state + (int64_t)rows[i] * s->state_floats : NULL;
    }
    return EMBER_OK;
}

static int memory_release(ember_store *s, const uint32_t *rows, int64_t n, int dirty)
{
    (void)s, (void)rows, (void)n, (void)dirty;
    return EMBER_OK;
}

static void memory_destroy(ember_store *s)
{
    ember_huge_free(s->values, s->value_bytes);
    ember_huge_free(s->state, s->state_bytes);
    free(s);
}

static const ember_store_ops MEMORY_OPS = {memory_acquire, memory_release, memory_destroy,
                                           NULL, NULL, NULL, NULL, NULL};

int ember_store_memory_create(int64_t rows, int32_t dim, int32_t state_floats, ember_store **out)
{
    *out = NULL;
    ember_store *s = calloc(1, sizeof *s);
    if (!s)
        return EMBER_ENOMEM;
    s->ops = &MEMORY_OPS;
    s->rows = rows;
    s->dim = dim;
    s->state_floats = state_floats;
    s->value_bytes = rows * dim * (int64_t)sizeof(float);
    s->state_bytes = rows * state_floats * (int64_t)sizeof(float);
    s->values = ember_huge_alloc(s->value_bytes);
    if (!s->values && s->value_bytes > 0) /* a rank may hold no rows of a table */
        goto fail;
    if (s->state_bytes) {
        s->state = ember_huge_alloc(s->state_bytes); /* anonymous pages read as zero */
        if (!s->state)
            goto fail;
    }
    *out = s;
    return EMBER_OK;
fail:
    memory_destroy(s);
    return EMBER_ENOMEM;
}
