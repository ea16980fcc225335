/*
 * ctr_text.c: the text reader of ctr.h: CSV or TSV by a schema
 * (docs/data.md), plain, gzip or zstd (text_stream.c), the Criteo TSV of
 * ctr_source_tsv being one built-in schema.
 *
 * Rank share, design choice: open counts the file's data lines once and
 * rank r of W reads lines [r*N/W, (r+1)*N/W): bad lines count as lines, so
 * every line belongs to exactly one rank and the shares do not depend on
 * the contents.  The pass remembers where every 4096th line starts, so a
 * rank seeks near its first line (a compressed stream is read again from
 * its start, text_stream_seek).  Shuffled (plain text only), a share is
 * read in blocks of 4096 lines in the order of ctr_visits.h, each block
 * from its remembered start: the binary format's order, line for sample.
 *
 * Parsing, design choice: a batch's lines are first copied out of the
 * stream in order, then parsed by `threads` OpenMP threads, each a
 * contiguous run of lines into per-line slots and its own key buffer, then
 * merged in line order: bad lines counted, keys taken `mod rows`, distinct
 * keys counted.  The samples are the same for any thread count.
 *
 * A bad line (wrong field count, a value that does not parse, longer than
 * max_line) is counted, its message kept if it is the first, and skipped,
 * or fails the read under CTR_BAD_FAIL.
 *
 * Bad-line limit, design choice (ctr_source_set_bad_limit): open counts
 * lines but parses none, and a pass that parsed the whole file first would
 * double the cost of every run, so the limit is judged as lines are read,
 * at each bad line counted, in line order (the same for any thread count):
 * more than max_lines bad lines fail the read at once; more than fraction
 * of the lines read fail it too, the lines read counting as at least
 * CTR_BAD_JUDGE_LINES (or the whole share when it is shorter).  A burst
 * of bad lines early in the file is thus judged against the first 4096
 * lines, not against the few read so far, and a file that is mostly bad
 * fails as soon as it is certain that its first 4096 lines are over the
 * fraction: within the first block, before the run is spent.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/ctr_impl.h"
#include "data/ctr_visits.h"
#include "data/key_count.h"
#include "data/text_parse.h"
#include "data/text_stream.h"

#define TEXT_MARK_SHIFT 12 /* a line start remembered every 4096 lines: a shuffled block's start */
#define TEXT_BLOCK (INT64_C(1) << TEXT_MARK_SHIFT)

typedef struct text_impl {
    char *path;
    text_stream *ts;
    ctr_bad_policy policy;
    text_plan plan;
    int32_t threads;
    int64_t lines;          /* data lines in the file                       */
    int64_t first_line;     /* file line number of data line 0 (1 + header) */
    int64_t data_offset;    /* byte where data line 0 starts                */
    int64_t *marks;         /* offset of data line k << TEXT_MARK_SHIFT     */
    int64_t nmarks;
    int64_t begin, end;     /* this rank's lines [begin, end)               */
    int64_t line;           /* index of the next data line to read          */
    int64_t seen;           /* lines below this were counted (rewind)       */
    char rewind_err[400];   /* a rewind that failed: the next read says so  */
    /* the batch's lines, copied out of the stream */
    char *arena;
    int64_t arena_cap;
    int64_t *line_off;      /* [cap + 1] into arena                         */
    unsigned char *overlong;
    int32_t line_cap;
    /* per line of the batch: parse outputs and status */
    float *p_label, *p_dense;
    int32_t *p_lens;
    int64_t *p_first;       /* first key in its thread's buffer             */
    int16_t *p_tid;         /* the thread that parsed it                    */
    int32_t *p_out;         /* its sample in the batch, -1: a bad line       */
    int64_t *p_idoff;       /* where its ids go in the staging buffers      */
    unsigned char *p_bad;
    char (*p_msg)[200];     /* per thread: its first bad line's message    */
    text_why *p_why;        /* per thread: why that line was bad            */
    int64_t *p_msg_line;
    text_ids *tids;         /* [threads]                                    */
    char **scratch;         /* [threads] max_line + 1                       */
    int32_t t_alloc;
    key_count *distinct;    /* [S] while counting                           */
    double max_bad_fraction; /* of the lines read; >= 1: no limit           */
    int64_t max_bad_lines;  /* -1: no limit                                 */
    char first_hint[256];   /* what to do about the first bad line          */
    int32_t rank;
    int shuffled;           /* ctr_source_shuffle: blocks of 4096 lines     */
    ctr_visits v;           /* in the epoch's order                         */
    int64_t counted_epoch;  /* shuffled: the epoch whose lines are counted  */
    text_ids *fkeys;        /* [S] a round's keys of each feature (counting) */
} text_impl;

static void free_distinct(text_impl *t)
{
    if (!t->distinct)
        return;
    for (int32_t f = 0; f < t->plan.S; f++) {
        key_count_free(&t->distinct[f]);
        text_ids_free(&t->fkeys[f]);
    }
    free(t->distinct);
    free(t->fkeys);
    t->distinct = NULL;
    t->fkeys = NULL;
}

/* Per-thread buffers for `threads` threads and per-line slots for n lines. */
static int reserve(ctr_source *s, text_impl *t, int32_t n)
{
    const int32_t D = t->plan.D, S = t->plan.S;
    if (t->t_alloc < t->threads) {
        text_ids *ti = realloc(t->tids, (size_t)t->threads * sizeof *ti);
        char **sc = ti ? realloc(t->scratch, (size_t)t->threads * sizeof *sc) : NULL;
        char (*pm)[200] = sc ? realloc(t->p_msg, (size_t)t->threads * sizeof *pm) : NULL;
        int64_t *pl = pm ? realloc(t->p_msg_line, (size_t)t->threads * sizeof *pl) : NULL;
        text_why *pw = pl ? realloc(t->p_why, (size_t)t->threads * sizeof *pw) : NULL;
        if (ti)
            t->tids = ti;
        if (sc)
            t->scratch = sc;
        if (pm)
            t->p_msg = pm;
        if (pl)
            t->p_msg_line = pl;
        if (pw)
            t->p_why = pw;
        if (!pw)
            return EMBER_ENOMEM;
        for (int32_t i = t->t_alloc; i < t->threads; i++) {
            memset(&t->tids[i], 0, sizeof t->tids[i]);
            t->scratch[i] = malloc((size_t)t->plan.max_line + 2);
            if (!t->scratch[i]) {
                t->t_alloc = i;
                return EMBER_ENOMEM;
            }
        }
        t->t_alloc = t->threads;
    }
    if (n > t->line_cap) {
        void *a = realloc(t->line_off, ((size_t)n + 1) * sizeof(int64_t));
        if (a) t->line_off = a;
        void *b = a ? realloc(t->overlong, (size_t)n) : NULL;
        if (b) t->overlong = b;
        void *c = b ? realloc(t->p_label, (size_t)n * sizeof(float)) : NULL;
        if (c) t->p_label = c;
        void *d = c ? realloc(t->p_dense, ((size_t)n * D + 1) * sizeof(float)) : NULL;
        if (d) t->p_dense = d;
        void *e = d ? realloc(t->p_lens, (size_t)n * S * sizeof(int32_t)) : NULL;
        if (e) t->p_lens = e;
        void *f = e ? realloc(t->p_first, ((size_t)n + 1) * sizeof(int64_t)) : NULL;
        if (f) t->p_first = f;
        void *g = f ? realloc(t->p_bad, (size_t)n) : NULL;
        if (g) t->p_bad = g;
        void *h = g ? realloc(t->p_tid, (size_t)n * sizeof(int16_t)) : NULL;
        if (h) t->p_tid = h;
        void *o = h ? realloc(t->p_out, (size_t)n * sizeof(int32_t)) : NULL;
        if (o) t->p_out = o;
        void *q = o ? realloc(t->p_idoff, (size_t)n * sizeof(int64_t)) : NULL;
        if (q) t->p_idoff = q;
        if (!q)
            return EMBER_ENOMEM;
        t->line_cap = n;
    }
    return ctr_buf_reserve(s, n, 1);
}

/* The next counted line; 0 or -1 with err (read error, or the file shrank). */
static int counted_line(text_impl *t, const char **line, size_t *len, int *overlong, char *err, size_t errlen)
{
    int rc = text_stream_line(t->ts, (size_t)t->plan.max_line, line, len, overlong, err, errlen);
    if (rc < 0)
        return EMBER_EINVAL;
    if (rc == 0)
        return ctr_fail(err, errlen, "%s:%lld: file ends before its %lld counted lines (changed while read?)",
                        t->path, (long long)(t->first_line + t->line), (long long)t->lines);
    return 0;
}

/* Lines [0, n) of the batch, parsed by the threads into the per-line slots. */
static void parse_lines(text_impl *t, int32_t n)
{
    const int32_t D = t->plan.D, S = t->plan.S, T = t->threads;
    for (int32_t i = 0; i < T; i++)
        t->tids[i].n = 0; /* a thread the team lacks leaves its buffer empty */
#pragma omp parallel num_threads(T) if (T > 1 && n > 64)
    {
        int32_t me = omp_get_thread_num(), nt = omp_get_num_threads();
        int32_t lo = (int32_t)((int64_t)n * me / nt), hi = (int32_t)((int64_t)n * (me + 1) / nt);
        text_ids *ids = &t->tids[me];
        ids->n = 0;
        t->p_msg[me][0] = '\0';
        t->p_msg_line[me] = -1;
        for (int32_t i = lo; i < hi; i++) {
            text_why why = {TEXT_BAD_OTHER, -1};
            text_sample o = {&t->p_label[i], &t->p_dense[(int64_t)i * D], NULL, &t->p_lens[(int64_t)i * S], &why};
            char msg[200];
            t->p_first[i] = ids->n;
            t->p_tid[i] = (int16_t)me;
            int bad = 0;
            if (t->overlong[i]) {
                snprintf(msg, sizeof msg, "line longer than %d bytes", (int)t->plan.max_line);
                bad = 1;
            } else {
                bad = text_parse_line(&t->plan, t->arena + t->line_off[i], (size_t)(t->line_off[i + 1] - t->line_off[i]),
                                      t->scratch[me], &o, ids, msg, sizeof msg) != 0;
            }
            t->p_bad[i] = (unsigned char)bad;
            if (bad && t->p_msg_line[me] < 0) {
                memcpy(t->p_msg[me], msg, sizeof msg);
                t->p_msg_line[me] = i;
                t->p_why[me] = why;
            }
        }
    }
}

/* The round's keys into each feature's distinct count, a feature per
 * thread at a time (the counts do not depend on the order); a feature's
 * keys of a line follow the line's earlier features' in its parse buffer. */
static int count_keys(text_impl *t, int32_t max, char *err, size_t errlen)
{
    const int32_t S = t->plan.S;
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(t->threads) if (t->threads > 1) reduction(| : failed)
    for (int32_t f = 0; f < S; f++) {
        text_ids *fk = &t->fkeys[f];
        int64_t total = 0;
        for (int32_t i = 0; i < max; i++)
            total += t->p_bad[i] ? 0 : t->p_lens[(int64_t)i * S + f];
        fk->n = 0;
        if (text_ids_reserve(fk, total, 0)) {
            failed = 1;
            continue;
        }
        for (int32_t i = 0; i < max; i++) {
            if (t->p_bad[i])
                continue;
            const int32_t *lens = &t->p_lens[(int64_t)i * S];
            const int64_t *keys = t->tids[t->p_tid[i]].keys + t->p_first[i];
            for (int32_t g = 0; g < f; g++)
                keys += lens[g];
            for (int32_t j = 0; j < lens[f]; j++)
                fk->keys[fk->n++] = keys[j];
        }
        if (!failed)
            failed |= key_count_add(&t->distinct[f], fk->keys, fk->n) != 0;
    }
    return failed ? ctr_fail(err, errlen, "%s: out of memory counting distinct keys", t->path) : 0;
}

/* 1 with err when the bad lines counted so far are past the limit (the
 * file comment's rule), else 0. */
static int over_limit(const ctr_source *s, const text_impl *t, char *err, size_t errlen)
{
    const int64_t bad = s->stats.bad_lines, lines = s->stats.lines, share = t->end - t->begin;
    char what[160];
    if (t->max_bad_lines >= 0 && bad > t->max_bad_lines) {
        snprintf(what, sizeof what, "more than data.max_bad_lines = %lld", (long long)t->max_bad_lines);
    } else {
        int64_t judge = share < CTR_BAD_JUDGE_LINES ? share : CTR_BAD_JUDGE_LINES;
        if (lines > judge)
            judge = lines;
        if (t->max_bad_fraction >= 1 || !((double)bad > t->max_bad_fraction * (double)judge))
            return 0;
        snprintf(what, sizeof what, "more than data.max_bad_fraction = %g of %lld lines", t->max_bad_fraction,
                 (long long)judge);
    }
    ctr_fail(err, errlen, "%s: %lld bad lines in the first %lld read: %s; the first: %s; %s (or allow more: "
             "data.max_bad_fraction, data.max_bad_lines)", t->path, (long long)bad, (long long)lines, what,
             s->stats.first_bad, t->first_hint);
    return 1;
}

/* One round of text_next: the next `max` lines read, parsed and their good
 * samples staged after the *n samples and *k ids staged so far. */
static int next_round(ctr_source *s, text_impl *t, int32_t max, int32_t *np, int64_t *kp, int64_t *firstp, char *err,
                      size_t errlen)
{
    /* copy the lines out of the stream */
    const int64_t line0 = t->line;
    int64_t used = 0;
    for (int32_t i = 0; i < max; i++) {
        const char *p;
        size_t len;
        int over;
        if (counted_line(t, &p, &len, &over, err, errlen))
            return EMBER_EINVAL;
        if (used + (int64_t)len + 1 > t->arena_cap) {
            int64_t cap = t->arena_cap ? t->arena_cap : 1 << 16; /* grows by doubling */
            while (cap < used + (int64_t)len + 1)
                cap *= 2;
            char *a = realloc(t->arena, (size_t)cap);
            if (!a)
                return ctr_fail(err, errlen, "%s: out of memory", t->path);
            t->arena = a;
            t->arena_cap = cap;
        }
        t->line_off[i] = used;
        memcpy(t->arena + used, p, len);
        used += (int64_t)len;
        t->line_off[i + 1] = used;
        t->overlong[i] = (unsigned char)over;
        t->line++;
    }
    parse_lines(t, max);
    /* merge in line order */
    int64_t nids = *kp, first = *firstp;
    for (int32_t me = 0; me < t->threads; me++)
        nids += t->tids[me].n;
    if (ctr_buf_reserve_ids(s, nids, 1))
        return ctr_fail(err, errlen, "%s: out of memory for %lld ids", t->path, (long long)nids);
    const int32_t D = t->plan.D, S = t->plan.S;
    const int weighted = t->plan.any_weighted;
    int32_t n = *np;
    int64_t k = *kp;
    for (int32_t i = 0; i < max; i++) {
        const int32_t me = t->p_tid[i];
        int64_t line = line0 + i, fileline = t->first_line + line;
        int fresh = t->shuffled ? s->epochs == t->counted_epoch : line >= t->seen;
        if (fresh) {
            s->stats.lines++;
            if (!t->shuffled)
                t->seen = line + 1;
        }
        if (t->p_bad[i]) {
            const char *msg = t->p_msg_line[me] == i ? t->p_msg[me] : NULL;
            text_why why = msg ? t->p_why[me] : (text_why){TEXT_BAD_OTHER, -1};
            char again[200];
            if (!msg) { /* not its thread's first: parse it again for the message */
                text_sample o = {&t->p_label[i], &t->p_dense[(int64_t)i * D], NULL, &t->p_lens[(int64_t)i * S],
                                 &why};
                text_ids tmp = {0};
                if (t->overlong[i])
                    snprintf(again, sizeof again, "line longer than %d bytes", (int)t->plan.max_line);
                else
                    text_parse_line(&t->plan, t->arena + t->line_off[i],
                                    (size_t)(t->line_off[i + 1] - t->line_off[i]), t->scratch[0], &o, &tmp, again,
                                    sizeof again);
                text_ids_free(&tmp);
                msg = again;
            }
            if (!strcmp(msg, "out of memory"))
                return ctr_fail(err, errlen, "%s:%lld: out of memory", t->path, (long long)fileline);
            if (fresh) {
                s->stats.bad_lines++;
                if (!s->stats.first_bad[0]) {
                    snprintf(s->stats.first_bad, sizeof s->stats.first_bad, "%s:%lld: %s", t->path,
                             (long long)fileline, msg);
                    text_bad_hint(&t->plan, &why, t->first_hint, sizeof t->first_hint);
                }
            }
            if (t->policy == CTR_BAD_FAIL)
                return ctr_fail(err, errlen, "%s:%lld: %s", t->path, (long long)fileline, msg);
            if (fresh && over_limit(s, t, err, errlen))
                return EMBER_EINVAL;
            continue;
        }
        if (first < 0)
            first = line;
        t->p_out[i] = n++;
        t->p_idoff[i] = k;
        for (int32_t f = 0; f < S; f++)
            k += t->p_lens[(int64_t)i * S + f];
    }
    /* the good lines into the staging buffers, in parallel: each line's place is known */
#pragma omp parallel for schedule(static) num_threads(t->threads) if (t->threads > 1 && max > 64)
    for (int32_t i = 0; i < max; i++) {
        if (t->p_bad[i])
            continue;
        const int32_t o = t->p_out[i];
        s->line_no[o] = t->first_line + line0 + i;
        s->label[o] = t->p_label[i];
        memcpy(s->dense + (int64_t)o * D, t->p_dense + (int64_t)i * D, (size_t)D * sizeof(float));
        memcpy(s->stage_len + (int64_t)o * S, t->p_lens + (int64_t)i * S, (size_t)S * sizeof(int32_t));
        const text_ids *ids = &t->tids[t->p_tid[i]];
        int64_t at = t->p_first[i], to = t->p_idoff[i];
        for (int32_t f = 0; f < S; f++) {
            int32_t len = t->p_lens[(int64_t)i * S + f];
            const int64_t rows = s->schema.rows[f];
            for (int32_t j = 0; j < len; j++, at++, to++) {
                s->stage_ids[to] = text_id(ids->keys[at], rows);
                if (weighted)
                    s->stage_w[to] = ids->w[at];
            }
        }
    }
    *np = n;
    *kp = k;
    *firstp = first;
    return t->distinct ? count_keys(t, max, err, errlen) : 0;
}

static int goto_line(text_impl *t, int64_t next, char *err, size_t errlen);

static int64_t text_next(ctr_source *s, int32_t max, char *err, size_t errlen)
{
    text_impl *t = s->impl;
    if (t->rewind_err[0]) /* the file could not be read again from this rank's start */
        return ctr_fail(err, errlen, "%s", t->rewind_err);
    int64_t left = t->shuffled ? (t->end - t->begin) - t->v.lpos : t->end - t->line;
    if (left < max)
        max = (int32_t)left;
    if (max <= 0)
        return 0;
    if (reserve(s, t, max))
        return ctr_fail(err, errlen, "%s: out of memory for %d samples", t->path, (int)max);
    int32_t n = 0;
    int64_t k = 0, first = -1;
    while (n < max && left > 0) { /* skipped bad lines: read on */
        int32_t want = max - n;
        if (t->shuffled) { /* consecutive lines of one block at a time, from the ordinal's line */
            int64_t item = ctr_visits_item(&t->v), in_block = ctr_visits_left_in_block(&t->v);
            if (item != t->line && goto_line(t, item, err, errlen))
                return EMBER_EINVAL;
            if (in_block < want)
                want = (int32_t)in_block;
        }
        if (left < want)
            want = (int32_t)left;
        if (next_round(s, t, want, &n, &k, &first, err, errlen))
            return EMBER_EINVAL;
        left -= want;
        if (t->shuffled)
            t->v.lpos += want;
    }
    if (n > 0 && ctr_buf_transpose(s, n, k))
        return ctr_fail(err, errlen, "%s: out of memory for %lld ids", t->path, (long long)k);
    s->batch_first = first;
    return n;
}

/* Past the next line without keeping it: 1, 0 at the end, -1 with err. */
static int skip_line(text_impl *t, char *err, size_t errlen)
{
    const char *p;
    size_t len;
    int over;
    return text_stream_line(t->ts, 0, &p, &len, &over, err, errlen);
}

static int text_seek(ctr_source *s, int64_t next, char *err, size_t errlen);

static void text_rewind(ctr_source *s)
{
    text_impl *t = s->impl;
    t->rewind_err[0] = '\0';
    if (t->shuffled) { /* the new epoch's order (ctr.c counted it first); its lines were counted before */
        ctr_visits_start(&t->v, s->epochs, 0);
        return;
    }
    if (text_seek(s, t->begin, t->rewind_err, sizeof t->rewind_err) && !t->rewind_err[0])
        snprintf(t->rewind_err, sizeof t->rewind_err, "%s: rewind failed", t->path);
}

static void text_destroy(ctr_source *s)
{
    text_impl *t = s->impl;
    if (!t)
        return;
    text_stream_close(t->ts);
    free_distinct(t); /* before the plan: its S sizes them */
    text_plan_free(&t->plan);
    for (int32_t i = 0; i < t->t_alloc; i++) {
        text_ids_free(&t->tids[i]);
        free(t->scratch[i]);
    }
    free(t->tids);
    free(t->scratch);
    free(t->p_msg);
    free(t->p_msg_line);
    free(t->p_why);
    free(t->arena);
    free(t->line_off);
    free(t->overlong);
    free(t->p_label);
    free(t->p_dense);
    free(t->p_lens);
    free(t->p_first);
    free(t->p_bad);
    free(t->p_tid);
    free(t->p_out);
    free(t->p_idoff);
    free(t->marks);
    ctr_visits_free(&t->v);
    free(t->path);
    free(t);
}

static void text_tell(const ctr_source *s, ctr_position *out)
{
    const text_impl *t = s->impl;
    out->next = t->shuffled ? t->begin + t->v.lpos : t->line; /* shuffled: the ordinal in the epoch's order */
    out->begin = t->begin;
    out->end = t->end;
}

/* To data line `next` of the share, reading the lines before it unparsed. */
/* The stream at data line `next` (from its block's mark, skipping the
 * lines before it); t->line set only once there. */
static int goto_line(text_impl *t, int64_t next, char *err, size_t errlen)
{
    int64_t mk = next >> TEXT_MARK_SHIFT;
    if (mk >= t->nmarks)
        mk = t->nmarks - 1;
    int64_t line = mk >= 0 ? mk << TEXT_MARK_SHIFT : 0;
    if (text_stream_seek(t->ts, mk >= 0 ? t->marks[mk] : t->data_offset, t->first_line - 1 + line, err, errlen))
        return EMBER_EINVAL;
    while (line < next) {
        int rc = skip_line(t, err, errlen);
        if (rc < 0)
            return EMBER_EINVAL;
        if (rc == 0)
            return ctr_fail(err, errlen, "%s: file ends before line %lld (changed while read?)", t->path,
                            (long long)(t->first_line + next));
        line++;
    }
    t->line = line;
    return 0;
}

static int text_seek(ctr_source *s, int64_t next, char *err, size_t errlen)
{
    text_impl *t = s->impl;
    if (next < t->begin || next > t->end)
        return ctr_fail(err, errlen, "%s: position: line %lld is outside this rank's lines %lld to %lld", t->path,
                        (long long)(t->first_line + next), (long long)(t->first_line + t->begin),
                        (long long)(t->first_line + t->end - 1));
    if (t->shuffled) { /* that epoch's order (ctr.c set it first) from that ordinal: read there next */
        ctr_visits_start(&t->v, s->epochs, next - t->begin);
        t->counted_epoch = s->epochs; /* a resumed run counts the lines it reads from here */
        t->rewind_err[0] = '\0';
        return 0;
    }
    if (goto_line(t, next, err, errlen))
        return EMBER_EINVAL;
    if (t->seen < next)
        t->seen = next; /* lines skipped here are not counted as read */
    t->rewind_err[0] = '\0';
    return 0;
}

/* Plain text only: a compressed stream seeks by reading again from its
 * start, which every block of every epoch would pay. */
static int text_shuffle(ctr_source *s, uint64_t seed, char *err, size_t errlen)
{
    text_impl *t = s->impl;
    if (text_stream_kind(t->ts) != TEXT_PLAIN)
        return ctr_fail(err, errlen, "%s: a %s file cannot be shuffled (each block would read the stream again "
                        "from its start): decompress it, or ember convert it to the binary format", t->path,
                        text_stream_kind(t->ts) == TEXT_GZIP ? "gzip" : "zstd");
    if (ctr_visits_init(&t->v, seed, t->rank, t->begin, t->end, TEXT_BLOCK, s->epochs))
        return ctr_fail(err, errlen, "%s: out of memory for the order of its blocks", t->path);
    t->shuffled = 1; /* the current epoch from its start */
    t->counted_epoch = s->epochs;
    return 0;
}

static const ctr_source_ops TEXT_OPS = {text_next, text_rewind, text_destroy, text_tell, text_seek, text_shuffle};

/* Counts the data lines from data_offset on, remembering every 2^16th. */
static int count_lines(text_impl *t, char *err, size_t errlen)
{
    int64_t cap = 0;
    t->lines = 0;
    for (;;) {
        int64_t off = text_stream_tell(t->ts);
        int rc = skip_line(t, err, errlen);
        if (rc < 0)
            return EMBER_EINVAL;
        if (rc == 0)
            break;
        if ((t->lines & ((INT64_C(1) << TEXT_MARK_SHIFT) - 1)) == 0) {
            if (t->nmarks == cap) {
                cap = cap ? 2 * cap : 64;
                int64_t *q = realloc(t->marks, (size_t)cap * sizeof *q);
                if (!q)
                    return ctr_fail(err, errlen, "%s: out of memory", t->path);
                t->marks = q;
            }
            t->marks[t->nmarks++] = off;
        }
        t->lines++;
    }
    return 0;
}

/* Mean and std of the standardize columns without them, by Welford over
 * the good lines of the whole file in order (every rank alike). */
static int compute_stats(text_impl *t, char *err, size_t errlen)
{
    text_plan *p = &t->plan;
    int32_t need = 0;
    for (int32_t c = 0; c < p->num_columns; c++)
        if ((p->cols[c].type == CTR_COL_INT || p->cols[c].type == CTR_COL_FLOAT) &&
            p->cols[c].transform == CTR_TF_STANDARDIZE && !p->cols[c].has_stats) {
            p->cols[c].mean = 0;
            p->cols[c].std = 1;
            need++;
        }
    if (!need)
        return 0;
    const int32_t D = p->D, S = p->S;
    double *raw = malloc(((size_t)D + 1) * sizeof *raw), *mean = calloc((size_t)D + 1, sizeof *mean),
           *m2 = calloc((size_t)D + 1, sizeof *m2);
    float *dense = malloc(((size_t)D + 1) * sizeof *dense), label;
    int32_t *lens = malloc((size_t)S * sizeof *lens);
    char *scratch = malloc((size_t)p->max_line + 2), msg[200];
    text_ids ids = {0};
    int64_t good = 0;
    int rc = EMBER_EINVAL;
    if (!raw || !mean || !m2 || !dense || !lens || !scratch) {
        ctr_fail(err, errlen, "%s: out of memory", t->path);
        goto out;
    }
    if (text_stream_seek(t->ts, t->data_offset, t->first_line - 1, err, errlen))
        goto out;
    for (;;) {
        const char *line;
        size_t len;
        int over;
        int r = text_stream_line(t->ts, (size_t)p->max_line, &line, &len, &over, err, errlen);
        if (r < 0)
            goto out;
        if (r == 0)
            break;
        text_sample o = {&label, dense, raw, lens, NULL};
        ids.n = 0;
        if (over || text_parse_line(p, line, len, scratch, &o, &ids, msg, sizeof msg))
            continue;
        good++;
        for (int32_t c = 0; c < p->num_columns; c++) {
            const ctr_column *k = &p->cols[c];
            if (!((k->type == CTR_COL_INT || k->type == CTR_COL_FLOAT) && k->transform == CTR_TF_STANDARDIZE &&
                  !k->has_stats))
                continue;
            int32_t d = p->col_out[c];
            double x = raw[d], dd = x - mean[d];
            mean[d] += dd / (double)good;
            m2[d] += dd * (x - mean[d]);
        }
    }
    for (int32_t c = 0; c < p->num_columns; c++) {
        ctr_column *k = &p->cols[c];
        if (!((k->type == CTR_COL_INT || k->type == CTR_COL_FLOAT) && k->transform == CTR_TF_STANDARDIZE &&
              !k->has_stats))
            continue;
        int32_t d = p->col_out[c];
        double sd = good > 0 ? sqrt(m2[d] / (double)good) : 0;
        if (!(sd > 0)) {
            ctr_fail(err, errlen, "%s: column %s: standardize: %s; give its mean and std in the schema", t->path,
                     k->name, good ? "every value is the same (std 0)" : "the file has no good line");
            goto out;
        }
        k->mean = mean[d];
        k->std = sd;
    }
    rc = 0;
out:
    free(raw);
    free(mean);
    free(m2);
    free(dense);
    free(lens);
    free(scratch);
    text_ids_free(&ids);
    return rc;
}

/* Whether a first line names at least half the columns a line must give
 * (the label's and ignored ones aside; 1 when out of memory, which is
 * then the header's own message). */
static int names_half(const text_plan *p, const char *line, size_t len)
{
    enum { CAP = 4 * CTR_MAX_COLUMNS };
    const char **fs = malloc(CAP * sizeof *fs);
    size_t *fl = malloc(CAP * sizeof *fl);
    char *scratch = malloc(len + 1), msg[200];
    int n = fs && fl && scratch ? text_split(p, line, len && line[len - 1] == '\r' ? len - 1 : len, scratch, fs, fl,
                                             CAP, msg, sizeof msg)
                                : -2;
    int32_t need = 0, named = 0;
    for (int32_t c = 0; n >= 0 && c < p->num_columns; c++) {
        if (p->cols[c].type == CTR_COL_IGNORE || p->cols[c].type == CTR_COL_LABEL)
            continue;
        need++;
        size_t nl = strlen(p->cols[c].name);
        for (int i = 0; i < n && i < CAP; i++)
            if (fl[i] == nl && !memcmp(fs[i], p->cols[c].name, nl)) {
                named++;
                break;
            }
    }
    free(fs);
    free(fl);
    free(scratch);
    return n == -2 || (need > 0 && 2 * named >= need);
}

/* The training file's header fields as one header line (CSV-quoted where
 * a name needs it); NULL out of memory. */
static char *fields_line(const ctr_text_schema *sc, size_t *len)
{
    size_t cap = 1;
    for (int32_t k = 0; k < sc->num_file_fields; k++)
        cap += 2 * strlen(sc->file_fields[k]) + 3;
    char *line = malloc(cap), *o = line;
    for (int32_t k = 0; line && k < sc->num_file_fields; k++) {
        const char *f = sc->file_fields[k];
        int quote = sc->delimiter == ',' && strpbrk(f, ",\"\r") != NULL;
        if (k)
            *o++ = sc->delimiter;
        if (quote)
            *o++ = '"';
        for (; *f; f++) {
            if (quote && *f == '"')
                *o++ = '"';
            *o++ = *f;
        }
        if (quote)
            *o++ = '"';
    }
    if (line)
        *len = (size_t)(o - line);
    return line;
}

/* A first line that is not the header the schema expects, in a file to
 * score: the file has none.  Its lines hold the training file's fields in
 * order (the schema's columns when those are not known). */
static int no_header(text_impl *t, const ctr_text_schema *schema, int64_t start, char *err, size_t errlen)
{
    ctr_text_schema sc = *schema;
    sc.header = sc.num_file_fields > 0;
    text_plan_free(&t->plan);
    if (text_plan_init(&t->plan, &sc, t->path, err, errlen))
        return EMBER_EINVAL;
    if (sc.header) { /* bound as by the training file's header */
        size_t len = 0;
        char *line = fields_line(&sc, &len);
        int rc = line ? text_plan_header(&t->plan, line, len, t->path, err, errlen)
                      : ctr_fail(err, errlen, "%s: out of memory", t->path);
        free(line);
        if (rc)
            return EMBER_EINVAL;
        snprintf(t->plan.expect, sizeof t->plan.expect, "the training file's fields");
    }
    err[0] = '\0';
    return text_stream_seek(t->ts, start, 0, err, errlen) ? EMBER_EINVAL : 0;
}

/* Without a header, whether the file's first line lacks the label field
 * (one field fewer than the schema's columns): the plan then reads every
 * line without it.  The stream is put back at the first data line. */
static int first_line_unlabeled(text_impl *t, char *err, size_t errlen)
{
    const char *line;
    size_t len;
    int over;
    int rc = text_stream_line(t->ts, (size_t)t->plan.max_line, &line, &len, &over, err, errlen);
    if (rc < 0)
        return EMBER_EINVAL;
    if (rc == 1 && !over) {
        if (len > 0 && line[len - 1] == '\r')
            len--;
        char msg[200], *scratch = malloc(len + 1);
        if (!scratch)
            return ctr_fail(err, errlen, "%s: out of memory", t->path);
        int n = text_split(&t->plan, line, len, scratch, NULL, NULL, 0, msg, sizeof msg);
        free(scratch);
        if (n == t->plan.nfields - 1 && text_plan_drop_label(&t->plan))
            return ctr_fail(err, errlen, "%s: out of memory", t->path);
    }
    return text_stream_seek(t->ts, t->data_offset, t->first_line - 1, err, errlen) ? EMBER_EINVAL : 0;
}

int ctr_source_text(const char *path, const ctr_text_schema *schema, ctr_bad_policy policy, int32_t rank,
                    int32_t world, ctr_source **out, char *err, size_t errlen)
{
    if (out)
        *out = NULL;
    if (!path || !schema || !out)
        return ctr_fail(err, errlen, "ctr_source_text: path, schema and out must not be NULL");
    if (ctr_check_world(path, rank, world, err, errlen))
        return EMBER_EINVAL;
    if (policy != CTR_BAD_SKIP && policy != CTR_BAD_FAIL)
        return ctr_fail(err, errlen, "%s: bad-line policy %d is neither skip nor fail", path, (int)policy);
    text_impl *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(path))) {
        free(t);
        return ctr_fail(err, errlen, "%s: out of memory", path);
    }
    t->policy = policy;
    t->rank = rank;
    t->threads = 1;
    t->max_bad_fraction = 1;
    t->max_bad_lines = -1;
    ctr_source *s = NULL;
    if (text_plan_init(&t->plan, schema, path, err, errlen)) {
        free(t->path);
        free(t);
        return EMBER_EINVAL;
    }
    ctr_schema sc;
    memset(&sc, 0, sizeof sc);
    sc.num_dense = t->plan.D;
    sc.num_sparse = t->plan.S;
    for (int32_t c = 0; c < t->plan.num_columns; c++) {
        const ctr_column *k = &t->plan.cols[c];
        if (k->type == CTR_COL_LABEL)
            sc.float_label = k->float_label;
        if (k->type != CTR_COL_CATEGORICAL && k->type != CTR_COL_MULTI_HOT)
            continue;
        int32_t f = t->plan.col_out[c];
        sc.rows[f] = k->rows;
        sc.weighted[f] = (unsigned char)(k->type == CTR_COL_MULTI_HOT && k->weighted);
        snprintf(sc.names[f], sizeof sc.names[f], "%s", k->name);
    }
    if (!(s = ctr_source_alloc(&TEXT_OPS, t, &sc))) {
        text_plan_free(&t->plan);
        free(t->path);
        free(t);
        return ctr_fail(err, errlen, "%s: out of memory", path);
    }
    if (!(s->line_no = malloc(sizeof(int64_t) * ((size_t)s->cap + 1)))) { /* grown with the batch */
        ctr_fail(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    if (text_stream_open(path, &t->ts, err, errlen))
        goto fail;
    t->first_line = 1;
    const int64_t start = text_stream_tell(t->ts);
    if (t->plan.header) {
        const char *line;
        size_t len;
        int over;
        int rc = text_stream_line(t->ts, (size_t)t->plan.max_line, &line, &len, &over, err, errlen);
        if (rc < 0)
            goto fail;
        if (rc == 0) {
            ctr_fail(err, errlen, "%s: the file is empty, the schema expects a header line", path);
            goto fail;
        }
        if (over) {
            ctr_fail(err, errlen, "%s:1: header longer than %d bytes", path, (int)t->plan.max_line);
            goto fail;
        }
        if (text_plan_header(&t->plan, line, len, path, err, errlen)) {
            /* a line naming half the columns or more is a header with a column missing (err names it) */
            if (!schema->header_optional || names_half(&t->plan, line, len) || no_header(t, schema, start, err, errlen))
                goto fail;
        } else {
            t->first_line = 2;
        }
    }
    t->data_offset = text_stream_tell(t->ts);
    if (t->first_line == 1 && t->plan.label_optional && first_line_unlabeled(t, err, errlen))
        goto fail;
    s->schema.unlabeled = t->plan.unlabeled;
    if (count_lines(t, err, errlen) || compute_stats(t, err, errlen))
        goto fail;
    t->begin = ctr_share_begin(t->lines, rank, world);
    t->end = ctr_share_begin(t->lines, rank + 1, world);
    t->seen = t->begin;
    if (text_seek(s, t->begin, err, errlen))
        goto fail;
    t->seen = t->begin;
    *out = s;
    return 0;
fail:
    ctr_source_destroy(s);
    return EMBER_EINVAL;
}

int32_t ctr_source_text_fields(const ctr_source *s, const char *const **names)
{
    *names = NULL;
    if (!s || s->ops != &TEXT_OPS || ((const text_impl *)s->impl)->first_line != 2)
        return 0;
    const text_plan *p = &((const text_impl *)s->impl)->plan;
    *names = (const char *const *)p->header_names;
    return p->header_names ? p->nfields : 0;
}

int ctr_source_text_header(const ctr_source *s)
{
    return s && s->ops == &TEXT_OPS && ((const text_impl *)s->impl)->first_line == 2;
}

void ctr_source_set_threads(ctr_source *s, int32_t threads)
{
    if (s && s->ops == &TEXT_OPS)
        ((text_impl *)s->impl)->threads = threads < 1 ? 1 : threads > 256 ? 256 : threads;
}

void ctr_source_set_bad_limit(ctr_source *s, double max_fraction, int64_t max_lines)
{
    if (!s || s->ops != &TEXT_OPS)
        return;
    text_impl *t = s->impl;
    t->max_bad_fraction = max_fraction;
    t->max_bad_lines = max_lines;
}

int ctr_source_text_stats(const ctr_source *s, int32_t column, double *mean, double *std)
{
    if (!s || s->ops != &TEXT_OPS)
        return EMBER_EINVAL;
    const text_plan *p = &((const text_impl *)s->impl)->plan;
    if (column < 0 || column >= p->num_columns || p->cols[column].transform != CTR_TF_STANDARDIZE ||
        (p->cols[column].type != CTR_COL_INT && p->cols[column].type != CTR_COL_FLOAT))
        return EMBER_EINVAL;
    *mean = p->cols[column].mean;
    *std = p->cols[column].std;
    return 0;
}

int ctr_source_count_keys(ctr_source *s, char *err, size_t errlen)
{
    if (!s || s->ops != &TEXT_OPS)
        return ctr_fail(err, errlen, "counting distinct keys needs a text source");
    text_impl *t = s->impl;
    if (t->distinct)
        return 0;
    t->distinct = calloc((size_t)t->plan.S, sizeof *t->distinct);
    t->fkeys = calloc((size_t)t->plan.S, sizeof *t->fkeys);
    if (!t->distinct || !t->fkeys) {
        free(t->distinct);
        free(t->fkeys);
        t->distinct = NULL;
        t->fkeys = NULL;
        return ctr_fail(err, errlen, "%s: out of memory", t->path);
    }
    for (int32_t f = 0; f < t->plan.S; f++)
        key_count_init(&t->distinct[f], CTR_DISTINCT_CAP);
    return 0;
}

int64_t ctr_source_distinct_keys(const ctr_source *s, int32_t f)
{
    if (!s || s->ops != &TEXT_OPS)
        return -1;
    const text_impl *t = s->impl;
    if (!t->distinct || f < 0 || f >= t->plan.S)
        return -1;
    return key_count_get(&t->distinct[f]);
}

void ctr_text_schema_criteo(const int64_t *rows, ctr_column *cols, ctr_text_schema *out)
{
    memset(cols, 0, 40 * sizeof *cols);
    snprintf(cols[0].name, sizeof cols[0].name, "label");
    cols[0].type = CTR_COL_LABEL;
    for (int k = 1; k <= 13; k++) {
        snprintf(cols[k].name, sizeof cols[k].name, "I%d", k);
        cols[k].type = CTR_COL_INT;
        cols[k].transform = CTR_TF_LOG1P;
    }
    for (int f = 0; f < 26; f++) {
        ctr_column *c = &cols[14 + f];
        snprintf(c->name, sizeof c->name, "C%d", f + 1);
        c->type = CTR_COL_CATEGORICAL;
        c->encoding = CTR_ENC_HEX;
        c->rows = rows[f];
    }
    memset(out, 0, sizeof *out);
    out->delimiter = '\t';
    out->header = 0;
    out->max_line = 4096;
    out->num_columns = 40;
    out->columns = cols;
    out->expect = "label, I1..I13, C1..C26";
}

int ctr_source_tsv(const char *path, const int64_t *rows, ctr_bad_policy policy, int32_t rank, int32_t world,
                   ctr_source **out, char *err, size_t errlen)
{
    if (out)
        *out = NULL;
    if (!path || !rows || !out)
        return ctr_fail(err, errlen, "ctr_source_tsv: path, rows and out must not be NULL");
    ctr_column cols[40]; /* the schema's checks name a bad rows value */
    ctr_text_schema sc;
    ctr_text_schema_criteo(rows, cols, &sc);
    return ctr_source_text(path, &sc, policy, rank, world, out, err, errlen);
}
