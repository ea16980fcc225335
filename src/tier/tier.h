/*
 * tier.h: the stores beyond fp32 rows in memory, for the modules above
 * (create's layout, the planner, checkpoints, tools): the SSD tier's store
 * (ssd.h) and sizes (ssd_size.h), its cache simulation (sim.h), and the
 * store of encoded rows (store_quant.h).  The files of tier/ include the
 * one they need.  Which tables go to the SSD tier is the collection's rule
 * (collection/config.h); the tier's part in a step is step/tier.h.
 */
#ifndef EMBER_TIER_TIER_H
#define EMBER_TIER_TIER_H

#include "tier/sim.h"
#include "tier/ssd.h"
#include "tier/ssd_size.h"
#include "tier/store_quant.h"

#endif
