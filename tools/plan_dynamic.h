/*
 * plan_dynamic.h: `ember plan`'s report of dynamic tables (plan_dynamic.c):
 * per table its capacity, memory, keys per step and over the horizon
 * (plan_dynamic_keys, src/plan/dynamic.c), and the warnings when its keys
 * outgrow its rows.
 */
#ifndef EMBER_TOOLS_PLAN_DYNAMIC_H
#define EMBER_TOOLS_PLAN_DYNAMIC_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "config/config_file.h"
#include "plan/plan.h"

/* "12.3k", "4.56M": a count for the text report (returns buf). */
const char *plan_fmt_count(double v, char *buf, size_t n);

/* The "dynamic tables" section after the plan, and its warnings (nothing
 * when the config has no dynamic table).  dyn[t] for every table (zeros
 * for fixed ones); B the global batch. */
void plan_dynamic_print(const config_file *cf, const plan_result *res, const plan_dynamic *dyn, int64_t B);

/* The "dynamic" object of a table in `ember plan --json`. */
json_t *plan_dynamic_json(const plan_dynamic *d);

#endif
