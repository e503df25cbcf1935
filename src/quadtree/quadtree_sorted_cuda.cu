/*
 * quadtree_sorted_cuda.cu - steps 2a and 2b of the CUDA morton build (quadtree_cuda.cu): how
 * many levels of the quadrant path the radix sort covers, chosen from a sample of the points,
 * and, when it covers fewer than max_depth, the deeper digits and the order of the few runs that
 * split below them.
 */
#include <cub/device/device_segmented_sort.cuh>
#include <thrust/iterator/transform_iterator.h>

#include "../prim/prim_cuda.h"
#include "quadtree_morton_cuda.cuh"

namespace grove_qt
{
namespace
{

/* ---- 2b. the runs below the sorted level ----
 * When the sort covered only the first `sorted_level` levels (see sorted_levels()), the points
 * of a node of that level are in input order and carry no deeper digits. The nodes of that
 * level that split get them here, and their runs sorted by (deeper digits, input position):
 * a warp per node; runs of at most kDeepSmall points in shared memory (their composite keys are
 * distinct, so a rank is a position), longer ones listed for a segmented sort. */
const int kDeepWarps = 8;

/* The split nodes of a level, by rank: list[rank - 1] = level position. */
__global__ void collect_split_kernel(uint32_t m, const uint32_t *__restrict__ flags,
                                     const uint32_t *__restrict__ rank, uint32_t *__restrict__ list)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += gridDim.x * blockDim.x)
        if (flags[i]) list[rank[i] - 1] = i;
}

__global__ void __launch_bounds__(kDeepWarps * 32)
    deep_kernel(const Node *__restrict__ lvl, const uint32_t *__restrict__ list, uint32_t count,
                const float *__restrict__ xyz, int dims, int levels, uint32_t *__restrict__ keys,
                uint32_t *__restrict__ idx, uint32_t *__restrict__ big, uint32_t *__restrict__ nbig)
{
    __shared__ unsigned long long comp[kDeepWarps][kDeepSmall];
    const uint32_t lane = threadIdx.x & 31u, w = threadIdx.x >> 5;
    for (uint32_t s = blockIdx.x * kDeepWarps + w; s < count; s += gridDim.x * kDeepWarps) {
        const Node nd = lvl[list[s]];
        const uint32_t size = nd.end - nd.begin;
        const uint32_t top = keys[nd.begin]; /* the same for the whole run */
        const bool small = size <= kDeepSmall;
        for (uint32_t j = lane; j < size; j += 32) {
            uint32_t a = idx[nd.begin + j];
            uint32_t d = deep_path(xyz[(size_t)a * dims], xyz[(size_t)a * dims + 1], nd.xmin,
                                   nd.ymin, nd.xmax, nd.ymax, levels);
            if (small)
                comp[w][j] = ((unsigned long long)d << 32) | a;
            else
                keys[nd.begin + j] = top | d;
        }
        if (!small) {
            if (lane == 0) big[atomicAdd(nbig, 1u)] = list[s];
            continue;
        }
        __syncwarp();
        for (uint32_t j = lane; j < size; j += 32) {
            unsigned long long c = comp[w][j];
            uint32_t r = 0;
            for (uint32_t q = 0; q < size; q++) r += comp[w][q] < c;
            keys[nd.begin + r] = top | (uint32_t)(c >> 32);
            idx[nd.begin + r] = (uint32_t)c;
        }
        __syncwarp();
    }
}

struct SegBegin {
    const Node *lvl;
    __host__ __device__ uint32_t operator()(uint32_t i) const { return lvl[i].begin; }
};
struct SegEnd {
    const Node *lvl;
    __host__ __device__ uint32_t operator()(uint32_t i) const { return lvl[i].end; }
};

/* Copies the listed runs of the segmented sort's output back: a block per run. */
__global__ void copy_runs_kernel(const Node *__restrict__ lvl, const uint32_t *__restrict__ list,
                                 const uint32_t *__restrict__ src_k, const uint32_t *__restrict__ src_i,
                                 uint32_t *__restrict__ keys, uint32_t *__restrict__ idx)
{
    const Node nd = lvl[list[blockIdx.x]];
    for (uint32_t j = nd.begin + threadIdx.x; j < nd.end; j += blockDim.x) {
        keys[j] = src_k[j];
        idx[j] = src_i[j];
    }
}

/* ---- 2a. how many levels to sort: a sample ----
 * kSample input points at even strides, their paths down to the candidate level, sorted; then
 * the number of pairs of sample points that share a cell of that level. From it, the mean size
 * of a point's cell (each point counted in its own cell: the points that would need the deeper
 * digits weigh in by their number) is about 1 + (n - 1) * pairs / (kSample choose 2). */
const uint32_t kSample = 65536;

__global__ void sample_kernel(const float *__restrict__ xyz, int dims, size_t n, uint32_t count,
                              int levels, float r0, float r1, float r2, float r3,
                              uint32_t *__restrict__ out)
{
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= count) return;
    size_t i = (size_t)((unsigned long long)j * n / count);
    out[j] = deep_path(xyz[i * dims], xyz[i * dims + 1], r0, r1, r2, r3, levels);
}

/* pairs += for each j, the number of earlier equal keys of the sorted v[0, count). */
__global__ void __launch_bounds__(kBlock)
    pairs_kernel(const uint32_t *__restrict__ v, uint32_t count, unsigned long long *pairs)
{
    __shared__ unsigned long long part[kBlock / 32];
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long c = 0;
    if (j < count) {
        uint32_t lo = 0, hi = j, key = v[j];
        while (lo < hi) { /* first position of key */
            uint32_t mid = lo + (hi - lo) / 2;
            if (v[mid] < key)
                lo = mid + 1;
            else
                hi = mid;
        }
        c = j - lo;
    }
    for (int o = 16; o > 0; o /= 2) c += __shfl_down_sync(0xffffffffu, c, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < kBlock / 32; w++) c += part[w];
        atomicAdd(pairs, c);
    }
}

/* How many levels the radix sort covers. Every pass of the sort takes 8 key bits (4 levels) and
 * costs as much as any other, so a pass is saved when the levels below the first multiple of 4
 * where a uniform input would have at most min_points / 2 points per node hold few points: most
 * nodes of that level are then leaves, whose points a stable sort by the levels above leaves in
 * input order. The few that split are sorted by their deeper digits afterwards (deep_kernel).
 * 32-bit keys only; the result is the same tree whatever this returns. */
int sorted_levels(size_t n, int depth, int min_points)
{
    int l = 0;
    double per = (double)n, half = 0.5 * (double)(min_points > 0 ? min_points : 1);
    while (per > half && l < depth) {
        per *= 0.25;
        l++;
    }
    l = (l + 3) / 4 * 4;
    if (l < 4) l = 4;
    return l < depth ? l : depth;
}

} /* namespace */

/* Test hook (grove__qt_morton_tune): levels to sort whatever the sample says; 0: automatic. */
static int g_sorted_override = 0;

/* The levels to sort for n > kSample points (see sorted_levels): the uniform guess, kept when
 * the sample says the points' cells at that level hold at most 2 * min_points points on
 * average, else every level. */
grove_status choose_sorted(grove_ctx *ctx, Buffers &buf, void **temp, size_t *temp_cap,
                           const float *xyz, int dims, size_t n, const float root[4], int depth,
                           int min_points, int *sorted)
{
    cudaStream_t s = (cudaStream_t)ctx->stream;
    grove_status st = GROVE_OK;
    uint32_t *v = NULL;
    unsigned long long *pairs = NULL, pairs_h = 0;
    size_t need = 0;
    int guess = sorted_levels(n, depth, min_points);
    double mean;
    *sorted = depth;
    if (g_sorted_override > 0) {
        *sorted = g_sorted_override < depth ? g_sorted_override : depth;
        return GROVE_OK;
    }
    if (guess >= depth || n <= kSample) return GROVE_OK;
    GROVE_TRY_END(st, buf.alloc((void **)&v, 2 * (size_t)kSample * 4 + 8, "the quadtree sample"));
    pairs = (unsigned long long *)(v + 2 * kSample);
    QT_CUDA_END(cudaMemsetAsync(pairs, 0, 8, s), "clearing the quadtree sample count");
    sample_kernel<<<kSample / kBlock, kBlock, 0, s>>>(xyz, dims, n, kSample, guess, root[0],
                                                      root[1], root[2], root[3], v);
    QT_LAUNCHED_END("quadtree sample kernel");
    GROVE_TRY_END(st, grove__cuda_sort(ctx, NULL, &need, GROVE_U32, v, v + kSample, 0, NULL, NULL,
                                       kSample, 0, 2 * guess, s));
    GROVE_TRY_END(st, ensure(buf, temp, temp_cap, need, "sample sort temporary storage"));
    GROVE_TRY_END(st, grove__cuda_sort(ctx, *temp, &need, GROVE_U32, v, v + kSample, 0, NULL, NULL,
                                       kSample, 0, 2 * guess, s));
    pairs_kernel<<<kSample / kBlock, kBlock, 0, s>>>(v + kSample, kSample, pairs);
    QT_LAUNCHED_END("quadtree sample pairs kernel");
    GROVE_TRY_END(st, grove__cuda_fetch(ctx, &pairs_h, pairs, 8, s, "sampling the quadtree points"));
    mean = 1.0 + (double)(n - 1) * (double)pairs_h / (0.5 * kSample * (kSample - 1.0));
    if (mean <= 2.0 * min_points) *sorted = guess;
_end:
    buf.release(v);
    return st;
}

/* Step 2b for the `count` split nodes of the sorted level (lvl[0, m)): their runs in keys and
 * idx get their deeper digits and are sorted by them; keys_t and idx_t (n elements each, free
 * at this point) are the segmented sort's output before its runs are copied back. known_nbig:
 * the number of those runs longer than kDeepSmall when the caller has it, else -1. */
grove_status deep_sort(grove_ctx *ctx, Buffers &buf, void **temp, size_t *temp_cap,
                       const Node *lvl, uint32_t m, uint32_t count, const uint32_t *flags,
                       const uint32_t *rank, const float *xyz, int dims, int levels,
                       uint32_t *keys, uint32_t *idx, uint32_t *keys_t, uint32_t *idx_t,
                       size_t n, int64_t known_nbig)
{
    cudaStream_t s = (cudaStream_t)ctx->stream;
    grove_status st = GROVE_OK;
    uint32_t *list = NULL, *big = NULL, *nbig = NULL, nbig_h = 0;
    size_t need = 0;
    unsigned blocks = (count + kDeepWarps - 1) / kDeepWarps;
    if (blocks > 65535u * 16u) blocks = 65535u * 16u;
    GROVE_TRY_END(st, buf.alloc((void **)&list, (size_t)count * 4, "the quadtree deep runs"));
    GROVE_TRY_END(st, buf.alloc((void **)&big, (size_t)count * 4 + 4, "the quadtree deep runs"));
    nbig = big + count;
    QT_CUDA_END(cudaMemsetAsync(nbig, 0, 4, s), "clearing the quadtree deep run count");
    collect_split_kernel<<<blocks_for(m), kBlock, 0, s>>>(m, flags, rank, list);
    QT_LAUNCHED_END("quadtree collect kernel");
    deep_kernel<<<blocks, kDeepWarps * 32, 0, s>>>(lvl, list, count, xyz, dims, levels, keys, idx,
                                                   big, nbig);
    QT_LAUNCHED_END("quadtree deep kernel");
    if (known_nbig >= 0)
        nbig_h = (uint32_t)known_nbig;
    else
        GROVE_TRY_END(st, grove__cuda_fetch(ctx, &nbig_h, nbig, 4, s,
                                            "sorting the quadtree's deep runs"));
    if (nbig_h > 0) {
        thrust::transform_iterator<SegBegin, const uint32_t *> sb(big, SegBegin{lvl});
        thrust::transform_iterator<SegEnd, const uint32_t *> se(big, SegEnd{lvl});
        QT_CUDA_END(cub::DeviceSegmentedSort::StableSortPairs(NULL, need, keys, keys_t, idx, idx_t,
                                                              (int64_t)n, (int64_t)nbig_h, sb, se,
                                                              s),
                    "quadtree deep run sort (sizing)");
        GROVE_TRY_END(st, ensure(buf, temp, temp_cap, need, "deep run sort temporary storage"));
        QT_CUDA_END(cub::DeviceSegmentedSort::StableSortPairs(*temp, need, keys, keys_t, idx, idx_t,
                                                              (int64_t)n, (int64_t)nbig_h, sb, se,
                                                              s),
                    "quadtree deep run sort");
        copy_runs_kernel<<<nbig_h, kBlock, 0, s>>>(lvl, big, keys_t, idx_t, keys, idx);
        QT_LAUNCHED_END("quadtree run copy kernel");
    }
_end:
    buf.release(list);
    buf.release(big);
    return st;
}

} /* namespace grove_qt */

extern "C" void grove__qt_morton_tune(int sorted_levels)
{
    grove_qt::g_sorted_override = sorted_levels > 0 ? sorted_levels : 0;
}
