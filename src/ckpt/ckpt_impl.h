/*
 * ckpt_impl.h: what the checkpoint files share inside src/ckpt/: the byte
 * layout constants of a data file, the geometry of a saved table (which rows
 * and columns each saving rank's file holds, in what order), the opened
 * checkpoint's shape, the manifest codec (format.c) and the file-system
 * helpers (fsio.c).
 *
 * The geometry is the single source of truth for both sides: save.c writes
 * exactly the sections it predicts, and open.c derives every expected size
 * and offset from the manifest's tables through it, so no offset read from
 * a file is ever trusted before it was recomputed.
 */
#ifndef EMBER_CKPT_IMPL_H
#define EMBER_CKPT_IMPL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ckpt/ckpt.h"
#include "collection/config.h"
#include "core/assert.h"
#include "core/safe_file.h"
#include "core/status.h"

#define CKPT_MAGIC 0x54504B4352424D45ull     /* "EMBRCKPT" little-endian     */
#define CKPT_END_MAGIC 0x00444E4552424D45ull /* "EMBREND\0"                  */
#define CKPT_VERSION 1
#define CKPT_HEADER_BYTES 64
#define CKPT_ENTRY_BYTES 32  /* one section-table entry                      */
#define CKPT_TRAILER_BYTES 16
#define CKPT_ALIGN 64
#define CKPT_MAX_WORLD 65536
#define CKPT_MAX_BLOBS 4096
#define CKPT_MAX_TABLES (1 << 20)
#define CKPT_MANIFEST "manifest.json"
#define CKPT_FORMAT_NAME "ember-checkpoint"

enum { CKPT_VALUES = 1, CKPT_STATE = 2, CKPT_BLOB = 3, CKPT_RANK_BLOB = 4, CKPT_KEYS = 5 };

/* Bytes of a dynamic table's keys section: 64 of counters, 16 per slot,
 * 8 per sketch column (4 rows of u16). */
#define CKPT_KEYS_HEAD 64
#define CKPT_KEYS_SLOT 16
static inline int64_t ckpt_keys_bytes(int64_t capacity, int64_t sketch_width)
{
    return CKPT_KEYS_HEAD + CKPT_KEYS_SLOT * capacity + 8 * sketch_width;
}

typedef struct ckpt_section {
    uint32_t what, index;  /* CKPT_*, table or blob index                     */
    int64_t offset, bytes;
    uint64_t checksum;     /* XXH3-64 of the section's bytes                  */
} ckpt_section;

typedef struct ckpt_file {
    char name[64];
    int64_t bytes;
    uint64_t checksum;     /* XXH3-64 of bytes [0, bytes - 8)                 */
    int32_t num_sections;
    ckpt_section *sections;
    const uint8_t *map;    /* read-only mapping (open.c); NULL while saving  */
} ckpt_file;

struct ember_checkpoint {
    ember_handle_msg head; /* first: ember_errmsg's, over msg                 */
    char msg[EMBER_THREAD_MSG_SIZE];
    char *path;            /* the step folder                                */
    char *manifest;        /* its text, NUL-terminated                       */
    void *doc;             /* the parsed manifest (json_t); names point into it */
    int64_t step, opt_steps;
    int32_t world;
    uint64_t seed;
    int32_t num_tables;
    ckpt_table_info *tables;
    int32_t num_blobs, num_rank_blobs;
    const char **blob_names, **rank_blob_names;
    ckpt_file *files;      /* [world], file i saved by rank i               */
    const uint8_t **tv, **ts; /* [table * world + rank]: values, state data  */
    const uint8_t **tk;       /* [table * world + rank]: dynamic keys section */
};

/* ------------------------------------------------------------ geometry */

static inline int64_t ckpt_residue_count(int64_t m, int32_t W, int32_t r)
{
    return m > r ? (m - r - 1) / W + 1 : 0;
}

/* Rows of the logical table stored in rank r's file, in ascending row order. */
static inline int64_t ckpt_held_rows(const ckpt_table_info *t, int32_t r)
{
    switch (t->placement) {
    case EMBER_PLACE_ROW:
        return ckpt_residue_count(t->offset + t->rows, t->world, r) - ckpt_residue_count(t->offset, t->world, r);
    case EMBER_PLACE_TABLE: return r == t->owner ? t->rows : 0;
    case EMBER_PLACE_REPLICATED: return r == 0 ? t->rows : 0;
    default: return t->rows;
    }
}

/* Real columns of rank r's COLUMN slice. */
static inline int32_t ckpt_slice_width(const ckpt_table_info *t, int32_t r)
{
    int64_t w = (int64_t)t->dim - (int64_t)r * t->local_dim;
    return w < 0 ? 0 : w > t->local_dim ? t->local_dim : (int32_t)w;
}

/* Floats per held row in rank r's values and state sections. */
static inline int32_t ckpt_value_width(const ckpt_table_info *t, int32_t r)
{
    return t->placement == EMBER_PLACE_COLUMN ? ckpt_slice_width(t, r) : t->dim;
}

static inline int32_t ckpt_state_width(const ckpt_table_info *t, int32_t r)
{
    if (t->state_floats == 0 || t->placement != EMBER_PLACE_COLUMN)
        return t->state_floats;
    /* each vector's slice (Adam: m, v), then on rank 0 the row floats (row-wise
     * kinds: the copies are equal) */
    return ember_state_vectors(t->opt.kind) * ckpt_slice_width(t, r) +
           (r == 0 ? ember_state_row_floats(t->opt.kind) : 0);
}

static inline int64_t ckpt_align(int64_t x) { return (x + CKPT_ALIGN - 1) & ~(int64_t)(CKPT_ALIGN - 1); }

/* ------------------------------------------------------------- format.c */

void ckpt_put_u32(uint8_t *p, uint32_t v);
void ckpt_put_u64(uint8_t *p, uint64_t v);
uint32_t ckpt_get_u32(const uint8_t *p);
uint64_t ckpt_get_u64(const uint8_t *p);
/* The data file's header for rank/world/step with n sections whose table
 * starts at table_offset, in a file of file_bytes. */
void ckpt_header_encode(uint8_t out[CKPT_HEADER_BYTES], int32_t rank, int32_t world, int64_t step,
                        uint32_t n, int64_t table_offset, int64_t file_bytes);
/* Lays out f->sections (bytes set) from CKPT_HEADER_BYTES on; sets f->bytes.
 * Returns the section table's offset. */
int64_t ckpt_layout(ckpt_file *f);
/* The sections rank r's file has, in order: each table's values (and
 * state, and a dynamic table's keys), then (rank 0) the shared blobs, then
 * the rank blobs (blob sizes -1: not fixed by the tables).  out may be
 * NULL; returns the count. */
int ckpt_expected_sections(const ember_checkpoint *ck, int32_t r, ckpt_section *out);
/* "rank-RRRRR-of-WWWWW.bin" */
void ckpt_file_name_of(char out[64], int32_t rank, int32_t world);
/* The manifest text of ck (tables, blobs, files filled), with its checksum
 * line; malloc'd, or NULL when out of memory. */
char *ckpt_manifest_encode(const ember_checkpoint *ck);
/* A JSON object (json_t) as text whose last field, "manifest_xxh3", is the
 * XXH3-64 of every byte before its 16 hex digits, so that any flipped byte
 * is found (checkpoint and bundle manifests); malloc'd, NULL when out of
 * memory.  The check: EMBER_EFORMAT / EMBER_ECORRUPT with the message
 * (ember_errmsg) naming `where`. */
char *ckpt_json_sealed(const void *json);
int ckpt_json_seal_check(const char *text, int64_t bytes, const char *where);
/* Parses and checks text (bytes long) into ck (everything but the maps).
 * EMBER_EFORMAT / EMBER_ECORRUPT / EMBER_ENOMEM with ember_errmsg set,
 * naming `where`. */
int ckpt_manifest_decode(ember_checkpoint *ck, const char *text, int64_t bytes, const char *where);
/* Frees what decode allocated (not the maps). */
void ckpt_free_parts(ember_checkpoint *ck);
int ckpt_blob_name_ok(const char *name);

/* -------------------------------------------------------------- write.c */

#define CKPT_MSG 400 /* bytes of a save step's failure message */
struct ember_collection;
/* Writes this rank's file f (sections sized, ckpt_layout) into dir (a
 * core/safe_file.h output: fsynced, named, the folder fsynced); fills the
 * checksums.  EMBER_EIO / EMBER_ENOMEM
 * with msg (CKPT_MSG bytes). */
int ckpt_write_rank_file(struct ember_collection *c, const ember_checkpoint *ck, ckpt_file *f, const safe_dir *dir,
                         const ember_save_options *opt, char *msg);

/* --------------------------------------------------------------- fsio.c */

/* snprintf that truncates quietly (messages and paths are bounded). */
void ckpt_fmt(char *out, size_t cap, const char *f, ...) __attribute__((format(printf, 3, 4)));

/* Writes data (bytes) to dir/name atomically (core/safe_file.h's output:
 * never through a link, fsynced, renamed, the folder fsynced).  EMBER_EIO
 * with msg (size msg_cap) naming the path and the reason. */
int ckpt_write_atomic(const safe_dir *dir, const char *name, const void *data, int64_t bytes, char *msg,
                      size_t msg_cap);
/* ckpt_list_steps (ckpt.h) of the root folder held open as root_fd: its
 * own descriptor is duplicated, so the listing starts at the first entry.
 * Returns as ckpt_list_steps: how many, or -1 (errno). */
int64_t ckpt_list_steps_at(int root_fd, int64_t **steps);
/* Removes root's .tmp-* and .trash-* folders (leftovers of crashed saves). */
void ckpt_clean_leftovers(const safe_dir *root);
/* Renames root/step-<step> to a .trash-* name and removes it. */
int ckpt_discard(const safe_dir *root, int64_t step, char *msg, size_t msg_cap);
/* Moves the folder root/tmp over root/dst (dst may exist as a folder: the
 * new one is in place before the old one goes; anything else there is
 * refused), then fsyncs root. */
int ckpt_publish(const safe_dir *root, const char *tmp, const char *dst, char *msg, size_t msg_cap);

#endif
