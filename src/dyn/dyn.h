/*
 * dyn.h: the owner side of a dynamic table (docs/dynamic.md): which 64-bit
 * keys hold a row on this rank, in which slot, and the admission and
 * eviction rules that decide it.
 *
 * A dynamic table is an ordinary ROW table of capacity x W physical rows;
 * this module only maps keys to slots (local rows) before routing, so no
 * kernel, exchange or tier changes.  One step:
 *
 *   resolve(keys in the global batch order)
 *     find every key in the map (parallel, batched)          -> hits, pinned
 *     TTL: free the unpinned rows whose last use s has step - s > ttl_steps
 *     misses, distinct, in order of first occurrence (serial):
 *       sketch count + occurrences in this batch >= admit_after ?
 *         take the lowest free slot, or evict the policy's victim among the
 *         rows this batch does not use; the slot must be reset by the caller
 *         (row from the initializer keyed by the new key, state zero)
 *       else: not admitted (reads zeros, no update)
 *   commit (the step succeeded): last step and use count of every row used
 *   rollback (the step failed): the map, slots, metadata and sketch as they
 *     were before resolve (the caller restores the reset rows)
 *
 * Every decision is serial in batch order or a pure function of it, so the
 * contents are the same for any thread count.  The index's state is
 * dyn_state.h's; free slots and victims are dyn_evict.c's, the age queue
 * dyn_age.c's.
 */
#ifndef EMBER_DYN_DYN_H
#define EMBER_DYN_DYN_H

#include <stddef.h>
#include <stdint.h>

#include "dyn/dyn_state.h"
#include "ember.h"

/* The owner of a key in a world of W: mix64(key) mod W (splitmix64's
 * finaliser: raw ids are often multiples of W). */
uint32_t ember_dyn_owner(int64_t key, int32_t world);

/* Bytes of the map, metadata, free bitmap and victim heap for `capacity`
 * slots (not rows, state or sketch). */
int64_t ember_dyn_index_bytes(int64_t capacity, ember_evict_policy evict);
/* Bytes of the admission sketch of width w. */
static inline int64_t ember_dyn_sketch_bytes(int64_t width) { return 4 * width * (int64_t)sizeof(uint16_t); }

int ember_dyn_init(ember_dyn *d, const ember_dyn_params *p);
void ember_dyn_free(ember_dyn *d);
/* DRAM of the map, metadata, heap and sketch. */
int64_t ember_dyn_bytes(const ember_dyn *d);

/*
 * Resolves n keys (the global batch order) for step `step` (>= 1; the
 * collection's completed backwards + 1).  slots[i] = the key's slot, or
 * EMBER_DYN_NONE.  training = 0 (evaluation, serving): finds only; nothing
 * changes and commit/rollback are not needed.  training = 1: admits and
 * evicts as the header says; d->resets lists the slots the caller must
 * reset before reading them.  Errors: EMBER_ELIMIT when the batch needs more
 * new rows than free and evictable slots (eviction NONE: free slots only),
 * with the message in err; EMBER_ENOMEM.  On error nothing has changed.
 */
int ember_dyn_resolve(ember_dyn *d, const uint64_t *keys, int64_t n, uint32_t step, int training,
                      int threads, uint32_t *slots, char *err, size_t errlen);
/* Find only: slots[i] = the slot of keys[i], or EMBER_DYN_NONE.  Nothing
 * changes (no admission, count, pin or last use): what lookahead
 * announcements read, between steps. */
void ember_dyn_find(const ember_dyn *d, const uint64_t *keys, int64_t n, int threads, uint32_t *slots);
/* The step succeeded: every used slot's last step = step, count += its
 * occurrences in slots[0..n) (the array resolve wrote). */
void ember_dyn_commit(ember_dyn *d, const uint32_t *slots, int64_t n, uint32_t step, int threads);
/* The step failed: undoes the pending resolve. */
void ember_dyn_rollback(ember_dyn *d);

/* Loading (checkpoints): clear makes every slot free, the sketch and the
 * counters zero; put makes a free slot hold key (count >= 1); loaded
 * rebuilds the victim heap. */
void ember_dyn_clear(ember_dyn *d);
void ember_dyn_put(ember_dyn *d, uint32_t slot, uint64_t key, uint32_t last_step, uint32_t count);
void ember_dyn_loaded(ember_dyn *d);

#endif
