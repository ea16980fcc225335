/*
 * run_error.c: how a training run fails (run.h): every rank ends with the
 * same status and message, so that every rank returns together and the
 * caller prints one message (rank 0's, under `ember train`).
 *
 * A failure only some ranks saw (a file one rank cannot open, a bad line in
 * one rank's share) is agreed with one small all-gather before the next
 * collective call; the lowest failing rank then broadcasts its status and
 * message, and the message names it ("rank 2: ...") in a world of more than
 * one.  A failure that follows from the same inputs on every rank (the
 * settings) needs no message at all: every rank already has it.  Messages
 * are cut at 1023 bytes, as `ember train` always printed them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "comm/collect.h"
#include "comm/comm.h"
#include "train/run.h"

#define MSG_BYTES 1024

/* errmsg: "rank R: " (more than one rank) and the message. */
static void set_message(ember_trainer *s, int32_t rank, const char *msg)
{
    char rk[32] = "";
    if (rank >= 0 && s->size > 1)
        snprintf(rk, sizeof rk, "rank %d: ", (int)rank);
    snprintf(s->errmsg, sizeof s->errmsg, "%s%.*s", rk, MSG_BYTES - 1, msg);
}

int run_agree(ember_trainer *s, int failed, int status, const char *msg)
{
    int32_t first = -1;
    if (!ember_comm_any_failed(s->world, failed, &first))
        return 0;
    struct {
        int64_t status;
        char msg[MSG_BYTES];
    } m;
    memset(&m, 0, sizeof m);
    m.status = status == EMBER_OK ? EMBER_ECOMM : status;
    snprintf(m.msg, sizeof m.msg, "%s", msg ? msg : "");
    if (s->size > 1 && first >= 0 && ember_comm_bcast(s->world, &m, (int64_t)sizeof m, first) != EMBER_OK) {
        m.status = EMBER_ECOMM;
        snprintf(m.msg, sizeof m.msg, "%s", s->world->errmsg);
        first = s->rank;
    }
    m.msg[MSG_BYTES - 1] = '\0';
    s->status = m.status == EMBER_EINVAL ? EMBER_EFORMAT : (int)m.status;
    set_message(s, first, m.msg);
    return 1;
}

int run_agree_status(ember_trainer *s, int st, const char *msg)
{
    return run_agree(s, st != EMBER_OK && st != EMBER_ECOMM, st, msg) || run_agree(s, st != EMBER_OK, st, msg);
}

static int fail_v(ember_trainer *s, int32_t rank, int status, const char *fmt, va_list ap)
{
    char msg[MSG_BYTES];
    vsnprintf(msg, sizeof msg, fmt, ap);
    s->status = status;
    set_message(s, rank, msg);
    return status;
}

int run_fail(ember_trainer *s, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(s, -1, status, fmt, ap);
    va_end(ap);
    return status;
}

int run_fail_rank(ember_trainer *s, int32_t rank, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(s, rank, status, fmt, ap);
    va_end(ap);
    return status;
}
