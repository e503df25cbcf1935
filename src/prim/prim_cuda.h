/*
 * prim_cuda.h - C declarations of the CUDA launchers behind the prim module (internal).
 *
 * prim.c validates every argument (NULL pointers, n <= GROVE_PRIM_MAX_N, elem_size 4 or 8,
 * known types and operators) and makes the context's device current before calling these, so
 * the launchers only do the work. Each follows the two-phase pattern of the public _device
 * calls: with d_temp == NULL they only write *temp_bytes (always at least 1, so that callers
 * can allocate unconditionally). They queue work on `stream` and return without waiting; every
 * CUDA call and launch is checked and failures are reported through grove__cuda_status().
 */
#ifndef GROVE_PRIM_CUDA_H
#define GROVE_PRIM_CUDA_H

#include "core.h"
#include "grove/prim.h"

#ifdef __cplusplus
extern "C" {
#endif

grove_status grove__cuda_scan(grove_ctx *ctx, void *d_temp, size_t *temp_bytes, grove_dtype t,
                              grove_op op, grove_scan_kind kind, const void *d_in, void *d_out,
                              size_t n, void *stream);

grove_status grove__cuda_segscan(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                 grove_dtype t, grove_op op, grove_scan_kind kind,
                                 grove_scan_dir dir, const void *d_in, const uint8_t *d_heads,
                                 void *d_out, size_t n, void *stream);

grove_status grove__cuda_split(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                               size_t elem_size, const void *d_in, const uint8_t *d_flags,
                               void *d_out, uint32_t *d_dest, uint64_t *d_num_flagged, size_t n,
                               void *stream);

grove_status grove__cuda_segsplit(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                  size_t elem_size, const void *d_in, const uint8_t *d_flags,
                                  const uint8_t *d_heads, void *d_out, uint32_t *d_dest,
                                  size_t n, void *stream);

grove_status grove__cuda_compact(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                 size_t elem_size, const void *d_in, const uint8_t *d_flags,
                                 void *d_out, uint64_t *d_num_selected, size_t n, void *stream);

grove_status grove__cuda_reduce(grove_ctx *ctx, void *d_temp, size_t *temp_bytes, grove_dtype t,
                                grove_op op, const void *d_in, void *d_out, size_t n,
                                void *stream);

grove_status grove__cuda_bbox(grove_ctx *ctx, void *d_temp, size_t *temp_bytes, int dims,
                              const float *d_points, float *d_box, size_t n, void *stream);

/* d_values_in/out may be NULL (keys only); value_size is then ignored. */
grove_status grove__cuda_sort(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                              grove_dtype key_type, const void *d_keys_in, void *d_keys_out,
                              size_t value_size, const void *d_values_in, void *d_values_out,
                              size_t n, int begin_bit, int end_bit, void *stream);

/* Morton kernels. The encoders write, to *d_bad (a device uint64_t the caller set to
 * UINT64_MAX; may be NULL), the smallest index whose coordinate has bits above the 16 / 21
 * allowed, so the host entry points can report it; codes are computed from masked values. */
grove_status grove__cuda_morton2_encode(grove_ctx *ctx, const uint32_t *d_x, const uint32_t *d_y,
                                        uint32_t *d_codes, uint64_t *d_bad, size_t n,
                                        void *stream);
grove_status grove__cuda_morton2_decode(grove_ctx *ctx, const uint32_t *d_codes, uint32_t *d_x,
                                        uint32_t *d_y, size_t n, void *stream);
grove_status grove__cuda_morton3_encode(grove_ctx *ctx, const uint32_t *d_x, const uint32_t *d_y,
                                        const uint32_t *d_z, uint64_t *d_codes, uint64_t *d_bad,
                                        size_t n, void *stream);
grove_status grove__cuda_morton3_decode(grove_ctx *ctx, const uint64_t *d_codes, uint32_t *d_x,
                                        uint32_t *d_y, uint32_t *d_z, size_t n, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_PRIM_CUDA_H */
