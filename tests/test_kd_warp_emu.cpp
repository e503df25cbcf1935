/*
 * test_kd_warp_emu.cpp - the GPU warp-packet kNN search (src/kdtree/kdtree_knn_warp.cuh) run on
 * the CPU, so that machines without a GPU (CI) test its logic too: every lane of a warp is a
 * ucontext, and every warp intrinsic (ballot, shuffle) is a rendezvous of all 32 lanes. Lanes
 * that meet at different kinds of intrinsic, or return at different times, fail the test (a
 * divergence between two intrinsics of the same kind is not seen). The rows (indices and squared
 * distances) must equal the CPU backend's grove_kdtree_knn byte for byte, on uniform, lattice
 * (ties), duplicate (with -0), clustered, 2^-i line (trees near the 64-entry stack limit),
 * equal-point data and magnitudes from 2^-141 to 2^119 (float squares underflow and overflow in
 * the kernel's float pre-filters), 2-D and 3-D, float and double, leaf sizes 1, 12 and 64, k from
 * 1 to 32, queries that are floats and queries that are not, in sorted and random order. The
 * node records and the float roundings (toward zero, down, up) are the device's, through the
 * host's rounding modes; a pre-filter that drops a tie (>= for >) fails the test.
 *
 * Usage: test_kd_warp_emu [--reps R] [--seed S]   exit 0: all rows equal, 1: a mismatch, 2: usage,
 * 3: the emulation or the CPU backend failed (a message says which)
 */
#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <algorithm>
#include <vector>

#include "grove/grove.h"
#include "grove/kdtree.h"

static int g_fail = 0;
#define EMU_DIE(...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        exit(3);                                                                                   \
    } while (0)

struct Emu {
    ucontext_t sched, lane[32];
    int cur;
    int kind[32];
    uint64_t val[32], res[32];
    int src[32];
    bool done[32];
    long calls;
};
static Emu E;

static uint64_t emu_x(int kind, uint64_t v, int src)
{
    const int l = E.cur;
    E.kind[l] = kind;
    E.val[l] = v;
    E.src[l] = src;
    swapcontext(&E.lane[l], &E.sched);
    return E.res[l];
}
static unsigned emu_ballot(bool p) { return (unsigned)emu_x(1, p ? 1 : 0, 0); }
template <class T> static T emu_shfl(T v, int src)
{
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    b = emu_x(2 + (int)sizeof(T), b, src);
    T r;
    memcpy(&r, &b, sizeof r);
    return r;
}
static double as_double(uint64_t w)
{
    double d;
    memcpy(&d, &w, 8);
    return d;
}

/* The device's directed roundings, by the host's rounding mode (volatile keeps every operation
 * between the mode switches). Rounding toward zero twice (to double, then to float) is rounding
 * toward zero once, and a product of two floats is exact in double, so emu_fma_rz is the device's
 * fused operation exactly. */
static float emu_fsub_rz(float a, float b)
{
    volatile float x = a, y = b, r;
    fesetround(FE_TOWARDZERO);
    r = x - y;
    fesetround(FE_TONEAREST);
    return r;
}
static float emu_fmul_rz(float a, float b)
{
    volatile float x = a, y = b, r;
    fesetround(FE_TOWARDZERO);
    r = x * y;
    fesetround(FE_TONEAREST);
    return r;
}
static float emu_fma_rz(float a, float b, float c)
{
    volatile double p = (double)a * (double)b, z = c, t;
    volatile float r;
    fesetround(FE_TOWARDZERO);
    t = p + z;
    r = (float)t;
    fesetround(FE_TONEAREST);
    return r;
}
static float emu_f2f(double v, int mode)
{
    volatile double x = v;
    volatile float r;
    fesetround(mode);
    r = (float)x;
    fesetround(FE_TONEAREST);
    return r;
}
static float emu_as_float(uint32_t w)
{
    float f;
    memcpy(&f, &w, 4);
    return f;
}
static uint32_t emu_float_bits(float f)
{
    uint32_t w;
    memcpy(&w, &f, 4);
    return w;
}
static void emu_ld4(const uint32_t *p, uint32_t *w)
{
    if ((uintptr_t)p % 16) EMU_DIE("test_kd_warp_emu: a record load not 16-byte aligned");
    memcpy(w, p, 16);
}

#define KDW_FN static inline
#define kdw_ldg(p) (*(p))
#define kdw_ballot(pred) emu_ballot(pred)
#define kdw_shfl(v, src) emu_shfl((v), (src))
#define kdw_popc(x) __builtin_popcount(x)
#define kdw_as_double(w) as_double(w)
#define kdw_sub(a, b) ((a) - (b))
#define kdw_mul(a, b) ((a) * (b))
#define kdw_add(a, b) ((a) + (b))
#define kdw_fsub_rz(a, b) emu_fsub_rz((a), (b))
#define kdw_fmul_rz(a, b) emu_fmul_rz((a), (b))
#define kdw_fma_rz(a, b, c) emu_fma_rz((a), (b), (c))
#define kdw_f2f_rd(x) emu_f2f((x), FE_DOWNWARD)
#define kdw_f2f_ru(x) emu_f2f((x), FE_UPWARD)
#define kdw_f2f_rn(x) emu_f2f((x), FE_TONEAREST)
#define kdw_as_float(w) emu_as_float(w)
#define kdw_float_bits(f) emu_float_bits(f)
#define kdw_ld4(p, w) emu_ld4((p), (w))
#include "kdtree_knn_warp.cuh"

typedef void (*BodyFn)(const kdw::Args &, uint32_t, int);
static BodyFn g_body;
static const kdw::Args *g_args;
static uint32_t g_pos0;

static void lane_entry(int l)
{
    g_body(*g_args, g_pos0, l);
    E.done[l] = true;
}

static char stacks[32][1 << 17];

static void run_warp(BodyFn body, const kdw::Args &a, uint32_t pos0)
{
    g_body = body;
    g_args = &a;
    g_pos0 = pos0;
    for (int l = 0; l < 32; l++) {
        E.done[l] = false;
        getcontext(&E.lane[l]);
        E.lane[l].uc_stack.ss_sp = stacks[l];
        E.lane[l].uc_stack.ss_size = sizeof stacks[l];
        E.lane[l].uc_link = &E.sched;
        makecontext(&E.lane[l], (void (*)())lane_entry, 1, l);
    }
    for (;;) {
        int nd = 0;
        for (int l = 0; l < 32; l++) {
            E.cur = l;
            swapcontext(&E.sched, &E.lane[l]);
            nd += E.done[l];
        }
        if (nd == 32) break;
        if (nd != 0) EMU_DIE("test_kd_warp_emu: divergent exit: %d of 32 lanes returned", nd);
        for (int l = 1; l < 32; l++)
            if (E.kind[l] != E.kind[0])
                EMU_DIE("test_kd_warp_emu: lanes of a warp at different kinds of intrinsic");
        E.calls++;
        if (E.kind[0] == 1) {
            uint64_t m = 0;
            for (int l = 0; l < 32; l++) m |= (E.val[l] & 1) << l;
            for (int l = 0; l < 32; l++) E.res[l] = m;
        } else {
            for (int l = 0; l < 32; l++) {
                if (E.src[l] < 0 || E.src[l] > 31)
                    EMU_DIE("test_kd_warp_emu: shuffle from lane %d", E.src[l]);
                E.res[l] = E.val[E.src[l]];
            }
        }
    }
}

template <int K, int D, bool F64> static void body(const kdw::Args &a, uint32_t p, int l)
{
    kdw::knn_warp_body<K, D, F64>(a, p, l);
}

template <int D, bool F64> static BodyFn pick(int cap)
{
    if (cap <= 1) return body<1, D, F64>;
    if (cap <= 8) return body<8, D, F64>;
    if (cap <= 16) return body<16, D, F64>;
    return body<32, D, F64>;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_u64()
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double unif() { return (next_u64() >> 11) * (1.0 / 9007199254740992.0); }

/* kinds: 0 uniform, 1 lattice (ties), 2 duplicates (and -0), 3 one tight cluster, 4 2^-i line,
 * 5 many equal points (dup leaves > 64), 6 magnitudes from 2^-140 to 2^120 */
static void gen(int kind, size_t n, int D, std::vector<double> &x)
{
    static const int mag[5] = {-140, -70, 0, 60, 120};
    x.resize(n * D);
    for (size_t i = 0; i < n; i++)
        for (int d = 0; d < D; d++) {
            double v;
            switch (kind) {
            case 0: v = unif(); break;
            case 1: v = (double)(next_u64() % 5); break;
            case 2:
                v = (next_u64() % 3 == 0) ? ((next_u64() & 1) ? -0.0 : 0.0)
                                          : (double)(next_u64() % 3) * 0.5;
                break;
            case 3: v = 0.5 + unif() * 1e-3; break;
            case 4: v = d == 0 ? ldexp(1.0, -(int)(i % 60)) : 0.0; break;
            case 5: v = (next_u64() % 10 == 0) ? unif() : 0.25; break;
            default: /* float underflow and overflow in the filters' squares */
                v = ldexp(unif() - 0.5, mag[(i * 7 + (size_t)d) % 5]);
                break;
            }
            x[i * D + d] = v;
        }
}

static long sets = 0, maxdepth = 0;

template <int D, bool F64>
static void check(grove_ctx *ctx, int kind, size_t n, int leaf, int k, size_t nq, bool sorted)
{
    std::vector<double> px, qx;
    gen(kind, n, D, px);
    gen(kind == 4 ? 0 : kind, nq, D, qx);
    if (kind == 4)
        for (size_t i = 0; i < nq; i++) qx[i * D] *= 1e-3;
    std::vector<float> pf(px.begin(), px.end());
    grove_coords pc = {F64 ? (const void *)px.data() : (const void *)pf.data(), n, D,
                       F64 ? GROVE_COORD_F64 : GROVE_COORD_F32};
    grove_kdtree_opts o;
    grove_kdtree_default_opts(&o);
    o.leaf_size = leaf;
    grove_kdtree *t = NULL;
    if (grove_kdtree_build(ctx, &pc, &o, &t) != GROVE_OK)
        EMU_DIE("test_kd_warp_emu: the CPU build failed: %s", grove_ctx_last_error(ctx));
    if (grove_kdtree_depth(t) + 2 > (size_t)kdw::STACK) {
        grove_kdtree_destroy(t);
        return;
    }
    if ((long)grove_kdtree_depth(t) > maxdepth) maxdepth = grove_kdtree_depth(t);
    /* queries: as floats for F32 runs half of the time, exactly as the caller would convert */
    std::vector<float> qf(qx.begin(), qx.end());
    const bool qfloat = (next_u64() & 1);
    if (qfloat)
        for (size_t i = 0; i < qx.size(); i++) qx[i] = (double)qf[i];
    grove_coords qc = {qx.data(), nq, D, GROVE_COORD_F64};
    std::vector<uint64_t> ri(nq * k), wi(nq * k, 0x5a5a5a5a5a5a5a5aull);
    std::vector<double> rd(nq * k), wd(nq * k, -123.0);
    if (grove_kdtree_knn(ctx, t, &qc, k, ri.data(), rd.data()) != GROVE_OK)
        EMU_DIE("test_kd_warp_emu: the CPU kNN failed: %s", grove_ctx_last_error(ctx));
    std::vector<uint32_t> ord(nq);
    for (size_t i = 0; i < nq; i++) ord[i] = (uint32_t)i;
    if (sorted) /* by the first coordinate, then second: adjacent queries close */
        std::sort(ord.begin(), ord.end(), [&](uint32_t a, uint32_t b) {
            return qx[a * D] < qx[b * D] || (qx[a * D] == qx[b * D] && a < b);
        });
    else
        for (size_t i = nq; i > 1; i--) std::swap(ord[i - 1], ord[next_u64() % i]);
    /* the records, as grove__kdw_records makes them, 16-byte aligned as on the device */
    const size_t nn = grove_kdtree_num_nodes(t);
    uint32_t *rec = (uint32_t *)aligned_alloc(16, nn * 32);
    if (!rec) EMU_DIE("test_kd_warp_emu: out of memory");
    for (size_t i = 0; i < nn; i++)
        kdw::build_rec<D>((const unsigned long long *)grove_kdtree_nodes(t),
                          grove_kdtree_bounds(t), i, rec + 8 * i);
    kdw::Args a;
    a.rec = rec;
    a.nodes = (const unsigned long long *)grove_kdtree_nodes(t);
    a.bounds = grove_kdtree_bounds(t);
    a.pts = grove_kdtree_points(t);
    a.index = (const unsigned long long *)grove_kdtree_index(t);
    a.qs = qx.data();
    a.ord = ord.data();
    a.m = (uint32_t)nq;
    a.cap = (int)std::min((size_t)k, n);
    a.k = k;
    a.oi = (unsigned long long *)wi.data();
    a.od = wd.data();
    BodyFn fn = pick<D, F64>(a.cap);
    for (uint32_t p = 0; p < nq; p += 32) run_warp(fn, a, p);
    sets++;
    if (memcmp(ri.data(), wi.data(), ri.size() * 8) ||
        memcmp(rd.data(), wd.data(), rd.size() * 8)) {
        g_fail++;
        if (g_fail < 10)
            fprintf(
                stderr,
                "test_kd_warp_emu: rows differ from the CPU backend's: kind %d, n %zu, dims %d, "
                "f64 %d, leaf %d, k %d, %zu queries, sorted %d\n",
                kind, n, D, (int)F64, leaf, k, nq, (int)sorted);
    }
    free(rec);
    grove_kdtree_destroy(t);
}

int main(int argc, char **argv)
{
    int reps = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            rng = strtoull(argv[++i], NULL, 10) | 1;
        } else {
            fprintf(stderr, "usage: test_kd_warp_emu [--reps R] [--seed S]\n");
            return 2;
        }
    }
    grove_ctx_opts co;
    grove_ctx_default_opts(&co);
    co.backend = GROVE_BACKEND_CPU;
    co.num_threads = 1;
    grove_ctx *ctx;
    if (grove_ctx_create(&co, &ctx) != GROVE_OK) EMU_DIE("test_kd_warp_emu: no CPU context");
    const size_t ns[] = {1, 2, 31, 32, 33, 100, 1000, 5000};
    const int ks[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 32};
    const int leaves[] = {1, 12, 64};
    for (int r = 0; r < reps; r++)
        for (int kind = 0; kind <= 6; kind++)
            for (size_t n : ns)
                for (int leaf : leaves) {
                    const int k = ks[next_u64() % 10];
                    const size_t nq = 1 + next_u64() % 150;
                    const bool sorted = next_u64() & 1;
                    switch (next_u64() % 4) {
                    case 0: check<2, false>(ctx, kind, n, leaf, k, nq, sorted); break;
                    case 1: check<2, true>(ctx, kind, n, leaf, k, nq, sorted); break;
                    case 2: check<3, false>(ctx, kind, n, leaf, k, nq, sorted); break;
                    default: check<3, true>(ctx, kind, n, leaf, k, nq, sorted); break;
                    }
                }
    /* the 2^-i line at leaf 1: depths near the stack's limit */
    for (size_t n = 55; n <= 70; n++) {
        check<3, false>(ctx, 4, n, 1, 8, 64, true);
        check<2, true>(ctx, 4, n, 1, 32, 64, false);
    }
    printf("test_kd_warp_emu: %ld row sets, %d differing, deepest tree %ld, %ld warp "
           "rendezvous\n",
           sets, g_fail, maxdepth, E.calls);
    grove_ctx_destroy(ctx);
    if (g_fail) return 1;
    printf("test_kd_warp_emu: all checks passed\n");
    return 0;
}
