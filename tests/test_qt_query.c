/*
 * test_qt_query.c - the quadtree queries (grove_quadtree_query_boxes, grove_quadtree_knn) on a
 * CUDA context, compared byte for byte with the CPU backend and with brute force.
 *
 *   test_qt_query [--backend cuda|cpu] [--min-n N] [--max-n N] [--kind K] [--seed S] [--bench N]
 * [--reps R]
 *
 * Data sets: uniform, clustered, duplicate-heavy, lattice (many exact distance ties), collinear
 * (dims 3, z ignored) and extreme (+-1e30 beside tiny values), of 0, 1, 31, 32, 33, 1000, 10^5
 * and 10^6 points (--min-n and --max-n select sizes, e.g. small ones for compute-sanitizer), with
 * three sets of build options (the defaults; deep trees with one point per leaf; shallow trees with
 * big leaves, which take the warp-wide paths of the GPU box query). The reference results come from
 * a CPU context on a tree built there; the CUDA context answers on that host tree (uploaded per
 * call), on a device-only tree (grove_quadtree_build_device) and on a tree with both (downloaded).
 * Where the device build is not available (GROVE_ERR_UNSUPPORTED) a device-only tree is made by
 * hand from the host tree, which tests the queries just the same, and the program says so. Also:
 * identical validation errors on both backends, the CPU-context error on a device-only tree, a
 * device tree used from another CUDA context, and forced device out-of-memory at many limits (the
 * status, a zeroed result, and no device memory left held).
 *
 * --bench N: instead of the tests, times 10^6 box queries of about 10 points and 10^6 kNN queries
 * (k = 8) on N uniform points, GPU (device tree; host tree uploaded per call) and CPU backends,
 * median of R repeats (default 10) after a warm-up, each result checked against the CPU's.
 *
 * Without a GPU (or a CUDA build) --backend cuda prints "SKIP: no GPU" and exits 77.
 */
#define _POSIX_C_SOURCE 200809L

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grove/quadtree.h"
#include "testutil.h"
#ifdef GROVE_HAVE_CUDA
#include <cuda_runtime.h>

#include "quadtree_internal.h"
#include "core_cuda.h"
#endif

static grove_ctx *g_ctx;  /* the backend under test */
static grove_ctx *g_cpu;  /* the CPU reference (== g_ctx with --backend cpu) */
static grove_ctx *g_ctx2; /* a second CUDA context (another owner of device trees) */
static int g_cuda;
static int g_fabricated; /* device trees made by hand: the device build was unavailable */
static size_t g_max_n = (size_t)-1, g_min_n = 0;
static int g_kind = -1; /* --kind: only this data set */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- data ---- */

enum { D_UNIFORM, D_CLUSTER, D_DUPS, D_LATTICE, D_LINE, D_EXTREME, D_KINDS };
static const char *const KIND_NAME[D_KINDS] = {"uniform", "clustered", "duplicates",
                                               "lattice", "collinear", "extreme"};

static double normal(tu_rng *r)
{
    double u = ((double)(tu_next(r) >> 11) + 0.5) / 9007199254740992.0;
    double v = (double)(tu_next(r) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static void put(grove_points *p, size_t i, float x, float y)
{
    float *q = p->xyz + i * (size_t)p->dims;
    q[0] = x;
    q[1] = y;
    if (p->dims == 3) q[2] = (float)(i % 977) - 500.0f; /* ignored by the tree */
}

static float px(const grove_points *p, size_t i) { return p->xyz[i * (size_t)p->dims]; }
static float py(const grove_points *p, size_t i) { return p->xyz[i * (size_t)p->dims + 1]; }

static grove_points gen(tu_rng *r, int kind, size_t n)
{
    grove_points p;
    p.n = n;
    p.dims = kind == D_LINE ? 3 : 2;
    p.xyz = n ? (float *)tu_malloc(n * (size_t)p.dims * sizeof(float)) : NULL;
    float cx[8], cy[8], cs[8];
    size_t pool = n / 40 + 1;
    float *pool_xy = NULL;
    int side = (int)sqrt((double)n / 3.0) + 1;
    for (int c = 0; c < 8; c++) {
        cx[c] = tu_f32(r, -50.0f, 50.0f);
        cy[c] = tu_f32(r, -50.0f, 50.0f);
        cs[c] = c < 2 ? 1e-3f : tu_f32(r, 0.05f, 4.0f);
    }
    if (kind == D_DUPS) {
        pool_xy = (float *)tu_malloc(2 * pool * sizeof(float));
        for (size_t j = 0; j < pool; j++) {
            pool_xy[2 * j] = tu_f32(r, -10.0f, 10.0f);
            pool_xy[2 * j + 1] = tu_f32(r, -10.0f, 10.0f);
        }
    }
    for (size_t i = 0; i < n; i++) {
        float x, y;
        switch (kind) {
        case D_UNIFORM:
            x = tu_f32(r, -100.0f, 100.0f);
            y = tu_f32(r, -100.0f, 100.0f);
            break;
        case D_CLUSTER: {
            int c = (int)(tu_u32(r) % 8);
            x = cx[c] + cs[c] * (float)normal(r);
            y = cy[c] + cs[c] * (float)normal(r);
            break;
        }
        case D_DUPS: { /* about 40 copies of each pool point; one point repeated a lot more */
            size_t j = tu_u32(r) % 64 == 0 ? 0 : tu_u32(r) % pool;
            x = pool_xy[2 * j];
            y = pool_xy[2 * j + 1];
            break;
        }
        case D_LATTICE: /* integer grid, about 3 points per cell: exact ties everywhere */
            x = (float)(tu_u32(r) % (uint32_t)side);
            y = (float)(tu_u32(r) % (uint32_t)side);
            break;
        case D_LINE: { /* half on a vertical line, half on a slanted one */
            float v = tu_f32(r, -40.0f, 40.0f);
            if (i % 2) {
                x = 7.25f;
                y = v;
            } else {
                x = v;
                y = 0.5f * v + 1.0f;
            }
            break;
        }
        default: { /* extreme */
            static const float sp[] = {1e30f, -1e30f, 0.0f, -0.0f, 1e-30f, -1e-38f, 1.5f, 1e20f};
            uint32_t a = tu_u32(r) % 12, b = tu_u32(r) % 12;
            x = a < 8 ? sp[a] : tu_f32(r, -1.0f, 1.0f) * (a < 10 ? 1e30f : 1.0f);
            y = b < 8 ? sp[b] : tu_f32(r, -1.0f, 1.0f) * (b < 10 ? 1e30f : 1.0f);
            break;
        }
        }
        put(&p, i, x, y);
    }
    free(pool_xy);
    return p;
}

/* ---- queries ---- */

static float rnd_in(tu_rng *r, float lo, float hi)
{
    double u = (double)(tu_next(r) >> 11) / 9007199254740992.0;
    return (float)((double)lo + ((double)hi - (double)lo) * u);
}

/* nb boxes: mostly small ones, spanned by a data point and one of its 12 nearest neighbours (or
 * a square of that radius around it), so a few matches each whatever the local density, with
 * edges exactly on point coordinates; and every special case: empty, inverted, zero-area on a
 * point, everything, lines, infinite sides, medium and random boxes. With `heavy` >= 0 at most
 * that many boxes of the kinds that can match a large part of the data (everything, lines,
 * random) and 20 * heavy medium ones are made, which keeps the results of large data sets small.
 * t is p's tree (the neighbours come from the CPU backend, itself checked by brute force). */
static float *gen_boxes(tu_rng *r, const grove_points *p, const grove_quadtree *t,
                        const float root[4], size_t nb, int heavy)
{
    enum { NB = 12 };
    float *b = (float *)tu_malloc(4 * nb * sizeof(float));
    float *ctr = (float *)tu_malloc(2 * nb * sizeof(float));
    uint32_t *nbr = (uint32_t *)tu_malloc(nb * NB * sizeof(uint32_t));
    size_t n = p->n;
    double w = (double)root[2] - root[0], h = (double)root[3] - root[1];
    double mscale = n > 20000 ? sqrt(20000.0 / (double)n) : 1.0;
    int nheavy = 0, nmed = 0;
    for (size_t q = 0; q < nb; q++) {
        size_t i = n ? tu_u32(r) % n : 0;
        ctr[2 * q] = n ? px(p, i) : 0.0f;
        ctr[2 * q + 1] = n ? py(p, i) : 0.0f;
    }
    if (grove_quadtree_knn(g_cpu, t, ctr, nb, NB, nbr, NULL) != GROVE_OK)
        FAIL("gen_boxes: knn: %s", grove_ctx_last_error(g_cpu));
    for (size_t q = 0; q < nb; q++) {
        float *o = b + 4 * q;
        uint32_t c = tu_u32(r) % 20, jn = nbr[q * NB + tu_u32(r) % NB];
        float x = ctr[2 * q], y = ctr[2 * q + 1], x2, y2;
        if (jn == UINT32_MAX) jn = nbr[q * NB]; /* fewer than NB points */
        x2 = jn != UINT32_MAX ? px(p, jn) : 1.0f;
        y2 = jn != UINT32_MAX ? py(p, jn) : 1.0f;
        if (heavy >= 0 && (c == 10 || c == 15 || c == 18) && nheavy++ >= heavy) c = 0;
        if (heavy >= 0 && (c == 16 || c == 17) && nmed++ >= 20 * heavy) c = 0;
        switch (c) {
        case 10: /* everything, in one of three spellings */
            if (q % 3 == 0) {
                o[0] = o[1] = -INFINITY;
                o[2] = o[3] = INFINITY;
            } else if (q % 3 == 1) {
                memcpy(o, root, 4 * sizeof(float));
            } else {
                o[0] = o[1] = -FLT_MAX;
                o[2] = o[3] = FLT_MAX;
            }
            break;
        case 11: /* zero area on a point */
            o[0] = o[2] = x;
            o[1] = o[3] = y;
            break;
        case 13: /* inverted in x or y, or both */
            o[0] = x + 1.0f;
            o[2] = x - 1.0f;
            o[1] = y - 1.0f;
            o[3] = q % 2 ? y + 1.0f : y - 2.0f;
            if (q % 3 == 0) {
                o[0] = x;
                o[2] = nextafterf(x, -INFINITY);
            }
            break;
        case 14: /* empty: beside the root box */
            o[0] = root[2] + 1.0f + (float)fabs(w);
            o[2] = o[0] + 5.0f;
            o[1] = root[1];
            o[3] = root[3];
            if (!isfinite(o[0]) || !isfinite(o[2])) o[0] = o[2] = FLT_MAX;
            break;
        case 15: /* a vertical or horizontal line through a point, infinite */
            if (q % 2) {
                o[0] = o[2] = x;
                o[1] = -INFINITY;
                o[3] = INFINITY;
            } else {
                o[1] = o[3] = y;
                o[0] = -INFINITY;
                o[2] = INFINITY;
            }
            break;
        case 16: /* a medium box */
        case 17: {
            double s = mscale * (0.02 + 0.3 * (double)(tu_u32(r) % 1000) / 1000.0);
            float x0 = rnd_in(r, root[0], root[2]), y0 = rnd_in(r, root[1], root[3]);
            o[0] = x0;
            o[1] = y0;
            o[2] = (float)((double)x0 + s * w);
            o[3] = (float)((double)y0 + s * h);
            if (!isfinite(o[2])) o[2] = FLT_MAX;
            if (!isfinite(o[3])) o[3] = FLT_MAX;
            break;
        }
        case 18: /* a random box anywhere in the root box */
            o[0] = rnd_in(r, root[0], root[2]);
            o[1] = rnd_in(r, root[1], root[3]);
            o[2] = rnd_in(r, root[0], root[2]);
            o[3] = rnd_in(r, root[1], root[3]);
            break;
        case 19: /* one ulp wide, touching a point's coordinates */
            o[0] = x;
            o[1] = nextafterf(y, -INFINITY);
            o[2] = nextafterf(x, INFINITY);
            o[3] = y;
            break;
        case 12: { /* a square around the point reaching its neighbour */
            double d = fmax(fabs((double)x2 - x), fabs((double)y2 - y));
            o[0] = (float)((double)x - d);
            o[2] = (float)((double)x + d);
            o[1] = (float)((double)y - d);
            o[3] = (float)((double)y + d);
            for (int k = 0; k < 4; k++)
                if (isinf(o[k])) o[k] = k < 2 ? -FLT_MAX : FLT_MAX;
            break;
        }
        default: /* small: spanned by the point and a neighbour */
            o[0] = fminf(x, x2);
            o[2] = fmaxf(x, x2);
            o[1] = fminf(y, y2);
            o[3] = fmaxf(y, y2);
            break;
        }
    }
    free(ctr);
    free(nbr);
    return b;
}

/* nq query points: random in and around the root box, exactly on data points, half-integer
 * lattice points (equidistant from many points), far away, and extreme. */
static float *gen_points_q(tu_rng *r, const grove_points *p, const float root[4], size_t nq)
{
    float *qs = (float *)tu_malloc(2 * nq * sizeof(float));
    for (size_t q = 0; q < nq; q++) {
        uint32_t c = tu_u32(r) % 8;
        size_t i = p->n ? tu_u32(r) % p->n : 0;
        /* Queries ~1e38 away see every point at the same rounded distance: the search cannot
         * prune and walks the whole tree (one thread per query on the GPU: seconds on the deep
         * trees of a million points), so only the small data sets get them. */
        if (c == 4 && p->n > 1000) c = 5;
        float x, y;
        double w = (double)root[2] - root[0], h = (double)root[3] - root[1];
        switch (c) {
        case 0:
        case 1:
            x = p->n ? px(p, i) : 0.0f;
            y = p->n ? py(p, i) : 0.0f;
            break;
        case 2:
            x = floorf(p->n ? px(p, i) : 0.0f) + 0.5f;
            y = floorf(p->n ? py(p, i) : 0.0f) + 0.5f;
            if (!isfinite(x) || !isfinite(y)) x = y = 0.5f;
            break;
        case 3:
            x = (float)((double)root[0] - 3.0 * w - 1.0);
            y = (float)((double)root[3] + 0.5 * h);
            if (!isfinite(x)) x = -FLT_MAX;
            if (!isfinite(y)) y = FLT_MAX;
            break;
        case 4:
            x = rnd_in(r, -3e38f, 3e38f);
            y = rnd_in(r, -1e30f, 1e30f);
            break;
        default:
            x = (float)((double)root[0] - 0.1 * w + 1.2 * w * (double)(tu_u32(r) % 100000) / 1e5);
            y = (float)((double)root[1] - 0.1 * h + 1.2 * h * (double)(tu_u32(r) % 100000) / 1e5);
            if (!isfinite(x)) x = 0.0f;
            if (!isfinite(y)) y = 0.0f;
            break;
        }
        qs[2 * q] = x;
        qs[2 * q + 1] = y;
    }
    return qs;
}

/* ---- brute force ---- */

static double d2(double qx, double qy, float x, float y)
{
    double dx = (double)x - qx;
    double dy = (double)y - qy;
    double a = dx * dx;
    double b = dy * dy;
    return a + b;
}

static int worse(double da, uint32_t ia, double db, uint32_t ib)
{
    return da > db || (da == db && ia > ib);
}

/* k nearest of (qx, qy) among p, ascending, padded: a max-heap of size min(k, n). */
static void brute_knn(const grove_points *p, float qx, float qy, int k, uint32_t *oi, double *od)
{
    size_t cap = (size_t)k < p->n ? (size_t)k : p->n, hn = 0;
    double *hd = (double *)tu_malloc((cap + 1) * sizeof(double));
    uint32_t *hi = (uint32_t *)tu_malloc((cap + 1) * sizeof(uint32_t));
    for (size_t i = 0; i < p->n; i++) {
        double d = d2(qx, qy, px(p, i), py(p, i));
        uint32_t id = (uint32_t)i;
        size_t j;
        if (hn < cap) {
            j = hn++;
            while (j > 0 && worse(d, id, hd[(j - 1) / 2], hi[(j - 1) / 2])) {
                hd[j] = hd[(j - 1) / 2];
                hi[j] = hi[(j - 1) / 2];
                j = (j - 1) / 2;
            }
            hd[j] = d;
            hi[j] = id;
            continue;
        }
        if (cap == 0 || !worse(hd[0], hi[0], d, id)) continue;
        j = 0;
        for (;;) {
            size_t l = 2 * j + 1, w = j;
            double wd = d;
            uint32_t wi = id;
            if (l < hn && worse(hd[l], hi[l], wd, wi)) {
                w = l;
                wd = hd[l];
                wi = hi[l];
            }
            if (l + 1 < hn && worse(hd[l + 1], hi[l + 1], wd, wi)) w = l + 1;
            if (w == j) break;
            hd[j] = hd[w];
            hi[j] = hi[w];
            j = w;
        }
        hd[j] = d;
        hi[j] = id;
    }
    /* selection sort from the heap is O(cap^2): sort the heap array instead */
    for (size_t a = 1; a < hn; a++) {
        double td = hd[a];
        uint32_t ti = hi[a];
        size_t b = a;
        while (b > 0 && worse(hd[b - 1], hi[b - 1], td, ti)) {
            hd[b] = hd[b - 1];
            hi[b] = hi[b - 1];
            b--;
        }
        hd[b] = td;
        hi[b] = ti;
    }
    for (size_t j = 0; j < (size_t)k; j++) {
        oi[j] = j < hn ? hi[j] : UINT32_MAX;
        od[j] = j < hn ? hd[j] : INFINITY;
    }
    free(hd);
    free(hi);
}

/* ---- comparisons ---- */

static int result_equal(const grove_query_result *a, const grove_query_result *b, const char *what)
{
    size_t nq = a->num_queries;
    if (nq != b->num_queries) {
        FAIL("%s: %zu vs %zu queries", what, nq, b->num_queries);
        return 0;
    }
    if (!a->offsets || !b->offsets || !a->indices || !b->indices) {
        FAIL("%s: NULL arrays in a result", what);
        return 0;
    }
    if (memcmp(a->offsets, b->offsets, (nq + 1) * sizeof(uint64_t))) {
        size_t q = 0;
        while (a->offsets[q + 1] == b->offsets[q + 1]) q++;
        FAIL("%s: query %zu: %llu vs %llu matches", what, q,
             (unsigned long long)(a->offsets[q + 1] - a->offsets[q]),
             (unsigned long long)(b->offsets[q + 1] - b->offsets[q]));
        return 0;
    }
    if (memcmp(a->indices, b->indices, a->offsets[nq] * sizeof(uint32_t))) {
        size_t i = 0, q = 0;
        while (a->indices[i] == b->indices[i]) i++;
        while (a->offsets[q + 1] <= i) q++;
        FAIL("%s: query %zu: match %llu is %u vs %u", what, q,
             (unsigned long long)(i - a->offsets[q]), a->indices[i], b->indices[i]);
        return 0;
    }
    return 1;
}

/* Queries [0, nbrute) of res against brute force over the input. */
static void brute_boxes(const grove_points *p, const float *boxes, size_t nbrute,
                        const grove_query_result *res, const char *what)
{
    uint32_t *m = (uint32_t *)tu_malloc((p->n + 1) * sizeof(uint32_t));
    for (size_t q = 0; q < nbrute && q < res->num_queries; q++) {
        const float *b = boxes + 4 * q;
        size_t c = 0;
        for (size_t i = 0; i < p->n; i++) {
            float x = px(p, i), y = py(p, i);
            if (x >= b[0] && x <= b[2] && y >= b[1] && y <= b[3]) m[c++] = (uint32_t)i;
        }
        if (res->offsets[q + 1] - res->offsets[q] != c ||
            memcmp(res->indices + res->offsets[q], m, c * sizeof(uint32_t))) {
            FAIL("%s: box %zu (%.9g %.9g %.9g %.9g): %llu matches, brute force %zu or different",
                 what, q, (double)b[0], (double)b[1], (double)b[2], (double)b[3],
                 (unsigned long long)(res->offsets[q + 1] - res->offsets[q]), c);
            break;
        }
    }
    free(m);
}

static void brute_knn_check(const grove_points *p, const float *qs, size_t nbrute, int k,
                            const uint32_t *ind, const double *dd, const char *what)
{
    uint32_t *bi = (uint32_t *)tu_malloc((size_t)k * sizeof(uint32_t));
    double *bd = (double *)tu_malloc((size_t)k * sizeof(double));
    for (size_t q = 0; q < nbrute; q++) {
        brute_knn(p, qs[2 * q], qs[2 * q + 1], k, bi, bd);
        if (memcmp(bi, ind + q * (size_t)k, (size_t)k * sizeof(uint32_t)) ||
            memcmp(bd, dd + q * (size_t)k, (size_t)k * sizeof(double))) {
            size_t j = 0;
            while (bi[j] == ind[q * (size_t)k + j] && j + 1 < (size_t)k) j++;
            FAIL("%s: knn query %zu (%.9g, %.9g) k=%d rank %zu: got %u (%.17g), brute force %u "
                 "(%.17g)",
                 what, q, (double)qs[2 * q], (double)qs[2 * q + 1], k, j, ind[q * (size_t)k + j],
                 dd[q * (size_t)k + j], bi[j], bd[j]);
            break;
        }
    }
    free(bi);
    free(bd);
}

/* ---- trees ---- */

#ifdef GROVE_HAVE_CUDA
/* A device-only tree with h's arrays, made through the internals (the device build was not
 * available); with_host keeps host copies too. */
static grove_quadtree *fabricate(grove_ctx *ctx, const grove_quadtree *h, int with_host)
{
    grove_quadtree *t = (grove_quadtree *)calloc(1, sizeof *t);
    size_t nb = h->num_nodes * sizeof(grove_quadtree_node), pb = 2 * h->n * sizeof(float),
           ib = h->n * sizeof(uint32_t);
    if (!t) return NULL;
    t->opts = h->opts;
    t->n = h->n;
    t->num_nodes = h->num_nodes;
    t->dev_ctx = ctx;
    t->d_nodes_bytes = nb;
    if (grove__cuda_alloc(ctx, (void **)&t->d_nodes, nb, ctx->stream, "test") ||
        grove__cuda_alloc(ctx, (void **)&t->d_pts, pb, ctx->stream, "test") ||
        grove__cuda_alloc(ctx, (void **)&t->d_index, ib, ctx->stream, "test") ||
        grove__cuda_h2d(ctx, t->d_nodes, h->nodes, nb, ctx->stream) ||
        grove__cuda_h2d(ctx, t->d_pts, h->pts, pb, ctx->stream) ||
        grove__cuda_h2d(ctx, t->d_index, h->index, ib, ctx->stream) ||
        grove__cuda_sync(ctx, ctx->stream, "test")) {
        FAIL("fabricate: %s", grove_ctx_last_error(ctx));
        grove_quadtree_destroy(t);
        return NULL;
    }
    if (with_host) {
        t->nodes = (grove_quadtree_node *)tu_malloc(nb);
        memcpy(t->nodes, h->nodes, nb);
        if (h->n) {
            t->pts = (float *)tu_malloc(pb);
            t->index = (uint32_t *)tu_malloc(ib);
            memcpy(t->pts, h->pts, pb);
            memcpy(t->index, h->index, ib);
        }
    }
    return t;
}

/* The same tree built on ctx's device from p; with_host: downloaded as well. Falls back to
 * fabricate() when the device build reports GROVE_ERR_UNSUPPORTED. */
static grove_quadtree *device_tree(grove_ctx *ctx, const grove_points *p,
                                   const grove_quadtree_opts *o, const grove_quadtree *h,
                                   int with_host)
{
    grove_quadtree *t = NULL;
    size_t bytes = p->n * (size_t)p->dims * sizeof(float);
    float *d = NULL;
    grove_status s;
    if (cudaMalloc((void **)&d, bytes ? bytes : 4) != cudaSuccess ||
        cudaMemcpy(d, p->xyz, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
        FAIL("cudaMalloc/cudaMemcpy of %zu bytes failed", bytes);
        cudaFree(d);
        return NULL;
    }
    s = grove_quadtree_build_device(ctx, d, p->n, p->dims, o, &t);
    cudaFree(d);
    if (s == GROVE_ERR_UNSUPPORTED) {
        if (!g_fabricated)
            printf("NOTE: grove_quadtree_build_device: %s; device trees are made by hand\n",
                   grove_ctx_last_error(ctx));
        g_fabricated = 1;
        return fabricate(ctx, h, with_host);
    }
    if (s != GROVE_OK) {
        FAIL("build_device: %s: %s", grove_status_string(s), grove_ctx_last_error(ctx));
        return NULL;
    }
    if (grove_quadtree_nodes(t) != NULL) FAIL("build_device: a device tree has host arrays");
    if (with_host && grove_quadtree_download(ctx, t) != GROVE_OK) {
        FAIL("download: %s", grove_ctx_last_error(ctx));
        grove_quadtree_destroy(t);
        return NULL;
    }
    return t;
}
#endif

/* ---- one data set ---- */

static const int KS[] = {1, 8, 50, 1024, 3, 32, 33};

typedef struct refs {
    grove_query_result box;
    uint32_t *ki[8];
    double *kd[8];
    int ks[8], nk;
    size_t nq[8]; /* queries of each k: the first nq[j] of the query points */
} refs;

static void run_queries(grove_ctx *ctx, const grove_quadtree *t, const float *boxes, size_t nb,
                        const float *qs, size_t nq, const refs *ref, const char *what)
{
    grove_query_result res;
    char w[256];
    grove_status s = grove_quadtree_query_boxes(ctx, t, boxes, nb, &res);
    snprintf(w, sizeof w, "%s: boxes", what);
    if (s != GROVE_OK) {
        FAIL("%s: %s: %s", w, grove_status_string(s), grove_ctx_last_error(ctx));
    } else {
        result_equal(&res, &ref->box, w);
        grove_query_result_free(&res);
    }
    for (int j = 0; j < ref->nk; j++) {
        int k = ref->ks[j];
        size_t m;
        nq = ref->nq[j];
        m = nq * (size_t)k;
        uint32_t *ki = (uint32_t *)tu_malloc(m * sizeof(uint32_t));
        uint32_t *ki2 = (uint32_t *)tu_malloc(m * sizeof(uint32_t));
        double *kd = (double *)tu_malloc(m * sizeof(double));
        snprintf(w, sizeof w, "%s: knn k=%d", what, k);
        memset(kd, 0xA5, m * sizeof(double));
        s = grove_quadtree_knn(ctx, t, qs, nq, k, ki, kd);
        if (s != GROVE_OK) {
            FAIL("%s: %s: %s", w, grove_status_string(s), grove_ctx_last_error(ctx));
        } else if (memcmp(ki, ref->ki[j], m * sizeof(uint32_t)) ||
                   memcmp(kd, ref->kd[j], m * sizeof(double))) {
            size_t i = 0;
            while (ki[i] == ref->ki[j][i] && kd[i] == ref->kd[j][i]) i++;
            FAIL("%s: query %zu rank %zu: %u (%.17g) vs CPU %u (%.17g)", w, i / (size_t)k,
                 i % (size_t)k, ki[i], kd[i], ref->ki[j][i], ref->kd[j][i]);
        }
        s = grove_quadtree_knn(ctx, t, qs, nq, k, ki2, NULL); /* without distances */
        if (s != GROVE_OK || memcmp(ki2, ref->ki[j], m * sizeof(uint32_t)))
            FAIL("%s: without dist2: %s", w, s ? grove_ctx_last_error(ctx) : "indices differ");
        free(ki);
        free(ki2);
        free(kd);
    }
}

static void run_set(tu_rng *r, int kind, size_t n, int variant)
{
    grove_points p = gen(r, kind, n);
    grove_quadtree_opts o;
    grove_quadtree *h = NULL;
    refs ref;
    char what[160];
    float root[4];
    size_t nb = n >= 100000 ? 20000 : 3000, nq = n >= 100000 ? 1500 : 400;
    size_t nbrute_b = n <= 1000 ? nb : 40, nbrute_k = n <= 1000 ? nq : 6;
    float *boxes, *qs;
    grove_status s;
    double t0 = now_ms(), t1 = 0, t2 = 0, t3 = 0;

    grove_quadtree_default_opts(&o);
    if (variant == 1) { /* deep: one point per leaf, down to level 30 */
        o.min_points = 1;
        o.max_depth = 30;
    } else if (variant == 2) { /* shallow with big leaves: the warp-wide paths */
        o.min_points = 200;
        o.max_depth = 4;
    }
    snprintf(what, sizeof what, "%s n=%zu opts%d", KIND_NAME[kind], n, variant);
    s = grove_quadtree_build(g_cpu, &p, &o, &h);
    if (s != GROVE_OK) {
        FAIL("%s: CPU build: %s", what, grove_ctx_last_error(g_cpu));
        free(p.xyz);
        return;
    }
    grove_quadtree_get_opts(h, &o);
    memcpy(root, o.bbox, sizeof root);
    o.use_bbox = 0; /* the device builds compute the box from the points, as the CPU one did */
    boxes = gen_boxes(r, &p, h, root, nb, n >= 100000 ? 3 : -1);
    qs = gen_points_q(r, &p, root, nq);

    /* the reference: the CPU backend on the host tree, itself checked by brute force */
    memset(&ref, 0, sizeof ref);
    t1 = now_ms();
    s = grove_quadtree_query_boxes(g_cpu, h, boxes, nb, &ref.box);
    t2 -= now_ms();
    if (s != GROVE_OK)
        FAIL("%s: CPU boxes: %s", what, grove_ctx_last_error(g_cpu));
    else
        brute_boxes(&p, boxes, nbrute_b, &ref.box, what);
    t2 += now_ms();
    for (size_t j = 0; j < sizeof KS / sizeof KS[0]; j++) ref.ks[ref.nk++] = KS[j];
    if (n < 1000) ref.ks[ref.nk++] = (int)n + 5; /* k > n: padded rows */
    for (int j = 0; j < ref.nk; j++) {
        /* a large k on a large tree is costly for the CPU reference: fewer queries */
        size_t m, nqk = ref.nq[j] = ref.ks[j] >= 50 && n >= 100000 ? nq / 10 : nq;
        m = nqk * (size_t)ref.ks[j];
        ref.ki[j] = (uint32_t *)tu_malloc(m * sizeof(uint32_t));
        ref.kd[j] = (double *)tu_malloc(m * sizeof(double));
        s = grove_quadtree_knn(g_cpu, h, qs, nqk, ref.ks[j], ref.ki[j], ref.kd[j]);
        t2 -= now_ms();
        if (s != GROVE_OK)
            FAIL("%s: CPU knn: %s", what, grove_ctx_last_error(g_cpu));
        else
            brute_knn_check(&p, qs, nbrute_k < nqk ? nbrute_k : nqk, ref.ks[j], ref.ki[j],
                            ref.kd[j], what);
        t2 += now_ms();
    }
    t3 = now_ms();

    if (g_cuda) {
#ifdef GROVE_HAVE_CUDA
        char w[200];
        grove_quadtree *d = device_tree(g_ctx, &p, &o, h, 0);
        grove_quadtree *both = device_tree(g_ctx, &p, &o, h, 1);
        snprintf(w, sizeof w, "%s, host tree", what);
        run_queries(g_ctx, h, boxes, nb, qs, nq, &ref, w);
        if (d) {
            grove_query_result res;
            uint32_t ki[4];
            snprintf(w, sizeof w, "%s, device tree", what);
            run_queries(g_ctx, d, boxes, nb, qs, nq, &ref, w);
            /* a CPU context cannot read it */
            CHECK_STATUS(g_cpu, grove_quadtree_query_boxes(g_cpu, d, boxes, 1, &res),
                         GROVE_ERR_INVALID_ARG);
            CHECK(res.offsets == NULL && res.indices == NULL);
            CHECK_STATUS(g_cpu, grove_quadtree_knn(g_cpu, d, qs, 1, 4, ki, NULL),
                         GROVE_ERR_INVALID_ARG);
            if (n <= 1000 && g_ctx2) { /* another CUDA context: no host arrays to upload */
                CHECK_STATUS(g_ctx2, grove_quadtree_query_boxes(g_ctx2, d, boxes, 1, &res),
                             GROVE_ERR_INVALID_ARG);
                CHECK_STATUS(g_ctx2, grove_quadtree_knn(g_ctx2, d, qs, 1, 4, ki, NULL),
                             GROVE_ERR_INVALID_ARG);
            }
        }
        if (both) {
            snprintf(w, sizeof w, "%s, device+host tree", what);
            run_queries(g_ctx, both, boxes, nb, qs, nq, &ref, w);
            if (n <= 1000 && g_ctx2) {
                snprintf(w, sizeof w, "%s, device+host tree of another context", what);
                run_queries(g_ctx2, both, boxes, nb, qs, nq, &ref, w);
            }
            if (n <= 1000) {
                snprintf(w, sizeof w, "%s, device+host tree on the CPU", what);
                run_queries(g_cpu, both, boxes, nb, qs, nq, &ref, w);
            }
        }
        grove_quadtree_destroy(d);
        grove_quadtree_destroy(both);
#endif
    }
    if (n >= 100000)
        printf("  %s: %llu box matches; ms: data+tree %.0f, CPU queries %.0f, brute force %.0f, "
               "CUDA part %.0f\n",
               what, (unsigned long long)(ref.box.offsets ? ref.box.offsets[nb] : 0), t1 - t0,
               t3 - t1 - t2, t2, now_ms() - t3);
    grove_query_result_free(&ref.box);
    for (int j = 0; j < ref.nk; j++) {
        free(ref.ki[j]);
        free(ref.kd[j]);
    }
    free(boxes);
    free(qs);
    grove_quadtree_destroy(h);
    free(p.xyz);
}

/* ---- errors ---- */

static void same_error(grove_status a, grove_status b, const char *ma, const char *what)
{
    if (a != b || strcmp(ma, grove_ctx_last_error(g_cpu)) != 0)
        FAIL("%s: CUDA %d \"%s\" vs CPU %d \"%s\"", what, (int)a, ma, (int)b,
             grove_ctx_last_error(g_cpu));
}

static void test_errors(void)
{
    tu_rng r = {7};
    grove_points p = gen(&r, D_UNIFORM, 500);
    grove_quadtree *h = NULL;
    grove_query_result res;
    float boxes[8] = {0, 0, 1, 1, 0, NAN, 1, 1}, q[4] = {0, 0, INFINITY, 0};
    uint32_t ind[8];
    double dd[8];
    char msg[1024];
    grove_status a, b;
    if (grove_quadtree_build(g_cpu, &p, NULL, &h) != GROVE_OK) {
        FAIL("errors: CPU build: %s", grove_ctx_last_error(g_cpu));
        free(p.xyz);
        return;
    }
#define SAME(call_ctx, call_cpu, what)                                                             \
    do {                                                                                           \
        a = (call_ctx);                                                                            \
        snprintf(msg, sizeof msg, "%s", grove_ctx_last_error(g_ctx));                              \
        b = (call_cpu);                                                                            \
        if (a == GROVE_OK) FAIL("%s: accepted", what);                                             \
        same_error(a, b, msg, what);                                                               \
    } while (0)
    SAME(grove_quadtree_query_boxes(g_ctx, h, boxes, 2, &res),
         grove_quadtree_query_boxes(g_cpu, h, boxes, 2, &res), "NaN box");
    CHECK(res.offsets == NULL && res.indices == NULL && res.num_queries == 0);
    SAME(grove_quadtree_query_boxes(g_ctx, h, NULL, 2, &res),
         grove_quadtree_query_boxes(g_cpu, h, NULL, 2, &res), "NULL boxes");
    SAME(grove_quadtree_query_boxes(g_ctx, NULL, boxes, 1, &res),
         grove_quadtree_query_boxes(g_cpu, NULL, boxes, 1, &res), "NULL tree");
    SAME(grove_quadtree_query_boxes(g_ctx, h, boxes, 1, NULL),
         grove_quadtree_query_boxes(g_cpu, h, boxes, 1, NULL), "NULL out");
    SAME(grove_quadtree_knn(g_ctx, h, q, 2, 1, ind, dd),
         grove_quadtree_knn(g_cpu, h, q, 2, 1, ind, dd), "infinite query");
    SAME(grove_quadtree_knn(g_ctx, h, q, 1, 0, ind, dd),
         grove_quadtree_knn(g_cpu, h, q, 1, 0, ind, dd), "k = 0");
    SAME(grove_quadtree_knn(g_ctx, h, q, 1, 2, NULL, dd),
         grove_quadtree_knn(g_cpu, h, q, 1, 2, NULL, dd), "NULL indices");
    SAME(grove_quadtree_knn(g_ctx, h, NULL, 1, 2, ind, dd),
         grove_quadtree_knn(g_cpu, h, NULL, 1, 2, ind, dd), "NULL queries");
    /* nq = 0 */
    CHECK_OK(g_ctx, grove_quadtree_query_boxes(g_ctx, h, NULL, 0, &res));
    CHECK(res.num_queries == 0 && res.offsets && res.offsets[0] == 0 && res.indices);
    grove_query_result_free(&res);
    CHECK_OK(g_ctx, grove_quadtree_knn(g_ctx, h, NULL, 0, 3, NULL, NULL));
#undef SAME
#ifdef GROVE_HAVE_CUDA
    if (g_cuda) {
        /* the message of a CPU context given a device-only tree */
        grove_quadtree *d = device_tree(g_ctx, &p, NULL, h, 0);
        if (d) {
            CHECK_STATUS(g_cpu, grove_quadtree_query_boxes(g_cpu, d, boxes, 1, &res),
                         GROVE_ERR_INVALID_ARG);
            CHECK(!strcmp(grove_ctx_last_error(g_cpu),
                          "grove_quadtree_query_boxes: the tree has no host arrays (it was built "
                          "by grove_quadtree_build_device); call grove_quadtree_download() first"));
            CHECK_STATUS(g_cpu, grove_quadtree_knn(g_cpu, d, q, 1, 1, ind, NULL),
                         GROVE_ERR_INVALID_ARG);
            CHECK(!strcmp(grove_ctx_last_error(g_cpu),
                          "grove_quadtree_knn: the tree has no host arrays (it was built by "
                          "grove_quadtree_build_device); call grove_quadtree_download() first"));
            if (g_ctx2) {
                CHECK_STATUS(g_ctx2, grove_quadtree_knn(g_ctx2, d, q, 1, 1, ind, NULL),
                             GROVE_ERR_INVALID_ARG);
                CHECK(!strcmp(grove_ctx_last_error(g_ctx2),
                              "grove_quadtree_knn: the tree's arrays are on another context's "
                              "device and it has no host arrays; call grove_quadtree_download() "
                              "with that context first"));
            }
            /* and after download the CPU context answers as before */
            CHECK_OK(g_ctx, grove_quadtree_download(g_ctx, d));
            CHECK_OK(g_cpu, grove_quadtree_knn(g_cpu, d, q, 1, 3, ind, dd));
            grove_quadtree_destroy(d);
        }
    }
#endif
    grove_quadtree_destroy(h);
    free(p.xyz);
}

#ifdef GROVE_HAVE_CUDA
/* Device memory limits from tiny to ample: each call either succeeds with the CPU's bytes or
 * fails with GROVE_ERR_DEVICE_OUT_OF_MEMORY and a zeroed result; either way it holds no device
 * memory afterwards (every error path frees). kNN halves its batch when short, so it often
 * succeeds where the box query fails. */
static void test_oom(void)
{
    tu_rng r = {11};
    grove_points p = gen(&r, D_CLUSTER, 20000);
    grove_quadtree *h = NULL;
    float root[4];
    grove_quadtree_opts o;
    size_t nb = 3000, nq = 500;
    float *boxes, *qs;
    grove_query_result ref, res;
    uint32_t *ri, *ki;
    double *rd, *kd;
    int k = 40, nok_b = 0, noom_b = 0, nok_k = 0, noom_k = 0;
    if (grove_quadtree_build(g_cpu, &p, NULL, &h) != GROVE_OK) {
        FAIL("oom: CPU build: %s", grove_ctx_last_error(g_cpu));
        free(p.xyz);
        return;
    }
    grove_quadtree_get_opts(h, &o);
    memcpy(root, o.bbox, sizeof root);
    boxes = gen_boxes(&r, &p, h, root, nb, 5);
    qs = gen_points_q(&r, &p, root, nq);
    ri = (uint32_t *)tu_malloc(nq * k * sizeof(uint32_t));
    ki = (uint32_t *)tu_malloc(nq * k * sizeof(uint32_t));
    rd = (double *)tu_malloc(nq * k * sizeof(double));
    kd = (double *)tu_malloc(nq * k * sizeof(double));
    CHECK_OK(g_cpu, grove_quadtree_query_boxes(g_cpu, h, boxes, nb, &ref));
    CHECK_OK(g_cpu, grove_quadtree_knn(g_cpu, h, qs, nq, k, ri, rd));
    for (size_t lim = 256; lim <= ((size_t)1 << 26); lim = lim * 3 / 2) {
        grove_ctx_opts co;
        grove_ctx *c = NULL;
        grove_status s;
        grove_ctx_default_opts(&co);
        co.backend = GROVE_BACKEND_CUDA;
        co.device_mem_limit = lim;
        if (grove_ctx_create(&co, &c) != GROVE_OK) {
            FAIL("oom: ctx_create: %s", grove_ctx_last_error(c));
            grove_ctx_destroy(c);
            break;
        }
        s = grove_quadtree_query_boxes(c, h, boxes, nb, &res);
        if (s == GROVE_OK) {
            nok_b++;
            result_equal(&res, &ref, "oom: boxes");
            grove_query_result_free(&res);
        } else if (s == GROVE_ERR_DEVICE_OUT_OF_MEMORY) {
            noom_b++;
            CHECK(res.offsets == NULL && res.indices == NULL && res.num_queries == 0);
        } else {
            FAIL("oom: boxes at limit %zu: %s", lim, grove_ctx_last_error(c));
        }
        CHECK_MSG(c->dev_in_use == 0, "boxes at limit %zu left %zu bytes", lim, c->dev_in_use);
        s = grove_quadtree_knn(c, h, qs, nq, k, ki, kd);
        if (s == GROVE_OK) {
            nok_k++;
            if (memcmp(ki, ri, nq * k * sizeof(uint32_t)) || memcmp(kd, rd, nq * k * 8))
                FAIL("oom: knn at limit %zu differs", lim);
        } else if (s == GROVE_ERR_DEVICE_OUT_OF_MEMORY) {
            noom_k++;
        } else {
            FAIL("oom: knn at limit %zu: %s", lim, grove_ctx_last_error(c));
        }
        CHECK_MSG(c->dev_in_use == 0, "knn at limit %zu left %zu bytes", lim, c->dev_in_use);
        grove_ctx_destroy(c);
    }
    printf("  oom: boxes %d ok / %d out of memory, knn %d ok / %d out of memory\n", nok_b, noom_b,
           nok_k, noom_k);
    CHECK(nok_b > 0 && noom_b > 0 && nok_k > 0 && noom_k > 0);
    grove_query_result_free(&ref);
    free(ri);
    free(ki);
    free(rd);
    free(kd);
    free(boxes);
    free(qs);
    grove_quadtree_destroy(h);
    free(p.xyz);
}

/* ---- benchmark ---- */

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median of reps calls (after one warm-up); GPU calls are timed with events on the context's
 * stream (each call returns with its results in host memory, so that is the whole call). */
typedef enum { OP_BOX, OP_KNN } bench_op;

static double time_op(grove_ctx *ctx, const grove_quadtree *t, bench_op op, const float *in,
                      size_t nq, int reps, grove_query_result *box_out, uint32_t *ki, double *kd)
{
    double *v = (double *)tu_malloc((size_t)reps * sizeof(double));
    int gpu = grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double med;
    if (gpu && (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess))
        FAIL("cudaEventCreate failed");
    for (int i = -1; i < reps; i++) {
        double t0 = now_ms();
        grove_status s;
        float ms = 0.0f;
        if (gpu) cudaEventRecord(e0, (cudaStream_t)grove_ctx_stream(ctx));
        if (op == OP_BOX) {
            grove_query_result_free(box_out);
            s = grove_quadtree_query_boxes(ctx, t, in, nq, box_out);
        } else {
            s = grove_quadtree_knn(ctx, t, in, nq, 8, ki, kd);
        }
        if (gpu) {
            cudaEventRecord(e1, (cudaStream_t)grove_ctx_stream(ctx));
            cudaEventSynchronize(e1);
            cudaEventElapsedTime(&ms, e0, e1);
        }
        if (s != GROVE_OK) FAIL("bench: %s", grove_ctx_last_error(ctx));
        if (i >= 0) v[i] = gpu ? (double)ms : now_ms() - t0;
    }
    med = median(v, reps);
    if (gpu) {
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
    }
    free(v);
    return med;
}

static void bench(size_t n, int reps)
{
    tu_rng r = {2024};
    grove_points p;
    grove_quadtree *h = NULL, *d = NULL;
    size_t nq = 1000000;
    float *boxes = (float *)tu_malloc(4 * nq * sizeof(float)), *qs;
    double side = sqrt(10.0 / (double)n), t0;
    grove_query_result rc = {0, NULL, NULL}, rg = {0, NULL, NULL};
    uint32_t *kc = (uint32_t *)tu_malloc(nq * 8 * sizeof(uint32_t)),
             *kg = (uint32_t *)tu_malloc(nq * 8 * sizeof(uint32_t));
    double *dc = (double *)tu_malloc(nq * 8 * sizeof(double)),
           *dg = (double *)tu_malloc(nq * 8 * sizeof(double));
    double ms_cb, ms_gb_dev, ms_gb_host, ms_ck, ms_gk_dev, ms_gk_host;
    grove_device_info info;

    p.n = n;
    p.dims = 2;
    p.xyz = (float *)tu_malloc(2 * n * sizeof(float));
    for (size_t i = 0; i < n; i++) put(&p, i, tu_f32(&r, 0.0f, 1.0f), tu_f32(&r, 0.0f, 1.0f));
    for (size_t q = 0; q < nq; q++) {
        float x = tu_f32(&r, 0.0f, 1.0f), y = tu_f32(&r, 0.0f, 1.0f);
        boxes[4 * q] = (float)(x - side / 2);
        boxes[4 * q + 1] = (float)(y - side / 2);
        boxes[4 * q + 2] = (float)(x + side / 2);
        boxes[4 * q + 3] = (float)(y + side / 2);
    }
    qs = (float *)tu_malloc(2 * nq * sizeof(float));
    for (size_t q = 0; q < nq; q++) {
        qs[2 * q] = tu_f32(&r, 0.0f, 1.0f);
        qs[2 * q + 1] = tu_f32(&r, 0.0f, 1.0f);
    }
    t0 = now_ms();
    if (grove_quadtree_build(g_cpu, &p, NULL, &h) != GROVE_OK) {
        FAIL("bench: build: %s", grove_ctx_last_error(g_cpu));
        return;
    }
    printf("bench: %zu points, CPU build %.0f ms\n", n, now_ms() - t0);
    d = device_tree(g_ctx, &p, NULL, h, 0);
    if (!d) return;
    if (grove_device_query(grove_ctx_device(g_ctx), &info) == GROVE_OK)
        printf("bench: device %s, %d SMs\n", info.name, info.sm_count);

    ms_gb_dev = time_op(g_ctx, d, OP_BOX, boxes, nq, reps, &rg, NULL, NULL);
    ms_gb_host = time_op(g_ctx, h, OP_BOX, boxes, nq, reps, &rg, NULL, NULL);
    ms_cb = time_op(g_cpu, h, OP_BOX, boxes, nq, reps, &rc, NULL, NULL);
    result_equal(&rg, &rc, "bench boxes");
    ms_gk_dev = time_op(g_ctx, d, OP_KNN, qs, nq, reps, NULL, kg, dg);
    ms_gk_host = time_op(g_ctx, h, OP_KNN, qs, nq, reps, NULL, kg, dg);
    ms_ck = time_op(g_cpu, h, OP_KNN, qs, nq, reps, NULL, kc, dc);
    if (memcmp(kg, kc, nq * 8 * sizeof(uint32_t)) || memcmp(dg, dc, nq * 8 * sizeof(double)))
        FAIL("bench: knn results differ");
    printf("bench: box queries: %zu boxes, %.2f matches/box on average\n", nq,
           (double)rc.offsets[nq] / (double)nq);
    printf("bench: boxes  GPU device tree %8.2f ms  GPU host tree %8.2f ms  CPU %8.2f ms  "
           "speedup %.1fx\n",
           ms_gb_dev, ms_gb_host, ms_cb, ms_cb / ms_gb_dev);
    printf("bench: knn k=8 GPU device tree %8.2f ms  GPU host tree %8.2f ms  CPU %8.2f ms  "
           "speedup %.1fx\n",
           ms_gk_dev, ms_gk_host, ms_ck, ms_ck / ms_gk_dev);
    printf("bench: median of %d repeats after 1 warm-up\n", reps);
    grove_query_result_free(&rc);
    grove_query_result_free(&rg);
    grove_quadtree_destroy(d);
    grove_quadtree_destroy(h);
    free(p.xyz);
    free(boxes);
    free(qs);
    free(kc);
    free(kg);
    free(dc);
    free(dg);
}
#endif

/* ---- main ---- */

static int usage(void)
{
    fprintf(stderr, "usage: test_qt_query [--backend cuda|cpu] [--min-n N] [--max-n N] [--kind K] "
                    "[--seed S] [--bench N] [--reps R]\n");
    return 1;
}

int main(int argc, char **argv)
{
    const char *backend = "cuda";
    uint64_t seed = 20251122;
    size_t bench_n = 0;
    int reps = 10;
    grove_ctx_opts o;
    static const size_t SIZES[] = {0, 1, 31, 32, 33, 1000, 100000, 1000000};
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) return usage();
        if (!strcmp(argv[i], "--backend"))
            backend = argv[++i];
        else if (!strcmp(argv[i], "--max-n"))
            g_max_n = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--kind"))
            g_kind = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-n"))
            g_min_n = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--bench"))
            bench_n = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[++i]);
        else
            return usage();
    }
    if (reps < 1) return usage();
    grove_ctx_default_opts(&o);
    o.backend = GROVE_BACKEND_CPU;
    if (grove_ctx_create(&o, &g_cpu) != GROVE_OK) {
        fprintf(stderr, "cannot create a CPU context: %s\n", grove_ctx_last_error(g_cpu));
        return 1;
    }
    if (!strcmp(backend, "cuda")) {
        if (tu_cuda_ctx("test_qt_query", NULL, &g_ctx) != 0) {
            grove_ctx_destroy(g_cpu);
            return TEST_SKIP;
        }
        o.backend = GROVE_BACKEND_CUDA;
        if (grove_ctx_create(&o, &g_ctx2) != GROVE_OK) {
            FAIL("second CUDA context: %s", grove_ctx_last_error(g_ctx2));
            grove_ctx_destroy(g_ctx2);
            g_ctx2 = NULL;
        }
        g_cuda = 1;
    } else if (!strcmp(backend, "cpu")) {
        g_ctx = g_cpu;
    } else {
        return usage();
    }
    printf("test_qt_query: backend %s, seed %llu\n", backend, (unsigned long long)seed);
    if (bench_n && !g_cuda) return usage(); /* the benchmark compares with the GPU */
#ifdef GROVE_HAVE_CUDA
    if (bench_n) {
        bench(bench_n, reps);
        goto done;
    }
#endif
    if (g_min_n == 0) {
        test_errors();
#ifdef GROVE_HAVE_CUDA
        if (g_cuda) test_oom();
#endif
    }
    {
        tu_rng r = {seed};
        for (size_t si = 0; si < sizeof SIZES / sizeof SIZES[0]; si++) {
            size_t n = SIZES[si];
            if (n > g_max_n || n < g_min_n) continue;
            for (int kind = 0; kind < D_KINDS; kind++) {
                if (g_kind >= 0 && kind != g_kind) continue;
                /* every option set on the small sizes, one (in rotation) on the large */
                for (int v = 0; v < 3; v++) {
                    if (n >= 100000 && v != (kind + (int)si) % 3) continue;
                    run_set(&r, kind, n, v);
                }
            }
            printf("  n = %zu done (%d failures so far)\n", n, tu_failures);
            fflush(stdout);
        }
        /* more than 2^20 matches in one query: the device-wide sort of a huge segment */
        if (g_max_n >= 1200000) {
            run_set(&r, D_UNIFORM, 1200000, 0);
            printf("  n = 1200000 done (%d failures so far)\n", tu_failures);
        }
    }
#ifdef GROVE_HAVE_CUDA
done:
#endif
    if (g_fabricated) printf("NOTE: the device-only trees were made by hand (see above)\n");
    if (g_ctx != g_cpu) grove_ctx_destroy(g_ctx);
    grove_ctx_destroy(g_ctx2);
    grove_ctx_destroy(g_cpu);
    return tu_finish("test_qt_query");
}
