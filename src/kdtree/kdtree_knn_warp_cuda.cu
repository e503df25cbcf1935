/*
 * kdtree_knn_warp_cuda.cu - the warp-packet kNN kernel (kdtree_knn_warp.h): a warp's 32
 * Morton-adjacent queries walk the tree together (the search is in kdtree_knn_warp.cuh, which
 * says why). The results are the CPU backend's bytes.
 */
#include <cuda_runtime.h>

#include "kdtree_knn_warp.h"

#define KDW_FN __device__ __forceinline__
#define kdw_ldg(p) __ldg(p)
#define kdw_ballot(pred) __ballot_sync(0xffffffffu, (pred))
#define kdw_shfl(v, src) __shfl_sync(0xffffffffu, (v), (src))
#define kdw_popc(x) __popc(x)
#define kdw_as_double(w) __longlong_as_double((long long)(w))
#define kdw_sub(a, b) __dsub_rn((a), (b))
#define kdw_mul(a, b) __dmul_rn((a), (b))
#define kdw_add(a, b) __dadd_rn((a), (b))
#define kdw_fsub_rz(a, b) __fsub_rz((a), (b))
#define kdw_fmul_rz(a, b) __fmul_rz((a), (b))
#define kdw_fma_rz(a, b, c) __fmaf_rz((a), (b), (c))
#define kdw_f2f_rd(x) __double2float_rd(x)
#define kdw_f2f_ru(x) __double2float_ru(x)
#define kdw_f2f_rn(x) __double2float_rn(x)
#define kdw_as_float(w) __uint_as_float(w)
#define kdw_float_bits(f) __float_as_uint(f)
#define kdw_ld4(p, w) kdw_ld4_((p), (w))

static __device__ __forceinline__ void kdw_ld4_(const uint32_t *p, uint32_t *w)
{
    const uint4 v = __ldg(reinterpret_cast<const uint4 *>(p));
    w[0] = v.x;
    w[1] = v.y;
    w[2] = v.z;
    w[3] = v.w;
}

#include "kdtree_knn_warp.cuh"

namespace
{

constexpr int BLOCK = 128;

/* Per list size (K = 1, 8, 16, 32): whether this kernel runs; where not, knn_fast (one thread per
 * query, kdtree_query_cuda.cu) does. Measured on an H100 at 10^7 uniform 3-D points and queries
 * (2026-11-23, before the float filters): K = 1 9.39 ms knn_fast against 9.48 here, K = 8 26.3
 * against 18.8, K = 16 78.4 against 34.5, K = 32 809 against 78.4; with them (same day) K = 8
 * 14.8, K = 16 28.8, K = 32 70.0 (K = 1 not measured again). */
constexpr bool USE[4] = {false, true, true, true};

constexpr int slot(int cap) { return cap <= 1 ? 0 : cap <= 8 ? 1 : cap <= 16 ? 2 : 3; }

/* Blocks per SM asked of the compiler: the list takes 3 registers per neighbour. */
constexpr int min_blocks(int K) { return K <= 8 ? 8 : K <= 16 ? 4 : 2; }

template <int K, int D, bool F64>
__global__ void __launch_bounds__(BLOCK, min_blocks(K)) knn_warp(kdw::Args a)
{
    const uint32_t pos0 = blockIdx.x * BLOCK + (threadIdx.x & ~31u);
    kdw::knn_warp_body<K, D, F64>(a, pos0, (int)(threadIdx.x & 31u));
}

template <int D>
__global__ void __launch_bounds__(BLOCK) records(const kdw::u64 *nodes, const double *bounds,
                                                 size_t num, uint32_t *rec)
{
    for (size_t i = blockIdx.x * (size_t)BLOCK + threadIdx.x; i < num;
         i += (size_t)gridDim.x * BLOCK) {
        uint32_t w[8];
        kdw::build_rec<D>(nodes, bounds, i, w);
        uint4 *r = reinterpret_cast<uint4 *>(rec + 8 * i);
        r[0] = make_uint4(w[0], w[1], w[2], w[3]);
        r[1] = make_uint4(w[4], w[5], w[6], w[7]);
    }
}

template <int K, int D, bool F64> void launch_k(const kdw::Args &a, unsigned g, cudaStream_t s)
{
    if constexpr (USE[slot(K)]) knn_warp<K, D, F64><<<g, BLOCK, 0, s>>>(a);
}

template <int D, bool F64> void launch(const kdw::Args &a, unsigned g, cudaStream_t s)
{
    if (a.cap <= 1)
        launch_k<1, D, F64>(a, g, s);
    else if (a.cap <= 8)
        launch_k<8, D, F64>(a, g, s);
    else if (a.cap <= 16)
        launch_k<16, D, F64>(a, g, s);
    else
        launch_k<32, D, F64>(a, g, s);
}

} // namespace

bool grove__kdw_handles(int dims, int cap, size_t n, size_t num_nodes, size_t depth)
{
    return (dims == 2 || dims == 3) && cap >= 1 && cap <= 32 && USE[slot(cap)] &&
           n < kdw::REC_LIMIT && num_nodes < kdw::REC_LIMIT && depth + 2 <= (size_t)kdw::STACK;
}

cudaError_t grove__kdw_records(const unsigned long long *nodes, const double *bounds,
                               size_t num_nodes, int dims, uint32_t *rec, cudaStream_t s)
{
    const size_t want = (num_nodes + BLOCK - 1) / BLOCK;
    const unsigned g = (unsigned)(want < 8192 ? (want ? want : 1) : 8192);
    if (dims == 2)
        records<2><<<g, BLOCK, 0, s>>>(nodes, bounds, num_nodes, rec);
    else
        records<3><<<g, BLOCK, 0, s>>>(nodes, bounds, num_nodes, rec);
    return cudaGetLastError();
}

cudaError_t grove__kdw_knn(const grove__kdw_launch *l, cudaStream_t s)
{
    kdw::Args a;
    a.rec = l->rec;
    a.nodes = l->nodes;
    a.bounds = l->bounds;
    a.pts = l->pts;
    a.index = l->index;
    a.qs = l->qs;
    a.ord = l->ord;
    a.m = l->m;
    a.cap = l->cap;
    a.k = l->k;
    a.oi = l->oi;
    a.od = l->od;
    const unsigned g = (unsigned)((l->m + BLOCK - 1) / BLOCK);
    if (l->dims == 2) {
        if (l->f64)
            launch<2, true>(a, g, s);
        else
            launch<2, false>(a, g, s);
    } else {
        if (l->f64)
            launch<3, true>(a, g, s);
        else
            launch<3, false>(a, g, s);
    }
    return cudaGetLastError();
}
