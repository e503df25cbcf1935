/*
 * octree_place_cuda.cu - the placement phase of the CUDA octree build, after the counting:
 *   4. layout  the host walks the (small) node pool breadth-first, children in octant order,
 *              dropping empty octants, and numbers the final nodes; the build from host memory
 *              puts its points in Morton order now;
 *   5-6.       the entries' (node, Morton position) pairs (octree_lod_cuda.cu): the leaves'
 *              points in input order, then the samples in input order;
 *   7. place   one stable radix sort of all pairs by node: every node's entries (a leaf's
 *              points or an inner node's sample) become one run in ascending input order, in
 *              node order, so entry e is sorted pair e; the runs' starts give begin/end and a
 *              gather writes index (perm of the position) and xyz (the Morton-ordered copy of
 *              the points that the counting phase made).
 * Also the download of a device tree and its release.
 */
#include "octree_cuda_internal.cuh"

using namespace grove__otc;

namespace
{

__global__ void bounds_kernel(const uint32_t *__restrict__ skey, size_t m, u64 *__restrict__ begin)
{
    const size_t i = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (i >= m) return;
    if (i == 0 || skey[i] != skey[i - 1]) begin[skey[i]] = i;
}

/* Entry e is the point at Morton position pos[e]. A node's entries come from one range of
 * positions, so for the leaves and the deep samples (most entries) the reads of perm and xyzm
 * stay in a window that L2 holds, instead of a random read of the input per entry. */
__global__ void gather_kernel(const uint32_t *__restrict__ pos, size_t m,
                              const uint32_t *__restrict__ perm, const double *__restrict__ xyzm,
                              uint32_t *__restrict__ index, double *__restrict__ exyz)
{
    const size_t e = blockIdx.x * (size_t)kBlock + threadIdx.x;
    if (e >= m) return;
    const size_t j = pos[e];
    index[e] = perm[j];
    if (xyzm) {
        exyz[3 * e] = xyzm[3 * j];
        exyz[3 * e + 1] = xyzm[3 * j + 1];
        exyz[3 * e + 2] = xyzm[3 * j + 2];
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
    grove_status st = GROVE_OK;
    if (!child || !count || !order || !parent || !L.nodes || !L.final_of) {
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
    const int kb = bits_for(nn ? nn - 1 : 0);
    const int g = grove__ot_log2_grid(t->opts.lod_grid);
    const bool lod = t->opts.lod_grid && L.inner_depth >= 0 && n;
    if (!B.perm) GROVE_TRY(morton_order(B, true));
    const double t_layout = grove__ot_now_ms() - t0;
    t0 = grove__ot_now_ms();
    /* the deepest voxels are cells of inner_depth + g levels */
    if (lod && L.inner_depth + g > 21) GROVE_TRY(refine_order(B, L.inner_depth + g));
    uint32_t *key, *val;
    size_t S = 0;
    GROVE_TRY(entry_pairs(B, L, &key, &val, &S));
    B.A.put(B.leaf);
    B.A.put(B.skey);
    B.A.put(B.rkey);
    B.A.put(B.q);
    B.leaf = B.q = NULL;
    B.skey = B.rkey = NULL;
    if (lod) GROVE_TRY(grove__cuda_sync(ctx, s, "octree entry keys"));
    const double t_lod = grove__ot_now_ms() - t0;
    t0 = grove__ot_now_ms();

    /* 7. one stable sort by node; entry e is sorted item e */
    const size_t ne = n + S;
    uint32_t *skey, *sval;
    u64 *dbegin;
    GROVE_TRY(B.A.get(&skey, ne, "octree sorted entry keys"));
    GROVE_TRY(B.A.get(&sval, ne, "octree sorted entry positions"));
    GROVE_TRY(sort_pairs(B, key, skey, val, sval, ne, 0, kb, "octree entry sort"));
    B.A.put(key);
    B.A.put(val);
    GROVE_TRY(B.A.get(&dbegin, nn, "octree node begins"));
    GROVE_CUDA_TRY(ctx, cudaMemsetAsync(dbegin, 0xFF, nn * sizeof(u64), s), "octree begins");
    if (ne) {
        bounds_kernel<<<blocks_for(ne), kBlock, 0, s>>>(skey, ne, dbegin);
        GROVE_CUDA_LAUNCHED(ctx, "octree node bounds kernel");
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
        if (!B.xyzm)
            return grove__error(ctx, GROVE_ERR_INTERNAL, "octree (CUDA): no ordered coordinates");
        GROVE_TRY(grove__cuda_alloc(ctx, (void **)&d_exyz, 3 * ne * sizeof(double), s,
                                    "octree entry coordinates"));
        t->d_xyz = d_exyz;
    }
    if (ne) {
        gather_kernel<<<blocks_for(ne), kBlock, 0, s>>>(sval, ne, B.perm, d_exyz ? B.xyzm : NULL,
                                                        d_index, d_exyz);
        GROVE_CUDA_LAUNCHED(ctx, "octree gather kernel");
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
        u64 next = ne;
        for (size_t k = nn; k-- > 0;) {
            Node *nd = &L.nodes[k];
            if (hb[k] != kEmpty) {
                nd->begin = hb[k];
                nd->end = next;
                next = hb[k];
            } else {
                nd->begin = nd->end = next;
            }
            if (nd->first_child == kNone && nd->end - nd->begin != nd->total)
                return grove__error(ctx, GROVE_ERR_INTERNAL,
                                    "octree (CUDA): leaf %zu has %llu entries for %llu points", k,
                                    (unsigned long long)(nd->end - nd->begin),
                                    (unsigned long long)nd->total);
        }
    }
    GROVE_TRY(grove__cuda_alloc(ctx, (void **)&d_tnodes, nn * sizeof(Node), s, "octree nodes"));
    t->d_nodes = d_tnodes;
    GROVE_TRY(grove__cuda_h2d(ctx, d_tnodes, L.nodes, nn * sizeof(Node), s));
    t->depth = L.depth;
    GROVE_TRY(grove__cuda_sync(ctx, s, "octree gather"));
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
