/*
 * status.c: status names, error detail and the library version.
 *
 * Detail for the last failure lives on the handle (coll->errmsg); create has
 * no handle yet, so its detail is thread-local.  Nothing here prints.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/collection.h"

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

static _Thread_local char create_errmsg[512];

int ember_fail(ember_collection *coll, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(coll->errmsg, sizeof coll->errmsg, fmt, ap);
    va_end(ap);
    return status;
}

int ember_fail_create(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(create_errmsg, sizeof create_errmsg, fmt, ap);
    va_end(ap);
    return status;
}

const char *ember_errmsg(const ember_collection *coll)
{
    return coll ? coll->errmsg : create_errmsg;
}

int ember_reserve(void **p, int64_t *cap, int64_t n, size_t sz)
{
    if (n <= *cap && *p)
        return EMBER_OK;
    int64_t want = n > *cap * 3 / 2 ? n : *cap * 3 / 2;
    if (want < 16)
        want = 16;
    void *q = realloc(*p, (size_t)want * sz);
    if (!q)
        return EMBER_ENOMEM;
    *p = q;
    *cap = want;
    return EMBER_OK;
}
