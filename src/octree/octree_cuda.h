/*
 * octree_cuda.h - the octree module's CUDA entry points (octree_cuda.cu), called by octree.c and
 * octree_query.c on a CUDA context. The builds are declared in octree_internal.h.
 */
#ifndef GROVE_OCTREE_CUDA_H
#define GROVE_OCTREE_CUDA_H

#include "octree_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Copies a device tree's arrays to new host arrays of t (no-op when t has them). */
grove_status grove__ot_download_cuda(grove_ctx *ctx, grove_octree *t);

/* Frees t's device arrays (if any) through t->dev_ctx. */
void grove__ot_free_device(grove_octree *t);

/* The queries on the GPU (host arrays in and out, as in octree.h; arguments already checked).
 * A host tree is uploaded for the call; a device tree is used where it is. */
grove_status grove__ot_query_boxes_cuda(grove_ctx *ctx, const grove_octree *t,
                                        const double *boxes, size_t nq, grove_query_result *out);
grove_status grove__ot_query_radius_cuda(grove_ctx *ctx, const grove_octree *t,
                                         const double *centres, const double *radii, size_t nq,
                                         grove_query_result *out);

/* The counting pass alone, for `grove bench octree`: counts n points (device, 3 uint32 grid
 * coordinates each) into the 8^depth cells of one level with warp-aggregated atomics
 * (aggregated = 1: coalesced_threads + labeled_partition, one atomicAdd per group) or one
 * atomicAdd per point (aggregated = 0); d_counts holds 8^depth counters. */
grove_status grove__ot_count_cells_cuda(grove_ctx *ctx, const uint32_t *d_q, size_t n, int depth,
                                        int aggregated, uint32_t *d_counts);

/* Test and benchmark hook: how the CUDA build refines the Morton order below level 21 where a
 * cloud needs it. 0 (default): runs of equal 63-bit keys of at most 32 points are sorted in
 * place, run by run, and only a cloud with a longer run is sorted whole; 1: always the sort of
 * everything. Both give the same tree. Not thread-safe; not for applications. */
void grove__ot_refine_mode(int mode);
/* Test hook: how the last CUDA build that refined the order did it, reset by the call: 0 none
 * since the last call, 1 run by run, 2 by the sort of everything. */
int grove__ot_refine_last(void);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_OCTREE_CUDA_H */
