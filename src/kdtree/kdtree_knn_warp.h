/*
 * kdtree_knn_warp.h - the warp-packet kNN kernel's launcher (kdtree_knn_warp_cuda.cu), used by
 * kdtree_query_cuda.cu for small k on 2-D and 3-D trees (internal, C++ only).
 */
#ifndef GROVE_KDTREE_KNN_WARP_H
#define GROVE_KDTREE_KNN_WARP_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

/* The launch's arguments, all pointers device memory: the tree (nodes as 5 words each, boxes,
 * points of dims coordinates, float or double, index), the batch's m queries as doubles in row
 * order, ord (visiting position -> row), and the outputs oi / od (od may be NULL), row r at
 * r * k; cap = min(k, n). */
struct grove__kdw_launch {
    const uint32_t *rec; /* grove__kdw_records' output for the tree */
    const unsigned long long *nodes;
    const double *bounds;
    const void *pts;
    const unsigned long long *index;
    const double *qs;
    const uint32_t *ord;
    uint32_t m;
    int cap, k, dims, f64;
    unsigned long long *oi;
    double *od;
};

/* Whether grove__kdw_knn() takes a search of cap neighbours in dims dimensions on a tree of n
 * points, num_nodes nodes and the given depth. */
bool grove__kdw_handles(int dims, int cap, size_t n, size_t num_nodes, size_t depth);

/* Writes the search's node records (GROVE__KDW_REC_BYTES per node, 16-byte aligned) of the tree
 * (its device nodes and boxes) to rec, on stream s; returns the launch's error. */
#define GROVE__KDW_REC_BYTES 32
cudaError_t grove__kdw_records(const unsigned long long *nodes, const double *bounds,
                               size_t num_nodes, int dims, uint32_t *rec, cudaStream_t s);

/* Launches the search on stream s; returns the launch's error (cudaGetLastError). */
cudaError_t grove__kdw_knn(const grove__kdw_launch *l, cudaStream_t s);

#endif /* GROVE_KDTREE_KNN_WARP_H */
