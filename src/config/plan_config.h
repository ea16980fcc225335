/*
 * plan_config.h: the planner's inputs from a config file (plan_config.c):
 * id statistics per table from the config's law or measured on data, and
 * the placement `ember train` uses for tables left on "auto".
 */
#ifndef EMBER_CONFIG_PLAN_CONFIG_H
#define EMBER_CONFIG_PLAN_CONFIG_H

#include "config/config_file.h"
#include "plan/plan.h"

/* Statistics of every table from the config's id law (docs/config.md);
 * pooling [num_features] as configured.  0, or -1 with err. */
int plan_config_stats_law(const config_file *cf, int32_t world, const double *pooling, plan_id_stats *st, char *err,
                          size_t errlen);

/* Statistics measured on up to `batches` batches of data: an `ember gen`
 * batch file, or training data (binary, or text by the config's schema),
 * whose sparse feature f feeds the config's feature f.  pooling and
 * weighted as observed; *batches_read how many were read.  0, or -1 with
 * err. */
int plan_config_stats_data(const config_file *cf, const char *data, int64_t batches, plan_id_stats *st,
                           double *pooling, int *weighted, int64_t *batches_read, char *err, size_t errlen);

/* The same measured on the first `batches` batches of 4096 samples of a
 * synthetic task (`ember train`'s, whose ids drift: its law alone does not
 * describe them).  0, or -1 with err. */
int plan_config_stats_task(const config_file *cf, const ctr_synth_config *task, int64_t batches, plan_id_stats *st,
                           double *pooling, int *weighted, char *err, size_t errlen);

#endif
