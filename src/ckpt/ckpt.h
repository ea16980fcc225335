/*
 * ckpt.h: the private interface of the checkpoint module (src/ckpt/), shared
 * by save.c, open.c, load.c and the `ember inspect` tool.
 *
 * A checkpoint is stored in each saving rank's native layout (no row data
 * moves at save); everything that reads rows goes through ckpt_read_rows,
 * which assembles canonical full rows from the saving ranks' files, so
 * resharding (N ranks, any placement -> M ranks, any placement) is one
 * read per row range.  docs/checkpoint-format.md has the bytes.
 */
#ifndef EMBER_CKPT_H
#define EMBER_CKPT_H

#include <stdint.h>

#include "ember.h"

/* One logical table as the checkpoint recorded it.  placement, owner and
 * world describe the saving layout (world = ember_checkpoint_world);
 * rng_key recomputes initial rows (src/table/init.h: ember_init_row_values;
 * the formula is at ember_collection_create in ember.h). */
typedef struct ckpt_table_info {
    const char *name;
    int64_t rows;
    int32_t dim;
    ember_optimizer opt;    /* as saved; ember_load uses only opt.kind       */
    ember_init_kind init;
    float init_value;
    uint64_t rng_key;
    int32_t state_floats;   /* per full row: ember_state_floats(kind, dim)   */
    ember_placement placement;
    int32_t owner;          /* TABLE placement                               */
    int32_t world;
    int64_t offset;         /* physical row offset when saved (stacking)     */
    int32_t local_dim;      /* dim, or the COLUMN slice width when saved     */
    /* dynamic tables (kind DYNAMIC: rows = capacity x world, ROW, offset 0) */
    ember_table_kind kind;
    int64_t capacity;       /* slots per saving rank                         */
    int32_t admit_after, ttl_steps;
    ember_evict_policy evict;
    int64_t sketch_width;   /* counters per sketch row (0: no sketch)         */
    int sketch_lines;       /* the sketch is in lines (else not read)         */
    ember_row_precision precision; /* the rows' training precision: the saved
                                      values are exactly its values, as fp32 */
    ember_row_precision state_precision; /* the optimizer state's, likewise  */
} ckpt_table_info;

/* For a public call on ck: a failure's message (this thread's, where the
 * modules write it) kept on ck too, for ember_errmsg(ck).  Returns status. */
int ckpt_keep(const ember_checkpoint *ck, int status);
/* A failure of a public call on ck, its message on ck (and this thread's). */
int ckpt_fail(const ember_checkpoint *ck, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

int32_t ckpt_num_tables(const ember_checkpoint *ck);
/* NULL when t is out of range. */
const ckpt_table_info *ckpt_table(const ember_checkpoint *ck, int32_t t);
/* Canonical full rows [first, first+count) of table t: values [count][dim]
 * and, when state != NULL, state [count][state_floats] (Adam: m then v),
 * assembled from the saving ranks' files.  EMBER_EINVAL for a bad t or range
 * (message in ember_errmsg(NULL)). */
int ckpt_read_rows(const ember_checkpoint *ck, int32_t t, int64_t first, int64_t count,
                   float *values, float *state);
int64_t ckpt_optimizer_steps(const ember_checkpoint *ck);
uint64_t ckpt_seed(const ember_checkpoint *ck);
int32_t ckpt_num_files(const ember_checkpoint *ck);
/* File i (= saving rank i): its name in the step folder, bytes, XXH3-64. */
const char *ckpt_file_name(const ember_checkpoint *ck, int32_t i);
int64_t ckpt_file_bytes(const ember_checkpoint *ck, int32_t i);
uint64_t ckpt_file_checksum(const ember_checkpoint *ck, int32_t i);
/* The manifest JSON as stored (NUL-terminated), valid until close. */
const char *ckpt_manifest_text(const ember_checkpoint *ck);

/* Steps of root's complete checkpoints (step-<12 digits> with a manifest),
 * ascending, malloc'd into *steps (free it); returns how many, or -1
 * (errno).  What ember_checkpoint_open looks for under a root. */
int64_t ckpt_list_steps(const char *root, int64_t **steps);

/* The names the manifest uses ("row", "rowwise_adagrad", "zeros"; "?" out
 * of range): static strings. */
const char *ckpt_placement_name(ember_placement p);
const char *ckpt_optimizer_name(ember_optimizer_kind k);
const char *ckpt_init_name(ember_init_kind k);
const char *ckpt_evict_name(ember_evict_policy e);
const char *ckpt_precision_name(ember_row_precision p);

/* A dynamic table's keys section in saving rank r's file (docs/
 * checkpoint-format.md): its counters, and per slot the key and metadata
 * (count 0: a free slot), and the admission sketch.  Pointers into the
 * mapped file, little-endian; EMBER_EINVAL when t is not dynamic. */
typedef struct ckpt_dyn_part {
    int64_t counters[8];    /* admitted, evicted, expired, evicted_count_sum,
                               not_admitted, 0, 0, 0                          */
    const uint8_t *slots;   /* capacity x (u64 key, u32 last step, u32 count) */
    const uint8_t *sketch;  /* 4 x sketch_width u16                           */
} ckpt_dyn_part;
int ckpt_dyn_read(const ember_checkpoint *ck, int32_t t, int32_t r, ckpt_dyn_part *out);
/* Over every saving rank: keys held (resident), the counters summed, and
 * the fullest rank's keys. */
typedef struct ckpt_dyn_summary {
    int64_t resident, most_on_a_rank, admitted, evicted, expired, evicted_count_sum, not_admitted;
} ckpt_dyn_summary;
int ckpt_dyn_summarize(const ember_checkpoint *ck, int32_t t, ckpt_dyn_summary *out);

#endif
