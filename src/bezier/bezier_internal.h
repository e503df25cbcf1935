/*
 * bezier_internal.h - declarations shared by the bezier module's files (not installed): the exact
 * arithmetic that defines a tessellation (the vertex-count rules and the vertex evaluation), usable
 * from C and CUDA, so that every backend and variant performs literally the same IEEE operations;
 * input validation; the backends' entry points; the CUDA tile writer (under __CUDACC__).
 *
 * No multiply-add may be contracted into an FMA implicitly, or the CPU and the GPU would round
 * differently: every statement below does one rounded operation, and the fused multiply-adds of
 * the vertex sums are written out (fmaf on the host, correctly rounded in C99 whatever the CPU;
 * __fmaf_rn on the device). On the device the _rn intrinsics (which nvcc never contracts) make
 * that explicit. Host C is compiled as ISO C11 (-std=c11), where GCC does not contract across
 * statements (-ffp-contract=off is its default in ISO mode).
 *
 * The count rules (bezier.h), in double:
 *   curvature: c = max over the inner control points Pi of |e_i x ch| / |ch|, ch = Pd - P0,
 *     e_i = Pi - P0; when ch == 0, c = max |e_i|; a line has c = 0.
 *     v = floor(c * curvature_scale); m = clamp(v, min_points, max_points).
 *   tolerance: M = max_i |P(i+2) - 2 P(i+1) + P(i)|, k = d (d - 1); s = the fewest s in
 *     1..max_points-1 with (k * M) / (8 * s * s) <= tolerance (each operation rounded once;
 *     the test is monotone in s, found by bisection); m = s + 1, or max_points (capped) when no
 *     such s exists.
 * The vertex evaluation (float), relative to P0 (so that a curve whose points are all equal, or
 *   equal in one coordinate, gives exactly that point or coordinate, -0 as +0):
 *   r = 1 / (float)(m - 1) (once a curve), u = (float)i * r, v = 1 - u.
 *   Degree 1: fma(u, x1 - x0, x0).
 *   Degree 3: the offsets e_k = x_k - x0 and the Bernstein weights b1 = 3 ((v v) u),
 *   b2 = 3 (v (u u)), b3 = (u u) u, summed with fused multiply-adds:
 *   fma(b3, e3, fma(b2, e2, fma(b1, e1, x0))).
 *   Degree 2 is evaluated as the cubic of its degree elevation, whose offsets are
 *   e1 = (x1 - x0) s, e2 = fma(x2 - x0, t, e1), e3 = x2 - x0, with s = 2/3 and t = 1/3 rounded
 *   to nearest float. Vertex 0 is P0 and vertex m-1 is Pd, copied. Coordinates are at most
 *   GROVE_BEZIER_MAX_COORD in magnitude (validated), so no step overflows.
 */
#ifndef GROVE_BEZIER_INTERNAL_H
#define GROVE_BEZIER_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "grove/bezier.h"

#ifdef __CUDACC__
#define GROVE__BZ_FN static __host__ __device__ __forceinline__
#else
#define GROVE__BZ_FN static inline
#endif

/* One rounding each, never fused. */
#ifdef __CUDA_ARCH__
#define GROVE__BZ_FMUL(a, b) __fmul_rn((a), (b))
#define GROVE__BZ_FADD(a, b) __fadd_rn((a), (b))
#define GROVE__BZ_FSUB(a, b) __fsub_rn((a), (b))
#define GROVE__BZ_FDIV(a, b) __fdiv_rn((a), (b))
#define GROVE__BZ_DMUL(a, b) __dmul_rn((a), (b))
#define GROVE__BZ_DADD(a, b) __dadd_rn((a), (b))
#define GROVE__BZ_DSUB(a, b) __dsub_rn((a), (b))
#define GROVE__BZ_DDIV(a, b) __ddiv_rn((a), (b))
#define GROVE__BZ_DSQRT(a) __dsqrt_rn(a)
#define GROVE__BZ_FMA(a, b, c) __fmaf_rn((a), (b), (c))
#else
#define GROVE__BZ_FMA(a, b, c) fmaf((a), (b), (c))
#define GROVE__BZ_FMUL(a, b) ((float)((a) * (b)))
#define GROVE__BZ_FADD(a, b) ((float)((a) + (b)))
#define GROVE__BZ_FSUB(a, b) ((float)((a) - (b)))
#define GROVE__BZ_FDIV(a, b) ((float)((a) / (b)))
#define GROVE__BZ_DMUL(a, b) ((double)((a) * (b)))
#define GROVE__BZ_DADD(a, b) ((double)((a) + (b)))
#define GROVE__BZ_DSUB(a, b) ((double)((a) - (b)))
#define GROVE__BZ_DDIV(a, b) ((double)((a) / (b)))
#define GROVE__BZ_DSQRT(a) sqrt(a)
#endif

/* The most curves one call takes (the CUDA kernel numbers its tiles of curves in 32 bits, with
 * room to spare; the same bound on every backend). */
#define GROVE__BZ_MAX_N ((size_t)UINT32_MAX - 1)

/* The count of one curve: m, and whether a clamp decided it (bezier_stats.capped). */
typedef struct grove__bz_count {
    uint32_t m;
    uint32_t capped;
} grove__bz_count;

/* The rule's parameters as the kernels take them (by value). */
typedef struct grove__bz_rule {
    int mode; /* grove_bezier_mode */
    int min_points, max_points;
    float scale_f; /* scale rounded to float, for grove__bz_curv_floor_fast */
    double scale, tolerance;
} grove__bz_rule;

/* Degrees outside 1..3 (only possible through the unvalidated _device calls) are read as 3, so a
 * bad byte gives an unspecified count, never a fault. */
GROVE__BZ_FN int grove__bz_degree(uint8_t d) { return (d >= 1 && d <= 3) ? (int)d : 3; }

GROVE__BZ_FN double grove__bz_hypot(double x, double y)
{
    double a = GROVE__BZ_DMUL(x, x);
    double b = GROVE__BZ_DMUL(y, y);
    double s = GROVE__BZ_DADD(a, b);
    return GROVE__BZ_DSQRT(s);
}

/* c of the curvature rule (bezier.h) for a curve of degree d with control points cp. */
GROVE__BZ_FN double grove__bz_curvature(const float *cp, int d)
{
    const double x0 = (double)cp[0], y0 = (double)cp[1];
    const double chx = GROVE__BZ_DSUB((double)cp[2 * d], x0);
    const double chy = GROVE__BZ_DSUB((double)cp[2 * d + 1], y0);
    const double len = grove__bz_hypot(chx, chy);
    double c = 0.0;
    for (int i = 1; i < d; i++) {
        const double ex = GROVE__BZ_DSUB((double)cp[2 * i], x0);
        const double ey = GROVE__BZ_DSUB((double)cp[2 * i + 1], y0);
        double dist;
        if (len == 0.0) {
            dist = grove__bz_hypot(ex, ey);
        } else {
            /* |cross| only: the division by len comes once, below */
            const double a = GROVE__BZ_DMUL(ex, chy);
            const double b = GROVE__BZ_DMUL(ey, chx);
            dist = fabs(GROVE__BZ_DSUB(a, b));
        }
        /* written so that a NaN never wins (unvalidated device input) */
        if (dist > c) c = dist;
    }
    if (len == 0.0) return c;
    /* One division instead of one per inner point, with the same result: a correctly rounded
     * division by len > 0 is monotone in the dividend, so the largest quotient is the quotient
     * of the largest |cross|; a NaN or infinite len (unvalidated device input) gives 0 as the
     * per-point quotients did. */
    const double q = GROVE__BZ_DDIV(c, len);
    return q > 0.0 ? q : 0.0;
}

/* The curvature rule's floor(c * scale) (grove__bz_curvature in double, then the product) from
 * a float estimate, when the estimate is certain: returns 1 with *v = that integer, 0 when the
 * double computation must decide. The estimate est of V = scale max|cross| / len (the exact
 * value) errs by at most 4 u k S + 10 u V + 2^-48 (u = 2^-24, k = scale / len, S = the largest
 * |ex chy| + |ey chx|; the reciprocal square root within 2 ulp of the correctly rounded value,
 * as CUDA documents rsqrtf), and the double computation's value before its floor lies within
 * 2^-50 (k S + V) of V; the call allows 2^-17 (k S + est) + 2^-30 (at least 12 times what is
 * needed; the 2^-30 and the 2^23 guard are margins), so that when that interval holds a single
 * integer, the double computation's floor is that integer. It gives up on a chord below 2^-40
 * or above 2^40 in its larger coordinate (a zero chord takes the double path's other branch),
 * a difference above 2^40, a scale outside [2^-60, 2^60], an estimate at or above 2^23, NaN and
 * infinities; and where an integer lies in the interval (about 2^-15 (k S + est) of all
 * curves). The two inner points of a cubic may give the largest |cross| in float and in double
 * at different points: the bound holds for the largest either way. Degree 1: c = 0 whatever
 * the points (grove__bz_curvature returns +0 for a chord of any length, NaN included), so *v =
 * 0. The CUDA kernels use it before the double computation; the CPU backend does not (tests
 * compare the two on the host, the reciprocal square root stepped 2 ulp either way, and the
 * GPU's counts with the CPU's). */

/* grove__bz_curv_floor_fast's first half (degree 2 or 3): the largest |cross| *c, the largest
 * |ex chy| + |ey chx| *smax and the chord's squared length *len2, in float; 0 where it gives up
 * on the points. */
GROVE__BZ_FN int grove__bz_curv_parts(const float *cp, int d, float *c, float *smax, float *len2)
{
    const float x0 = cp[0], y0 = cp[1];
    const float chx = GROVE__BZ_FSUB(cp[2 * d], x0), chy = GROVE__BZ_FSUB(cp[2 * d + 1], y0);
    const float big = fmaxf(fabsf(chx), fabsf(chy));
    if (!(big >= 0x1p-40f && big <= 0x1p40f)) return 0; /* NaN too */
    float cm = 0.0f, sm = 0.0f;
    for (int i = 1; i < d; i++) {
        const float ex = GROVE__BZ_FSUB(cp[2 * i], x0), ey = GROVE__BZ_FSUB(cp[2 * i + 1], y0);
        if (!(fabsf(ex) <= 0x1p40f && fabsf(ey) <= 0x1p40f)) return 0;
        const float a = GROVE__BZ_FMUL(ex, chy), b = GROVE__BZ_FMUL(ey, chx);
        cm = fmaxf(cm, fabsf(GROVE__BZ_FSUB(a, b)));
        sm = fmaxf(sm, GROVE__BZ_FADD(fabsf(a), fabsf(b)));
    }
    *c = cm;
    *smax = sm;
    *len2 = GROVE__BZ_FADD(GROVE__BZ_FMUL(chx, chx), GROVE__BZ_FMUL(chy, chy));
    return 1;
}

/* Its second half: rinv = 1 / sqrt(len2) within 2 ulp; the estimate *est and the allowance *err
 * (set unless the scale is refused); 1 with *v when the interval holds one integer. */
GROVE__BZ_FN int grove__bz_curv_decide(float c, float smax, float rinv, float scale, float *est,
                                       float *err, double *v)
{
    if (!(scale >= 0x1p-60f && scale <= 0x1p60f)) return 0;
    const float k = GROVE__BZ_FMUL(scale, rinv);
    const float e = GROVE__BZ_FMUL(c, k);
    const float a = GROVE__BZ_FADD(
        GROVE__BZ_FMUL(GROVE__BZ_FADD(GROVE__BZ_FMUL(smax, k), e), 0x1p-17f), 0x1p-30f);
    *est = e;
    *err = a;
    const float hi = GROVE__BZ_FADD(e, a);
    if (!(hi < 0x1p23f)) return 0; /* also NaN and infinities */
    const float lo = fmaxf(GROVE__BZ_FSUB(e, a), 0.0f);
    const float f = floorf(lo);
    if (f != floorf(hi)) return 0;
    *v = (double)f;
    return 1;
}

GROVE__BZ_FN int grove__bz_curv_floor_fast(const float *cp, int d, float scale, double *v)
{
    float c, smax, len2, est, err;
    if (d == 1) {
        *v = 0.0;
        return 1;
    }
    if (!(scale >= 0x1p-60f && scale <= 0x1p60f)) return 0; /* before the points, as decide */
    if (!grove__bz_curv_parts(cp, d, &c, &smax, &len2)) return 0;
#ifdef __CUDA_ARCH__
    const float rinv = rsqrtf(len2);
#else
    const float rinv = 1.0f / sqrtf(len2);
#endif
    return grove__bz_curv_decide(c, smax, rinv, scale, &est, &err, v);
}

/* M of the tolerance rule: the largest second difference of the control points. */
GROVE__BZ_FN double grove__bz_second_diff(const float *cp, int d)
{
    double mx = 0.0;
    for (int i = 0; i + 2 <= d; i++) {
        double tx = GROVE__BZ_DMUL(2.0, (double)cp[2 * i + 2]);
        double ty = GROVE__BZ_DMUL(2.0, (double)cp[2 * i + 3]);
        double ax = GROVE__BZ_DSUB((double)cp[2 * i + 4], tx);
        double ay = GROVE__BZ_DSUB((double)cp[2 * i + 5], ty);
        double dx = GROVE__BZ_DADD(ax, (double)cp[2 * i]);
        double dy = GROVE__BZ_DADD(ay, (double)cp[2 * i + 1]);
        double nrm = grove__bz_hypot(dx, dy);
        if (nrm > mx) mx = nrm;
    }
    return mx;
}

/* Whether s segments meet the tolerance: (k M) / (8 s s) <= tol. */
GROVE__BZ_FN int grove__bz_tol_ok(double kM, uint32_t s, double tol)
{
    const double ss = GROVE__BZ_DMUL((double)s, (double)s);
    const double den = GROVE__BZ_DMUL(8.0, ss);
    return GROVE__BZ_DDIV(kM, den) <= tol;
}

/* The vertex count of one curve (8 floats cp, degree byte) under rule r. */
GROVE__BZ_FN grove__bz_count grove__bz_count_curve(const float *cp, uint8_t degree,
                                                   const grove__bz_rule *r)
{
    const int d = grove__bz_degree(degree);
    grove__bz_count out;
    out.capped = 0;
    if (r->mode == GROVE_BEZIER_TOLERANCE) {
        const double kM = GROVE__BZ_DMUL((double)(d * (d - 1)), grove__bz_second_diff(cp, d));
        uint32_t lo = 1, hi = (uint32_t)r->max_points - 1;
        if (!grove__bz_tol_ok(kM, hi, r->tolerance)) {
            out.m = (uint32_t)r->max_points;
            out.capped = 1;
            return out;
        }
        /* invariant: ok(hi); lo is the smallest candidate left */
        while (lo < hi) {
            const uint32_t mid = lo + (hi - lo) / 2;
            if (grove__bz_tol_ok(kM, mid, r->tolerance))
                hi = mid;
            else
                lo = mid + 1;
        }
        out.m = hi + 1;
        return out;
    } else {
        double v;
#ifdef __CUDA_ARCH__
        if (!grove__bz_curv_floor_fast(cp, d, r->scale_f, &v))
#endif
            v = floor(GROVE__BZ_DMUL(grove__bz_curvature(cp, d), r->scale));
        if (v >= (double)r->max_points) {
            out.m = (uint32_t)r->max_points;
            out.capped = v > (double)r->max_points;
        } else if (v >= (double)r->min_points) {
            out.m = (uint32_t)v;
        } else { /* below the minimum, or NaN from unvalidated input */
            out.m = (uint32_t)r->min_points;
            out.capped = 1;
        }
        return out;
    }
}

/* The parameter step of a curve of m vertices, and the parameter of inner vertex i. */
GROVE__BZ_FN float grove__bz_step(uint32_t m) { return GROVE__BZ_FDIV(1.0f, (float)(m - 1)); }

GROVE__BZ_FN float grove__bz_u(uint32_t i, uint32_t m)
{
    return GROVE__BZ_FMUL((float)i, grove__bz_step(m));
}

/* The cubic Bernstein weights of P1, P2, P3 at parameter u into b[0..2]: 3 v^2 u, 3 v u^2, u^3
 * (v = 1 - u). P0's weight is not needed: a vertex is P0 plus the weighted offsets of the other
 * points from P0. This function is the only place the weights are computed. */
GROVE__BZ_FN void grove__bz_weights(float u, float *b)
{
    const float v = GROVE__BZ_FSUB(1.0f, u);
    const float vv = GROVE__BZ_FMUL(v, v);
    const float uu = GROVE__BZ_FMUL(u, u);
    const float vvu = GROVE__BZ_FMUL(vv, u);
    const float vuu = GROVE__BZ_FMUL(v, uu);
    b[0] = GROVE__BZ_FMUL(3.0f, vvu);
    b[1] = GROVE__BZ_FMUL(3.0f, vuu);
    b[2] = GROVE__BZ_FMUL(uu, u);
}

/* One coordinate of a cubic vertex: p0 + b1 e1 + b2 e2 + b3 e3, three fused multiply-adds. */
GROVE__BZ_FN float grove__bz_sum(const float *b, float p0, float e1, float e2, float e3)
{
    return GROVE__BZ_FMA(b[2], e3, GROVE__BZ_FMA(b[1], e2, GROVE__BZ_FMA(b[0], e1, p0)));
}

/* The offsets e1, e2, e3 into e[0..2] of coordinate a (0: x, 1: y) of a curve of degree 2 or 3,
 * the cubic form's: degree 3, Pk - P0; degree 2, those of its elevation to a cubic (Q1 - Q0 =
 * 2/3 (P1 - P0), Q2 - Q0 = 2/3 (P1 - P0) + 1/3 (P2 - P0), Q3 - Q0 = P2 - P0) with 2/3 and 1/3
 * rounded to nearest. Below GROVE_BEZIER_MAX_COORD nothing overflows. */
#define GROVE__BZ_THIRD 0x1.555556p-2f      /* 1/3 rounded to nearest */
#define GROVE__BZ_TWO_THIRDS 0x1.555556p-1f /* 2/3 rounded to nearest */
GROVE__BZ_FN void grove__bz_offsets(const float *cp, int d, int a, float *e)
{
    const float p0 = cp[a];
    if (d == 3) {
        e[0] = GROVE__BZ_FSUB(cp[2 + a], p0);
        e[1] = GROVE__BZ_FSUB(cp[4 + a], p0);
        e[2] = GROVE__BZ_FSUB(cp[6 + a], p0);
    } else {
        const float d1 = GROVE__BZ_FSUB(cp[2 + a], p0);
        const float d2 = GROVE__BZ_FSUB(cp[4 + a], p0);
        e[0] = GROVE__BZ_FMUL(d1, GROVE__BZ_TWO_THIRDS);
        e[1] = GROVE__BZ_FMA(d2, GROVE__BZ_THIRD, e[0]);
        e[2] = d2;
    }
}

/* An inner vertex of a curve of degree d (1..3) at parameter u; writes x, y to xy[0], xy[1].
 * Degree 1: P0 + u (P1 - P0), one fused multiply-add. */
GROVE__BZ_FN void grove__bz_inner(const float *cp, int d, float u, float *xy)
{
    float b[3], e[3];
    if (d == 1) {
        for (int a = 0; a < 2; a++)
            xy[a] = GROVE__BZ_FMA(u, GROVE__BZ_FSUB(cp[2 + a], cp[a]), cp[a]);
        return;
    }
    grove__bz_weights(u, b);
    for (int a = 0; a < 2; a++) {
        grove__bz_offsets(cp, d, a, e);
        xy[a] = grove__bz_sum(b, cp[a], e[0], e[1], e[2]);
    }
}

/* Vertex i (0 <= i < m, m >= 2) of a curve; writes x, y to xy[0], xy[1]. */
GROVE__BZ_FN void grove__bz_vertex(const float *cp, uint8_t degree, uint32_t i, uint32_t m,
                                   float *xy)
{
    const int d = grove__bz_degree(degree);
    if (i == 0) {
        xy[0] = cp[0];
        xy[1] = cp[1];
        return;
    }
    if (i + 1 >= m) {
        xy[0] = cp[2 * d];
        xy[1] = cp[2 * d + 1];
        return;
    }
    grove__bz_inner(cp, d, grove__bz_u(i, m), xy);
}

/* All m (>= 2) vertices of a curve into xy (2 m floats): grove__bz_vertex's values, with the
 * parameter step and the offsets computed once for the curve. */
GROVE__BZ_FN void grove__bz_curve(const float *cp, uint8_t degree, uint32_t m, float *xy)
{
    const int d = grove__bz_degree(degree);
    /* P0 and the offsets in locals and an int index (m <= GROVE_BEZIER_MAX_POINTS), so that
     * the loops read nothing that the stores could change and convert the index with one
     * instruction: compilers vectorize them (the CPU backend's clone for AVX2: twice as fast
     * as the scalar loop, the same bytes: each lane does the same operations in order) */
    const float x0 = cp[0], y0 = cp[1];
    float e[6];
    xy[0] = x0;
    xy[1] = y0;
    xy[2 * (m - 1)] = cp[2 * d];
    xy[2 * (m - 1) + 1] = cp[2 * d + 1];
    if (m <= 2) return;
    const float r = grove__bz_step(m);
    const int last = (int)m - 1;
    if (d == 1) {
        const float dx = GROVE__BZ_FSUB(cp[2], x0), dy = GROVE__BZ_FSUB(cp[3], y0);
        for (int i = 1; i < last; i++) {
            const float u = GROVE__BZ_FMUL((float)i, r);
            xy[2 * i] = GROVE__BZ_FMA(u, dx, x0);
            xy[2 * i + 1] = GROVE__BZ_FMA(u, dy, y0);
        }
        return;
    }
    grove__bz_offsets(cp, d, 0, e);
    grove__bz_offsets(cp, d, 1, e + 3);
    const float e0 = e[0], e1 = e[1], e2 = e[2], e3 = e[3], e4 = e[4], e5 = e[5];
    for (int i = 1; i < last; i++) {
        float b[3];
        grove__bz_weights(GROVE__BZ_FMUL((float)i, r), b);
        xy[2 * i] = grove__bz_sum(b, x0, e0, e1, e2);
        xy[2 * i + 1] = grove__bz_sum(b, y0, e3, e4, e5);
    }
}

#ifdef __cplusplus
extern "C" {
#endif

/* Fills r from opts (already checked). */
void grove__bz_rule_from(const grove_bezier_opts *o, grove__bz_rule *r);

/* Checks the options: GROVE_ERR_INVALID_ARG naming the option. fn names the caller. */
grove_status grove__bz_check_opts(grove_ctx *ctx, const char *fn, const grove_bezier_opts *o);

/* Checks every curve's degree (1..3) and the control points it uses (finite):
 * GROVE_ERR_BAD_INPUT naming the first bad curve. */
grove_status grove__bz_check_curves(grove_ctx *ctx, const char *fn, const grove_curves *in);

/* The CPU backend (bezier_cpu.c): input and options checked; out zeroed by the caller. */
grove_status grove__bz_tessellate_cpu(grove_ctx *ctx, const grove_curves *in,
                                      const grove_bezier_opts *o, grove_polylines *out,
                                      grove_bezier_stats *stats);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#include <type_traits>

/* ---- the tile writer of the CUDA backend (bezier_cuda.cu's flat kernel and bezier_cdp.cu's
 * group children) ----
 * A tile is kC consecutive curves, handled by one block of kT threads: their control points and
 * degrees are staged in shared memory, their offsets relative to the tile's first vertex (32-bit:
 * a tile has at most kC * GROVE_BEZIER_MAX_POINTS = 2^21 vertices) are in s.off[0..C], and the
 * tile's vertices are written in chunks of kT * kPer, a thread taking two consecutive vertices
 * a step (one 16-byte store). A chunk's slots find their curve without a search: every curve
 * starting in the chunk sets its slot's bit, and the curve of a slot is the curve of the chunk's
 * previous slot plus the number of bits up to it (a block-wide count, double-buffered so that a
 * chunk costs three barriers). A vertex is computed in registers from its curve's staging and
 * parameter step with grove__bz_inner's degree-3 operations, in the same order (the staging holds
 * P0, grove__bz_offsets' e1 and e2 and the end point, written in place before the chunks): the
 * bytes are the CPU's. (Until 2026-11-28 the basis was tabled per block, one 16-byte shared
 * load a vertex; docs/bezier-gpu.md.) */
namespace grove_bzk
{

typedef unsigned long long u64;

constexpr int kT = 256;       /* threads per block */
constexpr int kCPT = 2;       /* curves per thread */
constexpr int kC = kT * kCPT; /* curves per tile */

/* A shared-memory layout chosen against bank conflicts (ncu on the H200, 10^7 curves: 36% of the
 * shared-load wavefronts were conflicts, and L1 the busiest unit). A compile-time choice, so that
 * the variants can be timed against each other; both give the same bytes.
 * GROVE_BZ_CP_PAD, the staged control points: the count (fused_tile in bezier_cuda.cu) reads
 * its curves' points as 8-byte loads, one curve a lane; at a 32-byte lane stride a word at a
 * fixed offset of the curve falls in 4 of the 16 bank pairs (8 wavefronts where 2 carry the
 * data; the count had 16 with curves 2t and 2t + 1 a thread). 1: 16 bytes of padding after
 * every 4 curves, so that curve j starts at 16-byte unit 2 j + (j >> 2): 4 wavefronts, the least
 * a 16-byte-aligned curve allows (such a word can only fall in 8 of the 16 bank pairs); it costs
 * the writer 6 instructions a pair (the units of a curve and of the next) and 2 KB a tile.
 * 0: plain. The count's loads are a small share of the shared traffic (14% before either), so
 * the writer's instructions may weigh more: time both. */
#ifndef GROVE_BZ_CP_PAD
#define GROVE_BZ_CP_PAD 0
#endif

/* The 16-byte unit of the first half of staged curve j (the second half follows it). */
__host__ __device__ constexpr int cp_unit(int j)
{
    return GROVE_BZ_CP_PAD ? 2 * j + (j >> 2) : 2 * j;
}
/* Units of staging: kC curves and one more (the writer reads curve ja + 1 unclamped; see
 * tile_write), padding included. */
constexpr int kCpUnits = cp_unit(kC + 1);

/* State words in device memory (both .cu files use them). */
enum { S_CAPPED = 0, S_FAILED, S_ERR, S_LAUNCHES, S_BIG, S_TOTAL, S_COUNT };

/* One tile's staging, for tile_write's chunks of up to kPM vertices a thread (8, 16, 32 or 64;
 * the chunk flags take kT kPM / 32 words a buffer). The cdp children use TileSmem (kPM 16), whose
 * 28.3 KB keep two blocks of four tiles an SM; the flat kernel uses TileSmemT<64>. */
template <int kPM> struct TileSmemT {
    static constexpr int kPerMax = kPM;
    static constexpr uint32_t kVMax = kT * kPM;
    float4 cp[kCpUnits]; /* curve j at cp_unit(j), cp_unit(j) + 1; tile_write replaces the
                          * points of the curves its loop writes by their cubic form's offsets
                          * (P0, e1, e2, the end point), in place */
    uint2 rec[kC];       /* tile_write's record of each curve (kRecM and below) */
    float step[kC];      /* tile_write: each written curve's parameter step, grove__bz_step */
    uint32_t off[kC + 1];
    /* a bit a chunk slot; the curves started before each counting group (tile_write): a
     * group is a thread's kPer slots for kPer up to 32, a flag word's 32 for kPer 64;
     * 8-byte aligned for the pairs of words that a thread reads and writes at kPer 64 */
    alignas(8) uint32_t flag[2][kVMax / 32];
    alignas(8) uint32_t excl[2][kPM > 32 ? kVMax / 32 : kT];
    uint32_t wt[2][kT / 32];
    uint8_t deg[kC + 1]; /* deg[C] is read, never used, by tile_write's records */
};
using TileSmem = TileSmemT<16>;

/* The thread's index in its tile group of kT threads. */
__device__ __forceinline__ unsigned tile_tid() { return threadIdx.x & (unsigned)(kT - 1); }

/* A barrier over the tile group: the whole block when a block is one group (kNamed false), else
 * named barrier 1 + group, so that the groups of a block of several tiles run independently. */
template <bool kNamed> __device__ __forceinline__ void tile_sync()
{
    if (kNamed)
        asm volatile("bar.sync %0, %1;" ::"r"(1u + (threadIdx.x / (unsigned)kT)), "n"(kT)
                     : "memory");
    else
        __syncthreads();
}

/* Stages curves [c0, c0 + C) (C <= kC) into s.cp and s.deg and clears the first chunk's flags.
 * The tile group synchronizes before reading. */
template <class S>
__device__ __forceinline__ void tile_stage(S &s, const float *__restrict__ cp,
                                           const uint8_t *__restrict__ deg, u64 c0, int C)
{
    const int t = (int)tile_tid();
    bool inflight = false;
    if (C == kC && ((uintptr_t)cp & 15u) == 0 && ((uintptr_t)deg & 3u) == 0) {
        /* a full tile: every copy in flight at once (cp.async, no registers), so the block waits
         * for one round trip to memory, not one per unrolled group of scalar loads (c0 is a
         * multiple of kC: the tile's points are 16-byte and its degrees 4-byte aligned) */
        const float4 *src = reinterpret_cast<const float4 *>(cp + 8 * c0);
#pragma unroll
        for (int k = 0; k < 2 * kC / kT; k++) {
            const int u = t + k * kT; /* unit u / 2 of curve u / 2 */
            const unsigned a = (unsigned)__cvta_generic_to_shared(&s.cp[cp_unit(u >> 1) + (u & 1)]);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(src + t + k * kT)
                         : "memory");
        }
        if (t < kC / 4) {
            const unsigned a = (unsigned)__cvta_generic_to_shared(&s.deg[4 * t]);
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(a), "l"(deg + c0 + 4 * t)
                         : "memory");
        }
        inflight = true;
    } else {
        float *scp = reinterpret_cast<float *>(s.cp);
        for (int e = t; e < 8 * C; e += kT)
            scp[4 * cp_unit(e >> 3) + (e & 7)] = __ldg(cp + 8 * c0 + e);
        for (int j = t; j < C; j += kT) s.deg[j] = __ldg(deg + c0 + j);
    }
    for (int i = t; i < (int)(S::kVMax / 32); i += kT) s.flag[0][i] = 0;
    if (inflight) asm volatile("cp.async.wait_all;" ::: "memory");
}

/* The curve of a chunk slot lv (chunk buffer b, prev = the curve before the chunk), with kG the
 * counting group's slots (kPer up to 32, else 32: tile_write): g = lv / kG (its group), wi =
 * lv / 32 (its flag word), sh = (g kG) mod 32 (the group's first bit in the word), low = the mask
 * of lv's bit and those below it in its group, (2 << (lv mod kG)) - 1. The caller derives them
 * from its first slot: a thread's slots are 2 kT apart, a multiple of kG and of 32, so sh and
 * low are the same for all of them, and g and wi grow by constants (the loads then take
 * immediate offsets). */
template <class S>
__device__ __forceinline__ int tile_curve(const S &s, int b, int prev, int g, int wi, uint32_t sh,
                                          uint32_t low)
{
    const uint32_t bits = (s.flag[b][wi] >> sh) & low;
    return prev + (int)(s.excl[b][g] + (uint32_t)__popc(bits));
}

/* tile_write's record of a curve: x = its first vertex relative to the tile's, y = m (13 bits,
 * m <= GROVE_BEZIER_MAX_POINTS) | line << 23 | next skip << 24 | skip << 31, skip when the
 * main loop does not write the curve (m >= big: a cdp child of its own writes it), next skip
 * the same for the next curve (junk for the tile's last, never used), so that a pair whose
 * second vertex starts the next curve needs no load of that curve's own. */
static_assert(GROVE_BEZIER_MAX_POINTS < (1 << 13), "m fits tile_write's record");
constexpr uint32_t kRecM = (1u << 13) - 1u, kRecLine = 1u << 23, kRecSkipN = 1u << 24,
                   kRecSkip = 1u << 31;

/* Vertex i of a written curve at parameter step r, from its staging a = (x0, y0, e1x, e1y),
 * b = (e2x, e2y, end x, end y) and e3 = end - P0: grove__bz_inner's arithmetic, operation for
 * operation (a line's staging, tile_offsets', with u as the weight of e3). */
__device__ __forceinline__ float2 tile_cubic(float4 a, float4 b, float2 e3, float r, uint32_t i,
                                             bool line)
{
    const float u = __fmul_rn((float)i, r);
    const float v = __fsub_rn(1.0f, u);
    const float vv = __fmul_rn(v, v), uu = __fmul_rn(u, u);
    const float b1 = __fmul_rn(3.0f, __fmul_rn(vv, u));
    const float b2 = __fmul_rn(3.0f, __fmul_rn(v, uu)), b3 = line ? u : __fmul_rn(uu, u);
    float2 p;
    p.x = __fmaf_rn(b3, e3.x, __fmaf_rn(b2, b.x, __fmaf_rn(b1, a.z, a.x)));
    p.y = __fmaf_rn(b3, e3.y, __fmaf_rn(b2, b.y, __fmaf_rn(b1, a.w, a.y)));
    return p;
}

/* Vertices i and i + 1 of a written curve (staging a, b as tile_cubic's; m vertices; parameter
 * step r; line: degree 1) into out (x, y, x, y). i may be ~0u (only where first is true) and
 * i + 1 may be m: the values are then never written. */
__device__ __forceinline__ void tile_pair(float4 a, float4 b, float r, uint32_t m, uint32_t i,
                                          bool line, bool first, float4 &out)
{
    /* grove__bz_offsets' e3 (the end point less P0, for both degrees), once for the pair */
    const float2 e3 = make_float2(__fsub_rn(b.z, a.x), __fsub_rn(b.w, a.y));
    float2 p = tile_cubic(a, b, e3, r, i, line);
    if (i + 1u == m) p.x = b.z, p.y = b.w;
    if (i == 0u) p.x = a.x, p.y = a.y;
    out.x = p.x;
    out.y = p.y;
    p = tile_cubic(a, b, e3, r, i + 1u, line);
    if (i + 2u == m) p.x = b.z, p.y = b.w;
    if (first && i + 1u == 0u) p.x = a.x, p.y = a.y;
    out.z = p.x;
    out.w = p.y;
}

/* Vector stores the compiler may not split: it turned a pair's 16-byte store into four 4-byte
 * ones when it could fold the paths of a full and a partial pair. */
__device__ __forceinline__ void st_v4(float *p, float4 v)
{
    asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z),
                 "f"(v.w));
}
__device__ __forceinline__ void st_v2(float *p, float x, float y)
{
    asm volatile("st.global.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(x), "f"(y));
}

/* Rewrites, in place, the staging of the curves a writer's loop computes (those of m < big;
 * ~0u: all) into the cubic form's offsets: P0, e1, e2 and the end point
 * (grove__bz_offsets; e3 = end - P0 is formed in the loop). A line (degree 1) becomes P0,
 * e1 = e2 = -0 and its end, which the cubic sums turn into grove__bz_inner's P0 + u (P1 - P0)
 * exactly when u stands for the weight of e3 (b1 x -0 and b2 x -0 are -0 for weights >= 0, and
 * x + -0 is x for every x, zeros included). A lane takes one 16-byte unit (half a curve) and
 * gets the other half from its neighbour by shuffles, so that a warp's loads and stores cover
 * consecutive units without bank conflicts; a thread per curve (64 bytes apart) took 16
 * wavefronts where 4 carry the data (ncu, H200, 2026-11-28). The tile group synchronizes after
 * the call, before the loop reads the staging. Units of curves at or past C are read (junk)
 * and left alone; P0 stays where it was, so a skipped curve's first point is read as any. */
template <class S> __device__ __forceinline__ void tile_offsets(S &s, int C, uint32_t big)
{
    const int t = (int)tile_tid();
#pragma unroll
    for (int k = 0; k < 2 * kC / kT; k++) {
        const int u = t + k * kT; /* kT is even: u's parity is the lane's */
        const int j = u >> 1, h = u & 1;
        float4 *const unit = &s.cp[cp_unit(j) + h];
        const float4 mine = *unit;
        float4 other;
        other.x = __shfl_xor_sync(0xffffffffu, mine.x, 1);
        other.y = __shfl_xor_sync(0xffffffffu, mine.y, 1);
        other.z = __shfl_xor_sync(0xffffffffu, mine.z, 1);
        other.w = __shfl_xor_sync(0xffffffffu, mine.w, 1);
        const int d = grove__bz_degree(s.deg[j]);
        /* big = ~0u: every curve (s.off is not read) */
        if (j < C && (big == 0xffffffffu || s.off[j + 1] - s.off[j] < big)) {
            const float4 lo = h ? other : mine, hi = h ? mine : other;
            const float c[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
            float ex[3], ey[3];
            grove__bz_offsets(c, d, 0, ex);
            grove__bz_offsets(c, d, 1, ey);
            if (d == 1)
                *unit = h == 0 ? make_float4(c[0], c[1], -0.0f, -0.0f)
                               : make_float4(-0.0f, -0.0f, c[2], c[3]);
            else if (h == 0)
                *unit = make_float4(c[0], c[1], ex[0], ey[0]);
            else
                *unit = d == 3 ? make_float4(ex[1], ey[1], c[6], c[7])
                               : make_float4(ex[1], ey[1], c[4], c[5]);
        }
    }
}

/* tile_write's default hook at its last chunk: nothing. */
struct NoLast {
    __device__ __forceinline__ void operator()() const {}
};

/* The shape of tile_write's chunks of kPer vertices a thread (8, 16, 32 or 64): kV vertices a
 * chunk, kW flag words a buffer; the slots are counted in groups of kG (a thread's kPer slots
 * up to 32, part of a flag word; else flag words), kGT groups a thread. */
template <int kPer> struct ChunkShape {
    static_assert(kPer == 8 || kPer == 16 || kPer == 32 || kPer == 64,
                  "chunks of 8, 16, 32 or 64 vertices a thread");
    static constexpr uint32_t kV = kT * kPer;
    static constexpr int kW = (int)(kV / 32);
    static constexpr int kG = kPer < 32 ? kPer : 32;
    static constexpr int kGT = kPer / kG;
    static_assert(kGT == 1 || kGT == 2, "one or two counting groups a thread");
};

/* tile_write's first part, before its chunks: each curve's record and parameter step, and the
 * staging rewritten into the cubic form's offsets (tile_offsets). Needs s.off[0..C] filled and a
 * barrier of the tile group since; the tile group synchronizes before the records are read (the
 * chunk head's barriers). */
template <class S> __device__ __forceinline__ void tile_prep(S &s, int C, uint32_t big)
{
    const unsigned t = tile_tid();
    static_assert(kCPT == 2, "a thread's offsets and records are read and written as pairs");
    {
        /* a thread's two curves and the next (for its skip bit): their offsets with one 8-byte
         * load and two words, their records with one 16-byte store (2-way conflicts as single
         * words at a lane stride of 2). Curves at or past C give junk that is never used (the
         * reads stay inside off[0..kC] and deg[0..kC]). */
        const int j0 = (int)t * kCPT;
        const uint2 o01 = *reinterpret_cast<const uint2 *>(&s.off[j0]);
        const uint32_t oe[4] = {o01.x, o01.y, s.off[j0 + 2], j0 + 3 <= kC ? s.off[j0 + 3] : 0u};
        uint32_t ry[kCPT + 1];
#pragma unroll
        for (int k = 0; k <= kCPT; k++) {
            const int j = j0 + k;
            const uint32_t m = oe[k + 1] - oe[k];
            const int d = grove__bz_degree(s.deg[j]);
            const bool tab = m < big;
            ry[k] = m | (d == 1 ? kRecLine : 0u) | (tab ? 0u : kRecSkip);
            if (k < kCPT && j < C) s.step[j] = tab ? grove__bz_step(m) : 0.0f;
        }
        /* a record past C (the second of an odd tail) holds junk and is never read */
#pragma unroll
        for (int k = 0; k < kCPT; k++) ry[k] |= (ry[k + 1] & kRecSkip) ? kRecSkipN : 0u;
        if (j0 < C) *reinterpret_cast<uint4 *>(&s.rec[j0]) = make_uint4(oe[0], ry[0], oe[1], ry[1]);
    }
    tile_offsets(s, C, big);
}

/* A chunk head of tile_write: the curves starting in chunk q (slots q .. q + kT kPer) set their
 * slot's bit in flag buffer b, a block-wide count gives each counting group the curves started
 * before it (s.excl[b]), and the other buffer's flags are cleared for the next chunk. Three
 * barriers of the tile group; the last makes everything written before the call visible. */
template <int kPer, bool kNamed, class S>
__device__ __forceinline__ void tile_head(S &s, int C, uint32_t q, int b)
{
    using Sh = ChunkShape<kPer>;
    constexpr uint32_t kV = Sh::kV;
    constexpr int kGT = Sh::kGT, kW = Sh::kW;
    const unsigned t = tile_tid(), lane = t & 31u, w = t >> 5;
    {
        const uint2 o01 = *reinterpret_cast<const uint2 *>(&s.off[t * kCPT]);
#pragma unroll
        for (int k = 0; k < kCPT; k++) {
            const uint32_t o = k == 0 ? o01.x : o01.y;
            if ((int)t * kCPT + k < C && o >= q && o - q < kV)
                atomicOr(&s.flag[b][(o - q) >> 5], 1u << ((o - q) & 31u));
        }
    }
    tile_sync<kNamed>();
    uint32_t c0, cnt;
    if constexpr (kGT == 1) {
        c0 = (uint32_t)__popc((s.flag[b][(t * kPer) >> 5] >> ((t * kPer) & 31u)) &
                              (~0u >> (32 - kPer)));
        cnt = c0;
    } else {
        const uint2 fw = *reinterpret_cast<const uint2 *>(&s.flag[b][2 * t]);
        c0 = (uint32_t)__popc(fw.x);
        cnt = c0 + (uint32_t)__popc(fw.y);
    }
    uint32_t x = cnt;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const uint32_t y = __shfl_up_sync(0xffffffffu, x, d);
        if (lane >= (unsigned)d) x += y;
    }
    if (lane == 31) s.wt[b][w] = x;
    tile_sync<kNamed>();
    uint32_t pre = x - cnt;
    for (unsigned i = 0; i < w; i++) pre += s.wt[b][i];
    /* the next buffer's flags were last read in the previous chunk */
    if constexpr (kGT == 1) {
        s.excl[b][t] = pre;
        if (t < (unsigned)kW) s.flag[b ^ 1][t] = 0;
    } else {
        *reinterpret_cast<uint2 *>(&s.excl[b][2 * t]) = make_uint2(pre, pre + c0);
        *reinterpret_cast<uint2 *>(&s.flag[b ^ 1][2 * t]) = make_uint2(0u, 0u);
    }
    tile_sync<kNamed>();
}

/* Writes the vertices of the staged tile (s.off[0..C] filled, a barrier of the tile group since):
 * global vertex index vbase + relative offset. Vertices at index >= cap are not written, nor those
 * of curves with m >= big (the cdp variant gives those a child grid of their own). kAligned: d_xy
 * is 8-byte aligned; the pairs then start one vertex early when needed so that a pair's first
 * vertex is 16-byte aligned. The main loop has no branch on the curve: it writes every curve
 * of m < big (all in the cubic form's staging, a line's weight of e3 chosen by a select). Until
 * 2026-11-28 lines and curves of 2 vertices were left to a slow pass after the loop, a warp per
 * curve (1.8x the time of the whole call when half the curves were lines). kSkip false: the
 * caller passes big = ~0u (no curve skipped), so the loop drops the skip bits' tests and a full
 * chunk's pairs store without a branch. on_last: called by every thread at the start of the
 * tile's last chunk (flat takes its next tile there). All threads call it. kPre: the caller
 * has run tile_prep and the first chunk's head (tile_head, q = 0, buffer 0) already, so that
 * they can overlap its wait for the tile's prefix (vbase).
 */
template <bool kAligned, int kPer, bool kNamed = false, bool kSkip = true, bool kPre = false,
          class S, class L = NoLast>
__device__ __forceinline__ void tile_write(S &s, int C, u64 vbase, u64 cap, uint32_t big,
                                           float *__restrict__ xy, L on_last = L())
{
    static_assert(kPer <= S::kPerMax, "the staging's chunk flags hold kT kPer bits");
    /* with kPre the first chunk's head ran before the call: a hook at the last chunk's start
     * would come after it */
    static_assert(!kPre || std::is_same<L, NoLast>::value, "kPre takes no on_last hook");
    using Sh = ChunkShape<kPer>;
    constexpr uint32_t kV = Sh::kV;
    constexpr int kG = Sh::kG, kGT = Sh::kGT, kW = Sh::kW;
    const unsigned t = tile_tid();
    const uint32_t A = s.off[C];
    const uint32_t lim = cap <= vbase ? 0u : (cap - vbase < (u64)A ? (uint32_t)(cap - vbase) : A);
    if (lim == 0) return; /* the same for the whole block */
    const int sh = kAligned ? (int)((((uintptr_t)(xy + 2 * vbase)) >> 3) & 1u) : 0;
    float *const xt = xy + 2 * vbase;
    if constexpr (!kPre) tile_prep(s, C, big);
    int prev = -1; /* the curve of the slot before the chunk */
    int b = 0;
    for (uint32_t q = 0; q < lim + (uint32_t)sh; q += kV, b ^= 1) {
        if (q + kV >= lim + (uint32_t)sh) on_last(); /* every thread, at the last chunk */
        /* with kPre the caller ran the first chunk's head */
        if (!kPre || q != 0) tile_head<kPer, kNamed>(s, C, q, b);
        /* the pair of step r: slots sa0 + 2 kT r, vertices ra0 + 2 kT r, stored at d0 + 4 kT r */
        const int sa0 = 2 * (int)t - sh, ra0 = (int)q + sa0;
        float *const d0 = xt + 2 * (ptrdiff_t)ra0;
        /* 2 kT r is a multiple of kG and of 32: every step's slot has the same place in its
         * group and word (tile_curve); sa0 = -1 (only the first pair of a tile when sh = 1) gives
         * g0 = w0 = -1 (arithmetic shifts), right for r >= 1, unused for r = 0 */
        constexpr int kL = kG == 32 ? 5 : kG == 16 ? 4 : 3; /* log2 kG */
        const int g0 = sa0 >> kL, w0 = sa0 >> 5;
        const uint32_t gsh = (uint32_t)(g0 * kG) & 31u;
        const uint32_t low = (2u << ((uint32_t)sa0 & (kG - 1u))) - 1u;
        /* The steps run kU at a time, unrolled (a step's loads and store at constant offsets
         * from its run's bases), the runs in a loop: chunks of 32 vertices a thread have half
         * the chunk heads (flags, block count, three barriers) of chunks of 16 with the same
         * code size, and chunks of 64 (flat's since 2026-11-29) hold a whole tile of curves of
         * up to 32 vertices (the default maximum), one chunk head a tile where 32 took two
         * (the second for the tile's last few hundred vertices): 10^7 bench curves on the
         * H200 0.533-0.537 ms against 0.546-0.551. hb: the run's first step (0 for kPer <= 16). */
        constexpr int kU = kPer / 2 < 8 ? kPer / 2 : 8;
        int hb = 0;
        /* step hb + r's pair; full: the run lies below lim, so no step needs a bounds check */
        float *dr = d0; /* the run's first store: d0 + 4 kT hb */
        int rar = ra0;  /* the run's first vertex: ra0 + 2 kT hb */
        auto step = [&](const int r, const bool full) {
            const int rr = hb + r;
            const int sa = sa0 + 2 * kT * rr; /* slot of the first vertex, >= -1 */
            const int ra = rar + 2 * kT * r;
            /* ra = -1 only for the tile's first pair when sh = 1 (step 0, prev = -1): the first
             * vertex is not written, the second is vertex 0 of curve 0 */
            const bool before = r == 0 && hb == 0 && ra < 0;
            int ja;
            if (r == 0 && hb == 0) {
                ja = sa < 0 ? prev
                            : tile_curve(s, b, prev, g0 < 0 ? 0 : g0, w0 < 0 ? 0 : w0, gsh, low);
                ja = ja < 0 ? 0 : ja; /* -1 only here: the tile's first pair when sh = 1 */
            } else {
                ja = tile_curve(s, b, prev, g0 + 2 * kT / kG * rr, w0 + 2 * kT / 32 * rr, gsh, low);
            }
            /* not clamped to C - 1: jn = C only when the pair's second vertex is past the tile's
             * last (at or past lim, never written), and cp has room for curve C */
            const int jn = ja + 1;
            const int ua = cp_unit(ja);
            const float4 ca = s.cp[ua], cb = s.cp[ua + 1];
            const float2 pn = *reinterpret_cast<const float2 *>(&s.cp[cp_unit(jn)]);
            const uint2 rc = s.rec[ja];
            const float rs = s.step[ja];
            const uint32_t m = rc.y & kRecM;
            const uint32_t ia = before ? ~0u : (uint32_t)ra - rc.x;
            const bool same = ia + 1u < m; /* else the second is the next curve's first */
            float4 p;
            tile_pair(ca, cb, rs, m, ia, (rc.y & kRecLine) != 0u, r == 0 && hb == 0, p);
            if (!same) p.z = pn.x, p.w = pn.y;
            /* the skip bit of the second vertex's curve, moved to bit 31 when that is the next */
            static_assert(kRecSkipN << 7 == kRecSkip, "the next curve's skip bit");
            const uint32_t y2 = same ? rc.y : rc.y << 7;
            const bool wa = !before && (!kSkip || (int)rc.y >= 0);
            const bool wb = (full || ra + 1 < (int)lim) && (!kSkip || (int)y2 >= 0);
            float *const dst = dr + 4 * kT * r; /* a constant offset a step in a run */
            if (kAligned && wa && wb) {
                st_v4(dst, p);
            } else if (kAligned) {
                if (wa) st_v2(dst, p.x, p.y);
                if (wb) st_v2(dst + 2, p.z, p.w);
            } else {
                if (wa) dst[0] = p.x, dst[1] = p.y;
                if (wb) dst[2] = p.z, dst[3] = p.w;
            }
        };
        /* a run whose pairs all lie below lim (the same for the whole block) takes the steps
         * without bounds checks; the first that does not checks each step and ends the chunk
         * at lim (so a chunk of 64 vertices a thread, which holds a whole tile of up to 32
         * vertices a curve, writes such a tile's vertices in the unchecked runs but the last) */
        bool end = false;
#pragma unroll 1
        for (hb = 0; hb < kPer / 2 && !end; hb += kU, dr += 4 * kT * kU, rar += 2 * kT * kU) {
            if (q + (uint32_t)(2 * kT * (hb + kU)) <= lim) {
                /* no branch between a run's steps: their shared loads can all be issued early */
#pragma unroll
                for (int r = 0; r < kU; r++) step(r, true);
            } else {
#pragma unroll
                for (int r = 0; r < kU; r++) {
                    if (rar + 2 * kT * r >= (int)lim) {
                        end = true;
                        break;
                    }
                    step(r, false);
                }
            }
        }
        prev += (int)(s.excl[b][kT * kGT - 1] + (uint32_t)__popc(s.flag[b][kW - 1] >> (32 - kG)));
    }
}

} // namespace grove_bzk
#endif /* __CUDACC__ */

#endif /* GROVE_BEZIER_INTERNAL_H */
