/*
 * blas_core.c: OpenBLAS's kernel set, widened where its CPU detection falls
 * short.
 *
 * A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels once, at load, from
 * the CPU's vendor and model, not its feature flags.  A CPU newer than the
 * build falls back to an older family: OpenBLAS 0.3.21 runs AVX2 "Haswell"
 * kernels on AMD Zen 5, which has AVX-512, and the dense model's GEMMs then
 * take about twice as long as with its AVX-512 kernels (docs/PERFORMANCE.md,
 * "The dense part's GEMMs").  OpenBLAS's documented remedy is the
 * OPENBLAS_CORETYPE variable, read at that first pick; ember sets it and
 * asks OpenBLAS to pick again (gotoblas_dynamic_quit, then _init: the very
 * functions that read the variable at load), once, before its first GEMM.
 *
 * The rule: only when the user has not set OPENBLAS_CORETYPE, the CPU has
 * AVX-512 F, CD, BW, DQ and VL, and OpenBLAS runs a family without them;
 * then "Cooperlake" where the CPU also has AVX-512 BF16, else "SkylakeX".
 * An OpenBLAS built for one family has no such functions (weak symbols,
 * NULL there) and is left alone.  The kernels are chosen before any GEMM,
 * so results stay the same run to run and for any thread count.
 */
#include <pthread.h>
#include <stdlib.h>
#include <strings.h>

#include "dense/layers.h"

char *openblas_get_corename(void);
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));

/* The family to ask for instead of `now`, or NULL to keep it. */
static const char *wider_core(const char *now)
{
    static const char *const AVX512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    for (size_t i = 0; i < sizeof AVX512 / sizeof AVX512[0]; i++)
        if (now && !strcasecmp(now, AVX512[i]))
            return NULL;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512cd") ||
        !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512dq") ||
        !__builtin_cpu_supports("avx512vl"))
        return NULL;
    return __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
}

static void pick_core(void)
{
    if (getenv("OPENBLAS_CORETYPE") || !gotoblas_dynamic_init || !gotoblas_dynamic_quit)
        return;
    const char *core = wider_core(openblas_get_corename());
    if (!core || setenv("OPENBLAS_CORETYPE", core, 1))
        return;
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
}

void dense_blas_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, pick_core);
}

const char *dense_blas_core(void)
{
    dense_blas_init();
    return openblas_get_corename();
}
