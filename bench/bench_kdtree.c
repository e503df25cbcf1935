/*
 * bench_kdtree.c - `grove bench kdtree`: k-d tree build and kNN query rates beside in-run
 * baselines.
 *
 * For each size N (10^6 and 10^7, or --size) and distribution (uniform in the unit cube;
 * clustered: 32 Gaussian blobs whose spreads range from 1e-4 to 1e-1 and whose populations
 * differ by ~11x), 3-D float points, Q = N queries from the same distribution (other seed),
 * k = 8:
 *   build   grove_kdtree_build on the context's backend (impl gpu on a CUDA context) and on a
 *           second context with the CPU backend (impl cpu); wall time around the synchronous
 *           call, vs floor = that backend's Morton sort time / build time;
 *   knn8    grove_kdtree_knn with k = 8 for the Q queries (indices and squared distances back in
 *           host memory), both backends;
 *   build_dev / knn8_dev  (CUDA) grove_kdtree_build_device and grove_kdtree_knn_device (k = 8)
 *           on points and queries already in device memory, results left there (CUDA events
 *           around the calls); checked like the rows above (the tree downloaded afterwards);
 *   morton_sort (floor)  bounding box, 21-bit quantisation, prim's 3-D Morton encode and a
 *           radix sort of the (64-bit code, 32-bit index) pairs of the same points: the first
 *           step of a Morton-order build, the floor-like reference for a build (CUDA events on
 *           the GPU; the CPU backend's host calls, wall time);
 *   knn8_*_sub / brute_knn8_*_sub  on a CUDA context, once per distribution: a brute-force
 *           kNN kernel (bench_kdtree_cuda.cu) over the first min(N, 10^5) points with as many
 *           queries, beside the tree's kNN on the same points and queries on both backends;
 *           vs floor = brute-force time / row time (the tree's speed-up over brute force).
 * Checks: the CPU tree passes a structural validator and the context's tree equals it byte for
 * byte (nodes, bounds, points, index); the CPU kNN rows equal a double-precision host brute
 * force on a sample of queries and the context's rows equal the CPU's exactly; the subset rows
 * equal the brute-force kernel exactly; the Morton sorts are recomputed on the host. A failed
 * check leaves its row unchecked and a note in the context's message.
 * GPU rows: median of --repeats after --warmup. CPU rows: at most 3 repeats after 1 warm-up,
 * and 1 repeat without warm-up from 10^7 points on (they take seconds each).
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "bench_cuda.h"
#include "core.h" /* grove__error: failures are reported like the library does */
#include "grove/kdtree.h"
#include "grove/prim.h"

#define KD_K 8
#define KD_SUBSET 100000 /* points (and queries) of the brute-force comparison */
#define KD_QBITS 21      /* Morton bits per axis */

#ifdef GROVE_HAVE_CUDA
/* bench_kdtree_cuda.cu. Brute-force kNN (k = 8) of nq queries over n points, the API's
 * distances and order; idx/d2 receive nq * 8 results; *ms the median kernel time. */
grove_status grove__bench_kd_brute_cuda(grove_ctx *ctx, const float *pts, size_t n, const float *q,
                                        size_t nq, int warmup, int repeats, uint64_t *idx,
                                        double *d2, double *ms);
/* The Morton floor on the GPU: box, quantisation, encode, sort; codes/vals receive the sorted
 * pairs and box the points' box (lo xyz, hi xyz) of the last run; *ms the median time. */
grove_status grove__bench_kd_morton_cuda(grove_ctx *ctx, const float *pts, size_t n, int warmup,
                                         int repeats, uint64_t *codes, uint32_t *vals, float box[6],
                                         double *ms);
/* The device-resident calls on points and queries uploaded beforehand: the median times of
 * grove_kdtree_build_device() and grove_kdtree_knn_device() (k = 8); *tree receives the last
 * tree, downloaded (the caller destroys it, also on failure), idx/d2 the last kNN rows. */
grove_status grove__bench_kd_device_cuda(grove_ctx *ctx, const float *pts, size_t n, const float *q,
                                         size_t nq, int warmup, int repeats, grove_kdtree **tree,
                                         uint64_t *idx, double *d2, double *build_ms,
                                         double *knn_ms);
#endif

/* Point i of a distribution, a pure function of (seed, i, kind): any thread count gives the
 * same points, the first m points of a set are the same for every N, and another seed draws
 * other points of the same distribution (the clusters' centres and spreads are fixed). */
static void gen_points(float *xyz, size_t n, int clustered, uint64_t seed)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        double p[3];
        if (!clustered) {
            for (int d = 0; d < 3; d++)
                p[d] = grove__bench_unit(grove__bench_hash(seed + (uint64_t)d, i));
        } else {
            /* u^2 skews the choice: cluster 0 gets ~11x the points of cluster 31 */
            double u = grove__bench_unit(grove__bench_hash(seed + 3, i));
            uint64_t c = (uint64_t)(32.0 * u * u);
            double sd = pow(10.0, -4.0 + 3.0 * grove__bench_unit(grove__bench_hash(300, c)));
            double r1 =
                sqrt(-2.0 * log(grove__bench_unit(grove__bench_hash(seed + 4, i)) + 1e-300));
            double r2 =
                sqrt(-2.0 * log(grove__bench_unit(grove__bench_hash(seed + 5, i)) + 1e-300));
            double a1 = 6.283185307179586 * grove__bench_unit(grove__bench_hash(seed + 6, i));
            double a2 = 6.283185307179586 * grove__bench_unit(grove__bench_hash(seed + 7, i));
            double g[3] = {r1 * cos(a1), r1 * sin(a1), r2 * cos(a2)};
            for (int d = 0; d < 3; d++)
                p[d] = 0.1 + 0.8 * grove__bench_unit(grove__bench_hash(301 + (uint64_t)d, c)) +
                       sd * g[d];
        }
        for (int d = 0; d < 3; d++) xyz[3 * i + d] = (float)p[d];
    }
}

/* ---- checks ---- */

static int trees_equal(const grove_kdtree *a, const grove_kdtree *b)
{
    size_t n = grove_kdtree_num_points(a), m = grove_kdtree_num_nodes(a);
    return n == grove_kdtree_num_points(b) && m == grove_kdtree_num_nodes(b) &&
           grove_kdtree_dims(a) == 3 && grove_kdtree_dims(b) == 3 &&
           !memcmp(grove_kdtree_nodes(a), grove_kdtree_nodes(b), m * sizeof(grove_kdtree_node)) &&
           !memcmp(grove_kdtree_bounds(a), grove_kdtree_bounds(b), m * 6 * sizeof(double)) &&
           (n == 0 ||
            (!memcmp(grove_kdtree_points(a), grove_kdtree_points(b), 3 * n * sizeof(float)) &&
             !memcmp(grove_kdtree_index(a), grove_kdtree_index(b), n * sizeof(uint64_t))));
}

/* The tree's defining properties, in O(n + nodes): index a permutation with tree point i ==
 * input point index[i]; preorder links and child ranges; leaf sizes; boxes tight (a leaf's
 * from its points, an inner node's the union of its children's, built bottom-up since
 * children follow their parent in preorder); the split rule, which with tight boxes is
 * left.hi[axis] < split <= right.lo[axis] (an empty child's +INF/-INF box passes). */
static int tree_valid(grove_ctx *ctx, const grove_kdtree *t, const float *pts, size_t n)
{
    const grove_kdtree_node *nd = grove_kdtree_nodes(t);
    const double *bounds = grove_kdtree_bounds(t);
    const float *tp = (const float *)grove_kdtree_points(t);
    const uint64_t *ix = grove_kdtree_index(t);
    size_t nn = grove_kdtree_num_nodes(t), top = 0, next = 0;
    grove_kdtree_opts o;
    size_t *stack = NULL;
    unsigned char *seen = NULL;
    double *box = NULL;
    int ok = 1;
    grove_kdtree_get_opts(t, &o);
    if (grove_kdtree_num_points(t) != n || grove_kdtree_dims(t) != 3 ||
        grove_kdtree_coord_type(t) != GROVE_COORD_F32 || nn == 0 || !nd || !bounds)
        return grove__bench_note(
            ctx, "bench kdtree: CPU tree of %zu points: wrong size, dims or type", n);
    stack = (size_t *)malloc(nn * sizeof *stack);
    seen = (unsigned char *)calloc(n ? n : 1, 1);
    box = (double *)malloc(nn * 6 * sizeof *box);
    if (!stack || !seen || !box) {
        ok = grove__bench_note(ctx, "bench kdtree: out of host memory for the tree check");
        goto _end;
    }
    for (size_t i = 0; ok && i < n; i++)
        if (ix[i] >= n || seen[ix[i]]++ || memcmp(tp + 3 * i, pts + 3 * ix[i], 12) != 0)
            ok =
                grove__bench_note(ctx, "bench kdtree: tree point %zu: bad index or coordinates", i);
    if (ok && (nd[0].begin != 0 || nd[0].end != n))
        ok = grove__bench_note(ctx, "bench kdtree: the root's range is not all points");
    stack[top++] = 0;
    while (ok && top > 0) {
        size_t i = stack[--top];
        const grove_kdtree_node *a = &nd[i];
        if (i != next++ || a->begin > a->end || a->end > n) {
            ok = grove__bench_note(ctx, "bench kdtree: node %zu out of preorder or bad range", i);
        } else if (a->kind == GROVE_KDTREE_LEAF) {
            if (a->right != 0 || a->axis != -1)
                ok = grove__bench_note(ctx, "bench kdtree: leaf %zu has links", i);
        } else if (a->axis < 0 || a->axis > 2 || a->right <= i + 1 || a->right >= nn ||
                   nd[i + 1].begin != a->begin || nd[i + 1].end != nd[a->right].begin ||
                   nd[a->right].end != a->end) {
            ok = grove__bench_note(ctx, "bench kdtree: node %zu: bad axis, links or child ranges",
                                   i);
        } else {
            stack[top++] = (size_t)a->right;
            stack[top++] = i + 1;
        }
    }
    if (ok && next != nn)
        ok = grove__bench_note(ctx, "bench kdtree: %zu of %zu nodes reached", next, nn);
    for (size_t i = nn; ok && i-- > 0;) {
        const grove_kdtree_node *a = &nd[i];
        double *b = box + 6 * i;
        for (int d = 0; d < 3; d++) {
            b[d] = INFINITY;
            b[3 + d] = -INFINITY;
        }
        if (a->kind == GROVE_KDTREE_LEAF) {
            int all_equal = 1;
            for (uint64_t p = a->begin; p < a->end; p++)
                for (int d = 0; d < 3; d++) {
                    double v = (double)tp[3 * p + d];
                    if (v == 0) v = 0; /* the build stores -0 as +0 */
                    b[d] = v < b[d] ? v : b[d];
                    b[3 + d] = v > b[3 + d] ? v : b[3 + d];
                    all_equal &= tp[3 * p + d] == tp[3 * a->begin + d];
                }
            if (a->end - a->begin > (uint64_t)o.leaf_size && !all_equal)
                ok = grove__bench_note(ctx, "bench kdtree: leaf %zu holds %llu points", i,
                                       (unsigned long long)(a->end - a->begin));
        } else {
            const double *l = box + 6 * (i + 1), *r = box + 6 * a->right;
            for (int d = 0; d < 3; d++) {
                b[d] = l[d] < r[d] ? l[d] : r[d];
                b[3 + d] = l[3 + d] > r[3 + d] ? l[3 + d] : r[3 + d];
            }
            if (!(l[3 + a->axis] < a->split) || !(r[a->axis] >= a->split))
                ok = grove__bench_note(ctx, "bench kdtree: node %zu: a point on the wrong side", i);
        }
        for (int d = 0; ok && d < 6; d++)
            if (b[d] != bounds[6 * i + d])
                ok = grove__bench_note(ctx, "bench kdtree: node %zu: box is not tight", i);
    }
_end:
    free(stack);
    free(seen);
    free(box);
    return ok;
}

/* The k best of n points for query q by (squared distance, index), distances as the API
 * defines them (double difference, square and sum each rounded, axis order; this file is
 * C11 without extensions, so the compiler does not contract them into FMAs). Scanning in index
 * order, a candidate goes after the kept ones at an equal distance. Pads as the API does. */
static void brute_one(const float *p, size_t n, const float *q, uint64_t *bi, double *bd)
{
    int have = 0;
    for (int j = 0; j < KD_K; j++) {
        bi[j] = UINT64_MAX;
        bd[j] = INFINITY;
    }
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        int pos;
        for (int d = 0; d < 3; d++) {
            double dx = (double)p[3 * i + d] - (double)q[d];
            double a = dx * dx;
            s = s + a;
        }
        if (have == KD_K && !(s < bd[KD_K - 1])) continue;
        pos = have < KD_K ? have++ : KD_K - 1;
        while (pos > 0 && bd[pos - 1] > s) {
            bd[pos] = bd[pos - 1];
            bi[pos] = bi[pos - 1];
            pos--;
        }
        bd[pos] = s;
        bi[pos] = i;
    }
}

/* Compares the rows of an evenly spread sample of queries (about 3e8 point visits in all, 16
 * to 256 queries) with brute force. */
static int knn_sample_ok(grove_ctx *ctx, const float *p, size_t n, const float *q, size_t nq,
                         const uint64_t *idx, const double *d2)
{
    size_t ns = n ? (size_t)3e8 / n : 256;
    long long bad = -1;
    ns = ns < 16 ? 16 : ns > 256 ? 256 : ns;
    if (ns > nq) ns = nq;
#pragma omp parallel for schedule(dynamic, 1)
    for (long long s = 0; s < (long long)ns; s++) {
        size_t j = (size_t)s * nq / ns;
        uint64_t bi[KD_K];
        double bd[KD_K];
        brute_one(p, n, q + 3 * j, bi, bd);
        if (memcmp(bi, idx + KD_K * j, sizeof bi) || memcmp(bd, d2 + KD_K * j, sizeof bd)) {
#pragma omp critical
            bad = (long long)j;
        }
    }
    if (bad >= 0)
        return grove__bench_note(
            ctx, "bench kdtree: knn of query %lld of %zu differs from brute force", bad, nq);
    return 1;
}

static int results_equal(grove_ctx *ctx, const char *what, size_t nq, const uint64_t *ia,
                         const double *da, const uint64_t *ib, const double *db)
{
    for (size_t j = 0; j < nq; j++)
        if (memcmp(ia + KD_K * j, ib + KD_K * j, KD_K * sizeof *ia) ||
            memcmp(da + KD_K * j, db + KD_K * j, KD_K * sizeof *da))
            return grove__bench_note(ctx, "bench kdtree: %s: row of query %zu differs", what, j);
    return 1;
}

/* ---- the Morton floor ---- */

/* Coordinate v of an axis spanning [lo, hi] as a 21-bit integer; bench_kdtree_cuda.cu has the
 * same steps (a difference and a product, each rounded). */
static uint32_t quantize(float v, float lo, float hi)
{
    double ext = (double)hi - (double)lo, scale = ext > 0 ? 2097152.0 / ext : 0.0;
    double x = ((double)v - (double)lo) * scale;
    return x >= 2097151.0 ? 2097151u : (uint32_t)x;
}

/* Sorted (code, index) pairs: indices a permutation, codes ascending and each the code of its
 * point, equal codes in ascending index order (the sort is stable). */
static int floor_ok(grove_ctx *ctx, const float *xyz, size_t n, const float box[6],
                    const uint64_t *codes, const uint32_t *vals)
{
    unsigned char *seen = (unsigned char *)calloc(n ? n : 1, 1);
    int ok = 1;
    if (!seen) return grove__bench_note(ctx, "bench kdtree: out of host memory for the sort check");
    for (size_t i = 0; ok && i < n; i++) {
        if (vals[i] >= n || seen[vals[i]]++) {
            ok = 0;
        } else {
            const float *p = xyz + 3 * (size_t)vals[i];
            uint64_t c =
                grove_morton3(quantize(p[0], box[0], box[3]), quantize(p[1], box[1], box[4]),
                              quantize(p[2], box[2], box[5]));
            ok = c == codes[i] &&
                 (i == 0 || codes[i - 1] < c || (codes[i - 1] == c && vals[i - 1] < vals[i]));
        }
        if (!ok)
            grove__bench_note(ctx, "bench kdtree: Morton sort of %zu points wrong at %zu", n, i);
    }
    free(seen);
    return ok;
}

/* The floor with the CPU backend's host calls; buffers are the caller's (3 n u32, n u64, n
 * u32). Returns the status; *ok the check. */
static grove_status cpu_floor(grove_ctx *cpu, grove_ctx *ctx, const float *xyz, size_t n,
                              int warmup, int repeats, uint32_t *q, uint64_t *codes, uint32_t *vals,
                              double *ms, int *ok)
{
    double *t = (double *)malloc((size_t)repeats * sizeof *t);
    float lo[3], hi[3], box[6];
    grove_status s = GROVE_OK;
    if (!t) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "bench kdtree: out of memory");
    for (int r = -warmup; r < repeats && s == GROVE_OK; r++) {
        double t0 = grove__bench_now_s();
        s = grove_bbox(cpu, 3, xyz, n, lo, hi);
        if (s != GROVE_OK) break;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) {
            for (int d = 0; d < 3; d++) q[d * n + i] = quantize(xyz[3 * i + d], lo[d], hi[d]);
            vals[i] = (uint32_t)i;
        }
        s = grove_morton3_encode(cpu, q, q + n, q + 2 * n, codes, n);
        if (s == GROVE_OK) s = grove_sort_pairs(cpu, GROVE_U64, codes, 4, vals, n, 0, 63);
        if (r >= 0) t[r] = (grove__bench_now_s() - t0) * 1e3;
    }
    if (s != GROVE_OK) {
        free(t);
        return grove__error(ctx, s, "bench kdtree: CPU Morton sort: %s", grove_ctx_last_error(cpu));
    }
    *ms = grove__bench_median(t, repeats);
    free(t);
    for (int d = 0; d < 3; d++) {
        box[d] = lo[d];
        box[3 + d] = hi[d];
    }
    *ok = floor_ok(ctx, xyz, n, box, codes, vals);
    return GROVE_OK;
}

/* ---- tree timings ---- */

/* A failure on the CPU context is reported through ctx, the context the CLI reads. */
static grove_status pass_error(grove_ctx *on, grove_ctx *ctx, grove_status s)
{
    if (s != GROVE_OK && on != ctx) grove__error(ctx, s, "%s", grove_ctx_last_error(on));
    return s;
}

/* Median wall time of `repeats` builds after `warmup`; *tree receives the last tree. */
static grove_status time_build(grove_ctx *on, grove_ctx *ctx, const grove_coords *c, int warmup,
                               int repeats, double *ms, grove_kdtree **tree)
{
    double *t = (double *)malloc((size_t)repeats * sizeof *t);
    grove_status s = GROVE_OK;
    *tree = NULL;
    if (!t) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "bench kdtree: out of memory");
    for (int r = -warmup; r < repeats && s == GROVE_OK; r++) {
        double t0;
        grove_kdtree_destroy(*tree);
        *tree = NULL;
        t0 = grove__bench_now_s();
        s = grove_kdtree_build(on, c, NULL, tree);
        if (r >= 0) t[r] = (grove__bench_now_s() - t0) * 1e3;
    }
    if (s == GROVE_OK) *ms = grove__bench_median(t, repeats);
    free(t);
    return pass_error(on, ctx, s);
}

/* Median wall time of `repeats` kNN batches (k = 8) after `warmup`; the results of the last
 * are in idx and d2. */
static grove_status time_knn(grove_ctx *on, grove_ctx *ctx, const grove_kdtree *tree,
                             const grove_coords *q, int warmup, int repeats, uint64_t *idx,
                             double *d2, double *ms)
{
    double *t = (double *)malloc((size_t)repeats * sizeof *t);
    grove_status s = GROVE_OK;
    if (!t) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "bench kdtree: out of memory");
    for (int r = -warmup; r < repeats && s == GROVE_OK; r++) {
        double t0 = grove__bench_now_s();
        s = grove_kdtree_knn(on, tree, q, KD_K, idx, d2);
        if (r >= 0) t[r] = (grove__bench_now_s() - t0) * 1e3;
    }
    if (s == GROVE_OK) *ms = grove__bench_median(t, repeats);
    free(t);
    return pass_error(on, ctx, s);
}

/* ---- the suite ---- */

typedef struct kd_bench {
    grove_ctx *ctx, *cpu;
    int cuda;
    int warmup, repeats;         /* the context's rows */
    int cpu_warmup, cpu_repeats; /* the CPU backend's rows at this size */
    grove_bench_row *rows;
    int max_rows, *nrows;
} kd_bench;

/* Morton-sort floors of the n points on both backends (the GPU one on a CUDA context). */
static grove_status run_floors(kd_bench *b, const char *dname, const float *xyz, size_t n,
                               double *gpu_ms, double *cpu_ms)
{
    uint32_t *q = (uint32_t *)malloc((3 * n + 1) * sizeof *q);
    uint64_t *codes = (uint64_t *)malloc((n + 1) * sizeof *codes);
    uint32_t *vals = (uint32_t *)malloc((n + 1) * sizeof *vals);
    grove_status s = GROVE_OK;
    char op[48];
    int ok = 0;
    snprintf(op, sizeof op, "morton_sort_%s", dname);
    if (!q || !codes || !vals) {
        s = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY, "bench kdtree: out of memory");
        goto _end;
    }
#ifdef GROVE_HAVE_CUDA
    if (b->cuda) {
        float box[6];
        s = grove__bench_kd_morton_cuda(b->ctx, xyz, n, b->warmup, b->repeats, codes, vals, box,
                                        gpu_ms);
        if (s != GROVE_OK) goto _end;
        ok = floor_ok(b->ctx, xyz, n, box, codes, vals);
        grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "gpu", n, *gpu_ms, *gpu_ms, ok);
    }
#else
    (void)gpu_ms;
#endif
    s = cpu_floor(b->cpu, b->ctx, xyz, n, b->cpu_warmup, b->cpu_repeats, q, codes, vals, cpu_ms,
                  &ok);
    if (s == GROVE_OK)
        grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "cpu", n, *cpu_ms, *cpu_ms, ok);
_end:
    free(q);
    free(codes);
    free(vals);
    return s;
}

/* Builds and Q = N queries on both backends. */
static grove_status run_trees(kd_bench *b, const char *dname, const float *xyz, const float *qxyz,
                              size_t n, double gpu_floor, double cpu_floor_ms)
{
    grove_coords pc = {xyz, n, 3, GROVE_COORD_F32}, qc = {qxyz, n, 3, GROVE_COORD_F32};
    grove_kdtree *tg = NULL, *tc = NULL;
    uint64_t *ic = (uint64_t *)malloc(KD_K * n * sizeof *ic), *ig = NULL;
    double *dc = (double *)malloc(KD_K * n * sizeof *dc), *dg = NULL;
    double ms_g = 0, ms_c = 0, kms_g = 0, kms_c = 0;
    grove_status s = GROVE_OK;
    int valid, same = 0, kok, ksame = 0;
    char op[48];
    if (b->cuda) {
        ig = (uint64_t *)malloc(KD_K * n * sizeof *ig);
        dg = (double *)malloc(KD_K * n * sizeof *dg);
    }
    if (!ic || !dc || (b->cuda && (!ig || !dg))) {
        s = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                         "bench kdtree: out of memory for the results of %zu queries", n);
        goto _end;
    }
    if (b->cuda)
        GROVE_TRY_END(s, time_build(b->ctx, b->ctx, &pc, b->warmup, b->repeats, &ms_g, &tg));
    GROVE_TRY_END(s, time_build(b->cpu, b->ctx, &pc, b->cpu_warmup, b->cpu_repeats, &ms_c, &tc));
    valid = tree_valid(b->ctx, tc, xyz, n);
    if (b->cuda) {
        same = valid && trees_equal(tg, tc);
        if (valid && !same)
            grove__bench_note(b->ctx,
                              "bench kdtree: %s tree of %zu points differs "
                              "from the CPU backend's",
                              dname, n);
    }
    snprintf(op, sizeof op, "build_%s", dname);
    if (b->cuda)
        grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "gpu", n, ms_g, gpu_floor, same);
    grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "cpu", n, ms_c, cpu_floor_ms, valid);

    if (b->cuda)
        GROVE_TRY_END(s, time_knn(b->ctx, b->ctx, tg, &qc, b->warmup, b->repeats, ig, dg, &kms_g));
    GROVE_TRY_END(s,
                  time_knn(b->cpu, b->ctx, tc, &qc, b->cpu_warmup, b->cpu_repeats, ic, dc, &kms_c));
    kok = knn_sample_ok(b->ctx, xyz, n, qxyz, n, ic, dc);
    if (b->cuda) ksame = kok && results_equal(b->ctx, "knn gpu vs cpu", n, ig, dg, ic, dc);
    snprintf(op, sizeof op, "knn%d_%s", KD_K, dname);
    if (b->cuda)
        grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "gpu", n, kms_g, 0, ksame);
    grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "cpu", n, kms_c, 0, kok);
#ifdef GROVE_HAVE_CUDA
    if (b->cuda) {
        /* the device-resident calls: no host copies; the same checks against the CPU */
        grove_kdtree *td = NULL;
        s = grove__bench_kd_device_cuda(b->ctx, xyz, n, qxyz, n, b->warmup, b->repeats, &td, ig, dg,
                                        &ms_g, &kms_g);
        if (s == GROVE_OK) {
            same = valid && trees_equal(td, tc);
            if (valid && !same)
                grove__bench_note(b->ctx,
                                  "bench kdtree: %s device-built tree of %zu points differs "
                                  "from the CPU backend's",
                                  dname, n);
            ksame = kok && results_equal(b->ctx, "knn_device gpu vs cpu", n, ig, dg, ic, dc);
            snprintf(op, sizeof op, "build_dev_%s", dname);
            grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "gpu", n, ms_g, gpu_floor,
                                   same);
            snprintf(op, sizeof op, "knn%d_dev_%s", KD_K, dname);
            grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "gpu", n, kms_g, 0, ksame);
        }
        grove_kdtree_destroy(td);
    }
#endif
_end:
    grove_kdtree_destroy(tg);
    grove_kdtree_destroy(tc);
    free(ic);
    free(dc);
    free(ig);
    free(dg);
    return s;
}

#ifdef GROVE_HAVE_CUDA
/* The brute-force kernel over the first m points with the first m queries, beside the tree's
 * kNN on the same on both backends; every result equals the brute force's. */
static grove_status run_subset(kd_bench *b, const char *dname, const float *xyz, const float *qxyz,
                               size_t m)
{
    grove_coords pc = {xyz, m, 3, GROVE_COORD_F32}, qc = {qxyz, m, 3, GROVE_COORD_F32};
    grove_kdtree *tg = NULL, *tc = NULL;
    uint64_t *ib = (uint64_t *)malloc(3 * KD_K * m * sizeof *ib), *ig = ib + KD_K * m,
             *ic = ig + KD_K * m;
    double *db = (double *)malloc(3 * KD_K * m * sizeof *db), *dg = db + KD_K * m,
           *dc = dg + KD_K * m;
    double ms_b = 0, ms_g = 0, ms_c = 0;
    int cw = b->warmup < 1 ? b->warmup : 1, cr = b->repeats < 3 ? b->repeats : 3;
    grove_status s = GROVE_OK;
    char op[48];
    if (!ib || !db) {
        s = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY, "bench kdtree: out of memory");
        goto _end;
    }
    GROVE_TRY_END(s, grove__bench_kd_brute_cuda(b->ctx, xyz, m, qxyz, m, b->warmup, b->repeats, ib,
                                                db, &ms_b));
    GROVE_TRY_END(s, pass_error(b->ctx, b->ctx, grove_kdtree_build(b->ctx, &pc, NULL, &tg)));
    GROVE_TRY_END(s, pass_error(b->cpu, b->ctx, grove_kdtree_build(b->cpu, &pc, NULL, &tc)));
    GROVE_TRY_END(s, time_knn(b->ctx, b->ctx, tg, &qc, b->warmup, b->repeats, ig, dg, &ms_g));
    GROVE_TRY_END(s, time_knn(b->cpu, b->ctx, tc, &qc, cw, cr, ic, dc, &ms_c));
    snprintf(op, sizeof op, "brute_knn%d_%s_sub", KD_K, dname);
    grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "gpu", m, ms_b, ms_b,
                           knn_sample_ok(b->ctx, xyz, m, qxyz, m, ib, db));
    snprintf(op, sizeof op, "knn%d_%s_sub", KD_K, dname);
    grove__bench_floor_row(
        b->rows, b->max_rows, b->nrows, op, "gpu", m, ms_g, ms_b,
        results_equal(b->ctx, "subset knn gpu vs brute force", m, ig, dg, ib, db));
    grove__bench_floor_row(
        b->rows, b->max_rows, b->nrows, op, "cpu", m, ms_c, ms_b,
        results_equal(b->ctx, "subset knn cpu vs brute force", m, ic, dc, ib, db));
_end:
    grove_kdtree_destroy(tg);
    grove_kdtree_destroy(tc);
    free(ib);
    free(db);
    return s;
}
#endif

grove_status grove_bench_kdtree(grove_ctx *ctx, const grove_bench_opts *opts, grove_bench_row *rows,
                                int max_rows, int *nrows)
{
    static const size_t default_sizes[] = {1000000, 10000000};
    size_t sizes[2];
    int nsizes = 0;
    grove_status s = GROVE_OK;
    kd_bench b;

    *nrows = 0;
    memset(&b, 0, sizeof b);
    b.ctx = ctx;
    b.cuda = grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA;
    b.warmup = opts->warmup;
    b.repeats = opts->repeats;
    b.rows = rows;
    b.max_rows = max_rows;
    b.nrows = nrows;
    s = grove__bench_setup(ctx, "kdtree", opts, default_sizes, 2, sizes, &nsizes, &b.cpu);
    if (s != GROVE_OK) return s;

    for (int si = 0; si < nsizes && s == GROVE_OK; si++) {
        size_t n = sizes[si];
        int big = n >= 10000000;
        b.cpu_warmup = big ? 0 : b.warmup < 1 ? b.warmup : 1;
        b.cpu_repeats = big ? 1 : b.repeats < 3 ? b.repeats : 3;
        for (int dist = 0; dist < 2 && s == GROVE_OK; dist++) {
            const char *dname = dist ? "clustered" : "uniform";
            float *xyz = (float *)malloc((3 * n + 1) * sizeof *xyz);
            float *qxyz = (float *)malloc((3 * n + 1) * sizeof *qxyz);
            double gpu_floor = 0, cpu_floor_ms = 0;
            if (!xyz || !qxyz) {
                s = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                 "bench kdtree: out of memory for %zu points", n);
            } else {
                gen_points(xyz, n, dist, 100);
                gen_points(qxyz, n, dist, 200);
                s = run_floors(&b, dname, xyz, n, &gpu_floor, &cpu_floor_ms);
                if (s == GROVE_OK) s = run_trees(&b, dname, xyz, qxyz, n, gpu_floor, cpu_floor_ms);
#ifdef GROVE_HAVE_CUDA
                /* the first KD_SUBSET points are the same for every N: once per distribution */
                if (s == GROVE_OK && b.cuda && si == 0)
                    s = run_subset(&b, dname, xyz, qxyz, n < KD_SUBSET ? n : KD_SUBSET);
#endif
            }
            free(xyz);
            free(qxyz);
        }
    }
    grove_ctx_destroy(b.cpu);
    return s;
}
