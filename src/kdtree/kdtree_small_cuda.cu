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
 * subtree depth first as small_build() of kdtree_cpu.c does. Per-axis lists sorted by
 * (coordinate, local position) are made once per root and kept sorted by the stable
 * partitions, so a node's box is read off the ends of its ranges (min and max are exact: the
 * CPU's box). The plane search runs all candidate planes of an axis at once: prefix and suffix
 * boxes by warp scans on the other axes (on the searched axis the sorted range gives them),
 * the CPU's cost formula per candidate in the same rounded operations, and each lane keeps its
 * least (cost, axis, position); one reduction over the lanes then gives the CPU's choice. The
 * stable partitions of the tree order and of the per-axis sorted lists are ballots. A node of
 * at most 32 points takes one candidate per lane, a larger one two. */
const int kSmallWarps = 4;
const unsigned kFull = 0xffffffffu;
/* blocks per SM: 80 registers, no spills for float input (7: spills), 8-24 bytes for double */
#ifndef KD_SMALL_MINB
#define KD_SMALL_MINB 6
#endif

/* Shared scratch of one warp, sized for D axes. */
template <typename T, int D> struct WarpWs {
    alignas(16) T col[kSmall];    /* one axis's coordinates, +inf past the end (rank sweep) */
    T px[kSmall * D];             /* local point p's coordinates, in the input's type */
    uint64_t gid[kSmall];         /* local point -> input position */
    uint32_t stk[2 * kSmall + 2]; /* node stack: id | begin << 8 | end << 16 | depth << 24 */
    uint8_t ord[D][kSmall];       /* per axis, each node's range sorted by (coordinate, p) */
    uint8_t seq[kSmall];          /* tree order of the local points */
};

/* Exact minimum and maximum in the coordinates' own type (no NaN, no -0 here); float ones are
 * half the shuffles and run at the single-precision rate. */
__device__ __forceinline__ float kmin(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ float kmax(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double kmin(double a, double b) { return fmin(a, b); }
__device__ __forceinline__ double kmax(double a, double b) { return fmax(a, b); }

/* 16 bytes of coordinates from 16-byte aligned shared memory, one load. */
__device__ __forceinline__ void load16(const float *s, float (&c)[4])
{
    const float4 v = *reinterpret_cast<const float4 *>(s);
    c[0] = v.x;
    c[1] = v.y;
    c[2] = v.z;
    c[3] = v.w;
}
__device__ __forceinline__ void load16(const double *s, double (&c)[2])
{
    const double2 v = *reinterpret_cast<const double2 *>(s);
    c[0] = v.x;
    c[1] = v.y;
}

/* -1 if a < b (if a <= b for le), else 0: the rank sweep adds two of these and its count in
 * one three-input add (a C comparison becomes a predicate, an increment and a conditional
 * move: 3 instructions a comparison against 2.5). */
__device__ __forceinline__ int neg_lt(float a, float b, bool le)
{
#ifdef __CUDA_ARCH__
    int r;
    if (le)
        asm("set.le.s32.f32 %0, %1, %2;" : "=r"(r) : "f"(a), "f"(b));
    else
        asm("set.lt.s32.f32 %0, %1, %2;" : "=r"(r) : "f"(a), "f"(b));
    return r;
#else
    return -(int)(le ? a <= b : a < b);
#endif
}
__device__ __forceinline__ int neg_lt(double a, double b, bool le)
{
#ifdef __CUDA_ARCH__
    int r;
    if (le)
        asm("set.le.s32.f64 %0, %1, %2;" : "=r"(r) : "d"(a), "d"(b));
    else
        asm("set.lt.s32.f64 %0, %1, %2;" : "=r"(r) : "d"(a), "d"(b));
    return r;
#else
    return -(int)(le ? a <= b : a < b);
#endif
}

/* Factor k of kdtree_cpu.c's box_measure(): multiplied in axis order, as there, the running
 * products give its bytes without keeping the boxes (the CPU's 1.0 * f of axis 0 is f). */
__device__ __forceinline__ double measure_step(double m, int k, double lo, double hi, double infl)
{
    const double f = __dadd_rn(__dsub_rn(hi, lo), infl);
    return k == 0 ? f : __dmul_rn(m, f);
}

/* The CPU's cost of the plane before position j of m: j points weighted by the left box's
 * inflated measure ml, m - j by the right one's mr. */
__device__ __forceinline__ double plane_cost(int j, int m, double ml, double mr)
{
    return __dadd_rn(__dmul_rn((double)j, ml), __dmul_rn((double)(m - j), mr));
}

/* Inclusive prefix (s, up the lanes) and suffix (u, down the lanes) minimum and maximum. Min
 * and max are idempotent and a shuffle past the warp's edge returns the lane's own value, so
 * no step needs a guard. */
template <typename T>
__device__ __forceinline__ void scan_box(T &slo, T &shi, T &ulo, T &uhi, int first = 1)
{
#pragma unroll
    for (int q = first; q < 32; q *= 2) {
        slo = kmin(slo, __shfl_up_sync(kFull, slo, q));
        shi = kmax(shi, __shfl_up_sync(kFull, shi, q));
        ulo = kmin(ulo, __shfl_down_sync(kFull, ulo, q));
        uhi = kmax(uhi, __shfl_down_sync(kFull, uhi, q));
    }
}

/* A lane's candidate (cost c before position j of axis d, valid if ok) against its least so
 * far (key kb, axis and position db): costs are never negative nor NaN, so their bits order
 * them as unsigned integers, and an invalid plane gets a key above every cost (+INF
 * included). Axes and positions come in ascending order, so strictly less keeps the least
 * (cost, axis, position). */
__device__ __forceinline__ void keep_least(bool ok, double c, int d, int j, uint64_t &kb, int &db)
{
    const uint64_t k = ok ? (uint64_t)__double_as_longlong(c) : ~0ull;
    if (k < kb) {
        kb = k;
        db = d * kSmall + j;
    }
}

/* The least-cost plane of the node whose range [a, e) of every sorted list has the box held
 * by lanes 0..2D-1 in bv (lane k: lo of axis k, lane D + k: hi); the same result in every
 * lane: its axis, its plane and the number of points left of it (its position). Returns false
 * if no plane separates the points. P: candidate positions per lane (1: e - a <= 32, else 2,
 * at 2 * lane and 2 * lane + 1). A lane's positions past the end read the range's last point:
 * a repeated point changes no suffix box, and its plane is invalid since it does not separate
 * (the prefix boxes of invalid planes are not used). */
template <typename T, int D, int P>
__device__ bool warp_best(const WarpWs<T, D> &w, int a, int e, T bv, int lane, int *axis, T *split,
                          int *nl)
{
    const int m = e - a, j0 = P * lane, j1 = j0 + 1;
    const T inf = (T)INFINITY;
    double ext_max, infl;
    uint64_t kb = ~0ull;
    int db = 0;
    {
        /* the largest extent (0 at least): lane k < D holds axis k's, and extents are never
         * negative, so their bits order them */
        const T up = __shfl_down_sync(kFull, bv, D);
        const double ex = lane < D ? __dsub_rn((double)up, (double)bv) : 0.0;
        const uint64_t eb = (uint64_t)__double_as_longlong(ex);
        const unsigned ehi = __reduce_max_sync(kFull, (unsigned)(eb >> 32));
        const unsigned elo =
            __reduce_max_sync(kFull, (unsigned)(eb >> 32) == ehi ? (unsigned)eb : 0u);
        ext_max = __longlong_as_double((long long)((uint64_t)ehi << 32 | elo));
    }
    infl = __dmul_rn(2.0, __ddiv_rn(ext_max, __dsqrt_rn((double)m)));
    for (int d = 0; d < D; d++) {
        const uint8_t *o = w.ord[d] + a;
        const T lo = __shfl_sync(kFull, bv, d), hi = __shfl_sync(kFull, bv, D + d);
        const T *p0 = w.px + o[j0 < m ? j0 : m - 1] * D;
        const T *p1 = w.px + o[j1 < m ? j1 : m - 1] * D;
        /* coordinates on axis d at j0 (c0), j1 (c1) and before j0 (b0: the previous lane's
         * last; at lane 0 its own, so the invalid plane before 0 is never taken) */
        const T c0 = p0[d], c1 = P == 2 ? p1[d] : c0;
        const T b0 = __shfl_up_sync(kFull, P == 2 ? c1 : c0, 1);
        /* the inflated measures of the left boxes before j0 and j1, of the right boxes from j0
         * and j1, multiplied in axis order */
        double ml0 = 0.0, ml1 = 0.0, mr0 = 0.0, mr1 = 0.0;
        for (int k = 0; k < D; k++) {
            if (k == d) {
                ml0 = measure_step(ml0, k, (double)lo, (double)b0, infl);
                mr0 = measure_step(mr0, k, (double)c0, (double)hi, infl);
                if (P == 2) {
                    ml1 = measure_step(ml1, k, (double)lo, (double)c0, infl);
                    mr1 = measure_step(mr1, k, (double)c1, (double)hi, infl);
                }
            } else if (P == 1) {
                const T x = p0[k], xu = __shfl_up_sync(kFull, x, 1),
                        xd = __shfl_down_sync(kFull, x, 1);
                T slo = kmin(x, xu), shi = kmax(x, xu), ulo = kmin(x, xd), uhi = kmax(x, xd);
                scan_box(slo, shi, ulo, uhi, 2);
                ml0 = measure_step(ml0, k, (double)__shfl_up_sync(kFull, slo, 1),
                                   (double)__shfl_up_sync(kFull, shi, 1), infl);
                mr0 = measure_step(mr0, k, (double)ulo, (double)uhi, infl);
            } else {
                const T x0 = p0[k], x1 = p1[k];
                T slo = kmin(x0, x1), shi = kmax(x0, x1), ulo = slo, uhi = shi;
                scan_box(slo, shi, ulo, uhi);
                /* exclusive: the lanes before (at lane 0 none: +-inf), the lanes after (at
                 * lane 31 none) */
                T elo = __shfl_up_sync(kFull, slo, 1), ehi = __shfl_up_sync(kFull, shi, 1);
                T alo = __shfl_down_sync(kFull, ulo, 1), ahi = __shfl_down_sync(kFull, uhi, 1);
                if (lane == 0) {
                    elo = inf;
                    ehi = -inf;
                }
                if (lane == 31) {
                    alo = inf;
                    ahi = -inf;
                }
                ml0 = measure_step(ml0, k, (double)elo, (double)ehi, infl);
                ml1 = measure_step(ml1, k, (double)kmin(elo, x0), (double)kmax(ehi, x0), infl);
                mr0 = measure_step(mr0, k, (double)ulo, (double)uhi, infl);
                mr1 = measure_step(mr1, k, (double)kmin(alo, x1), (double)kmax(ahi, x1), infl);
            }
        }
        keep_least(b0 < c0, plane_cost(j0, m, ml0, mr0), d, j0, kb, db);
        if (P == 2) keep_least(c0 < c1, plane_cost(j1, m, ml1, mr1), d, j1, kb, db);
    }
    {
        /* the least (key, axis * kSmall + position) over the lanes, 32 bits at a time */
        const unsigned khi = (unsigned)(kb >> 32), klo = (unsigned)kb;
        const unsigned mhi = __reduce_min_sync(kFull, khi);
        if (mhi == 0xffffffffu) return false;
        const unsigned mlo = __reduce_min_sync(kFull, khi == mhi ? klo : 0xffffffffu);
        const int md =
            (int)__reduce_min_sync(kFull, khi == mhi && klo == mlo ? (unsigned)db : 0xffffffffu);
        *axis = md / kSmall;
        *nl = md % kSmall;
        *split = w.px[w.ord[*axis][a + *nl] * D + *axis];
    }
    return true;
}

/* Stable partition of list[a, e) by px[p * D + axis] < split (nl points go left); P entries
 * per lane (e - a <= 32 * P), all read before any is written. */
template <typename T, int D, int P>
__device__ __forceinline__ void warp_partition(const T *px, uint8_t *list, int a, int e, int nl,
                                               int axis, T split, int lane)
{
    const unsigned lt = (1u << lane) - 1u;
    const int j0 = a + lane, j1 = j0 + 32;
    const bool h0 = j0 < e, h1 = P == 2 && j1 < e;
    const uint8_t q0 = h0 ? list[j0] : 0, q1 = h1 ? list[j1] : 0;
    const bool f0 = h0 && px[q0 * D + axis] < split, f1 = h1 && px[q1 * D + axis] < split;
    const unsigned b0 = __ballot_sync(kFull, f0);
    const int l0 = __popc(b0 & lt);
    int l1 = 0;
    if (P == 2) l1 = __popc(b0) + __popc(__ballot_sync(kFull, f1) & lt);
    __syncwarp();
    if (h0) list[f0 ? a + l0 : a + nl + lane - l0] = q0;
    if (h1) list[f1 ? a + l1 : a + nl + 32 + lane - l1] = q1;
}

/* The plane of node [a, e) and, if there is one, the stable partitions of the tree order and
 * of the sorted lists (the list of the split axis is already in order: its first nl). */
template <typename T, int D, int P>
__device__ bool split_node(WarpWs<T, D> &w, int a, int e, T bv, int lane, int *axis, T *split,
                           int *nl)
{
    if (!warp_best<T, D, P>(w, a, e, bv, lane, axis, split, nl)) return false;
    warp_partition<T, D, P>(w.px, w.seq, a, e, *nl, *axis, *split, lane);
    for (int d = 0; d < D; d++)
        if (d != *axis) warp_partition<T, D, P>(w.px, w.ord[d], a, e, *nl, *axis, *split, lane);
    __syncwarp();
    return true;
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
    const T inf = (T)INFINITY;
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
    /* per axis, the rank of each point by (coordinate, local position): a lane's points p0 and
     * p1 = p0 + 32 against all, 16 bytes a load; every point of the first half is before p1.
     * Equal coordinates at smaller positions of the same half are the lanes below with an
     * equal value (the lanes past m are above every point). The points are finite, so the
     * +inf past m counts nowhere. */
    for (int d = 0; d < D; d++) {
        const int p0 = lane, p1 = lane + 32, half = m < 32 ? m : 32;
        const unsigned lt = (1u << lane) - 1u;
        const T v0 = p0 < m ? w.px[p0 * D + d] : inf, v1 = p1 < m ? w.px[p1 * D + d] : inf;
        constexpr int V = 16 / (int)sizeof(T);
        int r0, r1 = 0, n0 = 0, n1 = 0; /* n: minus the counts of the sweeps */
        w.col[p0] = v0;
        w.col[p1] = v1;
        __syncwarp();
        r0 = __popc(__match_any_sync(kFull, v0) & lt);
        if (m > 32) r1 = __popc(__match_any_sync(kFull, v1) & lt);
        for (int q = 0; q < half; q += V) {
            T c[V];
            load16(w.col + q, c);
#pragma unroll
            for (int t = 0; t < V; t += 2) {
                n0 += neg_lt(c[t], v0, false) + neg_lt(c[t + 1], v0, false);
                n1 += neg_lt(c[t], v1, true) + neg_lt(c[t + 1], v1, true);
            }
        }
        for (int q = 32; q < m; q += V) {
            T c[V];
            load16(w.col + q, c);
#pragma unroll
            for (int t = 0; t < V; t += 2) {
                n0 += neg_lt(c[t], v0, false) + neg_lt(c[t + 1], v0, false);
                n1 += neg_lt(c[t], v1, false) + neg_lt(c[t + 1], v1, false);
            }
        }
        r0 -= n0;
        r1 -= n1;
        if (p0 < m) w.ord[d][r0] = (uint8_t)p0;
        if (p1 < m) w.ord[d][r1] = (uint8_t)p1;
        __syncwarp();
    }
    if (lane == 0) w.stk[0] = (uint32_t)m << 16;
    sp = 1;
    __syncwarp();
    /* (a popped entry is overwritten only by a push of the same iteration, after the
     * partitions' __syncwarp) */
    while (sp > 0) {
        const uint32_t s = w.stk[--sp];
        const int id = (int)(s & 0xffu), a = (int)(s >> 8 & 0xffu), e = (int)(s >> 16 & 0xffu);
        const int lv = (int)(s >> 24);
        int axis = -1, nl = 0;
        T split = 0, bv = 0;
        bool cut;
        /* the node's box: lane k < D the first of its range sorted on axis k, lane D + k the
         * last */
        if (lane < cs) {
            const int k = lane < D ? lane : lane - D;
            bv = w.px[w.ord[k][lane < D ? a : e - 1] * D + k];
            vb[id * cs + lane] = (double)bv;
        }
        if (lv > maxl) maxl = lv;
        cut = e - a > leaf &&
              (e - a > 32 ? split_node<T, D, 2>(w, a, e, bv, lane, &axis, &split, &nl)
                          : split_node<T, D, 1>(w, a, e, bv, lane, &axis, &split, &nl));
        if (lane == 0) {
            BNode nd;
            nd.begin = B + (uint64_t)a;
            nd.end = B + (uint64_t)e;
            nd.left = cut ? (uint64_t)nv : 0;
            nd.right = cut ? (uint64_t)(nv + 1) : 0;
            nd.split = cut ? (double)split : 0.0;
            nd.axis = cut ? axis : -1;
            nd.kind = cut ? GROVE_KDTREE_COST : GROVE_KDTREE_LEAF;
            v[id] = nd;
            if (cut) {
                /* right first, so the left subtree is finished first, as on the CPU */
                const uint32_t up = (uint32_t)(lv + 1) << 24;
                w.stk[sp] = up | (uint32_t)e << 16 | (uint32_t)(a + nl) << 8 | (uint32_t)(nv + 1);
                w.stk[sp + 1] = up | (uint32_t)(a + nl) << 16 | (uint32_t)a << 8 | (uint32_t)nv;
            }
        }
        if (cut) {
            nv += 2;
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
