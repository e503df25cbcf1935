/*
 * quadtree_query.c - box queries and k nearest neighbours on a quadtree: the checks, the CPU
 * backend, and the dispatch to the CUDA backend (quadtree_query_cuda.cu) on a CUDA context.
 * Every check happens here, before any device work, so both backends fail alike.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quadtree_internal.h"
#ifdef GROVE_HAVE_CUDA
#include "quadtree_query_cuda.h"
#endif

void grove_query_result_free(grove_query_result *r)
{
    if (!r) return;
    free(r->offsets);
    free(r->indices);
    memset(r, 0, sizeof *r);
}

/* A CPU context needs the host arrays, which a tree built on the device gets only when it is
 * downloaded (the CUDA backend reads its device arrays instead). */
static grove_status need_host_arrays(grove_ctx *ctx, const char *fn, const grove_quadtree *t)
{
    if (t->nodes) return GROVE_OK;
    return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                        "%s: the tree has no host arrays (it was built by "
                        "grove_quadtree_build_device); call grove_quadtree_download() first",
                        fn);
}

/* ---- box queries ---- */

/* Deepest descent: each pop pushes at most 4 nodes, and the tree is at most 30 levels deep. */
#define QT_STACK (4 * (GROVE_QUADTREE_MAX_DEPTH + 2))

/* Matches of box q: written to out (in no particular order) unless out is NULL; returns their
 * number. A node's box contains all its points (closed on every side, by induction from the
 * root), so a node whose box misses the query holds no match and one inside it holds only
 * matches. */
static size_t box_query(const grove_quadtree *t, const float q[4], uint32_t *out)
{
    const grove_quadtree_node *nodes = t->nodes;
    int32_t stack[QT_STACK];
    int sp = 0;
    size_t m = 0;
    if (!(q[0] <= q[2]) || !(q[1] <= q[3])) return 0;
    stack[sp++] = 0;
    while (sp > 0) {
        const grove_quadtree_node *nd = &nodes[stack[--sp]];
        if (nd->end == nd->begin) continue;
        if (nd->xmin > q[2] || nd->xmax < q[0] || nd->ymin > q[3] || nd->ymax < q[1]) continue;
        if (q[0] <= nd->xmin && nd->xmax <= q[2] && q[1] <= nd->ymin && nd->ymax <= q[3]) {
            if (out) memcpy(out + m, t->index + nd->begin, (nd->end - nd->begin) * sizeof *out);
            m += nd->end - nd->begin;
        } else if (nd->first_child >= 0) {
            for (int c = 3; c >= 0; c--) stack[sp++] = nd->first_child + c;
        } else {
            for (uint32_t i = nd->begin; i < nd->end; i++) {
                float x = t->pts[2 * (size_t)i], y = t->pts[2 * (size_t)i + 1];
                if (x >= q[0] && x <= q[2] && y >= q[1] && y <= q[3]) {
                    if (out) out[m] = t->index[i];
                    m++;
                }
            }
        }
    }
    return m;
}

grove_status grove_quadtree_query_boxes(grove_ctx *ctx, const grove_quadtree *t, const float *boxes,
                                        size_t nq, grove_query_result *out)
{
    static const char fn[] = "grove_quadtree_query_boxes";
    uint64_t *off;
    uint32_t *ind;
    size_t total = 0;
    int nt;

    GROVE_TRY(grove__check_ctx(ctx));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    memset(out, 0, sizeof *out);
    if (!t) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: t is NULL", fn);
    if (nq > 0 && !boxes)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: boxes is NULL with nq = %zu", fn, nq);
    if (nq > SIZE_MAX / sizeof(uint64_t) - 1)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: nq = %zu is too large", fn, nq);
    for (size_t q = 0; q < nq; q++) {
        const float *b = boxes + 4 * q;
        if (isnan(b[0]) || isnan(b[1]) || isnan(b[2]) || isnan(b[3]))
            return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                                "%s: query %zu has a NaN coordinate (%.9g, %.9g, %.9g, %.9g)", fn,
                                q, (double)b[0], (double)b[1], (double)b[2], (double)b[3]);
    }
#ifdef GROVE_HAVE_CUDA
    if (ctx->backend == GROVE_BACKEND_CUDA) {
        GROVE_TRY(grove__qt_query_boxes_cuda(ctx, fn, t, boxes, nq, &off, &ind));
        out->num_queries = nq;
        out->offsets = off;
        out->indices = ind;
        return GROVE_OK;
    }
#endif
    GROVE_TRY(need_host_arrays(ctx, fn, t));
    nt = grove__threads(ctx);
    off = (uint64_t *)malloc((nq + 1) * sizeof *off);
    if (!off)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu offsets", fn,
                            nq + 1);
    /* Two passes (count, then fill) keep the result in one allocation of the exact size. */
    off[0] = 0;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 8) if (nq > 8)
    for (size_t q = 0; q < nq; q++) off[q + 1] = box_query(t, boxes + 4 * q, NULL);
    for (size_t q = 0; q < nq; q++) off[q + 1] += off[q];
    total = (size_t)off[nq];
    if (off[nq] > SIZE_MAX / sizeof *ind) {
        free(off);
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: %llu matches do not fit in memory",
                            fn, (unsigned long long)total);
    }
    ind = (uint32_t *)malloc((total ? total : 1) * sizeof *ind);
    if (!ind) {
        free(off);
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "%s: out of memory for %zu matches (%zu bytes)", fn, total,
                            total * sizeof *ind);
    }
#pragma omp parallel for num_threads(nt) schedule(dynamic, 8) if (nq > 8)
    for (size_t q = 0; q < nq; q++) {
        size_t m = box_query(t, boxes + 4 * q, ind + off[q]);
        grove__qt_sort_u32(ind + off[q], m);
    }
    out->num_queries = nq;
    out->offsets = off;
    out->indices = ind;
    return GROVE_OK;
}

/* ---- k nearest neighbours ---- */

/* Squared distance in double, as the header promises every backend computes it: each square
 * and the sum are separate roundings (no FMA contraction across statements). */
static double dist2_point(double qx, double qy, float x, float y)
{
    double dx = (double)x - qx;
    double dy = (double)y - qy;
    double a = dx * dx;
    double b = dy * dy;
    return a + b;
}

/* A lower bound of dist2_point() over the node's box: rounding is monotone, so a point at least
 * as far out on each axis as the box's side rounds to at least this. */
static double dist2_box(double qx, double qy, const grove_quadtree_node *nd)
{
    double dx = 0.0, dy = 0.0, a, b;
    if (qx < (double)nd->xmin)
        dx = (double)nd->xmin - qx;
    else if (qx > (double)nd->xmax)
        dx = qx - (double)nd->xmax;
    if (qy < (double)nd->ymin)
        dy = (double)nd->ymin - qy;
    else if (qy > (double)nd->ymax)
        dy = qy - (double)nd->ymax;
    a = dx * dx;
    b = dy * dy;
    return a + b;
}

/* The k best so far: a max-heap by (dist2, input position). */
typedef struct knn_heap {
    double *d;
    uint32_t *id;
    size_t n, cap;
} knn_heap;

static int worse(double da, uint32_t ia, double db, uint32_t ib)
{
    return da > db || (da == db && ia > ib);
}

static void heap_sift_down(knn_heap *h, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < h->n && worse(h->d[l], h->id[l], h->d[w], h->id[w])) w = l;
        if (r < h->n && worse(h->d[r], h->id[r], h->d[w], h->id[w])) w = r;
        if (w == i) return;
        double td = h->d[i];
        uint32_t ti = h->id[i];
        h->d[i] = h->d[w];
        h->id[i] = h->id[w];
        h->d[w] = td;
        h->id[w] = ti;
        i = w;
    }
}

static void heap_offer(knn_heap *h, double d, uint32_t id)
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
        heap_sift_down(h, 0);
    }
}

static void knn_one(const grove_quadtree *t, double qx, double qy, knn_heap *h)
{
    const grove_quadtree_node *nodes = t->nodes;
    int32_t stack[QT_STACK];
    double sdist[QT_STACK];
    int sp = 0;
    h->n = 0;
    stack[sp] = 0;
    sdist[sp++] = dist2_box(qx, qy, &nodes[0]);
    while (sp > 0) {
        const grove_quadtree_node *nd;
        double nd_d;
        sp--;
        nd = &nodes[stack[sp]];
        nd_d = sdist[sp];
        /* Strictly greater: a node at exactly the k-th distance may hold a tie with a smaller
         * input position, which ranks before the current k-th. */
        if (h->n == h->cap && nd_d > h->d[0]) continue;
        if (nd->end == nd->begin) continue;
        if (nd->first_child >= 0) {
            int32_t c[4];
            double cd[4];
            for (int j = 0; j < 4; j++) {
                c[j] = nd->first_child + j;
                cd[j] = dist2_box(qx, qy, &nodes[c[j]]);
            }
            /* push the farthest first so the nearest child is searched first */
            for (int a = 1; a < 4; a++)
                for (int b = a; b > 0 && cd[b - 1] < cd[b]; b--) {
                    double td = cd[b];
                    int32_t tc = c[b];
                    cd[b] = cd[b - 1];
                    c[b] = c[b - 1];
                    cd[b - 1] = td;
                    c[b - 1] = tc;
                }
            for (int j = 0; j < 4; j++) {
                stack[sp] = c[j];
                sdist[sp++] = cd[j];
            }
        } else {
            for (uint32_t i = nd->begin; i < nd->end; i++)
                heap_offer(h, dist2_point(qx, qy, t->pts[2 * (size_t)i], t->pts[2 * (size_t)i + 1]),
                           t->index[i]);
        }
    }
}

grove_status grove_quadtree_knn(grove_ctx *ctx, const grove_quadtree *t, const float *queries,
                                size_t nq, int k, uint32_t *indices, double *dist2)
{
    static const char fn[] = "grove_quadtree_knn";
    grove_status st = GROVE_OK;
    size_t kk, cap;
    int nt;

    GROVE_TRY(grove__check_ctx(ctx));
    if (!t) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: t is NULL", fn);
    if (k < 1) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: k must be >= 1, got %d", fn, k);
    if (nq > 0 && !queries)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: queries is NULL with nq = %zu", fn,
                            nq);
    if (nq > 0 && !indices)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: indices is NULL with nq = %zu", fn,
                            nq);
    kk = (size_t)k;
    if (nq > SIZE_MAX / sizeof(double) / kk)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: nq * k = %zu * %d is too large", fn,
                            nq, k);
    for (size_t q = 0; q < nq; q++) {
        float x = queries[2 * q], y = queries[2 * q + 1];
        if (!isfinite(x) || !isfinite(y))
            return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                                "%s: query %zu is not finite (x=%.9g, y=%.9g)", fn, q, (double)x,
                                (double)y);
    }
#ifdef GROVE_HAVE_CUDA
    if (ctx->backend == GROVE_BACKEND_CUDA)
        return grove__qt_knn_cuda(ctx, fn, t, queries, nq, k, indices, dist2);
#endif
    GROVE_TRY(need_host_arrays(ctx, fn, t));
    cap = kk < t->n ? kk : t->n;
    nt = grove__threads(ctx);
#pragma omp parallel num_threads(nt) if (nq > 16)
    {
        knn_heap h;
        h.cap = cap;
        h.n = 0;
        h.d = (double *)malloc((cap ? cap : 1) * sizeof *h.d);
        h.id = (uint32_t *)malloc((cap ? cap : 1) * sizeof *h.id);
        if (!h.d || !h.id) {
#pragma omp critical(grove_qt_knn_err)
            st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                              "%s: out of memory for a heap of %zu neighbours", fn, cap);
        }
#pragma omp barrier
        if (st == GROVE_OK) {
#pragma omp for schedule(dynamic, 16)
            for (size_t q = 0; q < nq; q++) {
                uint32_t *oi = indices + q * kk;
                double *od = dist2 ? dist2 + q * kk : NULL;
                size_t m;
                if (cap > 0) knn_one(t, (double)queries[2 * q], (double)queries[2 * q + 1], &h);
                /* pop the worst to the back: ascending (dist2, input position) */
                for (m = h.n; m > 0; m--) {
                    oi[m - 1] = h.id[0];
                    if (od) od[m - 1] = h.d[0];
                    h.d[0] = h.d[h.n - 1];
                    h.id[0] = h.id[h.n - 1];
                    h.n--;
                    heap_sift_down(&h, 0);
                }
                for (m = cap; m < kk; m++) {
                    oi[m] = UINT32_MAX;
                    if (od) od[m] = INFINITY;
                }
            }
        }
        free(h.d);
        free(h.id);
    }
    return st;
}
