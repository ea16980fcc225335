/*
 * cfg_names.c: the names the config file gives enum values (cfg_read.h),
 * each list in its enum's order, and the names back from the values for
 * messages and events (config_file.h).
 */
#include <string.h>

#include "collection/config.h"
#include "config/cfg_read.h"

const char *const CFG_PLACEMENTS[] = {"row", "column", "table", "replicated", NULL};
const char *const CFG_EXCHANGES[] = {"rows", "pooled", NULL};
/* by ember_optimizer_kind, then "adamw" (Adam with decoupled weight decay) */
const char *const CFG_OPTIMIZERS[] = {"sgd", "adagrad", "rowwise_adagrad", "adam", "momentum", "ftrl", "rowwise_adam", "lamb", "lars", "adamw", NULL};
const char *const CFG_INITS[] = {"uniform", "normal", "zeros", "constant", NULL};
const char *const CFG_COMBINERS[] = {"sum", "mean", "sqrtn", "none", NULL};
const char *const CFG_POLICIES[] = {"error", "drop", "minibatch", NULL};
const char *const CFG_DISTS[] = {"uniform", "zipf", NULL};
const char *const CFG_STORAGES[] = {"auto", "memory", "ssd", NULL};
const char *const CFG_CACHE_POLICIES[] = {"default", "lru", "lfu", "lookahead", NULL};
const char *const CFG_KINDS[] = {"fixed", "dynamic", NULL};
const char *const CFG_SCHEDULES[] = {"blocking", "overlap", "stale", NULL}; /* ember_schedule order */
const char *const CFG_READERS[] = {"auto", "team", "thread", NULL}; /* cfg_reader_way order */
const char *const CFG_EVICTS[] = {"lru", "lfu", "ttl", "none", NULL};
const char *const CFG_PRECISIONS[] = {"fp32", "fp16", "bf16", NULL};  /* ember_row_precision order */
const char *const CFG_ROUNDINGS[] = {"stochastic", "nearest", NULL}; /* ember_rounding order */
const char *const CFG_SOURCES[] = {"synthetic", "tsv", "binary", "text", NULL};
const char *const CFG_BAD_LINES[] = {"skip", "fail", NULL};
const char *const CFG_INTERACTIONS[] = {"dot", "cat", "dcn", NULL};
const char *const CFG_ACTIVATIONS[] = {"relu", "gelu", "silu", "tanh", "none", NULL};
const char *const CFG_LR_DECAYS[] = {"none", "linear", "cosine", "step", NULL}; /* lr_decay order */

int config_name_parse(const char *const *names, const char *s)
{
    for (int i = 0; s && names[i]; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

int config_schedule_parse(const char *s) { return config_name_parse(CFG_SCHEDULES, s); }

const char *config_schedule_name(ember_schedule s)
{
    return s >= EMBER_SCHEDULE_BLOCKING && s <= EMBER_SCHEDULE_STALE ? CFG_SCHEDULES[s] : "?";
}

const char *config_placement_name(int p) { return p >= 0 && p < 4 ? CFG_PLACEMENTS[p] : "auto"; }

const char *config_exchange_name(int x) { return x >= 0 && x < 2 ? CFG_EXCHANGES[x] : "auto"; }

const char *config_optimizer_name(ember_optimizer_kind k)
{
    return (unsigned)k <= EMBER_OPT_LAST ? CFG_OPTIMIZERS[k] : "?";
}

const char *config_source_name(cfg_source s)
{
    return (unsigned)s < sizeof CFG_SOURCES / sizeof CFG_SOURCES[0] - 1 ? CFG_SOURCES[s] : "?";
}

const char *config_lr_decay_name(lr_decay d)
{
    return d >= LR_DECAY_NONE && d <= LR_DECAY_STEP ? CFG_LR_DECAYS[d] : "?";
}
