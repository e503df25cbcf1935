/*
 * bench_cuda.h - internal to the benchmarks: the CUDA half of grove_bench_prim() and the small
 * helpers that bench_prim.c shares with it.
 */
#ifndef GROVE_BENCH_CUDA_H
#define GROVE_BENCH_CUDA_H

#include <stdint.h>

#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sorts v[0..n-1] in place and returns its median (0 for n == 0). */
double grove__bench_median(double *v, int n);

/* Appends one row if there is room; returns 0 when rows is full. ms > 0. bytes are the bytes
 * the op must move at least; vs_copy is filled from copy_gbps when that is > 0. */
int grove__bench_add_row(grove_bench_row *rows, int max_rows, int *nrows, const char *op,
                         const char *impl, size_t n, double ms, double bytes, double copy_gbps,
                         double vs_cub, int checked);

/* A row of the tree suites (no byte count): vs_floor is floor_ms / ms, the suite's floor (a
 * sort of the same points) over the row's time, 0 where either is unknown. */
void grove__bench_floor_row(grove_bench_row *rows, int max_rows, int *nrows, const char *op,
                            const char *impl, size_t n, double ms, double floor_ms, int checked);

/* The start of a tree suite: the sizes it runs (opts->n, else its ndefaults defaults) and a
 * CPU context for its reference rows, which the caller destroys. On failure the error, naming
 * the suite, is on ctx and *cpu is NULL. */
grove_status grove__bench_setup(grove_ctx *ctx, const char *suite, const grove_bench_opts *opts,
                                const size_t *defaults, int ndefaults, size_t *sizes,
                                int *nsizes, grove_ctx **cpu);

/* A failed check: the message goes to ctx (GROVE_ERR_INTERNAL), which the CLI prints as a note
 * under the table. Returns 0, the row's `checked`. */
int grove__bench_note(grove_ctx *ctx, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* splitmix64 of (seed, i): the benchmarks' random data, the same on host and device. */
#if defined(__CUDACC__)
__host__ __device__
#endif
    static inline uint64_t
    grove__bench_hash(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A uniform double in [0, 1) from a hash (its top 53 bits). */
#if defined(__CUDACC__)
__host__ __device__
#endif
    static inline double
    grove__bench_unit(uint64_t h)
{
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

/* Monotonic wall clock in seconds (host only). */
double grove__bench_now_s(void);

/* What a benchmark array holds; the same on host and device, so results can be compared. */
enum {
    GROVE__FILL_U32,       /* any u32 */
    GROVE__FILL_U64,       /* any u64 */
    GROVE__FILL_UNIT_F32,  /* (0, 1]: a scan of these grows steadily, so f32 rounding stays relative
                            */
    GROVE__FILL_COORD_F32, /* [-1000, 1000) */
    GROVE__FILL_BITS21,    /* 21-bit values (Morton 3-D coordinates) */
    GROVE__FILL_FLAGS,     /* 1 in 2 set, as arbitrary nonzero bytes */
    GROVE__FILL_HEADS      /* about 1 in GROVE__HEAD_EVERY set, arbitrary nonzero bytes */
};
#define GROVE__HEAD_EVERY 64u /* mean segment length */

/* Element i of an array of `kind` filled from `seed`. */
#if defined(__CUDACC__)
__host__ __device__
#endif
    static inline void
    grove__bench_fill_one(void *p, uint64_t i, int kind, uint64_t seed)
{
    uint64_t h = grove__bench_hash(seed, i);
    switch (kind) {
    case GROVE__FILL_U32: ((uint32_t *)p)[i] = (uint32_t)(h >> 32); break;
    case GROVE__FILL_U64: ((uint64_t *)p)[i] = h; break;
    case GROVE__FILL_UNIT_F32:
        ((float *)p)[i] = (float)((h >> 40) + 1) * (1.0f / 16777216.0f);
        break;
    case GROVE__FILL_COORD_F32:
        ((float *)p)[i] = (float)(h >> 40) * (2000.0f / 16777216.0f) - 1000.0f;
        break;
    case GROVE__FILL_BITS21: ((uint32_t *)p)[i] = (uint32_t)(h >> 43); break;
    case GROVE__FILL_FLAGS: ((uint8_t *)p)[i] = (h & 1) ? (uint8_t)((h >> 8) | 1) : 0; break;
    case GROVE__FILL_HEADS:
        ((uint8_t *)p)[i] = (h % GROVE__HEAD_EVERY == 0) ? (uint8_t)((h >> 8) | 1) : 0;
        break;
    }
}

#ifdef GROVE_HAVE_CUDA
/* The CUDA benchmarks of grove_bench_prim() (bench_prim_cuda.cu); arguments already checked,
 * *nrows already 0. */
grove_status grove__bench_prim_cuda(grove_ctx *ctx, const grove_bench_opts *opts,
                                    grove_bench_row *rows, int max_rows, int *nrows);
#endif

#ifdef __cplusplus
}
#endif

#endif /* GROVE_BENCH_CUDA_H */
