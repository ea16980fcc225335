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

int run_agree_world(ember_world *w, int failed, int status, const char *msg, int named, int *status_out,
                    int32_t *rank_out, char *msg_out, size_t msglen)
{
    int32_t first = -1;
    if (!ember_comm_any_failed(w, failed, &first))
        return 0;
    struct {
        int64_t status, named;
        char msg[MSG_BYTES];
    } m;
    memset(&m, 0, sizeof m);
    m.status = status == EMBER_OK ? EMBER_ECOMM : status;
    m.named = named;
    snprintf(m.msg, sizeof m.msg, "%s", msg ? msg : "");
    /* first < 0: the agreement itself failed, on this rank at least; no
     * broadcast (the others could pick another root): a communication
     * error, told as this rank's */
    if (first < 0 ||
        (ember_world_size(w) > 1 && ember_comm_bcast(w, &m, (int64_t)sizeof m, first) != EMBER_OK)) {
        m.status = EMBER_ECOMM;
        m.named = 1;
        snprintf(m.msg, sizeof m.msg, "%s", w ? w->errmsg : "communication failed");
        first = ember_world_rank(w);
    }
    m.msg[MSG_BYTES - 1] = '\0';
    *status_out = (int)m.status;
    *rank_out = m.named ? first : -1;
    snprintf(msg_out, msglen, "%s", m.msg);
    return 1;
}

/* run_agree_world into s: "rank R: " before a named rank's message. */
static int agree(ember_trainer *s, int failed, int status, const char *msg, int named)
{
    char m[MSG_BYTES];
    int st;
    int32_t rank;
    if (!run_agree_world(s->world, failed, status, msg, named, &st, &rank, m, sizeof m))
        return 0;
    s->status = st;
    set_message(s, rank, m);
    return 1;
}

int run_agree(ember_trainer *s, int failed, int status, const char *msg)
{
    if (!agree(s, failed, status, msg, 1))
        return 0;
    if (s->status == EMBER_EINVAL)
        s->status = EMBER_EFORMAT;
    return 1;
}

int run_agree_open(ember_trainer *s, int failed, int status, const char *msg, int named)
{
    return agree(s, failed, status, msg, named);
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
