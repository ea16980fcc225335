/*
 * description.h: the description of a trained model that travels with it
 * (docs/inference.md, "The model description"): the tables and features of
 * its collection, the dense model, how many samples the dense model scored
 * at once, and the input it was trained on.  `ember train` stores it in
 * every checkpoint as the blob "model.json"; the predictor builds its
 * collection and dense model from it, so nothing is declared twice.
 *
 * JSON through jansson; floats are written as doubles with 17 digits, so
 * every setting reads back bit for bit.
 */
#ifndef EMBER_INFER_DESCRIPTION_H
#define EMBER_INFER_DESCRIPTION_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "data/ctr.h"
#include "dense/dense.h"
#include "ember.h"

#define DESCRIPTION_BLOB "model.json"
#define DESCRIPTION_MAX 1024 /* tables, and features */

/* How the training data's rows became samples (input_schema.c): the text
 * schema with every number training used (standardize's mean and std), or
 * the kind of a source that has none to give. */
typedef enum description_source {
    DESC_INPUT_NONE = 0,   /* not recorded (a model written before it was)       */
    DESC_INPUT_TEXT,       /* a config's data.schema                            */
    DESC_INPUT_CRITEO_TSV, /* the built-in Criteo TSV schema, written out        */
    DESC_INPUT_SYNTHETIC,  /* the built-in task (the description's synthetic)    */
    DESC_INPUT_BINARY      /* ember's binary format, whose schema is not known   */
} description_source;

typedef struct description_input {
    description_source source;
    ctr_text_schema schema; /* TEXT, CRITEO_TSV: columns point at cols,
                               file_fields at fields                            */
    ctr_column *cols;       /* owned                                            */
    char **fields;          /* owned: the training file's header fields (one
                               block at fields[0]), or NULL                     */
} description_input;

typedef struct model_description {
    int32_t num_tables, num_features;
    ember_table_config tables[DESCRIPTION_MAX];     /* names point into names[0]    */
    ember_feature_config features[DESCRIPTION_MAX]; /* names point into names[1]    */
    char names[2][DESCRIPTION_MAX][64];
    uint64_t seed;          /* the collection's (initializers; a loaded model ignores it) */
    int dedup;              /* the collection's dedup setting                        */
    int stack_tables;       /* and the others that change what a forward reads      */
    ember_bounds_policy bounds;
    int32_t num_shards;
    dlrm_config dense;
    int32_t chunk;          /* samples per dense forward (the trainer's micro-batch) */
    int32_t batch;          /* samples per rank in one evaluation call (micro-batch x
                               accumulation): scoring in calls of this size, at the
                               training world size, repeats the evaluation's chunks */
    ctr_schema input;       /* dense features, and per sparse feature its rows
                               (0: 64-bit keys) and name                             */
    int synthetic;          /* trained on the built-in task: synth describes it     */
    ctr_synth_config synth;
    description_input in;   /* "input_schema"; source NONE when the JSON had none    */
    char in_error[400];     /* why an input_schema present could not be read (a
                               newer ember's): the model still opens and scores
                               binary data; reading text with it is refused     */
} model_description;

/* m from a collection config (tables, features, seed, dedup) and the rest;
 * names are copied.  -1 with err when a name is too long or there are more
 * than DESCRIPTION_MAX tables or features. */
int description_make(model_description *m, const ember_collection_config *cc, const dlrm_config *dense,
                     int32_t chunk, int32_t batch, const ctr_schema *input, const ctr_synth_config *synth, char *err,
                     size_t errlen);
/* m's input schema: a copy of sc's columns (sc NULL: a source without
 * one).  EMBER_ENOMEM with err. */
int description_input_set(description_input *in, description_source source, const ctr_text_schema *sc, char *err,
                          size_t errlen);
void description_input_free(description_input *in);
/* What m holds besides its fixed arrays (the input schema's columns);
 * m stays a valid description without an input schema. */
void description_free(model_description *m);

/* The collection config of m (pointing into m): world and threads are the
 * caller's to set. */
ember_collection_config description_collection(const model_description *m);

/* model_read.c: the description of the model at path (a checkpoint: its
 * root's newest or one step-* folder; or a bundle), without its tables.
 * EMBER_OK, or the opening's status (EMBER_EFORMAT for a description that
 * is missing or cannot be read) with err; description_free m after. */
int description_read(const char *path, model_description *m, char *err, size_t len);

/* Serialises m; a malloc'd NUL-terminated string, NULL when out of memory. */
char *description_to_json(const model_description *m);
/* Parses n bytes of JSON into m (description_free it after).  EMBER_EINVAL
 * with err naming the field at fault. */
int description_from_json(const char *json, size_t n, model_description *m, char *err, size_t errlen);

/* input_schema.c: the member "input_schema" as JSON, and read back from o
 * against the model's input (in set, or EMBER_EINVAL / ENOMEM with err). */
json_t *description_input_json(const description_input *in);
int description_input_read(json_t *o, const ctr_schema *input, description_input *in, char *err, size_t errlen);

#endif
