/*
 * quadtree_recursive_cuda.cu - the host side of the CUDA recursive quadtree build
 * (grove__qt_build_recursive_cuda, declared in quadtree_cuda.h). The kernels, which launch each
 * other with dynamic parallelism, are in quadtree_cdp.cu (separate, relocatable device code); this
 * file allocates their buffers, raises the device runtime's pending-launch limit to what the input
 * can need, runs the build, retries it when the device reports a full node array or a refused
 * launch, and puts the nodes into the breadth-first layout of quadtree.h.
 *
 * Breadth-first order. The device allocates node records in whatever order the blocks run, each
 * with a key: a 1 bit followed by its quadrant path (two bits per level). Within a level,
 * breadth-first order is path order, and the leading 1 puts every level after the one above it,
 * so one radix sort of the keys gives the layout; first_child (a raw index) is then mapped
 * through the inverse permutation. A node's four children are consecutive in both orders.
 */
#include <cuda_runtime.h>

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "core_cuda.h"
#include "grove/prim.h"
#include "quadtree_cuda.h"

/* ---- the launcher in quadtree_cdp.cu ---- */

extern "C" void grove__qt_cdp_info(size_t *task_bytes, uint32_t *tile_points, uint32_t *state_words,
                                   uint32_t *smem_per_point);
extern "C" cudaError_t grove__qt_cdp_run(float *xy0, float *xy1, uint32_t *ix0, uint32_t *ix1,
                                         grove_quadtree_node *nodes, unsigned long long *keys,
                                         uint32_t node_cap, unsigned long long *state, void *tasks,
                                         uint32_t task_cap, void *tiles, uint32_t tile_cap,
                                         const float *d_xyz, int dims, uint32_t n,
                                         const float root[4], int max_depth, int min_points,
                                         uint32_t small_max, uint32_t big_min, int nest_cap,
                                         int inline_small, int level_mode, cudaStream_t stream);

/* The state words and flags the kernels leave (order and values fixed by quadtree_cdp.cuh). */
enum { S_NODES = 0, S_FLAGS, S_ERR, S_TASKS, S_TILES, S_LAUNCHES, S_NEST, S_COUNT = 8 };
enum { F_NODES = 1, F_LAUNCH = 2, F_POOL = 4, F_STACK = 8 };

namespace
{

typedef unsigned long long u64;

/* Granularity. small_max: a node of at most this many points is finished by one block in shared
 * memory (16 bytes a point). big_min: a node of more points is split by a grid of tiles instead
 * of one block. nest_cap: the deepest launch nesting used (the hardware allows 24).
 * inline_small: a block finishes its small children itself instead of launching them.
 * level_mode: small subtrees are built a level at a time (else depth first, node by node).
 * node_cap0 / pending0 (0 = derived from the input) let tests force the retry paths; profile
 * records phase times in the stats. */
struct Tune {
    u64 small_max, big_min, nest_cap, inline_small, node_cap0, pending0, level_mode, profile;
};
const Tune kDefaults = {2048, 65536, 20, 1, 0, 0, 1, 0};
Tune g_tune = kDefaults;

/* Figures of the last build, for benchmarks: attempts, device launches, deepest nesting, nodes,
 * pending-launch limit, node capacity, flags of the last attempt; with profile, microseconds of:
 * setting the pending-launch limit, the device build (last attempt), the sort, the remap,
 * restoring the limit. */
u64 g_stats[16];

const int kMaxAttempts = 8;

u64 now_us()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (u64)ts.tv_sec * 1000000ull + (u64)ts.tv_nsec / 1000ull;
}

grove_status cuda_check(grove_ctx *ctx, cudaError_t e, const char *what)
{
    return e == cudaSuccess ? GROVE_OK : grove__cuda_status(ctx, (int)e, what);
}

__global__ void iota_kernel(uint32_t *v, uint32_t n)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        v[i] = i;
}

__global__ void inverse_kernel(const uint32_t *perm, uint32_t *inv, uint32_t n)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        inv[perm[i]] = i;
}

__global__ void remap_kernel(const grove_quadtree_node *raw, const uint32_t *perm,
                             const uint32_t *inv, grove_quadtree_node *out, uint32_t n)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        grove_quadtree_node nd = raw[perm[i]];
        if (nd.first_child >= 0) nd.first_child = (int32_t)inv[nd.first_child];
        out[i] = nd;
    }
}

unsigned grid_for(size_t n)
{
    size_t g = (n + 255) / 256;
    return (unsigned)(g < 1 ? 1 : g > 65535 ? 65535 : g);
}

size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }
size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* Everything the build allocates, so that every exit path can free it. */
struct Bufs {
    grove_ctx *ctx;
    cudaStream_t s;
    float *xy[2];
    uint32_t *ix[2];
    grove_quadtree_node *raw, *out;
    u64 *keys, *keys2, *state;
    void *tasks, *tiles, *temp;
    uint32_t *vals, *perm;
    size_t n, node_cap, tasks_bytes, tiles_bytes, temp_bytes, num_nodes;

    void release(void **p, size_t bytes)
    {
        grove__cuda_free(ctx, *p, bytes, s);
        *p = NULL;
    }
    void free_raw()
    {
        release((void **)&raw, node_cap * sizeof(grove_quadtree_node));
        release((void **)&keys, node_cap * sizeof(u64));
    }
    void free_sort()
    {
        release((void **)&keys2, num_nodes * sizeof(u64));
        release((void **)&vals, num_nodes * sizeof(uint32_t));
        release((void **)&perm, num_nodes * sizeof(uint32_t));
        release(&temp, temp_bytes);
    }
    void free_all()
    {
        for (int b = 0; b < 2; b++) {
            release((void **)&xy[b], 2 * n * sizeof(float));
            release((void **)&ix[b], n * sizeof(uint32_t));
        }
        free_raw();
        free_sort();
        release((void **)&out, num_nodes * sizeof(grove_quadtree_node));
        release((void **)&state, S_COUNT * sizeof(u64));
        release(&tasks, tasks_bytes);
        release(&tiles, tiles_bytes);
    }
};

/* Restores the device-wide pending-launch limit on every exit. */
struct LimitGuard {
    int set;
    size_t prev;
    grove_status restore(grove_ctx *ctx)
    {
        if (!set) return GROVE_OK;
        set = 0;
        return cuda_check(ctx, cudaDeviceSetLimit(cudaLimitDevRuntimePendingLaunchCount, prev),
                          "quadtree (recursive CUDA build): restoring the device runtime's "
                          "pending-launch limit");
    }
};

grove_status alloc(Bufs &B, void **p, size_t bytes, const char *what)
{
    return grove__cuda_alloc(B.ctx, p, bytes, B.s, what);
}

/* Runs the device build until it completes without a flag (growing the node array or the
 * pending-launch limit as the device asks), leaves the node count in B.num_nodes. */
grove_status run_build(Bufs &B, LimitGuard &lim, const float *d_xyz, int dims, const float root[4],
                       const grove_quadtree_opts *o, const Tune &tu, uint32_t task_cap,
                       uint32_t tile_cap, size_t pending, size_t pending_bound)
{
    grove_ctx *ctx = B.ctx;
    const char *who = "quadtree (recursive CUDA build)";
    u64 hs[S_COUNT];
    for (int attempt = 1;; attempt++) {
        size_t cur = 0;
        if (!B.raw) {
            GROVE_TRY(alloc(B, (void **)&B.raw, B.node_cap * sizeof(grove_quadtree_node),
                            "the quadtree's raw node records"));
            GROVE_TRY(
                alloc(B, (void **)&B.keys, B.node_cap * sizeof(u64), "the quadtree's node keys"));
        }
        GROVE_TRY(cuda_check(ctx, cudaDeviceGetLimit(&cur, cudaLimitDevRuntimePendingLaunchCount),
                             "quadtree (recursive CUDA build): reading the device runtime's "
                             "pending-launch limit"));
        if (cur < pending || (tu.pending0 && cur != pending)) {
            const u64 t0 = now_us();
            if (!lim.set) {
                lim.prev = cur;
                lim.set = 1;
            }
            GROVE_TRY(cuda_check(
                ctx, cudaDeviceSetLimit(cudaLimitDevRuntimePendingLaunchCount, pending),
                "quadtree (recursive CUDA build): raising the device runtime's pending-launch "
                "limit"));
            g_stats[7] += now_us() - t0;
        }
        if (tu.profile)
            GROVE_TRY(grove__cuda_sync(ctx, B.s, "quadtree (recursive CUDA build): profiling"));
        const u64 t1 = now_us();
        GROVE_TRY(cuda_check(ctx, cudaMemsetAsync(B.state, 0, S_COUNT * sizeof(u64), B.s),
                             "quadtree (recursive CUDA build): clearing the state"));
        GROVE_TRY(cuda_check(ctx, cudaMemsetAsync(B.tasks, 0, B.tasks_bytes, B.s),
                             "quadtree (recursive CUDA build): clearing the task pool"));
        GROVE_TRY(cuda_check(ctx, cudaMemsetAsync(B.tiles, 0, B.tiles_bytes, B.s),
                             "quadtree (recursive CUDA build): clearing the tile pool"));
        GROVE_TRY(cuda_check(ctx,
                             grove__qt_cdp_run(B.xy[0], B.xy[1], B.ix[0], B.ix[1], B.raw, B.keys,
                                               (uint32_t)B.node_cap, B.state, B.tasks, task_cap,
                                               B.tiles, tile_cap, d_xyz, dims, (uint32_t)B.n, root,
                                               o->max_depth, o->min_points, (uint32_t)tu.small_max,
                                               (uint32_t)tu.big_min, (int)tu.nest_cap,
                                               (int)tu.inline_small, (int)tu.level_mode, B.s),
                             "quadtree (recursive CUDA build): launching the build"));
        GROVE_TRY(grove__cuda_d2h(ctx, hs, B.state, sizeof hs, B.s));
        GROVE_TRY(grove__cuda_sync(ctx, B.s, "quadtree (recursive CUDA build): building the tree"));
        g_stats[8] = now_us() - t1;
        g_stats[0] = (u64)attempt;
        g_stats[1] = hs[S_LAUNCHES];
        g_stats[2] = hs[S_NEST];
        g_stats[3] = hs[S_NODES];
        g_stats[4] = pending;
        g_stats[5] = B.node_cap;
        g_stats[6] = hs[S_FLAGS];
        if (hs[S_FLAGS] == 0) break;
        if (hs[S_FLAGS] & (F_POOL | F_STACK))
            return grove__error(ctx, GROVE_ERR_INTERNAL,
                                "%s: the device ran out of %s (flags %llu); this is a bug", who,
                                (hs[S_FLAGS] & F_POOL) ? "task or tile pool space" : "DFS stack",
                                (unsigned long long)hs[S_FLAGS]);
        if (attempt >= kMaxAttempts)
            return grove__error(ctx, GROVE_ERR_LIMIT,
                                "%s: gave up after %d attempts (node array %zu, pending-launch "
                                "limit %zu, flags %llu)",
                                who, attempt, B.node_cap, pending, (unsigned long long)hs[S_FLAGS]);
        if (hs[S_FLAGS] & F_LAUNCH) {
            const cudaError_t e = (cudaError_t)hs[S_ERR];
            if (e != cudaErrorLaunchPendingCountExceeded)
                return grove__cuda_status(ctx, (int)e,
                                          "quadtree (recursive CUDA build): a device-side kernel "
                                          "launch failed");
            if (pending >= pending_bound)
                return grove__error(ctx, GROVE_ERR_LIMIT,
                                    "%s: a device-side launch was refused with %zu pending "
                                    "launches allowed, the most this input can need",
                                    who, pending);
            pending = min_sz(pending_bound, 4 * pending);
        }
        if (hs[S_FLAGS] & F_NODES) {
            if (B.node_cap >= (size_t)INT32_MAX)
                return grove__error(ctx, GROVE_ERR_LIMIT,
                                    "quadtree: the tree would have more than %d nodes; raise "
                                    "min_points or lower max_depth",
                                    INT32_MAX);
            B.free_raw();
            B.node_cap = min_sz((size_t)INT32_MAX, max_sz(4 * B.node_cap, 2 * hs[S_NODES]));
        }
    }
    B.num_nodes = (size_t)hs[S_NODES];
    return GROVE_OK;
}

/* Sorts the raw records into breadth-first order: B.out gets B.num_nodes nodes. */
grove_status bfs_order(Bufs &B, int max_depth)
{
    grove_ctx *ctx = B.ctx;
    const size_t nn = B.num_nodes;
    const uint32_t n32 = (uint32_t)nn;
    GROVE_TRY(alloc(B, (void **)&B.out, nn * sizeof(grove_quadtree_node), "the quadtree's nodes"));
    if (nn == 1) {
        GROVE_TRY(cuda_check(ctx,
                             cudaMemcpyAsync(B.out, B.raw, sizeof(grove_quadtree_node),
                                             cudaMemcpyDeviceToDevice, B.s),
                             "quadtree (recursive CUDA build): copying the root"));
        return GROVE_OK;
    }
    GROVE_TRY(alloc(B, (void **)&B.keys2, nn * sizeof(u64), "sorting the quadtree's node keys"));
    GROVE_TRY(alloc(B, (void **)&B.vals, nn * sizeof(uint32_t), "sorting the quadtree's nodes"));
    GROVE_TRY(alloc(B, (void **)&B.perm, nn * sizeof(uint32_t), "sorting the quadtree's nodes"));
    const int prof = (int)g_tune.profile;
    u64 t0 = now_us();
    iota_kernel<<<grid_for(nn), 256, 0, B.s>>>(B.vals, n32);
    GROVE_CUDA_LAUNCHED(ctx, "quadtree (recursive CUDA build): iota_kernel");
    /* keys < 2^(2 * max_depth + 1): the leading 1 of a node at level max_depth */
    GROVE_TRY(grove_sort_pairs_device(ctx, NULL, &B.temp_bytes, GROVE_U64, B.keys, B.keys2,
                                      sizeof(uint32_t), B.vals, B.perm, nn, 0, 2 * max_depth + 1,
                                      B.s));
    GROVE_TRY(alloc(B, &B.temp, B.temp_bytes, "sorting the quadtree's nodes (temporary)"));
    GROVE_TRY(grove_sort_pairs_device(ctx, B.temp, &B.temp_bytes, GROVE_U64, B.keys, B.keys2,
                                      sizeof(uint32_t), B.vals, B.perm, nn, 0, 2 * max_depth + 1,
                                      B.s));
    if (prof) {
        GROVE_TRY(grove__cuda_sync(ctx, B.s, "quadtree (recursive CUDA build): profiling"));
        g_stats[9] = now_us() - t0;
        t0 = now_us();
    }
    inverse_kernel<<<grid_for(nn), 256, 0, B.s>>>(B.perm, B.vals, n32);
    GROVE_CUDA_LAUNCHED(ctx, "quadtree (recursive CUDA build): inverse_kernel");
    remap_kernel<<<grid_for(nn), 256, 0, B.s>>>(B.raw, B.perm, B.vals, B.out, n32);
    GROVE_CUDA_LAUNCHED(ctx, "quadtree (recursive CUDA build): remap_kernel");
    if (prof) {
        GROVE_TRY(grove__cuda_sync(ctx, B.s, "quadtree (recursive CUDA build): profiling"));
        g_stats[10] = now_us() - t0;
    }
    return GROVE_OK;
}

grove_status build(Bufs &B, LimitGuard &lim, const float *d_xyz, int dims, const float root[4],
                   grove_quadtree *t)
{
    const grove_quadtree_opts *o = &t->opts;
    const size_t n = t->n, depth = (size_t)o->max_depth, mp = (size_t)o->min_points;
    size_t task_bytes;
    uint32_t tile_pts, state_words, smem_pp;
    Tune tu = g_tune;
    memset(g_stats, 0, sizeof g_stats);
    grove__qt_cdp_info(&task_bytes, &tile_pts, &state_words, &smem_pp);
    if (state_words != S_COUNT)
        return grove__error(B.ctx, GROVE_ERR_INTERNAL,
                            "quadtree (recursive CUDA build): state layout mismatch (%u words)",
                            state_words);
    if (tu.small_max > 12288) tu.small_max = 12288; /* 16-bit positions; ~200 KB of shared memory */
    if (tu.big_min < 1) tu.big_min = 1;
    if (tu.nest_cap > 23) tu.nest_cap = 23;

    /* Pools for big nodes. Big nodes of one level are disjoint, so a level has at most
     * n / (big_min + 1) of them and they cover at most n / tile + (their number) tiles; only
     * levels 0 .. max_depth - 1 split. */
    const size_t per_level_big = n / (size_t)(tu.big_min + 1);
    const size_t task_cap = depth * (per_level_big + 1) + 1;
    const size_t tile_cap = depth * ((n + tile_pts - 1) / tile_pts + per_level_big + 1) + 1;
    if (task_cap > UINT32_MAX || tile_cap > UINT32_MAX)
        return grove__error(B.ctx, GROVE_ERR_LIMIT,
                            "quadtree (recursive CUDA build): %zu points at max_depth %zu "
                            "exceed the task pool",
                            n, depth);

    /* Launches: one per node that launches its children (a split node of more than small_max
     * points, or of any size without the shared-memory path; at most `depth` such disjoint sets
     * of more than `unit` points each), and up to six around each big node. Every launch stays
     * pending until its whole subtree is built, so the total is what the limit must allow. */
    const size_t unit = max_sz(max_sz(tu.small_max, mp + 1), 1);
    const size_t pending_bound = depth * (n / unit + 1) + 6 * depth * (per_level_big + 1) + 16;
    /* the first try asks for about what uniform and clustered inputs use (n / (7 unit) and
     * n / (6 unit) launches measured at small_max 2048), so that inputs up to a few million
     * points keep the default of 2048 and nothing is set; a refused launch retries */
    size_t pending =
        tu.pending0 ? (size_t)tu.pending0 : min_sz(pending_bound, 1024 + n / (2 * unit));

    /* The node array: a split uses 4 records; a uniform input splits about n / (min_points + 1)
     * nodes. Too small an array is reported by the device and retried with a larger one. */
    size_t cap =
        tu.node_cap0 ? (size_t)tu.node_cap0 : 1 + 4 * ((n + n / 4) / (mp + 1) + 4 * depth + 16);
    B.node_cap = min_sz(max_sz(cap, 1), (size_t)INT32_MAX);

    B.n = n;
    if (n > 0) {
        for (int b = 0; b < 2; b++) {
            GROVE_TRY(alloc(B, (void **)&B.xy[b], 2 * n * sizeof(float),
                            b ? "the quadtree's second point buffer" : "the quadtree's points"));
            GROVE_TRY(alloc(B, (void **)&B.ix[b], n * sizeof(uint32_t),
                            b ? "the quadtree's second index buffer" : "the quadtree's index"));
        }
    }
    GROVE_TRY(alloc(B, (void **)&B.state, S_COUNT * sizeof(u64), "the quadtree build's state"));
    B.tasks_bytes = task_cap * task_bytes;
    GROVE_TRY(alloc(B, &B.tasks, B.tasks_bytes, "the quadtree build's task pool"));
    B.tiles_bytes = tile_cap * 16;
    GROVE_TRY(alloc(B, &B.tiles, B.tiles_bytes, "the quadtree build's tile pool"));

    GROVE_TRY(run_build(B, lim, d_xyz, dims, root, o, tu, (uint32_t)task_cap, (uint32_t)tile_cap,
                        pending, pending_bound));
    /* the second buffers are free again before the sort needs memory */
    B.release((void **)&B.xy[1], 2 * n * sizeof(float));
    B.release((void **)&B.ix[1], n * sizeof(uint32_t));
    GROVE_TRY(bfs_order(B, o->max_depth));
    GROVE_TRY(grove__cuda_sync(B.ctx, B.s, "quadtree (recursive CUDA build): ordering the nodes"));
    const u64 t0 = now_us();
    const grove_status st = lim.restore(B.ctx);
    g_stats[11] = now_us() - t0;
    return st;
}

} /* namespace */

extern "C" grove_status grove__qt_build_recursive_cuda(grove_ctx *ctx, const float *d_xyz, int dims,
                                                       const float root[4], grove_quadtree *t)
{
    Bufs B;
    LimitGuard lim = {0, 0};
    grove_status st;
    memset(&B, 0, sizeof B);
    B.ctx = ctx;
    B.s = (cudaStream_t)ctx->stream;
    st = build(B, lim, d_xyz, dims, root, t);
    if (st != GROVE_OK) {
        /* the queued work must finish before its buffers go; errors are already reported */
        cudaStreamSynchronize(B.s);
        lim.restore(ctx);
        B.free_all();
        return st;
    }
    t->d_nodes = B.out;
    t->d_nodes_bytes = B.num_nodes * sizeof(grove_quadtree_node);
    t->d_pts = B.xy[0];
    t->d_index = B.ix[0];
    t->num_nodes = B.num_nodes;
    t->dev_ctx = ctx;
    B.out = NULL;
    B.xy[0] = NULL;
    B.ix[0] = NULL;
    B.free_all();
    return GROVE_OK;
}

/* Benchmark and test hooks (internal; not thread-safe): which 0..7 sets small_max, big_min,
 * nest_cap, inline_small, node_cap0, pending0, level_mode, profile (see Tune); which -1 restores
 * the defaults. */
extern "C" void grove__qt_recursive_tune(int which, unsigned long long value)
{
    switch (which) {
    case 0: g_tune.small_max = value; break;
    case 1: g_tune.big_min = value; break;
    case 2: g_tune.nest_cap = value; break;
    case 3: g_tune.inline_small = value; break;
    case 4: g_tune.node_cap0 = value; break;
    case 5: g_tune.pending0 = value; break;
    case 6: g_tune.level_mode = value; break;
    case 7: g_tune.profile = value; break;
    default: g_tune = kDefaults; break;
    }
}

extern "C" void grove__qt_recursive_stats(unsigned long long out[16])
{
    for (int i = 0; i < 16; i++) out[i] = g_stats[i];
}
