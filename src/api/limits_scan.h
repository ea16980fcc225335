/*
 * limits_scan.h: the state of one ember_limits_run (limits.c) and its
 * sources of global batches (limits_source.c): a batch file, a binary
 * training file, the synthetic generator, or a config's data.
 */
#ifndef EMBER_API_LIMITS_SCAN_H
#define EMBER_API_LIMITS_SCAN_H

#include <stdint.h>

#include "api/batch_slice.h"
#include "config/config_file.h"
#include "core/status.h"
#include "data/ctr.h"
#include "ember-plan.h"
#include "ember.h"
#include "plan/limits.h"

#define LIMITS_FILE_BATCH 4096 /* samples per batch of a binary file without a config */

typedef struct limits_scan {
    ember_limits_config c;
    int32_t rank, size;
    int64_t shards;               /* resolved: the world size for 0          */
    int64_t batches;              /* at most; -1: all                        */
    int64_t done;                 /* batches counted                         */
    /* the source: one of these */
    ember_synth *syn;
    ember_batch_reader *reader;
    config_file *cf;
    ctr_source *src;              /* a config's data, or a binary file        */
    int64_t batch;                /* samples per batch taken from src         */
    int64_t *own_rows;            /* the shape when it is not a batch file's  */
    int32_t *own_ftab;
    ember_batch_file_info info;   /* tables (rows, 0: dynamic) and features   */
    char source[512];             /* what is read, for the report             */
    /* the count */
    char (*names)[32];            /* tables, then features                    */
    int64_t *capacity;            /* [T] a dynamic table's rows per rank; 0   */
    limits_keys *keys;
    ember_collection *coll;
    limits_series *series;        /* [T]                                      */
    int64_t *counts;              /* [2 T shards + 1]: ids, unique, the flag  */
    int64_t *totals;              /* [2 T]: ids, then after dedup             */
    batch_slice slice;
    /* this rank's failure, agreed before each collective step */
    int status;
    char msg[1024];
} limits_scan;

struct ember_limits {
    ember_handle_msg head;  /* first: ember_errmsg's, over msg */
    char msg[256];
    ember_limits_summary summary;
    char source[512];
    char (*names)[32];
    ember_limits_table *tables;
};

/* Checks c (one source, shards, batches) into s.  EMBER_OK, or
 * EMBER_EINVAL with s->msg. */
int limits_scan_init(limits_scan *s, const ember_limits_config *c);
/* Opens the source and sets s->info and s->source: EMBER_OK or a status
 * with s->msg (this rank's). */
int limits_source_open(limits_scan *s);
/* Names, capacities and the counting arrays: EMBER_OK or EMBER_ENOMEM
 * with s->msg. */
int limits_scan_alloc(limits_scan *s);
/* The next global batch n into *b: 1, 0 at the end, or -1 with s->status
 * and s->msg. */
int limits_source_next(limits_scan *s, int64_t n, ember_batch *b);
void limits_scan_free(limits_scan *s);

#endif
