/*
 * output.c: ember_output (ember.h, "file outputs"), the public face of
 * safe_file.h's outputs: a program's own files (the `ember` tool's
 * metrics, plots and scores) follow the rule ember's files follow, with
 * one implementation of it.
 */
#include <errno.h>
#include <stdlib.h>

#include "core/safe_file.h"
#include "ember.h"

struct ember_output {
    safe_out out; /* stays where it is: its stdio stream points at it */
};

int ember_output_open(const char *path, int flags, ember_output **out, char *err, size_t errlen)
{
    *out = NULL;
    ember_output *o = malloc(sizeof *o);
    if (!o) {
        snprintf(err, errlen, "%s: out of memory", path ? path : "(null)");
        return EMBER_ENOMEM;
    }
    o->out = (safe_out)SAFE_OUT_INIT;
    int st = safe_out_open_path(&o->out, path ? path : "", flags & EMBER_OUTPUT_APPEND ? SAFE_OUT_APPEND : 0,
                                err, errlen);
    if (st != EMBER_OK) {
        safe_out_abort(&o->out);
        free(o);
        return st;
    }
    *out = o;
    return EMBER_OK;
}

int ember_output_write(ember_output *o, const void *data, int64_t n) { return safe_out_write(&o->out, data, n); }

FILE *ember_output_stdio(ember_output *o) { return safe_out_stdio(&o->out); }

int ember_output_flush(ember_output *o)
{
    if (safe_out_flush(&o->out) == 0)
        return 0;
    return o->out.err > 0 ? o->out.err : EIO;
}

int ember_output_publish(ember_output *o, char *err, size_t errlen) { return safe_out_publish(&o->out, err, errlen); }

int ember_output_commit(ember_output *o, char *err, size_t errlen)
{
    if (!o)
        return EMBER_OK;
    int st = safe_out_commit(&o->out, err, errlen); /* removes the output when it fails */
    free(o);
    return st;
}

void ember_output_abort(ember_output *o)
{
    if (!o)
        return;
    safe_out_abort(&o->out);
    free(o);
}
