/*
 * predict.c: scoring from C with a model trained by `ember train`, from its
 * checkpoint or from a bundle of `ember export --quantize` (ember.h,
 * "Prediction"; docs/inference.md).  Nothing is declared here: the
 * predictor says which features the model has, their tables and how many
 * dense inputs it takes.  This program scores four made-up samples (dense
 * inputs 0.1 * i, one id per feature: row i of its table) and prints them.
 *     cc predict.c $(pkg-config --cflags --libs ember)
 *     ./a.out ck            # a checkpoint root, a step folder, or a bundle
 */
#include <stdio.h>
#include <stdlib.h>

#include "ember.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CHECKPOINT_OR_BUNDLE\n", argv[0]);
        return 2;
    }
    ember_predictor *p = NULL;
    if (ember_predictor_open(argv[1], NULL, &p) != EMBER_OK) { /* NULL: a world of one, one thread */
        fprintf(stderr, "%s\n", ember_errmsg(NULL));
        return 1;
    }
    const ember_collection_config *cc = ember_predictor_config(p);
    int32_t F = cc->num_features, D = ember_predictor_num_dense(p), B = 4;
    printf("model: %d dense inputs, %d features:", (int)D, (int)F);
    for (int32_t f = 0; f < F; f++)
        printf(" %s (table %s)", cc->features[f].name, cc->tables[cc->features[f].table].name);
    printf("\n");

    float *dense = malloc(sizeof(float) * (size_t)(B * D + 1)), scores[4];
    int32_t *lengths = malloc(sizeof(int32_t) * (size_t)(F * B));
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)(F * B));
    for (int32_t i = 0; i < B * D; i++)
        dense[i] = 0.1f * (float)(i % D);
    for (int32_t f = 0; f < F; f++) /* lengths [feature][sample]; ids feature by feature */
        for (int32_t s = 0; s < B; s++) {
            const ember_table_config *t = &cc->tables[cc->features[f].table];
            lengths[f * B + s] = 1;
            ids[f * B + s] = t->kind == EMBER_TABLE_DYNAMIC ? 1000 + s : s % t->rows; /* a key, or a row */
        }
    ember_batch batch = {B, F, lengths, ids, NULL, (int64_t)F * B};
    int st = ember_predictor_score(p, B, dense, &batch, scores);
    if (st != EMBER_OK)
        fprintf(stderr, "score: %s\n", ember_errmsg(p));
    else
        for (int32_t s = 0; s < B; s++)
            printf("sample %d: score %.6f\n", (int)s, scores[s]);
    free(dense), free(lengths), free(ids);
    ember_predictor_close(p);
    return st == EMBER_OK ? 0 : 1;
}
