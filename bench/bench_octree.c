/*
 * bench_octree.c - `grove bench octree`: octree build rates beside the Morton-sort floor.
 *
 * For each size N (10^7 and 10^8, or --size) and distribution (uniform in the unit cube;
 * clustered: half the points uniform, half in one very dense spot about 1e-4 wide, so the tree
 * is deep there), double coordinates, default options (max_points 50,000, lod_grid 128):
 *   build_<d>          grove_octree_build_device on the points already in device memory (the
 *                      in-memory build), CUDA events around the call; items/s = points/s;
 *   phase_*_<d>        the phase times of one more such build (after a warm-up, run before the
 *                      timed ones) from grove_octree_stats (count:
 *                      box, quantization, counting and spilling; place: layout, placement;
 *                      lod: the samples), one build, not a median;
 *   build_nolod_<d>    the same with lod_grid 0 (no level-of-detail samples);
 *   build_host_<d>     grove_octree_build through host memory (batches of 8 Mi points through
 *                      pinned staging; the tree comes back to the host), wall time;
 *   count_agg_<d>_L<l> / count_plain_<d>_L<l>  the counting pass alone over the same grid
 *                      coordinates into the 8^l cells of level l (1: a warp's lanes share few
 *                      cells; 7: 2 M cells, lanes rarely share one), warp-aggregated
 *                      (coalesced_threads + labeled_partition) vs one atomicAdd per point;
 *                      the _morton rows read the same points in Morton order, the order in
 *                      which the device-resident build counts them;
 *   morton_sort_<d>    CUB radix sort of the (63-bit Morton key, 32-bit index) pairs of the same
 *                      points: the floor reference; vs_floor = its time / the row's time;
 *   build_<d> cpu      the CPU backend at 10^7 only, when a 10^6 build says it takes < ~10 s.
 * Checks: the device tree is downloaded and passes a structural validator (every input
 * position in exactly one leaf, leaves within the cap or at max_depth, inner nodes over it,
 * every node's entries in Morton order (octree.h) and inside its cell); the lod_grid 0 tree
 * passes the validator too (above 2 x 10^7 points: it has the validated tree's nodes and leaf
 * entries); the build through host memory equals the device-resident build byte for byte, and
 * a build of the first 10^6 points on the CUDA context equals the CPU backend's byte for byte;
 * the counts equal a host count; the sort is ascending and a permutation (index sum, key xor).
 * A failed check leaves the row unchecked with a note in the context's message. GPU rows:
 * median of --repeats after --warmup (build rows above 2 x 10^7 points: at most 5 repeats;
 * build_host there: one run, no warm-up).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_cuda.h"
#include "bench_octree.h"
#include "core.h"
#include "../src/octree/octree_internal.h"

#ifdef GROVE_HAVE_CUDA
/* bench_octree_cuda.cu */
grove_status grove__bench_ot_upload(grove_ctx *ctx, const double *xyz, size_t n, double **d_xyz);
void grove__bench_ot_free(void *d);
grove_status grove__bench_ot_build_device(grove_ctx *ctx, const double *d_xyz, size_t n,
                                          const grove_octree_opts *o, int warmup, int repeats,
                                          double *ms, grove_octree **last);
grove_status grove__bench_ot_passes(grove_ctx *ctx, const double *d_xyz, size_t n,
                                    const double lo[3], double side, int depth, int morton,
                                    int warmup, int repeats, double *ms_agg, double *ms_plain,
                                    uint32_t *h_agg, uint32_t *h_plain, double *ms_sort,
                                    int *sort_ok);
#endif

#define OT_CHECK_N 1000000 /* points of the CPU == GPU comparison */

/* Point i, a pure function of (seed, i, clustered). */
static void gen_points(double *xyz, size_t n, int clustered, uint64_t seed)
{
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (size_t i = 0; i < n; i++) {
        uint64_t h = grove__bench_hash(seed, i);
        if (clustered && (h & 1)) {
            static const double c[3] = {0.3172, 0.6518, 0.4233};
            for (int a = 0; a < 3; a++) {
                double u = grove__bench_unit(grove__bench_hash(seed + 1 + (uint64_t)a, i)) +
                           grove__bench_unit(grove__bench_hash(seed + 7 + (uint64_t)a, i)) +
                           grove__bench_unit(grove__bench_hash(seed + 13 + (uint64_t)a, i));
                xyz[3 * i + a] = c[a] + 1e-4 * (u - 1.5);
            }
        } else {
            for (int a = 0; a < 3; a++)
                xyz[3 * i + a] = grove__bench_unit(grove__bench_hash(seed + 20 + (uint64_t)a, i));
        }
    }
}

/* ---- checks ---- */

/* The structural validator of the file's header comment. */
static int tree_valid(grove_ctx *ctx, const grove_octree *t, const double *xyz, size_t n)
{
    const grove_octree_node *nd = grove_octree_nodes(t);
    const uint32_t *idx = grove_octree_entry_index(t);
    const double *exyz = grove_octree_entry_xyz(t);
    const size_t nn = grove_octree_num_nodes(t);
    grove_octree_opts o;
    uint8_t *seen = (uint8_t *)calloc(n + 1, 1);
    int ok = 1;
    double lo[3], side, to_grid;
    grove_octree_get_opts(t, &o);
    grove_octree_cube(t, lo, &side);
    to_grid = (double)(1u << GROVE_OCTREE_BITS) / side;
    if (!seen) return grove__bench_note(ctx, "bench octree: out of memory for the validator");
    if (!nd || !idx || !exyz || grove_octree_num_points(t) != n || nd[0].total != n) {
        free(seen);
        return grove__bench_note(ctx,
                                 "bench octree: tree has no host arrays or a wrong point count");
    }
    for (size_t k = 0; k < nn && ok; k++) {
        const grove_octree_node *a = &nd[k];
        const int leaf = a->first_child == UINT32_MAX;
        const int sh = GROVE_OCTREE_BITS - a->depth;
        if (leaf && a->total > o.max_points && a->depth < o.max_depth)
            ok = grove__bench_note(ctx, "bench octree: leaf %zu over the cap", k);
        if (!leaf && a->total <= o.max_points)
            ok = grove__bench_note(ctx, "bench octree: inner node %zu within the cap", k);
        if (leaf && a->end - a->begin != a->total)
            ok = grove__bench_note(ctx, "bench octree: leaf %zu holds %llu entries for %llu points",
                                   k, (unsigned long long)(a->end - a->begin),
                                   (unsigned long long)a->total);
        uint64_t hp = 0; /* the previous entry's Morton code */
        uint32_t lp = 0;
        for (uint64_t e = a->begin; e < a->end && ok; e++) {
            uint32_t q[3];
            const uint32_t p = idx[e];
            if (p >= n || memcmp(&exyz[3 * e], &xyz[3 * (size_t)p], 3 * sizeof(double)) != 0) {
                ok = grove__bench_note(ctx, "bench octree: entry %llu of node %zu is wrong",
                                       (unsigned long long)e, k);
                break;
            }
            for (int c = 0; c < 3; c++)
                q[c] = grove__ot_quantize(xyz[3 * (size_t)p + c], lo[c], to_grid);
            for (int c = 0; c < 3; c++)
                if ((q[c] >> sh) != a->cell[c])
                    ok = grove__bench_note(ctx, "bench octree: point %u outside node %zu", p, k);
            {
                /* octree.h: entries in Morton order, equal grid points by input position */
                const uint64_t h = grove__ot_morton_hi(q);
                const uint32_t l = grove__ot_morton_lo(q);
                if (e > a->begin &&
                    (hp > h || (hp == h && (lp > l || (lp == l && idx[e - 1] >= p)))))
                    ok = grove__bench_note(ctx, "bench octree: node %zu not in Morton order", k);
                hp = h;
                lp = l;
            }
            if (leaf) {
                if (seen[p]) ok = grove__bench_note(ctx, "bench octree: point %u in two leaves", p);
                seen[p] = 1;
            }
        }
    }
    for (size_t i = 0; i < n && ok; i++)
        if (!seen[i]) ok = grove__bench_note(ctx, "bench octree: point %zu in no leaf", i);
    free(seen);
    return ok;
}

#ifdef GROVE_HAVE_CUDA
static int trees_equal(const grove_octree *a, const grove_octree *b)
{
    const size_t nn = grove_octree_num_nodes(a), ne = grove_octree_num_entries(a);
    return nn == grove_octree_num_nodes(b) && ne == grove_octree_num_entries(b) &&
           memcmp(grove_octree_nodes(a), grove_octree_nodes(b), nn * sizeof(grove_octree_node)) ==
               0 &&
           memcmp(grove_octree_entry_index(a), grove_octree_entry_index(b), ne * 4) == 0 &&
           memcmp(grove_octree_entry_xyz(a), grove_octree_entry_xyz(b), ne * 24) == 0;
}
#endif

#ifdef GROVE_HAVE_CUDA
/* A tree without samples (lod_grid 0) has the nodes of the validated tree with samples: same
 * count, cells, totals, children and leaf entries. */
static int same_shape(grove_ctx *ctx, const grove_octree *a, const grove_octree *ref)
{
    const grove_octree_node *x = grove_octree_nodes(a), *y = grove_octree_nodes(ref);
    const size_t nn = grove_octree_num_nodes(a);
    if (!x || !y || nn != grove_octree_num_nodes(ref))
        return grove__bench_note(ctx, "bench octree: lod_grid 0 tree has other nodes");
    for (size_t k = 0; k < nn; k++) {
        const int leaf = x[k].first_child == UINT32_MAX;
        if (x[k].total != y[k].total || x[k].first_child != y[k].first_child ||
            x[k].child_mask != y[k].child_mask || memcmp(x[k].cell, y[k].cell, 12) != 0 ||
            x[k].end - x[k].begin != (leaf ? x[k].total : 0) ||
            (leaf &&
             memcmp(grove_octree_entry_index(a) + x[k].begin,
                    grove_octree_entry_index(ref) + y[k].begin, (size_t)x[k].total * 4) != 0))
            return grove__bench_note(ctx, "bench octree: lod_grid 0 tree differs at node %zu", k);
    }
    return 1;
}
#endif

static grove_status pass_error(grove_ctx *on, grove_ctx *ctx, grove_status s)
{
    if (s != GROVE_OK && on != ctx) grove__error(ctx, s, "%s", grove_ctx_last_error(on));
    return s;
}

/* Median wall time of host-memory builds; *tree: the last one. A CUDA build that fell back to
 * the host (too little device memory) is an error, not a GPU figure. */
static grove_status time_build(grove_ctx *on, grove_ctx *ctx, const double *xyz, size_t n,
                               int warmup, int repeats, double *ms, grove_octree **tree)
{
    double t[64];
    grove_status s = GROVE_OK;
    if (repeats > 64) repeats = 64;
    if (repeats < 1) repeats = 1;
    *tree = NULL;
    for (int r = -warmup; r < repeats && s == GROVE_OK; r++) {
        double t0;
        grove_octree_stats st;
        grove_octree_destroy(*tree);
        *tree = NULL;
        t0 = grove__bench_now_s();
        s = grove_octree_build(on, xyz, n, NULL, tree, &st);
        if (r >= 0) t[r] = (grove__bench_now_s() - t0) * 1e3;
        if (s == GROVE_OK && st.host_fallback != 0)
            s = grove__error(on, GROVE_ERR_DEVICE_OUT_OF_MEMORY,
                             "bench octree: the build of %zu points ran on the host "
                             "(host_fallback %u): not enough device memory for a GPU figure",
                             n, st.host_fallback);
    }
    if (s == GROVE_OK) *ms = grove__bench_median(t, repeats);
    return pass_error(on, ctx, s);
}

typedef struct ot_bench {
    grove_ctx *ctx, *cpu;
    int cuda, warmup, repeats;
    grove_bench_row *rows;
    int max_rows, *nrows;
} ot_bench;

#ifdef GROVE_HAVE_CUDA
/* The CPU backend's build of the first min(n, OT_CHECK_N) points equals the context's. */
static grove_status cpu_equal(ot_bench *b, const double *xyz, size_t n, int *ok)
{
    grove_octree *tc = NULL, *tg = NULL;
    grove_status s;
    double ms;
    const size_t m = n < OT_CHECK_N ? n : OT_CHECK_N;
    *ok = 0;
    s = time_build(b->cpu, b->ctx, xyz, m, 0, 1, &ms, &tc);
    if (s == GROVE_OK) s = time_build(b->ctx, b->ctx, xyz, m, 0, 1, &ms, &tg);
    if (s == GROVE_OK) {
        *ok = trees_equal(tc, tg);
        if (!*ok)
            grove__bench_note(
                b->ctx, "bench octree: the CUDA tree of %zu points differs from the CPU's", m);
    }
    grove_octree_destroy(tc);
    grove_octree_destroy(tg);
    return s;
}
#endif

#ifdef GROVE_HAVE_CUDA
static int counts_ok(grove_ctx *ctx, const double *xyz, size_t n, const double lo[3], double side,
                     int depth, const uint32_t *c1, const uint32_t *c2)
{
    const size_t cells = (size_t)1 << (3 * depth);
    uint32_t *ref = (uint32_t *)calloc(cells, sizeof *ref);
    const double to_grid = (double)(1u << GROVE_OCTREE_BITS) / side;
    const int sh = GROVE_OCTREE_BITS - depth;
    int ok = 1;
    if (!ref) return grove__bench_note(ctx, "bench octree: out of memory for the count check");
    for (size_t i = 0; i < n; i++) {
        uint32_t q[3];
        for (int a = 0; a < 3; a++) q[a] = grove__ot_quantize(xyz[3 * i + a], lo[a], to_grid);
        ref[(q[0] >> sh) | (q[1] >> sh) << depth | (q[2] >> sh) << (2 * depth)]++;
    }
    for (size_t c = 0; c < cells && ok; c++)
        if (ref[c] != c1[c] || ref[c] != c2[c])
            ok = grove__bench_note(ctx,
                                   "bench octree: level-%d count of cell %zu: %u / %u, expected %u",
                                   depth, c, c1[c], c2[c], ref[c]);
    free(ref);
    return ok;
}
#endif

#ifdef GROVE_HAVE_CUDA
static grove_status run_gpu(ot_bench *b, const char *dname, const double *xyz, size_t n)
{
    grove_status s;
    double *d_xyz = NULL, ms = 0, ms_nolod = 0, ms_host = 0, floor_ms = 0;
    grove_octree *t = NULL, *th = NULL, *tlod = NULL;
    grove_octree_opts o;
    grove_octree_stats ph;
    int ok = 0, ok_nolod = 0, ok_host = 0, sort_ok = 0;
    const int reps = n > 20000000 && b->repeats > 5 ? 5 : b->repeats;
    char op[48];
    double lo[3], side;
    uint32_t *ca = NULL, *cp = NULL;

    s = grove__bench_ot_upload(b->ctx, xyz, n, &d_xyz);
    grove_octree_default_opts(&o);
    /* the phase times (stats) of a build after one warm-up, each tree freed before the next
     * build as in the timed ones: a tree still held would leave the pool's prepared block
     * short, and the next build's count phase would include mapping a new one */
    for (int k = 0; k < 2 && s == GROVE_OK; k++) {
        grove_octree *tp = NULL;
        s = grove_octree_build_device(b->ctx, d_xyz, n, &o, &tp, &ph);
        grove_octree_destroy(tp);
    }
    if (s == GROVE_OK)
        s = grove__bench_ot_build_device(b->ctx, d_xyz, n, &o, b->warmup, reps, &ms, &t);
    if (s == GROVE_OK) s = grove_octree_download(b->ctx, t);
    if (s == GROVE_OK) ok = tree_valid(b->ctx, t, xyz, n);
    if (s == GROVE_OK) {
        grove_octree_cube(t, lo, &side);
        o.lod_grid = 0;
        tlod = t;
        t = NULL;
        s = grove__bench_ot_build_device(b->ctx, d_xyz, n, &o, b->warmup, reps, &ms_nolod, &t);
    }
    if (s == GROVE_OK) s = grove_octree_download(b->ctx, t);
    if (s == GROVE_OK)
        ok_nolod = n > 20000000 ? same_shape(b->ctx, t, tlod) : tree_valid(b->ctx, t, xyz, n);
    grove_octree_destroy(t);
    t = NULL;
    if (s == GROVE_OK) { /* the build through host memory must give the device build's bytes */
        const int big = n > 20000000;
        s = time_build(b->ctx, b->ctx, xyz, n, big ? 0 : 1, big ? 1 : (reps < 3 ? reps : 3),
                       &ms_host, &th);
        if (s == GROVE_OK) {
            ok_host = trees_equal(th, tlod);
            if (!ok_host)
                grove__bench_note(b->ctx, "bench octree: host-memory build differs from the "
                                          "device-resident build");
        }
        grove_octree_destroy(th);
    }
    grove_octree_destroy(tlod);
    tlod = NULL;
    if (s == GROVE_OK) {
        int eq = 0;
        s = cpu_equal(b, xyz, n, &eq);
        ok_host = ok_host && eq;
    }
    /* counting passes and the floor */
    for (int v = 0; v < 4 && s == GROVE_OK; v++) {
        const int li = v >> 1, morton = v & 1, depth = li ? 7 : 1;
        const size_t cells = (size_t)1 << (3 * depth);
        double ma = 0, mp = 0, msort = 0;
        ca = (uint32_t *)malloc(cells * sizeof *ca);
        cp = (uint32_t *)malloc(cells * sizeof *cp);
        if (!ca || !cp) {
            s = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY, "bench octree: out of memory");
        } else {
            s = grove__bench_ot_passes(b->ctx, d_xyz, n, lo, side, depth, morton, b->warmup,
                                       b->repeats, &ma, &mp, ca, cp, &msort, &sort_ok);
        }
        if (s == GROVE_OK) {
            const int cok = counts_ok(b->ctx, xyz, n, lo, side, depth, ca, cp);
            if (v == 0) {
                floor_ms = msort;
                if (!sort_ok) grove__bench_note(b->ctx, "bench octree: the Morton sort is wrong");
                snprintf(op, sizeof op, "morton_sort_%s", dname);
                grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "cub", n, msort,
                                       floor_ms, sort_ok);
                snprintf(op, sizeof op, "build_%s", dname);
                grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "gpu", n, ms, floor_ms,
                                       ok);
                snprintf(op, sizeof op, "phase_count_%s", dname);
                grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "gpu", n, ph.ms_count,
                                       floor_ms, ok);
                snprintf(op, sizeof op, "phase_place_%s", dname);
                grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "gpu", n, ph.ms_place,
                                       floor_ms, ok);
                snprintf(op, sizeof op, "phase_lod_%s", dname);
                grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "gpu", n, ph.ms_lod,
                                       floor_ms, ok);
                snprintf(op, sizeof op, "build_nolod_%s", dname);
                grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "gpu", n, ms_nolod,
                                       floor_ms, ok_nolod);
                snprintf(op, sizeof op, "build_host_%s", dname);
                grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "gpu", n, ms_host,
                                       floor_ms, ok_host);
            }
            snprintf(op, sizeof op, "count_agg_%s_L%d%s", dname, depth, morton ? "_morton" : "");
            grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "gpu", n, ma, floor_ms, cok);
            snprintf(op, sizeof op, "count_plain_%s_L%d%s", dname, depth,
                     morton ? "_morton" : "");
            grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "gpu", n, mp, floor_ms, cok);
        }
        free(ca);
        free(cp);
        ca = cp = NULL;
    }
    grove_octree_destroy(tlod);
    grove__bench_ot_free(d_xyz);
    return s;
}
#endif

/* The CPU backend: at 10^7 only when a 10^6 build says it takes under ~10 s. */
static grove_status run_cpu(ot_bench *b, const char *dname, const double *xyz, size_t n)
{
    grove_octree *t = NULL;
    double ms1 = 0, ms = 0;
    char op[48];
    grove_status s;
    const size_t m = n < OT_CHECK_N ? n : OT_CHECK_N;
    s = time_build(b->cpu, b->ctx, xyz, m, 0, 1, &ms1, &t);
    grove_octree_destroy(t);
    t = NULL;
    if (s != GROVE_OK || ms1 * ((double)n / (double)m) > 10000.0 || n > 20000000) return s;
    s = time_build(b->cpu, b->ctx, xyz, n, 0, 1, &ms, &t);
    if (s == GROVE_OK) {
        snprintf(op, sizeof op, "build_%s", dname);
        grove__bench_floor_row(b->rows, b->max_rows, b->nrows, op, "cpu", n, ms, 0,
                               tree_valid(b->ctx, t, xyz, n));
    }
    grove_octree_destroy(t);
    return s;
}

grove_status grove_bench_octree(grove_ctx *ctx, const grove_bench_opts *opts, grove_bench_row *rows,
                                int max_rows, int *nrows)
{
    static const size_t default_sizes[] = {10000000, 100000000};
    size_t sizes[2];
    int nsizes = 0;
    grove_status s = GROVE_OK;
    ot_bench b;

    *nrows = 0;
    memset(&b, 0, sizeof b);
    b.ctx = ctx;
    b.cuda = grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA;
    b.warmup = opts->warmup;
    b.repeats = opts->repeats < 1 ? 1 : opts->repeats;
    b.rows = rows;
    b.max_rows = max_rows;
    b.nrows = nrows;
    s = grove__bench_setup(ctx, "octree", opts, default_sizes, 2, sizes, &nsizes, &b.cpu);
    if (s != GROVE_OK) return s;
    for (int si = 0; si < nsizes && s == GROVE_OK; si++) {
        const size_t n = sizes[si];
        for (int dist = 0; dist < 2 && s == GROVE_OK; dist++) {
            const char *dname = dist ? "clustered" : "uniform";
            double *xyz = (double *)malloc((3 * n + 1) * sizeof *xyz);
            if (!xyz) {
                s = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                 "bench octree: out of memory for %zu points", n);
                break;
            }
            gen_points(xyz, n, dist, 300);
#ifdef GROVE_HAVE_CUDA
            if (b.cuda) s = run_gpu(&b, dname, xyz, n);
#endif
            if (s == GROVE_OK && (!b.cuda || n <= 20000000)) s = run_cpu(&b, dname, xyz, n);
            free(xyz);
        }
    }
    grove_ctx_destroy(b.cpu);
    return s;
}

void grove_bench_octree_usage(FILE *f)
{
    fprintf(f, "usage: grove bench octree [--size N] [--warmup W] [--repeats R] [--json]\n"
               "  Octree builds of N points (default 10^7 and 10^8; uniform and one dense spot):\n"
               "  the device-resident build (with and without level-of-detail samples), the build\n"
               "  through host memory, the counting pass with warp-aggregated vs plain atomics,\n"
               "  the CUB sort of 63-bit Morton keys (the floor: vs floor = its time / the row's)\n"
               "  and the CPU backend at 10^7 when it takes under ~10 s. Every row is checked.\n");
}
