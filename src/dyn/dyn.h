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
 * contents are the same for any thread count.
 */
#ifndef EMBER_DYN_DYN_H
#define EMBER_DYN_DYN_H

#include <stddef.h>
#include <stdint.h>

#include "dyn/keymap.h"
#include "ember.h"

#define EMBER_DYN_NONE UINT32_MAX /* a key with no row (not admitted) */

typedef struct ember_dyn_params {
    int64_t capacity;          /* slots on this rank, >= 1                    */
    int32_t admit_after;       /* >= 1                                        */
    ember_evict_policy evict;
    int32_t ttl_steps;         /* TTL: >= 1                                   */
    int64_t sketch_width;      /* counters per sketch row (power of two); 0
                                  when admit_after == 1                      */
    uint64_t seed;             /* the table's rng key: map and sketch hashes  */
} ember_dyn_params;

typedef struct ember_dyn_meta {
    uint32_t last_step;        /* step of the last use (0: admitted, unused)  */
    uint32_t count;            /* occurrences, saturating                     */
} ember_dyn_meta;

typedef struct ember_dyn_heap_entry { /* a candidate victim; lazy (see dyn_evict.c) */
    uint64_t score;
    uint32_t slot;
    uint32_t gen;              /* the slot's generation when pushed           */
} ember_dyn_heap_entry;

typedef struct ember_dyn_age_entry { /* a row used at a step (LRU, TTL: dyn_age.c) */
    uint32_t slot;
    uint32_t step;
} ember_dyn_age_entry;

/* One change resolve made, undone in reverse by rollback. */
enum { EMBER_DYN_UNDO_FREE = 1, /* a resident slot was freed (evicted, expired) */
       EMBER_DYN_UNDO_ADMIT = 2 /* a free slot took a new key                   */ };
typedef struct ember_dyn_undo {
    int kind;
    uint32_t slot;
    uint64_t key;
    ember_dyn_meta meta;
    uint32_t gen;
} ember_dyn_undo;

typedef struct ember_dyn_counters {
    int64_t admitted;          /* keys given a row                            */
    int64_t evicted;           /* rows freed to make room                     */
    int64_t expired;           /* rows freed by TTL or on demand              */
    int64_t evicted_count_sum; /* use counts of the rows freed (both kinds)   */
    int64_t not_admitted;      /* ids that read zeros                         */
} ember_dyn_counters;

typedef struct ember_dyn {
    ember_dyn_params p;
    ember_keymap map;
    uint64_t *slot_key;        /* [capacity] key of a resident slot           */
    ember_dyn_meta *meta;      /* [capacity]                                  */
    uint32_t *gen;             /* [capacity] admissions into the slot         */
    uint32_t *pin;             /* [capacity] resolve serial that used it      */
    uint64_t *free_bits;       /* [capacity / 64] 1 = free                     */
    int64_t free_count, free_hint, resident;
    ember_dyn_heap_entry *heap;  /* LFU: 4-ary min-heap of victims (dyn_evict.c) */
    void *heap_mem;              /* its allocation                               */
    int64_t heap_n, heap_cap;
    ember_dyn_age_entry *age;    /* LRU, TTL: the age queue (dyn_age.c)          */
    int64_t age_n, age_cap, age_head, age_cursor;
    uint32_t age_step;           /* step of the last entries appended            */
    uint64_t *used_bits;         /* [capacity / 64] slots the committing step used */
    uint16_t *sketch;          /* [4 * sketch_width]                          */
    uint32_t serial;           /* resolves so far                              */
    ember_dyn_counters total;  /* committed steps                              */
    ember_dyn_counters step;   /* the pending resolve                          */
    /* the pending resolve's undo log and outputs */
    ember_dyn_undo *undo;
    int64_t undo_n, undo_cap;
    uint64_t *sketch_old_idx;  /* sketch counters changed, and old values      */
    uint16_t *sketch_old_val;
    int64_t sketch_n, sketch_cap;
    uint32_t *reset_slot;      /* resets the caller must apply to its store:   */
    uint64_t *reset_key;       /* reset_slot[i] now holds reset_key[i]          */
    int64_t resets_n, resets_cap;
    uint64_t *gone;            /* keys freed by the admissions of this resolve, */
    int64_t gone_n, gone_cap;  /* erased from the map in one batch after them   */
    int defer_erase;           /* release_slot appends to gone, not erases      */
    uint64_t *evicted_keys;    /* keys freed by the last committed step (or
                                  on-demand eviction), with their use counts  */
    uint32_t *evicted_counts;
    int64_t evicted_n, evicted_cap;
    uint64_t *pend_keys;       /* the same for the pending resolve            */
    uint32_t *pend_counts;
    int64_t pend_n, pend_cap;
    /* scratch of one resolve */
    ember_keymap batch;        /* distinct missing keys -> index               */
    uint64_t *dkey;            /* [distinct misses] in first-occurrence order  */
    uint32_t *dcount, *dslot;
    int64_t d_cap;
    int64_t *miss;             /* positions of missing keys                    */
    int64_t miss_n, miss_cap;
    ember_dyn_heap_entry *aside; /* pinned heap entries popped by this resolve */
    int64_t aside_n, aside_cap;
    int pending;               /* resolve ran; commit or rollback next         */
} ember_dyn;

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

/* Frees every row unused for more than idle_steps at step `step` (on
 * demand); returns how many. */
int64_t ember_dyn_evict_idle(ember_dyn *d, uint32_t step, int64_t idle_steps);

/* Loading (checkpoints): clear makes every slot free, the sketch and the
 * counters zero; put makes a free slot hold key (count >= 1); loaded
 * rebuilds the victim heap. */
void ember_dyn_clear(ember_dyn *d);
void ember_dyn_put(ember_dyn *d, uint32_t slot, uint64_t key, uint32_t last_step, uint32_t count);
void ember_dyn_loaded(ember_dyn *d);

/* Internals shared by dyn.c, dyn_evict.c and dyn_age.c. */
static inline int ember_dyn_uses_heap(const ember_dyn *d) { return d->p.evict == EMBER_EVICT_LFU; }
static inline int ember_dyn_uses_age(const ember_dyn *d)
{
    return d->p.evict == EMBER_EVICT_LRU || d->p.evict == EMBER_EVICT_TTL;
}
int64_t ember_dyn_age_cap(int64_t capacity);
uint32_t ember_dyn_age_victim(ember_dyn *d);
/* The resident row with the least (last step, slot) that the running batch
 * does not use (the cursor moves onto it; not freed): TTL's next candidate. */
uint32_t ember_dyn_age_oldest_unpinned(ember_dyn *d);
void ember_dyn_age_rebuild(ember_dyn *d);
/* used = the set bits of used_bits (the slots the step used; cleared) */
void ember_dyn_age_commit(ember_dyn *d, uint32_t step, int64_t used);
void ember_dyn_age_rollback(ember_dyn *d);
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

#endif
