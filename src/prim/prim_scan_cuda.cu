/*
 * prim_scan_cuda.cu - single-pass scan and segmented scan (forward and backward) on the GPU.
 *
 * One kernel template does all of them: a tile of BLOCK threads x K rounds x one 16-byte vector
 * per thread per round. Round k of a tile covers [base + k*BLOCK*VEC, base + (k+1)*BLOCK*VEC),
 * thread t holding the VEC elements at t*VEC, so loads and stores are 16-byte and coalesced with
 * no shared-memory transpose. Blocks are persistent and take tiles from a counter. Each
 * iteration of a block (1) reduces tile B, whose vectors were prefetched into the thread's own
 * shared-memory slots with cp.async one iteration earlier, and publishes B's aggregate at once;
 * (2) queues the prefetch of the next tile; (3) warp 0 looks back for tile A, reduced one
 * iteration earlier; (4) every thread rescans A from its slots with its carry and stores. A
 * tile's aggregate thus never waits for a look-back (when it did, waits chained from block to
 * block: bench/NOTES-scan.md, v2-v4), and the next tile's loads are in flight during the
 * look-back, the rescan and the stores.
 *
 * Segmented scans scan (head, value) pairs: a tile holding a head publishes its inclusive value
 * at once, so the look-back of later tiles stops there. The backward (suffix) scan is the forward
 * scan in reverse order: tiles are taken from the end, everything inside a tile runs from its last
 * element down, and an element starts a segment in that order when it is the last of its segment
 * (heads[i+1] set, or i == n-1).
 */
#include <cuda_runtime.h>

#include <stdint.h>

#include "core_cuda.h"
#include "lookback_cuda.cuh"
#include "prim_cuda.h"

/* Tile shape; overridable at build time for tuning (bench/NOTES-scan.md has the measurements). */
#ifndef GROVE_SCAN_BLOCK
#define GROVE_SCAN_BLOCK 256
#endif
#ifndef GROVE_SCAN_K
#define GROVE_SCAN_K 8
#endif
#ifndef GROVE_SCAN_MINB
#define GROVE_SCAN_MINB 2
#endif

namespace
{

using namespace grove_lb;

constexpr int BLOCK = GROVE_SCAN_BLOCK;
constexpr int K = GROVE_SCAN_K;

template <typename T> struct Vec {
    static constexpr int N = 16 / sizeof(T);
    union U {
        uint4 u;
        T t[N];
    };
};

template <typename T> constexpr size_t tile_items() { return (size_t)BLOCK * K * Vec<T>::N; }

/* Raw head bytes of one vector (VEC bytes at an address aligned to VEC). */
template <int VEC> __device__ __forceinline__ uint32_t load_head_bytes(const uint8_t *p)
{
    if (VEC == 4) return *(const uint32_t *)p;
    return *(const uint16_t *)p;
}

template <typename T, class Op, bool SEG, bool BWD>
__global__ void __launch_bounds__(BLOCK, GROVE_SCAN_MINB)
    scan_kernel(const T *in, const uint8_t *heads, T *out, size_t n, int ntiles, TileState<T> st,
                uint32_t *counter, int exclusive, int vec_ok)
{
    constexpr int VEC = Vec<T>::N;
    constexpr size_t TILE = tile_items<T>();
    using PS = Pipe<T, Op, SEG, BWD, BLOCK, K>;
    extern __shared__ uint4 pre[]; /* [3][K][BLOCK]: each thread's slots of three tiles */
    __shared__ typename PS::TileSm ts[3];
    __shared__ int s_ids[4];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    auto base_of = [&](int id) { return (size_t)(BWD ? ntiles - 1 - id : id) * TILE; };
    auto fast_of = [&](int id) { return vec_ok && base_of(id) + TILE <= n; };

    /* Queues the vectors of tile `pid` into buffer `buf` and loads its head bytes into hx/nx.
     * Only full tiles of aligned arrays are prefetched; the others load directly. */
    auto prefetch = [&](int pid, int buf, uint32_t(&hx)[K], uint32_t(&nx)[K]) {
        if (pid < ntiles && fast_of(pid)) {
            const size_t pb = base_of(pid);
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const size_t p = pb + (size_t)k * BLOCK * VEC + (size_t)tid * VEC;
                cp_async16(&pre[(buf * K + k) * BLOCK + tid], in + p);
                if (SEG) {
                    hx[k] = load_head_bytes<VEC>(heads + p);
                    /* BWD: the head after this thread's last element belongs to the next
                     * thread; lane 31 fetches it itself (past the end counts as a head). */
                    if (BWD && lane == 31) nx[k] = p + VEC < n ? heads[p + VEC] : 1u;
                }
            }
        }
        cp_async_commit();
    };
    auto load = [&](int id, int buf, T(&x)[K][VEC]) {
        const size_t b = base_of(id);
        if (fast_of(id)) {
#pragma unroll
            for (int k = 0; k < K; ++k) {
                typename Vec<T>::U v;
                v.u = pre[(buf * K + k) * BLOCK + tid];
#pragma unroll
                for (int j = 0; j < VEC; ++j) x[k][j] = v.t[j];
            }
        } else {
#pragma unroll
            for (int k = 0; k < K; ++k)
#pragma unroll
                for (int j = 0; j < VEC; ++j) {
                    const size_t i = b + (size_t)k * BLOCK * VEC + (size_t)tid * VEC + j;
                    x[k][j] = i < n ? in[i] : Op::ident();
                }
        }
    };

    ids_start(counter, s_ids);
    int idB = s_ids[0], idA = ntiles;
    uint32_t hw[K], nb[K]; /* SEG: head bytes of tile B (prefetched with it) */
    if (idB < ntiles) prefetch(idB, 0, hw, nb);
    T exA[K];
    unsigned exfA = 0;
    uint32_t hbA[K];
#pragma unroll
    for (int k = 0; k < K; ++k) exA[k] = Op::ident(), hbA[k] = 0;

    /* Iteration it reduces tile B (publishing its aggregate at once), prefetches tile C, looks
     * back for tile A (reduced one iteration earlier) and finishes it. */
    for (int it = 0; idA < ntiles || idB < ntiles; ++it) {
        const int bB = it % 3, bA = (it + 2) % 3, bC = (it + 1) % 3;
        ids_reserve(counter, s_ids, it);
        T exB[K];
        unsigned exfB = 0;
        uint32_t hbB[K];
#pragma unroll
        for (int k = 0; k < K; ++k) exB[k] = Op::ident(), hbB[k] = 0;
        if (idB < ntiles) {
            const size_t base = base_of(idB);
            const bool fast = fast_of(idB);
            if (fast) cp_async_wait_all();
            T x[K][VEC];
            load(idB, bB, x);
            if (SEG) {
                if (fast) {
#pragma unroll
                    for (int k = 0; k < K; ++k) {
                        if (!BWD) {
                            hbB[k] = nz_bits4(hw[k]);
                        } else {
                            const uint32_t nxt = __shfl_down_sync(FULL, hw[k], 1) & 0xFFu;
                            const uint32_t b = lane == 31 ? nb[k] : nxt;
                            hbB[k] = nz_bits4((hw[k] >> 8) | ((b ? 1u : 0u) << (8 * (VEC - 1))));
                        }
                    }
                    if (!BWD && base == 0 && tid == 0) hbB[0] |= 1u;
                } else {
#pragma unroll
                    for (int k = 0; k < K; ++k)
#pragma unroll
                        for (int j = 0; j < VEC; ++j) {
                            const size_t i = base + (size_t)k * BLOCK * VEC + (size_t)tid * VEC + j;
                            const bool h = i < n && (BWD ? (i + 1 == n || heads[i + 1] != 0)
                                                         : (i == 0 || heads[i] != 0));
                            hbB[k] |= (uint32_t)h << j;
                        }
                }
            }
            /* Thread aggregates per round, in scan order. */
            T a[K];
            bool f[K];
#pragma unroll
            for (int k = 0; k < K; ++k) {
                if (!BWD) {
                    T acc = x[k][0];
#pragma unroll
                    for (int j = 1; j < VEC; ++j)
                        acc = (SEG && ((hbB[k] >> j) & 1u)) ? x[k][j] : Op::apply(acc, x[k][j]);
                    a[k] = acc;
                } else {
                    T acc = x[k][VEC - 1];
#pragma unroll
                    for (int j = VEC - 2; j >= 0; --j)
                        acc = (SEG && ((hbB[k] >> j) & 1u)) ? x[k][j] : Op::apply(acc, x[k][j]);
                    a[k] = acc;
                }
                f[k] = SEG && hbB[k] != 0u;
            }
            if (SEG) {
                if (!BWD && tid == 0) ts[bB].first = hbB[0] & 1u;
                if (BWD && tid == BLOCK - 1) ts[bB].first = (hbB[K - 1] >> (VEC - 1)) & 1u;
            }
            PS::reduce(ts[bB], a, f, exB, exfB);
        }
        __syncthreads();
        const int idC = idB < ntiles ? ids_next(s_ids, it) : ntiles;
        uint32_t hwC[K], nbC[K];
        prefetch(idC, bC, hwC, nbC); /* past the end: an empty group, so counts stay simple */
        if (warp == 0) {
            if (idB < ntiles) {
                bool any;
                const T agg = PS::local(ts[bB], any);
                if (lane == 0) st.publish(idB, (idB == 0 || (SEG && any)) ? ST_INCL : ST_AGG, agg);
            }
            if (idA < ntiles) {
                T P = Op::ident();
                if (idA > 0) {
                    if (SEG && ts[bA].any) {
                        if (!ts[bA].first) P = lookback<Op, T>(st, idA);
                    } else {
                        P = lookback<Op, T>(st, idA);
                        if (lane == 0) st.publish(idA, ST_INCL, Op::apply(P, ts[bA].agg));
                    }
                }
                PS::fold(ts[bA], P);
            }
        }
        __syncthreads();
        if (idA < ntiles) {
            const size_t base = base_of(idA);
            T c[K], x[K][VEC];
            PS::carry(ts[bA], exA, exfA, c);
            load(idA, bA, x);
            /* Rescan with the carry; an element that starts a segment gets the API's identity
             * as its exclusive value (its range is empty). Without heads only element 0 does. */
            const bool first0 = !SEG && base == 0 && tid == 0;
#pragma unroll
            for (int k = 0; k < K; ++k) {
                T r = c[k];
#pragma unroll
                for (int jj = 0; jj < VEC; ++jj) {
                    const int j = BWD ? VEC - 1 - jj : jj;
                    const bool h = SEG ? ((hbA[k] >> j) & 1u) != 0u : (first0 && k == 0 && j == 0);
                    const T e = h ? Op::pub() : r;
                    r = h ? x[k][j] : Op::apply(r, x[k][j]);
                    x[k][j] = exclusive ? e : r;
                }
            }
            if (fast_of(idA)) {
#pragma unroll
                for (int k = 0; k < K; ++k) {
                    const size_t p = base + (size_t)k * BLOCK * VEC + (size_t)tid * VEC;
                    typename Vec<T>::U v;
#pragma unroll
                    for (int j = 0; j < VEC; ++j) v.t[j] = x[k][j];
                    *(uint4 *)(out + p) = v.u;
                }
            } else {
#pragma unroll
                for (int k = 0; k < K; ++k)
#pragma unroll
                    for (int j = 0; j < VEC; ++j) {
                        const size_t i = base + (size_t)k * BLOCK * VEC + (size_t)tid * VEC + j;
                        if (i < n) out[i] = x[k][j];
                    }
            }
        }
        idA = idB;
        idB = idC;
        exfA = exfB;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            exA[k] = exB[k];
            hbA[k] = hbB[k];
            hw[k] = hwC[k];
            nb[k] = nbC[k];
        }
    }
}

inline bool aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

template <typename T, class Op, bool SEG, bool BWD>
grove_status launch(grove_ctx *ctx, void *d_temp, size_t *temp_bytes, const void *d_in,
                    const uint8_t *d_heads, void *d_out, size_t n, int exclusive, void *stream)
{
    const size_t tile = tile_items<T>();
    const size_t ntiles = (n + tile - 1) / tile;
    const LbLayout l = lb_layout(ntiles, sizeof(T));
    const char *what = SEG ? "segmented scan" : "scan";
    if (!d_temp) {
        *temp_bytes = l.end;
        return GROVE_OK;
    }
    if (*temp_bytes < l.end)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: temp_bytes %zu is less than the %zu bytes asked for", what,
                            *temp_bytes, l.end);
    if (n == 0) return GROVE_OK;
    cudaStream_t s = (cudaStream_t)stream;
    GROVE_CUDA_TRY(ctx, cudaMemsetAsync(d_temp, 0, l.reset_bytes, s),
                   SEG ? "segmented scan: clearing tile states" : "scan: clearing tile states");
    const int vec_ok =
        aligned(d_in, 16) && aligned(d_out, 16) && (!SEG || aligned(d_heads, (size_t)Vec<T>::N));
    auto kern = scan_kernel<T, Op, SEG, BWD>;
    const size_t smem = (size_t)3 * K * BLOCK * sizeof(uint4);
    unsigned grid = 0;
    GROVE_TRY(persistent_grid(ctx, (const void *)kern, BLOCK, smem, ntiles, &grid, what));
    kern<<<grid, BLOCK, smem, s>>>((const T *)d_in, d_heads, (T *)d_out, n, (int)ntiles,
                                   TileState<T>::at((char *)d_temp + l.status_off),
                                   (uint32_t *)d_temp, exclusive, vec_ok);
    GROVE_CUDA_LAUNCHED(ctx, SEG ? "segmented scan kernel launch" : "scan kernel launch");
    return GROVE_OK;
}

template <typename T, bool SEG, bool BWD>
grove_status by_op(grove_ctx *ctx, void *d_temp, size_t *temp_bytes, grove_op op, const void *d_in,
                   const uint8_t *d_heads, void *d_out, size_t n, int exclusive, void *stream)
{
    switch (op) {
    case GROVE_OP_SUM:
        return launch<T, Sum<T>, SEG, BWD>(ctx, d_temp, temp_bytes, d_in, d_heads, d_out, n,
                                           exclusive, stream);
    case GROVE_OP_MAX:
        return launch<T, Max<T>, SEG, BWD>(ctx, d_temp, temp_bytes, d_in, d_heads, d_out, n,
                                           exclusive, stream);
    case GROVE_OP_MIN:
        return launch<T, Min<T>, SEG, BWD>(ctx, d_temp, temp_bytes, d_in, d_heads, d_out, n,
                                           exclusive, stream);
    }
    return grove__error(ctx, GROVE_ERR_INVALID_ARG, "scan: unknown operator %d", (int)op);
}

template <bool SEG, bool BWD>
grove_status by_type(grove_ctx *ctx, void *d_temp, size_t *temp_bytes, grove_dtype t, grove_op op,
                     const void *d_in, const uint8_t *d_heads, void *d_out, size_t n, int exclusive,
                     void *stream)
{
    switch (t) {
    case GROVE_U32:
        return by_op<uint32_t, SEG, BWD>(ctx, d_temp, temp_bytes, op, d_in, d_heads, d_out, n,
                                         exclusive, stream);
    case GROVE_U64:
        return by_op<unsigned long long, SEG, BWD>(ctx, d_temp, temp_bytes, op, d_in, d_heads,
                                                   d_out, n, exclusive, stream);
    case GROVE_F32:
        return by_op<float, SEG, BWD>(ctx, d_temp, temp_bytes, op, d_in, d_heads, d_out, n,
                                      exclusive, stream);
    }
    return grove__error(ctx, GROVE_ERR_INVALID_ARG, "scan: unknown type %d", (int)t);
}

} /* namespace */

extern "C" grove_status grove__cuda_scan(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                         grove_dtype t, grove_op op, grove_scan_kind kind,
                                         const void *d_in, void *d_out, size_t n, void *stream)
{
    return by_type<false, false>(ctx, d_temp, temp_bytes, t, op, d_in, NULL, d_out, n,
                                 kind == GROVE_SCAN_EXCLUSIVE, stream);
}

extern "C" grove_status grove__cuda_segscan(grove_ctx *ctx, void *d_temp, size_t *temp_bytes,
                                            grove_dtype t, grove_op op, grove_scan_kind kind,
                                            grove_scan_dir dir, const void *d_in,
                                            const uint8_t *d_heads, void *d_out, size_t n,
                                            void *stream)
{
    const int excl = kind == GROVE_SCAN_EXCLUSIVE;
    if (dir == GROVE_SCAN_BACKWARD)
        return by_type<true, true>(ctx, d_temp, temp_bytes, t, op, d_in, d_heads, d_out, n, excl,
                                   stream);
    return by_type<true, false>(ctx, d_temp, temp_bytes, t, op, d_in, d_heads, d_out, n, excl,
                                stream);
}
