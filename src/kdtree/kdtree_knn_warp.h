/*
 * kdtree_knn_warp.h - the warp-packet kNN kernel's launcher (kdtree_knn_warp_cuda.cu), used by
 * kdtree_query_cuda.cu for small k on 2-D and 3-D trees (internal, C++ only).
 */
#ifndef GROVE_KDTREE_KNN_WARP_H
#define GROVE_KDTREE_KNN_WARP_H

#include <cuda_runtime.h>
#include <stdint.h>

/* The launch's arguments, all pointers device memory: the tree (nodes as 5 words each, boxes,
 * points of dims coordinates, float or double, index), the batch's m queries as doubles in row
 * order, ord (visiting position -> row), and the outputs oi / od (od may be NULL), row r at
 * r * k; cap = min(k, n). */
struct grove__kdw_launch {
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

/* Whether grove__kdw_knn() takes a search of cap neighbours in dims dimensions; the caller also
 * checks that the tree has fewer than 2^32 points and nodes and depth + 2 <= grove__kdw_stack. */
bool grove__kdw_handles(int dims, int cap);
extern const int grove__kdw_stack;

/* Launches the search on stream s; returns the launch's error (cudaGetLastError). */
cudaError_t grove__kdw_knn(const grove__kdw_launch *l, cudaStream_t s);

#endif /* GROVE_KDTREE_KNN_WARP_H */
