/*
 * checkpoint.c: a training run's checkpoints and resume (run.h;
 * docs/training.md, "Checkpoints and resume").
 *
 * A checkpoint is ember_save's (the tables, their optimizer state and step
 * count) plus blobs with the rest of the run's state, so that a resumed run
 * takes exactly the steps the uninterrupted run would have taken:
 *
 *   train.fingerprint  text, "key value" per line: the settings that decide
 *                      the result (data source, seeds, model, batch, dense
 *                      optimizer) and, marked soft, the world and threads
 *   train.state        int64[8]: magic, version, step, samples so far, dense
 *                      parameters, dense optimizer step, its state floats, 0
 *   dense.params       the dense model's parameters (dlrm_params)
 *   model.json         the model description (src/infer/description.h): what the
 *                      predictor builds its collection and dense model from
 *   dense.optim        the dense optimizer's state (Adam: m then v), if any
 *   data.position      per rank: int64[6]: magic, version, then ctr_position
 *                      (next, epochs, begin, end) after the last batch a
 *                      step consumed (train_prefetch_position: the reader
 *                      thread's read-ahead does not count)
 *
 * The dense model and optimizer are replicated, so rank 0 saves them once.
 * The synthetic source has no other state (a sample is a function of the
 * seed and its global index) and neither has evaluation (its source starts
 * from the beginning each time).
 *
 * Resume: the newest complete checkpoint under the folder is opened (every
 * file's checksum verified), its fingerprint compared line by line with this
 * run's (fingerprint.c: a difference fails, naming the key and both values;
 * a different world or thread count is allowed with a note, since the
 * result then is not bit-identical), then ember_load, the dense blobs and the data
 * position.  Each rank opens the checkpoint itself; failures are agreed
 * before every collective call.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "infer/description.h"
#include "comm/collect.h"
#include "comm/comm.h"
#include "model/dense_sync.h"
#include "train/run.h"

#define STATE_MAGIC 0x4e49415254424d45LL /* "EMBTRAIN" little-endian */
#define POS_MAGIC 0x50415441444d4245LL   /* "EBMDATAP" little-endian */
#define BEST_MAGIC 0x5453454254424d45LL  /* "EMBTBEST" little-endian */
#define BLOB_VERSION 1

/* ------------------------------------------------------------------ save */

int train_ckpt_prepare(ember_trainer *s)
{
    const char *dir = s->t.checkpoint_dir;
    char msg[1024] = "";
    int failed = 0;
    struct stat sb;
    if (s->rank == 0) {
        if (dir == s->t.keep_best_dir) /* the default: its parent, shared by every config's folder */
            (void)mkdir(TRAIN_DEFAULT_CHECKPOINT_DIR, 0777); /* EEXIST is fine; the next mkdir says the rest */
        if (mkdir(dir, 0777) == 0) {
            s->ckpt_dir_made = 1;
        } else if (errno != EEXIST) {
            snprintf(msg, sizeof msg, "%s: cannot create the checkpoint folder: %s", dir, strerror(errno));
            failed = 1;
        } else if (stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
            snprintf(msg, sizeof msg, "%s: the checkpoint folder is an existing file, not a folder", dir);
            failed = 1;
        } else if (access(dir, W_OK | X_OK) != 0) {
            snprintf(msg, sizeof msg, "%s: cannot write checkpoints there: %s", dir, strerror(errno));
            failed = 1;
        }
    }
    return run_agree(s, failed, EMBER_EIO, msg);
}

void train_ckpt_unprepare(ember_trainer *s)
{
    if (s->rank == 0 && s->ckpt_dir_made && s->t.checkpoint_dir)
        rmdir(s->t.checkpoint_dir); /* only when empty: anything saved stays */
}

/* Bytes of the files in a folder (rank 0's view). */
static int64_t folder_bytes(const char *path)
{
    DIR *d = opendir(path);
    int64_t total = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char p[4400];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
            total += (int64_t)st.st_size;
    }
    closedir(d);
    return total;
}

int train_ckpt_save(ember_trainer *s, const char *root, int32_t keep, int64_t step, int64_t samples,
                    const ctr_position *pos, const train_best *best, train_ckpt_saved *out)
{
    double t0 = ember_now();
    char fp[16384];
    train_fingerprint(s, fp, sizeof fp);
    dense_sync *ds = model_dense_sync(s->model);
    int64_t nparams = dlrm_num_params(s->dense), floats = dense_sync_state_floats(ds), ostep = dense_sync_steps(ds);
    /* the optimizer state whole: its own buffer when replicated, else
     * gathered to rank 0 (shared blobs are written from rank 0's alone, so
     * the other ranks only name one) */
    static const float not_read;
    const float *whole = dense_sync_state_whole(ds);
    float *gathered = floats > 0 && !whole && s->rank == 0 ? malloc(sizeof(float) * (size_t)(floats * nparams))
                                                              : NULL;
    int ost = floats > 0 && !whole && s->rank == 0 && !gathered ? EMBER_ENOMEM : EMBER_OK;
    if (run_agree_status(s, ost, "out of memory for the dense optimizer state"))
        return 1; /* agreed before the gather, so no rank waits in it */
    char oerr[256] = "";
    if (floats > 0 && !whole && run_agree_status(s, dense_sync_gather_state(ds, gathered, oerr, sizeof oerr), oerr)) {
        free(gathered);
        return 1;
    }
    const float *ostate = whole ? whole : gathered ? gathered : &not_read;
    int64_t state[8] = {STATE_MAGIC, BLOB_VERSION, step, samples, nparams, ostep, floats * nparams, 0};
    int64_t position[6] = {POS_MAGIC, BLOB_VERSION, pos->next, pos->epochs, pos->begin, pos->end};
    /* the model description, for predictions (docs/inference.md); a model it
     * cannot describe (over 1024 tables, names of 64 bytes or more, names
     * that are not UTF-8) is still checkpointed, without one: the predictor
     * then says so */
    char merr[256] = "";
    model_description *model = malloc(sizeof *model);
    char *mjson = NULL;
    int describable = model && description_make(model, &s->cc, &s->t.model, s->t.micro_batch,
                                                s->t.micro_batch * s->t.accumulate, &s->schema,
                                                s->t.source == CFG_SOURCE_SYNTHETIC ? &s->t.synth : NULL, merr,
                                                sizeof merr) == 0;
    static const description_source sources[] = {DESC_INPUT_NONE, DESC_INPUT_TEXT, DESC_INPUT_CRITEO_TSV,
                                                  DESC_INPUT_SYNTHETIC, DESC_INPUT_BINARY};
    describable = describable && description_input_set(&model->in, sources[s->input_kind],
                                                       s->input_cols ? &s->input_schema : NULL, merr,
                                                       sizeof merr) == EMBER_OK;
    if (describable)
        mjson = description_to_json(model);
    if (model)
        description_free(model);
    free(model);
    int64_t best_blob[6] = {BEST_MAGIC, BLOB_VERSION, best->have, 0, best->step, best->bad};
    memcpy(&best_blob[3], &best->metric, sizeof(double));
    ember_blob blobs[6] = {
        {"train.fingerprint", fp, (int64_t)strlen(fp)},
        {"train.state", state, (int64_t)sizeof state},
        {"dense.params", dlrm_params(s->dense), nparams * (int64_t)sizeof(float)},
        {"train.best", best_blob, (int64_t)sizeof best_blob},
        {DESCRIPTION_BLOB, mjson, mjson ? (int64_t)strlen(mjson) : 0},
        {"dense.optim", ostate, floats * nparams * (int64_t)sizeof(float)},
    };
    ember_blob rank_blob = {"data.position", position, (int64_t)sizeof position};
    if (!mjson) /* dense.optim takes its place */
        blobs[4] = blobs[5];
    ember_save_options o = {step, keep, blobs, (ostate && floats > 0 ? 6 : 5) - !mjson, &rank_blob, 1};
    int st = ember_save(s->coll, root, &o); /* without a description if none could be made */
    free(mjson);
    free(gathered);
    char msg[1024];
    snprintf(msg, sizeof msg, "checkpoint at step %lld: %s", (long long)step,
             st == EMBER_OK ? "" : ember_errmsg(s->coll));
    if (run_agree_status(s, st, msg))
        return 1;
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s/step-%012lld", root, (long long)step);
    out->step = step;
    out->seconds = ember_now() - t0;
    out->bytes = s->rank == 0 ? folder_bytes(out->path) : 0;
    return 0;
}

/* ---------------------------------------------------------------- resume */

static const void *blob(const ember_checkpoint *ck, int32_t rank, const char *name, int64_t want, char *err,
                        size_t errlen)
{
    int64_t bytes = -1;
    const void *p = ember_checkpoint_blob(ck, rank, name, &bytes);
    if (!p && want != 0)
        snprintf(err, errlen, "checkpoint %s: no blob \"%s\"%s (not saved by ember train?)",
                 ember_checkpoint_path(ck), name, rank >= 0 ? " of rank 0" : "");
    else if (p && want >= 0 && bytes != want)
        snprintf(err, errlen, "checkpoint %s: blob \"%s\" has %lld bytes, this run needs %lld",
                 ember_checkpoint_path(ck), name, (long long)bytes, (long long)want);
    else
        return p ? p : "";
    return NULL;
}

/* Checks the checkpoint against this run and restores the dense model,
 * its optimizer and the counters (this rank only).  0 or -1 with err. */
static int restore_dense(ember_trainer *s, const ember_checkpoint *ck, train_resume *rs, char *err, size_t errlen)
{
    char mine[16384];
    train_fingerprint(s, mine, sizeof mine);
    int64_t fplen = 0;
    const char *fpb = ember_checkpoint_blob(ck, -1, "train.fingerprint", &fplen);
    if (!fpb) {
        snprintf(err, errlen, "checkpoint %s: no blob \"train.fingerprint\" (not saved by ember train?)",
                 ember_checkpoint_path(ck));
        return EMBER_EINVAL;
    }
    char *saved = malloc((size_t)fplen + 1);
    if (!saved) {
        snprintf(err, errlen, "out of memory");
        return EMBER_EINVAL;
    }
    memcpy(saved, fpb, (size_t)fplen);
    saved[fplen] = '\0';
    int rc = train_fingerprint_compare(mine, saved, ember_checkpoint_path(ck), err, errlen, rs->note, sizeof rs->note);
    free(saved);
    if (rc)
        return EMBER_EINVAL;
    const int64_t *state = blob(ck, -1, "train.state", 8 * (int64_t)sizeof(int64_t), err, errlen);
    if (!state)
        return EMBER_EINVAL;
    dense_sync *ds = model_dense_sync(s->model);
    int64_t nparams = dlrm_num_params(s->dense), floats = dense_sync_state_floats(ds);
    if (state[0] != STATE_MAGIC || state[1] != BLOB_VERSION || state[2] < 0 || state[3] < 0 ||
        state[4] != nparams || state[6] != floats * nparams) {
        snprintf(err, errlen, "checkpoint %s: blob \"train.state\": bad magic or version, or %lld dense parameters "
                 "(%lld optimizer floats) where this run has %lld (%lld)", ember_checkpoint_path(ck),
                 (long long)state[4], (long long)state[6], (long long)nparams, (long long)(floats * nparams));
        return EMBER_EINVAL;
    }
    const float *params = blob(ck, -1, "dense.params", nparams * (int64_t)sizeof(float), err, errlen);
    if (!params)
        return EMBER_EINVAL;
    const float *om = NULL;
    if (floats > 0 && !(om = blob(ck, -1, "dense.optim", floats * nparams * (int64_t)sizeof(float), err, errlen)))
        return EMBER_EINVAL;
    memcpy(dlrm_params(s->dense), params, (size_t)nparams * sizeof(float));
    dense_sync_set_state(ds, om, state[5]); /* this rank's shard of it, when sharded */
    rs->step = state[2];
    rs->samples = state[3];
    return 0;
}

/* The data position this rank continues from.  The same world: its own;
 * another world: rank 0's, moved to this rank's share (docs/training.md). */
static int restore_position(ember_trainer *s, const ember_checkpoint *ck, char *err, size_t errlen)
{
    int32_t W = ember_checkpoint_world(ck), from = W == s->size ? s->rank : 0;
    const int64_t *p = blob(ck, from, "data.position", 6 * (int64_t)sizeof(int64_t), err, errlen);
    if (!p)
        return EMBER_EINVAL;
    if (p[0] != POS_MAGIC || p[1] != BLOB_VERSION) {
        snprintf(err, errlen, "checkpoint %s: blob \"data.position\" of rank %d: bad magic or version",
                 ember_checkpoint_path(ck), (int)from);
        return EMBER_EINVAL;
    }
    ctr_position saved = {p[2], p[3], p[4], p[5]}, here, to;
    ctr_source_tell(s->train_src, &here);
    to = saved;
    if (W != s->size && s->t.source != CFG_SOURCE_SYNTHETIC) {
        /* the same fraction of this rank's share as rank 0 had done of its own */
        int64_t done = saved.next - saved.begin, len = saved.end - saved.begin, mylen = here.end - here.begin;
        to.next = here.begin + (len > 0 && done > 0
                                    ? (int64_t)((unsigned __int128)done * (uint64_t)mylen / (uint64_t)len)
                                    : 0);
    }
    char serr[512];
    if (ctr_source_seek(s->train_src, &to, serr, sizeof serr)) {
        snprintf(err, errlen, "checkpoint %s: data position: %s", ember_checkpoint_path(ck), serr);
        return EMBER_EINVAL;
    }
    return 0;
}

int train_ckpt_resume(ember_trainer *s)
{
    train_resume *rs = &s->rs;
    const char *dir = s->t.checkpoint_dir;
    char err[1536] = "";
    memset(rs, 0, sizeof rs[0]);
    int64_t *steps = NULL, have = ckpt_list_steps(dir, &steps) > 0;
    free(steps);
    int cst = ember_comm_reduce_i64(s->world, &have, 1, EMBER_REDUCE_MAX);
    if (run_agree(s, cst != EMBER_OK, EMBER_ECOMM, cst != EMBER_OK ? s->world->errmsg : ""))
        return 1;
    if (!have)
        return 0; /* from scratch; the caller says so */
    ember_checkpoint *ck = NULL;
    int status = 1, why = ember_checkpoint_open(dir, &ck), failed = why != EMBER_OK;
    if (failed)
        snprintf(err, sizeof err, "--resume: %s", ember_errmsg(NULL));
    else if ((failed = restore_dense(s, ck, rs, err, sizeof err) != 0))
        why = EMBER_EFORMAT; /* not this run's checkpoint */
    if (run_agree(s, failed, why, err))
        goto out;
    int st = ember_load(s->coll, ck); /* collective */
    snprintf(err, sizeof err, "checkpoint %s: %s", ember_checkpoint_path(ck),
             st == EMBER_OK ? "" : ember_errmsg(s->coll));
    if (run_agree_status(s, st, err))
        goto out;
    failed = restore_position(s, ck, err, sizeof err) != 0;
    if (run_agree(s, failed, EMBER_ECORRUPT, err))
        goto out;
    int64_t bytes = -1; /* the best evaluation so far; absent from checkpoints before early stopping */
    const int64_t *b = ember_checkpoint_blob(ck, -1, "train.best", &bytes);
    if (b && bytes == 6 * (int64_t)sizeof(int64_t) && b[0] == BEST_MAGIC && b[1] == BLOB_VERSION) {
        rs->best.have = b[2];
        memcpy(&rs->best.metric, &b[3], sizeof(double));
        rs->best.step = b[4];
        rs->best.bad = b[5];
    }
    rs->resumed = 1;
    rs->saved_world = ember_checkpoint_world(ck);
    snprintf(rs->path, sizeof rs->path, "%s", ember_checkpoint_path(ck));
    status = 0;
out:
    ember_checkpoint_close(ck);
    return status;
}
