/*
 * octree_count_cuda.cu - the counting phase of the CUDA octree build: the box and the cube,
 * quantization, Morton order (and its refinement below level 21), the seed's warp-aggregated
 * counting with node spilling, and the counting pass alone for the benchmark.
 *
 * Per batch (all points at once, in Morton order, for the device-resident build):
 *   1. find    each thread descends its points from the root through the nodes split so far to
 *              a leaf, remembers it (leaf[]) and counts itself into it: the threads of a warp
 *              that hit the same leaf form one group (coalesced_threads + labeled_partition),
 *              whose leader adds the group's size with one atomicAdd; the leader whose add
 *              crosses max_points (at depth < max_depth) pushes the leaf on the spill list;
 *   2. split   every spilled leaf gets 8 children (empty ones are dropped at the end);
 *   3. descend every point (of this and earlier batches) whose leaf was split moves one level
 *              down and counts itself into the child as in 1; repeat 2-3 while anything spills.
 * A node's counter only grows, and a leaf is split exactly when its count first exceeds the
 * cap, so after the last batch the split nodes are exactly the inner nodes of octree.h,
 * whatever the batch size, the order of the points or the order in which atomics land.
 */
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_scan.cuh>

#include <math.h>

#include "octree_cuda_internal.cuh"
#include "octree_morton.cuh"

namespace cg = cooperative_groups;
using namespace grove__otc;

namespace
{

struct MinOp {
    __device__ double operator()(double a, double b) const { return b < a ? b : a; }
};
struct MaxOp {
    __device__ double operator()(double a, double b) const { return b > a ? b : a; }
};

/* ---- the cube and the grid ---- */

__global__ void bbox_kernel(const double *__restrict__ xyz, size_t n, double *__restrict__ part)
{
    typedef cub::BlockReduce<double, kBlock> BR;
    __shared__ typename BR::TempStorage tmp;
    double mn[3] = {INFINITY, INFINITY, INFINITY}, mx[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x; i < n;
         i += (size_t)gridDim.x * kBlock)
        for (int a = 0; a < 3; a++) {
            double v = xyz[3 * i + a];
            mn[a] = v < mn[a] ? v : mn[a];
            mx[a] = v > mx[a] ? v : mx[a];
        }
    for (int a = 0; a < 3; a++) {
        double r = BR(tmp).Reduce(mn[a], MinOp());
        if (threadIdx.x == 0) part[6 * blockIdx.x + a] = r;
        __syncthreads();
        r = BR(tmp).Reduce(mx[a], MaxOp());
        if (threadIdx.x == 0) part[6 * blockIdx.x + 3 + a] = r;
        __syncthreads();
    }
}

__global__ void quantize_kernel(const double *__restrict__ xyz, size_t n, uint32_t *__restrict__ q,
                                double lo0, double lo1, double lo2, double to_grid)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= 3 * n) return;
    const int a = (int)(i % 3);
    const double lo = a == 0 ? lo0 : (a == 1 ? lo1 : lo2);
    q[i] = grove__ot_quantize(xyz[i], lo, to_grid);
}

/* The Morton keys straight from the points (device-resident build): q is not stored here, the
 * permutation after the sort quantizes again from the coordinates it moves anyway. */
__global__ void quantize_morton_kernel(const double *__restrict__ xyz, size_t n, double lo0,
                                       double lo1, double lo2, double to_grid,
                                       unsigned long long *__restrict__ key,
                                       uint32_t *__restrict__ idx)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= n) return;
    const uint32_t p[3] = {grove__ot_quantize(xyz[3 * i], lo0, to_grid),
                           grove__ot_quantize(xyz[3 * i + 1], lo1, to_grid),
                           grove__ot_quantize(xyz[3 * i + 2], lo2, to_grid)};
    key[i] = grove__ot_morton_hi(p);
    idx[i] = (uint32_t)i;
}

/* Position j gets point perm[j]'s coordinates and grid coordinates. One random read of the
 * point (a random read of q would cost as much: DRAM moves 64 bytes either way), after which
 * the entries' placement reads coordinates by position. It also sets *deep as deep_kernel
 * does (below), with the previous position's q from the lane before (lane 0 quantizes that
 * point itself). */
__global__ void permute_points_kernel(const uint32_t *__restrict__ perm, size_t n,
                                      const double *__restrict__ xyz, double lo0, double lo1,
                                      double lo2, double to_grid, uint32_t *__restrict__ q,
                                      double *__restrict__ xyzm, uint32_t *__restrict__ deep)
{
    const size_t j = blockIdx.x * (size_t)kBlock + threadIdx.x;
    const bool in = j < n; /* no early return: the warp shuffles below */
    const int lane = threadIdx.x & 31;
    uint32_t a[3] = {0, 0, 0}, b[3];
    if (in) {
        const size_t i = perm[j];
        const double x = xyz[3 * i], y = xyz[3 * i + 1], z = xyz[3 * i + 2];
        a[0] = grove__ot_quantize(x, lo0, to_grid);
        a[1] = grove__ot_quantize(y, lo1, to_grid);
        a[2] = grove__ot_quantize(z, lo2, to_grid);
        q[3 * j] = a[0];
        q[3 * j + 1] = a[1];
        q[3 * j + 2] = a[2];
        xyzm[3 * j] = x;
        xyzm[3 * j + 1] = y;
        xyzm[3 * j + 2] = z;
    }
    for (int c = 0; c < 3; c++) b[c] = __shfl_up_sync(~0u, a[c], 1);
    if (!in || j == 0) return;
    if (lane == 0) {
        const size_t i = perm[j - 1];
        b[0] = grove__ot_quantize(xyz[3 * i], lo0, to_grid);
        b[1] = grove__ot_quantize(xyz[3 * i + 1], lo1, to_grid);
        b[2] = grove__ot_quantize(xyz[3 * i + 2], lo2, to_grid);
    }
    bool same_key = true, same_q = true;
    for (int c = 0; c < 3; c++) {
        same_key = same_key && (a[c] >> 9) == (b[c] >> 9);
        same_q = same_q && a[c] == b[c];
    }
    if (same_key && !same_q) *deep = 1u;
}

/* ---- 1-3. counting and spilling ---- */

/* Points a counting thread handles (kBlock apart, so the loads coalesce). In Morton order
 * its points mostly share a leaf: it adds each run of equal leaves at once, and the warp
 * aggregates over its lanes. One atomic per warp per run is still ~n/32 atomics on the same
 * few counters at the shallow levels, where every warp in flight is in the same node. */
const int kPerThread = 8;

unsigned count_blocks(size_t n)
{
    const size_t per = (size_t)kBlock * kPerThread;
    size_t b = (n + per - 1) / per;
    return (unsigned)(b < 1 ? 1 : b);
}

/* The seed's counting step: the lanes flushing a run now (coalesced_threads) with the same
 * leaf form one group (labeled_partition), whose leader adds the group's total with one
 * atomicAdd; the leader whose add crosses the cap pushes the leaf (once: only one add can
 * cross). */
__device__ __forceinline__ void count_run(const Pool &P, uint32_t node, uint32_t k,
                                          int max_depth, uint32_t max_points)
{
    cg::coalesced_group active = cg::coalesced_threads();
    cg::coalesced_group group = cg::labeled_partition(active, node);
    const uint32_t total = cg::reduce(group, k, cg::plus<uint32_t>());
    if (group.thread_rank() == 0) {
        const uint32_t old = atomicAdd(&P.count[node], total);
        if (old <= max_points && old + total > max_points && P.depth[node] < max_depth)
            P.spill[atomicAdd(P.nspill, 1u)] = node;
    }
}

/* A thread's run of consecutive points with the same leaf: a new leaf flushes the run so far
 * to count_run. */
struct Run {
    uint32_t node, len;
    __device__ __forceinline__ void push(const Pool &P, uint32_t leaf, int max_depth,
                                         uint32_t max_points)
    {
        if (leaf != node) {
            flush(P, max_depth, max_points);
            node = leaf;
        }
        len++;
    }
    __device__ __forceinline__ void flush(const Pool &P, int max_depth, uint32_t max_points)
    {
        if (len) count_run(P, node, len, max_depth, max_points);
        len = 0;
    }
};

__global__ void find_kernel(Pool P, const uint32_t *__restrict__ q, size_t begin, size_t end,
                            uint32_t *__restrict__ leaf, int max_depth, uint32_t max_points)
{
    const size_t i0 = begin + blockIdx.x * (size_t)kBlock * kPerThread + threadIdx.x;
    Run run = {kNone, 0};
    for (int k = 0; k < kPerThread; k++) {
        const size_t i = i0 + (size_t)k * kBlock;
        if (i >= end) break;
        uint32_t p[3], node = 0, c;
        load_q(q, i, p);
        for (int d = 0; (c = P.child[node]) != kNone; d++) node = c + grove__ot_octant(p, d);
        leaf[i] = node;
        run.push(P, node, max_depth, max_points);
    }
    run.flush(P, max_depth, max_points);
}

__global__ void descend_kernel(Pool P, const uint32_t *__restrict__ q, size_t end,
                               uint32_t *__restrict__ leaf, int max_depth, uint32_t max_points)
{
    const size_t i0 = blockIdx.x * (size_t)kBlock * kPerThread + threadIdx.x;
    Run run = {kNone, 0};
    for (int k = 0; k < kPerThread; k++) {
        const size_t i = i0 + (size_t)k * kBlock;
        if (i >= end) break;
        uint32_t node = leaf[i];
        const uint32_t c = P.child[node];
        if (c == kNone) continue;
        uint32_t p[3];
        load_q(q, i, p);
        node = c + grove__ot_octant(p, P.depth[node]);
        leaf[i] = node;
        run.push(P, node, max_depth, max_points);
    }
    run.flush(P, max_depth, max_points);
}

__global__ void split_kernel(Pool P, uint32_t ns, uint32_t base)
{
    const uint32_t t = blockIdx.x * kBlock + threadIdx.x;
    if (t >= 8u * ns) return;
    const uint32_t s = t >> 3, node = P.spill[s], c = base + 8u * s + (t & 7u);
    P.count[c] = 0;
    P.child[c] = kNone;
    P.depth[c] = (uint8_t)(P.depth[node] + 1);
    if ((t & 7u) == 0) P.child[node] = base + 8u * s;
}

/* ---- Morton order (morton_kernel and permute_kernel: octree_morton.cuh) ---- */

/* Sets *flag when two neighbouring positions have equal 63-bit keys (the same top 21 bits of
 * q) but different grid points: only then does the Morton order need refining below level 21. */
__global__ void deep_kernel(const uint32_t *__restrict__ q, size_t n, uint32_t *__restrict__ flag)
{
    const size_t j = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (j == 0 || j >= n) return;
    uint32_t a[3], b[3];
    load_q(q, j, a);
    load_q(q, j - 1, b);
    bool same_key = true, same_q = true;
    for (int c = 0; c < 3; c++) {
        same_key = same_key && (a[c] >> 9) == (b[c] >> 9);
        same_q = same_q && a[c] == b[c];
    }
    if (same_key && !same_q) *flag = 1u;
}

/* Refinement below level 21: runs of equal 63-bit key numbered (rid, from 1 on) and the octant
 * digits of levels 21..29 appended, so that sorting by the result orders the points by their
 * whole Morton code (ties keep input order: the sort is stable). */
__global__ void run_head_kernel(const u64 *__restrict__ key, size_t n, uint32_t *__restrict__ head)
{
    const size_t j = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (j >= n) return;
    head[j] = j == 0 || key[j] != key[j - 1];
}

__global__ void refine_key_kernel(const uint32_t *__restrict__ rid, const uint32_t *__restrict__ q,
                                  size_t n, u64 *__restrict__ key, uint32_t *__restrict__ pos)
{
    const size_t j = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (j >= n) return;
    uint32_t p[3];
    load_q(q, j, p);
    key[j] = (u64)(rid[j] - 1u) << 27 | grove__ot_morton_lo(p);
    pos[j] = (uint32_t)j;
}

/* The refinement when every run of equal 63-bit keys is short (at most kShortRun positions, as
 * in a cloud whose dense spots hold a few points a level-21 cell): the thread of a run's first
 * position sorts the run by the octant digits of levels 21..29 (insertion sort, stable, so
 * equal codes keep input order) and applies the order to the run's grid coordinates, input
 * positions, leaves and coordinates in place; the 63-bit key is the same along a run. The
 * refined key is (position of the run's head) << 27 | low digits: equal within a voxel of a
 * level below 21, different between runs, which is all the samples compare. A longer run sets
 * *longer and is left as it is (the caller then refines by a sort of everything). */
const int kShortRun = 32;

template <typename T> __device__ __forceinline__ void permute_run(T *a, size_t j, int len,
                                                                  int stride, int c,
                                                                  const uint8_t *ord)
{
    T buf[kShortRun];
    for (int t = 0; t < len; t++) buf[t] = a[(j + t) * stride + c];
    for (int t = 0; t < len; t++) a[(j + t) * stride + c] = buf[ord[t]];
}

__global__ void refine_short_runs_kernel(const u64 *__restrict__ skey, uint32_t *__restrict__ q,
                                         uint32_t *__restrict__ perm, uint32_t *__restrict__ leaf,
                                         double *__restrict__ xyzm, size_t n,
                                         u64 *__restrict__ rkey, uint32_t *__restrict__ longer)
{
    const size_t j = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (j >= n) return;
    const u64 k = skey[j];
    if (j > 0 && skey[j - 1] == k) return; /* not a run's head */
    size_t e = j + 1;
    while (e < n && e - j <= (size_t)kShortRun && skey[e] == k) e++;
    const int len = (int)(e - j);
    if (len > kShortRun) {
        *longer = 1u;
        return;
    }
    uint32_t lo[kShortRun];
    uint8_t ord[kShortRun];
    for (int t = 0; t < len; t++) {
        uint32_t p[3];
        load_q(q, j + t, p);
        const uint32_t v = grove__ot_morton_lo(p);
        int u = t; /* insertion: after every equal code, so the sort is stable */
        while (u > 0 && lo[u - 1] > v) {
            lo[u] = lo[u - 1];
            ord[u] = ord[u - 1];
            u--;
        }
        lo[u] = v;
        ord[u] = (uint8_t)t;
    }
    for (int t = 0; t < len; t++) rkey[j + t] = (u64)j << 27 | lo[t];
    bool moved = false;
    for (int t = 0; t < len; t++) moved |= ord[t] != t;
    if (!moved) return;
    for (int c = 0; c < 3; c++) permute_run(q, j, len, 3, c, ord);
    permute_run(perm, j, len, 1, 0, ord);
    permute_run(leaf, j, len, 1, 0, ord);
    if (xyzm)
        for (int c = 0; c < 3; c++) permute_run(xyzm, j, len, 3, c, ord);
}

/* Applies the refining sort's order to everything kept per position. */
__global__ void refine_permute_kernel(const uint32_t *__restrict__ spos, size_t n,
                                      const uint32_t *__restrict__ q, uint32_t *__restrict__ q2,
                                      const uint32_t *__restrict__ perm,
                                      uint32_t *__restrict__ perm2,
                                      const uint32_t *__restrict__ leaf,
                                      uint32_t *__restrict__ leaf2, const u64 *__restrict__ key,
                                      u64 *__restrict__ key2, const double *__restrict__ xyzm,
                                      double *__restrict__ xyzm2)
{
    const size_t j = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (j >= n) return;
    const size_t i = spos[j];
    q2[3 * j] = q[3 * i];
    q2[3 * j + 1] = q[3 * i + 1];
    q2[3 * j + 2] = q[3 * i + 2];
    perm2[j] = perm[i];
    leaf2[j] = leaf[i];
    key2[j] = key[i];
    if (xyzm) {
        xyzm2[3 * j] = xyzm[3 * i];
        xyzm2[3 * j + 1] = xyzm[3 * i + 1];
        xyzm2[3 * j + 2] = xyzm[3 * i + 2];
    }
}

/* ---- counting pass alone (benchmark) ---- */

template <bool Agg>
__global__ void count_cells_kernel(const uint32_t *__restrict__ q, size_t n, int depth,
                                   uint32_t *__restrict__ counts)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= n) return;
    const int sh = GROVE_OCTREE_BITS - depth;
    uint32_t p[3];
    load_q(q, i, p);
    const uint32_t cell = (p[0] >> sh) | ((p[1] >> sh) << depth) | ((p[2] >> sh) << (2 * depth));
    if (Agg) {
        cg::coalesced_group active = cg::coalesced_threads();
        cg::coalesced_group group = cg::labeled_partition(active, cell);
        if (group.thread_rank() == 0) atomicAdd(&counts[cell], group.num_threads());
    } else {
        atomicAdd(&counts[cell], 1u);
    }
}

grove_status pool_reserve(Build &B, size_t want)
{
    if (want <= B.pool_cap) return GROVE_OK;
    if (want > (size_t)kNone - 8)
        return grove__error(B.ctx, GROVE_ERR_LIMIT,
                            "octree (CUDA): more than 2^32 candidate nodes during the build");
    size_t cap = B.pool_cap ? B.pool_cap : 1024;
    while (cap < want) cap *= 2;
    if (cap > (size_t)kNone - 8) cap = (size_t)kNone - 8;
    GROVE_TRY(B.A.grow(&B.P.child, B.pool_size, cap, "octree node pool (children)"));
    GROVE_TRY(B.A.grow(&B.P.count, B.pool_size, cap, "octree node pool (counts)"));
    GROVE_TRY(B.A.grow(&B.P.depth, B.pool_size, cap, "octree node pool (depths)"));
    /* the spill list of the round being split must survive */
    GROVE_TRY(B.A.grow(&B.P.spill, B.pool_cap, cap, "octree spill list"));
    B.pool_cap = cap;
    return GROVE_OK;
}

/* Sorts (key, idx) (n 63-bit Morton keys and their positions, consumed) and applies the order:
 * q, and leaf when counted, are permuted; perm and skey are set. */
grove_status sort_and_permute(Build &B, u64 *key, uint32_t *idx, bool counted)
{
    const size_t n = B.n;
    uint32_t *qs, *ls = NULL;
    GROVE_TRY(B.A.get(&B.skey, n, "octree sorted Morton keys"));
    GROVE_TRY(B.A.get(&B.perm, n, "octree Morton order"));
    GROVE_TRY(sort_pairs(B, key, B.skey, idx, B.perm, n, 0, 63, "octree Morton sort"));
    B.A.put(key);
    B.A.put(idx);
    GROVE_TRY(B.A.get(&qs, 3 * n, "octree sorted grid coordinates"));
    if (counted) GROVE_TRY(B.A.get(&ls, n, "octree sorted leaves"));
    if (n) {
        permute_kernel<<<blocks_for(n), kBlock, 0, B.A.s>>>(B.perm, n, B.q, qs,
                                                            ls ? B.leaf : NULL, ls);
        GROVE_CUDA_LAUNCHED(B.ctx, "octree permute kernel");
    }
    B.A.put(B.q);
    B.q = qs;
    if (counted) {
        B.A.put(B.leaf);
        B.leaf = ls;
    }
    return GROVE_OK;
}

} /* namespace */

namespace grove__otc
{

grove_status device_cube(Build &B, const double *d_xyz)
{
    grove_ctx *ctx = B.ctx;
    const size_t n = B.n;
    double lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
    if (n) {
        const unsigned nb = blocks_for(n) < 1024 ? blocks_for(n) : 1024;
        double *part;
        double *hp = (double *)malloc(6 * nb * sizeof *hp);
        struct F {
            double *p;
            ~F() { free(p); }
        } fg = {hp};
        if (!hp) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "octree: out of memory");
        GROVE_TRY(B.A.get(&part, 6 * nb, "octree bounding box"));
        bbox_kernel<<<nb, kBlock, 0, B.A.s>>>(d_xyz, n, part);
        GROVE_CUDA_LAUNCHED(ctx, "octree bounding box kernel");
        GROVE_TRY(grove__cuda_d2h(ctx, hp, part, 6 * nb * sizeof *hp, B.A.s));
        GROVE_TRY(grove__cuda_sync(ctx, B.A.s, "octree bounding box"));
        for (int a = 0; a < 3; a++) {
            lo[a] = hp[a];
            hi[a] = hp[3 + a];
        }
        for (unsigned b = 1; b < nb; b++)
            for (int a = 0; a < 3; a++) {
                lo[a] = hp[6 * b + a] < lo[a] ? hp[6 * b + a] : lo[a];
                hi[a] = hp[6 * b + 3 + a] > hi[a] ? hp[6 * b + 3 + a] : hi[a];
            }
        B.A.put(part);
    }
    grove__ot_cube_from_box(lo, hi, B.t);
    return GROVE_OK;
}

grove_status build_init(Build &B)
{
    GROVE_TRY(B.A.get(&B.q, 3 * B.n, "octree grid coordinates"));
    GROVE_TRY(B.A.get(&B.leaf, B.n, "octree point leaves"));
    GROVE_TRY(B.A.get(&B.P.nspill, 1, "octree spill counter"));
    size_t guess = 1 + 8 * (B.n / (B.t->opts.max_points ? B.t->opts.max_points : 1) + 1);
    GROVE_TRY(pool_reserve(B, guess < (1u << 20) ? guess : (1u << 20)));
    GROVE_CUDA_TRY(B.ctx, cudaMemsetAsync(B.P.child, 0xFF, sizeof(uint32_t), B.A.s),
                   "octree root init");
    GROVE_CUDA_TRY(B.ctx, cudaMemsetAsync(B.P.count, 0, sizeof(uint32_t), B.A.s),
                   "octree root init");
    GROVE_CUDA_TRY(B.ctx, cudaMemsetAsync(B.P.depth, 0, 1, B.A.s), "octree root init");
    B.pool_size = 1;
    return GROVE_OK;
}

grove_status quantize_batch(Build &B, const double *d_batch, size_t b, size_t m)
{
    const grove_octree *t = B.t;
    if (m == 0) return GROVE_OK;
    quantize_kernel<<<blocks_for(3 * m), kBlock, 0, B.A.s>>>(d_batch, m, B.q + 3 * b, t->lo[0],
                                                             t->lo[1], t->lo[2], t->to_grid);
    GROVE_CUDA_LAUNCHED(B.ctx, "octree quantize kernel");
    return GROVE_OK;
}

grove_status count_batch(Build &B, size_t begin, size_t end)
{
    grove_ctx *ctx = B.ctx;
    const cudaStream_t s = B.A.s;
    const int md = B.t->opts.max_depth;
    const uint32_t mp = B.t->opts.max_points;
    uint32_t ns = 0;
    if (end == begin) return GROVE_OK;
    GROVE_CUDA_TRY(ctx, cudaMemsetAsync(B.P.nspill, 0, sizeof(uint32_t), s), "octree count");
    find_kernel<<<count_blocks(end - begin), kBlock, 0, s>>>(B.P, B.q, begin, end, B.leaf, md,
                                                             mp);
    GROVE_CUDA_LAUNCHED(ctx, "octree find kernel");
    for (;;) {
        GROVE_CUDA_TRY(ctx, cudaMemcpyAsync(&ns, B.P.nspill, sizeof ns, cudaMemcpyDeviceToHost, s),
                       "octree spill count");
        GROVE_TRY(grove__cuda_sync(ctx, s, "octree count pass"));
        if (ns == 0) return GROVE_OK;
        B.spill_rounds++;
        const size_t base = B.pool_size;
        GROVE_TRY(pool_reserve(B, base + 8 * (size_t)ns));
        split_kernel<<<blocks_for(8 * (size_t)ns), kBlock, 0, s>>>(B.P, ns, (uint32_t)base);
        GROVE_CUDA_LAUNCHED(ctx, "octree split kernel");
        B.pool_size = base + 8 * (size_t)ns;
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(B.P.nspill, 0, sizeof(uint32_t), s), "octree count");
        descend_kernel<<<count_blocks(end), kBlock, 0, s>>>(B.P, B.q, end, B.leaf, md, mp);
        GROVE_CUDA_LAUNCHED(ctx, "octree descend kernel");
    }
}

/* Puts the positions in Morton order (a stable sort of the 63-bit keys, so equal keys keep
 * input order): q, and leaf when the points were counted already (counted), are permuted; perm
 * and skey are set. Before, positions are input positions. The counting passes then see a warp's
 * points in one or two leaves, and every cell down to level 21 is one run of positions. */
grove_status morton_order(Build &B, bool counted)
{
    const size_t n = B.n;
    u64 *key;
    uint32_t *idx;
    GROVE_TRY(B.A.get(&key, n, "octree Morton keys"));
    GROVE_TRY(B.A.get(&idx, n, "octree Morton positions"));
    if (n) {
        morton_kernel<<<blocks_for(n), kBlock, 0, B.A.s>>>(B.q, n, key, idx);
        GROVE_CUDA_LAUNCHED(B.ctx, "octree Morton key kernel");
    }
    return sort_and_permute(B, key, idx, counted);
}

grove_status needs_refining(Build &B, bool *yes)
{
    uint32_t h = 0;
    *yes = false;
    if (B.n < 2) return GROVE_OK;
    if (!B.deep) { /* the device-resident build's permutation has set it already */
        GROVE_TRY(B.A.get(&B.deep, 1, "octree refinement flag"));
        GROVE_CUDA_TRY(B.ctx, cudaMemsetAsync(B.deep, 0, sizeof *B.deep, B.A.s),
                       "octree refinement flag");
        deep_kernel<<<blocks_for(B.n), kBlock, 0, B.A.s>>>(B.q, B.n, B.deep);
        GROVE_CUDA_LAUNCHED(B.ctx, "octree refinement test kernel");
    }
    GROVE_TRY(grove__cuda_d2h(B.ctx, &h, B.deep, sizeof h, B.A.s));
    GROVE_TRY(grove__cuda_sync(B.ctx, B.A.s, "octree refinement test"));
    *yes = h != 0;
    return GROVE_OK;
}

/* Refines the Morton order below level 21 so that every cell of every level is one run: a
 * stable order by (run of equal 63-bit key, octant digits of levels 21 to 29). Only clouds
 * with points closer than a level-21 cell that still differ need it. Where every such run
 * holds at most kShortRun points, refine_short_runs_kernel sorts each in place; otherwise a
 * stable radix sort of all positions by (run number, digits), at most 32 + 27 bits, and a
 * gather of every per-position array. */
int g_refine_mode = 0; /* grove__ot_refine_mode */
int g_refine_last = 0; /* grove__ot_refine_last */

grove_status refine_order(Build &B)
{
    grove_ctx *ctx = B.ctx;
    const cudaStream_t s = B.A.s;
    const size_t n = B.n;
    uint32_t *head, *rid, *pos, *spos, *q2, *perm2, runs = 0;
    u64 *key;
    size_t tb = 0;
    void *tmp = NULL;
    if (n == 0) return GROVE_OK;
    g_refine_last = 2;
    if (g_refine_mode == 0) {
        /* short runs only (the usual dense spot): sorted in place, run by run */
        uint32_t *longer, hl = 0;
        GROVE_TRY(B.A.get(&B.rkey, n, "octree refined keys"));
        GROVE_TRY(B.A.get(&longer, 1, "octree long run flag"));
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(longer, 0, sizeof *longer, s), "octree long run flag");
        refine_short_runs_kernel<<<blocks_for(n), kBlock, 0, s>>>(B.skey, B.q, B.perm, B.leaf,
                                                                   B.xyzm, n, B.rkey, longer);
        GROVE_CUDA_LAUNCHED(ctx, "octree short run refinement kernel");
        GROVE_TRY(grove__cuda_d2h(ctx, &hl, longer, sizeof hl, s));
        GROVE_TRY(grove__cuda_sync(ctx, s, "octree short run refinement"));
        B.A.put(longer);
        if (!hl) {
            g_refine_last = 1;
            return GROVE_OK;
        }
        /* a run longer than kShortRun: the runs sorted so far stay sorted (the sort below is
         * stable and sorts by the same codes) */
        B.A.put(B.rkey);
        B.rkey = NULL;
    }
    GROVE_TRY(B.A.get(&head, n, "octree run heads"));
    GROVE_TRY(B.A.get(&rid, n, "octree run ids"));
    run_head_kernel<<<blocks_for(n), kBlock, 0, s>>>(B.skey, n, head);
    GROVE_CUDA_LAUNCHED(ctx, "octree run head kernel");
    GROVE_CUDA_TRY(ctx, cub::DeviceScan::InclusiveSum(NULL, tb, head, rid, n, s),
                   "octree run ids (size)");
    GROVE_TRY(B.A.get((char **)&tmp, tb, "octree run id scratch"));
    GROVE_CUDA_TRY(ctx, cub::DeviceScan::InclusiveSum(tmp, tb, head, rid, n, s), "octree run ids");
    B.A.put(tmp);
    B.A.put(head);
    GROVE_CUDA_TRY(ctx, cudaMemcpyAsync(&runs, rid + n - 1, sizeof runs, cudaMemcpyDeviceToHost, s),
                   "octree run count");
    GROVE_TRY(grove__cuda_sync(ctx, s, "octree run count"));
    GROVE_TRY(B.A.get(&key, n, "octree refined keys"));
    GROVE_TRY(B.A.get(&pos, n, "octree refined positions"));
    refine_key_kernel<<<blocks_for(n), kBlock, 0, s>>>(rid, B.q, n, key, pos);
    GROVE_CUDA_LAUNCHED(ctx, "octree refine key kernel");
    B.A.put(rid);
    GROVE_TRY(B.A.get(&B.rkey, n, "octree sorted refined keys"));
    GROVE_TRY(B.A.get(&spos, n, "octree refined order"));
    GROVE_TRY(sort_pairs(B, key, B.rkey, pos, spos, n, 0, bits_for(runs - 1u) + 27,
                         "octree refining sort"));
    B.A.put(key);
    B.A.put(pos);
    uint32_t *leaf2;
    u64 *skey2;
    double *xyzm2 = NULL;
    if (B.xyzm) GROVE_TRY(B.A.get(&xyzm2, 3 * n, "octree refined coordinates"));
    GROVE_TRY(B.A.get(&q2, 3 * n, "octree refined grid coordinates"));
    GROVE_TRY(B.A.get(&perm2, n, "octree refined order"));
    GROVE_TRY(B.A.get(&leaf2, n, "octree refined leaves"));
    GROVE_TRY(B.A.get(&skey2, n, "octree refined Morton keys"));
    refine_permute_kernel<<<blocks_for(n), kBlock, 0, s>>>(spos, n, B.q, q2, B.perm, perm2, B.leaf,
                                                           leaf2, B.skey, skey2, B.xyzm, xyzm2);
    GROVE_CUDA_LAUNCHED(ctx, "octree refine permute kernel");
    if (B.xyzm) {
        B.A.put(B.xyzm);
        B.xyzm = xyzm2;
    }
    B.A.put(spos);
    B.A.put(B.q);
    B.A.put(B.perm);
    B.A.put(B.leaf);
    B.A.put(B.skey);
    B.leaf = leaf2;
    B.skey = skey2;
    B.q = q2;
    B.perm = perm2;
    return GROVE_OK;
}

grove_status build_points_on_device(Build &B, const double *d_xyz)
{
    const grove_octree *t = B.t;
    const size_t n = B.n;
    u64 *key;
    uint32_t *idx;
    GROVE_TRY(B.A.get(&key, n, "octree Morton keys"));
    GROVE_TRY(B.A.get(&idx, n, "octree Morton positions"));
    if (n) {
        quantize_morton_kernel<<<blocks_for(n), kBlock, 0, B.A.s>>>(
            d_xyz, n, t->lo[0], t->lo[1], t->lo[2], t->to_grid, key, idx);
        GROVE_CUDA_LAUNCHED(B.ctx, "octree quantize kernel");
    }
    GROVE_TRY(B.A.get(&B.skey, n, "octree sorted Morton keys"));
    GROVE_TRY(B.A.get(&B.perm, n, "octree Morton order"));
    GROVE_TRY(sort_pairs(B, key, B.skey, idx, B.perm, n, 0, 63, "octree Morton sort"));
    B.A.put(key);
    B.A.put(idx);
    GROVE_TRY(B.A.get(&B.xyzm, 3 * n, "octree coordinates in Morton order"));
    GROVE_TRY(B.A.get(&B.deep, 1, "octree refinement flag"));
    GROVE_CUDA_TRY(B.ctx, cudaMemsetAsync(B.deep, 0, sizeof *B.deep, B.A.s),
                   "octree refinement flag");
    if (n) {
        permute_points_kernel<<<blocks_for(n), kBlock, 0, B.A.s>>>(
            B.perm, n, d_xyz, t->lo[0], t->lo[1], t->lo[2], t->to_grid, B.q, B.xyzm, B.deep);
        GROVE_CUDA_LAUNCHED(B.ctx, "octree permute kernel");
    }
    /* All points are here at once: counted in Morton order, a warp's points share one or two
     * leaves and the seed's aggregation leaves about one atomic per warp. */
    return count_batch(B, 0, n);
}

} /* namespace grove__otc */

extern "C" void grove__ot_refine_mode(int mode) { grove__otc::g_refine_mode = mode; }
extern "C" int grove__ot_refine_last(void)
{
    const int r = grove__otc::g_refine_last;
    grove__otc::g_refine_last = 0;
    return r;
}

extern "C" grove_status grove__ot_count_cells_cuda(grove_ctx *ctx, const uint32_t *d_q, size_t n,
                                                   int depth, int aggregated, uint32_t *d_counts)
{
    const cudaStream_t s = (cudaStream_t)ctx->stream;
    if (depth < 0 || depth > 10)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "octree count: depth %d not in 0..10",
                            depth);
    if (n == 0) return GROVE_OK;
    if (aggregated)
        count_cells_kernel<true><<<blocks_for(n), kBlock, 0, s>>>(d_q, n, depth, d_counts);
    else
        count_cells_kernel<false><<<blocks_for(n), kBlock, 0, s>>>(d_q, n, depth, d_counts);
    GROVE_CUDA_LAUNCHED(ctx, "octree count kernel");
    return GROVE_OK;
}
