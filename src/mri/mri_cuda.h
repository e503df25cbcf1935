/*
 * mri_cuda.h - the CUDA backend of the Q and FHD sums (mri_cuda.cu), called from mri.c on a
 * CUDA context (internal).
 *
 * The caller has checked every argument and every value (finite, counts in range); the messages
 * of the public entry points belong to it, and it passes its function name `fn` for the
 * messages these raise. Every function returns after its results are where it says, and frees
 * every device buffer it allocated on every path.
 */
#ifndef GROVE_MRI_CUDA_H
#define GROVE_MRI_CUDA_H

#include "core.h"
#include "grove/mri.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Q (fhd == 0) or FHD (fhd == 1) on host arrays: uploads k and v, runs `kernel` (AUTO: the
 * production kernel), downloads into out_r[num_x], out_i[num_x]. */
grove_status grove__mri_sum_cuda(grove_ctx *ctx, const char *fn, int fhd,
                                 const grove_mri_samples *k, const grove_mri_voxels *v,
                                 grove_mri_kernel kernel, float *out_r, float *out_i);

/* The same on device arrays (every pointer in k, v, out_r, out_i is device memory on the
 * context's device; kz and z may be NULL). Queued on the context's stream; returns without
 * waiting for the result. For the reconstruction, which keeps its vectors on the GPU. */
grove_status grove__mri_sum_cuda_device(grove_ctx *ctx, const char *fn, int fhd,
                                        const grove_mri_samples *k, const grove_mri_voxels *v,
                                        grove_mri_kernel kernel, float *out_r, float *out_i);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_MRI_CUDA_H */
