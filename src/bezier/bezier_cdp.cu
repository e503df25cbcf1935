/*
 * bezier_cdp.cu - the kernels of the `cdp` tessellation variant: the seed's dynamic-parallelism
 * design under CDP2, with grouped children. The curves' offsets and vertex counts are already
 * known (bezier_cuda.cu's single pass, the same as the flat variant: the parent does not count).
 * A parent grid launches, fire-and-forget, one child grid per group of `group` curves, which
 * writes the vertices of the group's curves (4 tiles of curves a block, bezier_internal.h's tile
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
 * The group child runs 4 tiles a block (1024 threads, a tile group of 256 on each, with its own
 * named barrier; 110 KB of dynamic shared memory). A per-block probe (docs/bezier-gpu.md) found
 * that a device-launched grid of the writer of a tile a block kept one block resident per SM on
 * average (the host launch of the same kernel 5), although the device runtime's own occupancy
 * query says 5 and the blocks do start 5 a SM at first; a block of 4 tiles keeps 4 tiles at work
 * a SM (3.7 measured), which took the children from 1.28 to 0.74 ms at 10^7 curves.
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

/* The per-block probe (grove__bz_cdp_probe; nullptr in normal use): rec[0..15] a header the
 * parent fills, then 4 words a tile (index c0 / kC): %smid, %globaltimer at the tile group's start
 * and end. */
__device__ __forceinline__ u64 gtimer()
{
    u64 v;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
    return v;
}
__device__ __forceinline__ unsigned smid()
{
    unsigned v;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(v));
    return v;
}

/* One tile of a group child: curves [c0, c0 + C) with their offsets from off. */
template <bool kAligned, int kPer, bool kNamed>
__device__ __forceinline__ void group_tile(TileSmem &s, const float *__restrict__ cp,
                                           const uint8_t *__restrict__ deg,
                                           const u64 *__restrict__ off, u64 c0, int C, uint32_t big,
                                           float *__restrict__ xy, u64 *rec)
{
    const unsigned t = tile_tid();
    const u64 t0 = rec ? gtimer() : 0;
    const u64 vbase = off[c0];
    tile_stage(s, cp, deg, c0, C);
    for (int j = (int)t; j <= C; j += kT) s.off[j] = (uint32_t)(off[c0 + j] - vbase);
    tile_sync<kNamed>();
    tile_write<kAligned, kPer, kNamed>(s, C, vbase, ~0ull, big, xy);
    if (rec && t == 0) {
        u64 *r = rec + 16 + 4 * (c0 / kC);
        r[0] = smid();
        r[1] = t0;
        r[2] = gtimer();
    }
}

/* The group child: block b writes the tile of curves [g0 + b kC, ...) of the group's cnt. */
template <bool kAligned, int kPer>
__global__ void __launch_bounds__(kT, 5)
    bz_group(const float *__restrict__ cp, const uint8_t *__restrict__ deg,
             const u64 *__restrict__ off, u64 g0, u64 cnt, uint32_t big, float *__restrict__ xy,
             u64 *rec)
{
    __shared__ TileSmem s;
    const u64 c0 = g0 + (u64)blockIdx.x * kC;
    const int C = g0 + cnt - c0 < (u64)kC ? (int)(g0 + cnt - c0) : kC;
    group_tile<kAligned, kPer, false>(s, cp, deg, off, c0, C, big, xy, rec);
}

/* The group child of kQ tiles a block (kQ x 256 threads, dynamic shared memory: kQ tiles): each
 * tile group of 256 threads runs the tile writer on its own tile with its own named barrier, so
 * one resident block holds kQ tiles. */
constexpr int kQ = 4;
template <bool kAligned, int kPer>
__global__ void __launch_bounds__(kQ *kT, 1)
    bz_group_q(const float *__restrict__ cp, const uint8_t *__restrict__ deg,
               const u64 *__restrict__ off, u64 g0, u64 cnt, uint32_t big, float *__restrict__ xy,
               u64 *rec)
{
    extern __shared__ __align__(16) unsigned char dyn[];
    const unsigned q = threadIdx.x / kT;
    TileSmem &s = reinterpret_cast<TileSmem *>(dyn)[q];
    const u64 c0 = g0 + ((u64)blockIdx.x * kQ + q) * kC;
    const int C = c0 >= g0 + cnt ? 0 : (g0 + cnt - c0 < (u64)kC ? (int)(g0 + cnt - c0) : kC);
    if (C == 0) return; /* the tile groups share no barrier */
    group_tile<kAligned, kPer, true>(s, cp, deg, off, c0, C, big, xy, rec);
}

/* The child variants (grove__bz_cdp_mode): a tile a block (bz_group, the child before session
 * 8) or kQ tiles a block (bz_group_q, the default). */
enum { CDP_TILE = 1, CDP_QUAD = 2 };
constexpr size_t kQuadBytes = kQ * sizeof(TileSmem);

/* Launches the group child for curves [c, c + cnt); returns the launch error. */
template <bool kAligned>
__device__ __forceinline__ cudaError_t launch_group(const float *cp, const uint8_t *deg,
                                                    const u64 *off, u64 c, u64 cnt, uint32_t big,
                                                    int k8, int mode, float *xy, u64 *rec)
{
    const unsigned g = (unsigned)((cnt + kC - 1) / kC);
    cudaStream_t fs = cudaStreamFireAndForget;
    if (mode == CDP_QUAD) {
        const unsigned gq = (g + kQ - 1) / kQ;
        if (k8)
            bz_group_q<kAligned, 8>
                <<<gq, kQ * kT, kQuadBytes, fs>>>(cp, deg, off, c, cnt, big, xy, rec);
        else
            bz_group_q<kAligned, 16>
                <<<gq, kQ * kT, kQuadBytes, fs>>>(cp, deg, off, c, cnt, big, xy, rec);
    } else if (k8) {
        bz_group<kAligned, 8><<<g, kT, 0, fs>>>(cp, deg, off, c, cnt, big, xy, rec);
    } else {
        bz_group<kAligned, 16><<<g, kT, 0, fs>>>(cp, deg, off, c, cnt, big, xy, rec);
    }
    return cudaGetLastError();
}

__device__ __forceinline__ void launch_failed(u64 *st, cudaError_t e)
{
    atomicAdd(&st[S_FAILED], 1ull);
    atomicCAS(&st[S_ERR], 0ull, (u64)e);
}

/* The probe's header, by the parent's first thread: its start time and what the device runtime
 * says of the child it launches (occupancy and attributes). */
template <bool kAligned> __device__ void probe_header(int k8, int mode, u64 *rec)
{
    const void *f;
    int threads = kT;
    size_t dsm = 0;
    if (mode == CDP_QUAD) {
        f = k8 ? (const void *)bz_group_q<kAligned, 8> : (const void *)bz_group_q<kAligned, 16>;
        threads = kQ * kT;
        dsm = kQuadBytes;
    } else {
        f = k8 ? (const void *)bz_group<kAligned, 8> : (const void *)bz_group<kAligned, 16>;
    }
    int nb = -1;
    cudaFuncAttributes a = cudaFuncAttributes();
    const cudaError_t e1 = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, f, threads, dsm);
    const cudaError_t e2 = cudaFuncGetAttributes(&a, f);
    rec[0] = gtimer();
    rec[1] = (u64)nb;
    rec[2] = (u64)e1;
    rec[3] = (u64)e2;
    rec[4] = (u64)a.numRegs;
    rec[5] = (u64)a.sharedSizeBytes;
    rec[6] = (u64)a.localSizeBytes;
    rec[7] = (u64)a.maxThreadsPerBlock;
    rec[8] = (u64)a.maxDynamicSharedSizeBytes;
    rec[9] = (u64)a.preferredShmemCarveout;
}

/* The parent when no curve can be long: a thread per group launches the group's child. */
template <bool kAligned>
__global__ void __launch_bounds__(kParentT)
    bz_parent_groups(const float *__restrict__ cp, const uint8_t *__restrict__ deg,
                     const u64 *__restrict__ off, u64 first, u64 count, u64 group, int k8, int mode,
                     float *xy, u64 *st, u64 *rec)
{
    const u64 k = (u64)blockIdx.x * kParentT + threadIdx.x;
    bool ok = false;
    if (rec && k == 0) probe_header<kAligned>(k8, mode, rec);
    if (k < (count + group - 1) / group) {
        const u64 j = k * group, cnt = count - j < group ? count - j : group;
        const cudaError_t e =
            launch_group<kAligned>(cp, deg, off, first + j, cnt, 0xffffffffu, k8, mode, xy, rec);
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
              const u64 *__restrict__ off, u64 first, u64 count, u64 group, uint32_t big, int k8,
              int mode, float *xy, u64 *st, u64 *rec)
{
    const u64 j = (u64)blockIdx.x * kParentT + threadIdx.x;
    bool ok = false, tried_big = false;
    if (rec && j == 0) probe_header<kAligned>(k8, mode, rec);
    if (j < count) {
        const u64 c = first + j;
        if (j % group == 0) {
            const u64 cnt = count - j < group ? count - j : group;
            const cudaError_t e =
                launch_group<kAligned>(cp, deg, off, c, cnt, big, k8, mode, xy, rec);
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

/* The attributes the cdp kernels need, on the current device (eight attribute calls, once per
 * cdp call): the dynamic shared memory of the children of kQ tiles (over the 48 KB a launch gets
 * without asking), and the largest shared-memory carveout for the children. */
extern "C" cudaError_t grove__bz_cdp_prepare(void)
{
    const void *ch[] = {(const void *)bz_group_q<true, 8>,  (const void *)bz_group_q<true, 16>,
                        (const void *)bz_group_q<false, 8>, (const void *)bz_group_q<false, 16>,
                        (const void *)bz_group<true, 8>,    (const void *)bz_group<true, 16>,
                        (const void *)bz_group<false, 8>,   (const void *)bz_group<false, 16>};
    for (int i = 0; i < 8; i++) {
        cudaError_t e = cudaFuncSetAttribute(ch[i], cudaFuncAttributePreferredSharedMemoryCarveout,
                                             cudaSharedmemCarveoutMaxShared);
        if (e == cudaSuccess && i < 4)
            e = cudaFuncSetAttribute(ch[i], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)kQuadBytes);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

/* Queues one parent grid for curves [first, first + count) on `stream`. Returns the host-side
 * launch error; failed child launches are counted in the state words. mode: the child variant;
 * rec: the probe's records or nullptr. */
extern "C" cudaError_t grove__bz_cdp_launch(const float *d_cp, const uint8_t *d_degree,
                                            const uint64_t *d_offsets, uint64_t first,
                                            uint64_t count, uint64_t group, uint32_t big, int k8,
                                            int mode, float *d_xy, unsigned long long *d_state,
                                            unsigned long long *rec, cudaStream_t stream)
{
    if (count == 0) return cudaSuccess;
    const u64 blocks = (count + kParentT - 1) / kParentT;
    if (blocks > 0x7fffffffull || group == 0 || (group + kC - 1) / kC > 0x7fffffffull)
        return cudaErrorInvalidValue;
    const u64 *off = reinterpret_cast<const u64 *>(d_offsets);
    const bool al = ((uintptr_t)d_xy & 7) == 0;
    u64 *r = reinterpret_cast<u64 *>(rec);
    if (big == 0xffffffffu) {
        const u64 ng = (count + group - 1) / group;
        const unsigned gb = (unsigned)((ng + kParentT - 1) / kParentT);
        if (al)
            bz_parent_groups<true><<<gb, kParentT, 0, stream>>>(d_cp, d_degree, off, first, count,
                                                                group, k8, mode, d_xy, d_state, r);
        else
            bz_parent_groups<false><<<gb, kParentT, 0, stream>>>(d_cp, d_degree, off, first, count,
                                                                 group, k8, mode, d_xy, d_state, r);
    } else if (al) {
        bz_parent<true><<<(unsigned)blocks, kParentT, 0, stream>>>(
            d_cp, d_degree, off, first, count, group, big, k8, mode, d_xy, d_state, r);
    } else {
        bz_parent<false><<<(unsigned)blocks, kParentT, 0, stream>>>(
            d_cp, d_degree, off, first, count, group, big, k8, mode, d_xy, d_state, r);
    }
    return cudaGetLastError();
}

/* The probe's reference: the group child of `mode` launched from the host over all n curves as
 * one grid (aligned output, chunks of 16), records into rec + 16 on. */
extern "C" cudaError_t grove__bz_cdp_host_child(const float *d_cp, const uint8_t *d_degree,
                                                const uint64_t *d_offsets, uint64_t n, int mode,
                                                float *d_xy, unsigned long long *rec,
                                                cudaStream_t stream)
{
    if (n == 0) return cudaSuccess;
    const u64 *off = reinterpret_cast<const u64 *>(d_offsets);
    u64 *r = reinterpret_cast<u64 *>(rec);
    const unsigned g = (unsigned)((n + kC - 1) / kC);
    if (mode == CDP_QUAD)
        bz_group_q<true, 16><<<(g + kQ - 1) / kQ, kQ * kT, kQuadBytes, stream>>>(
            d_cp, d_degree, off, 0, n, 0xffffffffu, d_xy, r);
    else
        bz_group<true, 16><<<g, kT, 0, stream>>>(d_cp, d_degree, off, 0, n, 0xffffffffu, d_xy, r);
    return cudaGetLastError();
}

/* The probe: the host's view of the child of `mode` (aligned, chunks of 16): its attributes and
 * the occupancy the runtime computes for it. */
extern "C" cudaError_t grove__bz_cdp_child_attrs(int mode, cudaFuncAttributes *a, int *blocks)
{
    const void *f =
        mode == CDP_QUAD ? (const void *)bz_group_q<true, 16> : (const void *)bz_group<true, 16>;
    const int threads = mode == CDP_QUAD ? kQ * kT : kT;
    const size_t dsm = mode == CDP_QUAD ? kQuadBytes : 0;
    cudaError_t e = cudaFuncGetAttributes(a, f);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, f, threads, dsm);
    return e;
}
