/*
 * quickstart.c: the smallest complete use of libember.
 *
 * Two tables, three features (two share the "items" table: feature
 * stacking), a tiny batch with a multi-hot bag, an empty bag and per-id
 * weights; one forward, a made-up upstream gradient, one backward with
 * row-wise Adagrad.  Build against an installed ember with
 *     cc quickstart.c $(pkg-config --cflags --libs ember)
 */
#include <stdio.h>
#include <stdlib.h>

#include "ember.h"

int main(void)
{
    ember_table_config tables[2];
    tables[0] = ember_table_config_default();
    tables[0].name = "items";
    tables[0].rows = 1000;
    tables[0].dim = 4;
    tables[0].optimizer = ember_optimizer_default(EMBER_OPT_ROWWISE_ADAGRAD);
    tables[1] = tables[0];
    tables[1].name = "users";
    tables[1].rows = 50;

    ember_feature_config features[3] = {
        {"clicked_item", 0, EMBER_COMBINER_SUM},
        {"viewed_items", 0, EMBER_COMBINER_MEAN},
        {"user", 1, EMBER_COMBINER_SUM},
    };
    ember_collection_config cfg = ember_collection_config_default();
    cfg.tables = tables;
    cfg.num_tables = 2;
    cfg.features = features;
    cfg.num_features = 3;
    cfg.seed = 42;

    ember_collection *coll;
    if (ember_collection_create(&cfg, &coll) != EMBER_OK) {
        fprintf(stderr, "create: %s\n", ember_errmsg(NULL));
        return 1;
    }

    /* Two samples.  lengths are feature-major: [feature][sample]. */
    int32_t lengths[] = {1, 1, /* clicked_item */ 3, 0, /* viewed_items */ 1, 1 /* user */};
    int64_t ids[] = {7, 9, /* */ 3, 3, 500, /* */ 11, 12};
    float weights[] = {1, 1, 0.5f, 0.5f, 2, 1, 1};
    ember_batch batch = {.batch_size = 2, .num_features = 3, .lengths = lengths, .ids = ids,
                         .weights = weights, .num_ids = 7};

    int64_t width = ember_pooled_width(coll); /* 3 features x dim 4 = 12 */
    float *pooled = calloc((size_t)(2 * width), sizeof(float));
    float *grad = calloc((size_t)(2 * width), sizeof(float));
    if (ember_forward(coll, &batch, pooled, NULL) != EMBER_OK) {
        fprintf(stderr, "forward: %s\n", ember_errmsg(coll));
        return 1;
    }
    for (int b = 0; b < 2; b++) {
        printf("sample %d:", b);
        for (int64_t k = 0; k < width; k++)
            printf(" %+.4f", pooled[b * width + k]);
        printf("\n");
    }
    for (int64_t i = 0; i < 2 * width; i++)
        grad[i] = 0.1f;
    if (ember_backward(coll, grad, NULL) != EMBER_OK) {
        fprintf(stderr, "backward: %s\n", ember_errmsg(coll));
        return 1;
    }

    /* A bad id is refused with its feature, sample and id named. */
    ids[4] = 5000;
    if (ember_forward(coll, &batch, pooled, NULL) != EMBER_OK)
        printf("refused: %s\n", ember_errmsg(coll));

    ember_memory mem;
    ember_collection_memory(coll, &mem);
    printf("rows %lld bytes, optimizer state %lld bytes, %d physical table(s)\n",
           (long long)mem.row_bytes, (long long)mem.state_bytes, mem.physical_tables);
    free(pooled);
    free(grad);
    ember_collection_destroy(coll);
    return 0;
}
