/*
 * bench.h - the benchmark harness behind `grove bench` (not part of the public API).
 *
 * A benchmark fills rows; the CLI prints them as a table or JSON. Times are medians of
 * repeated runs after warm-up (CUDA events on the GPU, a monotonic clock on the CPU). Every
 * row's result is checked against a reference before it is reported (checked == 1).
 */
#ifndef GROVE_BENCH_H
#define GROVE_BENCH_H

#include <stddef.h>

#include "grove/grove.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grove_bench_row {
    char op[48];   /* what ran: "scan_excl_u32", "segsplit_u32", "sort_pairs_u32", ... */
    char impl[16]; /* "grove", "cub", "copy", "cpu" */
    size_t n;      /* elements */
    double ms;     /* median time in milliseconds */
    double items_per_s;
    double gb_per_s; /* bytes that must move (inputs read once + outputs written once) / time */
    double vs_copy;  /* gb_per_s / device-to-device copy GB/s of the same run; 0 if n/a */
    double vs_cub;   /* grove's items/s over CUB's for the same op; 0 if n/a */
    double vs_floor; /* the suite's floor time over this row's time (quadtree: the radix
                        sort of n key/index pairs); 0 if n/a */
    int checked;     /* 1: result compared equal to the reference */
} grove_bench_row;

typedef struct grove_bench_opts {
    size_t n;    /* elements; 0 = the default sizes (2^24 and 2^28) */
    int warmup;  /* default 3 */
    int repeats; /* default 20; the median is reported */
} grove_bench_opts;

/*! grove_bench_prim() :
 *  Runs the prim benchmarks on ctx's backend: on CUDA, grove's primitives beside CUB's
 *  equivalents and the device-to-device copy bandwidth; on the CPU, the CPU backend alone.
 *  Writes at most max_rows rows and their number to *nrows. The rows array is the caller's.
 *  @return GROVE_OK, or the failing status with the context's last error set (a result that
 *  does not match its reference is GROVE_ERR_INTERNAL). */
grove_status grove_bench_prim(grove_ctx *ctx, const grove_bench_opts *opts, grove_bench_row *rows,
                              int max_rows, int *nrows);

/*! grove_bench_quadtree() :
 *  Quadtree builds (both methods; uniform and clustered points; 10^6, 10^7, 10^8 points or
 *  opts->n): on CUDA the device-resident build, the build through host memory and the radix
 *  sort floor; the CPU backend up to 10^7 points. Rows as grove_bench_prim; a tree that differs
 *  from its reference leaves its row unchecked. */
grove_status grove_bench_quadtree(grove_ctx *ctx, const grove_bench_opts *opts,
                                  grove_bench_row *rows, int max_rows, int *nrows);

/*! grove_bench_kdtree() :
 *  k-d tree builds and kNN queries (k = 8, Q = N queries; uniform and clustered 3-D points;
 *  10^6 and 10^7 points or opts->n): the context's backend beside the CPU backend, the Morton
 *  sort of the same points (the build's floor) and, on CUDA, a brute-force kNN kernel on a
 *  10^5-point subset. Rows as grove_bench_quadtree; a result that differs from its reference
 *  leaves its row unchecked, with a note in the context's message. */
grove_status grove_bench_kdtree(grove_ctx *ctx, const grove_bench_opts *opts, grove_bench_row *rows,
                                int max_rows, int *nrows);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_BENCH_H */
