/*
 * cfg_entries.c: the entries of the tables and features lists
 * (cfg_read.h).  Alike tables or features are written once with
 * `count = N` and a "%d" in the name (and a feature's `table`), which makes
 * W2's 26 tables or a cluster's 200 features a few lines; an entry's count
 * and name, the name of each table or feature it expands to, and the names
 * sorted with their index, so that duplicates and look-ups cost n log n.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_read.h"

/* "%d" in pattern replaced by i (only that, never a user format). */
int cfg_expand_name(cfg_reader *r, const config_setting_t *s, const char *key,
                       const char *pattern, int64_t count, int64_t i, char *out, size_t n)
{
    const char *p = strstr(pattern, "%d");
    if (count > 1 && !p)
        return cfg_fail_at(r, s, key, "\"%s\" needs a %%d for the index when count > 1", pattern);
    if (p && strstr(p + 2, "%d"))
        return cfg_fail_at(r, s, key, "\"%s\" has more than one %%d", pattern);
    if (!p) {
        snprintf(out, n, "%s", pattern);
    } else {
        snprintf(out, n, "%.*s%lld%s", (int)(p - pattern), pattern, (long long)i, p + 2);
    }
    if (!out[0])
        return cfg_fail_at(r, s, key, "must not be empty");
    return 0;
}

/* count and name of a list entry; *count >= 1. */
int cfg_entry_count_name(cfg_reader *r, const config_setting_t *e, const char *where,
                            int64_t *count, const char **name)
{
    char key[160];
    const config_setting_t *m = config_setting_get_member(e, "count");
    *count = 1;
    snprintf(key, sizeof key, "%s.count", where);
    if (m && cfg_get_int64(r, m, key, 1, 1000000, count))
        return EMBER_EINVAL;
    snprintf(key, sizeof key, "%s.name", where);
    m = config_setting_get_member(e, "name");
    if (!m)
        return cfg_fail_at(r, e, key, "missing");
    return cfg_get_string(r, m, key, name);
}

static int name_index_cmp(const void *a, const void *b)
{
    const cfg_name_index *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

int cfg_name_only_cmp(const void *a, const void *b)
{
    return strcmp(((const cfg_name_index *)a)->name, ((const cfg_name_index *)b)->name);
}

/* names[0, n) sorted into *out (NULL on n == 0); -1 when out of memory. */
int cfg_name_index_build(const char *(*name_of)(const config_file *, int32_t), const config_file *cf,
                            int32_t n, cfg_name_index **out)
{
    *out = NULL;
    if (n == 0)
        return 0;
    cfg_name_index *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return EMBER_EINVAL;
    for (int32_t i = 0; i < n; i++)
        v[i] = (cfg_name_index){name_of(cf, i), i};
    qsort(v, (size_t)n, sizeof *v, name_index_cmp);
    *out = v;
    return 0;
}

/* The first name (in index order) that an earlier one repeats: its index
 * in *later and the earliest one's in *first; 0 when all are distinct. */
int cfg_name_index_duplicate(const cfg_name_index *v, int32_t n, int32_t *first, int32_t *later)
{
    int found = 0;
    for (int32_t i = 0; i + 1 < n; i++)
        if (!strcmp(v[i].name, v[i + 1].name) && (i == 0 || strcmp(v[i - 1].name, v[i].name)) &&
            (!found || v[i + 1].index < *later)) {
            *first = v[i].index; /* the run's first entry: the earliest index */
            *later = v[i + 1].index;
            found = 1;
        }
    return found;
}

const char *cfg_table_name_of(const config_file *cf, int32_t i) { return cf->tables[i].name; }

int cfg_entries_total(cfg_reader *r, const config_setting_t *list, const char *what, const char *one,
                      const char *hint, const char *const *keys, int64_t *total)
{
    int n = config_setting_length(list);
    *total = 0;
    for (int i = 0; i < n; i++) {
        char where[64];
        snprintf(where, sizeof where, "%s[%d]", what, i);
        const config_setting_t *e = config_setting_get_elem(list, (unsigned)i);
        int64_t count;
        const char *name;
        if (config_setting_type(e) != CONFIG_TYPE_GROUP)
            return cfg_fail_at(r, e, where, "must be a group %s", hint);
        if ((keys && cfg_check_keys(r, e, where, keys)) || cfg_entry_count_name(r, e, where, &count, &name))
            return EMBER_EINVAL;
        *total += count;
    }
    if (*total < 1)
        return cfg_fail_at(r, list, what, "must hold at least one %s", one);
    if (*total > 1000000)
        return cfg_fail_at(r, list, what, "too many %s (%lld)", what, (long long)*total);
    return EMBER_OK;
}
