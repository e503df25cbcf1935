/*
 * bezier_write.c - tessellated polylines out: grove_polylines_write_csv() and
 * grove_polylines_write_svg() (a picture, sampled so that a browser can still open it). Both
 * check the polylines first and write through a temporary file that is renamed into place.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/io_internal.h"
#include "grove/bezier.h"

/* ---- writing ---- */

/* Checks the shape of p (offsets start at 0, never decrease, end at n_vertices; every vertex
 * finite) so that neither writer produces a file that cannot be read back. */
static grove_status check_polylines(grove_ctx *ctx, const char *fn, const char *path,
                                    const grove_polylines *p)
{
    if (!path) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: path is NULL", fn);
    if (!p) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: p is NULL", fn);
    if (!p->offsets) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: p->offsets is NULL", fn);
    if (p->n_vertices > 0 && !p->xy)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: p->xy is NULL with %llu vertices",
                            fn, (unsigned long long)p->n_vertices);
    if (p->n_vertices > SIZE_MAX / (2 * sizeof(float)))
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: p->n_vertices = %llu is too large",
                            fn, (unsigned long long)p->n_vertices);
    if (p->offsets[0] != 0 || p->offsets[p->n_curves] != p->n_vertices)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: p->offsets runs from %llu to %llu, want 0 to n_vertices = %llu",
                            fn, (unsigned long long)p->offsets[0],
                            (unsigned long long)p->offsets[p->n_curves],
                            (unsigned long long)p->n_vertices);
    for (size_t c = 0; c < p->n_curves; c++)
        if (p->offsets[c + 1] < p->offsets[c])
            return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                                "%s: p->offsets decreases at curve %zu (%llu, then %llu)", fn, c,
                                (unsigned long long)p->offsets[c],
                                (unsigned long long)p->offsets[c + 1]);
    for (size_t c = 0; c < p->n_curves; c++)
        for (uint64_t v = p->offsets[c]; v < p->offsets[c + 1]; v++)
            if (!isfinite(p->xy[2 * v]) || !isfinite(p->xy[2 * v + 1]))
                return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                    "%s: %s: curve %zu, vertex %llu is not finite; nothing "
                                    "written",
                                    fn, path, c, (unsigned long long)(v - p->offsets[c]));
    return GROVE_OK;
}


/* Unsigned decimal; returns the length (dst holds 24 bytes). */
static size_t fmt_u64(char *dst, uint64_t v)
{
    char t[24];
    size_t k = 0, n = 0;
    do {
        t[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k) dst[n++] = t[--k];
    return n;
}

/* The first errno of a failed write, 0 while all succeed. */
static void put(FILE *f, const char *s, size_t n, int *err)
{
    errno = 0;
    if (!*err && fwrite(s, 1, n, f) != n) *err = errno ? errno : EIO;
}

/* The CSV rows are formatted in parallel and written in order (grove__rows_write); a row takes
 * at most CSV_ROW bytes (two 20-digit integers, two floats of at most 15 characters, three
 * commas and the newline). One thread formats and writes ~90 ns a vertex (1.6 s for the 1.78 x
 * 10^7 vertices of 10^6 bench curves into memory-backed files; two threads 0.98 s; printf's
 * %.9g took ~18 s), slower than a fast disk takes the bytes. */
#define CSV_ROW 80

/* The curve holding vertex v (offsets[c] <= v < offsets[c + 1]; v < n_vertices). */
static size_t curve_of(const grove_polylines *p, uint64_t v)
{
    size_t lo = 0, hi = p->n_curves; /* offsets[lo] <= v < offsets[hi] */
    while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        if (p->offsets[mid] <= v)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* grove__rows_fmt of a grove_polylines: the rows of vertices [v0, v1). */
static size_t csv_rows(const void *arg, char *dst, size_t v0, size_t v1)
{
    const grove_polylines *p = (const grove_polylines *)arg;
    size_t k = 0, c = curve_of(p, v0);
    for (size_t v = v0; v < v1; v++) {
        while (p->offsets[c + 1] <= v) c++; /* curves without vertices are skipped */
        k += fmt_u64(dst + k, c);
        dst[k++] = ',';
        k += fmt_u64(dst + k, v - p->offsets[c]);
        dst[k++] = ',';
        k += grove__format_float(dst + k, p->xy[2 * v]);
        dst[k++] = ',';
        k += grove__format_float(dst + k, p->xy[2 * v + 1]);
        dst[k++] = '\n';
    }
    return k;
}

grove_status grove_polylines_write_csv(grove_ctx *ctx, const grove_polylines *p, const char *path)
{
    static const char fn[] = "grove_polylines_write_csv";
    char *tmp = NULL;
    FILE *f = NULL;
    int err = 0;
    grove__rows rows;
    grove_status st;

    GROVE_TRY(grove__check_ctx(ctx));
    GROVE_TRY(check_polylines(ctx, fn, path, p));
    GROVE_TRY(grove__rows_init(ctx, fn, path, &rows, (size_t)p->n_vertices, CSV_ROW));
    st = grove__wfile_open(ctx, path, &tmp, &f);
    if (st != GROVE_OK) {
        grove__rows_free(&rows);
        return st;
    }
    put(f, "curve,vertex,x,y\n", 17, &err);
    grove__rows_write(&rows, f, &err, (size_t)p->n_vertices, csv_rows, p);
    grove__rows_free(&rows);
    return grove__wfile_commit(ctx, path, tmp, f, err);
}

/* ---- SVG picture ---- */

/* The picture is capped so that a browser can still open it: every k-th curve is drawn, k the
 * smallest that keeps it within both limits. */
#define SVG_MAX_CURVES ((uint64_t)200000)
#define SVG_MAX_VERTICES ((uint64_t)4000000)
/* Vertices are marked with dots up to this many drawn vertices. */
#define SVG_MAX_DOTS ((uint64_t)20000)

typedef struct picture {
    FILE *f;
    int err;
    double scale, ox, oy, x0, y1; /* pixel = (x - x0) * scale + ox, (y1 - y) * scale + oy */
    long long last_x, last_y;     /* the previous point written, in hundredths of a pixel */
} picture;

/* Writes a pixel coordinate in hundredths, without trailing zeros: integer arithmetic, so
 * the locale's decimal point never enters. */
static void pic_num(picture *pc, long long h)
{
    char t[32];
    size_t k = 0;
    unsigned long long a;
    if (h < 0) t[k++] = '-';
    a = h < 0 ? (unsigned long long)(-h) : (unsigned long long)h;
    k += fmt_u64(t + k, a / 100);
    if (a % 100) {
        t[k++] = '.';
        t[k++] = (char)('0' + a % 100 / 10);
        if (a % 10) t[k++] = (char)('0' + a % 10);
    }
    put(pc->f, t, k, &pc->err);
}

/* The point (x, y) in hundredths of a pixel; returns 0 if it equals the previous one. */
static int pic_point(picture *pc, double x, double y, int force, const char *lead)
{
    long long hx = llround(((x - pc->x0) * pc->scale + pc->ox) * 100.0);
    long long hy = llround(((pc->y1 - y) * pc->scale + pc->oy) * 100.0);
    if (!force && hx == pc->last_x && hy == pc->last_y) return 0;
    pc->last_x = hx;
    pc->last_y = hy;
    put(pc->f, lead, strlen(lead), &pc->err);
    pic_num(pc, hx);
    put(pc->f, ",", 1, &pc->err);
    pic_num(pc, hy);
    return 1;
}

static void pic_str(picture *pc, const char *s) { put(pc->f, s, strlen(s), &pc->err); }

grove_status grove_polylines_write_svg(grove_ctx *ctx, const grove_polylines *p,
                                       const grove_curves *curves, int width, int height,
                                       const char *path)
{
    static const char fn[] = "grove_polylines_write_svg";
    double box[4] = {INFINITY, INFINITY, -INFINITY, -INFINITY}, bw, bh, margin, stroke;
    uint64_t stride = 1, drawn = 0, drawn_v = 0;
    char *tmp = NULL, line[512], a[32], b[32], c[32], d[32];
    picture pc;
    size_t i;

    GROVE_TRY(grove__check_ctx(ctx));
    GROVE_TRY(check_polylines(ctx, fn, path, p));
    if (width < 16 || width > 100000 || height < 16 || height > 100000)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: the picture must be 16..100000 pixels each way, got %d x %d", fn,
                            width, height);
    if (curves) {
        if (curves->n != p->n_curves)
            return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                                "%s: curves->n = %zu, but the polylines are %zu curves", fn,
                                curves->n, p->n_curves);
        if (curves->n && (!curves->cp || !curves->degree))
            return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: curves has NULL arrays", fn);
        for (i = 0; i < curves->n; i++) {
            if (curves->degree[i] < 1 || curves->degree[i] > 3)
                return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                                    "%s: curve %zu has degree %d, want 1..3", fn, i,
                                    (int)curves->degree[i]);
            for (int k = 0; k < 2 * (curves->degree[i] + 1); k++)
                if (!isfinite(curves->cp[8 * i + k]))
                    return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                        "%s: curve %zu has a non-finite control point", fn, i);
        }
    }

    /* every vertex (and control point) counts towards the box, drawn or not, so that a
     * sampled picture has the extent of the whole */
    for (uint64_t v = 0; v < p->n_vertices; v++) {
        double x = p->xy[2 * v], y = p->xy[2 * v + 1];
        if (x < box[0]) box[0] = x;
        if (y < box[1]) box[1] = y;
        if (x > box[2]) box[2] = x;
        if (y > box[3]) box[3] = y;
    }
    if (curves)
        for (i = 0; i < curves->n; i++)
            for (int k = 0; k <= curves->degree[i]; k++) {
                double x = curves->cp[8 * i + 2 * k], y = curves->cp[8 * i + 2 * k + 1];
                if (x < box[0]) box[0] = x;
                if (y < box[1]) box[1] = y;
                if (x > box[2]) box[2] = x;
                if (y > box[3]) box[3] = y;
            }
    if (!(box[0] <= box[2])) box[0] = box[1] = box[2] = box[3] = 0;
    bw = box[2] - box[0];
    bh = box[3] - box[1];
    /* a point or a flat line still gets a picture: widen a degenerate side */
    {
        double ext = bw > bh ? bw : bh;
        if (!(ext > 0)) ext = fabs(box[0]) + fabs(box[1]) > 0 ? 1e-3 * (fabs(box[0]) + fabs(box[1])) : 1;
        if (!(bw > 1e-6 * ext)) {
            box[0] -= ext / 2, box[2] += ext / 2;
            bw = box[2] - box[0];
        }
        if (!(bh > 1e-6 * ext)) {
            box[1] -= ext / 2, box[3] += ext / 2;
            bh = box[3] - box[1];
        }
    }
    margin = 4 + 0.03 * (width < height ? width : height);
    pc.scale = fmin((width - 2 * margin) / bw, (height - 2 * margin) / bh);
    pc.ox = (width - bw * pc.scale) / 2;
    pc.oy = (height - bh * pc.scale) / 2;
    pc.x0 = box[0];
    pc.y1 = box[3];
    pc.err = 0;

    if (p->n_curves > SVG_MAX_CURVES) stride = (p->n_curves + SVG_MAX_CURVES - 1) / SVG_MAX_CURVES;
    if (p->n_vertices / stride > SVG_MAX_VERTICES)
        stride = (p->n_vertices + SVG_MAX_VERTICES - 1) / SVG_MAX_VERTICES;
    for (i = 0; i < p->n_curves; i += stride) {
        drawn++;
        drawn_v += p->offsets[i + 1] - p->offsets[i];
    }
    stroke = drawn > 20000 ? 0.5 : drawn > 2000 ? 0.8 : 1.4;

    GROVE_TRY(grove__wfile_open(ctx, path, &tmp, &pc.f));
    setvbuf(pc.f, NULL, _IOFBF, (size_t)1 << 20);
    snprintf(line, sizeof line,
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
             "viewBox=\"0 0 %d %d\">\n",
             width, height, width, height);
    pic_str(&pc, line);
    grove__format_float(a, (float)box[0]), grove__format_float(b, (float)box[1]);
    grove__format_float(c, (float)box[2]), grove__format_float(d, (float)box[3]);
    snprintf(line, sizeof line,
             "<!-- grove %s: %zu tessellated curves, %llu vertices; data box x %s..%s, y %s..%s "
             "(y up) -->\n",
             grove_version(), p->n_curves, (unsigned long long)p->n_vertices, a, c, b, d);
    pic_str(&pc, line);
    if (stride > 1) {
        snprintf(line, sizeof line,
                 "<!-- sampled: 1 curve in %llu is drawn (%llu of %zu curves, %llu vertices); "
                 "a picture holds at most %llu curves and %llu vertices -->\n",
                 (unsigned long long)stride, (unsigned long long)drawn, p->n_curves,
                 (unsigned long long)drawn_v, (unsigned long long)SVG_MAX_CURVES,
                 (unsigned long long)SVG_MAX_VERTICES);
        pic_str(&pc, line);
    }
    pic_str(&pc, "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");
    if (curves && curves->n) {
        pic_str(&pc, "<g fill=\"none\" stroke=\"#9aa4b0\" stroke-width=\"0.6\" "
                     "stroke-dasharray=\"3 2\" opacity=\"0.7\">\n");
        for (i = 0; i < curves->n; i += stride) {
            const float *cp = curves->cp + 8 * i;
            if (curves->degree[i] < 2) continue; /* a line's polygon is the line itself */
            pic_str(&pc, "<polyline points=\"");
            for (int k = 0; k <= curves->degree[i]; k++)
                pic_point(&pc, cp[2 * k], cp[2 * k + 1], 1, k ? " " : "");
            pic_str(&pc, "\"/>\n");
        }
        pic_str(&pc, "</g>\n");
    }
    snprintf(line, sizeof line,
             "<g fill=\"none\" stroke=\"#1d4f91\" stroke-width=\"%s\" stroke-linejoin=\"round\" "
             "stroke-linecap=\"round\">\n",
             stroke == 0.5 ? "0.5" : stroke == 0.8 ? "0.8" : "1.4");
    pic_str(&pc, line);
    for (i = 0; i < p->n_curves && !pc.err; i += stride) {
        uint64_t v0 = p->offsets[i], v1 = p->offsets[i + 1];
        if (v1 == v0) continue;
        pic_str(&pc, "<polyline points=\"");
        pic_point(&pc, p->xy[2 * v0], p->xy[2 * v0 + 1], 1, "");
        /* vertices closer than a hundredth of a pixel add nothing to the picture */
        for (uint64_t v = v0 + 1; v < v1; v++)
            pic_point(&pc, p->xy[2 * v], p->xy[2 * v + 1], v + 1 == v1, " ");
        pic_str(&pc, "\"/>\n");
    }
    pic_str(&pc, "</g>\n");
    if (drawn_v <= SVG_MAX_DOTS && drawn_v > 0) {
        /* zero-length round-capped strokes: one path for all the dots */
        pic_str(&pc, "<path fill=\"none\" stroke=\"#d2452b\" stroke-width=\"3\" "
                     "stroke-linecap=\"round\" d=\"");
        for (i = 0; i < p->n_curves; i += stride)
            for (uint64_t v = p->offsets[i]; v < p->offsets[i + 1]; v++) {
                pic_point(&pc, p->xy[2 * v], p->xy[2 * v + 1], 1, "M");
                pic_str(&pc, "h0");
            }
        pic_str(&pc, "\"/>\n");
    }
    pic_str(&pc, "</svg>\n");
    return grove__wfile_commit(ctx, path, tmp, pc.f, pc.err);
}
