/*
 * data_error.h: the thread-local failure detail of the data readers and
 * generators (src/data/).
 *
 * These objects have no collection handle to hang a message on, so their last
 * failure is kept per thread and read back with ember_data_errmsg() (ember.h).
 * A failing function formats its message with ember_data_set_error() just
 * before it returns the status; a message names the place (file, batch,
 * field) the user must look at.
 */
#ifndef EMBER_DATA_ERROR_H
#define EMBER_DATA_ERROR_H

/* Formats the current thread's message (truncated to the buffer, always
 * NUL-terminated).  Never fails, never allocates. */
void ember_data_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Empties the current thread's message. */
void ember_data_clear_error(void);

#endif
