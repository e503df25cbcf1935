/*
 * quadtree_internal.h - declarations shared by the quadtree module's files (not installed): the
 * tree object, the float arithmetic that defines the tree, and the CPU builds.
 */
#ifndef GROVE_QUADTREE_INTERNAL_H
#define GROVE_QUADTREE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "grove/quadtree.h"

struct grove_quadtree {
    grove_quadtree_opts opts; /* as built; bbox holds the root box, use_bbox = 1 */
    size_t n, num_nodes;
    /* Host arrays. A tree from grove_quadtree_build_device() has none (nodes == NULL) until
     * grove_quadtree_download(); every other tree has them. */
    grove_quadtree_node *nodes; /* num_nodes, breadth-first */
    float *pts;                 /* 2n floats in tree order (NULL when n == 0) */
    uint32_t *index;            /* n input positions (NULL when n == 0) */
    /* Device arrays (same layout), allocated through grove__cuda_alloc on dev_ctx, which owns
     * them; dev_ctx is NULL when there are none. d_nodes_bytes is the size of the d_nodes
     * allocation, which may exceed num_nodes nodes. */
    grove_ctx *dev_ctx;
    grove_quadtree_node *d_nodes;
    float *d_pts;
    uint32_t *d_index;
    size_t d_nodes_bytes;
};

/* The split point of a box. Each product is its own statement because C may only contract
 * (fuse into an FMA) within one expression: 0.5f*a + 0.5f*b written as one expression could
 * become fmaf(0.5f, a, 0.5f*b) under -ffp-contract=fast and round differently. Halving each
 * bound first cannot overflow, even for boxes spanning -FLT_MAX..FLT_MAX. */
static inline float grove__qt_mid(float lo, float hi)
{
    float a = 0.5f * lo;
    float b = 0.5f * hi;
    return a + b;
}

/* Quadrant of (x, y) about the center (cx, cy): TL 0, TR 1, BL 2, BR 3. */
static inline unsigned grove__qt_quadrant(float x, float y, float cx, float cy)
{
    return (unsigned)(x >= cx) + 2u * (unsigned)(y < cy);
}

/* Box of quadrant q of box b[4] = {xmin, ymin, xmax, ymax} with center (cx, cy). */
static inline void grove__qt_child_box(const float b[4], float cx, float cy, unsigned q,
                                       float out[4])
{
    out[0] = (q & 1u) ? cx : b[0];
    out[2] = (q & 1u) ? b[2] : cx;
    out[1] = (q & 2u) ? b[1] : cy;
    out[3] = (q & 2u) ? cy : b[3];
}

/* The four children of split node p, written to c[0..3] (levels, boxes, -1 first_child);
 * bounds[0..4] are the children's range boundaries (bounds[0] = p->begin, bounds[4] = p->end). */
void grove__qt_make_children(const grove_quadtree_node *p, const uint32_t bounds[5],
                             grove_quadtree_node *c);

/* Sorts v[0, m) ascending. */
void grove__qt_sort_u32(uint32_t *v, size_t m);

/* The CPU builds. pts and opts are valid (checked by grove_quadtree_build); root[4] is the
 * root box. They fill t->nodes, t->num_nodes, t->pts, t->index (t->n and t->opts are set). */
grove_status grove__qt_build_recursive_cpu(grove_ctx *ctx, const grove_points *pts,
                                           const float root[4], grove_quadtree *t);
grove_status grove__qt_build_morton_cpu(grove_ctx *ctx, const grove_points *pts,
                                        const float root[4], grove_quadtree *t);

#endif /* GROVE_QUADTREE_INTERNAL_H */
