/*
 * ctr_visits.c: the shuffled order of a share's blocks (ctr_visits.h),
 * shared by the binary and the text sources so both shuffle alike.
 */
#include <stdlib.h>
#include <string.h>

#include "data/ctr_visits.h"
#include "ember.h"

/* Items of block b that lie in the share: [*lo, *hi). */
static void block_part(const ctr_visits *v, int64_t b, int64_t *lo, int64_t *hi)
{
    *lo = b * v->K > v->begin ? b * v->K : v->begin;
    *hi = (b + 1) * v->K < v->end ? (b + 1) * v->K : v->end;
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* The order of `epoch` (Fisher-Yates; (seed, rank, epoch) alone decide
 * it), and the ordinals where each visit starts. */
static void order_epoch(ctr_visits *v, int64_t epoch)
{
    uint64_t x = v->seed ^ ((uint64_t)v->rank * 0xD1B54A32D192ED03ULL) ^ ((uint64_t)epoch * 0x8CB92BA72F3D8DD7ULL);
    for (int64_t i = 0; i < v->nb; i++)
        v->order[i] = i;
    for (int64_t i = v->nb - 1; i > 0; i--) {
        int64_t k = (int64_t)(splitmix(&x) % (uint64_t)(i + 1));
        int64_t t = v->order[i];
        v->order[i] = v->order[k];
        v->order[k] = t;
    }
    v->lstart[0] = 0;
    for (int64_t i = 0; i < v->nb; i++) {
        int64_t lo, hi;
        block_part(v, v->b0 + v->order[i], &lo, &hi);
        v->lstart[i + 1] = v->lstart[i] + (hi - lo);
    }
}

void ctr_visits_start(ctr_visits *v, int64_t epoch, int64_t lpos)
{
    order_epoch(v, epoch);
    int64_t lo = 0, hi = v->nb; /* the last visit with lstart <= lpos */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (v->lstart[mid] <= lpos)
            lo = mid;
        else
            hi = mid;
    }
    v->lpos = lpos;
    v->j = lo;
}

int ctr_visits_init(ctr_visits *v, uint64_t seed, int32_t rank, int64_t begin, int64_t end, int64_t K,
                    int64_t epoch)
{
    ctr_visits_free(v);
    v->seed = seed;
    v->rank = rank;
    v->begin = begin;
    v->end = end;
    v->K = K;
    v->b0 = begin / K;
    v->nb = (end > begin ? (end - 1) / K + 1 : v->b0) - v->b0;
    v->order = malloc(sizeof(int64_t) * (size_t)(v->nb + 1));
    v->lstart = malloc(sizeof(int64_t) * (size_t)(v->nb + 2));
    if (!v->order || !v->lstart) {
        ctr_visits_free(v);
        return EMBER_ENOMEM;
    }
    ctr_visits_start(v, epoch, 0);
    return 0;
}

void ctr_visits_free(ctr_visits *v)
{
    free(v->order);
    free(v->lstart);
    v->order = v->lstart = NULL;
}

int64_t ctr_visits_item(ctr_visits *v)
{
    while (v->j + 1 < v->nb && v->lpos >= v->lstart[v->j + 1])
        v->j++;
    int64_t lo, hi;
    block_part(v, v->b0 + v->order[v->j], &lo, &hi);
    return lo + (v->lpos - v->lstart[v->j]);
}

int64_t ctr_visits_left_in_block(ctr_visits *v)
{
    if (v->nb == 0 || v->lpos >= v->lstart[v->nb])
        return 0;
    ctr_visits_item(v); /* moves j to lpos's visit */
    return v->lstart[v->j + 1] - v->lpos;
}
