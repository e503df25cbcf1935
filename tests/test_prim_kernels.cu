/*
 * test_prim_kernels.cu - the scan, segmented scan, split and segmented split CUDA launchers of
 * prim_cuda.h, called directly with device pointers, against sequential references.
 *
 *   test_prim_kernels              sizes 0 .. 10^7, every operator, type and head/flag pattern
 *   test_prim_kernels --quick      a few small sizes and patterns (for compute-sanitizer)
 *   test_prim_kernels --large N    one size N with a subset of the cases
 *
 * This checks what test_prim cannot through the public API: input, output, dest, head and flag
 * pointers off 16-byte alignment (by one element, or one byte for heads and flags, which takes
 * the launchers' non-vector paths), temp storage filled with garbage (the launchers must clear
 * what they rely on), outputs filled with a poison value and the bytes around them checked to
 * be untouched, f32 MAX/MIN over NaN, infinities and signed zeros compared bit for bit, and
 * sizes on the tile edges (8192 u32 / 4096 u64 elements).
 *
 * Exit 0: every check passed; 1: a check failed or a CUDA call failed; 77: no GPU, or no size
 * fitted in the device's free memory.
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>
#include <vector>

#include "core.h"
#include "core_cuda.h"
#include "prim_cuda.h"
#include "testutil.h"

/* Thrown once a CUDA or launcher error has been printed: the device state can no longer be
 * trusted, so the run stops there and main() reports the failure. */
struct Abort {
};

static grove_ctx g_ctx;
static cudaStream_t g_s;
static long g_checks = 0;          /* failures are counted in testutil.h's tu_failures */
static char g_what[320] = "setup"; /* the case being run, for error messages */

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            printf("FAIL [%s] %s:%d: %s: %s\n", g_what, __FILE__, __LINE__, #x,                    \
                   cudaGetErrorString(e_));                                                        \
            throw Abort();                                                                         \
        }                                                                                          \
    } while (0)
#define GK(x)                                                                                      \
    do {                                                                                           \
        grove_status s_ = (x);                                                                     \
        if (s_ != GROVE_OK) {                                                                      \
            printf("FAIL [%s] %s:%d: %s returned %d: %s\n", g_what, __FILE__, __LINE__, #x,        \
                   (int)s_, g_ctx.err);                                                            \
            throw Abort();                                                                         \
        }                                                                                          \
    } while (0)

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    fflush(stdout);
    ++tu_failures;
}

static inline uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
/* Random value i of stream `seed`: data does not depend on the order it is generated in. */
static inline uint64_t H(uint64_t seed, uint64_t i)
{
    return mix(seed * 0x100000001B3ull ^ mix(i));
}

// ---------------------------------------------------------------- device buffers
struct Buf {
    void *p = nullptr;
    size_t cap = 0;
    void need(size_t b)
    {
        if (b <= cap) return;
        release();
        CK(cudaMalloc(&p, b));
        cap = b;
    }
    void release()
    {
        if (p) CK(cudaFree(p));
        p = nullptr;
        cap = 0;
    }
};
static Buf d_in, d_out, d_heads, d_flags, d_dest, d_temp, d_cnt;

static void *temp_for(size_t bytes)
{
    d_temp.need(bytes + 256);
    return d_temp.p;
}

// ---------------------------------------------------------------- ops (host)
template <typename T> static T hop(grove_op op, T a, T b);
template <> uint32_t hop(grove_op op, uint32_t a, uint32_t b)
{
    return op == GROVE_OP_SUM ? a + b : op == GROVE_OP_MAX ? std::max(a, b) : std::min(a, b);
}
template <> uint64_t hop(grove_op op, uint64_t a, uint64_t b)
{
    return op == GROVE_OP_SUM ? a + b : op == GROVE_OP_MAX ? std::max(a, b) : std::min(a, b);
}
/* prim.h's f32 order: NaN is ignored unless both are NaN, and -0.0 < +0.0. */
static float fmax_ord(float a, float b)
{
    if (a > b) return a;
    if (b > a) return b;
    if (a != a) return b;
    if (b != b) return a;
    return std::signbit(a) ? b : a;
}
static float fmin_ord(float a, float b)
{
    if (a < b) return a;
    if (b < a) return b;
    if (a != a) return b;
    if (b != b) return a;
    return std::signbit(a) ? a : b;
}
template <> float hop(grove_op op, float a, float b)
{
    return op == GROVE_OP_SUM ? a + b : op == GROVE_OP_MAX ? fmax_ord(a, b) : fmin_ord(a, b);
}
template <typename T> static T ident(grove_op op);
template <> uint32_t ident(grove_op op) { return op == GROVE_OP_MIN ? 0xFFFFFFFFu : 0u; }
template <> uint64_t ident(grove_op op) { return op == GROVE_OP_MIN ? ~0ull : 0ull; }
template <> float ident(grove_op op)
{
    return op == GROVE_OP_SUM ? 0.0f : op == GROVE_OP_MAX ? -INFINITY : INFINITY;
}
template <typename T> static grove_dtype dt();
template <> grove_dtype dt<uint32_t>() { return GROVE_U32; }
template <> grove_dtype dt<uint64_t>() { return GROVE_U64; }
template <> grove_dtype dt<float>() { return GROVE_F32; }

/* Bit for bit, except that any NaN matches any NaN (prim.h does not fix NaN payloads). */
template <typename T> static bool same(T a, T b) { return a == b; }
template <> bool same(float a, float b)
{
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return x == y || (std::isnan(a) && std::isnan(b));
}
static std::string show(uint32_t v)
{
    char b[48];
    snprintf(b, sizeof b, "%u (0x%08x)", v, v);
    return b;
}
static std::string show(uint64_t v)
{
    char b[64];
    snprintf(b, sizeof b, "%llu (0x%016llx)", (unsigned long long)v, (unsigned long long)v);
    return b;
}
static std::string show(float v)
{
    uint32_t x;
    memcpy(&x, &v, 4);
    char b[64];
    snprintf(b, sizeof b, "%.9g (0x%08x)", (double)v, x);
    return b;
}

static const char *opname(grove_op o)
{
    return o == GROVE_OP_SUM ? "sum" : o == GROVE_OP_MAX ? "max" : "min";
}
template <typename T> static const char *tname()
{
    return sizeof(T) == 8 ? "u64" : std::is_same<T, float>::value ? "f32" : "u32";
}

// ---------------------------------------------------------------- data
template <typename T> static void gen(std::vector<T> &v, size_t n, uint64_t seed, int flavour);
template <> void gen(std::vector<uint32_t> &v, size_t n, uint64_t seed, int)
{
    v.resize(n);
    for (size_t i = 0; i < n; ++i) v[i] = (uint32_t)H(seed, i);
}
template <> void gen(std::vector<uint64_t> &v, size_t n, uint64_t seed, int)
{
    v.resize(n);
    for (size_t i = 0; i < n; ++i) v[i] = H(seed, i);
}
/* flavour 0: small integers, so that f32 sums are exact in any order and can be compared bit
 * for bit; 1: values with NaN, +-inf and +-0 for MAX/MIN, with all-NaN runs at the start, in
 * the second u64 tile and across the first u32 tile edge. */
template <> void gen(std::vector<float> &v, size_t n, uint64_t seed, int flavour)
{
    v.resize(n);
    for (size_t i = 0; i < n; ++i) {
        uint64_t h = H(seed, i);
        if (flavour == 0) {
            v[i] = (float)((int)(h % 17) - 8);
            continue;
        }
        // per mille: 10 NaN, 5 +inf, 5 -inf, 10 -0, 10 +0, the rest in (-1e6, 1e6)
        static const float special[5] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f};
        static const unsigned upto[5] = {10, 15, 20, 30, 40};
        const unsigned r = (unsigned)(h % 1000);
        float x = (float)((double)(h >> 20) / (double)(1ull << 44) * 2e6 - 1e6);
        for (int k = 4; k >= 0; --k)
            if (r < upto[k]) x = special[k];
        if (i < 40 || (i >= 5000 && i < 5100) || (i >= 8190 && i < 8200)) x = NAN;
        v[i] = x;
    }
}

/* Head patterns: every element a head, none (one segment), random 1/2, 1/100, 1/10^4, and
 * heads placed on and next to the u64 and u32 tile edges. Head bytes are random non-zero
 * values, not just 1. */
static const char *hpname[] = {"all", "none", "r1/2", "r1/100", "r1/1e4", "tilebd"};
static const int NHP = 6;
static void gen_heads(std::vector<uint8_t> &h, size_t n, int pat, uint64_t seed)
{
    h.resize(n);
    for (size_t i = 0; i < n; ++i) {
        uint64_t r = H(seed, i);
        bool on;
        switch (pat) {
        case 0: on = true; break;
        case 1: on = false; break;
        case 2: on = r % 2 == 0; break;
        case 3: on = r % 100 == 0; break;
        case 4: on = r % 10000 == 0; break;
        default: on = i % 4096 == 0 || i % 8192 == 8191 || i % 4096 == 1; break;
        }
        h[i] = on ? (uint8_t)((r >> 40) % 255 + 1) : 0;
    }
}
static const char *fpname[] = {"all", "none", "r1/2", "r1/1000"};
static const int NFP = 4;
static void gen_flags(std::vector<uint8_t> &f, size_t n, int pat, uint64_t seed)
{
    if (pat < 3) {
        gen_heads(f, n, pat, seed);
        return;
    }
    f.resize(n);
    for (size_t i = 0; i < n; ++i) {
        uint64_t r = H(seed, i);
        f[i] = r % 1000 == 0 ? (uint8_t)((r >> 40) % 255 + 1) : 0;
    }
}

/* Copies v to b at byte offset off_bytes (< 64: the offsets make misaligned pointers). */
template <typename T> static void up(Buf &b, const std::vector<T> &v, size_t off_bytes)
{
    b.need(v.size() * sizeof(T) + 64);
    CK(cudaStreamSynchronize(g_s));
    if (!v.empty())
        CK(cudaMemcpy((char *)b.p + off_bytes, v.data(), v.size() * sizeof(T),
                      cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());
}
template <typename T> static void down(std::vector<T> &v, const void *p, size_t n)
{
    v.resize(n);
    CK(cudaStreamSynchronize(g_s));
    if (n) CK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
}

template <typename T>
static bool compare(const char *what, const std::vector<T> &got, const std::vector<T> &ref,
                    size_t n)
{
    ++g_checks;
    size_t bad = 0, first = (size_t)-1;
    for (size_t i = 0; i < n; ++i)
        if (!same(got[i], ref[i]) && bad++ == 0) first = i;
    if (!bad) return true;
    fail("%s: %zu of %zu wrong, first at index %zu: got %s, want %s", what, bad, n, first,
         show(got[first]).c_str(), show(ref[first]).c_str());
    return false;
}

/* The poison must survive in the bytes of b before `off` and in up to 32 bytes after
 * off + len: a kernel that writes past its output but inside the allocation is invisible to
 * memcheck. */
static void check_guard(const char *what, const Buf &b, size_t off, size_t len, uint8_t poison)
{
    ++g_checks;
    const size_t post = std::min<size_t>(32, b.cap - off - len);
    uint8_t pre_b[64], post_b[32];
    CK(cudaStreamSynchronize(g_s));
    if (off) CK(cudaMemcpy(pre_b, b.p, off, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(post_b, (const char *)b.p + off + len, post, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < off; ++i)
        if (pre_b[i] != poison)
            return fail("%s: byte %zu before the output was overwritten (0x%02x)", what, off - i,
                        pre_b[i]);
    for (size_t i = 0; i < post; ++i)
        if (post_b[i] != poison)
            return fail("%s: byte %zu past the end of the output was overwritten (0x%02x)", what, i,
                        post_b[i]);
}

// ---------------------------------------------------------------- references
template <typename T>
static void ref_segscan(grove_op op, bool excl, bool bwd, const T *in, const uint8_t *heads, T *out,
                        size_t n)
{
    T acc{};
    if (!bwd) {
        for (size_t i = 0; i < n; ++i) {
            bool s = i == 0 || (heads && heads[i]);
            T e = s ? ident<T>(op) : acc;
            acc = s ? in[i] : hop<T>(op, acc, in[i]);
            out[i] = excl ? e : acc;
        }
    } else {
        for (size_t k = n; k-- > 0;) {
            bool s = k == n - 1 || heads[k + 1];
            T e = s ? ident<T>(op) : acc;
            acc = s ? in[k] : hop<T>(op, in[k], acc);
            out[k] = excl ? e : acc;
        }
    }
}

/* heads == NULL: one segment (plain split), and *nf receives the number flagged. */
template <typename P>
static void ref_split(const P *in, const uint8_t *fl, const uint8_t *heads, P *out, uint32_t *dest,
                      size_t n, uint64_t *nf)
{
    if (nf) *nf = 0;
    size_t s = 0;
    while (s < n) {
        size_t e = s + 1;
        if (heads)
            while (e < n && !heads[e]) ++e;
        else
            e = n;
        size_t F = 0;
        for (size_t i = s; i < e; ++i) F += fl[i] != 0;
        size_t a = s, b = s + F;
        for (size_t i = s; i < e; ++i) {
            size_t p = fl[i] ? a++ : b++;
            out[p] = in[i];
            dest[i] = (uint32_t)p;
        }
        if (nf) *nf = F;
        s = e;
    }
}

// ---------------------------------------------------------------- scan tests
/* Byte offsets of the device pointers from their (256-byte aligned) buffers: in and out by one
 * element, heads and flags (aux) by one byte, dest by one u32. */
struct Off {
    size_t in = 0, out = 0, aux = 0, dest = 0;
};

/* in is already in d_in (+o.in) and, for seg, heads in d_heads (+o.aux). */
template <typename T>
static void test_scan(const std::vector<T> &in, const std::vector<uint8_t> *heads, size_t n,
                      grove_op op, grove_scan_kind kind, bool seg, grove_scan_dir dir, Off o,
                      bool inplace, const char *tag)
{
    snprintf(g_what, sizeof g_what, "%s %s %s %s%s n=%zu %s off=%zu/%zu/%zu%s",
             seg ? "segscan" : "scan", tname<T>(), opname(op),
             kind == GROVE_SCAN_EXCLUSIVE ? "excl" : "incl",
             seg ? (dir == GROVE_SCAN_BACKWARD ? " bwd" : " fwd") : "", n, tag, o.in, o.out, o.aux,
             inplace ? " inplace" : "");
    const T *din = (const T *)((char *)d_in.p + o.in);
    T *dout = inplace ? (T *)din : (T *)((char *)d_out.p + o.out);
    if (inplace) {
        // d_in must hold the input whatever earlier cases did to it
        if (n) CK(cudaMemcpy((void *)din, in.data(), n * sizeof(T), cudaMemcpyHostToDevice));
        CK(cudaDeviceSynchronize());
    } else {
        CK(cudaMemsetAsync(d_out.p, 0xAB, d_out.cap, g_s));
    }
    const uint8_t *dh = seg ? (const uint8_t *)d_heads.p + o.aux : nullptr;
    size_t tb = 0;
    if (seg)
        GK(grove__cuda_segscan(&g_ctx, nullptr, &tb, dt<T>(), op, kind, dir, din, dh, dout, n,
                               g_s));
    else
        GK(grove__cuda_scan(&g_ctx, nullptr, &tb, dt<T>(), op, kind, din, dout, n, g_s));
    if (tb < 1) fail("%s: temp_bytes is 0", g_what);
    void *tmp = temp_for(tb);
    CK(cudaMemsetAsync(tmp, 0x5A, tb, g_s));
    if (seg)
        GK(grove__cuda_segscan(&g_ctx, tmp, &tb, dt<T>(), op, kind, dir, din, dh, dout, n, g_s));
    else
        GK(grove__cuda_scan(&g_ctx, tmp, &tb, dt<T>(), op, kind, din, dout, n, g_s));
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(g_s));
    std::vector<T> got, ref(n);
    down(got, dout, n);
    ref_segscan<T>(op, kind == GROVE_SCAN_EXCLUSIVE, seg && dir == GROVE_SCAN_BACKWARD, in.data(),
                   seg ? heads->data() : nullptr, ref.data(), n);
    compare(g_what, got, ref, n);
    if (inplace) {
        // the next cases read the input from d_in; g_s does not wait for the legacy stream
        if (n) CK(cudaMemcpy((void *)din, in.data(), n * sizeof(T), cudaMemcpyHostToDevice));
        CK(cudaDeviceSynchronize());
    } else {
        check_guard(g_what, d_out, o.out, n * sizeof(T), 0xAB);
    }
}

template <typename T> static void scan_suite(size_t n, uint64_t seed, bool full_heads, bool aligns)
{
    const grove_op ops[3] = {GROVE_OP_SUM, GROVE_OP_MAX, GROVE_OP_MIN};
    const bool f32 = std::is_same<T, float>::value;
    // f32 SUM runs on exact small integers only, MAX/MIN on the special values only
    for (int fl = 0; fl < (f32 ? 2 : 1); ++fl) {
        std::vector<T> in;
        gen(in, n, seed + fl, fl);
        up(d_in, in, 0);
        d_out.need(n * sizeof(T) + 64);
        for (int oi = 0; oi < 3; ++oi) {
            grove_op op = ops[oi];
            if (f32 && ((fl == 0) != (op == GROVE_OP_SUM))) continue;
            for (int kd = 0; kd < 2; ++kd) {
                grove_scan_kind kind = (grove_scan_kind)kd;
                test_scan<T>(in, nullptr, n, op, kind, false, GROVE_SCAN_FORWARD, Off{}, false, "");
                if (aligns) {
                    Off o;
                    o.out = sizeof(T);
                    test_scan<T>(in, nullptr, n, op, kind, false, GROVE_SCAN_FORWARD, o, false, "");
                    test_scan<T>(in, nullptr, n, op, kind, false, GROVE_SCAN_FORWARD, Off{}, true,
                                 "");
                }
            }
        }
        if (aligns) {
            up(d_in, in, sizeof(T));
            Off o;
            o.in = sizeof(T);
            o.out = sizeof(T);
            test_scan<T>(in, nullptr, n, fl ? GROVE_OP_MAX : GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE,
                         false, GROVE_SCAN_FORWARD, o, false, "");
            up(d_in, in, 0);
        }
        for (int hp = 0; hp < NHP; ++hp) {
            if (!full_heads && hp != 3 && hp != 2 && hp != 5) continue;
            std::vector<uint8_t> h;
            gen_heads(h, n, hp, seed * 7 + hp);
            up(d_heads, h, 0);
            for (int oi = 0; oi < 3; ++oi) {
                grove_op op = ops[oi];
                if (f32 && ((fl == 0) != (op == GROVE_OP_SUM))) continue;
                for (int kd = 0; kd < 2; ++kd)
                    for (int dr = 0; dr < 2; ++dr)
                        test_scan<T>(in, &h, n, op, (grove_scan_kind)kd, true, (grove_scan_dir)dr,
                                     Off{}, false, hpname[hp]);
            }
            if (aligns && hp == 3) {
                up(d_heads, h, 1);
                Off o;
                o.aux = 1;
                const grove_op op = fl ? GROVE_OP_MIN : GROVE_OP_SUM;
                for (int dr = 0; dr < 2; ++dr) {
                    test_scan<T>(in, &h, n, op, GROVE_SCAN_INCLUSIVE, true, (grove_scan_dir)dr, o,
                                 false, hpname[hp]);
                    test_scan<T>(in, &h, n, op, GROVE_SCAN_EXCLUSIVE, true, (grove_scan_dir)dr, o,
                                 true, hpname[hp]);
                }
            }
        }
    }
}

// ---------------------------------------------------------------- split tests
/* in, flags and heads are already in d_in (+o.in), d_flags and d_heads (+o.aux). */
template <typename P>
static void test_split(const std::vector<P> &in, const std::vector<uint8_t> &fl,
                       const std::vector<uint8_t> *heads, size_t n, bool with_dest, bool with_nf,
                       Off o, const char *tag)
{
    snprintf(g_what, sizeof g_what, "%s e%zu n=%zu %s dest=%d nf=%d off=%zu/%zu/%zu/%zu",
             heads ? "segsplit" : "split", sizeof(P), n, tag, (int)with_dest, (int)with_nf, o.in,
             o.out, o.aux, o.dest);
    const P *din = (const P *)((char *)d_in.p + o.in);
    P *dout = (P *)((char *)d_out.p + o.out);
    uint32_t *ddest = with_dest ? (uint32_t *)((char *)d_dest.p + o.dest) : nullptr;
    const uint8_t *dfl = (const uint8_t *)d_flags.p + o.aux;
    const uint8_t *dh = heads ? (const uint8_t *)d_heads.p + o.aux : nullptr;
    CK(cudaMemsetAsync(d_out.p, 0xAB, d_out.cap, g_s));
    if (with_dest) CK(cudaMemsetAsync(d_dest.p, 0xCD, d_dest.cap, g_s));
    d_cnt.need(64);
    CK(cudaMemsetAsync(d_cnt.p, 0xEE, 64, g_s));
    uint64_t *dnf = with_nf ? (uint64_t *)d_cnt.p : nullptr;
    size_t tb = 0;
    if (heads)
        GK(grove__cuda_segsplit(&g_ctx, nullptr, &tb, sizeof(P), din, dfl, dh, dout, ddest, n,
                                g_s));
    else
        GK(grove__cuda_split(&g_ctx, nullptr, &tb, sizeof(P), din, dfl, dout, ddest, dnf, n, g_s));
    if (tb < 1) fail("%s: temp_bytes is 0", g_what);
    void *tmp = temp_for(tb);
    CK(cudaMemsetAsync(tmp, 0x5A, tb, g_s));
    if (heads)
        GK(grove__cuda_segsplit(&g_ctx, tmp, &tb, sizeof(P), din, dfl, dh, dout, ddest, n, g_s));
    else
        GK(grove__cuda_split(&g_ctx, tmp, &tb, sizeof(P), din, dfl, dout, ddest, dnf, n, g_s));
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(g_s));
    std::vector<P> got, ref(n);
    std::vector<uint32_t> gd, rd(n);
    uint64_t rnf = 0, gnf = 0;
    down(got, dout, n);
    if (with_dest) down(gd, ddest, n);
    if (with_nf) CK(cudaMemcpy(&gnf, dnf, 8, cudaMemcpyDeviceToHost));
    ref_split<P>(in.data(), fl.data(), heads ? heads->data() : nullptr, ref.data(), rd.data(), n,
                 heads ? nullptr : &rnf);
    compare(g_what, got, ref, n);
    check_guard(g_what, d_out, o.out, n * sizeof(P), 0xAB);
    if (with_dest) {
        std::string w = std::string(g_what) + " [dest]";
        compare(w.c_str(), gd, rd, n);
        check_guard(w.c_str(), d_dest, o.dest, n * 4, 0xCD);
    }
    if (with_nf) {
        ++g_checks;
        if (gnf != rnf)
            fail("%s: num_flagged %llu, want %llu", g_what, (unsigned long long)gnf,
                 (unsigned long long)rnf);
        check_guard((std::string(g_what) + " [num_flagged]").c_str(), d_cnt, 0, 8, 0xEE);
    }
}

template <typename P> static void split_suite(size_t n, uint64_t seed, bool full, bool aligns)
{
    std::vector<P> in;
    gen(in, n, seed, 0);
    up(d_in, in, 0);
    d_out.need(n * sizeof(P) + 64);
    d_dest.need(n * 4 + 64);
    for (int fp = 0; fp < NFP; ++fp) {
        std::vector<uint8_t> f;
        gen_flags(f, n, fp, seed * 3 + fp);
        up(d_flags, f, 0);
        char tag[64];
        snprintf(tag, sizeof tag, "flags=%s", fpname[fp]);
        for (int d = 0; d < 2; ++d)
            for (int nf = 0; nf < 2; ++nf)
                if (full || d == nf) test_split<P>(in, f, nullptr, n, d, nf, Off{}, tag);
        for (int hp = 0; hp < NHP; ++hp) {
            if (!full && hp != 3 && hp != 5 && hp != 2) continue;
            std::vector<uint8_t> h;
            gen_heads(h, n, hp, seed * 11 + hp);
            up(d_heads, h, 0);
            snprintf(tag, sizeof tag, "flags=%s heads=%s", fpname[fp], hpname[hp]);
            for (int d = 0; d < 2; ++d)
                if (full || d == 1) test_split<P>(in, f, &h, n, d, false, Off{}, tag);
            if (aligns && fp == 2 && hp == 3) {
                up(d_in, in, sizeof(P));
                up(d_flags, f, 1);
                up(d_heads, h, 1);
                Off o;
                o.in = sizeof(P);
                o.out = sizeof(P);
                o.aux = 1;
                o.dest = 4;
                test_split<P>(in, f, &h, n, true, false, o, tag);
                test_split<P>(in, f, nullptr, n, true, true, o, tag);
                up(d_in, in, 0);
                up(d_flags, f, 0);
            }
        }
    }
}

// ---------------------------------------------------------------- one large size
static void large_suite(size_t n)
{
    {
        std::vector<uint32_t> in;
        gen(in, n, 42, 0);
        up(d_in, in, 0);
        d_out.need(n * 8 + 64);
        test_scan<uint32_t>(in, nullptr, n, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, false,
                            GROVE_SCAN_FORWARD, Off{}, false, "large");
        test_scan<uint32_t>(in, nullptr, n, GROVE_OP_MAX, GROVE_SCAN_INCLUSIVE, false,
                            GROVE_SCAN_FORWARD, Off{}, false, "large");
        for (int hp : {3, 4, 1}) {
            std::vector<uint8_t> h;
            gen_heads(h, n, hp, 5 + hp);
            up(d_heads, h, 0);
            test_scan<uint32_t>(in, &h, n, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, true,
                                GROVE_SCAN_FORWARD, Off{}, false, hpname[hp]);
            test_scan<uint32_t>(in, &h, n, GROVE_OP_SUM, GROVE_SCAN_INCLUSIVE, true,
                                GROVE_SCAN_BACKWARD, Off{}, false, hpname[hp]);
        }
        std::vector<uint8_t> f, h;
        gen_flags(f, n, 2, 17);
        up(d_flags, f, 0);
        d_dest.need(n * 4 + 64);
        test_split<uint32_t>(in, f, nullptr, n, true, true, Off{}, "large flags=r1/2");
        for (int hp : {4, 1}) {
            gen_heads(h, n, hp, 19 + hp);
            up(d_heads, h, 0);
            test_split<uint32_t>(in, f, &h, n, true, false, Off{}, hpname[hp]);
        }
    }
    {
        std::vector<float> in;
        gen(in, n, 43, 0);
        up(d_in, in, 0);
        test_scan<float>(in, nullptr, n, GROVE_OP_SUM, GROVE_SCAN_INCLUSIVE, false,
                         GROVE_SCAN_FORWARD, Off{}, false, "large");
        gen(in, n, 44, 1);
        up(d_in, in, 0);
        std::vector<uint8_t> h;
        gen_heads(h, n, 2, 23);
        up(d_heads, h, 0);
        test_scan<float>(in, &h, n, GROVE_OP_MAX, GROVE_SCAN_EXCLUSIVE, true, GROVE_SCAN_BACKWARD,
                         Off{}, false, hpname[2]);
    }
    {
        std::vector<uint64_t> in;
        gen(in, n, 45, 0);
        up(d_in, in, 0);
        d_out.need(n * 8 + 64);
        test_scan<uint64_t>(in, nullptr, n, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, false,
                            GROVE_SCAN_FORWARD, Off{}, false, "large");
        std::vector<uint8_t> f, h;
        gen_flags(f, n, 3, 29);
        up(d_flags, f, 0);
        gen_heads(h, n, 3, 31);
        up(d_heads, h, 0);
        test_scan<uint64_t>(in, &h, n, GROVE_OP_MIN, GROVE_SCAN_INCLUSIVE, true, GROVE_SCAN_FORWARD,
                            Off{}, false, hpname[3]);
        test_split<uint64_t>(in, f, nullptr, n, true, true, Off{}, "large flags=r1/1000");
        test_split<uint64_t>(in, f, &h, n, true, false, Off{}, "flags=r1/1000 heads=r1/100");
    }
}

// ---------------------------------------------------------------- memory
static void release_all()
{
    for (Buf *b : {&d_in, &d_out, &d_heads, &d_flags, &d_dest, &d_temp, &d_cnt}) b->release();
}

/* Whether size n fits in the device's free memory: 8-byte in and out, heads, flags and u32
 * dest (each with 64 bytes of slack for the offset copies), the largest temp storage any
 * launcher asks for at n, and 64 MiB for the runtime and allocation rounding. */
static bool fits(size_t n)
{
    snprintf(g_what, sizeof g_what, "memory check n=%zu", n);
    release_all();
    size_t tmax = 0, tb;
    for (grove_dtype t : {GROVE_U32, GROVE_U64, GROVE_F32}) {
        for (int k = 0; k < 2; ++k) {
            const grove_scan_kind kind = (grove_scan_kind)k;
            tb = 0;
            GK(grove__cuda_scan(&g_ctx, nullptr, &tb, t, GROVE_OP_SUM, kind, nullptr, nullptr, n,
                                g_s));
            tmax = std::max(tmax, tb);
            for (int d = 0; d < 2; ++d) {
                tb = 0;
                GK(grove__cuda_segscan(&g_ctx, nullptr, &tb, t, GROVE_OP_SUM, kind,
                                       (grove_scan_dir)d, nullptr, nullptr, nullptr, n, g_s));
                tmax = std::max(tmax, tb);
            }
        }
    }
    for (size_t e : {4, 8}) {
        tb = 0;
        GK(grove__cuda_split(&g_ctx, nullptr, &tb, e, nullptr, nullptr, nullptr, nullptr, nullptr,
                             n, g_s));
        tmax = std::max(tmax, tb);
        tb = 0;
        GK(grove__cuda_segsplit(&g_ctx, nullptr, &tb, e, nullptr, nullptr, nullptr, nullptr,
                                nullptr, n, g_s));
        tmax = std::max(tmax, tb);
    }
    const size_t need = 22 * n + 5 * 64 + tmax + 256 + ((size_t)64 << 20);
    size_t free_b = 0, total_b = 0;
    CK(cudaMemGetInfo(&free_b, &total_b));
    if (need <= free_b) return true;
    printf("SKIP size %zu: needs about %zu MiB of device memory, %zu MiB free\n", n, need >> 20,
           free_b >> 20);
    fflush(stdout);
    return false;
}

// ---------------------------------------------------------------- main
static int usage()
{
    fprintf(stderr, "usage: test_prim_kernels [--quick | --large N]\n");
    return 1;
}

int main(int argc, char **argv)
{
    enum { FULL, QUICK, LARGE } mode = FULL;
    size_t large_n = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--quick") && mode == FULL) {
            mode = QUICK;
        } else if (!strcmp(argv[i], "--large") && mode == FULL && i + 1 < argc) {
            char *end;
            const unsigned long long v = strtoull(argv[++i], &end, 10);
            // the launchers take n as prim.c validated it: at most GROVE_PRIM_MAX_N
            if (end == argv[i] || *end || argv[i][0] == '-' || v > GROVE_PRIM_MAX_N) return usage();
            mode = LARGE;
            large_n = (size_t)v;
        } else {
            return usage();
        }
    }

    int count = 0;
    const cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess || count == 0) {
        printf("SKIP: no GPU (%s)\n", ce != cudaSuccess ? cudaGetErrorString(ce) : "no devices");
        return TEST_SKIP;
    }

    memset(&g_ctx, 0, sizeof g_ctx);
    g_ctx.backend = GROVE_BACKEND_CUDA;
    g_ctx.device = 0;
    if (grove__cuda_ctx_init(&g_ctx, nullptr) != GROVE_OK) {
        printf("FAIL: cannot set up CUDA device 0: %s\n", g_ctx.err);
        return 1;
    }
    g_s = (cudaStream_t)g_ctx.stream;

    int ran = 0, skipped = 0;
    try {
        cudaDeviceProp prop;
        CK(cudaGetDeviceProperties(&prop, 0));
        printf("test_prim_kernels: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
        if (mode == LARGE) {
            if (fits(large_n)) {
                const int f0 = tu_failures;
                large_suite(large_n);
                ++ran;
                printf("large n=%zu: %s\n", large_n, tu_failures == f0 ? "ok" : "FAILED");
            } else {
                ++skipped;
            }
        } else {
            const bool quick = mode == QUICK;
            std::vector<size_t> sizes = {0,    1,     2,      3,       31,      32,
                                         33,   4095,  4096,   4097,    8191,    8192,
                                         8193, 24653, 100003, 1000003, 10000000};
            if (quick) sizes = {0, 1, 33, 4097, 8193, 24653};
            for (size_t n : sizes) {
                if (!fits(n)) {
                    ++skipped;
                    continue;
                }
                const bool aligns = n == 33 || n == 8193 || n == 100003 || (quick && n == 24653);
                const int f0 = tu_failures;
                scan_suite<uint32_t>(n, 1 + n, !quick, aligns);
                scan_suite<uint64_t>(n, 2 + n, !quick, aligns);
                scan_suite<float>(n, 3 + n, !quick, aligns);
                split_suite<uint32_t>(n, 4 + n, !quick, aligns);
                split_suite<uint64_t>(n, 5 + n, !quick, aligns);
                ++ran;
                printf("size %zu: %s (%ld checks so far)\n", n, tu_failures == f0 ? "ok" : "FAILED",
                       g_checks);
                fflush(stdout);
            }
        }
        release_all();
    } catch (const Abort &) {
        ++tu_failures; // already printed; the device may be unusable, so nothing more runs
    } catch (const std::exception &e) {
        printf("FAIL [%s]: %s (out of host memory?)\n", g_what, e.what());
        ++tu_failures;
    }
    grove__cuda_ctx_fini(&g_ctx);
    printf("test_prim_kernels: %ld checks, %d failed, %d size(s) run, %d skipped\n", g_checks,
           tu_failures, ran, skipped);
    if (tu_failures) return 1;
    return ran == 0 && skipped > 0 ? TEST_SKIP : 0;
}
