/*
 * bench_mri.h - `grove bench mri`: the Q and FHD sums (not part of the public API).
 */
#ifndef GROVE_BENCH_MRI_H
#define GROVE_BENCH_MRI_H

#include "bench.h"
#include "grove/mri.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! grove_bench_mri() :
 *  The Q and FHD sums at M = 2^18 samples and N = 128^3 voxels (or opts->n voxels) and at
 *  Parboil's large size (M = 2048, N = 64^3), on CUDA every kernel variant beside the
 *  production one (scatter at a reduced voxel count at the first size, named in the row's op),
 *  the CPU backend at M = 2048, N = 32768. Times: on CUDA the median of CUDA-event times
 *  around the device-resident sum (inputs already on the GPU), on the CPU the median wall time
 *  of grove_mri_q / grove_mri_fhd. items_per_s counts sample-voxel pairs; vs_floor is the
 *  special-function-unit bound 2 M N / (16 * SMs * clock) over the time (CUDA rows). Every
 *  row is compared with the CPU backend on a subset of voxels (relative L2 error <= 1e-4) and
 *  the CPU rows with a direct sum here; the largest error per kernel is left as a note in the
 *  context's message. Rows as grove_bench_prim. */
grove_status grove_bench_mri(grove_ctx *ctx, const grove_bench_opts *opts, grove_bench_row *rows,
                             int max_rows, int *nrows);

#ifdef GROVE_HAVE_CUDA
/* bench_mri_cuda.cu. Uploads k and v (host arrays), runs `kernel` warmup times and then
 * repeats times with CUDA events around each device-resident sum, leaves the median in *ms and
 * the last result in out_r, out_i (host, num_x each). */
grove_status grove__bench_mri_cuda(grove_ctx *ctx, int fhd, const grove_mri_samples *k,
                                   const grove_mri_voxels *v, grove_mri_kernel kernel, int warmup,
                                   int repeats, float *out_r, float *out_i, double *ms);
/* The special-function-unit bound of m * n pairs (two results each, 16 a clock per SM) on
 * ctx's device, in seconds; also its SM count and clock (Hz). */
grove_status grove__bench_mri_sfu_bound(grove_ctx *ctx, size_t m, size_t n, double *seconds,
                                        int *sms, double *clock_hz);
#endif

#ifdef __cplusplus
}
#endif

#endif /* GROVE_BENCH_MRI_H */
