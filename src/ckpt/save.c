/*
 * save.c: ember_save, the collective, atomic save of a collection.
 *
 * Each rank writes the rows it holds in its own layout (no row data moves):
 * for every logical table, a values section and a state section with the
 * held rows in ascending row order (ckpt_impl.h says which rows and columns),
 * then the blobs.  The protocol (docs/checkpoint-format.md):
 *   1. rank 0 removes leftovers and creates root/.tmp-step-<step>-<nonce>,
 *      whose name it broadcasts;
 *   2. every rank writes its file (core/safe_file.h: unnamed until complete,
 *      fsynced, named, the folder fsynced); the ranks agree on success and rank 0 gathers
 *      every file's size and checksums;
 *   3. rank 0 writes manifest.json the same way, renames the folder to
 *      step-<step>, fsyncs root, and deletes checkpoints beyond `keep`.
 * Any failure makes every rank return an error and leaves root as it was.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "ckpt/ckpt_impl.h"
#include "collection/collection.h"
#include "step/tier.h"

#define MSG CKPT_MSG
#define fmt ckpt_fmt

typedef struct agree_rec {
    int32_t st;
    char msg[MSG];
} agree_rec;

/* Every rank returns an error when one failed: its own, or EMBER_ECOMM
 * naming the rank that failed. */
static int agree(ember_collection *c, int st, const char *msg)
{
    int32_t W = c->world->size;
    agree_rec mine = {st, ""}, *all = calloc((size_t)W, sizeof *all);
    fmt(mine.msg, sizeof mine.msg, "%s", st != EMBER_OK ? msg : "");
    if (!all)
        return ember_fail(c, EMBER_ENOMEM, "out of memory");
    if (ember_comm_allgather(c->world, &mine, (int64_t)sizeof mine, all) != EMBER_OK) {
        free(all);
        c->panicked = 1;
        return ember_fail(c, EMBER_ECOMM, "%s", c->world->errmsg);
    }
    int out = EMBER_OK;
    if (st != EMBER_OK)
        out = ember_fail(c, st, "%s", msg);
    for (int32_t r = 0; r < W && out == EMBER_OK; r++)
        if (all[r].st != EMBER_OK) {
            all[r].msg[MSG - 1] = 0;
            out = ember_fail(c, EMBER_ECOMM, "rank %d could not save: %s", (int)r, all[r].msg);
        }
    free(all);
    return out;
}

/* The checkpoint's description (tables, blob names, this world's files
 * with their sections sized), as every rank computes it. */
static int describe(ember_collection *c, const ember_save_options *opt, ember_checkpoint *ck)
{
    int32_t W = c->world->size;
    ck->step = opt->step;
    ck->world = W;
    ck->seed = c->cfg.seed;
    ck->opt_steps = c->stats.steps;
    ck->num_tables = c->cfg.num_tables;
    ck->num_blobs = opt->num_blobs;
    ck->num_rank_blobs = opt->num_rank_blobs;
    ck->tables = calloc((size_t)ck->num_tables + 1, sizeof *ck->tables);
    ck->blob_names = calloc((size_t)opt->num_blobs + 1, sizeof(char *));
    ck->rank_blob_names = calloc((size_t)opt->num_rank_blobs + 1, sizeof(char *));
    ck->files = calloc((size_t)W, sizeof *ck->files);
    if (!ck->tables || !ck->blob_names || !ck->rank_blob_names || !ck->files)
        return EMBER_ENOMEM;
    for (int32_t t = 0; t < ck->num_tables; t++) {
        const ember_ltable *lt = &c->tables[t];
        const ember_ptable *pt = &c->ptables[lt->ptable];
        ck->tables[t] = (ckpt_table_info){lt->cfg.name, lt->cfg.rows, lt->cfg.dim, lt->cfg.optimizer,
                                          lt->cfg.init, lt->cfg.init_value, lt->rng_key,
                                          ember_state_floats(lt->cfg.optimizer.kind, lt->cfg.dim),
                                          pt->placement, pt->owner, W, lt->offset, pt->local_dim,
                                          EMBER_TABLE_FIXED, 0, 0, 0, EMBER_EVICT_LRU, 0, 1, lt->cfg.precision,
                                          lt->cfg.state_precision};
        if (pt->dyn) {
            ckpt_table_info *ti = &ck->tables[t];
            ti->kind = EMBER_TABLE_DYNAMIC;
            ti->capacity = pt->dyn->d.p.capacity;
            ti->admit_after = pt->dyn->d.p.admit_after;
            ti->evict = pt->dyn->d.p.evict;
            ti->ttl_steps = pt->dyn->d.p.ttl_steps;
            ti->sketch_width = pt->dyn->d.p.sketch_width;
        }
    }
    for (int32_t b = 0; b < opt->num_blobs; b++)
        ck->blob_names[b] = opt->blobs[b].name;
    for (int32_t b = 0; b < opt->num_rank_blobs; b++)
        ck->rank_blob_names[b] = opt->rank_blobs[b].name;
    for (int32_t r = 0; r < W; r++) {
        ckpt_file *f = &ck->files[r];
        ckpt_file_name_of(f->name, r, W);
        int32_t n = ckpt_expected_sections(ck, r, NULL);
        f->sections = calloc((size_t)n + 1, sizeof *f->sections);
        if (!f->sections)
            return EMBER_ENOMEM;
        f->num_sections = n;
        ckpt_expected_sections(ck, r, f->sections);
        for (int32_t i = 0; i < n; i++) { /* blob sizes: rank 0's shared ones; other ranks' own: gathered later */
            ckpt_section *s = &f->sections[i];
            if (s->what == CKPT_BLOB)
                s->bytes = opt->blobs[s->index].bytes;
            else if (s->what == CKPT_RANK_BLOB)
                s->bytes = r == c->world->rank ? opt->rank_blobs[s->index].bytes : 0;
        }
        ckpt_layout(f);
    }
    return EMBER_OK;
}

static int check_blobs(const ember_blob *b, int32_t n, const char *what, char *msg)
{
    if (n < 0 || n > CKPT_MAX_BLOBS || (n > 0 && !b)) {
        fmt(msg, MSG, "%s: %d blobs (0 to %d, non-NULL)", what, (int)n, CKPT_MAX_BLOBS);
        return EMBER_EINVAL;
    }
    for (int32_t i = 0; i < n; i++) {
        if (!ckpt_blob_name_ok(b[i].name)) {
            fmt(msg, MSG, "%s[%d].name: not 1 to 63 of [A-Za-z0-9_.-]", what, (int)i);
            return EMBER_EINVAL;
        }
        if (b[i].bytes < 0 || b[i].bytes > (INT64_C(1) << 48) || (b[i].bytes > 0 && !b[i].data)) {
            fmt(msg, MSG, "%s[%d] \"%s\": bad data or bytes %lld", what, (int)i, b[i].name,
                     (long long)b[i].bytes);
            return EMBER_EINVAL;
        }
        for (int32_t j = 0; j < i; j++)
            if (strcmp(b[i].name, b[j].name) == 0) {
                fmt(msg, MSG, "%s[%d]: the name \"%s\" appears twice", what, (int)i, b[i].name);
                return EMBER_EINVAL;
            }
    }
    return EMBER_OK;
}

static int check_options(const ember_collection *c, const char *root, const ember_save_options *o, char *msg)
{
    if (!root || !root[0] || strlen(root) > 3000) {
        fmt(msg, MSG, "root: an empty or too long path");
        return EMBER_EINVAL;
    }
    if (!o) {
        fmt(msg, MSG, "options: NULL");
        return EMBER_EINVAL;
    }
    if (o->step < 0 || o->step > INT64_C(999999999999) || o->keep < 0) {
        fmt(msg, MSG, "options: step %lld outside [0, 10^12) or keep %d < 0", (long long)o->step,
                 (int)o->keep);
        return EMBER_EINVAL;
    }
    int st = check_blobs(o->blobs, o->num_blobs, "blobs", msg);
    return st != EMBER_OK ? st : check_blobs(o->rank_blobs, o->num_rank_blobs, "rank_blobs", msg);
}

/* Rank r's file as the other ranks cannot predict it (sizes of its rank
 * blobs, every checksum): gathered by all, used by rank 0.  Also checks
 * that every rank passed the same rank blob names. */
static int gather_files(ember_collection *c, ember_checkpoint *ck, const ember_save_options *opt, char *msg)
{
    int32_t W = c->world->size, rank = c->world->rank, max = 0;
    for (int32_t r = 0; r < W; r++)
        max = ck->files[r].num_sections > max ? ck->files[r].num_sections : max;
    int64_t per = 3 + 2 * (int64_t)max;
    int64_t *all = calloc((size_t)(per * (W + 1)), sizeof(int64_t)), *mine = all + per * W;
    if (!all) {
        fmt(msg, MSG, "out of memory");
        return EMBER_ENOMEM;
    }
    XXH64_hash_t names = XXH3_64bits(NULL, 0);
    for (int32_t b = 0; b < opt->num_rank_blobs; b++)
        names = XXH3_64bits_withSeed(opt->rank_blobs[b].name, strlen(opt->rank_blobs[b].name), names);
    const ckpt_file *f = &ck->files[rank];
    mine[0] = f->bytes;
    mine[1] = (int64_t)f->checksum;
    mine[2] = (int64_t)names;
    for (int32_t i = 0; i < f->num_sections; i++) {
        mine[3 + 2 * i] = f->sections[i].bytes;
        mine[4 + 2 * i] = (int64_t)f->sections[i].checksum;
    }
    if (ember_comm_allgather(c->world, mine, per * (int64_t)sizeof(int64_t), all) != EMBER_OK) {
        free(all);
        c->panicked = 1;
        fmt(msg, MSG, "%s", c->world->errmsg);
        return EMBER_ECOMM;
    }
    int st = EMBER_OK;
    for (int32_t r = 0; r < W; r++) {
        ckpt_file *g = &ck->files[r];
        const int64_t *rec = all + per * r;
        for (int32_t i = 0; i < g->num_sections; i++) {
            g->sections[i].bytes = rec[3 + 2 * i];
            g->sections[i].checksum = (uint64_t)rec[4 + 2 * i];
        }
        ckpt_layout(g);
        EMBER_ASSERT(g->bytes == rec[0]);
        g->checksum = (uint64_t)rec[1];
        if (rec[2] != all[2] && st == EMBER_OK) {
            fmt(msg, MSG, "rank_blobs: rank %d has other names than rank 0", (int)r);
            st = EMBER_EINVAL;
        }
    }
    free(all);
    return st;
}

/* Rank 0, once every file is in dir: the manifest, the rename, `keep`. */
static int publish(ember_checkpoint *ck, const safe_dir *root, const safe_dir *dir, const char *name, int32_t keep,
                   char *msg)
{
    char *text = ckpt_manifest_encode(ck);
    if (!text) {
        fmt(msg, MSG, "out of memory for the manifest");
        return EMBER_ENOMEM;
    }
    int st = ckpt_write_atomic(dir, CKPT_MANIFEST, text, (int64_t)strlen(text), msg, MSG);
    free(text);
    char dst[64];
    fmt(dst, sizeof dst, "step-%012lld", (long long)ck->step);
    if (st == EMBER_OK)
        st = ckpt_publish(root, name, dst, msg, MSG);
    if (st != EMBER_OK || keep == 0)
        return st;
    int64_t *steps;
    int64_t n = ckpt_list_steps_at(root->fd, &steps);
    int64_t excess = n - keep; /* delete the oldest others; never this one */
    for (int64_t i = 0; i < n && excess > 0; i++)
        if (steps[i] != ck->step) {
            ckpt_discard(root, steps[i], msg, MSG);
            excess--;
        }
    free(steps);
    msg[0] = 0;
    return EMBER_OK;
}

int ember_save(ember_collection *c, const char *root, const ember_save_options *opt)
{
    if (!c)
        return EMBER_EINVAL;
    if (c->panicked)
        return ember_fail(c, EMBER_EPANIC, "collection disabled by an earlier fatal error");
    int32_t rank = c->world->rank;
    char msg[MSG] = "", name[64] = "";
    safe_dir rootd = SAFE_DIR_INIT, dir = SAFE_DIR_INIT;
    ember_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    int st = check_options(c, root, opt, msg);
    /* the SSD tier writes its dirty rows back first (the checkpoint reads
     * every row from the cache or the store file either way) */
    if (st == EMBER_OK && (st = ember_tier_flush(c)) != EMBER_OK)
        fmt(msg, MSG, "%s", c->errmsg);
    if ((st = agree(c, st, msg)) != EMBER_OK)
        return st;
    if ((st = describe(c, opt, &ck)) != EMBER_OK)
        fmt(msg, MSG, "out of memory");
    if ((st = agree(c, st, msg)) != EMBER_OK)
        goto done;
    if (rank == 0 && (st = safe_mkdirs(&rootd, root, msg, MSG)) == EMBER_OK) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ckpt_clean_leftovers(&rootd);
        fmt(name, sizeof name, ".tmp-step-%012lld-%lx-%lx", (long long)opt->step, (long)getpid(),
                 (long)ts.tv_nsec);
        st = safe_mkdir(&rootd, name, &dir, msg, MSG);
    }
    if (ember_comm_bcast(c->world, name, sizeof name, 0) != EMBER_OK) {
        c->panicked = 1;
        st = ember_fail(c, EMBER_ECOMM, "%s", c->world->errmsg);
        goto done;
    }
    if ((st = agree(c, st, msg)) != EMBER_OK)
        goto done;
    /* every rank opens the root once and the new folder below it, never
     * through a link */
    if (rank != 0 && (st = safe_dir_open(&rootd, root, msg, MSG)) == EMBER_OK)
        st = safe_subdir(&rootd, name, 0, &dir, msg, MSG);
    if (st == EMBER_OK)
        st = ckpt_write_rank_file(c, &ck, &ck.files[rank], &dir, opt, msg);
    if ((st = agree(c, st, msg)) == EMBER_OK) {
        if ((st = gather_files(c, &ck, opt, msg)) == EMBER_ECOMM) {
            ember_fail(c, st, "%s", msg);
            goto done;
        }
        if (rank == 0 && st == EMBER_OK)
            st = publish(&ck, &rootd, &dir, name, opt->keep, msg);
        st = agree(c, st, msg);
    }
    if (st != EMBER_OK && rank == 0 && rootd.fd >= 0 && name[0])
        safe_remove_tree(&rootd, name); /* gone already when the rename succeeded */
done:
    safe_dir_close(&dir);
    safe_dir_close(&rootd);
    ck.doc = NULL;
    ckpt_free_parts(&ck);
    return st;
}
