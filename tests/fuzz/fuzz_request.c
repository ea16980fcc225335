/*
 * fuzz_request.c: libFuzzer target for the scoring request decoder of
 * `ember serve` (serve_decode_json, serve_decode_binary, serve_decode_text;
 * src/serve/request.c, request_rows.c): bodies straight from the network.
 *
 * Input: one byte choosing the decoder (by its value mod 4: JSON, ids or
 * raw rows; binary; CSV; TSV), then the body, decoded against a fixed
 * model of 2 dense features and 3 sparse ones ("a": 10 rows, "b": 1000
 * rows, "k": 64-bit keys), at most 64 samples per request, whose input
 * schema is a CSV of columns y (label), a (string categorical), d1 (int,
 * log1p), b (weighted int multi_hot), d2 (float, clip), k (hex, 64-bit
 * keys), z (ignored).  Required: -1 with a message, or 0 with a batch a
 * forward accepts (samples within the limit, bag lengths >= 0 adding up to
 * num_ids, ids inside their tables, finite dense values and weights); a
 * decoded batch encoded again as the other body decodes to the same batch.
 * Never a crash, UB, leak or hang.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "serve/request.h"

static const int64_t ROWS[3] = {10, 1000, 0};
static const char *const NAMES[3] = {"a", "b", "k"};
static serve_shape SHAPE = {2, 3, ROWS, NAMES, 64, NULL, ""};
static text_plan plan;

static void make_plan(void)
{
    static ctr_column cols[7];
    static const char *const COLS[] = {"y", "a", "d1", "b", "d2", "k", "z"};
    static const ctr_col_type TYPES[] = {CTR_COL_LABEL, CTR_COL_CATEGORICAL, CTR_COL_INT, CTR_COL_MULTI_HOT,
                                         CTR_COL_FLOAT, CTR_COL_CATEGORICAL, CTR_COL_IGNORE};
    for (int c = 0; c < 7; c++) {
        strcpy(cols[c].name, COLS[c]);
        cols[c].type = TYPES[c];
    }
    cols[1].rows = 10;
    cols[2].transform = CTR_TF_LOG1P;
    cols[3].rows = 1000;
    cols[3].encoding = CTR_ENC_INT;
    cols[3].separator = '|';
    cols[3].weighted = 1;
    cols[4].transform = CTR_TF_CLIP;
    cols[4].min = -2;
    cols[4].max = 2;
    cols[5].encoding = CTR_ENC_HEX;
    ctr_text_schema sc = {.delimiter = ',', .header = 0, .max_line = 256, .num_columns = 7, .columns = cols};
    char err[256];
    FUZZ_REQUIRE(text_plan_init(&plan, &sc, "fuzz", err, sizeof err) == 0, "plan: %s", err);
    SHAPE.plan = &plan;
}

static void check(const serve_batch *b)
{
    FUZZ_REQUIRE(b->n >= 0 && b->n <= SHAPE.max_samples, "n %d", (int)b->n);
    int64_t at = 0;
    for (int32_t f = 0; f < 3; f++)
        for (int32_t s = 0; s < b->n; s++) {
            int32_t k = b->lengths[f * b->n + s];
            FUZZ_REQUIRE(k >= 0 && at + k <= b->num_ids, "bag %d of feature %d", (int)s, (int)f);
            for (int32_t i = 0; i < k; i++, at++) {
                FUZZ_REQUIRE(!ROWS[f] || (b->ids[at] >= 0 && b->ids[at] < ROWS[f]), "id %lld", (long long)b->ids[at]);
                FUZZ_REQUIRE(!b->weights || isfinite(b->weights[at]), "weight %lld", (long long)at);
            }
        }
    FUZZ_REQUIRE(at == b->num_ids, "lengths add up to %lld of %lld", (long long)at, (long long)b->num_ids);
    for (int64_t i = 0; i < (int64_t)b->n * 2; i++)
        FUZZ_REQUIRE(isfinite(b->dense[i]), "dense %lld", (long long)i);
}

static void same(const serve_batch *a, const serve_batch *b)
{
    FUZZ_REQUIRE(a->n == b->n && a->num_ids == b->num_ids, "round trip: %d/%lld samples/ids, then %d/%lld",
                 (int)a->n, (long long)a->num_ids, (int)b->n, (long long)b->num_ids);
    FUZZ_REQUIRE(!memcmp(a->dense, b->dense, sizeof(float) * (size_t)a->n * 2), "round trip: dense");
    FUZZ_REQUIRE(!memcmp(a->lengths, b->lengths, sizeof(int32_t) * (size_t)a->n * 3), "round trip: lengths");
    FUZZ_REQUIRE(!memcmp(a->ids, b->ids, sizeof(int64_t) * (size_t)a->num_ids), "round trip: ids");
    FUZZ_REQUIRE(!a->weights == !b->weights &&
                     (!a->weights || !memcmp(a->weights, b->weights, sizeof(float) * (size_t)a->num_ids)),
                 "round trip: weights");
}

static unsigned char *to_binary(const serve_batch *b, size_t *len)
{
    size_t n = SERVE_BINARY_HEADER + 4 * (size_t)b->n * 2 + 4 * (size_t)b->n * 3 + (b->weights ? 12 : 8) * (size_t)b->num_ids;
    unsigned char *p = malloc(n), *at = p + SERVE_BINARY_HEADER;
    FUZZ_REQUIRE(p != NULL, "out of memory");
    uint32_t head[6] = {1, (uint32_t)b->n, 2, 3, b->weights ? 1u : 0u, 0};
    uint64_t nids = (uint64_t)b->num_ids;
    memcpy(p, SERVE_BINARY_MAGIC, 4);
    memcpy(p + 4, head, 20);
    memcpy(p + 24, &nids, 8);
    memcpy(at, b->dense, 4 * (size_t)b->n * 2), at += 4 * (size_t)b->n * 2;
    memcpy(at, b->lengths, 4 * (size_t)b->n * 3), at += 4 * (size_t)b->n * 3;
    memcpy(at, b->ids, 8 * (size_t)b->num_ids), at += 8 * (size_t)b->num_ids;
    if (b->weights)
        memcpy(at, b->weights, 4 * (size_t)b->num_ids);
    *len = n;
    return p;
}

static char *to_json(const serve_batch *b)
{
    json_t *root = json_object(), *dense = json_array(), *sparse = json_object();
    json_t *weights = b->weights ? json_object() : NULL;
    for (int32_t s = 0; s < b->n; s++)
        json_array_append_new(dense, json_pack("[f,f]", (double)b->dense[2 * s], (double)b->dense[2 * s + 1]));
    int64_t at = 0;
    for (int32_t f = 0; f < 3; f++) {
        json_t *bags = json_array(), *wbags = json_array();
        for (int32_t s = 0; s < b->n; s++) {
            json_t *bag = json_array(), *wbag = json_array();
            for (int32_t i = 0; i < b->lengths[f * b->n + s]; i++, at++) {
                json_array_append_new(bag, json_integer(b->ids[at]));
                if (weights)
                    json_array_append_new(wbag, json_real(b->weights[at]));
            }
            json_array_append_new(bags, bag);
            json_array_append_new(wbags, wbag);
        }
        json_object_set_new(sparse, NAMES[f], bags);
        if (weights)
            json_object_set_new(weights, NAMES[f], wbags);
        else
            json_decref(wbags);
    }
    json_object_set_new(root, "dense", dense);
    json_object_set_new(root, "sparse", sparse);
    if (weights)
        json_object_set_new(root, "weights", weights);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (!SHAPE.plan)
        make_plan();
    int kind = data[0] % 4, binary = kind == 1;
    char err[512] = "";
    serve_batch a, b;
    const char *body = (const char *)data + 1;
    int st = kind == 1   ? serve_decode_binary(&SHAPE, data + 1, size - 1, &a, err, sizeof err)
             : kind == 0 ? serve_decode_json(&SHAPE, body, size - 1, &a, err, sizeof err)
                         : serve_decode_text(&SHAPE, body, size - 1, kind == 2 ? ',' : '\t', &a, err, sizeof err);
    if (st != 0) {
        FUZZ_REQUIRE(err[0] != 0, "failure without a message");
        serve_batch_free(&a);
        return 0;
    }
    check(&a);
    if (binary) {
        char *j = to_json(&a);
        FUZZ_REQUIRE(j != NULL, "cannot write the batch as JSON");
        FUZZ_REQUIRE(serve_decode_json(&SHAPE, j, strlen(j), &b, err, sizeof err) == 0, "JSON of it: %s", err);
        free(j);
    } else {
        size_t len;
        unsigned char *p = to_binary(&a, &len);
        FUZZ_REQUIRE(serve_decode_binary(&SHAPE, p, len, &b, err, sizeof err) == 0, "binary of it: %s", err);
        free(p);
    }
    same(&a, &b);
    serve_batch_free(&a);
    serve_batch_free(&b);
    return 0;
}
