/*
 * octree_cuda.cu - the CUDA backend of the octree: the batched build with warp-aggregated
 * counting and node spilling, the level-of-detail samples, the queries, and the counting pass
 * alone for the benchmark. octree.h defines the tree; everything here is a function of the grid
 * coordinates q (grove__ot_quantize), so the result equals the CPU backend's byte for byte.
 *
 * Build, per batch of points (all points at once for the device-resident build, which first
 * puts them in Morton order: a CUB radix sort of 63-bit keys, levels 0..20 of the grid, stable,
 * so a warp's points fall in one or two leaves and every cell down to level 21 is a run):
 *   1. find    each thread descends its point from the root through the nodes split so far to
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
 * Then:
 *   4. layout  the host walks the (small) node pool breadth-first, children in octant order,
 *              dropping empty octants, and numbers the final nodes; the build from host memory
 *              puts its points in Morton order now;
 *   5. keys    each point's entry key is its final leaf: (leaf, input position) pairs in input
 *              order;
 *   6. lod     a voxel of an inner node of depth d is a cell of d + log2(lod_grid) levels, so
 *              in Morton order (refined below level 21 when the samples reach deeper: a second
 *              stable sort by (run of equal key, the finer octant digits)) it is one run of
 *              positions. Per depth, a CUB reduce-by-key over all positions (key: the voxel's
 *              Morton prefix; value: dist2 << 32 | input position, ~0 below a leaf) gives each
 *              voxel's winner (exact: nearest, ties by position), which sets bit d of its
 *              word by input position; a scan of the words' popcounts places the winners'
 *              (node, position) pairs in input order after the leaf pairs;
 *   7. place   one stable radix sort of all pairs by node: every node's entries (a leaf's
 *              points or an inner node's sample) become one run in ascending input order, in
 *              node order, so entry e is sorted pair e; the runs' starts give begin/end and a
 *              gather writes index and xyz.
 */
#include <cuda_runtime.h>

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/discard_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core_cuda.h"
#include "octree_cuda.h"
#include "octree_morton.cuh"

namespace cg = cooperative_groups;

namespace
{

typedef grove_octree_node Node;
typedef unsigned long long u64;

const uint32_t kNone = 0xFFFFFFFFu;
const u64 kEmpty = ~0ull;
const int kBlock = 256;
const int kStack = 232; /* 7 per level below the root + 8: a query's descent never needs more */

unsigned blocks_for(size_t n)
{
    size_t b = (n + kBlock - 1) / kBlock;
    return (unsigned)(b < 1 ? 1 : b);
}

int bits_for(uint64_t v) /* bits needed to hold values 0..v */
{
    int b = 1;
    while (b < 64 && (v >> b) != 0) b++;
    return b;
}

/* Device scratch of one call: every buffer is freed when the arena goes out of scope, so the
 * entry points can return on the first failure. */
struct Arena {
    grove_ctx *ctx;
    cudaStream_t s;
    struct Blk {
        void *p;
        size_t bytes;
    } blk[48];
    int nb;

    Arena(grove_ctx *c) : ctx(c), s((cudaStream_t)c->stream), nb(0) {}
    ~Arena()
    {
        for (int i = 0; i < nb; i++) grove__cuda_free(ctx, blk[i].p, blk[i].bytes, s);
    }
    template <typename T> grove_status get(T **p, size_t count, const char *what)
    {
        void *v = NULL;
        *p = NULL;
        if (nb == (int)(sizeof blk / sizeof blk[0]))
            return grove__error(ctx, GROVE_ERR_INTERNAL, "octree (CUDA): too many scratch buffers");
        const size_t bytes = count > 0 ? count * sizeof(T) : 1; /* never a NULL buffer */
        GROVE_TRY(grove__cuda_alloc(ctx, &v, bytes, s, what));
        blk[nb].p = v;
        blk[nb].bytes = bytes;
        nb++;
        *p = (T *)v;
        return GROVE_OK;
    }
    void put(void *p)
    {
        for (int i = 0; i < nb; i++)
            if (blk[i].p == p) {
                grove__cuda_free(ctx, p, blk[i].bytes, s);
                blk[i] = blk[--nb];
                return;
            }
    }
    /* Grows *p from `have` to `want` elements, keeping the first `keep`. */
    template <typename T>
    grove_status grow(T **p, size_t keep, size_t want, const char *what)
    {
        T *n = NULL;
        GROVE_TRY(get(&n, want, what));
        if (keep)
            GROVE_CUDA_TRY(ctx, cudaMemcpyAsync(n, *p, keep * sizeof(T), cudaMemcpyDeviceToDevice, s),
                           what);
        if (*p) put(*p);
        *p = n;
        return GROVE_OK;
    }
};

/* Pinned host memory of one call. */
struct Pinned {
    void *p;
    Pinned() : p(NULL) {}
    ~Pinned()
    {
        if (p) cudaFreeHost(p);
    }
};

struct MinOp {
    __device__ double operator()(double a, double b) const { return b < a ? b : a; }
};
struct MaxOp {
    __device__ double operator()(double a, double b) const { return b > a ? b : a; }
};

__device__ __forceinline__ void load_q(const uint32_t *__restrict__ q, size_t i, uint32_t p[3])
{
    p[0] = q[3 * i];
    p[1] = q[3 * i + 1];
    p[2] = q[3 * i + 2];
}

/* ---- the cube (device-resident build) ---- */

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

/* ---- 1-3. counting and spilling ---- */

struct Pool {
    uint32_t *child; /* first of 8 children, kNone for a leaf */
    uint32_t *count; /* points counted into the node while it was a leaf */
    uint8_t *depth;
    uint32_t *spill; /* nodes that crossed the cap this round */
    uint32_t *nspill;
};

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

__global__ void find_kernel(Pool P, const uint32_t *__restrict__ q, size_t begin, size_t end,
                            uint32_t *__restrict__ leaf, int max_depth, uint32_t max_points)
{
    const size_t i0 = begin + blockIdx.x * (size_t)kBlock * kPerThread + threadIdx.x;
    uint32_t run = kNone, len = 0;
    for (int k = 0; k < kPerThread; k++) {
        const size_t i = i0 + (size_t)k * kBlock;
        if (i >= end) break;
        uint32_t p[3], node = 0, c;
        load_q(q, i, p);
        for (int d = 0; (c = P.child[node]) != kNone; d++) node = c + grove__ot_octant(p, d);
        leaf[i] = node;
        if (node != run) {
            if (len) count_run(P, run, len, max_depth, max_points);
            run = node;
            len = 0;
        }
        len++;
    }
    if (len) count_run(P, run, len, max_depth, max_points);
}

__global__ void descend_kernel(Pool P, const uint32_t *__restrict__ q, size_t end,
                               uint32_t *__restrict__ leaf, int max_depth, uint32_t max_points)
{
    const size_t i0 = blockIdx.x * (size_t)kBlock * kPerThread + threadIdx.x;
    uint32_t run = kNone, len = 0;
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
        if (node != run) {
            if (len) count_run(P, run, len, max_depth, max_points);
            run = node;
            len = 0;
        }
        len++;
    }
    if (len) count_run(P, run, len, max_depth, max_points);
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

/* ---- Morton order ---- */

/* morton_kernel and permute_kernel: octree_morton.cuh */

/* Refinement below level 21: runs of equal 63-bit key numbered (rid, from 1 on) and the octant
 * digits of levels 21..levels-1 appended, so that sorting by the result orders every cell of up
 * to `levels` levels into one run. */
__global__ void run_head_kernel(const u64 *__restrict__ key, size_t n, uint32_t *__restrict__ head)
{
    const size_t j = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (j >= n) return;
    head[j] = j == 0 || key[j] != key[j - 1];
}

__global__ void refine_key_kernel(const uint32_t *__restrict__ rid, const uint32_t *__restrict__ q,
                                  size_t n, int levels, u64 *__restrict__ key,
                                  uint32_t *__restrict__ pos)
{
    const size_t j = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (j >= n) return;
    uint32_t p[3];
    load_q(q, j, p);
    u64 k = rid[j] - 1u;
    for (int l = 21; l < levels; l++) k = (k << 3) | grove__ot_octant(p, l);
    key[j] = k;
    pos[j] = (uint32_t)j;
}

/* Applies the refining sort's order to everything kept per position. */
__global__ void refine_permute_kernel(const uint32_t *__restrict__ spos, size_t n,
                                      const uint32_t *__restrict__ q, uint32_t *__restrict__ q2,
                                      const uint32_t *__restrict__ perm,
                                      uint32_t *__restrict__ perm2,
                                      const uint32_t *__restrict__ leaf,
                                      uint32_t *__restrict__ leaf2, const u64 *__restrict__ key,
                                      u64 *__restrict__ key2)
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
}

/* ---- 5. placement ---- */

/* Leaf entries as (final leaf, input position) pairs in input order. */
__global__ void leaf_keys_kernel(const uint32_t *__restrict__ leaf,
                                 const uint32_t *__restrict__ perm, size_t n, const uint32_t *__restrict__ final_of,
                                 const uint8_t *__restrict__ pool_depth, uint32_t *__restrict__ key,
                                 uint32_t *__restrict__ pos, uint8_t *__restrict__ ldepth)
{
    const size_t j = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (j >= n) return;
    const uint32_t l = leaf[j];
    key[perm[j]] = final_of[l];
    pos[j] = (uint32_t)j;
    ldepth[j] = pool_depth[l];
}

/* ---- 6. level-of-detail samples ----
 * In Morton order (refined to the deepest voxel) every voxel of every inner node is one run of
 * positions, so its winner is a segmented minimum of (dist2 << 32 | input position). */

/* The voxel of position j at depth d as a key equal along its run and different from its
 * neighbours': the Morton prefix of d + log2(lod_grid) levels, from the 63-bit key (levels
 * 0..20) or from the refined key (run of the 63-bit key, then the finer levels). */
struct VoxelKey {
    const u64 *key;
    int shift;
    __device__ u64 operator()(size_t j) const { return key[j] >> shift; }
};

/* kEmpty for points whose node at depth d is a leaf (never a winner; such a point's voxel
 * run holds no point below an inner node). */
struct VoxelValue {
    const uint32_t *q, *perm;
    const uint8_t *ldepth;
    int d, g;
    __device__ u64 operator()(size_t j) const
    {
        if (ldepth[j] <= d) return kEmpty;
        uint32_t p[3], dist2;
        load_q(q, j, p);
        grove__ot_voxel(p, d, g, &dist2);
        return ((u64)dist2 << 32) | (u64)perm[j];
    }
};

struct MinU64 {
    __device__ u64 operator()(u64 a, u64 b) const { return b < a ? b : a; }
};

/* Bit d of wins[input position]: the point is its voxel's winner at depth d (runs[0] voxels).
 * (Carrying the Morton position along in a 16-byte value, to mark winners in position order
 * instead of scattering by input position, made the reduction slower than the scatter it
 * saved: 47.7 against 36.2 ms for the samples of 10^8 uniform points, H100.) */
__global__ void lod_win_kernel(const u64 *__restrict__ agg, const u64 *__restrict__ runs, int d,
                               uint32_t *__restrict__ wins)
{
    const size_t r = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (r >= *runs) return;
    const u64 v = agg[r];
    if (v != kEmpty) wins[(uint32_t)v] |= 1u << d;
}

struct PopCount {
    const uint32_t *wins;
    __device__ u64 operator()(size_t i) const { return (u64)__popc(wins[i]); }
};

/* The sample entries, (node, input position) pairs in input order after the n leaf pairs:
 * point i's entries start at end[i] - popc(wins[i]); its node at depth d is its leaf's
 * ancestor there. */
__global__ void lod_emit_kernel(const uint32_t *__restrict__ wins, const u64 *__restrict__ end,
                                size_t n, const uint32_t *__restrict__ parent,
                                const uint8_t *__restrict__ ndepth, uint32_t *__restrict__ key,
                                uint32_t *__restrict__ pos)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= n) return;
    uint32_t m = wins[i];
    if (!m) return;
    size_t o = n + end[i] - (u64)__popc(m);
    uint32_t node = key[i]; /* the leaf */
    int depth = ndepth[node];
    while (m) {
        const int d = 31 - __clz(m); /* deepest first: walk up */
        m &= ~(1u << d);
        while (depth > d) {
            node = parent[node];
            depth--;
        }
        key[o] = node;
        pos[o] = (uint32_t)i;
        o++;
    }
}

/* ---- 5, 7. bounds and gather ---- */

__global__ void bounds_kernel(const uint32_t *__restrict__ skey, size_t m, u64 *__restrict__ begin)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= m) return;
    if (i == 0 || skey[i] != skey[i - 1]) begin[skey[i]] = i;
}

__global__ void gather_kernel(const uint32_t *__restrict__ pos, size_t m,
                              const double *__restrict__ xyz, uint32_t *__restrict__ index,
                              double *__restrict__ exyz)
{
    const size_t e = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (e >= m) return;
    const uint32_t p = pos[e];
    index[e] = p;
    if (xyz) {
        exyz[3 * e] = xyz[3 * (size_t)p];
        exyz[3 * e + 1] = xyz[3 * (size_t)p + 1];
        exyz[3 * e + 2] = xyz[3 * (size_t)p + 2];
    }
}

/* ---- the build driver ---- */

struct Build {
    grove_ctx *ctx;
    Arena A;
    grove_octree *t;
    size_t n;
    uint32_t *q, *leaf; /* per position: grid coordinates, pool leaf */
    uint32_t *perm;     /* position -> input position once in Morton order; NULL before */
    u64 *skey;          /* the positions' 63-bit Morton keys (levels 0..20) */
    u64 *rkey;          /* after refine_order: the refined keys (levels 0..rlevels - 1) */
    int rlevels;
    Pool P;
    size_t pool_size, pool_cap;
    uint32_t spill_rounds;
    Build(grove_ctx *c, grove_octree *tr)
        : ctx(c), A(c), t(tr), n(tr->n), q(NULL), leaf(NULL), perm(NULL), skey(NULL), rkey(NULL),
          rlevels(0)
    {
        memset(&P, 0, sizeof P);
        pool_size = pool_cap = 0;
        spill_rounds = 0;
    }
};

template <typename K>
grove_status sort_pairs(Build &B, const K *kin, K *kout, const uint32_t *vin, uint32_t *vout,
                        size_t n, int bits, const char *what)
{
    size_t tb = 0;
    void *tmp = NULL;
    if (n == 0) return GROVE_OK;
    GROVE_CUDA_TRY(B.ctx, cub::DeviceRadixSort::SortPairs(NULL, tb, kin, kout, vin, vout, n, 0,
                                                          bits, B.A.s),
                   what);
    GROVE_TRY(B.A.get((char **)&tmp, tb, what));
    GROVE_CUDA_TRY(B.ctx, cub::DeviceRadixSort::SortPairs(tmp, tb, kin, kout, vin, vout, n, 0,
                                                          bits, B.A.s),
                   what);
    B.A.put(tmp);
    return GROVE_OK;
}

/* Puts the positions in Morton order (a stable sort of the 63-bit keys, so equal keys keep
 * input order): q, and leaf when the points were counted already (counted), are permuted; perm
 * and skey are set. Before, positions are input positions. The counting passes then see a warp's
 * points in one or two leaves, and every cell down to level 21 is one run of positions. */
grove_status morton_order(Build &B, bool counted)
{
    grove_ctx *ctx = B.ctx;
    const cudaStream_t s = B.A.s;
    const size_t n = B.n;
    u64 *key;
    uint32_t *idx, *qs, *ls = NULL;
    GROVE_TRY(B.A.get(&key, n, "octree Morton keys"));
    GROVE_TRY(B.A.get(&idx, n, "octree Morton positions"));
    GROVE_TRY(B.A.get(&B.skey, n, "octree sorted Morton keys"));
    GROVE_TRY(B.A.get(&B.perm, n, "octree Morton order"));
    if (n) {
        morton_kernel<<<blocks_for(n), kBlock, 0, s>>>(B.q, n, key, idx);
        GROVE_CUDA_LAUNCHED(ctx, "octree Morton key kernel");
    }
    GROVE_TRY(sort_pairs(B, key, B.skey, idx, B.perm, n, 63, "octree Morton sort"));
    B.A.put(key);
    B.A.put(idx);
    GROVE_TRY(B.A.get(&qs, 3 * n, "octree sorted grid coordinates"));
    if (counted) GROVE_TRY(B.A.get(&ls, n, "octree sorted leaves"));
    if (n) {
        permute_kernel<<<blocks_for(n), kBlock, 0, s>>>(B.perm, n, B.q, qs, ls ? B.leaf : NULL,
                                                        ls);
        GROVE_CUDA_LAUNCHED(ctx, "octree permute kernel");
    }
    B.A.put(B.q);
    B.q = qs;
    if (counted) {
        B.A.put(B.leaf);
        B.leaf = ls;
    }
    return GROVE_OK;
}

/* Refines the Morton order below level 21 so that every cell of up to `levels` (22..30) levels
 * is one run too: a stable sort by (run of equal 63-bit key, octant digits of levels 21 to
 * levels - 1), at most 32 + 27 bits. Only trees whose samples reach below level 21 need it. */
grove_status refine_order(Build &B, int levels)
{
    grove_ctx *ctx = B.ctx;
    const cudaStream_t s = B.A.s;
    const size_t n = B.n;
    uint32_t *head, *rid, *pos, *spos, *q2, *perm2, runs = 0;
    u64 *key;
    size_t tb = 0;
    void *tmp = NULL;
    if (n == 0) return GROVE_OK;
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
    refine_key_kernel<<<blocks_for(n), kBlock, 0, s>>>(rid, B.q, n, levels, key, pos);
    GROVE_CUDA_LAUNCHED(ctx, "octree refine key kernel");
    B.A.put(rid);
    GROVE_TRY(B.A.get(&B.rkey, n, "octree sorted refined keys"));
    GROVE_TRY(B.A.get(&spos, n, "octree refined order"));
    GROVE_TRY(sort_pairs(B, key, B.rkey, pos, spos, n, bits_for(runs - 1u) + 3 * (levels - 21),
                         "octree refining sort"));
    B.rlevels = levels;
    B.A.put(key);
    B.A.put(pos);
    uint32_t *leaf2;
    u64 *skey2;
    GROVE_TRY(B.A.get(&q2, 3 * n, "octree refined grid coordinates"));
    GROVE_TRY(B.A.get(&perm2, n, "octree refined order"));
    GROVE_TRY(B.A.get(&leaf2, n, "octree refined leaves"));
    GROVE_TRY(B.A.get(&skey2, n, "octree refined Morton keys"));
    refine_permute_kernel<<<blocks_for(n), kBlock, 0, s>>>(spos, n, B.q, q2, B.perm, perm2, B.leaf,
                                                           leaf2, B.skey, skey2);
    GROVE_CUDA_LAUNCHED(ctx, "octree refine permute kernel");
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

/* Steps 1-3 for points [begin, end), whose q are on the device. */
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

struct HostLayout {
    Node *nodes;
    uint32_t *final_of; /* pool id -> final id */
    uint32_t *parent;   /* final id -> final id of the parent (kNone for the root) */
    size_t num_nodes;
    HostLayout() : nodes(NULL), final_of(NULL), parent(NULL), num_nodes(0) {}
    ~HostLayout()
    {
        free(nodes);
        free(final_of);
        free(parent);
    }
};

/* Step 4 on the host: the pool holds a few nodes per max_points points. */
grove_status layout(Build &B, HostLayout &L)
{
    grove_ctx *ctx = B.ctx;
    const size_t P = B.pool_size;
    uint32_t *child = (uint32_t *)malloc(P * sizeof *child);
    uint32_t *count = (uint32_t *)malloc(P * sizeof *count);
    uint32_t *order = (uint32_t *)malloc(P * sizeof *order);
    uint32_t *parent = (uint32_t *)malloc(P * sizeof *parent);
    L.parent = parent;
    L.nodes = (Node *)calloc(P, sizeof *L.nodes);
    L.final_of = (uint32_t *)malloc(P * sizeof *L.final_of);
    grove_status st = GROVE_OK;
    if (!child || !count || !order || !parent || !L.nodes || !L.final_of) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "octree (CUDA): out of memory for %zu "
                          "nodes' layout", P);
        goto _end;
    }
    st = grove__cuda_d2h(ctx, child, B.P.child, P * sizeof *child, B.A.s);
    if (st == GROVE_OK) st = grove__cuda_d2h(ctx, count, B.P.count, P * sizeof *count, B.A.s);
    if (st == GROVE_OK) st = grove__cuda_sync(ctx, B.A.s, "octree node pool download");
    if (st != GROVE_OK) goto _end;
    {
        size_t cnt = 1;
        memset(L.final_of, 0xFF, P * sizeof *L.final_of);
        order[0] = 0;
        L.final_of[0] = 0;
        parent[0] = kNone;
        for (size_t k = 0; k < cnt; k++) {
            Node *nd = &L.nodes[k];
            const uint32_t pid = order[k];
            nd->first_child = kNone;
            if (child[pid] == kNone) {
                nd->total = count[pid];
                continue;
            }
            nd->total = 0;
            for (unsigned o = 0; o < 8; o++) {
                const uint32_t c = child[pid] + o;
                if (count[c] == 0) continue;
                Node *cn = &L.nodes[cnt];
                if (nd->child_mask == 0) nd->first_child = (uint32_t)cnt;
                nd->child_mask |= (uint8_t)(1u << o);
                cn->depth = (uint8_t)(nd->depth + 1);
                cn->octant = (uint8_t)o;
                cn->cell[0] = 2 * nd->cell[0] + (o & 1u);
                cn->cell[1] = 2 * nd->cell[1] + ((o >> 1) & 1u);
                cn->cell[2] = 2 * nd->cell[2] + ((o >> 2) & 1u);
                order[cnt] = c;
                parent[cnt] = (uint32_t)k;
                L.final_of[c] = (uint32_t)cnt;
                cnt++;
            }
        }
        for (size_t k = cnt; k-- > 1;) L.nodes[parent[k]].total += L.nodes[k].total;
        L.num_nodes = cnt;
    }
_end:
    free(child);
    free(count);
    free(order);
    return st;
}

void free_tree_device(grove_octree *t);

/* Steps 4-7. d_xyz: the points on the device, or NULL (the host build fills xyz itself). */
grove_status finish(Build &B, const double *d_xyz, grove_octree_stats *stats)
{
    grove_ctx *ctx = B.ctx;
    grove_octree *t = B.t;
    const cudaStream_t s = B.A.s;
    const size_t n = B.n;
    HostLayout L;
    double t0 = grove__ot_now_ms();

    GROVE_TRY(layout(B, L));
    const size_t nn = L.num_nodes;
    const int kb = bits_for(nn ? nn - 1 : 0);
    const int g = grove__ot_log2_grid(t->opts.lod_grid);
    int depth = 0, inner_depth = -1;
    for (size_t k = 0; k < nn; k++) {
        depth = L.nodes[k].depth > depth ? L.nodes[k].depth : depth;
        if (L.nodes[k].first_child != kNone && L.nodes[k].depth > inner_depth)
            inner_depth = L.nodes[k].depth;
    }
    const bool lod = t->opts.lod_grid && inner_depth >= 0 && n;
    if (!B.perm) GROVE_TRY(morton_order(B, true));
    const double t_keys = grove__ot_now_ms() - t0;
    t0 = grove__ot_now_ms();
    /* the deepest voxels are cells of inner_depth + g levels */
    if (lod && inner_depth + g > 21) GROVE_TRY(refine_order(B, inner_depth + g));

    /* Entry keys (final node, input position): the leaves' points in input order, then the
     * sample winners in input order (a point's entries for several depths together); one
     * stable sort by node puts every node's entries together, ascending. */
    uint32_t *final_of, *key, *val;
    uint8_t *ldepth;
    size_t S = 0;
    GROVE_TRY(B.A.get(&final_of, B.pool_size, "octree node map"));
    GROVE_TRY(grove__cuda_h2d(ctx, final_of, L.final_of, B.pool_size * sizeof *final_of, s));
    GROVE_TRY(B.A.get(&key, n, "octree entry keys"));
    GROVE_TRY(B.A.get(&val, n, "octree entry positions"));
    GROVE_TRY(B.A.get(&ldepth, n, "octree leaf depths"));
    if (n) {
        leaf_keys_kernel<<<blocks_for(n), kBlock, 0, s>>>(B.leaf, B.perm, n, final_of, B.P.depth,
                                                          key, val, ldepth);
        GROVE_CUDA_LAUNCHED(ctx, "octree leaf keys kernel");
    }
    B.A.put(final_of);
    B.A.put(B.leaf);
    B.leaf = NULL;

    /* 6. lod samples: per depth, a segmented minimum over the voxels' runs */
    if (lod) {
        uint32_t *wins, *d_parent;
        uint8_t *d_ndepth;
        u64 *agg, *nruns, *wend;
        GROVE_TRY(B.A.get(&wins, n, "octree lod winners"));
        GROVE_TRY(B.A.get(&agg, n, "octree lod voxel minima"));
        GROVE_TRY(B.A.get(&nruns, 1, "octree lod voxel count"));
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(wins, 0, n * sizeof(uint32_t), s), "octree lod");
        size_t rtb = 0;
        void *rtmp = NULL;
        thrust::counting_iterator<size_t> j0(0);
        VoxelKey vk0 = {B.skey, 0};
        VoxelValue vv0 = {B.q, B.perm, ldepth, 0, g};
        GROVE_CUDA_TRY(ctx, cub::DeviceReduce::ReduceByKey(
                                NULL, rtb, thrust::make_transform_iterator(j0, vk0),
                                thrust::make_discard_iterator(),
                                thrust::make_transform_iterator(j0, vv0), agg, nruns, MinU64(),
                                n, s),
                       "octree lod minima (size)");
        GROVE_TRY(B.A.get((char **)&rtmp, rtb, "octree lod minima scratch"));
        for (int d = 0; d <= inner_depth; d++) {
            const int levels = d + g;
            VoxelKey vk = {B.skey, 3 * (21 - levels)};
            if (levels > 21) {
                vk.key = B.rkey;
                vk.shift = 3 * (B.rlevels - levels);
            }
            VoxelValue vv = {B.q, B.perm, ldepth, d, g};
            GROVE_CUDA_TRY(ctx, cub::DeviceReduce::ReduceByKey(
                                    rtmp, rtb, thrust::make_transform_iterator(j0, vk),
                                    thrust::make_discard_iterator(),
                                    thrust::make_transform_iterator(j0, vv), agg, nruns, MinU64(),
                                    n, s),
                           "octree lod minima");
            lod_win_kernel<<<blocks_for(n), kBlock, 0, s>>>(agg, nruns, d, wins);
            GROVE_CUDA_LAUNCHED(ctx, "octree lod winners kernel");
        }
        B.A.put(rtmp);
        B.A.put(agg);
        /* each point's entries start where the earlier points' end */
        GROVE_TRY(B.A.get(&wend, n, "octree lod entry ends"));
        PopCount pc = {wins};
        size_t stb = 0;
        void *stmp = NULL;
        GROVE_CUDA_TRY(ctx, cub::DeviceScan::InclusiveSum(
                                NULL, stb, thrust::make_transform_iterator(j0, pc), wend, n, s),
                       "octree lod entry ends (size)");
        GROVE_TRY(B.A.get((char **)&stmp, stb, "octree lod scan scratch"));
        GROVE_CUDA_TRY(ctx, cub::DeviceScan::InclusiveSum(
                                stmp, stb, thrust::make_transform_iterator(j0, pc), wend, n, s),
                       "octree lod entry ends");
        B.A.put(stmp);
        u64 m = 0;
        GROVE_CUDA_TRY(ctx, cudaMemcpyAsync(&m, wend + n - 1, sizeof m, cudaMemcpyDeviceToHost, s),
                       "octree sample count");
        GROVE_TRY(grove__cuda_sync(ctx, s, "octree lod samples"));
        S = (size_t)m;
        if (S) {
            GROVE_TRY(B.A.grow(&key, n, n + S, "octree entry keys"));
            GROVE_TRY(B.A.grow(&val, n, n + S, "octree entry positions"));
            GROVE_TRY(B.A.get(&d_parent, nn, "octree node parents"));
            GROVE_TRY(B.A.get(&d_ndepth, nn, "octree node depths"));
            uint8_t *hd = (uint8_t *)malloc(nn);
            if (!hd)
                return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                    "octree (CUDA): out of memory for %zu node depths", nn);
            for (size_t k = 0; k < nn; k++) hd[k] = L.nodes[k].depth;
            grove_status st = grove__cuda_h2d(ctx, d_ndepth, hd, nn, s);
            if (st == GROVE_OK)
                st = grove__cuda_h2d(ctx, d_parent, L.parent, nn * sizeof(uint32_t), s);
            free(hd); /* pageable copies have been staged when they return */
            GROVE_TRY(st);
            lod_emit_kernel<<<blocks_for(n), kBlock, 0, s>>>(wins, wend, n, d_parent, d_ndepth, key,
                                                             val);
            GROVE_CUDA_LAUNCHED(ctx, "octree lod emit kernel");
            B.A.put(d_parent);
            B.A.put(d_ndepth);
        }
        B.A.put(wend);
        B.A.put(wins);
        GROVE_TRY(grove__cuda_sync(ctx, s, "octree lod samples"));
    }
    B.A.put(ldepth);
    B.A.put(B.skey);
    B.A.put(B.rkey);
    B.skey = B.rkey = NULL;
    const double t_lod = grove__ot_now_ms() - t0;
    t0 = grove__ot_now_ms();

    /* 5/7. one stable sort by node; entry e is sorted item e */
    const size_t ne = n + S;
    uint32_t *skey, *sval;
    u64 *dbegin;
    GROVE_TRY(B.A.get(&skey, ne, "octree sorted entry keys"));
    GROVE_TRY(B.A.get(&sval, ne, "octree sorted entry positions"));
    if (ne) {
        size_t tb = 0;
        void *tmp = NULL;
        GROVE_CUDA_TRY(ctx, cub::DeviceRadixSort::SortPairs(NULL, tb, key, skey, val, sval, ne, 0,
                                                            kb, s),
                       "octree entry sort (size)");
        GROVE_TRY(B.A.get((char **)&tmp, tb, "octree entry sort scratch"));
        GROVE_CUDA_TRY(ctx, cub::DeviceRadixSort::SortPairs(tmp, tb, key, skey, val, sval, ne, 0,
                                                            kb, s),
                       "octree entry sort");
        B.A.put(tmp);
    }
    B.A.put(key);
    B.A.put(val);
    GROVE_TRY(B.A.get(&dbegin, nn, "octree node begins"));
    GROVE_CUDA_TRY(ctx, cudaMemsetAsync(dbegin, 0xFF, nn * sizeof(u64), s), "octree begins");
    if (ne) {
        bounds_kernel<<<blocks_for(ne), kBlock, 0, s>>>(skey, ne, dbegin);
        GROVE_CUDA_LAUNCHED(ctx, "octree node bounds kernel");
    }
    uint32_t *d_index = NULL;
    double *d_exyz = NULL;
    Node *d_tnodes = NULL;
    t->dev_ctx = ctx;
    t->num_nodes = nn;
    t->num_entries = ne;
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&d_index, ne * sizeof(uint32_t), s,
                                "octree entry indices"));
    t->d_index = d_index;
    if (d_xyz) {
        GROVE_TRY(grove__cuda_alloc(ctx, (void **)&d_exyz, 3 * ne * sizeof(double), s,
                                    "octree entry coordinates"));
        t->d_xyz = d_exyz;
    }
    if (ne) {
        gather_kernel<<<blocks_for(ne), kBlock, 0, s>>>(sval, ne, d_xyz, d_index, d_exyz);
        GROVE_CUDA_LAUNCHED(ctx, "octree gather kernel");
    }
    {
        u64 *hb = (u64 *)malloc(nn * sizeof *hb);
        struct F {
            u64 *p;
            ~F() { free(p); }
        } fg = {hb};
        if (!hb) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "octree (CUDA): out of memory");
        GROVE_TRY(grove__cuda_d2h(ctx, hb, dbegin, nn * sizeof *hb, s));
        GROVE_TRY(grove__cuda_sync(ctx, s, "octree node begins"));
        u64 next = ne;
        for (size_t k = nn; k-- > 0;) {
            Node *nd = &L.nodes[k];
            if (hb[k] != kEmpty) {
                nd->begin = hb[k];
                nd->end = next;
                next = hb[k];
            } else {
                nd->begin = nd->end = next;
            }
            if (nd->first_child == kNone && nd->end - nd->begin != nd->total)
                return grove__error(ctx, GROVE_ERR_INTERNAL,
                                    "octree (CUDA): leaf %zu has %llu entries for %llu points", k,
                                    (unsigned long long)(nd->end - nd->begin),
                                    (unsigned long long)nd->total);
        }
    }
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&d_tnodes, nn * sizeof(Node), s, "octree nodes"));
    t->d_nodes = d_tnodes;
    GROVE_TRY(grove__cuda_h2d(ctx, d_tnodes, L.nodes, nn * sizeof(Node), s));
    t->depth = depth;
    GROVE_TRY(grove__cuda_sync(ctx, s, "octree gather"));
    if (stats) {
        stats->ms_place = t_keys + (grove__ot_now_ms() - t0);
        stats->ms_lod = t_lod;
        stats->spill_rounds = B.spill_rounds;
    }
    return GROVE_OK;
}

void free_tree_device(grove_octree *t)
{
    grove_ctx *c = t->dev_ctx;
    if (!c) return;
    grove__cuda_use(c);
    grove__cuda_free(c, t->d_nodes, t->num_nodes * sizeof(Node), c->stream);
    grove__cuda_free(c, t->d_index, t->num_entries ? t->num_entries * sizeof(uint32_t) : 0,
                     c->stream);
    grove__cuda_free(c, t->d_xyz, t->num_entries ? 3 * t->num_entries * sizeof(double) : 0,
                     c->stream);
    t->d_nodes = NULL;
    t->d_index = NULL;
    t->d_xyz = NULL;
    t->dev_ctx = NULL;
}

grove_status download(grove_ctx *ctx, grove_octree *t)
{
    const size_t nn = t->num_nodes, ne = t->num_entries;
    const cudaStream_t s = (cudaStream_t)ctx->stream;
    Node *nodes = (Node *)malloc((nn ? nn : 1) * sizeof *nodes);
    uint32_t *index = (uint32_t *)malloc((ne ? ne : 1) * sizeof *index);
    double *xyz = (double *)malloc((ne ? 3 * ne : 1) * sizeof *xyz);
    grove_status st = GROVE_OK;
    if (!nodes || !index || !xyz) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "octree download: out of memory for %zu nodes and %zu entries", nn, ne);
        goto _fail;
    }
    grove__prefault(index, ne * sizeof *index, grove__threads(ctx));
    st = grove__cuda_d2h(ctx, nodes, t->d_nodes, nn * sizeof *nodes, s);
    if (st == GROVE_OK) st = grove__cuda_d2h(ctx, index, t->d_index, ne * sizeof *index, s);
    if (st == GROVE_OK && t->d_xyz) {
        grove__prefault(xyz, 3 * ne * sizeof *xyz, grove__threads(ctx));
        st = grove__cuda_d2h(ctx, xyz, t->d_xyz, 3 * ne * sizeof *xyz, s);
    }
    if (st == GROVE_OK) st = grove__cuda_sync(ctx, s, "octree download");
    if (st != GROVE_OK) goto _fail;
    t->nodes = nodes;
    t->index = index;
    t->xyz = xyz;
    return GROVE_OK;
_fail:
    free(nodes);
    free(index);
    free(xyz);
    return st;
}

/* ---- queries ---- */

struct QTree {
    const Node *nodes;
    const uint32_t *index;
    const double *xyz;
    double lo[3], side;
};

/* The node's cube widened by a margin far above the rounding of quantization, so that no point
 * of the node falls outside it; the exact test is on the points. */
__device__ __forceinline__ void node_box(const QTree &T, const Node &nd, double blo[3],
                                         double bhi[3])
{
    const double w = ldexp(T.side, -(int)nd.depth);
    for (int a = 0; a < 3; a++) {
        const double m = 1e-12 * (fabs(T.lo[a]) + T.side);
        blo[a] = T.lo[a] + (double)nd.cell[a] * w - m;
        bhi[a] = T.lo[a] + (double)(nd.cell[a] + 1u) * w + m;
    }
}

template <bool Radius>
__global__ void query_kernel(QTree T, const double *__restrict__ qs, const double *__restrict__ radii,
                             size_t nq, const u64 *__restrict__ offsets, u64 *__restrict__ counts,
                             uint32_t *__restrict__ out)
{
    const size_t qi = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (qi >= nq) return;
    double b[6], c[3], r = 0, r2 = 0;
    if (Radius) {
        for (int a = 0; a < 3; a++) c[a] = qs[3 * qi + a];
        r = radii[qi];
        r2 = __dmul_rn(r, r);
    } else {
        for (int a = 0; a < 6; a++) b[a] = qs[6 * qi + a];
    }
    uint32_t stack[kStack];
    int sp = 0;
    stack[sp++] = 0;
    u64 cnt = 0, w = out ? offsets[qi] : 0;
    while (sp > 0) {
        const Node nd = T.nodes[stack[--sp]];
        double blo[3], bhi[3];
        node_box(T, nd, blo, bhi);
        bool hit = true;
        if (Radius) {
            double acc = 0;
            for (int a = 0; a < 3; a++) {
                double e = blo[a] - c[a] > 0 ? blo[a] - c[a] : (c[a] - bhi[a] > 0 ? c[a] - bhi[a] : 0);
                acc += e * e;
            }
            hit = acc <= r2 * (1.0 + 1e-9) + 1e-300;
        } else {
            for (int a = 0; a < 3; a++) hit = hit && b[a] <= bhi[a] && b[3 + a] >= blo[a];
        }
        if (!hit) continue;
        if (nd.first_child != kNone) {
            const int k = __popc(nd.child_mask);
            for (int j = k - 1; j >= 0; j--) stack[sp++] = nd.first_child + (uint32_t)j;
            continue;
        }
        for (u64 e = nd.begin; e < nd.end; e++) {
            const double x = T.xyz[3 * e], y = T.xyz[3 * e + 1], z = T.xyz[3 * e + 2];
            bool m;
            if (Radius) {
                const double dx = __dsub_rn(x, c[0]), dy = __dsub_rn(y, c[1]),
                             dz = __dsub_rn(z, c[2]);
                m = __dadd_rn(__dadd_rn(__dmul_rn(dx, dx), __dmul_rn(dy, dy)), __dmul_rn(dz, dz)) <=
                    r2;
            } else {
                m = b[0] <= x && x <= b[3] && b[1] <= y && y <= b[4] && b[2] <= z && z <= b[5];
            }
            if (!m) continue;
            if (out)
                out[w++] = T.index[e];
            else
                cnt++;
        }
    }
    if (!out) counts[qi] = cnt;
}

grove_status run_query(grove_ctx *ctx, const grove_octree *t, const double *qs, size_t qstride,
                       const double *radii, size_t nq, grove_query_result *out)
{
    const cudaStream_t s = (cudaStream_t)ctx->stream;
    Arena A(ctx);
    uint64_t *off = (uint64_t *)malloc((nq + 1) * sizeof *off);
    uint32_t *ind = NULL;
    struct Owned {
        uint64_t **o;
        uint32_t **i;
        ~Owned()
        {
            if (*o) free(*o);
            if (*i) free(*i);
        }
    } own = {&off, &ind};
    if (!off)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "octree query: out of memory for %zu "
                            "offsets", nq + 1);
    memset(off, 0, (nq + 1) * sizeof *off);
    QTree T;
    for (int a = 0; a < 3; a++) T.lo[a] = t->lo[a];
    T.side = t->side;
    if (nq && t->n) {
        if (t->d_nodes && (t->dev_ctx == ctx || !t->nodes)) {
            T.nodes = t->d_nodes;
            T.index = t->d_index;
            T.xyz = t->d_xyz;
        } else {
            Node *dn;
            uint32_t *di;
            double *dx;
            GROVE_TRY(A.get(&dn, t->num_nodes, "octree query nodes"));
            GROVE_TRY(A.get(&di, t->num_entries, "octree query entries"));
            GROVE_TRY(A.get(&dx, 3 * t->num_entries, "octree query coordinates"));
            GROVE_TRY(grove__cuda_h2d(ctx, dn, t->nodes, t->num_nodes * sizeof(Node), s));
            GROVE_TRY(grove__cuda_h2d(ctx, di, t->index, t->num_entries * sizeof(uint32_t), s));
            GROVE_TRY(grove__cuda_h2d(ctx, dx, t->xyz, 3 * t->num_entries * sizeof(double), s));
            T.nodes = dn;
            T.index = di;
            T.xyz = dx;
        }
        double *dq, *dr = NULL;
        u64 *dcount, *doff;
        GROVE_TRY(A.get(&dq, qstride * nq, "octree queries"));
        GROVE_TRY(grove__cuda_h2d(ctx, dq, qs, qstride * nq * sizeof(double), s));
        if (radii) {
            GROVE_TRY(A.get(&dr, nq, "octree query radii"));
            GROVE_TRY(grove__cuda_h2d(ctx, dr, radii, nq * sizeof(double), s));
        }
        GROVE_TRY(A.get(&dcount, nq, "octree query counts"));
        if (radii)
            query_kernel<true><<<blocks_for(nq), kBlock, 0, s>>>(T, dq, dr, nq, NULL, dcount, NULL);
        else
            query_kernel<false><<<blocks_for(nq), kBlock, 0, s>>>(T, dq, dr, nq, NULL, dcount, NULL);
        GROVE_CUDA_LAUNCHED(ctx, "octree query count kernel");
        GROVE_TRY(grove__cuda_d2h(ctx, off + 1, dcount, nq * sizeof(u64), s));
        GROVE_TRY(grove__cuda_sync(ctx, s, "octree query count"));
        for (size_t i = 0; i < nq; i++) off[i + 1] += off[i];
        const size_t total = off[nq];
        ind = (uint32_t *)malloc((total ? total : 1) * sizeof *ind);
        if (!ind)
            return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                "octree query: out of memory for %zu matches", total);
        if (total) {
            uint32_t *dout, *dsorted;
            GROVE_TRY(A.get(&doff, nq + 1, "octree query offsets"));
            GROVE_TRY(grove__cuda_h2d(ctx, doff, off, (nq + 1) * sizeof(u64), s));
            GROVE_TRY(A.get(&dout, total, "octree query matches"));
            GROVE_TRY(A.get(&dsorted, total, "octree sorted matches"));
            if (radii)
                query_kernel<true><<<blocks_for(nq), kBlock, 0, s>>>(T, dq, dr, nq, doff, NULL,
                                                                     dout);
            else
                query_kernel<false><<<blocks_for(nq), kBlock, 0, s>>>(T, dq, dr, nq, doff, NULL,
                                                                      dout);
            GROVE_CUDA_LAUNCHED(ctx, "octree query write kernel");
            size_t tb = 0;
            void *tmp = NULL;
            GROVE_CUDA_TRY(ctx, cub::DeviceSegmentedSort::SortKeys(NULL, tb, dout, dsorted,
                                                                   (int64_t)total, (int64_t)nq,
                                                                   doff, doff + 1, s),
                           "octree query row sort (size)");
            GROVE_TRY(A.get((char **)&tmp, tb, "octree query sort scratch"));
            GROVE_CUDA_TRY(ctx, cub::DeviceSegmentedSort::SortKeys(tmp, tb, dout, dsorted,
                                                                   (int64_t)total, (int64_t)nq,
                                                                   doff, doff + 1, s),
                           "octree query row sort");
            GROVE_TRY(grove__cuda_d2h(ctx, ind, dsorted, total * sizeof *ind, s));
            GROVE_TRY(grove__cuda_sync(ctx, s, "octree query"));
        }
    } else {
        ind = (uint32_t *)malloc(sizeof *ind);
        if (!ind) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "octree query: out of memory");
    }
    out->num_queries = nq;
    out->offsets = off;
    out->indices = ind;
    off = NULL;
    ind = NULL;
    return GROVE_OK;
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

grove_status build_points_on_device(Build &B, const double *d_xyz)
{
    grove_ctx *ctx = B.ctx;
    grove_octree *t = B.t;
    const size_t n = B.n;
    if (n) {
        quantize_kernel<<<blocks_for(3 * n), kBlock, 0, B.A.s>>>(d_xyz, n, B.q, t->lo[0], t->lo[1],
                                                                 t->lo[2], t->to_grid);
        GROVE_CUDA_LAUNCHED(ctx, "octree quantize kernel");
    }
    /* All points are here at once: counted in Morton order, a warp's points share one or two
     * leaves and the seed's aggregation leaves about one atomic per warp. */
    GROVE_TRY(morton_order(B, false));
    return count_batch(B, 0, n);
}

} /* namespace */

extern "C" grove_status grove__ot_build_cuda_device(grove_ctx *ctx, const double *d_xyz,
                                                    grove_octree *t, grove_octree_stats *stats)
{
    const double t0 = grove__ot_now_ms();
    GROVE_TRY(grove__cuda_use(ctx));
    Build B(ctx, t);
    const size_t n = t->n;
    grove_status st;
    /* the cube: box on the device, cube on the host with the CPU backend's function */
    {
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
        grove__ot_cube_from_box(lo, hi, t);
    }
    st = build_init(B);
    if (st == GROVE_OK) st = build_points_on_device(B, d_xyz);
    const double t1 = grove__ot_now_ms();
    if (st == GROVE_OK) st = finish(B, d_xyz, stats);
    if (st != GROVE_OK) {
        free_tree_device(t);
        return st;
    }
    if (stats) {
        stats->ms_count = t1 - t0;
        stats->batches = n ? 1 : 0;
        stats->ms_total = grove__ot_now_ms() - t0;
    }
    if (t->opts.progress) t->opts.progress(t->opts.progress_user, n, n);
    return GROVE_OK;
}

extern "C" grove_status grove__ot_build_cuda(grove_ctx *ctx, const double *xyz, grove_octree *t,
                                             grove_octree_stats *stats)
{
    const double t0 = grove__ot_now_ms();
    GROVE_TRY(grove__cuda_use(ctx));
    grove_status st = GROVE_OK;
    const size_t n = t->n;
    uint32_t batches = 0;
    {
        Build B(ctx, t);
        const size_t bs = t->opts.batch < n ? t->opts.batch : (n ? n : 1);
        Pinned stage;
        double *dbatch = NULL;
        st = build_init(B);
        if (st == GROVE_OK && n) {
            /* two staging halves: the host fills one while the GPU counts the other */
            if (cudaMallocHost(&stage.p, 2 * 3 * bs * sizeof(double)) != cudaSuccess) {
                cudaGetLastError();
                st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                  "octree (CUDA): cannot pin %zu bytes of host staging memory",
                                  2 * 3 * bs * sizeof(double));
            }
            if (st == GROVE_OK) st = B.A.get(&dbatch, 3 * bs, "octree batch coordinates");
            double *half[2] = {(double *)stage.p, (double *)stage.p + 3 * bs};
            if (st == GROVE_OK) memcpy(half[0], xyz, 3 * (bs < n ? bs : n) * sizeof(double));
            for (size_t b = 0, k = 0; st == GROVE_OK && b < n; b += bs, k++) {
                const size_t m = n - b < bs ? n - b : bs;
                st = grove__cuda_h2d(ctx, dbatch, half[k & 1], 3 * m * sizeof(double), B.A.s);
                if (st != GROVE_OK) break;
                quantize_kernel<<<blocks_for(3 * m), kBlock, 0, B.A.s>>>(
                    dbatch, m, B.q + 3 * b, t->lo[0], t->lo[1], t->lo[2], t->to_grid);
                cudaError_t e = cudaGetLastError();
                if (e != cudaSuccess) {
                    st = grove__cuda_status(ctx, (int)e, "octree quantize kernel");
                    break;
                }
                /* the previous use of the other half (batch k - 1's copy) has completed: the
                 * host synchronized on its spill counts */
                if (b + m < n) {
                    const size_t m2 = n - b - m < bs ? n - b - m : bs;
                    memcpy(half[(k + 1) & 1], xyz + 3 * (b + m), 3 * m2 * sizeof(double));
                }
                st = count_batch(B, b, b + m);
                batches++;
                if (st == GROVE_OK && t->opts.progress)
                    t->opts.progress(t->opts.progress_user, b + m, n);
            }
        }
        const double t1 = grove__ot_now_ms();
        if (st == GROVE_OK) st = finish(B, NULL, stats);
        if (st == GROVE_OK && stats) stats->ms_count = t1 - t0;
    }
    /* the tree comes to the host; octree.c gathers the entries' xyz from the input (with all
     * the host's threads) */
    if (st == GROVE_OK) st = download(ctx, t);
    free_tree_device(t);
    if (st != GROVE_OK) return st;
    if (stats) {
        stats->batches = batches;
        stats->ms_total = grove__ot_now_ms() - t0;
    }
    if (n == 0 && t->opts.progress) t->opts.progress(t->opts.progress_user, 0, 0);
    return GROVE_OK;
}

extern "C" grove_status grove__ot_download_cuda(grove_ctx *ctx, grove_octree *t)
{
    if (t->nodes || !t->d_nodes) return GROVE_OK;
    GROVE_TRY(grove__cuda_use(t->dev_ctx ? t->dev_ctx : ctx));
    return download(t->dev_ctx ? t->dev_ctx : ctx, t);
}

extern "C" void grove__ot_free_device(grove_octree *t)
{
    if (t) free_tree_device(t);
}

extern "C" grove_status grove__ot_query_boxes_cuda(grove_ctx *ctx, const grove_octree *t,
                                                   const double *boxes, size_t nq,
                                                   grove_query_result *out)
{
    memset(out, 0, sizeof *out);
    GROVE_TRY(grove__cuda_use(ctx));
    return run_query(ctx, t, boxes, 6, NULL, nq, out);
}

extern "C" grove_status grove__ot_query_radius_cuda(grove_ctx *ctx, const grove_octree *t,
                                                    const double *centres, const double *radii,
                                                    size_t nq, grove_query_result *out)
{
    memset(out, 0, sizeof *out);
    GROVE_TRY(grove__cuda_use(ctx));
    return run_query(ctx, t, centres, 3, radii, nq, out);
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
