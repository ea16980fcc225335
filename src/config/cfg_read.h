/*
 * cfg_read.h: inside config_file_load (config_file.h, docs/config.md): the
 * state of one read, the typed reads every group uses (cfg_values.c), the
 * names of enum values (cfg_names.c), the list entries of tables and
 * features (cfg_entries.c), and one reader per group of the file:
 *
 *   cfg_tables.c    tables            cfg_data.c      data
 *   cfg_features.c  features          cfg_schema.c    data.schema
 *   cfg_model.c     model             cfg_train.c     train
 *   cfg_planner.c   planner           config_file.c   the top level, ssd,
 *                                                     and the order of all
 *
 * libconfig parses; these files check every key against the keys they
 * know (a typo is an error, never a silently ignored setting), fill the
 * config_file, and name file, line and key in every message.  A reader
 * returns 0, or -1 with the message in r->err.  Nothing outside
 * src/config/ includes this header.
 */
#ifndef EMBER_CONFIG_CFG_READ_H
#define EMBER_CONFIG_CFG_READ_H

#include <stddef.h>
#include <stdint.h>

#include <libconfig.h>

#include "config/config_file.h"

typedef struct cfg_reader {
    const char *path;            /* the file, for messages                   */
    char *err;                   /* the message of the first failure         */
    size_t errlen;
    config_file *cf;             /* what is read so far                      */
} cfg_reader;

/* ------------------------------------------------------------ values */

/* "path:line: key: message" into r->err (without the line when s is NULL
 * or has none); returns -1. */
int cfg_fail_at(cfg_reader *r, const config_setting_t *s, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A copy of s owned by the config_file; NULL when out of memory. */
char *cfg_keep(cfg_reader *r, const char *s);

/* An integer setting (int, int64, or a float with an integral value) in
 * [lo, hi]. */
int cfg_get_int64(cfg_reader *r, const config_setting_t *s, const char *key, int64_t lo, int64_t hi, int64_t *out);
/* A number (an integer too) in [lo, hi]. */
int cfg_get_double(cfg_reader *r, const config_setting_t *s, const char *key, double lo, double hi, double *out);
int cfg_get_bool(cfg_reader *r, const config_setting_t *s, const char *key, int *out);
/* A string; *out points into libconfig's setting (copy it with cfg_keep). */
int cfg_get_string(cfg_reader *r, const config_setting_t *s, const char *key, const char **out);
/* A path in the config: a relative one is relative to the config file's
 * folder (the file can move with its data), "" stays "" (none); kept. */
int cfg_read_path(cfg_reader *r, const config_setting_t *m, const char *key, const char **out);
/* One of names[] (NULL-terminated) -> its index. */
int cfg_get_enum(cfg_reader *r, const config_setting_t *s, const char *key, const char *const *names, int *out);
/* Bytes: an integer, a number, or a string with a unit ("64 GiB"). */
int cfg_get_bytes(cfg_reader *r, const config_setting_t *s, const char *key, int64_t *out);
/* Every member of group g must be one of names[] (NULL-terminated); where
 * is the group's key ("" at the top). */
int cfg_check_keys(cfg_reader *r, const config_setting_t *g, const char *where, const char *const *names);

/* ------------------------------------------------------------- names */

/* The names the file gives enum values, NULL-terminated, in each enum's
 * order (cfg_names.c). */
extern const char *const CFG_PLACEMENTS[], *const CFG_EXCHANGES[], *const CFG_OPTIMIZERS[], *const CFG_INITS[];
extern const char *const CFG_COMBINERS[], *const CFG_POLICIES[], *const CFG_DISTS[], *const CFG_STORAGES[];
extern const char *const CFG_CACHE_POLICIES[], *const CFG_KINDS[], *const CFG_SCHEDULES[], *const CFG_EVICTS[];
extern const char *const CFG_READERS[];
extern const char *const CFG_PRECISIONS[], *const CFG_ROUNDINGS[];
extern const char *const CFG_SOURCES[], *const CFG_BAD_LINES[], *const CFG_INTERACTIONS[], *const CFG_ACTIVATIONS[];
extern const char *const CFG_LR_DECAYS[];

/* ------------------------------------------------------- list entries */

/* "%d" in pattern replaced by i (only that, never a user format). */
int cfg_expand_name(cfg_reader *r, const config_setting_t *s, const char *key, const char *pattern, int64_t count,
                    int64_t i, char *out, size_t n);
/* count and name of a list entry; *count >= 1. */
/* The entries a list group (tables, features) expands to, over every
 * element: each a group (else "must be a group HINT"), with only keys
 * (NULL: not checked here) and a valid count and name; the total in
 * [1, 1000000] ("must hold at least one ONE", "too many WHAT").  0, or
 * EMBER_EINVAL with the message naming WHAT[i]. */
int cfg_entries_total(cfg_reader *r, const config_setting_t *list, const char *what, const char *one,
                      const char *hint, const char *const *keys, int64_t *total);
int cfg_entry_count_name(cfg_reader *r, const config_setting_t *e, const char *where, int64_t *count,
                         const char **name);

/* Names sorted with their index, so that duplicates and look-ups cost
 * n log n: a group of a million tables (count = 1000000) must not take
 * n^2 string compares. */
typedef struct cfg_name_index {
    const char *name;
    int32_t index;
} cfg_name_index;

/* names[0, n) sorted into *out (NULL on n == 0); -1 when out of memory. */
int cfg_name_index_build(const char *(*name_of)(const config_file *, int32_t), const config_file *cf, int32_t n,
                         cfg_name_index **out);
/* The first name (in index order) that an earlier one repeats: its index
 * in *later and the earliest one's in *first; 0 when all are distinct. */
int cfg_name_index_duplicate(const cfg_name_index *v, int32_t n, int32_t *first, int32_t *later);
/* bsearch's comparison of two entries by name alone. */
int cfg_name_only_cmp(const void *a, const void *b);
/* Table i's name, for cfg_name_index_build. */
const char *cfg_table_name_of(const config_file *cf, int32_t i);

/* ------------------------------------------------------------ groups */

/* An optimizer: a kind ("adagrad") or a group { kind = ...; lr = ...; }. */
int cfg_read_optimizer(cfg_reader *r, const config_setting_t *s, const char *key, ember_optimizer *o);
/* tables = ( ... ): every table into cf->tables and cf->table_extra. */
int cfg_read_tables(cfg_reader *r, const config_setting_t *list);
/* features = ( ... ) (NULL: none given): every feature into cf->features
 * and cf->feature_extra, after the tables. */
int cfg_read_features(cfg_reader *r, const config_setting_t *list);
/* data = { ... } (NULL: none): before the tables, whose default id law it
 * gives. */
int cfg_read_data(cfg_reader *r, const config_setting_t *g);
/* data.schema = { ... }. */
int cfg_read_schema(cfg_reader *r, const config_setting_t *g);
/* model = { ... }. */
int cfg_read_model(cfg_reader *r, const config_setting_t *g);
int cfg_read_emb_precision(cfg_reader *r, const config_setting_t *g);
/* train = { ... }. */
int cfg_read_train(cfg_reader *r, const config_setting_t *g);
/* With tables: the task and the model follow them (after cfg_read_features). */
int cfg_train_from_tables(cfg_reader *r, config_t *c);
/* The model's shape after everything is read. */
int cfg_train_finish(cfg_reader *r, config_t *c);
/* planner = { ... } (NULL: none). */
int cfg_read_planner(cfg_reader *r, const config_setting_t *g);

#endif
