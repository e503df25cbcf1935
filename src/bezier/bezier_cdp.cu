/*
 * bezier_cdp.cu - the kernels of the `cdp` tessellation variant: the seed's dynamic-parallelism
 * design under CDP2, with grouped children. The curves' offsets and vertex counts are already
 * known (bezier_cuda.cu's single pass, the same as the flat variant: the parent does not count).
 * A parent grid launches, fire-and-forget, one child grid per group of `group` curves, which
 * writes the vertices of the group's curves (a block per tile of curves, bezier_internal.h's tile
 * writer, the same as flat's); when max_points allows curves of `big` vertices or more, the
 * parent has a thread per curve and each such curve's thread also launches a child grid of its
 * own for it (a thread per vertex), which the group child skips. Without long curves the parent
 * has a thread per group. There is no device-side synchronization (CDP2 has none); a parent grid
 * completes when its children have.
 *
 * Why groups: a child launch costs the device runtime about 0.65 us (1.5 million launches a
 * second on the H100), while a curve's own work is a few nanoseconds of bandwidth; one child per
 * curve ran thousands of times slower than the flat variant (docs/bezier-gpu.md).
 *
 * The children are slower than the same grid launched from the host (the group writer over 10^7
 * curves: 1.45 ms as children, 0.66 ms from the host). A per-block probe (docs/bezier-gpu.md)
 * found why: the children start at once and use every SM, but a device-launched grid of this
 * writer keeps one resident block per SM, where the host launch keeps 5. grove__bz_cdp_prepare
 * asks for the largest shared-memory carveout on the parents and the children; the probe shows
 * that this leaves the mean at one block per SM, so what the device runtime bases it on is still
 * open.
 *
 * This file is compiled with relocatable device code into the grove_cdp library, linked after
 * libgrove: it calls no grove__ function, only the CUDA runtime and bezier_internal.h's inline
 * code, and reports through cudaError_t and the state words it leaves in device memory.
 */
#include <cuda_runtime.h>

#include <stdint.h>

#include "bezier_internal.h"

namespace grove_bzcdp
{

using namespace grove_bzk;

constexpr int kParentT = 128; /* parent threads per block */
constexpr int kChildMaxT = 256;

/* One long curve, passed by value so the child reads nothing but its parameters. */
struct Curve {
    float cp[8];
    uint32_t m;
    uint8_t degree;
};

__global__ void bz_child(Curve c, float *xy)
{
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= c.m) return;
    float p[2];
    grove__bz_vertex(c.cp, c.degree, i, c.m, p);
    xy[2 * (u64)i] = p[0];
    xy[2 * (u64)i + 1] = p[1];
}

/* The group child: block b writes the tile of curves [g0 + b kC, ...) of the group's cnt. */
template <bool kAligned, int kPer>
__global__ void __launch_bounds__(kT, 5)
    bz_group(const float *__restrict__ cp, const uint8_t *__restrict__ deg,
             const u64 *__restrict__ off, u64 g0, u64 cnt, uint32_t big, int bm,
             float *__restrict__ xy)
{
    __shared__ TileSmem s;
    const u64 c0 = g0 + (u64)blockIdx.x * kC;
    const int C = g0 + cnt - c0 < (u64)kC ? (int)(g0 + cnt - c0) : kC;
    const u64 vbase = off[c0];
    tile_stage(s, cp, deg, c0, C, bm);
    for (int j = (int)threadIdx.x; j <= C; j += kT) s.off[j] = (uint32_t)(off[c0 + j] - vbase);
    __syncthreads();
    tile_write<kAligned, kPer>(s, C, vbase, ~0ull, big, bm, xy);
}

/* Launches the group child for curves [c, c + cnt); returns the launch error. */
template <bool kAligned>
__device__ __forceinline__ cudaError_t launch_group(const float *cp, const uint8_t *deg,
                                                    const u64 *off, u64 c, u64 cnt, uint32_t big,
                                                    int bm, int k8, float *xy)
{
    const unsigned g = (unsigned)((cnt + kC - 1) / kC);
    if (k8)
        bz_group<kAligned, 8>
            <<<g, kT, 0, cudaStreamFireAndForget>>>(cp, deg, off, c, cnt, big, bm, xy);
    else
        bz_group<kAligned, 16>
            <<<g, kT, 0, cudaStreamFireAndForget>>>(cp, deg, off, c, cnt, big, bm, xy);
    return cudaGetLastError();
}

__device__ __forceinline__ void launch_failed(u64 *st, cudaError_t e)
{
    atomicAdd(&st[S_FAILED], 1ull);
    atomicCAS(&st[S_ERR], 0ull, (u64)e);
}

/* The parent when no curve can be long: a thread per group launches the group's child. */
template <bool kAligned>
__global__ void __launch_bounds__(kParentT)
    bz_parent_groups(const float *__restrict__ cp, const uint8_t *__restrict__ deg,
                     const u64 *__restrict__ off, u64 first, u64 count, u64 group, int bm, int k8,
                     float *xy, u64 *st)
{
    const u64 k = (u64)blockIdx.x * kParentT + threadIdx.x;
    bool ok = false;
    if (k < (count + group - 1) / group) {
        const u64 j = k * group, cnt = count - j < group ? count - j : group;
        const cudaError_t e =
            launch_group<kAligned>(cp, deg, off, first + j, cnt, 0xffffffffu, bm, k8, xy);
        ok = e == cudaSuccess;
        if (!ok) launch_failed(st, e);
    }
    const unsigned n_ok = __popc(__ballot_sync(0xffffffffu, ok));
    if ((threadIdx.x & 31) == 0 && n_ok) atomicAdd(&st[S_LAUNCHES], (u64)n_ok);
}

/* The parent when curves of >= big vertices are possible: a thread per curve; the first of each
 * group launches the group's child, each long curve's thread a child of its own. */
template <bool kAligned>
__global__ void __launch_bounds__(kParentT)
    bz_parent(const float *__restrict__ cp, const uint8_t *__restrict__ deg,
              const u64 *__restrict__ off, u64 first, u64 count, u64 group, uint32_t big, int bm,
              int k8, float *xy, u64 *st)
{
    const u64 j = (u64)blockIdx.x * kParentT + threadIdx.x;
    bool ok = false, tried_big = false;
    if (j < count) {
        const u64 c = first + j;
        if (j % group == 0) {
            const u64 cnt = count - j < group ? count - j : group;
            const cudaError_t e = launch_group<kAligned>(cp, deg, off, c, cnt, big, bm, k8, xy);
            ok = e == cudaSuccess;
            if (!ok) launch_failed(st, e);
        }
        const u64 b = off[c];
        const uint32_t m = (uint32_t)(off[c + 1] - b);
        if (m >= big) {
            Curve cv;
            for (int k = 0; k < 8; k++) cv.cp[k] = __ldg(cp + 8 * c + k);
            cv.degree = __ldg(deg + c);
            cv.m = m;
            tried_big = true;
            bz_child<<<(m + kChildMaxT - 1) / kChildMaxT, kChildMaxT, 0, cudaStreamFireAndForget>>>(
                cv, xy + 2 * b);
            const cudaError_t e2 = cudaGetLastError();
            if (e2 == cudaSuccess)
                atomicAdd(&st[S_LAUNCHES], 1ull);
            else
                launch_failed(st, e2);
        }
    }
    /* one atomic per warp for the group launches and the long curves */
    const unsigned n_ok = __popc(__ballot_sync(0xffffffffu, ok));
    const unsigned n_big = __popc(__ballot_sync(0xffffffffu, tried_big));
    if ((threadIdx.x & 31) == 0) {
        if (n_ok) atomicAdd(&st[S_LAUNCHES], (u64)n_ok);
        if (n_big) atomicAdd(&st[S_BIG], (u64)n_big);
    }
}

} // namespace grove_bzcdp

using namespace grove_bzcdp;

/* The largest shared-memory carveout for the parents and the children (see the top of the file),
 * on the current device; eight attribute calls, made once per cdp call. */
extern "C" cudaError_t grove__bz_cdp_prepare(void)
{
    const void *k[] = {(const void *)bz_parent_groups<true>, (const void *)bz_parent_groups<false>,
                       (const void *)bz_parent<true>,        (const void *)bz_parent<false>,
                       (const void *)bz_group<true, 8>,      (const void *)bz_group<true, 16>,
                       (const void *)bz_group<false, 8>,     (const void *)bz_group<false, 16>};
    for (const void *f : k) {
        const cudaError_t e = cudaFuncSetAttribute(
            f, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

/* Queues one parent grid for curves [first, first + count) on `stream`. Returns the host-side
 * launch error; failed child launches are counted in the state words. */
extern "C" cudaError_t grove__bz_cdp_launch(const float *d_cp, const uint8_t *d_degree,
                                            const uint64_t *d_offsets, uint64_t first,
                                            uint64_t count, uint64_t group, uint32_t big, int bm,
                                            int k8, float *d_xy, unsigned long long *d_state,
                                            cudaStream_t stream)
{
    if (count == 0) return cudaSuccess;
    const u64 blocks = (count + kParentT - 1) / kParentT;
    if (blocks > 0x7fffffffull || group == 0 || (group + kC - 1) / kC > 0x7fffffffull)
        return cudaErrorInvalidValue;
    const u64 *off = reinterpret_cast<const u64 *>(d_offsets);
    const bool al = ((uintptr_t)d_xy & 7) == 0;
    if (big == 0xffffffffu) {
        const u64 ng = (count + group - 1) / group;
        const unsigned gb = (unsigned)((ng + kParentT - 1) / kParentT);
        if (al)
            bz_parent_groups<true><<<gb, kParentT, 0, stream>>>(d_cp, d_degree, off, first, count,
                                                                group, bm, k8, d_xy, d_state);
        else
            bz_parent_groups<false><<<gb, kParentT, 0, stream>>>(d_cp, d_degree, off, first, count,
                                                                 group, bm, k8, d_xy, d_state);
    } else if (al) {
        bz_parent<true><<<(unsigned)blocks, kParentT, 0, stream>>>(
            d_cp, d_degree, off, first, count, group, big, bm, k8, d_xy, d_state);
    } else {
        bz_parent<false><<<(unsigned)blocks, kParentT, 0, stream>>>(
            d_cp, d_degree, off, first, count, group, big, bm, k8, d_xy, d_state);
    }
    return cudaGetLastError();
}
