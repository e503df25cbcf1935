/*
 * quadtree_morton_cuda.cuh - what the CUDA files of the quadtree's morton build share
 * (internal): the error macros, the node type, the float arithmetic of a descent, and the
 * build's device buffers. quadtree_cuda.cu has the build and its description;
 * quadtree_sorted_cuda.cu how many levels the radix sort covers and the runs below them;
 * quadtree_check_cuda.cu the check of the input points.
 */
#ifndef GROVE_QUADTREE_MORTON_CUDA_CUH
#define GROVE_QUADTREE_MORTON_CUDA_CUH

#include <cuda_runtime.h>

#include <stdint.h>

#include "core_cuda.h"
#include "quadtree_cuda.h"

/* GROVE_CUDA_TRY for functions that clean up at `_end:` with the status in `st`. */
#define QT_CUDA_END(call, what)                                                                    \
    do {                                                                                           \
        cudaError_t qt_e_ = (call);                                                                \
        if (qt_e_ != cudaSuccess) {                                                                \
            st = grove__cuda_status(ctx, (int)qt_e_, (what));                                      \
            goto _end;                                                                             \
        }                                                                                          \
    } while (0)
#define QT_LAUNCHED_END(what) QT_CUDA_END(cudaGetLastError(), what)

namespace grove_qt
{

typedef grove_quadtree_node Node;

const int kBlock = 256;

/* grove__qt_mid without contraction: both halvings and the sum round separately. */
__device__ __forceinline__ float qt_mid(float lo, float hi)
{
    return __fadd_rn(__fmul_rn(0.5f, lo), __fmul_rn(0.5f, hi));
}

inline unsigned blocks_for(size_t n)
{
    size_t b = (n + kBlock - 1) / kBlock;
    return (unsigned)(b < 1 ? 1 : (b > 65535u * 16u ? 65535u * 16u : b));
}

/* Longest run below the sorted level that deep_kernel sorts in shared memory (step 2b). */
const uint32_t kDeepSmall = 256;

/* The quadrant path of point (x, y) for `levels` levels below a node of box (lo_x, lo_y, hi_x,
 * hi_y): keys_kernel's descent started from that node, so it gives the same digits as a
 * descent from the root would. */
template <typename K = uint32_t>
__device__ __forceinline__ K deep_path(float x, float y, float lo_x, float lo_y, float hi_x,
                                       float hi_y, int levels)
{
    float b0 = __fmul_rn(0.5f, lo_x), b1 = __fmul_rn(0.5f, lo_y), b2 = __fmul_rn(0.5f, hi_x),
          b3 = __fmul_rn(0.5f, hi_y);
    K key = 0;
    for (int l = 0; l < levels; l++) {
        float cx = __fadd_rn(b0, b2), cy = __fadd_rn(b1, b3);
        unsigned right = x >= cx, low = y < cy;
        float hx = __fmul_rn(0.5f, cx), hy = __fmul_rn(0.5f, cy);
        key = (key << 2) | (right + 2u * low);
        if (right)
            b0 = hx;
        else
            b2 = hx;
        if (low)
            b3 = hy;
        else
            b1 = hy;
    }
    return key;
}

/* Device buffers of one build, freed together. */
struct Buffers {
    grove_ctx *ctx;
    void *stream;
    void *p[16];
    size_t bytes[16];
    int count;

    grove_status alloc(void **out, size_t b, const char *what)
    {
        grove_status st;
        if (count == 16)
            return grove__error(ctx, GROVE_ERR_INTERNAL, "quadtree: too many device buffers");
        st = grove__cuda_alloc(ctx, out, b, stream, what);
        if (st == GROVE_OK && *out) {
            p[count] = *out;
            bytes[count++] = b;
        }
        return st;
    }
    /* Frees one buffer early (and forgets it). */
    void release(void *q)
    {
        for (int i = 0; i < count; i++)
            if (p[i] == q) {
                grove__cuda_free(ctx, p[i], bytes[i], stream);
                p[i] = p[count - 1];
                bytes[i] = bytes[count - 1];
                count--;
                return;
            }
    }
    /* Stops tracking a buffer the tree now owns. */
    void keep(void *q)
    {
        for (int i = 0; i < count; i++)
            if (p[i] == q) {
                p[i] = p[count - 1];
                bytes[i] = bytes[count - 1];
                count--;
                return;
            }
    }
    void free_all()
    {
        while (count > 0) {
            count--;
            grove__cuda_free(ctx, p[count], bytes[count], stream);
        }
    }
};

/* Grows the scratch buffer *t (of *cap bytes) to at least `need` bytes. */
inline grove_status ensure(Buffers &buf, void **t, size_t *cap, size_t need, const char *what)
{
    if (need <= *cap) return GROVE_OK;
    buf.release(*t);
    *t = NULL;
    *cap = 0;
    GROVE_TRY(buf.alloc(t, need, what));
    *cap = need;
    return GROVE_OK;
}

/* Step 2a (quadtree_sorted_cuda.cu): how many levels of the key the radix sort covers. */
grove_status choose_sorted(grove_ctx *ctx, Buffers &buf, void **temp, size_t *temp_cap,
                           const float *xyz, int dims, size_t n, const float root[4], int depth,
                           int min_points, int *sorted);

/* Step 2b (quadtree_sorted_cuda.cu): the deeper digits and order of the sorted level's split
 * nodes' runs. */
grove_status deep_sort(grove_ctx *ctx, Buffers &buf, void **temp, size_t *temp_cap,
                       const Node *lvl, uint32_t m, uint32_t count, const uint32_t *flags,
                       const uint32_t *rank, const float *xyz, int dims, int levels,
                       uint32_t *keys, uint32_t *idx, uint32_t *keys_t, uint32_t *idx_t,
                       size_t n, int64_t known_nbig);

} /* namespace grove_qt */

#endif /* GROVE_QUADTREE_MORTON_CUDA_CUH */
