/*
 * predict_scores.h: the scores of ember_predict (predict.c): collected on
 * each rank in calls of the model's evaluation batch, put in data order on
 * rank 0, and written (predict_scores.c).
 */
#ifndef EMBER_API_PREDICT_SCORES_H
#define EMBER_API_PREDICT_SCORES_H

#include <stddef.h>
#include <stdint.h>

#include "data/ctr.h"
#include "ember.h"

/* Scores with their labels and their samples' indexes in the data: the
 * line of a text file (from 1), else the sample's index (from 0). */
typedef struct predict_scores {
    float *score, *label;
    int64_t *index, n, cap;
} predict_scores;

/* Scores this rank's samples into out: the synthetic stream's first
 * `limit` over the world (ranks ask for ceil(left / W) each round), or a
 * file's share until it ends.  Each round agrees over the world, so every
 * rank stops together.  EMBER_OK, or a status with err: this rank's own
 * failure, or EMBER_ECOMM ("") when another rank failed.  Collective. */
int predict_scores_collect(ember_predictor *p, ctr_source *src, ember_world *w, int synthetic, int64_t limit,
                           predict_scores *out, char *err, size_t len);
/* Keeps the scores whose index is below limit, in their order. */
void predict_scores_keep_below(predict_scores *s, int64_t limit);
/* Puts the scores in index order (the synthetic stream's ranks interleave). */
int predict_scores_sort(predict_scores *s);
/* Writes the scores in their order to o: float32, or tsv lines
 * "index\tscore[\tlabel]" (labeled: with the label); commits it (o is
 * freed either way).  EMBER_OK, or a status with err naming the file. */
int predict_scores_write(ember_output *o, int tsv, int labeled, const predict_scores *s, char *err, size_t len);

/* What the CSV scores are written with (predict_out.c). */
typedef struct predict_csv {
    int labeled;                    /* a label column                          */
    const char *index_name;         /* the id's header without an id column:
                                       "line" or "sample"                      */
    const char *id;                 /* NULL, or the column whose field names a
                                       score (a text file's; schema set)       */
    const char *path;               /* the text file                          */
    const ctr_text_schema *schema;  /* the schema it was read with            */
    int header;                     /* the file had a header line             */
} predict_csv;
/* A header line, then "id,score[,label]" per score; commits o (freed
 * either way).  EMBER_OK, or a status with err. */
int predict_scores_write_csv(ember_output *o, const predict_scores *s, const predict_csv *c, char *err, size_t len);
/* Whether c's id column can be read (before any scoring); EMBER_OK or a
 * status with err. */
int predict_csv_check(const predict_csv *c, char *err, size_t len);
void predict_scores_free(predict_scores *s);

#endif
