/*
 * kdtree_build_dev_cuda.cu - the device-side helpers of the CUDA k-d tree (kdtree_cuda.h): the
 * finiteness check of points in device memory, and the download, upload and freeing of a
 * tree's device arrays. The build itself is kdtree_cuda.cu.
 */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core_cuda.h"
#include "kdtree_build_cuda.cuh"
#include "kdtree_cuda.h"

using grove_kd::kBlock;

extern "C" void grove__kd_free_device(grove_kdtree *t)
{
    void **p[4] = {&t->d_nodes, &t->d_bounds, &t->d_pts, &t->d_index};
    if (!t->dev_ctx) return;
    /* the context's device, whichever is current on this thread */
    if (grove__cuda_use(t->dev_ctx) == GROVE_OK)
        for (int i = 0; i < 4; i++)
            if (*p[i]) grove__cuda_free(t->dev_ctx, *p[i], t->d_bytes[i], t->dev_ctx->stream);
    for (int i = 0; i < 4; i++) {
        *p[i] = NULL;
        t->d_bytes[i] = 0;
    }
    t->dev_ctx = NULL;
}

namespace
{

/* The smallest index of a point with a non-finite coordinate (atomicMin into *bad). */
template <typename T>
__global__ void find_bad_kernel(const T *__restrict__ x, size_t count, int D,
                                unsigned long long *bad)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        if (!isfinite((double)x[i])) atomicMin(bad, (unsigned long long)(i / (size_t)D));
}

} // namespace

extern "C" grove_status grove__kd_find_bad_cuda(grove_ctx *ctx, const grove_coords *d, size_t *bad,
                                                double row[GROVE_KDTREE_MAX_DIMS])
{
    cudaStream_t s = (cudaStream_t)ctx->stream;
    const size_t count = d->n * (size_t)d->dims;
    const size_t es = grove__kd_coord_size(d->type);
    unsigned long long *dbad = NULL, hbad = ~0ull;
    unsigned char raw[GROVE_KDTREE_MAX_DIMS * sizeof(double)];
    grove_status st;
    *bad = SIZE_MAX;
    if (d->n == 0) return GROVE_OK;
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&dbad, sizeof *dbad, ctx->stream, "a check flag"));
    st = grove__cuda_h2d(ctx, dbad, &hbad, sizeof hbad, s);
    if (st == GROVE_OK) {
        const unsigned g = (unsigned)((count + kBlock - 1) / kBlock < 132 * 16
                                          ? (count + kBlock - 1) / kBlock
                                          : 132 * 16);
        if (d->type == GROVE_COORD_F64)
            find_bad_kernel<double>
                <<<g, kBlock, 0, s>>>((const double *)d->data, count, d->dims, dbad);
        else
            find_bad_kernel<float>
                <<<g, kBlock, 0, s>>>((const float *)d->data, count, d->dims, dbad);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) st = grove__cuda_status(ctx, (int)e, "k-d tree finiteness check");
    }
    if (st == GROVE_OK) st = grove__cuda_d2h(ctx, &hbad, dbad, sizeof hbad, s);
    if (st == GROVE_OK) st = grove__cuda_sync(ctx, s, "k-d tree finiteness check");
    if (st == GROVE_OK && hbad != ~0ull) {
        st = grove__cuda_d2h(ctx, raw, (const unsigned char *)d->data + (size_t)hbad * d->dims * es,
                             (size_t)d->dims * es, s);
        if (st == GROVE_OK) st = grove__cuda_sync(ctx, s, "k-d tree finiteness check");
        if (st == GROVE_OK) {
            for (int a = 0; a < d->dims; a++)
                row[a] = grove__kd_coord(raw, d->type, d->dims, 0, a);
            *bad = (size_t)hbad;
        }
    }
    grove__cuda_free(ctx, dbad, sizeof *dbad, ctx->stream);
    return st;
}

extern "C" grove_status grove__kd_download_cuda(grove_ctx *ctx, grove_kdtree *t)
{
    cudaStream_t s = (cudaStream_t)ctx->stream;
    const size_t cs = 2 * (size_t)t->dims, es = grove__kd_coord_size(t->type) * (size_t)t->dims;
    grove_kdtree_node *nodes = (grove_kdtree_node *)malloc(t->num_nodes * sizeof *nodes);
    double *bounds = (double *)malloc(t->num_nodes * cs * sizeof *bounds);
    void *pts = t->n ? malloc(t->n * es) : NULL;
    uint64_t *index = t->n ? (uint64_t *)malloc(t->n * sizeof *index) : NULL;
    grove_status st = GROVE_OK;
    if (!nodes || !bounds || (t->n && (!pts || !index))) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "grove_kdtree_download: out of memory for %zu nodes and %zu points",
                          t->num_nodes, t->n);
        goto _end;
    }
    GROVE_TRY_END(st, grove__cuda_use(ctx));
    GROVE_TRY_END(st, grove__cuda_d2h(ctx, nodes, t->d_nodes, t->num_nodes * sizeof *nodes, s));
    GROVE_TRY_END(st, grove__cuda_d2h(ctx, bounds, t->d_bounds, t->num_nodes * cs * 8, s));
    if (t->n) {
        GROVE_TRY_END(st, grove__cuda_d2h(ctx, pts, t->d_pts, t->n * es, s));
        GROVE_TRY_END(st, grove__cuda_d2h(ctx, index, t->d_index, t->n * sizeof *index, s));
    }
    GROVE_TRY_END(st, grove__cuda_sync(ctx, s, "downloading the k-d tree"));
    t->nodes = nodes;
    t->bounds = bounds;
    t->pts = pts;
    t->index = index;
    return GROVE_OK;
_end:
    free(nodes);
    free(bounds);
    free(pts);
    free(index);
    return st;
}

extern "C" grove_status grove__kd_upload_cuda(grove_ctx *ctx, grove_kdtree *t)
{
    cudaStream_t s = (cudaStream_t)ctx->stream;
    const size_t cs = 2 * (size_t)t->dims, es = grove__kd_coord_size(t->type) * (size_t)t->dims;
    const void *src[4] = {t->nodes, t->bounds, t->pts, t->index};
    const size_t bytes[4] = {t->num_nodes * sizeof(grove_kdtree_node), t->num_nodes * cs * 8,
                             t->n * es, t->n * sizeof(uint64_t)};
    void **dst[4] = {&t->d_nodes, &t->d_bounds, &t->d_pts, &t->d_index};
    grove_status st = grove__cuda_use(ctx);
    t->dev_ctx = ctx;
    for (int i = 0; i < 4 && st == GROVE_OK; i++) {
        if (bytes[i] == 0) continue;
        st = grove__cuda_alloc(ctx, dst[i], bytes[i], ctx->stream, "the k-d tree (upload)");
        if (st != GROVE_OK) break;
        t->d_bytes[i] = bytes[i];
        st = grove__cuda_h2d(ctx, *dst[i], src[i], bytes[i], s);
    }
    if (st == GROVE_OK) st = grove__cuda_sync(ctx, s, "uploading the k-d tree");
    if (st != GROVE_OK) grove__kd_free_device(t);
    memcpy(t->root_box, t->bounds, cs * sizeof(double));
    return st;
}
