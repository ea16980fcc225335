/*
 * test_ckpt_crash.c: a save killed at any moment leaves only complete
 * checkpoints (docs/checkpoint-format.md, "What a crash leaves").
 *
 * A child process loops: write every table as f(step) (ember_table_write),
 * save step with keep = 2 and a blob holding the step.  The parent SIGKILLs
 * it after a random delay spread over a few save cycles (measured first),
 * then checks:
 *   - every folder named step-* under the root opens and verifies, and its
 *     tables and blob equal f(its step) exactly (so no leftover .tmp-* or
 *     .trash-* folder, nor a half-written one, is ever taken for one);
 *   - the root opens whenever a save had completed before the kill, to a
 *     step no older than the last completed one;
 *   - at the end, a new save cleans every leftover and succeeds.
 * The root is shared by all trials, so each trial starts over the previous
 * one's leftovers.  Trials: 50, or $EMBER_CRASH_TRIALS; `test_ckpt_crash
 * SEED` reruns.  Prints how many kills landed inside a save.  Everything
 * runs with one thread (no OpenMP pool exists when the process forks).
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "util.h"
#include "ckpt_util.h"

#define ROWS 12000
#define DIM 64
#define TABLES 2

typedef struct shared {
    volatile int64_t in_save;   /* 1 while the child is inside ember_save   */
    volatile int64_t done;      /* the last step whose save returned OK    */
    volatile double cycle, create; /* calibration: seconds per cycle, create */
} shared;

static char root_[300];
static test_config *tc_;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float f(int64_t step, int32_t t, int64_t r, int32_t c)
{
    return (float)((step * 1000003 + t * 7919 + r * 131 + c) % 1000003) * 0.001f;
}

static void fill(float *v, int64_t step, int32_t t)
{
    for (int64_t r = 0; r < ROWS; r++)
        for (int32_t c = 0; c < DIM; c++)
            v[r * DIM + c] = f(step, t, r, c);
}

/* The child: saves steps first, first + 1, ... until killed (or n saves). */
static void child(shared *sh, int64_t first, int n)
{
    ember_collection *c = NULL;
    double t0 = now();
    if (ember_collection_create(&tc_->cfg, &c) != EMBER_OK)
        _exit(3);
    sh->create = now() - t0;
    float *v = malloc(sizeof(float) * ROWS * DIM);
    t0 = now();
    for (int64_t s = first; n == 0 || s < first + n; s++) {
        for (int32_t t = 0; t < TABLES; t++) {
            fill(v, s, t);
            ember_table_write(c, t, 0, ROWS, v);
        }
        ember_blob b = {"step", &s, sizeof s};
        ember_save_options so = {s, 2, &b, 1, NULL, 0};
        sh->in_save = 1;
        int st = ember_save(c, root_, &so);
        sh->in_save = 0;
        if (st != EMBER_OK) {
            fprintf(stderr, "child: save %lld: %s\n", (long long)s, ember_errmsg(c));
            _exit(4);
        }
        sh->done = s;
    }
    sh->cycle = (now() - t0) / n;
    _exit(0);
}

/* Opens path (a root or a step folder) and checks it equals f(its step);
 * returns its step, or -1 when it does not open. */
static int64_t verify(const char *path, int *status)
{
    ember_checkpoint *ck = NULL;
    *status = ember_checkpoint_open(path, &ck);
    if (*status != EMBER_OK)
        return -1;
    int64_t step = ember_checkpoint_step(ck), n = 0;
    const int64_t *b = ember_checkpoint_blob(ck, -1, "step", &n);
    CHECK_MSG(b && n == 8 && *b == step, "%s: blob \"step\"", path);
    float *got = malloc(sizeof(float) * ROWS * DIM), *want = malloc(sizeof(float) * ROWS * DIM);
    for (int32_t t = 0; t < TABLES; t++) {
        fill(want, step, t);
        CHECK(ckpt_read_rows(ck, t, 0, ROWS, got, NULL) == EMBER_OK);
        CHECK_MSG(memcmp(got, want, sizeof(float) * ROWS * DIM) == 0, "%s: table %d is not f(%lld)", path, t,
                  (long long)step);
    }
    free(got), free(want);
    ember_checkpoint_close(ck);
    return step;
}

/* Every step-* folder of the root verifies. */
static int check_folders(void)
{
    DIR *d = opendir(root_);
    struct dirent *e;
    int n = 0, st;
    char p[600];
    while (d && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "step-", 5) != 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", root_, e->d_name);
        int64_t s = verify(p, &st);
        CHECK_MSG(s >= 0, "%s does not open after a kill: %s", p, ember_errmsg(NULL));
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

static pid_t spawn(shared *sh, int64_t first, int n)
{
    pid_t pid = fork();
    if (pid < 0)
        abort();
    if (pid == 0)
        child(sh, first, n);
    return pid;
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    const char *env = getenv("EMBER_CRASH_TRIALS");
    int trials = env && atoi(env) > 0 ? atoi(env) : 50;
    tc_ = test_config_new(TABLES, TABLES);
    tc_->cfg.threads = 1;
    for (int t = 0; t < TABLES; t++) {
        tc_->tables[t].rows = ROWS;
        tc_->tables[t].dim = DIM;
    }
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ckpt_tmpdir(root_, "crash");
    /* calibration: a few uninterrupted saves */
    int ws;
    waitpid(spawn(sh, 1, 3), &ws, 0);
    CHECK_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "calibration child failed");
    double cycle = sh->cycle, create = sh->create, span = create + 3 * cycle;
    printf("save cycle %.1f ms (%.1f MB per checkpoint), create %.1f ms\n", 1e3 * cycle,
           TABLES * ROWS * DIM * 4 / 1e6, 1e3 * create);
    int mid = 0, between = 0, none = 0;
    int64_t first = 100;
    for (int t = 0; t < trials; t++, first += 100) {
        sh->in_save = 0;
        sh->done = -1;
        pid_t pid = spawn(sh, first, 0);
        double delay = test_uniform(&r) * span;
        struct timespec ts = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, &ws, 0);
        int64_t done = sh->done;
        if (sh->in_save)
            mid++;
        else
            between++;
        check_folders();
        int st;
        int64_t s = verify(root_, &st);
        if (done >= first) /* this trial completed a save: the root has it or a newer one */
            CHECK_MSG(s >= done, "trial %d: root opens to %lld (%s), last completed save %lld", t, (long long)s,
                      ember_status_str(st), (long long)done);
        else
            CHECK_MSG(s >= 0 || (t == 0 && st == EMBER_EIO), "trial %d: root does not open: %s", t,
                      ember_errmsg(NULL));
        none += done < first;
    }
    /* a save after all the crashes cleans the leftovers */
    waitpid(spawn(sh, first, 1), &ws, 0);
    CHECK_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "final save failed");
    DIR *d = opendir(root_);
    struct dirent *e;
    int leftovers = 0, complete = 0;
    while (d && (e = readdir(d)) != NULL) {
        leftovers += e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
        complete += strncmp(e->d_name, "step-", 5) == 0;
    }
    closedir(d);
    CHECK_MSG(leftovers == 0 && complete == 2, "after the final save: %d leftovers, %d checkpoints", leftovers,
              complete);
    int st;
    CHECK(verify(root_, &st) == first);
    printf("%d kills: %d inside a save, %d between saves, %d before the trial's first save completed\n", trials,
           mid, between, none);
    ckpt_rm_tree(root_);
    test_config_free(tc_);
    return check_report("test_ckpt_crash");
}
