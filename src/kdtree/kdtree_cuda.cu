/*
 * kdtree_cuda.cu - the CUDA build of the k-d tree: the three stages of kdtree_cpu.c on the GPU,
 * giving the same tree byte for byte. This file runs the build and its large-node stage;
 * kdtree_small_cuda.cu has the small-node and output stages' kernels.
 *
 *   large nodes  one pass per level over the level's active nodes (more than 64 points):
 *                  boxes    tiles of kTile points, each a slice of one node; a block reduces
 *                           its slice and merges into the node's box with 64-bit atomic min
 *                           and max on an order-preserving encoding of the doubles (exact, so
 *                           the order of the merges does not matter);
 *                  decide   one thread per node, large_decide() of kdtree_cpu.c;
 *                  flags    per point x[axis] < split (1 outside the active nodes), counting
 *                           each node's left side;
 *                  split    the prim module's segmented split of the tree order over the whole
 *                           array: a head flag at the first point of every node of the current
 *                           frontier, so points never leave their node and the inactive nodes
 *                           stay put; its destinations move the coordinate rows the same way;
 *                  children one thread per node; scans of the kinds of child compact the next
 *                           level's active list and the small roots. The host reads three
 *                           counts per level.
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
 * keeps it, the finished arrays handed to the tree as its device arrays). Also here: the
 * device-side finiteness check, download, upload and freeing of a tree's device arrays.
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
const int kTile = 4096; /* points per box or flag tile */

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

/* The points as doubles, -0 as +0 (kdtree.c checked that they are finite). */
template <typename T>
__global__ void to_double_kernel(const T *__restrict__ in, size_t count, double *__restrict__ x)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        double v = (double)in[i];
        x[i] = v == 0.0 ? 0.0 : v;
    }
}

__global__ void iota_kernel(uint64_t *__restrict__ p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = i;
}

/* ---- large-node stage ---- */

/* Per active node: its number of tiles, and the box and left count reset. */
__global__ void tiles_kernel(const BNode *__restrict__ nodes, const uint64_t *__restrict__ act,
                             uint32_t nact, int D, uint32_t *__restrict__ ntiles,
                             unsigned long long *__restrict__ boxk,
                             unsigned long long *__restrict__ nleft)
{
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= nact) return;
    const BNode &nd = nodes[act[j]];
    ntiles[j] = (uint32_t)((nd.end - nd.begin + kTile - 1) / kTile);
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

/* Each block takes tiles t = blockIdx.x, blockIdx.x + gridDim.x, ... of the level's active
 * nodes and merges the box of its slice into the node's box. D is a template parameter so that
 * the running minima and maxima stay in registers (with a run-time D they lived in local
 * memory, and this kernel took 4x its bytes' time). */
template <int D>
__global__ void __launch_bounds__(kBlock)
    box_kernel(const BNode *__restrict__ nodes, const uint64_t *__restrict__ act, uint32_t nact,
               const uint32_t *__restrict__ tstart, const double *__restrict__ x,
               unsigned long long *__restrict__ boxk)
{
    const uint32_t T = tstart[nact - 1];
    for (uint32_t t = blockIdx.x; t < T; t += gridDim.x) {
        uint32_t j = tile_node(tstart, nact, t);
        uint32_t first = j ? tstart[j - 1] : 0;
        const BNode &nd = nodes[act[j]];
        uint64_t a = nd.begin + (uint64_t)(t - first) * kTile;
        uint64_t e = a + kTile < nd.end ? a + kTile : nd.end;
        double mn[D], mx[D];
#pragma unroll
        for (int d = 0; d < D; d++) {
            mn[d] = INFINITY;
            mx[d] = -INFINITY;
        }
        for (uint64_t i = a + threadIdx.x; i < e; i += kBlock)
#pragma unroll
            for (int d = 0; d < D; d++) {
                double v = x[i * D + d];
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
                if (mn[d] != INFINITY) atomicMin(&boxk[(size_t)j * 2 * D + d], ord_enc(mn[d]));
                if (mx[d] != -INFINITY) atomicMax(&boxk[(size_t)j * 2 * D + D + d], ord_enc(mx[d]));
            }
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

/* Per point of an active node: flag = x[axis] < split (the left side; a leaf's points keep
 * flag 1, so its segment stays as it is), and the node's left count. The flags outside the
 * active nodes were set to 1 beforehand. */
__global__ void __launch_bounds__(kBlock)
    flags_kernel(const BNode *__restrict__ nodes, const uint64_t *__restrict__ act, uint32_t nact,
                 const uint32_t *__restrict__ tstart, const double *__restrict__ x, int D,
                 uint8_t *__restrict__ flags, unsigned long long *__restrict__ nleft)
{
    const uint32_t T = tstart[nact - 1];
    for (uint32_t t = blockIdx.x; t < T; t += gridDim.x) {
        uint32_t j = tile_node(tstart, nact, t);
        uint32_t first = j ? tstart[j - 1] : 0;
        const BNode &nd = nodes[act[j]];
        if (nd.kind == GROVE_KDTREE_LEAF) continue;
        const int axis = nd.axis;
        const double split = nd.split;
        uint64_t a = nd.begin + (uint64_t)(t - first) * kTile;
        uint64_t e = a + kTile < nd.end ? a + kTile : nd.end;
        unsigned cnt = 0;
        for (uint64_t i0 = a; i0 < e; i0 += kBlock) {
            uint64_t i = i0 + threadIdx.x;
            bool f = i < e && x[i * D + axis] < split;
            if (i < e) flags[i] = f;
            cnt += __popc(__ballot_sync(0xffffffffu, f));
        }
        if ((threadIdx.x & 31) == 0 && cnt) atomicAdd(&nleft[j], (unsigned long long)cnt);
    }
}

/* Moves the coordinate rows to where the segmented split sent the tree order (a row's loads
 * all in flight before its stores). */
template <int D>
__global__ void move_rows_kernel(const double *__restrict__ x, const uint32_t *__restrict__ dest,
                                 size_t n, double *__restrict__ out)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t o = dest[i];
        double r[D];
#pragma unroll
        for (int d = 0; d < D; d++) r[d] = x[i * D + d];
#pragma unroll
        for (int d = 0; d < D; d++) out[o * D + d] = r[d];
    }
}

/* The two per-point passes of a level for D axes: the boxes, and (after the split) the row
 * move. */
template <int D>
void level_passes(bool move, unsigned pg, const BNode *nodes, const uint64_t *act, uint32_t nact,
                  const uint32_t *ntiles, const double *x, unsigned long long *boxk,
                  const uint32_t *dest, size_t n, double *x2, cudaStream_t s)
{
    if (move)
        move_rows_kernel<D><<<grid_for(n), kBlock, 0, s>>>(x, dest, n, x2);
    else
        box_kernel<D><<<pg, kBlock, 0, s>>>(nodes, act, nact, ntiles, x, boxk);
}

/* level_passes() for a run-time D (1..8); the caller checks the launch. */
void level_pass(int D, bool move, unsigned pg, const BNode *nodes, const uint64_t *act,
                uint32_t nact, const uint32_t *ntiles, const double *x, unsigned long long *boxk,
                const uint32_t *dest, size_t n, double *x2, cudaStream_t s)
{
    switch (D) {
    case 1: level_passes<1>(move, pg, nodes, act, nact, ntiles, x, boxk, dest, n, x2, s); break;
    case 2: level_passes<2>(move, pg, nodes, act, nact, ntiles, x, boxk, dest, n, x2, s); break;
    case 3: level_passes<3>(move, pg, nodes, act, nact, ntiles, x, boxk, dest, n, x2, s); break;
    case 4: level_passes<4>(move, pg, nodes, act, nact, ntiles, x, boxk, dest, n, x2, s); break;
    case 5: level_passes<5>(move, pg, nodes, act, nact, ntiles, x, boxk, dest, n, x2, s); break;
    case 6: level_passes<6>(move, pg, nodes, act, nact, ntiles, x, boxk, dest, n, x2, s); break;
    case 7: level_passes<7>(move, pg, nodes, act, nact, ntiles, x, boxk, dest, n, x2, s); break;
    default: level_passes<8>(move, pg, nodes, act, nact, ntiles, x, boxk, dest, n, x2, s); break;
    }
}

/* One thread per active node: its two children (construction ids base + 2 * rank), the head
 * flag at the split point, and what each child becomes: next level's active node (big),
 * small root, or an empty leaf. */
__global__ void children_kernel(
    BNode *__restrict__ nodes, const uint64_t *__restrict__ act, uint32_t nact, int D,
    uint64_t base, const uint32_t *__restrict__ split_flag, const uint32_t *__restrict__ srank,
    const unsigned long long *__restrict__ nleft, const int32_t *__restrict__ side,
    const double *__restrict__ cell, double *__restrict__ bounds, uint8_t *__restrict__ heads,
    uint32_t *__restrict__ big, uint32_t *__restrict__ small, double *__restrict__ ccell)
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
    if (nl > 0 && nd.begin + nl < nd.end) heads[nd.begin + nl] = 1;
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

/* Compacts the children into the next active list and the small roots (inclusive ranks). */
__global__ void
compact_kernel(uint32_t nact, int D, uint64_t base, const uint32_t *__restrict__ split_flag,
               const uint32_t *__restrict__ srank, const uint32_t *__restrict__ big,
               const uint32_t *__restrict__ brank, const uint32_t *__restrict__ small,
               const uint32_t *__restrict__ smrank, const double *__restrict__ ccell,
               uint64_t *__restrict__ act_next, double *__restrict__ cell_next,
               SmallRoot *__restrict__ roots, uint32_t level)
{
    uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= 2 * nact) return;
    uint32_t j = k / 2;
    if (!split_flag[j]) return;
    uint64_t cid = base + 2 * (uint64_t)(srank[j] - 1) + (k & 1u);
    if (big[k]) {
        uint32_t p = brank[k] - 1;
        act_next[p] = cid;
        for (int q = 0; q < 2 * D; q++)
            cell_next[(size_t)p * 2 * D + q] = ccell[(size_t)k * 2 * D + q];
    } else if (small[k]) {
        SmallRoot r;
        r.id = cid;
        r.level = level;
        r.pad = 0;
        roots[smrank[k] - 1] = r;
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
    const size_t es = grove__kd_coord_size(t->type) * (size_t)D;
    cudaStream_t s = (cudaStream_t)ctx->stream;
    void *d_in = NULL, *temp = NULL, *ptmp = NULL;
    double *x = NULL, *x2 = NULL, *bounds = NULL, *cell = NULL, *cell2 = NULL, *ccell = NULL;
    uint64_t *perm = NULL, *perm2 = NULL, *act = NULL, *act2 = NULL;
    uint8_t *flags = NULL, *heads = NULL;
    uint32_t *dest = NULL, *ntiles = NULL, *split_flag = NULL, *srank = NULL, *big = NULL,
             *brank = NULL, *smf = NULL, *smrank = NULL;
    int32_t *side = NULL;
    unsigned long long *boxk = NULL, *nleft = NULL, *d_depth = NULL;
    BNode *nodes = NULL;
    SmallRoot *roots = NULL;
    size_t temp_cap = 0, ptmp_cap = 0, nodes_cap = 0, bounds_cap = 0, roots_cap = 0;
    uint64_t num = 1, nact = 0, nroots = 0;
    std::vector<uint64_t> levels; /* construction ids of level L: [levels[L], levels[L + 1]) */
    size_t nlevels = 0;
    unsigned long long depth = 0;
    grove_status st = GROVE_OK;

    /* the input: points as doubles, tree order 0..n-1 */
    if (dev_in) {
        d_in = (void *)pts->data; /* only read */
    } else {
        GROVE_TRY(b.alloc(&d_in, n * es, "the k-d tree input points"));
        GROVE_TRY(grove__cuda_h2d(ctx, d_in, pts->data, n * es, s));
    }
    GROVE_TRY(b.alloc((void **)&x, n * D * sizeof(double), "the k-d tree coordinates"));
    GROVE_TRY(b.alloc((void **)&perm, n * sizeof(uint64_t), "the k-d tree point order"));
    if (t->type == GROVE_COORD_F64)
        to_double_kernel<double><<<grid_for(n * D), kBlock, 0, s>>>((const double *)d_in, n * D, x);
    else
        to_double_kernel<float><<<grid_for(n * D), kBlock, 0, s>>>((const float *)d_in, n * D, x);
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
    } else {
        /* the large-node stage */
        const size_t max_act = n / (kSmall + 1) + 1;
        GROVE_TRY(b.alloc((void **)&x2, n * D * sizeof(double), "the k-d tree coordinates"));
        GROVE_TRY(b.alloc((void **)&perm2, n * sizeof(uint64_t), "the k-d tree point order"));
        GROVE_TRY(b.alloc((void **)&flags, n, "the k-d tree split flags"));
        GROVE_TRY(b.alloc((void **)&heads, n, "the k-d tree node heads"));
        GROVE_TRY(b.alloc((void **)&dest, n * sizeof(uint32_t), "the k-d tree moves"));
        GROVE_TRY(b.alloc((void **)&act, max_act * 8, "the k-d tree active nodes"));
        GROVE_TRY(b.alloc((void **)&act2, max_act * 8, "the k-d tree active nodes"));
        GROVE_TRY(b.alloc((void **)&cell, max_act * cs * 8, "the k-d tree cells"));
        GROVE_TRY(b.alloc((void **)&cell2, max_act * cs * 8, "the k-d tree cells"));
        GROVE_TRY(b.alloc((void **)&ccell, 2 * max_act * cs * 8, "the k-d tree cells"));
        GROVE_TRY(b.alloc((void **)&boxk, max_act * cs * 8, "the k-d tree boxes"));
        GROVE_TRY(b.alloc((void **)&nleft, max_act * 8, "the k-d tree left counts"));
        GROVE_TRY(b.alloc((void **)&side, max_act * 4, "the k-d tree cut sides"));
        GROVE_TRY(b.alloc((void **)&ntiles, max_act * 4, "the k-d tree tiles"));
        GROVE_TRY(b.alloc((void **)&split_flag, max_act * 4, "the k-d tree splits"));
        GROVE_TRY(b.alloc((void **)&srank, max_act * 4, "the k-d tree splits"));
        GROVE_TRY(b.alloc((void **)&big, 2 * max_act * 4, "the k-d tree children"));
        GROVE_TRY(b.alloc((void **)&brank, 2 * max_act * 4, "the k-d tree children"));
        GROVE_TRY(b.alloc((void **)&smf, 2 * max_act * 4, "the k-d tree children"));
        GROVE_TRY(b.alloc((void **)&smrank, 2 * max_act * 4, "the k-d tree children"));
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(heads, 0, n, s), "k-d tree heads");
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(heads, 1, 1, s), "k-d tree heads");
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
                size_t need = 0;
                GROVE_TRY(b.grow((void **)&nodes, &nodes_cap, (num + 2 * nact) * sizeof(BNode), 1,
                                 "the k-d tree nodes"));
                GROVE_TRY(b.grow((void **)&bounds, &bounds_cap,
                                 (num + 2 * nact) * cs * sizeof(double), 1, "the k-d tree boxes"));
                GROVE_TRY(b.grow((void **)&roots, &roots_cap,
                                 (nroots + 2 * nact) * sizeof(SmallRoot), 1, "the small roots"));
                tiles_kernel<<<ga, kBlock, 0, s>>>(nodes, act, (uint32_t)nact, D, ntiles, boxk,
                                                   nleft);
                KD_LAUNCHED("k-d tree tiles kernel");
                GROVE_TRY(scan_u32(ctx, b, &temp, &temp_cap, ntiles, ntiles, nact, s));
                level_pass(D, false, pg, nodes, act, (uint32_t)nact, ntiles, x, boxk, NULL, n,
                           NULL, s);
                KD_LAUNCHED("k-d tree box kernel");
                if (level == 0) {
                    root_cell_kernel<<<1, 32, 0, s>>>(boxk, D, cell);
                    KD_LAUNCHED("k-d tree root cell kernel");
                }
                decide_kernel<<<ga, kBlock, 0, s>>>(nodes, act, (uint32_t)nact, D, boxk, cell,
                                                    bounds, split_flag, side);
                KD_LAUNCHED("k-d tree decide kernel");
                GROVE_CUDA_TRY(ctx, cudaMemsetAsync(flags, 1, n, s), "k-d tree flags");
                flags_kernel<<<pg, kBlock, 0, s>>>(nodes, act, (uint32_t)nact, ntiles, x, D, flags,
                                                   nleft);
                KD_LAUNCHED("k-d tree flags kernel");
                GROVE_TRY(grove__cuda_segsplit(ctx, NULL, &need, 8, perm, flags, heads, perm2, dest,
                                               n, s));
                GROVE_TRY(b.grow(&ptmp, &ptmp_cap, need, 0, "k-d tree split storage"));
                GROVE_TRY(grove__cuda_segsplit(ctx, ptmp, &need, 8, perm, flags, heads, perm2, dest,
                                               n, s));
                level_pass(D, true, pg, NULL, NULL, 0, NULL, x, NULL, dest, n, x2, s);
                KD_LAUNCHED("k-d tree row move kernel");
                {
                    double *tx = x;
                    uint64_t *tp = perm;
                    x = x2;
                    x2 = tx;
                    perm = perm2;
                    perm2 = tp;
                }
                GROVE_TRY(scan_u32(ctx, b, &temp, &temp_cap, split_flag, srank, nact, s));
                children_kernel<<<ga, kBlock, 0, s>>>(nodes, act, (uint32_t)nact, D, num,
                                                      split_flag, srank, nleft, side, cell, bounds,
                                                      heads, big, smf, ccell);
                KD_LAUNCHED("k-d tree children kernel");
                GROVE_TRY(scan_u32(ctx, b, &temp, &temp_cap, big, brank, 2 * nact, s));
                GROVE_TRY(scan_u32(ctx, b, &temp, &temp_cap, smf, smrank, 2 * nact, s));
                compact_kernel<<<g2, kBlock, 0, s>>>((uint32_t)nact, D, num, split_flag, srank, big,
                                                     brank, smf, smrank, ccell, act2, cell2,
                                                     roots + nroots, level + 1);
                KD_LAUNCHED("k-d tree compact kernel");
                GROVE_TRY(grove__cuda_d2h(ctx, &host[0], srank + nact - 1, 4, s));
                GROVE_TRY(grove__cuda_d2h(ctx, &host[1], brank + 2 * nact - 1, 4, s));
                GROVE_TRY(grove__cuda_d2h(ctx, &host[2], smrank + 2 * nact - 1, 4, s));
                GROVE_TRY(grove__cuda_sync(ctx, s, "building the k-d tree"));
                {
                    uint64_t *ta = act;
                    double *tc = cell;
                    act = act2;
                    act2 = ta;
                    cell = cell2;
                    cell2 = tc;
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
        GROVE_TRY(small_stage(ctx, D, nodes, roots, (uint32_t)nroots, t->opts.leaf_size, x, perm,
                              sub, subb, cnt, d_depth, s));
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
        b.release(x2);
        x2 = NULL;
        {
            unsigned char *opts = NULL;
            GROVE_TRY(b.alloc((void **)&opts, n * es, "the k-d tree points"));
            gather_rows_kernel<<<grid_for(n), kBlock, 0, s>>>((const unsigned char *)d_in, n, es,
                                                              perm, opts);
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
                t->d_index = perm;
                t->d_bytes[3] = b.take(perm);
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
            GROVE_TRY(grove__cuda_d2h(ctx, t->index, perm, n * sizeof *t->index, s));
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

extern "C" void grove__kd_free_device(grove_kdtree *t)
{
    void **p[4] = {&t->d_nodes, &t->d_bounds, &t->d_pts, &t->d_index};
    if (!t->dev_ctx) return;
    /* the context's device, whichever is current on this thread */
    if (grove__cuda_use(t->dev_ctx) == GROVE_OK)
        for (int i = 0; i < 4; i++)
            if (*p[i]) grove__cuda_free(t->dev_ctx, *p[i], t->d_bytes[i], t->dev_ctx->stream);
    for (int i = 0; i < 4; i++) {
        *p[i] = NULL;
        t->d_bytes[i] = 0;
    }
    t->dev_ctx = NULL;
}

namespace
{

/* The smallest index of a point with a non-finite coordinate (atomicMin into *bad). */
template <typename T>
__global__ void find_bad_kernel(const T *__restrict__ x, size_t count, int D,
                                unsigned long long *bad)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        if (!isfinite((double)x[i])) atomicMin(bad, (unsigned long long)(i / (size_t)D));
}

} // namespace

extern "C" grove_status grove__kd_find_bad_cuda(grove_ctx *ctx, const grove_coords *d, size_t *bad,
                                                double row[GROVE_KDTREE_MAX_DIMS])
{
    cudaStream_t s = (cudaStream_t)ctx->stream;
    const size_t count = d->n * (size_t)d->dims;
    const size_t es = grove__kd_coord_size(d->type);
    unsigned long long *dbad = NULL, hbad = ~0ull;
    unsigned char raw[GROVE_KDTREE_MAX_DIMS * sizeof(double)];
    grove_status st;
    *bad = SIZE_MAX;
    if (d->n == 0) return GROVE_OK;
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&dbad, sizeof *dbad, ctx->stream, "a check flag"));
    st = grove__cuda_h2d(ctx, dbad, &hbad, sizeof hbad, s);
    if (st == GROVE_OK) {
        const unsigned g = (unsigned)((count + kBlock - 1) / kBlock < 132 * 16
                                          ? (count + kBlock - 1) / kBlock
                                          : 132 * 16);
        if (d->type == GROVE_COORD_F64)
            find_bad_kernel<double>
                <<<g, kBlock, 0, s>>>((const double *)d->data, count, d->dims, dbad);
        else
            find_bad_kernel<float>
                <<<g, kBlock, 0, s>>>((const float *)d->data, count, d->dims, dbad);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) st = grove__cuda_status(ctx, (int)e, "k-d tree finiteness check");
    }
    if (st == GROVE_OK) st = grove__cuda_d2h(ctx, &hbad, dbad, sizeof hbad, s);
    if (st == GROVE_OK) st = grove__cuda_sync(ctx, s, "k-d tree finiteness check");
    if (st == GROVE_OK && hbad != ~0ull) {
        st = grove__cuda_d2h(ctx, raw, (const unsigned char *)d->data + (size_t)hbad * d->dims * es,
                             (size_t)d->dims * es, s);
        if (st == GROVE_OK) st = grove__cuda_sync(ctx, s, "k-d tree finiteness check");
        if (st == GROVE_OK) {
            for (int a = 0; a < d->dims; a++)
                row[a] = grove__kd_coord(raw, d->type, d->dims, 0, a);
            *bad = (size_t)hbad;
        }
    }
    grove__cuda_free(ctx, dbad, sizeof *dbad, ctx->stream);
    return st;
}

extern "C" grove_status grove__kd_download_cuda(grove_ctx *ctx, grove_kdtree *t)
{
    cudaStream_t s = (cudaStream_t)ctx->stream;
    const size_t cs = 2 * (size_t)t->dims, es = grove__kd_coord_size(t->type) * (size_t)t->dims;
    grove_kdtree_node *nodes = (grove_kdtree_node *)malloc(t->num_nodes * sizeof *nodes);
    double *bounds = (double *)malloc(t->num_nodes * cs * sizeof *bounds);
    void *pts = t->n ? malloc(t->n * es) : NULL;
    uint64_t *index = t->n ? (uint64_t *)malloc(t->n * sizeof *index) : NULL;
    grove_status st = GROVE_OK;
    if (!nodes || !bounds || (t->n && (!pts || !index))) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "grove_kdtree_download: out of memory for %zu nodes and %zu points",
                          t->num_nodes, t->n);
        goto _end;
    }
    GROVE_TRY_END(st, grove__cuda_use(ctx));
    GROVE_TRY_END(st, grove__cuda_d2h(ctx, nodes, t->d_nodes, t->num_nodes * sizeof *nodes, s));
    GROVE_TRY_END(st, grove__cuda_d2h(ctx, bounds, t->d_bounds, t->num_nodes * cs * 8, s));
    if (t->n) {
        GROVE_TRY_END(st, grove__cuda_d2h(ctx, pts, t->d_pts, t->n * es, s));
        GROVE_TRY_END(st, grove__cuda_d2h(ctx, index, t->d_index, t->n * sizeof *index, s));
    }
    GROVE_TRY_END(st, grove__cuda_sync(ctx, s, "downloading the k-d tree"));
    t->nodes = nodes;
    t->bounds = bounds;
    t->pts = pts;
    t->index = index;
    return GROVE_OK;
_end:
    free(nodes);
    free(bounds);
    free(pts);
    free(index);
    return st;
}

extern "C" grove_status grove__kd_upload_cuda(grove_ctx *ctx, grove_kdtree *t)
{
    cudaStream_t s = (cudaStream_t)ctx->stream;
    const size_t cs = 2 * (size_t)t->dims, es = grove__kd_coord_size(t->type) * (size_t)t->dims;
    const void *src[4] = {t->nodes, t->bounds, t->pts, t->index};
    const size_t bytes[4] = {t->num_nodes * sizeof(grove_kdtree_node), t->num_nodes * cs * 8,
                             t->n * es, t->n * sizeof(uint64_t)};
    void **dst[4] = {&t->d_nodes, &t->d_bounds, &t->d_pts, &t->d_index};
    grove_status st = grove__cuda_use(ctx);
    t->dev_ctx = ctx;
    for (int i = 0; i < 4 && st == GROVE_OK; i++) {
        if (bytes[i] == 0) continue;
        st = grove__cuda_alloc(ctx, dst[i], bytes[i], ctx->stream, "the k-d tree (upload)");
        if (st != GROVE_OK) break;
        t->d_bytes[i] = bytes[i];
        st = grove__cuda_h2d(ctx, *dst[i], src[i], bytes[i], s);
    }
    if (st == GROVE_OK) st = grove__cuda_sync(ctx, s, "uploading the k-d tree");
    if (st != GROVE_OK) grove__kd_free_device(t);
    memcpy(t->root_box, t->bounds, cs * sizeof(double));
    return st;
}
