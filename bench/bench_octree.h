/*
 * bench_octree.h - `grove bench octree` (not part of the public API).
 */
#ifndef GROVE_BENCH_OCTREE_H
#define GROVE_BENCH_OCTREE_H

#include <stdio.h>

#include "bench.h"
#include "grove/octree.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! grove_bench_octree() : the suite (bench_octree.c describes its rows). Rows as grove_bench_prim. */
grove_status grove_bench_octree(grove_ctx *ctx, const grove_bench_opts *opts, grove_bench_row *rows,
                            int max_rows, int *nrows);

/*! grove_bench_octree_usage() : prints `grove bench octree --help`. */
void grove_bench_octree_usage(FILE *f);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_BENCH_OCTREE_H */
