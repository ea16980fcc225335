/*
 * names.c: the public names of ember's enums and its size syntax (ember.h,
 * "names, sizes").  The names are those config files and checkpoint
 * manifests already use (src/config, src/ckpt), so a program printing a
 * placement and a config naming one say the same word; sizes are parsed
 * by the config reader's rule and formatted by the planner's.
 */
#include "ckpt/ckpt.h"
#include "config/config_file.h"
#include "ember.h"
#include "plan/plan.h"

const char *ember_placement_name(ember_placement p) { return ckpt_placement_name(p); }
const char *ember_optimizer_name(ember_optimizer_kind k) { return ckpt_optimizer_name(k); }
const char *ember_init_name(ember_init_kind k) { return ckpt_init_name(k); }
const char *ember_evict_name(ember_evict_policy e) { return ckpt_evict_name(e); }
const char *ember_schedule_name(ember_schedule s) { return config_schedule_name(s); }
const char *ember_precision_name(ember_row_precision p) { return ckpt_precision_name(p); }

const char *ember_rounding_name(ember_rounding r)
{
    static const char *const names[] = {"stochastic", "nearest"};
    return (unsigned)r < 2 ? names[r] : "?";
}

const char *ember_drift_name(ember_drift d)
{
    static const char *const names[] = {"none", "rotate", "grow"};
    return (unsigned)d < 3 ? names[d] : "?";
}

const char *ember_exchange_name(ember_exchange x)
{
    return (unsigned)x < 2 ? config_exchange_name((int)x) : "?";
}

/* Not kept by name elsewhere in the library: config_file.c reads them from
 * tables of its own, in this order (ember.h's). */
const char *ember_storage_name(ember_storage s)
{
    static const char *const names[] = {"auto", "memory", "ssd"};
    return (unsigned)s < 3 ? names[s] : "?";
}

const char *ember_cache_policy_name(ember_cache_policy p)
{
    static const char *const names[] = {"default", "lru", "lfu", "lookahead"};
    return (unsigned)p < 4 ? names[p] : "?";
}

int ember_parse_bytes(const char *text, int64_t *out)
{
    int64_t v;
    if (!text || config_parse_bytes(text, &v))
        return EMBER_EINVAL;
    *out = v;
    return 0;
}

const char *ember_format_bytes(double bytes, char *buf, size_t n) { return plan_format_bytes(bytes, buf, n); }
