/*
 * kdtree_knn_warp.cuh - the body of the warp-packet kNN search (internal; included by
 * kdtree_knn_warp_cuda.cu, which supplies the kernel, and by host-side checks, which supply a
 * warp emulation).
 *
 * The 32 lanes of a warp hold 32 Morton-adjacent queries and walk the tree together, depth
 * first, with one warp-uniform stack. Why: with one thread per query (knn_fast) the walks of a
 * warp differ in shape and length, so only about a quarter of the lanes issue at any time and
 * every lane waits on its own chain of dependent loads. Neighbouring queries visit mostly the
 * same nodes, so the warp visits the union of their nodes once, with every lane active. The
 * union is larger than one query's walk (10^6 uniform 3-D points, k = 8: about 200 nodes and 400
 * leaf points per warp of 32 queries, against about 45 and 60 per query), so this pays where a
 * query's own work is large: on an H100 it beats knn_fast from k = 8 on (1.8x at k = 8, 11x at
 * k = 32 with the float filters below) but not at k = 1 (kdtree_knn_warp_cuda.cu chooses).
 *
 * At a node every lane computes a lower bound of the CPU's dist2_box of its query against the
 * node's tight box (in floats, below). The node is skipped only when that bound is strictly
 * greater than the k-th distance of every lane: a tie may still hold a smaller input position,
 * as in the CPU's search. A lane that did not need a node still sees its points and rejects them by the same
 * test as any other point, so what each lane keeps is the unique set of the smallest
 * (dist2, input position) pairs: the CPU's bytes, whatever the order of the walk. At an inner
 * node the warp goes first to the side of the split plane that most of the lanes needing the
 * node are on (only the speed depends on it) and pushes the other child. The stack holds one
 * pending child per level of the current path, at most the depth + 1 entries the caller
 * checks against STACK.
 *
 * Leaves: lane j loads point j of the leaf (coalesced) and every lane takes every point in turn
 * by shuffles. The warp is issue-bound, so the per-lane code avoids branches that diverge (box
 * distances by selects, insertion by a select network).
 *
 * The includer defines, before including this file:
 *   KDW_FN             function qualifiers (__device__ __forceinline__, or inline on the host)
 *   kdw_ldg(p)         a read-only load
 *   kdw_ballot(pred)   __ballot_sync over the full warp
 *   kdw_shfl(v, src)   __shfl_sync over the full warp (float, double, uint32_t)
 *   kdw_popc(x)        the number of set bits of an unsigned
 *   kdw_as_double(w)   the double whose bits are the 64-bit word w
 *   kdw_sub/mul/add    correctly rounded double arithmetic, never fused
 *   kdw_fsub_rz(a, b)  float a - b, kdw_fmul_rz(a, b) float a * b, kdw_fma_rz(a, b, c) float
 *                      a * b + c rounded once: all rounded toward zero
 *   kdw_f2f_rd(x) / kdw_f2f_ru(x) / kdw_f2f_rn(x)  double to float rounded down / up / nearest
 *   kdw_as_float(w) / kdw_float_bits(f)  the float of 32 bits and back
 *   kdw_ld4(p, w)      w[0..3] = p[0..3] (p 16-byte aligned, read-only)
 * and every ballot and shuffle happens in warp-uniform control flow.
 *
 * Float filters. The search reads a query-side copy of the nodes (build_rec, 32 bytes a node:
 * the box in floats rounded outward and the links), and tests boxes and, for float trees, points
 * first in float arithmetic rounded toward zero, which gives a value never above the CPU's
 * double result; only a point that could still enter some lane's list gets the exact double
 * distance. Why: the warp is issue-bound, and a double operation costs two issue slots of an
 * H100 scheduler, a float-to-double conversion eight, a float operation one.
 *
 * Proof that the float value L never exceeds the CPU's value S (so `L > t` with t >= the k-th
 * distance implies `S > k-th`, and skipping loses nothing, ties included). Every float is a
 * double, and rounding to nearest double is monotone and leaves doubles unchanged, so
 *   (*) a double y <= x (real) gives y <= fl64(x).
 * Point p (float tree), query q, both floats on the lane's float path: d = RZ(p - q) has
 * |d| <= |p - q|, so by (*) |d| <= |fl64(p - q)| = |dx| (the CPU's difference). A product of two
 * floats is exact in double, so d*d <= dx*dx gives d*d <= fl64(dx*dx) = a (*) again. Then
 * L0 = RZ(d0*d0) <= a0, L1 = RZ(d1*d1 + L0) <= a1 + a0 (both terms >= 0, so RZ rounds down),
 * and L1 being a double, L1 <= fl64(a0 + a1) = S1 by (*); L2 = RZ(d2*d2 + L1) <= a2 + S1, so
 * L2 <= fl64(S1 + a2) = S. RZ never rounds a finite value to infinity, and float underflow only
 * lowers L, so this holds for every finite input. Boxes: lo and hi are rounded outward to floats
 * (lo' <= lo, hi' >= hi) and the query's coordinate lies in [ql, qh] (floats rounded down and
 * up). g = max(RZ(lo' - qh), RZ(ql - hi'), 0) is a float <= the CPU's |dx| (lo - q when q < lo,
 * q - hi when q > hi, else 0) as above, and the same sum gives L <= the CPU's dist2_box. An
 * empty box (lo = +inf, hi = -inf) gives L = +inf, as the CPU's INFINITY. The threshold t is
 * the k-th distance rounded up to float.
 */
#ifndef GROVE_KDTREE_KNN_WARP_CUH
#define GROVE_KDTREE_KNN_WARP_CUH

#include <math.h>
#include <stdint.h>

#include <type_traits>

namespace kdw
{

typedef unsigned long long u64;

constexpr int STACK = 64;     /* warp stack entries: two registers per lane */
constexpr u64 MAX_LEAF = 64;  /* GROVE_KDTREE_MAX_LEAF: larger leaves hold equal points only */
constexpr uint32_t TAG_SHIFT = 30; /* record word 6: axis (inner node) or 3 (leaf) above this */
constexpr uint32_t LOW_MASK = (1u << TAG_SHIFT) - 1;
constexpr uint32_t LEAF_TAG = 3;
constexpr u64 REC_LIMIT = (u64)1 << TAG_SHIFT; /* points and nodes must stay below */

/* The arguments of one launch (device pointers); see grove__kdw_launch. */
struct Args {
    const uint32_t *rec; /* build_rec's records, 8 words a node */
    const u64 *nodes; /* grove_kdtree_node as 5 words: begin, end, right, split, axis|kind */
    const double *bounds;
    const void *pts;
    const u64 *index;
    const double *qs;    /* the batch's queries as doubles, row order */
    const uint32_t *ord; /* visiting position -> batch row */
    uint32_t m;          /* queries in the batch */
    int cap;             /* min(k, n): 1..K */
    int k;
    u64 *oi;
    double *od; /* may be NULL */
};

template <bool F64> KDW_FN double coord(const void *pts, u64 at)
{
    if constexpr (F64)
        return kdw_ldg(static_cast<const double *>(pts) + at);
    else
        return (double)kdw_ldg(static_cast<const float *>(pts) + at);
}

template <int D> KDW_FN bool box_is_point(const double *bounds, u64 node)
{
    const double *bx = bounds + node * 2 * (u64)D;
    bool same = true;
#pragma unroll
    for (int d = 0; d < D; d++) same = same && kdw_ldg(bx + d) == kdw_ldg(bx + D + d);
    return same;
}

/* The CPU's dist2_point from the point's coordinates p (as doubles). The CPU's sum starts from 0:
 * 0 + a == a for every a >= +0 (a square), so the first term is taken as it is. */
template <int D> KDW_FN double dist2(const double (&p)[D], const double (&q)[D])
{
    double s = 0.0;
#pragma unroll
    for (int d = 0; d < D; d++) {
        const double dx = kdw_sub(p[d], q[d]);
        s = d == 0 ? kdw_mul(dx, dx) : kdw_add(s, kdw_mul(dx, dx));
    }
    return s;
}

KDW_FN bool better(double da, uint32_t ia, double db, uint32_t ib)
{
    return da < db || (da == db && ia < ib);
}

/* Inserts (d, id) in place of the last entry of the sorted list (which it beats). */
#ifndef KDW_ON_INSERT
#define KDW_ON_INSERT()
#endif

/* Inserts (d, id), which beats the last entry, into the sorted list. Branch-free: every slot
 * is compared with the new pair (independent comparisons), then each slot takes its left
 * neighbour, the new pair or itself. A loop that stops at the new pair's place makes the
 * compiler copy the whole list at every exit, which cost more than this. */
template <int K> KDW_FN void insert(double (&bd)[K], uint32_t (&bi)[K], double d, uint32_t id)
{
    KDW_ON_INSERT();
    bool c[K]; /* c[j]: the new pair ranks before slot j */
#pragma unroll
    for (int j = 0; j < K - 1; j++) c[j] = better(d, id, bd[j], bi[j]);
    c[K - 1] = true;
#pragma unroll
    for (int j = K - 1; j > 0; j--) {
        bd[j] = c[j - 1] ? bd[j - 1] : c[j] ? d : bd[j];
        bi[j] = c[j - 1] ? bi[j - 1] : c[j] ? id : bi[j];
    }
    bd[0] = c[0] ? d : bd[0];
    bi[0] = c[0] ? id : bi[0];
}

/* The query-side record of node id (8 words): words 0..2 the box's lo rounded down to floats,
 * 3..5 its hi rounded up (axes >= D: 0), so the float box contains the exact one; an inner
 * node: word 6 = right child | axis << TAG_SHIFT, word 7 = the split as the nearest float (it only
 * picks which child comes first); a leaf: word 6 = begin | LEAF_TAG << TAG_SHIFT, word 7 = end.
 * Needs fewer than REC_LIMIT points and nodes (the caller checks). */
template <int D> KDW_FN void build_rec(const u64 *nodes, const double *bounds, u64 id, uint32_t *w)
{
    const u64 *nd = nodes + 5 * id;
    const double *bx = bounds + id * 2 * (u64)D;
#pragma unroll
    for (int d = 0; d < 3; d++) {
        w[d] = d < D ? kdw_float_bits(kdw_f2f_rd(bx[d])) : 0u;
        w[3 + d] = d < D ? kdw_float_bits(kdw_f2f_ru(bx[D + d])) : 0u;
    }
    const u64 right = nd[2];
    if (right == 0) {
        w[6] = (uint32_t)nd[0] | LEAF_TAG << TAG_SHIFT;
        w[7] = (uint32_t)nd[1];
    } else {
        w[6] = (uint32_t)right | ((uint32_t)nd[4] & 3u) << TAG_SHIFT;
        w[7] = kdw_float_bits(kdw_f2f_rn(kdw_as_double(nd[3])));
    }
}

/* A lower bound of the CPU's dist2_box (see the proof at the top): the float box in w, the
 * query's coordinates between ql and qh. */
template <int D>
KDW_FN float box_lb(const uint32_t (&w)[8], const float (&ql)[D], const float (&qh)[D])
{
    float s = 0.0f;
#pragma unroll
    for (int d = 0; d < D; d++) {
        const float lo = kdw_as_float(w[d]), hi = kdw_as_float(w[3 + d]);
        const float g = fmaxf(fmaxf(kdw_fsub_rz(lo, qh[d]), kdw_fsub_rz(ql[d], hi)), 0.0f);
        s = d == 0 ? kdw_fmul_rz(g, g) : kdw_fma_rz(g, g, s);
    }
    return s;
}

/* A lower bound of the CPU's dist2_point for a float point p and a float query q. */
template <int D> KDW_FN float point_lb(const float (&p)[D], const float (&q)[D])
{
    float s = 0.0f;
#pragma unroll
    for (int d = 0; d < D; d++) {
        const float g = kdw_fsub_rz(p[d], q[d]);
        s = d == 0 ? kdw_fmul_rz(g, g) : kdw_fma_rz(g, g, s);
    }
    return s;
}

/* The search of the lane `lane` of a warp whose lane 0 has visiting position pos0. The list is
 * knn_fast's: sorted ascending and right-aligned, slots [0, K - cap) holding sentinels that rank
 * before every point, so that the cap-th best is always slot K - 1; until the list is full its
 * last entry is (INFINITY, UINT32_MAX), which every point beats. A lane without a query (past the
 * batch's end) has -INFINITY there: it needs no node and takes no point. thr is that last
 * distance rounded up to float (the filters' threshold). */
template <int K, int D, bool F64>
KDW_FN void knn_warp_body(const Args &a, uint32_t pos0, int lane)
{
    const uint32_t pos = pos0 + (uint32_t)lane;
    const bool valid = pos < a.m;
    const uint32_t row = valid ? kdw_ldg(a.ord + pos) : 0u;
    double q[D];
#pragma unroll
    for (int d = 0; d < D; d++) q[d] = valid ? kdw_ldg(a.qs + (u64)row * D + d) : 0.0;
    /* ql <= q <= qh in floats; fq: the query is a float (ql == qh == q), the point filter's
     * condition (other lanes take every point to the exact test) */
    float ql[D], qh[D];
    bool fq = true;
#pragma unroll
    for (int d = 0; d < D; d++) {
        ql[d] = kdw_f2f_rd(q[d]);
        qh[d] = kdw_f2f_ru(q[d]);
        fq = fq && ql[d] == qh[d];
    }
    double bd[K];
    uint32_t bi[K];
#pragma unroll
    for (int j = 0; j < K; j++) {
        const bool pad = j < K - a.cap;
        bd[j] = pad ? -INFINITY : INFINITY;
        bi[j] = pad ? 0u : UINT32_MAX;
    }
    if (!valid) bd[K - 1] = -INFINITY;
    float thr = kdw_f2f_ru(bd[K - 1]);

    /* stack entry j lives in lane j % 32, register j / 32 (s0 or s1) */
    uint32_t s0 = 0, s1 = 0;
    int sp = 0;
    uint32_t id = 0; /* the node at hand; the root first */
    bool have = true;
    for (;;) {
        if (!have) {
            if (sp == 0) break;
            sp--;
            id = kdw_shfl(sp < 32 ? s0 : s1, sp & 31);
        }
        have = false;
        uint32_t w[8];
        kdw_ld4(a.rec + 8 * (u64)id, w);
        kdw_ld4(a.rec + 8 * (u64)id + 4, w + 4);
        const bool need = !(box_lb<D>(w, ql, qh) > thr);
        const unsigned want = kdw_ballot(need);
        if (want == 0) continue;
        const uint32_t tag = w[6] >> TAG_SHIFT;
        if (tag != LEAF_TAG) {
            const float split = kdw_as_float(w[7]);
            float qa = ql[0];
#pragma unroll
            for (int d = 1; d < D; d++)
                if (tag == (uint32_t)d) qa = ql[d];
            const unsigned left = kdw_ballot(need && qa < split);
            const bool go_left = 2 * kdw_popc(left) >= kdw_popc(want);
            const uint32_t right = w[6] & LOW_MASK;
            const uint32_t near = go_left ? id + 1 : right;
            const uint32_t far = go_left ? right : id + 1;
            if (lane == (sp & 31)) {
                if (sp < 32)
                    s0 = far;
                else
                    s1 = far;
            }
            sp++;
            id = near;
            have = true;
            continue;
        }
        const uint32_t b = w[6] & LOW_MASK, e = w[7];
        if (e - b > MAX_LEAF && box_is_point<D>(a.bounds, id)) {
            /* Equal points in ascending input order: a lane that rejects one rejects all later
             * ones, so the warp stops once every lane has (at most K + 1 points each). */
            double p[D];
#pragma unroll
            for (int d = 0; d < D; d++) p[d] = coord<F64>(a.pts, (u64)b * D + d);
            const double dd = dist2<D>(p, q);
            bool act = need;
            for (uint32_t i = b; i < e; i++) {
                if (kdw_ballot(act) == 0) break;
                const uint32_t ix = (uint32_t)kdw_ldg(a.index + i);
                if (act) {
                    if (!(dd > bd[K - 1]) && better(dd, ix, bd[K - 1], bi[K - 1])) {
                        insert<K>(bd, bi, dd, ix);
                        thr = kdw_f2f_ru(bd[K - 1]);
                    } else {
                        act = false;
                    }
                }
            }
            continue;
        }
        for (uint32_t c = b; c < e; c += 32) {
            const uint32_t i = c + (uint32_t)lane;
            const int cnt = e - c < 32 ? (int)(e - c) : 32;
            typedef typename std::conditional<F64, double, float>::type T;
            T px[D];
            uint32_t pix = 0;
#pragma unroll
            for (int d = 0; d < D; d++) px[d] = T(0);
            if (i < e) {
#pragma unroll
                for (int d = 0; d < D; d++)
                    px[d] = kdw_ldg(static_cast<const T *>(a.pts) + (u64)i * D + d);
                pix = (uint32_t)kdw_ldg(a.index + i);
            }
            for (int j = 0; j < cnt; j++) {
                T pj[D];
#pragma unroll
                for (int d = 0; d < D; d++) pj[d] = kdw_shfl(px[d], j);
                if constexpr (!F64) {
                    /* the float filter: skip the point unless some lane might take it */
                    const bool pass = !(fq && point_lb<D>(pj, ql) > thr);
                    if (kdw_ballot(pass) == 0) continue;
                }
                double p[D];
#pragma unroll
                for (int d = 0; d < D; d++) p[d] = (double)pj[d];
                const uint32_t ix = kdw_shfl(pix, j);
                const double dd = dist2<D>(p, q);
                if (better(dd, ix, bd[K - 1], bi[K - 1])) {
                    insert<K>(bd, bi, dd, ix);
                    thr = kdw_f2f_ru(bd[K - 1]);
                }
            }
        }
    }
    if (!valid) return;
    u64 *ri = a.oi + (u64)row * (u64)a.k;
    double *rd = a.od ? a.od + (u64)row * (u64)a.k : NULL;
#pragma unroll
    for (int j = 0; j < K; j++)
        if (j >= K - a.cap) {
            ri[j - (K - a.cap)] = bi[j];
            if (rd) rd[j - (K - a.cap)] = bd[j];
        }
    for (int j = a.cap; j < a.k; j++) {
        ri[j] = ~0ull;
        if (rd) rd[j] = INFINITY;
    }
}

} // namespace kdw

#endif /* GROVE_KDTREE_KNN_WARP_CUH */
