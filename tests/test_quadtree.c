/*
 * test_quadtree.c - tests of the quadtree module (include/grove/quadtree.h).
 *
 *   test_quadtree [--backend cpu|cuda] [--large N] [--seed S] [--only morton]
 *
 * Every tree is built with both methods, which must give the same nodes, points and index byte
 * for byte, and passes the structural validator of quadtree_check.h. Box queries and kNN are
 * compared with brute force over the input (same double distance formula, ties by input
 * position). Save/load round trips and every rejected argument and corrupted file are checked
 * with their exact status and message. With --backend cuda everything runs on a CUDA context and
 * the trees and kNN results are also compared with a CPU context; without a GPU (or a CUDA
 * build) it prints "SKIP: no GPU" and exits 77. --large N runs only a uniform data set of N
 * points (both builds, the validator, a few queries). --only morton skips the recursive builds.
 */
#define _POSIX_C_SOURCE 200809L

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grove/quadtree.h"
#include "quadtree_check.h"
#ifdef GROVE_HAVE_CUDA
#include <cuda_runtime.h>
#endif
#include "testutil.h"
#include "qt_testdata.h"

static grove_ctx *g_ctx; /* the backend under test */
static grove_ctx *g_cpu; /* CPU reference in --backend cuda mode, else NULL */
static grove_ctx *g_one; /* CPU context with one thread (results must not depend on threads) */
/* --only morton: skip the recursive builds (compute-sanitizer's racecheck and synccheck do not
 * support the dynamic parallelism of the CUDA recursive build) */
static int g_only_morton;

/* Exact status and exact last-error message. */
#define CHECK_ERR(ctx, expr, want, ...)                                                            \
    do {                                                                                           \
        char want_msg_[1024];                                                                      \
        snprintf(want_msg_, sizeof want_msg_, __VA_ARGS__);                                        \
        CHECK_STATUS(ctx, expr, want);                                                             \
        if (strcmp(grove_ctx_last_error(ctx), want_msg_) != 0)                                     \
            FAIL("message\n  got:  %s\n  want: %s", grove_ctx_last_error(ctx), want_msg_);         \
    } while (0)

/* ---- data sets ---- */

/* Uniform in [lo, hi], computed in double so that spans beyond FLT_MAX do not overflow. */
static float rnd_between(tu_rng *r, float lo, float hi)
{
    double u = (double)(tu_next(r) >> 11) / 9007199254740992.0;
    return (float)((double)lo + ((double)hi - (double)lo) * u);
}

/* ---- trees ---- */

static grove_quadtree *build_one(grove_ctx *ctx, const grove_points *p,
                                 const grove_quadtree_opts *o, grove_quadtree_method m,
                                 const char *what)
{
    grove_quadtree_opts oo = *o;
    grove_quadtree *t = NULL;
    grove_status s;
    oo.method = m;
    s = grove_quadtree_build(ctx, p, &oo, &t);
    if (s != GROVE_OK) {
        FAIL("%s: build (method %d) failed: %s: %s", what, (int)m, grove_status_string(s),
             grove_ctx_last_error(ctx));
        return NULL;
    }
    return t;
}

static void validate(const grove_quadtree *t, const grove_points *p, const grove_quadtree_opts *o,
                     grove_quadtree_method m, const char *what, qt_stats *st)
{
    grove_quadtree_opts oo = *o;
    char msg[512];
    oo.method = m;
    if (qt_check(t, p, &oo, st, msg, sizeof msg))
        FAIL("%s (method %d): invalid tree: %s", what, (int)m, msg);
}

#ifdef GROVE_HAVE_CUDA
/* The device-resident build of p (copied to the device by hand) must give ref's bytes after
 * grove_quadtree_download(), and no host arrays before it. */
static void check_device_build(const grove_points *p, const grove_quadtree_opts *o,
                               grove_quadtree_method m, const grove_quadtree *ref, const char *what)
{
    grove_quadtree_opts oo = *o;
    grove_quadtree *t = NULL;
    grove_quadtree_device_view v;
    size_t bytes = p->n * (size_t)p->dims * sizeof(float);
    float *d = NULL;
    grove_status s;
    oo.method = m;
    /* The synchronize matters: a cudaMemcpy from pageable memory may return before its data
     * lands, and the context's stream does not wait for the legacy default stream. */
    if (cudaMalloc((void **)&d, bytes ? bytes : 4) != cudaSuccess ||
        cudaMemcpy(d, p->xyz, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
        FAIL("%s: cudaMalloc/cudaMemcpy of %zu bytes failed", what, bytes);
        cudaFree(d);
        return;
    }
    s = grove_quadtree_build_device(g_ctx, d, p->n, p->dims, &oo, &t);
    if (s != GROVE_OK) {
        FAIL("%s: build_device (method %d) failed: %s: %s", what, (int)m, grove_status_string(s),
             grove_ctx_last_error(g_ctx));
    } else {
        v = grove_quadtree_device(t);
        CHECK(grove_quadtree_nodes(t) == NULL && grove_quadtree_points(t) == NULL);
        CHECK(v.nodes != NULL && (p->n == 0 || (v.pts != NULL && v.index != NULL)));
        CHECK(grove_quadtree_num_nodes(t) == grove_quadtree_num_nodes(ref));
        char msg[256];
        snprintf(msg, sizeof msg,
                 "%s (n=%zu, method %d, max_depth %d, min_points %d): "
                 "device-resident build vs host build",
                 what, p->n, (int)m, oo.max_depth, oo.min_points);
        s = grove_quadtree_download(g_ctx, t);
        if (s != GROVE_OK)
            FAIL("%s: download failed: %s", what, grove_ctx_last_error(g_ctx));
        else
            qt_trees_equal(t, ref, msg);
    }
    grove_quadtree_destroy(t);
    cudaFree(d);
}
#endif

/* Builds with both methods (and on the reference contexts), checks they agree and are valid;
 * returns the morton tree. */
static grove_quadtree *build_all(const grove_points *p, const grove_quadtree_opts *opts,
                                 const char *what, qt_stats *st)
{
    grove_quadtree_opts o;
    grove_quadtree *tm, *tr;
    if (opts)
        o = *opts;
    else
        grove_quadtree_default_opts(&o);
    tm = build_one(g_ctx, p, &o, GROVE_QUADTREE_MORTON, what);
    tr = g_only_morton ? NULL : build_one(g_ctx, p, &o, GROVE_QUADTREE_RECURSIVE, what);
    if (!tm || (!tr && !g_only_morton)) {
        grove_quadtree_destroy(tm);
        grove_quadtree_destroy(tr);
        return NULL;
    }
    validate(tm, p, &o, GROVE_QUADTREE_MORTON, what, st);
    if (tr) {
        validate(tr, p, &o, GROVE_QUADTREE_RECURSIVE, what, NULL);
        qt_trees_equal(tm, tr, what);
    }
    if (g_cpu) {
        for (int m = 0; m < (g_only_morton ? 1 : 2); m++) {
            grove_quadtree *tc = build_one(g_cpu, p, &o, (grove_quadtree_method)m, what);
            char msg[256];
            snprintf(msg, sizeof msg, "%s (n=%zu, method %d): CUDA context vs CPU context", what,
                     p->n, m);
            if (tc) qt_trees_equal(m == 0 ? tm : tr, tc, msg);
            grove_quadtree_destroy(tc);
#ifdef GROVE_HAVE_CUDA
            check_device_build(p, &o, (grove_quadtree_method)m, tm, what);
#endif
        }
    } else if (p->n <= 200000) {
        for (int m = 0; m < (g_only_morton ? 1 : 2); m++) {
            grove_quadtree *tc = build_one(g_one, p, &o, (grove_quadtree_method)m, what);
            if (tc) qt_trees_equal(tm, tc, "1 thread vs default threads");
            grove_quadtree_destroy(tc);
        }
    }
    grove_quadtree_destroy(tr);
    return tm;
}

/* ---- box queries ---- */

static void check_boxes(const grove_quadtree *t, const grove_points *p, const float *boxes,
                        size_t nq, const char *what)
{
    grove_query_result r;
    size_t dims = (size_t)p->dims;
    grove_status s = grove_quadtree_query_boxes(g_ctx, t, boxes, nq, &r);
    if (s != GROVE_OK) {
        FAIL("%s: query_boxes failed: %s", what, grove_ctx_last_error(g_ctx));
        return;
    }
    if (r.num_queries != nq || r.offsets[0] != 0) FAIL("%s: bad result header", what);
    for (size_t q = 0; q < nq && r.num_queries == nq; q++) {
        const float *b = boxes + 4 * q;
        uint64_t at = r.offsets[q], end = r.offsets[q + 1];
        int bad = 0;
        for (size_t i = 0; i < p->n; i++) {
            float x = p->xyz[i * dims], y = p->xyz[i * dims + 1];
            if (x >= b[0] && x <= b[2] && y >= b[1] && y <= b[3]) {
                if (at >= end || r.indices[at] != (uint32_t)i) bad = 1;
                at++;
            }
        }
        if (bad || at != end) {
            FAIL("%s: box query %zu (%.9g %.9g %.9g %.9g): %llu matches, brute force %llu or "
                 "different",
                 what, q, (double)b[0], (double)b[1], (double)b[2], (double)b[3],
                 (unsigned long long)(end - r.offsets[q]), (unsigned long long)(at - r.offsets[q]));
            break;
        }
    }
    grove_query_result_free(&r);
    if (r.offsets || r.indices || r.num_queries) FAIL("query_result_free did not zero");
}

/* Random boxes of every kind: inside the data, degenerate (a point, a segment), outside,
 * covering everything, inverted, and with edges exactly on data coordinates and node
 * boundaries (inclusive). */
static float *gen_boxes(tu_rng *r, const grove_quadtree *t, const grove_points *p, size_t nq)
{
    float *b = (float *)tu_malloc(4 * nq * sizeof(float));
    const grove_quadtree_node *nd = grove_quadtree_nodes(t);
    size_t nn = grove_quadtree_num_nodes(t), dims = (size_t)p->dims;
    float lo_x = nd[0].xmin, lo_y = nd[0].ymin, hi_x = nd[0].xmax, hi_y = nd[0].ymax;
    float w = hi_x - lo_x, h = hi_y - lo_y;
    if (!(w > 0) || !isfinite(w)) w = 1;
    if (!(h > 0) || !isfinite(h)) h = 1;
    for (size_t q = 0; q < nq; q++) {
        float *o = b + 4 * q;
        uint32_t kind = tu_u32(r) % 9;
        if (p->n == 0 && (kind == 3 || kind == 4 || kind == 7)) kind = 0;
        switch (kind) {
        case 0: /* random, inside the root box */
        case 1: {
            float x0 = rnd_between(r, lo_x, hi_x), x1 = rnd_between(r, lo_x, hi_x);
            float y0 = rnd_between(r, lo_y, hi_y), y1 = rnd_between(r, lo_y, hi_y);
            o[0] = fminf(x0, x1);
            o[2] = fmaxf(x0, x1);
            o[1] = fminf(y0, y1);
            o[3] = fmaxf(y0, y1);
            break;
        }
        case 2: /* covering everything */
            o[0] = -INFINITY;
            o[1] = -INFINITY;
            o[2] = INFINITY;
            o[3] = INFINITY;
            if (tu_u32(r) & 1) {
                o[0] = lo_x;
                o[1] = lo_y;
                o[2] = hi_x;
                o[3] = hi_y;
            }
            break;
        case 3: { /* a single data point */
            size_t i = tu_u32(r) % p->n;
            o[0] = o[2] = p->xyz[i * dims];
            o[1] = o[3] = p->xyz[i * dims + 1];
            break;
        }
        case 4: { /* edges on data coordinates: a vertical segment, or a box between points */
            size_t i = tu_u32(r) % p->n, j = tu_u32(r) % p->n;
            float xi = p->xyz[i * dims], yi = p->xyz[i * dims + 1];
            float xj = p->xyz[j * dims], yj = p->xyz[j * dims + 1];
            if (tu_u32(r) & 1) {
                o[0] = o[2] = xi;
                o[1] = lo_y;
                o[3] = hi_y;
            } else {
                o[0] = fminf(xi, xj);
                o[2] = fmaxf(xi, xj);
                o[1] = fminf(yi, yj);
                o[3] = fmaxf(yi, yj);
            }
            break;
        }
        case 5: /* outside the data */
            o[0] = hi_x + w;
            o[2] = hi_x + 2 * w;
            o[1] = lo_y;
            o[3] = hi_y;
            if (!isfinite(o[0]) || !isfinite(o[2])) o[0] = o[2] = hi_x; /* spans ~FLT_MAX */
            if (tu_u32(r) & 1) {
                o[0] = -INFINITY;
                o[2] = lo_x - w;
                if (!isfinite(o[2])) o[2] = -FLT_MAX;
            }
            break;
        case 6: /* inverted: empty */
            o[0] = 1;
            o[2] = 0;
            o[1] = lo_y;
            o[3] = hi_y;
            break;
        default: { /* exactly a node's box (its boundary points are on the edges) */
            const grove_quadtree_node *x = &nd[tu_u32(r) % nn];
            o[0] = x->xmin;
            o[1] = x->ymin;
            o[2] = x->xmax;
            o[3] = x->ymax;
            break;
        }
        }
    }
    return b;
}

/* ---- kNN ---- */

static double dist2(double qx, double qy, float x, float y)
{
    double dx = (double)x - qx;
    double dy = (double)y - qy;
    double a = dx * dx;
    double b = dy * dy;
    return a + b;
}

static void check_knn(const grove_quadtree *t, const grove_points *p, const float *qs, size_t nq,
                      int k, const char *what)
{
    size_t kk = (size_t)k, dims = (size_t)p->dims, m = kk < p->n ? kk : p->n;
    uint32_t *ind = (uint32_t *)tu_malloc(nq * kk * sizeof *ind);
    double *d2 = (double *)tu_malloc(nq * kk * sizeof *d2);
    uint32_t *bi = (uint32_t *)tu_malloc((m + 1) * sizeof *bi);
    double *bd = (double *)tu_malloc((m + 1) * sizeof *bd);
    grove_status s = grove_quadtree_knn(g_ctx, t, qs, nq, k, ind, d2);
    if (s != GROVE_OK) {
        FAIL("%s: knn failed: %s", what, grove_ctx_last_error(g_ctx));
        goto end;
    }
    for (size_t q = 0; q < nq; q++) {
        double qx = qs[2 * q], qy = qs[2 * q + 1];
        size_t have = 0;
        /* insertion into the sorted best list; input order makes equal distances keep the
         * smaller position first */
        for (size_t i = 0; i < p->n; i++) {
            double d = dist2(qx, qy, p->xyz[i * dims], p->xyz[i * dims + 1]);
            size_t j;
            if (have == m && !(d < bd[m - 1])) continue;
            j = have < m ? have++ : m - 1;
            while (j > 0 && bd[j - 1] > d) {
                bd[j] = bd[j - 1];
                bi[j] = bi[j - 1];
                j--;
            }
            bd[j] = d;
            bi[j] = (uint32_t)i;
        }
        for (size_t j = 0; j < kk; j++) {
            uint32_t wi = j < m ? bi[j] : UINT32_MAX;
            double wd = j < m ? bd[j] : INFINITY;
            if (ind[q * kk + j] != wi || !(d2[q * kk + j] == wd)) {
                FAIL("%s: knn query %zu (%.9g, %.9g) k=%d rank %zu: got %u (%.17g), want %u "
                     "(%.17g)",
                     what, q, qx, qy, k, j, ind[q * kk + j], d2[q * kk + j], wi, wd);
                goto end;
            }
        }
    }
    if (g_cpu) { /* the CUDA context gives the same bytes */
        uint32_t *ci = (uint32_t *)tu_malloc(nq * kk * sizeof *ci);
        s = grove_quadtree_knn(g_cpu, t, qs, nq, k, ci, NULL); /* dist2 may be NULL */
        if (s != GROVE_OK || (nq && memcmp(ci, ind, nq * kk * sizeof *ci)))
            FAIL("%s: knn on the CPU context differs", what);
        free(ci);
    }
end:
    free(ind);
    free(d2);
    free(bi);
    free(bd);
}

static float *gen_queries(tu_rng *r, const grove_quadtree *t, const grove_points *p, size_t nq)
{
    float *qs = (float *)tu_malloc(2 * nq * sizeof(float) + 1);
    const grove_quadtree_node *nd = grove_quadtree_nodes(t);
    size_t dims = (size_t)p->dims;
    for (size_t q = 0; q < nq; q++) {
        uint32_t kind = tu_u32(r) % 4;
        if (kind == 0 && p->n > 0) { /* on a data point */
            size_t i = tu_u32(r) % p->n;
            qs[2 * q] = p->xyz[i * dims];
            qs[2 * q + 1] = p->xyz[i * dims + 1];
        } else if (kind == 1) { /* far outside */
            qs[2 * q] = nd[0].xmax * 2 + 10;
            qs[2 * q + 1] = nd[0].ymin;
            if (!isfinite(qs[2 * q])) qs[2 * q] = FLT_MAX;
        } else {
            qs[2 * q] = rnd_between(r, nd[0].xmin, nd[0].xmax);
            qs[2 * q + 1] = rnd_between(r, nd[0].ymin, nd[0].ymax);
        }
    }
    return qs;
}

/* Builds, validates and queries one data set; frees p. */
static void run_set(tu_rng *r, grove_points p, const grove_quadtree_opts *opts, const char *what,
                    size_t nbox, size_t nknn, qt_stats *st)
{
    grove_quadtree *t = build_all(&p, opts, what, st);
    if (t) {
        float *b = gen_boxes(r, t, &p, nbox), *qs = gen_queries(r, t, &p, nknn);
        check_boxes(t, &p, b, nbox, what);
        check_knn(t, &p, qs, nknn, 1, what);
        check_knn(t, &p, qs, nknn, 5, what);
        if (p.n < 100) check_knn(t, &p, qs, nknn, (int)p.n + 3, what);
        free(b);
        free(qs);
    }
    grove_quadtree_destroy(t);
    free(p.xyz);
}

static void test_datasets(tu_rng *r)
{
    static const size_t sizes[] = {0, 1, 2, 17, 31, 32, 33, 1000, 100000, 1000000};
    grove_quadtree_opts o;
    qt_stats st;
    char what[128];
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        size_t n = sizes[s], nq = n >= 1000000 ? 16 : n >= 100000 ? 64 : 200;
        snprintf(what, sizeof what, "uniform n=%zu", n);
        run_set(r, gen_uniform(r, n, 2, -1000.0f, 1000.0f), NULL, what, nq, nq, NULL);
    }
    run_set(r, gen_uniform(r, 1000, 3, 0.0f, 1.0f), NULL, "uniform 3-D n=1000", 100, 100, NULL);

    /* options at their limits */
    for (int md = 0; md <= 30; md += 30)
        for (int mp = 0; mp <= 1; mp++) {
            grove_quadtree_default_opts(&o);
            o.max_depth = md;
            o.min_points = mp;
            snprintf(what, sizeof what, "uniform n=2000 max_depth=%d min_points=%d", md, mp);
            run_set(r, gen_uniform(r, 2000, 2, -1.0f, 1.0f), &o, what, 100, 100, &st);
            if (md == 0 && st.max_level != 0) FAIL("%s: max level %d", what, st.max_level);
        }
    grove_quadtree_default_opts(&o);
    o.min_points = 1000000; /* a single leaf: input order */
    run_set(r, gen_uniform(r, 5000, 2, -1.0f, 1.0f), &o, "one big leaf", 50, 50, NULL);

    grove_quadtree_default_opts(&o);
    o.min_points = 4;
    o.max_depth = 20;
    run_set(r, gen_clusters(r, 100000), &o, "gaussian clusters", 64, 64, NULL);
    run_set(r, gen_dups(r, 50000, 7), NULL, "7 distinct points x 50000", 64, 64, &st);
    if (st.max_level != 16) FAIL("duplicates: max level %d, want 16", st.max_level);
    grove_quadtree_default_opts(&o);
    o.min_points = 0;
    o.max_depth = 30;
    run_set(r, gen_dups(r, 3000, 3), &o, "3 distinct points, min_points 0, max_depth 30", 64, 64,
            &st);

    /* all points equal: one non-empty child per level down to max_depth */
    for (int md = 16; md <= 30; md += 14) {
        grove_quadtree *t;
        grove_points p = gen_equal(100, 2.5f, -7.0f);
        grove_quadtree_default_opts(&o);
        o.max_depth = md;
        o.min_points = md == 30 ? 0 : 16;
        t = build_all(&p, &o, "all equal", &st);
        if (t) {
            const grove_quadtree_node *nd = grove_quadtree_nodes(t);
            size_t nn = grove_quadtree_num_nodes(t), nonempty = 0;
            if (nn != 1 + 4 * (size_t)md || st.max_level != md)
                FAIL("all equal, max_depth %d: %zu nodes, depth %d", md, nn, st.max_level);
            for (size_t i = 0; i < nn; i++)
                if (nd[i].end > nd[i].begin) nonempty++;
            if (nonempty != 1 + (size_t)md) FAIL("all equal: %zu non-empty nodes", nonempty);
        }
        grove_quadtree_destroy(t);
        free(p.xyz);
    }
    run_set(r, gen_equal(40, 0.0f, 0.0f), NULL, "all equal at the origin", 20, 20, NULL);

    /* Ties across nodes: a 32 x 32 integer grid, 8 copies of each point in random order, queried
     * at grid and half-grid positions, so that many points in different nodes are at exactly the
     * k-th distance and only the input position decides (a node at exactly the k-th distance
     * must not be pruned). */
    {
        grove_points p = pts_new(8192, 2);
        grove_quadtree *t;
        float qs[2 * 300];
        for (size_t i = 0; i < p.n; i++) {
            uint32_t g = tu_u32(r) % 1024;
            pts_set(&p, i, (float)(g % 32), (float)(g / 32));
        }
        grove_quadtree_default_opts(&o);
        o.min_points = 2;
        /* split lines on integers: the points sit on their nodes' corners, where a box's
         * distance equals a point's */
        o.use_bbox = 1;
        o.bbox[0] = o.bbox[1] = 0.0f;
        o.bbox[2] = o.bbox[3] = 32.0f;
        t = build_all(&p, &o, "grid with duplicates", NULL);
        for (int q = 0; q < 300; q++) {
            qs[2 * q] = (float)(tu_u32(r) % 70) * 0.5f - 2.0f;
            qs[2 * q + 1] = (float)(tu_u32(r) % 70) * 0.5f - 2.0f;
        }
        if (t) {
            static const int ks[] = {1, 5, 13, 40};
            float *b = gen_boxes(r, t, &p, 200);
            for (int j = 0; j < 4; j++) check_knn(t, &p, qs, 300, ks[j], "grid with duplicates");
            check_boxes(t, &p, b, 200, "grid with duplicates");
            free(b);
        }
        grove_quadtree_destroy(t);
        free(p.xyz);
    }

    run_set(r, gen_line(r, 5000, 0), NULL, "collinear x = 3.25", 100, 100, NULL);
    run_set(r, gen_line(r, 5000, 1), NULL, "collinear y = x", 100, 100, NULL);
    run_set(r, gen_extreme(r, 20000), NULL, "extreme coordinates", 100, 100, NULL);
    grove_quadtree_default_opts(&o);
    o.min_points = 0;
    o.max_depth = 30;
    run_set(r, gen_extreme(r, 3000), &o, "extreme coordinates, min_points 0, depth 30", 100, 100,
            NULL);

    /* a given bbox, larger than the data; and one equal to the data's (inclusive edges) */
    grove_quadtree_default_opts(&o);
    o.use_bbox = 1;
    o.bbox[0] = -2.0f;
    o.bbox[1] = -3.0f;
    o.bbox[2] = 5.0f;
    o.bbox[3] = 1.0f;
    run_set(r, gen_uniform(r, 3000, 2, -1.0f, 1.0f), &o, "given bbox", 100, 100, NULL);
    {
        grove_points p = gen_uniform(r, 1000, 2, 0.0f, 1.0f);
        pts_set(&p, 10, 0.0f, 0.0f);
        pts_set(&p, 11, 1.0f, 1.0f);
        o.bbox[0] = 0.0f;
        o.bbox[1] = 0.0f;
        o.bbox[2] = 1.0f;
        o.bbox[3] = 1.0f;
        run_set(r, p, &o, "bbox touching the data", 100, 100, NULL);
    }
    run_set(r, pts_new(0, 2), &o, "n = 0 with a given bbox", 10, 10, NULL);
}

/* ---- invalid arguments ---- */

static void test_invalid(void)
{
    grove_ctx *c = g_ctx;
    grove_quadtree_opts o;
    grove_quadtree *t = NULL, *good = NULL;
    grove_points p = pts_new(4, 2), big;
    grove_query_result res;
    float q[4] = {0, 0, 1, 1};
    uint32_t ind[8];
    const char *B = "grove_quadtree_build";
    pts_set(&p, 0, 0.0f, 0.0f);
    pts_set(&p, 1, 1.0f, 0.5f);
    pts_set(&p, 2, 0.25f, 1.0f);
    pts_set(&p, 3, 0.75f, 0.75f);

    CHECK_STATUS(NULL, grove_quadtree_build(NULL, &p, NULL, &t), GROVE_ERR_INVALID_ARG);
    { /* a context whose creation failed (CUDA asked for where there is none) is refused */
        grove_ctx_opts co;
        grove_ctx *failed = NULL;
        grove_ctx_default_opts(&co);
        co.backend = GROVE_BACKEND_CUDA;
        co.device = 1000;
        if (grove_ctx_create(&co, &failed) != GROVE_OK && failed) {
            CHECK_STATUS(failed, grove_quadtree_build(failed, &p, NULL, &t), GROVE_ERR_INVALID_ARG);
            CHECK_STATUS(failed, grove_quadtree_knn(failed, NULL, q, 1, 1, ind, NULL),
                         GROVE_ERR_INVALID_ARG);
            CHECK_STATUS(failed, grove_quadtree_load(failed, "x.qt", &t), GROVE_ERR_INVALID_ARG);
        }
        grove_ctx_destroy(failed);
    }
    CHECK_ERR(c, grove_quadtree_build(c, &p, NULL, NULL), GROVE_ERR_INVALID_ARG, "%s: out is NULL",
              B);
    t = (grove_quadtree *)&o; /* must be overwritten with NULL */
    CHECK_ERR(c, grove_quadtree_build(c, NULL, NULL, &t), GROVE_ERR_INVALID_ARG, "%s: pts is NULL",
              B);
    CHECK(t == NULL);
    p.dims = 4;
    CHECK_ERR(c, grove_quadtree_build(c, &p, NULL, &t), GROVE_ERR_INVALID_ARG,
              "%s: pts->dims must be 2 or 3, got 4", B);
    p.dims = 1;
    CHECK_ERR(c, grove_quadtree_build(c, &p, NULL, &t), GROVE_ERR_INVALID_ARG,
              "%s: pts->dims must be 2 or 3, got 1", B);
    p.dims = 2;
    big = p;
    big.n = (size_t)UINT32_MAX + 1; /* rejected before any point is read */
    CHECK_ERR(c, grove_quadtree_build(c, &big, NULL, &t), GROVE_ERR_LIMIT,
              "%s: pts->n = 4294967296 exceeds the limit of 4294967295 points", B);
    big.n = 5;
    big.xyz = NULL;
    CHECK_ERR(c, grove_quadtree_build(c, &big, NULL, &t), GROVE_ERR_INVALID_ARG,
              "%s: pts->xyz is NULL with pts->n = 5", B);

    grove_quadtree_default_opts(&o);
    o.max_depth = -1;
    CHECK_ERR(c, grove_quadtree_build(c, &p, &o, &t), GROVE_ERR_INVALID_ARG,
              "%s: opts->max_depth must be 0..30, got -1", B);
    o.max_depth = 31;
    CHECK_ERR(c, grove_quadtree_build(c, &p, &o, &t), GROVE_ERR_INVALID_ARG,
              "%s: opts->max_depth must be 0..30, got 31", B);
    grove_quadtree_default_opts(&o);
    o.min_points = -1;
    CHECK_ERR(c, grove_quadtree_build(c, &p, &o, &t), GROVE_ERR_INVALID_ARG,
              "%s: opts->min_points must be >= 0, got -1", B);
    grove_quadtree_default_opts(&o);
    o.method = (grove_quadtree_method)2;
    CHECK_ERR(c, grove_quadtree_build(c, &p, &o, &t), GROVE_ERR_INVALID_ARG,
              "%s: opts->method must be GROVE_QUADTREE_MORTON or GROVE_QUADTREE_RECURSIVE, got 2",
              B);
    o.method = (grove_quadtree_method)-1;
    CHECK_ERR(c, grove_quadtree_build(c, &p, &o, &t), GROVE_ERR_INVALID_ARG,
              "%s: opts->method must be GROVE_QUADTREE_MORTON or GROVE_QUADTREE_RECURSIVE, got -1",
              B);
    grove_quadtree_default_opts(&o);
    o.use_bbox = 2;
    CHECK_ERR(c, grove_quadtree_build(c, &p, &o, &t), GROVE_ERR_INVALID_ARG,
              "%s: opts->use_bbox must be 0 or 1, got 2", B);
    o.use_bbox = 1;
    o.bbox[0] = 0;
    o.bbox[1] = 0;
    o.bbox[2] = NAN;
    o.bbox[3] = 1;
    CHECK_ERR(c, grove_quadtree_build(c, &p, &o, &t), GROVE_ERR_INVALID_ARG,
              "%s: opts->bbox must be finite, got (0, 0, nan, 1)", B);
    o.bbox[2] = INFINITY;
    CHECK_ERR(c, grove_quadtree_build(c, &p, &o, &t), GROVE_ERR_INVALID_ARG,
              "%s: opts->bbox must be finite, got (0, 0, inf, 1)", B);
    o.bbox[2] = -0.5f;
    CHECK_ERR(c, grove_quadtree_build(c, &p, &o, &t), GROVE_ERR_INVALID_ARG,
              "%s: opts->bbox is inverted (xmin > xmax or ymin > ymax): (0, 0, -0.5, 1)", B);
    o.bbox[2] = 1;
    o.bbox[3] = -1;
    CHECK_ERR(c, grove_quadtree_build(c, &p, &o, &t), GROVE_ERR_INVALID_ARG,
              "%s: opts->bbox is inverted (xmin > xmax or ymin > ymax): (0, 0, 1, -1)", B);
    /* a point outside the given box (point 2 has y = 1 > 0.9) */
    o.bbox[3] = 0.9f;
    for (int m = 0; m < 2; m++) {
        o.method = (grove_quadtree_method)m;
        CHECK_ERR(c, grove_quadtree_build(c, &p, &o, &t), GROVE_ERR_BAD_INPUT,
                  "%s: point 2 (x=0.25, y=1) lies outside opts->bbox (0, 0, 1, 0.899999976)", B);
    }
    /* non-finite coordinates */
    pts_set(&p, 3, 0.5f, NAN);
    CHECK_ERR(c, grove_quadtree_build(c, &p, NULL, &t), GROVE_ERR_BAD_INPUT,
              "%s: point 3 has a non-finite coordinate (x=0.5, y=nan)", B);
    pts_set(&p, 1, -INFINITY, 2.0f);
    CHECK_ERR(c, grove_quadtree_build(c, &p, NULL, &t), GROVE_ERR_BAD_INPUT,
              "%s: point 1 has a non-finite coordinate (x=-inf, y=2)", B);
    CHECK(t == NULL);
    pts_set(&p, 1, 1.0f, 0.5f);
    pts_set(&p, 3, 0.75f, 0.75f);
    /* z is ignored, NaN or not */
    {
        grove_points p3 = pts_new(2, 3);
        pts_set(&p3, 0, 1.0f, 2.0f);
        pts_set(&p3, 1, 3.0f, 4.0f);
        p3.xyz[5] = NAN;
        CHECK_OK(c, grove_quadtree_build(c, &p3, NULL, &t));
        grove_quadtree_destroy(t);
        t = NULL;
        free(p3.xyz);
    }

    /* queries */
    CHECK_OK(c, grove_quadtree_build(c, &p, NULL, &good));
    CHECK_ERR(c, grove_quadtree_query_boxes(c, good, q, 1, NULL), GROVE_ERR_INVALID_ARG,
              "grove_quadtree_query_boxes: out is NULL");
    memset(&res, 0xAB, sizeof res);
    CHECK_ERR(c, grove_quadtree_query_boxes(c, NULL, q, 1, &res), GROVE_ERR_INVALID_ARG,
              "grove_quadtree_query_boxes: t is NULL");
    CHECK(res.offsets == NULL && res.indices == NULL && res.num_queries == 0);
    CHECK_ERR(c, grove_quadtree_query_boxes(c, good, NULL, 3, &res), GROVE_ERR_INVALID_ARG,
              "grove_quadtree_query_boxes: boxes is NULL with nq = 3");
    {
        float qq[8] = {0, 0, 1, 1, 0, NAN, 1, 1};
        CHECK_ERR(c, grove_quadtree_query_boxes(c, good, qq, 2, &res), GROVE_ERR_INVALID_ARG,
                  "grove_quadtree_query_boxes: query 1 has a NaN coordinate (0, nan, 1, 1)");
    }
    CHECK_OK(c, grove_quadtree_query_boxes(c, good, NULL, 0, &res)); /* nq = 0 */
    CHECK(res.num_queries == 0 && res.offsets && res.offsets[0] == 0);
    grove_query_result_free(&res);
    grove_query_result_free(&res); /* zeroed: accepted */
    grove_query_result_free(NULL);

    CHECK_ERR(c, grove_quadtree_knn(c, NULL, q, 1, 1, ind, NULL), GROVE_ERR_INVALID_ARG,
              "grove_quadtree_knn: t is NULL");
    CHECK_ERR(c, grove_quadtree_knn(c, good, q, 1, 0, ind, NULL), GROVE_ERR_INVALID_ARG,
              "grove_quadtree_knn: k must be >= 1, got 0");
    CHECK_ERR(c, grove_quadtree_knn(c, good, q, 1, -3, ind, NULL), GROVE_ERR_INVALID_ARG,
              "grove_quadtree_knn: k must be >= 1, got -3");
    CHECK_ERR(c, grove_quadtree_knn(c, good, NULL, 1, 1, ind, NULL), GROVE_ERR_INVALID_ARG,
              "grove_quadtree_knn: queries is NULL with nq = 1");
    CHECK_ERR(c, grove_quadtree_knn(c, good, q, 1, 1, NULL, NULL), GROVE_ERR_INVALID_ARG,
              "grove_quadtree_knn: indices is NULL with nq = 1");
    {
        float qq[4] = {0, 0, INFINITY, 1};
        CHECK_ERR(c, grove_quadtree_knn(c, good, qq, 2, 1, ind, NULL), GROVE_ERR_INVALID_ARG,
                  "grove_quadtree_knn: query 1 is not finite (x=inf, y=1)");
    }
    CHECK_OK(c, grove_quadtree_knn(c, good, NULL, 0, 3, NULL, NULL));

    CHECK_ERR(c, grove_quadtree_save(c, NULL, "x.qt"), GROVE_ERR_INVALID_ARG,
              "grove_quadtree_save: t is NULL");
    CHECK_ERR(c, grove_quadtree_save(c, good, NULL), GROVE_ERR_INVALID_ARG,
              "grove_quadtree_save: path is NULL");
    CHECK_STATUS(c, grove_quadtree_save(c, good, "/nonexistent-dir-grove/x.qt"), GROVE_ERR_IO);
    CHECK_ERR(c, grove_quadtree_load(c, "x.qt", NULL), GROVE_ERR_INVALID_ARG,
              "grove_quadtree_load: out is NULL");
    CHECK_ERR(c, grove_quadtree_load(c, NULL, &t), GROVE_ERR_INVALID_ARG,
              "grove_quadtree_load: path is NULL");
    CHECK_ERR(c, grove_quadtree_load(c, "/nonexistent-dir-grove/x.qt", &t), GROVE_ERR_IO,
              "/nonexistent-dir-grove/x.qt: cannot open: No such file or directory");

    /* accessors and destroy accept NULL */
    grove_quadtree_destroy(NULL);
    CHECK(grove_quadtree_num_nodes(NULL) == 0 && grove_quadtree_nodes(NULL) == NULL);
    CHECK(grove_quadtree_num_points(NULL) == 0 && grove_quadtree_points(NULL) == NULL);
    CHECK(grove_quadtree_index(NULL) == NULL);
    grove_quadtree_default_opts(NULL);
    grove_quadtree_default_opts(&o);
    CHECK(o.max_depth == 16 && o.min_points == 16 && o.method == GROVE_QUADTREE_MORTON &&
          o.use_bbox == 0);
    /* n = 0 without a bbox: a root with an all-zero box */
    {
        grove_points e = {NULL, 0, 2};
        CHECK_OK(c, grove_quadtree_build(c, &e, NULL, &t));
        if (t) {
            const grove_quadtree_node *r = grove_quadtree_nodes(t);
            CHECK(grove_quadtree_num_nodes(t) == 1 && r[0].first_child == -1 && r[0].begin == 0 &&
                  r[0].end == 0 && r[0].xmin == 0 && r[0].ymin == 0 && r[0].xmax == 0 &&
                  r[0].ymax == 0 && !signbit(r[0].xmin));
            CHECK(grove_quadtree_points(t) == NULL && grove_quadtree_index(t) == NULL);
        }
        grove_quadtree_destroy(t);
        t = NULL;
    }
    grove_quadtree_destroy(good);
    free(p.xyz);
}

/* ---- save / load ---- */

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *b;
    long sz;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = (unsigned char *)tu_malloc((size_t)sz + 1);
    *len = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

static void write_all(const char *path, const unsigned char *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, len, f) != len) FAIL("cannot write %s", path);
    if (f) fclose(f);
}

static void put_u32(unsigned char *b, uint32_t v)
{
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Writes a modified copy of the file and expects load to reject it exactly. */
#define CORRUPT_EXPECT(mod_code, want, ...)                                                        \
    do {                                                                                           \
        unsigned char *m_ = (unsigned char *)tu_malloc(len + 64);                                  \
        size_t mlen = len;                                                                         \
        grove_quadtree *l_ = NULL;                                                                 \
        memcpy(m_, file, len);                                                                     \
        mod_code;                                                                                  \
        write_all(bad, m_, mlen);                                                                  \
        CHECK_ERR(c, grove_quadtree_load(c, bad, &l_), want, __VA_ARGS__);                         \
        CHECK(l_ == NULL);                                                                         \
        grove_quadtree_destroy(l_);                                                                \
        free(m_);                                                                                  \
    } while (0)

static void test_save_load(tu_rng *r)
{
    grove_ctx *c = g_ctx;
    char path[256], bad[256];
    grove_quadtree_opts o;
    grove_points p = gen_uniform(r, 1000, 2, -10.0f, 10.0f);
    grove_quadtree *t = NULL, *l = NULL;
    unsigned char *file, *file2;
    size_t len = 0, len2 = 0, nn, n = p.n;
    snprintf(path, sizeof path, "test_quadtree_%ld.qt", (long)getpid());
    snprintf(bad, sizeof bad, "test_quadtree_%ld_bad.qt", (long)getpid());

    /* round trips, including the empty tree and a 3-level tree with a given bbox */
    for (int v = 0; v < 3; v++) {
        grove_points e = {NULL, 0, 2};
        grove_quadtree_default_opts(&o);
        if (v == 2) {
            o.use_bbox = 1;
            o.bbox[0] = -20;
            o.bbox[1] = -10;
            o.bbox[2] = 10;
            o.bbox[3] = 30;
            o.min_points = 3;
            o.method = GROVE_QUADTREE_RECURSIVE;
        }
        CHECK_OK(c, grove_quadtree_build(c, v == 1 ? &e : &p, &o, &t));
        CHECK_OK(c, grove_quadtree_save(c, t, path));
        CHECK_OK(c, grove_quadtree_load(c, path, &l));
        if (t && l) {
            grove_quadtree_opts a, b;
            qt_trees_equal(t, l, "save -> load");
            grove_quadtree_get_opts(t, &a);
            grove_quadtree_get_opts(l, &b);
            if (memcmp(&a, &b, sizeof a)) FAIL("save -> load: options differ");
            file = read_all(path, &len);
            CHECK_OK(c, grove_quadtree_save(c, l, path)); /* overwrites */
            file2 = read_all(path, &len2);
            if (!file || !file2 || len != len2 || memcmp(file, file2, len))
                FAIL("save -> load -> save: files differ");
            if (v == 1 && len != 64 + 32) FAIL("empty tree file is %zu bytes", len);
            free(file);
            free(file2);
        }
        grove_quadtree_destroy(t);
        grove_quadtree_destroy(l);
        t = l = NULL;
    }

    /* corrupted files, from the default tree of p */
    CHECK_OK(c, grove_quadtree_build(c, &p, NULL, &t));
    CHECK_OK(c, grove_quadtree_save(c, t, path));
    file = read_all(path, &len);
    if (!t || !file) {
        FAIL("cannot set up the corruption tests");
        goto end;
    }
    nn = grove_quadtree_num_nodes(t);
    if (len != 64 + 32 * nn + 12 * n) FAIL("file is %zu bytes", len);
    if (memcmp(file, "GROVE-QT", 8) || get_u32(file + 8) != 1) FAIL("bad magic or version");
    {
        const grove_quadtree_node *nd = grove_quadtree_nodes(t);
        size_t pos_nodes = 64, pos_pts = 64 + 32 * nn, pos_idx = pos_pts + 8 * n;
        uint32_t idx0 = get_u32(file + pos_idx);
        (void)idx0;
        if (nd[0].first_child != 1 || nd[1].end == nd[1].begin) FAIL("unexpected test tree");
        CORRUPT_EXPECT(m_[0] = 'X', GROVE_ERR_BAD_INPUT,
                       "%s: not a grove quadtree file (it does not start with \"GROVE-QT\")", bad);
        CORRUPT_EXPECT(mlen = 5, GROVE_ERR_BAD_INPUT,
                       "%s: not a grove quadtree file (it does not start with \"GROVE-QT\")", bad);
        CORRUPT_EXPECT(mlen = 20, GROVE_ERR_BAD_INPUT,
                       "%s: truncated header: 20 bytes, the header has 64", bad);
        CORRUPT_EXPECT(put_u32(m_ + 8, 2), GROVE_ERR_BAD_INPUT,
                       "%s: unsupported quadtree file version 2 (this build reads version 1)", bad);
        CORRUPT_EXPECT(put_u32(m_ + 12, 7), GROVE_ERR_BAD_INPUT,
                       "%s: header: reserved fields (bytes 12 and 44) must be 0", bad);
        CORRUPT_EXPECT(mlen = len - 5, GROVE_ERR_BAD_INPUT,
                       "%s: truncated: %zu bytes, the header announces %zu (%zu nodes, %zu "
                       "points)",
                       bad, len - 5, len, nn, n);
        CORRUPT_EXPECT((mlen = len + 3, memset(m_ + len, 0, 3)), GROVE_ERR_BAD_INPUT,
                       "%s: %zu bytes, the header announces %zu (%zu nodes, %zu points): trailing "
                       "data",
                       bad, len + 3, len, nn, n);
        CORRUPT_EXPECT(put_u32(m_ + 16, (uint32_t)n + 1), GROVE_ERR_BAD_INPUT,
                       "%s: truncated: %zu bytes, the header announces %zu (%zu nodes, %zu "
                       "points)",
                       bad, len, len + 12, nn, n + 1);
        CORRUPT_EXPECT(put_u32(m_ + 32, 31), GROVE_ERR_BAD_INPUT,
                       "%s: header: options out of range (max_depth 31, min_points 16, method 0)",
                       bad);
        CORRUPT_EXPECT(put_u32(m_ + 36, 5000), GROVE_ERR_BAD_INPUT,
                       "%s: node 0 is split but has %zu points at level 0 (min_points = 5000, "
                       "max_depth = 16)",
                       bad, n);
        /* node 1 (the root's first child): its begin moved */
        CORRUPT_EXPECT(put_u32(m_ + pos_nodes + 32 + 24, 1), GROVE_ERR_BAD_INPUT,
                       "%s: node 0: the ranges of its children 1..4 do not partition its range "
                       "[0, %zu)",
                       bad, n);
        /* node 2's xmin nudged by one ulp */
        CORRUPT_EXPECT(put_u32(m_ + pos_nodes + 64, get_u32(m_ + pos_nodes + 64) + 1),
                       GROVE_ERR_BAD_INPUT,
                       "%s: node 2: its box is not quadrant 1 of its parent 0's box", bad);
        /* the root's first_child */
        CORRUPT_EXPECT(put_u32(m_ + pos_nodes + 20, 5), GROVE_ERR_BAD_INPUT,
                       "%s: node 0: first_child is 5, the breadth-first layout puts its children "
                       "at 1",
                       bad);
        /* node 3's level */
        CORRUPT_EXPECT(put_u32(m_ + pos_nodes + 3 * 32 + 16, 2), GROVE_ERR_BAD_INPUT,
                       "%s: node 3: level 2, its parent 0 has level 0", bad);
        /* one node too many announced (and present) */
        CORRUPT_EXPECT(
            (put_u32(m_ + 24, (uint32_t)nn + 1), mlen = len + 32,
             memmove(m_ + pos_pts + 32, m_ + pos_pts, len - pos_pts), memset(m_ + pos_pts, 0, 32)),
            GROVE_ERR_BAD_INPUT, "%s: node %zu is not the child of any earlier node", bad, nn);
        /* point 0 (in the root's TL child) moved to the root's right edge */
        CORRUPT_EXPECT(memcpy(m_ + pos_pts, &nd[0].xmax, 4), GROVE_ERR_BAD_INPUT,
                       "%s: point 0 (x=%.9g, y=%.9g) is not in quadrant 0 of node 0, where node 1 "
                       "puts it",
                       bad, (double)nd[0].xmax, (double)grove_quadtree_points(t)[1]);
        {
            float nanv = NAN;
            CORRUPT_EXPECT(memcpy(m_ + pos_pts + 8 * 3 + 4, &nanv, 4), GROVE_ERR_BAD_INPUT,
                           "%s: point 3 (x=%.9g, y=nan) is not finite or lies outside the root "
                           "box",
                           bad, (double)grove_quadtree_points(t)[6]);
        }
        CORRUPT_EXPECT(put_u32(m_ + pos_idx + 4 * (n - 1), (uint32_t)n + 5), GROVE_ERR_BAD_INPUT,
                       "%s: index[%zu] = %zu is out of range (%zu points)", bad, n - 1, n + 5, n);
        /* two index entries of one leaf swapped */
        {
            size_t leaf = 0;
            while (nd[leaf].first_child >= 0 || nd[leaf].end - nd[leaf].begin < 2) leaf++;
            size_t j = nd[leaf].begin;
            uint32_t a = grove_quadtree_index(t)[j], b = grove_quadtree_index(t)[j + 1];
            CORRUPT_EXPECT((put_u32(m_ + pos_idx + 4 * j, b), put_u32(m_ + pos_idx + 4 * j + 4, a)),
                           GROVE_ERR_BAD_INPUT,
                           "%s: leaf %zu: index[%zu] = %u and index[%zu] = %u are not ascending "
                           "(input order)",
                           bad, leaf, j, b, j + 1, a);
        }
    }
    /* a directory is not a file */
    CHECK_ERR(c, grove_quadtree_load(c, ".", &l), GROVE_ERR_IO, ".: not a regular file");
    free(file);
end:
    grove_quadtree_destroy(t);
    remove(path);
    remove(bad);
    free(p.xyz);
}

#ifdef GROVE_HAVE_CUDA
/* grove_quadtree_build_device's own checks, done on the device. */
static void test_device_invalid(void)
{
    const char *B = "grove_quadtree_build_device";
    grove_points p = pts_new(40, 3);
    grove_quadtree_opts o;
    grove_quadtree *t = NULL;
    float *d = NULL;
    size_t bytes = 40 * 3 * sizeof(float);
    for (size_t i = 0; i < 40; i++) pts_set(&p, i, (float)i, (float)(40 - i));
    p.xyz[5 * 3 + 1] = NAN;  /* y of point 5 */
    p.xyz[9 * 3] = INFINITY; /* x of point 9: 5 is reported, the first */
    p.xyz[7 * 3 + 2] = NAN;  /* z is ignored */
    if (cudaMalloc((void **)&d, bytes) != cudaSuccess ||
        cudaMemcpy(d, p.xyz, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
        FAIL("cudaMalloc/cudaMemcpy failed");
        cudaFree(d);
        free(p.xyz);
        return;
    }
    CHECK_ERR(g_ctx, grove_quadtree_build_device(g_ctx, d, 40, 3, NULL, &t), GROVE_ERR_BAD_INPUT,
              "%s: point 5 has a non-finite coordinate (x=5, y=nan)", B);
    CHECK(t == NULL);
    grove_quadtree_default_opts(&o);
    o.use_bbox = 1;
    o.bbox[0] = 0.0f;
    o.bbox[1] = 0.0f;
    o.bbox[2] = 3.5f;
    o.bbox[3] = 100.0f;
    /* points 0..3 lie inside */
    CHECK_STATUS(g_ctx, grove_quadtree_build_device(g_ctx, d, 4, 3, &o, &t), GROVE_OK);
    grove_quadtree_destroy(t);
    t = NULL;
    CHECK_ERR(g_ctx, grove_quadtree_build_device(g_ctx, d, 40, 3, &o, &t), GROVE_ERR_BAD_INPUT,
              "%s: point 4 (x=4, y=36) lies outside opts->bbox (0, 0, 3.5, 100)", B);
    CHECK_ERR(g_ctx, grove_quadtree_build_device(g_ctx, d, 40, 4, NULL, &t), GROVE_ERR_INVALID_ARG,
              "%s: dims must be 2 or 3, got 4", B);
    CHECK_ERR(g_ctx, grove_quadtree_build_device(g_ctx, NULL, 40, 2, NULL, &t),
              GROVE_ERR_INVALID_ARG, "%s: d_xyz is NULL with n = 40", B);
    CHECK_ERR(g_cpu, grove_quadtree_build_device(g_cpu, d, 40, 2, NULL, &t), GROVE_ERR_UNSUPPORTED,
              "%s: needs a CUDA context", B);
    CHECK_ERR(g_cpu, grove_quadtree_download(g_cpu, NULL), GROVE_ERR_INVALID_ARG,
              "grove_quadtree_download: t is NULL");
    cudaFree(d);
    free(p.xyz);
}
#endif

/* ---- main ---- */

static int usage(void)
{
    fprintf(stderr, "usage: test_quadtree [--backend cpu|cuda] [--large N] [--seed S] "
                    "[--only morton]\n");
    return 2;
}

#ifdef GROVE_HAVE_CUDA
void grove__qt_morton_tune(int sorted_levels); /* quadtree_cuda.h */

/* The CUDA morton build with its radix sort forced to cover only the first few levels, so that
 * the runs below get their deeper digits afterwards at every size: small runs sorted in shared
 * memory, big ones (duplicates, all equal) by the segmented sort. */
static void test_sorted_levels(tu_rng *r)
{
    static const int levels[] = {1, 2, 4, 7, 8};
    grove_quadtree_opts o;
    char what[128];
    for (size_t i = 0; i < sizeof levels / sizeof *levels; i++) {
        grove__qt_morton_tune(levels[i]);
        snprintf(what, sizeof what, "uniform n=100000, %d sorted levels", levels[i]);
        run_set(r, gen_uniform(r, 100000, 2, -1.0f, 1.0f), NULL, what, 16, 16, NULL);
        snprintf(what, sizeof what, "uniform n=1000, %d sorted levels", levels[i]);
        run_set(r, gen_uniform(r, 1000, 2, 0.0f, 1.0f), NULL, what, 16, 16, NULL);
        grove_quadtree_default_opts(&o);
        o.min_points = 4;
        snprintf(what, sizeof what, "gaussian clusters, %d sorted levels", levels[i]);
        run_set(r, gen_clusters(r, 100000), &o, what, 16, 16, NULL);
        snprintf(what, sizeof what, "7 distinct points x 50000, %d sorted levels", levels[i]);
        run_set(r, gen_dups(r, 50000, 7), NULL, what, 16, 16, NULL);
        o.min_points = 40; /* leaves beyond the shared-memory re-sort */
        snprintf(what, sizeof what, "uniform n=200000 min_points=40, %d sorted levels",
                 levels[i]);
        run_set(r, gen_uniform(r, 200000, 2, -5.0f, 5.0f), &o, what, 16, 16, NULL);
    }
    grove__qt_morton_tune(0);
}
#endif

int main(int argc, char **argv)
{
    tu_args args = {"cpu", 0, 20261122, NULL};
    const char *backend;
    size_t large;
    uint64_t seed;
    grove_ctx_opts o;
    tu_rng r;
    if (tu_parse_args(argc, argv, &args) != 0) return usage();
    backend = args.backend;
    large = args.large;
    seed = args.seed;
    if (args.only && strcmp(args.only, "morton") != 0) return usage();
    g_only_morton = args.only != NULL;
    grove_ctx_default_opts(&o);
    o.backend = GROVE_BACKEND_CPU;
    o.num_threads = 1;
    if (grove_ctx_create(&o, &g_one) != GROVE_OK) return 1;
    o.num_threads = 0;
    if (!strcmp(backend, "cuda")) {
        if (tu_cuda_ctx("test_quadtree", &o, &g_ctx) != 0) {
            grove_ctx_destroy(g_one);
            return TEST_SKIP;
        }
        if (grove_ctx_create(&o, &g_cpu) != GROVE_OK) return 1;
    } else if (!strcmp(backend, "cpu")) {
        if (grove_ctx_create(&o, &g_ctx) != GROVE_OK) return 1;
    } else {
        return usage();
    }
    printf("test_quadtree: backend %s, seed %llu\n", backend, (unsigned long long)seed);
    r.s = seed;

    if (large) {
        char what[64];
        snprintf(what, sizeof what, "uniform n=%zu", large);
        run_set(&r, gen_uniform(&r, large, 2, -1e4f, 1e4f), NULL, what, 8, 8, NULL);
#ifdef GROVE_HAVE_CUDA
        /* small enough for compute-sanitizer: the CUDA build's deep-digit paths too */
        if (g_cpu && large <= 100000) {
            grove__qt_morton_tune(4);
            run_set(&r, gen_uniform(&r, large, 2, -1.0f, 1.0f), NULL, "4 sorted levels", 8, 8,
                    NULL);
            run_set(&r, gen_dups(&r, large, 5), NULL, "duplicates, 4 sorted levels", 8, 8, NULL);
            grove__qt_morton_tune(0);
        }
#endif
    } else {
        test_invalid();
#ifdef GROVE_HAVE_CUDA
        if (g_cpu) test_device_invalid();
#endif
        test_save_load(&r);
        test_datasets(&r);
#ifdef GROVE_HAVE_CUDA
        if (g_cpu) test_sorted_levels(&r);
#endif
    }
    grove_ctx_destroy(g_ctx);
    grove_ctx_destroy(g_cpu);
    grove_ctx_destroy(g_one);
    return tu_finish("test_quadtree");
}
