/*
 * test_kd_query.c - the k-d tree queries (grove_kdtree_knn, grove_kdtree_radius) on the backend
 * under test, compared byte for byte with the CPU backend and with a float64 brute force.
 *
 *   test_kd_query [--backend cuda|cpu] [--large N] [--seed S] [--max-n N] [--bench N] [--reps R]
 *                 [--quick 1]
 *
 * Data sets: uniform, clustered (one cluster of width 1e-4), lattice (many exact distance ties;
 * some queries sit between lattice points, equidistant from many), duplicate-heavy (6 distinct
 * points: leaves of thousands of equal points), geometric (x = 2^-i: a tree about 1000 levels deep,
 * beyond the GPU's in-register stack), huge (double only: coordinates up to DBL_MAX, so distances
 * overflow to infinity), scales (magnitudes 2^-141 to 2^119: float squares underflow and
 * overflow) and line (2^-i on one axis: trees of depth 56 to 64 at 101 to 109 points,
 * around the stack sizes of the GPU kNN kernels); 0, 1, 31, 32, 33, 1000 and 10^5 points; 2, 3 and
 * 5 dimensions (1 and 8 at 1000 points); float and double points and queries, mixed; leaf sizes 12,
 * 1 and 64. kNN with k = 1, 8, 9, 16, 31, 32, 33, 50, 1024 (every size of the GPU's register
 * lists, their ends, and the heap) and k > n, with and without distances; radius
 * search with r = 0, tiny, small, medium, beyond the data and r * r overflowing, each without a cap
 * and with caps 1, 32, 33 and 100. With --backend cuda the queries go to a tree built by
 * grove_kdtree_build_device() (device arrays only; downloaded at the end and compared with the
 * CPU's tree), every kNN row set is also asked of grove_kdtree_knn_device() (device queries and
 * outputs, with and without distances: the same bytes), and k = 8 and 50 also run on the CPU's tree
 * uploaded per call; the device calls' bad arguments are checked too.
 * Also: identical errors on both backends, and
 * (CUDA) forced device out-of-memory at many limits: the status, a zeroed result and no device
 * memory left held, or the right answer (smaller batches).
 *
 * --large N: only the large pass: N uniform 3-D points (default 2 * 10^6), 10^5 queries, k = 8
 * and k = 1024, radius search, and 20 queries that match every point (rows of N matches, more
 * than one fill batch in all). --max-n N skips sets of more than N points; --quick 1 runs a
 * small selection (one set per kind at 0, 33 and 1000 points, fewer queries, k and caps), for
 * compute-sanitizer. --bench N: instead of the tests, times 10^6 kNN queries (k = 8) and 10^6
 * radius queries (about 16 matches) on N uniform 3-D float points, GPU and CPU backends, median
 * of R calls (default 10) after a warm-up, each result checked against the CPU's.
 *
 * The data are fresh for every run: the seed is printed first, and again on failure
 * (--seed S repeats a run). Without a GPU (or a CUDA build) --backend cuda prints "SKIP" and
 * exits 77.
 */
#define _POSIX_C_SOURCE 200809L

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h" /* ctx->dev_in_use: no device memory may stay held after a call */
#include "grove/kdtree.h"
#include "kd_testdata.h"
#include "testutil.h"
#ifdef GROVE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

static grove_ctx *g_ctx; /* the backend under test */
static grove_ctx *g_cpu; /* the CPU reference (== g_ctx with --backend cpu) */
static int g_cuda;
static size_t g_max_n = (size_t)-1;

/* K_LINE (2^-i on axis 0, the other axes 0) is outside the main loops over K_KINDS: it is only
 * used for the deep-stack sets. */
enum { K_UNIFORM, K_CLUSTER, K_LATTICE, K_DUPS, K_GEOM, K_HUGE, K_SCALES, K_KINDS,
       K_LINE = K_KINDS };
static const char *kind_name[] = {"uniform", "clustered", "lattice", "duplicates",
                                  "geometric", "huge", "scales", "line"};

/* K_SCALES: float-representable magnitudes whose squares underflow or overflow a float (the
 * GPU's float pre-filters must stay below the exact distances there). */
static const int SCALES[] = {-140, -70, 0, 60, 120};

static double scaled(tu_rng *r, double u) { return ldexp(u - 0.5, SCALES[tu_u32(r) % 5]); }

static double unit(tu_rng *r) { return (double)(tu_next(r) >> 11) * (1.0 / 9007199254740992.0); }

static double gauss(tu_rng *r)
{
    double u = unit(r), v = unit(r);
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* n points of D doubles of the given kind. */
static double *gen(tu_rng *r, int kind, size_t n, int D)
{
    double *x = (double *)tu_malloc(n * (size_t)D * sizeof *x);
    double c[6][GROVE_KDTREE_MAX_DIMS], s[6];
    for (int a = 0; a < 6; a++) {
        for (int d = 0; d < D; d++) c[a][d] = unit(r) * 200.0 - 100.0;
        s[a] = a == 0 ? 1e-4 : 0.01 + 3.0 * unit(r);
    }
    for (size_t i = 0; i < n; i++) {
        double *p = x + i * (size_t)D;
        int a = (int)(tu_u32(r) % 6);
        for (int d = 0; d < D; d++) {
            switch (kind) {
            case K_UNIFORM: p[d] = unit(r) * 10.0 - 3.0; break;
            case K_CLUSTER: p[d] = c[a][d] + s[a] * gauss(r); break;
            case K_LATTICE: p[d] = 0.25 * (double)(tu_u32(r) % 12); break;
            case K_DUPS: p[d] = c[a][d]; break;
            case K_GEOM: p[d] = d == 0 ? ldexp(1.0, -(int)(i % 1100)) : (double)(i % 3); break;
            case K_LINE: p[d] = d == 0 ? ldexp(1.0, -(int)i) : 0.0; break;
            case K_SCALES: p[d] = scaled(r, unit(r)); break;
            default: {
                static const double sp[] = {DBL_MAX, -DBL_MAX, 1e308, -1e307, 0.0, 1.0, -2.5};
                uint32_t k = tu_u32(r) % 9;
                p[d] = k < 7 ? sp[k] : (unit(r) * 2.0 - 1.0) * 1e300;
            }
            }
        }
    }
    return x;
}

/* Coordinates in a type, with the doubles the library sees (float input rounded first). */
typedef struct set {
    grove_coords c;
    double *ref;
    float *f;
} set;

static set make_set(double *x, size_t n, int D, grove_coord_type ty)
{
    set s;
    s.ref = x;
    s.f = NULL;
    if (ty == GROVE_COORD_F32) {
        s.f = (float *)tu_malloc(n * (size_t)D * sizeof *s.f);
        for (size_t i = 0; i < n * (size_t)D; i++) {
            s.f[i] = (float)x[i];
            x[i] = (double)s.f[i];
        }
    }
    s.c.data = ty == GROVE_COORD_F32 ? (const void *)s.f : (const void *)x;
    s.c.n = n;
    s.c.dims = D;
    s.c.type = ty;
    return s;
}

static void free_set(set *s)
{
    free(s->ref);
    free(s->f);
}

/* Queries: data points (distance 0 to them and to their duplicates), nudged data points,
 * points over the data's box (for the lattice: between lattice points, equidistant from many)
 * and points far outside. */
static double *gen_queries(tu_rng *r, const set *p, int kind, size_t nq)
{
    const int D = p->c.dims;
    double *q = (double *)tu_malloc((nq ? nq : 1) * (size_t)D * sizeof *q);
    for (size_t j = 0; j < nq; j++) {
        size_t i = p->c.n ? (size_t)(tu_next(r) % p->c.n) : 0;
        for (int d = 0; d < D; d++) {
            double v, x = p->c.n ? p->ref[i * (size_t)D + (size_t)d] : 0.0;
            switch (j % 4) {
            case 0: v = x; break;
            case 1: v = kind == K_HUGE ? x : x + 1e-6 * (unit(r) - 0.5); break;
            case 2:
                v = kind == K_LATTICE  ? 0.25 * (double)(tu_u32(r) % 12) + 0.125
                    : kind == K_HUGE   ? (unit(r) * 2.0 - 1.0) * 1e300
                    : kind == K_SCALES ? scaled(r, unit(r))
                                       : unit(r) * 240.0 - 120.0;
                break;
            default: v = kind == K_HUGE ? -x : (unit(r) - 0.5) * 1e4; break;
            }
            q[j * (size_t)D + (size_t)d] = v;
        }
    }
    return q;
}

/* ---- brute force ---- */

/* All n points sorted by (dist2, input position) for query q. */
static void brute(const set *p, const double *q, pr *all)
{
    for (size_t i = 0; i < p->c.n; i++) {
        all[i].d = ref_dist2(p->ref + i * (size_t)p->c.dims, q, p->c.dims);
        all[i].i = i;
    }
    qsort(all, p->c.n, sizeof *all, pr_cmp);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- one case: the backend under test, the CPU backend, brute force ---- */

typedef struct qset {
    grove_coords c; /* as passed to the library */
    double *ref;    /* the doubles it sees */
    float *f;
    pr *bf; /* brute force of the first nbf queries, n entries each */
    size_t nbf;
} qset;

#ifdef GROVE_HAVE_CUDA
/* A device copy of `bytes` bytes at h (NULL on failure, which is reported). */
static void *dev_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) {
        FAIL("cudaMalloc of %zu bytes failed", bytes);
        return NULL;
    }
    if (bytes && (cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
                  cudaDeviceSynchronize() != cudaSuccess)) {
        FAIL("cudaMemcpy of %zu bytes failed", bytes);
        cudaFree(d);
        return NULL;
    }
    return d;
}

static size_t coords_bytes(const grove_coords *c)
{
    return c->n * (size_t)c->dims * (c->type == GROVE_COORD_F64 ? 8 : 4);
}

/* grove_kdtree_build_device() of the points of p (uploaded here); NULL on failure. */
static grove_kdtree *device_tree(const set *p, const grove_kdtree_opts *o)
{
    grove_coords dc = p->c;
    grove_kdtree *t = NULL;
    dc.data = dev_copy(p->c.data, coords_bytes(&p->c));
    if (!dc.data) return NULL;
    CHECK_OK(g_ctx, grove_kdtree_build_device(g_ctx, &dc, o, &t));
    cudaFree((void *)dc.data);
    return t;
}

/* grove_kdtree_knn_device() on tree t must give gi / gd (the host call's rows) byte for byte,
 * with and without distances; the outputs start poisoned. */
static void check_knn_device(const char *what, const grove_kdtree *t, const grove_coords *qc, int k,
                             const uint64_t *gi, const double *gd)
{
    const size_t cnt = qc->n * (size_t)k;
    grove_coords dq = *qc;
    uint64_t *hi = (uint64_t *)tu_malloc((cnt ? cnt : 1) * sizeof *hi), *di = NULL;
    double *hd = (double *)tu_malloc((cnt ? cnt : 1) * sizeof *hd), *dd = NULL;
    int before = tu_failures;
    dq.data = dev_copy(qc->data, coords_bytes(qc));
    if (cudaMalloc((void **)&di, (cnt ? cnt : 1) * sizeof *di) != cudaSuccess ||
        cudaMalloc((void **)&dd, (cnt ? cnt : 1) * sizeof *dd) != cudaSuccess)
        FAIL("cudaMalloc of the outputs failed");
    if (tu_failures > before) goto _end;
    for (int pass = 0; pass < 2 && tu_failures == before; pass++) {
        cudaMemset(di, 0xA5, (cnt ? cnt : 1) * sizeof *di);
        cudaMemset(dd, 0xA5, (cnt ? cnt : 1) * sizeof *dd);
        CHECK_OK(g_ctx, grove_kdtree_knn_device(g_ctx, t, &dq, k, di, pass ? NULL : dd));
        if (tu_failures > before) break;
        if (cudaMemcpy(hi, di, cnt * sizeof *hi, cudaMemcpyDeviceToHost) != cudaSuccess ||
            cudaMemcpy(hd, dd, cnt * sizeof *hd, cudaMemcpyDeviceToHost) != cudaSuccess) {
            FAIL("cudaMemcpy of the outputs failed");
            break;
        }
        if (memcmp(hi, gi, cnt * sizeof *hi) || (!pass && memcmp(hd, gd, cnt * sizeof *hd))) {
            size_t e = 0;
            while (hi[e] == gi[e] && (pass || !memcmp(&hd[e], &gd[e], sizeof *hd))) e++;
            FAIL("%s: knn_device k=%d%s differs from grove_kdtree_knn at query %zu rank %zu: "
                 "(%llu, %.17g) vs (%llu, %.17g)",
                 what, k, pass ? " (no distances)" : "", e / (size_t)k, e % (size_t)k,
                 (unsigned long long)hi[e], hd[e], (unsigned long long)gi[e], gd[e]);
        }
        if (pass) {
            /* no distances asked: the array is untouched */
            size_t i = 0;
            cudaMemcpy(hd, dd, cnt * sizeof *hd, cudaMemcpyDeviceToHost);
            while (i < cnt && ((const unsigned char *)&hd[i])[0] == 0xA5) i++;
            CHECK_MSG(i == cnt, "%s: knn_device k=%d wrote d_dist2 = NULL's buffer", what, k);
        }
    }
_end:
    cudaFree((void *)dq.data);
    cudaFree(di);
    cudaFree(dd);
    free(hi);
    free(hd);
}
#endif

/* nq_use: how many of the queries (a prefix) take part. The backend under test queries t, the
 * CPU backend tc (the same tree, with host arrays). On a CUDA context the device call on t must
 * give the same rows. */
static void check_knn(const char *what, const grove_kdtree *t, const grove_kdtree *tc,
                      const set *p, const qset *q, size_t nq_use, int k)
{
    const size_t nq = nq_use, kk = (size_t)k, n = p->c.n;
    grove_coords qc = q->c;
    uint64_t *gi = (uint64_t *)tu_malloc(nq * kk * sizeof *gi);
    uint64_t *gi2 = (uint64_t *)tu_malloc(nq * kk * sizeof *gi2);
    uint64_t *ri = (uint64_t *)tu_malloc(nq * kk * sizeof *ri);
    double *gd = (double *)tu_malloc(nq * kk * sizeof *gd);
    double *rd = (double *)tu_malloc(nq * kk * sizeof *rd);
    int before = tu_failures;
    qc.n = nq_use;
    CHECK_OK(g_ctx, grove_kdtree_knn(g_ctx, t, &qc, k, gi, gd));
    CHECK_OK(g_ctx, grove_kdtree_knn(g_ctx, t, &qc, k, gi2, NULL));
    if (g_ctx != g_cpu) {
        CHECK_OK(g_cpu, grove_kdtree_knn(g_cpu, tc, &qc, k, ri, rd));
        if (tu_failures == before &&
            (memcmp(gi, ri, nq * kk * sizeof *gi) || memcmp(gd, rd, nq * kk * sizeof *gd))) {
            size_t e = 0;
            while (gi[e] == ri[e] && !memcmp(&gd[e], &rd[e], sizeof *gd)) e++;
            FAIL("%s: knn k=%d differs from the CPU backend at query %zu rank %zu: (%llu, %.17g) "
                 "vs (%llu, %.17g)",
                 what, k, e / kk, e % kk, (unsigned long long)gi[e], gd[e],
                 (unsigned long long)ri[e], rd[e]);
        }
    }
    if (tu_failures == before && memcmp(gi, gi2, nq * kk * sizeof *gi))
        FAIL("%s: knn k=%d without distances gives other indices", what, k);
#ifdef GROVE_HAVE_CUDA
    if (g_cuda && tu_failures == before) check_knn_device(what, t, &qc, k, gi, gd);
#endif
    for (size_t j = 0; j < q->nbf && j < nq && tu_failures == before; j++) {
        const pr *all = q->bf + j * n;
        for (size_t m = 0; m < kk; m++) {
            uint64_t wi = m < n ? all[m].i : UINT64_MAX;
            double wd = m < n ? all[m].d : INFINITY;
            if (gi[j * kk + m] != wi || memcmp(&gd[j * kk + m], &wd, sizeof wd)) {
                FAIL("%s: knn k=%d query %zu rank %zu: got (%llu, %.17g), brute force (%llu, "
                     "%.17g)",
                     what, k, j, m, (unsigned long long)gi[j * kk + m], gd[j * kk + m],
                     (unsigned long long)wi, wd);
                break;
            }
        }
    }
    free(gi);
    free(gi2);
    free(ri);
    free(gd);
    free(rd);
}

static int result_equal(const grove_kdtree_result *a, const grove_kdtree_result *b)
{
    size_t nq = a->num_queries, tot;
    if (nq != b->num_queries || !a->offsets || !b->offsets) return 0;
    if (memcmp(a->offsets, b->offsets, (nq + 1) * sizeof *a->offsets)) return 0;
    tot = (size_t)a->offsets[nq];
    return !memcmp(a->indices, b->indices, tot * sizeof *a->indices) &&
           !memcmp(a->dist2, b->dist2, tot * sizeof *a->dist2);
}

/* nq_use: how many of the queries (a prefix) take part; t and tc as in check_knn. */
static void check_radius(const char *what, const grove_kdtree *t, const grove_kdtree *tc,
                         const set *p, const qset *q, size_t nq_use, double r, size_t cap)
{
    grove_coords qc = q->c;
    grove_kdtree_result g, c;
    const double r2 = r * r;
    int before = tu_failures;
    qc.n = nq_use;
    memset(&c, 0, sizeof c);
    CHECK_OK(g_ctx, grove_kdtree_radius(g_ctx, t, &qc, r, cap, &g));
    if (tu_failures > before) return;
    CHECK(g.num_queries == nq_use && g.offsets && g.indices && g.dist2 && g.offsets[0] == 0);
    if (g_ctx != g_cpu) {
        CHECK_OK(g_cpu, grove_kdtree_radius(g_cpu, tc, &qc, r, cap, &c));
        if (tu_failures == before && !result_equal(&g, &c))
            FAIL("%s: radius r=%.17g cap=%zu differs from the CPU backend (%llu vs %llu matches)",
                 what, r, cap, (unsigned long long)g.offsets[nq_use],
                 (unsigned long long)c.offsets[nq_use]);
    }
    for (size_t j = 0; j < q->nbf && j < nq_use && tu_failures == before; j++) {
        const pr *all = q->bf + j * p->c.n;
        size_t m = 0, got = (size_t)(g.offsets[j + 1] - g.offsets[j]);
        while (m < p->c.n && all[m].d <= r2) m++;
        if (cap && m > cap) m = cap;
        if (got != m) {
            FAIL("%s: radius r=%.17g cap=%zu query %zu: %zu matches, brute force %zu", what, r, cap,
                 j, got, m);
            break;
        }
        for (size_t i = 0; i < m; i++) {
            uint64_t gi = g.indices[g.offsets[j] + i];
            double gd = g.dist2[g.offsets[j] + i];
            if (gi != all[i].i || memcmp(&gd, &all[i].d, sizeof gd)) {
                FAIL("%s: radius r=%.17g cap=%zu query %zu rank %zu: got (%llu, %.17g), brute "
                     "force (%llu, %.17g)",
                     what, r, cap, j, i, (unsigned long long)gi, gd, (unsigned long long)all[i].i,
                     all[i].d);
                break;
            }
        }
    }
    grove_kdtree_result_free(&g);
    grove_kdtree_result_free(&c);
}

/* with_bf: brute force for a prefix of the queries (at most about 4 * 10^6 distances). */
static qset make_qset(tu_rng *r, const set *p, int kind, size_t nq, grove_coord_type ty,
                      int with_bf)
{
    qset q;
    const size_t D = (size_t)p->c.dims, n = p->c.n;
    q.ref = gen_queries(r, p, kind, nq);
    q.f = NULL;
    if (ty == GROVE_COORD_F32) {
        q.f = (float *)tu_malloc((nq ? nq : 1) * D * sizeof *q.f);
        for (size_t i = 0; i < nq * D; i++) {
            q.f[i] = (float)q.ref[i];
            q.ref[i] = (double)q.f[i];
        }
    }
    q.c.data = ty == GROVE_COORD_F32 ? (const void *)q.f : (const void *)q.ref;
    q.c.n = nq;
    q.c.dims = p->c.dims;
    q.c.type = ty;
    q.nbf = n ? 2000000 / n : nq;
    if (q.nbf < 8) q.nbf = 8;
    if (q.nbf > nq || !with_bf) q.nbf = with_bf ? nq : 0;
    q.bf = (pr *)tu_malloc((q.nbf && n ? q.nbf * n : 1) * sizeof *q.bf);
    for (size_t j = 0; j < q.nbf; j++) brute(p, q.ref + j * D, q.bf + j * n);
    return q;
}

static void free_qset(qset *q)
{
    free(q->ref);
    free(q->f);
    free(q->bf);
}

static int g_quick; /* --quick: a small selection (for compute-sanitizer) */

/* The median over the brute-forced queries of the squared distance to the m-th nearest point:
 * radii from it give rows of about m matches whatever the data's density. */
static double kth_dist2(const qset *q, size_t n, size_t m)
{
    double *v = (double *)tu_malloc((q->nbf ? q->nbf : 1) * sizeof *v), med;
    if (q->nbf == 0 || n == 0) {
        free(v);
        return 0.0;
    }
    if (m >= n) m = n - 1;
    for (size_t j = 0; j < q->nbf; j++) v[j] = q->bf[j * n + m].d;
    qsort(v, q->nbf, sizeof *v, cmp_d);
    med = v[q->nbf / 2];
    free(v);
    return med;
}

/* Byte equality of two trees with host arrays. */
static int same_tree(const grove_kdtree *a, const grove_kdtree *b)
{
    const size_t nn = grove_kdtree_num_nodes(a), n = grove_kdtree_num_points(a);
    const size_t D = (size_t)grove_kdtree_dims(a);
    const size_t es = grove_kdtree_coord_type(a) == GROVE_COORD_F64 ? 8 : 4;
    if (nn != grove_kdtree_num_nodes(b) || n != grove_kdtree_num_points(b) ||
        grove_kdtree_depth(a) != grove_kdtree_depth(b) || !grove_kdtree_nodes(a) ||
        !grove_kdtree_nodes(b))
        return 0;
    return !memcmp(grove_kdtree_nodes(a), grove_kdtree_nodes(b), nn * sizeof(grove_kdtree_node)) &&
           !memcmp(grove_kdtree_bounds(a), grove_kdtree_bounds(b), nn * 2 * D * sizeof(double)) &&
           (n == 0 ||
            (!memcmp(grove_kdtree_index(a), grove_kdtree_index(b), n * sizeof(uint64_t)) &&
             !memcmp(grove_kdtree_points(a), grove_kdtree_points(b), n * D * es)));
}

static void run_set(tu_rng *r, int kind, size_t n, int D, grove_coord_type ty, grove_coord_type qty,
                    int leaf)
{
    static const int ks[] = {1, 8, 9, 16, 31, 32, 33, 50, 1024};
    static const size_t caps[] = {0, 1, 32, 33, 100};
    char what[200];
    set p = make_set(gen(r, kind, n, D), n, D, ty);
    grove_kdtree_opts o;
    grove_kdtree *t = NULL, *tg;
    size_t nq = g_quick ? 40 : n >= 100000 ? 2000 : n >= 1000 ? 300 : 200;
    qset q;
    double span = 0.0, rs[8];
    int nr = 0;

    snprintf(what, sizeof what, "%s n=%zu D=%d %s points, %s queries, leaf %d", kind_name[kind], n,
             D, ty == GROVE_COORD_F32 ? "f32" : "f64", qty == GROVE_COORD_F32 ? "f32" : "f64",
             leaf);
    grove_kdtree_default_opts(&o);
    o.leaf_size = leaf;
    CHECK_OK(g_cpu, grove_kdtree_build(g_cpu, &p.c, &o, &t));
    if (!t) {
        free_set(&p);
        return;
    }
    if (grove_kdtree_depth(t) + 2 > 48 && n <= 1000 && D == 3)
        printf("    %s: depth %zu\n", what, grove_kdtree_depth(t));
    q = make_qset(r, &p, kind, nq, qty, 1);
    tg = t;
#ifdef GROVE_HAVE_CUDA
    /* on the GPU the queries go to a tree built on the device (host arrays only after the
     * download below); the CPU's tree, uploaded per call, answers k = 8 and 50 as well */
    if (g_cuda) tg = device_tree(&p, &o);
    if (!tg) {
        free_qset(&q);
        grove_kdtree_destroy(t);
        free_set(&p);
        return;
    }
    if (g_cuda) {
        CHECK(grove_kdtree_nodes(tg) == NULL && grove_kdtree_num_points(tg) == n &&
              grove_kdtree_device(tg).nodes != NULL);
        check_knn(what, t, t, &p, &q, nq, 8);
        if (!g_quick) check_knn(what, t, t, &p, &q, nq, 50);
    }
#endif
    for (int ki = 0; ki < 9; ki++) /* quick: each register-list size (1, 16, 32) and a heap */
        if (!g_quick || ks[ki] == 1 || ks[ki] == 16 || ks[ki] == 32 || ks[ki] == 1024)
            check_knn(what, tg, t, &p, &q, nq, ks[ki]);
    check_knn(what, tg, t, &p, &q, n >= 100000 ? 4 : nq, (int)n + 3); /* k > n */

    for (size_t i = 0; i < n; i++)
        for (int d = 0; d < D; d++) {
            double v = fabs(p.ref[i * (size_t)D + (size_t)d]);
            if (v > span) span = v;
        }
    rs[nr++] = 0.0;
    rs[nr++] = 1e-7 * span;
    rs[nr++] = sqrt(kth_dist2(&q, n, 3));   /* a few matches, a tie at the boundary likely */
    rs[nr++] = sqrt(kth_dist2(&q, n, 150)); /* about 150: the sorted and the segmented rows */
    if (kind == K_LATTICE) rs[nr++] = 0.5;  /* on lattice shells: many points at exactly r */
    rs[nr++] = kind == K_HUGE ? DBL_MAX : 4.0 * span + 1.0; /* everything */
    if (kind == K_HUGE) rs[nr++] = 1e200;                   /* r * r = INFINITY */
    for (int ri = 0; ri < nr; ri++) {
        /* rows of (nearly) every point: a prefix of the queries on the large sets */
        size_t use = n >= 100000 && !(rs[ri] * rs[ri] < span * span) ? 40 : nq;
        if (!isfinite(rs[ri])) continue;
        if (g_quick && (ri == 1 || ri == 0)) continue;
        for (int ci = 0; ci < 5; ci++)
            if (!g_quick || ci == 0 || ci == 3)
                check_radius(what, tg, t, &p, &q, use, rs[ri], caps[ci]);
    }
    if (tg != t) {
        CHECK_OK(g_ctx, grove_kdtree_download(g_ctx, tg));
        CHECK_MSG(same_tree(tg, t), "%s: the device-built tree differs from the CPU's", what);
        grove_kdtree_destroy(tg);
    }
    free_qset(&q);
    grove_kdtree_destroy(t);
    free_set(&p);
}

/* ---- errors: both backends fail alike ---- */

static void test_errors(tu_rng *r)
{
    set p = make_set(gen(r, K_UNIFORM, 100, 3), 100, 3, GROVE_COORD_F32);
    grove_kdtree *t = NULL;
    double q[6] = {1.0, 2.0, 3.0, 4.0, NAN, 5.0};
    grove_coords qc = {q, 2, 3, GROVE_COORD_F64}, q2 = {q, 3, 2, GROVE_COORD_F64};
    uint64_t ix[20];
    double d2[20];
    grove_kdtree_result res;
    grove_ctx *both[2] = {g_ctx, g_cpu};
    char mk[2][GROVE__ERR_LEN], mr[2][GROVE__ERR_LEN];
    CHECK_OK(g_cpu, grove_kdtree_build(g_cpu, &p.c, NULL, &t));
    for (int b = 0; b < 2; b++) {
        grove_ctx *c = both[b];
        CHECK_STATUS(c, grove_kdtree_knn(c, t, &qc, 0, ix, d2), GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(c, grove_kdtree_knn(c, t, &q2, 1, ix, d2), GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(c, grove_kdtree_radius(c, t, &qc, -1.0, 0, &res), GROVE_ERR_INVALID_ARG);
        CHECK(res.offsets == NULL && res.num_queries == 0);
        CHECK_STATUS(c, grove_kdtree_radius(c, t, &qc, 1.0, 0, &res), GROVE_ERR_INVALID_ARG);
        snprintf(mr[b], sizeof mr[b], "%s", grove_ctx_last_error(c));
        CHECK_STATUS(c, grove_kdtree_knn(c, t, &qc, 2, ix, d2), GROVE_ERR_INVALID_ARG);
        snprintf(mk[b], sizeof mk[b], "%s", grove_ctx_last_error(c));
        CHECK_MSG(strstr(mk[b], "query 1") != NULL, "the message names the query: %s", mk[b]);
    }
    CHECK_MSG(!strcmp(mk[0], mk[1]), "different messages: %s | %s", mk[0], mk[1]);
    CHECK_MSG(!strcmp(mr[0], mr[1]), "different messages: %s | %s", mr[0], mr[1]);
    grove_kdtree_destroy(t);
    free_set(&p);
}

#ifdef GROVE_HAVE_CUDA
/* The device-resident calls: bad arguments, a CPU context, a device-only tree where host
 * arrays are needed, non-finite data in device memory, empty trees and batches. */
static void test_device_errors(tu_rng *r)
{
    set p = make_set(gen(r, K_UNIFORM, 100, 3), 100, 3, GROVE_COORD_F32);
    grove_kdtree *t = NULL, *td = NULL, *te = NULL;
    grove_kdtree_opts o;
    double q[6] = {0.25, 0.5, 0.75, 0.1, NAN, 0.2};
    grove_coords qh = {q, 2, 3, GROVE_COORD_F64}, qd = qh, q2, pd, e0;
    uint64_t *di = NULL, hi[8], ix[8];
    double *dd = NULL, hd[8], d2[8];
    grove_kdtree_result res;
    char mh[GROVE__ERR_LEN];
    const char *m;
    char path[] = "/tmp/test_kd_query_dev_XXXXXX";

    grove_kdtree_default_opts(&o);
    CHECK_OK(g_cpu, grove_kdtree_build(g_cpu, &p.c, NULL, &t));
    td = device_tree(&p, &o);
    qd.data = dev_copy(q, sizeof q);
    pd = p.c;
    pd.data = dev_copy(p.c.data, coords_bytes(&p.c));
    if (cudaMalloc((void **)&di, sizeof hi) != cudaSuccess ||
        cudaMalloc((void **)&dd, sizeof hd) != cudaSuccess)
        FAIL("cudaMalloc failed");
    if (!t || !td || !qd.data || !pd.data || !di || !dd) goto _end;

    /* CPU contexts */
    CHECK_STATUS(g_cpu, grove_kdtree_knn_device(g_cpu, t, &qd, 1, di, dd), GROVE_ERR_UNSUPPORTED);
    CHECK_STATUS(g_cpu, grove_kdtree_build_device(g_cpu, &pd, NULL, &te), GROVE_ERR_UNSUPPORTED);
    CHECK(te == NULL);
    CHECK_STATUS(g_cpu, grove_kdtree_download(g_cpu, td), GROVE_ERR_UNSUPPORTED);
    /* a device-only tree where the host arrays are needed */
    qh.n = 1;
    CHECK_STATUS(g_cpu, grove_kdtree_knn(g_cpu, td, &qh, 1, ix, d2), GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(g_cpu, grove_kdtree_radius(g_cpu, td, &qh, 1.0, 0, &res), GROVE_ERR_INVALID_ARG);
    if (mkstemp(path) >= 0) {
        CHECK_STATUS(g_cpu, grove_kdtree_save(g_cpu, td, path), GROVE_ERR_INVALID_ARG);
        remove(path);
    }
    CHECK(grove_kdtree_nodes(td) == NULL && grove_kdtree_points(td) == NULL);
    CHECK(grove_kdtree_device(NULL).nodes == NULL && grove_kdtree_device(t).nodes == NULL);
    /* bad arguments of the device calls */
    qd.n = 1;
    CHECK_STATUS(g_ctx, grove_kdtree_knn_device(g_ctx, NULL, &qd, 1, di, dd),
                 GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(g_ctx, grove_kdtree_knn_device(g_ctx, td, NULL, 1, di, dd), GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(g_ctx, grove_kdtree_knn_device(g_ctx, td, &qd, 0, di, dd), GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(g_ctx, grove_kdtree_knn_device(g_ctx, td, &qd, 1, NULL, dd),
                 GROVE_ERR_INVALID_ARG);
    q2 = qd;
    q2.dims = 2;
    CHECK_STATUS(g_ctx, grove_kdtree_knn_device(g_ctx, td, &q2, 1, di, dd), GROVE_ERR_INVALID_ARG);
    q2 = qd;
    q2.type = (grove_coord_type)7;
    CHECK_STATUS(g_ctx, grove_kdtree_knn_device(g_ctx, td, &q2, 1, di, dd), GROVE_ERR_INVALID_ARG);
    q2 = qd;
    q2.data = NULL;
    CHECK_STATUS(g_ctx, grove_kdtree_knn_device(g_ctx, td, &q2, 1, di, dd), GROVE_ERR_INVALID_ARG);
    /* a non-finite query: the host call's message */
    qd.n = 2;
    qh.n = 2;
    CHECK_STATUS(g_ctx, grove_kdtree_knn(g_ctx, t, &qh, 2, ix, d2), GROVE_ERR_INVALID_ARG);
    snprintf(mh, sizeof mh, "%s", grove_ctx_last_error(g_ctx));
    CHECK_STATUS(g_ctx, grove_kdtree_knn_device(g_ctx, td, &qd, 2, di, dd), GROVE_ERR_INVALID_ARG);
    m = grove_ctx_last_error(g_ctx);
    {
        static const char pd_[] = "grove_kdtree_knn_device: ", ph_[] = "grove_kdtree_knn: ";
        CHECK_MSG(strstr(m, pd_) == m && strstr(mh, ph_) == mh &&
                      !strcmp(m + strlen(pd_), mh + strlen(ph_)),
                  "messages: %s | %s", m, mh);
    }
    /* 0 queries: nothing written, nothing needed */
    q2 = qd;
    q2.n = 0;
    q2.data = NULL;
    CHECK_OK(g_ctx, grove_kdtree_knn_device(g_ctx, td, &q2, 3, NULL, NULL));
    /* build_device: bad arguments, a non-finite point in device memory */
    CHECK_STATUS(g_ctx, grove_kdtree_build_device(g_ctx, &pd, NULL, NULL), GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(g_ctx, grove_kdtree_build_device(g_ctx, NULL, NULL, &te), GROVE_ERR_INVALID_ARG);
    o.leaf_size = 0;
    CHECK_STATUS(g_ctx, grove_kdtree_build_device(g_ctx, &pd, &o, &te), GROVE_ERR_INVALID_ARG);
    o.leaf_size = 12;
    q2 = pd;
    q2.dims = 9;
    CHECK_STATUS(g_ctx, grove_kdtree_build_device(g_ctx, &q2, &o, &te), GROVE_ERR_INVALID_ARG);
    q2 = pd;
    q2.data = NULL;
    CHECK_STATUS(g_ctx, grove_kdtree_build_device(g_ctx, &q2, &o, &te), GROVE_ERR_INVALID_ARG);
    {
        float nan_f = NAN;
        cudaMemcpy((float *)pd.data + 7 * 3 + 2, &nan_f, sizeof nan_f, cudaMemcpyHostToDevice);
        CHECK_STATUS(g_ctx, grove_kdtree_build_device(g_ctx, &pd, &o, &te), GROVE_ERR_BAD_INPUT);
        CHECK_MSG(strstr(grove_ctx_last_error(g_ctx), "point 7 ") != NULL,
                  "the message names the point: %s", grove_ctx_last_error(g_ctx));
        CHECK(te == NULL);
    }
    CHECK_STATUS(g_ctx, grove_kdtree_download(g_ctx, NULL), GROVE_ERR_INVALID_ARG);
    /* a tree of 0 points: every row is padding */
    e0 = pd;
    e0.n = 0;
    CHECK_OK(g_ctx, grove_kdtree_build_device(g_ctx, &e0, NULL, &te));
    if (te) {
        qd.n = 1;
        CHECK(grove_kdtree_num_nodes(te) == 1 && grove_kdtree_device(te).nodes != NULL);
        CHECK_OK(g_ctx, grove_kdtree_knn_device(g_ctx, te, &qd, 4, di, dd));
        cudaMemcpy(hi, di, 4 * sizeof *hi, cudaMemcpyDeviceToHost);
        cudaMemcpy(hd, dd, 4 * sizeof *hd, cudaMemcpyDeviceToHost);
        for (int i = 0; i < 4; i++) CHECK(hi[i] == UINT64_MAX && hd[i] == INFINITY);
        qh.n = 1;
        CHECK_OK(g_ctx, grove_kdtree_knn(g_ctx, te, &qh, 1, ix, d2)); /* host call, device tree */
        CHECK(ix[0] == UINT64_MAX && d2[0] == INFINITY);
        CHECK_OK(g_ctx, grove_kdtree_download(g_ctx, te));
        CHECK(grove_kdtree_nodes(te) != NULL && grove_kdtree_nodes(te)[0].end == 0);
    }
_end:
    grove_kdtree_destroy(te);
    grove_kdtree_destroy(td);
    grove_kdtree_destroy(t);
    cudaFree((void *)qd.data);
    cudaFree((void *)pd.data);
    cudaFree(di);
    cudaFree(dd);
    free_set(&p);
}
#endif

/* ---- forced device out-of-memory ---- */

#ifdef GROVE_HAVE_CUDA
static void test_oom(tu_rng *r)
{
    enum { OPS = 5 };
    set p = make_set(gen(r, K_UNIFORM, 20000, 3), 20000, 3, GROVE_COORD_F64);
    qset q;
    grove_kdtree *t = NULL;
    const int ks[2] = {8, 64};
    const size_t nq = 3000, kmax = 64;
    uint64_t *ri[2], *gi = (uint64_t *)tu_malloc(nq * kmax * sizeof *gi);
    double *rd[2], *gd = (double *)tu_malloc(nq * kmax * sizeof *gd);
    grove_kdtree_result ref[3], res;
    const double rr[3] = {0.4, 20.0, 20.0};
    const size_t rcap[3] = {0, 0, 40}, ruse[3] = {nq, 60, 500};
    int nok[OPS] = {0}, noom[OPS] = {0};

    CHECK_OK(g_cpu, grove_kdtree_build(g_cpu, &p.c, NULL, &t));
    q = make_qset(r, &p, K_UNIFORM, nq, GROVE_COORD_F64, 0);
    for (int i = 0; i < 2; i++) {
        ri[i] = (uint64_t *)tu_malloc(nq * kmax * sizeof *ri[i]);
        rd[i] = (double *)tu_malloc(nq * kmax * sizeof *rd[i]);
        CHECK_OK(g_cpu, grove_kdtree_knn(g_cpu, t, &q.c, ks[i], ri[i], rd[i]));
    }
    for (int i = 0; i < 3; i++) {
        grove_coords qc = q.c;
        qc.n = ruse[i];
        CHECK_OK(g_cpu, grove_kdtree_radius(g_cpu, t, &qc, rr[i], rcap[i], &ref[i]));
    }
    for (size_t lim = 4096; lim <= ((size_t)1 << 28); lim = lim * 3 / 2) {
        grove_ctx_opts co;
        grove_ctx *c = NULL;
        grove_ctx_default_opts(&co);
        co.backend = GROVE_BACKEND_CUDA;
        co.device_mem_limit = lim;
        if (grove_ctx_create(&co, &c) != GROVE_OK) {
            FAIL("oom: ctx_create: %s", grove_ctx_last_error(c));
            grove_ctx_destroy(c);
            break;
        }
        for (int op = 0; op < OPS; op++) {
            grove_status s;
            int equal;
            if (op < 2) {
                s = grove_kdtree_knn(c, t, &q.c, ks[op], gi, gd);
                equal = s == GROVE_OK && !memcmp(gi, ri[op], nq * (size_t)ks[op] * sizeof *gi) &&
                        !memcmp(gd, rd[op], nq * (size_t)ks[op] * sizeof *gd);
            } else {
                grove_coords qc = q.c;
                qc.n = ruse[op - 2];
                s = grove_kdtree_radius(c, t, &qc, rr[op - 2], rcap[op - 2], &res);
                equal = s == GROVE_OK && result_equal(&res, &ref[op - 2]);
                if (s != GROVE_OK)
                    CHECK_MSG(res.offsets == NULL && res.indices == NULL && res.dist2 == NULL &&
                                  res.num_queries == 0,
                              "oom: op %d at limit %zu: result not zeroed", op, lim);
                grove_kdtree_result_free(&res);
            }
            if (s == GROVE_OK) {
                nok[op]++;
                CHECK_MSG(equal, "oom: op %d at limit %zu: result differs", op, lim);
            } else if (s == GROVE_ERR_DEVICE_OUT_OF_MEMORY) {
                noom[op]++;
                CHECK_MSG(strlen(grove_ctx_last_error(c)) > 20, "oom: op %d: message '%s'", op,
                          grove_ctx_last_error(c));
            } else {
                FAIL("oom: op %d at limit %zu: %s", op, lim, grove_ctx_last_error(c));
            }
            CHECK_MSG(c->dev_in_use == 0, "oom: op %d at limit %zu left %zu bytes held", op, lim,
                      c->dev_in_use);
        }
        grove_ctx_destroy(c);
    }
    printf("  oom: (ok / out of memory) knn k=8 %d/%d, k=64 %d/%d, radius %d/%d, radius with "
           "rows of 20000 %d/%d, capped radius %d/%d\n",
           nok[0], noom[0], nok[1], noom[1], nok[2], noom[2], nok[3], noom[3], nok[4], noom[4]);
    for (int op = 0; op < OPS; op++)
        CHECK_MSG(nok[op] > 0 && noom[op] > 0, "oom: op %d never %s", op,
                  nok[op] ? "ran out of memory" : "succeeded");
    for (int i = 0; i < 2; i++) {
        free(ri[i]);
        free(rd[i]);
    }
    for (int i = 0; i < 3; i++) grove_kdtree_result_free(&ref[i]);
    free(gi);
    free(gd);
    free_qset(&q);
    grove_kdtree_destroy(t);
    free_set(&p);
}
#endif

/* ---- large pass ---- */

/* The k best of all points for query q by insertion (a full sort of N points per query is slow). */
static void brute_kbest(const set *p, const double *q, size_t k, pr *best)
{
    size_t m = 0;
    for (size_t i = 0; i < p->c.n; i++) {
        pr e;
        size_t j;
        e.d = ref_dist2(p->ref + i * (size_t)p->c.dims, q, p->c.dims);
        e.i = i;
        if (m == k && pr_cmp(&e, &best[k - 1]) >= 0) continue;
        j = m < k ? m++ : k - 1;
        while (j > 0 && pr_cmp(&e, &best[j - 1]) < 0) {
            best[j] = best[j - 1];
            j--;
        }
        best[j] = e;
    }
}

static void run_large(tu_rng *r, size_t n)
{
    const size_t nq = 100000, nhuge = 20;
    char what[64];
    set p = make_set(gen(r, K_UNIFORM, n, 3), n, 3, GROVE_COORD_F32);
    grove_kdtree *t = NULL;
    qset q;
    pr *best = (pr *)tu_malloc(8 * sizeof *best);
    uint64_t *gi = (uint64_t *)tu_malloc(nq * 8 * sizeof *gi);
    double *gd = (double *)tu_malloc(nq * 8 * sizeof *gd);
    const double rmed = 10.0 * pow(20.0 / (double)n, 1.0 / 3.0); /* about 80 matches */
    int before = tu_failures;

    snprintf(what, sizeof what, "large: uniform n=%zu D=3 f32", n);
    CHECK_OK(g_cpu, grove_kdtree_build(g_cpu, &p.c, NULL, &t));
    if (!t) return;
    printf("  %s, depth %zu, %zu queries\n", what, grove_kdtree_depth(t), nq);
    q = make_qset(r, &p, K_UNIFORM, nq, GROVE_COORD_F32, 0);
    check_knn(what, t, t, &p, &q, nq, 8);
#ifdef GROVE_HAVE_CUDA
    if (g_cuda) { /* the device-built tree and the device queries */
        grove_kdtree_opts o;
        grove_kdtree *tg;
        grove_kdtree_default_opts(&o);
        tg = device_tree(&p, &o);
        if (tg) {
            check_knn(what, tg, t, &p, &q, nq, 8);
            CHECK_OK(g_ctx, grove_kdtree_download(g_ctx, tg));
            CHECK_MSG(same_tree(tg, t), "%s: the device-built tree differs from the CPU's", what);
        }
        grove_kdtree_destroy(tg);
        printf("  device tree and knn_device k=8 done (%d failures so far)\n", tu_failures);
    }
#endif
    CHECK_OK(g_ctx, grove_kdtree_knn(g_ctx, t, &q.c, 8, gi, gd));
    for (size_t j = 0; j < 64 && tu_failures == before; j++) {
        brute_kbest(&p, q.ref + j * 3, 8, best);
        for (size_t m = 0; m < 8; m++)
            if (gi[j * 8 + m] != best[m].i || gd[j * 8 + m] != best[m].d) {
                FAIL("%s: knn query %zu rank %zu: got (%llu, %.17g), brute force (%llu, %.17g)",
                     what, j, m, (unsigned long long)gi[j * 8 + m], gd[j * 8 + m],
                     (unsigned long long)best[m].i, best[m].d);
                break;
            }
    }
    printf("  knn k=8 done (%d failures so far)\n", tu_failures);
    check_knn(what, t, t, &p, &q, 2000, 1024);
    printf("  knn k=1024 done (%d failures so far)\n", tu_failures);
    check_radius(what, t, t, &p, &q, nq, rmed, 0);
    check_radius(what, t, t, &p, &q, nq, rmed, 8);
    printf("  radius r=%.4g done (%d failures so far)\n", rmed, tu_failures);
    /* rows of every point: the device-wide sort of a row, more than one fill batch in all, and
     * capped rows with a large heap */
    check_radius(what, t, t, &p, &q, nhuge, 100.0, 0);
    check_radius(what, t, t, &p, &q, 4, 100.0, 5000);
    {
        grove_kdtree_result g;
        grove_coords qc = q.c;
        pr *all = (pr *)tu_malloc(n * sizeof *all);
        qc.n = 2;
        CHECK_OK(g_ctx, grove_kdtree_radius(g_ctx, t, &qc, 100.0, 0, &g));
        for (size_t j = 0; j < 2 && g.offsets; j++) {
            uint64_t m = g.offsets[j + 1] - g.offsets[j];
            brute(&p, q.ref + j * 3, all);
            CHECK_MSG(m == n, "%s: row %zu has %llu matches", what, j, (unsigned long long)m);
            for (size_t i = 0; i < n && m == n; i++)
                if (g.indices[g.offsets[j] + i] != all[i].i ||
                    g.dist2[g.offsets[j] + i] != all[i].d) {
                    FAIL("%s: radius row %zu rank %zu differs from brute force", what, j, i);
                    break;
                }
        }
        grove_kdtree_result_free(&g);
        free(all);
    }
    printf("  radius rows of %zu matches done (%d failures so far)\n", n, tu_failures);
    free(best);
    free(gi);
    free(gd);
    free_qset(&q);
    grove_kdtree_destroy(t);
    free_set(&p);
}

/* ---- benchmark ---- */

#ifdef GROVE_HAVE_CUDA
static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Median over reps calls (after a warm-up) of one kNN (op 0) or radius (op 1) call, in ms. On
 * the GPU, timed with events on the context's stream around the call, which returns with the
 * results in host memory: the whole call (query conversion and ordering on the host, tree upload,
 * kernels, copies back). */
static double time_call(grove_ctx *c, const grove_kdtree *t, const grove_coords *q, int op,
                        double r, int reps, uint64_t *ix, double *d2, grove_kdtree_result *res)
{
    double ms[64];
    int gpu = grove_ctx_backend(c) == GROVE_BACKEND_CUDA;
    cudaEvent_t e0 = NULL, e1 = NULL;
    if (gpu && (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)) {
        FAIL("bench: cudaEventCreate failed");
        return 0.0;
    }
    if (reps > 64) reps = 64;
    for (int i = -1; i < reps; i++) {
        double t0 = now_ms(), t1;
        float ev = 0.0f;
        if (i >= 0) grove_kdtree_result_free(res);
        if (gpu) cudaEventRecord(e0, (cudaStream_t)grove_ctx_stream(c));
        if (op == 0)
            CHECK_OK(c, grove_kdtree_knn(c, t, q, 8, ix, d2));
        else
            CHECK_OK(c, grove_kdtree_radius(c, t, q, r, 0, res));
        t1 = now_ms();
        if (gpu) {
            cudaEventRecord(e1, (cudaStream_t)grove_ctx_stream(c));
            cudaEventSynchronize(e1);
            cudaEventElapsedTime(&ev, e0, e1);
        }
        if (i >= 0) ms[i] = gpu ? (double)ev : t1 - t0;
    }
    if (gpu) {
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
    }
    qsort(ms, (size_t)reps, sizeof *ms, cmp_d);
    return reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
}

static void bench(tu_rng *r, size_t n, int reps)
{
    const size_t nq = 1000000;
    set p = make_set(gen(r, K_UNIFORM, n, 3), n, 3, GROVE_COORD_F32);
    float *qf = (float *)tu_malloc(nq * 3 * sizeof *qf);
    grove_coords qc = {qf, nq, 3, GROVE_COORD_F32};
    grove_kdtree *t = NULL;
    uint64_t *gi = (uint64_t *)tu_malloc(nq * 8 * sizeof *gi),
             *ci = (uint64_t *)tu_malloc(nq * 8 * sizeof *ci);
    double *gd = (double *)tu_malloc(nq * 8 * sizeof *gd),
           *cd = (double *)tu_malloc(nq * 8 * sizeof *cd);
    grove_kdtree_result gr, cr;
    double rr = 10.0 * pow(16.0 / (double)n / (4.0 / 3.0 * 3.141592653589793), 1.0 / 3.0);
    double tg, tc, t0;
    grove_device_info info;
    memset(&gr, 0, sizeof gr);
    memset(&cr, 0, sizeof cr);
    for (size_t i = 0; i < nq * 3; i++) qf[i] = (float)(unit(r) * 10.0 - 3.0);
    t0 = now_ms();
    CHECK_OK(g_cpu, grove_kdtree_build(g_cpu, &p.c, NULL, &t));
    if (!t) return;
    grove_device_query(grove_ctx_device(g_ctx), &info);
    printf("bench: %s, %zu uniform 3-D float points (CPU build %.0f ms, depth %zu), %zu queries, "
           "median of %d\n",
           info.name, n, now_ms() - t0, grove_kdtree_depth(t), nq, reps);
    tg = time_call(g_ctx, t, &qc, 0, 0.0, reps, gi, gd, &gr);
    tc = time_call(g_cpu, t, &qc, 0, 0.0, reps, ci, cd, &cr);
    CHECK_MSG(!memcmp(gi, ci, nq * 8 * sizeof *gi) && !memcmp(gd, cd, nq * 8 * sizeof *gd),
              "bench: knn GPU and CPU differ");
    printf("bench: knn k=8: GPU %.2f ms = %.2f M queries/s | CPU %.2f ms = %.2f M queries/s | "
           "x%.1f\n",
           tg, nq / tg / 1e3, tc, nq / tc / 1e3, tc / tg);
    tg = time_call(g_ctx, t, &qc, 1, rr, reps, gi, gd, &gr);
    tc = time_call(g_cpu, t, &qc, 1, rr, reps, ci, cd, &cr);
    CHECK_MSG(result_equal(&gr, &cr), "bench: radius GPU and CPU differ");
    printf("bench: radius r=%.4f (%.1f matches/query): GPU %.2f ms = %.2f M queries/s | CPU "
           "%.2f ms = %.2f M queries/s | x%.1f\n",
           rr, (double)gr.offsets[nq] / nq, tg, nq / tg / 1e3, tc, nq / tc / 1e3, tc / tg);
    grove_kdtree_result_free(&gr);
    grove_kdtree_result_free(&cr);
    free(gi);
    free(ci);
    free(gd);
    free(cd);
    free(qf);
    grove_kdtree_destroy(t);
    free_set(&p);
}
#endif

/* ---- main ---- */

static int usage(void)
{
    fprintf(stderr, "usage: test_kd_query [--backend cuda|cpu] [--large N] [--seed S] [--max-n N] "
                    "[--bench N] [--reps R] [--quick 1]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *backend = "cuda";
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    size_t large = 0, bench_n = 0;
    int reps = 10;
    grove_ctx_opts o;
    tu_rng r;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) return usage();
        if (!strcmp(argv[i], "--backend"))
            backend = argv[++i];
        else if (!strcmp(argv[i], "--large"))
            large = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--max-n"))
            g_max_n = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--bench"))
            bench_n = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick"))
            g_quick = atoi(argv[++i]);
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
        if (tu_cuda_ctx("test_kd_query", NULL, &g_ctx) != 0) {
            grove_ctx_destroy(g_cpu);
            return TEST_SKIP;
        }
        g_cuda = 1;
    } else if (!strcmp(backend, "cpu")) {
        g_ctx = g_cpu;
    } else {
        return usage();
    }
    printf("test_kd_query: backend %s, seed %llu\n", backend, (unsigned long long)seed);
    fflush(stdout);
    r.s = seed;
    if (bench_n) {
#ifdef GROVE_HAVE_CUDA
        if (g_cuda) bench(&r, bench_n, reps);
#endif
        if (!g_cuda) return usage();
    } else if (large) {
        run_large(&r, large);
    } else {
        static const size_t SIZES[] = {0, 1, 31, 32, 33, 1000, 100000};
        if (g_quick) g_max_n = g_max_n < 1000 ? g_max_n : 1000;
        static const int DIMS[] = {2, 3, 5};
        test_errors(&r);
#ifdef GROVE_HAVE_CUDA
        if (g_cuda && g_max_n >= 20000) test_oom(&r);
        if (g_cuda) test_device_errors(&r);
#endif
        for (size_t si = 0; si < sizeof SIZES / sizeof SIZES[0]; si++) {
            size_t n = SIZES[si];
            int v = 0;
            if (n > g_max_n || (g_quick && n != 0 && n != 33 && n != 1000)) continue;
            for (int kind = 0; kind < K_KINDS; kind++)
                for (int di = 0; di < 3; di++)
                    for (int ty = 0; ty < 2; ty++, v++) {
                        grove_coord_type pt = ty ? GROVE_COORD_F64 : GROVE_COORD_F32;
                        grove_coord_type qt = (v / 2) % 2 ? GROVE_COORD_F64 : GROVE_COORD_F32;
                        int leaf = v % 3 == 0 ? 12 : v % 3 == 1 ? 1 : 64;
                        if (kind == K_HUGE && pt == GROVE_COORD_F32) continue;
                        if (g_quick && (di != 1 || ty != (kind == K_HUGE || kind % 2))) continue;
                        if (kind == K_HUGE) qt = GROVE_COORD_F64; /* not representable as float */
                        /* the largest size: one set per kind, dims and types in rotation */
                        if (n >= 100000 && (di != kind % 3 || ty != (kind / 3) % 2) &&
                            kind != K_HUGE)
                            continue;
                        if (n >= 100000 && kind == K_HUGE && di != 1) continue;
                        run_set(&r, kind, n, DIMS[di], pt, qt, n >= 100000 ? 12 : leaf);
                    }
            /* Stacks at the GPU kernels' limits: K_LINE at leaf size 1 makes a tree two levels
             * deeper per point (depth 56, 58, 60, 62, 62, 64 for these n), around the kNN fast
             * path's 64 entries (depth + 2 <= 64: n <= 108) and the general kernels' 48. */
            if (n == 1000) {
                static const size_t LINE_N[] = {101, 103, 105, 107, 108, 109};
                for (size_t li = 0; li < sizeof LINE_N / sizeof LINE_N[0]; li++) {
                    if (g_quick && li % 2 == 0) continue;
                    run_set(&r, K_LINE, LINE_N[li], li % 2 ? 3 : 2,
                            li % 3 ? GROVE_COORD_F32 : GROVE_COORD_F64, GROVE_COORD_F64, 1);
                }
            }
            if (n == 1000) /* the dimensions the kernels do not specialise */
                for (int kind = 0; kind < K_KINDS; kind++) {
                    if (g_quick && kind != K_GEOM) continue;
                    grove_coord_type pt =
                        kind % 2 || kind == K_HUGE ? GROVE_COORD_F64 : GROVE_COORD_F32;
                    run_set(&r, kind, n, 1, pt, GROVE_COORD_F64, 12);
                    run_set(&r, kind, n, 8, pt, pt, kind % 2 ? 64 : 12);
                }
            printf("  n = %zu done (%d failures so far)\n", n, tu_failures);
            fflush(stdout);
        }
    }
    if (tu_failures)
        fprintf(stderr, "test_kd_query: seed %llu (repeat with --seed %llu)\n",
                (unsigned long long)seed, (unsigned long long)seed);
    if (g_ctx != g_cpu) grove_ctx_destroy(g_ctx);
    grove_ctx_destroy(g_cpu);
    return tu_finish("test_kd_query");
}
