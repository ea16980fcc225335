/*
 * predictor.h: what the library sees of an open predictor (ember.h,
 * "Prediction"; predictor.c) beyond the public calls: the description it
 * was built from (a request's features and rows are checked against it),
 * the loaded tables and dense parameters a bundle is written from
 * (bundle_write.c), and the BLAS thread count its dense model runs with.  Read-only views, valid until the predictor closes.
 */
#ifndef EMBER_INFER_PREDICTOR_H
#define EMBER_INFER_PREDICTOR_H

#include <stdint.h>

#include "ember.h"
#include "infer/description.h"

/* The model description the predictor was built from. */
const model_description *predictor_description(const ember_predictor *p);
/* The collection holding the model's tables, loaded. */
ember_collection *predictor_collection(const ember_predictor *p);
/* The dense model's parameters: *count floats. */
const float *predictor_dense_params(const ember_predictor *p, int64_t *count);
/* The OpenBLAS threads its dense model runs with (one): what a handle that
 * scores many batches sets process-wide for its life (ember_predict, the
 * scorer), so that no batch changes OpenBLAS's count. */
int32_t predictor_blas_threads(const ember_predictor *p);

#endif
