/*
 * cfg_values.c: the config file's values, read with their checks
 * (cfg_read.h): integers, numbers, booleans, strings, paths relative to the
 * file, one of a list of names, byte sizes with units; the keys a group
 * may hold; and the message of every failure, naming file, line and key:
 *   configs/w1.cfg:12: tables[0].dim: must be in 1..1024, got 2000
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_read.h"

int cfg_fail_at(cfg_reader *r, const config_setting_t *s, const char *key, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    unsigned line = s ? config_setting_source_line(s) : 0;
    if (line)
        snprintf(r->err, r->errlen, "%s:%u: %s: %s", r->path, line, key, msg);
    else
        snprintf(r->err, r->errlen, "%s: %s: %s", r->path, key, msg);
    return EMBER_EINVAL;
}

char *cfg_keep(cfg_reader *r, const char *s)
{
    config_file *cf = r->cf;
    int32_t n = cf->num_strings;
    if ((n & (n - 1)) == 0) { /* room for 2n: doubling, as a million names must not cost n^2 copies */
        char **v = realloc(cf->strings, sizeof *v * (size_t)(n ? 2 * n : 1));
        if (!v)
            return NULL;
        cf->strings = v;
    }
    char *c = strdup(s);
    if (c)
        cf->strings[cf->num_strings++] = c;
    return c;
}

static const char *type_name(int type)
{
    switch (type) {
    case CONFIG_TYPE_GROUP: return "a group { }";
    case CONFIG_TYPE_INT: case CONFIG_TYPE_INT64: return "an integer";
    case CONFIG_TYPE_FLOAT: return "a number";
    case CONFIG_TYPE_STRING: return "a string";
    case CONFIG_TYPE_BOOL: return "a boolean";
    case CONFIG_TYPE_ARRAY: return "an array [ ]";
    case CONFIG_TYPE_LIST: return "a list ( )";
    default: return "something else";
    }
}

/* An integer setting (int, int64, or a float with an integral value). */
int cfg_get_int64(cfg_reader *r, const config_setting_t *s, const char *key, int64_t lo,
                     int64_t hi, int64_t *out)
{
    int64_t v;
    switch (config_setting_type(s)) {
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64:
        v = config_setting_get_int64(s);
        break;
    case CONFIG_TYPE_FLOAT: {
        double d = config_setting_get_float(s);
        if (!(d == floor(d)) || fabs(d) > 9.0e18)
            return cfg_fail_at(r, s, key, "must be a whole number, got %g", d);
        v = (int64_t)d;
        break;
    }
    default:
        return cfg_fail_at(r, s, key, "must be an integer, got %s",
                       type_name(config_setting_type(s)));
    }
    if (v < lo || v > hi)
        return cfg_fail_at(r, s, key, "must be in %lld..%lld, got %lld", (long long)lo,
                       (long long)hi, (long long)v);
    *out = v;
    return 0;
}

int cfg_get_double(cfg_reader *r, const config_setting_t *s, const char *key, double lo,
                      double hi, double *out)
{
    double v;
    int t = config_setting_type(s);
    if (t == CONFIG_TYPE_FLOAT)
        v = config_setting_get_float(s);
    else if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64)
        v = (double)config_setting_get_int64(s);
    else
        return cfg_fail_at(r, s, key, "must be a number, got %s", type_name(t));
    if (!(v >= lo && v <= hi))
        return cfg_fail_at(r, s, key, "must be in [%g, %g], got %g", lo, hi, v);
    *out = v;
    return 0;
}

int cfg_get_bool(cfg_reader *r, const config_setting_t *s, const char *key, int *out)
{
    if (config_setting_type(s) != CONFIG_TYPE_BOOL)
        return cfg_fail_at(r, s, key, "must be true or false, got %s",
                       type_name(config_setting_type(s)));
    *out = config_setting_get_bool(s);
    return 0;
}

int cfg_get_string(cfg_reader *r, const config_setting_t *s, const char *key, const char **out)
{
    if (config_setting_type(s) != CONFIG_TYPE_STRING)
        return cfg_fail_at(r, s, key, "must be a string, got %s", type_name(config_setting_type(s)));
    *out = config_setting_get_string(s);
    return 0;
}

/* A path in the config: a relative one is relative to the config file's
 * folder (the file can move with its data), "" stays "" (none). */
int cfg_read_path(cfg_reader *r, const config_setting_t *m, const char *key, const char **out)
{
    const char *s = NULL;
    if (cfg_get_string(r, m, key, &s))
        return EMBER_EINVAL;
    const char *slash = strrchr(r->path, '/');
    if (s[0] && s[0] != '/' && slash) {
        size_t dir = (size_t)(slash - r->path) + 1, n = dir + strlen(s) + 1;
        char *joined = malloc(n);
        if (joined) {
            memcpy(joined, r->path, dir);
            memcpy(joined + dir, s, strlen(s) + 1);
            *out = cfg_keep(r, joined);
            free(joined);
        } else {
            *out = NULL;
        }
    } else {
        *out = cfg_keep(r, s);
    }
    if (!*out)
        return cfg_fail_at(r, NULL, key, "out of memory");
    return 0;
}

/* One of names[] (NULL-terminated) -> its index. */
int cfg_get_enum(cfg_reader *r, const config_setting_t *s, const char *key,
                    const char *const *names, int *out)
{
    const char *v = NULL;
    if (cfg_get_string(r, s, key, &v))
        return EMBER_EINVAL;
    char known[256] = "";
    for (int i = 0; names[i]; i++) {
        if (!strcmp(v, names[i])) {
            *out = i;
            return 0;
        }
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                 names[i]);
    }
    return cfg_fail_at(r, s, key, "unknown value \"%s\" (one of: %s)", v, known);
}

int config_parse_bytes(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0))
        return EMBER_EINVAL;
    while (*end == ' ')
        end++;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024.0; break;
    case 'M': mul = 1024.0 * 1024; break;
    case 'G': mul = 1024.0 * 1024 * 1024; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; break;
    case 'P': mul = 1024.0 * 1024 * 1024 * 1024 * 1024; break;
    case 'B': case '\0': break;
    default: return EMBER_EINVAL;
    }
    if (mul > 1) {
        end++;
        if (!strcmp(end, "iB") || !strcmp(end, "B") || !*end)
            end += strlen(end);
    } else if (toupper((unsigned char)*end) == 'B') {
        end++;
    }
    if (*end || v * mul > 9.0e18)
        return EMBER_EINVAL;
    *out = (int64_t)llround(v * mul);
    return 0;
}

/* Bytes: an integer, a number, or a string with a unit ("64 GiB"). */
int cfg_get_bytes(cfg_reader *r, const config_setting_t *s, const char *key, int64_t *out)
{
    if (config_setting_type(s) == CONFIG_TYPE_STRING) {
        if (config_parse_bytes(config_setting_get_string(s), out))
            return cfg_fail_at(r, s, key, "bad size \"%s\" (e.g. 1048576, \"512 MiB\", \"64G\")",
                           config_setting_get_string(s));
        return 0;
    }
    return cfg_get_int64(r, s, key, 0, INT64_MAX, out);
}

/* Every member of group g must be one of names[] (NULL-terminated). */
int cfg_check_keys(cfg_reader *r, const config_setting_t *g, const char *where,
                      const char *const *names)
{
    int n = config_setting_length(g);
    for (int i = 0; i < n; i++) {
        const config_setting_t *m = config_setting_get_elem(g, (unsigned)i);
        const char *k = config_setting_name(m);
        int ok = 0;
        for (int j = 0; names[j] && !ok; j++)
            ok = k && !strcmp(k, names[j]);
        if (!ok) {
            char known[512] = "", key[160];
            for (int j = 0; names[j]; j++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
                         j ? ", " : "", names[j]);
            snprintf(key, sizeof key, "%s%s%s", where, *where ? "." : "", k ? k : "?");
            return cfg_fail_at(r, m, key, "unknown key (known here: %s)", known);
        }
    }
    return 0;
}
