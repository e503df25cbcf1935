/*
 * mri_cuda.cu - the Q and FHD sums on the GPU (declared in mri_cuda.h).
 *
 * Both sums are one sum: out[n] = sum_m (wr + i wi)_m * exp(i a_mn), a_mn = 2 pi k_m . x_n, with
 * (wr, wi) = (phiMag, 0) for Q and (rMu, iMu) for FHD. The kernels:
 *
 *   SCATTER   PMPP fig. 17.5/17.8 after loop fission: a prep kernel (cmpMu) writes wr, wi; then
 *             a thread per sample adds its term into every voxel with atomicAdd. sinf/cosf.
 *   GATHER    fig. 17.10: a thread per voxel, samples read from global memory, sums kept in
 *             registers. sinf/cosf (the libdevice versions, accurate for any argument).
 *   CONSTANT  the book's constant-memory version: chunks of CONST_CHUNK samples (kx, ky, kz, wr,
 *             wi as an array of structs) copied into __constant__ memory, one launch per chunk
 *             that adds into the outputs, hardware __sinf/__cosf after the turn reduction below
 *             (the book's raw __sinf(2 pi k.x) measured 2x the error, still far under 1e-4 for
 *             |k| <= 64, but its error grows with |k.x|). Benchmark variant: the __constant__
 *             buffer is module-wide, so two CONSTANT sums queued at once on different streams
 *             would overwrite each other's chunks.
 *   TILED     a thread per voxel, samples staged through shared-memory tiles, the turn
 *             reduction and hardware __sinf/__cosf.
 *   FAST      the production kernel (AUTO; docs/mri-gpu.md has the derivation and figures):
 *             - each sample's complex weight in polar form (|w|, arg w), so that its phase
 *               joins the argument, a = 2 pi k.x + arg w, and a pair accumulates with 2 FMAs
 *               instead of 4 (Q: arg w = 0);
 *             - samples as float4 (2 pi kx, 2 pi ky, 2 pi kz, arg w) + |w| in double-buffered
 *               shared-memory tiles, V = 8 consecutive voxels per thread; the samples are
 *               cut into parts when that fills the last wave of blocks better (partial sums
 *               added in a fixed order: the same bits every run);
 *             - general path: 6 of the 8 voxels through the hardware __sinf/__cosf (MUFU, 16
 *               results per clock per SM: the bound), 2 through minimax polynomials on the FMA
 *               pipe after an exact reduction to |r| <= pi, so that both pipes work;
 *             - run path, for blocks whose threads' voxels lie equally spaced on lines (image
 *               rows): exp(i a) of voxel v + 1 from voxel v's by a rotation by exp(i k.d),
 *               4 FMA-pipe operations a pair and 4 MUFUs a sample for the thread.
 *
 * Range reduction. CONSTANT and TILED: t = k.x in turns, r = t - rint(t) (exact; rint by the
 * 1.5*2^23 trick), then __sinf/__cosf of 2 pi r. SCATTER and GATHER: sinf/cosf of 2 pi (k.x) as
 * the book writes it, accurate because sinf reduces its argument itself. FAST: the polynomials
 * get r = a - rint(a / 2 pi) (2 pi)_f; the hardware functions get a unreduced (F_RED = false),
 * which costs the rounding of a / 2 pi in their FMUL.RZ, about one ulp of the phase (measured:
 * relative L2 error 1.0e-5 against 6e-6 with the reduction, at |k| <= 64, for 3 fewer
 * instructions of ~12 a pair). Phases past 2^22 turns are beyond float either way.
 */
#include <cuda_runtime.h>

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core_cuda.h"
#include "mri_cuda.h"

namespace
{

constexpr float TWO_PI_F = 6.28318530717958647692f;
constexpr float INV_2PI_F = 0.159154943091895335769f;
constexpr float MAGIC = 12582912.0f; /* 1.5 * 2^23: x + MAGIC - MAGIC = rint(x), |x| < 2^22 */

constexpr int BLOCK = 256;        /* thread-per-voxel and thread-per-sample kernels */
constexpr int CONST_CHUNK = 3072; /* samples per constant-memory chunk: 60 KiB */
constexpr int TILE = 256;         /* TILED: samples per shared-memory tile */

/* FAST: threads per block, voxels per thread, of which F_VP through the polynomial, reduction
 * before the hardware sin/cos, samples per tile, samples per step of the inner loop. */
constexpr int F_BLOCK = 128;
constexpr int F_V = 8;
constexpr int F_VP = 2;
constexpr bool F_RED = false;
constexpr int F_TILE = 128;
constexpr int F_UNROLL = 4;
constexpr bool F_RUNS = true;
/* Blocks resident per SM that the register budget must allow (V <= 8): 72 registers, the
 * count of the general path alone; the run path beside it would take up to 96 and leave 5. */
constexpr int F_MIN_BLOCKS = 7;
/* The run path's tolerance on voxel positions: 2^-24, a phase error of at most 2 pi |k| 2^-24
 * (2.4e-5 rad at |k| = 64), below the rounding of the phase itself. */
constexpr float RUN_TOL = 5.9604644775390625e-08f;
constexpr size_t F_SCRATCH_MAX = (size_t)512 << 20; /* bytes of partial sums at most */

cudaStream_t stream_of(grove_ctx *ctx) { return (cudaStream_t)ctx->stream; }

/* A CUDA return code as a status, for the GROVE_TRY_END paths. */
grove_status cu(grove_ctx *ctx, cudaError_t e, const char *what)
{
    return e == cudaSuccess ? GROVE_OK : grove__cuda_status(ctx, (int)e, what);
}

/* Grid for a grid-stride loop over `items` with `per_block` items per block. */
unsigned grid_for(size_t items, size_t per_block)
{
    size_t b = (items + per_block - 1) / per_block;
    const size_t cap = (size_t)1 << 30;
    if (b > cap) b = cap;
    if (b == 0) b = 1;
    return (unsigned)b;
}

/* ----------------------------------------- prep ----------------------------------------- */

/* The weights of the textbook kernels (cmpMu, the loop fission of PMPP 17.3). */
__global__ void k_weights(size_t m, int fhd, const float *__restrict__ pr,
                          const float *__restrict__ pi, const float *__restrict__ dr,
                          const float *__restrict__ di, float *__restrict__ wr,
                          float *__restrict__ wi)
{
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < m;
         j += (size_t)gridDim.x * blockDim.x) {
        float a = pr[j], b = pi[j];
        if (fhd) {
            float c = dr[j], d = di[j];
            wr[j] = a * c + b * d;
            wi[j] = a * d - b * c;
        } else {
            wr[j] = a * a + b * b;
            wi[j] = 0.0f;
        }
    }
}

/* CONSTANT's array of structs. */
struct KVal {
    float kx, ky, kz, wr, wi;
};

__global__ void k_pack_aos(size_t m, const float *__restrict__ kx, const float *__restrict__ ky,
                           const float *__restrict__ kz, const float *__restrict__ wr,
                           const float *__restrict__ wi, KVal *__restrict__ out)
{
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < m;
         j += (size_t)gridDim.x * blockDim.x) {
        KVal v;
        v.kx = kx[j];
        v.ky = ky[j];
        v.kz = kz ? kz[j] : 0.0f;
        v.wr = wr[j];
        v.wi = wi[j];
        out[j] = v;
    }
}

/* FAST's samples: (2 pi kx, 2 pi ky, 2 pi kz, arg w) and |w|, padded with zero weights up to
 * mpad. The polar form is computed in double so that only the final rounding to float is lost. */
__global__ void k_pack_polar(size_t m, size_t mpad, int fhd, const float *__restrict__ kx,
                             const float *__restrict__ ky, const float *__restrict__ kz,
                             const float *__restrict__ pr, const float *__restrict__ pi,
                             const float *__restrict__ dr, const float *__restrict__ di,
                             float4 *__restrict__ kp, float *__restrict__ kw)
{
    const double two_pi = 6.283185307179586476925;
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < mpad;
         j += (size_t)gridDim.x * blockDim.x) {
        float4 p = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        float w = 0.0f;
        if (j < m) {
            double a = pr[j], b = pi[j], re, im;
            if (fhd) {
                double c = dr[j], d = di[j];
                re = a * c + b * d;
                im = a * d - b * c;
            } else {
                re = a * a + b * b;
                im = 0.0;
            }
            p.x = (float)(two_pi * kx[j]);
            p.y = (float)(two_pi * ky[j]);
            p.z = kz ? (float)(two_pi * kz[j]) : 0.0f;
            p.w = (float)atan2(im, re);
            w = (float)hypot(re, im);
        }
        kp[j] = p;
        kw[j] = w;
    }
}

/* ---------------------------------------- SCATTER ---------------------------------------- */

template <bool FHD, bool Z>
__global__ void k_scatter(size_t m, const float *__restrict__ kx, const float *__restrict__ ky,
                          const float *__restrict__ kz, const float *__restrict__ wr,
                          const float *__restrict__ wi, size_t n, const float *__restrict__ x,
                          const float *__restrict__ y, const float *__restrict__ z, float *out_r,
                          float *out_i)
{
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < m;
         j += (size_t)gridDim.x * blockDim.x) {
        const float ax = kx[j], ay = ky[j], az = Z ? kz[j] : 0.0f;
        const float a = wr[j], b = FHD ? wi[j] : 0.0f;
        for (size_t i = 0; i < n; i++) {
            float e = TWO_PI_F * (ax * x[i] + ay * y[i] + (Z ? az * z[i] : 0.0f));
            float s, c;
            sincosf(e, &s, &c);
            atomicAdd(&out_r[i], FHD ? a * c - b * s : a * c);
            atomicAdd(&out_i[i], FHD ? b * c + a * s : a * s);
        }
    }
}

/* ---------------------------------------- GATHER ---------------------------------------- */

template <bool FHD, bool Z>
__global__ void k_gather(size_t m, const float *__restrict__ kx, const float *__restrict__ ky,
                         const float *__restrict__ kz, const float *__restrict__ wr,
                         const float *__restrict__ wi, size_t n, const float *__restrict__ x,
                         const float *__restrict__ y, const float *__restrict__ z,
                         float *__restrict__ out_r, float *__restrict__ out_i)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float px = x[i], py = y[i], pz = Z ? z[i] : 0.0f;
        float ar = 0.0f, ai = 0.0f;
        for (size_t j = 0; j < m; j++) {
            float e = TWO_PI_F * (kx[j] * px + ky[j] * py + (Z ? kz[j] * pz : 0.0f));
            float s, c;
            sincosf(e, &s, &c);
            if (FHD) {
                ar += wr[j] * c - wi[j] * s;
                ai += wi[j] * c + wr[j] * s;
            } else {
                ar += wr[j] * c;
                ai += wr[j] * s;
            }
        }
        out_r[i] = ar;
        out_i[i] = ai;
    }
}

/* --------------------------------------- CONSTANT --------------------------------------- */

/* One chunk of samples. A module-wide buffer, as in the book: two CONSTANT sums queued at the
 * same time on different streams would overwrite each other's chunks, so this variant is for
 * benchmarks only (docs/mri-gpu.md). */
__constant__ KVal c_k[CONST_CHUNK];

/* sin and cos of 2 pi t for any t: the reduction to r = t - rint(t) in [-1/2, 1/2] is exact, so
 * the hardware functions see |2 pi r| <= pi, where their absolute error is about 2^-21.4. */
__device__ __forceinline__ void sincos_turns_hw(float t, float *s, float *c)
{
    /* rint by the 1.5*2^23 trick: rintf is an FRND, which runs on the special-function pipe
     * beside the two MUFUs and made these kernels 1.5x slower */
    float r = t - ((t + MAGIC) - MAGIC);
    float e = TWO_PI_F * r;
    *s = __sinf(e);
    *c = __cosf(e);
}

template <bool FHD, bool Z>
__global__ void k_constant(int cnt, int first, size_t n, const float *__restrict__ x,
                           const float *__restrict__ y, const float *__restrict__ z,
                           float *__restrict__ out_r, float *__restrict__ out_i)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float px = x[i], py = y[i], pz = Z ? z[i] : 0.0f;
        float ar = first ? 0.0f : out_r[i], ai = first ? 0.0f : out_i[i];
        for (int j = 0; j < cnt; j++) {
            float t = c_k[j].kx * px + c_k[j].ky * py + (Z ? c_k[j].kz * pz : 0.0f);
            float s, c;
            sincos_turns_hw(t, &s, &c);
            if (FHD) {
                ar += c_k[j].wr * c - c_k[j].wi * s;
                ai += c_k[j].wi * c + c_k[j].wr * s;
            } else {
                ar += c_k[j].wr * c;
                ai += c_k[j].wr * s;
            }
        }
        out_r[i] = ar;
        out_i[i] = ai;
    }
}

/* ---------------------------------------- TILED ---------------------------------------- */

template <bool FHD, bool Z>
__global__ void __launch_bounds__(BLOCK)
    k_tiled(size_t m, const KVal *__restrict__ kv, size_t n, const float *__restrict__ x,
            const float *__restrict__ y, const float *__restrict__ z, float *__restrict__ out_r,
            float *__restrict__ out_i)
{
    __shared__ KVal s_k[TILE];
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    /* The loop bound is the same for every thread of the block (it runs over whole blocks), so
     * the barriers inside are reached by all of them. */
    for (size_t base = blockIdx.x * (size_t)blockDim.x; base < n; base += stride) {
        const size_t i = base + threadIdx.x;
        const bool live = i < n;
        const float px = live ? x[i] : 0.0f, py = live ? y[i] : 0.0f;
        const float pz = (Z && live) ? z[i] : 0.0f;
        float ar = 0.0f, ai = 0.0f;
        for (size_t j0 = 0; j0 < m; j0 += TILE) {
            const int cnt = (int)(m - j0 < (size_t)TILE ? m - j0 : (size_t)TILE);
            __syncthreads();
            for (int t = threadIdx.x; t < cnt; t += blockDim.x) s_k[t] = kv[j0 + t];
            __syncthreads();
            for (int j = 0; j < cnt; j++) {
                const KVal v = s_k[j];
                float t = v.kx * px + v.ky * py + (Z ? v.kz * pz : 0.0f);
                float s, c;
                sincos_turns_hw(t, &s, &c);
                if (FHD) {
                    ar += v.wr * c - v.wi * s;
                    ai += v.wi * c + v.wr * s;
                } else {
                    ar += v.wr * c;
                    ai += v.wr * s;
                }
            }
        }
        if (live) {
            out_r[i] = ar;
            out_i[i] = ai;
        }
    }
}

/* ----------------------------------------- FAST ----------------------------------------- */

/* sin and cos of r, |r| <= pi + 2e-5, on the FMA pipe: minimax polynomials of degree 11 (odd)
 * and 12 (even) for the absolute error (Remez: 9.5e-8 and 1.1e-8; evaluated in float, at most
 * 6.7e-7 and 3.1e-7 near |r| = pi, the size of the hardware's own error). */
__device__ __forceinline__ void sincos_poly(float r, float *s, float *c)
{
    const float r2 = r * r;
    float p = -2.03660505789359725e-08f;
    p = fmaf(p, r2, 2.69981835540270414e-06f);
    p = fmaf(p, r2, -1.98087361227296151e-04f);
    p = fmaf(p, r2, 8.33240744423254843e-03f);
    p = fmaf(p, r2, -1.66665534236370792e-01f);
    p = fmaf(p, r2, 9.99999603824230159e-01f);
    *s = p * r;
    float q = 1.72474649762993869e-09f;
    q = fmaf(q, r2, -2.70797369073350682e-07f);
    q = fmaf(q, r2, 2.47699623306317270e-05f);
    q = fmaf(q, r2, -1.38878076482565988e-03f);
    q = fmaf(q, r2, 4.16664901585574965e-02f);
    q = fmaf(q, r2, -4.99999891810437783e-01f);
    q = fmaf(q, r2, 9.99999989169108930e-01f);
    *c = q;
}

/* a reduced to |r| <= pi + 2e-5: n = rint(a / 2 pi), r = a - n (2 pi)_f. The product n (2 pi)_f
 * is exact inside the fma; (2 pi)_f differs from 2 pi by 1.7e-7, which shifts every phase by
 * 2.8e-8 of itself, below the rounding of a itself. */
__device__ __forceinline__ float reduce_rad(float a)
{
    const float u = fmaf(a, INV_2PI_F, MAGIC);
    const float nn = u - MAGIC;
    return fmaf(nn, -TWO_PI_F, a);
}

/* One work item is a group of F_BLOCK * V voxels (thread t has voxels t V .. t V + V - 1) and a
 * part of the samples: tiles [part * tpp, (part + 1) * tpp) of F_TILE samples. Parts exist so
 * that the number of items fills whole waves of resident blocks; part p writes its partial sums
 * to out + p * part_stride and k_sum_parts adds them in order (no atomics: the same bits every
 * run).
 *
 * General path: of a thread's V voxels, the last VP take the polynomial for every sample and
 * the others the hardware sin/cos, so that each sample's stretch of code holds both kinds of
 * work for the scheduler to overlap (one polynomial sample in K, the first version, left the
 * MUFUs in one clump and the FMA pipe idle meanwhile). RED: reduce the argument before the
 * hardware sin/cos too (else the hardware reduces it, which costs the rounding of a / 2 pi:
 * docs/mri-gpu.md).
 *
 * Run path (G): when each of a block's threads has its V voxels equally spaced on a line,
 * p_v = p_0 + v d to within RUN_TOL per coordinate (rows of an image grid), the phase of voxel
 * v is a_0 + v k.d, so exp(i a_v) comes from exp(i a_0) by v rotations by exp(i k.d): four
 * FMA-pipe operations a pair instead of two MUFUs, and 4 MUFUs per sample for the thread. */
/* Tiles [t0, t1) of the samples through shared memory; f(sp, sw) sums one tile. The next tile
 * waits in registers while this one is summed (two buffers, one barrier a tile: a thread writes
 * buffer b again only after the barrier that every thread reaches after it finished reading b).
 * Every thread of the block calls this with the same t0, t1. */
template <class F>
__device__ __forceinline__ void staged_tiles(const float4 *__restrict__ kp,
                                             const float *__restrict__ kw, size_t t0, size_t t1,
                                             float4 (*s_p)[F_TILE], float (*s_w)[F_TILE], F f)
{
    constexpr int PER = F_TILE / F_BLOCK;
    float4 np[PER];
    float nw[PER];
#pragma unroll
    for (int q = 0; q < PER; q++) {
        np[q] = kp[t0 * F_TILE + q * F_BLOCK + threadIdx.x];
        nw[q] = kw[t0 * F_TILE + q * F_BLOCK + threadIdx.x];
    }
    for (size_t t = t0; t < t1; t++) {
        const int b = (int)((t - t0) & 1);
#pragma unroll
        for (int q = 0; q < PER; q++) {
            s_p[b][q * F_BLOCK + threadIdx.x] = np[q];
            s_w[b][q * F_BLOCK + threadIdx.x] = nw[q];
        }
        __syncthreads();
        if (t + 1 < t1) {
#pragma unroll
            for (int q = 0; q < PER; q++) {
                np[q] = kp[(t + 1) * F_TILE + q * F_BLOCK + threadIdx.x];
                nw[q] = kw[(t + 1) * F_TILE + q * F_BLOCK + threadIdx.x];
            }
        }
        f(s_p[b], s_w[b]);
    }
    __syncthreads(); /* the caller's next call reuses the buffers */
}

template <int V, int VP, int U, bool Z, bool RED, bool G>
__global__ void __launch_bounds__(F_BLOCK, V <= 8 ? F_MIN_BLOCKS : 1)
    k_fast(const float4 *__restrict__ kp, const float *__restrict__ kw, size_t tiles, size_t tpp,
           unsigned parts, size_t groups, size_t n, const float *__restrict__ x,
           const float *__restrict__ y, const float *__restrict__ z, float *__restrict__ out_r,
           float *__restrict__ out_i, size_t part_stride)
{
    static_assert(F_TILE % F_BLOCK == 0 && F_TILE % U == 0, "tile shape");
    static_assert(VP >= 0 && VP <= V && (!G || V >= 2), "voxels per thread");
    __shared__ float4 s_p[2][F_TILE];
    __shared__ float s_w[2][F_TILE];
    const size_t items = groups * parts;
    for (size_t item = blockIdx.x; item < items; item += gridDim.x) {
        const size_t g = item / parts;
        const size_t part = item % parts;
        const size_t base = (g * F_BLOCK + threadIdx.x) * (size_t)V;
        const size_t t0 = part * tpp, t1 = t0 + tpp < tiles ? t0 + tpp : tiles;
        float px[V], py[V], pz[V], ar[V], ai[V];
#pragma unroll
        for (int v = 0; v < V; v++) {
            const size_t i = base + v;
            const bool live = i < n;
            px[v] = live ? x[i] : 0.0f;
            py[v] = live ? y[i] : 0.0f;
            pz[v] = (Z && live) ? z[i] : 0.0f;
            ar[v] = 0.0f;
            ai[v] = 0.0f;
        }
        int run = 0;
        if (G) {
            const float dx = px[1 % V] - px[0], dy = py[1 % V] - py[0], dz = pz[1 % V] - pz[0];
            int ok = base + V <= n;
#pragma unroll
            for (int v = 2; v < V; v++)
                ok = ok && fabsf(fmaf((float)v, dx, px[0]) - px[v]) <= RUN_TOL &&
                     fabsf(fmaf((float)v, dy, py[0]) - py[v]) <= RUN_TOL &&
                     fabsf(fmaf((float)v, dz, pz[0]) - pz[v]) <= RUN_TOL;
            /* the whole block takes one path, so that each path's barriers are the block's */
            run = __syncthreads_and(ok);
            if (run) {
                px[1 % V] = dx; /* the run path needs p_0 and d only */
                py[1 % V] = dy;
                pz[1 % V] = dz;
            }
        }
        if (G && run) {
            staged_tiles(kp, kw, t0, t1, s_p, s_w, [&](const float4 *sp, const float *sw) {
                const float ex = px[1 % V], ey = py[1 % V], ez = pz[1 % V];
#pragma unroll 1
                for (int j = 0; j < F_TILE; j += U) {
#pragma unroll
                    for (int q = 0; q < U; q++) {
                        const float4 p = sp[j + q];
                        const float w = sw[j + q];
                        float a0 = Z ? fmaf(p.x, px[0], fmaf(p.y, py[0], fmaf(p.z, pz[0], p.w)))
                                     : fmaf(p.x, px[0], fmaf(p.y, py[0], p.w));
                        const float ad = Z ? fmaf(p.x, ex, fmaf(p.y, ey, p.z * ez))
                                           : fmaf(p.x, ex, p.y * ey);
                        if (RED) a0 = reduce_rad(a0);
                        float c = __cosf(a0), s = __sinf(a0);
                        const float cd = __cosf(ad), sd = __sinf(ad);
#pragma unroll
                        for (int v = 0; v < V; v++) {
                            ar[v] = fmaf(w, c, ar[v]);
                            ai[v] = fmaf(w, s, ai[v]);
                            if (v + 1 < V) {
                                const float c2 = fmaf(c, cd, -s * sd);
                                s = fmaf(s, cd, c * sd);
                                c = c2;
                            }
                        }
                    }
                }
            });
        } else {
            staged_tiles(kp, kw, t0, t1, s_p, s_w, [&](const float4 *sp, const float *sw) {
#pragma unroll 1
                for (int j = 0; j < F_TILE; j += U) {
#pragma unroll
                    for (int q = 0; q < U; q++) {
                        const float4 p = sp[j + q];
                        const float w = sw[j + q];
#pragma unroll
                        for (int v = 0; v < V; v++) {
                            const float a =
                                Z ? fmaf(p.x, px[v], fmaf(p.y, py[v], fmaf(p.z, pz[v], p.w)))
                                  : fmaf(p.x, px[v], fmaf(p.y, py[v], p.w));
                            float s, c;
                            if (v >= V - VP) {
                                sincos_poly(reduce_rad(a), &s, &c);
                            } else {
                                const float r = RED ? reduce_rad(a) : a;
                                s = __sinf(r);
                                c = __cosf(r);
                            }
                            ar[v] = fmaf(w, c, ar[v]);
                            ai[v] = fmaf(w, s, ai[v]);
                        }
                    }
                }
            });
        }
        float *o_r = out_r + part * part_stride, *o_i = out_i + part * part_stride;
#pragma unroll
        for (int v = 0; v < V; v++) {
            const size_t i = base + v;
            if (i < n) {
                o_r[i] = ar[v];
                o_i[i] = ai[v];
            }
        }
    }
}

/* out[i] = sum over the parts of part[p][i], in order; parts of re at part_r + p * stride. */
__global__ void k_sum_parts(size_t n, unsigned parts, size_t stride,
                            const float *__restrict__ part_r, const float *__restrict__ part_i,
                            float *__restrict__ out_r, float *__restrict__ out_i)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float r = part_r[i], im = part_i[i];
        for (unsigned p = 1; p < parts; p++) {
            r += part_r[p * stride + i];
            im += part_i[p * stride + i];
        }
        out_r[i] = r;
        out_i[i] = im;
    }
}

/* ------------------------------------------ host ------------------------------------------ */

struct Dev {
    void *p;
    size_t bytes;
};

grove_status dev_alloc(grove_ctx *ctx, Dev *d, size_t count, size_t elem, const char *what)
{
    d->p = NULL;
    d->bytes = 0;
    if (count != 0 && elem > SIZE_MAX / count)
        return grove__error(ctx, GROVE_ERR_DEVICE_OUT_OF_MEMORY,
                            "%s: %zu elements of %zu bytes do not fit in memory", what, count,
                            elem);
    GROVE_TRY(grove__cuda_alloc(ctx, &d->p, count * elem, ctx->stream, what));
    d->bytes = count * elem;
    return GROVE_OK;
}

void dev_free(grove_ctx *ctx, Dev *d)
{
    grove__cuda_free(ctx, d->p, d->bytes, ctx->stream);
    d->p = NULL;
    d->bytes = 0;
}

#define LAUNCH_Q_F_Z(kern, fhd, z, grid, block, ...)                                              \
    do {                                                                                           \
        if (fhd) {                                                                                 \
            if (z) kern<true, true><<<grid, block, 0, st>>>(__VA_ARGS__);                          \
            else kern<true, false><<<grid, block, 0, st>>>(__VA_ARGS__);                           \
        } else {                                                                                   \
            if (z) kern<false, true><<<grid, block, 0, st>>>(__VA_ARGS__);                         \
            else kern<false, false><<<grid, block, 0, st>>>(__VA_ARGS__);                          \
        }                                                                                          \
    } while (0)

/* The textbook variants on device arrays; w holds wr then wi (2 m floats). */
grove_status run_textbook(grove_ctx *ctx, const char *fn, int fhd, const grove_mri_samples *k,
                          const grove_mri_voxels *v, grove_mri_kernel kernel, float *out_r,
                          float *out_i)
{
    cudaStream_t st = stream_of(ctx);
    const size_t m = k->num_k, n = v->num_x;
    const bool z = k->kz != NULL && v->z != NULL;
    grove_status s = GROVE_OK;
    Dev w = {NULL, 0}, aos = {NULL, 0};
    float *wr, *wi;
    char what[128];

    snprintf(what, sizeof what, "%s: the samples' weights", fn);
    GROVE_TRY_END(s, dev_alloc(ctx, &w, m, 2 * sizeof(float), what));
    wr = (float *)w.p;
    wi = wr + m;
    k_weights<<<grid_for(m, BLOCK), BLOCK, 0, st>>>(m, fhd, k->phi_r, k->phi_i, k->d_r, k->d_i,
                                                    wr, wi);
    snprintf(what, sizeof what, "%s: weights kernel", fn);
    GROVE_TRY_END(s, cu(ctx, cudaGetLastError(), what));

    if (kernel == GROVE_MRI_KERNEL_SCATTER) {
        snprintf(what, sizeof what, "%s: clearing the outputs", fn);
        GROVE_TRY_END(s, cu(ctx, cudaMemsetAsync(out_r, 0, n * sizeof(float), st),
                                               what));
        GROVE_TRY_END(s, cu(ctx, cudaMemsetAsync(out_i, 0, n * sizeof(float), st),
                                               what));
        LAUNCH_Q_F_Z(k_scatter, fhd, z, grid_for(m, BLOCK), BLOCK, m, k->kx, k->ky, k->kz, wr, wi,
                     n, v->x, v->y, v->z, out_r, out_i);
        snprintf(what, sizeof what, "%s: scatter kernel", fn);
        GROVE_TRY_END(s, cu(ctx, cudaGetLastError(), what));
    } else if (kernel == GROVE_MRI_KERNEL_GATHER) {
        LAUNCH_Q_F_Z(k_gather, fhd, z, grid_for(n, BLOCK), BLOCK, m, k->kx, k->ky, k->kz, wr, wi,
                     n, v->x, v->y, v->z, out_r, out_i);
        snprintf(what, sizeof what, "%s: gather kernel", fn);
        GROVE_TRY_END(s, cu(ctx, cudaGetLastError(), what));
    } else {
        snprintf(what, sizeof what, "%s: the samples as structs", fn);
        GROVE_TRY_END(s, dev_alloc(ctx, &aos, m, sizeof(KVal), what));
        k_pack_aos<<<grid_for(m, BLOCK), BLOCK, 0, st>>>(m, k->kx, k->ky, z ? k->kz : NULL, wr,
                                                         wi, (KVal *)aos.p);
        snprintf(what, sizeof what, "%s: packing kernel", fn);
        GROVE_TRY_END(s, cu(ctx, cudaGetLastError(), what));
        if (kernel == GROVE_MRI_KERNEL_TILED) {
            LAUNCH_Q_F_Z(k_tiled, fhd, z, grid_for(n, BLOCK), BLOCK, m, (const KVal *)aos.p, n,
                         v->x, v->y, v->z, out_r, out_i);
            snprintf(what, sizeof what, "%s: tiled kernel", fn);
            GROVE_TRY_END(s, cu(ctx, cudaGetLastError(), what));
        } else {
            for (size_t j0 = 0; j0 < m; j0 += CONST_CHUNK) {
                const int cnt = (int)(m - j0 < (size_t)CONST_CHUNK ? m - j0 : (size_t)CONST_CHUNK);
                snprintf(what, sizeof what, "%s: copying samples to constant memory", fn);
                GROVE_TRY_END(s, cu(
                                     ctx,
                                     cudaMemcpyToSymbolAsync(c_k, (const KVal *)aos.p + j0,
                                                             cnt * sizeof(KVal), 0,
                                                             cudaMemcpyDeviceToDevice, st),
                                     what));
                LAUNCH_Q_F_Z(k_constant, fhd, z, grid_for(n, BLOCK), BLOCK, cnt, j0 == 0, n, v->x,
                             v->y, v->z, out_r, out_i);
                snprintf(what, sizeof what, "%s: constant-memory kernel", fn);
                GROVE_TRY_END(s, cu(ctx, cudaGetLastError(), what));
            }
        }
    }
_end:
    dev_free(ctx, &aos);
    dev_free(ctx, &w);
    return s;
}

/* How many parts to cut the samples into: the fewest that minimise (waves of resident blocks) x
 * (tiles per part), the time model of equal work items; none past the scratch budget. */
unsigned choose_parts(size_t groups, size_t tiles, size_t slots, size_t n, size_t *tpp)
{
    unsigned best = 1;
    size_t best_cost = SIZE_MAX;
    *tpp = tiles;
    for (unsigned p = 1; p <= 64 && p <= tiles; p++) {
        const size_t per = (tiles + p - 1) / p;
        const size_t pe = (tiles + per - 1) / per; /* parts that are not empty */
        if (pe > 1 && (n > F_SCRATCH_MAX / (2 * sizeof(float)) / pe)) break;
        if (groups > SIZE_MAX / pe) break;
        const size_t items = groups * pe;
        const size_t waves = (items + slots - 1) / slots;
        const size_t cost = waves * per;
        if (cost < best_cost) {
            best_cost = cost;
            best = (unsigned)pe;
            *tpp = per;
        }
    }
    return best;
}

template <int V, int VP, int U, bool RED, bool G>
grove_status run_fast_t(grove_ctx *ctx, const char *fn, int fhd, const grove_mri_samples *k,
                        const grove_mri_voxels *v, float *out_r, float *out_i)
{
    constexpr int TILE = F_TILE;
    cudaStream_t st = stream_of(ctx);
    const size_t m = k->num_k, n = v->num_x;
    const bool z = k->kz != NULL && v->z != NULL;
    const size_t tiles = (m + TILE - 1) / TILE;
    const size_t mpad = tiles * TILE;
    const size_t groups = (n + (size_t)F_BLOCK * V - 1) / ((size_t)F_BLOCK * V);
    grove_status s = GROVE_OK;
    Dev kp = {NULL, 0}, kw = {NULL, 0}, part = {NULL, 0};
    int dev = 0, sms = 0, occ = 0;
    size_t tpp = tiles, items, stride = 0;
    unsigned parts, grid;
    float *o_r = out_r, *o_i = out_i;
    char what[128];

    snprintf(what, sizeof what, "%s: querying the device", fn);
    GROVE_TRY_END(s, cu(ctx, cudaGetDevice(&dev), what));
    GROVE_TRY_END(s, cu(ctx, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev),
                        what));
    if (z)
        GROVE_TRY_END(s, cu(ctx,
                            cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                                &occ, k_fast<V, VP, U, true, RED, G>, F_BLOCK, 0),
                            what));
    else
        GROVE_TRY_END(s, cu(ctx,
                            cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                                &occ, k_fast<V, VP, U, false, RED, G>, F_BLOCK, 0),
                            what));
    if (sms < 1) sms = 1;
    if (occ < 1) occ = 1;
    parts = choose_parts(groups, tiles, (size_t)sms * occ, n, &tpp);

    snprintf(what, sizeof what, "%s: the samples in polar form", fn);
    GROVE_TRY_END(s, dev_alloc(ctx, &kp, mpad, sizeof(float4), what));
    GROVE_TRY_END(s, dev_alloc(ctx, &kw, mpad, sizeof(float), what));
    if (parts > 1) {
        snprintf(what, sizeof what, "%s: partial sums", fn);
        GROVE_TRY_END(s, dev_alloc(ctx, &part, n, 2 * sizeof(float) * parts, what));
        stride = n;
        o_r = (float *)part.p;
        o_i = o_r + (size_t)parts * n;
    }
    k_pack_polar<<<grid_for(mpad, BLOCK), BLOCK, 0, st>>>(
        m, mpad, fhd, k->kx, k->ky, z ? k->kz : NULL, k->phi_r, k->phi_i, k->d_r, k->d_i,
        (float4 *)kp.p, (float *)kw.p);
    snprintf(what, sizeof what, "%s: packing kernel", fn);
    GROVE_TRY_END(s, cu(ctx, cudaGetLastError(), what));
    items = groups * parts;
    grid = (unsigned)(items < ((size_t)1 << 30) ? items : ((size_t)1 << 30));
    if (z)
        k_fast<V, VP, U, true, RED, G><<<grid, F_BLOCK, 0, st>>>(
            (const float4 *)kp.p, (const float *)kw.p, tiles, tpp, parts, groups, n, v->x, v->y,
            v->z, o_r, o_i, stride);
    else
        k_fast<V, VP, U, false, RED, G><<<grid, F_BLOCK, 0, st>>>(
            (const float4 *)kp.p, (const float *)kw.p, tiles, tpp, parts, groups, n, v->x, v->y,
            NULL, o_r, o_i, stride);
    snprintf(what, sizeof what, "%s: fast kernel", fn);
    GROVE_TRY_END(s, cu(ctx, cudaGetLastError(), what));
    if (parts > 1) {
        k_sum_parts<<<grid_for(n, BLOCK), BLOCK, 0, st>>>(n, parts, stride, o_r, o_i, out_r,
                                                          out_i);
        snprintf(what, sizeof what, "%s: partial-sum kernel", fn);
        GROVE_TRY_END(s, cu(ctx, cudaGetLastError(), what));
    }
_end:
    dev_free(ctx, &part);
    dev_free(ctx, &kw);
    dev_free(ctx, &kp);
    return s;
}

grove_status run_fast(grove_ctx *ctx, const char *fn, int fhd, const grove_mri_samples *k,
                      const grove_mri_voxels *v, float *out_r, float *out_i)
{
    return run_fast_t<F_V, F_VP, F_UNROLL, F_RED, F_RUNS>(ctx, fn, fhd, k, v, out_r, out_i);
}

} // namespace

extern "C" grove_status grove__mri_sum_cuda_device(grove_ctx *ctx, const char *fn, int fhd,
                                                   const grove_mri_samples *k,
                                                   const grove_mri_voxels *v,
                                                   grove_mri_kernel kernel, float *out_r,
                                                   float *out_i)
{
    cudaStream_t st;
    char what[128];
    if (v->num_x == 0) return GROVE_OK;
    GROVE_TRY(grove__cuda_use(ctx));
    st = stream_of(ctx);
    if (k->num_k == 0) {
        snprintf(what, sizeof what, "%s: clearing the outputs", fn);
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(out_r, 0, v->num_x * sizeof(float), st), what);
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(out_i, 0, v->num_x * sizeof(float), st), what);
        return GROVE_OK;
    }
    switch (kernel) {
    case GROVE_MRI_KERNEL_SCATTER:
    case GROVE_MRI_KERNEL_GATHER:
    case GROVE_MRI_KERNEL_CONSTANT:
    case GROVE_MRI_KERNEL_TILED: return run_textbook(ctx, fn, fhd, k, v, kernel, out_r, out_i);
    case GROVE_MRI_KERNEL_AUTO:
    case GROVE_MRI_KERNEL_FAST: return run_fast(ctx, fn, fhd, k, v, out_r, out_i);
    }
    return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: unknown kernel %d", fn, (int)kernel);
}

extern "C" grove_status grove__mri_sum_cuda(grove_ctx *ctx, const char *fn, int fhd,
                                            const grove_mri_samples *k, const grove_mri_voxels *v,
                                            grove_mri_kernel kernel, float *out_r, float *out_i)
{
    const size_t m = k->num_k, n = v->num_x;
    const int kz = k->kz != NULL, vz = v->z != NULL;
    const int nk = 4 + kz + (fhd ? 2 : 0); /* kx ky [kz] phi_r phi_i [d_r d_i] */
    const int nv = 4 + vz;                 /* x y [z] out_r out_i */
    grove_status s = GROVE_OK;
    Dev dk = {NULL, 0}, dv = {NULL, 0};
    grove_mri_samples kd;
    grove_mri_voxels vd;
    float *p, *dout_r, *dout_i;
    char what[128];

    if (n == 0) return GROVE_OK;
    GROVE_TRY(grove__cuda_use(ctx));
    memset(&kd, 0, sizeof kd);
    memset(&vd, 0, sizeof vd);
    kd.num_k = m;
    vd.num_x = n;
    snprintf(what, sizeof what, "%s: the samples", fn);
    GROVE_TRY_END(s, dev_alloc(ctx, &dk, m, nk * sizeof(float), what));
    snprintf(what, sizeof what, "%s: the voxels and results", fn);
    GROVE_TRY_END(s, dev_alloc(ctx, &dv, n, nv * sizeof(float), what));

    p = (float *)dk.p;
#define UP(dst, src)                                                                               \
    do {                                                                                           \
        GROVE_TRY_END(s, grove__cuda_h2d(ctx, p, (src), m * sizeof(float), ctx->stream));         \
        (dst) = p;                                                                                 \
        p += m;                                                                                    \
    } while (0)
    if (m) {
        UP(kd.kx, k->kx);
        UP(kd.ky, k->ky);
        if (kz) UP(kd.kz, k->kz);
        UP(kd.phi_r, k->phi_r);
        UP(kd.phi_i, k->phi_i);
        if (fhd) {
            UP(kd.d_r, k->d_r);
            UP(kd.d_i, k->d_i);
        }
    }
#undef UP
    p = (float *)dv.p;
    GROVE_TRY_END(s, grove__cuda_h2d(ctx, p, v->x, n * sizeof(float), ctx->stream));
    vd.x = p;
    p += n;
    GROVE_TRY_END(s, grove__cuda_h2d(ctx, p, v->y, n * sizeof(float), ctx->stream));
    vd.y = p;
    p += n;
    if (vz) {
        GROVE_TRY_END(s, grove__cuda_h2d(ctx, p, v->z, n * sizeof(float), ctx->stream));
        vd.z = p;
        p += n;
    }
    dout_r = p;
    dout_i = p + n;
    GROVE_TRY_END(s, grove__mri_sum_cuda_device(ctx, fn, fhd, &kd, &vd, kernel, dout_r, dout_i));
    GROVE_TRY_END(s, grove__cuda_d2h(ctx, out_r, dout_r, n * sizeof(float), ctx->stream));
    GROVE_TRY_END(s, grove__cuda_d2h(ctx, out_i, dout_i, n * sizeof(float), ctx->stream));
    snprintf(what, sizeof what, "%s: waiting for the GPU", fn);
    GROVE_TRY_END(s, grove__cuda_sync(ctx, ctx->stream, what));
_end:
    dev_free(ctx, &dv);
    dev_free(ctx, &dk);
    if (s != GROVE_OK) cudaStreamSynchronize(stream_of(ctx)); /* buffers the queue still uses */
    return s;
}
