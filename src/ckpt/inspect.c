/*
 * inspect.c: what a checkpoint holds, for a report (ember.h, "checkpoints:
 * what they hold"; `ember inspect`): its manifest's facts, its files, its
 * blobs' names, and per table statistics over its canonical rows.
 *
 * The rows are read with ckpt_read_rows (assembled from the saving ranks'
 * files whatever the placement), in chunks of about 4 MiB, so no table is
 * ever whole in memory.  A row is untouched when it equals, bit for bit,
 * the initializer's row (table/init.h, from the init kind, value and the
 * table's rng_key).  The digest hashes each row's values then its state in
 * row order, so it does not depend on the file layout.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include <jansson.h>

#include "ckpt/ckpt.h"
#include "ckpt/ckpt_impl.h"
#include "data/data_error.h"
#include "table/init.h"

int ember_checkpoint_summarize(const ember_checkpoint *ck, ember_checkpoint_summary *out)
{
    if (!ck || !out)
        return ckpt_fail(ck, EMBER_EINVAL, "ember_checkpoint_summarize: %s is NULL", ck ? "out" : "the checkpoint");
    const char *version = json_string_value(json_object_get((const json_t *)ck->doc, "ember_version"));
    *out = (ember_checkpoint_summary){version, ck->seed, ck->opt_steps, ck->world, ck->num_blobs, ck->num_rank_blobs};
    return EMBER_OK;
}

int ember_checkpoint_file(const ember_checkpoint *ck, int32_t i, const char **name, int64_t *bytes, uint64_t *xxh3)
{
    if (!ck || i < 0 || i >= ckpt_num_files(ck))
        return ckpt_fail(ck, EMBER_EINVAL, "ember_checkpoint_file: no file %d", (int)i);
    if (name)
        *name = ckpt_file_name(ck, i);
    if (bytes)
        *bytes = ckpt_file_bytes(ck, i);
    if (xxh3)
        *xxh3 = ckpt_file_checksum(ck, i);
    return EMBER_OK;
}

const char *ember_checkpoint_blob_name(const ember_checkpoint *ck, int per_rank, int32_t i)
{
    if (!ck)
        return NULL;
    int32_t n = per_rank ? ck->num_rank_blobs : ck->num_blobs;
    return i >= 0 && i < n ? (per_rank ? ck->rank_blob_names : ck->blob_names)[i] : NULL;
}

/* Adds rows [first, first + n) (values v, state s) to the statistics. */
static void scan_rows(const ckpt_table_info *ti, int64_t first, int64_t n, const float *v, const float *s,
                      float *init, XXH64_state_t *h, ember_table_summary *st)
{
    const int64_t D = ti->dim, S = ti->state_floats;
    for (int64_t r = 0; r < n; r++) {
        const float *x = v + r * D, *y = s + r * S;
        double row = 0;
        int64_t zeros = 0;
        for (int64_t j = 0; j < D; j++) {
            double a = fabs((double)x[j]);
            zeros += a == 0;
            row += a * a;
            if (a > st->max_abs || isnan(a))
                st->max_abs = a;
        }
        st->zero_values += zeros;
        st->zero_rows += zeros == D;
        st->norm += row; /* the sum of squares until the end */
        st->mean_row_norm += sqrt(row);
        for (int64_t j = 0; j < S; j++) {
            double a = fabs((double)y[j]);
            st->state_norm += a * a;
            if (a > st->state_max_abs || isnan(a))
                st->state_max_abs = a;
        }
        ember_init_row_values(ti->init, ti->init_value, ti->dim, ti->rng_key, first + r, init);
        if (!memcmp(init, x, (size_t)D * sizeof *x))
            st->untouched_rows++;
        XXH64_update(h, x, (size_t)D * sizeof *x);
        if (S > 0)
            XXH64_update(h, y, (size_t)S * sizeof *y);
    }
}

/* Streams table t's rows in chunks into the statistics. */
static int scan_table(const ember_checkpoint *ck, const ckpt_table_info *ti, int32_t t, ember_table_summary *st)
{
    const int64_t D = ti->dim, S = ti->state_floats;
    int64_t chunk = (INT64_C(1) << 20) / (D + S + 1);
    chunk = chunk < 1 ? 1 : chunk > ti->rows ? ti->rows : chunk;
    float *v = malloc((size_t)(chunk * D) * sizeof *v), *s = malloc((size_t)(chunk * S + 1) * sizeof *s);
    float *init = malloc((size_t)D * sizeof *init);
    XXH64_state_t *h = XXH64_createState();
    int rc = EMBER_ENOMEM;
    if (!v || !s || !init || !h) {
        ember_data_set_error("out of memory for table \"%s\"", ti->name);
        goto out;
    }
    XXH64_reset(h, 0);
    for (int64_t first = 0; first < ti->rows; first += chunk) {
        int64_t n = ti->rows - first < chunk ? ti->rows - first : chunk;
        if ((rc = ckpt_read_rows(ck, t, first, n, v, S > 0 ? s : NULL)) != EMBER_OK)
            goto out; /* its message is set */
        scan_rows(ti, first, n, v, s, init, h, st);
    }
    st->digest = XXH64_digest(h);
    rc = EMBER_OK;
out:
    XXH64_freeState(h);
    free(v);
    free(s);
    free(init);
    return rc;
}

static int table_summary(const ember_checkpoint *ck, int32_t t, ember_table_summary *out)
{
    const ckpt_table_info *ti = ckpt_table(ck, t);
    if (!ti || !out) {
        ember_data_set_error("ember_checkpoint_table_summary: no table %d", (int)t);
        return EMBER_EINVAL;
    }
    memset(out, 0, sizeof *out);
    out->rows = ti->rows;
    out->state_floats = ti->state_floats;
    int rc = scan_table(ck, ti, t, out);
    if (rc != EMBER_OK)
        return rc;
    out->mean_row_norm /= (double)ti->rows;
    out->norm = sqrt(out->norm);
    out->state_norm = sqrt(out->state_norm);
    if (ti->kind == EMBER_TABLE_DYNAMIC) {
        ckpt_dyn_summary ds;
        ckpt_dyn_summarize(ck, t, &ds);
        out->untouched_rows = -1; /* slots: no row number to compare */
        out->resident = ds.resident;
        out->most_on_a_rank = ds.most_on_a_rank;
        out->admitted = ds.admitted;
        out->evicted = ds.evicted;
        out->expired = ds.expired;
        out->evicted_count_sum = ds.evicted_count_sum;
        out->not_admitted = ds.not_admitted;
        out->sketch_width = ti->sketch_width;
    }
    return EMBER_OK;
}

int ember_checkpoint_table_summary(const ember_checkpoint *ck, int32_t t, ember_table_summary *out)
{
    return ckpt_keep(ck, table_summary(ck, t, out));
}
