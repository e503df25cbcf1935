/*
 * prim.c - public entry points of the prim module.
 *
 * Every call checks its context and arguments here, once, with a message naming the function
 * and the argument; the backends (prim_cpu.c, the CUDA launchers of prim_cuda.h) assume valid
 * arguments. Host-pointer calls on a CUDA context stage their data through device buffers
 * that are freed on every path; _device calls go straight to the launchers.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "grove/prim.h"
#include "prim_cpu.h"

#ifdef GROVE_HAVE_CUDA
#include "core_cuda.h"
#include "prim_cuda.h"
#endif

size_t grove_dtype_size(grove_dtype t)
{
    switch (t) {
    case GROVE_U32:
    case GROVE_F32: return 4;
    case GROVE_U64: return 8;
    }
    return 0;
}

/* ---- argument checks ---- */

static grove_status check_dtype(grove_ctx *ctx, const char *fn, const char *arg, grove_dtype t)
{
    if (grove_dtype_size(t)) return GROVE_OK;
    return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                        "%s: %s must be GROVE_U32, GROVE_U64 or GROVE_F32, got %d", fn, arg,
                        (int)t);
}

static grove_status check_key_type(grove_ctx *ctx, const char *fn, grove_dtype t)
{
    if (t == GROVE_U32 || t == GROVE_U64) return GROVE_OK;
    return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                        "%s: key_type must be GROVE_U32 or GROVE_U64, got %d", fn, (int)t);
}

/* Checks an enum argument against [0, max]; `names` lists the valid values for the message. */
static grove_status check_enum(grove_ctx *ctx, const char *fn, const char *arg, int v, int max,
                               const char *names)
{
    if (v >= 0 && v <= max) return GROVE_OK;
    return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s must be %s, got %d", fn, arg, names, v);
}

static grove_status check_size48(grove_ctx *ctx, const char *fn, const char *arg, size_t s)
{
    if (s == 4 || s == 8) return GROVE_OK;
    return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s must be 4 or 8, got %zu", fn, arg, s);
}

static grove_status check_n(grove_ctx *ctx, const char *fn, size_t n)
{
    if (n <= GROVE_PRIM_MAX_N) return GROVE_OK;
    return grove__error(ctx, GROVE_ERR_LIMIT, "%s: n = %zu exceeds GROVE_PRIM_MAX_N (%zu)", fn, n,
                        (size_t)GROVE_PRIM_MAX_N);
}

/* How a check is run: for a host-pointer call, for a _device call that does the work, or for
 * the size query of a _device call (d_temp == NULL), which touches no array. */
enum { HOST, DEV_RUN, DEV_QUERY };

/* The name of a pointer argument: "d_in" in a _device call, "in" in a host-pointer call. */
#define ARG(mode, name) ((mode) == HOST ? (name) : "d_" name)

/* A pointer that is read or written must not be NULL; `used` is 0 when it is not touched
 * (n == 0, or the size query of a _device call). */
static grove_status check_ptr(grove_ctx *ctx, const char *fn, const char *arg, const void *p,
                              int used)
{
    if (p || !used) return GROVE_OK;
    return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s is NULL", fn, arg);
}

/* Refuses overlapping byte ranges [a, a + na) and [b, b + nb); a == b is accepted when
 * `same_ok` (in-place operation). */
static grove_status check_disjoint(grove_ctx *ctx, const char *fn, const char *an, const void *a,
                                   size_t na, const char *bn, const void *b, size_t nb, int same_ok)
{
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    if (!a || !b || !na || !nb || (same_ok && pa == pb && na == nb)) return GROVE_OK;
    if (pa < pb + nb && pb < pa + na)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s and %s overlap%s", fn, an, bn,
                            same_ok ? " (only in == out is allowed)" : "");
    return GROVE_OK;
}

static grove_status check_scan(grove_ctx *ctx, const char *fn, int mode, grove_dtype t, grove_op op,
                               grove_scan_kind kind, grove_scan_dir dir, const void *in,
                               const uint8_t *heads, int segmented, const void *out, size_t n)
{
    size_t bytes = n * grove_dtype_size(t);
    int used = mode != DEV_QUERY && n > 0;
    GROVE_TRY(check_dtype(ctx, fn, "t", t));
    GROVE_TRY(check_enum(ctx, fn, "op", (int)op, GROVE_OP_MIN,
                         "GROVE_OP_SUM, GROVE_OP_MAX or GROVE_OP_MIN"));
    GROVE_TRY(check_enum(ctx, fn, "kind", (int)kind, GROVE_SCAN_INCLUSIVE,
                         "GROVE_SCAN_EXCLUSIVE or GROVE_SCAN_INCLUSIVE"));
    if (segmented)
        GROVE_TRY(check_enum(ctx, fn, "dir", (int)dir, GROVE_SCAN_BACKWARD,
                             "GROVE_SCAN_FORWARD or GROVE_SCAN_BACKWARD"));
    GROVE_TRY(check_n(ctx, fn, n));
    GROVE_TRY(check_ptr(ctx, fn, ARG(mode, "in"), in, used));
    if (segmented) GROVE_TRY(check_ptr(ctx, fn, ARG(mode, "heads"), heads, used));
    GROVE_TRY(check_ptr(ctx, fn, ARG(mode, "out"), out, used));
    GROVE_TRY(check_disjoint(ctx, fn, ARG(mode, "in"), in, bytes, ARG(mode, "out"), out, bytes, 1));
    if (segmented)
        GROVE_TRY(
            check_disjoint(ctx, fn, ARG(mode, "heads"), heads, n, ARG(mode, "out"), out, bytes, 0));
    return GROVE_OK;
}

/* split, segsplit and compact: `heads` only when segmented; dest may be NULL. */
static grove_status check_split(grove_ctx *ctx, const char *fn, int mode, size_t es, const void *in,
                                const uint8_t *flags, const uint8_t *heads, int segmented,
                                const void *out, const void *dest, size_t n)
{
    int used = mode != DEV_QUERY && n > 0;
    GROVE_TRY(check_size48(ctx, fn, "elem_size", es));
    GROVE_TRY(check_n(ctx, fn, n));
    GROVE_TRY(check_ptr(ctx, fn, ARG(mode, "in"), in, used));
    GROVE_TRY(check_ptr(ctx, fn, ARG(mode, "flags"), flags, used));
    if (segmented) GROVE_TRY(check_ptr(ctx, fn, ARG(mode, "heads"), heads, used));
    GROVE_TRY(check_ptr(ctx, fn, ARG(mode, "out"), out, used));
    GROVE_TRY(
        check_disjoint(ctx, fn, ARG(mode, "in"), in, n * es, ARG(mode, "out"), out, n * es, 0));
    GROVE_TRY(
        check_disjoint(ctx, fn, ARG(mode, "flags"), flags, n, ARG(mode, "out"), out, n * es, 0));
    return check_disjoint(ctx, fn, ARG(mode, "dest"), dest, n * 4, ARG(mode, "out"), out, n * es,
                          0);
}

static grove_status check_reduce(grove_ctx *ctx, const char *fn, int mode, grove_dtype t,
                                 grove_op op, const void *in, const void *out, size_t n)
{
    GROVE_TRY(check_dtype(ctx, fn, "t", t));
    GROVE_TRY(check_enum(ctx, fn, "op", (int)op, GROVE_OP_MIN,
                         "GROVE_OP_SUM, GROVE_OP_MAX or GROVE_OP_MIN"));
    GROVE_TRY(check_n(ctx, fn, n));
    GROVE_TRY(check_ptr(ctx, fn, ARG(mode, "in"), in, mode != DEV_QUERY && n > 0));
    GROVE_TRY(check_ptr(ctx, fn, ARG(mode, "out"), out, mode != DEV_QUERY));
    return check_disjoint(ctx, fn, ARG(mode, "in"), in, n * grove_dtype_size(t), ARG(mode, "out"),
                          out, grove_dtype_size(t), 0);
}

/* points, then lo and hi (host) or the box (device), which are written even when n == 0. */
static grove_status check_bbox(grove_ctx *ctx, const char *fn, int mode, int dims,
                               const float *points, const float *lo, const float *hi, size_t n)
{
    if (dims != 2 && dims != 3)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: dims must be 2 or 3, got %d", fn,
                            dims);
    GROVE_TRY(check_n(ctx, fn, n));
    GROVE_TRY(check_ptr(ctx, fn, ARG(mode, "points"), points, mode != DEV_QUERY && n > 0));
    if (mode != HOST) return check_ptr(ctx, fn, "d_box", lo, mode != DEV_QUERY);
    GROVE_TRY(check_ptr(ctx, fn, "lo", lo, 1));
    return check_ptr(ctx, fn, "hi", hi, 1);
}

/* Keys, values (pairs only) and the bit range of a sort. Host sorts are in place
 * (keys_out == keys_in, values_out == values_in); device sorts out of place. */
static grove_status check_sort(grove_ctx *ctx, const char *fn, int mode, grove_dtype key_type,
                               const void *keys_in, const void *keys_out, int pairs,
                               size_t value_size, const void *values_in, const void *values_out,
                               size_t n, int begin_bit, int end_bit)
{
    int bits, used = mode != DEV_QUERY && n > 0;
    size_t kb, vb = n * value_size;
    GROVE_TRY(check_key_type(ctx, fn, key_type));
    if (pairs) GROVE_TRY(check_size48(ctx, fn, "value_size", value_size));
    bits = (int)grove_dtype_size(key_type) * 8;
    kb = n * grove_dtype_size(key_type);
    if (begin_bit < 0 || begin_bit > bits)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: begin_bit must be in [0, %d], got %d",
                            fn, bits, begin_bit);
    if (end_bit < 0 || end_bit > bits)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: end_bit must be in [0, %d] (0: all bits), got %d", fn, bits,
                            end_bit);
    if (end_bit != 0 && begin_bit > end_bit)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: begin_bit (%d) must not be greater than end_bit (%d)", fn,
                            begin_bit, end_bit);
    GROVE_TRY(check_n(ctx, fn, n));
    if (mode == HOST) {
        GROVE_TRY(check_ptr(ctx, fn, "keys", keys_in, used));
        if (!pairs) return GROVE_OK;
        GROVE_TRY(check_ptr(ctx, fn, "values", values_in, used));
        return check_disjoint(ctx, fn, "keys", keys_in, kb, "values", values_in, vb, 0);
    }
    GROVE_TRY(check_ptr(ctx, fn, "d_keys_in", keys_in, used));
    GROVE_TRY(check_ptr(ctx, fn, "d_keys_out", keys_out, used));
    GROVE_TRY(check_disjoint(ctx, fn, "d_keys_in", keys_in, kb, "d_keys_out", keys_out, kb, 0));
    if (!pairs) return GROVE_OK;
    GROVE_TRY(check_ptr(ctx, fn, "d_values_in", values_in, used));
    GROVE_TRY(check_ptr(ctx, fn, "d_values_out", values_out, used));
    GROVE_TRY(
        check_disjoint(ctx, fn, "d_values_in", values_in, vb, "d_values_out", values_out, vb, 0));
    GROVE_TRY(check_disjoint(ctx, fn, "d_keys_in", keys_in, kb, "d_values_out", values_out, vb, 0));
    return check_disjoint(ctx, fn, "d_keys_out", keys_out, kb, "d_values_out", values_out, vb, 0);
}

/* Morton codes and coordinates, n of each (z only in 3-D); decoders write x, y, z, which must
 * then not overlap each other. */
static grove_status check_morton(grove_ctx *ctx, const char *fn, int mode, int dims, int decode,
                                 const void *codes, const uint32_t *x, const uint32_t *y,
                                 const uint32_t *z, size_t n)
{
    int used = n > 0;
    size_t cb = n * (dims == 2 ? 4 : 8), xb = n * 4, zb = dims == 3 ? xb : 0;
    GROVE_TRY(check_n(ctx, fn, n));
    GROVE_TRY(check_ptr(ctx, fn, ARG(mode, "x"), x, used));
    GROVE_TRY(check_ptr(ctx, fn, ARG(mode, "y"), y, used));
    if (dims == 3) GROVE_TRY(check_ptr(ctx, fn, ARG(mode, "z"), z, used));
    GROVE_TRY(check_ptr(ctx, fn, ARG(mode, "codes"), codes, used));
    GROVE_TRY(check_disjoint(ctx, fn, ARG(mode, "codes"), codes, cb, ARG(mode, "x"), x, xb, 0));
    GROVE_TRY(check_disjoint(ctx, fn, ARG(mode, "codes"), codes, cb, ARG(mode, "y"), y, xb, 0));
    GROVE_TRY(check_disjoint(ctx, fn, ARG(mode, "codes"), codes, cb, ARG(mode, "z"), z, zb, 0));
    if (!decode) return GROVE_OK;
    GROVE_TRY(check_disjoint(ctx, fn, ARG(mode, "x"), x, xb, ARG(mode, "y"), y, xb, 0));
    GROVE_TRY(check_disjoint(ctx, fn, ARG(mode, "x"), x, xb, ARG(mode, "z"), z, zb, 0));
    return check_disjoint(ctx, fn, ARG(mode, "y"), y, xb, ARG(mode, "z"), z, zb, 0);
}

/* ---- host-pointer calls on a CUDA context ---- */
#ifdef GROVE_HAVE_CUDA

#define DEV_MAX_BUFS 8

/* The device buffers of one host-pointer call; dev_end() waits for the stream and frees them
 * all, whatever happened before. */
typedef struct dev_set {
    grove_ctx *ctx;
    const char *fn;
    void *stream;
    void *buf[DEV_MAX_BUFS];
    size_t bytes[DEV_MAX_BUFS]; /* sizes, for the context's device-memory accounting */
    int count;
} dev_set;

static grove_status dev_begin(dev_set *s, grove_ctx *ctx, const char *fn)
{
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->fn = fn;
    s->stream = ctx->stream;
    return grove__cuda_use(ctx);
}

static grove_status dev_alloc(dev_set *s, void **p, size_t bytes, const char *what)
{
    char name[160];
    grove_status st;
    *p = NULL;
    if (s->count == DEV_MAX_BUFS)
        return grove__error(s->ctx, GROVE_ERR_INTERNAL, "%s: too many device buffers", s->fn);
    snprintf(name, sizeof name, "%s (%s)", what, s->fn);
    st = grove__cuda_alloc(s->ctx, p, bytes, s->stream, name);
    if (st == GROVE_OK && *p) {
        s->buf[s->count] = *p;
        s->bytes[s->count++] = bytes;
    }
    return st;
}

/* Allocates a device copy of `bytes` bytes of host memory h. */
static grove_status dev_upload(dev_set *s, void **p, const void *h, size_t bytes, const char *what)
{
    GROVE_TRY(dev_alloc(s, p, bytes, what));
    return grove__cuda_h2d(s->ctx, *p, h, bytes, s->stream);
}

static grove_status dev_end(dev_set *s, grove_status st)
{
    if (st == GROVE_OK)
        st = grove__cuda_sync(s->ctx, s->stream, s->fn);
    else /* still drain the stream (copies into the caller's memory), keeping the first error */
        (void)grove__cuda_sync(NULL, s->stream, s->fn);
    while (s->count > 0) {
        s->count--;
        grove__cuda_free(s->ctx, s->buf[s->count], s->bytes[s->count], s->stream);
    }
    return st;
}

/* Two-phase launcher call: query the scratch size, allocate it in the set, run. */
#define DEV_RUN(st, s, launcher, ...)                                                              \
    do {                                                                                           \
        size_t tb_ = 0;                                                                            \
        void *tmp_ = NULL;                                                                         \
        GROVE_TRY_END(st, launcher((s).ctx, NULL, &tb_, __VA_ARGS__));                             \
        GROVE_TRY_END(st, dev_alloc(&(s), &tmp_, tb_, "scratch memory"));                          \
        GROVE_TRY_END(st, launcher((s).ctx, tmp_, &tb_, __VA_ARGS__));                             \
    } while (0)

/* scan (heads == NULL) and segscan. */
static grove_status cuda_scan(grove_ctx *ctx, const char *fn, grove_dtype t, grove_op op,
                              grove_scan_kind kind, grove_scan_dir dir, const void *in,
                              const uint8_t *heads, void *out, size_t n)
{
    size_t bytes = n * grove_dtype_size(t);
    void *d_in, *d_heads, *d_out;
    dev_set s;
    grove_status st;
    GROVE_TRY_END(st, dev_begin(&s, ctx, fn));
    GROVE_TRY_END(st, dev_upload(&s, &d_in, in, bytes, "the input"));
    GROVE_TRY_END(st, dev_alloc(&s, &d_out, bytes, "the output"));
    if (heads) {
        GROVE_TRY_END(st, dev_upload(&s, &d_heads, heads, n, "the head flags"));
        DEV_RUN(st, s, grove__cuda_segscan, t, op, kind, dir, d_in, (const uint8_t *)d_heads, d_out,
                n, s.stream);
    } else {
        DEV_RUN(st, s, grove__cuda_scan, t, op, kind, d_in, d_out, n, s.stream);
    }
    GROVE_TRY_END(st, grove__cuda_d2h(ctx, out, d_out, bytes, s.stream));
_end:
    return dev_end(&s, st);
}

/* split (heads == NULL) and segsplit. */
static grove_status cuda_split(grove_ctx *ctx, const char *fn, size_t es, const void *in,
                               const uint8_t *flags, const uint8_t *heads, void *out,
                               uint32_t *dest, size_t *num_flagged, size_t n)
{
    void *d_in, *d_flags, *d_heads, *d_out, *d_dest = NULL, *d_count = NULL;
    uint64_t count = 0;
    dev_set s;
    grove_status st;
    GROVE_TRY_END(st, dev_begin(&s, ctx, fn));
    GROVE_TRY_END(st, dev_upload(&s, &d_in, in, n * es, "the input"));
    GROVE_TRY_END(st, dev_upload(&s, &d_flags, flags, n, "the flags"));
    GROVE_TRY_END(st, dev_alloc(&s, &d_out, n * es, "the output"));
    if (dest) GROVE_TRY_END(st, dev_alloc(&s, &d_dest, n * sizeof *dest, "dest"));
    if (heads) {
        GROVE_TRY_END(st, dev_upload(&s, &d_heads, heads, n, "the head flags"));
        DEV_RUN(st, s, grove__cuda_segsplit, es, d_in, (const uint8_t *)d_flags,
                (const uint8_t *)d_heads, d_out, (uint32_t *)d_dest, n, s.stream);
    } else {
        if (num_flagged)
            GROVE_TRY_END(st, dev_alloc(&s, &d_count, sizeof count, "the flagged count"));
        DEV_RUN(st, s, grove__cuda_split, es, d_in, (const uint8_t *)d_flags, d_out,
                (uint32_t *)d_dest, (uint64_t *)d_count, n, s.stream);
        if (d_count)
            GROVE_TRY_END(st, grove__cuda_d2h(ctx, &count, d_count, sizeof count, s.stream));
    }
    GROVE_TRY_END(st, grove__cuda_d2h(ctx, out, d_out, n * es, s.stream));
    if (dest) GROVE_TRY_END(st, grove__cuda_d2h(ctx, dest, d_dest, n * sizeof *dest, s.stream));
_end:
    st = dev_end(&s, st);
    if (st == GROVE_OK && num_flagged) *num_flagged = (size_t)count;
    return st;
}

static grove_status cuda_compact(grove_ctx *ctx, const char *fn, size_t es, const void *in,
                                 const uint8_t *flags, void *out, size_t *num_selected, size_t n)
{
    void *d_in, *d_flags, *d_out, *d_count;
    uint64_t count = 0;
    dev_set s;
    grove_status st;
    GROVE_TRY_END(st, dev_begin(&s, ctx, fn));
    GROVE_TRY_END(st, dev_upload(&s, &d_in, in, n * es, "the input"));
    GROVE_TRY_END(st, dev_upload(&s, &d_flags, flags, n, "the flags"));
    GROVE_TRY_END(st, dev_alloc(&s, &d_out, n * es, "the output"));
    GROVE_TRY_END(st, dev_alloc(&s, &d_count, sizeof count, "the selected count"));
    DEV_RUN(st, s, grove__cuda_compact, es, d_in, (const uint8_t *)d_flags, d_out,
            (uint64_t *)d_count, n, s.stream);
    GROVE_TRY_END(st, grove__cuda_d2h(ctx, &count, d_count, sizeof count, s.stream));
    /* Only the selected elements may be written to the caller's buffer: wait for the count. */
    GROVE_TRY_END(st, grove__cuda_sync(ctx, s.stream, fn));
    if (count > n)
        GROVE_TRY_END(st, grove__error(ctx, GROVE_ERR_INTERNAL,
                                       "%s: the GPU selected %llu of %zu elements", fn,
                                       (unsigned long long)count, n));
    GROVE_TRY_END(st, grove__cuda_d2h(ctx, out, d_out, (size_t)count * es, s.stream));
_end:
    st = dev_end(&s, st);
    if (st == GROVE_OK) *num_selected = (size_t)count;
    return st;
}

static grove_status cuda_reduce(grove_ctx *ctx, const char *fn, grove_dtype t, grove_op op,
                                const void *in, void *out, size_t n)
{
    size_t es = grove_dtype_size(t);
    void *d_in, *d_out;
    dev_set s;
    grove_status st;
    GROVE_TRY_END(st, dev_begin(&s, ctx, fn));
    GROVE_TRY_END(st, dev_upload(&s, &d_in, in, n * es, "the input"));
    GROVE_TRY_END(st, dev_alloc(&s, &d_out, es, "the result"));
    DEV_RUN(st, s, grove__cuda_reduce, t, op, d_in, d_out, n, s.stream);
    GROVE_TRY_END(st, grove__cuda_d2h(ctx, out, d_out, es, s.stream));
_end:
    return dev_end(&s, st);
}

static grove_status cuda_bbox(grove_ctx *ctx, const char *fn, int dims, const float *points,
                              size_t n, float *lo, float *hi)
{
    size_t d = (size_t)dims;
    float box[6];
    void *d_points, *d_box;
    dev_set s;
    grove_status st;
    GROVE_TRY_END(st, dev_begin(&s, ctx, fn));
    GROVE_TRY_END(st, dev_upload(&s, &d_points, points, n * d * sizeof *points, "the points"));
    GROVE_TRY_END(st, dev_alloc(&s, &d_box, 2 * d * sizeof *box, "the box"));
    DEV_RUN(st, s, grove__cuda_bbox, dims, (const float *)d_points, (float *)d_box, n, s.stream);
    GROVE_TRY_END(st, grove__cuda_d2h(ctx, box, d_box, 2 * d * sizeof *box, s.stream));
_end:
    st = dev_end(&s, st);
    if (st == GROVE_OK) {
        memcpy(lo, box, d * sizeof *box);
        memcpy(hi, box + d, d * sizeof *box);
    }
    return st;
}

/* The device sort is out of place: sort into second buffers, copy those back. */
static grove_status cuda_sort(grove_ctx *ctx, const char *fn, grove_dtype key_type, void *keys,
                              size_t vs, void *values, size_t n, int begin_bit, int end_bit)
{
    size_t kb = n * grove_dtype_size(key_type);
    void *d_kin, *d_kout, *d_vin = NULL, *d_vout = NULL;
    dev_set s;
    grove_status st;
    GROVE_TRY_END(st, dev_begin(&s, ctx, fn));
    GROVE_TRY_END(st, dev_upload(&s, &d_kin, keys, kb, "the keys"));
    GROVE_TRY_END(st, dev_alloc(&s, &d_kout, kb, "the sorted keys"));
    if (values) {
        GROVE_TRY_END(st, dev_upload(&s, &d_vin, values, n * vs, "the values"));
        GROVE_TRY_END(st, dev_alloc(&s, &d_vout, n * vs, "the sorted values"));
    }
    DEV_RUN(st, s, grove__cuda_sort, key_type, d_kin, d_kout, vs, d_vin, d_vout, n, begin_bit,
            end_bit, s.stream);
    GROVE_TRY_END(st, grove__cuda_d2h(ctx, keys, d_kout, kb, s.stream));
    if (values) GROVE_TRY_END(st, grove__cuda_d2h(ctx, values, d_vout, n * vs, s.stream));
_end:
    return dev_end(&s, st);
}

/* Morton encoders of both dimensions; codes are uint32_t (2-D) or uint64_t (3-D). */
static grove_status cuda_morton_encode(grove_ctx *ctx, const char *fn, int dims, const uint32_t *x,
                                       const uint32_t *y, const uint32_t *z, void *codes, size_t n)
{
    size_t cb = n * (dims == 2 ? 4 : 8), xb = n * sizeof *x;
    uint64_t bad = UINT64_MAX;
    void *d_x, *d_y, *d_z = NULL, *d_codes, *d_bad;
    dev_set s;
    grove_status st;
    GROVE_TRY_END(st, dev_begin(&s, ctx, fn));
    GROVE_TRY_END(st, dev_upload(&s, &d_x, x, xb, "x"));
    GROVE_TRY_END(st, dev_upload(&s, &d_y, y, xb, "y"));
    if (dims == 3) GROVE_TRY_END(st, dev_upload(&s, &d_z, z, xb, "z"));
    GROVE_TRY_END(st, dev_alloc(&s, &d_codes, cb, "the codes"));
    GROVE_TRY_END(st, dev_upload(&s, &d_bad, &bad, sizeof bad, "the range check"));
    if (dims == 2)
        GROVE_TRY_END(st, grove__cuda_morton2_encode(ctx, (const uint32_t *)d_x,
                                                     (const uint32_t *)d_y, (uint32_t *)d_codes,
                                                     (uint64_t *)d_bad, n, s.stream));
    else
        GROVE_TRY_END(st,
                      grove__cuda_morton3_encode(ctx, (const uint32_t *)d_x, (const uint32_t *)d_y,
                                                 (const uint32_t *)d_z, (uint64_t *)d_codes,
                                                 (uint64_t *)d_bad, n, s.stream));
    GROVE_TRY_END(st, grove__cuda_d2h(ctx, &bad, d_bad, sizeof bad, s.stream));
    GROVE_TRY_END(st, grove__cuda_d2h(ctx, codes, d_codes, cb, s.stream));
_end:
    st = dev_end(&s, st);
    if (st == GROVE_OK && bad < n) {
        /* The GPU reports only the index. The CPU backend, run up to it, writes the message a
         * CPU context would give, so both backends fail alike. */
        size_t m = (size_t)bad + 1;
        st = dims == 2 ? grove__cpu_morton2_encode(ctx, x, y, (uint32_t *)codes, m)
                       : grove__cpu_morton3_encode(ctx, x, y, z, (uint64_t *)codes, m);
        if (st == GROVE_OK)
            st = grove__error(ctx, GROVE_ERR_INTERNAL,
                              "%s: the GPU flagged index %zu, whose coordinates are in range", fn,
                              (size_t)bad);
    }
    return st;
}

static grove_status cuda_morton_decode(grove_ctx *ctx, const char *fn, int dims, const void *codes,
                                       uint32_t *x, uint32_t *y, uint32_t *z, size_t n)
{
    size_t cb = n * (dims == 2 ? 4 : 8), xb = n * sizeof *x;
    void *d_codes, *d_x, *d_y, *d_z = NULL;
    dev_set s;
    grove_status st;
    GROVE_TRY_END(st, dev_begin(&s, ctx, fn));
    GROVE_TRY_END(st, dev_upload(&s, &d_codes, codes, cb, "the codes"));
    GROVE_TRY_END(st, dev_alloc(&s, &d_x, xb, "x"));
    GROVE_TRY_END(st, dev_alloc(&s, &d_y, xb, "y"));
    if (dims == 3) GROVE_TRY_END(st, dev_alloc(&s, &d_z, xb, "z"));
    if (dims == 2)
        GROVE_TRY_END(st,
                      grove__cuda_morton2_decode(ctx, (const uint32_t *)d_codes, (uint32_t *)d_x,
                                                 (uint32_t *)d_y, n, s.stream));
    else
        GROVE_TRY_END(st,
                      grove__cuda_morton3_decode(ctx, (const uint64_t *)d_codes, (uint32_t *)d_x,
                                                 (uint32_t *)d_y, (uint32_t *)d_z, n, s.stream));
    GROVE_TRY_END(st, grove__cuda_d2h(ctx, x, d_x, xb, s.stream));
    GROVE_TRY_END(st, grove__cuda_d2h(ctx, y, d_y, xb, s.stream));
    if (dims == 3) GROVE_TRY_END(st, grove__cuda_d2h(ctx, z, d_z, xb, s.stream));
_end:
    return dev_end(&s, st);
}

#define IF_CUDA(ctx, call)                                                                         \
    do {                                                                                           \
        if ((ctx)->backend == GROVE_BACKEND_CUDA) return (call);                                   \
    } while (0)
#else
#define IF_CUDA(ctx, call) ((void)0)
#endif /* GROVE_HAVE_CUDA */

/* ---- public host-pointer calls ---- */

grove_status grove_scan(grove_ctx *ctx, grove_dtype t, grove_op op, grove_scan_kind kind,
                        const void *in, void *out, size_t n)
{
    GROVE_TRY(grove__check_ctx(ctx));
    GROVE_TRY(
        check_scan(ctx, __func__, HOST, t, op, kind, GROVE_SCAN_FORWARD, in, NULL, 0, out, n));
    IF_CUDA(ctx, cuda_scan(ctx, __func__, t, op, kind, GROVE_SCAN_FORWARD, in, NULL, out, n));
    return grove__cpu_scan(ctx, t, op, kind, in, out, n);
}

grove_status grove_segscan(grove_ctx *ctx, grove_dtype t, grove_op op, grove_scan_kind kind,
                           grove_scan_dir dir, const void *in, const uint8_t *heads, void *out,
                           size_t n)
{
    GROVE_TRY(grove__check_ctx(ctx));
    GROVE_TRY(check_scan(ctx, __func__, HOST, t, op, kind, dir, in, heads, 1, out, n));
    /* With n == 0 heads may be NULL, which cuda_scan would take for an unsegmented scan. */
    if (n == 0) return GROVE_OK;
    IF_CUDA(ctx, cuda_scan(ctx, __func__, t, op, kind, dir, in, heads, out, n));
    return grove__cpu_segscan(ctx, t, op, kind, dir, in, heads, out, n);
}

grove_status grove_split(grove_ctx *ctx, size_t elem_size, const void *in, const uint8_t *flags,
                         void *out, uint32_t *dest, size_t *num_flagged, size_t n)
{
    GROVE_TRY(grove__check_ctx(ctx));
    GROVE_TRY(check_split(ctx, __func__, HOST, elem_size, in, flags, NULL, 0, out, dest, n));
    IF_CUDA(ctx, cuda_split(ctx, __func__, elem_size, in, flags, NULL, out, dest, num_flagged, n));
    return grove__cpu_split(ctx, elem_size, in, flags, out, dest, num_flagged, n);
}

grove_status grove_segsplit(grove_ctx *ctx, size_t elem_size, const void *in, const uint8_t *flags,
                            const uint8_t *heads, void *out, uint32_t *dest, size_t n)
{
    GROVE_TRY(grove__check_ctx(ctx));
    GROVE_TRY(check_split(ctx, __func__, HOST, elem_size, in, flags, heads, 1, out, dest, n));
    if (n == 0) return GROVE_OK; /* heads may be NULL; see grove_segscan */
    IF_CUDA(ctx, cuda_split(ctx, __func__, elem_size, in, flags, heads, out, dest, NULL, n));
    return grove__cpu_segsplit(ctx, elem_size, in, flags, heads, out, dest, n);
}

grove_status grove_compact(grove_ctx *ctx, size_t elem_size, const void *in, const uint8_t *flags,
                           void *out, size_t *num_selected, size_t n)
{
    GROVE_TRY(grove__check_ctx(ctx));
    GROVE_TRY(check_split(ctx, __func__, HOST, elem_size, in, flags, NULL, 0, out, NULL, n));
    GROVE_TRY(check_ptr(ctx, __func__, "num_selected", num_selected, 1));
    IF_CUDA(ctx, cuda_compact(ctx, __func__, elem_size, in, flags, out, num_selected, n));
    return grove__cpu_compact(ctx, elem_size, in, flags, out, num_selected, n);
}

grove_status grove_reduce(grove_ctx *ctx, grove_dtype t, grove_op op, const void *in, void *out,
                          size_t n)
{
    GROVE_TRY(grove__check_ctx(ctx));
    GROVE_TRY(check_reduce(ctx, __func__, HOST, t, op, in, out, n));
    IF_CUDA(ctx, cuda_reduce(ctx, __func__, t, op, in, out, n));
    return grove__cpu_reduce(ctx, t, op, in, out, n);
}

grove_status grove_bbox(grove_ctx *ctx, int dims, const float *points, size_t n, float *lo,
                        float *hi)
{
    GROVE_TRY(grove__check_ctx(ctx));
    GROVE_TRY(check_bbox(ctx, __func__, HOST, dims, points, lo, hi, n));
    IF_CUDA(ctx, cuda_bbox(ctx, __func__, dims, points, n, lo, hi));
    return grove__cpu_bbox(ctx, dims, points, n, lo, hi);
}

grove_status grove_sort_keys(grove_ctx *ctx, grove_dtype key_type, void *keys, size_t n,
                             int begin_bit, int end_bit)
{
    GROVE_TRY(grove__check_ctx(ctx));
    GROVE_TRY(check_sort(ctx, __func__, HOST, key_type, keys, keys, 0, 0, NULL, NULL, n, begin_bit,
                         end_bit));
    IF_CUDA(ctx, cuda_sort(ctx, __func__, key_type, keys, 0, NULL, n, begin_bit, end_bit));
    return grove__cpu_sort(ctx, key_type, keys, 0, NULL, n, begin_bit, end_bit);
}

grove_status grove_sort_pairs(grove_ctx *ctx, grove_dtype key_type, void *keys, size_t value_size,
                              void *values, size_t n, int begin_bit, int end_bit)
{
    GROVE_TRY(grove__check_ctx(ctx));
    GROVE_TRY(check_sort(ctx, __func__, HOST, key_type, keys, keys, 1, value_size, values, values,
                         n, begin_bit, end_bit));
    IF_CUDA(ctx,
            cuda_sort(ctx, __func__, key_type, keys, value_size, values, n, begin_bit, end_bit));
    return grove__cpu_sort(ctx, key_type, keys, value_size, values, n, begin_bit, end_bit);
}

grove_status grove_morton2_encode(grove_ctx *ctx, const uint32_t *x, const uint32_t *y,
                                  uint32_t *codes, size_t n)
{
    GROVE_TRY(grove__check_ctx(ctx));
    GROVE_TRY(check_morton(ctx, __func__, HOST, 2, 0, codes, x, y, NULL, n));
    IF_CUDA(ctx, cuda_morton_encode(ctx, __func__, 2, x, y, NULL, codes, n));
    return grove__cpu_morton2_encode(ctx, x, y, codes, n);
}

grove_status grove_morton2_decode(grove_ctx *ctx, const uint32_t *codes, uint32_t *x, uint32_t *y,
                                  size_t n)
{
    GROVE_TRY(grove__check_ctx(ctx));
    GROVE_TRY(check_morton(ctx, __func__, HOST, 2, 1, codes, x, y, NULL, n));
    IF_CUDA(ctx, cuda_morton_decode(ctx, __func__, 2, codes, x, y, NULL, n));
    return grove__cpu_morton2_decode(ctx, codes, x, y, n);
}

grove_status grove_morton3_encode(grove_ctx *ctx, const uint32_t *x, const uint32_t *y,
                                  const uint32_t *z, uint64_t *codes, size_t n)
{
    GROVE_TRY(grove__check_ctx(ctx));
    GROVE_TRY(check_morton(ctx, __func__, HOST, 3, 0, codes, x, y, z, n));
    IF_CUDA(ctx, cuda_morton_encode(ctx, __func__, 3, x, y, z, codes, n));
    return grove__cpu_morton3_encode(ctx, x, y, z, codes, n);
}

grove_status grove_morton3_decode(grove_ctx *ctx, const uint64_t *codes, uint32_t *x, uint32_t *y,
                                  uint32_t *z, size_t n)
{
    GROVE_TRY(grove__check_ctx(ctx));
    GROVE_TRY(check_morton(ctx, __func__, HOST, 3, 1, codes, x, y, z, n));
    IF_CUDA(ctx, cuda_morton_decode(ctx, __func__, 3, codes, x, y, z, n));
    return grove__cpu_morton3_decode(ctx, codes, x, y, z, n);
}

/* ---- _device calls ---- */

/* Common part of every _device call: a usable CUDA context, temp_bytes when the primitive
 * takes scratch memory, the default stream, and how far to check the pointers (a size query,
 * d_temp == NULL, touches no array, so they may still be NULL). */
static grove_status device_entry(grove_ctx *ctx, const char *fn, int has_temp, const void *d_temp,
                                 const size_t *temp_bytes, void **stream, int *mode)
{
    *mode = has_temp && !d_temp ? DEV_QUERY : DEV_RUN;
    GROVE_TRY(grove__check_ctx(ctx));
    if (ctx->backend != GROVE_BACKEND_CUDA)
        return grove__error(ctx, GROVE_ERR_UNSUPPORTED,
                            "%s needs a CUDA context (this one uses the %s backend%s)", fn,
                            grove_backend_name(ctx->backend),
                            grove_has_cuda() ? "" : "; this build of grove has no CUDA support");
    if (has_temp && !temp_bytes)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: temp_bytes is NULL", fn);
    if (!*stream) *stream = ctx->stream;
    return GROVE_OK;
}

#ifdef GROVE_HAVE_CUDA
#define LAUNCH(ctx, call)                                                                          \
    do {                                                                                           \
        GROVE_TRY(grove__cuda_use(ctx));                                                           \
        return (call);                                                                             \
    } while (0)
#else
/* Not reached: device_entry() refuses every context of a build without CUDA. */
#define LAUNCH(ctx, call) return GROVE_ERR_UNSUPPORTED
#endif

grove_status grove_scan_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes, grove_dtype t,
                               grove_op op, grove_scan_kind kind, const void *d_in, void *d_out,
                               size_t n, void *stream)
{
    int mode;
    GROVE_TRY(device_entry(ctx, __func__, 1, d_temp, temp_bytes, &stream, &mode));
    GROVE_TRY(
        check_scan(ctx, __func__, mode, t, op, kind, GROVE_SCAN_FORWARD, d_in, NULL, 0, d_out, n));
    LAUNCH(ctx, grove__cuda_scan(ctx, d_temp, temp_bytes, t, op, kind, d_in, d_out, n, stream));
}

grove_status grove_segscan_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes, grove_dtype t,
                                  grove_op op, grove_scan_kind kind, grove_scan_dir dir,
                                  const void *d_in, const uint8_t *d_heads, void *d_out, size_t n,
                                  void *stream)
{
    int mode;
    GROVE_TRY(device_entry(ctx, __func__, 1, d_temp, temp_bytes, &stream, &mode));
    GROVE_TRY(check_scan(ctx, __func__, mode, t, op, kind, dir, d_in, d_heads, 1, d_out, n));
    LAUNCH(ctx, grove__cuda_segscan(ctx, d_temp, temp_bytes, t, op, kind, dir, d_in, d_heads, d_out,
                                    n, stream));
}

grove_status grove_split_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes, size_t elem_size,
                                const void *d_in, const uint8_t *d_flags, void *d_out,
                                uint32_t *d_dest, uint64_t *d_num_flagged, size_t n, void *stream)
{
    int mode;
    GROVE_TRY(device_entry(ctx, __func__, 1, d_temp, temp_bytes, &stream, &mode));
    GROVE_TRY(
        check_split(ctx, __func__, mode, elem_size, d_in, d_flags, NULL, 0, d_out, d_dest, n));
    GROVE_TRY(check_disjoint(ctx, __func__, "d_num_flagged", d_num_flagged, sizeof(uint64_t),
                             "d_out", d_out, n * elem_size, 0));
    LAUNCH(ctx, grove__cuda_split(ctx, d_temp, temp_bytes, elem_size, d_in, d_flags, d_out, d_dest,
                                  d_num_flagged, n, stream));
}

grove_status grove_segsplit_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                   size_t elem_size, const void *d_in, const uint8_t *d_flags,
                                   const uint8_t *d_heads, void *d_out, uint32_t *d_dest, size_t n,
                                   void *stream)
{
    int mode;
    GROVE_TRY(device_entry(ctx, __func__, 1, d_temp, temp_bytes, &stream, &mode));
    GROVE_TRY(
        check_split(ctx, __func__, mode, elem_size, d_in, d_flags, d_heads, 1, d_out, d_dest, n));
    LAUNCH(ctx, grove__cuda_segsplit(ctx, d_temp, temp_bytes, elem_size, d_in, d_flags, d_heads,
                                     d_out, d_dest, n, stream));
}

grove_status grove_compact_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                  size_t elem_size, const void *d_in, const uint8_t *d_flags,
                                  void *d_out, uint64_t *d_num_selected, size_t n, void *stream)
{
    int mode;
    GROVE_TRY(device_entry(ctx, __func__, 1, d_temp, temp_bytes, &stream, &mode));
    GROVE_TRY(check_split(ctx, __func__, mode, elem_size, d_in, d_flags, NULL, 0, d_out, NULL, n));
    GROVE_TRY(check_ptr(ctx, __func__, "d_num_selected", d_num_selected, mode == DEV_RUN));
    GROVE_TRY(check_disjoint(ctx, __func__, "d_num_selected", d_num_selected, sizeof(uint64_t),
                             "d_out", d_out, n * elem_size, 0));
    LAUNCH(ctx, grove__cuda_compact(ctx, d_temp, temp_bytes, elem_size, d_in, d_flags, d_out,
                                    d_num_selected, n, stream));
}

grove_status grove_reduce_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes, grove_dtype t,
                                 grove_op op, const void *d_in, void *d_out, size_t n, void *stream)
{
    int mode;
    GROVE_TRY(device_entry(ctx, __func__, 1, d_temp, temp_bytes, &stream, &mode));
    GROVE_TRY(check_reduce(ctx, __func__, mode, t, op, d_in, d_out, n));
    LAUNCH(ctx, grove__cuda_reduce(ctx, d_temp, temp_bytes, t, op, d_in, d_out, n, stream));
}

grove_status grove_bbox_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes, int dims,
                               const float *d_points, float *d_box, size_t n, void *stream)
{
    int mode;
    GROVE_TRY(device_entry(ctx, __func__, 1, d_temp, temp_bytes, &stream, &mode));
    GROVE_TRY(check_bbox(ctx, __func__, mode, dims, d_points, d_box, d_box, n));
    LAUNCH(ctx, grove__cuda_bbox(ctx, d_temp, temp_bytes, dims, d_points, d_box, n, stream));
}

grove_status grove_sort_keys_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                    grove_dtype key_type, const void *d_keys_in, void *d_keys_out,
                                    size_t n, int begin_bit, int end_bit, void *stream)
{
    int mode;
    GROVE_TRY(device_entry(ctx, __func__, 1, d_temp, temp_bytes, &stream, &mode));
    GROVE_TRY(check_sort(ctx, __func__, mode, key_type, d_keys_in, d_keys_out, 0, 0, NULL, NULL, n,
                         begin_bit, end_bit));
    LAUNCH(ctx, grove__cuda_sort(ctx, d_temp, temp_bytes, key_type, d_keys_in, d_keys_out, 0, NULL,
                                 NULL, n, begin_bit, end_bit, stream));
}

grove_status grove_sort_pairs_device(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                     grove_dtype key_type, const void *d_keys_in, void *d_keys_out,
                                     size_t value_size, const void *d_values_in, void *d_values_out,
                                     size_t n, int begin_bit, int end_bit, void *stream)
{
    int mode;
    GROVE_TRY(device_entry(ctx, __func__, 1, d_temp, temp_bytes, &stream, &mode));
    GROVE_TRY(check_sort(ctx, __func__, mode, key_type, d_keys_in, d_keys_out, 1, value_size,
                         d_values_in, d_values_out, n, begin_bit, end_bit));
    if (!d_temp) {
        /* A size query may leave the data pointers NULL, but the launcher reads NULL values as
         * a keys-only sort, whose scratch size differs: size a pairs sort with placeholders
         * (a size query dereferences nothing). */
        static char placeholder[16];
        if (!d_values_in) d_values_in = placeholder;
        if (!d_values_out) d_values_out = placeholder;
    }
    LAUNCH(ctx,
           grove__cuda_sort(ctx, d_temp, temp_bytes, key_type, d_keys_in, d_keys_out, value_size,
                            d_values_in, d_values_out, n, begin_bit, end_bit, stream));
}

grove_status grove_morton2_encode_device(grove_ctx *ctx, const uint32_t *d_x, const uint32_t *d_y,
                                         uint32_t *d_codes, size_t n, void *stream)
{
    int mode;
    GROVE_TRY(device_entry(ctx, __func__, 0, NULL, NULL, &stream, &mode));
    GROVE_TRY(check_morton(ctx, __func__, mode, 2, 0, d_codes, d_x, d_y, NULL, n));
    LAUNCH(ctx, grove__cuda_morton2_encode(ctx, d_x, d_y, d_codes, NULL, n, stream));
}

grove_status grove_morton2_decode_device(grove_ctx *ctx, const uint32_t *d_codes, uint32_t *d_x,
                                         uint32_t *d_y, size_t n, void *stream)
{
    int mode;
    GROVE_TRY(device_entry(ctx, __func__, 0, NULL, NULL, &stream, &mode));
    GROVE_TRY(check_morton(ctx, __func__, mode, 2, 1, d_codes, d_x, d_y, NULL, n));
    LAUNCH(ctx, grove__cuda_morton2_decode(ctx, d_codes, d_x, d_y, n, stream));
}

grove_status grove_morton3_encode_device(grove_ctx *ctx, const uint32_t *d_x, const uint32_t *d_y,
                                         const uint32_t *d_z, uint64_t *d_codes, size_t n,
                                         void *stream)
{
    int mode;
    GROVE_TRY(device_entry(ctx, __func__, 0, NULL, NULL, &stream, &mode));
    GROVE_TRY(check_morton(ctx, __func__, mode, 3, 0, d_codes, d_x, d_y, d_z, n));
    LAUNCH(ctx, grove__cuda_morton3_encode(ctx, d_x, d_y, d_z, d_codes, NULL, n, stream));
}

grove_status grove_morton3_decode_device(grove_ctx *ctx, const uint64_t *d_codes, uint32_t *d_x,
                                         uint32_t *d_y, uint32_t *d_z, size_t n, void *stream)
{
    int mode;
    GROVE_TRY(device_entry(ctx, __func__, 0, NULL, NULL, &stream, &mode));
    GROVE_TRY(check_morton(ctx, __func__, mode, 3, 1, d_codes, d_x, d_y, d_z, n));
    LAUNCH(ctx, grove__cuda_morton3_decode(ctx, d_codes, d_x, d_y, d_z, n, stream));
}
