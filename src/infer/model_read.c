/*
 * model_read.c: a model's description alone, from a checkpoint or a
 * bundle (description.h, description_read), for the calls that need what
 * a model reads but not its tables: `ember convert --model` converts text
 * with the model's own input schema and statistics.  Nothing is loaded
 * beyond the manifest (and a bundle's files, which opening verifies).
 */
#include <stdio.h>
#include <string.h>

#include "infer/bundle.h"
#include "infer/description.h"

int description_read(const char *path, model_description *m, char *err, size_t len)
{
    memset(m, 0, sizeof *m);
    if (bundle_is(path)) {
        ember_bundle *b = NULL;
        int st = bundle_open(path, &b, err, len);
        if (st == EMBER_OK) {
            const char *json = bundle_model_json(b);
            st = description_from_json(json, strlen(json), m, err, len) ? EMBER_EFORMAT : EMBER_OK;
        }
        bundle_close(b);
        return st;
    }
    ember_checkpoint *ck = NULL;
    int st = ember_checkpoint_open(path, &ck);
    if (st != EMBER_OK) {
        snprintf(err, len, "%s", ember_errmsg(NULL));
        return st;
    }
    int64_t n = 0;
    const char *json = ember_checkpoint_blob(ck, -1, DESCRIPTION_BLOB, &n);
    if (!json) {
        snprintf(err, len, "%s: no model description (blob %s): written before models carried one",
                 ember_checkpoint_path(ck), DESCRIPTION_BLOB);
        st = EMBER_EFORMAT;
    } else if (description_from_json(json, (size_t)n, m, err, len)) {
        st = EMBER_EFORMAT;
    }
    ember_checkpoint_close(ck);
    return st;
}
