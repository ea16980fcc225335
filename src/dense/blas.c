/*
 * blas.c: OpenBLAS's own process-wide settings, for the handles that apply
 * theirs while they are open and put the caller's back (dense.h): its
 * thread count, and the kernel family it picked for this CPU.  The dense
 * model keeps no thread setting of its own here: each model carries its
 * counts (dlrm_set_threads).
 */
#include <cblas.h>

#include "dense/dense.h"

int32_t dense_blas_threads(void) { return openblas_get_num_threads(); }

void dense_set_blas_threads(int32_t threads) { openblas_set_num_threads(threads < 1 ? 1 : threads); }

const char *dense_blas_core(void) { return openblas_get_corename(); }
