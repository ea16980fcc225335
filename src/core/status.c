/*
 * status.c: status names, the library version, and the messages of
 * failures below the collection and of creates (status.h).
 *
 * A create has no handle to keep its message yet, so the message is
 * thread-local until the next create on the same thread.
 */
#include <stdio.h>

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

static _Thread_local char create_errmsg[EMBER_ERRMSG_SIZE];

int ember_fail_create(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ember_fail_vinto(create_errmsg, status, fmt, ap);
    va_end(ap);
    return status;
}

const char *ember_create_errmsg(void) { return create_errmsg; }
