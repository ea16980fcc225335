/*
 * run_json.h: the JSON pieces the trainer's events and summary share
 * (events.c, summary.c).
 */
#ifndef EMBER_TRAIN_RUN_JSON_H
#define EMBER_TRAIN_RUN_JSON_H

#include <jansson.h>

/* A JSON string of any C string (NULL: ""): bytes that are not valid UTF-8
 * (a file name's, a message cut inside a character) become the text
 * "\xNN", so that the field is never dropped.  NULL only out of memory. */
json_t *run_json_string(const char *s);
/* A real, or null when it is not finite. */
json_t *run_json_num(double v);
/* The one-line text of an event: compact, in insertion order, reals with
 * 8 significant digits.  NULL out of memory; free() it. */
char *run_json_dumps(const json_t *j);

#endif
