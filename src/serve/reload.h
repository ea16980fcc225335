/*
 * reload.h: the model a server scores with, replaced while it serves
 * without dropping a request (docs/inference.md, "Reloading a model").
 *
 * A slot holds the current model (model.h).  A request takes the current
 * model when it starts (serve_slot_acquire: one more holder) and gives it
 * back when it is answered, so it is decoded and scored by one model from
 * start to end.  A reload opens and checks the new model completely, with
 * the old one still serving; a model that fails is refused and the old one
 * stays.  Then it swaps them: requests that start later get the new model,
 * those holding the old one finish on it, and the reload waits for the old
 * model's last holder before it closes it.  Reloads run one at a time.
 */
#ifndef EMBER_SERVE_RELOAD_H
#define EMBER_SERVE_RELOAD_H

#include <stddef.h>
#include <stdint.h>

#include "ember-serve.h"
#include "serve/model.h"

typedef struct serve_slot serve_slot;

/* A slot serving first (version 1), whose reloads open `threads` OpenMP
 * threads per predictor and first->num_predictors predictors.  The slot
 * owns first from then on.  EMBER_OK or EMBER_ENOMEM. */
int serve_slot_create(serve_model *first, int32_t threads, int32_t max_samples, serve_slot **out);
/* Closes the current model; nobody may hold it any more. */
void serve_slot_destroy(serve_slot *s);

/* The current model, held until serve_slot_release, and (status not NULL)
 * the reload status as of it: a swap and its record are one step, so the
 * last reload that succeeded is the one that made it current.
 * Thread-safe. */
serve_model *serve_slot_acquire(serve_slot *s, ember_reload_status *status);
void serve_slot_release(serve_slot *s, serve_model *m);

/* Replaces the current model with the one at path (NULL: the current
 * model's path), as above, and returns once the old one is closed.
 * EMBER_OK; EMBER_EINVAL (NULL path for a model without one), EMBER_ESTATE
 * (the slot stopped), or serve_model_open's error, with err saying why;
 * either way the outcome goes to the status.  Thread-safe. */
int serve_slot_reload(serve_slot *s, const char *path, char *err, size_t errlen);
/* Later reloads are refused (EMBER_ESTATE); one under way finishes. */
void serve_slot_stop(serve_slot *s);
/* The outcome of the reloads so far (ember-serve.h). */
void serve_slot_status(serve_slot *s, ember_reload_status *out);

#endif
