/*
 * train_overrides.c: the trainer's overrides (include/ember-train.h): all
 * unset, one set from text by its option name, and the whole checked.  One
 * table holds every numeric override's range, so `ember train --steps`,
 * Python's steps= and a struct filled by hand meet the same limits.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_read.h"
#include "config/train_settings.h"

typedef struct int_override {
    const char *name;            /* the option without its dashes            */
    int64_t lo, hi;
    size_t off;
    int wide;                    /* 1: int64_t, 0: int32_t                   */
} int_override;

#define I64(n, lo, hi, f) {n, lo, hi, offsetof(ember_train_overrides, f), 1}
#define I32(n, lo, hi, f) {n, lo, hi, offsetof(ember_train_overrides, f), 0}
static const int_override INTS[] = {
    I64("steps", 0, INT64_C(1) << 40, steps),
    I64("seed", 0, INT64_MAX, seed),
    I32("threads", 1, 4096, threads),
    I32("blas-threads", 1, 4096, blas_threads),
    I32("micro-batch", 1, 1 << 24, micro_batch),
    I32("accumulate", 1, 1 << 16, accumulate),
    I32("optimizer-shards", 0, 1 << 20, optimizer_shards),
    I64("lr-warmup", 0, INT64_C(1) << 40, lr_warmup),
    I64("eval-every", 0, INT64_C(1) << 40, eval_every),
    I64("eval-samples", 0, 1 << 30, eval_samples),
    I64("checkpoint-every", 0, INT64_C(1) << 40, checkpoint_every),
    I32("keep", 0, 1 << 20, keep),
};
#define NINTS (sizeof INTS / sizeof INTS[0])

#define STR(n, f) {n, offsetof(ember_train_overrides, f)}
static const struct { const char *name; size_t off; } STRS[] = {
    STR("train-file", train_file), STR("eval-file", eval_file), STR("checkpoint-dir", checkpoint_dir),
    STR("metrics", metrics),       STR("plot", plot),           STR("schedule", schedule),
    STR("lr-decay", lr_decay),     STR("precision", precision),  STR("rounding", rounding),
    STR("state-precision", state_precision),
    STR("reader", reader),
};

static int64_t get_int(const ember_train_overrides *o, const int_override *x)
{
    const char *p = (const char *)o + x->off;
    return x->wide ? *(const int64_t *)p : *(const int32_t *)p;
}

static void put_int(ember_train_overrides *o, const int_override *x, int64_t v)
{
    char *p = (char *)o + x->off;
    if (x->wide)
        *(int64_t *)p = v;
    else
        *(int32_t *)p = (int32_t)v;
}

/* "micro-batch" and "micro_batch" alike. */
static int same_name(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (*a != *b && !((*a == '-' || *a == '_') && (*b == '-' || *b == '_')))
            return 0;
    return *a == *b;
}

static int decay_ok(const char *v)
{
    return !strcmp(v, "none") || !strcmp(v, "linear") || !strcmp(v, "cosine");
}

void ember_train_overrides_init(ember_train_overrides *o)
{
    memset(o, 0, sizeof *o);
    for (size_t k = 0; k < NINTS; k++)
        put_int(o, &INTS[k], -1);
}

/* A whole decimal integer ("0x" before it: hexadecimal), no blanks, no
 * junk after it, in int64_t's range: 0 and *out, or -1. */
static int parse_int(const char *v, long long *out)
{
    const char *p = v + (*v == '-');
    if (!isdigit((unsigned char)*p))
        return EMBER_EINVAL;
    int hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
    if (hex && !isxdigit((unsigned char)p[2]))
        return EMBER_EINVAL;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, hex ? 16 : 10);
    if (errno == ERANGE || end == v || *end)
        return EMBER_EINVAL;
    *out = x;
    return 0;
}

/* Why a value is bad for an option, as data: the reason without the
 * option's name or the value ("a value is needed", "not an integer in
 * 0..9"), and whether a message quotes the value before it. */
typedef struct bad_value {
    const char *option;          /* the option's own name; NULL: no option  */
    int quoted;                  /* "option: 'value' is <reason>"           */
    char reason[160];
} bad_value;

static int bad(bad_value *b, const char *option, int quoted, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(bad_value *b, const char *option, int quoted, const char *fmt, ...)
{
    b->option = option;
    b->quoted = quoted;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->reason, sizeof b->reason, fmt, ap);
    va_end(ap);
    return EMBER_EINVAL;
}

static int set_int(ember_train_overrides *o, const int_override *x, const char *value, bad_value *b)
{
    long long v;
    if (!value)
        return bad(b, x->name, 0, "a value is needed");
    if (parse_int(value, &v) || v < x->lo || v > x->hi)
        return bad(b, x->name, 1, "not an integer in %lld..%lld", (long long)x->lo, (long long)x->hi);
    put_int(o, x, v);
    return EMBER_OK;
}

static int set_string(ember_train_overrides *o, const char *n, size_t off, const char *value, bad_value *b)
{
    int may_be_empty = !strcmp(n, "checkpoint-dir") || !strcmp(n, "metrics") || !strcmp(n, "plot");
    if (!value || (!*value && !may_be_empty))
        return bad(b, n, 0, "a value is needed");
    if (!strcmp(n, "schedule") && config_schedule_parse(value) < 0)
        return bad(b, n, 1, "not blocking, overlap or stale");
    if (!strcmp(n, "lr-decay") && !decay_ok(value))
        return bad(b, n, 1, "not none, linear or cosine");
    if ((!strcmp(n, "precision") || !strcmp(n, "state-precision")) && config_name_parse(CFG_PRECISIONS, value) < 0)
        return bad(b, n, 1, "not fp32, fp16 or bf16");
    if (!strcmp(n, "rounding") && config_name_parse(CFG_ROUNDINGS, value) < 0)
        return bad(b, n, 1, "not stochastic or nearest");
    if (!strcmp(n, "reader") && config_name_parse(CFG_READERS, value) < 0)
        return bad(b, n, 1, "not auto, team or thread");
    *(const char **)((char *)o + off) = value;
    return EMBER_OK;
}

/* EMBER_OK, EMBER_EINVAL with *b, or 1 when name is no override. */
static int set_override(ember_train_overrides *o, const char *name, const char *value, bad_value *b)
{
    if (!o || !name)
        return bad(b, NULL, 0, "ember_train_overrides_set: NULL argument");
    for (size_t k = 0; k < NINTS; k++)
        if (same_name(name, INTS[k].name))
            return set_int(o, &INTS[k], value, b);
    for (size_t k = 0; k < sizeof STRS / sizeof STRS[0]; k++)
        if (same_name(name, STRS[k].name))
            return set_string(o, STRS[k].name, STRS[k].off, value, b);
    if (same_name(name, "resume")) {
        int on = value && (!strcmp(value, "1") || !strcmp(value, "true"));
        if (!on && !(value && (!strcmp(value, "0") || !strcmp(value, "false"))))
            return value ? bad(b, "resume", 1, "not 1, 0, true or false") : bad(b, "resume", 0, "a value is needed");
        o->resume = on;
        return EMBER_OK;
    }
    return 1;
}

int ember_train_overrides_set(ember_train_overrides *o, const char *name, const char *value)
{
    return ember_train_overrides_set_reason(o, name, value, NULL, 0);
}

int ember_train_overrides_set_reason(ember_train_overrides *o, const char *name, const char *value, char *reason,
                                     size_t len)
{
    bad_value b = {NULL, 0, ""};
    int st = set_override(o, name, value, &b);
    if (reason && len)
        snprintf(reason, len, "%s", st == EMBER_EINVAL ? b.reason : "");
    return st;
}

int ember_train_overrides_set_msg(ember_train_overrides *o, const char *name, const char *value, char *err,
                                  size_t errlen)
{
    bad_value b = {NULL, 0, ""};
    int st = set_override(o, name, value, &b);
    if (!err || !errlen)
        return st;
    err[0] = '\0';
    if (st == EMBER_EINVAL && !b.option)
        snprintf(err, errlen, "%s", b.reason);
    else if (st == EMBER_EINVAL && b.quoted)
        snprintf(err, errlen, "%s: '%.100s' is %s", b.option, value, b.reason);
    else if (st == EMBER_EINVAL)
        snprintf(err, errlen, "%s: %s", b.option, b.reason);
    return st;
}

int train_overrides_check(const ember_train_overrides *o, char *err, size_t errlen)
{
    for (size_t k = 0; k < NINTS; k++) {
        int64_t v = get_int(o, &INTS[k]);
        if (v != -1 && (v < INTS[k].lo || v > INTS[k].hi)) {
            snprintf(err, errlen, "override %s: must be in %lld..%lld (or -1: the config's), got %lld", INTS[k].name,
                     (long long)INTS[k].lo, (long long)INTS[k].hi, (long long)v);
            return EMBER_EINVAL;
        }
    }
    if (o->schedule && config_schedule_parse(o->schedule) < 0) {
        snprintf(err, errlen, "override schedule: \"%.100s\" is not blocking, overlap or stale", o->schedule);
        return EMBER_EINVAL;
    }
    if (o->lr_decay && !decay_ok(o->lr_decay)) {
        snprintf(err, errlen, "override lr-decay: \"%.100s\" is not none, linear or cosine", o->lr_decay);
        return EMBER_EINVAL;
    }
    if (o->precision && config_name_parse(CFG_PRECISIONS, o->precision) < 0) {
        snprintf(err, errlen, "override precision: \"%.100s\" is not fp32, fp16 or bf16", o->precision);
        return EMBER_EINVAL;
    }
    if (o->state_precision && config_name_parse(CFG_PRECISIONS, o->state_precision) < 0) {
        snprintf(err, errlen, "override state-precision: \"%.100s\" is not fp32, fp16 or bf16", o->state_precision);
        return EMBER_EINVAL;
    }
    if (o->reader && config_name_parse(CFG_READERS, o->reader) < 0) {
        snprintf(err, errlen, "override reader: \"%.100s\" is not auto, team or thread", o->reader);
        return EMBER_EINVAL;
    }
    if (o->rounding && config_name_parse(CFG_ROUNDINGS, o->rounding) < 0) {
        snprintf(err, errlen, "override rounding: \"%.100s\" is not stochastic or nearest", o->rounding);
        return EMBER_EINVAL;
    }
    return 0;
}
