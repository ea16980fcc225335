/*
 * inspect_data.c: `ember inspect --samples N FILE [--config CFG]`: the
 * samples of a data file as JSON lines, what `ember train` would read: a
 * binary file (any version), or text by CFG's data.schema (Criteo TSV
 * without one).  One object per sample:
 *   {"sample":I,"label":L,"dense":[...],"ids":[[...],...],"weights":[[...],...]}
 * ids per sparse feature in order (row ids, or signed 64-bit keys),
 * floats with 9 significant digits (exact for float32), weights only when
 * a feature is weighted.  For checking a conversion by eye or by script.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "config/config_file.h"
#include "config/data_open.h"
#include "data/ctr.h"

static void print_batch(const ctr_batch *b, int64_t first_index)
{
    const int32_t n = b->batch_size, D = b->num_dense, S = b->num_sparse;
    int64_t off[CTR_MAX_FEATURES], acc = 0;
    for (int32_t f = 0; f < S; f++) {
        off[f] = acc;
        for (int32_t i = 0; i < n; i++)
            acc += b->sparse.lengths[(int64_t)f * n + i];
    }
    for (int32_t i = 0; i < n; i++) {
        printf("{\"sample\":%lld,\"label\":%.9g,\"dense\":[", (long long)(first_index + i), (double)b->label[i]);
        for (int32_t d = 0; d < D; d++)
            printf("%s%.9g", d ? "," : "", (double)b->dense[(int64_t)i * D + d]);
        printf("],\"ids\":[");
        int64_t at[CTR_MAX_FEATURES];
        for (int32_t f = 0; f < S; f++) {
            int32_t len = b->sparse.lengths[(int64_t)f * n + i];
            at[f] = off[f];
            printf("%s[", f ? "," : "");
            for (int32_t j = 0; j < len; j++)
                printf("%s%lld", j ? "," : "", (long long)b->sparse.ids[off[f] + j]);
            printf("]");
            off[f] += len;
        }
        printf("]");
        if (b->sparse.weights) {
            printf(",\"weights\":[");
            for (int32_t f = 0; f < S; f++) {
                int32_t len = b->sparse.lengths[(int64_t)f * n + i];
                printf("%s[", f ? "," : "");
                for (int32_t j = 0; j < len; j++)
                    printf("%s%.9g", j ? "," : "", (double)b->sparse.weights[at[f] + j]);
                printf("]");
            }
            printf("]");
        }
        printf("}\n");
    }
}

int inspect_samples(const tool_ctx *ctx, const char *path, const char *config, int64_t max)
{
    char err[512];
    config_file *cf = NULL;
    ctr_source *src = NULL;
    int rc = 1;
    if (config && config_file_load(config, &cf, err, sizeof err)) {
        fprintf(ctx->err, "ember inspect: %s\n", err);
        return 1;
    }
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0) { /* a file never written, or cut to nothing */
        fprintf(ctx->err, "ember inspect: %s: the file is empty (0 bytes): no samples\n", path);
        config_file_free(cf);
        return 1;
    }
    cfg_train dflt;
    cfg_train_default(&dflt);
    rc = data_open_file(cf, cf ? &cf->train : &dflt, path, DATA_FILE_GIVEN, NULL, 0, 1, &src, err, sizeof err);
    if (rc) {
        fprintf(ctx->err, "ember inspect: %s\n", err);
        config_file_free(cf);
        return 1;
    }
    int64_t done = 0;
    while (max < 0 || done < max) {
        ctr_batch b;
        int32_t want = max < 0 || max - done > 4096 ? 4096 : (int32_t)(max - done);
        int64_t n = ctr_source_next(src, want, &b, err, sizeof err);
        if (n < 0) {
            fprintf(ctx->err, "ember inspect: %s\n", err);
            rc = 1;
            break;
        }
        if (n == 0)
            break;
        print_batch(&b, done);
        done += n;
    }
    ctr_stats st;
    ctr_source_stats(src, &st);
    if (rc == 0 && st.bad_lines > 0) { /* skipped as ember train would: said, and no sample at all is a failure */
        fflush(stdout);
        fprintf(ctx->err, "ember inspect: %s: %lld of the %lld lines read were bad and skipped%s; the first: %s\n", path,
                (long long)st.bad_lines, (long long)st.lines, done ? "" : ", no samples", st.first_bad);
        rc = done ? 0 : 1;
    }
    ctr_source_destroy(src);
    config_file_free(cf);
    return rc;
}
