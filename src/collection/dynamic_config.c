/*
 * dynamic_config.c: a dynamic table's size from its config, and the checks
 * of its fields (ember_collection_create; config.h).  Sizes are the bytes
 * ember_dyn_init asks for (dyn/dyn.c; the large per-slot arrays are
 * page-rounded mappings, a
 * few KiB more for a small table), so capacity from capacity_bytes is the
 * largest capacity that fits.
 */
#include <stdio.h>

#include "collection/config.h"
#include "dyn/dyn.h"

#define SKETCH_MIN_BYTES 64
#define SKETCH_MAX_BYTES ((int64_t)16 << 30)
/* The default sketch (sketch_bytes 0) is 8 bytes per row of capacity, but
 * at least this: 1024 lines, where a small table's 8 bytes a row would be a
 * few lines that every key shares, admitting most keys at first sight
 * (docs/dynamic.md, "Admission", measured with bench/sketch_admission.c). */
#define SKETCH_DEFAULT_FLOOR ((int64_t)64 << 10)

/* Sketch width for `bytes` (4 rows of 2-byte counters): the largest power
 * of two that fits. */
static int64_t width_for(int64_t bytes)
{
    int64_t w = 1;
    while (ember_dyn_sketch_bytes(w * 2) <= bytes)
        w *= 2;
    return w;
}

static int64_t sketch_bytes_for(const ember_table_config *t, int64_t capacity)
{
    if (t->admit_after <= 1)
        return 0;
    int64_t want = t->sketch_bytes ? t->sketch_bytes : 8 * capacity;
    /* the floor; a table sized by its bytes gives it at most an eighth of them */
    int64_t floor = t->capacity > 0 || t->capacity_bytes <= 0 ? SKETCH_DEFAULT_FLOOR
                    : t->capacity_bytes / 8 < SKETCH_DEFAULT_FLOOR ? t->capacity_bytes / 8
                                                                  : SKETCH_DEFAULT_FLOOR;
    if (!t->sketch_bytes && want < floor)
        want = floor;
    if (want < SKETCH_MIN_BYTES)
        want = SKETCH_MIN_BYTES;
    return ember_dyn_sketch_bytes(width_for(want));
}

int64_t ember_dyn_table_bytes(const ember_table_config *t, int64_t capacity)
{
    int64_t row = ember_row_bytes(t, t->dim) + ember_row_state_bytes(t, t->dim);
    return capacity * row + ember_dyn_index_bytes(capacity, t->evict) + sketch_bytes_for(t, capacity);
}

int64_t ember_dyn_capacity(const ember_table_config *t)
{
    if (t->capacity > 0)
        return t->capacity;
    int64_t lo = 0, hi = (int64_t)UINT32_MAX - 1; /* table_bytes(lo) fits, hi does not */
    if (t->capacity_bytes <= 0 || ember_dyn_table_bytes(t, 1) > t->capacity_bytes)
        return 0;
    lo = 1;
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ember_dyn_table_bytes(t, mid) <= t->capacity_bytes)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

int64_t ember_dyn_sketch_width(const ember_table_config *t)
{
    int64_t b = sketch_bytes_for(t, ember_dyn_capacity(t));
    return b ? b / ember_dyn_sketch_bytes(1) : 0;
}

int ember_dyn_check_config(const ember_table_config *t, int32_t world, char *err, size_t len)
{
    const char *nm = t->name;
    if (t->kind != EMBER_TABLE_FIXED && t->kind != EMBER_TABLE_DYNAMIC)
        return snprintf(err, len, "table '%s': unknown kind %d", nm, t->kind), EMBER_EINVAL;
    if (t->kind == EMBER_TABLE_FIXED) {
        if (t->capacity || t->capacity_bytes || t->admit_after > 1 || t->sketch_bytes || t->ttl_steps ||
            t->evict != EMBER_EVICT_LRU)
            return snprintf(err, len,
                            "table '%s': capacity, capacity_bytes, admit_after, evict, ttl_steps and "
                            "sketch_bytes are for dynamic tables (kind dynamic)",
                            nm),
                   EMBER_EINVAL;
        return EMBER_OK;
    }
    if (t->rows != 0)
        return snprintf(err, len, "table '%s': a dynamic table takes any key: rows must be 0 (got %lld); "
                        "capacity sets its size", nm, (long long)t->rows), EMBER_EINVAL;
    if (t->capacity < 0 || t->capacity_bytes < 0)
        return snprintf(err, len, "table '%s': capacity and capacity_bytes must be >= 0", nm), EMBER_EINVAL;
    if (t->capacity == 0 && t->capacity_bytes == 0)
        return snprintf(err, len, "table '%s': capacity 0: set capacity (rows per rank) or capacity_bytes",
                        nm), EMBER_EINVAL;
    if (t->capacity && t->capacity_bytes)
        return snprintf(err, len, "table '%s': set capacity or capacity_bytes, not both", nm), EMBER_EINVAL;
    if (t->admit_after < 0 || t->admit_after > 65535)
        return snprintf(err, len, "table '%s': admit_after %d outside [0, 65535]", nm, t->admit_after),
               EMBER_EINVAL;
    if (t->evict < EMBER_EVICT_LRU || t->evict > EMBER_EVICT_NONE)
        return snprintf(err, len, "table '%s': unknown eviction policy %d", nm, t->evict), EMBER_EINVAL;
    if (t->evict == EMBER_EVICT_TTL && t->ttl_steps < 1)
        return snprintf(err, len, "table '%s': eviction ttl needs ttl_steps >= 1 (steps without use "
                        "before a row is freed; got %d)", nm, t->ttl_steps), EMBER_EINVAL;
    if (t->ttl_steps && t->evict != EMBER_EVICT_TTL) {
        static const char *const policy[] = {"lru", "lfu", "ttl", "none"};
        return snprintf(err, len, "table '%s': ttl_steps is %d but evict is %s: ttl_steps is for evict ttl "
                        "only (leave it 0)", nm, t->ttl_steps, policy[t->evict]), EMBER_EINVAL;
    }
    if (t->sketch_bytes && (t->sketch_bytes < SKETCH_MIN_BYTES || t->sketch_bytes > SKETCH_MAX_BYTES))
        return snprintf(err, len, "table '%s': sketch_bytes %lld outside [64, 16 GiB] (0 = 8 per row of capacity, "
                        "at least 64 KiB)", nm,
                        (long long)t->sketch_bytes), EMBER_EINVAL;
    if (t->sketch_bytes && t->admit_after <= 1)
        return snprintf(err, len, "table '%s': sketch_bytes is set but admit_after is %d (no sketch below 2)",
                        nm, t->admit_after), EMBER_EINVAL;
    if (t->placement != EMBER_PLACE_ROW)
        return snprintf(err, len, "table '%s': a dynamic table is placed row-wise by key hash "
                        "(placement row)", nm), EMBER_EINVAL;
    int64_t cap = ember_dyn_capacity(t);
    if (cap == 0)
        return snprintf(err, len, "table '%s': capacity_bytes %lld holds no row (one costs %lld bytes, %lld of "
                        "them the admission sketch)", nm, (long long)t->capacity_bytes,
                        (long long)ember_dyn_table_bytes(t, 1), (long long)sketch_bytes_for(t, 1)), EMBER_EINVAL;
    if (cap * world >= (int64_t)UINT32_MAX)
        return snprintf(err, len, "table '%s': capacity %lld x %d ranks exceeds 2^32-1 rows", nm,
                        (long long)cap, world), EMBER_EINVAL;
    return EMBER_OK;
}

int64_t ember_dynamic_bytes(const ember_table_config *t)
{
    char err[8];
    if (!t || t->kind != EMBER_TABLE_DYNAMIC || t->dim < 1 || t->dim > 1024 ||
        ember_dyn_check_config(t, 1, err, sizeof err) != EMBER_OK)
        return 0;
    return ember_dyn_table_bytes(t, ember_dyn_capacity(t));
}
