/*
 * bezier_cuda.cu - the CUDA tessellation: one single-pass kernel (count, scan by decoupled
 * look-back, offsets, vertices); the host side of the `cdp` writer (the grouping, the
 * pending-launch limit, chunks, the device flags), whose kernels are in bezier_cdp.cu; the
 * host-pointer path of grove_bezier_tessellate.
 *
 * flat. Persistent blocks (as many as fit at once) take tiles of kC curves in look-back order;
 * for each, a block counts the curves, publishes the tile's vertex total, looks back for its
 * prefix, writes the tile's offsets and then the tile's vertices with bezier_internal.h's tile
 * writer (chunks of 64 vertices a thread, a pair of vertices a 16-byte store). The control
 * points are read once (staged in shared memory for both the count and the vertices), and the
 * host waits once, after the only kernel. docs/bezier-gpu.md has the floors and the figures.
 */
#include <cuda_runtime.h>

#include <atomic>
#include <type_traits>
#include <stdint.h>
#include <string.h>

#include "bezier_cuda.h"
#include "core_cuda.h"
/* The look-back inspects 32 predecessors a round trip (prim's default width): wider windows
 * were slower in a same-run A/B on the H200 (2026-11-28, flat at 10^7 curves: 1 x 32 0.613-0.618
 * ms, 2 x 32 0.619-0.625, 4 x 32 0.625-0.634, 8 x 32 0.660-0.675, 16 x 32 0.755-0.769). */
#include "../prim/lookback_cuda.cuh"

/* ---- the launcher in bezier_cdp.cu ---- */

extern "C" cudaError_t grove__bz_cdp_launch(const float *d_cp, const uint8_t *d_degree,
                                            const uint64_t *d_offsets, uint64_t first,
                                            uint64_t count, uint64_t group, uint32_t big, int k8,
                                            int mode, float *d_xy, unsigned long long *d_state,
                                            unsigned long long *rec, cudaStream_t stream);
extern "C" cudaError_t grove__bz_cdp_prepare(void);

namespace
{

using namespace grove_bzk;

/* cdp: launches one parent grid may queue at most (the pending-launch limit asked for), halved
 * on refusal down to kChunkFloor (or the need when smaller). 2^17: a parent grid of 10^6 child
 * launches had 40% of them refused on the H100 with the limit at 10^6 (the pool held about
 * 6*10^5), so the default stays well below that. */
constexpr size_t kChunkDefault = (size_t)1 << 17;
constexpr size_t kChunkFloor = 16384;
/* cdp grouping: a group child grid per kGroupDefault curves; a child of its own for each curve
 * of at least kBigDefault vertices (only possible when max_points >= kBigDefault). */
constexpr size_t kGroupDefault = (size_t)1 << 19;
constexpr uint32_t kBigDefault = 1024;
size_t g_chunk_max = 0, g_device_cap = 0, g_group = 0;
uint32_t g_big = 0;
/* grove__bz_flat_tune: the tile writer's chunk width (vertices a thread) instead of the
 * defaults (flat 64, the cdp children 16): 8 for both, or 16 or 32 for flat (test and bench
 * hook; 32 was flat's default until 2026-11-29) */
int g_per = 0;
/* grove__bz_flat_mode: 0 the default, else the one of enum FlatMode */
int g_flat_mode = 0;
enum FlatMode {
    FLAT_DEFAULT = 0,
    FLAT_BLOCK_A_TILE,
    FLAT_PERSIST,
    FLAT_PERSIST_EARLY,
    FLAT_PERSIST_ONE,       /* test hook: persistent, one block (all tiles in turn) */
    FLAT_PERSIST_EARLY_ONE, /* the same, early */
    FLAT_PERSIST_FETCH,     /* persistent, the state words copied back (not zero-copy) */
    FLAT_PERSIST_LAST,      /* persistent, the next tile taken (and its curves asked of L2) at the
                             * start of the current one's last chunk: the default from the
                             * sixteenth session until the twentieth (2026-11-29) */
    FLAT_PERSIST_NOPRE      /* persistent, a writing pass's look-back right after the count, the
                             * writer's preparation and first chunk head after it (the default
                             * until the twenty-first session, 2026-11-29) */
};
constexpr int kFlatDefault = FLAT_PERSIST;
constexpr int kAheadDiv = 5; /* the L2 prefetch runs room / kAheadDiv tiles ahead of the claims */
constexpr int kDoneWord = 8; /* st[8]: blocks finished (the zero-copy state words) */
constexpr int kFlagWord = S_COUNT; /* the page-locked word after the state words: the tag of the
                                    * pass whose state words are there */
/* grove__bz_flat_wait: 1 waits for the stream instead of polling the tag (test hook);
 * grove__bz_flat_polls: the waits that polled the tag (test hook) */
int g_wait_sync = 0;
std::atomic<unsigned long long> g_polled_waits{0};
/* grove__bz_flat_events: events recorded on the stream just before and after a writing pass's
 * kernel (bench hook: the kernel's own time beside the call's) */
cudaEvent_t g_kev[2] = {nullptr, nullptr};
/* grove__bz_cdp_mode: 0 the default, else bezier_cdp.cu's child variant (1: a tile a block, the
 * child before session 8; 2: 4 tiles a block, the default). */
int g_cdp_mode = 0;
constexpr int kCdpDefault = 2;
unsigned long long *g_cdp_rec = nullptr; /* grove__bz_cdp_probe */
/* The persistent grid (multiprocessors x resident blocks of bz_fused_persist<aligned, kPer>) per
 * device, asked once: the occupancy query costs host time on every call otherwise. */
constexpr int kOccDevices = 64;
std::atomic<int> g_room[kOccDevices][24];

/* Calls f(A, P) with A = std::integral_constant<bool, al> and P = std::integral_constant<int,
 * kPer>, kPer = per when 8, 16 or 32 and 64 otherwise (tile_write's chunks), so that one launch
 * site serves the eight instantiations of a single-pass kernel. */
template <typename F> auto writer_dispatch(bool al, int per, F &&f)
{
    using T = std::true_type;
    using N = std::false_type;
    using P8 = std::integral_constant<int, 8>;
    using P16 = std::integral_constant<int, 16>;
    using P32 = std::integral_constant<int, 32>;
    using P64 = std::integral_constant<int, 64>;
    if (al)
        return per == 8    ? f(T(), P8())
               : per == 16 ? f(T(), P16())
               : per == 32 ? f(T(), P32())
                           : f(T(), P64());
    return per == 8    ? f(N(), P8())
           : per == 16 ? f(N(), P16())
           : per == 32 ? f(N(), P32())
                       : f(N(), P64());
}

/* Shared memory of the single pass besides the tile's staging. */
struct FusedSmem {
    u64 prefix;
    int id[2];
    unsigned capped[kT / 32];
};

/* The tile states of one call: prim's 16-byte states with the call's tag in the status
 * (tag = the kept scratch's epoch << 2, never 0), so that a state an earlier call left there
 * reads as unpublished and the states need no clearing between calls (grove__cuda_kept). */
struct CallState {
    grove_lb::TileState<u64> b;
    uint32_t tag;
    __device__ __forceinline__ void publish(int id, uint32_t status, u64 v) const
    {
        b.publish(id, tag | status, v);
    }
    __device__ __forceinline__ void load(int id, uint32_t &status, u64 &v) const
    {
        uint32_t raw;
        b.load(id, raw, v);
        status = (raw & ~3u) == tag ? (raw & 3u) : grove_lb::ST_INVALID;
    }
};
/* epochs below 2^30, so that tag | status fits the status word */
constexpr uint32_t kMaxEpoch = 1u << 30;

/* Called by one whole warp: asks L2 for tile `id`'s control points (32 B a curve) and degrees,
 * a 128-byte line a request, every line inside the input (none past the last tile). */
__device__ __forceinline__ void prefetch_tile(u64 id, u64 ntiles, u64 n,
                                              const float *__restrict__ cp,
                                              const uint8_t *__restrict__ deg)
{
    if (id >= ntiles) return;
    const unsigned lane = threadIdx.x & 31u;
    const u64 c0 = id * kC;
    const u64 C = n - c0 < (u64)kC ? n - c0 : (u64)kC;
    const char *pc = reinterpret_cast<const char *>(cp + 8 * c0);
    const u64 lines = (32 * C + 127) / 128;
    for (u64 l = lane; l < lines; l += 32)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(pc + 128 * l));
    if (lane < (C + 127) / 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(deg + c0 + 128 * lane));
}

/* Called by one whole warp: takes the block's next tile id from the counter into f.id[nb] and
 * asks L2 for that tile's curves. */
__device__ __forceinline__ void take_next(FusedSmem &f, int nb, uint32_t *counter, u64 ntiles,
                                          u64 n, const float *__restrict__ cp,
                                          const uint8_t *__restrict__ deg)
{
    const unsigned lane = threadIdx.x & 31u;
    int nx = 0;
    if (lane == 0) nx = (int)atomicAdd(counter, 1u);
    nx = __shfl_sync(0xffffffffu, nx, 0);
    if (lane == 0) f.id[nb] = nx;
    prefetch_tile((u64)nx, ntiles, n, cp, deg);
}

/* One tile of the single pass (decoupled look-back, Merrill & Garland, with prim's tile states):
 * stages tile `id`'s curves, counts them, scans the counts, publishes the tile's total and looks
 * back for the vertices before it, writes the tile's offsets and then its vertices below cap.
 * The last tile writes off[n] and the total into st[S_TOTAL].
 * With `next` (persistent blocks, early mode), warp 0 takes the block's next tile id into
 * f.id[nb] as soon as this tile's inclusive value is published and asks L2 for its curves, so
 * that they arrive while this tile is written. kPre (a writing pass): the tile's total is
 * published first, then the whole block prepares the writer and runs its first chunk head
 * (neither needs the prefix), and warp 0 looks back only then, when more of the tiles before
 * have published theirs (fewer polls of unpublished states, and the wait overlaps that work). */
template <bool kAligned, int kPer, bool kLast = false, bool kPre = false>
__device__ __forceinline__ void
fused_tile(TileSmemT<kPer> &s, FusedSmem &f, int id, int nb, bool next,
           const float *__restrict__ cp, const uint8_t *__restrict__ deg, u64 n, u64 ntiles,
           const grove__bz_rule &r, u64 *__restrict__ off, float *__restrict__ xy, u64 cap,
           uint32_t *counter, CallState ts, u64 *__restrict__ st)
{
    /* kLast's writer runs its own preparation and takes the next tile at its last chunk's
     * head: it cannot follow kPre's early preparation */
    static_assert(!(kLast && kPre), "kPre is for the writer that takes the next tile after");
    const unsigned t = threadIdx.x, lane = t & 31u, w = t >> 5;
    const u64 c0 = (u64)id * kC;
    const int C = n - c0 < (u64)kC ? (int)(n - c0) : kC;
    tile_stage(s, cp, deg, c0, C);
    __syncthreads();
    /* thread t counts curves t and t + kT: a lane stride of one curve (32 bytes), where curves
     * 2t and 2t + 1 had the count's 8-byte loads at a 64-byte stride (twice the bank
     * conflicts); the two counts are scanned together, as the low and high halves of one word
     * (a half sums at most kT x GROVE_BEZIER_MAX_POINTS = 2^20) */
    static_assert(kCPT == 2, "the count scans two curves a thread as one 64-bit word");
    uint32_t m[kCPT];
    unsigned capped = 0;
#pragma unroll
    for (int k = 0; k < kCPT; k++) {
        const int j = (int)t + k * kT;
        m[k] = 0;
        if (j < C) {
            /* straight from shared memory: a local copy would live in local memory */
            const grove__bz_count cn = grove__bz_count_curve(
                reinterpret_cast<const float *>(&s.cp[cp_unit(j)]), s.deg[j], &r);
            m[k] = cn.m;
            capped += cn.capped;
        }
    }
    const u64 sum = (u64)m[0] | ((u64)m[1] << 32);
    u64 x = sum;
    unsigned cw = capped;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const u64 y = __shfl_up_sync(0xffffffffu, x, d);
        if (lane >= (unsigned)d) x += y;
        cw += __shfl_xor_sync(0xffffffffu, cw, d);
    }
    if (lane == 31) s.wt[0][w] = (uint32_t)x, s.wt[1][w] = (uint32_t)(x >> 32);
    if (lane == 0) f.capped[w] = cw;
    __syncthreads();
    const u64 ex = x - sum;
    uint32_t pre0 = (uint32_t)ex, pre1 = (uint32_t)(ex >> 32), agg0 = 0, agg1 = 0;
    for (unsigned i = 0; i < kT / 32; i++) {
        if (i < w) pre0 += s.wt[0][i], pre1 += s.wt[1][i];
        agg0 += s.wt[0][i];
        agg1 += s.wt[1][i];
    }
    const uint32_t agg = agg0 + agg1; /* the tile's vertices */
    s.off[t] = pre0;
    s.off[t + kT] = agg0 + pre1;
    if (t == kT - 1) s.off[kC] = agg;
    if constexpr (kPre) {
        /* the tile's total first; then the writer's preparation and first chunk head, which do
         * not depend on the prefix, while the tiles before finish counting; then the look-back */
        if (t == 0) ts.publish(id, id == 0 ? grove_lb::ST_INCL : grove_lb::ST_AGG, (u64)agg);
        __syncthreads();
        tile_prep(s, C, 0xffffffffu);
        tile_head<kPer, false>(s, C, 0u, 0);
    }
    if (w == 0) {
        u64 prefix = 0;
        if (id == 0) {
            if (lane == 0 && !kPre) ts.publish(0, grove_lb::ST_INCL, (u64)agg);
        } else {
            if (lane == 0 && !kPre) ts.publish(id, grove_lb::ST_AGG, (u64)agg);
            prefix = grove_lb::lookback<grove_lb::Sum<u64>, u64>(ts, id);
            if (lane == 0) ts.publish(id, grove_lb::ST_INCL, prefix + agg);
        }
        if (lane == 0) {
            unsigned cs = 0;
            for (int i = 0; i < kT / 32; i++) cs += f.capped[i];
            if (cs && st) atomicAdd(&st[S_CAPPED], (u64)cs);
            f.prefix = prefix;
        }
        if (next) take_next(f, nb, counter, ntiles, n, cp, deg);
    }
    __syncthreads();
    const u64 vbase = f.prefix;
    for (int j = (int)t; j < C; j += kT) off[c0 + j] = vbase + s.off[j];
    if (c0 + (u64)C == n && t == 0) {
        off[n] = vbase + agg;
        st[S_TOTAL] = vbase + agg;
    }
    if (!kLast) {
        tile_write<kAligned, kPer, false, false, kPre>(s, C, vbase, cap, 0xffffffffu, xy);
        return;
    }
    /* kLast: the next tile id is taken at the start of this tile's last chunk, and its curves
     * asked of L2, so that they arrive while the chunk is written; f.id[nb] = -1 until then
     * (set by the caller), and taken after the writer when it returns without a chunk */
    auto take = [&]() {
        if (w == 0) take_next(f, nb, counter, ntiles, n, cp, deg);
    };
    tile_write<kAligned, kPer, false, false, false>(s, C, vbase, cap, 0xffffffffu, xy, take);
}

/* The single pass, a block a tile: a block takes the next tile id (so tile i only ever waits for
 * tiles < i that are already running: no deadlock whatever the scheduling) and runs fused_tile. */
template <bool kAligned, int kPer>
__global__ void __launch_bounds__(kT, 5)
    bz_fused(const float *__restrict__ cp, const uint8_t *__restrict__ deg, u64 n, grove__bz_rule r,
             u64 *__restrict__ off, float *__restrict__ xy, u64 cap, uint32_t *counter,
             CallState ts, u64 *__restrict__ st)
{
    __shared__ TileSmemT<kPer> s;
    __shared__ FusedSmem f;
    if (threadIdx.x == 0) f.id[0] = (int)atomicAdd(counter, 1u);
    __syncthreads();
    const u64 ntiles = (n + kC - 1) / kC;
    fused_tile<kAligned, kPer>(s, f, f.id[0], 1, false, cp, deg, n, ntiles, r, off, xy, cap,
                               counter, ts, st);
}

/* The single pass with persistent blocks (as many as fit at once): a block takes tiles until none
 * is left (one launch of as many blocks as fit, the tile's shared memory set up once a block).
 * Tile ids still come from the counter in order, so the look-back cannot deadlock whatever
 * the number of resident blocks. early: take the next tile id when this tile's prefix is
 * published and prefetch its curves into L2; else kLast: take it, and prefetch, at the start of
 * this tile's last chunk; else: take it when this tile is written, and, with ahead > 0, ask L2
 * at each tile's start for the curves of tile id + ahead, which another block will take about
 * then (tiles are taken in order, one every few tens of nanoseconds), so that a tile is staged
 * from L2 although it is taken only when the block is free to count it. kPre: fused_tile's. */
template <bool kAligned, int kPer, bool kLast = false, bool kPre = false>
__global__ void __launch_bounds__(kT, 5)
    bz_fused_persist(const float *__restrict__ cp, const uint8_t *__restrict__ deg, u64 n,
                     grove__bz_rule r, u64 *__restrict__ off, float *__restrict__ xy, u64 cap,
                     uint32_t *counter, CallState ts, u64 *__restrict__ st, int early, u64 *hs_map,
                     int ahead)
{
    __shared__ TileSmemT<kPer> s;
    __shared__ FusedSmem f;
    const u64 ntiles = (n + kC - 1) / kC;
    if (threadIdx.x == 0) f.id[0] = (int)atomicAdd(counter, 1u);
    __syncthreads();
    int cur = 0;
    for (int id = f.id[0]; (u64)id < ntiles;) {
        if (kLast && threadIdx.x == 0) f.id[cur ^ 1] = -1;
        if (ahead > 0 && threadIdx.x < 32) prefetch_tile((u64)id + (u64)ahead, ntiles, n, cp, deg);
        fused_tile<kAligned, kPer, kLast, kPre>(s, f, id, cur ^ 1, early != 0, cp, deg, n, ntiles,
                                                r, off, xy, cap, counter, ts, st);
        if (kLast) {
            __syncthreads();
            if (threadIdx.x == 0 && f.id[cur ^ 1] < 0) f.id[cur ^ 1] = (int)atomicAdd(counter, 1u);
        } else if (!early && threadIdx.x == 0) {
            f.id[cur ^ 1] = (int)atomicAdd(counter, 1u);
        }
        /* the tile's shared memory is read until here; f.id[cur ^ 1] is written before */
        __syncthreads();
        cur ^= 1;
        id = f.id[cur];
    }
    if (!hs_map) return;
    /* the block that finishes last copies the state words to the host's page-locked memory, so
     * that the host reads them after its wait with no copy of its own */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned done = atomicAdd(reinterpret_cast<unsigned *>(&st[kDoneWord]), 1u);
        if (done == gridDim.x - 1) {
            __threadfence();
            volatile u64 *vs = st;
            for (int i = 0; i < S_COUNT; i++) hs_map[i] = vs[i];
            __threadfence_system();
            /* the pass's tag last: the host, polling it, reads the words above once it sees it
             * (every block's outputs were fenced before its count of finished blocks) */
            *(volatile u64 *)&hs_map[kFlagWord] = ts.tag;
            /* every other block has finished: the state words and the tile counter are
             * cleared for the next call (after this kernel in stream order), so that it needs
             * no memset of its own */
            for (int i = 0; i < S_COUNT; i++) vs[i] = 0;
            vs[kDoneWord] = 0;
            *(volatile uint32_t *)counter = 0;
        }
    }
}

/* The scratch of a single pass: the context's kept buffer (grove__cuda_kept, slot
 * GROVE__KEPT_BEZIER): the state words, then the look-back's counter and tile states, and the
 * pass's tag for the tile states (a new epoch each pass). Nothing in it is freed per call. */
struct Scratch {
    grove_ctx *ctx;
    cudaStream_t s;
    void *buf;
    u64 *st;
    void *lb;
    uint32_t tag;
};

constexpr size_t kStBytes = 256;              /* S_COUNT words, padded */
constexpr size_t kHeadBytes = kStBytes + 256; /* the state words and the look-back's header */

grove_status scratch_take(Scratch &S, size_t n)
{
    const size_t ntiles = (n + kC - 1) / kC;
    const grove_lb::LbLayout l = grove_lb::lb_layout(ntiles, sizeof(u64));
    void *p = nullptr;
    uint32_t epoch = 0;
    GROVE_TRY(grove__cuda_kept(S.ctx, GROVE__KEPT_BEZIER, kStBytes + l.end, kMaxEpoch,
                               "the Bezier tessellation's scratch", &p, &epoch));
    S.buf = p;
    S.st = static_cast<u64 *>(S.buf);
    S.lb = static_cast<char *>(S.buf) + kStBytes;
    S.tag = epoch << 2;
    return GROVE_OK;
}

/* The persistent grid of writer kernel fn (kT threads) on the context's device: multiprocessors
 * x resident blocks, asked once per device and kernel and kept in *slot (when given). */
grove_status persist_room(grove_ctx *ctx, std::atomic<int> *slot, const void *fn, int *room)
{
    *room = slot ? slot->load(std::memory_order_relaxed) : 0;
    if (*room > 0) return GROVE_OK;
    int sms = 0, per = 0;
    /* the largest shared-memory carveout, asked for every persistent single-pass kernel since
     * 2026-11-28 (the figures of that date and after were measured with it; the block-a-tile
     * hook's kernels keep the driver's choice) */
    GROVE_CUDA_TRY(ctx,
                   cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout,
                                        cudaSharedmemCarveoutMaxShared),
                   "bezier: asking for the tessellation kernel's shared memory");
    GROVE_CUDA_TRY(ctx, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device),
                   "bezier: reading the multiprocessor count");
    GROVE_CUDA_TRY(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, fn, kT, 0),
                   "bezier: reading the tessellation kernel's occupancy");
    *room = (sms > 0 ? sms : 1) * (per > 0 ? per : 1);
    if (slot) slot->store(*room, std::memory_order_relaxed);
    return GROVE_OK;
}

/* Waits until the pass tagged `tag` has left its state words in the context's page-locked
 * scratch (its last block writes the tag after them): the outputs are then complete and
 * visible, and only that block is still running, clearing the scratch's header for the next
 * pass (which comes after it in stream order). Polled, because the stream's own wait adds a few
 * microseconds after the grid ends (2 us a call on the H200, 10^5 curves 0.025 -> 0.023 ms);
 * where the device was set to block or yield while waiting, the stream is waited for instead.
 * A failed kernel never writes the tag: the stream is asked now and then, and its error
 * returned. */
grove_status wait_tag(grove_ctx *ctx, cudaStream_t s, u64 tag, const char *what)
{
    if (!ctx->spin_wait || g_wait_sync) {
        GROVE_CUDA_TRY(ctx, cudaStreamSynchronize(s), what);
        return GROVE_OK;
    }
    g_polled_waits.fetch_add(1, std::memory_order_relaxed);
    /* an acquire load: the state words, written before the tag, are read after it */
    u64 *const flag = static_cast<u64 *>(ctx->pinned) + kFlagWord;
    for (unsigned i = 1; __atomic_load_n(flag, __ATOMIC_ACQUIRE) != tag; i++) {
        if ((i & 1023u) == 0) {
            const cudaError_t e = cudaStreamQuery(s);
            if (e == cudaErrorNotReady) continue;
            if (e != cudaSuccess) return grove__cuda_status(ctx, (int)e, what);
            if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == tag) break;
            return grove__error(ctx, GROVE_ERR_INTERNAL,
                                "%s: the kernel ended without leaving its results; this is a bug",
                                what);
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield");
#endif
    }
    return GROVE_OK;
}

/* The single pass: offsets into d_off (n + 1 words), the vertices below cap into d_xy (cap 0:
 * counts only); then the state words into hs (waits for them). hs[S_TOTAL] is the total. */
grove_status fused(Scratch &S, const float *d_cp, const uint8_t *d_deg, size_t n,
                   const grove_bezier_opts *o, u64 *d_off, float *d_xy, u64 cap, u64 *hs)
{
    grove_ctx *ctx = S.ctx;
    const bool cache = ctx->device >= 0 && ctx->device < kOccDevices;
    bool mapped = false; /* the kernel leaves the state words in ctx->pinned and clears the
                          * scratch's header for the next pass */
    bool timed = false;  /* the bench's events are recorded around the kernel */
    GROVE_TRY(scratch_take(S, n));
    /* The tile states are tagged with this pass's epoch, so only the header (state words and
     * tile counter) must be zero: a persistent pass's kernel leaves it so (counting or
     * writing, when the page-locked scratch is mapped), and the next pass skips the memset (a
     * node of its own in the stream, about 5 us of a call, measured) */
    int &clean = ctx->kept_clean[GROVE__KEPT_BEZIER];
    const bool was_clean = clean != 0;
    clean = 0;
    if (!was_clean)
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(S.buf, 0, kHeadBytes, S.s),
                       "bezier: clearing the device state");
    if (n == 0) {
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(d_off, 0, sizeof(u64), S.s),
                       "bezier: writing the empty offsets");
    } else {
        const u64 ntiles = ((u64)n + kC - 1) / kC;
        grove__bz_rule r;
        grove__bz_rule_from(o, &r);
        uint32_t *counter = static_cast<uint32_t *>(S.lb);
        CallState ts;
        ts.b = grove_lb::TileState<u64>::at(static_cast<char *>(S.lb) + 256);
        ts.tag = S.tag;
        if (ntiles > 0x7fffffffull)
            return grove__error(ctx, GROVE_ERR_LIMIT, "bezier: %zu curves are too many", n);
        const bool al = ((uintptr_t)d_xy & 7) == 0;
        const int mode = g_flat_mode ? g_flat_mode : kFlatDefault;
        grove_status st = GROVE_OK;
        if (mode == FLAT_BLOCK_A_TILE) {
            const unsigned g = (unsigned)ntiles;
            st = writer_dispatch(al, g_per, [&](auto A, auto P) -> grove_status {
                bz_fused<decltype(A)::value, decltype(P)::value>
                    <<<g, kT, 0, S.s>>>(d_cp, d_deg, n, r, d_off, d_xy, cap, counter, ts, S.st);
                return GROVE_OK;
            });
        } else {
            /* counting only, a block takes its next tile as soon as the tile before is
             * published (9% faster, measured: nothing to write meanwhile); when it writes, a
             * tile taken early would hold back the look-back of every later tile until the
             * vertices of the one before are written (12% slower, measured), so it takes its
             * next tile when the current one is written, and the curves of the tile `ahead`
             * places on are asked of L2 at each tile's start: a tile's total then comes a
             * staging from L2 and a count after its claim, where a claim at the start of the
             * last chunk (kLast, the hook) waited for a varying part of a chunk's writing
             * first (10^7 curves on the H200, 2026-11-29: 0.541-0.548 ms against 0.550-0.556,
             * half lines 0.423-0.428 against 0.452-0.457; taken at the end without the
             * prefetch 0.579-0.582) */
            const int early =
                cap == 0 || mode == FLAT_PERSIST_EARLY || mode == FLAT_PERSIST_EARLY_ONE;
            const bool last = !early && mode == FLAT_PERSIST_LAST;
            /* a writing pass publishes its tile's total, prepares the writer and runs the first
             * chunk head, and only then looks back: the tiles before have had that long to
             * publish their totals (10^7 curves on the H200, 2026-11-29: 0.512-0.515 ms
             * against 0.532-0.536 looking back first, half lines 0.395-0.396 against
             * 0.423-0.428); counting only, nothing is written and the look-back comes first */
            const bool pre = !early && !last && mode != FLAT_PERSIST_NOPRE;
            /* the state words come back zero-copy, and the kernel clears the header for the
             * next pass (counting only too, since 2026-11-29: count-only calls and cdp's count
             * pass had copied them back and left the header to the next pass's memset) */
            u64 *hs_map = nullptr;
            if (mode != FLAT_PERSIST_FETCH && ctx->pinned_dev &&
                ctx->pinned_bytes >= (kFlagWord + 1) * sizeof(u64))
                hs_map = static_cast<u64 *>(ctx->pinned_dev);
            mapped = hs_map != nullptr;
            /* the tag of an earlier pass could only equal this one's after the epochs' wrap */
            if (mapped)
                __atomic_store_n(static_cast<u64 *>(ctx->pinned) + kFlagWord, 0ull,
                                 __ATOMIC_RELAXED);
            timed = g_kev[0] && cap > 0;
            if (timed)
                GROVE_CUDA_TRY(ctx, cudaEventRecord(g_kev[0], S.s), "bezier: the bench's event");
            st = writer_dispatch(al, g_per, [&](auto A, auto P) -> grove_status {
                constexpr bool kA = decltype(A)::value;
                constexpr int kPer = decltype(P)::value;
                auto *fn = last  ? bz_fused_persist<kA, kPer, true>
                           : pre ? bz_fused_persist<kA, kPer, false, true>
                                 : bz_fused_persist<kA, kPer>;
                const int which = (last  ? 8
                                   : pre ? 16
                                         : 0) +
                                  (kA ? 4 : 0) +
                                  (kPer == 8    ? 1
                                   : kPer == 16 ? 2
                                   : kPer == 32 ? 3
                                                : 0);
                int room = 0;
                GROVE_TRY(persist_room(ctx, cache ? &g_room[ctx->device][which] : nullptr,
                                       (const void *)fn, &room));
                if (mode == FLAT_PERSIST_ONE || mode == FLAT_PERSIST_EARLY_ONE) room = 1;
                const unsigned g = (unsigned)(ntiles < (u64)room ? ntiles : (u64)room);
                /* ahead: a fifth of the full grid (132 tiles, 3-4 us of claims, on the H200's
                 * 660 blocks; 32 tiles 0.547-0.548 ms, 256 0.564, 512 0.621: further ahead, the
                 * vertices streaming through L2 evict the curves before they are staged) */
                const int ahead = early || last ? 0 : room / kAheadDiv;
                fn<<<g, kT, 0, S.s>>>(d_cp, d_deg, n, r, d_off, d_xy, cap, counter, ts, S.st, early,
                                      hs_map, ahead);
                return GROVE_OK;
            });
        }
        GROVE_TRY(st);
        GROVE_CUDA_LAUNCHED(ctx, "bezier: launching the tessellation kernel");
        if (timed) GROVE_CUDA_TRY(ctx, cudaEventRecord(g_kev[1], S.s), "bezier: the bench's event");
    }
    if (mapped) {
        /* the kernel wrote the state words into the page-locked scratch: nothing is copied */
        GROVE_TRY(wait_tag(ctx, S.s, S.tag, "bezier: counting and writing the vertices"));
        memcpy(hs, ctx->pinned, S_COUNT * sizeof(u64));
        clean = 1;
        return GROVE_OK;
    }
    /* through the context's page-locked scratch: a copy into pageable memory costs a staging
     * round trip of its own */
    return grove__cuda_fetch(ctx, hs, S.st, S_COUNT * sizeof(u64), S.s,
                             "bezier: counting and writing the vertices");
}

/* How the cdp variant groups its child launches for one call. */
struct CdpPlan {
    u64 group;    /* curves per group child */
    uint32_t big; /* curves of >= big vertices get a child of their own; ~0u: none can */
};

CdpPlan cdp_plan(const grove_bezier_opts *o)
{
    CdpPlan p;
    p.group = g_group ? g_group : kGroupDefault;
    p.big = g_big ? g_big : kBigDefault;
    if ((uint32_t)o->max_points < p.big) p.big = 0xffffffffu;
    return p;
}

/* The most child launches a parent grid over cnt curves can make. */
u64 cdp_launches(const CdpPlan &p, u64 cnt)
{
    return (cnt + p.group - 1) / p.group + (p.big != 0xffffffffu ? cnt : 0);
}

/* The most curves a parent grid may take under a limit of lim pending launches. */
u64 cdp_curves(const CdpPlan &p, u64 lim)
{
    if (p.big == 0xffffffffu) return lim * p.group;
    u64 c = lim * p.group / (p.group + 1);
    while (c > 0 && cdp_launches(p, c) > lim) c--;
    return c;
}

/* The pending-launch limit for the cdp writer: raised (never lowered) to want launches,
 * halved on refusal down to the floor min(want, kChunkFloor); *lim = 0 when not even the floor
 * could be had. The test cap acts as a device that holds no more. */
grove_status cdp_pending(grove_ctx *ctx, size_t want, size_t *lim, char *why, size_t why_len)
{
    const size_t floor_ = want < kChunkFloor ? want : kChunkFloor;
    size_t cur = 0, cur_eff;
    *lim = 0;
    GROVE_CUDA_TRY(ctx, cudaDeviceGetLimit(&cur, cudaLimitDevRuntimePendingLaunchCount),
                   "bezier (cdp): reading the device runtime's pending-launch limit");
    cur_eff = g_device_cap && cur > g_device_cap ? g_device_cap : cur;
    if (cur_eff >= want) {
        *lim = want;
        return GROVE_OK;
    }
    for (size_t ask = want;; ask = ask / 2 > floor_ ? ask / 2 : floor_) {
        if (g_device_cap && ask > g_device_cap) {
            snprintf(why, why_len, "refused above %zu by the test hook", g_device_cap);
        } else if (cur >= ask) {
            *lim = ask;
            return GROVE_OK;
        } else {
            cudaError_t e = cudaDeviceSetLimit(cudaLimitDevRuntimePendingLaunchCount, ask);
            if (e == cudaSuccess) {
                *lim = ask;
                return GROVE_OK;
            }
            cudaGetLastError(); /* a refused limit must not stay as the last error */
            snprintf(why, why_len, "%s", cudaGetErrorString(e));
        }
        if (ask <= floor_) break;
    }
    if (cur_eff >= floor_) *lim = cur_eff;
    return GROVE_OK;
}

/* Parent grids over chunks of `chunk` curves; *groups = the group children they launch. */
grove_status write_cdp(Scratch &S, const float *d_cp, const uint8_t *d_deg, size_t n,
                       const grove_bezier_opts *o, const CdpPlan &p, const u64 *d_off, float *d_xy,
                       size_t chunk, u64 *groups)
{
    grove_ctx *ctx = S.ctx;
    const int mode = g_cdp_mode ? g_cdp_mode : kCdpDefault;
    *groups = 0;
    for (size_t c = 0; c < n; c += chunk) {
        const size_t cnt = n - c < chunk ? n - c : chunk;
        /* Launches on one stream run in order and a parent grid completes only after its
         * children, so at most one chunk's child launches are ever pending. */
        cudaError_t e =
            grove__bz_cdp_launch(d_cp, d_deg, reinterpret_cast<const uint64_t *>(d_off), c, cnt,
                                 p.group, p.big, g_per == 8, mode, d_xy, S.st, g_cdp_rec, S.s);
        if (e != cudaSuccess)
            return grove__cuda_status(ctx, (int)e, "bezier (cdp): launching the parent kernel");
        *groups += (cnt + p.group - 1) / p.group;
    }
    return GROVE_OK;
}

/* The cdp writer after the single pass counted (hs: its state words), stats filled. */
grove_status write_cdp_all(Scratch &S, const float *d_cp, const uint8_t *d_deg, size_t n,
                           const grove_bezier_opts *o, const u64 *d_off, float *d_xy, u64 *hs,
                           grove_bezier_stats *stats)
{
    grove_ctx *ctx = S.ctx;
    const char *what = "bezier (cdp): writing the vertices";
    const CdpPlan p = cdp_plan(o);
    const u64 capped = hs[S_CAPPED];
    u64 groups = 0;
    hs[S_LAUNCHES] = hs[S_BIG] = hs[S_FAILED] = 0;
    /* the parent grids count their launches in the state words, which no kernel clears after
     * them: the next pass clears the header first */
    ctx->kept_clean[GROVE__KEPT_BEZIER] = 0;
    if (n > 0) {
        const cudaError_t pe = grove__bz_cdp_prepare();
        if (pe != cudaSuccess)
            return grove__cuda_status(ctx, (int)pe,
                                      "bezier (cdp): setting the child kernels' shared memory");
        size_t lim = 0;
        char why[160] = "";
        const u64 need = cdp_launches(p, n);
        const size_t cmax = g_chunk_max ? g_chunk_max : kChunkDefault;
        const size_t want = need < cmax ? (size_t)need : cmax;
        const size_t floor_ = want < kChunkFloor ? want : kChunkFloor;
        GROVE_TRY(cdp_pending(ctx, want, &lim, why, sizeof why));
        if (lim == 0 || cdp_curves(p, lim) == 0)
            return grove__error(
                ctx, GROVE_ERR_LIMIT,
                "bezier (cdp): the device runtime's pending-launch limit could not be raised to "
                "%zu launches (%s); the cdp variant needs room for min(its child launches, %zu) "
                "at once; use the flat variant",
                floor_, why, kChunkFloor);
        /* The H100 refused launches of a parent grid of 10^6 child launches under a limit of
         * 10^6 (about 40% failed with cudaErrorLaunchPendingCountExceeded): the pool holds fewer
         * launches than the limit asked for. The writer is idempotent, so such a run is repeated
         * with half the launches, down to the floor. */
        for (;;) {
            const u64 cc = cdp_curves(p, lim);
            const size_t chunk = cc < (u64)n ? (size_t)cc : n;
            GROVE_CUDA_TRY(ctx,
                           cudaMemsetAsync(S.st + S_FAILED, 0, (S_BIG - S_FAILED + 1) * 8, S.s),
                           "bezier (cdp): clearing the launch counters");
            GROVE_TRY(write_cdp(S, d_cp, d_deg, n, o, p, d_off, d_xy, chunk, &groups));
            GROVE_TRY(grove__cuda_fetch(ctx, hs, S.st, S_COUNT * sizeof(u64), S.s, what));
            if (!hs[S_FAILED] || hs[S_ERR] != (u64)cudaErrorLaunchPendingCountExceeded ||
                lim / 2 < floor_ || cdp_curves(p, lim / 2) == 0)
                break;
            lim /= 2;
        }
    }
    if (hs[S_FAILED])
        return grove__error(ctx, GROVE_ERR_CUDA,
                            "bezier (cdp): %llu of %llu child launches failed on the device "
                            "(first error: %s)",
                            hs[S_FAILED], hs[S_FAILED] + hs[S_LAUNCHES],
                            cudaGetErrorString((cudaError_t)hs[S_ERR]));
    if (hs[S_LAUNCHES] != groups + hs[S_BIG])
        return grove__error(ctx, GROVE_ERR_INTERNAL,
                            "bezier (cdp): %llu child launches for %llu groups and %llu long "
                            "curves; this is a bug",
                            hs[S_LAUNCHES], groups, hs[S_BIG]);
    if (stats) {
        stats->variant = GROVE_BEZIER_CDP;
        stats->child_launches = hs[S_LAUNCHES];
        stats->capped = capped;
    }
    return GROVE_OK;
}

void flat_stats(const u64 *hs, grove_bezier_stats *stats)
{
    if (!stats) return;
    stats->variant = GROVE_BEZIER_FLAT;
    stats->child_launches = 0;
    stats->capped = hs[S_CAPPED];
}

struct DevBuf {
    grove_ctx *ctx;
    cudaStream_t s;
    void *p;
    size_t bytes;
    ~DevBuf()
    {
        if (p) grove__cuda_free(ctx, p, bytes, s);
    }
    grove_status alloc(size_t b, const char *what)
    {
        bytes = b;
        return grove__cuda_alloc(ctx, &p, b, s, what);
    }
};

} // namespace

extern "C" void grove__bz_cdp_tune(size_t chunk_max, size_t device_cap, size_t group, unsigned big)
{
    g_chunk_max = chunk_max;
    g_device_cap = device_cap;
    g_group = group;
    g_big = big;
}

extern "C" void grove__bz_flat_tune(int per)
{
    g_per = per == 8 || per == 16 || per == 32 ? per : 0;
}

extern "C" void grove__bz_flat_mode(int mode) { g_flat_mode = mode; }

extern "C" void grove__bz_flat_wait(int sync) { g_wait_sync = sync; }

extern "C" unsigned long long grove__bz_flat_polls(void)
{
    return g_polled_waits.load(std::memory_order_relaxed);
}

extern "C" void grove__bz_flat_events(void *e0, void *e1)
{
    g_kev[0] = static_cast<cudaEvent_t>(e0);
    g_kev[1] = static_cast<cudaEvent_t>(e1);
}

/* test hooks: the largest epoch a pass may have, and setting the number of the last pass in
 * ctx's kept scratch (the next takes e + 1), so that a test can cross the epochs' wrap (only
 * forward: an epoch used again would let a pass take an earlier one's tile states) */
extern "C" uint32_t grove__bz_kept_epoch_max(void) { return kMaxEpoch - 1; }
extern "C" void grove__bz_kept_epoch_set(grove_ctx *ctx, uint32_t e)
{
    ctx->kept_epoch[GROVE__KEPT_BEZIER] = e;
}

extern "C" void grove__bz_cdp_mode(int mode) { g_cdp_mode = mode; }

extern "C" void grove__bz_cdp_probe(unsigned long long *rec) { g_cdp_rec = rec; }

extern "C" void grove__bz_cdp_plan(size_t *group, unsigned *big)
{
    *group = g_group ? g_group : kGroupDefault;
    *big = g_big ? g_big : kBigDefault;
}

extern "C" grove_status grove__bz_count_device_cuda(grove_ctx *ctx, const float *d_cp,
                                                    const uint8_t *d_degree, size_t n,
                                                    const grove_bezier_opts *o, uint64_t *d_offsets,
                                                    uint64_t *total)
{
    Scratch S = {ctx, (cudaStream_t)ctx->stream, NULL, NULL, NULL, 0};
    u64 hs[S_COUNT];
    GROVE_TRY(grove__cuda_use(ctx));
    GROVE_TRY(fused(S, d_cp, d_degree, n, o, (u64 *)d_offsets, NULL, 0, hs));
    *total = hs[S_TOTAL];
    return GROVE_OK;
}

extern "C" grove_status grove__bz_tessellate_device_cuda(grove_ctx *ctx, const float *d_cp,
                                                         const uint8_t *d_degree, size_t n,
                                                         const grove_bezier_opts *o,
                                                         uint64_t *d_offsets, float *d_xy,
                                                         uint64_t capacity, uint64_t *total,
                                                         grove_bezier_stats *stats)
{
    Scratch S = {ctx, (cudaStream_t)ctx->stream, NULL, NULL, NULL, 0};
    const bool cdp = o->variant == GROVE_BEZIER_CDP;
    u64 hs[S_COUNT];
    GROVE_TRY(grove__cuda_use(ctx));
    /* flat writes while it counts (the vertices below capacity); cdp counts first */
    GROVE_TRY(fused(S, d_cp, d_degree, n, o, (u64 *)d_offsets, d_xy, cdp ? 0 : capacity, hs));
    *total = hs[S_TOTAL];
    if (*total > capacity)
        return grove__error(ctx, GROVE_ERR_LIMIT,
                            "grove_bezier_tessellate_device: the curves need %llu vertices; "
                            "d_xy holds %llu",
                            (unsigned long long)*total, (unsigned long long)capacity);
    if (cdp) return write_cdp_all(S, d_cp, d_degree, n, o, (const u64 *)d_offsets, d_xy, hs, stats);
    flat_stats(hs, stats);
    return GROVE_OK;
}

extern "C" grove_status grove__bz_tessellate_cuda(grove_ctx *ctx, const grove_curves *in,
                                                  const grove_bezier_opts *o, grove_polylines *out,
                                                  grove_bezier_stats *stats)
{
    const size_t n = in->n;
    cudaStream_t s = (cudaStream_t)ctx->stream;
    Scratch S = {ctx, s, NULL, NULL, NULL, 0};
    DevBuf cp = {ctx, s, NULL, 0}, deg = {ctx, s, NULL, 0}, off = {ctx, s, NULL, 0},
           xy = {ctx, s, NULL, 0};
    u64 hs[S_COUNT];
    uint64_t total = 0;
    GROVE_TRY(grove__cuda_use(ctx));
    out->n_curves = n;
    out->offsets = (uint64_t *)malloc((n + 1) * sizeof(uint64_t));
    if (!out->offsets)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "grove_bezier_tessellate: out of memory for %zu offsets", n + 1);
    GROVE_TRY(off.alloc((n + 1) * sizeof(u64), "the Bezier offsets"));
    if (n > 0) {
        GROVE_TRY(cp.alloc(n * 8 * sizeof(float), "the Bezier control points"));
        GROVE_TRY(deg.alloc(n, "the Bezier degrees"));
        GROVE_TRY(grove__cuda_h2d(ctx, cp.p, in->cp, n * 8 * sizeof(float), s));
        GROVE_TRY(grove__cuda_h2d(ctx, deg.p, in->degree, n, s));
    }
    /* counted first to size the output, then counted again while writing (flat) */
    GROVE_TRY(
        fused(S, (const float *)cp.p, (const uint8_t *)deg.p, n, o, (u64 *)off.p, NULL, 0, hs));
    total = hs[S_TOTAL];
    if (total > 0) {
        GROVE_TRY(xy.alloc((size_t)total * 2 * sizeof(float), "the Bezier vertices"));
        out->xy = (float *)malloc((size_t)total * 2 * sizeof(float));
        if (!out->xy)
            return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                "grove_bezier_tessellate: out of memory for %llu vertices",
                                (unsigned long long)total);
    }
    out->n_vertices = total;
    if (o->variant == GROVE_BEZIER_CDP) {
        GROVE_TRY(write_cdp_all(S, (const float *)cp.p, (const uint8_t *)deg.p, n, o,
                                (const u64 *)off.p, (float *)xy.p, hs, stats));
    } else {
        GROVE_TRY(fused(S, (const float *)cp.p, (const uint8_t *)deg.p, n, o, (u64 *)off.p,
                        (float *)xy.p, total, hs));
        if (hs[S_TOTAL] != total)
            return grove__error(ctx, GROVE_ERR_INTERNAL,
                                "bezier: %llu vertices counted, then %llu; this is a bug",
                                (unsigned long long)total, hs[S_TOTAL]);
        flat_stats(hs, stats);
    }
    if (total > 0) grove__prefault(out->xy, (size_t)total * 2 * sizeof(float), grove__threads(ctx));
    GROVE_TRY(grove__cuda_d2h(ctx, out->offsets, off.p, (n + 1) * sizeof(u64), s));
    GROVE_TRY(grove__cuda_d2h(ctx, out->xy, xy.p, (size_t)total * 2 * sizeof(float), s));
    return grove__cuda_sync(ctx, s, "grove_bezier_tessellate: downloading the vertices");
}
