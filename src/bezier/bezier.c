/*
 * bezier.c - the tessellation entry points of bezier.h: option and input checks, dispatch to the
 * CPU backend (bezier_cpu.c) or the CUDA one (bezier_cuda.cu, bezier_cdp.cu). The file functions
 * are in bezier_io.c (reading, text files), bezier_svg.c (SVG input) and bezier_write.c (CSV and
 * SVG output).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bezier_internal.h"
#ifdef GROVE_HAVE_CUDA
#include "bezier_cuda.h"
#endif

void grove_bezier_default_opts(grove_bezier_opts *opts)
{
    if (!opts) return;
    memset(opts, 0, sizeof *opts);
    opts->mode = GROVE_BEZIER_CURVATURE;
    opts->min_points = 4;
    opts->max_points = 32;
    opts->curvature_scale = 16.0;
    opts->tolerance = 0.01;
    opts->variant = GROVE_BEZIER_AUTO;
}

void grove__bz_rule_from(const grove_bezier_opts *o, grove__bz_rule *r)
{
    r->mode = (int)o->mode;
    r->min_points = o->min_points;
    r->max_points = o->max_points;
    r->scale = o->curvature_scale;
    /* 0 past 2^60, where grove__bz_curv_floor_fast gives up anyway (and the conversion of a
     * double past FLT_MAX would be undefined) */
    r->scale_f = o->curvature_scale <= 0x1p60 ? (float)o->curvature_scale : 0.0f;
    r->tolerance = o->tolerance;
}

grove_status grove__bz_check_opts(grove_ctx *ctx, const char *fn, const grove_bezier_opts *o)
{
    if (o->mode != GROVE_BEZIER_CURVATURE && o->mode != GROVE_BEZIER_TOLERANCE)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: opts->mode is %d; must be GROVE_BEZIER_CURVATURE (0) or "
                            "GROVE_BEZIER_TOLERANCE (1)",
                            fn, (int)o->mode);
    if (o->max_points < 2 || o->max_points > GROVE_BEZIER_MAX_POINTS)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: opts->max_points is %d; must be 2..%d",
                            fn, o->max_points, GROVE_BEZIER_MAX_POINTS);
    if (o->mode == GROVE_BEZIER_CURVATURE) {
        if (o->min_points < 2 || o->min_points > o->max_points)
            return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                                "%s: opts->min_points is %d; must be 2..max_points (%d)", fn,
                                o->min_points, o->max_points);
        if (!(o->curvature_scale > 0.0) || !isfinite(o->curvature_scale))
            return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                                "%s: opts->curvature_scale is %g; must be finite and > 0", fn,
                                o->curvature_scale);
    } else if (!(o->tolerance > 0.0) || !isfinite(o->tolerance)) {
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: opts->tolerance is %g; must be finite and > 0", fn, o->tolerance);
    }
    if (o->variant != GROVE_BEZIER_AUTO && o->variant != GROVE_BEZIER_CDP &&
        o->variant != GROVE_BEZIER_FLAT)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: opts->variant is %d; must be GROVE_BEZIER_AUTO (0), _CDP (1) or "
                            "_FLAT (2)",
                            fn, (int)o->variant);
    return GROVE_OK;
}

/* 1 when curve p of degree d is bad: the degree is not 1..3, or a control point it uses is not
 * finite or larger in magnitude than GROVE_BEZIER_MAX_COORD (!(|x| <= max) holds for both).
 * Branch-free over the 8 floats, so that the pass over all curves vectorizes. */
static int curve_bad(const float *p, int d)
{
    int bad = (unsigned)(d - 1) > 2u;
    const int used = bad ? 0 : 2 * (d + 1);
    for (int k = 0; k < 8; k++) bad |= (k < used) & !(fabsf(p[k]) <= GROVE_BEZIER_MAX_COORD);
    return bad;
}

grove_status grove__bz_check_curves(grove_ctx *ctx, const char *fn, const grove_curves *in)
{
    /* one parallel pass finds the first bad curve (the smallest index); only that curve is
     * looked at again, to say what is wrong with it */
    const long long n = (long long)in->n;
    long long first = n, i;
#pragma omp parallel for num_threads(grove__threads(ctx)) schedule(static) reduction(min : first)
    for (i = 0; i < n; i++)
        if (curve_bad(in->cp + 8 * (size_t)i, in->degree[i]) && i < first) first = i;
    if (first == n) return GROVE_OK;
    const size_t c = (size_t)first;
    const int d = in->degree[c];
    const float *p = in->cp + 8 * c;
    if (d < 1 || d > 3)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT, "%s: curve %zu: degree %d; must be 1, 2 or 3",
                            fn, c, d);
    for (int k = 0; k < 2 * (d + 1); k++) {
        if (!isfinite(p[k]))
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: curve %zu: control point %d has a non-finite %s "
                                "coordinate (%g)",
                                fn, c, k / 2, (k & 1) ? "y" : "x", (double)p[k]);
        if (fabsf(p[k]) > GROVE_BEZIER_MAX_COORD)
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: curve %zu: control point %d has the %s coordinate %.9g, "
                                "larger in magnitude than %g (GROVE_BEZIER_MAX_COORD)",
                                fn, c, k / 2, (k & 1) ? "y" : "x", (double)p[k],
                                (double)GROVE_BEZIER_MAX_COORD);
    }
    return grove__error(ctx, GROVE_ERR_INTERNAL, "%s: curve %zu failed the input check unexplained",
                        fn, c);
}

static grove_status check_common(grove_ctx *ctx, const char *fn, const grove_bezier_opts *opts,
                                 grove_bezier_opts *o)
{
    GROVE_TRY(grove__check_ctx(ctx));
    if (opts)
        *o = *opts;
    else
        grove_bezier_default_opts(o);
    return grove__bz_check_opts(ctx, fn, o);
}

grove_status grove_bezier_tessellate(grove_ctx *ctx, const grove_curves *in,
                                     const grove_bezier_opts *opts, grove_polylines *out,
                                     grove_bezier_stats *stats)
{
    const char *fn = "grove_bezier_tessellate";
    grove_bezier_opts o;
    grove_status st;
    if (out) memset(out, 0, sizeof *out);
    if (stats) memset(stats, 0, sizeof *stats);
    GROVE_TRY(check_common(ctx, fn, opts, &o));
    if (!in || !out)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s is NULL", fn, !in ? "in" : "out");
    if (in->n > 0 && (!in->cp || !in->degree))
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: in->%s is NULL with n = %zu", fn,
                            !in->cp ? "cp" : "degree", in->n);
    if (in->n > GROVE__BZ_MAX_N)
        return grove__error(ctx, GROVE_ERR_LIMIT, "%s: %zu curves; at most %zu", fn, in->n,
                            GROVE__BZ_MAX_N);
    GROVE_TRY(grove__bz_check_curves(ctx, fn, in));
    if (stats) stats->variant = GROVE_BEZIER_FLAT;
#ifdef GROVE_HAVE_CUDA
    if (grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA)
        st = grove__bz_tessellate_cuda(ctx, in, &o, out, stats);
    else
#endif
        st = grove__bz_tessellate_cpu(ctx, in, &o, out, stats);
    if (st != GROVE_OK) {
        grove_polylines_free(out);
        if (stats) memset(stats, 0, sizeof *stats);
    }
    return st;
}

static grove_status check_device(grove_ctx *ctx, const char *fn, const float *d_cp,
                                 const uint8_t *d_degree, size_t n, const uint64_t *d_offsets,
                                 const uint64_t *total)
{
    if (grove_ctx_backend(ctx) != GROVE_BACKEND_CUDA)
        return grove__error(ctx, GROVE_ERR_UNSUPPORTED, "%s: needs a CUDA context", fn);
    if (!d_offsets || !total)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                            !d_offsets ? "d_offsets" : "total");
    if (n > 0 && (!d_cp || !d_degree))
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s is NULL with n = %zu", fn,
                            !d_cp ? "d_cp" : "d_degree", n);
    if (n > GROVE__BZ_MAX_N)
        return grove__error(ctx, GROVE_ERR_LIMIT, "%s: %zu curves; at most %zu", fn, n,
                            GROVE__BZ_MAX_N);
    return GROVE_OK;
}

grove_status grove_bezier_count_device(grove_ctx *ctx, const float *d_cp, const uint8_t *d_degree,
                                       size_t n, const grove_bezier_opts *opts, uint64_t *d_offsets,
                                       uint64_t *total)
{
    const char *fn = "grove_bezier_count_device";
    grove_bezier_opts o;
    GROVE_TRY(check_common(ctx, fn, opts, &o));
    GROVE_TRY(check_device(ctx, fn, d_cp, d_degree, n, d_offsets, total));
#ifdef GROVE_HAVE_CUDA
    return grove__bz_count_device_cuda(ctx, d_cp, d_degree, n, &o, d_offsets, total);
#else
    return grove__error(ctx, GROVE_ERR_UNSUPPORTED, "%s: built without CUDA", fn);
#endif
}

grove_status grove_bezier_tessellate_device(grove_ctx *ctx, const float *d_cp,
                                            const uint8_t *d_degree, size_t n,
                                            const grove_bezier_opts *opts, uint64_t *d_offsets,
                                            float *d_xy, uint64_t capacity, uint64_t *total,
                                            grove_bezier_stats *stats)
{
    const char *fn = "grove_bezier_tessellate_device";
    grove_bezier_opts o;
    if (stats) memset(stats, 0, sizeof *stats);
    GROVE_TRY(check_common(ctx, fn, opts, &o));
    GROVE_TRY(check_device(ctx, fn, d_cp, d_degree, n, d_offsets, total));
    if (capacity > 0 && !d_xy)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: d_xy is NULL with capacity %llu", fn,
                            (unsigned long long)capacity);
#ifdef GROVE_HAVE_CUDA
    return grove__bz_tessellate_device_cuda(ctx, d_cp, d_degree, n, &o, d_offsets, d_xy, capacity,
                                            total, stats);
#else
    return grove__error(ctx, GROVE_ERR_UNSUPPORTED, "%s: built without CUDA", fn);
#endif
}

void grove_polylines_free(grove_polylines *p)
{
    if (!p) return;
    free(p->offsets);
    free(p->xy);
    memset(p, 0, sizeof *p);
}
