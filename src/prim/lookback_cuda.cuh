/*
 * lookback_cuda.cuh - shared machinery of the single-pass scans (internal, CUDA only):
 * operators with true identities, per-tile states for decoupled look-back (Merrill & Garland),
 * a warp-parallel look-back, tile ids and cp.async prefetch for persistent blocks, and a
 * block-wide scan of per-thread aggregates split into phases (Pipe) that the kernels of scan,
 * segmented scan, split and segmented split build on.
 *
 * Tiles are numbered in *scan order* (the order of the dynamic tile counter): tile id i only
 * ever waits for ids < i, and ids are only handed to running blocks, so the look-back cannot
 * deadlock whatever order the hardware schedules blocks in (see ids_start() for the ids a
 * persistent block holds ahead).
 */
#ifndef GROVE_LOOKBACK_CUDA_CUH
#define GROVE_LOOKBACK_CUDA_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core_cuda.h"

/* Look-back width: predecessors per lane per round trip (see lookback()). Persistent grids are
 * capped at GROVE_LB_MAXBPS blocks per SM when that is nonzero. Both only tune speed. */
#ifndef GROVE_LB_W
#define GROVE_LB_W 1
#endif
#ifndef GROVE_LB_MAXBPS
#define GROVE_LB_MAXBPS 0
#endif

namespace grove_lb
{

constexpr unsigned FULL = 0xFFFFFFFFu;

/* ---- operators ------------------------------------------------------------------------------
 * ident() is a true identity of apply() for every input, NaN included, so that padding and empty
 * carries never change a value: -0.0f for f32 SUM (0.0f + -0.0f would give +0.0f) and NaN for
 * f32 MAX/MIN (fmaxf(NaN, x) == x for every x, also NaN). pub() is the identity the API writes
 * for an empty range (exclusive scans at a segment's start). f32 MAX/MIN order -0 below +0, as
 * the CPU backend does, so that results do not depend on the order of combination. */

template <typename T> struct Sum {
    static __device__ __forceinline__ T ident() { return T(0); }
    static __device__ __forceinline__ T pub() { return T(0); }
    static __device__ __forceinline__ T apply(T a, T b) { return a + b; }
};
template <> struct Sum<float> {
    static __device__ __forceinline__ float ident() { return -0.0f; }
    static __device__ __forceinline__ float pub() { return 0.0f; }
    static __device__ __forceinline__ float apply(float a, float b) { return a + b; }
};

template <typename T> struct Max {
    static __device__ __forceinline__ T ident() { return T(0); }
    static __device__ __forceinline__ T pub() { return T(0); }
    static __device__ __forceinline__ T apply(T a, T b) { return a > b ? a : b; }
};
template <> struct Max<float> {
    static __device__ __forceinline__ float ident() { return __int_as_float(0x7FC00000); }
    static __device__ __forceinline__ float pub() { return -INFINITY; }
    /* Equal operands differ at most in the sign of zero: AND of the bits picks +0. */
    static __device__ __forceinline__ float apply(float a, float b)
    {
        return a == b ? __int_as_float(__float_as_int(a) & __float_as_int(b)) : fmaxf(a, b);
    }
};

template <typename T> struct Min {
    static __device__ __forceinline__ T ident() { return ~T(0); }
    static __device__ __forceinline__ T pub() { return ~T(0); }
    static __device__ __forceinline__ T apply(T a, T b) { return a < b ? a : b; }
};
template <> struct Min<float> {
    static __device__ __forceinline__ float ident() { return __int_as_float(0x7FC00000); }
    static __device__ __forceinline__ float pub() { return INFINITY; }
    static __device__ __forceinline__ float apply(float a, float b)
    {
        return a == b ? __int_as_float(__float_as_int(a) | __float_as_int(b)) : fminf(a, b);
    }
};

/* ---- lane masks and memory-model accessors ----------------------------------------------- */

__device__ __forceinline__ unsigned lanemask_lt(int lane) { return (1u << lane) - 1u; }
__device__ __forceinline__ unsigned lanemask_le(int lane) { return (2u << lane) - 1u; }
__device__ __forceinline__ unsigned lanemask_gt(int lane) { return ~lanemask_le(lane); }
__device__ __forceinline__ unsigned lanemask_ge(int lane) { return ~lanemask_lt(lane); }

__device__ __forceinline__ unsigned long long ld_relaxed64(const unsigned long long *p)
{
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_relaxed64(unsigned long long *p, unsigned long long v)
{
    asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint32_t to_bits(uint32_t v) { return v; }
__device__ __forceinline__ uint32_t to_bits(float v) { return __float_as_uint(v); }
template <typename T> __device__ __forceinline__ T from_bits(uint32_t b);
template <> __device__ __forceinline__ uint32_t from_bits<uint32_t>(uint32_t b) { return b; }
template <> __device__ __forceinline__ float from_bits<float>(uint32_t b)
{
    return __uint_as_float(b);
}

/* ---- tile status ------------------------------------------------------------------------- */

enum : uint32_t { ST_INVALID = 0, ST_AGG = 1, ST_INCL = 2 };

/* Host-side layout of d_temp for a look-back: a 256-byte header (tile counters and, for the
 * kernels that need one, a total), then the tile states; header and states are cleared by one
 * cudaMemsetAsync per call. A tile state never needs a fence: for 4-byte values the status and
 * the value share one 64-bit word, written and read in one access; for 8-byte values each half
 * of the value travels in its own 64-bit word together with the status (status | half << 32),
 * and a reader accepts the pair only when both words carry the same status. Each status is
 * written once per tile, so equal statuses mean both halves come from the same publication. */
struct LbLayout {
    size_t status_off;  /* byte offset of the tile states in d_temp */
    size_t reset_bytes; /* bytes from 0 that must be zeroed per call */
    size_t end;         /* first free byte after the state */
};

static inline size_t lb_align(size_t x) { return (x + 255) & ~(size_t)255; }

static inline size_t lb_state_bytes(size_t ntiles, size_t value_size)
{
    return ntiles * (value_size == 4 ? 8 : 16);
}

static inline LbLayout lb_layout(size_t ntiles, size_t value_size)
{
    LbLayout l;
    l.status_off = 256;
    l.reset_bytes = l.status_off + lb_state_bytes(ntiles, value_size);
    l.end = lb_align(l.reset_bytes);
    return l;
}

template <typename T, bool PACKED = (sizeof(T) == 4)> struct TileState;

template <typename T> struct TileState<T, true> {
    unsigned long long *word;
    static TileState at(void *p)
    {
        TileState s;
        s.word = (unsigned long long *)p;
        return s;
    }
    __device__ __forceinline__ void publish(int id, uint32_t status, T v) const
    {
        st_relaxed64(word + id, ((unsigned long long)to_bits(v) << 32) | status);
    }
    __device__ __forceinline__ void load(int id, uint32_t &status, T &v) const
    {
        const unsigned long long w = ld_relaxed64(word + id);
        status = (uint32_t)w;
        v = from_bits<T>((uint32_t)(w >> 32));
    }
};

template <typename T> struct TileState<T, false> {
    static_assert(sizeof(T) == 8, "8-byte tile values");
    unsigned long long *word; /* two per tile */
    static TileState at(void *p)
    {
        TileState s;
        s.word = (unsigned long long *)p;
        return s;
    }
    __device__ __forceinline__ void publish(int id, uint32_t st, T v) const
    {
        const unsigned long long u = (unsigned long long)v;
        st_relaxed64(word + 2 * id, (u << 32) | st);
        st_relaxed64(word + 2 * id + 1, (u & 0xFFFFFFFF00000000ull) | st);
    }
    __device__ __forceinline__ void load(int id, uint32_t &st, T &v) const
    {
        const unsigned long long lo = ld_relaxed64(word + 2 * id);
        const unsigned long long hi = ld_relaxed64(word + 2 * id + 1);
        st = (uint32_t)lo == (uint32_t)hi ? (uint32_t)lo : ST_INVALID;
        v = (T)((hi & 0xFFFFFFFF00000000ull) | (lo >> 32));
    }
};

/* Grid of persistent blocks: as many as can be resident at once (at most ntiles), after raising
 * the kernel's dynamic shared-memory limit to `smem`. Blocks beyond the resident ones would only
 * find the tile counter exhausted. */
static inline grove_status persistent_grid(grove_ctx *ctx, const void *kern, int block, size_t smem,
                                           size_t ntiles, unsigned *grid, const char *what)
{
    int dev = 0, sms = 0, per = 0;
    GROVE_CUDA_TRY(
        ctx, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
        what);
    GROVE_CUDA_TRY(ctx, cudaGetDevice(&dev), what);
    GROVE_CUDA_TRY(ctx, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), what);
    GROVE_CUDA_TRY(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kern, block, smem),
                   what);
    if (per < 1)
        return grove__error(ctx, GROVE_ERR_CUDA, "%s: no block of the kernel fits on the device",
                            what);
    if (GROVE_LB_MAXBPS > 0 && per > GROVE_LB_MAXBPS) per = GROVE_LB_MAXBPS;
    size_t g = (size_t)per * (size_t)sms;
    if (g > ntiles) g = ntiles;
    *grid = (unsigned)g;
    return GROVE_OK;
}

/* ---- per-thread asynchronous prefetch into shared memory (cp.async, 16 bytes) ----------------
 * Each thread later reads back only the slots it filled itself, so waiting for its own copies is
 * all the synchronisation the data needs. */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_all()
{
    asm volatile("cp.async.wait_group 0;" ::: "memory");
}
/* Waits until at most N of this thread's most recent groups are still in flight. */
template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* Tile ids for persistent blocks: ids come from the counter two iterations ahead (slot ring of
 * four) so that the atomic's latency is hidden. ids_start() takes the first two. A block holds
 * at most its finishing tile, its reducing tile, its prefetched tile and one reserved id; the
 * smallest tile without an inclusive value is always one whose block can proceed (everything
 * before it is inclusive), so the loop cannot deadlock. */
__device__ __forceinline__ void ids_start(uint32_t *counter, int *slots)
{
    if (threadIdx.x == 0) {
        slots[0] = (int)atomicAdd(counter, 1u);
        slots[1] = (int)atomicAdd(counter, 1u);
    }
    __syncthreads();
}
/* At the start of iteration `it`: reserve the id for iteration it + 2. */
__device__ __forceinline__ void ids_reserve(uint32_t *counter, int *slots, int it)
{
    if (threadIdx.x == 0) slots[(it + 2) & 3] = (int)atomicAdd(counter, 1u);
}
/* After a barrier in iteration `it`: the id of iteration it + 1. */
__device__ __forceinline__ int ids_next(const int *slots, int it) { return slots[(it + 1) & 3]; }

/* Reduction over the warp with a commutative operator (all look-back operators are). */
template <class Op, typename T> __device__ __forceinline__ T warp_reduce(T v)
{
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) v = Op::apply(v, __shfl_xor_sync(FULL, v, d));
    return v;
}

/* Warp-parallel look-back for tile `id` >= 1, called by all 32 lanes of one warp. Each round
 * inspects W x 32 predecessors at once (lane i, sub-window j: tile window - 32j - i), so that a
 * tile whose nearest inclusive predecessor is hundreds of tiles back (persistent blocks start a
 * "band" of tiles together, and inside a band only aggregates exist at first) gets there in few
 * memory round trips. It waits only for the tiles up to the nearest inclusive one, reduces their
 * values and returns the exclusive prefix of tile `id` (the same in every lane). The operator must
 * be commutative. */
template <class Op, typename T, class State> __device__ T lookback(const State &st, int id)
{
    constexpr int W = GROVE_LB_W;
    const int lane = threadIdx.x & 31;
    T prefix = Op::ident();
    for (int window = id - 1;; window -= 32 * W) {
        uint32_t s[W];
        T v[W];
        unsigned need[W];
        bool found;
        for (int spin = 0;; ++spin) {
#pragma unroll
            for (int j = 0; j < W; ++j) {
                const int pred = window - 32 * j - lane;
                if (pred >= 0) {
                    st.load(pred, s[j], v[j]);
                } else {
                    s[j] = ST_INCL;
                    v[j] = Op::ident();
                }
            }
            bool wait = false;
            found = false;
#pragma unroll
            for (int j = 0; j < W; ++j) {
                const unsigned incl = __ballot_sync(FULL, s[j] == ST_INCL);
                const unsigned inval = __ballot_sync(FULL, s[j] == ST_INVALID);
                need[j] = found ? 0u : incl ? (incl ^ (incl - 1u)) : FULL;
                wait = wait || (inval & need[j]) != 0u;
                found = found || incl != 0u;
            }
            if (!wait) break;
            if (spin > 4) __nanosleep(64); /* let the predecessors' stores through */
        }
        T c = Op::ident();
#pragma unroll
        for (int j = 0; j < W; ++j)
            if ((need[j] >> lane) & 1u) c = Op::apply(c, v[j]);
        prefix = Op::apply(warp_reduce<Op>(c), prefix);
        if (found) return prefix;
    }
}

/* ---- warp and block scans of (flag, value) pairs --------------------------------------------
 * A pair's flag marks the start of a segment in scan order. The combination of a (earlier) and
 * b (later) is (fa | fb, fb ? vb : op(va, vb)). With SEG false the flags are ignored and Op need
 * only be associative (the order of operands is kept). BWD scans from lane 31 down to lane 0. */

template <class Op, bool SEG, bool BWD, typename T>
__device__ __forceinline__ T warp_scan_incl(T v, unsigned m, int lane)
{
    if (!BWD) {
        const int s = SEG ? 31 - __clz(m & lanemask_le(lane)) : -1;
        const int lim = s > 0 ? s : 0;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            T t = __shfl_up_sync(FULL, v, d);
            if (lane - d >= lim) v = Op::apply(t, v);
        }
    } else {
        const unsigned mm = SEG ? (m & lanemask_ge(lane)) : 0u;
        const int e = mm ? __ffs(mm) - 1 : 31;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            T t = __shfl_down_sync(FULL, v, d);
            if (lane + d <= e) v = Op::apply(v, t);
        }
    }
    return v;
}

/* Block-wide scan of K per-thread aggregates (one per "round" k) in scan order, in phases so
 * that a persistent block can split a tile's work across two iterations. FORWARD order is
 * round-major, then thread; BWD reverses both.
 *   reduce()   all threads: K independent shuffle scans; warp totals into ts, and per thread the
 *              warp-exclusive values ex[k] and their flags (bit k of exf).
 *   local()    warp 0 (after a barrier): scans ts's entries in place into tile-local exclusive
 *              prefixes, records and returns the tile aggregate.
 *   fold()     warp 0: folds the tile prefix P into the entries.
 *   carry()    all threads (after a barrier): this thread's exclusive prefix for round k.
 * A warp writes only its own entries, after a __syncwarp that orders them after its lanes'
 * reads of the previous use of the same TileSm. */
template <typename T, class Op, bool SEG, bool BWD, int BLOCK, int K> struct Pipe {
    static constexpr int NW = BLOCK / 32;
    static constexpr int E = K * NW;
    static constexpr int PER = (E + 31) / 32;

    struct TileSm {
        T val[E];
        uint8_t flag[E];
        T agg;
        int any;   /* SEG: the tile holds a segment start */
        int first; /* SEG: its first element in scan order starts a segment */
    };

    static __device__ __forceinline__ int entry(int k, int warp)
    {
        return BWD ? (K - 1 - k) * NW + (NW - 1 - warp) : k * NW + warp;
    }

    static __device__ __forceinline__ void reduce(TileSm &ts, const T (&a)[K], const bool (&f)[K],
                                                  T (&ex)[K], unsigned &exf)
    {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        unsigned m[K];
        T v[K];
#pragma unroll
        for (int k = 0; k < K; ++k) {
            m[k] = SEG ? __ballot_sync(FULL, f[k]) : 0u;
            v[k] = a[k];
        }
        int lim[K];
#pragma unroll
        for (int k = 0; k < K; ++k) {
            if (!BWD) {
                const int s = SEG ? 31 - __clz(m[k] & lanemask_le(lane)) : -1;
                lim[k] = s > 0 ? s : 0;
            } else {
                const unsigned mm = SEG ? (m[k] & lanemask_ge(lane)) : 0u;
                lim[k] = mm ? __ffs(mm) - 1 : 31;
            }
        }
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
#pragma unroll
            for (int k = 0; k < K; ++k) {
                if (!BWD) {
                    T t = __shfl_up_sync(FULL, v[k], d);
                    if (lane - d >= lim[k]) v[k] = Op::apply(t, v[k]);
                } else {
                    T t = __shfl_down_sync(FULL, v[k], d);
                    if (lane + d <= lim[k]) v[k] = Op::apply(v[k], t);
                }
            }
        }
        const int last = BWD ? 0 : 31, first = BWD ? 31 : 0;
        __syncwarp();
        exf = 0;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            if (lane == last) {
                ts.val[entry(k, warp)] = v[k];
                ts.flag[entry(k, warp)] = m[k] != 0u;
            }
            /* The first lane in scan order gets its own value back from the shuffle. */
            T t = BWD ? __shfl_down_sync(FULL, v[k], 1) : __shfl_up_sync(FULL, v[k], 1);
            ex[k] = lane == first ? Op::ident() : t;
            if (SEG && (m[k] & (BWD ? lanemask_gt(lane) : lanemask_lt(lane))) != 0u) exf |= 1u << k;
        }
    }

    static __device__ __forceinline__ T local(TileSm &ts, bool &any)
    {
        const int lane = threadIdx.x & 31;
        T ev[PER];
        bool ef[PER];
        T acc = Op::ident();
        bool af = false;
#pragma unroll
        for (int i = 0; i < PER; ++i) {
            const int q = lane * PER + i;
            ev[i] = q < E ? ts.val[q] : Op::ident();
            ef[i] = q < E ? (SEG && ts.flag[q]) : false;
            acc = ef[i] ? ev[i] : Op::apply(acc, ev[i]);
            af = af || ef[i];
        }
        const unsigned wm = SEG ? __ballot_sync(FULL, af) : 0u;
        const T inc = warp_scan_incl<Op, SEG, false>(acc, wm, lane);
        T run = __shfl_up_sync(FULL, inc, 1);
        if (lane == 0) run = Op::ident();
        bool rf = SEG && (wm & lanemask_lt(lane)) != 0u;
#pragma unroll
        for (int i = 0; i < PER; ++i) {
            const int q = lane * PER + i;
            if (q < E) {
                ts.val[q] = run;
                ts.flag[q] = rf;
            }
            run = ef[i] ? ev[i] : Op::apply(run, ev[i]);
            rf = rf || ef[i];
        }
        const T agg = __shfl_sync(FULL, inc, 31);
        any = wm != 0u;
        if (lane == 0) {
            ts.agg = agg;
            ts.any = any;
        }
        return agg;
    }

    static __device__ __forceinline__ void fold(TileSm &ts, T P)
    {
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int i = 0; i < PER; ++i) {
            const int q = lane * PER + i;
            if (q < E && !(SEG && ts.flag[q])) ts.val[q] = Op::apply(P, ts.val[q]);
        }
    }

    static __device__ __forceinline__ void carry(const TileSm &ts, const T (&ex)[K], unsigned exf,
                                                 T (&c)[K])
    {
        const int warp = threadIdx.x >> 5;
#pragma unroll
        for (int k = 0; k < K; ++k)
            c[k] = ((exf >> k) & 1u) ? ex[k] : Op::apply(ts.val[entry(k, warp)], ex[k]);
    }
};

/* Bit j set iff byte j of w is nonzero. */
__device__ __forceinline__ uint32_t nz_bits4(uint32_t w)
{
    const uint32_t t = __vcmpne4(w, 0u);
    return (t & 1u) | ((t >> 7) & 2u) | ((t >> 14) & 4u) | ((t >> 21) & 8u);
}

} /* namespace grove_lb */

#endif /* GROVE_LOOKBACK_CUDA_CUH */
