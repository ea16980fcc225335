/*
 * reserve.h: grow-only buffers.  The step keeps its scratch from batch to
 * batch and only grows it (by half again at least), so once the buffers
 * hold the largest batch a step allocates nothing.
 */
#ifndef EMBER_CORE_RESERVE_H
#define EMBER_CORE_RESERVE_H

#include <stddef.h>
#include <stdint.h>

/* Makes *p hold at least n elements of size sz (*cap counts elements);
 * contents kept.  EMBER_OK, or EMBER_ENOMEM with *p and *cap unchanged. */
int ember_reserve(void **p, int64_t *cap, int64_t n, size_t sz);

#endif
