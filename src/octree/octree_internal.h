/*
 * octree_internal.h - declarations shared by the octree module's files (not installed): the tree
 * object, the integer arithmetic that defines the tree (usable from C and CUDA), and the
 * backends' build entry points.
 */
#ifndef GROVE_OCTREE_INTERNAL_H
#define GROVE_OCTREE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "grove/octree.h"

#ifdef __CUDACC__
#define GROVE__OT_FN static __host__ __device__ __forceinline__
#else
#define GROVE__OT_FN static inline
#endif

/* The sub-grid on which distances to a voxel centre are measured: 2^15 steps per voxel side
 * keeps a squared distance (three odd terms below 2^15, squared) below 2^32, so it packs with a
 * 32-bit input position into one 64-bit key for an atomic minimum. */
#define GROVE__OT_SUB_BITS 15

#ifdef __cplusplus
extern "C" {
#endif

struct grove_octree {
    grove_octree_opts opts; /* as built (progress cleared) */
    double lo[3], side;     /* the cube */
    double to_grid;         /* 2^30 / side: q = floor((x - lo) * to_grid), clamped */
    size_t n, num_nodes, num_entries;
    int depth;
    /* Host arrays; a tree from grove_octree_build_device() has none (nodes == NULL) until
     * grove_octree_download(). */
    grove_octree_node *nodes; /* num_nodes, breadth-first */
    uint32_t *index;          /* num_entries input positions */
    double *xyz;              /* 3 * num_entries */
    /* Device arrays (same layout), allocated through grove__cuda_alloc on dev_ctx, which owns
     * them; dev_ctx is NULL when there are none. */
    grove_ctx *dev_ctx;
    grove_octree_node *d_nodes;
    uint32_t *d_index;
    double *d_xyz;
};

/* Grid coordinate of one axis (the exact rule of octree.h). Two separately rounded operations;
 * nothing here can contract into an FMA. NaN is not expected (inputs are validated). */
GROVE__OT_FN uint32_t grove__ot_quantize(double x, double lo, double to_grid)
{
    double t = (x - lo) * to_grid;
    const double top = (double)((1u << GROVE_OCTREE_BITS) - 1u);
    if (!(t > 0.0))
        return 0;
    if (t >= top)
        return (1u << GROVE_OCTREE_BITS) - 1u;
    return (uint32_t)t; /* truncation == floor for t > 0 */
}

/* Octant of the child at depth d + 1 containing grid point q (node at depth d). */
GROVE__OT_FN unsigned grove__ot_octant(const uint32_t q[3], int d)
{
    const int b = GROVE_OCTREE_BITS - 1 - d;
    return ((q[0] >> b) & 1u) | (((q[1] >> b) & 1u) << 1) | (((q[2] >> b) & 1u) << 2);
}

/* The Morton code of grid point q in two parts, octant digits (x lowest bit of a digit) with
 * level 0 on top: hi = levels 0..20 (63 bits: the top 21 bits of each axis), lo = levels
 * 21..29 (27 bits). The points' Morton order (octree.h) is ascending (hi, lo), ties by input
 * position. */
/* The low 21 bits of v spread to every third bit. */
GROVE__OT_FN uint64_t grove__ot_spread(uint32_t v)
{
    uint64_t x = v & 0x1FFFFFu;
    x = (x | x << 32) & 0x1F00000000FFFFull;
    x = (x | x << 16) & 0x1F0000FF0000FFull;
    x = (x | x << 8) & 0x100F00F00F00F00Full;
    x = (x | x << 4) & 0x10C30C30C30C30C3ull;
    x = (x | x << 2) & 0x1249249249249249ull;
    return x;
}

GROVE__OT_FN uint64_t grove__ot_morton_hi(const uint32_t q[3])
{
    return grove__ot_spread(q[0] >> 9) | grove__ot_spread(q[1] >> 9) << 1 |
           grove__ot_spread(q[2] >> 9) << 2;
}

GROVE__OT_FN uint32_t grove__ot_morton_lo(const uint32_t q[3])
{
    return (uint32_t)(grove__ot_spread(q[0] & 511u) | grove__ot_spread(q[1] & 511u) << 1 |
                      grove__ot_spread(q[2] & 511u) << 2);
}

/* Voxel of q in the lod grid (2^g per side) of its node at depth d, as a linear index
 * x + G (y + G z), and the squared distance of q from that voxel's centre on the sub-grid:
 * s = 30 - d - g bits of q lie inside the voxel; only the top min(s, 15) of them count. Each
 * term 2 o + 1 - 2^s' is odd, so no point is ever exactly at the centre, and the result is
 * exact. */
GROVE__OT_FN uint32_t grove__ot_voxel(const uint32_t q[3], int d, int g, uint32_t *dist2)
{
    const int s = GROVE_OCTREE_BITS - d - g;
    const int keep = s < GROVE__OT_SUB_BITS ? s : GROVE__OT_SUB_BITS;
    const uint32_t gmask = (1u << g) - 1u;
    uint32_t v = 0, acc = 0;
    for (int a = 2; a >= 0; a--) {
        uint32_t o = (q[a] & ((1u << s) - 1u)) >> (s - keep);
        int32_t e = (int32_t)(2u * o + 1u) - (int32_t)(1u << keep);
        acc += (uint32_t)(e * e);
        v = (v << g) | ((q[a] >> s) & gmask);
    }
    *dist2 = acc;
    return v;
}

/* Validated options (opts may be NULL: defaults); the message names a bad field. */
grove_status grove__ot_check_opts(grove_ctx *ctx, const grove_octree_opts *opts,
                                  grove_octree_opts *out);

/* The cube of n points (host), per octree.h, from their box (lo = hi = 0 for none); fills
 * t->lo (a -0 corner stored as +0), t->side, t->to_grid. */
void grove__ot_cube_from_box(const double lo[3], const double hi[3], grove_octree *t);

/* log2 of a valid lod_grid (0 for 0). */
int grove__ot_log2_grid(int lod_grid);

/* Wall clock in milliseconds (CLOCK_MONOTONIC), for the stats. */
double grove__ot_now_ms(void);

/* The backends. t has opts, n, the cube set; they fill the rest (host arrays for the CPU and
 * for grove__ot_build_cuda, device arrays for grove__ot_build_cuda_device). xyz is host memory
 * for the first two, device memory for the last.
 * Exception: octree.c cannot read device points, so for grove__ot_build_cuda_device the cube
 * is not set (t->side == 0 on entry): that build finds the box of d_xyz itself (min and max
 * per axis) and calls grove__ot_cube_from_box.
 * During the call t->opts.progress / progress_user are the caller's (may be NULL): call it
 * after each batch from the calling thread; octree.c clears them when the build returns.
 * stats is never NULL (zeroed on entry); octree.c sets ms_total afterwards, the backends fill
 * the phases, batches and spill_rounds.
 * grove__ot_build_cuda leaves t->xyz allocated but not filled: octree.c copies the entries'
 * coordinates from the input with all the host's threads (adding the time to ms_place). */
grove_status grove__ot_build_cpu(grove_ctx *ctx, const double *xyz, grove_octree *t,
                                 grove_octree_stats *stats);
grove_status grove__ot_build_cuda(grove_ctx *ctx, const double *xyz, grove_octree *t,
                                  grove_octree_stats *stats);
grove_status grove__ot_build_cuda_device(grove_ctx *ctx, const double *d_xyz, grove_octree *t,
                                         grove_octree_stats *stats);

/* Everything after the counting, on the host, from a node pool counted elsewhere (the CUDA
 * build from host memory when its later phases do not fit in device memory): node i is a leaf
 * when child[i] == UINT32_MAX, else its 8 children are child[i] + octant (ids above i);
 * count[i] is the points counted into a leaf, depth[i] its depth. Every point is located
 * again on the host, and the tree (host arrays, coordinates included) is the one the CPU
 * build gives. Adds to stats->ms_place and ms_lod. */
grove_status grove__ot_build_cpu_from_pool(grove_ctx *ctx, const double *xyz, grove_octree *t,
                                           const uint32_t *child, const uint32_t *count,
                                           const uint8_t *depth, size_t num_nodes,
                                           grove_octree_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_OCTREE_INTERNAL_H */
