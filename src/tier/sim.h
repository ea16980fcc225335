/*
 * sim.h: cache simulations for the SSD tier's benchmark (sim.c).
 */
#ifndef EMBER_TIER_SIM_H
#define EMBER_TIER_SIM_H

#include <stdint.h>

/* Belady's offline optimum on a sequence of steps; rows[s][0..n[s])
 * are the distinct rows (< rows_total) step s needs at once.  Counts the
 * accesses and loads of steps >= first_counted for a cache of cap rows.
 * EMBER_OK; EMBER_ENOMEM; EMBER_ELIMIT when a step has more rows than the
 * cache. */
int ember_cache_sim_belady(const uint32_t *const *rows, const int64_t *n, int64_t steps, int64_t rows_total,
                           int64_t cap, int64_t first_counted, int64_t *accesses, int64_t *loads);

#endif
