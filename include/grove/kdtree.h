/*
 * kdtree.h - k-d trees for points in 1 to 8 dimensions (float or double coordinates): build after
 * Zhou et al. 2008, exact batched k-nearest-neighbour and radius queries, save and load.
 *
 * The tree (docs/kdtree.md has the exact rules). Every node owns a contiguous range of the
 * points in tree order and records the tight box of those points (exact min and max per axis,
 * +INFINITY / -INFINITY for an empty node). An inner node splits its range at a plane
 * x[axis] = split: its left child holds the points with x[axis] < split, its right child the
 * others, each in the order they had in the parent (the partitions are stable, so inside a leaf
 * the points are in ascending input order). Three kinds of split make the tree:
 *   large nodes (more than 64 points), breadth-first: if more than 25% of the node's cell (the
 *     region its ancestors' planes leave it) is empty beyond its tight box on one side of an
 *     axis, that empty space is cut off (one child empty); else the node splits at the midpoint
 *     of its tight box on the box's longest axis;
 *   small nodes (at most 64 points, more than leaf_size): the plane at a point coordinate with
 *     the least cost, a volume heuristic suited to nearest-neighbour queries;
 *   leaves: at most leaf_size points, or more points that are all equal (nothing can split them).
 * Every decision is a function of double arithmetic without fused multiply-adds, ties broken by
 * axis and position, so a given input and options always give the same bytes whatever the
 * number of threads (and, later, whatever the backend).
 *
 * Layout. Nodes are stored in preorder: the root is node 0, a node's left child is the next
 * node and its right child is node `right`. bounds holds 2 * dims doubles per node (lo[dims],
 * hi[dims]). The points are stored in tree order in the input's coordinate type, and index[i]
 * is the input position of tree point i.
 *
 * Distances are Euclidean; the queries return SQUARED distances, computed in double from the
 * stored coordinates as sum over d of (x[d] - q[d])^2, each difference, square and partial sum
 * rounded separately in axis order (no FMA). Queries are exact: ties in distance are ordered by
 * smaller input position.
 *
 * Ownership: a built or loaded tree owns all its arrays; accessors return pointers that stay
 * valid until grove_kdtree_destroy(). Inputs are borrowed for the duration of a call.
 *
 * Backends: on a CUDA context the build and the queries run on the GPU and give the CPU
 * backend's bytes (same tree, same neighbours, same squared distances). The calls below take and
 * return host memory; a tree with host arrays only is uploaded for each query call.
 *
 * Device-resident trees (CUDA contexts): grove_kdtree_build_device() builds from points in device
 * memory and keeps the tree's arrays on the device, grove_kdtree_knn_device() answers queries in
 * device memory into device outputs, grove_kdtree_download() gives such a tree its host arrays.
 */
#ifndef GROVE_KDTREE_H
#define GROVE_KDTREE_H

#include "grove/grove.h"
#include "grove/io.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GROVE_KDTREE_MAX_DIMS 8
#define GROVE_KDTREE_MAX_LEAF 64 /* the small-node threshold of the build */

typedef enum grove_coord_type {
    GROVE_COORD_F32 = 0, /* float */
    GROVE_COORD_F64 = 1  /* double */
} grove_coord_type;

/* n points of `dims` (1..GROVE_KDTREE_MAX_DIMS) interleaved coordinates of type `type`:
 * x0 y0 [z0 ...] x1 y1 ... Borrowed; data may be NULL when n == 0. */
typedef struct grove_coords {
    const void *data;
    size_t n;
    int dims;
    grove_coord_type type;
} grove_coords;

typedef struct grove_kdtree_opts {
    int leaf_size; /* 1..GROVE_KDTREE_MAX_LEAF; default 12. A node with at most leaf_size points
                      is a leaf. */
} grove_kdtree_opts;

typedef enum grove_kdtree_split_kind {
    GROVE_KDTREE_LEAF = 0,
    GROVE_KDTREE_MEDIAN = 1, /* large node: midpoint of the tight box's longest axis */
    GROVE_KDTREE_EMPTY = 2,  /* large node: empty space cut off; one child is empty */
    GROVE_KDTREE_COST = 3    /* small node: least-cost plane */
} grove_kdtree_split_kind;

typedef struct grove_kdtree_node {
    uint64_t begin, end; /* the node's points: [begin, end) in tree order */
    uint64_t right;      /* preorder index of the right child; the left child is this node + 1;
                            0 for a leaf */
    double split;        /* left child: x[axis] < split; right child: x[axis] >= split */
    int32_t axis;        /* 0..dims-1; -1 for a leaf */
    int32_t kind;        /* a grove_kdtree_split_kind */
} grove_kdtree_node;

typedef struct grove_kdtree grove_kdtree;

/*! grove_kdtree_default_opts() : fills *opts with the defaults listed above. */
void grove_kdtree_default_opts(grove_kdtree_opts *opts);

/*! grove_kdtree_build() :
 *  Builds the tree of pts (borrowed; the points are copied into the tree in tree order, in
 *  pts->type). opts may be NULL for the defaults. n may be 0 (a single empty leaf). The caller
 *  owns *out and frees it with grove_kdtree_destroy().
 *  @return GROVE_OK; GROVE_ERR_INVALID_ARG (NULL, dims out of 1..8, bad type, leaf_size out of
 *  range); GROVE_ERR_BAD_INPUT (a NaN or infinite coordinate: the message names the point);
 *  GROVE_ERR_OUT_OF_MEMORY. */
grove_status grove_kdtree_build(grove_ctx *ctx, const grove_coords *pts,
                                const grove_kdtree_opts *opts, grove_kdtree **out);

/*! grove_kdtree_build_points() : grove_kdtree_build() for a grove_points set (float). */
grove_status grove_kdtree_build_points(grove_ctx *ctx, const grove_points *pts,
                                       const grove_kdtree_opts *opts, grove_kdtree **out);

/*! grove_kdtree_destroy() : frees the tree. Accepts NULL. */
void grove_kdtree_destroy(grove_kdtree *t);

/* Accessors; the arrays belong to the tree (NULL where there is nothing, e.g. points of an
 * empty tree). */
size_t grove_kdtree_num_nodes(const grove_kdtree *t);
const grove_kdtree_node *grove_kdtree_nodes(const grove_kdtree *t);
const double *grove_kdtree_bounds(const grove_kdtree *t); /* 2 * dims per node: lo..., hi... */
size_t grove_kdtree_num_points(const grove_kdtree *t);
int grove_kdtree_dims(const grove_kdtree *t);
grove_coord_type grove_kdtree_coord_type(const grove_kdtree *t);
const void *grove_kdtree_points(const grove_kdtree *t);    /* n * dims, tree order, coord type */
const uint64_t *grove_kdtree_index(const grove_kdtree *t); /* n input positions */
size_t grove_kdtree_depth(const grove_kdtree *t);          /* deepest node; the root is 0 */
void grove_kdtree_get_opts(const grove_kdtree *t, grove_kdtree_opts *opts);

/*! grove_kdtree_knn() :
 *  For each of queries->n points (queries->dims must equal the tree's; either type) finds the k
 *  nearest tree points, nearest first, equal squared distances by smaller input position.
 *  Writes n*k input positions to indices (row q for query q, whatever order the queries are
 *  processed in) and, if dist2 is not NULL, n*k squared distances. Where the tree has fewer
 *  than k points the rest of a row is UINT64_MAX and INFINITY. Memory: about 16 * min(k, n)
 *  bytes per thread besides the outputs.
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG (NULL, k < 1, dims mismatch, a non-finite query: the
 *  message names it, n * k overflowing), GROVE_ERR_OUT_OF_MEMORY. */
grove_status grove_kdtree_knn(grove_ctx *ctx, const grove_kdtree *t, const grove_coords *queries,
                              int k, uint64_t *indices, double *dist2);

/* Results of a batch of radius queries, in compressed rows: the matches of query q are entries
 * offsets[q] .. offsets[q+1]-1 of indices (input positions) and dist2 (squared distances),
 * sorted by squared distance, then input position. Owned by the struct; free with
 * grove_kdtree_result_free(). */
typedef struct grove_kdtree_result {
    size_t num_queries;
    uint64_t *offsets; /* num_queries + 1 entries */
    uint64_t *indices;
    double *dist2;
} grove_kdtree_result;

void grove_kdtree_result_free(grove_kdtree_result *r); /* accepts NULL and zeroed structs */

/*! grove_kdtree_radius() :
 *  For each query finds every tree point whose squared distance is <= r * r (the product
 *  rounded in double), sorted as above. max_per_query > 0 keeps only the first max_per_query of
 *  each row (the nearest); 0 means no cap. r must be finite and >= 0. *out is overwritten
 *  (zeroed on failure).
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG (NULL, bad r, dims mismatch, a non-finite query),
 *  GROVE_ERR_OUT_OF_MEMORY. */
grove_status grove_kdtree_radius(grove_ctx *ctx, const grove_kdtree *t, const grove_coords *queries,
                                 double r, size_t max_per_query, grove_kdtree_result *out);

/* ---- device-resident trees and queries (CUDA contexts) ---- */

/*! grove_kdtree_build_device() :
 *  grove_kdtree_build() for points already in the device memory of ctx's GPU: d_pts describes
 *  them as grove_coords do (d_pts itself is a host struct; d_pts->data is a device pointer to
 *  n * dims coordinates of d_pts->type). The build runs on the context's stream
 *  (grove_ctx_stream()) and waits for no other stream: the data must be complete in that
 *  stream's order. The tree's arrays stay on the device, allocated through ctx (destroy the tree
 *  before the context): grove_kdtree_device() gives them, and the host accessors
 *  grove_kdtree_nodes(), _bounds(), _points() and _index() return NULL until
 *  grove_kdtree_download(); the counts, dims, type, depth and options are available at once. The
 *  tree is the one grove_kdtree_build() makes of the same points, byte for byte. Returns once
 *  the tree is complete. At most 2^32 - 1 points (the CUDA build's limit). grove_kdtree_knn()
 *  and grove_kdtree_radius() on a CUDA context use the device arrays as they are; on a CPU
 *  context, and grove_kdtree_save(), need the host arrays (GROVE_ERR_INVALID_ARG before the
 *  download).
 *  @return as grove_kdtree_build() (a non-finite coordinate: GROVE_ERR_BAD_INPUT naming the
 *  point), plus GROVE_ERR_UNSUPPORTED on a CPU context or a build without CUDA, GROVE_ERR_LIMIT
 *  above 2^32 - 1 points, device failures. */
grove_status grove_kdtree_build_device(grove_ctx *ctx, const grove_coords *d_pts,
                                       const grove_kdtree_opts *opts, grove_kdtree **out);

/*! grove_kdtree_download() :
 *  Gives a tree built by grove_kdtree_build_device() its host arrays (nodes, bounds, points,
 *  index), after which every call of this header accepts it on any backend and the tree keeps
 *  its device arrays too. A no-op for a tree that already has host arrays. ctx must be the
 *  context that built it (or one of the same device).
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG (NULL), GROVE_ERR_OUT_OF_MEMORY, device failures. */
grove_status grove_kdtree_download(grove_ctx *ctx, grove_kdtree *t);

/* The device arrays of a tree built by grove_kdtree_build_device(), the same layout as the host
 * accessors' (NULLs for a tree that has none, and points/index of a tree of 0 points). They
 * belong to the tree. */
typedef struct grove_kdtree_device_view {
    const grove_kdtree_node *nodes; /* num_nodes, preorder */
    const double *bounds;           /* 2 * dims per node */
    const void *points;             /* n * dims coordinates of the tree's type, tree order */
    const uint64_t *index;          /* n input positions */
} grove_kdtree_device_view;
grove_kdtree_device_view grove_kdtree_device(const grove_kdtree *t);

/*! grove_kdtree_knn_device() :
 *  grove_kdtree_knn() with the queries and the outputs in device memory (CUDA contexts only):
 *  d_queries->data is a device pointer to d_queries->n queries (dims the tree's, either type);
 *  d_indices (n * k uint64) and d_dist2 (n * k doubles, or NULL) are device pointers, row q
 *  for query q. The results are grove_kdtree_knn()'s bytes, padding included. t may be any
 *  tree: one built by grove_kdtree_build_device() is used where it lies; a tree with host arrays
 *  only (built on the CPU, or loaded) is uploaded for the call. The queries are ordered on the
 *  GPU (Morton codes in the root box, radix sort) and every row is written in the caller's
 *  order. Runs on the context's stream (inputs must be complete in its order) and returns once
 *  the outputs are written. The queries are checked before anything is written; on another
 *  failure the outputs' contents are unspecified. Device scratch: about 40 + 8 * dims bytes per
 *  query plus the radix sort's (8 * k more for k > 32 without d_dist2, 16 per level beyond 46
 *  for deeper trees), in batches of at most 2^24 queries, plus 32 bytes per tree node for
 *  2 <= k <= 32 on 2-D and 3-D trees (the warp search's node records, made once per call).
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG (NULL, k < 1, dims mismatch, a non-finite query: the
 *  message names it, n * k overflowing), GROVE_ERR_UNSUPPORTED (a CPU context, or a build
 *  without CUDA), out of memory, device failures. */
grove_status grove_kdtree_knn_device(grove_ctx *ctx, const grove_kdtree *t,
                                     const grove_coords *d_queries, int k, uint64_t *d_indices,
                                     double *d_dist2);

/*! grove_kdtree_save() / grove_kdtree_load() :
 *  A versioned little-endian binary file (docs/kdtree.md, "File format"). save writes a
 *  temporary file beside `path` and renames it. load checks the header, the sizes and the
 *  tree's structure (ranges, preorder links, boxes, split rule, index a permutation), and names
 *  what is wrong.
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG (NULL), GROVE_ERR_IO, GROVE_ERR_BAD_INPUT (not a
 *  grove k-d tree file, unsupported version, truncated or inconsistent), out of memory. */
grove_status grove_kdtree_save(grove_ctx *ctx, const grove_kdtree *t, const char *path);
grove_status grove_kdtree_load(grove_ctx *ctx, const char *path, grove_kdtree **out);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_KDTREE_H */
