/*
 * cmd_info.c - `grove info`: version, backends compiled in, GPUs found and the backend that
 * --backend (auto by default) resolves to. A machine without a GPU is not an error.
 */
#include <stdio.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: grove info [--json] [--backend auto|cpu|cuda]\n"
               "\n"
               "Prints the grove version, the backends compiled in, the CUDA devices found and\n"
               "the backend that --backend resolves to (auto: CUDA when a usable GPU is found,\n"
               "else CPU). No GPU is not an error; asking for --backend cuda without one is\n"
               "(exit 3).\n"
               "\n"
               "options:\n"
               "  --json        machine-readable output\n"
               "  --backend B   the backend to resolve (default auto)\n"
               "  -h, --help    print this help and exit\n");
}

#define MAX_DEVICES 64

typedef struct device_row {
    grove_device_info info;
    grove_status status; /* of grove_device_query */
} device_row;

static double gib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0 * 1024.0); }

static void print_text(const device_row *devs, int ndev, grove_backend requested,
                       const char *resolved, int threads)
{
    printf("grove %s\n", grove_version());
    printf("backends compiled in: cpu%s\n", grove_has_cuda() ? " cuda" : "");
    if (threads > 0) printf("cpu threads: %d (OpenMP)\n", threads);
    if (!grove_has_cuda())
        printf("GPUs: not looked for (this build has no CUDA backend)\n");
    else if (ndev == 0)
        printf("GPUs: none found (no device, or the NVIDIA driver is missing or too old)\n");
    else
        printf("GPUs: %d\n", ndev);
    for (int i = 0; i < ndev; i++) {
        const grove_device_info *d = &devs[i].info;
        if (devs[i].status != GROVE_OK) {
            printf("  [%d] query failed: %s\n", i, grove_status_string(devs[i].status));
            continue;
        }
        printf("  [%d] %s, compute capability %d.%d, %d SMs, memory %.1f GiB total / %.1f GiB "
               "free, L2 %.1f MiB\n",
               d->index, d->name, d->cc_major, d->cc_minor, d->sm_count, gib(d->total_mem),
               gib(d->free_mem), (double)d->l2_bytes / (1024.0 * 1024.0));
    }
    printf("backend %s resolves to: %s\n", grove_backend_name(requested), resolved);
}

static void print_json(const device_row *devs, int ndev, grove_backend requested,
                       grove_backend resolved, int device, int threads)
{
    printf("{\n  \"version\": ");
    cli_json_string(stdout, grove_version());
    printf(",\n  \"backends\": [\"cpu\"%s],\n", grove_has_cuda() ? ", \"cuda\"" : "");
    printf("  \"cuda_compiled\": %s,\n", grove_has_cuda() ? "true" : "false");
    printf("  \"cpu_threads\": %d,\n", threads);
    printf("  \"device_count\": %d,\n  \"devices\": [", ndev);
    for (int i = 0; i < ndev; i++) {
        const grove_device_info *d = &devs[i].info;
        printf("%s\n    {\"index\": %d, ", i ? "," : "", i);
        if (devs[i].status != GROVE_OK) {
            printf("\"error\": ");
            cli_json_string(stdout, grove_status_string(devs[i].status));
            printf("}");
            continue;
        }
        printf("\"name\": ");
        cli_json_string(stdout, d->name);
        printf(", \"compute_capability\": \"%d.%d\", \"sm_count\": %d, \"memory_total_bytes\": "
               "%zu, \"memory_free_bytes\": %zu, \"l2_bytes\": %d, \"memory_bus_bits\": %d}",
               d->cc_major, d->cc_minor, d->sm_count, d->total_mem, d->free_mem, d->l2_bytes,
               d->mem_bus_bits);
    }
    printf("%s],\n", ndev ? "\n  " : "");
    printf("  \"requested_backend\": \"%s\",\n", grove_backend_name(requested));
    printf("  \"backend\": \"%s\",\n", grove_backend_name(resolved));
    if (device >= 0)
        printf("  \"backend_device\": %d\n}\n", device);
    else
        printf("  \"backend_device\": null\n}\n");
}

int cmd_info(int argc, char **argv)
{
    cli_parser p;
    int json = 0, ndev = 0, rc, failed = 0, threads = 0;
    grove_backend backend = cli_default_backend;
    device_row devs[MAX_DEVICES];
    grove_ctx *ctx = NULL;
    char resolved[320];

    cli_parser_init(&p, argc, argv, "info", usage);
    while (cli_next(&p)) {
        if (cli_help(&p))
            return CLI_EXIT_OK;
        else if (cli_flag(&p, "--json"))
            json = 1;
        else if (cli_value(&p, "--backend")) {
            if (cli_backend(&p, &backend)) return p.exit;
        } else
            return cli_unknown(&p);
    }
    if (p.exit) return p.exit;

#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    if (grove_device_count(&ndev) != GROVE_OK) ndev = 0;
    if (ndev > MAX_DEVICES) ndev = MAX_DEVICES;
    for (int i = 0; i < ndev; i++) {
        memset(&devs[i], 0, sizeof devs[i]);
        devs[i].status = grove_device_query(i, &devs[i].info);
        if (devs[i].status != GROVE_OK) {
            cli_error("info", "querying CUDA device %d: %s", i,
                      grove_status_string(devs[i].status));
            failed = 1;
        }
    }

    /* What the backend resolves to is only known by creating a context. */
    rc = cli_ctx_create("info", backend, &ctx);
    if (rc != CLI_EXIT_OK) return rc;
    cli_describe_backend(ctx, resolved, sizeof resolved);
    if (json)
        print_json(devs, ndev, backend, grove_ctx_backend(ctx), grove_ctx_device(ctx), threads);
    else
        print_text(devs, ndev, backend, resolved, threads);
    grove_ctx_destroy(ctx);
    if (fflush(stdout) != 0) return CLI_EXIT_FAILURE;
    return failed ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}
