/*
 * octree_cuda.cu - the CUDA backend of the octree: the batched build with warp-aggregated
 * counting and node spilling, the level-of-detail samples, the queries, and the counting pass
 * alone for the benchmark. octree.h defines the tree; everything here is a function of the grid
 * coordinates q (grove__ot_quantize), so the result equals the CPU backend's byte for byte.
 *
 * Build, per batch of points (all points at once for the device-resident build):
 *   1. find    each thread descends its point from the root through the nodes split so far to
 *              a leaf, remembers it (leaf[i]) and counts itself into it: the threads of a warp
 *              that hit the same leaf form one group (coalesced_threads + labeled_partition),
 *              whose leader adds the group's size with one atomicAdd; the leader whose add
 *              crosses max_points (at depth < max_depth) pushes the leaf on the spill list;
 *   2. split   every spilled leaf gets 8 children (empty ones are dropped at the end);
 *   3. descend every point (of this and earlier batches) whose leaf was split moves one level
 *              down and counts itself into the child as in 1; repeat 2-3 while anything spills.
 * A node's counter only grows, and a leaf is split exactly when its count first exceeds the
 * cap, so after the last batch the split nodes are exactly the inner nodes of octree.h,
 * whatever the batch size or the order in which atomics land.
 * Then:
 *   4. layout  the host walks the (small) node pool breadth-first, children in octant order,
 *              dropping empty octants, and numbers the final nodes;
 *   5. keys    each point's entry key is its final leaf: (leaf, input position) pairs in input
 *              order;
 *   6. lod     level by level, every point below an inner node of that level computes its
 *              voxel and its distance key (dist2 << 32 | position) and inserts (node, voxel)
 *              into an open-addressing hash table with a 64-bit atomicMin on the value (exact:
 *              the minimum is the nearest point, ties by position); the points that own their
 *              slot's minimum are compacted in input order and appended as (node, position)
 *              pairs. The table is sized by the points below that level (at most one voxel
 *              each), so memory grows with n, not with lod_grid^3;
 *   7. place   one stable radix sort of all pairs by node: every node's entries (a leaf's
 *              points or an inner node's sample) become one run in ascending input order, in
 *              node order, so entry e is sorted pair e; the runs' starts give begin/end and a
 *              gather writes index and xyz.
 */
#include <cuda_runtime.h>

#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core_cuda.h"
#include "octree_cuda.h"

namespace cg = cooperative_groups;

namespace
{

typedef grove_octree_node Node;
typedef unsigned long long u64;

const uint32_t kNone = 0xFFFFFFFFu;
const u64 kEmpty = ~0ull;
const int kBlock = 256;
const int kStack = 232; /* 7 per level below the root + 8: a query's descent never needs more */

unsigned blocks_for(size_t n)
{
    size_t b = (n + kBlock - 1) / kBlock;
    return (unsigned)(b < 1 ? 1 : b);
}

int bits_for(uint64_t v) /* bits needed to hold values 0..v */
{
    int b = 1;
    while (b < 64 && (v >> b) != 0) b++;
    return b;
}

/* Device scratch of one call: every buffer is freed when the arena goes out of scope, so the
 * entry points can return on the first failure. */
struct Arena {
    grove_ctx *ctx;
    cudaStream_t s;
    struct Blk {
        void *p;
        size_t bytes;
    } blk[48];
    int nb;

    Arena(grove_ctx *c) : ctx(c), s((cudaStream_t)c->stream), nb(0) {}
    ~Arena()
    {
        for (int i = 0; i < nb; i++) grove__cuda_free(ctx, blk[i].p, blk[i].bytes, s);
    }
    template <typename T> grove_status get(T **p, size_t count, const char *what)
    {
        void *v = NULL;
        *p = NULL;
        if (nb == (int)(sizeof blk / sizeof blk[0]))
            return grove__error(ctx, GROVE_ERR_INTERNAL, "octree (CUDA): too many scratch buffers");
        const size_t bytes = count > 0 ? count * sizeof(T) : 1; /* never a NULL buffer */
        GROVE_TRY(grove__cuda_alloc(ctx, &v, bytes, s, what));
        blk[nb].p = v;
        blk[nb].bytes = bytes;
        nb++;
        *p = (T *)v;
        return GROVE_OK;
    }
    void put(void *p)
    {
        for (int i = 0; i < nb; i++)
            if (blk[i].p == p) {
                grove__cuda_free(ctx, p, blk[i].bytes, s);
                blk[i] = blk[--nb];
                return;
            }
    }
    /* Grows *p from `have` to `want` elements, keeping the first `keep`. */
    template <typename T>
    grove_status grow(T **p, size_t keep, size_t want, const char *what)
    {
        T *n = NULL;
        GROVE_TRY(get(&n, want, what));
        if (keep)
            GROVE_CUDA_TRY(ctx, cudaMemcpyAsync(n, *p, keep * sizeof(T), cudaMemcpyDeviceToDevice, s),
                           what);
        if (*p) put(*p);
        *p = n;
        return GROVE_OK;
    }
};

/* Pinned host memory of one call. */
struct Pinned {
    void *p;
    Pinned() : p(NULL) {}
    ~Pinned()
    {
        if (p) cudaFreeHost(p);
    }
};

struct MinOp {
    __device__ double operator()(double a, double b) const { return b < a ? b : a; }
};
struct MaxOp {
    __device__ double operator()(double a, double b) const { return b > a ? b : a; }
};

__device__ __forceinline__ void load_q(const uint32_t *__restrict__ q, size_t i, uint32_t p[3])
{
    p[0] = q[3 * i];
    p[1] = q[3 * i + 1];
    p[2] = q[3 * i + 2];
}

/* ---- the cube (device-resident build) ---- */

__global__ void bbox_kernel(const double *__restrict__ xyz, size_t n, double *__restrict__ part)
{
    typedef cub::BlockReduce<double, kBlock> BR;
    __shared__ typename BR::TempStorage tmp;
    double mn[3] = {INFINITY, INFINITY, INFINITY}, mx[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x; i < n;
         i += (size_t)gridDim.x * kBlock)
        for (int a = 0; a < 3; a++) {
            double v = xyz[3 * i + a];
            mn[a] = v < mn[a] ? v : mn[a];
            mx[a] = v > mx[a] ? v : mx[a];
        }
    for (int a = 0; a < 3; a++) {
        double r = BR(tmp).Reduce(mn[a], MinOp());
        if (threadIdx.x == 0) part[6 * blockIdx.x + a] = r;
        __syncthreads();
        r = BR(tmp).Reduce(mx[a], MaxOp());
        if (threadIdx.x == 0) part[6 * blockIdx.x + 3 + a] = r;
        __syncthreads();
    }
}

__global__ void quantize_kernel(const double *__restrict__ xyz, size_t n, uint32_t *__restrict__ q,
                                double lo0, double lo1, double lo2, double to_grid)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= 3 * n) return;
    const int a = (int)(i % 3);
    const double lo = a == 0 ? lo0 : (a == 1 ? lo1 : lo2);
    q[i] = grove__ot_quantize(xyz[i], lo, to_grid);
}

/* ---- 1-3. counting and spilling ---- */

struct Pool {
    uint32_t *child; /* first of 8 children, kNone for a leaf */
    uint32_t *count; /* points counted into the node while it was a leaf */
    uint8_t *depth;
    uint32_t *spill; /* nodes that crossed the cap this round */
    uint32_t *nspill;
};

/* The seed's counting step: one atomicAdd per group of threads of the warp with the same leaf;
 * the leader whose add crosses the cap pushes the leaf (once: only one add can cross). */
__device__ __forceinline__ void count_into(const Pool &P, uint32_t node, int max_depth,
                                           uint32_t max_points)
{
    cg::coalesced_group active = cg::coalesced_threads();
    cg::coalesced_group group = cg::labeled_partition(active, node);
    if (group.thread_rank() == 0) {
        const uint32_t k = group.num_threads();
        const uint32_t old = atomicAdd(&P.count[node], k);
        if (old <= max_points && old + k > max_points && P.depth[node] < max_depth)
            P.spill[atomicAdd(P.nspill, 1u)] = node;
    }
}

__global__ void find_kernel(Pool P, const uint32_t *__restrict__ q, size_t begin, size_t end,
                            uint32_t *__restrict__ leaf, int max_depth, uint32_t max_points)
{
    const size_t i = begin + blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= end) return;
    uint32_t p[3], node = 0, c;
    load_q(q, i, p);
    for (int d = 0; (c = P.child[node]) != kNone; d++) node = c + grove__ot_octant(p, d);
    leaf[i] = node;
    count_into(P, node, max_depth, max_points);
}

__global__ void descend_kernel(Pool P, const uint32_t *__restrict__ q, size_t end,
                               uint32_t *__restrict__ leaf, int max_depth, uint32_t max_points)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= end) return;
    uint32_t node = leaf[i];
    const uint32_t c = P.child[node];
    if (c == kNone) return;
    uint32_t p[3];
    load_q(q, i, p);
    node = c + grove__ot_octant(p, P.depth[node]);
    leaf[i] = node;
    count_into(P, node, max_depth, max_points);
}

__global__ void split_kernel(Pool P, uint32_t ns, uint32_t base)
{
    const uint32_t t = blockIdx.x * kBlock + threadIdx.x;
    if (t >= 8u * ns) return;
    const uint32_t s = t >> 3, node = P.spill[s], c = base + 8u * s + (t & 7u);
    P.count[c] = 0;
    P.child[c] = kNone;
    P.depth[c] = (uint8_t)(P.depth[node] + 1);
    if ((t & 7u) == 0) P.child[node] = base + 8u * s;
}

/* ---- 5. placement ---- */

__global__ void leaf_keys_kernel(const uint32_t *__restrict__ leaf, size_t n,
                                 const uint32_t *__restrict__ final_of, uint32_t *__restrict__ key,
                                 uint32_t *__restrict__ pos)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= n) return;
    key[i] = final_of[leaf[i]];
    pos[i] = (uint32_t)i;
}

/* ---- 6. level-of-detail samples ---- */

__device__ __forceinline__ u64 mix64(u64 z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* anc[i]: the point's node at depth d (kNone once it reached its leaf). */
__global__ void lod_insert_kernel(const uint32_t *__restrict__ q, size_t n, int d, int g,
                                  const Node *__restrict__ nodes, uint32_t *__restrict__ anc,
                                  u64 *__restrict__ hkey, u64 *__restrict__ hval, u64 mask,
                                  uint32_t *__restrict__ slot)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= n) return;
    const uint32_t a = anc[i];
    const uint32_t fc = a == kNone ? kNone : nodes[a].first_child;
    if (fc == kNone) {
        anc[i] = kNone;
        slot[i] = kNone;
        return;
    }
    uint32_t p[3], dist2;
    load_q(q, i, p);
    const uint32_t vox = grove__ot_voxel(p, d, g, &dist2);
    const u64 key = ((u64)a << 30) | vox, val = ((u64)dist2 << 32) | (u64)i;
    u64 h = mix64(key) & mask;
    for (;;) {
        u64 k = hkey[h];
        if (k == kEmpty) {
            k = atomicCAS(&hkey[h], kEmpty, key);
            if (k == kEmpty) k = key;
        }
        if (k == key) break;
        h = (h + 1) & mask;
    }
    atomicMin(&hval[h], val);
    slot[i] = (uint32_t)h;
    const unsigned o = grove__ot_octant(p, d);
    anc[i] = fc + __popc(nodes[a].child_mask & ((1u << o) - 1u));
}

__global__ void lod_flag_kernel(size_t n, const uint32_t *__restrict__ slot,
                                const u64 *__restrict__ hval, uint8_t *__restrict__ flag)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= n) return;
    const uint32_t s = slot[i];
    flag[i] = s != kNone && (uint32_t)hval[s] == (uint32_t)i;
}

/* The node of each winner (position pos[j]): the one its slot's key names. */
__global__ void lod_node_kernel(const uint32_t *__restrict__ pos, size_t m,
                                const uint32_t *__restrict__ slot, const u64 *__restrict__ hkey,
                                uint32_t *__restrict__ key)
{
    const size_t j = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (j >= m) return;
    key[j] = (uint32_t)(hkey[slot[pos[j]]] >> 30);
}

/* ---- 5, 7. bounds and gather ---- */

__global__ void bounds_kernel(const uint32_t *__restrict__ skey, size_t m, u64 *__restrict__ begin)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= m) return;
    if (i == 0 || skey[i] != skey[i - 1]) begin[skey[i]] = i;
}

__global__ void gather_kernel(const uint32_t *__restrict__ pos, size_t m,
                              const double *__restrict__ xyz, uint32_t *__restrict__ index,
                              double *__restrict__ exyz)
{
    const size_t e = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (e >= m) return;
    const uint32_t p = pos[e];
    index[e] = p;
    if (xyz) {
        exyz[3 * e] = xyz[3 * (size_t)p];
        exyz[3 * e + 1] = xyz[3 * (size_t)p + 1];
        exyz[3 * e + 2] = xyz[3 * (size_t)p + 2];
    }
}

/* ---- the build driver ---- */

struct Build {
    grove_ctx *ctx;
    Arena A;
    grove_octree *t;
    size_t n;
    uint32_t *q, *leaf;
    Pool P;
    size_t pool_size, pool_cap;
    uint32_t spill_rounds;
    Build(grove_ctx *c, grove_octree *tr) : ctx(c), A(c), t(tr), n(tr->n), q(NULL), leaf(NULL)
    {
        memset(&P, 0, sizeof P);
        pool_size = pool_cap = 0;
        spill_rounds = 0;
    }
};

grove_status pool_reserve(Build &B, size_t want)
{
    if (want <= B.pool_cap) return GROVE_OK;
    if (want > (size_t)kNone - 8)
        return grove__error(B.ctx, GROVE_ERR_LIMIT,
                            "octree (CUDA): more than 2^32 candidate nodes during the build");
    size_t cap = B.pool_cap ? B.pool_cap : 1024;
    while (cap < want) cap *= 2;
    if (cap > (size_t)kNone - 8) cap = (size_t)kNone - 8;
    GROVE_TRY(B.A.grow(&B.P.child, B.pool_size, cap, "octree node pool (children)"));
    GROVE_TRY(B.A.grow(&B.P.count, B.pool_size, cap, "octree node pool (counts)"));
    GROVE_TRY(B.A.grow(&B.P.depth, B.pool_size, cap, "octree node pool (depths)"));
    /* the spill list of the round being split must survive */
    GROVE_TRY(B.A.grow(&B.P.spill, B.pool_cap, cap, "octree spill list"));
    B.pool_cap = cap;
    return GROVE_OK;
}

grove_status build_init(Build &B)
{
    GROVE_TRY(B.A.get(&B.q, 3 * B.n, "octree grid coordinates"));
    GROVE_TRY(B.A.get(&B.leaf, B.n, "octree point leaves"));
    GROVE_TRY(B.A.get(&B.P.nspill, 1, "octree spill counter"));
    size_t guess = 1 + 8 * (B.n / (B.t->opts.max_points ? B.t->opts.max_points : 1) + 1);
    GROVE_TRY(pool_reserve(B, guess < (1u << 20) ? guess : (1u << 20)));
    GROVE_CUDA_TRY(B.ctx, cudaMemsetAsync(B.P.child, 0xFF, sizeof(uint32_t), B.A.s),
                   "octree root init");
    GROVE_CUDA_TRY(B.ctx, cudaMemsetAsync(B.P.count, 0, sizeof(uint32_t), B.A.s),
                   "octree root init");
    GROVE_CUDA_TRY(B.ctx, cudaMemsetAsync(B.P.depth, 0, 1, B.A.s), "octree root init");
    B.pool_size = 1;
    return GROVE_OK;
}

/* Steps 1-3 for points [begin, end), whose q are on the device. */
grove_status count_batch(Build &B, size_t begin, size_t end)
{
    grove_ctx *ctx = B.ctx;
    const cudaStream_t s = B.A.s;
    const int md = B.t->opts.max_depth;
    const uint32_t mp = B.t->opts.max_points;
    uint32_t ns = 0;
    if (end == begin) return GROVE_OK;
    GROVE_CUDA_TRY(ctx, cudaMemsetAsync(B.P.nspill, 0, sizeof(uint32_t), s), "octree count");
    find_kernel<<<blocks_for(end - begin), kBlock, 0, s>>>(B.P, B.q, begin, end, B.leaf, md, mp);
    GROVE_CUDA_LAUNCHED(ctx, "octree find kernel");
    for (;;) {
        GROVE_CUDA_TRY(ctx, cudaMemcpyAsync(&ns, B.P.nspill, sizeof ns, cudaMemcpyDeviceToHost, s),
                       "octree spill count");
        GROVE_TRY(grove__cuda_sync(ctx, s, "octree count pass"));
        if (ns == 0) return GROVE_OK;
        B.spill_rounds++;
        const size_t base = B.pool_size;
        GROVE_TRY(pool_reserve(B, base + 8 * (size_t)ns));
        split_kernel<<<blocks_for(8 * (size_t)ns), kBlock, 0, s>>>(B.P, ns, (uint32_t)base);
        GROVE_CUDA_LAUNCHED(ctx, "octree split kernel");
        B.pool_size = base + 8 * (size_t)ns;
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(B.P.nspill, 0, sizeof(uint32_t), s), "octree count");
        descend_kernel<<<blocks_for(end), kBlock, 0, s>>>(B.P, B.q, end, B.leaf, md, mp);
        GROVE_CUDA_LAUNCHED(ctx, "octree descend kernel");
    }
}

struct HostLayout {
    Node *nodes;
    uint32_t *final_of; /* pool id -> final id */
    size_t num_nodes;
    HostLayout() : nodes(NULL), final_of(NULL), num_nodes(0) {}
    ~HostLayout()
    {
        free(nodes);
        free(final_of);
    }
};

/* Step 4 on the host: the pool holds a few nodes per max_points points. */
grove_status layout(Build &B, HostLayout &L)
{
    grove_ctx *ctx = B.ctx;
    const size_t P = B.pool_size;
    uint32_t *child = (uint32_t *)malloc(P * sizeof *child);
    uint32_t *count = (uint32_t *)malloc(P * sizeof *count);
    uint32_t *order = (uint32_t *)malloc(P * sizeof *order);
    uint32_t *parent = (uint32_t *)malloc(P * sizeof *parent);
    L.nodes = (Node *)calloc(P, sizeof *L.nodes);
    L.final_of = (uint32_t *)malloc(P * sizeof *L.final_of);
    grove_status st = GROVE_OK;
    if (!child || !count || !order || !parent || !L.nodes || !L.final_of) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "octree (CUDA): out of memory for %zu "
                          "nodes' layout", P);
        goto _end;
    }
    st = grove__cuda_d2h(ctx, child, B.P.child, P * sizeof *child, B.A.s);
    if (st == GROVE_OK) st = grove__cuda_d2h(ctx, count, B.P.count, P * sizeof *count, B.A.s);
    if (st == GROVE_OK) st = grove__cuda_sync(ctx, B.A.s, "octree node pool download");
    if (st != GROVE_OK) goto _end;
    {
        size_t cnt = 1;
        memset(L.final_of, 0xFF, P * sizeof *L.final_of);
        order[0] = 0;
        L.final_of[0] = 0;
        parent[0] = kNone;
        for (size_t k = 0; k < cnt; k++) {
            Node *nd = &L.nodes[k];
            const uint32_t pid = order[k];
            nd->first_child = kNone;
            if (child[pid] == kNone) {
                nd->total = count[pid];
                continue;
            }
            nd->total = 0;
            for (unsigned o = 0; o < 8; o++) {
                const uint32_t c = child[pid] + o;
                if (count[c] == 0) continue;
                Node *cn = &L.nodes[cnt];
                if (nd->child_mask == 0) nd->first_child = (uint32_t)cnt;
                nd->child_mask |= (uint8_t)(1u << o);
                cn->depth = (uint8_t)(nd->depth + 1);
                cn->octant = (uint8_t)o;
                cn->cell[0] = 2 * nd->cell[0] + (o & 1u);
                cn->cell[1] = 2 * nd->cell[1] + ((o >> 1) & 1u);
                cn->cell[2] = 2 * nd->cell[2] + ((o >> 2) & 1u);
                order[cnt] = c;
                parent[cnt] = (uint32_t)k;
                L.final_of[c] = (uint32_t)cnt;
                cnt++;
            }
        }
        for (size_t k = cnt; k-- > 1;) L.nodes[parent[k]].total += L.nodes[k].total;
        L.num_nodes = cnt;
    }
_end:
    free(child);
    free(count);
    free(order);
    free(parent);
    return st;
}

void free_tree_device(grove_octree *t);

/* Steps 4-7. d_xyz: the points on the device, or NULL (the host build fills xyz itself). */
grove_status finish(Build &B, const double *d_xyz, grove_octree_stats *stats)
{
    grove_ctx *ctx = B.ctx;
    grove_octree *t = B.t;
    const cudaStream_t s = B.A.s;
    const size_t n = B.n;
    HostLayout L;
    double t0 = grove__ot_now_ms();

    GROVE_TRY(layout(B, L));
    const size_t nn = L.num_nodes;
    const int kb = bits_for(nn ? nn - 1 : 0);
    int depth = 0;
    for (size_t k = 0; k < nn; k++) depth = L.nodes[k].depth > depth ? L.nodes[k].depth : depth;

    /* Entry keys (final node, input position): the leaves' points in input order, then each
     * level's sample winners in input order; one stable sort by node puts every node's entries
     * together, ascending. */
    uint32_t *final_of, *key, *val;
    size_t kcap = n ? n : 1, S = 0;
    GROVE_TRY(B.A.get(&final_of, B.pool_size, "octree node map"));
    GROVE_TRY(grove__cuda_h2d(ctx, final_of, L.final_of, B.pool_size * sizeof *final_of, s));
    GROVE_TRY(B.A.get(&key, kcap, "octree entry keys"));
    GROVE_TRY(B.A.get(&val, kcap, "octree entry positions"));
    if (n) {
        leaf_keys_kernel<<<blocks_for(n), kBlock, 0, s>>>(B.leaf, n, final_of, key, val);
        GROVE_CUDA_LAUNCHED(ctx, "octree leaf keys kernel");
    }
    B.A.put(final_of);
    B.A.put(B.leaf);
    B.leaf = NULL;
    const double t_keys = grove__ot_now_ms() - t0;
    t0 = grove__ot_now_ms();

    /* 6. lod samples */
    const int g = grove__ot_log2_grid(t->opts.lod_grid);
    if (t->opts.lod_grid && nn > 1 && n) {
        Node *d_nodes;
        uint32_t *anc, *slot;
        uint8_t *flag;
        u64 *nsel;
        GROVE_TRY(B.A.get(&d_nodes, nn, "octree nodes"));
        GROVE_TRY(grove__cuda_h2d(ctx, d_nodes, L.nodes, nn * sizeof(Node), s));
        GROVE_TRY(B.A.get(&anc, n, "octree lod ancestors"));
        GROVE_TRY(B.A.get(&slot, n, "octree lod slots"));
        GROVE_TRY(B.A.get(&flag, n, "octree lod winners"));
        GROVE_TRY(B.A.get(&nsel, 1, "octree sample counter"));
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(anc, 0, n * sizeof(uint32_t), s), "octree lod");
        for (int d = 0; d < depth; d++) {
            /* points below the inner nodes of depth d, and those nodes */
            uint64_t below = 0, inner = 0;
            for (size_t k = 0; k < nn; k++)
                if (L.nodes[k].depth > d && L.nodes[k].first_child == kNone)
                    below += L.nodes[k].total;
                else if (L.nodes[k].depth == d && L.nodes[k].first_child != kNone)
                    inner++;
            if (inner == 0) break;
            uint64_t bound = below;
            if (3 * g < 40 && inner < (1ull << 24) && inner << (3 * g) < bound)
                bound = inner << (3 * g);
            if (bound >= (1ull << 31))
                return grove__error(ctx, GROVE_ERR_DEVICE_OUT_OF_MEMORY,
                                    "octree (CUDA): the level-of-detail table of depth %d would "
                                    "need %llu slots (at most 2^31)",
                                    d, (unsigned long long)bound);
            uint64_t cap = 1024;
            while (cap < bound + bound / 2 + 1) cap *= 2;
            if (cap > (1ull << 31)) cap = 1ull << 31;
            if (n + S + bound > kcap) {
                size_t want = 2 * kcap;
                if (want < n + S + bound) want = n + S + bound;
                GROVE_TRY(B.A.grow(&key, n + S, want, "octree entry keys"));
                GROVE_TRY(B.A.grow(&val, n + S, want, "octree entry positions"));
                kcap = want;
            }
            u64 *hkey, *hval;
            GROVE_TRY(B.A.get(&hkey, cap, "octree lod hash keys"));
            GROVE_TRY(B.A.get(&hval, cap, "octree lod hash values"));
            GROVE_CUDA_TRY(ctx, cudaMemsetAsync(hkey, 0xFF, cap * sizeof(u64), s), "octree lod");
            GROVE_CUDA_TRY(ctx, cudaMemsetAsync(hval, 0xFF, cap * sizeof(u64), s), "octree lod");
            lod_insert_kernel<<<blocks_for(n), kBlock, 0, s>>>(B.q, n, d, g, d_nodes, anc, hkey,
                                                               hval, cap - 1, slot);
            GROVE_CUDA_LAUNCHED(ctx, "octree lod insert kernel");
            lod_flag_kernel<<<blocks_for(n), kBlock, 0, s>>>(n, slot, hval, flag);
            GROVE_CUDA_LAUNCHED(ctx, "octree lod winners kernel");
            /* the winners' positions, ascending, appended after the entries so far */
            size_t tb = 0;
            void *tmp = NULL;
            thrust::counting_iterator<uint32_t> pos0(0);
            GROVE_CUDA_TRY(ctx, cub::DeviceSelect::Flagged(NULL, tb, pos0, flag, val + n + S, nsel,
                                                           n, s),
                           "octree lod select (size)");
            GROVE_TRY(B.A.get((char **)&tmp, tb, "octree lod select scratch"));
            GROVE_CUDA_TRY(ctx, cub::DeviceSelect::Flagged(tmp, tb, pos0, flag, val + n + S, nsel,
                                                           n, s),
                           "octree lod select");
            B.A.put(tmp);
            u64 m = 0;
            GROVE_CUDA_TRY(ctx, cudaMemcpyAsync(&m, nsel, sizeof m, cudaMemcpyDeviceToHost, s),
                           "octree sample count");
            GROVE_TRY(grove__cuda_sync(ctx, s, "octree lod level"));
            if (m > bound)
                return grove__error(ctx, GROVE_ERR_INTERNAL,
                                    "octree (CUDA): %llu samples at depth %d, bound %llu",
                                    (unsigned long long)m, d, (unsigned long long)bound);
            if (m) {
                lod_node_kernel<<<blocks_for(m), kBlock, 0, s>>>(val + n + S, m, slot, hkey,
                                                                 key + n + S);
                GROVE_CUDA_LAUNCHED(ctx, "octree lod node kernel");
            }
            S += m;
            B.A.put(hkey);
            B.A.put(hval);
        }
        B.A.put(anc);
        B.A.put(slot);
        B.A.put(flag);
        B.A.put(d_nodes);
        GROVE_TRY(grove__cuda_sync(ctx, s, "octree lod samples"));
    }
    const double t_lod = grove__ot_now_ms() - t0;
    t0 = grove__ot_now_ms();

    /* 5/7. one stable sort by node; entry e is sorted item e */
    const size_t ne = n + S;
    uint32_t *skey, *sval;
    u64 *dbegin;
    GROVE_TRY(B.A.get(&skey, ne, "octree sorted entry keys"));
    GROVE_TRY(B.A.get(&sval, ne, "octree sorted entry positions"));
    if (ne) {
        size_t tb = 0;
        void *tmp = NULL;
        GROVE_CUDA_TRY(ctx, cub::DeviceRadixSort::SortPairs(NULL, tb, key, skey, val, sval, ne, 0,
                                                            kb, s),
                       "octree entry sort (size)");
        GROVE_TRY(B.A.get((char **)&tmp, tb, "octree entry sort scratch"));
        GROVE_CUDA_TRY(ctx, cub::DeviceRadixSort::SortPairs(tmp, tb, key, skey, val, sval, ne, 0,
                                                            kb, s),
                       "octree entry sort");
        B.A.put(tmp);
    }
    B.A.put(key);
    B.A.put(val);
    GROVE_TRY(B.A.get(&dbegin, nn, "octree node begins"));
    GROVE_CUDA_TRY(ctx, cudaMemsetAsync(dbegin, 0xFF, nn * sizeof(u64), s), "octree begins");
    if (ne) {
        bounds_kernel<<<blocks_for(ne), kBlock, 0, s>>>(skey, ne, dbegin);
        GROVE_CUDA_LAUNCHED(ctx, "octree node bounds kernel");
    }
    uint32_t *d_index = NULL;
    double *d_exyz = NULL;
    Node *d_tnodes = NULL;
    t->dev_ctx = ctx;
    t->num_nodes = nn;
    t->num_entries = ne;
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&d_index, ne * sizeof(uint32_t), s,
                                "octree entry indices"));
    t->d_index = d_index;
    if (d_xyz) {
        GROVE_TRY(grove__cuda_alloc(ctx, (void **)&d_exyz, 3 * ne * sizeof(double), s,
                                    "octree entry coordinates"));
        t->d_xyz = d_exyz;
    }
    if (ne) {
        gather_kernel<<<blocks_for(ne), kBlock, 0, s>>>(sval, ne, d_xyz, d_index, d_exyz);
        GROVE_CUDA_LAUNCHED(ctx, "octree gather kernel");
    }
    {
        u64 *hb = (u64 *)malloc(nn * sizeof *hb);
        struct F {
            u64 *p;
            ~F() { free(p); }
        } fg = {hb};
        if (!hb) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "octree (CUDA): out of memory");
        GROVE_TRY(grove__cuda_d2h(ctx, hb, dbegin, nn * sizeof *hb, s));
        GROVE_TRY(grove__cuda_sync(ctx, s, "octree node begins"));
        u64 next = ne;
        for (size_t k = nn; k-- > 0;) {
            Node *nd = &L.nodes[k];
            if (hb[k] != kEmpty) {
                nd->begin = hb[k];
                nd->end = next;
                next = hb[k];
            } else {
                nd->begin = nd->end = next;
            }
            if (nd->first_child == kNone && nd->end - nd->begin != nd->total)
                return grove__error(ctx, GROVE_ERR_INTERNAL,
                                    "octree (CUDA): leaf %zu has %llu entries for %llu points", k,
                                    (unsigned long long)(nd->end - nd->begin),
                                    (unsigned long long)nd->total);
        }
    }
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&d_tnodes, nn * sizeof(Node), s, "octree nodes"));
    t->d_nodes = d_tnodes;
    GROVE_TRY(grove__cuda_h2d(ctx, d_tnodes, L.nodes, nn * sizeof(Node), s));
    t->depth = depth;
    GROVE_TRY(grove__cuda_sync(ctx, s, "octree gather"));
    if (stats) {
        stats->ms_place = t_keys + (grove__ot_now_ms() - t0);
        stats->ms_lod = t_lod;
        stats->spill_rounds = B.spill_rounds;
    }
    return GROVE_OK;
}

void free_tree_device(grove_octree *t)
{
    grove_ctx *c = t->dev_ctx;
    if (!c) return;
    grove__cuda_use(c);
    grove__cuda_free(c, t->d_nodes, t->num_nodes * sizeof(Node), c->stream);
    grove__cuda_free(c, t->d_index, t->num_entries ? t->num_entries * sizeof(uint32_t) : 0,
                     c->stream);
    grove__cuda_free(c, t->d_xyz, t->num_entries ? 3 * t->num_entries * sizeof(double) : 0,
                     c->stream);
    t->d_nodes = NULL;
    t->d_index = NULL;
    t->d_xyz = NULL;
    t->dev_ctx = NULL;
}

grove_status download(grove_ctx *ctx, grove_octree *t)
{
    const size_t nn = t->num_nodes, ne = t->num_entries;
    const cudaStream_t s = (cudaStream_t)ctx->stream;
    Node *nodes = (Node *)malloc((nn ? nn : 1) * sizeof *nodes);
    uint32_t *index = (uint32_t *)malloc((ne ? ne : 1) * sizeof *index);
    double *xyz = (double *)malloc((ne ? 3 * ne : 1) * sizeof *xyz);
    grove_status st = GROVE_OK;
    if (!nodes || !index || !xyz) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "octree download: out of memory for %zu nodes and %zu entries", nn, ne);
        goto _fail;
    }
    grove__prefault(index, ne * sizeof *index, grove__threads(ctx));
    st = grove__cuda_d2h(ctx, nodes, t->d_nodes, nn * sizeof *nodes, s);
    if (st == GROVE_OK) st = grove__cuda_d2h(ctx, index, t->d_index, ne * sizeof *index, s);
    if (st == GROVE_OK && t->d_xyz) {
        grove__prefault(xyz, 3 * ne * sizeof *xyz, grove__threads(ctx));
        st = grove__cuda_d2h(ctx, xyz, t->d_xyz, 3 * ne * sizeof *xyz, s);
    }
    if (st == GROVE_OK) st = grove__cuda_sync(ctx, s, "octree download");
    if (st != GROVE_OK) goto _fail;
    t->nodes = nodes;
    t->index = index;
    t->xyz = xyz;
    return GROVE_OK;
_fail:
    free(nodes);
    free(index);
    free(xyz);
    return st;
}

/* ---- queries ---- */

struct QTree {
    const Node *nodes;
    const uint32_t *index;
    const double *xyz;
    double lo[3], side;
};

/* The node's cube widened by a margin far above the rounding of quantization, so that no point
 * of the node falls outside it; the exact test is on the points. */
__device__ __forceinline__ void node_box(const QTree &T, const Node &nd, double blo[3],
                                         double bhi[3])
{
    const double w = ldexp(T.side, -(int)nd.depth);
    for (int a = 0; a < 3; a++) {
        const double m = 1e-12 * (fabs(T.lo[a]) + T.side);
        blo[a] = T.lo[a] + (double)nd.cell[a] * w - m;
        bhi[a] = T.lo[a] + (double)(nd.cell[a] + 1u) * w + m;
    }
}

template <bool Radius>
__global__ void query_kernel(QTree T, const double *__restrict__ qs, const double *__restrict__ radii,
                             size_t nq, const u64 *__restrict__ offsets, u64 *__restrict__ counts,
                             uint32_t *__restrict__ out)
{
    const size_t qi = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (qi >= nq) return;
    double b[6], c[3], r = 0, r2 = 0;
    if (Radius) {
        for (int a = 0; a < 3; a++) c[a] = qs[3 * qi + a];
        r = radii[qi];
        r2 = __dmul_rn(r, r);
    } else {
        for (int a = 0; a < 6; a++) b[a] = qs[6 * qi + a];
    }
    uint32_t stack[kStack];
    int sp = 0;
    stack[sp++] = 0;
    u64 cnt = 0, w = out ? offsets[qi] : 0;
    while (sp > 0) {
        const Node nd = T.nodes[stack[--sp]];
        double blo[3], bhi[3];
        node_box(T, nd, blo, bhi);
        bool hit = true;
        if (Radius) {
            double acc = 0;
            for (int a = 0; a < 3; a++) {
                double e = blo[a] - c[a] > 0 ? blo[a] - c[a] : (c[a] - bhi[a] > 0 ? c[a] - bhi[a] : 0);
                acc += e * e;
            }
            hit = acc <= r2 * (1.0 + 1e-9) + 1e-300;
        } else {
            for (int a = 0; a < 3; a++) hit = hit && b[a] <= bhi[a] && b[3 + a] >= blo[a];
        }
        if (!hit) continue;
        if (nd.first_child != kNone) {
            const int k = __popc(nd.child_mask);
            for (int j = k - 1; j >= 0; j--) stack[sp++] = nd.first_child + (uint32_t)j;
            continue;
        }
        for (u64 e = nd.begin; e < nd.end; e++) {
            const double x = T.xyz[3 * e], y = T.xyz[3 * e + 1], z = T.xyz[3 * e + 2];
            bool m;
            if (Radius) {
                const double dx = __dsub_rn(x, c[0]), dy = __dsub_rn(y, c[1]),
                             dz = __dsub_rn(z, c[2]);
                m = __dadd_rn(__dadd_rn(__dmul_rn(dx, dx), __dmul_rn(dy, dy)), __dmul_rn(dz, dz)) <=
                    r2;
            } else {
                m = b[0] <= x && x <= b[3] && b[1] <= y && y <= b[4] && b[2] <= z && z <= b[5];
            }
            if (!m) continue;
            if (out)
                out[w++] = T.index[e];
            else
                cnt++;
        }
    }
    if (!out) counts[qi] = cnt;
}

grove_status run_query(grove_ctx *ctx, const grove_octree *t, const double *qs, size_t qstride,
                       const double *radii, size_t nq, grove_query_result *out)
{
    const cudaStream_t s = (cudaStream_t)ctx->stream;
    Arena A(ctx);
    uint64_t *off = (uint64_t *)malloc((nq + 1) * sizeof *off);
    uint32_t *ind = NULL;
    struct Owned {
        uint64_t **o;
        uint32_t **i;
        ~Owned()
        {
            if (*o) free(*o);
            if (*i) free(*i);
        }
    } own = {&off, &ind};
    if (!off)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "octree query: out of memory for %zu "
                            "offsets", nq + 1);
    memset(off, 0, (nq + 1) * sizeof *off);
    QTree T;
    for (int a = 0; a < 3; a++) T.lo[a] = t->lo[a];
    T.side = t->side;
    if (nq && t->n) {
        if (t->d_nodes && (t->dev_ctx == ctx || !t->nodes)) {
            T.nodes = t->d_nodes;
            T.index = t->d_index;
            T.xyz = t->d_xyz;
        } else {
            Node *dn;
            uint32_t *di;
            double *dx;
            GROVE_TRY(A.get(&dn, t->num_nodes, "octree query nodes"));
            GROVE_TRY(A.get(&di, t->num_entries, "octree query entries"));
            GROVE_TRY(A.get(&dx, 3 * t->num_entries, "octree query coordinates"));
            GROVE_TRY(grove__cuda_h2d(ctx, dn, t->nodes, t->num_nodes * sizeof(Node), s));
            GROVE_TRY(grove__cuda_h2d(ctx, di, t->index, t->num_entries * sizeof(uint32_t), s));
            GROVE_TRY(grove__cuda_h2d(ctx, dx, t->xyz, 3 * t->num_entries * sizeof(double), s));
            T.nodes = dn;
            T.index = di;
            T.xyz = dx;
        }
        double *dq, *dr = NULL;
        u64 *dcount, *doff;
        GROVE_TRY(A.get(&dq, qstride * nq, "octree queries"));
        GROVE_TRY(grove__cuda_h2d(ctx, dq, qs, qstride * nq * sizeof(double), s));
        if (radii) {
            GROVE_TRY(A.get(&dr, nq, "octree query radii"));
            GROVE_TRY(grove__cuda_h2d(ctx, dr, radii, nq * sizeof(double), s));
        }
        GROVE_TRY(A.get(&dcount, nq, "octree query counts"));
        if (radii)
            query_kernel<true><<<blocks_for(nq), kBlock, 0, s>>>(T, dq, dr, nq, NULL, dcount, NULL);
        else
            query_kernel<false><<<blocks_for(nq), kBlock, 0, s>>>(T, dq, dr, nq, NULL, dcount, NULL);
        GROVE_CUDA_LAUNCHED(ctx, "octree query count kernel");
        GROVE_TRY(grove__cuda_d2h(ctx, off + 1, dcount, nq * sizeof(u64), s));
        GROVE_TRY(grove__cuda_sync(ctx, s, "octree query count"));
        for (size_t i = 0; i < nq; i++) off[i + 1] += off[i];
        const size_t total = off[nq];
        ind = (uint32_t *)malloc((total ? total : 1) * sizeof *ind);
        if (!ind)
            return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                "octree query: out of memory for %zu matches", total);
        if (total) {
            uint32_t *dout, *dsorted;
            GROVE_TRY(A.get(&doff, nq + 1, "octree query offsets"));
            GROVE_TRY(grove__cuda_h2d(ctx, doff, off, (nq + 1) * sizeof(u64), s));
            GROVE_TRY(A.get(&dout, total, "octree query matches"));
            GROVE_TRY(A.get(&dsorted, total, "octree sorted matches"));
            if (radii)
                query_kernel<true><<<blocks_for(nq), kBlock, 0, s>>>(T, dq, dr, nq, doff, NULL,
                                                                     dout);
            else
                query_kernel<false><<<blocks_for(nq), kBlock, 0, s>>>(T, dq, dr, nq, doff, NULL,
                                                                      dout);
            GROVE_CUDA_LAUNCHED(ctx, "octree query write kernel");
            size_t tb = 0;
            void *tmp = NULL;
            GROVE_CUDA_TRY(ctx, cub::DeviceSegmentedSort::SortKeys(NULL, tb, dout, dsorted,
                                                                   (int64_t)total, (int64_t)nq,
                                                                   doff, doff + 1, s),
                           "octree query row sort (size)");
            GROVE_TRY(A.get((char **)&tmp, tb, "octree query sort scratch"));
            GROVE_CUDA_TRY(ctx, cub::DeviceSegmentedSort::SortKeys(tmp, tb, dout, dsorted,
                                                                   (int64_t)total, (int64_t)nq,
                                                                   doff, doff + 1, s),
                           "octree query row sort");
            GROVE_TRY(grove__cuda_d2h(ctx, ind, dsorted, total * sizeof *ind, s));
            GROVE_TRY(grove__cuda_sync(ctx, s, "octree query"));
        }
    } else {
        ind = (uint32_t *)malloc(sizeof *ind);
        if (!ind) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "octree query: out of memory");
    }
    out->num_queries = nq;
    out->offsets = off;
    out->indices = ind;
    off = NULL;
    ind = NULL;
    return GROVE_OK;
}

/* ---- counting pass alone (benchmark) ---- */

template <bool Agg>
__global__ void count_cells_kernel(const uint32_t *__restrict__ q, size_t n, int depth,
                                   uint32_t *__restrict__ counts)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= n) return;
    const int sh = GROVE_OCTREE_BITS - depth;
    uint32_t p[3];
    load_q(q, i, p);
    const uint32_t cell = (p[0] >> sh) | ((p[1] >> sh) << depth) | ((p[2] >> sh) << (2 * depth));
    if (Agg) {
        cg::coalesced_group active = cg::coalesced_threads();
        cg::coalesced_group group = cg::labeled_partition(active, cell);
        if (group.thread_rank() == 0) atomicAdd(&counts[cell], group.num_threads());
    } else {
        atomicAdd(&counts[cell], 1u);
    }
}

grove_status build_points_on_device(Build &B, const double *d_xyz)
{
    grove_ctx *ctx = B.ctx;
    grove_octree *t = B.t;
    const size_t n = B.n;
    if (n) {
        quantize_kernel<<<blocks_for(3 * n), kBlock, 0, B.A.s>>>(d_xyz, n, B.q, t->lo[0], t->lo[1],
                                                                 t->lo[2], t->to_grid);
        GROVE_CUDA_LAUNCHED(ctx, "octree quantize kernel");
    }
    return count_batch(B, 0, n);
}

} /* namespace */

extern "C" grove_status grove__ot_build_cuda_device(grove_ctx *ctx, const double *d_xyz,
                                                    grove_octree *t, grove_octree_stats *stats)
{
    const double t0 = grove__ot_now_ms();
    GROVE_TRY(grove__cuda_use(ctx));
    Build B(ctx, t);
    const size_t n = t->n;
    grove_status st;
    /* the cube: box on the device, cube on the host with the CPU backend's function */
    {
        double lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
        if (n) {
            const unsigned nb = blocks_for(n) < 1024 ? blocks_for(n) : 1024;
            double *part;
            double *hp = (double *)malloc(6 * nb * sizeof *hp);
            struct F {
                double *p;
                ~F() { free(p); }
            } fg = {hp};
            if (!hp) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "octree: out of memory");
            GROVE_TRY(B.A.get(&part, 6 * nb, "octree bounding box"));
            bbox_kernel<<<nb, kBlock, 0, B.A.s>>>(d_xyz, n, part);
            GROVE_CUDA_LAUNCHED(ctx, "octree bounding box kernel");
            GROVE_TRY(grove__cuda_d2h(ctx, hp, part, 6 * nb * sizeof *hp, B.A.s));
            GROVE_TRY(grove__cuda_sync(ctx, B.A.s, "octree bounding box"));
            for (int a = 0; a < 3; a++) {
                lo[a] = hp[a];
                hi[a] = hp[3 + a];
            }
            for (unsigned b = 1; b < nb; b++)
                for (int a = 0; a < 3; a++) {
                    lo[a] = hp[6 * b + a] < lo[a] ? hp[6 * b + a] : lo[a];
                    hi[a] = hp[6 * b + 3 + a] > hi[a] ? hp[6 * b + 3 + a] : hi[a];
                }
            B.A.put(part);
        }
        grove__ot_cube_from_box(lo, hi, t);
    }
    st = build_init(B);
    if (st == GROVE_OK) st = build_points_on_device(B, d_xyz);
    const double t1 = grove__ot_now_ms();
    if (st == GROVE_OK) st = finish(B, d_xyz, stats);
    if (st != GROVE_OK) {
        free_tree_device(t);
        return st;
    }
    if (stats) {
        stats->ms_count = t1 - t0;
        stats->batches = n ? 1 : 0;
        stats->ms_total = grove__ot_now_ms() - t0;
    }
    if (t->opts.progress) t->opts.progress(t->opts.progress_user, n, n);
    return GROVE_OK;
}

extern "C" grove_status grove__ot_build_cuda(grove_ctx *ctx, const double *xyz, grove_octree *t,
                                             grove_octree_stats *stats)
{
    const double t0 = grove__ot_now_ms();
    GROVE_TRY(grove__cuda_use(ctx));
    grove_status st = GROVE_OK;
    const size_t n = t->n;
    uint32_t batches = 0;
    {
        Build B(ctx, t);
        const size_t bs = t->opts.batch < n ? t->opts.batch : (n ? n : 1);
        Pinned stage;
        double *dbatch = NULL;
        st = build_init(B);
        if (st == GROVE_OK && n) {
            /* two staging halves: the host fills one while the GPU counts the other */
            if (cudaMallocHost(&stage.p, 2 * 3 * bs * sizeof(double)) != cudaSuccess) {
                cudaGetLastError();
                st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                  "octree (CUDA): cannot pin %zu bytes of host staging memory",
                                  2 * 3 * bs * sizeof(double));
            }
            if (st == GROVE_OK) st = B.A.get(&dbatch, 3 * bs, "octree batch coordinates");
            double *half[2] = {(double *)stage.p, (double *)stage.p + 3 * bs};
            if (st == GROVE_OK) memcpy(half[0], xyz, 3 * (bs < n ? bs : n) * sizeof(double));
            for (size_t b = 0, k = 0; st == GROVE_OK && b < n; b += bs, k++) {
                const size_t m = n - b < bs ? n - b : bs;
                st = grove__cuda_h2d(ctx, dbatch, half[k & 1], 3 * m * sizeof(double), B.A.s);
                if (st != GROVE_OK) break;
                quantize_kernel<<<blocks_for(3 * m), kBlock, 0, B.A.s>>>(
                    dbatch, m, B.q + 3 * b, t->lo[0], t->lo[1], t->lo[2], t->to_grid);
                cudaError_t e = cudaGetLastError();
                if (e != cudaSuccess) {
                    st = grove__cuda_status(ctx, (int)e, "octree quantize kernel");
                    break;
                }
                /* the previous use of the other half (batch k - 1's copy) has completed: the
                 * host synchronized on its spill counts */
                if (b + m < n) {
                    const size_t m2 = n - b - m < bs ? n - b - m : bs;
                    memcpy(half[(k + 1) & 1], xyz + 3 * (b + m), 3 * m2 * sizeof(double));
                }
                st = count_batch(B, b, b + m);
                batches++;
                if (st == GROVE_OK && t->opts.progress)
                    t->opts.progress(t->opts.progress_user, b + m, n);
            }
        }
        const double t1 = grove__ot_now_ms();
        if (st == GROVE_OK) st = finish(B, NULL, stats);
        if (st == GROVE_OK && stats) stats->ms_count = t1 - t0;
    }
    /* the tree comes to the host; xyz of the entries are gathered here from the input */
    if (st == GROVE_OK) st = download(ctx, t);
    free_tree_device(t);
    if (st != GROVE_OK) return st;
    for (size_t e = 0; e < t->num_entries; e++) {
        const size_t p = t->index[e];
        t->xyz[3 * e] = xyz[3 * p];
        t->xyz[3 * e + 1] = xyz[3 * p + 1];
        t->xyz[3 * e + 2] = xyz[3 * p + 2];
    }
    if (stats) {
        stats->batches = batches;
        stats->ms_total = grove__ot_now_ms() - t0;
    }
    if (n == 0 && t->opts.progress) t->opts.progress(t->opts.progress_user, 0, 0);
    return GROVE_OK;
}

extern "C" grove_status grove__ot_download_cuda(grove_ctx *ctx, grove_octree *t)
{
    if (t->nodes || !t->d_nodes) return GROVE_OK;
    GROVE_TRY(grove__cuda_use(t->dev_ctx ? t->dev_ctx : ctx));
    return download(t->dev_ctx ? t->dev_ctx : ctx, t);
}

extern "C" void grove__ot_free_device(grove_octree *t)
{
    if (t) free_tree_device(t);
}

extern "C" grove_status grove__ot_query_boxes_cuda(grove_ctx *ctx, const grove_octree *t,
                                                   const double *boxes, size_t nq,
                                                   grove_query_result *out)
{
    memset(out, 0, sizeof *out);
    GROVE_TRY(grove__cuda_use(ctx));
    return run_query(ctx, t, boxes, 6, NULL, nq, out);
}

extern "C" grove_status grove__ot_query_radius_cuda(grove_ctx *ctx, const grove_octree *t,
                                                    const double *centres, const double *radii,
                                                    size_t nq, grove_query_result *out)
{
    memset(out, 0, sizeof *out);
    GROVE_TRY(grove__cuda_use(ctx));
    return run_query(ctx, t, centres, 3, radii, nq, out);
}

extern "C" grove_status grove__ot_count_cells_cuda(grove_ctx *ctx, const uint32_t *d_q, size_t n,
                                                   int depth, int aggregated, uint32_t *d_counts)
{
    const cudaStream_t s = (cudaStream_t)ctx->stream;
    if (depth < 0 || depth > 10)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "octree count: depth %d not in 0..10",
                            depth);
    if (n == 0) return GROVE_OK;
    if (aggregated)
        count_cells_kernel<true><<<blocks_for(n), kBlock, 0, s>>>(d_q, n, depth, d_counts);
    else
        count_cells_kernel<false><<<blocks_for(n), kBlock, 0, s>>>(d_q, n, depth, d_counts);
    GROVE_CUDA_LAUNCHED(ctx, "octree count kernel");
    return GROVE_OK;
}
