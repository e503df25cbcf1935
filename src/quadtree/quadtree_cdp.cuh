/*
 * quadtree_cdp.cuh - the pieces of the CUDA recursive quadtree build that quadtree_cdp.cu's
 * kernels are made of: the parameters and records shared with the host, the arithmetic that
 * defines the tree (the same as the CPU backend's), and the block-wide building blocks of a
 * split (chunk ranking, scans, the stable scatter from global or shared memory, node records).
 * The algorithm and its limits are described at the top of quadtree_cdp.cu, its only includer;
 * everything here is inlined into that one relocatable translation unit.
 */
#ifndef GROVE_QUADTREE_CDP_CUH
#define GROVE_QUADTREE_CDP_CUH

#include <cuda_runtime.h>

#include <stdint.h>

#include "grove/quadtree.h"

namespace grove_qtcdp
{

typedef unsigned long long u64;
typedef grove_quadtree_node Node;

constexpr int kT = 256;             /* threads per block, every kernel */
constexpr int kW = kT / 32;         /* warps per block */
constexpr int kN = 4;               /* items per thread in a chunk */
constexpr uint32_t kC = kN * kT;    /* points per chunk */
constexpr uint32_t kTile = kT * 16; /* points per block of a big node's grid */
constexpr int kStack = 128;         /* DFS entries; a path of 31 levels needs <= 94 */
constexpr int kWMax = 128;          /* nodes of one level of a level-synchronous subtree */
constexpr unsigned kFull = 0xffffffffu;

/* State words (u64) shared with the host; quadtree_recursive_cuda.cu reads them in this order. */
enum { S_NODES = 0, S_FLAGS, S_ERR, S_TASKS, S_TILES, S_LAUNCHES, S_NEST, S_COUNT = 8 };
enum { F_NODES = 1, F_LAUNCH = 2, F_POOL = 4, F_STACK = 8 };

/* A big node being split by a grid of tiles. tiles[tile_off + t] holds, per quadrant, first the
 * number of tile t's points in that quadrant and after prepare() the tile's first destination. */
struct Task {
    uint32_t node, tile_off, ntiles, ticket;
    uint32_t bounds[5];
    uint32_t first;   /* raw index of the first child */
    int32_t child[4]; /* the task of each child that is itself a big split, else -1 */
};

struct Params {
    float2 *xy[2];
    uint32_t *ix[2];
    Node *nodes;
    u64 *keys;
    u64 *st;
    Task *tasks;
    uint4 *tiles;
    uint32_t node_cap, task_cap, tile_cap;
    int max_depth, min_points;
    uint32_t small_max, big_min;
    int nest_cap, inline_small, level_mode;
    uint32_t dyn_smem;
};

struct Entry {
    float box[4];
    uint32_t b, e, id;
    int level;
    u64 key;
};

struct Shared {
    u64 w[32];
    u64 tot;
    u64 scan[kW + 1];
    uint32_t cnt[4];
    uint32_t hist[32];
    uint32_t bnd[5];
    uint32_t ct0[4], ctoff[4];
    int32_t cbt[4];
    float ccx[4], ccy[4];
    uint32_t first;
    int abort, last, sp;
    Entry stack[kStack];
};

/* The level-synchronous subtree's lists: the split nodes of the current level (sorted by their
 * ranges) and of the next, with per-node scratch. */
struct LevelShared {
    Entry w[2][kWMax];
    float cx[kWMax], cy[kWMax];
    u64 base[kWMax], end[kWMax], offs[kWMax];
    uint8_t leaf[kWMax];
    int k;
    uint32_t first;
};

/* ---- arithmetic that defines the tree (quadtree_internal.h's, without FMA contraction) ---- */

__device__ __forceinline__ float mid(float lo, float hi)
{
    return __fadd_rn(__fmul_rn(0.5f, lo), __fmul_rn(0.5f, hi));
}

__device__ __forceinline__ unsigned quad(float x, float y, float cx, float cy)
{
    return (unsigned)(x >= cx) + 2u * (unsigned)(y < cy);
}

__device__ __forceinline__ void child_box(const float b[4], float cx, float cy, unsigned q,
                                          float o[4])
{
    o[0] = (q & 1u) ? cx : b[0];
    o[2] = (q & 1u) ? b[2] : cx;
    o[1] = (q & 2u) ? b[1] : cy;
    o[3] = (q & 2u) ? cy : b[3];
}

__device__ __forceinline__ bool splits(const Params &P, int level, uint32_t m)
{
    return level < P.max_depth && (long long)m > (long long)P.min_points;
}

/* ---- small helpers ---- */

__device__ __forceinline__ uint32_t sel4(unsigned q, uint32_t a, uint32_t b, uint32_t c, uint32_t d)
{
    return q == 0 ? a : q == 1 ? b : q == 2 ? c : d;
}

__device__ __forceinline__ uint32_t field16(u64 v, unsigned q)
{
    return (uint32_t)(v >> (16 * (q & 3u))) & 0xffffu;
}

__device__ __forceinline__ void set_flag(const Params &P, u64 f) { atomicOr(&P.st[S_FLAGS], f); }

/* Checks the launch just made by this thread; a failure leaves that subtree unbuilt, and the host
 * sees the flag and the first error code. */
__device__ bool launched(const Params &P, int nest)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        set_flag(P, F_LAUNCH);
        atomicCAS(&P.st[S_ERR], 0ull, (u64)e);
        return false;
    }
    atomicAdd(&P.st[S_LAUNCHES], 1ull);
    atomicMax(&P.st[S_NEST], (u64)nest);
    return true;
}

/* Node records and point data may have been written by other blocks of the running grid: read
 * them through L2 (ld.global.cg) so that no stale L1 line is used. */
__device__ __forceinline__ Node load_node(const Params &P, uint32_t id)
{
    const uint4 *p = reinterpret_cast<const uint4 *>(P.nodes + id);
    uint4 a = __ldcg(p), b = __ldcg(p + 1);
    Node nd;
    nd.xmin = __uint_as_float(a.x);
    nd.ymin = __uint_as_float(a.y);
    nd.xmax = __uint_as_float(a.z);
    nd.ymax = __uint_as_float(a.w);
    nd.level = (int32_t)b.x;
    nd.first_child = (int32_t)b.y;
    nd.begin = b.z;
    nd.end = b.w;
    return nd;
}

__device__ Entry load_entry(const Params &P, uint32_t id)
{
    Node nd = load_node(P, id);
    Entry E;
    E.box[0] = nd.xmin;
    E.box[1] = nd.ymin;
    E.box[2] = nd.xmax;
    E.box[3] = nd.ymax;
    E.b = nd.begin;
    E.e = nd.end;
    E.id = id;
    E.level = nd.level;
    E.key = __ldcg(P.keys + id);
    return E;
}

__device__ void write_child(const Params &P, const Entry &E, float cx, float cy, unsigned q,
                            uint32_t id, uint32_t cb, uint32_t ce)
{
    float o[4];
    Node c;
    child_box(E.box, cx, cy, q, o);
    c.xmin = o[0];
    c.ymin = o[1];
    c.xmax = o[2];
    c.ymax = o[3];
    c.level = E.level + 1;
    c.first_child = -1;
    c.begin = cb;
    c.end = ce;
    P.nodes[id] = c;
    P.keys[id] = (E.key << 2) | q;
}

__device__ Entry child_entry(const Entry &E, float cx, float cy, unsigned q, uint32_t id,
                             uint32_t cb, uint32_t ce)
{
    Entry C;
    child_box(E.box, cx, cy, q, C.box);
    C.b = cb;
    C.e = ce;
    C.id = id;
    C.level = E.level + 1;
    C.key = (E.key << 2) | q;
    return C;
}

/* ---- block-wide building blocks (every thread of the block must call them) ---- */

/* Ranks one chunk of up to kC items: item k of thread t is chunk position k * kT + t (valid[k],
 * quadrant q[k]). pos[k] receives the number of items of the same quadrant before it in the
 * chunk; the result packs the chunk's four counts in 16-bit fields. Two barriers. */
__device__ __forceinline__ u64 chunk_rank(const bool valid[kN], const unsigned q[kN],
                                          uint32_t pos[kN], Shared &sh)
{
    const unsigned lane = threadIdx.x & 31u, w = threadIdx.x >> 5;
    const unsigned lt = (1u << lane) - 1u;
#pragma unroll
    for (int k = 0; k < kN; k++) {
        const unsigned b0 = __ballot_sync(kFull, valid[k] && q[k] == 0);
        const unsigned b1 = __ballot_sync(kFull, valid[k] && q[k] == 1);
        const unsigned b2 = __ballot_sync(kFull, valid[k] && q[k] == 2);
        const unsigned b3 = __ballot_sync(kFull, valid[k] && q[k] == 3);
        const unsigned mine = q[k] == 0 ? b0 : q[k] == 1 ? b1 : q[k] == 2 ? b2 : b3;
        pos[k] = __popc(mine & lt);
        if (lane == 0)
            sh.w[k * kW + w] = (u64)__popc(b0) | (u64)__popc(b1) << 16 | (u64)__popc(b2) << 32 |
                               (u64)__popc(b3) << 48;
    }
    __syncthreads();
    if (w == 0) {
        /* entries in chunk order: slot k, then warp */
        u64 v = lane < (unsigned)(kN * kW) ? sh.w[lane] : 0ull, inc = v;
        for (int d = 1; d < 32; d <<= 1) {
            u64 t = __shfl_up_sync(kFull, inc, d);
            if (lane >= (unsigned)d) inc += t;
        }
        if (lane < (unsigned)(kN * kW)) sh.w[lane] = inc - v;
        if (lane == 31) sh.tot = inc;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kN; k++) pos[k] += field16(sh.w[k * kW + w], q[k]);
    return sh.tot;
}

/* Exclusive scan of one u64 per thread (fields must not carry into each other); *total gets the
 * block's sum. */
__device__ u64 block_exscan(u64 v, Shared &sh, u64 *total)
{
    const unsigned lane = threadIdx.x & 31u, w = threadIdx.x >> 5;
    u64 inc = v;
    for (int d = 1; d < 32; d <<= 1) {
        u64 t = __shfl_up_sync(kFull, inc, d);
        if (lane >= (unsigned)d) inc += t;
    }
    if (lane == 31) sh.scan[w] = inc;
    __syncthreads();
    if (w == 0) {
        u64 x = lane < (unsigned)kW ? sh.scan[lane] : 0ull, y = x;
        for (int d = 1; d < 32; d <<= 1) {
            u64 t = __shfl_up_sync(kFull, y, d);
            if (lane >= (unsigned)d) y += t;
        }
        if (lane < (unsigned)kW) sh.scan[lane] = y - x;
        if (lane == (unsigned)kW - 1) sh.scan[kW] = y;
    }
    __syncthreads();
    u64 r = sh.scan[w] + inc - v;
    *total = sh.scan[kW];
    __syncthreads();
    return r;
}

/* Where a split reads and writes: global ping-pong buffers, or shared-memory permutations of the
 * points of a small subtree. */
struct Item {
    float2 p;
    uint32_t id;
};

struct GlobalPol {
    const float2 *sxy;
    const uint32_t *six;
    float2 *dxy;
    uint32_t *dix;
    __device__ float2 xy(uint32_t i) const { return __ldcg(sxy + i); }
    __device__ Item load(uint32_t i) const
    {
        Item it;
        it.p = __ldcg(sxy + i);
        it.id = __ldcg(six + i);
        return it;
    }
    __device__ void store(uint32_t j, const Item &it) const
    {
        dxy[j] = it.p;
        dix[j] = it.id;
    }
};

struct SmemPol {
    const float2 *sxy;
    const uint16_t *src;
    uint16_t *dst;
    __device__ float2 xy(uint32_t i) const { return sxy[src[i]]; }
    __device__ Item load(uint32_t i) const
    {
        Item it;
        it.id = src[i];
        it.p = sxy[it.id];
        return it;
    }
    __device__ void store(uint32_t j, const Item &it) const { dst[j] = (uint16_t)it.id; }
};

/* Splits [b, e) about (cx, cy), stably, from pol's source to its destination; bnd receives the
 * child ranges (bnd[0] = b, bnd[4] = e). A range of more than one chunk is counted first. */
template <class Pol>
__device__ void split(const Pol &pol, uint32_t b, uint32_t e, float cx, float cy, Shared &sh,
                      uint32_t bnd[5])
{
    const unsigned tid = threadIdx.x;
    const bool single = e - b <= kC;
    uint32_t r0 = b, r1 = b, r2 = b, r3 = b;
    if (!single) {
        uint32_t c0 = 0, c1 = 0, c2 = 0, c3 = 0;
        if (tid < 4) sh.cnt[tid] = 0;
        __syncthreads();
        for (u64 c = b; c < e; c += kC) {
            float2 p[kN];
#pragma unroll
            for (int k = 0; k < kN; k++) {
                const u64 i = c + k * kT + tid;
                if (i < e) p[k] = pol.xy((uint32_t)i);
            }
#pragma unroll
            for (int k = 0; k < kN; k++) {
                const u64 i = c + k * kT + tid;
                if (i < e) {
                    const unsigned q = quad(p[k].x, p[k].y, cx, cy);
                    c0 += q == 0;
                    c1 += q == 1;
                    c2 += q == 2;
                    c3 += q == 3;
                }
            }
        }
        c0 = __reduce_add_sync(kFull, c0);
        c1 = __reduce_add_sync(kFull, c1);
        c2 = __reduce_add_sync(kFull, c2);
        c3 = __reduce_add_sync(kFull, c3);
        if ((tid & 31u) == 0) {
            atomicAdd(&sh.cnt[0], c0);
            atomicAdd(&sh.cnt[1], c1);
            atomicAdd(&sh.cnt[2], c2);
            atomicAdd(&sh.cnt[3], c3);
        }
        __syncthreads();
        r1 = r0 + sh.cnt[0];
        r2 = r1 + sh.cnt[1];
        r3 = r2 + sh.cnt[2];
    }
    for (u64 c = b; c < e; c += kC) {
        Item it[kN];
        unsigned q[kN];
        bool valid[kN];
        uint32_t pos[kN];
#pragma unroll
        for (int k = 0; k < kN; k++) {
            const u64 i = c + k * kT + tid;
            valid[k] = i < e;
            q[k] = 0;
            if (valid[k]) it[k] = pol.load((uint32_t)i);
        }
#pragma unroll
        for (int k = 0; k < kN; k++)
            if (valid[k]) q[k] = quad(it[k].p.x, it[k].p.y, cx, cy);
        const u64 tot = chunk_rank(valid, q, pos, sh);
        if (single) {
            r1 = r0 + field16(tot, 0);
            r2 = r1 + field16(tot, 1);
            r3 = r2 + field16(tot, 2);
        }
#pragma unroll
        for (int k = 0; k < kN; k++)
            if (valid[k]) pol.store(sel4(q[k], r0, r1, r2, r3) + pos[k], it[k]);
        r0 += field16(tot, 0);
        r1 += field16(tot, 1);
        r2 += field16(tot, 2);
        r3 += field16(tot, 3);
    }
    bnd[0] = b;
    bnd[1] = r0;
    bnd[2] = r1;
    bnd[3] = r2;
    bnd[4] = r3;
}

/* A leaf on an odd level: its points are final in buffer 1 and belong in buffer 0. */
__device__ void copy_back(const Params &P, uint32_t b, uint32_t e)
{
    for (u64 i = (u64)b + threadIdx.x; i < e; i += kT) {
        P.xy[0][i] = __ldcg(P.xy[1] + i);
        P.ix[0][i] = __ldcg(P.ix[1] + i);
    }
}

/* Thread 0: four node records. Returns false (and flags) when the array is full. */
__device__ bool take4(const Params &P, u64 f, Shared &sh)
{
    if (f + 4 > P.node_cap) {
        set_flag(P, F_NODES);
        sh.abort = 1;
        return false;
    }
    sh.first = (uint32_t)f;
    return true;
}

/* Thread 0: pushes a DFS entry. */
__device__ void push(const Params &P, Shared &sh, const Entry &C)
{
    if (sh.sp >= kStack) {
        set_flag(P, F_STACK);
        sh.abort = 1;
        return;
    }
    sh.stack[sh.sp++] = C;
}

} /* namespace grove_qtcdp */

#endif /* GROVE_QUADTREE_CDP_CUH */
