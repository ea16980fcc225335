/*
 * status.h: how a failure is reported below the collection: a status code
 * (include/ember.h) and a message written into a buffer the caller hands
 * over, so a module names what failed without knowing whose message it
 * writes.  The collection keeps its last message on the handle
 * (collection/collection.h, ember_fail); a create that has no handle yet
 * keeps it thread-local here (docs/architecture.md, "Rules the floors
 * keep").  Nothing here prints.
 */
#ifndef EMBER_CORE_STATUS_H
#define EMBER_CORE_STATUS_H

#include <stdarg.h>

#define EMBER_ERRMSG_SIZE 512 /* bytes of every message buffer */

/* Writes the message (printf-style) into msg[EMBER_ERRMSG_SIZE] and returns
 * status. */
int ember_fail_into(char *msg, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int ember_fail_vinto(char *msg, int status, const char *fmt, va_list ap);

/* The same for create, where no handle exists yet (thread-local); what
 * ember_errmsg(NULL) answers. */
int ember_fail_create(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *ember_create_errmsg(void);

#endif
