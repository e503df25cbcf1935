/*
 * bench_mri.c - `grove bench mri`: the Q and FHD sums (bench_mri.h).
 *
 * Data: samples uniform in [-size/2, size/2)^3 (cycles per field of view) with weights uniform
 * in [-1, 1); voxels on the size^3 image grid of mri.h (x = (i - size/2) / size), or uniform in
 * [-1/2, 1/2)^3 for a --size that is not a cube. Cases:
 *   big      M = 2^18, N = 128^3 (or --size): every CUDA kernel; scatter, which gives each
 *            sample a thread that loops over every voxel, at N = 4096 voxels only (the op says
 *            so), since all 2^21 would take minutes;
 *   parboil  M = 2048, N = 64^3 (Parboil's large mri-q / mri-fhd size): every CUDA kernel;
 *   cpu      M = 2048, N = 32768: the CPU backend.
 * Checks: each CUDA result against the CPU backend on up to CHECK_VOXELS voxels spread over the
 * array, each CPU result against a float64 direct sum here on a few voxels; relative L2 error
 * <= 1e-4 sets checked. The largest error seen per kernel is left in the context's message.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_cuda.h"
#include "bench_mri.h"
#include "core.h" /* grove__error */

#define CHECK_VOXELS 512
#define CHECK_TOL 1e-4
#define SCATTER_BIG_N 4096
#define SLOW_REPEATS 3 /* gather, constant and scatter at the big size: about a second each */

typedef struct mri_data {
    size_t m, n;
    float *kx, *ky, *kz, *pr, *pi, *dr, *di; /* m each */
    float *x, *y, *z;                        /* n each */
    grove_mri_samples k;
    grove_mri_voxels v;
} mri_data;

static void data_free(mri_data *d)
{
    free(d->kx);
    free(d->x);
    memset(d, 0, sizeof *d);
}

/* size > 0 and n == size^3: the image grid; else uniform voxels. kmax: |k| bound per axis. */
static int data_make(mri_data *d, size_t m, size_t n, int size, double kmax, uint64_t seed)
{
    memset(d, 0, sizeof *d);
    d->m = m;
    d->n = n;
    d->kx = (float *)malloc(7 * (m ? m : 1) * sizeof(float));
    d->x = (float *)malloc(3 * (n ? n : 1) * sizeof(float));
    if (!d->kx || !d->x) {
        data_free(d);
        return 0;
    }
    d->ky = d->kx + m;
    d->kz = d->ky + m;
    d->pr = d->kz + m;
    d->pi = d->pr + m;
    d->dr = d->pi + m;
    d->di = d->dr + m;
    d->y = d->x + n;
    d->z = d->y + n;
    for (size_t j = 0; j < m; j++) {
        float *a[7] = {d->kx, d->ky, d->kz, d->pr, d->pi, d->dr, d->di};
        for (int c = 0; c < 7; c++) {
            double u = grove__bench_unit(grove__bench_hash(seed + (uint64_t)c, j));
            a[c][j] = (float)(c < 3 ? kmax * (2.0 * u - 1.0) : 2.0 * u - 1.0);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (size > 0) {
            size_t s = (size_t)size;
            d->x[i] = (float)(((double)(i % s) - size / 2) / size);
            d->y[i] = (float)(((double)(i / s % s) - size / 2) / size);
            d->z[i] = (float)(((double)(i / s / s) - size / 2) / size);
        } else {
            d->x[i] = (float)(grove__bench_unit(grove__bench_hash(seed + 10, i)) - 0.5);
            d->y[i] = (float)(grove__bench_unit(grove__bench_hash(seed + 11, i)) - 0.5);
            d->z[i] = (float)(grove__bench_unit(grove__bench_hash(seed + 12, i)) - 0.5);
        }
    }
    d->k.num_k = m;
    d->k.kx = d->kx;
    d->k.ky = d->ky;
    d->k.kz = d->kz;
    d->k.phi_r = d->pr;
    d->k.phi_i = d->pi;
    d->k.d_r = d->dr;
    d->k.d_i = d->di;
    d->v.num_x = n;
    d->v.x = d->x;
    d->v.y = d->y;
    d->v.z = d->z;
    return 1;
}

/* The first n voxels of d as a voxel set of their own. */
static grove_mri_voxels prefix(const mri_data *d, size_t n)
{
    grove_mri_voxels v = d->v;
    v.num_x = n < d->n ? n : d->n;
    return v;
}

/* Voxel indices spread over [0, n) for the checks. */
static size_t check_index(size_t j, size_t cnt, size_t n) { return (j * n) / cnt + (j % 7) % n; }

typedef struct ref_set {
    size_t cnt;
    size_t *idx;
    double *re, *im;
} ref_set;

static void ref_free(ref_set *r)
{
    free(r->idx);
    free(r->re);
    memset(r, 0, sizeof *r);
}

#ifdef GROVE_HAVE_CUDA
/* The CPU backend's sums on the check voxels of the first n voxels of d. */
static grove_status ref_cpu(grove_ctx *cpu, const mri_data *d, size_t n, int fhd, ref_set *r)
{
    grove_mri_voxels sv;
    float *buf;
    grove_status s;
    memset(r, 0, sizeof *r);
    r->cnt = n < CHECK_VOXELS ? n : CHECK_VOXELS;
    r->idx = (size_t *)malloc(r->cnt * sizeof *r->idx);
    r->re = (double *)malloc(2 * r->cnt * sizeof *r->re);
    buf = (float *)malloc(5 * r->cnt * sizeof *buf);
    if (!r->idx || !r->re || !buf) {
        free(buf);
        ref_free(r);
        return grove__error(cpu, GROVE_ERR_OUT_OF_MEMORY, "bench mri: reference buffers");
    }
    r->im = r->re + r->cnt;
    for (size_t j = 0; j < r->cnt; j++) {
        size_t i = check_index(j, r->cnt, n);
        r->idx[j] = i;
        buf[j] = d->x[i];
        buf[r->cnt + j] = d->y[i];
        buf[2 * r->cnt + j] = d->z[i];
    }
    sv.num_x = r->cnt;
    sv.x = buf;
    sv.y = buf + r->cnt;
    sv.z = buf + 2 * r->cnt;
    s = fhd ? grove_mri_fhd(cpu, &d->k, &sv, GROVE_MRI_KERNEL_AUTO, buf + 3 * r->cnt,
                            buf + 4 * r->cnt)
            : grove_mri_q(cpu, &d->k, &sv, GROVE_MRI_KERNEL_AUTO, buf + 3 * r->cnt,
                          buf + 4 * r->cnt);
    for (size_t j = 0; s == GROVE_OK && j < r->cnt; j++) {
        r->re[j] = buf[3 * r->cnt + j];
        r->im[j] = buf[4 * r->cnt + j];
    }
    free(buf);
    if (s != GROVE_OK) ref_free(r);
    return s;
}
#endif

/* A float64 direct sum on the check voxels (for the CPU rows), cnt voxels at most. */
static void ref_direct(const mri_data *d, size_t n, int fhd, size_t cnt, ref_set *r)
{
    const double tp = 6.283185307179586476925;
    memset(r, 0, sizeof *r);
    r->cnt = n < cnt ? n : cnt;
    r->idx = (size_t *)malloc(r->cnt * sizeof *r->idx);
    r->re = (double *)malloc(2 * r->cnt * sizeof *r->re);
    if (!r->idx || !r->re) {
        ref_free(r);
        return;
    }
    r->im = r->re + r->cnt;
    for (size_t j = 0; j < r->cnt; j++) {
        size_t i = check_index(j, r->cnt, n);
        double sr = 0, si = 0;
        r->idx[j] = i;
        for (size_t q = 0; q < d->m; q++) {
            double a = tp * ((double)d->kx[q] * d->x[i] + (double)d->ky[q] * d->y[i] +
                             (double)d->kz[q] * d->z[i]);
            double c = cos(a), sn = sin(a), wr, wi;
            if (fhd) {
                wr = (double)d->pr[q] * d->dr[q] + (double)d->pi[q] * d->di[q];
                wi = (double)d->pr[q] * d->di[q] - (double)d->pi[q] * d->dr[q];
            } else {
                wr = (double)d->pr[q] * d->pr[q] + (double)d->pi[q] * d->pi[q];
                wi = 0;
            }
            sr += wr * c - wi * sn;
            si += wi * c + wr * sn;
        }
        r->re[j] = sr;
        r->im[j] = si;
    }
}

/* Relative L2 error of (re, im) on r's voxels; NaN (a poisoned, unwritten result) gives inf. */
static double rel_err(const ref_set *r, const float *re, const float *im)
{
    double num = 0, den = 0;
    if (!r->idx) return INFINITY;
    for (size_t j = 0; j < r->cnt; j++) {
        double a = re[r->idx[j]], b = im[r->idx[j]];
        if (a != a || b != b) return INFINITY;
        num += (a - r->re[j]) * (a - r->re[j]) + (b - r->im[j]) * (b - r->im[j]);
        den += r->re[j] * r->re[j] + r->im[j] * r->im[j];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

typedef struct bench {
    grove_ctx *ctx, *cpu;
    const grove_bench_opts *o;
    grove_bench_row *rows;
    int max_rows, *nrows;
    double worst[7]; /* per kernel 0..5, and 6 for the CPU rows */
    int failed;      /* rows that missed their check */
} bench;

static void add_row(bench *b, const char *op, const char *impl, size_t m, size_t n, double ms,
                    double floor_s, int checked)
{
    grove_bench_row *r;
    if (!grove__bench_add_row(b->rows, b->max_rows, b->nrows, op, impl, n, ms, 0, 0, 0, checked))
        return;
    r = &b->rows[*b->nrows - 1];
    r->items_per_s = ms > 0 ? (double)m * (double)n / (ms * 1e-3) : 0;
    r->gb_per_s = 0;
    r->vs_floor = (floor_s > 0 && ms > 0) ? floor_s * 1e3 / ms : 0;
}

static void note_err(bench *b, int slot, double e, int *checked)
{
    if (!(e <= b->worst[slot])) b->worst[slot] = e; /* NaN and inf stick */
    *checked = e <= CHECK_TOL;
    if (!*checked) b->failed++;
}

#ifdef GROVE_HAVE_CUDA
/* Every CUDA kernel on the first n voxels of d (scatter on the first n_scatter), both sums. */
static grove_status cuda_case(bench *b, const char *tag, const mri_data *d, size_t n,
                              size_t n_scatter)
{
    static const grove_mri_kernel kernels[] = {GROVE_MRI_KERNEL_FAST, GROVE_MRI_KERNEL_TILED,
                                               GROVE_MRI_KERNEL_CONSTANT, GROVE_MRI_KERNEL_GATHER,
                                               GROVE_MRI_KERNEL_SCATTER};
    const int big = (double)d->m * (double)n > 1e11;
    float *out = (float *)malloc(2 * (n ? n : 1) * sizeof(float));
    grove_status s = GROVE_OK;
    if (!out) return grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY, "bench mri: results");
    for (int fhd = 1; fhd >= 0 && s == GROVE_OK; fhd--) {
        ref_set ref[2];
        memset(ref, 0, sizeof ref);
        s = ref_cpu(b->cpu, d, n, fhd, &ref[0]);
        if (s == GROVE_OK && n_scatter != n) s = ref_cpu(b->cpu, d, n_scatter, fhd, &ref[1]);
        if (s != GROVE_OK) {
            grove__error(b->ctx, s, "bench mri: CPU reference: %s", grove_ctx_last_error(b->cpu));
            ref_free(&ref[0]);
            break;
        }
        for (int q = 0; q < 5 && s == GROVE_OK; q++) {
            const grove_mri_kernel kern = kernels[q];
            const int scatter = kern == GROVE_MRI_KERNEL_SCATTER;
            const size_t nn = scatter ? n_scatter : n;
            const int slow = big && (scatter || kern == GROVE_MRI_KERNEL_GATHER ||
                                     kern == GROVE_MRI_KERNEL_CONSTANT);
            int reps = b->o->repeats, warm = b->o->warmup, checked;
            grove_mri_voxels v = prefix(d, nn);
            double ms = 0, bound = 0, clk = 0, e;
            int sms = 0;
            char op[48];
            if (slow && reps > SLOW_REPEATS) reps = SLOW_REPEATS;
            if (slow && warm > 1) warm = 1;
            s = grove__bench_mri_cuda(b->ctx, fhd, &d->k, &v, kern, warm, reps, out, out + nn,
                                      &ms);
            if (s != GROVE_OK) break;
            s = grove__bench_mri_sfu_bound(b->ctx, d->m, nn, &bound, &sms, &clk);
            if (s != GROVE_OK) break;
            e = rel_err(&ref[nn == n ? 0 : 1], out, out + nn);
            note_err(b, (int)kern, e, &checked);
            snprintf(op, sizeof op, "%s_%s_m%zu_n%zu", fhd ? "fhd" : "q", tag, d->m, nn);
            add_row(b, op, grove_mri_kernel_name(kern), d->m, nn, ms, bound, checked);
        }
        ref_free(&ref[0]);
        ref_free(&ref[1]);
    }
    free(out);
    return s;
}
#endif

/* The CPU backend on the first n voxels of d, both sums. */
static grove_status cpu_case(bench *b, const mri_data *d, size_t n)
{
    float *out = (float *)malloc(2 * (n ? n : 1) * sizeof(float));
    grove_status s = GROVE_OK;
    grove_mri_voxels v = prefix(d, n);
    int reps = b->o->repeats < 3 ? b->o->repeats : 3, warm = b->o->warmup < 1 ? b->o->warmup : 1;
    if (!out) return grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY, "bench mri: results");
    if (reps < 1) reps = 1;
    for (int fhd = 1; fhd >= 0 && s == GROVE_OK; fhd--) {
        double t[3], ms, e;
        int checked;
        ref_set ref;
        char op[48];
        for (int r = -warm; r < reps && s == GROVE_OK; r++) {
            double t0 = grove__bench_now_s();
            s = fhd ? grove_mri_fhd(b->cpu, &d->k, &v, GROVE_MRI_KERNEL_AUTO, out, out + n)
                    : grove_mri_q(b->cpu, &d->k, &v, GROVE_MRI_KERNEL_AUTO, out, out + n);
            if (r >= 0) t[r] = 1e3 * (grove__bench_now_s() - t0);
        }
        if (s != GROVE_OK) {
            grove__error(b->ctx, s, "bench mri: CPU backend: %s", grove_ctx_last_error(b->cpu));
            break;
        }
        ms = grove__bench_median(t, reps);
        ref_direct(d, n, fhd, 64, &ref);
        e = rel_err(&ref, out, out + n);
        ref_free(&ref);
        note_err(b, 6, e, &checked);
        snprintf(op, sizeof op, "%s_cpu_m%zu_n%zu", fhd ? "fhd" : "q", d->m, n);
        add_row(b, op, "cpu", d->m, n, ms, 0, checked);
    }
    free(out);
    return s;
}

grove_status grove_bench_mri(grove_ctx *ctx, const grove_bench_opts *opts, grove_bench_row *rows,
                             int max_rows, int *nrows)
{
    bench b;
    grove_ctx_opts co;
    mri_data big, pb;
    grove_status s = GROVE_OK;
    size_t nbig;
    int size_big = 128, cuda;

    if (!ctx || !opts || !rows || !nrows || max_rows < 0)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "bench mri: NULL argument");
    *nrows = 0;
    memset(&b, 0, sizeof b);
    memset(&big, 0, sizeof big);
    memset(&pb, 0, sizeof pb);
    b.ctx = ctx;
    b.o = opts;
    b.rows = rows;
    b.max_rows = max_rows;
    b.nrows = nrows;
    cuda = grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA;
    nbig = opts->n ? opts->n : (size_t)128 * 128 * 128;
    if (nbig != (size_t)128 * 128 * 128) {
        size_big = (int)llround(cbrt((double)nbig));
        if ((size_t)size_big * size_big * size_big != nbig) size_big = 0;
    }
    grove_ctx_default_opts(&co);
    co.backend = GROVE_BACKEND_CPU;
    s = grove_ctx_create(&co, &b.cpu);
    if (s != GROVE_OK) {
        s = grove__error(ctx, s, "bench mri: creating a CPU context: %s",
                         b.cpu ? grove_ctx_last_error(b.cpu) : "out of memory");
        grove_ctx_destroy(b.cpu);
        return s;
    }
    if (!data_make(&pb, 2048, (size_t)64 * 64 * 64, 64, 32.0, 1000)) {
        s = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "bench mri: data");
        goto _end;
    }
#ifdef GROVE_HAVE_CUDA
    if (cuda) {
        if (!data_make(&big, (size_t)1 << 18, nbig, size_big, size_big ? size_big / 2.0 : 64.0,
                       2000)) {
            s = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "bench mri: data");
            goto _end;
        }
        GROVE_TRY_END(s, cuda_case(&b, "big", &big, nbig, nbig < SCATTER_BIG_N ? nbig
                                                                                : SCATTER_BIG_N));
        GROVE_TRY_END(s, cuda_case(&b, "parboil", &pb, pb.n, pb.n));
    }
#else
    (void)cuda;
#endif
    GROVE_TRY_END(s, cpu_case(&b, &pb, 32768));
    {
        char msg[400];
        int len = snprintf(msg, sizeof msg, "largest relative L2 error per kernel:");
        for (int q = 0; q < 7; q++) {
            if (b.worst[q] == 0) continue;
            if (len > 0 && (size_t)len < sizeof msg)
                len += snprintf(msg + len, sizeof msg - (size_t)len, " %s %.2g",
                                q == 6 ? "cpu" : grove_mri_kernel_name((grove_mri_kernel)q),
                                b.worst[q]);
        }
        if (b.failed && len > 0 && (size_t)len < sizeof msg)
            snprintf(msg + len, sizeof msg - (size_t)len, "; %d row(s) over %.0e", b.failed,
                     CHECK_TOL);
        grove__error(ctx, GROVE_ERR_INTERNAL, "bench mri: %s", msg);
    }
_end:
    data_free(&big);
    data_free(&pb);
    grove_ctx_destroy(b.cpu);
    return s;
}
