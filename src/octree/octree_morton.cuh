/*
 * octree_morton.cuh - the Morton-order kernels that the CUDA octree build (octree_cuda.cu) and
 * its benchmark's sort floor (bench/bench_octree_cuda.cu) share (internal). Each file that
 * includes it gets its own copy of the kernels.
 */
#ifndef GROVE_OCTREE_MORTON_CUH
#define GROVE_OCTREE_MORTON_CUH

#include <stddef.h>
#include <stdint.h>

#include "octree_internal.h" /* grove__ot_morton_hi */

namespace
{

/* key[i]: the top 21 bits of point i's three 30-bit grid coordinates q[3i..3i+2], interleaved
 * (the cells of levels 0..20, octant digits, level 0 on top: a cell of level l <= 21 is the
 * key's top 3 l bits, so in key order every such cell is one run); idx[i] = i. */
__global__ void morton_kernel(const uint32_t *__restrict__ q, size_t n,
                              unsigned long long *__restrict__ key, uint32_t *__restrict__ idx)
{
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    key[i] = grove__ot_morton_hi(q + 3 * i);
    idx[i] = (uint32_t)i;
}

/* dq[j] = q[perm[j]] (three words each), and dleaf[j] = leaf[perm[j]] when leaf is given. */
__global__ void permute_kernel(const uint32_t *__restrict__ perm, size_t n,
                               const uint32_t *__restrict__ q, uint32_t *__restrict__ dq,
                               const uint32_t *__restrict__ leaf, uint32_t *__restrict__ dleaf)
{
    const size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (j >= n) return;
    const size_t i = perm[j];
    dq[3 * j] = q[3 * i];
    dq[3 * j + 1] = q[3 * i + 1];
    dq[3 * j + 2] = q[3 * i + 2];
    if (leaf) dleaf[j] = leaf[i];
}

} /* namespace */

#endif /* GROVE_OCTREE_MORTON_CUH */
