/*
 * quadtree_check.h - structural validator of a built quadtree against its input, written only
 * against the public API (include/grove/quadtree.h) so the CPU and the GPU tests can share it.
 *
 * qt_check() verifies everything the header promises about a tree:
 *   - the index is a permutation of 0..n-1 and points[i] == input[index[i]] bit for bit;
 *   - the root is node 0, level 0, range [0, n), and its box is the given bbox or the points'
 *     own (min/max, -0 as +0; all zeros when n == 0);
 *   - breadth-first numbering: scanning the nodes in order, every split node's first_child is
 *     the next unused index, every node but the root is the child of an earlier node, all the
 *     nodes are used;
 *   - the four children partition the parent's range in quadrant order TL, TR, BL, BR, have the
 *     parent's level + 1, and their boxes are the parent's quadrants about the float center
 *     0.5f*min + 0.5f*max;
 *   - split nodes have > min_points points and level < max_depth; leaves have <= min_points
 *     points or level == max_depth;
 *   - every point lies in exactly one leaf, inside that leaf's box (closed), and in the
 *     quadrant (x < cx or x >= cx, y >= cy or y < cy) of each split ancestor that holds it;
 *   - inside a leaf the points keep input order (index ascending).
 * It returns 0 when all hold, else 1 with the first problem written to msg.
 */
#ifndef GROVE_QUADTREE_CHECK_H
#define GROVE_QUADTREE_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grove/quadtree.h"

typedef struct qt_stats {
    size_t num_leaves;
    int max_level; /* deepest node */
} qt_stats;

static int qt__fail(char *msg, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return 1;
}

static int qt__same(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* The center formula, one rounding per statement (no contraction into an FMA). */
static float qt__mid(float lo, float hi)
{
    float a = 0.5f * lo;
    float b = 0.5f * hi;
    return a + b;
}

/* opts: the options the tree was built with (NULL: defaults). stats may be NULL. */
static int qt_check(const grove_quadtree *t, const grove_points *in,
                    const grove_quadtree_opts *opts, qt_stats *stats, char *msg, size_t msg_len)
{
    grove_quadtree_opts o;
    const grove_quadtree_node *nd = grove_quadtree_nodes(t);
    const float *pts = grove_quadtree_points(t);
    const uint32_t *index = grove_quadtree_index(t);
    size_t n = grove_quadtree_num_points(t), nn = grove_quadtree_num_nodes(t), next = 1;
    size_t dims = (size_t)in->dims, covered = 0;
    float root[4] = {0, 0, 0, 0};
    unsigned char *seen;
    qt_stats st = {0, 0};
    int bad = 0;

    if (opts)
        o = *opts;
    else
        grove_quadtree_default_opts(&o);
    if (n != in->n) return qt__fail(msg, msg_len, "tree has %zu points, input %zu", n, in->n);
    if (nn < 1 || !nd) return qt__fail(msg, msg_len, "tree has no nodes");
    if (n > 0 && (!pts || !index)) return qt__fail(msg, msg_len, "points or index is NULL");

    /* index: a permutation, points copied bit for bit */
    seen = (unsigned char *)calloc(n ? n : 1, 1);
    if (!seen) return qt__fail(msg, msg_len, "out of memory");
    for (size_t i = 0; i < n && !bad; i++) {
        uint32_t v = index[i];
        if (v >= n || seen[v]) {
            bad = qt__fail(msg, msg_len, "index[%zu] = %u is out of range or repeated", i, v);
            break;
        }
        seen[v] = 1;
        if (!qt__same(pts[2 * i], in->xyz[v * dims]) ||
            !qt__same(pts[2 * i + 1], in->xyz[v * dims + 1]))
            bad = qt__fail(msg, msg_len, "points[%zu] != input[index[%zu] = %u]", i, i, v);
    }
    free(seen);
    if (bad) return 1;

    /* root box */
    if (o.use_bbox) {
        memcpy(root, o.bbox, sizeof root);
    } else if (n > 0) {
        root[0] = root[1] = INFINITY;
        root[2] = root[3] = -INFINITY;
        for (size_t i = 0; i < n; i++) {
            float x = in->xyz[i * dims], y = in->xyz[i * dims + 1];
            if (x < root[0]) root[0] = x;
            if (y < root[1]) root[1] = y;
            if (x > root[2]) root[2] = x;
            if (y > root[3]) root[3] = y;
        }
        for (int j = 0; j < 4; j++)
            if (root[j] == 0.0f) root[j] = 0.0f; /* -0 as +0 */
    }
    if (nd[0].level != 0 || nd[0].begin != 0 || nd[0].end != n || !qt__same(nd[0].xmin, root[0]) ||
        !qt__same(nd[0].ymin, root[1]) || !qt__same(nd[0].xmax, root[2]) ||
        !qt__same(nd[0].ymax, root[3]))
        return qt__fail(msg, msg_len,
                        "root: level %d range [%u, %u) box (%.9g %.9g %.9g %.9g), want level 0 "
                        "range [0, %zu) box (%.9g %.9g %.9g %.9g)",
                        (int)nd[0].level, nd[0].begin, nd[0].end, (double)nd[0].xmin,
                        (double)nd[0].ymin, (double)nd[0].xmax, (double)nd[0].ymax, n,
                        (double)root[0], (double)root[1], (double)root[2], (double)root[3]);
    {
        grove_quadtree_opts got;
        grove_quadtree_get_opts(t, &got);
        if (got.max_depth != o.max_depth || got.min_points != o.min_points ||
            got.method != o.method || got.use_bbox != 1 || !qt__same(got.bbox[0], root[0]) ||
            !qt__same(got.bbox[1], root[1]) || !qt__same(got.bbox[2], root[2]) ||
            !qt__same(got.bbox[3], root[3]))
            return qt__fail(msg, msg_len, "grove_quadtree_get_opts differs from the build options");
    }

    for (size_t i = 0; i < nn; i++) {
        const grove_quadtree_node *p = &nd[i];
        long long cnt = (long long)p->end - (long long)p->begin;
        int split_rule = p->level < o.max_depth && cnt > o.min_points;
        if (i >= next) return qt__fail(msg, msg_len, "node %zu is nobody's child", i);
        if (p->level > st.max_level) st.max_level = p->level;
        if (p->first_child == -1) {
            if (split_rule)
                return qt__fail(msg, msg_len, "leaf %zu has %lld points at level %d", i, cnt,
                                (int)p->level);
            st.num_leaves++;
            covered += (size_t)cnt;
            for (uint32_t j = p->begin; j < p->end; j++) {
                float x = pts[2 * (size_t)j], y = pts[2 * (size_t)j + 1];
                if (!(x >= p->xmin && x <= p->xmax && y >= p->ymin && y <= p->ymax))
                    return qt__fail(msg, msg_len, "point %u (%.9g, %.9g) is outside leaf %zu", j,
                                    (double)x, (double)y, i);
                if (j + 1 < p->end && index[j] >= index[j + 1])
                    return qt__fail(msg, msg_len, "leaf %zu: index not ascending at %u", i, j);
            }
            continue;
        }
        if (!split_rule)
            return qt__fail(msg, msg_len, "node %zu is split with %lld points at level %d", i, cnt,
                            (int)p->level);
        if ((size_t)p->first_child != next || next + 4 > nn)
            return qt__fail(msg, msg_len, "node %zu: first_child %d, breadth-first wants %zu", i,
                            (int)p->first_child, next);
        {
            const grove_quadtree_node *c = &nd[next];
            float cx = qt__mid(p->xmin, p->xmax), cy = qt__mid(p->ymin, p->ymax);
            float want[4][4] = {{p->xmin, cy, cx, p->ymax},
                                {cx, cy, p->xmax, p->ymax},
                                {p->xmin, p->ymin, cx, cy},
                                {cx, p->ymin, p->xmax, cy}};
            uint32_t at = p->begin;
            for (int q = 0; q < 4; q++) {
                if (c[q].begin != at || c[q].end < c[q].begin)
                    return qt__fail(msg, msg_len,
                                    "node %zu: child %d range [%u, %u), want begin %u", i, q,
                                    c[q].begin, c[q].end, at);
                at = c[q].end;
                if (c[q].level != p->level + 1)
                    return qt__fail(msg, msg_len, "node %zu: child %d level %d", i, q,
                                    (int)c[q].level);
                if (!qt__same(c[q].xmin, want[q][0]) || !qt__same(c[q].ymin, want[q][1]) ||
                    !qt__same(c[q].xmax, want[q][2]) || !qt__same(c[q].ymax, want[q][3]))
                    return qt__fail(msg, msg_len, "node %zu: child %d box is not its quadrant", i,
                                    q);
                for (uint32_t j = c[q].begin; j < c[q].end; j++) {
                    float x = pts[2 * (size_t)j], y = pts[2 * (size_t)j + 1];
                    int right = x >= cx, low = y < cy;
                    if (right != (q & 1) || low != (q >> 1))
                        return qt__fail(msg, msg_len,
                                        "point %u (%.9g, %.9g) in child %d of node %zu, center "
                                        "(%.9g, %.9g)",
                                        j, (double)x, (double)y, q, i, (double)cx, (double)cy);
                }
            }
            if (at != p->end)
                return qt__fail(msg, msg_len, "node %zu: children end at %u, not %u", i, at,
                                p->end);
        }
        next += 4;
    }
    if (next != nn) return qt__fail(msg, msg_len, "%zu nodes, children account for %zu", nn, next);
    if (covered != n) return qt__fail(msg, msg_len, "leaves hold %zu points of %zu", covered, n);
    if (stats) *stats = st;
    return 0;
}

#endif /* GROVE_QUADTREE_CHECK_H */
