/*
 * octree_check.h - structural validator of a built octree against its input and the exact
 * definition of include/grove/octree.h, written only against the public API so the tests (CPU
 * and GPU) and the demo can share it.
 *
 * NOTE for tools/demo_octree.c (Potree/CLI engineer): you may include this header (the grove
 * target has tests/ on its include path, as for quadtree_check.h) and call
 *     oc_check(tree, xyz, n, 0, msg, sizeof msg, &stats)
 * on the tree of the n input points; it returns 0 when the tree is octree.h's, else 1 with the
 * first problem in msg. full_lod = 1 also recomputes every sample by brute force (it costs
 * about n * depth sorted records: keep it for small inputs).
 *
 * oc_check() verifies, with its own grid arithmetic written from octree.h's formulas:
 *   - the cube: low corner = the points' box low corner (-0 as +0), side = largest extent, 1
 *     when that is 0 (unit cube at the origin when n == 0);
 *   - the layout: node 0 is the root (depth 0, cell 0, octant 0); breadth-first numbering, each
 *     inner node's first_child the next unused index, its children consecutive in ascending
 *     octant order (child_mask bits), each child at depth + 1 with cell = 2 * parent cell + the
 *     octant bits; leaves have first_child UINT32_MAX and mask 0; pad bytes zero; depth
 *     non-decreasing along the array; grove_octree_depth() the deepest node;
 *   - every point descends by its octants to exactly one leaf, whose cell contains it
 *     (q >> (30 - depth) == cell); totals add up (leaf: its points; inner: its children's;
 *     root: n); every node but an empty root is non-empty;
 *   - inner nodes are at depth < max_depth with total > max_points; leaves have total <=
 *     max_points or depth == max_depth;
 *   - entries: node k's [begin, end) follow node k-1's, ending at num_entries; a leaf's entries
 *     are its points in the points' Morton order (the octant digits of q from level 0 to 29
 *     compared one level at a time, equal grid points by input position) with their coordinates
 *     bit for bit;
 *   - an inner node's entries (none when lod_grid is 0): points of its cell in that order,
 *     coordinates bit for bit, at most one per voxel; with full_lod exactly the
 *     winner (smallest (squared sub-grid distance to the voxel centre, input position)) of
 *     every occupied voxel.
 */
#ifndef GROVE_OCTREE_CHECK_H
#define GROVE_OCTREE_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grove/octree.h"

typedef struct oc_stats {
    size_t num_leaves, num_inner;
    int depth;
} oc_stats;

static int oc__fail(char *msg, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (msg && len) vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return 1;
}

/* octree.h's quantization, written from its formula: floor((x - lo) * (2^30 / side)), clamped
 * to [0, 2^30 - 1]; each operation rounded on its own (volatile keeps them apart). */
static uint32_t oc__grid(double x, double lo, double to_grid)
{
    volatile double diff = x - lo;
    volatile double scaled = diff * to_grid;
    double top = 1073741823.0;
    if (scaled >= top) return 1073741823u;
    if (scaled > 0.0) return (uint32_t)floor(scaled);
    return 0; /* negative, zero, and the NaN of 0 * inf */
}

/* The voxel of grid point q in the lod grid of a node at depth d (g = log2 lod_grid) and the
 * squared distance to that voxel's centre, both measured in units of half a sub-grid step:
 * the voxel side has 2^s grid steps, of which the top min(s, 15) bits count. */
static uint64_t oc__voxel(const uint32_t q[3], int d, int g, uint64_t *dist2)
{
    int s = 30 - d - g, keep = s < 15 ? s : 15;
    uint64_t v = 0, sum = 0;
    for (int a = 0; a < 3; a++) {
        uint64_t inside = (uint64_t)q[a] & (((uint64_t)1 << s) - 1);
        int64_t sub = (int64_t)(inside >> (s - keep));
        int64_t twice_off = 2 * sub + 1 - ((int64_t)1 << keep); /* 2 * (sub + 0.5 - half) */
        sum += (uint64_t)(twice_off * twice_off);
        v |= (((uint64_t)q[a] >> s) & (((uint64_t)1 << g) - 1)) << (a * g);
    }
    *dist2 = sum;
    return v;
}

/* One candidate of an inner node's sample. */
typedef struct oc__cand {
    uint32_t node;
    uint32_t index;
    uint64_t voxel, dist2;
} oc__cand;

static int oc__cmp_cand(const void *x, const void *y)
{
    const oc__cand *a = (const oc__cand *)x, *b = (const oc__cand *)y;
    if (a->node != b->node) return a->node < b->node ? -1 : 1;
    if (a->voxel != b->voxel) return a->voxel < b->voxel ? -1 : 1;
    if (a->dist2 != b->dist2) return a->dist2 < b->dist2 ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

static int oc__cmp_node_index(const void *x, const void *y)
{
    const oc__cand *a = (const oc__cand *)x, *b = (const oc__cand *)y;
    if (a->node != b->node) return a->node < b->node ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

static int oc__cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* Point i comes strictly before point j in the points' Morton order (grid points q). */
static int oc__before(const uint32_t *q, uint32_t i, uint32_t j)
{
    for (int b = 29; b >= 0; b--) {
        unsigned di = 0, dj = 0;
        for (int a = 0; a < 3; a++) {
            di |= ((q[3 * (size_t)i + a] >> b) & 1u) << a;
            dj |= ((q[3 * (size_t)j + a] >> b) & 1u) << a;
        }
        if (di != dj) return di < dj;
    }
    return i < j;
}

static int oc__check_nodes(const grove_octree *t, const grove_octree_opts *o, char *msg,
                           size_t len, oc_stats *st)
{
    const grove_octree_node *nd = grove_octree_nodes(t);
    size_t nn = grove_octree_num_nodes(t), next = 1;
    uint64_t entries = 0;
    int deepest = 0;
    if (nn < 1 || !nd) return oc__fail(msg, len, "no nodes (num_nodes %zu)", nn);
    if (nd[0].depth != 0 || nd[0].octant != 0 || nd[0].cell[0] || nd[0].cell[1] || nd[0].cell[2])
        return oc__fail(msg, len, "the root is not depth 0, octant 0, cell 0");
    for (size_t k = 0; k < nn; k++) {
        const grove_octree_node *u = &nd[k];
        for (int p = 0; p < 5; p++)
            if (u->pad[p]) return oc__fail(msg, len, "node %zu: pad byte %d is not zero", k, p);
        if (k > 0 && u->depth < nd[k - 1].depth)
            return oc__fail(msg, len, "node %zu: depth %d after depth %d (not breadth-first)", k,
                            u->depth, nd[k - 1].depth);
        if (u->begin != entries || u->end < u->begin)
            return oc__fail(msg, len, "node %zu: entries [%llu, %llu) do not follow on at %llu", k,
                            (unsigned long long)u->begin, (unsigned long long)u->end,
                            (unsigned long long)entries);
        entries = u->end;
        if (u->depth > deepest) deepest = u->depth;
        if (k > 0 && u->total == 0) return oc__fail(msg, len, "node %zu is empty", k);
        if (u->first_child == UINT32_MAX) {
            if (u->child_mask) return oc__fail(msg, len, "leaf %zu has a child mask", k);
            if (u->total > o->max_points && u->depth < o->max_depth)
                return oc__fail(msg, len,
                                "leaf %zu at depth %d holds %llu > max_points %u points", k,
                                u->depth, (unsigned long long)u->total, o->max_points);
            if (u->end - u->begin != u->total)
                return oc__fail(msg, len, "leaf %zu: %llu entries for %llu points", k,
                                (unsigned long long)(u->end - u->begin),
                                (unsigned long long)u->total);
            if (st) st->num_leaves++;
            continue;
        }
        if (st) st->num_inner++;
        if (u->depth >= o->max_depth || u->total <= o->max_points)
            return oc__fail(msg, len,
                            "inner node %zu at depth %d with %llu points (max_points %u, "
                            "max_depth %d) should be a leaf",
                            k, u->depth, (unsigned long long)u->total, o->max_points,
                            o->max_depth);
        if (u->first_child != next)
            return oc__fail(msg, len, "node %zu: first_child %u, want %zu (breadth-first)", k,
                            u->first_child, next);
        if (!u->child_mask) return oc__fail(msg, len, "inner node %zu has no children", k);
        if (o->lod_grid == 0 && u->end != u->begin)
            return oc__fail(msg, len, "inner node %zu has entries with lod_grid 0", k);
        {
            uint64_t sum = 0;
            for (unsigned oc = 0; oc < 8; oc++) {
                const grove_octree_node *c;
                if (!(u->child_mask & (1u << oc))) continue;
                if (next >= nn)
                    return oc__fail(msg, len, "node %zu: children beyond the %zu nodes", k, nn);
                c = &nd[next++];
                if (c->octant != oc || c->depth != u->depth + 1)
                    return oc__fail(msg, len, "node %zu: child octant %d depth %d, want %u, %d",
                                    k, c->octant, c->depth, oc, u->depth + 1);
                for (int a = 0; a < 3; a++)
                    if (c->cell[a] != ((u->cell[a] << 1) | ((oc >> a) & 1u)))
                        return oc__fail(msg, len, "node %zu: cell of child %u is wrong", k, oc);
                sum += c->total;
            }
            if (sum != u->total)
                return oc__fail(msg, len, "node %zu: total %llu, children hold %llu", k,
                                (unsigned long long)u->total, (unsigned long long)sum);
        }
    }
    if (next != nn) return oc__fail(msg, len, "%zu nodes, but only %zu are reachable", nn, next);
    if (entries != grove_octree_num_entries(t))
        return oc__fail(msg, len, "entries end at %llu, num_entries is %zu",
                        (unsigned long long)entries, grove_octree_num_entries(t));
    if (deepest != grove_octree_depth(t))
        return oc__fail(msg, len, "grove_octree_depth %d, deepest node %d", grove_octree_depth(t),
                        deepest);
    if (st) st->depth = deepest;
    return 0;
}

static int oc_check(const grove_octree *t, const double *xyz, size_t n, int full_lod, char *msg,
                    size_t len, oc_stats *st)
{
    grove_octree_opts o;
    const grove_octree_node *nd;
    const uint32_t *idx;
    const double *exyz;
    size_t nn, ne;
    double lo[3] = {0.0, 0.0, 0.0}, hi[3] = {0.0, 0.0, 0.0}, tlo[3], tside, side = 0.0, to_grid;
    uint32_t *q = NULL, *leaf = NULL;
    uint64_t *cursor = NULL;
    oc__cand *cand = NULL;
    size_t ncand = 0, capcand = 0;
    int g = 0, bad = 0;

    if (st) memset(st, 0, sizeof *st);
    if (!t) return oc__fail(msg, len, "no tree");
    grove_octree_get_opts(t, &o);
    while ((1 << g) < o.lod_grid) g++;
    nd = grove_octree_nodes(t);
    nn = grove_octree_num_nodes(t);
    ne = grove_octree_num_entries(t);
    idx = grove_octree_entry_index(t);
    exyz = grove_octree_entry_xyz(t);
    if (grove_octree_num_points(t) != n)
        return oc__fail(msg, len, "num_points %zu, want %zu", grove_octree_num_points(t), n);
    if (ne > 0 && (!idx || !exyz)) return oc__fail(msg, len, "no entry arrays");
    for (size_t i = 0; i < n; i++)
        for (int a = 0; a < 3; a++) {
            double x = xyz[3 * i + a];
            if (i == 0 || x < lo[a]) lo[a] = x;
            if (i == 0 || x > hi[a]) hi[a] = x;
        }
    for (int a = 0; a < 3; a++) {
        lo[a] += 0.0;
        if (hi[a] - lo[a] > side) side = hi[a] - lo[a];
    }
    if (side == 0.0) side = 1.0;
    to_grid = 1073741824.0 / side;
    grove_octree_cube(t, tlo, &tside);
    if (memcmp(tlo, lo, sizeof lo) != 0 || tside != side)
        return oc__fail(msg, len, "cube (%.17g %.17g %.17g, side %.17g), want (%.17g %.17g %.17g, "
                        "side %.17g)", tlo[0], tlo[1], tlo[2], tside, lo[0], lo[1], lo[2], side);
    if (oc__check_nodes(t, &o, msg, len, st)) return 1;

    q = (uint32_t *)malloc((n ? 3 * n : 1) * sizeof *q);
    leaf = (uint32_t *)malloc((n ? n : 1) * sizeof *leaf);
    cursor = (uint64_t *)calloc(nn, sizeof *cursor);
    if (!q || !leaf || !cursor) {
        bad = oc__fail(msg, len, "validator: out of memory");
        goto end;
    }
    /* Each point walks down by its octants; inner nodes on the way collect sample candidates. */
    for (size_t i = 0; i < n && !bad; i++) {
        uint32_t *qi = q + 3 * i, k = 0;
        for (int a = 0; a < 3; a++) qi[a] = oc__grid(xyz[3 * i + a], lo[a], to_grid);
        while (nd[k].first_child != UINT32_MAX) {
            int d = nd[k].depth, b = 29 - d;
            unsigned oc = ((qi[0] >> b) & 1u) | (((qi[1] >> b) & 1u) << 1) |
                          (((qi[2] >> b) & 1u) << 2);
            if (full_lod && g > 0) {
                if (ncand == capcand) {
                    size_t cap = capcand ? 2 * capcand : 1024;
                    oc__cand *p = (oc__cand *)realloc(cand, cap * sizeof *p);
                    if (!p) {
                        bad = oc__fail(msg, len, "validator: out of memory");
                        goto end;
                    }
                    cand = p;
                    capcand = cap;
                }
                cand[ncand].node = k;
                cand[ncand].index = (uint32_t)i;
                cand[ncand].voxel = oc__voxel(qi, d, g, &cand[ncand].dist2);
                ncand++;
            }
            if (!(nd[k].child_mask & (1u << oc))) {
                bad = oc__fail(msg, len, "point %zu: octant %u of node %u has no child", i, oc, k);
                goto end;
            }
            k = nd[k].first_child + (uint32_t)__builtin_popcount(nd[k].child_mask & ((1u << oc) - 1));
        }
        for (int a = 0; a < 3; a++)
            if ((qi[a] >> (30 - nd[k].depth)) != nd[k].cell[a]) {
                bad = oc__fail(msg, len, "point %zu is outside the cell of its leaf %u", i, k);
                goto end;
            }
        leaf[i] = k;
        if (cursor[k] >= nd[k].total) {
            bad = oc__fail(msg, len, "leaf %u: more points reach it than its total %llu", k,
                           (unsigned long long)nd[k].total);
            goto end;
        }
        cursor[k]++;
    }
    /* A leaf's entries: strictly ascending in Morton order, each a point of that leaf; with the
     * counts above they are exactly its points. */
    for (size_t k = 0; k < nn && !bad; k++) {
        if (nd[k].first_child != UINT32_MAX) continue;
        for (uint64_t e = nd[k].begin; e < nd[k].end && !bad; e++) {
            uint32_t v = idx[e];
            if (v >= n || leaf[v] != (uint32_t)k ||
                memcmp(exyz + 3 * e, xyz + 3 * (size_t)v, 3 * sizeof(double)))
                bad = oc__fail(msg, len, "leaf %zu: entry %llu is input %u, not one of its points "
                               "(or other coordinates)", k, (unsigned long long)e, v);
            else if (e > nd[k].begin && !oc__before(q, idx[e - 1], v))
                bad = oc__fail(msg, len, "leaf %zu: entry %llu (input %u) is not after input %u "
                               "in Morton order", k, (unsigned long long)e, v, idx[e - 1]);
        }
    }
    if (bad) goto end;
    if (n == 0 && nd[0].total != 0) {
        bad = oc__fail(msg, len, "empty input, root total %llu", (unsigned long long)nd[0].total);
        goto end;
    }
    if (nd[0].total != n) {
        bad = oc__fail(msg, len, "root total %llu, want %zu", (unsigned long long)nd[0].total, n);
        goto end;
    }
    /* Samples: in Morton order, inside the cell, one per voxel. */
    for (size_t k = 0; k < nn && !bad; k++) {
        const grove_octree_node *u = &nd[k];
        uint64_t m = u->end - u->begin, *vox;
        if (u->first_child == UINT32_MAX || m == 0) continue;
        vox = (uint64_t *)malloc(m * sizeof *vox);
        if (!vox) {
            bad = oc__fail(msg, len, "validator: out of memory");
            break;
        }
        for (uint64_t j = 0; j < m && !bad; j++) {
            uint64_t e = u->begin + j, d2;
            uint32_t i = idx[e];
            if (i >= n || (j > 0 && !oc__before(q, idx[e - 1], i))) {
                bad = oc__fail(msg, len, "node %zu: sample entry %llu (input %u) is out of range "
                               "or not after the previous one in Morton order", k,
                               (unsigned long long)j, i);
                break;
            }
            if (memcmp(exyz + 3 * e, xyz + 3 * (size_t)i, 3 * sizeof(double))) {
                bad = oc__fail(msg, len, "node %zu: sample entry of input %u has other coordinates",
                               k, i);
                break;
            }
            for (int a = 0; a < 3; a++)
                if ((q[3 * (size_t)i + a] >> (30 - u->depth)) != u->cell[a])
                    bad = oc__fail(msg, len, "node %zu: sample point %u is outside its cell", k, i);
            vox[j] = oc__voxel(q + 3 * (size_t)i, u->depth, g, &d2);
        }
        if (!bad) {
            qsort(vox, (size_t)m, sizeof *vox, oc__cmp_u64);
            for (uint64_t j = 1; j < m; j++)
                if (vox[j] == vox[j - 1]) {
                    bad = oc__fail(msg, len, "node %zu: two sample points share voxel %llu", k,
                                   (unsigned long long)vox[j]);
                    break;
                }
        }
        free(vox);
    }
    if (bad || !full_lod || g == 0) goto end;
    /* Brute force: the winner of every (node, voxel), then by node and input position. */
    if (ncand) qsort(cand, ncand, sizeof *cand, oc__cmp_cand);
    {
        size_t w = 0, c = 0;
        for (size_t j = 0; j < ncand; j++)
            if (j == 0 || cand[j].node != cand[j - 1].node || cand[j].voxel != cand[j - 1].voxel)
                cand[w++] = cand[j];
        if (w) qsort(cand, w, sizeof *cand, oc__cmp_node_index);
        /* the entries are in Morton order, the winners by index: compare as sets (the
         * entries are distinct, checked above) */
        for (size_t k = 0; k < nn && !bad; k++) {
            const grove_octree_node *u = &nd[k];
            size_t c1 = c;
            if (u->first_child == UINT32_MAX) continue;
            while (c1 < w && cand[c1].node == k) c1++;
            if (c1 - c != u->end - u->begin)
                bad = oc__fail(msg, len, "node %zu: %llu sample entries, brute force says %zu", k,
                               (unsigned long long)(u->end - u->begin), c1 - c);
            for (uint64_t e = u->begin; e < u->end && !bad; e++) {
                oc__cand key;
                key.node = (uint32_t)k;
                key.index = idx[e];
                if (!bsearch(&key, cand + c, c1 - c, sizeof *cand, oc__cmp_node_index))
                    bad = oc__fail(msg, len, "node %zu: sample entry %llu is input %u, not a "
                                   "winner by brute force", k,
                                   (unsigned long long)(e - u->begin), idx[e]);
            }
            c = c1;
        }
    }
end:
    free(q);
    free(leaf);
    free(cursor);
    free(cand);
    return bad;
}

/* Two trees are the same byte for byte: cube, nodes, entries. @return 0 or 1 with msg. */
static int oc_same(const grove_octree *a, const grove_octree *b, char *msg, size_t len)
{
    double la[3], lb[3], sa, sb;
    size_t nn = grove_octree_num_nodes(a), ne = grove_octree_num_entries(a);
    grove_octree_cube(a, la, &sa);
    grove_octree_cube(b, lb, &sb);
    if (memcmp(la, lb, sizeof la) || sa != sb) return oc__fail(msg, len, "cubes differ");
    if (nn != grove_octree_num_nodes(b) || ne != grove_octree_num_entries(b) ||
        grove_octree_depth(a) != grove_octree_depth(b))
        return oc__fail(msg, len, "sizes differ: %zu/%zu nodes, %zu/%zu entries", nn,
                        grove_octree_num_nodes(b), ne, grove_octree_num_entries(b));
    for (size_t k = 0; k < nn; k++)
        if (memcmp(grove_octree_nodes(a) + k, grove_octree_nodes(b) + k, sizeof(grove_octree_node)))
            return oc__fail(msg, len, "node %zu differs", k);
    for (size_t e = 0; e < ne; e++)
        if (grove_octree_entry_index(a)[e] != grove_octree_entry_index(b)[e] ||
            memcmp(grove_octree_entry_xyz(a) + 3 * e, grove_octree_entry_xyz(b) + 3 * e,
                   3 * sizeof(double)))
            return oc__fail(msg, len, "entry %zu differs (input %u vs %u)", e,
                            grove_octree_entry_index(a)[e], grove_octree_entry_index(b)[e]);
    return 0;
}

#endif /* GROVE_OCTREE_CHECK_H */
