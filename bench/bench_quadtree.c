/*
 * bench_quadtree.c - `grove bench quadtree`: quadtree build times beside the radix-sort floor.
 *
 * For each size (10^6, 10^7, 10^8, or --size) and distribution (uniform in a square; clustered:
 * 64 Gaussian clusters of very different spreads), on a CUDA context:
 *   gpu   the device-resident build (grove_quadtree_build_device: points already on the GPU, tree
 *         left there), for the morton and the recursive method;
 *   host  the same through grove_quadtree_build (copying the points up and the tree back);
 *   sort  the floor: one radix sort of n (32-bit key, 32-bit index) pairs on the device, the
 *         central step of the morton build, timed in the same run;
 *   cpu   the CPU backend's builds for n <= 10^7 (a context with the default thread count).
 * vs floor = sort time / build time. Every GPU tree is checked: morton == recursive byte for
 * byte, and == the CPU backend's tree where that is built.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "bench_cuda.h"
#include "core.h" /* grove__error: failures are reported like the library does */
#include "grove/prim.h"
#include "grove/quadtree.h"
#ifdef GROVE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* Point i of a distribution, a pure function of (i, kind) so any thread count gives the same. */
static void gen_points(float *xy, size_t n, int clustered)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        uint64_t h1 = grove__bench_hash(1, i), h2 = grove__bench_hash(2, i);
        double x, y;
        if (!clustered) {
            x = grove__bench_unit(h1) * 2000.0 - 1000.0;
            y = grove__bench_unit(h2) * 2000.0 - 1000.0;
        } else {
            uint64_t c = grove__bench_hash(3, i) % 64, h3 = grove__bench_hash(4, i),
                     h4 = grove__bench_hash(5, i);
            double cx = grove__bench_unit(grove__bench_hash(6, c)) * 2000.0 - 1000.0;
            double cy = grove__bench_unit(grove__bench_hash(7, c)) * 2000.0 - 1000.0;
            double sd = pow(
                10.0, -3.0 + 5.0 * grove__bench_unit(grove__bench_hash(8, c))); /* 1e-3 .. 1e2 */
            /* Box-Muller */
            double r = sqrt(-2.0 * log(grove__bench_unit(h3) + 1e-300)),
                   a = 6.283185307179586 * grove__bench_unit(h4);
            x = cx + sd * r * cos(a);
            y = cy + sd * r * sin(a);
        }
        xy[2 * i] = (float)x;
        xy[2 * i + 1] = (float)y;
    }
}

static int trees_equal(const grove_quadtree *a, const grove_quadtree *b)
{
    size_t n = grove_quadtree_num_points(a), m = grove_quadtree_num_nodes(a);
    return n == grove_quadtree_num_points(b) && m == grove_quadtree_num_nodes(b) &&
           !memcmp(grove_quadtree_nodes(a), grove_quadtree_nodes(b),
                   m * sizeof(grove_quadtree_node)) &&
           (n == 0 || (!memcmp(grove_quadtree_points(a), grove_quadtree_points(b), 8 * n) &&
                       !memcmp(grove_quadtree_index(a), grove_quadtree_index(b), 4 * n)));
}

static const char *method_name(int m)
{
    return m == GROVE_QUADTREE_MORTON ? "morton" : "recursive";
}

/* One build, synchronous: from host memory (d_xy NULL) or from device memory. */
static grove_status build_once(grove_ctx *ctx, const grove_points *p, const float *d_xy,
                               const grove_quadtree_opts *o, grove_quadtree **t)
{
#ifdef GROVE_HAVE_CUDA
    if (d_xy) return grove_quadtree_build_device(ctx, d_xy, p->n, 2, o, t);
#else
    (void)d_xy;
#endif
    return grove_quadtree_build(ctx, p, o, t);
}

/* Median wall time of `repeats` builds after `warmup`; *tree receives the last tree, with its
 * host arrays (downloaded after the timing for a device build). */
static grove_status time_build(grove_ctx *ctx, const grove_points *p, const float *d_xy,
                               const grove_quadtree_opts *o, int warmup, int repeats, double *ms,
                               grove_quadtree **tree)
{
    double *t = (double *)malloc((size_t)repeats * sizeof *t);
    grove_status s = GROVE_OK;
    if (!t) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "bench quadtree: out of memory");
    *tree = NULL;
    for (int r = -warmup; r < repeats && s == GROVE_OK; r++) {
        double t0;
        grove_quadtree_destroy(*tree);
        *tree = NULL;
        t0 = grove__bench_now_s();
        s = build_once(ctx, p, d_xy, o, tree);
        if (r >= 0) t[r] = (grove__bench_now_s() - t0) * 1e3;
    }
    if (s == GROVE_OK) s = grove_quadtree_download(ctx, *tree);
    if (s == GROVE_OK) *ms = grove__bench_median(t, repeats);
    free(t);
    return s;
}

#ifdef GROVE_HAVE_CUDA
/* The floor: a device radix sort of n (u32 key, u32 index) pairs over all 32 key bits. */
static grove_status time_sort_floor(grove_ctx *ctx, size_t n, int warmup, int repeats, double *ms)
{
    uint32_t *h = (uint32_t *)malloc(n * sizeof *h), *d = NULL;
    double *t = (double *)malloc((size_t)repeats * sizeof *t);
    void *temp = NULL;
    size_t bytes = 0;
    grove_status s = GROVE_OK;
    cudaStream_t st = (cudaStream_t)grove_ctx_stream(ctx);
    cudaEvent_t e0 = NULL, e1 = NULL;
    if (!h || !t) {
        free(h);
        free(t);
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "bench quadtree: out of memory");
    }
    for (size_t i = 0; i < n; i++) h[i] = (uint32_t)(grove__bench_hash(9, i) >> 32);
    if (cudaMalloc((void **)&d, 4 * n * sizeof *d) != cudaSuccess ||
        cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) {
        s = grove__error(ctx, GROVE_ERR_DEVICE_OUT_OF_MEMORY,
                         "bench quadtree: no device memory for sorting %zu pairs", n);
        goto end;
    }
    /* d: keys in, keys out, values in, values out */
    cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice);
    for (size_t i = 0; i < n; i++) h[i] = (uint32_t)i;
    cudaMemcpy(d + 2 * n, h, n * 4, cudaMemcpyHostToDevice);
    /* a pageable cudaMemcpy may return before its data lands; the context's stream does not
     * wait for the legacy stream */
    cudaDeviceSynchronize();
    s = grove_sort_pairs_device(ctx, NULL, &bytes, GROVE_U32, d, d + n, 4, d + 2 * n, d + 3 * n, n,
                                0, 32, st);
    if (s != GROVE_OK) goto end;
    if (cudaMalloc(&temp, bytes) != cudaSuccess) {
        s = grove__error(ctx, GROVE_ERR_DEVICE_OUT_OF_MEMORY,
                         "bench quadtree: no device memory for the sort's %zu bytes", bytes);
        goto end;
    }
    for (int r = -warmup; r < repeats && s == GROVE_OK; r++) {
        float f = 0;
        cudaEventRecord(e0, st);
        s = grove_sort_pairs_device(ctx, temp, &bytes, GROVE_U32, d, d + n, 4, d + 2 * n, d + 3 * n,
                                    n, 0, 32, st);
        cudaEventRecord(e1, st);
        if (cudaEventSynchronize(e1) != cudaSuccess)
            s = grove__error(ctx, GROVE_ERR_CUDA, "bench quadtree: the floor sort failed");
        cudaEventElapsedTime(&f, e0, e1);
        if (r >= 0) t[r] = f;
    }
    if (s == GROVE_OK) *ms = grove__bench_median(t, repeats);
end:
    cudaFree(temp);
    cudaFree(d);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    free(h);
    free(t);
    return s;
}
#endif

grove_status grove_bench_quadtree(grove_ctx *ctx, const grove_bench_opts *opts,
                                  grove_bench_row *rows, int max_rows, int *nrows)
{
    static const size_t default_sizes[] = {1000000, 10000000, 100000000};
    size_t sizes[3];
    int nsizes = 0, warmup = opts->warmup, repeats = opts->repeats;
    int cuda = grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA;
    grove_status s = GROVE_OK;
    grove_ctx *cpu = NULL;

    *nrows = 0;
    s = grove__bench_setup(ctx, "quadtree", opts, default_sizes, 3, sizes, &nsizes, &cpu);
    if (s != GROVE_OK) return s;

    for (int si = 0; si < nsizes && s == GROVE_OK; si++) {
        size_t n = sizes[si];
        double floor_ms = 0;
#ifdef GROVE_HAVE_CUDA
        if (cuda) {
            s = time_sort_floor(ctx, n, warmup, repeats, &floor_ms);
            if (s != GROVE_OK) break;
            grove__bench_floor_row(rows, max_rows, nrows, "sort_pairs_u32 (floor)", "gpu", n,
                                   floor_ms, floor_ms, 1);
        }
#endif
        for (int dist = 0; dist < 2 && s == GROVE_OK; dist++) {
            grove_points p;
            grove_quadtree *trees[2] = {NULL, NULL}, *ref = NULL;
            float *xy = (float *)malloc(2 * n * sizeof(float));
            const char *dname = dist ? "clustered" : "uniform";
            int cpu_ok = n <= 10000000;
            char op[48];
            if (!xy) {
                s = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                 "bench quadtree: out of memory for %zu points", n);
                break;
            }
            gen_points(xy, n, dist);
            p.xyz = xy;
            p.n = n;
            p.dims = 2;
            for (int m = 0; m < 2 && s == GROVE_OK; m++) {
                grove_quadtree_opts o;
                double ms = 0;
                grove_quadtree_default_opts(&o);
                o.method = (grove_quadtree_method)m;
                snprintf(op, sizeof op, "qt_%s_%s", method_name(m), dname);
#ifdef GROVE_HAVE_CUDA
                if (cuda) {
                    float *d = NULL;
                    grove_quadtree *th = NULL;
                    if (cudaMalloc((void **)&d, 2 * n * sizeof(float)) != cudaSuccess) {
                        s = grove__error(ctx, GROVE_ERR_DEVICE_OUT_OF_MEMORY,
                                         "bench quadtree: no device memory for %zu points", n);
                        break;
                    }
                    cudaMemcpy(d, xy, 2 * n * sizeof(float), cudaMemcpyHostToDevice);
                    cudaDeviceSynchronize(); /* as above: complete before the context's stream */
                    s = time_build(ctx, &p, d, &o, warmup, repeats, &ms, &trees[m]);
                    cudaFree(d);
                    if (s != GROVE_OK) break;
                    grove__bench_floor_row(rows, max_rows, nrows, op, "gpu", n, ms, floor_ms, 0);
                    /* end to end through host memory: fewer repeats, it is dominated by PCIe */
                    s = time_build(ctx, &p, NULL, &o, 1, repeats < 5 ? repeats : 5, &ms, &th);
                    if (s != GROVE_OK) break;
                    grove__bench_floor_row(rows, max_rows, nrows, op, "host", n, ms, floor_ms,
                                           trees_equal(th, trees[m]));
                    grove_quadtree_destroy(th);
                }
#endif
                if (cpu_ok) {
                    grove_quadtree *tc = NULL;
                    s = time_build(cpu, &p, NULL, &o, warmup < 1 ? warmup : 1,
                                   repeats < 5 ? repeats : 5, &ms, &tc);
                    if (s != GROVE_OK) break;
                    grove__bench_floor_row(rows, max_rows, nrows, op, "cpu", n, ms, floor_ms, 1);
                    if (!ref) {
                        ref = tc;
                    } else {
                        rows[*nrows - 1].checked = trees_equal(ref, tc);
                        grove_quadtree_destroy(tc);
                    }
                }
            }
            /* the GPU rows: morton == recursive, and == the CPU tree where there is one */
            if (s == GROVE_OK && cuda) {
                int same = trees[0] && trees[1] && trees_equal(trees[0], trees[1]) &&
                           (!ref || trees_equal(trees[0], ref));
                for (int i = 0; i < *nrows; i++)
                    if (!strcmp(rows[i].impl, "gpu") && rows[i].n == n && strstr(rows[i].op, dname))
                        rows[i].checked = same;
            }
            grove_quadtree_destroy(trees[0]);
            grove_quadtree_destroy(trees[1]);
            grove_quadtree_destroy(ref);
            free(xy);
        }
    }
    grove_ctx_destroy(cpu);
    return s;
}
