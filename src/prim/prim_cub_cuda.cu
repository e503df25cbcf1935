/*
 * prim_cub_cuda.cu - the prim launchers that are thin layers over CUB: stream compaction,
 * reduction, bounding box and radix sort (declared in prim_cuda.h).
 *
 * Every n up to GROVE_PRIM_MAX_N = 2^32-1 is one CUB call, with no chunking: DeviceSelect takes
 * an int64_t count; DeviceReduce and DeviceRadixSort derive their offset type from the count's
 * type (cub::detail::choose_offset: 4-byte count -> uint32_t offsets, 8-byte -> 64-bit), and
 * both cover 2^32-1. Which one a sort gets is chosen for speed, see cub_sort_pairs.
 *
 * n == 0 never reaches CUB: the query answers 1 byte and the run writes the empty result
 * (count 0, the identity, the empty box) itself, so these cases do not depend on how a CUB
 * version treats empty input.
 */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "core_cuda.h"
#include "prim_cuda.h"

namespace
{

typedef unsigned long long u64;

cudaStream_t as_stream(grove_ctx *ctx, void *stream)
{
    return (cudaStream_t)(stream ? stream : ctx->stream);
}

/* The query answers at least 1 byte so that callers can allocate unconditionally. */
void set_query(size_t *temp_bytes, size_t cub_bytes) { *temp_bytes = cub_bytes ? cub_bytes : 1; }

template <typename T> __global__ void store_one(T *d_out, T v) { *d_out = v; }

/* ---- compaction ---- */

/* grove flags are "nonzero = selected". CUB 3.x casts a flag to bool, but older CUBs stored the
 * raw flag in an offset-typed counter (a flag of 2 counted twice); a 0/1 view makes the
 * meaning independent of the CUB version. */
struct FlagIsSet {
    __host__ __device__ bool operator()(uint8_t f) const { return f != 0; }
};

template <typename T>
cudaError_t cub_compact(void *d_temp, size_t &bytes, const void *d_in, const uint8_t *d_flags,
                        void *d_out, uint64_t *d_num, size_t n, cudaStream_t s)
{
    thrust::transform_iterator<FlagIsSet, const uint8_t *, bool> flags(d_flags, FlagIsSet());
    return cub::DeviceSelect::Flagged(d_temp, bytes, (const T *)d_in, flags, (T *)d_out, d_num,
                                      (::cuda::std::int64_t)n, s);
}

/* ---- reduction ---- */

/* Ordered, NaN-ignoring max/min, the CPU backend's: a NaN operand yields the other one (so NaN
 * is a true identity and a result is NaN only where every value it covers is NaN), and -0 < +0,
 * because fmaxf/fminf may return either zero and the result would then depend on the order of
 * combination. Both are associative and commutative, so any tree order gives the sequential
 * fold's bits. */
__host__ __device__ inline float fmax_ord(float a, float b)
{
    if (a > b) return a;
    if (b > a) return b;
    if (a != a) return b;
    if (b != b) return a;
    return signbit(a) ? b : a;
}

__host__ __device__ inline float fmin_ord(float a, float b)
{
    if (a < b) return a;
    if (b < a) return b;
    if (a != a) return b;
    if (b != b) return a;
    return signbit(a) ? a : b;
}

template <typename T> struct SumOp {
    __host__ __device__ T operator()(T a, T b) const { return a + b; }
};
template <typename T> struct MaxOp {
    __host__ __device__ T operator()(T a, T b) const { return a < b ? b : a; }
};
template <typename T> struct MinOp {
    __host__ __device__ T operator()(T a, T b) const { return b < a ? b : a; }
};
template <> struct MaxOp<float> {
    __host__ __device__ float operator()(float a, float b) const { return fmax_ord(a, b); }
};
template <> struct MinOp<float> {
    __host__ __device__ float operator()(float a, float b) const { return fmin_ord(a, b); }
};

/* The result for n == 0: prim.h's identities. */
template <typename T> T empty_result(grove_op op);
template <> uint32_t empty_result<uint32_t>(grove_op op)
{
    return op == GROVE_OP_MIN ? UINT32_MAX : 0u;
}
template <> uint64_t empty_result<uint64_t>(grove_op op)
{
    return op == GROVE_OP_MIN ? UINT64_MAX : (uint64_t)0;
}
template <> float empty_result<float>(grove_op op)
{
    return op == GROVE_OP_SUM ? 0.0f : op == GROVE_OP_MAX ? -INFINITY : INFINITY;
}

/* CUB's initial value, folded into every result: an exact identity of the operator. For f32
 * that is NaN for MAX/MIN (see fmax_ord; -INFINITY would turn an all-NaN input into -INFINITY)
 * and -0.0f for SUM (+0.0f would turn a sum of -0.0f values into +0.0f). */
template <typename T> T fold_init(grove_op op) { return empty_result<T>(op); }
template <> float fold_init<float>(grove_op op) { return op == GROVE_OP_SUM ? -0.0f : NAN; }

template <typename T>
cudaError_t cub_reduce(void *d_temp, size_t &bytes, grove_op op, const void *d_in, void *d_out,
                       size_t n, cudaStream_t s)
{
    const T *in = (const T *)d_in;
    T *out = (T *)d_out;
    T init = fold_init<T>(op);
    switch (op) {
    case GROVE_OP_SUM:
        return cub::DeviceReduce::Reduce(d_temp, bytes, in, out, (u64)n, SumOp<T>(), init, s);
    case GROVE_OP_MAX:
        return cub::DeviceReduce::Reduce(d_temp, bytes, in, out, (u64)n, MaxOp<T>(), init, s);
    case GROVE_OP_MIN:
        return cub::DeviceReduce::Reduce(d_temp, bytes, in, out, (u64)n, MinOp<T>(), init, s);
    }
    return cudaErrorInvalidValue; /* prim.c validated op; unreachable */
}

template <typename T>
grove_status store_empty_result(grove_ctx *ctx, grove_op op, void *d_out, cudaStream_t s)
{
    store_one<T><<<1, 1, 0, s>>>((T *)d_out, empty_result<T>(op));
    GROVE_CUDA_LAUNCHED(ctx, "grove__cuda_reduce: writing the identity for n == 0");
    return GROVE_OK;
}

/* ---- bounding box ---- */

/* lo[] then hi[], the layout of d_box, so the result is stored in one piece. */
template <int D> struct Box {
    float lo[D];
    float hi[D];
};

template <int D> struct PointBox {
    const float *p;
    __host__ __device__ Box<D> operator()(u64 i) const
    {
        Box<D> b;
        for (int d = 0; d < D; d++) {
            float v = p[i * D + d];
            b.lo[d] = v;
            b.hi[d] = v;
        }
        return b;
    }
};

template <int D> struct BoxUnion {
    __host__ __device__ Box<D> operator()(const Box<D> &a, const Box<D> &b) const
    {
        Box<D> r;
        for (int d = 0; d < D; d++) {
            r.lo[d] = fmin_ord(a.lo[d], b.lo[d]);
            r.hi[d] = fmax_ord(a.hi[d], b.hi[d]);
        }
        return r;
    }
};

template <int D> Box<D> empty_box()
{
    Box<D> b;
    for (int d = 0; d < D; d++) {
        b.lo[d] = INFINITY;
        b.hi[d] = -INFINITY;
    }
    return b;
}

template <int D>
cudaError_t cub_bbox(void *d_temp, size_t &bytes, const float *d_points, float *d_box, size_t n,
                     cudaStream_t s)
{
    PointBox<D> f = {d_points};
    thrust::transform_iterator<PointBox<D>, thrust::counting_iterator<u64>, Box<D>> in(
        thrust::counting_iterator<u64>(0), f);
    return cub::DeviceReduce::Reduce(d_temp, bytes, in, reinterpret_cast<Box<D> *>(d_box), (u64)n,
                                     BoxUnion<D>(), empty_box<D>(), s);
}

/* ---- radix sort ---- */

template <typename K>
cudaError_t cub_sort_keys(void *d_temp, size_t &bytes, const void *in, void *out, size_t n,
                          int begin_bit, int end_bit, cudaStream_t s)
{
    return cub::DeviceRadixSort::SortKeys(d_temp, bytes, (const K *)in, (K *)out, (u64)n, begin_bit,
                                          end_bit, s);
}

template <typename K, typename V>
cudaError_t cub_sort_pairs(void *d_temp, size_t &bytes, const void *kin, void *kout,
                           const void *vin, void *vout, size_t n, int begin_bit, int end_bit,
                           cudaStream_t s)
{
    /* CCCL 3.0's sm90 onesweep tuning gives pair sorts of 32-bit keys 17 items per thread with
     * 64-bit offsets but 23 with 32-bit ones (about 11% faster on an H100 at 2^28), while
     * keys-only sorts run faster with 64-bit offsets (19 vs 20 items, about 15%), so pairs pass
     * the count as uint32_t and keys-only as uint64_t. n <= 2^32-1 fits either. */
    return cub::DeviceRadixSort::SortPairs(d_temp, bytes, (const K *)kin, (K *)kout, (const V *)vin,
                                           (V *)vout, (uint32_t)n, begin_bit, end_bit, s);
}

template <typename K>
cudaError_t cub_sort(void *d_temp, size_t &bytes, const void *kin, void *kout, size_t value_size,
                     const void *vin, void *vout, size_t n, int begin_bit, int end_bit,
                     cudaStream_t s)
{
    if (!vin) return cub_sort_keys<K>(d_temp, bytes, kin, kout, n, begin_bit, end_bit, s);
    if (value_size == 4)
        return cub_sort_pairs<K, uint32_t>(d_temp, bytes, kin, kout, vin, vout, n, begin_bit,
                                           end_bit, s);
    return cub_sort_pairs<K, uint64_t>(d_temp, bytes, kin, kout, vin, vout, n, begin_bit, end_bit,
                                       s);
}

} /* namespace */

extern "C" grove_status grove__cuda_compact(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                            size_t elem_size, const void *d_in,
                                            const uint8_t *d_flags, void *d_out,
                                            uint64_t *d_num_selected, size_t n, void *stream)
{
    cudaStream_t s = as_stream(ctx, stream);
    size_t bytes = d_temp ? *temp_bytes : 0;
    if (n == 0) {
        if (!d_temp) {
            set_query(temp_bytes, 0);
            return GROVE_OK;
        }
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(d_num_selected, 0, sizeof(uint64_t), s),
                       "grove__cuda_compact: writing the count for n == 0");
        return GROVE_OK;
    }
    if (elem_size == 4)
        GROVE_CUDA_TRY(
            ctx, cub_compact<uint32_t>(d_temp, bytes, d_in, d_flags, d_out, d_num_selected, n, s),
            "grove__cuda_compact: cub::DeviceSelect::Flagged (4-byte elements)");
    else
        GROVE_CUDA_TRY(
            ctx, cub_compact<uint64_t>(d_temp, bytes, d_in, d_flags, d_out, d_num_selected, n, s),
            "grove__cuda_compact: cub::DeviceSelect::Flagged (8-byte elements)");
    if (!d_temp) set_query(temp_bytes, bytes);
    return GROVE_OK;
}

extern "C" grove_status grove__cuda_reduce(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                           grove_dtype t, grove_op op, const void *d_in,
                                           void *d_out, size_t n, void *stream)
{
    cudaStream_t s = as_stream(ctx, stream);
    size_t bytes = d_temp ? *temp_bytes : 0;
    if (n == 0) {
        if (!d_temp) {
            set_query(temp_bytes, 0);
            return GROVE_OK;
        }
        switch (t) {
        case GROVE_U32: return store_empty_result<uint32_t>(ctx, op, d_out, s);
        case GROVE_U64: return store_empty_result<uint64_t>(ctx, op, d_out, s);
        case GROVE_F32: return store_empty_result<float>(ctx, op, d_out, s);
        }
        return grove__error(ctx, GROVE_ERR_INTERNAL, "grove__cuda_reduce: unknown type %d", (int)t);
    }
    switch (t) {
    case GROVE_U32:
        GROVE_CUDA_TRY(ctx, cub_reduce<uint32_t>(d_temp, bytes, op, d_in, d_out, n, s),
                       "grove__cuda_reduce: cub::DeviceReduce::Reduce (u32)");
        break;
    case GROVE_U64:
        GROVE_CUDA_TRY(ctx, cub_reduce<uint64_t>(d_temp, bytes, op, d_in, d_out, n, s),
                       "grove__cuda_reduce: cub::DeviceReduce::Reduce (u64)");
        break;
    case GROVE_F32:
        GROVE_CUDA_TRY(ctx, cub_reduce<float>(d_temp, bytes, op, d_in, d_out, n, s),
                       "grove__cuda_reduce: cub::DeviceReduce::Reduce (f32)");
        break;
    default:
        return grove__error(ctx, GROVE_ERR_INTERNAL, "grove__cuda_reduce: unknown type %d", (int)t);
    }
    if (!d_temp) set_query(temp_bytes, bytes);
    return GROVE_OK;
}

extern "C" grove_status grove__cuda_bbox(grove_ctx *ctx, void *d_temp, size_t *temp_bytes, int dims,
                                         const float *d_points, float *d_box, size_t n,
                                         void *stream)
{
    cudaStream_t s = as_stream(ctx, stream);
    size_t bytes = d_temp ? *temp_bytes : 0;
    if (dims != 2 && dims != 3)
        return grove__error(ctx, GROVE_ERR_INTERNAL, "grove__cuda_bbox: dims %d", dims);
    if (n == 0) {
        if (!d_temp) {
            set_query(temp_bytes, 0);
            return GROVE_OK;
        }
        if (dims == 2)
            store_one<Box<2>><<<1, 1, 0, s>>>(reinterpret_cast<Box<2> *>(d_box), empty_box<2>());
        else
            store_one<Box<3>><<<1, 1, 0, s>>>(reinterpret_cast<Box<3> *>(d_box), empty_box<3>());
        GROVE_CUDA_LAUNCHED(ctx, "grove__cuda_bbox: writing the empty box for n == 0");
        return GROVE_OK;
    }
    if (dims == 2)
        GROVE_CUDA_TRY(ctx, cub_bbox<2>(d_temp, bytes, d_points, d_box, n, s),
                       "grove__cuda_bbox: cub::DeviceReduce::Reduce (2-D)");
    else
        GROVE_CUDA_TRY(ctx, cub_bbox<3>(d_temp, bytes, d_points, d_box, n, s),
                       "grove__cuda_bbox: cub::DeviceReduce::Reduce (3-D)");
    if (!d_temp) set_query(temp_bytes, bytes);
    return GROVE_OK;
}

extern "C" grove_status grove__cuda_sort(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                         grove_dtype key_type, const void *d_keys_in,
                                         void *d_keys_out, size_t value_size,
                                         const void *d_values_in, void *d_values_out, size_t n,
                                         int begin_bit, int end_bit, void *stream)
{
    cudaStream_t s = as_stream(ctx, stream);
    size_t bytes = d_temp ? *temp_bytes : 0;
    if (n == 0) {
        if (!d_temp) set_query(temp_bytes, 0);
        return GROVE_OK;
    }
    if (!d_values_in || !d_values_out) d_values_in = NULL;
    if (key_type == GROVE_U32) {
        if (end_bit == 0) end_bit = 32;
        GROVE_CUDA_TRY(ctx,
                       cub_sort<uint32_t>(d_temp, bytes, d_keys_in, d_keys_out, value_size,
                                          d_values_in, d_values_out, n, begin_bit, end_bit, s),
                       d_values_in ? "grove__cuda_sort: cub::DeviceRadixSort::SortPairs (u32 keys)"
                                   : "grove__cuda_sort: cub::DeviceRadixSort::SortKeys (u32)");
    } else if (key_type == GROVE_U64) {
        if (end_bit == 0) end_bit = 64;
        GROVE_CUDA_TRY(ctx,
                       cub_sort<uint64_t>(d_temp, bytes, d_keys_in, d_keys_out, value_size,
                                          d_values_in, d_values_out, n, begin_bit, end_bit, s),
                       d_values_in ? "grove__cuda_sort: cub::DeviceRadixSort::SortPairs (u64 keys)"
                                   : "grove__cuda_sort: cub::DeviceRadixSort::SortKeys (u64)");
    } else {
        return grove__error(ctx, GROVE_ERR_INTERNAL, "grove__cuda_sort: key type %d",
                            (int)key_type);
    }
    if (!d_temp) set_query(temp_bytes, bytes);
    return GROVE_OK;
}
