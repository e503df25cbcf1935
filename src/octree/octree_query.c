/*
 * octree_query.c - box and radius queries on an octree: the checks, the CPU backend, and the
 * dispatch to the CUDA backend (octree_cuda.cu) on a CUDA context. Every check happens here,
 * before any device work, so both backends fail alike.
 *
 * Pruning works on the grid coordinates, not on the cubes' double bounds: quantization is
 * monotone (a subtraction, a multiplication, a floor and a clamp, each non-decreasing), so a
 * point with x0 <= x <= x1 has q(x0) <= q(x) <= q(x1), and a point whose q lies strictly
 * between q(x0) and q(x1) has x0 < x < x1. Both facts hold exactly, whatever the rounding, so
 * a node is skipped or taken whole only when that is certain; the points of the other leaves
 * are tested on their stored coordinates. Only leaf entries are returned: the samples of inner
 * nodes repeat points that are in some leaf already.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../quadtree/quadtree_internal.h" /* grove__qt_sort_u32 */
#include "octree_internal.h"
#ifdef GROVE_HAVE_CUDA
#include "octree_cuda.h"
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#define NONE UINT32_MAX
/* Each pop pushes at most 8 children, and the tree is at most 30 levels deep. */
#define OT_STACK (8 * (GROVE_OCTREE_BITS + 2))

/* A query in grid space: the q range a match must lie in, and the range whose cells lie wholly
 * inside (lo_in > q or q > hi_in: not certain). */
typedef struct qbox {
    int64_t lo[3], hi[3];
} qbox;

/* Matches so far, per thread. */
typedef struct hits {
    uint32_t *v;
    size_t n, cap;
    int failed;
} hits;

static void push_hit(hits *h, uint32_t i)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 1024;
        uint32_t *p = (uint32_t *)realloc(h->v, cap * sizeof *p);
        if (!p) {
            h->failed = 1;
            return;
        }
        h->v = p;
        h->cap = cap;
    }
    h->v[h->n++] = i;
}

static void grid_range(const grove_octree *t, const double b[6], qbox *r)
{
    for (int a = 0; a < 3; a++) {
        r->lo[a] = grove__ot_quantize(b[a], t->lo[a], t->to_grid);
        r->hi[a] = grove__ot_quantize(b[3 + a], t->lo[a], t->to_grid);
    }
}

typedef int (*match_fn)(const double *p, const double *arg);

static int in_box(const double *p, const double *b)
{
    return p[0] >= b[0] && p[0] <= b[3] && p[1] >= b[1] && p[1] <= b[4] && p[2] >= b[2] &&
           p[2] <= b[5];
}

/* arg: centre and r * r. Each square and each sum rounded on its own, as octree.h says. */
static int in_ball(const double *p, const double *arg)
{
    double dx = p[0] - arg[0], dy = p[1] - arg[1], dz = p[2] - arg[2];
    double a = dx * dx, b = dy * dy, c = dz * dz;
    double s = a + b;
    s = s + c;
    return s <= arg[3];
}

/* Appends the input positions of every leaf entry of the query to h (unsorted). whole: the
 * query's q range strictly containing a cell means every point of it matches (boxes only). */
static void descend(const grove_octree *t, const qbox *r, int whole, match_fn match,
                    const double *arg, hits *h)
{
    uint32_t stack[OT_STACK];
    uint8_t inside[OT_STACK];
    int sp = 0;
    stack[sp] = 0;
    inside[sp++] = 0;
    while (sp > 0) {
        const grove_octree_node *nd;
        int in;
        sp--;
        nd = &t->nodes[stack[sp]];
        in = inside[sp];
        if (!in) {
            const int s = GROVE_OCTREE_BITS - nd->depth;
            int all = whole;
            for (int a = 0; a < 3; a++) {
                int64_t c0 = (int64_t)nd->cell[a] << s, c1 = (((int64_t)nd->cell[a] + 1) << s) - 1;
                if (c1 < r->lo[a] || c0 > r->hi[a]) goto next;
                if (!(r->lo[a] < c0 && c1 < r->hi[a])) all = 0;
            }
            in = all;
        }
        if (nd->first_child != NONE) {
            int nc = __builtin_popcount(nd->child_mask);
            for (int c = nc - 1; c >= 0; c--) {
                stack[sp] = nd->first_child + (uint32_t)c;
                inside[sp++] = (uint8_t)in;
            }
        } else if (in) {
            for (uint64_t e = nd->begin; e < nd->end; e++) push_hit(h, t->index[e]);
        } else {
            for (uint64_t e = nd->begin; e < nd->end; e++)
                if (match(t->xyz + 3 * e, arg)) push_hit(h, t->index[e]);
        }
    next:;
    }
}

static grove_status need_host_arrays(grove_ctx *ctx, const char *fn, const grove_octree *t)
{
    if (t->nodes) return GROVE_OK;
    return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                        "%s: the tree has no host arrays (it was built by "
                        "grove_octree_build_device); call grove_octree_download() first",
                        fn);
}

/* Runs nq queries on the CPU: for query q, prep fills its grid range and the match argument
 * (6 doubles for a box, centre and r^2 for a ball; returns 0 for a query with no matches). */
typedef int (*prep_fn)(const grove_octree *t, const double *a, const double *b, size_t q,
                       qbox *r, double arg[6]);

static int prep_box(const grove_octree *t, const double *boxes, const double *unused, size_t q,
                    qbox *r, double arg[6])
{
    const double *b = boxes + 6 * q;
    (void)unused;
    if (b[0] > b[3] || b[1] > b[4] || b[2] > b[5]) return 0;
    memcpy(arg, b, 6 * sizeof *arg);
    grid_range(t, b, r);
    return 1;
}

static int prep_ball(const grove_octree *t, const double *centres, const double *radii, size_t q,
                     qbox *r, double arg[6])
{
    const double *c = centres + 3 * q;
    double rad = radii[q], b[6];
    /* A point passes the rounded test only if each |x - c| is at most about r (or, where r * r
     * underflows, below 1e-150): a square at least r^2 (1 + 2e-9), or 1e-300, rounds above the
     * rounded r * r. The box below is wider than that by margins far above the roundings of the
     * test and of these sums, so it holds every match. */
    double reach = rad * (1.0 + 1e-9) + 1e-150;
    /* r * r overflowing makes every point a match, however far */
    if (isinf(rad * rad)) reach = INFINITY;
    for (int a = 0; a < 3; a++) {
        double slack = fabs(c[a]) * 1e-15;
        b[a] = c[a] - reach - slack;
        b[3 + a] = c[a] + reach + slack;
        arg[a] = c[a];
    }
    arg[3] = rad * rad;
    grid_range(t, b, r);
    return 1;
}

static grove_status run_queries(grove_ctx *ctx, const char *fn, const grove_octree *t,
                                const double *a, const double *b, size_t nq, prep_fn prep,
                                match_fn match, int whole, grove_query_result *out)
{
    grove_status st = GROVE_OK;
    int nt = grove__threads(ctx), fail = 0;
    uint64_t *off = NULL, *from = NULL;
    uint32_t *ind = NULL, *owner = NULL;
    hits *h = NULL;

    off = (uint64_t *)calloc(nq + 1, sizeof *off);
    from = (uint64_t *)malloc((nq ? nq : 1) * sizeof *from);
    owner = (uint32_t *)malloc((nq ? nq : 1) * sizeof *owner);
    h = (hits *)calloc((size_t)nt, sizeof *h);
    if (!off || !from || !owner || !h) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu queries", fn,
                          nq);
        goto _end;
    }
#pragma omp parallel num_threads(nt) if (nq > 4)
    {
#ifdef _OPENMP
        int tid = omp_get_thread_num();
#else
        int tid = 0;
#endif
        hits *mine = &h[tid];
#pragma omp for schedule(dynamic, 4)
        for (size_t q = 0; q < nq; q++) {
            qbox r;
            double arg[6];
            from[q] = mine->n;
            owner[q] = (uint32_t)tid;
            if (prep(t, a, b, q, &r, arg)) descend(t, &r, whole, match, arg, mine);
            off[q + 1] = mine->n - from[q];
        }
    }
    for (int i = 0; i < nt; i++) fail |= h[i].failed;
    if (fail) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for the matches", fn);
        goto _end;
    }
    for (size_t q = 0; q < nq; q++) off[q + 1] += off[q];
    ind = (uint32_t *)malloc((off[nq] ? (size_t)off[nq] : 1) * sizeof *ind);
    if (!ind) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %llu matches", fn,
                          (unsigned long long)off[nq]);
        goto _end;
    }
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4) if (nq > 4)
    for (size_t q = 0; q < nq; q++) {
        size_t m = (size_t)(off[q + 1] - off[q]);
        if (m == 0) continue;
        memcpy(ind + off[q], h[owner[q]].v + from[q], m * sizeof *ind);
        grove__qt_sort_u32(ind + off[q], m);
    }
    out->num_queries = nq;
    out->offsets = off;
    out->indices = ind;
    off = NULL;
_end:
    if (h)
        for (int i = 0; i < nt; i++) free(h[i].v);
    free(h);
    free(off);
    free(from);
    free(owner);
    return st;
}

static grove_status check_common(grove_ctx *ctx, const char *fn, const grove_octree *t,
                                 const void *arr, const char *name, size_t nq,
                                 grove_query_result *out)
{
    GROVE_TRY(grove__check_ctx(ctx));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    memset(out, 0, sizeof *out);
    if (!t) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: t is NULL", fn);
    if (nq > 0 && !arr)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s is NULL with nq = %zu", fn, name,
                            nq);
    if (nq > SIZE_MAX / (6 * sizeof(double)) - 1)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: nq = %zu is too large", fn, nq);
    return GROVE_OK;
}

grove_status grove_octree_query_boxes(grove_ctx *ctx, const grove_octree *t, const double *boxes,
                                      size_t nq, grove_query_result *out)
{
    static const char fn[] = "grove_octree_query_boxes";
    GROVE_TRY(check_common(ctx, fn, t, boxes, "boxes", nq, out));
    for (size_t q = 0; q < nq; q++) {
        const double *b = boxes + 6 * q;
        for (int a = 0; a < 6; a++)
            if (isnan(b[a]))
                return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                                    "%s: query %zu has a NaN bound (%.17g, %.17g, %.17g, %.17g, "
                                    "%.17g, %.17g)",
                                    fn, q, b[0], b[1], b[2], b[3], b[4], b[5]);
    }
#ifdef GROVE_HAVE_CUDA
    if (ctx->backend == GROVE_BACKEND_CUDA) return grove__ot_query_boxes_cuda(ctx, t, boxes, nq, out);
#endif
    GROVE_TRY(need_host_arrays(ctx, fn, t));
    return run_queries(ctx, fn, t, boxes, NULL, nq, prep_box, in_box, 1, out);
}

grove_status grove_octree_query_radius(grove_ctx *ctx, const grove_octree *t,
                                       const double *centres, const double *radii, size_t nq,
                                       grove_query_result *out)
{
    static const char fn[] = "grove_octree_query_radius";
    GROVE_TRY(check_common(ctx, fn, t, centres, "centres", nq, out));
    if (nq > 0 && !radii)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: radii is NULL with nq = %zu", fn, nq);
    for (size_t q = 0; q < nq; q++) {
        const double *c = centres + 3 * q;
        if (!isfinite(c[0]) || !isfinite(c[1]) || !isfinite(c[2]))
            return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                                "%s: query %zu has a non-finite centre (%.17g, %.17g, %.17g)", fn,
                                q, c[0], c[1], c[2]);
        if (!(radii[q] >= 0.0))
            return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                                "%s: query %zu has radius %.17g (must be >= 0)", fn, q, radii[q]);
    }
#ifdef GROVE_HAVE_CUDA
    if (ctx->backend == GROVE_BACKEND_CUDA)
        return grove__ot_query_radius_cuda(ctx, t, centres, radii, nq, out);
#endif
    GROVE_TRY(need_host_arrays(ctx, fn, t));
    return run_queries(ctx, fn, t, centres, radii, nq, prep_ball, in_ball, 0, out);
}
