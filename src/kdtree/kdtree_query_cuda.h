/*
 * kdtree_query_cuda.h - the CUDA backend of the k-d tree queries (kdtree_query_cuda.cu), called
 * from kdtree_query.c on a CUDA context (internal).
 *
 * The caller has checked every argument (the messages of the public entry points belong to it),
 * converted the queries to doubles (qx: nq * t->dims, borrowed) and computed their visiting
 * order (order: a permutation of 0..nq-1, borrowed; only the speed depends on it). It passes its
 * function name `fn` for the messages these raise. A tree's own device arrays are used where it
 * has them (grove_kdtree_build_device()); host arrays are uploaded for the call. Both functions
 * return after the results are written and free every device and host buffer they allocated on
 * every path. The results are the CPU backend's bytes.
 */
#ifndef GROVE_KDTREE_QUERY_CUDA_H
#define GROVE_KDTREE_QUERY_CUDA_H

#include "kdtree_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* kNN (an exception to the above: the queries are neither converted nor ordered by the caller,
 * only checked; they are ordered here, on the GPU). host != 0: q->data, indices and dist2 are
 * host memory (staged through the device in batches); host == 0: all three are device memory.
 * Writes q->n * k input positions to indices and, when dist2 is not NULL, the squared
 * distances, row i for query i; rows are padded with UINT64_MAX / INFINITY beyond
 * min(k, t->n). The tree's own device arrays are used where it has them. */
grove_status grove__kd_knn_cuda(grove_ctx *ctx, const grove_kdtree *t, const grove_coords *q,
                                int host, int k, uint64_t *indices, double *dist2);

/* Every tree point with squared distance <= r2, at most cap per query (cap == t->n: no cap;
 * the caller has mapped 0 and caps above n to n). On success fills *out (malloc'ed arrays the
 * caller takes over, as the CPU backend fills them); on failure leaves it untouched. */
grove_status grove__kd_radius_cuda(grove_ctx *ctx, const char *fn, const grove_kdtree *t,
                                   const double *qx, const uint64_t *order, size_t nq, double r2,
                                   size_t cap, grove_kdtree_result *out);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_KDTREE_QUERY_CUDA_H */
