/*
 * quadtree_check_cuda.cu - the check of points already on the device before a quadtree build:
 * every coordinate finite and inside the given box, or else the bounding box, in one pass.
 */
#include <math.h>
#include <stdlib.h>

#include "quadtree_morton_cuda.cuh"

using namespace grove_qt;

namespace
{

/* One pass over the points: the smallest index of a bad point (a non-finite x or y, or one
 * outside the given box) and the bounding box of the points, per block; the host combines the
 * kCheckBlocks partial results. Min and max do not depend on the order they are taken in, but
 * for the sign of zero, which the host normalises. */
const int kCheckBlocks = 1024;

struct CheckPart {
    unsigned long long bad;
    float lo_x, lo_y, hi_x, hi_y;
};

__global__ void __launch_bounds__(kBlock)
    check_kernel(const float *__restrict__ xyz, int dims, size_t n, int use_box, float b0, float b1,
                 float b2, float b3, CheckPart *__restrict__ parts)
{
    __shared__ CheckPart sh[kBlock / 32];
    CheckPart c = {~0ull, INFINITY, INFINITY, -INFINITY, -INFINITY};
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = xyz[i * dims], y = xyz[i * dims + 1];
        bool ok = isfinite(x) && isfinite(y);
        if (ok && use_box) ok = !(x < b0 || x > b2 || y < b1 || y > b3);
        if (!ok) {
            if (c.bad == ~0ull) c.bad = i; /* the thread's indices grow */
        } else {
            c.lo_x = fminf(c.lo_x, x);
            c.lo_y = fminf(c.lo_y, y);
            c.hi_x = fmaxf(c.hi_x, x);
            c.hi_y = fmaxf(c.hi_y, y);
        }
    }
    for (int o = 16; o > 0; o /= 2) {
        c.bad = min(c.bad, __shfl_down_sync(0xffffffffu, c.bad, o));
        c.lo_x = fminf(c.lo_x, __shfl_down_sync(0xffffffffu, c.lo_x, o));
        c.lo_y = fminf(c.lo_y, __shfl_down_sync(0xffffffffu, c.lo_y, o));
        c.hi_x = fmaxf(c.hi_x, __shfl_down_sync(0xffffffffu, c.hi_x, o));
        c.hi_y = fmaxf(c.hi_y, __shfl_down_sync(0xffffffffu, c.hi_y, o));
    }
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x / 32] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < kBlock / 32; w++) {
            c.bad = min(c.bad, sh[w].bad);
            c.lo_x = fminf(c.lo_x, sh[w].lo_x);
            c.lo_y = fminf(c.lo_y, sh[w].lo_y);
            c.hi_x = fmaxf(c.hi_x, sh[w].hi_x);
            c.hi_y = fmaxf(c.hi_y, sh[w].hi_y);
        }
        parts[blockIdx.x] = c;
    }
}

} /* namespace */

extern "C" grove_status grove__qt_check_points_cuda(grove_ctx *ctx, const float *d_xyz, size_t n,
                                                    int dims, const float *box, float root[4],
                                                    size_t *bad, float bad_xy[2])
{
    cudaStream_t s = (cudaStream_t)ctx->stream;
    grove_status st = GROVE_OK;
    Buffers buf = {ctx, ctx->stream, {0}, {0}, 0};
    CheckPart *d_parts = NULL, *h_parts = NULL,
              c = {~0ull, INFINITY, INFINITY, -INFINITY, -INFINITY};
    unsigned blocks = blocks_for(n) < (unsigned)kCheckBlocks ? blocks_for(n) : kCheckBlocks;

    *bad = SIZE_MAX;
    h_parts = (CheckPart *)malloc(blocks * sizeof *h_parts);
    if (!h_parts) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "quadtree: out of memory");
    GROVE_TRY_END(st, buf.alloc((void **)&d_parts, blocks * sizeof *d_parts, "the point check"));
    check_kernel<<<blocks, kBlock, 0, s>>>(d_xyz, dims, n, box != NULL, box ? box[0] : 0.0f,
                                           box ? box[1] : 0.0f, box ? box[2] : 0.0f,
                                           box ? box[3] : 0.0f, d_parts);
    QT_LAUNCHED_END("quadtree point check kernel");
    GROVE_TRY_END(st, grove__cuda_fetch(ctx, h_parts, d_parts, blocks * sizeof *h_parts, s,
                                        "checking the quadtree points"));
    for (unsigned b = 0; b < blocks; b++) {
        c.bad = h_parts[b].bad < c.bad ? h_parts[b].bad : c.bad;
        c.lo_x = fminf(c.lo_x, h_parts[b].lo_x);
        c.lo_y = fminf(c.lo_y, h_parts[b].lo_y);
        c.hi_x = fmaxf(c.hi_x, h_parts[b].hi_x);
        c.hi_y = fmaxf(c.hi_y, h_parts[b].hi_y);
    }
    if (c.bad != ~0ull) {
        *bad = (size_t)c.bad;
        GROVE_TRY_END(st, grove__cuda_d2h(ctx, bad_xy, d_xyz + c.bad * dims, 2 * sizeof(float), s));
        GROVE_TRY_END(st, grove__cuda_sync(ctx, s, "checking the quadtree points"));
    } else if (!box) {
        /* + 0.0f: as on the host, -0 becomes +0 whichever zero the reduction kept */
        root[0] = c.lo_x + 0.0f;
        root[1] = c.lo_y + 0.0f;
        root[2] = c.hi_x + 0.0f;
        root[3] = c.hi_y + 0.0f;
    }
_end:
    buf.free_all();
    free(h_parts);
    return st;
}
