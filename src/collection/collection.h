/*
 * collection.h: the definition of an ember_collection: what the modules
 * from the exchange up walk (docs/architecture.md, the collection's
 * floor), and the small accessors on it.  assemble/ builds one (ember_collection_create) and
 * takes it apart again; the step (step/) reads and writes it.
 *
 * Logical tables and features are what the user configured.  Physical tables
 * are what is stored: with stacking, tables of equal dim and optimizer share
 * one physical table, each at a row offset.  A routed batch (prep/route.h) is
 * kept per physical table between ember_forward and ember_backward.
 */
#ifndef EMBER_COLLECTION_COLLECTION_H
#define EMBER_COLLECTION_COLLECTION_H

#include <stdint.h>

#include "comm/comm.h"
#include "core/status.h"
#include "dyn/dyn_state.h"
#include "ember.h"
#include "prep/prep.h"
#include "prep/route.h"
#include "table/layout.h"
#include "table/store.h"

struct ember_xchg; /* exchange/xchg.h: exchange buffers of one physical table */

/* A dynamic physical table on this rank: its key index (dyn/dyn.h) and the
 * buffers of the step that resolves its keys (step/dynamic_keys.c). */
typedef struct ember_dyn_table {
    ember_dyn d;
    uint32_t *slots;             /* the resolved (received) keys' slots      */
    int64_t n, cap;
    float *undo_rows;            /* rows + state overwritten by resets       */
    int64_t undo_cap, undo_done;
    uint64_t *keys;              /* this table's keys sent, bucketed by owner */
    int64_t *pos;                /* their batch positions                    */
    uint64_t *recv;              /* keys received by this owner (W > 1)      */
    int64_t *cnt;                /* [4 * world size] counts                  */
    int64_t keys_cap, pos_cap, recv_cap, cnt_cap;
    int status;                  /* the resolve's, and its message:          */
    char err[EMBER_ERRMSG_SIZE]; /* tables may resolve side by side          */
} ember_dyn_table;

typedef struct ember_prefetch_scratch { /* ember_prefetch's grow-only buffers */
    int64_t *cnt;                        /* [6 * world] counts and displacements (create) */
    uint64_t *out, *in, *tmp;            /* blocks sent, received (then pairs), sort scratch */
    uint32_t *rows;                      /* one store's distinct rows; a key section's slots */
    int64_t *sec_counts;                 /* [2 * world * sections] counts and cursors */
    int32_t *section;                    /* [2 * ptables] section of each table, table of each */
    int32_t num_sections;                /* 1 + the dynamic lookahead tables */
    int64_t out_cap, in_cap, tmp_cap, rows_cap, sec_counts_cap, section_cap;
} ember_prefetch_scratch;

typedef struct ember_tier_init_ctx { /* what the SSD tier's initializer needs */
    const struct ember_collection *coll;
    int32_t ptable;
} ember_tier_init_ctx;

typedef struct ember_ptable {
    int32_t dim;
    int32_t state_floats;   /* per stored row (COLUMN: of the slice)         */
    ember_optimizer opt;
    int64_t rows;           /* physical rows, over the whole world           */
    ember_placement placement;
    ember_exchange exchange;
    int32_t owner;          /* TABLE placement                               */
    uint64_t row_magic;     /* ROW: ember_shard_magic(world size)            */
    int64_t local_rows;     /* rows stored on this rank                      */
    int32_t local_dim;      /* columns stored: dim, or the COLUMN slice c     */
    int32_t col0;           /* COLUMN: first column of this rank's slice      */
    int32_t num_tables;     /* logical tables in it, ascending offsets       */
    int32_t *tables;
    int32_t num_features;   /* features reading it, config order             */
    int32_t *features;
    ember_store *store;     /* local_rows x local_dim                        */
    ember_storage storage;  /* MEMORY or SSD (resolved from AUTO)            */
    ember_cache_policy policy; /* SSD: resolved from DEFAULT                 */
    int64_t cache_bytes;    /* SSD: the sum over its tables                  */
    ember_tier_init_ctx init_ctx;
    ember_route route;      /* the routed last batch (this rank's samples)   */
    struct ember_xchg *xchg; /* exchange state; NULL in a world of one       */
    ember_dyn_table *dyn;   /* dynamic tables: the key index; else NULL   */
    struct ember_hot *hot;  /* hot rows (exchange/hot.h); NULL without          */
} ember_ptable;

/* The per-batch state a forward leaves for its backward, of a batch begun
 * ahead (ember_forward_begin): the collection's own fields hold the
 * current batch's; step/schedule.c swaps the two sets while it works on
 * the begun batch, and again when ember_forward_end makes it current. */
typedef struct ember_slot {
    int routed;
    int32_t num_rounds;
    ember_batch_shape shape;
    ember_route *route;          /* [num_ptables]                          */
    struct ember_xchg **xchg;    /* [num_ptables]                          */
} ember_slot;

struct ember_collection {
    ember_handle_msg head;       /* first: ember_errmsg's, over errmsg    */
    ember_collection_config cfg; /* arrays below replace the caller's    */
    ember_ltable *tables;
    ember_lfeature *features;
    ember_ptable *ptables;
    int32_t num_ptables;
    ember_prep_table *prep_tables; /* [num_ptables] the physical tables as
                                      prep/ reads them (assemble/layout.c) */
    int32_t threads;
    int64_t pooled_width;
    char *names;                 /* all names, one allocation            */

    /* per-batch state */
    int routed;                  /* a forward succeeded; backward may run */
    ember_batch_shape shape;     /* bags, sequence offsets, mini-batches  */

    ember_limit_scratch limits;  /* prep/limits.c's counters and set      */
    int64_t *sort_hist;          /* [EMBER_SORT_HIST_SIZE] radix scratch   */
    ember_stats stats;
    int64_t next_announce;       /* step of the next ember_prefetch batch  */
    struct {                     /* lookahead's window (step/window.c)     */
        int32_t now, max;        /* batches; max 0: it stays cfg.lookahead */
        int32_t before;          /* the length before the trial             */
        int32_t hold;            /* periods before it may grow again        */
        int trial;               /* a trial under way: 1 growing, -1 shrinking */
        int settle;              /* periods before it is judged              */
        int64_t periods;         /* periods with a full cache so far         */
        double hit_before;       /* the hit rate of the period before the trial */
        int64_t base[5];         /* accesses, misses, sampled loads and cold
                                    reloads, evictions at the period's start */
    } window;
    ember_prefetch_scratch prefetch;
    int panicked;
    float lr_scale;              /* ember_set_lr_scale: every table's lr times it */
    int observe_limits;          /* ember_limits_observe (step/limits_observe.c) */
    int obs_routed, obs_lost;    /* a routed batch's record waits for its done;
                                    a record was lost (out of memory)      */
    int64_t *obs_record;         /* [4 * tables] the routed batch's record */
    int64_t *obs_queue;          /* [obs_cap][4 * tables] done batches' records, a ring */
    int64_t obs_cap, obs_front, obs_queued;
    int64_t *obs_counts;         /* [2 * tables * shards] scratch          */
    char errmsg[EMBER_ERRMSG_SIZE];

    ember_world *world;          /* never NULL                            */
    ember_world *own_world;      /* the world of one made for cfg.world NULL */
    int32_t num_rounds;          /* mini-batch rounds agreed over the world */
    int64_t *comm_scratch;       /* [2 * world size]: agreement, counts     */
    int exchange_always;         /* run the exchanges even in a world of one
                                    (tests: the same code path, trivially)  */
    int64_t bytes_sent0, bytes_received0; /* world counters at forward start */
    double comm_seconds0;
    int64_t *exchange_scratch;   /* [4 * world size]: ember_dist_exchange   */

    /* a forward begun ahead (step/schedule.c) */
    ember_slot *spare;           /* its state while another batch is current */
    int pending;                 /* 1 between ember_forward_begin and _end  */
    float *pending_pooled, *pending_sequence;
    int64_t pending_ids, pending_dropped[2];
    int64_t pending_sent, pending_received; /* bytes exchanged so far      */
    double pending_seconds;
    ember_world *sched_world;    /* its exchanges' own world (W > 1)      */
    int32_t chain_p;             /* exchange/xchg_chain.c: the table at work  */
    int chain_stale, chain_status;
    char chain_msg[EMBER_ERRMSG_SIZE]; /* this rank's failure in the chain */

    /* dynamic tables (step/dynamic_keys.c) */
    int32_t num_dynamic;         /* physical tables with a key index        */
    int training;                /* 1 (default): forwards admit and evict   */
    int64_t *dyn_ids;            /* the batch's ids, keys replaced by rows  */
    uint32_t *dyn_slots;         /* slots received back                     */
    int64_t dyn_ids_cap, dyn_slots_cap;
};

/* Records a failure on coll (printf-style) and returns status. */
int ember_fail(ember_collection *coll, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* What preparing a batch (prep/prep.h) reads of c: its layout, options and
 * scratch; messages go to c->errmsg.  The routes are the physical tables'
 * own (ptables[p].route). */
ember_prep ember_collection_prep(ember_collection *c);

/* Stages rows[0..n) of pt's store for this step (table/store.h,
 * ember_store_stage: slots[i] the row's slot); a failure's message goes to
 * c. */
int ember_ptable_stage(ember_collection *c, ember_ptable *pt, const uint32_t *rows, uint32_t *slots, int64_t n);

/* The step runs its exchanges: a world of more than one, or the tests'
 * exchange_always in a world of one. */
static inline int ember_distributed(const ember_collection *c) { return c->world->size > 1 || c->exchange_always; }

#endif
