/*
 * io_text.c - CSV and whitespace-separated point files (.csv, .txt, .xyz).
 *
 * A line holds one point in its first 2 or 3 fields (the header and first row a line at a time,
 * the rest in blocks of lines parsed in parallel); fields are separated
 * by a comma or by a run of spaces/tabs (whitespace around a comma is part of the separator).
 * Semicolons are deliberately not separators: in "1,5;2,5" (a decimal-comma CSV) they make a
 * field that is not a number, so such a file fails loudly instead of being read as other points.
 *
 * Point clouds (grove_cloud_read) have their own reader here: a header line that names x, y and
 * z maps them, and the colour and intensity columns, by name; without one (or with a header
 * that names none of x, y, z) a row is x y z in its first three fields, as for the points
 * readers, and extra columns are not read.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* One field after another of p[0..e): fields are separated by a comma or a run of blanks; two
 * commas with only blanks between them delimit an empty field, as does a comma at either end of
 * the line (a line of blanks is one empty field). */
typedef struct fields {
    char *p, *e;
    int state; /* 0: at a field, 1: an empty field after a trailing comma is next, 2: done */
} fields;

static void fields_init(fields *it, char *p, char *e)
{
    while (p < e && is_blank(*p)) p++;
    it->p = p;
    it->e = e;
    it->state = 0;
}

static int fields_next(fields *it, char **f, size_t *fl)
{
    char *p = it->p, *b;
    if (it->state == 2) return 0;
    if (it->state == 1) {
        *f = p;
        *fl = 0;
        it->state = 2;
        return 1;
    }
    b = p;
    while (p < it->e && *p != ',' && !is_blank(*p)) p++;
    *f = b;
    *fl = (size_t)(p - b);
    while (p < it->e && is_blank(*p)) p++;
    if (p == it->e) {
        it->state = 2;
    } else if (*p == ',') {
        p++;
        while (p < it->e && is_blank(*p)) p++;
        if (p == it->e) it->state = 1;
    }
    it->p = p;
    return 1;
}

/* Splits p[0..e) into at most `max` fields (pointers and lengths into the line), as the
 * iterator above does; stops early once it has `max`. @return the number found (<= max). */
static size_t split(char *p, char *e, size_t max, char **f, size_t *fl)
{
    fields it;
    size_t k = 0;
    fields_init(&it, p, e);
    while (k < max && fields_next(&it, &f[k], &fl[k])) k++;
    return k;
}

/* The next line that holds data (blank lines and '#' comments skipped) as p[0..e), leading
 * blanks left out; *got is 0 at the end of the file. */
static grove_status next_row(grove__rd *r, char **p, char **e, int *got)
{
    char *line;
    size_t len;
    for (;;) {
        GROVE_TRY(grove__rd_line(r, &line, &len, got));
        if (!*got) return GROVE_OK;
        *p = line;
        *e = line + len;
        while (*p < *e && is_blank(**p)) (*p)++;
        if (*p < *e && **p != '#') return GROVE_OK;
    }
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

/* The error for field f[0..fl) of line ln, column `col` (1-based; `name` the header's name for
 * it, or NULL), that grove__parse_real answered rc (not GROVE__NUM_OK) for. */
static grove_status value_error(grove__rd *r, unsigned long long ln, size_t col, const char *name,
                                int rc, const char *f, size_t fl, int f64)
{
    char q[64], c[48];
    if (name)
        snprintf(c, sizeof c, "column %zu (%s)", col, name);
    else
        snprintf(c, sizeof c, "column %zu", col);
    grove__quote(q, sizeof q, f, fl);
    switch (rc) {
    case GROVE__NUM_NAN:
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: NaN in %s", r->path, ln, c);
    case GROVE__NUM_INF:
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: infinity in %s", r->path, ln, c);
    case GROVE__NUM_RANGE:
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: %s is out of %s range: '%s'",
                            r->path, ln, c, grove__prec_name(f64), q);
    case GROVE__NUM_NOMEM:
        return grove__error(r->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s:%llu: out of memory", r->path, ln);
    default:
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: %s is not a number: '%s'",
                            r->path, ln, c, q);
    }
}

/* After the first data row, the rest of a points file is read in blocks of whole lines,
 * parsed on the context's threads (a piece of whole lines a thread, values into a buffer of its
 * own), then appended in order; the first error in file order is reported with its line number,
 * as the one-line-at-a-time loop would (grove__rd_pieces). */

enum { PE_COLS = 1, PE_EMPTY, PE_VALUE };
typedef struct ppiece {
    char *beg, *end; /* whole lines; the last may lack its '\n' only at the end of the file */
    double *v;       /* dims values a row */
    size_t n;        /* rows */
    uint64_t lines;  /* lines parsed (up to and including an error's) */
    int bad;         /* PE_*: an error on line `lines` of the piece */
    size_t k;        /* PE_COLS: the row's columns; PE_EMPTY, PE_VALUE: the column, 1-based */
    int rc;          /* PE_VALUE: grove__parse_real's answer */
    char *f;         /* PE_VALUE: the field */
    size_t fl;
} ppiece;

static void parse_points(ppiece *pc, int dims, int f64)
{
    char *p = pc->beg, *f[3];
    size_t fl[3];
    pc->n = 0;
    pc->lines = 0;
    pc->bad = 0;
    while (p < pc->end) {
        char *nl = (char *)memchr(p, '\n', (size_t)(pc->end - p));
        char *e = nl ? nl : pc->end, *next = e + 1;
        size_t k;
        pc->lines++;
        if (e > p && e[-1] == '\r') e--; /* as the line reader: one '\r' before the '\n' */
        while (p < e && is_blank(*p)) p++;
        if (p == e || *p == '#') {
            p = next;
            continue;
        }
        k = split(p, e, 3, f, fl);
        if (k < (size_t)dims) {
            pc->bad = PE_COLS;
            pc->k = k;
            return;
        }
        for (int c = 0; c < dims; c++) {
            double v;
            int rc;
            if (fl[c] == 0) {
                pc->bad = PE_EMPTY;
                pc->k = (size_t)c + 1;
                return;
            }
            rc = grove__parse_real(f[c], fl[c], f64, &v);
            if (rc != GROVE__NUM_OK) {
                pc->bad = PE_VALUE;
                pc->k = (size_t)c + 1;
                pc->rc = rc;
                pc->f = f[c];
                pc->fl = fl[c];
                return;
            }
            pc->v[pc->n * (size_t)dims + (size_t)c] = v;
        }
        pc->n++;
        p = next;
    }
}

static grove_status read_rows_blocks(grove__rd *r, int dims, grove__pts *out, size_t *cap)
{
    const int nt = grove__threads(r->ctx);
    /* a data row is at least 4 bytes with its '\n' ("0,0"), a last one without it 3 */
    const size_t rows_max = GROVE__IO_BLOCK / 4 + (size_t)nt;
    ppiece *pcs = (ppiece *)calloc((size_t)nt, sizeof *pcs);
    char **at = (char **)malloc(((size_t)nt + 1) * sizeof *at);
    double *vals = (double *)malloc(rows_max * (size_t)dims * sizeof(double));
    grove_status st = GROVE_OK;
    if (!pcs || !at || !vals) {
        st = grove__error(r->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", r->path);
        goto _end;
    }
    for (;;) {
        size_t rows = 0;
        uint64_t lines = 0;
        int np;
        GROVE_TRY_END(st, grove__rd_pieces(r, nt, at, &np));
        if (np == 0) break;
        {
            double *v = vals;
            for (int i = 0; i < np; i++) {
                pcs[i].beg = at[i];
                pcs[i].end = at[i + 1];
                pcs[i].v = v;
                v += ((size_t)(at[i + 1] - at[i]) / 4 + 1) * (size_t)dims;
            }
        }
#pragma omp parallel for num_threads(np) schedule(static, 1)
        for (int i = 0; i < np; i++) parse_points(&pcs[i], dims, out->f64);
        for (int i = 0; i < np; i++) {
            const unsigned long long ln = (unsigned long long)(r->line + lines + pcs[i].lines);
            if (pcs[i].bad == PE_COLS) {
                st = grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                  "%s:%llu: row has %zu column%s, need %d", r->path, ln,
                                  pcs[i].k, pcs[i].k == 1 ? "" : "s", dims);
                goto _end;
            }
            if (pcs[i].bad == PE_EMPTY) {
                st = grove__error(r->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: column %zu is empty",
                                  r->path, ln, pcs[i].k);
                goto _end;
            }
            if (pcs[i].bad == PE_VALUE) {
                st = value_error(r, ln, pcs[i].k, NULL, pcs[i].rc, pcs[i].f, pcs[i].fl,
                                 out->f64);
                goto _end;
            }
            rows += pcs[i].n;
            lines += pcs[i].lines;
        }
        if (rows > 0) {
            size_t k = out->n * (size_t)dims;
            GROVE_TRY_END(st, grove__pts_reserve(r->ctx, out, cap, out->n + rows, 0));
            for (int i = 0; i < np; i++)
                for (size_t j = 0; j < pcs[i].n * (size_t)dims; j++)
                    grove__pts_set(out, k++, pcs[i].v[j]);
            out->n += rows;
        }
        grove__rd_consume(r, (size_t)(at[np] - at[0]), lines);
    }
_end:
    free(pcs);
    free(at);
    free(vals);
    return st;
}

grove_status grove__read_text(grove__rd *r, int dims, grove__pts *out)
{
    char *f[3];
    size_t fl[3], cap = 0;
    int got, first = 1;

    GROVE_TRY(grove__rd_skip_bom(r));
    /* the header (if any) and the first data row, a line at a time; then blocks */
    for (;;) {
        char *p, *e;
        size_t k;
        int c;
        size_t at;
        unsigned long long ln;

        GROVE_TRY(next_row(r, &p, &e, &got));
        if (!got) break;
        ln = (unsigned long long)r->line;
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
            if (rc != GROVE__NUM_OK)
                return value_error(r, ln, (size_t)c + 1, NULL, rc, f[c], fl[c], out->f64);
            grove__pts_set(out, at + (size_t)c, v);
        }
        out->n++;
        break;
    }
    if (got) GROVE_TRY(read_rows_blocks(r, dims, out, &cap));
    out->dims = dims ? dims : 2;
    return GROVE_OK;
}

/* ---- point clouds: x y z with colour and intensity by the header's names ---- */

/* The columns a cloud takes from a text file. */
enum { TC_X, TC_Y, TC_Z, TC_RED, TC_GREEN, TC_BLUE, TC_INTENSITY, TC_NUM };

static const char *const tc_names[TC_NUM] = {"x", "y", "z", "red", "green", "blue", "intensity"};


/* The column a header field names (x, y, z, r or red, g or green, b or blue, i or intensity, in
 * either case, optionally in double quotes), or -1. */
static int header_column(const char *s, size_t len)
{
    static const struct {
        const char *name;
        int col;
    } known[] = {{"x", TC_X},
                 {"y", TC_Y},
                 {"z", TC_Z},
                 {"r", TC_RED},
                 {"red", TC_RED},
                 {"g", TC_GREEN},
                 {"green", TC_GREEN},
                 {"b", TC_BLUE},
                 {"blue", TC_BLUE},
                 {"i", TC_INTENSITY},
                 {"intensity", TC_INTENSITY}};
    if (len >= 2 && s[0] == '"' && s[len - 1] == '"') {
        s++;
        len -= 2;
    }
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        const char *n = known[k].name;
        size_t j = 0;
        if (strlen(n) != len) continue;
        while (j < len && (s[j] | 0x20) == n[j]) j++;
        if (j == len) return known[k].col;
    }
    return -1;
}

/* Reads the header line's names into col[] (0-based field numbers, -1 where absent), *need
 * (the fields a row must have) and *by_name. A header that names none of x, y and z is text
 * and nothing more, as for the points readers: x y z stay the first three fields, and the
 * other names are not looked at (so "a,b,c" is not taken to name blue). */
static grove_status read_header(grove__rd *r, unsigned long long ln, char *p, char *e,
                                long col[TC_NUM], size_t *need, int *by_name)
{
    fields it;
    char *f;
    size_t fl, k = 0, dup_at = 0;
    long named[TC_NUM];
    int dup = -1, t;
    for (t = 0; t < TC_NUM; t++) named[t] = -1;
    fields_init(&it, p, e);
    for (; fields_next(&it, &f, &fl); k++) {
        t = header_column(f, fl);
        if (t < 0) continue;
        if (named[t] < 0)
            named[t] = (long)k;
        else if (dup < 0) {
            dup = t;
            dup_at = k;
        }
    }
    if (named[TC_X] < 0 && named[TC_Y] < 0 && named[TC_Z] < 0) return GROVE_OK;
    if (dup >= 0)
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                            "%s:%llu: header: columns %ld and %zu both name %s", r->path, ln,
                            named[dup] + 1, dup_at + 1, tc_names[dup]);
    for (t = TC_X; t <= TC_Z; t++)
        if (named[t] < 0)
            return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                "%s:%llu: header: no column is named %s (a header that names "
                                "x, y or z must name all three)",
                                r->path, ln, tc_names[t]);
    /* colour only as a whole */
    if (named[TC_RED] < 0 || named[TC_GREEN] < 0 || named[TC_BLUE] < 0)
        named[TC_RED] = named[TC_GREEN] = named[TC_BLUE] = -1;
    *by_name = 1;
    *need = 0;
    for (t = 0; t < TC_NUM; t++) {
        col[t] = named[t];
        if (named[t] >= 0 && (size_t)named[t] + 1 > *need) *need = (size_t)named[t] + 1;
    }
    return GROVE_OK;
}

/* An attribute value: an integer 0..max written as a decimal number ("255", "255.0", "2.55e2").
 * @return 0 with *out set, or -1. */
static int attr_value(char *f, size_t fl, double max, uint16_t *out)
{
    double v;
    if (fl == 0 || grove__parse_real(f, fl, 1, &v) != GROVE__NUM_OK) return -1;
    if (!(v >= 0.0 && v <= max) || v != floor(v)) return -1;
    *out = (uint16_t)v;
    return 0;
}

/* Grows an attribute array (`per` values a point) to cap points. */
static grove_status attr_grow(grove__rd *r, uint16_t **a, size_t per, size_t cap)
{
    uint16_t *q;
    if (cap > SIZE_MAX / (per * sizeof *q))
        return grove__error(r->ctx, GROVE_ERR_LIMIT, "%s: %zu points do not fit in memory", r->path,
                            cap);
    q = (uint16_t *)realloc(*a, cap * per * sizeof *q);
    if (!q)
        return grove__error(r->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu points",
                            r->path, cap);
    *a = q;
    return GROVE_OK;
}

grove_status grove__read_text_cloud(grove__rd *r, grove__pts *out, uint16_t **rgb,
                                    uint16_t **intensity)
{
    long col[TC_NUM] = {0, 1, 2, -1, -1, -1, -1};
    size_t need = 3, cap = 0;
    uint16_t *c = NULL, *in = NULL;
    grove_status st = GROVE_OK;
    int got, first = 1, by_name = 0;

    *rgb = *intensity = NULL;
    out->dims = 3;
    GROVE_TRY(grove__rd_skip_bom(r));
    for (;;) {
        char *p, *e, *f;
        size_t k, fl, at;
        unsigned long long ln;
        fields it;

        GROVE_TRY_END(st, next_row(r, &p, &e, &got));
        if (!got) break;
        ln = (unsigned long long)r->line;
        if (first) {
            first = 0;
            /* the header rule of grove__read_text */
            fields_init(&it, p, e);
            fields_next(&it, &f, &fl);
            if (fl > 0 && !grove__looks_numeric(f, fl)) {
                GROVE_TRY_END(st, read_header(r, ln, p, e, col, &need, &by_name));
                continue;
            }
        }
        if (out->n == cap) {
            GROVE_TRY_END(st, grove__pts_reserve(r->ctx, out, &cap, out->n + 1, 0));
            if (col[TC_RED] >= 0) GROVE_TRY_END(st, attr_grow(r, &c, 3, cap));
            if (col[TC_INTENSITY] >= 0) GROVE_TRY_END(st, attr_grow(r, &in, 1, cap));
        }
        at = out->n;
        fields_init(&it, p, e);
        for (k = 0; k < need && fields_next(&it, &f, &fl); k++) {
            for (int t = 0; t < TC_NUM; t++) {
                /* where a header names the columns, messages give the name with the number */
                const char *name = by_name ? tc_names[t] : NULL;
                if (col[t] != (long)k) continue;
                if (fl == 0) {
                    st = grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                      "%s:%llu: column %zu%s%s%s is empty", r->path, ln, k + 1,
                                      name ? " (" : "", name ? name : "", name ? ")" : "");
                    goto _end;
                }
                if (t <= TC_Z) {
                    double v;
                    int rc = grove__parse_real(f, fl, out->f64, &v);
                    if (rc != GROVE__NUM_OK) {
                        st = value_error(r, ln, k + 1, name, rc, f, fl, out->f64);
                        goto _end;
                    }
                    grove__pts_set(out, 3 * at + (size_t)t, v);
                } else {
                    int is_rgb = t != TC_INTENSITY;
                    uint16_t v;
                    if (attr_value(f, fl, is_rgb ? 255.0 : 65535.0, &v) != 0) {
                        char q[64];
                        grove__quote(q, sizeof q, f, fl);
                        st = grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                          "%s:%llu: column %zu (%s) is not an integer 0..%s: '%s'",
                                          r->path, ln, k + 1, tc_names[t], is_rgb ? "255" : "65535",
                                          q);
                        goto _end;
                    }
                    /* 8-bit colour to 16 bits as the PLY reader does it: 255 -> 65535 */
                    if (is_rgb)
                        c[3 * at + (size_t)(t - TC_RED)] = (uint16_t)(v * 257u);
                    else
                        in[at] = v;
                }
            }
        }
        if (k < need) {
            st =
                grove__error(r->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: row has %zu column%s, need %zu",
                             r->path, ln, k, k == 1 ? "" : "s", need);
            goto _end;
        }
        out->n++;
    }
_end:
    if (st != GROVE_OK || out->n == 0) {
        free(c);
        free(in);
        return st;
    }
    *rgb = c;
    *intensity = in;
    return GROVE_OK;
}
