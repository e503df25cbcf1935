/*
 * kdtree_cuda.h - the CUDA build of the k-d tree (kdtree_cuda.cu, kdtree_small_cuda.cu; the
 * device-side helpers in kdtree_build_dev_cuda.cu), called from kdtree.c on a CUDA context
 * (internal).
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

/* The same build from points in device memory (d_pts->data; checked finite), leaving the tree's
 * arrays on the device (t->dev_ctx = ctx, d_* arrays, root_box), the host arrays NULL. */
grove_status grove__kd_build_device_cuda(grove_ctx *ctx, const grove_coords *d_pts,
                                         grove_kdtree *t);

/* Frees t's device arrays (if any) and clears dev_ctx. */
void grove__kd_free_device(grove_kdtree *t);

/* The smallest index of a point of d (data in device memory; dims and type checked) with a
 * non-finite coordinate, SIZE_MAX if none; row receives that point's coordinates. */
grove_status grove__kd_find_bad_cuda(grove_ctx *ctx, const grove_coords *d, size_t *bad,
                                     double row[GROVE_KDTREE_MAX_DIMS]);

/* Copies a device tree's arrays into new host arrays of t (all or nothing). */
grove_status grove__kd_download_cuda(grove_ctx *ctx, grove_kdtree *t);

/* Gives a tree with host arrays device copies of them (t->dev_ctx = ctx); all or nothing. */
grove_status grove__kd_upload_cuda(grove_ctx *ctx, grove_kdtree *t);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_KDTREE_CUDA_H */
