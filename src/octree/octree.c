/*
 * octree.c - public entry points of the octree module: option and point checks, the cube, the
 * build dispatch to the CPU backend (octree_cpu.c) or the CUDA backend (octree_cuda.cu), the
 * device-resident tree, destroy and the accessors. The queries are in octree_query.c, the files
 * in octree_potree.c (Potree output), octree_load.c (grove.octree), octree_export.c (Potree
 * read-back) and octree_json.c.
 *
 * Every check happens here, before any backend runs, so both backends fail alike; the tree
 * itself is a function of the grid coordinates only (octree.h), so both give the same bytes.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "octree_internal.h"
#ifdef GROVE_HAVE_CUDA
#include "core_cuda.h"
#include "octree_cuda.h"
#endif

double grove__ot_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

void grove_octree_default_opts(grove_octree_opts *opts)
{
    if (!opts) return;
    memset(opts, 0, sizeof *opts);
    opts->max_points = 50000;
    opts->batch = 8388608;
    opts->max_depth = 20;
    opts->lod_grid = 128;
}

int grove__ot_log2_grid(int lod_grid)
{
    int g = 0;
    while (lod_grid > 1) {
        lod_grid >>= 1;
        g++;
    }
    return g;
}

grove_status grove__ot_check_opts(grove_ctx *ctx, const grove_octree_opts *opts,
                                  grove_octree_opts *out)
{
    grove_octree_opts o;
    int g, limit;
    if (opts)
        o = *opts;
    else
        grove_octree_default_opts(&o);
    if (o.max_points < 1)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "octree options: opts->max_points must be >= 1, got %u", o.max_points);
    if (o.batch < 1)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "octree options: opts->batch must be >= 1, got %zu", o.batch);
    if (o.lod_grid != 0 &&
        (o.lod_grid < 2 || o.lod_grid > 1024 || (o.lod_grid & (o.lod_grid - 1)) != 0))
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "octree options: opts->lod_grid must be 0 or a power of two 2..1024, "
                            "got %d",
                            o.lod_grid);
    g = grove__ot_log2_grid(o.lod_grid);
    limit = GROVE_OCTREE_BITS - g;
    if (o.max_depth < 0 || o.max_depth > limit)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "octree options: opts->max_depth must be 0..%d (30 - log2(lod_grid = "
                            "%d)), got %d",
                            limit, o.lod_grid, o.max_depth);
    *out = o;
    return GROVE_OK;
}

grove_status grove_octree_check_opts(grove_ctx *ctx, const grove_octree_opts *opts)
{
    grove_octree_opts o;
    GROVE_TRY(grove__check_ctx(ctx));
    return grove__ot_check_opts(ctx, opts, &o);
}

void grove__ot_cube_from_box(const double lo[3], const double hi[3], grove_octree *t)
{
    double side = 0.0;
    for (int a = 0; a < 3; a++) {
        double e = hi[a] - lo[a];
        if (e > side) side = e;
        t->lo[a] = lo[a] + 0.0; /* -0 as +0, whoever computed the box */
    }
    if (side == 0.0) side = 1.0;
    t->side = side;
    t->to_grid = (double)(1u << GROVE_OCTREE_BITS) / side;
}

/* Checks every coordinate and computes the box. In parallel: the first bad point is the
 * smallest index, whichever thread finds it. */
static grove_status check_points(grove_ctx *ctx, const char *fn, const double *xyz, size_t n,
                                 double lo[3], double hi[3])
{
    size_t bad = SIZE_MAX;
    double l0 = INFINITY, l1 = INFINITY, l2 = INFINITY;
    double h0 = -INFINITY, h1 = -INFINITY, h2 = -INFINITY;
    int nt = grove__threads(ctx);
#pragma omp parallel for num_threads(nt) schedule(static) if (n > 65536)                           \
    reduction(min : bad, l0, l1, l2) reduction(max : h0, h1, h2)
    for (size_t i = 0; i < n; i++) {
        double x = xyz[3 * i], y = xyz[3 * i + 1], z = xyz[3 * i + 2];
        if (!isfinite(x) || !isfinite(y) || !isfinite(z)) {
            bad = i < bad ? i : bad;
            continue;
        }
        l0 = x < l0 ? x : l0;
        l1 = y < l1 ? y : l1;
        l2 = z < l2 ? z : l2;
        h0 = x > h0 ? x : h0;
        h1 = y > h1 ? y : h1;
        h2 = z > h2 ? z : h2;
    }
    if (bad != SIZE_MAX)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: point %zu has a non-finite coordinate (%.17g, %.17g, %.17g)", fn,
                            bad, xyz[3 * bad], xyz[3 * bad + 1], xyz[3 * bad + 2]);
    if (n == 0) {
        lo[0] = lo[1] = lo[2] = 0.0;
        hi[0] = hi[1] = hi[2] = 0.0;
        return GROVE_OK;
    }
    /* + 0.0 turns -0 into +0: which zero a min keeps depends on the order of the comparisons,
     * and the cube must not depend on that. */
    lo[0] = l0 + 0.0;
    lo[1] = l1 + 0.0;
    lo[2] = l2 + 0.0;
    hi[0] = h0 + 0.0;
    hi[1] = h1 + 0.0;
    hi[2] = h2 + 0.0;
    for (int a = 0; a < 3; a++)
        if (!isfinite(hi[a] - lo[a]))
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: the points' extent on axis %c (%.17g .. %.17g) overflows a "
                                "double",
                                fn, "xyz"[a], lo[a], hi[a]);
    return GROVE_OK;
}

static grove_status new_tree(grove_ctx *ctx, const char *fn, const grove_octree_opts *o, size_t n,
                             grove_octree **out)
{
    grove_octree *t = (grove_octree *)calloc(1, sizeof *t);
    if (!t) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    t->opts = *o;
    t->n = n;
    *out = t;
    return GROVE_OK;
}

/* The arguments both builds share: out (set to NULL), the point count, the points, the
 * options. */
static grove_status check_args(grove_ctx *ctx, const char *fn, const char *name, const double *p,
                               size_t n, const grove_octree_opts *opts, grove_octree **out,
                               grove_octree_opts *o)
{
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (n > (size_t)GROVE_OCTREE_MAX_N)
        return grove__error(ctx, GROVE_ERR_LIMIT, "%s: n = %zu exceeds the limit of %u points", fn,
                            n, GROVE_OCTREE_MAX_N);
    if (n > 0 && !p)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s is NULL with n = %zu", fn, name,
                            n);
    return grove__ot_check_opts(ctx, opts, o);
}

/* Hands the built tree out (or frees it). The backends report progress through t->opts during
 * the build; the stored options keep no pointer to the caller's callback afterwards. */
static grove_status finish_build(grove_status st, grove_octree *t, grove_octree_stats *s,
                                 double t0, grove_octree_stats *stats, grove_octree **out)
{
    t->opts.progress = NULL;
    t->opts.progress_user = NULL;
    if (st != GROVE_OK) {
        grove_octree_destroy(t);
        return st;
    }
    s->ms_total = grove__ot_now_ms() - t0;
    if (stats) *stats = *s;
    *out = t;
    return GROVE_OK;
}

#ifdef GROVE_HAVE_CUDA
/* The CUDA build from host memory does not keep the points on the device: the entries'
 * coordinates are copied from the input here, by all threads (a single thread took seconds at
 * 10^8 points: every entry is a cache miss into the input). */
static void gather_xyz(grove_ctx *ctx, grove_octree *t, const double *xyz, grove_octree_stats *s)
{
    const double t0 = grove__ot_now_ms();
    const size_t ne = t->num_entries;
    const uint32_t *idx = t->index;
    double *dst = t->xyz;
    int nt = grove__threads(ctx);
#pragma omp parallel for num_threads(nt) schedule(static) if (ne > 65536)
    for (size_t e = 0; e < ne; e++) {
        const double *src = xyz + 3 * (size_t)idx[e];
        dst[3 * e] = src[0];
        dst[3 * e + 1] = src[1];
        dst[3 * e + 2] = src[2];
    }
    s->ms_place += grove__ot_now_ms() - t0;
}
#endif

grove_status grove_octree_build(grove_ctx *ctx, const double *xyz, size_t n,
                                const grove_octree_opts *opts, grove_octree **out,
                                grove_octree_stats *stats)
{
    static const char fn[] = "grove_octree_build";
    grove_octree_opts o;
    grove_octree_stats s;
    grove_octree *t = NULL;
    grove_status st;
    double lo[3], hi[3], t0 = grove__ot_now_ms();

    GROVE_TRY(grove__check_ctx(ctx));
    GROVE_TRY(check_args(ctx, fn, "xyz", xyz, n, opts, out, &o));
    GROVE_TRY(check_points(ctx, fn, xyz, n, lo, hi));
    GROVE_TRY(new_tree(ctx, fn, &o, n, &t));
    grove__ot_cube_from_box(lo, hi, t);
    memset(&s, 0, sizeof s);
    if (ctx->backend == GROVE_BACKEND_CUDA) {
#ifdef GROVE_HAVE_CUDA
        st = grove__ot_build_cuda(ctx, xyz, t, &s);
        /* a build that fell back to the host has its coordinates */
        if (st == GROVE_OK && s.host_fallback == 0) gather_xyz(ctx, t, xyz, &s);
#else
        st = grove__error(ctx, GROVE_ERR_UNSUPPORTED, "%s: built without the CUDA backend", fn);
#endif
    } else {
        st = grove__ot_build_cpu(ctx, xyz, t, &s);
    }
    return finish_build(st, t, &s, t0, stats, out);
}

grove_status grove_octree_build_device(grove_ctx *ctx, const double *d_xyz, size_t n,
                                       const grove_octree_opts *opts, grove_octree **out,
                                       grove_octree_stats *stats)
{
    static const char fn[] = "grove_octree_build_device";
    grove_octree_opts o;
    GROVE_TRY(grove__check_ctx(ctx));
    if (out) *out = NULL;
    if (out && ctx->backend != GROVE_BACKEND_CUDA)
        return grove__error(ctx, GROVE_ERR_UNSUPPORTED, "%s: needs a CUDA context", fn);
    GROVE_TRY(check_args(ctx, fn, "d_xyz", d_xyz, n, opts, out, &o));
#ifdef GROVE_HAVE_CUDA
    {
        grove_octree_stats s;
        grove_octree *t = NULL;
        double t0 = grove__ot_now_ms();
        GROVE_TRY(grove__cuda_use(ctx));
        GROVE_TRY(new_tree(ctx, fn, &o, n, &t));
        memset(&s, 0, sizeof s);
        /* The points are on the device: the CUDA build finds their box itself (t->side is 0
         * here) and sets the cube with grove__ot_cube_from_box. */
        return finish_build(grove__ot_build_cuda_device(ctx, d_xyz, t, &s), t, &s, t0, stats,
                            out);
    }
#else
    (void)stats;
    return grove__error(ctx, GROVE_ERR_UNSUPPORTED, "%s: built without the CUDA backend", fn);
#endif
}

grove_status grove_octree_download(grove_ctx *ctx, grove_octree *t)
{
    static const char fn[] = "grove_octree_download";
    GROVE_TRY(grove__check_ctx(ctx));
    if (!t) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: t is NULL", fn);
    if (t->nodes) return GROVE_OK;
    if (t->dev_ctx != ctx)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: the tree's device arrays belong to another context", fn);
#ifdef GROVE_HAVE_CUDA
    GROVE_TRY(grove__cuda_use(ctx));
    return grove__ot_download_cuda(ctx, t);
#else
    return grove__error(ctx, GROVE_ERR_INTERNAL, "%s: a device tree without the CUDA backend", fn);
#endif
}

void grove_octree_destroy(grove_octree *t)
{
    if (!t) return;
#ifdef GROVE_HAVE_CUDA
    grove__ot_free_device(t);
#endif
    free(t->nodes);
    free(t->index);
    free(t->xyz);
    free(t);
}

size_t grove_octree_num_nodes(const grove_octree *t) { return t ? t->num_nodes : 0; }
const grove_octree_node *grove_octree_nodes(const grove_octree *t) { return t ? t->nodes : NULL; }
size_t grove_octree_num_points(const grove_octree *t) { return t ? t->n : 0; }
size_t grove_octree_num_entries(const grove_octree *t) { return t ? t->num_entries : 0; }
const uint32_t *grove_octree_entry_index(const grove_octree *t) { return t ? t->index : NULL; }
const double *grove_octree_entry_xyz(const grove_octree *t) { return t ? t->xyz : NULL; }
int grove_octree_depth(const grove_octree *t) { return t ? t->depth : 0; }

void grove_octree_cube(const grove_octree *t, double lo[3], double *side)
{
    for (int a = 0; a < 3; a++)
        if (lo) lo[a] = t ? t->lo[a] : 0.0;
    if (side) *side = t ? t->side : 1.0;
}

void grove_octree_get_opts(const grove_octree *t, grove_octree_opts *opts)
{
    if (!opts) return;
    if (!t) {
        grove_octree_default_opts(opts);
        return;
    }
    *opts = t->opts;
}
