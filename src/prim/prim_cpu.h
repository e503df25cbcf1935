/*
 * prim_cpu.h - the CPU backend of the prim module (C11 + OpenMP), internal.
 *
 * prim.c validates arguments before calling these; they cannot fail except for host
 * allocation (GROVE_ERR_OUT_OF_MEMORY, reported through grove__error). Results are the
 * reference for the CUDA backend: integer and MAX/MIN results must be identical.
 */
#ifndef GROVE_PRIM_CPU_H
#define GROVE_PRIM_CPU_H

#include "core.h"
#include "grove/prim.h"

grove_status grove__cpu_scan(grove_ctx *ctx, grove_dtype t, grove_op op, grove_scan_kind kind,
                             const void *in, void *out, size_t n);
grove_status grove__cpu_segscan(grove_ctx *ctx, grove_dtype t, grove_op op,
                                grove_scan_kind kind, grove_scan_dir dir, const void *in,
                                const uint8_t *heads, void *out, size_t n);
grove_status grove__cpu_split(grove_ctx *ctx, size_t elem_size, const void *in,
                              const uint8_t *flags, void *out, uint32_t *dest,
                              size_t *num_flagged, size_t n);
grove_status grove__cpu_segsplit(grove_ctx *ctx, size_t elem_size, const void *in,
                                 const uint8_t *flags, const uint8_t *heads, void *out,
                                 uint32_t *dest, size_t n);
grove_status grove__cpu_compact(grove_ctx *ctx, size_t elem_size, const void *in,
                                const uint8_t *flags, void *out, size_t *num_selected, size_t n);
grove_status grove__cpu_reduce(grove_ctx *ctx, grove_dtype t, grove_op op, const void *in,
                               void *out, size_t n);
grove_status grove__cpu_bbox(grove_ctx *ctx, int dims, const float *points, size_t n, float *lo,
                             float *hi);
/* values may be NULL (keys only). */
grove_status grove__cpu_sort(grove_ctx *ctx, grove_dtype key_type, void *keys, size_t value_size,
                             void *values, size_t n, int begin_bit, int end_bit);
/* Encoders return GROVE_ERR_INVALID_ARG naming the first out-of-range index. */
grove_status grove__cpu_morton2_encode(grove_ctx *ctx, const uint32_t *x, const uint32_t *y,
                                       uint32_t *codes, size_t n);
grove_status grove__cpu_morton2_decode(grove_ctx *ctx, const uint32_t *codes, uint32_t *x,
                                       uint32_t *y, size_t n);
grove_status grove__cpu_morton3_encode(grove_ctx *ctx, const uint32_t *x, const uint32_t *y,
                                       const uint32_t *z, uint64_t *codes, size_t n);
grove_status grove__cpu_morton3_decode(grove_ctx *ctx, const uint64_t *codes, uint32_t *x,
                                       uint32_t *y, uint32_t *z, size_t n);

#endif /* GROVE_PRIM_CPU_H */
