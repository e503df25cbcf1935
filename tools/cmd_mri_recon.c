/*
 * cmd_mri_recon.c - `grove mri phantom` (a Shepp-Logan phantom's acquisition, written as an
 * ISMRMRD file) and `grove mri recon` (conjugate-gradient reconstruction of an ISMRMRD
 * acquisition into a NIfTI image and PNG slices), called through `grove mri` (cmd_mri.c).
 *
 * Outputs are tried before any work and written through temporary names. The summary goes to
 * stdout; the progress bar of the reconstruction to stderr, only when stderr is a terminal.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "grove/mri.h"

#define MAX_SIZE_2D 1024
#define MAX_SIZE_3D 256

static void usage_phantom(FILE *f)
{
    fprintf(f,
            "usage: grove mri phantom -o DATA.h5 [--dim 2|3] [--size N]\n"
            "                         [--trajectory radial|spiral|stack] [--oversampling X]\n"
            "                         [--image IMAGE.nii] [--json]\n"
            "\n"
            "Makes the Shepp-Logan phantom's k-space (2-D ellipses or 3-D ellipsoids, from their\n"
            "closed-form Fourier transforms) on a radial, spiral or stack-of-stars trajectory\n"
            "with density weights, and writes it as a single-coil ISMRMRD file (docs/mri.md).\n"
            "Reconstruct it with `grove mri recon DATA.h5 -o IMAGE.nii --reference phantom',\n"
            "which also reports the NRMSE against the phantom.\n"
            "\n"
            "options:\n"
            "  -o, --output DATA.h5  where to write the acquisition (through a temporary file)\n"
            "  --dim D          2 (default) or 3\n"
            "  --size N         voxels per axis of the image it encodes, 8..%d in 2-D, 8..%d\n"
            "                   in 3-D (default 128 in 2-D, 32 in 3-D)\n"
            "  --trajectory T   radial (default), spiral, or stack (stack of stars, 3-D only);\n"
            "                   3-D radial is a kooshball, 3-D spiral a stack of spirals\n"
            "  --oversampling X samples relative to Nyquist, 0.25..16 (default 1)\n"
            "  --image IMAGE.nii  also write the phantom itself (voxel means) as NIfTI\n"
            "  --json           print the summary as one JSON object\n"
            "  -h, --help       print this help and exit\n",
            MAX_SIZE_2D, MAX_SIZE_3D);
}

static void usage_recon(FILE *f)
{
    fprintf(f, "usage: grove mri recon DATA.h5 -o IMAGE.nii [--png DIR] [--iters K] [--lambda L]\n"
               "                       [--tol T] [--fhf exact|toeplitz] [--reference phantom]\n"
               "                       [--json] [--backend auto|cpu|cuda]\n"
               "\n"
               "Reads a single-coil non-Cartesian ISMRMRD file and solves\n"
               "\n"
               "    (F^H W F + lambda R) rho = F^H W d\n"
               "\n"
               "by conjugate gradient from rho = 0 (docs/mri.md): F the non-uniform Fourier\n"
               "transform of the image grid, W the density weights, R the finite-difference\n"
               "regulariser. Writes the magnitude |rho| as a float32 NIfTI-1 file and prints a\n"
               "summary: iterations, relative residual, seconds per iteration (and the NRMSE\n"
               "against the Shepp-Logan phantom with --reference phantom).\n"
               "\n"
               "options:\n"
               "  -o, --output IMAGE.nii  where to write the image (through a temporary file)\n"
               "  --png DIR        also write PNG slices DIR/slice-0000.png, ... (one in 2-D, one\n"
               "                   per z in 3-D), all with one window: the 0.5 and 99.5\n"
               "                   percentiles of the magnitude\n"
               "  --iters K        most CG iterations, 0..100000 (default 20)\n"
               "  --tol T          stop when ||r|| / ||b|| <= T (default 1e-6)\n"
               "  --lambda L       weight of the regulariser, >= 0 (default 0)\n"
               "  --fhf F          how F^H W F is applied: toeplitz (default: the kernel once on\n"
               "                   the doubled grid, then FFTs) or exact (two direct sums per\n"
               "                   iteration)\n"
               "  --reference phantom  compare with the Shepp-Logan phantom of the data's size\n"
               "                   (for files written by `grove mri phantom') and print the NRMSE\n"
               "  --json           print the summary as one JSON object\n"
               "  --backend B      auto (default: CUDA when a usable GPU is found), cpu or cuda\n"
               "  -h, --help       print this help and exit\n"
               "\n"
               "exit codes: 0 ok, 1 usage error, 2 bad or unsupported input file, 3 runtime or\n"
               "device failure\n");
}

static const char *traj_name(grove_mri_trajectory t)
{
    switch (t) {
    case GROVE_MRI_TRAJ_RADIAL: return "radial";
    case GROVE_MRI_TRAJ_SPIRAL: return "spiral";
    case GROVE_MRI_TRAJ_STACK: return "stack";
    }
    return "?";
}

static int output_value(cli_parser *p, const char **out)
{
    if (!p->exit && !p->val[0]) {
        cli_error(p->what, "%s needs a file name", p->arg);
        p->exit = CLI_EXIT_USAGE;
    }
    *out = p->val;
    return p->exit;
}

/* ---- grove mri phantom ---- */

int cmd_mri_phantom(int argc, char **argv)
{
    static const char what[] = "mri phantom";
    grove_mri_phantom_opts o;
    const char *out = NULL, *image = NULL;
    int json = 0, size_given = 0, rc;
    long v;
    grove_ctx *ctx = NULL;
    grove_mri_acq *a = NULL;
    float *img = NULL;
    grove_status s;
    double t0, ms;
    cli_parser p;

    grove_mri_phantom_default_opts(&o);
    cli_parser_init(&p, argc, argv, what, usage_phantom);
    while (cli_next(&p)) {
        if (cli_help(&p)) {
            return CLI_EXIT_OK;
        } else if (cli_value(&p, "-o") || cli_value(&p, "--output")) {
            output_value(&p, &out);
        } else if (cli_value(&p, "--image")) {
            output_value(&p, &image);
        } else if (cli_value(&p, "--dim")) {
            if (!cli_int(&p, 2, 3, &v)) o.dims = (int)v;
        } else if (cli_value(&p, "--size")) {
            if (!cli_int(&p, 8, MAX_SIZE_2D, &v)) o.size = (int)v;
            size_given = 1;
        } else if (cli_value(&p, "--trajectory")) {
            if (p.exit) return p.exit;
            if (!strcmp(p.val, "radial"))
                o.traj = GROVE_MRI_TRAJ_RADIAL;
            else if (!strcmp(p.val, "spiral"))
                o.traj = GROVE_MRI_TRAJ_SPIRAL;
            else if (!strcmp(p.val, "stack"))
                o.traj = GROVE_MRI_TRAJ_STACK;
            else {
                cli_error(what, "--trajectory: unknown trajectory '%s' (radial, spiral or stack)",
                          p.val);
                return CLI_EXIT_USAGE;
            }
        } else if (cli_value(&p, "--oversampling")) {
            cli_double(&p, 0.25, 16, &o.oversampling);
        } else if (cli_flag(&p, "--json")) {
            json = 1;
        } else {
            return cli_unknown(&p);
        }
        if (p.exit) return p.exit;
    }
    if (p.exit) return p.exit;
    if (!out) {
        cli_error(what, "-o DATA.h5 is required");
        usage_phantom(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!size_given && o.dims == 3) o.size = 32;
    if (o.dims == 3 && o.size > MAX_SIZE_3D) {
        cli_error(what, "--size: %d is above %d for a 3-D phantom", o.size, MAX_SIZE_3D);
        return CLI_EXIT_USAGE;
    }
    if (o.traj == GROVE_MRI_TRAJ_STACK && o.dims != 3) {
        cli_error(what, "--trajectory stack is 3-D only: add --dim 3");
        return CLI_EXIT_USAGE;
    }
    if (!grove_mri_has_ismrmrd()) {
        cli_error(what, "this build of grove cannot write ISMRMRD files (libismrmrd was not "
                        "found when it was built)");
        return CLI_EXIT_FAILURE;
    }
    if (cli_probe_output(out, what)) return CLI_EXIT_FAILURE;
    if (image && cli_probe_output(image, what)) return CLI_EXIT_FAILURE;

    rc = cli_ctx_create(what, GROVE_BACKEND_CPU, &ctx);
    if (rc != CLI_EXIT_OK) return rc;
    t0 = cli_now_ms();
    s = grove_mri_phantom(ctx, &o, &a);
    if (s != GROVE_OK) {
        cli_report_status(what, "making the phantom", s, ctx);
        rc = cli_exit_code(s, CLI_CAUSE_OPTIONS);
        goto done;
    }
    s = grove_mri_ismrmrd_write(ctx, out, a);
    if (s != GROVE_OK) {
        cli_report_status(what, "writing the acquisition", s, ctx);
        rc = cli_exit_code(s, CLI_CAUSE_RUN);
        goto done;
    }
    if (image) {
        size_t n = (size_t)o.size * (size_t)o.size * (o.dims == 3 ? (size_t)o.size : 1);
        img = (float *)malloc(n * sizeof(float));
        if (!img) {
            cli_error(what, "out of host memory for a %zu-voxel image", n);
            rc = CLI_EXIT_FAILURE;
            goto done;
        }
        grove_mri_phantom_image(o.dims, o.size, img);
        s = grove_mri_write_nifti(ctx, image, o.dims, o.size, img);
        if (s != GROVE_OK) {
            cli_report_status(what, "writing the phantom image", s, ctx);
            rc = cli_exit_code(s, CLI_CAUSE_RUN);
            goto done;
        }
    }
    ms = cli_now_ms() - t0;
    if (json) {
        printf("{\"dims\": %d, \"size\": %d, \"trajectory\": \"%s\", \"oversampling\": ", o.dims,
               o.size, traj_name(o.traj));
        cli_json_number(stdout, o.oversampling);
        printf(", \"samples\": %zu, \"seconds\": ", a->num_k);
        cli_json_number(stdout, ms * 1e-3);
        printf(", \"output\": ");
        cli_json_string(stdout, out);
        printf(", \"image\": ");
        cli_json_string(stdout, image);
        printf("}\n");
    } else {
        printf("grove mri phantom: %d-D Shepp-Logan, %d voxels per axis, %s trajectory "
               "(oversampling %g): %zu samples in %.2f s\n",
               o.dims, o.size, traj_name(o.traj), o.oversampling, a->num_k, ms * 1e-3);
        printf("wrote %s%s%s\n", out, image ? " and " : "", image ? image : "");
        printf("reconstruct: grove mri recon %s -o IMAGE.nii --reference phantom\n", out);
    }
done:
    free(img);
    grove_mri_acq_free(a);
    grove_ctx_destroy(ctx);
    return rc;
}

/* ---- grove mri recon ---- */

typedef struct progress_state {
    int tty;
    double t0;
} progress_state;

static int on_progress(void *user, int iter, int max_iters, double residual)
{
    progress_state *ps = (progress_state *)user;
    int width = 30, fill = max_iters > 0 ? (int)((double)width * iter / max_iters) : width;
    if (!ps->tty) return 0;
    fprintf(stderr, "\rgrove mri recon: [");
    for (int i = 0; i < width; i++) fputc(i < fill ? '#' : '.', stderr);
    fprintf(stderr, "] %d/%d  residual %.2e  %.1f s ", iter, max_iters, residual,
            (cli_now_ms() - ps->t0) * 1e-3);
    fflush(stderr);
    return 0;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Writes every z slice of mag as DIR/slice-NNNN.png with one window for all. */
static int write_pngs(grove_ctx *ctx, const char *what, const char *dir, int dims, int size,
                      const float *mag)
{
    size_t slice = (size_t)size * (size_t)size, n = slice * (dims == 3 ? (size_t)size : 1);
    float *c = (float *)malloc(n * sizeof(float)), lo, hi;
    int nz = dims == 3 ? size : 1;
    if (!c) {
        cli_error(what, "out of host memory");
        return CLI_EXIT_FAILURE;
    }
    memcpy(c, mag, n * sizeof(float));
    qsort(c, n, sizeof(float), cmp_float);
    lo = c[(size_t)(0.005 * (double)(n - 1) + 0.5)];
    hi = c[(size_t)(0.995 * (double)(n - 1) + 0.5)];
    free(c);
    if (!(hi > lo)) hi = lo + 1.0f; /* a constant image: all black */
    for (int z = 0; z < nz; z++) {
        char name[32];
        char *path;
        grove_status s;
        snprintf(name, sizeof name, "slice-%04d.png", z);
        path = cli_path_join(dir, name);
        if (!path) {
            cli_error(what, "out of host memory");
            return CLI_EXIT_FAILURE;
        }
        s = grove_mri_write_png(ctx, path, size, mag + (size_t)z * slice, lo, hi);
        free(path);
        if (s != GROVE_OK) {
            cli_report_status(what, "writing a PNG slice", s, ctx);
            return cli_exit_code(s, CLI_CAUSE_RUN);
        }
    }
    return CLI_EXIT_OK;
}

int cmd_mri_recon(int argc, char **argv)
{
    static const char what[] = "mri recon";
    grove_mri_recon_opts ro;
    grove_mri_recon_stats stats;
    grove_backend backend = cli_default_backend;
    const char *in = NULL, *out = NULL, *png_dir = NULL;
    int json = 0, reference = 0, rc = CLI_EXIT_OK;
    long v;
    grove_ctx *ctx = NULL;
    grove_mri_acq *a = NULL;
    float *ir = NULL, *ii = NULL, *ref = NULL;
    double nrmse = NAN, t0, read_ms, total_ms;
    size_t n = 0;
    progress_state ps;
    grove_status s;
    cli_parser p;
    char desc[320];

    grove_mri_recon_default_opts(&ro);
    cli_parser_init(&p, argc, argv, what, usage_recon);
    while (cli_next(&p)) {
        if (cli_help(&p)) {
            return CLI_EXIT_OK;
        } else if (cli_value(&p, "-o") || cli_value(&p, "--output")) {
            output_value(&p, &out);
        } else if (cli_value(&p, "--png")) {
            if (!p.exit && !p.val[0]) {
                cli_error(what, "--png needs a directory");
                return CLI_EXIT_USAGE;
            }
            png_dir = p.val;
        } else if (cli_value(&p, "--iters")) {
            if (!cli_int(&p, 0, 100000, &v)) ro.max_iters = (int)v;
        } else if (cli_value(&p, "--tol")) {
            cli_double(&p, 0, HUGE_VAL, &ro.tol);
        } else if (cli_value(&p, "--lambda")) {
            cli_double(&p, 0, HUGE_VAL, &ro.lambda);
        } else if (cli_value(&p, "--fhf")) {
            if (p.exit) return p.exit;
            if (!strcmp(p.val, "exact"))
                ro.fhf = GROVE_MRI_FHF_EXACT;
            else if (!strcmp(p.val, "toeplitz"))
                ro.fhf = GROVE_MRI_FHF_TOEPLITZ;
            else {
                cli_error(what, "--fhf: unknown form '%s' (exact or toeplitz)", p.val);
                return CLI_EXIT_USAGE;
            }
        } else if (cli_value(&p, "--reference")) {
            if (p.exit) return p.exit;
            if (strcmp(p.val, "phantom") != 0) {
                cli_error(what, "--reference: only 'phantom' is supported, got '%s'", p.val);
                return CLI_EXIT_USAGE;
            }
            reference = 1;
        } else if (cli_value(&p, "--backend")) {
            cli_backend(&p, &backend);
        } else if (cli_flag(&p, "--json")) {
            json = 1;
        } else if (p.positional && !in) {
            in = p.arg;
        } else {
            return cli_unknown(&p);
        }
        if (p.exit) return p.exit;
    }
    if (p.exit) return p.exit;
    if (!in) {
        cli_error(what, "no input file given");
        usage_recon(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!out) {
        cli_error(what, "-o IMAGE.nii is required");
        usage_recon(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!grove_mri_has_ismrmrd()) {
        cli_error(what, "this build of grove cannot read ISMRMRD files (libismrmrd was not found "
                        "when it was built)");
        return CLI_EXIT_FAILURE;
    }
    if (png_dir && !grove_mri_has_png()) {
        cli_error(what, "--png: this build of grove cannot write PNG files (libpng was not "
                        "found when it was built)");
        return CLI_EXIT_FAILURE;
    }
    if (cli_probe_output(out, what)) return CLI_EXIT_FAILURE;
    if (png_dir && cli_mkdirs(png_dir) != 0) {
        cli_error(what, "cannot create directory '%s': %s", png_dir, strerror(errno));
        return CLI_EXIT_FAILURE;
    }

    rc = cli_ctx_create(what, backend, &ctx);
    if (rc != CLI_EXIT_OK) return rc;
    t0 = cli_now_ms();
    s = grove_mri_ismrmrd_read(ctx, in, &a);
    read_ms = cli_now_ms() - t0;
    if (s != GROVE_OK) {
        cli_error(what, "%s", grove_ctx_last_error(ctx));
        /* a file this build cannot reconstruct (multi-coil, Cartesian) is the input's fault */
        rc = s == GROVE_ERR_UNSUPPORTED ? CLI_EXIT_BAD_INPUT : cli_exit_code(s, CLI_CAUSE_INPUT);
        goto done;
    }
    n = (size_t)a->size * (size_t)a->size * (a->dims == 3 ? (size_t)a->size : 1);
    ir = (float *)malloc(n * sizeof(float));
    ii = (float *)malloc(n * sizeof(float));
    if (!ir || !ii) {
        cli_error(what, "out of host memory for a %zu-voxel image", n);
        rc = CLI_EXIT_FAILURE;
        goto done;
    }
    ps.tty = isatty(fileno(stderr));
    ps.t0 = cli_now_ms();
    ro.progress = on_progress;
    ro.progress_user = &ps;
    if (ps.tty) {
        fprintf(stderr, "grove mri recon: %zu samples, %d-D %d^%d image: setting up...", a->num_k,
                a->dims, a->size, a->dims);
        fflush(stderr);
    }
    s = grove_mri_recon(ctx, a, &ro, ir, ii, &stats);
    if (ps.tty) fputc('\n', stderr);
    if (s != GROVE_OK) {
        cli_report_status(what, "reconstructing", s, ctx);
        rc = s == GROVE_ERR_BAD_INPUT ? CLI_EXIT_BAD_INPUT : cli_exit_code(s, CLI_CAUSE_RUN);
        goto done;
    }
    for (size_t i = 0; i < n; i++) ir[i] = hypotf(ir[i], ii[i]); /* the magnitude, in place */
    if (reference) {
        if (a->size < 1 || a->size > 1024) {
            cli_error(what, "--reference phantom: no phantom of size %d", a->size);
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        ref = ii; /* the imaginary part is no longer needed */
        grove_mri_phantom_image(a->dims, a->size, ref);
        nrmse = grove_mri_nrmse(ir, ref, n);
    }
    s = grove_mri_write_nifti(ctx, out, a->dims, a->size, ir);
    if (s != GROVE_OK) {
        cli_report_status(what, "writing the image", s, ctx);
        rc = cli_exit_code(s, CLI_CAUSE_RUN);
        goto done;
    }
    if (png_dir) {
        rc = write_pngs(ctx, what, png_dir, a->dims, a->size, ir);
        if (rc != CLI_EXIT_OK) goto done;
    }
    total_ms = cli_now_ms() - t0;
    cli_describe_backend(ctx, desc, sizeof desc);
    if (json) {
        printf("{\"input\": ");
        cli_json_string(stdout, in);
        printf(", \"dims\": %d, \"size\": %d, \"samples\": %zu, \"backend\": ", a->dims, a->size,
               a->num_k);
        cli_json_string(stdout, desc);
        printf(", \"fhf\": \"%s\", \"lambda\": ",
               ro.fhf == GROVE_MRI_FHF_EXACT ? "exact" : "toeplitz");
        cli_json_number(stdout, ro.lambda);
        printf(", \"iterations\": %d, \"residual\": ", stats.iters);
        cli_json_number(stdout, stats.residual);
        printf(", \"setup_seconds\": ");
        cli_json_number(stdout, stats.setup_seconds);
        printf(", \"seconds_per_iteration\": ");
        cli_json_number(stdout, stats.seconds_per_iter);
        printf(", \"seconds\": ");
        cli_json_number(stdout, total_ms * 1e-3);
        printf(", \"nrmse\": ");
        cli_json_number(stdout, nrmse);
        printf(", \"output\": ");
        cli_json_string(stdout, out);
        printf("}\n");
    } else {
        printf("grove mri recon: %s: %d-D, %d voxels per axis, %zu samples (read in %.2f s); "
               "backend %s\n",
               in, a->dims, a->size, a->num_k, read_ms * 1e-3, desc);
        printf("F^H W F %s, lambda %g: %d iterations, residual %.3e, setup %.3f s, "
               "%.4f s per iteration, total %.2f s\n",
               ro.fhf == GROVE_MRI_FHF_EXACT ? "exact" : "toeplitz", ro.lambda, stats.iters,
               stats.residual, stats.setup_seconds, stats.seconds_per_iter, total_ms * 1e-3);
        if (reference) printf("NRMSE against the Shepp-Logan phantom: %.4f\n", nrmse);
        printf("wrote %s (magnitude)", out);
        if (png_dir)
            printf(" and %d PNG slice%s in %s", a->dims == 3 ? a->size : 1, a->dims == 3 ? "s" : "",
                   png_dir);
        printf("\n");
    }
done:
    free(ir);
    free(ii);
    grove_mri_acq_free(a);
    grove_ctx_destroy(ctx);
    return rc;
}
