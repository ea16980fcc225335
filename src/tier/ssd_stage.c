/*
 * ssd_stage.c: the SSD tier on the step (docs/tiers.md): stage (look every
 * row up, pin the hits, claim a slot for each distinct miss, append dirty
 * victims to the store's log, then read or initialise the missing rows) and
 * lookahead's announce (record the batch's rows, read the next step's
 * missing rows in the background into slots of rows no announced batch
 * uses).
 *
 * Failure leaves the table as it was: a claim changes the map at once (so a
 * batch's repeated rows share a slot), but a victim's record is copied to
 * the log (memory: ssd_log.h) before its slot is read into, and when that
 * copy cannot be made every claim of the batch is undone: victims return
 * to the map with their data still in their slots (clean when their record
 * did reach the log).  When a read fails, only that row's slot is freed;
 * the row is still in the file.  A segment write that failed in the
 * background is retried, and reported, by the next stage before any claim.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/reserve.h"
#include "prep/route.h"
#include "tier/ssd_impl.h"
#include "tier/ssd_size.h"

/* ----------------------------------------------------------- load jobs */

/* Room for n claims and their loads. */
static int job_reserve(ssd_store *s, int64_t n)
{
    ssd_job *j = &s->job;
    return ember_reserve((void **)&j->slot, &j->caps[0], n, sizeof *j->slot) ||
           ember_reserve((void **)&j->new_row, &j->caps[1], n, sizeof *j->new_row) ||
           ember_reserve((void **)&j->old_row, &j->caps[2], n, sizeof *j->old_row) ||
           ember_reserve((void **)&j->old_dirty, &j->caps[3], n, sizeof *j->old_dirty) ||
           ember_reserve((void **)&j->saved, &j->caps[4], n, sizeof *j->saved) ||
           ember_reserve((void **)&j->req, &j->caps[5], n, sizeof *j->req);
}

/* Claims a slot for row: the map points at it at once (LOADING), its
 * victim leaves the map.  0, or EMBER_ELIMIT when no slot is left. */
static int claim(ssd_store *s, uint32_t row, int64_t keep_through)
{
    uint32_t victim;
    int32_t x = ssd_take_slot(s, keep_through, &victim);
    if (x < 0)
        return EMBER_ELIMIT;
    ssd_job *j = &s->job;
    int64_t k = j->n++;
    j->slot[k] = (uint32_t)x;
    j->new_row[k] = row;
    j->saved[k] = 0;
    j->old_row[k] = victim;
    j->old_dirty[k] = victim != SSD_NONE && (s->flags[x] & F_DIRTY);
    if (victim != SSD_NONE)
        ssd_map_erase(s, victim);
    ssd_map_insert(s, row, (uint32_t)x);
    s->flags[x] = F_LOADING;
    return 0;
}

/* Undoes every claim of the job: victims back in the map and their policy
 * structures, fresh slots free. */
static void job_undo(ssd_store *s)
{
    ssd_job *j = &s->job;
    for (int64_t k = j->n - 1; k >= 0; k--) {
        int32_t x = (int32_t)j->slot[k];
        ssd_map_erase(s, j->new_row[k]);
        if (j->old_row[k] == SSD_NONE) {
            ssd_release_slot(s, x);
            continue;
        }
        ssd_map_insert(s, j->old_row[k], (uint32_t)x);
        s->slot_row[x] = j->old_row[k];
        s->flags[x] = j->old_dirty[k] && !j->saved[k] ? F_DIRTY : 0;
        if (s->mask)
            s->mask[x] = ssd_window_mask(s, j->old_row[k]);
        ssd_policy_place(s, x);
    }
    j->n = j->nreq = 0;
}

/* The claims' dirty victims to the log, then a load request per claim (a
 * record still in a log buffer is copied at once).  EMBER_OK, or the
 * failure of an append, with every claim undone. */
static int job_requests(ssd_store *s)
{
    ssd_job *j = &s->job;
    for (int64_t k = 0; k < j->n; k++) {
        if (!j->old_dirty[k])
            continue;
        int32_t x = (int32_t)j->slot[k];
        int st = ssd_save_record(s, j->old_row[k], s->vslot + (int64_t)x * s->vrow,
                                 s->sf ? s->sslot + (int64_t)x * s->srow : NULL);
        if (st != EMBER_OK) {
            job_undo(s);
            return st;
        }
        j->saved[k] = 1;
    }
    for (int64_t k = 0; k < j->n; k++) {
        uint32_t r = j->new_row[k];
        int32_t x = (int32_t)j->slot[k];
        const char *rec = ssd_log_buffered(&s->log, r);
        int op = !ssd_log_written(&s->log, r) ? EMBER_IO_INIT : rec ? EMBER_IO_DONE : EMBER_IO_READ;
        ssd_slot_req(s, &j->req[k], x, r, op);
        if (rec) {
            memcpy(s->vslot + (int64_t)x * s->vrow, rec, (size_t)s->vrow);
            if (s->sf)
                memcpy(s->sslot + (int64_t)x * s->srow, rec + s->vrow, (size_t)s->srow);
        }
    }
    j->nreq = j->n;
    return EMBER_OK;
}

/* Applies the outcome of the job's loads.  pin: the step's loads (pinned,
 * demand) or lookahead's. */
static int job_finish(ssd_store *s, int pin)
{
    ssd_job *j = &s->job;
    int64_t nbad = 0;
    for (int64_t i = 0; i < j->nreq; i++)
        nbad += j->req[i].err != 0;
    int st = EMBER_OK;
    for (int64_t k = 0; k < j->n; k++) {
        int32_t x = (int32_t)j->slot[k];
        if (j->old_row[k] != SSD_NONE) {
            s->st.evictions++;
            s->resident--;
        }
        ember_io_req *q = &j->req[k];
        if (q->err) {
            if (st == EMBER_OK)
                st = ssd_io_fail(s, q, nbad);
            ssd_map_erase(s, j->new_row[k]);
            ssd_release_slot(s, x);
            continue;
        }
        s->slot_row[x] = j->new_row[k];
        s->flags[x] = 0;
        s->resident++;
        if (q->op == EMBER_IO_INIT)
            s->st.init_loads++;
        else if (q->op == EMBER_IO_READ) {
            s->st.bytes_read += s->rec_bytes;
            s->st.reads++;
        }
        if (s->freq)
            s->freq[x] = 0;
        if (s->mask)
            s->mask[x] = ssd_window_mask(s, j->new_row[k]);
        uint32_t home;
        if (ssd_cold_sampled(s, j->new_row[k], &home)) {
            /* a sampled row: evicted cold not long ago, a longer window would have kept it */
            uint64_t e = s->cold_seen[home];
            s->sample_loads++;
            if (e != UINT64_MAX && (uint32_t)e == j->new_row[k] &&
                (uint32_t)s->step_now - (uint32_t)(e >> 32) <= SSD_WINDOW)
                s->sample_reloads++;
        }
        if (pin) {
            s->st.demand_loads++;
            ssd_pin(s, x);
            s->flags[x] |= F_MISSED;
        } else {
            s->st.prefetch_loads++;
            s->flags[x] = F_PREFETCHED;
            ssd_policy_place(s, x);
        }
    }
    j->n = j->nreq = 0;
    return st;
}

/* Waits for the background job (lookahead) and applies it. */
int ssd_bg_finish(ssd_store *s)
{
    if (!s->job.background)
        return EMBER_OK;
    double t0 = ssd_now();
    ember_io_wait(s->io);
    s->st.wait_seconds += ssd_now() - t0;
    s->job.background = 0;
    return job_finish(s, 0);
}

/* ---------------------------------------------------------- step staging */

void ssd_begin(ember_store *bs, int64_t step)
{
    ssd_store *s = (ssd_store *)bs;
    s->step_now = step;
    if (s->policy == EMBER_CACHE_LOOKAHEAD)
        ssd_window_to(s, step);
    /* LRU: the step's misses first, so that its hits are the more recent
     * (a hit was used before this step too: it leaves after the new rows) */
    for (int pass = s->policy == EMBER_CACHE_LRU ? 0 : 1; pass < 2; pass++)
        for (int64_t i = 0; i < s->npinned; i++) {
            if (i + 8 < s->npinned)
                ssd_slot_prefetch(s, (uint32_t)s->pinned[i + 8]);
            int32_t x = s->pinned[i];
            if (pass == 0 && !(s->flags[x] & F_MISSED))
                continue;
            if (pass == 1 && !(s->flags[x] & F_PINNED))
                continue; /* placed in pass 0 */
            s->flags[x] &= (uint8_t)~(F_PINNED | F_MISSED);
            ssd_policy_place(s, x);
        }
    s->npinned = 0;
    s->step++;
}

void ssd_mark_dirty(ember_store *bs)
{
    ssd_store *s = (ssd_store *)bs;
    for (int64_t i = 0; i < s->npinned; i++)
        s->flags[s->pinned[i]] |= F_DIRTY;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The message for a step whose rows do not fit the cache. */
static int too_small(ssd_store *s, int64_t from)
{
    int64_t extra = 0, nm = 0;
    for (int64_t i = from; s->miss[i] >= 0; i++)
        s->miss_row[nm++] = s->miss_row[i];
    qsort(s->miss_row, (size_t)nm, sizeof(uint32_t), cmp_u32);
    for (int64_t i = 0; i < nm; i++)
        extra += (i == 0 || s->miss_row[i] != s->miss_row[i - 1]) && ssd_map_find(s, s->miss_row[i]) < 0;
    int64_t need = s->npinned + s->job.n + extra;
    job_undo(s);
    int64_t per = ember_ssd_slot_bytes(s->rec_bytes, s->policy), index = ember_ssd_index_bytes(s->rows, s->rec_bytes);
    return ssd_fail(s, EMBER_ELIMIT,
                "%s: one step needs %lld distinct rows cached at once (%lld bytes of cache) but the "
                "SSD tier's cache holds %lld rows (%lld bytes); raise cache_bytes or use smaller batches",
                s->label, (long long)need, (long long)(need * per + index), (long long)s->cap,
                (long long)(s->cap * per + index));
}

int ssd_stage(ember_store *bs, const uint32_t *rows, uint32_t *slots, int64_t n)
{
    ssd_store *s = (ssd_store *)bs;
    int st = ssd_bg_finish(s);
    if (st != EMBER_OK)
        return st;
    int e = ssd_log_check(&s->log); /* a segment write that failed: retried first */
    if (e)
        return ssd_write_fail(s, e);
    if (ember_reserve((void **)&s->miss, &s->miss_cap, n + 1, sizeof(int64_t)) ||
        ember_reserve((void **)&s->miss_row, &s->miss_row_cap, n + 1, sizeof(uint32_t)) || ssd_cold_reserve(s))
        return ssd_fail(s, EMBER_ENOMEM, "%s: out of memory for staging %lld rows", s->label, (long long)n);
    /* pass 1: each row's slot (misses and dropped rows: SSD_NONE for now),
     * then the hits are pinned where they are, their bookkeeping asked for
     * ahead */
    int64_t nm = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i + SSD_AHEAD < n && rows[i + SSD_AHEAD] != EMBER_ROW_DROPPED)
            ssd_map_prefetch(s, rows[i + SSD_AHEAD]);
        uint32_t r = rows[i];
        int64_t x = r == EMBER_ROW_DROPPED ? -1 : ssd_map_find(s, r);
        slots[i] = x < 0 ? SSD_NONE : (uint32_t)x;
        if (x < 0 && r != EMBER_ROW_DROPPED) {
            s->miss[nm] = i;
            s->miss_row[nm++] = r;
        }
    }
    for (int64_t i = 0; i < n; i++) {
        ssd_slots_ahead(s, slots, i, n);
        uint32_t x = slots[i];
        if (x != SSD_NONE && !(s->flags[x] & F_PINNED))
            ssd_pin(s, (int32_t)x);
    }
    if (nm == 0)
        return EMBER_OK;
    /* pass 2: a slot per distinct missing row (none of this step's rows can
     * be a victim: they are all pinned) */
    s->miss[nm] = -1;
    if (job_reserve(s, nm))
        return ssd_fail(s, EMBER_ENOMEM, "%s: out of memory for %lld loads", s->label, (long long)nm);
    for (int64_t k = 0; k < nm; k++) {
        int64_t x = ssd_map_find(s, s->miss_row[k]);
        if (x < 0) {
            if (claim(s, s->miss_row[k], INT64_MIN) < 0)
                return too_small(s, k);
            x = s->job.slot[s->job.n - 1];
        }
        slots[s->miss[k]] = (uint32_t)x;
    }
    double t0 = ssd_now();
    if ((st = job_requests(s)) != EMBER_OK)
        return st;
    ember_io_run(s->io, s->fd, s->job.req, s->job.nreq);
    s->st.io_seconds += ssd_now() - t0;
    return job_finish(s, 1);
}

/* ------------------------------------------------------------ lookahead */

int ssd_announce(ember_store *bs, const uint32_t *rows, int64_t n, int64_t seq)
{
    ssd_store *s = (ssd_store *)bs;
    if (s->policy != EMBER_CACHE_LOOKAHEAD)
        return EMBER_OK;
    int st = ssd_bg_finish(s);
    if (st != EMBER_OK)
        return st;
    if (s->wlen > 0 && seq != s->seq_cur + s->wlen) /* not the next one: start again */
        ssd_window_to(s, INT64_MAX);
    if (s->wlen == 0)
        s->seq_cur = seq;
    /* the window: the current step's batch and K more (the ring holds 64) */
    if (seq > s->step_now + s->K || s->wlen >= SSD_WINDOW) {
        s->st.ignored_hints++;
        return EMBER_OK;
    }
    int e = (int)((s->seq_cur + s->wlen) % SSD_WINDOW);
    if (ember_reserve((void **)&s->wrows[e], &s->wcap[e], n + 1, sizeof(uint32_t)) ||
        ember_reserve((void **)&s->look, &s->look_cap, n + 1, sizeof(uint32_t)))
        return ssd_fail(s, EMBER_ENOMEM, "%s: out of memory for an announced batch", s->label);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (rows[i] != EMBER_ROW_DROPPED)
            s->wrows[e][m++] = rows[i];
    int sorted = 1; /* the collection hands over sorted distinct rows */
    for (int64_t i = 1; i < m && sorted; i++)
        sorted = s->wrows[e][i - 1] < s->wrows[e][i];
    if (!sorted)
        qsort(s->wrows[e], (size_t)m, sizeof(uint32_t), cmp_u32);
    int64_t u = 0;
    for (int64_t i = 0; i < m; i++)
        if (u == 0 || s->wrows[e][i] != s->wrows[e][u - 1])
            s->wrows[e][u++] = s->wrows[e][i];
    s->wn[e] = u;
    if (ssd_window_add(s, e) != 0) {
        s->wn[e] = 0;
        return ssd_fail(s, EMBER_ENOMEM, "%s: out of memory for an announced batch", s->label);
    }
    s->wlen++;
    int64_t next_n = s->wn[(s->step_now + 1) % SSD_WINDOW];
    if (job_reserve(s, next_n > u ? next_n : u))
        return ssd_fail(s, EMBER_ENOMEM, "%s: out of memory for %lld loads", s->label, (long long)u);
    /* first every resident row of the batch leaves the cold list, so that
     * none of them can be the victim of another row of the same batch (its
     * write-back and its reload would race); the slots first, then their
     * bookkeeping, each asked for ahead */
    ssd_map_find_all(s, s->wrows[e], u, s->look);
    for (int64_t i = 0; i < u; i++) {
        ssd_slots_ahead(s, s->look, i, u);
        uint32_t x = s->look[i];
        if (x == SSD_NONE)
            continue;
        uint64_t had = s->mask[x];
        s->mask[x] |= 1ull << e;
        if (!had && ssd_policy_cold(s, (int32_t)x)) /* cold until now: its next use is this batch */
            ssd_policy_place(s, (int32_t)x);
    }
    /* read the next step's missing rows (announced earlier, or now): one step
     * ahead hides the reads behind this step's backward and dense work, and
     * reading earlier would only take slots from rows needed sooner.  A
     * victim is a cold row, else one needed after that step, farthest first */
    int64_t next = s->step_now + 1;
    if (next >= s->seq_cur && next < s->seq_cur + s->wlen) {
        int ne = (int)(next % SSD_WINDOW);
        for (int64_t i = 0; i < s->wn[ne]; i++) {
            if (i + SSD_AHEAD < s->wn[ne])
                ssd_map_prefetch(s, s->wrows[ne][i + SSD_AHEAD]);
            if (ssd_map_find(s, s->wrows[ne][i]) < 0 && claim(s, s->wrows[ne][i], INT64_MAX) < 0)
                break;
        }
    }
    if (s->job.n == 0)
        return EMBER_OK;
    if ((st = job_requests(s)) != EMBER_OK)
        return st;
    s->job.background = 1;
    ember_io_start(s->io, s->fd, s->job.req, s->job.nreq);
    return EMBER_OK;
}
