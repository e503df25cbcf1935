/*
 * bench_prim.c - grove_bench_prim(): the prim benchmarks. A CUDA context goes to
 * bench_prim_cuda.cu; a CPU context times the CPU backend here, through the public host API,
 * with a monotonic clock.
 *
 * Every op's result is checked once, before it is timed, against a plain sequential reference
 * written here (independent of the CPU backend's code); a mismatch is GROVE_ERR_INTERNAL
 * naming the op.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench.h"
#include "bench_cuda.h"
#include "core.h" /* grove__error */
#include "grove/prim.h"
/* grove__error, grove__check_ctx, grove__threads: report failures like the library does. */
#include "core.h"

/* ---- helpers shared with bench_prim_cuda.cu ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double grove__bench_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double grove__bench_median(double *v, int n)
{
    if (n <= 0) return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void grove__bench_floor_row(grove_bench_row *rows, int max_rows, int *nrows, const char *op,
                            const char *impl, size_t n, double ms, double floor_ms, int checked)
{
    if (!grove__bench_add_row(rows, max_rows, nrows, op, impl, n, ms, 0, 0, 0, checked)) return;
    rows[*nrows - 1].vs_floor = (floor_ms > 0 && ms > 0) ? floor_ms / ms : 0;
}

grove_status grove__bench_setup(grove_ctx *ctx, const char *suite, const grove_bench_opts *opts,
                                const size_t *defaults, int ndefaults, size_t *sizes,
                                int *nsizes, grove_ctx **cpu)
{
    grove_ctx_opts co;
    grove_status s;
    *nsizes = 0;
    *cpu = NULL;
    if (opts->n)
        sizes[(*nsizes)++] = opts->n;
    else
        for (int i = 0; i < ndefaults; i++) sizes[(*nsizes)++] = defaults[i];
    grove_ctx_default_opts(&co);
    co.backend = GROVE_BACKEND_CPU;
    s = grove_ctx_create(&co, cpu);
    if (s != GROVE_OK) {
        grove__error(ctx, s, "bench %s: no CPU context: %s", suite,
                     *cpu ? grove_ctx_last_error(*cpu) : "out of memory");
        grove_ctx_destroy(*cpu);
        *cpu = NULL;
    }
    return s;
}

int grove__bench_note(grove_ctx *ctx, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    grove__error(ctx, GROVE_ERR_INTERNAL, "%s", msg);
    return 0;
}

int grove__bench_add_row(grove_bench_row *rows, int max_rows, int *nrows, const char *op,
                         const char *impl, size_t n, double ms, double bytes, double copy_gbps,
                         double vs_cub, int checked)
{
    grove_bench_row *r;
    if (*nrows >= max_rows) return 0;
    r = &rows[(*nrows)++];
    memset(r, 0, sizeof *r);
    snprintf(r->op, sizeof r->op, "%s", op);
    snprintf(r->impl, sizeof r->impl, "%s", impl);
    r->n = n;
    r->ms = ms;
    if (ms > 0) {
        r->items_per_s = (double)n / (ms * 1e-3);
        r->gb_per_s = bytes / (ms * 1e6);
    }
    r->vs_copy = copy_gbps > 0 ? r->gb_per_s / copy_gbps : 0.0;
    r->vs_cub = vs_cub;
    r->checked = checked;
    return 1;
}

/* ---- the CPU benchmarks ---- */

typedef struct cpu_bench {
    grove_ctx *ctx;
    size_t n;
    int warmup, repeats;
    grove_bench_row *rows;
    int max_rows;
    int *nrows;
    double copy_gbps;
    /* A: 12n bytes (points); B, C: 8n; D, E: 4n; scratch: 8n (reference sort); ref: 8n. */
    unsigned char *A, *B, *C, *D, *E, *scratch, *ref;
    uint8_t *flags, *heads;
    size_t count; /* selected / flagged count written by the op */
    double bytes; /* bytes the current op must move */
} cpu_bench;

typedef grove_status (*cpu_fn)(cpu_bench *c);

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static grove_status mismatch(cpu_bench *c, const char *op, const char *what, size_t i, double got,
                             double want)
{
    return grove__error(c->ctx, GROVE_ERR_INTERNAL,
                        "bench prim: %s (n=%zu): %s differs from the reference at index %zu "
                        "(got %.9g, want %.9g)",
                        op, c->n, what, i, got, want);
}

static grove_status count_mismatch(cpu_bench *c, const char *op, const char *what, size_t got,
                                   size_t want)
{
    return grove__error(c->ctx, GROVE_ERR_INTERNAL, "bench prim: %s (n=%zu): %s is %zu, want %zu",
                        op, c->n, what, got, want);
}

static grove_status same_u32(cpu_bench *c, const char *op, const char *what, const uint32_t *got,
                             const uint32_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) return mismatch(c, op, what, i, got[i], want[i]);
    return GROVE_OK;
}

static grove_status same_u64(cpu_bench *c, const char *op, const char *what, const uint64_t *got,
                             const uint64_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) return mismatch(c, op, what, i, (double)got[i], (double)want[i]);
    return GROVE_OK;
}

/* The same hash-based data as the GPU benchmarks (grove__bench_fill_one). */
static void fill(cpu_bench *c, void *p, size_t n, int kind, uint64_t seed)
{
    long long i;
#pragma omp parallel for num_threads(grove__threads(c->ctx)) schedule(static)
    for (i = 0; i < (long long)n; i++) grove__bench_fill_one(p, (uint64_t)i, kind, seed);
}

/* Runs prep (untimed, may be NULL) + op warmup times, then repeats times with the clock around
 * op alone; writes the median. */
static grove_status cpu_time(cpu_bench *c, cpu_fn prep, cpu_fn op, double *ms)
{
    double *t = (double *)malloc((size_t)c->repeats * sizeof *t);
    grove_status st = GROVE_OK;
    if (!t) return grove__error(c->ctx, GROVE_ERR_OUT_OF_MEMORY, "bench prim: timing buffer");
    for (int i = 0; i < c->warmup + c->repeats; i++) {
        double t0;
        if (prep) GROVE_TRY_END(st, prep(c));
        t0 = now_ms();
        GROVE_TRY_END(st, op(c));
        if (i >= c->warmup) t[i - c->warmup] = now_ms() - t0;
    }
    *ms = grove__bench_median(t, c->repeats);
_end:
    free(t);
    return st;
}

/* One op: prep + op once, check, time, one row. */
static grove_status cpu_op(cpu_bench *c, const char *name, cpu_fn prep, cpu_fn op, cpu_fn check)
{
    double ms = 0;
    if (*c->nrows >= c->max_rows) return GROVE_OK;
    if (prep) GROVE_TRY(prep(c));
    GROVE_TRY(op(c));
    GROVE_TRY(check(c));
    GROVE_TRY(cpu_time(c, prep, op, &ms));
    grove__bench_add_row(c->rows, c->max_rows, c->nrows, name, "cpu", c->n, ms, c->bytes,
                         c->copy_gbps, 0.0, 1);
    return GROVE_OK;
}

/* ---- copy ---- */

static grove_status op_copy(cpu_bench *c)
{
    const size_t bytes = 4 * c->n, chunk = (size_t)1 << 20;
    long long k, nchunks = (long long)((bytes + chunk - 1) / chunk);
#pragma omp parallel for num_threads(grove__threads(c->ctx)) schedule(static)
    for (k = 0; k < nchunks; k++) {
        size_t at = (size_t)k * chunk, len = bytes - at < chunk ? bytes - at : chunk;
        memcpy(c->B + at, c->A + at, len);
    }
    return GROVE_OK;
}

static grove_status check_copy(cpu_bench *c)
{
    c->bytes = 8.0 * (double)c->n;
    return same_u32(c, "copy", "the copy", (const uint32_t *)c->B, (const uint32_t *)c->A, c->n);
}

/* ---- scans ---- */

static grove_status op_scan_excl_u32(cpu_bench *c)
{
    return grove_scan(c->ctx, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, c->A, c->B, c->n);
}

static grove_status check_scan_excl_u32(cpu_bench *c)
{
    const uint32_t *in = (const uint32_t *)c->A;
    uint32_t *r = (uint32_t *)c->ref, acc = 0;
    for (size_t i = 0; i < c->n; i++) {
        r[i] = acc;
        acc += in[i];
    }
    c->bytes = 8.0 * (double)c->n;
    return same_u32(c, "scan_excl_u32", "the scan", (const uint32_t *)c->B, r, c->n);
}

static grove_status op_scan_incl_u64(cpu_bench *c)
{
    return grove_scan(c->ctx, GROVE_U64, GROVE_OP_SUM, GROVE_SCAN_INCLUSIVE, c->A, c->B, c->n);
}

static grove_status check_scan_incl_u64(cpu_bench *c)
{
    const uint64_t *in = (const uint64_t *)c->A;
    uint64_t *r = (uint64_t *)c->ref, acc = 0;
    for (size_t i = 0; i < c->n; i++) {
        acc += in[i];
        r[i] = acc;
    }
    c->bytes = 16.0 * (double)c->n;
    return same_u64(c, "scan_incl_u64", "the scan", (const uint64_t *)c->B, r, c->n);
}

static grove_status op_scan_excl_f32(cpu_bench *c)
{
    return grove_scan(c->ctx, GROVE_F32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, c->A, c->B, c->n);
}

/* The f32 result depends on the order of additions: compared with an exact double scan
 * within a relative 1e-3. */
static grove_status check_scan_excl_f32(cpu_bench *c)
{
    const float *in = (const float *)c->A, *got = (const float *)c->B;
    double acc = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (fabs((double)got[i] - acc) > 1e-3 * acc + 1e-3)
            return mismatch(c, "scan_excl_f32", "the scan", i, got[i], acc);
        acc += in[i];
    }
    c->bytes = 8.0 * (double)c->n;
    return GROVE_OK;
}

/* ---- segmented scans ---- */

static grove_status op_segscan_fwd(cpu_bench *c)
{
    return grove_segscan(c->ctx, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, GROVE_SCAN_FORWARD,
                         c->A, c->heads, c->B, c->n);
}

static grove_status op_segscan_bwd(cpu_bench *c)
{
    return grove_segscan(c->ctx, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, GROVE_SCAN_BACKWARD,
                         c->A, c->heads, c->B, c->n);
}

static grove_status check_segscan_fwd(cpu_bench *c)
{
    const uint32_t *in = (const uint32_t *)c->A;
    uint32_t *r = (uint32_t *)c->ref, acc = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (i == 0 || c->heads[i]) acc = 0;
        r[i] = acc;
        acc += in[i];
    }
    c->bytes = 9.0 * (double)c->n;
    return same_u32(c, "segscan_excl_u32_fwd", "the scan", (const uint32_t *)c->B, r, c->n);
}

static grove_status check_segscan_bwd(cpu_bench *c)
{
    const uint32_t *in = (const uint32_t *)c->A;
    uint32_t *r = (uint32_t *)c->ref, acc = 0;
    for (size_t i = c->n; i-- > 0;) {
        /* i is the last element of its segment when i + 1 starts the next one */
        if (i + 1 == c->n || c->heads[i + 1]) acc = 0;
        r[i] = acc;
        acc += in[i];
    }
    c->bytes = 9.0 * (double)c->n;
    return same_u32(c, "segscan_excl_u32_bwd", "the scan", (const uint32_t *)c->B, r, c->n);
}

/* ---- split, segmented split, compaction ---- */

static grove_status op_split(cpu_bench *c)
{
    return grove_split(c->ctx, 4, c->A, c->flags, c->B, NULL, &c->count, c->n);
}

/* Stable split of [lo, hi) into r[lo..]: flagged first, then the others. */
static void split_range(const uint32_t *in, const uint8_t *flags, uint32_t *r, size_t lo, size_t hi)
{
    size_t k = lo;
    for (size_t i = lo; i < hi; i++)
        if (flags[i]) r[k++] = in[i];
    for (size_t i = lo; i < hi; i++)
        if (!flags[i]) r[k++] = in[i];
}

static grove_status check_split(cpu_bench *c)
{
    size_t nf = 0;
    for (size_t i = 0; i < c->n; i++) nf += c->flags[i] != 0;
    if (c->count != nf) return count_mismatch(c, "split_u32", "the flagged count", c->count, nf);
    split_range((const uint32_t *)c->A, c->flags, (uint32_t *)c->ref, 0, c->n);
    c->bytes = 9.0 * (double)c->n;
    return same_u32(c, "split_u32", "the split", (const uint32_t *)c->B, (uint32_t *)c->ref, c->n);
}

static grove_status op_segsplit(cpu_bench *c)
{
    return grove_segsplit(c->ctx, 4, c->A, c->flags, c->heads, c->B, NULL, c->n);
}

static grove_status check_segsplit(cpu_bench *c)
{
    size_t s = 0;
    for (size_t i = 1; i <= c->n; i++)
        if (i == c->n || c->heads[i]) {
            split_range((const uint32_t *)c->A, c->flags, (uint32_t *)c->ref, s, i);
            s = i;
        }
    c->bytes = 10.0 * (double)c->n;
    return same_u32(c, "segsplit_u32", "the split", (const uint32_t *)c->B, (uint32_t *)c->ref,
                    c->n);
}

static grove_status op_compact(cpu_bench *c)
{
    return grove_compact(c->ctx, 4, c->A, c->flags, c->B, &c->count, c->n);
}

static grove_status check_compact(cpu_bench *c)
{
    const uint32_t *in = (const uint32_t *)c->A;
    uint32_t *r = (uint32_t *)c->ref;
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->flags[i]) r[k++] = in[i];
    if (c->count != k) return count_mismatch(c, "compact_u32", "the selected count", c->count, k);
    c->bytes = 5.0 * (double)c->n + 4.0 * (double)k;
    return same_u32(c, "compact_u32", "the output", (const uint32_t *)c->B, r, k);
}

/* ---- reduction, bounding box ---- */

static grove_status op_reduce(cpu_bench *c)
{
    return grove_reduce(c->ctx, GROVE_U32, GROVE_OP_SUM, c->A, c->B, c->n);
}

static grove_status check_reduce(cpu_bench *c)
{
    const uint32_t *in = (const uint32_t *)c->A;
    uint32_t acc = 0;
    for (size_t i = 0; i < c->n; i++) acc += in[i];
    c->bytes = 4.0 * (double)c->n;
    return same_u32(c, "reduce_sum_u32", "the sum", (const uint32_t *)c->B, &acc, 1);
}

static grove_status op_bbox(cpu_bench *c)
{
    float *box = (float *)c->B;
    return grove_bbox(c->ctx, 3, (const float *)c->A, c->n, box, box + 3);
}

static grove_status check_bbox(cpu_bench *c)
{
    const float *p = (const float *)c->A, *got = (const float *)c->B;
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t i = 0; i < c->n; i++)
        for (int d = 0; d < 3; d++) {
            lo[d] = fminf(lo[d], p[3 * i + d]);
            hi[d] = fmaxf(hi[d], p[3 * i + d]);
        }
    for (int d = 0; d < 3; d++) {
        if (got[d] != lo[d]) return mismatch(c, "bbox3", "lo", (size_t)d, got[d], lo[d]);
        if (got[3 + d] != hi[d]) return mismatch(c, "bbox3", "hi", (size_t)d, got[3 + d], hi[d]);
    }
    c->bytes = 12.0 * (double)c->n + 24.0;
    return GROVE_OK;
}

/* ---- radix sort: in place, so every run starts from a fresh copy of the input ---- */

static grove_status prep_sort_u32(cpu_bench *c)
{
    memcpy(c->B, c->A, 4 * c->n);
    memcpy(c->E, c->D, 4 * c->n);
    return GROVE_OK;
}

static grove_status prep_sort_u64(cpu_bench *c)
{
    memcpy(c->B, c->A, 8 * c->n);
    return GROVE_OK;
}

static grove_status op_sort_keys_u32(cpu_bench *c)
{
    return grove_sort_keys(c->ctx, GROVE_U32, c->B, c->n, 0, 0);
}

static grove_status op_sort_pairs_u32(cpu_bench *c)
{
    return grove_sort_pairs(c->ctx, GROVE_U32, c->B, 4, c->E, c->n, 0, 0);
}

static grove_status op_sort_keys_u64(cpu_bench *c)
{
    return grove_sort_keys(c->ctx, GROVE_U64, c->B, c->n, 0, 0);
}

/* Sequential stable LSD sort by 8-bit digits (keys widened to u64, optional u32 values),
 * result in keys/vals; ks/vs are scratch of the same sizes. */
static void ref_lsd(uint64_t *keys, uint64_t *ks, uint32_t *vals, uint32_t *vs, size_t n,
                    int key_bits)
{
    for (int shift = 0; shift < key_bits; shift += 8) {
        size_t cnt[257] = {0};
        for (size_t i = 0; i < n; i++) cnt[((keys[i] >> shift) & 0xFF) + 1]++;
        for (int d = 0; d < 256; d++) cnt[d + 1] += cnt[d];
        for (size_t i = 0; i < n; i++) {
            size_t at = cnt[(keys[i] >> shift) & 0xFF]++;
            ks[at] = keys[i];
            if (vals) vs[at] = vals[i];
        }
        memcpy(keys, ks, n * sizeof *keys);
        if (vals) memcpy(vals, vs, n * sizeof *vals);
    }
}

static grove_status check_sort_u32(cpu_bench *c, const char *op, int pairs)
{
    const uint32_t *in = (const uint32_t *)c->A, *got = (const uint32_t *)c->B;
    uint64_t *k = (uint64_t *)c->ref, *ks = (uint64_t *)c->scratch;
    /* C (8n bytes) holds the reference values and their scratch. */
    uint32_t *v = (uint32_t *)c->C, *vs = v + c->n;
    for (size_t i = 0; i < c->n; i++) k[i] = in[i];
    if (pairs) memcpy(v, c->D, 4 * c->n);
    ref_lsd(k, ks, pairs ? v : NULL, vs, c->n, 32);
    for (size_t i = 0; i < c->n; i++)
        if (got[i] != k[i]) return mismatch(c, op, "the keys", i, got[i], (double)k[i]);
    c->bytes = (pairs ? 16.0 : 8.0) * (double)c->n;
    if (pairs) return same_u32(c, op, "the values", (const uint32_t *)c->E, v, c->n);
    return GROVE_OK;
}

static grove_status check_sort_keys_u32(cpu_bench *c)
{
    return check_sort_u32(c, "sort_keys_u32", 0);
}

static grove_status check_sort_pairs_u32(cpu_bench *c)
{
    return check_sort_u32(c, "sort_pairs_u32", 1);
}

static grove_status check_sort_keys_u64(cpu_bench *c)
{
    uint64_t *k = (uint64_t *)c->ref;
    memcpy(k, c->A, 8 * c->n);
    ref_lsd(k, (uint64_t *)c->scratch, NULL, NULL, c->n, 64);
    c->bytes = 16.0 * (double)c->n;
    return same_u64(c, "sort_keys_u64", "the keys", (const uint64_t *)c->B, k, c->n);
}

/* ---- Morton codes: x, y, z in D, E and the first n words of C ---- */

static grove_status op_morton3(cpu_bench *c)
{
    return grove_morton3_encode(c->ctx, (const uint32_t *)c->D, (const uint32_t *)c->E,
                                (const uint32_t *)c->C, (uint64_t *)c->B, c->n);
}

/* Bit by bit: an oracle independent of prim.h's magic masks. */
static grove_status check_morton3(cpu_bench *c)
{
    const uint32_t *x = (const uint32_t *)c->D, *y = (const uint32_t *)c->E,
                   *z = (const uint32_t *)c->C;
    const uint64_t *got = (const uint64_t *)c->B;
    for (size_t i = 0; i < c->n; i++) {
        uint64_t want = 0;
        for (int b = 0; b < 21; b++)
            want |= (uint64_t)((x[i] >> b) & 1) << (3 * b) |
                    (uint64_t)((y[i] >> b) & 1) << (3 * b + 1) |
                    (uint64_t)((z[i] >> b) & 1) << (3 * b + 2);
        if (got[i] != want)
            return mismatch(c, "morton3_encode", "the code", i, (double)got[i], (double)want);
    }
    c->bytes = 20.0 * (double)c->n;
    return GROVE_OK;
}

static grove_status bench_cpu(cpu_bench *c)
{
    const size_t n = c->n;
    c->bytes = 0;
    fill(c, c->A, n, GROVE__FILL_U32, 1);
    GROVE_TRY(cpu_op(c, "copy", NULL, op_copy, check_copy));
    if (*c->nrows > 0) {
        /* vs_copy of the other rows is relative to this row */
        grove_bench_row *r = &c->rows[*c->nrows - 1];
        c->copy_gbps = r->gb_per_s;
        r->vs_copy = 1.0;
    }
    fill(c, c->flags, n, GROVE__FILL_FLAGS, 2);
    fill(c, c->heads, n, GROVE__FILL_HEADS, 3);

    fill(c, c->A, n, GROVE__FILL_U32, 10);
    GROVE_TRY(cpu_op(c, "scan_excl_u32", NULL, op_scan_excl_u32, check_scan_excl_u32));
    fill(c, c->A, n, GROVE__FILL_U64, 11);
    GROVE_TRY(cpu_op(c, "scan_incl_u64", NULL, op_scan_incl_u64, check_scan_incl_u64));
    fill(c, c->A, n, GROVE__FILL_UNIT_F32, 12);
    GROVE_TRY(cpu_op(c, "scan_excl_f32", NULL, op_scan_excl_f32, check_scan_excl_f32));

    fill(c, c->A, n, GROVE__FILL_U32, 13);
    GROVE_TRY(cpu_op(c, "segscan_excl_u32_fwd", NULL, op_segscan_fwd, check_segscan_fwd));
    GROVE_TRY(cpu_op(c, "segscan_excl_u32_bwd", NULL, op_segscan_bwd, check_segscan_bwd));
    GROVE_TRY(cpu_op(c, "split_u32", NULL, op_split, check_split));
    GROVE_TRY(cpu_op(c, "segsplit_u32", NULL, op_segsplit, check_segsplit));
    GROVE_TRY(cpu_op(c, "compact_u32", NULL, op_compact, check_compact));
    GROVE_TRY(cpu_op(c, "reduce_sum_u32", NULL, op_reduce, check_reduce));

    fill(c, c->A, 3 * n, GROVE__FILL_COORD_F32, 14);
    GROVE_TRY(cpu_op(c, "bbox3", NULL, op_bbox, check_bbox));

    fill(c, c->A, n, GROVE__FILL_U32, 15);
    fill(c, c->D, n, GROVE__FILL_U32, 16);
    GROVE_TRY(cpu_op(c, "sort_keys_u32", prep_sort_u32, op_sort_keys_u32, check_sort_keys_u32));
    GROVE_TRY(cpu_op(c, "sort_pairs_u32", prep_sort_u32, op_sort_pairs_u32, check_sort_pairs_u32));
    fill(c, c->A, n, GROVE__FILL_U64, 17);
    GROVE_TRY(cpu_op(c, "sort_keys_u64", prep_sort_u64, op_sort_keys_u64, check_sort_keys_u64));

    fill(c, c->D, n, GROVE__FILL_BITS21, 18);
    fill(c, c->E, n, GROVE__FILL_BITS21, 19);
    fill(c, c->C, n, GROVE__FILL_BITS21, 20);
    GROVE_TRY(cpu_op(c, "morton3_encode", NULL, op_morton3, check_morton3));
    return GROVE_OK;
}

static grove_status run_cpu(grove_ctx *ctx, const grove_bench_opts *opts, grove_bench_row *rows,
                            int max_rows, int *nrows)
{
    cpu_bench c;
    grove_status st = GROVE_OK;
    size_t n;
    memset(&c, 0, sizeof c);
    n = opts && opts->n ? opts->n : (size_t)1 << 24;
    c.ctx = ctx;
    c.n = n;
    /* The CPU is timed with fewer repeats than the GPU: a quarter, at least 3. */
    c.repeats = opts && opts->repeats > 0 ? opts->repeats / 4 : 5;
    if (c.repeats < 3) c.repeats = 3;
    c.warmup = opts && opts->warmup == 0 ? 0 : 1;
    c.rows = rows;
    c.max_rows = max_rows;
    c.nrows = nrows;
    c.A = (unsigned char *)malloc(12 * n + 1);
    c.B = (unsigned char *)malloc(8 * n + 1);
    c.C = (unsigned char *)malloc(8 * n + 1);
    c.D = (unsigned char *)malloc(4 * n + 1);
    c.E = (unsigned char *)malloc(4 * n + 1);
    c.scratch = (unsigned char *)malloc(8 * n + 1);
    c.ref = (unsigned char *)malloc(8 * n + 1);
    c.flags = (uint8_t *)malloc(n + 1);
    c.heads = (uint8_t *)malloc(n + 1);
    if (!c.A || !c.B || !c.C || !c.D || !c.E || !c.scratch || !c.ref || !c.flags || !c.heads)
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "bench prim: could not allocate %.1f GiB of host memory for n=%zu",
                          54.0 * (double)n / 1073741824.0, n);
    else
        st = bench_cpu(&c);
    free(c.A);
    free(c.B);
    free(c.C);
    free(c.D);
    free(c.E);
    free(c.scratch);
    free(c.ref);
    free(c.flags);
    free(c.heads);
    return st;
}

grove_status grove_bench_prim(grove_ctx *ctx, const grove_bench_opts *opts, grove_bench_row *rows,
                              int max_rows, int *nrows)
{
    GROVE_TRY(grove__check_ctx(ctx));
    if (!nrows || max_rows < 0 || (!rows && max_rows > 0))
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "grove_bench_prim: rows and nrows must not be NULL, max_rows >= 0");
    *nrows = 0;
    if (opts && opts->n > GROVE_PRIM_MAX_N)
        return grove__error(ctx, GROVE_ERR_LIMIT,
                            "grove_bench_prim: n=%zu is above GROVE_PRIM_MAX_N (%zu)", opts->n,
                            (size_t)GROVE_PRIM_MAX_N);
    grove_ctx_clear_error(ctx);
    if (grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA) {
#ifdef GROVE_HAVE_CUDA
        return grove__bench_prim_cuda(ctx, opts, rows, max_rows, nrows);
#else
        return grove__error(ctx, GROVE_ERR_UNSUPPORTED,
                            "grove_bench_prim: this build has no CUDA support");
#endif
    }
    return run_cpu(ctx, opts, rows, max_rows, nrows);
}
