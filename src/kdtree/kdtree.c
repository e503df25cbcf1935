/*
 * kdtree.c - public entry points of the k-d tree module: argument and point checks, the build
 * dispatch, destroy and the accessors. The build is in kdtree_cpu.c, the queries in
 * kdtree_query.c, save and load in kdtree_io.c.
 *
 * On a CUDA context the build runs on the GPU (kdtree_cuda.cu) and gives the CPU's tree byte
 * for byte; the checks here come first, so both backends fail alike.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kdtree_internal.h"
#ifdef GROVE_HAVE_CUDA
#include "core_cuda.h"
#include "kdtree_cuda.h"
#endif

void grove_kdtree_default_opts(grove_kdtree_opts *opts)
{
    if (!opts) return;
    memset(opts, 0, sizeof *opts);
    opts->leaf_size = 12;
}

/* The message of a non-finite coordinate: point (or query) `bad`, whose coordinates are v. */
static grove_status bad_coord(grove_ctx *ctx, const char *fn, const char *what, size_t bad,
                              const double *v, int dims)
{
    for (int d = 0; d < dims; d++)
        if (!isfinite(v[d]))
            return grove__error(
                ctx, strcmp(what, "query") ? GROVE_ERR_BAD_INPUT : GROVE_ERR_INVALID_ARG,
                "%s: %s %zu has a non-finite coordinate (axis %d = %g)", fn, what, bad, d, v[d]);
    return GROVE_OK;
}

grove_status grove__kd_check_coords(grove_ctx *ctx, const char *fn, const char *arg,
                                    const char *what, const grove_coords *c, double *x)
{
    size_t n = c->n, dims, bad = SIZE_MAX;
    int nt = grove__threads(ctx);
    if (c->dims < 1 || c->dims > GROVE_KDTREE_MAX_DIMS)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s->dims must be 1..%d, got %d", fn,
                            arg, GROVE_KDTREE_MAX_DIMS, c->dims);
    if (c->type != GROVE_COORD_F32 && c->type != GROVE_COORD_F64)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: %s->type must be GROVE_COORD_F32 or GROVE_COORD_F64, got %d", fn,
                            arg, (int)c->type);
    if (n > 0 && !c->data)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s->data is NULL with %s->n = %zu", fn,
                            arg, arg, n);
    dims = (size_t)c->dims;
    if (n > SIZE_MAX / sizeof(double) / dims)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s->n = %zu is too large", fn, arg, n);
        /* In parallel: the first bad index is the smallest, whichever thread finds it. */
#pragma omp parallel for num_threads(nt) schedule(static) if (n > 65536) reduction(min : bad)
    for (size_t i = 0; i < n; i++) {
        for (size_t d = 0; d < dims; d++) {
            double v = grove__kd_coord(c->data, c->type, (int)dims, i, (int)d);
            if (!isfinite(v)) {
                bad = i < bad ? i : bad;
                break;
            }
            if (x) x[i * dims + d] = v + 0.0;
        }
    }
    if (bad != SIZE_MAX) {
        double v[GROVE_KDTREE_MAX_DIMS];
        for (size_t d = 0; d < dims; d++)
            v[d] = grove__kd_coord(c->data, c->type, (int)dims, bad, (int)d);
        return bad_coord(ctx, fn, what, bad, v, (int)dims);
    }
    return GROVE_OK;
}

#ifdef GROVE_HAVE_CUDA
grove_status grove__kd_check_coords_device(grove_ctx *ctx, const char *fn, const char *what,
                                           const grove_coords *c)
{
    size_t bad;
    double v[GROVE_KDTREE_MAX_DIMS];
    GROVE_TRY(grove__kd_find_bad_cuda(ctx, c, &bad, v));
    return bad == SIZE_MAX ? GROVE_OK : bad_coord(ctx, fn, what, bad, v, c->dims);
}
#endif

/* *o = the options (opts, or the defaults for NULL), checked. */
static grove_status take_opts(grove_ctx *ctx, const char *fn, const grove_kdtree_opts *opts,
                              grove_kdtree_opts *o)
{
    if (opts)
        *o = *opts;
    else
        grove_kdtree_default_opts(o);
    if (o->leaf_size < 1 || o->leaf_size > GROVE_KDTREE_MAX_LEAF)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: opts->leaf_size must be 1..%d, got %d",
                            fn, GROVE_KDTREE_MAX_LEAF, o->leaf_size);
    return GROVE_OK;
}

grove_status grove_kdtree_build(grove_ctx *ctx, const grove_coords *pts,
                                const grove_kdtree_opts *opts, grove_kdtree **out)
{
    static const char fn[] = "grove_kdtree_build";
    grove_kdtree_opts o;
    grove_kdtree *t = NULL;
    grove_status st = GROVE_OK;
    double *x = NULL;

    GROVE_TRY(grove__check_ctx(ctx));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!pts) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: pts is NULL", fn);
    GROVE_TRY(take_opts(ctx, fn, opts, &o));
    GROVE_TRY(grove__kd_check_coords(ctx, fn, "pts", "point", pts, NULL));
#ifdef GROVE_HAVE_CUDA
    if (grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA && pts->n > 0) {
        t = (grove_kdtree *)calloc(1, sizeof *t);
        if (!t) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        t->opts = o;
        t->n = pts->n;
        t->dims = pts->dims;
        t->type = pts->type;
        GROVE_TRY_END(st, grove__kd_build_cuda(ctx, pts, t));
        *out = t;
        return GROVE_OK;
    }
#endif
    if (pts->n > 0) {
        x = (double *)malloc(pts->n * (size_t)pts->dims * sizeof *x);
        if (!x)
            return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                "%s: out of memory for %zu points as doubles", fn, pts->n);
        GROVE_TRY_END(st, grove__kd_check_coords(ctx, fn, "pts", "point", pts, x));
    }
    t = (grove_kdtree *)calloc(1, sizeof *t);
    if (!t) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto _end;
    }
    t->opts = o;
    t->n = pts->n;
    t->dims = pts->dims;
    t->type = pts->type;
    GROVE_TRY_END(st, grove__kd_build_cpu(ctx, pts, x, t));
    *out = t;
    t = NULL;
_end:
    free(x);
    grove_kdtree_destroy(t);
    return st;
}

grove_status grove_kdtree_build_points(grove_ctx *ctx, const grove_points *pts,
                                       const grove_kdtree_opts *opts, grove_kdtree **out)
{
    grove_coords c;
    GROVE_TRY(grove__check_ctx(ctx));
    if (out) *out = NULL;
    if (!pts)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "grove_kdtree_build_points: pts is NULL");
    c.data = pts->xyz;
    c.n = pts->n;
    c.dims = pts->dims;
    c.type = GROVE_COORD_F32;
    return grove_kdtree_build(ctx, &c, opts, out);
}

grove_status grove_kdtree_build_device(grove_ctx *ctx, const grove_coords *d_pts,
                                       const grove_kdtree_opts *opts, grove_kdtree **out)
{
    static const char fn[] = "grove_kdtree_build_device";
    grove_kdtree_opts o;

    GROVE_TRY(grove__check_ctx(ctx));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!d_pts) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: d_pts is NULL", fn);
    if (grove_ctx_backend(ctx) != GROVE_BACKEND_CUDA)
        return grove__error(ctx, GROVE_ERR_UNSUPPORTED, "%s: needs a CUDA context", fn);
    GROVE_TRY(take_opts(ctx, fn, opts, &o));
#ifdef GROVE_HAVE_CUDA
    {
        grove_kdtree *t;
        grove_status st;
        grove_coords none = *d_pts;
        /* the shape checks of the host build, without reading the (device) data */
        none.n = 0;
        GROVE_TRY(grove__kd_check_coords(ctx, fn, "d_pts", "point", &none, NULL));
        if (d_pts->n > 0 && !d_pts->data)
            return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: d_pts->data is NULL with n = %zu",
                                fn, d_pts->n);
        if (d_pts->n > (size_t)UINT32_MAX)
            return grove__error(ctx, GROVE_ERR_LIMIT,
                                "%s: the CUDA build takes at most %u points, got %zu", fn,
                                UINT32_MAX, d_pts->n);
        GROVE_TRY(grove__cuda_use(ctx));
        GROVE_TRY(grove__kd_check_coords_device(ctx, fn, "point", d_pts));
        t = (grove_kdtree *)calloc(1, sizeof *t);
        if (!t) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        t->opts = o;
        t->n = d_pts->n;
        t->dims = d_pts->dims;
        t->type = d_pts->type;
        if (d_pts->n > 0) {
            st = grove__kd_build_device_cuda(ctx, d_pts, t);
        } else {
            /* one empty leaf: built on the host, moved to the device */
            st = grove__kd_build_cpu(ctx, d_pts, NULL, t);
            if (st == GROVE_OK) st = grove__kd_upload_cuda(ctx, t);
            if (st == GROVE_OK) {
                free(t->nodes);
                free(t->bounds);
                t->nodes = NULL;
                t->bounds = NULL;
            }
        }
        if (st != GROVE_OK) {
            grove_kdtree_destroy(t);
            return st;
        }
        *out = t;
        return GROVE_OK;
    }
#else
    return grove__error(ctx, GROVE_ERR_UNSUPPORTED, "%s: grove was built without CUDA", fn);
#endif
}

grove_status grove_kdtree_download(grove_ctx *ctx, grove_kdtree *t)
{
    GROVE_TRY(grove__check_ctx(ctx));
    if (!t) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "grove_kdtree_download: t is NULL");
    if (grove__kd_on_host(t)) return GROVE_OK;
#ifdef GROVE_HAVE_CUDA
    if (grove_ctx_backend(ctx) != GROVE_BACKEND_CUDA)
        return grove__error(ctx, GROVE_ERR_UNSUPPORTED,
                            "grove_kdtree_download: needs a CUDA context (the tree's device)");
    return grove__kd_download_cuda(ctx, t);
#else
    return grove__error(ctx, GROVE_ERR_INTERNAL,
                        "grove_kdtree_download: a device tree without CUDA");
#endif
}

grove_kdtree_device_view grove_kdtree_device(const grove_kdtree *t)
{
    grove_kdtree_device_view v;
    memset(&v, 0, sizeof v);
    if (!t || !t->dev_ctx) return v;
    v.nodes = (const grove_kdtree_node *)t->d_nodes;
    v.bounds = (const double *)t->d_bounds;
    v.points = t->d_pts;
    v.index = (const uint64_t *)t->d_index;
    return v;
}

void grove_kdtree_destroy(grove_kdtree *t)
{
    if (!t) return;
#ifdef GROVE_HAVE_CUDA
    grove__kd_free_device(t);
#endif
    free(t->nodes);
    free(t->bounds);
    free(t->pts);
    free(t->index);
    free(t);
}

size_t grove_kdtree_num_nodes(const grove_kdtree *t) { return t ? t->num_nodes : 0; }
const grove_kdtree_node *grove_kdtree_nodes(const grove_kdtree *t) { return t ? t->nodes : NULL; }
const double *grove_kdtree_bounds(const grove_kdtree *t) { return t ? t->bounds : NULL; }
size_t grove_kdtree_num_points(const grove_kdtree *t) { return t ? t->n : 0; }
int grove_kdtree_dims(const grove_kdtree *t) { return t ? t->dims : 0; }
grove_coord_type grove_kdtree_coord_type(const grove_kdtree *t)
{
    return t ? t->type : GROVE_COORD_F32;
}
const void *grove_kdtree_points(const grove_kdtree *t) { return t ? t->pts : NULL; }
const uint64_t *grove_kdtree_index(const grove_kdtree *t) { return t ? t->index : NULL; }
size_t grove_kdtree_depth(const grove_kdtree *t) { return t ? t->depth : 0; }

void grove_kdtree_get_opts(const grove_kdtree *t, grove_kdtree_opts *opts)
{
    if (!opts) return;
    if (!t) {
        grove_kdtree_default_opts(opts);
        return;
    }
    *opts = t->opts;
}
