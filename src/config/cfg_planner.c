/*
 * cfg_planner.c: the config file's `planner` group (docs/config.md): the
 * world to plan for, the memory per rank, what may be replicated, and the
 * weight of a looked-up byte against a network byte.
 */
#include "config/cfg_read.h"

int cfg_read_planner(cfg_reader *r, const config_setting_t *g)
{
    static const char *const KEYS[] = {"world", "memory_per_rank", "replicate_threshold",
                                       "lookup_weight", NULL};
    cfg_planner *p = &r->cf->planner;
    if (!g)
        return 0;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, g, "planner", "must be a group { world = ...; }");
    if (cfg_check_keys(r, g, "planner", KEYS))
        return EMBER_EINVAL;
    const config_setting_t *m;
    int64_t v;
    if ((m = config_setting_get_member(g, "world"))) {
        if (cfg_get_int64(r, m, "planner.world", 1, 1 << 20, &v))
            return EMBER_EINVAL;
        p->world = (int32_t)v;
    }
    if ((m = config_setting_get_member(g, "memory_per_rank")) &&
        cfg_get_bytes(r, m, "planner.memory_per_rank", &p->memory_per_rank))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "replicate_threshold")) &&
        cfg_get_bytes(r, m, "planner.replicate_threshold", &p->replicate_threshold))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "lookup_weight")) &&
        cfg_get_double(r, m, "planner.lookup_weight", 0, 1e6, &p->lookup_weight))
        return EMBER_EINVAL;
    return 0;
}
