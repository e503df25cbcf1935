/*
 * cmd_octree.c - `grove octree build|query|export`: builds the octree of a point cloud (LAS,
 * PLY or text) and writes it as a Potree 2.0 directory plus grove's own copy of the tree
 * (grove.octree); answers box and radius queries from that copy; exports the points a viewer
 * draws at one level of detail as PLY.
 *
 * Inputs that cannot be read, including LAZ (compressed, not supported), exit 2. The options
 * are checked first (the library's own check of them together), then the output directory is
 * created and tried, before the input is read; every file is written through a temporary
 * name, so that a failure never leaves a partial one, and a failed build removes the output
 * directory again if it created it.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "grove/io.h"
#include "grove/octree.h"

static int ot_build(int argc, char **argv);
static int ot_query(int argc, char **argv);
static int ot_export(int argc, char **argv);

static const cli_command verbs[] = {
    {"build", "build the octree of a point cloud and write a Potree 2.0 directory", ot_build},
    {"query", "points inside a box or a sphere, from a directory written by build", ot_query},
    {"export", "the points of one level of detail of a Potree directory, as PLY", ot_export},
};
#define NUM_VERBS ((int)(sizeof verbs / sizeof verbs[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: grove octree <command> [options]\n"
               "\n"
               "Octrees of 3-D point clouds with level-of-detail samples in the inner nodes\n"
               "(docs/octree.md), written as Potree 2.0 directories that the Potree viewer\n"
               "opens (docs/FORMATS.md). A point's index is its 0-based record order in the\n"
               "input file.\n"
               "\n"
               "commands:\n");
    cli_print_commands(f, verbs, NUM_VERBS);
    fprintf(f, "\n"
               "`grove octree <command> --help` describes a command.\n"
               "exit codes: 0 ok, 1 usage error, 2 bad input, 3 runtime or device failure\n");
}

static void usage_build(FILE *f)
{
    fprintf(f, "usage: grove octree build POINTS -o DIR [--max-points N] [--batch N]\n"
               "                          [--max-depth D] [--lod-grid G] [--json]\n"
               "                          [--backend auto|cpu|cuda]\n"
               "\n"
               "Reads POINTS (.las LAS 1.2-1.4 point formats 0-3 and 6-8, .ply, or .csv .txt\n"
               ".xyz text; LAZ is not supported), builds the octree and writes DIR (created if\n"
               "missing): metadata.json, hierarchy.bin and octree.bin (Potree 2.0, with the\n"
               "colour and intensity the input has) and grove.octree (for `grove octree\n"
               "query'). Text has colour and intensity when a header line names the columns:\n"
               "x y z, r g b (0..255) and i (0..65535), or red green blue intensity, in any\n"
               "order. Prints a summary: points, nodes, leaves, depth, build time, points/s.\n"
               "A progress bar goes to stderr when it is a terminal. On the GPU, when device\n"
               "memory (or grove --device-mem-limit) is short, the build finishes on the host\n"
               "with the same result and the summary says so.\n"
               "\n"
               "options:\n"
               "  -o, --output DIR  the output directory\n"
               "  --max-points N  a node with more points splits, 1..4294967295 (default 50000)\n"
               "  --batch N       points per build batch, >= 1 (default 8388608; does not\n"
               "                  change the tree)\n"
               "  --max-depth D   deepest level, 0..30 - log2(G) (default 20)\n"
               "  --lod-grid G    voxels per side of the inner nodes' samples: 0 (none) or a\n"
               "                  power of two 2..1024 (default 128)\n"
               "  --json          print the summary as one JSON object\n"
               "  --backend B     auto (default: CUDA when a usable GPU is found), cpu or cuda\n"
               "  -h, --help      print this help and exit\n");
}

static void usage_query(FILE *f)
{
    fprintf(f, "usage: grove octree query DIR --box X0 Y0 Z0 X1 Y1 Z1 [--backend B]\n"
               "       grove octree query DIR --radius X Y Z R [--backend B]\n"
               "\n"
               "Loads the tree DIR/grove.octree written by `grove octree build' and prints the\n"
               "indices of the points inside the box (bounds included on every side) or within\n"
               "distance R of (X, Y, Z), one per line, ascending.\n"
               "\n"
               "options:\n"
               "  --box X0 Y0 Z0 X1 Y1 Z1  the box (a box with X0 > X1 is empty); a bound may\n"
               "                  be inf or -inf (no limit on that side), not NaN\n"
               "  --radius X Y Z R  the sphere: a finite centre, R >= 0 (inf: every point)\n"
               "  --backend B     auto (default: CUDA when a usable GPU is found), cpu or cuda\n"
               "  -h, --help      print this help and exit\n");
}

static void usage_export(FILE *f)
{
    fprintf(f, "usage: grove octree export DIR --level L -o OUT.ply\n"
               "\n"
               "Reads the Potree files of DIR (metadata.json, hierarchy.bin, octree.bin) and\n"
               "writes the points a viewer draws at level L: the samples of every node at depth\n"
               "L and the points of every leaf above it (L at or below the tree's depth: the\n"
               "whole cloud). OUT.ply is binary PLY with double x, y, z and the colour and\n"
               "intensity the directory has. Prints the number of points written.\n"
               "\n"
               "options:\n"
               "  --level L       0..1000\n"
               "  -o, --output OUT  the PLY file (written through a temporary file)\n"
               "  -h, --help      print this help and exit\n");
}

int cmd_octree(int argc, char **argv)
{
    return cli_dispatch(argc, argv, "octree", verbs, NUM_VERBS, usage, "command");
}

/* ---- helpers ---- */

static int output_option(cli_parser *p, const char **out)
{
    if (!(cli_value(p, "-o") || cli_value(p, "--output"))) return 0;
    if (!p->exit && !p->val[0]) {
        cli_error(p->what, "%s needs a name", p->arg);
        p->exit = CLI_EXIT_USAGE;
    }
    *out = p->val;
    return 1;
}

/* Reads `count` numbers for an option matched by cli_value(): its value and the next count-1
 * arguments (which may start with '-'). Numbers from index inf_from on may be infinite (the
 * queries take infinite box bounds and radii); NaN never. */
static int numbers(cli_parser *p, int count, int inf_from, double *out)
{
    const char *opt = p->arg;
    if (p->exit) return p->exit;
    for (int j = 0; j < count; j++) {
        if (j) {
            if (p->i >= p->argc) {
                cli_error(p->what, "%s needs %d numbers (see grove %s --help)", opt, count,
                          p->what);
                return p->exit = CLI_EXIT_USAGE;
            }
            p->val = p->argv[p->i++];
        }
        if ((j >= inf_from ? cli_double_inf : cli_double)(p, -HUGE_VAL, HUGE_VAL, &out[j]))
            return p->exit;
    }
    return 0;
}

static void report_input(const char *what, grove_status s, const grove_ctx *ctx)
{
    if (s == GROVE_ERR_BAD_INPUT || s == GROVE_ERR_IO || s == GROVE_ERR_UNSUPPORTED ||
        s == GROVE_ERR_LIMIT)
        cli_error(what, "%s", grove_ctx_last_error(ctx));
    else
        cli_report_status(what, "reading the input", s, ctx);
}

/* An input the tool cannot read is bad input, a format it does not support (LAZ) and a line
 * over the readers' limit included (as cli_read_points has it for the other commands). */
static int input_exit(grove_status s)
{
    return s == GROVE_ERR_UNSUPPORTED || s == GROVE_ERR_LIMIT ? CLI_EXIT_BAD_INPUT
                                                              : cli_exit_code(s, CLI_CAUSE_INPUT);
}

/* ---- build ---- */

/* After a failed build: removes the directories this command made for the output (`made`
 * from cli_mkdirs_new; none when the output directory existed before, and then nothing is
 * touched), with the files the build may have put in the output directory when that directory
 * itself is new. */
static void remove_new_dir(const char *dir, cli_newdirs *made)
{
    static const char *const names[4] = {"metadata.json", "hierarchy.bin", "octree.bin",
                                         "grove.octree"};
    for (int k = 0; made->whole && k < 4; k++) {
        char *path = cli_path_join(dir, names[k]);
        if (path) remove(path);
        free(path);
    }
    cli_rmdirs_new(made);
}

typedef struct progress {
    int shown;
    double t0;
} progress;

static void progress_bar(void *user, uint64_t done, uint64_t total)
{
    progress *pr = (progress *)user;
    int width = 40, fill = total ? (int)((double)width * (double)done / (double)total) : width;
    char bar[48];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\rbuilding [%s] %5.1f%% %llu / %llu points", bar,
            total ? 100.0 * (double)done / (double)total : 100.0, (unsigned long long)done,
            (unsigned long long)total);
    fflush(stderr);
    pr->shown = 1;
}

static int ot_build(int argc, char **argv)
{
    const char *what = "octree build";
    cli_parser p;
    const char *input = NULL, *dir = NULL;
    grove_octree_opts opts;
    grove_octree_stats stats;
    grove_backend backend = cli_default_backend;
    grove_ctx *ctx = NULL;
    grove_cloud cloud;
    grove_octree *t = NULL;
    grove_status s;
    progress pr = {0, 0};
    double read_ms, build_ms, write_ms, t0;
    size_t leaves = 0, nn;
    int json = 0, written = 0, rc;
    long v;
    char desc[320];
    cli_newdirs made = {NULL, 0, 0};

    memset(&cloud, 0, sizeof cloud);
    grove_octree_default_opts(&opts);
    cli_parser_init(&p, argc, argv, what, usage_build);
    while (cli_next(&p)) {
        if (cli_help(&p))
            return CLI_EXIT_OK;
        else if (cli_flag(&p, "--json"))
            json = 1;
        else if (output_option(&p, &dir))
            continue;
        else if (cli_value(&p, "--max-points")) {
            if (!cli_int(&p, 1, 4294967295L, &v)) opts.max_points = (uint32_t)v;
        } else if (cli_value(&p, "--batch")) {
            size_t b;
            if (!cli_size(&p, 1, SIZE_MAX, &b)) opts.batch = b;
        } else if (cli_value(&p, "--max-depth")) {
            if (!cli_int(&p, 0, GROVE_OCTREE_BITS, &v)) opts.max_depth = (int)v;
        } else if (cli_value(&p, "--lod-grid")) {
            if (!cli_int(&p, 0, 1024, &v)) opts.lod_grid = (int)v;
        } else if (cli_value(&p, "--backend"))
            cli_backend(&p, &backend);
        else if (p.positional && !input)
            input = p.arg;
        else
            return cli_unknown(&p);
    }
    if (p.exit) return p.exit;
    if (!input || !dir) {
        cli_error(what, input ? "-o DIR is required" : "no point file given");
        usage_build(stderr);
        return CLI_EXIT_USAGE;
    }
    if (opts.lod_grid != 0 && (opts.lod_grid < 2 || (opts.lod_grid & (opts.lod_grid - 1)))) {
        cli_error(what, "--lod-grid: %d is not 0 or a power of two 2..1024", opts.lod_grid);
        return CLI_EXIT_USAGE;
    }

    rc = cli_ctx_create(what, backend, &ctx);
    if (rc != CLI_EXIT_OK) return rc;
    /* The options together (--max-depth against --lod-grid), by the build's own check, before
     * the directory and the input are touched. */
    s = grove_octree_check_opts(ctx, &opts);
    if (s != GROVE_OK) {
        cli_error(what, "%s (--max-depth %d, --lod-grid %d)", grove_ctx_last_error(ctx),
                  opts.max_depth, opts.lod_grid);
        rc = cli_exit_code(s, CLI_CAUSE_OPTIONS);
        goto done;
    }
    {
        char *probe = cli_path_join(dir, "metadata.json");
        if (!probe) {
            cli_error(what, "out of host memory");
        } else if (cli_mkdirs_new(dir, &made) != 0) {
            cli_error(what, "cannot create the directory '%s': %s", dir, strerror(errno));
            free(probe);
            probe = NULL;
        } else if (cli_probe_output(probe, what) != 0) {
            free(probe);
            probe = NULL;
        }
        if (!probe) {
            rc = CLI_EXIT_FAILURE;
            goto done;
        }
        free(probe);
    }

    t0 = cli_now_ms();
    s = grove_cloud_read(ctx, input, GROVE_CLOUD_AUTO, &cloud);
    read_ms = cli_now_ms() - t0;
    if (s != GROVE_OK) {
        report_input(what, s, ctx);
        rc = input_exit(s);
        goto done;
    }
    if (isatty(fileno(stderr)) && !json) {
        opts.progress = progress_bar;
        opts.progress_user = &pr;
    }
    pr.t0 = t0 = cli_now_ms();
    s = grove_octree_build(ctx, cloud.xyz, cloud.n, &opts, &t, &stats);
    build_ms = cli_now_ms() - t0;
    if (pr.shown) fputc('\n', stderr);
    if (s != GROVE_OK) {
        /* the build's bad input is the file's as a whole (an extent that overflows): name it */
        snprintf(desc, sizeof desc, "building the tree of %s", input);
        cli_report_status(what, desc, s, ctx);
        rc = cli_exit_code(s, CLI_CAUSE_RUN);
        goto done;
    }
    t0 = cli_now_ms();
    s = grove_octree_write_potree(ctx, t, &cloud, dir);
    write_ms = cli_now_ms() - t0;
    if (s != GROVE_OK) {
        cli_report_status(what, "writing the directory", s, ctx);
        rc = cli_exit_code(s, CLI_CAUSE_RUN);
        goto done;
    }
    written = 1;

    nn = grove_octree_num_nodes(t);
    for (size_t i = 0; i < nn; i++) leaves += grove_octree_nodes(t)[i].child_mask == 0;
    grove_octree_get_opts(t, &opts);
    cli_describe_backend(ctx, desc, sizeof desc);
    if (json) {
        printf("{\n  \"input\": ");
        cli_json_string(stdout, input);
        printf(",\n  \"points\": %zu,\n  \"backend\": \"%s\",\n  \"rgb\": %s,\n"
               "  \"intensity\": %s,\n  \"max_points\": %u,\n  \"batch\": %zu,\n"
               "  \"max_depth\": %d,\n  \"lod_grid\": %d,\n  \"nodes\": %zu,\n  \"leaves\": %zu,\n"
               "  \"depth\": %d,\n  \"entries\": %zu,\n  \"batches\": %u,\n"
               "  \"host_fallback\": %u,\n  \"read_ms\": ",
               cloud.n, grove_backend_name(grove_ctx_backend(ctx)), cloud.rgb ? "true" : "false",
               cloud.intensity ? "true" : "false", opts.max_points, opts.batch, opts.max_depth,
               opts.lod_grid, nn, leaves, grove_octree_depth(t), grove_octree_num_entries(t),
               stats.batches, stats.host_fallback);
        cli_json_number(stdout, read_ms);
        printf(",\n  \"build_ms\": ");
        cli_json_number(stdout, build_ms);
        printf(",\n  \"points_per_s\": ");
        cli_json_number(stdout, build_ms > 0 ? (double)cloud.n / (build_ms * 1e-3) : 0.0);
        printf(",\n  \"write_ms\": ");
        cli_json_number(stdout, write_ms);
        printf(",\n  \"output\": ");
        cli_json_string(stdout, dir);
        printf("\n}\n");
    } else {
        printf("grove octree build: %s, %zu points%s%s, backend %s\n", input, cloud.n,
               cloud.rgb ? ", rgb" : "", cloud.intensity ? ", intensity" : "", desc);
        printf("options: max_points %u, batch %zu, max_depth %d, lod_grid %d\n", opts.max_points,
               opts.batch, opts.max_depth, opts.lod_grid);
        printf("nodes: %zu (%zu leaves), depth %d, %zu entries (%zu level-of-detail samples)\n", nn,
               leaves, grove_octree_depth(t), grove_octree_num_entries(t),
               grove_octree_num_entries(t) - cloud.n);
        printf("build: %.3f ms, %.3f M points/s, %u batches (reading the file: %.3f ms, "
               "writing: %.3f ms)\n",
               build_ms, build_ms > 0 ? (double)cloud.n / (build_ms * 1e3) : 0.0, stats.batches,
               read_ms, write_ms);
        if (stats.host_fallback == 1)
            printf("note: the GPU counted the points; the later phases did not fit in device "
                   "memory and ran on the host\n");
        else if (stats.host_fallback == 2)
            printf("note: the points did not fit in device memory; the CPU backend built the "
                   "tree\n");
        printf("wrote %s (metadata.json, hierarchy.bin, octree.bin, grove.octree)\n", dir);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(what, "cannot write to stdout");
        rc = CLI_EXIT_FAILURE;
    }
done:
    if (!written)
        remove_new_dir(dir, &made);
    else
        cli_newdirs_free(&made);
    grove_octree_destroy(t);
    grove_cloud_free(&cloud);
    grove_ctx_destroy(ctx);
    return rc;
}

/* ---- query ---- */

static int ot_query(int argc, char **argv)
{
    const char *what = "octree query";
    cli_parser p;
    const char *dir = NULL;
    grove_backend backend = cli_default_backend;
    grove_ctx *ctx = NULL;
    grove_octree *t = NULL;
    grove_query_result res;
    grove_status s;
    double box[6], sphere[4];
    int have_box = 0, have_radius = 0, rc;
    static cli_out_buf ob;

    memset(&res, 0, sizeof res);
    cli_parser_init(&p, argc, argv, what, usage_query);
    while (cli_next(&p)) {
        if (cli_help(&p))
            return CLI_EXIT_OK;
        else if (cli_value(&p, "--box")) {
            if (!numbers(&p, 6, 0, box)) have_box = 1;
        } else if (cli_value(&p, "--radius")) {
            /* the centre finite, the radius may be inf */
            if (!numbers(&p, 4, 3, sphere)) have_radius = 1;
            if (!p.exit && sphere[3] < 0) {
                cli_error(what, "--radius: R must be >= 0, got %g", sphere[3]);
                p.exit = CLI_EXIT_USAGE;
            }
        } else if (cli_value(&p, "--backend"))
            cli_backend(&p, &backend);
        else if (p.positional && !dir)
            dir = p.arg;
        else
            return cli_unknown(&p);
    }
    if (p.exit) return p.exit;
    if (!dir) {
        cli_error(what, "no directory given");
        usage_query(stderr);
        return CLI_EXIT_USAGE;
    }
    if (have_box == have_radius) {
        cli_error(what, have_box ? "give --box or --radius, not both"
                                 : "no query given (--box X0 Y0 Z0 X1 Y1 Z1 or --radius X Y Z R)");
        if (!have_box) usage_query(stderr);
        return CLI_EXIT_USAGE;
    }
    rc = cli_ctx_create(what, backend, &ctx);
    if (rc != CLI_EXIT_OK) return rc;
    s = grove_octree_load(ctx, dir, &t);
    if (s != GROVE_OK) {
        report_input(what, s, ctx);
        rc = input_exit(s);
        goto done;
    }
    if (have_box)
        s = grove_octree_query_boxes(ctx, t, box, 1, &res);
    else
        s = grove_octree_query_radius(ctx, t, sphere, sphere + 3, 1, &res);
    if (s != GROVE_OK) {
        cli_report_status(what, "querying", s, ctx);
        rc = cli_exit_code(s, CLI_CAUSE_RUN);
        goto done;
    }
    ob.f = stdout;
    ob.len = 0;
    for (uint64_t j = res.offsets[0]; j < res.offsets[1]; j++) {
        cli_ob_u64(&ob, res.indices[j]);
        cli_ob_char(&ob, '\n');
    }
    cli_ob_flush(&ob);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(what, "cannot write to stdout");
        rc = CLI_EXIT_FAILURE;
    }
done:
    grove_query_result_free(&res);
    grove_octree_destroy(t);
    grove_ctx_destroy(ctx);
    return rc;
}

/* ---- export ---- */

static int ot_export(int argc, char **argv)
{
    const char *what = "octree export";
    cli_parser p;
    const char *dir = NULL, *out = NULL;
    grove_ctx *ctx = NULL;
    grove_cloud c;
    grove_status s;
    long level = -1;
    int rc = CLI_EXIT_OK;

    memset(&c, 0, sizeof c);
    cli_parser_init(&p, argc, argv, what, usage_export);
    while (cli_next(&p)) {
        if (cli_help(&p))
            return CLI_EXIT_OK;
        else if (cli_value(&p, "--level"))
            cli_int(&p, 0, 1000, &level);
        else if (output_option(&p, &out))
            continue;
        else if (p.positional && !dir)
            dir = p.arg;
        else
            return cli_unknown(&p);
    }
    if (p.exit) return p.exit;
    if (!dir || level < 0 || !out) {
        cli_error(what, !dir        ? "no directory given"
                        : level < 0 ? "--level L is required"
                                    : "-o OUT.ply is required");
        usage_export(stderr);
        return CLI_EXIT_USAGE;
    }
    if (cli_probe_output(out, what)) return CLI_EXIT_FAILURE;
    /* file work only: a CPU context whatever the default backend */
    rc = cli_ctx_create(what, GROVE_BACKEND_CPU, &ctx);
    if (rc != CLI_EXIT_OK) return rc;
    s = grove_octree_export_level(ctx, dir, (int)level, &c);
    if (s != GROVE_OK) {
        report_input(what, s, ctx);
        rc = input_exit(s);
        goto done;
    }
    s = grove_cloud_write_ply(ctx, out, &c);
    if (s != GROVE_OK) {
        cli_report_status(what, "writing the PLY file", s, ctx);
        rc = cli_exit_code(s, CLI_CAUSE_RUN);
        goto done;
    }
    printf("wrote %zu points of level %ld to %s\n", c.n, level, out);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(what, "cannot write to stdout");
        rc = CLI_EXIT_FAILURE;
    }
done:
    grove_cloud_free(&c);
    grove_ctx_destroy(ctx);
    return rc;
}
