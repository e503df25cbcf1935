/*
 * kdtree_small_cuda.cu - the last two stages of the CUDA k-d tree build (kdtree_cuda.cu runs
 * the large-node stage and calls these): the small-node stage, one warp per small root, and the
 * output stage that numbers the nodes in preorder and writes them.
 */
#include <cuda_runtime.h>

#include <stdint.h>

#include "kdtree_build_cuda.cuh"

namespace grove_kd
{
namespace
{

/* ---- small-node stage ---- */

/* One warp per small root (at most 64 points, so two per lane). The warp walks the root's
 * subtree depth first as small_build() of kdtree_cpu.c does; each node's box is a warp
 * reduction, and the plane search runs all candidate planes of an axis at once: prefix and
 * suffix boxes by warp scans (min and max are exact, so any order gives the CPU's boxes), the
 * CPU's cost formula per candidate in the same rounded operations, then the least
 * (cost, axis, position), which is what the CPU's sequential sweep keeps. The stable
 * partitions of the tree order and of the per-axis sorted lists are ballots. */
const int kSmallWarps = 4;
#ifndef KD_SMALL_MINB
#define KD_SMALL_MINB 6 /* blocks per SM: 80 registers, no spills (8 spills) */
#endif

/* Shared scratch of one warp, sized for D axes. */
template <typename T, int D> struct WarpWs {
    T px[kSmall * D];       /* local point p's coordinates, in the input's type */
    uint64_t gid[kSmall];   /* local point -> input position */
    uint8_t ord[D][kSmall]; /* per axis, each node's range sorted by (coordinate, p) */
    uint8_t seq[kSmall];    /* tree order of the local points */
    uint8_t tmp[kSmall];    /* partition scratch */
    uint8_t stk[2 * kSmall + 2], sa[2 * kSmall + 2], se[2 * kSmall + 2]; /* node stack */
    uint8_t lvl[2 * kSmall]; /* local depth per local node */
};

/* A candidate plane: cost c before position i of an axis's sorted range (i >= 1). */
struct Cand {
    double c, split;
    int i, ok;
};

__device__ __forceinline__ bool better(const Cand &a, const Cand &b)
{
    return a.ok && (!b.ok || a.c < b.c || (a.c == b.c && a.i < b.i));
}

/* (split is not exchanged: the winner's plane is read back from its position) */
__device__ __forceinline__ Cand shfl_cand(const Cand &a, int o)
{
    Cand r;
    r.c = __shfl_xor_sync(0xffffffffu, a.c, o);
    r.i = __shfl_xor_sync(0xffffffffu, a.i, o);
    r.ok = __shfl_xor_sync(0xffffffffu, a.ok, o);
    r.split = 0.0;
    return r;
}

/* Exact minimum and maximum in the coordinates' own type (no NaN, no -0 here); float ones are
 * half the shuffles and run at the single-precision rate. */
__device__ __forceinline__ float kmin(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ float kmax(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double kmin(double a, double b) { return fmin(a, b); }
__device__ __forceinline__ double kmax(double a, double b) { return fmax(a, b); }

/* The plane before position j of m (at coordinate split), valid if ok, with the CPU's cost:
 * j points in the left box, m - j in the right, each weighted by its inflated measure (ml, mr:
 * the products of box_measure() of kdtree_cpu.c). */
__device__ __forceinline__ Cand cand_at(bool ok, int j, double split, int m, double ml, double mr)
{
    Cand r;
    r.ok = ok;
    r.i = j;
    r.split = split;
    r.c = INFINITY;
    if (ok) r.c = __dadd_rn(__dmul_rn((double)j, ml), __dmul_rn((double)(m - j), mr));
    return r;
}

/* One factor of kdtree_cpu.c's box_measure(): multiplied in axis order, as there, the running
 * products give its bytes without keeping the boxes (8 * D doubles in registers before). */
__device__ __forceinline__ double measure_step(double m, double lo, double hi, double infl)
{
    return __dmul_rn(m, __dadd_rn(__dsub_rn(hi, lo), infl));
}

/* The least-cost plane of the node whose range [a, e) of every sorted list has the box bx;
 * the same result in every lane. Returns 0 if no plane separates the points. The prefix and
 * suffix boxes are scanned in the coordinates' type (exact), the costs in double. */
template <typename T, int D>
__device__ int warp_best(const WarpWs<T, D> &w, int a, int e, const double *bx, int lane,
                         int *axis, double *split)
{
    const int m = e - a, j0 = 2 * lane, j1 = 2 * lane + 1;
    const T inf = (T)INFINITY;
    double ext_max = 0.0, infl;
    Cand best;
    best.ok = 0;
    best.c = INFINITY;
    best.split = 0.0;
    best.i = 0;
    *axis = -1;
    for (int d = 0; d < D; d++) {
        double ex = __dsub_rn(bx[D + d], bx[d]);
        ext_max = ex > ext_max ? ex : ext_max;
    }
    infl = __dmul_rn(2.0, __ddiv_rn(ext_max, __dsqrt_rn((double)m)));
    for (int d = 0; d < D; d++) {
        const uint8_t *o = w.ord[d] + a;
        const bool h0 = j0 < m, h1 = j1 < m;
        const T *p0 = h0 ? w.px + o[j0] * D : NULL, *p1 = h1 ? w.px + o[j1] * D : NULL;
        /* the inflated measures of the left box of the plane before j0 (exclusive prefix), and
         * before j1; of the right box of the plane before j0 (suffix from j0), and before j1 */
        double ml0 = 1.0, ml1 = 1.0, mr0 = 1.0, mr1 = 1.0;
        for (int k = 0; k < D; k++) {
            T v0lo = h0 ? p0[k] : inf, v0hi = h0 ? p0[k] : -inf;
            T v1lo = h1 ? p1[k] : inf, v1hi = h1 ? p1[k] : -inf;
            T slo = kmin(v0lo, v1lo), shi = kmax(v0hi, v1hi);
            T ulo = slo, uhi = shi;
            for (int q = 1; q < 32; q *= 2) {
                T tlo = __shfl_up_sync(0xffffffffu, slo, q);
                T thi = __shfl_up_sync(0xffffffffu, shi, q);
                T vlo = __shfl_down_sync(0xffffffffu, ulo, q);
                T vhi = __shfl_down_sync(0xffffffffu, uhi, q);
                if (lane >= q) {
                    slo = kmin(slo, tlo);
                    shi = kmax(shi, thi);
                }
                if (lane + q < 32) {
                    ulo = kmin(ulo, vlo);
                    uhi = kmax(uhi, vhi);
                }
            }
            T elo = __shfl_up_sync(0xffffffffu, slo, 1);
            T ehi = __shfl_up_sync(0xffffffffu, shi, 1);
            T alo = __shfl_down_sync(0xffffffffu, ulo, 1);
            T ahi = __shfl_down_sync(0xffffffffu, uhi, 1);
            if (lane == 0) {
                elo = inf;
                ehi = -inf;
            }
            if (lane == 31) {
                alo = inf;
                ahi = -inf;
            }
            ml0 = measure_step(ml0, (double)elo, (double)ehi, infl);
            ml1 = measure_step(ml1, (double)kmin(elo, v0lo), (double)kmax(ehi, v0hi), infl);
            mr0 = measure_step(mr0, (double)ulo, (double)uhi, infl);
            mr1 = measure_step(mr1, (double)kmin(alo, v1lo), (double)kmax(ahi, v1hi), infl);
        }
        /* the coordinate before j0 is the previous lane's j1 */
        T c1 = h1 ? p1[d] : inf, c0 = h0 ? p0[d] : inf;
        T before0 = __shfl_up_sync(0xffffffffu, c1, 1);
        Cand mine = cand_at(j0 >= 1 && h0 && before0 < c0, j0, (double)c0, m, ml0, mr0);
        Cand other = cand_at(h1 && c0 < c1, j1, (double)c1, m, ml1, mr1);
        if (better(other, mine)) mine = other;
        for (int q = 16; q > 0; q /= 2) {
            Cand t = shfl_cand(mine, q);
            if (better(t, mine)) mine = t;
        }
        /* a later axis must be strictly better */
        if (mine.ok && (!best.ok || mine.c < best.c)) {
            best = mine;
            best.split = (double)w.px[o[mine.i] * D + d];
            *axis = d;
        }
    }
    *split = best.split;
    return best.ok;
}

/* Stable partition of list[a, e) by px[p * D + axis] < split (nl points go left). */
template <typename T, int D>
__device__ void warp_partition(WarpWs<T, D> &w, uint8_t *list, int a, int e, int nl, int axis,
                               double split, int lane)
{
    int left = 0;
    for (int c = a; c < e; c += 32) {
        int j = c + lane;
        uint8_t p = j < e ? list[j] : 0;
        bool f = j < e && (double)w.px[p * D + axis] < split;
        unsigned bal = __ballot_sync(0xffffffffu, f);
        int lr = left + __popc(bal & ((1u << lane) - 1u));
        if (j < e) w.tmp[f ? a + lr : a + nl + (j - a - lr)] = p;
        left += __popc(bal);
    }
    __syncwarp();
    for (int j = a + lane; j < e; j += 32) list[j] = w.tmp[j];
    __syncwarp();
}

/* The subtree of each small root: to the scratch slots sub[2 * begin ...] in construction order
 * (local ids; left/right local, 0 for a leaf), its size to cnt[r], and the root's points put
 * in tree order in perm. */
template <typename T, int D>
__global__ void __launch_bounds__(32 * kSmallWarps, KD_SMALL_MINB)
    small_kernel(const BNode *__restrict__ nodes, const SmallRoot *__restrict__ roots,
                 uint32_t nroots, int leaf, const T *__restrict__ x, size_t n,
                 uint64_t *__restrict__ perm, BNode *__restrict__ sub, double *__restrict__ subb,
                 uint32_t *__restrict__ cnt, unsigned long long *__restrict__ depth)
{
    const int cs = 2 * D, lane = threadIdx.x & 31, wi = threadIdx.x / 32;
    __shared__ WarpWs<T, D> wss[kSmallWarps];
    WarpWs<T, D> &w = wss[wi];
    const uint32_t r = blockIdx.x * kSmallWarps + wi;
    if (r >= nroots) return;
    const BNode rn = nodes[roots[r].id];
    const uint64_t B = rn.begin;
    const int m = (int)(rn.end - rn.begin);
    BNode *v = sub + 2 * B;
    double *vb = subb + 2 * B * cs;
    int sp = 0, nv = 1, maxl = 0;

    for (int p = lane; p < m; p += 32) {
        w.gid[p] = perm[B + p];
        for (int d = 0; d < D; d++) w.px[p * D + d] = x[d * n + B + p];
        w.seq[p] = (uint8_t)p;
    }
    __syncwarp();
    /* per axis, the rank of each point by (coordinate, local position); a lane's two points in
     * one sweep, each shared load serving both */
    for (int d = 0; d < D; d++) {
        const int p0 = lane, p1 = lane + 32;
        const T v0 = p0 < m ? w.px[p0 * D + d] : (T)0, v1 = p1 < m ? w.px[p1 * D + d] : (T)0;
        int r0 = 0, r1 = 0;
        for (int q = 0; q < m; q++) {
            const T vq = w.px[q * D + d];
            r0 += vq < v0 || (vq == v0 && q < p0);
            r1 += vq < v1 || (vq == v1 && q < p1);
        }
        if (p0 < m) w.ord[d][r0] = (uint8_t)p0;
        if (p1 < m) w.ord[d][r1] = (uint8_t)p1;
    }
    if (lane == 0) {
        v[0] = rn;
        w.lvl[0] = 0;
        w.stk[0] = 0;
        w.sa[0] = 0;
        w.se[0] = (uint8_t)m;
    }
    sp = 1;
    __syncwarp();
    while (sp > 0) {
        int id, a, e, axis = -1, nl = 0;
        double split = 0.0, bx[2 * D];
        sp--;
        id = w.stk[sp];
        a = w.sa[sp];
        e = w.se[sp];
        __syncwarp();
        for (int k = 0; k < D; k++) {
            T lo = (T)INFINITY, hi = -(T)INFINITY;
            for (int i = a + lane; i < e; i += 32) {
                T c = w.px[w.seq[i] * D + k];
                lo = kmin(lo, c);
                hi = kmax(hi, c);
            }
            for (int q = 16; q > 0; q /= 2) {
                lo = kmin(lo, __shfl_xor_sync(0xffffffffu, lo, q));
                hi = kmax(hi, __shfl_xor_sync(0xffffffffu, hi, q));
            }
            bx[k] = (double)lo;
            bx[D + k] = (double)hi;
        }
        if (lane == 0) {
            for (int k = 0; k < cs; k++) vb[id * cs + k] = bx[k];
            v[id].left = v[id].right = 0;
            v[id].axis = -1;
            v[id].kind = GROVE_KDTREE_LEAF;
            v[id].split = 0.0;
        }
        if (w.lvl[id] > maxl) maxl = w.lvl[id];
        if (e - a <= leaf || !warp_best<T, D>(w, a, e, bx, lane, &axis, &split)) continue;
        for (int c = a; c < e; c += 32) {
            int j = c + lane;
            bool f = j < e && (double)w.px[w.seq[j] * D + axis] < split;
            nl += __popc(__ballot_sync(0xffffffffu, f));
        }
        warp_partition<T, D>(w, w.seq, a, e, nl, axis, split, lane);
        for (int d = 0; d < D; d++)
            warp_partition<T, D>(w, w.ord[d], a, e, nl, axis, split, lane);
        {
            int li = nv, ri = nv + 1;
            nv += 2;
            if (lane == 0) {
                v[id].axis = axis;
                v[id].kind = GROVE_KDTREE_COST;
                v[id].split = split;
                v[id].left = (uint64_t)li;
                v[id].right = (uint64_t)ri;
                v[li].begin = B + (uint64_t)a;
                v[li].end = v[ri].begin = B + (uint64_t)(a + nl);
                v[ri].end = B + (uint64_t)e;
                w.lvl[li] = w.lvl[ri] = (uint8_t)(w.lvl[id] + 1);
                /* right first, so the left subtree is finished first, as on the CPU */
                w.stk[sp] = (uint8_t)ri;
                w.sa[sp] = (uint8_t)(a + nl);
                w.se[sp] = (uint8_t)e;
                w.stk[sp + 1] = (uint8_t)li;
                w.sa[sp + 1] = (uint8_t)a;
                w.se[sp + 1] = (uint8_t)(a + nl);
            }
            sp += 2;
            __syncwarp();
        }
    }
    for (int i = lane; i < m; i += 32) perm[B + i] = w.gid[w.seq[i]];
    if (lane == 0) {
        cnt[r] = (uint32_t)nv;
        atomicMax(depth, (unsigned long long)(roots[r].level + maxl));
    }
}

/* ---- output stage ---- */

__global__ void mark_small_kernel(const SmallRoot *__restrict__ roots, uint32_t nroots,
                                  uint32_t *__restrict__ small_of)
{
    uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < nroots) small_of[roots[r].id] = r + 1;
}

/* Subtree sizes of the large-stage nodes [lo, hi) (one level; the next level is done). */
__global__ void size_kernel(const BNode *__restrict__ nodes, uint64_t lo, uint64_t hi,
                            const uint32_t *__restrict__ small_of, const uint32_t *__restrict__ cnt,
                            uint64_t *__restrict__ size)
{
    uint64_t i = lo + blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= hi) return;
    const BNode &nd = nodes[i];
    if (small_of[i])
        size[i] = cnt[small_of[i] - 1];
    else
        size[i] = nd.left ? 1 + size[nd.left] + size[nd.right] : 1;
}

/* Preorder positions of the children of the nodes [lo, hi) (whose positions are known). */
__global__ void pre_kernel(const BNode *__restrict__ nodes, uint64_t lo, uint64_t hi,
                           const uint64_t *__restrict__ size, uint64_t *__restrict__ pre)
{
    uint64_t i = lo + blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= hi) return;
    const BNode &nd = nodes[i];
    if (!nd.left) return;
    pre[nd.left] = pre[i] + 1;
    pre[nd.right] = pre[i] + 1 + size[nd.left];
}

/* The final node of every large-stage node that is not a small root. */
__global__ void out_large_kernel(const BNode *__restrict__ nodes, uint64_t num, int D,
                                 const double *__restrict__ bounds,
                                 const uint32_t *__restrict__ small_of,
                                 const uint64_t *__restrict__ pre,
                                 grove_kdtree_node *__restrict__ out, double *__restrict__ obounds)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= num || small_of[i]) return;
    const BNode &nd = nodes[i];
    uint64_t p = pre[i];
    grove_kdtree_node o;
    o.begin = nd.begin;
    o.end = nd.end;
    o.right = nd.left ? pre[nd.right] : 0;
    o.split = nd.split;
    o.axis = nd.left ? nd.axis : -1;
    o.kind = nd.left ? nd.kind : GROVE_KDTREE_LEAF;
    out[p] = o;
    for (int k = 0; k < 2 * D; k++) obounds[p * 2 * D + k] = bounds[i * 2 * D + k];
}

/* A warp per small root: its subtree from the scratch slots, renumbered into preorder. One lane
 * numbers the (at most 127) nodes in shared memory; the warp writes the nodes and boxes (a
 * thread per root wrote 88 bytes a node alone, its numbering in local memory: 1.4 ms of the
 * build at 10^7 points). */
const int kOutWarps = 4;

__global__ void __launch_bounds__(32 * kOutWarps)
    out_small_kernel(const BNode *__restrict__ nodes, const SmallRoot *__restrict__ roots,
                     uint32_t nroots, int D, const BNode *__restrict__ sub,
                     const double *__restrict__ subb, const uint32_t *__restrict__ cnt,
                     const uint64_t *__restrict__ pre, grove_kdtree_node *__restrict__ out,
                     double *__restrict__ obounds)
{
    __shared__ uint8_t sl[kOutWarps][2 * kSmall], sr[kOutWarps][2 * kSmall];
    __shared__ uint8_t ssz[kOutWarps][2 * kSmall], slp[kOutWarps][2 * kSmall];
    const int lane = threadIdx.x & 31, wi = threadIdx.x / 32;
    const uint32_t r = blockIdx.x * kOutWarps + wi;
    if (r >= nroots) return;
    const uint64_t B = nodes[roots[r].id].begin, P = pre[roots[r].id];
    const BNode *v = sub + 2 * B;
    const double *vb = subb + 2 * B * 2 * D;
    const int nv = (int)cnt[r], cs = 2 * D;
    uint8_t *L = sl[wi], *R = sr[wi], *sz = ssz[wi], *lp = slp[wi];
    for (int k = lane; k < nv; k += 32) {
        L[k] = (uint8_t)v[k].left;
        R[k] = (uint8_t)v[k].right;
    }
    __syncwarp();
    if (lane == 0) {
        for (int k = nv - 1; k >= 0; k--) sz[k] = (uint8_t)(1 + (L[k] ? sz[L[k]] + sz[R[k]] : 0));
        lp[0] = 0;
        for (int k = 0; k < nv; k++)
            if (L[k]) {
                lp[L[k]] = (uint8_t)(lp[k] + 1);
                lp[R[k]] = (uint8_t)(lp[k] + 1 + sz[L[k]]);
            }
    }
    __syncwarp();
    for (int k = lane; k < nv; k += 32) {
        const BNode &sn = v[k];
        grove_kdtree_node o;
        o.begin = sn.begin;
        o.end = sn.end;
        o.right = L[k] ? P + lp[R[k]] : 0;
        o.split = sn.split;
        o.axis = L[k] ? sn.axis : -1;
        o.kind = L[k] ? sn.kind : GROVE_KDTREE_LEAF;
        out[P + lp[k]] = o;
    }
    for (int e = lane; e < nv * cs; e += 32) {
        const int k = e / cs, q = e - k * cs;
        obounds[(P + lp[k]) * cs + q] = vb[e];
    }
}

template <typename T, int D>
void launch_small(const BNode *nodes, const SmallRoot *roots, uint32_t nroots, int leaf,
                  const void *x, size_t n, uint64_t *perm, BNode *sub, double *subb,
                  uint32_t *cnt, unsigned long long *depth, cudaStream_t s)
{
    small_kernel<T, D><<<(nroots + kSmallWarps - 1) / kSmallWarps, 32 * kSmallWarps, 0, s>>>(
        nodes, roots, nroots, leaf, (const T *)x, n, perm, sub, subb, cnt, depth);
}

template <typename T>
void launch_small_d(int D, const BNode *nodes, const SmallRoot *roots, uint32_t nroots, int leaf,
                    const void *x, size_t n, uint64_t *perm, BNode *sub, double *subb,
                    uint32_t *cnt, unsigned long long *depth, cudaStream_t s)
{
#define KD_SMALL_CASE(DV)                                                                          \
    launch_small<T, DV>(nodes, roots, nroots, leaf, x, n, perm, sub, subb, cnt, depth, s)
    switch (D) {
    case 1: KD_SMALL_CASE(1); break;
    case 2: KD_SMALL_CASE(2); break;
    case 3: KD_SMALL_CASE(3); break;
    case 4: KD_SMALL_CASE(4); break;
    case 5: KD_SMALL_CASE(5); break;
    case 6: KD_SMALL_CASE(6); break;
    case 7: KD_SMALL_CASE(7); break;
    default: KD_SMALL_CASE(8); break;
    }
#undef KD_SMALL_CASE
}

} /* namespace */

grove_status small_stage(grove_ctx *ctx, int D, bool f64, const BNode *nodes,
                         const SmallRoot *roots, uint32_t nroots, int leaf, const void *x, size_t n,
                         uint64_t *perm, BNode *sub, double *subb, uint32_t *cnt,
                         unsigned long long *depth, cudaStream_t s)
{
    if (nroots == 0) return GROVE_OK;
    if (f64)
        launch_small_d<double>(D, nodes, roots, nroots, leaf, x, n, perm, sub, subb, cnt, depth, s);
    else
        launch_small_d<float>(D, nodes, roots, nroots, leaf, x, n, perm, sub, subb, cnt, depth, s);
    KD_LAUNCHED("k-d tree small-node kernel");
    return GROVE_OK;
}

grove_status order_nodes(grove_ctx *ctx, const BNode *nodes, const SmallRoot *roots,
                         uint32_t nroots, const uint32_t *cnt, const uint64_t *levels,
                         size_t nlevels, uint32_t *small_of, uint64_t *size, uint64_t *pre,
                         cudaStream_t s)
{
    mark_small_kernel<<<grid_for(nroots), kBlock, 0, s>>>(roots, nroots, small_of);
    KD_LAUNCHED("k-d tree mark kernel");
    for (size_t L = nlevels; L-- > 0;) {
        size_kernel<<<grid_for(levels[L + 1] - levels[L]), kBlock, 0, s>>>(
            nodes, levels[L], levels[L + 1], small_of, cnt, size);
        KD_LAUNCHED("k-d tree size kernel");
    }
    for (size_t L = 0; L < nlevels; L++) {
        pre_kernel<<<grid_for(levels[L + 1] - levels[L]), kBlock, 0, s>>>(nodes, levels[L],
                                                                           levels[L + 1], size, pre);
        KD_LAUNCHED("k-d tree preorder kernel");
    }
    return GROVE_OK;
}

grove_status write_nodes(grove_ctx *ctx, const BNode *nodes, uint64_t num, int D,
                         const double *bounds, const uint32_t *small_of, const uint64_t *pre,
                         const SmallRoot *roots, uint32_t nroots, const BNode *sub,
                         const double *subb, const uint32_t *cnt, grove_kdtree_node *onodes,
                         double *obounds, cudaStream_t s)
{
    out_large_kernel<<<grid_for(num), kBlock, 0, s>>>(nodes, num, D, bounds, small_of, pre,
                                                      onodes, obounds);
    KD_LAUNCHED("k-d tree output kernel");
    if (nroots == 0) return GROVE_OK;
    /* (no grid cap: 2^31 - 1 blocks of 4 roots are more than 2^32 points make) */
    out_small_kernel<<<(nroots + kOutWarps - 1) / kOutWarps, 32 * kOutWarps, 0, s>>>(
        nodes, roots, nroots, D, sub, subb, cnt, pre, onodes, obounds);
    KD_LAUNCHED("k-d tree output kernel");
    return GROVE_OK;
}

} /* namespace grove_kd */
