/*
 * kdtree_internal.h - declarations shared by the k-d tree module's files (not installed): the
 * tree object, the double arithmetic that defines the tree, the CPU build and query helpers.
 */
#ifndef GROVE_KDTREE_INTERNAL_H
#define GROVE_KDTREE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "grove/kdtree.h"

/* Nodes with more points than this go through the large-node stage (Zhou et al.'s 64). */
#define GROVE__KD_SMALL 64

struct grove_kdtree {
    grove_kdtree_opts opts;
    int dims;
    grove_coord_type type;
    size_t n, num_nodes, depth;
    grove_kdtree_node *nodes; /* num_nodes, preorder */
    double *bounds;           /* 2 * dims per node */
    void *pts;                /* n * dims coordinates of `type`, tree order (NULL when n == 0) */
    uint64_t *index;          /* n input positions (NULL when n == 0) */
    /* Device arrays (same layout) of a tree built by grove_kdtree_build_device(), allocated
     * through grove__cuda_alloc on dev_ctx, which owns them; dev_ctx is NULL when there are
     * none. The host arrays above are NULL until grove_kdtree_download(). */
    grove_ctx *dev_ctx;
    void *d_nodes, *d_bounds, *d_pts, *d_index;
    size_t d_bytes[4]; /* their allocation sizes, for grove__cuda_free */
    double root_box[2 * GROVE_KDTREE_MAX_DIMS]; /* node 0's box (lo, hi), kept on the host */
};

/* Node 0's box on the host, whichever arrays the tree has. */
static inline const double *grove__kd_root_box(const grove_kdtree *t)
{
    return t->bounds ? t->bounds : t->root_box;
}

/* Whether the tree has its host arrays (a device-built tree has none before the download). */
static inline int grove__kd_on_host(const grove_kdtree *t)
{
    return t->nodes != NULL || t->dev_ctx == NULL;
}

/* Midpoint of [lo, hi]. Each product is its own statement because C may only contract (fuse
 * into an FMA) within one expression, and a CUDA port must reproduce this with __dmul_rn and
 * __dadd_rn. Halving first cannot overflow, even for -DBL_MAX..DBL_MAX. */
static inline double grove__kd_mid(double lo, double hi)
{
    double a = 0.5 * lo;
    double b = 0.5 * hi;
    return a + b;
}

static inline size_t grove__kd_coord_size(grove_coord_type t)
{
    return t == GROVE_COORD_F64 ? sizeof(double) : sizeof(float);
}

/* Coordinate d of point i of a typed array, as double (exact for float). */
static inline double grove__kd_coord(const void *data, grove_coord_type t, int dims, size_t i,
                                     int d)
{
    if (t == GROVE_COORD_F64) return ((const double *)data)[i * (size_t)dims + (size_t)d];
    return (double)((const float *)data)[i * (size_t)dims + (size_t)d];
}

/* Checks a coordinate array (NULL, dims, type, finiteness) for the entry point fn; `what` is
 * "point" or "query", named in the message with the first bad index. With x != NULL also
 * writes the coordinates as doubles, -0 turned into +0 (so that min/max reductions never
 * depend on the order in which they compare equal zeros). */
grove_status grove__kd_check_coords(grove_ctx *ctx, const char *fn, const char *arg,
                                    const char *what, const grove_coords *c, double *x);

/* grove__kd_check_coords()'s finiteness check for coordinates in device memory (CUDA builds
 * only; the shape of c is checked, the context's device current): the same message. */
grove_status grove__kd_check_coords_device(grove_ctx *ctx, const char *fn, const char *what,
                                           const grove_coords *c);

/* The CPU build: x holds the n points as doubles (checked); the build reorders it. Fills t's
 * arrays, num_nodes and depth (t->n, t->dims, t->type and t->opts are set). pts is the caller's
 * input, from which the tree's point array is gathered. */
grove_status grove__kd_build_cpu(grove_ctx *ctx, const grove_coords *pts, double *x,
                                 grove_kdtree *t);

#endif /* GROVE_KDTREE_INTERNAL_H */
