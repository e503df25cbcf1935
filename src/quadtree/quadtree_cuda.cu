/*
 * quadtree_cuda.cu - the CUDA morton build of the quadtree (its steps 2a and 2b are in
 * quadtree_sorted_cuda.cu, the check of the input points in quadtree_check_cuda.cu).
 *
 * The morton build gives the tree of the recursive build without recursion (quadtree_cpu.c has
 * the same method on the host, and quadtree.h the definition of the tree):
 *
 *   1. keys     each point's quadrant path, 2 bits per level, level 1 most significant
 *               (32-bit keys up to depth 16, 64-bit keys beyond), exactly as a descent from the
 *               root box with the recursive build's float arithmetic (centers as
 *               grove__qt_mid, no FMA) gives it; for the first 12 levels it is looked up in a
 *               table of that descent's centers instead of descending (see keys_table_kernel);
 *   2. sort     one stable radix sort of (path, input position): every node's points are
 *               then a contiguous run, in the order of the nodes of each level. Each 8 key bits
 *               cost a pass, so when a sample of the points says that most of them sit in
 *               leaves at or above some level S (a multiple of 4 levels below max_depth), the
 *               keys hold only the first S levels and the sort takes fewer passes; the few nodes
 *               of level S that split get their deeper digits afterwards (2b), their runs sorted
 *               in shared memory or by a segmented sort. The leaves of level S then need no
 *               re-sort (step 4): a stable sort by their path left them in input order;
 *   3. levels   level by level from the root: mark the nodes to split (more than min_points
 *               points, above max_depth), exclusive-scan the marks to number the split nodes
 *               (the children of the r-th split node of a level are the 4 nodes at
 *               level_end + 4r: breadth-first order), and find each split node's 4 child ranges
 *               by binary search for the boundaries of the next digit inside its run. The host
 *               reads the number of split nodes once per level to place the next one, except
 *               for the first levels of at most 1024 nodes, which one block does in one launch;
 *   4. leaves   inside a leaf the points must keep input order, but the sort ordered them by
 *               the digits below the leaf. That only matters for leaves above max_depth, which
 *               hold at most min_points points: the level kernel that finds such a leaf sorts
 *               its input positions in shared memory (up to 32 points); larger ones, possible
 *               only when min_points > 32, get a segmented sort (CUB DeviceSegmentedSort) at
 *               the end;
 *   5. gather   the points are copied into tree order.
 */
#include <math.h>
#include <stdlib.h>

#include <cub/device/device_segmented_sort.cuh>
#include <thrust/iterator/transform_iterator.h>

#include "../prim/prim_cuda.h"
#include "quadtree_morton_cuda.cuh"

namespace grove_qt
{
namespace
{

/* ---- 1. keys ---- */

/* The keys pass does not descend level by level. A node's split abscissa depends only on the
 * x-digits above it (and its ordinate only on the y-digits), so the first T levels' split values
 * of each axis form a complete binary search tree of 2^T - 1 values; listed in order they are
 * non-decreasing (a center lies within its box), and the number of them <= x is exactly the
 * x-path of the descent (x >= center goes right). keys_table_kernel lists them once, with the
 * descent's arithmetic: bound[0] and bound[2^T] are the root's edges and bound[j] the center of
 * the node at in-order position j, so the level-T node of path g spans bound[g]..bound[g + 1].
 * Each point then needs one guessed position (the centers are nearly evenly spaced), a check
 * against two table entries, and a binary search only when the guess was wrong; the levels
 * below T continue with deep_path from the level-T box. */
const int kTableLevels = 12;
const int kTableSize = (1 << kTableLevels) + 1;

__global__ void keys_table_kernel(int levels, float r0, float r1, float r2, float r3,
                                  float *__restrict__ bound)
{
    const int size = 1 << levels;
    for (int e = threadIdx.x; e < 2 * (size + 1); e += blockDim.x) {
        const int axis = e > size, j = e - axis * (size + 1);
        float lo = axis ? r1 : r0, hi = axis ? r3 : r2, v = j == 0 ? lo : hi;
        /* descend towards in-order position j; the node at position p has children at p -/+ h */
        for (int p = size / 2, h = size / 4; j > 0 && j < size; h /= 2) {
            const float c = qt_mid(lo, hi);
            if (j == p) {
                v = c;
                break;
            }
            if (j > p) {
                lo = c;
                p += h;
            } else {
                hi = c;
                p -= h;
            }
        }
        bound[e] = v;
    }
}

/* Path of v among the 2^levels nodes of level `levels` (see above): the number of centers
 * bound[1..size-1] that are <= v. */
__device__ __forceinline__ uint32_t table_path(const float *bound, int size, float scale, float v)
{
    float t = fminf(fmaxf((v - bound[0]) * scale, 0.0f), (float)(size - 1));
    int g = (int)t;
    if ((g > 0 && v < bound[g]) || (g < size - 1 && v >= bound[g + 1])) {
        g = 0;
        for (int h = size / 2; h > 0; h /= 2)
            if (bound[g + h] <= v) g += h;
    }
    return (uint32_t)g;
}

/* The low 12 bits of v spread to the even bits. */
__device__ __forceinline__ uint32_t spread12(uint32_t v)
{
    v = (v | (v << 8)) & 0x00ff00ffu;
    v = (v | (v << 4)) & 0x0f0f0f0fu;
    v = (v | (v << 2)) & 0x33333333u;
    return (v | (v << 1)) & 0x55555555u;
}

template <typename K>
__device__ __forceinline__ K table_key(const float *bx, const float *by, int tl, float sx,
                                       float sy, int deep, float x, float y)
{
    const int size = 1 << tl;
    const uint32_t gx = table_path(bx, size, sx, x), gy = table_path(by, size, sy, y);
    /* the high bit of a digit is y < center: the complement of the y-path */
    K key = (K)(spread12(gx) | (spread12(~gy & (uint32_t)(size - 1)) << 1));
    if (deep > 0)
        key = (key << (2 * deep)) |
              deep_path<K>(x, y, bx[gx], by[gy], bx[gx + 1], by[gy + 1], deep);
    return key;
}

/* keys[i] = the first `levels` digits of point i's path, shifted left by `shift`; idx[i] = i.
 * A grid of at most a few blocks per SM, each staging the tables in shared memory once. kPairs:
 * 2-D points in 16-byte aligned memory, two points per thread from one 16-byte load. */
template <typename K, bool kPairs>
__global__ void __launch_bounds__(kBlock)
    keys_kernel(const float *__restrict__ xyz, int dims, size_t n, int levels, int shift,
                const float *__restrict__ bound, K *__restrict__ keys, uint32_t *__restrict__ idx)
{
    __shared__ float bx[kTableSize], by[kTableSize];
    const int tl = levels < kTableLevels ? levels : kTableLevels, size = 1 << tl;
    const int deep = levels - tl;
    for (int e = threadIdx.x; e <= size; e += blockDim.x) {
        bx[e] = bound[e];
        by[e] = bound[size + 1 + e];
    }
    __syncthreads();
    /* any finite positive scale gives a usable guess; a degenerate one only costs searches */
    const float sx = (float)size / (bx[size] - bx[0]), sy = (float)size / (by[size] - by[0]);
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    if (kPairs) {
        const float4 *xy = reinterpret_cast<const float4 *>(xyz);
        for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < n / 2; p += stride) {
            const float4 v = xy[p];
            const K ka = table_key<K>(bx, by, tl, sx, sy, deep, v.x, v.y) << shift;
            const K kb = table_key<K>(bx, by, tl, sx, sy, deep, v.z, v.w) << shift;
            if (sizeof(K) == 4)
                reinterpret_cast<uint2 *>(keys)[p] = make_uint2((uint32_t)ka, (uint32_t)kb);
            else
                reinterpret_cast<ulonglong2 *>(keys)[p] =
                    make_ulonglong2((unsigned long long)ka, (unsigned long long)kb);
            reinterpret_cast<uint2 *>(idx)[p] =
                make_uint2((uint32_t)(2 * p), (uint32_t)(2 * p + 1));
        }
        if (blockIdx.x == 0 && threadIdx.x == 0 && (n & 1)) {
            keys[n - 1] =
                table_key<K>(bx, by, tl, sx, sy, deep, xyz[2 * (n - 1)], xyz[2 * (n - 1) + 1])
                << shift;
            idx[n - 1] = (uint32_t)(n - 1);
        }
    } else {
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) {
            keys[i] = table_key<K>(bx, by, tl, sx, sy, deep, xyz[i * dims], xyz[i * dims + 1])
                      << shift;
            idx[i] = (uint32_t)i;
        }
    }
}

/* ---- 3. levels ---- */

/* Largest leaf whose input positions mark_kernel re-sorts itself (step 4). */
const uint32_t kSmallLeaf = 32;

/* The per-level kernels give each block kLevelBlock consecutive nodes of the level. Their
 * points are one contiguous run of the sorted order (a level's nodes are in key order), which
 * the block stages through shared memory with coalesced loads when it is at most kStageBytes
 * long: a thread reading its own node's run would touch a different cache line in every lane.
 * Longer runs (the few big nodes near the root) are read from global memory. */
const int kLevelBlock = 128;
const int kStageBytes = 24 * 1024;

__device__ void insertion_sort(uint32_t *v, uint32_t size)
{
    for (uint32_t j = 1; j < size; j++) {
        uint32_t x = v[j], k = j;
        while (k > 0 && v[k - 1] > x) {
            v[k] = v[k - 1];
            k--;
        }
        v[k] = x;
    }
}

/* Marks the level's nodes to split; a leaf above max_depth with at most kSmallLeaf points gets
 * its input positions sorted here, in the block's staged run. Only the sorted leaves' entries
 * are written back: on a level whose nodes nearly all split (a few leaves in every block)
 * writing the whole run back would double the kernel's traffic. Reading them from global memory
 * thread by thread instead of staging was slower. */
__global__ void __launch_bounds__(kLevelBlock)
    mark_kernel(const Node *__restrict__ lvl, uint32_t m, int max_depth, int min_points,
                int sorted_level, uint32_t *__restrict__ flags, uint32_t *__restrict__ idx)
{
    const uint32_t cap = kStageBytes / sizeof(uint32_t);
    __shared__ uint32_t sh[kStageBytes / sizeof(uint32_t)];
    __shared__ uint32_t span[2], written[kStageBytes / sizeof(uint32_t) / 32];
    uint32_t i0 = blockIdx.x * kLevelBlock, i = i0 + threadIdx.x;
    uint32_t last = min(m, i0 + kLevelBlock) - 1;
    Node nd;
    bool fix = false;
    if (i < m) {
        uint32_t size;
        bool split;
        nd = lvl[i];
        size = nd.end - nd.begin;
        split = nd.level < max_depth && (int64_t)size > (int64_t)min_points;
        flags[i] = split;
        fix = !split && nd.level < max_depth && nd.level != sorted_level && size > 1 &&
              size <= kSmallLeaf;
        if (i == i0) span[0] = nd.begin;
        if (i == last) span[1] = nd.end;
    }
    if (!__syncthreads_or(fix)) return;
    uint32_t sb = span[0], len = span[1] - span[0];
    if (len <= cap) {
        for (uint32_t j = threadIdx.x; j < len; j += kLevelBlock) sh[j] = idx[sb + j];
        for (uint32_t j = threadIdx.x; j < (len + 31) / 32; j += kLevelBlock) written[j] = 0;
        __syncthreads();
        if (fix) {
            const uint32_t a = nd.begin - sb, b = nd.end - sb;
            insertion_sort(sh + a, b - a);
            for (uint32_t j = a; j < b; j++) atomicOr(&written[j / 32], 1u << (j % 32));
        }
        __syncthreads();
        for (uint32_t j = threadIdx.x; j < len; j += kLevelBlock)
            if ((written[j / 32] >> (j % 32)) & 1u) idx[sb + j] = sh[j];
    } else if (fix) {
        uint32_t v[kSmallLeaf], size = nd.end - nd.begin;
        for (uint32_t j = 0; j < size; j++) v[j] = idx[nd.begin + j];
        insertion_sort(v, size);
        for (uint32_t j = 0; j < size; j++) idx[nd.begin + j] = v[j];
    }
}

/* Levels of at most kSmallLevel nodes (the first few) are marked and scanned by one block in
 * one launch: the per-level cost there is launch latency, not work. rank[i] is the inclusive
 * count of split nodes (as the scan of the larger levels), so rank[m - 1] is the level's total.
 * Leaves to sort are sorted by their thread: a level this small has few. */
const int kSmallLevel = 1024;

/* The inclusive count of `split` over the threads of a kSmallLevel block up to this one; after
 * it, warp_sum[kSmallLevel / 32 - 1] holds the block's total. */
__device__ __forceinline__ uint32_t block_rank(bool split, uint32_t *warp_sum)
{
    const uint32_t lane = threadIdx.x & 31u, w = threadIdx.x >> 5;
    /* (2u << 31) - 1 wraps to all ones: lane 31 counts its whole warp */
    uint32_t incl = __popc(__ballot_sync(~0u, split) & ((2u << lane) - 1u));
    if (lane == 31) warp_sum[w] = incl;
    __syncthreads();
    if (w == 0) {
        uint32_t t = warp_sum[lane];
        for (int d = 1; d < 32; d *= 2) {
            uint32_t u = __shfl_up_sync(~0u, t, d);
            if (lane >= (uint32_t)d) t += u;
        }
        warp_sum[lane] = t;
    }
    __syncthreads();
    return w > 0 ? incl + warp_sum[w - 1] : incl;
}

__global__ void __launch_bounds__(kSmallLevel)
    mark_scan_small_kernel(const Node *__restrict__ lvl, uint32_t m, int max_depth, int min_points,
                           int sorted_level, uint32_t *__restrict__ flags,
                           uint32_t *__restrict__ rank, uint32_t *__restrict__ idx)
{
    __shared__ uint32_t warp_sum[kSmallLevel / 32];
    uint32_t i = threadIdx.x, incl;
    bool split = false;
    if (i < m) {
        Node nd = lvl[i];
        uint32_t size = nd.end - nd.begin;
        split = nd.level < max_depth && (int64_t)size > (int64_t)min_points;
        flags[i] = split;
        if (!split && nd.level < max_depth && nd.level != sorted_level && size > 1 &&
            size <= kSmallLeaf) {
            uint32_t v[kSmallLeaf];
            for (uint32_t j = 0; j < size; j++) v[j] = idx[nd.begin + j];
            insertion_sort(v, size);
            for (uint32_t j = 0; j < size; j++) idx[nd.begin + j] = v[j];
        }
    }
    incl = block_rank(split, warp_sum);
    if (i < m) rank[i] = incl;
}

/* The first positions in [b, e) whose digit (at `shift`) is at least 1, 2 and 3: three binary
 * searches advanced together, so that a big node's unstaged searches overlap their loads. */
template <typename K>
__device__ void digit_bounds(const K *keys, uint32_t b, uint32_t e, int shift, uint32_t out[3])
{
    uint32_t lo[3] = {b, b, b}, hi[3] = {e, e, e};
    while (lo[0] < hi[0] || lo[1] < hi[1] || lo[2] < hi[2]) {
        uint32_t mid[3];
        unsigned dig[3];
#pragma unroll
        for (int d = 0; d < 3; d++) {
            mid[d] = lo[d] + (hi[d] - lo[d]) / 2;
            dig[d] = lo[d] < hi[d] ? (unsigned)((keys[mid[d]] >> shift) & 3u) : 0u;
        }
#pragma unroll
        for (int d = 0; d < 3; d++) {
            if (lo[d] < hi[d]) {
                if (dig[d] <= (unsigned)d)
                    lo[d] = mid[d] + 1;
                else
                    hi[d] = mid[d];
            }
        }
    }
    out[0] = lo[0];
    out[1] = lo[1];
    out[2] = lo[2];
}

/* digit_bounds by a whole warp, for the few huge runs of the first levels, where a thread's
 * binary search is ~27 dependent memory latencies: lanes 10g..10g+9 search the first position
 * whose digit exceeds g with 10 probes per step (an 11-way search, about 8 steps for 10^8
 * points). Every lane gets the three results. */
template <typename K>
__device__ void warp_digit_bounds(const K *keys, uint32_t b, uint32_t e, int shift, uint32_t out[3])
{
    const unsigned lane = threadIdx.x & 31u, g = lane / 10u, j = lane % 10u;
    const bool active = lane < 30u;
    uint32_t lo = b, hi = e; /* the answer is in [lo, hi]; hi is e or a position past it */
    for (;;) {
        const bool more = active && lo < hi;
        const uint32_t len = hi - lo;
        const bool small = len <= 10u;
        bool pred = false;
        unsigned m;
        if (!__any_sync(~0u, more)) break;
        if (more) {
            uint32_t p = small ? lo + j : lo + (uint32_t)(((uint64_t)len * (j + 1)) / 11u);
            pred = (!small || p < hi) && (unsigned)((keys[p] >> shift) & 3u) > g;
        }
        m = (__ballot_sync(~0u, pred) >> (10u * (g < 3u ? g : 0u))) & 0x3ffu;
        if (more) {
            if (small) {
                lo = hi = m ? lo + (unsigned)(__ffs(m) - 1) : hi;
            } else if (m == 0) {
                lo = lo + (uint32_t)(((uint64_t)len * 10u) / 11u) + 1u;
            } else {
                const unsigned j0 = (unsigned)(__ffs(m) - 1);
                const uint32_t pj = lo + (uint32_t)(((uint64_t)len * (j0 + 1)) / 11u);
                lo = j0 ? lo + (uint32_t)(((uint64_t)len * j0) / 11u) + 1u : lo;
                hi = pj;
            }
        }
    }
    out[0] = __shfl_sync(~0u, lo, 0);
    out[1] = __shfl_sync(~0u, lo, 10);
    out[2] = __shfl_sync(~0u, lo, 20);
}

/* Child q of node p, whose center is (cx, cy) and whose children's point ranges are
 * [bounds[q], bounds[q + 1]). */
__device__ __forceinline__ Node child_node(const Node &p, float cx, float cy, unsigned q,
                                           const uint32_t bounds[5])
{
    Node c;
    c.xmin = (q & 1u) ? cx : p.xmin;
    c.xmax = (q & 1u) ? p.xmax : cx;
    c.ymin = (q & 2u) ? p.ymin : cy;
    c.ymax = (q & 2u) ? cy : p.ymax;
    c.level = p.level + 1;
    c.first_child = -1;
    c.begin = bounds[q];
    c.end = bounds[q + 1];
    return c;
}

/* Largest level top_kernel splits. A warp per split node searches its run in global memory
 * (the runs are long up there), so a level of 1024 nodes would take 32 rounds of dependent
 * loads in the one block; from 1024 nodes on, the level kernels' thousands of threads do it
 * faster, round trip included. */
const uint32_t kTopLevelMax = 256;

/* The first levels, while they have at most kTopLevelMax nodes, in one launch of one block:
 * mark (with the small-leaf re-sort), number and split each level as mark_scan_small_kernel and
 * children_kernel do, from the root (nodes[0]) down, stopping before level stop_level, before a
 * level of more nodes, at a level with no split node, or when the next level would not fit in
 * node_cap nodes. Writes where it stopped: state = {lb, le, level}; the host loop goes on from
 * there (redoing the marks of that level, which is harmless: the re-sort is idempotent). Saves
 * the host round trip of each of these levels. */
template <typename K>
__global__ void __launch_bounds__(kSmallLevel)
    top_kernel(Node *__restrict__ nodes, uint32_t node_cap, int depth, int min_points,
               int sorted_level, int stop_level, const K *__restrict__ keys,
               uint32_t *__restrict__ idx, uint32_t *__restrict__ state)
{
    __shared__ uint32_t warp_sum[kSmallLevel / 32];
    __shared__ uint32_t split_list[kSmallLevel]; /* the level's split nodes, by rank */
    const uint32_t i = threadIdx.x, lane = i & 31u, w = i >> 5;
    uint32_t lb = 0, le = 1;
    int level = 0;
    for (;;) {
        const uint32_t m = le - lb;
        uint32_t incl, nsplit;
        bool split = false;
        Node nd;
        if (m > kTopLevelMax || level >= stop_level) break;
        if (i < m) {
            uint32_t size;
            nd = nodes[lb + i];
            size = nd.end - nd.begin;
            split = nd.level < depth && (int64_t)size > (int64_t)min_points;
            if (!split && nd.level < depth && nd.level != sorted_level && size > 1 &&
                size <= kSmallLeaf) {
                uint32_t v[kSmallLeaf];
                for (uint32_t j = 0; j < size; j++) v[j] = idx[nd.begin + j];
                insertion_sort(v, size);
                for (uint32_t j = 0; j < size; j++) idx[nd.begin + j] = v[j];
            }
        }
        incl = block_rank(split, warp_sum);
        nsplit = warp_sum[kSmallLevel / 32 - 1];
        __syncthreads(); /* everyone has read warp_sum before the next level writes it */
        if (nsplit == 0 || (size_t)le + 4 * (size_t)nsplit > node_cap) break;
        if (split) split_list[incl - 1] = lb + i;
        __syncthreads();
        /* a warp per split node */
        for (uint32_t r = w; r < nsplit; r += kSmallLevel / 32) {
            const Node p = nodes[split_list[r]];
            uint32_t bounds[5];
            bounds[0] = p.begin;
            bounds[4] = p.end;
            warp_digit_bounds(keys, p.begin, p.end, 2 * (depth - 1 - p.level), bounds + 1);
            if (lane < 4)
                nodes[le + 4 * r + lane] = child_node(p, qt_mid(p.xmin, p.xmax),
                                                      qt_mid(p.ymin, p.ymax), lane, bounds);
            if (lane == 0) nodes[split_list[r]].first_child = (int32_t)(le + 4 * r);
        }
        __syncthreads(); /* the new level is written before anyone reads it */
        lb = le;
        le += 4 * nsplit;
        level++;
    }
    if (i == 0) {
        state[0] = lb;
        state[1] = le;
        state[2] = (uint32_t)level;
    }
}

/* The level's nodes are nodes[lb, lb + m); split node i gets children at le + 4 * (rank[i] - 1)
 * (rank is inclusive). The children of a block's split nodes are consecutive, so they are
 * assembled in shared memory and written out together. */
template <typename K>
__global__ void __launch_bounds__(kLevelBlock)
    children_kernel(Node *__restrict__ nodes, uint32_t lb, uint32_t m, uint32_t le,
                    const uint32_t *__restrict__ flags, const uint32_t *__restrict__ rank,
                    const K *__restrict__ keys, int depth, int min_points,
                    uint32_t *__restrict__ next_flags, uint32_t *__restrict__ next_big)
{
    const uint32_t cap = kStageBytes / sizeof(K);
    __shared__ K sh[kStageBytes / sizeof(K)];
    __shared__ Node kids[4 * kLevelBlock];
    __shared__ uint32_t span[2], rk[2];
    uint32_t i0 = blockIdx.x * kLevelBlock, i = i0 + threadIdx.x;
    uint32_t last = min(m, i0 + kLevelBlock) - 1;
    bool split = i < m && flags[i] != 0;
    Node p;
    /* Most blocks of the deepest levels have no split node: they leave before reading nodes. */
    if (!__syncthreads_or(split)) return;
    if (i < m) {
        p = nodes[lb + i];
        if (i == i0) {
            span[0] = p.begin;
            rk[0] = rank[i] - (split ? 1u : 0u);
        }
        if (i == last) {
            span[1] = p.end;
            rk[1] = rank[i];
        }
    }
    __syncthreads();
    uint32_t sb = span[0], len = span[1] - span[0];
    bool staged = len <= cap;
    if (staged) {
        for (uint32_t j = threadIdx.x; j < len; j += kLevelBlock) sh[j] = keys[sb + j];
        __syncthreads();
    }
    if (split) {
        int shift = 2 * (depth - 1 - p.level); /* the digit of level p.level + 1 */
        uint32_t r = rank[i] - 1, bounds[5];
        float cx = qt_mid(p.xmin, p.xmax), cy = qt_mid(p.ymin, p.ymax);
        nodes[lb + i].first_child = (int32_t)(le + 4 * r);
        bounds[0] = p.begin;
        bounds[4] = p.end;
        if (staged) {
            digit_bounds(sh, p.begin - sb, p.end - sb, shift, bounds + 1);
            for (unsigned d = 1; d < 4; d++) bounds[d] += sb;
        } else {
            digit_bounds(keys, p.begin, p.end, shift, bounds + 1);
        }
        for (unsigned q = 0; q < 4; q++) {
            Node c = child_node(p, cx, cy, q, bounds);
            kids[4 * (r - rk[0]) + q] = c;
            /* the next level's marks, when that level needs no leaf re-sort (see the loop) */
            if (next_flags) {
                const bool f = c.level < depth && (int64_t)(c.end - c.begin) > (int64_t)min_points;
                next_flags[4 * r + q] = f;
                /* deep_sort's count of long runs, read with the next level's split count */
                if (next_big && f && c.end - c.begin > kDeepSmall) atomicAdd(next_big, 1u);
            }
        }
    }
    __syncthreads();
    {
        const uint32_t *src = (const uint32_t *)kids;
        uint32_t *dst = (uint32_t *)(nodes + le + 4 * (size_t)rk[0]);
        uint32_t words = 4 * (rk[1] - rk[0]) * (uint32_t)(sizeof(Node) / 4);
        for (uint32_t j = threadIdx.x; j < words; j += kLevelBlock) dst[j] = src[j];
    }
}

/* ---- 4. leaves: the segments to re-sort (empty for every other node) ---- */

/* The leaves mark_kernel left: above max_depth with more than kSmallLeaf points (possible only
 * when min_points > kSmallLeaf). */
__host__ __device__ inline bool big_leaf(const Node &nd, int depth, int sorted_level)
{
    return nd.first_child < 0 && nd.level < depth && nd.level != sorted_level &&
           nd.end - nd.begin > kSmallLeaf;
}
struct FixBegin {
    int depth, sorted_level;
    __host__ __device__ uint32_t operator()(const Node &nd) const
    {
        return big_leaf(nd, depth, sorted_level) ? nd.begin : 0u;
    }
};
struct FixEnd {
    int depth, sorted_level;
    __host__ __device__ uint32_t operator()(const Node &nd) const
    {
        return big_leaf(nd, depth, sorted_level) ? nd.end : 0u;
    }
};

/* ---- 5. gather ---- */

template <int DIMS>
__global__ void gather_kernel(const float *__restrict__ xyz, size_t n,
                              const uint32_t *__restrict__ idx, float2 *__restrict__ out)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t a = idx[i];
        if (DIMS == 2) /* one 8-byte load: a gather is one random access per point */
            out[i] = reinterpret_cast<const float2 *>(xyz)[a];
        else
            out[i] = make_float2(xyz[a * (DIMS < 0 ? -DIMS : DIMS)],
                                 xyz[a * (DIMS < 0 ? -DIMS : DIMS) + 1]);
    }
}

template <typename K>
grove_status build_morton(grove_ctx *ctx, const float *d_xyz, int dims, const float root[4],
                          grove_quadtree *t)
{
    const grove_quadtree_opts *o = &t->opts;
    const int depth = o->max_depth;
    const size_t n = t->n;
    cudaStream_t s = (cudaStream_t)ctx->stream;
    grove_dtype kt = sizeof(K) == 4 ? GROVE_U32 : GROVE_U64;
    grove_status st = GROVE_OK;
    Buffers buf = {ctx, ctx->stream, {0}, {0}, 0};
    K *keys_a = NULL, *keys_b = NULL;
    uint32_t *idx_a = NULL, *idx_b = NULL, *flags = NULL, *rank = NULL;
    float *pts = NULL;
    Node *nodes = NULL;
    void *temp = NULL;
    size_t temp_cap = 0, need = 0, flags_cap = 0, node_cap, lb = 0, le = 1;
    Node root_node;
    /* levels the radix sort covers; the rest of the digits come from deep_kernel */
    int sorted = depth;

    root_node.xmin = root[0];
    root_node.ymin = root[1];
    root_node.xmax = root[2];
    root_node.ymax = root[3];
    root_node.level = 0;
    root_node.first_child = -1;
    root_node.begin = 0;
    root_node.end = (uint32_t)n;
    /* A first guess that fits most inputs; the level loop grows it when needed. */
    node_cap = 64 + (n / ((size_t)o->min_points + 1)) * 2;
    if (node_cap > (size_t)INT32_MAX) node_cap = (size_t)INT32_MAX;
    GROVE_TRY_END(st, buf.alloc((void **)&nodes, node_cap * sizeof(Node), "the quadtree nodes"));
    GROVE_TRY_END(st, grove__cuda_h2d(ctx, nodes, &root_node, sizeof root_node, s));

    if (n > 0) {
        GROVE_TRY_END(st, buf.alloc((void **)&keys_a, n * sizeof(K), "the quadtree keys"));
        GROVE_TRY_END(st, buf.alloc((void **)&keys_b, n * sizeof(K), "the sorted quadtree keys"));
        GROVE_TRY_END(st, buf.alloc((void **)&idx_a, n * sizeof(uint32_t), "the point order"));
        GROVE_TRY_END(st, buf.alloc((void **)&idx_b, n * sizeof(uint32_t), "the point order"));
        if (sizeof(K) == 4 && depth > 0)
            GROVE_TRY_END(st, choose_sorted(ctx, buf, &temp, &temp_cap, d_xyz, dims, n, root,
                                            depth, o->min_points, &sorted));
        {
            /* a grid that fills the GPU once: each block loads the tables */
            const bool pairs = dims == 2 && ((uintptr_t)d_xyz & 15u) == 0;
            const int tl = sorted < kTableLevels ? sorted : kTableLevels;
            int sms = 0, per_sm = 0;
            unsigned grid;
            float *bound = NULL;
            QT_CUDA_END(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device),
                        "reading the GPU's SM count");
            if (pairs)
                QT_CUDA_END(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                                &per_sm, keys_kernel<K, true>, kBlock, 0),
                            "sizing the quadtree keys kernel");
            else
                QT_CUDA_END(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                                &per_sm, keys_kernel<K, false>, kBlock, 0),
                            "sizing the quadtree keys kernel");
            grid = blocks_for(pairs ? n / 2 + 1 : n);
            if (grid > (unsigned)(sms * per_sm) && sms * per_sm > 0)
                grid = (unsigned)(sms * per_sm);
            GROVE_TRY_END(st, buf.alloc((void **)&bound, 2 * kTableSize * sizeof(float),
                                        "the quadtree center tables"));
            keys_table_kernel<<<1, 1024, 0, s>>>(tl, root[0], root[1], root[2], root[3], bound);
            QT_LAUNCHED_END("quadtree center table kernel");
            if (pairs)
                keys_kernel<K, true><<<grid, kBlock, 0, s>>>(d_xyz, dims, n, sorted,
                                                             2 * (depth - sorted), bound, keys_a,
                                                             idx_a);
            else
                keys_kernel<K, false><<<grid, kBlock, 0, s>>>(d_xyz, dims, n, sorted,
                                                              2 * (depth - sorted), bound, keys_a,
                                                              idx_a);
            buf.release(bound);
        }
        QT_LAUNCHED_END("quadtree keys kernel");
        /* end_bit must not be 0 (that means every bit); with depth 0 there is nothing to sort */
        if (depth > 0 && n > 1) {
            const int b0 = 2 * (depth - sorted), b1 = 2 * depth;
            GROVE_TRY_END(st, grove__cuda_sort(ctx, NULL, &need, kt, keys_a, keys_b, 4, idx_a,
                                               idx_b, n, b0, b1, s));
            GROVE_TRY_END(st, ensure(buf, &temp, &temp_cap, need, "sort temporary storage"));
            GROVE_TRY_END(st, grove__cuda_sort(ctx, temp, &need, kt, keys_a, keys_b, 4, idx_a,
                                               idx_b, n, b0, b1, s));
        } else {
            K *tk = keys_a;
            uint32_t *ti = idx_a;
            keys_a = keys_b;
            keys_b = tk;
            idx_a = idx_b;
            idx_b = ti;
        }
        /* sorted: keys_b, idx_b */
    }

    {
        uint32_t nsplit_h = 0, nbig_h = 0, *big_count = NULL;
        int64_t known_nbig = -1;
        bool big_counted = false;
        int level0 = 0;
        if (n > 0) {
            uint32_t *state = NULL, state_h[3];
            GROVE_TRY_END(st, buf.alloc((void **)&state, 3 * sizeof(uint32_t),
                                        "the quadtree top levels"));
            top_kernel<K><<<1, kSmallLevel, 0, s>>>(nodes, (uint32_t)node_cap, depth,
                                                    o->min_points, sorted,
                                                    sorted < depth ? sorted : depth + 1, keys_b,
                                                    idx_b, state);
            QT_LAUNCHED_END("quadtree top levels kernel");
            GROVE_TRY_END(st, grove__cuda_fetch(ctx, state_h, state, sizeof state_h, s,
                                                "building the quadtree's top levels"));
            buf.release(state);
            lb = state_h[0];
            le = state_h[1];
            level0 = (int)state_h[2];
        }
        /* A level that needs no leaf re-sort (the sorted level when the sort was partial, and
         * max_depth) gets its marks from the previous level's children kernel, into `pre`: its
         * mark pass would read every node of what is often the largest level only for that. */
        uint32_t *pre = NULL;
        size_t pre_cap = 0;
        bool pre_flagged = false;
        for (int level = level0;; level++) {
            size_t m = le - lb, nsplit;
            const bool pre_ok = pre_flagged && m > (size_t)kSmallLevel;
            uint32_t *fl;
            if (m > flags_cap) {
                size_t cap = m * 2;
                buf.release(flags);
                buf.release(rank);
                flags = rank = NULL;
                flags_cap = 0;
                GROVE_TRY_END(st, buf.alloc((void **)&flags, cap * sizeof(uint32_t),
                                            "the quadtree level marks"));
                GROVE_TRY_END(st, buf.alloc((void **)&rank, cap * sizeof(uint32_t),
                                            "the quadtree level ranks"));
                flags_cap = cap;
            }
            fl = pre_ok ? pre : flags;
            if (m <= (size_t)kSmallLevel) {
                mark_scan_small_kernel<<<1, kSmallLevel, 0, s>>>(
                    nodes + lb, (uint32_t)m, depth, o->min_points, sorted, flags, rank, idx_b);
                QT_LAUNCHED_END("quadtree mark kernel");
            } else {
                if (!pre_ok) {
                    mark_kernel<<<(unsigned)((m + kLevelBlock - 1) / kLevelBlock), kLevelBlock, 0,
                                  s>>>(nodes + lb, (uint32_t)m, depth, o->min_points, sorted,
                                       flags, idx_b);
                    QT_LAUNCHED_END("quadtree mark kernel");
                }
                GROVE_TRY_END(st, grove__cuda_scan(ctx, NULL, &need, GROVE_U32, GROVE_OP_SUM,
                                                   GROVE_SCAN_INCLUSIVE, fl, rank, m, s));
                GROVE_TRY_END(st, ensure(buf, &temp, &temp_cap, need, "scan temporary storage"));
                GROVE_TRY_END(st, grove__cuda_scan(ctx, temp, &need, GROVE_U32, GROVE_OP_SUM,
                                                   GROVE_SCAN_INCLUSIVE, fl, rank, m, s));
            }
            {
                /* with the deep runs' count when the previous level made this level's marks */
                const bool with_big = pre_ok && big_counted && level == sorted;
                void *h[2] = {&nsplit_h, &nbig_h};
                const void *d[2] = {rank + m - 1, big_count};
                const size_t by[2] = {4, 4};
                GROVE_TRY_END(st, grove__cuda_fetchv(ctx, with_big ? 2 : 1, h, d, by, s,
                                                     "building the quadtree levels"));
                known_nbig = with_big ? (int64_t)nbig_h : -1;
            }
            nsplit = nsplit_h;
            if (nsplit == 0) break;
            if (le + 4 * nsplit > (size_t)INT32_MAX) {
                int level;
                GROVE_TRY_END(st, grove__cuda_d2h(ctx, &level, &nodes[lb].level, 4, s));
                GROVE_TRY_END(st, grove__cuda_sync(ctx, s, "building the quadtree levels"));
                st = grove__error(ctx, GROVE_ERR_LIMIT,
                                  "quadtree: the tree would have more than %d nodes (level %d); "
                                  "raise min_points or lower max_depth",
                                  INT32_MAX, level + 1);
                goto _end;
            }
            if (le + 4 * nsplit > node_cap) {
                size_t cap = node_cap;
                Node *grown = NULL;
                while (cap < le + 4 * nsplit) cap *= 2;
                if (cap > (size_t)INT32_MAX) cap = (size_t)INT32_MAX;
                GROVE_TRY_END(st,
                              buf.alloc((void **)&grown, cap * sizeof(Node), "the quadtree nodes"));
                QT_CUDA_END(
                    cudaMemcpyAsync(grown, nodes, le * sizeof(Node), cudaMemcpyDeviceToDevice, s),
                    "growing the quadtree node array");
                buf.release(nodes);
                nodes = grown;
                node_cap = cap;
            }
            if constexpr (sizeof(K) == 4) {
                if (level == sorted && sorted < depth)
                    GROVE_TRY_END(st, deep_sort(ctx, buf, &temp, &temp_cap, nodes + lb, (uint32_t)m,
                                                (uint32_t)nsplit, fl, rank, d_xyz, dims,
                                                depth - sorted, keys_b, idx_b, keys_a, idx_a,
                                                n, known_nbig));
            }
            {
                uint32_t *next = NULL;
                if (!pre_ok && ((level + 1 == sorted && sorted < depth) || level + 1 == depth)) {
                    if (4 * nsplit > pre_cap) {
                        buf.release(pre);
                        pre = NULL;
                        pre_cap = 0;
                        GROVE_TRY_END(st, buf.alloc((void **)&pre, 4 * nsplit * sizeof(uint32_t),
                                                    "the quadtree level marks"));
                        pre_cap = 4 * nsplit;
                    }
                    next = pre;
                    if (level + 1 == sorted && sorted < depth) {
                        if (!big_count)
                            GROVE_TRY_END(st, buf.alloc((void **)&big_count, 4,
                                                        "the quadtree deep run count"));
                        QT_CUDA_END(cudaMemsetAsync(big_count, 0, 4, s),
                                    "clearing the quadtree deep run count");
                        big_counted = true;
                    }
                }
                children_kernel<K>
                    <<<(unsigned)((m + kLevelBlock - 1) / kLevelBlock), kLevelBlock, 0, s>>>(
                        nodes, (uint32_t)lb, (uint32_t)m, (uint32_t)le, fl, rank, keys_b, depth,
                        o->min_points, next,
                        next && level + 1 == sorted ? big_count : NULL);
                QT_LAUNCHED_END("quadtree children kernel");
                pre_flagged = next != NULL;
            }
            lb = le;
            le += 4 * nsplit;
        }
    }

    if (n > 0) {
        /* 4. The small leaves are done (mark_kernel); the big ones need a segmented sort out of
         * place: idx_a = idx_b, then their segments sorted from idx_b into idx_a. */
        if ((uint32_t)o->min_points <= kSmallLeaf) {
            uint32_t *ti = idx_a;
            idx_a = idx_b;
            idx_b = ti;
        } else {
            thrust::transform_iterator<FixBegin, const Node *> fb(nodes, FixBegin{depth, sorted});
            thrust::transform_iterator<FixEnd, const Node *> fe(nodes, FixEnd{depth, sorted});
            QT_CUDA_END(
                cudaMemcpyAsync(idx_a, idx_b, n * sizeof(uint32_t), cudaMemcpyDeviceToDevice, s),
                "copying the quadtree point order");
            QT_CUDA_END(cub::DeviceSegmentedSort::SortKeys(NULL, need, idx_b, idx_a, (int64_t)n,
                                                           (int64_t)le, fb, fe, s),
                        "quadtree leaf sort (sizing)");
            GROVE_TRY_END(st, ensure(buf, &temp, &temp_cap, need, "leaf sort temporary storage"));
            QT_CUDA_END(cub::DeviceSegmentedSort::SortKeys(temp, need, idx_b, idx_a, (int64_t)n,
                                                           (int64_t)le, fb, fe, s),
                        "quadtree leaf sort");
        }
        /* 5. */
        buf.release(keys_a);
        buf.release(keys_b);
        keys_a = keys_b = NULL;
        GROVE_TRY_END(st, buf.alloc((void **)&pts, 2 * n * sizeof(float), "the tree's points"));
        /* The 8-byte loads need 8-byte aligned points (cudaMalloc gives 256). */
        if (dims == 2 && ((uintptr_t)d_xyz & 7u) == 0)
            gather_kernel<2><<<blocks_for(n), kBlock, 0, s>>>(d_xyz, n, idx_a, (float2 *)pts);
        else if (dims == 2)
            gather_kernel<-2><<<blocks_for(n), kBlock, 0, s>>>(d_xyz, n, idx_a, (float2 *)pts);
        else
            gather_kernel<3><<<blocks_for(n), kBlock, 0, s>>>(d_xyz, n, idx_a, (float2 *)pts);
        QT_LAUNCHED_END("quadtree gather kernel");
    }
    GROVE_TRY_END(st, grove__cuda_sync(ctx, s, "building the quadtree"));

    buf.keep(nodes);
    buf.keep(pts);
    buf.keep(idx_a);
    t->d_nodes = nodes;
    t->d_nodes_bytes = node_cap * sizeof(Node);
    t->d_pts = pts;
    t->d_index = idx_a;
    t->num_nodes = le;
    t->dev_ctx = ctx;
_end:
    buf.free_all();
    return st;
}

} /* namespace */
} /* namespace grove_qt */

extern "C" grove_status grove__qt_build_morton_cuda(grove_ctx *ctx, const float *d_xyz, int dims,
                                                    const float root[4], grove_quadtree *t)
{
    if (t->opts.max_depth <= 16) return grove_qt::build_morton<uint32_t>(ctx, d_xyz, dims, root, t);
    return grove_qt::build_morton<uint64_t>(ctx, d_xyz, dims, root, t);
}

