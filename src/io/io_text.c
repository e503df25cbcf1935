/*
 * io_text.c - CSV and whitespace-separated point files (.csv, .txt, .xyz).
 *
 * One line at a time: a line holds one point in its first 2 or 3 fields; fields are separated
 * by a comma or by a run of spaces/tabs (whitespace around a comma is part of the separator).
 * Semicolons are deliberately not separators: in "1,5;2,5" (a decimal-comma CSV) they make a
 * field that is not a number, so such a file fails loudly instead of being read as other points.
 */
#include <string.h>

#include "io_internal.h"

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* Splits p[0..e) into at most `max` fields (pointers and lengths into the line); stops early
 * once it has `max`. Two commas with only blanks between them delimit an empty field, as does
 * a comma at either end of the line. @return the number of fields found (<= max). */
static size_t split(char *p, char *e, size_t max, char **f, size_t *fl)
{
    size_t k = 0;
    while (p < e && is_blank(*p)) p++;
    while (k < max) {
        char *b = p;
        while (p < e && *p != ',' && !is_blank(*p)) p++;
        f[k] = b;
        fl[k] = (size_t)(p - b);
        k++;
        while (p < e && is_blank(*p)) p++;
        if (p == e) break;
        if (*p == ',') {
            p++;
            while (p < e && is_blank(*p)) p++;
            if (p == e && k < max) { /* a trailing comma ends with an empty field */
                f[k] = p;
                fl[k] = 0;
                k++;
                break;
            }
        }
    }
    return k;
}

/* Is this header field the name z (optionally in double quotes, either case)? */
static int names_z(const char *s, size_t len)
{
    if (len == 3 && s[0] == '"' && s[2] == '"') {
        s++;
        len = 1;
    }
    return len == 1 && (s[0] == 'z' || s[0] == 'Z');
}

grove_status grove__read_text(grove__rd *r, int dims, grove__pts *out)
{
    char *line, *f[3];
    size_t len, fl[3], cap = 0, avail;
    int got, first = 1;
    char q[64];

    /* A UTF-8 byte order mark would otherwise make the first data line look like a header. */
    GROVE_TRY(grove__rd_need(r, 3, &avail));
    if (avail >= 3 && memcmp(r->buf + r->beg, "\xEF\xBB\xBF", 3) == 0) r->beg += 3;

    for (;;) {
        char *p, *e;
        size_t k;
        int c;
        size_t at;
        unsigned long long ln;

        GROVE_TRY(grove__rd_line(r, &line, &len, &got));
        if (!got) break;
        ln = (unsigned long long)r->line;
        p = line;
        e = line + len;
        while (p < e && is_blank(*p)) p++;
        if (p == e || *p == '#') continue;
        k = split(p, e, 3, f, fl);
        if (first) {
            first = 0;
            /* A header is text in the first field; a field spelled like a number, NaN or
             * infinity is data, so that a bad first row is reported, not skipped. */
            if (fl[0] > 0 && !grove__looks_numeric(f[0], fl[0])) {
                if (dims == 0) dims = (k >= 3 && names_z(f[2], fl[2])) ? 3 : 2;
                continue;
            }
        }
        if (dims == 0) dims = (k >= 3 && grove__looks_numeric(f[2], fl[2])) ? 3 : 2;
        if (out->dims == 0) out->dims = dims;
        if (k < (size_t)dims)
            return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                "%s:%llu: row has %zu column%s, need %d", r->path, ln, k,
                                k == 1 ? "" : "s", dims);
        if (out->n == cap) GROVE_TRY(grove__pts_reserve(r->ctx, out, &cap, out->n + 1, 0));
        at = out->n * (size_t)dims;
        for (c = 0; c < dims; c++) {
            int rc;
            double v;
            if (fl[c] == 0)
                return grove__error(r->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: column %d is empty",
                                    r->path, ln, c + 1);
            rc = grove__parse_real(f[c], fl[c], out->f64, &v);
            if (rc == GROVE__NUM_OK) {
                grove__pts_set(out, at + (size_t)c, v);
                continue;
            }
            grove__quote(q, sizeof q, f[c], fl[c]);
            switch (rc) {
            case GROVE__NUM_NAN:
                return grove__error(r->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: NaN in column %d",
                                    r->path, ln, c + 1);
            case GROVE__NUM_INF:
                return grove__error(r->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: infinity in column %d",
                                    r->path, ln, c + 1);
            case GROVE__NUM_RANGE:
                return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                    "%s:%llu: column %d is out of %s range: '%s'", r->path, ln,
                                    c + 1, grove__prec_name(out->f64), q);
            case GROVE__NUM_NOMEM:
                return grove__error(r->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s:%llu: out of memory",
                                    r->path, ln);
            default:
                return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                    "%s:%llu: column %d is not a number: '%s'", r->path, ln, c + 1,
                                    q);
            }
        }
        out->n++;
    }
    out->dims = dims ? dims : 2;
    return GROVE_OK;
}
