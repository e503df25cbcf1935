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
 * readers, and extra columns are not read. Its rows go through the same machinery: the header
 * and first row a line at a time, the rest in blocks parsed in parallel.
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

/* ---- the columns of a cloud: x y z with colour and intensity by the header's names ---- */

/* The columns a cloud takes from a text file. */
enum { TC_X, TC_Y, TC_Z, TC_RED, TC_GREEN, TC_BLUE, TC_INTENSITY, TC_NUM };

static const char *const tc_names[TC_NUM] = {"x", "y", "z", "red", "green", "blue", "intensity"};

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

/* ---- data rows, the same for points and clouds ---- */

/* How a data row is read: a points file's first `dims` fields (col NULL), or a cloud's columns
 * by col[] (its x y z, colour and intensity fields, -1 where absent). */
typedef struct rowfmt {
    int dims;        /* values a row: 2 or 3 (a cloud: 3) */
    int f64;         /* values rounded to double (1) or to float (0) */
    const long *col; /* a cloud: the 0-based field of each TC_* column; NULL for points */
    size_t need;     /* a cloud: the fields a row must have */
    int by_name;     /* a cloud: a header named the columns (messages give the names) */
} rowfmt;

/* After the first data row, the rest of the file is read in blocks of whole lines, parsed on
 * the context's threads (a piece of whole lines a thread, values into buffers of its own), then
 * appended in order; the first error in file order is reported with its line number, as the
 * one-line-at-a-time loop would (grove__rd_pieces). The first row goes through the same row
 * parsers and messages, as a piece of one row. */

enum { PE_COLS = 1, PE_EMPTY, PE_VALUE, PE_ATTR };
typedef struct piece {
    char *beg, *end; /* whole lines; the last may lack its '\n' only at the end of the file */
    double *v;       /* dims values a row */
    uint16_t *rgb;   /* a cloud with colour: 3 a row (already times 257); else NULL */
    uint16_t *in;    /* a cloud with intensity: 1 a row; else NULL */
    size_t n;        /* rows */
    uint64_t lines;  /* lines parsed (up to and including an error's) */
    int bad;         /* PE_*: an error on line `lines` of the piece */
    size_t k;        /* PE_COLS: the row's columns; else the column, 1-based */
    int t;           /* PE_EMPTY, PE_VALUE, PE_ATTR in a cloud: the column's TC_*; else -1 */
    int rc;          /* PE_VALUE: grove__parse_real's answer */
    char *f;         /* PE_VALUE, PE_ATTR: the field */
    size_t fl;
} piece;

/* Records error `bad` in pc. @return bad. */
static int row_bad(piece *pc, int bad, size_t k, int t, int rc, char *f, size_t fl)
{
    pc->bad = bad;
    pc->k = k;
    pc->t = t;
    pc->rc = rc;
    pc->f = f;
    pc->fl = fl;
    return bad;
}

/* A points row p[0..e) into row pc->n of pc: too few fields is refused before any value is
 * looked at. @return 0, or the PE_* recorded in pc. */
static int point_row(piece *pc, char *p, char *e, const rowfmt *fm)
{
    char *f[3];
    size_t fl[3];
    double *v = pc->v + pc->n * (size_t)fm->dims;
    const size_t k = split(p, e, 3, f, fl);
    if (k < (size_t)fm->dims) return row_bad(pc, PE_COLS, k, -1, 0, NULL, 0);
    for (int c = 0; c < fm->dims; c++) {
        int rc;
        if (fl[c] == 0) return row_bad(pc, PE_EMPTY, (size_t)c + 1, -1, 0, NULL, 0);
        rc = grove__parse_real(f[c], fl[c], fm->f64, &v[c]);
        if (rc != GROVE__NUM_OK) return row_bad(pc, PE_VALUE, (size_t)c + 1, -1, rc, f[c], fl[c]);
    }
    return 0;
}

/* A cloud row p[0..e) into row pc->n of pc: each field read checked as it comes, so a bad one
 * is reported before fields missing after it; fields no column names are not looked at.
 * @return 0, or the PE_* recorded in pc. */
static int cloud_row(piece *pc, char *p, char *e, const rowfmt *fm)
{
    const size_t i = pc->n;
    fields it;
    char *f;
    size_t fl, k;
    fields_init(&it, p, e);
    for (k = 0; k < fm->need && fields_next(&it, &f, &fl); k++) {
        int t = 0;
        uint16_t a;
        while (t < TC_NUM && fm->col[t] != (long)k) t++;
        if (t == TC_NUM) continue;
        if (fl == 0) return row_bad(pc, PE_EMPTY, k + 1, t, 0, NULL, 0);
        if (t <= TC_Z) {
            const int rc = grove__parse_real(f, fl, fm->f64, &pc->v[3 * i + (size_t)t]);
            if (rc != GROVE__NUM_OK) return row_bad(pc, PE_VALUE, k + 1, t, rc, f, fl);
        } else if (attr_value(f, fl, t == TC_INTENSITY ? 65535.0 : 255.0, &a) != 0) {
            return row_bad(pc, PE_ATTR, k + 1, t, 0, f, fl);
        } else if (t == TC_INTENSITY) {
            pc->in[i] = a;
        } else {
            /* 8-bit colour to 16 bits as the PLY reader does it: 255 -> 65535 */
            pc->rgb[3 * i + (size_t)(t - TC_RED)] = (uint16_t)(a * 257u);
        }
    }
    if (k < fm->need) return row_bad(pc, PE_COLS, k, -1, 0, NULL, 0);
    return 0;
}

static int parse_row(piece *pc, char *p, char *e, const rowfmt *fm)
{
    return fm->col ? cloud_row(pc, p, e, fm) : point_row(pc, p, e, fm);
}

/* The message for the error recorded in pc, on line ln. */
static grove_status row_error(grove__rd *r, unsigned long long ln, const piece *pc,
                              const rowfmt *fm)
{
    /* where a header names the columns, messages give the name with the number */
    const char *name = fm->by_name && pc->t >= 0 ? tc_names[pc->t] : NULL;
    char q[64];
    switch (pc->bad) {
    case PE_COLS:
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: row has %zu column%s, need %zu",
                            r->path, ln, pc->k, pc->k == 1 ? "" : "s",
                            fm->col ? fm->need : (size_t)fm->dims);
    case PE_EMPTY:
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: column %zu%s%s%s is empty",
                            r->path, ln, pc->k, name ? " (" : "", name ? name : "",
                            name ? ")" : "");
    case PE_VALUE: return value_error(r, ln, pc->k, name, pc->rc, pc->f, pc->fl, fm->f64);
    default:
        grove__quote(q, sizeof q, pc->f, pc->fl);
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                            "%s:%llu: column %zu (%s) is not an integer 0..%s: '%s'", r->path, ln,
                            pc->k, tc_names[pc->t], pc->t == TC_INTENSITY ? "65535" : "255", q);
    }
}

/* Parses the piece's lines (blank lines and '#' comments skipped, a '\r' before a '\n' dropped
 * as the line reader drops it) up to the first error. */
static void parse_piece(piece *pc, const rowfmt *fm)
{
    char *at = pc->beg;
    pc->n = 0;
    pc->lines = 0;
    pc->bad = 0;
    while (at < pc->end) {
        char *nl = (char *)memchr(at, '\n', (size_t)(pc->end - at));
        char *p = at, *e = nl ? nl : pc->end;
        at = nl ? nl + 1 : pc->end;
        pc->lines++;
        if (e > p && e[-1] == '\r') e--;
        while (p < e && is_blank(*p)) p++;
        if (p == e || *p == '#') continue;
        if (parse_row(pc, p, e, fm) != 0) return;
        pc->n++;
    }
}

/* Where the rows go: out's coordinates and, for a cloud, colour and intensity arrays grown
 * with them to the same capacity. */
typedef struct dest {
    grove__pts *out;
    size_t cap;
    uint16_t *rgb, *in; /* the arrays (the caller frees them), NULL until the first row */
    int has_rgb, has_in;
} dest;

/* Room for `want` rows in d. */
static grove_status dest_reserve(grove__rd *r, dest *d, size_t want)
{
    const size_t old = d->cap;
    GROVE_TRY(grove__pts_reserve(r->ctx, d->out, &d->cap, want, 0));
    if (d->cap != old && d->has_rgb) GROVE_TRY(attr_grow(r, &d->rgb, 3, d->cap));
    if (d->cap != old && d->has_in) GROVE_TRY(attr_grow(r, &d->in, 1, d->cap));
    return GROVE_OK;
}

/* Appends the piece's rows to d (room reserved). */
static void dest_put(dest *d, const piece *pc)
{
    grove__pts *o = d->out;
    const size_t dims = (size_t)o->dims, at = o->n * dims;
    if (o->f64)
        memcpy((double *)o->xyz + at, pc->v, pc->n * dims * sizeof(double));
    else
        for (size_t j = 0; j < pc->n * dims; j++) grove__pts_set(o, at + j, pc->v[j]);
    if (d->has_rgb) memcpy(d->rgb + 3 * o->n, pc->rgb, 3 * pc->n * sizeof *d->rgb);
    if (d->has_in) memcpy(d->in + o->n, pc->in, pc->n * sizeof *d->in);
    o->n += pc->n;
}

/* The first data row p[0..e), read a line at a time (line r->line), into d. */
static grove_status first_row(grove__rd *r, char *p, char *e, const rowfmt *fm, dest *d)
{
    double v[3];
    uint16_t rgb[3], in;
    piece pc;
    memset(&pc, 0, sizeof pc);
    pc.v = v;
    pc.rgb = rgb;
    pc.in = &in;
    if (parse_row(&pc, p, e, fm) != 0) return row_error(r, (unsigned long long)r->line, &pc, fm);
    pc.n = 1;
    GROVE_TRY(dest_reserve(r, d, d->out->n + 1));
    dest_put(d, &pc);
    return GROVE_OK;
}

/* The rest of the file, in blocks. */
static grove_status read_blocks(grove__rd *r, const rowfmt *fm, dest *d)
{
    const int nt = grove__threads(r->ctx);
    /* A data row is at least 4 bytes with its '\n' ("0,0"; a cloud's are longer), a last one
     * without it 3: a piece of b bytes holds at most b / 4 + 1 rows, a block rows_max. */
    const size_t rows_max = GROVE__IO_BLOCK / 4 + (size_t)nt;
    piece *pcs = (piece *)calloc((size_t)nt, sizeof *pcs);
    char **at = (char **)malloc(((size_t)nt + 1) * sizeof *at);
    double *vals = (double *)malloc(rows_max * (size_t)fm->dims * sizeof(double));
    uint16_t *rgb = d->has_rgb ? (uint16_t *)malloc(rows_max * 3 * sizeof *rgb) : NULL;
    uint16_t *in = d->has_in ? (uint16_t *)malloc(rows_max * sizeof *in) : NULL;
    grove_status st = GROVE_OK;
    if (!pcs || !at || !vals || (d->has_rgb && !rgb) || (d->has_in && !in)) {
        st = grove__error(r->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", r->path);
        goto _end;
    }
    for (;;) {
        size_t rows = 0, o = 0;
        uint64_t lines = 0;
        int np;
        GROVE_TRY_END(st, grove__rd_pieces(r, nt, at, &np));
        if (np == 0) break;
        for (int i = 0; i < np; i++) {
            pcs[i].beg = at[i];
            pcs[i].end = at[i + 1];
            pcs[i].v = vals + o * (size_t)fm->dims;
            pcs[i].rgb = rgb ? rgb + 3 * o : NULL;
            pcs[i].in = in ? in + o : NULL;
            o += (size_t)(at[i + 1] - at[i]) / 4 + 1;
        }
#pragma omp parallel for num_threads(np) schedule(static, 1)
        for (int i = 0; i < np; i++) parse_piece(&pcs[i], fm);
        for (int i = 0; i < np; i++) {
            if (pcs[i].bad) {
                st =
                    row_error(r, (unsigned long long)(r->line + lines + pcs[i].lines), &pcs[i], fm);
                goto _end;
            }
            rows += pcs[i].n;
            lines += pcs[i].lines;
        }
        GROVE_TRY_END(st, dest_reserve(r, d, d->out->n + rows));
        for (int i = 0; i < np; i++) dest_put(d, &pcs[i]);
        grove__rd_consume(r, (size_t)(at[np] - at[0]), lines);
    }
_end:
    free(pcs);
    free(at);
    free(vals);
    free(rgb);
    free(in);
    return st;
}

/* ---- points ---- */

grove_status grove__read_text(grove__rd *r, int dims, grove__pts *out)
{
    char *f[3];
    size_t fl[3];
    int got, first = 1;
    rowfmt fm = {0, out->f64, NULL, 0, 0};
    dest d = {out, 0, NULL, NULL, 0, 0};

    GROVE_TRY(grove__rd_skip_bom(r));
    /* the header (if any) and the first data row, a line at a time; then blocks */
    for (;;) {
        char *p, *e;
        size_t k;

        GROVE_TRY(next_row(r, &p, &e, &got));
        if (!got) break;
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
        fm.dims = dims;
        GROVE_TRY(first_row(r, p, e, &fm, &d));
        break;
    }
    if (got) GROVE_TRY(read_blocks(r, &fm, &d));
    out->dims = dims ? dims : 2;
    return GROVE_OK;
}

/* ---- point clouds ---- */

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

grove_status grove__read_text_cloud(grove__rd *r, grove__pts *out, uint16_t **rgb,
                                    uint16_t **intensity)
{
    long col[TC_NUM] = {0, 1, 2, -1, -1, -1, -1};
    rowfmt fm = {3, out->f64, col, 3, 0};
    dest d = {out, 0, NULL, NULL, 0, 0};
    grove_status st = GROVE_OK;
    int got, first = 1;

    *rgb = *intensity = NULL;
    out->dims = 3;
    GROVE_TRY(grove__rd_skip_bom(r));
    /* the header (if any) and the first data row, a line at a time; then blocks */
    for (;;) {
        char *p, *e, *f;
        size_t fl;
        fields it;

        GROVE_TRY_END(st, next_row(r, &p, &e, &got));
        if (!got) break;
        if (first) {
            first = 0;
            /* the header rule of grove__read_text */
            fields_init(&it, p, e);
            fields_next(&it, &f, &fl);
            if (fl > 0 && !grove__looks_numeric(f, fl)) {
                GROVE_TRY_END(st, read_header(r, (unsigned long long)r->line, p, e, col, &fm.need,
                                              &fm.by_name));
                continue;
            }
        }
        d.has_rgb = col[TC_RED] >= 0;
        d.has_in = col[TC_INTENSITY] >= 0;
        GROVE_TRY_END(st, first_row(r, p, e, &fm, &d));
        break;
    }
    if (got) GROVE_TRY_END(st, read_blocks(r, &fm, &d));
_end:
    if (st != GROVE_OK || out->n == 0) {
        free(d.rgb);
        free(d.in);
        return st;
    }
    *rgb = d.rgb;
    *intensity = d.in;
    return GROVE_OK;
}
