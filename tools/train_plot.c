/*
 * train_plot.c: `ember train --plot` (train_tool.h): a PNG of the training
 * loss and the evaluation's AUC and log loss over steps, with the
 * teacher's where the task has one, drawn by gnuplot (pngcairo, else png).
 * gnuplot writes the PNG to a pipe and ember writes the file (never through
 * a link; checked, fsynced, renamed into place).  A missing or failing
 * gnuplot is a warning; a file that cannot be written is an error.
 */
#define _GNU_SOURCE /* memfd_create, pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ember.h"
#include "train_tool.h"

extern char **environ;

typedef struct plot_data {
    const char *plot_path, *name;
    const train_point *loss;
    int64_t nloss;
    const train_point *eval;
    int64_t neval;
} plot_data;

/* The gnuplot script: the data inline, the PNG to gnuplot's stdout. */
static void write_script(FILE *g, const plot_data *r, const char *terminal)
{
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
    fprintf(g, "set multiplot layout 2,1 title 'ember train: %s'\n", r->name);
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
}

/* gnuplot with the given terminal, its script from a memory file and its
 * PNG read from a pipe into o: ember creates the file, gnuplot never opens
 * a path.  gnuplot's exit status (127: not found), or -1. */
static int run_gnuplot(const plot_data *r, const char *terminal, int quiet, ember_output *o)
{
    int script = memfd_create("ember-plot", MFD_CLOEXEC), out[2] = {-1, -1}, st = -1;
    int copy = script >= 0 ? dup(script) : -1;
    FILE *g = copy >= 0 ? fdopen(copy, "w") : NULL;
    if (!g && copy >= 0)
        close(copy);
    if (!g || pipe2(out, O_CLOEXEC) != 0)
        goto done;
    write_script(g, r, terminal);
    if (fclose(g) != 0 || lseek(script, 0, SEEK_SET) != 0) {
        g = NULL;
        goto done;
    }
    g = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, script, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    if (quiet)
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char *argv[] = {"gnuplot", NULL};
    pid_t pid;
    int spawned = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    out[1] = -1;
    if (spawned != 0) {
        st = spawned == ENOENT ? 127 : -1;
        goto done;
    }
    char buf[1 << 16];
    ssize_t n;
    while ((n = read(out[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0)
            ember_output_write(o, buf, n); /* a failure is kept for the commit */
    int ws = 0;
    pid_t got;
    while ((got = waitpid(pid, &ws, 0)) < 0 && errno == EINTR)
        ;
    st = got == pid && WIFEXITED(ws) ? WEXITSTATUS(ws) : -1; /* ECHILD (SIGCHLD ignored): unknown, so failed */
done:
    if (g)
        fclose(g);
    for (int i = 0; i < 2; i++)
        if (out[i] >= 0)
            close(out[i]);
    if (script >= 0)
        close(script);
    return st;
}

int train_plot(const char *path, const char *name, const train_point *loss, int64_t nloss, const train_point *eval,
               int64_t neval, char *err, size_t len)
{
    plot_data r = {path, name, loss, nloss, eval, neval};
    ember_output *o = NULL;
    if (ember_output_open(path, 0, &o) != EMBER_OK)
        return snprintf(err, len, "%s", ember_errmsg(NULL)), -1;
    int st = run_gnuplot(&r, "pngcairo", 1, o);
    if (st == 127) {
        ember_output_abort(o);
        fprintf(stderr, "ember train: warning: gnuplot not found: no plot (apt-get install gnuplot-nox)\n");
        return 1;
    }
    if (st != 0) { /* no cairo: the plain png terminal, into a fresh output */
        ember_output_abort(o);
        if (ember_output_open(path, 0, &o) != EMBER_OK)
            return snprintf(err, len, "%s", ember_errmsg(NULL)), -1;
        st = run_gnuplot(&r, "png", 0, o);
    }
    if (st != 0) {
        ember_output_abort(o);
        fprintf(stderr, "ember train: warning: gnuplot failed (exit %d): no plot at %s\n", st, path);
        return 1;
    }
    if (ember_output_commit(o) != EMBER_OK)
        return snprintf(err, len, "%s", ember_errmsg(NULL)), -1;
    return 0;
}
