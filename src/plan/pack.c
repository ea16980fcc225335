/*
 * pack.c: table-wise bin packing, longest processing time first (plan.h).
 *
 * Graham's LPT rule: the largest remaining item goes to the currently least
 * loaded bin.  It is within 4/3 of the optimal makespan, simple to explain,
 * and with memory as a second dimension it only skips bins without room.
 * O(items * (log items + bins)); the bins scan is linear because a plan has
 * at most a few thousand ranks and tables.
 */
#include <stdlib.h>

#include "plan/plan.h"

typedef struct pack_item {
    double load;
    int32_t index;
} pack_item;

static int cmp_item(const void *a, const void *b)
{
    const pack_item *x = a, *y = b;
    if (x->load != y->load)
        return x->load > y->load ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

int32_t plan_pack(int32_t items, const double *load, const int64_t *mem, int32_t bins,
                  double *bin_load, int64_t *bin_free, int32_t *bin_of)
{
    for (int32_t i = 0; i < items; i++)
        bin_of[i] = -1;
    if (items <= 0)
        return -1;
    pack_item *order = malloc(sizeof *order * (size_t)items);
    if (!order)
        return 0; /* caller treats it as "does not fit" */
    for (int32_t i = 0; i < items; i++)
        order[i] = (pack_item){load[i], i};
    qsort(order, (size_t)items, sizeof *order, cmp_item);
    int32_t failed = -1;
    for (int32_t k = 0; k < items && failed < 0; k++) {
        int32_t i = order[k].index, best = -1;
        for (int32_t b = 0; b < bins; b++) {
            if (mem && bin_free && bin_free[b] < mem[i])
                continue;
            if (best < 0 || bin_load[b] < bin_load[best])
                best = b;
        }
        if (best < 0) {
            failed = i;
            break;
        }
        bin_of[i] = best;
        bin_load[best] += load[i];
        if (mem && bin_free)
            bin_free[best] -= mem[i];
    }
    free(order);
    return failed;
}
