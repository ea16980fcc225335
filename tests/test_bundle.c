/*
 * test_bundle.c: an inference bundle is checksummed whole (src/infer/
 * bundle.c; docs/inference.md, "Bundles"; docs/RELIABILITY.md).  A small
 * model is trained for a few steps, exported at int8 and fp32, then every
 * byte class is damaged, one copy at a time:
 *
 *   manifest      every byte flipped (structure, numbers, whitespace, the
 *                 checksum's own digits, its last newline): refused, the
 *                 manifest named; cut and extended by a byte
 *   rows, dense   every byte of every table file and of dense.params
 *                 flipped; each file cut, extended, missing: the file named
 *   behind it     a manifest whose checksum is made right again but whose
 *                 table entry does not fit the model, or whose combiner was
 *                 changed: the first refused by the entry check, the second
 *                 scores differently (the checksum is what catches an edit)
 *   version 1     a manifest without its own checksum: refused, with how to
 *                 make a new one
 *   dynamic       a model with a dynamic table: its bundle is version 3 (a
 *                 fixed model's stays version 2); every byte of its manifest,
 *                 rows and keys files flipped; behind the checksum, keys out
 *                 of order, a dynamic entry called fixed, and "kind" in a
 *                 version 2 manifest are refused by name
 *   links         a link at the bundle's name or at its temporary name:
 *                 refused, the target untouched
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <xxhash.h>

#include "check.h"
#include "ckpt/ckpt_impl.h"
#include "ember-data.h"
#include "ember-train.h"
#include "infer/bundle.h"
#include "util.h"

static char root[256];

static void spill(const char *path, const unsigned char *p, long n)
{
    FILE *f = fopen(path, "wb");
    fwrite(p, 1, (size_t)n, f);
    fclose(f);
}

/* The bundle at dir opens (bundle_open: manifest, sizes, checksums). */
static int opens(const char *dir, char *err, size_t len)
{
    ember_bundle *b = NULL;
    int st = bundle_open(dir, &b, err, len);
    bundle_close(b);
    return st;
}

/* Every byte of dir/file flipped in turn (and the file cut and extended by
 * one byte): each copy refused with a status in {EFORMAT, ECORRUPT} and the
 * file named; the file restored after. */
static void sweep(const char *dir, const char *file)
{
    char path[600], err[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    long n = 0;
    unsigned char *orig = test_read_file(path, &n), *copy = malloc((size_t)n + 2);
    CHECK(orig && n > 0);
    int refused = 0, named = 0;
    for (long i = 0; i < n; i++) {
        memcpy(copy, orig, (size_t)n);
        copy[i] ^= (unsigned char)(1u << (i % 8));
        spill(path, copy, n);
        int st = opens(dir, err, sizeof err);
        refused += st == EMBER_ECORRUPT || st == EMBER_EFORMAT;
        named += strstr(err, file) != NULL;
        if (st == EMBER_OK)
            fprintf(stderr, "%s: byte %ld flipped and accepted\n", path, i);
    }
    CHECK_MSG(refused == n && named == n, "%s: %d of %ld flips refused, %d named", file, refused, n, named);
    spill(path, orig, n - 1);
    CHECK(opens(dir, err, sizeof err) != EMBER_OK && strstr(err, file));
    memcpy(copy, orig, (size_t)n);
    copy[n] = '\n';
    spill(path, copy, n + 1);
    CHECK_MSG(opens(dir, err, sizeof err) != EMBER_OK && strstr(err, file), "%s extended: %s", file, err);
    unlink(path);
    CHECK(opens(dir, err, sizeof err) == EMBER_EIO && strstr(err, file));
    spill(path, orig, n);
    CHECK_MSG(opens(dir, err, sizeof err) == EMBER_OK, "%s restored: %s", file, err);
    free(orig);
    free(copy);
}

/* The manifest edited by f, then sealed again as ember seals it. */
static void reseal(const char *dir, void (*f)(json_t *))
{
    char path[600];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    json_t *m = json_load_file(path, 0, NULL);
    CHECK(m != NULL);
    json_object_del(m, "manifest_xxh3");
    f(m);
    char *text = ckpt_json_sealed(m);
    spill(path, (const unsigned char *)text, (long)strlen(text));
    free(text);
    json_decref(m);
}

static void wrong_dim(json_t *m)
{
    json_t *t = json_array_get(json_object_get(m, "tables"), 0);
    json_object_set_new(t, "dim", json_integer(8));
}

static void other_combiner(json_t *m)
{
    json_t *f = json_array_get(json_object_get(json_object_get(m, "model"), "features"), 0);
    json_object_set_new(f, "combiner", json_integer(1));
}

static void version_1(json_t *m) { json_object_set_new(m, "version", json_integer(1)); }
static void version_2(json_t *m) { json_object_set_new(m, "version", json_integer(2)); }

static int predictor_opens(const char *model)
{
    ember_predictor *p = NULL;
    int st = ember_predictor_open(model, NULL, &p);
    ember_predictor_close(p);
    return st == EMBER_OK;
}

static void copy_bundle(const char *from, const char *to)
{
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
    CHECK(system(cmd) == 0);
}

static void dynamic_called_fixed(json_t *m)
{
    json_t *t = json_array_get(json_object_get(m, "tables"), 0);
    json_object_set_new(t, "kind", json_string("fixed"));
}

/* The first two keys of table 0 swapped, and its keys entry's checksum
 * made right: only the order check can refuse it. */
static const char *swap_dir;
static void keys_swapped(json_t *m)
{
    json_t *k = json_object_get(json_array_get(json_object_get(m, "tables"), 0), "keys");
    char path[600];
    snprintf(path, sizeof path, "%s/%s", swap_dir, json_string_value(json_object_get(k, "file")));
    long n = 0;
    unsigned char *p = test_read_file(path, &n), tmp[8];
    CHECK(p && n >= 16);
    memcpy(tmp, p, 8), memcpy(p, p + 8, 8), memcpy(p + 8, tmp, 8);
    spill(path, p, n);
    json_object_set_new(k, "xxh3", json_integer((json_int_t)XXH3_64bits(p, (size_t)n)));
    free(p);
}

/* A model with a dynamic table, exported at int8: damaged every way. */
static void dynamic_bundle(void)
{
    char cfg[400], ck[400], b[400], work[400], err[1024], path[600];
    snprintf(cfg, sizeof cfg, "%s/dyn.cfg", root);
    snprintf(ck, sizeof ck, "%s/dck", root);
    snprintf(b, sizeof b, "%s/db-int8", root);
    snprintf(work, sizeof work, "%s/dwork", root);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "tables = ({ name = \"u\"; kind = \"dynamic\"; keys = 400; capacity = 24; dim = 4; },\n"
               "          { name = \"i\"; rows = 10; dim = 4; });\n"
               "features = ({ name = \"fu\"; table = \"u\"; pooling = 1; }, { name = \"fi\"; table = \"i\"; });\n"
               "train = { steps = 6; micro_batch = 8; eval_samples = 16; metrics = \"\"; plot = \"\"; };\n"
               "model = { bottom = [4]; top = [4]; };\n");
    fclose(f);
    test_train_config(cfg, ck);
    CHECK_MSG(ember_bundle_write(ck, b, "int8", NULL, 0) == EMBER_OK, "%s", ember_errmsg(NULL));
    CHECK(predictor_opens(b));
    snprintf(path, sizeof path, "%s/manifest.json", b);
    json_t *m = json_load_file(path, 0, NULL);
    CHECK_MSG(json_integer_value(json_object_get(m, "version")) == 3, "a bundle with a dynamic table is version 3");
    json_decref(m);
    const char *files[] = {"manifest.json", "table-0000.rows", "table-0000.keys", "table-0001.rows"};
    copy_bundle(b, work);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        sweep(work, files[i]);
    copy_bundle(b, work);
    swap_dir = work;
    reseal(work, keys_swapped);
    CHECK(opens(work, err, sizeof err) == EMBER_EFORMAT);
    CHECK_MSG(strstr(err, "table-0000.keys") && strstr(err, "keys must ascend"), "%s", err);
    copy_bundle(b, work);
    reseal(work, dynamic_called_fixed);
    ember_predictor *p = NULL;
    CHECK(ember_predictor_open(work, NULL, &p) == EMBER_EFORMAT);
    CHECK_MSG(strstr(ember_errmsg(NULL), "table 'u': the manifest's entry is a fixed table, the model's is dynamic"),
              "%s", ember_errmsg(NULL));
    copy_bundle(b, work);
    reseal(work, version_2);
    CHECK(opens(work, err, sizeof err) == EMBER_EFORMAT);
    CHECK_MSG(strstr(err, "tables[0]: a dynamic table in a version 2 manifest"), "%s", err);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/ember-bundle-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    char cfg[400], ck[400], b8[400], b32[400], work[400], err[1024];
    snprintf(cfg, sizeof cfg, "%s/small.cfg", root);
    snprintf(ck, sizeof ck, "%s/ck", root);
    snprintf(b8, sizeof b8, "%s/b-int8", root);
    snprintf(b32, sizeof b32, "%s/b-fp32", root);
    snprintf(work, sizeof work, "%s/work", root);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "data = { synthetic = { num_dense = 2; num_sparse = 3; rows = 40; }; };\n"
               "train = { steps = 3; micro_batch = 64; eval_samples = 64; };\n"
               "model = { bottom = [8, 4]; top = [8]; emb_dim = 4; };\n");
    fclose(f);
    test_train_config(cfg, ck);
    CHECK_MSG(ember_bundle_write(ck, b8, "int8", NULL, 0) == EMBER_OK, "%s", ember_errmsg(NULL));
    CHECK_MSG(ember_bundle_write(ck, b32, "fp32", NULL, 0) == EMBER_OK, "%s", ember_errmsg(NULL));
    CHECK(predictor_opens(b8) && predictor_opens(b32));
    char mpath[600];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", b8);
    json_t *man = json_load_file(mpath, 0, NULL);
    CHECK_MSG(json_integer_value(json_object_get(man, "version")) == 2 &&
                  !json_object_get(json_array_get(json_object_get(man, "tables"), 0), "kind"),
              "a bundle of fixed tables is the version 2 bundle it was");
    json_decref(man);

    /* every byte class of both bundles */
    const char *files[] = {"manifest.json", "dense.params", "table-0000.rows", "table-0001.rows", "table-0002.rows"};
    for (int k = 0; k < 2; k++) {
        copy_bundle(k ? b32 : b8, work);
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
            sweep(work, files[i]);
    }

    /* behind the checksum: an entry that does not fit, made to verify */
    copy_bundle(b8, work);
    reseal(work, wrong_dim);
    CHECK(opens(work, err, sizeof err) == EMBER_OK); /* the files match the manifest... */
    ember_predictor *p = NULL;
    CHECK(ember_predictor_open(work, NULL, &p) == EMBER_EFORMAT); /* ...but not the model */
    CHECK_MSG(strstr(ember_errmsg(NULL), "the manifest's entry has"), "%s", ember_errmsg(NULL));
    /* an edited combiner: caught by the checksum unless it is made right again */
    copy_bundle(b8, work);
    char path[600];
    snprintf(path, sizeof path, "%s/manifest.json", work);
    long n = 0;
    unsigned char *text = test_read_file(path, &n);
    char *at = strstr((char *)text, "\"combiner\": 0");
    CHECK(at != NULL);
    if (at) {
        at[strlen("\"combiner\": ")] = '1';
        spill(path, text, n);
        CHECK(ember_predictor_open(work, NULL, &p) == EMBER_ECORRUPT);
        CHECK_MSG(strstr(ember_errmsg(NULL), "manifest.json: checksum mismatch"), "%s", ember_errmsg(NULL));
    }
    free(text);
    copy_bundle(b8, work);
    reseal(work, other_combiner);
    CHECK(ember_predictor_open(work, NULL, &p) == EMBER_OK);
    ember_predictor_close(p);
    /* version 1: no checksum of its own */
    copy_bundle(b8, work);
    reseal(work, version_1);
    CHECK(opens(work, err, sizeof err) == EMBER_EFORMAT);
    CHECK_MSG(strstr(err, "a version 1 bundle") && strstr(err, "export it again"), "%s", err);

    /* links at the bundle's name and at its temporary name */
    char victim[400], link_at[700];
    snprintf(victim, sizeof victim, "%s/victim", root);
    mkdir(victim, 0700);
    snprintf(link_at, sizeof link_at, "%s/b-link", root);
    CHECK(symlink(victim, link_at) == 0);
    CHECK(ember_bundle_write(ck, link_at, "int8", NULL, 0) == EMBER_EINVAL);
    CHECK_MSG(strstr(ember_errmsg(NULL), "it exists"), "%s", ember_errmsg(NULL));
    snprintf(link_at, sizeof link_at, "%s/b-new.tmp-%ld", root, (long)getpid());
    CHECK(symlink(victim, link_at) == 0);
    snprintf(path, sizeof path, "%s/b-new", root);
    CHECK(ember_bundle_write(ck, path, "int8", NULL, 0) == EMBER_EIO);
    CHECK_MSG(strstr(ember_errmsg(NULL), "exists (a symbolic link)"), "%s", ember_errmsg(NULL));
    snprintf(path, sizeof path, "%s/victim/manifest.json", root);
    struct stat sb;
    CHECK_MSG(stat(path, &sb) != 0, "a bundle was written through a link");

    dynamic_bundle();

    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return check_report("test_bundle");
}
