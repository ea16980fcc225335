/*
 * dynamic.c: the key indexes of a new collection's dynamic tables (dyn/dyn.h),
 * one per dynamic physical table, sized by its config (collection/config.h),
 * and the step's buffers they and their resolves leave behind at destroy.
 */
#include <stdlib.h>

#include "assemble/assemble.h"
#include "collection/config.h"
#include "dyn/dyn.h"

int ember_dyn_tables_create(ember_collection *c)
{
    for (int32_t p = 0; p < c->num_ptables; p++) {
        ember_ptable *pt = &c->ptables[p];
        const ember_ltable *t = &c->tables[pt->tables[0]];
        if (t->cfg.kind != EMBER_TABLE_DYNAMIC)
            continue;
        pt->dyn = calloc(1, sizeof *pt->dyn);
        if (!pt->dyn)
            return ember_fail_create(EMBER_ENOMEM, "out of memory");
        ember_dyn_params dp = {t->cfg.capacity, t->cfg.admit_after, t->cfg.evict, t->cfg.ttl_steps,
                               ember_dyn_sketch_width(&t->cfg), t->rng_key};
        if (ember_dyn_init(&pt->dyn->d, &dp) != EMBER_OK)
            return ember_fail_create(EMBER_ENOMEM, "table '%s': out of memory for the key index of %lld rows",
                                     t->cfg.name, (long long)t->cfg.capacity);
        c->num_dynamic++;
    }
    return EMBER_OK;
}

void ember_dyn_tables_destroy(ember_collection *c)
{
    for (int32_t p = 0; p < c->num_ptables; p++) {
        ember_dyn_table *dt = c->ptables[p].dyn;
        if (!dt)
            continue;
        ember_dyn_free(&dt->d);
        free(dt->slots);
        free(dt->undo_rows);
        free(dt->keys);
        free(dt->pos);
        free(dt->recv);
        free(dt->cnt);
        free(dt);
    }
    free(c->dyn_ids);
    free(c->dyn_slots);
}
