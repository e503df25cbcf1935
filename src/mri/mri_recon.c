/*
 * mri_recon.c - conjugate-gradient reconstruction of a single-coil non-Cartesian acquisition:
 * solves (F^H W F + lambda R) rho = F^H W d with the normal operator applied either exactly
 * (two direct sums per iteration) or through its Toeplitz kernel (one Q sum on the doubled grid,
 * then an FFT convolution per iteration). docs/mri.md derives every step.
 *
 * On a CUDA context the whole solve runs on the GPU (mri_recon_cuda.cu: the sums on device
 * arrays, the Toeplitz convolution with cuFFT, the CG vectors on the device). On the CPU every
 * direct sum goes through grove__mri_sum_cpu, which takes float32 arrays; the CG keeps its
 * vectors in double and rounds to float only at the kernel boundary.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mri_internal.h"
#ifdef GROVE_HAVE_CUDA
#include "mri_recon_cuda.h"
#endif
#ifdef GROVE_HAVE_FFTW
#include <fftw3.h>
#endif

#define RECON_MAX_SIZE 4096

void grove_mri_acq_free(grove_mri_acq *a)
{
    if (!a) return;
    free(a->kx);
    free(a->ky);
    free(a->kz);
    free(a->d_r);
    free(a->d_i);
    free(a->w);
    free(a);
}

void grove_mri_recon_default_opts(grove_mri_recon_opts *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->max_iters = 20;
    o->tol = 1e-6;
    o->lambda = 0.0;
    o->fhf = GROVE_MRI_FHF_TOEPLITZ;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the operator ----
 * CPU only: a CUDA context takes the GPU path (mri_recon_cuda.cu) before any of this runs. */

typedef struct recon_op {
    grove_ctx *ctx;
    const char *fn;
    int dims, size;
    size_t n; /* voxels, size^dims */
    size_t m; /* samples */
    const grove_mri_acq *acq;
    float *vx, *vy, *vz; /* voxel positions (vz NULL in 2-D) */
    float *ones, *zeros_n, *zeros_m;
    float *fr, *fi; /* float staging of a voxel vector (n) */
    float *sr, *si; /* float staging of a sample vector (m) */
    double lambda;
    int toeplitz;
#ifdef GROVE_HAVE_FFTW
    fftw_complex *kern; /* FFT of the Toeplitz kernel on the doubled grid, scaled by 1/(2s)^d */
    fftw_complex *work;
    fftw_plan fwd, inv;
    size_t n2; /* (2 size)^dims */
#endif
} recon_op;

/* F^H W e for a sample vector e = (er, ei) given as floats: the FHD sum with phi = (w, 0). */
static grove_status op_fhw(recon_op *op, const float *er, const float *ei, float *out_r,
                           float *out_i)
{
    grove_mri_samples k;
    grove_mri_voxels v;
    k.num_k = op->m;
    k.kx = op->acq->kx;
    k.ky = op->acq->ky;
    k.kz = op->dims == 3 ? op->acq->kz : NULL;
    k.phi_r = op->acq->w;
    k.phi_i = op->zeros_m;
    k.d_r = er;
    k.d_i = ei;
    v.num_x = op->n;
    v.x = op->vx;
    v.y = op->vy;
    v.z = op->vz;
    return grove__mri_sum_cpu(op->ctx, op->fn, 1, &k, &v, out_r, out_i);
}

/* F rho into (sr, si): the same FHD sum with samples and voxels swapped. FHD sums with
 * e^{+ia}, F needs e^{-ia}: sum conj(rho) e^{+ia} and conjugate the result. */
static grove_status op_forward(recon_op *op, const double *rho)
{
    grove_mri_samples k;
    grove_mri_voxels v;
    for (size_t i = 0; i < op->n; i++) {
        op->fr[i] = (float)rho[2 * i];
        op->fi[i] = -(float)rho[2 * i + 1];
    }
    k.num_k = op->n;
    k.kx = op->vx;
    k.ky = op->vy;
    k.kz = op->vz;
    k.phi_r = op->ones;
    k.phi_i = op->zeros_n;
    k.d_r = op->fr;
    k.d_i = op->fi;
    v.num_x = op->m;
    v.x = op->acq->kx;
    v.y = op->acq->ky;
    v.z = op->dims == 3 ? op->acq->kz : NULL;
    GROVE_TRY(grove__mri_sum_cpu(op->ctx, op->fn, 1, &k, &v, op->sr, op->si));
    for (size_t j = 0; j < op->m; j++) op->si[j] = -op->si[j];
    return GROVE_OK;
}

/* Adds lambda D^H D p to out: forward differences along each axis inside the image only
 * (Neumann boundary: no difference across the edge), so R is the graph Laplacian of the voxel
 * grid, Hermitian positive semidefinite, and constant images are its null space. */
static void op_add_reg(const recon_op *op, const double *p, double *out)
{
    size_t s = (size_t)op->size, stride = 1;
    double lam = op->lambda;
    if (lam == 0.0) return;
    for (int a = 0; a < op->dims; a++, stride *= s) {
        for (size_t i = 0; i < op->n; i++) {
            size_t c = (i / stride) % s;
            double dr = 0, di = 0;
            if (c + 1 < s) {
                dr += p[2 * i] - p[2 * (i + stride)];
                di += p[2 * i + 1] - p[2 * (i + stride) + 1];
            }
            if (c > 0) {
                dr += p[2 * i] - p[2 * (i - stride)];
                di += p[2 * i + 1] - p[2 * (i - stride) + 1];
            }
            out[2 * i] += lam * dr;
            out[2 * i + 1] += lam * di;
        }
    }
}

#ifdef GROVE_HAVE_FFTW
/* FFTW's planner is not thread-safe; grove contexts may be used from several threads. */
static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;

/* Builds the Toeplitz kernel: T(delta) = sum_m w_m e^{+i 2 pi k_m . delta} at the (2s)^d grid
 * offsets delta = j / s, j in [-s, s), stored circularly (j < 0 at 2s + j), which is the Q sum
 * with phiMag = w; then its FFT. */
static grove_status toeplitz_setup(recon_op *op)
{
    size_t s2 = 2 * (size_t)op->size, n2 = 1;
    float *pos = NULL, *phr = NULL, *qr = NULL, *qi = NULL;
    grove_status st = GROVE_OK;
    grove_mri_samples k;
    grove_mri_voxels v;
    int nn[3];
    for (int a = 0; a < op->dims; a++) n2 *= s2;
    op->n2 = n2;
    op->kern = (fftw_complex *)fftw_malloc(n2 * sizeof(fftw_complex));
    op->work = (fftw_complex *)fftw_malloc(n2 * sizeof(fftw_complex));
    pos = (float *)malloc(3 * n2 * sizeof(float));
    phr = (float *)malloc((op->m ? op->m : 1) * sizeof(float));
    qr = (float *)malloc(2 * n2 * sizeof(float));
    if (!op->kern || !op->work || !pos || !phr || !qr) {
        st = grove__error(op->ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "%s: out of memory for the Toeplitz kernel on a %zu-voxel grid", op->fn,
                          n2);
        goto _end;
    }
    qi = qr + n2;
    for (size_t i = 0; i < n2; i++) {
        size_t r = i;
        for (int a = 0; a < 3; a++) {
            long j = 0;
            if (a < op->dims) {
                j = (long)(r % s2);
                r /= s2;
                if (j >= op->size) j -= (long)s2;
            }
            pos[a * n2 + i] = (float)((double)j / op->size);
        }
    }
    for (size_t j = 0; j < op->m; j++) phr[j] = sqrtf(op->acq->w[j]);
    k.num_k = op->m;
    k.kx = op->acq->kx;
    k.ky = op->acq->ky;
    k.kz = op->dims == 3 ? op->acq->kz : NULL;
    k.phi_r = phr;
    k.phi_i = op->zeros_m;
    k.d_r = k.d_i = NULL;
    v.num_x = n2;
    v.x = pos;
    v.y = pos + n2;
    v.z = op->dims == 3 ? pos + 2 * n2 : NULL;
    GROVE_TRY_END(st, grove__mri_sum_cpu(op->ctx, op->fn, 0, &k, &v, qr, qi));
    for (size_t i = 0; i < n2; i++) {
        op->kern[i][0] = qr[i];
        op->kern[i][1] = qi[i];
    }
    for (int a = 0; a < op->dims; a++) nn[a] = (int)s2;
    pthread_mutex_lock(&plan_lock);
    op->fwd = fftw_plan_dft(op->dims, nn, op->work, op->work, FFTW_FORWARD, FFTW_ESTIMATE);
    op->inv = fftw_plan_dft(op->dims, nn, op->work, op->work, FFTW_BACKWARD, FFTW_ESTIMATE);
    pthread_mutex_unlock(&plan_lock);
    if (!op->fwd || !op->inv) {
        st = grove__error(op->ctx, GROVE_ERR_INTERNAL, "%s: FFTW could not plan a %d-D FFT of %zu",
                          op->fn, op->dims, s2);
        goto _end;
    }
    fftw_execute_dft(op->fwd, op->kern, op->kern);
    {
        double scale = 1.0 / (double)n2;
        for (size_t i = 0; i < n2; i++) {
            op->kern[i][0] *= scale;
            op->kern[i][1] *= scale;
        }
    }
_end:
    free(pos);
    free(phr);
    free(qr);
    return st;
}

/* out = T * p (linear convolution of the image with the kernel): zero-pad to the doubled grid,
 * FFT, multiply, inverse FFT, crop. */
static void toeplitz_apply(recon_op *op, const double *p, double *out)
{
    size_t s = (size_t)op->size, s2 = 2 * s;
    memset(op->work, 0, op->n2 * sizeof(fftw_complex));
    for (size_t i = 0; i < op->n; i++) {
        size_t x = i % s, y = op->dims > 1 ? (i / s) % s : 0, z = op->dims > 2 ? i / (s * s) : 0;
        size_t j = x + s2 * (y + s2 * z);
        op->work[j][0] = p[2 * i];
        op->work[j][1] = p[2 * i + 1];
    }
    fftw_execute_dft(op->fwd, op->work, op->work);
    for (size_t i = 0; i < op->n2; i++) {
        double a = op->work[i][0], b = op->work[i][1];
        double c = op->kern[i][0], d = op->kern[i][1];
        op->work[i][0] = a * c - b * d;
        op->work[i][1] = a * d + b * c;
    }
    fftw_execute_dft(op->inv, op->work, op->work);
    for (size_t i = 0; i < op->n; i++) {
        size_t x = i % s, y = op->dims > 1 ? (i / s) % s : 0, z = op->dims > 2 ? i / (s * s) : 0;
        size_t j = x + s2 * (y + s2 * z);
        out[2 * i] = op->work[j][0];
        out[2 * i + 1] = op->work[j][1];
    }
}
#endif

/* out = (F^H W F + lambda R) p */
static grove_status op_apply(recon_op *op, const double *p, double *out)
{
#ifdef GROVE_HAVE_FFTW
    if (op->toeplitz) {
        toeplitz_apply(op, p, out);
        op_add_reg(op, p, out);
        return GROVE_OK;
    }
#endif
    GROVE_TRY(op_forward(op, p));
    GROVE_TRY(op_fhw(op, op->sr, op->si, op->fr, op->fi));
    for (size_t i = 0; i < op->n; i++) {
        out[2 * i] = op->fr[i];
        out[2 * i + 1] = op->fi[i];
    }
    op_add_reg(op, p, out);
    return GROVE_OK;
}

static void op_free(recon_op *op)
{
    free(op->vx);
    free(op->ones);
    free(op->zeros_m);
    free(op->fr);
    free(op->sr);
#ifdef GROVE_HAVE_FFTW
    pthread_mutex_lock(&plan_lock);
    if (op->fwd) fftw_destroy_plan(op->fwd);
    if (op->inv) fftw_destroy_plan(op->inv);
    pthread_mutex_unlock(&plan_lock);
    fftw_free(op->kern);
    fftw_free(op->work);
#endif
}

/* Checks what only the operator needs and allocates its buffers; the Toeplitz kernel comes
 * later (op_setup), so that its time is measured with the rest of the setup. */
static grove_status op_init(recon_op *op, grove_ctx *ctx, const char *fn, const grove_mri_acq *acq,
                            grove_mri_fhf fhf, double lambda)
{
    size_t n = 1, m = acq->num_k;
    memset(op, 0, sizeof *op);
#ifndef GROVE_HAVE_FFTW
    if (fhf == GROVE_MRI_FHF_TOEPLITZ)
        return grove__error(ctx, GROVE_ERR_UNSUPPORTED,
                            "%s: the Toeplitz form needs FFTW, and this build has none (use the "
                            "exact form, GROVE_MRI_FHF_EXACT)",
                            fn);
#endif
    op->ctx = ctx;
    op->fn = fn;
    op->dims = acq->dims;
    op->size = acq->size;
    op->acq = acq;
    op->lambda = lambda;
    op->toeplitz = fhf == GROVE_MRI_FHF_TOEPLITZ;
    for (int a = 0; a < acq->dims; a++) n *= (size_t)acq->size;
    op->n = n;
    op->m = m;
    op->vx = (float *)malloc(3 * n * sizeof(float));
    op->ones = (float *)malloc(2 * n * sizeof(float));
    op->zeros_m = (float *)calloc(m ? m : 1, sizeof(float));
    op->fr = (float *)malloc(2 * n * sizeof(float));
    op->sr = (float *)malloc(2 * (m ? m : 1) * sizeof(float));
    if (!op->vx || !op->ones || !op->zeros_m || !op->fr || !op->sr)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "%s: out of memory for %zu voxels and %zu samples", fn, n, m);
    op->vy = op->vx + n;
    op->vz = acq->dims == 3 ? op->vx + 2 * n : NULL;
    op->zeros_n = op->ones + n;
    op->fi = op->fr + n;
    op->si = op->sr + (m ? m : 1);
    for (size_t i = 0; i < n; i++) {
        size_t s = (size_t)acq->size;
        op->vx[i] = (float)(((double)(i % s) - 0.5 * s) / s);
        op->vy[i] = (float)(((double)((i / s) % s) - 0.5 * s) / s);
        if (op->vz) op->vz[i] = (float)(((double)(i / (s * s)) - 0.5 * s) / s);
        op->ones[i] = 1.0f;
        op->zeros_n[i] = 0.0f;
    }
    return GROVE_OK;
}

static grove_status op_setup(recon_op *op)
{
#ifdef GROVE_HAVE_FFTW
    if (op->toeplitz) return toeplitz_setup(op);
#else
    (void)op;
#endif
    return GROVE_OK;
}

/* ---- checks ---- */

static grove_status check_array(grove_ctx *ctx, const char *fn, const char *name, const float *a,
                                size_t n, int nonneg)
{
    if (!a) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: acq->%s is NULL", fn, name);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            return grove__error(ctx, GROVE_ERR_BAD_INPUT, "%s: acq->%s[%zu] is not finite (%g)", fn,
                                name, i, (double)a[i]);
        if (nonneg && a[i] < 0)
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: acq->%s[%zu] = %g: density weights must be >= 0", fn, name, i,
                                (double)a[i]);
    }
    return GROVE_OK;
}

static grove_status check_acq(grove_ctx *ctx, const char *fn, const grove_mri_acq *a)
{
    if (a->dims != 2 && a->dims != 3)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: acq->dims must be 2 or 3, got %d", fn,
                            a->dims);
    if (a->size < 1 || a->size > RECON_MAX_SIZE)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: acq->size must be 1..%d, got %d", fn,
                            RECON_MAX_SIZE, a->size);
    if (a->dims == 3 && a->size > 1024)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: acq->size must be 1..1024 for 3-D images, got %d", fn, a->size);
    if (a->num_k > (size_t)1 << 40)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: acq->num_k = %zu is too large", fn,
                            a->num_k);
    GROVE_TRY(check_array(ctx, fn, "kx", a->kx, a->num_k, 0));
    GROVE_TRY(check_array(ctx, fn, "ky", a->ky, a->num_k, 0));
    if (a->dims == 3) GROVE_TRY(check_array(ctx, fn, "kz", a->kz, a->num_k, 0));
    GROVE_TRY(check_array(ctx, fn, "d_r", a->d_r, a->num_k, 0));
    GROVE_TRY(check_array(ctx, fn, "d_i", a->d_i, a->num_k, 0));
    GROVE_TRY(check_array(ctx, fn, "w", a->w, a->num_k, 1));
    return GROVE_OK;
}

static double dot_re(const double *a, const double *b, size_t n2)
{
    double s = 0;
    for (size_t i = 0; i < n2; i++) s += a[i] * b[i];
    return s;
}

/* ---- the solver ---- */

grove_status grove_mri_recon(grove_ctx *ctx, const grove_mri_acq *acq,
                             const grove_mri_recon_opts *opts, float *img_r, float *img_i,
                             grove_mri_recon_stats *stats)
{
    static const char fn[] = "grove_mri_recon";
    grove_mri_recon_opts o;
    grove_mri_recon_stats sts;
    recon_op op;
    grove_status st = GROVE_OK;
    double *x = NULL, *r, *p, *ap;
    double t0, t1, bnorm, rr;
    size_t n;

    GROVE_TRY(grove__check_ctx(ctx));
    memset(&sts, 0, sizeof sts);
    if (stats) *stats = sts;
    if (!acq) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: acq is NULL", fn);
    if (!img_r || !img_i)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                            img_r ? "img_i" : "img_r");
    if (opts)
        o = *opts;
    else
        grove_mri_recon_default_opts(&o);
    if (o.max_iters < 0 || o.max_iters > 100000)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: opts->max_iters must be 0..100000, "
                            "got %d",
                            fn, o.max_iters);
    if (!(o.tol >= 0) || !isfinite(o.tol))
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: opts->tol must be finite and >= 0, "
                            "got %g",
                            fn, o.tol);
    if (!(o.lambda >= 0) || !isfinite(o.lambda))
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: opts->lambda must be finite and >= 0, got %g", fn, o.lambda);
    if (o.fhf != GROVE_MRI_FHF_EXACT && o.fhf != GROVE_MRI_FHF_TOEPLITZ)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: opts->fhf must be EXACT or TOEPLITZ, "
                            "got %d",
                            fn, (int)o.fhf);
    GROVE_TRY(check_acq(ctx, fn, acq));
#ifdef GROVE_HAVE_CUDA
    if (grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA)
        return grove__mri_recon_cuda(ctx, fn, acq, &o, img_r, img_i, stats);
#endif
    memset(&op, 0, sizeof op);

    GROVE_TRY_END(st, op_init(&op, ctx, fn, acq, o.fhf, o.lambda));
    n = op.n;
    x = (double *)calloc(8 * n, sizeof(double));
    if (!x) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu voxels", fn, n);
        goto _end;
    }
    r = x + 2 * n;
    p = r + 2 * n;
    ap = p + 2 * n;

    /* b = F^H W d, kept in r (the residual of x = 0) */
    t0 = now_s();
    GROVE_TRY_END(st, op_fhw(&op, acq->d_r, acq->d_i, op.fr, op.fi));
    for (size_t i = 0; i < n; i++) {
        r[2 * i] = op.fr[i];
        r[2 * i + 1] = op.fi[i];
    }
    GROVE_TRY_END(st, op_setup(&op));
    t1 = now_s();
    sts.setup_seconds = t1 - t0;

    rr = dot_re(r, r, 2 * n);
    bnorm = sqrt(rr);
    memcpy(p, r, 2 * n * sizeof(double));
    sts.residual = bnorm > 0 ? 1.0 : 0.0;
    while (bnorm > 0 && sts.iters < o.max_iters && sts.residual > o.tol) {
        double pap, alpha, rr_new, beta;
        GROVE_TRY_END(st, op_apply(&op, p, ap));
        pap = dot_re(p, ap, 2 * n);
        /* A is positive semidefinite: p^H A p <= 0 means p lies in its null space (up to
         * rounding) and CG cannot move further. */
        if (!(pap > 0)) break;
        alpha = rr / pap;
        for (size_t i = 0; i < 2 * n; i++) {
            x[i] += alpha * p[i];
            r[i] -= alpha * ap[i];
        }
        rr_new = dot_re(r, r, 2 * n);
        sts.iters++;
        sts.residual = sqrt(rr_new) / bnorm;
        if (o.progress && o.progress(o.progress_user, sts.iters, o.max_iters, sts.residual)) break;
        beta = rr_new / rr;
        rr = rr_new;
        for (size_t i = 0; i < 2 * n; i++) p[i] = r[i] + beta * p[i];
    }
    sts.seconds_per_iter = sts.iters ? (now_s() - t1) / sts.iters : 0.0;
    for (size_t i = 0; i < n; i++) {
        img_r[i] = (float)x[2 * i];
        img_i[i] = (float)x[2 * i + 1];
    }
    if (stats) *stats = sts;
_end:
    op_free(&op);
    free(x);
    return st;
}

/* The normal operator on its own, for the tests (mri_internal.h). */
grove_status grove__mri_normal_apply(grove_ctx *ctx, const grove_mri_acq *acq, grove_mri_fhf fhf,
                                     double lambda, const float *in_r, const float *in_i,
                                     float *out_r, float *out_i)
{
    static const char fn[] = "grove__mri_normal_apply";
    recon_op op;
    grove_status st = GROVE_OK;
    double *p = NULL;
    GROVE_TRY(grove__check_ctx(ctx));
    if (!acq || !in_r || !in_i || !out_r || !out_i)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: a pointer argument is NULL", fn);
    GROVE_TRY(check_acq(ctx, fn, acq));
    if (fhf != GROVE_MRI_FHF_EXACT && fhf != GROVE_MRI_FHF_TOEPLITZ)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: fhf must be EXACT or TOEPLITZ", fn);
#ifdef GROVE_HAVE_CUDA
    if (grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA)
        return grove__mri_normal_apply_cuda(ctx, fn, acq, fhf, lambda, in_r, in_i, out_r, out_i);
#endif
    GROVE_TRY_END(st, op_init(&op, ctx, fn, acq, fhf, lambda));
    GROVE_TRY_END(st, op_setup(&op));
    p = (double *)calloc(4 * op.n, sizeof(double));
    if (!p) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto _end;
    }
    for (size_t i = 0; i < op.n; i++) {
        p[2 * i] = in_r[i];
        p[2 * i + 1] = in_i[i];
    }
    GROVE_TRY_END(st, op_apply(&op, p, p + 2 * op.n));
    for (size_t i = 0; i < op.n; i++) {
        out_r[i] = (float)p[2 * op.n + 2 * i];
        out_i[i] = (float)p[2 * op.n + 2 * i + 1];
    }
_end:
    free(p);
    op_free(&op);
    return st;
}
