/*
 * core_cuda.cu - device discovery, per-context device and stream, allocation and copies.
 * Every CUDA call is checked; failures become grove statuses with a message.
 */
#include <cuda_runtime.h>

#include <stdio.h>
#include <string.h>

#include "core_cuda.h"

extern "C" int grove__cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
        return 0;
    }
    return n;
}

extern "C" grove_status grove__cuda_device_query(int index, grove_device_info *info)
{
    cudaDeviceProp p;
    size_t free_b = 0, total_b = 0;
    int prev = 0;
    if (cudaGetDeviceProperties(&p, index) != cudaSuccess) {
        cudaGetLastError();
        return GROVE_ERR_CUDA;
    }
    memset(info, 0, sizeof *info);
    info->index = index;
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->sm_count = p.multiProcessorCount;
    info->total_mem = p.totalGlobalMem;
    info->l2_bytes = p.l2CacheSize;
    info->mem_bus_bits = p.memoryBusWidth;
    if (cudaGetDevice(&prev) == cudaSuccess && cudaSetDevice(index) == cudaSuccess &&
        cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
        info->free_mem = free_b;
    cudaGetLastError();
    cudaSetDevice(prev);
    return GROVE_OK;
}

extern "C" grove_status grove__cuda_status(grove_ctx *ctx, int cuda_err, const char *what)
{
    cudaError_t e = (cudaError_t)cuda_err;
    grove_status s = GROVE_ERR_CUDA;
    if (e == cudaErrorMemoryAllocation) s = GROVE_ERR_DEVICE_OUT_OF_MEMORY;
    else if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
        s = GROVE_ERR_NO_DEVICE;
    /* Clear a non-sticky error so the next call on this thread is not blamed for it. */
    cudaGetLastError();
    return grove__error(ctx, s, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

extern "C" grove_status grove__cuda_use(grove_ctx *ctx)
{
    GROVE_CUDA_TRY(ctx, cudaSetDevice(ctx->device), "cudaSetDevice");
    return GROVE_OK;
}

/* The context's page-locked scratch: room for the small results the builds read back between
 * steps (counts, flags, per-block partial results). */
static const size_t kPinnedBytes = 64 * 1024;

extern "C" grove_status grove__cuda_ctx_init(grove_ctx *ctx, void *user_stream)
{
    char what[64];
    snprintf(what, sizeof what, "selecting CUDA device %d", ctx->device);
    GROVE_CUDA_TRY(ctx, cudaSetDevice(ctx->device), what);
    /* Touch the device now so that a broken driver is found here, not in the first call. */
    GROVE_CUDA_TRY(ctx, cudaFree(0), what);
    if (user_stream) {
        ctx->stream = user_stream;
        ctx->own_stream = 0;
    } else {
        cudaStream_t s;
        GROVE_CUDA_TRY(ctx, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                       "creating the context's CUDA stream");
        ctx->stream = (void *)s;
        ctx->own_stream = 1;
    }
    {
        /* The context's own stream-ordered pool, which keeps what grove frees for the next call
         * instead of returning it to the driver at every synchronization (the default pool's
         * release threshold is 0): re-mapping gigabytes of memory per call costs more than the
         * work on large inputs. It is given back when the context is destroyed. */
        cudaMemPoolProps props;
        cudaMemPool_t pool;
        uint64_t keep = UINT64_MAX;
        memset(&props, 0, sizeof props);
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = ctx->device;
        cudaError_t e = cudaMemPoolCreate(&pool, &props);
        if (e == cudaSuccess) {
            ctx->mempool = (void *)pool;
            e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
        }
        if (e != cudaSuccess) {
            grove__cuda_ctx_fini(ctx);
            return grove__cuda_status(ctx, (int)e, "creating the context's memory pool");
        }
    }
    {
        unsigned fl = 0;
        if (cudaGetDeviceFlags(&fl) == cudaSuccess) {
            fl &= cudaDeviceScheduleMask;
            ctx->spin_wait = fl != cudaDeviceScheduleBlockingSync && fl != cudaDeviceScheduleYield;
        } else {
            cudaGetLastError();
        }
    }
    /* Optional: without it grove__cuda_fetchv copies into pageable memory. */
    if (cudaMallocHost(&ctx->pinned, kPinnedBytes) == cudaSuccess) {
        void *dp = NULL;
        ctx->pinned_bytes = kPinnedBytes;
        /* asked once: the kernels that write their state words there take this address */
        if (cudaHostGetDevicePointer(&dp, ctx->pinned, 0) == cudaSuccess)
            ctx->pinned_dev = dp;
        else
            cudaGetLastError();
    } else {
        ctx->pinned = NULL;
        cudaGetLastError();
    }
    return GROVE_OK;
}

extern "C" void grove__cuda_ctx_fini(grove_ctx *ctx)
{
    for (int i = 0; i < GROVE__KEPT_SLOTS; i++) {
        if (!ctx->kept[i]) continue;
        cudaSetDevice(ctx->device);
        grove__cuda_free(ctx, ctx->kept[i], ctx->kept_bytes[i], ctx->stream);
        cudaGetLastError();
        ctx->kept[i] = NULL;
        ctx->kept_bytes[i] = 0;
    }
    if (ctx->own_stream && ctx->stream) {
        cudaSetDevice(ctx->device);
        cudaStreamSynchronize((cudaStream_t)ctx->stream);
        cudaStreamDestroy((cudaStream_t)ctx->stream);
        cudaGetLastError();
    }
    if (ctx->mempool) {
        /* Blocks freed on a user's stream may still be pending there. */
        cudaSetDevice(ctx->device);
        if (ctx->stream && !ctx->own_stream) cudaStreamSynchronize((cudaStream_t)ctx->stream);
        cudaMemPoolDestroy((cudaMemPool_t)ctx->mempool);
        cudaGetLastError();
        ctx->mempool = NULL;
    }
    if (ctx->pinned) {
        cudaFreeHost(ctx->pinned);
        cudaGetLastError();
        ctx->pinned = NULL;
        ctx->pinned_dev = NULL;
        ctx->pinned_bytes = 0;
    }
    if (ctx->stage) {
        cudaEventDestroy((cudaEvent_t)ctx->stage_ev[0]);
        cudaEventDestroy((cudaEvent_t)ctx->stage_ev[1]);
        cudaFreeHost(ctx->stage);
        cudaGetLastError();
        ctx->stage = NULL;
        ctx->stage_ev[0] = ctx->stage_ev[1] = NULL;
    }
    ctx->stream = NULL;
    ctx->own_stream = 0;
}

extern "C" grove_status grove__cuda_alloc(grove_ctx *ctx, void **p, size_t bytes, void *stream,
                                          const char *what)
{
    cudaError_t e;
    *p = NULL;
    if (bytes == 0) return GROVE_OK;
    if (ctx->dev_fail_at >= 0 && ctx->dev_allocs++ == ctx->dev_fail_at)
        return grove__error(ctx, GROVE_ERR_DEVICE_OUT_OF_MEMORY,
                            "allocating %zu bytes of device memory for %s: refused by the test "
                            "hook (allocation %ld)",
                            bytes, what, ctx->dev_fail_at);
    if (ctx->dev_limit && bytes > ctx->dev_limit - ctx->dev_in_use)
        return grove__error(ctx, GROVE_ERR_DEVICE_OUT_OF_MEMORY,
                            "allocating %zu bytes of device memory for %s: over the context's "
                            "device_mem_limit of %zu bytes (%zu in use)",
                            bytes, what, ctx->dev_limit, ctx->dev_in_use);
    e = cudaMallocFromPoolAsync(p, bytes, (cudaMemPool_t)ctx->mempool, (cudaStream_t)stream);
    if (e != cudaSuccess) {
        char msg[256];
        *p = NULL;
        snprintf(msg, sizeof msg, "allocating %zu bytes of device memory for %s", bytes, what);
        return grove__cuda_status(ctx, (int)e, msg);
    }
    ctx->dev_in_use += bytes;
    if (ctx->dev_in_use > ctx->dev_peak) ctx->dev_peak = ctx->dev_in_use;
    return GROVE_OK;
}

extern "C" void grove__cuda_pool_prepare(grove_ctx *ctx, size_t bytes, void *stream)
{
    cudaMemPool_t pool = (cudaMemPool_t)ctx->mempool;
    cudaStream_t s = (cudaStream_t)stream;
    size_t used = 0, reserved = 0, free_b = 0, total_b = 0;
    void *p = NULL;
    if (!pool) return;
    if (ctx->dev_limit && bytes > ctx->dev_limit - ctx->dev_in_use) return;
    if (cudaStreamSynchronize(s) != cudaSuccess ||
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) != cudaSuccess ||
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) !=
            cudaSuccess) {
        cudaGetLastError();
        return;
    }
    /* a block this large was mapped before and the pool still holds that much unused (trees
     * the caller keeps take their part of it) */
    if (bytes <= ctx->pool_block && reserved - used >= bytes) return;
    /* what the pool holds unused goes back first, so the block is not mapped beside it; memory
     * in use (trees the caller keeps, buffers of this call already taken) stays */
    if (cudaMemPoolTrimTo(pool, used) != cudaSuccess ||
        cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    if (bytes > free_b) return; /* the call's own allocations report a real shortage */
    if (cudaMallocFromPoolAsync(&p, bytes, pool, s) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    if (cudaFreeAsync(p, s) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    if (bytes > ctx->pool_block) ctx->pool_block = bytes;
}

extern "C" void grove__cuda_free(grove_ctx *ctx, void *p, size_t bytes, void *stream)
{
    if (!p) return;
    cudaFreeAsync(p, (cudaStream_t)stream);
    ctx->dev_in_use -= bytes;
}

extern "C" grove_status grove__cuda_kept(grove_ctx *ctx, int slot, size_t bytes,
                                         uint32_t max_epoch, const char *what, void **p,
                                         uint32_t *epoch)
{
    cudaStream_t s = (cudaStream_t)ctx->stream;
    *p = NULL;
    if (max_epoch < 2 || max_epoch == UINT32_MAX)
        return grove__error(ctx, GROVE_ERR_INTERNAL, "%s: epochs up to %u", what,
                            (unsigned)max_epoch);
    if (ctx->kept[slot] && ctx->kept_bytes[slot] < bytes) {
        grove__cuda_free(ctx, ctx->kept[slot], ctx->kept_bytes[slot], s);
        ctx->kept[slot] = NULL;
        ctx->kept_bytes[slot] = 0;
    }
    if (!ctx->kept[slot]) {
        void *b = NULL;
        GROVE_TRY(grove__cuda_alloc(ctx, &b, bytes, s, what));
        ctx->kept[slot] = b;
        ctx->kept_bytes[slot] = bytes;
        /* cleared below; marked so that a failed clearing is tried again by the next call */
        ctx->kept_epoch[slot] = max_epoch - 1;
    }
    if (ctx->kept_epoch[slot] >= max_epoch - 1) {
        ctx->kept_clean[slot] = 0;
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(ctx->kept[slot], 0, ctx->kept_bytes[slot], s), what);
        ctx->kept_epoch[slot] = 0;
    }
    *epoch = ++ctx->kept_epoch[slot];
    *p = ctx->kept[slot];
    return GROVE_OK;
}

/* Staged copies (see core_cuda.h): two halves of kStagePiece bytes, so that the host copies one
 * piece while the bus carries the other. */
static const size_t kStagePiece = (size_t)8 << 20;
static const size_t kStagedMin = (size_t)16 << 20;

/* Whether a copy of `bytes` to or from host memory h should be staged, with the staging
 * buffers ready. Without them (no page-locked memory to spare) copies go straight through. */
static bool use_stage(grove_ctx *ctx, const void *h, size_t bytes)
{
    cudaPointerAttributes a;
    if (bytes < kStagedMin) return false;
    if (cudaPointerGetAttributes(&a, h) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    if (a.type != cudaMemoryTypeUnregistered) return false;
    if (!ctx->stage) {
        cudaEvent_t ev[2] = {NULL, NULL};
        void *p = NULL;
        if (cudaMallocHost(&p, 2 * kStagePiece) != cudaSuccess ||
            cudaEventCreateWithFlags(&ev[0], cudaEventDisableTiming) != cudaSuccess ||
            cudaEventCreateWithFlags(&ev[1], cudaEventDisableTiming) != cudaSuccess) {
            if (ev[0]) cudaEventDestroy(ev[0]);
            if (p) cudaFreeHost(p);
            cudaGetLastError();
            return false;
        }
        ctx->stage = p;
        ctx->stage_ev[0] = (void *)ev[0];
        ctx->stage_ev[1] = (void *)ev[1];
    }
    return true;
}

extern "C" grove_status grove__cuda_h2d(grove_ctx *ctx, void *d, const void *h, size_t bytes,
                                        void *stream)
{
    const char *what = "copying input to the GPU";
    cudaStream_t s = (cudaStream_t)stream;
    const int nt = grove__threads(ctx);
    size_t off = 0, i = 0;
    if (bytes == 0) return GROVE_OK;
    if (!use_stage(ctx, h, bytes)) {
        GROVE_CUDA_TRY(ctx, cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s), what);
        return GROVE_OK;
    }
    for (; off < bytes; off += kStagePiece, i++) {
        const size_t len = bytes - off < kStagePiece ? bytes - off : kStagePiece;
        char *half = (char *)ctx->stage + (i & 1) * kStagePiece;
        cudaEvent_t ev = (cudaEvent_t)ctx->stage_ev[i & 1];
        /* the upload of piece i - 2 read this half */
        if (i >= 2) GROVE_CUDA_TRY(ctx, cudaEventSynchronize(ev), what);
        grove__copy_parallel(half, (const char *)h + off, len, nt);
        GROVE_CUDA_TRY(ctx, cudaMemcpyAsync((char *)d + off, half, len, cudaMemcpyHostToDevice, s),
                       what);
        GROVE_CUDA_TRY(ctx, cudaEventRecord(ev, s), what);
    }
    /* the halves are free for the next call */
    GROVE_CUDA_TRY(ctx, cudaEventSynchronize((cudaEvent_t)ctx->stage_ev[(i - 1) & 1]), what);
    return GROVE_OK;
}

extern "C" grove_status grove__cuda_d2h(grove_ctx *ctx, void *h, const void *d, size_t bytes,
                                        void *stream)
{
    const char *what = "copying results from the GPU";
    cudaStream_t s = (cudaStream_t)stream;
    const int nt = grove__threads(ctx);
    size_t off = 0, i = 0, prev_off = 0, prev_len = 0;
    if (bytes == 0) return GROVE_OK;
    if (!use_stage(ctx, h, bytes)) {
        GROVE_CUDA_TRY(ctx, cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, s), what);
        return GROVE_OK;
    }
    /* piece i crosses the bus while the host copies piece i - 1 out of the other half */
    for (;; i++) {
        const size_t len = off < bytes ? (bytes - off < kStagePiece ? bytes - off : kStagePiece) : 0;
        if (len > 0) {
            char *half = (char *)ctx->stage + (i & 1) * kStagePiece;
            GROVE_CUDA_TRY(ctx,
                           cudaMemcpyAsync(half, (const char *)d + off, len,
                                           cudaMemcpyDeviceToHost, s),
                           what);
            GROVE_CUDA_TRY(ctx, cudaEventRecord((cudaEvent_t)ctx->stage_ev[i & 1], s), what);
        }
        if (i > 0) {
            const size_t j = (i - 1) & 1;
            GROVE_CUDA_TRY(ctx, cudaEventSynchronize((cudaEvent_t)ctx->stage_ev[j]), what);
            grove__copy_parallel((char *)h + prev_off, (const char *)ctx->stage + j * kStagePiece,
                                 prev_len, nt);
        }
        if (len == 0) break;
        prev_off = off;
        prev_len = len;
        off += len;
    }
    return GROVE_OK;
}

extern "C" grove_status grove__cuda_sync(grove_ctx *ctx, void *stream, const char *what)
{
    GROVE_CUDA_TRY(ctx, cudaStreamSynchronize((cudaStream_t)stream), what);
    return GROVE_OK;
}

extern "C" grove_status grove__cuda_fetchv(grove_ctx *ctx, int count, void *const *h,
                                           const void *const *d, const size_t *bytes,
                                           void *stream, const char *what)
{
    cudaStream_t s = (cudaStream_t)stream;
    size_t total = 0, at = 0;
    for (int i = 0; i < count; i++) total += (bytes[i] + 15) & ~(size_t)15;
    if (!ctx->pinned || total > ctx->pinned_bytes) {
        for (int i = 0; i < count; i++)
            if (bytes[i] > 0)
                GROVE_CUDA_TRY(ctx, cudaMemcpyAsync(h[i], d[i], bytes[i], cudaMemcpyDeviceToHost, s),
                               what);
        GROVE_CUDA_TRY(ctx, cudaStreamSynchronize(s), what);
        return GROVE_OK;
    }
    for (int i = 0; i < count; i++) {
        if (bytes[i] > 0)
            GROVE_CUDA_TRY(ctx,
                           cudaMemcpyAsync((char *)ctx->pinned + at, d[i], bytes[i],
                                           cudaMemcpyDeviceToHost, s),
                           what);
        at += (bytes[i] + 15) & ~(size_t)15;
    }
    GROVE_CUDA_TRY(ctx, cudaStreamSynchronize(s), what);
    at = 0;
    for (int i = 0; i < count; i++) {
        if (bytes[i] > 0) memcpy(h[i], (const char *)ctx->pinned + at, bytes[i]);
        at += (bytes[i] + 15) & ~(size_t)15;
    }
    return GROVE_OK;
}

extern "C" grove_status grove__cuda_fetch(grove_ctx *ctx, void *h, const void *d, size_t bytes,
                                          void *stream, const char *what)
{
    return grove__cuda_fetchv(ctx, 1, &h, &d, &bytes, stream, what);
}
