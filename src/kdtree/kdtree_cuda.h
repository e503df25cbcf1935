/*
 * kdtree_cuda.h - the CUDA build of the k-d tree (kdtree_cuda.cu), called from kdtree.c on a
 * CUDA context (internal).
 */
#ifndef GROVE_KDTREE_CUDA_H
#define GROVE_KDTREE_CUDA_H

#include "kdtree_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Builds the tree of pts (checked: finite, 1..8 dims, 1 <= n <= UINT32_MAX) on the GPU and
 * fills t's host arrays, num_nodes and depth exactly as grove__kd_build_cpu() does (t->n,
 * dims, type and opts are set). On failure t's arrays are left NULL. */
grove_status grove__kd_build_cuda(grove_ctx *ctx, const grove_coords *pts, grove_kdtree *t);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_KDTREE_CUDA_H */
