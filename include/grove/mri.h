/*
 * mri.h - non-Cartesian MRI reconstruction: the Q and FHD sums (Parboil mri-q and mri-fhd),
 * conjugate-gradient reconstruction of an image from k-space samples, Shepp-Logan phantoms with
 * analytic k-space, and the file formats around them (Parboil, ISMRMRD, NIfTI-1, PNG).
 *
 * Conventions. A k-space sample m sits at k_m = (kx, ky, kz) in cycles per unit length; a voxel
 * n sits at x_n = (x, y, z) in the same unit length, so the phase of a pair is
 * 2*pi*(k_m . x_n) radians. The images of the reconstruction live on the unit field of view:
 * an image of `size` voxels per axis has voxel i at x = (i - size/2) / size, so |x| <= 0.5 and
 * the samples that matter have |k| <= size/2. 2-D data have kz = 0 and z = 0 (the arrays may be
 * NULL, meaning zero).
 *
 *   Q:   phiMag[m] = phiR[m]^2 + phiI[m]^2
 *        Q[n]      = sum_m phiMag[m] * (cos a_mn, sin a_mn),        a_mn = 2*pi*(k_m . x_n)
 *   FHD: rMu[m] = phiR*dR + phiI*dI,  iMu[m] = phiR*dI - phiI*dR
 *        FHD[n]    = sum_m (rMu cos a_mn - iMu sin a_mn, iMu cos a_mn + rMu sin a_mn)
 *
 * Inputs and outputs are float32, as in Parboil. The CPU backend sums in double, its cos and sin
 * of 2*pi*(k.x) reduced exactly in turns and accurate to 2e-16 (the reference); the CUDA kernels sum in float and their relative L2
 * error against a float64 direct sum is at most 1e-4 for |k| <= 64, |x| <= 0.5
 * (docs/mri.md gives the measured figures).
 *
 * Ownership: inputs are borrowed for the duration of a call; objects a call creates
 * (grove_mri_acq, grove_mri_parboil) are owned by the caller and freed with their _free
 * function.
 */
#ifndef GROVE_MRI_H
#define GROVE_MRI_H

#include "grove/grove.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================ the Q and FHD sums ================================ */

/* Which kernel computes the sums. AUTO is the backend's production kernel; the others are the
 * steps of the textbook derivation, kept as benchmark variants (CUDA backend only: the CPU
 * backend accepts AUTO and returns GROVE_ERR_UNSUPPORTED for the others). */
typedef enum grove_mri_kernel {
    GROVE_MRI_KERNEL_AUTO = 0,
    GROVE_MRI_KERNEL_SCATTER = 1,  /* a thread per sample, atomic adds into every voxel */
    GROVE_MRI_KERNEL_GATHER = 2,   /* a thread per voxel, samples read from global memory */
    GROVE_MRI_KERNEL_CONSTANT = 3, /* a thread per voxel, samples in constant-memory chunks,
                                      hardware sin/cos */
    GROVE_MRI_KERNEL_TILED = 4,    /* samples staged through shared-memory tiles */
    GROVE_MRI_KERNEL_FAST = 5      /* the production kernel (what AUTO picks on the GPU) */
} grove_mri_kernel;

/*! grove_mri_kernel_name() : @return "auto", "scatter", "gather", "constant", "tiled" or
 *  "fast" (static string), or "?" for a value out of range. */
const char *grove_mri_kernel_name(grove_mri_kernel k);

/*! grove_mri_kernel_parse() : the inverse of grove_mri_kernel_name().
 *  @return GROVE_OK, or GROVE_ERR_INVALID_ARG for an unknown name. */
grove_status grove_mri_kernel_parse(const char *name, grove_mri_kernel *out);

/* num_k samples. kz may be NULL (all zero). d_r and d_i are needed by FHD only. */
typedef struct grove_mri_samples {
    size_t num_k;
    const float *kx, *ky, *kz;
    const float *phi_r, *phi_i;
    const float *d_r, *d_i;
} grove_mri_samples;

/* num_x voxel positions. z may be NULL (all zero). */
typedef struct grove_mri_voxels {
    size_t num_x;
    const float *x, *y, *z;
} grove_mri_voxels;

/*! grove_mri_q() :
 *  Computes Q for every voxel into out_r[num_x], out_i[num_x] (host memory).
 *  Non-finite inputs are rejected with GROVE_ERR_BAD_INPUT naming the array and the element.
 *  num_k == 0 gives zeros; num_x == 0 does nothing.
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG, GROVE_ERR_BAD_INPUT, GROVE_ERR_UNSUPPORTED,
 *  GROVE_ERR_OUT_OF_MEMORY, GROVE_ERR_DEVICE_OUT_OF_MEMORY or GROVE_ERR_CUDA. */
grove_status grove_mri_q(grove_ctx *ctx, const grove_mri_samples *k, const grove_mri_voxels *v,
                         grove_mri_kernel kernel, float *out_r, float *out_i);

/*! grove_mri_fhd() : as grove_mri_q() for FHD (k->d_r and k->d_i required). */
grove_status grove_mri_fhd(grove_ctx *ctx, const grove_mri_samples *k, const grove_mri_voxels *v,
                           grove_mri_kernel kernel, float *out_r, float *out_i);

/* ============================== Parboil files (mri-q, mri-fhd) ============================== */

/* A Parboil input file. Little-endian: int32 numK, int32 numX, then float32 kx, ky, kz [numK],
 * x, y, z [numX], phiR, phiI [numK], and for mri-fhd dR, dI [numK]. */
typedef struct grove_mri_parboil {
    grove_mri_samples k; /* points into the arrays below */
    grove_mri_voxels v;
    int has_data;        /* 1 for an mri-fhd file (d_r, d_i present) */
    float *storage;      /* all arrays, one allocation */
} grove_mri_parboil;

/*! grove_mri_parboil_read() :
 *  Reads a Parboil mri-q (with_data == 0) or mri-fhd (with_data == 1) input file into a new
 *  *out. A file whose size does not match its counts, negative counts or non-finite values give
 *  GROVE_ERR_BAD_INPUT with a message naming the file, the array and the element.
 *  ctx only receives the error message (may be NULL: then only the status tells).
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG, GROVE_ERR_IO, GROVE_ERR_BAD_INPUT or
 *  GROVE_ERR_OUT_OF_MEMORY. */
grove_status grove_mri_parboil_read(grove_ctx *ctx, const char *path, int with_data,
                                    grove_mri_parboil **out);

/*! grove_mri_parboil_free() : accepts NULL. */
void grove_mri_parboil_free(grove_mri_parboil *p);

/*! grove_mri_parboil_write_output() :
 *  Writes a Parboil output file: uint32 numX, then float32 real [numX], imaginary [numX].
 *  Written to a temporary name beside path and renamed, so a failure leaves no partial file.
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG or GROVE_ERR_IO. */
grove_status grove_mri_parboil_write_output(grove_ctx *ctx, const char *path, size_t num_x,
                                            const float *re, const float *im);

/* ============================ acquisitions and reconstruction ============================ */

/* A single-coil non-Cartesian acquisition on the unit field of view (see the conventions at the
 * top): num_k samples at k (cycles per field of view; kz NULL for 2-D), measured values
 * (d_r, d_i), density-compensation weights w (>= 0), and the image it encodes: dims (2 or 3)
 * and size voxels per axis. */
typedef struct grove_mri_acq {
    int dims;
    int size;
    size_t num_k;
    float *kx, *ky, *kz;
    float *d_r, *d_i;
    float *w;
} grove_mri_acq;

/*! grove_mri_acq_free() : frees an acquisition made by grove (reader, phantom). Accepts NULL. */
void grove_mri_acq_free(grove_mri_acq *a);

/* How the normal operator F^H W F is applied in each iteration. */
typedef enum grove_mri_fhf {
    GROVE_MRI_FHF_EXACT = 0,   /* F and F^H as direct sums over samples and voxels */
    GROVE_MRI_FHF_TOEPLITZ = 1 /* Q on the doubled grid once, then FFT convolution (FFTW on
                                  the CPU, cuFFT on the GPU) */
} grove_mri_fhf;

/* Called after each iteration with the iteration number (1-based), the maximum and the
 * relative residual; a non-zero return stops the solve early (status GROVE_OK). */
typedef int (*grove_mri_progress_fn)(void *user, int iter, int max_iters, double residual);

typedef struct grove_mri_recon_opts {
    int max_iters;      /* default 20 */
    double tol;         /* stop when ||r|| / ||b|| <= tol; default 1e-6 */
    double lambda;      /* weight of the finite-difference regulariser R (>= 0); default 0 */
    grove_mri_fhf fhf;  /* default GROVE_MRI_FHF_TOEPLITZ */
    grove_mri_progress_fn progress; /* may be NULL */
    void *progress_user;
} grove_mri_recon_opts;

typedef struct grove_mri_recon_stats {
    int iters;              /* iterations run */
    double residual;        /* final ||r|| / ||b|| */
    double setup_seconds;   /* F^H W d, and Q and its FFT for the Toeplitz form */
    double seconds_per_iter;
} grove_mri_recon_stats;

/*! grove_mri_recon_default_opts() : fills *o with the defaults above. */
void grove_mri_recon_default_opts(grove_mri_recon_opts *o);

/*! grove_mri_recon() :
 *  Solves (F^H W F + lambda R) rho = F^H W d by conjugate gradient, starting from rho = 0, and
 *  writes the complex image to img_r, img_i (size^dims floats each, x fastest, then y, z).
 *  F is the forward model d_m = sum_n rho_n exp(-i 2 pi k_m . x_n), W the weights.
 *  stats may be NULL.
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG, GROVE_ERR_BAD_INPUT, GROVE_ERR_UNSUPPORTED (the
 *  Toeplitz form on a CPU context of a build without FFTW; a CUDA context uses cuFFT), GROVE_ERR_OUT_OF_MEMORY,
 *  GROVE_ERR_DEVICE_OUT_OF_MEMORY or GROVE_ERR_CUDA. */
grove_status grove_mri_recon(grove_ctx *ctx, const grove_mri_acq *acq,
                             const grove_mri_recon_opts *opts, float *img_r, float *img_i,
                             grove_mri_recon_stats *stats);

/* ======================================= phantoms ======================================= */

typedef enum grove_mri_trajectory {
    GROVE_MRI_TRAJ_RADIAL = 0, /* spokes through the centre */
    GROVE_MRI_TRAJ_SPIRAL = 1, /* interleaved Archimedean spirals */
    GROVE_MRI_TRAJ_STACK = 2   /* stack of stars: radial in x-y, Cartesian in z (3-D only) */
} grove_mri_trajectory;

typedef struct grove_mri_phantom_opts {
    int dims;                  /* 2 or 3; default 2 */
    int size;                  /* voxels per axis, 8..1024; default 128 */
    grove_mri_trajectory traj; /* default radial */
    double oversampling;       /* samples relative to Nyquist for the trajectory; default 1 */
} grove_mri_phantom_opts;

/*! grove_mri_phantom_default_opts() : fills *o with the defaults above. */
void grove_mri_phantom_default_opts(grove_mri_phantom_opts *o);

/*! grove_mri_phantom() :
 *  Makes the Shepp-Logan phantom's acquisition (2-D, or the 3-D version with ellipsoids): the
 *  trajectory, the k-space values from the closed-form Fourier transforms of the ellipses
 *  (ellipsoids), and density weights. The caller frees *out with grove_mri_acq_free().
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG or GROVE_ERR_OUT_OF_MEMORY. */
grove_status grove_mri_phantom(grove_ctx *ctx, const grove_mri_phantom_opts *o,
                               grove_mri_acq **out);

/*! grove_mri_phantom_image() :
 *  The phantom itself sampled on the reconstruction grid (size^dims floats into img): each
 *  voxel's value is the phantom's mean over the voxel (supersampled), the reference for NRMSE.
 *  @return GROVE_OK or GROVE_ERR_INVALID_ARG. */
grove_status grove_mri_phantom_image(int dims, int size, float *img);

/*! grove_mri_nrmse() :
 *  @return ||a - ref|| / ||ref|| over n values (the L2 norms, in double); 0 when both are 0. */
double grove_mri_nrmse(const float *a, const float *ref, size_t n);

/* ================================ files: ISMRMRD, images ================================ */

/*! grove_mri_has_ismrmrd() : @return 1 if this build reads and writes ISMRMRD files. */
int grove_mri_has_ismrmrd(void);

/*! grove_mri_ismrmrd_read() :
 *  Reads a single-coil non-Cartesian ISMRMRD (HDF5) dataset: every acquisition's samples and
 *  trajectory, the encoded matrix size and field of view from the XML header (k is rescaled to
 *  cycles per field of view), and density weights (from the trajectory's extra dimension when
 *  present, else computed). Multi-coil data, Cartesian data without trajectories, and anything
 *  else not supported give GROVE_ERR_UNSUPPORTED with a message that says what; damaged files
 *  GROVE_ERR_BAD_INPUT naming the file and the acquisition.
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG, GROVE_ERR_IO, GROVE_ERR_BAD_INPUT,
 *  GROVE_ERR_UNSUPPORTED (also: built without ISMRMRD) or GROVE_ERR_OUT_OF_MEMORY. */
grove_status grove_mri_ismrmrd_read(grove_ctx *ctx, const char *path, grove_mri_acq **out);

/*! grove_mri_ismrmrd_write() :
 *  Writes acq as an ISMRMRD dataset (one acquisition per readout of the trajectory), to a
 *  temporary name and renamed.
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG, GROVE_ERR_IO or GROVE_ERR_UNSUPPORTED. */
grove_status grove_mri_ismrmrd_write(grove_ctx *ctx, const char *path, const grove_mri_acq *acq);

/*! grove_mri_write_nifti() :
 *  Writes a float32 NIfTI-1 single file (.nii) of size^dims voxels (x fastest), voxel size
 *  1/size, to a temporary name and renamed.
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG or GROVE_ERR_IO. */
grove_status grove_mri_write_nifti(grove_ctx *ctx, const char *path, int dims, int size,
                                   const float *img);

/*! grove_mri_has_png() : @return 1 if this build writes PNG files. */
int grove_mri_has_png(void);

/*! grove_mri_write_png() :
 *  Writes one 8-bit grey PNG of a size x size slice (x fastest), windowed linearly from lo
 *  (black) to hi (white); lo == hi picks the window from the slice's 0.5 and 99.5 percentiles.
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG, GROVE_ERR_IO or GROVE_ERR_UNSUPPORTED. */
grove_status grove_mri_write_png(grove_ctx *ctx, const char *path, int size, const float *slice,
                                 float lo, float hi);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_MRI_H */
