/*
 * mri.c - public entry points of the Q and FHD sums: argument and value checks, then the
 * dispatch to the CPU backend (mri_cpu.c) or the CUDA backend (mri_cuda.cu); the kernel names;
 * the NRMSE of two images.
 *
 * Every check comes before the dispatch, so that both backends reject the same inputs with the
 * same messages, and the CUDA backend can trust what it is given (mri_cuda.h).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "mri_internal.h"
#ifdef GROVE_HAVE_CUDA
#include "mri_cuda.h"
#endif

/* names by value, not by position, so that the table cannot drift from the enum */
static const struct {
    grove_mri_kernel k;
    const char *name;
} kernels[] = {
    {GROVE_MRI_KERNEL_AUTO, "auto"},     {GROVE_MRI_KERNEL_SCATTER, "scatter"},
    {GROVE_MRI_KERNEL_GATHER, "gather"}, {GROVE_MRI_KERNEL_CONSTANT, "constant"},
    {GROVE_MRI_KERNEL_TILED, "tiled"},   {GROVE_MRI_KERNEL_FAST, "fast"},
};
#define NUM_KERNELS ((int)(sizeof kernels / sizeof kernels[0]))

const char *grove_mri_kernel_name(grove_mri_kernel k)
{
    for (int i = 0; i < NUM_KERNELS; i++)
        if (kernels[i].k == k) return kernels[i].name;
    return "?";
}

grove_status grove_mri_kernel_parse(const char *name, grove_mri_kernel *out)
{
    if (!name || !out) return GROVE_ERR_INVALID_ARG;
    for (int i = 0; i < NUM_KERNELS; i++)
        if (strcmp(kernels[i].name, name) == 0) {
            *out = kernels[i].k;
            return GROVE_OK;
        }
    return GROVE_ERR_INVALID_ARG;
}

/* The first non-finite element of a[n] (SIZE_MAX if none). In parallel above a size where
 * threads pay off; the smallest bad index wins whichever thread sees it, so the message does
 * not depend on the thread count. */
static size_t first_non_finite(const float *a, size_t n, int nt)
{
    size_t bad = SIZE_MAX;
    if (!a) return SIZE_MAX;
#pragma omp parallel for num_threads(nt) schedule(static) if (n > 262144) reduction(min : bad)
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i]) && i < bad) bad = i;
    return bad;
}

grove_status grove__mri_check_finite(grove_ctx *ctx, const char *where, const char *name,
                                     const float *a, size_t n)
{
    size_t i = first_non_finite(a, n, grove__threads(ctx));
    if (i == SIZE_MAX) return GROVE_OK;
    return grove__error(ctx, GROVE_ERR_BAD_INPUT, "%s: %s[%zu] is %s", where, name, i,
                        isnan(a[i]) ? "NaN" : (a[i] > 0 ? "+Inf" : "-Inf"));
}

static grove_status mri_sum(grove_ctx *ctx, const char *fn, int fhd, const grove_mri_samples *k,
                            const grove_mri_voxels *v, grove_mri_kernel kernel, float *out_r,
                            float *out_i)
{
    int cuda = 0;
    size_t nk, nx;

    GROVE_TRY(grove__check_ctx(ctx));
    if (!k) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: k is NULL", fn);
    if (!v) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: v is NULL", fn);
    nk = k->num_k;
    nx = v->num_x;
    if ((int)kernel < (int)GROVE_MRI_KERNEL_AUTO || (int)kernel > (int)GROVE_MRI_KERNEL_FAST)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: kernel %d is not a grove_mri_kernel (0..%d)", fn, (int)kernel,
                            (int)GROVE_MRI_KERNEL_FAST);
    if (nk > 0) {
        const char *miss = !k->kx           ? "kx"
                           : !k->ky         ? "ky"
                           : !k->phi_r      ? "phi_r"
                           : !k->phi_i      ? "phi_i"
                           : fhd && !k->d_r ? "d_r"
                           : fhd && !k->d_i ? "d_i"
                                            : NULL;
        if (miss)
            return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                                "%s: k->%s is NULL with k->num_k = %zu%s", fn, miss, nk,
                                fhd && miss[0] == 'd' ? " (FHD needs the data d_r, d_i)" : "");
    }
    if (nx > 0) {
        if (!v->x || !v->y)
            return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: v->%s is NULL with v->num_x = %zu",
                                fn, !v->x ? "x" : "y", nx);
        if (!out_r || !out_i)
            return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s is NULL with v->num_x = %zu",
                                fn, !out_r ? "out_r" : "out_i", nx);
    }
#ifdef GROVE_HAVE_CUDA
    cuda = grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA;
#endif
    if (!cuda && kernel != GROVE_MRI_KERNEL_AUTO)
        return grove__error(ctx, GROVE_ERR_UNSUPPORTED,
                            "%s: kernel '%s' runs on the CUDA backend only; the CPU backend has "
                            "one kernel, 'auto'",
                            fn, grove_mri_kernel_name(kernel));

    GROVE_TRY(grove__mri_check_finite(ctx, fn, "kx", k->kx, nk));
    GROVE_TRY(grove__mri_check_finite(ctx, fn, "ky", k->ky, nk));
    GROVE_TRY(grove__mri_check_finite(ctx, fn, "kz", k->kz, nk));
    GROVE_TRY(grove__mri_check_finite(ctx, fn, "phi_r", k->phi_r, nk));
    GROVE_TRY(grove__mri_check_finite(ctx, fn, "phi_i", k->phi_i, nk));
    if (fhd) {
        GROVE_TRY(grove__mri_check_finite(ctx, fn, "d_r", k->d_r, nk));
        GROVE_TRY(grove__mri_check_finite(ctx, fn, "d_i", k->d_i, nk));
    }
    GROVE_TRY(grove__mri_check_finite(ctx, fn, "x", v->x, nx));
    GROVE_TRY(grove__mri_check_finite(ctx, fn, "y", v->y, nx));
    GROVE_TRY(grove__mri_check_finite(ctx, fn, "z", v->z, nx));

    if (nx == 0) return GROVE_OK;
    if (nk == 0) {
        /* an empty sum on either backend: no reason to start the GPU for it */
        memset(out_r, 0, nx * sizeof *out_r);
        memset(out_i, 0, nx * sizeof *out_i);
        return GROVE_OK;
    }
#ifdef GROVE_HAVE_CUDA
    if (cuda) return grove__mri_sum_cuda(ctx, fn, fhd, k, v, kernel, out_r, out_i);
#endif
    return grove__mri_sum_cpu(ctx, fn, fhd, k, v, out_r, out_i);
}

grove_status grove_mri_q(grove_ctx *ctx, const grove_mri_samples *k, const grove_mri_voxels *v,
                         grove_mri_kernel kernel, float *out_r, float *out_i)
{
    return mri_sum(ctx, "grove_mri_q", 0, k, v, kernel, out_r, out_i);
}

grove_status grove_mri_fhd(grove_ctx *ctx, const grove_mri_samples *k, const grove_mri_voxels *v,
                           grove_mri_kernel kernel, float *out_r, float *out_i)
{
    return mri_sum(ctx, "grove_mri_fhd", 1, k, v, kernel, out_r, out_i);
}

double grove_mri_nrmse(const float *a, const float *ref, size_t n)
{
    double num = 0.0, den = 0.0;
    if (n == 0) return 0.0;
    if (!a || !ref) return NAN;
    /* sequential: the same figure whatever the thread count */
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
    return sqrt(num / den);
}
