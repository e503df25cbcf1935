/*
 * quadtree.h - 2-D point quadtrees: build (two methods that give the identical tree), save and
 * load, box queries and k nearest neighbours.
 *
 * The tree. The root covers a bounding box (the points' own, or one the caller gives). A node
 * with more than `min_points` points, above `max_depth`, is split at its center, the midpoint
 * of its box computed in float as 0.5f*min + 0.5f*max per axis, into four children in quadrant
 * order TL=0 (x < cx, y >= cy), TR=1 (x >= cx, y >= cy), BL=2 (x < cx, y < cy), BR=3 (x >= cx,
 * y < cy). A split node always has all four children, some of which may be empty leaves.
 *
 * Layout. Nodes are stored breadth-first: the root is node 0, then every node of level 1, then
 * level 2, ...; the four children of a node are consecutive, in quadrant order, and the children
 * of an earlier node come before those of a later one. The points are reordered so that every
 * node's points are the contiguous range [begin, end); inside a leaf they keep their input order
 * (the reordering is a stable sort by leaf). index[i] is the input position of tree point i.
 * For a given input and options the tree is fully determined: both methods and both backends
 * give byte-identical nodes, points and index.
 *
 * Ownership: a built or loaded tree owns all its arrays; the accessors return pointers that stay
 * valid until grove_quadtree_destroy(). Input arrays are borrowed for the duration of a call.
 */
#ifndef GROVE_QUADTREE_H
#define GROVE_QUADTREE_H

#include "grove/grove.h"
#include "grove/io.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GROVE_QUADTREE_MAX_DEPTH 30

typedef enum grove_quadtree_method {
    GROVE_QUADTREE_MORTON = 0,   /* default: sort by quadrant path, derive the levels by scans */
    GROVE_QUADTREE_RECURSIVE = 1 /* one node at a time, as the seed's dynamic-parallelism build */
} grove_quadtree_method;

typedef struct grove_quadtree_opts {
    int max_depth;  /* deepest level, 0..GROVE_QUADTREE_MAX_DEPTH; default 16 (root is level 0) */
    int min_points; /* a node with <= min_points points is a leaf; >= 0; default 16 */
    grove_quadtree_method method;
    int use_bbox;   /* 0 (default): the points' bounding box; 1: bbox below */
    float bbox[4];  /* xmin, ymin, xmax, ymax: finite, xmin <= xmax, ymin <= ymax, and containing
                       every point (else GROVE_ERR_BAD_INPUT naming the first point outside) */
} grove_quadtree_opts;

typedef struct grove_quadtree_node {
    float xmin, ymin, xmax, ymax; /* the node's box */
    int32_t level;                /* 0 for the root */
    int32_t first_child;          /* index of the first of the 4 children, -1 for a leaf */
    uint32_t begin, end;          /* the node's points: [begin, end) in tree order */
} grove_quadtree_node;

typedef struct grove_quadtree grove_quadtree;

/*! grove_quadtree_default_opts() : fills *opts with the defaults listed above. */
void grove_quadtree_default_opts(grove_quadtree_opts *opts);

/*! grove_quadtree_build() :
 *  Builds the tree of pts (dims 2 or 3; z is ignored) on the context's backend. opts may be NULL
 *  for the defaults. n may be 0 (a single empty root; its box is opts->bbox if given, else all
 *  zeros). The caller owns *out and frees it with grove_quadtree_destroy().
 *  @return GROVE_OK; GROVE_ERR_INVALID_ARG (NULL, options out of range); GROVE_ERR_BAD_INPUT (a
 *  NaN or infinite coordinate, or a point outside opts->bbox: the message names its index);
 *  GROVE_ERR_LIMIT (more than 2^32 - 1 points, or a recursive build that would need more device
 *  launches than the runtime allows); out-of-memory and device failures. */
grove_status grove_quadtree_build(grove_ctx *ctx, const grove_points *pts,
                                  const grove_quadtree_opts *opts, grove_quadtree **out);

/*! grove_quadtree_build_device() :
 *  The same build for n points that are already in the device memory of ctx's GPU (CUDA
 *  contexts only): d_xyz holds n * dims floats, x and y first. The build runs on the context's
 *  stream (grove_ctx_stream()) and waits for no other stream: d_xyz must be complete in that
 *  stream's order (written on it, or synchronized; note that a cudaMemcpy from pageable host
 *  memory can return before its data has landed). The tree stays on the device: its
 *  arrays are allocated through ctx (destroy the tree before the context), grove_quadtree_device()
 *  gives them, and the host accessors return NULL arrays until grove_quadtree_download(). It
 *  returns once the tree is complete. Errors as grove_quadtree_build(), plus
 *  GROVE_ERR_UNSUPPORTED on a CPU context. */
grove_status grove_quadtree_build_device(grove_ctx *ctx, const float *d_xyz, size_t n, int dims,
                                         const grove_quadtree_opts *opts, grove_quadtree **out);

/*! grove_quadtree_download() :
 *  Gives a tree built by grove_quadtree_build_device() its host arrays (a no-op for any other
 *  tree). ctx must be the context that built it. */
grove_status grove_quadtree_download(grove_ctx *ctx, grove_quadtree *t);

/* The device arrays of a tree built on the device (NULLs for a tree that has none). */
typedef struct grove_quadtree_device_view {
    const grove_quadtree_node *nodes; /* num_nodes */
    const float *pts;                 /* 2n floats */
    const uint32_t *index;            /* n */
} grove_quadtree_device_view;
grove_quadtree_device_view grove_quadtree_device(const grove_quadtree *t);

/*! grove_quadtree_destroy() : frees the tree. Accepts NULL. */
void grove_quadtree_destroy(grove_quadtree *t);

/* Accessors; the returned arrays belong to the tree. The arrays are NULL for a tree built by
 * grove_quadtree_build_device() until it is downloaded. */
size_t grove_quadtree_num_nodes(const grove_quadtree *t);
const grove_quadtree_node *grove_quadtree_nodes(const grove_quadtree *t);
size_t grove_quadtree_num_points(const grove_quadtree *t);
const float *grove_quadtree_points(const grove_quadtree *t); /* 2n floats: x0 y0 x1 y1 ... */
const uint32_t *grove_quadtree_index(const grove_quadtree *t); /* n input positions */
/* The options the tree was built with, bbox filled in with the root box (use_bbox = 1). */
void grove_quadtree_get_opts(const grove_quadtree *t, grove_quadtree_opts *opts);

/*! grove_quadtree_save() / grove_quadtree_load() :
 *  A versioned binary file (docs/FORMATS.md). save writes a temporary file beside `path` and
 *  renames it, so a failure never leaves a partial file. load checks the header, the sizes and
 *  the tree's structure, and names what is wrong.
 *  @return GROVE_OK, GROVE_ERR_IO (open/read/write), GROVE_ERR_BAD_INPUT (not a grove quadtree
 *  file, an unsupported version, truncated or inconsistent contents), out of memory. */
grove_status grove_quadtree_save(grove_ctx *ctx, const grove_quadtree *t, const char *path);
grove_status grove_quadtree_load(grove_ctx *ctx, const char *path, grove_quadtree **out);

/* Results of a batch of box queries, in compressed rows: the matches of query q are
 * indices[offsets[q] .. offsets[q+1]-1], input positions in ascending order. Owned by the struct;
 * free with grove_query_result_free(). */
typedef struct grove_query_result {
    size_t num_queries;
    uint64_t *offsets; /* num_queries + 1 entries */
    uint32_t *indices;
} grove_query_result;

void grove_query_result_free(grove_query_result *r); /* accepts NULL and zeroed structs */

/*! grove_quadtree_query_boxes() :
 *  For each of nq boxes (xmin, ymin, xmax, ymax; 4 floats each) finds every point with
 *  xmin <= x <= xmax and ymin <= y <= ymax. *out is overwritten (zeroed on failure).
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG (a NULL pointer, a NaN box coordinate: the message
 *  names the query), out of memory, device failures. */
grove_status grove_quadtree_query_boxes(grove_ctx *ctx, const grove_quadtree *t,
                                        const float *boxes, size_t nq, grove_query_result *out);

/*! grove_quadtree_knn() :
 *  For each of nq query points (x, y) finds the k nearest tree points by Euclidean distance,
 *  nearest first; equal distances are ordered by smaller input position. Squared distances are
 *  computed in double from the float coordinates, identically on every backend. Writes nq*k input
 *  positions to indices and, if dist2 is not NULL, nq*k squared distances; where the tree has
 *  fewer than k points the rest of a row is UINT32_MAX and INFINITY.
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG (NULL, k < 1, a non-finite query point), ... */
grove_status grove_quadtree_knn(grove_ctx *ctx, const grove_quadtree *t, const float *queries,
                                size_t nq, int k, uint32_t *indices, double *dist2);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_QUADTREE_H */
