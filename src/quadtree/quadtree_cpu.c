/*
 * quadtree_cpu.c - the two CPU builds of the quadtree (C11 + OpenMP).
 *
 * Both builds go level by level, so that the nodes come out breadth-first: the nodes of level L
 * are [lb, le) of the node array; the split ones get their children appended in node order
 * (first_child from a running count of the split nodes before them), which is the layout
 * quadtree.h specifies. They differ in how a split node's four child ranges are found:
 *
 *   recursive  the seed's algorithm: count the node's points per quadrant, exclusive-scan the four
 *              counts plus the node's begin, and scatter the points stably into the other of two
 *              ping-pong buffers. Level L lives in buffer L % 2; a leaf on an odd level copies its
 *              range back, so the result ends in buffer 0.
 *   morton     every point's quadrant path (2 bits per level, level 1 most significant) is
 *              computed up front by descending from the root box with the same float arithmetic;
 *              one stable sort of (path, input position) puts every node's points in a contiguous
 *              run, and a split node's child ranges are the boundaries where the next digit
 *              changes, found by binary search within its run.
 *
 * These are the CPU backend; the CUDA builds (quadtree_cuda.cu, quadtree_cdp.cu) give the same
 * bytes and are tested against them.
 */
#include <stdlib.h>
#include <string.h>

#include "grove/prim.h"
#include "quadtree_internal.h"

void grove__qt_make_children(const grove_quadtree_node *p, const uint32_t bounds[5],
                             grove_quadtree_node *c)
{
    float b[4] = {p->xmin, p->ymin, p->xmax, p->ymax}, cb[4];
    float cx = grove__qt_mid(p->xmin, p->xmax), cy = grove__qt_mid(p->ymin, p->ymax);
    for (unsigned q = 0; q < 4; q++) {
        grove__qt_child_box(b, cx, cy, q, cb);
        c[q].xmin = cb[0];
        c[q].ymin = cb[1];
        c[q].xmax = cb[2];
        c[q].ymax = cb[3];
        c[q].level = p->level + 1;
        c[q].first_child = -1;
        c[q].begin = bounds[q];
        c[q].end = bounds[q + 1];
    }
}

/* ---- the level driver shared by both builds ---- */

typedef struct nodevec {
    grove_quadtree_node *a;
    size_t n, cap;
} nodevec;

static grove_status nodes_init(grove_ctx *ctx, nodevec *v, const float root[4], size_t n)
{
    v->cap = 64;
    v->n = 1;
    v->a = (grove_quadtree_node *)malloc(v->cap * sizeof *v->a);
    if (!v->a) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "quadtree: out of memory");
    v->a[0].xmin = root[0];
    v->a[0].ymin = root[1];
    v->a[0].xmax = root[2];
    v->a[0].ymax = root[3];
    v->a[0].level = 0;
    v->a[0].first_child = -1;
    v->a[0].begin = 0;
    v->a[0].end = (uint32_t)n;
    return GROVE_OK;
}

static int is_split(const grove_quadtree_node *nd, const grove_quadtree_opts *o)
{
    return nd->level < o->max_depth && (int64_t)(nd->end - nd->begin) > (int64_t)o->min_points;
}

/* Gives the split nodes of level [lb, le) their first_child and makes room for their children.
 * *nsplit receives their number. */
static grove_status level_prepare(grove_ctx *ctx, nodevec *v, size_t lb, size_t le,
                                  const grove_quadtree_opts *o, size_t *nsplit)
{
    size_t k = 0, need;
    for (size_t i = lb; i < le; i++)
        if (is_split(&v->a[i], o)) k++;
    *nsplit = k;
    if (k == 0) return GROVE_OK;
    need = le + 4 * k;
    if (need > (size_t)INT32_MAX)
        return grove__error(ctx, GROVE_ERR_LIMIT,
                            "quadtree: the tree would have more than %d nodes (level %d); raise "
                            "min_points or lower max_depth",
                            INT32_MAX, v->a[lb].level + 1);
    if (need > v->cap) {
        size_t nc = v->cap;
        grove_quadtree_node *p;
        while (nc < need) nc *= 2;
        if (nc > (size_t)INT32_MAX) nc = (size_t)INT32_MAX;
        p = (grove_quadtree_node *)realloc(v->a, nc * sizeof *p);
        if (!p)
            return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                "quadtree: out of memory for %zu nodes (%zu bytes)", nc,
                                nc * sizeof *p);
        v->a = p;
        v->cap = nc;
    }
    k = le;
    for (size_t i = lb; i < le; i++)
        if (is_split(&v->a[i], o)) {
            v->a[i].first_child = (int32_t)k;
            k += 4;
        }
    v->n = k;
    return GROVE_OK;
}

/* Hands the node array to t, trimmed to its size. */
static void nodes_finish(nodevec *v, grove_quadtree *t)
{
    grove_quadtree_node *p = (grove_quadtree_node *)realloc(v->a, v->n * sizeof *p);
    t->nodes = p ? p : v->a;
    t->num_nodes = v->n;
    v->a = NULL;
}

/* ---- recursive (seed) build ---- */

/* Splits node nd (points in buffer s) into the other buffer; bounds receives the child ranges. */
static void split_node(const grove_quadtree_node *nd, float *const px[2], uint32_t *const pi[2],
                       int s, uint32_t bounds[5])
{
    const float *ix = px[s];
    const uint32_t *ii = pi[s];
    float *ox = px[1 - s];
    uint32_t *oi = pi[1 - s];
    float cx = grove__qt_mid(nd->xmin, nd->xmax), cy = grove__qt_mid(nd->ymin, nd->ymax);
    uint32_t cnt[4] = {0, 0, 0, 0}, pos[4];
    for (uint32_t i = nd->begin; i < nd->end; i++)
        cnt[grove__qt_quadrant(ix[2 * (size_t)i], ix[2 * (size_t)i + 1], cx, cy)]++;
    /* the 4-element exclusive scan, offset by the node's begin */
    bounds[0] = nd->begin;
    for (int q = 0; q < 4; q++) bounds[q + 1] = bounds[q] + cnt[q];
    memcpy(pos, bounds, sizeof pos);
    /* in index order, so the scatter is stable (the seed's atomicAdd scatter is not) */
    for (uint32_t i = nd->begin; i < nd->end; i++) {
        size_t a = i, d;
        unsigned q = grove__qt_quadrant(ix[2 * a], ix[2 * a + 1], cx, cy);
        d = pos[q]++;
        ox[2 * d] = ix[2 * a];
        ox[2 * d + 1] = ix[2 * a + 1];
        oi[d] = ii[a];
    }
}

grove_status grove__qt_build_recursive_cpu(grove_ctx *ctx, const grove_points *pts,
                                           const float root[4], grove_quadtree *t)
{
    grove_status st = GROVE_OK;
    const grove_quadtree_opts *o = &t->opts;
    size_t n = pts->n, dims = (size_t)pts->dims, lb = 0, le = 1;
    int nt = grove__threads(ctx);
    float *px[2] = {NULL, NULL};
    uint32_t *pi[2] = {NULL, NULL};
    nodevec v = {NULL, 0, 0};

    GROVE_TRY_END(st, nodes_init(ctx, &v, root, n));
    if (n > 0) {
        px[0] = (float *)malloc(2 * n * sizeof(float));
        px[1] = (float *)malloc(2 * n * sizeof(float));
        pi[0] = (uint32_t *)malloc(n * sizeof(uint32_t));
        pi[1] = (uint32_t *)malloc(n * sizeof(uint32_t));
        if (!px[0] || !px[1] || !pi[0] || !pi[1]) {
            st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                              "quadtree: out of memory for two point buffers of %zu points", n);
            goto _end;
        }
#pragma omp parallel for num_threads(nt) schedule(static) if (n > 65536)
        for (size_t i = 0; i < n; i++) {
            px[0][2 * i] = pts->xyz[i * dims];
            px[0][2 * i + 1] = pts->xyz[i * dims + 1];
            pi[0][i] = (uint32_t)i;
        }
    }
    for (;;) {
        size_t nsplit;
        int s = v.a[lb].level & 1;
        GROVE_TRY_END(st, level_prepare(ctx, &v, lb, le, o, &nsplit));
        /* Few nodes with many points near the root, many small ones further down: dynamic
         * scheduling balances both. Ranges of one level are disjoint, so nodes never race. */
#pragma omp parallel for num_threads(nt) schedule(dynamic, 16) if (le - lb > 16)
        for (size_t i = lb; i < le; i++) {
            grove_quadtree_node *nd = &v.a[i];
            if (nd->first_child >= 0) {
                uint32_t bounds[5];
                split_node(nd, px, pi, s, bounds);
                grove__qt_make_children(nd, bounds, &v.a[nd->first_child]);
            } else if (s == 1 && nd->end > nd->begin) {
                size_t b = nd->begin, m = nd->end - nd->begin;
                memcpy(px[0] + 2 * b, px[1] + 2 * b, 2 * m * sizeof(float));
                memcpy(pi[0] + b, pi[1] + b, m * sizeof(uint32_t));
            }
        }
        if (nsplit == 0) break;
        lb = le;
        le = v.n;
    }
    nodes_finish(&v, t);
    t->pts = px[0];
    t->index = pi[0];
    px[0] = NULL;
    pi[0] = NULL;
_end:
    free(v.a);
    free(px[0]);
    free(px[1]);
    free(pi[0]);
    free(pi[1]);
    return st;
}

/* ---- morton build ---- */

/* Index of the first element of keys[b, e) whose digit (key >> shift) & 3 is >= d; the digits
 * are nondecreasing there because all keys of a node share the prefix above `shift`. */
static uint32_t digit_lower_bound(const uint64_t *keys, uint32_t b, uint32_t e, int shift,
                                  unsigned d)
{
    while (b < e) {
        uint32_t m = b + (e - b) / 2;
        if (((keys[m] >> shift) & 3u) < d)
            b = m + 1;
        else
            e = m;
    }
    return b;
}

static void insertion_sort_u32(uint32_t *v, size_t m)
{
    for (size_t i = 1; i < m; i++) {
        uint32_t x = v[i];
        size_t j = i;
        while (j > 0 && v[j - 1] > x) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

/* Quicksort (median of three, Hoare partition) recursing into the smaller side, so the stack
 * stays O(log m); a typed loop is several times faster than qsort() with its comparator calls,
 * which matters for the box queries' per-query sorts. */
void grove__qt_sort_u32(uint32_t *v, size_t m)
{
    while (m > 24) {
        uint32_t a = v[0], b = v[m / 2], c = v[m - 1], p, t;
        size_t i = 0, j = m - 1;
        p = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        for (;;) {
            while (v[i] < p) i++;
            while (v[j] > p) j--;
            if (i >= j) break;
            t = v[i];
            v[i] = v[j];
            v[j] = t;
            i++;
            j--;
        }
        /* [0, j] <= p <= [j + 1, m) */
        if (j + 1 < m - (j + 1)) {
            grove__qt_sort_u32(v, j + 1);
            v += j + 1;
            m -= j + 1;
        } else {
            grove__qt_sort_u32(v + j + 1, m - (j + 1));
            m = j + 1;
        }
    }
    insertion_sort_u32(v, m);
}

/* Points whose keys one thread computes together. */
#define KEY_BATCH 16

grove_status grove__qt_build_morton_cpu(grove_ctx *ctx, const grove_points *pts,
                                        const float root[4], grove_quadtree *t)
{
    grove_status st = GROVE_OK;
    const grove_quadtree_opts *o = &t->opts;
    const int depth = o->max_depth;
    size_t n = pts->n, dims = (size_t)pts->dims, lb = 0, le = 1;
    int nt = grove__threads(ctx);
    uint64_t *keys = NULL;
    uint32_t *idx = NULL;
    float *out = NULL;
    nodevec v = {NULL, 0, 0};

    GROVE_TRY_END(st, nodes_init(ctx, &v, root, n));
    if (n > 0) {
        keys = (uint64_t *)malloc(n * sizeof *keys);
        idx = (uint32_t *)malloc(n * sizeof *idx);
        out = (float *)malloc(2 * n * sizeof *out);
        if (!keys || !idx || !out) {
            st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                              "quadtree: out of memory for the keys of %zu points", n);
            goto _end;
        }
    }
    /* The path is computed for all max_depth levels, also below a point's leaf: the sort then
     * needs no knowledge of the tree, and the levels that are not split are harmless except
     * inside leaves, which the fix-up below handles. Each step uses exactly the recursive
     * build's arithmetic (grove__qt_mid, grove__qt_quadrant, grove__qt_child_box), so a point
     * lands in the same child in both builds. */
#pragma omp parallel for num_threads(nt) schedule(static) if (n > 16384)
    for (size_t i0 = 0; i0 < n; i0 += KEY_BATCH) {
        /* KEY_BATCH points descend together: one point's levels form a chain of dependent
         * operations, several points' chains overlap (and vectorise). The box is in arrays
         * the compiler can keep in registers, updated with selects. */
        size_t m = n - i0 < KEY_BATCH ? n - i0 : KEY_BATCH;
        float x[KEY_BATCH], y[KEY_BATCH], b0[KEY_BATCH], b1[KEY_BATCH], b2[KEY_BATCH],
            b3[KEY_BATCH];
        uint64_t key[KEY_BATCH];
        for (size_t j = 0; j < KEY_BATCH; j++) {
            size_t i = i0 + (j < m ? j : 0);
            x[j] = pts->xyz[i * dims];
            y[j] = pts->xyz[i * dims + 1];
            b0[j] = root[0];
            b1[j] = root[1];
            b2[j] = root[2];
            b3[j] = root[3];
            key[j] = 0;
        }
        for (int l = 0; l < depth; l++) {
            for (size_t j = 0; j < KEY_BATCH; j++) {
                float cx = grove__qt_mid(b0[j], b2[j]), cy = grove__qt_mid(b1[j], b3[j]);
                unsigned q = grove__qt_quadrant(x[j], y[j], cx, cy);
                key[j] = (key[j] << 2) | q;
                b0[j] = (q & 1u) ? cx : b0[j];
                b2[j] = (q & 1u) ? b2[j] : cx;
                b3[j] = (q & 2u) ? cy : b3[j];
                b1[j] = (q & 2u) ? b1[j] : cy;
            }
        }
        for (size_t j = 0; j < m; j++) {
            keys[i0 + j] = key[j];
            idx[i0 + j] = (uint32_t)(i0 + j);
        }
    }
    /* Stable, so equal paths keep input order. end_bit must not be 0 (that means all bits). */
    if (n > 1 && depth > 0)
        GROVE_TRY_END(
            st, grove_sort_pairs(ctx, GROVE_U64, keys, sizeof(uint32_t), idx, n, 0, 2 * depth));

    for (;;) {
        size_t nsplit;
        int shift;
        GROVE_TRY_END(st, level_prepare(ctx, &v, lb, le, o, &nsplit));
        if (nsplit == 0) break;
        shift = 2 * (depth - 1 - v.a[lb].level); /* the digit of level L + 1 */
#pragma omp parallel for num_threads(nt) schedule(dynamic, 64) if (le - lb > 64)
        for (size_t i = lb; i < le; i++) {
            grove_quadtree_node *nd = &v.a[i];
            uint32_t bounds[5];
            if (nd->first_child < 0) continue;
            bounds[0] = nd->begin;
            bounds[4] = nd->end;
            for (unsigned d = 1; d < 4; d++)
                bounds[d] = digit_lower_bound(keys, bounds[d - 1], nd->end, shift, d);
            grove__qt_make_children(nd, bounds, &v.a[nd->first_child]);
        }
        lb = le;
        le = v.n;
    }

    /* Inside a leaf the points must be in input order, but the sort ordered them by the digits
     * below the leaf. A leaf at max_depth is fine (its points share the whole key, and the sort
     * is stable); a leaf above it holds at most min_points points (that is why it is a leaf),
     * so re-sorting each such range by input position costs O(n log min_points) and touches
     * only those leaves, where a second full radix sort by keys masked below each point's leaf
     * level would cost another pass over all n keys. (A GPU build would rather use that second
     * sort, or a segmented sort of the leaves, than one thread per leaf.) */
#pragma omp parallel for num_threads(nt) schedule(dynamic, 256) if (v.n > 1024)
    for (size_t i = 0; i < v.n; i++) {
        const grove_quadtree_node *nd = &v.a[i];
        if (nd->first_child < 0 && nd->level < depth && nd->end - nd->begin > 1)
            grove__qt_sort_u32(idx + nd->begin, nd->end - nd->begin);
    }

#pragma omp parallel for num_threads(nt) schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        size_t a = idx[i];
        out[2 * i] = pts->xyz[a * dims];
        out[2 * i + 1] = pts->xyz[a * dims + 1];
    }
    nodes_finish(&v, t);
    t->pts = out;
    t->index = idx;
    out = NULL;
    idx = NULL;
_end:
    free(v.a);
    free(keys);
    free(idx);
    free(out);
    return st;
}
