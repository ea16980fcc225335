/*
 * dyn_evict.h: free slots and victims of a dynamic table (dyn_evict.c): a
 * new row's slot, the LFU heap, the undo log, freeing rows (evicted,
 * expired, on demand).
 */
#ifndef EMBER_DYN_DYN_EVICT_H
#define EMBER_DYN_DYN_EVICT_H

#include <stdint.h>

#include "dyn/dyn_state.h"

/* A slot for a new key: the lowest free one; when none is free, the
 * policy's victim among the rows the batch does not use is freed first
 * (*evicted = 1).  EMBER_ELIMIT when no victim is left, EMBER_ENOMEM. */
int ember_dyn_take_slot(ember_dyn *d, uint32_t *slot, int *evicted);
void ember_dyn_heap_push(ember_dyn *d, uint32_t slot);
int ember_dyn_heap_rebuild(ember_dyn *d);
void ember_dyn_victims_rebuild(ember_dyn *d); /* heap or age queue, from the metadata */
void ember_dyn_unpin_aside(ember_dyn *d);
void ember_dyn_release_slot(ember_dyn *d, uint32_t slot, int expired);
int ember_dyn_log(ember_dyn *d, int kind, uint32_t slot);
uint64_t ember_dyn_score(const ember_dyn *d, uint32_t slot);
void ember_dyn_expire(ember_dyn *d, uint32_t step);
int ember_dyn_note_evicted(ember_dyn *d, uint64_t key, uint32_t count);

/* Frees every row unused for more than idle_steps at step `step` (on
 * demand); returns how many. */
int64_t ember_dyn_evict_idle(ember_dyn *d, uint32_t step, int64_t idle_steps);

#endif
