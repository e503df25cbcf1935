/*
 * bench_bezier_cuda.cu - the GPU rows of `grove bench bezier` (bench_bezier.c describes them):
 * the curves go to the device once; a device-to-device copy of the output's size gives the
 * bandwidth of this run; each variant's grove_bezier_tessellate_device call is checked against
 * the CPU result, then timed with CUDA events on the context's stream.
 */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cuda.h"
#include "core_cuda.h"
#include "grove/bezier.h"

/* bezier_cuda.h's hooks: the tile writer's chunk width (16: flat's before 2026-11-28); the
 * flat kernel's variant (1: a block a tile, the scheduling before persistent blocks); the cdp
 * child's (1: a tile a block, the child before children of 4 tiles) */
extern "C" void grove__bz_flat_tune(int per);
extern "C" void grove__bz_flat_mode(int mode);
extern "C" void grove__bz_cdp_mode(int mode);
extern "C" void grove__bz_flat_events(void *e0, void *e1);

namespace
{

struct Dev {
    grove_ctx *ctx;
    cudaStream_t s;
    float *cp, *xy, *xy2;
    uint8_t *deg;
    uint64_t *off;
    cudaEvent_t e0, e1, k0, k1; /* around the call; around flat's kernel (the hook) */
    ~Dev()
    {
        grove__bz_flat_events(nullptr, nullptr);
        cudaStreamSynchronize(s);
        void *b[] = {cp, xy, xy2, deg, off};
        for (void *p : b)
            if (p) cudaFree(p);
        if (e0) cudaEventDestroy(e0);
        if (e1) cudaEventDestroy(e1);
        if (k0) cudaEventDestroy(k0);
        if (k1) cudaEventDestroy(k1);
        cudaGetLastError(); /* teardown after a failure must not leave an error behind */
    }
};

#define BTRY(d, call, what) GROVE_CUDA_TRY((d).ctx, call, what)

/* The median of `repeats` calls of run after `warmup`, from events around each call; with kms,
 * also the median between d.k0 and d.k1, which run records inside the call (the hook). */
template <typename F>
grove_status time_ms(Dev &d, int warmup, int repeats, F run, double *ms, double *kms = nullptr)
{
    const size_t r = (size_t)(repeats > 0 ? repeats : 1);
    double *t = (double *)malloc(2 * r * sizeof(double));
    if (!t) return grove__error(d.ctx, GROVE_ERR_OUT_OF_MEMORY, "bench bezier: timing buffer");
    grove_status st = GROVE_OK;
    for (int i = 0; i < warmup + repeats; i++) {
        float f = 0, fk = 0;
        cudaEventRecord(d.e0, d.s);
        if ((st = run()) != GROVE_OK) break;
        cudaEventRecord(d.e1, d.s);
        cudaError_t e = cudaEventSynchronize(d.e1);
        if (e == cudaSuccess) e = cudaEventElapsedTime(&f, d.e0, d.e1);
        if (e == cudaSuccess && kms) e = cudaEventElapsedTime(&fk, d.k0, d.k1);
        if (e != cudaSuccess) {
            st = grove__cuda_status(d.ctx, (int)e, "bench bezier: timing");
            break;
        }
        if (i >= warmup) t[i - warmup] = f, t[r + (size_t)(i - warmup)] = fk;
    }
    if (st == GROVE_OK) *ms = grove__bench_median(t, repeats);
    if (st == GROVE_OK && kms) *kms = grove__bench_median(t + r, repeats);
    free(t);
    return st;
}

} // namespace

extern "C" grove_status grove__bench_bezier_cuda(grove_ctx *ctx, const grove_curves *in,
                                                 const grove_polylines *ref, const char *size_name,
                                                 int warmup, int repeats, grove_bench_row *rows,
                                                 int max_rows, int *nrows)
{
    const size_t n = in->n;
    const uint64_t tv = ref->n_vertices;
    const size_t xy_bytes = (size_t)tv * 2 * sizeof(float);
    const double bytes = 41.0 * (double)n + 8.0 * (double)tv;
    Dev d = {ctx, (cudaStream_t)ctx->stream, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    float *h_xy = (float *)malloc(xy_bytes ? xy_bytes : 1);
    uint64_t *h_off = (uint64_t *)malloc((n + 1) * sizeof(uint64_t));
    grove_status st = GROVE_OK;
    double copy_gbps = 0, ms = 0;
    char op[48];
    if (!h_xy || !h_off) {
        free(h_xy);
        free(h_off);
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "bench bezier: host result buffers");
    }
#define ETRY(call, what)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            st = grove__cuda_status(ctx, (int)e_, what);                                           \
            goto _end;                                                                             \
        }                                                                                          \
    } while (0)
    ETRY(cudaEventCreate(&d.e0), "bench bezier: events");
    ETRY(cudaEventCreate(&d.e1), "bench bezier: events");
    ETRY(cudaEventCreate(&d.k0), "bench bezier: events");
    ETRY(cudaEventCreate(&d.k1), "bench bezier: events");
    ETRY(cudaMalloc((void **)&d.cp, 8 * n * sizeof(float)), "bench bezier: curves");
    ETRY(cudaMalloc((void **)&d.deg, n), "bench bezier: degrees");
    ETRY(cudaMalloc((void **)&d.off, (n + 1) * sizeof(uint64_t)), "bench bezier: offsets");
    ETRY(cudaMalloc((void **)&d.xy, xy_bytes + 16), "bench bezier: vertices");
    ETRY(cudaMalloc((void **)&d.xy2, xy_bytes + 16), "bench bezier: copy target");
    ETRY(cudaMemcpy(d.cp, in->cp, 8 * n * sizeof(float), cudaMemcpyHostToDevice),
         "bench bezier: uploading the curves");
    ETRY(cudaMemcpy(d.deg, in->degree, n, cudaMemcpyHostToDevice),
         "bench bezier: uploading the degrees");

    /* the copy: the CPU's vertices, copied on the device and checked */
    ETRY(cudaMemcpy(d.xy, ref->xy, xy_bytes, cudaMemcpyHostToDevice), "bench bezier: copy input");
    {
        auto run = [&]() -> grove_status {
            GROVE_CUDA_TRY(ctx,
                           cudaMemcpyAsync(d.xy2, d.xy, xy_bytes, cudaMemcpyDeviceToDevice, d.s),
                           "bench bezier: device-to-device copy");
            return GROVE_OK;
        };
        GROVE_TRY_END(st, time_ms(d, warmup, repeats, run, &ms));
        ETRY(cudaMemcpy(h_xy, d.xy2, xy_bytes, cudaMemcpyDeviceToHost), "bench bezier: copy check");
        copy_gbps = ms > 0 ? 2.0 * (double)xy_bytes / (ms * 1e6) : 0;
        snprintf(op, sizeof op, "copy_%s", size_name);
        grove__bench_add_row(rows, max_rows, nrows, op, "copy", (size_t)tv, ms,
                             2.0 * (double)xy_bytes, copy_gbps, 0.0,
                             memcmp(h_xy, ref->xy, xy_bytes) == 0);
    }

    /* the count and scan alone (the part both variants share) */
    if (*nrows < max_rows) {
        grove_bezier_opts o;
        uint64_t total = 0;
        grove_bezier_default_opts(&o);
        auto run = [&]() -> grove_status {
            return grove_bezier_count_device(ctx, d.cp, d.deg, n, &o, d.off, &total);
        };
        GROVE_TRY_END(st, time_ms(d, warmup, repeats, run, &ms));
        ETRY(cudaMemcpy(h_off, d.off, (n + 1) * sizeof(uint64_t), cudaMemcpyDeviceToHost),
             "bench bezier: offsets");
        snprintf(op, sizeof op, "count_scan_%s", size_name);
        grove__bench_add_row(
            rows, max_rows, nrows, op, "grove", n, ms, 41.0 * (double)n, copy_gbps, 0.0,
            total == tv && !memcmp(h_off, ref->offsets, (n + 1) * sizeof(uint64_t)));
    }

    /* v: 0 flat, 1 cdp, 2 flat with a block a tile (the hook), 3 cdp with children of a tile a
     * block (the hook), 4 flat in chunks of 16 vertices a thread (the hook), 5 flat taking the
     * next tile at the start of the current one's last chunk, in chunks of 32 vertices a thread
     * (the hooks; the default until the twentieth session, 2026-11-29), 6 flat in chunks of 32
     * vertices a thread (the hook; the default until 2026-11-29, when it became 64), 7 flat
     * looking back before the writer's preparation (the hook; the default until the
     * twenty-first session, 2026-11-29) */
    for (int v = 0; v < 8 && *nrows < max_rows; v++) {
        grove_bezier_opts o;
        grove_bezier_stats bs;
        uint64_t total = 0;
        int checked, w = warmup, r = repeats;
        grove_bezier_default_opts(&o);
        const int cdp = v == 1 || v == 3;
        o.variant = cdp ? GROVE_BEZIER_CDP : GROVE_BEZIER_FLAT;
        grove__bz_flat_tune(v == 4 ? 16 : v == 5 || v == 6 ? 32 : 0);
        grove__bz_flat_mode(v == 2 ? 1 : v == 5 ? 7 : v == 7 ? 8 : 0);
        grove__bz_cdp_mode(v == 3 ? 1 : 0);
        auto run = [&]() -> grove_status {
            return grove_bezier_tessellate_device(ctx, d.cp, d.deg, n, &o, d.off, d.xy, tv, &total,
                                                  &bs);
        };
        /* the check run, poisoned output first; it also tells how long a call takes */
        ETRY(cudaMemsetAsync(d.xy, 0xff, xy_bytes, d.s), "bench bezier: poisoning the output");
        GROVE_TRY_END(st, time_ms(d, 0, 1, run, &ms));
        ETRY(cudaMemcpy(h_xy, d.xy, xy_bytes, cudaMemcpyDeviceToHost), "bench bezier: result");
        ETRY(cudaMemcpy(h_off, d.off, (n + 1) * sizeof(uint64_t), cudaMemcpyDeviceToHost),
             "bench bezier: offsets");
        checked = total == tv && memcmp(h_xy, ref->xy, xy_bytes) == 0 &&
                  memcmp(h_off, ref->offsets, (n + 1) * sizeof(uint64_t)) == 0;
        if (!checked)
            grove__error(ctx, GROVE_ERR_INTERNAL,
                         "bench bezier: %s %s differs from the CPU backend", size_name,
                         cdp ? "cdp" : "flat");
        if (ms > 200.0) { /* slow calls: the check run was the warm-up */
            w = 0;
            r = repeats < 3 ? repeats : 3;
        }
        GROVE_TRY_END(st, time_ms(d, w, r, run, &ms));
        grove__bz_flat_tune(0);
        grove__bz_flat_mode(0);
        grove__bz_cdp_mode(0);
        if (cdp)
            snprintf(op, sizeof op, v == 3 ? "cdp_tile_%s_launches=%llu" : "cdp_%s_launches=%llu",
                     size_name, (unsigned long long)bs.child_launches);
        else
            snprintf(op, sizeof op,
                     v == 2   ? "flat_tile_%s"
                     : v == 4 ? "flat_k16_%s"
                     : v == 6 ? "flat_k32_%s"
                     : v == 7 ? "flat_nopre_%s"
                     : v == 5 ? "flat_last_%s"
                              : "flat_%s",
                     size_name);
        grove__bench_add_row(rows, max_rows, nrows, op, "grove", (size_t)tv, ms, bytes, copy_gbps,
                             0.0, checked);
        if (v == 0 && *nrows < max_rows) {
            /* flat's kernel: the default call again, with events recorded inside it just
             * before and after its kernel's launch, so that the wait for the results, the
             * host's return and the closing event are left out (the launch's submission is
             * in); checked as above (the same call) */
            double kms = 0;
            grove__bz_flat_events(d.k0, d.k1);
            const grove_status ts = time_ms(d, w, r, run, &ms, &kms);
            grove__bz_flat_events(nullptr, nullptr);
            GROVE_TRY_END(st, ts);
            snprintf(op, sizeof op, "flat_kernel_%s", size_name);
            grove__bench_add_row(rows, max_rows, nrows, op, "grove", (size_t)tv, kms, bytes,
                                 copy_gbps, 0.0, checked);
        }
    }
#undef ETRY
_end:
    grove__bz_flat_tune(0);
    grove__bz_flat_mode(0);
    grove__bz_cdp_mode(0);
    free(h_xy);
    free(h_off);
    return st;
}
