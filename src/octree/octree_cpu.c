/*
 * octree_cpu.c - the CPU backend of the octree build (C11 + OpenMP), the reference the CUDA
 * backend matches byte for byte.
 *
 * The build follows the batched design of the GPU build: per batch, every point of the batch
 * finds its leaf in the tree built so far, the leaves' counters grow by the number of points
 * that reached them (each thread adds a run of equal leaves with one atomic, the CPU's
 * counterpart of the warp-aggregated atomicAdd), and a leaf whose counter crosses max_points
 * is listed to spill. Each listed leaf gets its 8 children; the points it held, from earlier
 * batches and this one, move one level down (every point keeps its leaf id) and are counted
 * again, until no leaf is over. Counters only grow, so a node splits exactly when its final
 * subtree holds more than max_points: the tree is octree.h's, whatever the batch size or the
 * thread timing. Then the nodes are laid out breadth-first with the empty octants pruned, the
 * points are put in Morton order (every node one range of it: a leaf's entries), and every
 * inner node gets its level-of-detail sample, listed in that order too.
 */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../prim/prim_cpu.h"              /* grove__cpu_sort */
#include "../quadtree/quadtree_internal.h" /* grove__qt_sort_u32 */
#include "octree_internal.h"

#define NONE UINT32_MAX

/* A node while the tree grows: the count covers every batch so far. */
typedef struct bnode {
    uint64_t count;
    uint32_t child; /* first of its 8 children (consecutive, in octant order); NONE: a leaf */
    uint32_t fid;   /* index in the final (pruned, breadth-first) node array */
    uint8_t depth;
} bnode;

typedef struct build {
    grove_ctx *ctx;
    const grove_octree_opts *o;
    int nt;
    bnode *nodes;
    size_t num_nodes, cap_nodes;
    uint32_t *spill;     /* leaves that crossed max_points in the last count */
    size_t num_spill, cap_spill;
    uint32_t *q;         /* 3 grid coordinates per point */
    uint32_t *leaf;      /* each point's leaf (a bnode) */
} build;

/* Sets b's context, options and threads and allocates room for cap nodes and n points' grid
 * coordinates and leaves (b is zeroed first; what was allocated is freed by the caller). */
static grove_status build_alloc(build *b, grove_ctx *ctx, const grove_octree_opts *o, size_t n,
                                size_t cap)
{
    memset(b, 0, sizeof *b);
    b->ctx = ctx;
    b->o = o;
    b->nt = grove__threads(ctx);
    b->cap_nodes = cap;
    b->nodes = (bnode *)malloc(cap * sizeof *b->nodes);
    b->q = (uint32_t *)malloc((n ? 3 * n : 1) * sizeof *b->q);
    b->leaf = (uint32_t *)malloc((n ? n : 1) * sizeof *b->leaf);
    if (!b->nodes || !b->q || !b->leaf)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "grove_octree_build: out of memory for %zu points' grid coordinates", n);
    return GROVE_OK;
}

/* Points one thread counts as one run-aggregated chunk. */
#define COUNT_CHUNK 4096

/* Adds k points to leaf l; lists it when this addition takes it over the cap. */
static void add_count(build *b, uint32_t l, uint64_t k)
{
    uint64_t old;
    bnode *nd = &b->nodes[l];
#pragma omp atomic capture
    {
        old = nd->count;
        nd->count += k;
    }
    if (old <= b->o->max_points && old + k > b->o->max_points && nd->depth < b->o->max_depth) {
        size_t s;
#pragma omp atomic capture
        s = b->num_spill++;
        b->spill[s] = l;
    }
}

/* A run of consecutive points that reached the same leaf: one atomic for all of them. */
typedef struct run_t {
    uint32_t leaf;
    uint64_t len;
} run_t;

static void run_flush(build *b, run_t *r)
{
    if (r->len) add_count(b, r->leaf, r->len);
    r->len = 0;
}

static void run_push(build *b, run_t *r, uint32_t l)
{
    if (l != r->leaf) {
        run_flush(b, r);
        r->leaf = l;
    }
    r->len++;
}

/* The spill list can name each leaf once: room for all of them. */
static grove_status reserve_spill(build *b)
{
    if (b->cap_spill >= b->num_nodes) return GROVE_OK;
    free(b->spill);
    b->cap_spill = b->num_nodes + b->num_nodes / 2 + 16;
    b->spill = (uint32_t *)malloc(b->cap_spill * sizeof *b->spill);
    if (!b->spill)
        return grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "grove_octree_build: out of memory for a spill list of %zu nodes",
                            b->cap_spill);
    return GROVE_OK;
}

/* Quantizes the batch [b0, b1), finds each point's leaf and, when count is set, counts it. */
static void locate_and_count(build *b, const double *xyz, const double lo[3], double to_grid,
                             size_t b0, size_t b1, int count)
{
    size_t nchunks = (b1 - b0 + COUNT_CHUNK - 1) / COUNT_CHUNK;
#pragma omp parallel for num_threads(b->nt) schedule(static) if (nchunks > 1)
    for (size_t c = 0; c < nchunks; c++) {
        size_t e = b0 + (c + 1) * COUNT_CHUNK < b1 ? b0 + (c + 1) * COUNT_CHUNK : b1;
        run_t run = {NONE, 0};
        for (size_t i = b0 + c * COUNT_CHUNK; i < e; i++) {
            uint32_t *q = b->q + 3 * i, l = 0;
            for (int a = 0; a < 3; a++) q[a] = grove__ot_quantize(xyz[3 * i + a], lo[a], to_grid);
            while (b->nodes[l].child != NONE)
                l = b->nodes[l].child + grove__ot_octant(q, b->nodes[l].depth);
            b->leaf[i] = l;
            if (count) run_push(b, &run, l);
        }
        run_flush(b, &run);
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Gives every listed leaf its 8 children. Sorting the list first makes the node ids, though not
 * the final tree (which never depended on them), the same from run to run. */
static grove_status split_listed(build *b)
{
    qsort(b->spill, b->num_spill, sizeof *b->spill, cmp_u32);
    if (b->num_nodes + 8 * b->num_spill > (size_t)NONE - 1)
        return grove__error(b->ctx, GROVE_ERR_LIMIT,
                            "grove_octree_build: more than %u nodes; raise opts->max_points",
                            NONE - 1);
    if (b->num_nodes + 8 * b->num_spill > b->cap_nodes) {
        size_t cap = 2 * (b->num_nodes + 8 * b->num_spill);
        bnode *nn = (bnode *)realloc(b->nodes, cap * sizeof *nn);
        if (!nn)
            return grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                                "grove_octree_build: out of memory for %zu nodes", cap);
        b->nodes = nn;
        b->cap_nodes = cap;
    }
    for (size_t s = 0; s < b->num_spill; s++) {
        uint32_t l = b->spill[s], c = (uint32_t)b->num_nodes;
        for (int o = 0; o < 8; o++) {
            bnode *ch = &b->nodes[c + o];
            ch->count = 0;
            ch->child = NONE;
            ch->fid = NONE;
            ch->depth = (uint8_t)(b->nodes[l].depth + 1);
        }
        b->nodes[l].child = c;
        b->num_nodes += 8;
    }
    b->num_spill = 0;
    return reserve_spill(b);
}

/* Moves the points [0, end) of the leaves split last one level down and counts them there. */
static void move_down(build *b, size_t end)
{
    size_t nchunks = (end + COUNT_CHUNK - 1) / COUNT_CHUNK;
#pragma omp parallel for num_threads(b->nt) schedule(static) if (nchunks > 1)
    for (size_t c = 0; c < nchunks; c++) {
        size_t e = (c + 1) * COUNT_CHUNK < end ? (c + 1) * COUNT_CHUNK : end;
        run_t run = {NONE, 0};
        for (size_t i = c * COUNT_CHUNK; i < e; i++) {
            uint32_t l = b->leaf[i];
            const bnode *nd = &b->nodes[l];
            if (nd->child == NONE) continue;
            l = nd->child + grove__ot_octant(b->q + 3 * i, nd->depth);
            b->leaf[i] = l;
            run_push(b, &run, l);
        }
        run_flush(b, &run);
    }
}

/* ---- layout ---- */

/* Prunes the empty octants and numbers the nodes breadth-first, children in octant order. */
static grove_status lay_out_nodes(build *b, grove_octree *t, uint32_t **order_out)
{
    size_t nonempty = 1, len = 1;
    uint32_t *order;
    grove_octree_node *out;
    /* Points of later batches pass inner nodes without counting there: the subtree totals come
     * from the leaves (children always have larger ids than their parent). */
    for (size_t i = b->num_nodes; i-- > 0;) {
        bnode *u = &b->nodes[i];
        if (u->child == NONE) continue;
        u->count = 0;
        for (int o = 0; o < 8; o++) u->count += b->nodes[u->child + o].count;
    }
    for (size_t i = 1; i < b->num_nodes; i++) nonempty += b->nodes[i].count > 0;
    order = (uint32_t *)malloc(nonempty * sizeof *order);
    out = (grove_octree_node *)calloc(nonempty, sizeof *out);
    if (!order || !out) {
        free(order);
        free(out);
        return grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "grove_octree_build: out of memory for %zu nodes", nonempty);
    }
    order[0] = 0;
    t->depth = 0;
    for (size_t k = 0; k < len; k++) {
        const bnode *u = &b->nodes[order[k]];
        grove_octree_node *nd = &out[k];
        b->nodes[order[k]].fid = (uint32_t)k;
        nd->total = u->count;
        nd->depth = u->depth;
        nd->first_child = NONE;
        if (u->depth > t->depth) t->depth = u->depth;
        if (u->child == NONE) continue;
        nd->first_child = (uint32_t)len;
        for (unsigned o = 0; o < 8; o++) {
            grove_octree_node *ch;
            if (b->nodes[u->child + o].count == 0) continue;
            nd->child_mask |= (uint8_t)(1u << o);
            ch = &out[len];
            ch->octant = (uint8_t)o;
            for (int a = 0; a < 3; a++) ch->cell[a] = (nd->cell[a] << 1) | ((o >> a) & 1u);
            order[len++] = u->child + o;
        }
    }
    t->nodes = out;
    t->num_nodes = len;
    *order_out = order;
    return GROVE_OK;
}

/* Where each node's points start when the points are listed leaf by leaf in depth-first order
 * (which the Morton order of morton_perm does): a subtree is then one range. */
static void dfs_starts(const grove_octree *t, uint64_t *start)
{
    start[0] = 0;
    for (size_t k = 0; k < t->num_nodes; k++) {
        const grove_octree_node *nd = &t->nodes[k];
        uint64_t off = start[k];
        if (nd->first_child == NONE) continue;
        for (uint32_t c = nd->first_child, e = c + (uint32_t)__builtin_popcount(nd->child_mask);
             c < e; c++) {
            start[c] = off;
            off += t->nodes[c].total;
        }
    }
}

/* ---- level-of-detail samples ----
 * An inner node's voxels split by its children's octants (the top bit of a voxel coordinate is
 * the octant bit), so each (inner node, child) pair is an independent unit of work: the
 * child's points, one winner per voxel. */

typedef struct lod_unit {
    uint32_t node;     /* the inner node */
    uint32_t child;    /* the child whose points this unit reads */
    uint32_t thread;   /* where its winners went */
    uint64_t off, num; /* its winners in that thread's buffer */
} lod_unit;

typedef struct lod_thread {
    uint32_t *key; /* voxel, NONE when empty */
    uint64_t *val; /* (dist2 << 32) | input position: the smallest wins */
    size_t cap;
    uint64_t *dense; /* per voxel of a unit when the unit is dense enough: no probing */
    size_t cap_dense;
    uint32_t *win;
    size_t num_win, cap_win;
} lod_thread;

/* Voxels of a unit up to which a dense array (8 bytes a voxel) may replace the hash table. */
#define DENSE_MAX ((uint64_t)1 << 21)

static int ensure_table(lod_thread *w, size_t cap)
{
    if (w->cap >= cap) return 0;
    free(w->key);
    free(w->val);
    w->key = (uint32_t *)malloc(cap * sizeof *w->key);
    w->val = (uint64_t *)malloc(cap * sizeof *w->val);
    w->cap = w->key && w->val ? cap : 0;
    if (!w->cap) return -1;
    memset(w->key, 0xff, cap * sizeof *w->key);
    return 0;
}

static int ensure_win(lod_thread *w, size_t more)
{
    if (w->num_win + more <= w->cap_win) return 0;
    size_t cap = 2 * (w->num_win + more);
    uint32_t *p = (uint32_t *)realloc(w->win, cap * sizeof *p);
    if (!p) return -1;
    w->win = p;
    w->cap_win = cap;
    return 0;
}

/* The winners of one unit: points perm[a, a + m) (grid coordinates qp[a, a + m), in the same
 * order) of the inner node at depth d. */
static int lod_unit_run(lod_thread *w, const uint32_t *qp, const uint32_t *perm, uint64_t a,
                        uint64_t m, int d, int g, lod_unit *u)
{
    /* A child's cube holds (G/2)^3 of the node's voxels: the table never needs more than twice
     * the smaller of that and its points, and stays at most half full. */
    uint64_t vox = (uint64_t)1 << (3 * (g - 1)), most = m < vox ? m : vox;
    size_t cap = 2;
    int bits = 1;
    while (cap < 2 * most) {
        cap <<= 1;
        bits++;
    }
    if (ensure_win(w, (size_t)most)) return -1;
    u->off = w->num_win;
    if (vox <= DENSE_MAX && m >= vox / 2) {
        /* a unit's voxels: the node's voxel coordinates without their top (octant) bit */
        const uint32_t hm = (1u << (g - 1)) - 1u, gm = (1u << g) - 1u;
        if (w->cap_dense < vox) {
            free(w->dense);
            w->dense = (uint64_t *)malloc((size_t)vox * sizeof *w->dense);
            w->cap_dense = w->dense ? (size_t)vox : 0;
            if (!w->dense) return -1;
            memset(w->dense, 0xff, (size_t)vox * sizeof *w->dense);
        }
        for (uint64_t k = a; k < a + m; k++) {
            uint32_t i = perm[k], d2, v = grove__ot_voxel(qp + 3 * k, d, g, &d2);
            uint32_t l = (v & hm) | (((v >> g) & hm) << (g - 1)) |
                         (((v >> (2 * g)) & gm & hm) << (2 * (g - 1)));
            uint64_t key = ((uint64_t)d2 << 32) | i;
            if (key < w->dense[l]) w->dense[l] = key;
        }
        for (size_t l = 0; l < (size_t)vox; l++) {
            if (w->dense[l] == UINT64_MAX) continue;
            w->win[w->num_win++] = (uint32_t)w->dense[l];
            w->dense[l] = UINT64_MAX;
        }
        u->num = w->num_win - u->off;
        return 0;
    }
    if (ensure_table(w, cap)) return -1;
    for (uint64_t k = a; k < a + m; k++) {
        uint32_t i = perm[k], d2, v = grove__ot_voxel(qp + 3 * k, d, g, &d2);
        uint64_t key = ((uint64_t)d2 << 32) | i;
        size_t h = (size_t)((v * 0x9E3779B1u) >> (32 - bits));
        while (w->key[h] != NONE && w->key[h] != v) h = (h + 1) & (cap - 1);
        if (w->key[h] == NONE) {
            w->key[h] = v;
            w->val[h] = key;
        } else if (key < w->val[h]) {
            w->val[h] = key;
        }
    }
    for (size_t h = 0; h < cap; h++) {
        if (w->key[h] == NONE) continue;
        w->win[w->num_win++] = (uint32_t)w->val[h];
        w->key[h] = NONE;
    }
    u->num = w->num_win - u->off;
    return 0;
}

/* Orders unit ids by their point counts, largest first, so the big ones start early. */
typedef struct unit_key {
    uint64_t m;
    uint32_t id;
} unit_key;

static int cmp_unit_key(const void *x, const void *y)
{
    const unit_key *a = (const unit_key *)x, *b = (const unit_key *)y;
    if (a->m != b->m) return a->m < b->m ? 1 : -1;
    return (a->id > b->id) - (a->id < b->id);
}

/* Node k's sample: its units' winners (input positions) in the points' Morton order, which
 * is ascending rank (rank[i]: point i's place in perm). */
static int gather_sample(const lod_unit *u, size_t nu, const lod_thread *w, const uint32_t *perm,
                         const uint32_t *rank, uint32_t *dst, size_t n)
{
    size_t m = 0;
    for (size_t j = 0; j < nu; j++) {
        if (u[j].num == 0) continue;
        memcpy(dst + m, w[u[j].thread].win + u[j].off, (size_t)u[j].num * sizeof *dst);
        m += (size_t)u[j].num;
    }
    for (size_t j = 0; j < m; j++) dst[j] = rank[dst[j]];
    if (m < 4096) {
        grove__qt_sort_u32(dst, m);
    } else {
        /* ranks are below n: the radix sort skips the digits above */
        int bits = 1;
        while (bits < 32 && ((size_t)1 << bits) < n) bits++;
        if (grove__cpu_sort(NULL, GROVE_U32, dst, 0, NULL, m, 0, bits) != GROVE_OK) return -1;
    }
    for (size_t j = 0; j < m; j++) dst[j] = perm[dst[j]];
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts the run perm[a, e) of points with the same 63-bit code by (lo code, input position)
 * when their grid points differ below level 21 (a dense spot). */
static int refine_run(const uint32_t *q, uint32_t *perm, size_t a, size_t e)
{
    int differ = 0;
    for (size_t j = a + 1; j < e && !differ; j++)
        differ = memcmp(q + 3 * (size_t)perm[j], q + 3 * (size_t)perm[a], 12) != 0;
    if (!differ) return 0;
    uint64_t *k = (uint64_t *)malloc((e - a) * sizeof *k);
    if (!k) return -1;
    for (size_t j = a; j < e; j++)
        k[j - a] = (uint64_t)grove__ot_morton_lo(q + 3 * (size_t)perm[j]) << 32 | perm[j];
    qsort(k, e - a, sizeof *k, cmp_u64);
    for (size_t j = a; j < e; j++) perm[j] = (uint32_t)k[j - a];
    free(k);
    return 0;
}

/* perm: the points in Morton order (octree.h: ascending 90-bit code of q, ties by input
 * position), which lists them leaf by leaf in depth-first order, every node's points one range:
 * a stable radix sort by the code's top 63 bits, then the rare runs of equal top bits whose
 * points differ further down sorted by the rest. */
static grove_status morton_perm(build *b, size_t n, uint32_t *perm)
{
    uint64_t *key = (uint64_t *)malloc((n ? n : 1) * sizeof *key);
    int fail = 0;
    if (!key)
        return grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "grove_octree_build: out of memory for %zu Morton codes", n);
#pragma omp parallel for num_threads(b->nt) schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        key[i] = grove__ot_morton_hi(b->q + 3 * i);
        perm[i] = (uint32_t)i;
    }
    grove_status st = grove__cpu_sort(b->ctx, GROVE_U64, key, sizeof *perm, perm, n, 0, 63);
    if (st != GROVE_OK) {
        free(key);
        return st;
    }
    /* each chunk takes the runs that start in it */
    const size_t chunk = 65536, nchunks = (n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(b->nt) schedule(dynamic, 1) if (nchunks > 1)
    for (size_t c = 0; c < nchunks; c++) {
        const size_t e = (c + 1) * chunk < n ? (c + 1) * chunk : n;
        for (size_t j = c * chunk; j < e;) {
            size_t r = j + 1;
            if (j > 0 && key[j] == key[j - 1]) { /* not a run's head */
                j++;
                continue;
            }
            while (r < n && key[r] == key[j]) r++;
            if (r - j > 1 && refine_run(b->q, perm, j, r)) {
#pragma omp atomic write
                fail = 1;
            }
            j = r;
        }
    }
    free(key);
    if (fail)
        return grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "grove_octree_build: out of memory ordering %zu points", n);
    return GROVE_OK;
}

/* Everything after the counting: entries of the leaves and the samples of the inner nodes. */
static grove_status place_and_sample(build *b, const double *xyz, grove_octree *t,
                                     grove_octree_stats *stats)
{
    grove_status st = GROVE_OK;
    const size_t n = t->n;
    const int g = grove__ot_log2_grid(t->opts.lod_grid);
    uint32_t *order = NULL, *perm = NULL, *unit_first = NULL;
    uint32_t *rank = NULL;
    uint64_t *start = NULL, *count = NULL;
    lod_unit *units = NULL;
    unit_key *keys = NULL;
    lod_thread *w = NULL;
    size_t num_units = 0, nn;
    int fail = 0;
    double t0 = grove__ot_now_ms(), t1;

    GROVE_TRY_END(st, lay_out_nodes(b, t, &order));
    nn = t->num_nodes;
    start = (uint64_t *)malloc(nn * sizeof *start);
    count = (uint64_t *)malloc((nn + 1) * sizeof *count);
    perm = (uint32_t *)malloc((n ? n : 1) * sizeof *perm);
    if (!start || !count || !perm) {
        st = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "grove_octree_build: out of memory placing %zu points", n);
        goto _end;
    }
    dfs_starts(t, start);
    GROVE_TRY_END(st, morton_perm(b, n, perm));
    /* The samples read the grid coordinates unit by unit: in perm's order they stream. */
    if (g > 0 && n > 0) {
        uint32_t *qp = (uint32_t *)malloc(3 * n * sizeof *qp);
        rank = (uint32_t *)malloc(n * sizeof *rank);
        if (!qp || !rank) {
            free(qp);
            st = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                              "grove_octree_build: out of memory placing %zu points", n);
            goto _end;
        }
#pragma omp parallel for num_threads(b->nt) schedule(static) if (n > 65536)
        for (size_t k = 0; k < n; k++) {
            memcpy(qp + 3 * k, b->q + 3 * (size_t)perm[k], 12);
            rank[perm[k]] = (uint32_t)k;
        }
        free(b->q);
        b->q = qp;
    }
    t1 = grove__ot_now_ms();
    stats->ms_place += t1 - t0;

    /* The samples. */
    if (g > 0) {
        for (size_t k = 0; k < nn; k++)
            if (t->nodes[k].first_child != NONE)
                num_units += (size_t)__builtin_popcount(t->nodes[k].child_mask);
        units = (lod_unit *)malloc((num_units ? num_units : 1) * sizeof *units);
        keys = (unit_key *)malloc((num_units ? num_units : 1) * sizeof *keys);
        unit_first = (uint32_t *)malloc((nn + 1) * sizeof *unit_first);
        w = (lod_thread *)calloc((size_t)b->nt, sizeof *w);
        if (!units || !keys || !unit_first || !w) {
            st = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                              "grove_octree_build: out of memory for %zu sample units", num_units);
            goto _end;
        }
        num_units = 0;
        for (size_t k = 0; k < nn; k++) {
            const grove_octree_node *nd = &t->nodes[k];
            unit_first[k] = (uint32_t)num_units;
            if (nd->first_child == NONE) continue;
            for (uint32_t c = nd->first_child, e = c + (uint32_t)__builtin_popcount(nd->child_mask);
                 c < e; c++) {
                units[num_units].node = (uint32_t)k;
                units[num_units].child = c;
                keys[num_units].m = t->nodes[c].total;
                keys[num_units].id = (uint32_t)num_units;
                num_units++;
            }
        }
        unit_first[nn] = (uint32_t)num_units;
        qsort(keys, num_units, sizeof *keys, cmp_unit_key);
#pragma omp parallel num_threads(b->nt)
        {
#ifdef _OPENMP
            int tid = omp_get_thread_num();
#else
            int tid = 0;
#endif
#pragma omp for schedule(dynamic, 1)
            for (size_t j = 0; j < num_units; j++) {
                lod_unit *u = &units[keys[j].id];
                const grove_octree_node *nd = &t->nodes[u->node];
                int failed;
#pragma omp atomic read
                failed = fail;
                if (failed) continue;
                u->thread = (uint32_t)tid;
                if (lod_unit_run(&w[tid], b->q, perm, start[u->child], t->nodes[u->child].total,
                                 nd->depth, g, u)) {
#pragma omp atomic write
                    fail = 1;
                }
            }
        }
        if (fail) {
            st = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                              "grove_octree_build: out of memory for the samples' tables");
            goto _end;
        }
    }
    t0 = grove__ot_now_ms();
    stats->ms_lod += t0 - t1;

    /* Entries, node by node in breadth-first order. */
    count[0] = 0;
    for (size_t k = 0; k < nn; k++) {
        uint64_t m = t->nodes[k].total;
        if (t->nodes[k].first_child != NONE) {
            m = 0;
            if (g > 0)
                for (uint32_t j = unit_first[k]; j < unit_first[k + 1]; j++) m += units[j].num;
        }
        t->nodes[k].begin = count[k];
        t->nodes[k].end = count[k] + m;
        count[k + 1] = count[k] + m;
    }
    t->num_entries = (size_t)count[nn];
    t->index = (uint32_t *)malloc((t->num_entries ? t->num_entries : 1) * sizeof *t->index);
    t->xyz = (double *)malloc((t->num_entries ? t->num_entries : 1) * 3 * sizeof *t->xyz);
    if (!t->index || !t->xyz) {
        st = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "grove_octree_build: out of memory for %zu entries", t->num_entries);
        goto _end;
    }
#pragma omp parallel for num_threads(b->nt) schedule(dynamic, 1) if (nn > 1)
    for (size_t k = 0; k < nn; k++) {
        const grove_octree_node *nd = &t->nodes[k];
        uint32_t *dst = t->index + nd->begin;
        if (nd->first_child == NONE)
            memcpy(dst, perm + start[k], (size_t)nd->total * sizeof *dst);
        else if (g > 0 && gather_sample(units + unit_first[k], unit_first[k + 1] - unit_first[k],
                                        w, perm, rank, dst, n)) {
#pragma omp atomic write
            fail = 1;
        }
    }
    if (fail) {
        st = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "grove_octree_build: out of memory sorting the samples");
        goto _end;
    }
#pragma omp parallel for num_threads(b->nt) schedule(static) if (t->num_entries > 65536)
    for (size_t e = 0; e < t->num_entries; e++) {
        const double *src = xyz + 3 * (size_t)t->index[e];
        t->xyz[3 * e] = src[0];
        t->xyz[3 * e + 1] = src[1];
        t->xyz[3 * e + 2] = src[2];
    }
    stats->ms_place += grove__ot_now_ms() - t0;
_end:
    if (w)
        for (int i = 0; i < b->nt; i++) {
            free(w[i].key);
            free(w[i].val);
            free(w[i].win);
            free(w[i].dense);
        }
    free(w);
    free(order);
    free(start);
    free(rank);
    free(count);
    free(perm);
    free(units);
    free(keys);
    free(unit_first);
    return st;
}

grove_status grove__ot_build_cpu(grove_ctx *ctx, const double *xyz, grove_octree *t,
                                 grove_octree_stats *stats)
{
    grove_status st = GROVE_OK;
    const grove_octree_opts *o = &t->opts;
    const size_t n = t->n;
    build b;
    double t0;

    GROVE_TRY_END(st, build_alloc(&b, ctx, o, n, 1024));
    b.nodes[0].count = 0;
    b.nodes[0].child = NONE;
    b.nodes[0].fid = NONE;
    b.nodes[0].depth = 0;
    b.num_nodes = 1;
    GROVE_TRY_END(st, reserve_spill(&b));

    for (size_t b0 = 0; b0 < n; b0 += o->batch) {
        size_t b1 = n - b0 > o->batch ? b0 + o->batch : n;
        t0 = grove__ot_now_ms();
        locate_and_count(&b, xyz, t->lo, t->to_grid, b0, b1, 1);
        while (b.num_spill > 0) {
            GROVE_TRY_END(st, split_listed(&b));
            move_down(&b, b1);
            stats->spill_rounds++;
        }
        stats->ms_count += grove__ot_now_ms() - t0;
        stats->batches++;
        if (o->progress) o->progress(o->progress_user, (uint64_t)b1, (uint64_t)n);
    }
    st = place_and_sample(&b, xyz, t, stats);
_end:
    free(b.nodes);
    free(b.spill);
    free(b.q);
    free(b.leaf);
    return st;
}

grove_status grove__ot_build_cpu_from_pool(grove_ctx *ctx, const double *xyz, grove_octree *t,
                                           const uint32_t *child, const uint32_t *count,
                                           const uint8_t *depth, size_t num_nodes,
                                           grove_octree_stats *stats)
{
    grove_status st = GROVE_OK;
    const size_t n = t->n;
    build b;
    double t0 = grove__ot_now_ms();

    /* the pool must be a tree whose children follow their parent (lay_out_nodes sums the
     * subtrees from the last id down) and lie inside it; anything else is a bug upstream */
    if (num_nodes < 1 || num_nodes > (size_t)NONE)
        return grove__error(ctx, GROVE_ERR_INTERNAL, "octree: a node pool of %zu nodes",
                            num_nodes);
    /* every node but the root is some node's child exactly once, one level below it */
    {
        uint8_t *claimed = (uint8_t *)calloc(num_nodes, 1);
        size_t bad = SIZE_MAX;
        if (!claimed)
            return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                "grove_octree_build: out of memory checking %zu nodes", num_nodes);
        if (depth[0] != 0) bad = 0;
        for (size_t i = 0; i < num_nodes && bad == SIZE_MAX; i++) {
            if (child[i] == NONE) continue;
            if (child[i] <= i || (size_t)child[i] + 8 > num_nodes ||
                depth[i] >= t->opts.max_depth) {
                bad = i;
                break;
            }
            for (uint32_t o = 0; o < 8; o++) {
                const size_t c = (size_t)child[i] + o;
                if (claimed[c] || depth[c] != depth[i] + 1) bad = i;
                claimed[c] = 1;
            }
        }
        for (size_t i = 1; i < num_nodes && bad == SIZE_MAX; i++)
            if (!claimed[i]) bad = i;
        free(claimed);
        if (bad != SIZE_MAX)
            return grove__error(ctx, GROVE_ERR_INTERNAL,
                                "octree: pool node %zu (depth %u, children at %u of %zu nodes) "
                                "is not part of a tree",
                                bad, (unsigned)depth[bad], child[bad], num_nodes);
    }
    GROVE_TRY_END(st, build_alloc(&b, ctx, &t->opts, n, num_nodes));
    b.num_nodes = num_nodes;
    for (size_t i = 0; i < num_nodes; i++) {
        b.nodes[i].count = count[i];
        b.nodes[i].child = child[i];
        b.nodes[i].fid = NONE;
        b.nodes[i].depth = depth[i];
    }
    /* every point's grid coordinates and leaf, as the counting left them */
    locate_and_count(&b, xyz, t->lo, t->to_grid, 0, n, 0);
    stats->ms_place += grove__ot_now_ms() - t0;
    st = place_and_sample(&b, xyz, t, stats);
_end:
    free(b.nodes);
    free(b.q);
    free(b.leaf);
    return st;
}
