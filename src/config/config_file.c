/*
 * config_file.c: reads ember's config file with libconfig (config_file.h,
 * docs/config.md): the file read whole, libconfig's parse, then each group
 * by its reader (cfg_read.h) in the order their defaults need; the top
 * level's own settings and the ssd group; and what the tools ask of a
 * config once read (its folders, its weights, its schema, a feature's rows).
 *
 * One trap is closed before libconfig sees the file: libconfig 1.5 wraps a
 * decimal integer above 2^31-1 without a word (5000000000 reads as
 * 705032704), so such literals are refused with their line, asking for the
 * L suffix or float notation (5e9).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/cfg_read.h"

/* Refuses decimal integer literals above 2^31-1 without an L suffix, which
 * libconfig 1.5 wraps silently.  Skips strings and comments. */
static int scan_big_ints(cfg_reader *r, const char *text)
{
    int line = 1;
    for (const char *p = text; *p; p++) {
        if (*p == '\n') {
            line++;
        } else if (*p == '"') {
            for (p++; *p && *p != '"'; p++) {
                if (*p == '\\' && p[1])
                    p++;
                else if (*p == '\n')
                    line++;
            }
            if (!*p)
                return 0; /* libconfig reports the open string */
        } else if (*p == '#' || (*p == '/' && p[1] == '/')) {
            while (p[1] && p[1] != '\n')
                p++;
        } else if (*p == '/' && p[1] == '*') {
            for (p += 2; *p && !(*p == '*' && p[1] == '/'); p++)
                line += *p == '\n';
            if (!*p)
                return 0;
            p++;
        } else if (isdigit((unsigned char)*p) &&
                   (p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '.'))) {
            const char *q = p;
            if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
                for (q = p + 2; isxdigit((unsigned char)*q); q++)
                    ;
            } else {
                while (isdigit((unsigned char)*q))
                    q++;
                if (*q != '.' && *q != 'e' && *q != 'E' && *q != 'L' &&
                    (q - p > 10 || (q - p == 10 && strncmp(p, "2147483647", 10) > 0))) {
                    snprintf(r->err, r->errlen,
                             "%s:%d: the integer %.*s is too large for libconfig's 32-bit "
                             "integers: write %.*sL (64-bit) or use float notation (5e9)",
                             r->path, line, (int)(q - p), p, (int)(q - p), p);
                    return EMBER_EINVAL;
                }
            }
            p = q - 1;
        }
    }
    return 0;
}

static char *slurp(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        char *nb = realloc(buf, 2 * cap + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(err, errlen, "%s: cannot read%s", path, bad ? "" : " (out of memory)");
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

/* ssd = { dir; min_bytes; memory_budget; cache_bytes; policy; lookahead;
 * io_threads; }: the collection's SSD tier rules (docs/tiers.md). */
static int read_ssd(cfg_reader *r, const config_setting_t *g, ember_collection_config *cc)
{
    static const char *const KEYS[] = {"dir", "min_bytes", "memory_budget", "cache_bytes", "policy",
                                       "lookahead", "lookahead_max", "io_threads", NULL};
    if (!g)
        return 0;
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return cfg_fail_at(r, g, "ssd", "must be a group { dir = ...; cache_bytes = ...; }");
    if (cfg_check_keys(r, g, "ssd", KEYS))
        return EMBER_EINVAL;
    const config_setting_t *m;
    int64_t v;
    int k;
    if ((m = config_setting_get_member(g, "dir"))) {
        if (cfg_read_path(r, m, "ssd.dir", &cc->ssd_dir))
            return EMBER_EINVAL;
        r->cf->ssd_dir_line = (int)config_setting_source_line(m);
    }
    if ((m = config_setting_get_member(g, "min_bytes")) && cfg_get_bytes(r, m, "ssd.min_bytes", &cc->ssd_min_bytes))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "memory_budget")) &&
        cfg_get_bytes(r, m, "ssd.memory_budget", &cc->memory_budget))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "cache_bytes")) &&
        cfg_get_bytes(r, m, "ssd.cache_bytes", &cc->ssd_cache_bytes))
        return EMBER_EINVAL;
    if ((m = config_setting_get_member(g, "policy"))) {
        if (cfg_get_enum(r, m, "ssd.policy", CFG_CACHE_POLICIES, &k))
            return EMBER_EINVAL;
        cc->ssd_policy = (ember_cache_policy)k;
    }
    if ((m = config_setting_get_member(g, "lookahead"))) {
        if (cfg_get_int64(r, m, "ssd.lookahead", 1, 63, &v))
            return EMBER_EINVAL;
        cc->lookahead = (int32_t)v;
    }
    if ((m = config_setting_get_member(g, "lookahead_max"))) {
        if (cfg_get_int64(r, m, "ssd.lookahead_max", 1, 63, &v))
            return EMBER_EINVAL;
        cc->lookahead_max = (int32_t)v;
    }
    if ((m = config_setting_get_member(g, "io_threads"))) {
        if (cfg_get_int64(r, m, "ssd.io_threads", 1, 256, &v))
            return EMBER_EINVAL;
        cc->io_threads = (int32_t)v;
    }
    return 0;
}

/* The top level's settings of the collection: seed, stacking, dedup,
 * debug checks, bounds, shards, threads. */
static int read_collection(cfg_reader *r, config_t *c, ember_collection_config *cc)
{
    const config_setting_t *m;
    int64_t v = 0;
    int b = 0;
    if ((m = config_lookup(c, "seed"))) {
        if (cfg_get_int64(r, m, "seed", 0, INT64_MAX, &v))
            return EMBER_EINVAL;
        cc->seed = (uint64_t)v;
    }
    if ((m = config_lookup(c, "stack_tables"))) {
        if (cfg_get_bool(r, m, "stack_tables", &b))
            return EMBER_EINVAL;
        cc->stack_tables = b;
    }
    if ((m = config_lookup(c, "dedup"))) {
        if (cfg_get_bool(r, m, "dedup", &b))
            return EMBER_EINVAL;
        cc->dedup = b;
    }
    if ((m = config_lookup(c, "debug_checks"))) {
        if (cfg_get_bool(r, m, "debug_checks", &b))
            return EMBER_EINVAL;
        cc->debug_checks = b;
    }
    if ((m = config_lookup(c, "bounds"))) {
        static const char *const BOUNDS[] = {"error", "drop", NULL};
        if (cfg_get_enum(r, m, "bounds", BOUNDS, &b))
            return EMBER_EINVAL;
        cc->bounds = (ember_bounds_policy)b;
    }
    if ((m = config_lookup(c, "num_shards"))) {
        if (cfg_get_int64(r, m, "num_shards", 0, INT32_MAX, &v))
            return EMBER_EINVAL;
        cc->num_shards = (int32_t)v;
    }
    if ((m = config_lookup(c, "threads"))) {
        if (cfg_get_int64(r, m, "threads", 0, 4096, &v))
            return EMBER_EINVAL;
        cc->threads = (int32_t)v;
    }
    return 0;
}

/* The train and model groups made to follow the tables.  A file for other
 * commands keeps, in train.error, what keeps it from `ember train`. */
static int read_train_shape(cfg_reader *r, config_t *c)
{
    config_file *cf = r->cf;
    if (cf->train.present)
        return cfg_train_from_tables(r, c) || cfg_train_finish(r, c) ? -1 : 0;
    cfg_reader quiet = *r;
    quiet.err = cf->train.error;
    quiet.errlen = sizeof cf->train.error;
    if (cfg_train_from_tables(&quiet, c) == 0)
        cfg_train_finish(&quiet, c);
    return 0;
}

/* A table pinned to an owner outside planner.world. */
static int check_owners(cfg_reader *r, config_t *c)
{
    const config_file *cf = r->cf;
    for (int32_t t = 0; t < cf->num_tables; t++) {
        const cfg_table_extra *x = &cf->table_extra[t];
        if (x->owner_pin >= cf->planner.world && config_lookup(c, "planner.world")) {
            snprintf(r->err, r->errlen, "%s:%d: tables: table \"%s\": owner %d is not a rank of "
                     "planner.world = %d", r->path, x->line, cf->tables[t].name, x->owner_pin,
                     cf->planner.world);
            return EMBER_EINVAL;
        }
    }
    return 0;
}

/* The whole file, group by group, in the order their defaults need. */
static int read_top(cfg_reader *r, config_t *c)
{
    static const char *const KEYS[] = {"name", "seed", "stack_tables", "dedup", "debug_checks",
                                       "bounds", "num_shards", "threads", "tables", "features",
                                       "data", "planner", "train", "model", "ssd", NULL};
    config_file *cf = r->cf;
    const config_setting_t *root = config_root_setting(c), *m;
    if (cfg_check_keys(r, root, "", KEYS))
        return EMBER_EINVAL;
    ember_collection_config *cc = &cf->coll;
    if ((m = config_lookup(c, "name"))) {
        const char *s = NULL;
        if (cfg_get_string(r, m, "name", &s))
            return EMBER_EINVAL;
        free(cf->name);
        if (!(cf->name = strdup(s)))
            return cfg_fail_at(r, NULL, "name", "out of memory");
    }
    if (read_collection(r, c, cc))
        return EMBER_EINVAL;
    /* data first: it gives the tables' default id law */
    if (cfg_read_data(r, config_lookup(c, "data")) || cfg_read_planner(r, config_lookup(c, "planner")) ||
        read_ssd(r, config_lookup(c, "ssd"), cc))
        return EMBER_EINVAL;
    /* the tables' default optimizer, before the tables */
    const config_setting_t *eo = config_lookup(c, "model.emb_optimizer");
    if (eo && cfg_read_optimizer(r, eo, "model.emb_optimizer", &cf->train.emb_optimizer))
        return EMBER_EINVAL;
    if (cfg_read_emb_precision(r, config_lookup(c, "model")))
        return EMBER_EINVAL;
    /* a file for `ember train` may leave the tables to the tool */
    const config_setting_t *tg = config_lookup(c, "train"), *mg = config_lookup(c, "model");
    cf->train.present = tg || mg;
    if ((!cf->train.present && !cf->train.schema.num_columns) || config_lookup(c, "tables") ||
        config_lookup(c, "features")) /* a schema alone serves ember convert */
        if (cfg_read_tables(r, config_lookup(c, "tables")) || cfg_read_features(r, config_lookup(c, "features")))
            return EMBER_EINVAL;
    if ((mg && cfg_read_model(r, mg)) || (tg && cfg_read_train(r, tg)) || read_train_shape(r, c) ||
        check_owners(r, c))
        return EMBER_EINVAL;
    cc->tables = cf->tables;
    cc->num_tables = cf->num_tables;
    cc->features = cf->features;
    cc->num_features = cf->num_features;
    return 0;
}

/* The file an @include line names must be a regular file ember can read:
 * libconfig 1.5 exits the process when its scanner cannot read what it
 * opened (a folder).  0, or EMBER_EINVAL with err naming the line. */
static int check_include(const char *path, int line, const char *file, size_t n, char *err, size_t errlen)
{
    char f[4096];
    struct stat sb;
    snprintf(f, sizeof f, "%.*s", (int)n, file);
    if (n >= sizeof f || stat(f, &sb) != 0 || !S_ISREG(sb.st_mode) || access(f, R_OK) != 0) {
        snprintf(err, errlen, "%s:%d: @include \"%.*s\": %s", path, line, (int)(n > 512 ? 512 : n), file,
                 n >= sizeof f ? "the path is too long" : stat(f, &sb) != 0 ? strerror(errno)
                 : !S_ISREG(sb.st_mode) ? "not a file" : strerror(errno));
        return EMBER_EINVAL;
    }
    return 0;
}

/* *out: text with every relative `@include "x"` line made `@include
 * "dir/x"` (absolute ones as they are), lines kept one for one so messages
 * keep their line numbers; every file included must be a readable regular
 * file.  libconfig 1.5's include folder would prefix absolute paths too.
 * 0, EMBER_ENOMEM, or EMBER_EINVAL with err. */
static int includes_beside(const char *text, const char *dir, const char *path, char **out, char *err,
                           size_t errlen)
{
    size_t n = strlen(text), extra = 0, dl = strlen(dir);
    for (const char *p = strstr(text, "@include"); p; p = strstr(p + 8, "@include"))
        extra += dl + 1;
    char *o = *out = malloc(n + extra + 1);
    if (!o)
        return EMBER_ENOMEM;
    int lineno = 1;
    for (const char *line = text; *line; lineno++) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        const char *p = line;
        while (p < line + len && (*p == ' ' || *p == '\t'))
            p++;
        const char *q = p + 8;
        while (q < line + len && (*q == ' ' || *q == '\t'))
            q++;
        const char *o0 = o;
        if (!strncmp(p, "@include", 8) && q < line + len && *q == '"') {
            const char *close = memchr(q + 1, '"', (size_t)(line + len - q - 1));
            memcpy(o, line, (size_t)(q + 1 - line)); /* up to the opening quote */
            o += q + 1 - line;
            if (q[1] != '/') {
                memcpy(o, dir, dl);
                o += dl;
                *o++ = '/';
            }
            memcpy(o, q + 1, len - (size_t)(q + 1 - line));
            o += len - (size_t)(q + 1 - line);
            const char *name = o0 + (q + 1 - line);
            size_t nlen = close ? (size_t)(close - (q + 1)) + (size_t)(q[1] != '/' ? dl + 1 : 0) : 0;
            if (close && check_include(path, lineno, name, nlen, err, errlen) != 0) {
                free(*out);
                *out = NULL;
                return EMBER_EINVAL;
            }
        } else {
            memcpy(o, line, len);
            o += len;
        }
        line += len;
    }
    *o = '\0';
    return 0;
}

int config_file_load(const char *path, config_file **out, char *err, size_t errlen)
{
    *out = NULL;
    err[0] = '\0';
    config_file *cf = calloc(1, sizeof *cf);
    char *text = NULL;
    config_t c;
    config_init(&c);
    cfg_reader r = {path, err, errlen, cf};
    if (!cf) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    cf->path = strdup(path);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    cf->name = strdup(base);
    if (!cf->path || !cf->name) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    char *dot = strrchr(cf->name, '.');
    if (dot && dot != cf->name)
        *dot = '\0';
    cf->coll = ember_collection_config_default();
    cf->data = (cfg_data){4096, 1, ember_synth_config_default().alpha, 0};
    cf->planner = (cfg_planner){1, 0, INT64_C(1) << 20, 1.0};
    cfg_train_default(&cf->train);
    if (!(text = slurp(path, err, errlen)) || scan_big_ints(&r, text))
        goto fail;
    /* @include "x" is found beside this file, as its data paths are */
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", base > path ? (int)(base - path - 1) : 1, base > path ? path : ".");
    char *with_dirs = NULL;
    int ist = includes_beside(text, dir[0] ? dir : "/", path, &with_dirs, err, errlen);
    if (ist == EMBER_ENOMEM)
        snprintf(err, errlen, "%s: out of memory", path);
    if (ist != 0)
        goto fail;
    free(text);
    text = with_dirs;
    if (!config_read_string(&c, text)) {
        snprintf(err, errlen, "%s:%d: %s", path, config_error_line(&c), config_error_text(&c));
        goto fail;
    }
    if (read_top(&r, &c))
        goto fail;
    config_destroy(&c);
    free(text);
    *out = cf;
    return 0;
fail:
    if (!err[0])
        snprintf(err, errlen, "%s: cannot read the config", path);
    config_destroy(&c);
    free(text);
    config_file_free(cf);
    return EMBER_EINVAL;
}

void config_file_free(config_file *cf)
{
    if (!cf)
        return;
    for (int32_t i = 0; i < cf->num_strings; i++)
        free(cf->strings[i]);
    free(cf->strings);
    free(cf->tables);
    free(cf->features);
    free(cf->table_extra);
    free(cf->feature_extra);
    free(cf->train.schema_cols);
    free(cf->train.schema_tables);
    free(cf->path);
    free(cf->name);
    free(cf);
}

/* dir, named by key at line: an existing folder files can be created in.
 * 0, or -1 with err. */
static int check_folder(const config_file *cf, const char *key, int line, const char *dir, char *err, size_t errlen)
{
    struct stat sb;
    const char *why = NULL;
    char buf[200];
    if (stat(dir, &sb) != 0) {
        if (errno == ENOENT)
            why = "does not exist";
        else
            snprintf(buf, sizeof buf, "cannot be reached: %s", strerror(errno)), why = buf;
    } else if (!S_ISDIR(sb.st_mode)) {
        why = "is not a folder";
    } else if (access(dir, W_OK | X_OK) != 0) {
        snprintf(buf, sizeof buf, "is a folder this process cannot create files in: %s", strerror(errno));
        why = buf;
    }
    if (!why)
        return 0;
    if (line)
        snprintf(err, errlen, "%s:%d: %s: \"%s\" %s", cf->path, line, key, dir, why);
    else
        snprintf(err, errlen, "%s: %s: \"%s\" %s", cf->path, key, dir, why);
    return EMBER_EINVAL;
}

int config_file_check_folders(const config_file *cf, char *err, size_t errlen)
{
    if (cf->coll.ssd_dir && check_folder(cf, "ssd.dir", cf->ssd_dir_line, cf->coll.ssd_dir, err, errlen))
        return EMBER_EINVAL;
    for (int32_t t = 0; t < cf->num_tables; t++) {
        const cfg_table_extra *x = &cf->table_extra[t];
        char key[64];
        snprintf(key, sizeof key, "tables[%d].path", x->entry);
        if (cf->tables[t].path && x->path_line &&
            (t == 0 || cf->table_extra[t - 1].path_line != x->path_line) && /* an entry's tables share it */
            check_folder(cf, key, x->path_line, cf->tables[t].path, err, errlen))
            return EMBER_EINVAL;
    }
    return 0;
}

int config_file_weighted(const config_file *cf)
{
    for (int32_t f = 0; f < cf->num_features; f++)
        if (cf->feature_extra[f].weighted)
            return 1;
    return 0;
}

int config_file_text_schema(const config_file *cf, ctr_column *cols, ctr_text_schema *out)
{
    const cfg_train *t = &cf->train;
    *out = t->schema;
    if (!t->schema.num_columns)
        return EMBER_EINVAL;
    memcpy(cols, t->schema_cols, (size_t)t->schema.num_columns * sizeof *cols);
    out->columns = cols;
    int32_t f = 0;
    for (int32_t c = 0; c < t->schema.num_columns; c++) {
        if (cols[c].type != CTR_COL_CATEGORICAL && cols[c].type != CTR_COL_MULTI_HOT)
            continue;
        if (f < cf->num_features)
            cols[c].rows = config_feature_rows(cf, f);
        f++;
    }
    return 0;
}

int64_t config_feature_rows(const config_file *cf, int32_t f)
{
    const ember_table_config *tb = &cf->tables[cf->features[f].table];
    return tb->kind == EMBER_TABLE_DYNAMIC ? 0 : tb->rows;
}
