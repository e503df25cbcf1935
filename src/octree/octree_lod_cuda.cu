/*
 * octree_lod_cuda.cu - the level-of-detail samples of the CUDA octree build: for every position
 * (the points in Morton order), the depths at which its point wins its voxel (bit d of
 * marks[position]), for octree_place_cuda.cu to place the entries.
 *
 * The points are in Morton order (all 30 levels, refined below level 21 where needed), so a
 * voxel of an inner node of depth d, a cell of d + log2(lod_grid) levels, is one run of
 * positions, and its sample point is the run's minimum of (dist2 << 32 | input position): exact,
 * nearest first, ties to the smaller input position (dist2 < 2^32). The voxels of every depth
 * are found in ONE pass over the points (entry_kernel): a warp takes a tile of kTile
 * consecutive positions, reads each point's key bits, grid coordinates, input position and leaf
 * once, and for each depth runs a segmented arg-min over the tile (a warp scan; no block
 * barrier, so the warps of a block hide each other's latency); a run that lies inside the tile
 * marks its winner in shared memory, and the tile's first and last runs also leave (voxel key,
 * partial minimum and its position) in two slots per tile and depth. A run that crosses a tile
 * edge is then resolved from the slots alone (a reduce-by-key over 2 slots a tile: equal keys in
 * neighbouring slots are exactly the crossing runs) and its winner marked (fix_kernel). The
 * marks are written by position, coalesced.
 */
#include <cub/device/device_reduce.cuh>
#include <thrust/iterator/discard_iterator.h>

#include "octree_cuda_internal.cuh"

using namespace grove__otc;

namespace
{

const int kItems = 8;                 /* consecutive positions a thread holds */
const int kTile = 32 * kItems;        /* positions a warp holds: the scan's tile */

/* One element of the segmented arg-min: c counts run heads (c > 0: a run starts here, so what
 * came before does not count), v is the minimum since the last head, at tile index idx. */
struct Seg {
    u64 v;
    uint32_t c, idx;
};

struct SegOp {
    __device__ __forceinline__ Seg operator()(const Seg &a, const Seg &b) const
    {
        Seg r;
        r.c = a.c + b.c;
        const bool take_b = b.c != 0 || b.v < a.v;
        r.v = take_b ? b.v : a.v;
        r.idx = take_b ? b.idx : a.idx;
        return r;
    }
};

/* Bits (1 + the highest differing bit, 0 when equal) of a ^ b: keys a and b fall in the same
 * cell of a level iff this is at most the number of bits below that level in the key. */
__device__ __forceinline__ uint8_t diff_bits(u64 a, u64 b)
{
    return (uint8_t)(64 - __clzll((long long)(a ^ b)));
}

/* Loads the tile's items of thread t: diff bits of each position's key against the previous
 * position's (h[0..7]) and of the next position's against its own (h[8]); out-of-range positions
 * continue the last run (h = 0). */
__device__ __forceinline__ void load_diffs(const u64 *__restrict__ key, size_t j0, size_t n,
                                           uint8_t h[kItems + 1])
{
    u64 prev = j0 > 0 && j0 - 1 < n ? key[j0 - 1] : 0;
    for (int k = 0; k <= kItems; k++) {
        const size_t j = j0 + k;
        if (j < n) {
            const u64 cur = key[j];
            h[k] = j > 0 ? diff_bits(cur, prev) : (uint8_t)64;
            prev = cur;
        } else {
            h[k] = 0;
        }
    }
}

/* A partial minimum and the position that holds it. */
struct ValPos {
    u64 v;
    uint32_t pos, pad;
};

struct EntryArgs {
    const u64 *skey, *rkey; /* Morton keys (levels 0..20), refined keys (NULL: none) */
    const uint32_t *q, *perm, *leaf;
    const uint8_t *pdepth;    /* pool id -> depth */
    size_t n;
    int g, depths; /* log2(lod_grid), inner depths 0..depths-1 */
    u64 *slot_key;            /* depths x 2 slots a tile */
    ValPos *slot_val;
    size_t nslots;            /* 2 x tiles */
    uint32_t *marks;          /* per position: bit d, the point wins its voxel at depth d */
};

/* Exclusive scan of x over the warp's lanes (lane 0 gets init); *total: the whole warp's. */
__device__ __forceinline__ Seg warp_exclusive_scan(Seg x, int lane, Seg init, Seg *total)
{
    for (int o = 1; o < 32; o <<= 1) {
        Seg y;
        y.v = __shfl_up_sync(~0u, x.v, o);
        y.c = __shfl_up_sync(~0u, x.c, o);
        y.idx = __shfl_up_sync(~0u, x.idx, o);
        if (lane >= o) x = SegOp()(y, x);
    }
    total->c = __shfl_sync(~0u, x.c, 31);
    Seg pre;
    pre.v = __shfl_up_sync(~0u, x.v, 1);
    pre.c = __shfl_up_sync(~0u, x.c, 1);
    pre.idx = __shfl_up_sync(~0u, x.idx, 1);
    return lane == 0 ? init : pre;
}

/* One warp per tile: no block barrier anywhere, so warps hide each other's latency. */
__global__ void __launch_bounds__(kBlock, 2) entry_kernel(EntryArgs a)
{
    __shared__ uint32_t smask_all[kBlock * kItems];
    const int lane = threadIdx.x & 31;
    const size_t tile = (blockIdx.x * (size_t)kBlock + threadIdx.x) >> 5;
    const size_t base = tile * kTile;
    const size_t n = a.n;
    if (base >= n) return; /* whole warps only */
    uint32_t *smask = smask_all + (threadIdx.x >> 5) * kTile;
    const size_t j0 = base + (size_t)lane * kItems;
    uint32_t perm[kItems], q[3 * kItems];
    uint8_t ld[kItems], hs[kItems + 1], hr[kItems + 1];
    for (int k = 0; k < kItems; k++) {
        const size_t j = j0 + k;
        perm[k] = j < n ? a.perm[j] : 0;
        for (int c = 0; c < 3; c++) q[3 * k + c] = j < n ? a.q[3 * j + c] : 0;
        ld[k] = j < n ? a.pdepth[a.leaf[j]] : 0;
        smask[lane * kItems + k] = 0;
    }
    load_diffs(a.skey, j0, n, hs);
    if (a.rkey)
        load_diffs(a.rkey, j0, n, hr);
    else
        for (int k = 0; k <= kItems; k++) hr[k] = 0;
    /* diff bits into the tile and out of it */
    const uint8_t hin_s = (uint8_t)__shfl_sync(~0u, (int)hs[0], 0);
    const uint8_t hout_s = (uint8_t)__shfl_sync(~0u, (int)hs[kItems], 31);
    const uint8_t hin_r = (uint8_t)__shfl_sync(~0u, (int)hr[0], 0);
    const uint8_t hout_r = (uint8_t)__shfl_sync(~0u, (int)hr[kItems], 31);
    __syncwarp();
    const bool has_prev = base > 0, has_next = base + kTile < n;
    const size_t last_j = (has_next ? base + kTile : n) - 1;
    for (int d = 0; d < a.depths; d++) {
        /* A voxel is a cell of `levels` levels: a run of equal refined keys shifted by sh
         * below level 21 when the order was refined, else of equal 63-bit keys (without the
         * refinement, equal 63-bit keys mean equal grid points). */
        const int levels = d + a.g;
        const bool refined = levels > 21 && a.rkey;
        const int sh = refined ? 3 * (30 - levels) : (levels < 21 ? 3 * (21 - levels) : 0);
        const u64 *kk = refined ? a.rkey : a.skey;
        const uint8_t *h = refined ? hr : hs;
        u64 *skey = a.slot_key + (size_t)d * a.nslots;
        ValPos *sval = a.slot_val + (size_t)d * a.nslots;
        int any = 0;
        for (int k = 0; k < kItems; k++) any |= j0 + k < n && ld[k] > d;
        if (!__any_sync(~0u, any)) { /* no inner node here: no voxel of depth d */
            if (lane == 0) {
                const ValPos none = {kEmpty, 0u, 0u};
                skey[2 * tile] = kk[base] >> sh;
                sval[2 * tile] = none;
                skey[2 * tile + 1] = kk[last_j] >> sh;
                sval[2 * tile + 1] = none;
            }
            continue;
        }
        u64 val[kItems];
        Seg loc = {kEmpty, 0, 0};
        for (int k = 0; k < kItems; k++) {
            val[k] = kEmpty;
            if (j0 + k < n && ld[k] > d) {
                uint32_t dist2;
                grove__ot_voxel(&q[3 * k], d, a.g, &dist2);
                val[k] = ((u64)dist2 << 32) | perm[k];
            }
            const bool head = (lane == 0 && k == 0) || h[k] > sh;
            if (head) {
                loc.c++;
                loc.v = val[k];
                loc.idx = lane * kItems + k;
            } else if (val[k] < loc.v) {
                loc.v = val[k];
                loc.idx = lane * kItems + k;
            }
        }
        Seg total, init = {kEmpty, 0, 0};
        Seg cur = warp_exclusive_scan(loc, lane, init, &total);
        const uint8_t hin = refined ? hin_r : hin_s, hout = refined ? hout_r : hout_s;
        for (int k = 0; k < kItems; k++) {
            const bool head = (lane == 0 && k == 0) || h[k] > sh;
            if (head) {
                cur.c++;
                cur.v = val[k];
                cur.idx = lane * kItems + k;
            } else if (val[k] < cur.v) {
                cur.v = val[k];
                cur.idx = lane * kItems + k;
            }
            const bool tail = (lane == 31 && k == kItems - 1) || h[k + 1] > sh;
            if (!tail) continue;
            const bool first = cur.c == 1, last = cur.c == total.c;
            const bool cin = first && has_prev && hin <= sh;
            const bool cout = last && has_next && hout <= sh;
            if (!cin && !cout && cur.v != kEmpty) atomicOr(&smask[cur.idx], 1u << d);
            if (first || last) {
                const size_t j = j0 + k < n ? j0 + k : n - 1;
                const u64 vk = kk[j] >> sh;
                const ValPos vp = {cur.v, (uint32_t)(base + cur.idx), 0u};
                if (first) {
                    skey[2 * tile] = vk;
                    sval[2 * tile] = vp;
                }
                if (last) {
                    skey[2 * tile + 1] = vk;
                    sval[2 * tile + 1] = vp;
                }
            }
        }
    }
    __syncwarp();
    for (int k = 0; k < kItems; k++)
        if (j0 + k < n) a.marks[j0 + k] = smask[lane * kItems + k];
}

/* The winners of the runs that cross tile edges (and again, harmlessly, those that do not). */
__global__ void fix_kernel(const ValPos *__restrict__ agg, const u64 *__restrict__ runs, int d,
                           uint32_t *__restrict__ marks)
{
    const size_t r = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (r >= *runs) return;
    const ValPos v = agg[r];
    if (v.v != kEmpty) marks[v.pos] |= 1u << d;
}

struct MinValPos {
    __device__ ValPos operator()(const ValPos &a, const ValPos &b) const
    {
        return b.v < a.v ? b : a;
    }
};

} /* namespace */

namespace grove__otc
{

grove_status sample_marks(Build &B, const HostLayout &L, uint32_t **marks_out)
{
    grove_ctx *ctx = B.ctx;
    grove_octree *t = B.t;
    const cudaStream_t s = B.A.s;
    const size_t n = B.n;
    const int g = grove__ot_log2_grid(t->opts.lod_grid);
    const size_t tiles = (n + kTile - 1) / kTile; /* one a warp */
    const size_t blocks = (n + (size_t)kBlock * kItems - 1) / ((size_t)kBlock * kItems);
    *marks_out = NULL;
    if (!t->opts.lod_grid || L.inner_depth < 0 || n == 0) return GROVE_OK;
    const int depths = L.inner_depth + 1;
    EntryArgs a;
    memset(&a, 0, sizeof a);
    a.skey = B.skey;
    a.rkey = B.rkey;
    a.q = B.q;
    a.perm = B.perm;
    a.leaf = B.leaf;
    a.pdepth = B.P.depth;
    a.n = n;
    a.g = g;
    a.depths = depths;
    a.nslots = 2 * tiles;
    GROVE_TRY(B.A.get(&a.marks, n, "octree sample marks"));
    GROVE_TRY(B.A.get(&a.slot_key, depths * a.nslots, "octree lod edge keys"));
    GROVE_TRY(B.A.get(&a.slot_val, depths * a.nslots, "octree lod edge minima"));
    entry_kernel<<<(unsigned)blocks, kBlock, 0, s>>>(a);
    GROVE_CUDA_LAUNCHED(ctx, "octree sample kernel");

    /* runs across tile edges, per depth: a reduce-by-key over the slots */
    ValPos *agg;
    u64 *nruns;
    GROVE_TRY(B.A.get(&agg, a.nslots, "octree lod edge runs"));
    GROVE_TRY(B.A.get(&nruns, 1, "octree lod edge run count"));
    size_t rtb = 0;
    void *rtmp = NULL;
    GROVE_CUDA_TRY(ctx, cub::DeviceReduce::ReduceByKey(NULL, rtb, a.slot_key,
                                                       thrust::make_discard_iterator(),
                                                       a.slot_val, agg, nruns, MinValPos(),
                                                       a.nslots, s),
                   "octree lod edge runs (size)");
    GROVE_TRY(B.A.get((char **)&rtmp, rtb, "octree lod edge scratch"));
    for (int d = 0; d < depths; d++) {
        GROVE_CUDA_TRY(ctx, cub::DeviceReduce::ReduceByKey(
                                rtmp, rtb, a.slot_key + d * a.nslots,
                                thrust::make_discard_iterator(), a.slot_val + d * a.nslots, agg,
                                nruns, MinValPos(), a.nslots, s),
                       "octree lod edge runs");
        fix_kernel<<<blocks_for(a.nslots), kBlock, 0, s>>>(agg, nruns, d, a.marks);
        GROVE_CUDA_LAUNCHED(ctx, "octree lod edge fix kernel");
    }
    B.A.put(rtmp);
    B.A.put(agg);
    B.A.put(nruns);
    B.A.put(a.slot_key);
    B.A.put(a.slot_val);
    *marks_out = a.marks;
    return GROVE_OK;
}

} /* namespace grove__otc */
