/*
 * bench_mri_cuda.cu - the CUDA half of `grove bench mri` (bench_mri.h): event-timed
 * device-resident sums and the special-function-unit bound of the device.
 */
#include <cuda_runtime.h>

#include <stdlib.h>
#include <string.h>

#include "bench_cuda.h"
#include "bench_mri.h"
#include "core_cuda.h"
#include "../src/mri/mri_cuda.h" /* grove__mri_sum_cuda_device */

namespace
{

struct Dev {
    void *p;
    size_t bytes;
};

grove_status cu(grove_ctx *ctx, cudaError_t e, const char *what)
{
    return e == cudaSuccess ? GROVE_OK : grove__cuda_status(ctx, (int)e, what);
}

} // namespace

extern "C" grove_status grove__bench_mri_sfu_bound(grove_ctx *ctx, size_t m, size_t n,
                                                   double *seconds, int *sms, double *clock_hz)
{
    int dev = 0, nsm = 0, khz = 0;
    GROVE_TRY(grove__cuda_use(ctx));
    GROVE_CUDA_TRY(ctx, cudaGetDevice(&dev), "bench mri: cudaGetDevice");
    GROVE_CUDA_TRY(ctx, cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev),
                   "bench mri: SM count");
    GROVE_CUDA_TRY(ctx, cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev),
                   "bench mri: clock rate");
    *sms = nsm;
    *clock_hz = 1e3 * (double)khz;
    *seconds = (nsm > 0 && khz > 0) ? 2.0 * (double)m * (double)n / (16.0 * nsm * *clock_hz) : 0.0;
    return GROVE_OK;
}

extern "C" grove_status grove__bench_mri_cuda(grove_ctx *ctx, int fhd, const grove_mri_samples *k,
                                              const grove_mri_voxels *v, grove_mri_kernel kernel,
                                              int warmup, int repeats, float *out_r,
                                              float *out_i, double *ms)
{
    const size_t m = k->num_k, n = v->num_x;
    const float *hk[7] = {k->kx, k->ky, k->kz, k->phi_r, k->phi_i, k->d_r, k->d_i};
    const float *hv[3] = {v->x, v->y, v->z};
    cudaStream_t st = (cudaStream_t)ctx->stream;
    cudaEvent_t e0 = NULL, e1 = NULL;
    grove_status s = GROVE_OK;
    Dev dk = {NULL, 0}, dv = {NULL, 0};
    grove_mri_samples kd;
    grove_mri_voxels vd;
    double *t = NULL;
    float *p, *dout;

    *ms = 0;
    GROVE_TRY(grove__cuda_use(ctx));
    if (repeats < 1) repeats = 1;
    t = (double *)malloc((size_t)repeats * sizeof *t);
    if (!t) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "bench mri: timing array");
    memset(&kd, 0, sizeof kd);
    memset(&vd, 0, sizeof vd);
    GROVE_TRY_END(s, grove__cuda_alloc(ctx, &dk.p, 7 * m * sizeof(float), ctx->stream,
                                       "bench mri: samples"));
    dk.bytes = 7 * m * sizeof(float);
    GROVE_TRY_END(s, grove__cuda_alloc(ctx, &dv.p, 5 * n * sizeof(float), ctx->stream,
                                       "bench mri: voxels"));
    dv.bytes = 5 * n * sizeof(float);
    p = (float *)dk.p;
    for (int a = 0; a < 7; a++, p += m) {
        if (!hk[a]) continue;
        GROVE_TRY_END(s, grove__cuda_h2d(ctx, p, hk[a], m * sizeof(float), ctx->stream));
    }
    p = (float *)dk.p;
    kd.num_k = m;
    kd.kx = p;
    kd.ky = p + m;
    kd.kz = k->kz ? p + 2 * m : NULL;
    kd.phi_r = p + 3 * m;
    kd.phi_i = p + 4 * m;
    kd.d_r = k->d_r ? p + 5 * m : NULL;
    kd.d_i = k->d_i ? p + 6 * m : NULL;
    p = (float *)dv.p;
    for (int a = 0; a < 3; a++, p += n) {
        if (!hv[a]) continue;
        GROVE_TRY_END(s, grove__cuda_h2d(ctx, p, hv[a], n * sizeof(float), ctx->stream));
    }
    p = (float *)dv.p;
    vd.num_x = n;
    vd.x = p;
    vd.y = p + n;
    vd.z = v->z ? p + 2 * n : NULL;
    dout = p + 3 * n;
    GROVE_TRY_END(s, cu(ctx, cudaEventCreate(&e0), "bench mri: event"));
    GROVE_TRY_END(s, cu(ctx, cudaEventCreate(&e1), "bench mri: event"));
    for (int r = -warmup; r < repeats; r++) {
        float e = 0;
        /* poisoned: a result that the timed run did not write fails the check */
        GROVE_TRY_END(s, cu(ctx, cudaMemsetAsync(dout, 0xff, 2 * n * sizeof(float), st),
                            "bench mri: poisoning the outputs"));
        GROVE_TRY_END(s, cu(ctx, cudaEventRecord(e0, st), "bench mri: event"));
        GROVE_TRY_END(s, grove__mri_sum_cuda_device(ctx, "bench mri", fhd, &kd, &vd, kernel,
                                                    dout, dout + n));
        GROVE_TRY_END(s, cu(ctx, cudaEventRecord(e1, st), "bench mri: event"));
        GROVE_TRY_END(s, cu(ctx, cudaEventSynchronize(e1), "bench mri: waiting for the sum"));
        GROVE_TRY_END(s, cu(ctx, cudaEventElapsedTime(&e, e0, e1), "bench mri: event time"));
        if (r >= 0) t[r] = e;
    }
    *ms = grove__bench_median(t, repeats);
    GROVE_TRY_END(s, grove__cuda_d2h(ctx, out_r, dout, n * sizeof(float), ctx->stream));
    GROVE_TRY_END(s, grove__cuda_d2h(ctx, out_i, dout + n, n * sizeof(float), ctx->stream));
    GROVE_TRY_END(s, grove__cuda_sync(ctx, ctx->stream, "bench mri: results"));
_end:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    grove__cuda_free(ctx, dv.p, dv.bytes, ctx->stream);
    grove__cuda_free(ctx, dk.p, dk.bytes, ctx->stream);
    if (s != GROVE_OK) cudaStreamSynchronize(st);
    free(t);
    return s;
}
