/*
 * inspect.c: the parts of `ember inspect` that read files the training
 * run and the exporter wrote (ember.h, "checkpoints: what they hold"): a
 * checkpoint's blobs, decoded for the ones `ember train` saves
 * (src/train/checkpoint.c writes them), and an inference bundle verified
 * and described (src/infer/bundle.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include <jansson.h>

#include "ckpt/ckpt.h"
#include "ckpt/ckpt_dense.h"
#include "data/data_error.h"
#include "infer/bundle.h"

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* What `ember train`'s own blobs say; NULL for others.  The layouts are
 * src/train/checkpoint.c's. */
static json_t *known_blob(const char *name, const void *p, int64_t bytes, char *text, size_t n)
{
    text[0] = '\0';
    json_t *j = NULL;
    ckpt_dense_ranges r;
    if (!strcmp(name, "train.state") && bytes == 64) {
        int64_t v[8];
        memcpy(v, p, sizeof v);
        j = json_pack("{sIsIsIsI}", "step", (json_int_t)v[2], "samples", (json_int_t)v[3], "dense_params",
                      (json_int_t)v[4], "dense_optimizer_step", (json_int_t)v[5]);
        snprintf(text, n, "trainer step %lld, %lld samples, %lld dense parameters, dense optimizer step %lld",
                 (long long)v[2], (long long)v[3], (long long)v[4], (long long)v[5]);
    } else if ((!strcmp(name, "dense.params") || !strcmp(name, "dense.optim")) && bytes % 4 == 0) {
        double ss = 0;
        const float *f = p;
        for (int64_t i = 0; i < bytes / 4; i++) {
            float x;
            memcpy(&x, f + i, sizeof x);
            ss += (double)x * x;
        }
        j = json_pack("{sIso}", "floats", (json_int_t)(bytes / 4), "norm", num(sqrt(ss)));
        snprintf(text, n, "%lld floats, L2 norm %.6g", (long long)(bytes / 4), sqrt(ss));
    } else if (!strcmp(name, CKPT_DENSE_RANGES) && ckpt_dense_ranges_parse(p, bytes, &r) == 0) {
        j = json_pack("{sIsIsIsI}", "ranges", (json_int_t)r.n, "params", (json_int_t)r.held, "whole_params",
                      (json_int_t)r.full, "state_floats", (json_int_t)r.floats);
        snprintf(text, n, "%lld range%s: %lld of the model's %lld dense parameters", (long long)r.n,
                 r.n == 1 ? "" : "s", (long long)r.held, (long long)r.full);
    } else if (!strcmp(name, "data.position") && bytes == 48) {
        int64_t v[6];
        memcpy(v, p, sizeof v);
        j = json_pack("{sIsIsIsI}", "next", (json_int_t)v[2], "epochs", (json_int_t)v[3], "share_begin",
                      (json_int_t)v[4], "share_end", (json_int_t)v[5]);
        snprintf(text, n, "next sample %lld, epoch %lld, share [%lld, %lld)", (long long)v[2], (long long)v[3],
                 (long long)v[4], (long long)v[5]);
    }
    return j;
}

int ember_checkpoint_blob_summary(const ember_checkpoint *ck, int32_t rank, const char *name,
                                  ember_blob_summary *out)
{
    if (!ck || !name || !out)
        return ckpt_fail(ck, EMBER_EINVAL, "ember_checkpoint_blob_summary: %s is NULL",
                         !ck ? "the checkpoint" : !name ? "name" : "out");
    memset(out, 0, sizeof *out);
    int64_t bytes = 0;
    const void *p = ember_checkpoint_blob(ck, rank, name, &bytes);
    if (!p) {
        bytes = 0;
        p = "";
    }
    out->bytes = bytes;
    out->digest = XXH64(p, (size_t)bytes, 0);
    json_t *k = known_blob(name, p, bytes, out->text, sizeof out->text);
    char *s = k ? json_dumps(k, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
    if (s && strlen(s) < sizeof out->content)
        memcpy(out->content, s, strlen(s) + 1);
    free(s);
    json_decref(k);
    return EMBER_OK;
}

int ember_checkpoint_dense_summary(const ember_checkpoint *ck, ember_dense_summary *out)
{
    if (!ck || !out)
        return ckpt_fail(ck, EMBER_EINVAL, "ember_checkpoint_dense_summary: %s is NULL", !ck ? "the checkpoint" : "out");
    memset(out, 0, sizeof *out);
    int64_t bytes = 0, v[8];
    const void *st = ember_checkpoint_blob(ck, -1, "train.state", &bytes);
    if (!st || bytes != (int64_t)sizeof v)
        return ckpt_fail(ck, EMBER_EFORMAT, "checkpoint %s: no dense model (blob \"train.state\": not saved by "
                         "ember train?)", ember_checkpoint_path(ck));
    memcpy(v, st, sizeof v);
    const int64_t full = v[4];
    if (full <= 0 || full > CKPT_DENSE_MAX_PARAMS || v[6] < 0 || v[6] % full || v[6] / full > 64)
        return ckpt_fail(ck, EMBER_EFORMAT, "checkpoint %s: blob \"train.state\": %lld parameters with %lld "
                         "optimizer floats", ember_checkpoint_path(ck), (long long)full, (long long)v[6]);
    const int32_t floats = (int32_t)(v[6] / full);
    /* the dense blobs against train.state (a read of no range checks them all) before anything is allocated */
    char err[512];
    float none;
    if (ckpt_dense_read(ck, full, floats, NULL, 0, NULL, &none, err, sizeof err))
        return ckpt_fail(ck, EMBER_EFORMAT, "%s", err);
    const int whole = ember_checkpoint_blob(ck, -1, "dense.params", NULL) != NULL;
    float *params = malloc((size_t)(full + 1) * sizeof *params);
    float *state = malloc((size_t)(floats * full + 1) * sizeof *state);
    if (!params || !state) {
        free(params), free(state);
        return ckpt_fail(ck, EMBER_ENOMEM, "checkpoint %s: out of memory for the dense model (%lld parameters)",
                         ember_checkpoint_path(ck), (long long)full);
    }
    const int64_t range[2] = {0, full};
    if (ckpt_dense_read(ck, full, floats, range, 1, params, state, err, sizeof err)) {
        free(params), free(state);
        return ckpt_fail(ck, EMBER_EFORMAT, "%s", err);
    }
    double ss = 0;
    for (int64_t i = 0; i < full; i++)
        ss += (double)params[i] * params[i];
    out->pieces = 0;
    if (!whole)
        for (int32_t r = 0; r < ember_checkpoint_world(ck); r++) {
            int64_t b = 0;
            out->pieces += ember_checkpoint_blob(ck, r, CKPT_DENSE_RANGES, &b) && b > 0;
        }
    out->params = full;
    out->state_floats = floats;
    out->norm = sqrt(ss);
    out->params_digest = XXH64(params, (size_t)full * sizeof *params, 0);
    out->state_digest = XXH64(state, (size_t)(floats * full) * sizeof *state, 0);
    free(params), free(state);
    return EMBER_OK;
}

int ember_bundle_is(const char *dir) { return dir && bundle_is(dir); }

int ember_bundle_inspect(const char *dir, char **report)
{
    *report = NULL;
    ember_bundle *b = NULL;
    char err[1024];
    int st = bundle_open(dir, &b, err, sizeof err);
    if (st != EMBER_OK) {
        ember_data_set_error("%s", err);
        return st;
    }
    const json_t *man = bundle_manifest(b); /* read and checked by bundle_open */
    json_t *out = json_pack("{sssssOsOsO}", "path", dir, "format", "ember-bundle", "version",
                            json_object_get(man, "version"), "tables", json_object_get(man, "tables"), "dense",
                            json_object_get(man, "dense"));
    if (out)
        json_object_set_new(out, "verified", json_true());
    *report = out ? json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(out);
    bundle_close(b);
    if (!*report) {
        ember_data_set_error("%s: out of memory describing the bundle", dir);
        return EMBER_ENOMEM;
    }
    return EMBER_OK;
}
