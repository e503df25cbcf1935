/*
 * test_qt_recursive_cuda.cu - the CUDA recursive quadtree build (quadtree_cdp.cu and
 * quadtree_recursive_cuda.cu) against the CPU recursive build, byte for byte.
 *
 *   test_qt_recursive_cuda [--small | --tiny] [--large N] [--bench] [--seed S]
 *
 * Every data set is built on a CPU context and on a CUDA context (grove_quadtree_build, and the
 * device-resident internal entry point for some), and nodes, points and index must be identical.
 * The suite runs under several granularity settings of the CUDA build (through the internal
 * hook grove__qt_recursive_tune) so that each path runs: big nodes split by tile grids, the
 * shared-memory subtrees, blocks that finish their children themselves at the nesting cap, and
 * the retries after a full node array or a refused launch. --small runs a reduced suite (for
 * compute-sanitizer), --tiny less of it (for racecheck and synccheck); --large N only uniform
 * and clustered data of N points; --bench times the
 * device-resident build at 10^6, 10^7, 10^8 points (median of 10 after 2 warm-ups). Exit 77 when
 * no GPU is present.
 */
#include <cuda_runtime.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grove/quadtree.h"
#include "quadtree_cuda.h"
#include "quadtree_internal.h"
#include "testutil.h"
#include "qt_testdata.h"

extern "C" void grove__qt_recursive_tune(int which, unsigned long long value);
extern "C" void grove__qt_recursive_stats(unsigned long long out[16]);

static grove_ctx *g_gpu, *g_cpu;


/* ---- data ---- */

/* ---- comparison ---- */


static void root_box(const grove_points *p, float root[4])
{
    float lx = INFINITY, ly = INFINITY, hx = -INFINITY, hy = -INFINITY;
    for (size_t i = 0; i < p->n; i++) {
        float x = p->xyz[i * (size_t)p->dims], y = p->xyz[i * (size_t)p->dims + 1];
        lx = x < lx ? x : lx;
        ly = y < ly ? y : ly;
        hx = x > hx ? x : hx;
        hy = y > hy ? y : hy;
    }
    if (p->n == 0) lx = ly = hx = hy = 0.0f;
    root[0] = lx + 0.0f;
    root[1] = ly + 0.0f;
    root[2] = hx + 0.0f;
    root[3] = hy + 0.0f;
}

/* The internal device-resident entry point (what grove_quadtree_build_device calls after its
 * checks), downloaded. */
static grove_quadtree *build_device_internal(const grove_points *p, const grove_quadtree_opts *o,
                                             const char *what)
{
    grove_quadtree *t = (grove_quadtree *)calloc(1, sizeof *t);
    size_t bytes = p->n * (size_t)p->dims * sizeof(float);
    float *d = NULL, root[4];
    grove_status s;
    if (o->use_bbox)
        memcpy(root, o->bbox, sizeof root);
    else
        root_box(p, root);
    t->opts = *o;
    t->opts.method = GROVE_QUADTREE_RECURSIVE;
    t->opts.use_bbox = 1;
    memcpy(t->opts.bbox, root, sizeof root);
    t->n = p->n;
    if (cudaMalloc((void **)&d, bytes ? bytes : 4) != cudaSuccess ||
        cudaMemcpy(d, p->xyz, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
        FAIL("%s: cudaMalloc/cudaMemcpy failed", what);
        cudaFree(d);
        free(t);
        return NULL;
    }
    s = grove__qt_build_recursive_cuda(g_gpu, d, p->dims, root, t);
    if (s != GROVE_OK) {
        FAIL("%s: internal device build: %s: %s", what, grove_status_string(s),
             grove_ctx_last_error(g_gpu));
        free(t);
        cudaFree(d);
        return NULL;
    }
    CHECK(t->dev_ctx == g_gpu && t->d_nodes && t->num_nodes >= 1 &&
          t->d_nodes_bytes >= t->num_nodes * sizeof(grove_quadtree_node) &&
          (p->n == 0 || (t->d_pts && t->d_index)));
    s = grove_quadtree_download(g_gpu, t);
    if (s != GROVE_OK) FAIL("%s: download: %s", what, grove_ctx_last_error(g_gpu));
    cudaFree(d);
    return t;
}

static int g_checked;

/* CPU recursive vs CUDA recursive (host API; and the device-resident path when `dev`). */
static void compare(const grove_points *p, const grove_quadtree_opts *opts, const char *what,
                    int dev)
{
    grove_quadtree_opts o;
    grove_quadtree *tc = NULL, *tg = NULL;
    grove_status s;
    if (opts)
        o = *opts;
    else
        grove_quadtree_default_opts(&o);
    o.method = GROVE_QUADTREE_RECURSIVE;
    s = grove_quadtree_build(g_cpu, p, &o, &tc);
    if (s != GROVE_OK) {
        FAIL("%s: CPU build: %s", what, grove_ctx_last_error(g_cpu));
        return;
    }
    s = grove_quadtree_build(g_gpu, p, &o, &tg);
    if (s != GROVE_OK)
        FAIL("%s: CUDA build: %s: %s", what, grove_status_string(s), grove_ctx_last_error(g_gpu));
    else
        qt_trees_equal(tc, tg, what);
    grove_quadtree_destroy(tg);
    if (dev) {
        tg = build_device_internal(p, &o, what);
        if (tg) qt_trees_equal(tc, tg, what);
        grove_quadtree_destroy(tg);
    }
    grove_quadtree_destroy(tc);
    g_checked++;
}

static void free_pts(grove_points *p)
{
    free(p->xyz);
    p->xyz = NULL;
}

static void run_data(grove_points p, const grove_quadtree_opts *o, const char *what, int dev)
{
    compare(&p, o, what, dev);
    free_pts(&p);
}

/* The suite; `small` keeps every size <= 20000. */
static void suite(tu_rng *r, int small, const char *tag)
{
    static const size_t sizes[] = {0,   1,    2,    17,   31,   32,    33,    255,    256,
                                   257, 1000, 4095, 4096, 4097, 12293, 20000, 100000, 250000};
    grove_quadtree_opts o;
    char what[160];
    size_t big = small ? 20000 : 200000;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        if (sizes[k] > big && small) continue;
        snprintf(what, sizeof what, "[%s] uniform n=%zu", tag, sizes[k]);
        run_data(gen_uniform(r, sizes[k], 2, -1.0f, 1.0f), NULL, what, k % 4 == 0);
    }
    snprintf(what, sizeof what, "[%s] uniform dims 3", tag);
    run_data(gen_uniform(r, 5000, 3, 0.0f, 10.0f), NULL, what, 1);
    snprintf(what, sizeof what, "[%s] clusters", tag);
    run_data(gen_clusters(r, big), NULL, what, 0);
    snprintf(what, sizeof what, "[%s] duplicates", tag);
    run_data(gen_dups(r, big / 2, 3), NULL, what, 0);
    snprintf(what, sizeof what, "[%s] all equal", tag);
    run_data(gen_equal(big / 4, 1.5f, -2.5f), NULL, what, 1);
    snprintf(what, sizeof what, "[%s] line x=const", tag);
    run_data(gen_line(r, big / 4, 0), NULL, what, 0);
    snprintf(what, sizeof what, "[%s] line y=x", tag);
    run_data(gen_line(r, big / 4, 1), NULL, what, 0);
    snprintf(what, sizeof what, "[%s] lattice", tag);
    run_data(gen_lattice(r, big / 4), NULL, what, 0);
    snprintf(what, sizeof what, "[%s] extreme", tag);
    run_data(gen_extreme(r, big / 8), NULL, what, 0);

    grove_quadtree_default_opts(&o);
    o.max_depth = 30;
    snprintf(what, sizeof what, "[%s] all equal, max_depth 30", tag);
    run_data(gen_equal(big / 2, -7.0f, 3.0f), &o, what, 1);
    o.min_points = 1;
    snprintf(what, sizeof what, "[%s] clusters, max_depth 30, min_points 1", tag);
    run_data(gen_clusters(r, big / 4), &o, what, 0);
    snprintf(what, sizeof what, "[%s] extreme, max_depth 30, min_points 1", tag);
    run_data(gen_extreme(r, big / 8), &o, what, 0);
    o.min_points = 0;
    snprintf(what, sizeof what, "[%s] uniform, max_depth 30, min_points 0", tag);
    run_data(gen_uniform(r, 3000, 2, 0.0f, 1.0f), &o, what, 1);
    snprintf(what, sizeof what, "[%s] n=1, max_depth 30, min_points 0", tag);
    run_data(gen_uniform(r, 1, 2, 0.0f, 1.0f), &o, what, 1);
    snprintf(what, sizeof what, "[%s] all equal, max_depth 30, min_points 0", tag);
    run_data(gen_equal(100, 0.0f, 0.0f), &o, what, 0);

    grove_quadtree_default_opts(&o);
    o.max_depth = 0;
    snprintf(what, sizeof what, "[%s] max_depth 0", tag);
    run_data(gen_uniform(r, 1000, 2, 0.0f, 1.0f), &o, what, 1);
    o.max_depth = 1;
    snprintf(what, sizeof what, "[%s] max_depth 1", tag);
    run_data(gen_uniform(r, big, 2, 0.0f, 1.0f), &o, what, 0);
    o.max_depth = 3;
    o.min_points = 0;
    snprintf(what, sizeof what, "[%s] max_depth 3 min_points 0 (big leaves)", tag);
    run_data(gen_uniform(r, big, 2, 0.0f, 1.0f), &o, what, 0);
    grove_quadtree_default_opts(&o);
    o.min_points = 1000000;
    snprintf(what, sizeof what, "[%s] min_points 1e6", tag);
    run_data(gen_uniform(r, big / 2, 2, 0.0f, 1.0f), &o, what, 0);
    o.min_points = 3000;
    snprintf(what, sizeof what, "[%s] min_points 3000", tag);
    run_data(gen_uniform(r, big, 2, 0.0f, 1.0f), &o, what, 0);
    grove_quadtree_default_opts(&o);
    o.use_bbox = 1;
    o.bbox[0] = -3.0f;
    o.bbox[1] = -1.0f;
    o.bbox[2] = 5.0f;
    o.bbox[3] = 1.0f;
    snprintf(what, sizeof what, "[%s] given bbox", tag);
    run_data(gen_uniform(r, big / 4, 2, -1.0f, 1.0f), &o, what, 1);
}

/* A few cases for compute-sanitizer, which is slow. */
static void mini_suite(tu_rng *r, const char *tag)
{
    static const size_t sizes[] = {0, 1, 33, 1000, 4097, 20000};
    grove_quadtree_opts o;
    char what[160];
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        snprintf(what, sizeof what, "[%s] uniform n=%zu", tag, sizes[k]);
        run_data(gen_uniform(r, sizes[k], 2, -1.0f, 1.0f), NULL, what, k == 3);
    }
    snprintf(what, sizeof what, "[%s] clusters", tag);
    run_data(gen_clusters(r, 20000), NULL, what, 0);
    snprintf(what, sizeof what, "[%s] extreme", tag);
    run_data(gen_extreme(r, 2500), NULL, what, 0);
    grove_quadtree_default_opts(&o);
    o.max_depth = 30;
    snprintf(what, sizeof what, "[%s] all equal, max_depth 30", tag);
    run_data(gen_equal(5000, -7.0f, 3.0f), &o, what, 0);
    o.min_points = 0;
    snprintf(what, sizeof what, "[%s] uniform, max_depth 30, min_points 0", tag);
    run_data(gen_uniform(r, 300, 2, 0.0f, 1.0f), &o, what, 0);
    grove_quadtree_default_opts(&o);
    o.max_depth = 3;
    o.min_points = 0;
    snprintf(what, sizeof what, "[%s] max_depth 3 min_points 0", tag);
    run_data(gen_uniform(r, 20000, 2, 0.0f, 1.0f), &o, what, 0);
}

static void tune_reset(void) { grove__qt_recursive_tune(-1, 0); }

static void print_stats(const char *what)
{
    unsigned long long s[16];
    grove__qt_recursive_stats(s);
    printf("  %s: attempts %llu, device launches %llu, deepest nesting %llu, nodes %llu, "
           "pending-launch limit %llu, node capacity %llu\n",
           what, s[0], s[1], s[2], s[3], s[4], s[5]);
}

/* One build with phase timing (synchronizing between phases). */
static void print_profile(const char *what)
{
    unsigned long long s[16];
    grove__qt_recursive_stats(s);
    printf("  %s profile (us): set limit %llu, device build %llu, sort %llu, remap %llu, restore "
           "limit %llu\n",
           what, s[7], s[8], s[9], s[10], s[11]);
}

/* The retry paths: a node array of 5 and a pending-launch limit of 8 must still give the tree. */
static void retries(tu_rng *r)
{
    unsigned long long s[16];
    grove_points p = gen_uniform(r, 300000, 2, 0.0f, 1.0f);
    tune_reset();
    grove__qt_recursive_tune(4, 5);
    compare(&p, NULL, "retry: node array of 5", 0);
    grove__qt_recursive_stats(s);
    print_stats("node array of 5");
    CHECK(s[0] > 1);
    tune_reset();
    grove__qt_recursive_tune(0, 256);
    grove__qt_recursive_tune(1, 3000);
    grove__qt_recursive_tune(3, 0);
    grove__qt_recursive_tune(5, 8);
    compare(&p, NULL, "retry: pending-launch limit 8", 0);
    grove__qt_recursive_stats(s);
    print_stats("pending-launch limit 8");
    CHECK(s[0] > 1);
    tune_reset();
    free_pts(&p);
}

/* Granularity settings; each runs the suite. */
struct Variant {
    const char *name;
    /* small_max, big_min, nest_cap, inline_small, node_cap0, pending0, level_mode; -1 keep */
    long long v[7];
};
static const Variant kVariants[] = {
    {"defaults", {-1, -1, -1, -1, -1, -1, -1}},
    {"big grids from 3000 points", {-1, 3000, -1, -1, -1, -1, -1}},
    {"no shared-memory subtrees", {0, 3000, -1, -1, -1, -1, -1}},
    {"small 512, children launched", {512, 20000, -1, 0, -1, -1, -1}},
    {"nesting cap 2", {-1, 3000, 2, -1, -1, -1, -1}},
    {"nesting cap 0 (one block)", {-1, 3000, 0, -1, -1, -1, -1}},
    {"depth-first subtrees", {-1, 20000, -1, -1, -1, -1, 0}},
    {"small 8192 (mixed subtree modes)", {8192, -1, -1, -1, -1, -1, -1}},
};

static void set_variant(const Variant &v)
{
    tune_reset();
    for (int k = 0; k < 7; k++)
        if (v.v[k] >= 0) grove__qt_recursive_tune(k, (unsigned long long)v.v[k]);
}

/* ---- timing ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median seconds of `reps` device-resident builds (after 2 warm-ups) of d (n points). */
static double time_builds(const float *d, size_t n, const float root[4], int reps, int pub)
{
    double t[32];
    for (int k = -2; k < reps; k++) {
        grove_quadtree_opts o;
        grove_quadtree *tr = NULL;
        grove_status s;
        double t0;
        grove_quadtree_default_opts(&o);
        o.method = GROVE_QUADTREE_RECURSIVE;
        cudaDeviceSynchronize();
        t0 = now_s();
        if (pub) {
            s = grove_quadtree_build_device(g_gpu, d, n, 2, &o, &tr);
        } else {
            tr = (grove_quadtree *)calloc(1, sizeof *tr);
            tr->opts = o;
            tr->opts.use_bbox = 1;
            memcpy(tr->opts.bbox, root, 4 * sizeof(float));
            tr->n = n;
            s = grove__qt_build_recursive_cuda(g_gpu, d, 2, root, tr);
        }
        if (k >= 0) t[k] = now_s() - t0;
        if (s != GROVE_OK) {
            if (!pub || s != GROVE_ERR_UNSUPPORTED)
                FAIL("bench build n=%zu: %s", n, grove_ctx_last_error(g_gpu));
            if (!pub) free(tr);
            return -1.0;
        }
        grove_quadtree_destroy(tr);
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_d);
    return t[reps / 2];
}

static void bench_one(const grove_points *p, const char *name)
{
    size_t bytes = p->n * 2 * sizeof(float);
    float *d = NULL, root[4];
    double med, pub;
    root_box(p, root);
    if (cudaMalloc((void **)&d, bytes) != cudaSuccess ||
        cudaMemcpy(d, p->xyz, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
        FAIL("bench: cudaMalloc of %zu bytes failed", bytes);
        cudaFree(d);
        return;
    }
    med = time_builds(d, p->n, root, 10, 0);
    print_stats(name);
    grove__qt_recursive_tune(7, 1);
    time_builds(d, p->n, root, 1, 0);
    print_profile(name);
    grove__qt_recursive_tune(7, 0);
    pub = time_builds(d, p->n, root, 10, 1);
    printf("BENCH %-10s n=%-10zu recursive build %9.3f ms  %7.3f G points/s", name, p->n, med * 1e3,
           (double)p->n / med * 1e-9);
    if (pub > 0) printf("   (grove_quadtree_build_device incl. checks %9.3f ms)", pub * 1e3);
    printf("\n");
    if (p->n >= 100000000) {
        static const struct {
            const char *name;
            long long v[7];
        } sweep[] = {
            {"small 1024", {1024, -1, -1, -1, -1, -1, -1}},
            {"small 4096", {4096, -1, -1, -1, -1, -1, -1}},
            {"inline off", {-1, -1, -1, 0, -1, -1, -1}},
            {"big 16384", {-1, 16384, -1, -1, -1, -1, -1}},
            {"big 262144", {-1, 262144, -1, -1, -1, -1, -1}},
        };
        for (size_t k = 0; k < sizeof sweep / sizeof sweep[0]; k++) {
            tune_reset();
            for (int j = 0; j < 7; j++)
                if (sweep[k].v[j] >= 0)
                    grove__qt_recursive_tune(j, (unsigned long long)sweep[k].v[j]);
            med = time_builds(d, p->n, root, 5, 0);
            printf("  sweep %-12s %-12s %9.3f ms  %7.3f G points/s\n", name, sweep[k].name,
                   med * 1e3, (double)p->n / med * 1e-9);
            print_stats(sweep[k].name);
        }
        tune_reset();
    }
    cudaFree(d);
}

static void bench(tu_rng *r)
{
    static const size_t ns[] = {1000000, 10000000, 100000000};
    for (size_t k = 0; k < 3; k++) {
        grove_points p = gen_uniform(r, ns[k], 2, 0.0f, 1.0f);
        bench_one(&p, "uniform");
        if (ns[k] == 100000000) {
            compare(&p, NULL, "bench uniform 1e8 vs CPU", 0);
        }
        free_pts(&p);
        p = gen_clusters(r, ns[k]);
        bench_one(&p, "clustered");
        if (ns[k] == 100000000) compare(&p, NULL, "bench clustered 1e8 vs CPU", 0);
        free_pts(&p);
    }
}

int main(int argc, char **argv)
{
    int small = 0, tiny = 0, do_bench = 0;
    size_t large = 0;
    uint64_t seed = 1234;
    grove_ctx_opts co;
    tu_rng r;
    int dev = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--small"))
            small = 1;
        else if (!strcmp(argv[i], "--tiny"))
            small = tiny = 1;
        else if (!strcmp(argv[i], "--bench"))
            do_bench = 1;
        else if (!strcmp(argv[i], "--large") && i + 1 < argc)
            large = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: %s [--small | --tiny] [--large N] [--bench] [--seed S]\n",
                    argv[0]);
            return 1;
        }
    }
    if (cudaGetDeviceCount(&dev) != cudaSuccess || dev == 0) {
        printf("SKIP: no GPU\n");
        return TEST_SKIP;
    }
    memset(&co, 0, sizeof co);
    co.backend = GROVE_BACKEND_CUDA;
    if (grove_ctx_create(&co, &g_gpu) != GROVE_OK) {
        printf("SKIP: no CUDA context\n");
        return TEST_SKIP;
    }
    co.backend = GROVE_BACKEND_CPU;
    CHECK_OK(NULL, grove_ctx_create(&co, &g_cpu));
    r.s = seed;
    if (do_bench) {
        bench(&r);
    } else if (large) {
        grove_points p = gen_uniform(&r, large, 2, 0.0f, 1.0f);
        compare(&p, NULL, "large uniform", 0);
        print_stats("large uniform");
        free_pts(&p);
        p = gen_clusters(&r, large);
        compare(&p, NULL, "large clusters", 0);
        print_stats("large clusters");
        free_pts(&p);
    } else {
        size_t nv = sizeof kVariants / sizeof kVariants[0];
        for (size_t v = 0; v < nv; v++) {
            if (small && v != 0 && v != 1 && v != 4 && v != 6) continue;
            if (tiny && v != 1 && v != 6) continue;
            set_variant(kVariants[v]);
            if (small)
                mini_suite(&r, kVariants[v].name);
            else
                suite(&r, small, kVariants[v].name);
            printf("variant '%s': %d comparisons so far, %d failures\n", kVariants[v].name,
                   g_checked, tu_failures);
        }
        tune_reset();
        if (!small) {
            retries(&r);
            grove_points p = gen_uniform(&r, 10000000, 2, 0.0f, 1.0f);
            compare(&p, NULL, "uniform 1e7", 1);
            print_stats("uniform 1e7");
            free_pts(&p);
            p = gen_clusters(&r, 10000000);
            compare(&p, NULL, "clusters 1e7", 0);
            print_stats("clusters 1e7");
            free_pts(&p);
        }
    }
    grove_ctx_destroy(g_gpu);
    grove_ctx_destroy(g_cpu);
    return tu_finish("test_qt_recursive_cuda");
}
