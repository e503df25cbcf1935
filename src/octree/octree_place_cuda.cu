/*
 * octree_place_cuda.cu - the placement phase of the CUDA octree build, after the counting:
 *   4. layout  the host walks the (small) node pool breadth-first, children in octant order,
 *              dropping empty octants, numbers the final nodes and finds where each starts in
 *              Morton order; the build from host memory puts its points in Morton order now,
 *              and the order is refined below level 21 where points that close differ;
 *   5.         the samples' marks (octree_lod_cuda.cu);
 *   6. place   every position's entries written in one pass. Breadth-first, the nodes of one
 *              depth are in Morton order, and so are their entries (octree.h), so the entries
 *              of depth d are the positions that have one at depth d (its leaf's depth or a
 *              voxel it wins), in position order, after those of the shallower depths: entry
 *              slot = exclusive scan, depth-major, of the entries per (depth, tile of
 *              positions) + the rank inside the tile (warp ballots). A node starts at the slot
 *              its first position would take at its depth (also for an inner node without
 *              entries), and ends where the next node starts.
 * Also the download of a device tree and its release.
 */
#include <cub/device/device_scan.cuh>

#include "octree_cuda_internal.cuh"

using namespace grove__otc;

namespace
{

const int kItems = 8;                /* positions a lane holds, 32 apart */
const int kTile = 32 * kItems;       /* positions a warp holds */

struct PlaceArgs {
    const uint32_t *marks;    /* sample wins by position (NULL: none) */
    const uint32_t *leaf;     /* pool leaf by position */
    const uint8_t *pdepth;    /* pool id -> depth */
    const uint32_t *final_of; /* pool id -> final node */
    const uint32_t *parent;   /* final node -> its parent (kNone for the root) */
    const uint8_t *ndepth;    /* final node -> depth */
    const u64 *dstart;        /* final node -> first position */
    const uint32_t *perm;     /* position -> input position */
    const double *xyzm;       /* coordinates by position (NULL: the host copies them) */
    size_t n, tiles;
    int depths;               /* node depths 0..depths-1 */
    u64 *cnt;                 /* depths x tiles (+1) entries, then their exclusive scan: */
    const u64 *slot0;         /* the first slot of (depth, tile) */
    uint32_t *index;
    double *exyz;
    u64 *begin; /* per final node */
};

/* Position j's entry mask: bit d, it is an entry of its node at depth d. */
__device__ __forceinline__ uint32_t entry_mask(const PlaceArgs &a, size_t j)
{
    return (a.marks ? a.marks[j] : 0u) | 1u << a.pdepth[a.leaf[j]];
}

/* Entries per (depth, tile). */
__global__ void tile_count_kernel(PlaceArgs a)
{
    const int lane = threadIdx.x & 31;
    const size_t tile = (blockIdx.x * (size_t)kBlock + threadIdx.x) >> 5;
    if (tile >= a.tiles) return; /* whole warps only */
    const size_t base = tile * kTile;
    uint32_t e[kItems], any = 0;
    for (int k = 0; k < kItems; k++) {
        const size_t j = base + (size_t)k * 32 + lane;
        e[k] = j < a.n ? entry_mask(a, j) : 0u;
        any |= e[k];
    }
    any = __reduce_or_sync(~0u, any);
    for (int d = 0; d < a.depths; d++) {
        uint32_t c = 0;
        if (any >> d & 1u)
            for (int k = 0; k < kItems; k++) c += e[k] >> d & 1u;
        c = __reduce_add_sync(~0u, c);
        if (lane == 0) a.cnt[(size_t)d * a.tiles + tile] = c;
    }
}

/* Writes every entry of the tile's positions, depth by depth: lanes hold consecutive positions,
 * so a depth's entries of one step are consecutive slots; their coordinates go through shared
 * memory so that every store of the warp covers consecutive doubles. Each position's
 * coordinates are read once (registers), not once per entry: re-reading them per depth missed
 * L2 with every warp in flight holding its tile. */
__global__ void __launch_bounds__(kBlock) place_kernel(PlaceArgs a)
{
    __shared__ double stage_all[kBlock / 32][3 * 32];
    double *stage = stage_all[threadIdx.x >> 5];
    const int lane = threadIdx.x & 31;
    const size_t tile = (blockIdx.x * (size_t)kBlock + threadIdx.x) >> 5;
    if (tile >= a.tiles) return;
    const size_t base = tile * kTile;
    const uint32_t lt = (1u << lane) - 1u;
    uint32_t e[kItems], in[kItems], any = 0;
    double x[kItems][3];
    for (int k = 0; k < kItems; k++) {
        const size_t j = base + (size_t)k * 32 + lane;
        const bool ok = j < a.n;
        e[k] = ok ? entry_mask(a, j) : 0u;
        in[k] = ok ? a.perm[j] : 0u;
        for (int c = 0; c < 3; c++) x[k][c] = ok && a.xyzm ? a.xyzm[3 * j + c] : 0.0;
        any |= e[k];
    }
    any = __reduce_or_sync(~0u, any);
    for (uint32_t m = any; m; m &= m - 1) {
        const int d = __ffs((int)m) - 1;
        u64 at = a.slot0[(size_t)d * a.tiles + tile];
        for (int k = 0; k < kItems; k++) {
            const bool has = e[k] >> d & 1u;
            const uint32_t bal = __ballot_sync(~0u, has);
            const int r = __popc(bal & lt), cnt = __popc(bal);
            if (has) a.index[at + (u64)r] = in[k];
            if (a.xyzm && cnt) {
                if (has)
                    for (int c = 0; c < 3; c++) stage[3 * r + c] = x[k][c];
                __syncwarp();
                for (int i = lane; i < 3 * cnt; i += 32) a.exyz[3 * at + (u64)i] = stage[i];
                __syncwarp();
            }
            at += (u64)cnt;
        }
    }
    /* The nodes that start here (rare: a leaf's first position, and its ancestors' when it is
     * their first too) begin at the slot this position would take at their depth. */
    for (int k = 0; k < kItems; k++) {
        const size_t j = base + (size_t)k * 32 + lane;
        if (j >= a.n) break;
        uint32_t x = a.final_of[a.leaf[j]];
        while (x != kNone && a.dstart[x] == j) {
            const int d = a.ndepth[x];
            u64 o = a.slot0[(size_t)d * a.tiles + tile];
            for (size_t i = base; i < j; i++) o += entry_mask(a, i) >> d & 1u;
            a.begin[x] = o;
            x = a.parent[x];
        }
    }
}

/* Step 4 on the host: the pool holds a few nodes per max_points points. */
grove_status layout(Build &B, HostLayout &L)
{
    grove_ctx *ctx = B.ctx;
    const size_t P = B.pool_size;
    uint32_t *child = (uint32_t *)malloc(P * sizeof *child);
    uint32_t *count = (uint32_t *)malloc(P * sizeof *count);
    uint32_t *order = (uint32_t *)malloc(P * sizeof *order);
    uint32_t *parent = (uint32_t *)malloc(P * sizeof *parent);
    L.parent = parent;
    L.nodes = (Node *)calloc(P, sizeof *L.nodes);
    L.final_of = (uint32_t *)malloc(P * sizeof *L.final_of);
    L.dstart = (uint64_t *)malloc(P * sizeof *L.dstart);
    grove_status st = GROVE_OK;
    if (!child || !count || !order || !parent || !L.nodes || !L.final_of || !L.dstart) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "octree (CUDA): out of memory for %zu "
                          "nodes' layout", P);
        goto _end;
    }
    st = grove__cuda_d2h(ctx, child, B.P.child, P * sizeof *child, B.A.s);
    if (st == GROVE_OK) st = grove__cuda_d2h(ctx, count, B.P.count, P * sizeof *count, B.A.s);
    if (st == GROVE_OK) st = grove__cuda_sync(ctx, B.A.s, "octree node pool download");
    if (st != GROVE_OK) goto _end;
    {
        size_t cnt = 1;
        memset(L.final_of, 0xFF, P * sizeof *L.final_of);
        order[0] = 0;
        L.final_of[0] = 0;
        parent[0] = kNone;
        for (size_t k = 0; k < cnt; k++) {
            Node *nd = &L.nodes[k];
            const uint32_t pid = order[k];
            nd->first_child = kNone;
            if (nd->depth > L.depth) L.depth = nd->depth;
            if (child[pid] == kNone) {
                nd->total = count[pid];
                continue;
            }
            if (nd->depth > L.inner_depth) L.inner_depth = nd->depth;
            nd->total = 0;
            for (unsigned o = 0; o < 8; o++) {
                const uint32_t c = child[pid] + o;
                if (count[c] == 0) continue;
                Node *cn = &L.nodes[cnt];
                if (nd->child_mask == 0) nd->first_child = (uint32_t)cnt;
                nd->child_mask |= (uint8_t)(1u << o);
                cn->depth = (uint8_t)(nd->depth + 1);
                cn->octant = (uint8_t)o;
                cn->cell[0] = 2 * nd->cell[0] + (o & 1u);
                cn->cell[1] = 2 * nd->cell[1] + ((o >> 1) & 1u);
                cn->cell[2] = 2 * nd->cell[2] + ((o >> 2) & 1u);
                order[cnt] = c;
                parent[cnt] = (uint32_t)k;
                L.final_of[c] = (uint32_t)cnt;
                cnt++;
            }
        }
        for (size_t k = cnt; k-- > 1;) L.nodes[parent[k]].total += L.nodes[k].total;
        L.num_nodes = cnt;
        /* in Morton order a node's points follow its earlier siblings' */
        L.dstart[0] = 0;
        for (size_t k = 0; k < cnt; k++) {
            const Node *nd = &L.nodes[k];
            uint64_t at = L.dstart[k];
            if (nd->first_child == kNone) continue;
            for (uint32_t c = nd->first_child, e = c + (uint32_t)__builtin_popcount(nd->child_mask);
                 c < e; c++) {
                L.dstart[c] = at;
                at += L.nodes[c].total;
            }
        }
    }
_end:
    free(child);
    free(count);
    free(order);
    return st;
}

} /* namespace */

namespace grove__otc
{

/* Copies host array h (count elements) into a new arena buffer. */
template <typename T>
grove_status upload(Build &B, T **d, const T *h, size_t count, const char *what)
{
    GROVE_TRY(B.A.get(d, count, what));
    return grove__cuda_h2d(B.ctx, *d, h, count * sizeof(T), B.A.s);
}

grove_status finish(Build &B, const double *d_xyz, grove_octree_stats *stats)
{
    grove_ctx *ctx = B.ctx;
    grove_octree *t = B.t;
    const cudaStream_t s = B.A.s;
    const size_t n = B.n;
    HostLayout L;
    double t0 = grove__ot_now_ms();

    GROVE_TRY(layout(B, L));
    const size_t nn = L.num_nodes;
    if (!B.perm) GROVE_TRY(morton_order(B, true));
    bool refine = false;
    GROVE_TRY(needs_refining(B, &refine));
    const double t_layout = grove__ot_now_ms() - t0;
    t0 = grove__ot_now_ms();
    if (refine) GROVE_TRY(refine_order(B));
    uint32_t *marks = NULL;
    GROVE_TRY(sample_marks(B, L, &marks));
    B.A.put(B.skey);
    B.A.put(B.rkey);
    B.A.put(B.q);
    B.q = NULL;
    B.skey = B.rkey = NULL;
    if (marks) GROVE_TRY(grove__cuda_sync(ctx, s, "octree samples"));
    const double t_lod = grove__ot_now_ms() - t0;
    t0 = grove__ot_now_ms();

    /* 6. the entries per (depth, tile), their scan, then every entry in place */
    PlaceArgs a;
    memset(&a, 0, sizeof a);
    a.marks = marks;
    a.leaf = B.leaf;
    a.pdepth = B.P.depth;
    a.perm = B.perm;
    a.xyzm = d_xyz ? B.xyzm : NULL;
    a.n = n;
    a.tiles = (n + kTile - 1) / kTile;
    a.depths = L.depth + 1;
    if (d_xyz && !B.xyzm)
        return grove__error(ctx, GROVE_ERR_INTERNAL, "octree (CUDA): no ordered coordinates");
    size_t ne = 0;
    u64 *slot0 = NULL, *dbegin;
    GROVE_TRY(B.A.get(&dbegin, nn, "octree node begins"));
    GROVE_CUDA_TRY(ctx, cudaMemsetAsync(dbegin, n ? 0xFF : 0, nn * sizeof(u64), s),
                   "octree begins");
    if (n) {
        const size_t nc = (size_t)a.depths * a.tiles + 1;
        size_t tb = 0;
        void *tmp = NULL;
        GROVE_TRY(B.A.get(&a.cnt, nc, "octree entries per tile"));
        GROVE_TRY(B.A.get(&slot0, nc, "octree first slots"));
        GROVE_CUDA_TRY(ctx, cudaMemsetAsync(a.cnt + nc - 1, 0, sizeof(u64), s), "octree counts");
        tile_count_kernel<<<blocks_for(32 * a.tiles), kBlock, 0, s>>>(a);
        GROVE_CUDA_LAUNCHED(ctx, "octree tile count kernel");
        GROVE_CUDA_TRY(ctx, cub::DeviceScan::ExclusiveSum(NULL, tb, a.cnt, slot0, nc, s),
                       "octree entry slots (size)");
        GROVE_TRY(B.A.get((char **)&tmp, tb, "octree entry slot scratch"));
        GROVE_CUDA_TRY(ctx, cub::DeviceScan::ExclusiveSum(tmp, tb, a.cnt, slot0, nc, s),
                       "octree entry slots");
        B.A.put(tmp);
        u64 total = 0;
        GROVE_TRY(grove__cuda_d2h(ctx, &total, slot0 + nc - 1, sizeof total, s));
        GROVE_TRY(grove__cuda_sync(ctx, s, "octree entry count"));
        ne = (size_t)total;
        B.A.put(a.cnt);
        a.cnt = NULL;
    }
    uint32_t *d_index = NULL;
    double *d_exyz = NULL;
    Node *d_tnodes = NULL;
    t->dev_ctx = ctx;
    t->num_nodes = nn;
    t->num_entries = ne;
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&d_index, ne * sizeof(uint32_t), s,
                                "octree entry indices"));
    t->d_index = d_index;
    if (d_xyz) {
        GROVE_TRY(grove__cuda_alloc(ctx, (void **)&d_exyz, 3 * ne * sizeof(double), s,
                                    "octree entry coordinates"));
        t->d_xyz = d_exyz;
    }
    if (n) {
        uint32_t *d_final_of, *d_parent;
        uint8_t *d_ndepth;
        u64 *d_dstart;
        uint8_t *hd = (uint8_t *)malloc(nn);
        if (!hd)
            return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                "octree (CUDA): out of memory for %zu node depths", nn);
        for (size_t k = 0; k < nn; k++) hd[k] = L.nodes[k].depth;
        grove_status st = upload(B, &d_ndepth, hd, nn, "octree node depths");
        free(hd); /* pageable copies have been staged when they return */
        GROVE_TRY(st);
        GROVE_TRY(upload(B, &d_final_of, L.final_of, B.pool_size, "octree node map"));
        GROVE_TRY(upload(B, &d_parent, L.parent, nn, "octree node parents"));
        GROVE_TRY(upload(B, &d_dstart, (const u64 *)L.dstart, nn, "octree node starts"));
        a.final_of = d_final_of;
        a.parent = d_parent;
        a.ndepth = d_ndepth;
        a.dstart = d_dstart;
        a.slot0 = slot0;
        a.index = d_index;
        a.exyz = d_exyz;
        a.begin = dbegin;
        place_kernel<<<blocks_for(32 * a.tiles), kBlock, 0, s>>>(a);
        GROVE_CUDA_LAUNCHED(ctx, "octree place kernel");
    }
    {
        u64 *hb = (u64 *)malloc(nn * sizeof *hb);
        struct F {
            u64 *p;
            ~F() { free(p); }
        } fg = {hb};
        if (!hb) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "octree (CUDA): out of memory");
        GROVE_TRY(grove__cuda_d2h(ctx, hb, dbegin, nn * sizeof *hb, s));
        GROVE_TRY(grove__cuda_sync(ctx, s, "octree node begins"));
        for (size_t k = 0; k < nn; k++) {
            Node *nd = &L.nodes[k];
            nd->begin = hb[k];
            nd->end = k + 1 < nn ? hb[k + 1] : ne;
            if (hb[k] == kEmpty || nd->end < nd->begin || nd->end > ne ||
                (nd->first_child == kNone && nd->end - nd->begin != nd->total))
                return grove__error(ctx, GROVE_ERR_INTERNAL,
                                    "octree (CUDA): node %zu has entries [%llu, %llu) of %zu "
                                    "(%llu points)", k, (unsigned long long)nd->begin,
                                    (unsigned long long)nd->end, ne,
                                    (unsigned long long)nd->total);
        }
    }
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&d_tnodes, nn * sizeof(Node), s, "octree nodes"));
    t->d_nodes = d_tnodes;
    GROVE_TRY(grove__cuda_h2d(ctx, d_tnodes, L.nodes, nn * sizeof(Node), s));
    t->depth = L.depth;
    GROVE_TRY(grove__cuda_sync(ctx, s, "octree placement"));
    if (stats) {
        stats->ms_place = t_layout + (grove__ot_now_ms() - t0);
        stats->ms_lod = t_lod;
        stats->spill_rounds = B.spill_rounds;
    }
    return GROVE_OK;
}

void free_tree_device(grove_octree *t)
{
    grove_ctx *c = t->dev_ctx;
    if (!c) return;
    grove__cuda_use(c);
    grove__cuda_free(c, t->d_nodes, t->num_nodes * sizeof(Node), c->stream);
    grove__cuda_free(c, t->d_index, t->num_entries ? t->num_entries * sizeof(uint32_t) : 0,
                     c->stream);
    grove__cuda_free(c, t->d_xyz, t->num_entries ? 3 * t->num_entries * sizeof(double) : 0,
                     c->stream);
    t->d_nodes = NULL;
    t->d_index = NULL;
    t->d_xyz = NULL;
    t->dev_ctx = NULL;
}

grove_status download(grove_ctx *ctx, grove_octree *t)
{
    const size_t nn = t->num_nodes, ne = t->num_entries;
    const cudaStream_t s = (cudaStream_t)ctx->stream;
    Node *nodes = (Node *)malloc((nn ? nn : 1) * sizeof *nodes);
    uint32_t *index = (uint32_t *)malloc((ne ? ne : 1) * sizeof *index);
    double *xyz = (double *)malloc((ne ? 3 * ne : 1) * sizeof *xyz);
    grove_status st = GROVE_OK;
    if (!nodes || !index || !xyz) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "octree download: out of memory for %zu nodes and %zu entries", nn, ne);
        goto _fail;
    }
    grove__prefault(index, ne * sizeof *index, grove__threads(ctx));
    st = grove__cuda_d2h(ctx, nodes, t->d_nodes, nn * sizeof *nodes, s);
    if (st == GROVE_OK) st = grove__cuda_d2h(ctx, index, t->d_index, ne * sizeof *index, s);
    if (st == GROVE_OK && t->d_xyz) {
        grove__prefault(xyz, 3 * ne * sizeof *xyz, grove__threads(ctx));
        st = grove__cuda_d2h(ctx, xyz, t->d_xyz, 3 * ne * sizeof *xyz, s);
    }
    if (st == GROVE_OK) st = grove__cuda_sync(ctx, s, "octree download");
    if (st != GROVE_OK) goto _fail;
    t->nodes = nodes;
    t->index = index;
    t->xyz = xyz;
    return GROVE_OK;
_fail:
    free(nodes);
    free(index);
    free(xyz);
    return st;
}

} /* namespace grove__otc */
