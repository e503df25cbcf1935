/*
 * test_bezier.c - the Bezier tessellation (bezier.h): counts recomputed here from the rules of
 * bezier.h (the curvature rule as written, the tolerance rule by linear search where the library
 * bisects), every vertex compared with the curve evaluated in double by de Casteljau's
 * construction, end points bit-exact, the layout (offsets, totals, stats); sizes around the
 * warp, the GPU kernel's tile of 512 curves and its chunk of 2048 vertices; degenerate,
 * huge and tiny curves; bad input and options with exact status and message. With --backend
 * cuda, the GPU's flat and cdp variants are compared byte for byte with each other and with the
 * CPU backend, the device calls are checked (capacity, unaligned output), and the cdp variant's
 * pending-launch limit paths are forced through the test hook.
 *
 * usage: test_bezier [--backend cpu|cuda] [--large N] [--seed S]
 *                    [--only quick|quick-flat]
 * (--only quick: a few small sizes, the device calls and the limit paths at small n, for the
 * compute-sanitizer runs; quick-flat: the same without the cdp variant, for the tools that do
 * not support dynamic parallelism)
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bezier_internal.h" /* grove__bz_curv_floor_fast, grove__bz_curvature */
#include "grove/bezier.h"
#include "testutil.h"

#ifdef GROVE_HAVE_CUDA
#include <cuda_runtime.h>
/* bezier_cuda.h */
void grove__bz_cdp_tune(size_t chunk_max, size_t device_cap, size_t group, unsigned big);
void grove__bz_cdp_plan(size_t *group, unsigned *big);
void grove__bz_flat_tune(int per);
void grove__bz_flat_mode(int mode);
void grove__bz_flat_wait(int sync);
unsigned long long grove__bz_flat_polls(void);
void grove__bz_cdp_mode(int mode);
uint32_t grove__bz_kept_epoch_max(void);
void grove__bz_kept_epoch_set(grove_ctx *ctx, uint32_t e);
#endif

static int g_quick;  /* --only quick or quick-flat */
static int g_no_cdp; /* --only quick-flat: no dynamic parallelism (racecheck and synccheck do not
                        support it) */

/* ---- curves ---- */

enum {
    GEN_RANDOM,
    GEN_POINT,
    GEN_COLLINEAR,
    GEN_LINES,
    GEN_EVEN,
    GEN_CLOSED,
    GEN_EXTREME,
    GEN_INTEGER
};

typedef struct curveset {
    grove_curves c;
} curveset;

static void cs_free(curveset *s)
{
    free(s->c.cp);
    free(s->c.degree);
    memset(s, 0, sizeof *s);
}

/* n curves of `kind`, coordinates in [-scale, scale), degrees 1..3 (mostly 2 and 3); the unused
 * control-point slots hold junk, which the library must ignore. */
static void gen(curveset *s, tu_rng *r, size_t n, int kind, float scale)
{
    s->c.n = n;
    s->c.cp = n ? (float *)tu_malloc(8 * n * sizeof(float)) : NULL;
    s->c.degree = n ? (uint8_t *)tu_malloc(n) : NULL;
    for (size_t i = 0; i < n; i++) {
        float *p = s->c.cp + 8 * i;
        uint32_t h = tu_u32(r);
        int d = (h % 8 == 0) ? 1 : (h % 2 ? 2 : 3);
        for (int k = 0; k < 8; k++) p[k] = tu_f32(r, -scale, scale);
        switch (kind) {
        case GEN_POINT:
            for (int k = 2; k < 8; k++) p[k] = p[k & 1];
            break;
        case GEN_COLLINEAR: { /* points on a line through P0, in any order */
            float dx = tu_f32(r, -1, 1), dy = tu_f32(r, -1, 1);
            for (int k = 1; k < 4; k++) {
                float t = tu_f32(r, -1, 1) * scale;
                p[2 * k] = p[0] + t * dx;
                p[2 * k + 1] = p[1] + t * dy;
            }
            break;
        }
        case GEN_LINES: d = 1; break;
        case GEN_EVEN: /* evenly spaced collinear points: zero second differences */
            p[2] = 0.5f * p[0] + 0.5f * p[4] + 0.0f;
            p[3] = 0.5f * p[1] + 0.5f * p[5] + 0.0f;
            d = 2;
            p[0] = p[2] - (p[4] - p[2]);
            p[1] = p[3] - (p[5] - p[3]);
            break;
        case GEN_EXTREME: /* every coordinate -scale, 0 or scale */
            for (int k = 0; k < 8; k++) p[k] = (float)((int)(tu_u32(r) % 3) - 1) * scale;
            break;
        case GEN_INTEGER: { /* P0 and the inner points on integers, the chord (3, 4) 2^e: c =
                             * |4 p - 3 q| / 5 for an inner point P0 + (p, q), an integer with
                             * curvature_scale 5; half the curves then one coordinate a few
                             * float steps off */
            d = 2 + (int)(h % 2u);
            p[0] = floorf(p[0]);
            p[1] = floorf(p[1]);
            p[2 * d] = p[0] + ldexpf(3.0f, (int)(h >> 8 & 7u) - 3);
            p[2 * d + 1] = p[1] + ldexpf(4.0f, (int)(h >> 8 & 7u) - 3);
            for (int k = 1; k < d; k++) {
                p[2 * k] = p[0] + (float)((int)(tu_u32(r) % 41u) - 20);
                p[2 * k + 1] = p[1] + (float)((int)(tu_u32(r) % 41u) - 20);
            }
            if (h & 0x10000u) {
                const int k = (int)(tu_u32(r) % (uint32_t)(2 * d + 2));
                for (int st = 1 + (int)(h >> 20 & 1u) + (int)(h >> 21 & 1u); st > 0; st--)
                    p[k] = nextafterf(p[k], (h & 0x20000u) ? INFINITY : -INFINITY);
            }
            break;
        }
        case GEN_CLOSED: /* P0 == Pd, inner points elsewhere */
            p[2 * d] = p[0];
            p[2 * d + 1] = p[1];
            if (d == 1) d = 2, p[4] = p[0], p[5] = p[1];
            break;
        default: break;
        }
        for (int k = 2 * (d + 1); k < 8; k++) p[k] = (k & 1) ? NAN : -INFINITY; /* ignored */
        s->c.degree[i] = (uint8_t)d;
    }
}

/* ---- the rules, recomputed ---- */

static double nrm(double x, double y)
{
    double a = x * x;
    double b = y * y;
    double s = a + b;
    return sqrt(s);
}

static uint32_t want_count(const float *p, int d, const grove_bezier_opts *o, int *capped)
{
    *capped = 0;
    if (o->mode == GROVE_BEZIER_TOLERANCE) {
        double mx = 0;
        for (int i = 0; i + 2 <= d; i++) {
            double tx = 2.0 * (double)p[2 * i + 2], ty = 2.0 * (double)p[2 * i + 3];
            double ax = (double)p[2 * i + 4] - tx, ay = (double)p[2 * i + 5] - ty;
            double v = nrm(ax + (double)p[2 * i], ay + (double)p[2 * i + 1]);
            if (v > mx) mx = v;
        }
        double km = (double)(d * (d - 1)) * mx;
        for (uint32_t s = 1; s + 1 <= (uint32_t)o->max_points; s++) {
            double ss = (double)s * (double)s;
            double den = 8.0 * ss;
            if (km / den <= o->tolerance) return s + 1;
        }
        *capped = 1;
        return (uint32_t)o->max_points;
    }
    double x0 = p[0], y0 = p[1];
    double chx = (double)p[2 * d] - x0, chy = (double)p[2 * d + 1] - y0;
    double len = nrm(chx, chy), c = 0;
    for (int i = 1; i < d; i++) {
        double ex = (double)p[2 * i] - x0, ey = (double)p[2 * i + 1] - y0, dist;
        if (len == 0) {
            dist = nrm(ex, ey);
        } else {
            double a = ex * chy;
            double b = ey * chx;
            dist = fabs(a - b) / len;
        }
        if (dist > c) c = dist;
    }
    double v = floor(c * o->curvature_scale);
    if (v > o->max_points) return *capped = 1, (uint32_t)o->max_points;
    if (v < o->min_points) return *capped = 1, (uint32_t)o->min_points;
    return (uint32_t)v;
}

/* B(u) in double by de Casteljau. */
static void eval(const float *p, int d, double u, double *x, double *y)
{
    double qx[4], qy[4];
    for (int i = 0; i <= d; i++) qx[i] = p[2 * i], qy[i] = p[2 * i + 1];
    for (int l = d; l > 0; l--)
        for (int i = 0; i < l; i++) {
            qx[i] = (1 - u) * qx[i] + u * qx[i + 1];
            qy[i] = (1 - u) * qy[i] + u * qy[i + 1];
        }
    *x = qx[0];
    *y = qy[0];
}

/* Vertex i of m as docs/bezier.md defines it, written out here from the document (not from the
 * library's header), in float with every operation rounded on its own: the result must equal it
 * bit for bit on every backend. */
static void spec_vertex(const float *p, int d, uint32_t i, uint32_t m, float *x, float *y)
{
    const float r = 1.0f / (float)(m - 1);
    const float u = (float)i * r;
    const float v = 1.0f - u;
    float o[2];
    if (i == 0 || i + 1 == m) {
        const int k = i == 0 ? 0 : d;
        *x = p[2 * k];
        *y = p[2 * k + 1];
        return;
    }
    for (int a = 0; a < 2; a++) {
        const float x0 = p[a];
        float e1, e2, e3;
        if (d == 1) {
            const float dx = p[2 + a] - x0;
            o[a] = fmaf(u, dx, x0);
            continue;
        }
        if (d == 3) {
            e1 = p[2 + a] - x0;
            e2 = p[4 + a] - x0;
            e3 = p[6 + a] - x0;
        } else {
            const float d1 = p[2 + a] - x0, d2 = p[4 + a] - x0;
            e1 = d1 * 0x1.555556p-1f; /* 2/3 to nearest */
            e2 = fmaf(d2, 0x1.555556p-2f, e1);
            e3 = d2;
        }
        const float vv = v * v, uu = u * u, vvu = vv * u, vuu = v * uu;
        const float b1 = 3.0f * vvu, b2 = 3.0f * vuu, b3 = uu * u;
        o[a] = fmaf(b3, e3, fmaf(b2, e2, fmaf(b1, e1, x0)));
    }
    *x = o[0];
    *y = o[1];
}

/* Checks layout, counts, vertices and stats of one result; returns the failures it found. */
static int check(const char *what, const grove_curves *in, const grove_bezier_opts *o,
                 const grove_polylines *pl, const grove_bezier_stats *st)
{
    int bad = 0;
    uint64_t capped = 0;
    if (pl->n_curves != in->n || !pl->offsets || pl->offsets[0] != 0 ||
        pl->offsets[in->n] != pl->n_vertices || (pl->n_vertices > 0) != (pl->xy != NULL)) {
        FAIL("%s: bad layout (n_curves %zu of %zu, n_vertices %llu)", what, pl->n_curves, in->n,
             (unsigned long long)pl->n_vertices);
        return 1;
    }
    for (size_t c = 0; c < in->n && bad < 5; c++) {
        const float *p = in->cp + 8 * c;
        const int d = in->degree[c];
        int cap;
        const uint32_t want = want_count(p, d, o, &cap);
        const uint64_t b = pl->offsets[c], m = pl->offsets[c + 1] - b;
        capped += (uint64_t)cap;
        if (pl->offsets[c + 1] < b || m != want) {
            FAIL("%s: curve %zu (degree %d): %llu vertices, want %u", what, c, d,
                 (unsigned long long)m, want);
            bad++;
            continue;
        }
        const float *v = pl->xy + 2 * b;
        if (memcmp(v, p, 2 * sizeof(float)) || memcmp(v + 2 * (m - 1), p + 2 * d, 8)) {
            FAIL("%s: curve %zu: end points (%.9g %.9g)..(%.9g %.9g) are not P0, P%d", what, c,
                 v[0], v[1], v[2 * (m - 1)], v[2 * m - 1], d);
            bad++;
        }
        for (uint64_t i = 0; i < m; i++) {
            float sx, sy;
            spec_vertex(p, d, (uint32_t)i, (uint32_t)m, &sx, &sy);
            if (memcmp(&sx, v + 2 * i, 4) || memcmp(&sy, v + 2 * i + 1, 4)) {
                FAIL("%s: curve %zu (degree %d) vertex %llu of %llu: (%.9g, %.9g), the "
                     "documented arithmetic gives (%.9g, %.9g)",
                     what, c, d, (unsigned long long)i, (unsigned long long)m, v[2 * i],
                     v[2 * i + 1], sx, sy);
                bad++;
                break;
            }
        }
        /* a coordinate that all the control points share is every vertex's, exactly (a point
         * curve is that point; a horizontal or vertical segment stays on its line) */
        for (int a = 0; a < 2; a++) {
            int same = 1;
            for (int k = 1; k <= d; k++) same &= p[2 * k + a] == p[a];
            for (uint64_t i = 0; same && i < m; i++)
                if (v[2 * i + a] != p[a]) {
                    FAIL("%s: curve %zu (degree %d): every control point has %s = %.9g, vertex "
                         "%llu of %llu has %.9g",
                         what, c, d, a ? "y" : "x", p[a], (unsigned long long)i,
                         (unsigned long long)m, v[2 * i + a]);
                    bad++;
                    break;
                }
        }
        double mag = 0;
        for (int k = 0; k < 2 * (d + 1); k++) mag = fmax(mag, fabs((double)p[k]));
        /* a few float roundings of terms no larger than mag, plus u's own rounding times the
         * curve's speed (at most 2 d mag) */
        const double tol = 2e-6 * mag + 1e-300;
        for (uint64_t i = 0; i < m; i++) {
            double x, y;
            eval(p, d, (double)i / (double)(m - 1), &x, &y);
            if (!(fabs(x - v[2 * i]) <= tol && fabs(y - v[2 * i + 1]) <= tol)) {
                FAIL("%s: curve %zu vertex %llu of %llu: (%.9g, %.9g), curve at (%.9g, %.9g)", what,
                     c, (unsigned long long)i, (unsigned long long)m, v[2 * i], v[2 * i + 1], x, y);
                bad++;
                break;
            }
        }
    }
    if (st && !bad && st->capped != capped) {
        FAIL("%s: stats.capped %llu, want %llu", what, (unsigned long long)st->capped,
             (unsigned long long)capped);
        bad++;
    }
    return bad;
}

static int same(const char *what, const grove_polylines *a, const grove_polylines *b)
{
    if (a->n_curves != b->n_curves || a->n_vertices != b->n_vertices ||
        memcmp(a->offsets, b->offsets, (a->n_curves + 1) * sizeof(uint64_t)) ||
        (a->n_vertices && memcmp(a->xy, b->xy, a->n_vertices * 2 * sizeof(float)))) {
        size_t i = 0;
        if (a->n_vertices == b->n_vertices)
            while (i < 2 * a->n_vertices && !memcmp(&a->xy[i], &b->xy[i], 4)) i++;
        FAIL("%s: results differ (vertices %llu vs %llu, first differing float %zu)", what,
             (unsigned long long)a->n_vertices, (unsigned long long)b->n_vertices, i);
        return 1;
    }
    return 0;
}

/* ---- one case on every backend and variant at hand ---- */

typedef struct env {
    grove_ctx *cpu, *gpu;
} env;

/* The child launches of the cdp variant in one parent grid (the pending-launch limit not hit):
 * a group child per `group` curves, and one per curve of >= big vertices when max_points >= big. */
static uint64_t cdp_launches(const grove_polylines *p, const grove_bezier_opts *o)
{
#ifdef GROVE_HAVE_CUDA
    size_t group;
    unsigned big;
    uint64_t k;
    grove__bz_cdp_plan(&group, &big);
    k = (p->n_curves + group - 1) / group;
    if ((unsigned)o->max_points >= big)
        for (size_t c = 0; c < p->n_curves; c++) k += p->offsets[c + 1] - p->offsets[c] >= big;
    return k;
#else
    (void)p, (void)o;
    return 0;
#endif
}

/* The device-call loops' cases: v 0..2 and 5 flat, 3 and 4 cdp (skipped without CDP). */
#define BZ_CASES 6
static int bz_cdp(int v) { return v == 3 || v == 4; }
/* The chunk width hook's value for case v: flat 0 (the default, 64), 8, 16 and 32 (the
 * default until 2026-11-29); cdp 0 (its default, 16) and 8. */
static int bz_per(int v) { return v == 1 || v == 4 ? 8 : v == 2 ? 16 : v == 5 ? 32 : 0; }

static void run_case(const env *E, const char *what, const grove_curves *in,
                     const grove_bezier_opts *o, int full_check)
{
    grove_polylines ref, got;
    grove_bezier_stats st;
    char name[200];
    CHECK_OK(E->cpu, grove_bezier_tessellate(E->cpu, in, o, &ref, &st));
    snprintf(name, sizeof name, "%s (cpu)", what);
    if (full_check) check(name, in, o, &ref, &st);
    CHECK(st.variant == GROVE_BEZIER_FLAT && st.child_launches == 0);
    if (E->gpu) {
#ifdef GROVE_HAVE_CUDA
        /* cdp plans: the defaults (children of 4 tiles a block); a group child and a child of
         * its own for every curve (groups of 1 leave 3 of a block's 4 tile groups idle); groups
         * of 3 and children of their own from 17 vertices (mixed); the last two again with the
         * children of a tile a block (the hook grove__bz_cdp_mode) */
        const size_t groups[5] = {0, 1, 3, 3, 0};
        const unsigned bigs[5] = {0, 2, 17, 17, 0};
        const int cmodes[5] = {0, 0, 0, 1, 1};
        const int nplans = in->n <= 5000 ? 5 : 1;
        /* flat (and auto): the default kernel (persistent blocks, state words zero-copy, the
         * tile writer in chunks of 64 vertices a thread), then in chunks of 8; a block a tile;
         * persistent blocks taking their next tile early; one persistent block taking every
         * tile in turn (late, early); the state words copied back; chunks of 16 with one
         * persistent block and with the default blocks, chunks of 8 with one; the next tile
         * taken at the start of the current one's last chunk instead of after it is written;
         * chunks of 32 (the default until 2026-11-29); the look-back before the writer's
         * preparation (the default until 2026-11-29) (the hooks' numbers) */
        enum { NFP = 13 };
        const int fper[NFP] = {0, 8, 0, 0, 0, 0, 0, 16, 16, 8, 0, 32, 0},
                  fmodes[NFP] = {0, 0, 1, 3, 4, 5, 6, 4, 0, 4, 7, 0, 8};
#else
        enum { NFP = 1 };
        const int nplans = 1;
#endif
        const grove_bezier_variant vs[3] = {GROVE_BEZIER_FLAT, GROVE_BEZIER_CDP, GROVE_BEZIER_AUTO};
        for (int k = 0; k < 3; k++)
            for (int pl = 0; pl < (k == 1 ? nplans : k == 0 ? NFP : 1); pl++) {
                grove_bezier_opts og = *o;
                if (k == 1 && g_no_cdp) continue;
#ifdef GROVE_HAVE_CUDA
                /* quick (the sanitizers): plan 3 is plan 5's kernel with more blocks */
                if (k == 0 && g_quick && pl == 3) continue;
#endif
                grove_bezier_stats sg;
                og.variant = vs[k];
#ifdef GROVE_HAVE_CUDA
                if (k == 1) {
                    grove__bz_cdp_tune(0, 0, groups[pl], bigs[pl]);
                    grove__bz_cdp_mode(cmodes[pl]);
                } else {
                    grove__bz_flat_tune(fper[pl]);
                    grove__bz_flat_mode(fmodes[pl]);
                }
#endif
                snprintf(name, sizeof name, "%s (cuda %s, plan %d)", what,
                         k == 0   ? "flat"
                         : k == 1 ? "cdp"
                                  : "auto",
                         pl);
                CHECK_OK(E->gpu, grove_bezier_tessellate(E->gpu, in, &og, &got, &sg));
                if (same(name, &ref, &got) == 0 && full_check && k == 0)
                    check(name, in, o, &got, &sg);
                CHECK_MSG(sg.capped == st.capped, "%s: capped %llu vs cpu %llu", name,
                          (unsigned long long)sg.capped, (unsigned long long)st.capped);
                if (k == 1) {
                    const uint64_t want = cdp_launches(&ref, o);
                    CHECK_MSG(sg.variant == GROVE_BEZIER_CDP && sg.child_launches == want,
                              "%s: variant %d, %llu child launches for %zu curves, %llu expected",
                              name, (int)sg.variant, (unsigned long long)sg.child_launches, in->n,
                              (unsigned long long)want);
                } else {
                    CHECK(sg.variant == GROVE_BEZIER_FLAT && sg.child_launches == 0);
                }
                grove_polylines_free(&got);
            }
#ifdef GROVE_HAVE_CUDA
        grove__bz_cdp_tune(0, 0, 0, 0);
        grove__bz_cdp_mode(0);
        grove__bz_flat_tune(0);
        grove__bz_flat_mode(0);
#endif
    }
    grove_polylines_free(&ref);
}

static void opts_curv(grove_bezier_opts *o, int minp, int maxp, double scale)
{
    grove_bezier_default_opts(o);
    o->min_points = minp;
    o->max_points = maxp;
    o->curvature_scale = scale;
}

static void opts_tol(grove_bezier_opts *o, int maxp, double tol)
{
    grove_bezier_default_opts(o);
    o->mode = GROVE_BEZIER_TOLERANCE;
    o->max_points = maxp;
    o->tolerance = tol;
}

/* The CUDA kernels' float shortcut for the curvature rule's floor(c * scale): wherever it decides,
 * the same integer as the double computation (grove__bz_curvature, then the product), on the
 * bench's curves (where it must decide nearly always), at every magnitude and scale, on curves
 * whose c * scale is an integer in double (Pythagorean chords, integer points, scales that are
 * and are not exact in float) and on their neighbours a few float steps away, on tiny chords
 * with the largest scales, and on degenerate curves. The device's reciprocal square root
 * (rsqrtf, within 2 ulp of the correctly rounded value) is stood in for by the correctly
 * rounded one stepped 0, 1 and 2 ulp either way; the estimate must also lie within a quarter
 * of the allowance (about a tenth in theory), which catches a shrunk allowance long before a
 * floor differs. */
static void curv_fast_one(const float *cp, int d, double scale, long *decided, long *total)
{
    const float sf = scale <= 0x1p60 ? (float)scale : 0.0f;
    double v = -1.0;
    const double w = grove__bz_curvature(cp, d) * scale, ref = floor(w);
    float c, smax, len2, est, err;
    (*total)++;
    if (grove__bz_curv_floor_fast(cp, d, sf, &v)) {
        (*decided)++;
        CHECK_MSG(v == ref,
                  "curvature shortcut: degree %d, scale %.17g, points %a %a %a %a %a %a %a %a: "
                  "%.17g, the double computation %.17g",
                  d, scale, cp[0], cp[1], cp[2], cp[3], cp[4], cp[5], cp[6], cp[7], v, ref);
    }
    if (d == 1 || !grove__bz_curv_parts(cp, d, &c, &smax, &len2)) return;
    float rinv = (float)(1.0 / sqrt((double)len2));
    rinv = nextafterf(nextafterf(rinv, 0.0f), 0.0f);
    for (int step = -2; step <= 2; step++, rinv = nextafterf(rinv, INFINITY)) {
        est = err = NAN;
        v = -1.0;
        const int got = grove__bz_curv_decide(c, smax, rinv, sf, &est, &err, &v);
        CHECK_MSG(!got || v == ref,
                  "curvature shortcut, reciprocal square root %+d ulp: degree %d, scale %.17g, "
                  "points %a %a %a %a %a %a %a %a: %.17g, the double computation %.17g",
                  step, d, scale, cp[0], cp[1], cp[2], cp[3], cp[4], cp[5], cp[6], cp[7], v, ref);
        if (isfinite(est) && isfinite(err))
            CHECK_MSG(fabs((double)est - w) <= 0.25 * (double)err,
                      "curvature shortcut, reciprocal square root %+d ulp: degree %d, scale "
                      "%.17g, points %a %a %a %a %a %a %a %a: estimate %.9g, allowance %.3g, "
                      "the double computation %.17g",
                      step, d, scale, cp[0], cp[1], cp[2], cp[3], cp[4], cp[5], cp[6], cp[7],
                      (double)est, (double)err, w);
    }
}

/* cp's coordinate k moved by `steps` float steps (either sign). */
static float ulp_step(float x, int steps)
{
    for (; steps > 0; steps--) x = nextafterf(x, INFINITY);
    for (; steps < 0; steps++) x = nextafterf(x, -INFINITY);
    return x;
}

static void test_curv_fast(tu_rng *r)
{
    long dec = 0, tot = 0;
    float cp[8];
    /* the bench's curves: P0 in [-1000, 1000)^2, the others within 2 of it, scale 16 */
    for (int i = 0; i < 100000; i++) {
        const int d = 2 + (int)(tu_u32(r) & 1u);
        cp[0] = tu_f32(r, -1000.0f, 1000.0f);
        cp[1] = tu_f32(r, -1000.0f, 1000.0f);
        for (int k = 2; k < 8; k++) cp[k] = cp[k & 1] + tu_f32(r, -2.0f, 2.0f);
        curv_fast_one(cp, d, 16.0, &dec, &tot);
    }
    CHECK_MSG(dec > tot - tot / 100, "curvature shortcut decided %ld of %ld bench curves", dec,
              tot);
    /* every magnitude, offset and scale */
    const double scales[9] = {16.0, 1.0, 1000.0, 0.01, 3.7e15, 1e-17, 0.1, 1.0 / 3.0, 16.000001};
    for (int i = 0; i < 100000; i++) {
        const int d = 1 + (int)(tu_u32(r) % 3u);
        const float big = ldexpf(1.0f, (int)(tu_u32(r) % 121u) - 60);
        const float off = ldexpf(tu_f32(r, -1.0f, 1.0f), (int)(tu_u32(r) % 121u) - 60);
        for (int k = 0; k < 8; k++) cp[k] = off + big * tu_f32(r, -1.0f, 1.0f);
        curv_fast_one(cp, d, scales[i % 9], &dec, &tot);
    }
    /* c * scale an integer in double: P0 and the inner points on integers, the chord a
     * Pythagorean (a, b) 2^e of length L 2^e, so that c = |p b - q a| / L for an inner point
     * P0 + (p, q); scale L 2^j makes c * scale an integer, L / 10 and L / 3 (not exact in
     * float) near ones; then every coordinate moved 1..3 float steps either way */
    static const int pyth[4][3] = {{3, 4, 5}, {5, 12, 13}, {8, 15, 17}, {20, 21, 29}};
    long exact = 0;
    for (int i = 0; i < 40000; i++) {
        const int d = 2 + (int)(tu_u32(r) & 1u), *pt = pyth[tu_u32(r) % 4u];
        const int e = (int)(tu_u32(r) % 9u) - 4, j = (int)(tu_u32(r) % 9u) - 4;
        const int sw = (int)(tu_u32(r) % 4u);
        const double scale = sw == 0   ? ldexp(pt[2], j)
                             : sw == 1 ? pt[2] / 10.0
                             : sw == 2 ? pt[2] / 3.0
                                       : ldexp(pt[2], j) * (1.0 + 0x1p-30);
        const float x0 = (float)((int)(tu_u32(r) % 2001u) - 1000);
        const float y0 = (float)((int)(tu_u32(r) % 2001u) - 1000);
        cp[0] = x0;
        cp[1] = y0;
        cp[2 * d] = x0 + ldexpf((float)pt[0], e);
        cp[2 * d + 1] = y0 + ldexpf((float)pt[1], e);
        for (int k = 1; k < d; k++) {
            cp[2 * k] = x0 + (float)((int)(tu_u32(r) % 41u) - 20);
            cp[2 * k + 1] = y0 + (float)((int)(tu_u32(r) % 41u) - 20);
        }
        const double w = grove__bz_curvature(cp, d) * scale;
        if (sw == 0 && w == floor(w)) exact++;
        curv_fast_one(cp, d, scale, &dec, &tot);
        for (int k = 0; k < 2 * d + 2; k++) {
            const float keep = cp[k];
            for (int st = -3; st <= 3; st += (st == -1 ? 2 : 1)) {
                cp[k] = ulp_step(keep, st);
                curv_fast_one(cp, d, scale, &dec, &tot);
            }
            cp[k] = keep;
        }
    }
    CHECK_MSG(exact > 5000, "curvature shortcut: only %ld curves on an integer", exact);
    /* tiny chords, 2^-39 down to 2^-83, with the largest scales and far inner points */
    const double bscales[6] = {0x1p60, 0x1.fffffffffffffp59, 0x1p61, 0x1p-60, 0x1.ffffffp-61, 16.0};
    for (int i = 0; i < 20000; i++) {
        const int d = 2 + (int)(tu_u32(r) & 1u);
        const float ch = ldexpf(tu_f32(r, 0.5f, 1.0f), -38 - (int)(tu_u32(r) % 45u));
        cp[0] = 0.0f;
        cp[1] = ldexpf(tu_f32(r, -1.0f, 1.0f), (int)(tu_u32(r) % 70u) - 35);
        cp[2 * d] = ch;
        cp[2 * d + 1] = ulp_step(cp[1], (int)(tu_u32(r) % 7u) - 3);
        for (int k = 1; k < d; k++) {
            cp[2 * k] = ldexpf(tu_f32(r, -1.0f, 1.0f), (int)(tu_u32(r) % 60u) - 40);
            cp[2 * k + 1] = cp[1] + ldexpf(tu_f32(r, -1.0f, 1.0f), (int)(tu_u32(r) % 60u) - 40);
        }
        curv_fast_one(cp, d, bscales[i % 6], &dec, &tot);
    }
    /* degenerate: a zero chord, a collinear curve, lines, NaN and infinities, the largest and
     * the smallest coordinates */
    const float inf = INFINITY, nan = NAN;
    const float dg[8][8] = {{1, 2, 3, 4, 5, 6, 1, 2},
                            {0, 0, 1, 1, 2, 2, 3, 3},
                            {0, 0, 5, 5, 0, 0, 0, 0},
                            {nan, 0, 1, 1, 2, 2, 3, 3},
                            {0, 0, inf, 1, 2, 2, 3, 3},
                            {0, 0, 1, 1, 2, 2, inf, 3},
                            {-1e38f, 1e38f, 1e38f, -1e38f, 0, 0, 1e38f, 1e38f},
                            {1e-38f, 0, 0, 1e-38f, 0, 0, 2e-38f, 3e-38f}};
    for (int i = 0; i < 8; i++)
        for (int d = 1; d <= 3; d++) curv_fast_one(dg[i], d, 16.0, &dec, &tot);
    double v = -1.0;
    CHECK_MSG(!grove__bz_curv_floor_fast(dg[0], 3, 16.0f, &v),
              "curvature shortcut: decided a zero chord");
    CHECK_MSG(grove__bz_curv_floor_fast(dg[1], 3, 16.0f, &v) && v == 0.0,
              "curvature shortcut: a collinear curve gave %g", v);
}

static void test_sizes(const env *E, tu_rng *r)
{
    /* 511..513 curves around a tile of 512; with 4 vertices each, a tile is exactly one chunk of
     * 2048 vertices (8 a thread) or half of one of 4096 (16 a thread), with 5 a chunk and a
     * quarter or 5/8 of one */
    const size_t sizes[] = {0, 1, 2, 31, 32, 33, 255, 256, 257, 511, 512, 513, 1023, 1025, 4099};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (g_quick && sizes[i] > 513) break;
        curveset s = {{0}};
        grove_bezier_opts o;
        char what[96];
        gen(&s, r, sizes[i], GEN_RANDOM, 100.0f);
        grove_bezier_default_opts(&o);
        snprintf(what, sizeof what, "default n=%zu", sizes[i]);
        run_case(E, what, &s.c, &o, 1);
        opts_curv(&o, 2, 2, 16);
        snprintf(what, sizeof what, "max_points 2 n=%zu", sizes[i]);
        run_case(E, what, &s.c, &o, 1);
        opts_curv(&o, 4, 4, 16);
        snprintf(what, sizeof what, "4 points n=%zu", sizes[i]);
        run_case(E, what, &s.c, &o, 1);
        opts_curv(&o, 5, 5, 16);
        snprintf(what, sizeof what, "5 points n=%zu", sizes[i]);
        run_case(E, what, &s.c, &o, 1);
        opts_curv(&o, 2, 40, 0.05); /* mixed counts, many clamped to 2 */
        snprintf(what, sizeof what, "curvature 2..40 n=%zu", sizes[i]);
        run_case(E, what, &s.c, &o, 1);
        opts_tol(&o, 4096, 0.01);
        snprintf(what, sizeof what, "tolerance 0.01 n=%zu", sizes[i]);
        run_case(E, what, &s.c, &o, 1);
        opts_tol(&o, 64, 0.5);
        snprintf(what, sizeof what, "tolerance 0.5 max 64 n=%zu", sizes[i]);
        run_case(E, what, &s.c, &o, 1);
        cs_free(&s);
    }
    if (g_quick) return;
    /* one curve of 3 vertices first, then 2-vertex curves: blocks start inside curves and
     * hold V / 2 + 1 curves */
    {
        curveset s = {{0}};
        grove_bezier_opts o;
        gen(&s, r, 3000, GEN_LINES, 10.0f);
        opts_curv(&o, 2, 2, 1);
        run_case(E, "lines of 2, shifted by one", &s.c, &o, 1);
        s.c.degree[0] = 2;
        s.c.cp[4] = 3, s.c.cp[5] = 4;
        opts_tol(&o, 3, 1e-9);
        run_case(E, "tolerance max 3 (a third vertex on curved ones)", &s.c, &o, 1);
        cs_free(&s);
    }
    /* max_points 4096: curves span several writer blocks */
    {
        curveset s = {{0}};
        grove_bezier_opts o;
        gen(&s, r, 300, GEN_RANDOM, 1000.0f);
        opts_curv(&o, 2, 4096, 1000);
        run_case(E, "max_points 4096", &s.c, &o, 1);
        /* at least 3 vertices: the lines' odd counts put later curves at odd positions, so a
         * curve of 4096 vertices there spans 2049 output pairs and starts mid-pair */
        opts_curv(&o, 3, 4096, 1000);
        run_case(E, "3..4096 points", &s.c, &o, 1);
        opts_tol(&o, 4096, 1e-7);
        run_case(E, "tolerance capped at 4096", &s.c, &o, 1);
        cs_free(&s);
    }
}

static void test_degenerate(const env *E, tu_rng *r)
{
    const int kinds[] = {GEN_POINT, GEN_COLLINEAR, GEN_LINES, GEN_EVEN, GEN_CLOSED};
    const char *names[] = {"points", "collinear", "lines", "evenly spaced", "closed"};
    for (int k = 0; k < 5; k++) {
        curveset s = {{0}};
        grove_bezier_opts o;
        char what[96];
        gen(&s, r, 777, kinds[k], 50.0f);
        grove_bezier_default_opts(&o);
        snprintf(what, sizeof what, "%s, curvature", names[k]);
        run_case(E, what, &s.c, &o, 1);
        opts_tol(&o, 4096, 0.001);
        snprintf(what, sizeof what, "%s, tolerance", names[k]);
        run_case(E, what, &s.c, &o, 1);
        cs_free(&s);
    }
    /* c * scale on integers and a few float steps off them, where the CUDA kernels' float
     * shortcut for the curvature rule must leave the count to the double computation */
    {
        curveset s = {{0}};
        grove_bezier_opts o;
        gen(&s, r, 3000, GEN_INTEGER, 500.0f);
        opts_curv(&o, 2, 4096, 5.0);
        run_case(E, "curvature on integers", &s.c, &o, 1);
        cs_free(&s);
    }
    /* the counts of the degenerate kinds themselves */
    {
        curveset s = {{0}};
        grove_bezier_opts o;
        grove_polylines pl;
        gen(&s, r, 100, GEN_POINT, 5.0f);
        grove_bezier_default_opts(&o);
        CHECK_OK(E->cpu, grove_bezier_tessellate(E->cpu, &s.c, &o, &pl, NULL));
        CHECK(pl.n_vertices == 100 * 4); /* c = 0: min_points */
        grove_polylines_free(&pl);
        opts_tol(&o, 32, 1e-6);
        CHECK_OK(E->cpu, grove_bezier_tessellate(E->cpu, &s.c, &o, &pl, NULL));
        CHECK(pl.n_vertices == 100 * 2); /* M = 0: one segment */
        grove_polylines_free(&pl);
        cs_free(&s);
    }
    const float scales[] = {1e-30f, 1e-3f, 1e6f, 1e37f};
    for (int k = 0; k < 4; k++) {
        curveset s = {{0}};
        grove_bezier_opts o;
        char what[96];
        gen(&s, r, 1000, GEN_RANDOM, scales[k]);
        grove_bezier_default_opts(&o);
        snprintf(what, sizeof what, "scale %g, curvature", (double)scales[k]);
        run_case(E, what, &s.c, &o, 1);
        opts_tol(&o, 4096, (double)scales[k] * 1e-4);
        snprintf(what, sizeof what, "scale %g, tolerance", (double)scales[k]);
        run_case(E, what, &s.c, &o, 1);
        opts_curv(&o, 2, 4096, 1e300);
        snprintf(what, sizeof what, "scale %g, curvature_scale 1e300", (double)scales[k]);
        run_case(E, what, &s.c, &o, 1);
        cs_free(&s);
    }
    {
        /* the largest coordinates accepted, in every combination of signs: nothing overflows */
        curveset s = {{0}};
        grove_bezier_opts o;
        gen(&s, r, 2000, GEN_EXTREME, GROVE_BEZIER_MAX_COORD);
        opts_curv(&o, 2, 64, 1e-36);
        run_case(E, "coordinates of +-GROVE_BEZIER_MAX_COORD, curvature", &s.c, &o, 1);
        opts_tol(&o, 64, 1e34);
        run_case(E, "coordinates of +-GROVE_BEZIER_MAX_COORD, tolerance", &s.c, &o, 1);
        cs_free(&s);
    }
}

static void expect_err(grove_ctx *ctx, const char *what, grove_status got, grove_status want,
                       const char *sub)
{
    const char *msg = grove_ctx_last_error(ctx);
    if (got != want)
        FAIL("%s: status %d (%s), want %d; message: %s", what, (int)got, grove_status_string(got),
             (int)want, msg);
    else if (sub && !strstr(msg, sub))
        FAIL("%s: message \"%s\" lacks \"%s\"", what, msg, sub);
}

static void test_bad(grove_ctx *ctx, tu_rng *r)
{
    curveset s = {{0}};
    grove_bezier_opts o;
    grove_polylines pl;
    grove_bezier_stats st;
    gen(&s, r, 50, GEN_RANDOM, 10.0f);
    s.c.degree[7] = 0;
    expect_err(ctx, "degree 0", grove_bezier_tessellate(ctx, &s.c, NULL, &pl, &st),
               GROVE_ERR_BAD_INPUT, "curve 7: degree 0");
    CHECK(pl.offsets == NULL && pl.xy == NULL && pl.n_vertices == 0);
    s.c.degree[7] = 4;
    expect_err(ctx, "degree 4", grove_bezier_tessellate(ctx, &s.c, NULL, &pl, NULL),
               GROVE_ERR_BAD_INPUT, "curve 7: degree 4");
    s.c.degree[7] = 2;
    s.c.degree[9] = 3;
    s.c.cp[8 * 9 + 6] = 1; /* was junk in an unused slot */
    s.c.cp[8 * 9 + 7] = NAN;
    expect_err(ctx, "NaN", grove_bezier_tessellate(ctx, &s.c, NULL, &pl, NULL), GROVE_ERR_BAD_INPUT,
               "curve 9: control point 3 has a non-finite y");
    s.c.degree[9] = 2; /* the NaN is now in an unused slot */
    s.c.cp[8 * 12 + 2] = INFINITY;
    expect_err(ctx, "inf", grove_bezier_tessellate(ctx, &s.c, NULL, &pl, NULL), GROVE_ERR_BAD_INPUT,
               "curve 12: control point 1 has a non-finite x");
    s.c.cp[8 * 12 + 2] = -1.5e38f;
    expect_err(ctx, "-1.5e38", grove_bezier_tessellate(ctx, &s.c, NULL, &pl, NULL),
               GROVE_ERR_BAD_INPUT, "curve 12: control point 1 has the x coordinate -1.5");
    s.c.cp[8 * 12 + 2] = GROVE_BEZIER_MAX_COORD; /* the largest accepted */
    CHECK_OK(ctx, grove_bezier_tessellate(ctx, &s.c, NULL, &pl, NULL));
    grove_polylines_free(&pl);
    s.c.cp[8 * 12 + 2] = 1;
    CHECK_OK(ctx, grove_bezier_tessellate(ctx, &s.c, NULL, &pl, NULL));
    grove_polylines_free(&pl);
    /* the check's parallel pass over many curves: two bad curves far apart, the first named;
     * -GROVE_BEZIER_MAX_COORD and junk in a line's unused slots accepted */
    {
        curveset big = {{0}};
        gen(&big, r, 100000, GEN_RANDOM, 10.0f);
        big.c.degree[99990] = 5;
        big.c.cp[8 * 70001 + 1] = NAN;
        expect_err(ctx, "two bad curves", grove_bezier_tessellate(ctx, &big.c, NULL, &pl, NULL),
                   GROVE_ERR_BAD_INPUT, "curve 70001: control point 0 has a non-finite y");
        big.c.cp[8 * 70001 + 1] = -GROVE_BEZIER_MAX_COORD;
        expect_err(ctx, "the later bad curve",
                   grove_bezier_tessellate(ctx, &big.c, NULL, &pl, NULL), GROVE_ERR_BAD_INPUT,
                   "curve 99990: degree 5");
        big.c.degree[99990] = 1;
        big.c.cp[8 * 99990 + 4] = NAN;
        big.c.cp[8 * 99990 + 7] = INFINITY;
        CHECK_OK(ctx, grove_bezier_tessellate(ctx, &big.c, NULL, &pl, NULL));
        grove_polylines_free(&pl);
        cs_free(&big);
    }

#define BAD_OPT(field, value, sub)                                                                 \
    do {                                                                                           \
        grove_bezier_default_opts(&o);                                                             \
        o.field = value;                                                                           \
        expect_err(ctx, #field " = " #value, grove_bezier_tessellate(ctx, &s.c, &o, &pl, NULL),    \
                   GROVE_ERR_INVALID_ARG, sub);                                                    \
    } while (0)
    BAD_OPT(max_points, 1, "opts->max_points is 1");
    BAD_OPT(max_points, 4097, "opts->max_points is 4097");
    BAD_OPT(min_points, 1, "opts->min_points is 1");
    BAD_OPT(min_points, 33, "opts->min_points is 33");
    BAD_OPT(curvature_scale, 0.0, "opts->curvature_scale");
    BAD_OPT(curvature_scale, NAN, "opts->curvature_scale");
    BAD_OPT(curvature_scale, INFINITY, "opts->curvature_scale");
    BAD_OPT(mode, (grove_bezier_mode)2, "opts->mode is 2");
    BAD_OPT(variant, (grove_bezier_variant)3, "opts->variant is 3");
#undef BAD_OPT
    opts_tol(&o, 32, 0.0);
    expect_err(ctx, "tolerance 0", grove_bezier_tessellate(ctx, &s.c, &o, &pl, NULL),
               GROVE_ERR_INVALID_ARG, "opts->tolerance is 0");
    o.tolerance = -1;
    expect_err(ctx, "tolerance -1", grove_bezier_tessellate(ctx, &s.c, &o, &pl, NULL),
               GROVE_ERR_INVALID_ARG, "opts->tolerance is -1");
    o.tolerance = 0.1;
    o.min_points = 0; /* ignored in tolerance mode */
    CHECK_OK(ctx, grove_bezier_tessellate(ctx, &s.c, &o, &pl, NULL));
    grove_polylines_free(&pl);
    expect_err(ctx, "in NULL", grove_bezier_tessellate(ctx, NULL, NULL, &pl, NULL),
               GROVE_ERR_INVALID_ARG, "in is NULL");
    expect_err(ctx, "out NULL", grove_bezier_tessellate(ctx, &s.c, NULL, NULL, NULL),
               GROVE_ERR_INVALID_ARG, "out is NULL");
    CHECK(grove_bezier_tessellate(NULL, &s.c, NULL, &pl, NULL) == GROVE_ERR_INVALID_ARG);
    {
        grove_curves nul = s.c;
        nul.cp = NULL;
        expect_err(ctx, "cp NULL", grove_bezier_tessellate(ctx, &nul, NULL, &pl, NULL),
                   GROVE_ERR_INVALID_ARG, "in->cp is NULL");
        nul.n = 0; /* fine when empty */
        CHECK_OK(ctx, grove_bezier_tessellate(ctx, &nul, NULL, &pl, NULL));
        CHECK(pl.n_curves == 0 && pl.n_vertices == 0 && pl.offsets && pl.offsets[0] == 0);
        grove_polylines_free(&pl);
    }
    grove_polylines_free(NULL);
    cs_free(&s);
}

static void test_large(const env *E, tu_rng *r, size_t n)
{
    curveset s = {{0}};
    grove_bezier_opts o;
    char what[96];
    gen(&s, r, n, GEN_RANDOM, 1000.0f);
    grove_bezier_default_opts(&o);
    snprintf(what, sizeof what, "large n=%zu, default", n);
    run_case(E, what, &s.c, &o, 1);
    opts_tol(&o, 256, 0.05);
    snprintf(what, sizeof what, "large n=%zu, tolerance", n);
    run_case(E, what, &s.c, &o, 0);
    cs_free(&s);
}

#ifdef GROVE_HAVE_CUDA
static void test_device_calls(grove_ctx *gpu, grove_ctx *cpu, tu_rng *r)
{
    curveset s = {{0}};
    grove_bezier_opts o;
    grove_polylines ref;
    grove_bezier_stats st;
    const size_t n = 1000;
    float *d_cp = NULL, *d_xy = NULL, *h_xy;
    uint8_t *d_deg = NULL;
    uint64_t *d_off = NULL, *h_off, total = 0;
    gen(&s, r, n, GEN_RANDOM, 30.0f);
    grove_bezier_default_opts(&o);
    CHECK_OK(cpu, grove_bezier_tessellate(cpu, &s.c, &o, &ref, NULL));
    const uint64_t tv = ref.n_vertices;
    h_xy = (float *)tu_malloc((2 * tv + 2) * sizeof(float));
    h_off = (uint64_t *)tu_malloc((n + 1) * sizeof(uint64_t));
    CHECK(cudaMalloc((void **)&d_cp, 8 * n * sizeof(float)) == cudaSuccess);
    CHECK(cudaMalloc((void **)&d_deg, n) == cudaSuccess);
    CHECK(cudaMalloc((void **)&d_off, (n + 1) * sizeof(uint64_t)) == cudaSuccess);
    CHECK(cudaMalloc((void **)&d_xy, (2 * tv + 2) * sizeof(float)) == cudaSuccess);
    cudaMemcpy(d_cp, s.c.cp, 8 * n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(d_deg, s.c.degree, n, cudaMemcpyHostToDevice);

    CHECK_OK(gpu, grove_bezier_count_device(gpu, d_cp, d_deg, n, &o, d_off, &total));
    CHECK(total == tv);
    cudaMemcpy(h_off, d_off, (n + 1) * sizeof(uint64_t), cudaMemcpyDeviceToHost);
    CHECK(memcmp(h_off, ref.offsets, (n + 1) * sizeof(uint64_t)) == 0);

    /* too small: LIMIT, the total says what is needed; nothing at or past the capacity is
     * written; flat has written the vertices below it, cdp nothing. The capacities cut the
     * output where a writer handles an edge apart (the first vertex, the first and second pair,
     * around the end of the first tile, half, the last two vertices), the output 16-byte
     * aligned, 8-byte aligned (the first vertex in a pair's second half) and 4-byte aligned
     * (float by float). v: bz_per's cases (flat in chunks of 64, 8, 16 and 32 vertices a
     * thread, cdp in chunks of 16 and 8) */
    {
        const uint64_t a0 = ref.offsets[512 < n ? 512 : n]; /* the first tile's vertices */
        const uint64_t caps[] = {1, 2, 3, a0 - 1, a0, a0 + 1, a0 + 2, tv / 2, tv - 2, tv - 1};
        for (int v = 0; v < BZ_CASES; v++)
            for (int shift = 0; shift < 3 && !(g_no_cdp && bz_cdp(v)); shift++)
                for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
                    const uint64_t cap = caps[c];
                    size_t bad = 0;
                    o.variant = bz_cdp(v) ? GROVE_BEZIER_CDP : GROVE_BEZIER_FLAT;
                    grove__bz_flat_tune(bz_per(v));
                    cudaMemset(d_xy, 0x7f, (2 * tv + 2) * sizeof(float));
                    total = 0;
                    expect_err(gpu, "capacity",
                               grove_bezier_tessellate_device(gpu, d_cp, d_deg, n, &o, d_off,
                                                              d_xy + shift, cap, &total, &st),
                               GROVE_ERR_LIMIT, "d_xy holds");
                    CHECK(total == tv);
                    cudaMemcpy(h_xy, d_xy, (2 * tv + 2) * sizeof(float), cudaMemcpyDeviceToHost);
                    for (uint64_t i = 0; i < 2 * tv + 2; i++) {
                        if (i < (uint64_t)shift || i >= (uint64_t)shift + 2 * cap || bz_cdp(v))
                            bad += ((uint32_t *)h_xy)[i] != 0x7f7f7f7fu;
                        else
                            bad += memcmp(h_xy + i, ref.xy + (i - (uint64_t)shift),
                                          sizeof(float)) != 0;
                    }
                    CHECK_MSG(bad == 0, "capacity %llu variant %d shift %d: %zu words wrong",
                              (unsigned long long)cap, v, shift, bad);
                }
    }
    grove__bz_flat_tune(0);
    o.variant = GROVE_BEZIER_AUTO;
    /* exact capacity, aligned (16 and 8 bytes) and unaligned output; v: flat with the tile
     * writer in chunks of 64, 8, 16 and 32 vertices a thread, cdp with its children in chunks
     * of 16 and of 8 (bz_per's hook values) */
    for (int v = 0; v < BZ_CASES; v++)
        for (int shift = 0; shift < 3 && !(g_no_cdp && bz_cdp(v)); shift++) {
            o.variant = bz_cdp(v) ? GROVE_BEZIER_CDP : GROVE_BEZIER_FLAT;
            grove__bz_flat_tune(bz_per(v));
            cudaMemset(d_xy, 0x7f, (2 * tv + 2) * sizeof(float));
            CHECK_OK(gpu, grove_bezier_tessellate_device(gpu, d_cp, d_deg, n, &o, d_off,
                                                         d_xy + shift, tv, &total, &st));
            cudaMemcpy(h_xy, d_xy + shift, 2 * tv * sizeof(float), cudaMemcpyDeviceToHost);
            CHECK_MSG(memcmp(h_xy, ref.xy, 2 * tv * sizeof(float)) == 0,
                      "device call variant %d shift %d differs from the CPU", v, shift);
            CHECK(st.variant == o.variant);
        }
    /* every curve mv vertices: with 8 a tile is exactly one chunk of 4096 vertices (two of
     * 2048, half of one of 8192 or of 16384), with 16 one chunk of 8192 (two of 4096, four of
     * 2048, half of one of 16384), with 32 one chunk of 16384 (two of 8192, ...); at d_xy + 2
     * floats the pairs start one vertex early, so a last chunk holds one vertex (except where
     * the tile's slots and one fit a chunk; v as above) */
    for (uint32_t mv = 8; mv <= 32; mv *= 2) {
        grove_bezier_opts o8;
        grove_polylines ref8;
        float *d8 = NULL, *h8;
        opts_curv(&o8, (int)mv, (int)mv, 16);
        CHECK_OK(cpu, grove_bezier_tessellate(cpu, &s.c, &o8, &ref8, NULL));
        const uint64_t tv8 = ref8.n_vertices;
        CHECK(tv8 == mv * n);
        h8 = (float *)tu_malloc((2 * tv8 + 4) * sizeof(float));
        CHECK(cudaMalloc((void **)&d8, (2 * tv8 + 4) * sizeof(float)) == cudaSuccess);
        for (int v = 0; v < BZ_CASES; v++)
            for (int shift = 0; shift < 3 && !(g_no_cdp && bz_cdp(v)); shift++) {
                size_t bad = 0;
                o8.variant = bz_cdp(v) ? GROVE_BEZIER_CDP : GROVE_BEZIER_FLAT;
                grove__bz_flat_tune(bz_per(v));
                cudaMemset(d8, 0x7f, (2 * tv8 + 4) * sizeof(float));
                CHECK_OK(gpu, grove_bezier_tessellate_device(gpu, d_cp, d_deg, n, &o8, d_off,
                                                             d8 + shift, tv8, &total, &st));
                CHECK(total == tv8);
                cudaMemcpy(h8, d8, (2 * tv8 + 4) * sizeof(float), cudaMemcpyDeviceToHost);
                for (uint64_t i = 0; i < 2 * tv8 + 4; i++) {
                    if (i < (uint64_t)shift || i >= 2 * tv8 + (uint64_t)shift)
                        bad += ((uint32_t *)h8)[i] != 0x7f7f7f7fu;
                    else
                        bad += memcmp(h8 + i, ref8.xy + (i - (uint64_t)shift), sizeof(float)) != 0;
                }
                CHECK_MSG(bad == 0, "%u vertices a curve, variant %d shift %d: %zu words wrong", mv,
                          v, shift, bad);
            }
        grove__bz_flat_tune(0);
        cudaFree(d8);
        free(h8);
        grove_polylines_free(&ref8);
    }
    grove__bz_flat_tune(0);
    expect_err(
        cpu, "device call on a CPU context",
        grove_bezier_tessellate_device(cpu, d_cp, d_deg, n, &o, d_off, d_xy, tv, &total, NULL),
        GROVE_ERR_UNSUPPORTED, "CUDA context");
    expect_err(gpu, "d_offsets NULL",
               grove_bezier_count_device(gpu, d_cp, d_deg, n, &o, NULL, &total),
               GROVE_ERR_INVALID_ARG, "d_offsets is NULL");
    /* n = 0 on the device */
    CHECK_OK(gpu,
             grove_bezier_tessellate_device(gpu, NULL, NULL, 0, &o, d_off, NULL, 0, &total, NULL));
    CHECK(total == 0);
    cudaFree(d_cp);
    cudaFree(d_deg);
    cudaFree(d_off);
    cudaFree(d_xy);
    free(h_xy);
    free(h_off);
    grove_polylines_free(&ref);
    cs_free(&s);
}

/* One call of the sequence in test_kept_scratch: set k through the device API (variant v:
 * 0 flat, 1 cdp, 2 count only, 3 flat with a capacity one vertex short, 4 the host-pointer
 * call), checked byte for byte against the CPU's ref[k], and the clamped curves (stats) against
 * the CPU's cap[k]. */
typedef struct kept_env {
    grove_ctx *gpu;
    const curveset *set;
    const grove_polylines *ref;
    const uint64_t *cap;
    grove_bezier_opts o; /* options that clamp many of the curves */
    float *d_cp, *d_xy, *h_xy;
    uint8_t *d_deg;
    uint64_t *d_off, *h_off;
} kept_env;

static void kept_call(const kept_env *K, int step, int k, int v)
{
    const grove_curves *c = &K->set[k].c;
    const grove_polylines *ref = &K->ref[k];
    const size_t n = c->n;
    const uint64_t tv = ref->n_vertices;
    grove_bezier_opts o = K->o;
    grove_bezier_stats st;
    uint64_t total = 0;
    int ok = 1;
    memset(&st, 0xff, sizeof st);
    cudaMemcpy(K->d_cp, c->cp, 8 * n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(K->d_deg, c->degree, n, cudaMemcpyHostToDevice);
    cudaMemset(K->d_off, 0xff, (n + 1) * sizeof(uint64_t));
    cudaMemset(K->d_xy, 0x7f, 2 * tv * sizeof(float));
    /* the legacy stream's memsets are not ordered with the context's non-blocking stream */
    cudaDeviceSynchronize();
    if (v == 4) {
        grove_polylines out;
        CHECK_OK(K->gpu, grove_bezier_tessellate(K->gpu, c, &o, &out, &st));
        CHECK_MSG(!same("kept scratch, host call", &out, ref) && st.capped == K->cap[k],
                  "kept scratch step %d (set %d, host call): differs from the CPU", step, k);
        grove_polylines_free(&out);
        return;
    }
    if (v == 2) {
        CHECK_OK(K->gpu, grove_bezier_count_device(K->gpu, K->d_cp, K->d_deg, n, &o, K->d_off,
                                                   &total));
    } else if (v == 3) {
        expect_err(K->gpu, "kept scratch, capacity",
                   grove_bezier_tessellate_device(K->gpu, K->d_cp, K->d_deg, n, &o, K->d_off,
                                                  K->d_xy, tv - 1, &total, NULL),
                   GROVE_ERR_LIMIT, "d_xy holds");
    } else {
        o.variant = v == 1 ? GROVE_BEZIER_CDP : GROVE_BEZIER_FLAT;
        CHECK_OK(K->gpu, grove_bezier_tessellate_device(K->gpu, K->d_cp, K->d_deg, n, &o,
                                                        K->d_off, K->d_xy, tv, &total, &st));
        ok = st.capped == K->cap[k];
    }
    ok = ok && total == tv;
    cudaMemcpy(K->h_off, K->d_off, (n + 1) * sizeof(uint64_t), cudaMemcpyDeviceToHost);
    ok = ok && memcmp(K->h_off, ref->offsets, (n + 1) * sizeof(uint64_t)) == 0;
    if (v != 2) {
        const uint64_t w = v == 3 ? tv - 1 : tv; /* vertices written */
        cudaMemcpy(K->h_xy, K->d_xy, 2 * tv * sizeof(float), cudaMemcpyDeviceToHost);
        ok = ok && memcmp(K->h_xy, ref->xy, 2 * w * sizeof(float)) == 0;
        if (v == 3) ok = ok && ((uint32_t *)K->h_xy)[2 * w] == 0x7f7f7f7fu;
    }
    CHECK_MSG(ok, "kept scratch step %d (set %d, variant %d): differs from the CPU", step, k, v);
}

/* The scratch a context keeps between calls (its tile states tagged with each pass's epoch, its
 * header cleared by the kernel of a writing pass instead of a memset), on a context of its own
 * so that the scratch is made and grown here: calls of different sizes and data in a row (a
 * state left by an earlier call must never be taken for this one's; a clamped-curve count left
 * in the header would show in the stats), every kind of call, the hooks that do not clear the
 * header, and the epochs' wrap, where tile states of epoch 1 from the first calls, with other
 * values, must be cleared before the count starts again; every call checked against the CPU. */
static void test_kept_scratch(grove_ctx *cpu, tu_rng *r)
{
    enum { NSET = 5 };
    const size_t ns[NSET] = {5000, 700, 1537, 20000, 20000};
    curveset set[NSET];
    grove_polylines ref[NSET];
    uint64_t cap[NSET];
    grove_ctx_opts co;
    grove_ctx *gpu = NULL;
    kept_env K;
    uint64_t maxv = 0;
    grove_ctx_default_opts(&co);
    co.backend = GROVE_BACKEND_CUDA;
    if (grove_ctx_create(&co, &gpu) != GROVE_OK) {
        CHECK_MSG(0, "kept scratch: no CUDA context of its own: %s", grove_ctx_last_error(gpu));
        grove_ctx_destroy(gpu);
        return;
    }
    memset(set, 0, sizeof set);
    opts_curv(&K.o, 4, 32, 0.25); /* 3-53% of each set clamped, counts 4..32 */
    for (int k = 0; k < NSET; k++) {
        grove_bezier_stats st;
        gen(&set[k], r, ns[k], GEN_RANDOM, 10.0f + 40.0f * (float)k);
        CHECK_OK(cpu, grove_bezier_tessellate(cpu, &set[k].c, &K.o, &ref[k], &st));
        cap[k] = st.capped;
        CHECK_MSG(cap[k] > 0 && cap[k] < ns[k], "kept scratch: set %d clamps %llu curves", k,
                  (unsigned long long)cap[k]);
        if (ref[k].n_vertices > maxv) maxv = ref[k].n_vertices;
    }
    K.gpu = gpu;
    K.set = set;
    K.ref = ref;
    K.cap = cap;
    K.h_xy = (float *)tu_malloc(2 * maxv * sizeof(float));
    K.h_off = (uint64_t *)tu_malloc((ns[3] + 1) * sizeof(uint64_t));
    CHECK(cudaMalloc((void **)&K.d_cp, 8 * ns[3] * sizeof(float)) == cudaSuccess);
    CHECK(cudaMalloc((void **)&K.d_deg, ns[3]) == cudaSuccess);
    CHECK(cudaMalloc((void **)&K.d_off, (ns[3] + 1) * sizeof(uint64_t)) == cudaSuccess);
    CHECK(cudaMalloc((void **)&K.d_xy, 2 * maxv * sizeof(float)) == cudaSuccess);
    /* (set, variant) in order: the first three calls make the scratch and grow it twice (each
     * then at epoch 1, the last leaving set 3's states of epoch 1 at tiles 0..39); then calls
     * of sizes and data that differ from one to the next, so that a pass finds tile states of
     * earlier passes with other values at its own tiles */
    static const int seq[][2] = {{1, 0}, {0, 0}, {3, 0}, {0, 0}, {1, 0}, {0, 0}, {2, 2},
                                 {0, 0}, {1, 3}, {2, 0}, {0, 4}, {1, 0}, {2, 1}, {0, 0},
                                 {1, 0}, {2, 0}, {0, 1}};
    int step = 0;
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        if (g_no_cdp && seq[i][1] == 1) continue;
        kept_call(&K, step++, seq[i][0], seq[i][1]);
    }
    /* the hooks whose kernels do not clear the header: the state words copied back (6) and a
     * block a tile (1); the default after each */
    for (int m = 0; m < 2; m++) {
        grove__bz_flat_mode(m == 0 ? 6 : 1);
        kept_call(&K, step++, m == 0 ? 0 : 2, 0);
        grove__bz_flat_mode(0);
        kept_call(&K, step++, m == 0 ? 2 : 0, 0);
    }
    /* the default wait polls the page-locked tag unless the device was set to block or yield
     * while waiting (sets 0-2 only, as below) */
    {
        unsigned fl = 0;
        const unsigned long long p0 = grove__bz_flat_polls();
        kept_call(&K, step++, 2, 0);
        kept_call(&K, step++, 0, 2);
        if (cudaGetDeviceFlags(&fl) == cudaSuccess) {
            fl &= cudaDeviceScheduleMask;
            if (fl != cudaDeviceScheduleBlockingSync && fl != cudaDeviceScheduleYield)
                CHECK_MSG(grove__bz_flat_polls() >= p0 + 2,
                          "kept scratch: %llu polled waits in two calls, 2 expected",
                          grove__bz_flat_polls() - p0);
        }
    }
    /* the stream waited for instead of the page-locked tag polled (devices set to block or
     * yield while waiting): writing passes of other sizes before and after (sets 0-2 only, so
     * that set 3's epoch-1 states stay at tiles 10..39 for the wrap below) */
    grove__bz_flat_wait(1);
    kept_call(&K, step++, 2, 0);
    kept_call(&K, step++, 1, 4);
    grove__bz_flat_wait(0);
    kept_call(&K, step++, 0, 0);
    /* across the epochs' wrap (the hook only moves forward): two passes at the last epochs,
     * then the buffer is cleared and the count starts again at 1, with set 4 (set 3's size,
     * other values) over the tiles where set 3's epoch-1 states were left */
    grove__bz_kept_epoch_set(gpu, grove__bz_kept_epoch_max() - 2);
    kept_call(&K, step++, 0, 0);
    kept_call(&K, step++, 1, 0);
    kept_call(&K, step++, 4, 0);
    kept_call(&K, step++, 3, 0);
    kept_call(&K, step++, 2, 2);
    kept_call(&K, step++, 4, 0);
    cudaFree(K.d_cp);
    cudaFree(K.d_deg);
    cudaFree(K.d_off);
    cudaFree(K.d_xy);
    free(K.h_xy);
    free(K.h_off);
    for (int k = 0; k < NSET; k++) {
        grove_polylines_free(&ref[k]);
        cs_free(&set[k]);
    }
    grove_ctx_destroy(gpu);
}

/* The cdp variant's pending-launch paths, through the test hooks. With groups of 1 and every
 * curve of >= 2 vertices given a child of its own, a call launches 2 n children whatever the
 * chunks, as the one-child-per-curve design did; a group of 7 without long curves gives
 * ceil(n / 7) when the chunks are multiples of 7 (as they are: 7 per allowed launch). */
static void test_cdp_limits(const env *E, tu_rng *r)
{
    curveset s = {{0}};
    grove_bezier_opts o;
    grove_polylines a, b;
    grove_bezier_stats st;
    gen(&s, r, g_quick ? 20000 : 50000, GEN_RANDOM, 10.0f);
    grove_bezier_default_opts(&o);
    CHECK_OK(E->gpu, grove_bezier_tessellate(E->gpu, &s.c, &o, &a, NULL));
    o.variant = GROVE_BEZIER_CDP;

    /* 7 launches a parent grid: per-curve children, 3 curves a grid (quick: 1441 curves) */
    grove__bz_cdp_tune(7, 0, 1, 2);
    {
        grove_curves few = s.c;
        grove_polylines fa;
        few.n = g_quick ? 1441 : s.c.n;
        CHECK_OK(E->gpu, grove_bezier_tessellate(E->gpu, &few, NULL, &fa, NULL));
        CHECK_OK(E->gpu, grove_bezier_tessellate(E->gpu, &few, &o, &b, &st));
        same("cdp, 7 launches a grid, per curve", &fa, &b);
        CHECK(st.child_launches == 2 * few.n);
        grove_polylines_free(&b);
        /* groups of 7, 7 launches a grid: 49 curves a grid */
        grove__bz_cdp_tune(7, 0, 7, 0);
        CHECK_OK(E->gpu, grove_bezier_tessellate(E->gpu, &few, &o, &b, &st));
        same("cdp, 7 launches a grid, groups of 7", &fa, &b);
        CHECK(st.child_launches == (few.n + 6) / 7);
        grove_polylines_free(&b);
        grove_polylines_free(&fa);
    }
    if (g_quick) {
        grove__bz_cdp_tune(0, 1000, 1, 2);
        expect_err(E->gpu, "cdp past the pending-launch limit (quick)",
                   grove_bezier_tessellate(E->gpu, &s.c, &o, &b, &st), GROVE_ERR_LIMIT,
                   "pending-launch limit could not be raised");
        grove__bz_cdp_tune(0, 0, 0, 0);
        grove_polylines_free(&a);
        cs_free(&s);
        return;
    }

    /* a device that holds 40000 pending launches: 100000 wanted, halved to 25000 */
    grove__bz_cdp_tune(0, 40000, 1, 2);
    CHECK_OK(E->gpu, grove_bezier_tessellate(E->gpu, &s.c, &o, &b, &st));
    same("cdp with the limit halved", &a, &b);
    CHECK(st.child_launches == 2 * s.c.n && st.variant == GROVE_BEZIER_CDP);
    grove_polylines_free(&b);

    /* one that holds 1000: below the floor; cdp asked for is LIMIT, AUTO runs flat */
    grove__bz_cdp_tune(0, 1000, 1, 2);
    expect_err(E->gpu, "cdp past the pending-launch limit",
               grove_bezier_tessellate(E->gpu, &s.c, &o, &b, &st), GROVE_ERR_LIMIT,
               "pending-launch limit could not be raised");
    CHECK(b.offsets == NULL && st.child_launches == 0);
    o.variant = GROVE_BEZIER_AUTO;
    CHECK_OK(E->gpu, grove_bezier_tessellate(E->gpu, &s.c, &o, &b, &st));
    same("auto past the pending-launch limit", &a, &b);
    CHECK(st.variant == GROVE_BEZIER_FLAT);
    grove_polylines_free(&b);

    /* few curves fit under the cap without raising anything; the default grouping needs 2
     * launches for all of them */
    {
        grove_curves few = s.c;
        few.n = 450;
        o.variant = GROVE_BEZIER_CDP;
        CHECK_OK(E->gpu, grove_bezier_tessellate(E->gpu, &few, &o, &b, &st));
        CHECK(st.child_launches == 900 && b.n_vertices == a.offsets[450]);
        CHECK(b.n_vertices && memcmp(b.xy, a.xy, b.n_vertices * 2 * sizeof(float)) == 0);
        grove_polylines_free(&b);
        grove__bz_cdp_tune(0, 1000, 0, 0);
        CHECK_OK(E->gpu, grove_bezier_tessellate(E->gpu, &s.c, &o, &b, &st));
        same("cdp grouped under a cap of 1000", &a, &b);
        CHECK(st.child_launches == cdp_launches(&a, &o));
        grove_polylines_free(&b);
    }
    grove__bz_cdp_tune(0, 0, 0, 0);

    /* forced out of device memory */
    {
        grove_ctx_opts co;
        grove_ctx *small = NULL;
        grove_ctx_default_opts(&co);
        co.backend = GROVE_BACKEND_CUDA;
        co.device_mem_limit = 4096;
        if (grove_ctx_create(&co, &small) == GROVE_OK) {
            expect_err(small, "device_mem_limit",
                       grove_bezier_tessellate(small, &s.c, NULL, &b, NULL),
                       GROVE_ERR_DEVICE_OUT_OF_MEMORY, "Bezier");
            CHECK(b.offsets == NULL);
        }
        grove_ctx_destroy(small);
    }
    grove_polylines_free(&a);
    cs_free(&s);
}
#endif

int main(int argc, char **argv)
{
    tu_args a = {"cpu", 0, 20261122, NULL};
    env E = {NULL, NULL};
    tu_rng r;
    grove_ctx_opts co;
    if (tu_parse_args(argc, argv, &a) != 0) {
        fprintf(stderr, "usage: test_bezier [--backend cpu|cuda] [--large N] [--seed S]\n");
        return 2;
    }
    r.s = a.seed;
    g_no_cdp = a.only && !strcmp(a.only, "quick-flat");
    g_quick = g_no_cdp || (a.only && !strcmp(a.only, "quick"));
    grove_ctx_default_opts(&co);
    co.backend = GROVE_BACKEND_CPU;
    if (grove_ctx_create(&co, &E.cpu) != GROVE_OK) {
        fprintf(stderr, "test_bezier: no CPU context\n");
        return 1;
    }
    if (!strcmp(a.backend, "cuda")) {
        int rc = tu_cuda_ctx("test_bezier", NULL, &E.gpu);
        if (rc) {
            grove_ctx_destroy(E.cpu);
            return rc;
        }
    }
    if (a.large) {
        test_large(&E, &r, a.large);
    } else if (g_quick) {
        test_sizes(&E, &r);
#ifdef GROVE_HAVE_CUDA
        if (E.gpu) {
            test_device_calls(E.gpu, E.cpu, &r);
            test_kept_scratch(E.cpu, &r);
            if (!g_no_cdp) test_cdp_limits(&E, &r);
        }
#endif
    } else {
        test_curv_fast(&r);
        test_sizes(&E, &r);
        test_degenerate(&E, &r);
        test_bad(E.cpu, &r);
        if (E.gpu) test_bad(E.gpu, &r);
#ifdef GROVE_HAVE_CUDA
        if (E.gpu) {
            test_device_calls(E.gpu, E.cpu, &r);
            test_kept_scratch(E.cpu, &r);
            test_cdp_limits(&E, &r);
        }
#endif
        test_large(&E, &r, (size_t)1 << 20 | 3);
    }
    grove_ctx_destroy(E.gpu);
    grove_ctx_destroy(E.cpu);
    return tu_finish("test_bezier");
}
