/*
 * bezier.h - adaptive tessellation of 2-D Bezier curves (lines, quadratics, cubics) into one
 * polyline per curve, on the CPU or the GPU; curve files (text, SVG paths) in, CSV and SVG out.
 *
 * A curve of degree d (1, 2 or 3) has d + 1 control points P0..Pd. It is tessellated into
 * m >= 2 vertices at the parameters u_i = i / (m - 1), i = 0..m-1 (in float: i times the
 * rounded 1 / (m - 1)): vertex 0 is P0 and vertex m-1 is Pd exactly; the vertices between are
 * B(u_i) evaluated in float as P0 plus the Bernstein-weighted offsets of P1..Pd from P0 (a
 * quadratic through its elevation to a cubic), so that a curve of equal points is that point
 * (docs/bezier.md gives the exact operations). Every backend and variant performs the same IEEE
 * operations, its fused multiply-adds written out, so the CPU and the GPU give the same bytes.
 *
 * The vertex count m of a curve (docs/bezier.md has the exact arithmetic, done in double):
 *   GROVE_BEZIER_CURVATURE (the classic heuristic): c = the largest distance of an inner control
 *     point from the chord line P0-Pd (from P0 when P0 == Pd; 0 for a line);
 *     m = clamp(floor(c * curvature_scale), min_points, max_points).
 *   GROVE_BEZIER_TOLERANCE: the fewest segments s with d (d - 1) M / (8 s^2) <= tolerance,
 *     M = max_i |P(i+2) - 2 P(i+1) + P(i)| (the bound on the distance between a curve and the
 *     polyline through its uniform samples); m = clamp(s + 1, 2, max_points). A line is 2
 *     vertices. When max_points caps m the tolerance may not be met; the result says how many
 *     curves were capped.
 *
 * Output layout: one vertex buffer for all curves, curve c's vertices at
 * xy[2*offsets[c] .. 2*offsets[c+1]-1] (x, y interleaved), offsets exclusive-scanned counts.
 */
#ifndef GROVE_BEZIER_H
#define GROVE_BEZIER_H

#include "grove/grove.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GROVE_BEZIER_MAX_POINTS 4096 /* the largest max_points */
/* The largest control-point coordinate magnitude accepted (larger is bad input): below it no
 * step of the evaluation overflows float, whose largest value is about 3.4e38. */
#define GROVE_BEZIER_MAX_COORD 1e38f

/* n curves. cp holds 8 floats per curve, x0 y0 x1 y1 x2 y2 x3 y3: a curve of degree d uses the
 * first 2 (d + 1) and the rest are ignored (any value). degree[c] is 1, 2 or 3. */
typedef struct grove_curves {
    float *cp;       /* 8 * n floats; NULL when n == 0 */
    uint8_t *degree; /* n entries */
    size_t n;
} grove_curves;

typedef enum grove_bezier_mode {
    GROVE_BEZIER_CURVATURE = 0,
    GROVE_BEZIER_TOLERANCE = 1
} grove_bezier_mode;

typedef enum grove_bezier_variant {
    GROVE_BEZIER_AUTO = 0, /* the faster of the two: flat at every size measured
                              (docs/bezier-gpu.md) */
    GROVE_BEZIER_CDP = 1,  /* CUDA: after the counts and offsets, a parent kernel (a thread per
                              curve) launches the child grids that write the vertices (dynamic
                              parallelism): one child per group of curves, and one per curve
                              of at least 1024 vertices */
    GROVE_BEZIER_FLAT = 2  /* CUDA: one single-pass kernel: count, scan (decoupled look-back)
                              and write, persistent blocks taking tiles of curves */
} grove_bezier_variant;

typedef struct grove_bezier_opts {
    grove_bezier_mode mode;       /* default GROVE_BEZIER_CURVATURE */
    int min_points;               /* curvature mode: 2..max_points; default 4 */
    int max_points;               /* 2..GROVE_BEZIER_MAX_POINTS; default 32 */
    double curvature_scale;       /* curvature mode: vertices per unit of c, > 0; default 16 */
    double tolerance;             /* tolerance mode: > 0, in input units; default 0.01 */
    grove_bezier_variant variant; /* CUDA backend only; the CPU backend ignores it */
} grove_bezier_opts;

/* Filled by the tessellation calls when not NULL. */
typedef struct grove_bezier_stats {
    grove_bezier_variant variant; /* the one that ran (FLAT or CDP; FLAT on the CPU backend) */
    uint64_t child_launches;      /* child grids launched (cdp), 0 otherwise */
    uint64_t capped;              /* curves whose count max_points (or min_points) clamped */
} grove_bezier_stats;

/* Tessellated curves. Owned; free with grove_polylines_free(). */
typedef struct grove_polylines {
    size_t n_curves;
    uint64_t n_vertices;
    uint64_t *offsets; /* n_curves + 1 */
    float *xy;         /* 2 * n_vertices; NULL when there are none */
} grove_polylines;

/*! grove_bezier_default_opts() : fills *opts with the defaults listed above. */
void grove_bezier_default_opts(grove_bezier_opts *opts);

/*! grove_bezier_tessellate() :
 *  Tessellates the curves in (borrowed). opts may be NULL for the defaults. *out is
 *  overwritten (zeroed on failure). n == 0 gives an empty result (offsets = {0}).
 *  @return GROVE_OK; GROVE_ERR_INVALID_ARG (NULL, an option out of range: the message names
 *  it); GROVE_ERR_BAD_INPUT (a degree not 1..3, or a control-point coordinate that is
 *  NaN, infinite or larger in magnitude than GROVE_BEZIER_MAX_COORD: the message names the
 *  curve); GROVE_ERR_LIMIT (more than UINT32_MAX - 1 curves; the cdp variant past
 *  the device's launch limits, only when asked for explicitly: AUTO runs flat); out of memory;
 *  device failures. */
grove_status grove_bezier_tessellate(grove_ctx *ctx, const grove_curves *in,
                                     const grove_bezier_opts *opts, grove_polylines *out,
                                     grove_bezier_stats *stats);

/*! grove_bezier_count_device() :
 *  CUDA backend, device memory: d_cp (8 * n floats) and d_degree (n) as in grove_curves.
 *  Writes the n + 1 offsets to d_offsets and the total vertex count to *total (host). The
 *  input is not validated here (grove_bezier_tessellate() does); non-finite control points
 *  give unspecified counts but no fault. Work is queued on the context's stream; when the call
 *  returns, its results are written and visible to any later work on any stream and to copies
 *  to the host (the call waits for its kernel's last block to report them through page-locked
 *  memory; that block may still be finishing, which only work queued on the same stream waits
 *  for; where the device was set to block or yield while waiting, the call waits for the stream
 *  instead). The context keeps a small device scratch from one Bezier call to the next (512
 *  bytes and 16 bytes a 512 curves: 0.3 MB for 10^7 curves), grown for the largest call,
 *  counted against device_mem_limit and freed with the context. */
grove_status grove_bezier_count_device(grove_ctx *ctx, const float *d_cp, const uint8_t *d_degree,
                                       size_t n, const grove_bezier_opts *opts,
                                       uint64_t *d_offsets, uint64_t *total);

/*! grove_bezier_tessellate_device() :
 *  CUDA backend, device memory: as grove_bezier_count_device(), then writes the vertices to
 *  d_xy, which holds `capacity` vertices (2 * capacity floats). If the total exceeds capacity,
 *  the call returns GROVE_ERR_LIMIT, *total says how many are needed, d_offsets holds the
 *  offsets, and d_xy's first `capacity` vertices are unspecified (the single pass writes those
 *  below capacity while it counts; nothing at or past capacity is written). This is the call
 *  the benchmarks time.
 *  @return GROVE_OK, GROVE_ERR_UNSUPPORTED (CPU context), GROVE_ERR_LIMIT, device failures. */
grove_status grove_bezier_tessellate_device(grove_ctx *ctx, const float *d_cp,
                                            const uint8_t *d_degree, size_t n,
                                            const grove_bezier_opts *opts, uint64_t *d_offsets,
                                            float *d_xy, uint64_t capacity, uint64_t *total,
                                            grove_bezier_stats *stats);

/*! grove_polylines_free() : frees the arrays and zeroes the struct. Accepts NULL. */
void grove_polylines_free(grove_polylines *p);

/* ---- files ---- */

typedef enum grove_curve_format {
    GROVE_CURVES_AUTO = 0, /* .svg: SVG; anything else: text */
    GROVE_CURVES_TEXT = 1, /* one curve per line: 4 (line), 6 (quadratic) or 8 (cubic) numbers,
                              separated by whitespace and/or commas; '#' comments, blank lines */
    GROVE_CURVES_SVG = 2   /* the d attributes of <path> elements: M L H V Q T C S A Z in both
                              cases (arcs become cubics of at most 90 degrees), and the outlines
                              of the basic shapes (rect circle ellipse line polyline polygon), in
                              document order, and what <use> elements draw; content of <defs>,
                              <symbol>, <clipPath> ... not drawn in place; transform attributes
                              applied; any other path command is bad input naming the path */
} grove_curve_format;

/*! grove_curves_read() :
 *  Reads curves from path into *out (owned; free with grove_curves_free()). Curves are numbered
 *  in file order (SVG: document order of the paths, then segment order). Text errors name
 *  "FILE:LINE: ..."; SVG errors name the line and the path ("FILE:LINE: path 3 (id "x"): ...").
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG, GROVE_ERR_BAD_INPUT, GROVE_ERR_IO,
 *  GROVE_ERR_LIMIT (a text line over 1 MiB), GROVE_ERR_OUT_OF_MEMORY. */
grove_status grove_curves_read(grove_ctx *ctx, const char *path, grove_curve_format fmt,
                               grove_curves *out);

/*! grove_curves_free() : frees the arrays and zeroes the struct. Accepts NULL. */
void grove_curves_free(grove_curves *c);

/*! grove_polylines_write_csv() :
 *  Writes the header "curve,vertex,x,y" and one row per vertex (curve and vertex 0-based; x and
 *  y with 9 significant digits, so they read back bit-exact). Written to a temporary file and
 *  renamed over path; a failure leaves no partial file. */
grove_status grove_polylines_write_csv(grove_ctx *ctx, const grove_polylines *p, const char *path);

/*! grove_polylines_write_svg() :
 *  Draws the polylines (and, when curves is not NULL, their control points faintly) as an SVG
 *  picture fitted to width x height pixels, y pointing up (mathematical axes). Curves read from
 *  an SVG file have y pointing down; mirror them first to see them as a browser shows the
 *  file (`grove bezier` does). Same temporary-file rule. */
grove_status grove_polylines_write_svg(grove_ctx *ctx, const grove_polylines *p,
                                       const grove_curves *curves, int width, int height,
                                       const char *path);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_BEZIER_H */
