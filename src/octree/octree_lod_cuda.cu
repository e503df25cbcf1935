/*
 * octree_lod_cuda.cu - the entries' keys of the CUDA octree build: (final node, position)
 * pairs, every point's leaf pair in input order, then the level-of-detail samples in input
 * order (a point's entries for several depths together), ready for the one stable sort by node
 * in octree_place_cuda.cu.
 *
 * The points are in Morton order (refined below level 21 when the samples reach deeper), so a
 * voxel of an inner node of depth d, a cell of d + log2(lod_grid) levels, is one run of
 * positions, and its sample point is the run's minimum of (dist2 << 32 | input position): exact,
 * nearest first, ties to the smaller input position (dist2 < 2^32). The voxels of every depth
 * are found in ONE pass over the points (entry_kernel): a warp takes a tile of kTile
 * consecutive positions, reads each point's key bits, grid coordinates, input position and leaf
 * once, and for each depth runs a segmented arg-min over the tile (a warp scan; no block
 * barrier, so the warps of a block hide each other's latency); a run that lies inside the tile
 * marks its winner in shared memory, and the tile's first and last runs also leave (voxel key,
 * partial minimum) in two slots per tile and depth. A run that crosses a tile edge is then
 * resolved from the slots alone (a reduce-by-key over 2 slots a tile: equal keys in
 * neighbouring slots are exactly the crossing runs) and its winner marked (fix_kernel).
 * Each point's marks (bit d: its voxel's winner at depth d), its final leaf and its Morton
 * position go to its input position in one 16-byte word; a scan of the marks' popcounts in input
 * order places the samples, and emit_kernel writes the pairs (a point's node at depth d is its
 * leaf's ancestor) with the Morton position as the value, so that the gather reads perm and the
 * Morton-ordered coordinates near each other for the entries of one node.
 */
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/discard_iterator.h>
#include <thrust/iterator/transform_iterator.h>

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

struct EntryArgs {
    const u64 *skey, *rkey; /* Morton keys (levels 0..20), refined keys (NULL: none) */
    const uint32_t *q, *perm, *leaf;
    const uint32_t *final_of; /* pool id -> final node */
    const uint8_t *pdepth;    /* pool id -> depth */
    size_t n;
    int g, rlevels, depths; /* log2(lod_grid), refined levels, inner depths 0..depths-1 */
    u64 *slot_key, *slot_val; /* depths x 2 slots a tile */
    size_t nslots;            /* 2 x tiles */
    uint4 *rec;               /* per input position: final leaf, marks, position */
    uint32_t *key, *val;      /* without samples: the leaf pairs, in input order */
};

/* Without samples: the leaf pairs alone. */
__global__ void leaf_entry_kernel(EntryArgs a)
{
    const size_t j = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (j >= a.n) return;
    const uint32_t i = a.perm[j];
    a.key[i] = a.final_of[a.leaf[j]];
    a.val[i] = (uint32_t)j;
}

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
        const int levels = d + a.g;
        const bool refined = levels > 21;
        const int sh = refined ? 3 * (a.rlevels - levels) : 3 * (21 - levels);
        const u64 *kk = refined ? a.rkey : a.skey;
        const uint8_t *h = refined ? hr : hs;
        u64 *skey = a.slot_key + (size_t)d * a.nslots, *sval = a.slot_val + (size_t)d * a.nslots;
        int any = 0;
        for (int k = 0; k < kItems; k++) any |= j0 + k < n && ld[k] > d;
        if (!__any_sync(~0u, any)) { /* no inner node here: no voxel of depth d */
            if (lane == 0) {
                skey[2 * tile] = kk[base] >> sh;
                sval[2 * tile] = kEmpty;
                skey[2 * tile + 1] = kk[last_j] >> sh;
                sval[2 * tile + 1] = kEmpty;
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
                if (first) {
                    skey[2 * tile] = vk;
                    sval[2 * tile] = cur.v;
                }
                if (last) {
                    skey[2 * tile + 1] = vk;
                    sval[2 * tile + 1] = cur.v;
                }
            }
        }
    }
    __syncwarp();
    for (int k = 0; k < kItems; k++)
        if (j0 + k < n)
            a.rec[perm[k]] = make_uint4(a.final_of[a.leaf[j0 + k]], smask[lane * kItems + k],
                                        (uint32_t)(j0 + k), 0u);
}

/* The winners of the runs that cross tile edges (and again, harmlessly, those that do not). */
__global__ void fix_kernel(const u64 *__restrict__ agg, const u64 *__restrict__ runs, int d,
                           uint4 *__restrict__ rec)
{
    const size_t r = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (r >= *runs) return;
    const u64 v = agg[r];
    if (v != kEmpty) rec[(uint32_t)v].y |= 1u << d;
}

struct MinU64 {
    __device__ u64 operator()(u64 a, u64 b) const { return b < a ? b : a; }
};

struct PopCount {
    const uint4 *rec;
    __device__ u64 operator()(size_t i) const { return (u64)__popc(rec[i].y); }
};

/* The pairs: point i's leaf pair at i, its samples from n + end[i] - popc(marks) on; its node
 * at depth d is its leaf's ancestor there. The pairs carry the point's Morton position. */
__global__ void emit_kernel(const uint4 *__restrict__ rec, const u64 *__restrict__ end, size_t n,
                            const uint32_t *__restrict__ parent,
                            const uint8_t *__restrict__ ndepth, uint32_t *__restrict__ key,
                            uint32_t *__restrict__ pos)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= n) return;
    const uint4 r = rec[i];
    uint32_t node = r.x, m = r.y;
    key[i] = node;
    pos[i] = r.z;
    if (!m) return;
    size_t o = n + end[i] - (u64)__popc(m);
    int depth = ndepth[node];
    while (m) {
        const int d = 31 - __clz(m); /* deepest first: walk up */
        m &= ~(1u << d);
        while (depth > d) {
            node = parent[node];
            depth--;
        }
        key[o] = node;
        pos[o] = r.z;
        o++;
    }
}

} /* namespace */

namespace grove__otc
{

grove_status entry_pairs(Build &B, const HostLayout &L, uint32_t **key_out, uint32_t **val_out,
                         size_t *S_out)
{
    grove_ctx *ctx = B.ctx;
    grove_octree *t = B.t;
    const cudaStream_t s = B.A.s;
    const size_t n = B.n, nn = L.num_nodes;
    const int g = grove__ot_log2_grid(t->opts.lod_grid);
    const bool lod = t->opts.lod_grid && L.inner_depth >= 0 && n;
    const size_t tiles = (n + kTile - 1) / kTile; /* one a warp */
    const size_t blocks = (n + (size_t)kBlock * kItems - 1) / ((size_t)kBlock * kItems);
    uint32_t *final_of, *key, *val;
    *S_out = 0;
    GROVE_TRY(B.A.get(&final_of, B.pool_size, "octree node map"));
    GROVE_TRY(grove__cuda_h2d(ctx, final_of, L.final_of, B.pool_size * sizeof *final_of, s));
    EntryArgs a;
    memset(&a, 0, sizeof a);
    a.skey = B.skey;
    a.rkey = B.rkey;
    a.q = B.q;
    a.perm = B.perm;
    a.leaf = B.leaf;
    a.final_of = final_of;
    a.pdepth = B.P.depth;
    a.n = n;
    a.g = g;
    a.rlevels = B.rlevels;
    if (!lod) {
        GROVE_TRY(B.A.get(&key, n, "octree entry keys"));
        GROVE_TRY(B.A.get(&val, n, "octree entry positions"));
        a.key = key;
        a.val = val;
        if (n) {
            leaf_entry_kernel<<<blocks_for(n), kBlock, 0, s>>>(a);
            GROVE_CUDA_LAUNCHED(ctx, "octree entry kernel");
        }
        B.A.put(final_of);
        *key_out = key;
        *val_out = val;
        return GROVE_OK;
    }
    const int depths = L.inner_depth + 1;
    uint4 *rec;
    u64 *agg, *nruns, *wend;
    GROVE_TRY(B.A.get(&rec, n, "octree entry words"));
    a.depths = depths;
    a.nslots = 2 * tiles;
    a.rec = rec;
    GROVE_TRY(B.A.get(&a.slot_key, depths * a.nslots, "octree lod edge keys"));
    GROVE_TRY(B.A.get(&a.slot_val, depths * a.nslots, "octree lod edge minima"));
    entry_kernel<<<(unsigned)blocks, kBlock, 0, s>>>(a);
    GROVE_CUDA_LAUNCHED(ctx, "octree entry kernel");
    B.A.put(final_of);

    /* runs across tile edges, per depth: a reduce-by-key over the slots */
    GROVE_TRY(B.A.get(&agg, a.nslots, "octree lod edge runs"));
    GROVE_TRY(B.A.get(&nruns, 1, "octree lod edge run count"));
    size_t rtb = 0;
    void *rtmp = NULL;
    GROVE_CUDA_TRY(ctx, cub::DeviceReduce::ReduceByKey(NULL, rtb, a.slot_key,
                                                       thrust::make_discard_iterator(),
                                                       a.slot_val, agg, nruns, MinU64(),
                                                       a.nslots, s),
                   "octree lod edge runs (size)");
    GROVE_TRY(B.A.get((char **)&rtmp, rtb, "octree lod edge scratch"));
    for (int d = 0; d < depths; d++) {
        GROVE_CUDA_TRY(ctx, cub::DeviceReduce::ReduceByKey(
                                rtmp, rtb, a.slot_key + d * a.nslots,
                                thrust::make_discard_iterator(), a.slot_val + d * a.nslots, agg,
                                nruns, MinU64(), a.nslots, s),
                       "octree lod edge runs");
        fix_kernel<<<blocks_for(a.nslots), kBlock, 0, s>>>(agg, nruns, d, rec);
        GROVE_CUDA_LAUNCHED(ctx, "octree lod edge fix kernel");
    }
    B.A.put(rtmp);
    B.A.put(agg);
    B.A.put(nruns);
    B.A.put(a.slot_key);
    B.A.put(a.slot_val);

    /* each point's samples start where the earlier points' end */
    GROVE_TRY(B.A.get(&wend, n, "octree lod entry ends"));
    thrust::counting_iterator<size_t> j0(0);
    PopCount pc = {rec};
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
    const size_t S = (size_t)m;
    uint32_t *d_parent;
    uint8_t *d_ndepth;
    GROVE_TRY(B.A.get(&key, n + S, "octree entry keys"));
    GROVE_TRY(B.A.get(&val, n + S, "octree entry positions"));
    GROVE_TRY(B.A.get(&d_parent, nn, "octree node parents"));
    GROVE_TRY(B.A.get(&d_ndepth, nn, "octree node depths"));
    uint8_t *hd = (uint8_t *)malloc(nn);
    if (!hd)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "octree (CUDA): out of memory for %zu node depths", nn);
    for (size_t k = 0; k < nn; k++) hd[k] = L.nodes[k].depth;
    grove_status st = grove__cuda_h2d(ctx, d_ndepth, hd, nn, s);
    if (st == GROVE_OK) st = grove__cuda_h2d(ctx, d_parent, L.parent, nn * sizeof(uint32_t), s);
    free(hd); /* pageable copies have been staged when they return */
    GROVE_TRY(st);
    emit_kernel<<<blocks_for(n), kBlock, 0, s>>>(rec, wend, n, d_parent, d_ndepth, key, val);
    GROVE_CUDA_LAUNCHED(ctx, "octree lod emit kernel");
    B.A.put(d_parent);
    B.A.put(d_ndepth);
    B.A.put(wend);
    B.A.put(rec);
    *key_out = key;
    *val_out = val;
    *S_out = S;
    return GROVE_OK;
}

} /* namespace grove__otc */
