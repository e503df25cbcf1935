/*
 * qt_testdata.h - the point sets of the quadtree tests (test_quadtree.c,
 * test_qt_recursive_cuda.cu), all drawn from tu_rng so that a seed reproduces them: uniform,
 * Gaussian clusters (one very tight), duplicates, all equal, collinear, a lattice on split lines,
 * and extreme magnitudes; and the byte-for-byte tree comparison. Header-only; include after
 * testutil.h.
 */
#ifndef GROVE_QT_TESTDATA_H
#define GROVE_QT_TESTDATA_H

#include <float.h>
#include <math.h>

#include "grove/io.h"
#include "grove/quadtree.h"
#include "testutil.h"

static inline grove_points pts_new(size_t n, int dims)
{
    grove_points p;
    p.n = n;
    p.dims = dims;
    p.xyz = n ? (float *)tu_malloc(n * (size_t)dims * sizeof(float)) : NULL;
    return p;
}

static inline void pts_set(grove_points *p, size_t i, float x, float y)
{
    p->xyz[i * (size_t)p->dims] = x;
    p->xyz[i * (size_t)p->dims + 1] = y;
    if (p->dims == 3) p->xyz[i * 3 + 2] = (float)i; /* ignored by the tree */
}

static inline grove_points gen_uniform(tu_rng *r, size_t n, int dims, float lo, float hi)
{
    grove_points p = pts_new(n, dims);
    for (size_t i = 0; i < n; i++) pts_set(&p, i, tu_f32(r, lo, hi), tu_f32(r, lo, hi));
    return p;
}

static inline double gauss(tu_rng *r)
{
    double u = ((double)(tu_next(r) >> 11) + 0.5) / 9007199254740992.0;
    double v = (double)(tu_next(r) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static inline grove_points gen_clusters(tu_rng *r, size_t n)
{
    grove_points p = pts_new(n, 2);
    float cx[6], cy[6], s[6];
    for (int c = 0; c < 6; c++) {
        cx[c] = tu_f32(r, -100.0f, 100.0f);
        cy[c] = tu_f32(r, -100.0f, 100.0f);
        s[c] = c == 0 ? 1e-4f : tu_f32(r, 0.01f, 3.0f);
    }
    for (size_t i = 0; i < n; i++) {
        int c = (int)(tu_u32(r) % 6);
        pts_set(&p, i, cx[c] + s[c] * (float)gauss(r), cy[c] + s[c] * (float)gauss(r));
    }
    return p;
}

/* many copies of `distinct` points, in random order */
static inline grove_points gen_dups(tu_rng *r, size_t n, int distinct)
{
    grove_points p = pts_new(n, 2);
    float x[16], y[16];
    for (int c = 0; c < distinct; c++) {
        x[c] = tu_f32(r, -5.0f, 5.0f);
        y[c] = tu_f32(r, -5.0f, 5.0f);
    }
    for (size_t i = 0; i < n; i++) {
        int c = (int)(tu_u32(r) % (uint32_t)distinct);
        pts_set(&p, i, x[c], y[c]);
    }
    return p;
}

static inline grove_points gen_equal(size_t n, float x, float y)
{
    grove_points p = pts_new(n, 2);
    for (size_t i = 0; i < n; i++) pts_set(&p, i, x, y);
    return p;
}

/* kind 0: x = const; kind 1: y = x */
static inline grove_points gen_line(tu_rng *r, size_t n, int kind)
{
    grove_points p = pts_new(n, 2);
    for (size_t i = 0; i < n; i++) {
        float v = tu_f32(r, -50.0f, 50.0f);
        pts_set(&p, i, kind == 0 ? 3.25f : v, v);
    }
    return p;
}

/* +-1e30 mixed with tiny values (normal, subnormal, signed zeros) */
static inline grove_points gen_extreme(tu_rng *r, size_t n)
{
    static const float special[] = {1e30f, -1e30f, 1e-30f,  -1e-30f, 1e-40f, -1e-45f,
                                    0.0f,  -0.0f,  FLT_MIN, 3e38f,   -3e38f, 1.0f};
    grove_points p = pts_new(n, 2);
    for (size_t i = 0; i < n; i++) {
        float v[2];
        for (int d = 0; d < 2; d++) {
            uint32_t k = tu_u32(r) % 16;
            v[d] = k < 12 ? special[k] : tu_f32(r, -1.0f, 1.0f) * (k == 12 ? 1e30f : 1e-30f);
        }
        pts_set(&p, i, v[0], v[1]);
    }
    return p;
}

/* points on a 64 x 64 lattice of step 0.25 in random order: many lie exactly on split lines */
static inline grove_points gen_lattice(tu_rng *r, size_t n)
{
    grove_points p = pts_new(n, 2);
    for (size_t i = 0; i < n; i++) {
        uint32_t k = tu_u32(r);
        pts_set(&p, i, 0.25f * (float)(k % 64), 0.25f * (float)((k >> 8) % 64));
    }
    return p;
}

/* Compares two trees byte for byte (nodes, points, index); on a difference records a failure
 * (FAIL) naming `what` and the first differing element, and returns 0. */
static inline int qt_trees_equal(const grove_quadtree *a, const grove_quadtree *b, const char *what)
{
    size_t n = grove_quadtree_num_points(a), nn = grove_quadtree_num_nodes(a);
    if (n != grove_quadtree_num_points(b) || nn != grove_quadtree_num_nodes(b)) {
        FAIL("%s: sizes differ: %zu/%zu nodes, %zu/%zu points", what, nn,
             grove_quadtree_num_nodes(b), n, grove_quadtree_num_points(b));
        return 0;
    }
    const grove_quadtree_node *x = grove_quadtree_nodes(a), *y = grove_quadtree_nodes(b);
    if (memcmp(x, y, nn * sizeof *x)) {
        size_t i = 0;
        while (!memcmp(&x[i], &y[i], sizeof *x)) i++;
        FAIL("%s: nodes differ first at node %zu of %zu: first (%g %g %g %g L%d fc %d [%u,%u)) "
             "second "
             "(%g %g %g %g L%d fc %d [%u,%u))",
             what, i, nn, x[i].xmin, x[i].ymin, x[i].xmax, x[i].ymax, x[i].level, x[i].first_child,
             x[i].begin, x[i].end, y[i].xmin, y[i].ymin, y[i].xmax, y[i].ymax, y[i].level,
             y[i].first_child, y[i].begin, y[i].end);
        return 0;
    }
    if (n && memcmp(grove_quadtree_points(a), grove_quadtree_points(b), 2 * n * sizeof(float))) {
        const float *pa = grove_quadtree_points(a), *pb = grove_quadtree_points(b);
        size_t i = 0;
        while (!memcmp(&pa[i], &pb[i], sizeof pa[i])) i++;
        FAIL("%s: points differ first at float %zu of %zu", what, i, 2 * n);
        return 0;
    }
    if (n && memcmp(grove_quadtree_index(a), grove_quadtree_index(b), n * sizeof(uint32_t))) {
        const uint32_t *ia = grove_quadtree_index(a), *ib = grove_quadtree_index(b);
        size_t i = 0;
        while (ia[i] == ib[i]) i++;
        FAIL("%s: index differs first at %zu of %zu (%u vs %u)", what, i, n, ia[i], ib[i]);
        return 0;
    }
    return 1;
}

#endif /* GROVE_QT_TESTDATA_H */
