/*
 * test_kdtree.c - the k-d tree module: a structural validator of built trees, kNN and radius
 * search against float64 brute force (exact indices and squared distances, ties included),
 * thread-count independence, degenerate and extreme inputs, bad input, save and load.
 *
 * Usage: test_kdtree [--backend cpu|cuda] [--large N] [--seed S] [--only sanitize]
 * --large N runs only the large pass at N points (validator plus brute force on a few
 * queries). With --backend cuda the trees are built and queried on the GPU, and every GPU
 * tree is compared byte for byte with the trees of the CPU backend on 1 and 5 threads, and so
 * is the tree of grove_kdtree_build_device() on the same points (after the download); exit
 * 77 (skipped) where no GPU can be used. --only sanitize runs a few small cases of every kind
 * (for compute-sanitizer, which slows the GPU code down a hundredfold).
 */
#define _POSIX_C_SOURCE 200809L

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grove/kdtree.h"
#include "qt_testdata.h"
#include "kd_testdata.h"
#include "testutil.h"
#ifdef GROVE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* ---- point sets: n points of D doubles; kinds below ---- */

/* K_HUGE (double only) reaches DBL_MAX, so extents and distances overflow to infinity */
enum {
    K_UNIFORM,
    K_CLUSTER,
    K_LATTICE,
    K_DUPS,
    K_EQUAL,
    K_LINE,
    K_EXTREME,
    K_GEOM,
    K_HUGE,
    K_COUNT
};
static const char *kind_name[] = {"uniform",   "clustered", "lattice",   "duplicates", "all-equal",
                                  "collinear", "extreme",   "geometric", "huge"};

static double *gen(tu_rng *r, int kind, size_t n, int D)
{
    double *x = (double *)tu_malloc(n * (size_t)D * sizeof *x);
    double c[6][8], s[6], dup[7][8];
    for (int a = 0; a < 6; a++) {
        for (int d = 0; d < D; d++) c[a][d] = tu_f32(r, -100.0f, 100.0f);
        s[a] = a == 0 ? 1e-4 : tu_f32(r, 0.01f, 3.0f);
    }
    for (int a = 0; a < 7; a++)
        for (int d = 0; d < D; d++) dup[a][d] = tu_f32(r, -5.0f, 5.0f);
    for (size_t i = 0; i < n; i++) {
        double *p = x + i * (size_t)D;
        int a = (int)(tu_u32(r) % 6);
        double v = tu_f32(r, -50.0f, 50.0f);
        for (int d = 0; d < D; d++) {
            switch (kind) {
            case K_UNIFORM: p[d] = (double)tu_next(r) / 18446744073709551616.0 * 10.0 - 3.0; break;
            case K_CLUSTER: p[d] = c[a][d] + s[a] * gauss(r); break;
            case K_LATTICE: p[d] = 0.25 * (double)(tu_u32(r) % 16); break;
            case K_DUPS: p[d] = dup[a][d]; break;
            case K_EQUAL: p[d] = 1.5; break;
            case K_LINE: p[d] = d == 0 ? 3.25 : v * (double)(d + 1); break;
            case K_EXTREME: {
                static const double sp[] = {1e30, -1e30, 1e-30, -1e-30, 1e-40, -1e-45,
                                            0.0,  -0.0,  3e38,  -3e38,  1.0,   1e-300};
                uint32_t k = tu_u32(r) % 14;
                p[d] = k < 12 ? sp[k] : tu_f32(r, -1.0f, 1.0f) * (k == 12 ? 1e30 : 1e-30);
                break;
            }
            case K_GEOM: p[d] = d == 0 ? ldexp(1.0, -(int)(i % 1000)) : (double)(i % 3); break;
            case K_HUGE: {
                static const double sp[] = {DBL_MAX,  -DBL_MAX, 1e308, -1e307,
                                            4.9e-324, 0.0,      1.0,   -2.5};
                uint32_t k = tu_u32(r) % 10;
                p[d] = k < 8 ? sp[k] : tu_f32(r, -1.0f, 1.0f) * 1e300;
                break;
            }
            }
        }
    }
    return x;
}

/* The coordinates as the tree sees them: float input is rounded to float first. */
typedef struct set {
    grove_coords c;
    double *ref; /* n * D doubles equal to the stored coordinates */
    void *own;
} set;

static set make_set(double *x, size_t n, int D, grove_coord_type ty)
{
    set s;
    s.c.n = n;
    s.c.dims = D;
    s.c.type = ty;
    s.ref = x;
    if (ty == GROVE_COORD_F32) {
        float *f = (float *)tu_malloc(n * (size_t)D * sizeof *f);
        for (size_t i = 0; i < n * (size_t)D; i++) {
            f[i] = (float)x[i];
            x[i] = (double)f[i];
        }
        s.own = f;
    } else {
        s.own = NULL;
    }
    s.c.data = ty == GROVE_COORD_F32 ? s.own : (const void *)x;
    return s;
}

static void free_set(set *s)
{
    free(s->ref);
    free(s->own);
}

/* ---- structural validator ---- */

static int validate(const grove_kdtree *t, const set *s, int leaf_size, const char *what)
{
    const int D = s->c.dims;
    const size_t n = s->c.n, cs = 2 * (size_t)D;
    const grove_kdtree_node *nd = grove_kdtree_nodes(t);
    const double *bx = grove_kdtree_bounds(t);
    const uint64_t *ix = grove_kdtree_index(t);
    const void *pts = grove_kdtree_points(t);
    size_t nn = grove_kdtree_num_nodes(t), visited = 0, maxdepth = 0;
    uint64_t *stk, *dep;
    size_t sp = 0;
    uint8_t *seen;
    int before = tu_failures;
    size_t es = s->c.type == GROVE_COORD_F64 ? 8 : 4;

    CHECK_MSG(grove_kdtree_num_points(t) == n, "%s", what);
    CHECK_MSG(grove_kdtree_dims(t) == D, "%s", what);
    CHECK_MSG(nn >= 1 && nd && bx, "%s: %zu nodes", what, nn);
    if (tu_failures > before) return 0;
    CHECK_MSG(nd[0].begin == 0 && nd[0].end == n, "%s: root range", what);
    seen = (uint8_t *)calloc(n ? n : 1, 1);
    for (size_t i = 0; i < n; i++) {
        if (ix[i] >= n || seen[ix[i]]) {
            FAIL("%s: index is not a permutation at %zu", what, i);
            break;
        }
        seen[ix[i]] = 1;
        if (memcmp((const char *)pts + i * es * (size_t)D,
                   (const char *)s->c.data + ix[i] * es * (size_t)D, es * (size_t)D) != 0) {
            FAIL("%s: tree point %zu differs from input point %llu", what, i,
                 (unsigned long long)ix[i]);
            break;
        }
    }
    free(seen);
    /* preorder walk: the k-th node visited must be node k */
    stk = (uint64_t *)tu_malloc((nn + 1) * sizeof *stk);
    dep = (uint64_t *)tu_malloc((nn + 1) * sizeof *dep);
    stk[sp] = 0;
    dep[sp++] = 0;
    while (sp > 0 && tu_failures == before) {
        uint64_t id = stk[--sp], d0 = dep[sp];
        const grove_kdtree_node *a = &nd[id];
        const double *b = bx + id * cs;
        double lo[8], hi[8];
        if (id != visited) {
            FAIL("%s: node %llu visited at preorder position %zu", what, (unsigned long long)id,
                 visited);
            break;
        }
        visited++;
        if (d0 > maxdepth) maxdepth = d0;
        for (int d = 0; d < D; d++) {
            lo[d] = INFINITY;
            hi[d] = -INFINITY;
        }
        for (uint64_t i = a->begin; i < a->end; i++)
            for (int d = 0; d < D; d++) {
                double v = s->ref[ix[i] * (uint64_t)D + (uint64_t)d];
                lo[d] = v < lo[d] ? v : lo[d];
                hi[d] = v > hi[d] ? v : hi[d];
            }
        for (int d = 0; d < D; d++)
            if (!(lo[d] == b[d] && hi[d] == b[D + d])) {
                FAIL("%s: node %llu box axis %d is [%g, %g], its points span [%g, %g]", what,
                     (unsigned long long)id, d, b[d], b[D + d], lo[d], hi[d]);
                break;
            }
        if (a->right == 0) {
            uint64_t cnt = a->end - a->begin;
            CHECK_MSG(a->axis == -1 && a->kind == GROVE_KDTREE_LEAF, "%s: leaf %llu", what,
                      (unsigned long long)id);
            if (cnt > (uint64_t)leaf_size)
                for (int d = 0; d < D; d++)
                    if (lo[d] != hi[d]) {
                        FAIL("%s: leaf %llu holds %llu > %d points that are not all equal", what,
                             (unsigned long long)id, (unsigned long long)cnt, leaf_size);
                        break;
                    }
            for (uint64_t i = a->begin + 1; i < a->end; i++)
                if (ix[i - 1] >= ix[i]) {
                    FAIL("%s: leaf %llu is not in input order", what, (unsigned long long)id);
                    break;
                }
        } else {
            const grove_kdtree_node *l = &nd[id + 1], *r;
            if (a->right <= id + 1 || a->right >= nn) {
                FAIL("%s: node %llu right child %llu", what, (unsigned long long)id,
                     (unsigned long long)a->right);
                break;
            }
            r = &nd[a->right];
            CHECK_MSG(a->axis >= 0 && a->axis < D, "%s: node %llu axis %d", what,
                      (unsigned long long)id, a->axis);
            CHECK_MSG(l->begin == a->begin && l->end == r->begin && r->end == a->end,
                      "%s: node %llu children ranges", what, (unsigned long long)id);
            CHECK_MSG(
                a->kind == GROVE_KDTREE_MEDIAN || a->kind == GROVE_KDTREE_COST ||
                    (a->kind == GROVE_KDTREE_EMPTY && (l->begin == l->end || r->begin == r->end)),
                "%s: node %llu kind %d", what, (unsigned long long)id, a->kind);
            if (a->kind != GROVE_KDTREE_EMPTY)
                CHECK_MSG(l->end > l->begin && r->end > r->begin,
                          "%s: node %llu splits off nothing", what, (unsigned long long)id);
            for (uint64_t i = a->begin; i < a->end && a->axis >= 0 && a->axis < D; i++) {
                double v = s->ref[ix[i] * (uint64_t)D + (uint64_t)a->axis];
                if ((i < l->end) != (v < a->split)) {
                    FAIL("%s: node %llu: point %llu on the wrong side of %g", what,
                         (unsigned long long)id, (unsigned long long)ix[i], a->split);
                    break;
                }
            }
            stk[sp] = a->right;
            dep[sp++] = d0 + 1;
            stk[sp] = id + 1;
            dep[sp++] = d0 + 1;
        }
    }
    CHECK_MSG(tu_failures > before || visited == nn, "%s: visited %zu of %zu nodes", what, visited,
              nn);
    CHECK_MSG(tu_failures > before || maxdepth == grove_kdtree_depth(t), "%s: depth %zu vs %zu",
              what, maxdepth, grove_kdtree_depth(t));
    free(stk);
    free(dep);
    return tu_failures == before;
}

/* ---- brute force ---- */

/* All points sorted by (dist2, index) for query q. */
static void brute(const set *s, const double *q, pr *all)
{
    for (size_t i = 0; i < s->c.n; i++) {
        all[i].d = ref_dist2(s->ref + i * (size_t)s->c.dims, q, s->c.dims);
        all[i].i = i;
    }
    qsort(all, s->c.n, sizeof *all, pr_cmp);
}

/* Queries: half near data points (ties at distance 0), half uniform over the data's span. */
static double *make_queries(tu_rng *r, const set *s, size_t nq)
{
    const int D = s->c.dims;
    double *q = (double *)tu_malloc((nq ? nq : 1) * (size_t)D * sizeof *q);
    for (size_t j = 0; j < nq; j++)
        for (int d = 0; d < D; d++) {
            if (s->c.n > 0 && j % 2 == 0) {
                size_t i = tu_next(r) % s->c.n;
                q[j * (size_t)D + (size_t)d] = s->ref[i * (size_t)D + (size_t)d];
            } else {
                q[j * (size_t)D + (size_t)d] = tu_f32(r, -120.0f, 120.0f);
            }
        }
    return q;
}

/* bf: for each query, all points sorted by (dist2, index) (brute force, n per query). */
static void check_knn(grove_ctx *ctx, const grove_kdtree *t, const set *s, const double *q,
                      size_t nq, int k, const pr *bf, const char *what)
{
    grove_coords qc = {q, nq, s->c.dims, GROVE_COORD_F64};
    uint64_t *ix = (uint64_t *)tu_malloc(nq * (size_t)k * sizeof *ix);
    double *d2 = (double *)tu_malloc(nq * (size_t)k * sizeof *d2);
    int before = tu_failures;
    CHECK_OK(ctx, grove_kdtree_knn(ctx, t, &qc, k, ix, d2));
    for (size_t j = 0; j < nq && tu_failures == before; j++) {
        const pr *all = bf + j * s->c.n;
        for (size_t m = 0; m < (size_t)k; m++) {
            uint64_t wi = m < s->c.n ? all[m].i : UINT64_MAX;
            double wd = m < s->c.n ? all[m].d : INFINITY;
            if (ix[j * (size_t)k + m] != wi || !(d2[j * (size_t)k + m] == wd)) {
                FAIL("%s: knn k=%d query %zu rank %zu: got (%llu, %.17g), want (%llu, %.17g)", what,
                     k, j, m, (unsigned long long)ix[j * (size_t)k + m], d2[j * (size_t)k + m],
                     (unsigned long long)wi, wd);
                break;
            }
        }
    }
    /* indices without distances give the same indices */
    if (tu_failures == before && nq > 0) {
        uint64_t *ix2 = (uint64_t *)tu_malloc(nq * (size_t)k * sizeof *ix2);
        CHECK_OK(ctx, grove_kdtree_knn(ctx, t, &qc, k, ix2, NULL));
        CHECK_MSG(!memcmp(ix, ix2, nq * (size_t)k * sizeof *ix), "%s: knn without dist2", what);
        free(ix2);
    }
    free(ix);
    free(d2);
}

static void check_radius(grove_ctx *ctx, const grove_kdtree *t, const set *s, const double *q,
                         size_t nq, double r, size_t cap, const pr *bf, const char *what)
{
    grove_coords qc = {q, nq, s->c.dims, GROVE_COORD_F64};
    grove_kdtree_result res;
    double r2 = r * r;
    int before = tu_failures;
    CHECK_OK(ctx, grove_kdtree_radius(ctx, t, &qc, r, cap, &res));
    if (tu_failures > before) return;
    CHECK(res.num_queries == nq && res.offsets[0] == 0);
    for (size_t j = 0; j < nq && tu_failures == before; j++) {
        size_t m = 0, got = (size_t)(res.offsets[j + 1] - res.offsets[j]);
        const pr *all = bf + j * s->c.n;
        while (m < s->c.n && all[m].d <= r2) m++;
        if (cap && m > cap) m = cap;
        if (got != m) {
            FAIL("%s: radius %g cap %zu query %zu: %zu matches, want %zu", what, r, cap, j, got, m);
            break;
        }
        for (size_t i = 0; i < m; i++) {
            uint64_t gi = res.indices[res.offsets[j] + i];
            double gd = res.dist2[res.offsets[j] + i];
            if (gi != all[i].i || gd != all[i].d) {
                FAIL("%s: radius query %zu rank %zu: got (%llu, %.17g), want (%llu, %.17g)", what,
                     j, i, (unsigned long long)gi, gd, (unsigned long long)all[i].i, all[i].d);
                break;
            }
        }
    }
    grove_kdtree_result_free(&res);
}

static int same_tree(const grove_kdtree *a, const grove_kdtree *b)
{
    size_t nn = grove_kdtree_num_nodes(a), n = grove_kdtree_num_points(a);
    size_t D = (size_t)grove_kdtree_dims(a);
    size_t es = grove_kdtree_coord_type(a) == GROVE_COORD_F64 ? 8 : 4;
    if (nn != grove_kdtree_num_nodes(b) || n != grove_kdtree_num_points(b)) return 0;
    if (grove_kdtree_depth(a) != grove_kdtree_depth(b)) return 0;
    if (memcmp(grove_kdtree_nodes(a), grove_kdtree_nodes(b), nn * sizeof(grove_kdtree_node)))
        return 0;
    if (memcmp(grove_kdtree_bounds(a), grove_kdtree_bounds(b), nn * 2 * D * sizeof(double)))
        return 0;
    if (n && memcmp(grove_kdtree_index(a), grove_kdtree_index(b), n * sizeof(uint64_t))) return 0;
    if (n && memcmp(grove_kdtree_points(a), grove_kdtree_points(b), n * D * es)) return 0;
    return 1;
}

static grove_ctx *ctx5; /* 5 threads, more than this machine's cores */
static const char *g_backend_name = "many-thread CPU"; /* the backend of the context under test */

#ifdef GROVE_HAVE_CUDA
/* grove_kdtree_build_device() of s's points (uploaded here) gives tree t byte for byte once
 * downloaded, and has no host arrays before. */
static void check_device_build(grove_ctx *ctx, const grove_kdtree *t, const set *s,
                               const grove_kdtree_opts *o, const char *what)
{
    const size_t bytes = s->c.n * (size_t)s->c.dims * (s->c.type == GROVE_COORD_F64 ? 8 : 4);
    grove_coords dc = s->c;
    grove_kdtree *td = NULL;
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess ||
        cudaMemcpy(d, s->c.data, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        FAIL("%s: uploading the points failed", what);
        cudaFree(d);
        return;
    }
    dc.data = d;
    CHECK_OK(ctx, grove_kdtree_build_device(ctx, &dc, o, &td));
    if (td) {
        CHECK_MSG(grove_kdtree_nodes(td) == NULL && grove_kdtree_device(td).nodes != NULL &&
                      grove_kdtree_num_nodes(td) == grove_kdtree_num_nodes(t),
                  "%s: the device-built tree's arrays", what);
        CHECK_OK(ctx, grove_kdtree_download(ctx, td));
        CHECK_MSG(same_tree(t, td), "%s: the device-built tree differs from the %s build", what,
                  g_backend_name);
    }
    grove_kdtree_destroy(td);
    cudaFree(d);
}
#endif


/* One data set: build, validate, thread independence, knn and radius against brute force. */
static void run_case(grove_ctx *ctx, grove_ctx *ctx1, tu_rng *r, int kind, size_t n, int D,
                     grove_coord_type ty, int leaf, size_t nq, int full)
{
    char what[160];
    set s = make_set(gen(r, kind, n, D), n, D, ty);
    grove_kdtree_opts o;
    grove_kdtree *t = NULL, *t1 = NULL;
    double *q;
    pr *bf;
    static const int ks[] = {1, 8, 50, 1024};
    if (kind == K_HUGE && ty == GROVE_COORD_F32) { /* not representable as float */
        free_set(&s);
        return;
    }
    snprintf(what, sizeof what, "%s n=%zu D=%d %s leaf=%d", kind_name[kind], n, D,
             ty == GROVE_COORD_F32 ? "f32" : "f64", leaf);
    grove_kdtree_default_opts(&o);
    o.leaf_size = leaf;
    CHECK_OK(ctx, grove_kdtree_build(ctx, &s.c, &o, &t));
    if (!t) {
        free_set(&s);
        return;
    }
    validate(t, &s, leaf, what);
#ifdef GROVE_HAVE_CUDA
    if (grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA) check_device_build(ctx, t, &s, &o, what);
#endif
    if (ctx1) {
        CHECK_OK(ctx1, grove_kdtree_build(ctx1, &s.c, &o, &t1));
        CHECK_MSG(t1 && same_tree(t, t1), "%s: the %s build and the 1-thread CPU build differ",
                  what, g_backend_name);
        grove_kdtree_destroy(t1);
        t1 = NULL;
        if (ctx5 && n >= 100000) { /* uneven chunks in the parallel partitions */
            CHECK_OK(ctx5, grove_kdtree_build(ctx5, &s.c, &o, &t1));
            CHECK_MSG(t1 && same_tree(t, t1), "%s: the %s build and the 5-thread CPU build differ",
                      what, g_backend_name);
            grove_kdtree_destroy(t1);
        }
    }
    /* the brute-force table holds n entries per query: keep it under 2 * 10^7 */
    if (n > 0 && nq > 2 && nq * n > 20000000) nq = 20000000 / n > 2 ? 20000000 / n : 2;
    q = make_queries(r, &s, nq);
    bf = (pr *)tu_malloc((nq > 0 && n > 0 ? nq * n : 1) * sizeof *bf);
    for (size_t j = 0; j < nq; j++) brute(&s, q + j * (size_t)D, bf + j * n);
    for (int ki = 0; ki < 4; ki++) {
        if (!full && ks[ki] > 50) continue;
        check_knn(ctx, t, &s, q, nq, ks[ki], bf, what);
    }
    if (n <= 1000000) check_knn(ctx, t, &s, q, nq > 4 ? 4 : nq, (int)n + 3, bf, what); /* k > n */
    if (full) {
        double span = kind == K_EXTREME ? 1e30 : 3.0;
        check_radius(ctx, t, &s, q, nq, span, 0, bf, what);
        check_radius(ctx, t, &s, q, nq, span, 5, bf, what);
        check_radius(ctx, t, &s, q, nq, 0.0, 0, bf, what);
    }
    free(bf);
    free(q);
    grove_kdtree_destroy(t);
    free_set(&s);
}

static void test_bad_input(grove_ctx *ctx)
{
    double x[3 * 10];
    float f[2 * 10];
    grove_coords c = {x, 10, 3, GROVE_COORD_F64};
    grove_kdtree_opts o;
    grove_kdtree *t = (grove_kdtree *)&o; /* must be overwritten with NULL */
    uint64_t ix[8];
    grove_kdtree_result res;
    for (int i = 0; i < 30; i++) x[i] = i * 0.5;
    for (int i = 0; i < 20; i++) f[i] = (float)i;

    x[3 * 7 + 1] = NAN;
    CHECK_STATUS(ctx, grove_kdtree_build(ctx, &c, NULL, &t), GROVE_ERR_BAD_INPUT);
    CHECK(t == NULL);
    CHECK_MSG(strstr(grove_ctx_last_error(ctx), "point 7") != NULL, "message: %s",
              grove_ctx_last_error(ctx));
    x[3 * 7 + 1] = 1.0;
    x[3 * 2] = -INFINITY;
    x[3 * 9 + 2] = NAN;
    CHECK_STATUS(ctx, grove_kdtree_build(ctx, &c, NULL, &t), GROVE_ERR_BAD_INPUT);
    CHECK_MSG(strstr(grove_ctx_last_error(ctx), "point 2 ") != NULL &&
                  strstr(grove_ctx_last_error(ctx), "axis 0") != NULL,
              "message: %s", grove_ctx_last_error(ctx));
    x[3 * 2] = 0.0;
    x[3 * 9 + 2] = 0.0;
    {
        grove_coords cf = {f, 10, 2, GROVE_COORD_F32};
        f[2 * 4 + 1] = INFINITY;
        CHECK_STATUS(ctx, grove_kdtree_build(ctx, &cf, NULL, &t), GROVE_ERR_BAD_INPUT);
        CHECK_MSG(strstr(grove_ctx_last_error(ctx), "point 4 ") != NULL, "message: %s",
                  grove_ctx_last_error(ctx));
        f[2 * 4 + 1] = 0.0f;
    }
    CHECK_STATUS(ctx, grove_kdtree_build(ctx, NULL, NULL, &t), GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(ctx, grove_kdtree_build(ctx, &c, NULL, NULL), GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(NULL, grove_kdtree_build(NULL, &c, NULL, &t), GROVE_ERR_INVALID_ARG);
    c.dims = 0;
    CHECK_STATUS(ctx, grove_kdtree_build(ctx, &c, NULL, &t), GROVE_ERR_INVALID_ARG);
    CHECK_MSG(strstr(grove_ctx_last_error(ctx), "dims") != NULL, "message: %s",
              grove_ctx_last_error(ctx));
    c.dims = 9;
    CHECK_STATUS(ctx, grove_kdtree_build(ctx, &c, NULL, &t), GROVE_ERR_INVALID_ARG);
    c.dims = 3;
    c.type = (grove_coord_type)7;
    CHECK_STATUS(ctx, grove_kdtree_build(ctx, &c, NULL, &t), GROVE_ERR_INVALID_ARG);
    c.type = GROVE_COORD_F64;
    c.data = NULL;
    CHECK_STATUS(ctx, grove_kdtree_build(ctx, &c, NULL, &t), GROVE_ERR_INVALID_ARG);
    c.data = x;
    grove_kdtree_default_opts(&o);
    CHECK(o.leaf_size == 12);
    o.leaf_size = 0;
    CHECK_STATUS(ctx, grove_kdtree_build(ctx, &c, &o, &t), GROVE_ERR_INVALID_ARG);
    CHECK_MSG(strstr(grove_ctx_last_error(ctx), "leaf_size") != NULL, "message: %s",
              grove_ctx_last_error(ctx));
    o.leaf_size = GROVE_KDTREE_MAX_LEAF + 1;
    CHECK_STATUS(ctx, grove_kdtree_build(ctx, &c, &o, &t), GROVE_ERR_INVALID_ARG);
    o.leaf_size = GROVE_KDTREE_MAX_LEAF;
    CHECK_OK(ctx, grove_kdtree_build(ctx, &c, &o, &t));
    if (!t) return;
    {
        double q[3 * 4] = {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3};
        grove_coords qc = {q, 4, 3, GROVE_COORD_F64};
        CHECK_STATUS(ctx, grove_kdtree_knn(ctx, t, &qc, 0, ix, NULL), GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_kdtree_knn(ctx, t, &qc, 1, NULL, NULL), GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_kdtree_knn(ctx, NULL, &qc, 1, ix, NULL), GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_kdtree_knn(ctx, t, NULL, 1, ix, NULL), GROVE_ERR_INVALID_ARG);
        q[3 * 3 + 1] = NAN;
        CHECK_STATUS(ctx, grove_kdtree_knn(ctx, t, &qc, 2, ix, NULL), GROVE_ERR_INVALID_ARG);
        CHECK_MSG(strstr(grove_ctx_last_error(ctx), "query 3 ") != NULL, "message: %s",
                  grove_ctx_last_error(ctx));
        CHECK_STATUS(ctx, grove_kdtree_radius(ctx, t, &qc, 1.0, 0, &res), GROVE_ERR_INVALID_ARG);
        CHECK(res.offsets == NULL && res.num_queries == 0);
        q[3 * 3 + 1] = 0.0;
        qc.dims = 2;
        CHECK_STATUS(ctx, grove_kdtree_knn(ctx, t, &qc, 2, ix, NULL), GROVE_ERR_INVALID_ARG);
        CHECK_MSG(strstr(grove_ctx_last_error(ctx), "dims") != NULL, "message: %s",
                  grove_ctx_last_error(ctx));
        qc.dims = 3;
        CHECK_STATUS(ctx, grove_kdtree_radius(ctx, t, &qc, -1.0, 0, &res), GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_kdtree_radius(ctx, t, &qc, NAN, 0, &res), GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_kdtree_radius(ctx, t, &qc, INFINITY, 0, &res),
                     GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_kdtree_radius(ctx, t, &qc, 1.0, 0, NULL), GROVE_ERR_INVALID_ARG);
        /* zero queries are fine */
        qc.n = 0;
        CHECK_OK(ctx, grove_kdtree_knn(ctx, t, &qc, 3, NULL, NULL));
        CHECK_OK(ctx, grove_kdtree_radius(ctx, t, &qc, 1.0, 0, &res));
        CHECK(res.num_queries == 0 && res.offsets && res.offsets[0] == 0);
        grove_kdtree_result_free(&res);
        grove_kdtree_result_free(NULL);
    }
    grove_kdtree_destroy(t);
    grove_kdtree_destroy(NULL);
}

/* float queries on a double tree and the grove_points entry point */
/* A GPU build that does not fit the context's device memory limit fails with a status and a
 * message naming the buffer, and leaves nothing behind. */
static void test_device_oom(tu_rng *r)
{
    grove_ctx_opts co;
    grove_ctx *small = NULL;
    grove_kdtree *t = NULL;
    set s = make_set(gen(r, K_UNIFORM, 200000, 3), 200000, 3, GROVE_COORD_F32);
    grove_ctx_default_opts(&co);
    co.backend = GROVE_BACKEND_CUDA;
    co.device_mem_limit = (size_t)4 << 20;
    CHECK_OK(small, grove_ctx_create(&co, &small));
    if (small) {
        grove_status st = grove_kdtree_build(small, &s.c, NULL, &t);
        CHECK_MSG(st == GROVE_ERR_DEVICE_OUT_OF_MEMORY && !t,
                  "a GPU build over the memory limit: status %d (%s)", (int)st,
                  grove_ctx_last_error(small));
        CHECK_MSG(strstr(grove_ctx_last_error(small), "k-d tree") != NULL,
                  "the out-of-memory message names the buffer: %s", grove_ctx_last_error(small));
        grove_kdtree_destroy(t);
        t = NULL;
        /* the context still works after the failure */
        s.c.n = 1000;
        CHECK_OK(small, grove_kdtree_build(small, &s.c, NULL, &t));
        CHECK_MSG(t && grove_kdtree_num_points(t) == 1000,
                  "a build after an out-of-memory failure");
        grove_kdtree_destroy(t);
    }
    grove_ctx_destroy(small);
    free_set(&s);
}

static void test_mixed_types(grove_ctx *ctx, tu_rng *r)
{
    grove_points p = gen_clusters(r, 3000);
    grove_kdtree *t = NULL;
    set s;
    double *ref = (double *)tu_malloc(p.n * 2 * sizeof *ref);
    for (size_t i = 0; i < p.n * 2; i++) ref[i] = p.xyz[i];
    s = make_set(ref, p.n, 2, GROVE_COORD_F32);
    CHECK_OK(ctx, grove_kdtree_build_points(ctx, &p, NULL, &t));
    if (t) {
        float qf[2 * 64];
        double qd[2 * 64];
        uint64_t a[64 * 5], b[64 * 5];
        grove_coords cf = {qf, 64, 2, GROVE_COORD_F32}, cd = {qd, 64, 2, GROVE_COORD_F64};
        validate(t, &s, 12, "grove_points clusters");
        for (int i = 0; i < 128; i++) {
            qf[i] = tu_f32(r, -100.0f, 100.0f);
            qd[i] = qf[i];
        }
        CHECK_OK(ctx, grove_kdtree_knn(ctx, t, &cf, 5, a, NULL));
        CHECK_OK(ctx, grove_kdtree_knn(ctx, t, &cd, 5, b, NULL));
        CHECK(!memcmp(a, b, sizeof a));
        {
            pr *bf = (pr *)tu_malloc(64 * p.n * sizeof *bf);
            for (size_t j = 0; j < 64; j++) brute(&s, qd + 2 * j, bf + j * p.n);
            check_knn(ctx, t, &s, qd, 64, 7, bf, "grove_points clusters");
            free(bf);
        }
    }
    grove_kdtree_destroy(t);
    grove_points_free(&p);
    free_set(&s);
}

static void test_save_load(grove_ctx *ctx, tu_rng *r)
{
    char path[] = "/tmp/grove_kdtree_testXXXXXX";
    int fd = mkstemp(path);
    set s = make_set(gen(r, K_CLUSTER, 5000, 3), 5000, 3, GROVE_COORD_F64);
    grove_kdtree *t = NULL, *u = NULL;
    if (fd < 0) {
        FAIL("mkstemp");
        free_set(&s);
        return;
    }
    close(fd);
    CHECK_OK(ctx, grove_kdtree_build(ctx, &s.c, NULL, &t));
    CHECK_OK(ctx, grove_kdtree_save(ctx, t, path));
    CHECK_OK(ctx, grove_kdtree_load(ctx, path, &u));
    CHECK_MSG(u && same_tree(t, u), "saved tree differs from the fresh one");
    if (u) validate(u, &s, 12, "loaded tree");
    grove_kdtree_destroy(u);
    u = NULL;
    /* a corrupted file is refused, naming the problem: a box byte, a child link */
    {
        FILE *f = fopen(path, "r+b");
        long len;
        unsigned char byte;
        long at[2];
        at[0] = 64 + 40 * (long)grove_kdtree_num_nodes(t) + 3;
        at[1] = 64 + 16;
        for (int c = 0; c < 2 && f; c++) {
            fseek(f, at[c], SEEK_SET);
            CHECK(fread(&byte, 1, 1, f) == 1);
            byte ^= 0x10;
            fseek(f, at[c], SEEK_SET);
            fwrite(&byte, 1, 1, f);
            fflush(f);
            CHECK_STATUS(ctx, grove_kdtree_load(ctx, path, &u), GROVE_ERR_BAD_INPUT);
            CHECK(u == NULL);
            byte ^= 0x10;
            fseek(f, at[c], SEEK_SET);
            fwrite(&byte, 1, 1, f);
            fflush(f);
        }
        if (f) fclose(f);
        CHECK_OK(ctx, grove_kdtree_load(ctx, path, &u)); /* restored */
        grove_kdtree_destroy(u);
        u = NULL;
        f = fopen(path, "r+b");
        if (f) {
            fseek(f, 0, SEEK_END);
            len = ftell(f);
            fclose(f);
            CHECK(truncate(path, len - 8) == 0);
            CHECK_STATUS(ctx, grove_kdtree_load(ctx, path, &u), GROVE_ERR_BAD_INPUT);
            CHECK(u == NULL);
        }
        f = fopen(path, "wb");
        if (f) {
            fputs("not a tree at all, just some text that is long enough for a header........."
                  "..............................................",
                  f);
            fclose(f);
            CHECK_STATUS(ctx, grove_kdtree_load(ctx, path, &u), GROVE_ERR_BAD_INPUT);
        }
    }
    CHECK_STATUS(ctx, grove_kdtree_load(ctx, "/nonexistent/dir/tree.kdt", &u), GROVE_ERR_IO);
    /* empty, single-point and float trees of other dimensions round-trip too */
    for (int c = 0; c < 3; c++) {
        static const size_t ns[] = {0, 1, 700};
        set e = make_set(gen(r, K_LATTICE, ns[c], 1 + 2 * c), ns[c], 1 + 2 * c, GROVE_COORD_F32);
        grove_kdtree *a = NULL, *b = NULL;
        CHECK_OK(ctx, grove_kdtree_build(ctx, &e.c, NULL, &a));
        CHECK_OK(ctx, grove_kdtree_save(ctx, a, path));
        CHECK_OK(ctx, grove_kdtree_load(ctx, path, &b));
        CHECK_MSG(a && b && same_tree(a, b), "round trip of %zu points", ns[c]);
        grove_kdtree_destroy(a);
        grove_kdtree_destroy(b);
        free_set(&e);
    }
    remove(path);
    grove_kdtree_destroy(t);
    free_set(&s);
}

int main(int argc, char **argv)
{
    tu_args a = {"cpu", 0, 20261122, NULL};
    grove_ctx_opts co;
    grove_ctx *ctx = NULL, *ctx1 = NULL;
    tu_rng r;
    static const size_t sizes[] = {0, 1, 31, 32, 33, 64, 65, 1000};
    if (tu_parse_args(argc, argv, &a)) {
        fprintf(stderr, "usage: test_kdtree [--backend cpu|cuda] [--large N] [--seed S] "
                        "[--only sanitize]\n");
        return 2;
    }
    if (a.only && strcmp(a.only, "sanitize") != 0) {
        fprintf(stderr, "test_kdtree: --only takes 'sanitize', got '%s'\n", a.only);
        return 2;
    }
    r.s = a.seed;
    grove_ctx_default_opts(&co);
    co.backend = GROVE_BACKEND_CPU;
    if (!strcmp(a.backend, "cuda")) {
        /* the context under test is the GPU; the CPU contexts are the reference */
        if (tu_cuda_ctx("test_kdtree", NULL, &ctx) != 0) return TEST_SKIP;
        g_backend_name = "CUDA";
    } else if (!strcmp(a.backend, "cpu")) {
        CHECK_OK(ctx, grove_ctx_create(&co, &ctx));
    } else {
        fprintf(stderr, "test_kdtree: unknown backend '%s'\n", a.backend);
        return 2;
    }
    co.num_threads = 1;
    CHECK_OK(ctx1, grove_ctx_create(&co, &ctx1));
    co.num_threads = 5;
    CHECK_OK(ctx5, grove_ctx_create(&co, &ctx5));
    if (tu_failures) return tu_finish("test_kdtree");

    if (a.only) {
        for (int kind = 0; kind < K_COUNT; kind++)
            run_case(ctx, ctx1, &r, kind, kind % 2 ? 65 : 3000, 2 + kind % 2,
                     (grove_coord_type)(kind / 2 % 2), 12, 4, 1);
        run_case(ctx, ctx1, &r, K_CLUSTER, 20000, 5, GROVE_COORD_F32, 16, 4, 0);
        grove_ctx_destroy(ctx);
        grove_ctx_destroy(ctx1);
        grove_ctx_destroy(ctx5);
        return tu_finish("test_kdtree");
    }
    if (a.large) {
        run_case(ctx, ctx1, &r, K_UNIFORM, a.large, 3, GROVE_COORD_F32, 12, 40, 0);
        run_case(ctx, ctx1, &r, K_CLUSTER, a.large, 2, GROVE_COORD_F64, 12, 40, 0);
        grove_ctx_destroy(ctx);
        grove_ctx_destroy(ctx1);
        grove_ctx_destroy(ctx5);
        return tu_finish("test_kdtree");
    }

    test_bad_input(ctx);
    if (grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA) test_device_oom(&r);
    test_mixed_types(ctx, &r);
    test_save_load(ctx, &r);
    for (int kind = 0; kind < K_COUNT; kind++)
        for (int D = 2; D <= 3; D++)
            for (int ty = 0; ty < 2; ty++)
                for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
                    run_case(ctx, ctx1, &r, kind, sizes[si], D, (grove_coord_type)ty,
                             si % 2 ? 1 : 12, 24, 1);
    /* other dimensions and leaf sizes */
    run_case(ctx, ctx1, &r, K_UNIFORM, 2000, 1, GROVE_COORD_F64, 8, 24, 1);
    run_case(ctx, ctx1, &r, K_CLUSTER, 2000, 5, GROVE_COORD_F32, 16, 24, 1);
    run_case(ctx, ctx1, &r, K_LATTICE, 3000, 8, GROVE_COORD_F64, 64, 24, 1);
    /* 10^5: all kinds, fewer queries (brute force is the cost) */
    for (int kind = 0; kind < K_COUNT; kind++)
        run_case(ctx, ctx1, &r, kind, 100000, 2 + kind % 2, (grove_coord_type)(kind / 2 % 2), 12, 8,
                 kind < 4);
    /* one 10^6 run: validator, thread independence, brute force on a few queries */
    run_case(ctx, ctx1, &r, K_CLUSTER, 1000000, 3, GROVE_COORD_F32, 12, 4, 0);
    grove_ctx_destroy(ctx);
    grove_ctx_destroy(ctx1);
    grove_ctx_destroy(ctx5);
    return tu_finish("test_kdtree");
}
