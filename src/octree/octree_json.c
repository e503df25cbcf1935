/*
 * octree_json.c - JSON for the octree's Potree files: numbers written and read whatever the
 * locale (grove__ot_fmt_double for metadata.json; the reader's number parser), and the small
 * JSON reader that octree_export.c reads metadata.json with (its values: octree_json.h).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "octree_json.h"

/* ---- numbers in JSON, whatever the locale ---- */

/* %.17g (every double reads back exactly) with '.' as the decimal point: any byte printf wrote
 * that belongs to no C-locale number is the locale's decimal point. */
void grove__ot_fmt_double(char *out, size_t size, double v)
{
    char t[64];
    size_t k = 0;
    int len = snprintf(t, sizeof t, "%.17g", v);
    for (int i = 0; i < len && k + 1 < size; i++) {
        char c = t[i];
        if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == 'e' || c == 'E')
            out[k++] = c;
        else if (k == 0 || out[k - 1] != '.')
            out[k++] = '.';
    }
    out[k] = '\0';
}

/* Parses a JSON number at s (grammar checked here), correctly rounded: strtod reads it without a
 * decimal point ("12.5e3" as "125e2"), which no locale reads differently. Returns the bytes
 * used, 0 if s does not start with a JSON number or it is out of the double range. */
static size_t parse_number(const char *s, double *out)
{
    char buf[96];
    size_t i = 0, k = 0, nd = 0;
    long exp10 = 0, fr = 0;
    char *end;
    if (s[i] == '-') buf[k++] = s[i++];
    if (s[i] == '0') {
        i++;
    } else if (s[i] >= '1' && s[i] <= '9') {
        while (s[i] >= '0' && s[i] <= '9') {
            if (nd < 40)
                buf[k++] = s[i], nd++;
            else
                exp10++;
            i++;
        }
    } else {
        return 0;
    }
    if (s[i] == '.') {
        i++;
        if (!(s[i] >= '0' && s[i] <= '9')) return 0;
        while (s[i] >= '0' && s[i] <= '9') {
            if (nd < 40) buf[k++] = s[i], nd++, fr++;
            i++;
        }
    }
    if (s[i] == 'e' || s[i] == 'E') {
        long e = 0;
        int neg = 0;
        i++;
        if (s[i] == '+' || s[i] == '-') neg = s[i++] == '-';
        if (!(s[i] >= '0' && s[i] <= '9')) return 0;
        while (s[i] >= '0' && s[i] <= '9') {
            if (e < 100000) e = 10 * e + (s[i] - '0');
            i++;
        }
        exp10 += neg ? -e : e;
    }
    if (nd == 0) buf[k++] = '0';
    snprintf(buf + k, sizeof buf - k, "e%ld", exp10 - fr);
    errno = 0;
    *out = strtod(buf, &end);
    if (*end != '\0' || !isfinite(*out)) return 0;
    return i;
}

/* ---- a small JSON reader (metadata.json; octree_json.h describes its values) ---- */

grove_status grove__ot_j_fail(grove__ot_jparser *p, const char *what)
{
    size_t line = 1;
    for (size_t i = 0; i < p->pos && i < p->len; i++) line += p->s[i] == '\n';
    return grove__error(p->ctx, GROVE_ERR_BAD_INPUT, "%s: line %zu: malformed JSON: %s", p->path,
                        line, what);
}

void grove__ot_j_ws(grove__ot_jparser *p)
{
    while (p->pos < p->len && strchr(" \t\r\n", p->s[p->pos]) && p->s[p->pos]) p->pos++;
}

static grove_status j_new(grove__ot_jparser *p, int type, size_t *out)
{
    if (p->nv == p->cap) {
        size_t nc = p->cap ? 2 * p->cap : 64;
        grove__ot_jval *nvv = (grove__ot_jval *)realloc(p->v, nc * sizeof *nvv);
        if (!nvv)
            return grove__error(p->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", p->path);
        p->v = nvv;
        p->cap = nc;
    }
    memset(&p->v[p->nv], 0, sizeof p->v[0]);
    p->v[p->nv].type = type;
    *out = p->nv++;
    return GROVE_OK;
}

/* A string at p->pos (the opening quote); unescapes in place and NUL-terminates. */
static grove_status j_string(grove__ot_jparser *p, const char **out)
{
    char *s = p->s, *w;
    size_t i = ++p->pos;
    w = s + i;
    *out = w;
    for (;;) {
        unsigned char c;
        if (i >= p->len) return grove__ot_j_fail(p, "unterminated string");
        c = (unsigned char)s[i];
        if (c == '"') break;
        if (c < 0x20) {
            p->pos = i;
            return grove__ot_j_fail(p, "control character in a string");
        }
        if (c == '\\') {
            char e = i + 1 < p->len ? s[i + 1] : '\0';
            const char *m = strchr("\"\\/bfnrt", e);
            if (e && m) {
                *w++ = "\"\\/\b\f\n\r\t"[m - "\"\\/bfnrt"];
                i += 2;
                continue;
            }
            if (e == 'u' && i + 5 < p->len) {
                unsigned v = 0;
                for (int k = 2; k < 6; k++) {
                    char h = s[i + (size_t)k];
                    int d = h >= '0' && h <= '9'   ? h - '0'
                            : h >= 'a' && h <= 'f' ? h - 'a' + 10
                            : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                   : -1;
                    if (d < 0) {
                        p->pos = i;
                        return grove__ot_j_fail(p, "bad \\u escape");
                    }
                    v = 16 * v + (unsigned)d;
                }
                *w++ = v > 0 && v < 0x80 ? (char)v : '?';
                i += 6;
                continue;
            }
            p->pos = i;
            return grove__ot_j_fail(p, "bad escape in a string");
        }
        *w++ = (char)c;
        i++;
    }
    *w = '\0';
    p->pos = i + 1;
    return GROVE_OK;
}

grove_status grove__ot_j_value(grove__ot_jparser *p, size_t *out)
{
    char c;
    grove__ot_j_ws(p);
    if (p->pos >= p->len) return grove__ot_j_fail(p, "unexpected end of file");
    c = p->s[p->pos];
    if (c == '{' || c == '[') {
        int obj = c == '{';
        size_t me, last = 0;
        if (++p->depth > 64) return grove__ot_j_fail(p, "nested too deeply");
        GROVE_TRY(j_new(p, obj ? GROVE__OT_J_OBJ : GROVE__OT_J_ARR, &me));
        p->pos++;
        grove__ot_j_ws(p);
        if (p->pos < p->len && p->s[p->pos] == (obj ? '}' : ']')) {
            p->pos++;
            p->depth--;
            *out = me;
            return GROVE_OK;
        }
        for (;;) {
            const char *key = NULL;
            size_t ch;
            grove__ot_j_ws(p);
            if (obj) {
                if (p->pos >= p->len || p->s[p->pos] != '"')
                    return grove__ot_j_fail(p, "expected a member name in quotes");
                GROVE_TRY(j_string(p, &key));
                grove__ot_j_ws(p);
                if (p->pos >= p->len || p->s[p->pos] != ':')
                    return grove__ot_j_fail(p, "expected ':'");
                p->pos++;
            }
            GROVE_TRY(grove__ot_j_value(p, &ch));
            p->v[ch].key = key;
            if (last)
                p->v[last - 1].next = ch + 1;
            else
                p->v[me].first = ch + 1;
            last = ch + 1;
            p->v[me].count++;
            grove__ot_j_ws(p);
            if (p->pos < p->len && p->s[p->pos] == ',') {
                p->pos++;
                continue;
            }
            if (p->pos < p->len && p->s[p->pos] == (obj ? '}' : ']')) {
                p->pos++;
                break;
            }
            return grove__ot_j_fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
        p->depth--;
        *out = me;
        return GROVE_OK;
    }
    if (c == '"') {
        const char *str;
        GROVE_TRY(j_string(p, &str));
        GROVE_TRY(j_new(p, GROVE__OT_J_STR, out));
        p->v[*out].str = str;
        return GROVE_OK;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        double d;
        size_t used = parse_number(p->s + p->pos, &d);
        if (!used) return grove__ot_j_fail(p, "bad number");
        GROVE_TRY(j_new(p, GROVE__OT_J_NUM, out));
        p->v[*out].num = d;
        p->pos += used;
        return GROVE_OK;
    }
    {
        static const char *const lit[] = {"true", "false", "null"};
        for (int k = 0; k < 3; k++) {
            size_t l = strlen(lit[k]);
            if (p->len - p->pos >= l && memcmp(p->s + p->pos, lit[k], l) == 0) {
                GROVE_TRY(j_new(p, k < 2 ? GROVE__OT_J_BOOL : GROVE__OT_J_NULL, out));
                p->v[*out].num = k == 0;
                p->pos += l;
                return GROVE_OK;
            }
        }
    }
    return grove__ot_j_fail(p, "unexpected character");
}

/* Member `key` of object o, or NULL. */
const grove__ot_jval *grove__ot_j_get(const grove__ot_jparser *p, const grove__ot_jval *o,
                                      const char *key)
{
    if (!o || o->type != GROVE__OT_J_OBJ) return NULL;
    for (size_t c = o->first; c; c = p->v[c - 1].next)
        if (strcmp(p->v[c - 1].key, key) == 0) return &p->v[c - 1];
    return NULL;
}

const grove__ot_jval *grove__ot_j_at(const grove__ot_jparser *p, const grove__ot_jval *a, size_t i)
{
    size_t c = a->first;
    while (c && i--) c = p->v[c - 1].next;
    return c ? &p->v[c - 1] : NULL;
}

/* A member that must be a number (integer: whole, 0 <= v <= max) or an array of `count`
 * finite numbers. */
grove_status grove__ot_j_uint(const grove__ot_jparser *p, const grove__ot_jval *o, const char *key,
                              double max, uint64_t *out)
{
    const grove__ot_jval *v = grove__ot_j_get(p, o, key);
    if (!v || v->type != GROVE__OT_J_NUM || !(v->num >= 0) || v->num > max ||
        v->num != floor(v->num))
        return grove__error(p->ctx, GROVE_ERR_BAD_INPUT,
                            "%s: \"%s\" is missing or not a whole number in 0..%.0f", p->path, key,
                            max);
    *out = (uint64_t)v->num;
    return GROVE_OK;
}

grove_status grove__ot_j_vec(const grove__ot_jparser *p, const grove__ot_jval *o, const char *key,
                             int count, double *out)
{
    const grove__ot_jval *v = grove__ot_j_get(p, o, key);
    if (!v || v->type != GROVE__OT_J_ARR || v->count != (size_t)count)
        return grove__error(p->ctx, GROVE_ERR_BAD_INPUT,
                            "%s: \"%s\" is missing or not an array of %d numbers", p->path, key,
                            count);
    for (int i = 0; i < count; i++) {
        const grove__ot_jval *e = grove__ot_j_at(p, v, (size_t)i);
        if (e->type != GROVE__OT_J_NUM)
            return grove__error(p->ctx, GROVE_ERR_BAD_INPUT, "%s: \"%s\"[%d] is not a number",
                                p->path, key, i);
        out[i] = e->num;
    }
    return GROVE_OK;
}

const char *grove__ot_j_str(const grove__ot_jparser *p, const grove__ot_jval *o, const char *key)
{
    const grove__ot_jval *v = grove__ot_j_get(p, o, key);
    return v && v->type == GROVE__OT_J_STR ? v->str : NULL;
}
