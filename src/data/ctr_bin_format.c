/*
 * ctr_bin_format.c: what a binary CTR file's blocks hold, from its header
 * (ctr_bin_format.h): the layout the reader, the block checks and the
 * writer all go by.
 */
#include <string.h>

#include "data/ctr_bin_format.h"

void cb_layout_init(cb_layout *l, uint32_t version, int64_t D, int64_t S, const int64_t *rows)
{
    memset(l, 0, sizeof *l);
    l->version = version;
    l->D = D;
    l->S = S;
    l->block_fixed = version >= CB_VERSION_WEIGHTS ? 48 : version >= CB_VERSION_KEYS ? 32 : 16;
    l->label_bytes = 1;
    for (int64_t f = 0; f < S; f++) {
        l->keyed[f] = rows[f] == 0;
        l->key_mask |= (uint64_t)l->keyed[f] << f;
    }
}

void cb_layout_weights(cb_layout *l, uint64_t weight_mask, int float_label)
{
    l->weight_mask = weight_mask;
    for (int64_t f = 0; f < l->S; f++)
        l->weighted[f] = (unsigned char)(weight_mask >> f & 1);
    l->float_label = float_label;
    l->label_bytes = float_label ? 4 : 1;
}
