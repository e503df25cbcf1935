/*
 * prim_morton_cuda.cu - Morton encode/decode kernels (launchers declared in prim_cuda.h).
 *
 * One grid-stride kernel per direction over the scalar helpers of prim.h, so the GPU codes are
 * bit-identical to the CPU's. These are pure streaming kernels: one resident wave of blocks
 * with several loads in flight per thread, and 64-bit indices so the stride loop covers any n
 * up to 2^32-1 without overflow.
 */
#include <cuda_runtime.h>

#include <stdint.h>

#include "core_cuda.h"
#include "prim_cuda.h"

namespace
{

const int kThreads = 256;
/* Each step of the stride loop issues the loads of kUnroll elements, kUnroll * stride apart,
 * before using any of them, so that a thread keeps several loads in flight. */
const int kUnroll = 4;

cudaStream_t as_stream(grove_ctx *ctx, void *stream)
{
    return (cudaStream_t)(stream ? stream : ctx->stream);
}

grove_status grid_for(grove_ctx *ctx, size_t n, unsigned *blocks, const char *what)
{
    int sms = 0;
    size_t want = (n + (size_t)kThreads * kUnroll - 1) / ((size_t)kThreads * kUnroll);
    GROVE_CUDA_TRY(ctx, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device),
                   what);
    /* One resident wave (2048 threads per SM); the unrolled stride loop does the rest. */
    size_t cap = (size_t)(sms > 0 ? sms : 1) * (2048 / kThreads);
    *blocks = (unsigned)(want < cap ? want : cap);
    return GROVE_OK;
}

/* Indices only grow along one thread's stride loop, so its first bad index is its smallest
 * and one atomicMin per thread is enough. */
__device__ void report_bad(uint64_t *d_bad, uint64_t i, bool *reported)
{
    if (d_bad && !*reported) {
        atomicMin((unsigned long long *)d_bad, (unsigned long long)i);
        *reported = true;
    }
}

__global__ void morton2_encode_kernel(const uint32_t *__restrict__ x,
                                      const uint32_t *__restrict__ y, uint32_t *__restrict__ codes,
                                      uint64_t *d_bad, uint64_t n)
{
    bool reported = false;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride * kUnroll) {
        uint32_t xs[kUnroll], ys[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; k++) {
            uint64_t j = i + k * stride;
            xs[k] = j < n ? x[j] : 0u;
            ys[k] = j < n ? y[j] : 0u;
        }
#pragma unroll
        for (int k = 0; k < kUnroll; k++) {
            uint64_t j = i + k * stride;
            if (j >= n) break;
            if ((xs[k] | ys[k]) > 0xFFFFu) report_bad(d_bad, j, &reported);
            codes[j] = grove_morton2(xs[k], ys[k]);
        }
    }
}

__global__ void morton2_decode_kernel(const uint32_t *__restrict__ codes, uint32_t *__restrict__ x,
                                      uint32_t *__restrict__ y, uint64_t n)
{
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride * kUnroll) {
        uint32_t cs[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; k++) {
            uint64_t j = i + k * stride;
            cs[k] = j < n ? codes[j] : 0u;
        }
#pragma unroll
        for (int k = 0; k < kUnroll; k++) {
            uint64_t j = i + k * stride;
            if (j >= n) break;
            x[j] = grove_morton2_compact(cs[k]);
            y[j] = grove_morton2_compact(cs[k] >> 1);
        }
    }
}

__global__ void morton3_encode_kernel(const uint32_t *__restrict__ x,
                                      const uint32_t *__restrict__ y,
                                      const uint32_t *__restrict__ z, uint64_t *__restrict__ codes,
                                      uint64_t *d_bad, uint64_t n)
{
    bool reported = false;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride * kUnroll) {
        uint32_t xs[kUnroll], ys[kUnroll], zs[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; k++) {
            uint64_t j = i + k * stride;
            xs[k] = j < n ? x[j] : 0u;
            ys[k] = j < n ? y[j] : 0u;
            zs[k] = j < n ? z[j] : 0u;
        }
#pragma unroll
        for (int k = 0; k < kUnroll; k++) {
            uint64_t j = i + k * stride;
            if (j >= n) break;
            if ((xs[k] | ys[k] | zs[k]) > 0x1FFFFFu) report_bad(d_bad, j, &reported);
            codes[j] = grove_morton3(xs[k], ys[k], zs[k]);
        }
    }
}

__global__ void morton3_decode_kernel(const uint64_t *__restrict__ codes, uint32_t *__restrict__ x,
                                      uint32_t *__restrict__ y, uint32_t *__restrict__ z,
                                      uint64_t n)
{
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride * kUnroll) {
        uint64_t cs[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; k++) {
            uint64_t j = i + k * stride;
            cs[k] = j < n ? codes[j] : 0u;
        }
#pragma unroll
        for (int k = 0; k < kUnroll; k++) {
            uint64_t j = i + k * stride;
            if (j >= n) break;
            x[j] = grove_morton3_compact(cs[k]);
            y[j] = grove_morton3_compact(cs[k] >> 1);
            z[j] = grove_morton3_compact(cs[k] >> 2);
        }
    }
}

} /* namespace */

extern "C" grove_status grove__cuda_morton2_encode(grove_ctx *ctx, const uint32_t *d_x,
                                                   const uint32_t *d_y, uint32_t *d_codes,
                                                   uint64_t *d_bad, size_t n, void *stream)
{
    const char *what = "grove__cuda_morton2_encode";
    unsigned blocks = 0;
    if (n == 0) return GROVE_OK;
    GROVE_TRY(grid_for(ctx, n, &blocks, what));
    morton2_encode_kernel<<<blocks, kThreads, 0, as_stream(ctx, stream)>>>(d_x, d_y, d_codes, d_bad,
                                                                           n);
    GROVE_CUDA_LAUNCHED(ctx, what);
    return GROVE_OK;
}

extern "C" grove_status grove__cuda_morton2_decode(grove_ctx *ctx, const uint32_t *d_codes,
                                                   uint32_t *d_x, uint32_t *d_y, size_t n,
                                                   void *stream)
{
    const char *what = "grove__cuda_morton2_decode";
    unsigned blocks = 0;
    if (n == 0) return GROVE_OK;
    GROVE_TRY(grid_for(ctx, n, &blocks, what));
    morton2_decode_kernel<<<blocks, kThreads, 0, as_stream(ctx, stream)>>>(d_codes, d_x, d_y, n);
    GROVE_CUDA_LAUNCHED(ctx, what);
    return GROVE_OK;
}

extern "C" grove_status grove__cuda_morton3_encode(grove_ctx *ctx, const uint32_t *d_x,
                                                   const uint32_t *d_y, const uint32_t *d_z,
                                                   uint64_t *d_codes, uint64_t *d_bad, size_t n,
                                                   void *stream)
{
    const char *what = "grove__cuda_morton3_encode";
    unsigned blocks = 0;
    if (n == 0) return GROVE_OK;
    GROVE_TRY(grid_for(ctx, n, &blocks, what));
    morton3_encode_kernel<<<blocks, kThreads, 0, as_stream(ctx, stream)>>>(d_x, d_y, d_z, d_codes,
                                                                           d_bad, n);
    GROVE_CUDA_LAUNCHED(ctx, what);
    return GROVE_OK;
}

extern "C" grove_status grove__cuda_morton3_decode(grove_ctx *ctx, const uint64_t *d_codes,
                                                   uint32_t *d_x, uint32_t *d_y, uint32_t *d_z,
                                                   size_t n, void *stream)
{
    const char *what = "grove__cuda_morton3_decode";
    unsigned blocks = 0;
    if (n == 0) return GROVE_OK;
    GROVE_TRY(grid_for(ctx, n, &blocks, what));
    morton3_decode_kernel<<<blocks, kThreads, 0, as_stream(ctx, stream)>>>(d_codes, d_x, d_y, d_z,
                                                                           n);
    GROVE_CUDA_LAUNCHED(ctx, what);
    return GROVE_OK;
}
