/*
 * cmd_mri.c - `grove mri`: the Q and FHD sums of the Parboil mri-q and mri-fhd benchmarks on
 * their input files (`grove mri q`, `grove mri fhd`), and the dispatch to `grove mri phantom`
 * and `grove mri recon` (cmd_mri_recon.c).
 *
 * The output path is tried before any work and the result is written through a temporary
 * name, so that a failure never leaves a partial file. The summary goes to stderr, as Parboil's
 * timings do, so that stdout stays empty for scripts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "grove/mri.h"

static int mri_q(int argc, char **argv);
static int mri_fhd(int argc, char **argv);

static const cli_command verbs[] = {
    {"q", "the Q sum of a Parboil mri-q input file", mri_q},
    {"fhd", "the FHD sum of a Parboil mri-fhd input file", mri_fhd},
    {"phantom", "a Shepp-Logan phantom's acquisition (and image)", cmd_mri_phantom},
    {"recon", "reconstruct an image from k-space samples (conjugate gradient)", cmd_mri_recon},
};
#define NUM_VERBS ((int)(sizeof verbs / sizeof verbs[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: grove mri <command> [options]\n"
               "\n"
               "Non-Cartesian MRI reconstruction (docs/mri.md): the Q and FHD sums of the Parboil\n"
               "mri-q and mri-fhd benchmarks, Shepp-Logan phantoms, and conjugate-gradient\n"
               "reconstruction.\n"
               "\n"
               "commands:\n");
    cli_print_commands(f, verbs, NUM_VERBS);
    fprintf(f, "\n"
               "`grove mri <command> --help` describes a command.\n"
               "exit codes: 0 ok, 1 usage error, 2 bad input, 3 runtime or device failure\n");
}

static void usage_sum(FILE *f, int fhd)
{
    const char *c = fhd ? "fhd" : "q";
    fprintf(f,
            "usage: grove mri %s IN.bin -o OUT.bin [--kernel NAME] [--backend auto|cpu|cuda]\n"
            "\n"
            "Reads a Parboil %s input file (docs/FORMATS.md, `Parboil mri-q and mri-fhd\n"
            "files'), computes for every voxel n\n"
            "\n"
            "    %s\n"
            "\n"
            "and writes a Parboil output file: uint32 numX, then float32 real[numX],\n"
            "imaginary[numX]. A summary line goes to stderr: numK, numX, kernel, backend, time\n"
            "and sample-voxel pairs per second.\n"
            "\n"
            "options:\n"
            "  -o, --output OUT  where to write the result (through a temporary file)\n"
            "  --kernel NAME   auto (default), or on the cuda backend one of the textbook\n"
            "                  variants: scatter, gather, constant, tiled, fast\n"
            "  --backend B     auto (default: CUDA when a usable GPU is found), cpu or cuda\n"
            "  -h, --help      print this help and exit\n",
            c, fhd ? "mri-fhd" : "mri-q",
            fhd ? "FHD[n] = sum over samples m of conj(phi[m]) d[m] exp(i 2 pi k_m . x_n)"
                : "Q[n] = sum over samples m of |phi[m]|^2 exp(i 2 pi k_m . x_n)");
}

static void usage_q(FILE *f) { usage_sum(f, 0); }
static void usage_fhd(FILE *f) { usage_sum(f, 1); }

int cmd_mri(int argc, char **argv)
{
    return cli_dispatch(argc, argv, "mri", verbs, NUM_VERBS, usage, "command");
}

static int run_sum(int argc, char **argv, int fhd)
{
    const char *what = fhd ? "mri fhd" : "mri q";
    void (*use)(FILE *) = fhd ? usage_fhd : usage_q;
    const char *in = NULL, *out = NULL;
    grove_backend backend = cli_default_backend;
    grove_mri_kernel kernel = GROVE_MRI_KERNEL_AUTO;
    grove_mri_parboil *pb = NULL;
    grove_ctx *ctx = NULL;
    float *re = NULL, *im = NULL;
    double t0, read_ms, sum_ms, pairs;
    grove_status s;
    cli_parser p;
    char desc[320];
    int rc;

    cli_parser_init(&p, argc, argv, what, use);
    while (cli_next(&p)) {
        if (cli_help(&p)) {
            return CLI_EXIT_OK;
        } else if (cli_value(&p, "-o") || cli_value(&p, "--output")) {
            if (!p.exit && !p.val[0]) {
                cli_error(what, "%s needs a file name", p.arg);
                p.exit = CLI_EXIT_USAGE;
            }
            out = p.val;
        } else if (cli_value(&p, "--kernel")) {
            if (!p.exit && grove_mri_kernel_parse(p.val, &kernel) != GROVE_OK) {
                cli_error(what,
                          "--kernel: unknown kernel '%s' (auto, scatter, gather, constant, "
                          "tiled or fast)",
                          p.val);
                p.exit = CLI_EXIT_USAGE;
            }
        } else if (cli_value(&p, "--backend")) {
            cli_backend(&p, &backend);
        } else if (p.positional && !in) {
            in = p.arg;
        } else {
            return cli_unknown(&p);
        }
    }
    if (p.exit) return p.exit;
    if (!in) {
        cli_error(what, "no input file given");
        use(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!out) {
        cli_error(what, "-o OUT is required");
        use(stderr);
        return CLI_EXIT_USAGE;
    }
    if (cli_probe_output(out, what)) return CLI_EXIT_FAILURE;

    rc = cli_ctx_create(what, backend, &ctx);
    if (rc != CLI_EXIT_OK) return rc;
    t0 = cli_now_ms();
    s = grove_mri_parboil_read(ctx, in, fhd, &pb);
    read_ms = cli_now_ms() - t0;
    if (s != GROVE_OK) {
        if (s == GROVE_ERR_BAD_INPUT || s == GROVE_ERR_IO)
            cli_error(what, "%s", grove_ctx_last_error(ctx));
        else
            cli_report_status(what, "reading the input", s, ctx);
        rc = cli_exit_code(s, CLI_CAUSE_INPUT);
        goto done;
    }
    re = (float *)malloc(pb->v.num_x ? pb->v.num_x * sizeof *re : 1);
    im = (float *)malloc(pb->v.num_x ? pb->v.num_x * sizeof *im : 1);
    if (!re || !im) {
        cli_error(what, "out of host memory for %zu voxels", pb->v.num_x);
        rc = CLI_EXIT_FAILURE;
        goto done;
    }
    t0 = cli_now_ms();
    s = fhd ? grove_mri_fhd(ctx, &pb->k, &pb->v, kernel, re, im)
            : grove_mri_q(ctx, &pb->k, &pb->v, kernel, re, im);
    sum_ms = cli_now_ms() - t0;
    if (s != GROVE_OK) {
        cli_report_status(what, fhd ? "computing FHD" : "computing Q", s, ctx);
        /* the reader has checked the values; what is left is the kernel or the device */
        rc = cli_exit_code(s, CLI_CAUSE_RUN);
        goto done;
    }
    s = grove_mri_parboil_write_output(ctx, out, pb->v.num_x, re, im);
    if (s != GROVE_OK) {
        cli_report_status(what, "writing the output", s, ctx);
        rc = cli_exit_code(s, CLI_CAUSE_RUN);
        goto done;
    }
    pairs = (double)pb->k.num_k * (double)pb->v.num_x;
    cli_describe_backend(ctx, desc, sizeof desc);
    fprintf(stderr,
            "grove %s: numK %zu, numX %zu, kernel %s, backend %s: %.3f ms, %.4g pairs/s "
            "(reading %.3f ms), wrote %s\n",
            what, pb->k.num_k, pb->v.num_x, grove_mri_kernel_name(kernel), desc, sum_ms,
            sum_ms > 0 ? pairs / (sum_ms * 1e-3) : 0.0, read_ms, out);
done:
    free(re);
    free(im);
    grove_mri_parboil_free(pb);
    grove_ctx_destroy(ctx);
    return rc;
}

static int mri_q(int argc, char **argv) { return run_sum(argc, argv, 0); }
static int mri_fhd(int argc, char **argv) { return run_sum(argc, argv, 1); }
