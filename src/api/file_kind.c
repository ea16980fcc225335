/*
 * file_kind.c: ember_data_file_kind (ember-data.h): a data file by its
 * first bytes, with the readers' own tests of their magic numbers, so a
 * program chooses a reader the way ember's calls do.
 */
#include <stdio.h>

#include "config/data_open.h"
#include "data/ctr.h"
#include "ember-data.h"

ember_file_kind ember_data_file_kind(const char *path)
{
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f)
        return EMBER_FILE_NONE;
    fclose(f);
    if (data_is_batch_file(path))
        return EMBER_FILE_BATCHES;
    return ctr_file_is_binary(path) ? EMBER_FILE_CTR : EMBER_FILE_OTHER;
}
