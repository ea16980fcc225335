/*
 * test_errmsg.c: the one way to ask why a call failed (ember.h, ember_errmsg).
 *
 * For every kind of handle, a call on it fails and ember_errmsg(handle)
 * names the fault, while a second handle of the same kind keeps "" (the
 * message is the handle's, not a global).  A failed open or create leaves
 * *out NULL and its message in ember_errmsg(NULL); a message on one thread
 * is not seen on another; a pointer that is not a live handle is named as
 * such.  The failing inputs are drawn at random (table counts, row numbers,
 * names), so a message that only matched one fixed case would be caught.
 * Seed: argv[1] or EMBER_TEST_SEED, else the clock; printed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "ember-data.h"
#include "ember-plan.h"
#include "ember-serve.h"
#include "ember-train.h"
#include "ember.h"
#include "util.h"

static char dir[256];

static int has(const char *msg, const char *part) { return msg && strstr(msg, part) != NULL; }

/* A collection: a batch of the wrong feature count fails forward. */
static void collection_case(test_rng *r)
{
    int32_t T = (int32_t)test_range(r, 1, 4), F = T + (int32_t)test_range(r, 0, 3);
    test_config *tc = test_config_new(T, F);
    ember_collection *a = NULL, *b = NULL;
    CHECK(ember_collection_create(&tc->cfg, &a) == EMBER_OK);
    CHECK(ember_collection_create(&tc->cfg, &b) == EMBER_OK);
    int32_t wrong = F + 1 + (int32_t)test_range(r, 0, 5);
    int32_t lengths[64] = {0};
    ember_batch bt = {1, wrong, lengths, NULL, NULL, 0};
    float pooled[1024];
    CHECK(ember_forward(a, &bt, pooled, NULL) == EMBER_EINPUT);
    char want[64];
    snprintf(want, sizeof want, "%d features", (int)wrong);
    CHECK_MSG(has(ember_errmsg(a), want), "collection: '%s' lacks '%s'", ember_errmsg(a), want);
    CHECK_MSG(!strcmp(ember_errmsg(b), ""), "collection b: '%s'", ember_errmsg(b));
    /* a failed create: NULL out, the message on this thread, naming the table */
    tc->tables[0].dim = 2000 + (int32_t)test_range(r, 0, 100);
    ember_collection *bad = (ember_collection *)&bt;
    CHECK(ember_collection_create(&tc->cfg, &bad) == EMBER_EINVAL && bad == NULL);
    CHECK_MSG(has(ember_errmsg(NULL), "table0"), "create: '%s'", ember_errmsg(NULL));
    ember_collection_destroy(a);
    ember_collection_destroy(b);
    test_config_free(tc);
}

/* A world of one: live, nothing failed. */
static void world_case(void)
{
    ember_world *w = NULL;
    CHECK(ember_world_self(&w) == EMBER_OK);
    CHECK(!strcmp(ember_errmsg(w), ""));
    ember_world_destroy(w);
}

/* The reader of the built-in task: max_samples 0 is refused, on the handle. */
static void reader_case(test_rng *r)
{
    ember_reader *a = NULL, *b = NULL;
    CHECK(ember_reader_open(NULL, NULL, 0, 0, 1, &a) == EMBER_OK);
    CHECK(ember_reader_open(NULL, NULL, 0, 0, 1, &b) == EMBER_OK);
    ember_samples s;
    int32_t n = -(int32_t)test_range(r, 0, 1000);
    CHECK(ember_reader_next(a, n, &s) == EMBER_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "max_samples %d", (int)n);
    CHECK_MSG(has(ember_errmsg(a), want), "reader: '%s'", ember_errmsg(a));
    CHECK(!strcmp(ember_errmsg(b), ""));
    ember_reader_close(a);
    ember_reader_close(b);
    char missing[400];
    snprintf(missing, sizeof missing, "%s/no-such-%llu.cfg", dir, (unsigned long long)test_next(r));
    ember_reader *c = NULL;
    CHECK(ember_reader_open(missing, NULL, 0, 0, 1, &c) != EMBER_OK && c == NULL);
    CHECK_MSG(has(ember_errmsg(NULL), missing), "reader open: '%s'", ember_errmsg(NULL));
}

/* A batch writer refuses a batch of the wrong shape; a reader of a file
 * with a flipped payload byte fails next on its handle. */
static void batch_file_case(test_rng *r)
{
    int32_t T = (int32_t)test_range(r, 1, 4);
    int64_t rows[4] = {100, 100, 100, 100};
    int32_t ft[4] = {0, 0, 0, 0};
    ember_batch_file_info info = {T, rows, T, ft};
    char path[400], other[400];
    snprintf(path, sizeof path, "%s/b.batches", dir);
    snprintf(other, sizeof other, "%s/c.batches", dir);
    ember_batch_writer *w = NULL, *w2 = NULL;
    CHECK(ember_batch_writer_create(path, &info, &w) == EMBER_OK);
    CHECK(ember_batch_writer_create(other, &info, &w2) == EMBER_OK);
    int32_t lengths[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    int64_t ids[8];
    for (int i = 0; i < 8; i++)
        ids[i] = test_range(r, 0, 100);
    ember_batch wrong = {1, T + 1, lengths, ids, NULL, T + 1};
    CHECK(ember_batch_writer_append(w, &wrong) == EMBER_EINPUT);
    CHECK_MSG(has(ember_errmsg(w), path), "writer: '%s'", ember_errmsg(w));
    CHECK(!strcmp(ember_errmsg(w2), ""));
    ember_batch good = {1, T, lengths, ids, NULL, T};
    CHECK(ember_batch_writer_append(w, &good) == EMBER_OK);
    CHECK(ember_batch_writer_close(w) == EMBER_OK);
    ember_batch_writer_destroy(w);
    ember_batch_writer_destroy(w2);
    /* flip one byte of the batch's ids (just before the end record) */
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    long at = size - 40 - 1 - (long)test_range(r, 0, 8 * T);
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x5a, f);
    fclose(f);
    ember_batch_reader *rd = NULL;
    CHECK(ember_batch_reader_open(path, &rd) == EMBER_OK);
    ember_batch got;
    int st = rd ? ember_batch_reader_next(rd, &got) : 1;
    CHECK_MSG(st < 0, "reader next of a damaged batch: %d", st);
    CHECK_MSG(rd && has(ember_errmsg(rd), path), "batch reader: '%s'", rd ? ember_errmsg(rd) : "");
    ember_batch_reader_destroy(rd);
    ember_batch_reader *none = NULL;
    CHECK(ember_batch_reader_open(other, &none) != EMBER_OK && none == NULL); /* never closed: no file */
    CHECK_MSG(has(ember_errmsg(NULL), other), "batch reader open: '%s'", ember_errmsg(NULL));
}

/* A synthetic batch source: next without a batch is refused on the handle. */
static void synth_case(test_rng *r)
{
    ember_synth_config c = ember_synth_config_default();
    c.tables = (int32_t)test_range(r, 1, 4);
    ember_synth *s = NULL;
    CHECK(ember_synth_create(&c, &s) == EMBER_OK);
    CHECK(ember_synth_next(s, NULL) == EMBER_EINVAL);
    CHECK_MSG(has(ember_errmsg(s), "batch"), "synth: '%s'", ember_errmsg(s));
    ember_synth_destroy(s);
}

/* A checkpoint: a table it does not have is refused on the handle. */
static void checkpoint_case(test_rng *r)
{
    test_config *tc = test_config_new(2, 2);
    ember_collection *c = NULL;
    CHECK(ember_collection_create(&tc->cfg, &c) == EMBER_OK);
    char root[400];
    snprintf(root, sizeof root, "%s/ckpt", dir);
    ember_save_options so;
    memset(&so, 0, sizeof so);
    so.step = 1 + test_range(r, 0, 100);
    CHECK(ember_save(c, root, &so) == EMBER_OK);
    ember_checkpoint *a = NULL, *b = NULL;
    CHECK(ember_checkpoint_open(root, &a) == EMBER_OK);
    CHECK(ember_checkpoint_open(root, &b) == EMBER_OK);
    int32_t t = 2 + (int32_t)test_range(r, 0, 50);
    ember_table_config out;
    CHECK(a && ember_checkpoint_table(a, t, &out) == EMBER_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "no table %d", (int)t);
    CHECK_MSG(a && has(ember_errmsg(a), want), "checkpoint: '%s'", a ? ember_errmsg(a) : "");
    CHECK(b && !strcmp(ember_errmsg(b), ""));
    CHECK(a && ember_export(a, "no-such-table", root) == EMBER_EINVAL);
    CHECK_MSG(a && has(ember_errmsg(a), "no-such-table"), "export: '%s'", a ? ember_errmsg(a) : "");
    ember_checkpoint_close(a);
    ember_checkpoint_close(b);
    char missing[400];
    snprintf(missing, sizeof missing, "%s/none-%d", dir, (int)test_range(r, 0, 1000));
    ember_checkpoint *none = NULL;
    CHECK(ember_checkpoint_open(missing, &none) != EMBER_OK && none == NULL);
    CHECK_MSG(has(ember_errmsg(NULL), missing), "checkpoint open: '%s'", ember_errmsg(NULL));
    ember_collection_destroy(c);
    test_config_free(tc);
}

/* A plan: a table it does not have is refused on the handle. */
static void plan_case(test_rng *r)
{
    char cfg[400];
    snprintf(cfg, sizeof cfg, "%s/plan.cfg", dir);
    FILE *f = fopen(cfg, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fprintf(f, "tables = ({ name = \"t\"; rows = %d; dim = 8; });\nfeatures = ({ name = \"f\"; table = \"t\"; });\n",
            (int)test_range(r, 10, 100000));
    fclose(f);
    ember_plan_config pc = ember_plan_config_default();
    pc.config = cfg;
    pc.world = 2;
    ember_plan *p = NULL;
    CHECK(ember_plan_create(&pc, &p) == EMBER_OK);
    int32_t t = 1 + (int32_t)test_range(r, 0, 20);
    ember_plan_table out;
    CHECK(p && ember_plan_table_info(p, t, &out) == EMBER_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "no table %d", (int)t);
    CHECK_MSG(p && has(ember_errmsg(p), want), "plan: '%s'", p ? ember_errmsg(p) : "");
    ember_plan_destroy(p);
    pc.config = dir; /* a folder: not a config file */
    ember_plan *none = NULL;
    CHECK(ember_plan_create(&pc, &none) != EMBER_OK && none == NULL);
    CHECK_MSG(has(ember_errmsg(NULL), dir), "plan create: '%s'", ember_errmsg(NULL));
}

/* A trainer whose open failed is still a handle (*out set): its message. */
static void trainer_case(test_rng *r)
{
    char missing[400];
    snprintf(missing, sizeof missing, "%s/train-%d.cfg", dir, (int)test_range(r, 0, 1000));
    ember_trainer *t = NULL;
    CHECK(ember_trainer_open(missing, NULL, NULL, NULL, NULL, &t) != EMBER_OK);
    CHECK_MSG(t && has(ember_errmsg(t), missing), "trainer: '%s'", t ? ember_errmsg(t) : "(no handle)");
    ember_trainer_close(t);
}

/* An output at a path that names no file, a conversion of a missing input
 * (*result set: its message), a predictor and a scorer that cannot open. */
static void open_cases(test_rng *r)
{
    ember_output *o = NULL;
    char folder[400];
    snprintf(folder, sizeof folder, "%s/", dir);
    CHECK(ember_output_open(folder, 0, &o) != EMBER_OK && o == NULL);
    CHECK_MSG(ember_errmsg(NULL)[0] != '\0', "output open: no message");
    char path[400];
    snprintf(path, sizeof path, "%s/out-%d", dir, (int)test_range(r, 0, 1000));
    CHECK(ember_output_open(path, 0, &o) == EMBER_OK);
    CHECK(o && !strcmp(ember_errmsg(o), ""));
    ember_output_abort(o);

    char in[400], out[400];
    snprintf(in, sizeof in, "%s/in-%d.tsv", dir, (int)test_range(r, 0, 1000));
    snprintf(out, sizeof out, "%s/out.bin", dir);
    ember_convert_config cc = ember_convert_config_default();
    cc.threads = 1;
    ember_conversion *cv = NULL;
    CHECK(ember_convert(in, out, &cc, &cv) != EMBER_OK);
    CHECK_MSG(cv && has(ember_errmsg(cv), in), "conversion: '%s'", cv ? ember_errmsg(cv) : "(no handle)");
    ember_conversion_destroy(cv);

    ember_predictor *p = NULL;
    CHECK(ember_predictor_open(in, NULL, &p) != EMBER_OK && p == NULL);
    CHECK_MSG(has(ember_errmsg(NULL), in), "predictor open: '%s'", ember_errmsg(NULL));
    ember_scorer_config sc = ember_scorer_config_default();
    ember_scorer *s = NULL;
    CHECK(ember_scorer_create(NULL, &sc, &s) == EMBER_EINVAL && s == NULL);
    CHECK_MSG(has(ember_errmsg(NULL), "ember_scorer_create"), "scorer create: '%s'", ember_errmsg(NULL));
}

/* This thread's message is this thread's. */
static void *other_thread(void *arg)
{
    (void)arg;
    return (void *)(strcmp(ember_errmsg(NULL), "") == 0 ? (void *)1 : NULL);
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    snprintf(dir, sizeof dir, "/tmp/ember-test-errmsg-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    collection_case(&r);
    world_case();
    reader_case(&r);
    batch_file_case(&r);
    synth_case(&r);
    checkpoint_case(&r);
    plan_case(&r);
    trainer_case(&r);
    open_cases(&r);
    pthread_t th;
    void *clean = NULL;
    CHECK(ember_errmsg(NULL)[0] != '\0'); /* this thread's last failure */
    CHECK(pthread_create(&th, NULL, other_thread, NULL) == 0 && pthread_join(th, &clean) == 0);
    CHECK_MSG(clean != NULL, "a new thread sees another thread's message");
    int not_a_handle = 42;
    CHECK(has(ember_errmsg(&not_a_handle), "not a live ember handle"));
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "test_errmsg: could not remove %s\n", dir);
    return check_report("test_errmsg");
}
