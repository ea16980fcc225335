/*
 * agree.h: a failure only some ranks saw, agreed before the next
 * collective call, with the failing rank's message on every rank
 * (agree.c).  For library calls that read data on every rank and must
 * return together (ember_limits_run, ember_predict): every rank returns
 * the same status and message, which names the failing rank ("rank 2:
 * ...") in a world of more than one.
 */
#ifndef EMBER_COMM_AGREE_H
#define EMBER_COMM_AGREE_H

#include <stddef.h>
#include <stdint.h>

#include "ember.h"

#define COMM_AGREE_MSG 1024 /* message bytes carried, the NUL included */

/* When no rank failed: 0, nothing changes.  Else 1 on every rank, with
 * *status and msg (len bytes) replaced by the lowest failing rank's
 * (msg prefixed "rank R: " when the world has more than one rank).  This
 * rank's own: failed, *status (EMBER_OK counts as EMBER_ECOMM) and msg.
 * When the agreement itself fails: 1, EMBER_ECOMM and the world's
 * message.  Collective. */
int comm_agree_error(ember_world *w, int failed, int *status, char *msg, size_t len);

#endif
