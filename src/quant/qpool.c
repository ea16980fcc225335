/*
 * qpool.c: pooled lookup over encoded rows (qpool.h): each row is decoded
 * while it is summed, with no fp32 copy of the table.
 *
 * Defined as "decode the row (quant.c: fmaf(scale, q, bias)), then pool as
 * the training forward does (acc = fmaf(w, v, acc) in entry order, divided
 * once at the end)", with the fused multiply-adds written out, so the
 * result is bit-identical to pooling a decoded copy: a bundle's rows score
 * the same through this kernel as through fp32 tables they were decoded
 * into.  Work is split statically by entries into whole bags (as pool.c),
 * so the output does not depend on the thread count.  Rows are prefetched
 * PREFETCH entries ahead.  With AVX-512, dims 16 to 256 (powers of two)
 * get kernels that keep a bag's sum in registers; other dims decode 16
 * elements at a time and finish with the scalar loop.
 */
#include <omp.h>
#include <string.h>

#include "core/parallel.h"
#include "quant/qpool.h"
#include "quant/round.h"

#define PREFETCH 16

/* Every cache line of a row: encoded rows are not line-aligned (an int8 row
 * of dim 64 is 68 bytes), so the last byte's line is asked for too. */
static inline __attribute__((always_inline)) void prefetch_row(const uint8_t *p, int64_t bytes)
{
    for (int64_t c = 0; c < bytes; c += 64)
        __builtin_prefetch(p + c, 0, 0);
    if (bytes % 64) /* a store's row of whole lines starts on a line (elsewhere a missed line costs only time) */
        __builtin_prefetch(p + bytes - 1, 0, 0);
}

static inline float *out_of(const ember_qpool_args *a, int64_t b, int32_t dim)
{
    if (!a->out_off)
        return a->out + b * dim;
    int64_t off = a->out_off[b];
    return off >= 0 ? a->out + off : a->out_seq + (-1 - off);
}

static inline float half_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return ember_half_to_float(h);
}

static inline float bf16_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return ember_bf16_to_float(h);
}

#ifdef __AVX512F__
#include <immintrin.h>

/* 16 bfloat16s as floats: each one's bits shifted into the top half. */
static inline __m512 bf16_load(const uint8_t *p)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

/* acc[k0..k0+16) += w * fmaf(scale, codes, bias), codes as 16 bytes. */
static inline void fma16_codes(__m128i codes, __m512 scale, __m512 bias, __m512 w, float *acc)
{
    __m512 v = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(codes)), bias);
    _mm512_storeu_ps(acc, _mm512_fmadd_ps(w, v, _mm512_loadu_ps(acc)));
}

/* The vector part of add_row: the first k elements (a multiple of 16);
 * returns k.  The same fused multiply-adds as the scalar code. */
static inline int32_t add_row_avx512(ember_encoding e, int32_t dim, const uint8_t *row, float w, float *acc)
{
    int32_t k = 0, end = dim & ~15;
    __m512 vw = _mm512_set1_ps(w);
    if (e == EMBER_ENC_FP16) {
        for (; k < end; k += 16) {
            __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * k)));
            _mm512_storeu_ps(acc + k, _mm512_fmadd_ps(vw, v, _mm512_loadu_ps(acc + k)));
        }
    } else if (e == EMBER_ENC_BF16) {
        for (; k < end; k += 16) {
            __m512 v = bf16_load(row + 2 * k);
            _mm512_storeu_ps(acc + k, _mm512_fmadd_ps(vw, v, _mm512_loadu_ps(acc + k)));
        }
    } else if (e == EMBER_ENC_INT8 || e == EMBER_ENC_INT4) {
        uint16_t hs, hb;
        memcpy(&hs, row, 2);
        memcpy(&hb, row + 2, 2);
        __m512 scale = _mm512_set1_ps(ember_half_to_float(hs)), bias = _mm512_set1_ps(ember_half_to_float(hb));
        const uint8_t *q = row + 4;
        if (e == EMBER_ENC_INT8)
            for (; k < end; k += 16)
                fma16_codes(_mm_loadu_si128((const __m128i *)(q + k)), scale, bias, vw, acc + k);
        else
            for (; k < end; k += 16) { /* 8 bytes: element 2j in the low nibble of byte j */
                __m128i x = _mm_loadl_epi64((const __m128i *)(q + k / 2)), m = _mm_set1_epi8(15);
                __m128i lo = _mm_and_si128(x, m), hi = _mm_and_si128(_mm_srli_epi16(x, 4), m);
                fma16_codes(_mm_unpacklo_epi8(lo, hi), scale, bias, vw, acc + k);
            }
    }
    return e == EMBER_ENC_FP32 ? 0 : k;
}
#endif

/* acc[k] += w * decode(row)[k] for k in [k0, dim). */
static inline void add_row_tail(ember_encoding e, int32_t dim, int32_t k0, const uint8_t *row, float w, float *acc)
{
    switch (e) {
    case EMBER_ENC_FP32: {
        const float *v = (const float *)row;
#pragma omp simd
        for (int32_t k = k0; k < dim; k++)
            acc[k] = __builtin_fmaf(w, v[k], acc[k]);
        break;
    }
    case EMBER_ENC_FP16: {
        float v[EMBER_QPOOL_MAX_DIM];
        for (int32_t k = k0; k < dim; k++)
            v[k] = half_at(row + 2 * k);
#pragma omp simd
        for (int32_t k = k0; k < dim; k++)
            acc[k] = __builtin_fmaf(w, v[k], acc[k]);
        break;
    }
    case EMBER_ENC_BF16: {
#pragma omp simd
        for (int32_t k = k0; k < dim; k++)
            acc[k] = __builtin_fmaf(w, bf16_at(row + 2 * k), acc[k]);
        break;
    }
    case EMBER_ENC_INT8: {
        const float scale = half_at(row), bias = half_at(row + 2);
        const uint8_t *q = row + 4;
#pragma omp simd
        for (int32_t k = k0; k < dim; k++)
            acc[k] = __builtin_fmaf(w, __builtin_fmaf(scale, (float)q[k], bias), acc[k]);
        break;
    }
    case EMBER_ENC_INT4: {
        const float scale = half_at(row), bias = half_at(row + 2);
        const uint8_t *q = row + 4;
#pragma omp simd
        for (int32_t k = k0; k < dim; k++) {
            float c = (float)((q[k >> 1] >> ((k & 1) << 2)) & 15);
            acc[k] = __builtin_fmaf(w, __builtin_fmaf(scale, c, bias), acc[k]);
        }
        break;
    }
    }
}

/* acc += w * decode(row); dim elements. */
static inline void add_row(ember_encoding e, int32_t dim, const uint8_t *row, float w, float *acc)
{
#ifdef __AVX512F__
    int32_t done = add_row_avx512(e, dim, row, w, acc); /* the scalar code does the rest */
    if (done < dim)
        add_row_tail(e, dim, done, row, w, acc);
#else
    add_row_tail(e, dim, 0, row, w, acc);
#endif
}

#ifdef __AVX512F__
/* Bags of one encoding at a compile-time dim (a multiple of 16): the
 * accumulator lives in DIM/16 registers for the whole bag.  The same fused
 * multiply-adds, in the same order, as add_row. */
#define LOAD_FP32(row, v, scale, bias) _mm512_loadu_ps((const float *)(row) + 16 * (v))
#define LOAD_FP16(row, v, scale, bias) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((row) + 32 * (v))))
#define LOAD_BF16(row, v, scale, bias) bf16_load((row) + 32 * (v))
#define LOAD_INT8(row, v, scale, bias)                                                                      \
    _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)((row) + 4 + 16 * (v))))), bias)
#define LOAD_INT4(row, v, scale, bias) _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(nibbles((row) + 4 + 8 * (v)))), bias)

static inline __m128i nibbles(const uint8_t *q) /* 8 bytes -> 16 codes, element 2j from byte j's low nibble */
{
    __m128i x = _mm_loadl_epi64((const __m128i *)q), m = _mm_set1_epi8(15);
    return _mm_unpacklo_epi8(_mm_and_si128(x, m), _mm_and_si128(_mm_srli_epi16(x, 4), m));
}

static inline __m512 half_splat(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _mm512_set1_ps(ember_half_to_float(h));
}

#define DEFINE_BAGS(NAME, DIM, LOAD, QUANT, RB)                                                              \
    static void NAME(const ember_qpool_args *a, int64_t b0, int64_t b1)                                    \
    {                                                                                                        \
        enum { V = (DIM) / 16 };                                                                             \
        const int64_t rb = (RB), n = a->offsets[a->bags];                                                   \
        for (int64_t b = b0; b < b1; b++) {                                                                  \
            __m512 acc[V];                                                                                   \
            for (int v = 0; v < V; v++)                                                                      \
                acc[v] = _mm512_setzero_ps();                                                                \
            for (int64_t e = a->offsets[b]; e < a->offsets[b + 1]; e++) {                                   \
                if (e + PREFETCH < n)                                                                        \
                    prefetch_row(a->rows + (int64_t)a->ids[e + PREFETCH] * rb, rb);                          \
                if (a->ids[e] == EMBER_QPOOL_SKIP)                                                           \
                    continue;                                                                                \
                const uint8_t *row = a->rows + (int64_t)a->ids[e] * rb;                                     \
                __m512 w = _mm512_set1_ps(a->weights ? a->weights[e] : 1.0f);                               \
                __m512 scale = QUANT ? half_splat(row) : w, bias = QUANT ? half_splat(row + 2) : w;          \
                (void)scale, (void)bias;                                                                     \
                for (int v = 0; v < V; v++)                                                                  \
                    acc[v] = _mm512_fmadd_ps(w, LOAD(row, v, scale, bias), acc[v]);                          \
            }                                                                                                \
            float dv = a->divisors ? a->divisors[b] : 1.0f, *o = out_of(a, b, DIM);                         \
            for (int v = 0; v < V; v++)                                                                      \
                _mm512_storeu_ps(o + 16 * v, dv == 1.0f   ? acc[v]                                           \
                                             : dv == 0.0f ? _mm512_setzero_ps()                              \
                                                          : _mm512_div_ps(acc[v], _mm512_set1_ps(dv)));      \
        }                                                                                                    \
    }

/* A row's bytes at a compile-time dim (quant.c's ember_quant_row_bytes),
 * so that the prefetch of a row unrolls. */
#define RB_FP32(D) (4 * (D))
#define RB_FP16(D) (2 * (D))
#define RB_BF16(D) (2 * (D))
#define RB_INT8(D) (4 + (D))
#define RB_INT4(D) (4 + (D) / 2)

#define DEFINE_DIMS(ENC, LOAD, QUANT, RB)                                                                    \
    DEFINE_BAGS(bags_##ENC##_16, 16, LOAD, QUANT, RB(16))                                                    \
    DEFINE_BAGS(bags_##ENC##_32, 32, LOAD, QUANT, RB(32))                                                    \
    DEFINE_BAGS(bags_##ENC##_64, 64, LOAD, QUANT, RB(64))                                                    \
    DEFINE_BAGS(bags_##ENC##_128, 128, LOAD, QUANT, RB(128))                                                 \
    DEFINE_BAGS(bags_##ENC##_256, 256, LOAD, QUANT, RB(256))

DEFINE_DIMS(fp32, LOAD_FP32, 0, RB_FP32)
DEFINE_DIMS(fp16, LOAD_FP16, 0, RB_FP16)
DEFINE_DIMS(int8, LOAD_INT8, 1, RB_INT8)
DEFINE_DIMS(int4, LOAD_INT4, 1, RB_INT4)
DEFINE_DIMS(bf16, LOAD_BF16, 0, RB_BF16)

typedef void (*bags_fn)(const ember_qpool_args *, int64_t, int64_t);

/* The kernel for this encoding and dim, or NULL (the generic loop). */
static bags_fn pick(ember_encoding e, int32_t dim)
{
    static const bags_fn table[5][5] = {
        {bags_fp32_16, bags_fp32_32, bags_fp32_64, bags_fp32_128, bags_fp32_256},
        {bags_fp16_16, bags_fp16_32, bags_fp16_64, bags_fp16_128, bags_fp16_256},
        {bags_int8_16, bags_int8_32, bags_int8_64, bags_int8_128, bags_int8_256},
        {bags_int4_16, bags_int4_32, bags_int4_64, bags_int4_128, bags_int4_256},
        {bags_bf16_16, bags_bf16_32, bags_bf16_64, bags_bf16_128, bags_bf16_256},
    };
    int d = dim == 16 ? 0 : dim == 32 ? 1 : dim == 64 ? 2 : dim == 128 ? 3 : dim == 256 ? 4 : -1;
    return d >= 0 && (unsigned)e < 5 ? table[e][d] : NULL;
}
#endif

static void pool_range(const ember_qpool_args *a, int64_t b0, int64_t b1)
{
#ifdef __AVX512F__
    bags_fn fn = pick(a->encoding, a->dim);
    if (fn) {
        fn(a, b0, b1);
        return;
    }
#endif
    float acc[EMBER_QPOOL_MAX_DIM];
    const int32_t dim = a->dim;
    const int64_t rb = a->row_bytes, n = a->offsets[a->bags];
    for (int64_t b = b0; b < b1; b++) {
        for (int32_t k = 0; k < dim; k++)
            acc[k] = 0.0f;
        for (int64_t e = a->offsets[b]; e < a->offsets[b + 1]; e++) {
            if (e + PREFETCH < n)
                prefetch_row(a->rows + (int64_t)a->ids[e + PREFETCH] * rb, rb);
            if (a->ids[e] != EMBER_QPOOL_SKIP)
                add_row(a->encoding, dim, a->rows + (int64_t)a->ids[e] * rb, a->weights ? a->weights[e] : 1.0f, acc);
        }
        float dv = a->divisors ? a->divisors[b] : 1.0f, *o = out_of(a, b, dim);
        for (int32_t k = 0; k < dim; k++)
            o[k] = dv == 1.0f ? acc[k] : dv == 0.0f ? 0.0f : acc[k] / dv;
    }
}

void ember_qpool(const ember_qpool_args *a, int threads)
{
    int64_t n = a->offsets[a->bags] - a->offsets[0];
    if (threads > 1 && n < 4096)
        threads = 1;
#pragma omp parallel num_threads(threads > 0 ? threads : 1)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        pool_range(a, ember_split_segments(a->offsets, 0, a->bags, t, nt),
                   ember_split_segments(a->offsets, 0, a->bags, t + 1, nt));
    }
}
