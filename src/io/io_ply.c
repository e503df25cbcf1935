/*
 * io_ply.c - PLY point files: ascii, binary_little_endian and binary_big_endian 1.0.
 *
 * Only the vertex element's x, y and z are kept (and, for grove__read_ply_cloud, its red, green,
 * blue and intensity). Elements before it are read and skipped record by record (list
 * properties need their counts decoded); elements after it are not read at all, since nothing
 * in them changes the points. Byte order is decoded explicitly, so the reader works on hosts of
 * either endianness.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"

typedef enum ptype { T_I8, T_U8, T_I16, T_U16, T_I32, T_U32, T_F32, T_F64 } ptype;

static const int type_size[] = {1, 1, 2, 2, 4, 4, 4, 8};
static const char *const type_name[] = {"char", "uchar", "short", "ushort",
                                        "int",  "uint",  "float", "double"};
static const struct {
    const char *name;
    ptype t;
} type_alias[] = {{"char", T_I8},   {"uchar", T_U8},   {"short", T_I16},   {"ushort", T_U16},
                  {"int", T_I32},   {"uint", T_U32},   {"float", T_F32},   {"double", T_F64},
                  {"int8", T_I8},   {"uint8", T_U8},   {"int16", T_I16},   {"uint16", T_U16},
                  {"int32", T_I32}, {"uint32", T_U32}, {"float32", T_F32}, {"float64", T_F64}};

#define NAME_LEN 64 /* longer names are cut, in messages only (roles are found before) */

typedef struct prop {
    char name[NAME_LEN];
    ptype type;
    int list;
    ptype count_type; /* lists only */
    int role;         /* vertex element: an R_ value; -1 a property that is skipped */
} prop;

/* Roles of vertex properties. The attribute roles are given only when the caller asked for
 * attributes (grove__read_ply_cloud), so grove__read_ply treats such names like any other
 * property and its behaviour does not depend on them. */
enum { R_X, R_Y, R_Z, R_RED, R_GREEN, R_BLUE, R_INTENSITY, R_COUNT };
static const char *const role_name[R_COUNT] = {"x", "y", "z", "red", "green", "blue", "intensity"};

typedef struct elem {
    char name[NAME_LEN];
    uint64_t count;
    unsigned long long line; /* header line of the element, for messages */
    prop *props;
    size_t nprops, cap;
    int vertex;
} elem;

enum { FMT_NONE, FMT_ASCII, FMT_LE, FMT_BE };

typedef struct ply {
    grove__rd *r;
    int format;
    elem *el;
    size_t nel, cap;
    int dims; /* requested, then resolved */
    int f64;  /* the points are kept in double (grove__pts.f64) */
    /* grove__read_ply_cloud only: attrs asks for the attribute roles; has_rgb / has_int say
     * which the vertex element has in a supported type; rgb (3 per point) and inten follow
     * out->xyz's capacity, acap. */
    int attrs, has_rgb, has_int;
    uint16_t *rgb, *inten;
    size_t acap;
} ply;

static int is_blank(char c) { return c == ' ' || c == '\t'; }

static int next_tok(char **pp, char *e, char **t, size_t *tl)
{
    char *p = *pp, *b;
    while (p < e && is_blank(*p)) p++;
    if (p == e) return 0;
    b = p;
    while (p < e && !is_blank(*p)) p++;
    *t = b;
    *tl = (size_t)(p - b);
    *pp = p;
    return 1;
}

static int tok_is(const char *t, size_t tl, const char *lit)
{
    return tl == strlen(lit) && memcmp(t, lit, tl) == 0;
}

static int parse_type(const char *t, size_t tl, ptype *out)
{
    size_t i;
    for (i = 0; i < sizeof type_alias / sizeof type_alias[0]; i++)
        if (tok_is(t, tl, type_alias[i].name)) {
            *out = type_alias[i].t;
            return 1;
        }
    return 0;
}

static void copy_name(char *dst, const char *t, size_t tl) { grove__quote(dst, NAME_LEN, t, tl); }

/* Parses [+-]digits into *v; 0 on a syntax error or overflow of int64. */
static int parse_int(const char *s, size_t len, long long *v)
{
    size_t i = 0;
    int neg = 0;
    unsigned long long u = 0;
    if (i < len && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i == len) return 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        if (u > (9223372036854775808ull - (unsigned)(s[i] - '0')) / 10) return 0;
        u = u * 10 + (unsigned)(s[i] - '0');
    }
    if (!neg && u > 9223372036854775807ull) return 0;
    *v = neg ? (u == 9223372036854775808ull ? (-9223372036854775807ll - 1) : -(long long)u)
             : (long long)u;
    return 1;
}

static int int_in_range(long long v, ptype t)
{
    switch (t) {
    case T_I8: return v >= -128 && v <= 127;
    case T_U8: return v >= 0 && v <= 255;
    case T_I16: return v >= -32768 && v <= 32767;
    case T_U16: return v >= 0 && v <= 65535;
    case T_I32: return v >= -2147483647ll - 1 && v <= 2147483647ll;
    case T_U32: return v >= 0 && v <= 4294967295ll;
    default: return 0;
    }
}

/* ---- header ---- */

/* "FILE: header line L: what", then `quoted` and a closing quote when it is not NULL. */
static grove_status herr(ply *s, const char *what, const char *quoted)
{
    return grove__error(s->r->ctx, GROVE_ERR_BAD_INPUT, "%s: header line %llu: %s%s%s", s->r->path,
                        (unsigned long long)s->r->line, what, quoted ? quoted : "",
                        quoted ? "'" : "");
}

static grove_status add_elem(ply *s, const char *name, size_t nl, uint64_t count)
{
    elem *e;
    if (s->nel == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 8;
        elem *ne = (elem *)realloc(s->el, nc * sizeof *ne);
        if (!ne)
            return grove__error(s->r->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory",
                                s->r->path);
        s->el = ne;
        s->cap = nc;
    }
    e = &s->el[s->nel++];
    memset(e, 0, sizeof *e);
    copy_name(e->name, name, nl);
    e->count = count;
    e->line = (unsigned long long)s->r->line;
    e->vertex = tok_is(name, nl, "vertex");
    return GROVE_OK;
}

static grove_status add_prop(ply *s, const prop *p)
{
    elem *e = &s->el[s->nel - 1];
    if (e->nprops == e->cap) {
        size_t nc = e->cap ? 2 * e->cap : 8;
        prop *np = (prop *)realloc(e->props, nc * sizeof *np);
        if (!np)
            return grove__error(s->r->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory",
                                s->r->path);
        e->props = np;
        e->cap = nc;
    }
    e->props[e->nprops++] = *p;
    return GROVE_OK;
}

/* Checks the vertex element once its properties are known. */
static grove_status check_vertex(ply *s, elem *e)
{
    int have[R_COUNT] = {0};
    size_t i;
    for (i = 0; i < e->nprops; i++)
        if (e->props[i].role >= 0) have[e->props[i].role] = 1;
    if (!have[0] || !have[1] || (s->dims == 3 && !have[2]))
        return grove__error(s->r->ctx, GROVE_ERR_BAD_INPUT,
                            "%s: header line %llu: vertex element has no property '%s'%s",
                            s->r->path, e->line,
                            !have[0]   ? "x"
                            : !have[1] ? "y"
                                       : "z",
                            have[0] && have[1] ? " (3 dimensions requested)" : "");
    if (s->dims == 0) s->dims = have[2] ? 3 : 2;
    /* With dims == 2, z is skipped like any other property. */
    if (s->dims == 2)
        for (i = 0; i < e->nprops; i++)
            if (e->props[i].role == 2) e->props[i].role = -1;
    if (s->attrs) {
        /* Colour needs all three channels; 8-bit and 16-bit unsigned types are read, any
         * other type (float colours, say) is left out rather than guessed at. */
        int ok[R_COUNT] = {0};
        for (i = 0; i < e->nprops; i++)
            if (e->props[i].role >= R_RED)
                ok[e->props[i].role] = e->props[i].type == T_U8 || e->props[i].type == T_U16;
        s->has_rgb = ok[R_RED] && ok[R_GREEN] && ok[R_BLUE];
        s->has_int = ok[R_INTENSITY];
        for (i = 0; i < e->nprops; i++) {
            int rl = e->props[i].role;
            if ((rl >= R_RED && rl <= R_BLUE && !s->has_rgb) || (rl == R_INTENSITY && !s->has_int))
                e->props[i].role = -1;
        }
    }
    return GROVE_OK;
}

static grove_status read_header(ply *s)
{
    grove__rd *r = s->r;
    char *line, *t[6];
    size_t len, tl[6];
    int got, nvertex = 0;

    GROVE_TRY(grove__rd_line(r, &line, &len, &got));
    if (!got || strcmp(line, "ply") != 0)
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                            "%s: header line 1: not a PLY file (the first line must be 'ply')",
                            r->path);
    for (;;) {
        char *p, *e;
        int nt = 0;
        char q[64];
        GROVE_TRY(grove__rd_line(r, &line, &len, &got));
        if (!got)
            return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                "%s: header line %llu: end of file before end_header", r->path,
                                (unsigned long long)r->line + 1);
        p = line;
        e = line + len;
        while (nt < 6 && next_tok(&p, e, &t[nt], &tl[nt])) nt++;
        if (nt == 6) nt = 7; /* more than any keyword takes */
        if (nt == 0) continue;
        if (tok_is(t[0], tl[0], "comment") || tok_is(t[0], tl[0], "obj_info")) continue;
        if (tok_is(t[0], tl[0], "format")) {
            if (s->format != FMT_NONE) return herr(s, "second format line", NULL);
            if (nt != 3 || !(tok_is(t[2], tl[2], "1.0") || tok_is(t[2], tl[2], "1")))
                return herr(s,
                            "unsupported format line (want 'format ascii 1.0', "
                            "'format binary_little_endian 1.0' or 'format binary_big_endian 1.0')",
                            NULL);
            if (tok_is(t[1], tl[1], "ascii"))
                s->format = FMT_ASCII;
            else if (tok_is(t[1], tl[1], "binary_little_endian"))
                s->format = FMT_LE;
            else if (tok_is(t[1], tl[1], "binary_big_endian"))
                s->format = FMT_BE;
            else {
                grove__quote(q, sizeof q, t[1], tl[1]);
                return herr(s, "unsupported format '", q);
            }
        } else if (tok_is(t[0], tl[0], "element")) {
            long long cnt;
            if (nt != 3) return herr(s, "malformed element line (want 'element NAME COUNT')", NULL);
            grove__quote(q, sizeof q, t[2], tl[2]);
            if (t[2][0] == '+' || t[2][0] == '-' || !parse_int(t[2], tl[2], &cnt))
                return herr(s, "element count is not a non-negative integer: '", q);
            if (s->nel > 0 && s->el[s->nel - 1].vertex)
                GROVE_TRY(check_vertex(s, &s->el[s->nel - 1]));
            if (tok_is(t[1], tl[1], "vertex") && nvertex++)
                return herr(s, "second vertex element", NULL);
            GROVE_TRY(add_elem(s, t[1], tl[1], (uint64_t)cnt));
        } else if (tok_is(t[0], tl[0], "property")) {
            prop pr;
            const char *nm;
            size_t nml;
            elem *el;
            if (s->nel == 0) return herr(s, "property before any element", NULL);
            el = &s->el[s->nel - 1];
            memset(&pr, 0, sizeof pr);
            if (nt >= 2 && tok_is(t[1], tl[1], "list")) {
                if (nt != 5)
                    return herr(s,
                                "malformed list property line (want 'property list COUNT_TYPE "
                                "ITEM_TYPE NAME')",
                                NULL);
                pr.list = 1;
                grove__quote(q, sizeof q, t[2], tl[2]);
                if (!parse_type(t[2], tl[2], &pr.count_type))
                    return herr(s, "unknown property type '", q);
                if (pr.count_type == T_F32 || pr.count_type == T_F64)
                    return herr(s, "list count type must be an integer type, got '", q);
                grove__quote(q, sizeof q, t[3], tl[3]);
                if (!parse_type(t[3], tl[3], &pr.type))
                    return herr(s, "unknown property type '", q);
                nm = t[4];
                nml = tl[4];
            } else {
                if (nt != 3)
                    return herr(s, "malformed property line (want 'property TYPE NAME')", NULL);
                grove__quote(q, sizeof q, t[1], tl[1]);
                if (!parse_type(t[1], tl[1], &pr.type))
                    return herr(s, "unknown property type '", q);
                nm = t[2];
                nml = tl[2];
            }
            copy_name(pr.name, nm, nml);
            pr.role = -1;
            if (el->vertex && nml == 1 && (nm[0] == 'x' || nm[0] == 'y' || nm[0] == 'z')) {
                size_t i;
                pr.role = nm[0] - 'x';
                for (i = 0; i < el->nprops; i++)
                    if (el->props[i].role == pr.role)
                        return herr(s, "second vertex property '", pr.name);
                if (pr.list) return herr(s, "vertex property is a list, not a number: '", pr.name);
            } else if (el->vertex && s->attrs && !pr.list) {
                int k;
                size_t i;
                for (k = R_RED; k < R_COUNT; k++)
                    if (tok_is(nm, nml, role_name[k])) pr.role = k;
                for (i = 0; pr.role >= 0 && i < el->nprops; i++)
                    if (el->props[i].role == pr.role)
                        return herr(s, "second vertex property '", pr.name);
            }
            GROVE_TRY(add_prop(s, &pr));
        } else if (tok_is(t[0], tl[0], "end_header")) {
            if (nt != 1) return herr(s, "text after end_header", NULL);
            break;
        } else {
            grove__quote(q, sizeof q, t[0], tl[0]);
            return herr(s, "unknown keyword '", q);
        }
    }
    if (s->format == FMT_NONE) return herr(s, "no format line before end_header", NULL);
    if (!nvertex) return herr(s, "no vertex element", NULL);
    if (s->el[s->nel - 1].vertex) GROVE_TRY(check_vertex(s, &s->el[s->nel - 1]));
    return GROVE_OK;
}

/* ---- values ---- */

/* Rounds a coordinate to the precision the points are kept in: it must be finite and, for
 * float, round to a finite float (below FLT_MAX plus half an ulp); else a GROVE__NUM_ code.
 * Every PLY value is exact in double, so f64 keeps v as it is. */
static int to_coord(double v, int f64, double *out)
{
    if (isnan(v)) return GROVE__NUM_NAN;
    if (isinf(v)) return GROVE__NUM_INF;
    if (!f64) {
        if (fabs(v) >= 0x1.ffffffp127) return GROVE__NUM_RANGE;
        v = (double)(float)v;
    }
    *out = v;
    return GROVE__NUM_OK;
}

/* The precision an ASCII value of property p is parsed to: double only when the points are
 * kept in double and the property is one, so that an ASCII file gives the values its binary
 * twin would (a float property holds floats whatever the text says). */
static int ascii_f64(const ply *s, const prop *p) { return s->f64 && p->type == T_F64; }

static uint64_t load_bits(const unsigned char *p, int size, int be)
{
    uint64_t u = 0;
    int i;
    if (be)
        for (i = 0; i < size; i++) u = (u << 8) | p[i];
    else
        for (i = size - 1; i >= 0; i--) u = (u << 8) | p[i];
    return u;
}

/* An integer property (list counts): sign-extended. */
static long long load_int(const unsigned char *p, ptype t, int be)
{
    uint64_t u = load_bits(p, type_size[t], be);
    switch (t) {
    case T_I8: return (long long)u - (u >= 0x80u ? 0x100 : 0);
    case T_I16: return (long long)u - (u >= 0x8000u ? 0x10000 : 0);
    case T_I32: return (long long)u - (u >= 0x80000000u ? 0x100000000ll : 0);
    default: return (long long)u;
    }
}

static double load_value(const unsigned char *p, ptype t, int be)
{
    if (t == T_F32) {
        uint32_t w = (uint32_t)load_bits(p, 4, be);
        float f;
        memcpy(&f, &w, 4);
        return f;
    }
    if (t == T_F64) {
        uint64_t w = load_bits(p, 8, be);
        double d;
        memcpy(&d, &w, 8);
        return d;
    }
    return (double)load_int(p, t, be);
}

static grove_status truncated(ply *s, const elem *e, uint64_t rec)
{
    return grove__error(s->r->ctx, GROVE_ERR_BAD_INPUT,
                        "%s: truncated: expected %llu %s records, file ends in record %llu",
                        s->r->path, (unsigned long long)e->count, e->name, (unsigned long long)rec);
}

/* A bad binary coordinate: rc from to_coord. */
static grove_status bin_value_error(ply *s, uint64_t rec, const prop *p, int rc, double v)
{
    const char *path = s->r->path;
    unsigned long long r = (unsigned long long)rec;
    if (rc == GROVE__NUM_NAN)
        return grove__error(s->r->ctx, GROVE_ERR_BAD_INPUT,
                            "%s: vertex record %llu: NaN in "
                            "property %s",
                            path, r, p->name);
    if (rc == GROVE__NUM_INF)
        return grove__error(s->r->ctx, GROVE_ERR_BAD_INPUT,
                            "%s: vertex record %llu: infinity in "
                            "property %s",
                            path, r, p->name);
    return grove__error(s->r->ctx, GROVE_ERR_BAD_INPUT,
                        "%s: vertex record %llu: property %s is out of %s range: %.17g", path, r,
                        p->name, grove__prec_name(s->f64), v);
}

/* Room for `want` points, and their attributes when the cloud reader asked for them. */
static grove_status reserve(ply *s, grove__pts *out, size_t *cap, size_t want, size_t limit)
{
    GROVE_TRY(grove__pts_reserve(s->r->ctx, out, cap, want, limit));
    if (*cap > s->acap && (s->has_rgb || s->has_int)) {
        if (s->has_rgb) {
            uint16_t *p = (uint16_t *)realloc(s->rgb, *cap * 3 * sizeof *p);
            if (!p) goto _nomem;
            s->rgb = p;
        }
        if (s->has_int) {
            uint16_t *p = (uint16_t *)realloc(s->inten, *cap * sizeof *p);
            if (!p) goto _nomem;
            s->inten = p;
        }
        s->acap = *cap;
    }
    return GROVE_OK;
_nomem:
    return grove__error(s->r->ctx, GROVE_ERR_OUT_OF_MEMORY,
                        "%s: out of memory for the colours of %zu points", s->r->path, *cap);
}

/* An attribute value (its type is uchar or ushort, see check_vertex) as 16 bits: 8-bit values
 * are scaled by 257 so that 255 becomes 65535, as in LAS. */
static uint16_t attr16(long long v, ptype t) { return (uint16_t)(t == T_U8 ? v * 257 : v); }

/* Stores point i's attributes a[R_RED - R_RED .. R_INTENSITY - R_RED]. */
static void put_attrs(ply *s, size_t i, const uint16_t *a)
{
    if (s->has_rgb) memcpy(s->rgb + 3 * i, a, 3 * sizeof *a);
    if (s->has_int) s->inten[i] = a[3];
}

/* Appends a vertex read property by property: its coordinates pt (already rounded) and
 * attributes a. */
static grove_status add_point(ply *s, const elem *e, grove__pts *out, size_t *cap, const double *pt,
                              const uint16_t *a)
{
    int d;
    GROVE_TRY(reserve(s, out, cap, out->n + 1, (size_t)e->count));
    for (d = 0; d < s->dims; d++) grove__pts_set(out, out->n * (size_t)s->dims + (size_t)d, pt[d]);
    if (s->has_rgb || s->has_int) put_attrs(s, out->n, a);
    out->n++;
    return GROVE_OK;
}

/* ---- binary body ---- */

/* Vertex records of fixed size: whole buffered records are decoded in one sweep. */
static grove_status bin_vertex_fixed(ply *s, const elem *e, size_t recsize, grove__pts *out)
{
    grove__rd *r = s->r;
    size_t off[R_COUNT] = {0}, cap = 0, o = 0, i;
    const prop *pr[R_COUNT] = {NULL};
    int be = s->format == FMT_BE, dims = s->dims, d;
    for (i = 0; i < e->nprops; i++) {
        if (e->props[i].role >= 0) {
            off[e->props[i].role] = o;
            pr[e->props[i].role] = &e->props[i];
        }
        o += (size_t)type_size[e->props[i].type];
    }
    while (out->n < e->count) {
        size_t avail, m, j;
        GROVE_TRY(grove__rd_need(r, recsize, &avail));
        if (avail < recsize) return truncated(s, e, out->n);
        m = avail / recsize;
        if (m > e->count - out->n) m = (size_t)(e->count - out->n);
        GROVE_TRY(reserve(s, out, &cap, out->n + m, (size_t)e->count));
        for (j = 0; j < m; j++) {
            const unsigned char *rec = (const unsigned char *)r->buf + r->beg + j * recsize;
            size_t at = (out->n + j) * (size_t)dims;
            for (d = 0; d < dims; d++) {
                double v = load_value(rec + off[d], pr[d]->type, be), c;
                int rc = to_coord(v, s->f64, &c);
                if (rc != GROVE__NUM_OK) return bin_value_error(s, out->n + j, pr[d], rc, v);
                grove__pts_set(out, at + (size_t)d, c);
            }
            if (s->has_rgb || s->has_int) {
                uint16_t a[4] = {0, 0, 0, 0};
                for (d = R_RED; d < R_COUNT; d++)
                    if (pr[d])
                        a[d - R_RED] = attr16(load_int(rec + off[d], pr[d]->type, be), pr[d]->type);
                put_attrs(s, out->n + j, a);
            }
        }
        r->beg += m * recsize;
        out->n += m;
    }
    return GROVE_OK;
}

static grove_status bin_element(ply *s, const elem *e, grove__pts *out)
{
    grove__rd *r = s->r;
    size_t recsize = 0, i, cap = 0;
    int fixed = 1, be = s->format == FMT_BE;
    uint64_t rec, done;
    for (i = 0; i < e->nprops; i++) {
        if (e->props[i].list) fixed = 0;
        recsize += (size_t)type_size[e->props[i].type];
    }
    if (fixed && e->vertex) return bin_vertex_fixed(s, e, recsize, out);
    if (fixed) {
        if (recsize == 0) return GROVE_OK;
        for (rec = 0; rec < e->count;) {
            uint64_t k = e->count - rec;
            if (k > ((uint64_t)1 << 20)) k = (uint64_t)1 << 20;
            GROVE_TRY(grove__rd_skip(r, k * recsize, &done));
            if (done < k * recsize) return truncated(s, e, rec + done / recsize);
            rec += k;
        }
        return GROVE_OK;
    }
    for (rec = 0; rec < e->count; rec++) {
        double pt[3] = {0, 0, 0};
        uint16_t a[4] = {0, 0, 0, 0};
        for (i = 0; i < e->nprops; i++) {
            const prop *p = &e->props[i];
            size_t avail;
            if (p->list) {
                size_t cs = (size_t)type_size[p->count_type];
                long long cnt;
                uint64_t bytes;
                GROVE_TRY(grove__rd_need(r, cs, &avail));
                if (avail < cs) return truncated(s, e, rec);
                cnt = load_int((const unsigned char *)r->buf + r->beg, p->count_type, be);
                r->beg += cs;
                if (cnt < 0)
                    return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                        "%s: %s record %llu: negative list count %lld in property "
                                        "%s",
                                        r->path, e->name, (unsigned long long)rec, cnt, p->name);
                bytes = (uint64_t)cnt * (uint64_t)type_size[p->type];
                GROVE_TRY(grove__rd_skip(r, bytes, &done));
                if (done < bytes) return truncated(s, e, rec);
            } else {
                size_t sz = (size_t)type_size[p->type];
                GROVE_TRY(grove__rd_need(r, sz, &avail));
                if (avail < sz) return truncated(s, e, rec);
                if (p->role >= R_RED) {
                    long long v = load_int((const unsigned char *)r->buf + r->beg, p->type, be);
                    a[p->role - R_RED] = attr16(v, p->type);
                } else if (p->role >= 0) {
                    double v = load_value((const unsigned char *)r->buf + r->beg, p->type, be);
                    int rc = to_coord(v, s->f64, &pt[p->role]);
                    if (rc != GROVE__NUM_OK) return bin_value_error(s, rec, p, rc, v);
                }
                r->beg += sz;
            }
        }
        if (e->vertex) GROVE_TRY(add_point(s, e, out, &cap, pt, a));
    }
    return GROVE_OK;
}

/* ---- ASCII body: one record per line ---- */

static grove_status ascii_value_error(ply *s, const elem *e, uint64_t rec, const prop *p, int rc,
                                      const char *t, size_t tl)
{
    char q[64];
    const char *path = s->r->path;
    unsigned long long ln = (unsigned long long)s->r->line, r = (unsigned long long)rec;
    grove__quote(q, sizeof q, t, tl);
    switch (rc) {
    case GROVE__NUM_NAN:
        return grove__error(s->r->ctx, GROVE_ERR_BAD_INPUT,
                            "%s:%llu: %s record %llu: NaN in "
                            "property %s",
                            path, ln, e->name, r, p->name);
    case GROVE__NUM_INF:
        return grove__error(s->r->ctx, GROVE_ERR_BAD_INPUT,
                            "%s:%llu: %s record %llu: infinity "
                            "in property %s",
                            path, ln, e->name, r, p->name);
    case GROVE__NUM_RANGE:
        return grove__error(s->r->ctx, GROVE_ERR_BAD_INPUT,
                            "%s:%llu: %s record %llu: property "
                            "%s is out of %s range: '%s'",
                            path, ln, e->name, r, p->name, grove__prec_name(ascii_f64(s, p)), q);
    case GROVE__NUM_NOMEM:
        return grove__error(s->r->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s:%llu: out of memory", path, ln);
    default:
        return grove__error(s->r->ctx, GROVE_ERR_BAD_INPUT,
                            "%s:%llu: %s record %llu: property "
                            "%s is not a valid %s: '%s'",
                            path, ln, e->name, r, p->name, type_name[p->type], q);
    }
}

static grove_status ascii_element(ply *s, const elem *e, grove__pts *out)
{
    grove__rd *r = s->r;
    size_t cap = 0;
    uint64_t rec;
    for (rec = 0; rec < e->count; rec++) {
        char *line, *p, *end, *t;
        size_t len, tl, i;
        int got;
        double pt[3] = {0, 0, 0};
        uint16_t a[4] = {0, 0, 0, 0};
        unsigned long long ln, rr = (unsigned long long)rec;
        do {
            GROVE_TRY(grove__rd_line(r, &line, &len, &got));
            if (!got) return truncated(s, e, rec);
            p = line;
            end = line + len;
        } while (!next_tok(&p, end, &t, &tl));
        p = line; /* the do-while peeked at the first value */
        ln = (unsigned long long)r->line;
        for (i = 0; i < e->nprops; i++) {
            const prop *pr = &e->props[i];
            if (!next_tok(&p, end, &t, &tl))
                return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                    "%s:%llu: %s record %llu: missing value for property %s",
                                    r->path, ln, e->name, rr, pr->name);
            if (pr->list) {
                long long cnt, k;
                if (!parse_int(t, tl, &cnt) || !int_in_range(cnt, pr->count_type)) {
                    char q[64];
                    grove__quote(q, sizeof q, t, tl);
                    return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                        "%s:%llu: %s record %llu: list count of property %s is "
                                        "not a valid %s: '%s'",
                                        r->path, ln, e->name, rr, pr->name,
                                        type_name[pr->count_type], q);
                }
                for (k = 0; k < cnt; k++)
                    if (!next_tok(&p, end, &t, &tl))
                        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                            "%s:%llu: %s record %llu: list property %s has %lld "
                                            "values, its count says %lld",
                                            r->path, ln, e->name, rr, pr->name, k, cnt);
            } else if (pr->role >= R_RED) {
                long long v;
                if (!parse_int(t, tl, &v) || !int_in_range(v, pr->type))
                    return ascii_value_error(s, e, rec, pr, GROVE__NUM_BAD, t, tl);
                a[pr->role - R_RED] = attr16(v, pr->type);
            } else if (pr->role >= 0) {
                int rc;
                if (pr->type == T_F32 || pr->type == T_F64) {
                    rc = grove__parse_real(t, tl, ascii_f64(s, pr), &pt[pr->role]);
                } else {
                    long long v;
                    rc = parse_int(t, tl, &v) && int_in_range(v, pr->type)
                             ? to_coord((double)v, s->f64, &pt[pr->role])
                             : GROVE__NUM_BAD;
                }
                if (rc != GROVE__NUM_OK) return ascii_value_error(s, e, rec, pr, rc, t, tl);
            }
        }
        if (next_tok(&p, end, &t, &tl))
            return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                "%s:%llu: %s record %llu: more values than the header's %zu "
                                "properties",
                                r->path, ln, e->name, rr, e->nprops);
        if (e->vertex) GROVE_TRY(add_point(s, e, out, &cap, pt, a));
    }
    return GROVE_OK;
}

static grove_status read_ply(ply *s, grove__pts *out)
{
    grove__rd *r = s->r;
    grove_status st = GROVE_OK;
    size_t i;
    GROVE_TRY_END(st, read_header(s));
    out->dims = s->dims;
    s->f64 = out->f64;
    for (i = 0; i < s->nel; i++) {
        const elem *e = &s->el[i];
        if (e->vertex && e->count > SIZE_MAX / (3 * (out->f64 ? sizeof(double) : sizeof(float)))) {
            st = grove__error(r->ctx, GROVE_ERR_LIMIT, "%s: %llu vertices do not fit in memory",
                              r->path, (unsigned long long)e->count);
            goto _end;
        }
        if (s->format == FMT_ASCII)
            GROVE_TRY_END(st, ascii_element(s, e, out));
        else
            GROVE_TRY_END(st, bin_element(s, e, out));
        if (e->vertex) break; /* later elements cannot change the points */
    }
_end:
    for (i = 0; i < s->nel; i++) free(s->el[i].props);
    free(s->el);
    return st;
}

grove_status grove__read_ply(grove__rd *r, int dims, grove__pts *out)
{
    ply s;
    memset(&s, 0, sizeof s);
    s.r = r;
    s.dims = dims;
    return read_ply(&s, out);
}

grove_status grove__read_ply_cloud(grove__rd *r, grove__pts *out, uint16_t **rgb,
                                   uint16_t **intensity)
{
    ply s;
    grove_status st;
    memset(&s, 0, sizeof s);
    s.r = r;
    s.dims = 3;
    s.attrs = 1;
    st = read_ply(&s, out);
    if (st != GROVE_OK || out->n == 0) {
        free(s.rgb);
        free(s.inten);
        s.rgb = s.inten = NULL;
    }
    *rgb = s.rgb;
    *intensity = s.inten;
    return st;
}
