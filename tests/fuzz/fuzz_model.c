/*
 * fuzz_model.c: libFuzzer target for the model description reader
 * (description_from_json, src/infer/description.c; docs/inference.md): the JSON
 * every checkpoint of `ember train` and every bundle carries.
 *
 * Input: the JSON's bytes.  Required: -1 with a message that starts with
 * "model.json", or 0 with a consistent description (counts within bounds,
 * every feature's table one of the tables, names terminated); a read
 * description written again reads back to the same JSON.  Never a crash,
 * UB, leak or hang.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "infer/description.h"

static model_description a, b;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512] = "";
    if (description_from_json((const char *)data, size, &a, err, sizeof err) != 0) {
        FUZZ_REQUIRE(!strncmp(err, "model.json", 10), "failure without \"model.json\": \"%s\"", err);
        return 0;
    }
    FUZZ_REQUIRE(a.num_tables >= 0 && a.num_tables <= DESCRIPTION_MAX && a.num_features >= 0 &&
                     a.num_features <= DESCRIPTION_MAX,
                 "counts %d %d", (int)a.num_tables, (int)a.num_features);
    for (int32_t f = 0; f < a.num_features; f++)
        FUZZ_REQUIRE(a.features[f].table >= 0 && a.features[f].table < a.num_tables &&
                         memchr(a.names[1][f], 0, sizeof a.names[1][f]),
                     "feature %d", (int)f);
    for (int32_t t = 0; t < a.num_tables; t++)
        FUZZ_REQUIRE(memchr(a.names[0][t], 0, sizeof a.names[0][t]) && a.tables[t].name == a.names[0][t],
                     "table %d", (int)t);
    char *j1 = description_to_json(&a);
    FUZZ_REQUIRE(j1 != NULL, "cannot write a description it read");
    FUZZ_REQUIRE(description_from_json(j1, strlen(j1), &b, err, sizeof err) == 0, "re-read: %s", err);
    char *j2 = description_to_json(&b);
    FUZZ_REQUIRE(j2 && !strcmp(j1, j2), "written, read and written again differs");
    free(j1);
    free(j2);
    description_free(&a);
    description_free(&b);
    return 0;
}
