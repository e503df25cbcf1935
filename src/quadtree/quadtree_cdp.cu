/*
 * quadtree_cdp.cu - the kernels of the CUDA recursive quadtree build: the seed's dynamic-
 * parallelism algorithm under CDP2 (kernels launch their children fire-and-forget; there is no
 * device-side synchronization). Host logic (allocation, the pending-launch limit, retries, the
 * breadth-first renumbering, error messages) is in quadtree_recursive_cuda.cu.
 *
 * This file is compiled with relocatable device code into the grove_cdp library, which is linked
 * after libgrove: it must not call any grove__ function, only the CUDA runtime, and reports
 * through cudaError_t and the flags it leaves in device memory.
 *
 * Every node is split the seed's way: count its points per quadrant, a 4-element exclusive scan
 * plus the node's begin gives the child ranges, and the points are scattered into the other of two
 * ping-pong buffers (level L lives in buffer L % 2). The scatter is stable: each chunk of kC = 4 *
 * blockDim points (4 per thread, for more loads in flight and fewer barriers) is ranked per
 * quadrant with warp ballots and a scan across the warps, and chunks are taken in order; there is
 * no shared-memory atomic scatter. Nodes are processed at three granularities:
 *
 *   big     (> big_min points) a grid of tiles of kTile points, one block per tile; the tile's
 *           start per quadrant comes from a scan of per-tile counts, which the parent's scatter
 *           counted on the fly (it knows where each point lands and can classify it by its child's
 *           center too), so a big node costs one pass and one launch. The last block to finish
 *           (a ticket counter) sets up and launches the children.
 *   medium  one block splits the node from global memory and launches a grid for its children
 *           that are not small (one block per child); small children it finishes itself.
 *   small   (<= small_max points) one block loads the node into shared memory and finishes its
 *           whole subtree there, ping-ponging 16-bit permutations: a level at a time (all split
 *           nodes of a level together, small_levels; the default when a level can hold at most
 *           m / (min_points + 1) <= kWMax split nodes) or else depth first with an explicit
 *           stack (small_subtree). Every leaf's points end in buffer 0 through the final write.
 *
 * Limits of the speed (H100, 10^8 uniform points, about 39 ms): the device build is ~34 ms at
 * roughly 0.7 TB/s effective, a quarter of the memory bandwidth. Each big or medium level reads and
 * writes every point once (medium levels read twice: count, then scatter) with two barriers per
 * chunk, a block's loads in flight are few, each level of a big node waits for its last block
 * (prepare() of the children runs on one block), and the ~5 million small-subtree nodes cost a
 * constant number of barriers per level each. Sorting the 21 million node records into
 * breadth-first order and remapping them take ~2.7 ms, and raising then restoring the
 * pending-launch limit ~2 ms.
 *
 * Node records are allocated four at a time from a global counter into a preallocated array (raw
 * order); each carries a key (a leading 1 bit, then two bits per level: its quadrant path), and the
 * host sorts by it to get the breadth-first layout. Limits: the node array (overflow: flag, the
 * host retries with a larger one), the pending-launch limit (a failed launch: flag and error code,
 * the host retries with a higher limit), and the launch nesting depth (24 in hardware): a block
 * whose children would be deeper than nest_cap finishes their subtrees itself.
 */
#include <cuda_runtime.h>

#include <stdint.h>

#include "grove/quadtree.h"
#include "quadtree_cdp.cuh"

namespace grove_qtcdp
{

/* Finishes the subtree of R (a split node of at most small_max points) in shared memory, using
 * stack slots from `base` up. Positions are local (0..m); pm0/pm1 hold, per position, the local
 * index of the point there (relative level parity 0/1), so a split moves 2-byte indices, and the
 * tree's points are gathered once at the end. */
static __device__ __noinline__ void small_subtree(const Params &P, const Entry &R, int base,
                                                  Shared &sh, float2 *sxy, uint32_t *six,
                                                  uint16_t *pm0, uint16_t *pm1)
{
    const unsigned tid = threadIdx.x;
    const uint32_t m = R.e - R.b;
    const int s = R.level & 1;
    for (uint32_t i = tid; i < m; i += kT) {
        sxy[i] = __ldcg(P.xy[s] + R.b + i);
        six[i] = __ldcg(P.ix[s] + R.b + i);
        pm0[i] = (uint16_t)i;
    }
    if (tid == 0) {
        Entry L = R;
        L.b = 0;
        L.e = m;
        sh.stack[base] = L;
        sh.sp = base + 1;
    }
    for (;;) {
        u64 f = 0;
        __syncthreads();
        int top = sh.sp;
        if (top == base || sh.abort) break;
        Entry E = sh.stack[top - 1];
        __syncthreads();
        if (tid == 0) {
            sh.sp = top - 1;
            f = atomicAdd(&P.st[S_NODES], 4ull); /* its latency hides behind the split */
        }
        const int par = (E.level - R.level) & 1;
        const float cx = mid(E.box[0], E.box[2]), cy = mid(E.box[1], E.box[3]);
        SmemPol pol = {sxy, par ? pm1 : pm0, par ? pm0 : pm1};
        uint32_t bnd[5];
        split(pol, E.b, E.e, cx, cy, sh, bnd);
        if (tid == 0) take4(P, f, sh);
        __syncthreads();
        if (sh.abort) break;
        const uint32_t first = sh.first;
        if (tid < 4)
            write_child(P, E, cx, cy, tid, first + tid, R.b + bnd[tid], R.b + bnd[tid + 1]);
        if (tid == 0) P.nodes[E.id].first_child = (int32_t)first;
        for (int q = 3; q >= 0; q--) {
            uint32_t cb = bnd[q], ce = bnd[q + 1];
            if (splits(P, E.level + 1, ce - cb)) {
                if (tid == 0) push(P, sh, child_entry(E, cx, cy, (unsigned)q, first + q, cb, ce));
            } else if (par == 0) { /* a leaf of relative parity 1 */
                for (uint32_t i = cb + tid; i < ce; i += kT) pm0[i] = pm1[i];
            }
        }
    }
    __syncthreads();
    if (!sh.abort) {
        for (uint32_t i = tid; i < m; i += kT) {
            uint32_t j = pm0[i];
            P.xy[0][R.b + i] = sxy[j];
            P.ix[0][R.b + i] = six[j];
        }
    }
    __syncthreads();
}

/* Finishes the subtree of R (a split node of at most small_max points whose level can hold no
 * more than kWMax split nodes: m / (min_points + 1) <= kWMax) in shared memory, one level at a
 * time: all split nodes of a level are split together, so a level costs a constant number of
 * barriers and one node allocation, however many nodes it has. Each thread owns a run of
 * consecutive positions; a block-wide scan of packed per-quadrant counts (16-bit fields, m <
 * 2^16) gives every point its rank within its node and quadrant, which keeps the split stable.
 * fin[i] records the parity of the buffer that holds position i when its leaf is made, so the
 * final gather needs no copy-back. */
static __device__ __noinline__ void small_levels(const Params &P, const Entry &R, Shared &sh,
                                                 LevelShared &ls, float2 *sxy, uint16_t *pm0,
                                                 uint16_t *pm1, uint16_t *own, uint8_t *qb,
                                                 uint8_t *fin)
{
    const unsigned tid = threadIdx.x;
    const uint32_t m = R.e - R.b;
    const int s = R.level & 1;
    const uint32_t K = (m + kT - 1) / kT;
    const uint32_t i0 = min(m, tid * K), i1 = min(m, i0 + K);
    for (uint32_t i = tid; i < m; i += kT) {
        sxy[i] = __ldcg(P.xy[s] + R.b + i);
        pm0[i] = (uint16_t)i;
    }
    if (tid == 0) {
        Entry L = R;
        L.b = 0;
        L.e = m;
        ls.w[0][0] = L;
        ls.k = 1;
    }
    for (int cur = 0, par = 0;; cur ^= 1, par ^= 1) {
        u64 f = 0, tot, sum = 0;
        __syncthreads();
        const int k = ls.k;
        if (k == 0 || sh.abort) break;
        const Entry *W = ls.w[cur];
        if (tid == 0) f = atomicAdd(&P.st[S_NODES], 4ull * (u64)k);
        for (int a = tid; a < k; a += kT) {
            ls.cx[a] = mid(W[a].box[0], W[a].box[2]);
            ls.cy[a] = mid(W[a].box[1], W[a].box[3]);
        }
        __syncthreads();
        const uint16_t *src = par ? pm1 : pm0;
        uint16_t *dst = par ? pm0 : pm1;
        /* each position: its node (the last one starting at or before it) and quadrant */
        for (uint32_t i = i0; i < i1; i++) {
            int l = 0, h = k;
            while (l < h) {
                const int md = (l + h) >> 1;
                if (W[md].b <= i)
                    l = md + 1;
                else
                    h = md;
            }
            uint16_t o = 0xffffu;
            unsigned q = 0;
            if (l > 0 && i < W[l - 1].e) {
                const float2 p = sxy[src[i]];
                o = (uint16_t)(l - 1);
                q = quad(p.x, p.y, ls.cx[l - 1], ls.cy[l - 1]);
                sum += 1ull << (16 * q);
            }
            own[i] = o;
            qb[i] = (uint8_t)q;
        }
        const u64 p0 = block_exscan(sum, sh, &tot);
        /* the prefix at each node's first and past its last position */
        u64 pr = p0;
        for (uint32_t i = i0; i < i1; i++) {
            const uint16_t o = own[i];
            if (o == 0xffffu) continue;
            if (i == W[o].b) ls.base[o] = pr;
            pr += 1ull << (16 * qb[i]);
            if (i + 1 == W[o].e) ls.end[o] = pr;
        }
        if (tid == 0) {
            if (f + 4ull * (u64)k > P.node_cap) {
                set_flag(P, F_NODES);
                sh.abort = 1;
            }
            ls.first = (uint32_t)f;
        }
        __syncthreads();
        if (sh.abort) break;
        const uint32_t first = ls.first;
        u64 nsplit = 0;
        uint32_t x[5] = {0, 0, 0, 0, 0};
        if (tid < (unsigned)k) {
            const Entry &E = W[tid];
            const u64 cnt = ls.end[tid] - ls.base[tid];
            uint8_t leaf = 0;
            for (unsigned q = 0; q < 4; q++) x[q + 1] = x[q] + field16(cnt, q);
            ls.offs[tid] = (u64)x[0] | (u64)x[1] << 16 | (u64)x[2] << 32 | (u64)x[3] << 48;
            for (unsigned q = 0; q < 4; q++) {
                write_child(P, E, ls.cx[tid], ls.cy[tid], q, first + 4 * tid + q, R.b + E.b + x[q],
                            R.b + E.b + x[q + 1]);
                if (splits(P, E.level + 1, x[q + 1] - x[q]))
                    nsplit++;
                else
                    leaf |= (uint8_t)(1u << q);
            }
            P.nodes[E.id].first_child = (int32_t)(first + 4 * tid);
            ls.leaf[tid] = leaf;
        }
        u64 ntot;
        u64 at = block_exscan(nsplit, sh, &ntot);
        if (tid < (unsigned)k && nsplit) {
            const Entry &E = W[tid];
            Entry *W2 = ls.w[cur ^ 1];
            for (unsigned q = 0; q < 4; q++)
                if (!((ls.leaf[tid] >> q) & 1u))
                    W2[at++] = child_entry(E, ls.cx[tid], ls.cy[tid], q, first + 4 * tid + q,
                                           E.b + x[q], E.b + x[q + 1]);
        }
        if (tid == 0) ls.k = (int)ntot;
        /* the stable scatter; a point that lands in a leaf is final in `dst` */
        pr = p0;
        for (uint32_t i = i0; i < i1; i++) {
            const uint16_t o = own[i];
            if (o == 0xffffu) continue;
            const unsigned q = qb[i];
            const uint32_t np =
                W[o].b + field16(ls.offs[o], q) + (field16(pr, q) - field16(ls.base[o], q));
            dst[np] = src[i];
            if ((ls.leaf[o] >> q) & 1u) fin[np] = (uint8_t)(par ^ 1);
            pr += 1ull << (16 * q);
        }
    }
    __syncthreads();
    if (!sh.abort) {
        /* R's points may come from buffer 0, which the gather overwrites: read all input
         * positions (into the free permutation space) before writing any */
        uint32_t *stage = reinterpret_cast<uint32_t *>(pm0); /* pm0, pm1: 4S bytes */
        for (uint32_t i = tid; i < m; i += kT) own[i] = fin[i] ? pm1[i] : pm0[i];
        __syncthreads();
        for (uint32_t i = tid; i < m; i += kT) stage[i] = __ldcg(P.ix[s] + R.b + own[i]);
        __syncthreads();
        for (uint32_t i = tid; i < m; i += kT) {
            P.xy[0][R.b + i] = sxy[own[i]];
            P.ix[0][R.b + i] = stage[i];
        }
    }
    __syncthreads();
}

__global__ void qt_node(Params P, uint32_t first, uint32_t mask, int nest);

/* Thread 0's launch of the children of `first` selected by mask (kept out of line: building the
 * launch's parameter buffer is cold code that would cost the hot loops registers). */
static __device__ __noinline__ void launch_nodes(const Params &P, uint32_t first, unsigned mask,
                                                 int nest)
{
    qt_node<<<__popc(mask), kT, P.dyn_smem, cudaStreamFireAndForget>>>(P, first, mask, nest);
    launched(P, nest);
}

/* Builds the subtree of `root` with this block, depth first: leaves are copied back, small nodes
 * go to small_subtree (when use_smem), other nodes are split from global memory; their children
 * that are not small are launched as one grid when the nesting depth allows it, the others are
 * pushed on the block's own stack. */
__device__ void block_dfs(const Params &P, const Entry &root, int nest, bool use_smem, Shared &sh,
                          LevelShared *ls, unsigned char *dyn)
{
    /* dynamic shared memory, small_max (S) points: xy (8S bytes), two 16-bit permutations (4S),
     * then 4S bytes: the input positions (DFS mode) or owner, quadrant and parity per position */
    const uint32_t S = P.small_max;
    float2 *sxy = reinterpret_cast<float2 *>(dyn);
    uint16_t *pm0 = reinterpret_cast<uint16_t *>(dyn + 8 * (size_t)S);
    uint16_t *pm1 = pm0 + S;
    unsigned char *rest = dyn + 12 * (size_t)S;
    const unsigned tid = threadIdx.x;
    const bool can = nest + 1 <= P.nest_cap;
    __syncthreads();
    if (tid == 0) {
        sh.stack[0] = root;
        sh.sp = 1;
    }
    for (;;) {
        u64 f = 0;
        __syncthreads();
        int top = sh.sp;
        if (top == 0 || sh.abort) break;
        Entry E = sh.stack[top - 1];
        __syncthreads();
        if (tid == 0) sh.sp = top - 1;
        const uint32_t m = E.e - E.b;
        const int s = E.level & 1;
        if (!splits(P, E.level, m)) {
            if (s && m) copy_back(P, E.b, E.e);
            continue;
        }
        if (use_smem && m <= S) {
            if (ls && P.level_mode && m / ((uint32_t)P.min_points + 1u) <= (uint32_t)kWMax)
                small_levels(P, E, sh, *ls, sxy, pm0, pm1, reinterpret_cast<uint16_t *>(rest),
                             rest + 2 * (size_t)S, rest + 3 * (size_t)S);
            else
                small_subtree(P, E, top - 1, sh, sxy, reinterpret_cast<uint32_t *>(rest), pm0, pm1);
            continue;
        }
        if (tid == 0) f = atomicAdd(&P.st[S_NODES], 4ull);
        const float cx = mid(E.box[0], E.box[2]), cy = mid(E.box[1], E.box[3]);
        GlobalPol pol = {P.xy[s], P.ix[s], P.xy[s ^ 1], P.ix[s ^ 1]};
        uint32_t bnd[5];
        split(pol, E.b, E.e, cx, cy, sh, bnd);
        if (tid == 0) take4(P, f, sh);
        __syncthreads();
        if (sh.abort) break;
        const uint32_t first = sh.first;
        if (tid < 4) write_child(P, E, cx, cy, tid, first + tid, bnd[tid], bnd[tid + 1]);
        if (tid == 0) P.nodes[E.id].first_child = (int32_t)first;
        unsigned mask = 0;
        for (int q = 3; q >= 0; q--) {
            const uint32_t cb = bnd[q], ce = bnd[q + 1], cm = ce - cb;
            const int cl = E.level + 1;
            if (!splits(P, cl, cm)) {
                if ((cl & 1) && cm) copy_back(P, cb, ce);
            } else if (can && (!use_smem || !P.inline_small || cm > P.small_max)) {
                mask |= 1u << q;
            } else if (tid == 0) {
                push(P, sh, child_entry(E, cx, cy, (unsigned)q, first + q, cb, ce));
            }
        }
        if (mask) {
            __syncthreads(); /* every thread's records and points before the launch */
            if (tid == 0) launch_nodes(P, first, mask, nest + 1);
        }
    }
    __syncthreads();
}

/* One block per set bit of mask: node first + q, a node of at most big_min points. */
__global__ void __launch_bounds__(kT, 3) qt_node(Params P, uint32_t first, uint32_t mask, int nest)
{
    __shared__ Shared sh;
    __shared__ LevelShared ls;
    extern __shared__ __align__(16) unsigned char dyn[];
    unsigned mm = mask;
    for (unsigned k = 0; k < blockIdx.x; k++) mm &= mm - 1u;
    const unsigned q = (unsigned)__ffs((int)mm) - 1u;
    const Entry E = load_entry(P, first + q);
    if (threadIdx.x == 0) sh.abort = 0;
    block_dfs(P, E, nest, P.small_max > 0, sh, &ls, dyn);
}

/* Copies [b, e) of buffer 1 to buffer 0: a large leaf on an odd level under a big node. */
__global__ void __launch_bounds__(kT) qt_copy(Params P, uint32_t b, uint32_t e)
{
    for (u64 i = (u64)b + (u64)blockIdx.x * kT + threadIdx.x; i < e; i += (u64)gridDim.x * kT) {
        P.xy[0][i] = __ldcg(P.xy[1] + i);
        P.ix[0][i] = __ldcg(P.ix[1] + i);
    }
}

/* Block-wide, one block: turns task ti's per-tile counts into per-tile destinations, creates the
 * node's four children and a task (with zeroed tile counts, from the pools the host cleared) for
 * each child that is itself a big split. */
static __device__ __noinline__ void prepare(const Params &P, uint32_t ti, Shared &sh)
{
    const unsigned tid = threadIdx.x;
    Task *tk = P.tasks + ti;
    const uint32_t nid = __ldcg(&tk->node), nt = __ldcg(&tk->ntiles);
    uint4 *tl = P.tiles + __ldcg(&tk->tile_off);
    const Node nd = load_node(P, nid);
    const uint32_t per = (nt + kT - 1) / kT;
    const uint32_t t0 = min(nt, tid * per), t1 = min(nt, t0 + per);
    u64 a01 = 0, a23 = 0, tot01, tot23;
    /* n < 2^32, so two 32-bit counts share a u64 without carries */
    for (uint32_t t = t0; t < t1; t++) {
        uint4 c = __ldcg(tl + t);
        a01 += (u64)c.x | (u64)c.y << 32;
        a23 += (u64)c.z | (u64)c.w << 32;
    }
    u64 e01 = block_exscan(a01, sh, &tot01);
    u64 e23 = block_exscan(a23, sh, &tot23);
    const uint32_t b0 = nd.begin, b1 = b0 + (uint32_t)tot01, b2 = b1 + (uint32_t)(tot01 >> 32),
                   b3 = b2 + (uint32_t)tot23;
    uint32_t x0 = b0 + (uint32_t)e01, x1 = b1 + (uint32_t)(e01 >> 32), x2 = b2 + (uint32_t)e23,
             x3 = b3 + (uint32_t)(e23 >> 32);
    for (uint32_t t = t0; t < t1; t++) {
        uint4 c = __ldcg(tl + t);
        tl[t] = make_uint4(x0, x1, x2, x3);
        x0 += c.x;
        x1 += c.y;
        x2 += c.z;
        x3 += c.w;
    }
    if (tid == 0) {
        u64 f = atomicAdd(&P.st[S_NODES], 4ull);
        if (take4(P, f, sh)) {
            const uint32_t first = (uint32_t)f;
            const uint32_t bd[5] = {b0, b1, b2, b3, nd.end};
            Entry E;
            E.box[0] = nd.xmin;
            E.box[1] = nd.ymin;
            E.box[2] = nd.xmax;
            E.box[3] = nd.ymax;
            E.b = nd.begin;
            E.e = nd.end;
            E.id = nid;
            E.level = nd.level;
            E.key = __ldcg(P.keys + nid);
            const float cx = mid(E.box[0], E.box[2]), cy = mid(E.box[1], E.box[3]);
            for (int k = 0; k < 5; k++) tk->bounds[k] = bd[k];
            tk->first = first;
            P.nodes[nid].first_child = (int32_t)first;
            for (unsigned q = 0; q < 4; q++) {
                const uint32_t cm = bd[q + 1] - bd[q];
                int32_t child = -1;
                write_child(P, E, cx, cy, q, first + q, bd[q], bd[q + 1]);
                if (splits(P, E.level + 1, cm) && cm > P.big_min) {
                    const uint32_t ntc = (cm + kTile - 1) / kTile;
                    const u64 c = atomicAdd(&P.st[S_TASKS], 1ull);
                    const u64 off = atomicAdd(&P.st[S_TILES], (u64)ntc);
                    if (c >= P.task_cap || off + ntc > P.tile_cap) {
                        set_flag(P, F_POOL);
                        sh.abort = 1;
                    } else {
                        Task *ct = P.tasks + c;
                        ct->node = first + q;
                        ct->tile_off = (uint32_t)off;
                        ct->ntiles = ntc;
                        ct->ticket = 0;
                        for (int k = 0; k < 4; k++) ct->child[k] = -1;
                        child = (int32_t)c;
                    }
                }
                tk->child[q] = child;
            }
        }
    }
    __syncthreads();
}

__global__ void qt_big(Params P, uint32_t ti, int nest);

/* The last block of a big node's grid: its children. A big split child gets its own grid (after
 * prepare), the other split children one qt_node grid, a large leaf on an odd level a copy grid;
 * past the nesting cap this block builds everything itself. */
static __device__ __noinline__ void big_children(const Params &P, uint32_t ti, int nest, Shared &sh)
{
    const unsigned tid = threadIdx.x;
    const Task *tk = P.tasks + ti;
    const uint32_t first = __ldcg(&tk->first);
    const bool can = nest + 1 <= P.nest_cap;
    unsigned mask = 0;
    for (unsigned q = 0; q < 4; q++) {
        const Entry C = load_entry(P, first + q);
        const uint32_t cm = C.e - C.b;
        const int32_t child = __ldcg(&tk->child[q]);
        if (!splits(P, C.level, cm)) {
            if ((C.level & 1) && cm) {
                if (can && cm > kTile) {
                    if (tid == 0) {
                        uint32_t g = min((cm + kTile - 1) / kTile, 4096u);
                        qt_copy<<<g, kT, 0, cudaStreamFireAndForget>>>(P, C.b, C.e);
                        launched(P, nest + 1);
                    }
                } else {
                    copy_back(P, C.b, C.e);
                }
            }
        } else if (!can) {
            block_dfs(P, C, nest, false, sh, nullptr, nullptr);
            if (sh.abort) return;
        } else if (child >= 0) {
            prepare(P, (uint32_t)child, sh);
            if (sh.abort) return;
            if (tid == 0) {
                qt_big<<<__ldcg(&P.tasks[child].ntiles), kT, 0, cudaStreamFireAndForget>>>(
                    P, (uint32_t)child, nest + 1);
                launched(P, nest + 1);
            }
        } else {
            mask |= 1u << q;
        }
    }
    if (mask) {
        __syncthreads();
        if (tid == 0) launch_nodes(P, first, mask, nest + 1);
    }
}

/* Block t of a big node's grid: scatters tile t stably to its destinations, counting on the way,
 * for each child that is a big split, its points per grandchild quadrant and child tile (the
 * tile's points of one quadrant are a run of at most kTile destinations: two child tiles). */
__global__ void __launch_bounds__(kT, 3) qt_big(Params P, uint32_t ti, int nest)
{
    __shared__ Shared sh;
    const unsigned tid = threadIdx.x;
    const Task *tk = P.tasks + ti;
    /* first is 0 until prepare() succeeded (node 0 is the root, never a child): the host launches
     * the root's grid without knowing whether its prepare ran out of nodes */
    if (__ldcg(&tk->first) == 0) return;
    const Node nd = load_node(P, __ldcg(&tk->node));
    const int s = nd.level & 1;
    const uint32_t t = blockIdx.x;
    const u64 tb = (u64)nd.begin + (u64)t * kTile;
    const u64 te = min((u64)nd.end, tb + kTile);
    const uint4 base = __ldcg(P.tiles + __ldcg(&tk->tile_off) + t);
    const float cx = mid(nd.xmin, nd.xmax), cy = mid(nd.ymin, nd.ymax);
    if (tid < 5) sh.bnd[tid] = __ldcg(&tk->bounds[tid]);
    if (tid < 4) {
        const int32_t c = __ldcg(&tk->child[tid]);
        sh.cbt[tid] = c;
        if (c >= 0) {
            const float b[4] = {nd.xmin, nd.ymin, nd.xmax, nd.ymax};
            float o[4];
            child_box(b, cx, cy, tid, o);
            sh.ccx[tid] = mid(o[0], o[2]);
            sh.ccy[tid] = mid(o[1], o[3]);
            const uint32_t start = sel4(tid, base.x, base.y, base.z, base.w);
            sh.ct0[tid] = (start - __ldcg(&tk->bounds[tid])) / kTile;
            sh.ctoff[tid] = __ldcg(&P.tasks[c].tile_off);
        }
    }
    if (tid < 32) sh.hist[tid] = 0;
    if (tid == 0) sh.abort = 0;
    __syncthreads();
    const float2 *sxy = P.xy[s];
    const uint32_t *six = P.ix[s];
    float2 *dxy = P.xy[s ^ 1];
    uint32_t *dix = P.ix[s ^ 1];
    uint32_t r0 = base.x, r1 = base.y, r2 = base.z, r3 = base.w;
    for (u64 c = tb; c < te; c += kC) {
        float2 p[kN];
        uint32_t id[kN], pos[kN];
        unsigned q[kN];
        bool valid[kN];
#pragma unroll
        for (int k = 0; k < kN; k++) {
            const u64 i = c + k * kT + tid;
            valid[k] = i < te;
            q[k] = 0;
            if (valid[k]) {
                p[k] = __ldcg(sxy + i);
                id[k] = __ldcg(six + i);
            }
        }
#pragma unroll
        for (int k = 0; k < kN; k++)
            if (valid[k]) q[k] = quad(p[k].x, p[k].y, cx, cy);
        const u64 tot = chunk_rank(valid, q, pos, sh);
#pragma unroll
        for (int k = 0; k < kN; k++) {
            if (!valid[k]) continue;
            const uint32_t d = sel4(q[k], r0, r1, r2, r3) + pos[k];
            dxy[d] = p[k];
            dix[d] = id[k];
            if (sh.cbt[q[k]] >= 0) {
                const unsigned q2 = quad(p[k].x, p[k].y, sh.ccx[q[k]], sh.ccy[q[k]]);
                const uint32_t slot = (d - sh.bnd[q[k]]) / kTile - sh.ct0[q[k]];
                atomicAdd(&sh.hist[q[k] * 8 + slot * 4 + q2], 1u);
            }
        }
        r0 += field16(tot, 0);
        r1 += field16(tot, 1);
        r2 += field16(tot, 2);
        r3 += field16(tot, 3);
    }
    __syncthreads();
    if (tid < 32) {
        const uint32_t v = sh.hist[tid];
        if (v) {
            const unsigned c = tid >> 3, slot = (tid >> 2) & 1u, q2 = tid & 3u;
            uint32_t *dst = reinterpret_cast<uint32_t *>(P.tiles + sh.ctoff[c] + sh.ct0[c] + slot);
            atomicAdd(dst + q2, v);
        }
    }
    __threadfence();
    __syncthreads();
    if (tid == 0) sh.last = atomicAdd(&P.tasks[ti].ticket, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!sh.last) return;
    __threadfence();
    big_children(P, ti, nest, sh);
}

/* ---- kernels launched by the host ---- */

__global__ void qt_setup(Params P, float x0, float y0, float x1, float y1, uint32_t n,
                         uint32_t root_tiles)
{
    Node r;
    r.xmin = x0;
    r.ymin = y0;
    r.xmax = x1;
    r.ymax = y1;
    r.level = 0;
    r.first_child = -1;
    r.begin = 0;
    r.end = n;
    P.nodes[0] = r;
    P.keys[0] = 1;
    P.st[S_NODES] = 1;
    if (root_tiles) {
        Task *tk = P.tasks;
        tk->node = 0;
        tk->tile_off = 0;
        tk->ntiles = root_tiles;
        tk->ticket = 0;
        for (int k = 0; k < 4; k++) tk->child[k] = -1;
        P.st[S_TASKS] = 1;
        P.st[S_TILES] = root_tiles;
    }
}

/* Tile t of the input: buffer 0 gets (x, y) and the input positions; with `count`, the tile's
 * points per root quadrant go to tiles[t] (the root is a big split). */
__global__ void __launch_bounds__(kT) qt_init(Params P, const float *xyz, int dims, uint32_t n,
                                              int count, float x0, float y0, float x1, float y1)
{
    __shared__ uint32_t cnt[4];
    const unsigned tid = threadIdx.x;
    const u64 tb = (u64)blockIdx.x * kTile, te = min((u64)n, tb + kTile);
    const float cx = mid(x0, x1), cy = mid(y0, y1);
    uint32_t c0 = 0, c1 = 0, c2 = 0, c3 = 0;
    if (tid < 4) cnt[tid] = 0;
    __syncthreads();
    for (u64 i = tb + tid; i < te; i += kT) {
        const float x = xyz[i * (u64)dims], y = xyz[i * (u64)dims + 1];
        const unsigned q = quad(x, y, cx, cy);
        P.xy[0][i] = make_float2(x, y);
        P.ix[0][i] = (uint32_t)i;
        c0 += q == 0;
        c1 += q == 1;
        c2 += q == 2;
        c3 += q == 3;
    }
    if (!count) return;
    c0 = __reduce_add_sync(kFull, c0);
    c1 = __reduce_add_sync(kFull, c1);
    c2 = __reduce_add_sync(kFull, c2);
    c3 = __reduce_add_sync(kFull, c3);
    if ((tid & 31u) == 0) {
        atomicAdd(&cnt[0], c0);
        atomicAdd(&cnt[1], c1);
        atomicAdd(&cnt[2], c2);
        atomicAdd(&cnt[3], c3);
    }
    __syncthreads();
    if (tid == 0) P.tiles[blockIdx.x] = make_uint4(cnt[0], cnt[1], cnt[2], cnt[3]);
}

__global__ void __launch_bounds__(kT, 3) qt_prepare_root(Params P)
{
    __shared__ Shared sh;
    if (threadIdx.x == 0) sh.abort = 0;
    __syncthreads();
    prepare(P, 0, sh);
}

} /* namespace grove_qtcdp */

using namespace grove_qtcdp;

/* The sizes the host needs to allocate the pools. */
extern "C" void grove__qt_cdp_info(size_t *task_bytes, uint32_t *tile_points, uint32_t *state_words,
                                   uint32_t *smem_per_point)
{
    *task_bytes = sizeof(Task);
    *tile_points = kTile;
    *state_words = S_COUNT;
    *smem_per_point = (uint32_t)(sizeof(float2) + sizeof(uint32_t) + 2 * sizeof(uint16_t));
}

/* Queues the whole build on `stream`: the buffers are allocated by the caller (state, tasks and
 * tiles zeroed), xy[0]/ix[0] receive the result, nodes/keys the raw node records. Returns the
 * first host-side launch error; device-side problems are in the state words. */
extern "C" cudaError_t grove__qt_cdp_run(float *xy0, float *xy1, uint32_t *ix0, uint32_t *ix1,
                                         grove_quadtree_node *nodes, unsigned long long *keys,
                                         uint32_t node_cap, unsigned long long *state, void *tasks,
                                         uint32_t task_cap, void *tiles, uint32_t tile_cap,
                                         const float *d_xyz, int dims, uint32_t n,
                                         const float root[4], int max_depth, int min_points,
                                         uint32_t small_max, uint32_t big_min, int nest_cap,
                                         int inline_small, int level_mode, cudaStream_t stream)
{
    Params P;
    cudaError_t e;
    const bool split_root = n > 0 && max_depth > 0 && (long long)n > (long long)min_points;
    const bool big = split_root && n > big_min;
    const uint32_t ntiles = (uint32_t)(((u64)n + kTile - 1) / kTile);
    P.xy[0] = reinterpret_cast<float2 *>(xy0);
    P.xy[1] = reinterpret_cast<float2 *>(xy1);
    P.ix[0] = ix0;
    P.ix[1] = ix1;
    P.nodes = nodes;
    P.keys = keys;
    P.st = state;
    P.tasks = static_cast<Task *>(tasks);
    P.tiles = static_cast<uint4 *>(tiles);
    P.node_cap = node_cap;
    P.task_cap = task_cap;
    P.tile_cap = tile_cap;
    P.max_depth = max_depth;
    P.min_points = min_points;
    P.small_max = small_max;
    P.big_min = big_min;
    P.nest_cap = nest_cap;
    P.inline_small = inline_small;
    P.level_mode = level_mode;
    P.dyn_smem = small_max * (uint32_t)(sizeof(float2) + sizeof(uint32_t) + 2 * sizeof(uint16_t));
    if (big && (task_cap < 1 || tile_cap < ntiles)) return cudaErrorInvalidValue;
    if (P.dyn_smem > 0) {
        e = cudaFuncSetAttribute(qt_node, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)P.dyn_smem);
        if (e != cudaSuccess) return e;
    }
    qt_setup<<<1, 1, 0, stream>>>(P, root[0], root[1], root[2], root[3], n, big ? ntiles : 0);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    if (n > 0) {
        qt_init<<<ntiles, kT, 0, stream>>>(P, d_xyz, dims, n, big ? 1 : 0, root[0], root[1],
                                           root[2], root[3]);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
    }
    if (big) {
        qt_prepare_root<<<1, kT, 0, stream>>>(P);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
        qt_big<<<ntiles, kT, 0, stream>>>(P, 0, 0);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
    } else if (split_root) {
        qt_node<<<1, kT, P.dyn_smem, stream>>>(P, 0, 1, 0);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
    }
    return cudaSuccess;
}
