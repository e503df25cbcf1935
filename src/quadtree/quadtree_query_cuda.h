/*
 * quadtree_query_cuda.h - the CUDA backend of the quadtree queries (quadtree_query_cuda.cu),
 * called from quadtree_query.c on a CUDA context (internal).
 *
 * The caller has checked every argument (the messages of the public entry points belong to it)
 * and passes its function name `fn` for the messages these raise. The tree is used from the
 * device when t->dev_ctx == ctx; otherwise its host arrays are uploaded for the call and freed
 * before return (a tree with neither fails with GROVE_ERR_INVALID_ARG). Both return after the
 * results are in host memory and free everything they allocated on every path.
 */
#ifndef GROVE_QUADTREE_QUERY_CUDA_H
#define GROVE_QUADTREE_QUERY_CUDA_H

#include "quadtree_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* nq boxes of 4 floats; on success *off (nq + 1 entries) and *ind (at least one element) are
 * malloc'ed arrays the caller takes over, exactly as the CPU backend fills them. */
grove_status grove__qt_query_boxes_cuda(grove_ctx *ctx, const char *fn, const grove_quadtree *t,
                                        const float *boxes, size_t nq, uint64_t **off,
                                        uint32_t **ind);

/* nq points of 2 floats; writes nq * k indices and, when dist2 is not NULL, distances. */
grove_status grove__qt_knn_cuda(grove_ctx *ctx, const char *fn, const grove_quadtree *t,
                                const float *queries, size_t nq, int k, uint32_t *indices,
                                double *dist2);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_QUADTREE_QUERY_CUDA_H */
