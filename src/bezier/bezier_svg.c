/*
 * bezier_svg.c - curves from SVG path data and basic shapes: grove__bz_read_svg(), which
 * grove_curves_read() (bezier_io.c) calls for an SVG file. The XML scan, the transform and
 * path-data grammars and the elements share one document state, so they stay together in this
 * one unit.
 *
 * SVG files are read whole: an element's transform applies to everything up to its end tag,
 * which can be anywhere in the file. The reader is a small XML scanner, not a validating parser:
 * it knows comments, CDATA sections, processing instructions, a DOCTYPE (skipped, internal
 * subset included), quoted attributes and the five predefined and the numeric character
 * references; element names are compared without their namespace prefix. <use> draws its
 * target by scanning that element again with the use's transform; the ids are indexed by a
 * first pass at the first <use>. Nested <svg> viewports map their viewBox. Of CSS, display and
 * visibility are read from presentation and style attributes and from <style> sheets (element,
 * class and id selectors; a pass of their own before the main scan); everything else (other
 * selectors and properties, defined entities) is outside what the module reads, and the
 * documentation says so (docs/bezier.md).
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bezier_io.h"

/* ---- SVG: the XML scan ---- */

/* An affine map x' = a x + c y + e, y' = b x + d y + f, as SVG's matrix(a b c d e f). */
typedef struct affine {
    double a, b, c, d, e, f;
} affine;

static const affine identity = {1, 0, 0, 1, 0, 0};

/* The translation by (x, y). */
static affine translation(double x, double y)
{
    affine t = {1, 0, 0, 1, x, y};
    return t;
}

/* m * n: n applies first. */
static affine compose(const affine *m, const affine *n)
{
    affine r;
    r.a = m->a * n->a + m->c * n->b;
    r.b = m->b * n->a + m->d * n->b;
    r.c = m->a * n->c + m->c * n->d;
    r.d = m->b * n->c + m->d * n->d;
    r.e = m->a * n->e + m->c * n->f + m->e;
    r.f = m->b * n->e + m->d * n->f + m->f;
    return r;
}

/* The elements whose outlines are read: <path> and the basic shapes, which SVG 2 (chapter 10)
 * defines as equivalent paths. */
enum { SH_PATH, SH_RECT, SH_CIRCLE, SH_ELLIPSE, SH_LINE, SH_POLYLINE, SH_POLYGON, SH_COUNT };

/* An open element: its transform, whether what it holds is drawn (not inside <defs>,
 * <symbol>, <clipPath>, <mask>, <marker> or <pattern>, unless a <use> draws it, nor under
 * display="none"), and its visibility (invis: hidden or collapse, which its content inherits
 * unless it says visible). */
typedef struct frame {
    affine m;
    int hidden;
    int invis;
    double vw, vh; /* the nearest viewport's size in user units (percentages), ... */
    int vk;        /* ... when known */
} frame;

/* An element with an id, for <use>: the decoded id and where its start tag begins. */
typedef struct id_entry {
    char *id;
    size_t at;
} id_entry;

/* What an error about an unknown viewport size says would give it. */
#define SVG_VIEWPORT_HINT "(a viewBox, or width and height, on the root <svg>)"

/* How deep <use> references may nest (a use drawing a group that holds a use ...). */
#define SVG_USE_DEPTH 32

/* The most bytes that <use>s may scan in all for a file of n bytes (what they draw, nested uses
 * included): uses that each draw the previous twice double the work a level, and 30 levels fit
 * in 2 KB. */
#define SVG_USE_WORK(n) (((size_t)32 << 20) + 32 * (size_t)(n))

typedef struct svg_doc {
    grove_ctx *ctx;
    const char *path;
    char *s; /* the whole file, NUL-terminated */
    size_t n;
    size_t line_pos; /* line numbers: the byte up to which newlines are counted ... */
    unsigned long long line_no; /* ... and the 1-based line there */
    frame *stack;    /* the open elements, outermost first */
    size_t depth, stack_cap;
    size_t count[SH_COUNT]; /* the <path> and basic-shape elements seen so far, by kind */
    size_t uses;     /* the <use> elements seen so far */
    int svg_seen;    /* an <svg> element has started */
    char *val;       /* an attribute value with its references replaced */
    size_t *raw;     /* raw[i]: the file offset of val[i] (for the line of an error) */
    size_t val_cap;
    grove__bz_sink *sink;
    /* <use> */
    int indexing;         /* the id pass: record ids, draw nothing */
    id_entry *ids;        /* sorted by id; built at the first <use> */
    size_t nids, ids_cap;
    int ids_built;
    size_t active[SVG_USE_DEPTH]; /* the start tags being drawn for <use>s, outermost first */
    size_t nactive;
    size_t use_no;        /* the number of the outermost <use> being drawn (when nactive > 0) */
    int force_shown;      /* the next start tag is a <use>'s target: drawn wherever it is ... */
    affine extra;         /* ... with this after its own transform (a symbol's viewBox) */
    size_t scan_end;      /* where the last scan_from() stopped */
    size_t use_work;      /* bytes scanned for <use>s so far, against SVG_USE_WORK */
    /* <style> sheets (css_build) */
    char *css_text; /* the sheets' text, one after the other */
    size_t css_len, css_cap;
    struct css_span *css_sheets; /* each sheet's span of css_text */
    size_t css_nsheets, css_sheets_cap;
    struct css_rule *css_rules; /* a selector each, in the sheets' order */
    size_t css_nrules, css_rules_cap;
    struct css_span *css_cls; /* the rules' classes */
    size_t css_ncls, css_cls_cap;
    struct css_key *css_keys; /* the index */
    size_t css_nkeys;
    struct css_span *css_tok; /* an element's classes, spans of x->val */
    size_t css_tok_cap;
    size_t css_work;          /* rule tries so far, against SVG_CSS_WORK */
    char *css_id;             /* an element's decoded id */
    size_t css_id_cap;
} svg_doc;

/* The 1-based line of file offset pos. Errors and elements come in file order, so the count
 * usually moves forward only. */
static unsigned long long line_of(svg_doc *x, size_t pos)
{
    if (pos < x->line_pos) {
        x->line_pos = 0;
        x->line_no = 1;
    }
    for (; x->line_pos < pos && x->line_pos < x->n; x->line_pos++)
        if (x->s[x->line_pos] == '\n') x->line_no++;
    return x->line_no;
}

static grove_status svg_bad(svg_doc *x, size_t pos, const char *what)
{
    return grove__error(x->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: %s", x->path, line_of(x, pos),
                        what);
}

static int is_xml_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Skips past the first occurrence of lit at or after *i; 0 if there is none. */
static int skip_past(const svg_doc *x, size_t *i, const char *lit)
{
    size_t m = strlen(lit);
    for (size_t j = *i; j + m <= x->n; j++)
        if (x->s[j] == lit[0] && memcmp(x->s + j, lit, m) == 0) {
            *i = j + m;
            return 1;
        }
    return 0;
}

/* The markup at x->s[*i] (just after a '<') that holds no element: a comment, a CDATA section, a
 * processing instruction or a <!...> declaration (a DOCTYPE, its internal subset included, whose
 * '>'s do not end it). 0: none is there; 1: *i moved past it; -1: it is not terminated, and
 * *what says which it is. */
static int skip_markup(const svg_doc *x, size_t *i, const char **what)
{
    const char *s = x->s;
    size_t k = *i;
    int ok;
    if (x->n - k >= 3 && memcmp(s + k, "!--", 3) == 0) {
        k += 3;
        ok = skip_past(x, &k, "-->");
        *what = "unterminated comment";
    } else if (x->n - k >= 8 && memcmp(s + k, "![CDATA[", 8) == 0) {
        k += 8;
        ok = skip_past(x, &k, "]]>");
        *what = "unterminated CDATA section";
    } else if (k < x->n && s[k] == '?') {
        ok = skip_past(x, &k, "?>");
        *what = "unterminated processing instruction";
    } else if (k < x->n && s[k] == '!') {
        int bracket = 0;
        char quote = 0;
        for (; k < x->n; k++) {
            const char c = s[k];
            if (quote) {
                if (c == quote) quote = 0;
            } else if (c == '"' || c == '\'') {
                quote = c;
            } else if (c == '[') {
                bracket++;
            } else if (c == ']') {
                bracket--;
            } else if (c == '>' && bracket <= 0) {
                break;
            }
        }
        ok = k < x->n;
        k++;
        *what = "unterminated <!...> declaration";
    } else {
        return 0;
    }
    if (!ok) return -1;
    *i = k;
    return 1;
}

static void put_utf8(char *d, size_t *k, unsigned long cp)
{
    if (cp < 0x80) {
        d[(*k)++] = (char)cp;
    } else if (cp < 0x800) {
        d[(*k)++] = (char)(0xC0 | (cp >> 6));
        d[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        d[(*k)++] = (char)(0xE0 | (cp >> 12));
        d[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        d[(*k)++] = (char)(0xF0 | (cp >> 18));
        d[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        d[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[(*k)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* Decodes the raw attribute value s[b..e) into x->val (NUL-terminated), *len its length,
 * with x->raw mapping each decoded byte back to the file. */
static grove_status decode_value(svg_doc *x, size_t b, size_t e, size_t *len)
{
    size_t k = 0, i = b;
    char msg[192], q[64];
    if (e - b + 1 > x->val_cap) {
        size_t nc = e - b + 1;
        char *v = (char *)realloc(x->val, nc);
        size_t *r;
        if (!v) goto oom;
        x->val = v;
        r = (size_t *)realloc(x->raw, nc * sizeof *r);
        if (!r) goto oom;
        x->raw = r;
        x->val_cap = nc;
    }
    while (i < e) {
        size_t semi, start = i;
        unsigned long cp = 0;
        if (x->s[i] != '&') {
            x->raw[k] = i;
            x->val[k++] = x->s[i++];
            continue;
        }
        for (semi = i + 1; semi < e && semi - i <= 12 && x->s[semi] != ';'; semi++) {
        }
        if (semi >= e || x->s[semi] != ';') {
            grove__quote(q, sizeof q, x->s + i, e - i < 12 ? e - i : 12);
            snprintf(msg, sizeof msg, "'&' that starts no entity reference: '%s'", q);
            return svg_bad(x, i, msg);
        }
        {
            const char *nm = x->s + i + 1;
            size_t nl = semi - i - 1;
            if (nl == 3 && memcmp(nm, "amp", 3) == 0)
                cp = '&';
            else if (nl == 2 && memcmp(nm, "lt", 2) == 0)
                cp = '<';
            else if (nl == 2 && memcmp(nm, "gt", 2) == 0)
                cp = '>';
            else if (nl == 4 && memcmp(nm, "quot", 4) == 0)
                cp = '"';
            else if (nl == 4 && memcmp(nm, "apos", 4) == 0)
                cp = '\'';
            else if (nl >= 2 && nm[0] == '#') {
                int hex = nm[1] == 'x';
                size_t j = hex ? 2 : 1;
                if (j == nl) cp = 0x110000;
                for (; j < nl && cp <= 0x10FFFF; j++) {
                    char c = nm[j];
                    int dv = c >= '0' && c <= '9'                  ? c - '0'
                             : hex && c >= 'a' && c <= 'f'         ? c - 'a' + 10
                             : hex && c >= 'A' && c <= 'F'         ? c - 'A' + 10
                                                                   : -1;
                    if (dv < 0) {
                        cp = 0x110000;
                        break;
                    }
                    cp = cp * (hex ? 16u : 10u) + (unsigned long)dv;
                }
                if (cp == 0 || cp > 0x10FFFF) {
                    grove__quote(q, sizeof q, x->s + i, semi + 1 - i);
                    snprintf(msg, sizeof msg, "bad character reference '%s'", q);
                    return svg_bad(x, i, msg);
                }
            } else {
                grove__quote(q, sizeof q, x->s + i, semi + 1 - i);
                snprintf(msg, sizeof msg,
                         "unknown entity '%s' (only &amp; &lt; &gt; &quot; &apos; and &#...; "
                         "are read)",
                         q);
                return svg_bad(x, i, msg);
            }
        }
        /* at most 4 bytes out for at least 4 bytes in ("&lt;" is the shortest) */
        {
            size_t k0 = k;
            put_utf8(x->val, &k, cp);
            for (; k0 < k; k0++) x->raw[k0] = start;
        }
        i = semi + 1;
    }
    x->raw[k] = e;
    x->val[k] = '\0';
    *len = k;
    return GROVE_OK;
oom:
    return grove__error(x->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for an attribute",
                        x->path);
}

/* ---- SVG: numbers, transforms, path data ---- */

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* The end of the longest SVG number at v[i] (i itself if there is none):
 * [+-] (digits [. digits] | . digits) [(e|E) [+-] digits]. An 'e' without digits after it is
 * not part of the number. */
static size_t number_end(const char *v, size_t i, size_t n)
{
    size_t j = i, d0;
    if (j < n && (v[j] == '+' || v[j] == '-')) j++;
    d0 = j;
    while (j < n && is_digit(v[j])) j++;
    if (j < n && v[j] == '.') {
        size_t f0 = ++j;
        while (j < n && is_digit(v[j])) j++;
        if (j == f0 && f0 - 1 == d0) return i; /* a lone '.' */
    } else if (j == d0) {
        return i;
    }
    if (j < n && (v[j] == 'e' || v[j] == 'E')) {
        size_t k = j + 1;
        if (k < n && (v[k] == '+' || v[k] == '-')) k++;
        if (k < n && is_digit(v[k])) {
            while (k < n && is_digit(v[k])) k++;
            j = k;
        }
    }
    return j;
}

/* Skips white space and at most one comma. */
static size_t skip_sep(const char *v, size_t i, size_t n)
{
    while (i < n && is_xml_space(v[i])) i++;
    if (i < n && v[i] == ',') i++;
    while (i < n && is_xml_space(v[i])) i++;
    return i;
}

/* What an error inside an attribute value says about where it is. */
typedef struct where {
    char prefix[160]; /* "path 3 (id "x"): ", "circle 0: " or "<g>: " */
    const char *attr; /* "d", "transform", "points", "r", ...; NULL: the error concerns the
                       * element as a whole (a basic shape's outline), at file offset tag */
    size_t tag;
} where;

static grove_status value_bad(svg_doc *x, const where *w, size_t pos, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static grove_status value_bad(svg_doc *x, const where *w, size_t pos, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!w->attr)
        return grove__error(x->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: %s%s", x->path,
                            line_of(x, w->tag), w->prefix, msg);
    return grove__error(x->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: %s%s (character %zu of %s)",
                        x->path, line_of(x, x->raw[pos]), w->prefix, msg, pos + 1, w->attr);
}

/* Reads the number at x->val[*i] (after a separator) into *out. Returns GROVE_OK, or an error
 * naming `what` (the command or function that needs it) when there is no number there. */
static grove_status read_number(svg_doc *x, const where *w, size_t *i, size_t n, double *out,
                                const char *what, int have, int need)
{
    size_t b = skip_sep(x->val, *i, n), e = number_end(x->val, b, n);
    char q[64];
    float f;
    int rc;
    if (e == b) {
        const char *pl = need == 1 ? "" : "s";
        if (b >= n)
            return value_bad(x, w, b, "%s needs %d number%s, found %d before the end", what,
                             need, pl, have);
        grove__quote(q, sizeof q, x->val + b, 1);
        return value_bad(x, w, b, "%s needs %d number%s, found %d before '%s'", what, need, pl,
                         have, q);
    }
    if (e < n && (x->val[e] == 'e' || x->val[e] == 'E')) {
        /* "1e" or "1e+": the grammar ends the number before the 'e', which no command is, but
         * the file meant an exponent */
        size_t k = e + 1;
        if (k < n && (x->val[k] == '+' || x->val[k] == '-')) k++;
        grove__quote(q, sizeof q, x->val + b, k - b);
        return value_bad(x, w, b, "malformed number '%s' (an exponent needs digits)", q);
    }
    rc = grove__parse_float(x->val + b, e - b, &f);
    grove__quote(q, sizeof q, x->val + b, e - b);
    if (rc == GROVE__NUM_RANGE) return value_bad(x, w, b, "number '%s' is out of float range", q);
    if (rc == GROVE__NUM_NOMEM)
        return grove__error(x->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", x->path);
    if (rc != GROVE__NUM_OK) return value_bad(x, w, b, "malformed number '%s'", q);
    *out = (double)f;
    *i = e;
    return GROVE_OK;
}

/* Parses a transform attribute (in x->val[0..n)) into *m. */
static grove_status parse_transform(svg_doc *x, const where *w, size_t n, affine *m)
{
    static const struct {
        const char *name;
        int min, max;
    } fns[] = {{"matrix", 6, 6}, {"translate", 1, 2}, {"scale", 1, 2},
               {"rotate", 1, 3}, {"skewX", 1, 1},     {"skewY", 1, 1}};
    const double deg = 3.14159265358979323846 / 180.0;
    size_t i = 0;
    *m = identity;
    for (;;) {
        size_t b, fi, nf = sizeof fns / sizeof fns[0];
        double a[6];
        int k = 0;
        affine t = identity;
        char q[64];
        while (i < n && (is_xml_space(x->val[i]) || x->val[i] == ',')) i++;
        if (i >= n) break;
        b = i;
        while (i < n && ((x->val[i] >= 'a' && x->val[i] <= 'z') ||
                         (x->val[i] >= 'A' && x->val[i] <= 'Z')))
            i++;
        for (fi = 0; fi < nf; fi++)
            if (strlen(fns[fi].name) == i - b && memcmp(fns[fi].name, x->val + b, i - b) == 0)
                break;
        if (fi == nf) {
            grove__quote(q, sizeof q, x->val + b, i > b ? i - b : 1);
            return value_bad(x, w, b, "unknown transform '%s' (want matrix, translate, scale, "
                                      "rotate, skewX or skewY)", q);
        }
        while (i < n && is_xml_space(x->val[i])) i++;
        if (i >= n || x->val[i] != '(')
            return value_bad(x, w, i < n ? i : n, "'(' expected after %s", fns[fi].name);
        i++;
        for (;;) {
            while (i < n && is_xml_space(x->val[i])) i++;
            if (i >= n) return value_bad(x, w, n, "')' missing after %s(", fns[fi].name);
            if (x->val[i] == ')') break;
            if (k == fns[fi].max)
                return value_bad(x, w, i, "%s takes at most %d numbers", fns[fi].name,
                                 fns[fi].max);
            GROVE_TRY(read_number(x, w, &i, n, &a[k], fns[fi].name, k, fns[fi].min));
            k++;
        }
        i++; /* ')' */
        if (k < fns[fi].min || (fi == 3 && k == 2))
            return value_bad(x, w, i - 1, "%s takes %s numbers, found %d", fns[fi].name,
                             fi == 0 ? "6" : fi == 3 ? "1 or 3" : fi >= 4 ? "1" : "1 or 2", k);
        switch (fi) {
        case 0:
            t.a = a[0], t.b = a[1], t.c = a[2], t.d = a[3], t.e = a[4], t.f = a[5];
            break;
        case 1:
            t.e = a[0];
            t.f = k == 2 ? a[1] : 0.0;
            break;
        case 2:
            t.a = a[0];
            t.d = k == 2 ? a[1] : a[0];
            break;
        case 3: {
            double cs = cos(a[0] * deg), sn = sin(a[0] * deg);
            t.a = cs, t.b = sn, t.c = -sn, t.d = cs;
            if (k == 3) { /* translate(cx, cy) rotate(a) translate(-cx, -cy) */
                t.e = a[1] - cs * a[1] + sn * a[2];
                t.f = a[2] - sn * a[1] - cs * a[2];
            }
            break;
        }
        case 4:
            t.c = tan(a[0] * deg);
            break;
        default:
            t.b = tan(a[0] * deg);
            break;
        }
        *m = compose(m, &t);
    }
    return GROVE_OK;
}

/* The state of one path's data while its segments are emitted. */
typedef struct path_state {
    svg_doc *x;
    const where *w;
    affine m;
    size_t at; /* where the current command starts in x->val, for errors */
} path_state;

/* Emits a curve of degree deg through the untransformed control points p[0..2 deg + 1]. */
static grove_status emit(path_state *ps, int deg, const double *p)
{
    float xy[8];
    const affine *m = &ps->m;
    const int plain = m->a == 1.0 && m->b == 0.0 && m->c == 0.0 && m->d == 1.0 &&
                         m->e == 0.0 && m->f == 0.0;
    for (int i = 0; i <= deg; i++) {
        double u = m->a * p[2 * i] + m->c * p[2 * i + 1] + m->e;
        double v = m->b * p[2 * i] + m->d * p[2 * i + 1] + m->f;
        if (!(fabs(u) <= (double)GROVE_BEZIER_MAX_COORD) ||
            !(fabs(v) <= (double)GROVE_BEZIER_MAX_COORD))
            return value_bad(ps->x, ps->w, ps->at,
                             "a control point (%.9g, %.9g)%s is larger in magnitude than %g, "
                             "the largest coordinate accepted",
                             u, v, plain ? "" : " (after the transform)",
                             (double)GROVE_BEZIER_MAX_COORD);
        xy[2 * i] = (float)u;
        xy[2 * i + 1] = (float)v;
    }
    return grove__bz_sink_push(ps->x->sink, deg, xy);
}

/* Reads an arc flag at x->val[*i] (after a separator) into *out. A flag is the single character
 * 0 or 1 and needs no separator after it: "a1 1 0 11 2 2" has both flags 1 (SVG's grammar).
 * flag names it in errors; have counts the arc's numbers read so far. */
static grove_status read_flag(svg_doc *x, const where *w, size_t *i, size_t n, double *out,
                              const char *what, const char *flag, int have)
{
    size_t b = skip_sep(x->val, *i, n), e = number_end(x->val, b, n);
    char q[64];
    if (b < n && (x->val[b] == '0' || x->val[b] == '1')) {
        *out = x->val[b] - '0';
        *i = b + 1;
        return GROVE_OK;
    }
    if (e > b) {
        grove__quote(q, sizeof q, x->val + b, e - b);
        return value_bad(x, w, b, "%s %s must be 0 or 1, not '%s'", what, flag, q);
    }
    /* no number at all: read_number words the "needs 7 numbers, found ..." error */
    return read_number(x, w, i, n, out, what, have, 7);
}

/* Emits the elliptical arc from p[0], p[1] given by a[0..6] (rx ry x-axis-rotation large-arc
 * sweep x y, the end point absolute) as at most four cubics of at most 90 degrees each, after
 * the implementation notes of SVG 1.1 (F.6) and of SVG 2. The arc is the image of an arc
 * of the unit circle under scale(rx, ry) then rotate(phi), and the endpoint-to-centre
 * conversion is done on that circle: with 2 h the chord there, the short arc spans
 * 2 atan2(h, sqrt(1 - h^2)). Points are formed as offsets from the start point and tangents
 * rather than from the centre, which lies far away when the radii dwarf the chord: differences
 * of large numbers would lose the arc's shape. The end point is the path's, not a cos/sin. */
static grove_status emit_arc(path_state *ps, const double *p, const double *a)
{
    const double pi = 3.14159265358979323846;
    double x1 = p[0], y1 = p[1], x2 = a[5], y2 = a[6], rx = fabs(a[0]), ry = fabs(a[1]);
    double phi, cs, sn, hx, hy, ux, uy, h, root, sgn, dth, th1, step, alpha, q[8];
    double px, py, tx, ty;
    int pieces;

    if (x1 == x2 && y1 == y2) return GROVE_OK; /* F.6.2: the arc is omitted */
    if (rx == 0 || ry == 0) {                   /* F.6.2: a straight line */
        q[0] = x1, q[1] = y1, q[2] = x2, q[3] = y2;
        return emit(ps, 1, q);
    }
    phi = fmod(a[2], 360.0) * (pi / 180.0);
    cs = cos(phi), sn = sin(phi);
    /* F.6.5.1: the start point seen from the chord's middle, in the unit circle's frame */
    hx = (x1 - x2) / 2, hy = (y1 - y2) / 2;
    ux = (cs * hx + sn * hy) / rx;
    uy = (-sn * hx + cs * hy) / ry;
    /* h > 0: coordinates are sums of floats, so distinct endpoints differ by 2^-149 or more,
     * and the radii are at most FLT_MAX; nothing here comes near double's underflow */
    h = hypot(ux, uy);
    if (h >= 1) { /* F.6.6: radii too small for the endpoints grow until the chord fits */
        rx *= h, ry *= h, ux /= h, uy /= h;
        h = 1;
        root = 0;
    } else {
        root = sqrt((1 - h) * (1 + h));
    }
    /* F.6.5.2: the centre lies at root / h times the perpendicular (uy, -ux) from the chord's
     * middle, on the side that the flags choose; the start angle is that of start - centre */
    sgn = (a[3] != a[4]) ? 1.0 : -1.0;
    th1 = atan2(uy + sgn * root * (ux / h), ux - sgn * root * (uy / h));
    /* F.6.5.6: the sweep, positive (increasing angle) when the sweep flag is 1 */
    dth = 2 * atan2(h, root);
    if (a[3] != 0) dth = 2 * pi - dth;
    if (a[4] == 0) dth = -dth;
    /* the 1e-9 keeps a sweep of k quarter turns, rounded up in its last bit, in k pieces */
    pieces = (int)ceil(fabs(dth) / (pi / 2) - 1e-9);
    if (pieces < 1) pieces = 1;
    step = dth / pieces;
    alpha = 4.0 / 3.0 * tan(step / 4);
    px = x1, py = y1;
    tx = cs * (-rx * sin(th1)) - sn * (ry * cos(th1));
    ty = sn * (-rx * sin(th1)) + cs * (ry * cos(th1));
    for (int k = 1; k <= pieces; k++) {
        double th = th1 + k * step, nx, ny;
        q[0] = px, q[1] = py;
        q[2] = px + alpha * tx, q[3] = py + alpha * ty;
        if (k == pieces) {
            nx = x2, ny = y2;
        } else {
            /* cos th - cos th1 and sin th - sin th1 as products: no cancellation */
            double s = sin(k * step / 2), mid = th1 + k * step / 2;
            double dc = -2 * sin(mid) * s, ds = 2 * cos(mid) * s;
            nx = x1 + (cs * (rx * dc) - sn * (ry * ds));
            ny = y1 + (sn * (rx * dc) + cs * (ry * ds));
        }
        tx = cs * (-rx * sin(th)) - sn * (ry * cos(th));
        ty = sn * (-rx * sin(th)) + cs * (ry * cos(th));
        q[4] = nx - alpha * tx, q[5] = ny - alpha * ty;
        q[6] = nx, q[7] = ny;
        GROVE_TRY(emit(ps, 3, q));
        px = nx, py = ny;
    }
    return GROVE_OK;
}

/* Numbers each command takes (an arc's flags count as numbers). */
static int command_args(char c)
{
    switch (c | 0x20) {
    case 'm': case 'l': case 't': return 2;
    case 'h': case 'v': return 1;
    case 'q': case 's': return 4;
    case 'c': return 6;
    case 'a': return 7;
    default: return 0; /* z */
    }
}

/* Emits the segments of the path data in x->val[0..n). */
static grove_status parse_path_data(svg_doc *x, const where *w, const affine *m, size_t n)
{
    const char *v = x->val;
    path_state ps;
    double cx = 0, cy = 0, sx = 0, sy = 0, kx = 0, ky = 0; /* current, subpath start, control */
    char cmd = 0, prev = 0, q[64];
    size_t i = 0;

    ps.x = x;
    ps.w = w;
    ps.m = *m;
    ps.at = 0;
    for (;;) {
        double a[7], p[8];
        int need, rel, k;
        char c;
        i = skip_sep(v, i, n);
        if (i >= n) break;
        c = v[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            if (!strchr("MmLlHhVvQqTtCcSsAaZz", c))
                return value_bad(x, w, i, "command '%c' is not supported (M L H V Q T C S A Z "
                                          "are, in either case)", c);
            if (!cmd && c != 'M' && c != 'm')
                return value_bad(x, w, i, "path data must start with M or m, not '%c'", c);
            cmd = c;
            ps.at = i++;
            if ((c | 0x20) == 'z') {
                if (cx != sx || cy != sy) {
                    p[0] = cx, p[1] = cy, p[2] = sx, p[3] = sy;
                    GROVE_TRY(emit(&ps, 1, p));
                }
                cx = sx, cy = sy;
                prev = 'z';
                continue;
            }
        } else if (is_digit(c) || c == '.' || c == '+' || c == '-') {
            if (!cmd) return value_bad(x, w, i, "path data must start with M or m, not a number");
            if ((cmd | 0x20) == 'z')
                return value_bad(x, w, i, "a number after '%c', which takes none", cmd);
            /* more numbers repeat the command; after a moveto they are linetos */
            if (cmd == 'M') cmd = 'L';
            if (cmd == 'm') cmd = 'l';
            ps.at = i;
        } else {
            grove__quote(q, sizeof q, v + i, 1);
            return value_bad(x, w, i, "unexpected '%s'", q);
        }
        need = command_args(cmd);
        rel = cmd >= 'a';
        {
            char what[16];
            snprintf(what, sizeof what, "'%c'", cmd);
            for (k = 0; k < need; k++) {
                if ((cmd | 0x20) == 'a' && (k == 3 || k == 4))
                    GROVE_TRY(read_flag(x, w, &i, n, &a[k], what,
                                        k == 3 ? "large-arc-flag" : "sweep-flag", k));
                else
                    GROVE_TRY(read_number(x, w, &i, n, &a[k], what, k, need));
            }
        }
        /* relative coordinates are offsets from the current point (H and V: one axis; an
         * arc's radii, angle and flags are not coordinates) */
        if (rel) {
            int k0 = (cmd | 0x20) == 'a' ? 5 : 0;
            for (k = k0; k < need; k++) {
                if ((cmd | 0x20) == 'v') a[k] += cy;
                else if ((cmd | 0x20) == 'h') a[k] += cx;
                else a[k] += ((k - k0) & 1) ? cy : cx;
            }
        }
        p[0] = cx, p[1] = cy;
        switch (cmd | 0x20) {
        case 'm':
            cx = sx = a[0];
            cy = sy = a[1];
            break;
        case 'l':
        case 'h':
        case 'v':
            p[2] = (cmd | 0x20) == 'v' ? cx : a[0];
            p[3] = (cmd | 0x20) == 'h' ? cy : (cmd | 0x20) == 'v' ? a[0] : a[1];
            GROVE_TRY(emit(&ps, 1, p));
            cx = p[2], cy = p[3];
            break;
        case 'q':
        case 't':
            if ((cmd | 0x20) == 'q') {
                kx = a[0], ky = a[1];
                a[0] = a[2], a[1] = a[3];
            } else if (prev == 'q' || prev == 't') {
                kx = 2 * cx - kx, ky = 2 * cy - ky;
            } else {
                kx = cx, ky = cy;
            }
            p[2] = kx, p[3] = ky, p[4] = a[0], p[5] = a[1];
            GROVE_TRY(emit(&ps, 2, p));
            cx = a[0], cy = a[1];
            break;
        case 'a':
            GROVE_TRY(emit_arc(&ps, p, a));
            cx = a[5], cy = a[6];
            break;
        default: /* c, s */
            if ((cmd | 0x20) == 'c') {
                p[2] = a[0], p[3] = a[1];
                a[0] = a[2], a[1] = a[3], a[2] = a[4], a[3] = a[5];
            } else if (prev == 'c' || prev == 's') {
                p[2] = 2 * cx - kx, p[3] = 2 * cy - ky;
            } else {
                p[2] = cx, p[3] = cy;
            }
            kx = a[0], ky = a[1];
            p[4] = a[0], p[5] = a[1], p[6] = a[2], p[7] = a[3];
            GROVE_TRY(emit(&ps, 3, p));
            cx = a[2], cy = a[3];
            break;
        }
        prev = (char)(cmd | 0x20);
    }
    return GROVE_OK;
}

/* ---- SVG: basic shapes ---- */

static const char *const shape_names[SH_COUNT] = {"path", "rect",     "circle", "ellipse",
                                                  "line", "polyline", "polygon"};

/* The other elements the reader looks at. */
enum { K_USE = SH_COUNT, K_SVG, K_SYMBOL, K_OTHER };

/* The attributes read, wherever they are in the tag (href also as xlink:href). */
enum {
    A_D, A_ID, A_TRANSFORM, A_X, A_Y, A_WIDTH, A_HEIGHT, A_RX, A_RY, A_CX, A_CY, A_R, A_X1, A_Y1,
    A_X2, A_Y2, A_POINTS, A_HREF, A_VIEWBOX, A_PAR, A_DISPLAY, A_STYLE, A_VISIBILITY, A_CLASS,
    A_COUNT
};
static const char *const attr_names[A_COUNT] = {
    "d",  "id", "transform", "x",  "y",  "width",  "height",  "rx",   "ry",
    "cx", "cy", "r",         "x1", "y1", "x2",     "y2",      "points", "href",
    "viewBox", "preserveAspectRatio", "display", "style", "visibility", "class"};

/* An attribute's raw value, s[b..e) of the file; has: the attribute is present. */
typedef struct attr_span {
    size_t b, e;
    int has;
} attr_span;

/* Reads length attribute a (named name) into *out: a number with an optional unit, px or one of
 * CSS's absolute units (in cm mm pt pc, at 96 px to the inch), or a percentage of pct where pct
 * > 0 (pct < 0: of a size not known, *out = NaN; pct = 0: a percentage is refused); an absent
 * attribute is 0. */
static grove_status read_length_pct(svg_doc *x, where *w, const attr_span *a, const char *name,
                                    double pct, double *out)
{
    static const struct {
        const char *unit;
        double px;
    } units[] = {{"px", 1.0}, {"in", 96.0}, {"cm", 96.0 / 2.54}, {"mm", 96.0 / 25.4},
                 {"pt", 96.0 / 72.0}, {"pc", 16.0}};
    size_t len, i = 0, u, k;
    char q[64];
    *out = 0.0;
    if (!a->has) return GROVE_OK;
    w->attr = name;
    GROVE_TRY(decode_value(x, a->b, a->e, &len));
    while (i < len && is_xml_space(x->val[i])) i++;
    if (number_end(x->val, i, len) == i) {
        grove__quote(q, sizeof q, x->val + i, len - i);
        return value_bad(x, w, i, "%s is not a length: '%s'", name, q);
    }
    /* the number ends where the grammar says, so that "3em" is 3 in em, not a bad exponent */
    GROVE_TRY(read_number(x, w, &i, number_end(x->val, i, len), out, name, 0, 1));
    u = i;
    while (i < len && ((x->val[i] | 0x20) >= 'a' && (x->val[i] | 0x20) <= 'z')) i++;
    if (i == u && i < len && x->val[i] == '%' && pct == 0) i++;
    if (i > u) {
        for (k = 0; k < sizeof units / sizeof units[0]; k++)
            if (i - u == 2 && memcmp(x->val + u, units[k].unit, 2) == 0) break;
        if (k == sizeof units / sizeof units[0]) {
            grove__quote(q, sizeof q, x->val + u, i - u);
            return value_bad(x, w, u,
                             "unit '%s' is not supported (a length is a number, with px, in, cm, "
                             "mm, pt or pc or none)",
                             q);
        }
        *out *= units[k].px;
    } else if (pct != 0 && i < len && x->val[i] == '%') {
        *out = pct > 0 ? *out * (pct / 100) : NAN;
        i++;
    }
    while (i < len && is_xml_space(x->val[i])) i++;
    if (i < len) {
        grove__quote(q, sizeof q, x->val + i, len - i);
        return value_bad(x, w, i, "'%s' after the length", q);
    }
    return GROVE_OK;
}

static grove_status read_length(svg_doc *x, where *w, const attr_span *a, const char *name,
                                double *out)
{
    return read_length_pct(x, w, a, name, 0, out);
}

/* Reads a length that must not be negative (a size or radius). */
static grove_status read_size(svg_doc *x, where *w, const attr_span *a, const char *name,
                              double *out)
{
    GROVE_TRY(read_length(x, w, a, name, out));
    if (*out < 0) return value_bad(x, w, 0, "%s must not be negative (%g)", name, *out);
    return GROVE_OK;
}

/* A line from p to q, left out when it has no length (the pieces of a shape's outline). */
static grove_status shape_line(path_state *ps, double px, double py, double qx, double qy)
{
    double p[4] = {px, py, qx, qy};
    if (px == qx && py == qy) return GROVE_OK;
    return emit(ps, 1, p);
}

/* The arc of radii rx, ry (both > 0) from p to q, positive-angle direction, at most 90 degrees
 * in the shapes that use it. */
static grove_status shape_arc(path_state *ps, double px, double py, double rx, double ry,
                              double qx, double qy)
{
    double p[2] = {px, py}, a[7] = {rx, ry, 0, 0, 1, qx, qy};
    return emit_arc(ps, p, a);
}

/* Emits the outline of basic shape k (not SH_PATH) from its attributes at[], as the curves of
 * its equivalent path (SVG 2, 10.2-10.7). A size or radius of 0 draws nothing, as in SVG; a
 * negative one is an error. */
static grove_status emit_shape(svg_doc *x, int k, const attr_span *at, where *w, const affine *m)
{
    path_state ps;
    ps.x = x;
    ps.w = w;
    ps.m = *m;
    ps.at = 0;
    switch (k) {
    case SH_RECT: {
        double x0, y0, wd, ht, rx, ry;
        GROVE_TRY(read_length(x, w, &at[A_X], "x", &x0));
        GROVE_TRY(read_length(x, w, &at[A_Y], "y", &y0));
        GROVE_TRY(read_size(x, w, &at[A_WIDTH], "width", &wd));
        GROVE_TRY(read_size(x, w, &at[A_HEIGHT], "height", &ht));
        GROVE_TRY(read_size(x, w, &at[A_RX], "rx", &rx));
        GROVE_TRY(read_size(x, w, &at[A_RY], "ry", &ry));
        w->attr = NULL;
        if (!(wd > 0) || !(ht > 0)) return GROVE_OK;
        /* one radius given: the other is the same; both at most half the side */
        if (at[A_RX].has && !at[A_RY].has) ry = rx;
        if (at[A_RY].has && !at[A_RX].has) rx = ry;
        if (rx > wd / 2) rx = wd / 2;
        if (ry > ht / 2) ry = ht / 2;
        if (!(rx > 0) || !(ry > 0)) {
            GROVE_TRY(shape_line(&ps, x0, y0, x0 + wd, y0));
            GROVE_TRY(shape_line(&ps, x0 + wd, y0, x0 + wd, y0 + ht));
            GROVE_TRY(shape_line(&ps, x0 + wd, y0 + ht, x0, y0 + ht));
            return shape_line(&ps, x0, y0 + ht, x0, y0);
        }
        GROVE_TRY(shape_line(&ps, x0 + rx, y0, x0 + wd - rx, y0));
        GROVE_TRY(shape_arc(&ps, x0 + wd - rx, y0, rx, ry, x0 + wd, y0 + ry));
        GROVE_TRY(shape_line(&ps, x0 + wd, y0 + ry, x0 + wd, y0 + ht - ry));
        GROVE_TRY(shape_arc(&ps, x0 + wd, y0 + ht - ry, rx, ry, x0 + wd - rx, y0 + ht));
        GROVE_TRY(shape_line(&ps, x0 + wd - rx, y0 + ht, x0 + rx, y0 + ht));
        GROVE_TRY(shape_arc(&ps, x0 + rx, y0 + ht, rx, ry, x0, y0 + ht - ry));
        GROVE_TRY(shape_line(&ps, x0, y0 + ht - ry, x0, y0 + ry));
        return shape_arc(&ps, x0, y0 + ry, rx, ry, x0 + rx, y0);
    }
    case SH_CIRCLE:
    case SH_ELLIPSE: {
        double cx, cy, rx, ry;
        GROVE_TRY(read_length(x, w, &at[A_CX], "cx", &cx));
        GROVE_TRY(read_length(x, w, &at[A_CY], "cy", &cy));
        if (k == SH_CIRCLE) {
            GROVE_TRY(read_size(x, w, &at[A_R], "r", &rx));
            ry = rx;
        } else {
            /* SVG 2: a radius left out is the other one */
            GROVE_TRY(read_size(x, w, &at[A_RX], "rx", &rx));
            GROVE_TRY(read_size(x, w, &at[A_RY], "ry", &ry));
            if (!at[A_RY].has) ry = rx;
            if (!at[A_RX].has) rx = ry;
        }
        w->attr = NULL;
        if (!(rx > 0) || !(ry > 0)) return GROVE_OK;
        GROVE_TRY(shape_arc(&ps, cx + rx, cy, rx, ry, cx, cy + ry));
        GROVE_TRY(shape_arc(&ps, cx, cy + ry, rx, ry, cx - rx, cy));
        GROVE_TRY(shape_arc(&ps, cx - rx, cy, rx, ry, cx, cy - ry));
        return shape_arc(&ps, cx, cy - ry, rx, ry, cx + rx, cy);
    }
    case SH_LINE: {
        double p[4];
        GROVE_TRY(read_length(x, w, &at[A_X1], "x1", &p[0]));
        GROVE_TRY(read_length(x, w, &at[A_Y1], "y1", &p[1]));
        GROVE_TRY(read_length(x, w, &at[A_X2], "x2", &p[2]));
        GROVE_TRY(read_length(x, w, &at[A_Y2], "y2", &p[3]));
        w->attr = NULL;
        /* as "M x1 y1 L x2 y2": a line of length 0 is still a curve */
        return emit(&ps, 1, p);
    }
    default: { /* polyline, polygon: "M p0 L p1 p2 ...", a polygon closed as by Z */
        size_t len, i = 0, cnt = 0, at_first = 0;
        double px = 0, py = 0, fx = 0, fy = 0, num[2];
        char q[64];
        if (!at[A_POINTS].has) return GROVE_OK;
        w->attr = "points";
        GROVE_TRY(decode_value(x, at[A_POINTS].b, at[A_POINTS].e, &len));
        for (;;) {
            size_t b = skip_sep(x->val, i, len);
            if (b >= len) break;
            if (number_end(x->val, b, len) == b) {
                grove__quote(q, sizeof q, x->val + b, 1);
                return value_bad(x, w, b, "unexpected '%s' (points is a list of numbers)", q);
            }
            if (cnt % 2 == 0) at_first = b;
            GROVE_TRY(read_number(x, w, &i, len, &num[cnt % 2], "points", (int)cnt,
                                  (int)cnt + 1));
            if (++cnt % 2) continue;
            if (cnt == 2) {
                fx = num[0], fy = num[1];
            } else {
                double p[4] = {px, py, num[0], num[1]};
                ps.at = at_first;
                GROVE_TRY(emit(&ps, 1, p));
            }
            px = num[0], py = num[1];
        }
        if (cnt % 2)
            return value_bad(x, w, len, "points holds an odd number of numbers (%zu): the last "
                                        "point has no y", cnt);
        if (k == SH_POLYGON && cnt >= 4 && (px != fx || py != fy)) {
            double p[4] = {px, py, fx, fy};
            ps.at = at_first;
            GROVE_TRY(emit(&ps, 1, p));
        }
        return GROVE_OK;
    }
    }
}

/* ---- SVG: elements ---- */

static int is_name_end(char c) { return is_xml_space(c) || c == '/' || c == '>' || c == '='; }

/* Does the element name s[b..e), without a namespace prefix, equal lit? */
static int local_name_is(const char *s, size_t b, size_t e, const char *lit)
{
    size_t m = strlen(lit);
    for (size_t j = e; j > b; j--)
        if (s[j - 1] == ':') {
            b = j;
            break;
        }
    return e - b == m && memcmp(s + b, lit, m) == 0;
}

/* The kind of the element named s[b..e): SH_*, K_USE, K_SVG, K_SYMBOL or K_OTHER. */
static int element_kind(const char *s, size_t b, size_t e)
{
    for (int k = 0; k < SH_COUNT; k++)
        if (local_name_is(s, b, e, shape_names[k])) return k;
    if (local_name_is(s, b, e, "use")) return K_USE;
    if (local_name_is(s, b, e, "svg")) return K_SVG;
    if (local_name_is(s, b, e, "symbol")) return K_SYMBOL;
    return K_OTHER;
}

/* Containers whose content is not drawn where it stands (a <use> may draw it). */
static int is_hidden_container(const char *s, size_t b, size_t e)
{
    static const char *const names[] = {"defs", "symbol", "clipPath", "mask", "marker",
                                        "pattern"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (local_name_is(s, b, e, names[k])) return 1;
    return 0;
}

/* Whether s[0..n) is lit (lower case) in any ASCII case. */
static int same_ascii_ci(const char *s, const char *lit, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if ((char)(s[k] | 0x20) != lit[k]) return 0;
    return 1;
}

/* Whether v[b..e), blanks around it aside, is the CSS keyword none (in any ASCII case). */
static int is_none(const char *v, size_t b, size_t e)
{
    while (b < e && is_xml_space(v[b])) b++;
    while (e > b && is_xml_space(v[e - 1])) e--;
    return e - b == 4 && same_ascii_ci(v + b, "none", 4);
}

/* A visibility value v[b..e) (blanks around it aside, any ASCII case): 1 for hidden and
 * collapse, 0 for visible and initial, -1 for inherit, unset, revert and revert-layer (the
 * inherited visibility stands), -2 for anything else (not valid). */
static int visibility_of(const char *v, size_t b, size_t e)
{
    while (b < e && is_xml_space(v[b])) b++;
    while (e > b && is_xml_space(v[e - 1])) e--;
    const size_t n = e - b;
    if ((n == 6 && same_ascii_ci(v + b, "hidden", 6)) ||
        (n == 8 && same_ascii_ci(v + b, "collapse", 8)))
        return 1;
    if ((n == 7 && same_ascii_ci(v + b, "visible", 7)) ||
        (n == 7 && same_ascii_ci(v + b, "initial", 7)))
        return 0;
    if ((n == 7 && same_ascii_ci(v + b, "inherit", 7)) ||
        (n == 5 && same_ascii_ci(v + b, "unset", 5)) ||
        (n == 6 && same_ascii_ci(v + b, "revert", 6)) ||
        (n == 12 && same_ascii_ci(v + b, "revert-layer", 12)))
        return -1;
    return -2;
}

/* Whether a visibility value is valid CSS (style_decl's check). */
static int visibility_valid(const char *v, size_t b, size_t e)
{
    return visibility_of(v, b, e) != -2;
}

/* The declaration of property prop (plen characters, lower case) in a style attribute's value
 * v[0..len) (decoded; its comments are blanked in place): 1 with its value's span v[*vb..*vend)
 * (without "!important"), 0 when there is none. Declarations are split at ';' outside quotes
 * and parentheses; the last one wins, one marked !important over those not marked. A
 * declaration without ':' is skipped, as CSS does, and so is one whose value valid (when given)
 * refuses. *imp: whether the one found is marked !important. */
static int style_decl(char *v, size_t len, const char *prop, size_t plen, size_t *vb,
                      size_t *vend, int (*valid)(const char *v, size_t b, size_t e), int *imp_out)
{
    int got = 0, got_imp = 0;
    for (size_t b = 0; b < len;) {
        size_t e = b, colon = 0;
        int depth = 0;
        char quote = 0;
        for (; e < len; e++) {
            const char c = v[e];
            if (quote) {
                if (c == '\\' && e + 1 < len)
                    e++;
                else if (c == quote)
                    quote = 0;
            } else if (c == '"' || c == '\'') {
                quote = c;
            } else if (c == '/' && e + 1 < len && v[e + 1] == '*') {
                /* a comment becomes blanks, which the trimming below steps over */
                size_t j = e + 2;
                while (j + 1 < len && !(v[j] == '*' && v[j + 1] == '/')) j++;
                j = j + 1 < len ? j + 2 : len;
                memset(v + e, ' ', j - e);
                e = j - 1;
            } else if (c == '(') {
                depth++;
            } else if (c == ')') {
                if (depth) depth--;
            } else if (c == ';' && !depth) {
                break;
            } else if (c == ':' && !colon && !depth) {
                colon = e;
            }
        }
        if (colon) {
            size_t pb = b, pe = colon, ve = e;
            while (pb < pe && is_xml_space(v[pb])) pb++;
            while (pe > pb && is_xml_space(v[pe - 1])) pe--;
            if (pe - pb == plen && same_ascii_ci(v + pb, prop, plen)) {
                int imp = 0;
                size_t k = ve;
                while (k > colon + 1 && is_xml_space(v[k - 1])) k--;
                /* "! important", in any case, blanks allowed after the '!' */
                if (k >= colon + 1 + 9 && same_ascii_ci(v + k - 9, "important", 9)) {
                    size_t m = k - 9;
                    while (m > colon + 1 && is_xml_space(v[m - 1])) m--;
                    if (m > colon + 1 && v[m - 1] == '!') {
                        imp = 1;
                        ve = m - 1;
                    }
                }
                if ((imp || !got_imp) && (!valid || valid(v, colon + 1, ve))) {
                    got = 1;
                    got_imp = imp;
                    *vb = colon + 1;
                    *vend = ve;
                    *imp_out = imp;
                }
            }
        }
        b = e + 1;
    }
    return got;
}

/* The next part of a start tag at x->s[*i] (after its name or an attribute): TAG_END at '>' and
 * TAG_CLOSED at "/>" (*i past them), TAG_ATTR for an attribute name="value" (the name
 * x->s[*ab..*ae), the value x->s[*vb..*ve) without its quotes, *i past the closing quote), or
 * what is wrong: TAG_EOF (the file ends in the tag), TAG_NO_EQ (no name, or no '=' after it),
 * TAG_UNQUOTED (the value is not quoted), TAG_OPEN_QUOTE (no closing quote); *ab and *ae are
 * set for the last three. read_attrs reports these; the sheets' pass stops at them. */
enum { TAG_END, TAG_CLOSED, TAG_ATTR, TAG_EOF, TAG_NO_EQ, TAG_UNQUOTED, TAG_OPEN_QUOTE };
static int tag_next(const svg_doc *x, size_t *i, size_t *ab, size_t *ae, size_t *vb, size_t *ve)
{
    const char *s = x->s;
    const char *qe;
    size_t k = *i;
    while (k < x->n && is_xml_space(s[k])) k++;
    if (k >= x->n) return TAG_EOF;
    if (s[k] == '>' || (s[k] == '/' && k + 1 < x->n && s[k + 1] == '>')) {
        const int closed = s[k] == '/';
        *i = k + 1 + (size_t)closed;
        return closed ? TAG_CLOSED : TAG_END;
    }
    *ab = k;
    while (k < x->n && !is_name_end(s[k])) k++;
    *ae = k;
    while (k < x->n && is_xml_space(s[k])) k++;
    if (*ae == *ab || k >= x->n || s[k] != '=') return TAG_NO_EQ;
    k++;
    while (k < x->n && is_xml_space(s[k])) k++;
    if (k >= x->n || (s[k] != '"' && s[k] != '\'')) return TAG_UNQUOTED;
    qe = (const char *)memchr(s + k + 1, s[k], x->n - k - 1);
    if (!qe) return TAG_OPEN_QUOTE;
    *vb = k + 1;
    *ve = (size_t)(qe - s);
    *i = *ve + 1;
    return TAG_ATTR;
}

/* ---- <style> sheets (display and visibility) ----
 * The sheets are collected by a pass of their own (css_collect), which reports nothing: it
 * reads tags as the main scan does and stops where the main scan will report an error. Their
 * text is kept (x->css_text) and parsed into rules, one for each selector of a rule's list
 * (css_add_sheet); the rules are indexed by a key for each property they set (an id, else the
 * first class, else the element name, else none), in order of precedence inside a key and
 * property, so that an element tries only the rules that can match it and stops at the first
 * that does (css_match). Every try counts against SVG_CSS_WORK. Offsets into the sheets' text
 * are 32-bit (sheets of 4 GiB or more are refused); a selector costs about 40 bytes and 20 more
 * a property it sets and 8 a class it names. */

/* A span of x->css_text. */
typedef struct css_span {
    uint32_t b, n;
} css_span;

/* One selector of a rule: its element name and id (n = 0: any element, no id), its classes
 * x->css_cls[cls .. cls + ncls), spec (ids, classes and the element name as the digits of base
 * 256, each capped at 255), and for property p (0 display, 1 visibility) whether the rule sets
 * it (has), the value (display: 1 none, 0 another valid one; visibility as visibility_of) and
 * !important. A rule's index is its order among the sheets' rules. */
typedef struct css_rule {
    css_span type, id;
    uint32_t cls, ncls, spec;
    signed char has[2], val[2], imp[2];
} css_rule;

/* An index entry: property prop of rule `rule` under key x->css_text[k .. k + n) of kind 0 id,
 * 1 class, 2 element name, 3 none (n = 0), with the rule's precedence for the sort. */
typedef struct css_key {
    uint32_t k, n, rule, spec;
    unsigned char kind, prop, imp;
} css_key;

/* How many steps matching the rules to the elements of a file of n bytes may take in all (a
 * rule tried costs one step and one a class it asks for): far more than any sheet needs whose
 * rules an element's id, classes and name tell apart (an element tries only the rules under its
 * own keys, and stops at the first that matches); a sheet of many rules that share a key but
 * ask for more than the elements have (".a.b1", ".a.b2", ... against many elements of class a)
 * stops with a LIMIT error instead of taking time quadratic in the file. */
#define SVG_CSS_WORK(n) (((size_t)16 << 20) + 32 * (size_t)(n))

/* The valid values of display (CSS Display 3) of one keyword, and the legacy ones browsers
 * still take. */
static const char *const display_words[] = {
    "none", "contents", "block", "inline", "run-in", "flow", "flow-root", "table", "flex",
    "grid", "ruby", "list-item", "inline-block", "inline-table", "inline-flex", "inline-grid",
    "table-row-group", "table-header-group", "table-footer-group", "table-row", "table-cell",
    "table-column-group", "table-column", "table-caption", "ruby-base", "ruby-text",
    "ruby-base-container", "ruby-text-container", "math", "-webkit-box", "-webkit-inline-box",
    "inherit", "initial", "unset", "revert", "revert-layer"};
/* display's multi-keyword form: <display-outside> || <display-inside>, or list-item with an
 * optional outside keyword and an optional flow or flow-root. */
static const char *const display_outside[] = {"block", "inline", "run-in"};
static const char *const display_inside[] = {"flow", "flow-root", "table", "flex", "grid",
                                             "ruby"};

/* The index of v[b..e) in words[0..nw) (any ASCII case), or -1. */
static int css_word(const char *v, size_t b, size_t e, const char *const *words, size_t nw)
{
    for (size_t k = 0; k < nw; k++)
        if (strlen(words[k]) == e - b && same_ascii_ci(v + b, words[k], e - b)) return (int)k;
    return -1;
}
#define CSS_NWORDS(a) (sizeof(a) / sizeof((a)[0]))

/* Whether a display value v[b..e) is valid CSS (style_decl's check). */
static int display_valid(const char *v, size_t b, size_t e)
{
    size_t words = 0;
    int outside = 0, inside = -1, list = 0;
    for (size_t k = b; k < e;) {
        size_t wb;
        int j;
        while (k < e && is_xml_space(v[k])) k++;
        if (k == e) break;
        wb = k;
        while (k < e && !is_xml_space(v[k])) k++;
        if (++words > 3) return 0;
        if (words == 1 && css_word(v, wb, k, display_words, CSS_NWORDS(display_words)) >= 0) {
            /* one keyword, unless more follow */
            size_t m = k;
            while (m < e && is_xml_space(v[m])) m++;
            if (m == e) return 1;
        }
        if (css_word(v, wb, k, display_outside, CSS_NWORDS(display_outside)) >= 0) {
            if (outside++) return 0;
        } else if ((j = css_word(v, wb, k, display_inside, CSS_NWORDS(display_inside))) >= 0) {
            if (inside >= 0) return 0;
            inside = j;
        } else if (k - wb == 9 && same_ascii_ci(v + wb, "list-item", 9)) {
            if (list++) return 0;
        } else {
            return 0;
        }
    }
    if (words < 2) return 0;
    if (list) return inside <= 1; /* none, flow or flow-root */
    return words == 2 && outside == 1 && inside >= 0;
}

/* Whether c may be part of a CSS name: ASCII letters and digits, '-', '_', or a byte of a
 * character outside ASCII. */
static int css_name_char(char c)
{
    const unsigned char u = (unsigned char)c;
    return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') ||
           c == '-' || c == '_' || u >= 0x80;
}

/* Whether a name t[b..e) (css_name_char bytes, e > b) is a CSS identifier: it does not start
 * with a digit, nor with '-' and a digit, nor is it '-' alone. */
static int css_ident(const char *t, size_t b, size_t e)
{
    const unsigned char c0 = (unsigned char)t[b];
    if (c0 >= '0' && c0 <= '9') return 0;
    if (c0 == '-') {
        const unsigned char c1 = b + 1 < e ? (unsigned char)t[b + 1] : 0;
        if (b + 1 == e || (c1 >= '0' && c1 <= '9')) return 0;
    }
    return 1;
}

/* A comment in a selector becomes this byte: it separates names but is not the blank of a
 * descendant combinator (.a/ * * /.b is .a.b). */
#define CSS_GAP '\x01'

/* Grows array *a of *cap elements of size sz so that it holds at least n + 1. */
static grove_status css_grow(svg_doc *x, void **a, size_t *cap, size_t n, size_t sz)
{
    size_t nc = *cap ? *cap : 16;
    void *p;
    if (n < *cap) return GROVE_OK;
    while (nc <= n && nc <= SIZE_MAX / 2) nc *= 2;
    p = nc > n && nc <= SIZE_MAX / sz ? realloc(*a, nc * sz) : NULL;
    if (!p)
        return grove__error(x->ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "%s: out of memory for the style sheets", x->path);
    *a = p;
    *cap = nc;
    return GROVE_OK;
}

/* Appends n bytes to x->css_text. */
static grove_status css_text_add(svg_doc *x, const char *p, size_t n)
{
    if (n == 0) return GROVE_OK;
    if (n >= (size_t)UINT32_MAX - x->css_len)
        return grove__error(x->ctx, GROVE_ERR_LIMIT, "%s: the <style> sheets hold 4 GiB or more",
                            x->path);
    GROVE_TRY(css_grow(x, (void **)&x->css_text, &x->css_cap, x->css_len + n - 1, 1));
    memcpy(x->css_text + x->css_len, p, n);
    x->css_len += n;
    return GROVE_OK;
}

/* The attributes of the start tag whose name ends at x->s[*i], read as read_attrs reads them
 * (tag_next), to the end of the tag: 1 with *i past it and *closed for "/>", 0 where read_attrs
 * reports an error (nothing is reported here). */
static int css_skip_tag(const svg_doc *x, size_t *i, int *closed)
{
    size_t ab, ae, vb, ve;
    int t;
    while ((t = tag_next(x, i, &ab, &ae, &vb, &ve)) == TAG_ATTR) {
    }
    *closed = t == TAG_CLOSED;
    return t == TAG_END || t == TAG_CLOSED;
}

/* The content of the <style> element that starts at x->s[*i] (after its start tag), as one
 * sheet: its child text and CDATA sections up to its end tag (not those of elements inside it;
 * comments, processing instructions and declarations left out; character references in the
 * text are not decoded). Stops silently where the main scan reports an error. */
static grove_status css_take_sheet(svg_doc *x, size_t *i)
{
    const char *s = x->s;
    const size_t b = x->css_len;
    size_t k = *i, depth = 0;
    while (k < x->n) {
        const char *lt = (const char *)memchr(s + k, '<', x->n - k);
        const size_t at = lt ? (size_t)(lt - s) : x->n;
        const char *what;
        int mk, closed;
        if (depth == 0) GROVE_TRY(css_text_add(x, s + k, at - k));
        k = at;
        if (at >= x->n) break;
        k++;
        if (x->n - k >= 8 && memcmp(s + k, "![CDATA[", 8) == 0) {
            size_t j = k + 8;
            if (!skip_past(x, &j, "]]>")) break;
            if (depth == 0) GROVE_TRY(css_text_add(x, s + k + 8, j - 3 - (k + 8)));
            k = j;
            continue;
        }
        mk = skip_markup(x, &k, &what);
        if (mk < 0) break;
        if (mk > 0) continue;
        if (k < x->n && s[k] == '/') {
            const char *gt = (const char *)memchr(s + k, '>', x->n - k);
            if (!gt || depth == 0) {
                k = gt ? (size_t)(gt - s) + 1 : x->n;
                break;
            }
            depth--;
            k = (size_t)(gt - s) + 1;
            continue;
        }
        if (k >= x->n || is_name_end(s[k])) break;
        while (k < x->n && !is_name_end(s[k])) k++;
        if (!css_skip_tag(x, &k, &closed)) break;
        if (!closed) depth++;
    }
    *i = k;
    GROVE_TRY(css_grow(x, (void **)&x->css_sheets, &x->css_sheets_cap, x->css_nsheets,
                       sizeof *x->css_sheets));
    x->css_sheets[x->css_nsheets].b = (uint32_t)b;
    x->css_sheets[x->css_nsheets++].n = (uint32_t)(x->css_len - b);
    return GROVE_OK;
}

/* The sheets' pass: finds every <style> element (any prefix) as the main scan finds elements
 * (comments, CDATA sections, processing instructions and declarations stepped over, an end tag
 * ending at its first '>'), and takes its sheet. Reports nothing but running out of memory and
 * sheets of 4 GiB; stops where the main scan reports an error. */
static grove_status css_collect(svg_doc *x)
{
    const char *s = x->s;
    size_t i = 0;
    while (i < x->n) {
        const char *lt = (const char *)memchr(s + i, '<', x->n - i);
        const char *what;
        size_t nb;
        int mk, closed;
        if (!lt) break;
        i = (size_t)(lt - s) + 1;
        mk = skip_markup(x, &i, &what);
        if (mk < 0) break;
        if (mk > 0) continue;
        if (i < x->n && s[i] == '/') {
            const char *gt = (const char *)memchr(s + i, '>', x->n - i);
            if (!gt) break;
            i = (size_t)(gt - s) + 1;
            continue;
        }
        if (i >= x->n || is_name_end(s[i])) break;
        nb = i;
        while (i < x->n && !is_name_end(s[i])) i++;
        {
            const int style = local_name_is(s, nb, i, "style");
            if (!css_skip_tag(x, &i, &closed)) break;
            if (style && !closed) GROVE_TRY(css_take_sheet(x, &i));
        }
    }
    return GROVE_OK;
}

/* Moves i past t[i..n)'s quoted string (which a newline ends, as CSS ends a bad string),
 * comment or character; a comment is overwritten with fill (blanks in a block, CSS_GAP in a
 * selector). */
static size_t css_step(char *t, size_t i, size_t n, char fill)
{
    const char c = t[i];
    if (c == '"' || c == '\'') {
        for (i++; i < n && t[i] != c && t[i] != '\n'; i++)
            if (t[i] == '\\' && i + 1 < n) i++;
        return i < n && t[i] == c ? i + 1 : i;
    }
    if (c == '/' && i + 1 < n && t[i + 1] == '*') {
        size_t j = i + 2;
        while (j + 1 < n && !(t[j] == '*' && t[j + 1] == '/')) j++;
        j = j + 1 < n ? j + 2 : n;
        memset(t + i, fill, j - i);
        return j;
    }
    return i + 1;
}

/* Whether c is a blank or CSS_GAP (trimmed around a selector). */
static int css_blank(char c) { return is_xml_space(c) || c == CSS_GAP; }

/* Whether c may stand in a selector this reader does not read but CSS may find valid
 * (combinators, attribute selectors, pseudo-classes and their arguments, namespaces, the
 * nesting selector, escapes). */
static int css_other_selector_char(char c)
{
    return css_name_char(c) || css_blank(c) || strchr(".#*>+~[]()=:\"'|^$,&\\%", c) != NULL;
}

/* Reads selector t[b..e): *kind 1 for a compound of an optional element name (or '*') and
 * any number of .class and #id parts (into r; classes pushed to x->css_cls unless dry), 0 for
 * one that may be valid CSS but is not read (it matches no element), -1 for one that is not
 * valid (empty; a class, id or element name that is no identifier; a character no selector
 * holds), which makes the whole list invalid. */
static grove_status css_selector(svg_doc *x, size_t b, size_t e, css_rule *r, int dry, int *kind)
{
    const char *t = x->css_text;
    unsigned ids = 0, classes = 0, type = 0;
    const size_t b0 = b, ncls0 = x->css_ncls;
    size_t k;
    *kind = -1;
    while (b < e && css_blank(t[b])) b++;
    while (e > b && css_blank(t[e - 1])) e--;
    if (b == e) return GROVE_OK;
    memset(r, 0, sizeof *r);
    r->cls = (uint32_t)x->css_ncls;
    k = b;
    if (t[k] == '*') {
        k++;
    } else if (css_name_char(t[k])) {
        while (k < e && css_name_char(t[k])) k++;
        if (!css_ident(t, b, k)) return GROVE_OK;
        r->type.b = (uint32_t)b;
        r->type.n = (uint32_t)(k - b);
        type = 1;
    }
    while (k < e) {
        const char c = t[k++];
        size_t nb;
        if (c == CSS_GAP) continue;
        if (c != '.' && c != '#') goto other;
        nb = k;
        while (k < e && css_name_char(t[k])) k++;
        if (k == nb) goto other;
        if (!css_ident(t, nb, k)) {
            x->css_ncls = ncls0;
            return GROVE_OK;
        }
        if (c == '#') {
            /* two different ids match no element */
            if (r->id.n && (r->id.n != k - nb || memcmp(t + r->id.b, t + nb, k - nb) != 0)) {
                x->css_ncls = ncls0;
                *kind = 0;
                return GROVE_OK;
            }
            r->id.b = (uint32_t)nb;
            r->id.n = (uint32_t)(k - nb);
            ids++;
        } else {
            if (!dry) {
                GROVE_TRY(css_grow(x, (void **)&x->css_cls, &x->css_cls_cap, x->css_ncls,
                                   sizeof *x->css_cls));
                x->css_cls[x->css_ncls].b = (uint32_t)nb;
                x->css_cls[x->css_ncls++].n = (uint32_t)(k - nb);
            }
            r->ncls++;
            classes++;
        }
    }
    r->spec = (ids > 255 ? 255u : ids) << 16 | (classes > 255 ? 255u : classes) << 8 | type;
    *kind = 1;
    return GROVE_OK;
other:
    x->css_ncls = ncls0;
    for (k = b0; k < e; k++) {
        if (t[k] == '"' || t[k] == '\'') { /* a string: anything up to its quote */
            const char q = t[k];
            for (k++; k < e && t[k] != q; k++)
                if (t[k] == '\\') k++;
            continue;
        }
        if (!css_other_selector_char(t[k])) return GROVE_OK;
    }
    *kind = 0;
    return GROVE_OK;
}

/* Parses sheet x->css_text[sb .. sb + sn) into rules (after those of the sheets before it).
 * At-rules (@media, @import, ...) are skipped with their blocks, and so are the rules and
 * at-rules nested in a rule's block (their declarations are not the rule's); a block left open
 * at the sheet's end ends there; <!-- and --> between rules are skipped. Of a rule whose
 * selector list is valid, the selectors css_selector reads and the last valid display and
 * visibility declarations (read as a style attribute's: style_decl) are kept. */
static grove_status css_add_sheet(svg_doc *x, size_t sb, size_t sn)
{
    char *t;
    const size_t n = sn;
    size_t i = 0;
    if (n == 0) return GROVE_OK; /* css_text may still be NULL */
    t = x->css_text + sb;
    while (i < n) {
        size_t pb, pe, bb, be, decl, nest = 0;
        int at, depth = 0, valid = 1;
        if (is_xml_space(t[i]) || (t[i] == '/' && i + 1 < n && t[i + 1] == '*')) {
            i = css_step(t, i, n, ' ');
            continue;
        }
        if (n - i >= 4 && memcmp(t + i, "<!--", 4) == 0) {
            i += 4;
            continue;
        }
        if (n - i >= 3 && memcmp(t + i, "-->", 3) == 0) {
            i += 3;
            continue;
        }
        /* the prelude: up to '{' (or ';', which ends an at-rule without a block) */
        pb = i;
        at = t[i] == '@';
        while (i < n && t[i] != '{' && !(at && t[i] == ';')) i = css_step(t, i, n, CSS_GAP);
        if (i >= n) break;
        if (t[i] == ';') {
            i++;
            continue;
        }
        pe = i++;
        /* the block, up to the matching '}'; a nested rule or at-rule (from the end of the
         * declaration before it to its own '}') is blanked and ends a declaration */
        bb = decl = i;
        while (i < n && !(t[i] == '}' && depth == 0)) {
            if (t[i] == '{') {
                if (depth++ == 0) nest = decl;
                i++;
            } else if (t[i] == '}') {
                if (--depth == 0) {
                    memset(t + nest, ' ', i - nest);
                    t[i] = ';';
                    decl = i + 1;
                }
                i++;
            } else {
                if (t[i] == ';' && depth == 0) decl = i + 1;
                i = css_step(t, i, n, ' ');
            }
        }
        if (depth > 0) memset(t + nest, ' ', (i < n ? i : n) - nest);
        be = i < n ? i : n;
        if (i < n) i++;
        if (at) continue;
        {
            size_t db = 0, de = 0, vb = 0, ve = 0;
            int dimp = 0, vimp = 0, has[2];
            has[0] = style_decl(t + bb, be - bb, "display", 7, &db, &de, display_valid, &dimp);
            has[1] = style_decl(t + bb, be - bb, "visibility", 10, &vb, &ve, visibility_valid,
                                &vimp);
            if (!has[0] && !has[1]) continue;
            /* the selectors, split at commas outside parentheses and brackets: first whether
             * the list is valid, then the rules */
            for (int pass = 0; pass < 2 && valid; pass++) {
                for (size_t s0 = pb, k = pb, nst = 0; k <= pe; k++) {
                    css_rule r;
                    int kind;
                    if (k < pe && (t[k] == '(' || t[k] == '[')) nst++;
                    if (k < pe && (t[k] == ')' || t[k] == ']') && nst) nst--;
                    if (k < pe && !(t[k] == ',' && nst == 0)) continue;
                    GROVE_TRY(css_selector(x, sb + s0, sb + k, &r, pass == 0, &kind));
                    s0 = k + 1;
                    if (kind < 0) valid = 0;
                    if (pass == 0 || kind < 1) continue;
                    if (x->css_nrules >= UINT32_MAX)
                        return grove__error(x->ctx, GROVE_ERR_LIMIT,
                                            "%s: the <style> sheets hold too many selectors",
                                            x->path);
                    GROVE_TRY(css_grow(x, (void **)&x->css_rules, &x->css_rules_cap,
                                       x->css_nrules, sizeof *x->css_rules));
                    for (int p = 0; p < 2; p++) {
                        r.has[p] = (signed char)has[p];
                        r.imp[p] = (signed char)(p == 0 ? dimp : vimp);
                    }
                    r.val[0] = (signed char)(has[0] ? is_none(t + bb, db, de) : 0);
                    r.val[1] = (signed char)(has[1] ? visibility_of(t + bb, vb, ve) : 0);
                    x->css_rules[x->css_nrules++] = r;
                }
            }
        }
    }
    return GROVE_OK;
}

/* Sorts a[0..n) (elements of sz bytes; tmp has room for n) by cmp(ctx, p, q), stably: a
 * merge sort, since qsort takes no context (the rule index and an element's classes). */
static void css_msort(void *a, void *tmp, size_t n, size_t sz,
                      int (*cmp)(const void *ctx, const void *p, const void *q), const void *ctx)
{
    char *const A = (char *)a, *const T = (char *)tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            const size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t p = lo, q = mid, k = lo;
            while (p < mid && q < hi) {
                const size_t from = cmp(ctx, A + q * sz, A + p * sz) < 0 ? q++ : p++;
                memcpy(T + k++ * sz, A + from * sz, sz);
            }
            memcpy(T + k * sz, A + p * sz, (mid - p) * sz);
            k += mid - p;
            memcpy(T + k * sz, A + q * sz, (hi - q) * sz);
        }
        memcpy(A, T, n * sz);
    }
}

/* Index order: by kind, key and property, then the rule that wins first (!important, more
 * specific, later). ctx: the text the keys point into. */
static int css_key_cmp(const void *ctx, const void *a, const void *b)
{
    const char *kt = (const char *)ctx;
    const css_key *p = (const css_key *)a, *q = (const css_key *)b;
    int c;
    if (p->kind != q->kind) return p->kind < q->kind ? -1 : 1;
    if (p->n != q->n) return p->n < q->n ? -1 : 1;
    c = p->n ? memcmp(kt + p->k, kt + q->k, p->n) : 0;
    if (c) return c;
    if (p->prop != q->prop) return p->prop < q->prop ? -1 : 1;
    if (p->imp != q->imp) return p->imp > q->imp ? -1 : 1;
    if (p->spec != q->spec) return p->spec > q->spec ? -1 : 1;
    return p->rule > q->rule ? -1 : p->rule < q->rule;
}

/* Collects the sheets, parses them and builds the index (nothing when the file has none). */
static grove_status css_build(svg_doc *x)
{
    size_t nk = 0;
    css_key *tmp;
    GROVE_TRY(css_collect(x));
    for (size_t k = 0; k < x->css_nsheets; k++)
        GROVE_TRY(css_add_sheet(x, x->css_sheets[k].b, x->css_sheets[k].n));
    for (size_t k = 0; k < x->css_nrules; k++)
        nk += (size_t)x->css_rules[k].has[0] + (size_t)x->css_rules[k].has[1];
    if (!nk) return GROVE_OK;
    x->css_keys = (css_key *)malloc(nk * sizeof *x->css_keys);
    tmp = (css_key *)malloc(nk * sizeof *tmp);
    if (!x->css_keys || !tmp) {
        free(tmp);
        return grove__error(x->ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "%s: out of memory for the style sheets", x->path);
    }
    x->css_nkeys = 0;
    for (size_t k = 0; k < x->css_nrules; k++) {
        const css_rule *r = &x->css_rules[k];
        const css_span *key = r->id.n ? &r->id : r->ncls ? &x->css_cls[r->cls] : &r->type;
        for (int p = 0; p < 2; p++) {
            css_key *y;
            if (!r->has[p]) continue;
            y = &x->css_keys[x->css_nkeys++];
            y->kind = (unsigned char)(r->id.n ? 0 : r->ncls ? 1 : r->type.n ? 2 : 3);
            y->k = y->kind == 3 ? 0 : key->b;
            y->n = y->kind == 3 ? 0 : key->n;
            y->rule = (uint32_t)k;
            y->spec = r->spec;
            y->prop = (unsigned char)p;
            y->imp = (unsigned char)r->imp[p];
        }
    }
    css_msort(x->css_keys, tmp, x->css_nkeys, sizeof *tmp, css_key_cmp, x->css_text);
    free(tmp);
    return GROVE_OK;
}

/* The element a rule is tried against: its local name, id (NULL: none) and its classes as
 * sorted, distinct spans of cls (x->css_tok[0 .. ntok)). */
typedef struct css_elem {
    const char *name, *id, *cls;
    size_t nn, idn, ntok;
} css_elem;

/* Whether class t[b..b+n) is among the element's (binary search of its sorted classes). */
static int css_elem_has(const svg_doc *x, const css_elem *el, const char *c, size_t n)
{
    size_t lo = 0, hi = el->ntok;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        const css_span *s = &x->css_tok[mid];
        int d = s->n != n ? (s->n < n ? -1 : 1) : memcmp(el->cls + s->b, c, n);
        if (d == 0) return 1;
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* Whether rule r matches element el. */
static int css_rule_matches(const svg_doc *x, const css_rule *r, const css_elem *el)
{
    const char *t = x->css_text;
    if (r->type.n && (r->type.n != el->nn || memcmp(t + r->type.b, el->name, el->nn) != 0))
        return 0;
    if (r->id.n && (!el->id || r->id.n != el->idn || memcmp(t + r->id.b, el->id, el->idn) != 0))
        return 0;
    for (uint32_t c = 0; c < r->ncls; c++) {
        const css_span *sp = &x->css_cls[r->cls + c];
        if (!css_elem_has(x, el, t + sp->b, sp->n)) return 0;
    }
    return 1;
}

/* Tries the rules that set property p under key (kind, k[0..n)) in their order of precedence:
 * the first that matches element el, against best[p] (SIZE_MAX: none yet), by precedence.
 * tag: the element's, for the LIMIT error. */
static grove_status css_try_key(svg_doc *x, size_t tag, int kind, const char *k, size_t n,
                                int p, const css_elem *el, size_t *best)
{
    const char *kt = x->css_text;
    size_t lo = 0, hi = x->css_nkeys;
    while (lo < hi) {
        /* the first entry of (kind, key, p) */
        const size_t mid = lo + (hi - lo) / 2;
        const css_key *y = &x->css_keys[mid];
        int c = y->kind != kind ? (y->kind < kind ? -1 : 1)
                : y->n != n     ? (y->n < n ? -1 : 1)
                : n             ? memcmp(kt + y->k, k, n)
                                : 0;
        if (c == 0) c = y->prop != p ? (y->prop < p ? -1 : 1) : 1;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t j = lo; j < x->css_nkeys; j++) {
        const css_key *y = &x->css_keys[j];
        const css_rule *r;
        if (y->kind != kind || y->n != n || y->prop != p || (n && memcmp(kt + y->k, k, n) != 0))
            break;
        r = &x->css_rules[y->rule];
        x->css_work += 1 + r->ncls;
        if (x->css_work > SVG_CSS_WORK(x->n))
            return grove__error(x->ctx, GROVE_ERR_LIMIT,
                                "%s:%llu: matching the <style> rules to the elements took more "
                                "than %zu steps (many rules under one id, class or element "
                                "name that ask for more than the elements have)",
                                x->path, line_of(x, tag), SVG_CSS_WORK(x->n));
        if (!css_rule_matches(x, r, el)) continue;
        if (best[p] == SIZE_MAX) {
            best[p] = y->rule;
        } else {
            const css_rule *o = &x->css_rules[best[p]];
            if (r->imp[p] > o->imp[p] ||
                (r->imp[p] == o->imp[p] &&
                 (r->spec > o->spec || (r->spec == o->spec && y->rule > best[p]))))
                best[p] = y->rule;
        }
        break;
    }
    return GROVE_OK;
}

/* Decodes attribute a into x->val without reporting: 1 with *len, 0 when it does not decode
 * (the main scan reports that where it reads the attribute; nothing is reported here, and the
 * context's message is kept). Running out of memory is reported. */
static grove_status css_decode_quiet(svg_doc *x, const attr_span *a, size_t *len, int *ok)
{
    char saved[sizeof x->ctx->err];
    grove_status st;
    if (x->ctx) memcpy(saved, x->ctx->err, sizeof saved);
    st = decode_value(x, a->b, a->e, len);
    *ok = st == GROVE_OK;
    if (st == GROVE_ERR_OUT_OF_MEMORY) return st;
    if (st != GROVE_OK && x->ctx) memcpy(x->ctx->err, saved, sizeof saved);
    return GROVE_OK;
}

/* Class spans sorted by length, then bytes of ctx (x->val). */
static int css_tok_cmp(const void *ctx, const void *pa, const void *pb)
{
    const char *v = (const char *)ctx;
    const css_span *a = (const css_span *)pa, *b = (const css_span *)pb;
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    return memcmp(v + a->b, v + b->b, a->n);
}

/* The sheets' winning declarations for the element whose tag starts at x->s[tag] (name
 * x->s[nb..ne), attributes at): found[p] (p 0 display, 1 visibility) with val[p] and imp[p].
 * Its id and class attributes are decoded here (x->val is overwritten); one that does not
 * decode counts as absent. */
static grove_status css_match(svg_doc *x, size_t tag, size_t nb, size_t ne, const attr_span *at,
                              int *found, int *val, int *imp)
{
    css_elem el;
    size_t best[2] = {SIZE_MAX, SIZE_MAX}, len;
    int ok;
    found[0] = found[1] = 0;
    for (size_t j = ne; j > nb; j--)
        if (x->s[j - 1] == ':') {
            nb = j;
            break;
        }
    el.name = x->s + nb;
    el.nn = ne - nb;
    el.id = el.cls = NULL;
    el.idn = el.ntok = 0;
    if (at[A_ID].has) {
        GROVE_TRY(css_decode_quiet(x, &at[A_ID], &len, &ok));
        if (ok) {
            if (len >= x->css_id_cap) {
                char *p = (char *)realloc(x->css_id, len + 1);
                if (!p)
                    return grove__error(x->ctx, GROVE_ERR_OUT_OF_MEMORY,
                                        "%s: out of memory for an id", x->path);
                x->css_id = p;
                x->css_id_cap = len + 1;
            }
            memcpy(x->css_id, x->val, len + 1);
            el.id = x->css_id;
            el.idn = len;
        }
    }
    if (at[A_CLASS].has) {
        GROVE_TRY(css_decode_quiet(x, &at[A_CLASS], &len, &ok));
        if (ok && len <= (size_t)UINT32_MAX) {
            /* the classes, sorted and distinct (insertion into a sorted array would be
             * quadratic in their number: sort once) */
            size_t nt = 0;
            el.cls = x->val;
            for (size_t k = 0; k < len;) {
                size_t e;
                while (k < len && is_xml_space(el.cls[k])) k++;
                for (e = k; e < len && !is_xml_space(el.cls[e]); e++) {
                }
                if (e > k) {
                    GROVE_TRY(css_grow(x, (void **)&x->css_tok, &x->css_tok_cap, nt,
                                       sizeof *x->css_tok));
                    x->css_tok[nt].b = (uint32_t)k;
                    x->css_tok[nt++].n = (uint32_t)(e - k);
                }
                k = e;
            }
            if (nt > 1) {
                /* sorted (the second half of css_tok is the sort's room), then distinct */
                css_span *a;
                size_t d = 1;
                GROVE_TRY(css_grow(x, (void **)&x->css_tok, &x->css_tok_cap, 2 * nt,
                                   sizeof *x->css_tok));
                a = x->css_tok;
                css_msort(a, a + nt, nt, sizeof *a, css_tok_cmp, el.cls);
                for (size_t k = 1; k < nt; k++)
                    if (css_tok_cmp(el.cls, &a[k], &a[d - 1]) != 0) a[d++] = a[k];
                nt = d;
            }
            el.ntok = nt;
        }
    }
    for (int p = 0; p < 2; p++) {
        if (el.id) GROVE_TRY(css_try_key(x, tag, 0, el.id, el.idn, p, &el, best));
        for (size_t k = 0; k < el.ntok; k++)
            GROVE_TRY(css_try_key(x, tag, 1, el.cls + x->css_tok[k].b, x->css_tok[k].n, p, &el,
                                  best));
        GROVE_TRY(css_try_key(x, tag, 2, el.name, el.nn, p, &el, best));
        GROVE_TRY(css_try_key(x, tag, 3, "", 0, p, &el, best));
        if (best[p] != SIZE_MAX) {
            found[p] = 1;
            val[p] = x->css_rules[best[p]].val[p];
            imp[p] = x->css_rules[best[p]].imp[p];
        }
    }
    return GROVE_OK;
}

/* CSS's cascade of one property over a style attribute's declaration (found ia, marked
 * !important iimp, value ival) and the sheets' (sa, simp, sval): the style attribute's
 * !important one, the sheets' !important one, the style attribute's, the sheets'. 1 with *val
 * when one of them decides, 0 when none is there (the presentation attribute decides). */
static int cascade(int ia, int iimp, int ival, int sa, int simp, int sval, int *val)
{
    if (ia && iimp)
        *val = ival;
    else if (sa && simp)
        *val = sval;
    else if (ia)
        *val = ival;
    else if (sa)
        *val = sval;
    else
        return 0;
    return 1;
}

/* Reads the attributes of the tag whose name ends at s[*i] up to the end of the tag: their
 * spans into at[] (id, transform, display, style, visibility and class of every element, the
 * others of kinds below K_OTHER), *closed for "/>". lt is the offset of the '<', name the quoted
 * element name. */
static grove_status read_attrs(svg_doc *x, size_t *i, size_t lt, const char *name, int kind,
                               attr_span *at, int *closed)
{
    const char *s = x->s;
    char msg[160], q[64];
    int href_plain = 0; /* SVG 2: href wins over xlink:href, wherever each stands */
    memset(at, 0, A_COUNT * sizeof *at);
    *closed = 0;
    for (;;) {
        size_t ab = 0, ae = 0, vb = 0, ve = 0, lb;
        const int t = tag_next(x, i, &ab, &ae, &vb, &ve);
        if (t == TAG_END) return GROVE_OK;
        if (t == TAG_CLOSED) {
            *closed = 1;
            return GROVE_OK;
        }
        if (t == TAG_EOF) return svg_bad(x, lt, "unterminated tag");
        if (t == TAG_NO_EQ) {
            grove__quote(q, sizeof q, s + ab, ae > ab ? ae - ab : 1);
            snprintf(msg, sizeof msg, "<%s>: malformed attribute '%s' (want name=\"value\")",
                     name, q);
            return svg_bad(x, ab, msg);
        }
        if (t != TAG_ATTR) {
            grove__quote(q, sizeof q, s + ab, ae - ab);
            if (t == TAG_UNQUOTED)
                snprintf(msg, sizeof msg, "<%s>: the value of attribute '%s' is not quoted", name,
                         q);
            else
                snprintf(msg, sizeof msg, "<%s>: attribute '%s' has no closing quote", name, q);
            return svg_bad(x, ab, msg);
        }
        /* href also as xlink:href (any prefix) */
        lb = ab;
        for (size_t j = ae; j > ab; j--)
            if (s[j - 1] == ':') {
                lb = j;
                break;
            }
        for (int k = 0; k < A_COUNT; k++) {
            const size_t nb = k == A_HREF ? lb : ab;
            if ((k == A_TRANSFORM || k == A_ID || k == A_DISPLAY || k == A_STYLE ||
                 k == A_VISIBILITY || k == A_CLASS || kind < K_OTHER) &&
                ae - nb == strlen(attr_names[k]) && memcmp(s + nb, attr_names[k], ae - nb) == 0) {
                if (k == A_HREF && lb != ab && href_plain) continue;
                if (k == A_HREF) href_plain = lb == ab;
                at[k].has = 1;
                at[k].b = vb;
                at[k].e = ve;
            }
        }
    }
}

/* Reads the numbers of a viewBox (min-x min-y width height) into vb; *ok = 0 when the attribute
 * is absent. A width or height of 0 or less is returned as read (the caller draws nothing). */
static grove_status read_viewbox(svg_doc *x, where *w, const attr_span *a, double *vb, int *ok)
{
    size_t len, i = 0;
    char q[64];
    *ok = 0;
    if (!a->has) return GROVE_OK;
    w->attr = "viewBox";
    GROVE_TRY(decode_value(x, a->b, a->e, &len));
    for (int k = 0; k < 4; k++) GROVE_TRY(read_number(x, w, &i, len, &vb[k], "viewBox", k, 4));
    i = skip_sep(x->val, i, len);
    if (i < len) {
        grove__quote(q, sizeof q, x->val + i, len - i);
        return value_bad(x, w, i, "'%s' after the 4 numbers of viewBox", q);
    }
    *ok = 1;
    return GROVE_OK;
}

/* The transform that maps viewBox vb onto a viewport of size vw x vh at the origin, as
 * preserveAspectRatio (attribute a; default xMidYMid meet) says (SVG 2, 8.2). */
static grove_status viewbox_map(svg_doc *x, where *w, const attr_span *a, const double *vb,
                                double vw, double vh, affine *m)
{
    double sx = vw / vb[2], sy = vh / vb[3];
    int ax = 1, ay = 1, none = 0, slice = 0; /* align: 0 min, 1 mid, 2 max */
    if (a->has) {
        size_t len, i = 0, b;
        char q[64];
        w->attr = "preserveAspectRatio";
        GROVE_TRY(decode_value(x, a->b, a->e, &len));
        while (i < len && is_xml_space(x->val[i])) i++;
        b = i;
        while (i < len && !is_xml_space(x->val[i])) i++;
        if (i - b == 4 && memcmp(x->val + b, "none", 4) == 0) {
            none = 1;
        } else if (i - b == 8 && x->val[b] == 'x' && x->val[b + 4] == 'Y') {
            const char *v = x->val + b;
            ax = memcmp(v + 1, "Min", 3) == 0 ? 0 : memcmp(v + 1, "Mid", 3) == 0 ? 1
                 : memcmp(v + 1, "Max", 3) == 0 ? 2 : -1;
            ay = memcmp(v + 5, "Min", 3) == 0 ? 0 : memcmp(v + 5, "Mid", 3) == 0 ? 1
                 : memcmp(v + 5, "Max", 3) == 0 ? 2 : -1;
        } else {
            ax = -1;
        }
        if (ax < 0 || ay < 0) {
            grove__quote(q, sizeof q, x->val + b, i - b);
            return value_bad(x, w, b, "unknown alignment '%s' (none or xMinYMin ... xMaxYMax)",
                             q);
        }
        while (i < len && is_xml_space(x->val[i])) i++;
        b = i;
        while (i < len && !is_xml_space(x->val[i])) i++;
        if (i - b == 5 && memcmp(x->val + b, "slice", 5) == 0)
            slice = 1;
        else if (i > b && !(i - b == 4 && memcmp(x->val + b, "meet", 4) == 0)) {
            grove__quote(q, sizeof q, x->val + b, i - b);
            return value_bad(x, w, b, "'%s' is neither meet nor slice", q);
        }
        while (i < len && is_xml_space(x->val[i])) i++;
        if (i < len) {
            grove__quote(q, sizeof q, x->val + i, len - i);
            return value_bad(x, w, i, "'%s' after the alignment and meet or slice", q);
        }
    }
    if (!none) sx = sy = slice ? (sx > sy ? sx : sy) : (sx < sy ? sx : sy);
    *m = identity;
    m->a = sx;
    m->d = sy;
    m->e = -vb[0] * sx + (none ? 0 : ax * (vw - vb[2] * sx) / 2);
    m->f = -vb[1] * sy + (none ? 0 : ay * (vh - vb[3] * sy) / 2);
    return GROVE_OK;
}

/* Opens an element: a frame with the viewport of vp, transform m, hidden and invis. */
static grove_status push_frame(svg_doc *x, const frame *vp, const affine *m, int hidden,
                               int invis)
{
    if (x->depth == x->stack_cap) {
        size_t nc = x->stack_cap ? 2 * x->stack_cap : 32;
        frame *st = (frame *)realloc(x->stack, nc * sizeof *st);
        if (!st)
            return grove__error(x->ctx, GROVE_ERR_OUT_OF_MEMORY,
                                "%s: out of memory for %zu nested elements", x->path, nc);
        x->stack = st;
        x->stack_cap = nc;
    }
    x->stack[x->depth] = *vp;
    x->stack[x->depth].m = *m;
    x->stack[x->depth].hidden = hidden;
    x->stack[x->depth].invis = invis;
    x->depth++;
    return GROVE_OK;
}

/* The base of a percentage along x (axis 0) or y (1) in viewport f: its size, or -1 when it is
 * not known (read_length_pct then gives NaN). */
static double pct_base(const frame *f, int axis)
{
    return f->vk ? (axis ? f->vh : f->vw) : -1;
}

static grove_status scan_from(svg_doc *x, size_t i, size_t stop_depth);

static int id_cmp(const void *a, const void *b)
{
    const id_entry *p = (const id_entry *)a, *q = (const id_entry *)b;
    int c = strcmp(p->id, q->id);
    return c ? c : (p->at < q->at ? -1 : p->at > q->at);
}

/* Builds x->ids: one pass over the whole file that records every element's id. */
static grove_status build_ids(svg_doc *x)
{
    svg_doc y;
    grove_status st;
    memset(&y, 0, sizeof y);
    y.ctx = x->ctx;
    y.path = x->path;
    y.s = x->s;
    y.n = x->n;
    y.line_no = 1;
    y.indexing = 1;
    st = scan_from(&y, 0, 0);
    free(y.stack);
    free(y.val);
    free(y.raw);
    if (st != GROVE_OK) {
        for (size_t k = 0; k < y.nids; k++) free(y.ids[k].id);
        free(y.ids);
        return st;
    }
    if (y.nids) qsort(y.ids, y.nids, sizeof *y.ids, id_cmp);
    x->ids = y.ids;
    x->nids = y.nids;
    x->ids_built = 1;
    return GROVE_OK;
}

/* The start of the first element (in file order) with id id, or SIZE_MAX. */
static size_t find_id(const svg_doc *x, const char *id)
{
    size_t lo = 0, hi = x->nids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(x->ids[mid].id, id) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < x->nids && strcmp(x->ids[lo].id, id) == 0 ? x->ids[lo].at : SIZE_MAX;
}

/* Adds bytes to the <use> work, with the LIMIT error past SVG_USE_WORK (w: the use). */
static grove_status use_charge(svg_doc *x, const where *w, size_t bytes)
{
    x->use_work += bytes;
    if (x->use_work > SVG_USE_WORK(x->n))
        return grove__error(x->ctx, GROVE_ERR_LIMIT,
                            "%s:%llu: %sthe <use> elements draw more than %zu bytes of the "
                            "file in all (uses of uses multiply what they draw)",
                            x->path, line_of(x, w->tag), w->prefix, SVG_USE_WORK(x->n));
    return GROVE_OK;
}

/* Draws what <use> (attributes at, transform m with its own transform applied, visibility
 * invis, which the content inherits) refers to: the element with that id and what it holds,
 * drawn where the use is, moved by (x, y); a <symbol> or <svg> with a viewBox is scaled into
 * the use's width and height (else its own, else the root viewport's). */
static grove_status draw_use(svg_doc *x, where *w, const attr_span *at, const affine *m,
                             const frame *vp, int invis)
{
    size_t len, target, i, d0, ne;
    double ux, uy;
    affine t = *m, extra = identity;
    char id[256], q[64];
    int tkind;
    if (!at[A_HREF].has) return GROVE_OK; /* SVG: nothing to draw */
    w->attr = "href";
    GROVE_TRY(decode_value(x, at[A_HREF].b, at[A_HREF].e, &len));
    {
        size_t b = 0, e = len;
        while (b < e && is_xml_space(x->val[b])) b++;
        while (e > b && is_xml_space(x->val[e - 1])) e--;
        if (e - b < 2 || x->val[b] != '#') {
            grove__quote(q, sizeof q, x->val + b, e - b);
            return value_bad(x, w, b, "only a reference inside the file ('#id') is read, not '%s'",
                             q);
        }
        if (e - b - 1 >= sizeof id) return value_bad(x, w, b, "the id is too long");
        memcpy(id, x->val + b + 1, e - b - 1);
        id[e - b - 1] = '\0';
    }
    if (!x->ids_built) GROVE_TRY(build_ids(x));
    target = find_id(x, id);
    w->attr = NULL;
    grove__quote(q, sizeof q, id, strlen(id));
    if (target == SIZE_MAX) return value_bad(x, w, 0, "no element has the id \"%s\"", q);
    for (size_t k = 0; k < x->nactive; k++)
        if (x->active[k] == target)
            return value_bad(x, w, 0, "the element \"%s\" holds this <use>: a reference cycle", q);
    if (x->nactive == SVG_USE_DEPTH)
        return value_bad(x, w, 0, "references nested more than %d deep", SVG_USE_DEPTH);
    GROVE_TRY(read_length(x, w, &at[A_X], "x", &ux));
    GROVE_TRY(read_length(x, w, &at[A_Y], "y", &uy));
    w->attr = NULL;
    {
        const affine tr = translation(ux, uy);
        t = compose(&t, &tr);
    }
    for (ne = target + 1; ne < x->n && !is_name_end(x->s[ne]); ne++) {
    }
    tkind = element_kind(x->s, target + 1, ne);
    if (tkind == K_SYMBOL || tkind == K_SVG) {
        attr_span ta[A_COUNT];
        const attr_span *sw, *sh; /* the size: the use's, else the target's own */
        double vb[4], vw, vh;
        int has_vb, closed;
        char tname[48];
        i = ne;
        grove__quote(tname, sizeof tname, x->s + target + 1, ne - target - 1);
        GROVE_TRY(read_attrs(x, &i, target, tname, tkind, ta, &closed));
        sw = at[A_WIDTH].has ? &at[A_WIDTH] : &ta[A_WIDTH];
        sh = at[A_HEIGHT].has ? &at[A_HEIGHT] : &ta[A_HEIGHT];
        GROVE_TRY(read_viewbox(x, w, &ta[A_VIEWBOX], vb, &has_vb));
        if (has_vb) {
            w->attr = NULL;
            if ((!sw->has || !sh->has) && !vp->vk)
                return value_bad(x, w, 0,
                                 "\"%s\" has a viewBox, and neither the <use> nor it gives a "
                                 "width and height: its size would be a share of the viewport, "
                                 "whose size is not given " SVG_VIEWPORT_HINT, q);
            if (sw->has)
                GROVE_TRY(read_length_pct(x, w, sw, "width", pct_base(vp, 0), &vw));
            else
                vw = vp->vw;
            if (sh->has)
                GROVE_TRY(read_length_pct(x, w, sh, "height", pct_base(vp, 1), &vh));
            else
                vh = vp->vh;
            w->attr = NULL;
            if (isnan(vw) || isnan(vh))
                return value_bad(x, w, 0,
                                 "the size of \"%s\" is a percentage of a viewport whose size is "
                                 "not given " SVG_VIEWPORT_HINT, q);
            /* nothing drawn, but the target's start tag was read: count it, or uses of uses
             * of such a use read a long tag 2^30 times unchecked */
            if (!(vb[2] > 0) || !(vb[3] > 0) || !(vw > 0) || !(vh > 0))
                return use_charge(x, w, i - target);
            GROVE_TRY(viewbox_map(x, w, &ta[A_PAR], vb, vw, vh, &extra));
            w->attr = NULL;
        }
        if (tkind == K_SVG) {
            /* an <svg> keeps its own x and y inside the use (and, without a viewBox, a size of 0
             * still draws nothing), as where it stands */
            double sx, sy, zw = NAN, zh = NAN;
            affine tr;
            if (!has_vb) {
                if (sw->has)
                    GROVE_TRY(read_length_pct(x, w, sw, "width", pct_base(vp, 0), &zw));
                if (sh->has)
                    GROVE_TRY(read_length_pct(x, w, sh, "height", pct_base(vp, 1), &zh));
                w->attr = NULL;
                if ((!isnan(zw) && !(zw > 0)) || (!isnan(zh) && !(zh > 0)))
                    return use_charge(x, w, i - target);
            }
            GROVE_TRY(read_length_pct(x, w, &ta[A_X], "x", pct_base(vp, 0), &sx));
            GROVE_TRY(read_length_pct(x, w, &ta[A_Y], "y", pct_base(vp, 1), &sy));
            w->attr = NULL;
            if (isnan(sx) || isnan(sy))
                return value_bad(x, w, 0,
                                 "x or y of \"%s\" is a percentage of a viewport whose size is not "
                                 "given " SVG_VIEWPORT_HINT, q);
            tr = translation(sx, sy);
            extra = compose(&tr, &extra);
        }
    }
    /* draw the target's element as if it stood here: a frame holding t, then the scan from its
     * start tag until that element has ended */
    d0 = x->depth;
    GROVE_TRY(push_frame(x, vp, &t, 0, invis));
    x->active[x->nactive++] = target;
    x->force_shown = 1;
    x->extra = extra;
    {
        grove_status st = scan_from(x, target, d0 + 1);
        x->nactive--;
        x->depth = d0;
        x->force_shown = 0;
        if (st != GROVE_OK) return st;
        return use_charge(x, w, x->scan_end - target);
    }
}

/* The viewport an <svg> element sets up (attributes at; root: the outermost one; shown: the target
 * of a <use>, which fitted its viewBox already): for the root, its size (its viewBox's, else
 * width and height) is recorded for percentages and its coordinates are kept as they are; a
 * nested one moves its content to (x, y) and fits its viewBox into its width and height (default
 * 100% of the enclosing viewport) into *m, or hides it (*hidden) when a size is 0. self gets the
 * viewport's size for what it holds. */
static grove_status viewport(svg_doc *x, where *w, const attr_span *at, int root, int shown,
                             const frame *parent, frame *self, affine *m, int *hidden)
{
    double vb[4], px = 0, py = 0, sw = 0, sh = 0;
    int has_vb, known;
    if (root || shown) {
        /* The root's own x, y, width and height place it on a page, not its content: they only
         * give the size percentages refer to, when they can (a percentage of the page, a value
         * that does not parse: the size stays unknown, as in the files read before viewports
         * were). */
        char saved[sizeof x->ctx->err];
        grove_status st;
        if (x->ctx) memcpy(saved, x->ctx->err, sizeof saved); /* a value read past is no failed call */
        st = read_viewbox(x, w, &at[A_VIEWBOX], vb, &has_vb);
        if (st == GROVE_ERR_OUT_OF_MEMORY) return st;
        if (st == GROVE_OK && has_vb && vb[2] > 0 && vb[3] > 0) {
            self->vw = vb[2], self->vh = vb[3], self->vk = 1;
        } else if (root && at[A_WIDTH].has && at[A_HEIGHT].has) {
            st = read_length(x, w, &at[A_WIDTH], "width", &self->vw);
            if (st == GROVE_OK) st = read_length(x, w, &at[A_HEIGHT], "height", &self->vh);
            if (st == GROVE_ERR_OUT_OF_MEMORY) return st;
            self->vk = st == GROVE_OK && self->vw > 0 && self->vh > 0;
        }
        if (x->ctx) memcpy(x->ctx->err, saved, sizeof saved);
        w->attr = NULL;
        return GROVE_OK;
    }
    GROVE_TRY(read_viewbox(x, w, &at[A_VIEWBOX], vb, &has_vb));
    w->attr = NULL;
    if (has_vb && !(vb[2] > 0 && vb[3] > 0)) has_vb = 0, *hidden = 1;
    GROVE_TRY(read_length_pct(x, w, &at[A_X], "x", pct_base(parent, 0), &px));
    GROVE_TRY(read_length_pct(x, w, &at[A_Y], "y", pct_base(parent, 1), &py));
    if (at[A_WIDTH].has)
        GROVE_TRY(read_length_pct(x, w, &at[A_WIDTH], "width", pct_base(parent, 0), &sw));
    else
        sw = parent->vk ? parent->vw : NAN;
    if (at[A_HEIGHT].has)
        GROVE_TRY(read_length_pct(x, w, &at[A_HEIGHT], "height", pct_base(parent, 1),
                                  &sh));
    else
        sh = parent->vk ? parent->vh : NAN;
    w->attr = NULL;
    if (isnan(px) || isnan(py))
        return value_bad(x, w, 0,
                         "x or y is a percentage of a viewport whose size is not given "
                         SVG_VIEWPORT_HINT);
    known = !isnan(sw) && !isnan(sh);
    {
        const affine tr = translation(px, py);
        *m = compose(m, &tr);
    }
    /* one size of 0 hides it, whether or not the other is known */
    if ((!isnan(sw) && !(sw > 0)) || (!isnan(sh) && !(sh > 0))) *hidden = 1;
    if (has_vb && !*hidden) {
        affine fit;
        if (!known)
            return value_bad(x, w, 0,
                             "a nested <svg> with a viewBox needs a width and height, or a "
                             "viewport to take them from " SVG_VIEWPORT_HINT);
        GROVE_TRY(viewbox_map(x, w, &at[A_PAR], vb, sw, sh, &fit));
        w->attr = NULL;
        *m = compose(m, &fit);
        self->vw = vb[2], self->vh = vb[3], self->vk = 1;
    } else {
        self->vw = sw, self->vh = sh, self->vk = known;
    }
    return GROVE_OK;
}

/* One start tag at x->s[*i] (just after '<'). */
static grove_status start_tag(svg_doc *x, size_t *i)
{
    size_t nb = *i, ne, lt = *i - 1, no = 0;
    int closed, kind, hidden, invis, shown = x->force_shown;
    attr_span at[A_COUNT];
    frame parent = {{1, 0, 0, 1, 0, 0}, 0, 0, 0, 0, 0}, self;
    affine m;
    where w;
    char name[48], q[64];

    x->force_shown = 0;
    for (ne = nb; ne < x->n && !is_name_end(x->s[ne]); ne++) {
    }
    grove__quote(name, sizeof name, x->s + nb, ne - nb);
    kind = element_kind(x->s, nb, ne);
    *i = ne;
    GROVE_TRY(read_attrs(x, i, lt, name, kind, at, &closed));
    if (x->depth) parent = x->stack[x->depth - 1];
    self = parent;
    /* a <use> draws a <symbol>; a <defs>, <clipPath>, ... that it refers to stays undrawn */
    hidden = parent.hidden || (is_hidden_container(x->s, nb, ne) && !(shown && kind == K_SYMBOL));
    invis = parent.invis;
    if (!hidden && !x->indexing) {
        /* display and visibility by CSS's cascade: a style attribute's declaration marked
         * !important, then a <style> sheet's so marked, then the style attribute's, then the
         * sheets', then the presentation attribute (display, visibility) */
        int none = -1, vis = -1, s_f[2] = {0, 0}, s_v[2] = {0, 0}, s_i[2] = {0, 0};
        int i_d = 0, i_dv = 0, i_dimp = 0, i_v = 0, i_vv = 0, i_vimp = 0;
        size_t len, vb, ve;
        if (x->css_nrules) GROVE_TRY(css_match(x, lt, nb, ne, at, s_f, s_v, s_i));
        if (at[A_STYLE].has) {
            GROVE_TRY(decode_value(x, at[A_STYLE].b, at[A_STYLE].e, &len));
            if ((i_d = style_decl(x->val, len, "display", 7, &vb, &ve, display_valid, &i_dimp)))
                i_dv = is_none(x->val, vb, ve);
            if ((i_v = style_decl(x->val, len, "visibility", 10, &vb, &ve, visibility_valid,
                                  &i_vimp)))
                i_vv = visibility_of(x->val, vb, ve);
        }
        if (!cascade(i_d, i_dimp, i_dv, s_f[0], s_i[0], s_v[0], &none) && at[A_DISPLAY].has) {
            GROVE_TRY(decode_value(x, at[A_DISPLAY].b, at[A_DISPLAY].e, &len));
            none = is_none(x->val, 0, len);
        }
        if (!cascade(i_v, i_vimp, i_vv, s_f[1], s_i[1], s_v[1], &vis) && at[A_VISIBILITY].has) {
            GROVE_TRY(decode_value(x, at[A_VISIBILITY].b, at[A_VISIBILITY].e, &len));
            vis = visibility_of(x->val, 0, len);
        }
        if (none > 0) hidden = 1;
        if (vis >= 0) invis = vis; /* inherit, unset, or an attribute not valid: inherited */
    }

    /* paths, shapes and uses are numbered in file order, drawn or not; inside what a <use> draws,
     * errors name the use instead */
    if (!x->indexing && !x->nactive) {
        if (kind < SH_COUNT) no = x->count[kind]++;
        if (kind == K_USE) no = x->use_no = x->uses++;
    }
    if (x->indexing) {
        if (at[A_ID].has) {
            size_t len;
            char *copy;
            GROVE_TRY(decode_value(x, at[A_ID].b, at[A_ID].e, &len));
            if (x->nids == x->ids_cap) {
                size_t nc = x->ids_cap ? 2 * x->ids_cap : 64;
                id_entry *ne2 = (id_entry *)realloc(x->ids, nc * sizeof *ne2);
                if (!ne2) goto oom;
                x->ids = ne2;
                x->ids_cap = nc;
            }
            copy = (char *)malloc(len + 1);
            if (!copy) goto oom;
            memcpy(copy, x->val, len + 1);
            x->ids[x->nids].id = copy;
            x->ids[x->nids++].at = lt;
        }
        m = identity;
    } else if (hidden) {
        /* not drawn here, so not read either (docs/bezier.md): a <use> that draws it reads it */
        m = parent.m;
    } else {
        w.tag = lt;
        w.attr = NULL;
        if (kind <= K_USE) {
            /* "rect 2 (id "r"): " */
            const char *kn = kind < SH_COUNT ? shape_names[kind] : "use";
            int k = x->nactive ? snprintf(w.prefix, sizeof w.prefix, "%s", kn)
                               : snprintf(w.prefix, sizeof w.prefix, "%s %zu", kn, no);
            if (at[A_ID].has) {
                size_t len;
                GROVE_TRY(decode_value(x, at[A_ID].b, at[A_ID].e, &len));
                grove__quote(q, sizeof q, x->val, len);
                snprintf(w.prefix + k, sizeof w.prefix - (size_t)k, " (id \"%s\")", q);
            }
            k = (int)strlen(w.prefix);
            if (x->nactive)
                snprintf(w.prefix + k, sizeof w.prefix - (size_t)k, ", drawn by use %zu: ",
                         x->use_no);
            else
                snprintf(w.prefix + k, sizeof w.prefix - (size_t)k, ": ");
        } else if (x->nactive) {
            snprintf(w.prefix, sizeof w.prefix, "<%s>, drawn by use %zu: ", name, x->use_no);
        } else {
            snprintf(w.prefix, sizeof w.prefix, "<%s>: ", name);
        }
        m = parent.m;
        if (at[A_TRANSFORM].has) {
            size_t len;
            affine t;
            w.attr = "transform";
            GROVE_TRY(decode_value(x, at[A_TRANSFORM].b, at[A_TRANSFORM].e, &len));
            GROVE_TRY(parse_transform(x, &w, len, &t));
            m = compose(&m, &t);
        }
        if (shown) m = compose(&m, &x->extra);
        if (kind == K_SVG || (kind == K_SYMBOL && shown))
            GROVE_TRY(viewport(x, &w, at, !x->svg_seen, shown, &parent, &self, &m, &hidden));
        /* an invisible path or shape is not drawn, nor its data or geometry read (its transform
         * above is); what an invisible use draws may say visible */
        if (kind == SH_PATH && at[A_D].has && !invis) {
            size_t len;
            w.attr = "d";
            GROVE_TRY(decode_value(x, at[A_D].b, at[A_D].e, &len));
            GROVE_TRY(parse_path_data(x, &w, &m, len));
        } else if (kind > SH_PATH && kind < SH_COUNT && !invis) {
            GROVE_TRY(emit_shape(x, kind, at, &w, &m));
        } else if (kind == K_USE) {
            GROVE_TRY(draw_use(x, &w, at, &m, &parent, invis));
        }
    }
    if (kind == K_SVG) x->svg_seen = 1;
    if (!closed) {
        GROVE_TRY(push_frame(x, &self, &m, hidden, invis));
    }
    return GROVE_OK;
oom:
    return grove__error(x->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for the ids",
                        x->path);
}

/* Scans the file from offset i; with stop_depth > 0, returns once the element open depth has
 * fallen to stop_depth after a tag (a <use>'s target drawn: its start tag is at i). */
static grove_status scan_from(svg_doc *x, size_t i, size_t stop_depth)
{
    const char *s = x->s;
    while (i < x->n) {
        const char *lt = (const char *)memchr(s + i, '<', x->n - i);
        size_t at;
        const char *what;
        int mk;
        if (!lt) break;
        at = (size_t)(lt - s);
        i = at + 1;
        mk = skip_markup(x, &i, &what);
        if (mk < 0) return svg_bad(x, at, what);
        if (mk > 0) {
            continue;
        } else if (i < x->n && s[i] == '/') {
            const char *gt = (const char *)memchr(s + i, '>', x->n - i);
            if (!gt) return svg_bad(x, at, "unterminated end tag");
            i = (size_t)(gt - s) + 1;
            if (x->depth) x->depth--;
        } else if (i < x->n && !is_name_end(s[i])) {
            GROVE_TRY(start_tag(x, &i));
        } else {
            return svg_bad(x, at, "'<' that starts no tag (write it as &lt;)");
        }
        if (stop_depth && x->depth <= stop_depth) {
            x->scan_end = i;
            return GROVE_OK;
        }
    }
    x->scan_end = x->n;
    return GROVE_OK;
}

grove_status grove__bz_read_svg(grove__rd *r, grove__bz_sink *sink)
{
    svg_doc x;
    size_t want = GROVE__IO_CHUNK, avail;
    grove_status st;

    /* The whole file into the reader's buffer, which keeps a spare byte for the NUL. */
    for (;;) {
        GROVE_TRY(grove__rd_need(r, want, &avail));
        if (avail < want) break;
        if (want > SIZE_MAX / 4)
            return grove__error(r->ctx, GROVE_ERR_LIMIT, "%s: too large to read", r->path);
        want = avail * 2;
    }
    memset(&x, 0, sizeof x);
    x.ctx = r->ctx;
    x.path = r->path;
    x.s = r->buf + r->beg;
    x.n = avail;
    x.s[x.n] = '\0';
    x.line_no = 1;
    x.sink = sink;
    /* <style> sheets apply to the whole document, wherever they stand */
    st = css_build(&x);
    if (st == GROVE_OK) st = scan_from(&x, 0, 0);
    /* a file that is not SVG at all (text curves, an empty file) would otherwise give no curves
     * and no error */
    if (st == GROVE_OK && !x.svg_seen)
        st = grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                          "%s: not an SVG document: no <svg> element%s", r->path,
                          x.n == 0 ? " (the file is empty)" : "");
    free(x.stack);
    free(x.val);
    free(x.raw);
    for (size_t k = 0; k < x.nids; k++) free(x.ids[k].id);
    free(x.ids);
    free(x.css_text);
    free(x.css_sheets);
    free(x.css_rules);
    free(x.css_cls);
    free(x.css_keys);
    free(x.css_tok);
    free(x.css_id);
    return st;
}
