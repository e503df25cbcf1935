/*
 * test_octree.c - tests of the octree module's build and queries (include/grove/octree.h).
 *
 *   test_octree [--backend cpu|cuda] [--large N] [--seed S]
 *               [--only quick|sanitize|sanitize-kernels]
 *
 * Every tree passes the validator of octree_check.h (with the samples recomputed by brute force
 * on inputs up to 20,000 points), and does not depend on the batch size (1, 7, 1000, n and the
 * default give the same bytes) nor on the number of threads. Box and radius queries are
 * compared with brute force over the input (boxes inclusive on every side, faces on point
 * coordinates; radii exactly a point's distance). Bad options, points and queries are checked
 * with their exact status and a message substring. With --backend cuda every build (host and
 * device-resident) and query runs on a CUDA context and is compared byte for byte with a CPU
 * context; without a GPU (or a CUDA build) it prints "SKIP: no GPU" and exits 77. --large N
 * runs only uniform and clustered sets of N points; --only quick leaves out the sets above 20,000
 * points; --only sanitize (for compute-sanitizer, where every kernel launch is slow) also
 * compares batch sizes 1 and 7 only on sets of at most 40 points, whose thousands of batches
 * took minutes under the tools; --only sanitize-kernels is that without the host-fallback tests
 * below (for racecheck and synccheck: they build one cloud again and again with device
 * allocations refused, host code that memcheck covers, through kernels that the other sets
 * run too, and took racecheck past 200 s). The host finish of a pool counted elsewhere is checked on the
 * CPU; with --backend cuda, contexts with a small device_mem_limit check that the CUDA build from
 * host memory falls back to the host with the same tree, and that the device-resident build
 * reports the shortage.
 */
#define _POSIX_C_SOURCE 200809L

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grove/octree.h"
#include "octree_check.h"
#include "octree_internal.h" /* grove__ot_build_cpu_from_pool */
#ifdef GROVE_HAVE_CUDA
#include <cuda_runtime.h>

#include "octree_cuda.h" /* grove__ot_refine_mode */
#endif
#include "testutil.h"

static grove_ctx *g_ctx; /* the backend under test */
static grove_ctx *g_cpu; /* CPU reference in --backend cuda mode, else NULL */
static grove_ctx *g_one; /* CPU context with one thread (results must not depend on threads) */
/* --only quick: the small sets, through every GPU path (counting, splitting, samples,
 * placement, queries); 2 for --only sanitize (see the top). */
static int g_quick;
static int g_no_fallback; /* --only sanitize-kernels */

/* Exact status and a substring of the last-error message. */
#define CHECK_ERR(ctx, expr, want, sub)                                                            \
    do {                                                                                           \
        CHECK_STATUS(ctx, expr, want);                                                             \
        if (!strstr(grove_ctx_last_error(ctx), sub))                                               \
            FAIL("message \"%s\" lacks \"%s\"", grove_ctx_last_error(ctx), sub);                   \
    } while (0)

static double rnd01(tu_rng *r) { return (double)(tu_next(r) >> 11) * (1.0 / 9007199254740992.0); }

static double rnd_between(tu_rng *r, double lo, double hi) { return lo + (hi - lo) * rnd01(r); }

/* ---- data sets ---- */

typedef struct cloud {
    double *xyz;
    size_t n;
} cloud;

static cloud new_cloud(size_t n)
{
    cloud c;
    c.n = n;
    c.xyz = (double *)tu_malloc((n ? 3 * n : 1) * sizeof(double));
    return c;
}

static cloud gen_uniform(tu_rng *r, size_t n, double lo, double hi)
{
    cloud c = new_cloud(n);
    for (size_t i = 0; i < 3 * n; i++) c.xyz[i] = rnd_between(r, lo, hi);
    return c;
}

/* Most points in one very dense spot (a deep tree), the rest spread out. */
static cloud gen_clustered(tu_rng *r, size_t n)
{
    cloud c = new_cloud(n);
    for (size_t i = 0; i < n; i++)
        for (int a = 0; a < 3; a++)
            c.xyz[3 * i + a] = (tu_next(r) % 10 < 9) ? 0.3 + rnd_between(r, 0.0, 1e-7)
                                                      : rnd_between(r, -5.0, 5.0);
    return c;
}

/* Dense spots: groups of 2..kmax points inside a cube 1e-7 wide (a level-21 cell of this
 * 10-wide cloud is 4.8e-6 wide, a level-30 cell 9.3e-9: so a group is one run, rarely two, of
 * equal 63-bit Morton keys whose points differ further down) at random places, between
 * uniform points. */
static cloud gen_spots(tu_rng *r, size_t n, int kmax)
{
    cloud c = new_cloud(n);
    size_t i = 0;
    while (i < n) {
        double ctr[3];
        size_t k = tu_next(r) % 3 == 0 ? 1 : 2 + (size_t)(tu_next(r) % (uint64_t)(kmax - 1));
        for (int a = 0; a < 3; a++) ctr[a] = rnd_between(r, -5.0, 5.0);
        for (size_t t = 0; t < k && i < n; t++, i++)
            for (int a = 0; a < 3; a++)
                c.xyz[3 * i + a] = k == 1 ? ctr[a] : ctr[a] + rnd_between(r, 0.0, 1e-7);
    }
    return c;
}

static cloud gen_equal(size_t n, double x, double y, double z)
{
    cloud c = new_cloud(n);
    for (size_t i = 0; i < n; i++) {
        c.xyz[3 * i] = x;
        c.xyz[3 * i + 1] = y;
        c.xyz[3 * i + 2] = z;
    }
    return c;
}

/* k distinct points, each repeated at random. */
static cloud gen_dups(tu_rng *r, size_t n, size_t k)
{
    cloud c = new_cloud(n);
    cloud d = gen_uniform(r, k, -1.0, 1.0);
    for (size_t i = 0; i < n; i++) memcpy(c.xyz + 3 * i, d.xyz + 3 * (tu_next(r) % k), 24);
    free(d.xyz);
    return c;
}

static cloud gen_line(tu_rng *r, size_t n)
{
    cloud c = new_cloud(n);
    for (size_t i = 0; i < n; i++) {
        double s = rnd_between(r, -3.0, 3.0);
        c.xyz[3 * i] = s;
        c.xyz[3 * i + 1] = 2.0 * s + 1.0;
        c.xyz[3 * i + 2] = -s;
    }
    return c;
}

static cloud gen_plane(tu_rng *r, size_t n)
{
    cloud c = gen_uniform(r, n, 10.0, 20.0);
    for (size_t i = 0; i < n; i++) c.xyz[3 * i + 2] = 7.5;
    return c;
}

/* Integer coordinates 0..7 with -0.0 and +0.0 mixed: many points exactly on cell faces. */
static cloud gen_lattice(tu_rng *r, size_t n)
{
    cloud c = new_cloud(n);
    for (size_t i = 0; i < 3 * n; i++) {
        c.xyz[i] = (double)(tu_next(r) % 8);
        if (c.xyz[i] == 0.0 && (tu_next(r) & 1)) c.xyz[i] = -0.0;
    }
    return c;
}

static cloud gen_scaled(tu_rng *r, size_t n, double scale)
{
    cloud c = gen_uniform(r, n, -1.0, 1.0);
    for (size_t i = 0; i < 3 * n; i++) c.xyz[i] *= scale;
    return c;
}

/* Points near the origin at 1e-30 and one far away at 1e30: the near ones share a cell down to
 * max_depth. */
static cloud gen_outlier(tu_rng *r, size_t n)
{
    cloud c = gen_scaled(r, n, 1e-30);
    if (n > 0) c.xyz[3 * (n / 2)] = 1e30;
    return c;
}

/* ---- building and comparing ---- */

static grove_octree *build_on(grove_ctx *ctx, const cloud *c, const grove_octree_opts *o,
                              grove_octree_stats *stats, const char *what)
{
    grove_octree *t = NULL;
    grove_status s = grove_octree_build(ctx, c->xyz, c->n, o, &t, stats);
    if (s != GROVE_OK) {
        FAIL("%s: build (%s) failed: %s: %s", what, grove_backend_name(grove_ctx_backend(ctx)),
             grove_status_string(s), grove_ctx_last_error(ctx));
        return NULL;
    }
    return t;
}

static void same(const grove_octree *a, const grove_octree *b, const char *what, const char *how)
{
    char msg[512];
    if (a && b && oc_same(a, b, msg, sizeof msg)) FAIL("%s: %s: %s", what, how, msg);
}

#ifdef GROVE_HAVE_CUDA
/* The device-resident build must give the host build's bytes once downloaded. */
static void check_device_build(const cloud *c, const grove_octree_opts *o,
                               const grove_octree *ref, const char *what)
{
    grove_octree *t = NULL;
    size_t bytes = 3 * c->n * sizeof(double);
    double *d = NULL;
    grove_status s;
    /* The synchronize matters: a cudaMemcpy from pageable memory may return before its data
     * lands, and the context's stream does not wait for the legacy default stream. */
    if (cudaMalloc((void **)&d, bytes ? bytes : 8) != cudaSuccess ||
        cudaMemcpy(d, c->xyz, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
        FAIL("%s: cudaMalloc/cudaMemcpy of %zu bytes failed", what, bytes);
        cudaFree(d);
        return;
    }
    s = grove_octree_build_device(g_ctx, d, c->n, o, &t, NULL);
    if (s != GROVE_OK) {
        FAIL("%s: build_device failed: %s: %s", what, grove_status_string(s),
             grove_ctx_last_error(g_ctx));
    } else {
        CHECK(grove_octree_nodes(t) == NULL);
        s = grove_octree_download(g_ctx, t);
        if (s != GROVE_OK)
            FAIL("%s: download failed: %s", what, grove_ctx_last_error(g_ctx));
        else
            same(t, ref, what, "device-resident build vs host build");
    }
    grove_octree_destroy(t);
    cudaFree(d);
}
#endif

/* Builds on the backend under test, validates, and compares with the references: one thread,
 * other batch sizes, the CPU context in CUDA mode. Returns the tree (caller destroys). */
static grove_octree *build_checked(const cloud *c, const grove_octree_opts *opts, int batches,
                                   const char *what)
{
    grove_octree_opts o;
    grove_octree_stats stats;
    grove_octree *t, *u;
    char msg[512];
    oc_stats os;
    if (opts)
        o = *opts;
    else
        grove_octree_default_opts(&o);
    t = build_on(g_ctx, c, &o, &stats, what);
    if (!t) return NULL;
    if (oc_check(t, c->xyz, c->n, c->n <= 20000, msg, sizeof msg, &os)) {
        FAIL("%s (n=%zu, max_points %u, max_depth %d, lod_grid %d): %s", what, c->n, o.max_points,
             o.max_depth, o.lod_grid, msg);
        return t;
    }
    if (c->n > 0)
        CHECK_MSG(stats.batches == (c->n + o.batch - 1) / o.batch, "%s: %u batches", what,
                  stats.batches);
    CHECK_MSG(os.num_inner == 0 || stats.spill_rounds > 0, "%s: %zu inner nodes, %u spill rounds",
              what, os.num_inner, stats.spill_rounds);
    CHECK(stats.ms_total >= 0.0 && stats.ms_count >= 0.0 && stats.ms_place >= 0.0);
    if (g_cpu) {
        u = build_on(g_cpu, c, &o, NULL, what);
        same(t, u, what, "CUDA vs CPU");
        grove_octree_destroy(u);
#ifdef GROVE_HAVE_CUDA
        check_device_build(c, &o, t, what);
#endif
    } else if (c->n <= 200000) {
        u = build_on(g_one, c, &o, NULL, what);
        same(t, u, what, "one thread vs several");
        grove_octree_destroy(u);
    }
    if (batches) {
        const size_t sizes[4] = {1, 7, 1000, c->n};
        for (int j = 0; j < 4; j++) {
            grove_octree_opts ob = o;
            char how[64];
            if (sizes[j] == 0 || (sizes[j] < 7 && c->n > 5000)) continue;
            if (g_quick == 2 && sizes[j] <= 7 && c->n > 40) continue;
            ob.batch = sizes[j];
            u = build_on(g_ctx, c, &ob, NULL, what);
            snprintf(how, sizeof how, "batch %zu vs batch %zu", sizes[j], o.batch);
            same(t, u, what, how);
            grove_octree_destroy(u);
        }
    }
    return t;
}

static grove_octree_opts opts_of(uint32_t max_points, int max_depth, int lod_grid)
{
    grove_octree_opts o;
    grove_octree_default_opts(&o);
    o.max_points = max_points;
    o.max_depth = max_depth;
    o.lod_grid = lod_grid;
    return o;
}

/* ---- progress ---- */

typedef struct prog {
    uint64_t calls, last, total;
    int bad;
} prog;

static void on_progress(void *user, uint64_t done, uint64_t total)
{
    prog *p = (prog *)user;
    if (done <= p->last || done > total) p->bad = 1;
    p->calls++;
    p->last = done;
    p->total = total;
}

/* ---- the host finish of a counted pool, and the CUDA build's fallbacks ---- */

/* A pool as the counting leaves it, made from a finished tree: every inner node's 8 children
 * in consecutive slots (empty octants are leaves with no points), slots handed out in
 * breadth-first order of the parents, so children follow their parent. */
static void pool_of(const grove_octree *t, uint32_t **child, uint32_t **count, uint8_t **depth,
                    size_t *size)
{
    const grove_octree_node *nd = grove_octree_nodes(t);
    const size_t nn = grove_octree_num_nodes(t);
    size_t inner = 0, next = 1;
    for (size_t k = 0; k < nn; k++) inner += nd[k].first_child != UINT32_MAX;
    *size = 1 + 8 * inner;
    *child = (uint32_t *)malloc(*size * sizeof **child);
    *count = (uint32_t *)calloc(*size, sizeof **count);
    *depth = (uint8_t *)calloc(*size, 1);
    uint32_t *slot = (uint32_t *)malloc(nn * sizeof *slot); /* final node -> pool slot */
    if (!*child || !*count || !*depth || !slot) {
        FAIL("pool_of: out of memory");
        free(slot);
        *size = 0;
        return;
    }
    memset(*child, 0xFF, *size * sizeof **child);
    slot[0] = 0;
    for (size_t k = 0; k < nn; k++) {
        const uint32_t p = slot[k];
        (*depth)[p] = nd[k].depth;
        if (nd[k].first_child == UINT32_MAX) {
            (*count)[p] = (uint32_t)nd[k].total;
            continue;
        }
        (*child)[p] = (uint32_t)next;
        for (unsigned o = 0, c = nd[k].first_child; o < 8; o++) {
            (*depth)[next + o] = (uint8_t)(nd[k].depth + 1);
            if (nd[k].child_mask >> o & 1u) slot[c++] = (uint32_t)(next + o);
        }
        next += 8;
    }
    free(slot);
}

/* grove__ot_build_cpu_from_pool (what the CUDA build from host memory runs when its later phases
 * do not fit on the device) gives the CPU build's tree; a pool that is not a tree is an
 * internal error, not a crash. */
static void test_from_pool(tu_rng *r)
{
    const size_t sizes[3] = {0, 1000, 30000};
    grove_ctx *cpu = g_cpu ? g_cpu : g_ctx;
    for (int j = 0; j < 3; j++) {
        cloud c = j == 2 ? gen_clustered(r, sizes[j]) : gen_uniform(r, sizes[j], -5.0, 7.0);
        grove_octree_opts o = opts_of(64, 20, 16);
        grove_octree *ref = build_on(cpu, &c, &o, NULL, "from_pool reference"), *t;
        uint32_t *child = NULL, *count = NULL;
        uint8_t *depth = NULL;
        size_t size = 0;
        grove_octree_stats st;
        char what[64];
        snprintf(what, sizeof what, "from_pool n=%zu", sizes[j]);
        if (!ref) {
            free(c.xyz);
            continue;
        }
        pool_of(ref, &child, &count, &depth, &size);
        t = (grove_octree *)calloc(1, sizeof *t);
        if (size && t) {
            t->opts = o;
            t->n = c.n;
            grove_octree_cube(ref, t->lo, &t->side);
            t->to_grid = (double)(1u << GROVE_OCTREE_BITS) / t->side;
            memset(&st, 0, sizeof st);
            CHECK_OK(cpu, grove__ot_build_cpu_from_pool(cpu, c.xyz, t, child, count, depth, size,
                                                        &st));
            same(t, ref, what, "host finish of a counted pool vs CPU build");
            /* pools that are not trees: a second parent of the same 8 children (the layout
             * would visit them twice), children one level too deep, children that point back
             * at their parent */
            for (int bad = 0; bad < 3 && size > 9; bad++) {
                grove_octree *u = (grove_octree *)calloc(1, sizeof *u);
                uint32_t *ch = (uint32_t *)malloc(size * sizeof *ch);
                uint8_t *dp = (uint8_t *)malloc(size);
                size_t a = 0, want = 0;
                if (!u || !ch || !dp) {
                    FAIL("%s: out of memory", what);
                    free(ch);
                    free(dp);
                    grove_octree_destroy(u);
                    break;
                }
                memcpy(ch, child, size * sizeof *ch);
                memcpy(dp, depth, size);
                if (bad == 0) {
                    /* the last block of children claimed again, by a leaf before it at its
                     * parent's depth (any leaf before it when there is none) */
                    size_t p = 0, any = size;
                    for (size_t i = 0; i < size; i++)
                        if (ch[i] != UINT32_MAX && ch[i] > ch[p]) p = i;
                    a = size;
                    for (size_t i = 1; i < ch[p] && a == size; i++)
                        if (ch[i] == UINT32_MAX) {
                            if (any == size) any = i;
                            if (dp[i] == dp[p] && i != p) a = i;
                        }
                    if (a == size) a = any;
                    if (a < size) ch[a] = ch[p];
                    want = a;
                } else if (bad == 1) {
                    for (uint32_t k = 0; k < 8; k++) dp[ch[0] + k]++;
                    want = 0;
                } else {
                    ch[0] = 0;
                    want = 0;
                }
                *u = *t;
                u->nodes = NULL;
                u->index = NULL;
                u->xyz = NULL;
                char sub[32];
                snprintf(sub, sizeof sub, "pool node %zu ", want);
                if (a < size)
                    CHECK_ERR(cpu,
                              grove__ot_build_cpu_from_pool(cpu, c.xyz, u, ch, count, dp, size,
                                                            &st),
                              GROVE_ERR_INTERNAL, sub);
                free(ch);
                free(dp);
                grove_octree_destroy(u);
            }
        }
        grove_octree_destroy(t);
        grove_octree_destroy(ref);
        free(child);
        free(count);
        free(depth);
        free(c.xyz);
    }
}

#ifdef GROVE_HAVE_CUDA
/* One build from host memory on ctx: the CPU's tree, host_fallback as wanted (-1: any), the
 * progress callback called with ascending counts up to n. Returns host_fallback (-1: failed). */
static int fallback_build(grove_ctx *ctx, const cloud *c, const grove_octree_opts *opts,
                          const grove_octree *ref, int want, const char *what)
{
    grove_octree_opts o = *opts;
    grove_octree_stats st;
    grove_octree *t;
    prog p = {0, 0, 0, 0};
    o.progress = on_progress;
    o.progress_user = &p;
    memset(&st, 0xAB, sizeof st);
    t = build_on(ctx, c, &o, &st, what);
    if (!t) return -1;
    same(t, ref, what, "CUDA build from host memory vs CPU");
    grove_octree_destroy(t);
    CHECK_MSG(want < 0 || st.host_fallback == (uint32_t)want, "%s: host_fallback %u, want %d",
              what, st.host_fallback, want);
    CHECK_MSG(st.host_fallback <= 2 && st.batches == (c->n + o.batch - 1) / o.batch &&
                  st.spill_rounds > 0 && st.ms_place >= 0.0 && st.ms_total >= st.ms_count,
              "%s: stats batches %u, spill rounds %u, host_fallback %u", what, st.batches,
              st.spill_rounds, st.host_fallback);
    CHECK_MSG(!p.bad && p.last == c->n && p.total == c->n,
              "%s: progress %llu calls, last %llu of %llu, %s", what,
              (unsigned long long)p.calls, (unsigned long long)p.last,
              (unsigned long long)p.total, p.bad ? "not ascending" : "ascending");
    return (int)st.host_fallback;
}

/* CUDA contexts with a device_mem_limit that holds the counting's buffers (16 bytes a point, a
 * batch, the pool) but not the Morton order's, one that holds not even those, and none: the
 * build from host memory gives the CPU's tree each time and says where it ran; the
 * device-resident build reports the shortage. Then every device allocation of the build in
 * turn is refused (the context's test hook): the counting's (whole build on the CPU backend,
 * after some batches may have been reported), and the later phases' (finished on the host),
 * including those after the tree's device arrays exist. The random stream is copied, so the
 * later sets are the same with and without a GPU. */
static void test_host_fallback(const tu_rng *r0)
{
    const size_t n = g_quick == 2 ? 20000 : g_quick ? 100000 : 400000;
    tu_rng rr = *r0, *r = &rr;
    cloud c = gen_clustered(r, n);
    grove_octree_opts o = opts_of(200, 20, 32);
    grove_octree *ref;
    o.batch = n / 8;
    /* the Morton order alone takes 24 bytes a point more; the grid coordinates 12 */
    const size_t limits[3] = {0, 16 * n + 24 * o.batch + 4 * n + (256u << 10), 8 * n};
    ref = build_on(g_cpu, &c, &o, NULL, "fallback reference");
    for (int j = 0; ref && j < 3; j++) {
        grove_ctx_opts co;
        grove_ctx *ctx = NULL;
        char what[96];
        grove_ctx_default_opts(&co);
        co.backend = GROVE_BACKEND_CUDA;
        co.device_mem_limit = limits[j];
        snprintf(what, sizeof what, "n=%zu, device_mem_limit %zu", n, limits[j]);
        if (grove_ctx_create(&co, &ctx) != GROVE_OK) {
            FAIL("%s: cannot create a CUDA context", what);
            continue;
        }
        fallback_build(ctx, &c, &o, ref, j, what);
        if (j == 2) { /* the points on the device, but no room for the build */
            double *d = NULL;
            grove_octree *t;
            if (cudaMalloc((void **)&d, 3 * n * sizeof(double)) != cudaSuccess ||
                cudaMemcpy(d, c.xyz, 3 * n * sizeof(double), cudaMemcpyHostToDevice) !=
                    cudaSuccess) {
                FAIL("%s: cudaMalloc/cudaMemcpy failed", what);
            } else {
                t = (grove_octree *)&co;
                CHECK_ERR(ctx, grove_octree_build_device(ctx, d, n, &o, &t, NULL),
                          GROVE_ERR_DEVICE_OUT_OF_MEMORY, "device_mem_limit");
                CHECK(t == NULL);
            }
            cudaFree(d);
        }
        grove_ctx_destroy(ctx);
    }
    /* allocation k refused, k = 0, 1, ... until a build needs fewer allocations */
    if (ref) {
        grove_ctx_opts co;
        grove_ctx *ctx = NULL;
        int seen[3] = {0, 0, 0};
        long k;
        grove_ctx_default_opts(&co);
        co.backend = GROVE_BACKEND_CUDA;
        if (grove_ctx_create(&co, &ctx) != GROVE_OK) {
            FAIL("cannot create a CUDA context");
        } else {
            const size_t in_use = ctx->dev_in_use;
            for (k = 0; k < 1000; k++) {
                char what[96];
                int f;
                snprintf(what, sizeof what, "n=%zu, device allocation %ld refused", n, k);
                ctx->dev_allocs = 0;
                ctx->dev_fail_at = k;
                f = fallback_build(ctx, &c, &o, ref, -1, what);
                CHECK_MSG(ctx->dev_in_use == in_use, "%s: %zu bytes of device memory held, "
                          "%zu before", what, ctx->dev_in_use, in_use);
                if (f < 0 || f > 2 || ctx->dev_allocs <= k) break;
                seen[f]++;
            }
            ctx->dev_fail_at = -1;
            CHECK_MSG(k < 1000 && seen[1] > 0 && seen[2] > 0,
                      "refusing each allocation: %ld builds, %d finished on the host, %d on the "
                      "CPU backend", k, seen[1], seen[2]);
        }
        grove_ctx_destroy(ctx);
    }
    grove_octree_destroy(ref);
    free(c.xyz);
}
#endif

/* ---- queries against brute force ---- */

static int in_box(const double *p, const double *b)
{
    return p[0] >= b[0] && p[0] <= b[3] && p[1] >= b[1] && p[1] <= b[4] && p[2] >= b[2] &&
           p[2] <= b[5];
}

static double dist2(const double *p, const double *c)
{
    double dx = p[0] - c[0], dy = p[1] - c[1], dz = p[2] - c[2];
    volatile double a = dx * dx, b = dy * dy, e = dz * dz;
    volatile double s = a + b;
    return s + e;
}

/* Compares row q of res with the brute-force matches of the predicate. */
static void check_row(const grove_query_result *res, size_t q, const cloud *c, int ball,
                      const double *arg, double r2, const char *what)
{
    uint64_t m = 0, b = res->offsets[q], e = res->offsets[q + 1];
    for (size_t i = 0; i < c->n; i++) {
        int hit = ball ? dist2(c->xyz + 3 * i, arg) <= r2 : in_box(c->xyz + 3 * i, arg);
        if (!hit) continue;
        if (b + m >= e || res->indices[b + m] != (uint32_t)i) {
            FAIL("%s: query %zu: match %llu is %lld, brute force says %zu (%llu matches)", what, q,
                 (unsigned long long)m, b + m < e ? (long long)res->indices[b + m] : -1LL, i,
                 (unsigned long long)(e - b));
            return;
        }
        m++;
    }
    if (b + m != e)
        FAIL("%s: query %zu: %llu matches, brute force %llu", what, q, (unsigned long long)(e - b),
             (unsigned long long)m);
}

static void same_result(const grove_query_result *a, const grove_query_result *b,
                        const char *what)
{
    if (a->num_queries != b->num_queries ||
        memcmp(a->offsets, b->offsets, (a->num_queries + 1) * sizeof *a->offsets) ||
        memcmp(a->indices, b->indices, a->offsets[a->num_queries] * sizeof *a->indices))
        FAIL("%s: CUDA and CPU query results differ", what);
}

static void test_queries(tu_rng *r, const grove_octree *t, const cloud *c, size_t nq,
                         const char *what)
{
    double *boxes = (double *)tu_malloc(6 * (nq + 8) * sizeof(double));
    double *cen = (double *)tu_malloc(3 * (nq + 4) * sizeof(double));
    double *rad = (double *)tu_malloc((nq + 4) * sizeof(double));
    double lo[3], side;
    size_t nb = 0, nr = 0;
    grove_query_result res, ref;
    grove_octree_cube(t, lo, &side);
    for (size_t q = 0; q < nq; q++, nb++) {
        double *b = boxes + 6 * nb;
        int kind = (int)(q % 4);
        for (int a = 0; a < 3; a++) {
            double u, v;
            if (kind < 2 && c->n > 0) {
                /* faces exactly on point coordinates */
                u = c->xyz[3 * (tu_next(r) % c->n) + a];
                v = kind == 0 ? c->xyz[3 * (tu_next(r) % c->n) + a] : u;
            } else {
                u = lo[a] + rnd_between(r, -0.1, 1.1) * side;
                v = lo[a] + rnd_between(r, -0.1, 1.1) * side;
            }
            b[a] = u < v ? u : v;
            b[3 + a] = u < v ? v : u;
        }
        if (kind == 3) { /* small boxes */
            for (int a = 0; a < 3; a++) b[3 + a] = b[a] + side * 1e-3;
        }
    }
    /* the whole space, an empty box, half-infinite, a box beyond the cube */
    {
        const double inf = INFINITY;
        double extra[4][6] = {{-inf, -inf, -inf, inf, inf, inf},
                              {1.0, 0.0, 0.0, 0.0, 1.0, 1.0},
                              {-inf, lo[1], -inf, lo[0] + side / 2, inf, inf},
                              {lo[0] + 2 * side, lo[1], lo[2], lo[0] + 3 * side, lo[1] + side,
                               lo[2] + side}};
        memcpy(boxes + 6 * nb, extra, sizeof extra);
        nb += 4;
    }
    CHECK_OK(g_ctx, grove_octree_query_boxes(g_ctx, t, boxes, nb, &res));
    if (res.offsets) {
        for (size_t q = 0; q < nb; q++) check_row(&res, q, c, 0, boxes + 6 * q, 0.0, what);
        if (g_cpu) {
            CHECK_OK(g_cpu, grove_octree_query_boxes(g_cpu, t, boxes, nb, &ref));
            if (ref.offsets) same_result(&res, &ref, what);
            grove_query_result_free(&ref);
        }
    }
    grove_query_result_free(&res);

    for (size_t q = 0; q < nq; q++, nr++) {
        double *ce = cen + 3 * nr;
        int kind = (int)(q % 3);
        if (c->n > 0 && kind < 2) {
            /* centred on a point, radius exactly another point's distance (or 0) */
            const double *p = c->xyz + 3 * (tu_next(r) % c->n);
            memcpy(ce, p, 3 * sizeof *ce);
            rad[nr] = kind == 0 ? sqrt(dist2(c->xyz + 3 * (tu_next(r) % c->n), ce)) : 0.0;
        } else {
            for (int a = 0; a < 3; a++) ce[a] = lo[a] + rnd_between(r, -0.1, 1.1) * side;
            rad[nr] = rnd_between(r, 0.0, 0.3) * side;
        }
    }
    /* infinite; r * r overflowing (every point matches); r * r underflowing to 0 */
    for (int j = 0; j < 3; j++, nr++) {
        memcpy(cen + 3 * nr, j < 2 || c->n == 0 ? lo : c->xyz, 3 * sizeof *cen);
        rad[nr] = j == 0 ? INFINITY : j == 1 ? 1e160 : 1e-160;
    }
    CHECK_OK(g_ctx, grove_octree_query_radius(g_ctx, t, cen, rad, nr, &res));
    if (res.offsets) {
        for (size_t q = 0; q < nr; q++)
            check_row(&res, q, c, 1, cen + 3 * q, rad[q] * rad[q], what);
        if (g_cpu) {
            CHECK_OK(g_cpu, grove_octree_query_radius(g_cpu, t, cen, rad, nr, &ref));
            if (ref.offsets) same_result(&res, &ref, what);
            grove_query_result_free(&ref);
        }
    }
    grove_query_result_free(&res);
    free(boxes);
    free(cen);
    free(rad);
}

/* ---- the data sets ---- */

static void run_set(tu_rng *r, cloud c, const grove_octree_opts *o, int batches, size_t nq,
                    const char *what)
{
    grove_octree *t = build_checked(&c, o, batches, what);
    if (t && nq) test_queries(r, t, &c, nq, what);
    grove_octree_destroy(t);
    free(c.xyz);
}

static void test_datasets(tu_rng *r)
{
    const size_t sizes[] = {0, 1, 31, 32, 33, 1000};
    grove_octree_opts o;
    char what[128];
    for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j++) {
        snprintf(what, sizeof what, "uniform n=%zu cap 8", sizes[j]);
        o = opts_of(8, 20, 4);
        run_set(r, gen_uniform(r, sizes[j], -1.0, 1.0), &o, 1, 40, what);
        snprintf(what, sizeof what, "uniform n=%zu cap 32", sizes[j]);
        o = opts_of(32, 20, 128);
        run_set(r, gen_uniform(r, sizes[j], 5.0, 6.0), &o, 1, 40, what);
    }
    /* spots of at most 32 points a run (the CUDA build refines the Morton order run by run)
     * and of up to 40 (then it sorts everything), with both refinements (the CUDA builds are
     * asked which one ran): cap 16 and lod 128 make inner nodes whose samples lie below level
     * 21; max depth 23 and 27 make leaves below it, so that points of one run lie in different
     * leaves */
    for (int kmax = 32; kmax <= 40; kmax += 8)
        for (int mode = 0; mode < (g_cpu ? 2 : 1); mode++) {
            static const struct {
                uint32_t cap;
                int depth, lod;
                size_t n;
            } sp[3] = {{16, 20, 128, 20000}, {4, 23, 128, 20000}, {2, 27, 8, 5000}};
            for (int k = 0; k < 3; k++) {
#ifdef GROVE_HAVE_CUDA
                if (g_cpu) {
                    grove__ot_refine_mode(mode);
                    (void)grove__ot_refine_last();
                }
#endif
                snprintf(what, sizeof what,
                         "spots of 2..%d points, cap %u, max depth %d, lod %d, refinement %d",
                         kmax, sp[k].cap, sp[k].depth, sp[k].lod, mode);
                o = opts_of(sp[k].cap, sp[k].depth, sp[k].lod);
                /* a tenth of the points under the sanitizers (racecheck took over 200 s with
                 * all of them); the 2..40 sets still hold several runs of over 32 points */
                run_set(r, gen_spots(r, g_quick == 2 ? sp[k].n / 10 : sp[k].n, kmax), &o, 1, 40,
                        what);
#ifdef GROVE_HAVE_CUDA
                if (g_cpu) {
                    const int want = mode == 0 && kmax <= 32 ? 1 : 2, got = grove__ot_refine_last();
                    CHECK_MSG(got == want, "%s: refined %s, want %s", what,
                              got == 1 ? "run by run" : got == 2 ? "by a sort of all" : "not at all",
                              want == 1 ? "run by run" : "by a sort of all");
                }
#endif
            }
        }
#ifdef GROVE_HAVE_CUDA
    if (g_cpu) grove__ot_refine_mode(0);
#endif
    /* the CUDA counting kernels take 2048 points a block (256 threads x 8): tile - 1, tile,
     * tile + 1, in one batch and in batches of 1000 (run_set's batch sizes) */
    for (size_t m = 2047; m <= 2049; m++) {
        snprintf(what, sizeof what, "uniform n=%zu cap 8, lod 8", m);
        o = opts_of(8, 20, 8);
        run_set(r, gen_uniform(r, m, 0.0, 1.0), &o, 1, 20, what);
    }
    run_set(r, gen_uniform(r, 1000, -1.0, 1.0), NULL, 1, 20, "uniform n=1000 defaults");
    o = opts_of(1, 20, 2);
    run_set(r, gen_uniform(r, 1000, -1.0, 1.0), &o, 1, 40, "uniform cap 1, lod 2");
    o = opts_of(16, 0, 8);
    run_set(r, gen_uniform(r, 1000, -1.0, 1.0), &o, 1, 40, "max_depth 0");
    o = opts_of(16, 30, 0);
    run_set(r, gen_uniform(r, 1000, -1.0, 1.0), &o, 1, 40, "lod_grid 0, max_depth 30");
    o = opts_of(16, 20, 1024);
    run_set(r, gen_uniform(r, 5000, -1.0, 1.0), &o, 1, 40, "lod_grid 1024");
    o = opts_of(16, 29, 2);
    run_set(r, gen_clustered(r, 3000), &o, 1, 40, "clustered, max_depth 29, lod 2");
    o = opts_of(64, 20, 16);
    run_set(r, gen_clustered(r, 20000), &o, 1, 40, "clustered cap 64");
    o = opts_of(16, 30, 0);
    run_set(r, gen_clustered(r, 20000), &o, 1, 40, "clustered, lod_grid 0, max_depth 30");
    o = opts_of(4, 20, 8);
    run_set(r, gen_equal(100, 1.5, -2.5, 3.25), &o, 1, 20, "all equal (a chain to max_depth)");
    /* every voxel of every depth one run across 20 of the CUDA sample kernel's 256-point (one
     * warp) tiles, the winner (smallest position, all distances equal) in the first; the
     * samples reach below level 21 (the refined order) */
    o = opts_of(4, 20, 8);
    run_set(r, gen_equal(5000, -3.5, 0.25, 2.0), &o, 0, 20, "5000 equal points");
    o = opts_of(1, 25, 4);
    run_set(r, gen_equal(2, -0.0, 0.0, 1e-300), &o, 1, 20, "two equal points, cap 1");
    o = opts_of(1, 20, 4);
    run_set(r, gen_equal(1, 7.0, 8.0, 9.0), &o, 1, 20, "one point, cap 1");
    o = opts_of(8, 20, 16);
    run_set(r, gen_dups(r, 3000, 37), &o, 1, 40, "duplicates");
    run_set(r, gen_line(r, 2000), &o, 1, 40, "collinear");
    run_set(r, gen_plane(r, 2000), &o, 1, 40, "planar");
    run_set(r, gen_lattice(r, 3000), &o, 1, 40, "lattice with -0.0");
    run_set(r, gen_scaled(r, 2000, 1e30), &o, 1, 40, "coordinates near 1e30");
    run_set(r, gen_scaled(r, 2000, 1e-30), &o, 1, 40, "coordinates near 1e-30");
    run_set(r, gen_outlier(r, 2000), &o, 1, 40, "1e-30 cluster and a 1e30 outlier");
    run_set(r, gen_scaled(r, 2000, 1e200), &o, 1, 40, "coordinates near 1e200");
    if (g_quick) return;
    o = opts_of(100, 20, 32);
    run_set(r, gen_uniform(r, 100000, -50.0, 50.0), &o, 1, 60, "uniform n=100000 cap 100");
    o = opts_of(50000, 20, 128);
    o.batch = 100000;
    run_set(r, gen_uniform(r, 1000000, -1e3, 1e3), &o, 0, 8, "uniform n=10^6 defaults, batch 1e5");
    o = opts_of(1000, 20, 64);
    o.batch = 250000;
    run_set(r, gen_clustered(r, 1000000), &o, 0, 8, "clustered n=10^6 cap 1000");
}

static void test_progress(tu_rng *r)
{
    cloud c = gen_uniform(r, 1000, 0.0, 1.0);
    grove_octree_opts o = opts_of(16, 20, 8), got;
    grove_octree_stats st;
    grove_octree *t = NULL;
    prog p = {0, 0, 0, 0};
    o.batch = 300;
    o.progress = on_progress;
    o.progress_user = &p;
    CHECK_OK(g_ctx, grove_octree_build(g_ctx, c.xyz, c.n, &o, &t, &st));
    CHECK_MSG(p.calls == 4 && p.last == 1000 && p.total == 1000 && !p.bad,
              "progress: %llu calls, last %llu of %llu", (unsigned long long)p.calls,
              (unsigned long long)p.last, (unsigned long long)p.total);
    CHECK(st.batches == 4);
    grove_octree_get_opts(t, &got);
    CHECK(got.progress == NULL && got.progress_user == NULL && got.batch == 300 &&
          got.max_points == 16 && got.lod_grid == 8);
    CHECK_OK(g_ctx, grove_octree_download(g_ctx, t)); /* a host tree: nothing to do */
    grove_octree_destroy(t);
    free(c.xyz);
}

/* ---- rejected arguments ---- */

static void test_invalid(void)
{
    double pts[3 * 8] = {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 7, 7, 7};
    grove_octree_opts o;
    grove_octree *t = (grove_octree *)&o; /* must be overwritten with NULL */
    grove_query_result res;
    double box[12] = {0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1};
    double cen[6] = {0, 0, 0, 1, 1, 1}, rad[2] = {1.0, 1.0};

    grove_octree_default_opts(&o);
    CHECK(o.max_points == 50000 && o.batch == 8388608 && o.max_depth == 20 && o.lod_grid == 128 &&
          o.progress == NULL);
    CHECK_ERR(g_ctx, grove_octree_build(g_ctx, pts, 8, NULL, NULL, NULL), GROVE_ERR_INVALID_ARG,
              "out is NULL");
    CHECK_ERR(g_ctx, grove_octree_build(g_ctx, NULL, 8, NULL, &t, NULL), GROVE_ERR_INVALID_ARG,
              "xyz is NULL");
    CHECK(t == NULL);
    CHECK_ERR(g_ctx, grove_octree_build(g_ctx, pts, (size_t)GROVE_OCTREE_MAX_N + 1, NULL, &t, NULL),
              GROVE_ERR_LIMIT, "exceeds the limit");
    o.max_points = 0;
    CHECK_ERR(g_ctx, grove_octree_build(g_ctx, pts, 8, &o, &t, NULL), GROVE_ERR_INVALID_ARG,
              "opts->max_points");
    grove_octree_default_opts(&o);
    o.batch = 0;
    CHECK_ERR(g_ctx, grove_octree_build(g_ctx, pts, 8, &o, &t, NULL), GROVE_ERR_INVALID_ARG,
              "opts->batch");
    grove_octree_default_opts(&o);
    o.max_depth = -1;
    CHECK_ERR(g_ctx, grove_octree_build(g_ctx, pts, 8, &o, &t, NULL), GROVE_ERR_INVALID_ARG,
              "opts->max_depth");
    CHECK_ERR(g_ctx, grove_octree_check_opts(g_ctx, &o), GROVE_ERR_INVALID_ARG,
              "opts->max_depth");
    o.max_depth = 24; /* 24 + log2(128) > 30 */
    CHECK_ERR(g_ctx, grove_octree_build(g_ctx, pts, 8, &o, &t, NULL), GROVE_ERR_INVALID_ARG,
              "opts->max_depth must be 0..23");
    CHECK_ERR(g_ctx, grove_octree_check_opts(g_ctx, &o), GROVE_ERR_INVALID_ARG,
              "opts->max_depth must be 0..23");
    o.max_depth = 23;
    CHECK(grove_octree_check_opts(g_ctx, &o) == GROVE_OK);
    o.lod_grid = 0;
    o.max_depth = 31;
    CHECK_ERR(g_ctx, grove_octree_build(g_ctx, pts, 8, &o, &t, NULL), GROVE_ERR_INVALID_ARG,
              "opts->max_depth must be 0..30");
    CHECK_ERR(g_ctx, grove_octree_check_opts(g_ctx, &o), GROVE_ERR_INVALID_ARG,
              "opts->max_depth must be 0..30");
    o.max_depth = 30;
    CHECK(grove_octree_check_opts(g_ctx, &o) == GROVE_OK);
    grove_octree_default_opts(&o);
    {
        const int bad_grids[] = {1, 3, 100, 2048, -2};
        for (int j = 0; j < 5; j++) {
            o.lod_grid = bad_grids[j];
            CHECK_ERR(g_ctx, grove_octree_build(g_ctx, pts, 8, &o, &t, NULL),
                      GROVE_ERR_INVALID_ARG, "opts->lod_grid");
            CHECK_ERR(g_ctx, grove_octree_check_opts(g_ctx, &o), GROVE_ERR_INVALID_ARG,
                      "opts->lod_grid");
        }
    }
    grove_octree_default_opts(&o);
    CHECK(grove_octree_check_opts(g_ctx, &o) == GROVE_OK);
    CHECK(grove_octree_check_opts(g_ctx, NULL) == GROVE_OK);
    CHECK(grove_octree_check_opts(NULL, &o) == GROVE_ERR_INVALID_ARG);
    o.max_points = 0;
    CHECK_ERR(g_ctx, grove_octree_check_opts(g_ctx, &o), GROVE_ERR_INVALID_ARG,
              "opts->max_points");
    grove_octree_default_opts(&o);
    o.batch = 0;
    CHECK_ERR(g_ctx, grove_octree_check_opts(g_ctx, &o), GROVE_ERR_INVALID_ARG, "opts->batch");
    grove_octree_default_opts(&o);
    pts[3 * 5 + 1] = NAN;
    CHECK_ERR(g_ctx, grove_octree_build(g_ctx, pts, 8, NULL, &t, NULL), GROVE_ERR_BAD_INPUT,
              "point 5 has a non-finite coordinate");
    pts[3 * 2 + 2] = -INFINITY;
    CHECK_ERR(g_ctx, grove_octree_build(g_ctx, pts, 8, NULL, &t, NULL), GROVE_ERR_BAD_INPUT,
              "point 2 has a non-finite coordinate");
    pts[3 * 5 + 1] = 5.0;
    pts[3 * 2 + 2] = 2.0;
    pts[0] = -DBL_MAX;
    pts[3] = DBL_MAX;
    CHECK_ERR(g_ctx, grove_octree_build(g_ctx, pts, 8, NULL, &t, NULL), GROVE_ERR_BAD_INPUT,
              "overflows");
    pts[0] = 0.0;
    pts[3] = 1.0;
    CHECK(t == NULL);
    CHECK_ERR(g_one, grove_octree_build_device(g_one, pts, 8, NULL, &t, NULL),
              GROVE_ERR_UNSUPPORTED, "needs a CUDA context");
    CHECK_ERR(g_ctx, grove_octree_download(g_ctx, NULL), GROVE_ERR_INVALID_ARG, "t is NULL");
    grove_octree_destroy(NULL);
    CHECK(grove_octree_num_nodes(NULL) == 0 && grove_octree_nodes(NULL) == NULL);

    CHECK_OK(g_ctx, grove_octree_build(g_ctx, pts, 8, NULL, &t, NULL));
    CHECK_ERR(g_ctx, grove_octree_query_boxes(g_ctx, t, box, 2, NULL), GROVE_ERR_INVALID_ARG,
              "out is NULL");
    CHECK_ERR(g_ctx, grove_octree_query_boxes(g_ctx, NULL, box, 2, &res), GROVE_ERR_INVALID_ARG,
              "t is NULL");
    CHECK_ERR(g_ctx, grove_octree_query_boxes(g_ctx, t, NULL, 2, &res), GROVE_ERR_INVALID_ARG,
              "boxes is NULL");
    box[6 + 4] = NAN;
    CHECK_ERR(g_ctx, grove_octree_query_boxes(g_ctx, t, box, 2, &res), GROVE_ERR_INVALID_ARG,
              "query 1 has a NaN bound");
    CHECK(res.offsets == NULL && res.indices == NULL && res.num_queries == 0);
    CHECK_OK(g_ctx, grove_octree_query_boxes(g_ctx, t, box, 0, &res));
    CHECK(res.num_queries == 0 && res.offsets && res.offsets[0] == 0);
    grove_query_result_free(&res);
    CHECK_ERR(g_ctx, grove_octree_query_radius(g_ctx, t, cen, NULL, 2, &res),
              GROVE_ERR_INVALID_ARG, "radii is NULL");
    CHECK_ERR(g_ctx, grove_octree_query_radius(g_ctx, t, NULL, rad, 2, &res),
              GROVE_ERR_INVALID_ARG, "centres is NULL");
    rad[1] = -1.0;
    CHECK_ERR(g_ctx, grove_octree_query_radius(g_ctx, t, cen, rad, 2, &res),
              GROVE_ERR_INVALID_ARG, "query 1 has radius -1");
    rad[1] = NAN;
    CHECK_ERR(g_ctx, grove_octree_query_radius(g_ctx, t, cen, rad, 2, &res),
              GROVE_ERR_INVALID_ARG, "query 1 has radius nan");
    rad[1] = 1.0;
    cen[3] = INFINITY;
    CHECK_ERR(g_ctx, grove_octree_query_radius(g_ctx, t, cen, rad, 2, &res),
              GROVE_ERR_INVALID_ARG, "query 1 has a non-finite centre");
    grove_octree_destroy(t);
}

static int usage(void)
{
    fprintf(stderr, "usage: test_octree [--backend cpu|cuda] [--large N] [--seed S] "
                    "[--only quick|sanitize|sanitize-kernels]\n");
    return 1;
}

int main(int argc, char **argv)
{
    tu_args args = {"cpu", 0, 20261123, NULL};
    grove_ctx_opts o;
    tu_rng r;
    if (tu_parse_args(argc, argv, &args) != 0) return usage();
    if (args.only && strcmp(args.only, "quick") != 0 && strcmp(args.only, "sanitize") != 0 &&
        strcmp(args.only, "sanitize-kernels") != 0)
        return usage();
    g_quick = !args.only ? 0 : strcmp(args.only, "quick") == 0 ? 1 : 2;
    g_no_fallback = args.only && strcmp(args.only, "sanitize-kernels") == 0;
    grove_ctx_default_opts(&o);
    o.backend = GROVE_BACKEND_CPU;
    o.num_threads = 1;
    if (grove_ctx_create(&o, &g_one) != GROVE_OK) return 1;
    o.num_threads = 0;
    if (!strcmp(args.backend, "cuda")) {
        if (tu_cuda_ctx("test_octree", &o, &g_ctx) != 0) {
            grove_ctx_destroy(g_one);
            return TEST_SKIP;
        }
        if (grove_ctx_create(&o, &g_cpu) != GROVE_OK) return 1;
    } else if (!strcmp(args.backend, "cpu")) {
        if (grove_ctx_create(&o, &g_ctx) != GROVE_OK) return 1;
    } else {
        return usage();
    }
    printf("test_octree: backend %s, seed %llu\n", args.backend, (unsigned long long)args.seed);
    r.s = args.seed;
    if (args.large) {
        char what[96];
        grove_octree_opts oo = opts_of(50000, 20, 128);
        snprintf(what, sizeof what, "uniform n=%zu", args.large);
        run_set(&r, gen_uniform(&r, args.large, -1e4, 1e4), &oo, 0, 4, what);
        snprintf(what, sizeof what, "clustered n=%zu", args.large);
        run_set(&r, gen_clustered(&r, args.large), &oo, 0, 4, what);
    } else {
        test_invalid();
        test_progress(&r);
        test_from_pool(&r);
#ifdef GROVE_HAVE_CUDA
        if (g_cpu && !g_no_fallback) test_host_fallback(&r);
#endif
        test_datasets(&r);
    }
    grove_ctx_destroy(g_ctx);
    grove_ctx_destroy(g_cpu);
    grove_ctx_destroy(g_one);
    return tu_finish("test_octree");
}
