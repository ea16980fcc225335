/*
 * data_error.c: the thread-local message behind ember_data_errmsg().
 *
 * One fixed buffer per thread, written only by ember_data_set_error(), so a
 * reader on one thread never sees another thread's failure and reporting an
 * error cannot itself fail.
 */
#include <stdarg.h>
#include <stdio.h>

#include "data/data_error.h"
#include "ember.h"

static _Thread_local char data_errmsg[512];

void ember_data_set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(data_errmsg, sizeof data_errmsg, fmt, ap);
    va_end(ap);
}

void ember_data_clear_error(void)
{
    data_errmsg[0] = '\0';
}

const char *ember_data_errmsg(void)
{
    return data_errmsg;
}
