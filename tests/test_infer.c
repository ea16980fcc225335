/*
 * test_infer.c: the model description (src/infer/description.h) round trip and
 * its errors.  Random collections (fixed and dynamic tables, limits,
 * simulated quantization, every optimizer), dense models and inputs go to
 * JSON and back: every setting equal, bit for bit.  Broken descriptions
 * (bad JSON, a missing or mistyped field, out-of-range values) are refused
 * with the field named.  The input schema (how rows became samples) rides
 * along: random text schemas (every column type, transform, encoding,
 * doubles drawn over their whole range) come back bit for bit, and an
 * unknown field, version, rule, or a schema that disagrees with the
 * model's input is refused by its path.  The predictor itself is tested
 * end to end by tests/cli.sh (scores equal to the trainer's evaluation, at
 * 1 and 2 ranks).
 */
#include <math.h>

#include "infer/description.h"
#include "util.h"

static int same_table(const ember_table_config *a, const ember_table_config *b)
{
    return !strcmp(a->name, b->name) && a->kind == b->kind && a->rows == b->rows && a->dim == b->dim &&
           a->init == b->init && a->init_value == b->init_value &&
           !memcmp(&a->optimizer, &b->optimizer, sizeof a->optimizer) && a->placement == b->placement &&
           a->owner == b->owner && a->exchange == b->exchange &&
           a->max_ids_per_partition == b->max_ids_per_partition &&
           a->max_unique_ids_per_partition == b->max_unique_ids_per_partition && a->limit_policy == b->limit_policy &&
           a->quant_buckets == b->quant_buckets && a->quant_low == b->quant_low && a->quant_high == b->quant_high &&
           a->capacity == b->capacity && a->admit_after == b->admit_after && a->evict == b->evict &&
           a->ttl_steps == b->ttl_steps && a->sketch_bytes == b->sketch_bytes;
}

/* A double from anywhere in its range: random bits, finite. */
static double any_double(test_rng *r)
{
    double x;
    do {
        uint64_t u = test_next(r);
        memcpy(&x, &u, sizeof x);
    } while (!isfinite(x));
    return x;
}

/* A random text schema over in's features (one column per sparse feature,
 * in order, with its rows and name), in->num_dense dense columns, a label
 * and some ignored columns, shuffled into one order. */
static void random_schema(test_rng *r, const ctr_schema *in, ctr_column *cols, ctr_text_schema *sc)
{
    int32_t n = 0, d = 0, f = 0, label = (int32_t)test_range(r, 0, in->num_dense + in->num_sparse + 1);
    while (d < in->num_dense || f < in->num_sparse || n <= label) {
        ctr_column *k = &cols[n];
        memset(k, 0, sizeof *k);
        int pick = (int)test_range(r, 0, 3);
        if (n == label) {
            k->type = CTR_COL_LABEL;
            k->float_label = (int)test_range(r, 0, 2);
            snprintf(k->name, sizeof k->name, "label");
        } else if (pick == 0 && d < in->num_dense) {
            k->type = test_range(r, 0, 2) ? CTR_COL_INT : CTR_COL_FLOAT;
            k->transform = (ctr_transform)test_range(r, 0, 4);
            if (k->transform == CTR_TF_CLIP) {
                double a = any_double(r), b = any_double(r);
                k->min = a < b ? a : b, k->max = a < b ? b : a;
            } else if (k->transform == CTR_TF_STANDARDIZE) {
                k->has_stats = 1;
                k->mean = any_double(r);
                k->std = fabs(any_double(r)) + 1e-300;
            }
            snprintf(k->name, sizeof k->name, "d%d", (int)d++);
        } else if (pick == 1 && f < in->num_sparse) {
            k->type = test_range(r, 0, 2) ? CTR_COL_CATEGORICAL : CTR_COL_MULTI_HOT;
            k->encoding = (ctr_encoding)test_range(r, 0, 3);
            k->rows = in->rows[f];
            if (k->type == CTR_COL_MULTI_HOT) {
                k->separator = "|;"[test_range(r, 0, 2)];
                k->weighted = (int)test_range(r, 0, 2);
            }
            snprintf(k->name, sizeof k->name, "%s", in->names[f++]);
        } else if (pick == 2) {
            k->type = CTR_COL_IGNORE;
            snprintf(k->name, sizeof k->name, "skip%d", (int)n);
        } else {
            continue;
        }
        n++;
    }
    *sc = (ctr_text_schema){test_range(r, 0, 2) ? ',' : '\t', (int)test_range(r, 0, 2),
                            (int32_t)test_range(r, 1, 1 << 20), n, cols, NULL, 0, 0, NULL, 0};
}

static int same_column(const ctr_column *a, const ctr_column *b)
{
    return !strcmp(a->name, b->name) && a->type == b->type && a->float_label == b->float_label &&
           a->transform == b->transform && !memcmp(&a->min, &b->min, sizeof a->min) &&
           !memcmp(&a->max, &b->max, sizeof a->max) && !memcmp(&a->mean, &b->mean, sizeof a->mean) &&
           !memcmp(&a->std, &b->std, sizeof a->std) && a->encoding == b->encoding &&
           a->separator == b->separator && a->weighted == b->weighted && a->rows == b->rows;
}

static void roundtrip(test_rng *r, int trial)
{
    test_config *tc = test_config_random(r, 6, 8, 1, 100000);
    for (int32_t t = 0; t < tc->cfg.num_tables; t++) {
        ember_table_config *tb = &tc->tables[t];
        tb->placement = (ember_placement)test_range(r, 0, 4);
        tb->exchange = (ember_exchange)test_range(r, 0, 2);
        tb->max_ids_per_partition = test_range(r, 0, 3) ? 0 : test_range(r, 1, 1000);
        tb->max_unique_ids_per_partition = test_range(r, 0, 3) ? 0 : test_range(r, 1, 1000);
        tb->limit_policy = (ember_limit_policy)test_range(r, 0, 3);
        if (test_range(r, 0, 3) == 0) {
            tb->kind = EMBER_TABLE_DYNAMIC;
            tb->rows = 0;
            tb->capacity = test_range(r, 1, 1 << 20);
            tb->admit_after = (int32_t)test_range(r, 0, 5);
            tb->evict = (ember_evict_policy)test_range(r, 0, 4);
            tb->ttl_steps = (int32_t)test_range(r, 0, 9);
            tb->sketch_bytes = test_range(r, 0, 1 << 20);
        }
    }
    dlrm_config d = {.num_dense = 13, .num_sparse = tc->cfg.num_features, .emb_dim = 16, .num_bottom = 2,
                     .bottom = {64, 16}, .num_top = 2, .top = {32, 8}, .interaction = (dense_interaction)(trial % 3),
                     .activation = (dense_activation)test_range(r, 0, 5), .seed = test_next(r)};
    if (d.interaction == DENSE_INTERACT_DCN) /* the bundle keeps the cross layers and the activation */
        d.num_cross = (int32_t)test_range(r, 1, 4), d.cross_rank = test_range(r, 0, 2) ? 0 : 7;
    ctr_schema in = {13, tc->cfg.num_features, {0}, {{0}}, {0}, 0, 0};
    for (int32_t f = 0; f < in.num_sparse; f++) {
        in.rows[f] = test_range(r, 0, 2) ? test_range(r, 1, 1000000) : 0;
        snprintf(in.names[f], sizeof in.names[f], "C%d", (int)f + 1);
    }
    ctr_synth_config sy = ctr_synth_config_default();
    sy.seed = test_next(r); /* any 64 bits, the top one too */
    sy.teacher_scale = test_float(r, 0.5f, 3.0f);
    model_description *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    char err[256];
    tc->cfg.dedup = (int)test_range(r, 0, 2);
    tc->cfg.bounds = (ember_bounds_policy)test_range(r, 0, 2);
    tc->cfg.num_shards = (int32_t)test_range(r, 0, 9);
    CHECK(description_make(a, &tc->cfg, &d, (int32_t)test_range(r, 1, 4096), (int32_t)test_range(r, 1, 65536), &in,
                           trial % 2 ? &sy : NULL, err, sizeof err) == 0);
    ctr_column cols[3 * CTR_MAX_FEATURES];
    ctr_text_schema sc;
    random_schema(r, &in, cols, &sc);
    const description_source src = (description_source)test_range(r, 0, 5);
    CHECK(description_input_set(&a->in, src, &sc, err, sizeof err) == EMBER_OK);
    char *json = description_to_json(a);
    int rc = json ? description_from_json(json, strlen(json), b, err, sizeof err) : -1;
    CHECK_MSG(rc == 0, "trial %d: read back: %s", trial, err);
    int same = rc == 0 && a->num_tables == b->num_tables && a->num_features == b->num_features && a->seed == b->seed &&
               a->dedup == b->dedup && a->stack_tables == b->stack_tables && a->bounds == b->bounds &&
               a->num_shards == b->num_shards && !memcmp(&a->dense, &b->dense, sizeof a->dense) && a->chunk == b->chunk &&
               a->batch == b->batch && !memcmp(&a->input, &b->input, sizeof a->input) && a->synthetic == b->synthetic;
    for (int32_t t = 0; same && t < a->num_tables; t++)
        same = same_table(&a->tables[t], &b->tables[t]);
    const int columns = src == DESC_INPUT_TEXT || src == DESC_INPUT_CRITEO_TSV;
    same = same && rc == 0 && b->in.source == src &&
           (!columns || (b->in.schema.num_columns == sc.num_columns && b->in.schema.delimiter == sc.delimiter &&
                         b->in.schema.header == sc.header && b->in.schema.max_line == sc.max_line));
    for (int32_t c = 0; same && columns && c < sc.num_columns; c++)
        same = same_column(&sc.columns[c], &b->in.schema.columns[c]);
    for (int32_t f = 0; same && f < a->num_features; f++)
        same = !strcmp(a->features[f].name, b->features[f].name) && a->features[f].table == b->features[f].table &&
               a->features[f].combiner == b->features[f].combiner;
    if (same && a->synthetic) {
        const ctr_synth_config *x = &a->synth, *y = &b->synth;
        same = x->num_dense == y->num_dense && x->num_sparse == y->num_sparse && x->seed == y->seed &&
               x->teacher_scale == y->teacher_scale && x->ctr_rate == y->ctr_rate && x->eval_offset == y->eval_offset &&
               x->teacher_dim == y->teacher_dim && x->teacher_hidden == y->teacher_hidden;
        for (int32_t f = 0; same && f < x->num_sparse; f++)
            same = x->rows[f] == y->rows[f] && x->alpha[f] == y->alpha[f] && x->pooling[f] == y->pooling[f] &&
                   x->keyed[f] == y->keyed[f] && x->hash_rows[f] == y->hash_rows[f];
    }
    CHECK_MSG(same, "trial %d: the description read back differs", trial);
    /* the collection it describes is the one it came from */
    ember_collection_config cc = description_collection(b);
    CHECK_MSG(cc.num_tables == tc->cfg.num_tables && cc.num_features == tc->cfg.num_features &&
                  cc.seed == tc->cfg.seed && cc.dedup == tc->cfg.dedup && cc.stack_tables == tc->cfg.stack_tables &&
                  cc.bounds == tc->cfg.bounds && cc.num_shards == tc->cfg.num_shards,
              "trial %d: the collection the description makes is not the one it came from", trial);
    free(json);
    description_free(a);
    if (rc == 0)
        description_free(b);
    free(a), free(b);
    test_config_free(tc);
}

static void refused(const char *json, const char *names)
{
    model_description *m = malloc(sizeof *m);
    char err[512] = "";
    int rc = description_from_json(json, strlen(json), m, err, sizeof err);
    CHECK_MSG(rc == -1 && strstr(err, names), "%.60s...: %d \"%s\" does not name %s", json, rc, err, names);
    if (rc == 0)
        description_free(m);
    free(m);
}

/* A whole valid description with one sparse feature "C1" of 100 rows and
 * one dense input, and the input_schema given (NULL: none) spliced in. */
static void desc_json(char *json, size_t n, const char *schema)
{
    snprintf(json, n,
             "{\"format\": \"ember-model\", \"version\": 1, \"seed\": 1, \"dedup\": false, \"tables\": "
             "[{\"name\": \"t\", \"kind\": 0, \"rows\": 100, \"dim\": 4, \"init\": 0, \"init_value\": 0.05, "
             "\"optimizer\": {\"kind\": 1, \"lr\": 0.1, \"eps\": 1e-8, \"weight_decay\": 0, \"beta1\": 0.9, "
             "\"beta2\": 0.999}, \"placement\": 0, \"owner\": 0, \"exchange\": 0, \"limits\": [0, 0, 0], "
             "\"quantization\": [0, 0, 0], \"dynamic\": [0, 0, 0, 0, 0]}], \"features\": [{\"name\": \"C1\", "
             "\"table\": 0, \"combiner\": 0}], \"dense\": {\"num_dense\": 1, \"num_sparse\": 1, \"emb_dim\": 4, "
             "\"bottom\": [4], \"top\": [1], \"interaction\": 0, \"seed\": 1}, \"chunk\": 8, \"batch\": 8, "
             "\"input\": {\"num_dense\": 1, \"rows\": [100], \"names\": [\"C1\"]}, \"synthetic\": null%s%s}",
             schema ? ", \"input_schema\": " : "", schema ? schema : "");
}

/* A description whose input_schema cannot be read opens without it
 * (source none) and keeps why, naming the field, for a text read to refuse. */
static void refused_schema(const char *schema, const char *names)
{
    char json[2048], err[512] = "";
    desc_json(json, sizeof json, schema);
    model_description *m = malloc(sizeof *m);
    int rc = m ? description_from_json(json, strlen(json), m, err, sizeof err) : -1;
    CHECK_MSG(rc == 0 && m->in.source == DESC_INPUT_NONE && strstr(m->in_error, names),
              "%.60s...: %d, source %d, \"%s\" does not name %s", schema, rc, rc == 0 ? (int)m->in.source : -1,
              rc == 0 ? m->in_error : err, names);
    if (rc == 0)
        description_free(m);
    free(m);
}

/* Opens json: 0 and m's input source, or -1. */
static int opens(const char *schema, description_source *source)
{
    char json[2048], err[512] = "";
    desc_json(json, sizeof json, schema);
    model_description *m = malloc(sizeof *m);
    int rc = m ? description_from_json(json, strlen(json), m, err, sizeof err) : -1;
    CHECK_MSG(rc == 0, "a valid description refused: %s", err);
    *source = rc == 0 ? m->in.source : DESC_INPUT_NONE;
    if (rc == 0)
        description_free(m);
    free(m);
    return rc;
}

#define COLS(extra) "\"columns\": [{\"name\": \"y\", \"type\": \"label\", \"label\": \"binary\"}, " \
    "{\"name\": \"x\", \"type\": \"float\", \"transform\": \"standardize\", \"mean\": 1.5, \"std\": 2}, " \
    "{\"name\": \"C1\", \"type\": \"categorical\", \"encoding\": \"string\", \"rows\": 100" extra "}]"
#define HEAD "{\"version\": 1, \"source\": \"text\", \"format\": \"csv\", \"header\": true, " \
    "\"max_line\": 4096, \"hash\": \"xxh64-seed-feature\", "

static void schema_refusals(void)
{
    /* the refusals below differ from this one by one thing */
    description_source src = DESC_INPUT_NONE;
    CHECK(opens(HEAD COLS("") "}", &src) == 0 && src == DESC_INPUT_TEXT);
    CHECK(opens(NULL, &src) == 0 && src == DESC_INPUT_NONE); /* written before the member: still opens */
    CHECK(opens("{\"version\": 1, \"source\": \"binary\"}", &src) == 0 && src == DESC_INPUT_BINARY);
    refused_schema(HEAD COLS("") ", \"x\": 1}", "input_schema.x: unknown field");
    refused_schema("{\"version\": 2, \"source\": \"text\"}", "input_schema.version: 2: this ember reads 1");
    refused_schema("{\"version\": 1, \"source\": \"parquet\"}", "input_schema.source: \"parquet\"");
    refused_schema(HEAD COLS(", \"seed\": 3") "}", "input_schema.columns[2].seed: unknown field");
    refused_schema("{\"version\": 1, \"source\": \"text\", \"format\": \"csv\", \"header\": true, "
                   "\"max_line\": 4096, \"hash\": \"crc32\", " COLS("") "}",
                   "input_schema.hash");
    refused_schema(HEAD "\"columns\": [{\"name\": \"y\", \"type\": \"label\", \"label\": \"binary\"}, "
                   "{\"name\": \"x\", \"type\": \"float\", \"transform\": \"none\"}, "
                   "{\"name\": \"C1\", \"type\": \"categorical\", \"encoding\": \"string\", \"rows\": 99}]}",
                   "input_schema.columns[2].rows: 99, but input.rows[0] is 100");
    refused_schema(HEAD "\"columns\": [{\"name\": \"y\", \"type\": \"label\", \"label\": \"binary\"}, "
                   "{\"name\": \"C1\", \"type\": \"categorical\", \"encoding\": \"string\", \"rows\": 100}]}",
                   "0 dense and 1 sparse columns, but input has 1 and 1");
    refused_schema(HEAD "\"columns\": [{\"name\": \"y\", \"type\": \"label\", \"label\": \"binary\"}, "
                   "{\"name\": \"x\", \"type\": \"float\", \"transform\": \"standardize\", \"mean\": 1, "
                   "\"std\": 0}, {\"name\": \"C1\", \"type\": \"categorical\", \"encoding\": \"string\", "
                   "\"rows\": 100}]}",
                   "input_schema.columns[1].std: must be above 0");
}

int main(int argc, char **argv)
{
    test_rng r = {test_seed(argc, argv)};
    for (int trial = 0; trial < 40; trial++)
        roundtrip(&r, trial);
    refused("{", "line 1");
    refused("{\"format\": \"other\"}", "expected \"ember-model\"");
    refused("{\"format\": \"ember-model\", \"version\": 3}", "version"); /* 2: DCN or a non-ReLU activation */
    refused("{\"format\": \"ember-model\", \"version\": 1}", "seed: missing");
    refused("{\"format\": \"ember-model\", \"version\": 1, \"seed\": 1, \"dedup\": false, \"tables\": 3}",
            "tables: wrong type");
    refused("{\"format\": \"ember-model\", \"version\": 1, \"seed\": 1, \"dedup\": false, \"bounds\": 7, "
            "\"tables\": 3}",
            "bounds: 7 outside [0, 1]");
    refused("{\"format\": \"ember-model\", \"version\": 1, \"seed\": 1, \"dedup\": false, \"tables\": "
            "[{\"name\": \"t\", \"kind\": 0, \"rows\": 5, \"dim\": 5000}]}",
            "tables[0].dim: 5000 outside [1, 1024]");
    /* a real no float holds would not write back (found by fuzz_model) */
    refused("{\"format\": \"ember-model\", \"version\": 1, \"seed\": 1, \"dedup\": false, \"tables\": "
            "[{\"name\": \"t\", \"kind\": 0, \"rows\": 5, \"dim\": 4, \"init\": 0, \"init_value\": 0.05, "
            "\"optimizer\": {\"kind\": 1, \"lr\": 0.1, \"eps\": 1e-8, \"weight_decay\": 3.3e60, \"beta1\": 0.9, "
            "\"beta2\": 0.999}}]}",
            "weight_decay: 3.3e+60 does not fit a float");
    schema_refusals();
    return check_report("test_infer");
}
