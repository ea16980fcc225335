/*
 * train_settings.h: the trainer's settings (include/ember-train.h): the
 * overrides a caller gives, by name from text and checked against their
 * ranges (train_overrides.c), applied over the config's train group or the
 * built-in task's (train_settings.c).  In the library so that `ember train`
 * and Python accept the same overrides with the same limits and messages.
 */
#ifndef EMBER_CONFIG_TRAIN_SETTINGS_H
#define EMBER_CONFIG_TRAIN_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "config/config_file.h"
#include "ember-train.h"


/* Passes over a training file when neither train.steps, train.epochs nor
 * --steps says how long to train (the built-in task's 3000 steps are a
 * stream's, not a file's). */
#define TRAIN_DEFAULT_EPOCHS 1

/* More passes over a training file than this are said at the start: a
 * small file under settings made for a large one. */
#define TRAIN_MANY_PASSES 20

typedef struct train_settings {
    cfg_train t;                 /* the train group with the overrides; its
                                    strings point into the config and o     */
    const char *name;            /* the config's name, or "synthetic"        */
    int32_t threads;             /* per rank                                 */
    int32_t blas_threads;        /* OpenBLAS threads per rank (default 1)    */
    int resume;
} train_settings;

/* 0, or -1 with err naming the first field of o out of its range. */
int train_overrides_check(const ember_train_overrides *o, char *err, size_t errlen);

/* The settings of a run of `world` ranks: cf's train group (cf NULL: the
 * built-in task) with o applied; a seed override goes into cf's tables
 * too.  Local and the same on every rank.  0; EMBER_EFORMAT when the config
 * is at fault (it cannot train: cf->train.error; a setting that does not
 * fit the run, named with its line); EMBER_EINVAL when the overrides are
 * (they contradict each other or the config; `ember train` exits 2); with
 * err. */
int train_settings_make(config_file *cf, const char *config_path, const ember_train_overrides *o, int32_t world,
                        train_settings *s, char *err, size_t errlen);

#endif
