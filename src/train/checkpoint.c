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
 *                      parameters, dense optimizer step, its state floats,
 *                      pipeline stages (0 before they were recorded)
 *   dense.params       the dense model's parameters (dlrm_params)
 *   train.placement    int64 [tables][3]: each table's placement, owner and
 *                      exchange in force (train.replan moves them; a resumed
 *                      re-planning run moves its rows back into them)
 *   train.replan_ids   per rank, with train.replan: the sparse batches of
 *                      the last steps, which the next re-plan reads
 *   train.limits       with train.limits: the adaptive limits' state
 *                      (src/plan/limits_adapt.h: limits, window, excess)
 *   model.json         the model description (src/infer/description.h): what the
 *                      predictor builds its collection and dense model from
 *   dense.optim        the dense optimizer's state (Adam: m then v), if any
 *   data.position      per rank: int64[6]: magic, version, then ctr_position
 *                      (next, epochs, begin, end) after the last batch a
 *                      step consumed (train_prefetch_position: the reader
 *                      thread's read-ahead does not count)
 *
 * The dense model and optimizer are replicated, so rank 0 saves them once;
 * with pipeline stages each stage holds its own blocks, so the first rank
 * of each stage saves its pieces as rank blobs instead (dense.ranges,
 * dense.params, dense.optim: src/ckpt/ckpt_dense.h, which also reads both
 * forms back, into any cut).
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
#include "ckpt/ckpt_dense.h"
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

/* The ranges of the whole parameter vector m holds, (off, len) pairs,
 * neighbours merged: its blocks' (dlrm_block_params).  Returns how many. */
static int32_t held_ranges(const dlrm *m, int64_t *ranges)
{
    int32_t n = 0;
    for (int32_t b = 0; b < dlrm_num_blocks(m); b++) {
        int64_t off, len;
        dlrm_block_params(m, b, &off, &len);
        if (!dlrm_holds(m, b) || !len)
            continue;
        if (n && ranges[2 * n - 2] + ranges[2 * n - 1] == off)
            ranges[2 * n - 1] += len;
        else
            ranges[2 * n] = off, ranges[2 * n + 1] = len, n++;
    }
    return n;
}

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
    const int piped = s->t.pipe_stages > 1;
    int64_t nparams = dlrm_num_params(s->dense), full = dlrm_full_params(s->dense);
    int64_t floats = dense_sync_state_floats(ds), ostep = dense_sync_steps(ds);
    /* the optimizer state of this rank's blocks: its own buffer when
     * replicated, else gathered to the first rank of the stage's replicas
     * (the one that saves; the others only name a blob) */
    const int saver = ember_world_rank(model_replica_world(s->model)) == 0;
    static const float not_read;
    const float *whole = dense_sync_state_whole(ds);
    float *gathered = floats > 0 && !whole && saver ? malloc(sizeof(float) * (size_t)(floats * nparams)) : NULL;
    int ost = floats > 0 && !whole && saver && !gathered ? EMBER_ENOMEM : EMBER_OK;
    if (run_agree_status(s, ost, "out of memory for the dense optimizer state"))
        return 1; /* agreed before the gather, so no rank waits in it */
    char oerr[256] = "";
    if (floats > 0 && !whole && run_agree_status(s, dense_sync_gather_state(ds, gathered, oerr, sizeof oerr), oerr)) {
        free(gathered);
        return 1;
    }
    const float *ostate = whole ? whole : gathered ? gathered : &not_read;
    int64_t state[8] = {STATE_MAGIC, BLOB_VERSION, step, samples, full, ostep, floats * full, piped ? s->t.pipe_stages : 1};
    /* with pipeline stages: this rank's pieces, when it saves them */
    int64_t ranges[2 * DENSE_MAX_BLOCKS], rbytes = 0;
    const int32_t nr = held_ranges(s->dense, ranges);
    int64_t *rblob = piped && saver ? ckpt_dense_ranges_blob(full, (int32_t)floats, ranges, nr, &rbytes) : NULL;
    if (run_agree_status(s, piped && saver && !rblob ? EMBER_ENOMEM : EMBER_OK, "out of memory")) {
        free(gathered);
        free(rblob);
        return 1;
    }
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
    /* the adaptive limits' state: the same on every rank once agreed */
    void *lblob = NULL;
    int64_t lbytes = 0;
    int lst = s->limits ? (train_limits_sync(s) ? EMBER_ECOMM : limits_adapt_save(s->limits, &lblob, &lbytes)) : EMBER_OK;
    if (lst == EMBER_ECOMM || run_agree_status(s, lst, "out of memory for the adaptive limits' state")) {
        free(mjson);
        free(gathered);
        free(rblob);
        return 1;
    }
    /* the placements in force, and with train.replan this rank's kept batches */
    int64_t pbytes = 0, kbytes = 0, *pblob = train_replan_placement_blob(s, &pbytes);
    int64_t *kblob = s->replan ? train_replan_kept_blob(s, &kbytes) : NULL;
    if (run_agree_status(s, !pblob || (s->replan && !kblob) ? EMBER_ENOMEM : EMBER_OK, "out of memory")) {
        free(pblob), free(kblob), free(lblob), free(mjson), free(gathered), free(rblob);
        return 1;
    }
    ember_blob blobs[8];
    int32_t nblobs = 0;
    blobs[nblobs++] = (ember_blob){"train.fingerprint", fp, (int64_t)strlen(fp)};
    blobs[nblobs++] = (ember_blob){"train.state", state, (int64_t)sizeof state};
    if (!piped)
        blobs[nblobs++] = (ember_blob){"dense.params", dlrm_params(s->dense), nparams * (int64_t)sizeof(float)};
    blobs[nblobs++] = (ember_blob){"train.best", best_blob, (int64_t)sizeof best_blob};
    if (mjson) /* without a description if none could be made */
        blobs[nblobs++] = (ember_blob){DESCRIPTION_BLOB, mjson, (int64_t)strlen(mjson)};
    if (!piped && floats > 0)
        blobs[nblobs++] = (ember_blob){"dense.optim", ostate, floats * nparams * (int64_t)sizeof(float)};
    if (lblob)
        blobs[nblobs++] = (ember_blob){"train.limits", lblob, lbytes};
    blobs[nblobs++] = (ember_blob){"train.placement", pblob, pbytes};
    ember_blob rank_blobs[5] = { /* the dense pieces only with pipeline stages, empty but on the savers */
        {"data.position", position, (int64_t)sizeof position},
        {CKPT_DENSE_RANGES, rblob, rbytes},
        {"dense.params", dlrm_params(s->dense), saver ? nparams * (int64_t)sizeof(float) : 0},
        {"dense.optim", ostate, saver ? floats * nparams * (int64_t)sizeof(float) : 0},
        {"train.replan_ids", kblob, kbytes},
    };
    int32_t nrank = piped ? 4 : 1;
    if (s->replan) /* after the others, in their place */
        rank_blobs[nrank++] = (ember_blob){"train.replan_ids", kblob, kbytes};
    ember_save_options o = {step, keep, blobs, nblobs, rank_blobs, nrank};
    int st = ember_save(s->coll, root, &o);
    free(lblob);
    free(pblob);
    free(kblob);
    free(mjson);
    free(gathered);
    free(rblob);
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
    /* the stages that saved it, for the data position: train.state's, or the fingerprint's in a checkpoint
     * written before train.state recorded them */
    const int32_t fp_stages = train_fingerprint_stages(saved);
    free(saved);
    if (rc)
        return EMBER_EINVAL;
    const int64_t *state = blob(ck, -1, "train.state", 8 * (int64_t)sizeof(int64_t), err, errlen);
    if (!state)
        return EMBER_EINVAL;
    dense_sync *ds = model_dense_sync(s->model);
    int64_t nparams = dlrm_num_params(s->dense), full = dlrm_full_params(s->dense);
    int64_t floats = dense_sync_state_floats(ds);
    if (state[0] != STATE_MAGIC || state[1] != BLOB_VERSION || state[2] < 0 || state[3] < 0 ||
        state[4] != full || state[6] != floats * full) {
        snprintf(err, errlen, "checkpoint %s: blob \"train.state\": bad magic or version, or %lld dense parameters "
                 "(%lld optimizer floats) where this run has %lld (%lld)", ember_checkpoint_path(ck),
                 (long long)state[4], (long long)state[6], (long long)full, (long long)(floats * full));
        return EMBER_EINVAL;
    }
    /* this rank's blocks, from the whole model or the pieces, whatever the cut that saved them */
    int64_t ranges[2 * DENSE_MAX_BLOCKS];
    const int32_t nr = held_ranges(s->dense, ranges);
    float *om = floats > 0 ? malloc((size_t)(floats * nparams) * sizeof(float)) : NULL;
    if (floats > 0 && !om) {
        snprintf(err, errlen, "out of memory");
        return EMBER_EINVAL;
    }
    if (ckpt_dense_read(ck, full, (int32_t)floats, ranges, nr, dlrm_params(s->dense), om, err, errlen)) {
        free(om);
        return EMBER_EINVAL;
    }
    dense_sync_set_state(ds, om, state[5]); /* this rank's shard of it, when sharded */
    free(om);
    rs->step = state[2];
    rs->samples = state[3];
    rs->saved_stages = state[7] > 0 ? (int32_t)state[7] : fp_stages;
    return 0;
}

/* The data position this rank continues from.  The same world: its own;
 * another world: rank 0's, moved to this rank's share (docs/training.md). */
static int restore_position(ember_trainer *s, const ember_checkpoint *ck, char *err, size_t errlen)
{
    /* the same shares: the same world in the same stages (replica groups read the data) */
    const int32_t S = s->t.pipe_stages > 1 ? s->t.pipe_stages : 1;
    int32_t W = ember_checkpoint_world(ck), same = W == s->size && s->rs.saved_stages == S, from = same ? s->rank : 0;
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
    if (!same && s->t.source != CFG_SOURCE_SYNTHETIC) {
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
    if (!failed && s->limits) { /* the adaptive limits' state, and the limits it set */
        int64_t lbytes = 0;
        const void *lb = ember_checkpoint_blob(ck, -1, "train.limits", &lbytes);
        char lerr[512] = "no blob \"train.limits\"";
        failed = !lb || train_limits_restore(s, lb, lbytes, lerr, sizeof lerr) != 0;
        if (failed)
            snprintf(err, sizeof err, "checkpoint %s: %s", ember_checkpoint_path(ck), lerr);
    }
    if (run_agree(s, failed, EMBER_ECORRUPT, err))
        goto out;
    if (s->replan) { /* the placements in force when it was saved, and the kept batches */
        int64_t pbytes = 0, kbytes = 0;
        const int64_t *pb = ember_checkpoint_blob(ck, -1, "train.placement", &pbytes);
        const int64_t *kb = ember_checkpoint_blob(ck, s->rank, "train.replan_ids", &kbytes);
        char rerr[512] = "";
        if (pb && train_replan_restore(s, pb, pbytes, kb, kbytes, ember_checkpoint_world(ck) == s->size, rerr,
                                       sizeof rerr))
            goto out; /* agreed, with its message */
    }
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
