/*
 * bezier_io.c - curve files in: grove_curves_read() picks the format and reads text files here,
 * SVG path data through bezier_svg.c; both append to the growing curve array kept here
 * (bezier_io.h declares what the two share). Polylines out (CSV, SVG) are in bezier_write.c.
 *
 * Text files stream one line at a time through the io module's reader, so a file of any size
 * needs memory for its curves only.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bezier_io.h"

/* ---- curve storage ---- */

/* Appends one curve of degree deg whose deg + 1 control points are xy[0..2 deg + 1]. */
grove_status grove__bz_sink_push(grove__bz_sink *s, int deg, const float *xy)
{
    grove_curves *c = s->out;
    float *cp;
    if (c->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 1024;
        uint8_t *dg;
        if (nc > SIZE_MAX / (8 * sizeof(float)))
            return grove__error(s->ctx, GROVE_ERR_LIMIT, "%zu curves do not fit in memory", c->n);
        cp = (float *)realloc(c->cp, nc * 8 * sizeof(float));
        if (!cp) goto oom;
        c->cp = cp;
        dg = (uint8_t *)realloc(c->degree, nc);
        if (!dg) goto oom;
        c->degree = dg;
        s->cap = nc;
    }
    cp = c->cp + 8 * c->n;
    memcpy(cp, xy, (size_t)(2 * (deg + 1)) * sizeof(float));
    /* the unused slots are ignored by the library; zeros keep the arrays deterministic */
    memset(cp + 2 * (deg + 1), 0, (size_t)(8 - 2 * (deg + 1)) * sizeof(float));
    c->degree[c->n++] = (uint8_t)deg;
    return GROVE_OK;
oom:
    return grove__error(s->ctx, GROVE_ERR_OUT_OF_MEMORY, "out of memory for %zu curves",
                        s->cap ? s->cap * 2 : 1024);
}

void grove_curves_free(grove_curves *c)
{
    if (!c) return;
    free(c->cp);
    free(c->degree);
    c->cp = NULL;
    c->degree = NULL;
    c->n = 0;
}

/* ---- text files ---- */

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

static grove_status read_text(grove__rd *r, grove__bz_sink *s)
{
    char *line, *f[8], q[64];
    size_t len, fl[8], avail;
    int got;

    /* A UTF-8 byte order mark is not part of the first number. */
    GROVE_TRY(grove__rd_need(r, 3, &avail));
    if (avail >= 3 && memcmp(r->buf + r->beg, "\xEF\xBB\xBF", 3) == 0) r->beg += 3;

    for (;;) {
        char *p, *e, *hash;
        size_t k = 0;
        float xy[8];
        unsigned long long ln;

        GROVE_TRY(grove__rd_line(r, &line, &len, &got));
        if (!got) break;
        ln = (unsigned long long)r->line;
        p = line;
        e = line + len;
        hash = (char *)memchr(p, '#', len);
        if (hash) e = hash;
        while (p < e && is_space(*p)) p++;
        if (p == e) continue;
        if (*p == '<')
            return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                "%s:%llu: this looks like SVG or XML, not a text curve file "
                                "(read it as SVG: a .svg name or the SVG format)",
                                r->path, ln);
        /* Fields: a run of blanks, or one comma with blanks around it, separates two numbers. */
        for (;;) {
            char *b = p;
            while (p < e && *p != ',' && !is_space(*p)) p++;
            if (p == b)
                return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                    "%s:%llu: number %zu is empty (a comma at the start or end "
                                    "of the line, or two commas in a row)",
                                    r->path, ln, k + 1);
            if (k < 8) {
                f[k] = b;
                fl[k] = (size_t)(p - b);
            }
            k++;
            while (p < e && is_space(*p)) p++;
            if (p < e && *p == ',') {
                p++;
                while (p < e && is_space(*p)) p++;
                continue; /* a number must follow, even at the end of the line */
            }
            if (p == e) break;
        }
        if (k != 4 && k != 6 && k != 8)
            return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                "%s:%llu: %zu number%s; a curve is 4 (a line), 6 (a quadratic) or "
                                "8 (a cubic) numbers",
                                r->path, ln, k, k == 1 ? "" : "s");
        for (size_t i = 0; i < k; i++) {
            int rc = grove__parse_float(f[i], fl[i], &xy[i]);
            if (rc == GROVE__NUM_OK) continue;
            grove__quote(q, sizeof q, f[i], fl[i]);
            switch (rc) {
            case GROVE__NUM_NAN:
                return grove__error(r->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: number %zu is NaN",
                                    r->path, ln, i + 1);
            case GROVE__NUM_INF:
                return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                    "%s:%llu: number %zu is infinite", r->path, ln, i + 1);
            case GROVE__NUM_RANGE:
                return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                    "%s:%llu: number %zu is out of float range: '%s'", r->path,
                                    ln, i + 1, q);
            case GROVE__NUM_NOMEM:
                return grove__error(r->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s:%llu: out of memory",
                                    r->path, ln);
            default:
                return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                    "%s:%llu: number %zu is not a number: '%s'", r->path, ln,
                                    i + 1, q);
            }
        }
        for (size_t i = 0; i < k; i++)
            if (fabsf(xy[i]) > GROVE_BEZIER_MAX_COORD)
                return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                                    "%s:%llu: number %zu (%.9g) is larger in magnitude than %g, "
                                    "the largest coordinate accepted",
                                    r->path, ln, i + 1, (double)xy[i],
                                    (double)GROVE_BEZIER_MAX_COORD);
        GROVE_TRY(grove__bz_sink_push(s, (int)k / 2 - 1, xy));
    }
    return GROVE_OK;
}

/* ---- reading: the public call ---- */

/* Case-insensitive: does the file name end in ".svg"? */
static int is_svg_name(const char *path)
{
    size_t n = strlen(path);
    const char *e = path + n - 4;
    if (n < 5 || e[-1] == '/') return 0;
    return e[0] == '.' && (e[1] | 0x20) == 's' && (e[2] | 0x20) == 'v' && (e[3] | 0x20) == 'g';
}

grove_status grove_curves_read(grove_ctx *ctx, const char *path, grove_curve_format fmt,
                               grove_curves *out)
{
    static const char fn[] = "grove_curves_read";
    grove__rd r;
    grove__bz_sink sink;
    grove_status st;

    GROVE_TRY(grove__check_ctx(ctx));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    memset(out, 0, sizeof *out);
    if (!path) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: path is NULL", fn);
    if ((int)fmt < GROVE_CURVES_AUTO || (int)fmt > GROVE_CURVES_SVG)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: fmt must be GROVE_CURVES_AUTO, _TEXT or _SVG, got %d", fn,
                            (int)fmt);
    if (fmt == GROVE_CURVES_AUTO) fmt = is_svg_name(path) ? GROVE_CURVES_SVG : GROVE_CURVES_TEXT;
    GROVE_TRY(grove__rd_open(&r, ctx, path));
    sink.ctx = ctx;
    sink.out = out;
    sink.cap = 0;
    st = fmt == GROVE_CURVES_SVG ? grove__bz_read_svg(&r, &sink) : read_text(&r, &sink);
    grove__rd_close(&r);
    if (st != GROVE_OK) {
        grove_curves_free(out);
        return st;
    }
    if (out->n == 0) {
        grove_curves_free(out);
    } else if (out->n < sink.cap) {
        /* give back the unused part of the geometric growth; keep the blocks if that fails */
        float *cp = (float *)realloc(out->cp, out->n * 8 * sizeof(float));
        uint8_t *dg = (uint8_t *)realloc(out->degree, out->n);
        if (cp) out->cp = cp;
        if (dg) out->degree = dg;
    }
    return GROVE_OK;
}
