/*
 * world_calls.c: the public collectives over a world (ember.h, "world":
 * ember_world_any_failed, _reduce_*, _gather_*, ...), for programs around
 * ember's calls such as the `ember` tool.  Each is the library's own
 * collective of collect.h under its public name, so the tool and the
 * library agree, reduce and gather the same way.
 */
#include "comm/collect.h"

_Static_assert((int)EMBER_WORLD_MAX == (int)EMBER_REDUCE_MAX && (int)EMBER_WORLD_SUM == (int)EMBER_REDUCE_SUM,
               "the public reduce operations are collect.h's");

int ember_world_any_failed(ember_world *w, int failed, int32_t *first)
{
    return ember_comm_any_failed(w, failed, first);
}

int ember_world_max_status(ember_world *w, int status) { return ember_comm_agree_max(w, status); }

int ember_world_reduce_i64(ember_world *w, int64_t *v, int64_t n, ember_world_op op)
{
    return ember_comm_reduce_i64(w, v, n, (ember_reduce_op)op);
}

int ember_world_reduce_double(ember_world *w, double *v, int64_t n, ember_world_op op)
{
    return ember_comm_reduce_double(w, v, n, (ember_reduce_op)op);
}

int ember_world_gather_floats(ember_world *w, const float *v, int64_t n, float **out, int64_t *total)
{
    return ember_comm_gather_floats(w, v, n, out, total);
}

int ember_world_gather_i64(ember_world *w, const int64_t *v, int64_t n, int64_t **out, int64_t *total)
{
    return ember_comm_gather_i64(w, v, n, out, total);
}

int ember_world_barrier(ember_world *w) { return ember_comm_barrier(w); }

int32_t ember_world_local_ranks(const ember_world *w) { return ember_comm_local_ranks(w); }
