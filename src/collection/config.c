/*
 * config.c: the defaults of the public config structs, the optimizer state
 * per row, and the tables that cannot hold encoded rows (config.h).
 */
#include <string.h>

#include "collection/config.h"
#include "quant/quant.h"

ember_optimizer ember_optimizer_default(ember_optimizer_kind kind)
{
    ember_optimizer o = {kind, 0.01f, 1e-8f, 0.0f, 0.9f, 0.999f, 0.9f, 0, EMBER_DECAY_L2, 1.0f, 0.0f, 0.0f, -0.5f, 0.0f, 0.0f,
                         0.001f};
    return o;
}

ember_table_config ember_table_config_default(void)
{
    ember_table_config t;
    memset(&t, 0, sizeof t);
    t.init = EMBER_INIT_UNIFORM;
    t.init_value = 0.05f;
    t.optimizer = ember_optimizer_default(EMBER_OPT_SGD);
    t.limit_policy = EMBER_LIMIT_ERROR;
    return t;
}

ember_collection_config ember_collection_config_default(void)
{
    ember_collection_config c;
    memset(&c, 0, sizeof c);
    c.num_shards = 0; /* the world size */
    c.stack_tables = 1;
    c.bounds = EMBER_BOUNDS_ERROR;
    return c;
}

int64_t ember_row_bytes(const ember_table_config *tc, int32_t dim)
{
    if (tc->rows_encoding > EMBER_ROWS_FP32 && tc->rows_encoding <= EMBER_ROWS_INT4)
        return ember_quant_row_bytes((ember_encoding)tc->rows_encoding, dim);
    return (int64_t)dim * (tc->precision == EMBER_PRECISION_FP32 ? 4 : 2);
}

int32_t ember_row_state_floats(const ember_table_config *tc, int32_t dim)
{
    return tc->rows_encoding != EMBER_ROWS_FP32 ? 0 : ember_state_floats(tc->optimizer.kind, dim);
}

int ember_state_row_floats(ember_optimizer_kind kind)
{
    return kind == EMBER_OPT_ROWWISE_ADAGRAD || kind == EMBER_OPT_ROWWISE_ADAM;
}

int ember_state_vectors(ember_optimizer_kind kind)
{
    return (ember_state_floats(kind, 2) - ember_state_row_floats(kind)) / 2;
}

int ember_element_state(ember_optimizer_kind kind)
{
    return ember_state_vectors(kind) > 0 && ember_state_row_floats(kind) == 0;
}

int ember_precision_encoding(ember_row_precision p)
{
    return p == EMBER_PRECISION_FP16 ? EMBER_ENC_FP16 : p == EMBER_PRECISION_BF16 ? EMBER_ENC_BF16 : 0;
}

int64_t ember_row_state_bytes(const ember_table_config *tc, int32_t dim)
{
    return (int64_t)ember_row_state_floats(tc, dim) * (tc->state_precision == EMBER_PRECISION_FP32 ? 4 : 2);
}

int32_t ember_state_floats(ember_optimizer_kind kind, int32_t dim)
{
    switch (kind) {
    case EMBER_OPT_ADAGRAD: return dim;
    case EMBER_OPT_ROWWISE_ADAGRAD: return 1;
    case EMBER_OPT_ADAM: return 2 * dim;
    case EMBER_OPT_MOMENTUM: return dim;
    case EMBER_OPT_FTRL: return 2 * dim;
    case EMBER_OPT_ROWWISE_ADAM: return dim + 1;
    case EMBER_OPT_LAMB: return 2 * dim;
    case EMBER_OPT_LARS: return dim;
    default: return 0;
    }
}

const char *ember_encoding_refusal(const ember_table_config *tc)
{
    return tc->storage == EMBER_STORAGE_SSD        ? "the SSD tier"
           : tc->placement == EMBER_PLACE_COLUMN   ? "COLUMN placement"
           : tc->quant_buckets != 0                ? "simulated quantization"
                                                   : NULL;
}
