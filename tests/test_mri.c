/*
 * test_mri.c - the Q and FHD sums and the Parboil files of the mri module.
 *
 * Usage: test_mri [--backend cpu|cuda] [--seed S] [--quick]
 *
 * CPU (default): grove_mri_q and grove_mri_fhd against a direct sum written here in long double
 * (phases reduced in turns, sinl/cosl), on random data with |k| <= 64 and |x| <= 0.5 at sizes
 * around powers of two, 2-D and 3-D, with the relative L2 error printed and bounded (the CPU
 * backend sums in double: its only visible error is the final rounding to float); adversarial
 * inputs (equal positions, k = 0, 10^7 tiny samples, phases up to 2^250 turns), the exact
 * message for every non-finite value, invalid arguments, thread-count independence; the
 * Parboil reader on good and damaged files, and the output writer.
 *
 * --backend cuda: every kernel (auto, scatter, gather, constant, tiled, fast) against the CPU
 * backend, relative L2 error <= 1e-4 printed per kernel, at sizes around warp, block and tile
 * boundaries (1, 33, 1025, 4097, ...) and one medium case (num_k 20000, num_x 50000); exit 77
 * (skipped) where no GPU can be used. --quick keeps only the small sizes (for
 * compute-sanitizer).
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grove/mri.h"
#include "testutil.h"

#define PI_L 3.141592653589793238462643383279502884L
#define CUDA_TOL 1e-4

/* ---- data ---- */

typedef struct data {
    size_t nk, nx;
    int dims;
    float *kx, *ky, *kz, *pr, *pi, *dr, *di; /* kz NULL in 2-D */
    float *x, *y, *z;                        /* z NULL in 2-D */
} data;

static void data_alloc(data *d, size_t nk, size_t nx, int dims)
{
    memset(d, 0, sizeof *d);
    d->nk = nk;
    d->nx = nx;
    d->dims = dims;
    d->kx = (float *)tu_malloc(nk * sizeof(float));
    d->ky = (float *)tu_malloc(nk * sizeof(float));
    d->kz = dims == 3 ? (float *)tu_malloc(nk * sizeof(float)) : NULL;
    d->pr = (float *)tu_malloc(nk * sizeof(float));
    d->pi = (float *)tu_malloc(nk * sizeof(float));
    d->dr = (float *)tu_malloc(nk * sizeof(float));
    d->di = (float *)tu_malloc(nk * sizeof(float));
    d->x = (float *)tu_malloc(nx * sizeof(float));
    d->y = (float *)tu_malloc(nx * sizeof(float));
    d->z = dims == 3 ? (float *)tu_malloc(nx * sizeof(float)) : NULL;
}

/* |k| <= 64 per axis, |x| <= 0.5, values in [-1, 1) */
static void data_random(data *d, tu_rng *r, size_t nk, size_t nx, int dims)
{
    data_alloc(d, nk, nx, dims);
    for (size_t m = 0; m < nk; m++) {
        d->kx[m] = tu_f32(r, -64.0f, 64.0f);
        d->ky[m] = tu_f32(r, -64.0f, 64.0f);
        if (d->kz) d->kz[m] = tu_f32(r, -64.0f, 64.0f);
        d->pr[m] = tu_f32(r, -1.0f, 1.0f);
        d->pi[m] = tu_f32(r, -1.0f, 1.0f);
        d->dr[m] = tu_f32(r, -1.0f, 1.0f);
        d->di[m] = tu_f32(r, -1.0f, 1.0f);
    }
    for (size_t n = 0; n < nx; n++) {
        d->x[n] = tu_f32(r, -0.5f, 0.5f);
        d->y[n] = tu_f32(r, -0.5f, 0.5f);
        if (d->z) d->z[n] = tu_f32(r, -0.5f, 0.5f);
    }
}

static void data_free(data *d)
{
    free(d->kx);
    free(d->ky);
    free(d->kz);
    free(d->pr);
    free(d->pi);
    free(d->dr);
    free(d->di);
    free(d->x);
    free(d->y);
    free(d->z);
    memset(d, 0, sizeof *d);
}

static grove_mri_samples samples_of(const data *d)
{
    grove_mri_samples k;
    k.num_k = d->nk;
    k.kx = d->kx;
    k.ky = d->ky;
    k.kz = d->kz;
    k.phi_r = d->pr;
    k.phi_i = d->pi;
    k.d_r = d->dr;
    k.d_i = d->di;
    return k;
}

static grove_mri_voxels voxels_of(const data *d)
{
    grove_mri_voxels v;
    v.num_x = d->nx;
    v.x = d->x;
    v.y = d->y;
    v.z = d->z;
    return v;
}

/* ---- the reference: a direct sum in long double ---- */

typedef struct ref {
    long double *qr, *qi, *fr, *fi; /* Q and FHD */
    long double wq, wf;             /* sums of |weights|: the scale of rounding errors */
} ref;

/* Q and FHD of voxels [n0, n1) (both from the same trigonometry). The phase is reduced in turns
 * in long double (the products of floats and their sum are exact or nearly so), so the angle
 * given to sinl and cosl is in [-pi, pi]. */
static void ref_sum(const data *d, size_t n0, size_t n1, ref *o)
{
    o->wq = o->wf = 0.0L;
    for (size_t m = 0; m < d->nk; m++) {
        long double pr = d->pr[m], pi = d->pi[m], dr = d->dr[m], di = d->di[m];
        o->wq += pr * pr + pi * pi;
        o->wf += fabsl(pr * dr + pi * di) + fabsl(pr * di - pi * dr);
    }
    for (size_t n = n0; n < n1; n++) {
        long double qr = 0, qi = 0, fr = 0, fi = 0;
        for (size_t m = 0; m < d->nk; m++) {
            long double t = (long double)d->kx[m] * d->x[n] + (long double)d->ky[m] * d->y[n];
            long double pr = d->pr[m], pi = d->pi[m], dr = d->dr[m], di = d->di[m];
            long double mag = pr * pr + pi * pi, rmu = pr * dr + pi * di, imu = pr * di - pi * dr;
            long double c, s;
            if (d->kz) t += (long double)d->kz[m] * d->z[n];
            t -= nearbyintl(t);
            c = cosl(2.0L * PI_L * t);
            s = sinl(2.0L * PI_L * t);
            qr += mag * c;
            qi += mag * s;
            fr += rmu * c - imu * s;
            fi += imu * c + rmu * s;
        }
        o->qr[n] = qr;
        o->qi[n] = qi;
        o->fr[n] = fr;
        o->fi[n] = fi;
    }
}

static void ref_alloc(ref *o, size_t nx)
{
    o->qr = (long double *)tu_malloc(nx * sizeof(long double));
    o->qi = (long double *)tu_malloc(nx * sizeof(long double));
    o->fr = (long double *)tu_malloc(nx * sizeof(long double));
    o->fi = (long double *)tu_malloc(nx * sizeof(long double));
}

static void ref_free(ref *o)
{
    free(o->qr);
    free(o->qi);
    free(o->fr);
    free(o->fi);
}

/* Relative L2 error of (a_r, a_i) against the reference; counts elements farther than a
 * float's rounding (half an ulp, 2^-24 relative) plus the double sum's error from it. */
static double rel_err_ref(const float *ar, const float *ai, const long double *rr,
                          const long double *ri, size_t n, long double w, size_t *bad)
{
    long double e2 = 0, r2 = 0;
    *bad = 0;
    for (size_t i = 0; i < n; i++) {
        long double er = (long double)ar[i] - rr[i], ei = (long double)ai[i] - ri[i];
        long double tol_r = fabsl(rr[i]) * 0x1p-24L + w * 1e-13L + FLT_TRUE_MIN;
        long double tol_i = fabsl(ri[i]) * 0x1p-24L + w * 1e-13L + FLT_TRUE_MIN;
        e2 += er * er + ei * ei;
        r2 += rr[i] * rr[i] + ri[i] * ri[i];
        if (fabsl(er) > tol_r || fabsl(ei) > tol_i || isnan(ar[i]) || isnan(ai[i])) (*bad)++;
    }
    if (r2 == 0) return e2 == 0 ? 0.0 : INFINITY;
    return (double)sqrtl(e2 / r2);
}

/* Relative L2 error of (a_r, a_i) against (b_r, b_i), in double. */
static double rel_err(const float *ar, const float *ai, const float *br, const float *bi, size_t n)
{
    double e2 = 0, r2 = 0;
    for (size_t i = 0; i < n; i++) {
        double er = (double)ar[i] - br[i], ei = (double)ai[i] - bi[i];
        e2 += er * er + ei * ei;
        r2 += (double)br[i] * br[i] + (double)bi[i] * bi[i];
    }
    if (isnan(e2)) return NAN;
    if (r2 == 0) return e2 == 0 ? 0.0 : INFINITY;
    return sqrt(e2 / r2);
}

static grove_ctx *cpu_ctx(int threads)
{
    grove_ctx_opts o;
    grove_ctx *ctx = NULL;
    grove_ctx_default_opts(&o);
    o.backend = GROVE_BACKEND_CPU;
    o.num_threads = threads;
    if (grove_ctx_create(&o, &ctx) != GROVE_OK) {
        fprintf(stderr, "test_mri: cannot create a CPU context\n");
        exit(2);
    }
    return ctx;
}

static int msg_is(grove_ctx *ctx, const char *want)
{
    const char *got = grove_ctx_last_error(ctx);
    if (strcmp(got, want) == 0) return 1;
    fprintf(stderr, "  message: got \"%s\"\n           want \"%s\"\n", got, want);
    return 0;
}

static int msg_has(grove_ctx *ctx, const char *part)
{
    const char *got = grove_ctx_last_error(ctx);
    if (strstr(got, part)) return 1;
    fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", got, part);
    return 0;
}

/* ================================ CPU: accuracy ================================ */

static double worst_cpu = 0.0;

/* One random case through the library (Q and FHD) against the long double sum. */
static void cpu_case(grove_ctx *ctx, tu_rng *r, size_t nk, size_t nx, int dims, int print)
{
    data d;
    ref o;
    grove_mri_samples k;
    grove_mri_voxels v;
    float *qr, *qi, *fr, *fi;
    size_t bq, bf;
    double eq, ef;

    data_random(&d, r, nk, nx, dims);
    k = samples_of(&d);
    v = voxels_of(&d);
    qr = (float *)tu_malloc(nx * sizeof(float));
    qi = (float *)tu_malloc(nx * sizeof(float));
    fr = (float *)tu_malloc(nx * sizeof(float));
    fi = (float *)tu_malloc(nx * sizeof(float));
    for (size_t n = 0; n < nx; n++) qr[n] = qi[n] = fr[n] = fi[n] = NAN; /* must be written */
    ref_alloc(&o, nx);
    ref_sum(&d, 0, nx, &o);
    CHECK_OK(ctx, grove_mri_q(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, qr, qi));
    CHECK_OK(ctx, grove_mri_fhd(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, fr, fi));
    eq = rel_err_ref(qr, qi, o.qr, o.qi, nx, o.wq, &bq);
    ef = rel_err_ref(fr, fi, o.fr, o.fi, nx, o.wf, &bf);
    if (print)
        printf("  cpu %d-D num_k %6zu num_x %6zu: rel L2 error Q %.3g, FHD %.3g\n", dims, nk, nx,
               eq, ef);
    /* float rounding alone is at most 2^-24 = 6e-8 relative, element by element */
    CHECK_MSG(eq <= 1e-7 && ef <= 1e-7, "%d-D num_k %zu num_x %zu: rel L2 error Q %.3g FHD %.3g",
              dims, nk, nx, eq, ef);
    CHECK_MSG(bq == 0 && bf == 0,
              "%d-D num_k %zu num_x %zu: %zu (Q) and %zu (FHD) voxels beyond float rounding", dims,
              nk, nx, bq, bf);
    if (nk == 0)
        for (size_t n = 0; n < nx; n++) CHECK(qr[n] == 0 && qi[n] == 0 && fr[n] == 0 && fi[n] == 0);
    if (eq > worst_cpu) worst_cpu = eq;
    if (ef > worst_cpu) worst_cpu = ef;
    ref_free(&o);
    free(qr);
    free(qi);
    free(fr);
    free(fi);
    data_free(&d);
}

static void test_cpu_sizes(grove_ctx *ctx, tu_rng *r)
{
    static const size_t sizes[] = {0, 1, 31, 32, 33, 255, 256, 257, 1000};
    const int ns = (int)(sizeof sizes / sizeof sizes[0]);
    printf("CPU against a long double direct sum (every num_k x num_x of {0 .. 1000})\n");
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < ns; j++)
            cpu_case(ctx, r, sizes[i], sizes[j], (i + j) % 2 ? 2 : 3,
                     sizes[i] >= 255 && sizes[j] >= 255);
    cpu_case(ctx, r, 2049, 1500, 3, 1);
    cpu_case(ctx, r, 1500, 2049, 2, 1);
    cpu_case(ctx, r, 4097, 700, 3, 1);
    printf("  worst relative L2 error: %.3g\n", worst_cpu);
}

/* The result does not depend on the number of threads (bit for bit). */
static void test_cpu_threads(tu_rng *r)
{
    data d;
    grove_mri_samples k;
    grove_mri_voxels v;
    float *a[4][2];
    const int threads[4] = {1, 2, 3, 7};
    data_random(&d, r, 1531, 3001, 3);
    k = samples_of(&d);
    v = voxels_of(&d);
    for (int t = 0; t < 4; t++) {
        grove_ctx *c = cpu_ctx(threads[t]);
        a[t][0] = (float *)tu_malloc(d.nx * sizeof(float));
        a[t][1] = (float *)tu_malloc(d.nx * sizeof(float));
        CHECK_OK(c, grove_mri_fhd(c, &k, &v, GROVE_MRI_KERNEL_AUTO, a[t][0], a[t][1]));
        grove_ctx_destroy(c);
        if (t > 0)
            CHECK_MSG(!memcmp(a[t][0], a[0][0], d.nx * sizeof(float)) &&
                          !memcmp(a[t][1], a[0][1], d.nx * sizeof(float)),
                      "FHD on %d threads differs from 1 thread", threads[t]);
    }
    for (int t = 0; t < 4; t++) {
        free(a[t][0]);
        free(a[t][1]);
    }
    data_free(&d);
}

/* ================================ CPU: adversarial ================================ */

/* Every voxel at one place, every sample at one place: every output equal, and right. */
static void test_equal_positions(grove_ctx *ctx, tu_rng *r)
{
    data d;
    ref o;
    grove_mri_samples k;
    grove_mri_voxels v;
    size_t nx = 300, bad;
    float *qr = (float *)tu_malloc(nx * sizeof(float)), *qi = (float *)tu_malloc(nx * 4);
    data_random(&d, r, 777, nx, 3);
    for (size_t m = 0; m < d.nk; m++) {
        d.kx[m] = 17.25f;
        d.ky[m] = -3.5f;
        d.kz[m] = 63.0f;
    }
    for (size_t n = 0; n < nx; n++) {
        d.x[n] = 0.123f;
        d.y[n] = -0.5f;
        d.z[n] = 0.3f;
    }
    k = samples_of(&d);
    v = voxels_of(&d);
    ref_alloc(&o, nx);
    ref_sum(&d, 0, nx, &o);
    CHECK_OK(ctx, grove_mri_q(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, qr, qi));
    CHECK(rel_err_ref(qr, qi, o.qr, o.qi, nx, o.wq, &bad) <= 1e-7 && bad == 0);
    for (size_t n = 1; n < nx; n++) CHECK(qr[n] == qr[0] && qi[n] == qi[0]);
    ref_free(&o);
    data_free(&d);
    free(qr);
    free(qi);
}

/* k = 0: Q is the sum of |phi|^2 with an imaginary part of exactly 0; FHD the sum of Mu. */
static void test_k_zero(grove_ctx *ctx, tu_rng *r)
{
    data d;
    grove_mri_samples k;
    grove_mri_voxels v;
    size_t nx = 65;
    long double sq = 0, sr = 0, si = 0;
    float qr[65], qi[65], fr[65], fi[65];
    data_random(&d, r, 1234, nx, 3);
    for (size_t m = 0; m < d.nk; m++) {
        long double pr = d.pr[m], pi = d.pi[m], dr = d.dr[m], di = d.di[m];
        d.kx[m] = d.ky[m] = d.kz[m] = 0.0f;
        sq += pr * pr + pi * pi;
        sr += pr * dr + pi * di;
        si += pr * di - pi * dr;
    }
    k = samples_of(&d);
    v = voxels_of(&d);
    CHECK_OK(ctx, grove_mri_q(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, qr, qi));
    CHECK_OK(ctx, grove_mri_fhd(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, fr, fi));
    for (size_t n = 0; n < nx; n++) {
        CHECK_MSG(qi[n] == 0.0f && qr[n] == (float)sq,
                  "voxel %zu: Q = (%.9g, %.9g), want (%.9g, 0)", n, qr[n], qi[n], (double)sq);
        CHECK_MSG(fabsl(fr[n] - sr) <= fabsl(sr) * 0x1p-24L + 1e-12L &&
                      fabsl(fi[n] - si) <= fabsl(si) * 0x1p-24L + 1e-12L,
                  "voxel %zu: FHD = (%.9g, %.9g), want (%.9Lg, %.9Lg)", n, fr[n], fi[n], sr, si);
    }
    data_free(&d);
}

/* 10^7 samples of tiny weight (|phi|^2 ~ 1e-40, below float's normal range): the double sum
 * keeps them all; a float sum would lose them or underflow. Reference: the same sum in long
 * double with the C library's double sin and cos of the reduced phase (10^7 sinl would be slow). */
static void test_huge_num_k(grove_ctx *ctx, tu_rng *r, size_t nk)
{
    data d;
    grove_mri_samples k;
    grove_mri_voxels v;
    float qr[2], qi[2];
    double e2 = 0, r2 = 0, rel;
    data_alloc(&d, nk, 2, 2);
    for (size_t m = 0; m < nk; m++) {
        d.kx[m] = tu_f32(r, -64.0f, 64.0f);
        d.ky[m] = tu_f32(r, -64.0f, 64.0f);
        d.pr[m] = tu_f32(r, 0.5f, 1.0f) * 1e-20f;
        d.pi[m] = tu_f32(r, -1.0f, 1.0f) * 1e-20f;
        d.dr[m] = d.di[m] = 0.0f;
    }
    d.x[0] = 0.0f; /* every phase 0: Q = sum |phi|^2 exactly */
    d.y[0] = 0.0f;
    d.x[1] = 0.3f;
    d.y[1] = -0.41f;
    k = samples_of(&d);
    v = voxels_of(&d);
    CHECK_OK(ctx, grove_mri_q(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, qr, qi));
    for (size_t n = 0; n < 2; n++) {
        long double sr = 0, si = 0;
        for (size_t m = 0; m < nk; m++) {
            long double t = (long double)d.kx[m] * d.x[n] + (long double)d.ky[m] * d.y[n];
            long double mag = (long double)d.pr[m] * d.pr[m] + (long double)d.pi[m] * d.pi[m];
            double a = (double)(2.0L * PI_L * (t - nearbyintl(t)));
            sr += mag * cos(a);
            si += mag * sin(a);
        }
        {
            double en = (double)((qr[n] - sr) * (qr[n] - sr) + (qi[n] - si) * (qi[n] - si));
            double rn = (double)(sr * sr + si * si);
            CHECK_MSG(en <= rn * 1e-14, "huge num_k: voxel %zu: rel error %.3g", n, sqrt(en / rn));
            e2 += en;
            r2 += rn;
        }
        if (n == 0) CHECK(qi[0] == 0.0f);
    }
    rel = sqrt(e2 / r2);
    printf("  cpu num_k %zu tiny values (|phi|^2 ~ 1e-40): Q = (%.6g, %.6g), rel L2 error %.3g\n",
           nk, qr[0], qi[0], rel);
    CHECK_MSG(rel <= 1e-7, "huge num_k: rel L2 error %.3g", rel);
    data_free(&d);
}

/* Phases far beyond |k| <= 64: num_k = 1, phi = 1, so Q[n] = (cos, sin)(2 pi kx x_n) with the
 * product exact in double; up to about 2^250 turns (a double beyond 2^52 is an integer). The
 * result must be the float rounding of the exact value: within one float ulp of it. */
static void test_phase_range(grove_ctx *ctx, tu_rng *r)
{
    enum { NX = 64 };
    float x[NX], qr[NX], qi[NX];
    float kx, ky = 0.0f, one = 1.0f, zero = 0.0f;
    grove_mri_samples k;
    grove_mri_voxels v;
    int bad = 0;
    double tmax = 0;
    memset(&k, 0, sizeof k);
    k.num_k = 1;
    k.kx = &kx;
    k.ky = &ky;
    k.phi_r = &one;
    k.phi_i = &zero;
    v.num_x = NX;
    v.x = x;
    v.y = x;
    v.z = NULL;
    for (int e = -10; e <= 125; e++) {
        kx = ldexpf(tu_f32(r, 1.0f, 2.0f), e) * ((e & 1) ? -1.0f : 1.0f);
        ky = 0.0f;
        for (int n = 0; n < NX; n++) {
            /* quarter and eighth turns, halves, and random fractions */
            x[n] = n < 8 ? ldexpf((float)(n + 1), -3 - (e > 0 ? e : 0))
                         : ldexpf(tu_f32(r, -1.0f, 1.0f), (int)(tu_u32(r) % 158) - 30);
        }
        /* y = x but ky = 0: the phase is kx * x exactly */
        CHECK_OK(ctx, grove_mri_q(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, qr, qi));
        for (int n = 0; n < NX; n++) {
            long double t = (long double)kx * x[n], c, s;
            float fc, fs;
            t -= nearbyintl(t);
            c = cosl(2.0L * PI_L * t);
            s = sinl(2.0L * PI_L * t);
            if (fabs((double)kx * x[n]) > tmax) tmax = fabs((double)kx * x[n]);
            fc = (float)c;
            fs = (float)s;
            if (fabsf(qr[n] - fc) > FLT_EPSILON * 0.5f || fabsf(qi[n] - fs) > FLT_EPSILON * 0.5f) {
                if (bad++ < 5)
                    FAIL("phase %.17g turns: Q = (%.9g, %.9g), want (%.9g, %.9g)",
                         (double)kx * x[n], qr[n], qi[n], fc, fs);
            }
        }
    }
    printf("  cpu phases up to %.3g turns: %d wrong\n", tmax, bad);
}

/* ================================ CPU: checks ================================ */

static const char *array_names[] = {"kx",  "ky",  "kz", "phi_r", "phi_i",
                                    "d_r", "d_i", "x",  "y",     "z"};

static float *array_of(data *d, int i)
{
    float *a[] = {d->kx, d->ky, d->kz, d->pr, d->pi, d->dr, d->di, d->x, d->y, d->z};
    return a[i];
}

static void test_non_finite(grove_ctx *ctx, tu_rng *r, size_t nk, size_t nx, size_t at)
{
    data d;
    static const char *fns[] = {"grove_mri_q", "grove_mri_fhd"};
    char want[200];
    float *or_ = (float *)tu_malloc(nx * sizeof(float)), *oi_ = (float *)tu_malloc(nx * 4);
    data_random(&d, r, nk, nx, 3);
    for (int a = 0; a < 10; a++) {
        float *arr = array_of(&d, a);
        size_t len = a < 7 ? nk : nx;
        for (int kind = 0; kind < 3; kind++) {
            static const char *kname[] = {"NaN", "+Inf", "-Inf"};
            float bad = kind == 0 ? NAN : (kind == 1 ? INFINITY : -INFINITY);
            float keep_a = arr[at], keep_b = arr[len - 1];
            grove_mri_samples k = samples_of(&d);
            grove_mri_voxels v = voxels_of(&d);
            /* two bad values: the message names the first */
            arr[len - 1] = NAN;
            arr[at] = bad;
            for (int f = 0; f < 2; f++) {
                grove_status s;
                if (!f && (a == 5 || a == 6) && (double)nk * (double)nx > 1e6) continue;
                s = f ? grove_mri_fhd(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, or_, oi_)
                      : grove_mri_q(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, or_, oi_);
                if (!f && (a == 5 || a == 6)) {
                    /* Q does not read the data */
                    CHECK_MSG(s == GROVE_OK, "Q with a bad %s: %s", array_names[a],
                              grove_ctx_last_error(ctx));
                    continue;
                }
                snprintf(want, sizeof want, "%s: %s[%zu] is %s", fns[f], array_names[a], at,
                         kname[kind]);
                CHECK_MSG(s == GROVE_ERR_BAD_INPUT && msg_is(ctx, want), "status %d, want \"%s\"",
                          (int)s, want);
            }
            arr[at] = keep_a;
            arr[len - 1] = keep_b;
        }
    }
    free(or_);
    free(oi_);
    data_free(&d);
}

static void test_invalid(grove_ctx *ctx, tu_rng *r)
{
    data d;
    grove_mri_samples k, k0;
    grove_mri_voxels v, v0;
    float outr[40], outi[40];
    grove_mri_kernel kk;
    data_random(&d, r, 40, 40, 3);
    k = samples_of(&d);
    v = voxels_of(&d);

    CHECK_STATUS(NULL, grove_mri_q(NULL, &k, &v, GROVE_MRI_KERNEL_AUTO, outr, outi),
                 GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(ctx, grove_mri_q(ctx, NULL, &v, GROVE_MRI_KERNEL_AUTO, outr, outi),
                 GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(ctx, grove_mri_fhd(ctx, &k, NULL, GROVE_MRI_KERNEL_AUTO, outr, outi),
                 GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(ctx, grove_mri_q(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, NULL, outi),
                 GROVE_ERR_INVALID_ARG);
    CHECK(msg_has(ctx, "out_r is NULL"));
    CHECK_STATUS(ctx, grove_mri_q(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, outr, NULL),
                 GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(ctx, grove_mri_q(ctx, &k, &v, (grove_mri_kernel)6, outr, outi),
                 GROVE_ERR_INVALID_ARG);
    CHECK(msg_has(ctx, "kernel 6"));
    CHECK_STATUS(ctx, grove_mri_fhd(ctx, &k, &v, (grove_mri_kernel)-1, outr, outi),
                 GROVE_ERR_INVALID_ARG);
    /* a NULL array with num > 0: each one named */
    {
        const float **kp[] = {&k.kx, &k.ky, &k.phi_r, &k.phi_i, &k.d_r, &k.d_i};
        const char *kn[] = {"k->kx", "k->ky", "k->phi_r", "k->phi_i", "k->d_r", "k->d_i"};
        for (int i = 0; i < 6; i++) {
            const float *keep = *kp[i];
            *kp[i] = NULL;
            CHECK_STATUS(ctx, grove_mri_fhd(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, outr, outi),
                         GROVE_ERR_INVALID_ARG);
            CHECK(msg_has(ctx, kn[i]));
            if (i >= 4) /* Q does not need the data */
                CHECK_OK(ctx, grove_mri_q(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, outr, outi));
            else
                CHECK_STATUS(ctx, grove_mri_q(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, outr, outi),
                             GROVE_ERR_INVALID_ARG);
            *kp[i] = keep;
        }
        v.x = NULL;
        CHECK_STATUS(ctx, grove_mri_q(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, outr, outi),
                     GROVE_ERR_INVALID_ARG);
        CHECK(msg_has(ctx, "v->x is NULL"));
        v.x = d.x;
        v.y = NULL;
        CHECK_STATUS(ctx, grove_mri_q(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, outr, outi),
                     GROVE_ERR_INVALID_ARG);
        v.y = d.y;
    }
    /* every other kernel is the CUDA backend's */
    if (grove_ctx_backend(ctx) == GROVE_BACKEND_CPU) {
        for (int kern = 1; kern <= 5; kern++) {
            CHECK_STATUS(ctx, grove_mri_q(ctx, &k, &v, (grove_mri_kernel)kern, outr, outi),
                         GROVE_ERR_UNSUPPORTED);
            CHECK(msg_has(ctx, grove_mri_kernel_name((grove_mri_kernel)kern)));
        }
    }
    /* empty inputs: NULL arrays are fine; num_k = 0 writes zeros; num_x = 0 writes nothing */
    memset(&k0, 0, sizeof k0);
    memset(&v0, 0, sizeof v0);
    CHECK_OK(ctx, grove_mri_fhd(ctx, &k0, &v0, GROVE_MRI_KERNEL_AUTO, NULL, NULL));
    CHECK_OK(ctx, grove_mri_q(ctx, &k, &v0, GROVE_MRI_KERNEL_AUTO, NULL, NULL));
    for (int i = 0; i < 40; i++) outr[i] = outi[i] = NAN;
    CHECK_OK(ctx, grove_mri_fhd(ctx, &k0, &v, GROVE_MRI_KERNEL_AUTO, outr, outi));
    for (int i = 0; i < 40; i++) CHECK(outr[i] == 0.0f && outi[i] == 0.0f);

    /* names */
    for (int i = 0; i <= 5; i++) {
        const char *nm = grove_mri_kernel_name((grove_mri_kernel)i);
        CHECK(grove_mri_kernel_parse(nm, &kk) == GROVE_OK && (int)kk == i);
    }
    CHECK(!strcmp(grove_mri_kernel_name(GROVE_MRI_KERNEL_FAST), "fast"));
    CHECK(!strcmp(grove_mri_kernel_name(GROVE_MRI_KERNEL_SCATTER), "scatter"));
    CHECK(!strcmp(grove_mri_kernel_name((grove_mri_kernel)6), "?"));
    CHECK(!strcmp(grove_mri_kernel_name((grove_mri_kernel)-1), "?"));
    CHECK(grove_mri_kernel_parse("Fast", &kk) == GROVE_ERR_INVALID_ARG);
    CHECK(grove_mri_kernel_parse("", &kk) == GROVE_ERR_INVALID_ARG);
    CHECK(grove_mri_kernel_parse(NULL, &kk) == GROVE_ERR_INVALID_ARG);
    CHECK(grove_mri_kernel_parse("auto", NULL) == GROVE_ERR_INVALID_ARG);

    /* nrmse */
    {
        float a[3] = {1, 2, 3}, b[3] = {1, 2, 4}, z[3] = {0, 0, 0};
        CHECK(grove_mri_nrmse(a, a, 3) == 0.0);
        CHECK(fabs(grove_mri_nrmse(b, a, 3) - 1.0 / sqrt(14.0)) < 1e-15);
        CHECK(grove_mri_nrmse(z, z, 3) == 0.0);
        CHECK(isinf(grove_mri_nrmse(a, z, 3)));
        CHECK(grove_mri_nrmse(NULL, NULL, 0) == 0.0);
    }
    data_free(&d);
}

/* ================================ CUDA against CPU ================================ */

typedef struct kstat {
    double worst[6];
    int cases;
} kstat;

/* grid: the voxels on an image grid of side 16 (x fastest), where the production kernel takes its
 * rotation path along the rows, instead of random positions. */
static void cuda_case(grove_ctx *gpu, grove_ctx *cpu, tu_rng *r, size_t nk, size_t nx, int dims,
                      int grid, kstat *ks)
{
    data d;
    grove_mri_samples k;
    grove_mri_voxels v;
    float *cr[2], *ci[2], *gr, *gi;
    data_random(&d, r, nk, nx, dims);
    if (grid)
        for (size_t i = 0; i < nx; i++) {
            d.x[i] = (float)((int)(i % 16) - 8) / 16.0f;
            d.y[i] = (float)((int)(i / 16 % 16) - 8) / 16.0f;
            if (d.z) d.z[i] = (float)((int)(i / 256) - 8) / 16.0f;
        }
    k = samples_of(&d);
    v = voxels_of(&d);
    for (int f = 0; f < 2; f++) {
        cr[f] = (float *)tu_malloc(nx * sizeof(float));
        ci[f] = (float *)tu_malloc(nx * sizeof(float));
        CHECK_OK(cpu, f ? grove_mri_fhd(cpu, &k, &v, GROVE_MRI_KERNEL_AUTO, cr[f], ci[f])
                        : grove_mri_q(cpu, &k, &v, GROVE_MRI_KERNEL_AUTO, cr[f], ci[f]));
    }
    gr = (float *)tu_malloc(nx * sizeof(float));
    gi = (float *)tu_malloc(nx * sizeof(float));
    printf("  %d-D num_k %6zu num_x %6zu%s:", dims, nk, nx, grid ? " grid" : "");
    for (int kern = 0; kern <= 5; kern++) {
        double e[2];
        for (int f = 0; f < 2; f++) {
            grove_status s;
            for (size_t n = 0; n < nx; n++) gr[n] = gi[n] = NAN;
            s = f ? grove_mri_fhd(gpu, &k, &v, (grove_mri_kernel)kern, gr, gi)
                  : grove_mri_q(gpu, &k, &v, (grove_mri_kernel)kern, gr, gi);
            CHECK_MSG(s == GROVE_OK, "kernel %s, %s: %s: %s",
                      grove_mri_kernel_name((grove_mri_kernel)kern), f ? "FHD" : "Q",
                      grove_status_string(s), grove_ctx_last_error(gpu));
            e[f] = s == GROVE_OK ? rel_err(gr, gi, cr[f], ci[f], nx) : INFINITY;
            CHECK_MSG(
                e[f] <= CUDA_TOL, "kernel %s, %s, %d-D num_k %zu num_x %zu: rel L2 error %.3g",
                grove_mri_kernel_name((grove_mri_kernel)kern), f ? "FHD" : "Q", dims, nk, nx, e[f]);
            if (!(e[f] <= ks->worst[kern])) ks->worst[kern] = e[f];
        }
        printf(" %s %.2g/%.2g", grove_mri_kernel_name((grove_mri_kernel)kern), e[0], e[1]);
    }
    printf("\n");
    ks->cases++;
    for (int f = 0; f < 2; f++) {
        free(cr[f]);
        free(ci[f]);
    }
    free(gr);
    free(gi);
    data_free(&d);
}

static int run_cuda(tu_rng *r, int quick)
{
    static const size_t quick_sizes[][2] = {{1, 1},    {1, 33},    {33, 1},     {31, 32},
                                            {33, 257}, {1025, 33}, {255, 1025}, {4097, 31}};
    static const size_t full_sizes[][2] = {{1, 1},       {1, 4097},    {32, 32},      {33, 31},
                                           {255, 257},   {256, 1024},  {1023, 1025},  {1024, 1024},
                                           {1025, 1023}, {2047, 4097}, {4097, 1025},  {4097, 4097},
                                           {5000, 999},  {12345, 333}, {20000, 50000}};
    const size_t(*sz)[2] = quick ? quick_sizes : full_sizes;
    int nsz = quick ? (int)(sizeof quick_sizes / sizeof quick_sizes[0])
                    : (int)(sizeof full_sizes / sizeof full_sizes[0]);
    grove_ctx *gpu = NULL, *cpu;
    kstat ks;
    int rc = tu_cuda_ctx("test_mri", NULL, &gpu);
    if (rc == TEST_SKIP) {
        printf("test_mri: skipped: --backend cuda needs a usable GPU\n");
        return TEST_SKIP;
    }
    cpu = cpu_ctx(0);
    memset(&ks, 0, sizeof ks);
    printf("CUDA kernels against the CPU backend: relative L2 error Q/FHD per kernel "
           "(bound %.0e)\n",
           CUDA_TOL);
    for (int i = 0; i < nsz; i++)
        cuda_case(gpu, cpu, r, sz[i][0], sz[i][1], i % 2 ? 2 : 3, 0, &ks);
    /* image grids: 16^3 and 16 x 16 x 3 + 5 (a partial row at the end), 2-D 16 x 64 */
    cuda_case(gpu, cpu, r, quick ? 300 : 3001, 4096, 3, 1, &ks);
    cuda_case(gpu, cpu, r, quick ? 300 : 2049, 16 * 16 * 3 + 5, 3, 1, &ks);
    cuda_case(gpu, cpu, r, quick ? 300 : 1025, 1024, 2, 1, &ks);
    printf("worst relative L2 error per kernel over %d cases:\n", ks.cases);
    for (int kern = 0; kern <= 5; kern++)
        printf("  %-9s %.3g\n", grove_mri_kernel_name((grove_mri_kernel)kern), ks.worst[kern]);
    /* a context's device-memory limit: too little for the sums is DEVICE_OUT_OF_MEMORY with a
     * message, and the context still works for sums that fit */
    {
        grove_ctx_opts o;
        grove_ctx *lim = NULL;
        data d;
        grove_mri_samples k;
        grove_mri_voxels v;
        float *gr = (float *)tu_malloc(50000 * sizeof(float)), *gi = (float *)tu_malloc(200000);
        float cr[100], ci[100];
        grove_ctx_default_opts(&o);
        o.device_mem_limit = 256 * 1024; /* the big case needs 1.4 MB for the samples */
        if (tu_cuda_ctx("test_mri", &o, &lim) == 0) {
            data_random(&d, r, 50000, 50000, 3);
            k = samples_of(&d);
            v = voxels_of(&d);
            for (int kern = 0; kern <= 5; kern++) {
                CHECK_STATUS(lim, grove_mri_fhd(lim, &k, &v, (grove_mri_kernel)kern, gr, gi),
                             GROVE_ERR_DEVICE_OUT_OF_MEMORY);
                CHECK(grove_ctx_last_error(lim)[0] != '\0');
            }
            k.num_k = 100;
            v.num_x = 100;
            CHECK_OK(cpu, grove_mri_fhd(cpu, &k, &v, GROVE_MRI_KERNEL_AUTO, cr, ci));
            for (int kern = 0; kern <= 5; kern++) {
                CHECK_OK(lim, grove_mri_fhd(lim, &k, &v, (grove_mri_kernel)kern, gr, gi));
                CHECK(rel_err(gr, gi, cr, ci, 100) <= CUDA_TOL);
            }
            data_free(&d);
        }
        grove_ctx_destroy(lim);
        free(gr);
        free(gi);
    }
    /* the checks are the backend-independent ones: same statuses, same messages */
    test_invalid(gpu, r);
    test_non_finite(gpu, r, 50, 40, 17);
    grove_ctx_destroy(cpu);
    grove_ctx_destroy(gpu);
    return tu_finish("test_mri");
}

/* ================================ Parboil files ================================ */

static char dir[256];

static void put_f32(unsigned char *b, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(u >> (8 * i));
}

static void put_i32(unsigned char *b, int32_t v)
{
    uint32_t u = (uint32_t)v;
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(u >> (8 * i));
}

/* The bytes of a Parboil input file of d (little-endian, written byte by byte). */
static unsigned char *parboil_bytes(const data *d, int with_data, size_t *len)
{
    const float *arr[10] = {d->kx, d->ky, d->kz, d->x, d->y, d->z, d->pr, d->pi, d->dr, d->di};
    size_t cnt[10] = {d->nk, d->nk, d->nk, d->nx, d->nx, d->nx, d->nk, d->nk, d->nk, d->nk};
    size_t total = 0, off = 8;
    unsigned char *b;
    for (int i = 0; i < (with_data ? 10 : 8); i++) total += cnt[i];
    *len = 8 + 4 * total;
    b = (unsigned char *)tu_malloc(*len);
    put_i32(b, (int32_t)d->nk);
    put_i32(b + 4, (int32_t)d->nx);
    for (int i = 0; i < (with_data ? 10 : 8); i++)
        for (size_t j = 0; j < cnt[i]; j++, off += 4) put_f32(b + off, arr[i][j]);
    return b;
}

static void write_bytes(const char *path, const unsigned char *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "test_mri: cannot write %s\n", path);
        exit(2);
    }
}

static int same_floats(const float *a, const float *b, size_t n)
{
    if (n == 0) return 1;
    if (!a || !b) return 0;
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* read file p expecting BAD_INPUT with a message that names the file and `part` */
static void expect_bad(grove_ctx *ctx, const char *p, int with_data, const char *part,
                       const char *what)
{
    grove_mri_parboil *pb = (grove_mri_parboil *)1;
    grove_status s = grove_mri_parboil_read(ctx, p, with_data, &pb);
    CHECK_MSG(s == GROVE_ERR_BAD_INPUT, "%s: status %d (%s)", what, (int)s,
              grove_ctx_last_error(ctx));
    CHECK_MSG(pb == NULL, "%s: *out not NULL after a failure", what);
    CHECK_MSG(msg_has(ctx, p) && msg_has(ctx, part), "%s", what);
}

static int count_files(const char *d)
{
    DIR *dp = opendir(d);
    struct dirent *e;
    int n = 0;
    if (!dp) return -1;
    while ((e = readdir(dp)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(dp);
    return n;
}

static void test_parboil(grove_ctx *ctx, tu_rng *r)
{
    static const char *names[10] = {"kx", "ky", "kz", "x", "y", "z", "phiR", "phiI", "dR", "dI"};
    char p[512], q[512];
    data d;
    size_t len;
    unsigned char *b;
    grove_mri_parboil *pb = NULL;

    printf("Parboil files\n");
    data_random(&d, r, 1001, 777, 3);
    for (int wd = 0; wd <= 1; wd++) {
        size_t cnt[10] = {d.nk, d.nk, d.nk, d.nx, d.nx, d.nx, d.nk, d.nk, d.nk, d.nk};
        int narr = wd ? 10 : 8;
        size_t off;
        b = parboil_bytes(&d, wd, &len);
        snprintf(p, sizeof p, "%s/in_%s.bin", dir, wd ? "fhd" : "q");
        write_bytes(p, b, len);

        /* good file */
        CHECK_OK(ctx, grove_mri_parboil_read(ctx, p, wd, &pb));
        if (pb) {
            CHECK(pb->k.num_k == d.nk && pb->v.num_x == d.nx && pb->has_data == wd);
            CHECK(same_floats(pb->k.kx, d.kx, d.nk) && same_floats(pb->k.ky, d.ky, d.nk) &&
                  same_floats(pb->k.kz, d.kz, d.nk) && same_floats(pb->v.x, d.x, d.nx) &&
                  same_floats(pb->v.y, d.y, d.nx) && same_floats(pb->v.z, d.z, d.nx) &&
                  same_floats(pb->k.phi_r, d.pr, d.nk) && same_floats(pb->k.phi_i, d.pi, d.nk));
            if (wd)
                CHECK(same_floats(pb->k.d_r, d.dr, d.nk) && same_floats(pb->k.d_i, d.di, d.nk));
            else
                CHECK(pb->k.d_r == NULL && pb->k.d_i == NULL);
            grove_mri_parboil_free(pb);
            pb = NULL;
        }
        /* ctx NULL: the status alone */
        CHECK(grove_mri_parboil_read(NULL, p, wd, &pb) == GROVE_OK && pb);
        grove_mri_parboil_free(pb);
        pb = NULL;

        /* truncated inside each array (mid-value and one value short) */
        off = 8;
        for (int i = 0; i < narr; i++) {
            off += 4 * cnt[i];
            snprintf(q, sizeof q, "%s/trunc.bin", dir);
            for (int cut = 1; cut <= 4; cut += 3) {
                char part[64];
                write_bytes(q, b, off - (size_t)cut);
                snprintf(part, sizeof part, "for array %s ", names[i]);
                expect_bad(ctx, q, wd, part, "truncated");
                CHECK(msg_has(ctx, "truncated: expected"));
            }
        }
        write_bytes(q, b, 5);
        expect_bad(ctx, q, wd, "truncated", "5-byte file");
        write_bytes(q, b, 0);
        expect_bad(ctx, q, wd, "truncated", "empty file");

        /* extra bytes */
        {
            unsigned char *e = (unsigned char *)tu_malloc(len + 8 * d.nk);
            memcpy(e, b, len);
            memset(e + len, 0, 8 * d.nk);
            write_bytes(q, e, len + 1);
            expect_bad(ctx, q, wd, "1 bytes after the last array", "one extra byte");
            write_bytes(q, e, len + 4);
            expect_bad(ctx, q, wd, wd ? "(dI)" : "(phiI)", "one extra float");
            free(e);
        }
        /* negative counts */
        put_i32(b, -1);
        write_bytes(q, b, len);
        expect_bad(ctx, q, wd, "negative count: numK = -1", "numK < 0");
        put_i32(b, (int32_t)d.nk);
        put_i32(b + 4, INT32_MIN);
        write_bytes(q, b, len);
        expect_bad(ctx, q, wd, "numX = -2147483648", "numX < 0");
        put_i32(b + 4, (int32_t)d.nx);
        /* counts far beyond the file: a message, not an allocation */
        put_i32(b, INT32_MAX);
        write_bytes(q, b, len);
        expect_bad(ctx, q, wd, "truncated", "numK = INT32_MAX");
        put_i32(b, (int32_t)d.nk);

        /* a non-finite value in each array */
        off = 8;
        for (int i = 0; i < narr; i++) {
            char part[64];
            size_t at = cnt[i] / 2 + (size_t)i;
            unsigned char keep[4];
            memcpy(keep, b + off + 4 * at, 4);
            put_f32(b + off + 4 * at, i % 2 ? INFINITY : NAN);
            write_bytes(q, b, len);
            snprintf(part, sizeof part, ": %s[%zu] is %s", names[i], at, i % 2 ? "+Inf" : "NaN");
            expect_bad(ctx, q, wd, part, "non-finite value");
            memcpy(b + off + 4 * at, keep, 4);
            off += 4 * cnt[i];
        }
        free(b);
    }
    /* an mri-fhd file read as mri-q: 8 numK bytes too many, and the message says why */
    snprintf(p, sizeof p, "%s/in_fhd.bin", dir);
    expect_bad(ctx, p, 0, "mri-fhd", "mri-fhd file as mri-q");
    /* an mri-q file read as mri-fhd: truncated at dR */
    snprintf(p, sizeof p, "%s/in_q.bin", dir);
    expect_bad(ctx, p, 1, "for array dR", "mri-q file as mri-fhd");

    /* zero counts are a valid (empty) file */
    {
        data e;
        data_alloc(&e, 0, 0, 3);
        b = parboil_bytes(&e, 1, &len);
        snprintf(p, sizeof p, "%s/empty.bin", dir);
        write_bytes(p, b, len);
        CHECK_OK(ctx, grove_mri_parboil_read(ctx, p, 1, &pb));
        if (pb) CHECK(pb->k.num_k == 0 && pb->v.num_x == 0);
        grove_mri_parboil_free(pb);
        pb = NULL;
        free(b);
        data_free(&e);
    }
    /* other failures */
    snprintf(p, sizeof p, "%s/does-not-exist.bin", dir);
    CHECK_STATUS(ctx, grove_mri_parboil_read(ctx, p, 0, &pb), GROVE_ERR_IO);
    CHECK(msg_has(ctx, p));
    CHECK_STATUS(ctx, grove_mri_parboil_read(ctx, dir, 0, &pb), GROVE_ERR_IO);
    CHECK_STATUS(ctx, grove_mri_parboil_read(ctx, NULL, 0, &pb), GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(ctx, grove_mri_parboil_read(ctx, p, 2, &pb), GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(ctx, grove_mri_parboil_read(ctx, p, 0, NULL), GROVE_ERR_INVALID_ARG);
    grove_mri_parboil_free(NULL);

    /* output: round trip, byte by byte */
    {
        size_t nx = d.nx;
        float *re = (float *)tu_malloc(nx * 4), *im = (float *)tu_malloc(nx * 4);
        unsigned char *got = (unsigned char *)tu_malloc(4 + 8 * nx);
        FILE *f;
        size_t n;
        for (size_t i = 0; i < nx; i++) {
            re[i] = tu_f32(r, -1e6f, 1e6f);
            im[i] = i == 3 ? -0.0f : tu_f32(r, -1.0f, 1.0f);
        }
        snprintf(p, sizeof p, "%s/out.bin", dir);
        CHECK_OK(ctx, grove_mri_parboil_write_output(ctx, p, nx, re, im));
        f = fopen(p, "rb");
        n = f ? fread(got, 1, 4 + 8 * nx + 1, f) : 0;
        if (f) fclose(f);
        CHECK_MSG(n == 4 + 8 * nx, "output file has %zu bytes, want %zu", n, 4 + 8 * nx);
        if (n == 4 + 8 * nx) {
            unsigned char w[4];
            int ok = 1;
            put_i32(w, (int32_t)nx);
            ok &= memcmp(got, w, 4) == 0;
            for (size_t i = 0; i < nx; i++) {
                put_f32(w, re[i]);
                ok &= memcmp(got + 4 + 4 * i, w, 4) == 0;
                put_f32(w, im[i]);
                ok &= memcmp(got + 4 + 4 * (nx + i), w, 4) == 0;
            }
            CHECK_MSG(ok, "output file bytes differ");
        }
        /* overwrite with an empty result */
        CHECK_OK(ctx, grove_mri_parboil_write_output(ctx, p, 0, NULL, NULL));
        {
            struct stat sb;
            CHECK(stat(p, &sb) == 0 && sb.st_size == 4);
        }
        /* unwritable: no directory, a file as directory, a directory as target */
        {
            int before = count_files(dir);
            snprintf(q, sizeof q, "%s/no-such-dir/out.bin", dir);
            CHECK_STATUS(ctx, grove_mri_parboil_write_output(ctx, q, nx, re, im), GROVE_ERR_IO);
            CHECK(msg_has(ctx, q));
            snprintf(q, sizeof q, "%s/in_q.bin/out.bin", dir);
            CHECK_STATUS(ctx, grove_mri_parboil_write_output(ctx, q, nx, re, im), GROVE_ERR_IO);
            snprintf(q, sizeof q, "%s/adir", dir);
            CHECK(mkdir(q, 0755) == 0);
            before++;
            CHECK_STATUS(ctx, grove_mri_parboil_write_output(ctx, q, nx, re, im), GROVE_ERR_IO);
            CHECK_MSG(count_files(dir) == before, "a failed write left a file in %s", dir);
            CHECK(count_files(q) == 0);
            rmdir(q);
        }
        CHECK_STATUS(ctx, grove_mri_parboil_write_output(ctx, NULL, nx, re, im),
                     GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_mri_parboil_write_output(ctx, p, nx, NULL, im),
                     GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_mri_parboil_write_output(ctx, p, (size_t)UINT32_MAX + 1, re, im),
                     GROVE_ERR_INVALID_ARG);
        free(re);
        free(im);
        free(got);
    }

    /* a library result through the files: read, Q, write, read back */
    {
        float *re = (float *)tu_malloc(d.nx * 4), *im = (float *)tu_malloc(d.nx * 4);
        float *r2 = (float *)tu_malloc(d.nx * 4), *i2 = (float *)tu_malloc(d.nx * 4);
        snprintf(p, sizeof p, "%s/in_fhd.bin", dir);
        CHECK_OK(ctx, grove_mri_parboil_read(ctx, p, 1, &pb));
        if (pb) {
            grove_mri_samples k = samples_of(&d);
            grove_mri_voxels v = voxels_of(&d);
            CHECK_OK(ctx, grove_mri_fhd(ctx, &pb->k, &pb->v, GROVE_MRI_KERNEL_AUTO, re, im));
            CHECK_OK(ctx, grove_mri_fhd(ctx, &k, &v, GROVE_MRI_KERNEL_AUTO, r2, i2));
            CHECK(same_floats(re, r2, d.nx) && same_floats(im, i2, d.nx));
        }
        grove_mri_parboil_free(pb);
        free(re);
        free(im);
        free(r2);
        free(i2);
    }
    data_free(&d);
}

/* ================================ main ================================ */

static void remove_dir(const char *d)
{
    DIR *dp = opendir(d);
    struct dirent *e;
    char p[600];
    if (!dp) return;
    while ((e = readdir(dp))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", d, e->d_name);
        if (remove(p) != 0) rmdir(p);
    }
    closedir(dp);
    rmdir(d);
}

static void usage(void)
{
    fprintf(stderr, "usage: test_mri [--backend cpu|cuda] [--seed S] [--quick]\n");
}

int main(int argc, char **argv)
{
    const char *backend = "cpu";
    uint64_t seed = 20261122;
    int quick = 0;
    tu_rng r;
    grove_ctx *ctx;
    const char *tmp = getenv("TMPDIR");

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            backend = argv[++i];
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 10);
        } else {
            usage();
            return 2;
        }
    }
    r.s = seed;
    if (!strcmp(backend, "cuda")) return run_cuda(&r, quick);
    if (strcmp(backend, "cpu") != 0) {
        usage();
        return 2;
    }

    ctx = cpu_ctx(0);
    test_cpu_sizes(ctx, &r);
    test_cpu_threads(&r);
    printf("CPU adversarial inputs\n");
    test_equal_positions(ctx, &r);
    test_k_zero(ctx, &r);
    test_phase_range(ctx, &r);
    test_huge_num_k(ctx, &r, quick ? 100000 : 10000000);
    test_non_finite(ctx, &r, 50, 40, 17);
    test_non_finite(ctx, &r, 300001, 300002, 299990); /* the parallel scan */
    test_invalid(ctx, &r);

    snprintf(dir, sizeof dir, "%s/test_mri.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "test_mri: cannot create a temporary directory: %s\n", strerror(errno));
        return 2;
    }
    test_parboil(ctx, &r);
    remove_dir(dir);
    grove_ctx_destroy(ctx);
    return tu_finish("test_mri");
}
