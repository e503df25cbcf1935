/*
 * octree_cuda.cu - the CUDA backend of the octree: the entry points of the batched build (its
 * phases: octree_count_cuda.cu, octree_lod_cuda.cu, octree_place_cuda.cu, which share
 * octree_cuda_internal.cuh), the download of a device tree, and the box and radius queries.
 * octree.h defines the tree; everything is a function of the grid coordinates q
 * (grove__ot_quantize), so the result equals the CPU backend's byte for byte.
 */
#include <cub/device/device_segmented_sort.cuh>

#include <math.h>

#include "octree_cuda_internal.cuh"

using namespace grove__otc;

namespace
{

/* The pool block prepared before a device build, per point: 1.5x the scratch a build holds at
 * its peak (116 B a point, grove's own count ctx->dev_peak, 10^8 uniform points). On the H200
 * a block of 1.25x to 3x the peak gave 23.7-23.8 ms at 10^8 points, one of 1.0x or none
 * 27.8-28.5 ms (bench/RESULTS.md); why a block just above the peak does not do is not known. */
const size_t kPoolBytesPerPoint = 176;
const int kStack = 232; /* 7 per level below the root + 8: a query's descent never needs more */

/* Pinned host memory of one call. */
struct Pinned {
    void *p;
    Pinned() : p(NULL) {}
    ~Pinned()
    {
        if (p) cudaFreeHost(p);
    }
};

/* ---- queries ---- */

struct QTree {
    const Node *nodes;
    const uint32_t *index;
    const double *xyz;
    double lo[3], side;
};

/* The node's cube widened by a margin far above the rounding of quantization, so that no point
 * of the node falls outside it; the exact test is on the points. */
__device__ __forceinline__ void node_box(const QTree &T, const Node &nd, double blo[3],
                                         double bhi[3])
{
    const double w = ldexp(T.side, -(int)nd.depth);
    for (int a = 0; a < 3; a++) {
        const double m = 1e-12 * (fabs(T.lo[a]) + T.side);
        blo[a] = T.lo[a] + (double)nd.cell[a] * w - m;
        bhi[a] = T.lo[a] + (double)(nd.cell[a] + 1u) * w + m;
    }
}

template <bool Radius>
__global__ void query_kernel(QTree T, const double *__restrict__ qs, const double *__restrict__ radii,
                             size_t nq, const u64 *__restrict__ offsets, u64 *__restrict__ counts,
                             uint32_t *__restrict__ out)
{
    const size_t qi = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (qi >= nq) return;
    double b[6], c[3], r = 0, r2 = 0;
    if (Radius) {
        for (int a = 0; a < 3; a++) c[a] = qs[3 * qi + a];
        r = radii[qi];
        r2 = __dmul_rn(r, r);
    } else {
        for (int a = 0; a < 6; a++) b[a] = qs[6 * qi + a];
    }
    uint32_t stack[kStack];
    int sp = 0;
    stack[sp++] = 0;
    u64 cnt = 0, w = out ? offsets[qi] : 0;
    while (sp > 0) {
        const Node nd = T.nodes[stack[--sp]];
        double blo[3], bhi[3];
        node_box(T, nd, blo, bhi);
        bool hit = true;
        if (Radius) {
            double acc = 0;
            for (int a = 0; a < 3; a++) {
                double e = blo[a] - c[a] > 0 ? blo[a] - c[a] : (c[a] - bhi[a] > 0 ? c[a] - bhi[a] : 0);
                acc += e * e;
            }
            hit = acc <= r2 * (1.0 + 1e-9) + 1e-300;
        } else {
            for (int a = 0; a < 3; a++) hit = hit && b[a] <= bhi[a] && b[3 + a] >= blo[a];
        }
        if (!hit) continue;
        if (nd.first_child != kNone) {
            const int k = __popc(nd.child_mask);
            for (int j = k - 1; j >= 0; j--) stack[sp++] = nd.first_child + (uint32_t)j;
            continue;
        }
        for (u64 e = nd.begin; e < nd.end; e++) {
            const double x = T.xyz[3 * e], y = T.xyz[3 * e + 1], z = T.xyz[3 * e + 2];
            bool m;
            if (Radius) {
                const double dx = __dsub_rn(x, c[0]), dy = __dsub_rn(y, c[1]),
                             dz = __dsub_rn(z, c[2]);
                m = __dadd_rn(__dadd_rn(__dmul_rn(dx, dx), __dmul_rn(dy, dy)), __dmul_rn(dz, dz)) <=
                    r2;
            } else {
                m = b[0] <= x && x <= b[3] && b[1] <= y && y <= b[4] && b[2] <= z && z <= b[5];
            }
            if (!m) continue;
            if (out)
                out[w++] = T.index[e];
            else
                cnt++;
        }
    }
    if (!out) counts[qi] = cnt;
}

grove_status run_query(grove_ctx *ctx, const grove_octree *t, const double *qs, size_t qstride,
                       const double *radii, size_t nq, grove_query_result *out)
{
    const cudaStream_t s = (cudaStream_t)ctx->stream;
    Arena A(ctx);
    uint64_t *off = (uint64_t *)malloc((nq + 1) * sizeof *off);
    uint32_t *ind = NULL;
    struct Owned {
        uint64_t **o;
        uint32_t **i;
        ~Owned()
        {
            if (*o) free(*o);
            if (*i) free(*i);
        }
    } own = {&off, &ind};
    if (!off)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "octree query: out of memory for %zu "
                            "offsets", nq + 1);
    memset(off, 0, (nq + 1) * sizeof *off);
    QTree T;
    for (int a = 0; a < 3; a++) T.lo[a] = t->lo[a];
    T.side = t->side;
    if (nq && t->n) {
        if (t->d_nodes && (t->dev_ctx == ctx || !t->nodes)) {
            T.nodes = t->d_nodes;
            T.index = t->d_index;
            T.xyz = t->d_xyz;
        } else {
            Node *dn;
            uint32_t *di;
            double *dx;
            GROVE_TRY(A.get(&dn, t->num_nodes, "octree query nodes"));
            GROVE_TRY(A.get(&di, t->num_entries, "octree query entries"));
            GROVE_TRY(A.get(&dx, 3 * t->num_entries, "octree query coordinates"));
            GROVE_TRY(grove__cuda_h2d(ctx, dn, t->nodes, t->num_nodes * sizeof(Node), s));
            GROVE_TRY(grove__cuda_h2d(ctx, di, t->index, t->num_entries * sizeof(uint32_t), s));
            GROVE_TRY(grove__cuda_h2d(ctx, dx, t->xyz, 3 * t->num_entries * sizeof(double), s));
            T.nodes = dn;
            T.index = di;
            T.xyz = dx;
        }
        double *dq, *dr = NULL;
        u64 *dcount, *doff;
        GROVE_TRY(A.get(&dq, qstride * nq, "octree queries"));
        GROVE_TRY(grove__cuda_h2d(ctx, dq, qs, qstride * nq * sizeof(double), s));
        if (radii) {
            GROVE_TRY(A.get(&dr, nq, "octree query radii"));
            GROVE_TRY(grove__cuda_h2d(ctx, dr, radii, nq * sizeof(double), s));
        }
        GROVE_TRY(A.get(&dcount, nq, "octree query counts"));
        if (radii)
            query_kernel<true><<<blocks_for(nq), kBlock, 0, s>>>(T, dq, dr, nq, NULL, dcount, NULL);
        else
            query_kernel<false><<<blocks_for(nq), kBlock, 0, s>>>(T, dq, dr, nq, NULL, dcount, NULL);
        GROVE_CUDA_LAUNCHED(ctx, "octree query count kernel");
        GROVE_TRY(grove__cuda_d2h(ctx, off + 1, dcount, nq * sizeof(u64), s));
        GROVE_TRY(grove__cuda_sync(ctx, s, "octree query count"));
        for (size_t i = 0; i < nq; i++) off[i + 1] += off[i];
        const size_t total = off[nq];
        ind = (uint32_t *)malloc((total ? total : 1) * sizeof *ind);
        if (!ind)
            return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                "octree query: out of memory for %zu matches", total);
        if (total) {
            uint32_t *dout, *dsorted;
            GROVE_TRY(A.get(&doff, nq + 1, "octree query offsets"));
            GROVE_TRY(grove__cuda_h2d(ctx, doff, off, (nq + 1) * sizeof(u64), s));
            GROVE_TRY(A.get(&dout, total, "octree query matches"));
            GROVE_TRY(A.get(&dsorted, total, "octree sorted matches"));
            if (radii)
                query_kernel<true><<<blocks_for(nq), kBlock, 0, s>>>(T, dq, dr, nq, doff, NULL,
                                                                     dout);
            else
                query_kernel<false><<<blocks_for(nq), kBlock, 0, s>>>(T, dq, dr, nq, doff, NULL,
                                                                      dout);
            GROVE_CUDA_LAUNCHED(ctx, "octree query write kernel");
            size_t tb = 0;
            void *tmp = NULL;
            GROVE_CUDA_TRY(ctx, cub::DeviceSegmentedSort::SortKeys(NULL, tb, dout, dsorted,
                                                                   (int64_t)total, (int64_t)nq,
                                                                   doff, doff + 1, s),
                           "octree query row sort (size)");
            GROVE_TRY(A.get((char **)&tmp, tb, "octree query sort scratch"));
            GROVE_CUDA_TRY(ctx, cub::DeviceSegmentedSort::SortKeys(tmp, tb, dout, dsorted,
                                                                   (int64_t)total, (int64_t)nq,
                                                                   doff, doff + 1, s),
                           "octree query row sort");
            GROVE_TRY(grove__cuda_d2h(ctx, ind, dsorted, total * sizeof *ind, s));
            GROVE_TRY(grove__cuda_sync(ctx, s, "octree query"));
        }
    } else {
        ind = (uint32_t *)malloc(sizeof *ind);
        if (!ind) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "octree query: out of memory");
    }
    out->num_queries = nq;
    out->offsets = off;
    out->indices = ind;
    off = NULL;
    ind = NULL;
    return GROVE_OK;
}

} /* namespace */

extern "C" grove_status grove__ot_build_cuda_device(grove_ctx *ctx, const double *d_xyz,
                                                    grove_octree *t, grove_octree_stats *stats)
{
    const double t0 = grove__ot_now_ms();
    GROVE_TRY(grove__cuda_use(ctx));
    /* the build's scratch carved from one block of the pool */
    grove__cuda_pool_prepare(ctx, kPoolBytesPerPoint * t->n, ctx->stream);
    Build B(ctx, t);
    const size_t n = t->n;
    /* the cube: box on the device, cube on the host with the CPU backend's function */
    grove_status st = device_cube(B, d_xyz);
    if (st == GROVE_OK) st = build_init(B);
    if (st == GROVE_OK) st = build_points_on_device(B, d_xyz);
    const double t1 = grove__ot_now_ms();
    if (st == GROVE_OK) st = finish(B, d_xyz, stats);
    if (st != GROVE_OK) {
        free_tree_device(t);
        return st;
    }
    if (stats) {
        stats->ms_count = t1 - t0;
        stats->batches = n ? 1 : 0;
        stats->ms_total = grove__ot_now_ms() - t0;
    }
    if (t->opts.progress) t->opts.progress(t->opts.progress_user, n, n);
    return GROVE_OK;
}

/* The pool of a counted build, copied to the host for grove__ot_build_cpu_from_pool. */
struct HostPool {
    uint32_t *child, *count;
    uint8_t *depth;
    size_t size;
    HostPool() : child(NULL), count(NULL), depth(NULL), size(0) {}
    ~HostPool()
    {
        free(child);
        free(count);
        free(depth);
    }
};

static grove_status save_pool(Build &B, HostPool &H)
{
    const size_t P = B.pool_size;
    H.size = P;
    H.child = (uint32_t *)malloc(P * sizeof *H.child);
    H.count = (uint32_t *)malloc(P * sizeof *H.count);
    H.depth = (uint8_t *)malloc(P);
    if (!H.child || !H.count || !H.depth)
        return grove__error(B.ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "octree (CUDA): out of memory for a pool of %zu nodes", P);
    void *const h[3] = {H.child, H.count, H.depth};
    const void *const d[3] = {B.P.child, B.P.count, B.P.depth};
    const size_t bytes[3] = {P * sizeof *H.child, P * sizeof *H.count, P};
    return grove__cuda_fetchv(B.ctx, 3, h, d, bytes, B.A.s, "octree node pool");
}

/* Counts the host points xyz batch by batch on the GPU (steps 1-3), then finishes the tree
 * there when it fits (*fallback = 0), or leaves the counted pool in H (*fallback = 1) when the
 * later phases ran out of device memory. A shortage during the counting itself is returned. */
static grove_status count_and_finish(grove_ctx *ctx, const double *xyz, grove_octree *t,
                                     grove_octree_stats *stats, HostPool &H, uint32_t *fallback)
{
    const double t0 = grove__ot_now_ms();
    const size_t n = t->n;
    Build B(ctx, t);
    const size_t bs = t->opts.batch < n ? t->opts.batch : (n ? n : 1);
    Pinned stage;
    double *dbatch = NULL;
    grove_status st = build_init(B);
    if (st == GROVE_OK && n) {
        /* two staging halves: the host fills one while the GPU counts the other */
        if (cudaMallocHost(&stage.p, 2 * 3 * bs * sizeof(double)) != cudaSuccess) {
            cudaGetLastError();
            st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                              "octree (CUDA): cannot pin %zu bytes of host staging memory",
                              2 * 3 * bs * sizeof(double));
        }
        if (st == GROVE_OK) st = B.A.get(&dbatch, 3 * bs, "octree batch coordinates");
        double *half[2] = {(double *)stage.p, (double *)stage.p + 3 * bs};
        if (st == GROVE_OK) memcpy(half[0], xyz, 3 * (bs < n ? bs : n) * sizeof(double));
        for (size_t b = 0, k = 0; st == GROVE_OK && b < n; b += bs, k++) {
            const size_t m = n - b < bs ? n - b : bs;
            st = grove__cuda_h2d(ctx, dbatch, half[k & 1], 3 * m * sizeof(double), B.A.s);
            if (st != GROVE_OK) break;
            st = quantize_batch(B, dbatch, b, m);
            if (st != GROVE_OK) break;
            /* the previous use of the other half (batch k - 1's copy) has completed: the
             * host synchronized on its spill counts */
            if (b + m < n) {
                const size_t m2 = n - b - m < bs ? n - b - m : bs;
                memcpy(half[(k + 1) & 1], xyz + 3 * (b + m), 3 * m2 * sizeof(double));
            }
            st = count_batch(B, b, b + m);
            stats->batches++;
            if (st == GROVE_OK && t->opts.progress)
                t->opts.progress(t->opts.progress_user, b + m, n);
        }
    }
    if (st != GROVE_OK) return st;
    /* the batch's coordinates are not needed any more: room for the later phases */
    B.A.put(dbatch);
    stats->ms_count = grove__ot_now_ms() - t0;
    stats->spill_rounds = B.spill_rounds;
    st = finish(B, NULL, stats);
    if (st == GROVE_ERR_DEVICE_OUT_OF_MEMORY) {
        /* what finish() placed on the device goes; the pool it only read */
        free_tree_device(t);
        *fallback = 1;
        return save_pool(B, H);
    }
    if (st == GROVE_OK) st = download(ctx, t);
    return st;
}

/* The caller's progress callback, kept monotone: a build that falls back to the CPU backend
 * after some batches were counted on the GPU reports its own batches from the start, and those
 * calls are dropped until it passes what was reported. */
struct Progress {
    void (*fn)(void *, uint64_t, uint64_t);
    void *user;
    uint64_t last;
    bool any;
};

static void progress_forward(void *u, uint64_t done, uint64_t total)
{
    Progress *p = (Progress *)u;
    if (p->any && done <= p->last) return;
    p->any = true;
    p->last = done;
    p->fn(p->user, done, total);
}

extern "C" grove_status grove__ot_build_cuda(grove_ctx *ctx, const double *xyz, grove_octree *t,
                                             grove_octree_stats *stats)
{
    const double t0 = grove__ot_now_ms();
    GROVE_TRY(grove__cuda_use(ctx));
    const size_t n = t->n;
    uint32_t fallback = 0;
    HostPool H;
    Progress pr = {t->opts.progress, t->opts.progress_user, 0, false};
    if (pr.fn) {
        t->opts.progress = progress_forward;
        t->opts.progress_user = &pr;
    }
    grove_status st = count_and_finish(ctx, xyz, t, stats, H, &fallback);
    free_tree_device(t);
    if (st == GROVE_ERR_DEVICE_OUT_OF_MEMORY && fallback == 0) {
        /* not even the counting fits: the CPU backend builds the same tree */
        memset(stats, 0, sizeof *stats);
        stats->host_fallback = 2;
        st = grove__ot_build_cpu(ctx, xyz, t, stats);
    } else if (st == GROVE_OK && fallback) {
        /* the failed attempt and the pool's copy count as placement */
        stats->ms_place = grove__ot_now_ms() - t0 - stats->ms_count;
        stats->ms_lod = 0;
        stats->host_fallback = 1;
        st = grove__ot_build_cpu_from_pool(ctx, xyz, t, H.child, H.count, H.depth, H.size, stats);
    }
    t->opts.progress = pr.fn;
    t->opts.progress_user = pr.user;
    if (st != GROVE_OK) return st;
    stats->ms_total = grove__ot_now_ms() - t0;
    if (n == 0 && pr.fn && !pr.any) pr.fn(pr.user, 0, 0);
    return GROVE_OK;
}

extern "C" grove_status grove__ot_download_cuda(grove_ctx *ctx, grove_octree *t)
{
    if (t->nodes || !t->d_nodes) return GROVE_OK;
    GROVE_TRY(grove__cuda_use(t->dev_ctx ? t->dev_ctx : ctx));
    return download(t->dev_ctx ? t->dev_ctx : ctx, t);
}

extern "C" void grove__ot_free_device(grove_octree *t)
{
    if (t) free_tree_device(t);
}

extern "C" grove_status grove__ot_query_boxes_cuda(grove_ctx *ctx, const grove_octree *t,
                                                   const double *boxes, size_t nq,
                                                   grove_query_result *out)
{
    memset(out, 0, sizeof *out);
    GROVE_TRY(grove__cuda_use(ctx));
    return run_query(ctx, t, boxes, 6, NULL, nq, out);
}

extern "C" grove_status grove__ot_query_radius_cuda(grove_ctx *ctx, const grove_octree *t,
                                                    const double *centres, const double *radii,
                                                    size_t nq, grove_query_result *out)
{
    memset(out, 0, sizeof *out);
    GROVE_TRY(grove__cuda_use(ctx));
    return run_query(ctx, t, centres, 3, radii, nq, out);
}

