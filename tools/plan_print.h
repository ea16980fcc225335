/*
 * plan_print.h: `ember plan`'s report as text (plan_text.c), of the
 * library's plan (include/ember-plan.h); the JSON is cmd_plan.c's.
 */
#ifndef EMBER_TOOLS_PLAN_PRINT_H
#define EMBER_TOOLS_PLAN_PRINT_H

#include <stddef.h>

#include "ember-plan.h"

/* A plan's report: its summary, tables and ranks. */
typedef struct plan_view {
    const ember_plan_summary *sum;
    const ember_plan_table *tables; /* [sum->tables] */
    const ember_plan_rank *ranks;   /* [sum->world]  */
    int all_ranks;                  /* list every rank (else 16 of a world over 64) */
    const ember_plan *plan;         /* the rest (ember_plan_dense_info)             */
} plan_view;

/* The header, the tables, the ranks, the totals, the SSD tier's tables and
 * the dynamic tables (with their warnings). */
void plan_print_text(const plan_view *v);

/* "12.3k", "4.56M": a count for the text report (returns buf). */
const char *plan_fmt_count(double v, char *buf, size_t n);

#endif
