/*
 * dyn_state.h: the state of a dynamic table's key index (dyn.h): the key
 * map, the slots' metadata, the free bitmap, the victims (an LFU heap or an
 * age queue), the admission sketch, and a resolve's undo log and outputs.
 * Shared by dyn.c (resolve, commit, rollback, sketch), dyn_evict.c (free
 * slots, victims) and dyn_age.c (the age queue).
 */
#ifndef EMBER_DYN_DYN_STATE_H
#define EMBER_DYN_DYN_STATE_H

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

/* Which victim structure the table's eviction policy keeps. */
static inline int ember_dyn_uses_heap(const ember_dyn *d) { return d->p.evict == EMBER_EVICT_LFU; }
static inline int ember_dyn_uses_age(const ember_dyn *d)
{
    return d->p.evict == EMBER_EVICT_LRU || d->p.evict == EMBER_EVICT_TTL;
}

#endif
