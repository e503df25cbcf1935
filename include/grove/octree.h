/*
 * octree.h - octrees for large 3-D point clouds: a batched build with warp-aggregated counting
 * and node spilling (CPU and GPU), level-of-detail samples in inner nodes, Potree 2.0 output,
 * box and radius queries.
 *
 * The tree (docs/octree.md has the exact rules). The cube is the bounding box of the points
 * made a cube: its low corner is the box's low corner, its side the box's largest extent (1 when
 * every point is the same). Each point gets integer coordinates on a 2^30 grid over the cube,
 *     q[a] = min(floor((x[a] - lo[a]) * (2^30 / side)), 2^30 - 1)    (double, no FMA),
 * and everything below is a function of q, so the tree is the same on every backend, whatever
 * the batch size and the thread timing:
 *   - a node at depth d is the cell q >> (30 - d) (per axis); its child octant is
 *     o = bx | by << 1 | bz << 2, b = bit 29 - d of q;
 *   - the root always exists; a node at depth < max_depth whose subtree holds more than
 *     max_points points is an inner node, and its non-empty octants are its children; every
 *     other node is a leaf (so a leaf at max_depth may hold more than max_points);
 *   - a leaf's entries are its points;
 *   - an inner node's entries are its level-of-detail sample: over a lod_grid^3 voxel grid of
 *     its cube, one point per occupied voxel, the one nearest the voxel's centre (measured on a
 *     sub-grid of at most 2^15 steps per voxel side, in exact integer arithmetic), ties by
 *     smaller input position. lod_grid 0: inner nodes have no entries;
 *   - a node's entries are in the points' Morton order: ascending by the Morton code of q (the
 *     octant digits o of levels 0 to 29, level 0 first: 90 bits), points with equal q by
 *     smaller input position. (In that order every node's points are one range, so the GPU
 *     places all entries in one pass.)
 * Nodes are stored breadth-first; a node's children are consecutive, in ascending octant order.
 * Entries of all nodes are concatenated in node order; each entry has its input position and
 * its coordinates (double, as given), so queries need nothing else.
 *
 * Ownership: trees own their arrays; accessors return pointers valid until
 * grove_octree_destroy(). Inputs are borrowed for the call.
 */
#ifndef GROVE_OCTREE_H
#define GROVE_OCTREE_H

#include "grove/grove.h"
#include "grove/io.h"
#include "grove/quadtree.h" /* grove_query_result */

#ifdef __cplusplus
extern "C" {
#endif

#define GROVE_OCTREE_BITS 30          /* grid bits per axis */
#define GROVE_OCTREE_MAX_N 4294967295u /* input positions are uint32 */

typedef struct grove_octree_opts {
    uint32_t max_points; /* a node with more points splits (unless at max_depth); >= 1; 50000 */
    size_t batch;        /* points per batch, >= 1; default 8,388,608. Does not change the tree. */
    int max_depth;       /* 0 .. GROVE_OCTREE_BITS - log2(lod_grid); default 20 */
    int lod_grid;        /* voxels per side of the inner nodes' sample: 0 (no samples) or a power
                            of two 2..1024; default 128 */
    /* Called after each batch from the calling thread (may be NULL): points done of total. */
    void (*progress)(void *user, uint64_t done, uint64_t total);
    void *progress_user;
} grove_octree_opts;

typedef struct grove_octree_node {
    uint64_t begin, end;  /* entries [begin, end): a leaf's points or an inner node's sample */
    uint64_t total;       /* points in the subtree */
    uint32_t first_child; /* index of the first child; UINT32_MAX for a leaf */
    uint32_t cell[3];     /* the node's cube: lo + cell * side / 2^depth, side / 2^depth wide */
    uint8_t depth;        /* the root is 0 */
    uint8_t child_mask;   /* bit o set when octant o has a child */
    uint8_t octant;       /* its octant in the parent (0 for the root) */
    uint8_t pad[5];       /* zero */
} grove_octree_node;

/* Timings of the last build (milliseconds, wall clock of the calling thread; on CUDA each phase
 * ends with a stream synchronization). */
typedef struct grove_octree_stats {
    double ms_total, ms_count, ms_place, ms_lod;
    uint32_t batches, spill_rounds; /* count passes that split nodes, over all batches */
    /* grove_octree_build() on a CUDA context, where device memory is short (the GPU's, or the
     * context's device_mem_limit): 0 = every phase ran on the GPU; 1 = the points were counted
     * on the GPU (about 16 bytes a point held there) but the Morton order, the samples and the
     * placement did not fit and ran on the host; 2 = not even the counting fit and the whole
     * build ran on the CPU backend. The tree is the same in every case. Always 0 on the CPU
     * backend and for grove_octree_build_device(), which fails instead. */
    uint32_t host_fallback;
} grove_octree_stats;

typedef struct grove_octree grove_octree;

/*! grove_octree_default_opts() : fills *opts with the defaults listed above. */
void grove_octree_default_opts(grove_octree_opts *opts);

/*! grove_octree_check_opts() :
 *  Checks opts (borrowed; NULL means the defaults) as grove_octree_build() does, each field and
 *  the fields together (max_depth against lod_grid), so that a caller can refuse bad options
 *  before it reads any points. Does no other work; any context can be passed.
 *  @return GROVE_OK, or GROVE_ERR_INVALID_ARG with a message naming the field (and a NULL or
 *  failed context). */
grove_status grove_octree_check_opts(grove_ctx *ctx, const grove_octree_opts *opts);

/*! grove_octree_build() :
 *  Builds the tree of n points (xyz: 3n doubles, host memory, borrowed). opts may be NULL.
 *  n may be 0 (a root leaf with no entries; the cube is the unit cube at the origin). On CUDA
 *  the points stream through the GPU a batch at a time and the tree comes back to the host.
 *  stats may be NULL.
 *  @return GROVE_OK; GROVE_ERR_INVALID_ARG (NULL, an option out of range: the message names
 *  it); GROVE_ERR_BAD_INPUT (a NaN or infinite coordinate: the message names the point);
 *  GROVE_ERR_LIMIT (n > GROVE_OCTREE_MAX_N); out of memory; device failures. */
grove_status grove_octree_build(grove_ctx *ctx, const double *xyz, size_t n,
                                const grove_octree_opts *opts, grove_octree **out,
                                grove_octree_stats *stats);

/*! grove_octree_build_device() :
 *  CUDA backend: builds from points already in device memory (d_xyz, 3n doubles; not
 *  validated: non-finite coordinates give an unspecified tree but no fault). The tree's arrays
 *  stay on the device (the in-memory build the benchmarks time); grove_octree_download() brings
 *  them to the host, which the accessors and the writers need. */
grove_status grove_octree_build_device(grove_ctx *ctx, const double *d_xyz, size_t n,
                                       const grove_octree_opts *opts, grove_octree **out,
                                       grove_octree_stats *stats);

/*! grove_octree_download() : copies a device-built tree's arrays to the host (no-op for a host
 *  tree). */
grove_status grove_octree_download(grove_ctx *ctx, grove_octree *t);

/*! grove_octree_destroy() : frees the tree (host and device arrays). Accepts NULL. */
void grove_octree_destroy(grove_octree *t);

/* Accessors (host arrays; NULL for a device tree not yet downloaded). */
size_t grove_octree_num_nodes(const grove_octree *t);
const grove_octree_node *grove_octree_nodes(const grove_octree *t);
size_t grove_octree_num_points(const grove_octree *t);   /* n */
size_t grove_octree_num_entries(const grove_octree *t);  /* n plus the samples' entries */
const uint32_t *grove_octree_entry_index(const grove_octree *t); /* input positions */
const double *grove_octree_entry_xyz(const grove_octree *t);     /* 3 doubles per entry */
int grove_octree_depth(const grove_octree *t);                   /* deepest node */
void grove_octree_cube(const grove_octree *t, double lo[3], double *side);
void grove_octree_get_opts(const grove_octree *t, grove_octree_opts *opts);

/*! grove_octree_query_boxes() :
 *  For each of nq boxes (x0 y0 z0 x1 y1 z1; 6 doubles each) finds every point with
 *  x0 <= x <= x1, y0 <= y <= y1, z0 <= z <= z1: input positions, ascending, in compressed rows.
 *  *out is overwritten (zeroed on failure). A NaN bound is GROVE_ERR_INVALID_ARG naming the
 *  query; an empty box (x0 > x1) has no matches. */
grove_status grove_octree_query_boxes(grove_ctx *ctx, const grove_octree *t, const double *boxes,
                                      size_t nq, grove_query_result *out);

/*! grove_octree_query_radius() :
 *  For each of nq centres (3 doubles) finds every point whose squared distance, computed in
 *  double as dx*dx + dy*dy + dz*dz (no FMA), is at most r[q]*r[q] (radii: nq doubles >= 0):
 *  input positions, ascending. Same rules as the box query. */
grove_status grove_octree_query_radius(grove_ctx *ctx, const grove_octree *t,
                                       const double *centres, const double *radii, size_t nq,
                                       grove_query_result *out);

/* ---- files ---- */

/*! grove_octree_write_potree() :
 *  Writes the tree to directory dir (created if missing; existing files of these names are
 *  replaced) in the Potree 2.0 format: metadata.json, hierarchy.bin, octree.bin (every node's
 *  entries, positions as int32 with the cloud's LAS scale and offset when it has them, else a
 *  scale fitted to the cube; rgb and intensity when the cloud has them), plus grove.octree,
 *  grove's own copy of the tree for queries (docs/FORMATS.md). cloud gives the attributes by
 *  input position and may be NULL. Each file is written under a temporary name and renamed.
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG (cloud->n differs from the tree's), GROVE_ERR_IO,
 *  out of memory. */
grove_status grove_octree_write_potree(grove_ctx *ctx, const grove_octree *t,
                                       const grove_cloud *cloud, const char *dir);

/*! grove_octree_load() :
 *  Loads the tree from a directory written by grove_octree_write_potree() (its grove.octree).
 *  @return GROVE_OK, GROVE_ERR_IO, GROVE_ERR_BAD_INPUT (not such a file, unsupported version,
 *  truncated or inconsistent: the message says what), out of memory. */
grove_status grove_octree_load(grove_ctx *ctx, const char *dir, grove_octree **out);

/*! grove_octree_export_level() :
 *  Reads the Potree files in dir and collects the points a viewer would draw at level L: the
 *  entries of every node at depth L and of every leaf shallower than L (L >= the tree's depth:
 *  all leaves, i.e. the whole cloud). Positions are decoded from octree.bin; *out is a new
 *  cloud (free with grove_cloud_free()).
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG (L < 0), GROVE_ERR_IO, GROVE_ERR_BAD_INPUT
 *  (inconsistent files), out of memory. */
grove_status grove_octree_export_level(grove_ctx *ctx, const char *dir, int level,
                                       grove_cloud *out);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_OCTREE_H */
