/*
 * demo_bezier.c - the bezier module's part of `grove demo`: random lines, quadratics and cubics
 * (degenerate ones among them) tessellated under both vertex-count rules, and a small built-in
 * SVG drawing read back through the SVG reader; with --out DIR the drawing is kept as
 * DIR/bezier-input.svg and the result drawn as DIR/bezier.svg.
 *
 * Checks, independent of the library's code: every vertex lies on its curve (the curve
 * evaluated in double at u = i / (m - 1)), the end vertices are the end control points bit for
 * bit, the counts follow the rule (the curvature rule recomputed as docs/bezier.md gives it;
 * tolerance: the polyline stays within the tolerance of the curve at every segment's middle
 * parameter); on CUDA the result equals the CPU backend's byte for byte.
 *
 * The part does not scale with --size as the others do: a few thousand curves show the whole
 * pipeline, and the tessellation's throughput is `grove bench bezier`'s subject.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "grove/bezier.h"

int cli_demo_bezier(cli_demo *d);

#define DEMO_MAX_CURVES ((size_t)5000)

/* A tree, a shed and a leaf, drawn in y-up coordinates inside a group that flips them into
 * SVG's y-down space, so that a browser shows the file upright. It uses every supported command
 * but the arc, relative and implicit ones, S and T reflections, closepath, transform lists on
 * groups and paths, and two basic shapes (a rounded rectangle and a circle, whose corners and
 * quarters are arcs). */
static const char drawing[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"400\" "
    "viewBox=\"0 0 200 200\">\n"
    "  <!-- grove demo drawing: a tree, a shed, a leaf -->\n"
    "  <style><![CDATA[ path { fill: none; stroke: #222 } ]]></style>\n"
    "  <g id=\"y-up\" transform=\"matrix(1 0 0 -1 0 200)\">\n"
    "    <path id=\"ground\" d=\"M10 30 C40 40 60 20 100 30 S160 40 190 30\"/>\n"
    "    <path id=\"trunk\" d=\"M95 30 V80 h10 L105 30 z\"/>\n"
    "    <path id=\"crown\" d=\"M135 110 C135 129.33 119.33 145 100 145 S65 129.33 65 110\n"
    "      S80.67 75 100 75 S135 90.67 135 110 Z\"/>\n"
    "    <g transform=\"translate(72 92) scale(0.6) translate(-100,-110)\">\n"
    "      <path d=\"M135 110 C135 129.33 119.33 145 100 145 S65 129.33 65 110 S80.67 75 100 75\n"
    "        S135 90.67 135 110 Z\"/>\n"
    "    </g>\n"
    "    <path transform=\"rotate(180 100 110) translate(-28 18) scale(1)\"\n"
    "      d=\"M121 110 c0 7.73 -9.4 14 -21 14 s-21 -6.27 -21 -14 9.4 -14 21 -14 21 6.27 21 14z\"/>\n"
    "    <path id=\"leaf\" d=\"M150 60 q10 15 25 5 t-25 -5\"/>\n"
    "    <path id=\"shed\" d=\"M20 30 v20 h15 v-20 M17 50 L27.5 60 38 50\"/>\n"
    "    <rect id=\"window\" x=\"24\" y=\"36\" width=\"7\" height=\"7\" rx=\"1.5\"/>\n"
    "    <circle id=\"apple\" cx=\"118\" cy=\"98\" r=\"3\"/>\n"
    "    <path id=\"sun\" transform=\"skewX(-10)\" d=\"M170 170 Q180 185 190 170 T170 170\"/>\n"
    "  </g>\n"
    "</svg>\n";
/* ground 2, trunk 4, crowns 3 x 4, leaf 2, shed 5, window 8, apple 4, sun 2 */
#define DRAWING_CURVES 39

typedef struct bz_rng {
    uint64_t s;
} bz_rng;

static double rng_unit(bz_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

/* n random curves in [0, 100]^2: mixed degrees, control points up to 12 units from the
 * first, some degenerate (all points equal, or collinear). */
static void random_curves(grove_curves *c, size_t n, unsigned long long seed)
{
    bz_rng r = {seed * 0x2545F4914F6CDD1Dull + 17};
    for (size_t i = 0; i < n; i++) {
        float *p = c->cp + 8 * i;
        int deg = 1 + (int)(rng_unit(&r) * 3), kind = (int)(rng_unit(&r) * 20);
        double x0 = 100 * rng_unit(&r), y0 = 100 * rng_unit(&r);
        double dx = 24 * rng_unit(&r) - 12, dy = 24 * rng_unit(&r) - 12;
        c->degree[i] = (uint8_t)(deg > 3 ? 3 : deg);
        for (int k = 0; k < 4; k++) {
            double t = rng_unit(&r);
            if (kind == 0) { /* a point */
                p[2 * k] = (float)x0, p[2 * k + 1] = (float)y0;
            } else if (kind == 1) { /* collinear, not in order */
                p[2 * k] = (float)(x0 + 2 * t * dx), p[2 * k + 1] = (float)(y0 + 2 * t * dy);
            } else {
                p[2 * k] = (float)(x0 + 24 * rng_unit(&r) - 12);
                p[2 * k + 1] = (float)(y0 + 24 * rng_unit(&r) - 12);
            }
        }
        if (kind > 1) p[0] = (float)x0, p[1] = (float)y0;
    }
    c->n = n;
}

/* B(u) in double, Bernstein form. */
static void eval_curve(const float *p, int deg, double u, double *x, double *y)
{
    double v = 1 - u, b[4];
    if (deg == 1)
        b[0] = v, b[1] = u;
    else if (deg == 2)
        b[0] = v * v, b[1] = 2 * u * v, b[2] = u * u;
    else
        b[0] = v * v * v, b[1] = 3 * v * v * u, b[2] = 3 * v * u * u, b[3] = u * u * u;
    *x = *y = 0;
    for (int k = 0; k <= deg; k++) {
        *x += b[k] * p[2 * k];
        *y += b[k] * p[2 * k + 1];
    }
}

/* The curvature rule of docs/bezier.md, recomputed here. */
static uint64_t curvature_count(const float *p, int deg, const grove_bezier_opts *o)
{
    double chx = (double)p[2 * deg] - p[0], chy = (double)p[2 * deg + 1] - p[1];
    double len = sqrt(chx * chx + chy * chy), c = 0, v;
    for (int i = 1; i < deg; i++) {
        double ex = (double)p[2 * i] - p[0], ey = (double)p[2 * i + 1] - p[1];
        double dist = len == 0 ? sqrt(ex * ex + ey * ey) : fabs(ex * chy - ey * chx) / len;
        if (dist > c) c = dist;
    }
    v = floor(c * o->curvature_scale);
    if (v < o->min_points) v = o->min_points;
    if (v > o->max_points) v = o->max_points;
    return (uint64_t)v;
}

/* Distance from (x, y) to the segment a-b. */
static double seg_dist(double x, double y, const float *a, const float *b)
{
    double ux = (double)b[0] - a[0], uy = (double)b[1] - a[1], l2 = ux * ux + uy * uy, t = 0;
    if (l2 > 0) t = fmin(1, fmax(0, ((x - a[0]) * ux + (y - a[1]) * uy) / l2));
    return hypot(x - a[0] - t * ux, y - a[1] - t * uy);
}

/* The independent checks of one tessellation; prints the first problem. */
static int check_result(const char *step, const grove_curves *c, const grove_polylines *pl,
                        const grove_bezier_opts *o)
{
    if (pl->n_curves != c->n || !pl->offsets || pl->offsets[0] != 0) {
        cli_error("demo", "%s: check failed: %zu polylines for %zu curves", step, pl->n_curves,
                  c->n);
        return 0;
    }
    for (size_t i = 0; i < c->n; i++) {
        const float *p = c->cp + 8 * i, *xy;
        int deg = c->degree[i];
        uint64_t m = pl->offsets[i + 1] - pl->offsets[i];
        double scale = 0;
        for (int k = 0; k < 2 * (deg + 1); k++) scale = fmax(scale, fabs(p[k]));
        if (m < 2 || m > (uint64_t)o->max_points ||
            (o->mode == GROVE_BEZIER_CURVATURE && m != curvature_count(p, deg, o))) {
            cli_error("demo", "%s: check failed: curve %zu has %llu vertices, against the rule",
                      step, i, (unsigned long long)m);
            return 0;
        }
        xy = pl->xy + 2 * pl->offsets[i];
        if (memcmp(xy, p, 2 * sizeof(float)) != 0 ||
            memcmp(xy + 2 * (m - 1), p + 2 * deg, 2 * sizeof(float)) != 0) {
            cli_error("demo", "%s: check failed: curve %zu does not end at its end points", step,
                      i);
            return 0;
        }
        for (uint64_t j = 0; j < m; j++) {
            double x, y;
            eval_curve(p, deg, (double)j / (double)(m - 1), &x, &y);
            /* float evaluation: a few roundings of numbers up to `scale` */
            if (hypot(xy[2 * j] - x, xy[2 * j + 1] - y) > 1e-5 * (1 + scale)) {
                cli_error("demo", "%s: check failed: curve %zu, vertex %llu is (%.9g, %.9g), "
                                  "the curve there (%.9g, %.9g)",
                          step, i, (unsigned long long)j, (double)xy[2 * j],
                          (double)xy[2 * j + 1], x, y);
                return 0;
            }
            if (o->mode == GROVE_BEZIER_TOLERANCE && j + 1 < m && m < (uint64_t)o->max_points) {
                double d;
                eval_curve(p, deg, (j + 0.5) / (double)(m - 1), &x, &y);
                d = seg_dist(x, y, xy + 2 * j, xy + 2 * j + 2);
                if (d > o->tolerance * (1 + 1e-6) + 1e-5 * (1 + scale)) {
                    cli_error("demo", "%s: check failed: curve %zu is %.3g from its polyline "
                                      "(tolerance %g)",
                              step, i, d, o->tolerance);
                    return 0;
                }
            }
        }
    }
    return 1;
}

/* Tessellates c on d->ctx, checks, compares with the CPU backend; records the row. On
 * success *out holds the result (the caller frees it). */
static void run_step(cli_demo *d, const char *step, const grove_curves *c,
                     const grove_bezier_opts *o, grove_polylines *out)
{
    grove_bezier_stats st;
    double t0 = cli_now_ms(), ms;
    grove_status s = grove_bezier_tessellate(d->ctx, c, o, out, &st);
    int ok = 0;
    ms = cli_now_ms() - t0;
    if (s == GROVE_OK) ok = check_result(step, c, out, o);
    if (s == GROVE_OK && ok && d->ref) {
        grove_polylines ref;
        grove_status rs = grove_bezier_tessellate(d->ref, c, o, &ref, NULL);
        if (rs != GROVE_OK) {
            cli_report_status("demo", step, rs, d->ref);
            ok = 0;
        } else if (ref.n_vertices != out->n_vertices ||
                   memcmp(ref.offsets, out->offsets, (c->n + 1) * sizeof(uint64_t)) != 0 ||
                   (ref.n_vertices &&
                    memcmp(ref.xy, out->xy, 2 * ref.n_vertices * sizeof(float)) != 0)) {
            cli_error("demo", "%s: check failed: the result differs from the CPU backend's",
                      step);
            ok = 0;
        }
        grove_polylines_free(&ref);
    }
    cli_demo_row(d, "bezier", step, c->n, ms, s, d->ctx, ok);
}

/* Writes the drawing where it can be read back: DIR/bezier-input.svg, or a temporary file.
 * Returns the path (to free), or NULL after printing why. */
static char *write_drawing(cli_demo *d, int *temporary)
{
    char *path;
    FILE *f;
    *temporary = d->out_dir == NULL;
    if (d->out_dir) {
        path = cli_path_join(d->out_dir, "bezier-input.svg");
        if (!path) return NULL;
        f = fopen(path, "wb");
    } else {
        const char *tmp = getenv("TMPDIR");
        int fd;
        path = cli_path_join(tmp && tmp[0] ? tmp : "/tmp", "grove-demo-bezier.XXXXXX");
        if (!path) return NULL;
        fd = mkstemp(path);
        f = fd >= 0 ? fdopen(fd, "wb") : NULL;
        if (fd >= 0 && !f) close(fd);
    }
    if (!f || fputs(drawing, f) < 0 || fclose(f) != 0) {
        cli_error("demo", "cannot write the drawing to %s", path);
        if (*temporary) unlink(path);
        free(path);
        return NULL;
    }
    return path;
}

int cli_demo_bezier(cli_demo *d)
{
    size_t n = d->n / 2000;
    grove_curves c = {NULL, NULL, 0}, art = {NULL, NULL, 0};
    grove_polylines pl;
    grove_bezier_opts o;
    grove_status s;
    char step[96], *path;
    int temporary = 0, ok;
    double t0;

    /* a few thousand curves at the default size, all of a small --size */
    if (n < 64) n = d->n < 64 ? d->n : 64;
    if (n > DEMO_MAX_CURVES) n = DEMO_MAX_CURVES;
    c.cp = (float *)malloc((n ? n : 1) * 8 * sizeof(float));
    c.degree = (uint8_t *)malloc(n ? n : 1);
    if (!c.cp || !c.degree) {
        free(c.cp);
        free(c.degree);
        cli_error("demo", "out of host memory");
        return -1;
    }
    random_curves(&c, n, d->seed);

    grove_bezier_default_opts(&o);
    snprintf(step, sizeof step, "tessellate (curvature, %d..%d points)", o.min_points,
             o.max_points);
    run_step(d, step, &c, &o, &pl);
    grove_polylines_free(&pl);
    o.mode = GROVE_BEZIER_TOLERANCE;
    o.tolerance = 0.02;
    o.max_points = 256;
    snprintf(step, sizeof step, "tessellate (tolerance %g)", o.tolerance);
    run_step(d, step, &c, &o, &pl);
    grove_polylines_free(&pl);
    grove_curves_free(&c);

    /* the drawing, through the SVG reader */
    path = write_drawing(d, &temporary);
    if (!path) {
        cli_demo_row(d, "bezier", "read SVG drawing", 0, 0, GROVE_OK, d->ctx, 0);
        return 0;
    }
    t0 = cli_now_ms();
    s = grove_curves_read(d->ctx, path, GROVE_CURVES_SVG, &art);
    ok = s == GROVE_OK && art.n == DRAWING_CURVES;
    if (s == GROVE_OK && !ok)
        cli_error("demo", "read SVG drawing: check failed: %zu curves, want %d", art.n,
                  DRAWING_CURVES);
    cli_demo_row(d, "bezier", "read SVG drawing (paths, shapes, transforms)", art.n, cli_now_ms() - t0, s,
                 d->ctx, ok);
    if (temporary) unlink(path);
    free(path);
    if (ok) {
        o.tolerance = 0.05;
        o.max_points = 64;
        snprintf(step, sizeof step, "tessellate drawing (tolerance %g)", o.tolerance);
        run_step(d, step, &art, &o, &pl);
        if (pl.offsets && d->out_dir && !d->quiet) {
            /* SVG user space has y down, the picture y up: mirror to show it upright */
            for (uint64_t v = 0; v < pl.n_vertices; v++) pl.xy[2 * v + 1] = -pl.xy[2 * v + 1];
            for (size_t i = 0; i < 4 * art.n; i++) art.cp[2 * i + 1] = -art.cp[2 * i + 1];
            path = cli_path_join(d->out_dir, "bezier.svg");
            t0 = cli_now_ms();
            s = path ? grove_polylines_write_svg(d->ctx, &pl, &art, 640, 640, path)
                     : GROVE_ERR_OUT_OF_MEMORY;
            cli_demo_row(d, "bezier", "write picture (bezier.svg)", art.n, cli_now_ms() - t0, s,
                         d->ctx, s == GROVE_OK);
            free(path);
        }
        grove_polylines_free(&pl);
    }
    grove_curves_free(&art);
    return 0;
}
