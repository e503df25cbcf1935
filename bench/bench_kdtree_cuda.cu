/*
 * bench_kdtree_cuda.cu - the GPU baselines of `grove bench kdtree` (bench_kdtree.c):
 *   a brute-force kNN kernel (k = 8), the reference the tree's queries are measured against;
 *   the Morton-sort floor of a build: bounding box, 21-bit quantisation, prim's 3-D Morton
 *   encode and a radix sort of (64-bit code, 32-bit index) pairs, all on the device.
 *   the device-resident k-d tree: grove_kdtree_build_device() and grove_kdtree_knn_device()
 *   (k = 8) on points and queries uploaded once beforehand (not timed).
 * All are timed with CUDA events on the context's stream (warm-up, then the median) and hand
 * their last result back to the host, where bench_kdtree.c checks it.
 */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench_cuda.h"
#include "grove/kdtree.h"
#include "grove/prim.h"
/* grove__error / grove__cuda_status: the benchmarks report failures like the library does. */
#include "core_cuda.h"

namespace
{

typedef unsigned long long u64;

const int BRUTE_K = 8;
const int BRUTE_TILE = 128; /* threads per block = points staged per tile */
const int QUANT_THREADS = 256;

/* One thread per query scans every point in index order, keeping the 8 best (squared distance,
 * index) pairs sorted in registers. Distances are the API's: double difference, square and sum
 * each rounded on its own (the _rn intrinsics forbid FMA contraction), axis order. A candidate
 * is inserted with the lexicographic order, so equal distances stay in index order. Points are
 * staged through shared memory as doubles, read by all threads at once (a broadcast). */
__global__ void __launch_bounds__(BRUTE_TILE)
    brute_knn_kernel(const float *__restrict__ pts, uint32_t n, const float *__restrict__ q,
                     uint32_t nq, uint64_t *__restrict__ idx, double *__restrict__ d2)
{
    __shared__ double sx[BRUTE_TILE], sy[BRUTE_TILE], sz[BRUTE_TILE];
    const uint32_t j = blockIdx.x * BRUTE_TILE + threadIdx.x;
    const bool active = j < nq;
    double qx = 0, qy = 0, qz = 0, bd[BRUTE_K];
    uint32_t bi[BRUTE_K];
    if (active) {
        qx = (double)q[3 * (u64)j];
        qy = (double)q[3 * (u64)j + 1];
        qz = (double)q[3 * (u64)j + 2];
    }
#pragma unroll
    for (int k = 0; k < BRUTE_K; k++) {
        bd[k] = INFINITY;
        bi[k] = UINT32_MAX;
    }
    for (uint32_t base = 0; base < n; base += BRUTE_TILE) {
        const uint32_t i = base + threadIdx.x, cnt = min((uint32_t)BRUTE_TILE, n - base);
        if (i < n) {
            sx[threadIdx.x] = (double)pts[3 * (u64)i];
            sy[threadIdx.x] = (double)pts[3 * (u64)i + 1];
            sz[threadIdx.x] = (double)pts[3 * (u64)i + 2];
        }
        __syncthreads();
        if (active) {
            for (uint32_t t = 0; t < cnt; t++) {
                double dx = __dadd_rn(sx[t], -qx), dy = __dadd_rn(sy[t], -qy),
                       dz = __dadd_rn(sz[t], -qz);
                double s = __dmul_rn(dx, dx);
                s = __dadd_rn(s, __dmul_rn(dy, dy));
                s = __dadd_rn(s, __dmul_rn(dz, dz));
                if (s < bd[BRUTE_K - 1]) {
                    double cd = s;
                    uint32_t ci = base + t;
#pragma unroll
                    for (int k = 0; k < BRUTE_K; k++) {
                        if (cd < bd[k] || (cd == bd[k] && ci < bi[k])) {
                            double td = bd[k];
                            uint32_t ti = bi[k];
                            bd[k] = cd;
                            bi[k] = ci;
                            cd = td;
                            ci = ti;
                        }
                    }
                }
            }
        }
        __syncthreads();
    }
    if (active) {
#pragma unroll
        for (int k = 0; k < BRUTE_K; k++) {
            idx[(u64)j * BRUTE_K + k] = bi[k] == UINT32_MAX ? UINT64_MAX : (uint64_t)bi[k];
            d2[(u64)j * BRUTE_K + k] = bd[k];
        }
    }
}

/* Coordinates to 21-bit integers in the box d_box (lo xyz, hi xyz) the bbox call just wrote:
 * x = (v - lo) * (2^21 / (hi - lo)), each step rounded (bench_kdtree.c's quantize() does the
 * same on the host, to check the codes). Also writes the identity permutation the sort moves. */
__global__ void quantize_kernel(const float *__restrict__ pts, const float *__restrict__ d_box,
                                uint32_t *__restrict__ qx, uint32_t *__restrict__ qy,
                                uint32_t *__restrict__ qz, uint32_t *__restrict__ vals, u64 n)
{
    __shared__ double lo[3], scale[3];
    if (threadIdx.x < 3) {
        double l = (double)d_box[threadIdx.x], ext = __dadd_rn((double)d_box[3 + threadIdx.x], -l);
        lo[threadIdx.x] = l;
        scale[threadIdx.x] = ext > 0 ? 2097152.0 / ext : 0.0; /* correctly rounded division */
    }
    __syncthreads();
    uint32_t *out[3] = {qx, qy, qz};
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
#pragma unroll
        for (int d = 0; d < 3; d++) {
            double x = __dmul_rn(__dadd_rn((double)pts[3 * i + d], -lo[d]), scale[d]);
            out[d][i] = x >= 2097151.0 ? 2097151u : (uint32_t)x;
        }
        vals[i] = (uint32_t)i;
    }
}

/* Device buffers of one benchmark, freed together. */
struct dev_bufs {
    void *p[10];
    int count;
    dev_bufs() : count(0) {}
    ~dev_bufs()
    {
        for (int i = 0; i < count; i++) cudaFree(p[i]);
    }
    template <typename T> cudaError_t alloc(T **out, size_t bytes)
    {
        void *q = NULL;
        cudaError_t e = cudaMalloc(&q, bytes ? bytes : 1);
        if (e == cudaSuccess) p[count++] = q;
        *out = (T *)q;
        return e;
    }
};

/* Events and a host array of times, freed together. */
struct timer {
    cudaEvent_t e0, e1;
    double *t;
    timer() : e0(NULL), e1(NULL), t(NULL) {}
    ~timer()
    {
        if (e0) cudaEventDestroy(e0);
        if (e1) cudaEventDestroy(e1);
        free(t);
    }
    cudaError_t init(int repeats)
    {
        t = (double *)malloc((size_t)(repeats > 0 ? repeats : 1) * sizeof *t);
        if (!t) return cudaErrorMemoryAllocation;
        cudaError_t e = cudaEventCreate(&e0);
        return e == cudaSuccess ? cudaEventCreate(&e1) : e;
    }
};

#define TRY_CUDA(call, what)                                                                       \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) return grove__cuda_status(ctx, (int)e_, (what));                    \
    } while (0)

unsigned grid_for(u64 n, int threads)
{
    u64 b = (n + (u64)threads - 1) / (u64)threads;
    return (unsigned)(b == 0 ? 1 : b > 8192 ? 8192 : b);
}

} /* namespace */

extern "C" grove_status grove__bench_kd_brute_cuda(grove_ctx *ctx, const float *pts, size_t n,
                                                   const float *q, size_t nq, int warmup,
                                                   int repeats, uint64_t *idx, double *d2,
                                                   double *ms)
{
    cudaStream_t st = (cudaStream_t)grove_ctx_stream(ctx);
    dev_bufs b;
    timer tm;
    float *d_pts, *d_q;
    uint64_t *d_idx;
    double *d_d2;
    unsigned blocks = (unsigned)((nq + BRUTE_TILE - 1) / BRUTE_TILE);
    if (n > UINT32_MAX - BRUTE_TILE || nq > UINT32_MAX - BRUTE_TILE)
        return grove__error(ctx, GROVE_ERR_LIMIT, "bench kdtree: brute force is for < 2^32 points");
    GROVE_TRY(grove__cuda_use(ctx));
    TRY_CUDA(tm.init(repeats), "bench kdtree: brute force events");
    TRY_CUDA(b.alloc(&d_pts, 3 * n * sizeof(float)), "bench kdtree: brute force points");
    TRY_CUDA(b.alloc(&d_q, 3 * nq * sizeof(float)), "bench kdtree: brute force queries");
    TRY_CUDA(b.alloc(&d_idx, BRUTE_K * nq * sizeof(uint64_t)), "bench kdtree: brute force out");
    TRY_CUDA(b.alloc(&d_d2, BRUTE_K * nq * sizeof(double)), "bench kdtree: brute force out");
    TRY_CUDA(cudaMemcpyAsync(d_pts, pts, 3 * n * sizeof(float), cudaMemcpyHostToDevice, st),
             "bench kdtree: brute force upload");
    TRY_CUDA(cudaMemcpyAsync(d_q, q, 3 * nq * sizeof(float), cudaMemcpyHostToDevice, st),
             "bench kdtree: brute force upload");
    for (int r = -warmup; r < repeats && nq > 0; r++) {
        float f = 0;
        TRY_CUDA(cudaEventRecord(tm.e0, st), "bench kdtree: event");
        brute_knn_kernel<<<blocks, BRUTE_TILE, 0, st>>>(d_pts, (uint32_t)n, d_q, (uint32_t)nq,
                                                        d_idx, d_d2);
        TRY_CUDA(cudaGetLastError(), "bench kdtree: brute force kernel launch");
        TRY_CUDA(cudaEventRecord(tm.e1, st), "bench kdtree: event");
        TRY_CUDA(cudaEventSynchronize(tm.e1), "bench kdtree: brute force kernel");
        TRY_CUDA(cudaEventElapsedTime(&f, tm.e0, tm.e1), "bench kdtree: event time");
        if (r >= 0) tm.t[r] = f;
    }
    TRY_CUDA(
        cudaMemcpyAsync(idx, d_idx, BRUTE_K * nq * sizeof(uint64_t), cudaMemcpyDeviceToHost, st),
        "bench kdtree: brute force download");
    TRY_CUDA(cudaMemcpyAsync(d2, d_d2, BRUTE_K * nq * sizeof(double), cudaMemcpyDeviceToHost, st),
             "bench kdtree: brute force download");
    TRY_CUDA(cudaStreamSynchronize(st), "bench kdtree: brute force download");
    *ms = grove__bench_median(tm.t, repeats);
    return GROVE_OK;
}

extern "C" grove_status grove__bench_kd_morton_cuda(grove_ctx *ctx, const float *pts, size_t n,
                                                    int warmup, int repeats, uint64_t *codes,
                                                    uint32_t *vals, float box[6], double *ms)
{
    cudaStream_t st = (cudaStream_t)grove_ctx_stream(ctx);
    dev_bufs b;
    timer tm;
    float *d_pts, *d_box;
    uint32_t *d_q, *d_vin, *d_vout;
    uint64_t *d_cin, *d_cout;
    void *d_temp;
    size_t bbox_bytes = 0, sort_bytes = 0;
    GROVE_TRY(grove__cuda_use(ctx));
    TRY_CUDA(tm.init(repeats), "bench kdtree: Morton sort events");
    GROVE_TRY(grove_bbox_device(ctx, NULL, &bbox_bytes, 3, NULL, NULL, n, st));
    GROVE_TRY(grove_sort_pairs_device(ctx, NULL, &sort_bytes, GROVE_U64, NULL, NULL, 4, NULL, NULL,
                                      n, 0, 63, st));
    TRY_CUDA(b.alloc(&d_pts, 3 * n * sizeof(float)), "bench kdtree: Morton sort points");
    TRY_CUDA(b.alloc(&d_box, 6 * sizeof(float)), "bench kdtree: Morton sort box");
    TRY_CUDA(b.alloc(&d_q, 3 * n * sizeof(uint32_t)), "bench kdtree: Morton sort coordinates");
    TRY_CUDA(b.alloc(&d_vin, n * sizeof(uint32_t)), "bench kdtree: Morton sort indices");
    TRY_CUDA(b.alloc(&d_vout, n * sizeof(uint32_t)), "bench kdtree: Morton sort indices");
    TRY_CUDA(b.alloc(&d_cin, n * sizeof(uint64_t)), "bench kdtree: Morton codes");
    TRY_CUDA(b.alloc(&d_cout, n * sizeof(uint64_t)), "bench kdtree: Morton codes");
    TRY_CUDA(b.alloc(&d_temp, bbox_bytes > sort_bytes ? bbox_bytes : sort_bytes),
             "bench kdtree: Morton sort scratch");
    TRY_CUDA(cudaMemcpyAsync(d_pts, pts, 3 * n * sizeof(float), cudaMemcpyHostToDevice, st),
             "bench kdtree: Morton sort upload");
    for (int r = -warmup; r < repeats; r++) {
        float f = 0;
        TRY_CUDA(cudaEventRecord(tm.e0, st), "bench kdtree: event");
        GROVE_TRY(grove_bbox_device(ctx, d_temp, &bbox_bytes, 3, d_pts, d_box, n, st));
        quantize_kernel<<<grid_for(n, QUANT_THREADS), QUANT_THREADS, 0, st>>>(
            d_pts, d_box, d_q, d_q + n, d_q + 2 * n, d_vin, (u64)n);
        TRY_CUDA(cudaGetLastError(), "bench kdtree: quantisation kernel launch");
        GROVE_TRY(grove_morton3_encode_device(ctx, d_q, d_q + n, d_q + 2 * n, d_cin, n, st));
        GROVE_TRY(grove_sort_pairs_device(ctx, d_temp, &sort_bytes, GROVE_U64, d_cin, d_cout, 4,
                                          d_vin, d_vout, n, 0, 63, st));
        TRY_CUDA(cudaEventRecord(tm.e1, st), "bench kdtree: event");
        TRY_CUDA(cudaEventSynchronize(tm.e1), "bench kdtree: Morton sort");
        TRY_CUDA(cudaEventElapsedTime(&f, tm.e0, tm.e1), "bench kdtree: event time");
        if (r >= 0) tm.t[r] = f;
    }
    TRY_CUDA(cudaMemcpyAsync(codes, d_cout, n * sizeof(uint64_t), cudaMemcpyDeviceToHost, st),
             "bench kdtree: Morton sort download");
    TRY_CUDA(cudaMemcpyAsync(vals, d_vout, n * sizeof(uint32_t), cudaMemcpyDeviceToHost, st),
             "bench kdtree: Morton sort download");
    TRY_CUDA(cudaMemcpyAsync(box, d_box, 6 * sizeof(float), cudaMemcpyDeviceToHost, st),
             "bench kdtree: Morton sort download");
    TRY_CUDA(cudaStreamSynchronize(st), "bench kdtree: Morton sort download");
    *ms = grove__bench_median(tm.t, repeats);
    return GROVE_OK;
}

extern "C" grove_status grove__bench_kd_device_cuda(grove_ctx *ctx, const float *pts, size_t n,
                                                    const float *q, size_t nq, int warmup,
                                                    int repeats, grove_kdtree **tree,
                                                    uint64_t *idx, double *d2, double *build_ms,
                                                    double *knn_ms)
{
    cudaStream_t st = (cudaStream_t)grove_ctx_stream(ctx);
    dev_bufs b;
    timer tb, tk;
    float *d_pts, *d_q;
    uint64_t *d_idx;
    double *d_d2;
    grove_kdtree *t = NULL;
    *tree = NULL;
    GROVE_TRY(grove__cuda_use(ctx));
    TRY_CUDA(tb.init(repeats), "bench kdtree: device events");
    TRY_CUDA(tk.init(repeats), "bench kdtree: device events");
    TRY_CUDA(b.alloc(&d_pts, 3 * n * sizeof(float)), "bench kdtree: device points");
    TRY_CUDA(b.alloc(&d_q, 3 * nq * sizeof(float)), "bench kdtree: device queries");
    TRY_CUDA(b.alloc(&d_idx, BRUTE_K * nq * sizeof(uint64_t)), "bench kdtree: device kNN out");
    TRY_CUDA(b.alloc(&d_d2, BRUTE_K * nq * sizeof(double)), "bench kdtree: device kNN out");
    TRY_CUDA(cudaMemcpyAsync(d_pts, pts, 3 * n * sizeof(float), cudaMemcpyHostToDevice, st),
             "bench kdtree: device upload");
    TRY_CUDA(cudaMemcpyAsync(d_q, q, 3 * nq * sizeof(float), cudaMemcpyHostToDevice, st),
             "bench kdtree: device upload");
    TRY_CUDA(cudaStreamSynchronize(st), "bench kdtree: device upload");
    const grove_coords pc = {d_pts, n, 3, GROVE_COORD_F32}, qc = {d_q, nq, 3, GROVE_COORD_F32};
    for (int r = -warmup; r < repeats; r++) {
        float f = 0;
        grove_kdtree_destroy(t);
        t = NULL;
        TRY_CUDA(cudaEventRecord(tb.e0, st), "bench kdtree: event");
        GROVE_TRY(grove_kdtree_build_device(ctx, &pc, NULL, &t));
        TRY_CUDA(cudaEventRecord(tb.e1, st), "bench kdtree: event");
        TRY_CUDA(cudaEventSynchronize(tb.e1), "bench kdtree: device build");
        TRY_CUDA(cudaEventElapsedTime(&f, tb.e0, tb.e1), "bench kdtree: event time");
        if (r >= 0) tb.t[r] = f;
    }
    for (int r = -warmup; r < repeats; r++) {
        float f = 0;
        grove_status s;
        TRY_CUDA(cudaEventRecord(tk.e0, st), "bench kdtree: event");
        s = grove_kdtree_knn_device(ctx, t, &qc, BRUTE_K, d_idx, d_d2);
        if (s != GROVE_OK) {
            grove_kdtree_destroy(t);
            return s;
        }
        TRY_CUDA(cudaEventRecord(tk.e1, st), "bench kdtree: event");
        TRY_CUDA(cudaEventSynchronize(tk.e1), "bench kdtree: device kNN");
        TRY_CUDA(cudaEventElapsedTime(&f, tk.e0, tk.e1), "bench kdtree: event time");
        if (r >= 0) tk.t[r] = f;
    }
    TRY_CUDA(cudaMemcpyAsync(idx, d_idx, BRUTE_K * nq * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                             st),
             "bench kdtree: device kNN download");
    TRY_CUDA(cudaMemcpyAsync(d2, d_d2, BRUTE_K * nq * sizeof(double), cudaMemcpyDeviceToHost, st),
             "bench kdtree: device kNN download");
    TRY_CUDA(cudaStreamSynchronize(st), "bench kdtree: device kNN download");
    *tree = t;
    *build_ms = grove__bench_median(tb.t, repeats);
    *knn_ms = grove__bench_median(tk.t, repeats);
    return grove_kdtree_download(ctx, t); /* for the comparison with the CPU's tree */
}
