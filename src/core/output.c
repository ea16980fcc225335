/*
 * output.c: ember_output (ember.h, "file outputs"), the public face of
 * safe_file.h's outputs: a program's own files (the `ember` tool's
 * metrics, plots and scores) follow the rule ember's files follow, with
 * one implementation of it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safe_file.h"
#include "core/status.h"
#include "ember.h"

struct ember_output {
    ember_handle_msg head; /* first: ember_errmsg's, over msg */
    char msg[EMBER_ERRMSG_SIZE];
    char path[300];        /* as the caller named it, for messages */
    safe_out out;          /* stays where it is: its stdio stream points at it */
};

int ember_output_open(const char *path, int flags, ember_output **out)
{
    *out = NULL;
    ember_output *o = malloc(sizeof *o);
    if (!o)
        return ember_fail_create(EMBER_ENOMEM, "%s: out of memory", path ? path : "(null)");
    ember_handle_begin(&o->head, o->msg, sizeof o->msg);
    snprintf(o->path, sizeof o->path, "%s", path ? path : "");
    o->out = (safe_out)SAFE_OUT_INIT;
    int st = safe_out_open_path(&o->out, o->path, flags & EMBER_OUTPUT_APPEND ? SAFE_OUT_APPEND : 0,
                                ember_thread_msg(), EMBER_ERRMSG_SIZE);
    if (st != EMBER_OK) {
        safe_out_abort(&o->out);
        ember_handle_end(&o->head);
        free(o);
        return st;
    }
    *out = o;
    return EMBER_OK;
}

/* The first failed write's reason on the handle: EMBER_EIO. */
static int output_failed(ember_output *o)
{
    return ember_handle_fail(&o->head, EMBER_EIO, "%s: %s", o->path, strerror(o->out.err > 0 ? o->out.err : EIO));
}

int ember_output_write(ember_output *o, const void *data, int64_t n)
{
    return safe_out_write(&o->out, data, n) == 0 ? EMBER_OK : output_failed(o);
}

FILE *ember_output_stdio(ember_output *o) { return safe_out_stdio(&o->out); }

int ember_output_flush(ember_output *o) { return safe_out_flush(&o->out) == 0 ? EMBER_OK : output_failed(o); }

int ember_output_publish(ember_output *o)
{
    return safe_out_publish(&o->out, o->msg, sizeof o->msg);
}

int ember_output_commit(ember_output *o)
{
    if (!o)
        return EMBER_OK;
    /* removes the output when it fails; the message outlives o */
    int st = safe_out_commit(&o->out, ember_thread_msg(), EMBER_ERRMSG_SIZE);
    ember_handle_end(&o->head);
    free(o);
    return st;
}

void ember_output_abort(ember_output *o)
{
    if (!o)
        return;
    safe_out_abort(&o->out);
    ember_handle_end(&o->head);
    free(o);
}
