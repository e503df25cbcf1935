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
 *                  children one thread per node; scans of the kinds of child compact the next
 *                           level's active list and the small roots;
 *                  move     a warp per tile: the destinations from a scan of the tile counts
 *                           and ballots (a stable partition inside every node), rows and tree
 *                           order moved together; points of next level's nodes go to the next
 *                           level's arrays, their boxes merged with 64-bit atomic min and max
 *                           on an order-preserving encoding of the doubles (exact in any
 *                           order); points of small roots and leaves go once to final arrays
 *                           that no later level touches. The host reads a level's three
 *                           counts in one copy.
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

__global__ void iota_kernel(uint64_t *__restrict__ p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = i;
}

/* ---- large-node stage ---- */

/* Per active node: its number of tiles and left count reset; at level 0 the root's box reset
 * too (later levels' boxes are reset by compact_kernel and merged by move_kernel). */
__global__ void tiles_kernel(const BNode *__restrict__ nodes, const uint64_t *__restrict__ act,
                             uint32_t nact, int D, int reset_box, uint32_t *__restrict__ ntiles,
                             unsigned long long *__restrict__ boxk,
                             unsigned long long *__restrict__ nleft)
{
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= nact) return;
    const BNode &nd = nodes[act[j]];
    ntiles[j] = (uint32_t)((nd.end - nd.begin + kTile - 1) / kTile);
    if (reset_box)
        for (int d = 0; d < D; d++) {
            boxk[(size_t)j * 2 * D + d] = ~0ull;
            boxk[(size_t)j * 2 * D + D + d] = 0ull;
        }
    nleft[j] = 0;
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

/* One thread per active node: its box (decoded into bounds) and its decision. */
__global__ void decide_kernel(BNode *__restrict__ nodes, const uint64_t *__restrict__ act,
                              uint32_t nact, int D, const unsigned long long *__restrict__ boxk,
                              const double *__restrict__ cell, double *__restrict__ bounds,
                              uint32_t *__restrict__ split_flag, int32_t *__restrict__ side)
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
 * tiles count all their points: move_kernel keeps them where they are. Reads one axis only. */
template <typename T>
__global__ void __launch_bounds__(kBlock)
    count_kernel(const BNode *__restrict__ nodes, const uint64_t *__restrict__ act, uint32_t nact,
                 const uint32_t *__restrict__ tstart, const uint32_t *__restrict__ tnode,
                 const T *__restrict__ x, size_t n, uint32_t *__restrict__ tcount,
                 unsigned long long *__restrict__ nleft)
{
    const uint32_t nt = tstart[nact - 1];
    const uint32_t lane = threadIdx.x & 31, nw = gridDim.x * (kBlock / 32);
    for (uint32_t t = blockIdx.x * (kBlock / 32) + threadIdx.x / 32; t < nt; t += nw) {
        const uint32_t j = tnode[t];
        const uint32_t first = j ? tstart[j - 1] : 0;
        const BNode &nd = nodes[act[j]];
        const uint64_t a = nd.begin + (uint64_t)(t - first) * kTile;
        const uint64_t e = a + kTile < nd.end ? a + kTile : nd.end;
        unsigned cnt = 0;
        if (nd.kind == GROVE_KDTREE_LEAF) {
            cnt = (unsigned)(e - a);
        } else {
            const T *xa = x + (size_t)nd.axis * n;
            const double split = nd.split;
            /* all the tile's loads issued at once */
#pragma unroll
            for (int u = 0; u < kTile / 32; u++) {
                const uint64_t i = a + 32 * (uint64_t)u + lane;
                if (i < e) cnt += (double)xa[i] < split;
            }
            cnt = __reduce_add_sync(0xffffffffu, cnt);
            if (lane == 0 && cnt) atomicAdd(&nleft[j], (unsigned long long)cnt);
        }
        if (lane == 0) tcount[t] = cnt;
    }
}

/* The stable partition of every active node's range by x[axis] < split, rows and tree order
 * together, a warp per tile. The points of a child that is next level's active node go to
 * (xn, pn), its box merged into boxn[brank - 1] (reset by compact_kernel), so that the next
 * level needs no box pass; those of a final child (a small root) and of a leaf (whose points
 * stay where they are) go to (xf, pf), which no later level reads or writes, so finished
 * points are moved once. A tile's destinations: the left points of the node's earlier tiles
 * (tscan, the inclusive scan of the tile counts, less the node's first tile's exclusive
 * value), then ballots, chunk by chunk, which keep each side in order. A lane loads its points
 * of MoveU chunks before the first ballot (one chunk at a time left the pass at ~45% of the
 * copy rate: too few loads in flight; the whole tile at once measured fastest on the H100,
 * against 4 chunks at 3 blocks a SM), and the boxes are merged in the coordinates' own type
 * (min and max are exact; converted to double once, at the end). */
template <typename T, int D> struct MoveU {
    /* chunks of 32 points a lane holds at once: the whole tile for rows of up to 16 bytes */
    static const int v = D * (int)sizeof(T) <= 16 ? kTile / 32 : (D * (int)sizeof(T) <= 32 ? 4 : 2);
};
__device__ __forceinline__ float tmin(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ float tmax(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double tmin(double a, double b) { return fmin(a, b); }
__device__ __forceinline__ double tmax(double a, double b) { return fmax(a, b); }

template <typename T, int D>
__global__ void __launch_bounds__(kBlock, 1)
    move_kernel(const BNode *__restrict__ nodes, const uint64_t *__restrict__ act, uint32_t nact,
                const uint32_t *__restrict__ tstart, const uint32_t *__restrict__ tnode,
                const uint32_t *__restrict__ tcount, const uint32_t *__restrict__ tscan,
                const unsigned long long *__restrict__ nleft, const uint32_t *__restrict__ big,
                const uint32_t *__restrict__ brank, const T *__restrict__ x,
                const uint64_t *__restrict__ perm, size_t n, T *__restrict__ xn,
                uint64_t *__restrict__ pn, T *__restrict__ xf, uint64_t *__restrict__ pf,
                unsigned long long *__restrict__ boxn)
{
    const int U = MoveU<T, D>::v;
    const T tinf = (T)INFINITY;
    const uint32_t nt = tstart[nact - 1];
    const uint32_t lane = threadIdx.x & 31, nw = gridDim.x * (kBlock / 32);
    for (uint32_t t = blockIdx.x * (kBlock / 32) + threadIdx.x / 32; t < nt; t += nw) {
        const uint32_t j = tnode[t];
        const uint32_t first = j ? tstart[j - 1] : 0;
        const BNode nd = nodes[act[j]];
        const bool leaf = nd.kind == GROVE_KDTREE_LEAF;
        const uint64_t a = nd.begin + (uint64_t)(t - first) * kTile;
        const uint64_t e = a + kTile < nd.end ? a + kTile : nd.end;
        const uint64_t nl = leaf ? nd.end - nd.begin : (uint64_t)nleft[j];
        const bool big0 = !leaf && big[2 * j], big1 = !leaf && big[2 * j + 1];
        const int axis = nd.axis;
        const double split = nd.split;
        /* left points of the node's earlier tiles (u32 sums wrap alike, and the difference is
         * below 2^32) */
        const uint64_t base_l =
            (uint32_t)((tscan[t] - tcount[t]) - (tscan[first] - tcount[first]));
        const uint64_t base_r = (a - nd.begin) - base_l;
        T lmn[D], lmx[D], rmn[D], rmx[D];
#pragma unroll
        for (int d = 0; d < D; d++) {
            lmn[d] = rmn[d] = tinf;
            lmx[d] = rmx[d] = -tinf;
        }
        uint64_t lcnt = 0; /* left points of this tile before the chunk */
        for (uint64_t c0 = a; c0 < e; c0 += 32 * (uint64_t)U) {
            T r[U][D];
            uint64_t pi[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const uint64_t i = c0 + 32 * (uint64_t)u + lane;
                pi[u] = 0;
#pragma unroll
                for (int d = 0; d < D; d++) r[u][d] = (T)0;
                if (i < e) {
#pragma unroll
                    for (int d = 0; d < D; d++) r[u][d] = x[d * n + i];
                    pi[u] = perm[i];
                }
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                const uint64_t c = c0 + 32 * (uint64_t)u;
                const uint64_t i = c + lane;
                const bool valid = i < e;
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
                    const uint64_t rl = lcnt + (unsigned)__popc(bal & ((1u << lane) - 1u));
                    const uint64_t dst =
                        f ? nd.begin + base_l + rl : nd.begin + nl + base_r + ((i - a) - rl);
                    const bool bg = f ? big0 : big1;
                    T *xo = bg ? xn : xf;
                    uint64_t *po = bg ? pn : pf;
#pragma unroll
                    for (int d = 0; d < D; d++) xo[d * n + dst] = r[u][d];
                    po[dst] = pi[u];
                    if (bg) {
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
                unsigned long long *bl = big0 ? boxn + (size_t)(brank[2 * j] - 1) * 2 * D : boxn;
                unsigned long long *br =
                    big1 ? boxn + (size_t)(brank[2 * j + 1] - 1) * 2 * D : boxn;
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

template <typename T>
void move_pass(int D, unsigned pg, const BNode *nodes, const uint64_t *act, uint32_t nact,
               const uint32_t *tstart, const uint32_t *tnode, const uint32_t *tcount,
               const uint32_t *tscan, const unsigned long long *nleft,
               const uint32_t *big, const uint32_t *brank, const void *x, const uint64_t *perm,
               size_t n, void *xn, uint64_t *pn, void *xf, uint64_t *pf,
               unsigned long long *boxn, cudaStream_t s)
{
#define KD_MOVE(DV)                                                                                \
    move_kernel<T, DV><<<pg, kBlock, 0, s>>>(nodes, act, nact, tstart, tnode, tcount, tscan,      \
                                             nleft, big, brank, (const T *)x, perm, n, (T *)xn,   \
                                             pn, (T *)xf, pf, boxn)
    KD_SWITCH_D(D, KD_MOVE)
#undef KD_MOVE
}

/* One thread per active node: its two children (construction ids base + 2 * rank) and what
 * each becomes: next level's active node (big), small root, or an empty leaf. */
__global__ void children_kernel(
    BNode *__restrict__ nodes, const uint64_t *__restrict__ act, uint32_t nact, int D,
    uint64_t base, const uint32_t *__restrict__ split_flag, const uint32_t *__restrict__ srank,
    const unsigned long long *__restrict__ nleft, const int32_t *__restrict__ side,
    const double *__restrict__ cell, double *__restrict__ bounds, uint32_t *__restrict__ big,
    uint32_t *__restrict__ small, double *__restrict__ ccell)
{
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= nact) return;
    const size_t cs = 2 * (size_t)D;
    big[2 * j] = big[2 * j + 1] = 0;
    small[2 * j] = small[2 * j + 1] = 0;
    if (!split_flag[j]) return;
    uint64_t id = act[j];
    BNode nd = nodes[id];
    uint64_t nl = nleft[j], c = base + 2 * (uint64_t)(srank[j] - 1);
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
            small[2 * j + s] = 1;
            continue;
        }
        big[2 * j + s] = 1;
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

/* Compacts the children into the next active list (its boxes reset for move_kernel's merges)
 * and the small roots (inclusive ranks). */
__global__ void
compact_kernel(uint32_t nact, int D, uint64_t base, const uint32_t *__restrict__ split_flag,
               const uint32_t *__restrict__ srank, const uint32_t *__restrict__ big,
               const uint32_t *__restrict__ brank, const uint32_t *__restrict__ small,
               const uint32_t *__restrict__ smrank, const double *__restrict__ ccell,
               uint64_t *__restrict__ act_next, double *__restrict__ cell_next,
               unsigned long long *__restrict__ box_next, SmallRoot *__restrict__ roots,
               uint32_t level)
{
    uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= 2 * nact) return;
    uint32_t j = k / 2;
    if (!split_flag[j]) return;
    uint64_t cid = base + 2 * (uint64_t)(srank[j] - 1) + (k & 1u);
    if (big[k]) {
        uint32_t p = brank[k] - 1;
        act_next[p] = cid;
        for (int q = 0; q < 2 * D; q++) {
            cell_next[(size_t)p * 2 * D + q] = ccell[(size_t)k * 2 * D + q];
            box_next[(size_t)p * 2 * D + q] = q < D ? ~0ull : 0ull;
        }
    } else if (small[k]) {
        SmallRoot r;
        r.id = cid;
        r.level = level;
        r.pad = 0;
        roots[smrank[k] - 1] = r;
    }
}

/* The three counts the host reads after a level, gathered for one copy. */
__global__ void counts_kernel(const uint32_t *__restrict__ splits,
                              const uint32_t *__restrict__ bigs,
                              const uint32_t *__restrict__ smalls, uint32_t *__restrict__ out)
{
    if (threadIdx.x == 0) {
        out[0] = *splits;
        out[1] = *bigs;
        out[2] = *smalls;
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

/* The device buffers of one build, freed together. */
struct Bufs {
    grove_ctx *ctx;
    void *stream;
    void *p[40];
    size_t bytes[40];
    int count;

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
    }
};

/* Inclusive sum scan of n u32 on the device (temp storage grown in *temp). */
grove_status scan_u32(grove_ctx *ctx, Bufs &b, void **temp, size_t *temp_cap, const uint32_t *in,
                      uint32_t *out, size_t n, cudaStream_t s)
{
    size_t need = 0;
    GROVE_TRY(grove__cuda_scan(ctx, NULL, &need, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_INCLUSIVE, in,
                               out, n, s));
    GROVE_TRY(b.grow(temp, temp_cap, need, 0, "k-d tree scan temporary storage"));
    return grove__cuda_scan(ctx, *temp, &need, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_INCLUSIVE, in,
                            out, n, s);
}

/* The build. dev_in: pts->data is device memory (else host memory, uploaded here). keep: the
 * finished arrays stay on the device as t's d_* arrays (else they are downloaded into t's host
 * arrays and freed). */
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
    uint64_t *perm = NULL, *perm2 = NULL, *pf = NULL, *act = NULL, *act2 = NULL;
    uint32_t *ntiles = NULL, *tnode = NULL, *tcount = NULL, *tscan = NULL, *split_flag = NULL,
             *srank = NULL, *big = NULL, *brank = NULL, *smf = NULL, *smrank = NULL,
             *hcount = NULL;
    int32_t *side = NULL;
    unsigned long long *boxk = NULL, *boxk2 = NULL, *nleft = NULL, *d_depth = NULL;
    BNode *nodes = NULL;
    SmallRoot *roots = NULL;
    size_t temp_cap = 0, nodes_cap = 0, bounds_cap = 0, roots_cap = 0;
    uint64_t num = 1, nact = 0, nroots = 0;
    std::vector<uint64_t> levels; /* construction ids of level L: [levels[L], levels[L + 1]) */
    size_t nlevels = 0;
    unsigned long long depth = 0;
    grove_status st = GROVE_OK;

    /* the input: one array per axis, tree order 0..n-1 */
    if (dev_in) {
        d_in = (void *)pts->data; /* only read */
    } else {
        GROVE_TRY(b.alloc(&d_in, n * es, "the k-d tree input points"));
        GROVE_TRY(grove__cuda_h2d(ctx, d_in, pts->data, n * es, s));
    }
    GROVE_TRY(b.alloc(&x, n * es, "the k-d tree coordinates"));
    GROVE_TRY(b.alloc((void **)&perm, n * sizeof(uint64_t), "the k-d tree point order"));
    if (f64)
        to_soa_kernel<double>
            <<<grid_for(n * D), kBlock, 0, s>>>((const double *)d_in, n, D, (double *)x);
    else
        to_soa_kernel<float>
            <<<grid_for(n * D), kBlock, 0, s>>>((const float *)d_in, n, D, (float *)x);
    KD_LAUNCHED("k-d tree input conversion kernel");
    iota_kernel<<<grid_for(n), kBlock, 0, s>>>(perm, n);
    KD_LAUNCHED("k-d tree order kernel");
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
        pf = perm;
    } else {
        /* the large-node stage */
        const size_t max_act = n / (kSmall + 1) + 1;
        const size_t max_tiles = n / kTile + max_act + 1;
        GROVE_TRY(b.alloc(&x2, n * es, "the k-d tree coordinates"));
        GROVE_TRY(b.alloc(&xf, n * es, "the k-d tree coordinates"));
        GROVE_TRY(b.alloc((void **)&perm2, n * sizeof(uint64_t), "the k-d tree point order"));
        GROVE_TRY(b.alloc((void **)&pf, n * sizeof(uint64_t), "the k-d tree point order"));
        GROVE_TRY(b.alloc((void **)&tnode, max_tiles * 4, "the k-d tree tiles"));
        GROVE_TRY(b.alloc((void **)&tcount, max_tiles * 4, "the k-d tree tile counts"));
        GROVE_TRY(b.alloc((void **)&tscan, max_tiles * 4, "the k-d tree tile counts"));
        /* the scans below run over max_tiles entries; those past a level's tiles are unused */
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(tcount, 0, max_tiles * 4, s), "k-d tree tile counts");
        GROVE_TRY(b.alloc((void **)&act, max_act * 8, "the k-d tree active nodes"));
        GROVE_TRY(b.alloc((void **)&act2, max_act * 8, "the k-d tree active nodes"));
        GROVE_TRY(b.alloc((void **)&cell, max_act * cs * 8, "the k-d tree cells"));
        GROVE_TRY(b.alloc((void **)&cell2, max_act * cs * 8, "the k-d tree cells"));
        GROVE_TRY(b.alloc((void **)&ccell, 2 * max_act * cs * 8, "the k-d tree cells"));
        GROVE_TRY(b.alloc((void **)&boxk, max_act * cs * 8, "the k-d tree boxes"));
        GROVE_TRY(b.alloc((void **)&boxk2, max_act * cs * 8, "the k-d tree boxes"));
        GROVE_TRY(b.alloc((void **)&nleft, max_act * 8, "the k-d tree left counts"));
        GROVE_TRY(b.alloc((void **)&side, max_act * 4, "the k-d tree cut sides"));
        GROVE_TRY(b.alloc((void **)&ntiles, max_act * 4, "the k-d tree tiles"));
        GROVE_TRY(b.alloc((void **)&split_flag, max_act * 4, "the k-d tree splits"));
        GROVE_TRY(b.alloc((void **)&srank, max_act * 4, "the k-d tree splits"));
        GROVE_TRY(b.alloc((void **)&big, 2 * max_act * 4, "the k-d tree children"));
        GROVE_TRY(b.alloc((void **)&brank, 2 * max_act * 4, "the k-d tree children"));
        GROVE_TRY(b.alloc((void **)&smf, 2 * max_act * 4, "the k-d tree children"));
        GROVE_TRY(b.alloc((void **)&smrank, 2 * max_act * 4, "the k-d tree children"));
        GROVE_TRY(b.alloc((void **)&hcount, 3 * 4, "the k-d tree level counts"));
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
                uint32_t host[3];
                GROVE_TRY(b.grow((void **)&nodes, &nodes_cap, (num + 2 * nact) * sizeof(BNode), 1,
                                 "the k-d tree nodes"));
                GROVE_TRY(b.grow((void **)&bounds, &bounds_cap,
                                 (num + 2 * nact) * cs * sizeof(double), 1, "the k-d tree boxes"));
                GROVE_TRY(b.grow((void **)&roots, &roots_cap,
                                 (nroots + 2 * nact) * sizeof(SmallRoot), 1, "the small roots"));
                tiles_kernel<<<ga, kBlock, 0, s>>>(nodes, act, (uint32_t)nact, D, level == 0,
                                                   ntiles, boxk, nleft);
                KD_LAUNCHED("k-d tree tiles kernel");
                GROVE_TRY(scan_u32(ctx, b, &temp, &temp_cap, ntiles, ntiles, nact, s));
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
                decide_kernel<<<ga, kBlock, 0, s>>>(nodes, act, (uint32_t)nact, D, boxk, cell,
                                                    bounds, split_flag, side);
                KD_LAUNCHED("k-d tree decide kernel");
                if (f64)
                    count_kernel<double><<<pg, kBlock, 0, s>>>(nodes, act, (uint32_t)nact, ntiles,
                                                               tnode, (const double *)x, n, tcount,
                                                               nleft);
                else
                    count_kernel<float><<<pg, kBlock, 0, s>>>(nodes, act, (uint32_t)nact, ntiles,
                                                              tnode, (const float *)x, n, tcount,
                                                              nleft);
                KD_LAUNCHED("k-d tree count kernel");
                GROVE_TRY(scan_u32(ctx, b, &temp, &temp_cap, tcount, tscan, max_tiles, s));
                GROVE_TRY(scan_u32(ctx, b, &temp, &temp_cap, split_flag, srank, nact, s));
                children_kernel<<<ga, kBlock, 0, s>>>(nodes, act, (uint32_t)nact, D, num,
                                                      split_flag, srank, nleft, side, cell, bounds,
                                                      big, smf, ccell);
                KD_LAUNCHED("k-d tree children kernel");
                GROVE_TRY(scan_u32(ctx, b, &temp, &temp_cap, big, brank, 2 * nact, s));
                GROVE_TRY(scan_u32(ctx, b, &temp, &temp_cap, smf, smrank, 2 * nact, s));
                compact_kernel<<<g2, kBlock, 0, s>>>((uint32_t)nact, D, num, split_flag, srank, big,
                                                     brank, smf, smrank, ccell, act2, cell2, boxk2,
                                                     roots + nroots, level + 1);
                KD_LAUNCHED("k-d tree compact kernel");
                if (f64)
                    move_pass<double>(D, pg, nodes, act, (uint32_t)nact, ntiles, tnode, tcount,
                                      tscan, nleft, big, brank, x, perm, n, x2, perm2, xf, pf,
                                      boxk2, s);
                else
                    move_pass<float>(D, pg, nodes, act, (uint32_t)nact, ntiles, tnode, tcount,
                                     tscan, nleft, big, brank, x, perm, n, x2, perm2, xf, pf,
                                     boxk2, s);
                KD_LAUNCHED("k-d tree move kernel");
                /* one copy (a round trip to the host each) instead of three */
                counts_kernel<<<1, 32, 0, s>>>(srank + nact - 1, brank + 2 * nact - 1,
                                               smrank + 2 * nact - 1, hcount);
                KD_LAUNCHED("k-d tree counts kernel");
                GROVE_TRY(grove__cuda_d2h(ctx, host, hcount, sizeof host, s));
                GROVE_TRY(grove__cuda_sync(ctx, s, "building the k-d tree"));
                {
                    void *tx = x;
                    uint64_t *tp = perm, *ta = act;
                    double *tc = cell;
                    unsigned long long *tb = boxk;
                    x = x2;
                    x2 = tx;
                    perm = perm2;
                    perm2 = tp;
                    act = act2;
                    act2 = ta;
                    cell = cell2;
                    cell2 = tc;
                    boxk = boxk2;
                    boxk2 = tb;
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
    if (t->n > (size_t)UINT32_MAX)
        return grove__error(ctx, GROVE_ERR_LIMIT,
                            "grove_kdtree_build: the CUDA build takes at most %u points, got %zu",
                            UINT32_MAX, t->n);
    GROVE_TRY(grove__cuda_use(ctx));
    st = build(ctx, b, pts, t, dev_in, keep);
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
