/*
 * train_plot.c: `ember train --plot` (train_tool.h): a PNG of the training
 * loss and the evaluation's AUC and log loss over steps, with the
 * teacher's where the task has one, drawn by gnuplot (pngcairo, else png).
 * A missing gnuplot is a warning, not a failure.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include "train_tool.h"

typedef struct plot_data {
    const char *plot_path, *name;
    const train_point *loss;
    int64_t nloss;
    const train_point *eval;
    int64_t neval;
} plot_data;

/* gnuplot with the given terminal; its exit status (127: not found). */
static int run_gnuplot(const plot_data *r, const char *terminal, int quiet)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "gnuplot%s", quiet ? " 2>/dev/null" : "");
    FILE *g = popen(cmd, "w");
    if (!g)
        return -1;
    fprintf(g, "$loss << EOD\n");
    for (int64_t i = 0; i < r->nloss; i++)
        fprintf(g, "%lld %.9g\n", (long long)r->loss[i].step, r->loss[i].v[0]);
    fprintf(g, "EOD\n$eval << EOD\n");
    for (int64_t i = 0; i < r->neval; i++) {
        const train_point *p = &r->eval[i];
        fprintf(g, "%lld", (long long)p->step);
        for (int k = 0; k < 4; k++) {
            if (isfinite(p->v[k]))
                fprintf(g, " %.9g", p->v[k]);
            else
                fprintf(g, " NaN");
        }
        fprintf(g, "\n");
    }
    fprintf(g, "EOD\n");
    fprintf(g, "set terminal %s size 1000,800 noenhanced\n", terminal);
    fprintf(g, "set output '");
    for (const char *c = r->plot_path; *c; c++) /* a quote in the path: gnuplot's '' */
        fprintf(g, *c == '\'' ? "''" : "%c", *c);
    fprintf(g, "'\nset multiplot layout 2,1 title 'ember train: %s'\n", r->name);
    fprintf(g, "set grid\nset key top right\nset xlabel 'step'\nset ylabel 'log loss'\n");
    int teacher = r->neval > 0 && isfinite(r->eval[r->neval - 1].v[1]);
    fprintf(g, "plot $loss using 1:2 with lines lw 1.5 title 'training loss'");
    if (r->neval > 0)
        fprintf(g, ", $eval using 1:4 with linespoints lw 2 pt 7 title 'eval log loss'");
    if (teacher)
        fprintf(g, ", $eval using 1:5 with lines dt 2 lw 1.5 title 'teacher log loss'");
    fprintf(g, "\nset key bottom right\nset ylabel 'AUC'\n");
    if (r->neval > 0) {
        fprintf(g, "plot $eval using 1:2 with linespoints lw 2 pt 7 title 'eval AUC'");
        if (teacher)
            fprintf(g, ", $eval using 1:3 with lines dt 2 lw 1.5 title 'teacher AUC'");
        fprintf(g, "\n");
    } else {
        fprintf(g, "set label 1 'no evaluation data' at graph 0.5, 0.5 center\nplot NaN notitle\n");
    }
    fprintf(g, "unset multiplot\nset output\n");
    int st = pclose(g);
    return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int plot_with(const plot_data *r)
{
    int st = run_gnuplot(r, "pngcairo", 1);
    if (st == 127) {
        fprintf(stderr, "ember train: warning: gnuplot not found: no plot (apt-get install gnuplot-nox)\n");
        return -1;
    }
    if (st != 0)
        st = run_gnuplot(r, "png", 0);
    if (st != 0) {
        fprintf(stderr, "ember train: warning: gnuplot failed (exit %d): no plot at %s\n", st, r->plot_path);
        return -1;
    }
    return 0;
}

/* SIGPIPE is ignored meanwhile: a gnuplot that is missing or quits early
 * must not end the run. */
int train_plot(const char *path, const char *name, const train_point *loss, int64_t nloss, const train_point *eval,
               int64_t neval)
{
    plot_data r = {path, name, loss, nloss, eval, neval};
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    int st = plot_with(&r);
    signal(SIGPIPE, old);
    return st;
}
