/*
 * bench_prim_cuda.cu - the CUDA half of grove_bench_prim(): grove's _device primitives beside
 * CUB's equivalents and a device-to-device copy, timed with CUDA events on the context's
 * stream (warm-up, then the median of the repeats).
 *
 * Inputs are generated on the GPU from a hash (never zeros; flags and head flags use arbitrary
 * nonzero bytes, not just 1). Before an op is timed, grove's result is compared once with
 * CUB's (or, where CUB has none, with a reference built from CUB or computed on the host); a
 * mismatch is GROVE_ERR_INTERNAL naming the op. Preparation (segment ids for CUB, references,
 * temp allocation) is never timed.
 */
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include <cub/device/device_partition.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/reverse_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "bench_cuda.h"
#include "grove/prim.h"
/* grove__error / GROVE_CUDA_TRY: the benchmarks report failures like the library does. */
#include "core_cuda.h"

namespace
{

typedef unsigned long long u64;
typedef uint8_t u8;

__global__ void fill_kernel(void *p, u64 n, int kind, u64 seed)
{
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        grove__bench_fill_one(p, i, kind, seed);
}

/* CUB's segmented scan wants a key per element: the number of heads in [1, i]. */
struct HeadCount {
    const u8 *heads;
    __host__ __device__ uint32_t operator()(u64 i) const { return (i > 0 && heads[i]) ? 1u : 0u; }
};

__global__ void segsplit_keys_kernel(const uint32_t *segid, const u8 *flags, uint64_t *keys, u64 n)
{
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        keys[i] = ((uint64_t)segid[i] << 1) | (flags[i] ? 0u : 1u);
}

template <typename T> __device__ bool same(T a, T b, float) { return a == b; }
template <> __device__ bool same<float>(float a, float b, float tol)
{
    return fabsf(a - b) <= tol * fabsf(b) + tol;
}

/* Smallest i with a[i] != b[i] (b read backwards when reverse_b) into *first. */
template <typename T>
__global__ void mismatch_kernel(const T *a, const T *b, u64 n, int reverse_b, float tol, u64 *first)
{
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (!same(a[i], reverse_b ? b[n - 1 - i] : b[i], tol)) {
            atomicMin(first, i);
            break; /* this thread's later indices are larger */
        }
    }
}

struct NoCub {
};

struct Bench {
    grove_ctx *ctx;
    cudaStream_t s;
    int warmup, repeats;
    grove_bench_row *rows;
    int max_rows;
    int *nrows;
    int full;
    size_t n;
    double copy_gbps;
    int sms;
    /* A: 12n bytes (3n floats of points); B, C: 8n; D..G: 4n; flags, heads: n; X, Y: the
     * segsplit reference's keys (8n) and values (4n). */
    unsigned char *A, *B, *C, *D, *E, *F, *G, *X, *Y;
    u8 *flags, *heads;
    u64 *M; /* small results: counts, reductions, the mismatch index */
    void *temp;
    size_t temp_bytes;
    cudaEvent_t e0, e1;
};

#define BTRY(b, call, what) GROVE_CUDA_TRY((b)->ctx, call, what)

grove_status dalloc(Bench *b, void *p, size_t bytes, const char *what)
{
    BTRY(b, cudaMalloc((void **)p, bytes ? bytes : 1), what);
    return GROVE_OK;
}

void bench_free(Bench *b)
{
    void *bufs[] = {b->A, b->B, b->C,     b->D,     b->E, b->F,   b->G,
                    b->X, b->Y, b->flags, b->heads, b->M, b->temp};
    cudaStreamSynchronize(b->s);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) cudaFree(bufs[i]);
    if (b->e0) cudaEventDestroy(b->e0);
    if (b->e1) cudaEventDestroy(b->e1);
    cudaGetLastError(); /* teardown after a failure must not leave an error for the caller */
}

unsigned grid(Bench *b, u64 n)
{
    u64 want = (n + 255) / 256, cap = (u64)b->sms * 8;
    return (unsigned)(want < 1 ? 1 : want < cap ? want : cap);
}

grove_status fill(Bench *b, void *p, u64 n, int kind, u64 seed)
{
    fill_kernel<<<grid(b, n), 256, 0, b->s>>>(p, n, (int)kind, seed);
    GROVE_CUDA_LAUNCHED(b->ctx, "bench prim: generating random input");
    return GROVE_OK;
}

grove_status ensure_temp(Bench *b, size_t bytes)
{
    if (bytes <= b->temp_bytes) return GROVE_OK;
    BTRY(b, cudaStreamSynchronize(b->s), "bench prim: growing temp storage");
    if (b->temp) cudaFree(b->temp);
    b->temp = NULL;
    b->temp_bytes = 0;
    GROVE_TRY(dalloc(b, &b->temp, bytes, "bench prim: temp storage"));
    b->temp_bytes = bytes;
    return GROVE_OK;
}

double as_double(uint32_t v) { return v; }
double as_double(uint64_t v) { return (double)v; }
double as_double(float v) { return v; }

/* Compares n elements of a with b on the device; on a mismatch reports both values. */
template <typename T>
grove_status compare(Bench *b, const char *op, const char *what, const void *a, const void *ref,
                     u64 n, int reverse_ref = 0, float tol = 0.0f)
{
    u64 first = ~0ull;
    if (n == 0) return GROVE_OK;
    BTRY(b, cudaMemcpyAsync(b->M + 7, &first, sizeof first, cudaMemcpyHostToDevice, b->s),
         "bench prim: compare");
    mismatch_kernel<T>
        <<<grid(b, n), 256, 0, b->s>>>((const T *)a, (const T *)ref, n, reverse_ref, tol, b->M + 7);
    GROVE_CUDA_LAUNCHED(b->ctx, "bench prim: compare");
    BTRY(b, cudaMemcpyAsync(&first, b->M + 7, sizeof first, cudaMemcpyDeviceToHost, b->s),
         "bench prim: compare");
    BTRY(b, cudaStreamSynchronize(b->s), "bench prim: compare");
    if (first != ~0ull) {
        T got, want;
        u64 j = reverse_ref ? n - 1 - first : first;
        BTRY(b, cudaMemcpy(&got, (const T *)a + first, sizeof got, cudaMemcpyDeviceToHost),
             "bench prim: compare");
        BTRY(b, cudaMemcpy(&want, (const T *)ref + j, sizeof want, cudaMemcpyDeviceToHost),
             "bench prim: compare");
        return grove__error(b->ctx, GROVE_ERR_INTERNAL,
                            "bench prim: %s (n=%zu): %s differs from the reference at index %llu "
                            "(got %.9g, want %.9g)",
                            op, b->n, what, first, as_double(got), as_double(want));
    }
    return GROVE_OK;
}

grove_status read_u64(Bench *b, const u64 *d, u64 *h)
{
    BTRY(b, cudaMemcpyAsync(h, d, sizeof *h, cudaMemcpyDeviceToHost, b->s), "bench prim: read");
    BTRY(b, cudaStreamSynchronize(b->s), "bench prim: read");
    return GROVE_OK;
}

template <typename F> grove_status time_ms(Bench *b, F &&run, double *ms)
{
    std::vector<double> t((size_t)b->repeats);
    for (int i = 0; i < b->warmup; i++) GROVE_TRY(run());
    for (int i = 0; i < b->repeats; i++) {
        float e = 0.0f;
        BTRY(b, cudaEventRecord(b->e0, b->s), "bench prim: cudaEventRecord");
        GROVE_TRY(run());
        BTRY(b, cudaEventRecord(b->e1, b->s), "bench prim: cudaEventRecord");
        BTRY(b, cudaEventSynchronize(b->e1), "bench prim: waiting for a timed run");
        BTRY(b, cudaEventElapsedTime(&e, b->e0, b->e1), "bench prim: cudaEventElapsedTime");
        t[(size_t)i] = e;
    }
    *ms = grove__bench_median(t.data(), b->repeats);
    return GROVE_OK;
}

grove_status cub_status(Bench *b, cudaError_t e, const char *op)
{
    char what[96];
    if (e == cudaSuccess) return GROVE_OK;
    snprintf(what, sizeof what, "bench prim: CUB's %s", op);
    return grove__cuda_status(b->ctx, (int)e, what);
}

/* Runs one op: temp queries, one checked run of each implementation, then the timings.
 * g(temp, &bytes) is grove's call, c(temp, bytes) CUB's (or NoCub), check() compares the
 * results of the first runs. The byte counts are read after check(), which may set them. */
template <typename G, typename C, typename K>
grove_status bench_op(Bench *b, const char *op, const double &bytes_grove, const double &bytes_cub,
                      G g, C c, K check)
{
    constexpr bool has_cub = !std::is_same<C, NoCub>::value;
    size_t tg = 0, tc = 0;
    double ms_g = 0, ms_c = 0;
    if (b->full || *b->nrows + (has_cub ? 2 : 1) > b->max_rows) {
        b->full = 1;
        return GROVE_OK;
    }
    GROVE_TRY(g(NULL, &tg));
    GROVE_TRY(ensure_temp(b, tg));
    if constexpr (has_cub) {
        GROVE_TRY(cub_status(b, c(NULL, tc), op));
        GROVE_TRY(ensure_temp(b, tc));
    }
    GROVE_TRY(g(b->temp, &tg));
    if constexpr (has_cub) GROVE_TRY(cub_status(b, c(b->temp, tc), op));
    BTRY(b, cudaStreamSynchronize(b->s), "bench prim: first run");
    GROVE_TRY(check());
    GROVE_TRY(time_ms(
        b, [&] { return g(b->temp, &tg); }, &ms_g));
    if constexpr (has_cub)
        GROVE_TRY(time_ms(
            b, [&] { return cub_status(b, c(b->temp, tc), op); }, &ms_c));
    grove__bench_add_row(b->rows, b->max_rows, b->nrows, op, "grove", b->n, ms_g, bytes_grove,
                         b->copy_gbps, has_cub ? ms_c / ms_g : 0.0, 1);
    if (has_cub)
        grove__bench_add_row(b->rows, b->max_rows, b->nrows, op, "cub", b->n, ms_c, bytes_cub,
                             b->copy_gbps, 0.0, 1);
    return GROVE_OK;
}

/* The naive bit-by-bit Morton code: an oracle independent of prim.h's magic masks. */
uint64_t morton3_naive(uint32_t x, uint32_t y, uint32_t z)
{
    uint64_t c = 0;
    for (int i = 0; i < 21; i++)
        c |= (uint64_t)((x >> i) & 1) << (3 * i) | (uint64_t)((y >> i) & 1) << (3 * i + 1) |
             (uint64_t)((z >> i) & 1) << (3 * i + 2);
    return c;
}

grove_status check_morton_range(Bench *b, u64 lo, u64 cnt)
{
    std::vector<uint32_t> x(cnt), y(cnt), z(cnt);
    std::vector<uint64_t> c(cnt);
    BTRY(b, cudaMemcpy(x.data(), (uint32_t *)b->D + lo, cnt * 4, cudaMemcpyDeviceToHost),
         "bench prim: morton check");
    BTRY(b, cudaMemcpy(y.data(), (uint32_t *)b->E + lo, cnt * 4, cudaMemcpyDeviceToHost),
         "bench prim: morton check");
    BTRY(b, cudaMemcpy(z.data(), (uint32_t *)b->F + lo, cnt * 4, cudaMemcpyDeviceToHost),
         "bench prim: morton check");
    BTRY(b, cudaMemcpy(c.data(), (uint64_t *)b->B + lo, cnt * 8, cudaMemcpyDeviceToHost),
         "bench prim: morton check");
    for (u64 i = 0; i < cnt; i++) {
        uint64_t want = morton3_naive(x[i], y[i], z[i]);
        if (c[i] != want)
            return grove__error(b->ctx, GROVE_ERR_INTERNAL,
                                "bench prim: morton3_encode (n=%zu): code %llu is %#llx, want "
                                "%#llx",
                                b->n, lo + i, (u64)c[i], (u64)want);
    }
    return GROVE_OK;
}

/* The bounding box on the host, in chunks, with the same NaN-ignoring fminf/fmaxf. */
grove_status check_bbox(Bench *b, const float *d_box)
{
    const u64 chunk = 1u << 22;
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    float got[6];
    std::vector<float> h(chunk * 3);
    for (u64 at = 0; at < b->n; at += chunk) {
        u64 cnt = std::min<u64>(chunk, b->n - at);
        BTRY(b, cudaMemcpy(h.data(), (float *)b->A + 3 * at, cnt * 12, cudaMemcpyDeviceToHost),
             "bench prim: bbox check");
        for (u64 i = 0; i < cnt; i++)
            for (int d = 0; d < 3; d++) {
                lo[d] = fminf(lo[d], h[3 * i + d]);
                hi[d] = fmaxf(hi[d], h[3 * i + d]);
            }
    }
    BTRY(b, cudaMemcpy(got, d_box, sizeof got, cudaMemcpyDeviceToHost), "bench prim: bbox check");
    for (int d = 0; d < 3; d++)
        if (got[d] != lo[d] || got[3 + d] != hi[d])
            return grove__error(b->ctx, GROVE_ERR_INTERNAL,
                                "bench prim: bbox3 (n=%zu): axis %d is [%.9g, %.9g], want "
                                "[%.9g, %.9g]",
                                b->n, d, got[d], got[3 + d], lo[d], hi[d]);
    return GROVE_OK;
}

grove_status bench_copy(Bench *b)
{
    const u64 n = b->n;
    double ms = 0;
    auto run = [&]() -> grove_status {
        BTRY(b, cudaMemcpyAsync(b->B, b->A, n * 4, cudaMemcpyDeviceToDevice, b->s),
             "bench prim: device-to-device copy");
        return GROVE_OK;
    };
    if (*b->nrows + 1 > b->max_rows) {
        b->full = 1;
        return GROVE_OK;
    }
    GROVE_TRY(fill(b, b->A, n, GROVE__FILL_U32, 1));
    GROVE_TRY(run());
    GROVE_TRY(compare<uint32_t>(b, "copy", "the copy", b->B, b->A, n));
    GROVE_TRY(time_ms(b, run, &ms));
    b->copy_gbps = ms > 0 ? 8.0 * (double)n / (ms * 1e6) : 0;
    grove__bench_add_row(b->rows, b->max_rows, b->nrows, "copy", "copy", n, ms, 8.0 * (double)n,
                         b->copy_gbps, 0.0, 1);
    return GROVE_OK;
}

grove_status bench_size(Bench *b)
{
    grove_ctx *ctx = b->ctx;
    const size_t n = b->n;
    const uint32_t n32 = (uint32_t)n;
    const double dn = (double)n;
    cudaStream_t s = b->s;
    void *S = (void *)s;
    uint32_t *A32 = (uint32_t *)b->A, *B32 = (uint32_t *)b->B, *C32 = (uint32_t *)b->C;
    uint64_t *A64 = (uint64_t *)b->A, *B64 = (uint64_t *)b->B, *C64 = (uint64_t *)b->C;
    uint32_t *D32 = (uint32_t *)b->D, *E32 = (uint32_t *)b->E, *F32 = (uint32_t *)b->F;
    uint32_t *segid = (uint32_t *)b->G;
    const u8 *flags = b->flags, *heads = b->heads;
    u64 *M = b->M;

    GROVE_TRY(bench_copy(b));

    /* Flags, heads and CUB's segment ids stay fixed for the whole size. */
    GROVE_TRY(fill(b, b->flags, n, GROVE__FILL_FLAGS, 2));
    GROVE_TRY(fill(b, b->heads, n, GROVE__FILL_HEADS, 3));
    {
        thrust::transform_iterator<HeadCount, thrust::counting_iterator<u64>, uint32_t> inc(
            thrust::counting_iterator<u64>(0), HeadCount{heads});
        size_t tb = 0;
        GROVE_TRY(cub_status(b, cub::DeviceScan::InclusiveSum(NULL, tb, inc, segid, n32, s),
                             "InclusiveSum (segment ids)"));
        GROVE_TRY(ensure_temp(b, tb));
        GROVE_TRY(cub_status(b, cub::DeviceScan::InclusiveSum(b->temp, tb, inc, segid, n32, s),
                             "InclusiveSum (segment ids)"));
    }

    /* ---- scans ---- */
    {
        double bytes = 8 * dn;
        GROVE_TRY(fill(b, A32, n, GROVE__FILL_U32, 10));
        GROVE_TRY(bench_op(
            b, "scan_excl_u32", bytes, bytes,
            [&](void *t, size_t *tb) {
                return grove_scan_device(ctx, t, tb, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE,
                                         A32, B32, n, S);
            },
            [&](void *t, size_t &tb) {
                return cub::DeviceScan::ExclusiveSum(t, tb, (const uint32_t *)A32, C32, n32, s);
            },
            [&] { return compare<uint32_t>(b, "scan_excl_u32", "the scan", B32, C32, n); }));
    }
    {
        double bytes = 16 * dn;
        GROVE_TRY(fill(b, A64, n, GROVE__FILL_U64, 11));
        GROVE_TRY(bench_op(
            b, "scan_incl_u64", bytes, bytes,
            [&](void *t, size_t *tb) {
                return grove_scan_device(ctx, t, tb, GROVE_U64, GROVE_OP_SUM, GROVE_SCAN_INCLUSIVE,
                                         A64, B64, n, S);
            },
            [&](void *t, size_t &tb) {
                return cub::DeviceScan::InclusiveSum(t, tb, (const uint64_t *)A64, C64, n32, s);
            },
            [&] { return compare<uint64_t>(b, "scan_incl_u64", "the scan", B64, C64, n); }));
    }
    {
        double bytes = 8 * dn;
        float *Af = (float *)b->A, *Bf = (float *)b->B, *Cf = (float *)b->C;
        GROVE_TRY(fill(b, Af, n, GROVE__FILL_UNIT_F32, 12));
        GROVE_TRY(bench_op(
            b, "scan_excl_f32", bytes, bytes,
            [&](void *t, size_t *tb) {
                return grove_scan_device(ctx, t, tb, GROVE_F32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE,
                                         Af, Bf, n, S);
            },
            [&](void *t, size_t &tb) {
                return cub::DeviceScan::ExclusiveSum(t, tb, (const float *)Af, Cf, n32, s);
            },
            /* Different addition orders: agree within a relative 1e-3. */
            [&] { return compare<float>(b, "scan_excl_f32", "the scan", Bf, Cf, n, 0, 1e-3f); }));
    }

    /* ---- segmented scans (grove reads values + heads; CUB reads values + segment ids) ---- */
    GROVE_TRY(fill(b, A32, n, GROVE__FILL_U32, 13));
    {
        double bytes_g = 9 * dn, bytes_c = 12 * dn;
        GROVE_TRY(bench_op(
            b, "segscan_excl_u32_fwd", bytes_g, bytes_c,
            [&](void *t, size_t *tb) {
                return grove_segscan_device(ctx, t, tb, GROVE_U32, GROVE_OP_SUM,
                                            GROVE_SCAN_EXCLUSIVE, GROVE_SCAN_FORWARD, A32, heads,
                                            B32, n, S);
            },
            [&](void *t, size_t &tb) {
                return cub::DeviceScan::ExclusiveSumByKey(t, tb, (const uint32_t *)segid,
                                                          (const uint32_t *)A32, C32, n32,
                                                          ::cuda::std::equal_to<>(), s);
            },
            [&] { return compare<uint32_t>(b, "segscan_excl_u32_fwd", "the scan", B32, C32, n); }));
        /* Backward = CUB's forward scan over the reversed arrays. */
        GROVE_TRY(bench_op(
            b, "segscan_excl_u32_bwd", bytes_g, bytes_c,
            [&](void *t, size_t *tb) {
                return grove_segscan_device(ctx, t, tb, GROVE_U32, GROVE_OP_SUM,
                                            GROVE_SCAN_EXCLUSIVE, GROVE_SCAN_BACKWARD, A32, heads,
                                            B32, n, S);
            },
            [&](void *t, size_t &tb) {
                return cub::DeviceScan::ExclusiveSumByKey(
                    t, tb, thrust::make_reverse_iterator((const uint32_t *)segid + n),
                    thrust::make_reverse_iterator((const uint32_t *)A32 + n),
                    thrust::make_reverse_iterator(C32 + n), n32, ::cuda::std::equal_to<>(), s);
            },
            [&] { return compare<uint32_t>(b, "segscan_excl_u32_bwd", "the scan", B32, C32, n); }));
    }

    /* ---- split, segmented split, compaction ---- */
    {
        /* CUB's partition writes the unflagged part in reverse order (it is not stable). */
        double bytes = 9 * dn;
        GROVE_TRY(bench_op(
            b, "split_u32", bytes, bytes,
            [&](void *t, size_t *tb) {
                return grove_split_device(ctx, t, tb, 4, A32, flags, B32, NULL, (uint64_t *)(M + 0),
                                          n, S);
            },
            [&](void *t, size_t &tb) {
                return cub::DevicePartition::Flagged(t, tb, (const uint32_t *)A32, flags, C32,
                                                     M + 1, (::cuda::std::int64_t)n, s);
            },
            [&]() -> grove_status {
                u64 ng = 0, nc = 0;
                GROVE_TRY(read_u64(b, M + 0, &ng));
                GROVE_TRY(read_u64(b, M + 1, &nc));
                if (ng != nc)
                    return grove__error(ctx, GROVE_ERR_INTERNAL,
                                        "bench prim: split_u32 (n=%zu): %llu flagged, want %llu", n,
                                        ng, nc);
                GROVE_TRY(compare<uint32_t>(b, "split_u32", "the flagged part", B32, C32, ng));
                return compare<uint32_t>(b, "split_u32", "the unflagged part", B32 + ng, C32 + ng,
                                         n - ng, 1);
            }));
    }
    {
        /* Reference: a stable sort by (segment id, unflagged) carries the values along. */
        double bytes = 10 * dn;
        uint64_t *keys = (uint64_t *)b->C, *keys_out = (uint64_t *)b->X;
        uint32_t *ref = (uint32_t *)b->Y;
        GROVE_TRY(bench_op(
            b, "segsplit_u32", bytes, bytes,
            [&](void *t, size_t *tb) {
                return grove_segsplit_device(ctx, t, tb, 4, A32, flags, heads, B32, NULL, n, S);
            },
            NoCub(),
            [&]() -> grove_status {
                size_t tb = 0;
                segsplit_keys_kernel<<<grid(b, n), 256, 0, s>>>(segid, flags, keys, n);
                GROVE_CUDA_LAUNCHED(ctx, "bench prim: segsplit reference keys");
                GROVE_TRY(cub_status(
                    b,
                    cub::DeviceRadixSort::SortPairs(NULL, tb, (const uint64_t *)keys, keys_out,
                                                    (const uint32_t *)A32, ref, n32, 0, 33, s),
                    "SortPairs (segsplit reference)"));
                GROVE_TRY(ensure_temp(b, tb));
                GROVE_TRY(cub_status(
                    b,
                    cub::DeviceRadixSort::SortPairs(b->temp, tb, (const uint64_t *)keys, keys_out,
                                                    (const uint32_t *)A32, ref, n32, 0, 33, s),
                    "SortPairs (segsplit reference)"));
                return compare<uint32_t>(b, "segsplit_u32", "the split", B32, ref, n);
            }));
    }
    {
        /* Bytes depend on how many are selected: set by the check. */
        double bytes = 0;
        GROVE_TRY(bench_op(
            b, "compact_u32", bytes, bytes,
            [&](void *t, size_t *tb) {
                return grove_compact_device(ctx, t, tb, 4, A32, flags, B32, (uint64_t *)(M + 0), n,
                                            S);
            },
            [&](void *t, size_t &tb) {
                return cub::DeviceSelect::Flagged(t, tb, (const uint32_t *)A32, flags, C32, M + 1,
                                                  (::cuda::std::int64_t)n, s);
            },
            [&]() -> grove_status {
                u64 ng = 0, nc = 0;
                GROVE_TRY(read_u64(b, M + 0, &ng));
                GROVE_TRY(read_u64(b, M + 1, &nc));
                if (ng != nc)
                    return grove__error(ctx, GROVE_ERR_INTERNAL,
                                        "bench prim: compact_u32 (n=%zu): %llu selected, want "
                                        "%llu",
                                        n, ng, nc);
                bytes = 5 * dn + 4 * (double)ng + 8;
                return compare<uint32_t>(b, "compact_u32", "the output", B32, C32, ng);
            }));
    }

    /* ---- reduction, bounding box ---- */
    {
        double bytes = 4 * dn;
        GROVE_TRY(bench_op(
            b, "reduce_sum_u32", bytes, bytes,
            [&](void *t, size_t *tb) {
                return grove_reduce_device(ctx, t, tb, GROVE_U32, GROVE_OP_SUM, A32, M + 2, n, S);
            },
            [&](void *t, size_t &tb) {
                return cub::DeviceReduce::Sum(t, tb, (const uint32_t *)A32, (uint32_t *)(M + 3),
                                              n32, s);
            },
            [&] { return compare<uint32_t>(b, "reduce_sum_u32", "the sum", M + 2, M + 3, 1); }));
    }
    {
        double bytes = 12 * dn + 24;
        float *pts = (float *)b->A, *box = (float *)(M + 8);
        GROVE_TRY(fill(b, pts, 3 * (u64)n, GROVE__FILL_COORD_F32, 14));
        GROVE_TRY(bench_op(
            b, "bbox3", bytes, bytes,
            [&](void *t, size_t *tb) { return grove_bbox_device(ctx, t, tb, 3, pts, box, n, S); },
            NoCub(), [&] { return check_bbox(b, box); }));
    }

    /* ---- radix sort (bytes: the floor of one read and one write) ---- */
    {
        double bytes = 8 * dn;
        GROVE_TRY(fill(b, A32, n, GROVE__FILL_U32, 15));
        GROVE_TRY(bench_op(
            b, "sort_keys_u32", bytes, bytes,
            [&](void *t, size_t *tb) {
                return grove_sort_keys_device(ctx, t, tb, GROVE_U32, A32, B32, n, 0, 0, S);
            },
            [&](void *t, size_t &tb) {
                return cub::DeviceRadixSort::SortKeys(t, tb, (const uint32_t *)A32, C32, n32, 0, 32,
                                                      s);
            },
            [&] { return compare<uint32_t>(b, "sort_keys_u32", "the keys", B32, C32, n); }));
    }
    {
        double bytes = 16 * dn;
        GROVE_TRY(fill(b, D32, n, GROVE__FILL_U32, 16));
        GROVE_TRY(bench_op(
            b, "sort_pairs_u32", bytes, bytes,
            [&](void *t, size_t *tb) {
                return grove_sort_pairs_device(ctx, t, tb, GROVE_U32, A32, B32, 4, D32, E32, n, 0,
                                               0, S);
            },
            [&](void *t, size_t &tb) {
                return cub::DeviceRadixSort::SortPairs(t, tb, (const uint32_t *)A32, C32,
                                                       (const uint32_t *)D32, F32, n32, 0, 32, s);
            },
            [&]() -> grove_status {
                GROVE_TRY(compare<uint32_t>(b, "sort_pairs_u32", "the keys", B32, C32, n));
                return compare<uint32_t>(b, "sort_pairs_u32", "the values", E32, F32, n);
            }));
    }
    {
        double bytes = 16 * dn;
        GROVE_TRY(fill(b, A64, n, GROVE__FILL_U64, 17));
        GROVE_TRY(bench_op(
            b, "sort_keys_u64", bytes, bytes,
            [&](void *t, size_t *tb) {
                return grove_sort_keys_device(ctx, t, tb, GROVE_U64, A64, B64, n, 0, 0, S);
            },
            [&](void *t, size_t &tb) {
                return cub::DeviceRadixSort::SortKeys(t, tb, (const uint64_t *)A64, C64, n32, 0, 64,
                                                      s);
            },
            [&] { return compare<uint64_t>(b, "sort_keys_u64", "the keys", B64, C64, n); }));
    }

    /* ---- Morton codes: checked whole up to 2^24, else the first 2^24 and the last 2^20 ---- */
    {
        double bytes = 20 * dn;
        GROVE_TRY(fill(b, D32, n, GROVE__FILL_BITS21, 18));
        GROVE_TRY(fill(b, E32, n, GROVE__FILL_BITS21, 19));
        GROVE_TRY(fill(b, F32, n, GROVE__FILL_BITS21, 20));
        GROVE_TRY(bench_op(
            b, "morton3_encode", bytes, bytes,
            [&](void *t, size_t *tb) {
                (void)t;
                *tb = 1; /* no scratch memory */
                return grove_morton3_encode_device(ctx, D32, E32, F32, B64, n, S);
            },
            NoCub(),
            [&]() -> grove_status {
                const u64 head = 1u << 24, tail = 1u << 20;
                GROVE_TRY(check_morton_range(b, 0, std::min<u64>(n, head)));
                if (n > head) GROVE_TRY(check_morton_range(b, n - tail, tail));
                return GROVE_OK;
            }));
    }
    return GROVE_OK;
}

} /* namespace */

extern "C" grove_status grove__bench_prim_cuda(grove_ctx *ctx, const grove_bench_opts *opts,
                                               grove_bench_row *rows, int max_rows, int *nrows)
{
    size_t sizes[2] = {(size_t)1 << 24, (size_t)1 << 28};
    int nsizes = 2;
    grove_status st = GROVE_OK;
    char skipped[512] = "";
    int sms = 0;

    if (opts && opts->n) {
        sizes[0] = opts->n;
        nsizes = 1;
    }
    GROVE_CUDA_TRY(ctx, cudaSetDevice(grove_ctx_device(ctx)), "bench prim: cudaSetDevice");
    GROVE_CUDA_TRY(
        ctx, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, grove_ctx_device(ctx)),
        "bench prim: querying the SM count");
    for (int k = 0; k < nsizes; k++) {
        const size_t n = sizes[k];
        /* Buffers (46n), the largest scratch (a radix sort of u64 keys with u32 values, about
         * 12n) and the segsplit reference's keys and values (12n), plus slack. */
        const double need = 70.0 * (double)n + (128u << 20);
        size_t free_b = 0, total_b = 0;
        Bench b;
        memset(&b, 0, sizeof b);
        GROVE_CUDA_TRY(ctx, cudaMemGetInfo(&free_b, &total_b), "bench prim: cudaMemGetInfo");
        if (need > (double)free_b) {
            size_t len = strlen(skipped);
            snprintf(skipped + len, sizeof skipped - len,
                     "%sn=%zu skipped: needs about %.1f GiB of device memory, %.1f GiB free",
                     len ? "; " : "bench prim: ", n, need / 1073741824.0,
                     (double)free_b / 1073741824.0);
            continue;
        }
        b.ctx = ctx;
        b.s = (cudaStream_t)grove_ctx_stream(ctx);
        b.warmup = opts && opts->warmup >= 0 ? opts->warmup : 3;
        b.repeats = opts && opts->repeats > 0 ? opts->repeats : 20;
        b.rows = rows;
        b.max_rows = max_rows;
        b.nrows = nrows;
        b.n = n;
        b.sms = sms > 0 ? sms : 1;
        if ((st = dalloc(&b, &b.A, 12 * n, "bench prim: buffer A")) ||
            (st = dalloc(&b, &b.B, 8 * n, "bench prim: buffer B")) ||
            (st = dalloc(&b, &b.C, 8 * n, "bench prim: buffer C")) ||
            (st = dalloc(&b, &b.D, 4 * n, "bench prim: buffer D")) ||
            (st = dalloc(&b, &b.E, 4 * n, "bench prim: buffer E")) ||
            (st = dalloc(&b, &b.F, 4 * n, "bench prim: buffer F")) ||
            (st = dalloc(&b, &b.G, 4 * n, "bench prim: buffer G")) ||
            (st = dalloc(&b, &b.X, 8 * n, "bench prim: buffer X")) ||
            (st = dalloc(&b, &b.Y, 4 * n, "bench prim: buffer Y")) ||
            (st = dalloc(&b, &b.flags, n, "bench prim: flags")) ||
            (st = dalloc(&b, &b.heads, n, "bench prim: heads")) ||
            (st = dalloc(&b, &b.M, 16 * sizeof(u64), "bench prim: results")))
            goto _end;
        if (cudaEventCreate(&b.e0) != cudaSuccess || cudaEventCreate(&b.e1) != cudaSuccess) {
            st = grove__cuda_status(ctx, (int)cudaGetLastError(), "bench prim: cudaEventCreate");
            goto _end;
        }
        st = bench_size(&b);
    _end:
        bench_free(&b);
        if (st != GROVE_OK) return st;
        if (b.full) break;
    }
    /* A skipped size is not a failure: the rows say what ran, the message says what did not. */
    if (skipped[0]) grove__error(ctx, GROVE_OK, "%s", skipped);
    return GROVE_OK;
}
