/*
 * kdtree_build_cuda.cuh - what the two files of the CUDA k-d tree build share (internal): the
 * node records under construction and the stages of kdtree_small_cuda.cu (small nodes, output)
 * that the level loop of kdtree_cuda.cu calls.
 */
#ifndef GROVE_KDTREE_BUILD_CUDA_CUH
#define GROVE_KDTREE_BUILD_CUDA_CUH

#include <cuda_runtime.h>

#include <stddef.h>
#include <stdint.h>

#include "core_cuda.h"
#include "kdtree_internal.h"

namespace grove_kd
{

const int kSmall = GROVE__KD_SMALL;
const int kBlock = 256;

/* A node under construction (kdtree_cpu.c's bnode): ids in construction order. */
struct BNode {
    uint64_t begin, end;
    uint64_t left, right; /* 0 for a leaf */
    double split;
    int32_t axis, kind;
};

/* A small root: its node id and level. */
struct SmallRoot {
    uint64_t id;
    uint32_t level, pad;
};

inline unsigned grid_for(size_t n, int block = kBlock)
{
    size_t b = (n + (size_t)block - 1) / (size_t)block;
    return (unsigned)(b < 1 ? 1 : (b > 65535u * 64u ? 65535u * 64u : b));
}

#define KD_LAUNCHED(what)                                                                          \
    do {                                                                                           \
        cudaError_t kd_e_ = cudaGetLastError();                                                    \
        if (kd_e_ != cudaSuccess) return grove__cuda_status(ctx, (int)kd_e_, (what));              \
    } while (0)

/* The small-node stage: the subtree of each of the nroots small roots (D axes, leaves of at
 * most leaf points) into the scratch slots sub/subb[2 * begin ...] in construction order, its
 * node count to cnt[r], the deepest level to *depth, the root's points put in tree order in
 * perm. x: the coordinates in tree order, one array of n per axis (x[d * n + i]), doubles if
 * f64, else floats. */
grove_status small_stage(grove_ctx *ctx, int D, bool f64, const BNode *nodes,
                         const SmallRoot *roots, uint32_t nroots, int leaf, const void *x, size_t n,
                         uint64_t *perm, BNode *sub, double *subb, uint32_t *cnt,
                         unsigned long long *depth, cudaStream_t s);

/* The output stage's numbering: small_of[id] = 1 + the small-root number of large-stage node
 * id, else 0 (small_of zeroed by the caller); size[id] its subtree's node count and pre[id] its
 * preorder position (pre[0] = 0 set by the caller). levels[L] .. levels[L + 1]: the ids of
 * level L, L < nlevels. */
grove_status order_nodes(grove_ctx *ctx, const BNode *nodes, const SmallRoot *roots,
                         uint32_t nroots, const uint32_t *cnt, const uint64_t *levels,
                         size_t nlevels, uint32_t *small_of, uint64_t *size, uint64_t *pre,
                         cudaStream_t s);

/* Writes every node at its preorder position: the num large-stage nodes from nodes/bounds, the
 * small roots' subtrees from sub/subb, renumbered. */
grove_status write_nodes(grove_ctx *ctx, const BNode *nodes, uint64_t num, int D,
                         const double *bounds, const uint32_t *small_of, const uint64_t *pre,
                         const SmallRoot *roots, uint32_t nroots, const BNode *sub,
                         const double *subb, const uint32_t *cnt, grove_kdtree_node *onodes,
                         double *obounds, cudaStream_t s);

} /* namespace grove_kd */

#endif /* GROVE_KDTREE_BUILD_CUDA_CUH */
