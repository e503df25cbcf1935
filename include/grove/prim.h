/*
 * prim.h - data-parallel primitives: scan, segmented scan, split, segmented split, stream
 * compaction, reduction, bounding box, radix sort and Morton codes.
 *
 * Two kinds of entry point, with the same meaning:
 *   grove_X(ctx, ...)         host pointers; runs on the context's backend (CPU or CUDA) and
 *                             returns when the result is in the caller's memory.
 *   grove_X_device(ctx, ...)  device pointers (d_ prefix), CUDA contexts only; asynchronous on
 *                             `stream` (a cudaStream_t as void *; NULL means the context's
 *                             stream). Scratch memory follows CUB's two-phase pattern: call with
 *                             d_temp == NULL to get *temp_bytes, allocate that many bytes, call
 *                             again. grove never keeps d_temp after the call is queued; it must
 *                             stay allocated until the stream has run the work. In the size
 *                             query the data pointers are not read and may be NULL.
 *
 * All inputs are borrowed and never kept. Outputs are caller-allocated. n may be 0 and is at most
 * GROVE_PRIM_MAX_N (GROVE_ERR_LIMIT above). Integer results and MAX/MIN results are identical
 * on both backends; f32 SUM results agree within rounding (the order of additions differs).
 *
 * Flags and head flags are bytes: 0 is false, anything else true. A head flag marks the first
 * element of a segment; element 0 always starts a segment whatever heads[0] holds.
 */
#ifndef GROVE_PRIM_H
#define GROVE_PRIM_H

#include "grove/grove.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GROVE_PRIM_MAX_N ((size_t)UINT32_MAX)

typedef enum grove_dtype {
    GROVE_U32 = 0, /* uint32_t */
    GROVE_U64 = 1, /* uint64_t */
    GROVE_F32 = 2  /* float */
} grove_dtype;

/*! grove_dtype_size() : @return the element size in bytes (4 or 8), 0 for an unknown type. */
size_t grove_dtype_size(grove_dtype t);

/* Associative operators. Identities: SUM 0; MAX 0 (unsigned) or -INFINITY (f32); MIN the
 * largest value (unsigned) or +INFINITY (f32). f32 MAX/MIN ignore NaN like fmaxf/fminf; a
 * result is NaN exactly where every value it covers is NaN, and -0.0 orders below +0.0, so MAX/MIN
 * results are bit-identical on every backend and thread count. Unsigned SUM wraps modulo
 * 2^32/2^64. */
typedef enum grove_op { GROVE_OP_SUM = 0, GROVE_OP_MAX = 1, GROVE_OP_MIN = 2 } grove_op;

typedef enum grove_scan_kind {
    GROVE_SCAN_EXCLUSIVE = 0, /* out[i] = in[0] op ... op in[i-1]; out[0] = identity */
    GROVE_SCAN_INCLUSIVE = 1  /* out[i] = in[0] op ... op in[i] */
} grove_scan_kind;

typedef enum grove_scan_dir {
    GROVE_SCAN_FORWARD = 0, /* prefix, from each segment's first element onwards */
    GROVE_SCAN_BACKWARD = 1 /* suffix, from each segment's last element backwards */
} grove_scan_dir;

/* ---- scan ---- */

/*! grove_scan() :
 *  Prefix scan of n elements of type t with operator op. in == out is allowed (in place);
 *  any other overlap is not.
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG, GROVE_ERR_LIMIT, or a backend failure. */
grove_status grove_scan(grove_ctx *ctx, grove_dtype t, grove_op op, grove_scan_kind kind,
                        const void *in, void *out, size_t n);

grove_status grove_scan_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes, grove_dtype t,
                               grove_op op, grove_scan_kind kind, const void *d_in, void *d_out,
                               size_t n, void *stream);

/* ---- segmented scan ---- */

/*! grove_segscan() :
 *  Scan restarted at every head flag. FORWARD: out[i] covers in[s..i-1] (exclusive) or
 *  in[s..i] (inclusive), s the first index of i's segment, so out[s] is the identity
 *  (exclusive). BACKWARD (the suffix scan): out[i] covers in[i+1..e] (exclusive) or in[i..e]
 *  (inclusive), e the last index of i's segment. in == out is allowed.
 *  @return as grove_scan(). */
grove_status grove_segscan(grove_ctx *ctx, grove_dtype t, grove_op op, grove_scan_kind kind,
                           grove_scan_dir dir, const void *in, const uint8_t *heads, void *out,
                           size_t n);

grove_status grove_segscan_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                  grove_dtype t, grove_op op, grove_scan_kind kind,
                                  grove_scan_dir dir, const void *d_in, const uint8_t *d_heads,
                                  void *d_out, size_t n, void *stream);

/* ---- split ---- */

/*! grove_split() :
 *  Stable split: out holds the elements whose flag is set, in their original order, followed
 *  by the others, in their original order. elem_size is 4 or 8 (any 4- or 8-byte payload).
 *  dest (optional, may be NULL) receives each element's new position: out[dest[i]] == in[i],
 *  so other arrays can be permuted the same way. num_flagged (optional) receives the number of
 *  flagged elements. out must not overlap in.
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG (elem_size, NULL, overlap), GROVE_ERR_LIMIT, ... */
grove_status grove_split(grove_ctx *ctx, size_t elem_size, const void *in, const uint8_t *flags,
                         void *out, uint32_t *dest, size_t *num_flagged, size_t n);

/* d_num_flagged (optional) is a device pointer to one uint64_t. */
grove_status grove_split_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                size_t elem_size, const void *d_in, const uint8_t *d_flags,
                                void *d_out, uint32_t *d_dest, uint64_t *d_num_flagged, size_t n,
                                void *stream);

/*! grove_segsplit() :
 *  Segmented split: every segment (see heads) is split stably in place, flagged elements first,
 *  as grove_split() does to the whole array; elements never leave their segment. dest is
 *  optional as in grove_split(). out must not overlap in. */
grove_status grove_segsplit(grove_ctx *ctx, size_t elem_size, const void *in,
                            const uint8_t *flags, const uint8_t *heads, void *out, uint32_t *dest,
                            size_t n);

grove_status grove_segsplit_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                   size_t elem_size, const void *d_in, const uint8_t *d_flags,
                                   const uint8_t *d_heads, void *d_out, uint32_t *d_dest,
                                   size_t n, void *stream);

/* ---- stream compaction ---- */

/*! grove_compact() :
 *  Copies the elements whose flag is set to out, in order, and writes their number to
 *  *num_selected (required). out needs room for n elements (only *num_selected are written).
 *  elem_size is 4 or 8. out must not overlap in. */
grove_status grove_compact(grove_ctx *ctx, size_t elem_size, const void *in,
                           const uint8_t *flags, void *out, size_t *num_selected, size_t n);

/* d_num_selected is a device pointer to one uint64_t. */
grove_status grove_compact_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                  size_t elem_size, const void *d_in, const uint8_t *d_flags,
                                  void *d_out, uint64_t *d_num_selected, size_t n, void *stream);

/* ---- reduction and bounding box ---- */

/*! grove_reduce() :
 *  Reduces n elements of type t with op; writes one element of type t to *out (the identity
 *  when n == 0). */
grove_status grove_reduce(grove_ctx *ctx, grove_dtype t, grove_op op, const void *in, void *out,
                          size_t n);

/* d_out is a device pointer to one element of type t. */
grove_status grove_reduce_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                 grove_dtype t, grove_op op, const void *d_in, void *d_out,
                                 size_t n, void *stream);

/*! grove_bbox() :
 *  Axis-aligned bounding box of n points of `dims` (2 or 3) interleaved floats
 *  (x0 y0 [z0] x1 y1 ...). Writes lo[dims] and hi[dims]. NaN coordinates are ignored; with
 *  n == 0 (or all NaN) lo is +INFINITY and hi is -INFINITY. */
grove_status grove_bbox(grove_ctx *ctx, int dims, const float *points, size_t n, float *lo,
                        float *hi);

/* d_box is a device pointer to 2*dims floats: lo[0..dims-1] then hi[0..dims-1]. */
grove_status grove_bbox_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes, int dims,
                               const float *d_points, float *d_box, size_t n, void *stream);

/* ---- radix sort ---- */

/*! grove_sort_keys() / grove_sort_pairs() :
 *  Ascending, stable LSD radix sort of unsigned keys (key_type GROVE_U32 or GROVE_U64), in
 *  place. Only bits [begin_bit, end_bit) are compared; end_bit == 0 means all bits of the key.
 *  Sorting fewer bits is faster when the keys are known to be small. sort_pairs moves `values`
 *  (value_size 4 or 8 bytes each) with their keys. */
grove_status grove_sort_keys(grove_ctx *ctx, grove_dtype key_type, void *keys, size_t n,
                             int begin_bit, int end_bit);

grove_status grove_sort_pairs(grove_ctx *ctx, grove_dtype key_type, void *keys,
                              size_t value_size, void *values, size_t n, int begin_bit,
                              int end_bit);

/* Device variants read d_keys_in (and d_values_in) and write the sorted result to d_keys_out
 * (and d_values_out); inputs and outputs must not overlap. */
grove_status grove_sort_keys_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                    grove_dtype key_type, const void *d_keys_in,
                                    void *d_keys_out, size_t n, int begin_bit, int end_bit,
                                    void *stream);

grove_status grove_sort_pairs_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                     grove_dtype key_type, const void *d_keys_in,
                                     void *d_keys_out, size_t value_size,
                                     const void *d_values_in, void *d_values_out, size_t n,
                                     int begin_bit, int end_bit, void *stream);

/* ---- Morton codes ----
 * 2-D: 16 bits per axis, x in the even bits (bit 0 is x's bit 0), y in the odd bits, 32-bit
 * code. 3-D: 21 bits per axis, x in bits 0,3,6,..., y in 1,4,..., z in 2,5,..., 64-bit code
 * (the top bit is 0). Coordinates with bits beyond 16 (2-D) or 21 (3-D) are rejected with
 * GROVE_ERR_INVALID_ARG naming the first such index. */

grove_status grove_morton2_encode(grove_ctx *ctx, const uint32_t *x, const uint32_t *y,
                                  uint32_t *codes, size_t n);
grove_status grove_morton2_decode(grove_ctx *ctx, const uint32_t *codes, uint32_t *x,
                                  uint32_t *y, size_t n);
grove_status grove_morton3_encode(grove_ctx *ctx, const uint32_t *x, const uint32_t *y,
                                  const uint32_t *z, uint64_t *codes, size_t n);
grove_status grove_morton3_decode(grove_ctx *ctx, const uint64_t *codes, uint32_t *x,
                                  uint32_t *y, uint32_t *z, size_t n);

/* Device variants are asynchronous and need no scratch memory. The encoders report an
 * out-of-range coordinate through GROVE_ERR_INVALID_ARG only in the host variants; the device
 * encoders mask coordinates to 16 / 21 bits. */
grove_status grove_morton2_encode_device(grove_ctx *ctx, const uint32_t *d_x, const uint32_t *d_y,
                                         uint32_t *d_codes, size_t n, void *stream);
grove_status grove_morton2_decode_device(grove_ctx *ctx, const uint32_t *d_codes, uint32_t *d_x,
                                         uint32_t *d_y, size_t n, void *stream);
grove_status grove_morton3_encode_device(grove_ctx *ctx, const uint32_t *d_x, const uint32_t *d_y,
                                         const uint32_t *d_z, uint64_t *d_codes, size_t n,
                                         void *stream);
grove_status grove_morton3_decode_device(grove_ctx *ctx, const uint64_t *d_codes, uint32_t *d_x,
                                         uint32_t *d_y, uint32_t *d_z, size_t n, void *stream);

/* Scalar helpers, usable anywhere (also from CUDA device code, where GROVE_HD expands to
 * __host__ __device__). Arguments are masked to 16 / 21 bits. */
#if defined(__CUDACC__)
#define GROVE_HD __host__ __device__
#else
#define GROVE_HD
#endif

static inline GROVE_HD uint32_t grove_morton2_spread(uint32_t v)
{
    v &= 0xFFFFu;
    v = (v | (v << 8)) & 0x00FF00FFu;
    v = (v | (v << 4)) & 0x0F0F0F0Fu;
    v = (v | (v << 2)) & 0x33333333u;
    v = (v | (v << 1)) & 0x55555555u;
    return v;
}

static inline GROVE_HD uint32_t grove_morton2_compact(uint32_t v)
{
    v &= 0x55555555u;
    v = (v | (v >> 1)) & 0x33333333u;
    v = (v | (v >> 2)) & 0x0F0F0F0Fu;
    v = (v | (v >> 4)) & 0x00FF00FFu;
    v = (v | (v >> 8)) & 0x0000FFFFu;
    return v;
}

static inline GROVE_HD uint64_t grove_morton3_spread(uint32_t v)
{
    uint64_t x = v & 0x1FFFFFu;
    x = (x | (x << 32)) & 0x001F00000000FFFFull;
    x = (x | (x << 16)) & 0x001F0000FF0000FFull;
    x = (x | (x << 8)) & 0x100F00F00F00F00Full;
    x = (x | (x << 4)) & 0x10C30C30C30C30C3ull;
    x = (x | (x << 2)) & 0x1249249249249249ull;
    return x;
}

static inline GROVE_HD uint32_t grove_morton3_compact(uint64_t x)
{
    x &= 0x1249249249249249ull;
    x = (x | (x >> 2)) & 0x10C30C30C30C30C3ull;
    x = (x | (x >> 4)) & 0x100F00F00F00F00Full;
    x = (x | (x >> 8)) & 0x001F0000FF0000FFull;
    x = (x | (x >> 16)) & 0x001F00000000FFFFull;
    x = (x | (x >> 32)) & 0x00000000001FFFFFull;
    return (uint32_t)x;
}

static inline GROVE_HD uint32_t grove_morton2(uint32_t x, uint32_t y)
{
    return grove_morton2_spread(x) | (grove_morton2_spread(y) << 1);
}

static inline GROVE_HD uint64_t grove_morton3(uint32_t x, uint32_t y, uint32_t z)
{
    return grove_morton3_spread(x) | (grove_morton3_spread(y) << 1) |
           (grove_morton3_spread(z) << 2);
}

#ifdef __cplusplus
}
#endif

#endif /* GROVE_PRIM_H */
