/*
 * inspect_data.c: `ember inspect --samples N FILE [--config CFG]`: the
 * samples of a data file as JSON lines, what `ember train` would read: a
 * binary file (any version), or text by CFG's data.schema (Criteo TSV
 * without one), read by the library's reader of one file as it is
 * (ember_reader_open_file, include/ember-data.h).  One object per sample:
 *   {"sample":I,"label":L,"dense":[...],"ids":[[...],...],"weights":[[...],...]}
 * ids per sparse feature in order (row ids, or signed 64-bit keys),
 * floats with 9 significant digits (exact for float32), weights only when
 * a feature is weighted.  For checking a conversion by eye or by script.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "ember-data.h"

/* One sample's bags: ids (or weights) of each feature, from off[f]. */
static void print_bags(const ember_batch *sp, const int64_t *off, int32_t i, int weights)
{
    const int32_t n = sp->batch_size;
    for (int32_t f = 0; f < sp->num_features; f++) {
        int32_t len = sp->lengths[(int64_t)f * n + i];
        printf("%s[", f ? "," : "");
        for (int32_t j = 0; j < len; j++) {
            if (weights)
                printf("%s%.9g", j ? "," : "", (double)sp->weights[off[f] + j]);
            else
                printf("%s%lld", j ? "," : "", (long long)sp->ids[off[f] + j]);
        }
        printf("]");
    }
}

/* The samples of one batch, numbered from first_index.  off: room for a
 * start per feature. */
static void print_batch(const ember_samples *b, int64_t first_index, int64_t *off)
{
    const ember_batch *sp = &b->sparse;
    const int32_t n = b->batch_size, D = b->num_dense, S = sp->num_features;
    int64_t acc = 0;
    for (int32_t f = 0; f < S; f++) {
        off[f] = acc;
        for (int32_t i = 0; i < n; i++)
            acc += sp->lengths[(int64_t)f * n + i];
    }
    for (int32_t i = 0; i < n; i++) {
        printf("{\"sample\":%lld,\"label\":%.9g,\"dense\":[", (long long)(first_index + i), (double)b->labels[i]);
        for (int32_t d = 0; d < D; d++)
            printf("%s%.9g", d ? "," : "", (double)b->dense[(int64_t)i * D + d]);
        printf("],\"ids\":[");
        print_bags(sp, off, i, 0);
        printf("]");
        if (sp->weights) {
            printf(",\"weights\":[");
            print_bags(sp, off, i, 1);
            printf("]");
        }
        printf("}\n");
        for (int32_t f = 0; f < S; f++)
            off[f] += sp->lengths[(int64_t)f * n + i];
    }
}

int inspect_samples(const tool_ctx *ctx, const char *path, const char *config, int64_t max)
{
    ember_reader *r = NULL;
    if (ember_reader_open_file(config, path, &r) != EMBER_OK) {
        fprintf(ctx->err, "ember inspect: %s\n", ember_errmsg(NULL));
        return 1;
    }
    int64_t *off = calloc((size_t)ember_reader_num_features(r) + 1, sizeof *off);
    int64_t done = 0;
    int rc = off ? 0 : 1;
    if (!off)
        fprintf(ctx->err, "ember inspect: out of memory\n");
    while (!rc && (max < 0 || done < max)) {
        ember_samples b;
        int32_t want = max < 0 || max - done > 4096 ? 4096 : (int32_t)(max - done);
        int64_t n = ember_reader_next(r, want, &b);
        if (n < 0) {
            fprintf(ctx->err, "ember inspect: %s\n", ember_errmsg(r));
            rc = 1;
            break;
        }
        if (n == 0)
            break;
        print_batch(&b, done, off);
        done += n;
    }
    ember_reader_counts st;
    ember_reader_stats(r, &st);
    if (rc == 0 && st.bad_lines > 0) { /* skipped as ember train would: said, and no sample at all is a failure */
        fflush(stdout);
        fprintf(ctx->err, "ember inspect: %s: %lld of the %lld lines read were bad and skipped%s; the first: %s\n", path,
                (long long)st.bad_lines, (long long)st.lines, done ? "" : ", no samples", st.first_bad);
        rc = done ? 0 : 1;
    }
    free(off);
    ember_reader_close(r);
    return rc;
}
