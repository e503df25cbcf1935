/*
 * prim_cpu.c - the CPU backend of the prim module (C11 + OpenMP).
 *
 * Every parallel algorithm here cuts the input into the same contiguous chunks (one per
 * thread), summarises each chunk in parallel, combines the summaries sequentially (there are
 * at most MAX_CHUNKS of them) and then finishes every chunk in parallel. Each result is a
 * function of the input alone: integer and MAX/MIN results do not depend on the number of
 * threads, f32 SUM only through the order of its additions.
 */
#include "prim_cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CHUNKS 256
/* Below this many elements one chunk: starting a parallel region costs more than it saves. */
#define SERIAL_N ((size_t)1 << 15)

static size_t chunk_count(const grove_ctx *ctx, size_t n)
{
    size_t k = (size_t)grove__threads(ctx);
    if (k < 1 || n < SERIAL_N) return 1;
    return k > MAX_CHUNKS ? MAX_CHUNKS : k;
}

/* First index of chunk c of k over n elements; chunk c is [CHUNK_LO(c), CHUNK_LO(c + 1)).
 * n <= 2^32 and c <= 256, so the product cannot overflow. */
#define CHUNK_LO(c) (n * (size_t)(c) / k)

/* A segment starts at element 0 and at every nonzero head flag; heads == NULL: one segment. */
#define SEG_START(i) ((i) == 0 || (heads && heads[i]))
#define SEG_END(i) ((i) + 1 == n || (heads && heads[(i) + 1]))

/* ---- operators ----
 * NaN is the true identity of NaN-ignoring max/min (fmaxf(NaN, x) == x for every x), so the
 * folds start from NaN and a result is NaN exactly where every value it covers is NaN; the
 * public identity (-INFINITY / +INFINITY) is written only where a result covers nothing.
 * Signed zeros are ordered (-0 < +0): fmaxf may return either zero, which would make the
 * result depend on the order of combination and so on the thread count. For the same reason
 * f32 SUM folds from -0.0f, the exact additive identity (-0 + x == x for every x). */
static inline float fmax_ord(float a, float b)
{
    if (a > b) return a;
    if (b > a) return b;
    if (a != a) return b;
    if (b != b) return a;
    return signbit(a) ? b : a;
}

static inline float fmin_ord(float a, float b)
{
    if (a < b) return a;
    if (b < a) return b;
    if (a != a) return b;
    if (b != b) return a;
    return signbit(a) ? a : b;
}

#define OP_SUM(a, b) ((a) + (b))
#define OP_UMAX(a, b) ((a) > (b) ? (a) : (b))
#define OP_UMIN(a, b) ((a) < (b) ? (a) : (b))
#define OP_FMAX(a, b) fmax_ord((a), (b))
#define OP_FMIN(a, b) fmin_ord((a), (b))

/* ---- scans and reductions, one instance per (type, operator) ----
 * ID is the fold's identity, PUB the identity the API promises for empty results.
 *
 * Forward scan summary of a chunk: part = fold from its last segment start (or from its first
 * element if it has none) to its end, cut = it has a segment start. The carry into chunk c + 1 is
 * part[c] when chunk c has a start, else carry[c] op part[c].
 *
 * Backward scan summary of a chunk: part = fold of its elements before its first segment start
 * after its first element, open = there is no such start (the segment of its first element
 * runs on past its end). The carry into chunk c from the right is the identity when chunk c + 1
 * begins a segment, else part[c + 1], folded with carry[c + 1] when chunk c + 1 is open. */
/* clang-format cannot lay out _Pragma inside a macro. */
/* clang-format off */
#define DEFINE_SCAN(NAME, T, OP, ID, PUB)                                                          \
    /* part[c] = fold of chunk c, for reductions and unsegmented scans */                          \
    static void NAME##_chunk_folds(const T *in, T *part, size_t n, size_t k)                       \
    {                                                                                              \
        _Pragma("omp parallel for num_threads((int)k) schedule(static, 1) if (k > 1)")             \
        for (size_t c = 0; c < k; c++) {                                                           \
            T a = ID;                                                                              \
            for (size_t i = CHUNK_LO(c); i < CHUNK_LO(c + 1); i++) a = OP(a, in[i]);               \
            part[c] = a;                                                                           \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static void NAME##_fwd(const void *in_, const uint8_t *heads, void *out_, size_t n, int incl,  \
                           size_t k)                                                               \
    {                                                                                              \
        const T *in = (const T *)in_;                                                              \
        T *out = (T *)out_;                                                                        \
        T part[MAX_CHUNKS], carry[MAX_CHUNKS];                                                     \
        unsigned char cut[MAX_CHUNKS] = {0};                                                       \
        if (k > 1 && !heads) {                                                                     \
            NAME##_chunk_folds(in, part, n, k);                                                    \
        } else if (k > 1) {                                                                        \
            /* from the chunk's end back to its last segment start: often only a few elements */   \
            _Pragma("omp parallel for num_threads((int)k) schedule(static, 1)")                    \
            for (size_t c = 0; c < k; c++) {                                                       \
                size_t a = CHUNK_LO(c), i = CHUNK_LO(c + 1);                                       \
                T acc = ID;                                                                        \
                while (i > a) {                                                                    \
                    i--;                                                                           \
                    acc = OP(in[i], acc);                                                          \
                    if (SEG_START(i)) {                                                            \
                        cut[c] = 1;                                                                \
                        break;                                                                     \
                    }                                                                              \
                }                                                                                  \
                part[c] = acc;                                                                     \
            }                                                                                      \
        }                                                                                          \
        carry[0] = ID;                                                                             \
        for (size_t c = 1; c < k; c++)                                                             \
            carry[c] = cut[c - 1] ? part[c - 1] : OP(carry[c - 1], part[c - 1]);                   \
        _Pragma("omp parallel for num_threads((int)k) schedule(static, 1) if (k > 1)")             \
        for (size_t c = 0; c < k; c++) {                                                           \
            T acc = carry[c];                                                                      \
            for (size_t i = CHUNK_LO(c); i < CHUNK_LO(c + 1); i++) {                               \
                T x = in[i];                                                                       \
                int s = SEG_START(i);                                                              \
                if (s) acc = ID;                                                                   \
                if (!incl) out[i] = s ? PUB : acc;                                                 \
                acc = OP(acc, x);                                                                  \
                if (incl) out[i] = acc;                                                            \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static void NAME##_bwd(const void *in_, const uint8_t *heads, void *out_, size_t n, int incl,  \
                           size_t k)                                                               \
    {                                                                                              \
        const T *in = (const T *)in_;                                                              \
        T *out = (T *)out_;                                                                        \
        T part[MAX_CHUNKS], carry[MAX_CHUNKS];                                                     \
        unsigned char open[MAX_CHUNKS] = {0};                                                      \
        if (k > 1) {                                                                               \
            _Pragma("omp parallel for num_threads((int)k) schedule(static, 1)")                    \
            for (size_t c = 0; c < k; c++) {                                                       \
                size_t a = CHUNK_LO(c), b = CHUNK_LO(c + 1), i = a;                                \
                T acc = ID;                                                                        \
                for (; i < b; i++) {                                                               \
                    if (i > a && SEG_START(i)) break;                                              \
                    acc = OP(acc, in[i]);                                                          \
                }                                                                                  \
                part[c] = acc;                                                                     \
                open[c] = (i == b);                                                                \
            }                                                                                      \
        }                                                                                          \
        carry[k - 1] = ID;                                                                         \
        for (size_t c = k - 1; c-- > 0;) {                                                         \
            if (SEG_START(CHUNK_LO(c + 1)))                                                        \
                carry[c] = ID;                                                                     \
            else                                                                                   \
                carry[c] = open[c + 1] ? OP(part[c + 1], carry[c + 1]) : part[c + 1];              \
        }                                                                                          \
        _Pragma("omp parallel for num_threads((int)k) schedule(static, 1) if (k > 1)")             \
        for (size_t c = 0; c < k; c++) {                                                           \
            T acc = carry[c];                                                                      \
            for (size_t i = CHUNK_LO(c + 1); i-- > CHUNK_LO(c);) {                                 \
                T x = in[i];                                                                       \
                int e = SEG_END(i);                                                                \
                if (e) acc = ID;                                                                   \
                if (!incl) out[i] = e ? PUB : acc;                                                 \
                acc = OP(x, acc);                                                                  \
                if (incl) out[i] = acc;                                                            \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static void NAME##_reduce(const void *in_, void *out, size_t n, size_t k)                      \
    {                                                                                              \
        const T *in = (const T *)in_;                                                              \
        T part[MAX_CHUNKS], acc = ID;                                                              \
        NAME##_chunk_folds(in, part, n, k);                                                        \
        for (size_t c = 0; c < k; c++) acc = OP(acc, part[c]);                                     \
        *(T *)out = n ? acc : PUB;                                                                 \
    }
/* clang-format on */

DEFINE_SCAN(u32_sum, uint32_t, OP_SUM, 0u, 0u)
DEFINE_SCAN(u32_max, uint32_t, OP_UMAX, 0u, 0u)
DEFINE_SCAN(u32_min, uint32_t, OP_UMIN, UINT32_MAX, UINT32_MAX)
DEFINE_SCAN(u64_sum, uint64_t, OP_SUM, 0u, 0u)
DEFINE_SCAN(u64_max, uint64_t, OP_UMAX, 0u, 0u)
DEFINE_SCAN(u64_min, uint64_t, OP_UMIN, UINT64_MAX, UINT64_MAX)
DEFINE_SCAN(f32_sum, float, OP_SUM, -0.0f, 0.0f)
DEFINE_SCAN(f32_max, float, OP_FMAX, NAN, -INFINITY)
DEFINE_SCAN(f32_min, float, OP_FMIN, NAN, INFINITY)

typedef void (*scan_fn)(const void *in, const uint8_t *heads, void *out, size_t n, int incl,
                        size_t k);
typedef void (*reduce_fn)(const void *in, void *out, size_t n, size_t k);

/* Indexed by [grove_dtype][grove_op]; prim.c has checked both. */
static const scan_fn SCAN_FWD[3][3] = {{u32_sum_fwd, u32_max_fwd, u32_min_fwd},
                                       {u64_sum_fwd, u64_max_fwd, u64_min_fwd},
                                       {f32_sum_fwd, f32_max_fwd, f32_min_fwd}};
static const scan_fn SCAN_BWD[3][3] = {{u32_sum_bwd, u32_max_bwd, u32_min_bwd},
                                       {u64_sum_bwd, u64_max_bwd, u64_min_bwd},
                                       {f32_sum_bwd, f32_max_bwd, f32_min_bwd}};
static const reduce_fn REDUCE[3][3] = {{u32_sum_reduce, u32_max_reduce, u32_min_reduce},
                                       {u64_sum_reduce, u64_max_reduce, u64_min_reduce},
                                       {f32_sum_reduce, f32_max_reduce, f32_min_reduce}};

grove_status grove__cpu_scan(grove_ctx *ctx, grove_dtype t, grove_op op, grove_scan_kind kind,
                             const void *in, void *out, size_t n)
{
    if (n) SCAN_FWD[t][op](in, NULL, out, n, kind == GROVE_SCAN_INCLUSIVE, chunk_count(ctx, n));
    return GROVE_OK;
}

grove_status grove__cpu_segscan(grove_ctx *ctx, grove_dtype t, grove_op op, grove_scan_kind kind,
                                grove_scan_dir dir, const void *in, const uint8_t *heads, void *out,
                                size_t n)
{
    const scan_fn *table = dir == GROVE_SCAN_BACKWARD ? SCAN_BWD[t] : SCAN_FWD[t];
    if (n) table[op](in, heads, out, n, kind == GROVE_SCAN_INCLUSIVE, chunk_count(ctx, n));
    return GROVE_OK;
}

grove_status grove__cpu_reduce(grove_ctx *ctx, grove_dtype t, grove_op op, const void *in,
                               void *out, size_t n)
{
    REDUCE[t][op](in, out, n, chunk_count(ctx, n));
    return GROVE_OK;
}

grove_status grove__cpu_bbox(grove_ctx *ctx, int dims, const float *points, size_t n, float *lo,
                             float *hi)
{
    size_t k = chunk_count(ctx, n);
    float clo[MAX_CHUNKS][3], chi[MAX_CHUNKS][3];
#pragma omp parallel for num_threads((int)k) schedule(static, 1) if (k > 1)
    for (size_t c = 0; c < k; c++) {
        float l[3] = {INFINITY, INFINITY, INFINITY}, h[3] = {-INFINITY, -INFINITY, -INFINITY};
        for (size_t i = CHUNK_LO(c); i < CHUNK_LO(c + 1); i++) {
            const float *p = points + i * (size_t)dims;
            for (int d = 0; d < dims; d++) {
                l[d] = fmin_ord(l[d], p[d]);
                h[d] = fmax_ord(h[d], p[d]);
            }
        }
        memcpy(clo[c], l, sizeof l);
        memcpy(chi[c], h, sizeof h);
    }
    for (int d = 0; d < dims; d++) {
        lo[d] = INFINITY;
        hi[d] = -INFINITY;
        for (size_t c = 0; c < k; c++) {
            lo[d] = fmin_ord(lo[d], clo[c][d]);
            hi[d] = fmax_ord(hi[d], chi[c][d]);
        }
    }
    return GROVE_OK;
}

/* ---- split, segmented split, compaction ---- */

/* Element copies go through memcpy of a constant size: the payload may be any 4- or 8-byte
 * type, and the compiler turns each copy into one move. */
static inline void put(void *out, size_t d, const void *in, size_t i, size_t es)
{
    if (es == 4)
        memcpy((char *)out + d * 4, (const char *)in + i * 4, 4);
    else
        memcpy((char *)out + d * 8, (const char *)in + i * 8, 8);
}

/* Writes to base[c] the number of flagged elements before chunk c; returns the total. */
static size_t flag_offsets(const uint8_t *flags, size_t n, size_t k, size_t *base)
{
    size_t total = 0;
#pragma omp parallel for num_threads((int)k) schedule(static, 1) if (k > 1)
    for (size_t c = 0; c < k; c++) {
        size_t cnt = 0;
        for (size_t i = CHUNK_LO(c); i < CHUNK_LO(c + 1); i++) cnt += flags[i] != 0;
        base[c] = cnt;
    }
    for (size_t c = 0; c < k; c++) {
        size_t cnt = base[c];
        base[c] = total;
        total += cnt;
    }
    return total;
}

grove_status grove__cpu_split(grove_ctx *ctx, size_t elem_size, const void *in,
                              const uint8_t *flags, void *out, uint32_t *dest, size_t *num_flagged,
                              size_t n)
{
    size_t k = chunk_count(ctx, n), base[MAX_CHUNKS];
    size_t total = flag_offsets(flags, n, k, base);
#pragma omp parallel for num_threads((int)k) schedule(static, 1) if (k > 1)
    for (size_t c = 0; c < k; c++) {
        size_t a = CHUNK_LO(c), f = base[c], u = total + (a - base[c]);
        for (size_t i = a; i < CHUNK_LO(c + 1); i++) {
            size_t d = flags[i] ? f++ : u++;
            put(out, d, in, i, elem_size);
            if (dest) dest[i] = (uint32_t)d;
        }
    }
    if (num_flagged) *num_flagged = total;
    return GROVE_OK;
}

grove_status grove__cpu_compact(grove_ctx *ctx, size_t elem_size, const void *in,
                                const uint8_t *flags, void *out, size_t *num_selected, size_t n)
{
    size_t k = chunk_count(ctx, n), base[MAX_CHUNKS];
    size_t total = flag_offsets(flags, n, k, base);
#pragma omp parallel for num_threads((int)k) schedule(static, 1) if (k > 1)
    for (size_t c = 0; c < k; c++) {
        size_t d = base[c];
        for (size_t i = CHUNK_LO(c); i < CHUNK_LO(c + 1); i++)
            if (flags[i]) put(out, d++, in, i, elem_size);
    }
    *num_selected = total;
    return GROVE_OK;
}

/* Moves [p, q), part of the segment that starts at s and holds `total` flagged elements of
 * which `before` lie in [s, p), to its split positions. */
static void segsplit_piece(size_t es, const void *in, const uint8_t *flags, void *out,
                           uint32_t *dest, size_t s, size_t before, size_t total, size_t p,
                           size_t q)
{
    for (size_t i = p; i < q; i++) {
        size_t d = flags[i] ? s + before++ : s + total + (i - s - before);
        put(out, d, in, i, es);
        if (dest) dest[i] = (uint32_t)d;
    }
}

/* Each chunk is cut at its segment starts. Pieces that lie inside one chunk are finished by
 * that chunk alone; a segment that crosses chunk boundaries needs its start, its total
 * number of flagged elements and the number before each chunk it enters, which a sequential
 * pass over the chunk summaries provides. */
grove_status grove__cpu_segsplit(grove_ctx *ctx, size_t elem_size, const void *in,
                                 const uint8_t *flags, const uint8_t *heads, void *out,
                                 uint32_t *dest, size_t n)
{
    size_t k = chunk_count(ctx, n);
    size_t first[MAX_CHUNKS], last[MAX_CHUNKS], lead[MAX_CHUNKS], tail[MAX_CHUNKS];
    size_t in_start[MAX_CHUNKS], in_before[MAX_CHUNKS], in_total[MAX_CHUNKS];
    size_t cur_start = 0, cur_count = 0;
    if (n == 0) return GROVE_OK;

        /* first/last segment start in the chunk (CHUNK_LO(c + 1) if none), flagged elements before
         * the first start (lead) and from the last start on (tail). */
#pragma omp parallel for num_threads((int)k) schedule(static, 1) if (k > 1)
    for (size_t c = 0; c < k; c++) {
        size_t b = CHUNK_LO(c + 1), f = b, l = b, nl = 0, nt = 0;
        for (size_t i = CHUNK_LO(c); i < b; i++) {
            if (SEG_START(i)) {
                if (f == b) f = i;
                l = i;
                nt = 0;
            }
            if (flags[i]) {
                if (f == b)
                    nl++;
                else
                    nt++;
            }
        }
        first[c] = f;
        last[c] = l;
        lead[c] = nl;
        tail[c] = nt;
    }
    /* The segment running into each chunk: where it starts, how many flagged before. */
    for (size_t c = 0; c < k; c++) {
        in_start[c] = cur_start;
        in_before[c] = cur_count;
        if (first[c] < CHUNK_LO(c + 1)) {
            cur_start = last[c];
            cur_count = tail[c];
        } else {
            cur_count += lead[c];
        }
    }
    /* Its total: it ends in chunk c if c has a start or the next chunk begins a segment. */
    for (size_t c = k; c-- > 0;) {
        size_t b = CHUNK_LO(c + 1);
        if (first[c] == CHUNK_LO(c)) continue;
        if (first[c] < b || b == n || heads[b])
            in_total[c] = in_before[c] + lead[c];
        else
            in_total[c] = in_total[c + 1];
    }

#pragma omp parallel for num_threads((int)k) schedule(static, 1) if (k > 1)
    for (size_t c = 0; c < k; c++) {
        size_t a = CHUNK_LO(c), b = CHUNK_LO(c + 1), i = first[c];
        if (i != a)
            segsplit_piece(elem_size, in, flags, out, dest, in_start[c], in_before[c], in_total[c],
                           a, i);
        while (i < b) {
            size_t j = i + 1, total = 0;
            while (j < b && !heads[j]) j++;
            if (j == b && b < n && !heads[b]) {
                total = in_total[c + 1];
            } else {
                for (size_t m = i; m < j; m++) total += flags[m] != 0;
            }
            segsplit_piece(elem_size, in, flags, out, dest, i, 0, total, i, j);
            i = j;
        }
    }
    return GROVE_OK;
}

/* ---- radix sort ----
 * LSD with 8-bit digits. Per pass, each chunk counts its digits; the offsets are laid out
 * digit-major then chunk-major, so every chunk scatters its elements in order into a range
 * that follows those of earlier chunks: the pass is stable, and the result is the unique
 * stable order whatever the thread count. A pass whose digit is the same for every key would
 * move nothing and is skipped. */
#define RADIX 256

/* clang-format off */
#define DEFINE_RADIX_PASS(NAME, KT, VT)                                                            \
    static int NAME(const void *sk_, void *dk_, const void *sv_, void *dv_, size_t n, size_t k,    \
                    int shift, unsigned mask, size_t *hist)                                        \
    {                                                                                              \
        const KT *sk = (const KT *)sk_;                                                            \
        KT *dk = (KT *)dk_;                                                                        \
        const char *sv = (const char *)sv_;                                                        \
        char *dv = (char *)dv_;                                                                    \
        size_t sum = 0;                                                                            \
        _Pragma("omp parallel for num_threads((int)k) schedule(static, 1) if (k > 1)")             \
        for (size_t c = 0; c < k; c++) {                                                           \
            size_t *h = hist + c * RADIX;                                                          \
            memset(h, 0, RADIX * sizeof *h);                                                       \
            for (size_t i = CHUNK_LO(c); i < CHUNK_LO(c + 1); i++) h[(sk[i] >> shift) & mask]++;   \
        }                                                                                          \
        for (size_t d = 0; d < RADIX; d++) {                                                       \
            size_t t = 0;                                                                          \
            for (size_t c = 0; c < k; c++) t += hist[c * RADIX + d];                               \
            if (t == n) return 0;                                                                  \
            if (t) break;                                                                          \
        }                                                                                          \
        for (size_t d = 0; d < RADIX; d++)                                                         \
            for (size_t c = 0; c < k; c++) {                                                       \
                size_t t = hist[c * RADIX + d];                                                    \
                hist[c * RADIX + d] = sum;                                                         \
                sum += t;                                                                          \
            }                                                                                      \
        _Pragma("omp parallel for num_threads((int)k) schedule(static, 1) if (k > 1)")             \
        for (size_t c = 0; c < k; c++) {                                                           \
            size_t *h = hist + c * RADIX;                                                          \
            for (size_t i = CHUNK_LO(c); i < CHUNK_LO(c + 1); i++) {                               \
                size_t p = h[(sk[i] >> shift) & mask]++;                                           \
                dk[p] = sk[i];                                                                     \
                if (sv) memcpy(dv + p * sizeof(VT), sv + i * sizeof(VT), sizeof(VT));              \
            }                                                                                      \
        }                                                                                          \
        return 1;                                                                                  \
    }
/* clang-format on */

DEFINE_RADIX_PASS(radix_k32_v32, uint32_t, uint32_t)
DEFINE_RADIX_PASS(radix_k32_v64, uint32_t, uint64_t)
DEFINE_RADIX_PASS(radix_k64_v32, uint64_t, uint32_t)
DEFINE_RADIX_PASS(radix_k64_v64, uint64_t, uint64_t)

grove_status grove__cpu_sort(grove_ctx *ctx, grove_dtype key_type, void *keys, size_t value_size,
                             void *values, size_t n, int begin_bit, int end_bit)
{
    size_t ks = key_type == GROVE_U64 ? 8 : 4, vs = values ? value_size : 0;
    size_t k = chunk_count(ctx, n);
    void *src_k = keys, *src_v = values, *dst_k, *dst_v = NULL;
    size_t *hist;
    if (end_bit == 0) end_bit = (int)ks * 8;
    if (n < 2 || begin_bit >= end_bit) return GROVE_OK;

    dst_k = malloc(n * ks);
    if (vs) dst_v = malloc(n * vs);
    hist = (size_t *)malloc(k * RADIX * sizeof *hist);
    if (!dst_k || (vs && !dst_v) || !hist) {
        free(dst_k);
        free(dst_v);
        free(hist);
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "radix sort: cannot allocate %zu bytes of scratch memory for %zu keys",
                            n * (ks + vs) + k * RADIX * sizeof *hist, n);
    }
    for (int shift = begin_bit; shift < end_bit; shift += 8) {
        int bits = end_bit - shift < 8 ? end_bit - shift : 8;
        unsigned mask = (1u << bits) - 1u;
        int moved;
        if (ks == 4)
            moved = vs == 8 ? radix_k32_v64(src_k, dst_k, src_v, dst_v, n, k, shift, mask, hist)
                            : radix_k32_v32(src_k, dst_k, src_v, dst_v, n, k, shift, mask, hist);
        else
            moved = vs == 8 ? radix_k64_v64(src_k, dst_k, src_v, dst_v, n, k, shift, mask, hist)
                            : radix_k64_v32(src_k, dst_k, src_v, dst_v, n, k, shift, mask, hist);
        if (moved) {
            void *t = src_k;
            src_k = dst_k;
            dst_k = t;
            t = src_v;
            src_v = dst_v;
            dst_v = t;
        }
    }
    if (src_k != keys) {
        /* An odd number of passes moved the data: it sits in the scratch buffers. */
        memcpy(keys, src_k, n * ks);
        if (vs) memcpy(values, src_v, n * vs);
        dst_k = src_k;
        dst_v = src_v;
    }
    free(dst_k);
    free(dst_v);
    free(hist);
    return GROVE_OK;
}

/* ---- Morton codes ---- */

static grove_status morton_range_error(grove_ctx *ctx, int dims, size_t i, const uint32_t *x,
                                       const uint32_t *y, const uint32_t *z)
{
    if (dims == 2)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "grove_morton2_encode: coordinate out of range at index %zu "
                            "(x = %u, y = %u): 2-D Morton codes take 16 bits per axis (max 65535)",
                            i, x[i], y[i]);
    return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                        "grove_morton3_encode: coordinate out of range at index %zu "
                        "(x = %u, y = %u, z = %u): 3-D Morton codes take 21 bits per axis "
                        "(max 2097151)",
                        i, x[i], y[i], z[i]);
}

grove_status grove__cpu_morton2_encode(grove_ctx *ctx, const uint32_t *x, const uint32_t *y,
                                       uint32_t *codes, size_t n)
{
    size_t k = chunk_count(ctx, n), bad[MAX_CHUNKS];
#pragma omp parallel for num_threads((int)k) schedule(static, 1) if (k > 1)
    for (size_t c = 0; c < k; c++) {
        size_t first_bad = SIZE_MAX;
        for (size_t i = CHUNK_LO(c); i < CHUNK_LO(c + 1); i++) {
            if (((x[i] | y[i]) >> 16) && first_bad == SIZE_MAX) first_bad = i;
            codes[i] = grove_morton2(x[i], y[i]);
        }
        bad[c] = first_bad;
    }
    for (size_t c = 0; c < k; c++)
        if (bad[c] != SIZE_MAX) return morton_range_error(ctx, 2, bad[c], x, y, NULL);
    return GROVE_OK;
}

grove_status grove__cpu_morton3_encode(grove_ctx *ctx, const uint32_t *x, const uint32_t *y,
                                       const uint32_t *z, uint64_t *codes, size_t n)
{
    size_t k = chunk_count(ctx, n), bad[MAX_CHUNKS];
#pragma omp parallel for num_threads((int)k) schedule(static, 1) if (k > 1)
    for (size_t c = 0; c < k; c++) {
        size_t first_bad = SIZE_MAX;
        for (size_t i = CHUNK_LO(c); i < CHUNK_LO(c + 1); i++) {
            if (((x[i] | y[i] | z[i]) >> 21) && first_bad == SIZE_MAX) first_bad = i;
            codes[i] = grove_morton3(x[i], y[i], z[i]);
        }
        bad[c] = first_bad;
    }
    for (size_t c = 0; c < k; c++)
        if (bad[c] != SIZE_MAX) return morton_range_error(ctx, 3, bad[c], x, y, z);
    return GROVE_OK;
}

grove_status grove__cpu_morton2_decode(grove_ctx *ctx, const uint32_t *codes, uint32_t *x,
                                       uint32_t *y, size_t n)
{
    size_t k = chunk_count(ctx, n);
#pragma omp parallel for num_threads((int)k) schedule(static, 1) if (k > 1)
    for (size_t c = 0; c < k; c++)
        for (size_t i = CHUNK_LO(c); i < CHUNK_LO(c + 1); i++) {
            x[i] = grove_morton2_compact(codes[i]);
            y[i] = grove_morton2_compact(codes[i] >> 1);
        }
    return GROVE_OK;
}

grove_status grove__cpu_morton3_decode(grove_ctx *ctx, const uint64_t *codes, uint32_t *x,
                                       uint32_t *y, uint32_t *z, size_t n)
{
    size_t k = chunk_count(ctx, n);
#pragma omp parallel for num_threads((int)k) schedule(static, 1) if (k > 1)
    for (size_t c = 0; c < k; c++)
        for (size_t i = CHUNK_LO(c); i < CHUNK_LO(c + 1); i++) {
            x[i] = grove_morton3_compact(codes[i]);
            y[i] = grove_morton3_compact(codes[i] >> 1);
            z[i] = grove_morton3_compact(codes[i] >> 2);
        }
    return GROVE_OK;
}
