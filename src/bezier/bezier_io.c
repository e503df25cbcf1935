/*
 * bezier_io.c - curve files in: grove_curves_read() picks the format and reads text files here,
 * SVG path data through bezier_svg.c; both append to the growing curve array kept here
 * (bezier_io.h declares what the two share). Polylines out (CSV, SVG) are in bezier_write.c.
 *
 * Text files stream through the io module's reader in blocks of whole lines (parsed in
 * parallel), so a file of any size needs memory for its curves and a block.
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

/* What one line of a text file holds: a curve, nothing (blank or a comment), or an error that
 * line_error() turns into its message. */
enum { TL_CURVE, TL_SKIP, TL_SVG, TL_EMPTY, TL_COUNT, TL_NAN, TL_INF, TL_RANGE, TL_NOMEM,
       TL_NUMBER, TL_BIG };
typedef struct tline {
    int kind;
    size_t k;   /* numbers on the line (TL_CURVE, TL_COUNT) */
    size_t num; /* the 1-based number an error is about */
    float v;    /* TL_BIG: its value */
    char q[64]; /* TL_RANGE, TL_NUMBER: the number as written, quoted */
} tline;

/* Parses line[0..len) (writable: a number's parser may put a NUL at line[len] for a moment and
 * restore it, so line[len] must belong to the line or be spare) into xy; returns t->kind. */
static int parse_line(char *line, size_t len, float xy[8], tline *t)
{
    char *p = line, *e = line + len, *hash, *f[8];
    size_t k = 0, fl[8];
    hash = (char *)memchr(p, '#', len);
    if (hash) e = hash;
    while (p < e && is_space(*p)) p++;
    if (p == e) return t->kind = TL_SKIP;
    if (*p == '<') return t->kind = TL_SVG;
    /* Fields: a run of blanks, or one comma with blanks around it, separates two numbers. */
    for (;;) {
        char *b = p;
        while (p < e && *p != ',' && !is_space(*p)) p++;
        if (p == b) {
            t->num = k + 1;
            return t->kind = TL_EMPTY;
        }
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
    t->k = k;
    if (k != 4 && k != 6 && k != 8) return t->kind = TL_COUNT;
    for (size_t i = 0; i < k; i++) {
        const int rc = grove__parse_float(f[i], fl[i], &xy[i]);
        if (rc == GROVE__NUM_OK) continue;
        t->num = i + 1;
        grove__quote(t->q, sizeof t->q, f[i], fl[i]);
        switch (rc) {
        case GROVE__NUM_NAN: return t->kind = TL_NAN;
        case GROVE__NUM_INF: return t->kind = TL_INF;
        case GROVE__NUM_RANGE: return t->kind = TL_RANGE;
        case GROVE__NUM_NOMEM: return t->kind = TL_NOMEM;
        default: return t->kind = TL_NUMBER;
        }
    }
    for (size_t i = 0; i < k; i++)
        if (fabsf(xy[i]) > GROVE_BEZIER_MAX_COORD) {
            t->num = i + 1;
            t->v = xy[i];
            return t->kind = TL_BIG;
        }
    return t->kind = TL_CURVE;
}

/* The message of a line's error (t->kind not TL_CURVE or TL_SKIP), for line ln of r's file. */
static grove_status line_error(const grove__rd *r, unsigned long long ln, const tline *t)
{
    switch (t->kind) {
    case TL_SVG:
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                            "%s:%llu: this looks like SVG or XML, not a text curve file "
                            "(read it as SVG: a .svg name or the SVG format)",
                            r->path, ln);
    case TL_EMPTY:
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                            "%s:%llu: number %zu is empty (a comma at the start or end "
                            "of the line, or two commas in a row)",
                            r->path, ln, t->num);
    case TL_COUNT:
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                            "%s:%llu: %zu number%s; a curve is 4 (a line), 6 (a quadratic) or "
                            "8 (a cubic) numbers",
                            r->path, ln, t->k, t->k == 1 ? "" : "s");
    case TL_NAN:
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: number %zu is NaN", r->path,
                            ln, t->num);
    case TL_INF:
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT, "%s:%llu: number %zu is infinite",
                            r->path, ln, t->num);
    case TL_RANGE:
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                            "%s:%llu: number %zu is out of float range: '%s'", r->path, ln,
                            t->num, t->q);
    case TL_NOMEM:
        return grove__error(r->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s:%llu: out of memory", r->path,
                            ln);
    case TL_BIG:
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                            "%s:%llu: number %zu (%.9g) is larger in magnitude than %g, "
                            "the largest coordinate accepted",
                            r->path, ln, t->num, (double)t->v, (double)GROVE_BEZIER_MAX_COORD);
    default:
        return grove__error(r->ctx, GROVE_ERR_BAD_INPUT,
                            "%s:%llu: number %zu is not a number: '%s'", r->path, ln, t->num,
                            t->q);
    }
}

/* Text files are read in blocks of whole lines, parsed on the context's threads (a block cut
 * into pieces of whole lines, a piece a thread, each into curves of its own), then appended in
 * order; the first error in file order is reported, with its line number (grove__rd_pieces). */

typedef struct tpiece {
    char *beg, *end; /* whole lines; the last one may lack its '\n' only at the end of file */
    float *cp;       /* 8 floats a curve */
    uint8_t *deg;
    size_t n;        /* curves */
    uint64_t lines;  /* lines parsed (up to and including an error's) */
    int bad;         /* an error on line `lines` of the piece, described by err */
    tline err;
} tpiece;

static void parse_piece(tpiece *pc)
{
    char *p = pc->beg;
    pc->n = 0;
    pc->lines = 0;
    pc->bad = 0;
    while (p < pc->end) {
        char *nl = (char *)memchr(p, '\n', (size_t)(pc->end - p));
        char *e = nl ? nl : pc->end;
        float xy[8];
        pc->lines++;
        if (parse_line(p, (size_t)(e - p), xy, &pc->err) == TL_CURVE) {
            const int deg = (int)pc->err.k / 2 - 1;
            float *cp = pc->cp + 8 * pc->n;
            memcpy(cp, xy, (size_t)(2 * (deg + 1)) * sizeof(float));
            pc->deg[pc->n++] = (uint8_t)deg;
        } else if (pc->err.kind != TL_SKIP) {
            pc->bad = 1;
            return;
        }
        p = e + 1;
    }
}

static grove_status read_text(grove__rd *r, grove__bz_sink *s)
{
    const int nt = grove__threads(r->ctx);
    tpiece *pcs = (tpiece *)calloc((size_t)nt, sizeof *pcs);
    char **at = (char **)malloc(((size_t)nt + 1) * sizeof *at);
    float *cp = NULL;
    uint8_t *deg = NULL;
    grove_status st = GROVE_OK;

    if (!pcs || !at) {
        free(pcs);
        free(at);
        return grove__error(r->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", r->path);
    }
    /* A UTF-8 byte order mark is not part of the first number. */
    GROVE_TRY_END(st, grove__rd_skip_bom(r));
    /* room for the curves of a block: a curve line is at least 8 bytes ("0 0 0 0\n") */
    cp = (float *)malloc((GROVE__IO_BLOCK / 8 + (size_t)nt) * 8 * sizeof(float));
    deg = (uint8_t *)malloc(GROVE__IO_BLOCK / 8 + (size_t)nt);
    if (!cp || !deg) {
        st = grove__error(r->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", r->path);
        goto _end;
    }
    for (;;) {
        uint64_t lines = 0;
        int np;
        GROVE_TRY_END(st, grove__rd_pieces(r, nt, at, &np));
        if (np == 0) break;
        {
            float *cpn = cp;
            uint8_t *dg = deg;
            for (int i = 0; i < np; i++) {
                /* curves of a piece: at most its bytes / 8, plus a last line without '\n' */
                const size_t most = (size_t)(at[i + 1] - at[i]) / 8 + 1;
                pcs[i].beg = at[i];
                pcs[i].end = at[i + 1];
                pcs[i].cp = cpn;
                pcs[i].deg = dg;
                cpn += most * 8;
                dg += most;
            }
        }
#pragma omp parallel for num_threads(np) schedule(static, 1)
        for (int i = 0; i < np; i++) parse_piece(&pcs[i]);
        for (int i = 0; i < np; i++) {
            if (pcs[i].bad) {
                st = line_error(r, (unsigned long long)(r->line + lines + pcs[i].lines),
                                &pcs[i].err);
                goto _end;
            }
            for (size_t c = 0; c < pcs[i].n; c++)
                GROVE_TRY_END(st, grove__bz_sink_push(s, pcs[i].deg[c], pcs[i].cp + 8 * c));
            lines += pcs[i].lines;
        }
        grove__rd_consume(r, (size_t)(at[np] - at[0]), lines);
    }
_end:
    free(pcs);
    free(at);
    free(cp);
    free(deg);
    return st;
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
