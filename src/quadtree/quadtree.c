/*
 * quadtree.c - public entry points of the quadtree module: argument checks, the build dispatch
 * to the CPU builds (quadtree_cpu.c) or the CUDA builds (quadtree_cuda.cu, quadtree_cdp.cu), the
 * device-resident tree and the accessors. The queries are in quadtree_query.c, save and load in
 * quadtree_io.c.
 *
 * On a CUDA context grove_quadtree_build() uploads the points, builds on the device, and copies
 * the tree back; grove_quadtree_build_device() skips both copies and leaves the tree on the
 * device. Every backend and method gives the same bytes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quadtree_internal.h"
#ifdef GROVE_HAVE_CUDA
#include "core_cuda.h"
#include "quadtree_cuda.h"
#endif

void grove_quadtree_default_opts(grove_quadtree_opts *opts)
{
    if (!opts) return;
    memset(opts, 0, sizeof *opts);
    opts->max_depth = 16;
    opts->min_points = 16;
    opts->method = GROVE_QUADTREE_MORTON;
    opts->use_bbox = 0;
}

static grove_status check_opts(grove_ctx *ctx, const char *fn, const grove_quadtree_opts *o)
{
    const float *b = o->bbox;
    if (o->max_depth < 0 || o->max_depth > GROVE_QUADTREE_MAX_DEPTH)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: opts->max_depth must be 0..%d, got %d",
                            fn, GROVE_QUADTREE_MAX_DEPTH, o->max_depth);
    if (o->min_points < 0)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: opts->min_points must be >= 0, got %d",
                            fn, o->min_points);
    if (o->method != GROVE_QUADTREE_MORTON && o->method != GROVE_QUADTREE_RECURSIVE)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: opts->method must be GROVE_QUADTREE_MORTON or "
                            "GROVE_QUADTREE_RECURSIVE, got %d",
                            fn, (int)o->method);
    if (o->use_bbox != 0 && o->use_bbox != 1)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: opts->use_bbox must be 0 or 1, got %d",
                            fn, o->use_bbox);
    if (!o->use_bbox) return GROVE_OK;
    if (!isfinite(b[0]) || !isfinite(b[1]) || !isfinite(b[2]) || !isfinite(b[3]))
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: opts->bbox must be finite, got (%.9g, %.9g, %.9g, %.9g)", fn,
                            (double)b[0], (double)b[1], (double)b[2], (double)b[3]);
    if (!(b[0] <= b[2]) || !(b[1] <= b[3]))
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: opts->bbox is inverted (xmin > xmax or ymin > ymax): (%.9g, "
                            "%.9g, %.9g, %.9g)",
                            fn, (double)b[0], (double)b[1], (double)b[2], (double)b[3]);
    return GROVE_OK;
}

/* Checks every point (finite; inside the given box) and computes the root box. */
static grove_status check_points(grove_ctx *ctx, const char *fn, const grove_points *pts,
                                 const grove_quadtree_opts *o, float root[4])
{
    size_t dims = (size_t)pts->dims, n = pts->n, bad = SIZE_MAX;
    float lo_x = INFINITY, lo_y = INFINITY, hi_x = -INFINITY, hi_y = -INFINITY;
    const float *b = o->bbox;
    const int use_box = o->use_bbox;
    int nt = grove__threads(ctx);
    /* In parallel: the first bad index is the smallest one, whichever thread finds it. */
#pragma omp parallel for num_threads(nt) schedule(static) if (n > 65536)                           \
    reduction(min                                                                                  \
              : bad, lo_x, lo_y) reduction(max                                                     \
                                           : hi_x, hi_y)
    for (size_t i = 0; i < n; i++) {
        float x = pts->xyz[i * dims], y = pts->xyz[i * dims + 1];
        int ok = isfinite(x) && isfinite(y);
        if (ok && use_box) ok = !(x < b[0] || x > b[2] || y < b[1] || y > b[3]);
        if (!ok) {
            bad = i < bad ? i : bad;
        } else {
            lo_x = x < lo_x ? x : lo_x;
            lo_y = y < lo_y ? y : lo_y;
            hi_x = x > hi_x ? x : hi_x;
            hi_y = y > hi_y ? y : hi_y;
        }
    }
    if (bad != SIZE_MAX) {
        float x = pts->xyz[bad * dims], y = pts->xyz[bad * dims + 1];
        if (!isfinite(x) || !isfinite(y))
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: point %zu has a non-finite coordinate (x=%.9g, y=%.9g)", fn,
                                bad, (double)x, (double)y);
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: point %zu (x=%.9g, y=%.9g) lies outside opts->bbox (%.9g, %.9g, "
                            "%.9g, %.9g)",
                            fn, bad, (double)x, (double)y, (double)b[0], (double)b[1], (double)b[2],
                            (double)b[3]);
    }
    if (use_box) {
        memcpy(root, b, 4 * sizeof(float));
    } else if (n == 0) {
        root[0] = root[1] = root[2] = root[3] = 0.0f;
    } else {
        /* + 0.0f turns -0 into +0: which zero a min/max keeps depends on the order of the
         * comparisons, and the box must not depend on that (a parallel reduction, the GPU). */
        root[0] = lo_x + 0.0f;
        root[1] = lo_y + 0.0f;
        root[2] = hi_x + 0.0f;
        root[3] = hi_y + 0.0f;
    }
    return GROVE_OK;
}

#ifdef GROVE_HAVE_CUDA
static grove_status build_cuda(grove_ctx *ctx, const float *d_xyz, int dims, const float root[4],
                               grove_quadtree *t)
{
    if (t->opts.method == GROVE_QUADTREE_RECURSIVE)
        return grove__qt_build_recursive_cuda(ctx, d_xyz, dims, root, t);
    return grove__qt_build_morton_cuda(ctx, d_xyz, dims, root, t);
}
#endif

/* Copies the points to the device, builds there, copies the tree back and frees the device
 * arrays, so the tree is an ordinary host tree that does not depend on the context. */
static grove_status build_cuda_from_host(grove_ctx *ctx, const grove_points *pts,
                                         const float root[4], grove_quadtree *t)
{
#ifdef GROVE_HAVE_CUDA
    grove_status st = GROVE_OK;
    size_t bytes = pts->n * (size_t)pts->dims * sizeof(float);
    float *d_xyz = NULL;
    GROVE_TRY(grove__cuda_use(ctx));
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&d_xyz, bytes, ctx->stream, "the input points"));
    GROVE_TRY_END(st, grove__cuda_h2d(ctx, d_xyz, pts->xyz, bytes, ctx->stream));
    GROVE_TRY_END(st, build_cuda(ctx, d_xyz, pts->dims, root, t));
    grove__cuda_free(ctx, d_xyz, bytes, ctx->stream);
    d_xyz = NULL;
    st = grove_quadtree_download(ctx, t);
    grove__qt_free_device(t);
_end:
    grove__cuda_free(ctx, d_xyz, bytes, ctx->stream);
    return st;
#else
    (void)pts;
    (void)root;
    (void)t;
    return grove__error(ctx, GROVE_ERR_UNSUPPORTED, "quadtree: built without the CUDA backend");
#endif
}

grove_status grove_quadtree_build(grove_ctx *ctx, const grove_points *pts,
                                  const grove_quadtree_opts *opts, grove_quadtree **out)
{
    static const char fn[] = "grove_quadtree_build";
    grove_quadtree_opts o;
    grove_quadtree *t;
    grove_status st;
    float root[4];

    GROVE_TRY(grove__check_ctx(ctx));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!pts) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: pts is NULL", fn);
    if (pts->dims != 2 && pts->dims != 3)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: pts->dims must be 2 or 3, got %d", fn,
                            pts->dims);
    if (pts->n > (size_t)UINT32_MAX)
        return grove__error(ctx, GROVE_ERR_LIMIT, "%s: pts->n = %zu exceeds the limit of %u points",
                            fn, pts->n, UINT32_MAX);
    if (pts->n > 0 && !pts->xyz)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: pts->xyz is NULL with pts->n = %zu",
                            fn, pts->n);
    if (opts)
        o = *opts;
    else
        grove_quadtree_default_opts(&o);
    GROVE_TRY(check_opts(ctx, fn, &o));
    GROVE_TRY(check_points(ctx, fn, pts, &o, root));

    t = (grove_quadtree *)calloc(1, sizeof *t);
    if (!t) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    t->opts = o;
    t->opts.use_bbox = 1;
    memcpy(t->opts.bbox, root, sizeof root);
    t->n = pts->n;
    if (ctx->backend == GROVE_BACKEND_CUDA)
        st = build_cuda_from_host(ctx, pts, root, t);
    else if (o.method == GROVE_QUADTREE_RECURSIVE)
        st = grove__qt_build_recursive_cpu(ctx, pts, root, t);
    else
        st = grove__qt_build_morton_cpu(ctx, pts, root, t);
    if (st != GROVE_OK) {
        grove_quadtree_destroy(t);
        return st;
    }
    *out = t;
    return GROVE_OK;
}

grove_status grove_quadtree_build_device(grove_ctx *ctx, const float *d_xyz, size_t n, int dims,
                                         const grove_quadtree_opts *opts, grove_quadtree **out)
{
    static const char fn[] = "grove_quadtree_build_device";
    grove_quadtree_opts o;
    grove_quadtree *t;
    grove_status st = GROVE_OK;
    float root[4] = {0.0f, 0.0f, 0.0f, 0.0f};

    GROVE_TRY(grove__check_ctx(ctx));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (ctx->backend != GROVE_BACKEND_CUDA)
        return grove__error(ctx, GROVE_ERR_UNSUPPORTED, "%s: needs a CUDA context", fn);
    if (dims != 2 && dims != 3)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: dims must be 2 or 3, got %d", fn,
                            dims);
    if (n > (size_t)UINT32_MAX)
        return grove__error(ctx, GROVE_ERR_LIMIT, "%s: n = %zu exceeds the limit of %u points", fn,
                            n, UINT32_MAX);
    if (n > 0 && !d_xyz)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: d_xyz is NULL with n = %zu", fn, n);
    if (opts)
        o = *opts;
    else
        grove_quadtree_default_opts(&o);
    GROVE_TRY(check_opts(ctx, fn, &o));
#ifdef GROVE_HAVE_CUDA
    GROVE_TRY(grove__cuda_use(ctx));
    if (o.use_bbox) memcpy(root, o.bbox, sizeof root);
    if (n > 0) {
        size_t bad;
        float bxy[2];
        GROVE_TRY(grove__qt_check_points_cuda(ctx, d_xyz, n, dims, o.use_bbox ? o.bbox : NULL, root,
                                              &bad, bxy));
        if (bad != SIZE_MAX && (!isfinite(bxy[0]) || !isfinite(bxy[1])))
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: point %zu has a non-finite coordinate (x=%.9g, y=%.9g)", fn,
                                bad, (double)bxy[0], (double)bxy[1]);
        if (bad != SIZE_MAX)
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: point %zu (x=%.9g, y=%.9g) lies outside opts->bbox (%.9g, "
                                "%.9g, %.9g, %.9g)",
                                fn, bad, (double)bxy[0], (double)bxy[1], (double)o.bbox[0],
                                (double)o.bbox[1], (double)o.bbox[2], (double)o.bbox[3]);
    }
    t = (grove_quadtree *)calloc(1, sizeof *t);
    if (!t) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    t->opts = o;
    t->opts.use_bbox = 1;
    memcpy(t->opts.bbox, root, sizeof root);
    t->n = n;
    st = build_cuda(ctx, d_xyz, dims, root, t);
    if (st != GROVE_OK) {
        grove_quadtree_destroy(t);
        return st;
    }
    *out = t;
    return GROVE_OK;
#else
    (void)t;
    (void)st;
    (void)root;
    return grove__error(ctx, GROVE_ERR_UNSUPPORTED, "%s: built without the CUDA backend", fn);
#endif
}

grove_status grove_quadtree_download(grove_ctx *ctx, grove_quadtree *t)
{
    static const char fn[] = "grove_quadtree_download";
    GROVE_TRY(grove__check_ctx(ctx));
    if (!t) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: t is NULL", fn);
    if (t->nodes) return GROVE_OK;
    if (t->dev_ctx != ctx)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: the tree was built on another context",
                            fn);
#ifdef GROVE_HAVE_CUDA
    {
        grove_status st = GROVE_OK;
        grove_quadtree_node *nodes = NULL;
        float *pts = NULL;
        uint32_t *index = NULL;
        GROVE_TRY(grove__cuda_use(ctx));
        nodes = (grove_quadtree_node *)malloc(t->num_nodes * sizeof *nodes);
        if (t->n > 0) {
            pts = (float *)malloc(2 * t->n * sizeof *pts);
            index = (uint32_t *)malloc(t->n * sizeof *index);
        }
        if (!nodes || (t->n > 0 && (!pts || !index))) {
            st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                              "%s: out of memory for a tree of %zu nodes and %zu points", fn,
                              t->num_nodes, t->n);
            goto _end;
        }
        /* No first touch of the new pages here: big copies are staged, and their host side,
         * page faults included, runs on all threads (grove__cuda_d2h). */
        GROVE_TRY_END(
            st, grove__cuda_d2h(ctx, nodes, t->d_nodes, t->num_nodes * sizeof *nodes, ctx->stream));
        if (t->n > 0) {
            GROVE_TRY_END(st,
                          grove__cuda_d2h(ctx, pts, t->d_pts, 2 * t->n * sizeof *pts, ctx->stream));
            GROVE_TRY_END(
                st, grove__cuda_d2h(ctx, index, t->d_index, t->n * sizeof *index, ctx->stream));
        }
        GROVE_TRY_END(st, grove__cuda_sync(ctx, ctx->stream, "copying the quadtree to the host"));
        t->nodes = nodes;
        t->pts = pts;
        t->index = index;
        return GROVE_OK;
    _end:
        free(nodes);
        free(pts);
        free(index);
        return st;
    }
#else
    return grove__error(ctx, GROVE_ERR_INTERNAL, "%s: a device tree without the CUDA backend", fn);
#endif
}

grove_quadtree_device_view grove_quadtree_device(const grove_quadtree *t)
{
    grove_quadtree_device_view v = {NULL, NULL, NULL};
    if (t && t->dev_ctx) {
        v.nodes = t->d_nodes;
        v.pts = t->d_pts;
        v.index = t->d_index;
    }
    return v;
}

#ifdef GROVE_HAVE_CUDA
void grove__qt_free_device(grove_quadtree *t)
{
    grove_ctx *c = t->dev_ctx;
    if (!c) return;
    if (grove__cuda_use(c) == GROVE_OK) {
        grove__cuda_free(c, t->d_nodes, t->d_nodes_bytes, c->stream);
        grove__cuda_free(c, t->d_pts, 2 * t->n * sizeof(float), c->stream);
        grove__cuda_free(c, t->d_index, t->n * sizeof(uint32_t), c->stream);
    }
    t->d_nodes = NULL;
    t->d_pts = NULL;
    t->d_index = NULL;
    t->d_nodes_bytes = 0;
    t->dev_ctx = NULL;
}
#endif

void grove_quadtree_destroy(grove_quadtree *t)
{
    if (!t) return;
#ifdef GROVE_HAVE_CUDA
    grove__qt_free_device(t);
#endif
    free(t->nodes);
    free(t->pts);
    free(t->index);
    free(t);
}

size_t grove_quadtree_num_nodes(const grove_quadtree *t) { return t ? t->num_nodes : 0; }
const grove_quadtree_node *grove_quadtree_nodes(const grove_quadtree *t)
{
    return t ? t->nodes : NULL;
}
size_t grove_quadtree_num_points(const grove_quadtree *t) { return t ? t->n : 0; }
const float *grove_quadtree_points(const grove_quadtree *t) { return t ? t->pts : NULL; }
const uint32_t *grove_quadtree_index(const grove_quadtree *t) { return t ? t->index : NULL; }

void grove_quadtree_get_opts(const grove_quadtree *t, grove_quadtree_opts *opts)
{
    if (!opts) return;
    if (!t) {
        grove_quadtree_default_opts(opts);
        return;
    }
    *opts = t->opts;
}
