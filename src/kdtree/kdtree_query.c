/*
 * kdtree_query.c - exact batched k nearest neighbours and radius search on a k-d tree (CPU
 * backend, OpenMP over the queries).
 *
 * The queries are visited in Morton order of their position in the root box, so that
 * consecutive queries of a thread walk the same nodes, and each writes its own row, so the
 * results are in the caller's order and do not depend on the visiting order or the threads.
 * Pruning uses each node's tight box: the squared distance from the query to the box, rounded
 * per statement as the point distances are, is a lower bound of every point distance in the box
 * (rounding is monotone), and a node is skipped only if that bound is strictly greater than the
 * current k-th distance, so that ties with a smaller input position are still found.
 *
 * On a CUDA context the same checks run here and the searches go to the CUDA backend
 * (kdtree_query_cuda.cu), which gives the same bytes; radius queries are converted and ordered
 * here, kNN queries on the GPU. grove_kdtree_knn_device() takes queries and outputs in device
 * memory.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../prim/prim_cpu.h"
#include "kdtree_internal.h"
#ifdef GROVE_HAVE_CUDA
#include "core_cuda.h"
#include "kdtree_query_cuda.h"
#endif

#pragma STDC FP_CONTRACT OFF

void grove_kdtree_result_free(grove_kdtree_result *r)
{
    if (!r) return;
    free(r->offsets);
    free(r->indices);
    free(r->dist2);
    memset(r, 0, sizeof *r);
}

/* Squared distance of tree point i to q, as kdtree.h specifies: per axis a difference, a square
 * and a partial sum, each its own rounding, in axis order. D and f64 are constants in the
 * specialised searches below, so the loops unroll. */
#if defined(__GNUC__)
#define KD_INLINE static inline __attribute__((always_inline))
#else
#define KD_INLINE static inline
#endif

KD_INLINE double dist2_point(const void *pts, int f64, int D, uint64_t i, const double *q)
{
    double s = 0.0;
    if (f64) {
        const double *p = (const double *)pts + i * (uint64_t)D;
        for (int d = 0; d < D; d++) {
            double dx = p[d] - q[d];
            double a = dx * dx;
            s = s + a;
        }
    } else {
        const float *p = (const float *)pts + i * (uint64_t)D;
        for (int d = 0; d < D; d++) {
            double dx = (double)p[d] - q[d];
            double a = dx * dx;
            s = s + a;
        }
    }
    return s;
}

/* Lower bound of dist2_point over box bx (lo[D], hi[D]); +INFINITY for an empty box. */
KD_INLINE double dist2_box(const double *bx, int D, const double *q)
{
    double s = 0.0;
    if (bx[0] > bx[D]) return INFINITY;
    for (int d = 0; d < D; d++) {
        double dx = 0.0, a;
        if (q[d] < bx[d])
            dx = bx[d] - q[d];
        else if (q[d] > bx[D + d])
            dx = q[d] - bx[D + d];
        a = dx * dx;
        s = s + a;
    }
    return s;
}

/* The best so far: a max-heap by (dist2, input position), capacity cap. */
typedef struct heap {
    double *d;
    uint64_t *id;
    size_t n, cap;
} heap;

static inline int worse(double da, uint64_t ia, double db, uint64_t ib)
{
    return da > db || (da == db && ia > ib);
}

static void sift_down(heap *h, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, w = i;
        double td;
        uint64_t ti;
        if (l < h->n && worse(h->d[l], h->id[l], h->d[w], h->id[w])) w = l;
        if (r < h->n && worse(h->d[r], h->id[r], h->d[w], h->id[w])) w = r;
        if (w == i) return;
        td = h->d[i];
        ti = h->id[i];
        h->d[i] = h->d[w];
        h->id[i] = h->id[w];
        h->d[w] = td;
        h->id[w] = ti;
        i = w;
    }
}

static inline void offer(heap *h, double d, uint64_t id)
{
    if (h->n < h->cap) {
        size_t i = h->n++;
        while (i > 0) {
            size_t p = (i - 1) / 2;
            if (!worse(d, id, h->d[p], h->id[p])) break;
            h->d[i] = h->d[p];
            h->id[i] = h->id[p];
            i = p;
        }
        h->d[i] = d;
        h->id[i] = id;
    } else if (worse(h->d[0], h->id[0], d, id)) {
        h->d[0] = d;
        h->id[0] = id;
        sift_down(h, 0);
    }
}

/* Pops the heap into ascending order at oi/od (od may be NULL); returns the count. */
static size_t heap_drain(heap *h, uint64_t *oi, double *od)
{
    size_t cnt = h->n;
    for (size_t m = h->n; m > 0; m--) {
        oi[m - 1] = h->id[0];
        if (od) od[m - 1] = h->d[0];
        h->d[0] = h->d[h->n - 1];
        h->id[0] = h->id[h->n - 1];
        h->n--;
        sift_down(h, 0);
    }
    return cnt;
}

/* Per-thread traversal stack: a descent pushes one sibling per level, so depth + 2 entries. */
typedef struct stack {
    uint64_t *node;
    double *lb;
} stack;

/* One thread's search scratch: a stack for the tree's depth and, when h is not NULL, a heap of
 * cap entries. Returns 0 if an allocation failed (free with scratch_free() either way). */
static int scratch_alloc(const grove_kdtree *t, stack *s, heap *h, size_t cap)
{
    s->node = (uint64_t *)malloc((t->depth + 2) * sizeof *s->node);
    s->lb = (double *)malloc((t->depth + 2) * sizeof *s->lb);
    if (!h) return s->node && s->lb;
    h->cap = cap;
    h->n = 0;
    h->d = (double *)malloc((cap ? cap : 1) * sizeof *h->d);
    h->id = (uint64_t *)malloc((cap ? cap : 1) * sizeof *h->id);
    return s->node && s->lb && h->d && h->id;
}

static void scratch_free(stack *s, heap *h)
{
    free(s->node);
    free(s->lb);
    if (h) {
        free(h->d);
        free(h->id);
    }
}

/* Best-first-ish descent shared by kNN and capped radius search: offers every point with
 * dist2 <= r2 to h; prunes on r2 and, once h is full, on its worst. */
KD_INLINE void search_heap_impl(const grove_kdtree *t, const double *q, double r2, heap *h,
                                stack *s, const int D, const int f64)
{
    const size_t cs = 2 * (size_t)D;
    const grove_kdtree_node *nodes = t->nodes;
    size_t sp = 0;
    h->n = 0;
    s->node[sp] = 0;
    s->lb[sp++] = dist2_box(t->bounds, D, q);
    while (sp > 0) {
        const grove_kdtree_node *nd;
        uint64_t id;
        double lb;
        sp--;
        id = s->node[sp];
        lb = s->lb[sp];
        if (lb > r2 || (h->n == h->cap && lb > h->d[0])) continue;
        nd = &nodes[id];
        if (nd->right == 0) {
            for (uint64_t i = nd->begin; i < nd->end; i++) {
                double d2 = dist2_point(t->pts, f64, D, i, q);
                if (d2 <= r2) offer(h, d2, t->index[i]);
            }
        } else {
            uint64_t a = id + 1, c = nd->right;
            double la = dist2_box(t->bounds + a * cs, D, q);
            double lc = dist2_box(t->bounds + c * cs, D, q);
            double bound = h->n == h->cap && h->d[0] < r2 ? h->d[0] : r2;
            /* the nearer child on top, so it is searched first; a child beyond the bound is
             * not pushed (the same test as at the pop, done early) */
            if (la <= lc) {
                if (!(lc > bound)) {
                    s->node[sp] = c;
                    s->lb[sp++] = lc;
                }
                if (!(la > bound)) {
                    s->node[sp] = a;
                    s->lb[sp++] = la;
                }
            } else {
                if (!(la > bound)) {
                    s->node[sp] = a;
                    s->lb[sp++] = la;
                }
                if (!(lc > bound)) {
                    s->node[sp] = c;
                    s->lb[sp++] = lc;
                }
            }
        }
    }
}

static void search_heap(const grove_kdtree *t, const double *q, double r2, heap *h, stack *s)
{
    const int f64 = t->type == GROVE_COORD_F64;
    if (t->dims == 2 && !f64)
        search_heap_impl(t, q, r2, h, s, 2, 0);
    else if (t->dims == 2)
        search_heap_impl(t, q, r2, h, s, 2, 1);
    else if (t->dims == 3 && !f64)
        search_heap_impl(t, q, r2, h, s, 3, 0);
    else if (t->dims == 3)
        search_heap_impl(t, q, r2, h, s, 3, 1);
    else
        search_heap_impl(t, q, r2, h, s, t->dims, f64);
}

/* Uncapped radius search: calls back for every point with dist2 <= r2 (out == NULL: counts). */
static size_t search_all(const grove_kdtree *t, const double *q, double r2, stack *s, uint64_t *oi,
                         double *od)
{
    const int D = t->dims;
    const size_t cs = 2 * (size_t)D;
    const grove_kdtree_node *nodes = t->nodes;
    size_t sp = 0, m = 0;
    s->node[sp] = 0;
    s->lb[sp++] = dist2_box(t->bounds, D, q);
    while (sp > 0) {
        const grove_kdtree_node *nd;
        uint64_t id;
        sp--;
        id = s->node[sp];
        if (s->lb[sp] > r2) continue;
        nd = &nodes[id];
        if (nd->right == 0) {
            for (uint64_t i = nd->begin; i < nd->end; i++) {
                double d2 = dist2_point(t->pts, t->type == GROVE_COORD_F64, D, i, q);
                if (d2 <= r2) {
                    if (oi) {
                        oi[m] = t->index[i];
                        od[m] = d2;
                    }
                    m++;
                }
            }
        } else {
            uint64_t a = id + 1, c = nd->right;
            s->node[sp] = c;
            s->lb[sp++] = dist2_box(t->bounds + c * cs, D, q);
            s->node[sp] = a;
            s->lb[sp++] = dist2_box(t->bounds + a * cs, D, q);
        }
    }
    return m;
}

static grove_status check_dims(grove_ctx *ctx, const char *fn, const grove_kdtree *t,
                               const grove_coords *queries)
{
    if (queries->dims != t->dims)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: queries->dims = %d differs from the tree's dims = %d", fn,
                            queries->dims, t->dims);
    return GROVE_OK;
}

/* Checks the queries and converts them to doubles; *order receives a visiting order (Morton
 * order in the root box). On success the caller frees *qx and *order. */
static grove_status prepare_queries(grove_ctx *ctx, const char *fn, const grove_kdtree *t,
                                    const grove_coords *queries, double **qx, uint64_t **order)
{
    const size_t nq = queries->n;
    const int D = t->dims;
    int bits = 63 / D;
    uint64_t *codes = NULL;
    grove_status st;
    const double *root = grove__kd_root_box(t);
    int nt = grove__threads(ctx);
    *qx = NULL;
    *order = NULL;
    GROVE_TRY(check_dims(ctx, fn, t, queries));
    if (nq == 0) return grove__kd_check_coords(ctx, fn, "queries", "query", queries, NULL);
    if (bits > 21) bits = 21;
    *qx = (double *)malloc(nq * (size_t)D * sizeof **qx);
    *order = (uint64_t *)malloc(nq * sizeof **order);
    codes = (uint64_t *)malloc(nq * sizeof *codes);
    if (!*qx || !*order || !codes) {
        st =
            grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu queries", fn, nq);
        goto _fail;
    }
    GROVE_TRY_END(st, grove__kd_check_coords(ctx, fn, "queries", "query", queries, *qx));
#pragma omp parallel for num_threads(nt) schedule(static) if (nq > 65536)
    for (size_t i = 0; i < nq; i++) {
        uint64_t code = 0, u[GROVE_KDTREE_MAX_DIMS];
        const double scale = (double)((1u << bits) - 1u);
        for (int d = 0; d < D; d++) {
            double lo = root[d], hi = root[D + d], v = (*qx)[i * (size_t)D + (size_t)d];
            double f = hi > lo ? (v - lo) / (hi - lo) : 0.0;
            if (!(f > 0.0)) f = 0.0; /* also NaN from an infinite extent */
            if (f > 1.0) f = 1.0;
            u[d] = (uint64_t)(f * scale);
        }
        for (int b = bits - 1; b >= 0; b--)
            for (int d = 0; d < D; d++) code = (code << 1) | ((u[d] >> b) & 1u);
        codes[i] = code;
        (*order)[i] = i;
    }
    /* only the speed depends on this order, not the results */
    GROVE_TRY_END(st, grove__cpu_sort(ctx, GROVE_U64, codes, sizeof(uint64_t), *order, nq, 0, 0));
    free(codes);
    return GROVE_OK;
_end:
_fail:
    free(codes);
    free(*qx);
    free(*order);
    *qx = NULL;
    *order = NULL;
    return st;
}

static grove_status check_tree(grove_ctx *ctx, const char *fn, const grove_kdtree *t,
                               const grove_coords *queries)
{
    GROVE_TRY(grove__check_ctx(ctx));
    if (!t) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: t is NULL", fn);
    if (!queries) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: queries is NULL", fn);
    /* a device-built tree serves the CUDA backend where it lies; the CPU needs its host arrays */
    if (!grove__kd_on_host(t) && grove_ctx_backend(ctx) != GROVE_BACKEND_CUDA)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: the tree is on the device only: grove_kdtree_download() it first",
                            fn);
    return GROVE_OK;
}

/* The checks of grove_kdtree_knn() and grove_kdtree_knn_device() before the queries' values. */
static grove_status check_knn(grove_ctx *ctx, const char *fn, const grove_kdtree *t,
                              const grove_coords *queries, int k, const uint64_t *indices)
{
    size_t nq;
    GROVE_TRY(check_tree(ctx, fn, t, queries));
    if (k < 1) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: k must be >= 1, got %d", fn, k);
    nq = queries->n;
    if (nq > 0 && !indices)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: indices is NULL with %zu queries", fn,
                            nq);
    if (nq > SIZE_MAX / sizeof(double) / (size_t)k)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %zu queries * k = %d is too large", fn,
                            nq, k);
    return GROVE_OK;
}

grove_status grove_kdtree_knn(grove_ctx *ctx, const grove_kdtree *t, const grove_coords *queries,
                              int k, uint64_t *indices, double *dist2)
{
    static const char fn[] = "grove_kdtree_knn";
    grove_status st = GROVE_OK;
    double *qx = NULL;
    uint64_t *order = NULL;
    size_t kk, cap, nq;
    int nt, failed = 0;

    GROVE_TRY(check_knn(ctx, fn, t, queries, k, indices));
    nq = queries->n;
    kk = (size_t)k;
#ifdef GROVE_HAVE_CUDA
    if (grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA) {
        /* checked here (the same messages); converted and ordered on the GPU */
        GROVE_TRY(check_dims(ctx, fn, t, queries));
        GROVE_TRY(grove__kd_check_coords(ctx, fn, "queries", "query", queries, NULL));
        return grove__kd_knn_cuda(ctx, t, queries, 1, k, indices, dist2);
    }
#endif
    GROVE_TRY(prepare_queries(ctx, fn, t, queries, &qx, &order));
    cap = kk < t->n ? kk : t->n;
    nt = grove__threads(ctx);
#pragma omp parallel num_threads(nt) if (nq > 16)
    {
        heap h;
        stack s;
        if (!scratch_alloc(t, &s, &h, cap)) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp barrier
        if (!failed) {
#pragma omp for schedule(dynamic, 64)
            for (size_t j = 0; j < nq; j++) {
                size_t q = (size_t)order[j], m = 0;
                uint64_t *oi = indices + q * kk;
                double *od = dist2 ? dist2 + q * kk : NULL;
                if (cap > 0) {
                    search_heap(t, qx + q * (size_t)t->dims, INFINITY, &h, &s);
                    m = heap_drain(&h, oi, od);
                }
                for (; m < kk; m++) {
                    oi[m] = UINT64_MAX;
                    if (od) od[m] = INFINITY;
                }
            }
        }
        scratch_free(&s, &h);
    }
    if (failed)
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "%s: out of memory for a heap of %zu neighbours per thread", fn, cap);
    free(qx);
    free(order);
    return st;
}

grove_status grove_kdtree_knn_device(grove_ctx *ctx, const grove_kdtree *t,
                                     const grove_coords *d_queries, int k, uint64_t *d_indices,
                                     double *d_dist2)
{
    static const char fn[] = "grove_kdtree_knn_device";
    GROVE_TRY(grove__check_ctx(ctx));
    if (grove_ctx_backend(ctx) != GROVE_BACKEND_CUDA)
        return grove__error(ctx, GROVE_ERR_UNSUPPORTED, "%s: needs a CUDA context", fn);
    GROVE_TRY(check_knn(ctx, fn, t, d_queries, k, d_indices));
    GROVE_TRY(check_dims(ctx, fn, t, d_queries));
#ifdef GROVE_HAVE_CUDA
    {
        grove_coords shape = *d_queries;
        shape.n = 0; /* dims and type only: the data is on the device */
        GROVE_TRY(grove__kd_check_coords(ctx, fn, "d_queries", "query", &shape, NULL));
        if (d_queries->n > 0 && !d_queries->data)
            return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                                "%s: d_queries->data is NULL with n = %zu", fn, d_queries->n);
        if (d_queries->n == 0) return GROVE_OK;
        GROVE_TRY(grove__cuda_use(ctx));
        GROVE_TRY(grove__kd_check_coords_device(ctx, fn, "query", d_queries));
        return grove__kd_knn_cuda(ctx, t, d_queries, 0, k, d_indices, d_dist2);
    }
#else
    (void)d_dist2;
    return grove__error(ctx, GROVE_ERR_UNSUPPORTED, "%s: grove was built without CUDA", fn);
#endif
}

typedef struct pair {
    double d;
    uint64_t i;
} pair;

static int pair_cmp(const void *a, const void *b)
{
    const pair *x = (const pair *)a, *y = (const pair *)b;
    if (x->d != y->d) return x->d < y->d ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

grove_status grove_kdtree_radius(grove_ctx *ctx, const grove_kdtree *t, const grove_coords *queries,
                                 double r, size_t max_per_query, grove_kdtree_result *out)
{
    static const char fn[] = "grove_kdtree_radius";
    grove_status st = GROVE_OK;
    double *qx = NULL, r2;
    uint64_t *order = NULL, *off = NULL, *ind = NULL;
    double *dst = NULL;
    size_t nq, total, cap;
    int nt, failed = 0;

    if (out) memset(out, 0, sizeof *out);
    GROVE_TRY(check_tree(ctx, fn, t, queries));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    if (!isfinite(r) || r < 0.0)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: r must be finite and >= 0, got %g", fn,
                            r);
    nq = queries->n;
    if (nq > SIZE_MAX / sizeof(uint64_t) - 1)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %zu queries is too many", fn, nq);
    r2 = r * r;
    cap = max_per_query;
    if (cap == 0 || cap > t->n) cap = t->n; /* a cap of n or more is no cap */
    GROVE_TRY(prepare_queries(ctx, fn, t, queries, &qx, &order));
#ifdef GROVE_HAVE_CUDA
    if (grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA) {
        st = grove__kd_radius_cuda(ctx, fn, t, qx, order, nq, r2, cap, out);
        goto _end;
    }
#endif
    off = (uint64_t *)malloc((nq + 1) * sizeof *off);
    if (!off) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu offsets", fn,
                          nq + 1);
        goto _end;
    }
    nt = grove__threads(ctx);
    off[0] = 0;
    /* Two passes (count, then fill) keep each result array in one allocation of the exact
     * size. */
#pragma omp parallel num_threads(nt) if (nq > 16)
    {
        stack s;
        if (!scratch_alloc(t, &s, NULL, 0)) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp barrier
        if (!failed) {
#pragma omp for schedule(dynamic, 64)
            for (size_t j = 0; j < nq; j++) {
                size_t q = (size_t)order[j];
                size_t m = t->n ? search_all(t, qx + q * (size_t)t->dims, r2, &s, NULL, NULL) : 0;
                off[q + 1] = m < cap ? m : cap;
            }
        }
        scratch_free(&s, NULL);
    }
    if (failed) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto _end;
    }
    for (size_t q = 0; q < nq; q++) off[q + 1] += off[q];
    total = (size_t)off[nq];
    ind = (uint64_t *)malloc((total ? total : 1) * sizeof *ind);
    dst = (double *)malloc((total ? total : 1) * sizeof *dst);
    if (!ind || !dst) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu matches", fn,
                          total);
        goto _end;
    }
#pragma omp parallel num_threads(nt) if (nq > 16)
    {
        stack s;
        heap h;
        pair *pr = NULL;
        size_t prcap = 0;
        if (!scratch_alloc(t, &s, &h, cap)) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp barrier
        if (!failed) {
#pragma omp for schedule(dynamic, 64)
            for (size_t j = 0; j < nq; j++) {
                size_t q = (size_t)order[j], m = (size_t)(off[q + 1] - off[q]);
                const double *qp = qx + q * (size_t)t->dims;
                int f;
#pragma omp atomic read
                f = failed;
                if (m == 0 || f) continue;
                if (cap < t->n) {
                    /* capped: the nearest `cap` within r, by the kNN search bounded at r2 */
                    search_heap(t, qp, r2, &h, &s);
                    heap_drain(&h, ind + off[q], dst + off[q]);
                    continue;
                }
                search_all(t, qp, r2, &s, ind + off[q], dst + off[q]);
                if (m > prcap) {
                    free(pr);
                    prcap = m * 2;
                    pr = (pair *)malloc(prcap * sizeof *pr);
                    if (!pr) {
                        prcap = 0;
#pragma omp atomic write
                        failed = 1;
                        continue;
                    }
                }
                for (size_t i = 0; i < m; i++) {
                    pr[i].d = dst[off[q] + i];
                    pr[i].i = ind[off[q] + i];
                }
                qsort(pr, m, sizeof *pr, pair_cmp);
                for (size_t i = 0; i < m; i++) {
                    dst[off[q] + i] = pr[i].d;
                    ind[off[q] + i] = pr[i].i;
                }
            }
        }
        free(pr);
        scratch_free(&s, &h);
    }
    if (failed) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto _end;
    }
    out->num_queries = nq;
    out->offsets = off;
    out->indices = ind;
    out->dist2 = dst;
    off = NULL;
    ind = NULL;
    dst = NULL;
_end:
    free(qx);
    free(order);
    free(off);
    free(ind);
    free(dst);
    return st;
}
