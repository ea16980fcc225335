/*
 * cfg_model.c: the config file's `model` group (docs/training.md, "Dense
 * model"): the dense model's widths, interaction, DCN cross layers,
 * activation and seed; and the built-in tables' optimizer and init.
 */
#include <stdio.h>

#include "config/cfg_read.h"

/* An array of 1..DENSE_MAX_LAYERS widths. */
static int read_widths(cfg_reader *r, const config_setting_t *s, const char *key, int32_t *n, int32_t *w)
{
    int t = config_setting_type(s);
    if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
        return cfg_fail_at(r, s, key, "must be an array of layer widths, e.g. [64, 16]");
    int len = config_setting_length(s);
    if (len < 1 || len > DENSE_MAX_LAYERS)
        return cfg_fail_at(r, s, key, "must hold 1..%d widths, got %d", DENSE_MAX_LAYERS, len);
    for (int i = 0; i < len; i++) {
        char sub[96];
        int64_t v = 0;
        snprintf(sub, sizeof sub, "%s[%d]", key, i);
        if (cfg_get_int64(r, config_setting_get_elem(s, (unsigned)i), sub, 1, 65536, &v))
            return EMBER_EINVAL;
        w[i] = (int32_t)v;
    }
    *n = len;
    return 0;
}

/* model.emb_precision, emb_rounding and emb_state_precision: every table's default (the
 * built-in tables' and a `tables` entry's without its own), read before the
 * tables (config_file.c), so not again with the rest of `model`. */
int cfg_read_emb_precision(cfg_reader *r, const config_setting_t *g)
{
    const config_setting_t *m;
    int e;
    if (!g)
        return 0;
    if ((m = config_setting_get_member(g, "emb_precision"))) {
        if (cfg_get_enum(r, m, "model.emb_precision", CFG_PRECISIONS, &e))
            return EMBER_EINVAL;
        r->cf->train.emb_precision = (ember_row_precision)e;
    }
    if ((m = config_setting_get_member(g, "emb_state_precision"))) {
        if (cfg_get_enum(r, m, "model.emb_state_precision", CFG_PRECISIONS, &e))
            return EMBER_EINVAL;
        r->cf->train.emb_state_precision = (ember_row_precision)e;
    }
    if ((m = config_setting_get_member(g, "emb_rounding"))) {
        if (cfg_get_enum(r, m, "model.emb_rounding", CFG_ROUNDINGS, &e))
            return EMBER_EINVAL;
        r->cf->train.emb_rounding = (ember_rounding)e;
    }
    return 0;
}

/* model: the dense half, and the built-in tables' optimizer and init. */
int cfg_read_model(cfg_reader *r, const config_setting_t *g)
{
    static const char *const KEYS[] = {"emb_dim", "bottom", "top", "interaction", "dcn", "activation", "seed",
                                       "emb_optimizer", "emb_init_value", "emb_precision", "emb_rounding",
                                       "emb_state_precision", NULL};
    static const char *const DCN_KEYS[] = {"layers", "rank", NULL};
    cfg_train *t = &r->cf->train;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, g, "model", "must be a group { bottom = [...]; top = [...]; }");
    if (cfg_check_keys(r, g, "model", KEYS))
        return EMBER_EINVAL;
    const config_setting_t *m;
    int64_t v;
    int e;
    dlrm_config *mc = &t->model;
    if ((m = config_setting_get_member(g, "emb_dim"))) {
        if (cfg_get_int64(r, m, "model.emb_dim", 1, 1024, &v))
            return EMBER_EINVAL;
        mc->emb_dim = (int32_t)v;
        if (!config_setting_get_member(g, "bottom"))
            mc->bottom[mc->num_bottom - 1] = mc->emb_dim;
    }
    if ((m = config_setting_get_member(g, "bottom")) && read_widths(r, m, "model.bottom", &mc->num_bottom, mc->bottom))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "top")) && read_widths(r, m, "model.top", &mc->num_top, mc->top))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "interaction"))) {
        if (cfg_get_enum(r, m, "model.interaction", CFG_INTERACTIONS, &e))
            return EMBER_EINVAL;
        mc->interaction = (dense_interaction)e;
    }
    mc->num_cross = mc->interaction == DENSE_INTERACT_DCN ? 3 : 0; /* DCN's default: 3 full cross layers */
    mc->cross_rank = 0;
    if ((m = config_setting_get_member(g, "dcn"))) {
        if (mc->interaction != DENSE_INTERACT_DCN)
            return cfg_fail_at(r, m, "model.dcn", "needs interaction = \"dcn\"");
        if (config_setting_type(m) != CONFIG_TYPE_GROUP)
            return cfg_fail_at(r, m, "model.dcn", "must be a group { layers = 3; rank = 0; }");
        if (cfg_check_keys(r, m, "model.dcn", DCN_KEYS))
            return EMBER_EINVAL;
        const config_setting_t *x;
        if ((x = config_setting_get_member(m, "layers"))) {
            if (cfg_get_int64(r, x, "model.dcn.layers", 1, DENSE_MAX_CROSS, &v))
                return EMBER_EINVAL;
            mc->num_cross = (int32_t)v;
        }
        if ((x = config_setting_get_member(m, "rank"))) {
            if (cfg_get_int64(r, x, "model.dcn.rank", 0, 65536, &v))
                return EMBER_EINVAL;
            mc->cross_rank = (int32_t)v;
        }
    }
    if ((m = config_setting_get_member(g, "activation"))) {
        if (cfg_get_enum(r, m, "model.activation", CFG_ACTIVATIONS, &e))
            return EMBER_EINVAL;
        mc->activation = (dense_activation)e;
    }
    if ((m = config_setting_get_member(g, "seed"))) {
        if (cfg_get_int64(r, m, "model.seed", 0, INT64_MAX, &v))
            return EMBER_EINVAL;
        mc->seed = (uint64_t)v;
    }
    if ((m = config_setting_get_member(g, "emb_optimizer")) &&
        cfg_read_optimizer(r, m, "model.emb_optimizer", &t->emb_optimizer))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "emb_init_value"))) {
        double d;
        if (cfg_get_double(r, m, "model.emb_init_value", 0, 1e3, &d))
            return EMBER_EINVAL;
        t->emb_init_value = (float)d;
    }
    return 0;
}
