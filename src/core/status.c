/*
 * status.c: status names, the library version, and where the messages of
 * failures are kept (status.h): on the handle a call was made on, or, for a
 * call with no handle yet (a failed create or open), in this thread's
 * message until the next failure on the same thread.  ember_errmsg reads
 * both, so a program has one way to ask why.
 */
#include <stdio.h>
#include <string.h>

#include "core/status.h"
#include "ember.h"

#define STR_(x) #x
#define STR(x) STR_(x)

const char *ember_version(void)
{
    return STR(EMBER_VERSION_MAJOR) "." STR(EMBER_VERSION_MINOR) "." STR(EMBER_VERSION_PATCH);
}

const char *ember_status_str(int status)
{
    switch (status) {
    case EMBER_OK: return "ok";
    case EMBER_EINVAL: return "invalid argument or config";
    case EMBER_ENOMEM: return "out of memory";
    case EMBER_EINPUT: return "invalid input batch";
    case EMBER_ELIMIT: return "per-partition limit exceeded";
    case EMBER_ENUMERIC: return "non-finite value (NaN or Inf)";
    case EMBER_EIO: return "I/O error";
    case EMBER_ESTATE: return "call out of order";
    case EMBER_EPANIC: return "handle disabled by an earlier fatal error";
    case EMBER_EFORMAT: return "file format error";
    case EMBER_ECOMM: return "communication failed, or another rank failed";
    case EMBER_ECORRUPT: return "checksum or size mismatch (corrupt file)";
    default: return "unknown status";
    }
}

int ember_fail_vinto(char *msg, int status, const char *fmt, va_list ap)
{
    vsnprintf(msg, EMBER_ERRMSG_SIZE, fmt, ap);
    return status;
}

int ember_fail_into(char *msg, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ember_fail_vinto(msg, status, fmt, ap);
    va_end(ap);
    return status;
}

static _Thread_local char thread_msg[EMBER_THREAD_MSG_SIZE];

char *ember_thread_msg(void) { return thread_msg; }

int ember_fail_create(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ember_fail_vinto(thread_msg, status, fmt, ap);
    va_end(ap);
    return status;
}

void ember_handle_begin(ember_handle_msg *h, char *msg, size_t cap)
{
    h->magic = EMBER_HANDLE_MAGIC;
    h->cap = (uint32_t)cap;
    h->msg = msg;
    msg[0] = '\0';
}

void ember_handle_end(ember_handle_msg *h) { h->magic = 0; }

int ember_handle_fail(const ember_handle_msg *h, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* msg points at the handle's own buffer, never const storage */
    vsnprintf(h ? h->msg : thread_msg, h ? h->cap : EMBER_THREAD_MSG_SIZE, fmt, ap);
    va_end(ap);
    return status;
}

int ember_handle_keep(const ember_handle_msg *h, int status)
{
    if (status < 0 && h && h->msg != thread_msg)
        snprintf(h->msg, h->cap, "%s", thread_msg);
    return status;
}

const char *ember_errmsg(const void *handle)
{
    if (!handle)
        return thread_msg;
    const ember_handle_msg *h = handle;
    return h->magic == EMBER_HANDLE_MAGIC ? h->msg : "ember_errmsg: not a live ember handle";
}
