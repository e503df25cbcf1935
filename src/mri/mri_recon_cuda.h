/*
 * mri_recon_cuda.h - the conjugate-gradient reconstruction on the GPU (mri_recon_cuda.cu), called
 * from mri_recon.c on a CUDA context (internal).
 *
 * The caller has checked the acquisition (dims, size, finite values, weights >= 0) and the
 * options; `fn` names the public entry point in the messages these raise. Both functions
 * return after their results are in host memory and free every device buffer and cuFFT plan on
 * every path.
 */
#ifndef GROVE_MRI_RECON_CUDA_H
#define GROVE_MRI_RECON_CUDA_H

#include "core.h"
#include "grove/mri.h"

#ifdef __cplusplus
extern "C" {
#endif

/* grove_mri_recon on the GPU: every step (F^H W d, the Toeplitz kernel and its FFT, each
 * iteration's operator, the CG updates and dot products) runs on the context's stream; the host
 * reads back two scalars per iteration for the stopping rules and the progress callback. */
grove_status grove__mri_recon_cuda(grove_ctx *ctx, const char *fn, const grove_mri_acq *acq,
                                   const grove_mri_recon_opts *o, float *img_r, float *img_i,
                                   grove_mri_recon_stats *stats);

/* out = (F^H W F + lambda R) in on the GPU, the operator exactly as the solver above applies
 * it; size^dims complex values in and out (host memory). */
grove_status grove__mri_normal_apply_cuda(grove_ctx *ctx, const char *fn, const grove_mri_acq *acq,
                                          grove_mri_fhf fhf, double lambda, const float *in_r,
                                          const float *in_i, float *out_r, float *out_i);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_MRI_RECON_CUDA_H */
