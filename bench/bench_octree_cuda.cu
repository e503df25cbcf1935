/*
 * bench_octree_cuda.cu - the GPU half of `grove bench octree` (bench_octree.c):
 *   the device-resident build timed with CUDA events on the context's stream;
 *   the counting pass alone (octree_cuda.cu's grove__ot_count_cells_cuda) with warp-aggregated
 *   and with plain atomics on the same grid coordinates;
 *   the floor: a CUB radix sort of the (63-bit Morton key, index) pairs of the same points.
 * Each hands its result back so that bench_octree.c can check it on the host.
 */
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include <stdint.h>
#include <stdlib.h>

#include "bench_cuda.h"
#include "core_cuda.h"
#include "../src/octree/octree_cuda.h"
#include "../src/octree/octree_morton.cuh"

namespace
{

typedef unsigned long long u64;
const int kBlock = 256;

unsigned blocks_for(size_t n) { return (unsigned)((n + kBlock - 1) / kBlock ? (n + kBlock - 1) / kBlock : 1); }

__global__ void quantize_kernel(const double *__restrict__ xyz, size_t n, double lo0, double lo1,
                                double lo2, double to_grid, uint32_t *__restrict__ q)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= n) return;
    q[3 * i] = grove__ot_quantize(xyz[3 * i], lo0, to_grid);
    q[3 * i + 1] = grove__ot_quantize(xyz[3 * i + 1], lo1, to_grid);
    q[3 * i + 2] = grove__ot_quantize(xyz[3 * i + 2], lo2, to_grid);
}


/* bad[0]: adjacent pairs out of order; bad[1]: sum of indices; bad[2]: xor of keys. */
__global__ void sorted_check_kernel(const u64 *__restrict__ key, const uint32_t *__restrict__ idx,
                                    size_t n, u64 *__restrict__ acc)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= n) return;
    if (i + 1 < n && key[i] > key[i + 1]) atomicAdd(&acc[0], 1ull);
    atomicAdd(&acc[1], (u64)idx[i]);
    atomicXor(&acc[2], key[i]);
}

__global__ void xor_kernel(const u64 *__restrict__ key, size_t n, u64 *__restrict__ acc)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i < n) atomicXor(&acc[3], key[i]);
}

struct Events {
    cudaEvent_t a, b;
    Events() : a(NULL), b(NULL) {}
    ~Events()
    {
        if (a) cudaEventDestroy(a);
        if (b) cudaEventDestroy(b);
    }
};

struct DevBuf {
    void *p;
    DevBuf() : p(NULL) {}
    ~DevBuf()
    {
        if (p) cudaFree(p);
    }
};

} /* namespace */

extern "C" grove_status grove__bench_ot_upload(grove_ctx *ctx, const double *xyz, size_t n,
                                               double **d_xyz)
{
    *d_xyz = NULL;
    GROVE_TRY(grove__cuda_use(ctx));
    GROVE_CUDA_TRY(ctx, cudaMalloc((void **)d_xyz, (3 * n + 1) * sizeof(double)),
                   "bench octree: device points");
    GROVE_CUDA_TRY(ctx, cudaMemcpy(*d_xyz, xyz, 3 * n * sizeof(double), cudaMemcpyHostToDevice),
                   "bench octree: uploading points");
    return GROVE_OK;
}

extern "C" void grove__bench_ot_free(void *d)
{
    if (d) cudaFree(d);
}

/* Median time of `repeats` device-resident builds after `warmup`; *last: the last tree. */
extern "C" grove_status grove__bench_ot_build_device(grove_ctx *ctx, const double *d_xyz, size_t n,
                                                     const grove_octree_opts *o, int warmup,
                                                     int repeats, double *ms,
                                                     grove_octree **last)
{
    Events ev;
    const cudaStream_t s = (cudaStream_t)ctx->stream;
    double *t = (double *)malloc((size_t)(repeats > 0 ? repeats : 1) * sizeof *t);
    grove_status st = GROVE_OK;
    *last = NULL;
    if (!t) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "bench octree: out of memory");
    if (cudaEventCreate(&ev.a) != cudaSuccess || cudaEventCreate(&ev.b) != cudaSuccess) {
        free(t);
        return grove__error(ctx, GROVE_ERR_CUDA, "bench octree: cannot create events");
    }
    for (int r = -warmup; r < repeats && st == GROVE_OK; r++) {
        float f = 0;
        grove_octree_destroy(*last);
        *last = NULL;
        cudaEventRecord(ev.a, s);
        st = grove_octree_build_device(ctx, d_xyz, n, o, last, NULL);
        if (st != GROVE_OK) break;
        cudaEventRecord(ev.b, s);
        cudaError_t e = cudaEventSynchronize(ev.b);
        if (e == cudaSuccess) e = cudaEventElapsedTime(&f, ev.a, ev.b);
        if (e != cudaSuccess) st = grove__cuda_status(ctx, (int)e, "bench octree: timing");
        if (r >= 0) t[r] = f;
    }
    if (st == GROVE_OK) *ms = grove__bench_median(t, repeats);
    free(t);
    return st;
}

/* The counting pass (aggregated and plain, 8^depth counters, counts copied to h_agg/h_plain)
 * and the Morton sort floor of the same points; *sort_ok: the sorted keys are ascending and a
 * permutation of the unsorted ones (index sum and key xor). */

/* morton != 0: the counting passes read the points in Morton order (as the build counts
 * them), sorted before the timing. */
extern "C" grove_status grove__bench_ot_passes(grove_ctx *ctx, const double *d_xyz, size_t n,
                                               const double lo[3], double side, int depth,
                                               int morton, int warmup, int repeats,
                                               double *ms_agg, double *ms_plain, uint32_t *h_agg,
                                               uint32_t *h_plain, double *ms_sort, int *sort_ok)
{
    const cudaStream_t s = (cudaStream_t)ctx->stream;
    const size_t cells = (size_t)1 << (3 * depth);
    DevBuf q, counts, key, idx, skey, sidx, tmp, acc, qm;
    Events ev;
    size_t tb = 0;
    double *t = (double *)malloc((size_t)(repeats > 0 ? repeats : 1) * sizeof *t);
    struct F {
        double *p;
        ~F() { free(p); }
    } fg = {t};
    *sort_ok = 0;
    if (!t) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "bench octree: out of memory");
    GROVE_CUDA_TRY(ctx, cudaEventCreate(&ev.a), "bench octree: events");
    GROVE_CUDA_TRY(ctx, cudaEventCreate(&ev.b), "bench octree: events");
    GROVE_CUDA_TRY(ctx, cudaMalloc(&q.p, (3 * n + 1) * sizeof(uint32_t)), "bench octree: q");
    GROVE_CUDA_TRY(ctx, cudaMalloc(&counts.p, cells * sizeof(uint32_t)), "bench octree: counts");
    const double to_grid = (double)(1u << GROVE_OCTREE_BITS) / side;
    quantize_kernel<<<blocks_for(n), kBlock, 0, s>>>(d_xyz, n, lo[0], lo[1], lo[2], to_grid,
                                                     (uint32_t *)q.p);
    GROVE_CUDA_LAUNCHED(ctx, "bench octree: quantize");
    GROVE_CUDA_TRY(ctx, cudaMalloc(&key.p, (n + 1) * sizeof(u64)), "bench octree: keys");
    GROVE_CUDA_TRY(ctx, cudaMalloc(&skey.p, (n + 1) * sizeof(u64)), "bench octree: keys");
    GROVE_CUDA_TRY(ctx, cudaMalloc(&idx.p, (n + 1) * sizeof(uint32_t)), "bench octree: idx");
    GROVE_CUDA_TRY(ctx, cudaMalloc(&sidx.p, (n + 1) * sizeof(uint32_t)), "bench octree: idx");
    GROVE_CUDA_TRY(ctx, cudaMalloc(&acc.p, 4 * sizeof(u64)), "bench octree: check");
    morton_kernel<<<blocks_for(n), kBlock, 0, s>>>((const uint32_t *)q.p, n, (u64 *)key.p,
                                                   (uint32_t *)idx.p);
    GROVE_CUDA_LAUNCHED(ctx, "bench octree: morton keys");
    GROVE_CUDA_TRY(ctx, cub::DeviceRadixSort::SortPairs(NULL, tb, (u64 *)key.p, (u64 *)skey.p,
                                                        (uint32_t *)idx.p, (uint32_t *)sidx.p, n,
                                                        0, 63, s),
                   "bench octree: sort size");
    GROVE_CUDA_TRY(ctx, cudaMalloc(&tmp.p, tb ? tb : 1), "bench octree: sort scratch");
    const uint32_t *qc = (const uint32_t *)q.p;
    if (morton) {
        GROVE_CUDA_TRY(ctx, cudaMalloc(&qm.p, (3 * n + 1) * sizeof(uint32_t)), "bench octree: q");
        GROVE_CUDA_TRY(ctx, cub::DeviceRadixSort::SortPairs(tmp.p, tb, (u64 *)key.p,
                                                            (u64 *)skey.p, (uint32_t *)idx.p,
                                                            (uint32_t *)sidx.p, n, 0, 63, s),
                       "bench octree: sort");
        permute_kernel<<<blocks_for(n), kBlock, 0, s>>>((const uint32_t *)sidx.p, n, qc,
                                                        (uint32_t *)qm.p, NULL, NULL);
        GROVE_CUDA_LAUNCHED(ctx, "bench octree: permute");
        qc = (const uint32_t *)qm.p;
    }

    for (int agg = 1; agg >= 0; agg--) {
        for (int r = -warmup; r < repeats; r++) {
            float f = 0;
            GROVE_CUDA_TRY(ctx, cudaMemsetAsync(counts.p, 0, cells * sizeof(uint32_t), s),
                           "bench octree: counts");
            GROVE_CUDA_TRY(ctx, cudaEventRecord(ev.a, s), "bench octree: events");
            GROVE_TRY(grove__ot_count_cells_cuda(ctx, qc, n, depth, agg,
                                                 (uint32_t *)counts.p));
            GROVE_CUDA_TRY(ctx, cudaEventRecord(ev.b, s), "bench octree: events");
            GROVE_CUDA_TRY(ctx, cudaEventSynchronize(ev.b), "bench octree: count pass");
            GROVE_CUDA_TRY(ctx, cudaEventElapsedTime(&f, ev.a, ev.b), "bench octree: events");
            if (r >= 0) t[r] = f;
        }
        *(agg ? ms_agg : ms_plain) = grove__bench_median(t, repeats);
        GROVE_CUDA_TRY(ctx, cudaMemcpy(agg ? h_agg : h_plain, counts.p, cells * sizeof(uint32_t),
                                       cudaMemcpyDeviceToHost),
                       "bench octree: counts download");
    }

    /* the floor */
    for (int r = -warmup; r < repeats; r++) {
        float f = 0;
        GROVE_CUDA_TRY(ctx, cudaEventRecord(ev.a, s), "bench octree: events");
        GROVE_CUDA_TRY(ctx, cub::DeviceRadixSort::SortPairs(tmp.p, tb, (u64 *)key.p, (u64 *)skey.p,
                                                            (uint32_t *)idx.p, (uint32_t *)sidx.p,
                                                            n, 0, 63, s),
                       "bench octree: sort");
        GROVE_CUDA_TRY(ctx, cudaEventRecord(ev.b, s), "bench octree: events");
        GROVE_CUDA_TRY(ctx, cudaEventSynchronize(ev.b), "bench octree: sort");
        GROVE_CUDA_TRY(ctx, cudaEventElapsedTime(&f, ev.a, ev.b), "bench octree: events");
        if (r >= 0) t[r] = f;
    }
    *ms_sort = grove__bench_median(t, repeats);
    u64 h[4] = {0, 0, 0, 0};
    GROVE_CUDA_TRY(ctx, cudaMemsetAsync(acc.p, 0, 4 * sizeof(u64), s), "bench octree: check");
    sorted_check_kernel<<<blocks_for(n), kBlock, 0, s>>>((const u64 *)skey.p,
                                                         (const uint32_t *)sidx.p, n,
                                                         (u64 *)acc.p);
    GROVE_CUDA_LAUNCHED(ctx, "bench octree: sort check");
    xor_kernel<<<blocks_for(n), kBlock, 0, s>>>((const u64 *)key.p, n, (u64 *)acc.p);
    GROVE_CUDA_LAUNCHED(ctx, "bench octree: sort check");
    GROVE_CUDA_TRY(ctx, cudaMemcpyAsync(h, acc.p, sizeof h, cudaMemcpyDeviceToHost, s),
                   "bench octree: check");
    GROVE_CUDA_TRY(ctx, cudaStreamSynchronize(s), "bench octree: check");
    *sort_ok = h[0] == 0 && h[1] == (u64)n * (u64)(n ? n - 1 : 0) / 2 && h[2] == h[3];
    return GROVE_OK;
}
