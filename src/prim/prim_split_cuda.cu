/*
 * prim_split_cuda.cu - stable split and segmented split on the GPU.
 *
 * Both run in two passes. Pass 1 reads the flag bytes (and head bytes) once, 16 per thread, and
 * packs them into one byte per group of four elements (flags in the low nibble, heads in the
 * high one), so that pass 2 reads a quarter of a byte per element instead of one or two. For a
 * segmented split that saves 1.5 bytes per element of the 10 the operation must move.
 *
 * split: pass 1 also counts the flags (the flagged run's length, where the unflagged run starts).
 * Pass 2 is a single-pass look-back scan of the per-tile flag counts; each tile stages its
 * elements in shared memory in their final order (flagged run, unflagged run) and writes two
 * contiguous runs.
 *
 * segsplit: an unflagged element's position needs the flag count of its whole segment, which may
 * reach into later tiles, and a flagged element's needs the count before it, which may start in
 * earlier tiles. Pass 1 runs forward with a look-back carrying (start of the open segment, flags
 * since it started) as one 64-bit sum (start << 32 | count: a tile with a head publishes its last
 * head and the flags after it at once) and stores each tile's incoming value. Pass 2 takes tiles
 * from the end with a look-back carrying "flags from a tile's start to the end of the segment open
 * there", so each tile learns how many flags of its last segment lie beyond it. Inside a tile one
 * block scan of packed (last head + 1) << PB | flags-since-head values gives every element its
 * segment start and rank; segments wholly inside the tile land inside the tile's own range, so
 * the staged tile again leaves in a few contiguous runs.
 *
 * Every look-back kernel here is a persistent loop like the scan's (prim_scan_cuda.cu): an
 * iteration does the local part of one tile (reduce, publish its aggregate at once) and the
 * look-back-dependent part of the tile before it, with the payloads prefetched by cp.async.
 */
#include <cuda_runtime.h>

#include <stdint.h>

#include "core_cuda.h"
#include "lookback_cuda.cuh"
#include "prim_cuda.h"

namespace
{

using namespace grove_lb;

constexpr int SB = 256; /* threads per block of every split kernel */

/* Rounds per pass-2 tile for 4-byte payloads (8-byte payloads use half, at least 4) and blocks
 * per SM the register allocation must allow; tuning only (bench/NOTES-scan.md). segsplit's pass
 * 2 does more work per element and gains from smaller tiles and a third block per SM. */
#ifndef GROVE_SPLIT_K
#define GROVE_SPLIT_K 8
#endif
#ifndef GROVE_SPLIT_MINB
#define GROVE_SPLIT_MINB 2
#endif
#ifndef GROVE_SEGSPLIT_K
#define GROVE_SEGSPLIT_K 4
#endif
#ifndef GROVE_SEGSPLIT_MINB
#define GROVE_SEGSPLIT_MINB 3
#endif

/* Pass-2 tile: SB threads x K rounds x one group of four elements; SL 16-byte slots per thread
 * hold its payloads, and the SL x SB slots of a buffer hold exactly one tile of payloads. Pass 2
 * needs a tile's payloads only when it finishes the tile, an iteration after reducing its flags,
 * so two prefetch buffers do (the finishing tile's and the one being prefetched); a third one is
 * the staging area. With a staging area of its own, a thread can stage its payloads as soon as it
 * has them, without a barrier ordering every thread's reads of its prefetch slots before the
 * staging writes, and staging can overlap warp 0's look-back. */
template <typename P, bool SEGSPLIT = false> struct Cfg {
    static constexpr int K4 = SEGSPLIT ? GROVE_SEGSPLIT_K : GROVE_SPLIT_K;
    static constexpr int K = sizeof(P) == 4 ? K4 : (K4 / 2 < 4 ? 4 : K4 / 2);
    static constexpr int TILE = SB * K * 4;
    static constexpr int SL = K * (int)sizeof(P) / 4;
    static constexpr size_t SMEM = (size_t)3 * SL * SB * sizeof(uint4); /* [3][SL][SB] */
};

/* segsplit packs (head position + 1) << PB | count in 32 bits; both fields must hold TILE. */
constexpr int pack_bits(int tile) { return tile > 8192 ? 16 : tile > 4096 ? 14 : 13; }

/* Segmented sum on packed values: a right operand with a head replaces the left one. */
template <int PB> struct SegSum {
    static __device__ __forceinline__ uint32_t ident() { return 0u; }
    static __device__ __forceinline__ uint32_t apply(uint32_t a, uint32_t b)
    {
        return (b >> PB) ? b : a + b;
    }
};

inline bool aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* Queues the payloads of this thread's groups of a tile at pb into buffer `buf`. */
template <typename P, int K, int SL>
__device__ __forceinline__ void prefetch_payload(uint4 *pre, int buf, const P *in, size_t pb)
{
    constexpr int H = SL / K; /* slots per group: 1 (4-byte) or 2 (8-byte payloads) */
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const size_t p = pb + ((size_t)k * SB + threadIdx.x) * 4;
#pragma unroll
        for (int h = 0; h < H; ++h)
            cp_async16(&pre[(buf * SL + k * H + h) * SB + threadIdx.x],
                       in + p + h * (16 / sizeof(P)));
    }
}

/* This thread's K groups of four payloads of the tile at base: from its prefetch slots when the
 * tile was prefetched, else straight from memory (partial tile, unaligned input). */
template <typename P, int K, int SL>
__device__ __forceinline__ void load_payload(P (&x)[K][4], const uint4 *pre, int buf, bool fast,
                                             const P *in, size_t base, size_t n)
{
    constexpr int H = SL / K;
    if (fast) {
#pragma unroll
        for (int k = 0; k < K; ++k) {
#pragma unroll
            for (int h = 0; h < H; ++h) {
                union {
                    uint4 u;
                    P t[16 / sizeof(P)];
                } v;
                v.u = pre[(buf * SL + k * H + h) * SB + threadIdx.x];
#pragma unroll
                for (int j = 0; j < (int)(16 / sizeof(P)); ++j)
                    x[k][h * (16 / sizeof(P)) + j] = v.t[j];
            }
        }
    } else {
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const size_t p = base + ((size_t)k * SB + threadIdx.x) * 4;
#pragma unroll
            for (int j = 0; j < 4; ++j) x[k][j] = p + j < n ? in[p + j] : P(0);
        }
    }
}

template <int K>
__device__ __forceinline__ void load_bits(uint32_t (&nx)[K], const uint8_t *bits, size_t pb,
                                          size_t n)
{
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const size_t g = pb / 4 + (size_t)k * SB + threadIdx.x;
        nx[k] = g * 4 < n ? bits[g] : 0u;
    }
}

template <int K>
__device__ __forceinline__ void store_dest(uint32_t *dest, const uint32_t (&d)[4], size_t p,
                                           bool vec, size_t n)
{
    if (vec)
        *(uint4 *)(dest + p) = make_uint4(d[0], d[1], d[2], d[3]);
    else
        for (int j = 0; j < 4; ++j)
            if (p + j < n) dest[p + j] = d[j];
}

/* ---- split pass 1: count and pack the flags ------------------------------------------------ */

constexpr int CNT_U = 4; /* 16-element chunks per thread per iteration, loaded before use */

__global__ void __launch_bounds__(SB)
    split_count_kernel(const uint8_t *flags, uint32_t *bits, size_t n, uint32_t *total, int vec_ok)
{
    __shared__ uint32_t s_cnt[SB / 32];
    const size_t nchunks = (n + 15) / 16;
    const size_t stride = (size_t)gridDim.x * SB;
    uint32_t cnt = 0;
    for (size_t c0 = (size_t)blockIdx.x * SB * CNT_U + threadIdx.x; c0 < nchunks;
         c0 += stride * CNT_U) {
        uint4 u[CNT_U];
#pragma unroll
        for (int r = 0; r < CNT_U; ++r) {
            const size_t c = c0 + (size_t)r * SB;
            if (vec_ok && c * 16 + 16 <= n) u[r] = *(const uint4 *)(flags + c * 16);
        }
#pragma unroll
        for (int r = 0; r < CNT_U; ++r) {
            const size_t c = c0 + (size_t)r * SB;
            if (c >= nchunks) break;
            uint32_t w;
            if (vec_ok && c * 16 + 16 <= n) {
                w = nz_bits4(u[r].x) | nz_bits4(u[r].y) << 8 | nz_bits4(u[r].z) << 16 |
                    nz_bits4(u[r].w) << 24;
            } else {
                w = 0;
                for (int j = 0; j < 16; ++j) {
                    const size_t i = c * 16 + j;
                    if (i < n && flags[i]) w |= 1u << ((j >> 2) * 8 + (j & 3));
                }
            }
            cnt += __popc(w);
            bits[c] = w;
        }
    }
    cnt = warp_reduce<Sum<uint32_t>>(cnt);
    if ((threadIdx.x & 31) == 0) s_cnt[threadIdx.x >> 5] = cnt;
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t t = 0;
        for (int w = 0; w < SB / 32; ++w) t += s_cnt[w];
        if (t) atomicAdd(total, t);
    }
}

/* ---- split pass 2: look-back over flag counts, staged scatter ------------------------------
 * Iteration it reduces the flag counts of tile B (publishing its aggregate at once) and queues
 * B's payloads; then warp 0 looks back for tile A (reduced one iteration earlier) while every
 * thread stages A's elements in their tile-local order (which needs no look-back), and after one
 * barrier the block writes A's two runs. Two barriers per tile. */

template <typename P>
__global__ void __launch_bounds__(SB, GROVE_SPLIT_MINB)
    split_scatter_kernel(const P *in, const uint8_t *bits, P *out, uint32_t *dest,
                         unsigned long long *num_flagged, size_t n, int ntiles,
                         TileState<uint32_t> st, uint32_t *counter, const uint32_t *total,
                         int vec_in, int vec_dest)
{
    constexpr int K = Cfg<P>::K, TILE = Cfg<P>::TILE, SL = Cfg<P>::SL;
    using PS = Pipe<uint32_t, Sum<uint32_t>, false, false, SB, K>;
    extern __shared__ uint4 pre[]; /* [2][SL][SB] prefetch, then [SL][SB] staging */
    __shared__ typename PS::TileSm ts[2];
    __shared__ int s_ids[4];
    __shared__ uint32_t s_gf[2];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const uint32_t F = *total;
    P *stage = (P *)(pre + (size_t)2 * SL * SB);
    auto fast_of = [&](int id) { return vec_in && (size_t)id * TILE + TILE <= n; };

    ids_start(counter, s_ids);
    int idB = s_ids[0], idA = ntiles;
    uint32_t nibB[K], nibA[K], exA[K];
    unsigned exfA = 0;
    if (idB < ntiles) load_bits<K>(nibB, bits, (size_t)idB * TILE, n);
#pragma unroll
    for (int k = 0; k < K; ++k) nibA[k] = 0, exA[k] = 0;

    for (int it = 0; idA < ntiles || idB < ntiles; ++it) {
        const int sB = it & 1, sA = sB ^ 1;
        ids_reserve(counter, s_ids, it);
        uint32_t exB[K];
        unsigned exfB = 0;
#pragma unroll
        for (int k = 0; k < K; ++k) exB[k] = 0;
        if (idB < ntiles) {
            uint32_t cnt[K];
            bool f[K];
#pragma unroll
            for (int k = 0; k < K; ++k) cnt[k] = __popc(nibB[k] & 0xFu), f[k] = false;
            PS::reduce(ts[sB], cnt, f, exB, exfB);
        }
        __syncthreads();
        const int idC = idB < ntiles ? ids_next(s_ids, it) : ntiles;
        uint32_t nibC[K];
#pragma unroll
        for (int k = 0; k < K; ++k) nibC[k] = 0;
        if (idC < ntiles) load_bits<K>(nibC, bits, (size_t)idC * TILE, n);
        if (idB < ntiles && fast_of(idB))
            prefetch_payload<P, K, SL>(pre, sB, in, (size_t)idB * TILE);
        cp_async_commit();
        if (warp == 0) {
            if (idB < ntiles) {
                bool any;
                const uint32_t agg = PS::local(ts[sB], any);
                if (lane == 0) st.publish(idB, idB == 0 ? ST_INCL : ST_AGG, agg);
            }
            if (idA < ntiles) {
                uint32_t gf = 0;
                if (idA > 0) {
                    gf = lookback<Sum<uint32_t>, uint32_t>(st, idA);
                    if (lane == 0) st.publish(idA, ST_INCL, gf + ts[sA].agg);
                }
                if (lane == 0) s_gf[sA] = gf;
            }
        }
        uint32_t c[K], tf = 0;
        const size_t base = (size_t)idA * TILE;
        if (idA < ntiles) {
            /* Stage A: flagged run first, then the unflagged one, both tile-local. */
            tf = ts[sA].agg;
            PS::carry(ts[sA], exA, exfA, c); /* flags before each group, tile-local */
            P x[K][4];
            cp_async_wait<1>(); /* A's payloads; B's may still be in flight */
            load_payload<P, K, SL>(x, pre, sA, fast_of(idA), in, base, n);
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const uint32_t l0 = (uint32_t)(k * SB + tid) * 4;
                uint32_t r = c[k];
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const uint32_t fl = (nibA[k] >> j) & 1u, l = l0 + j;
                    if (base + l < n) stage[fl ? r : tf + (l - r)] = x[k][j];
                    r += fl;
                }
            }
        }
        __syncthreads();
        if (idA < ntiles) {
            const bool full = base + TILE <= n;
            const uint32_t gf = s_gf[sA];
            const uint32_t ubase = F + (uint32_t)base - gf; /* where A's unflagged run starts */
            /* Two runs: output index = q + (q < tf ? gf : ubase - tf). */
            const uint32_t valid = full ? (uint32_t)TILE : (uint32_t)(n - base);
            const uint32_t d1 = gf, d2 = ubase - tf;
#pragma unroll 4
            for (uint32_t q = tid; q < valid; q += SB) out[q + (q < tf ? d1 : d2)] = stage[q];
            if (dest) {
#pragma unroll
                for (int k = 0; k < K; ++k) {
                    const uint32_t l0 = (uint32_t)(k * SB + tid) * 4;
                    uint32_t r = c[k], d[4];
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        const uint32_t fl = (nibA[k] >> j) & 1u;
                        d[j] = fl ? gf + r : ubase + (l0 + j - r);
                        r += fl;
                    }
                    store_dest<K>(dest, d, base + l0, vec_dest && full, n);
                }
            }
            if (num_flagged && idA == 0 && tid == 0) *num_flagged = F;
        }
        idA = idB;
        idB = idC;
        exfA = exfB;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            exA[k] = exB[k];
            nibA[k] = nibB[k];
            nibB[k] = nibC[k];
        }
    }
    cp_async_wait_all();
}

/* ---- segsplit pass 1: pack flags and heads, forward look-back of the open segment ---------- */

template <int TILE, int PB>
__global__ void __launch_bounds__(SB)
    segsplit_pass1(const uint8_t *flags, const uint8_t *heads, uint32_t *bits,
                   unsigned long long *fwd, size_t n, int ntiles, TileState<unsigned long long> st,
                   uint32_t *counter, int vec_ok)
{
    constexpr int K1 = TILE / (SB * 16);
    static_assert(K1 * SB * 16 == TILE, "pass-1 tile");
    using Op = SegSum<PB>;
    using PS = Pipe<uint32_t, Op, false, false, SB, K1>;
    extern __shared__ uint4 pre[]; /* [2][2 * K1][SB]: flags rounds, then heads rounds */
    __shared__ typename PS::TileSm ts[2];
    __shared__ int s_ids[4], s_head0[2];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    auto fast_of = [&](int id) { return vec_ok && (size_t)id * TILE + TILE <= n; };
    auto prefetch = [&](int pid, int buf) {
        if (pid < ntiles && fast_of(pid)) {
            const size_t pb = (size_t)pid * TILE;
#pragma unroll
            for (int k = 0; k < K1; ++k) {
                const size_t p = pb + ((size_t)k * SB + tid) * 16;
                cp_async16(&pre[(buf * 2 * K1 + k) * SB + tid], flags + p);
                cp_async16(&pre[(buf * 2 * K1 + K1 + k) * SB + tid], heads + p);
            }
        }
        cp_async_commit();
    };

    ids_start(counter, s_ids);
    int idB = s_ids[0], idA = ntiles;
    prefetch(idB, 0);
    /* Iteration it reduces tile B (publishing at once) and looks back for tile A. */
    for (int it = 0; idA < ntiles || idB < ntiles; ++it) {
        const int sB = it & 1, sA = sB ^ 1;
        ids_reserve(counter, s_ids, it);
        if (idB < ntiles) {
            const size_t base = (size_t)idB * TILE;
            const bool fast = fast_of(idB);
            if (fast) cp_async_wait_all();
            uint32_t a[K1], ex[K1];
            bool f[K1];
            unsigned exf;
#pragma unroll
            for (int k = 0; k < K1; ++k) {
                const uint32_t lc = ((uint32_t)k * SB + tid) * 16; /* chunk start in the tile */
                const size_t p = base + lc;
                uint32_t fb, hb; /* bit j: element p + j */
                if (fast) {
                    const uint4 fu = pre[(sB * 2 * K1 + k) * SB + tid];
                    const uint4 hu = pre[(sB * 2 * K1 + K1 + k) * SB + tid];
                    fb = nz_bits4(fu.x) | nz_bits4(fu.y) << 4 | nz_bits4(fu.z) << 8 |
                         nz_bits4(fu.w) << 12;
                    hb = nz_bits4(hu.x) | nz_bits4(hu.y) << 4 | nz_bits4(hu.z) << 8 |
                         nz_bits4(hu.w) << 12;
                } else {
                    fb = hb = 0;
                    for (int j = 0; j < 16; ++j) {
                        if (p + j < n) {
                            fb |= (uint32_t)(flags[p + j] != 0) << j;
                            hb |= (uint32_t)(heads[p + j] != 0) << j;
                        }
                    }
                }
                if (p == 0) hb |= 1u; /* element 0 always starts a segment */
                if (p < n) {
                    uint32_t w = 0;
#pragma unroll
                    for (int g = 0; g < 4; ++g)
                        w |= (((fb >> (4 * g)) & 0xFu) | (((hb >> (4 * g)) & 0xFu) << 4))
                             << (8 * g);
                    bits[p / 16] = w;
                }
                if (hb) {
                    const int last = 31 - __clz(hb);
                    a[k] = ((lc + last + 1) << PB) | __popc(fb >> last);
                } else {
                    a[k] = __popc(fb);
                }
                f[k] = false;
                if (k == 0 && tid == 0) s_head0[sB] = hb & 1u;
            }
            PS::reduce(ts[sB], a, f, ex, exf);
        }
        __syncthreads();
        const int idC = idB < ntiles ? ids_next(s_ids, it) : ntiles;
        prefetch(idC, sA); /* A's buffer was last read when A was reduced */
        if (warp == 0) {
            if (idB < ntiles) {
                bool any;
                const uint32_t agg = PS::local(ts[sB], any);
                const uint32_t hs = agg >> PB, cnt = agg & ((1u << PB) - 1u);
                const unsigned long long v =
                    hs ? ((unsigned long long)((size_t)idB * TILE + hs - 1) << 32) | cnt
                       : (unsigned long long)cnt;
                if (lane == 0) st.publish(idB, (hs || idB == 0) ? ST_INCL : ST_AGG, v);
            }
            if (idA < ntiles) {
                const uint32_t agg = ts[sA].agg, hs = agg >> PB, cnt = agg & ((1u << PB) - 1u);
                unsigned long long pv = 0;
                if (idA > 0 && !(hs && s_head0[sA]))
                    pv = lookback<Sum<unsigned long long>, unsigned long long>(st, idA);
                if (idA > 0 && !hs && lane == 0) st.publish(idA, ST_INCL, pv + cnt);
                if (lane == 0) fwd[idA] = pv;
            }
        }
        idA = idB;
        idB = idC;
    }
    cp_async_wait_all();
}

/* ---- segsplit pass 2: reverse look-back of segment tails, block segmented rank, scatter ----
 * Iteration it ranks tile B inside itself (block scan, the flag count of every piece between
 * heads), publishes B's tail value and queues B's payloads; then warp 0 looks back for tile A
 * (ranked one iteration earlier) while every thread stages A's elements at their tile-local
 * positions (which need no look-back), and after one barrier the block writes A's runs. Four
 * barriers per tile. */

/* Tile-local staging position of element l of a pass-2 tile (bit j of nib: its flag, bit 4 + j:
 * its head); r is the packed rank of the element before it and is advanced to l's. */
template <int PB>
__device__ __forceinline__ uint32_t seg_pos(uint32_t nib, int j, uint32_t l, uint32_t &r,
                                            uint32_t open, const uint16_t *piece)
{
    const uint32_t fl = (nib >> j) & 1u;
    if ((nib >> (4 + j)) & 1u)
        r = ((l + 1) << PB) | fl;
    else
        r += fl;
    const uint32_t hsf = r >> PB, fb = (r & ((1u << PB) - 1u)) - fl; /* flags before l */
    if (hsf == 0) return fl ? fb : open + (l - fb); /* the segment open at the tile's start */
    const uint32_t hs = hsf - 1;
    return fl ? hs + fb : hs + piece[hs] + (l - hs - fb);
}

template <typename P>
__global__ void __launch_bounds__(SB, GROVE_SEGSPLIT_MINB)
    segsplit_pass2(const P *in, const uint8_t *bits, const unsigned long long *fwd, P *out,
                   uint32_t *dest, size_t n, int ntiles, TileState<uint32_t> st, uint32_t *counter,
                   int vec_in, int vec_out, int vec_dest)
{
    using C = Cfg<P, true>;
    constexpr int K = C::K, TILE = C::TILE, SL = C::SL, PB = pack_bits(TILE);
    constexpr uint32_t CM = (1u << PB) - 1u;
    using Op = SegSum<PB>;
    using PS = Pipe<uint32_t, Op, false, false, SB, K>;
    extern __shared__ uint4 pre[]; /* [2][SL][SB] prefetch, [SL][SB] staging, [2][TILE] u16 */
    __shared__ typename PS::TileSm ts[2];
    __shared__ int s_ids[4], s_head0[2];
    __shared__ uint32_t s_open[2], s_openv[2], s_first[2], s_r[2], s_rnext[2];
    __shared__ unsigned long long s_fwd[2];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    P *stage = (P *)(pre + (size_t)2 * SL * SB);
    auto base_of = [&](int id) { return (size_t)(ntiles - 1 - id) * TILE; };
    auto fast_of = [&](int id) { return vec_in && base_of(id) + TILE <= n; };

    ids_start(counter, s_ids);
    int idB = s_ids[0], idA = ntiles;
    uint32_t nibB[K], nibA[K], cA[K];
    if (idB < ntiles) load_bits<K>(nibB, bits, base_of(idB), n);
#pragma unroll
    for (int k = 0; k < K; ++k) nibA[k] = 0, cA[k] = 0;

    for (int it = 0; idA < ntiles || idB < ntiles; ++it) {
        const int sB = it & 1, sA = sB ^ 1;
        uint16_t *pieceB = (uint16_t *)(pre + 3 * SL * SB) + sB * TILE;
        uint16_t *pieceA = (uint16_t *)(pre + 3 * SL * SB) + sA * TILE;
        ids_reserve(counter, s_ids, it);
        uint32_t exB[K], cB[K];
        unsigned exfB = 0;
        if (idB < ntiles) {
            if (tid == 0) {
                s_fwd[sB] = fwd[ntiles - 1 - idB];
                s_head0[sB] = nibB[0] >> 4 & 1u;
                s_first[sB] = TILE; /* first head after position 0; TILE when there is none */
                s_open[sB] = 0;
            }
            /* Packed value of element l: (l + 1) << PB at a head, plus its flag. */
            uint32_t a[K];
            bool f[K];
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const uint32_t l0 = (uint32_t)(k * SB + tid) * 4;
                uint32_t acc = 0;
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const uint32_t v = (((nibB[k] >> (4 + j)) & 1u) ? (l0 + j + 1) << PB : 0u) |
                                       ((nibB[k] >> j) & 1u);
                    acc = Op::apply(acc, v);
                }
                a[k] = acc;
                f[k] = false;
            }
            PS::reduce(ts[sB], a, f, exB, exfB);
        }
        __syncthreads();
        const int idC = idB < ntiles ? ids_next(s_ids, it) : ntiles;
        uint32_t nibC[K];
#pragma unroll
        for (int k = 0; k < K; ++k) nibC[k] = 0;
        if (idC < ntiles) load_bits<K>(nibC, bits, base_of(idC), n);
        if (idB < ntiles && fast_of(idB)) prefetch_payload<P, K, SL>(pre, sB, in, base_of(idB));
        cp_async_commit();
        if (warp == 0 && idB < ntiles) {
            bool any;
            PS::local(ts[sB], any); /* tile-local prefixes; the block scan needs no tile prefix */
        }
        __syncthreads();
        if (idB < ntiles) {
            PS::carry(ts[sB], exB, exfB, cB);
            /* Each head closes the piece before it: record that piece's flag count. */
#pragma unroll
            for (int k = 0; k < K; ++k) {
                if (!(nibB[k] >> 4)) continue; /* no head in this group */
                const uint32_t l0 = (uint32_t)(k * SB + tid) * 4;
                uint32_t r = cB[k];
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const uint32_t l = l0 + j;
                    if ((nibB[k] >> (4 + j)) & 1u) {
                        if (l > 0) {
                            if (r >> PB) {
                                pieceB[(r >> PB) - 1] = (uint16_t)(r & CM);
                            } else {
                                s_open[sB] = r & CM;
                                s_first[sB] = l;
                            }
                        }
                        r = ((l + 1) << PB) | ((nibB[k] >> j) & 1u);
                    } else {
                        r += (nibB[k] >> j) & 1u;
                    }
                }
            }
        }
        __syncthreads();
        if (warp == 0) {
            if (idB < ntiles) {
                /* B's tail value: the flags from its start to the end of the segment open there
                 * (0 when B starts with a head); published at once when B holds a head. */
                const uint32_t agg = ts[sB].agg, hs = agg >> PB, cnt = agg & CM;
                const bool head0 = s_head0[sB], inner = hs > 1;
                /* flags before the first inner head */
                const uint32_t open = inner ? s_open[sB] : cnt;
                if (lane == 0) {
                    st.publish(idB, (idB == 0 || head0 || inner) ? ST_INCL : ST_AGG,
                               head0 ? 0u : open);
                    if (hs) pieceB[hs - 1] = (uint16_t)cnt;
                    s_openv[sB] = open;
                }
            }
            if (idA < ntiles) {
                const size_t base = base_of(idA);
                const uint32_t agg = ts[sA].agg, hs = agg >> PB;
                const bool head0 = s_head0[sA], inner = hs > 1;
                const uint32_t open = s_openv[sA];
                /* The next tile's first head decides whether A's last segment runs on. */
                const bool next_head = idA > 0 ? ((bits[(base + TILE) / 4] >> 4) & 1u) != 0 : true;
                const uint32_t rnext = next_head ? 0u : lookback<Sum<uint32_t>, uint32_t>(st, idA);
                if (lane == 0) {
                    if (!(idA == 0 || head0 || inner)) st.publish(idA, ST_INCL, open + rnext);
                    s_r[sA] = open + (inner ? 0u : rnext);
                    s_rnext[sA] = rnext;
                }
            }
        }
        /* A's tile-local facts, read before the barrier after which the next iteration may
         * overwrite them. */
        const size_t base = idA < ntiles ? base_of(idA) : 0;
        uint32_t open = 0, first = 0, hl = 0, s0 = 0, ob0 = 0;
        bool head0 = false;
        if (idA < ntiles) {
            open = s_openv[sA];
            first = s_first[sA];
            head0 = s_head0[sA];
            hl = (ts[sA].agg >> PB) - 1u; /* last head, or ~0 without one */
            s0 = (uint32_t)(s_fwd[sA] >> 32);
            ob0 = (uint32_t)s_fwd[sA];
            P x[K][4];
            cp_async_wait<1>(); /* A's payloads; B's may still be in flight */
            load_payload<P, K, SL>(x, pre, sA, fast_of(idA), in, base, n);
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const uint32_t l0 = (uint32_t)(k * SB + tid) * 4;
                uint32_t r = cA[k];
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const uint32_t q = seg_pos<PB>(nibA[k], j, l0 + j, r, open, pieceA);
                    if (base + l0 + j < n) stage[q] = x[k][j];
                }
            }
        }
        __syncthreads();
        if (idA < ntiles) {
            const bool full = base + TILE <= n;
            const uint32_t R = s_r[sA], rnext = s_rnext[sA];
            const uint32_t tail = hl + 1u ? hl + (uint32_t)pieceA[hl] : 0xFFFFFFFFu;
            const uint32_t b32 = (uint32_t)base;
            /* Four runs: the open segment's flagged and unflagged elements, the segments
             * inside the tile (in place), the unflagged tail of the last segment. */
            const uint32_t valid = full ? (uint32_t)TILE : (uint32_t)(n - base);
            const uint32_t lim = head0 ? 0u : first;
            const uint32_t d_of = s0 + ob0, d_ou = b32 + R - open, d_in = b32, d_tail = b32 + rnext;
            auto off = [&](uint32_t q) {
                return q < lim ? (q < open ? d_of : d_ou) : (q >= tail ? d_tail : d_in);
            };
            if (vec_out && full) {
                /* Groups of four wholly inside the in-place run leave as 16-byte vectors. */
                constexpr int H = (int)sizeof(P) * 4 / 16;
#pragma unroll
                for (uint32_t q4 = tid * 4; q4 < (uint32_t)TILE; q4 += SB * 4) {
                    if (q4 >= lim && q4 + 4 <= tail) {
                        const uint4 *sv = (const uint4 *)(stage + q4);
                        uint4 *ov = (uint4 *)(out + base + q4);
#pragma unroll
                        for (int h = 0; h < H; ++h) ov[h] = sv[h];
                    } else {
#pragma unroll
                        for (uint32_t q = q4; q < q4 + 4; ++q) out[q + off(q)] = stage[q];
                    }
                }
            } else {
#pragma unroll 4
                for (uint32_t q = tid; q < valid; q += SB) out[q + off(q)] = stage[q];
            }
            if (dest) {
#pragma unroll
                for (int k = 0; k < K; ++k) {
                    const uint32_t l0 = (uint32_t)(k * SB + tid) * 4;
                    uint32_t r = cA[k], d[4];
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        const uint32_t q = seg_pos<PB>(nibA[k], j, l0 + j, r, open, pieceA);
                        d[j] = q + off(q);
                    }
                    store_dest<K>(dest, d, base + l0, vec_dest && full, n);
                }
            }
        }
        idA = idB;
        idB = idC;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            cA[k] = cB[k];
            nibA[k] = nibB[k];
            nibB[k] = nibC[k];
        }
    }
    cp_async_wait_all();
}

/* ---- launchers ------------------------------------------------------------------------------ */

template <typename P>
grove_status split_impl(grove_ctx *ctx, void *d_temp, size_t *temp_bytes, const void *d_in,
                        const uint8_t *d_flags, void *d_out, uint32_t *d_dest,
                        uint64_t *d_num_flagged, size_t n, void *stream)
{
    constexpr int TILE = Cfg<P>::TILE;
    const size_t ntiles = (n + TILE - 1) / TILE;
    const LbLayout l = lb_layout(ntiles, 4);
    const size_t bits_off = l.end;
    const size_t end = lb_align(bits_off + ((n + 15) / 16) * 4);
    if (!d_temp) {
        *temp_bytes = end;
        return GROVE_OK;
    }
    if (*temp_bytes < end)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "split: temp_bytes %zu is less than the %zu bytes asked for",
                            *temp_bytes, end);
    cudaStream_t s = (cudaStream_t)stream;
    if (n == 0) {
        if (d_num_flagged)
            GROVE_CUDA_TRY(ctx, cudaMemsetAsync(d_num_flagged, 0, sizeof(uint64_t), s),
                           "split: writing the flagged count");
        return GROVE_OK;
    }
    GROVE_CUDA_TRY(ctx, cudaMemsetAsync(d_temp, 0, l.reset_bytes, s),
                   "split: clearing tile states");
    char *t = (char *)d_temp;
    uint32_t *counter = (uint32_t *)t, *total = counter + 1;
    uint32_t *bits = (uint32_t *)(t + bits_off);

    int dev = 0, sms = 0;
    GROVE_CUDA_TRY(ctx, cudaGetDevice(&dev), "split: cudaGetDevice");
    GROVE_CUDA_TRY(ctx, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev),
                   "split: reading the multiprocessor count");
    const size_t nchunks = (n + 15) / 16;
    size_t grid = (nchunks + (size_t)SB * CNT_U - 1) / ((size_t)SB * CNT_U);
    if (grid > (size_t)sms * 8) grid = (size_t)sms * 8;
    split_count_kernel<<<(unsigned)grid, SB, 0, s>>>(d_flags, bits, n, total, aligned(d_flags, 16));
    GROVE_CUDA_LAUNCHED(ctx, "split: flag count kernel launch");
    auto kern = split_scatter_kernel<P>;
    unsigned g2 = 0;
    GROVE_TRY(persistent_grid(ctx, (const void *)kern, SB, Cfg<P>::SMEM, ntiles, &g2,
                              "split: sizing the scatter kernel"));
    kern<<<g2, SB, Cfg<P>::SMEM, s>>>((const P *)d_in, (const uint8_t *)bits, (P *)d_out, d_dest,
                                      (unsigned long long *)d_num_flagged, n, (int)ntiles,
                                      TileState<uint32_t>::at(t + l.status_off), counter, total,
                                      aligned(d_in, 16), d_dest && aligned(d_dest, 16));
    GROVE_CUDA_LAUNCHED(ctx, "split: scatter kernel launch");
    return GROVE_OK;
}

template <typename P>
grove_status segsplit_impl(grove_ctx *ctx, void *d_temp, size_t *temp_bytes, const void *d_in,
                           const uint8_t *d_flags, const uint8_t *d_heads, void *d_out,
                           uint32_t *d_dest, size_t n, void *stream)
{
    constexpr int TILE = Cfg<P, true>::TILE, PB = pack_bits(TILE);
    const size_t ntiles = (n + TILE - 1) / TILE;
    /* header (two tile counters) | pass-1 states | pass-2 states: the part cleared per call;
     * then the per-tile open segments from pass 1 and the packed bits. */
    const size_t st1_off = 256, st2_off = lb_align(st1_off + lb_state_bytes(ntiles, 8));
    const size_t reset = st2_off + lb_state_bytes(ntiles, 4);
    const size_t fwd_off = lb_align(reset);
    const size_t bits_off = lb_align(fwd_off + ntiles * 8);
    const size_t end = lb_align(bits_off + ntiles * (TILE / 4));
    if (!d_temp) {
        *temp_bytes = end;
        return GROVE_OK;
    }
    if (*temp_bytes < end)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "segmented split: temp_bytes %zu is less than the %zu bytes asked for",
                            *temp_bytes, end);
    if (n == 0) return GROVE_OK;
    cudaStream_t s = (cudaStream_t)stream;
    GROVE_CUDA_TRY(ctx, cudaMemsetAsync(d_temp, 0, reset, s),
                   "segmented split: clearing tile states");
    char *t = (char *)d_temp;
    unsigned long long *fwd = (unsigned long long *)(t + fwd_off);
    uint32_t *bits = (uint32_t *)(t + bits_off);

    auto k1 = segsplit_pass1<TILE, PB>;
    const size_t smem1 = (size_t)2 * 2 * (TILE / (SB * 16)) * SB * sizeof(uint4);
    unsigned g1 = 0;
    GROVE_TRY(persistent_grid(ctx, (const void *)k1, SB, smem1, ntiles, &g1,
                              "segmented split: sizing pass 1"));
    k1<<<g1, SB, smem1, s>>>(d_flags, d_heads, bits, fwd, n, (int)ntiles,
                             TileState<unsigned long long>::at(t + st1_off), (uint32_t *)t,
                             aligned(d_flags, 16) && aligned(d_heads, 16));
    GROVE_CUDA_LAUNCHED(ctx, "segmented split: pass-1 kernel launch");
    auto k2 = segsplit_pass2<P>;
    const size_t smem2 = Cfg<P, true>::SMEM + (size_t)2 * TILE * sizeof(uint16_t);
    unsigned g2 = 0;
    GROVE_TRY(persistent_grid(ctx, (const void *)k2, SB, smem2, ntiles, &g2,
                              "segmented split: sizing pass 2"));
    k2<<<g2, SB, smem2, s>>>((const P *)d_in, (const uint8_t *)bits, fwd, (P *)d_out, d_dest, n,
                             (int)ntiles, TileState<uint32_t>::at(t + st2_off), (uint32_t *)t + 1,
                             aligned(d_in, 16), aligned(d_out, 16), d_dest && aligned(d_dest, 16));
    GROVE_CUDA_LAUNCHED(ctx, "segmented split: pass-2 kernel launch");
    return GROVE_OK;
}

} /* namespace */

extern "C" grove_status grove__cuda_split(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                          size_t elem_size, const void *d_in,
                                          const uint8_t *d_flags, void *d_out, uint32_t *d_dest,
                                          uint64_t *d_num_flagged, size_t n, void *stream)
{
    if (elem_size == 4)
        return split_impl<uint32_t>(ctx, d_temp, temp_bytes, d_in, d_flags, d_out, d_dest,
                                    d_num_flagged, n, stream);
    if (elem_size == 8)
        return split_impl<unsigned long long>(ctx, d_temp, temp_bytes, d_in, d_flags, d_out, d_dest,
                                              d_num_flagged, n, stream);
    return grove__error(ctx, GROVE_ERR_INVALID_ARG, "split: elem_size %zu is not 4 or 8",
                        elem_size);
}

extern "C" grove_status grove__cuda_segsplit(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                             size_t elem_size, const void *d_in,
                                             const uint8_t *d_flags, const uint8_t *d_heads,
                                             void *d_out, uint32_t *d_dest, size_t n, void *stream)
{
    if (elem_size == 4)
        return segsplit_impl<uint32_t>(ctx, d_temp, temp_bytes, d_in, d_flags, d_heads, d_out,
                                       d_dest, n, stream);
    if (elem_size == 8)
        return segsplit_impl<unsigned long long>(ctx, d_temp, temp_bytes, d_in, d_flags, d_heads,
                                                 d_out, d_dest, n, stream);
    return grove__error(ctx, GROVE_ERR_INVALID_ARG, "segmented split: elem_size %zu is not 4 or 8",
                        elem_size);
}
