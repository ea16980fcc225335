/*
 * train_tool.h: what `ember train` shows and writes (docs/training.md, "The
 * loop").  The run itself is the library's (include/ember-train.h): it
 * tells its events as JSON objects, and the report turns them into
 *
 *   cmd_train.c        options into overrides, then open, run, close
 *   train_report.c     the progress bar, the text lines, the JSON lines and
 *                      the metrics file, the summary
 *   train_plot.c       the PNG of loss and AUC over steps (gnuplot)
 *
 * Events come on rank 0 only; the report is rank 0's (other ranks open
 * none).
 */
#ifndef EMBER_TOOLS_TRAIN_TOOL_H
#define EMBER_TOOLS_TRAIN_TOOL_H

#include <stdint.h>

#include "tool_ctx.h"

typedef struct train_report train_report;

typedef struct train_report_opts {
    int json;                    /* stdout: JSON lines only                 */
    const char *metrics_path;    /* "" none                                 */
    const char *plot_path;       /* "" none                                 */
    const char *checkpoint_dir;  /* the resume lines name it; NULL none     */
    int append;                  /* append to the metrics file (resumed)    */
} train_report_opts;

/* Rank 0 opens the metrics file and checks the plot can be written.
 * Collective; 0 (*out NULL on other ranks), or 1 after the message
 * (agreed). */
int train_report_open(const tool_ctx *ctx, const train_report_opts *o, train_report **out);
void train_report_close(train_report *r);

/* One event of the trainer (its JSON object; r NULL: ignored): the JSON line to the metrics file and, with json, to stdout, except
 * "progress"; the text otherwise.  "summary" waits for finish. */
void train_report_event(train_report *r, const char *json_object);
/* The end: the plot, the summary text (not with json), and the last line,
 * the summary's JSON object with the plot's path.  0, or 1 when the
 * metrics or the plot could not be written (said on stderr; the summary
 * names only the files that were written). */
int train_report_finish(train_report *r, const char *summary_json);

/* ------------------------------------------------------------------ plot */

typedef struct train_point {
    int64_t step;
    double v[4];                 /* loss; or AUC, teacher AUC, log loss,
                                    teacher log loss (NaN: none)            */
} train_point;

/* Draws the loss (loss[nloss]) and evaluations (eval[neval]) into path
 * with gnuplot.  0: written; 1: no gnuplot, or it failed (a warning was
 * printed; nothing written); -1: the file could not be written (err says
 * why; nothing left). */
int train_plot(const char *path, const char *name, const train_point *loss, int64_t nloss, const train_point *eval,
               int64_t neval, char *err, size_t len);

#endif
