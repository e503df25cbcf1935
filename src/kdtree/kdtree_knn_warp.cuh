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
 * query's own work is large: on an H100 it beats knn_fast from k = 8 on (1.4x at k = 8, 10x at
 * k = 32) but not at k = 1 (kdtree_knn_warp_cuda.cu chooses).
 *
 * At a node every lane computes the exact lower bound of its query against the node's tight box
 * (the CPU's dist2_box). The node is skipped only when that bound is strictly greater than the
 * k-th distance of every lane: a tie may still hold a smaller input position, as in the CPU's
 * search. A lane that did not need a node still sees its points and rejects them by the same
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
 * and every ballot and shuffle happens in warp-uniform control flow.
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

/* The arguments of one launch (device pointers); see grove__kdw_launch. */
struct Args {
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

/* The CPU's dist2_box for D = 2, 3: INFINITY for an empty box. Both differences are formed and
 * one is selected (the value is the CPU's; branches here cost more than the arithmetic). The
 * CPU's sum starts from 0: 0 + a == a for every a >= +0 (a square), so the first term is taken
 * as it is. */
template <int D> KDW_FN double box_near2(const double *bounds, u64 node, const double (&q)[D])
{
    const double *bx = bounds + node * 2 * (u64)D;
    double lo[D], hi[D];
#pragma unroll
    for (int d = 0; d < D; d++) {
        lo[d] = kdw_ldg(bx + d);
        hi[d] = kdw_ldg(bx + D + d);
    }
    double s = 0.0;
#pragma unroll
    for (int d = 0; d < D; d++) {
        const double below = kdw_sub(lo[d], q[d]), above = kdw_sub(q[d], hi[d]);
        const double dx = q[d] < lo[d] ? below : q[d] > hi[d] ? above : 0.0;
        s = d == 0 ? kdw_mul(dx, dx) : kdw_add(s, kdw_mul(dx, dx));
    }
    return lo[0] > hi[0] ? INFINITY : s;
}

template <int D> KDW_FN bool box_is_point(const double *bounds, u64 node)
{
    const double *bx = bounds + node * 2 * (u64)D;
    bool same = true;
#pragma unroll
    for (int d = 0; d < D; d++) same = same && kdw_ldg(bx + d) == kdw_ldg(bx + D + d);
    return same;
}

/* The CPU's dist2_point from the point's coordinates p (as doubles). */
template <int D> KDW_FN double dist2(const double (&p)[D], const double (&q)[D])
{
    double s = 0.0;
#pragma unroll
    for (int d = 0; d < D; d++) {
        const double dx = kdw_sub(p[d], q[d]);
        s = d == 0 ? kdw_mul(dx, dx) : kdw_add(s, kdw_mul(dx, dx)); /* 0 + a == a, as above */
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

/* The search of the lane `lane` of a warp whose lane 0 has visiting position pos0. The list is
 * knn_fast's: sorted ascending and right-aligned, slots [0, K - cap) holding sentinels that rank
 * before every point, so that the cap-th best is always slot K - 1; until the list is full its
 * last entry is (INFINITY, UINT32_MAX), which every point beats. A lane without a query (past the
 * batch's end) has -INFINITY there: it needs no node and takes no point. */
template <int K, int D, bool F64>
KDW_FN void knn_warp_body(const Args &a, uint32_t pos0, int lane)
{
    const uint32_t pos = pos0 + (uint32_t)lane;
    const bool valid = pos < a.m;
    const uint32_t row = valid ? kdw_ldg(a.ord + pos) : 0u;
    double q[D];
#pragma unroll
    for (int d = 0; d < D; d++) q[d] = valid ? kdw_ldg(a.qs + (u64)row * D + d) : 0.0;
    double bd[K];
    uint32_t bi[K];
#pragma unroll
    for (int j = 0; j < K; j++) {
        const bool pad = j < K - a.cap;
        bd[j] = pad ? -INFINITY : INFINITY;
        bi[j] = pad ? 0u : UINT32_MAX;
    }
    if (!valid) bd[K - 1] = -INFINITY;

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
        /* the whole node record with the box: one round of independent loads per node */
        const u64 *nd = a.nodes + 5 * (u64)id;
        const u64 b = kdw_ldg(nd), e = kdw_ldg(nd + 1), right = kdw_ldg(nd + 2);
        const u64 w3 = kdw_ldg(nd + 3), w4 = kdw_ldg(nd + 4);
        const double lb = box_near2<D>(a.bounds, id, q);
        const bool need = !(lb > bd[K - 1]);
        const unsigned want = kdw_ballot(need);
        if (want == 0) continue;
        if (right != 0) {
            const double split = kdw_as_double(w3);
            const int axis = (int)(int32_t)(uint32_t)w4; /* the low word: axis */
            double qa = q[0];
#pragma unroll
            for (int d = 1; d < D; d++)
                if (axis == d) qa = q[d];
            const unsigned left = kdw_ballot(need && qa < split);
            const bool go_left = 2 * kdw_popc(left) >= kdw_popc(want);
            const uint32_t near = go_left ? id + 1 : (uint32_t)right;
            const uint32_t far = go_left ? (uint32_t)right : id + 1;
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
        if (e - b > MAX_LEAF && box_is_point<D>(a.bounds, id)) {
            /* Equal points in ascending input order: a lane that rejects one rejects all later
             * ones, so the warp stops once every lane has (at most K + 1 points each). */
            double p[D];
#pragma unroll
            for (int d = 0; d < D; d++) p[d] = coord<F64>(a.pts, b * D + d);
            const double dd = dist2<D>(p, q);
            bool act = need;
            for (u64 i = b; i < e; i++) {
                if (kdw_ballot(act) == 0) break;
                const uint32_t ix = (uint32_t)kdw_ldg(a.index + i);
                if (act) {
                    if (!(dd > bd[K - 1]) && better(dd, ix, bd[K - 1], bi[K - 1]))
                        insert<K>(bd, bi, dd, ix);
                    else
                        act = false;
                }
            }
            continue;
        }
        for (u64 c = b; c < e; c += 32) {
            const u64 i = c + (u64)lane;
            const int cnt = e - c < 32 ? (int)(e - c) : 32;
            typedef typename std::conditional<F64, double, float>::type T;
            T px[D];
            uint32_t pix = 0;
#pragma unroll
            for (int d = 0; d < D; d++) px[d] = T(0);
            if (i < e) {
#pragma unroll
                for (int d = 0; d < D; d++)
                    px[d] = kdw_ldg(static_cast<const T *>(a.pts) + i * D + d);
                pix = (uint32_t)kdw_ldg(a.index + i);
            }
            for (int j = 0; j < cnt; j++) {
                double p[D];
#pragma unroll
                for (int d = 0; d < D; d++) p[d] = (double)kdw_shfl(px[d], j);
                const uint32_t ix = kdw_shfl(pix, j);
                const double dd = dist2<D>(p, q);
                if (better(dd, ix, bd[K - 1], bi[K - 1])) insert<K>(bd, bi, dd, ix);
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
