/*
 * bench_bezier.h - `grove bench bezier` (not part of the public API).
 */
#ifndef GROVE_BENCH_BEZIER_H
#define GROVE_BENCH_BEZIER_H

#include <stdio.h>

#include "bench.h"
#include "grove/bezier.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! grove_bench_bezier() : the suite (bench_bezier.c describes its rows). Rows as grove_bench_prim. */
grove_status grove_bench_bezier(grove_ctx *ctx, const grove_bench_opts *opts, grove_bench_row *rows,
                            int max_rows, int *nrows);

/*! grove_bench_bezier_usage() : prints `grove bench bezier --help`. */
void grove_bench_bezier_usage(FILE *f);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_BENCH_BEZIER_H */
