/*
 * quadtree_query_cuda.cu - box queries and k nearest neighbours on the GPU (declared in
 * quadtree_query_cuda.h). The results are the CPU backend's bytes.
 *
 * Both queries run one thread per query over the breadth-first node array with a small stack,
 * as the CPU does, but in the order of the queries' Morton codes (relative to the root box), so
 * that neighbouring threads walk the same nodes and leaves and share the cache lines.
 *
 * Box queries: a count pass, a prefix sum of the counts on the host (it needs the offsets
 * anyway), then a fill pass that writes each query's matches, in tree order, to its slot. Nodes
 * and leaves with more than COOP_MIN points are copied or scanned by the whole warp (the owner
 * lane publishes the job by ballot), so one box over a large node does not serialise a warp on
 * one thread. The matches of each query are then sorted by input position: up to SMALL_SORT of
 * them by the owning thread with a sorting network in registers (the common case of many small
 * boxes costs no extra launch), the rest by CUB's DeviceSegmentedSort, and segments of HUGE_SEG
 * or more on their own by the device-wide radix sort, which is much faster for them than the
 * one block per segment that DeviceSegmentedSort gives a large segment. Queries go in chunks of
 * at most QCHUNK and the fill in batches of about OUT_CHUNK matches, so the device memory used
 * is bounded whatever the number of matches; host memory holds the whole result.
 *
 * kNN: up to 32 neighbours in registers (a sorted list, insertion by an unrolled
 * compare-exchange chain); more in a max-heap per query in global scratch, interleaved across
 * queries so that the heads are coalesced, with queries in batches that keep the scratch and the
 * staging of the results within KNN_BUDGET. Distances use __dsub_rn/__dmul_rn/__dadd_rn so that
 * nothing is fused and every value rounds as the CPU's dist2_point. A node is skipped only when
 * its lower bound is strictly greater than the current k-th distance (a tie may still hold a
 * smaller input position), so the result is the unique set of the k smallest (dist2, input
 * position) pairs, whatever order the nodes are visited in.
 */
#include <cuda_runtime.h>

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_segmented_sort.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "core_cuda.h"
#include "grove/prim.h"
#include "quadtree_query_cuda.h"

namespace
{

typedef unsigned long long u64;

/* The CPU's bound: each pop pushes at most 4 nodes and the tree is at most 30 levels deep. */
constexpr int STACK = 4 * (GROVE_QUADTREE_MAX_DEPTH + 2);
constexpr unsigned FULL = 0xffffffffu;
constexpr int BLOCK = 128;
constexpr uint32_t COOP_MIN = 32;   /* ranges longer than this are handled by the whole warp */
constexpr u64 SMALL_SORT = 32;      /* segments up to this are sorted by their own thread */
constexpr u64 HUGE_SEG = 1u << 20;  /* segments from this size get the device-wide sort */
constexpr size_t QCHUNK = 1u << 22; /* box queries resident at once */
constexpr u64 OUT_CHUNK = 1u << 26; /* matches per fill batch (two buffers of 256 MiB) */
constexpr size_t KNN_BUDGET = (size_t)1 << 30; /* bytes of per-query kNN state per batch */
constexpr size_t KNN_MAX_BATCH = 1u << 24;
constexpr int KNN_REG_MAX = 32;

static_assert(sizeof(grove_quadtree_node) == 32, "node layout");
static_assert(offsetof(grove_quadtree_node, first_child) == 20, "node layout");
static_assert(offsetof(grove_quadtree_node, begin) == 24, "node layout");

cudaStream_t stream_of(grove_ctx *ctx) { return (cudaStream_t)ctx->stream; }

unsigned blocks_for(size_t m) { return (unsigned)((m + BLOCK - 1) / BLOCK); }

/* Grows the scratch *p of *have bytes to at least need bytes. The sizes come from the two-phase
 * queries of the sorts, made for each call's real sizes because they need not be monotone. */
grove_status ensure_temp(grove_ctx *ctx, void **p, size_t *have, size_t need, const char *what)
{
    if (need <= *have) return GROVE_OK;
    grove__cuda_free(ctx, *p, *have, ctx->stream);
    *p = NULL;
    *have = 0;
    GROVE_TRY(grove__cuda_alloc(ctx, p, need, ctx->stream, what));
    *have = need;
    return GROVE_OK;
}

/* ---- the tree on the device ---- */

struct DevTree {
    const grove_quadtree_node *nodes;
    const float2 *pts;
    const uint32_t *index;
    float4 root;
};

struct Node {
    float xmin, ymin, xmax, ymax;
    int32_t first_child;
    uint32_t begin, end;
};

__device__ __forceinline__ Node load_node(const grove_quadtree_node *nodes, int32_t i)
{
    const float4 *p = reinterpret_cast<const float4 *>(nodes + i);
    float4 a = __ldg(p), b = __ldg(p + 1);
    Node n;
    n.xmin = a.x;
    n.ymin = a.y;
    n.xmax = a.z;
    n.ymax = a.w;
    n.first_child = __float_as_int(b.y);
    n.begin = __float_as_uint(b.z);
    n.end = __float_as_uint(b.w);
    return n;
}

/* The tree's arrays for one call: its own device arrays, or an upload of its host arrays. */
struct TreeUse {
    DevTree d;
    grove_quadtree_node *up_nodes;
    float *up_pts;
    uint32_t *up_index;
    size_t nodes_bytes, pts_bytes, index_bytes;
};

grove_status check_access(grove_ctx *ctx, const char *fn, const grove_quadtree *t)
{
    if (t->dev_ctx == ctx || t->nodes) return GROVE_OK;
    return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                        "%s: the tree's arrays are on another context's device and it has no "
                        "host arrays; call grove_quadtree_download() with that context first",
                        fn);
}

grove_status tree_acquire(grove_ctx *ctx, const grove_quadtree *t, TreeUse *u)
{
    cudaStream_t s = stream_of(ctx);
    memset(u, 0, sizeof *u);
    u->d.root = make_float4(t->opts.bbox[0], t->opts.bbox[1], t->opts.bbox[2], t->opts.bbox[3]);
    if (t->dev_ctx == ctx) {
        u->d.nodes = t->d_nodes;
        u->d.pts = (const float2 *)t->d_pts;
        u->d.index = t->d_index;
        return GROVE_OK;
    }
    u->nodes_bytes = t->num_nodes * sizeof(grove_quadtree_node);
    u->pts_bytes = 2 * t->n * sizeof(float);
    u->index_bytes = t->n * sizeof(uint32_t);
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&u->up_nodes, u->nodes_bytes, s,
                                "the quadtree's nodes (query upload)"));
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&u->up_pts, u->pts_bytes, s,
                                "the quadtree's points (query upload)"));
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&u->up_index, u->index_bytes, s,
                                "the quadtree's index (query upload)"));
    GROVE_TRY(grove__cuda_h2d(ctx, u->up_nodes, t->nodes, u->nodes_bytes, s));
    GROVE_TRY(grove__cuda_h2d(ctx, u->up_pts, t->pts, u->pts_bytes, s));
    GROVE_TRY(grove__cuda_h2d(ctx, u->up_index, t->index, u->index_bytes, s));
    u->d.nodes = u->up_nodes;
    u->d.pts = (const float2 *)u->up_pts;
    u->d.index = u->up_index;
    return GROVE_OK;
}

void tree_release(grove_ctx *ctx, TreeUse *u)
{
    cudaStream_t s = stream_of(ctx);
    grove__cuda_free(ctx, u->up_nodes, u->nodes_bytes, s);
    grove__cuda_free(ctx, u->up_pts, u->pts_bytes, s);
    grove__cuda_free(ctx, u->up_index, u->index_bytes, s);
    memset(u, 0, sizeof *u);
}

/* ---- query order ---- */

__device__ __forceinline__ uint32_t quantize(double v, float lo, float hi)
{
    double w = (double)hi - (double)lo;
    double u = w > 0.0 ? (v - (double)lo) / w * 65535.0 : 0.0;
    if (!(u > 0.0)) return 0; /* also NaN, from a box with infinite sides */
    if (u > 65535.0) return 65535;
    return (uint32_t)u;
}

/* Morton code of each query's point (stride 2) or box center (stride 4) in the root box. */
__global__ void query_keys(const float *q, int stride, uint32_t m, float4 root, uint32_t *keys,
                           uint32_t *ids)
{
    uint32_t i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= m) return;
    const float *p = q + (size_t)i * stride;
    double x, y;
    if (stride == 4) {
        x = 0.5 * (double)p[0] + 0.5 * (double)p[2];
        y = 0.5 * (double)p[1] + 0.5 * (double)p[3];
    } else {
        x = p[0];
        y = p[1];
    }
    keys[i] = grove_morton2(quantize(x, root.x, root.z), quantize(y, root.y, root.w));
    ids[i] = i;
}

/* Buffers that give the order in which to process m queries: ids_out after order_run(). */
struct Order {
    uint32_t *keys, *keys_out, *ids, *ids_out;
    void *temp;
    size_t cap, temp_bytes;
};

grove_status order_alloc(grove_ctx *ctx, Order *o, size_t cap)
{
    cudaStream_t s = stream_of(ctx);
    size_t b = cap * sizeof(uint32_t);
    o->cap = cap;
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&o->keys, b, s, "query order keys"));
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&o->keys_out, b, s, "query order keys"));
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&o->ids, b, s, "query order"));
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&o->ids_out, b, s, "query order"));
    return GROVE_OK;
}

void order_free(grove_ctx *ctx, Order *o)
{
    cudaStream_t s = stream_of(ctx);
    size_t b = o->cap * sizeof(uint32_t);
    grove__cuda_free(ctx, o->keys, b, s);
    grove__cuda_free(ctx, o->keys_out, b, s);
    grove__cuda_free(ctx, o->ids, b, s);
    grove__cuda_free(ctx, o->ids_out, b, s);
    grove__cuda_free(ctx, o->temp, o->temp_bytes, s);
    memset(o, 0, sizeof *o);
}

grove_status order_run(grove_ctx *ctx, Order *o, const float *d_q, int stride, size_t m,
                       float4 root)
{
    cudaStream_t s = stream_of(ctx);
    size_t tb = 0;
    /* the real pointers in the size query too: prim sizes a keys-only sort when values are NULL */
    GROVE_TRY(grove_sort_pairs_device(ctx, NULL, &tb, GROVE_U32, o->keys, o->keys_out, 4, o->ids,
                                      o->ids_out, m, 0, 32, s));
    GROVE_TRY(ensure_temp(ctx, &o->temp, &o->temp_bytes, tb, "query order sort"));
    tb = o->temp_bytes;
    query_keys<<<blocks_for(m), BLOCK, 0, s>>>(d_q, stride, (uint32_t)m, root, o->keys, o->ids);
    GROVE_CUDA_LAUNCHED(ctx, "quadtree query: Morton codes of the queries");
    return grove_sort_pairs_device(ctx, o->temp, &tb, GROVE_U32, o->keys, o->keys_out, 4, o->ids,
                                   o->ids_out, m, 0, 32, s);
}

/* ---- box queries ---- */

__device__ __forceinline__ bool in_box(float2 p, float4 b)
{
    return p.x >= b.x && p.x <= b.z && p.y >= b.y && p.y <= b.w;
}

/* Ascending sort of N registers by a bitonic network (all indices static after unrolling). */
template <int N> __device__ __forceinline__ void bitonic(uint32_t (&a)[N])
{
#pragma unroll
    for (int size = 2; size <= N; size <<= 1)
#pragma unroll
        for (int stride = size / 2; stride > 0; stride >>= 1)
#pragma unroll
            for (int i = 0; i < N; i++) {
                int j = i ^ stride;
                if (j > i) {
                    bool up = (i & size) == 0;
                    uint32_t x = a[i], y = a[j];
                    if ((x > y) == up) {
                        a[i] = y;
                        a[j] = x;
                    }
                }
            }
}

template <int N>
__device__ __forceinline__ void sort_small(const uint32_t *in, uint32_t *out, uint32_t m)
{
    uint32_t a[N];
#pragma unroll
    for (int i = 0; i < N; i++) a[i] = (uint32_t)i < m ? in[i] : UINT32_MAX;
    bitonic<N>(a);
#pragma unroll
    for (int i = 0; i < N; i++)
        if ((uint32_t)i < m) out[i] = a[i];
}

/*
 * FILL == false: cnt[q] = number of matches of local query q, for every q < m.
 * FILL == true: for the queries lo <= q < hi, writes the matches of q (tree order) to
 * buf[off[q] - base ...] and, for those with at most SMALL_SORT matches, their sorted copy to
 * sorted[same place].
 * Every lane of a warp stays in the loop until the whole warp is done, because the warp-wide
 * jobs need all 32 lanes.
 */
template <bool FILL>
__global__ void __launch_bounds__(BLOCK)
    box_pass(DevTree t, const float4 *boxes, const uint32_t *order, uint32_t m, uint32_t lo,
             uint32_t hi, uint32_t *cnt, const u64 *off, u64 base, uint32_t *buf, uint32_t *sorted)
{
    const unsigned lane = threadIdx.x & 31u;
    const uint32_t pos = blockIdx.x * BLOCK + threadIdx.x;
    const uint32_t q = pos < m ? order[pos] : 0;
    const bool active = pos < m && q >= lo && q < hi;
    const float4 b = active ? boxes[q] : make_float4(0.0f, 0.0f, -1.0f, -1.0f);
    int32_t stack[STACK];
    int sp = 0;
    uint32_t found = 0; /* count pass */
    const u64 dst0 = (FILL && active) ? off[q] - base : 0;
    u64 cur = dst0; /* fill pass: next slot */

    if (active && b.x <= b.z && b.y <= b.w) stack[sp++] = 0;
    while (__any_sync(FULL, sp > 0)) {
        bool job = false, filter = false;
        uint32_t jb = 0, je = 0;
        u64 jdst = 0;
        if (sp > 0) {
            const Node nd = load_node(t.nodes, stack[--sp]);
            const uint32_t len = nd.end - nd.begin;
            if (len != 0 && !(nd.xmin > b.z || nd.xmax < b.x || nd.ymin > b.w || nd.ymax < b.y)) {
                if (b.x <= nd.xmin && nd.xmax <= b.z && b.y <= nd.ymin && nd.ymax <= b.w) {
                    if (!FILL) {
                        found += len;
                    } else if (len > COOP_MIN) {
                        job = true;
                        jb = nd.begin;
                        je = nd.end;
                        jdst = cur;
                        cur += len;
                    } else {
                        for (uint32_t i = nd.begin; i < nd.end; i++) buf[cur++] = t.index[i];
                    }
                } else if (nd.first_child >= 0) {
                    for (int c = 3; c >= 0; c--) stack[sp++] = nd.first_child + c;
                } else if (len > COOP_MIN) {
                    job = true;
                    filter = true;
                    jb = nd.begin;
                    je = nd.end;
                    jdst = cur;
                } else {
                    for (uint32_t i = nd.begin; i < nd.end; i++) {
                        if (in_box(t.pts[i], b)) {
                            if (FILL)
                                buf[cur++] = t.index[i];
                            else
                                found++;
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
            const u64 d = __shfl_sync(FULL, jdst, L);
            if (!__shfl_sync(FULL, (int)filter, L)) { /* a contained node: copy (fill only) */
                for (u64 i = s + lane; i < e; i += 32) buf[d + (i - s)] = t.index[i];
                continue;
            }
            float4 lb;
            lb.x = __shfl_sync(FULL, b.x, L);
            lb.y = __shfl_sync(FULL, b.y, L);
            lb.z = __shfl_sync(FULL, b.z, L);
            lb.w = __shfl_sync(FULL, b.w, L);
            uint32_t total = 0;
            for (u64 i0 = s; i0 < e; i0 += 32) {
                const u64 i = i0 + lane;
                const bool hit = i < e && in_box(t.pts[i], lb);
                const unsigned hm = __ballot_sync(FULL, hit);
                if (FILL && hit) buf[d + total + __popc(hm & ((1u << lane) - 1u))] = t.index[i];
                total += (uint32_t)__popc(hm);
            }
            if ((int)lane == L) {
                if (FILL)
                    cur += total;
                else
                    found += total;
            }
        }
    }
    if (!FILL) {
        if (active) cnt[q] = found;
        return;
    }
    __syncwarp(); /* the jobs of other lanes wrote to this thread's slots */
    if (active) {
        const uint32_t k = (uint32_t)(cur - dst0);
        if (k <= 16)
            sort_small<16>(buf + dst0, sorted + dst0, k);
        else if (k <= SMALL_SORT)
            sort_small<32>(buf + dst0, sorted + dst0, k);
    }
}

/* Segment boundaries of a fill batch for DeviceSegmentedSort, relative to the batch's first
 * match; the segments sorted elsewhere (small or huge) are given as empty. */
struct SegBegin {
    const u64 *off;
    u64 base;
    __host__ __device__ int64_t operator()(int64_t i) const { return (int64_t)(off[i] - base); }
};

struct SegEnd {
    const u64 *off;
    u64 base;
    __host__ __device__ int64_t operator()(int64_t i) const
    {
        u64 b = off[i], e = off[i + 1], n = e - b;
        return (int64_t)(((n <= SMALL_SORT || n >= HUGE_SEG) ? b : e) - base);
    }
};

typedef thrust::transform_iterator<SegBegin, thrust::counting_iterator<int64_t>> BeginIt;
typedef thrust::transform_iterator<SegEnd, thrust::counting_iterator<int64_t>> EndIt;

cudaError_t seg_sort(void *temp, size_t &bytes, const uint32_t *in, uint32_t *out, u64 items,
                     size_t segs, const u64 *off, u64 base, cudaStream_t s)
{
    BeginIt bi(thrust::counting_iterator<int64_t>(0), SegBegin{off, base});
    EndIt ei(thrust::counting_iterator<int64_t>(0), SegEnd{off, base});
    return cub::DeviceSegmentedSort::SortKeys(temp, bytes, in, out, (int64_t)items, (int64_t)segs,
                                              bi, ei, s);
}

struct BoxBufs {
    TreeUse tree;
    Order ord;
    float *boxes;
    uint32_t *cnt;
    u64 *off;
    uint32_t *buf, *sorted;
    void *seg_temp, *rad_temp;
    size_t chunk, out_cap, seg_bytes, rad_bytes;
    uint32_t *h_cnt;
};

void box_free(grove_ctx *ctx, BoxBufs *B)
{
    cudaStream_t s = stream_of(ctx);
    grove__cuda_free(ctx, B->boxes, B->chunk * 4 * sizeof(float), s);
    grove__cuda_free(ctx, B->cnt, B->chunk * sizeof(uint32_t), s);
    grove__cuda_free(ctx, B->off, (B->chunk + 1) * sizeof(u64), s);
    grove__cuda_free(ctx, B->buf, B->out_cap * sizeof(uint32_t), s);
    grove__cuda_free(ctx, B->sorted, B->out_cap * sizeof(uint32_t), s);
    grove__cuda_free(ctx, B->seg_temp, B->seg_bytes, s);
    grove__cuda_free(ctx, B->rad_temp, B->rad_bytes, s);
    order_free(ctx, &B->ord);
    tree_release(ctx, &B->tree);
    free(B->h_cnt);
    memset(B, 0, sizeof *B);
}

/* Uploads the boxes of queries [qa, qb) and orders them. */
grove_status box_chunk(grove_ctx *ctx, BoxBufs *B, const float *boxes, size_t qa, size_t qb)
{
    GROVE_TRY(
        grove__cuda_h2d(ctx, B->boxes, boxes + 4 * qa, (qb - qa) * 4 * sizeof(float), ctx->stream));
    return order_run(ctx, &B->ord, B->boxes, 4, qb - qa, B->tree.d.root);
}

/* Sorts the matches of the queries [lo, hi) of the chunk (buf -> sorted) that their threads did
 * not sort. hoff: the chunk's offsets on the host, base = hoff[lo]. */
grove_status box_sort_batch(grove_ctx *ctx, BoxBufs *B, const uint64_t *hoff, size_t lo, size_t hi,
                            int end_bit)
{
    cudaStream_t s = stream_of(ctx);
    u64 base = hoff[lo], items = hoff[hi] - base;
    int medium = 0;
    for (size_t q = lo; q < hi; q++) {
        u64 n = hoff[q + 1] - hoff[q];
        if (n > SMALL_SORT && n < HUGE_SEG) medium = 1;
        if (n >= HUGE_SEG) {
            size_t tb = 0;
            GROVE_TRY(grove_sort_keys_device(ctx, NULL, &tb, GROVE_U32, B->buf, B->sorted,
                                             (size_t)n, 0, end_bit, s));
            GROVE_TRY(ensure_temp(ctx, &B->rad_temp, &B->rad_bytes, tb, "radix sort scratch"));
            tb = B->rad_bytes;
            GROVE_TRY(
                grove_sort_keys_device(ctx, B->rad_temp, &tb, GROVE_U32, B->buf + (hoff[q] - base),
                                       B->sorted + (hoff[q] - base), (size_t)n, 0, end_bit, s));
        }
    }
    if (medium) {
        size_t tb = 0;
        GROVE_CUDA_TRY(ctx,
                       seg_sort(NULL, tb, B->buf, B->sorted, items, hi - lo, B->off + lo, base, s),
                       "quadtree box query: sizing DeviceSegmentedSort");
        GROVE_TRY(ensure_temp(ctx, &B->seg_temp, &B->seg_bytes, tb, "segmented sort scratch"));
        tb = B->seg_bytes;
        GROVE_CUDA_TRY(
            ctx, seg_sort(B->seg_temp, tb, B->buf, B->sorted, items, hi - lo, B->off + lo, base, s),
            "quadtree box query: sorting the matches (DeviceSegmentedSort)");
    }
    return GROVE_OK;
}

grove_status box_run(grove_ctx *ctx, const char *fn, const grove_quadtree *t, const float *boxes,
                     size_t nq, uint64_t *off, uint32_t **ind_out, BoxBufs *B)
{
    cudaStream_t s = stream_of(ctx);
    size_t nchunks = (nq + QCHUNK - 1) / QCHUNK;
    u64 total, max_cnt = 0;
    uint32_t *ind;
    int end_bit = 1;

    B->chunk = nq < QCHUNK ? nq : QCHUNK;
    GROVE_TRY(tree_acquire(ctx, t, &B->tree));
    GROVE_TRY(order_alloc(ctx, &B->ord, B->chunk));
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&B->boxes, B->chunk * 4 * sizeof(float), s,
                                "the query boxes"));
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&B->cnt, B->chunk * sizeof(uint32_t), s,
                                "the match counts"));
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&B->off, (B->chunk + 1) * sizeof(u64), s,
                                "the match offsets"));
    B->h_cnt = (uint32_t *)malloc(B->chunk * sizeof(uint32_t));
    if (!B->h_cnt)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu counts", fn,
                            B->chunk);

    /* Count pass over every chunk; the host sums the counts into the offsets. */
    off[0] = 0;
    for (size_t c = 0; c < nchunks; c++) {
        size_t qa = c * QCHUNK, qb = qa + QCHUNK < nq ? qa + QCHUNK : nq, m = qb - qa;
        GROVE_TRY(box_chunk(ctx, B, boxes, qa, qb));
        box_pass<false><<<blocks_for(m), BLOCK, 0, s>>>(B->tree.d, (const float4 *)B->boxes,
                                                        B->ord.ids_out, (uint32_t)m, 0, (uint32_t)m,
                                                        B->cnt, NULL, 0, NULL, NULL);
        GROVE_CUDA_LAUNCHED(ctx, "quadtree box query: count pass");
        GROVE_TRY(grove__cuda_d2h(ctx, B->h_cnt, B->cnt, m * sizeof(uint32_t), s));
        GROVE_TRY(grove__cuda_sync(ctx, s, "quadtree box query: count pass"));
        for (size_t i = 0; i < m; i++) {
            off[qa + i + 1] = off[qa + i] + B->h_cnt[i];
            if (B->h_cnt[i] > max_cnt) max_cnt = B->h_cnt[i];
        }
    }
    total = off[nq];
    if (total > SIZE_MAX / sizeof(uint32_t))
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: %llu matches do not fit in memory",
                            fn, (unsigned long long)total);
    ind = (uint32_t *)malloc((total ? (size_t)total : 1) * sizeof *ind);
    if (!ind)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "%s: out of memory for %zu matches (%zu bytes)", fn, (size_t)total,
                            (size_t)total * sizeof *ind);
    *ind_out = ind;
    if (total == 0) return GROVE_OK;

    /* Fill buffers: one batch holds OUT_CHUNK matches, or the largest single query. */
    B->out_cap = (size_t)(total < OUT_CHUNK ? total : OUT_CHUNK);
    if (max_cnt > B->out_cap) B->out_cap = (size_t)max_cnt;
    while (end_bit < 32 && (((u64)t->n - 1) >> end_bit) != 0) end_bit++;
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&B->buf, B->out_cap * sizeof(uint32_t), s,
                                "the box query matches"));
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&B->sorted, B->out_cap * sizeof(uint32_t), s,
                                "the sorted box query matches"));

    for (size_t c = 0; c < nchunks; c++) {
        size_t qa = c * QCHUNK, qb = qa + QCHUNK < nq ? qa + QCHUNK : nq, m = qb - qa;
        const uint64_t *hoff = off + qa;
        if (nchunks > 1) GROVE_TRY(box_chunk(ctx, B, boxes, qa, qb));
        GROVE_TRY(grove__cuda_h2d(ctx, B->off, hoff, (m + 1) * sizeof(u64), s));
        for (size_t lo = 0; lo < m;) {
            size_t hi = lo;
            while (hi < m && hoff[hi + 1] - hoff[lo] <= B->out_cap) hi++;
            u64 items = hoff[hi] - hoff[lo];
            if (items > 0) {
                box_pass<true><<<blocks_for(m), BLOCK, 0, s>>>(
                    B->tree.d, (const float4 *)B->boxes, B->ord.ids_out, (uint32_t)m, (uint32_t)lo,
                    (uint32_t)hi, NULL, B->off, hoff[lo], B->buf, B->sorted);
                GROVE_CUDA_LAUNCHED(ctx, "quadtree box query: fill pass");
                GROVE_TRY(box_sort_batch(ctx, B, hoff, lo, hi, end_bit));
                GROVE_TRY(grove__cuda_d2h(ctx, ind + hoff[lo], B->sorted,
                                          (size_t)items * sizeof(uint32_t), s));
            }
            lo = hi;
        }
    }
    return grove__cuda_sync(ctx, s, "quadtree box query");
}

/* ---- k nearest neighbours ---- */

__device__ __forceinline__ double dist2_point(double qx, double qy, float2 p)
{
    double dx = __dsub_rn((double)p.x, qx);
    double dy = __dsub_rn((double)p.y, qy);
    return __dadd_rn(__dmul_rn(dx, dx), __dmul_rn(dy, dy));
}

/* The CPU's dist2_box, a lower bound of dist2_point over the node's box. */
__device__ __forceinline__ double dist2_box(double qx, double qy, float xmin, float ymin,
                                            float xmax, float ymax)
{
    double dx = 0.0, dy = 0.0;
    if (qx < (double)xmin)
        dx = __dsub_rn((double)xmin, qx);
    else if (qx > (double)xmax)
        dx = __dsub_rn(qx, (double)xmax);
    if (qy < (double)ymin)
        dy = __dsub_rn((double)ymin, qy);
    else if (qy > (double)ymax)
        dy = __dsub_rn(qy, (double)ymax);
    return __dadd_rn(__dmul_rn(dx, dx), __dmul_rn(dy, dy));
}

__device__ __forceinline__ bool better(double da, uint32_t ia, double db, uint32_t ib)
{
    return da < db || (da == db && ia < ib);
}

/* Pushes the non-empty children of nd whose bound does not exceed kd, nearest on top. */
__device__ __forceinline__ void push_children(const DevTree &t, const Node &nd, double qx,
                                              double qy, double kd, int32_t *stack, int &sp)
{
    double cd[4];
    int32_t c[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const Node ch = load_node(t.nodes, nd.first_child + j);
        c[j] = nd.first_child + j;
        cd[j] = ch.end == ch.begin ? -1.0 : dist2_box(qx, qy, ch.xmin, ch.ymin, ch.xmax, ch.ymax);
    }
    /* descending by bound: a 4-element sorting network */
#define QT_CX(a, b)                                                                                \
    if (cd[a] < cd[b]) {                                                                           \
        double td = cd[a];                                                                         \
        cd[a] = cd[b];                                                                             \
        cd[b] = td;                                                                                \
        int32_t tc = c[a];                                                                         \
        c[a] = c[b];                                                                               \
        c[b] = tc;                                                                                 \
    }
    QT_CX(0, 1)
    QT_CX(2, 3)
    QT_CX(0, 2)
    QT_CX(1, 3)
    QT_CX(1, 2)
#undef QT_CX
#pragma unroll
    for (int j = 0; j < 4; j++)
        if (cd[j] >= 0.0 && !(cd[j] > kd)) stack[sp++] = c[j];
}

/* Up to K <= KNN_REG_MAX neighbours in registers, cap = min(k, n) <= K of them kept. The list
 * is sorted ascending and right-aligned: slots [0, K - cap) hold sentinels that rank before
 * every point, so the cap-th best is always slot K - 1 (a register; selecting slot cap - 1 would
 * be a dynamic index, which moves the whole list to local memory). Query pos of the batch is
 * local query order[pos]; its row is out[q * k ...]. */
template <int K>
__global__ void __launch_bounds__(BLOCK)
    knn_reg(DevTree t, const float2 *qs, const uint32_t *order, uint32_t m, int cap, int k,
            uint32_t *oi, double *od)
{
    const uint32_t pos = blockIdx.x * BLOCK + threadIdx.x;
    if (pos >= m) return;
    const uint32_t q = order[pos];
    const float2 qp = qs[q];
    const double qx = qp.x, qy = qp.y;
    double bd[K];
    uint32_t bi[K];
#pragma unroll
    for (int j = 0; j < K; j++) {
        bd[j] = j < K - cap ? -INFINITY : INFINITY;
        bi[j] = j < K - cap ? 0 : UINT32_MAX;
    }
    int32_t stack[STACK];
    int sp = 0;
    stack[sp++] = 0;
    while (sp > 0) {
        const Node nd = load_node(t.nodes, stack[--sp]);
        if (nd.end == nd.begin) continue;
        if (dist2_box(qx, qy, nd.xmin, nd.ymin, nd.xmax, nd.ymax) > bd[K - 1]) continue;
        if (nd.first_child >= 0) {
            push_children(t, nd, qx, qy, bd[K - 1], stack, sp);
            continue;
        }
        for (uint32_t i = nd.begin; i < nd.end; i++) {
            const double d = dist2_point(qx, qy, t.pts[i]);
            if (d > bd[K - 1]) continue;
            const uint32_t id = t.index[i];
            if (!better(d, id, bd[K - 1], bi[K - 1])) continue;
            bd[K - 1] = d;
            bi[K - 1] = id;
#pragma unroll
            for (int j = K - 1; j > 0; j--) {
                if (!better(bd[j], bi[j], bd[j - 1], bi[j - 1])) break;
                double td = bd[j];
                uint32_t ti = bi[j];
                bd[j] = bd[j - 1];
                bi[j] = bi[j - 1];
                bd[j - 1] = td;
                bi[j - 1] = ti;
            }
        }
    }
    uint32_t *ri = oi + (size_t)q * (size_t)k;
    double *rd = od ? od + (size_t)q * (size_t)k : NULL;
#pragma unroll
    for (int j = 0; j < K; j++)
        if (j >= K - cap) {
            ri[j - (K - cap)] = bi[j];
            if (rd) rd[j - (K - cap)] = bd[j];
        }
    for (int j = cap; j < k; j++) {
        ri[j] = UINT32_MAX;
        if (rd) rd[j] = INFINITY;
    }
}

/* A max-heap by (dist2, input position) per query in global scratch: entry j of the heap of
 * query pos is at j * m + pos, so the heads of a warp's heaps are one coalesced access. */
struct Heap {
    double *d;
    uint32_t *id;
    size_t stride, base;
    __device__ __forceinline__ size_t at(uint32_t j) const { return (size_t)j * stride + base; }
};

__device__ void heap_sift_down(const Heap &h, uint32_t n, double d, uint32_t id)
{
    uint32_t i = 0;
    for (;;) {
        uint32_t l = 2 * i + 1, w = i;
        double wd = d;
        uint32_t wi = id;
        if (l < n) {
            double ld = h.d[h.at(l)];
            uint32_t li = h.id[h.at(l)];
            if (better(wd, wi, ld, li)) {
                w = l;
                wd = ld;
                wi = li;
            }
            if (l + 1 < n) {
                double rd = h.d[h.at(l + 1)];
                uint32_t ri = h.id[h.at(l + 1)];
                if (better(wd, wi, rd, ri)) {
                    w = l + 1;
                    wd = rd;
                    wi = ri;
                }
            }
        }
        if (w == i) break;
        h.d[h.at(i)] = wd;
        h.id[h.at(i)] = wi;
        i = w;
    }
    h.d[h.at(i)] = d;
    h.id[h.at(i)] = id;
}

__global__ void __launch_bounds__(BLOCK)
    knn_heap(DevTree t, const float2 *qs, const uint32_t *order, uint32_t m, uint32_t cap, int k,
             double *hd, uint32_t *hid, uint32_t *oi, double *od)
{
    const uint32_t pos = blockIdx.x * BLOCK + threadIdx.x;
    if (pos >= m) return;
    const uint32_t q = order[pos];
    const float2 qp = qs[q];
    const double qx = qp.x, qy = qp.y;
    const Heap h = {hd, hid, m, pos};
    uint32_t hn = 0;
    double kd = INFINITY; /* the head once the heap is full */
    uint32_t kid = UINT32_MAX;
    int32_t stack[STACK];
    int sp = 0;
    stack[sp++] = 0;
    while (sp > 0) {
        const Node nd = load_node(t.nodes, stack[--sp]);
        if (nd.end == nd.begin) continue;
        if (dist2_box(qx, qy, nd.xmin, nd.ymin, nd.xmax, nd.ymax) > kd) continue;
        if (nd.first_child >= 0) {
            push_children(t, nd, qx, qy, kd, stack, sp);
            continue;
        }
        for (uint32_t i = nd.begin; i < nd.end; i++) {
            const double d = dist2_point(qx, qy, t.pts[i]);
            if (d > kd) continue;
            const uint32_t id = t.index[i];
            if (hn < cap) {
                uint32_t j = hn++;
                while (j > 0) { /* sift up */
                    uint32_t p = (j - 1) / 2;
                    double pd = h.d[h.at(p)];
                    uint32_t pi = h.id[h.at(p)];
                    if (!better(pd, pi, d, id)) break;
                    h.d[h.at(j)] = pd;
                    h.id[h.at(j)] = pi;
                    j = p;
                }
                h.d[h.at(j)] = d;
                h.id[h.at(j)] = id;
            } else {
                if (!better(d, id, kd, kid)) continue;
                heap_sift_down(h, hn, d, id);
            }
            if (hn == cap) {
                kd = h.d[h.at(0)];
                kid = h.id[h.at(0)];
            }
        }
    }
    uint32_t *ri = oi + (size_t)q * (size_t)k;
    double *rd = od ? od + (size_t)q * (size_t)k : NULL;
    /* pop the worst to the back: ascending (dist2, input position) */
    for (uint32_t n = hn; n > 0; n--) {
        ri[n - 1] = h.id[h.at(0)];
        if (rd) rd[n - 1] = h.d[h.at(0)];
        if (n > 1) heap_sift_down(h, n - 1, h.d[h.at(n - 1)], h.id[h.at(n - 1)]);
    }
    for (int j = (int)hn; j < k; j++) {
        ri[j] = UINT32_MAX;
        if (rd) rd[j] = INFINITY;
    }
}

struct KnnBufs {
    TreeUse tree;
    Order ord;
    float *qs;
    uint32_t *oi;
    double *od, *hd;
    uint32_t *hid;
    size_t batch, k, cap, with_d2, heap;
};

void knn_free(grove_ctx *ctx, KnnBufs *B)
{
    cudaStream_t s = stream_of(ctx);
    grove__cuda_free(ctx, B->qs, B->batch * 2 * sizeof(float), s);
    grove__cuda_free(ctx, B->oi, B->batch * B->k * sizeof(uint32_t), s);
    grove__cuda_free(ctx, B->od, B->with_d2 ? B->batch * B->k * sizeof(double) : 0, s);
    grove__cuda_free(ctx, B->hd, B->heap ? B->batch * B->cap * sizeof(double) : 0, s);
    grove__cuda_free(ctx, B->hid, B->heap ? B->batch * B->cap * sizeof(uint32_t) : 0, s);
    order_free(ctx, &B->ord);
    B->qs = NULL;
    B->oi = NULL;
    B->od = B->hd = NULL;
    B->hid = NULL;
}

grove_status knn_alloc(grove_ctx *ctx, KnnBufs *B)
{
    cudaStream_t s = stream_of(ctx);
    size_t b = B->batch, k = B->k;
    GROVE_TRY(order_alloc(ctx, &B->ord, b));
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&B->qs, b * 2 * sizeof(float), s, "kNN queries"));
    GROVE_TRY(
        grove__cuda_alloc(ctx, (void **)&B->oi, b * k * sizeof(uint32_t), s, "kNN result indices"));
    if (B->with_d2)
        GROVE_TRY(grove__cuda_alloc(ctx, (void **)&B->od, b * k * sizeof(double), s,
                                    "kNN result distances"));
    if (B->heap) {
        GROVE_TRY(
            grove__cuda_alloc(ctx, (void **)&B->hd, b * B->cap * sizeof(double), s, "kNN heaps"));
        GROVE_TRY(grove__cuda_alloc(ctx, (void **)&B->hid, b * B->cap * sizeof(uint32_t), s,
                                    "kNN heaps"));
    }
    return GROVE_OK;
}

grove_status knn_launch(grove_ctx *ctx, KnnBufs *B, size_t m, int k)
{
    cudaStream_t s = stream_of(ctx);
    const DevTree &t = B->tree.d;
    const float2 *qs = (const float2 *)B->qs;
    const uint32_t *ord = B->ord.ids_out;
    const int cap = (int)B->cap;
    const unsigned g = blocks_for(m);
    const uint32_t mm = (uint32_t)m;
    if (B->heap)
        knn_heap<<<g, BLOCK, 0, s>>>(t, qs, ord, mm, (uint32_t)B->cap, k, B->hd, B->hid, B->oi,
                                     B->od);
    else if (cap <= 1)
        knn_reg<1><<<g, BLOCK, 0, s>>>(t, qs, ord, mm, cap, k, B->oi, B->od);
    else if (cap <= 2)
        knn_reg<2><<<g, BLOCK, 0, s>>>(t, qs, ord, mm, cap, k, B->oi, B->od);
    else if (cap <= 4)
        knn_reg<4><<<g, BLOCK, 0, s>>>(t, qs, ord, mm, cap, k, B->oi, B->od);
    else if (cap <= 8)
        knn_reg<8><<<g, BLOCK, 0, s>>>(t, qs, ord, mm, cap, k, B->oi, B->od);
    else if (cap <= 16)
        knn_reg<16><<<g, BLOCK, 0, s>>>(t, qs, ord, mm, cap, k, B->oi, B->od);
    else
        knn_reg<32><<<g, BLOCK, 0, s>>>(t, qs, ord, mm, cap, k, B->oi, B->od);
    GROVE_CUDA_LAUNCHED(ctx, "quadtree kNN kernel");
    return GROVE_OK;
}

grove_status knn_run(grove_ctx *ctx, const grove_quadtree *t, const float *queries, size_t nq,
                     int k, uint32_t *indices, double *dist2, KnnBufs *B)
{
    cudaStream_t s = stream_of(ctx);
    size_t per_query, kk = (size_t)k;
    grove_status st;

    GROVE_TRY(tree_acquire(ctx, t, &B->tree));
    B->k = kk;
    B->cap = kk < t->n ? kk : t->n;
    B->with_d2 = dist2 != NULL;
    B->heap = B->cap > (size_t)KNN_REG_MAX;
    per_query = 2 * sizeof(float) + 4 * sizeof(uint32_t) + kk * sizeof(uint32_t) +
                (B->with_d2 ? kk * sizeof(double) : 0) +
                (B->heap ? B->cap * (sizeof(double) + sizeof(uint32_t)) : 0);
    B->batch = KNN_BUDGET / per_query;
    if (B->batch > KNN_MAX_BATCH) B->batch = KNN_MAX_BATCH;
    if (B->batch > nq) B->batch = nq;
    if (B->batch < 1) B->batch = 1;
    /* A smaller batch is slower but still right: halve it while the device is short. */
    for (;;) {
        st = knn_alloc(ctx, B);
        if (st != GROVE_ERR_DEVICE_OUT_OF_MEMORY || B->batch == 1) break;
        knn_free(ctx, B);
        B->batch /= 2;
    }
    GROVE_TRY(st);
    for (size_t qa = 0; qa < nq; qa += B->batch) {
        size_t m = nq - qa < B->batch ? nq - qa : B->batch;
        GROVE_TRY(grove__cuda_h2d(ctx, B->qs, queries + 2 * qa, m * 2 * sizeof(float), s));
        GROVE_TRY(order_run(ctx, &B->ord, B->qs, 2, m, B->tree.d.root));
        GROVE_TRY(knn_launch(ctx, B, m, k));
        GROVE_TRY(grove__cuda_d2h(ctx, indices + qa * kk, B->oi, m * kk * sizeof(uint32_t), s));
        if (dist2)
            GROVE_TRY(grove__cuda_d2h(ctx, dist2 + qa * kk, B->od, m * kk * sizeof(double), s));
    }
    return grove__cuda_sync(ctx, s, "quadtree kNN");
}

} /* namespace */

extern "C" grove_status grove__qt_query_boxes_cuda(grove_ctx *ctx, const char *fn,
                                                   const grove_quadtree *t, const float *boxes,
                                                   size_t nq, uint64_t **off_out,
                                                   uint32_t **ind_out)
{
    BoxBufs B;
    grove_status st;
    uint64_t *off;
    uint32_t *ind = NULL;

    *off_out = NULL;
    *ind_out = NULL;
    GROVE_TRY(check_access(ctx, fn, t));
    off = (uint64_t *)malloc((nq + 1) * sizeof *off);
    if (!off)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu offsets", fn,
                            nq + 1);
    if (nq == 0 || t->n == 0) { /* nothing can match: no device work */
        memset(off, 0, (nq + 1) * sizeof *off);
        ind = (uint32_t *)malloc(sizeof *ind);
        if (!ind) {
            free(off);
            return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                "%s: out of memory for 0 matches (0 bytes)", fn);
        }
        *off_out = off;
        *ind_out = ind;
        return GROVE_OK;
    }
    memset(&B, 0, sizeof B);
    st = grove__cuda_use(ctx);
    if (st == GROVE_OK) st = box_run(ctx, fn, t, boxes, nq, off, &ind, &B);
    box_free(ctx, &B);
    if (st != GROVE_OK) {
        free(off);
        free(ind);
        return st;
    }
    *off_out = off;
    *ind_out = ind;
    return GROVE_OK;
}

extern "C" grove_status grove__qt_knn_cuda(grove_ctx *ctx, const char *fn, const grove_quadtree *t,
                                           const float *queries, size_t nq, int k,
                                           uint32_t *indices, double *dist2)
{
    KnnBufs B;
    grove_status st;
    size_t kk = (size_t)k;

    GROVE_TRY(check_access(ctx, fn, t));
    if (nq == 0) return GROVE_OK;
    if (t->n == 0) { /* every row is padding */
        for (size_t i = 0; i < nq * kk; i++) {
            indices[i] = UINT32_MAX;
            if (dist2) dist2[i] = INFINITY;
        }
        return GROVE_OK;
    }
    memset(&B, 0, sizeof B);
    st = grove__cuda_use(ctx);
    if (st == GROVE_OK) st = knn_run(ctx, t, queries, nq, k, indices, dist2, &B);
    knn_free(ctx, &B);
    tree_release(ctx, &B.tree);
    return st;
}
