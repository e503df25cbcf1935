/*
 * quadtree_cuda.h - the quadtree module's CUDA code, called from its C files (internal).
 *
 * The builds work on points already on the device and leave the tree there: they allocate
 * t->d_nodes, t->d_pts and t->d_index with grove__cuda_alloc() on ctx (sizes in
 * quadtree_internal.h) and set t->num_nodes, t->d_nodes_bytes and t->dev_ctx = ctx. The caller has
 * checked the options and the points (finite, inside root) and made ctx's device current; t->n and
 * t->opts are set. On failure they free what they allocated and leave those fields NULL / 0.
 */
#ifndef GROVE_QUADTREE_CUDA_H
#define GROVE_QUADTREE_CUDA_H

#include "quadtree_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* d_xyz: t->n points of `dims` floats (x, y first) on ctx's device. */
grove_status grove__qt_build_morton_cuda(grove_ctx *ctx, const float *d_xyz, int dims,
                                         const float root[4], grove_quadtree *t);
grove_status grove__qt_build_recursive_cuda(grove_ctx *ctx, const float *d_xyz, int dims,
                                            const float root[4], grove_quadtree *t);

/* Test hook: the morton build's radix sort covers the first `sorted_levels` levels (at most
 * max_depth; for max_depth <= 16) and the nodes of that level that split get their deeper digits
 * afterwards, whatever the build's own choice from a sample of the points; 0 restores the
 * choice. The tree is the same either way. Not thread-safe; for tests. */
void grove__qt_morton_tune(int sorted_levels);

/* Checks n points of `dims` floats on the device: every coordinate x, y finite and, when box is
 * not NULL, inside it; else computes the bounding box. Writes the root box (as check_points in
 * quadtree.c would) to root, or the index of the first bad point to *bad (SIZE_MAX if none)
 * with its coordinates to bad_xy. */
grove_status grove__qt_check_points_cuda(grove_ctx *ctx, const float *d_xyz, size_t n, int dims,
                                         const float *box, float root[4], size_t *bad,
                                         float bad_xy[2]);

/* Frees the tree's device arrays (no-op without them). */
void grove__qt_free_device(grove_quadtree *t);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_QUADTREE_CUDA_H */
