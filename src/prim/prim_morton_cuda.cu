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

/* The one streaming kernel: Op::load(j) reads element j's inputs and Op::store(j, v, &reported)
 * computes and writes its outputs. Each step of the stride loop issues the loads of kUnroll
 * elements before using any of them. */
template <class Op> __global__ void stream_kernel(Op op, uint64_t n)
{
    bool reported = false;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride * kUnroll) {
        typename Op::In v[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; k++) {
            uint64_t j = i + k * stride;
            if (j < n) v[k] = op.load(j);
        }
#pragma unroll
        for (int k = 0; k < kUnroll; k++) {
            uint64_t j = i + k * stride;
            if (j >= n) break;
            op.store(j, v[k], &reported);
        }
    }
}

template <class Op>
grove_status launch(grove_ctx *ctx, const Op &op, size_t n, void *stream, const char *what)
{
    unsigned blocks = 0;
    if (n == 0) return GROVE_OK;
    GROVE_TRY(grid_for(ctx, n, &blocks, what));
    stream_kernel<Op><<<blocks, kThreads, 0, as_stream(ctx, stream)>>>(op, n);
    GROVE_CUDA_LAUNCHED(ctx, what);
    return GROVE_OK;
}

struct Encode2 {
    const uint32_t *__restrict__ x, *__restrict__ y;
    uint32_t *__restrict__ codes;
    uint64_t *d_bad;
    struct In {
        uint32_t x, y;
    };
    __device__ In load(uint64_t j) const { return In{x[j], y[j]}; }
    __device__ void store(uint64_t j, In v, bool *reported) const
    {
        if ((v.x | v.y) > 0xFFFFu) report_bad(d_bad, j, reported);
        codes[j] = grove_morton2(v.x, v.y);
    }
};

struct Decode2 {
    const uint32_t *__restrict__ codes;
    uint32_t *__restrict__ x, *__restrict__ y;
    typedef uint32_t In;
    __device__ In load(uint64_t j) const { return codes[j]; }
    __device__ void store(uint64_t j, In c, bool *) const
    {
        x[j] = grove_morton2_compact(c);
        y[j] = grove_morton2_compact(c >> 1);
    }
};

struct Encode3 {
    const uint32_t *__restrict__ x, *__restrict__ y, *__restrict__ z;
    uint64_t *__restrict__ codes;
    uint64_t *d_bad;
    struct In {
        uint32_t x, y, z;
    };
    __device__ In load(uint64_t j) const { return In{x[j], y[j], z[j]}; }
    __device__ void store(uint64_t j, In v, bool *reported) const
    {
        if ((v.x | v.y | v.z) > 0x1FFFFFu) report_bad(d_bad, j, reported);
        codes[j] = grove_morton3(v.x, v.y, v.z);
    }
};

struct Decode3 {
    const uint64_t *__restrict__ codes;
    uint32_t *__restrict__ x, *__restrict__ y, *__restrict__ z;
    typedef uint64_t In;
    __device__ In load(uint64_t j) const { return codes[j]; }
    __device__ void store(uint64_t j, In c, bool *) const
    {
        x[j] = grove_morton3_compact(c);
        y[j] = grove_morton3_compact(c >> 1);
        z[j] = grove_morton3_compact(c >> 2);
    }
};

} /* namespace */

extern "C" grove_status grove__cuda_morton2_encode(grove_ctx *ctx, const uint32_t *d_x,
                                                   const uint32_t *d_y, uint32_t *d_codes,
                                                   uint64_t *d_bad, size_t n, void *stream)
{
    return launch(ctx, Encode2{d_x, d_y, d_codes, d_bad}, n, stream, "grove__cuda_morton2_encode");
}

extern "C" grove_status grove__cuda_morton2_decode(grove_ctx *ctx, const uint32_t *d_codes,
                                                   uint32_t *d_x, uint32_t *d_y, size_t n,
                                                   void *stream)
{
    return launch(ctx, Decode2{d_codes, d_x, d_y}, n, stream, "grove__cuda_morton2_decode");
}

extern "C" grove_status grove__cuda_morton3_encode(grove_ctx *ctx, const uint32_t *d_x,
                                                   const uint32_t *d_y, const uint32_t *d_z,
                                                   uint64_t *d_codes, uint64_t *d_bad, size_t n,
                                                   void *stream)
{
    return launch(ctx, Encode3{d_x, d_y, d_z, d_codes, d_bad}, n, stream,
                  "grove__cuda_morton3_encode");
}

extern "C" grove_status grove__cuda_morton3_decode(grove_ctx *ctx, const uint64_t *d_codes,
                                                   uint32_t *d_x, uint32_t *d_y, uint32_t *d_z,
                                                   size_t n, void *stream)
{
    return launch(ctx, Decode3{d_codes, d_x, d_y, d_z}, n, stream, "grove__cuda_morton3_decode");
}
