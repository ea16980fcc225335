/*
 * fuzz_config.c: libFuzzer target for ember's config file parser
 * (config_file_load, src/config/config_file.c, in libember;
 * docs/config.md).  libconfig itself is the system's library and is not
 * instrumented: the fuzzer steers by the coverage of config_file.c.
 *
 * Input: the file's bytes.  Required: config_file_load returns 0 with a
 * config, or -1 with a message that names the file, never a crash, UB,
 * leak or hang; a loaded config is consistent (every feature's table
 * exists, names are set, the train settings in range).  The input as a C
 * string also goes through config_parse_bytes ("64 GiB").
 */
#include "config/config_file.h"
#include "fuzz_util.h"

static fuzz_file file;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_file_init(&file, "fuzz.cfg");
    fuzz_file_set(&file, data, size);
    config_file *cf = NULL;
    char err[512];
    if (config_file_load(file.path, &cf, err, sizeof err) != 0) {
        FUZZ_REQUIRE(cf == NULL && strncmp(err, file.path, strlen(file.path)) == 0,
                     "failure without the file's name: \"%s\"", err);
    } else {
        FUZZ_REQUIRE(cf != NULL && cf->name != NULL, "no config");
        FUZZ_REQUIRE(cf->num_tables >= 0 && cf->num_features >= 0, "counts");
        FUZZ_REQUIRE(cf->coll.num_tables == cf->num_tables && cf->coll.num_features == cf->num_features,
                     "collection counts");
        for (int32_t t = 0; t < cf->num_tables; t++)
            FUZZ_REQUIRE(cf->tables[t].name && cf->tables[t].name[0], "table %d without a name", (int)t);
        for (int32_t f = 0; f < cf->num_features; f++)
            FUZZ_REQUIRE(cf->features[f].name && cf->features[f].table >= 0 &&
                             cf->features[f].table < cf->num_tables,
                         "feature %d: table %d of %d", (int)f, (int)cf->features[f].table,
                         (int)cf->num_tables);
        const cfg_train *t = &cf->train;
        FUZZ_REQUIRE(t->micro_batch >= 1 && t->accumulate >= 1, "micro_batch %d accumulate %d",
                     (int)t->micro_batch, (int)t->accumulate);
        FUZZ_REQUIRE(t->model.num_bottom >= 1 && t->model.num_top >= 1, "model layers");
        FUZZ_REQUIRE(t->source == CFG_SOURCE_SYNTHETIC || t->train_file != NULL, "file source without a file");
        (void)config_file_weighted(cf);
        config_file_free(cf);
    }
    char *text = malloc(size + 1);
    FUZZ_REQUIRE(text != NULL, "out of memory");
    memcpy(text, data, size);
    text[size] = '\0';
    int64_t bytes = -1;
    if (config_parse_bytes(text, &bytes) == 0)
        FUZZ_REQUIRE(bytes >= 0, "\"%s\" -> %lld bytes", text, (long long)bytes);
    free(text);
    return 0;
}
