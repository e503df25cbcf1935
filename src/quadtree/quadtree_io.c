/*
 * quadtree_io.c - grove_quadtree_save() and grove_quadtree_load(): the versioned little-endian
 * file of docs/FORMATS.md ("Quadtree files").
 *
 * Layout: a 64-byte header, then the nodes (32 bytes each, the in-memory grove_quadtree_node
 * with every field little-endian), the points (2n floats) and the index (n uint32). load trusts
 * nothing: the header's sizes must account for the file's length exactly, and the tree must be
 * one that a build could have produced (breadth-first layout, children partitioning their
 * parent's range in quadrant order, the boxes computed by the build's float formula, the split
 * rule, every point in its quadrant, the index a permutation ascending inside each leaf), so
 * the queries can rely on it as on a built tree.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quadtree_internal.h"

#define QT_MAGIC "GROVE-QT"
#define QT_VERSION 1u
#define QT_HEADER 64u
#define QT_NODE 32u

_Static_assert(sizeof(grove_quadtree_node) == QT_NODE, "node layout is the file layout");

static float getf(const unsigned char *b)
{
    uint32_t u = grove__get32(b);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void putf(unsigned char *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    grove__put32(b, u);
}

/* ---- save ---- */

grove_status grove_quadtree_save(grove_ctx *ctx, const grove_quadtree *t, const char *path)
{
    static const char fn[] = "grove_quadtree_save";
    unsigned char h[QT_HEADER];
    char *tmp = NULL;
    FILE *f = NULL;
    int err = 0, le = grove__host_is_le();

    GROVE_TRY(grove__check_ctx(ctx));
    if (!t) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: t is NULL", fn);
    if (!path) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: path is NULL", fn);

    memset(h, 0, sizeof h);
    memcpy(h, QT_MAGIC, 8);
    grove__put32(h + 8, QT_VERSION);
    grove__put64(h + 16, (uint64_t)t->n);
    grove__put64(h + 24, (uint64_t)t->num_nodes);
    grove__put32(h + 32, (uint32_t)t->opts.max_depth);
    grove__put32(h + 36, (uint32_t)t->opts.min_points);
    grove__put32(h + 40, (uint32_t)t->opts.method);
    for (int i = 0; i < 4; i++) putf(h + 48 + 4 * i, t->opts.bbox[i]);

    GROVE_TRY(grove__wfile_open(ctx, path, &tmp, &f));
    errno = 0;
    if (fwrite(h, 1, sizeof h, f) != sizeof h) err = errno ? errno : EIO;
    if (!err) err = grove__write_words(f, t->nodes, t->num_nodes * (QT_NODE / 4), 4, le);
    if (!err && t->n) err = grove__write_words(f, t->pts, 2 * t->n, 4, le);
    if (!err && t->n) err = grove__write_words(f, t->index, t->n, 4, le);
    return grove__wfile_commit(ctx, path, tmp, f, err);
}

/* ---- load ---- */

static int same_f(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* The tree's structure; the header fields are already checked. */
static grove_status check_nodes(grove_ctx *ctx, const char *path, const grove_quadtree *t)
{
    const grove_quadtree_node *nd = t->nodes;
    const grove_quadtree_opts *o = &t->opts;
    size_t nn = t->num_nodes, next = 1;
    if (nd[0].level != 0 || nd[0].begin != 0 || nd[0].end != t->n)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: node 0 (the root) must have level 0 and the range [0, %zu), has "
                            "level %d and [%u, %u)",
                            path, t->n, (int)nd[0].level, nd[0].begin, nd[0].end);
    if (!same_f(nd[0].xmin, o->bbox[0]) || !same_f(nd[0].ymin, o->bbox[1]) ||
        !same_f(nd[0].xmax, o->bbox[2]) || !same_f(nd[0].ymax, o->bbox[3]))
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: node 0 (the root): its box differs from the header's root box",
                            path);
    for (size_t i = 0; i < nn; i++) {
        const grove_quadtree_node *p = &nd[i];
        int64_t cnt = (int64_t)p->end - (int64_t)p->begin;
        int should = p->level < o->max_depth && cnt > (int64_t)o->min_points;
        if (i >= next)
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: node %zu is not the child of any earlier node", path, i);
        if (p->first_child == -1) {
            if (should)
                return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                    "%s: node %zu is a leaf with %lld points at level %d, but "
                                    "min_points = %d and max_depth = %d require a split",
                                    path, i, (long long)cnt, (int)p->level, o->min_points,
                                    o->max_depth);
            continue;
        }
        if ((int64_t)p->first_child != (int64_t)next)
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: node %zu: first_child is %d, the breadth-first layout puts "
                                "its children at %zu",
                                path, i, (int)p->first_child, next);
        if (!should)
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: node %zu is split but has %lld points at level %d "
                                "(min_points = %d, max_depth = %d)",
                                path, i, (long long)cnt, (int)p->level, o->min_points,
                                o->max_depth);
        if (nn - next < 4)
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: node %zu: its children %zu..%zu lie beyond the %zu nodes",
                                path, i, next, next + 3, nn);
        {
            uint32_t bounds[5];
            grove_quadtree_node want[4];
            const grove_quadtree_node *c = &nd[next];
            bounds[0] = p->begin;
            bounds[4] = p->end;
            for (int q = 1; q < 4; q++) bounds[q] = c[q].begin;
            for (int q = 0; q < 4; q++)
                if (c[q].begin != bounds[q] || c[q].end != bounds[q + 1] ||
                    bounds[q] > bounds[q + 1])
                    return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                        "%s: node %zu: the ranges of its children %zu..%zu do not "
                                        "partition its range [%u, %u)",
                                        path, i, next, next + 3, p->begin, p->end);
            grove__qt_make_children(p, bounds, want);
            for (int q = 0; q < 4; q++) {
                if (c[q].level != want[q].level)
                    return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                        "%s: node %zu: level %d, its parent %zu has level %d", path,
                                        next + (size_t)q, (int)c[q].level, i, (int)p->level);
                if (!same_f(c[q].xmin, want[q].xmin) || !same_f(c[q].ymin, want[q].ymin) ||
                    !same_f(c[q].xmax, want[q].xmax) || !same_f(c[q].ymax, want[q].ymax))
                    return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                        "%s: node %zu: its box is not quadrant %d of its parent "
                                        "%zu's box",
                                        path, next + (size_t)q, q, i);
            }
        }
        next += 4;
    }
    if (next != nn)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: the header announces %zu nodes, the tree has %zu", path, nn, next);
    return GROVE_OK;
}

/* Every point finite and inside the root box, in the right quadrant of every split node; the
 * index a permutation, ascending inside each leaf. */
static grove_status check_points(grove_ctx *ctx, const char *path, const grove_quadtree *t)
{
    const grove_quadtree_node *nd = t->nodes;
    const float *b = t->opts.bbox;
    size_t n = t->n;
    uint8_t *seen;
    for (size_t i = 0; i < n; i++) {
        float x = t->pts[2 * i], y = t->pts[2 * i + 1];
        if (!(x >= b[0] && x <= b[2] && y >= b[1] && y <= b[3]))
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: point %zu (x=%.9g, y=%.9g) is not finite or lies outside the "
                                "root box",
                                path, i, (double)x, (double)y);
    }
    for (size_t i = 0; i < t->num_nodes; i++) {
        const grove_quadtree_node *p = &nd[i];
        if (p->first_child < 0) {
            for (uint32_t j = p->begin; j + 1 < p->end; j++)
                if (t->index[j] >= t->index[j + 1])
                    return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                        "%s: leaf %zu: index[%u] = %u and index[%u] = %u are not "
                                        "ascending (input order)",
                                        path, i, j, t->index[j], j + 1, t->index[j + 1]);
            continue;
        }
        float cx = grove__qt_mid(p->xmin, p->xmax), cy = grove__qt_mid(p->ymin, p->ymax);
        for (unsigned q = 0; q < 4; q++) {
            const grove_quadtree_node *c = &nd[p->first_child + (int32_t)q];
            for (uint32_t j = c->begin; j < c->end; j++)
                if (grove__qt_quadrant(t->pts[2 * (size_t)j], t->pts[2 * (size_t)j + 1], cx, cy) !=
                    q)
                    return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                        "%s: point %u (x=%.9g, y=%.9g) is not in quadrant %u of "
                                        "node %zu, where node %zu puts it",
                                        path, j, (double)t->pts[2 * (size_t)j],
                                        (double)t->pts[2 * (size_t)j + 1], q, i,
                                        (size_t)p->first_child + q);
        }
    }
    seen = (uint8_t *)calloc(n ? n : 1, 1);
    if (!seen) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) {
        uint32_t v = t->index[i];
        if (v >= n || seen[v]) {
            grove_status s =
                grove__error(ctx, GROVE_ERR_BAD_INPUT,
                             v >= n ? "%s: index[%zu] = %u is out of range (%zu points)"
                                    : "%s: index[%zu] = %u appears twice (%zu points)",
                             path, i, v, n);
            free(seen);
            return s;
        }
        seen[v] = 1;
    }
    free(seen);
    return GROVE_OK;
}

grove_status grove_quadtree_load(grove_ctx *ctx, const char *path, grove_quadtree **out)
{
    static const char fn[] = "grove_quadtree_load";
    unsigned char h[QT_HEADER];
    grove_status st = GROVE_OK;
    grove_quadtree *t = NULL;
    uint64_t n, nn, want, size;
    FILE *f;
    int le = grove__host_is_le();

    GROVE_TRY(grove__check_ctx(ctx));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!path) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: path is NULL", fn);
    GROVE_TRY(grove__binfile_open(ctx, path, QT_MAGIC, "quadtree", QT_VERSION, h, sizeof h, &f,
                                  &size));
    if (grove__get32(h + 12) != 0 || grove__get32(h + 44) != 0) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: header: reserved fields (bytes 12 and 44) must be 0", path);
        goto _end;
    }
    n = grove__get64(h + 16);
    nn = grove__get64(h + 24);
    if (n > UINT32_MAX) {
        st =
            grove__error(ctx, GROVE_ERR_BAD_INPUT, "%s: header: %llu points exceed the limit of %u",
                         path, (unsigned long long)n, UINT32_MAX);
        goto _end;
    }
    if (nn < 1 || nn > (uint64_t)INT32_MAX) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: header: the node count %llu is out of range (1..%d)", path,
                          (unsigned long long)nn, INT32_MAX);
        goto _end;
    }
    t = (grove_quadtree *)calloc(1, sizeof *t);
    if (!t) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        goto _end;
    }
    t->opts.max_depth = (int32_t)grove__get32(h + 32);
    t->opts.min_points = (int32_t)grove__get32(h + 36);
    t->opts.method = (grove_quadtree_method)(int32_t)grove__get32(h + 40);
    t->opts.use_bbox = 1;
    for (int i = 0; i < 4; i++) t->opts.bbox[i] = getf(h + 48 + 4 * i);
    if (t->opts.max_depth < 0 || t->opts.max_depth > GROVE_QUADTREE_MAX_DEPTH ||
        t->opts.min_points < 0 ||
        (t->opts.method != GROVE_QUADTREE_MORTON && t->opts.method != GROVE_QUADTREE_RECURSIVE)) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: header: options out of range (max_depth %d, min_points %d, "
                          "method %d)",
                          path, t->opts.max_depth, t->opts.min_points, (int)t->opts.method);
        goto _end;
    }
    {
        const float *b = t->opts.bbox;
        if (!isfinite(b[0]) || !isfinite(b[1]) || !isfinite(b[2]) || !isfinite(b[3]) ||
            !(b[0] <= b[2]) || !(b[1] <= b[3])) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: header: the root box (%.9g, %.9g, %.9g, %.9g) is not finite "
                              "or is inverted",
                              path, (double)b[0], (double)b[1], (double)b[2], (double)b[3]);
            goto _end;
        }
    }
    want = QT_HEADER + QT_NODE * nn + 12 * n; /* < 2^37 + 2^36: no overflow */
    if (size != want) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          size < want ? "%s: truncated: %llu bytes, the header announces %llu "
                                        "(%llu nodes, %llu points)"
                                      : "%s: %llu bytes, the header announces %llu (%llu nodes, "
                                        "%llu points): trailing data",
                          path, (unsigned long long)size, (unsigned long long)want,
                          (unsigned long long)nn, (unsigned long long)n);
        goto _end;
    }
    t->n = (size_t)n;
    t->num_nodes = (size_t)nn;
    t->nodes = (grove_quadtree_node *)malloc((size_t)nn * QT_NODE);
    if (n) {
        t->pts = (float *)malloc((size_t)n * 2 * sizeof(float));
        t->index = (uint32_t *)malloc((size_t)n * sizeof(uint32_t));
    }
    if (!t->nodes || (n && (!t->pts || !t->index))) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "%s: out of memory for %llu nodes and %llu points", path,
                          (unsigned long long)nn, (unsigned long long)n);
        goto _end;
    }
    GROVE_TRY_END(st, grove__read_words(ctx, path, f, t->nodes, (size_t)nn * (QT_NODE / 4), 4, le));
    GROVE_TRY_END(st, grove__read_words(ctx, path, f, t->pts, (size_t)n * 2, 4, le));
    GROVE_TRY_END(st, grove__read_words(ctx, path, f, t->index, (size_t)n, 4, le));
    GROVE_TRY_END(st, check_nodes(ctx, path, t));
    GROVE_TRY_END(st, check_points(ctx, path, t));
    *out = t;
    t = NULL;
_end:
    fclose(f);
    grove_quadtree_destroy(t);
    return st;
}
