/*
 * test_batch_file.c: the batch file writer and reader (ember.h "batch
 * files", docs/batch-format.md).
 *
 * Round trip: random headers and K random batches (weights on some, empty
 * bags, empty batches) come back bit-identical.  Corruption: every single
 * flipped byte and every truncation of a small file must be refused with
 * EMBER_EFORMAT and a message naming the file (never accepted, never a
 * crash); a flipped payload byte must name the batch and the checksum; bad
 * magic, a wrong version and absurd counts name their field; a missing file
 * is EMBER_EIO.  The writer refuses bad batches and leaves no file behind
 * when abandoned.  Seed: argv[1] or EMBER_TEST_SEED, else the clock; printed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "check.h"
#include "ember.h"
#include "util.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int64_t rnd_below(int64_t n)
{
    return (int64_t)(rnd() % (uint64_t)n);
}

static char tmpdir[256];

static void path_in_tmp(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", tmpdir, name);
}

/* ------------------------------------------------------ random content */

typedef struct file_spec {
    int32_t num_tables, num_features;
    int64_t table_rows[8];
    int32_t feature_table[8];
    ember_batch_file_info info;
} file_spec;

typedef struct owned_batch {
    ember_batch b;
    int32_t *lengths;
    int64_t *ids;
    float *weights;
} owned_batch;

static void random_spec(file_spec *s, int max_tables, int max_features)
{
    s->num_tables = 1 + (int32_t)rnd_below(max_tables);
    s->num_features = 1 + (int32_t)rnd_below(max_features);
    for (int t = 0; t < s->num_tables; t++)
        s->table_rows[t] = 1 + rnd_below(rnd_below(2) ? 10 : 3000000000LL);
    for (int f = 0; f < s->num_features; f++)
        s->feature_table[f] = (int32_t)rnd_below(s->num_tables);
    s->info.num_tables = s->num_tables;
    s->info.table_rows = s->table_rows;
    s->info.num_features = s->num_features;
    s->info.feature_table = s->feature_table;
}

static void random_batch(const file_spec *s, owned_batch *o, int max_b, int max_len)
{
    int32_t B = (int32_t)rnd_below(max_b + 1);
    int64_t nbags = (int64_t)B * s->num_features, n = 0;
    o->lengths = malloc((size_t)(nbags + 1) * sizeof *o->lengths);
    for (int64_t k = 0; k < nbags; k++) {
        o->lengths[k] = rnd_below(3) == 0 ? 0 : (int32_t)rnd_below(max_len + 1);
        n += o->lengths[k];
    }
    o->ids = malloc((size_t)(n + 1) * sizeof *o->ids);
    o->weights = NULL;
    int weighted = rnd_below(2) == 0;
    if (weighted)
        o->weights = malloc((size_t)(n + 1) * sizeof *o->weights);
    int64_t i = 0;
    for (int32_t f = 0; f < s->num_features; f++)
        for (int32_t b = 0; b < B; b++)
            for (int32_t j = 0; j < o->lengths[(int64_t)f * B + b]; j++, i++) {
                o->ids[i] = rnd_below(s->table_rows[s->feature_table[f]]);
                if (weighted)
                    o->weights[i] = (float)(rnd_below(1 << 24)) * 0x1p-20f - 3.0f;
            }
    o->b.batch_size = B;
    o->b.num_features = s->num_features;
    o->b.lengths = o->lengths;
    o->b.ids = o->ids;
    o->b.weights = o->weights;
    o->b.num_ids = n;
}

static void free_batch(owned_batch *o)
{
    free(o->lengths);
    free(o->ids);
    free(o->weights);
}

static int write_file(const char *path, const file_spec *s, owned_batch *bs, int k)
{
    ember_batch_writer *w = NULL;
    int rc = ember_batch_writer_create(path, &s->info, &w);
    for (int i = 0; rc == EMBER_OK && i < k; i++)
        rc = ember_batch_writer_append(w, &bs[i].b);
    if (rc == EMBER_OK)
        rc = ember_batch_writer_close(w);
    if (rc != EMBER_OK)
        fprintf(stderr, "write_file: %s: %s\n", ember_status_str(rc), ember_errmsg(NULL));
    ember_batch_writer_destroy(w);
    return rc;
}

/* Opens and reads to the end; returns the first failure status (or 0) and
 * the number of batches read. */
static int read_all(const char *path, int *nread)
{
    ember_batch_reader *r = NULL;
    *nread = 0;
    int rc = ember_batch_reader_open(path, &r);
    if (rc != EMBER_OK)
        return rc;
    ember_batch b;
    while ((rc = ember_batch_reader_next(r, &b)) == 1)
        (*nread)++;
    ember_batch_reader_destroy(r);
    return rc;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int msg_has(const char *needle)
{
    return strstr(ember_errmsg(NULL), needle) != NULL;
}

/* Byte offset where the record of batch k starts, by the documented layout. */
static long record_offset(const file_spec *s, const owned_batch *bs, int k)
{
    long off = 24 + 8L * s->num_tables + 4L * s->num_features + 8;
    for (int i = 0; i < k; i++)
        off += 20 + 4L * s->num_features * bs[i].b.batch_size + 8L * bs[i].b.num_ids +
               (bs[i].b.weights ? 4L * bs[i].b.num_ids : 0) + 8;
    return off;
}

/* ------------------------------------------------------------- tests */

static void test_round_trip(void)
{
    char path[512];
    path_in_tmp(path, sizeof path, "round.bin");
    for (int trial = 0; trial < 20; trial++) {
        file_spec s;
        random_spec(&s, 8, 8);
        int k = (int)rnd_below(12);
        owned_batch bs[12];
        for (int i = 0; i < k; i++)
            random_batch(&s, &bs[i], 40, 9);
        CHECK(write_file(path, &s, bs, k) == EMBER_OK);
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        CHECK(file_exists(path) && !file_exists(tmp));

        ember_batch_reader *r = NULL;
        int rc = ember_batch_reader_open(path, &r);
        CHECK_MSG(rc == EMBER_OK, "open: %s", ember_errmsg(NULL));
        if (rc != EMBER_OK)
            continue;
        const ember_batch_file_info *info = ember_batch_reader_info(r);
        CHECK(info->num_tables == s.num_tables && info->num_features == s.num_features);
        CHECK(!memcmp(info->table_rows, s.table_rows, (size_t)s.num_tables * 8));
        CHECK(!memcmp(info->feature_table, s.feature_table, (size_t)s.num_features * 4));
        for (int i = 0; i < k; i++) {
            ember_batch b;
            rc = ember_batch_reader_next(r, &b);
            CHECK_MSG(rc == 1, "trial %d batch %d: %d %s", trial, i, rc, ember_errmsg(NULL));
            if (rc != 1)
                break;
            const ember_batch *e = &bs[i].b;
            CHECK(b.batch_size == e->batch_size && b.num_features == e->num_features &&
                  b.num_ids == e->num_ids);
            CHECK(!memcmp(b.lengths, e->lengths, (size_t)e->batch_size * e->num_features * 4));
            CHECK(!memcmp(b.ids, e->ids, (size_t)e->num_ids * 8));
            CHECK((b.weights != NULL) == (e->weights != NULL));
            if (b.weights && e->weights)
                CHECK(!memcmp(b.weights, e->weights, (size_t)e->num_ids * 4));
        }
        ember_batch b;
        CHECK(ember_batch_reader_next(r, &b) == 0);
        CHECK(ember_batch_reader_next(r, &b) == 0); /* the end stays the end */
        ember_batch_reader_destroy(r);
        for (int i = 0; i < k; i++)
            free_batch(&bs[i]);
    }
}

/* A small file with known content for the corruption tests. */
typedef struct small_file {
    file_spec s;
    owned_batch bs[4];
    int k;
    char path[512];
    unsigned char *bytes;
    long size;
} small_file;

static void make_small(small_file *sf)
{
    path_in_tmp(sf->path, sizeof sf->path, "small.bin");
    random_spec(&sf->s, 3, 3);
    sf->k = 4;
    for (int i = 0; i < sf->k; i++) {
        do {
            free_batch(&sf->bs[i]);
            memset(&sf->bs[i], 0, sizeof sf->bs[i]);
            random_batch(&sf->s, &sf->bs[i], 5, 3);
        } while (sf->bs[i].b.num_ids == 0); /* every batch has ids to corrupt */
    }
    CHECK(write_file(sf->path, &sf->s, sf->bs, sf->k) == EMBER_OK);
    sf->bytes = test_read_file(sf->path, &sf->size);
    CHECK(sf->bytes != NULL && sf->size == record_offset(&sf->s, sf->bs, sf->k) + 20);
}

static void test_every_flip(const small_file *sf)
{
    char bad[512];
    path_in_tmp(bad, sizeof bad, "flipped.bin");
    unsigned char *p = malloc((size_t)sf->size);
    int refused = 0;
    for (long pos = 0; pos < sf->size; pos++) {
        memcpy(p, sf->bytes, (size_t)sf->size);
        p[pos] ^= (unsigned char)(1u << rnd_below(8));
        test_write_file(bad, p, sf->size);
        int n;
        int rc = read_all(bad, &n);
        if (rc == EMBER_EFORMAT && msg_has(bad)) {
            refused++;
        } else {
            CHECK_MSG(0, "flip at byte %ld of %ld: status %d after %d batches: %s", pos,
                      sf->size, rc, n, ember_errmsg(NULL));
            break;
        }
    }
    CHECK(refused == sf->size);
    free(p);
}

static void test_every_truncation(const small_file *sf)
{
    char bad[512];
    path_in_tmp(bad, sizeof bad, "truncated.bin");
    int refused = 0;
    for (long len = 0; len < sf->size; len++) {
        test_write_file(bad, sf->bytes, len);
        int n;
        int rc = read_all(bad, &n);
        if (rc == EMBER_EFORMAT && msg_has(bad)) {
            refused++;
        } else {
            CHECK_MSG(0, "truncated to %ld of %ld bytes: status %d after %d batches: %s", len,
                      sf->size, rc, n, ember_errmsg(NULL));
            break;
        }
    }
    CHECK(refused == sf->size);
    /* trailing garbage after the end record is refused too */
    unsigned char *p = malloc((size_t)sf->size + 3);
    memcpy(p, sf->bytes, (size_t)sf->size);
    memset(p + sf->size, 0, 3);
    test_write_file(bad, p, sf->size + 3);
    int n;
    CHECK(read_all(bad, &n) == EMBER_EFORMAT && msg_has(bad) && n == sf->k);
    free(p);
}

static void test_payload_flip_names_batch(const small_file *sf)
{
    char bad[512], want[64];
    path_in_tmp(bad, sizeof bad, "payload.bin");
    int k = (int)rnd_below(sf->k);
    long rec = record_offset(&sf->s, sf->bs, k);
    const ember_batch *b = &sf->bs[k].b;
    long ids_at = rec + 20 + 4L * b->num_features * b->batch_size;
    long pos = ids_at + rnd_below(8 * b->num_ids);
    unsigned char *p = malloc((size_t)sf->size);
    memcpy(p, sf->bytes, (size_t)sf->size);
    p[pos] ^= 0x40;
    test_write_file(bad, p, sf->size);
    int n;
    int rc = read_all(bad, &n);
    snprintf(want, sizeof want, "batch %d ", k);
    CHECK_MSG(rc == EMBER_EFORMAT && n == k && msg_has(bad) && msg_has(want) &&
                  msg_has("checksum"),
              "flip in batch %d ids: status %d after %d batches: %s", k, rc, n,
              ember_errmsg(NULL));
    /* the failure repeats, with its message, on later calls */
    ember_batch_reader *r = NULL;
    CHECK(ember_batch_reader_open(bad, &r) == EMBER_OK);
    ember_batch eb;
    for (int i = 0; i < k; i++)
        CHECK(ember_batch_reader_next(r, &eb) == 1);
    CHECK(ember_batch_reader_next(r, &eb) == EMBER_EFORMAT);
    CHECK(ember_batch_reader_next(r, &eb) == EMBER_EFORMAT && msg_has("checksum"));
    ember_batch_reader_destroy(r);
    free(p);
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Edits the file at one place and expects EFORMAT naming file and field. */
static void expect_field(const small_file *sf, const char *what, long pos, int width,
                         uint64_t value, const char *field)
{
    char bad[512];
    path_in_tmp(bad, sizeof bad, "edited.bin");
    unsigned char *p = malloc((size_t)sf->size);
    memcpy(p, sf->bytes, (size_t)sf->size);
    if (width == 4)
        put32(p + pos, (uint32_t)value);
    else
        put64(p + pos, value);
    test_write_file(bad, p, sf->size);
    int n;
    int rc = read_all(bad, &n);
    CHECK_MSG(rc == EMBER_EFORMAT && msg_has(bad) && msg_has(field),
              "%s: status %d, message: %s", what, rc, ember_errmsg(NULL));
    free(p);
}

static void test_fields(const small_file *sf)
{
    char bad[512];
    path_in_tmp(bad, sizeof bad, "magic.bin");
    unsigned char *p = malloc((size_t)sf->size);
    memcpy(p, sf->bytes, (size_t)sf->size);
    memcpy(p, "NOTBATCH", 8);
    test_write_file(bad, p, sf->size);
    ember_batch_reader *r = NULL;
    int rc = ember_batch_reader_open(bad, &r);
    CHECK_MSG(rc == EMBER_EFORMAT && r == NULL && msg_has(bad) && msg_has("magic"),
              "bad magic: %d %s", rc, ember_errmsg(NULL));
    free(p);

    expect_field(sf, "version 2", 8, 4, 2, "version");
    expect_field(sf, "version 0", 8, 4, 0, "version");
    expect_field(sf, "absurd num_tables", 16, 4, 0x7fffffff, "num_tables");
    expect_field(sf, "negative num_tables", 16, 4, 0xffffffff, "num_tables");
    expect_field(sf, "absurd num_features", 20, 4, 0x40000000, "num_features");
    long rec = record_offset(&sf->s, sf->bs, 1);
    expect_field(sf, "absurd batch_size", rec + 4, 4, 0x7fffffff, "batch_size");
    expect_field(sf, "negative batch_size", rec + 4, 4, 0xfffffffe, "batch_size");
    expect_field(sf, "absurd num_ids", rec + 8, 8, 0x7fffffffffffffffULL, "num_ids");
    expect_field(sf, "negative num_ids", rec + 8, 8, (uint64_t)-5, "num_ids");
    expect_field(sf, "unknown flags", rec + 16, 4, 6, "flags");
    expect_field(sf, "bad marker", rec, 4, 0x12345678, "marker");
    long end = record_offset(&sf->s, sf->bs, sf->k);
    expect_field(sf, "end count", end + 4, 8, (uint64_t)sf->k + 1, "end record");
}

/* Contents the checksum vouches for but that make no sense (a record
 * written by something other than ember's writer, which refuses them): the
 * record's checksum is recomputed, so only the content checks can object. */
static void expect_content(const small_file *sf, const char *what, long pos, uint64_t value,
                           const char *want)
{
    char bad[512];
    path_in_tmp(bad, sizeof bad, "content.bin");
    unsigned char *p = malloc((size_t)sf->size);
    memcpy(p, sf->bytes, (size_t)sf->size);
    long rec = record_offset(&sf->s, sf->bs, 0), len = record_offset(&sf->s, sf->bs, 1) - rec - 8;
    if (pos - rec >= 20 + 4L * sf->s.num_features * sf->bs[0].b.batch_size)
        put64(p + pos, value); /* an id */
    else
        put32(p + pos, (uint32_t)value); /* a length */
    put64(p + rec + len, XXH64(p + rec, (size_t)len, 0));
    test_write_file(bad, p, sf->size);
    int n;
    int rc = read_all(bad, &n);
    CHECK_MSG(rc == EMBER_EFORMAT && n == 0 && msg_has(bad) && msg_has("batch 0") && msg_has(want),
              "%s: status %d after %d batches, message: %s", what, rc, n, ember_errmsg(NULL));
    free(p);
}

static void test_content(const small_file *sf)
{
    long rec = record_offset(&sf->s, sf->bs, 0);
    long ids = rec + 20 + 4L * sf->s.num_features * sf->bs[0].b.batch_size;
    expect_content(sf, "negative id", ids, (uint64_t)-1, "= -1, outside the table's [0, ");
    expect_content(sf, "id >= rows", ids, (uint64_t)INT64_MAX, "= 9223372036854775807, outside the table's [0, ");
    expect_content(sf, "negative length", rec + 20, (uint64_t)-1, "lengths[feature 0, sample 0] = -1");
}

static void test_missing_and_writer(void)
{
    char path[512], tmp[600];
    path_in_tmp(path, sizeof path, "does-not-exist.bin");
    ember_batch_reader *r = (ember_batch_reader *)&r; /* must be reset to NULL */
    int rc = ember_batch_reader_open(path, &r);
    CHECK_MSG(rc == EMBER_EIO && r == NULL && msg_has(path), "missing: %d %s", rc,
              ember_errmsg(NULL));

    /* an empty file is not a batch file */
    path_in_tmp(path, sizeof path, "empty.bin");
    test_write_file(path, (const unsigned char *)"", 0);
    int n;
    CHECK(read_all(path, &n) == EMBER_EFORMAT && msg_has(path));

    /* zero batches round-trip */
    file_spec s;
    random_spec(&s, 3, 3);
    path_in_tmp(path, sizeof path, "zero.bin");
    CHECK(write_file(path, &s, NULL, 0) == EMBER_OK);
    CHECK(read_all(path, &n) == 0 && n == 0);

    /* abandoned writer: neither path nor path.tmp remain (nothing is named
     * while it writes: the output is an unnamed file until its close) */
    path_in_tmp(path, sizeof path, "abandoned.bin");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ember_batch_writer *w = NULL;
    CHECK(ember_batch_writer_create(path, &s.info, &w) == EMBER_OK);
    owned_batch o;
    random_batch(&s, &o, 4, 3);
    CHECK(ember_batch_writer_append(w, &o.b) == EMBER_OK);
    CHECK(!file_exists(tmp) && !file_exists(path));
    ember_batch_writer_destroy(w);
    CHECK(!file_exists(tmp) && !file_exists(path));

    /* the writer refuses what the reader would refuse */
    CHECK(ember_batch_writer_create(path, &s.info, &w) == EMBER_OK);
    if (o.b.num_ids > 0) {
        int64_t saved = o.ids[0];
        o.ids[0] = 1LL << 40; /* past every table of random_spec */
        CHECK(ember_batch_writer_append(w, &o.b) == EMBER_EINPUT && msg_has("id"));
        o.ids[0] = saved;
    }
    o.b.num_ids += 1;
    CHECK(ember_batch_writer_append(w, &o.b) == EMBER_EINPUT && msg_has("num_ids"));
    o.b.num_ids -= 1;
    o.b.num_features += 1;
    CHECK(ember_batch_writer_append(w, &o.b) == EMBER_EINPUT && msg_has("num_features"));
    o.b.num_features -= 1;
    CHECK(ember_batch_writer_append(w, &o.b) == EMBER_OK);
    CHECK(ember_batch_writer_close(w) == EMBER_OK);
    ember_batch_writer_destroy(w);
    CHECK(read_all(path, &n) == 0 && n == 1);
    free_batch(&o);

    /* bad info, and a folder that does not exist */
    file_spec bad = s;
    bad.info.table_rows = bad.table_rows;
    bad.info.feature_table = bad.feature_table;
    bad.feature_table[0] = bad.num_tables;
    CHECK(ember_batch_writer_create(path, &bad.info, &w) == EMBER_EINVAL && w == NULL);
    path_in_tmp(path, sizeof path, "no-such-dir/x.bin");
    CHECK(ember_batch_writer_create(path, &s.info, &w) == EMBER_EIO && w == NULL &&
          msg_has("no-such-dir"));
}

int main(int argc, char **argv)
{
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    const char *env = getenv("EMBER_TEST_SEED");
    if (argc > 1)
        seed = strtoull(argv[1], NULL, 0);
    else if (env)
        seed = strtoull(env, NULL, 0);
    printf("test_batch_file: seed %llu\n", (unsigned long long)seed);
    rng_state = seed;

    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/ember-test-batch-XXXXXX", base);
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }

    test_round_trip();
    small_file sf;
    memset(&sf, 0, sizeof sf);
    make_small(&sf);
    if (sf.bytes) {
        test_every_flip(&sf);
        test_every_truncation(&sf);
        test_payload_flip_names_batch(&sf);
        test_fields(&sf);
        test_content(&sf);
    }
    test_missing_and_writer();

    free(sf.bytes);
    for (int i = 0; i < sf.k; i++)
        free_batch(&sf.bs[i]);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_report("test_batch_file");
}
