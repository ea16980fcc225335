/*
 * data_error.h: how the data readers and generators (src/data/) and the
 * modules that share them report a failure.
 *
 * A failing function formats its message with ember_data_set_error() just
 * before it returns the status: into this thread's message (core/status.h),
 * which ember_errmsg(NULL) answers and a public call on a handle copies to
 * its handle.  A message names the place (file, batch, field) the user must
 * look at.
 */
#ifndef EMBER_DATA_ERROR_H
#define EMBER_DATA_ERROR_H

/* Formats the current thread's message (truncated to the buffer, always
 * NUL-terminated).  Never fails, never allocates. */
void ember_data_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Empties the current thread's message. */
void ember_data_clear_error(void);

#endif
