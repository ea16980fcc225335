/*
 * fuzz_ckpt.c: libFuzzer target for the checkpoint loader
 * (ember_checkpoint_open + ember_load, src/ckpt/; docs/checkpoint-format.md).
 *
 * Once, at start-up: a collection of three tables (SGD, Adagrad, Adam; one
 * rank), trained one step so that rows, optimizer state and the step count
 * are not their initial values, is saved with a blob as step 1 of a root in
 * /dev/shm; the files of its step folder (manifest.json and the data file)
 * are kept in memory, and the tables and their state are copied aside.
 *
 * Input: byte 0 picks the file to damage (modulo their number), byte 1 the
 * damage and how the checkpoint is opened, the rest is the damage:
 *   mode 0  the file's bytes are replaced by the rest
 *   mode 1  the rest is a list of (offset: 2 bytes LE, value) patches, each
 *           XORed into the file at offset modulo its size (never a no-op)
 *   mode 2  the file is cut at (2 bytes LE) modulo its size, the remaining
 *           bytes appended
 *   mode 3  the file is deleted
 * bit 2 of byte 1: open the root (newest checkpoint) instead of the step
 * folder.  bit 3: after the damage, recompute the checksums it broke, so
 * that the fuzzer reaches the checks behind them: in a data file the
 * header's, each section's (as far as the section table is in range) and
 * the whole file's, and the same values where the manifest repeats them
 * (replaced as text); then the manifest's own manifest_xxh3.  The damaged copy is written into a fresh folder, opened and
 * loaded into the collection.  Required: every call returns success or an
 * error status with a message, never a crash, UB, leak or hang; when open or
 * load fails, every table's rows, optimizer state and the step count are
 * exactly as before (ember.h: "On any error no table has changed"), checked
 * against the copy: a difference abort()s.  A load that succeeded (a damage
 * the format cannot see, e.g. in JSON whitespace) is undone by loading the
 * original checkpoint again.  A checkpoint that opened is also read as a
 * trainer's dense model (ember_checkpoint_dense_summary, the reader of
 * src/ckpt/dense.c): the saved one carries a train.state and a dense model
 * in pieces (rank blobs dense.ranges, dense.params, dense.optim), which the
 * damage reaches too; the summary must succeed or fail with a message.
 */
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

#include <xxhash.h>

#include "ember.h"
#include "fuzz_util.h"

#define NT 3
#define MAX_FILES 8

static const int64_t ROWS[NT] = {7, 5, 3};
static const int32_t DIMS[NT] = {4, 2, 8};
static const ember_optimizer_kind KINDS[NT] = {EMBER_OPT_SGD, EMBER_OPT_ADAGRAD, EMBER_OPT_ADAM};

static struct {
    int ready;
    ember_collection *coll;
    ember_checkpoint *orig;       /* the undamaged checkpoint, to undo a load */
    char root[128], step[64];     /* root and the step folder's name           */
    char work[160];               /* damaged copies go here                    */
    int nfiles;
    char names[MAX_FILES][256];
    unsigned char *bytes[MAX_FILES];
    size_t sizes[MAX_FILES];
    float *rows[NT], *state[NT];  /* the tables as saved                       */
    int64_t steps;
    long iteration;
} G;

static void rm_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char p[512];
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            struct stat st;
            if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
                rm_tree(p);
            else
                unlink(p);
        }
        closedir(d);
    }
    rmdir(path);
}

static void *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    FUZZ_REQUIRE(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)size + 1);
    FUZZ_REQUIRE(p && fread(p, 1, (size_t)size, f) == (size_t)size, "cannot read %s", path);
    fclose(f);
    *n = (size_t)size;
    return p;
}

static void spit(const char *path, const unsigned char *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    FUZZ_REQUIRE(f && (n == 0 || fwrite(p, 1, n, f) == n) && fclose(f) == 0, "cannot write %s", path);
}

static void snapshot(float **rows, float **state, int64_t *steps)
{
    for (int t = 0; t < NT; t++) {
        int32_t sf = ember_state_floats(KINDS[t], DIMS[t]);
        rows[t] = malloc(sizeof(float) * (size_t)(ROWS[t] * DIMS[t]));
        state[t] = malloc(sizeof(float) * (size_t)(ROWS[t] * (sf > 0 ? sf : 1)));
        FUZZ_REQUIRE(rows[t] && state[t], "out of memory");
        FUZZ_REQUIRE(ember_table_read(G.coll, t, 0, ROWS[t], rows[t]) == EMBER_OK, "table_read");
        if (sf > 0)
            FUZZ_REQUIRE(ember_table_read_state(G.coll, t, 0, ROWS[t], state[t]) == EMBER_OK, "read_state");
    }
    ember_stats st;
    ember_collection_stats(G.coll, &st);
    *steps = st.steps;
}

/* 1 when the collection is exactly as saved (bitwise). */
static int unchanged(char *what, size_t n)
{
    float *rows[NT], *state[NT];
    int64_t steps;
    int same = 1;
    snapshot(rows, state, &steps);
    if (steps != G.steps) {
        snprintf(what, n, "step count %lld, saved %lld", (long long)steps, (long long)G.steps);
        same = 0;
    }
    for (int t = 0; t < NT; t++) {
        int32_t sf = ember_state_floats(KINDS[t], DIMS[t]);
        if (same && memcmp(rows[t], G.rows[t], sizeof(float) * (size_t)(ROWS[t] * DIMS[t])) != 0) {
            snprintf(what, n, "rows of table %d", t);
            same = 0;
        }
        if (same && sf > 0 && memcmp(state[t], G.state[t], sizeof(float) * (size_t)(ROWS[t] * sf)) != 0) {
            snprintf(what, n, "optimizer state of table %d", t);
            same = 0;
        }
        free(rows[t]);
        free(state[t]);
    }
    return same;
}

static void cleanup(void)
{
    rm_tree(G.root);
    rm_tree(G.work);
}

/* FUZZ_CKPT_SEEDS=DIR: writes the seed corpus (tests/fuzz/corpus/fuzz_ckpt/):
 * per file, each file whole (mode 0, so the fuzzer mutates real bytes), one
 * flipped byte (checksums as damaged, and fixed), a cut in half, and the
 * file missing. */
static void write_seeds(void)
{
    const char *dir = getenv("FUZZ_CKPT_SEEDS");
    if (!dir)
        return;
    for (int i = 0; i < G.nfiles; i++) {
        size_t size = G.sizes[i];
        unsigned char *s = malloc(size + 4);
        char path[600];
        FUZZ_REQUIRE(s != NULL, "out of memory");
        s[0] = (unsigned char)i;
        s[1] = 0;
        memcpy(s + 2, G.bytes[i], size);
        snprintf(path, sizeof path, "%s/whole-%d", dir, i);
        spit(path, s, size + 2);
        unsigned char flip[5] = {(unsigned char)i, 1, (unsigned char)(size / 2), (unsigned char)(size / 512), 0x10};
        snprintf(path, sizeof path, "%s/flip-%d", dir, i);
        spit(path, flip, sizeof flip);
        flip[1] = 1 | 8; /* checksums fixed: the flip reaches the checks behind them */
        snprintf(path, sizeof path, "%s/flipfix-%d", dir, i);
        spit(path, flip, sizeof flip);
        unsigned char cut[4] = {(unsigned char)i, 2, (unsigned char)(size / 2), (unsigned char)(size / 512)};
        snprintf(path, sizeof path, "%s/cut-%d", dir, i);
        spit(path, cut, sizeof cut);
        unsigned char gone[2] = {(unsigned char)i, 3 | 4};
        snprintf(path, sizeof path, "%s/missing-%d", dir, i);
        spit(path, gone, sizeof gone);
        free(s);
    }
}

static void setup(void)
{
    ember_table_config tc[NT];
    ember_feature_config fc[NT];
    static const char *const TNAMES[NT] = {"users", "items", "ads"}, *const FNAMES[NT] = {"u", "i", "a"};
    for (int t = 0; t < NT; t++) {
        tc[t] = ember_table_config_default();
        tc[t].name = TNAMES[t];
        tc[t].rows = ROWS[t];
        tc[t].dim = DIMS[t];
        tc[t].optimizer = ember_optimizer_default(KINDS[t]);
        fc[t] = (ember_feature_config){FNAMES[t], t, EMBER_COMBINER_SUM};
    }
    ember_collection_config cc = ember_collection_config_default();
    cc.tables = tc;
    cc.num_tables = NT;
    cc.features = fc;
    cc.num_features = NT;
    cc.seed = 11;
    cc.threads = 1;
    FUZZ_REQUIRE(ember_collection_create(&cc, &G.coll) == EMBER_OK, "create: %s", ember_errmsg(NULL));

    /* one training step: two samples, one id per bag */
    int32_t lengths[2 * NT] = {1, 1, 1, 1, 1, 1};
    int64_t ids[2 * NT] = {0, 6, 1, 4, 2, 0};
    ember_batch b = {0};
    b.batch_size = 2;
    b.num_features = NT;
    b.lengths = lengths;
    b.ids = ids;
    b.num_ids = 2 * NT;
    int64_t W = ember_pooled_width(G.coll);
    float *pooled = calloc((size_t)(2 * W), sizeof(float)), *grad = malloc(sizeof(float) * (size_t)(2 * W));
    FUZZ_REQUIRE(pooled && grad, "out of memory");
    for (int64_t i = 0; i < 2 * W; i++)
        grad[i] = 0.25f * (float)(i % 5) - 0.5f;
    FUZZ_REQUIRE(ember_forward(G.coll, &b, pooled, NULL) == EMBER_OK, "forward: %s", ember_errmsg(G.coll));
    FUZZ_REQUIRE(ember_backward(G.coll, grad, NULL) == EMBER_OK, "backward: %s", ember_errmsg(G.coll));
    free(pooled);
    free(grad);

    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(G.root, sizeof G.root, "%s/ember-fuzz-ckpt-%d", base, (int)getpid());
    snprintf(G.work, sizeof G.work, "%s/ember-fuzz-ckpt-work-%d", base, (int)getpid());
    rm_tree(G.root);
    static const char BLOB[] = "trainer state";
    /* a dense model of 40 parameters with 2 state floats each, in two pieces on this one rank */
    static const int64_t STATE[8] = {0x4e49415254424d45LL, 1, 1, 64, 40, 1, 80, 2};
    static const int64_t RANGES[9] = {0x534543454950444eLL, 1, 40, 2, 2, 0, 25, 25, 15};
    static float dense[40 * 3];
    for (int i = 0; i < 40 * 3; i++)
        dense[i] = 0.01f * (float)(i - 60);
    ember_blob blobs[2] = {{"trainer", BLOB, sizeof BLOB}, {"train.state", STATE, sizeof STATE}};
    ember_blob rank_blobs[3] = {{"dense.ranges", RANGES, sizeof RANGES},
                                {"dense.params", dense, 40 * sizeof(float)},
                                {"dense.optim", dense + 40, 80 * sizeof(float)}};
    ember_save_options so = {0};
    so.step = 1;
    so.blobs = blobs;
    so.num_blobs = 2;
    so.rank_blobs = rank_blobs;
    so.num_rank_blobs = 3;
    FUZZ_REQUIRE(ember_save(G.coll, G.root, &so) == EMBER_OK, "save: %s / %s", ember_errmsg(G.coll),
                 ember_errmsg(NULL));
    FUZZ_REQUIRE(ember_checkpoint_open(G.root, &G.orig) == EMBER_OK, "open: %s", ember_errmsg(NULL));
    const char *step = strrchr(ember_checkpoint_path(G.orig), '/');
    snprintf(G.step, sizeof G.step, "%s", step ? step + 1 : ember_checkpoint_path(G.orig));

    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", G.root, G.step);
    DIR *d = opendir(dir);
    FUZZ_REQUIRE(d != NULL, "cannot list %s", dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        FUZZ_REQUIRE(G.nfiles < MAX_FILES, "more than %d files in %s", MAX_FILES, dir);
        snprintf(G.names[G.nfiles++], sizeof G.names[0], "%s", e->d_name);
    }
    closedir(d);
    /* a fixed order (readdir's is not) so that inputs replay */
    for (int i = 0; i < G.nfiles; i++)
        for (int j = i + 1; j < G.nfiles; j++)
            if (strcmp(G.names[i], G.names[j]) > 0) {
                char t[256];
                memcpy(t, G.names[i], sizeof t);
                memcpy(G.names[i], G.names[j], sizeof t);
                memcpy(G.names[j], t, sizeof t);
            }
    for (int i = 0; i < G.nfiles; i++) {
        char p[800];
        snprintf(p, sizeof p, "%s/%s", dir, G.names[i]);
        G.bytes[i] = slurp(p, &G.sizes[i]);
        fprintf(stderr, "fuzz_ckpt: file %d: %s (%zu bytes)\n", i, G.names[i], G.sizes[i]);
    }
    snapshot(G.rows, G.state, &G.steps);
    atexit(cleanup);
    write_seeds();
    G.ready = 1;
}

/* The XXH3-64 values a data file holds (header, sections, whole file) at
 * the places docs/checkpoint-format.md gives; with fix, recomputed first.
 * Returns how many were found (at most max). */
static int data_checksums(unsigned char *f, size_t size, int fix, uint64_t *out, int max)
{
    int n = 0;
    if (size < 64 + 16 || memcmp(f, "EMBRCKPT", 8) != 0)
        return 0;
    if (fix)
        fz_put_u64(f + 56, XXH3_64bits(f, 56));
    out[n++] = fz_get_u64(f + 56);
    uint64_t T = fz_get_u64(f + 40), ns = fz_get_u32(f + 32);
    if (T <= size && ns <= (size - T) / 32)
        for (uint64_t i = 0; i < ns && n < max - 1; i++) {
            unsigned char *e = f + T + 32 * i;
            uint64_t off = fz_get_u64(e + 8), bytes = fz_get_u64(e + 16);
            if (off > size || bytes > size - off)
                continue;
            if (fix)
                fz_put_u64(e + 24, XXH3_64bits(f + off, (size_t)bytes));
            out[n++] = fz_get_u64(e + 24);
        }
    if (fix)
        fz_put_u64(f + size - 8, XXH3_64bits(f, size - 8));
    out[n++] = fz_get_u64(f + size - 8);
    return n;
}

/* Replaces every "%016llx" of from[i] in text by to[i] (same length). */
static void replace_hex(unsigned char *text, size_t size, const uint64_t *from, const uint64_t *to, int n)
{
    for (int i = 0; i < n; i++) {
        char a[17], b[17];
        snprintf(a, sizeof a, "%016llx", (unsigned long long)from[i]);
        snprintf(b, sizeof b, "%016llx", (unsigned long long)to[i]);
        for (size_t j = 0; j + 16 <= size; j++)
            if (!memcmp(text + j, a, 16))
                memcpy(text + j, b, 16);
    }
}

/* The manifest's manifest_xxh3: XXH3-64 of every byte before its digits. */
static void fix_manifest(unsigned char *m, size_t size)
{
    static const char KEY[] = "\"manifest_xxh3\": \"";
    size_t klen = sizeof KEY - 1, at = (size_t)-1;
    for (size_t j = 0; j + klen + 16 <= size; j++)
        if (!memcmp(m + j, KEY, klen))
            at = j + klen;
    if (at == (size_t)-1)
        return;
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)XXH3_64bits(m, at));
    memcpy(m + at, hex, 16);
}

/* Writes the checkpoint with file k damaged by (mode, p[0, n)) under
 * G.work, checksums recomputed with fix; returns the path to open. */
static const char *write_damaged(int k, int mode, int fix, const unsigned char *p, size_t n)
{
    unsigned char *files[MAX_FILES];
    size_t sizes[MAX_FILES];
    int missing = -1;
    /* the damaged bytes of every file, in memory */
    for (int i = 0; i < G.nfiles; i++) {
        size_t size = G.sizes[i];
        unsigned char *c = NULL;
        if (i != k || mode == 1) {
            c = malloc(size ? size : 1);
            FUZZ_REQUIRE(c != NULL, "out of memory");
            memcpy(c, G.bytes[i], size);
            sizes[i] = size;
        }
        if (i == k && mode == 0) {
            c = malloc(n ? n : 1);
            FUZZ_REQUIRE(c != NULL, "out of memory");
            memcpy(c, p, n);
            sizes[i] = n;
        } else if (i == k && mode == 1) {
            for (size_t j = 0; j + 3 <= n && size > 0; j += 3) {
                size_t off = ((size_t)p[j] | (size_t)p[j + 1] << 8) % size;
                c[off] ^= p[j + 2] ? p[j + 2] : 0x01;
            }
        } else if (i == k && mode == 2) {
            size_t cut = n >= 2 && size > 0 ? ((size_t)p[0] | (size_t)p[1] << 8) % size : 0;
            const unsigned char *tail = n >= 2 ? p + 2 : p;
            size_t tn = n >= 2 ? n - 2 : 0;
            c = malloc(cut + tn + 1);
            FUZZ_REQUIRE(c != NULL, "out of memory");
            memcpy(c, G.bytes[i], cut);
            memcpy(c + cut, tail, tn);
            sizes[i] = cut + tn;
        } else if (i == k && mode == 3) {
            missing = i;
            sizes[i] = 0;
        }
        files[i] = c;
    }
    if (fix && missing != k) {
        int manifest = -1;
        for (int i = 0; i < G.nfiles; i++)
            if (!strcmp(G.names[i], "manifest.json"))
                manifest = i;
        if (k != manifest && manifest >= 0 && files[manifest]) {
            uint64_t before[64], after[64];
            int nb = data_checksums(G.bytes[k], G.sizes[k], 0, before, 64);
            int na = data_checksums(files[k], sizes[k], 1, after, 64);
            if (na == nb)
                replace_hex(files[manifest], sizes[manifest], before, after, na);
        }
        if (manifest >= 0 && files[manifest])
            fix_manifest(files[manifest], sizes[manifest]);
    }
    char dir[512];
    rm_tree(G.work);
    snprintf(dir, sizeof dir, "%s/%s", G.work, G.step);
    FUZZ_REQUIRE(mkdir(G.work, 0755) == 0 && mkdir(dir, 0755) == 0, "mkdir %s: %s", dir, strerror(errno));
    for (int i = 0; i < G.nfiles; i++) {
        if (i == missing)
            continue;
        char path[800];
        snprintf(path, sizeof path, "%s/%s", dir, G.names[i]);
        spit(path, files[i], sizes[i]);
        free(files[i]);
    }
    static char open_path[512];
    snprintf(open_path, sizeof open_path, "%s", dir);
    return open_path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!G.ready)
        setup();
    if (size < 2)
        return 0;
    int k = data[0] % G.nfiles, mode = data[1] & 3, open_root = (data[1] >> 2) & 1, fix = (data[1] >> 3) & 1;
    const char *path = write_damaged(k, mode, fix, data + 2, size - 2);
    ember_checkpoint *ck = NULL;
    char what[128];
    static int verbose = -1; /* FUZZ_CKPT_VERBOSE=1: each input's outcome on stderr */
    if (verbose < 0)
        verbose = getenv("FUZZ_CKPT_VERBOSE") != NULL;
    int rc = ember_checkpoint_open(open_root ? G.work : path, &ck);
    if (verbose)
        fprintf(stderr, "fuzz_ckpt: open: %s %s\n", ember_status_str(rc), rc ? ember_errmsg(NULL) : "");
    if (rc != EMBER_OK) {
        FUZZ_REQUIRE(rc < 0 && ck == NULL, "open: status %d", rc);
        FUZZ_REQUIRE(ember_errmsg(NULL)[0] != '\0', "open failed (%s) without a message",
                     ember_status_str(rc));
        FUZZ_REQUIRE(unchanged(what, sizeof what), "a failed open changed the %s", what);
        return 0;
    }
    rc = ember_load(G.coll, ck);
    if (verbose)
        fprintf(stderr, "fuzz_ckpt: load: %s %s\n", ember_status_str(rc), rc ? ember_errmsg(G.coll) : "");
    if (rc != EMBER_OK) {
        FUZZ_REQUIRE(rc < 0, "load: status %d", rc);
        FUZZ_REQUIRE(ember_errmsg(G.coll)[0] != '\0' || ember_errmsg(NULL)[0] != '\0',
                     "load failed (%s) without a message", ember_status_str(rc));
        FUZZ_REQUIRE(unchanged(what, sizeof what), "a failed load (%s: %s) changed the %s",
                     ember_status_str(rc), ember_errmsg(G.coll), what);
    } else {
        /* the damage was invisible (or harmless): back to the original */
        FUZZ_REQUIRE(ember_load(G.coll, G.orig) == EMBER_OK, "reload of the original: %s",
                     ember_errmsg(G.coll));
        FUZZ_REQUIRE(unchanged(what, sizeof what), "reloading the original left the %s different", what);
    }
    /* the dense model, whole or in pieces, as `ember inspect` reads it */
    ember_dense_summary ds;
    rc = ember_checkpoint_dense_summary(ck, &ds);
    if (verbose)
        fprintf(stderr, "fuzz_ckpt: dense: %s %s\n", ember_status_str(rc), rc ? ember_errmsg(ck) : "");
    FUZZ_REQUIRE(rc == EMBER_OK || (rc < 0 && ember_errmsg(ck)[0] != '\0'), "dense summary: status %d without a "
                 "message", rc);
    FUZZ_REQUIRE(rc != EMBER_OK || (ds.params > 0 && ds.params <= ((int64_t)1 << 40)), "dense summary: %lld "
                 "parameters", (long long)ds.params);
    /* blobs of a checkpoint that opened must be readable */
    int64_t bytes = -1;
    const unsigned char *blob = ember_checkpoint_blob(ck, -1, "trainer", &bytes);
    if (blob) {
        volatile unsigned char x = 0;
        for (int64_t i = 0; i < bytes; i++)
            x ^= blob[i];
        (void)x;
    }
    ember_checkpoint_close(ck);
    return 0;
}
