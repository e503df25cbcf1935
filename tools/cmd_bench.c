/*
 * cmd_bench.c - `grove bench <suite>`: runs a benchmark suite of bench/ and prints its rows as
 * a table or JSON. Each suite is one entry in `suites`.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "bench_bezier.h"
#include "bench_mri.h"
#include "bench_octree.h"
#include "cli.h"
#include "grove/prim.h"

static int bench_prim(int argc, char **argv);
static int bench_quadtree(int argc, char **argv);
static int bench_kdtree(int argc, char **argv);
static int bench_mri(int argc, char **argv);
static int bench_octree(int argc, char **argv);
static int bench_bezier(int argc, char **argv);

static const cli_command suites[] = {
    {"prim", "scan, segmented scan, split, compaction, reduce, sort, ... beside CUB", bench_prim},
    {"quadtree", "quadtree builds (morton, recursive) beside the radix-sort floor", bench_quadtree},
    {"kdtree", "k-d tree builds and kNN queries beside the CPU, brute force and Morton sort",
     bench_kdtree},
    {"mri", "the MRI Q and FHD sums: every CUDA kernel beside the special-function-unit bound",
     bench_mri},
    {"octree", "octree builds and the counting pass (aggregated vs plain atomics) beside a sort",
     bench_octree},
    {"bezier", "Bezier tessellation, cdp and flat, beside the device copy bandwidth", bench_bezier},
};
#define NUM_SUITES ((int)(sizeof suites / sizeof suites[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: grove bench <suite> [options]\n"
               "\n"
               "suites:\n");
    cli_print_commands(f, suites, NUM_SUITES);
    fprintf(f, "\n"
               "`grove bench <suite> --help` lists a suite's options.\n");
}

static void usage_prim(FILE *f)
{
    fprintf(f,
            "usage: grove bench prim [--size N] [--repeats R] [--warmup W] [--json] [--out FILE]\n"
            "                        [--backend auto|cpu|cuda]\n"
            "\n"
            "Times the prim module's primitives on random data. On CUDA each runs beside CUB's\n"
            "equivalent and a device-to-device copy of the same bytes; on the CPU, the CPU\n"
            "backend alone. Times are medians after warm-up; every result is checked against\n"
            "a reference before it is reported.\n"
            "\n"
            "options:\n"
            "  --size N      elements (100000, 1e7, 16M, ...); default: 2^24 and 2^28\n"
            "  --repeats R   timed runs per row, the median is reported (default 20)\n"
            "  --warmup W    untimed runs first (default 3)\n"
            "  --json        print JSON instead of a table\n"
            "  --out FILE    also write the JSON to FILE (through a temporary file)\n"
            "  --backend B   auto (default), cpu or cuda\n"
            "  -h, --help    print this help and exit\n"
            "\n"
            "columns: G items/s = 1e9 elements per second; GB/s counts the bytes that must\n"
            "move (inputs read once, outputs written once); %% of copy = GB/s over the\n"
            "device-to-device copy GB/s; vs CUB = grove's items/s over CUB's for the same op.\n");
}

static void usage_quadtree(FILE *f)
{
    fprintf(f,
            "usage: grove bench quadtree [--size N] [--repeats R] [--warmup W] [--json]\n"
            "                            [--out FILE] [--backend auto|cpu|cuda]\n"
            "\n"
            "Times quadtree builds with the default options (max depth 16, min points 16) on\n"
            "uniform and clustered 2-D points, both methods. On CUDA: the device-resident build\n"
            "(impl gpu: points already on the GPU, tree left there), the same through host\n"
            "memory (impl host: copies included), and one radix sort of n 32-bit key/index\n"
            "pairs (the floor); the CPU backend (impl cpu) up to 10^7 points. Every GPU tree\n"
            "is compared byte for byte with the other method's and the CPU backend's.\n"
            "\n"
            "options:\n"
            "  --size N      points; default: 10^6, 10^7 and 10^8\n"
            "  --repeats R   timed runs per row, the median is reported (default 10)\n"
            "  --warmup W    untimed runs first (default 2)\n"
            "  --json        print JSON instead of a table\n"
            "  --out FILE    also write the JSON to FILE (through a temporary file)\n"
            "  --backend B   auto (default), cpu or cuda\n"
            "  -h, --help    print this help and exit\n"
            "\n"
            "columns: G pts/s = 1e9 points per second; vs floor = sort time / build time.\n");
}

static void usage_kdtree(FILE *f)
{
    fprintf(f, "usage: grove bench kdtree [--size N] [--repeats R] [--warmup W] [--json]\n"
               "                          [--out FILE] [--backend auto|cpu|cuda]\n"
               "\n"
               "Times k-d tree builds (default options, leaf size 12) and kNN queries (k = 8,\n"
               "as many queries as points, from the same distribution) on uniform and clustered\n"
               "3-D float points through the public calls (wall time; the results are in host\n"
               "memory when a call returns). Rows per size and distribution:\n"
               "  morton_sort_*  box, 21-bit quantisation, 3-D Morton encode and radix sort of\n"
               "                 (code, index) pairs of the same points: the build's floor\n"
               "  build_*        grove_kdtree_build; knn8_* grove_kdtree_knn\n"
               "impl gpu is the CUDA context, impl cpu a context with the CPU backend. On CUDA,\n"
               "once per distribution, brute_knn8_*_sub is a brute-force kNN kernel over the\n"
               "first min(N, 10^5) points with as many queries, and knn8_*_sub the tree's kNN on\n"
               "the same. Checks: the CPU tree is validated and the GPU tree equal to it byte for\n"
               "byte; kNN results equal to a host brute force on a sample of queries, the GPU's\n"
               "to the CPU's and the subset rows to the brute-force kernel's; the sorts are\n"
               "recomputed on the host.\n"
               "\n"
               "options:\n"
               "  --size N      points (and queries); default: 10^6 and 10^7\n"
               "  --repeats R   timed runs per GPU row, the median is reported (default 10); CPU\n"
               "                rows at most 3, and 1 from 10^7 points on\n"
               "  --warmup W    untimed runs first (default 2); CPU rows at most 1, 0 from 10^7\n"
               "  --json        print JSON instead of a table\n"
               "  --out FILE    also write the JSON to FILE (through a temporary file)\n"
               "  --backend B   auto (default), cpu or cuda\n"
               "  -h, --help    print this help and exit\n"
               "\n"
               "columns: G pts/s = 1e9 points (build, sort) or queries (knn) per second;\n"
               "vs floor = the Morton sort's time / the build's (same backend), or the brute\n"
               "force's time / the kNN's for the _sub rows.\n");
}

static void usage_mri(FILE *f)
{
    fprintf(f, "usage: grove bench mri [--size N] [--repeats R] [--warmup W] [--json]\n"
               "                       [--out FILE] [--backend auto|cpu|cuda]\n"
               "\n"
               "Times the Q and FHD sums of the mri module on random samples (weights in\n"
               "[-1, 1), |k| up to size/2 per axis) and image-grid voxels. On CUDA, every kernel\n"
               "(fast = the production kernel, tiled, constant, gather, scatter):\n"
               "  *_big_m262144_n2097152      M = 2^18 samples, N = 128^3 voxels (or --size);\n"
               "                              scatter at N = 4096 only (n in the op)\n"
               "  *_parboil_m2048_n262144     Parboil's large size, M = 2048, N = 64^3\n"
               "timed with CUDA events around the device-resident sum (inputs on the GPU).\n"
               "The CPU backend (impl cpu) at M = 2048, N = 32768, wall time of the host call.\n"
               "Each result is checked: CUDA rows against the CPU backend on 512 voxels, CPU\n"
               "rows against a float64 direct sum on 64, relative L2 error <= 1e-4; the largest\n"
               "error per kernel is printed as a note.\n"
               "\n"
               "options:\n"
               "  --size N      voxels of the big case (a cube: the image grid; else uniform\n"
               "                random voxels); default 128^3\n"
               "  --repeats R   timed runs per row, the median is reported (default 10; 3 for\n"
               "                gather, constant and scatter at the big size; CPU at most 3)\n"
               "  --warmup W    untimed runs first (default 2; 1 for those)\n"
               "  --json        print JSON instead of a table\n"
               "  --out FILE    also write the JSON to FILE (through a temporary file)\n"
               "  --backend B   auto (default), cpu or cuda\n"
               "  -h, --help    print this help and exit\n"
               "\n"
               "columns: G pairs/s = 1e9 sample-voxel pairs per second; vs SFU = the\n"
               "special-function-unit bound 2 M N / (16 x SMs x clock) over the time (above 1:\n"
               "faster than every sin and cos on that unit allows).\n");
}

int cmd_bench(int argc, char **argv)
{
    return cli_dispatch(argc, argv, "bench", suites, NUM_SUITES, usage, "suite");
}

/* "-" for a ratio the suite does not report (0). */
static void print_ratio(double v, double scale, int decimals, const char *unit)
{
    if (v > 0)
        printf(" %8.*f%s", decimals, v * scale, unit);
    else
        printf(" %8s%s", "-", unit[0] ? " " : "");
}

static void print_table_floor(const grove_bench_row *rows, int nrows, const char *suite,
                              const char *backend)
{
    /* the k-d tree's rates (points built, queries answered) are millions a second */
    const int mega = !strcmp(suite, "kdtree");
    const int mri = !strcmp(suite, "mri");
    printf("grove bench %s on %s\n", suite, backend);
    printf("%-28s %-6s %11s %10s %10s %9s  %s\n", "op", "impl", "n", "ms",
           mega ? "M items/s" : (mri ? "G pairs/s" : "G pts/s"), mri ? "vs SFU" : "vs floor",
           "checked");
    for (int i = 0; i < nrows; i++) {
        const grove_bench_row *r = &rows[i];
        printf("%-28s %-6s %11zu %10.3f %10.3f", r->op, r->impl, r->n, r->ms,
               r->items_per_s * (mega ? 1e-6 : 1e-9));
        print_ratio(r->vs_floor, 1.0, 3, "x");
        printf("  %s\n", r->checked ? "yes" : "NO");
    }
}

static void print_table(const grove_bench_row *rows, int nrows, const char *suite,
                        const char *backend)
{
    if (strcmp(suite, "prim") != 0 && strcmp(suite, "bezier") != 0) {
        print_table_floor(rows, nrows, suite, backend);
        return;
    }
    printf("grove bench %s on %s\n", suite, backend);
    printf("%-28s %-6s %11s %10s %10s %9s %10s %9s  %s\n", "op", "impl", "n", "ms", "G items/s",
           "GB/s", "% of copy", "vs CUB", "checked");
    for (int i = 0; i < nrows; i++) {
        const grove_bench_row *r = &rows[i];
        printf("%-28s %-6s %11zu %10.3f %10.3f %9.1f", r->op, r->impl, r->n, r->ms,
               r->items_per_s * 1e-9, r->gb_per_s);
        print_ratio(r->vs_copy, 100.0, 1, "%");
        print_ratio(r->vs_cub, 1.0, 2, "x");
        printf("  %s\n", r->checked ? "yes" : "NO");
    }
}

static void print_json(FILE *f, const grove_bench_row *rows, int nrows, const grove_ctx *ctx,
                       const grove_bench_opts *o, const char *suite)
{
    grove_device_info info;
    int dev = grove_ctx_device(ctx);
    fprintf(f, "{\n  \"suite\": ");
    cli_json_string(f, suite);
    fprintf(f, ",\n  \"version\": ");
    cli_json_string(f, grove_version());
    fprintf(f, ",\n  \"backend\": ");
    cli_json_string(f, grove_backend_name(grove_ctx_backend(ctx)));
    fprintf(f, ",\n  \"device\": ");
    if (dev >= 0 && grove_device_query(dev, &info) == GROVE_OK)
        cli_json_string(f, info.name);
    else
        fprintf(f, "null");
    fprintf(f, ",\n  \"size\": %zu,\n  \"warmup\": %d,\n  \"repeats\": %d,\n  \"rows\": [", o->n,
            o->warmup, o->repeats);
    for (int i = 0; i < nrows; i++) {
        const grove_bench_row *r = &rows[i];
        fprintf(f, "%s\n    {\"op\": ", i ? "," : "");
        cli_json_string(f, r->op);
        fprintf(f, ", \"impl\": ");
        cli_json_string(f, r->impl);
        fprintf(f, ", \"n\": %zu, \"ms\": ", r->n);
        cli_json_number(f, r->ms);
        fprintf(f, ", \"items_per_s\": ");
        cli_json_number(f, r->items_per_s);
        fprintf(f, ", \"gb_per_s\": ");
        cli_json_number(f, r->gb_per_s);
        fprintf(f, ", \"vs_copy\": ");
        if (r->vs_copy > 0)
            cli_json_number(f, r->vs_copy);
        else
            fprintf(f, "null");
        fprintf(f, ", \"vs_cub\": ");
        if (r->vs_cub > 0)
            cli_json_number(f, r->vs_cub);
        else
            fprintf(f, "null");
        fprintf(f, ", \"vs_floor\": ");
        if (r->vs_floor > 0)
            cli_json_number(f, r->vs_floor);
        else
            fprintf(f, "null");
        fprintf(f, ", \"checked\": %s}", r->checked ? "true" : "false");
    }
    fprintf(f, "%s]\n}\n", nrows ? "\n  " : "");
}

#define MAX_ROWS 512

typedef grove_status (*suite_fn)(grove_ctx *, const grove_bench_opts *, grove_bench_row *, int,
                                 int *);

static int run_suite(int argc, char **argv, const char *name, suite_fn fn, void (*usage_fn)(FILE *),
                     int warmup, int repeats, size_t max_size);

static int bench_prim(int argc, char **argv)
{
    return run_suite(argc, argv, "prim", grove_bench_prim, usage_prim, 3, 20, GROVE_PRIM_MAX_N);
}

static int bench_quadtree(int argc, char **argv)
{
    return run_suite(argc, argv, "quadtree", grove_bench_quadtree, usage_quadtree, 2, 10,
                     (size_t)UINT32_MAX);
}

static int bench_kdtree(int argc, char **argv)
{
    return run_suite(argc, argv, "kdtree", grove_bench_kdtree, usage_kdtree, 2, 10,
                     GROVE_PRIM_MAX_N);
}

static int bench_mri(int argc, char **argv)
{
    return run_suite(argc, argv, "mri", grove_bench_mri, usage_mri, 2, 10, (size_t)1 << 31);
}

static int bench_octree(int argc, char **argv)
{
    return run_suite(argc, argv, "octree", grove_bench_octree, grove_bench_octree_usage, 2, 10,
                     (size_t)GROVE_OCTREE_MAX_N);
}

static int bench_bezier(int argc, char **argv)
{
    return run_suite(argc, argv, "bezier", grove_bench_bezier, grove_bench_bezier_usage, 2, 10,
                     (size_t)1 << 30);
}

static int run_suite(int argc, char **argv, const char *name, suite_fn fn, void (*usage_fn)(FILE *),
                     int warmup, int repeats, size_t max_size)
{
    static grove_bench_row rows[MAX_ROWS];
    cli_parser p;
    grove_bench_opts o;
    grove_backend backend = cli_default_backend;
    grove_ctx *ctx = NULL;
    grove_status s;
    const char *out_path = NULL;
    int json = 0, nrows = 0, rc, unchecked = 0;
    long v;
    char desc[320], what[64];

    memset(&o, 0, sizeof o);
    snprintf(what, sizeof what, "bench %s", name);
    o.warmup = warmup;
    o.repeats = repeats;
    cli_parser_init(&p, argc, argv, what, usage_fn);
    while (cli_next(&p)) {
        if (cli_help(&p))
            return CLI_EXIT_OK;
        else if (cli_flag(&p, "--json"))
            json = 1;
        else if (cli_value(&p, "--size")) {
            if (cli_size(&p, 1, max_size, &o.n)) return p.exit;
        } else if (cli_value(&p, "--repeats")) {
            if (cli_int(&p, 1, 100000, &v)) return p.exit;
            o.repeats = (int)v;
        } else if (cli_value(&p, "--warmup")) {
            if (cli_int(&p, 0, 100000, &v)) return p.exit;
            o.warmup = (int)v;
        } else if (cli_value(&p, "--out")) {
            if (p.exit) return p.exit;
            out_path = p.val;
        } else if (cli_value(&p, "--backend")) {
            if (cli_backend(&p, &backend)) return p.exit;
        } else
            return cli_unknown(&p);
    }
    if (p.exit) return p.exit;

    /* Find an unwritable --out before the benchmark, not after it. */
    if (out_path) {
        cli_outfile probe;
        if (cli_outfile_open(&probe, out_path, what) != 0) return CLI_EXIT_FAILURE;
        cli_outfile_abort(&probe);
    }
    rc = cli_ctx_create(what, backend, &ctx);
    if (rc != CLI_EXIT_OK) return rc;
    cli_describe_backend(ctx, desc, sizeof desc);
    if (!json) {
        fprintf(stderr, "grove %s: running on %s ...\n", what, desc);
        fflush(stderr);
    }
    s = fn(ctx, &o, rows, MAX_ROWS, &nrows);
    if (s != GROVE_OK) {
        cli_report_status(what, name, s, ctx);
        grove_ctx_destroy(ctx);
        return cli_exit_code(s, CLI_CAUSE_RUN);
    }
    if (nrows < 0) nrows = 0;
    if (nrows > MAX_ROWS) nrows = MAX_ROWS;
    /* A size that does not fit in device memory is skipped, not failed: the harness says so in
     * the context's message while still returning GROVE_OK. */
    if (grove_ctx_last_error(ctx)[0])
        fprintf(stderr, "grove: note: %s\n", grove_ctx_last_error(ctx));
    if (json)
        print_json(stdout, rows, nrows, ctx, &o, name);
    else
        print_table(rows, nrows, name, desc);
    for (int i = 0; i < nrows; i++) unchecked += !rows[i].checked;
    if (out_path) {
        cli_outfile f;
        if (cli_outfile_open(&f, out_path, what) != 0) {
            rc = CLI_EXIT_FAILURE;
        } else {
            print_json(f.f, rows, nrows, ctx, &o, name);
            if (cli_outfile_commit(&f, what) != 0) rc = CLI_EXIT_FAILURE;
        }
    }
    grove_ctx_destroy(ctx);
    if (rc != CLI_EXIT_OK) return rc;
    if (unchecked) {
        cli_error(what, "%d row(s) were not checked against a reference", unchecked);
        return CLI_EXIT_FAILURE;
    }
    if (fflush(stdout) != 0) return CLI_EXIT_FAILURE;
    return CLI_EXIT_OK;
}
