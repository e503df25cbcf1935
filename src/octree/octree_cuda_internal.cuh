/*
 * octree_cuda_internal.cuh - what the files of the CUDA octree build share (internal): the scratch
 * arena, the build's state, the node pool and the host layout, small device helpers, and the
 * host functions of each phase.
 *   octree_count_cuda.cu  box, quantization, Morton order, counting and spilling (+ the
 *                         counting pass alone for the benchmark);
 *   octree_lod_cuda.cu    the level-of-detail wins of every point, in one pass over the
 *                         Morton-ordered points;
 *   octree_place_cuda.cu  layout, the entries placed in one pass, download;
 *   octree_cuda.cu        the entry points and the queries.
 */
#ifndef GROVE_OCTREE_CUDA_INTERNAL_CUH
#define GROVE_OCTREE_CUDA_INTERNAL_CUH

#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core_cuda.h"
#include "octree_cuda.h"

namespace grove__otc
{

typedef grove_octree_node Node;
typedef unsigned long long u64;

const uint32_t kNone = 0xFFFFFFFFu;
const u64 kEmpty = ~0ull;
const int kBlock = 256;

inline unsigned blocks_for(size_t n)
{
    size_t b = (n + kBlock - 1) / kBlock;
    return (unsigned)(b < 1 ? 1 : b);
}

inline int bits_for(uint64_t v) /* bits needed to hold values 0..v */
{
    int b = 1;
    while (b < 64 && (v >> b) != 0) b++;
    return b;
}

/* Device scratch of one call: every buffer is freed when the arena goes out of scope, so the
 * entry points can return on the first failure. */
struct Arena {
    grove_ctx *ctx;
    cudaStream_t s;
    struct Blk {
        void *p;
        size_t bytes;
    } blk[48];
    int nb;

    Arena(grove_ctx *c) : ctx(c), s((cudaStream_t)c->stream), nb(0) {}
    ~Arena()
    {
        for (int i = 0; i < nb; i++) grove__cuda_free(ctx, blk[i].p, blk[i].bytes, s);
    }
    template <typename T> grove_status get(T **p, size_t count, const char *what)
    {
        void *v = NULL;
        *p = NULL;
        if (nb == (int)(sizeof blk / sizeof blk[0]))
            return grove__error(ctx, GROVE_ERR_INTERNAL, "octree (CUDA): too many scratch buffers");
        const size_t bytes = count > 0 ? count * sizeof(T) : 1; /* never a NULL buffer */
        GROVE_TRY(grove__cuda_alloc(ctx, &v, bytes, s, what));
        blk[nb].p = v;
        blk[nb].bytes = bytes;
        nb++;
        *p = (T *)v;
        return GROVE_OK;
    }
    void put(void *p)
    {
        for (int i = 0; i < nb; i++)
            if (blk[i].p == p) {
                grove__cuda_free(ctx, p, blk[i].bytes, s);
                blk[i] = blk[--nb];
                return;
            }
    }
    /* Grows *p to `want` elements, keeping the first `keep`. */
    template <typename T> grove_status grow(T **p, size_t keep, size_t want, const char *what)
    {
        T *n = NULL;
        GROVE_TRY(get(&n, want, what));
        if (keep)
            GROVE_CUDA_TRY(ctx,
                           cudaMemcpyAsync(n, *p, keep * sizeof(T), cudaMemcpyDeviceToDevice, s),
                           what);
        if (*p) put(*p);
        *p = n;
        return GROVE_OK;
    }
};

__device__ __forceinline__ void load_q(const uint32_t *__restrict__ q, size_t i, uint32_t p[3])
{
    p[0] = q[3 * i];
    p[1] = q[3 * i + 1];
    p[2] = q[3 * i + 2];
}

/* The node pool of the counting passes. */
struct Pool {
    uint32_t *child; /* first of 8 children, kNone for a leaf */
    uint32_t *count; /* points counted into the node while it was a leaf */
    uint8_t *depth;
    uint32_t *spill; /* nodes that crossed the cap this round */
    uint32_t *nspill;
};

struct Build {
    grove_ctx *ctx;
    Arena A;
    grove_octree *t;
    size_t n;
    uint32_t *q, *leaf; /* per position: grid coordinates, pool leaf */
    uint32_t *perm;     /* position -> input position once in Morton order; NULL before */
    double *xyzm;       /* device-resident build: the points' coordinates by position */
    u64 *skey;          /* the positions' 63-bit Morton keys (levels 0..20) */
    u64 *rkey;          /* after refine_order: refined keys, (run of equal skey) << 27 | the
                         * octant digits of levels 21..29; the run part tells runs apart and is
                         * the same along a run (its scanned number, or its head's position) */
    uint32_t *deep;     /* set (non-zero) when the Morton order needs refining; NULL: not known */
    Pool P;
    size_t pool_size, pool_cap;
    uint32_t spill_rounds;
    Build(grove_ctx *c, grove_octree *tr)
        : ctx(c), A(c), t(tr), n(tr->n), q(NULL), leaf(NULL), perm(NULL), xyzm(NULL), skey(NULL),
          rkey(NULL), deep(NULL)
    {
        memset(&P, 0, sizeof P);
        pool_size = pool_cap = 0;
        spill_rounds = 0;
    }
};

/* The final nodes, numbered on the host from the pool. */
struct HostLayout {
    Node *nodes;
    uint32_t *final_of; /* pool id -> final id */
    uint32_t *parent;   /* final id -> final id of the parent (kNone for the root) */
    uint64_t *dstart;   /* final id -> its first position in Morton order */
    size_t num_nodes;
    int depth, inner_depth; /* deepest node, deepest inner node (-1: none) */
    HostLayout() : nodes(NULL), final_of(NULL), parent(NULL), dstart(NULL), num_nodes(0),
                   depth(0), inner_depth(-1) {}
    ~HostLayout()
    {
        free(nodes);
        free(final_of);
        free(parent);
        free(dstart);
    }
};

/* A stable CUB radix sort of (key, value) pairs on bits [begin_bit, end_bit). */
template <typename K>
grove_status sort_pairs(Build &B, const K *kin, K *kout, const uint32_t *vin, uint32_t *vout,
                        size_t n, int begin_bit, int end_bit, const char *what)
{
    size_t tb = 0;
    void *tmp = NULL;
    if (n == 0) return GROVE_OK;
    GROVE_CUDA_TRY(B.ctx, cub::DeviceRadixSort::SortPairs(NULL, tb, kin, kout, vin, vout, n,
                                                          begin_bit, end_bit, B.A.s),
                   what);
    GROVE_TRY(B.A.get((char **)&tmp, tb, what));
    GROVE_CUDA_TRY(B.ctx, cub::DeviceRadixSort::SortPairs(tmp, tb, kin, kout, vin, vout, n,
                                                          begin_bit, end_bit, B.A.s),
                   what);
    B.A.put(tmp);
    return GROVE_OK;
}

/* ---- octree_count_cuda.cu ---- */

/* The device-resident build's cube: the box of d_xyz on the device, the cube on the host. */
grove_status device_cube(Build &B, const double *d_xyz);
grove_status build_init(Build &B);
/* Quantizes, orders and counts all n device points (device-resident build). */
grove_status build_points_on_device(Build &B, const double *d_xyz);
/* Quantizes batch [b, b + m) of points already on the device (d_batch) into B.q. */
grove_status quantize_batch(Build &B, const double *d_batch, size_t b, size_t m);
/* Steps 1-3 for points [begin, end), whose q are on the device. */
grove_status count_batch(Build &B, size_t begin, size_t end);
/* Puts the positions in Morton order (counted: B.leaf is permuted too). */
grove_status morton_order(Build &B, bool counted);
/* Whether the Morton order of the 63-bit keys must be refined: some points with equal keys
 * differ further down (q in Morton order). */
grove_status needs_refining(Build &B, bool *yes);
/* Refines the Morton order to all 30 levels: every cell of every level is then a run. */
grove_status refine_order(Build &B);

/* ---- octree_lod_cuda.cu ---- */

/* The samples: *marks (an arena buffer of B, n words; NULL when there are none) gets, per
 * position, bit d set when its point wins its voxel at depth d. */
grove_status sample_marks(Build &B, const HostLayout &L, uint32_t **marks);

/* ---- octree_place_cuda.cu ---- */

/* Steps 4-7. d_xyz: the points on the device, or NULL (the host build fills xyz itself). */
grove_status finish(Build &B, const double *d_xyz, grove_octree_stats *stats);
void free_tree_device(grove_octree *t);
grove_status download(grove_ctx *ctx, grove_octree *t);

} /* namespace grove__otc */

#endif /* GROVE_OCTREE_CUDA_INTERNAL_CUH */
