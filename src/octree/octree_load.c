/*
 * octree_load.c - grove_octree_load(): reads grove.octree (written by octree_potree.c) back and
 * checks it as thoroughly as a build's output, so that a loaded tree is as good as a built one.
 * docs/FORMATS.md ("grove.octree") has the layout.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "octree_files.h"
#include "octree_internal.h"

/* ---- grove.octree: load ---- */

static double get_f64(const unsigned char *b)
{
    uint64_t u = grove__get64(b);
    double v;
    memcpy(&v, &u, 8);
    return v;
}

static void free_tree(grove_octree *t)
{
    if (!t) return;
    free(t->nodes);
    free(t->index);
    free(t->xyz);
    free(t);
}

static grove_status bad(grove_ctx *ctx, const char *path, const char *what, size_t i)
{
    return grove__error(ctx, GROVE_ERR_BAD_INPUT, "%s: node %zu: %s", path, i, what);
}

/* The header's options and cube. */
static grove_status check_header(grove_ctx *ctx, const char *path, const grove_octree *t)
{
    const grove_octree_opts *o = &t->opts;
    int g = 0;
    while (g < 11 && (1 << g) < o->lod_grid) g++;
    if (o->max_points < 1 || o->batch < 1 ||
        (o->lod_grid != 0 && (o->lod_grid < 2 || o->lod_grid > 1024 || (1 << g) != o->lod_grid)) ||
        o->max_depth < 0 || o->max_depth > GROVE_OCTREE_BITS - (o->lod_grid ? g : 0))
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: header: options out of range (max_points %u, batch %zu, "
                            "max_depth %d, lod_grid %d)",
                            path, o->max_points, o->batch, o->max_depth, o->lod_grid);
    for (int a = 0; a < 3; a++)
        if (!isfinite(t->lo[a]))
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: header: the cube's corner is not finite", path);
    if (!(t->side > 0) || !isfinite(t->side) ||
        t->to_grid != (double)(1u << GROVE_OCTREE_BITS) / t->side)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: header: the cube's side %.17g is not finite and positive, or the "
                            "grid scale %.17g is not 2^30 / side",
                            path, t->side, t->to_grid);
    if (t->depth < 0 || t->depth > o->max_depth)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT, "%s: header: depth %d is out of range 0..%d",
                            path, t->depth, o->max_depth);
    return GROVE_OK;
}

/* The nodes: breadth-first layout, children in ascending octant, cells, the split rule, entry
 * ranges concatenated in node order, totals. */
static grove_status check_nodes(grove_ctx *ctx, const char *path, const grove_octree *t)
{
    const grove_octree_node *nd = t->nodes;
    const grove_octree_opts *o = &t->opts;
    size_t nn = t->num_nodes, next = 1;
    int deepest = 0;
    uint64_t leaf_points = 0;
    if (nd[0].depth != 0 || nd[0].octant != 0 || nd[0].cell[0] || nd[0].cell[1] || nd[0].cell[2])
        return bad(ctx, path, "the root must have depth 0, octant 0 and cell (0, 0, 0)", 0);
    if (nd[0].total != t->n)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: node 0 (the root) holds %llu points, the header says %zu", path,
                            (unsigned long long)nd[0].total, t->n);
    for (size_t i = 0; i < nn; i++) {
        const grove_octree_node *p = &nd[i];
        uint64_t want_begin = i ? nd[i - 1].end : 0;
        int split = p->depth < o->max_depth && p->total > o->max_points;
        for (int k = 0; k < 5; k++)
            if (p->pad[k]) return bad(ctx, path, "padding bytes must be 0", i);
        if (i && i >= next) return bad(ctx, path, "it is not the child of any earlier node", i);
        if (p->begin != want_begin || p->end < p->begin || p->end > t->num_entries)
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: node %zu: entries [%llu, %llu) do not follow the previous "
                                "node's (which end at %llu) within the %zu entries",
                                path, i, (unsigned long long)p->begin, (unsigned long long)p->end,
                                (unsigned long long)want_begin, t->num_entries);
        deepest = p->depth > deepest ? p->depth : deepest;
        if (!p->child_mask) {
            if (p->first_child != UINT32_MAX)
                return bad(ctx, path, "a leaf (no child octants) must have first_child UINT32_MAX",
                           i);
            if (split)
                return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                    "%s: node %zu is a leaf with %llu points at depth %d, but "
                                    "max_points %u and max_depth %d require a split",
                                    path, i, (unsigned long long)p->total, p->depth, o->max_points,
                                    o->max_depth);
            if (p->end - p->begin != p->total)
                return bad(ctx, path, "a leaf's total differs from its entry count", i);
            leaf_points += p->total;
            continue;
        }
        if (!split)
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: node %zu is split but holds %llu points at depth %d "
                                "(max_points %u, max_depth %d)",
                                path, i, (unsigned long long)p->total, p->depth, o->max_points,
                                o->max_depth);
        if (p->first_child != next)
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: node %zu: first_child is %u, the breadth-first layout puts "
                                "its children at %zu",
                                path, i, p->first_child, next);
        if ((uint64_t)grove__ot_popcount8(p->child_mask) > nn - next)
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: node %zu: its children lie beyond the %zu nodes", path, i, nn);
        {
            uint64_t sum = 0,
                     cap = o->lod_grid ? (uint64_t)o->lod_grid * o->lod_grid * o->lod_grid : 0;
            if (p->end - p->begin > cap || p->end - p->begin > p->total)
                return bad(ctx, path,
                           "its sample holds more entries than lod_grid^3 voxels or its "
                           "points",
                           i);
            for (unsigned oc = 0; oc < 8; oc++) {
                const grove_octree_node *c;
                if (!(p->child_mask >> oc & 1u)) continue;
                c = &nd[next];
                if (c->depth != p->depth + 1 || c->octant != oc || c->total == 0 ||
                    c->cell[0] != (p->cell[0] << 1 | (oc & 1u)) ||
                    c->cell[1] != (p->cell[1] << 1 | (oc >> 1 & 1u)) ||
                    c->cell[2] != (p->cell[2] << 1 | (oc >> 2 & 1u)))
                    return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                        "%s: node %zu: its depth, octant, cell or total does not "
                                        "make it the non-empty octant %u of node %zu",
                                        path, next, oc, i);
                sum += c->total;
                next++;
            }
            if (sum != p->total)
                return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                    "%s: node %zu: its total %llu is not the sum of its "
                                    "children's, %llu",
                                    path, i, (unsigned long long)p->total, (unsigned long long)sum);
        }
    }
    if (next != nn)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: the header announces %zu nodes, the tree has %zu", path, nn, next);
    if (nd[nn - 1].end != t->num_entries)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: the nodes' entries end at %llu, the header announces %zu", path,
                            (unsigned long long)nd[nn - 1].end, t->num_entries);
    if (deepest != t->depth)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: the deepest node is at depth %d, the header says %d", path,
                            deepest, t->depth);
    (void)leaf_points; /* equal to the root's total by the sums above */
    return GROVE_OK;
}

/* Point (qa, ia) comes before point (qb, ib) in the points' Morton order (octree.h). */
static int morton_before(const uint32_t qa[3], uint32_t ia, const uint32_t qb[3], uint32_t ib)
{
    uint64_t ha = grove__ot_morton_hi(qa), hb = grove__ot_morton_hi(qb);
    uint32_t la = grove__ot_morton_lo(qa), lb = grove__ot_morton_lo(qb);
    if (ha != hb) return ha < hb;
    if (la != lb) return la < lb;
    return ia < ib;
}

/* The entries: every point in exactly one leaf, inside its node's cell; every node's entries
 * in the points' Morton order (or, in older files, ascending input order); every sample entry a
 * copy of a point of its subtree. */
static grove_status check_entries(grove_ctx *ctx, const char *path, const grove_octree *t)
{
    size_t n = t->n;
    uint64_t *where = (uint64_t *)malloc((n ? n : 1) * sizeof *where);
    grove_status st = GROVE_OK;
    if (!where) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) where[i] = UINT64_MAX;
    for (int pass = 0; pass < 2 && st == GROVE_OK; pass++)
        for (size_t i = 0; i < t->num_nodes && st == GROVE_OK; i++) {
            const grove_octree_node *p = &t->nodes[i];
            int leaf = p->child_mask == 0, sh = GROVE_OCTREE_BITS - p->depth;
            uint32_t qp[3] = {0, 0, 0}, qc[3] = {0, 0, 0}, vp = 0; /* the previous entry's */
            /* Morton order (octree.h); files written before 2026-11-23 list a node's entries
             * in ascending input order, which is accepted too (the queries need neither) */
            int in_morton = 1, in_input = 1;
            if (leaf != (pass == 0)) continue; /* leaves first: the samples refer to them */
            for (uint64_t e = p->begin; e < p->end; e++) {
                uint32_t v = t->index[e];
                const double *x = t->xyz + 3 * e;
                for (int a = 0; a < 3; a++) {
                    uint32_t q = grove__ot_quantize(x[a], t->lo[a], t->to_grid);
                    if (!(x[a] - t->lo[a] >= 0.0 && x[a] - t->lo[a] <= t->side) ||
                        q >> sh != p->cell[a]) {
                        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                          "%s: node %zu: entry %llu (point %u) is not finite or "
                                          "lies outside the node's cube",
                                          path, i, (unsigned long long)e, v);
                        break;
                    }
                    qc[a] = q;
                }
                if (st != GROVE_OK) break;
                if (e > p->begin) {
                    in_morton = in_morton && morton_before(qp, vp, qc, v);
                    in_input = in_input && vp < v;
                }
                if (v >= n || (!in_morton && !in_input)) {
                    st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                      "%s: node %zu: entry %llu: input position %u is out of "
                                      "range (%zu points) or not after the previous entry in "
                                      "Morton order",
                                      path, i, (unsigned long long)e, v, n);
                    break;
                }
                memcpy(qp, qc, sizeof qp);
                vp = v;
                if (st != GROVE_OK) break;
                if (leaf) {
                    if (where[v] != UINT64_MAX) {
                        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                          "%s: point %u appears twice in the leaves "
                                          "(entries %llu and %llu)",
                                          path, v, (unsigned long long)where[v],
                                          (unsigned long long)e);
                        break;
                    }
                    where[v] = e;
                } else if (memcmp(x, t->xyz + 3 * where[v], 3 * sizeof *x) != 0) {
                    st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                      "%s: node %zu: sample entry %llu (point %u) differs from "
                                      "the point's leaf entry",
                                      path, i, (unsigned long long)e, v);
                    break;
                }
            }
        }
    free(where);
    return st;
}

grove_status grove_octree_load(grove_ctx *ctx, const char *dir, grove_octree **out)
{
    static const char fn[] = "grove_octree_load";
    unsigned char h[GROVE__OT_HEADER];
    grove_status st = GROVE_OK;
    grove_octree *t = NULL;
    unsigned char *nb = NULL;
    uint64_t n, nn, ne, want, size;
    char *path = NULL;
    FILE *f = NULL;
    int le = grove__host_is_le();

    GROVE_TRY(grove__check_ctx(ctx));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!dir) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: dir is NULL", fn);
    if (!(path = grove__ot_join(dir, "grove.octree")))
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    GROVE_TRY_END(st, grove__binfile_open(ctx, path, GROVE__OT_MAGIC, "octree", GROVE__OT_VERSION,
                                          h, sizeof h, &f, &size));
    for (size_t k = 104; k <= GROVE__OT_HEADER; k++)
        if (k == GROVE__OT_HEADER ? grove__get32(h + 12) != 0 : h[k] != 0) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: header: reserved bytes (12..15 and 104..127) must be 0", path);
            goto _end;
        }
    n = grove__get64(h + 16);
    nn = grove__get64(h + 24);
    ne = grove__get64(h + 32);
    /* entries: the points plus at most 2^30 sample entries per node; 2^58 keeps the size
     * below from overflowing */
    if (n > GROVE_OCTREE_MAX_N || nn < 1 || nn >= UINT32_MAX || ne < n ||
        ne > ((uint64_t)1 << 58)) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: header: counts out of range (%llu points, %llu nodes, %llu "
                          "entries)",
                          path, (unsigned long long)n, (unsigned long long)nn,
                          (unsigned long long)ne);
        goto _end;
    }
    want = GROVE__OT_HEADER + GROVE__OT_NODE * nn + 28 * ne;
    if (size != want) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          size < want ? "%s: truncated: %llu bytes, the header announces %llu "
                                        "(%llu nodes, %llu entries)"
                                      : "%s: %llu bytes, the header announces %llu (%llu nodes, "
                                        "%llu entries): trailing data",
                          path, (unsigned long long)size, (unsigned long long)want,
                          (unsigned long long)nn, (unsigned long long)ne);
        goto _end;
    }
    t = (grove_octree *)calloc(1, sizeof *t);
    if (!t) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        goto _end;
    }
    t->n = (size_t)n;
    t->num_nodes = (size_t)nn;
    t->num_entries = (size_t)ne;
    t->depth = (int)(int32_t)grove__get32(h + 40);
    t->opts.max_points = grove__get32(h + 44);
    t->opts.batch = (size_t)grove__get64(h + 48);
    t->opts.max_depth = (int)(int32_t)grove__get32(h + 56);
    t->opts.lod_grid = (int)(int32_t)grove__get32(h + 60);
    for (int a = 0; a < 3; a++) t->lo[a] = get_f64(h + 64 + 8 * a);
    t->side = get_f64(h + 88);
    t->to_grid = get_f64(h + 96);
    GROVE_TRY_END(st, check_header(ctx, path, t));
    t->nodes = (grove_octree_node *)malloc((size_t)nn * sizeof *t->nodes);
    t->index = (uint32_t *)malloc((ne ? (size_t)ne : 1) * sizeof *t->index);
    t->xyz = (double *)malloc((ne ? 3 * (size_t)ne : 1) * sizeof *t->xyz);
    nb = (unsigned char *)malloc((size_t)nn * GROVE__OT_NODE);
    if (!t->nodes || !t->index || !t->xyz || !nb) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "%s: out of memory for %llu nodes and %llu entries", path,
                          (unsigned long long)nn, (unsigned long long)ne);
        goto _end;
    }
    GROVE_TRY_END(st, grove__read_words(ctx, path, f, nb, (size_t)nn * GROVE__OT_NODE, 1, 1));
    for (size_t i = 0; i < nn; i++) {
        const unsigned char *b = nb + GROVE__OT_NODE * i;
        grove_octree_node *p = &t->nodes[i];
        p->begin = grove__get64(b);
        p->end = grove__get64(b + 8);
        p->total = grove__get64(b + 16);
        p->first_child = grove__get32(b + 24);
        for (int a = 0; a < 3; a++) p->cell[a] = grove__get32(b + 28 + 4 * a);
        p->depth = b[40];
        p->child_mask = b[41];
        p->octant = b[42];
        memcpy(p->pad, b + 43, 5);
    }
    GROVE_TRY_END(st, grove__read_words(ctx, path, f, t->index, (size_t)ne, 4, le));
    GROVE_TRY_END(st, grove__read_words(ctx, path, f, t->xyz, 3 * (size_t)ne, 8, le));
    GROVE_TRY_END(st, check_nodes(ctx, path, t));
    GROVE_TRY_END(st, check_entries(ctx, path, t));
    *out = t;
    t = NULL;
_end:
    if (f) fclose(f);
    free(nb);
    free(path);
    free_tree(t);
    return st;
}
