/*
 * test_prim.c - every primitive of prim.h against plain sequential references written here.
 *
 *   test_prim [--backend cpu|cuda] [--large N] [--seed S]
 *
 * The default pass runs sizes 0 .. 1000003 (warp, tile and chunk edges); --large N runs only
 * N elements with fewer combinations. With --backend cuda every result is also compared with
 * the CPU backend: bit for bit for integers and MAX/MIN, within the rounding bound for f32 SUM.
 * Without a GPU (or a CUDA build) --backend cuda prints "SKIP: no GPU" and exits 77.
 *
 * The _device entry points take device pointers, which a C program without the CUDA headers
 * cannot make; only their argument checks and size queries are tested here (the benchmarks
 * run them on real data).
 */
#include <math.h>

#include "grove/prim.h"
#include "testutil.h"

static const size_t SIZES[] = {0,    1,    31,   32,   33,   1023, 1024,  1025,
                               4095, 4096, 4097, 8191, 8192, 8193, 65537, 1000003};

/* Head-flag patterns (see make_heads). */
enum { H_ALL, H_NONE, H_HALF, H_1_100, H_1_10000, H_HUGE, H_NO_FIRST, H_CHUNKS, H_TILES, H_COUNT };

static struct {
    grove_ctx *ctx; /* the backend under test */
    grove_ctx *cpu; /* the CPU backend to compare with; NULL when ctx is the CPU */
    int light;      /* large pass: fewer combinations */
    int keep;       /* head patterns run per combination (all of them for small sizes) */
    tu_rng rng;
    uint8_t *heads[H_COUNT]; /* the head patterns of the current size */
} E;

static const char *const TYPE_NAME[] = {"u32", "u64", "f32"};
static const char *const OP_NAME[] = {"sum", "max", "min"};

/* Runs `call` on ctx, expecting GROVE_OK; evaluates to 1 on success. */
static int ok_call(grove_ctx *ctx, grove_status s, const char *what)
{
    if (s == GROVE_OK) return 1;
    FAIL("%s: status %d (%s): %s", what, (int)s, grove_status_string(s), grove_ctx_last_error(ctx));
    return 0;
}

static size_t tsize(grove_dtype t) { return t == GROVE_U64 ? 8 : 4; }

static uint64_t get_u(grove_dtype t, const void *p, size_t i)
{
    return t == GROVE_U32 ? ((const uint32_t *)p)[i] : ((const uint64_t *)p)[i];
}

static int f32_same(float a, float b)
{
    uint32_t ua, ub;
    memcpy(&ua, &a, 4);
    memcpy(&ub, &b, 4);
    return ua == ub || (isnan(a) && isnan(b)); /* NaN payloads may differ between backends */
}

/* Bit-exact comparison of two results (f32: any NaN equals any NaN). Returns the first
 * differing index, or n. */
static size_t first_diff(grove_dtype t, const void *a, const void *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (t == GROVE_F32) {
            if (!f32_same(((const float *)a)[i], ((const float *)b)[i])) return i;
        } else if (get_u(t, a, i) != get_u(t, b, i)) {
            return i;
        }
    }
    return n;
}

/* ---- test data ---- */

enum { V_RAND, V_INT, V_SPECIAL };
static const char *const VARIANT_NAME[] = {"random", "small-int", "special"};

/* V_RAND: uniform (f32 in [-1, 1)); V_INT: f32 small integers, whose sums are exact in any
 * order, so f32 SUM can be checked exactly; V_SPECIAL: extremes, and for f32 NaN (also in long
 * runs, and at the start), signed zeros and infinities. */
static void fill(grove_dtype t, int variant, void *buf, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = tu_next(&E.rng);
        if (t == GROVE_U32) {
            uint32_t v = (uint32_t)(r >> 32);
            if (variant == V_SPECIAL && (r & 15) == 0) v = (r & 16) ? UINT32_MAX : 0;
            ((uint32_t *)buf)[i] = v;
        } else if (t == GROVE_U64) {
            uint64_t v = tu_next(&E.rng);
            if (variant == V_SPECIAL && (r & 15) == 0) v = (r & 16) ? UINT64_MAX : 0;
            ((uint64_t *)buf)[i] = v;
        } else {
            float v;
            if (variant == V_INT) {
                v = (float)((int)(r % 17) - 8);
            } else if (variant == V_RAND) {
                v = tu_f32(&E.rng, -1.0f, 1.0f);
            } else if (run || i < 3) {
                v = NAN;
                if (run) run--;
            } else {
                switch (r % 64) {
                case 0:
                case 1:
                case 2:
                case 3:
                case 4: v = NAN; break;
                case 5:
                    run = 1 + (size_t)((r >> 8) % 40);
                    v = NAN;
                    break;
                case 6: v = 0.0f; break;
                case 7: v = -0.0f; break;
                case 8: v = INFINITY; break;
                case 9: v = -INFINITY; break;
                default: v = tu_f32(&E.rng, -100.0f, 100.0f);
                }
            }
            ((float *)buf)[i] = v;
        }
    }
}

/* A random nonzero byte: every nonzero flag means true. */
static uint8_t truthy(void) { return (uint8_t)(1 + tu_next(&E.rng) % 255); }

static const char *const HEADS_NAME[] = {"every",    "none",       "1/2",    "1/100", "1/10000",
                                         "one-huge", "1/100,h0=0", "chunks", "tiles"};

/* Whether head pattern h runs in combination `combo`: large sizes rotate through the patterns
 * (E.keep of them per combination) to keep the run time down. */
static int pick(unsigned combo, int h)
{
    return (unsigned)(h + (int)combo) % H_COUNT < (unsigned)E.keep;
}

static void make_heads(uint8_t *h, size_t n, int pattern)
{
    static const uint64_t density[H_COUNT] = {1, 0, 2, 100, 10000, 0, 100, 0, 0};
    for (size_t i = 0; i < n; i++) {
        uint64_t d = density[pattern];
        h[i] = (d && tu_next(&E.rng) % d == 0) ? truthy() : 0;
    }
    if (n == 0) return;
    if (pattern == H_HUGE) {
        /* A one-element segment, one segment of n - 2, and a last one-element segment. */
        h[0] = 1;
        if (n > 1) h[1] = 1;
        if (n > 2) h[n - 1] = 1;
    }
    if (pattern == H_NO_FIRST) h[0] = 0;
    /* Segments that start exactly where a block of work starts, at every other block, so
     * that a block without a head is followed by one that begins with a head: the blocks are
     * the CPU backend's chunks n * c / 7 (7 threads) or 4096-element GPU tiles. */
    if (pattern == H_CHUNKS)
        for (size_t c = 1; c < 7; c += 2) h[n * c / 7] = truthy();
    if (pattern == H_TILES)
        for (size_t i = 4096; i < n; i += 8192) h[i] = truthy();
}

enum { F_ALL, F_NONE, F_HALF, F_SPARSE, F_COUNT };
static const char *const FLAGS_NAME[] = {"all", "none", "1/2", "1/1000"};

static void make_flags(uint8_t *f, size_t n, int pattern)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = tu_next(&E.rng);
        int on = pattern == F_ALL || (pattern == F_HALF && (r & 1)) ||
                 (pattern == F_SPARSE && r % 1000 == 0);
        f[i] = on ? truthy() : 0;
    }
}

/* ---- reference folds ---- */

/* A fold of the values a result covers; empty until the first one. */
typedef struct ref_acc {
    int empty;
    size_t m;      /* values covered */
    uint64_t u;    /* unsigned types */
    float f;       /* f32 MAX / MIN */
    double d, abs; /* f32 SUM, and the sum of magnitudes for its rounding bound */
} ref_acc;

static void acc_reset(ref_acc *a)
{
    memset(a, 0, sizeof *a);
    a->empty = 1;
}

static void acc_add(ref_acc *a, grove_dtype t, grove_op op, const void *in, size_t i)
{
    if (t == GROVE_F32) {
        float x = ((const float *)in)[i];
        if (op == GROVE_OP_SUM) {
            a->d += x;
            a->abs += fabs(x);
        } else if (a->empty) {
            a->f = x;
        } else {
            a->f = op == GROVE_OP_MAX ? fmaxf(a->f, x) : fminf(a->f, x);
        }
    } else {
        uint64_t x = get_u(t, in, i), mask = t == GROVE_U32 ? UINT32_MAX : UINT64_MAX;
        if (a->empty)
            a->u = x;
        else if (op == GROVE_OP_SUM)
            a->u = (a->u + x) & mask;
        else if (op == GROVE_OP_MAX)
            a->u = x > a->u ? x : a->u;
        else
            a->u = x < a->u ? x : a->u;
    }
    a->empty = 0;
    a->m++;
}

/* Does got[i] hold the value a stands for (the identity when a is empty)? f32 SUM: exactly
 * (exact == 1, small-integer data) or within m * 2^-23 * sum|x|, which bounds the rounding
 * error of any order of additions; NaN and infinities must come out as they do in double. On a
 * mismatch desc says what was expected. */
static int acc_match(const ref_acc *a, grove_dtype t, grove_op op, const void *got, size_t i,
                     int exact, char *desc, size_t desc_len)
{
    if (t == GROVE_F32) {
        float g = ((const float *)got)[i];
        if (op == GROVE_OP_SUM) {
            double w = a->d;
            int ok;
            if (isnan(w) || isinf(w))
                ok = isnan(w) ? isnan(g) : (double)g == w;
            else
                ok =
                    exact ? (double)g == w : fabs((double)g - w) <= (double)a->m * 0x1p-23 * a->abs;
            if (!ok) snprintf(desc, desc_len, "got %.9g want %.9g (covering %zu)", g, w, a->m);
            return ok;
        } else {
            float w = a->empty ? (op == GROVE_OP_MAX ? -INFINITY : INFINITY) : a->f;
            if (g == w || (isnan(g) && isnan(w))) return 1;
            snprintf(desc, desc_len, "got %.9g want %.9g (covering %zu)", g, w, a->m);
            return 0;
        }
    } else {
        uint64_t g = get_u(t, got, i), mask = t == GROVE_U32 ? UINT32_MAX : UINT64_MAX;
        uint64_t w = a->empty ? (op == GROVE_OP_MIN ? mask : 0) : a->u;
        if (g == w) return 1;
        snprintf(desc, desc_len, "got %#" PRIx64 " want %#" PRIx64 " (covering %zu)", g, w, a->m);
        return 0;
    }
}

/* Checks a (segmented) scan result; heads == NULL: one segment. */
static void check_scan_result(const char *what, grove_dtype t, grove_op op, int incl, int bwd,
                              const void *in, const uint8_t *heads, const void *got, size_t n,
                              int exact)
{
    ref_acc a;
    char desc[160];
    acc_reset(&a);
    for (size_t j = 0; j < n; j++) {
        size_t i = bwd ? n - 1 - j : j;
        int restart =
            bwd ? (i == n - 1 || (heads && heads[i + 1])) : (i == 0 || (heads && heads[i]));
        if (restart) acc_reset(&a);
        if (!incl && !acc_match(&a, t, op, got, i, exact, desc, sizeof desc)) {
            FAIL("%s: out[%zu]: %s", what, i, desc);
            return;
        }
        acc_add(&a, t, op, in, i);
        if (incl && !acc_match(&a, t, op, got, i, exact, desc, sizeof desc)) {
            FAIL("%s: out[%zu]: %s", what, i, desc);
            return;
        }
    }
}

/* ---- scan and segmented scan ---- */

static grove_status run_scan(grove_ctx *ctx, grove_dtype t, grove_op op, int incl, int dir,
                             const void *in, const uint8_t *heads, void *out, size_t n)
{
    grove_scan_kind kind = incl ? GROVE_SCAN_INCLUSIVE : GROVE_SCAN_EXCLUSIVE;
    if (dir < 0) return grove_scan(ctx, t, op, kind, in, out, n);
    return grove_segscan(ctx, t, op, kind, (grove_scan_dir)dir, in, heads, out, n);
}

/* dir < 0: unsegmented grove_scan. in_place: out starts as a copy of in and is passed as both. */
static void scan_case(grove_dtype t, grove_op op, int variant, int incl, int dir,
                      const uint8_t *heads, int hpat, const void *in, size_t n, int in_place)
{
    size_t bytes = n * tsize(t);
    void *out = tu_malloc(bytes), *cpu = NULL;
    int exact = variant != V_RAND, exact_backends = !(t == GROVE_F32 && op == GROVE_OP_SUM);
    char what[200];
    snprintf(what, sizeof what, "%s %s %s %s %s%s heads=%s data=%s n=%zu",
             dir < 0 ? "scan" : "segscan", TYPE_NAME[t], OP_NAME[op], incl ? "incl" : "excl",
             dir < 0 ? "" : (dir ? "bwd" : "fwd"), in_place ? " in-place" : "",
             dir < 0 ? "-" : HEADS_NAME[hpat], VARIANT_NAME[variant], n);
    if (in_place) memcpy(out, in, bytes);
    if (ok_call(E.ctx, run_scan(E.ctx, t, op, incl, dir, in_place ? out : in, heads, out, n), what))
        check_scan_result(what, t, op, incl, dir == 1, in, heads, out, n, exact);
    if (E.cpu) {
        cpu = tu_malloc(bytes);
        if (ok_call(E.cpu, run_scan(E.cpu, t, op, incl, dir, in, heads, cpu, n), what)) {
            size_t i = first_diff(t, out, cpu, n);
            if (exact_backends && i < n) FAIL("%s: CUDA and CPU differ at %zu", what, i);
            /* f32 SUM: both within the rounding bound of the reference, so of each other */
            if (!exact_backends)
                check_scan_result(what, t, op, incl, dir == 1, in, heads, cpu, n, exact);
        }
    }
    free(out);
    free(cpu);
}

static void test_scans(size_t n)
{
    void *in = tu_malloc(n * 8);
    unsigned combo = 0;
    for (int t = 0; t < 3; t++)
        for (int op = 0; op < 3; op++) {
            int variants[2] = {op == GROVE_OP_SUM ? V_RAND : V_SPECIAL, -1};
            if (t == GROVE_F32 && op == GROVE_OP_SUM) variants[1] = V_INT;
            for (int v = 0; v < 2 && variants[v] >= 0; v++) {
                fill((grove_dtype)t, variants[v], in, n);
                for (int incl = 0; incl < 2; incl++) {
                    scan_case((grove_dtype)t, (grove_op)op, variants[v], incl, -1, NULL, 0, in, n,
                              0);
                    /* in place: always for small sizes, for some combinations otherwise */
                    if (E.keep == H_COUNT || (t + op + v) % (E.light ? 9 : 3) == 0)
                        scan_case((grove_dtype)t, (grove_op)op, variants[v], incl, -1, NULL, 0, in,
                                  n, 1);
                    for (int dir = 0; dir < 2; dir++, combo++) {
                        /* the large pass takes one direction per combination */
                        if (E.light && dir != (t + op + v + incl) % 2) continue;
                        for (int h = 0; h < H_COUNT; h++) {
                            if (!pick(combo, h)) continue;
                            scan_case((grove_dtype)t, (grove_op)op, variants[v], incl, dir,
                                      E.heads[h], h, in, n, 0);
                            if (!E.light && h == (int)((t + op + incl + dir) % H_COUNT))
                                scan_case((grove_dtype)t, (grove_op)op, variants[v], incl, dir,
                                          E.heads[h], h, in, n, 1);
                        }
                    }
                }
            }
        }
    free(in);
}

/* ---- reduce and bbox ---- */

static void test_reduce(size_t n)
{
    void *in = tu_malloc(n * 8);
    for (int t = 0; t < 3; t++)
        for (int op = 0; op < 3; op++)
            for (int variant = 0; variant < 3; variant++) {
                uint64_t got = 0, cpu = 0;
                ref_acc a;
                char what[120], desc[160];
                if (variant == V_INT && t != GROVE_F32) continue;
                fill((grove_dtype)t, variant, in, n);
                snprintf(what, sizeof what, "reduce %s %s data=%s n=%zu", TYPE_NAME[t], OP_NAME[op],
                         VARIANT_NAME[variant], n);
                acc_reset(&a);
                for (size_t i = 0; i < n; i++) acc_add(&a, (grove_dtype)t, (grove_op)op, in, i);
                if (ok_call(E.ctx, grove_reduce(E.ctx, (grove_dtype)t, (grove_op)op, in, &got, n),
                            what) &&
                    !acc_match(&a, (grove_dtype)t, (grove_op)op, &got, 0, variant != V_RAND, desc,
                               sizeof desc))
                    FAIL("%s: %s", what, desc);
                if (E.cpu &&
                    ok_call(E.cpu, grove_reduce(E.cpu, (grove_dtype)t, (grove_op)op, in, &cpu, n),
                            what) &&
                    !(t == GROVE_F32 && op == GROVE_OP_SUM) &&
                    first_diff((grove_dtype)t, &got, &cpu, 1) == 0)
                    FAIL("%s: CUDA and CPU differ", what);
            }
    free(in);
}

static void test_bbox(size_t n)
{
    float *pts = (float *)tu_malloc(n * 3 * sizeof *pts);
    static const char *const data_name[] = {"random", "special", "all-NaN"};
    for (int dims = 2; dims <= 3; dims++)
        for (int data = 0; data < 3; data++) {
            float lo[3], hi[3], clo[3], chi[3], wlo[3], whi[3];
            char what[80];
            snprintf(what, sizeof what, "bbox %dd data=%s n=%zu", dims, data_name[data], n);
            fill(GROVE_F32, data == 0 ? V_RAND : V_SPECIAL, pts, n * (size_t)dims);
            if (data == 2)
                for (size_t i = 0; i < n * (size_t)dims; i++) pts[i] = NAN;
            for (int d = 0; d < dims; d++) {
                wlo[d] = INFINITY;
                whi[d] = -INFINITY;
                for (size_t i = 0; i < n; i++) {
                    float v = pts[i * (size_t)dims + (size_t)d];
                    if (v < wlo[d]) wlo[d] = v;
                    if (v > whi[d]) whi[d] = v;
                }
            }
            if (!ok_call(E.ctx, grove_bbox(E.ctx, dims, pts, n, lo, hi), what)) continue;
            for (int d = 0; d < dims; d++)
                if (lo[d] != wlo[d] || hi[d] != whi[d])
                    FAIL("%s: axis %d: got [%g, %g] want [%g, %g]", what, d, lo[d], hi[d], wlo[d],
                         whi[d]);
            if (E.cpu && ok_call(E.cpu, grove_bbox(E.cpu, dims, pts, n, clo, chi), what) &&
                (first_diff(GROVE_F32, lo, clo, (size_t)dims) < (size_t)dims ||
                 first_diff(GROVE_F32, hi, chi, (size_t)dims) < (size_t)dims))
                FAIL("%s: CUDA and CPU differ", what);
        }
    free(pts);
}

/* ---- split, segmented split, compaction ---- */

/* Sequential stable split of every segment (heads == NULL: one segment). */
static size_t ref_split(size_t es, const void *in, const uint8_t *flags, const uint8_t *heads,
                        void *out, uint32_t *dest, size_t n)
{
    size_t total = 0;
    for (size_t s = 0; s < n;) {
        size_t e = s + 1, pos = s;
        while (e < n && !(heads && heads[e])) e++;
        for (int pass = 0; pass < 2; pass++)
            for (size_t i = s; i < e; i++)
                if ((flags[i] != 0) == (pass == 0)) {
                    memcpy((char *)out + pos * es, (const char *)in + i * es, es);
                    dest[i] = (uint32_t)pos++;
                    total += pass == 0;
                }
        s = e;
    }
    return total;
}

static void split_case(size_t es, int segmented, const uint8_t *heads, int hpat,
                       const uint8_t *flags, int fpat, const void *in, size_t n, int with_dest,
                       int with_count)
{
    void *out = tu_malloc(n * es), *want = tu_malloc(n * es), *cout = tu_malloc(n * es);
    uint32_t *dest = (uint32_t *)tu_malloc(n * 4), *wdest = (uint32_t *)tu_malloc(n * 4);
    uint32_t *cdest = (uint32_t *)tu_malloc(n * 4);
    size_t count = (size_t)-1, ccount = (size_t)-1, wcount;
    char what[160];
    grove_status s, cs = GROVE_OK;
    snprintf(what, sizeof what, "%s es=%zu flags=%s heads=%s dest=%d count=%d n=%zu",
             segmented ? "segsplit" : "split", es, FLAGS_NAME[fpat],
             segmented ? HEADS_NAME[hpat] : "-", with_dest, with_count, n);
    wcount = ref_split(es, in, flags, segmented ? heads : NULL, want, wdest, n);
    if (segmented)
        s = grove_segsplit(E.ctx, es, in, flags, heads, out, with_dest ? dest : NULL, n);
    else
        s = grove_split(E.ctx, es, in, flags, out, with_dest ? dest : NULL,
                        with_count ? &count : NULL, n);
    if (ok_call(E.ctx, s, what)) {
        if (memcmp(out, want, n * es) != 0) FAIL("%s: out differs", what);
        if (with_dest && memcmp(dest, wdest, n * 4) != 0) FAIL("%s: dest differs", what);
        if (with_count && !segmented && count != wcount)
            FAIL("%s: num_flagged %zu, want %zu", what, count, wcount);
    }
    if (E.cpu) {
        if (segmented)
            cs = grove_segsplit(E.cpu, es, in, flags, heads, cout, cdest, n);
        else
            cs = grove_split(E.cpu, es, in, flags, cout, cdest, &ccount, n);
        if (ok_call(E.cpu, cs, what) &&
            (memcmp(cout, want, n * es) != 0 || memcmp(cdest, wdest, n * 4) != 0 ||
             (!segmented && ccount != wcount)))
            FAIL("%s: CPU backend differs from the reference", what);
    }
    free(out);
    free(want);
    free(cout);
    free(dest);
    free(wdest);
    free(cdest);
}

static void compact_case(size_t es, const uint8_t *flags, int fpat, const void *in, size_t n)
{
    unsigned char *out = (unsigned char *)tu_malloc(n * es), *want;
    size_t count = (size_t)-1, wcount = 0;
    char what[100];
    snprintf(what, sizeof what, "compact es=%zu flags=%s n=%zu", es, FLAGS_NAME[fpat], n);
    want = (unsigned char *)tu_malloc(n * es);
    for (size_t i = 0; i < n; i++)
        if (flags[i]) memcpy(want + es * wcount++, (const char *)in + i * es, es);
    /* Only num_selected elements may be written: the rest of out must keep its bytes. */
    memset(out, 0xA5, n * es);
    if (ok_call(E.ctx, grove_compact(E.ctx, es, in, flags, out, &count, n), what)) {
        if (count != wcount) {
            FAIL("%s: num_selected %zu, want %zu", what, count, wcount);
        } else {
            if (memcmp(out, want, wcount * es) != 0) FAIL("%s: out differs", what);
            for (size_t i = wcount * es; i < n * es; i++)
                if (out[i] != 0xA5) {
                    FAIL("%s: byte %zu beyond the selected elements was written", what, i);
                    break;
                }
        }
    }
    if (E.cpu) {
        size_t ccount = 0;
        if (ok_call(E.cpu, grove_compact(E.cpu, es, in, flags, out, &ccount, n), what) &&
            (ccount != wcount || memcmp(out, want, wcount * es) != 0))
            FAIL("%s: CPU backend differs from the reference", what);
    }
    free(out);
    free(want);
}

static void test_splits(size_t n)
{
    void *in = tu_malloc(n * 8);
    uint8_t *flags = (uint8_t *)tu_malloc(n);
    unsigned combo = 0;
    fill(GROVE_U64, V_RAND, in, n); /* any payload; es 4 reads the first 4n bytes */
    for (int f = 0; f < F_COUNT; f++) {
        make_flags(flags, n, f);
        for (size_t es = 4; es <= 8; es += 4, combo++) {
            split_case(es, 0, NULL, 0, flags, f, in, n, (f + (int)es) % 3 != 0, f % 2 == 0);
            compact_case(es, flags, f, in, n);
            for (int h = 0; h < H_COUNT; h++) {
                if (!pick(combo, h)) continue;
                split_case(es, 1, E.heads[h], h, flags, f, in, n, (h + (int)es) % 3 != 0, 0);
            }
        }
    }
    free(in);
    free(flags);
}

/* ---- radix sort ---- */

static uint64_t masked(uint64_t k, int begin, int end)
{
    int w = end - begin;
    if (w <= 0) return 0;
    return (k >> begin) & (w >= 64 ? UINT64_MAX : ((uint64_t)1 << w) - 1);
}

/* 8-byte values carry a tag derived from the index in their upper half. */
static uint64_t tag(size_t i) { return (uint64_t)((uint32_t)i * 2654435761u ^ 0x5bd1e995u) << 32; }

/* The sorted pairs must be: a permutation of the input pairs (values hold the original
 * indices), ordered by the masked key, equal masked keys in input order. That defines the
 * stable sort uniquely, so no reference sort is needed. */
static void check_sorted(const char *what, grove_dtype kt, const void *keys_in, const void *keys,
                         size_t vs, const void *vals, size_t n, int begin, int end,
                         unsigned char *seen)
{
    memset(seen, 0, n);
    for (size_t i = 0; i < n; i++) {
        uint64_t v = vs == 4 ? ((const uint32_t *)vals)[i] : ((const uint64_t *)vals)[i];
        size_t idx = (size_t)(uint32_t)v;
        if (idx >= n || seen[idx] || (vs == 8 && (v & ~(uint64_t)UINT32_MAX) != tag(idx))) {
            FAIL("%s: value %zu (%#" PRIx64 ") is not one of the input values", what, i, v);
            return;
        }
        seen[idx] = 1;
        if (get_u(kt, keys, i) != get_u(kt, keys_in, idx)) {
            FAIL("%s: key %zu did not move with its value", what, i);
            return;
        }
        if (i > 0) {
            uint64_t a = masked(get_u(kt, keys, i - 1), begin, end);
            uint64_t b = masked(get_u(kt, keys, i), begin, end);
            uint64_t vp =
                vs == 4 ? ((const uint32_t *)vals)[i - 1] : ((const uint64_t *)vals)[i - 1];
            if (a > b) {
                FAIL("%s: keys %zu and %zu out of order", what, i - 1, i);
                return;
            }
            if (a == b && (uint32_t)vp > (uint32_t)v) {
                FAIL("%s: equal keys at %zu and %zu lost their order (not stable)", what, i - 1, i);
                return;
            }
        }
    }
}

static void fill_keys(grove_dtype kt, int dist, void *keys, size_t n, int begin, int end)
{
    fill(kt, V_RAND, keys, n);
    if (dist == 0 || begin >= 64) return;
    /* Many duplicates: few distinct values inside the compared bits, random bits outside. */
    for (size_t i = 0; i < n; i++) {
        uint64_t k = get_u(kt, keys, i), few = tu_next(&E.rng) % 7;
        uint64_t inside = masked(UINT64_MAX, begin, end ? end : (int)tsize(kt) * 8) << begin;
        k = (k & ~inside) | ((few << begin) & inside);
        if (kt == GROVE_U32)
            ((uint32_t *)keys)[i] = (uint32_t)k;
        else
            ((uint64_t *)keys)[i] = k;
    }
}

static void sort_case(grove_dtype kt, int begin, int end, int dist, size_t vs, size_t n,
                      unsigned char *seen)
{
    size_t ks = tsize(kt);
    int eff_end = end ? end : (int)ks * 8;
    void *keys_in = tu_malloc(n * ks), *keys = tu_malloc(n * ks), *vals = tu_malloc(n * vs);
    void *keys_only = tu_malloc(n * ks);
    char what[140];
    snprintf(what, sizeof what, "sort %s bits [%d, %d) %s values=%zu n=%zu", TYPE_NAME[kt], begin,
             end, dist ? "few-distinct" : "random", vs, n);
    fill_keys(kt, dist, keys_in, n, begin, end);
    memcpy(keys, keys_in, n * ks);
    memcpy(keys_only, keys_in, n * ks);
    for (size_t i = 0; i < n; i++) {
        if (vs == 4)
            ((uint32_t *)vals)[i] = (uint32_t)i;
        else
            ((uint64_t *)vals)[i] = tag(i) | i;
    }
    if (ok_call(E.ctx, grove_sort_pairs(E.ctx, kt, keys, vs, vals, n, begin, end), what)) {
        check_sorted(what, kt, keys_in, keys, vs, vals, n, begin, eff_end, seen);
        /* Keys only: the unique stable order again, so the same keys as the pairs sort. */
        if (ok_call(E.ctx, grove_sort_keys(E.ctx, kt, keys_only, n, begin, end), what) &&
            memcmp(keys_only, keys, n * ks) != 0)
            FAIL("%s: sort_keys differs from the keys of sort_pairs", what);
    }
    if (E.cpu) {
        memcpy(keys_only, keys_in, n * ks);
        if (ok_call(E.cpu, grove_sort_keys(E.cpu, kt, keys_only, n, begin, end), what) &&
            memcmp(keys_only, keys, n * ks) != 0)
            FAIL("%s: CUDA and CPU sorts differ", what);
    }
    free(keys_in);
    free(keys);
    free(vals);
    free(keys_only);
}

static void test_sort(size_t n)
{
    static const int r32[][2] = {{0, 0},  {0, 32},  {0, 16}, {8, 24},
                                 {4, 13}, {31, 32}, {5, 5},  {32, 0}};
    static const int r64[][2] = {{0, 0}, {0, 64}, {0, 21}, {13, 47}, {60, 64}, {32, 0}};
    unsigned char *seen = (unsigned char *)tu_malloc(n);
    unsigned rot = 0;
    for (int kt = 0; kt < 2; kt++) {
        int nr = kt == 0 ? 8 : 6;
        for (int r = 0; r < nr; r++) {
            int b = kt == 0 ? r32[r][0] : r64[r][0], e = kt == 0 ? r32[r][1] : r64[r][1];
            for (int dist = 0; dist < 2; dist++)
                for (size_t vs = 4; vs <= 8; vs += 4) {
                    /* large sizes: every 2nd case, large pass every 5th */
                    if (E.keep < H_COUNT && (rot++ % (E.light ? 5 : 2)) != 0) continue;
                    sort_case((grove_dtype)kt, b, e, dist, vs, n, seen);
                }
        }
    }
    free(seen);
}

/* ---- Morton codes ---- */

static uint32_t ref_morton2(uint32_t x, uint32_t y)
{
    uint32_t c = 0;
    for (int b = 0; b < 16; b++) c |= ((x >> b) & 1u) << (2 * b) | ((y >> b) & 1u) << (2 * b + 1);
    return c;
}

static uint64_t ref_morton3(uint32_t x, uint32_t y, uint32_t z)
{
    uint64_t c = 0;
    for (int b = 0; b < 21; b++)
        c |= (uint64_t)((x >> b) & 1u) << (3 * b) | (uint64_t)((y >> b) & 1u) << (3 * b + 1) |
             (uint64_t)((z >> b) & 1u) << (3 * b + 2);
    return c;
}

static uint32_t ref_extract(uint64_t code, int first, int stride, int bits)
{
    uint32_t v = 0;
    for (int b = 0; b < bits; b++) v |= (uint32_t)((code >> (first + stride * b)) & 1u) << b;
    return v;
}

/* Expects GROVE_ERR_INVALID_ARG naming function fn and index idx. */
static void expect_range_error(grove_ctx *ctx, grove_status s, const char *fn, size_t idx)
{
    char want[40];
    snprintf(want, sizeof want, "index %zu", idx);
    if (s != GROVE_ERR_INVALID_ARG)
        FAIL("%s with a coordinate out of range at %zu: status %d, want %d", fn, idx, (int)s,
             (int)GROVE_ERR_INVALID_ARG);
    else if (!strstr(grove_ctx_last_error(ctx), fn) || !strstr(grove_ctx_last_error(ctx), want))
        FAIL("%s: message \"%s\" does not name the function and \"%s\"", fn,
             grove_ctx_last_error(ctx), want);
}

static void test_morton(size_t n)
{
    uint32_t *x = (uint32_t *)tu_malloc(n * 4), *y = (uint32_t *)tu_malloc(n * 4);
    uint32_t *z = (uint32_t *)tu_malloc(n * 4), *c2 = (uint32_t *)tu_malloc(n * 4);
    uint32_t *dx = (uint32_t *)tu_malloc(n * 4), *dy = (uint32_t *)tu_malloc(n * 4);
    uint32_t *dz = (uint32_t *)tu_malloc(n * 4);
    uint64_t *c3 = (uint64_t *)tu_malloc(n * 8);
    char what[60];
    snprintf(what, sizeof what, "morton n=%zu", n);

    for (size_t i = 0; i < n; i++) {
        uint64_t r = tu_next(&E.rng);
        x[i] = (uint32_t)(r & 0x1FFFFF);
        y[i] = (uint32_t)((r >> 21) & 0x1FFFFF);
        z[i] = (uint32_t)((r >> 42) & 0x1FFFFF);
    }
    if (n > 2) x[n - 1] = y[n - 2] = z[n - 3] = 0x1FFFFF; /* the largest legal 3-D values */
    /* 3-D: bit layout against the bit-by-bit reference, and back. */
    if (ok_call(E.ctx, grove_morton3_encode(E.ctx, x, y, z, c3, n), what)) {
        for (size_t i = 0; i < n; i++)
            if (c3[i] != ref_morton3(x[i], y[i], z[i])) {
                FAIL("%s: 3-D code %zu is %#" PRIx64 ", want %#" PRIx64, what, i, c3[i],
                     ref_morton3(x[i], y[i], z[i]));
                break;
            }
        if (ok_call(E.ctx, grove_morton3_decode(E.ctx, c3, dx, dy, dz, n), what) &&
            (memcmp(dx, x, n * 4) || memcmp(dy, y, n * 4) || memcmp(dz, z, n * 4)))
            FAIL("%s: 3-D round trip differs", what);
    }
    /* 2-D: the same with 16 bits per axis. */
    for (size_t i = 0; i < n; i++) {
        x[i] &= 0xFFFF;
        y[i] &= 0xFFFF;
    }
    if (n > 1) x[n - 1] = y[n - 2] = 0xFFFF;
    if (ok_call(E.ctx, grove_morton2_encode(E.ctx, x, y, c2, n), what)) {
        for (size_t i = 0; i < n; i++)
            if (c2[i] != ref_morton2(x[i], y[i])) {
                FAIL("%s: 2-D code %zu is %#x, want %#x", what, i, c2[i], ref_morton2(x[i], y[i]));
                break;
            }
        if (ok_call(E.ctx, grove_morton2_decode(E.ctx, c2, dx, dy, n), what) &&
            (memcmp(dx, x, n * 4) || memcmp(dy, y, n * 4)))
            FAIL("%s: 2-D round trip differs", what);
    }
    /* Decoding arbitrary codes (3-D: the top bit, which no axis owns, is ignored). */
    for (size_t i = 0; i < n; i++) {
        c3[i] = tu_next(&E.rng);
        c2[i] = (uint32_t)c3[i];
    }
    if (ok_call(E.ctx, grove_morton3_decode(E.ctx, c3, dx, dy, dz, n), what))
        for (size_t i = 0; i < n; i++)
            if (dx[i] != ref_extract(c3[i], 0, 3, 21) || dy[i] != ref_extract(c3[i], 1, 3, 21) ||
                dz[i] != ref_extract(c3[i], 2, 3, 21)) {
                FAIL("%s: decoding 3-D code %#" PRIx64 " at %zu", what, c3[i], i);
                break;
            }
    if (ok_call(E.ctx, grove_morton2_decode(E.ctx, c2, dx, dy, n), what))
        for (size_t i = 0; i < n; i++)
            if (dx[i] != ref_extract(c2[i], 0, 2, 16) || dy[i] != ref_extract(c2[i], 1, 2, 16)) {
                FAIL("%s: decoding 2-D code %#x at %zu", what, c2[i], i);
                break;
            }
    /* Out of range: the first offending index is named, whichever axis it is on. */
    if (n > 0) {
        size_t bad = (size_t)(tu_next(&E.rng) % n);
        for (size_t i = 0; i < n; i++) x[i] = y[i] = z[i] = (uint32_t)(i & 0xFFFF);
        y[bad] = 0x10000;
        if (bad + 1 < n) x[n - 1] = 0xFFFFFFFFu; /* a later one must not be reported */
        expect_range_error(E.ctx, grove_morton2_encode(E.ctx, x, y, c2, n), "grove_morton2_encode",
                           bad);
        y[bad] = (uint32_t)(bad & 0xFFFF);
        z[bad] = 0x200000;
        expect_range_error(E.ctx, grove_morton3_encode(E.ctx, x, y, z, c3, n),
                           "grove_morton3_encode", bad);
    }
    free(x);
    free(y);
    free(z);
    free(c2);
    free(dx);
    free(dy);
    free(dz);
    free(c3);
}

/* ---- results must not depend on the CPU thread count ---- */

static void test_thread_independence(size_t n)
{
    grove_ctx *c[2] = {NULL, NULL};
    grove_ctx_opts o;
    void *in = tu_malloc(n * 8), *out[2] = {tu_malloc(n * 8), tu_malloc(n * 8)};
    uint8_t *heads = (uint8_t *)tu_malloc(n), *flags = (uint8_t *)tu_malloc(n);
    uint32_t *dest[2] = {(uint32_t *)tu_malloc(n * 4), (uint32_t *)tu_malloc(n * 4)};
    char what[80];
    grove_ctx_default_opts(&o);
    o.backend = GROVE_BACKEND_CPU;
    for (int k = 0; k < 2; k++) {
        o.num_threads = k == 0 ? 1 : 5;
        if (!ok_call(c[k], grove_ctx_create(&o, &c[k]), "creating a CPU context")) goto done;
    }
    make_heads(heads, n, H_1_100);
    make_flags(flags, n, F_HALF);
    for (int t = 0; t < 3; t++)
        for (int op = 0; op < 3; op++) {
            if (t == GROVE_F32 && op == GROVE_OP_SUM) continue;
            fill((grove_dtype)t, V_SPECIAL, in, n);
            for (int dir = -1; dir < 2; dir++) {
                snprintf(what, sizeof what, "threads 1 vs 5: %s %s dir %d n=%zu", TYPE_NAME[t],
                         OP_NAME[op], dir, n);
                for (int k = 0; k < 2; k++)
                    ok_call(
                        c[k],
                        run_scan(c[k], (grove_dtype)t, (grove_op)op, 1, dir, in, heads, out[k], n),
                        what);
                if (first_diff((grove_dtype)t, out[0], out[1], n) < n) FAIL("%s", what);
            }
        }
    fill(GROVE_U64, V_RAND, in, n);
    for (int k = 0; k < 2; k++) {
        ok_call(c[k], grove_segsplit(c[k], 8, in, flags, heads, out[k], dest[k], n), "segsplit");
    }
    if (memcmp(out[0], out[1], n * 8) || memcmp(dest[0], dest[1], n * 4))
        FAIL("threads 1 vs 5: segsplit n=%zu", n);
    for (int k = 0; k < 2; k++) {
        memcpy(out[k], in, n * 8);
        ok_call(c[k],
                grove_sort_pairs(c[k], GROVE_U32, out[k], 4, (char *)out[k] + n * 4, n / 2, 0, 0),
                "sort");
    }
    if (memcmp(out[0], out[1], n * 8)) FAIL("threads 1 vs 5: sort n=%zu", n);
done:
    for (int k = 0; k < 2; k++) {
        grove_ctx_destroy(c[k]);
        free(out[k]);
        free(dest[k]);
    }
    free(in);
    free(heads);
    free(flags);
}

/* ---- argument errors ---- */

/* Expects status `want` and, for a failure, a message naming fn and (if given) arg. */
#define EXPECT(ctx, call, want, fn, arg)                                                           \
    expect_status((ctx), (call), (want), (fn), (arg), #call, __LINE__)

static void expect_status(grove_ctx *ctx, grove_status got, grove_status want, const char *fn,
                          const char *arg, const char *call, int line)
{
    const char *msg = ctx ? grove_ctx_last_error(ctx) : "";
    if (got != want) {
        fprintf(stderr, "FAIL %s:%d: %s returned %d (%s), want %d (%s); last error: %s\n", __FILE__,
                line, call, (int)got, grove_status_string(got), (int)want,
                grove_status_string(want), msg);
        tu_failures++;
    } else if (want != GROVE_OK && ctx &&
               ((fn && !strstr(msg, fn)) || (arg && !strstr(msg, arg)))) {
        fprintf(stderr, "FAIL %s:%d: %s: message \"%s\" should name %s and %s\n", __FILE__, line,
                call, msg, fn ? fn : "-", arg ? arg : "-");
        tu_failures++;
    }
    if (ctx) grove_ctx_clear_error(ctx);
}

static void test_invalid_args(void)
{
    grove_ctx *c = E.ctx, *failed = NULL;
    grove_ctx_opts o;
    uint32_t a[64], b[64], d32[64];
    uint64_t k64[64];
    uint8_t fl[64];
    size_t cnt;
    float lo[3], hi[3], pts[12] = {0};
    const size_t big = GROVE_PRIM_MAX_N + 1;
    const grove_status INV = GROVE_ERR_INVALID_ARG, LIM = GROVE_ERR_LIMIT;
    for (int i = 0; i < 64; i++) {
        a[i] = (uint32_t)i * 2654435761u;
        k64[i] = (uint64_t)a[i] << 20;
        fl[i] = (uint8_t)(i & 1);
    }

    /* contexts */
    EXPECT(NULL, grove_scan(NULL, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, a, b, 4), INV,
           NULL, NULL);
    EXPECT(NULL, grove_sort_keys(NULL, GROVE_U32, a, 4, 0, 0), INV, NULL, NULL);
    grove_ctx_default_opts(&o);
    o.backend = (grove_backend)9;
    grove_ctx_create(&o, &failed);
    EXPECT(failed, grove_reduce(failed, GROVE_U32, GROVE_OP_SUM, a, b, 4), INV, NULL, NULL);
    EXPECT(failed, grove_morton2_decode(failed, a, b, d32, 4), INV, NULL, NULL);
    grove_ctx_destroy(failed);

    /* scan */
    EXPECT(c, grove_scan(c, (grove_dtype)3, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, a, b, 4), INV,
           "grove_scan", "t must be");
    EXPECT(c, grove_scan(c, (grove_dtype)-1, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, a, b, 4), INV,
           "grove_scan", NULL);
    EXPECT(c, grove_scan(c, GROVE_U32, (grove_op)3, GROVE_SCAN_EXCLUSIVE, a, b, 4), INV,
           "grove_scan", "op");
    EXPECT(c, grove_scan(c, GROVE_U32, (grove_op)-1, GROVE_SCAN_EXCLUSIVE, a, b, 4), INV,
           "grove_scan", "op");
    EXPECT(c, grove_scan(c, GROVE_U32, GROVE_OP_SUM, (grove_scan_kind)2, a, b, 4), INV,
           "grove_scan", "kind");
    EXPECT(c, grove_scan(c, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, NULL, b, 4), INV,
           "grove_scan", "in");
    EXPECT(c, grove_scan(c, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, a, NULL, 4), INV,
           "grove_scan", "out");
    EXPECT(c, grove_scan(c, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, NULL, NULL, 0), GROVE_OK,
           NULL, NULL);
    EXPECT(c, grove_scan(c, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, a, a + 1, 8), INV,
           "grove_scan", "overlap");
    EXPECT(c, grove_scan(c, GROVE_U64, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, k64 + 1, k64, 8), INV,
           "grove_scan", "overlap");
    EXPECT(c, grove_scan(c, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, a, b, big), LIM,
           "grove_scan", "GROVE_PRIM_MAX_N");

    /* segscan */
    EXPECT(c,
           grove_segscan(c, GROVE_U32, GROVE_OP_MAX, GROVE_SCAN_INCLUSIVE, (grove_scan_dir)2, a, fl,
                         b, 4),
           INV, "grove_segscan", "dir");
    EXPECT(c,
           grove_segscan(c, GROVE_U32, GROVE_OP_MAX, GROVE_SCAN_INCLUSIVE, GROVE_SCAN_BACKWARD, a,
                         NULL, b, 4),
           INV, "grove_segscan", "heads");
    EXPECT(c,
           grove_segscan(c, GROVE_F32, GROVE_OP_MIN, GROVE_SCAN_INCLUSIVE, GROVE_SCAN_BACKWARD,
                         NULL, NULL, NULL, 0),
           GROVE_OK, NULL, NULL);
    EXPECT(c,
           grove_segscan(c, (grove_dtype)7, GROVE_OP_MAX, GROVE_SCAN_INCLUSIVE, GROVE_SCAN_FORWARD,
                         a, fl, b, 4),
           INV, "grove_segscan", NULL);
    EXPECT(c,
           grove_segscan(c, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_INCLUSIVE, GROVE_SCAN_FORWARD, a,
                         fl, b, big),
           LIM, "grove_segscan", NULL);

    /* split, segsplit, compact */
    EXPECT(c, grove_split(c, 3, a, fl, b, NULL, NULL, 4), INV, "grove_split", "elem_size");
    EXPECT(c, grove_split(c, 0, a, fl, b, NULL, NULL, 4), INV, "grove_split", "elem_size");
    EXPECT(c, grove_split(c, 16, a, fl, b, NULL, NULL, 4), INV, "grove_split", "elem_size");
    EXPECT(c, grove_split(c, 4, NULL, fl, b, NULL, NULL, 4), INV, "grove_split", "in");
    EXPECT(c, grove_split(c, 4, a, NULL, b, NULL, NULL, 4), INV, "grove_split", "flags");
    EXPECT(c, grove_split(c, 4, a, fl, NULL, NULL, NULL, 4), INV, "grove_split", "out");
    EXPECT(c, grove_split(c, 4, a, fl, a, NULL, NULL, 4), INV, "grove_split", "overlap");
    EXPECT(c, grove_split(c, 8, a, fl, a + 3, NULL, NULL, 4), INV, "grove_split", "overlap");
    EXPECT(c, grove_split(c, 4, a, fl, b, b + 2, NULL, 4), INV, "grove_split", "overlap");
    EXPECT(c, grove_split(c, 4, NULL, NULL, NULL, NULL, &cnt, 0), GROVE_OK, NULL, NULL);
    EXPECT(c, grove_split(c, 4, a, fl, b, d32, &cnt, big), LIM, "grove_split", NULL);
    EXPECT(c, grove_segsplit(c, 4, a, fl, NULL, b, NULL, 4), INV, "grove_segsplit", "heads");
    EXPECT(c, grove_segsplit(c, 5, a, fl, fl, b, NULL, 4), INV, "grove_segsplit", "elem_size");
    EXPECT(c, grove_segsplit(c, 8, a, fl, fl, b, d32, big), LIM, "grove_segsplit", NULL);
    EXPECT(c, grove_segsplit(c, 8, NULL, NULL, NULL, NULL, NULL, 0), GROVE_OK, NULL, NULL);
    EXPECT(c, grove_compact(c, 4, a, fl, b, NULL, 4), INV, "grove_compact", "num_selected");
    EXPECT(c, grove_compact(c, 4, NULL, NULL, NULL, NULL, 0), INV, "grove_compact", "num_selected");
    EXPECT(c, grove_compact(c, 2, a, fl, b, &cnt, 4), INV, "grove_compact", "elem_size");
    EXPECT(c, grove_compact(c, 4, a, NULL, b, &cnt, 4), INV, "grove_compact", "flags");
    EXPECT(c, grove_compact(c, 4, a, fl, b, &cnt, big), LIM, "grove_compact", NULL);
    cnt = 99;
    EXPECT(c, grove_compact(c, 4, NULL, NULL, NULL, &cnt, 0), GROVE_OK, NULL, NULL);
    CHECK(cnt == 0);

    /* reduce, bbox */
    EXPECT(c, grove_reduce(c, GROVE_U32, GROVE_OP_SUM, a, NULL, 4), INV, "grove_reduce", "out");
    EXPECT(c, grove_reduce(c, GROVE_U32, GROVE_OP_SUM, NULL, NULL, 0), INV, "grove_reduce", "out");
    EXPECT(c, grove_reduce(c, GROVE_U32, GROVE_OP_SUM, NULL, b, 4), INV, "grove_reduce", "in");
    EXPECT(c, grove_reduce(c, (grove_dtype)3, GROVE_OP_SUM, a, b, 4), INV, "grove_reduce", NULL);
    EXPECT(c, grove_reduce(c, GROVE_U32, (grove_op)5, a, b, 4), INV, "grove_reduce", "op");
    EXPECT(c, grove_reduce(c, GROVE_U64, GROVE_OP_SUM, k64, b, big), LIM, "grove_reduce", NULL);
    b[0] = 7;
    EXPECT(c, grove_reduce(c, GROVE_U32, GROVE_OP_MIN, NULL, b, 0), GROVE_OK, NULL, NULL);
    CHECK(b[0] == UINT32_MAX);
    EXPECT(c, grove_bbox(c, 1, pts, 2, lo, hi), INV, "grove_bbox", "dims");
    EXPECT(c, grove_bbox(c, 4, pts, 2, lo, hi), INV, "grove_bbox", "dims");
    EXPECT(c, grove_bbox(c, 2, NULL, 2, lo, hi), INV, "grove_bbox", "points");
    EXPECT(c, grove_bbox(c, 3, pts, 2, NULL, hi), INV, "grove_bbox", "lo");
    EXPECT(c, grove_bbox(c, 3, pts, 2, lo, NULL), INV, "grove_bbox", "hi");
    EXPECT(c, grove_bbox(c, 3, pts, big, lo, hi), LIM, "grove_bbox", NULL);
    EXPECT(c, grove_bbox(c, 3, NULL, 0, lo, hi), GROVE_OK, NULL, NULL);
    CHECK(lo[0] == INFINITY && lo[2] == INFINITY && hi[1] == -INFINITY);

    /* sort */
    EXPECT(c, grove_sort_keys(c, GROVE_F32, a, 4, 0, 0), INV, "grove_sort_keys", "key_type");
    EXPECT(c, grove_sort_keys(c, (grove_dtype)5, a, 4, 0, 0), INV, "grove_sort_keys", "key_type");
    EXPECT(c, grove_sort_keys(c, GROVE_U32, a, 4, -1, 0), INV, "grove_sort_keys", "begin_bit");
    EXPECT(c, grove_sort_keys(c, GROVE_U32, a, 4, 33, 0), INV, "grove_sort_keys", "begin_bit");
    EXPECT(c, grove_sort_keys(c, GROVE_U32, a, 4, 0, 33), INV, "grove_sort_keys", "end_bit");
    EXPECT(c, grove_sort_keys(c, GROVE_U32, a, 4, 0, 64), INV, "grove_sort_keys", "end_bit");
    EXPECT(c, grove_sort_keys(c, GROVE_U32, a, 4, 0, -8), INV, "grove_sort_keys", "end_bit");
    EXPECT(c, grove_sort_keys(c, GROVE_U32, a, 4, 20, 10), INV, "grove_sort_keys", "begin_bit");
    EXPECT(c, grove_sort_keys(c, GROVE_U64, k64, 4, 65, 0), INV, "grove_sort_keys", "begin_bit");
    EXPECT(c, grove_sort_keys(c, GROVE_U64, k64, 4, 40, 64), GROVE_OK, NULL, NULL);
    EXPECT(c, grove_sort_keys(c, GROVE_U64, k64, 4, 64, 0), GROVE_OK, NULL, NULL);
    EXPECT(c, grove_sort_keys(c, GROVE_U32, NULL, 4, 0, 0), INV, "grove_sort_keys", "keys");
    EXPECT(c, grove_sort_keys(c, GROVE_U32, NULL, 0, 0, 0), GROVE_OK, NULL, NULL);
    EXPECT(c, grove_sort_keys(c, GROVE_U32, a, big, 0, 0), LIM, "grove_sort_keys", NULL);
    EXPECT(c, grove_sort_pairs(c, GROVE_U32, a, 0, b, 4, 0, 0), INV, "grove_sort_pairs",
           "value_size");
    EXPECT(c, grove_sort_pairs(c, GROVE_U32, a, 2, b, 4, 0, 0), INV, "grove_sort_pairs",
           "value_size");
    EXPECT(c, grove_sort_pairs(c, GROVE_U32, a, 16, b, 4, 0, 0), INV, "grove_sort_pairs",
           "value_size");
    EXPECT(c, grove_sort_pairs(c, GROVE_U32, a, 4, NULL, 4, 0, 0), INV, "grove_sort_pairs",
           "values");
    EXPECT(c, grove_sort_pairs(c, GROVE_U32, a, 4, a + 2, 4, 0, 0), INV, "grove_sort_pairs",
           "overlap");
    EXPECT(c, grove_sort_pairs(c, GROVE_U32, a, 4, b, 4, 9, 3), INV, "grove_sort_pairs",
           "begin_bit");
    EXPECT(c, grove_sort_pairs(c, GROVE_U64, k64, 8, b, big, 0, 0), LIM, "grove_sort_pairs", NULL);

    /* Morton */
    EXPECT(c, grove_morton2_encode(c, NULL, a, b, 4), INV, "grove_morton2_encode", "x");
    EXPECT(c, grove_morton2_encode(c, a, NULL, b, 4), INV, "grove_morton2_encode", "y");
    EXPECT(c, grove_morton2_encode(c, a, a, NULL, 4), INV, "grove_morton2_encode", "codes");
    EXPECT(c, grove_morton2_encode(c, a, a, b, big), LIM, "grove_morton2_encode", NULL);
    EXPECT(c, grove_morton3_encode(c, a, a, NULL, k64, 4), INV, "grove_morton3_encode", "z");
    EXPECT(c, grove_morton3_encode(c, a, a, a, k64, big), LIM, "grove_morton3_encode", NULL);
    EXPECT(c, grove_morton2_decode(c, b, NULL, d32, 4), INV, "grove_morton2_decode", "x");
    EXPECT(c, grove_morton2_decode(c, b, d32, d32, 4), INV, "grove_morton2_decode", "overlap");
    EXPECT(c, grove_morton3_decode(c, k64, a, b, NULL, 4), INV, "grove_morton3_decode", "z");
    EXPECT(c, grove_morton3_decode(c, NULL, a, b, d32, 4), INV, "grove_morton3_decode", "codes");
    EXPECT(c, grove_morton3_decode(c, k64, a, b, d32, big), LIM, "grove_morton3_decode", NULL);
    EXPECT(c, grove_morton3_decode(c, NULL, NULL, NULL, NULL, 0), GROVE_OK, NULL, NULL);
    a[0] = 70000;
    EXPECT(c, grove_morton2_encode(c, a, a, b, 1), INV, "grove_morton2_encode", "index 0");
    a[0] = 1u << 21;
    EXPECT(c, grove_morton3_encode(c, b, b, a, k64, 1), INV, "grove_morton3_encode", "index 0");
}

/* The _device entry points: refused on the CPU; on CUDA, argument checks and size queries. */
static void test_device_entries(void)
{
    grove_ctx *c = E.ctx;
    size_t tb = 0;
    uint32_t h[4] = {1, 2, 3, 4};
    const grove_status UNS = GROVE_ERR_UNSUPPORTED, INV = GROVE_ERR_INVALID_ARG;
    const size_t big = GROVE_PRIM_MAX_N + 1;
    if (grove_ctx_backend(c) != GROVE_BACKEND_CUDA) {
        const char *need = "needs a CUDA context";
        EXPECT(c,
               grove_scan_device(c, NULL, &tb, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, NULL,
                                 NULL, 4, NULL),
               UNS, "grove_scan_device", need);
        EXPECT(c,
               grove_segscan_device(c, NULL, &tb, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE,
                                    GROVE_SCAN_FORWARD, NULL, NULL, NULL, 4, NULL),
               UNS, "grove_segscan_device", need);
        EXPECT(c, grove_split_device(c, NULL, &tb, 4, NULL, NULL, NULL, NULL, NULL, 4, NULL), UNS,
               "grove_split_device", need);
        EXPECT(c, grove_segsplit_device(c, NULL, &tb, 4, NULL, NULL, NULL, NULL, NULL, 4, NULL),
               UNS, "grove_segsplit_device", need);
        EXPECT(c, grove_compact_device(c, NULL, &tb, 4, NULL, NULL, NULL, NULL, 4, NULL), UNS,
               "grove_compact_device", need);
        EXPECT(c, grove_reduce_device(c, NULL, &tb, GROVE_U32, GROVE_OP_SUM, NULL, NULL, 4, NULL),
               UNS, "grove_reduce_device", need);
        EXPECT(c, grove_bbox_device(c, NULL, &tb, 2, NULL, NULL, 4, NULL), UNS, "grove_bbox_device",
               need);
        EXPECT(c, grove_sort_keys_device(c, NULL, &tb, GROVE_U32, NULL, NULL, 4, 0, 0, NULL), UNS,
               "grove_sort_keys_device", need);
        EXPECT(c,
               grove_sort_pairs_device(c, NULL, &tb, GROVE_U32, NULL, NULL, 4, NULL, NULL, 4, 0, 0,
                                       NULL),
               UNS, "grove_sort_pairs_device", need);
        EXPECT(c, grove_morton2_encode_device(c, NULL, NULL, NULL, 4, NULL), UNS,
               "grove_morton2_encode_device", need);
        EXPECT(c, grove_morton2_decode_device(c, NULL, NULL, NULL, 4, NULL), UNS,
               "grove_morton2_decode_device", need);
        EXPECT(c, grove_morton3_encode_device(c, NULL, NULL, NULL, NULL, 4, NULL), UNS,
               "grove_morton3_encode_device", need);
        EXPECT(c, grove_morton3_decode_device(c, NULL, NULL, NULL, NULL, 4, NULL), UNS,
               "grove_morton3_decode_device", need);
        return;
    }
    /* Size queries (d_temp == NULL) touch no array: NULL pointers are fine, temp_bytes > 0. */
#define QUERY(call, fn)                                                                            \
    do {                                                                                           \
        tb = 0;                                                                                    \
        EXPECT(c, call, GROVE_OK, fn, NULL);                                                       \
        CHECK_MSG(tb > 0, "%s: size query gave 0 bytes", fn);                                      \
    } while (0)
    QUERY(grove_scan_device(c, NULL, &tb, GROVE_U64, GROVE_OP_MAX, GROVE_SCAN_INCLUSIVE, NULL, NULL,
                            1000000, NULL),
          "grove_scan_device");
    QUERY(grove_segscan_device(c, NULL, &tb, GROVE_F32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE,
                               GROVE_SCAN_BACKWARD, NULL, NULL, NULL, 1000000, NULL),
          "grove_segscan_device");
    QUERY(grove_split_device(c, NULL, &tb, 8, NULL, NULL, NULL, NULL, NULL, 1000000, NULL),
          "grove_split_device");
    QUERY(grove_segsplit_device(c, NULL, &tb, 4, NULL, NULL, NULL, NULL, NULL, 1000000, NULL),
          "grove_segsplit_device");
    QUERY(grove_compact_device(c, NULL, &tb, 4, NULL, NULL, NULL, NULL, 1000000, NULL),
          "grove_compact_device");
    QUERY(grove_reduce_device(c, NULL, &tb, GROVE_F32, GROVE_OP_MIN, NULL, NULL, 1000000, NULL),
          "grove_reduce_device");
    QUERY(grove_bbox_device(c, NULL, &tb, 3, NULL, NULL, 1000000, NULL), "grove_bbox_device");
    QUERY(grove_sort_keys_device(c, NULL, &tb, GROVE_U64, NULL, NULL, 1000000, 0, 0, NULL),
          "grove_sort_keys_device");
    QUERY(grove_sort_pairs_device(c, NULL, &tb, GROVE_U32, NULL, NULL, 8, NULL, NULL, 1000000, 3,
                                  29, NULL),
          "grove_sort_pairs_device");
    QUERY(grove_scan_device(c, NULL, &tb, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, NULL, NULL,
                            0, NULL),
          "grove_scan_device");
#undef QUERY
    /* Argument errors are found before anything reaches the GPU (h stands in for d_temp). */
    EXPECT(c,
           grove_scan_device(c, NULL, NULL, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, NULL,
                             NULL, 4, NULL),
           INV, "grove_scan_device", "temp_bytes");
    EXPECT(c,
           grove_scan_device(c, NULL, &tb, (grove_dtype)3, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, NULL,
                             NULL, 4, NULL),
           INV, "grove_scan_device", NULL);
    EXPECT(c,
           grove_scan_device(c, h, &tb, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, NULL, h, 4,
                             NULL),
           INV, "grove_scan_device", "d_in");
    EXPECT(c,
           grove_scan_device(c, NULL, &tb, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, NULL,
                             NULL, big, NULL),
           GROVE_ERR_LIMIT, "grove_scan_device", NULL);
    EXPECT(c,
           grove_segscan_device(c, h, &tb, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE,
                                GROVE_SCAN_FORWARD, h, NULL, h + 1, 1, NULL),
           INV, "grove_segscan_device", "d_heads");
    EXPECT(c, grove_split_device(c, h, &tb, 6, h, NULL, NULL, NULL, NULL, 4, NULL), INV,
           "grove_split_device", "elem_size");
    EXPECT(c, grove_segsplit_device(c, h, &tb, 4, h, NULL, NULL, NULL, NULL, 4, NULL), INV,
           "grove_segsplit_device", "d_flags");
    EXPECT(c, grove_compact_device(c, h, &tb, 4, h, (uint8_t *)h, h + 2, NULL, 1, NULL), INV,
           "grove_compact_device", "d_num_selected");
    EXPECT(c, grove_reduce_device(c, h, &tb, GROVE_U32, GROVE_OP_SUM, h, NULL, 1, NULL), INV,
           "grove_reduce_device", "d_out");
    EXPECT(c, grove_bbox_device(c, NULL, &tb, 5, NULL, NULL, 4, NULL), INV, "grove_bbox_device",
           "dims");
    EXPECT(c, grove_sort_keys_device(c, NULL, &tb, GROVE_F32, NULL, NULL, 4, 0, 0, NULL), INV,
           "grove_sort_keys_device", "key_type");
    EXPECT(c, grove_sort_keys_device(c, h, &tb, GROVE_U32, h, h, 4, 0, 0, NULL), INV,
           "grove_sort_keys_device", "overlap");
    EXPECT(
        c,
        grove_sort_pairs_device(c, NULL, &tb, GROVE_U32, NULL, NULL, 3, NULL, NULL, 4, 0, 0, NULL),
        INV, "grove_sort_pairs_device", "value_size");
    EXPECT(
        c,
        grove_sort_pairs_device(c, NULL, &tb, GROVE_U64, NULL, NULL, 4, NULL, NULL, 4, 0, 65, NULL),
        INV, "grove_sort_pairs_device", "end_bit");
    EXPECT(c, grove_morton2_encode_device(c, NULL, h, h + 1, 1, NULL), INV,
           "grove_morton2_encode_device", "d_x");
    EXPECT(c, grove_morton3_decode_device(c, NULL, h, h + 1, h + 2, 1, NULL), INV,
           "grove_morton3_decode_device", "d_codes");
    EXPECT(c, grove_morton3_encode_device(c, h, h, h, NULL, big, NULL), GROVE_ERR_LIMIT,
           "grove_morton3_encode_device", NULL);
    /* Nothing reached the GPU, so the context is still healthy. */
    EXPECT(c, grove_ctx_synchronize(c), GROVE_OK, NULL, NULL);
}

/* ---- driver ---- */

static void run_size(size_t n)
{
    E.keep = E.light ? 1 : n >= 200000 ? 3 : H_COUNT;
    for (int h = 0; h < H_COUNT; h++) {
        E.heads[h] = (uint8_t *)tu_malloc(n);
        make_heads(E.heads[h], n, h);
    }
    test_scans(n);
    test_reduce(n);
    test_bbox(n);
    test_splits(n);
    test_sort(n);
    test_morton(n);
    for (int h = 0; h < H_COUNT; h++) free(E.heads[h]);
}

static int usage(void)
{
    fprintf(stderr, "usage: test_prim [--backend cpu|cuda] [--large N] [--seed S]\n");
    return 2;
}

/* Device-memory exhaustion through the context's device_mem_limit (CUDA only): the failing call
 * returns the exact status with a message naming the buffer, leaves the caller's output as it
 * was, frees what it had allocated, and the context keeps working. */
static void test_device_mem_limit(void)
{
    const size_t n = 1u << 20; /* 4 MB of input: more than the 1 MB limit */
    grove_ctx_opts o;
    grove_ctx *ctx = NULL;
    uint32_t *in = tu_malloc(n * 4), *out = tu_malloc(n * 4);
    grove_ctx_default_opts(&o);
    o.backend = GROVE_BACKEND_CUDA;
    o.device_mem_limit = 1u << 20;
    if (grove_ctx_create(&o, &ctx) != GROVE_OK) {
        FAIL("cannot create a limited CUDA context: %s", grove_ctx_last_error(ctx));
        grove_ctx_destroy(ctx);
        free(in);
        free(out);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        in[i] = tu_u32(&E.rng);
        out[i] = 0xDEADBEEFu;
    }
    CHECK_STATUS(ctx, grove_scan(ctx, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, in, out, n),
                 GROVE_ERR_DEVICE_OUT_OF_MEMORY);
    CHECK_MSG(strstr(grove_ctx_last_error(ctx), "device_mem_limit of 1048576 bytes") != NULL,
              "message: %s", grove_ctx_last_error(ctx));
    CHECK_MSG(strstr(grove_ctx_last_error(ctx), "grove_scan") != NULL, "message: %s",
              grove_ctx_last_error(ctx));
    {
        size_t untouched = 0;
        for (size_t i = 0; i < n; i++) untouched += out[i] == 0xDEADBEEFu;
        CHECK_MSG(untouched == n, "%zu of %zu output elements changed by a failed call",
                  n - untouched, n);
    }
    /* A call that fits must still work (the failed call gave back what it held), repeatedly. */
    for (int rep = 0; rep < 3; rep++) {
        const size_t m = 10000;
        uint32_t acc = 0;
        CHECK_OK(ctx, grove_scan(ctx, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, in, out, m));
        for (size_t i = 0; i < m; i++) {
            if (out[i] != acc) {
                FAIL("limited context: scan wrong at %zu", i);
                break;
            }
            acc += in[i];
        }
    }
    /* Sorting needs keys in and out plus scratch: also over the limit at n, fine at small m. */
    CHECK_STATUS(ctx, grove_sort_keys(ctx, GROVE_U32, in, n, 0, 0), GROVE_ERR_DEVICE_OUT_OF_MEMORY);
    CHECK_OK(ctx, grove_sort_keys(ctx, GROVE_U32, in, 1000, 0, 0));
    grove_ctx_destroy(ctx);
    free(in);
    free(out);
}

int main(int argc, char **argv)
{
    tu_args args = {"cpu", 0, 20240611, NULL};
    const char *backend;
    size_t large;
    uint64_t seed;
    grove_ctx_opts o;
    if (tu_parse_args(argc, argv, &args) != 0) return usage();
    backend = args.backend;
    large = args.large;
    seed = args.seed;
    E.rng.s = seed;
    grove_ctx_default_opts(&o);
    if (!strcmp(backend, "cuda")) {
        if (tu_cuda_ctx("test_prim", NULL, &E.ctx) != 0) return TEST_SKIP;
        o.backend = GROVE_BACKEND_CPU;
        if (grove_ctx_create(&o, &E.cpu) != GROVE_OK) {
            fprintf(stderr, "cannot create a CPU context: %s\n", grove_ctx_last_error(E.cpu));
            return 1;
        }
    } else if (!strcmp(backend, "cpu")) {
        o.backend = GROVE_BACKEND_CPU;
        if (grove_ctx_create(&o, &E.ctx) != GROVE_OK) {
            fprintf(stderr, "cannot create a CPU context: %s\n", grove_ctx_last_error(E.ctx));
            return 1;
        }
    } else {
        return usage();
    }
    printf("test_prim: backend %s, seed %" PRIu64 "\n", backend, seed);

    if (large) {
        E.light = 1;
        printf("large pass: n = %zu\n", large);
        run_size(large);
    } else {
        test_invalid_args();
        for (size_t i = 0; i < sizeof SIZES / sizeof SIZES[0]; i++) run_size(SIZES[i]);
        if (!E.cpu) {
            /* Again with 7 threads: 7 chunks put chunk boundaries inside and between segments
             * in many more ways than the default thread count does. */
            grove_ctx *dflt = E.ctx;
            o.num_threads = 7;
            if (grove_ctx_create(&o, &E.ctx) == GROVE_OK) {
                printf("again with 7 CPU threads\n");
                run_size(65537);
                run_size(100003);
            } else {
                FAIL("cannot create a 7-thread CPU context: %s", grove_ctx_last_error(E.ctx));
            }
            grove_ctx_destroy(E.ctx);
            E.ctx = dflt;
            test_thread_independence(65537);
            test_thread_independence(1000003);
        }
        test_device_entries();
        if (E.cpu) test_device_mem_limit();
    }
    grove_ctx_destroy(E.ctx);
    grove_ctx_destroy(E.cpu);
    return tu_finish("test_prim");
}
