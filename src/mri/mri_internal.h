/*
 * mri_internal.h - what the mri module's files share (internal).
 */
#ifndef GROVE_MRI_INTERNAL_H
#define GROVE_MRI_INTERNAL_H

#include "core.h"
#include "grove/mri.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CPU backend of the sums (mri_cpu.c): Q (fhd == 0) or FHD (fhd == 1) of checked
 * arguments, summed in double (cos and sin of 2*pi*t reduced exactly in turns, within 2e-16),
 * rounded to float at the end.
 * OpenMP over the voxels. */
grove_status grove__mri_sum_cpu(grove_ctx *ctx, const char *fn, int fhd,
                                const grove_mri_samples *k, const grove_mri_voxels *v,
                                float *out_r, float *out_i);

/* GROVE_OK, or GROVE_ERR_BAD_INPUT naming the first non-finite value of a[n] as
 * "WHERE: NAME[i] is NaN" (or +Inf, -Inf); the smallest such i whatever the thread count.
 * a may be NULL (nothing to check). */
grove_status grove__mri_check_finite(grove_ctx *ctx, const char *where, const char *name,
                                     const float *a, size_t n);

/* The normal operator of the reconstruction (mri_recon.c): out = (F^H W F + lambda R) in, with
 * F^H W F applied as `fhf` says; size^dims complex values in and out. For the tests. */
grove_status grove__mri_normal_apply(grove_ctx *ctx, const grove_mri_acq *acq, grove_mri_fhf fhf,
                                     double lambda, const float *in_r, const float *in_i,
                                     float *out_r, float *out_i);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_MRI_INTERNAL_H */
