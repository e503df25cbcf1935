/*
 * kdtree_query_cuda.cu - k nearest neighbours and radius search on a k-d tree on the GPU
 * (declared in kdtree_query_cuda.h). The results are the CPU backend's bytes.
 *
 * One thread per query walks the preorder node array depth first, nearer child first, with the
 * CPU's stack discipline (depth + 2 entries: the first LSTACK in local memory, the rest, for
 * deep trees, in a global overflow area interleaved across threads). Threads take the queries in
 * Morton order (for kNN computed here, on the GPU; for radius search by kdtree_query.c), so that
 * neighbouring threads walk the same nodes and leaves. Distances use __dsub_rn / __dmul_rn /
 * __dadd_rn, so nothing is fused and every value rounds as the CPU's dist2_point and dist2_box.
 * A node is skipped only when its lower bound is strictly greater than the current bound (a tie
 * may still hold a smaller input position), so every search returns the unique set of the
 * smallest (dist2, input position) pairs, whatever order the nodes are visited in. kNN on 2-D
 * and 3-D trees of ordinary depth runs knn_fast (below), a leaner variant of the same search, or
 * for 2 <= k <= 32 the warp-packet search of kdtree_knn_warp_cuda.cu (32 queries per walk, with
 * float pre-filters; its node records are made once per call, knn_run).
 *
 * kNN: up to REG_MAX neighbours in registers (a sorted list, right-aligned behind sentinels, so
 * that the worst is always the last register); more in a max-heap kept in the query's own output
 * row, heap-sorted in place at the end. Queries go in batches of consecutive rows whose buffers
 * fit in BUDGET bytes, each batch in the Morton order of its rows.
 *
 * Radius: a count pass (a node whose farthest corner is within r counts all its points without
 * looking at them), the offsets on the host (it needs them anyway), then fill batches of about
 * OUT_CHUNK matches. Capped rows (as many matches as the cap) come out sorted from the kNN
 * searches bounded by r*r, in registers or a heap in the row. The other rows are written
 * unsorted by a warp-cooperative pass (a big contained node or leaf is copied by the whole
 * warp), then sorted by (dist2, index): a segmented sort by index, then a stable one by dist2
 * (non-negative doubles order as their bits), CUB's DeviceSegmentedSort for most rows and the
 * device-wide radix sort for rows of HUGE_ROW matches or more. Device memory stays bounded
 * whatever the number of matches; where even one row's matches do not fit, the call fails with
 * GROVE_ERR_DEVICE_OUT_OF_MEMORY.
 */
#include <cuda_runtime.h>

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_segmented_sort.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "../prim/prim_cuda.h"
#include "core_cuda.h"
#include "grove/prim.h"
#include "kdtree_knn_warp.h"
#include "kdtree_query_cuda.h"

namespace
{

typedef unsigned long long u64;

constexpr int BLOCK = 128;
constexpr int LSTACK = 48;  /* traversal stack entries in local memory */
constexpr int REG_MAX = 32; /* the largest register list */
constexpr unsigned FULL = 0xffffffffu;
constexpr u64 COOP_MIN = 32;               /* ranges longer than this: the whole warp */
constexpr u64 HUGE_ROW = (u64)1 << 20;     /* rows from this size: the device-wide sort */
constexpr u64 OUT_CHUNK = (u64)1 << 25;    /* matches per fill batch */
constexpr size_t QCHUNK = (size_t)1 << 22; /* radius queries resident at once */
constexpr size_t BUDGET = (size_t)1 << 30; /* bytes of per-query state per batch */
constexpr size_t KNN_MAX_BATCH = (size_t)1 << 24;
constexpr int MAXD = GROVE_KDTREE_MAX_DIMS;

static_assert(sizeof(grove_kdtree_node) == 5 * sizeof(u64), "node layout");
static_assert(offsetof(grove_kdtree_node, begin) == 0 && offsetof(grove_kdtree_node, end) == 8 &&
                  offsetof(grove_kdtree_node, right) == 16,
              "node layout");
static_assert(sizeof(uint64_t) == sizeof(u64), "64-bit indices");

cudaStream_t stream_of(grove_ctx *ctx) { return (cudaStream_t)ctx->stream; }

unsigned blocks_for(size_t m) { return (unsigned)((m + BLOCK - 1) / BLOCK); }

/* A device buffer and its size (grove__cuda_free needs the size back). */
struct Dev {
    void *p;
    size_t bytes;
};

grove_status dev_alloc(grove_ctx *ctx, Dev *b, size_t bytes, const char *what)
{
    b->p = NULL;
    b->bytes = 0;
    GROVE_TRY(grove__cuda_alloc(ctx, &b->p, bytes, ctx->stream, what));
    b->bytes = bytes;
    return GROVE_OK;
}

void dev_free(grove_ctx *ctx, Dev *b)
{
    grove__cuda_free(ctx, b->p, b->bytes, ctx->stream);
    b->p = NULL;
    b->bytes = 0;
}

/* Grows scratch *b to at least need bytes (sizes come from two-phase queries per call). */
grove_status ensure_temp(grove_ctx *ctx, Dev *b, size_t need, const char *what)
{
    if (need <= b->bytes) return GROVE_OK;
    dev_free(ctx, b);
    return dev_alloc(ctx, b, need, what);
}

/* ---- the tree on the device ---- */

struct DevTree {
    const u64 *nodes; /* grove_kdtree_node as 5 words: begin, end, right, split, axis|kind */
    const double *bounds;
    const void *pts;
    const u64 *index;
    int dims;
};

struct TreeUp {
    Dev nodes, bounds, pts, index;
};

grove_status tree_upload(grove_ctx *ctx, const grove_kdtree *t, TreeUp *u, DevTree *d)
{
    cudaStream_t s = stream_of(ctx);
    const size_t D = (size_t)t->dims;
    GROVE_TRY(dev_alloc(ctx, &u->nodes, t->num_nodes * sizeof(grove_kdtree_node),
                        "the k-d tree's nodes (query upload)"));
    GROVE_TRY(dev_alloc(ctx, &u->bounds, t->num_nodes * 2 * D * sizeof(double),
                        "the k-d tree's boxes (query upload)"));
    GROVE_TRY(dev_alloc(ctx, &u->pts, t->n * D * grove__kd_coord_size(t->type),
                        "the k-d tree's points (query upload)"));
    GROVE_TRY(
        dev_alloc(ctx, &u->index, t->n * sizeof(uint64_t), "the k-d tree's index (query upload)"));
    GROVE_TRY(grove__cuda_h2d(ctx, u->nodes.p, t->nodes, u->nodes.bytes, s));
    GROVE_TRY(grove__cuda_h2d(ctx, u->bounds.p, t->bounds, u->bounds.bytes, s));
    GROVE_TRY(grove__cuda_h2d(ctx, u->pts.p, t->pts, u->pts.bytes, s));
    GROVE_TRY(grove__cuda_h2d(ctx, u->index.p, t->index, u->index.bytes, s));
    d->nodes = (const u64 *)u->nodes.p;
    d->bounds = (const double *)u->bounds.p;
    d->pts = u->pts.p;
    d->index = (const u64 *)u->index.p;
    d->dims = t->dims;
    return GROVE_OK;
}

void tree_free(grove_ctx *ctx, TreeUp *u)
{
    dev_free(ctx, &u->nodes);
    dev_free(ctx, &u->bounds);
    dev_free(ctx, &u->pts);
    dev_free(ctx, &u->index);
}

/* Stack entries a query may need beyond LSTACK (the CPU allocates depth + 2). */
size_t overflow_entries(const grove_kdtree *t)
{
    return t->depth + 2 > (size_t)LSTACK ? t->depth + 2 - (size_t)LSTACK : 0;
}

/* Splits the visiting order into consecutive row ranges of `chunk` rows: out[c * chunk + j] is
 * the j-th row of range c in visiting order, relative to the range's first row. */
grove_status bucket_order(grove_ctx *ctx, const char *fn, const uint64_t *order, size_t nq,
                          size_t chunk, uint32_t **out)
{
    size_t nb = (nq + chunk - 1) / chunk;
    size_t *fill = (size_t *)malloc(nb * sizeof *fill);
    *out = (uint32_t *)malloc(nq * sizeof **out);
    if (!fill || !*out) {
        free(fill);
        free(*out);
        *out = NULL;
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "%s: out of memory for the visiting order of %zu queries", fn, nq);
    }
    for (size_t b = 0; b < nb; b++) fill[b] = b * chunk;
    for (size_t j = 0; j < nq; j++) {
        size_t r = (size_t)order[j], b = r / chunk;
        (*out)[fill[b]++] = (uint32_t)(r - b * chunk);
    }
    free(fill);
    return GROVE_OK;
}

/* ---- per-thread pieces of the searches ----
 * They are __host__ __device__ so that they can be exercised on a machine without a GPU against
 * the CPU backend; the library instantiates them only in kernels. The helpers below are the
 * device intrinsics on the GPU. */

#define KD_HD __host__ __device__ __forceinline__
#ifdef __CUDA_ARCH__
#define KD_UNROLL _Pragma("unroll")
#else
#define KD_UNROLL
#endif

template <class T> KD_HD T ldg(const T *p)
{
#ifdef __CUDA_ARCH__
    return __ldg(p);
#else
    return *p;
#endif
}

/* Correctly rounded, never fused into an FMA (on the host: one operation per call). */
KD_HD double sub_rn(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dsub_rn(a, b);
#else
    return a - b;
#endif
}

KD_HD double mul_rn(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}

KD_HD double add_rn(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}

/* D is the number of dimensions, or 0 for a run-time t.dims (up to MAXD, loops unrolled to MAXD
 * with an early exit so that every array index stays static). */
template <int D> struct QPoint {
    static constexpr int M = D ? D : MAXD;
    double x[M];
};

template <int D> KD_HD int ndims(const DevTree &t) { return D ? D : t.dims; }

template <int D>
KD_HD void load_query(QPoint<D> &q, const DevTree &t, const double *qs, uint32_t row)
{
    const int n = ndims<D>(t);
    KD_UNROLL
    for (int d = 0; d < QPoint<D>::M; d++) q.x[d] = (D || d < n) ? qs[(size_t)row * n + d] : 0.0;
}

template <bool F64> KD_HD double coord(const void *pts, u64 at)
{
    if constexpr (F64)
        return ldg(static_cast<const double *>(pts) + at);
    else
        return (double)ldg(static_cast<const float *>(pts) + at);
}

/* The CPU's dist2_point: per axis a difference, a square and a partial sum, in axis order. */
template <int D, bool F64> KD_HD double pt_dist2(const DevTree &t, u64 i, const QPoint<D> &q)
{
    const int n = ndims<D>(t);
    double s = 0.0;
    KD_UNROLL
    for (int d = 0; d < QPoint<D>::M; d++) {
        if (D == 0 && d >= n) break;
        const double dx = sub_rn(coord<F64>(t.pts, i * (u64)n + (u64)d), q.x[d]);
        s = add_rn(s, mul_rn(dx, dx));
    }
    return s;
}

/* The CPU's dist2_box: a lower bound of pt_dist2 over node's box; INFINITY for an empty box. */
template <int D> KD_HD double box_near2(const DevTree &t, u64 node, const QPoint<D> &q)
{
    const int n = ndims<D>(t);
    const double *bx = t.bounds + node * 2 * (u64)n;
    if (ldg(bx) > ldg(bx + n)) return INFINITY;
    double s = 0.0;
    KD_UNROLL
    for (int d = 0; d < QPoint<D>::M; d++) {
        if (D == 0 && d >= n) break;
        const double lo = ldg(bx + d), hi = ldg(bx + n + d);
        double dx = 0.0;
        if (q.x[d] < lo)
            dx = sub_rn(lo, q.x[d]);
        else if (q.x[d] > hi)
            dx = sub_rn(q.x[d], hi);
        s = add_rn(s, mul_rn(dx, dx));
    }
    return s;
}

/* An upper bound of pt_dist2 over a non-empty node's box: rounding is monotone and symmetric,
 * so |fl(x - q)| <= max(fl(q - lo), fl(hi - q)) for lo <= x <= hi, and the squares and sums
 * keep the order. A node with far2 <= r2 lies inside the ball. */
template <int D> KD_HD double box_far2(const DevTree &t, u64 node, const QPoint<D> &q)
{
    const int n = ndims<D>(t);
    const double *bx = t.bounds + node * 2 * (u64)n;
    double s = 0.0;
    KD_UNROLL
    for (int d = 0; d < QPoint<D>::M; d++) {
        if (D == 0 && d >= n) break;
        const double a = sub_rn(q.x[d], ldg(bx + d)), b = sub_rn(ldg(bx + n + d), q.x[d]);
        const double dx = a > b ? a : b;
        s = add_rn(s, mul_rn(dx, dx));
    }
    return s;
}

/* Whether the box is one point: then every point of the node has the same distance. */
template <int D> KD_HD bool box_is_point(const DevTree &t, u64 node)
{
    const int n = ndims<D>(t);
    const double *bx = t.bounds + node * 2 * (u64)n;
    bool same = true;
    KD_UNROLL
    for (int d = 0; d < QPoint<D>::M; d++) {
        if (D == 0 && d >= n) break;
        same = same && ldg(bx + d) == ldg(bx + n + d);
    }
    return same;
}

KD_HD u64 node_begin(const DevTree &t, u64 i) { return ldg(t.nodes + 5 * i); }
KD_HD u64 node_end(const DevTree &t, u64 i) { return ldg(t.nodes + 5 * i + 1); }
KD_HD u64 node_right(const DevTree &t, u64 i) { return ldg(t.nodes + 5 * i + 2); }

KD_HD bool better(double da, u64 ia, double db, u64 ib) { return da < db || (da == db && ia < ib); }

/* Where the stack goes beyond LSTACK: entry j of the thread in slot s is at j * stride + s, so
 * a warp's entries at one depth are adjacent. */
struct Overflow {
    u64 *node;
    double *lb;
    size_t stride;
};

struct Stack {
    u64 node[LSTACK];
    double lb[LSTACK];
    int sp;
    Overflow ov;
    size_t slot;

    KD_HD void init(const Overflow &o, size_t s)
    {
        sp = 0;
        ov = o;
        slot = s;
    }
    KD_HD void push(u64 id, double l)
    {
        if (sp < LSTACK) {
            node[sp] = id;
            lb[sp] = l;
        } else {
            const size_t at = (size_t)(sp - LSTACK) * ov.stride + slot;
            ov.node[at] = id;
            ov.lb[at] = l;
        }
        sp++;
    }
    KD_HD void pop(u64 &id, double &l)
    {
        sp--;
        if (sp < LSTACK) {
            id = node[sp];
            l = lb[sp];
        } else {
            const size_t at = (size_t)(sp - LSTACK) * ov.stride + slot;
            id = ov.node[at];
            l = ov.lb[at];
        }
    }
};

/* Pushes the children of inner node id whose bound does not exceed `bound`, nearer on top
 * (the CPU's order; only the speed depends on it). */
template <int D>
KD_HD void push_children(const DevTree &t, u64 id, u64 right, const QPoint<D> &q, double bound,
                         Stack &st)
{
    const u64 a = id + 1;
    const double la = box_near2<D>(t, a, q), lc = box_near2<D>(t, right, q);
    if (la <= lc) {
        if (!(lc > bound)) st.push(right, lc);
        if (!(la > bound)) st.push(a, la);
    } else {
        if (!(la > bound)) st.push(a, la);
        if (!(lc > bound)) st.push(right, lc);
    }
}

/* A leaf of more points than any leaf size holds only equal points (the build's rule). They
 * share one distance and are in ascending input order, so once one is rejected, all later
 * ones are: the searches stop there instead of scanning a leaf of millions of duplicates. */
template <int D> KD_HD bool dup_leaf(const DevTree &t, u64 id, u64 b, u64 e)
{
    return e - b > (u64)GROVE_KDTREE_MAX_LEAF && box_is_point<D>(t, id);
}

/* Inserts (d, id) into the register list in place of its last entry (which it beats). */
template <int K> KD_HD void reg_insert(double (&bd)[K], u64 (&bi)[K], double d, u64 id)
{
    bd[K - 1] = d;
    bi[K - 1] = id;
    KD_UNROLL
    for (int j = K - 1; j > 0; j--) {
        if (!better(bd[j], bi[j], bd[j - 1], bi[j - 1])) break;
        const double td = bd[j];
        const u64 ti = bi[j];
        bd[j] = bd[j - 1];
        bi[j] = bi[j - 1];
        bd[j - 1] = td;
        bi[j - 1] = ti;
    }
}

/* The cap (1..K) smallest pairs with dist2 <= r2, in registers: the list is sorted ascending and
 * right-aligned, slots [0, K - cap) holding sentinels that rank before every point, so the
 * cap-th best is always slot K - 1 (selecting slot cap - 1 would be a dynamic index, which moves
 * the list to local memory). Until the list is full its last entry is (INFINITY, UINT64_MAX),
 * which every point beats (an input position is never UINT64_MAX), even at an infinite
 * distance. */
template <int K, int D, bool F64>
KD_HD void search_reg(const DevTree &t, const QPoint<D> &q, double r2, int cap, Stack &st,
                      double (&bd)[K], u64 (&bi)[K])
{
    KD_UNROLL
    for (int j = 0; j < K; j++) {
        const bool pad = j < K - cap;
        bd[j] = pad ? -INFINITY : INFINITY;
        bi[j] = pad ? 0 : UINT64_MAX;
    }
    st.push(0, box_near2<D>(t, 0, q));
    while (st.sp > 0) {
        u64 id;
        double lb;
        st.pop(id, lb);
        double bound = bd[K - 1] < r2 ? bd[K - 1] : r2;
        if (lb > bound) continue;
        const u64 right = node_right(t, id);
        if (right != 0) {
            push_children<D>(t, id, right, q, bound, st);
            continue;
        }
        const u64 b = node_begin(t, id), e = node_end(t, id);
        if (dup_leaf<D>(t, id, b, e)) {
            const double d = pt_dist2<D, F64>(t, b, q);
            for (u64 i = b; i < e && !(d > bound); i++) {
                const u64 ix = ldg(t.index + i);
                if (!better(d, ix, bd[K - 1], bi[K - 1])) break;
                reg_insert<K>(bd, bi, d, ix);
                bound = bd[K - 1] < r2 ? bd[K - 1] : r2;
            }
            continue;
        }
        for (u64 i = b; i < e; i++) {
            const double d = pt_dist2<D, F64>(t, i, q);
            if (d > bound) continue;
            const u64 ix = ldg(t.index + i);
            if (!better(d, ix, bd[K - 1], bi[K - 1])) continue;
            reg_insert<K>(bd, bi, d, ix);
            bound = bd[K - 1] < r2 ? bd[K - 1] : r2;
        }
    }
}

/* Writes the cap real entries of a register list to ri / rd (rd may be NULL). */
template <int K>
KD_HD void reg_write(const double (&bd)[K], const u64 (&bi)[K], int cap, u64 *ri, double *rd)
{
    KD_UNROLL
    for (int j = 0; j < K; j++)
        if (j >= K - cap) {
            ri[j - (K - cap)] = bi[j];
            if (rd) rd[j - (K - cap)] = bd[j];
        }
}

/* A max-heap by (dist2, input position) of n entries at hd / hi: places (d, id) in the hole at
 * i, moving worse children up. */
__host__ __device__ void heap_sift_down(double *hd, u64 *hi, u64 n, u64 i, double d, u64 id)
{
    for (;;) {
        const u64 l = 2 * i + 1;
        if (l >= n) break;
        u64 w = l;
        double wd = hd[l];
        u64 wi = hi[l];
        if (l + 1 < n && better(wd, wi, hd[l + 1], hi[l + 1])) {
            w = l + 1;
            wd = hd[w];
            wi = hi[w];
        }
        if (!better(d, id, wd, wi)) break;
        hd[i] = wd;
        hi[i] = wi;
        i = w;
    }
    hd[i] = d;
    hi[i] = id;
}

/* The cap smallest pairs with dist2 <= r2 in a max-heap at hd / hi (global memory, the query's
 * own output row); returns their number. */
template <int D, bool F64>
__host__ __device__ u64 search_heap(const DevTree &t, const QPoint<D> &q, double r2, u64 cap,
                                    Stack &st, double *hd, u64 *hi)
{
    u64 hn = 0;
    double kd = INFINITY; /* the head once the heap is full */
    u64 kid = UINT64_MAX;
    st.push(0, box_near2<D>(t, 0, q));
    while (st.sp > 0) {
        u64 id;
        double lb;
        st.pop(id, lb);
        double bound = kd < r2 ? kd : r2;
        if (lb > bound) continue;
        const u64 right = node_right(t, id);
        if (right != 0) {
            push_children<D>(t, id, right, q, bound, st);
            continue;
        }
        const u64 b = node_begin(t, id), e = node_end(t, id);
        const bool dup = dup_leaf<D>(t, id, b, e);
        const double dd = dup ? pt_dist2<D, F64>(t, b, q) : 0.0;
        for (u64 i = b; i < e; i++) {
            const double d = dup ? dd : pt_dist2<D, F64>(t, i, q);
            if (d > bound) {
                if (dup) break;
                continue;
            }
            const u64 ix = ldg(t.index + i);
            if (hn < cap) {
                u64 j = hn++;
                while (j > 0) { /* sift up */
                    const u64 p = (j - 1) / 2;
                    if (!better(hd[p], hi[p], d, ix)) break;
                    hd[j] = hd[p];
                    hi[j] = hi[p];
                    j = p;
                }
                hd[j] = d;
                hi[j] = ix;
            } else {
                if (!better(d, ix, kd, kid)) {
                    if (dup) break;
                    continue;
                }
                heap_sift_down(hd, hi, hn, 0, d, ix);
            }
            if (hn == cap) {
                kd = hd[0];
                kid = hi[0];
            }
            bound = kd < r2 ? kd : r2;
        }
    }
    return hn;
}

/* Heap sort in place: pops the worst to the back, leaving ascending (dist2, input position). */
__host__ __device__ void heap_sort(double *hd, u64 *hi, u64 n)
{
    for (; n > 1; n--) {
        const double td = hd[0];
        const u64 ti = hi[0];
        heap_sift_down(hd, hi, n - 1, 0, hd[n - 1], hi[n - 1]);
        hd[n - 1] = td;
        hi[n - 1] = ti;
    }
}

/* ---- kNN kernels: batch row `row` = ord[pos]; its output row is oi[row * k ...] ---- */

template <int K, int D, bool F64>
__global__ void __launch_bounds__(BLOCK)
    knn_reg(DevTree t, const double *qs, const uint32_t *ord, uint32_t m, int cap, int k,
            Overflow ov, u64 *oi, double *od)
{
    const uint32_t pos = blockIdx.x * BLOCK + threadIdx.x;
    if (pos >= m) return;
    const uint32_t row = ord[pos];
    QPoint<D> q;
    Stack st;
    double bd[K];
    u64 bi[K];
    load_query<D>(q, t, qs, row);
    st.init(ov, pos);
    search_reg<K, D, F64>(t, q, INFINITY, cap, st, bd, bi);
    u64 *ri = oi + (size_t)row * (size_t)k;
    double *rd = od ? od + (size_t)row * (size_t)k : NULL;
    reg_write<K>(bd, bi, cap, ri, rd);
    for (int j = cap; j < k; j++) {
        ri[j] = UINT64_MAX;
        if (rd) rd[j] = INFINITY;
    }
}

template <int D, bool F64>
__global__ void __launch_bounds__(BLOCK)
    knn_heap(DevTree t, const double *qs, const uint32_t *ord, uint32_t m, u64 cap, int k,
             Overflow ov, u64 *oi, double *od)
{
    const uint32_t pos = blockIdx.x * BLOCK + threadIdx.x;
    if (pos >= m) return;
    const uint32_t row = ord[pos];
    QPoint<D> q;
    Stack st;
    load_query<D>(q, t, qs, row);
    st.init(ov, pos);
    u64 *ri = oi + (size_t)row * (size_t)k;
    double *rd = od + (size_t)row * (size_t)k;
    const u64 hn = search_heap<D, F64>(t, q, INFINITY, cap, st, rd, ri);
    heap_sort(rd, ri, hn);
    for (u64 j = hn; j < (u64)k; j++) {
        ri[j] = UINT64_MAX;
        rd[j] = INFINITY;
    }
}

/* ---- the kNN fast path: up to REG_MAX neighbours in registers, 32-bit positions ----
 * For trees of fewer than 2^32 points (and nodes) in 2 or 3 dimensions whose stack fits FSTACK
 * entries, the common case on a GPU. Against knn_reg: a stack entry is one 64-bit word (the
 * node, and its box's lower bound rounded down to float), the list keeps 32-bit input positions
 * and there is no overflow area, so fewer registers and less local memory per thread (K = 8:
 * 63 registers and 50% occupancy, against 80 and 37.5%); and one pass of the loop is either
 * one inner node or one leaf point (a leaf cursor survives between passes), so that lanes at
 * inner nodes and lanes in leaves of a warp interleave in short steps instead of the warp
 * waiting for its longest leaf scan (measured on the H100: 2 points per pass was 2% faster for
 * K <= 16 and 2x slower for K = 32, 4 or all points slower). Rounding the bound down keeps it a
 * lower bound, so a node is still only skipped when all its points are strictly beyond the
 * current k-th: the results are knn_reg's. The stack never holds more than depth + 2 entries
 * (one pending sibling per level, plus two children). */

constexpr int FSTACK = 64;

/* Blocks per SM to ask of the compiler: 64 registers for K <= 8, more for longer lists. */
constexpr int fast_min_blocks(int K) { return K <= 8 ? 8 : K <= 16 ? 3 : 1; }

KD_HD bool better32(double da, uint32_t ia, double db, uint32_t ib)
{
    return da < db || (da == db && ia < ib);
}

template <int K> KD_HD void reg_insert32(double (&bd)[K], uint32_t (&bi)[K], double d, uint32_t id)
{
    bd[K - 1] = d;
    bi[K - 1] = id;
    KD_UNROLL
    for (int j = K - 1; j > 0; j--) {
        if (!better32(bd[j], bi[j], bd[j - 1], bi[j - 1])) break;
        const double td = bd[j];
        const uint32_t ti = bi[j];
        bd[j] = bd[j - 1];
        bi[j] = bi[j - 1];
        bd[j - 1] = td;
        bi[j - 1] = ti;
    }
}

/* A stack word: the float bits of a non-negative lower bound (they order as the values) above
 * the node id. */
__device__ __forceinline__ u64 fpack(uint32_t node, double lb)
{
    return ((u64)__float_as_uint(__double2float_rd(lb)) << 32) | node;
}

template <int K, int D, bool F64>
__global__ void __launch_bounds__(BLOCK, fast_min_blocks(K))
    knn_fast(DevTree t, const double *qs, const uint32_t *ord, uint32_t m, int cap, int k,
             u64 *oi, double *od)
{
    const uint32_t pos = blockIdx.x * BLOCK + threadIdx.x;
    if (pos >= m) return;
    const uint32_t row = ord[pos];
    QPoint<D> q;
    double bd[K];
    uint32_t bi[K];
    u64 stk[FSTACK];
    load_query<D>(q, t, qs, row);
    KD_UNROLL
    for (int j = 0; j < K; j++) {
        const bool pad = j < K - cap;
        bd[j] = pad ? -INFINITY : INFINITY;
        bi[j] = pad ? 0u : UINT32_MAX;
    }
    int sp = 0;
    uint32_t cur = 0, end = 0; /* the leaf points still to test */
    stk[sp++] = fpack(0, box_near2<D>(t, 0, q));
    for (;;) {
        if (cur < end) {
            const double d = pt_dist2<D, F64>(t, cur, q);
            if (!(d > bd[K - 1])) {
                const uint32_t ix = (uint32_t)ldg(t.index + cur);
                if (better32(d, ix, bd[K - 1], bi[K - 1])) reg_insert32<K>(bd, bi, d, ix);
            }
            cur++;
            continue;
        }
        if (sp == 0) break;
        const u64 w = stk[--sp];
        const uint32_t id = (uint32_t)w;
        const double bound = bd[K - 1];
        if ((double)__uint_as_float((uint32_t)(w >> 32)) > bound) continue;
        const u64 right = node_right(t, id);
        if (right != 0) {
            const u64 a = (u64)id + 1;
            const double la = box_near2<D>(t, a, q), lc = box_near2<D>(t, right, q);
            const bool near_left = la <= lc;
            const double l1 = near_left ? lc : la, l2 = near_left ? la : lc;
            const uint32_t n1 = near_left ? (uint32_t)right : (uint32_t)a;
            const uint32_t n2 = near_left ? (uint32_t)a : (uint32_t)right;
            if (!(l1 > bound)) stk[sp++] = fpack(n1, l1);
            if (!(l2 > bound)) stk[sp++] = fpack(n2, l2);
            continue;
        }
        const u64 b = node_begin(t, id), e = node_end(t, id);
        if (dup_leaf<D>(t, id, b, e)) { /* equal points in input order: stop at the first miss */
            const double d = pt_dist2<D, F64>(t, b, q);
            for (u64 i = b; i < e && !(d > bd[K - 1]); i++) {
                const uint32_t ix = (uint32_t)ldg(t.index + i);
                if (!better32(d, ix, bd[K - 1], bi[K - 1])) break;
                reg_insert32<K>(bd, bi, d, ix);
            }
            continue;
        }
        cur = (uint32_t)b;
        end = (uint32_t)e;
    }
    u64 *ri = oi + (size_t)row * (size_t)k;
    double *rd = od ? od + (size_t)row * (size_t)k : NULL;
    KD_UNROLL
    for (int j = 0; j < K; j++)
        if (j >= K - cap) {
            ri[j - (K - cap)] = bi[j];
            if (rd) rd[j - (K - cap)] = bd[j];
        }
    for (int j = cap; j < k; j++) {
        ri[j] = UINT64_MAX;
        if (rd) rd[j] = INFINITY;
    }
}

/* ---- radius kernels ---- */

/* How a row of n output matches is filled (cap: the cap, or 0 without one): 0 a capped row
 * (n == cap), sorted by the search itself; the others unsorted by radius_fill_all, then 1 a
 * segmented sort, 2 the device-wide sort, 3 nothing to sort (n <= 1). */
__host__ __device__ __forceinline__ int row_class(u64 n, u64 cap)
{
    if (n == cap && n > 0) return 0;
    if (n <= 1) return 3;
    return n < HUGE_ROW ? 1 : 2;
}

/* The number of tree points within r2 of q (before any cap). */
template <int D, bool F64>
__host__ __device__ u64 count_within(const DevTree &t, const QPoint<D> &q, double r2, Stack &st)
{
    u64 c = 0;
    st.push(0, box_near2<D>(t, 0, q));
    while (st.sp > 0) {
        u64 id;
        double lb;
        st.pop(id, lb);
        if (lb > r2) continue;
        const u64 b = node_begin(t, id), e = node_end(t, id);
        if (b == e) continue;
        if (box_far2<D>(t, id, q) <= r2) {
            c += e - b;
            continue;
        }
        const u64 right = node_right(t, id);
        if (right != 0) {
            push_children<D>(t, id, right, q, r2, st);
            continue;
        }
        for (u64 i = b; i < e; i++)
            if (pt_dist2<D, F64>(t, i, q) <= r2) c++;
    }
    return c;
}

template <int D, bool F64>
__global__ void __launch_bounds__(BLOCK)
    radius_count(DevTree t, const double *qs, const uint32_t *ord, uint32_t m, double r2,
                 Overflow ov, u64 *cnt)
{
    const uint32_t pos = blockIdx.x * BLOCK + threadIdx.x;
    if (pos >= m) return;
    const uint32_t row = ord[pos];
    QPoint<D> q;
    Stack st;
    load_query<D>(q, t, qs, row);
    st.init(ov, pos);
    cnt[row] = count_within<D, F64>(t, q, r2, st);
}

/* Fills the capped rows (class 0) among the batch rows lo <= row < hi: row's matches go to
 * oi / od[off[row] - base ...], sorted, by the kNN search bounded by r2: in registers (K = 8 or
 * REG_MAX, at least the cap) or, for K = 0, in a heap in the row itself. Every such row has
 * exactly cap entries, so one instantiation serves the whole launch. */
template <int K, int D, bool F64>
__global__ void __launch_bounds__(BLOCK)
    radius_fill_capped(DevTree t, const double *qs, const uint32_t *ord, uint32_t m, uint32_t lo,
                       uint32_t hi, const u64 *off, u64 base, double r2, u64 cap, Overflow ov,
                       u64 *oi, double *od)
{
    const uint32_t pos = blockIdx.x * BLOCK + threadIdx.x;
    if (pos >= m) return;
    const uint32_t row = ord[pos];
    if (row < lo || row >= hi) return;
    const u64 b0 = off[row], n = off[row + 1] - b0;
    if (row_class(n, cap) != 0) return;
    QPoint<D> q;
    Stack st;
    load_query<D>(q, t, qs, row);
    st.init(ov, pos);
    u64 *ri = oi + (b0 - base);
    double *rd = od + (b0 - base);
    if constexpr (K == 0) {
        const u64 hn = search_heap<D, F64>(t, q, r2, n, st, rd, ri);
        heap_sort(rd, ri, hn);
    } else {
        double bd[K];
        u64 bi[K];
        search_reg<K, D, F64>(t, q, r2, (int)n, st, bd, bi);
        reg_write<K>(bd, bi, (int)n, ri, rd);
    }
}

/* Writes the matches of the batch rows of classes 1 to 3, unsorted. Nodes inside the ball and
 * leaves with more than COOP_MIN points are handed to the whole warp (the owner publishes the
 * job by ballot), so one large row does not serialise its warp on one thread; every lane stays
 * in the loop until the whole warp is done, because the jobs need all 32 lanes. */
template <int D, bool F64>
__global__ void __launch_bounds__(BLOCK)
    radius_fill_all(DevTree t, const double *qs, const uint32_t *ord, uint32_t m, uint32_t lo,
                    uint32_t hi, const u64 *off, u64 base, double r2, u64 cap, Overflow ov, u64 *oi,
                    double *od)
{
    const unsigned lane = threadIdx.x & 31u;
    const uint32_t pos = blockIdx.x * BLOCK + threadIdx.x;
    const uint32_t row = pos < m ? ord[pos] : 0;
    bool active = pos < m && row >= lo && row < hi;
    u64 cur = 0, end = 0;
    if (active) {
        cur = off[row] - base;
        end = off[row + 1] - base;
        active = end > cur && row_class(end - cur, cap) != 0;
    }
    QPoint<D> q;
    Stack st;
    load_query<D>(q, t, qs, row); /* idle lanes load row 0: they only join the warp's jobs */
    st.init(ov, pos);
    if (active) st.push(0, box_near2<D>(t, 0, q));
    while (__any_sync(FULL, st.sp > 0)) {
        bool job = false, filter = false;
        u64 jb = 0, je = 0, jdst = 0;
        if (st.sp > 0) {
            u64 id;
            double lb;
            st.pop(id, lb);
            const u64 b = node_begin(t, id), e = node_end(t, id);
            if (!(lb > r2) && b < e) {
                const bool inside = box_far2<D>(t, id, q) <= r2;
                const u64 right = node_right(t, id);
                if (!inside && right != 0) {
                    push_children<D>(t, id, right, q, r2, st);
                } else if (e - b > COOP_MIN) {
                    job = true;
                    filter = !inside;
                    jb = b;
                    je = e;
                    jdst = cur;
                    if (inside) cur += e - b;
                } else {
                    for (u64 i = b; i < e; i++) {
                        const double d = pt_dist2<D, F64>(t, i, q);
                        if ((inside || d <= r2) && cur < end) {
                            oi[cur] = __ldg(t.index + i);
                            od[cur] = d;
                            cur++;
                        }
                    }
                }
            }
        }
        unsigned want = __ballot_sync(FULL, job);
        while (want) {
            const int L = __ffs(want) - 1;
            want &= want - 1;
            const u64 s = __shfl_sync(FULL, jb, L), e = __shfl_sync(FULL, je, L);
            const u64 dst = __shfl_sync(FULL, jdst, L), lim = __shfl_sync(FULL, end, L);
            const bool flt = __shfl_sync(FULL, (int)filter, L) != 0;
            QPoint<D> lq;
#pragma unroll
            for (int d = 0; d < QPoint<D>::M; d++) lq.x[d] = __shfl_sync(FULL, q.x[d], L);
            u64 total = 0;
            for (u64 i0 = s; i0 < e; i0 += 32) {
                const u64 i = i0 + lane;
                const bool in = i < e;
                const double d = in ? pt_dist2<D, F64>(t, i, lq) : 0.0;
                if (!flt) {
                    if (in && dst + (i - s) < lim) {
                        oi[dst + (i - s)] = __ldg(t.index + i);
                        od[dst + (i - s)] = d;
                    }
                    continue;
                }
                const bool hit = in && d <= r2;
                const unsigned hm = __ballot_sync(FULL, hit);
                const u64 at = dst + total + (u64)__popc(hm & ((1u << lane) - 1u));
                if (hit && at < lim) {
                    oi[at] = __ldg(t.index + i);
                    od[at] = d;
                }
                total += (u64)__popc(hm);
            }
            if ((int)lane == L && flt) cur += total;
        }
    }
}

/* ---- shapes: kernels are specialised for 2 and 3 dimensions, the rest run with D = 0 ---- */

template <int D_, bool F64_> struct Shape {
    static constexpr int D = D_;
    static constexpr bool F64 = F64_;
};

template <class Fn> void with_shape(int dims, bool f64, Fn fn)
{
    if (dims == 2) {
        if (f64)
            fn(Shape<2, true>());
        else
            fn(Shape<2, false>());
    } else if (dims == 3) {
        if (f64)
            fn(Shape<3, true>());
        else
            fn(Shape<3, false>());
    } else {
        if (f64)
            fn(Shape<0, true>());
        else
            fn(Shape<0, false>());
    }
}

/* ---- kNN host side ----
 * The queries are ordered on the GPU: a prep kernel converts a batch's queries to doubles (row
 * order) and computes their Morton codes in the root box, a radix sort of (code, row) pairs gives
 * the visiting order, and each kNN thread writes the row of the query it took, so the rows come
 * out in the caller's order. */

struct RootBox {
    double lo[MAXD], hi[MAXD];
};

/* Bits per axis of the query Morton codes: prim's 2-D (16) and 3-D (21) codes, else the CPU's
 * 63 / dims (at most 21). */
int morton_bits(int D) { return D == 2 ? 16 : D == 3 ? 21 : (63 / D < 21 ? 63 / D : 21); }

template <typename T>
__global__ void __launch_bounds__(BLOCK)
    knn_prep(const T *__restrict__ q, uint32_t m, int D, RootBox rb, int bits,
             double *__restrict__ qd, u64 *__restrict__ keys, uint32_t *__restrict__ vals)
{
    const uint32_t i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= m) return;
    const double scale = (double)((1u << bits) - 1u);
    uint32_t u[MAXD];
#pragma unroll
    for (int d = 0; d < MAXD; d++) {
        u[d] = 0;
        if (d >= D) continue;
        const double v = (double)q[(size_t)i * D + d];
        qd[(size_t)i * D + d] = v;
        const double lo = rb.lo[d], hi = rb.hi[d];
        double f = hi > lo ? (v - lo) / (hi - lo) : 0.0;
        if (!(f > 0.0)) f = 0.0; /* also NaN from an infinite extent */
        if (f > 1.0) f = 1.0;
        u[d] = (uint32_t)(f * scale);
    }
    u64 code = 0;
    if (D == 3) {
        code = grove_morton3(u[0], u[1], u[2]);
    } else if (D == 2) {
        code = grove_morton2(u[0], u[1]);
    } else {
        for (int b = bits - 1; b >= 0; b--)
#pragma unroll
            for (int d = 0; d < MAXD; d++)
                if (d < D) code = (code << 1) | ((u[d] >> b) & 1u);
    }
    keys[i] = code;
    vals[i] = i;
}

__global__ void knn_pad(u64 *oi, double *od, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)BLOCK + threadIdx.x; i < count;
         i += (size_t)gridDim.x * BLOCK) {
        oi[i] = ~0ull;
        if (od) od[i] = INFINITY;
    }
}

/* The device buffers of one kNN call, per batch of `batch` queries. */
struct KnnRun {
    TreeUp up;
    DevTree t;
    Dev qraw, qd, keys, keys2, vals, ord, temp, oi, od, ovn, ovl;
    Dev rec; /* the warp kernel's node records, when it runs */
    size_t batch, temp_bytes;
};

void knn_bufs_free(grove_ctx *ctx, KnnRun *R)
{
    Dev *all[] = {&R->qraw, &R->qd, &R->keys, &R->keys2, &R->vals, &R->ord,
                  &R->temp, &R->oi, &R->od,   &R->ovn,   &R->ovl,  &R->rec};
    for (Dev *d : all) dev_free(ctx, d);
}

/* host: the queries and outputs are in host memory (staged through qraw / oi / od); od_dev:
 * distances are needed on the device (the caller's array, or the heap's scratch). */
grove_status knn_bufs_alloc(grove_ctx *ctx, KnnRun *R, size_t D, size_t es, size_t k, bool host,
                            bool need_d, bool own_d, size_t ovf, int end_bit)
{
    const size_t b = R->batch;
    cudaStream_t s = stream_of(ctx);
    if (host) GROVE_TRY(dev_alloc(ctx, &R->qraw, b * D * es, "kNN queries"));
    GROVE_TRY(dev_alloc(ctx, &R->qd, b * D * sizeof(double), "kNN queries as doubles"));
    GROVE_TRY(dev_alloc(ctx, &R->keys, b * sizeof(u64), "kNN query Morton codes"));
    GROVE_TRY(dev_alloc(ctx, &R->keys2, b * sizeof(u64), "kNN query Morton codes"));
    GROVE_TRY(dev_alloc(ctx, &R->vals, b * sizeof(uint32_t), "kNN query rows"));
    GROVE_TRY(dev_alloc(ctx, &R->ord, b * sizeof(uint32_t), "kNN query order"));
    R->temp_bytes = 0;
    /* sized for pairs: with NULL values the sort would size a keys-only pass */
    GROVE_TRY(grove__cuda_sort(ctx, NULL, &R->temp_bytes, GROVE_U64, R->keys.p, R->keys2.p, 4,
                               R->vals.p, R->ord.p, b, 0, end_bit, s));
    GROVE_TRY(dev_alloc(ctx, &R->temp, R->temp_bytes, "kNN query sort scratch"));
    if (host) GROVE_TRY(dev_alloc(ctx, &R->oi, b * k * sizeof(uint64_t), "kNN result indices"));
    if (own_d && need_d)
        GROVE_TRY(dev_alloc(ctx, &R->od, b * k * sizeof(double), "kNN result distances"));
    if (ovf) {
        GROVE_TRY(dev_alloc(ctx, &R->ovn, b * ovf * sizeof(u64), "kNN traversal stacks"));
        GROVE_TRY(dev_alloc(ctx, &R->ovl, b * ovf * sizeof(double), "kNN traversal stacks"));
    }
    return GROVE_OK;
}

/* The tree on the device: its own arrays if it has them, else an upload for the call. */
grove_status tree_device(grove_ctx *ctx, const grove_kdtree *t, TreeUp *u, DevTree *d)
{
    if (!t->dev_ctx) return tree_upload(ctx, t, u, d);
    d->nodes = (const u64 *)t->d_nodes;
    d->bounds = (const double *)t->d_bounds;
    d->pts = t->d_pts;
    d->index = (const u64 *)t->d_index;
    d->dims = t->dims;
    return GROVE_OK;
}

/* Orders and answers batch queries [0, m) at raw (q's type, device): rows go to oi / od. */
grove_status knn_batch(grove_ctx *ctx, const grove_kdtree *t, KnnRun *R, const void *raw,
                       grove_coord_type qt, size_t m, int k, size_t cap, const RootBox &rb,
                       int bits, int end_bit, u64 *oi, double *od)
{
    cudaStream_t s = stream_of(ctx);
    const unsigned g = blocks_for(m);
    const uint32_t mm = (uint32_t)m;
    const int D = t->dims;
    double *qd = (double *)R->qd.p;
    u64 *keys = (u64 *)R->keys.p;
    uint32_t *vals = (uint32_t *)R->vals.p, *ord = (uint32_t *)R->ord.p;
    if (qt == GROVE_COORD_F64)
        knn_prep<double><<<g, BLOCK, 0, s>>>((const double *)raw, mm, D, rb, bits, qd, keys, vals);
    else
        knn_prep<float><<<g, BLOCK, 0, s>>>((const float *)raw, mm, D, rb, bits, qd, keys, vals);
    GROVE_CUDA_LAUNCHED(ctx, "k-d tree kNN query ordering kernel");
    size_t tb = R->temp_bytes;
    GROVE_TRY(grove__cuda_sort(ctx, R->temp.p, &tb, GROVE_U64, keys, R->keys2.p, 4, vals, ord, m,
                               0, end_bit, s));
    const Overflow ov = {(u64 *)R->ovn.p, (double *)R->ovl.p, R->batch};
    const bool heap = cap > (size_t)REG_MAX;
    const bool fast = !heap && (D == 2 || D == 3) && t->n <= (size_t)UINT32_MAX &&
                      t->num_nodes <= (size_t)UINT32_MAX && t->depth + 2 <= (size_t)FSTACK;
    if (R->rec.p) {
        const grove__kdw_launch l = {(const uint32_t *)R->rec.p,
                                     R->t.nodes,
                                     R->t.bounds,
                                     R->t.pts,
                                     R->t.index,
                                     qd,
                                     ord,
                                     mm,
                                     (int)cap,
                                     k,
                                     D,
                                     t->type == GROVE_COORD_F64,
                                     oi,
                                     od};
        GROVE_CUDA_TRY(ctx, grove__kdw_knn(&l, s), "k-d tree kNN kernel (warp)");
        return GROVE_OK;
    }
    with_shape(D, t->type == GROVE_COORD_F64, [&](auto sh) {
        typedef decltype(sh) S;
        const DevTree &dt = R->t;
        const int c = (int)cap;
        if constexpr (S::D != 0) {
            if (fast) {
                if (c <= 1)
                    knn_fast<1, S::D, S::F64><<<g, BLOCK, 0, s>>>(dt, qd, ord, mm, c, k, oi, od);
                else if (c <= 8)
                    knn_fast<8, S::D, S::F64><<<g, BLOCK, 0, s>>>(dt, qd, ord, mm, c, k, oi, od);
                else if (c <= 16)
                    knn_fast<16, S::D, S::F64><<<g, BLOCK, 0, s>>>(dt, qd, ord, mm, c, k, oi, od);
                else
                    knn_fast<REG_MAX, S::D, S::F64>
                        <<<g, BLOCK, 0, s>>>(dt, qd, ord, mm, c, k, oi, od);
                return;
            }
        }
        if (heap)
            knn_heap<S::D, S::F64><<<g, BLOCK, 0, s>>>(dt, qd, ord, mm, cap, k, ov, oi, od);
        else if (c <= 1)
            knn_reg<1, S::D, S::F64><<<g, BLOCK, 0, s>>>(dt, qd, ord, mm, c, k, ov, oi, od);
        else if (c <= 8)
            knn_reg<8, S::D, S::F64><<<g, BLOCK, 0, s>>>(dt, qd, ord, mm, c, k, ov, oi, od);
        else if (c <= 16)
            knn_reg<16, S::D, S::F64><<<g, BLOCK, 0, s>>>(dt, qd, ord, mm, c, k, ov, oi, od);
        else
            knn_reg<REG_MAX, S::D, S::F64><<<g, BLOCK, 0, s>>>(dt, qd, ord, mm, c, k, ov, oi, od);
    });
    GROVE_CUDA_LAUNCHED(ctx, "k-d tree kNN kernel");
    return GROVE_OK;
}

grove_status knn_run(grove_ctx *ctx, const grove_kdtree *t, const grove_coords *q, bool host, int k,
                     uint64_t *indices, double *dist2, KnnRun *R)
{
    cudaStream_t s = stream_of(ctx);
    const size_t nq = q->n, kk = (size_t)k, D = (size_t)t->dims, cap = kk < t->n ? kk : t->n;
    const size_t es = grove__kd_coord_size(q->type);
    const bool heap = cap > (size_t)REG_MAX, need_d = heap || dist2 != NULL;
    /* the heap keeps its distances in the rows: the caller's (device) array, or scratch */
    const bool own_d = host || dist2 == NULL;
    const size_t ovf = overflow_entries(t);
    const int bits = morton_bits(t->dims), end_bit = bits * t->dims;
    const size_t per_query = D * sizeof(double) + 2 * sizeof(u64) + 2 * sizeof(uint32_t) + 16 +
                             (host ? D * es + kk * sizeof(uint64_t) : 0) +
                             (own_d && need_d ? kk * sizeof(double) : 0) + ovf * 2 * sizeof(u64);
    const double *root = grove__kd_root_box(t);
    RootBox rb;
    grove_status st;

    memset(&rb, 0, sizeof rb);
    for (size_t d = 0; d < D; d++) {
        rb.lo[d] = root[d];
        rb.hi[d] = root[D + d];
    }
    R->batch = BUDGET / per_query;
    if (R->batch > KNN_MAX_BATCH) R->batch = KNN_MAX_BATCH;
    if (R->batch > nq) R->batch = nq;
    if (R->batch < 1) R->batch = 1;
    GROVE_TRY(tree_device(ctx, t, &R->up, &R->t));
    /* A smaller batch is slower but still right: halve it while the device is short. */
    for (;;) {
        st = knn_bufs_alloc(ctx, R, D, es, kk, host, need_d, own_d, ovf, end_bit);
        if (st != GROVE_ERR_DEVICE_OUT_OF_MEMORY || R->batch == 1) break;
        knn_bufs_free(ctx, R);
        R->batch /= 2;
    }
    GROVE_TRY(st);
    if (!heap && t->n <= (size_t)UINT32_MAX && t->num_nodes <= (size_t)UINT32_MAX &&
        t->depth + 2 <= (size_t)FSTACK &&
        grove__kdw_handles((int)D, (int)cap, t->n, t->num_nodes, t->depth)) {
        /* the warp kernel runs: its node records, once per call */
        GROVE_TRY(dev_alloc(ctx, &R->rec, t->num_nodes * GROVE__KDW_REC_BYTES,
                            "k-d tree kNN node records"));
        GROVE_CUDA_TRY(ctx,
                       grove__kdw_records(R->t.nodes, R->t.bounds, t->num_nodes, (int)D,
                                          (uint32_t *)R->rec.p, s),
                       "k-d tree kNN node records kernel");
    }
    for (size_t qa = 0; qa < nq; qa += R->batch) {
        const size_t m = nq - qa < R->batch ? nq - qa : R->batch;
        const void *raw = (const unsigned char *)q->data + qa * D * es;
        u64 *oi = host ? (u64 *)R->oi.p : (u64 *)indices + qa * kk;
        double *od = own_d ? (double *)R->od.p : dist2 + qa * kk;
        if (host) {
            GROVE_TRY(grove__cuda_h2d(ctx, R->qraw.p, raw, m * D * es, s));
            raw = R->qraw.p;
        }
        GROVE_TRY(knn_batch(ctx, t, R, raw, q->type, m, k, cap, rb, bits, end_bit, oi, od));
        if (host) {
            GROVE_TRY(grove__cuda_d2h(ctx, indices + qa * kk, oi, m * kk * sizeof(uint64_t), s));
            if (dist2)
                GROVE_TRY(grove__cuda_d2h(ctx, dist2 + qa * kk, od, m * kk * sizeof(double), s));
        }
    }
    return grove__cuda_sync(ctx, s, "k-d tree kNN");
}

/* ---- radius host side ---- */

/* Segment boundaries of a fill batch for DeviceSegmentedSort, relative to the batch's first
 * match; rows of the other classes are given as empty segments. */
struct SegBegin {
    const u64 *off;
    u64 base;
    __host__ __device__ int64_t operator()(int64_t i) const { return (int64_t)(off[i] - base); }
};

struct SegEnd {
    const u64 *off;
    u64 base, cap;
    __host__ __device__ int64_t operator()(int64_t i) const
    {
        const u64 b = off[i], e = off[i + 1];
        return (int64_t)((row_class(e - b, cap) == 1 ? e : b) - base);
    }
};

typedef thrust::transform_iterator<SegBegin, thrust::counting_iterator<int64_t>> BeginIt;
typedef thrust::transform_iterator<SegEnd, thrust::counting_iterator<int64_t>> EndIt;

struct RadiusRun {
    TreeUp up;
    DevTree t;
    Dev qs, ord, cnt, off, ovn, ovl; /* per query chunk */
    Dev bi, bd, ti, td;              /* per fill batch: matches, and the sorts' other half */
    Dev seg_temp, rad_temp;
    uint32_t *h_ord;
    u64 *h_cnt;
    size_t chunk, out_cap;
};

void radius_chunk_free(grove_ctx *ctx, RadiusRun *R)
{
    dev_free(ctx, &R->qs);
    dev_free(ctx, &R->ord);
    dev_free(ctx, &R->cnt);
    dev_free(ctx, &R->off);
    dev_free(ctx, &R->ovn);
    dev_free(ctx, &R->ovl);
}

grove_status radius_chunk_alloc(grove_ctx *ctx, RadiusRun *R, size_t D, size_t ovf)
{
    const size_t c = R->chunk;
    GROVE_TRY(dev_alloc(ctx, &R->qs, c * D * sizeof(double), "radius queries"));
    GROVE_TRY(dev_alloc(ctx, &R->ord, c * sizeof(uint32_t), "radius query order"));
    GROVE_TRY(dev_alloc(ctx, &R->cnt, c * sizeof(u64), "radius match counts"));
    GROVE_TRY(dev_alloc(ctx, &R->off, (c + 1) * sizeof(u64), "radius match offsets"));
    GROVE_TRY(dev_alloc(ctx, &R->ovn, c * ovf * sizeof(u64), "radius traversal stacks"));
    GROVE_TRY(dev_alloc(ctx, &R->ovl, c * ovf * sizeof(double), "radius traversal stacks"));
    return GROVE_OK;
}

void radius_out_free(grove_ctx *ctx, RadiusRun *R)
{
    dev_free(ctx, &R->bi);
    dev_free(ctx, &R->bd);
    dev_free(ctx, &R->ti);
    dev_free(ctx, &R->td);
}

grove_status radius_out_alloc(grove_ctx *ctx, RadiusRun *R, bool need_sort)
{
    const size_t c = R->out_cap;
    GROVE_TRY(dev_alloc(ctx, &R->bi, c * sizeof(u64), "radius matches"));
    GROVE_TRY(dev_alloc(ctx, &R->bd, c * sizeof(double), "radius match distances"));
    if (need_sort) {
        GROVE_TRY(dev_alloc(ctx, &R->ti, c * sizeof(u64), "radius match sorting"));
        GROVE_TRY(dev_alloc(ctx, &R->td, c * sizeof(double), "radius match sorting"));
    }
    return GROVE_OK;
}

void radius_free(grove_ctx *ctx, RadiusRun *R)
{
    radius_chunk_free(ctx, R);
    radius_out_free(ctx, R);
    dev_free(ctx, &R->seg_temp);
    dev_free(ctx, &R->rad_temp);
    tree_free(ctx, &R->up);
    free(R->h_ord);
    free(R->h_cnt);
    R->h_ord = NULL;
    R->h_cnt = NULL;
}

/* Uploads the queries of chunk [qa, qa + m) and their visiting order. */
grove_status radius_chunk_upload(grove_ctx *ctx, RadiusRun *R, const double *qx, size_t D,
                                 size_t qa, size_t m)
{
    GROVE_TRY(grove__cuda_h2d(ctx, R->qs.p, qx + qa * D, m * D * sizeof(double), ctx->stream));
    return grove__cuda_h2d(ctx, R->ord.p, R->h_ord + qa, m * sizeof(uint32_t), ctx->stream);
}

/* Sorts the class 1 and 2 rows of batch rows [lo, hi) of the chunk (hoff: the chunk's offsets
 * on the host) by index, then stably by distance: bi/bd -> ti/td -> bi/bd. */
grove_status radius_sort_batch(grove_ctx *ctx, RadiusRun *R, const uint64_t *hoff, size_t lo,
                               size_t hi, u64 cap, int index_bits)
{
    cudaStream_t s = stream_of(ctx);
    const u64 base = hoff[lo], items = hoff[hi] - base;
    u64 *bi = (u64 *)R->bi.p, *ti = (u64 *)R->ti.p;
    double *bd = (double *)R->bd.p, *td = (double *)R->td.p;
    bool medium = false;
    for (size_t r = lo; r < hi; r++) {
        const u64 n = hoff[r + 1] - hoff[r], o = hoff[r] - base;
        const int c = row_class(n, cap);
        if (c == 1) medium = true;
        if (c != 2) continue;
        size_t tb = 0, tb2 = 0;
        GROVE_TRY(grove_sort_pairs_device(ctx, NULL, &tb, GROVE_U64, bi, ti, 8, bd, td, (size_t)n,
                                          0, index_bits, s));
        GROVE_TRY(grove_sort_pairs_device(ctx, NULL, &tb2, GROVE_U64, td, bd, 8, ti, bi, (size_t)n,
                                          0, 63, s));
        GROVE_TRY(ensure_temp(ctx, &R->rad_temp, tb > tb2 ? tb : tb2, "radius row sort scratch"));
        tb = R->rad_temp.bytes;
        GROVE_TRY(grove_sort_pairs_device(ctx, R->rad_temp.p, &tb, GROVE_U64, bi + o, ti + o, 8,
                                          bd + o, td + o, (size_t)n, 0, index_bits, s));
        tb = R->rad_temp.bytes;
        /* non-negative doubles (no -0: a square is +0 or positive) order as their bits */
        GROVE_TRY(grove_sort_pairs_device(ctx, R->rad_temp.p, &tb, GROVE_U64, td + o, bd + o, 8,
                                          ti + o, bi + o, (size_t)n, 0, 63, s));
    }
    if (!medium) return GROVE_OK;
    const u64 *doff = (const u64 *)R->off.p + lo;
    BeginIt b(thrust::counting_iterator<int64_t>(0), SegBegin{doff, base});
    EndIt e(thrust::counting_iterator<int64_t>(0), SegEnd{doff, base, cap});
    const int64_t ni = (int64_t)items, ns = (int64_t)(hi - lo);
    const u64 *tdk = (const u64 *)td;
    size_t tb = 0, tb2 = 0;
    GROVE_CUDA_TRY(ctx,
                   cub::DeviceSegmentedSort::SortPairs(NULL, tb, (const u64 *)bi, ti,
                                                       (const double *)bd, td, ni, ns, b, e, s),
                   "k-d tree radius: sizing the segmented sort");
    GROVE_CUDA_TRY(ctx,
                   cub::DeviceSegmentedSort::StableSortPairs(NULL, tb2, tdk, (u64 *)bd,
                                                             (const u64 *)ti, bi, ni, ns, b, e, s),
                   "k-d tree radius: sizing the segmented sort");
    GROVE_TRY(ensure_temp(ctx, &R->seg_temp, tb > tb2 ? tb : tb2, "radius segmented sort scratch"));
    tb = R->seg_temp.bytes;
    GROVE_CUDA_TRY(ctx,
                   cub::DeviceSegmentedSort::SortPairs(R->seg_temp.p, tb, (const u64 *)bi, ti,
                                                       (const double *)bd, td, ni, ns, b, e, s),
                   "k-d tree radius: sorting the matches by index");
    tb = R->seg_temp.bytes;
    GROVE_CUDA_TRY(ctx,
                   cub::DeviceSegmentedSort::StableSortPairs(R->seg_temp.p, tb, tdk, (u64 *)bd,
                                                             (const u64 *)ti, bi, ni, ns, b, e, s),
                   "k-d tree radius: sorting the matches by distance");
    return GROVE_OK;
}

grove_status radius_run(grove_ctx *ctx, const char *fn, const grove_kdtree *t, const double *qx,
                        const uint64_t *order, size_t nq, double r2, size_t cap, uint64_t *off,
                        uint64_t **ind_out, double **dst_out, RadiusRun *R)
{
    cudaStream_t s = stream_of(ctx);
    const size_t D = (size_t)t->dims, ovf = overflow_entries(t);
    const size_t per_query =
        D * sizeof(double) + sizeof(uint32_t) + 3 * sizeof(u64) + ovf * 2 * sizeof(u64);
    const u64 capn = cap < t->n ? (u64)cap : 0; /* 0: no cap */
    const bool f64 = t->type == GROVE_COORD_F64;
    size_t nchunks;
    u64 total, max_row = 0;
    bool need_sort = false;
    int index_bits = 1;
    grove_status st;

    R->chunk = BUDGET / per_query;
    if (R->chunk > QCHUNK) R->chunk = QCHUNK;
    if (R->chunk > nq) R->chunk = nq;
    if (R->chunk < 1) R->chunk = 1;
    GROVE_TRY(tree_device(ctx, t, &R->up, &R->t));
    for (;;) {
        st = radius_chunk_alloc(ctx, R, D, ovf);
        if (st != GROVE_ERR_DEVICE_OUT_OF_MEMORY || R->chunk == 1) break;
        radius_chunk_free(ctx, R);
        R->chunk /= 2;
    }
    GROVE_TRY(st);
    GROVE_TRY(bucket_order(ctx, fn, order, nq, R->chunk, &R->h_ord));
    R->h_cnt = (u64 *)malloc(R->chunk * sizeof(u64));
    if (!R->h_cnt)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu counts", fn,
                            R->chunk);
    nchunks = (nq + R->chunk - 1) / R->chunk;
    const Overflow ov = {(u64 *)R->ovn.p, (double *)R->ovl.p, R->chunk};
    const double *dq = (const double *)R->qs.p;
    const uint32_t *dord = (const uint32_t *)R->ord.p;

    /* Count pass over every chunk; the host sums the capped counts into the offsets. */
    off[0] = 0;
    for (size_t c = 0; c < nchunks; c++) {
        const size_t qa = c * R->chunk, m = nq - qa < R->chunk ? nq - qa : R->chunk;
        GROVE_TRY(radius_chunk_upload(ctx, R, qx, D, qa, m));
        with_shape(t->dims, f64, [&](auto sh) {
            typedef decltype(sh) S;
            radius_count<S::D, S::F64><<<blocks_for(m), BLOCK, 0, s>>>(R->t, dq, dord, (uint32_t)m,
                                                                       r2, ov, (u64 *)R->cnt.p);
        });
        GROVE_CUDA_LAUNCHED(ctx, "k-d tree radius: count pass");
        GROVE_TRY(grove__cuda_d2h(ctx, R->h_cnt, R->cnt.p, m * sizeof(u64), s));
        GROVE_TRY(grove__cuda_sync(ctx, s, "k-d tree radius: count pass"));
        for (size_t i = 0; i < m; i++) {
            const u64 n = R->h_cnt[i] < (u64)cap ? R->h_cnt[i] : (u64)cap;
            off[qa + i + 1] = off[qa + i] + n;
            if (n > max_row) max_row = n;
            if (row_class(n, capn) == 1 || row_class(n, capn) == 2) need_sort = true;
        }
    }
    total = off[nq];
    *ind_out = (uint64_t *)malloc((total ? (size_t)total : 1) * sizeof(uint64_t));
    *dst_out = (double *)malloc((total ? (size_t)total : 1) * sizeof(double));
    if (!*ind_out || !*dst_out)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu matches", fn,
                            (size_t)total);
    if (total == 0) return GROVE_OK;
    grove__prefault(*ind_out, (size_t)total * sizeof(uint64_t), grove__threads(ctx));
    grove__prefault(*dst_out, (size_t)total * sizeof(double), grove__threads(ctx));

    /* Fill buffers: a batch holds OUT_CHUNK matches, or the largest row; less while the device
     * is short, but never less than the largest row. */
    R->out_cap = (size_t)(total < OUT_CHUNK ? total : OUT_CHUNK);
    if (max_row > R->out_cap) R->out_cap = (size_t)max_row;
    for (;;) {
        st = radius_out_alloc(ctx, R, need_sort);
        if (st != GROVE_ERR_DEVICE_OUT_OF_MEMORY || R->out_cap / 2 < max_row) break;
        radius_out_free(ctx, R);
        R->out_cap /= 2;
    }
    if (st == GROVE_ERR_DEVICE_OUT_OF_MEMORY) {
        char why[GROVE__ERR_LEN];
        snprintf(why, sizeof why, "%s", ctx->err);
        return grove__error(ctx, st,
                            "%s: no room on the device for the %llu matches of one query (%s)", fn,
                            (unsigned long long)max_row, why);
    }
    GROVE_TRY(st);
    while (index_bits < 64 && (((u64)t->n - 1) >> index_bits) != 0) index_bits++;

    for (size_t c = 0; c < nchunks; c++) {
        const size_t qa = c * R->chunk, m = nq - qa < R->chunk ? nq - qa : R->chunk;
        const uint64_t *hoff = off + qa;
        if (nchunks > 1) GROVE_TRY(radius_chunk_upload(ctx, R, qx, D, qa, m));
        GROVE_TRY(grove__cuda_h2d(ctx, R->off.p, hoff, (m + 1) * sizeof(u64), s));
        for (size_t lo = 0; lo < m;) {
            size_t hi = lo;
            bool capped_rows = false, other_rows = false, sort_rows = false;
            while (hi < m && hoff[hi + 1] - hoff[lo] <= R->out_cap) {
                const u64 n = hoff[hi + 1] - hoff[hi];
                const int rc = row_class(n, capn);
                capped_rows = capped_rows || rc == 0;
                other_rows = other_rows || (rc != 0 && n > 0);
                sort_rows = sort_rows || rc == 1 || rc == 2;
                hi++;
            }
            const u64 base = hoff[lo], items = hoff[hi] - base;
            if (items > 0) {
                const u64 *doff = (const u64 *)R->off.p;
                u64 *bi = (u64 *)R->bi.p;
                double *bd = (double *)R->bd.p;
                const unsigned g = blocks_for(m);
                const uint32_t mm = (uint32_t)m, l32 = (uint32_t)lo, h32 = (uint32_t)hi;
                with_shape(t->dims, f64, [&](auto sh) {
                    typedef decltype(sh) S;
                    if (!capped_rows)
                        return;
                    else if (capn <= 8)
                        radius_fill_capped<8, S::D, S::F64><<<g, BLOCK, 0, s>>>(
                            R->t, dq, dord, mm, l32, h32, doff, base, r2, capn, ov, bi, bd);
                    else if (capn <= (u64)REG_MAX)
                        radius_fill_capped<REG_MAX, S::D, S::F64><<<g, BLOCK, 0, s>>>(
                            R->t, dq, dord, mm, l32, h32, doff, base, r2, capn, ov, bi, bd);
                    else
                        radius_fill_capped<0, S::D, S::F64><<<g, BLOCK, 0, s>>>(
                            R->t, dq, dord, mm, l32, h32, doff, base, r2, capn, ov, bi, bd);
                });
                GROVE_CUDA_LAUNCHED(ctx, "k-d tree radius: fill pass (capped rows)");
                with_shape(t->dims, f64, [&](auto sh) {
                    typedef decltype(sh) S;
                    if (other_rows)
                        radius_fill_all<S::D, S::F64><<<g, BLOCK, 0, s>>>(
                            R->t, dq, dord, mm, l32, h32, doff, base, r2, capn, ov, bi, bd);
                });
                GROVE_CUDA_LAUNCHED(ctx, "k-d tree radius: fill pass");
                if (sort_rows) GROVE_TRY(radius_sort_batch(ctx, R, hoff, lo, hi, capn, index_bits));
                GROVE_TRY(
                    grove__cuda_d2h(ctx, *ind_out + base, bi, (size_t)items * sizeof(u64), s));
                GROVE_TRY(
                    grove__cuda_d2h(ctx, *dst_out + base, bd, (size_t)items * sizeof(double), s));
            }
            lo = hi;
        }
    }
    return grove__cuda_sync(ctx, s, "k-d tree radius");
}

} /* namespace */

extern "C" grove_status grove__kd_knn_cuda(grove_ctx *ctx, const grove_kdtree *t,
                                           const grove_coords *q, int host, int k,
                                           uint64_t *indices, double *dist2)
{
    KnnRun R;
    grove_status st;
    const size_t kk = (size_t)k, nq = q->n;
    if (nq == 0) return GROVE_OK;
    if (t->n == 0 && host) { /* every row is padding */
        for (size_t i = 0; i < nq * kk; i++) {
            indices[i] = UINT64_MAX;
            if (dist2) dist2[i] = INFINITY;
        }
        return GROVE_OK;
    }
    GROVE_TRY(grove__cuda_use(ctx));
    if (t->n == 0) {
        const size_t count = nq * kk;
        const size_t g = (count + BLOCK - 1) / BLOCK;
        knn_pad<<<(unsigned)(g < 4096 ? g : 4096), BLOCK, 0, stream_of(ctx)>>>((u64 *)indices,
                                                                              dist2, count);
        GROVE_CUDA_LAUNCHED(ctx, "k-d tree kNN padding kernel");
        return grove__cuda_sync(ctx, ctx->stream, "k-d tree kNN");
    }
    memset(&R, 0, sizeof R);
    st = knn_run(ctx, t, q, host != 0, k, indices, dist2, &R);
    knn_bufs_free(ctx, &R);
    tree_free(ctx, &R.up);
    if (st != GROVE_OK) cudaStreamSynchronize(stream_of(ctx)); /* kernels may still run */
    return st;
}

extern "C" grove_status grove__kd_radius_cuda(grove_ctx *ctx, const char *fn, const grove_kdtree *t,
                                              const double *qx, const uint64_t *order, size_t nq,
                                              double r2, size_t cap, grove_kdtree_result *out)
{
    RadiusRun R;
    grove_status st;
    uint64_t *off, *ind = NULL;
    double *dst = NULL;

    off = (uint64_t *)malloc((nq + 1) * sizeof *off);
    if (!off)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu offsets", fn,
                            nq + 1);
    if (nq == 0 || t->n == 0) { /* nothing can match: no device work */
        memset(off, 0, (nq + 1) * sizeof *off);
        ind = (uint64_t *)malloc(sizeof *ind);
        dst = (double *)malloc(sizeof *dst);
        st = ind && dst ? GROVE_OK
                        : grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                       "%s: out of memory for 0 matches", fn);
    } else {
        memset(&R, 0, sizeof R);
        st = grove__cuda_use(ctx);
        if (st == GROVE_OK)
            st = radius_run(ctx, fn, t, qx, order, nq, r2, cap, off, &ind, &dst, &R);
        radius_free(ctx, &R);
    }
    if (st != GROVE_OK) {
        free(off);
        free(ind);
        free(dst);
        return st;
    }
    out->num_queries = nq;
    out->offsets = off;
    out->indices = ind;
    out->dist2 = dst;
    return GROVE_OK;
}
