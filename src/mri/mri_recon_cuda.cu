/*
 * mri_recon_cuda.cu - the conjugate-gradient reconstruction on the GPU (mri_recon_cuda.h): the
 * same solve as mri_recon.c's CPU path (docs/mri.md), with every vector on the device.
 *
 * Precision. The direct sums are the module's float kernels (grove__mri_sum_cuda_device); the
 * Toeplitz convolution is a single-precision cuFFT C2C; the CG vectors x, r, p, A p are double2
 * and the dot products are summed in double, in a fixed order (per-block partial sums, then one
 * block adds them), so that a run gives the same bits every time. Keeping the vectors in double
 * costs little: an iteration is bound by the sums or the FFTs, and the CPU path keeps them in
 * double too, so the two differ only by the operator's float rounding.
 *
 * Synchronisation. alpha = rr / p^H A p is computed on the device from the two scalars in
 * device memory, so an iteration queues all its work and the host waits once, when it reads
 * p^H A p and the new rr back for the stopping rules and the progress callback; beta comes from
 * the host (it has both rr values by then).
 */
#include <cuda_runtime.h>
#include <cufft.h>

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core_cuda.h"
#include "mri_cuda.h"
#include "mri_recon_cuda.h"

namespace
{

constexpr int BLK = 256;
constexpr unsigned RED_BLOCKS = 1024; /* most partial sums a reduction writes */
constexpr int MAX_BUFS = 32;

double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

unsigned grid_for(size_t items)
{
    size_t b = (items + BLK - 1) / BLK;
    const size_t cap = (size_t)1 << 30;
    if (b > cap) b = cap;
    if (b == 0) b = 1;
    return (unsigned)b;
}

/* ---- kernels ---- */

/* The voxel positions of mri_recon.c's op_init, computed the same way (double, then float). */
__global__ void k_voxels(size_t n, int s, float *vx, float *vy, float *vz, float *ones,
                         float *zeros)
{
    const size_t ss = (size_t)s;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        vx[i] = (float)(((double)(i % ss) - 0.5 * s) / s);
        vy[i] = (float)(((double)((i / ss) % ss) - 0.5 * s) / s);
        if (vz) vz[i] = (float)(((double)(i / (ss * ss)) - 0.5 * s) / s);
        ones[i] = 1.0f;
        zeros[i] = 0.0f;
    }
}

/* The doubled grid's offsets j / s, j in [-s, s), stored circularly (as toeplitz_setup). */
__global__ void k_grid(size_t n2, int s, int dims, float *px, float *py, float *pz)
{
    const size_t s2 = 2 * (size_t)s;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n2;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i;
        float *out[3] = {px, py, pz};
        for (int a = 0; a < dims; a++) {
            long j = (long)(r % s2);
            r /= s2;
            if (j >= s) j -= (long)s2;
            out[a][i] = (float)((double)j / s);
        }
    }
}

__global__ void k_sqrt(size_t m, const float *w, float *out)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < m;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = sqrtf(w[i]);
}

__global__ void k_interleave(size_t n2, const float *qr, const float *qi, float scale,
                             cufftComplex *kern)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n2;
         i += (size_t)gridDim.x * blockDim.x)
        kern[i] = make_float2(qr[i] * scale, qi[i] * scale);
}

/* Zero-padding of p onto the doubled grid (the image in the corner j < s on every axis). */
__global__ void k_pad(size_t n2, int s, const double2 *p, cufftComplex *work)
{
    const size_t ss = (size_t)s, s2 = 2 * ss;
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n2;
         j += (size_t)gridDim.x * blockDim.x) {
        size_t x = j % s2, y = (j / s2) % s2, z = j / (s2 * s2);
        float2 v = make_float2(0.0f, 0.0f);
        if (x < ss && y < ss && z < ss) {
            double2 q = p[x + ss * (y + ss * z)];
            v = make_float2((float)q.x, (float)q.y);
        }
        work[j] = v;
    }
}

__global__ void k_cmul(size_t n2, cufftComplex *work, const cufftComplex *kern)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n2;
         i += (size_t)gridDim.x * blockDim.x) {
        float2 a = work[i], c = kern[i];
        work[i] = make_float2(a.x * c.x - a.y * c.y, a.x * c.y + a.y * c.x);
    }
}

/* lambda (D^H D p)_i: the graph Laplacian of the voxel grid (Neumann), as op_add_reg. */
__device__ double2 reg_at(const double2 *p, size_t i, size_t s, int dims, double lam)
{
    double dr = 0, di = 0;
    size_t stride = 1;
    const double2 c = p[i];
    for (int a = 0; a < dims; a++, stride *= s) {
        size_t cc = (i / stride) % s;
        if (cc + 1 < s) {
            double2 q = p[i + stride];
            dr += c.x - q.x;
            di += c.y - q.y;
        }
        if (cc > 0) {
            double2 q = p[i - stride];
            dr += c.x - q.x;
            di += c.y - q.y;
        }
    }
    return make_double2(lam * dr, lam * di);
}

/* ap = crop(work) + lambda R p (Toeplitz form) */
__global__ void k_crop(size_t n, int s, int dims, const cufftComplex *work, const double2 *p,
                       double lam, double2 *ap)
{
    const size_t ss = (size_t)s, s2 = 2 * ss;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t x = i % ss, y = (i / ss) % ss, z = i / (ss * ss);
        float2 v = work[x + s2 * (y + s2 * z)];
        double2 o = make_double2((double)v.x, (double)v.y);
        if (lam != 0.0) {
            double2 g = reg_at(p, i, ss, dims, lam);
            o.x += g.x;
            o.y += g.y;
        }
        ap[i] = o;
    }
}

/* ap = (fr, fi) + lambda R p (exact form) */
__global__ void k_gather(size_t n, int s, int dims, const float *fr, const float *fi,
                         const double2 *p, double lam, double2 *ap)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        double2 o = make_double2((double)fr[i], (double)fi[i]);
        if (lam != 0.0) {
            double2 g = reg_at(p, i, (size_t)s, dims, lam);
            o.x += g.x;
            o.y += g.y;
        }
        ap[i] = o;
    }
}

/* (fr, fi) = conj(p) in float, the input of F's role-swapped FHD sum */
__global__ void k_split_conj(size_t n, const double2 *p, float *fr, float *fi)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        double2 q = p[i];
        fr[i] = (float)q.x;
        fi[i] = -(float)q.y;
    }
}

__global__ void k_neg(size_t m, float *a)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < m;
         i += (size_t)gridDim.x * blockDim.x)
        a[i] = -a[i];
}

__global__ void k_to_d2(size_t n, const float *fr, const float *fi, double2 *a, double2 *b)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        double2 v = make_double2((double)fr[i], (double)fi[i]);
        a[i] = v;
        if (b) b[i] = v;
    }
}

__global__ void k_to_f(size_t n, const double2 *a, float *fr, float *fi)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        fr[i] = (float)a[i].x;
        fi[i] = (float)a[i].y;
    }
}

/* Tree sum of one value per thread into *out (thread 0): a fixed order. */
__device__ void block_sum(double v, double *out)
{
    __shared__ double sh[BLK];
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int o = BLK / 2; o > 0; o >>= 1) {
        if ((int)threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = sh[0];
}

/* Re(a^H b) per block */
__global__ void k_dot(size_t n, const double2 *a, const double2 *b, double *part)
{
    double s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        double2 u = a[i], v = b[i];
        s += u.x * v.x + u.y * v.y;
    }
    block_sum(s, &part[blockIdx.x]);
}

__global__ void k_finish(const double *part, unsigned nb, double *out)
{
    double s = 0;
    for (unsigned i = threadIdx.x; i < nb; i += BLK) s += part[i];
    block_sum(s, out);
}

/* x += alpha p, r -= alpha ap with alpha = rr / pap, and ||r||^2 per block. Does nothing when
 * pap <= 0 (the host then stops without counting the iteration, as the CPU path does). */
__global__ void k_update(size_t n, const double *rr, const double *pap, double2 *x, double2 *r,
                         const double2 *p, const double2 *ap, double *part)
{
    const double pa = *pap;
    double s = 0;
    if (pa > 0) {
        const double alpha = *rr / pa;
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
             i += (size_t)gridDim.x * blockDim.x) {
            double2 xi = x[i], ri = r[i], pi = p[i], ai = ap[i];
            xi.x += alpha * pi.x;
            xi.y += alpha * pi.y;
            ri.x -= alpha * ai.x;
            ri.y -= alpha * ai.y;
            x[i] = xi;
            r[i] = ri;
            s += ri.x * ri.x + ri.y * ri.y;
        }
    }
    block_sum(s, &part[blockIdx.x]);
}

__global__ void k_pupdate(size_t n, double beta, const double2 *r, double2 *p)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        double2 ri = r[i], pi = p[i];
        p[i] = make_double2(ri.x + beta * pi.x, ri.y + beta * pi.y);
    }
}

/* ---- the operator on the device ---- */

struct Buf {
    void *p;
    size_t bytes;
};

struct Op {
    grove_ctx *ctx;
    const char *fn;
    cudaStream_t st;
    int dims, size;
    size_t n, m, n2;
    double lambda;
    bool toeplitz;
    Buf bufs[MAX_BUFS];
    int nbufs;
    /* samples (m each) */
    float *kx, *ky, *kz, *w, *dr, *di, *zeros_m, *sr, *si;
    /* voxels (n each) */
    float *vx, *vy, *vz, *ones_n, *zeros_n, *fr, *fi;
    /* CG vectors (n each) */
    double2 *x, *r, *p, *ap;
    double *part, *scal; /* RED_BLOCKS partial sums; pap, rr, rr' */
    unsigned red_blocks;
    /* Toeplitz: FFT of the kernel, scaled by 1 / n2, and the padded work grid (n2 each) */
    cufftComplex *kern, *work;
    cufftHandle plan;
    bool have_plan;
};

grove_status cu(Op *op, cudaError_t e, const char *what)
{
    char msg[200];
    if (e == cudaSuccess) return GROVE_OK;
    snprintf(msg, sizeof msg, "%s: %s", op->fn, what);
    return grove__cuda_status(op->ctx, (int)e, msg);
}

grove_status launched(Op *op, const char *kernel)
{
    char msg[160];
    snprintf(msg, sizeof msg, "the %s kernel", kernel);
    return cu(op, cudaGetLastError(), msg);
}

grove_status fft_check(Op *op, cufftResult r, const char *what)
{
    if (r == CUFFT_SUCCESS) return GROVE_OK;
    if (r == CUFFT_ALLOC_FAILED)
        return grove__error(op->ctx, GROVE_ERR_DEVICE_OUT_OF_MEMORY,
                            "%s: cuFFT %s: out of device memory (cufftResult %d)", op->fn, what,
                            (int)r);
    return grove__error(op->ctx, GROVE_ERR_CUDA, "%s: cuFFT %s failed (cufftResult %d)", op->fn,
                        what, (int)r);
}

template <typename T>
grove_status op_alloc(Op *op, T **p, size_t count, size_t elem, const char *what)
{
    char msg[160];
    void *q = NULL;
    *p = NULL;
    if (op->nbufs == MAX_BUFS)
        return grove__error(op->ctx, GROVE_ERR_INTERNAL, "%s: too many device buffers", op->fn);
    snprintf(msg, sizeof msg, "%s: %s", op->fn, what);
    if (count != 0 && elem > (size_t)-1 / count)
        return grove__error(op->ctx, GROVE_ERR_DEVICE_OUT_OF_MEMORY,
                            "%s: %zu elements of %zu bytes do not fit in memory", msg, count, elem);
    GROVE_TRY(grove__cuda_alloc(op->ctx, &q, count * elem, op->ctx->stream, msg));
    op->bufs[op->nbufs].p = q;
    op->bufs[op->nbufs].bytes = count * elem;
    op->nbufs++;
    *p = (T *)q;
    return GROVE_OK;
}

/* Frees one buffer before the end (the Toeplitz setup's scratch). */
void op_release(Op *op, void *p)
{
    for (int i = 0; i < op->nbufs; i++)
        if (op->bufs[i].p == p) {
            grove__cuda_free(op->ctx, p, op->bufs[i].bytes, op->ctx->stream);
            op->bufs[i] = op->bufs[--op->nbufs];
            return;
        }
}

void op_free(Op *op)
{
    if (op->have_plan) cufftDestroy(op->plan);
    op->have_plan = false;
    for (int i = op->nbufs - 1; i >= 0; i--)
        grove__cuda_free(op->ctx, op->bufs[i].p, op->bufs[i].bytes, op->ctx->stream);
    op->nbufs = 0;
    /* the frees are stream-ordered: wait until the queue no longer uses the buffers */
    if (op->st) cudaStreamSynchronize(op->st);
}

grove_status op_init(Op *op, grove_ctx *ctx, const char *fn, const grove_mri_acq *acq,
                     grove_mri_fhf fhf, double lambda)
{
    const size_t m = acq->num_k;
    size_t n = 1;
    memset(op, 0, sizeof *op);
    op->ctx = ctx;
    op->fn = fn;
    GROVE_TRY(grove__cuda_use(ctx));
    op->st = (cudaStream_t)ctx->stream;
    op->dims = acq->dims;
    op->size = acq->size;
    op->lambda = lambda;
    op->toeplitz = fhf == GROVE_MRI_FHF_TOEPLITZ;
    for (int a = 0; a < acq->dims; a++) n *= (size_t)acq->size;
    op->n = n;
    op->m = m;
    GROVE_TRY(op_alloc(op, &op->kx, m, (acq->dims == 3 ? 9 : 8) * sizeof(float), "the samples"));
    {
        float *q = op->kx + m;
        op->ky = q, q += m;
        if (acq->dims == 3) op->kz = q, q += m;
        op->w = q, q += m;
        op->dr = q, q += m;
        op->di = q, q += m;
        op->zeros_m = q, q += m;
        op->sr = q, q += m;
        op->si = q;
    }
    GROVE_TRY(op_alloc(op, &op->vx, n, (acq->dims == 3 ? 7 : 6) * sizeof(float), "the voxels"));
    {
        float *q = op->vx + n;
        op->vy = q, q += n;
        if (acq->dims == 3) op->vz = q, q += n;
        op->ones_n = q, q += n;
        op->zeros_n = q, q += n;
        op->fr = q, q += n;
        op->fi = q;
    }
    GROVE_TRY(op_alloc(op, &op->x, n, 4 * sizeof(double2), "the CG vectors"));
    op->r = op->x + n;
    op->p = op->r + n;
    op->ap = op->p + n;
    op->red_blocks = grid_for(n);
    if (op->red_blocks > RED_BLOCKS) op->red_blocks = RED_BLOCKS;
    GROVE_TRY(op_alloc(op, &op->part, RED_BLOCKS + 4, sizeof(double), "the dot products"));
    op->scal = op->part + RED_BLOCKS;

    GROVE_TRY(grove__cuda_h2d(ctx, op->kx, acq->kx, m * sizeof(float), ctx->stream));
    GROVE_TRY(grove__cuda_h2d(ctx, op->ky, acq->ky, m * sizeof(float), ctx->stream));
    if (op->kz) GROVE_TRY(grove__cuda_h2d(ctx, op->kz, acq->kz, m * sizeof(float), ctx->stream));
    GROVE_TRY(grove__cuda_h2d(ctx, op->w, acq->w, m * sizeof(float), ctx->stream));
    GROVE_TRY(grove__cuda_h2d(ctx, op->dr, acq->d_r, m * sizeof(float), ctx->stream));
    GROVE_TRY(grove__cuda_h2d(ctx, op->di, acq->d_i, m * sizeof(float), ctx->stream));
    if (m)
        GROVE_TRY(cu(op, cudaMemsetAsync(op->zeros_m, 0, m * sizeof(float), op->st),
                     "clearing a buffer"));
    k_voxels<<<grid_for(n), BLK, 0, op->st>>>(n, op->size, op->vx, op->vy, op->vz, op->ones_n,
                                              op->zeros_n);
    GROVE_TRY(launched(op, "voxel positions"));
    GROVE_TRY(cu(op, cudaMemsetAsync(op->part, 0, (RED_BLOCKS + 4) * sizeof(double), op->st),
                 "clearing a buffer"));
    return GROVE_OK;
}

/* F^H W e into (fr, fi): the FHD sum with phi = (w, 0) over the acquisition's samples. */
grove_status op_fhw(Op *op, const float *er, const float *ei)
{
    grove_mri_samples k;
    grove_mri_voxels v;
    k.num_k = op->m;
    k.kx = op->kx;
    k.ky = op->ky;
    k.kz = op->kz;
    k.phi_r = op->w;
    k.phi_i = op->zeros_m;
    k.d_r = er;
    k.d_i = ei;
    v.num_x = op->n;
    v.x = op->vx;
    v.y = op->vy;
    v.z = op->vz;
    return grove__mri_sum_cuda_device(op->ctx, op->fn, 1, &k, &v, GROVE_MRI_KERNEL_AUTO, op->fr,
                                      op->fi);
}

/* The Toeplitz kernel T(delta) = sum_m w_m e^{+i 2 pi k_m . delta} on the doubled grid (the Q
 * sum with phi = (sqrt w, 0)), its FFT scaled by 1 / n2, and the plan the iterations use. */
grove_status op_toeplitz_setup(Op *op)
{
    const size_t s2 = 2 * (size_t)op->size;
    size_t n2 = 1, ws = 0;
    float *pos = NULL, *qr, *qi;
    void *area = NULL;
    grove_mri_samples k;
    grove_mri_voxels v;
    cufftResult fr;
    for (int a = 0; a < op->dims; a++) n2 *= s2;
    op->n2 = n2;
    GROVE_TRY(op_alloc(op, &op->kern, n2, 2 * sizeof(cufftComplex), "the Toeplitz kernel"));
    op->work = op->kern + n2;
    GROVE_TRY(
        op_alloc(op, &pos, n2, (size_t)op->dims * sizeof(float), "the doubled grid's offsets"));
    k_grid<<<grid_for(n2), BLK, 0, op->st>>>(n2, op->size, op->dims, pos, pos + n2,
                                             op->dims == 3 ? pos + 2 * n2 : NULL);
    GROVE_TRY(launched(op, "doubled grid"));
    k_sqrt<<<grid_for(op->m), BLK, 0, op->st>>>(op->m, op->w, op->sr);
    GROVE_TRY(launched(op, "square root"));
    k.num_k = op->m;
    k.kx = op->kx;
    k.ky = op->ky;
    k.kz = op->kz;
    k.phi_r = op->sr;
    k.phi_i = op->zeros_m;
    k.d_r = k.d_i = NULL;
    v.num_x = n2;
    v.x = pos;
    v.y = pos + n2;
    v.z = op->dims == 3 ? pos + 2 * n2 : NULL;
    qr = (float *)op->work; /* the Q sum's outputs, before the work grid is needed */
    qi = qr + n2;
    GROVE_TRY(
        grove__mri_sum_cuda_device(op->ctx, op->fn, 0, &k, &v, GROVE_MRI_KERNEL_AUTO, qr, qi));
    op_release(op, pos);
    k_interleave<<<grid_for(n2), BLK, 0, op->st>>>(n2, qr, qi, (float)(1.0 / (double)n2), op->kern);
    GROVE_TRY(launched(op, "interleave"));

    GROVE_TRY(fft_check(op, cufftCreate(&op->plan), "creating a plan"));
    op->have_plan = true;
    /* the work area comes from the context's pool, so that device_mem_limit counts it */
    GROVE_TRY(fft_check(op, cufftSetAutoAllocation(op->plan, 0), "setting up a plan"));
    if (op->dims == 2)
        fr = cufftMakePlan2d(op->plan, (int)s2, (int)s2, CUFFT_C2C, &ws);
    else
        fr = cufftMakePlan3d(op->plan, (int)s2, (int)s2, (int)s2, CUFFT_C2C, &ws);
    GROVE_TRY(fft_check(op, fr, "planning the doubled grid's FFT"));
    GROVE_TRY(fft_check(op, cufftGetSize(op->plan, &ws), "sizing the work area"));
    if (ws) {
        GROVE_TRY(op_alloc(op, (char **)&area, ws, 1, "cuFFT's work area"));
        GROVE_TRY(fft_check(op, cufftSetWorkArea(op->plan, area), "setting the work area"));
    }
    GROVE_TRY(fft_check(op, cufftSetStream(op->plan, op->st), "setting the stream"));
    GROVE_TRY(fft_check(op, cufftExecC2C(op->plan, op->kern, op->kern, CUFFT_FORWARD),
                        "transforming the Toeplitz kernel"));
    return GROVE_OK;
}

/* ap = (F^H W F + lambda R) p, queued on the stream. */
grove_status op_apply(Op *op, const double2 *p, double2 *ap)
{
    if (op->toeplitz) {
        k_pad<<<grid_for(op->n2), BLK, 0, op->st>>>(op->n2, op->size, p, op->work);
        GROVE_TRY(launched(op, "zero-padding"));
        GROVE_TRY(fft_check(op, cufftExecC2C(op->plan, op->work, op->work, CUFFT_FORWARD),
                            "forward FFT"));
        k_cmul<<<grid_for(op->n2), BLK, 0, op->st>>>(op->n2, op->work, op->kern);
        GROVE_TRY(launched(op, "spectrum product"));
        GROVE_TRY(fft_check(op, cufftExecC2C(op->plan, op->work, op->work, CUFFT_INVERSE),
                            "inverse FFT"));
        k_crop<<<grid_for(op->n), BLK, 0, op->st>>>(op->n, op->size, op->dims, op->work, p,
                                                    op->lambda, ap);
        return launched(op, "crop");
    }
    /* F p: FHD sums with e^{+ia}, F needs e^{-ia}: the role-swapped sum of conj(p), conjugated */
    {
        grove_mri_samples k;
        grove_mri_voxels v;
        k_split_conj<<<grid_for(op->n), BLK, 0, op->st>>>(op->n, p, op->fr, op->fi);
        GROVE_TRY(launched(op, "conjugate split"));
        k.num_k = op->n;
        k.kx = op->vx;
        k.ky = op->vy;
        k.kz = op->vz;
        k.phi_r = op->ones_n;
        k.phi_i = op->zeros_n;
        k.d_r = op->fr;
        k.d_i = op->fi;
        v.num_x = op->m;
        v.x = op->kx;
        v.y = op->ky;
        v.z = op->kz;
        GROVE_TRY(grove__mri_sum_cuda_device(op->ctx, op->fn, 1, &k, &v, GROVE_MRI_KERNEL_AUTO,
                                             op->sr, op->si));
        k_neg<<<grid_for(op->m), BLK, 0, op->st>>>(op->m, op->si);
        GROVE_TRY(launched(op, "negation"));
    }
    GROVE_TRY(op_fhw(op, op->sr, op->si));
    k_gather<<<grid_for(op->n), BLK, 0, op->st>>>(op->n, op->size, op->dims, op->fr, op->fi, p,
                                                  op->lambda, ap);
    return launched(op, "operator output");
}

/* *out = Re(a^H b), in device memory */
grove_status op_dot(Op *op, const double2 *a, const double2 *b, double *out)
{
    k_dot<<<op->red_blocks, BLK, 0, op->st>>>(op->n, a, b, op->part);
    GROVE_TRY(launched(op, "dot product"));
    k_finish<<<1, BLK, 0, op->st>>>(op->part, op->red_blocks, out);
    return launched(op, "dot product's sum");
}

grove_status op_read(Op *op, double *h, size_t count)
{
    char msg[160];
    GROVE_TRY(grove__cuda_d2h(op->ctx, h, op->scal, count * sizeof(double), op->ctx->stream));
    snprintf(msg, sizeof msg, "%s: waiting for the GPU", op->fn);
    return grove__cuda_sync(op->ctx, op->ctx->stream, msg);
}

grove_status op_download(Op *op, const double2 *a, float *out_r, float *out_i)
{
    char msg[160];
    k_to_f<<<grid_for(op->n), BLK, 0, op->st>>>(op->n, a, op->fr, op->fi);
    GROVE_TRY(launched(op, "image conversion"));
    GROVE_TRY(grove__cuda_d2h(op->ctx, out_r, op->fr, op->n * sizeof(float), op->ctx->stream));
    GROVE_TRY(grove__cuda_d2h(op->ctx, out_i, op->fi, op->n * sizeof(float), op->ctx->stream));
    snprintf(msg, sizeof msg, "%s: waiting for the GPU", op->fn);
    return grove__cuda_sync(op->ctx, op->ctx->stream, msg);
}

grove_status recon(Op *op, const grove_mri_acq *acq, const grove_mri_recon_opts *o, float *img_r,
                   float *img_i, grove_mri_recon_stats *sts)
{
    const size_t n = op->n;
    double t0, t1, h[3], bnorm, rr;
    int it = 0;

    /* b = F^H W d in r, p = r, x = 0 */
    t0 = now_s();
    GROVE_TRY(op_fhw(op, op->dr, op->di));
    k_to_d2<<<grid_for(n), BLK, 0, op->st>>>(n, op->fr, op->fi, op->r, op->p);
    GROVE_TRY(launched(op, "right-hand side"));
    GROVE_TRY(cu(op, cudaMemsetAsync(op->x, 0, n * sizeof(double2), op->st), "clearing x"));
    if (op->toeplitz) GROVE_TRY(op_toeplitz_setup(op));
    GROVE_TRY(op_dot(op, op->r, op->r, op->scal + 1));
    GROVE_TRY(op_read(op, h, 3));
    t1 = now_s();
    sts->setup_seconds = t1 - t0;
    (void)acq;

    rr = h[1];
    bnorm = sqrt(rr);
    sts->residual = bnorm > 0 ? 1.0 : 0.0;
    while (bnorm > 0 && sts->iters < o->max_iters && sts->residual > o->tol) {
        double *rr_dev = op->scal + 1 + (it & 1), *rr_new_dev = op->scal + 1 + ((it + 1) & 1);
        double pap, rr_new, beta;
        GROVE_TRY(op_apply(op, op->p, op->ap));
        GROVE_TRY(op_dot(op, op->p, op->ap, op->scal));
        k_update<<<op->red_blocks, BLK, 0, op->st>>>(n, rr_dev, op->scal, op->x, op->r, op->p,
                                                     op->ap, op->part);
        GROVE_TRY(launched(op, "CG update"));
        k_finish<<<1, BLK, 0, op->st>>>(op->part, op->red_blocks, rr_new_dev);
        GROVE_TRY(launched(op, "residual norm"));
        GROVE_TRY(op_read(op, h, 3));
        pap = h[0];
        /* A is positive semidefinite: p^H A p <= 0 means p lies in its null space (up to
         * rounding) and CG cannot move further (k_update left x and r as they were). */
        if (!(pap > 0)) break;
        rr_new = h[1 + ((it + 1) & 1)];
        sts->iters++;
        sts->residual = sqrt(rr_new) / bnorm;
        if (o->progress && o->progress(o->progress_user, sts->iters, o->max_iters, sts->residual))
            break;
        beta = rr_new / rr;
        rr = rr_new;
        k_pupdate<<<grid_for(n), BLK, 0, op->st>>>(n, beta, op->r, op->p);
        GROVE_TRY(launched(op, "direction update"));
        it++;
    }
    sts->seconds_per_iter = sts->iters ? (now_s() - t1) / sts->iters : 0.0;
    return op_download(op, op->x, img_r, img_i);
}

} // namespace

extern "C" grove_status grove__mri_recon_cuda(grove_ctx *ctx, const char *fn,
                                              const grove_mri_acq *acq,
                                              const grove_mri_recon_opts *o, float *img_r,
                                              float *img_i, grove_mri_recon_stats *stats)
{
    Op op;
    grove_mri_recon_stats sts;
    grove_status s = GROVE_OK;
    memset(&sts, 0, sizeof sts);
    GROVE_TRY_END(s, op_init(&op, ctx, fn, acq, o->fhf, o->lambda));
    GROVE_TRY_END(s, recon(&op, acq, o, img_r, img_i, &sts));
    if (stats) *stats = sts;
_end:
    op_free(&op);
    return s;
}

extern "C" grove_status grove__mri_normal_apply_cuda(grove_ctx *ctx, const char *fn,
                                                     const grove_mri_acq *acq, grove_mri_fhf fhf,
                                                     double lambda, const float *in_r,
                                                     const float *in_i, float *out_r, float *out_i)
{
    Op op;
    grove_status s = GROVE_OK;
    GROVE_TRY_END(s, op_init(&op, ctx, fn, acq, fhf, lambda));
    if (op.toeplitz) GROVE_TRY_END(s, op_toeplitz_setup(&op));
    GROVE_TRY_END(s, grove__cuda_h2d(ctx, op.fr, in_r, op.n * sizeof(float), ctx->stream));
    GROVE_TRY_END(s, grove__cuda_h2d(ctx, op.fi, in_i, op.n * sizeof(float), ctx->stream));
    k_to_d2<<<grid_for(op.n), BLK, 0, op.st>>>(op.n, op.fr, op.fi, op.p, NULL);
    GROVE_TRY_END(s, launched(&op, "input conversion"));
    GROVE_TRY_END(s, op_apply(&op, op.p, op.ap));
    GROVE_TRY_END(s, op_download(&op, op.ap, out_r, out_i));
_end:
    op_free(&op);
    return s;
}
