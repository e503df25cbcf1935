/*
 * grove.c - entry point of the `grove` command-line tool: global options and dispatch to the
 * subcommands, one file each (cmd_*.c).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* Adding a subcommand: write cmd_x.c, declare it in cli.h, add one line here. */
static const cli_command commands[] = {
    {"info", "show the version, the backends compiled in and the GPUs found", cmd_info},
    {"demo", "run every module on generated data and check the results", cmd_demo},
    {"bench", "benchmarks (grove bench prim, grove bench quadtree)", cmd_bench},
    {"quadtree", "2-D point quadtrees: build, draw (SVG), box and kNN queries", cmd_quadtree},
    {"kdtree", "k-d trees of 2-D and 3-D points: build and save", cmd_kdtree},
    {"knn", "k nearest neighbours, or those within a radius, from a k-d tree", cmd_knn},
    {"mri", "non-Cartesian MRI: Q and FHD sums, phantoms, reconstruction", cmd_mri},
    {"octree", "octrees of large 3-D point clouds: build (Potree output), query, export",
     cmd_octree},
    {"bezier", "adaptive tessellation of Bezier curves (text or SVG in, CSV or SVG out)",
     cmd_bezier},
};
#define NUM_COMMANDS ((int)(sizeof commands / sizeof commands[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: grove [--backend auto|cpu|cuda] [--device-mem-limit BYTES] <command> "
               "[options]\n"
               "       grove --help | --version\n"
               "\n"
               "Spatial trees and irregular parallel workloads on NVIDIA GPUs, with a CPU backend\n"
               "that gives the same answers.\n"
               "\n"
               "commands:\n");
    cli_print_commands(f, commands, NUM_COMMANDS);
    fprintf(f, "\n"
               "options:\n"
               "  --backend B   default backend of the commands that run work: auto (CUDA when\n"
               "                a usable GPU is found, else CPU), cpu or cuda\n"
               "  --device-mem-limit BYTES\n"
               "                most device memory the CUDA backend may hold (e.g. 8G = 8e9\n"
               "                bytes; 0 or by default: no limit besides the GPU's); past it\n"
               "                a command fails with exit 3, or runs a phase on the host\n"
               "                where it can (octree build)\n"
               "  --version     print the version and exit\n"
               "  -h, --help    print this help and exit\n"
               "\n"
               "`grove <command> --help` describes a command.\n"
               "exit codes: 0 ok, 1 usage error, 2 bad input, 3 runtime or device failure\n");
}

int main(int argc, char **argv)
{
    cli_parser p;
    const cli_command *cmd;
    cli_parser_init(&p, argc, argv, NULL, usage);
    while (cli_next(&p)) {
        if (p.positional) break;
        if (cli_help(&p)) return CLI_EXIT_OK;
        if (cli_flag(&p, "--version")) {
            if (p.exit) return p.exit;
            printf("grove %s\n", grove_version());
            return CLI_EXIT_OK;
        }
        if (cli_value(&p, "--backend")) {
            if (cli_backend(&p, &cli_default_backend)) return p.exit;
            continue;
        }
        if (cli_value(&p, "--device-mem-limit")) {
            if (cli_size(&p, 0, SIZE_MAX, &cli_device_mem_limit)) return p.exit;
            continue;
        }
        cli_error(NULL, "unknown option '%s'", p.arg);
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (p.exit) return p.exit;
    if (!p.arg || !p.positional) {
        cli_error(NULL, "no command given");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    cmd = cli_find_command(commands, NUM_COMMANDS, p.arg);
    if (!cmd) {
        cli_error(NULL, "unknown command '%s'", p.arg);
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    /* The command sees itself as argv[0]. */
    return cmd->run(argc - (p.i - 1), argv + (p.i - 1));
}
