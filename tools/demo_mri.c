/*
 * demo_mri.c - the mri module's part of `grove demo`: a 2-D Shepp-Logan phantom on a radial
 * trajectory, reconstructed by conjugate gradient (Toeplitz normal operator where the build has
 * FFTW, else the exact one), checked against the phantom by NRMSE and, on CUDA, against the CPU
 * backend's image; with --out DIR the image is written as DIR/mri-recon.png.
 *
 * The part does not scale with --size: a reconstruction's cost grows with samples times voxels,
 * and a 64 x 64 image (32 x 32 in the warm-up) already shows the whole pipeline in about a
 * second on the CPU.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "grove/mri.h"

int cli_demo_mri(cli_demo *d);

/* Measured NRMSE of 20 iterations (docs/mri.md) plus about 10%: a wrong sign, scale or weight
 * gives more than 0.5. */
#define DEMO_NRMSE_32 0.26
#define DEMO_NRMSE_64 0.235

int cli_demo_mri(cli_demo *d)
{
    const char *module = "mri";
    grove_mri_phantom_opts po;
    grove_mri_recon_opts ro;
    grove_mri_recon_stats st;
    grove_mri_acq *a = NULL;
    int size = d->quiet ? 32 : 64, ok;
    size_t n = (size_t)size * (size_t)size;
    float *ir = NULL, *ii, *ref, *cpu;
    double t0, ms, nrmse, bound = size == 32 ? DEMO_NRMSE_32 : DEMO_NRMSE_64;
    char step[48];
    grove_status s;

    grove_mri_phantom_default_opts(&po);
    po.size = size;
    t0 = cli_now_ms();
    s = grove_mri_phantom(d->ctx, &po, &a);
    ms = cli_now_ms() - t0;
    snprintf(step, sizeof step, "phantom (2-D radial, %d^2)", size);
    cli_demo_row(d, module, step, a ? a->num_k : 0, ms, s, d->ctx, s == GROVE_OK);
    if (s != GROVE_OK) return s == GROVE_ERR_OUT_OF_MEMORY ? -1 : 0;

    ir = (float *)malloc(4 * n * sizeof(float));
    if (!ir) {
        cli_error("demo", "out of host memory");
        grove_mri_acq_free(a);
        return -1;
    }
    ii = ir + n;
    ref = ii + n;
    cpu = ref + n;
    grove_mri_recon_default_opts(&ro);
    ro.max_iters = 20;
    ro.tol = 0;
    ro.fhf = GROVE_MRI_FHF_TOEPLITZ;
    t0 = cli_now_ms();
    s = grove_mri_recon(d->ctx, a, &ro, ir, ii, &st);
    if (s == GROVE_ERR_UNSUPPORTED) { /* no FFTW in this build */
        ro.fhf = GROVE_MRI_FHF_EXACT;
        t0 = cli_now_ms();
        s = grove_mri_recon(d->ctx, a, &ro, ir, ii, &st);
    }
    ms = cli_now_ms() - t0;
    snprintf(step, sizeof step, "recon (CG %s, %d iters)",
             ro.fhf == GROVE_MRI_FHF_EXACT ? "exact" : "Toeplitz", ro.max_iters);
    ok = 0;
    if (s == GROVE_OK) {
        grove_mri_phantom_image(2, size, ref);
        nrmse = grove_mri_nrmse(ir, ref, n);
        ok = nrmse < bound;
        if (!ok)
            cli_error("demo", "%s: check failed: NRMSE against the phantom %.4f >= %.3f", step,
                      nrmse, bound);
        if (ok && d->ref) {
            /* the GPU sums in float: the images agree to the kernels' accuracy, not bitwise */
            grove_status rs = grove_mri_recon(d->ref, a, &ro, cpu, ref, NULL);
            double diff = rs == GROVE_OK ? grove_mri_nrmse(ir, cpu, n) : INFINITY;
            if (rs != GROVE_OK) cli_report_status("demo", step, rs, d->ref);
            ok = diff < 2e-3;
            if (!ok && rs == GROVE_OK)
                cli_error("demo", "%s: the image differs from the CPU backend's by %.3e", step,
                          diff);
        }
    }
    cli_demo_row(d, module, step, n, ms, s, d->ctx, ok);
    if (s == GROVE_OK && ok && d->out_dir && !d->quiet && grove_mri_has_png()) {
        char *path = cli_path_join(d->out_dir, "mri-recon.png");
        for (size_t i = 0; i < n; i++) ir[i] = hypotf(ir[i], ii[i]);
        t0 = cli_now_ms();
        s = path ? grove_mri_write_png(d->ctx, path, size, ir, 0, 0) : GROVE_ERR_OUT_OF_MEMORY;
        ms = cli_now_ms() - t0;
        cli_demo_row(d, module, "write PNG (mri-recon.png)", n, ms, s, d->ctx, s == GROVE_OK);
        free(path);
    }
    free(ir);
    grove_mri_acq_free(a);
    return 0;
}
