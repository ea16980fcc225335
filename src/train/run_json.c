/*
 * run_json.c: the JSON pieces of run_json.h.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/run_json.h"

/* The length of the valid UTF-8 sequence at p (n bytes left), 0 if none. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    unsigned cp = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

json_t *run_json_string(const char *s)
{
    if (!s)
        s = "";
    size_t n = strlen(s);
    const unsigned char *p = (const unsigned char *)s;
    char *out = malloc(4 * n + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_len(p + i, n - i);
        if (len) {
            memcpy(out + o, p + i, len);
            o += len;
            i += len;
        } else {
            snprintf(out + o, 5, "\\x%02X", p[i]);
            o += 4;
            i++;
        }
    }
    out[o] = '\0';
    json_t *j = json_string(out);
    free(out);
    return j;
}

json_t *run_json_num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

char *run_json_dumps(const json_t *j)
{
    return json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(8));
}
