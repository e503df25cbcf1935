/*
 * bezier_cuda.h - the bezier module's CUDA code, called from bezier.c (internal).
 *
 * The caller has checked the context (a CUDA one), the options (grove__bz_check_opts) and, for
 * the host-pointer call, the curves; these make the context's device current themselves.
 */
#ifndef GROVE_BEZIER_CUDA_H
#define GROVE_BEZIER_CUDA_H

#include "bezier_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* grove_bezier_tessellate() on the GPU: upload, count, scan, write, download. */
grove_status grove__bz_tessellate_cuda(grove_ctx *ctx, const grove_curves *in,
                                       const grove_bezier_opts *o, grove_polylines *out,
                                       grove_bezier_stats *stats);

/* grove_bezier_count_device() / grove_bezier_tessellate_device() (same arguments). */
grove_status grove__bz_count_device_cuda(grove_ctx *ctx, const float *d_cp, const uint8_t *d_degree,
                                         size_t n, const grove_bezier_opts *o, uint64_t *d_offsets,
                                         uint64_t *total);
grove_status grove__bz_tessellate_device_cuda(grove_ctx *ctx, const float *d_cp,
                                              const uint8_t *d_degree, size_t n,
                                              const grove_bezier_opts *o, uint64_t *d_offsets,
                                              float *d_xy, uint64_t capacity, uint64_t *total,
                                              grove_bezier_stats *stats);

/* Test hooks for the cdp variant (0: the default for each). chunk_max is the most child launches
 * one parent grid may queue, so also the pending-launch limit asked for; device_cap makes every
 * request to raise the pending-launch limit above it fail as if the device had refused it, to
 * reach the GROVE_ERR_LIMIT path and AUTO's fallback; group is the curves per group child; big
 * the vertex count from which a curve gets a child grid of its own (only when max_points >= big).
 * grove__bz_cdp_plan() gives the group and big in force. Not thread-safe; for tests. */
void grove__bz_cdp_tune(size_t chunk_max, size_t device_cap, size_t group, unsigned big);
void grove__bz_cdp_plan(size_t *group, unsigned *big);

/* Test and bench hook for the tile writer's chunk width (vertices a thread): 0 the defaults
 * (flat 64, the cdp children 16); 8 makes both write in chunks of 8; 16 and 32 make flat write
 * in chunks of 16 (its width before 2026-11-28) and 32 (from then until 2026-11-29); any other
 * value is taken as 0. Not thread-safe. */
void grove__bz_flat_tune(int per);

/* Test and bench hooks selecting a kernel variant (0: the default). flat: 1 a block a tile (the
 * scheduling before session 8), 2 persistent blocks (the default), 3 persistent blocks taking
 * their next tile early with an L2 prefetch (what counting alone always does), 4 and 5 as 2 and 3
 * with one block (every tile in turn), 6 as 2 with the state words copied back instead of written
 * to the context's page-locked scratch by the kernel, 7 as 2 with the next tile taken (and its
 * curves asked of L2) at the start of the current one's last chunk instead of after it is
 * written with the curves of later tiles asked of L2 ahead (the default until 2026-11-29), 8 as
 * 2 with each tile's look-back right after its count, before the writer's preparation and
 * first chunk head (the default until the twenty-first session, 2026-11-29). cdp: the group
 * child, 1 a tile a block (the child before session 8), 2 four tiles a block (the default).
 * grove__bz_cdp_probe: per-block records of the cdp children into device memory rec (16 header
 * words, then 4 a tile of 512 curves: %smid and %globaltimer at the tile's start and end),
 * nullptr for none. Not thread-safe. */
void grove__bz_flat_mode(int mode);
/* test hook: 1 makes a single pass (counting or writing) wait for its stream instead of polling
 * the page-locked tag its last block leaves (the path of devices set to block or yield while
 * waiting) */
void grove__bz_flat_wait(int sync);
/* test hook: how many single passes of this process polled the tag (the default wait) */
unsigned long long grove__bz_flat_polls(void);
/* bench hook: CUDA events (cudaEvent_t) recorded on the stream just before and after a writing
 * pass's persistent kernel, so that the kernel's time can be read beside the call's; NULL, NULL
 * for none. Not thread-safe. */
void grove__bz_flat_events(void *e0, void *e1);
/* test hooks (bezier_cuda.cu) */
uint32_t grove__bz_kept_epoch_max(void);
void grove__bz_kept_epoch_set(grove_ctx *ctx, uint32_t e);
void grove__bz_cdp_mode(int mode);
void grove__bz_cdp_probe(unsigned long long *rec);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_BEZIER_CUDA_H */
