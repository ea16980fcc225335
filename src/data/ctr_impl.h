/*
 * ctr_impl.h: what the three CTR sources (ctr_synth.c, ctr_text.c,
 * ctr_bin.c) share behind ctr.h: the source object, its small vtable, and
 * the batch buffers that ctr_source_next hands out.
 *
 * Design choice: a source fills the buffers of the common part and the
 * public calls (ctr.c) do the rest once: argument checks, a failure that
 * sticks (a source that failed repeats its message and returns -1, as a
 * broken file stays broken), statistics and the ctr_batch view.  File
 * sources produce samples one at a time, so they stage bags sample-major
 * (stage_len, stage_ids) and ctr_buf_transpose() turns them into ember's
 * feature-major layout; the synthetic source writes feature-major directly.
 */
#ifndef EMBER_DATA_CTR_IMPL_H
#define EMBER_DATA_CTR_IMPL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "data/ctr.h"

typedef struct ctr_source_ops {
    /* Up to max local samples into the buffers (ctr_buf_*); the count, 0
     * at the end of the share, or -1 with err. */
    int64_t (*next)(ctr_source *s, int32_t max, char *err, size_t errlen);
    void (*rewind)(ctr_source *s);
    void (*destroy)(ctr_source *s); /* frees impl, not the common part */
    /* ctr_source_tell without epochs; ctr_source_seek of pos->next (0 or
     * -1 with err; the common part sets epochs). */
    void (*tell)(const ctr_source *s, ctr_position *out);
    int (*seek)(ctr_source *s, int64_t next, char *err, size_t errlen);
    /* Optional (binary files): every epoch's samples in a seeded order of
     * blocks from now on (ctr_source_shuffle). */
    int (*shuffle)(ctr_source *s, uint64_t seed, char *err, size_t errlen);
} ctr_source_ops;

struct ctr_source {
    const ctr_source_ops *ops;
    void *impl;
    ctr_schema schema;
    ctr_stats stats;
    int64_t batch_first;   /* set by next: ctr_batch.first_sample        */
    int failed;            /* a failure sticks: errmsg is repeated       */
    int64_t epochs;        /* rewinds so far (ctr_position)              */
    char errmsg[1024];
    /* the batch handed out, capacity in samples and ids */
    int32_t cap, batch_size;
    int64_t cap_ids, num_ids;
    float *label;          /* [cap]                                      */
    float *dense;          /* [cap][num_dense]                           */
    int32_t *lengths;      /* [num_sparse][batch_size] (feature-major)   */
    int64_t *ids;          /* [cap_ids]                                  */
    float *weights;        /* [cap_ids] when the schema has a weighted feature */
    const float *teacher_prob; /* synthetic: [batch_size]; else NULL     */
    /* sample-major staging of file sources */
    int32_t *stage_len;    /* [cap][num_sparse]                          */
    int64_t *stage_ids;    /* [cap_stage]                                */
    float *stage_w;        /* [cap_stage] with weights                   */
    int64_t cap_stage;
    int64_t *line_no;      /* [cap] text sources: each sample's file line */
};

/* 1 when some feature of the schema carries weights. */
int ctr_schema_weighted(const ctr_schema *sc);

/* A zeroed source with ops, impl and schema set; NULL when out of memory. */
ctr_source *ctr_source_alloc(const ctr_source_ops *ops, void *impl, const ctr_schema *schema);
/* Room for n samples in label, dense, lengths (and stage_len with stage).
 * 0, or EMBER_ENOMEM. */
int ctr_buf_reserve(ctr_source *s, int32_t n, int stage);
/* Room for n ids in ids (stage = 0) or stage_ids (stage = 1), and their
 * weights when the schema has a weighted feature. */
int ctr_buf_reserve_ids(ctr_source *s, int64_t n, int stage);
/* lengths/ids/weights (feature-major) from the n staged samples holding
 * nids ids. */
int ctr_buf_transpose(ctr_source *s, int32_t n, int64_t nids);

/* snprintf into err (may be NULL); returns -1. */
int ctr_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Rank r's share [r*n/w, (r+1)*n/w) of n items, without overflow. */
static inline int64_t ctr_share_begin(int64_t n, int32_t r, int32_t w)
{
    return (int64_t)(((unsigned __int128)n * (uint64_t)r) / (uint64_t)w);
}

/* Checks rank and world; 0 or -1 with err naming who. */
int ctr_check_world(const char *who, int32_t rank, int32_t world, char *err, size_t errlen);

#endif
