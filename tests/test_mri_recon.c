/*
 * test_mri_recon.c - the mri module's reconstruction side: the phantom's analytic k-space against
 * a numerical Fourier transform of the rasterised phantom, the normal operator (exact and
 * Toeplitz) against a float64 brute force, conjugate-gradient reconstructions of 2-D and 3-D
 * phantoms (NRMSE bounds), the regulariser, and the files: NIfTI header bytes, PNG, ISMRMRD round
 * trip, multi-coil, truncated, garbage and NaN-carrying files.
 *
 * Usage: test_mri_recon [--backend cpu|cuda] [--seed S] [--only quick]
 * With --backend cuda the whole solve runs on the GPU (mri_recon_cuda.cu: float sums, cuFFT,
 * device-resident CG) and the results are compared with the CPU backend's: the operator, every
 * reconstruction case's image and iteration count, the stopping rules, and a forced device
 * out-of-memory; then (not with --only quick, which the sanitizer runs use) the seconds per
 * iteration on the GPU and the CPU at 2-D 128 and 3-D stack 64. Exit 77 (skipped) where no GPU
 * can be used.
 *
 * Bounds and where they come from (figures measured on the CPU backend, docs/mri.md):
 *  - analytic vs numerical k-space: the numerical transform is the phantom averaged over voxels
 *    of a fine grid (each voxel itself supersampled), whose error is the boundary voxels'
 *    partial coverage, O(h) per unit of ellipse perimeter with cancelling signs; the bound is a
 *    few times the measured error, relative to |F(0)|, the phantom's mass.
 *  - NRMSE: the reconstruction is band-limited to |k| <= size/2 while the phantom has sharp
 *    edges, so Gibbs ringing at the edges sets a floor well above zero; the bounds sit about 10%
 *    above the measured figures, below what a point-reflected image (a sign or conjugation
 *    error, 0.55 at radial 64), a one-voxel shift (0.67) or a 20% scale error (0.26) gives.
 *    Missing density weights cost little at 20 iterations (0.238 against 0.211), so the weights
 *    are checked on their own (test_weights).
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h" /* the context's dev_in_use, for the leak check of the out-of-memory test */
#include "grove/mri.h"
#include "testutil.h"

/* GROVE_HAVE_ISMRMRD comes from the build (tests/CMakeLists.txt), as for the library. */
#ifdef GROVE_HAVE_ISMRMRD
#include <ismrmrd/dataset.h>
#include <ismrmrd/ismrmrd.h>
#endif

/* Internal (src/mri/mri_recon.c): the normal operator as the solver applies it. */
grove_status grove__mri_normal_apply(grove_ctx *ctx, const grove_mri_acq *acq, grove_mri_fhf fhf,
                                     double lambda, const float *in_r, const float *in_i,
                                     float *out_r, float *out_i);

#define PI 3.14159265358979323846

static grove_ctx *g_ref; /* the CPU context; the context under test may be CUDA */
static char g_dir[256];  /* scratch directory for files */

static size_t voxels(int dims, int size)
{
    return dims == 2 ? (size_t)size * size : (size_t)size * size * size;
}

/* ---- the phantom's k-space ---- */

/* The numerical transform of the phantom at k: voxel means on a fine grid of `fine` voxels per
 * axis (grove_mri_phantom_image supersamples each), summed with their centres' phases; the
 * voxel average multiplies the transform by prod sinc(k_a / fine), which is divided out. */
static void numeric_ft(const float *img, int dims, int fine, const double *k, double *re,
                       double *im)
{
    size_t n = voxels(dims, fine);
    double sr = 0, si = 0, h = 1.0 / fine, sinc = 1;
    for (size_t i = 0; i < n; i++) {
        size_t c[3] = {i % (size_t)fine, (i / (size_t)fine) % (size_t)fine,
                       i / ((size_t)fine * (size_t)fine)};
        double ph = 0;
        if (img[i] == 0) continue;
        for (int a = 0; a < dims; a++) ph += k[a] * ((double)c[a] - 0.5 * fine) * h;
        ph *= -2 * PI;
        sr += img[i] * cos(ph);
        si += img[i] * sin(ph);
    }
    for (int a = 0; a < dims; a++) {
        double u = PI * k[a] * h;
        sinc *= u == 0 ? 1.0 : sin(u) / u;
    }
    *re = sr * pow(h, dims) / sinc;
    *im = si * pow(h, dims) / sinc;
}

static void test_phantom_ft(grove_ctx *ctx, int dims, int fine, double bound)
{
    grove_mri_phantom_opts o;
    grove_mri_acq *a = NULL;
    float *img;
    double n_vox, f0 = 0, worst = 0;
    int picked = 0;
    grove_mri_phantom_default_opts(&o);
    o.dims = dims;
    o.size = 32;
    o.traj = dims == 2 ? GROVE_MRI_TRAJ_SPIRAL : GROVE_MRI_TRAJ_STACK;
    CHECK_OK(ctx, grove_mri_phantom(ctx, &o, &a));
    if (!a) return;
    img = (float *)tu_malloc(voxels(dims, fine) * sizeof(float));
    CHECK_OK(NULL, grove_mri_phantom_image(dims, fine, img));
    n_vox = pow(32.0, dims);
    {
        double k0[3] = {0, 0, 0}, re, im;
        numeric_ft(img, dims, fine, k0, &re, &im);
        f0 = re;
    }
    /* a spread of samples: every (num_k / 9)-th, from the centre out to |k| ~ 16 */
    for (size_t j = 0; j < a->num_k; j += a->num_k / 9 + 1, picked++) {
        double k[3] = {a->kx[j], a->ky[j], a->kz ? a->kz[j] : 0}, re, im, err;
        numeric_ft(img, dims, fine, k, &re, &im);
        err = hypot(a->d_r[j] / n_vox - re, a->d_i[j] / n_vox - im) / f0;
        if (err > worst) worst = err;
    }
    printf("  phantom k-space %d-D: analytic vs numerical (grid %d, %d k): max |diff| / |F(0)| "
           "= %.2e (bound %.0e)\n",
           dims, fine, picked, worst, bound);
    CHECK_MSG(worst < bound, "%d-D phantom k-space: %.3e >= %.0e", dims, worst, bound);
    free(img);
    grove_mri_acq_free(a);
}

/* ---- density weights ---- */

/* Radial: the ramp |k| pi / spokes per sample plus the shared centre disc add up to the disc of
 * radius size/2 + 1/2 exactly, pi (size/2 + 1/2)^2, and every weight is proportional to |k|.
 * Spiral: the covered disc, pi (size/2)^2, up to the outermost turn's half gap. Stack: the
 * radial sum times the size kz planes. 3-D radial: the ball of radius size/2 + 1/2, each sample
 * its shell. (Weights are divided by N = size^dims.) */
static void test_weights(grove_ctx *ctx)
{
    static const struct {
        int dims, size;
        grove_mri_trajectory traj;
    } cs[] = {{2, 32, GROVE_MRI_TRAJ_RADIAL},
              {2, 33, GROVE_MRI_TRAJ_RADIAL},
              {2, 64, GROVE_MRI_TRAJ_SPIRAL},
              {3, 16, GROVE_MRI_TRAJ_STACK},
              {3, 12, GROVE_MRI_TRAJ_RADIAL}};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        grove_mri_phantom_opts o;
        grove_mri_acq *a = NULL;
        double sum = 0, want, half = 0.5 * cs[c].size, ramp_lo = INFINITY, ramp_hi = 0, rel;
        grove_mri_phantom_default_opts(&o);
        o.dims = cs[c].dims;
        o.size = cs[c].size;
        o.traj = cs[c].traj;
        CHECK_OK(ctx, grove_mri_phantom(ctx, &o, &a));
        if (!a) continue;
        for (size_t j = 0; j < a->num_k; j++) {
            double kr = hypot(a->kx[j], a->ky[j]);
            if (cs[c].dims == 3 && cs[c].traj == GROVE_MRI_TRAJ_RADIAL)
                kr = sqrt(kr * kr + (double)a->kz[j] * a->kz[j]);
            sum += a->w[j];
            if (cs[c].traj != GROVE_MRI_TRAJ_SPIRAL && kr > 0.5) {
                /* 3-D radial: the shell around the sample, 4 pi (k^2 + 1/12) */
                double q = a->w[j] / (cs[c].dims == 3 && cs[c].traj == GROVE_MRI_TRAJ_RADIAL
                                          ? kr * kr + 1.0 / 12
                                          : kr);
                ramp_lo = fmin(ramp_lo, q);
                ramp_hi = fmax(ramp_hi, q);
            }
        }
        sum *= pow((double)cs[c].size, cs[c].dims);
        if (cs[c].traj == GROVE_MRI_TRAJ_SPIRAL)
            want = PI * half * half;
        else if (cs[c].dims == 3 && cs[c].traj == GROVE_MRI_TRAJ_RADIAL)
            want = 4.0 / 3.0 * PI * pow(half + 0.5, 3);
        else
            want = PI * (half + 0.5) * (half + 0.5) * (cs[c].dims == 3 ? cs[c].size : 1);
        rel = fabs(sum / want - 1);
        printf("  weights %d-D %s %d: sum(w) N / covered area = %.5f\n", cs[c].dims,
               cs[c].traj == GROVE_MRI_TRAJ_RADIAL   ? "radial"
               : cs[c].traj == GROVE_MRI_TRAJ_SPIRAL ? "spiral"
                                                     : "stack",
               cs[c].size, sum / want);
        /* radial and stack exact up to float rounding; the spiral's last turn adds about a
         * half gap's ring, 1/size of the area */
        CHECK_MSG(rel < (cs[c].traj == GROVE_MRI_TRAJ_SPIRAL ? 2.0 / cs[c].size : 1e-5),
                  "sum of weights off by %.3e", rel);
        if (cs[c].traj != GROVE_MRI_TRAJ_SPIRAL)
            CHECK_MSG(ramp_hi / ramp_lo - 1 < 1e-5, "weights not proportional to %s: %.3e",
                      cs[c].dims == 3 && cs[c].traj == GROVE_MRI_TRAJ_RADIAL ? "k^2 + 1/12" : "|k|",
                      ramp_hi / ramp_lo - 1);
        for (size_t j = 0; j < a->num_k; j++)
            if (!(a->w[j] > 0)) {
                FAIL("weight %zu is %g", j, (double)a->w[j]);
                break;
            }
        grove_mri_acq_free(a);
    }
}

/* ---- the normal operator against float64 brute force ---- */

/* y = (F^H W F + lambda R) x in double, straight from the definitions in mri.h and docs/mri.md:
 * (F x)_m = sum_n x_n e^{-i 2 pi k_m.x_n}, (F^H e)_n = sum_m e_m e^{+i 2 pi k_m.x_n}. */
static void brute_normal(const grove_mri_acq *a, double lambda, const double *x, double *y)
{
    int s = a->size, dims = a->dims;
    size_t n = voxels(dims, s), m = a->num_k;
    double *pos = (double *)tu_malloc(3 * n * sizeof(double));
    double *e = (double *)tu_malloc(2 * m * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        pos[3 * i] = ((double)(i % (size_t)s) - 0.5 * s) / s;
        pos[3 * i + 1] = ((double)((i / (size_t)s) % (size_t)s) - 0.5 * s) / s;
        pos[3 * i + 2] = dims == 3 ? ((double)(i / ((size_t)s * s)) - 0.5 * s) / s : 0;
    }
    for (size_t j = 0; j < m; j++) {
        double sr = 0, si = 0;
        for (size_t i = 0; i < n; i++) {
            double ph = -2 * PI *
                        (a->kx[j] * pos[3 * i] + a->ky[j] * pos[3 * i + 1] +
                         (dims == 3 ? a->kz[j] * pos[3 * i + 2] : 0));
            sr += x[2 * i] * cos(ph) - x[2 * i + 1] * sin(ph);
            si += x[2 * i] * sin(ph) + x[2 * i + 1] * cos(ph);
        }
        e[2 * j] = a->w[j] * sr;
        e[2 * j + 1] = a->w[j] * si;
    }
    for (size_t i = 0; i < n; i++) {
        double sr = 0, si = 0;
        for (size_t j = 0; j < m; j++) {
            double ph = 2 * PI *
                        (a->kx[j] * pos[3 * i] + a->ky[j] * pos[3 * i + 1] +
                         (dims == 3 ? a->kz[j] * pos[3 * i + 2] : 0));
            sr += e[2 * j] * cos(ph) - e[2 * j + 1] * sin(ph);
            si += e[2 * j] * sin(ph) + e[2 * j + 1] * cos(ph);
        }
        y[2 * i] = sr;
        y[2 * i + 1] = si;
    }
    /* R = D^H D: each voxel minus each neighbour inside the image, per axis (Neumann) */
    for (size_t i = 0; i < n && lambda > 0; i++) {
        size_t stride = 1;
        for (int ax = 0; ax < dims; ax++, stride *= (size_t)s) {
            size_t c = (i / stride) % (size_t)s;
            for (int side = -1; side <= 1; side += 2) {
                size_t j;
                if ((side < 0 && c == 0) || (side > 0 && c + 1 == (size_t)s)) continue;
                j = side < 0 ? i - stride : i + stride;
                y[2 * i] += lambda * (x[2 * i] - x[2 * j]);
                y[2 * i + 1] += lambda * (x[2 * i + 1] - x[2 * j + 1]);
            }
        }
    }
    free(pos);
    free(e);
}

static double rel_err_f(const float *ar, const float *ai, const double *y, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double dr = ar[i] - y[2 * i], di = ai[i] - y[2 * i + 1];
        num += dr * dr + di * di;
        den += y[2 * i] * y[2 * i] + y[2 * i + 1] * y[2 * i + 1];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void test_operator(grove_ctx *ctx, tu_rng *r, int dims, int size, grove_mri_trajectory traj,
                          double lambda)
{
    grove_mri_phantom_opts o;
    grove_mri_acq *a = NULL;
    size_t n = voxels(dims, size);
    float *xr = (float *)tu_malloc(6 * n * sizeof(float)), *xi = xr + n, *er = xi + n, *ei = er + n,
          *tr = ei + n, *ti = tr + n;
    double *x = (double *)tu_malloc(4 * n * sizeof(double)), *y = x + 2 * n, e_ex, e_tp, e_et;
    grove_mri_phantom_default_opts(&o);
    o.dims = dims;
    o.size = size;
    o.traj = traj;
    CHECK_OK(ctx, grove_mri_phantom(ctx, &o, &a));
    if (!a) {
        free(xr);
        free(x);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        xr[i] = tu_f32(r, -1, 1);
        xi[i] = tu_f32(r, -1, 1);
        x[2 * i] = xr[i];
        x[2 * i + 1] = xi[i];
    }
    brute_normal(a, lambda, x, y);
    CHECK_OK(ctx, grove__mri_normal_apply(ctx, a, GROVE_MRI_FHF_EXACT, lambda, xr, xi, er, ei));
    CHECK_OK(ctx, grove__mri_normal_apply(ctx, a, GROVE_MRI_FHF_TOEPLITZ, lambda, xr, xi, tr, ti));
    e_ex = rel_err_f(er, ei, y, n);
    e_tp = rel_err_f(tr, ti, y, n);
    for (size_t i = 0; i < n; i++) {
        x[2 * i] = er[i];
        x[2 * i + 1] = ei[i];
    }
    e_et = rel_err_f(tr, ti, x, n);
    printf("  normal operator %d-D size %d, %zu samples, lambda %g: rel. L2 error exact %.2e, "
           "Toeplitz %.2e (vs float64 brute force), Toeplitz vs exact %.2e\n",
           dims, size, a->num_k, lambda, e_ex, e_tp, e_et);
    /* float32 inputs and outputs around double sums: a few 1e-7; the CUDA kernels sum in
     * float (mri.h: <= 1e-4) */
    {
        double bound = grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA ? 2e-4 : 1e-5;
        CHECK_MSG(e_ex < bound, "exact operator: %.3e", e_ex);
        CHECK_MSG(e_tp < bound, "Toeplitz operator: %.3e", e_tp);
        CHECK_MSG(e_et < bound, "Toeplitz vs exact: %.3e", e_et);
    }
    grove_mri_acq_free(a);
    free(xr);
    free(x);
}

/* ---- reconstructions ---- */

typedef struct recon_case {
    int dims, size;
    grove_mri_trajectory traj;
    grove_mri_fhf fhf;
    int iters;
    double lambda;
    double bound; /* NRMSE */
} recon_case;

static const char *traj_name(grove_mri_trajectory t)
{
    return t == GROVE_MRI_TRAJ_RADIAL ? "radial" : t == GROVE_MRI_TRAJ_SPIRAL ? "spiral" : "stack";
}

static int count_progress(void *user, int iter, int max_iters, double residual)
{
    int *calls = (int *)user;
    (void)max_iters;
    (void)residual;
    if (iter == *calls + 1) (*calls)++;
    return 0;
}

/* Returns the NRMSE (and the image in *out_r when out_r is not NULL, for the caller to free). */
static double run_recon(grove_ctx *ctx, const recon_case *c, float **out_r)
{
    grove_mri_phantom_opts o;
    grove_mri_recon_opts ro;
    grove_mri_recon_stats stats;
    grove_mri_acq *a = NULL;
    size_t n = voxels(c->dims, c->size);
    float *ir = (float *)tu_malloc(3 * n * sizeof(float)), *ii = ir + n, *ref = ii + n;
    double nrmse, imag = 0;
    int calls = 0;
    grove_mri_phantom_default_opts(&o);
    o.dims = c->dims;
    o.size = c->size;
    o.traj = c->traj;
    CHECK_OK(ctx, grove_mri_phantom(ctx, &o, &a));
    CHECK_OK(NULL, grove_mri_phantom_image(c->dims, c->size, ref));
    grove_mri_recon_default_opts(&ro);
    ro.max_iters = c->iters;
    ro.fhf = c->fhf;
    ro.lambda = c->lambda;
    ro.tol = 0;
    ro.progress = count_progress;
    ro.progress_user = &calls;
    memset(&stats, 0, sizeof stats);
    if (a) CHECK_OK(ctx, grove_mri_recon(ctx, a, &ro, ir, ii, &stats));
    nrmse = grove_mri_nrmse(ir, ref, n);
    {
        double num = 0, den = 0;
        for (size_t i = 0; i < n; i++) {
            num += (double)ii[i] * ii[i];
            den += (double)ref[i] * ref[i];
        }
        imag = sqrt(num / den); /* ||imag|| / ||ref|| */
    }
    printf("  recon %d-D %-6s size %3d, %6zu samples, %-8s lambda %-5g: %2d iters, residual "
           "%.2e, NRMSE %.4f (bound %.3f), imag %.1e, setup %.3f s, %.4f s/iter\n",
           c->dims, traj_name(c->traj), c->size, a ? a->num_k : 0,
           c->fhf == GROVE_MRI_FHF_EXACT ? "exact" : "toeplitz", c->lambda, stats.iters,
           stats.residual, nrmse, c->bound, imag, stats.setup_seconds, stats.seconds_per_iter);
    CHECK_MSG(nrmse < c->bound, "%d-D %s size %d: NRMSE %.4f >= %.3f", c->dims, traj_name(c->traj),
              c->size, nrmse, c->bound);
    CHECK_MSG(imag < 0.05, "imaginary part %.3e of a real phantom", imag);
    CHECK(stats.iters == c->iters);
    CHECK(calls == stats.iters);
    CHECK(stats.residual > 0 && stats.residual < 1);
    grove_mri_acq_free(a);
    if (out_r) {
        *out_r = ir; /* ir, ii, ref: the caller frees ir */
        return nrmse;
    }
    free(ir);
    return nrmse;
}

/* Sum of squared forward differences: what R penalises. */
static double roughness(const float *img, int dims, int size)
{
    size_t n = voxels(dims, size), stride = 1;
    double s = 0;
    for (int a = 0; a < dims; a++, stride *= (size_t)size)
        for (size_t i = 0; i < n; i++)
            if ((i / stride) % (size_t)size + 1 < (size_t)size) {
                double d = img[i + stride] - img[i];
                s += d * d;
            }
    return s;
}

/* ---- files ---- */

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *b;
    long n;
    *len = 0;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = (unsigned char *)tu_malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void spit(const char *path, const void *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, len, f) != len) FAIL("cannot write %s", path);
    if (f) fclose(f);
}

static int32_t le32(const unsigned char *b)
{
    return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                     (uint32_t)b[3] << 24);
}
static int le16(const unsigned char *b) { return (int16_t)(b[0] | b[1] << 8); }
static float lef(const unsigned char *b)
{
    int32_t v = le32(b);
    float f;
    memcpy(&f, &v, 4);
    return f;
}
static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* The scratch directory's files, removed at the end. */
static const char *g_names[64];
static int g_nnames;

static char *path_in(const char *name)
{
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    int known = 0;
    snprintf(p, 512, "%s/%s", g_dir, name);
    for (int i = 0; i < g_nnames; i++) known |= !strcmp(g_names[i], name);
    if (!known && g_nnames < 64 && !strchr(name, '/')) g_names[g_nnames++] = name;
    return p;
}

static void cleanup_dir(void)
{
    for (int i = 0; i < g_nnames; i++) unlink(path_in(g_names[i]));
    rmdir(g_dir);
}

static void test_nifti(grove_ctx *ctx, tu_rng *r)
{
    for (int dims = 2; dims <= 3; dims++) {
        int size = dims == 2 ? 33 : 5;
        size_t n = voxels(dims, size), len;
        float *img = (float *)tu_malloc(n * sizeof(float));
        unsigned char *b;
        const char *path = path_in(dims == 2 ? "a.nii" : "b.nii");
        for (size_t i = 0; i < n; i++) img[i] = tu_f32(r, -3, 7);
        CHECK_OK(ctx, grove_mri_write_nifti(ctx, path, dims, size, img));
        b = slurp(path, &len);
        CHECK(b != NULL && len == 352 + 4 * n);
        if (b && len == 352 + 4 * n) {
            CHECK(le32(b) == 348);       /* sizeof_hdr */
            CHECK(le16(b + 40) == dims); /* dim[0] */
            CHECK(le16(b + 42) == size && le16(b + 44) == size);
            CHECK(le16(b + 46) == (dims == 3 ? size : 1));
            for (int a = 4; a < 8; a++) CHECK(le16(b + 40 + 2 * a) == 1);
            CHECK(le16(b + 70) == 16);                                       /* datatype: float32 */
            CHECK(le16(b + 72) == 32);                                       /* bitpix */
            CHECK(lef(b + 108) == 352.0f);                                   /* vox_offset */
            CHECK(lef(b + 80) == 1.0f / size && lef(b + 84) == 1.0f / size); /* pixdim */
            CHECK(lef(b + 112) == 1.0f);                                     /* scl_slope */
            CHECK(!memcmp(b + 344, "n+1\0", 4));
            CHECK(le32(b + 348) == 0);                                   /* no extensions */
            CHECK(lef(b + 280) == 1.0f / size && lef(b + 292) == -0.5f); /* srow_x */
            for (size_t i = 0; i < n; i++)
                if (lef(b + 352 + 4 * i) != img[i]) {
                    FAIL("NIfTI voxel %zu: %g, want %g", i, (double)lef(b + 352 + 4 * i),
                         (double)img[i]);
                    break;
                }
        }
        free(b);
        free(img);
    }
    {
        float v = 1;
        CHECK_STATUS(ctx, grove_mri_write_nifti(ctx, path_in("c.nii"), 4, 1, &v),
                     GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_mri_write_nifti(ctx, path_in("no/such/dir/c.nii"), 2, 1, &v),
                     GROVE_ERR_IO);
        CHECK(access(path_in("c.nii"), F_OK) != 0);
    }
}

static void test_png(grove_ctx *ctx, tu_rng *r)
{
    int size = 37;
    size_t n = (size_t)size * size, len;
    float *img = (float *)tu_malloc(n * sizeof(float));
    unsigned char *b;
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    for (size_t i = 0; i < n; i++) img[i] = tu_f32(r, 0, 1);
    if (!grove_mri_has_png()) {
        CHECK_STATUS(ctx, grove_mri_write_png(ctx, path_in("a.png"), size, img, 0, 0),
                     GROVE_ERR_UNSUPPORTED);
        free(img);
        return;
    }
    CHECK_OK(ctx, grove_mri_write_png(ctx, path_in("a.png"), size, img, 0, 0));
    CHECK_OK(ctx, grove_mri_write_png(ctx, path_in("b.png"), size, img, 0.25f, 0.5f));
    b = slurp(path_in("a.png"), &len);
    CHECK(b != NULL && len > 8 + 25);
    if (b && len > 33) {
        CHECK(!memcmp(b, sig, 8));
        CHECK(be32(b + 8) == 13 && !memcmp(b + 12, "IHDR", 4));
        CHECK(be32(b + 16) == (uint32_t)size && be32(b + 20) == (uint32_t)size);
        CHECK(b[24] == 8 && b[25] == 0); /* 8-bit grey */
        CHECK(!memcmp(b + len - 8, "IEND", 4));
    }
    free(b);
    img[5] = NAN;
    CHECK_STATUS(ctx, grove_mri_write_png(ctx, path_in("c.png"), size, img, 0, 0),
                 GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(ctx, grove_mri_write_png(ctx, path_in("c.png"), size, img, 1, 0),
                 GROVE_ERR_INVALID_ARG);
    CHECK(access(path_in("c.png"), F_OK) != 0);
    free(img);
}

#ifdef GROVE_HAVE_ISMRMRD
/* An ISMRMRD file written with libismrmrd's C API, from a's samples, with the given channel
 * count, trajectory dimensions, matrix (z = 1: 2-D), and a NaN planted at sample nan_at (or
 * none for SIZE_MAX). Returns 0 or -1. */
static int write_custom(const char *path, const grove_mri_acq *a, int channels, int tdims, int mx,
                        int my, int mz, size_t nan_at)
{
    ISMRMRD_Dataset ds;
    ISMRMRD_Acquisition acq;
    char xml[1024];
    size_t per = (size_t)a->size + 1, j0 = 0;
    int rc = 0;
    snprintf(xml, sizeof xml,
             "<?xml version=\"1.0\"?><ismrmrdHeader xmlns=\"http://www.ismrm.org/ISMRMRD\">"
             "<encoding><encodedSpace><matrixSize><x>%d</x><y>%d</y><z>%d</z></matrixSize>"
             "<fieldOfView_mm><x>200</x><y>200</y><z>200</z></fieldOfView_mm></encodedSpace>"
             "<trajectory>radial</trajectory></encoding></ismrmrdHeader>",
             mx, my, mz);
    unlink(path);
    if (ismrmrd_init_dataset(&ds, path, "/dataset") || ismrmrd_open_dataset(&ds, true)) return -1;
    if (ismrmrd_write_header(&ds, xml)) rc = -1;
    for (; rc == 0 && j0 < a->num_k; j0 += per) {
        size_t cnt = a->num_k - j0 < per ? a->num_k - j0 : per;
        ismrmrd_init_acquisition(&acq);
        acq.head.number_of_samples = (uint16_t)cnt;
        acq.head.active_channels = (uint16_t)channels;
        acq.head.available_channels = (uint16_t)channels;
        acq.head.trajectory_dimensions = (uint16_t)tdims;
        if (ismrmrd_make_consistent_acquisition(&acq)) rc = -1;
        for (size_t j = 0; rc == 0 && j < cnt; j++) {
            float *t = acq.traj + j * (size_t)tdims, *d = (float *)acq.data;
            if (tdims > 0) t[0] = a->kx[j0 + j] / 200.0f;
            if (tdims > 1) t[1] = a->ky[j0 + j] / 200.0f;
            if (tdims > 2) t[2] = a->dims == 3 ? a->kz[j0 + j] / 200.0f : a->w[j0 + j];
            for (int c = 0; c < channels; c++) {
                d[2 * (c * cnt + j)] = a->d_r[j0 + j];
                d[2 * (c * cnt + j) + 1] = j0 + j == nan_at ? NAN : a->d_i[j0 + j];
            }
        }
        if (rc == 0 && ismrmrd_append_acquisition(&ds, &acq)) rc = -1;
        ismrmrd_cleanup_acquisition(&acq);
    }
    if (ismrmrd_close_dataset(&ds)) rc = -1;
    return rc;
}
#endif

static void check_msg(grove_ctx *ctx, const char *want)
{
    CHECK_MSG(strstr(grove_ctx_last_error(ctx), want) != NULL, "message '%s' lacks '%s'",
              grove_ctx_last_error(ctx), want);
}

static void test_ismrmrd(grove_ctx *ctx)
{
    grove_mri_phantom_opts o;
    grove_mri_acq *a = NULL, *b = NULL;
    const char *p = path_in("rt.h5");
    if (!grove_mri_has_ismrmrd()) {
        CHECK_STATUS(ctx, grove_mri_ismrmrd_read(ctx, p, &b), GROVE_ERR_UNSUPPORTED);
        return;
    }
    /* round trips, 2-D and 3-D */
    for (int dims = 2; dims <= 3; dims++) {
        grove_mri_phantom_default_opts(&o);
        o.dims = dims;
        o.size = dims == 2 ? 24 : 8;
        o.traj = dims == 2 ? GROVE_MRI_TRAJ_SPIRAL : GROVE_MRI_TRAJ_STACK;
        CHECK_OK(ctx, grove_mri_phantom(ctx, &o, &a));
        if (!a) return;
        CHECK_OK(ctx, grove_mri_ismrmrd_write(ctx, p, a));
        CHECK_OK(ctx, grove_mri_ismrmrd_read(ctx, p, &b));
        if (b) {
            double kerr = 0;
            int same = 1;
            CHECK(b->dims == a->dims && b->size == a->size && b->num_k == a->num_k);
            CHECK((dims == 3) == (b->kz != NULL));
            for (size_t j = 0; j < a->num_k && b->num_k == a->num_k; j++) {
                kerr = fmax(kerr, fabs(b->kx[j] - a->kx[j]) + fabs(b->ky[j] - a->ky[j]));
                if (dims == 3) kerr = fmax(kerr, fabs(b->kz[j] - a->kz[j]));
                same &= b->d_r[j] == a->d_r[j] && b->d_i[j] == a->d_i[j] && b->w[j] == a->w[j];
            }
            /* k / 256 mm then * 256 mm: a float rounding or two of |k| <= size / 2 */
            CHECK_MSG(kerr < 1e-5, "round trip k error %.3e", kerr);
            CHECK(same);
        }
        grove_mri_acq_free(a);
        grove_mri_acq_free(b);
        a = b = NULL;
    }
    /* damaged files: missing, empty, garbage, truncated */
    CHECK_STATUS(ctx, grove_mri_ismrmrd_read(ctx, path_in("missing.h5"), &b), GROVE_ERR_IO);
    spit(path_in("empty.h5"), "", 0);
    CHECK_STATUS(ctx, grove_mri_ismrmrd_read(ctx, path_in("empty.h5"), &b), GROVE_ERR_BAD_INPUT);
    {
        unsigned char junk[4096];
        size_t len;
        unsigned char *full = slurp(p, &len);
        tu_rng r = {99};
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)tu_u32(&r);
        spit(path_in("junk.h5"), junk, sizeof junk);
        CHECK_STATUS(ctx, grove_mri_ismrmrd_read(ctx, path_in("junk.h5"), &b), GROVE_ERR_BAD_INPUT);
        check_msg(ctx, "junk.h5");
        if (full) {
            /* the HDF5 signature survives, the rest is cut off at several places */
            size_t cuts[] = {len / 2, len - 100, 600, 100};
            for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
                spit(path_in("cut.h5"), full, cuts[c]);
                CHECK_STATUS(ctx, grove_mri_ismrmrd_read(ctx, path_in("cut.h5"), &b),
                             GROVE_ERR_BAD_INPUT);
                CHECK(b == NULL);
            }
            /* garbage in the middle of a good file */
            for (size_t i = len / 3; i < len / 3 + 2000 && i < len; i++)
                full[i] = (unsigned char)tu_u32(&r);
            spit(path_in("mangled.h5"), full, len);
            {
                grove_status s = grove_mri_ismrmrd_read(ctx, path_in("mangled.h5"), &b);
                /* the damage may hit samples (still valid floats) or the structure */
                CHECK_MSG(s == GROVE_ERR_BAD_INPUT || s == GROVE_OK, "mangled: %s",
                          grove_ctx_last_error(ctx));
                grove_mri_acq_free(b);
                b = NULL;
            }
            free(full);
        }
    }
#ifdef GROVE_HAVE_ISMRMRD
    grove_mri_phantom_default_opts(&o);
    o.size = 16;
    CHECK_OK(ctx, grove_mri_phantom(ctx, &o, &a));
    if (!a) return;
    /* multi-coil */
    CHECK(write_custom(path_in("mc.h5"), a, 2, 3, 16, 16, 1, SIZE_MAX) == 0);
    CHECK_STATUS(ctx, grove_mri_ismrmrd_read(ctx, path_in("mc.h5"), &b), GROVE_ERR_UNSUPPORTED);
    check_msg(ctx, "multi-coil data (2 channels) is not supported yet");
    /* NaN in the data */
    CHECK(write_custom(path_in("nan.h5"), a, 1, 3, 16, 16, 1, 40) == 0);
    CHECK_STATUS(ctx, grove_mri_ismrmrd_read(ctx, path_in("nan.h5"), &b), GROVE_ERR_BAD_INPUT);
    check_msg(ctx, "not finite");
    /* Cartesian: no trajectory */
    CHECK(write_custom(path_in("cart.h5"), a, 1, 0, 16, 16, 1, SIZE_MAX) == 0);
    CHECK_STATUS(ctx, grove_mri_ismrmrd_read(ctx, path_in("cart.h5"), &b), GROVE_ERR_UNSUPPORTED);
    check_msg(ctx, "Cartesian");
    /* a matrix that is not square */
    CHECK(write_custom(path_in("rect.h5"), a, 1, 3, 16, 12, 1, SIZE_MAX) == 0);
    CHECK_STATUS(ctx, grove_mri_ismrmrd_read(ctx, path_in("rect.h5"), &b), GROVE_ERR_UNSUPPORTED);
    /* 2-D encoding with 3-D k and weights (4 dims) */
    CHECK(write_custom(path_in("td4.h5"), a, 1, 4, 16, 16, 1, SIZE_MAX) == 0);
    CHECK_STATUS(ctx, grove_mri_ismrmrd_read(ctx, path_in("td4.h5"), &b), GROVE_ERR_UNSUPPORTED);
    /* no weights: estimated; k rescaled from cycles/mm with the header's 200 mm */
    CHECK(write_custom(path_in("now.h5"), a, 1, 2, 16, 16, 1, SIZE_MAX) == 0);
    CHECK_OK(ctx, grove_mri_ismrmrd_read(ctx, path_in("now.h5"), &b));
    if (b) {
        double rel = 0, ws = 0, as = 0;
        int pos = 1;
        for (size_t j = 0; j < b->num_k; j++) {
            pos &= b->w[j] > 0;
            ws += b->w[j];
            as += a->w[j];
            rel = fmax(rel, fabs(b->kx[j] - a->kx[j]));
        }
        CHECK(pos);
        CHECK_MSG(rel < 1e-4, "k rescaled: %.3e", rel);
        /* the estimate's total is the covered area (within its edge overweighting) */
        printf("  ISMRMRD without weights: estimated sum(w) / analytic sum(w) = %.3f\n", ws / as);
        CHECK_MSG(ws / as > 0.8 && ws / as < 1.3, "sum of estimated weights %.3f of analytic",
                  ws / as);
        {
            recon_case c = {2, 16, GROVE_MRI_TRAJ_RADIAL, GROVE_MRI_FHF_TOEPLITZ, 15, 0, 0};
            size_t n = voxels(2, 16);
            float *ir = (float *)tu_malloc(3 * n * sizeof(float)), *ii = ir + n, *ref = ii + n;
            grove_mri_recon_opts ro;
            grove_mri_recon_default_opts(&ro);
            ro.max_iters = c.iters;
            ro.tol = 0;
            CHECK_OK(NULL, grove_mri_phantom_image(2, 16, ref));
            CHECK_OK(ctx, grove_mri_recon(ctx, b, &ro, ir, ii, NULL));
            printf("  recon from estimated weights (2-D radial 16): NRMSE %.4f\n",
                   grove_mri_nrmse(ir, ref, n));
            CHECK(grove_mri_nrmse(ir, ref, n) < 0.35);
            free(ir);
        }
        grove_mri_acq_free(b);
        b = NULL;
    }
    grove_mri_acq_free(a);
#endif
}

static void test_reconstructions(grove_ctx *ctx)
{
    static const recon_case cs[] = {
        {2, 32, GROVE_MRI_TRAJ_RADIAL, GROVE_MRI_FHF_EXACT, 20, 0, 0.26},
        {2, 32, GROVE_MRI_TRAJ_RADIAL, GROVE_MRI_FHF_TOEPLITZ, 20, 0, 0.26},
        {2, 48, GROVE_MRI_TRAJ_SPIRAL, GROVE_MRI_FHF_EXACT, 20, 0, 0.275},
        {2, 64, GROVE_MRI_TRAJ_SPIRAL, GROVE_MRI_FHF_TOEPLITZ, 20, 0, 0.25},
        {2, 64, GROVE_MRI_TRAJ_RADIAL, GROVE_MRI_FHF_TOEPLITZ, 20, 0, 0.235},
        {2, 64, GROVE_MRI_TRAJ_RADIAL, GROVE_MRI_FHF_TOEPLITZ, 20, 0.05, 0.24},
        {2, 64, GROVE_MRI_TRAJ_RADIAL, GROVE_MRI_FHF_TOEPLITZ, 20, 2.0, 0.6},
        {3, 16, GROVE_MRI_TRAJ_STACK, GROVE_MRI_FHF_TOEPLITZ, 15, 0, 0.255},
    };
    float *img[8];
    double rough[8];
    for (int i = 0; i < 8; i++) {
        run_recon(ctx, &cs[i], &img[i]);
        rough[i] = roughness(img[i], cs[i].dims, cs[i].size);
    }
    /* exact and Toeplitz: the same iterates up to float rounding in the operator (on the GPU
     * both operators are float, each within 1e-4 of the exact one (mri.h), which 20 CG
     * iterations amplify: the CUDA vs CPU bound below; measured 1.8e-5 on the H100) */
    {
        size_t n = voxels(2, 32);
        double d = grove_mri_nrmse(img[1], img[0], n);
        double bound = ctx != g_ref ? 5e-4 : 1e-4;
        printf("  exact vs Toeplitz images (2-D radial 32, 20 iterations): rel. L2 %.2e\n", d);
        CHECK_MSG(d < bound, "exact vs Toeplitz images: %.3e", d);
    }
    /* the regulariser smooths: R's quadratic form falls as lambda grows */
    printf("  roughness sum |D x|^2: lambda 0: %.1f, 0.05: %.1f, 2: %.1f\n", rough[4], rough[5],
           rough[6]);
    CHECK(rough[5] < rough[4]);
    CHECK(rough[6] < 0.5 * rough[5]);
    /* on the GPU, the same images as the CPU backend within the kernels' float accuracy: the
     * GPU operator differs from the CPU's by the float sums (<= 1e-4 relative, mri.h; measured
     * 1e-5 to 2e-5) and the float FFT (~1e-6); CG in double on both sides, so the images differ
     * by that operator error amplified by the solve, bounded by the system's conditioning on the
     * Krylov space. Measured on the H100: 1.3e-5 to 4.5e-5 over the eight cases (deterministic
     * data and kernels); the bound keeps a 10x margin. */
    if (ctx != g_ref) {
        for (int i = 0; i < 8; i++) {
            size_t n = voxels(cs[i].dims, cs[i].size);
            float *cpu;
            double d;
            run_recon(g_ref, &cs[i], &cpu);
            d = grove_mri_nrmse(img[i], cpu, n);
            printf("  CUDA vs CPU image, case %d: rel. L2 %.2e\n", i, d);
            CHECK_MSG(d < 5e-4, "CUDA vs CPU image, case %d: %.3e", i, d);
            free(cpu);
        }
    }
    for (int i = 0; i < 8; i++) free(img[i]);
}

/* ---- the GPU solver against the CPU's: stopping rules, out of memory, time ---- */

static int stop_at_3(void *user, int iter, int max_iters, double residual)
{
    (void)user;
    (void)max_iters;
    (void)residual;
    return iter >= 3;
}

static grove_mri_acq *make_acq(grove_ctx *ctx, int dims, int size, grove_mri_trajectory traj)
{
    grove_mri_phantom_opts o;
    grove_mri_acq *a = NULL;
    grove_mri_phantom_default_opts(&o);
    o.dims = dims;
    o.size = size;
    o.traj = traj;
    CHECK_OK(ctx, grove_mri_phantom(ctx, &o, &a));
    return a;
}

static void test_cuda_solver(grove_ctx *ctx)
{
    grove_mri_acq *a = make_acq(g_ref, 2, 64, GROVE_MRI_TRAJ_RADIAL);
    size_t n = voxels(2, 64);
    float *img = (float *)tu_malloc(4 * n * sizeof(float));
    grove_mri_recon_opts ro;
    grove_mri_recon_stats sg, sc;
    if (!a) {
        free(img);
        return;
    }
    /* stopping on tol: the residuals agree to the operator's float error, so the iteration that
     * crosses tol is the same, or one off where a residual sits within that error of tol */
    for (int f = 0; f < 2; f++) {
        grove_mri_recon_default_opts(&ro);
        ro.fhf = f ? GROVE_MRI_FHF_TOEPLITZ : GROVE_MRI_FHF_EXACT;
        ro.max_iters = 50;
        ro.tol = 1e-2;
        ro.lambda = f ? 0.05 : 0;
        CHECK_OK(ctx, grove_mri_recon(ctx, a, &ro, img, img + n, &sg));
        CHECK_OK(g_ref, grove_mri_recon(g_ref, a, &ro, img + 2 * n, img + 3 * n, &sc));
        printf("  tol 1e-2, %s, lambda %g: CUDA %d iters (residual %.4e), CPU %d (%.4e), "
               "images rel. L2 %.2e\n",
               f ? "Toeplitz" : "exact", ro.lambda, sg.iters, sg.residual, sc.iters, sc.residual,
               grove_mri_nrmse(img, img + 2 * n, n));
        CHECK(sg.iters >= 1 && sg.iters < 50 && sg.residual <= 1e-2);
        CHECK_MSG(abs(sg.iters - sc.iters) <= 1, "iterations CUDA %d, CPU %d", sg.iters, sc.iters);
        CHECK_MSG(fabs(sg.residual - sc.residual) < 5e-2 * sc.residual || sg.iters != sc.iters,
                  "residuals CUDA %.6e, CPU %.6e", sg.residual, sc.residual);
        CHECK(sg.setup_seconds > 0 && sg.seconds_per_iter > 0);
    }
    /* the progress callback stops the solve */
    grove_mri_recon_default_opts(&ro);
    ro.progress = stop_at_3;
    CHECK_OK(ctx, grove_mri_recon(ctx, a, &ro, img, img + n, &sg));
    CHECK(sg.iters == 3);
    /* max_iters 0: the zero image */
    ro.progress = NULL;
    ro.max_iters = 0;
    for (size_t i = 0; i < 2 * n; i++) img[i] = 1;
    CHECK_OK(ctx, grove_mri_recon(ctx, a, &ro, img, img + n, &sg));
    CHECK(sg.iters == 0 && sg.residual == 1);
    for (size_t i = 0; i < 2 * n; i++) CHECK(img[i] == 0);
    grove_mri_acq_free(a);
    free(img);

    /* out of device memory at every size up to what the solve needs: the error, and nothing
     * held afterwards; then a solve that fits on the same context still works */
    {
        grove_ctx_opts co;
        grove_ctx *small = NULL;
        grove_mri_acq *big = make_acq(g_ref, 2, 128, GROVE_MRI_TRAJ_RADIAL);
        grove_mri_acq *tiny = make_acq(g_ref, 2, 16, GROVE_MRI_TRAJ_SPIRAL);
        size_t nb = voxels(2, 128);
        float *ib = (float *)tu_malloc(2 * nb * sizeof(float));
        grove_ctx_default_opts(&co);
        co.device_mem_limit = (size_t)1 << 20;
        if (big && tiny && tu_cuda_ctx("test_mri_recon", &co, &small) == 0) {
            for (int f = 0; f < 2; f++) {
                grove_mri_recon_default_opts(&ro);
                ro.fhf = f ? GROVE_MRI_FHF_TOEPLITZ : GROVE_MRI_FHF_EXACT;
                ro.max_iters = 2;
                CHECK_STATUS(small, grove_mri_recon(small, big, &ro, ib, ib + nb, NULL),
                             GROVE_ERR_DEVICE_OUT_OF_MEMORY);
                CHECK_MSG(small->dev_in_use == 0, "%zu bytes held after out of memory",
                          small->dev_in_use);
                CHECK_STATUS(
                    small,
                    grove__mri_normal_apply(small, big, ro.fhf, 0.1, ib, ib + nb, ib, ib + nb),
                    GROVE_ERR_DEVICE_OUT_OF_MEMORY);
                CHECK(small->dev_in_use == 0);
                CHECK_OK(small, grove_mri_recon(small, tiny, &ro, ib, ib + nb, &sg));
                CHECK(sg.iters == 2 && small->dev_in_use == 0);
            }
            /* limits from 16 KiB up, 2-D radial 32 (about 0.3 MiB in all): each run fails at
             * a later allocation (the module's sums, cuFFT's work area) or succeeds */
            {
                grove_mri_acq *mid = make_acq(g_ref, 2, 32, GROVE_MRI_TRAJ_RADIAL);
                int fails = 0, oks = 0;
                for (size_t lim = (size_t)16 << 10; mid && lim <= ((size_t)2 << 20);
                     lim += lim / 4) {
                    grove_ctx *c2 = NULL;
                    co.device_mem_limit = lim;
                    if (tu_cuda_ctx("test_mri_recon", &co, &c2) != 0) break;
                    for (int f = 0; f < 2; f++) {
                        grove_status st;
                        grove_mri_recon_default_opts(&ro);
                        ro.fhf = f ? GROVE_MRI_FHF_TOEPLITZ : GROVE_MRI_FHF_EXACT;
                        ro.max_iters = 2;
                        st = grove_mri_recon(c2, mid, &ro, ib, ib + nb, &sg);
                        if (st == GROVE_OK) {
                            oks++;
                            CHECK(sg.iters == 2);
                        } else {
                            fails++;
                            CHECK_MSG(st == GROVE_ERR_DEVICE_OUT_OF_MEMORY,
                                      "limit %zu: status %d (%s)", lim, (int)st,
                                      grove_ctx_last_error(c2));
                        }
                        CHECK_MSG(c2->dev_in_use == 0, "limit %zu: %zu bytes held", lim,
                                  c2->dev_in_use);
                    }
                    grove_ctx_destroy(c2);
                }
                printf("  device_mem_limit 16 KiB .. 2 MiB, 2-D radial 32: %d out of memory, %d "
                       "solved, no bytes held after any\n",
                       fails, oks);
                CHECK(fails >= 4 && oks >= 2);
                grove_mri_acq_free(mid);
            }
        }
        grove_ctx_destroy(small);
        grove_mri_acq_free(big);
        grove_mri_acq_free(tiny);
        free(ib);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median seconds per iteration (and setup) of `reps` solves, after one warm-up solve. */
static void time_recon(grove_ctx *ctx, const grove_mri_acq *a, grove_mri_fhf fhf, int iters,
                       int reps, double *per_iter, double *setup)
{
    size_t n = voxels(a->dims, a->size);
    float *img = (float *)tu_malloc(2 * n * sizeof(float));
    double t[32], su[32];
    grove_mri_recon_opts ro;
    grove_mri_recon_stats st;
    grove_mri_recon_default_opts(&ro);
    ro.fhf = fhf;
    ro.max_iters = iters;
    ro.tol = 0;
    if (reps > 32) reps = 32;
    CHECK_OK(ctx, grove_mri_recon(ctx, a, &ro, img, img + n, &st));
    for (int r = 0; r < reps; r++) {
        CHECK_OK(ctx, grove_mri_recon(ctx, a, &ro, img, img + n, &st));
        t[r] = st.seconds_per_iter;
        su[r] = st.setup_seconds;
    }
    qsort(t, (size_t)reps, sizeof(double), cmp_double);
    qsort(su, (size_t)reps, sizeof(double), cmp_double);
    *per_iter = t[reps / 2];
    *setup = su[reps / 2];
    free(img);
}

static void time_cuda(grove_ctx *ctx)
{
    static const struct {
        int dims, size;
        grove_mri_trajectory traj;
        grove_mri_fhf fhf;
        int gpu_iters, cpu_iters, cpu_reps; /* cpu_reps 0: not timed on the CPU */
    } cs[] = {
        {2, 128, GROVE_MRI_TRAJ_RADIAL, GROVE_MRI_FHF_TOEPLITZ, 20, 20, 3},
        {2, 128, GROVE_MRI_TRAJ_RADIAL, GROVE_MRI_FHF_EXACT, 20, 2, 1},
        {3, 64, GROVE_MRI_TRAJ_STACK, GROVE_MRI_FHF_TOEPLITZ, 20, 0, 0},
        {3, 64, GROVE_MRI_TRAJ_STACK, GROVE_MRI_FHF_EXACT, 3, 0, 0},
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        grove_mri_acq *a = make_acq(g_ref, cs[c].dims, cs[c].size, cs[c].traj);
        double g_it = 0, g_su = 0, c_it = 0, c_su = 0;
        if (!a) continue;
        time_recon(ctx, a, cs[c].fhf, cs[c].gpu_iters, 11, &g_it, &g_su);
        if (cs[c].cpu_reps)
            time_recon(g_ref, a, cs[c].fhf, cs[c].cpu_iters, cs[c].cpu_reps, &c_it, &c_su);
        printf("  time %d-D %-6s %3d, %7zu samples, %-8s: GPU %.3e s/iter (setup %.3f s), ",
               cs[c].dims, traj_name(cs[c].traj), cs[c].size, a->num_k,
               cs[c].fhf == GROVE_MRI_FHF_EXACT ? "exact" : "toeplitz", g_it, g_su);
        if (cs[c].cpu_reps)
            printf("CPU %.3e s/iter (setup %.3f s): %.0fx\n", c_it, c_su, c_it / g_it);
        else
            printf("CPU not timed (its setup alone takes minutes)\n");
        grove_mri_acq_free(a);
    }
}

/* ---- the solver's arguments and inputs ---- */

static void test_bad_args(grove_ctx *ctx)
{
    grove_mri_phantom_opts o;
    grove_mri_recon_opts ro;
    grove_mri_acq *a = NULL, *none = NULL;
    float img[2 * 256];
    grove_mri_phantom_default_opts(&o);
    o.size = 7;
    CHECK_STATUS(ctx, grove_mri_phantom(ctx, &o, &none), GROVE_ERR_INVALID_ARG);
    o.size = 16;
    o.traj = GROVE_MRI_TRAJ_STACK;
    CHECK_STATUS(ctx, grove_mri_phantom(ctx, &o, &none), GROVE_ERR_INVALID_ARG);
    check_msg(ctx, "3-D only");
    o.traj = (grove_mri_trajectory)9;
    CHECK_STATUS(ctx, grove_mri_phantom(ctx, &o, &none), GROVE_ERR_INVALID_ARG);
    o.traj = GROVE_MRI_TRAJ_RADIAL;
    o.oversampling = NAN;
    CHECK_STATUS(ctx, grove_mri_phantom(ctx, &o, &none), GROVE_ERR_INVALID_ARG);
    o.oversampling = 1;
    o.dims = 4;
    CHECK_STATUS(ctx, grove_mri_phantom(ctx, &o, &none), GROVE_ERR_INVALID_ARG);
    CHECK(none == NULL);
    CHECK_STATUS(NULL, grove_mri_phantom_image(2, 0, img), GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(NULL, grove_mri_phantom_image(4, 8, img), GROVE_ERR_INVALID_ARG);

    o.dims = 2;
    CHECK_OK(ctx, grove_mri_phantom(ctx, &o, &a));
    if (!a) return;
    grove_mri_recon_default_opts(&ro);
    CHECK(ro.max_iters == 20 && ro.tol == 1e-6 && ro.lambda == 0 &&
          ro.fhf == GROVE_MRI_FHF_TOEPLITZ && ro.progress == NULL);
    CHECK_STATUS(ctx, grove_mri_recon(ctx, NULL, &ro, img, img + 256, NULL), GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(ctx, grove_mri_recon(ctx, a, &ro, NULL, img + 256, NULL), GROVE_ERR_INVALID_ARG);
    ro.lambda = -1;
    CHECK_STATUS(ctx, grove_mri_recon(ctx, a, &ro, img, img + 256, NULL), GROVE_ERR_INVALID_ARG);
    ro.lambda = 0;
    ro.max_iters = -1;
    CHECK_STATUS(ctx, grove_mri_recon(ctx, a, &ro, img, img + 256, NULL), GROVE_ERR_INVALID_ARG);
    ro.max_iters = 5;
    ro.fhf = (grove_mri_fhf)7;
    CHECK_STATUS(ctx, grove_mri_recon(ctx, a, &ro, img, img + 256, NULL), GROVE_ERR_INVALID_ARG);
    ro.fhf = GROVE_MRI_FHF_EXACT;
    a->dims = 1;
    CHECK_STATUS(ctx, grove_mri_recon(ctx, a, &ro, img, img + 256, NULL), GROVE_ERR_INVALID_ARG);
    a->dims = 2;
    /* bad values: BAD_INPUT naming the array and the element */
    {
        float keep = a->d_i[17];
        a->d_i[17] = NAN;
        CHECK_STATUS(ctx, grove_mri_recon(ctx, a, &ro, img, img + 256, NULL), GROVE_ERR_BAD_INPUT);
        check_msg(ctx, "d_i[17]");
        a->d_i[17] = keep;
        keep = a->kx[3];
        a->kx[3] = INFINITY;
        CHECK_STATUS(ctx, grove_mri_recon(ctx, a, &ro, img, img + 256, NULL), GROVE_ERR_BAD_INPUT);
        check_msg(ctx, "kx[3]");
        a->kx[3] = keep;
        keep = a->w[30];
        a->w[30] = -0.5f;
        CHECK_STATUS(ctx, grove_mri_recon(ctx, a, &ro, img, img + 256, NULL), GROVE_ERR_BAD_INPUT);
        check_msg(ctx, "w[30]");
        a->w[30] = keep;
    }
    /* all-zero data: the answer is the zero image, in no iterations */
    {
        grove_mri_recon_stats st;
        for (size_t j = 0; j < a->num_k; j++) a->d_r[j] = a->d_i[j] = 0;
        for (int i = 0; i < 512; i++) img[i] = 1;
        CHECK_OK(ctx, grove_mri_recon(ctx, a, &ro, img, img + 256, &st));
        CHECK(st.iters == 0 && st.residual == 0);
        for (int i = 0; i < 512; i++) CHECK(img[i] == 0);
    }
    grove_mri_acq_free(a);
}

int main(int argc, char **argv)
{
    tu_args args = {"cpu", 0, 20261122, NULL};
    grove_ctx_opts co;
    grove_ctx *ctx = NULL;
    tu_rng r;
    if (tu_parse_args(argc, argv, &args)) {
        fprintf(stderr, "usage: test_mri_recon [--backend cpu|cuda] [--seed S] [--only quick]\n");
        return 2;
    }
    r.s = args.seed;
    grove_ctx_default_opts(&co);
    co.backend = GROVE_BACKEND_CPU;
    CHECK_OK(g_ref, grove_ctx_create(&co, &g_ref));
    if (!strcmp(args.backend, "cuda")) {
        if (tu_cuda_ctx("test_mri_recon", NULL, &ctx) != 0) {
            grove_ctx_destroy(g_ref);
            return TEST_SKIP;
        }
    } else if (!strcmp(args.backend, "cpu")) {
        ctx = g_ref;
    } else {
        fprintf(stderr, "test_mri_recon: unknown backend '%s'\n", args.backend);
        return 2;
    }
    if (tu_failures) return tu_finish("test_mri_recon");

    snprintf(g_dir, sizeof g_dir, "%s/grove-mri-recon.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "test_mri_recon: cannot create a scratch directory\n");
        return 2;
    }
    if (ctx == g_ref) {
        /* files and arguments do not depend on the backend */
        test_nifti(ctx, &r);
        test_png(ctx, &r);
        test_ismrmrd(ctx);
        test_bad_args(ctx);
        test_weights(ctx);
        test_phantom_ft(ctx, 2, 512, 1e-4);
        test_phantom_ft(ctx, 3, 64, 1e-3);
    }
    test_operator(ctx, &r, 2, 16, GROVE_MRI_TRAJ_RADIAL, 0);
    test_operator(ctx, &r, 2, 17, GROVE_MRI_TRAJ_SPIRAL, 0.3);
    test_operator(ctx, &r, 3, 8, GROVE_MRI_TRAJ_STACK, 0.1);
    test_operator(ctx, &r, 3, 9, GROVE_MRI_TRAJ_RADIAL, 0);
    test_reconstructions(ctx);
    if (ctx != g_ref) {
        test_cuda_solver(ctx);
        if (!args.only || strcmp(args.only, "quick")) time_cuda(ctx);
    }
    cleanup_dir();
    if (ctx != g_ref) grove_ctx_destroy(ctx);
    grove_ctx_destroy(g_ref);
    return tu_finish("test_mri_recon");
}
