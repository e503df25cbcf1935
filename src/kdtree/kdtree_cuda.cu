/*
 * kdtree_cuda.cu - the CUDA build of the k-d tree: the three stages of kdtree_cpu.c on the GPU,
 * giving the same tree byte for byte. This file runs the build and its large-node stage;
 * kdtree_small_cuda.cu has the small-node and output stages' kernels.
 *
 *   large nodes  per level over the level's active nodes (more than 64 points), the points
 *                kept in the input's type, one array per axis (the decisions compare exact
 *                values, which a float converted to double keeps):
 *                  decide   one thread per node, large_decide() of kdtree_cpu.c, on the box
 *                           the previous level's move merged (the root's: one min/max pass);
 *                  count    a warp per tile of kTile points of one node counts the points with
 *                           x[axis] < split (one axis read);
 *                  children one thread per node; one scan of the kinds of child (both
 *                           counts packed in 64 bits) compacts the next level's active list
 *                           and the small roots;
 *                  move     a warp per tile: the destinations from a scan of the tile counts
 *                           and ballots (a stable partition inside every node), rows and tree
 *                           order (32-bit where n allows) moved together; points of next
 *                           level's nodes go to the next level's arrays, their boxes merged
 *                           with 64-bit atomic min and max on an order-preserving encoding of
 *                           the doubles (exact in any order); points of small roots and leaves
 *                           go once to final arrays that no later level touches. The host
 *                           reads a level's three counts, written by the kernel before the
 *                           move into page-locked memory, while the move runs.
 *   small nodes  one warp per small root (at most 64 points): small_build() of kdtree_cpu.c
 *                with its scratch in shared memory and each node's plane search spread over
 *                the lanes, writing the subtree in construction order to scratch slots of its
 *                own (2 * begin: a subtree of m points has at most 2m - 1 nodes), the points'
 *                tree order in place.
 *   output       subtree sizes level by level upwards, preorder positions downwards, then one
 *                thread per node writes the final node (a small root writes its whole subtree,
 *                renumbered into preorder).
 *
 * Every decision repeats the CPU's double arithmetic with explicitly rounded operations
 * (__dadd_rn and friends: nothing may be contracted into a fused multiply-add), so the trees
 * are identical.
 *
 * The same build serves grove_kdtree_build() (input uploaded, the finished arrays downloaded
 * into the tree's host arrays) and grove_kdtree_build_device() (input read where the caller
 * keeps it, the finished arrays handed to the tree as its device arrays). The device-side
 * finiteness check, download, upload and freeing of a tree's device arrays are in
 * kdtree_build_dev_cuda.cu.
 */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "core_cuda.h"
#include "../prim/prim_cuda.h"
#include "kdtree_build_cuda.cuh"
#include "kdtree_cuda.h"

namespace
{

using namespace grove_kd;

const int kMaxD = GROVE_KDTREE_MAX_DIMS;
const int kTile = 256; /* points per tile, a warp's in the count and move passes */

/* ---- the double arithmetic of kdtree_cpu.c, one rounding per operation ---- */

__device__ __forceinline__ double kd_mid(double lo, double hi)
{
    return __dadd_rn(__dmul_rn(0.5, lo), __dmul_rn(0.5, hi));
}

/* Order-preserving map of a double (never NaN, never -0) to uint64_t, and back. */
__device__ __forceinline__ unsigned long long ord_enc(double v)
{
    unsigned long long b = (unsigned long long)__double_as_longlong(v);
    return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}
__device__ __forceinline__ double ord_dec(unsigned long long k)
{
    unsigned long long b = (k >> 63) ? (k & 0x7fffffffffffffffull) : ~k;
    return __longlong_as_double((long long)b);
}

/* ---- input ---- */

/* The points in their own type, one array per axis (x[d * n + i]), -0 as +0 (kdtree.c checked
 * that they are finite). Every decision compares exact values, which converting a float to
 * double on load keeps, so the large stage moves half the bytes of double rows for float input,
 * and a pass that needs one axis reads only that axis. */
template <typename T>
__global__ void to_soa_kernel(const T *__restrict__ in, size_t n, int D, T *__restrict__ x)
{
    const size_t count = n * (size_t)D;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        T v = in[i];
        x[(i % (size_t)D) * n + i / (size_t)D] = v == (T)0 ? (T)0 : v;
    }
}

/* The tree order of the large stage: position i of the level's arrays holds input point
 * p[i]. build() runs the large stage with I = uint32_t (the CUDA build's limit of 2^32 - 1
 * points: 4 bytes a point a level less to move than uint64_t, and 32-bit position arithmetic
 * in the per-point passes); the finished points' order, the tree's index, is uint64_t. */
template <typename I> __global__ void iota_kernel(I *__restrict__ p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = (I)i;
}

/* ---- large-node stage ---- */

/* An active node as the per-point passes of its level read it: one record after the tile's
 * node number (not act[j], then nodes[act[j]], then side arrays: each a dependent load before
 * a tile's points can be loaded). decide_kernel writes the count pass's part, compact_kernel
 * the move pass's. Positions in I (see iota_kernel). */
template <typename I> struct LNode {
    I begin, end;
    double split;
    int32_t axis;    /* -1: a leaf (its points stay where they are) */
    uint32_t tile0;  /* the level's number of the node's first tile */
    I nl;            /* the points that go left (a leaf: all) */
    uint32_t tbase;  /* the exclusive scan of the tile counts at tile0 */
    uint32_t box[2]; /* 1 + the next level's number of the left / right child, 0 if not active */
};

/* Level 0: the root's number of tiles, left count and box reset (later levels' are set by
 * compact_kernel, and their boxes merged by move_kernel). */
__global__ void root_tiles_kernel(size_t n, int D, uint32_t *__restrict__ ntiles,
                                  unsigned long long *__restrict__ boxk,
                                  unsigned long long *__restrict__ nleft)
{
    if (threadIdx.x != 0) return;
    ntiles[0] = (uint32_t)((n + kTile - 1) / kTile);
    for (int d = 0; d < D; d++) {
        boxk[d] = ~0ull;
        boxk[D + d] = 0ull;
    }
    nleft[0] = 0;
}

/* The active node of tile t: tstart is the inclusive scan of the tiles per node. */
__device__ __forceinline__ uint32_t tile_node(const uint32_t *tstart, uint32_t nact, uint32_t t)
{
    uint32_t lo = 0, hi = nact; /* first j with tstart[j] > t */
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (tstart[mid] > t)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* The root's box: a grid-stride min/max over all points, merged per warp into boxk[0..2D) with
 * 64-bit atomic min and max on an order-preserving encoding of the doubles (exact, so the order
 * of the merges does not matter). D is a template parameter so that the running minima and
 * maxima stay in registers (with a run-time D they lived in local memory, and the pass took 4x
 * its bytes' time). The children's boxes are merged while their points move (move_kernel). */
template <typename T, int D>
__global__ void __launch_bounds__(kBlock)
    root_box_kernel(const T *__restrict__ x, size_t n, unsigned long long *__restrict__ boxk)
{
    double mn[D], mx[D];
#pragma unroll
    for (int d = 0; d < D; d++) {
        mn[d] = INFINITY;
        mx[d] = -INFINITY;
    }
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
#pragma unroll
        for (int d = 0; d < D; d++) {
            double v = (double)x[d * n + i];
            mn[d] = fmin(mn[d], v);
            mx[d] = fmax(mx[d], v);
        }
#pragma unroll
    for (int d = 0; d < D; d++) {
        for (int o = 16; o > 0; o /= 2) {
            mn[d] = fmin(mn[d], __shfl_xor_sync(0xffffffffu, mn[d], o));
            mx[d] = fmax(mx[d], __shfl_xor_sync(0xffffffffu, mx[d], o));
        }
        if ((threadIdx.x & 31) == 0) {
            if (mn[d] != INFINITY) atomicMin(&boxk[d], ord_enc(mn[d]));
            if (mx[d] != -INFINITY) atomicMax(&boxk[D + d], ord_enc(mx[d]));
        }
    }
}

/* large_decide() of kdtree_cpu.c. */
__device__ void large_decide(int D, const double *bx, const double *cell, BNode *nd, int *side)
{
    int best = -1;
    double best_ext = -1.0;
    *side = -1;
    for (int d = 0; d < D; d++) {
        double ext = __dsub_rn(cell[D + d], cell[d]);
        double q = __dmul_rn(0.25, ext);
        double lo_gap = __dsub_rn(bx[d], cell[d]);
        double hi_gap = __dsub_rn(cell[D + d], bx[D + d]);
        if (lo_gap > q) {
            nd->axis = d;
            nd->kind = GROVE_KDTREE_EMPTY;
            nd->split = bx[d];
            *side = 0;
            return;
        }
        if (hi_gap > q) {
            nd->axis = d;
            nd->kind = GROVE_KDTREE_EMPTY;
            nd->split = nextafter(bx[D + d], INFINITY);
            *side = 1;
            return;
        }
    }
    for (int d = 0; d < D; d++) {
        double ext = __dsub_rn(bx[D + d], bx[d]);
        if (ext > best_ext && bx[D + d] > bx[d]) {
            best_ext = ext;
            best = d;
        }
    }
    if (best < 0) {
        nd->axis = -1;
        nd->kind = GROVE_KDTREE_LEAF;
        nd->split = 0.0;
        return;
    }
    nd->axis = best;
    nd->kind = GROVE_KDTREE_MEDIAN;
    nd->split = kd_mid(bx[best], bx[D + best]);
    if (!(nd->split > bx[best])) nd->split = bx[D + best];
}

/* The root's cell is its tight box. */
__global__ void root_cell_kernel(const unsigned long long *__restrict__ boxk, int D,
                                 double *__restrict__ cell)
{
    int k = threadIdx.x;
    if (k < 2 * D) cell[k] = ord_dec(boxk[k]);
}

/* One thread per active node: its box (decoded into bounds), its decision, and the count
 * pass's part of its level record (tstart: the inclusive scan of the tiles per node). */
template <typename I>
__global__ void decide_kernel(BNode *__restrict__ nodes, const uint64_t *__restrict__ act,
                              uint32_t nact, int D, const unsigned long long *__restrict__ boxk,
                              const double *__restrict__ cell, const uint32_t *__restrict__ tstart,
                              double *__restrict__ bounds, uint32_t *__restrict__ split_flag,
                              int32_t *__restrict__ side, LNode<I> *__restrict__ ln)
{
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= nact) return;
    uint64_t id = act[j];
    double bx[2 * kMaxD];
    for (int k = 0; k < 2 * D; k++) {
        bx[k] = ord_dec(boxk[(size_t)j * 2 * D + k]);
        bounds[id * 2 * D + k] = bx[k];
    }
    BNode nd = nodes[id];
    int sd;
    large_decide(D, bx, cell + (size_t)j * 2 * D, &nd, &sd);
    nd.left = nd.right = 0;
    nodes[id] = nd;
    split_flag[j] = nd.kind != GROVE_KDTREE_LEAF;
    side[j] = sd;
    LNode<I> &L = ln[j];
    L.begin = (I)nd.begin;
    L.end = (I)nd.end;
    L.split = nd.split;
    L.axis = nd.kind == GROVE_KDTREE_LEAF ? -1 : nd.axis;
    L.tile0 = j ? tstart[j - 1] : 0;
}

/* The active node of every tile of the level (tstart: the inclusive scan of the tiles per
 * node), so that the per-point passes find it with one load instead of a binary search of
 * dependent loads per tile. */
__global__ void tile_map_kernel(const uint32_t *__restrict__ tstart, uint32_t nact,
                                size_t max_tiles, uint32_t *__restrict__ tnode)
{
    const uint32_t nt = tstart[nact - 1];
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < nt && t < max_tiles;
         t += (size_t)gridDim.x * blockDim.x)
        tnode[t] = tile_node(tstart, nact, (uint32_t)t);
}

/* Per tile of an active node, a warp: how many of its points go left (x[axis] < split,
 * compared in double as the CPU does), to tcount[t], summed into the node's nleft[j]. A leaf's
 * tiles count all their points: move_kernel keeps them where they are. Reads one axis only.
 * The tile's node record is one load after the tile's node number, which is loaded a tile
 * ahead. */
template <typename T, typename I>
__global__ void __launch_bounds__(kBlock)
    count_kernel(const LNode<I> *__restrict__ ln, uint32_t nact,
                 const uint32_t *__restrict__ tstart, const uint32_t *__restrict__ tnode,
                 const T *__restrict__ x, size_t n, uint32_t *__restrict__ tcount,
                 unsigned long long *__restrict__ nleft)
{
    const uint32_t nt = tstart[nact - 1];
    const uint32_t lane = threadIdx.x & 31, nw = gridDim.x * (kBlock / 32);
    uint32_t t = blockIdx.x * (kBlock / 32) + threadIdx.x / 32;
    uint32_t jn = t < nt ? tnode[t] : 0; /* the next tile's node, loaded a tile ahead */
    for (; t < nt; t += nw) {
        const uint32_t j = jn;
        const LNode<I> &L = ln[j];
        jn = t + nw < nt ? tnode[t + nw] : 0;
        const I a = L.begin + (I)(t - L.tile0) * (I)kTile;
        const uint32_t len = (uint32_t)(L.end - a < (I)kTile ? L.end - a : (I)kTile);
        const int axis = L.axis;
        unsigned cnt = 0;
        if (axis < 0) {
            cnt = len;
        } else {
            const T *xa = x + (size_t)axis * n + a;
            const double split = L.split;
            /* all the tile's loads issued at once */
#pragma unroll
            for (int u = 0; u < kTile / 32; u++) {
                const uint32_t o = 32 * u + lane;
                if (o < len) cnt += (double)xa[o] < split;
            }
            cnt = __reduce_add_sync(0xffffffffu, cnt);
            if (lane == 0 && cnt) atomicAdd(&nleft[j], (unsigned long long)cnt);
        }
        if (lane == 0) tcount[t] = cnt;
    }
}

/* The stable partition of every active node's range by x[axis] < split, rows and tree order
 * together, a warp per tile. The points of a child that is next level's active node go to
 * (xn, pn), its box merged into boxn[box - 1] (reset by compact_kernel), so that the next
 * level needs no box pass; those of a final child (a small root) and of a leaf (whose points
 * stay where they are) go to (xf, pf), which no later level reads or writes, so finished
 * points are moved once (their input index widened there to the tree's uint64_t). A tile's
 * destinations: the left points of the node's earlier tiles (the exclusive scan of the tile
 * counts, less the node's first tile's), then ballots, chunk by chunk, which keep each side in
 * order. A lane loads its points of MoveShape::u chunks of 32 before the first ballot (one
 * chunk at a time left the pass at ~45% of the copy rate: too few loads in flight; with a
 * 64-bit tree order the whole tile at once at 2 blocks a SM measured fastest on the H100,
 * against 4 chunks at 3 blocks a SM), and the boxes are merged in the coordinates' own type
 * (min and max are exact; converted to double once, at the end). The next tile's node number
 * is loaded while a tile moves.
 *
 * Build-time knobs for timing variants, each overriding the choice by row size for every
 * instantiation: KD_MOVE_U (chunks a lane holds at once, 1 .. kTile / 32) and KD_MOVE_MINB
 * (the blocks a SM that __launch_bounds__ fits the registers to; more than the registers
 * allow spills: check with nvcc -Xptxas -v). */
#ifndef KD_MOVE_U
#define KD_MOVE_U 0
#endif
#ifndef KD_MOVE_MINB
#define KD_MOVE_MINB 0
#endif
template <typename T, int D> struct MoveShape {
    static const int row = D * (int)sizeof(T);
    /* chunks a lane holds at once: the whole tile for rows of up to 16 bytes */
    static const int u = KD_MOVE_U > 0 ? KD_MOVE_U : (row <= 16 ? kTile / 32 : (row <= 32 ? 4 : 2));
    /* 2 blocks a SM with the 32-bit order (at most 128 registers, no spills); 3 (80 registers
     * with the whole tile of 3-D float rows) measured 0.7% slower on the H200 at 10^7 points,
     * 4 chunks at 4 blocks 3% slower */
    static const int minb = KD_MOVE_MINB > 0 ? KD_MOVE_MINB : 2;
    static_assert(u >= 1 && u <= kTile / 32, "KD_MOVE_U: 1 to kTile / 32 chunks");
};
__device__ __forceinline__ float tmin(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ float tmax(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double tmin(double a, double b) { return fmin(a, b); }
__device__ __forceinline__ double tmax(double a, double b) { return fmax(a, b); }

template <typename T, int D, typename I>
__global__ void __launch_bounds__(kBlock, (MoveShape<T, D>::minb))
    move_kernel(const LNode<I> *__restrict__ ln, uint32_t nact,
                const uint32_t *__restrict__ tstart, const uint32_t *__restrict__ tnode,
                const uint32_t *__restrict__ tcount, const uint32_t *__restrict__ tscan,
                const T *__restrict__ x, const I *__restrict__ perm, size_t n,
                T *__restrict__ xn, I *__restrict__ pn, T *__restrict__ xf,
                uint64_t *__restrict__ pf, unsigned long long *__restrict__ boxn)
{
    const int U = MoveShape<T, D>::u;
    const T tinf = (T)INFINITY;
    const uint32_t nt = tstart[nact - 1];
    const uint32_t lane = threadIdx.x & 31, nw = gridDim.x * (kBlock / 32);
    uint32_t t = blockIdx.x * (kBlock / 32) + threadIdx.x / 32;
    uint32_t j = t < nt ? tnode[t] : 0;
    for (; t < nt; t += nw) {
        const uint32_t ex = tscan[t] - tcount[t]; /* u32 sums wrap alike: differences exact */
        const LNode<I> L = ln[j];
        const uint32_t jn = t + nw < nt ? tnode[t + nw] : 0;
        const I a = L.begin + (I)(t - L.tile0) * (I)kTile;
        const uint32_t len = (uint32_t)(L.end - a < (I)kTile ? L.end - a : (I)kTile);
        const bool leaf = L.axis < 0;
        const int axis = L.axis;
        const double split = L.split;
        const bool big0 = L.box[0] != 0, big1 = L.box[1] != 0;
        /* the destinations of the tile's first left point and (less its offset in the tile)
         * first right point: left points of the node's earlier tiles: ex - tbase (below 2^32) */
        const I base_l = (I)(uint32_t)(ex - L.tbase);
        const I lbase = L.begin + base_l;
        const I rbase = L.begin + L.nl + ((a - L.begin) - base_l);
        T lmn[D], lmx[D], rmn[D], rmx[D];
#pragma unroll
        for (int d = 0; d < D; d++) {
            lmn[d] = rmn[d] = tinf;
            lmx[d] = rmx[d] = -tinf;
        }
        uint32_t lcnt = 0; /* left points of this tile before the chunk */
        for (uint32_t o0 = 0; o0 < len; o0 += 32 * U) {
            T r[U][D];
            I pi[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const uint32_t o = o0 + 32 * u + lane;
                pi[u] = 0;
#pragma unroll
                for (int d = 0; d < D; d++) r[u][d] = (T)0;
                if (o < len) {
#pragma unroll
                    for (int d = 0; d < D; d++) r[u][d] = x[d * n + (a + o)];
                    pi[u] = perm[a + o];
                }
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                const uint32_t o = o0 + 32 * u + lane;
                const bool valid = o < len;
                bool f = false;
                if (valid) {
                    if (leaf) {
                        f = true;
                    } else {
                        double v = 0.0;
#pragma unroll
                        for (int d = 0; d < D; d++)
                            if (d == axis) v = (double)r[u][d];
                        f = v < split;
                    }
                }
                const unsigned bal = __ballot_sync(0xffffffffu, f);
                if (valid) {
                    const uint32_t rl = lcnt + (unsigned)__popc(bal & ((1u << lane) - 1u));
                    const I dst = f ? lbase + rl : rbase + (o - rl);
                    const bool bg = f ? big0 : big1;
                    T *xo = bg ? xn : xf;
#pragma unroll
                    for (int d = 0; d < D; d++) xo[d * n + dst] = r[u][d];
                    if (bg) {
                        pn[dst] = pi[u];
#pragma unroll
                        for (int d = 0; d < D; d++) {
                            if (f) {
                                lmn[d] = tmin(lmn[d], r[u][d]);
                                lmx[d] = tmax(lmx[d], r[u][d]);
                            } else {
                                rmn[d] = tmin(rmn[d], r[u][d]);
                                rmx[d] = tmax(rmx[d], r[u][d]);
                            }
                        }
                    } else {
                        pf[dst] = (uint64_t)pi[u];
                    }
                }
                lcnt += (unsigned)__popc(bal);
            }
        }
        if (big0 || big1) {
#pragma unroll
            for (int d = 0; d < D; d++) {
                for (int o = 16; o > 0; o /= 2) {
                    lmn[d] = tmin(lmn[d], __shfl_xor_sync(0xffffffffu, lmn[d], o));
                    lmx[d] = tmax(lmx[d], __shfl_xor_sync(0xffffffffu, lmx[d], o));
                    rmn[d] = tmin(rmn[d], __shfl_xor_sync(0xffffffffu, rmn[d], o));
                    rmx[d] = tmax(rmx[d], __shfl_xor_sync(0xffffffffu, rmx[d], o));
                }
                /* lanes d, D + d, 2D + d, 3D + d merge one value each */
                unsigned long long *bl = big0 ? boxn + (size_t)(L.box[0] - 1) * 2 * D : boxn;
                unsigned long long *br = big1 ? boxn + (size_t)(L.box[1] - 1) * 2 * D : boxn;
                if (big0 && lane == (unsigned)d && lmn[d] != tinf)
                    atomicMin(bl + d, ord_enc((double)lmn[d]));
                if (big0 && lane == (unsigned)(D + d) && lmx[d] != -tinf)
                    atomicMax(bl + D + d, ord_enc((double)lmx[d]));
                if (big1 && lane == (unsigned)(2 * D + d) && rmn[d] != tinf)
                    atomicMin(br + d, ord_enc((double)rmn[d]));
                if (big1 && lane == (unsigned)(3 * D + d) && rmx[d] != -tinf)
                    atomicMax(br + D + d, ord_enc((double)rmx[d]));
            }
        }
        j = jn;
    }
}

#define KD_SWITCH_D(D, M)                                                                          \
    switch (D) {                                                                                   \
    case 1: M(1); break;                                                                           \
    case 2: M(2); break;                                                                           \
    case 3: M(3); break;                                                                           \
    case 4: M(4); break;                                                                           \
    case 5: M(5); break;                                                                           \
    case 6: M(6); break;                                                                           \
    case 7: M(7); break;                                                                           \
    default: M(8); break;                                                                          \
    }

/* The per-point passes of a level for the coordinate type T and a run-time D (1..8); the
 * caller checks the launches. */
template <typename T>
void box_pass(int D, unsigned pg, const void *x, size_t n, unsigned long long *boxk,
              cudaStream_t s)
{
#define KD_BOX(DV) root_box_kernel<T, DV><<<pg, kBlock, 0, s>>>((const T *)x, n, boxk)
    KD_SWITCH_D(D, KD_BOX)
#undef KD_BOX
}

template <typename T, typename I>
void move_pass(int D, unsigned pg, const LNode<I> *ln, uint32_t nact, const uint32_t *tstart,
               const uint32_t *tnode, const uint32_t *tcount, const uint32_t *tscan,
               const void *x, const I *perm, size_t n, void *xn, I *pn, void *xf, uint64_t *pf,
               unsigned long long *boxn, cudaStream_t s)
{
#define KD_MOVE(DV)                                                                                \
    move_kernel<T, DV, I><<<pg, kBlock, 0, s>>>(ln, nact, tstart, tnode, tcount, tscan,           \
                                                (const T *)x, perm, n, (T *)xn, pn, (T *)xf, pf,  \
                                                boxn)
    KD_SWITCH_D(D, KD_MOVE)
#undef KD_MOVE
}

/* The rank among the level's split nodes of node j, from srank, the tail of the level's scan
 * (tile counts, then split flags; see the level loop): srank[-1] is the scan's value before
 * the first node (u32 sums wrap alike, so the difference is exact). */
__device__ __forceinline__ uint32_t split_rank(const uint32_t *srank, uint32_t j)
{
    return srank[j] - srank[-1];
}

/* One thread per active node: its two children (construction ids base + 2 * rank) and what
 * each becomes: next level's active node (kinds 1), small root (kinds 1 << 32), or an empty
 * leaf (0); one 64-bit scan of kinds numbers both lists (each sum is below 2^32). */
__global__ void children_kernel(
    BNode *__restrict__ nodes, const uint64_t *__restrict__ act, uint32_t nact, int D,
    uint64_t base, const uint32_t *__restrict__ split_flag, const uint32_t *__restrict__ srank,
    const unsigned long long *__restrict__ nleft, const int32_t *__restrict__ side,
    const double *__restrict__ cell, double *__restrict__ bounds,
    unsigned long long *__restrict__ kinds, double *__restrict__ ccell)
{
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= nact) return;
    const size_t cs = 2 * (size_t)D;
    kinds[2 * j] = kinds[2 * j + 1] = 0;
    if (!split_flag[j]) return;
    uint64_t id = act[j];
    BNode nd = nodes[id];
    uint64_t nl = nleft[j], c = base + 2 * (uint64_t)(split_rank(srank, j) - 1);
    BNode ch;
    ch.left = ch.right = 0;
    ch.axis = -1;
    ch.kind = GROVE_KDTREE_LEAF;
    ch.split = 0.0;
    ch.begin = nd.begin;
    ch.end = nd.begin + nl;
    nodes[c] = ch;
    ch.begin = ch.end;
    ch.end = nd.end;
    nodes[c + 1] = ch;
    nodes[id].left = c;
    nodes[id].right = c + 1;
    for (int s = 0; s < 2; s++) {
        uint64_t cnt = s ? nd.end - nd.begin - nl : nl, cid = c + s;
        if (cnt == 0) {
            for (int d = 0; d < D; d++) {
                bounds[cid * cs + d] = INFINITY;
                bounds[cid * cs + D + d] = -INFINITY;
            }
            continue;
        }
        if (cnt <= (uint64_t)kSmall) {
            kinds[2 * j + s] = 1ull << 32;
            continue;
        }
        kinds[2 * j + s] = 1;
        double *cc = ccell + (2 * (size_t)j + s) * cs;
        const double *pc = cell + (size_t)j * cs;
        for (size_t k = 0; k < cs; k++) cc[k] = pc[k];
        if (nd.kind == GROVE_KDTREE_EMPTY) {
            if (side[j] == 0)
                cc[nd.axis] = bounds[id * cs + nd.axis];
            else
                cc[D + nd.axis] = bounds[id * cs + D + nd.axis];
        } else if (s == 0) {
            cc[D + nd.axis] = nd.split;
        } else {
            cc[nd.axis] = nd.split;
        }
    }
}

/* One thread per child (k = 2j + side): compacts the children into the next active list (its
 * tile counts and left counts set, its boxes reset for move_kernel's merges) and the small
 * roots; completes node j's level record for move_kernel (thread 2j, and each thread its
 * child's box number); thread 0 writes the level's three counts that the host reads (split
 * nodes, next active nodes, small roots) to hout. kr: the inclusive scan of kinds. */
template <typename I>
__global__ void
compact_kernel(uint32_t nact, int D, uint64_t base, const uint32_t *__restrict__ split_flag,
               const uint32_t *__restrict__ srank, const unsigned long long *__restrict__ kinds,
               const unsigned long long *__restrict__ kr,
               const unsigned long long *__restrict__ nleft, const uint32_t *__restrict__ tcount,
               const uint32_t *__restrict__ tscan, const double *__restrict__ ccell,
               LNode<I> *__restrict__ ln, uint64_t *__restrict__ act_next,
               double *__restrict__ cell_next, unsigned long long *__restrict__ box_next,
               uint32_t *__restrict__ ntiles_next, unsigned long long *__restrict__ nleft_next,
               SmallRoot *__restrict__ roots, uint32_t level, uint32_t *__restrict__ hout)
{
    uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= 2 * nact) return;
    if (k == 0) {
        const unsigned long long last = kr[2 * nact - 1];
        hout[0] = split_rank(srank, nact - 1);
        hout[1] = (uint32_t)last;
        hout[2] = (uint32_t)(last >> 32);
    }
    const uint32_t j = k / 2;
    const bool split = split_flag[j] != 0;
    const I begin = ln[j].begin, end = ln[j].end;
    const I nl = split ? (I)nleft[j] : end - begin;
    const unsigned long long kind = kinds[k], rank = kr[k];
    const bool big = (uint32_t)kind != 0;
    if ((k & 1) == 0) {
        const uint32_t t0 = ln[j].tile0;
        ln[j].nl = nl;
        ln[j].tbase = tscan[t0] - tcount[t0];
    }
    ln[j].box[k & 1] = big ? (uint32_t)rank : 0;
    if (!split) return;
    uint64_t cid = base + 2 * (uint64_t)(split_rank(srank, j) - 1) + (k & 1u);
    if (big) {
        const uint32_t p = (uint32_t)rank - 1;
        const I cnt = (k & 1) ? (end - begin) - nl : nl;
        act_next[p] = cid;
        for (int q = 0; q < 2 * D; q++) {
            cell_next[(size_t)p * 2 * D + q] = ccell[(size_t)k * 2 * D + q];
            box_next[(size_t)p * 2 * D + q] = q < D ? ~0ull : 0ull;
        }
        ntiles_next[p] = (uint32_t)(cnt / kTile) + (cnt % kTile ? 1u : 0u);
        nleft_next[p] = 0;
    } else if (kind >> 32) {
        SmallRoot r;
        r.id = cid;
        r.level = level;
        r.pad = 0;
        roots[(uint32_t)(rank >> 32) - 1] = r;
    }
}

/* The tree's points: element rows of es bytes gathered from the input by the tree order. */
__global__ void gather_rows_kernel(const unsigned char *__restrict__ in, size_t n, size_t es,
                                   const uint64_t *__restrict__ perm,
                                   unsigned char *__restrict__ out)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const unsigned char *s = in + perm[i] * es;
        unsigned char *o = out + i * es;
        if (es % 8 == 0)
            for (size_t b = 0; b < es; b += 8) *(uint64_t *)(o + b) = *(const uint64_t *)(s + b);
        else
            for (size_t b = 0; b < es; b += 4) *(uint32_t *)(o + b) = *(const uint32_t *)(s + b);
    }
}

/* ---- host side ---- */

/* The device buffers of one build, freed together, and the build's event (or NULL). */
struct Bufs {
    grove_ctx *ctx;
    void *stream;
    void *p[40];
    size_t bytes[40];
    int count;
    cudaEvent_t ev;

    grove_status alloc(void **out, size_t b, const char *what)
    {
        grove_status st;
        *out = NULL;
        if (count == 40) return grove__error(ctx, GROVE_ERR_INTERNAL, "kdtree: too many buffers");
        st = grove__cuda_alloc(ctx, out, b ? b : 1, stream, what);
        if (st == GROVE_OK) {
            p[count] = *out;
            bytes[count++] = b ? b : 1;
        }
        return st;
    }
    /* Hands buffer q over to the caller (it is no longer freed here); returns its size. */
    size_t take(void *q)
    {
        for (int i = 0; i < count; i++)
            if (p[i] == q) {
                const size_t sz = bytes[i];
                p[i] = p[count - 1];
                bytes[i] = bytes[count - 1];
                count--;
                return sz;
            }
        return 0;
    }
    void release(void *q)
    {
        for (int i = 0; i < count; i++)
            if (p[i] == q) {
                grove__cuda_free(ctx, p[i], bytes[i], stream);
                p[i] = p[count - 1];
                bytes[i] = bytes[count - 1];
                count--;
                return;
            }
    }
    /* *q grows to at least need bytes (contents kept when keep). */
    grove_status grow(void **q, size_t *cap, size_t need, int keep, const char *what)
    {
        void *nq;
        size_t c = *cap ? *cap : 1024;
        if (need <= *cap) return GROVE_OK;
        while (c < need) c *= 2;
        GROVE_TRY(alloc(&nq, c, what));
        if (keep && *q && *cap) {
            cudaError_t e =
                cudaMemcpyAsync(nq, *q, *cap, cudaMemcpyDeviceToDevice, (cudaStream_t)stream);
            if (e != cudaSuccess) return grove__cuda_status(ctx, (int)e, what);
        }
        if (*q) release(*q);
        *q = nq;
        *cap = c;
        return GROVE_OK;
    }
    void free_all()
    {
        for (int i = 0; i < count; i++) grove__cuda_free(ctx, p[i], bytes[i], stream);
        count = 0;
        if (ev) cudaEventDestroy(ev);
        ev = NULL;
    }
};

/* Inclusive sum scan of n u32 or u64 (type t) on the device (temp storage grown in *temp). */
grove_status scan_sum(grove_ctx *ctx, Bufs &b, void **temp, size_t *temp_cap, grove_dtype t,
                      const void *in, void *out, size_t n, cudaStream_t s)
{
    size_t need = 0;
    GROVE_TRY(grove__cuda_scan(ctx, NULL, &need, t, GROVE_OP_SUM, GROVE_SCAN_INCLUSIVE, in, out, n,
                               s));
    GROVE_TRY(b.grow(temp, temp_cap, need, 0, "k-d tree scan temporary storage"));
    return grove__cuda_scan(ctx, *temp, &need, t, GROVE_OP_SUM, GROVE_SCAN_INCLUSIVE, in, out, n,
                            s);
}

/* The build. dev_in: pts->data is device memory (else host memory, uploaded here). keep: the
 * finished arrays stay on the device as t's d_* arrays (else they are downloaded into t's host
 * arrays and freed). I: the large stage's positions and tree order (iota_kernel). */
template <typename I>
grove_status build(grove_ctx *ctx, Bufs &b, const grove_coords *pts, grove_kdtree *t, bool dev_in,
                   bool keep)
{
    const size_t n = t->n;
    const int D = t->dims;
    const size_t cs = 2 * (size_t)D;
    const size_t ts = grove__kd_coord_size(t->type), es = ts * (size_t)D;
    const bool f64 = t->type == GROVE_COORD_F64;
    cudaStream_t s = (cudaStream_t)ctx->stream;
    void *d_in = NULL, *temp = NULL;
    /* coordinates in the input's type, one array per axis: x this level's, x2 the next's, xf
     * the points of finished nodes (the same positions) */
    void *x = NULL, *x2 = NULL, *xf = NULL;
    double *bounds = NULL, *cell = NULL, *cell2 = NULL, *ccell = NULL;
    /* the tree order: perm this level's, perm2 the next's, pf the finished points' (the
     * tree's index) */
    I *perm = NULL, *perm2 = NULL;
    uint64_t *pf = NULL, *act = NULL, *act2 = NULL;
    uint32_t *ntiles = NULL, *ntiles2 = NULL, *tnode = NULL, *lvl = NULL, *lscan = NULL,
             *hcount = NULL;
    int32_t *side = NULL;
    unsigned long long *boxk = NULL, *boxk2 = NULL, *nleft = NULL, *nleft2 = NULL, *kinds = NULL,
                       *kr = NULL, *d_depth = NULL;
    LNode<I> *ln = NULL;
    BNode *nodes = NULL;
    SmallRoot *roots = NULL;
    size_t temp_cap = 0, nodes_cap = 0, bounds_cap = 0, roots_cap = 0;
    uint64_t num = 1, nact = 0, nroots = 0;
    std::vector<uint64_t> levels; /* construction ids of level L: [levels[L], levels[L + 1]) */
    size_t nlevels = 0;
    unsigned long long depth = 0;
    grove_status st = GROVE_OK;

    /* the input: one array per axis */
    if (dev_in) {
        d_in = (void *)pts->data; /* only read */
    } else {
        GROVE_TRY(b.alloc(&d_in, n * es, "the k-d tree input points"));
        GROVE_TRY(grove__cuda_h2d(ctx, d_in, pts->data, n * es, s));
    }
    GROVE_TRY(b.alloc(&x, n * es, "the k-d tree coordinates"));
    if (f64)
        to_soa_kernel<double>
            <<<grid_for(n * D), kBlock, 0, s>>>((const double *)d_in, n, D, (double *)x);
    else
        to_soa_kernel<float>
            <<<grid_for(n * D), kBlock, 0, s>>>((const float *)d_in, n, D, (float *)x);
    KD_LAUNCHED("k-d tree input conversion kernel");
    if (!keep) {
        /* the host arrays of the points, touched while the GPU works */
        t->pts = malloc(n * es);
        t->index = (uint64_t *)malloc(n * sizeof *t->index);
        if (!t->pts || !t->index)
            return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                "grove_kdtree_build: out of memory for %zu points", n);
        grove__prefault(t->pts, n * es, grove__threads(ctx));
        grove__prefault(t->index, n * sizeof *t->index, grove__threads(ctx));
    }

    {
        BNode root;
        root.begin = 0;
        root.end = n;
        root.left = root.right = 0;
        root.split = 0.0;
        root.axis = -1;
        root.kind = GROVE_KDTREE_LEAF;
        GROVE_TRY(b.grow((void **)&nodes, &nodes_cap, 64 * sizeof(BNode), 0, "the k-d tree nodes"));
        GROVE_TRY(b.grow((void **)&bounds, &bounds_cap, 64 * cs * sizeof(double), 0,
                         "the k-d tree boxes"));
        GROVE_TRY(grove__cuda_h2d(ctx, nodes, &root, sizeof root, s));
    }
    GROVE_TRY(b.alloc((void **)&d_depth, sizeof *d_depth, "the k-d tree depth"));
    GROVE_CUDA_TRY(ctx, cudaMemsetAsync(d_depth, 0, sizeof *d_depth, s), "k-d tree depth");
    levels.push_back(0);
    levels.push_back(1);
    nlevels = 1;

    if (n <= (size_t)kSmall) {
        SmallRoot r = {0, 0, 0};
        GROVE_TRY(b.grow((void **)&roots, &roots_cap, sizeof r, 0, "the small roots"));
        GROVE_TRY(grove__cuda_h2d(ctx, roots, &r, sizeof r, s));
        nroots = 1;
        xf = x;
        GROVE_TRY(b.alloc((void **)&pf, n * sizeof(uint64_t), "the k-d tree point order"));
        iota_kernel<uint64_t><<<grid_for(n), kBlock, 0, s>>>(pf, n);
        KD_LAUNCHED("k-d tree order kernel");
    } else {
        /* the large-node stage */
        const size_t max_act = n / (kSmall + 1) + 1;
        const size_t max_tiles = n / kTile + max_act + 1;
        uint32_t *hpin = NULL, *dpin = NULL;
        GROVE_TRY(b.alloc((void **)&perm, n * sizeof(I), "the k-d tree point order"));
        iota_kernel<I><<<grid_for(n), kBlock, 0, s>>>(perm, n);
        KD_LAUNCHED("k-d tree order kernel");
        GROVE_TRY(b.alloc(&x2, n * es, "the k-d tree coordinates"));
        GROVE_TRY(b.alloc(&xf, n * es, "the k-d tree coordinates"));
        GROVE_TRY(b.alloc((void **)&perm2, n * sizeof(I), "the k-d tree point order"));
        GROVE_TRY(b.alloc((void **)&pf, n * sizeof(uint64_t), "the k-d tree point order"));
        GROVE_TRY(b.alloc((void **)&tnode, max_tiles * 4, "the k-d tree tiles"));
        /* a level's tile counts, then its split flags: one scan gives the tile counts' scan and
         * the split nodes' ranks (split_rank) */
        GROVE_TRY(b.alloc((void **)&lvl, (max_tiles + max_act) * 4, "the k-d tree tile counts"));
        GROVE_TRY(b.alloc((void **)&lscan, (max_tiles + max_act) * 4, "the k-d tree tile counts"));
        /* the scans run over max_tiles tile counts; those past a level's tiles are unused */
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(lvl, 0, max_tiles * 4, s), "k-d tree tile counts");
        GROVE_TRY(b.alloc((void **)&act, max_act * 8, "the k-d tree active nodes"));
        GROVE_TRY(b.alloc((void **)&act2, max_act * 8, "the k-d tree active nodes"));
        GROVE_TRY(b.alloc((void **)&ln, max_act * sizeof(LNode<I>), "the k-d tree active nodes"));
        GROVE_TRY(b.alloc((void **)&cell, max_act * cs * 8, "the k-d tree cells"));
        GROVE_TRY(b.alloc((void **)&cell2, max_act * cs * 8, "the k-d tree cells"));
        GROVE_TRY(b.alloc((void **)&ccell, 2 * max_act * cs * 8, "the k-d tree cells"));
        GROVE_TRY(b.alloc((void **)&boxk, max_act * cs * 8, "the k-d tree boxes"));
        GROVE_TRY(b.alloc((void **)&boxk2, max_act * cs * 8, "the k-d tree boxes"));
        GROVE_TRY(b.alloc((void **)&nleft, max_act * 8, "the k-d tree left counts"));
        GROVE_TRY(b.alloc((void **)&nleft2, max_act * 8, "the k-d tree left counts"));
        GROVE_TRY(b.alloc((void **)&side, max_act * 4, "the k-d tree cut sides"));
        GROVE_TRY(b.alloc((void **)&ntiles, max_act * 4, "the k-d tree tiles"));
        GROVE_TRY(b.alloc((void **)&ntiles2, max_act * 4, "the k-d tree tiles"));
        GROVE_TRY(b.alloc((void **)&kinds, 2 * max_act * 8, "the k-d tree children"));
        GROVE_TRY(b.alloc((void **)&kr, 2 * max_act * 8, "the k-d tree children"));
        GROVE_TRY(b.alloc((void **)&hcount, 3 * 4, "the k-d tree level counts"));
        /* the level's counts (split nodes, next active nodes, small roots): compact_kernel
         * writes them into the context's page-locked scratch, which the device reaches
         * (unified addressing maps it), and the host reads them after an event that follows
         * compact_kernel, so that its round trip overlaps the move pass instead of following
         * it. Without the scratch: copied from hcount after the level. */
        if (ctx->pinned && ctx->pinned_bytes >= 3 * sizeof(uint32_t)) {
            void *dp = NULL;
            if (cudaHostGetDevicePointer(&dp, ctx->pinned, 0) == cudaSuccess && dp) {
                cudaEvent_t ev = NULL;
                GROVE_CUDA_TRY(ctx, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming),
                               "k-d tree level event");
                b.ev = ev;
                hpin = (uint32_t *)ctx->pinned;
                dpin = (uint32_t *)dp;
            } else {
                cudaGetLastError(); /* not mapped: the copy instead */
            }
        }
        {
            const uint64_t zero = 0;
            GROVE_TRY(grove__cuda_h2d(ctx, act, &zero, sizeof zero, s));
        }
        nact = 1;
        {
            unsigned pg = 132 * 8;
            int dev_sms = 0;
            if (cudaDeviceGetAttribute(&dev_sms, cudaDevAttrMultiProcessorCount, ctx->device) ==
                    cudaSuccess &&
                dev_sms > 0)
                pg = (unsigned)dev_sms * 8u;
            for (uint32_t level = 0; nact > 0; level++) {
                const unsigned ga = grid_for(nact), g2 = grid_for(2 * nact);
                uint32_t *const split_flag = lvl + max_tiles, *const srank = lscan + max_tiles;
                uint32_t host[3];
                GROVE_TRY(b.grow((void **)&nodes, &nodes_cap, (num + 2 * nact) * sizeof(BNode), 1,
                                 "the k-d tree nodes"));
                GROVE_TRY(b.grow((void **)&bounds, &bounds_cap,
                                 (num + 2 * nact) * cs * sizeof(double), 1, "the k-d tree boxes"));
                GROVE_TRY(b.grow((void **)&roots, &roots_cap,
                                 (nroots + 2 * nact) * sizeof(SmallRoot), 1, "the small roots"));
                if (level == 0) {
                    root_tiles_kernel<<<1, 32, 0, s>>>(n, D, ntiles, boxk, nleft);
                    KD_LAUNCHED("k-d tree tiles kernel");
                }
                GROVE_TRY(scan_sum(ctx, b, &temp, &temp_cap, GROVE_U32, ntiles, ntiles, nact, s));
                tile_map_kernel<<<grid_for(max_tiles), kBlock, 0, s>>>(ntiles, (uint32_t)nact,
                                                                       max_tiles, tnode);
                KD_LAUNCHED("k-d tree tile map kernel");
                if (level == 0) {
                    if (f64)
                        box_pass<double>(D, pg, x, n, boxk, s);
                    else
                        box_pass<float>(D, pg, x, n, boxk, s);
                    KD_LAUNCHED("k-d tree box kernel");
                    root_cell_kernel<<<1, 32, 0, s>>>(boxk, D, cell);
                    KD_LAUNCHED("k-d tree root cell kernel");
                }
                decide_kernel<I><<<ga, kBlock, 0, s>>>(nodes, act, (uint32_t)nact, D, boxk, cell,
                                                       ntiles, bounds, split_flag, side, ln);
                KD_LAUNCHED("k-d tree decide kernel");
                if (f64)
                    count_kernel<double, I><<<pg, kBlock, 0, s>>>(
                        ln, (uint32_t)nact, ntiles, tnode, (const double *)x, n, lvl, nleft);
                else
                    count_kernel<float, I><<<pg, kBlock, 0, s>>>(
                        ln, (uint32_t)nact, ntiles, tnode, (const float *)x, n, lvl, nleft);
                KD_LAUNCHED("k-d tree count kernel");
                GROVE_TRY(scan_sum(ctx, b, &temp, &temp_cap, GROVE_U32, lvl, lscan,
                                   max_tiles + nact, s));
                children_kernel<<<ga, kBlock, 0, s>>>(nodes, act, (uint32_t)nact, D, num,
                                                      split_flag, srank, nleft, side, cell, bounds,
                                                      kinds, ccell);
                KD_LAUNCHED("k-d tree children kernel");
                GROVE_TRY(scan_sum(ctx, b, &temp, &temp_cap, GROVE_U64, kinds, kr, 2 * nact, s));
                compact_kernel<I><<<g2, kBlock, 0, s>>>(
                    (uint32_t)nact, D, num, split_flag, srank, kinds, kr, nleft, lvl, lscan, ccell,
                    ln, act2, cell2, boxk2, ntiles2, nleft2, roots + nroots, level + 1,
                    dpin ? dpin : hcount);
                KD_LAUNCHED("k-d tree compact kernel");
                if (dpin) GROVE_CUDA_TRY(ctx, cudaEventRecord(b.ev, s), "k-d tree level event");
                if (f64)
                    move_pass<double, I>(D, pg, ln, (uint32_t)nact, ntiles, tnode, lvl, lscan, x,
                                         perm, n, x2, perm2, xf, pf, boxk2, s);
                else
                    move_pass<float, I>(D, pg, ln, (uint32_t)nact, ntiles, tnode, lvl, lscan, x,
                                        perm, n, x2, perm2, xf, pf, boxk2, s);
                KD_LAUNCHED("k-d tree move kernel");
                if (dpin) {
                    /* the move pass runs on while the host reads and queues the next level */
                    GROVE_CUDA_TRY(ctx, cudaEventSynchronize(b.ev), "building the k-d tree");
                    memcpy(host, hpin, sizeof host);
                } else {
                    GROVE_TRY(grove__cuda_d2h(ctx, host, hcount, sizeof host, s));
                    GROVE_TRY(grove__cuda_sync(ctx, s, "building the k-d tree"));
                }
                {
                    void *tx = x;
                    I *tp = perm;
                    uint64_t *ta = act;
                    uint32_t *tt = ntiles;
                    double *tc = cell;
                    unsigned long long *tb = boxk, *tl = nleft;
                    x = x2;
                    x2 = tx;
                    perm = perm2;
                    perm2 = tp;
                    act = act2;
                    act2 = ta;
                    ntiles = ntiles2;
                    ntiles2 = tt;
                    cell = cell2;
                    cell2 = tc;
                    boxk = boxk2;
                    boxk2 = tb;
                    nleft = nleft2;
                    nleft2 = tl;
                }
                num += 2 * (uint64_t)host[0];
                nroots += host[2];
                nact = host[1];
                if (host[0] > 0) {
                    levels.push_back(num);
                    nlevels++;
                    depth = nlevels - 1;
                }
            }
        }
    }

    {
        /* the small-node stage */
        BNode *sub = NULL;
        double *subb = NULL;
        uint32_t *cnt = NULL, *small_of = NULL;
        uint64_t *size = NULL, *pre = NULL;
        grove_kdtree_node *onodes = NULL;
        double *obounds = NULL;
        unsigned long long sd = 0;
        uint64_t total = 0;
        if (nroots > UINT32_MAX)
            return grove__error(ctx, GROVE_ERR_LIMIT, "grove_kdtree_build: too many small nodes");
        GROVE_TRY(b.alloc((void **)&sub, 2 * n * sizeof(BNode), "the k-d tree small nodes"));
        GROVE_TRY(
            b.alloc((void **)&subb, 2 * n * cs * sizeof(double), "the k-d tree small node boxes"));
        GROVE_TRY(b.alloc((void **)&cnt, (nroots + 1) * 4, "the k-d tree subtree sizes"));
        GROVE_TRY(small_stage(ctx, D, f64, nodes, roots, (uint32_t)nroots, t->opts.leaf_size, xf,
                              n, pf, sub, subb, cnt, d_depth, s));
        /* the output stage */
        GROVE_TRY(b.alloc((void **)&small_of, num * 4, "the k-d tree small root marks"));
        GROVE_TRY(b.alloc((void **)&size, num * 8, "the k-d tree subtree sizes"));
        GROVE_TRY(b.alloc((void **)&pre, num * 8, "the k-d tree preorder"));
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(small_of, 0, num * 4, s), "k-d tree marks");
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(pre, 0, 8, s), "k-d tree preorder");
        GROVE_TRY(order_nodes(ctx, nodes, roots, (uint32_t)nroots, cnt, levels.data(), nlevels,
                              small_of, size, pre, s));
        GROVE_TRY(grove__cuda_d2h(ctx, &total, size, 8, s));
        GROVE_TRY(grove__cuda_d2h(ctx, &sd, d_depth, sizeof sd, s));
        GROVE_TRY(grove__cuda_sync(ctx, s, "building the k-d tree"));
        if (sd > depth) depth = sd;
        GROVE_TRY(b.alloc((void **)&onodes, total * sizeof *onodes, "the k-d tree nodes"));
        GROVE_TRY(b.alloc((void **)&obounds, total * cs * sizeof(double), "the k-d tree boxes"));
        GROVE_TRY(write_nodes(ctx, nodes, num, D, bounds, small_of, pre, roots, (uint32_t)nroots,
                              sub, subb, cnt, onodes, obounds, s));
        /* the tree's points in the input's type */
        if (x2) b.release(x2);
        if (x != xf) b.release(x);
        x2 = x = NULL;
        {
            unsigned char *opts = NULL;
            GROVE_TRY(b.alloc((void **)&opts, n * es, "the k-d tree points"));
            gather_rows_kernel<<<grid_for(n), kBlock, 0, s>>>((const unsigned char *)d_in, n, es,
                                                              pf, opts);
            KD_LAUNCHED("k-d tree point gather kernel");
            if (keep) {
                GROVE_TRY(grove__cuda_d2h(ctx, t->root_box, obounds, cs * sizeof(double), s));
                GROVE_TRY(grove__cuda_sync(ctx, s, "building the k-d tree"));
                t->dev_ctx = ctx;
                t->d_nodes = onodes;
                t->d_bytes[0] = b.take(onodes);
                t->d_bounds = obounds;
                t->d_bytes[1] = b.take(obounds);
                t->d_pts = opts;
                t->d_bytes[2] = b.take(opts);
                t->d_index = pf;
                t->d_bytes[3] = b.take(pf);
                t->num_nodes = (size_t)total;
                t->depth = (size_t)depth;
                return GROVE_OK;
            }
            t->nodes = (grove_kdtree_node *)malloc(total * sizeof *t->nodes);
            t->bounds = (double *)malloc(total * cs * sizeof *t->bounds);
            if (!t->nodes || !t->bounds)
                return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                    "grove_kdtree_build: out of memory for %zu nodes and %zu "
                                    "points",
                                    (size_t)total, n);
            {
                const int nt = grove__threads(ctx);
                grove__prefault(t->nodes, total * sizeof *t->nodes, nt);
                grove__prefault(t->bounds, total * cs * sizeof *t->bounds, nt);
            }
            GROVE_TRY(grove__cuda_d2h(ctx, t->nodes, onodes, total * sizeof *t->nodes, s));
            GROVE_TRY(grove__cuda_d2h(ctx, t->bounds, obounds, total * cs * sizeof *t->bounds, s));
            GROVE_TRY(grove__cuda_d2h(ctx, t->pts, opts, n * es, s));
            GROVE_TRY(grove__cuda_d2h(ctx, t->index, pf, n * sizeof *t->index, s));
            GROVE_TRY(grove__cuda_sync(ctx, s, "downloading the k-d tree"));
        }
        t->num_nodes = (size_t)total;
        t->depth = (size_t)depth;
    }
    return st;
}

} // namespace

/* The build of either kind; on failure t has no arrays. */
static grove_status build_any(grove_ctx *ctx, const grove_coords *pts, grove_kdtree *t,
                              bool dev_in, bool keep)
{
    Bufs b;
    grove_status st;
    b.ctx = ctx;
    b.stream = ctx->stream;
    b.count = 0;
    b.ev = NULL;
    if (t->n > (size_t)UINT32_MAX)
        return grove__error(ctx, GROVE_ERR_LIMIT,
                            "grove_kdtree_build: the CUDA build takes at most %u points, got %zu",
                            UINT32_MAX, t->n);
    GROVE_TRY(grove__cuda_use(ctx));
    /* the large stage's tree order in 32 bits (the limit above); the kernels take the index
     * type as a parameter, should the limit be raised */
    st = build<uint32_t>(ctx, b, pts, t, dev_in, keep);
    b.free_all();
    if (st != GROVE_OK) {
        grove__kd_free_device(t);
        free(t->nodes);
        free(t->bounds);
        free(t->pts);
        free(t->index);
        t->nodes = NULL;
        t->bounds = NULL;
        t->pts = NULL;
        t->index = NULL;
        /* the stream may still run kernels on the freed buffers' pool: wait for it */
        cudaStreamSynchronize((cudaStream_t)ctx->stream);
    }
    return st;
}

extern "C" grove_status grove__kd_build_cuda(grove_ctx *ctx, const grove_coords *pts,
                                             grove_kdtree *t)
{
    return build_any(ctx, pts, t, false, false);
}

extern "C" grove_status grove__kd_build_device_cuda(grove_ctx *ctx, const grove_coords *d_pts,
                                                    grove_kdtree *t)
{
    return build_any(ctx, d_pts, t, true, true);
}
