/*
 * ssd_impl.h: the private shape of the SSD tier's store: the store file, the
 * slot cache in front of it, and the eviction policies' bookkeeping.  Shared
 * by ssd.c (create, destroy), ssd_stage.c (the step), ssd_rows.c (row
 * access, flush), ssd_half.c, ssd_cache.c (row -> slot map, policy lists and
 * heap) and ssd_window.c (lookahead's window).
 *
 * A cached row lives in a slot: values at vslot + slot * vrow bytes (store.h's
 * values, or qrows for half rows), state at sslot + slot * srow (state, or
 * qstate for half state), its row in slot_row[slot].  Every resident slot
 * that is not pinned by the current step and not being loaded sits in
 * exactly one policy structure:
 *   LRU        list 0, least recent at the head
 *   LFU        the cold levels: a list per use count (steps used since it
 *              was loaded; counts from 65,535 on share the last level),
 *              each in order of last use
 *   LOOKAHEAD  the cold levels ("cold": no announced batch uses it, least
 *              used first, as LFU), or list 1 + (s % 64) for the announced
 *              batch s that uses it next
 * so a victim is found, and a slot placed or removed, in O(1).
 */
#ifndef EMBER_TIER_SSD_IMPL_H
#define EMBER_TIER_SSD_IMPL_H

#include <stdint.h>

#include "core/rng.h"
#include "ember.h"
#include "table/store.h"
#include "tier/io_pool.h"
#include "tier/ssd_log.h"
#include "tier/ssd.h"

#define SSD_NONE UINT32_MAX
#define SSD_WINDOW 64          /* announced batches tracked (lookahead <= 63) */
#define SSD_COLD_SEEN 65536    /* lookahead: rows evicted cold, remembered (a power of 2) */
#define SSD_LISTS (1 + SSD_WINDOW)
#define SSD_COLD SSD_LISTS     /* where[] of a slot in the cold levels      */
#define SSD_LEVELS (1 << 16)   /* cold levels at most (use counts 0 .. 65535+) */
#define SSD_AHEAD 16           /* rows ahead that a lookup loop asks the map for */
#define SSD_RUN_BYTES (64 << 10) /* most bytes one merged row-access read moves */

enum { F_PINNED = 1, F_DIRTY = 2, F_LOADING = 4, F_PREFETCHED = 8 /* read ahead, not yet used */,
       F_MISSED = 16 /* pinned by this step after a demand load */ };

typedef struct ssd_job {          /* one batch of slot loads                   */
    int64_t n;                    /* claimed slots                             */
    uint32_t *slot, *new_row, *old_row; /* old_row SSD_NONE: a free slot      */
    uint8_t *old_dirty;
    uint8_t *saved;               /* the dirty victim's record went to the log */
    ember_io_req *req;            /* [n] the loads, in claim order             */
    int64_t nreq, caps[6];        /* of the arrays above, in order */
    int background;
} ssd_job;

typedef struct ssd_store {
    ember_store base;
    int fd;
    char path[4096];              /* for messages: dir/name                 */
    int dir_fd;                   /* the folder, opened once (safe_file.h)  */
    char name[300];               /* <table>.rank<R>.ember-store            */
    int own;                      /* the name is this store's: unlink it    */
    char label[160];
    int64_t rows;
    int32_t dim, sf;
    int venc, senc;               /* rows, state as halves (quant.h's enc)  */
    int64_t vrow, srow;           /* bytes of a row's values, state as held */
    char *vslot, *sslot;          /* the slots' values and state (base's
                                     values or qrows, state or qstate)      */
    int64_t rec_bytes;            /* one row's record: vrow + srow          */
    int direct;                   /* the file is open with O_DIRECT         */
    ssd_log log;                  /* the file's records and their index     */
    ember_row_init_fn init;
    void *init_ctx;
    ember_io_pool *io;

    /* the cache */
    int64_t cap, used;            /* slots; slots ever handed out           */
    uint32_t *slot_row;           /* [cap]                                  */
    uint8_t *flags;               /* [cap] F_*                              */
    uint64_t *map;                /* row << 32 | slot, open addressing      */
    int64_t map_size;             /* 2 x cap entries (load <= 1/2), exactly:
                                     what ember_ssd_slot_bytes counts      */
    int32_t *free_slots;          /* slots freed after a failed load        */
    int64_t nfree, resident;
    int32_t *pinned;              /* [cap] slots pinned by this step        */
    int64_t npinned;
    uint32_t step;

    /* policy */
    ember_cache_policy policy;
    int32_t *prev, *next;         /* [cap] list links                       */
    int8_t *where;                /* [cap] list index, SSD_COLD, or -1      */
    int32_t head[SSD_LISTS], tail[SSD_LISTS];
    uint32_t *freq, *last;        /* LFU: [cap] steps used, last step used  */
    int32_t *chead, *ctail;       /* LFU: [clevels] the cold levels' lists  */
    uint64_t *cbits;              /* LFU: levels that hold a row            */
    int64_t clevels, cmin;        /* levels allocated (grown with the steps,
                                     8 bytes each); no row below cmin      */
    int64_t ncold;                /* rows in the cold levels                */
    uint64_t *mask;               /* LOOKAHEAD: [cap] bit s % 64: batch s uses it */
    uint64_t *cold_seen;          /* LOOKAHEAD: [SSD_COLD_SEEN] step << 32 | row of
                                     sampled rows evicted cold (ssd_cache.c) */
    uint64_t cold_sample;         /* a row is sampled when its hash is below this:
                                     a share of rows whose evictions over 64 steps
                                     fit the table                          */
    int64_t sample_loads, sample_reloads; /* sampled rows' loads, and of them
                                     reloads of rows evicted cold within 64 steps */

    /* lookahead window: announced batches seq_cur .. seq_cur + wlen - 1 */
    int32_t K, wlen;
    int64_t seq_cur;
    int64_t step_now;             /* the step of the last begin             */
    uint32_t *wrows[SSD_WINDOW];  /* sorted distinct rows of each           */
    int64_t wn[SSD_WINDOW], wcap[SSD_WINDOW];
    uint32_t *wh_row;             /* row -> batches that use it (ssd_window.c) */
    uint64_t *wh_mask;
    int64_t wh_size, wh_n;

    uint32_t *look;               /* slots of a window batch's rows (SSD_NONE:
                                     not cached): announce, window_pop    */
    int64_t look_cap;             /* >= every announced batch's rows        */
    ssd_job job;                  /* the step's or the background's loads   */
    int64_t *miss;                /* stage scratch                          */
    uint32_t *miss_row;
    int64_t miss_cap, miss_row_cap;
    char *bulk;                   /* row access scratch: records            */
    int64_t bulk_cap;             /* bytes                                  */
    float *dec;                   /* half rows or state: the rows handed
                                     out, decoded (dim + sf floats each)    */
    int64_t dec_cap;
    int64_t *bulk_slot;           /* [n] slot, or -1: in bulk               */
    int64_t bulk_slot_cap;
    ember_io_req *bulk_req;
    int64_t bulk_req_cap;

    ember_tier_stats st;
} ssd_store;

/* ssd_cache.c: the row -> slot map (find: the slot, or -1 when row has none) */
int64_t ssd_map_find(const ssd_store *s, uint32_t row);
/* slots[i]: rows[i]'s slot, or SSD_NONE; the map's entries asked for ahead. */
void ssd_map_find_all(const ssd_store *s, const uint32_t *rows, int64_t n, uint32_t *slots);
void ssd_map_insert(ssd_store *s, uint32_t row, uint32_t slot);
void ssd_map_erase(ssd_store *s, uint32_t row);
/* A row's home entry: its Fibonacci hash scaled onto [0, map_size). */
static inline __attribute__((always_inline)) uint64_t ssd_map_home(const ssd_store *s, uint32_t row)
{
    return (uint64_t)(((unsigned __int128)((uint64_t)row * 0x9E3779B97F4A7C15ull) * (uint64_t)s->map_size) >> 64);
}
static inline __attribute__((always_inline)) void ssd_map_prefetch(const ssd_store *s, uint32_t row)
{
    __builtin_prefetch(&s->map[ssd_map_home(s, row)], 0, 1);
}

/* Asks for a slot's bookkeeping (flags, policy links and counts) ahead of
 * its use: the slots of a step are spread over the cache, so each array is
 * a cache miss unless it is on its way. */
static inline __attribute__((always_inline)) void ssd_slot_prefetch(const ssd_store *s, uint32_t x)
{
    __builtin_prefetch(&s->flags[x], 1, 1);
    __builtin_prefetch(&s->where[x], 1, 1);
    __builtin_prefetch(&s->prev[x], 1, 1);
    __builtin_prefetch(&s->next[x], 1, 1);
    if (s->freq) {
        __builtin_prefetch(&s->freq[x], 1, 1);
        __builtin_prefetch(&s->last[x], 1, 1);
    }
    if (s->mask)
        __builtin_prefetch(&s->mask[x], 1, 1);
}
/* A slot's list neighbours, once its links are in the cache. */
static inline __attribute__((always_inline)) void ssd_links_prefetch(const ssd_store *s, uint32_t x)
{
    if (s->where[x] < 0)
        return;
    if (s->prev[x] >= 0)
        __builtin_prefetch(&s->next[s->prev[x]], 1, 1);
    if (s->next[x] >= 0)
        __builtin_prefetch(&s->prev[s->next[x]], 1, 1);
}

/* In a loop over slots xs[0..n) (SSD_NONE: none) at i: the bookkeeping of
 * the slot 2 * SSD_AHEAD on, the list neighbours of the one SSD_AHEAD on. */
static inline __attribute__((always_inline)) void ssd_slots_ahead(const ssd_store *s, const uint32_t *xs,
                                                                  int64_t i, int64_t n)
{
    if (i + 2 * SSD_AHEAD < n && xs[i + 2 * SSD_AHEAD] != SSD_NONE)
        ssd_slot_prefetch(s, xs[i + 2 * SSD_AHEAD]);
    if (i + SSD_AHEAD < n && xs[i + SSD_AHEAD] != SSD_NONE)
        ssd_links_prefetch(s, xs[i + SSD_AHEAD]);
}

/* Lookahead's memory of sampled rows evicted cold: 1 when row is sampled
 * (its hash at most s->cold_sample), with *home its entry. */
static inline int ssd_cold_sampled(const ssd_store *s, uint32_t row, uint32_t *home)
{
    uint64_t h = ember_mix64((uint64_t)row ^ 0x243f6a8885a308d3ull);
    *home = (uint32_t)h & (SSD_COLD_SEEN - 1);
    return s->cold_seen && h <= s->cold_sample;
}

/* Backward-shift deletion in a linear-probing table (the map, lookahead's
 * window): the entry at j, whose home is h, may move into the hole iff h is
 * not in (hole, j], cyclically. */
static inline int ssd_may_shift(uint64_t hole, uint64_t j, uint64_t h)
{
    return !(hole <= j ? (h > hole && h <= j) : (h > hole || h <= j));
}

/* ssd_cache.c: policy bookkeeping */
void ssd_policy_remove(ssd_store *s, int32_t slot); /* no-op when not listed */
void ssd_policy_place(ssd_store *s, int32_t slot);  /* after use or load     */
void ssd_pin(ssd_store *s, int32_t slot);           /* counts an access      */
int ssd_policy_cold(const ssd_store *s, int32_t slot); /* no announced use   */
/* LFU: levels for every use count the coming step can reach.  0, or -1 out
 * of memory (nothing changed). */
int ssd_cold_reserve(ssd_store *s);
/* A slot for a new row: fresh or freed first; then a victim (removed from
 * its policy structure): a cold row, else (lookahead) one of the farthest
 * announced batch after step keep_through.  -1 when none is left. */
int32_t ssd_take_slot(ssd_store *s, int64_t keep_through, uint32_t *victim_row);
void ssd_release_slot(ssd_store *s, int32_t slot);  /* back to the free list */
/* ssd_window.c, lookahead: which window batches use row (bits s % 64);
 * batch e's rows (wrows[e]) join the window (0, or -1 out of memory); the
 * announced batches of steps before `step` leave it. */
uint64_t ssd_window_mask(const ssd_store *s, uint32_t row);
int ssd_window_add(ssd_store *s, int e);
void ssd_window_to(ssd_store *s, int64_t step);

/* ssd.c: helpers shared by the store's files. */
double ssd_now(void);
int ssd_fail(ssd_store *s, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* EMBER_EIO naming the table, the row, the file and the system's reason. */
int ssd_io_fail(ssd_store *s, const ember_io_req *r, int64_t n_failed);
/* A request that loads slot x with row: op READ (its record's place in the
 * file), INIT (never written) or DONE (copied already). */
void ssd_slot_req(ssd_store *s, ember_io_req *q, int32_t x, uint32_t row, int op);
/* Appends row's record (values, state as held) to the log; counts it.
 * EMBER_OK, or EMBER_EIO / EMBER_ENOMEM naming the file. */
int ssd_save_record(ssd_store *s, uint32_t row, const void *values, const void *state);
/* A failed segment write (ssd_log.h) as EMBER_EIO naming the table and file. */
int ssd_write_fail(ssd_store *s, int err);

/* ssd_stage.c: the store's step operations (table/store.h). */
void ssd_begin(ember_store *s, int64_t step);
int ssd_stage(ember_store *s, const uint32_t *rows, uint32_t *slots, int64_t n);
void ssd_mark_dirty(ember_store *s);
int ssd_announce(ember_store *s, const uint32_t *rows, int64_t n, int64_t seq);
/* Waits for the background load batch (lookahead) and applies it. */
int ssd_bg_finish(ssd_store *s);

/* ssd.c: the values and state of a row never written, in its record's
 * layout (as held: rounded to nearest for halves). */
void ssd_init_record(ssd_store *s, uint32_t row, void *values, void *state);

/* ssd_half.c: row access to a store with half rows or state, in fp32 (the
 * scratch `dec`): acquire decodes every row (a cached one from its slot,
 * another from its record in bulk), release encodes them to nearest. */
int ssd_half_acquire(ssd_store *s, const uint32_t *rows, int64_t n, float **values, float **state);
int ssd_half_release(ssd_store *s, const uint32_t *rows, int64_t n);

/* ssd_rows.c: row access and flush (table/store.h). */
int ssd_acquire(ember_store *s, const uint32_t *rows, int64_t n, float **values, float **state);
int ssd_release(ember_store *s, const uint32_t *rows, int64_t n, int dirty);
int ssd_flush(ember_store *s);
/* Shared with ssd_half.c: room for n records in bulk (and slots,
 * requests); fills rec with row's record (the initializer's, a copy from a
 * log buffer, or a read request added: runs of records next to each other
 * in the file merge); runs the read requests (0 .. nq), counts them, and
 * names the first that failed. */
int ssd_bulk_reserve(ssd_store *s, int64_t n);
void ssd_fetch_record(ssd_store *s, int64_t *nq, uint32_t row, char *rec);
int ssd_bulk_run(ssd_store *s, int64_t nq);

#endif
