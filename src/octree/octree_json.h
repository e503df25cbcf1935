/*
 * octree_json.h - JSON for the octree's Potree files (not installed; C only), defined in
 * octree_json.c: a double written whatever the locale, and a small reader for metadata.json.
 */
#ifndef GROVE_OCTREE_JSON_H
#define GROVE_OCTREE_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"

/* v as %.17g (every double reads back exactly) with '.' as the decimal point, whatever the
 * locale, into out[size] (NUL-terminated; 64 bytes always suffice). */
void grove__ot_fmt_double(char *out, size_t size, double v);

/* The reader (metadata.json).
 * The text is parsed into an array of values; containers link their members through `next`.
 * Strings are unescaped in place (\uXXXX outside ASCII is kept as '?': only our own keys and
 * names are looked at). */
enum {
    GROVE__OT_J_NULL,
    GROVE__OT_J_BOOL,
    GROVE__OT_J_NUM,
    GROVE__OT_J_STR,
    GROVE__OT_J_ARR,
    GROVE__OT_J_OBJ
};

typedef struct grove__ot_jval {
    int type;
    double num;
    const char *str; /* GROVE__OT_J_STR; the key, for a member of an object */
    const char *key;
    size_t first, next, count; /* children (index + 1; 0: none) */
} grove__ot_jval;

typedef struct grove__ot_jparser {
    grove_ctx *ctx;
    const char *path;
    char *s;
    size_t pos, len;
    grove__ot_jval *v;
    size_t nv, cap;
    int depth;
} grove__ot_jparser;

/* Parses the value at p->pos (white space before it skipped) into p->v; *out is its index there.
 * The caller sets ctx, path, s (NUL-terminated, modified: strings are unescaped in place) and
 * len, zeroes the rest, and frees p->v afterwards (also after an error). Errors name p->path,
 * and malformed JSON the line. */
grove_status grove__ot_j_value(grove__ot_jparser *p, size_t *out);

/* Skips white space at p->pos. */
void grove__ot_j_ws(grove__ot_jparser *p);

/* Records a GROVE_ERR_BAD_INPUT "malformed JSON: what" at the line of p->pos; returns it. */
grove_status grove__ot_j_fail(grove__ot_jparser *p, const char *what);

/* Member `key` of object o (o may be NULL or no object), or NULL. */
const grove__ot_jval *grove__ot_j_get(const grove__ot_jparser *p, const grove__ot_jval *o,
                                      const char *key);

/* Element i of array a, or NULL. */
const grove__ot_jval *grove__ot_j_at(const grove__ot_jparser *p, const grove__ot_jval *a, size_t i);

/* Member `key` of o as a whole number in 0..max, or an array of `count` numbers; the error
 * names the key. */
grove_status grove__ot_j_uint(const grove__ot_jparser *p, const grove__ot_jval *o, const char *key,
                              double max, uint64_t *out);
grove_status grove__ot_j_vec(const grove__ot_jparser *p, const grove__ot_jval *o, const char *key,
                             int count, double *out);

/* Member `key` of o when it is a string, else NULL. */
const char *grove__ot_j_str(const grove__ot_jparser *p, const grove__ot_jval *o, const char *key);

#endif /* GROVE_OCTREE_JSON_H */
