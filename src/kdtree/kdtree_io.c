/*
 * kdtree_io.c - grove_kdtree_save() and grove_kdtree_load(): the versioned little-endian file of
 * docs/kdtree.md ("File format").
 *
 * Layout: a 64-byte header, the nodes (40 bytes each, the in-memory grove_kdtree_node with every
 * field little-endian), the bounds (2 * dims doubles per node), the points (n * dims floats or
 * doubles) and the index (n uint64). load trusts nothing the queries rely on: the sizes must
 * account for the file's length exactly, the preorder links must nest, every range must split
 * into its children's, every box must be the exact tight box of its points, the split rule must
 * hold, the index must be a permutation ascending inside each leaf, and the depth must be the
 * real one (the queries size their stacks by it).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kdtree_internal.h"

#define KD_MAGIC "GROVE-KD"
#define KD_VERSION 1u
#define KD_HEADER 64u
#define KD_NODE 40u

_Static_assert(sizeof(grove_kdtree_node) == KD_NODE, "node layout is the file layout");

/* A node as words: begin, end, right, split are 8 bytes; axis and kind 4. */
static int write_nodes(FILE *f, const grove_kdtree_node *nd, size_t count, int le)
{
    if (le) return grove__write_words(f, nd, count * KD_NODE / 8, 8, 1);
    for (size_t i = 0; i < count; i++) {
        unsigned char b[KD_NODE];
        uint64_t sp;
        memcpy(&sp, &nd[i].split, 8);
        grove__put64(b, nd[i].begin);
        grove__put64(b + 8, nd[i].end);
        grove__put64(b + 16, nd[i].right);
        grove__put64(b + 24, sp);
        grove__put32(b + 32, (uint32_t)nd[i].axis);
        grove__put32(b + 36, (uint32_t)nd[i].kind);
        if (fwrite(b, 1, KD_NODE, f) != KD_NODE) return errno ? errno : EIO;
    }
    return 0;
}

grove_status grove_kdtree_save(grove_ctx *ctx, const grove_kdtree *t, const char *path)
{
    static const char fn[] = "grove_kdtree_save";
    unsigned char h[KD_HEADER];
    char *tmp = NULL;
    FILE *f = NULL;
    int err = 0, le = grove__host_is_le();
    size_t D;

    GROVE_TRY(grove__check_ctx(ctx));
    if (!t) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: t is NULL", fn);
    if (!path) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: path is NULL", fn);
    if (!grove__kd_on_host(t))
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: the tree is on the device only: grove_kdtree_download() it first",
                            fn);
    D = (size_t)t->dims;
    memset(h, 0, sizeof h);
    memcpy(h, KD_MAGIC, 8);
    grove__put32(h + 8, KD_VERSION);
    grove__put32(h + 12, (uint32_t)t->dims);
    grove__put32(h + 16, (uint32_t)t->type);
    grove__put32(h + 20, (uint32_t)t->opts.leaf_size);
    grove__put64(h + 24, (uint64_t)t->n);
    grove__put64(h + 32, (uint64_t)t->num_nodes);
    grove__put64(h + 40, (uint64_t)t->depth);

    GROVE_TRY(grove__wfile_open(ctx, path, &tmp, &f));
    errno = 0;
    if (fwrite(h, 1, sizeof h, f) != sizeof h) err = errno ? errno : EIO;
    if (!err) err = write_nodes(f, t->nodes, t->num_nodes, le);
    if (!err) err = grove__write_words(f, t->bounds, t->num_nodes * 2 * D, 8, le);
    if (!err && t->n)
        err = grove__write_words(f, t->pts, t->n * D, grove__kd_coord_size(t->type), le);
    if (!err && t->n) err = grove__write_words(f, t->index, t->n, 8, le);
    return grove__wfile_commit(ctx, path, tmp, f, err);
}

/* ---- load ---- */

/* The tree's structure (header fields already checked). */
static grove_status check_tree(grove_ctx *ctx, const char *path, const grove_kdtree *t)
{
    const size_t N = t->num_nodes, D = (size_t)t->dims, cs = 2 * D, n = t->n;
    const grove_kdtree_node *nd = t->nodes;
    grove_status st = GROVE_OK;
    uint64_t *stk = (uint64_t *)malloc((N + 1) * sizeof *stk);
    uint64_t *dep = (uint64_t *)malloc((N + 1) * sizeof *dep);
    uint8_t *seen = (uint8_t *)calloc(n ? n : 1, 1);
    double *box = (double *)malloc(cs * sizeof *box);
    size_t sp = 0, visited = 0, maxd = 0;
#define BAD(...)                                                                                   \
    do {                                                                                           \
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT, __VA_ARGS__);                                  \
        goto _end;                                                                                 \
    } while (0)
    if (!stk || !dep || !seen || !box) {
        st =
            grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory checking the tree", path);
        goto _end;
    }
    for (size_t i = 0; i < n; i++) {
        if (t->index[i] >= n || seen[t->index[i]])
            BAD("%s: index entry %zu (%llu) is out of range or repeated", path, i,
                (unsigned long long)t->index[i]);
        seen[t->index[i]] = 1;
        for (size_t d = 0; d < D; d++)
            if (!isfinite(grove__kd_coord(t->pts, t->type, (int)D, i, (int)d)))
                BAD("%s: tree point %zu has a non-finite coordinate", path, i);
    }
    if (nd[0].begin != 0 || nd[0].end != n) BAD("%s: the root does not cover all points", path);
    stk[sp] = 0;
    dep[sp++] = 0;
    while (sp > 0) {
        uint64_t id = stk[--sp], d0 = dep[sp];
        const grove_kdtree_node *a = &nd[id];
        const double *b = t->bounds + id * cs;
        if (id != visited) BAD("%s: node %llu is out of preorder", path, (unsigned long long)id);
        visited++;
        maxd = d0 > maxd ? d0 : maxd;
        if (a->begin > a->end || a->end > n)
            BAD("%s: node %llu has a bad range", path, (unsigned long long)id);
        for (size_t d = 0; d < D; d++) {
            box[d] = INFINITY;
            box[D + d] = -INFINITY;
        }
        /* exact tight box; O(n * depth) like a query of every point */
        for (uint64_t i = a->begin; i < a->end; i++)
            for (size_t d = 0; d < D; d++) {
                double v = grove__kd_coord(t->pts, t->type, (int)D, i, (int)d) + 0.0;
                box[d] = v < box[d] ? v : box[d];
                box[D + d] = v > box[D + d] ? v : box[D + d];
            }
        if (memcmp(box, b, cs * sizeof *box) != 0)
            BAD("%s: node %llu's box is not the tight box of its points", path,
                (unsigned long long)id);
        if (a->right == 0) {
            if (a->axis != -1 || a->kind != GROVE_KDTREE_LEAF)
                BAD("%s: leaf %llu has a split", path, (unsigned long long)id);
            for (uint64_t i = a->begin + 1; i < a->end; i++)
                if (t->index[i - 1] >= t->index[i])
                    BAD("%s: leaf %llu is not in input order", path, (unsigned long long)id);
            continue;
        }
        if (a->right <= id + 1 || a->right >= N || a->axis < 0 || (size_t)a->axis >= D ||
            a->kind < GROVE_KDTREE_MEDIAN || a->kind > GROVE_KDTREE_COST || isnan(a->split))
            BAD("%s: node %llu has a bad split or child link", path, (unsigned long long)id);
        {
            const grove_kdtree_node *l = &nd[id + 1], *r = &nd[a->right];
            if (l->begin != a->begin || l->end != r->begin || r->end != a->end)
                BAD("%s: node %llu's children do not split its range", path,
                    (unsigned long long)id);
            for (uint64_t i = a->begin; i < a->end; i++) {
                double v = grove__kd_coord(t->pts, t->type, (int)D, i, a->axis);
                if ((i < l->end) != (v < a->split))
                    BAD("%s: node %llu: tree point %llu is on the wrong side", path,
                        (unsigned long long)id, (unsigned long long)i);
            }
        }
        if (sp + 2 > N + 1) BAD("%s: node links form a cycle", path);
        stk[sp] = a->right;
        dep[sp++] = d0 + 1;
        stk[sp] = id + 1;
        dep[sp++] = d0 + 1;
    }
    if (visited != N) BAD("%s: %zu of %zu nodes are reachable", path, visited, N);
    if (maxd != t->depth) BAD("%s: header depth %zu, the tree's is %zu", path, t->depth, maxd);
#undef BAD
_end:
    free(stk);
    free(dep);
    free(seen);
    free(box);
    return st;
}

grove_status grove_kdtree_load(grove_ctx *ctx, const char *path, grove_kdtree **out)
{
    static const char fn[] = "grove_kdtree_load";
    unsigned char h[KD_HEADER];
    grove_status st = GROVE_OK;
    grove_kdtree *t = NULL;
    uint64_t n, nn, depth, size, want;
    uint32_t dims, type, leaf;
    size_t es;
    FILE *f;
    int le = grove__host_is_le();

    GROVE_TRY(grove__check_ctx(ctx));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!path) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: path is NULL", fn);
    GROVE_TRY(grove__binfile_open(ctx, path, KD_MAGIC, "k-d tree", KD_VERSION, h, sizeof h, &f,
                                  &size));
    dims = grove__get32(h + 12);
    type = grove__get32(h + 16);
    leaf = grove__get32(h + 20);
    n = grove__get64(h + 24);
    nn = grove__get64(h + 32);
    depth = grove__get64(h + 40);
    if (dims < 1 || dims > GROVE_KDTREE_MAX_DIMS || type > 1 || leaf < 1 ||
        leaf > GROVE_KDTREE_MAX_LEAF || grove__get64(h + 48) != 0 || grove__get64(h + 56) != 0) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: header: dims %u, type %u or leaf size %u out of range, or reserved "
                          "bytes 48..63 not 0",
                          path, dims, type, leaf);
        goto _end;
    }
    es = type ? 8 : 4;
    /* every size below is bounded by the file's length before it is multiplied out */
    if (nn < 1 || nn > size / KD_NODE || n > size / 8 || depth >= nn) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: header: %llu nodes, %llu points, depth %llu do not fit the file",
                          path, (unsigned long long)nn, (unsigned long long)n,
                          (unsigned long long)depth);
        goto _end;
    }
    want = KD_HEADER + nn * (KD_NODE + 16 * dims) + n * (es * dims + 8);
    if (want != size) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: %llu bytes, but the header's %llu nodes and %llu points need %llu",
                          path, (unsigned long long)size, (unsigned long long)nn,
                          (unsigned long long)n, (unsigned long long)want);
        goto _end;
    }
    t = (grove_kdtree *)calloc(1, sizeof *t);
    if (!t) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto _end;
    }
    t->dims = (int)dims;
    t->type = (grove_coord_type)type;
    t->opts.leaf_size = (int)leaf;
    t->n = (size_t)n;
    t->num_nodes = (size_t)nn;
    t->depth = (size_t)depth;
    t->nodes = (grove_kdtree_node *)malloc((size_t)nn * sizeof *t->nodes);
    t->bounds = (double *)malloc((size_t)nn * 2 * dims * sizeof *t->bounds);
    if (n) {
        t->pts = malloc((size_t)n * dims * es);
        t->index = (uint64_t *)malloc((size_t)n * sizeof *t->index);
    }
    if (!t->nodes || !t->bounds || (n && (!t->pts || !t->index))) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "%s: out of memory for %llu nodes and %llu points", fn,
                          (unsigned long long)nn, (unsigned long long)n);
        goto _end;
    }
    if (le) {
        GROVE_TRY_END(st,
                      grove__read_words(ctx, path, f, t->nodes, (size_t)nn * KD_NODE / 8, 8, 1));
    } else {
        for (uint64_t i = 0; i < nn; i++) {
            unsigned char b[KD_NODE];
            uint64_t sp;
            if (fread(b, 1, KD_NODE, f) != KD_NODE) {
                st = grove__error(ctx, GROVE_ERR_IO, "%s: read error", path);
                goto _end;
            }
            t->nodes[i].begin = grove__get64(b);
            t->nodes[i].end = grove__get64(b + 8);
            t->nodes[i].right = grove__get64(b + 16);
            sp = grove__get64(b + 24);
            memcpy(&t->nodes[i].split, &sp, 8);
            t->nodes[i].axis = (int32_t)grove__get32(b + 32);
            t->nodes[i].kind = (int32_t)grove__get32(b + 36);
        }
    }
    GROVE_TRY_END(st, grove__read_words(ctx, path, f, t->bounds, (size_t)nn * 2 * dims, 8, le));
    GROVE_TRY_END(st, grove__read_words(ctx, path, f, t->pts, (size_t)n * dims, es, le));
    GROVE_TRY_END(st, grove__read_words(ctx, path, f, t->index, (size_t)n, 8, le));
    GROVE_TRY_END(st, check_tree(ctx, path, t));
    *out = t;
    t = NULL;
_end:
    fclose(f);
    grove_kdtree_destroy(t);
    return st;
}
