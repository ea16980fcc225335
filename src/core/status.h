/*
 * status.h: how a failure is reported below the collection: a status code
 * (include/ember.h) and a message written into a buffer the caller hands
 * over, so a module names what failed without knowing whose message it
 * writes.  Every public handle begins with an ember_handle_msg that keeps
 * its last failure's message; a call that has no handle to keep it (a
 * failed open or create, a call that takes no handle) keeps it in this
 * thread's message.  ember_errmsg(handle or NULL) reads either
 * (include/ember.h; docs/architecture.md, "Rules the floors keep").
 * Nothing here prints.
 */
#ifndef EMBER_CORE_STATUS_H
#define EMBER_CORE_STATUS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#define EMBER_ERRMSG_SIZE 512      /* bytes of a module's message */
#define EMBER_THREAD_MSG_SIZE 1152 /* bytes of this thread's message */

/* The first member of every public handle (ember_collection, ember_trainer,
 * ember_predictor, ...): where its last failure's message is, what
 * ember_errmsg(handle) answers.  The buffer is the handle's own (its size
 * is the handle's business: a trainer's adds "rank R: " to a module's). */
#define EMBER_HANDLE_MAGIC 0x656d6272u /* "embr" */
typedef struct ember_handle_msg {
    uint32_t magic;
    uint32_t cap; /* bytes of msg */
    char *msg;
} ember_handle_msg;

/* Marks a new handle whose messages go to msg[cap] (set to ""); before the
 * handle is freed, ember_handle_end. */
void ember_handle_begin(ember_handle_msg *h, char *msg, size_t cap);
void ember_handle_end(ember_handle_msg *h);
/* The handle's message (printf-style; h NULL: this thread's); returns
 * status.  h may be a const handle's: its message is the one part a call
 * that reads the handle may still write. */
int ember_handle_fail(const ember_handle_msg *h, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* For a call on h whose failure a lower module wrote into this thread's
 * message: when status < 0, copies that message to h.  Returns status. */
int ember_handle_keep(const ember_handle_msg *h, int status);

/* This thread's message (EMBER_THREAD_MSG_SIZE bytes), for the modules that
 * format into it (data/data_error.h) and for ember_errmsg(NULL). */
char *ember_thread_msg(void);

/* Writes the message (printf-style) into msg[EMBER_ERRMSG_SIZE] and returns
 * status. */
int ember_fail_into(char *msg, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int ember_fail_vinto(char *msg, int status, const char *fmt, va_list ap);

/* The same for create, where no handle exists yet: this thread's message,
 * what ember_errmsg(NULL) answers. */
int ember_fail_create(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
