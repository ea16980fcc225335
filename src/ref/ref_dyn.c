/*
 * ref_dyn.c: a dynamic table's key -> slot rules written out naively
 * (include/ember.h, docs/dynamic.md): arrays scanned from the start, no
 * hash map, no heap.  One training step at a time, for one owner rank.
 *
 *   keys present at the start of the step are pinned when the batch uses them
 *   TTL: free every resident, unpinned row with step - last > ttl
 *   for each distinct absent key, in order of first occurrence:
 *     est = min of its 4 sketch counters; now = est + occurrences
 *     (admit_after > 1) each counter = max(counter, min(now, 65535))
 *     now >= admit_after: the lowest free slot; none free: the resident,
 *       unpinned slot with the least (score, slot), score = last (LRU, TTL)
 *       or (count, last) (LFU); none: EMBER_ELIMIT, nothing changed
 *     the new row: key, last = step, count = est; pinned
 *   every occurrence of a key with a row: last = step, count += 1
 */
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "ref/ref.h"

int ref_dyn_init(ref_dyn *r, int64_t capacity, int32_t admit_after, ember_evict_policy evict, int32_t ttl,
                 int64_t sketch_width, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    r->capacity = capacity;
    r->admit_after = admit_after < 1 ? 1 : admit_after;
    r->evict = evict;
    r->ttl = ttl;
    r->width = sketch_width;
    r->seed = seed;
    r->resident = calloc((size_t)capacity, 1);
    r->key = calloc((size_t)capacity, sizeof *r->key);
    r->last = calloc((size_t)capacity, sizeof *r->last);
    r->count = calloc((size_t)capacity, sizeof *r->count);
    r->sketch = calloc((size_t)(4 * sketch_width + 1), sizeof *r->sketch);
    r->ev_keys = calloc((size_t)capacity + 1, sizeof *r->ev_keys);
    r->ev_counts = calloc((size_t)capacity + 1, sizeof *r->ev_counts);
    return r->resident && r->key && r->last && r->count && r->sketch && r->ev_keys && r->ev_counts ? 0 : -1;
}

void ref_dyn_free(ref_dyn *r)
{
    free(r->resident);
    free(r->key);
    free(r->last);
    free(r->count);
    free(r->sketch);
    free(r->ev_keys);
    free(r->ev_counts);
    memset(r, 0, sizeof *r);
}

/* The slot holding key, or -1 when it is not resident. */
static int64_t slot_of(const ref_dyn *r, uint64_t key)
{
    for (int64_t s = 0; s < r->capacity; s++)
        if (r->resident[s] && r->key[s] == key)
            return s;
    return -1;
}

/* Counter i of key: the documented hash (width / 8 lines of 32 counters;
 * counter i is one of the 8 in the i-th quarter of the key's line). */
static uint16_t *counter(ref_dyn *r, uint64_t key, int i)
{
    uint64_t h = ember_mix64(key ^ ember_mix64(r->seed + 0x9e3779b97f4a7c15ULL));
    uint64_t line = h % ((uint64_t)r->width / 8);
    return &r->sketch[32 * line + 8 * (uint64_t)i + ((h >> (40 + 3 * i)) % 8)];
}

static void free_slot(ref_dyn *r, int64_t s)
{
    r->resident[s] = 0;
    r->ev_keys[r->ev_n] = r->key[s];
    r->ev_counts[r->ev_n++] = r->count[s];
}

static uint64_t score(const ref_dyn *r, int64_t s)
{
    return r->evict == EMBER_EVICT_LFU ? (uint64_t)r->count[s] << 32 | r->last[s] : r->last[s];
}

/* A copy of the state that changes (ELIMIT restores it). */
typedef struct snapshot {
    int8_t *resident;
    uint64_t *key;
    uint32_t *last, *count;
    uint16_t *sketch;
} snapshot;

int ref_dyn_step(ref_dyn *r, const uint64_t *keys, int64_t n, uint32_t step, int64_t *slots, int64_t *reset_slots,
                 uint64_t *reset_keys, int64_t *nresets)
{
    int64_t C = r->capacity, W4 = 4 * r->width;
    snapshot sn = {malloc((size_t)C), malloc(8 * (size_t)C), malloc(4 * (size_t)C), malloc(4 * (size_t)C),
                   malloc(2 * (size_t)W4 + 2)};
    memcpy(sn.resident, r->resident, (size_t)C);
    memcpy(sn.key, r->key, 8 * (size_t)C);
    memcpy(sn.last, r->last, 4 * (size_t)C);
    memcpy(sn.count, r->count, 4 * (size_t)C);
    memcpy(sn.sketch, r->sketch, 2 * (size_t)W4);
    int64_t ev0 = r->ev_n;
    r->ev_n = 0;
    int64_t expired = 0, evicted = 0, admitted = 0, sum = 0;
    *nresets = 0;
    int8_t *pinned = calloc((size_t)C, 1);
    for (int64_t i = 0; i < n; i++) {
        int64_t s = slot_of(r, keys[i]);
        slots[i] = s;
        if (s >= 0)
            pinned[s] = 1;
    }
    if (r->evict == EMBER_EVICT_TTL)
        for (int64_t s = 0; s < C; s++)
            if (r->resident[s] && !pinned[s] && (int64_t)step - (int64_t)r->last[s] > r->ttl) {
                sum += r->count[s];
                free_slot(r, s);
                expired++;
            }
    int st = EMBER_OK;
    for (int64_t i = 0; i < n && st == EMBER_OK; i++) {
        int first = 1;
        for (int64_t j = 0; j < i && first; j++)
            first = keys[j] != keys[i];
        if (!first || slots[i] >= 0)
            continue;
        int64_t occ = 0;
        for (int64_t j = i; j < n; j++)
            occ += keys[j] == keys[i];
        uint32_t est = 0;
        if (r->admit_after > 1) {
            est = UINT16_MAX;
            for (int c = 0; c < 4; c++)
                if (*counter(r, keys[i], c) < est)
                    est = *counter(r, keys[i], c);
        }
        uint64_t now = est + (uint64_t)occ;
        if (r->admit_after > 1)
            for (int c = 0; c < 4; c++) {
                uint16_t *p = counter(r, keys[i], c);
                uint16_t v = now > UINT16_MAX ? UINT16_MAX : (uint16_t)now;
                if (*p < v)
                    *p = v;
            }
        if (now < (uint64_t)r->admit_after)
            continue;
        int64_t slot = -1;
        for (int64_t s = 0; s < C && slot < 0; s++)
            if (!r->resident[s])
                slot = s;
        if (slot < 0 && r->evict != EMBER_EVICT_NONE) {
            for (int64_t s = 0; s < C; s++)
                if (r->resident[s] && !pinned[s] && (slot < 0 || score(r, s) < score(r, slot)))
                    slot = s;
            if (slot >= 0) {
                sum += r->count[slot];
                free_slot(r, slot);
                evicted++;
            }
        }
        if (slot < 0) {
            st = EMBER_ELIMIT;
            break;
        }
        r->resident[slot] = 1;
        r->key[slot] = keys[i];
        r->last[slot] = step;
        r->count[slot] = est;
        pinned[slot] = 1;
        reset_slots[*nresets] = slot;
        reset_keys[(*nresets)++] = keys[i];
        admitted++;
        for (int64_t j = i; j < n; j++)
            if (keys[j] == keys[i])
                slots[j] = slot;
    }
    free(pinned);
    if (st != EMBER_OK) {
        memcpy(r->resident, sn.resident, (size_t)C);
        memcpy(r->key, sn.key, 8 * (size_t)C);
        memcpy(r->last, sn.last, 4 * (size_t)C);
        memcpy(r->count, sn.count, 4 * (size_t)C);
        memcpy(r->sketch, sn.sketch, 2 * (size_t)W4);
        r->ev_n = ev0;
        *nresets = 0;
    } else {
        for (int64_t i = 0; i < n; i++)
            if (slots[i] >= 0) {
                r->last[slots[i]] = step;
                if (r->count[slots[i]] < UINT32_MAX)
                    r->count[slots[i]]++;
            } else {
                r->not_admitted++;
            }
        r->admitted += admitted;
        r->evicted += evicted;
        r->expired += expired;
        r->count_sum += sum;
    }
    free(sn.resident);
    free(sn.key);
    free(sn.last);
    free(sn.count);
    free(sn.sketch);
    return st;
}

void ref_init_row(const ember_table_config *t, uint64_t seed, int64_t row, float *out)
{
    uint64_t key = ref_table_key(seed, t->name);
    for (int32_t c = 0; c < t->dim; c++)
        out[c] = ref_init_value(t, key, row, c);
}
