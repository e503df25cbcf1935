/*
 * octree_potree.c - the octree's Potree output: grove_octree_write_potree() writes a Potree 2.0
 * directory (metadata.json + hierarchy.bin + octree.bin) plus grove.octree. The files are read
 * back elsewhere: grove.octree by octree_load.c, the Potree files by octree_export.c (with the
 * JSON reader of octree_json.c); octree_files.h has the constants they share. docs/FORMATS.md
 * ("Potree 2.0 output", "grove.octree") has the exact layouts.
 *
 * Potree names a child by childIndex = x << 2 | y << 1 | z (its loader's createChildAABB splits
 * on z for bit 0, y for bit 1, x for bit 2; PotreeConverter builds the index the same way),
 * while grove's octant is x | y << 1 | z << 2: the two differ by swapping bits 0 and 2. The
 * hierarchy is one chunk (no proxy nodes) whose records are breadth-first with each node's
 * children in Potree's childIndex order, which is the order the loader assigns records to
 * nodes in. octree.bin holds the entries in grove's node order, so every node's bytes are its
 * entry range [begin, end) times the record size.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "octree_files.h"
#include "octree_internal.h"
#include "octree_json.h"

/* Potree's childIndex of grove octant o, and back (the same swap of bits 0 and 2). */
static unsigned pt_child(unsigned o) { return ((o >> 2) & 1u) | (o & 2u) | ((o & 1u) << 2); }

int grove__ot_popcount8(unsigned m)
{
    int c = 0;
    for (; m; m &= m - 1) c++;
    return c;
}

/* Index of grove octant o's child among node p's children (consecutive, ascending octant). */
static uint32_t child_of(const grove_octree_node *p, unsigned o)
{
    return p->first_child + (uint32_t)grove__ot_popcount8(p->child_mask & ((1u << o) - 1u));
}

/* ---- paths ---- */

char *grove__ot_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    int slash = a > 0 && dir[a - 1] != '/';
    char *p = (char *)malloc(a + (size_t)slash + b + 1);
    if (!p) return NULL;
    memcpy(p, dir, a);
    if (slash) p[a] = '/';
    memcpy(p + a + (size_t)slash, name, b + 1);
    return p;
}

/* Creates dir and its missing parents. */
static grove_status make_dir(grove_ctx *ctx, const char *dir)
{
    struct stat st;
    size_t len = strlen(dir);
    char *buf;
    grove_status s = GROVE_OK;
    if (stat(dir, &st) == 0)
        return S_ISDIR(st.st_mode)
                   ? GROVE_OK
                   : grove__error(ctx, GROVE_ERR_IO, "%s: exists and is not a directory", dir);
    buf = (char *)malloc(len + 1);
    if (!buf) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
    memcpy(buf, dir, len + 1);
    for (size_t k = 1; k <= len && s == GROVE_OK; k++) {
        char c = buf[k];
        if ((c != '/' && c != '\0') || buf[k - 1] == '/') continue;
        buf[k] = '\0';
        if (mkdir(buf, 0777) != 0 &&
            (errno != EEXIST || stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)))
            s = grove__error(ctx, GROVE_ERR_IO, "%s: cannot create directory %s: %s", dir, buf,
                             errno == EEXIST ? "a file of that name exists" : strerror(errno));
        buf[k] = c;
    }
    free(buf);
    return s;
}

/* ---- the Potree layout of a tree ---- */

/* Potree's int32 position of coordinate x; 0 when it does not fit (*ok cleared). */
static int32_t pt_quant(double x, double offset, double scale, int *ok)
{
    double q = nearbyint((x - offset) / scale);
    if (!(q >= -2147483648.0 && q <= 2147483647.0)) {
        *ok = 0;
        return 0;
    }
    return (int32_t)q;
}

static int fits(const grove_octree *t, const grove__ot_layout *l)
{
    int ok = 1;
    for (size_t e = 0; e < t->num_entries && ok; e++)
        for (int a = 0; a < 3; a++)
            pt_quant(t->xyz[3 * e + (size_t)a], l->offset[a], l->scale[a], &ok);
    return ok;
}

/* The LAS scale and offset when the cloud has them and every entry fits int32 with them; else
 * the cube's low corner and the finest power of ten that keeps the cube's side below 2^30
 * steps (half the int32 range: room for rounding). */
static void choose_layout(const grove_octree *t, const grove_cloud *c, grove__ot_layout *l)
{
    memset(l, 0, sizeof *l);
    l->rgb = c && c->rgb;
    l->intensity = c && c->intensity;
    l->bpp = 12 + (l->rgb ? 6u : 0u) + (l->intensity ? 2u : 0u);
    if (c && c->has_scale) {
        int good = 1;
        for (int a = 0; a < 3; a++) {
            l->scale[a] = c->scale[a];
            l->offset[a] = c->offset[a];
            good &= isfinite(c->scale[a]) && c->scale[a] > 0 && isfinite(c->offset[a]);
        }
        if (good && fits(t, l)) return;
    }
    {
        double steps = 1073741824.0, s = pow(10.0, floor(log10(t->side / steps)));
        while (t->side / s >= steps) s *= 10.0;
        while (t->side / (s / 10.0) < steps) s /= 10.0;
        for (int a = 0; a < 3; a++) {
            l->scale[a] = s;
            l->offset[a] = t->lo[a];
        }
    }
}

/* ---- writing ---- */

typedef struct wbuf {
    FILE *f;
    int err;
    size_t n;
    unsigned char b[1 << 16];
} wbuf;

static void wb_flush(wbuf *w)
{
    errno = 0;
    if (w->n && !w->err && fwrite(w->b, 1, w->n, w->f) != w->n) w->err = errno ? errno : EIO;
    w->n = 0;
}

static unsigned char *wb_room(wbuf *w, size_t n)
{
    if (w->n + n > sizeof w->b) wb_flush(w);
    w->n += n;
    return w->b + w->n - n;
}

/* Opens a temporary file for path behind w; wb_commit flushes w and renames it into place. */
static grove_status wb_open(grove_ctx *ctx, const char *path, char **tmp, wbuf *w)
{
    w->err = 0;
    w->n = 0;
    return grove__wfile_open(ctx, path, tmp, &w->f);
}

static grove_status wb_commit(grove_ctx *ctx, const char *path, char *tmp, wbuf *w)
{
    wb_flush(w);
    return grove__wfile_commit(ctx, path, tmp, w->f, w->err);
}

static grove_status write_octree_bin(grove_ctx *ctx, const char *path, const grove_octree *t,
                                     const grove_cloud *c, const grove__ot_layout *l, wbuf *w)
{
    char *tmp;
    GROVE_TRY(wb_open(ctx, path, &tmp, w));
    for (size_t e = 0; e < t->num_entries && !w->err; e++) {
        unsigned char *b = wb_room(w, l->bpp);
        uint32_t i = t->index[e];
        int ok = 1;
        for (int a = 0; a < 3; a++)
            grove__put32(b + 4 * a, (uint32_t)pt_quant(t->xyz[3 * e + (size_t)a], l->offset[a],
                                                       l->scale[a], &ok));
        b += 12;
        if (l->rgb) {
            for (int a = 0; a < 3; a++) {
                b[2 * a] = (unsigned char)c->rgb[3 * (size_t)i + (size_t)a];
                b[2 * a + 1] = (unsigned char)(c->rgb[3 * (size_t)i + (size_t)a] >> 8);
            }
            b += 6;
        }
        if (l->intensity) {
            b[0] = (unsigned char)c->intensity[i];
            b[1] = (unsigned char)(c->intensity[i] >> 8);
        }
    }
    return wb_commit(ctx, path, tmp, w);
}

/* The Potree breadth-first order: order[k] is the grove node of the k-th record. */
static grove_status potree_order(grove_ctx *ctx, const grove_octree *t, uint32_t **out)
{
    uint32_t *order = (uint32_t *)malloc(t->num_nodes * sizeof *order);
    size_t tail = 1;
    *out = NULL;
    if (!order)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "out of memory for %zu nodes",
                            t->num_nodes);
    order[0] = 0;
    for (size_t k = 0; k < tail; k++) {
        const grove_octree_node *p = &t->nodes[order[k]];
        for (unsigned pc = 0; pc < 8; pc++) {
            unsigned o = pt_child(pc);
            if (p->child_mask >> o & 1u) order[tail++] = child_of(p, o);
        }
    }
    *out = order;
    return GROVE_OK;
}

static grove_status write_hierarchy(grove_ctx *ctx, const char *path, const grove_octree *t,
                                    const uint32_t *order, const grove__ot_layout *l, wbuf *w)
{
    char *tmp;
    GROVE_TRY(wb_open(ctx, path, &tmp, w));
    for (size_t k = 0; k < t->num_nodes && !w->err; k++) {
        const grove_octree_node *nd = &t->nodes[order[k]];
        unsigned char *b = wb_room(w, GROVE__OT_PT_RECORD);
        unsigned mask = 0;
        for (unsigned o = 0; o < 8; o++)
            if (nd->child_mask >> o & 1u) mask |= 1u << pt_child(o);
        b[0] = nd->child_mask ? 0 : 1; /* normal, leaf */
        b[1] = (unsigned char)mask;
        grove__put32(b + 2, (uint32_t)(nd->end - nd->begin));
        grove__put64(b + 6, nd->begin * l->bpp);
        grove__put64(b + 14, (nd->end - nd->begin) * l->bpp);
    }
    return wb_commit(ctx, path, tmp, w);
}

static void put_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void put_vec(FILE *f, const double *v, int count)
{
    char b[64];
    fputc('[', f);
    for (int i = 0; i < count; i++) {
        grove__ot_fmt_double(b, sizeof b, v[i]);
        fprintf(f, "%s%s", i ? ", " : "", b);
    }
    fputc(']', f);
}

static void put_attr(FILE *f, const char *name, int elements, const char *type, int elsize,
                     const double *mn, const double *mx, const double *scale, const double *offset,
                     int last)
{
    fprintf(f, "\t\t{\n\t\t\t\"name\": ");
    put_str(f, name);
    fprintf(f,
            ",\n\t\t\t\"description\": \"\",\n\t\t\t\"size\": %d,\n\t\t\t\"numElements\": %d,\n"
            "\t\t\t\"elementSize\": %d,\n\t\t\t\"type\": \"%s\",\n\t\t\t\"min\": ",
            elements * elsize, elements, elsize, type);
    put_vec(f, mn, elements);
    fprintf(f, ",\n\t\t\t\"max\": ");
    put_vec(f, mx, elements);
    fprintf(f, ",\n\t\t\t\"scale\": ");
    put_vec(f, scale, elements);
    fprintf(f, ",\n\t\t\t\"offset\": ");
    put_vec(f, offset, elements);
    fprintf(f, "\n\t\t}%s\n", last ? "" : ",");
}

static grove_status write_metadata(grove_ctx *ctx, const char *path, const char *dir,
                                   const grove_octree *t, const grove_cloud *c,
                                   const grove__ot_layout *l)
{
    static const double ones[3] = {1, 1, 1}, zeros[3] = {0, 0, 0};
    double mn[3], mx[3], cmn[3] = {0, 0, 0}, cmx[3] = {0, 0, 0}, imn = 0, imx = 0, hi[3];
    char *tmp, num[64];
    const char *name = dir + strlen(dir);
    size_t namelen = 0;
    FILE *f;
    int err = 0;
    /* the directory's last component names the cloud */
    while (name > dir && name[-1] == '/') name--;
    while (name > dir && name[-1] != '/') name--, namelen++;
    for (int a = 0; a < 3; a++) {
        mn[a] = t->n ? INFINITY : t->lo[a];
        mx[a] = t->n ? -INFINITY : t->lo[a];
        hi[a] = t->lo[a] + t->side;
    }
    for (size_t e = 0; e < t->num_entries; e++)
        for (int a = 0; a < 3; a++) {
            double x = t->xyz[3 * e + (size_t)a];
            mn[a] = x < mn[a] ? x : mn[a];
            mx[a] = x > mx[a] ? x : mx[a];
        }
    if (t->n && (l->rgb || l->intensity)) {
        for (int a = 0; a < 3; a++) cmn[a] = 65535, cmx[a] = 0;
        imn = 65535;
        for (size_t i = 0; i < t->n; i++) {
            for (int a = 0; a < 3 && l->rgb; a++) {
                double v = c->rgb[3 * i + (size_t)a];
                cmn[a] = v < cmn[a] ? v : cmn[a];
                cmx[a] = v > cmx[a] ? v : cmx[a];
            }
            if (l->intensity) {
                double v = c->intensity[i];
                imn = v < imn ? v : imn;
                imx = v > imx ? v : imx;
            }
        }
    }
    GROVE_TRY(grove__wfile_open(ctx, path, &tmp, &f));
    {
        char nm[256];
        size_t k = namelen < sizeof nm - 1 ? namelen : sizeof nm - 1;
        memcpy(nm, name, k);
        nm[k] = '\0';
        fprintf(f, "{\n\t\"version\": \"2.0\",\n\t\"name\": ");
        put_str(f, k ? nm : "grove");
    }
    fprintf(f,
            ",\n\t\"description\": \"written by grove %s\",\n\t\"points\": %zu,\n"
            "\t\"projection\": \"\",\n\t\"hierarchy\": {\n\t\t\"firstChunkSize\": %zu,\n"
            "\t\t\"stepSize\": %d,\n\t\t\"depth\": %d\n\t},\n\t\"offset\": ",
            grove_version(), t->n, t->num_nodes * GROVE__OT_PT_RECORD, t->depth + 1, t->depth);
    put_vec(f, l->offset, 3);
    fprintf(f, ",\n\t\"scale\": ");
    put_vec(f, l->scale, 3);
    grove__ot_fmt_double(num, sizeof num, t->side / (t->opts.lod_grid ? t->opts.lod_grid : 128));
    fprintf(f, ",\n\t\"spacing\": %s,\n\t\"boundingBox\": {\n\t\t\"min\": ", num);
    put_vec(f, t->lo, 3);
    fprintf(f, ",\n\t\t\"max\": ");
    put_vec(f, hi, 3);
    fprintf(f, "\n\t},\n\t\"encoding\": \"DEFAULT\",\n\t\"attributes\": [\n");
    put_attr(f, "position", 3, "int32", 4, mn, mx, l->scale, l->offset, !l->rgb && !l->intensity);
    if (l->rgb) put_attr(f, "rgb", 3, "uint16", 2, cmn, cmx, ones, zeros, !l->intensity);
    if (l->intensity) put_attr(f, "intensity", 1, "uint16", 2, &imn, &imx, ones, zeros, 1);
    fprintf(f, "\t]\n}\n");
    if (ferror(f)) err = errno ? errno : EIO;
    return grove__wfile_commit(ctx, path, tmp, f, err);
}

static void put_node(unsigned char *b, const grove_octree_node *nd)
{
    memset(b, 0, GROVE__OT_NODE);
    grove__put64(b, nd->begin);
    grove__put64(b + 8, nd->end);
    grove__put64(b + 16, nd->total);
    grove__put32(b + 24, nd->first_child);
    for (int a = 0; a < 3; a++) grove__put32(b + 28 + 4 * a, nd->cell[a]);
    b[40] = nd->depth;
    b[41] = nd->child_mask;
    b[42] = nd->octant;
}

static void put_f64(unsigned char *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    grove__put64(b, u);
}

static grove_status write_grove(grove_ctx *ctx, const char *path, const grove_octree *t, wbuf *w)
{
    unsigned char *h;
    char *tmp;
    int le = grove__host_is_le();
    GROVE_TRY(wb_open(ctx, path, &tmp, w));
    h = wb_room(w, GROVE__OT_HEADER);
    memset(h, 0, GROVE__OT_HEADER);
    memcpy(h, GROVE__OT_MAGIC, 8);
    grove__put32(h + 8, GROVE__OT_VERSION);
    grove__put64(h + 16, t->n);
    grove__put64(h + 24, t->num_nodes);
    grove__put64(h + 32, t->num_entries);
    grove__put32(h + 40, (uint32_t)t->depth);
    grove__put32(h + 44, t->opts.max_points);
    grove__put64(h + 48, (uint64_t)t->opts.batch);
    grove__put32(h + 56, (uint32_t)t->opts.max_depth);
    grove__put32(h + 60, (uint32_t)t->opts.lod_grid);
    for (int a = 0; a < 3; a++) put_f64(h + 64 + 8 * a, t->lo[a]);
    put_f64(h + 88, t->side);
    put_f64(h + 96, t->to_grid);
    for (size_t i = 0; i < t->num_nodes; i++) put_node(wb_room(w, GROVE__OT_NODE), &t->nodes[i]);
    wb_flush(w);
    if (!w->err) w->err = grove__write_words(w->f, t->index, t->num_entries, 4, le);
    if (!w->err) w->err = grove__write_words(w->f, t->xyz, 3 * t->num_entries, 8, le);
    return wb_commit(ctx, path, tmp, w);
}

grove_status grove_octree_write_potree(grove_ctx *ctx, const grove_octree *t,
                                       const grove_cloud *cloud, const char *dir)
{
    static const char fn[] = "grove_octree_write_potree";
    static const char *const names[4] = {"octree.bin", "hierarchy.bin", "grove.octree",
                                         "metadata.json"};
    char *path[4] = {NULL, NULL, NULL, NULL};
    uint32_t *order = NULL;
    wbuf *w = NULL;
    grove__ot_layout l;
    grove_status st = GROVE_OK;

    GROVE_TRY(grove__check_ctx(ctx));
    if (!t || !dir)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s is NULL", fn, t ? "dir" : "t");
    if (!dir[0]) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: dir is empty", fn);
    if (!t->nodes)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: the tree's arrays are on the device: call "
                            "grove_octree_download() first",
                            fn);
    if (cloud && cloud->n != t->n)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: the cloud has %zu points, the tree %zu", fn, cloud->n, t->n);
    GROVE_TRY(make_dir(ctx, dir));
    for (int k = 0; k < 4; k++)
        if (!(path[k] = grove__ot_join(dir, names[k]))) {
            st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
            goto _end;
        }
    w = (wbuf *)malloc(sizeof *w);
    if (!w) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto _end;
    }
    choose_layout(t, cloud, &l);
    GROVE_TRY_END(st, potree_order(ctx, t, &order));
    GROVE_TRY_END(st, write_octree_bin(ctx, path[0], t, cloud, &l, w));
    GROVE_TRY_END(st, write_hierarchy(ctx, path[1], t, order, &l, w));
    GROVE_TRY_END(st, write_grove(ctx, path[2], t, w));
    /* last: a viewer starts from metadata.json */
    GROVE_TRY_END(st, write_metadata(ctx, path[3], dir, t, cloud, &l));
_end:
    for (int k = 0; k < 4; k++) free(path[k]);
    free(order);
    free(w);
    return st;
}
