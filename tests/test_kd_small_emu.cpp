/*
 * test_kd_small_emu.cpp - the small-node and output stages of the CUDA k-d tree build
 * (src/kdtree/kdtree_small_cuda.cu) run on the CPU, so that machines without a GPU (CI) test them
 * too. For m <= 64 points the whole tree is one small root: the test runs the device pipeline of
 * that case (small_kernel, then mark_small_kernel, size_kernel, pre_kernel, out_large_kernel and
 * out_small_kernel, as kdtree_cuda.cu's build() calls them) on one emulated warp and compares the
 * tree (nodes, boxes, point order, points, node count, depth) with grove_kdtree_build() on a CPU
 * context byte for byte.
 *
 * The kernels are the GPU's own source: tests/CMakeLists.txt copies kdtree_small_cuda.cu up to
 * the end of its anonymous namespace into kd_small_emu/kdtree_small_cuda_emu.inc of the build
 * tree, launch configurations (<<<...>>>) deleted, with an empty cuda_runtime.h beside it; this
 * file defines the CUDA keywords and intrinsics before including it.
 *
 * The warp: each lane runs on its own stack (makecontext) and every warp intrinsic is a
 * rendezvous of all 32 lanes, which must arrive at the same intrinsic, on the same source line,
 * with the full mask (else: an emulation failure, exit 3). Between two rendezvous the lanes run
 * one after another, in an order drawn anew at each (ascending, descending or shuffled), so that
 * a lane that reads shared memory another lane writes with no intrinsic between them sees
 * either value (every intrinsic orders memory here, so a __syncwarp missing where a shuffle or
 * ballot lies between is not seen). Shuffles are exact, including the edges (up, down and xor
 * from a lane outside the warp give the caller's own value, idx takes its source modulo 32);
 * ballots, matches (bit patterns), reductions, __popc and __ffs likewise, and the __d*_rn
 * intrinsics are single IEEE double operations (built with -ffp-contract=off).
 *
 * Cases: float and double, 1, 2, 3, 4 and 8 dimensions, leaf sizes 1, 2, 12 and 64, data kinds
 * uniform, few distinct values, all equal, flat axes, huge magnitudes (extents and costs
 * overflow to inf), tiny and denormal values (costs underflow to 0: all planes tie), integer
 * lattice, duplicates with -0, mixed exponents, outliers, and point sets mirrored in axes 0 and
 * 1 with a far point (planes of two axes that tie, the best one cutting the first or last point
 * off: lane 0's and lane 31's edge cases at 64 points). Every combination runs once at a point
 * count m drawn from 1, 2, 31, 32, 33, 63, 64 or from 1..64 or from 33..64, and sweeps run every
 * m from 1 to 64 for six combinations (--full: for all). The seed is drawn anew each run unless
 * --seed is given; the messages name it and the case.
 *
 * Usage: test_kd_small_emu [--seed S] [--reps R] [--full] [--case N]
 *   --full: every m from 1 to 64 for every combination (minutes); --case N: only case N (as a
 *   message numbers it) of the run with the same seed and options.
 * Exit 0: all trees equal, 1: a tree differs, 2: usage, 3: the emulation or the CPU backend
 * failed (a message says which).
 */
/* glibc's fortified longjmp refuses jumps to another stack, which is what the lanes do */
#undef _FORTIFY_SOURCE
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "grove/grove.h"
#include "grove/kdtree.h"

/* ---- the warp ---- */

namespace emu
{

static char g_case[200]; /* the case running, for messages */
static uint64_t g_seed;

[[noreturn]] static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "test_kd_small_emu: emulation failure: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n  case: %s (seed %llu)\n", g_case[0] ? g_case : "none",
            (unsigned long long)g_seed);
    exit(3);
}

enum Op {
    SYNCWARP,
    SHFL_IDX,
    SHFL_UP,
    SHFL_DOWN,
    SHFL_XOR,
    BALLOT,
    MATCH_ANY,
    REDUCE_MIN_U,
    REDUCE_MAX_U,
    REDUCE_ADD_U,
    REDUCE_MIN_S,
    REDUCE_MAX_S,
    REDUCE_ADD_S,
    EXITED
};
static const char *const op_name[] = {"__syncwarp",        "__shfl_sync",       "__shfl_up_sync",
                                      "__shfl_down_sync",  "__shfl_xor_sync",   "__ballot_sync",
                                      "__match_any_sync",  "__reduce_min_sync", "__reduce_max_sync",
                                      "__reduce_add_sync", "__reduce_min_sync", "__reduce_max_sync",
                                      "__reduce_add_sync", "the kernel's end"};

/* What a lane brings to a rendezvous: the intrinsic, its source line, mask, operand (bits, size
 * bytes) and lane argument (shuffles' source, offset or xor mask) and width. */
struct Arrival {
    int op, line, size, width;
    unsigned mask;
    uint64_t v;
    long long arg;
};

const int kStack = 1 << 17;

struct Warp {
    jmp_buf sched;    /* the scheduler, waiting for the lane it resumed to stop */
    jmp_buf lane[32]; /* where a stopped lane resumes */
    ucontext_t sched_uc, uc[32];
    Arrival at[32];
    uint64_t res[32];
    bool started[32], done[32];
    int cur; /* the lane running */
    unsigned block_dim;
    void (*body)(void *);
    void *arg;
    int order[8][32]; /* lane orders: ascending, descending, shuffled */
    uint64_t rng;
    long meets;
};
static Warp W;
alignas(64) static char stacks[32][kStack];

/* Stops the calling lane at a rendezvous; returns its result. The lanes switch with
 * _setjmp/_longjmp (no signal mask system call: 20x faster than swapcontext here); only their
 * first entry goes through swapcontext, onto the stack makecontext gave them. */
static uint64_t meet(int op, int line, unsigned mask, int size, uint64_t v, long long arg = 0,
                     int width = 32)
{
    Arrival &a = W.at[W.cur];
    a.op = op;
    a.line = line;
    a.mask = mask;
    a.size = size;
    a.v = v;
    a.arg = arg;
    a.width = width;
    if (!_setjmp(W.lane[W.cur])) _longjmp(W.sched, 1);
    return W.res[W.cur];
}

static void lane_main()
{
    W.body(W.arg);
    W.done[W.cur] = true;
    W.at[W.cur].op = EXITED;
    _longjmp(W.sched, 1);
}

/* Runs lane l until it stops at a rendezvous or returns from the kernel. */
static void resume(int l)
{
    W.cur = l;
    if (_setjmp(W.sched)) return;
    if (!W.started[l]) {
        W.started[l] = true;
        swapcontext(&W.sched_uc, &W.uc[l]);
        die("lane %d came back through its context", l);
    }
    _longjmp(W.lane[l], 1);
}

static uint64_t next(uint64_t &s)
{
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}

/* Gives every lane of the rendezvous its result. */
static void exchange()
{
    const Arrival &a0 = W.at[0];
    for (int l = 1; l < 32; l++) {
        const Arrival &a = W.at[l];
        if (a.op != a0.op || a.line != a0.line)
            die("lane 0 at %s (line %d), lane %d at %s (line %d): divergent warp", op_name[a0.op],
                a0.line, l, op_name[a.op], a.line);
        if (a.size != a0.size || a.width != a0.width)
            die("%s (line %d): operand sizes or widths differ between lanes", op_name[a0.op],
                a0.line);
    }
    for (int l = 0; l < 32; l++)
        if (W.at[l].mask != 0xffffffffu)
            die("%s (line %d): mask %#x in lane %d (only full warps are emulated)", op_name[a0.op],
                a0.line, W.at[l].mask, l);
    if (a0.width != 32)
        die("%s (line %d): width %d not emulated", op_name[a0.op], a0.line, a0.width);
    uint64_t r = 0;
    switch (a0.op) {
    case SYNCWARP: break;
    case SHFL_IDX:
    case SHFL_UP:
    case SHFL_DOWN:
    case SHFL_XOR:
        /* the PTX rules: idx takes the source modulo the width; up, down and xor give a lane
         * whose source is outside the warp its own value */
        for (int l = 0; l < 32; l++) {
            const long long g = W.at[l].arg;
            long long s = a0.op == SHFL_IDX    ? (g & 31)
                          : a0.op == SHFL_UP   ? l - g
                          : a0.op == SHFL_DOWN ? l + g
                                               : (l ^ g);
            if (a0.op != SHFL_IDX && (g < 0 || s < 0 || s > 31)) s = l;
            W.res[l] = W.at[s].v;
        }
        return;
    case BALLOT:
        for (int l = 0; l < 32; l++) r |= (uint64_t)(W.at[l].v != 0) << l;
        break;
    case MATCH_ANY:
        for (int l = 0; l < 32; l++) {
            uint64_t m = 0;
            for (int q = 0; q < 32; q++) m |= (uint64_t)(W.at[q].v == W.at[l].v) << q;
            W.res[l] = m;
        }
        return;
    case REDUCE_MIN_U:
    case REDUCE_MAX_U:
    case REDUCE_ADD_U: {
        uint32_t x = (uint32_t)W.at[0].v;
        for (int l = 1; l < 32; l++) {
            const uint32_t y = (uint32_t)W.at[l].v;
            x = a0.op == REDUCE_MIN_U   ? std::min(x, y)
                : a0.op == REDUCE_MAX_U ? std::max(x, y)
                                        : x + y;
        }
        r = x;
        break;
    }
    default: {
        int32_t x = (int32_t)(uint32_t)W.at[0].v;
        for (int l = 1; l < 32; l++) {
            const int32_t y = (int32_t)(uint32_t)W.at[l].v;
            x = a0.op == REDUCE_MIN_S   ? std::min(x, y)
                : a0.op == REDUCE_MAX_S ? std::max(x, y)
                                        : (int32_t)((uint32_t)x + (uint32_t)y);
        }
        r = (uint32_t)x;
        break;
    }
    }
    for (int l = 0; l < 32; l++) W.res[l] = r;
}

/* Runs f() as warp 0 of block 0 (blockDim.x = block_dim threads) to its end. */
template <class F> static void launch(unsigned block_dim, F &f)
{
    W.body = [](void *p) { (*static_cast<F *>(p))(); };
    W.arg = &f;
    W.block_dim = block_dim;
    for (int l = 0; l < 32; l++) {
        W.started[l] = W.done[l] = false;
        if (getcontext(&W.uc[l])) die("getcontext failed");
        W.uc[l].uc_stack.ss_sp = stacks[l];
        W.uc[l].uc_stack.ss_size = kStack;
        W.uc[l].uc_link = NULL;
        makecontext(&W.uc[l], lane_main, 0);
    }
    for (int l = 0; l < 32; l++) {
        W.order[0][l] = l;
        W.order[1][l] = 31 - l;
    }
    for (int k = 2; k < 8; k++) {
        for (int l = 0; l < 32; l++) W.order[k][l] = l;
        for (int l = 31; l > 0; l--) std::swap(W.order[k][l], W.order[k][next(W.rng) % (l + 1)]);
    }
    for (long n = 0;;) {
        const int *ord = W.order[next(W.rng) % 8];
        int nd = 0;
        for (int i = 0; i < 32; i++) resume(ord[i]);
        for (int l = 0; l < 32; l++) nd += W.done[l];
        if (nd == 32) return;
        if (nd) {
            int l = 0;
            while (W.done[l]) l++;
            die("%d of 32 lanes returned while lane %d waits at %s (line %d)", nd, l,
                op_name[W.at[l].op], W.at[l].line);
        }
        exchange();
        W.meets++;
        if (++n > 2000000) die("the kernel does not end (2,000,000 rendezvous)");
    }
}

template <class T> static uint64_t bits(T v)
{
    static_assert(std::is_arithmetic<T>::value && (sizeof(T) == 4 || sizeof(T) == 8),
                  "the warp intrinsics take 4- and 8-byte operands");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    return b;
}
template <class T> static T from_bits(uint64_t b)
{
    T v;
    memcpy(&v, &b, sizeof v);
    return v;
}

} // namespace emu

/* ---- CUDA as the kernels use it ---- */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

struct EmuDim3 {
    unsigned x, y, z;
};
inline EmuDim3 emu_thread_idx() { return EmuDim3{(unsigned)emu::W.cur, 0, 0}; }
/* one warp of one block: the launches below need no more (one small root) */
#define threadIdx (emu_thread_idx())
#define blockIdx (EmuDim3{0, 0, 0})
#define blockDim (EmuDim3{emu::W.block_dim, 1, 1})
#define gridDim (EmuDim3{1, 1, 1})

struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(16) double2 {
    double x, y;
};
typedef struct CUstream_st *cudaStream_t;

inline void __syncwarp(unsigned mask = 0xffffffffu, int line = __builtin_LINE())
{
    emu::meet(emu::SYNCWARP, line, mask, 0, 0);
}
template <class T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32, int line = __builtin_LINE())
{
    return emu::from_bits<T>(
        emu::meet(emu::SHFL_IDX, line, mask, sizeof v, emu::bits(v), src, width));
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32,
                        int line = __builtin_LINE())
{
    return emu::from_bits<T>(
        emu::meet(emu::SHFL_UP, line, mask, sizeof v, emu::bits(v), delta, width));
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32,
                          int line = __builtin_LINE())
{
    return emu::from_bits<T>(
        emu::meet(emu::SHFL_DOWN, line, mask, sizeof v, emu::bits(v), delta, width));
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32,
                         int line = __builtin_LINE())
{
    return emu::from_bits<T>(
        emu::meet(emu::SHFL_XOR, line, mask, sizeof v, emu::bits(v), lane_mask, width));
}
inline unsigned __ballot_sync(unsigned mask, int pred, int line = __builtin_LINE())
{
    return (unsigned)emu::meet(emu::BALLOT, line, mask, 4, pred != 0);
}
/* equal bit patterns, as the hardware compares (a float +0 and -0 differ) */
template <class T> inline unsigned __match_any_sync(unsigned mask, T v, int line = __builtin_LINE())
{
    return (unsigned)emu::meet(emu::MATCH_ANY, line, mask, sizeof v, emu::bits(v));
}
#define EMU_REDUCE(name, U, S)                                                                     \
    inline unsigned name(unsigned mask, unsigned v, int line = __builtin_LINE())                   \
    {                                                                                              \
        return (unsigned)emu::meet(emu::U, line, mask, 4, v);                                      \
    }                                                                                              \
    inline int name(unsigned mask, int v, int line = __builtin_LINE())                             \
    {                                                                                              \
        return (int)(unsigned)emu::meet(emu::S, line, mask, 4, (uint32_t)v);                       \
    }
EMU_REDUCE(__reduce_min_sync, REDUCE_MIN_U, REDUCE_MIN_S)
EMU_REDUCE(__reduce_max_sync, REDUCE_MAX_U, REDUCE_MAX_S)
EMU_REDUCE(__reduce_add_sync, REDUCE_ADD_U, REDUCE_ADD_S)
#undef EMU_REDUCE

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }

/* round-to-nearest double operations, each one rounding (no contraction in this file) */
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return sqrt(a); }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline long long __double_as_longlong(double d) { return (long long)emu::bits(d); }
inline double __longlong_as_double(long long v) { return emu::from_bits<double>((uint64_t)v); }
inline unsigned __float_as_uint(float f) { return (unsigned)emu::bits(f); }
inline float __uint_as_float(unsigned u) { return emu::from_bits<float>(u); }

/* the lanes run one at a time: plain read-modify-writes are atomic */
inline unsigned long long atomicMax(unsigned long long *p, unsigned long long v)
{
    const unsigned long long o = *p;
    if (v > o) *p = v;
    return o;
}

/* (the launch templates keep their stream parameters, now unused) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kdtree_small_cuda_emu.inc"
#pragma GCC diagnostic pop

/* ---- the cases ---- */

using grove_kd::BNode;
using grove_kd::SmallRoot;

static uint64_t rng;
static uint64_t next_u64() { return emu::next(rng); }
static double unif() { return (double)(next_u64() >> 11) * (1.0 / 9007199254740992.0); }

enum Kind {
    K_UNIFORM,
    K_TIES,
    K_EQUAL,
    K_FLAT,
    K_HUGE,
    K_TINY,
    K_LATTICE,
    K_DUPS,
    K_MIXED,
    K_OUTLIERS,
    K_MIRROR_HI,
    K_MIRROR_LO,
    K_COUNT
};
static const char *const kind_name[K_COUNT] = {
    "uniform",         "few distinct values",      "all equal",
    "flat axes",       "huge magnitudes",          "tiny and denormal",
    "integer lattice", "duplicates with -0",       "mixed exponents",
    "outliers",        "mirrored, far point high", "mirrored, far point low"};

/* m points of D coordinates of type T, interleaved (the input of grove_kdtree_build) */
template <typename T> static std::vector<T> gen(int kind, int m, int D)
{
    const bool f = sizeof(T) == 4;
    const double big = f ? FLT_MAX : DBL_MAX, denorm = f ? FLT_TRUE_MIN : DBL_TRUE_MIN;
    std::vector<double> x((size_t)m * D), base(4 * (size_t)D), one(D);
    unsigned flat = (unsigned)next_u64() & ((1u << D) - 1);
    if (D > 1 && flat == (1u << D) - 1) flat &= ~1u; /* some axes flat, not all */
    if (flat == 0) flat = 1u << (next_u64() % D);
    for (auto &b : base) b = (next_u64() % 3 == 0) ? 0.0 : unif() * 2 - 1;
    for (auto &o : one) o = unif() * 100 - 50;
    const int nb = 1 + (int)(next_u64() % 4);
    for (int i = 0; i < m; i++) {
        const int bi = (int)(next_u64() % nb);
        for (int d = 0; d < D; d++) {
            double v;
            switch (kind) {
            case K_UNIFORM: v = unif() * 2 - 1; break;
            case K_TIES: v = (double)(next_u64() % 3) * 0.25; break;
            case K_EQUAL: v = one[d]; break;
            case K_FLAT: v = (flat >> d & 1) ? one[d] : unif(); break;
            case K_HUGE: /* extents past the largest double: infinite costs */
                v = next_u64() % 4 == 0 ? ((next_u64() & 1) ? big : -big) : (unif() * 2 - 1) * big;
                break;
            case K_TINY: /* costs that underflow to 0: every plane ties */
                v = next_u64() % 2 ? (double)(next_u64() % 5) * denorm
                                   : ldexp(unif(), f ? -130 : -1030);
                break;
            case K_LATTICE: v = (double)((int)(next_u64() % 8) - 3); break;
            case K_DUPS:
                v = base[bi * D + d];
                if (v == 0 && (next_u64() & 1)) v = -0.0;
                break;
            case K_MIXED: v = ldexp(unif() * 2 - 1, (int)(next_u64() % 120) - 60); break;
            default:
                v = kind != K_OUTLIERS && next_u64() % 2 ? (double)(next_u64() % 4) : unif();
                break;
            }
            x[(size_t)i * D + d] = v;
        }
    }
    /* one to three far points: the best planes cut one point off the ends */
    for (int k = 1 + (int)(next_u64() % 3); kind == K_OUTLIERS && k > 0; k--)
        x[(next_u64() % m) * D + next_u64() % D] = next_u64() % 2 ? 1e3 : -1e3;
    /* the second half the first half's points with axes 0 and 1 swapped, the middle point of
     * an odd m, the first and the last on the diagonal (the first one far): the planes of the
     * two axes cost the same (the axis breaks the ties), and the best cuts the far point off
     * one end */
    if ((kind == K_MIRROR_HI || kind == K_MIRROR_LO) && D > 1) {
        for (int i = 0; i < (m + 1) / 2; i++) {
            double *p = &x[(size_t)i * D], *q = &x[(size_t)(m - 1 - i) * D];
            for (int d = 0; d < D; d++) q[d] = p[d < 2 ? 1 - d : d];
            if (i == 0 || p == q) p[0] = p[1] = q[0] = q[1] = i == 0 ? 0.5 : p[0];
        }
        x[0] = x[1] = kind == K_MIRROR_HI ? 1e3 : -1e3;
    }
    std::vector<T> out(x.size());
    for (size_t i = 0; i < x.size(); i++) out[i] = (T)x[i];
    return out;
}

static long g_trees = 0, g_fail = 0;

static void report(const char *fmt, ...)
{
    va_list ap;
    g_fail++;
    if (g_fail > 10) return;
    va_start(ap, fmt);
    fprintf(stderr, "test_kd_small_emu: %s (seed %llu): ", emu::g_case,
            (unsigned long long)emu::g_seed);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static bool poisoned(const void *p, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++)
        if (((const unsigned char *)p)[i] != 0xa5) return false;
    return true;
}

/* The device pipeline of a build of m <= kSmall points (kdtree_cuda.cu's build(): the root is
 * the only small root, at level 0; the point order starts as the identity), then the
 * comparison with the CPU backend's tree. */
template <typename T, int D> static void run_case(grove_ctx *ctx, int kind, int leaf, int m)
{
    using namespace grove_kd;
    const bool f64 = sizeof(T) == 8;
    const int cs = 2 * D;
    const std::vector<T> in = gen<T>(kind, m, D);
    g_trees++;

    grove_coords c = {in.data(), (size_t)m, D, f64 ? GROVE_COORD_F64 : GROVE_COORD_F32};
    grove_kdtree_opts o;
    grove_kdtree_default_opts(&o);
    o.leaf_size = leaf;
    grove_kdtree *t = NULL;
    if (grove_kdtree_build(ctx, &c, &o, &t) != GROVE_OK)
        emu::die("the CPU build failed: %s", grove_ctx_last_error(ctx));

    /* the input as to_soa_kernel leaves it: one array per axis, -0 as +0 */
    std::vector<T> x((size_t)m * D);
    for (int i = 0; i < m; i++)
        for (int d = 0; d < D; d++) {
            const T v = in[(size_t)i * D + d];
            x[(size_t)d * m + i] = v == (T)0 ? (T)0 : v;
        }
    BNode nodes[1];
    memset(nodes, 0, sizeof nodes);
    nodes[0].begin = 0;
    nodes[0].end = (uint64_t)m;
    nodes[0].axis = -1;
    nodes[0].kind = GROVE_KDTREE_LEAF;
    SmallRoot roots[1] = {{0, 0, 0}};
    std::vector<uint64_t> pf((size_t)m);
    for (int i = 0; i < m; i++) pf[i] = (uint64_t)i;
    /* scratch the device does not clear, poisoned: the build gives the root the slots
     * [0, 2m) of sub and subb; the rest up to 256 (local ids have 8 bits) must stay as it is */
    std::vector<BNode> sub(256);
    std::vector<double> subb(256 * (size_t)cs), bounds((size_t)kSmall * cs);
    memset(sub.data(), 0xa5, sub.size() * sizeof(BNode));
    memset(subb.data(), 0xa5, subb.size() * sizeof(double));
    memset(bounds.data(), 0xa5, bounds.size() * sizeof(double));
    uint32_t cnt[2] = {0xa5a5a5a5u, 0xa5a5a5a5u}, small_of[1] = {0};
    uint64_t size[1] = {0xa5a5a5a5a5a5a5a5ull}, pre[1] = {0};
    unsigned long long depth = 0;

    auto small = [&] {
        small_kernel<T, D>(nodes, roots, 1, leaf, x.data(), (size_t)m, pf.data(), sub.data(),
                           subb.data(), cnt, &depth);
    };
    emu::launch(32 * kSmallWarps, small);
    for (size_t k = 2 * (size_t)m; k < sub.size(); k++)
        if (!poisoned(&sub[k], sizeof(BNode)) || !poisoned(&subb[k * cs], cs * sizeof(double))) {
            report("small_kernel wrote node slot %zu, past the root's 2 * %d", k, m);
            grove_kdtree_destroy(t);
            return;
        }
    auto order = [&] {
        mark_small_kernel(roots, 1, small_of);
        size_kernel(nodes, 0, 1, small_of, cnt, size);
        pre_kernel(nodes, 0, 1, size, pre);
    };
    emu::launch(kBlock, order);
    const uint64_t total = size[0];
    if (total < 1 || total > 2 * (uint64_t)m - 1) {
        report("the subtree has %llu nodes (cnt %u)", (unsigned long long)total, cnt[0]);
        grove_kdtree_destroy(t);
        return;
    }
    std::vector<grove_kdtree_node> onodes(total);
    std::vector<double> obounds(total * cs);
    memset(onodes.data(), 0xa5, onodes.size() * sizeof onodes[0]);
    memset(obounds.data(), 0xa5, obounds.size() * sizeof(double));
    auto out_large = [&] {
        out_large_kernel(nodes, 1, D, bounds.data(), small_of, pre, onodes.data(), obounds.data());
    };
    emu::launch(kBlock, out_large);
    auto out_small = [&] {
        out_small_kernel(nodes, roots, 1, D, sub.data(), subb.data(), cnt, pre, onodes.data(),
                         obounds.data());
    };
    emu::launch(32 * kOutWarps, out_small);
    std::vector<T> pts((size_t)m * D); /* gather_rows_kernel: the input's rows in tree order */
    for (int i = 0; i < m; i++)
        if (pf[i] < (uint64_t)m) memcpy(&pts[(size_t)i * D], &in[pf[i] * D], D * sizeof(T));

    const grove_kdtree_node *cn = grove_kdtree_nodes(t);
    const double *cb = grove_kdtree_bounds(t);
    if (grove_kdtree_num_nodes(t) != total) {
        report("%llu nodes, the CPU backend's tree %zu", (unsigned long long)total,
               grove_kdtree_num_nodes(t));
    } else if (grove_kdtree_depth(t) != (size_t)depth) {
        report("depth %llu, the CPU backend's %zu", depth, grove_kdtree_depth(t));
    } else if (memcmp(cn, onodes.data(), total * sizeof *cn)) {
        size_t k = 0;
        while (!memcmp(&cn[k], &onodes[k], sizeof *cn)) k++;
        const grove_kdtree_node &a = onodes[k], &b = cn[k];
        report("node %zu (begin end right split axis kind): %llu %llu %llu %.17g %d %d, the CPU "
               "backend's %llu %llu %llu %.17g %d %d",
               k, (unsigned long long)a.begin, (unsigned long long)a.end,
               (unsigned long long)a.right, a.split, a.axis, a.kind, (unsigned long long)b.begin,
               (unsigned long long)b.end, (unsigned long long)b.right, b.split, b.axis, b.kind);
    } else if (memcmp(cb, obounds.data(), total * cs * sizeof *cb)) {
        size_t e = 0;
        while (!memcmp(&cb[e], &obounds[e], sizeof *cb)) e++;
        report("node %zu's box, entry %zu: %.17g, the CPU backend's %.17g", e / cs, e % cs,
               obounds[e], cb[e]);
    } else if (memcmp(grove_kdtree_index(t), pf.data(), (size_t)m * sizeof(uint64_t))) {
        int i = 0;
        while (grove_kdtree_index(t)[i] == pf[i]) i++;
        report("point order: tree position %d holds input point %llu, the CPU backend's %llu", i,
               (unsigned long long)pf[i], (unsigned long long)grove_kdtree_index(t)[i]);
    } else if (memcmp(grove_kdtree_points(t), pts.data(), pts.size() * sizeof(T))) {
        report("the tree's points differ from the CPU backend's");
    }
    grove_kdtree_destroy(t);
}

struct Case {
    bool f64;
    int D, leaf, kind, m;
};

template <typename T> static void run_dims(grove_ctx *ctx, const Case &c)
{
    switch (c.D) {
    case 1: run_case<T, 1>(ctx, c.kind, c.leaf, c.m); break;
    case 2: run_case<T, 2>(ctx, c.kind, c.leaf, c.m); break;
    case 3: run_case<T, 3>(ctx, c.kind, c.leaf, c.m); break;
    case 4: run_case<T, 4>(ctx, c.kind, c.leaf, c.m); break;
    default: run_case<T, 8>(ctx, c.kind, c.leaf, c.m); break;
    }
}

/* A whole decimal number >= 0. */
static bool num_arg(const char *s, long long *v)
{
    char *end = NULL;
    if (*s < '0' || *s > '9') return false;
    *v = strtoll(s, &end, 10);
    return *end == 0 && *v >= 0;
}

/* A stream of 64 bits from (seed, case number), so that a case can run alone (--case). */
static uint64_t mix(uint64_t a, uint64_t b)
{
    uint64_t z = a * 0x9e3779b97f4a7c15ull + b + 0x632be59bd9b4e019ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z ? z : 1;
}

int main(int argc, char **argv)
{
    uint64_t seed = 0;
    bool have_seed = false, full = false;
    long long reps = 1, only = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long x = 0;
        if (!strcmp(a, "--full")) {
            full = true;
            continue;
        }
        const bool known = !strcmp(a, "--seed") || !strcmp(a, "--reps") || !strcmp(a, "--case");
        if (!known || !v || !num_arg(v, &x) || (!strcmp(a, "--reps") && x < 1)) {
            fprintf(stderr, "usage: test_kd_small_emu [--seed S] [--reps R] [--full] [--case N]\n");
            return 2;
        }
        if (!strcmp(a, "--seed")) {
            seed = (uint64_t)x;
            have_seed = true;
        } else if (!strcmp(a, "--reps")) {
            reps = x;
        } else {
            only = x;
        }
        i++;
    }
    if (!have_seed) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = mix((uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec) % 1000000000000ull;
    }
    emu::g_seed = seed;
    printf("test_kd_small_emu: seed %llu\n", (unsigned long long)seed);
    fflush(stdout);

    grove_ctx_opts co;
    grove_ctx_default_opts(&co);
    co.backend = GROVE_BACKEND_CPU;
    co.num_threads = 1;
    grove_ctx *ctx;
    if (grove_ctx_create(&co, &ctx) != GROVE_OK) emu::die("no CPU context");

    /* the cases: every (type, dims, leaf, kind) once, at a point count drawn from the edges
     * (1, 2, one warp +-1, 63, 64) or from 1..64 or from 33..64 (two candidates a lane); then
     * sweeps of every count from 1 to 64 (--full: every count everywhere) */
    std::vector<Case> cases;
    const int dims[] = {1, 2, 3, 4, 8}, leaves[] = {1, 2, 12, 64},
              edges[] = {1, 2, 31, 32, 33, 63, 64};
    uint64_t s = mix(seed, ~0ull);
    for (long long r = 0; r < reps; r++) {
        for (int f = 0; f < 2; f++)
            for (int D : dims)
                for (int leaf : leaves)
                    for (int kind = 0; kind < K_COUNT; kind++) {
                        const uint64_t u = emu::next(s) % 3, v = emu::next(s);
                        const int m = u == 0   ? edges[v % 7]
                                      : u == 1 ? 1 + (int)(v % 64)
                                               : 33 + (int)(v % 32);
                        if (!full) cases.push_back({f == 1, D, leaf, kind, m});
                        for (int k = 1; full && k <= grove_kd::kSmall; k++)
                            cases.push_back({f == 1, D, leaf, kind, k});
                    }
        if (full) continue;
        /* the planes that cut the first or the last of 64 points off (lane 0's and lane 31's
         * second candidates), tied with those of the next axis */
        for (int f = 0; f < 2; f++)
            for (int D : dims)
                for (int k = K_MIRROR_HI; D > 1 && k <= K_MIRROR_LO; k++)
                    cases.push_back({f == 1, D, 1, k, grove_kd::kSmall});
        const Case sweeps[] = {{false, 1, 1, 0, 0}, {true, 2, 1, 0, 0},   {false, 3, 2, 0, 0},
                               {true, 3, 1, 0, 0},  {false, 4, 12, 0, 0}, {true, 8, 2, 0, 0}};
        for (const Case &w : sweeps) {
            const int k0 = (int)(emu::next(s) % K_COUNT);
            for (int m = 1; m <= grove_kd::kSmall; m++)
                cases.push_back({w.f64, w.D, w.leaf, (k0 + m) % K_COUNT, m});
        }
    }

    for (size_t i = 0; i < cases.size(); i++) {
        if (only >= 0 && (size_t)only != i) continue;
        const Case &c = cases[i];
        snprintf(emu::g_case, sizeof emu::g_case, "case %zu: %s, %d dims, leaf %d, %s, %d points",
                 i, c.f64 ? "double" : "float", c.D, c.leaf, kind_name[c.kind], c.m);
        rng = mix(seed, i);
        emu::W.rng = mix(rng, 12345);
        if (c.f64)
            run_dims<double>(ctx, c);
        else
            run_dims<float>(ctx, c);
    }
    grove_ctx_destroy(ctx);
    printf("test_kd_small_emu: seed %llu: %ld trees, %ld differing, %ld warp rendezvous\n",
           (unsigned long long)seed, g_trees, g_fail, emu::W.meets);
    if (g_fail) {
        fprintf(stderr,
                "test_kd_small_emu: repeat with --seed %llu (and --case N for case N alone)\n",
                (unsigned long long)seed);
        return 1;
    }
    printf("test_kd_small_emu: all trees equal the CPU backend's\n");
    return 0;
}
