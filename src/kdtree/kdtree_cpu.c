/*
 * kdtree_cpu.c - the CPU build of the k-d tree (C11 + OpenMP), after Zhou et al. 2008.
 *
 * Three stages, each of which a CUDA port can run as the paper does, with the same result:
 *
 *   large nodes  breadth-first, one level at a time, over the nodes with more than 64 points:
 *                tight box (a segmented min/max), then either an empty-space cut or a split at
 *                the midpoint of the box's longest axis, then a stable partition of the node's
 *                range (a segmented split). Here a level's big nodes are done one at a time
 *                with threads inside them, the rest one node per thread.
 *   small nodes  one small-node root (at most 64 points) per thread: its whole subtree, with
 *                per-axis sorted lists that stable partitions keep sorted, and the plane of
 *                least volume-heuristic cost (docs/kdtree.md says why).
 *   output       subtree sizes backwards, preorder positions forwards (a parent always has a
 *                smaller construction id than its children), then a scatter.
 *
 * Every decision is made in double arithmetic with one rounding per statement; ties go to the
 * smaller axis and the smaller position. The partitions are stable, so the points of a node
 * stay in ascending input order and the tree is fully determined by the input and leaf_size.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kdtree_internal.h"
#ifdef _OPENMP
#include <omp.h>
#endif

#pragma STDC FP_CONTRACT OFF

/* Above this many points a large node gets all threads for its box and partition. */
#define KD_BIG ((uint64_t)1 << 16)

/* A node under construction; ids are construction order, left/right 0 for a leaf. */
typedef struct bnode {
    uint64_t begin, end;
    uint64_t left, right;
    double split;
    int32_t axis, kind;
} bnode;

typedef struct build {
    grove_ctx *ctx;
    double *x;  /* n * D, -0 normalised; rows move with perm (tree order so far) */
    double *xt; /* n * D scratch for the partitions */
    int D, leaf;
    int nt;
    uint64_t *perm, *tmp; /* n each */
    bnode *nodes;         /* construction order */
    double *bounds;       /* 2D per node */
    size_t num, cap;
} build;

static grove_status grow(build *b, size_t need)
{
    size_t cap = b->cap ? b->cap : 64;
    bnode *nn;
    double *nb;
    if (need <= b->cap) return GROVE_OK;
    while (cap < need) cap *= 2;
    nn = (bnode *)realloc(b->nodes, cap * sizeof *nn);
    if (nn) b->nodes = nn;
    nb = (double *)realloc(b->bounds, cap * 2 * (size_t)b->D * sizeof *nb);
    if (nb) b->bounds = nb;
    if (!nn || !nb)
        return grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "grove_kdtree_build: out of memory for %zu nodes", cap);
    b->cap = cap;
    return GROVE_OK;
}

static void set_empty_box(double *bx, int D)
{
    for (int d = 0; d < D; d++) {
        bx[d] = INFINITY;
        bx[D + d] = -INFINITY;
    }
}

/* Tight box of perm[lo, hi); with par, on all threads (min/max do not depend on the order, as
 * there are no NaNs and no negative zeros). */
static void range_box(const build *b, uint64_t lo, uint64_t hi, double *bx, int par)
{
    const int D = b->D;
    double mn[GROVE_KDTREE_MAX_DIMS], mx[GROVE_KDTREE_MAX_DIMS];
    for (int d = 0; d < D; d++) {
        mn[d] = INFINITY;
        mx[d] = -INFINITY;
    }
    if (par) {
#pragma omp parallel for num_threads(b->nt) schedule(static) reduction(min                         \
                                                                       : mn[:D])                   \
    reduction(max                                                                                  \
              : mx[:D])
        for (uint64_t i = lo; i < hi; i++) {
            const double *p = b->x + i * (uint64_t)D;
            for (int d = 0; d < D; d++) {
                mn[d] = p[d] < mn[d] ? p[d] : mn[d];
                mx[d] = p[d] > mx[d] ? p[d] : mx[d];
            }
        }
    } else {
        /* no OpenMP construct at all: this runs inside the per-node parallel loops */
        for (uint64_t i = lo; i < hi; i++) {
            const double *p = b->x + i * (uint64_t)D;
            for (int d = 0; d < D; d++) {
                mn[d] = p[d] < mn[d] ? p[d] : mn[d];
                mx[d] = p[d] > mx[d] ? p[d] : mx[d];
            }
        }
    }
    for (int d = 0; d < D; d++) {
        bx[d] = mn[d];
        bx[D + d] = mx[d];
    }
}

/* Moves point i (its index and coordinates) to position j of the scratch arrays. */
static inline void move_to(build *b, uint64_t i, uint64_t j)
{
    const uint64_t D = (uint64_t)b->D;
    b->tmp[j] = b->perm[i];
    memcpy(b->xt + j * D, b->x + i * D, D * sizeof(double));
}

/* Stable partition of [lo, hi) by x[axis] < split (perm and coordinate rows together); returns
 * the left count. With par, the range is cut into one chunk per thread: count, exclusive scan
 * of the counts, scatter. */
static uint64_t partition(build *b, uint64_t lo, uint64_t hi, int axis, double split, int par)
{
    const uint64_t D = (uint64_t)b->D, ax = (uint64_t)axis;
    const double *x = b->x;
    uint64_t cnt[256];
    int nc = par ? b->nt : 1;
    uint64_t len = hi - lo, nl = 0;
    if (nc > 256) nc = 256;
    if ((uint64_t)nc > len) nc = 1;
    if (nc == 1) {
        uint64_t l = lo, r;
        for (uint64_t i = lo; i < hi; i++) nl += x[i * D + ax] < split;
        r = lo + nl;
        for (uint64_t i = lo; i < hi; i++) move_to(b, i, x[i * D + ax] < split ? l++ : r++);
    } else {
#pragma omp parallel for num_threads(nc) schedule(static, 1)
        for (int c = 0; c < nc; c++) {
            uint64_t a = lo + len * (uint64_t)c / (uint64_t)nc;
            uint64_t e = lo + len * (uint64_t)(c + 1) / (uint64_t)nc, k = 0;
            for (uint64_t i = a; i < e; i++) k += x[i * D + ax] < split;
            cnt[c] = k;
        }
        for (int c = 0; c < nc; c++) nl += cnt[c];
#pragma omp parallel for num_threads(nc) schedule(static, 1)
        for (int c = 0; c < nc; c++) {
            uint64_t a = lo + len * (uint64_t)c / (uint64_t)nc;
            uint64_t e = lo + len * (uint64_t)(c + 1) / (uint64_t)nc;
            uint64_t l = lo, r = lo + nl;
            for (int j = 0; j < c; j++) {
                uint64_t aj = lo + len * (uint64_t)j / (uint64_t)nc;
                uint64_t ej = lo + len * (uint64_t)(j + 1) / (uint64_t)nc;
                l += cnt[j];
                r += (ej - aj) - cnt[j];
            }
            for (uint64_t i = a; i < e; i++) move_to(b, i, x[i * D + ax] < split ? l++ : r++);
        }
    }
    memcpy(b->perm + lo, b->tmp + lo, len * sizeof *b->perm);
    memcpy(b->x + lo * D, b->xt + lo * D, len * D * sizeof(double));
    return nl;
}

/* ---- large-node stage ---- */

/* The decision for one large node whose tight box is bx and cell (the region its ancestors'
 * planes leave it) is cell; fills nd->axis/kind/split. For an empty-space cut, *cut_side is 0
 * when the left child is the empty one, 1 when the right one is. */
static void large_decide(int D, const double *bx, const double *cell, bnode *nd, int *cut_side)
{
    int best = -1;
    double best_ext = -1.0;
    *cut_side = -1;
    /* Empty space first: the first axis and side, low before high, with more than a quarter of
     * the cell's extent free of points. */
    for (int d = 0; d < D; d++) {
        double ext = cell[D + d] - cell[d];
        double q = 0.25 * ext;
        double lo_gap = bx[d] - cell[d];
        double hi_gap = cell[D + d] - bx[D + d];
        if (lo_gap > q) {
            nd->axis = d;
            nd->kind = GROVE_KDTREE_EMPTY;
            nd->split = bx[d]; /* every point has x >= split: the left child is empty */
            *cut_side = 0;
            return;
        }
        if (hi_gap > q) {
            nd->axis = d;
            nd->kind = GROVE_KDTREE_EMPTY;
            /* the smallest double above the box, so every point has x < split */
            nd->split = nextafter(bx[D + d], INFINITY);
            *cut_side = 1;
            return;
        }
    }
    for (int d = 0; d < D; d++) {
        double ext = bx[D + d] - bx[d];
        if (ext > best_ext && bx[D + d] > bx[d]) {
            best_ext = ext;
            best = d;
        }
    }
    if (best < 0) { /* every point equal: nothing can split them */
        nd->axis = -1;
        nd->kind = GROVE_KDTREE_LEAF;
        nd->split = 0.0;
        return;
    }
    nd->axis = best;
    nd->kind = GROVE_KDTREE_MEDIAN;
    nd->split = grove__kd_mid(bx[best], bx[D + best]);
    /* lo < hi, but the rounded midpoint may equal lo (adjacent doubles); hi then keeps both
     * sides non-empty. */
    if (!(nd->split > bx[best])) nd->split = bx[D + best];
}

/* Decides active node id (cell given) and partitions its range into the two children slots
 * at c (c, c + 1); par: use all threads inside the node. */
static void large_one(build *b, uint64_t id, const double *cell, uint64_t c, int *side, int par)
{
    const size_t cs = 2 * (size_t)b->D;
    bnode *nd = &b->nodes[id], *l = &b->nodes[c], *r = l + 1;
    uint64_t cnt = nd->end - nd->begin, nl;
    large_decide(b->D, b->bounds + id * cs, cell, nd, side);
    if (nd->kind == GROVE_KDTREE_LEAF) {
        nd->left = nd->right = 0;
        return;
    }
    if (nd->kind == GROVE_KDTREE_EMPTY)
        nl = *side == 0 ? 0 : cnt;
    else
        nl = partition(b, nd->begin, nd->end, nd->axis, nd->split, par);
    l->begin = nd->begin;
    l->end = r->begin = nd->begin + nl;
    r->end = nd->end;
    l->left = l->right = r->left = r->right = 0;
    l->axis = r->axis = -1;
    l->kind = r->kind = GROVE_KDTREE_LEAF;
    l->split = r->split = 0.0;
}

/* Runs the large-node stage from the root; appends the small-node roots (ids of nodes with 1 to
 * 64 points that are not yet decided) to *small. */
static grove_status large_stage(build *b, uint64_t **small_out, size_t *nsmall_out)
{
    grove_status st = GROVE_OK;
    const int D = b->D;
    const size_t cs = 2 * (size_t)D;
    uint64_t *act = NULL, *nxt = NULL, *small = NULL;
    double *cell = NULL, *ncell = NULL;
    size_t nact = 0, nsmall = 0, cap_small = 0;
    uint64_t n = b->nodes[0].end;

    if (n <= GROVE__KD_SMALL) {
        small = (uint64_t *)malloc(sizeof *small);
        if (!small)
            return grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                                "grove_kdtree_build: out of memory");
        small[0] = 0;
        *small_out = small;
        *nsmall_out = 1;
        return GROVE_OK;
    }
    act = (uint64_t *)malloc(sizeof *act);
    cell = (double *)malloc(cs * sizeof *cell);
    if (!act || !cell) {
        st = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY, "grove_kdtree_build: out of memory");
        goto _end;
    }
    act[0] = 0;
    nact = 1;
    range_box(b, 0, n, b->bounds, n >= KD_BIG);
    memcpy(cell, b->bounds, cs * sizeof *cell);

    while (nact > 0) {
        size_t base = b->num, nnext = 0;
        int *side = NULL;
        GROVE_TRY_END(st, grow(b, base + 2 * nact));
        side = (int *)malloc(nact * sizeof *side);
        if (!side) {
            st = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY, "grove_kdtree_build: out of memory");
            goto _end;
        }
        /* Decide and partition: big nodes one at a time with all threads, then the others one
         * per thread. The children of active node j go to slots base + 2j and base + 2j + 1. */
        for (size_t j = 0; j < nact; j++)
            if (b->nodes[act[j]].end - b->nodes[act[j]].begin >= KD_BIG)
                large_one(b, act[j], cell + j * cs, base + 2 * j, &side[j], 1);
#pragma omp parallel for num_threads(b->nt) schedule(dynamic, 1) if (nact > 1)
        for (size_t j = 0; j < nact; j++)
            if (b->nodes[act[j]].end - b->nodes[act[j]].begin < KD_BIG)
                large_one(b, act[j], cell + j * cs, base + 2 * j, &side[j], 0);
        /* Slots were reserved for every active node; the ones of nodes that became leaves are
         * squeezed out so that construction ids stay dense and in active-list order. */
        {
            size_t w = base;
            for (size_t j = 0; j < nact; j++) {
                bnode *nd = &b->nodes[act[j]];
                if (nd->kind == GROVE_KDTREE_LEAF) continue;
                if (w != base + 2 * j) {
                    b->nodes[w] = b->nodes[base + 2 * j];
                    b->nodes[w + 1] = b->nodes[base + 2 * j + 1];
                }
                nd->left = w;
                nd->right = w + 1;
                w += 2;
            }
            b->num = w;
        }
        /* Next level's large nodes and their cells; the rest become small roots or leaves. */
        nxt = (uint64_t *)malloc(2 * nact * sizeof *nxt);
        ncell = (double *)malloc(2 * nact * cs * sizeof *ncell);
        if (!nxt || !ncell) {
            free(side);
            st = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY, "grove_kdtree_build: out of memory");
            goto _end;
        }
        for (size_t j = 0; j < nact; j++) {
            bnode *nd = &b->nodes[act[j]];
            if (nd->kind == GROVE_KDTREE_LEAF) continue;
            for (int c = 0; c < 2; c++) {
                uint64_t id = c ? nd->right : nd->left;
                bnode *ch = &b->nodes[id];
                uint64_t cnt = ch->end - ch->begin;
                double *cc;
                if (cnt == 0) {
                    set_empty_box(b->bounds + id * cs, D);
                    continue;
                }
                if (cnt <= GROVE__KD_SMALL) {
                    if (nsmall == cap_small) {
                        size_t nc = cap_small ? 2 * cap_small : 1024;
                        uint64_t *ns = (uint64_t *)realloc(small, nc * sizeof *ns);
                        if (!ns) {
                            free(side);
                            st = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                                              "grove_kdtree_build: out of memory");
                            goto _end;
                        }
                        small = ns;
                        cap_small = nc;
                    }
                    small[nsmall++] = id;
                    continue;
                }
                cc = ncell + nnext * cs;
                memcpy(cc, cell + j * cs, cs * sizeof *cc);
                if (nd->kind == GROVE_KDTREE_EMPTY) {
                    /* the non-empty side's cell ends at the tight box, so it is never cut again */
                    if (side[j] == 0)
                        cc[nd->axis] = b->bounds[act[j] * cs + (size_t)nd->axis];
                    else
                        cc[D + nd->axis] = b->bounds[act[j] * cs + (size_t)(D + nd->axis)];
                } else if (c == 0) {
                    cc[D + nd->axis] = nd->split;
                } else {
                    cc[nd->axis] = nd->split;
                }
                nxt[nnext++] = id;
            }
        }
        free(side);
        /* Tight boxes of the next level (big nodes with all threads, the rest in parallel). */
        for (size_t j = 0; j < nnext; j++) {
            bnode *nd = &b->nodes[nxt[j]];
            if (nd->end - nd->begin >= KD_BIG)
                range_box(b, nd->begin, nd->end, b->bounds + nxt[j] * cs, 1);
        }
#pragma omp parallel for num_threads(b->nt) schedule(dynamic, 4) if (nnext > 1)
        for (size_t j = 0; j < nnext; j++) {
            bnode *nd = &b->nodes[nxt[j]];
            if (nd->end - nd->begin < KD_BIG)
                range_box(b, nd->begin, nd->end, b->bounds + nxt[j] * cs, 0);
        }
        /* the next level becomes the active one; the old arrays go, the next level allocates */
        free(act);
        free(cell);
        act = nxt;
        cell = ncell;
        nxt = NULL;
        ncell = NULL;
        nact = nnext;
    }
    *small_out = small;
    *nsmall_out = nsmall;
    small = NULL;
_end:
    free(act);
    free(nxt);
    free(cell);
    free(ncell);
    free(small);
    return st;
}

/* ---- small-node stage ---- */

/* Scratch of one thread for one small root of m <= 64 points. */
typedef struct small_ws {
    double px[GROVE__KD_SMALL * GROVE_KDTREE_MAX_DIMS];  /* local point p's coordinates */
    uint64_t gid[GROVE__KD_SMALL];                       /* local point -> input position */
    uint8_t ord[GROVE_KDTREE_MAX_DIMS][GROVE__KD_SMALL]; /* per axis, node ranges sorted */
    uint8_t seq[GROVE__KD_SMALL];                        /* tree order of local points */
    uint8_t tmpo[GROVE__KD_SMALL];
    uint8_t side[GROVE__KD_SMALL];
    double pre[(GROVE__KD_SMALL + 1) * 2 * GROVE_KDTREE_MAX_DIMS];
} small_ws;

/* Per thread: the nodes its small roots produced (local id 0 of each root is the root itself
 * and is kept in the root's own slot). */
typedef struct tvec {
    bnode *nodes;
    double *bounds;
    size_t n, cap;
} tvec;

static int tvec_push(tvec *v, int D)
{
    if (v->n == v->cap) {
        size_t nc = v->cap ? 2 * v->cap : 256;
        bnode *nn = (bnode *)realloc(v->nodes, nc * sizeof *nn);
        double *nb;
        if (!nn) return -1;
        v->nodes = nn;
        nb = (double *)realloc(v->bounds, nc * 2 * (size_t)D * sizeof *nb);
        if (!nb) return -1;
        v->bounds = nb;
        v->cap = nc;
    }
    v->n++;
    return 0;
}

/* Inflated volume of a box: prod_d (ext_d + infl), one rounding per statement. */
static double box_measure(const double *lo, const double *hi, int D, double infl)
{
    double m = 1.0;
    for (int d = 0; d < D; d++) {
        double e = hi[d] - lo[d];
        double f = e + infl;
        m = m * f;
    }
    return m;
}

/* Best plane of the local node with sorted lists ord[d][a..e): the least
 * nl * M(left) + nr * M(right), ties to the smaller axis, then the smaller plane. Returns 0 if
 * no plane separates the points (all equal). */
static int small_best(small_ws *w, int D, int a, int e, const double *bx, int *axis, double *split)
{
    const int m = e - a;
    const size_t cs = 2 * (size_t)D;
    double ext_max = 0.0, infl, best = INFINITY, sq;
    int found = 0;
    for (int d = 0; d < D; d++) {
        double ex = bx[D + d] - bx[d];
        ext_max = ex > ext_max ? ex : ext_max;
    }
    /* A nearest-neighbour ball around a query here has a radius of about the point spacing,
     * extent / sqrt(m) (sqrt is correctly rounded everywhere); the chance that it reaches a
     * child grows with the child's box inflated by that radius on every side. */
    sq = sqrt((double)m);
    infl = ext_max / sq;
    infl = 2.0 * infl;
    for (int d = 0; d < D; d++) {
        const uint8_t *o = w->ord[d];
        double *pre = w->pre;
        double lo[GROVE_KDTREE_MAX_DIMS], hi[GROVE_KDTREE_MAX_DIMS];
        /* prefix boxes: pre[i] is the box of the first i points in axis-d order */
        for (int k = 0; k < D; k++) {
            lo[k] = INFINITY;
            hi[k] = -INFINITY;
        }
        for (int i = 0; i < m; i++) {
            const double *p = w->px + (size_t)o[a + i] * (size_t)D;
            for (int k = 0; k < D; k++) {
                lo[k] = p[k] < lo[k] ? p[k] : lo[k];
                hi[k] = p[k] > hi[k] ? p[k] : hi[k];
            }
            memcpy(pre + (size_t)(i + 1) * cs, lo, (size_t)D * sizeof *lo);
            memcpy(pre + (size_t)(i + 1) * cs + D, hi, (size_t)D * sizeof *hi);
        }
        for (int k = 0; k < D; k++) {
            lo[k] = INFINITY;
            hi[k] = -INFINITY;
        }
        /* suffix sweep from the back, evaluating the plane before point i */
        for (int i = m - 1; i >= 1; i--) {
            const double *p = w->px + (size_t)o[a + i] * (size_t)D;
            const double *q = w->px + (size_t)o[a + i - 1] * (size_t)D;
            for (int k = 0; k < D; k++) {
                lo[k] = p[k] < lo[k] ? p[k] : lo[k];
                hi[k] = p[k] > hi[k] ? p[k] : hi[k];
            }
            if (q[d] < p[d]) {
                double ml = box_measure(pre + (size_t)i * cs, pre + (size_t)i * cs + D, D, infl);
                double mr = box_measure(lo, hi, D, infl);
                double cl = (double)i * ml;
                double cr = (double)(m - i) * mr;
                double c = cl + cr;
                /* i descends, so among equal costs on one axis the later (smaller) plane
                 * wins; a later axis must be strictly better */
                if (!found || c < best || (c == best && *axis == d)) {
                    best = c;
                    *axis = d;
                    *split = p[d];
                    found = 1;
                }
            }
        }
    }
    return found;
}

/* Builds the subtree of small root `root` (1..64 points) into v; returns the number of nodes
 * it added to v (the root's own node is v->nodes[first] and goes back to its slot). */
static int small_build(build *b, small_ws *w, tvec *v, uint64_t root, size_t *first)
{
    const int D = b->D;
    const size_t cs = 2 * (size_t)D;
    bnode *rn = &b->nodes[root];
    const uint64_t B = rn->begin;
    const int m = (int)(rn->end - rn->begin);
    /* stack of (local node id in v, local range) */
    size_t stk[2 * GROVE__KD_SMALL + 2];
    int sa[2 * GROVE__KD_SMALL + 2], se[2 * GROVE__KD_SMALL + 2];
    int sp = 0;

    for (int p = 0; p < m; p++) {
        w->gid[p] = b->perm[B + (uint64_t)p];
        memcpy(w->px + (size_t)p * (size_t)D, b->x + (B + (uint64_t)p) * (uint64_t)D,
               (size_t)D * sizeof(double));
        w->seq[p] = (uint8_t)p;
    }
    /* per-axis order by (coordinate, local position), insertion sort (m <= 64) */
    for (int d = 0; d < D; d++) {
        uint8_t *o = w->ord[d];
        for (int i = 0; i < m; i++) {
            int j = i;
            double vi = w->px[(size_t)i * (size_t)D + (size_t)d];
            while (j > 0 && w->px[(size_t)o[j - 1] * (size_t)D + (size_t)d] > vi) {
                o[j] = o[j - 1];
                j--;
            }
            o[j] = (uint8_t)i;
        }
    }
    *first = v->n;
    if (tvec_push(v, D)) return -1;
    v->nodes[*first] = *rn;
    stk[sp] = *first;
    sa[sp] = 0;
    se[sp++] = m;
    while (sp > 0) {
        size_t id;
        int a, e, axis = -1, nl = 0;
        double split = 0.0, *bx;
        bnode *nd;
        sp--;
        id = stk[sp];
        a = sa[sp];
        e = se[sp];
        bx = v->bounds + id * cs;
        for (int k = 0; k < D; k++) {
            bx[k] = INFINITY;
            bx[D + k] = -INFINITY;
        }
        for (int i = a; i < e; i++) {
            const double *p = w->px + (size_t)w->seq[i] * (size_t)D;
            for (int k = 0; k < D; k++) {
                bx[k] = p[k] < bx[k] ? p[k] : bx[k];
                bx[D + k] = p[k] > bx[D + k] ? p[k] : bx[D + k];
            }
        }
        nd = &v->nodes[id];
        nd->left = nd->right = 0;
        nd->axis = -1;
        nd->kind = GROVE_KDTREE_LEAF;
        nd->split = 0.0;
        if (e - a <= b->leaf || !small_best(w, D, a, e, bx, &axis, &split)) continue;
        /* stable partition of the tree order and of every sorted list */
        for (int i = a; i < e; i++) {
            uint8_t p = w->seq[i];
            w->side[p] = w->px[(size_t)p * (size_t)D + (size_t)axis] < split;
            nl += w->side[p];
        }
        {
            int l = a, r = a + nl;
            for (int i = a; i < e; i++) {
                uint8_t p = w->seq[i];
                if (w->side[p])
                    w->tmpo[l++] = p;
                else
                    w->tmpo[r++] = p;
            }
            memcpy(w->seq + a, w->tmpo + a, (size_t)(e - a));
        }
        for (int d = 0; d < D; d++) {
            int l = a, r = a + nl;
            for (int i = a; i < e; i++) {
                uint8_t p = w->ord[d][i];
                if (w->side[p])
                    w->tmpo[l++] = p;
                else
                    w->tmpo[r++] = p;
            }
            memcpy(w->ord[d] + a, w->tmpo + a, (size_t)(e - a));
        }
        {
            size_t li = v->n, ri = v->n + 1;
            if (tvec_push(v, D) || tvec_push(v, D)) return -1;
            nd = &v->nodes[id]; /* v may have moved */
            nd->axis = axis;
            nd->kind = GROVE_KDTREE_COST;
            nd->split = split;
            nd->left = li;
            nd->right = ri;
            v->nodes[li].begin = B + (uint64_t)a;
            v->nodes[li].end = v->nodes[ri].begin = B + (uint64_t)(a + nl);
            v->nodes[ri].end = B + (uint64_t)e;
            /* right first, so the left subtree is finished first (order does not matter for
             * the result, only the ids' parent-before-child property) */
            stk[sp] = ri;
            sa[sp] = a + nl;
            se[sp++] = e;
            stk[sp] = li;
            sa[sp] = a;
            se[sp++] = a + nl;
        }
    }
    for (int i = 0; i < m; i++) b->perm[B + (uint64_t)i] = w->gid[w->seq[i]];
    return (int)(v->n - *first);
}

static grove_status small_stage(build *b, const uint64_t *small, size_t nsmall)
{
    grove_status st = GROVE_OK;
    const int D = b->D;
    const size_t cs = 2 * (size_t)D;
    int nt = b->nt, failed = 0;
    tvec *tv = (tvec *)calloc((size_t)nt, sizeof *tv);
    uint64_t *where = (uint64_t *)malloc((nsmall ? nsmall : 1) * 3 * sizeof *where);
    if (!tv || !where) {
        st = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY, "grove_kdtree_build: out of memory");
        goto _end;
    }
#pragma omp parallel num_threads(nt)
    {
        int tid = 0;
        small_ws *w = (small_ws *)malloc(sizeof *w);
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        if (!w) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 16)
        for (size_t r = 0; r < nsmall; r++) {
            size_t first = 0;
            int cnt;
            int f;
#pragma omp atomic read
            f = failed;
            if (f) continue;
            cnt = small_build(b, w, &tv[tid], small[r], &first);
            if (cnt < 0) {
#pragma omp atomic write
                failed = 1;
                continue;
            }
            where[3 * r] = (uint64_t)tid;
            where[3 * r + 1] = first;
            where[3 * r + 2] = (uint64_t)cnt;
        }
        free(w);
    }
    if (failed) {
        st = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "grove_kdtree_build: out of memory in the small-node stage");
        goto _end;
    }
    {
        /* place every root's descendants after all earlier roots' (root order, so the ids do
         * not depend on the threads) */
        size_t total = b->num;
        uint64_t *pos = (uint64_t *)malloc((nsmall ? nsmall : 1) * sizeof *pos);
        if (!pos) {
            st = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY, "grove_kdtree_build: out of memory");
            goto _end;
        }
        for (size_t r = 0; r < nsmall; r++) {
            pos[r] = total;
            total += where[3 * r + 2] - 1;
        }
        st = grow(b, total);
        if (st != GROVE_OK) {
            free(pos);
            goto _end;
        }
#pragma omp parallel for num_threads(nt) schedule(static) if (nsmall > 64)
        for (size_t r = 0; r < nsmall; r++) {
            const tvec *v = &tv[where[3 * r]];
            size_t first = where[3 * r + 1], cnt = where[3 * r + 2];
            for (size_t j = 0; j < cnt; j++) {
                const bnode *s = &v->nodes[first + j];
                uint64_t gid = j == 0 ? small[r] : pos[r] + j - 1;
                bnode *g = &b->nodes[gid];
                *g = *s;
                if (s->left) {
                    g->left = pos[r] + (s->left - first) - 1;
                    g->right = pos[r] + (s->right - first) - 1;
                }
                memcpy(b->bounds + gid * cs, v->bounds + (first + j) * cs, cs * sizeof(double));
            }
        }
        b->num = total;
        free(pos);
    }
_end:
    if (tv)
        for (int i = 0; i < nt; i++) {
            free(tv[i].nodes);
            free(tv[i].bounds);
        }
    free(tv);
    free(where);
    return st;
}

/* ---- output stage ---- */

static grove_status output_stage(build *b, const grove_coords *pts, grove_kdtree *t)
{
    const int D = b->D;
    const size_t cs = 2 * (size_t)D, N = b->num;
    uint64_t *size = (uint64_t *)malloc(N * sizeof *size);
    uint64_t *pre = (uint64_t *)malloc(N * sizeof *pre);
    uint64_t *depth = (uint64_t *)malloc(N * sizeof *depth);
    uint64_t maxd = 0;
    grove_status st = GROVE_OK;
    t->nodes = (grove_kdtree_node *)malloc(N * sizeof *t->nodes);
    t->bounds = (double *)malloc(N * cs * sizeof *t->bounds);
    if (!size || !pre || !depth || !t->nodes || !t->bounds) {
        st = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "grove_kdtree_build: out of memory for %zu nodes", N);
        goto _end;
    }
    for (size_t i = N; i-- > 0;) {
        const bnode *nd = &b->nodes[i];
        size[i] = 1 + (nd->left ? size[nd->left] + size[nd->right] : 0);
    }
    pre[0] = 0;
    depth[0] = 0;
    for (size_t i = 0; i < N; i++) {
        const bnode *nd = &b->nodes[i];
        if (!nd->left) continue;
        pre[nd->left] = pre[i] + 1;
        pre[nd->right] = pre[i] + 1 + size[nd->left];
        depth[nd->left] = depth[nd->right] = depth[i] + 1;
        if (depth[i] + 1 > maxd) maxd = depth[i] + 1;
    }
#pragma omp parallel for num_threads(b->nt) schedule(static) if (N > 4096)
    for (size_t i = 0; i < N; i++) {
        const bnode *nd = &b->nodes[i];
        grove_kdtree_node *o = &t->nodes[pre[i]];
        o->begin = nd->begin;
        o->end = nd->end;
        o->right = nd->left ? pre[nd->right] : 0;
        o->split = nd->split;
        o->axis = nd->left ? nd->axis : -1;
        o->kind = nd->left ? nd->kind : GROVE_KDTREE_LEAF;
        memcpy(t->bounds + pre[i] * cs, b->bounds + i * cs, cs * sizeof(double));
    }
    t->num_nodes = N;
    t->depth = (size_t)maxd;
    if (t->n > 0) {
        size_t es = grove__kd_coord_size(t->type) * (size_t)D;
        t->pts = malloc(t->n * es);
        if (!t->pts) {
            st = grove__error(b->ctx, GROVE_ERR_OUT_OF_MEMORY,
                              "grove_kdtree_build: out of memory for %zu points", t->n);
            goto _end;
        }
#pragma omp parallel for num_threads(b->nt) schedule(static) if (t->n > 65536)
        for (size_t i = 0; i < t->n; i++)
            memcpy((char *)t->pts + i * es, (const char *)pts->data + b->perm[i] * es, es);
        t->index = b->perm;
        b->perm = NULL;
    }
_end:
    free(size);
    free(pre);
    free(depth);
    return st;
}

grove_status grove__kd_build_cpu(grove_ctx *ctx, const grove_coords *pts, double *x,
                                 grove_kdtree *t)
{
    grove_status st = GROVE_OK;
    build b;
    uint64_t *small = NULL;
    size_t nsmall = 0;
    const uint64_t n = t->n;

    memset(&b, 0, sizeof b);
    b.ctx = ctx;
    b.x = x;
    b.D = t->dims;
    b.leaf = t->opts.leaf_size;
    b.nt = grove__threads(ctx);
    if (b.nt < 1) b.nt = 1;
    GROVE_TRY_END(st, grow(&b, 64));
    b.num = 1;
    b.nodes[0].begin = 0;
    b.nodes[0].end = n;
    b.nodes[0].left = b.nodes[0].right = 0;
    b.nodes[0].axis = -1;
    b.nodes[0].kind = GROVE_KDTREE_LEAF;
    b.nodes[0].split = 0.0;
    set_empty_box(b.bounds, b.D);
    if (n > 0) {
        b.perm = (uint64_t *)malloc(n * sizeof *b.perm);
        b.tmp = (uint64_t *)malloc(n * sizeof *b.tmp);
        b.xt = (double *)malloc(n * (uint64_t)b.D * sizeof *b.xt);
        if (!b.perm || !b.tmp || !b.xt) {
            st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                              "grove_kdtree_build: out of memory for %zu points", (size_t)n);
            goto _end;
        }
#pragma omp parallel for num_threads(b.nt) schedule(static) if (n > 65536)
        for (uint64_t i = 0; i < n; i++) b.perm[i] = i;
        GROVE_TRY_END(st, large_stage(&b, &small, &nsmall));
        GROVE_TRY_END(st, small_stage(&b, small, nsmall));
    }
    GROVE_TRY_END(st, output_stage(&b, pts, t));
_end:
    free(small);
    free(b.perm);
    free(b.tmp);
    free(b.xt);
    free(b.nodes);
    free(b.bounds);
    return st;
}
