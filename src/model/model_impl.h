/*
 * model_impl.h: inside a ctr_model (model.h): its state, shared by its
 * creation (model.c), its training step (model_step.c) and its prediction
 * (model_predict.c).  Nothing outside src/model/ includes it.
 */
#ifndef EMBER_MODEL_MODEL_IMPL_H
#define EMBER_MODEL_MODEL_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "model/dense_sync.h"
#include "model/model.h"
#include "model/pipeline.h"

struct ctr_model {
    model_config cfg;
    ember_collection *coll;
    dlrm *dense;
    dense_sync *sync;
    ember_world *world;
    int32_t rank, size;
    int32_t num_sparse, emb_dim;
    int64_t width;     /* pooled floats per sample (F * d)            */
    int64_t nparams;

    float *pooled, *d_pooled; /* [cap_rows][width]                    */
    float *pooled_next;       /* the begun batch's outputs (pipelined) */
    int64_t cap_rows;
    float *logit, *dlogit;    /* [micro_batch]                        */
    const ember_batch *const *announce; /* for the next step's ember_prefetch */
    int32_t num_announce;
    const ember_batch *next;  /* the batch the next step begins ahead    */
    int64_t *agree;           /* [size] statuses of the ranks           */
    int32_t ready_rows;       /* >= 0: pooled holds the outputs of the next
                                 step's batch (of that many samples), from
                                 the last step's ember_forward_end; -1: none */
    ember_world *stage_world; /* pipeline: this rank's replica group        */
    ember_world *replica_world; /* pipeline: the ranks of this rank's stage   */
    pipeline *pipe;           /* NULL: the model runs whole here            */
    int embeds;               /* 1: this rank runs the embedding step        */
    int64_t kept_bytes;       /* pipeline: activations a step keeps at most  */

    model_times times;
};

/* The message into err (when given); returns status. */
int model_fail(char *err, size_t errlen, int status, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The pooled buffers grown to rows samples (never shrunk).  0, or
 * EMBER_ENOMEM (the buffers that did grow stay). */
int model_grow_rows(ctr_model *m, int64_t rows);

/* The pipeline settings of cfg (model_plan.c). */
pipe_config model_pipe_config(const model_config *cfg);
/* The balance rule's cuts into cfg when it has none, the same on every rank
 * of world (NULL: this process alone): rank 0 measures.  0 or a status. */
int model_balance(model_config *cfg, const dlrm_config *mc, ember_world *world, char *err, size_t errlen);

/* The batch fits the model (features, dense inputs, a size >= 0). */
int model_check_batch(const ctr_model *m, const ctr_batch *batch, char *err, size_t errlen);

#endif
