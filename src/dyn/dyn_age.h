/*
 * dyn_age.h: the age queue of LRU and TTL tables (dyn_age.c).
 */
#ifndef EMBER_DYN_DYN_AGE_H
#define EMBER_DYN_DYN_AGE_H

#include <stdint.h>

#include "dyn/dyn_state.h"

/* Entries of the queue for `capacity` slots. */
int64_t ember_dyn_age_cap(int64_t capacity);
uint32_t ember_dyn_age_victim(ember_dyn *d);
/* The resident row with the least (last step, slot) that the running batch
 * does not use (the cursor moves onto it; not freed): TTL's next candidate. */
uint32_t ember_dyn_age_oldest_unpinned(ember_dyn *d);
void ember_dyn_age_rebuild(ember_dyn *d);
/* used = the set bits of used_bits (the slots the step used; cleared) */
void ember_dyn_age_commit(ember_dyn *d, uint32_t step, int64_t used);
void ember_dyn_age_rollback(ember_dyn *d);

#endif
