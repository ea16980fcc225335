/*
 * agree.c: comm_agree_error (agree.h).  One all-gather finds the lowest
 * failing rank (ember_comm_any_failed); that rank broadcasts its status
 * and message.  Messages are cut at COMM_AGREE_MSG - 1 bytes.
 */
#include <stdio.h>
#include <string.h>

#include "comm/agree.h"
#include "comm/collect.h"
#include "comm/comm.h"

int comm_agree_error(ember_world *w, int failed, int *status, char *msg, size_t len)
{
    int32_t first = -1;
    if (!ember_comm_any_failed(w, failed, &first))
        return 0;
    struct {
        int64_t status;
        char msg[COMM_AGREE_MSG];
    } m;
    memset(&m, 0, sizeof m);
    m.status = failed && *status != EMBER_OK ? *status : EMBER_ECOMM;
    snprintf(m.msg, sizeof m.msg, "%s", failed ? msg : "");
    /* first < 0: the agreement failed on this rank; no root every rank
     * would agree on, so no broadcast: told as this rank's */
    int32_t size = ember_world_size(w);
    if (first < 0 || (size > 1 && ember_comm_bcast(w, &m, (int64_t)sizeof m, first) != EMBER_OK)) {
        m.status = EMBER_ECOMM;
        snprintf(m.msg, sizeof m.msg, "%s", w ? w->errmsg : "communication failed");
        first = ember_world_rank(w);
    }
    m.msg[COMM_AGREE_MSG - 1] = '\0';
    *status = (int)m.status;
    if (size > 1)
        snprintf(msg, len, "rank %d: %s", (int)first, m.msg);
    else
        snprintf(msg, len, "%s", m.msg);
    return 1;
}
