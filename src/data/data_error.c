/*
 * data_error.c: how the data readers and generators report a failure: into
 * this thread's message (core/status.h), what ember_errmsg(NULL) answers.
 *
 * One fixed buffer per thread, so a reader on one thread never sees another
 * thread's failure and reporting an error cannot itself fail.  A public
 * call on a handle copies the message to its handle (ember_handle_keep).
 */
#include <stdarg.h>
#include <stdio.h>

#include "core/status.h"
#include "data/data_error.h"

void ember_data_set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ember_thread_msg(), EMBER_THREAD_MSG_SIZE, fmt, ap);
    va_end(ap);
}

void ember_data_clear_error(void)
{
    ember_thread_msg()[0] = '\0';
}
