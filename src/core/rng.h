/*
 * rng.h: counter-based random numbers.
 *
 * A value is a pure function of its coordinates (seed, table key, row,
 * column, stream), never of a generator's position, so a row's initial values
 * do not depend on sharding, thread count, stacking or creation order
 * (include/ember.h, ember_collection_create).  The mix is splitmix64's finaliser applied to a
 * Weyl-style combination of the coordinates; it is a bijection per input word
 * and passes the usual avalanche checks, which is all initialisation needs.
 */
#ifndef EMBER_CORE_RNG_H
#define EMBER_CORE_RNG_H

#include <stdint.h>

static inline uint64_t ember_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Key of one table: seed and XXH64 of the table's name. */
static inline uint64_t ember_rng_table_key(uint64_t seed, uint64_t name_hash)
{
    return ember_mix64(seed * 0x9e3779b97f4a7c15ULL ^ ember_mix64(name_hash + 0x632be59bd9b4e019ULL));
}

/* The row's half of ember_rng_bits: computed once for a whole row. */
static inline uint64_t ember_rng_row(uint64_t key, uint64_t row)
{
    return key ^ ember_mix64(row * 0xd1b54a32d192ed03ULL + 0x8cb92ba72f3d8dd7ULL);
}

/* 64 random bits at column col, stream of a row from ember_rng_row. */
static inline uint64_t ember_rng_col(uint64_t row_bits, uint64_t col, uint64_t stream)
{
    return ember_mix64(row_bits ^ (col * 0xabc98388fb8fac03ULL) ^ (stream << 56));
}

/* 64 random bits at (key, row, col, stream). */
static inline uint64_t ember_rng_bits(uint64_t key, uint64_t row, uint64_t col, uint64_t stream)
{
    return ember_rng_col(ember_rng_row(key, row), col, stream);
}

/* Uniform in [0, 1) with 24 random bits: exactly representable as float. */
static inline float ember_rng_uniform(uint64_t key, uint64_t row, uint64_t col, uint64_t stream)
{
    return (float)(ember_rng_bits(key, row, col, stream) >> 40) * 0x1.0p-24f;
}

#endif
