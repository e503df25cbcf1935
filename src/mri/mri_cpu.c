/*
 * mri_cpu.c - the CPU backend of the Q and FHD sums: every voxel's sum over every sample, in
 * double, rounded to float once at the end. This is the reference the CUDA kernels are measured
 * against, so accuracy comes before speed.
 *
 * The phase. The sums need cos and sin of 2*pi*t with t = k . x in cycles. t is formed in double
 * from the float inputs (each product is exact; the two or three-term sum rounds once), and the
 * trigonometry is done "by turns": t minus its nearest integer and quarter is exact in double,
 * which leaves an angle in [-pi/4, pi/4] for two short polynomials. That is at least as accurate
 * as the C library's sin(2*pi*t), where the product 2*pi*t already rounds away log2|2 pi t| bits
 * before the reduction, and unlike a call into the C library it is a few dozen flops that the
 * compiler vectorises: about 10 times the pairs per second of the same loops calling sin() and
 * cos() (2-core x86-64 development machine, 2048 x 32768 pairs: 1.8e8 against 1.7e7 pairs/s).
 *
 * Layout. OpenMP over chunks of voxels; inside a chunk, the samples go by in blocks of SB,
 * converted once per chunk to doubles (positions, and the weights phiMag or rMu, iMu) in a small
 * per-thread buffer that stays in L1 while every voxel of the chunk sums over it. Each voxel is
 * summed by one thread in sample order (block by block; inside a block, the vector lanes'
 * partial sums added in a fixed order), so the result does not depend on the thread count. (It
 * can differ in the last bits of the double sums, and so rarely by one float ulp, between a CPU
 * that runs the AVX2/FMA version of the block sums and one that does not: see BLOCK_FN.)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mri_internal.h"

/* Samples per block: five double arrays of SB, 20 KB, fit L1 beside the voxel accumulators. */
#define SB 512
/* The most voxels of a chunk. */
#define VC_MAX 64

typedef struct sample_block {
    double kx[SB], ky[SB], kz[SB];
    double wr[SB], wi[SB]; /* Q: phiMag in wr; FHD: rMu in wr, iMu in wi */
} sample_block;

/* Adding and subtracting 1.5 * 2^k rounds a double to a multiple of 2^(k-52), the nearest one
 * (ties to even), with plain SSE2 arithmetic that the compiler vectorises (rint() is a library
 * call without SSE4.1). MAGIC_2 (k = 53) rounds every |t| < 2^52 to an even integer, leaving
 * |r| <= 1; MAGIC_1 (k = 52) then rounds that remainder to the nearest integer. Beyond 2^52 a
 * double is an integer and the two steps leave r = 0. tests/test_mri.c checks phases up to
 * 2^250 turns, about the most that products of floats can make. */
#define MAGIC_2 13510798882111488.0
#define MAGIC_1 6755399441055744.0
#define HALF_PI 1.5707963267948966192313216916398

/* Taylor coefficients of sin and cos: on [-pi/4, pi/4] the first omitted terms (theta^19/19!,
 * theta^18/18!) are below 1e-17, under a tenth of an ulp of the results. */
#define S3 (-1.0 / 6.0)
#define S5 (1.0 / 120.0)
#define S7 (-1.0 / 5040.0)
#define S9 (1.0 / 362880.0)
#define S11 (-1.0 / 39916800.0)
#define S13 (1.0 / 6227020800.0)
#define S15 (-1.0 / 1307674368000.0)
#define S17 (1.0 / 355687428096000.0)
#define C2 (-1.0 / 2.0)
#define C4 (1.0 / 24.0)
#define C6 (-1.0 / 720.0)
#define C8 (1.0 / 40320.0)
#define C10 (-1.0 / 3628800.0)
#define C12 (1.0 / 479001600.0)
#define C14 (-1.0 / 87178291200.0)
#define C16 (1.0 / 20922789888000.0)

/* cos and sin of 2*pi*t, within 2e-16 of the exact values for the double t. Written to inline
 * into a vectorised loop: no calls, no branches, no selects. */
static inline void sincos_turns(double t, double *c, double *s)
{
    double r = t - ((t + MAGIC_2) - MAGIC_2); /* |r| <= 1, exact */
    r = r - ((r + MAGIC_1) - MAGIC_1);        /* [-1/2, 1/2], exact */
    double u = 4.0 * r;                       /* quarter turns, exact */
    double a = (u + MAGIC_1) - MAGIC_1;       /* the nearest quarter, -2..2 */
    double th = HALF_PI * (u - a);            /* [-pi/4, pi/4] */
    double x = th * th, x2 = x * x, x4 = x2 * x2;
    /* Estrin's scheme: a shorter dependency chain than Horner's, for the out-of-order core */
    double ps =
        ((S3 + S5 * x) + (S7 + S9 * x) * x2) + ((S11 + S13 * x) + (S15 + S17 * x) * x2) * x4;
    double pc =
        ((C2 + C4 * x) + (C6 + C8 * x) * x2) + ((C10 + C12 * x) + (C14 + C16 * x) * x2) * x4;
    double sp = th + (th * x) * ps, cp = 1.0 + x * pc;
    /* rotate by a quarter turns: cos(a pi/2) and sin(a pi/2) for a in -2..2 are the
     * polynomials through their five values, exact in double for these integers */
    double a2 = a * a;
    double cq = (6.0 - 7.0 * a2 + a2 * a2) * (1.0 / 6.0);
    double sq = (4.0 * a - a * a2) * (1.0 / 3.0);
    *c = cq * cp - sq * sp;
    *s = sq * cp + cq * sp;
}

/* On x86-64 with GCC, the block sums are also compiled for AVX2 with FMA and picked at load
 * time; about 3 times faster than the SSE2 version. Contracting to FMA only removes roundings. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) &&       \
    !defined(GROVE_MRI_NO_CLONES)
#define BLOCK_FN                                                                                   \
    __attribute__((target_clones("arch=x86-64-v3", "default"), optimize("fp-contract=fast")))
#else
#define BLOCK_FN
#endif

/* The sums of one voxel over one block, in the block's order (vector lanes, then their sum). */
BLOCK_FN static void block_q(const sample_block *b, int cnt, double x, double y, double z,
                             double *out_r, double *out_i)
{
    double sr = 0.0, si = 0.0;
#pragma omp simd reduction(+ : sr, si)
    for (int m = 0; m < cnt; m++) {
        double c, s, t = b->kx[m] * x + b->ky[m] * y + b->kz[m] * z;
        sincos_turns(t, &c, &s);
        sr += b->wr[m] * c;
        si += b->wr[m] * s;
    }
    *out_r += sr;
    *out_i += si;
}

BLOCK_FN static void block_fhd(const sample_block *b, int cnt, double x, double y, double z,
                               double *out_r, double *out_i)
{
    double sr = 0.0, si = 0.0;
#pragma omp simd reduction(+ : sr, si)
    for (int m = 0; m < cnt; m++) {
        double c, s, t = b->kx[m] * x + b->ky[m] * y + b->kz[m] * z;
        sincos_turns(t, &c, &s);
        sr += b->wr[m] * c - b->wi[m] * s;
        si += b->wi[m] * c + b->wr[m] * s;
    }
    *out_r += sr;
    *out_i += si;
}

/* Samples [m0, m0 + cnt) as doubles; the weights are exact products of floats, summed once. */
static void fill_block(sample_block *b, int fhd, const grove_mri_samples *k, size_t m0, int cnt)
{
    for (int j = 0; j < cnt; j++) {
        size_t m = m0 + (size_t)j;
        double pr = k->phi_r[m], pi = k->phi_i[m];
        b->kx[j] = k->kx[m];
        b->ky[j] = k->ky[m];
        b->kz[j] = k->kz ? (double)k->kz[m] : 0.0;
        if (fhd) {
            double dr = k->d_r[m], di = k->d_i[m];
            b->wr[j] = pr * dr + pi * di;
            b->wi[j] = pr * di - pi * dr;
        } else {
            b->wr[j] = pr * pr + pi * pi;
            b->wi[j] = 0.0;
        }
    }
}

grove_status grove__mri_sum_cpu(grove_ctx *ctx, const char *fn, int fhd, const grove_mri_samples *k,
                                const grove_mri_voxels *v, float *out_r, float *out_i)
{
    const size_t nk = k->num_k, nx = v->num_x;
    const int nt = grove__threads(ctx);
    size_t vc, nchunks;
    int failed = 0;

    if (nx == 0) return GROVE_OK;
    /* chunks small enough that every thread gets several (balance), up to VC_MAX voxels (the
     * block conversion is paid once per chunk, so larger chunks amortise it better) */
    vc = nx / ((size_t)nt * 8);
    vc = vc < 1 ? 1 : (vc > VC_MAX ? VC_MAX : vc);
    nchunks = (nx + vc - 1) / vc;

    /* a small sum is over before a team of threads would have started */
#pragma omp parallel num_threads(nt) if ((double)nk * (double)nx > 2e5)
    {
        sample_block *b = (sample_block *)malloc(sizeof *b);
        if (!b) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (size_t ch = 0; ch < nchunks; ch++) {
            size_t n0 = ch * vc, n1 = n0 + vc < nx ? n0 + vc : nx;
            double ar[VC_MAX], ai[VC_MAX], px[VC_MAX], py[VC_MAX], pz[VC_MAX];
            if (!b) continue;
            for (size_t n = n0; n < n1; n++) {
                ar[n - n0] = ai[n - n0] = 0.0;
                px[n - n0] = v->x[n];
                py[n - n0] = v->y[n];
                pz[n - n0] = v->z ? (double)v->z[n] : 0.0;
            }
            for (size_t m0 = 0; m0 < nk; m0 += SB) {
                int cnt = nk - m0 < SB ? (int)(nk - m0) : SB;
                fill_block(b, fhd, k, m0, cnt);
                for (size_t j = 0; j < n1 - n0; j++) {
                    if (fhd)
                        block_fhd(b, cnt, px[j], py[j], pz[j], &ar[j], &ai[j]);
                    else
                        block_q(b, cnt, px[j], py[j], pz[j], &ar[j], &ai[j]);
                }
            }
            for (size_t n = n0; n < n1; n++) {
                out_r[n] = (float)ar[n - n0];
                out_i[n] = (float)ai[n - n0];
            }
        }
        free(b);
    }
    if (failed)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "%s: out of memory for the CPU backend's sample buffers (%zu bytes "
                            "per thread)",
                            fn, sizeof(sample_block));
    return GROVE_OK;
}
