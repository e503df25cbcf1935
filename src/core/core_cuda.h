/*
 * core_cuda.h - C declarations of the CUDA helpers in core_cuda.cu (internal).
 * Only called when the library is built with CUDA (GROVE_HAVE_CUDA).
 */
#ifndef GROVE_CORE_CUDA_H
#define GROVE_CORE_CUDA_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable devices; 0 on any driver error (no driver, no GPU). */
int grove__cuda_device_count(void);
grove_status grove__cuda_device_query(int index, grove_device_info *info);

/* Selects ctx->device and creates ctx->stream when the user gave none. */
grove_status grove__cuda_ctx_init(grove_ctx *ctx, void *user_stream);
void grove__cuda_ctx_fini(grove_ctx *ctx);

/* Makes ctx->device current for this thread (contexts may move between threads). */
grove_status grove__cuda_use(grove_ctx *ctx);

/* Stream-ordered allocation on `stream`; `what` names the buffer in the error message. Counts
 * against the context's device_mem_limit; grove__cuda_free must be given the same byte count. */
grove_status grove__cuda_alloc(grove_ctx *ctx, void **p, size_t bytes, void *stream,
                               const char *what);
void grove__cuda_free(grove_ctx *ctx, void *p, size_t bytes, void *stream);
/* The context's kept device buffer of `slot` (GROVE__KEPT_*), at least `bytes` long, into *p,
 * for a call on the context's stream. It is made (from the pool, counted against
 * device_mem_limit while the context lives) and cleared to zero when missing or too small; it
 * is freed with the context. *epoch is the call's number in the buffer (1, 2, ...); before a
 * call would reach max_epoch the buffer is cleared again (stream-ordered) and the count
 * restarts at 1. A clearing sets the slot's kept_clean to 0. A module uses the epoch to tell
 * its own call's words from those earlier calls left, so that it need not clear them each
 * call. */
grove_status grove__cuda_kept(grove_ctx *ctx, int slot, size_t bytes, uint32_t max_epoch,
                              const char *what, void **p, uint32_t *epoch);

/* Makes the context's pool hold at least `bytes` of free memory mapped as one piece before a
 * call whose scratch peaks near `bytes`, so that its buffers are carved from one block rather
 * than from pieces the pool mapped as it grew. Random-access passes over buffers spread over
 * many pieces ran up to 1.25x slower (octree build, 10^8 points, H200: 29.5 ms against 23.6 ms;
 * bench/RESULTS.md). Does nothing when an earlier call already mapped a block this large and
 * the pool holds at least `bytes` unused. Otherwise, after `stream` is synchronized, the pool
 * gives back what it holds unused, then one block of `bytes` is allocated and freed on
 * `stream`. Best effort: a failure (no memory for the block, the context's
 * device_mem_limit) leaves the pool as it was and is not an error. */
void grove__cuda_pool_prepare(grove_ctx *ctx, size_t bytes, void *stream);
/* Copies between host and device memory after the work queued on `stream`. Small copies, and
 * copies to or from page-locked or managed host memory, are queued on the stream. A big copy
 * to or from pageable memory (at least 16 MB) goes through the context's page-locked staging
 * buffers in 8 MB pieces, the host side of each piece copied by several threads while the next
 * piece crosses the bus (4x faster uploads and 2x faster downloads into fresh memory than the
 * driver's own staging on an H100 host), and has completed when the call returns. */
grove_status grove__cuda_h2d(grove_ctx *ctx, void *d, const void *h, size_t bytes, void *stream);
grove_status grove__cuda_d2h(grove_ctx *ctx, void *h, const void *d, size_t bytes, void *stream);
grove_status grove__cuda_sync(grove_ctx *ctx, void *stream, const char *what);

/* Copies count small device ranges (d[i], bytes[i]) to host memory h[i] after the work queued
 * on `stream`, and waits: one synchronization for all of them. Through the context's
 * page-locked scratch when they fit there (a copy into pageable memory costs a staging round
 * trip of its own), else one pageable copy each. `what` names the step in errors. */
grove_status grove__cuda_fetchv(grove_ctx *ctx, int count, void *const *h, const void *const *d,
                                const size_t *bytes, void *stream, const char *what);
/* grove__cuda_fetchv of one range. */
grove_status grove__cuda_fetch(grove_ctx *ctx, void *h, const void *d, size_t bytes, void *stream,
                               const char *what);

/* Maps a cudaError_t (passed as int) to a grove status with a message naming `what`. */
grove_status grove__cuda_status(grove_ctx *ctx, int cuda_err, const char *what);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
/* In .cu files: check a CUDA runtime call; on failure record the error and return. */
#define GROVE_CUDA_TRY(ctx, call, what)                                                            \
    do {                                                                                           \
        cudaError_t grove__e_ = (call);                                                            \
        if (grove__e_ != cudaSuccess) return grove__cuda_status((ctx), (int)grove__e_, (what));    \
    } while (0)
/* Check that the last kernel launch was accepted. */
#define GROVE_CUDA_LAUNCHED(ctx, what) GROVE_CUDA_TRY(ctx, cudaGetLastError(), what)
#endif

#endif /* GROVE_CORE_CUDA_H */
