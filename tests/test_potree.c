/*
 * test_potree.c - the octree's files: grove_octree_write_potree(), grove_octree_load() and
 * grove_octree_export_level().
 *
 * - write then load gives the identical tree (every field, every entry bit for bit);
 * - the Potree files are re-read here independently of the library, the way Potree's loader
 *   reads them: hierarchy records breadth-first with children in childIndex order, a child's
 *   box split on z for bit 0, y for bit 1, x for bit 2. Each record must name the grove node
 *   with that box, its child mask, type, point count and byte range; the byte ranges tile
 *   octree.bin; positions decode to within scale / 2 of the entries, attributes exactly;
 * - export at every level against the entries of the nodes a viewer draws there;
 * - LAS scale and offset kept when they fit, a fitted scale otherwise;
 * - damaged grove.octree and Potree files: exact status and a message naming what is wrong;
 *   a failed write leaves no temporary file behind.
 * Usage: test_potree [--seed S] [--large N]
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grove/io.h"
#include "grove/octree.h"
#include "octree_check.h"
#include "testutil.h"

static grove_ctx *ctx;
static char root_dir[256];

/* ---- files ---- */

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *b;
    long sz;
    *len = 0;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = (unsigned char *)tu_malloc((size_t)sz + 1);
    *len = fread(b, 1, (size_t)sz, f);
    b[*len] = 0;
    fclose(f);
    return b;
}

static void write_all(const char *path, const void *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, len, f) != len) FAIL("cannot write %s", path);
    if (f) fclose(f);
}

static void path_of(char *out, size_t size, const char *dir, const char *name)
{
    if (snprintf(out, size, "%s/%s", dir, name) >= (int)size) FAIL("path too long: %s", dir);
}

static void copy_file(const char *from, const char *to)
{
    size_t len;
    unsigned char *b = read_all(from, &len);
    if (!b) {
        FAIL("cannot read %s", from);
        return;
    }
    write_all(to, b, len);
    free(b);
}

/* Copies the four files of directory `from` into `to` (created). */
static void copy_dir(const char *from, const char *to)
{
    static const char *const names[] = {"metadata.json", "hierarchy.bin", "octree.bin",
                                        "grove.octree"};
    mkdir(to, 0777);
    for (int k = 0; k < 4; k++) {
        char a[512], b[512];
        path_of(a, sizeof a, from, names[k]);
        path_of(b, sizeof b, to, names[k]);
        copy_file(a, b);
    }
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d) return;
    while ((e = readdir(d))) {
        char p[768];
        struct stat sb;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
            remove_dir(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* Number of entries in dir whose name contains `part`. */
static int count_names(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int c = 0;
    if (!d) return 0;
    while ((e = readdir(d)))
        if (strstr(e->d_name, part)) c++;
    closedir(d);
    return c;
}

/* ---- data ---- */

/* n points, half uniform in a box, half in a dense cluster; colour and intensity if asked. */
static void make_cloud(tu_rng *r, size_t n, int attrs, grove_cloud *c)
{
    memset(c, 0, sizeof *c);
    c->n = n;
    c->xyz = (double *)tu_malloc(3 * n * sizeof(double));
    for (size_t i = 0; i < n; i++)
        for (int a = 0; a < 3; a++) {
            double u = (double)(tu_next(r) >> 11) * 0x1p-53;
            c->xyz[3 * i + (size_t)a] = (i & 1) ? -40.0 + 170.0 * u : 10.0 + a + 0.25 * u * u;
        }
    if (attrs) {
        c->rgb = (uint16_t *)tu_malloc(3 * n * sizeof(uint16_t));
        c->intensity = (uint16_t *)tu_malloc(n * sizeof(uint16_t));
        for (size_t i = 0; i < 3 * n; i++) c->rgb[i] = (uint16_t)tu_u32(r);
        for (size_t i = 0; i < n; i++) c->intensity[i] = (uint16_t)tu_u32(r);
    }
}

static void free_cloud(grove_cloud *c)
{
    free(c->xyz);
    free(c->rgb);
    free(c->intensity);
    memset(c, 0, sizeof *c);
}

static grove_octree *build(const grove_cloud *c, uint32_t max_points, int lod_grid)
{
    grove_octree_opts o;
    grove_octree *t = NULL;
    grove_octree_default_opts(&o);
    o.max_points = max_points;
    o.lod_grid = lod_grid;
    o.batch = 1000;
    CHECK_OK(ctx, grove_octree_build(ctx, c->xyz, c->n, &o, &t, NULL));
    return t;
}

/* ---- write + load: the same tree ---- */

static void check_same(const grove_octree *a, const grove_octree *b, const char *what)
{
    grove_octree_opts oa, ob;
    char msg[256];
    if (!a || !b) {
        FAIL("%s: missing tree", what);
        return;
    }
    grove_octree_get_opts(a, &oa);
    grove_octree_get_opts(b, &ob);
    CHECK_MSG(oa.max_points == ob.max_points && oa.batch == ob.batch &&
                  oa.max_depth == ob.max_depth && oa.lod_grid == ob.lod_grid,
              "%s: options differ", what);
    CHECK_MSG(grove_octree_num_points(a) == grove_octree_num_points(b), "%s: n differs", what);
    CHECK_MSG(oc_same(a, b, msg, sizeof msg) == 0, "%s: %s", what, msg);
}

/* ---- the Potree files, read back independently ---- */

typedef struct meta {
    double scale[3], offset[3];
    long long first_chunk, points;
    size_t bpp;
    int rgb, intensity;
} meta;

static int json_vec(const char *js, const char *key, double *v)
{
    const char *p = strstr(js, key);
    return p && sscanf(p + strlen(key), " [%lf, %lf, %lf]", &v[0], &v[1], &v[2]) == 3;
}

static int read_meta(const char *dir, meta *m)
{
    char p[512];
    size_t len;
    char *js, *q;
    memset(m, 0, sizeof *m);
    path_of(p, sizeof p, dir, "metadata.json");
    js = (char *)read_all(p, &len);
    if (!js) return 0;
    if (!json_vec(js, "\"scale\":", m->scale) || !json_vec(js, "\"offset\":", m->offset) ||
        !(q = strstr(js, "\"firstChunkSize\":")) || sscanf(q + 17, "%lld", &m->first_chunk) != 1 ||
        !(q = strstr(js, "\"points\":")) || sscanf(q + 9, "%lld", &m->points) != 1) {
        FAIL("%s: metadata.json lacks scale, offset, firstChunkSize or points", dir);
        free(js);
        return 0;
    }
    CHECK(strstr(js, "\"version\": \"2.0\"") != NULL);
    CHECK(strstr(js, "\"encoding\": \"DEFAULT\"") != NULL);
    CHECK(strstr(js, "\"name\": \"position\"") != NULL);
    m->rgb = strstr(js, "\"name\": \"rgb\"") != NULL;
    m->intensity = strstr(js, "\"name\": \"intensity\"") != NULL;
    m->bpp = 12 + (m->rgb ? 6u : 0u) + (m->intensity ? 2u : 0u);
    free(js);
    return 1;
}

static int popc(unsigned m)
{
    int c = 0;
    for (; m; m &= m - 1) c++;
    return c;
}

static uint32_t get32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t get64(const unsigned char *b) { return get32(b) | (uint64_t)get32(b + 4) << 32; }

/* The grove node at `depth` whose cube is cell (or UINT32_MAX). */
static uint32_t find_node(const grove_octree *t, int depth, const uint32_t cell[3])
{
    const grove_octree_node *nd = grove_octree_nodes(t);
    uint32_t i = 0;
    for (int d = 0; d < depth; d++) {
        int sh = depth - 1 - d;
        unsigned o = (cell[0] >> sh & 1u) | (cell[1] >> sh & 1u) << 1 | (cell[2] >> sh & 1u) << 2;
        if (!(nd[i].child_mask >> o & 1u)) return UINT32_MAX;
        i = nd[i].first_child + (uint32_t)popc(nd[i].child_mask & ((1u << o) - 1u));
    }
    return i;
}

static double tol_of(const meta *m, int a, double x)
{
    return m->scale[a] * 0.5 * (1 + 1e-9) + fabs(x) * 1e-15;
}

/* Walks hierarchy.bin as Potree's loader does and checks every record against the tree and
 * every point record against its entry. */
static void check_potree(const char *dir, const grove_octree *t, const grove_cloud *c,
                         const char *what)
{
    meta m;
    char p[512];
    size_t hlen, olen, nn = grove_octree_num_nodes(t), nrec, tail = 1;
    unsigned char *h, *ob;
    const grove_octree_node *nd = grove_octree_nodes(t);
    const uint32_t *idx = grove_octree_entry_index(t);
    const double *xyz = grove_octree_entry_xyz(t);
    double lo[3], side;
    uint32_t(*cells)[4];
    uint64_t bytes = 0;
    int bad = 0;
    if (!read_meta(dir, &m)) return;
    grove_octree_cube(t, lo, &side);
    path_of(p, sizeof p, dir, "hierarchy.bin");
    h = read_all(p, &hlen);
    path_of(p, sizeof p, dir, "octree.bin");
    ob = read_all(p, &olen);
    if (!h || !ob) {
        FAIL("%s: hierarchy.bin or octree.bin missing", what);
        free(h);
        free(ob);
        return;
    }
    CHECK_MSG(m.points == (long long)grove_octree_num_points(t), "%s: points %lld", what, m.points);
    CHECK_MSG(m.rgb == (c && c->rgb) && m.intensity == (c && c->intensity),
              "%s: attributes listed do not match the cloud's", what);
    CHECK_MSG(hlen % 22 == 0 && hlen / 22 == nn && m.first_chunk == (long long)hlen,
              "%s: hierarchy.bin has %zu bytes, firstChunkSize %lld, %zu nodes", what, hlen,
              m.first_chunk, nn);
    nrec = hlen / 22;
    /* cells[k]: depth and cell of the k-th record, from Potree's child rule */
    cells = (uint32_t(*)[4])tu_malloc((nrec + 1) * sizeof *cells);
    memset(cells[0], 0, sizeof cells[0]);
    for (size_t k = 0; k < nrec && !bad; k++) {
        const unsigned char *r = h + 22 * k;
        unsigned type = r[0], mask = r[1], gmask = 0;
        uint32_t num = get32(r + 2), g;
        uint64_t off = get64(r + 6), size = get64(r + 14);
        const grove_octree_node *q;
        if (k >= tail) {
            FAIL("%s: record %zu is nobody's child", what, k);
            break;
        }
        g = find_node(t, (int)cells[k][3], cells[k]);
        if (g == UINT32_MAX) {
            FAIL("%s: record %zu (depth %u, cell %u %u %u) is no grove node", what, k, cells[k][3],
                 cells[k][0], cells[k][1], cells[k][2]);
            bad = 1;
            break;
        }
        q = &nd[g];
        for (unsigned pc = 0; pc < 8; pc++)
            if (mask >> pc & 1u) gmask |= 1u << ((pc >> 2 & 1u) | (pc & 2u) | (pc & 1u) << 2);
        if (gmask != q->child_mask || type != (q->child_mask ? 0u : 1u) ||
            num != q->end - q->begin || off != q->begin * m.bpp || size != num * m.bpp) {
            FAIL("%s: record %zu (node %u): type %u mask 0x%02x num %u off %llu size %llu do "
                 "not match the node",
                 what, k, g, type, mask, num, (unsigned long long)off, (unsigned long long)size);
            bad = 1;
            break;
        }
        bytes += size;
        for (unsigned pc = 0; pc < 8; pc++) {
            if (!(mask >> pc & 1u)) continue;
            if (tail > nrec) {
                FAIL("%s: masks announce more nodes than records", what);
                bad = 1;
                break;
            }
            /* Potree's createChildAABB: bit 0 z, bit 1 y, bit 2 x */
            cells[tail][0] = cells[k][0] << 1 | (pc >> 2 & 1u);
            cells[tail][1] = cells[k][1] << 1 | (pc >> 1 & 1u);
            cells[tail][2] = cells[k][2] << 1 | (pc & 1u);
            cells[tail][3] = cells[k][3] + 1;
            tail++;
        }
        /* positions within scale/2 of the entry, and inside the node's box */
        for (uint64_t e = q->begin; e < q->end && !bad; e++) {
            const unsigned char *b = ob + e * m.bpp;
            double w = side / (double)(1u << cells[k][3]);
            for (int a = 0; a < 3; a++) {
                double x = (double)(int32_t)get32(b + 4 * a) * m.scale[a] + m.offset[a];
                double want = xyz[3 * e + (size_t)a];
                double blo = lo[a] + cells[k][a] * w;
                if (fabs(x - want) > tol_of(&m, a, want) || x < blo - m.scale[a] ||
                    x > blo + w + m.scale[a]) {
                    FAIL("%s: entry %llu axis %d decodes to %.17g, entry %.17g, node box "
                         "[%.17g, %.17g]",
                         what, (unsigned long long)e, a, x, want, blo, blo + w);
                    bad = 1;
                    break;
                }
            }
            if (m.rgb && !bad)
                for (int a = 0; a < 3; a++)
                    if ((uint16_t)(b[12 + 2 * a] | b[13 + 2 * a] << 8) !=
                        c->rgb[3 * (size_t)idx[e] + (size_t)a]) {
                        FAIL("%s: entry %llu: rgb differs", what, (unsigned long long)e);
                        bad = 1;
                        break;
                    }
            if (m.intensity && !bad) {
                size_t at = m.rgb ? 18 : 12;
                if ((uint16_t)(b[at] | b[at + 1] << 8) != c->intensity[idx[e]]) {
                    FAIL("%s: entry %llu: intensity differs", what, (unsigned long long)e);
                    bad = 1;
                }
            }
        }
    }
    if (!bad) {
        CHECK_MSG(tail == nrec, "%s: masks announce %zu nodes, %zu records", what, tail, nrec);
        CHECK_MSG(bytes == olen && olen == grove_octree_num_entries(t) * m.bpp,
                  "%s: records cover %llu bytes, octree.bin has %zu", what,
                  (unsigned long long)bytes, olen);
    }
    free(cells);
    free(h);
    free(ob);
}

/* Export at every level against the entries of the nodes drawn there. */
static void check_export(const char *dir, const grove_octree *t, const grove_cloud *c,
                         const char *what)
{
    meta m;
    const grove_octree_node *nd = grove_octree_nodes(t);
    const uint32_t *idx = grove_octree_entry_index(t);
    const double *xyz = grove_octree_entry_xyz(t);
    int depth = grove_octree_depth(t);
    if (!read_meta(dir, &m)) return;
    for (int level = 0; level <= depth + 1; level++) {
        grove_cloud out;
        size_t at = 0, want = 0;
        int bad = 0;
        grove_status s = grove_octree_export_level(ctx, dir, level, &out);
        CHECK_OK(ctx, s);
        if (s != GROVE_OK) return;
        for (size_t i = 0; i < grove_octree_num_nodes(t); i++)
            if (nd[i].depth == level || (!nd[i].child_mask && nd[i].depth < level))
                want += nd[i].end - nd[i].begin;
        CHECK_MSG(out.n == want, "%s: level %d: %zu points, want %zu", what, level, out.n, want);
        CHECK_MSG((out.rgb != NULL) == (m.rgb && want) &&
                      (out.intensity != NULL) == (m.intensity && want),
                  "%s: level %d: attributes", what, level);
        if (level > depth) CHECK(want == grove_octree_num_points(t));
        for (size_t i = 0; i < grove_octree_num_nodes(t) && out.n == want && !bad; i++) {
            if (!(nd[i].depth == level || (!nd[i].child_mask && nd[i].depth < level))) continue;
            for (uint64_t e = nd[i].begin; e < nd[i].end && !bad; e++, at++) {
                for (int a = 0; a < 3; a++)
                    if (fabs(out.xyz[3 * at + (size_t)a] - xyz[3 * e + (size_t)a]) >
                        tol_of(&m, a, xyz[3 * e + (size_t)a]))
                        bad = 1;
                if (out.rgb && memcmp(out.rgb + 3 * at, c->rgb + 3 * (size_t)idx[e], 6)) bad = 1;
                if (out.intensity && out.intensity[at] != c->intensity[idx[e]]) bad = 1;
                if (bad)
                    FAIL("%s: level %d: point %zu differs from entry %llu", what, level, at,
                         (unsigned long long)e);
            }
        }
        grove_cloud_free(&out);
    }
}

/* ---- round trips ---- */

static void round_trip(tu_rng *r, size_t n, uint32_t max_points, int lod_grid, int attrs)
{
    char what[128], dir[512];
    grove_cloud c;
    grove_octree *t, *u = NULL;
    snprintf(what, sizeof what, "n=%zu max_points=%u lod_grid=%d attrs=%d", n, max_points, lod_grid,
             attrs);
    snprintf(dir, sizeof dir, "%s/rt-%zu-%u-%d-%d/sub", root_dir, n, max_points, lod_grid, attrs);
    make_cloud(r, n, attrs, &c);
    t = build(&c, max_points, lod_grid);
    if (!t) {
        free_cloud(&c);
        return;
    }
    /* the directory and its parent are created */
    CHECK_OK(ctx, grove_octree_write_potree(ctx, t, attrs ? &c : NULL, dir));
    CHECK_OK(ctx, grove_octree_load(ctx, dir, &u));
    check_same(t, u, what);
    {
        /* the loaded tree passes the tests' validator on its own */
        char msg[256];
        CHECK_MSG(!u || oc_check(u, c.xyz, c.n, n <= 1000, msg, sizeof msg, NULL) == 0,
                  "%s: loaded tree: %s", what, msg);
    }
    check_potree(dir, t, attrs ? &c : NULL, what);
    check_export(dir, t, attrs ? &c : NULL, what);
    CHECK_MSG(count_names(dir, "grove-tmp") == 0, "%s: temporary files left", what);
    /* writing the loaded tree again over the same directory reproduces grove.octree */
    {
        char gp[600];
        size_t l1, l2;
        unsigned char *g1, *g2;
        path_of(gp, sizeof gp, dir, "grove.octree");
        g1 = read_all(gp, &l1);
        CHECK_OK(ctx, grove_octree_write_potree(ctx, u, attrs ? &c : NULL, dir));
        g2 = read_all(gp, &l2);
        CHECK_MSG(g1 && g2 && l1 == l2 && !memcmp(g1, g2, l1),
                  "%s: grove.octree rewritten "
                  "differently",
                  what);
        free(g1);
        free(g2);
    }
    grove_octree_destroy(u);
    u = NULL;
    CHECK_OK(ctx, grove_octree_load(ctx, dir, &u));
    check_same(t, u, what);
    grove_octree_destroy(u);
    grove_octree_destroy(t);
    free_cloud(&c);
}

/* LAS scale and offset are kept when every point fits int32 with them. */
static void las_scale(tu_rng *r)
{
    char dir[512];
    grove_cloud c;
    grove_octree *t;
    meta m;
    make_cloud(r, 2000, 1, &c);
    c.has_scale = 1;
    for (int a = 0; a < 3; a++) c.scale[a] = 0.01, c.offset[a] = 100.0 * (a + 1);
    for (size_t i = 0; i < 3 * c.n; i++) {
        int a = (int)(i % 3);
        c.xyz[i] = (double)(int32_t)floor(c.xyz[i] * 100.0) * c.scale[a] + c.offset[a];
    }
    t = build(&c, 50, 8);
    snprintf(dir, sizeof dir, "%s/las", root_dir);
    if (t) {
        CHECK_OK(ctx, grove_octree_write_potree(ctx, t, &c, dir));
        if (read_meta(dir, &m)) {
            CHECK(m.scale[0] == 0.01 && m.scale[2] == 0.01 && m.offset[1] == 200.0);
            check_potree(dir, t, &c, "las scale");
        }
        {
            /* exact: the LAS integers come back */
            grove_cloud out;
            CHECK_OK(ctx, grove_octree_export_level(ctx, dir, 99, &out));
            CHECK(out.n == c.n && out.has_scale == 1 && out.scale[0] == 0.01);
            for (size_t i = 0; i < 3 * out.n && out.n == c.n; i++) {
                double v = (out.xyz[i] - out.offset[i % 3]) / 0.01;
                if (fabs(v - nearbyint(v)) > 1e-6) {
                    FAIL("las: exported coordinate %zu is off the LAS grid", i);
                    break;
                }
            }
            grove_cloud_free(&out);
        }
        grove_octree_destroy(t);
    }
    /* a scale too fine for int32: the fitted scale instead */
    c.scale[0] = 1e-9;
    t = build(&c, 50, 8);
    if (t) {
        CHECK_OK(ctx, grove_octree_write_potree(ctx, t, &c, dir));
        if (read_meta(dir, &m)) {
            CHECK_MSG(m.scale[0] > 1e-9 && m.scale[0] == m.scale[1], "scale %g", m.scale[0]);
            check_potree(dir, t, &c, "las scale refused");
        }
        grove_octree_destroy(t);
    }
    free_cloud(&c);
}

/* ---- damaged files ---- */

static void expect_load(const char *dir, grove_status want, const char *part, const char *what)
{
    grove_octree *t = (grove_octree *)&t; /* must be overwritten */
    grove_status s = grove_octree_load(ctx, dir, &t);
    CHECK_MSG(s == want, "%s: status %s, want %s (%s)", what, grove_status_string(s),
              grove_status_string(want), grove_ctx_last_error(ctx));
    CHECK_MSG(strstr(grove_ctx_last_error(ctx), part) != NULL, "%s: message '%s' lacks '%s'", what,
              grove_ctx_last_error(ctx), part);
    CHECK_MSG(s != GROVE_OK ? t == NULL : 1, "%s: *out not NULL on failure", what);
    if (s == GROVE_OK) grove_octree_destroy(t);
}

static void expect_export(const char *dir, grove_status want, const char *part, const char *what)
{
    grove_cloud out;
    grove_status s = grove_octree_export_level(ctx, dir, 3, &out);
    CHECK_MSG(s == want, "%s: status %s, want %s (%s)", what, grove_status_string(s),
              grove_status_string(want), grove_ctx_last_error(ctx));
    CHECK_MSG(strstr(grove_ctx_last_error(ctx), part) != NULL, "%s: message '%s' lacks '%s'", what,
              grove_ctx_last_error(ctx), part);
    CHECK_MSG(s == GROVE_OK || (out.n == 0 && out.xyz == NULL), "%s: *out not zeroed", what);
    grove_cloud_free(&out);
}

static uint32_t rd32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static void put32(unsigned char *b, uint32_t v)
{
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> 8 * i);
}

static void put64(unsigned char *b, uint64_t v)
{
    put32(b, (uint32_t)v);
    put32(b + 4, (uint32_t)(v >> 32));
}

/* grove.octree damaged at one place. */
typedef struct gcase {
    const char *what;
    long at;           /* byte to change (-1: none) */
    int width;         /* 1, 4 or 8 */
    uint64_t value;    /* new value */
    long cut;          /* new length (-1: keep), -2: append a byte */
    grove_status want; /* expected status */
    const char *part;  /* expected in the message */
} gcase;

static void bad_grove_files(tu_rng *r)
{
    char good[512], work[512], gpath[512], p[512];
    grove_cloud c;
    grove_octree *t;
    unsigned char *g;
    size_t glen;
    const long H = 128, N = 48; /* header, node record */
    long nn, ne, leaf = -1, inner = -1, xyz0;
    make_cloud(r, 300, 1, &c);
    t = build(&c, 40, 4);
    if (!t) {
        free_cloud(&c);
        return;
    }
    snprintf(good, sizeof good, "%s/good", root_dir);
    snprintf(work, sizeof work, "%s/work", root_dir);
    CHECK_OK(ctx, grove_octree_write_potree(ctx, t, &c, good));
    nn = (long)grove_octree_num_nodes(t);
    ne = (long)grove_octree_num_entries(t);
    for (long i = nn - 1; i >= 0; i--)
        if (!grove_octree_nodes(t)[i].child_mask &&
            grove_octree_nodes(t)[i].end - grove_octree_nodes(t)[i].begin >= 2)
            leaf = i;
    for (long i = 0; i < nn; i++)
        if (grove_octree_nodes(t)[i].child_mask && inner < 0) inner = i;
    CHECK(leaf >= 0 && inner == 0 && nn > 8);
    xyz0 = H + N * nn + 4 * ne;
    {
        const grove_octree_node *lf = &grove_octree_nodes(t)[leaf < 0 ? 0 : leaf];
        long e = (long)lf->begin;
        double far = 1e6;
        uint64_t far_bits;
        memcpy(&far_bits, &far, 8);
        const gcase cases[] = {
            {"wrong magic", 0, 1, 'X', -1, GROVE_ERR_BAD_INPUT, "not a grove octree file"},
            {"empty file", -1, 0, 0, 0, GROVE_ERR_BAD_INPUT, "not a grove octree file"},
            {"truncated header", -1, 0, 0, 60, GROVE_ERR_BAD_INPUT, "truncated header: 60 bytes"},
            {"version 2", 8, 4, 2, -1, GROVE_ERR_BAD_INPUT, "unsupported octree file version 2"},
            {"reserved word", 12, 4, 1, -1, GROVE_ERR_BAD_INPUT, "reserved bytes"},
            {"reserved tail", 120, 1, 1, -1, GROVE_ERR_BAD_INPUT, "reserved bytes"},
            {"truncated body", -1, 0, 0, xyz0 + 5, GROVE_ERR_BAD_INPUT, "truncated: "},
            {"trailing byte", -1, 0, 0, -2, GROVE_ERR_BAD_INPUT, "trailing data"},
            {"one node more", 24, 8, (uint64_t)nn + 1, -1, GROVE_ERR_BAD_INPUT, "truncated: "},
            {"zero nodes", 24, 8, 0, -1, GROVE_ERR_BAD_INPUT, "counts out of range"},
            {"fewer entries than points", 32, 8, 10, -1, GROVE_ERR_BAD_INPUT,
             "counts out of range"},
            {"max_points 0", 44, 4, 0, -1, GROVE_ERR_BAD_INPUT, "options out of range"},
            {"lod_grid 3", 60, 4, 3, -1, GROVE_ERR_BAD_INPUT, "options out of range"},
            {"side 0", 88, 8, 0, -1, GROVE_ERR_BAD_INPUT, "is not finite and positive"},
            {"depth beyond max_depth", 40, 4, 25, -1, GROVE_ERR_BAD_INPUT, "depth 25 is out of"},
            {"header depth wrong", 40, 4, (uint64_t)grove_octree_depth(t) + 1, -1,
             GROVE_ERR_BAD_INPUT, "the deepest node is at depth"},
            {"max_points large: no split", 44, 4, 100000, -1, GROVE_ERR_BAD_INPUT,
             "is split but holds"},
            {"max_points small: split needed", 44, 4, 1, -1, GROVE_ERR_BAD_INPUT,
             "require a split"},
            {"root total", H + 16, 8, 299, -1, GROVE_ERR_BAD_INPUT, "holds 299 points"},
            {"root first_child", H + 24, 4, 2, -1, GROVE_ERR_BAD_INPUT,
             "first_child is 2, the breadth-first layout puts its children at 1"},
            {"node padding", H + N * 1 + 45, 1, 7, -1, GROVE_ERR_BAD_INPUT, "padding bytes"},
            {"child octant", H + N * 1 + 42, 1, grove_octree_nodes(t)[1].octant ^ 1u, -1,
             GROVE_ERR_BAD_INPUT, "does not make it the non-empty octant"},
            {"child cell", H + N * 1 + 28, 4, 12345, -1, GROVE_ERR_BAD_INPUT,
             "does not make it the non-empty octant"},
            {"leaf begin", H + N * leaf + 0, 8, lf->begin + 1, -1, GROVE_ERR_BAD_INPUT,
             "do not follow the previous node's"},
            {"leaf first_child", H + N * leaf + 24, 4, 5, -1, GROVE_ERR_BAD_INPUT,
             "must have first_child UINT32_MAX"},
            {"index out of range", H + N * nn + 4 * e, 4, 300, -1, GROVE_ERR_BAD_INPUT,
             "out of range (300 points) or not after the previous entry"},
            {"index duplicated", H + N * nn + 4 * (e + 1), 4, grove_octree_entry_index(t)[e], -1,
             GROVE_ERR_BAD_INPUT, "appears twice in the leaves"},
            {"point outside its leaf", xyz0 + 24 * e, 8, far_bits, -1, GROVE_ERR_BAD_INPUT,
             "lies outside the node's cube"},
            {"sample point moved", xyz0 + 8, 8, far_bits, -1, GROVE_ERR_BAD_INPUT,
             "lies outside the node's cube"},
        };
        path_of(gpath, sizeof gpath, good, "grove.octree");
        g = read_all(gpath, &glen);
        CHECK(glen == (size_t)(xyz0 + 24 * ne));
        for (size_t k = 0; k < sizeof cases / sizeof cases[0] && g; k++) {
            const gcase *cs = &cases[k];
            unsigned char *b = (unsigned char *)tu_malloc(glen + 1);
            size_t len = glen;
            memcpy(b, g, glen);
            if (cs->at >= 0) {
                if (cs->width == 1) b[cs->at] = (unsigned char)cs->value;
                if (cs->width == 4) put32(b + cs->at, (uint32_t)cs->value);
                if (cs->width == 8) put64(b + cs->at, cs->value);
            }
            if (cs->cut >= 0) len = (size_t)cs->cut;
            if (cs->cut == -2) b[len++] = 0;
            remove_dir(work);
            copy_dir(good, work);
            path_of(p, sizeof p, work, "grove.octree");
            write_all(p, b, len);
            expect_load(work, cs->want, cs->part, cs->what);
            free(b);
        }
        /* a sample entry whose xyz is not its point's (same cell, other bits) */
        if (g && grove_octree_nodes(t)[0].end > grove_octree_nodes(t)[0].begin) {
            unsigned char *b = (unsigned char *)tu_malloc(glen);
            double v;
            memcpy(b, g, glen);
            memcpy(&v, b + xyz0, 8);
            v = nextafter(v, 1e300);
            memcpy(b + xyz0, &v, 8);
            remove_dir(work);
            copy_dir(good, work);
            path_of(p, sizeof p, work, "grove.octree");
            write_all(p, b, glen);
            expect_load(work, GROVE_ERR_BAD_INPUT, "differs from the point's leaf entry",
                        "sample xyz changed");
            free(b);
        }
        /* Files written before 2026-11-23 list each node's entries in ascending input order:
         * they still load. A leaf in neither that order nor Morton order does not. */
        if (g) {
            const grove_octree_node *nd = grove_octree_nodes(t);
            unsigned char *b = (unsigned char *)tu_malloc(glen), *ix = NULL, tmp[24];
            long rev = -1;
            memcpy(b, g, glen);
            ix = b + H + N * nn;
            for (long k = 0; k < nn; k++)
                for (uint64_t u = nd[k].begin + 1; u < nd[k].end; u++)
                    for (uint64_t f = u;
                         f > nd[k].begin && rd32(ix + 4 * (f - 1)) > rd32(ix + 4 * f); f--) {
                        memcpy(tmp, ix + 4 * (f - 1), 4);
                        memcpy(ix + 4 * (f - 1), ix + 4 * f, 4);
                        memcpy(ix + 4 * f, tmp, 4);
                        memcpy(tmp, b + xyz0 + 24 * (f - 1), 24);
                        memcpy(b + xyz0 + 24 * (f - 1), b + xyz0 + 24 * f, 24);
                        memcpy(b + xyz0 + 24 * f, tmp, 24);
                    }
            CHECK(memcmp(b, g, glen) != 0); /* some node was not in input order */
            remove_dir(work);
            copy_dir(good, work);
            path_of(p, sizeof p, work, "grove.octree");
            write_all(p, b, glen);
            expect_load(work, GROVE_OK, "", "entries in ascending input order (older files)");
            /* a leaf of >= 3 entries whose input positions do not fall all the way, reversed */
            memcpy(b, g, glen);
            for (long k = 0; k < nn && rev < 0; k++) {
                int falls = 1;
                if (nd[k].child_mask || nd[k].end - nd[k].begin < 3) continue;
                for (uint64_t u = nd[k].begin + 1; u < nd[k].end; u++)
                    falls = falls && rd32(ix + 4 * (u - 1)) > rd32(ix + 4 * u);
                if (!falls) rev = k;
            }
            CHECK(rev >= 0);
            if (rev >= 0)
                for (uint64_t u = nd[rev].begin, f = nd[rev].end - 1; u < f; u++, f--) {
                    memcpy(tmp, ix + 4 * u, 4);
                    memcpy(ix + 4 * u, ix + 4 * f, 4);
                    memcpy(ix + 4 * f, tmp, 4);
                    memcpy(tmp, b + xyz0 + 24 * u, 24);
                    memcpy(b + xyz0 + 24 * u, b + xyz0 + 24 * f, 24);
                    memcpy(b + xyz0 + 24 * f, tmp, 24);
                }
            write_all(p, b, glen);
            expect_load(work, GROVE_ERR_BAD_INPUT, "not after the previous entry in Morton order",
                        "leaf entries reversed");
            free(b);
        }
        free(g);
    }
    /* missing file */
    remove_dir(work);
    copy_dir(good, work);
    path_of(p, sizeof p, work, "grove.octree");
    unlink(p);
    expect_load(work, GROVE_ERR_IO, "cannot open", "grove.octree missing");
    expect_load(good, GROVE_OK, "", "the good copy");

    /* ---- the Potree files ---- */
    {
        size_t mlen, hlen, olen;
        char mp[512], hp[512], op[512], part[600];
        char *meta_s;
        unsigned char *hb, *obin;
        path_of(mp, sizeof mp, good, "metadata.json");
        path_of(hp, sizeof hp, good, "hierarchy.bin");
        path_of(op, sizeof op, good, "octree.bin");
        meta_s = (char *)read_all(mp, &mlen);
        hb = read_all(hp, &hlen);
        obin = read_all(op, &olen);
        expect_export(good, GROVE_OK, "", "the good copy");
        {
            static const struct {
                const char *what, *from, *to, *part;
            } js[] = {
                {"JSON: missing brace", "\"points\"", "\"points\" {", "malformed JSON"},
                {"JSON: version", "\"2.0\"", "\"1.8\"", "this reader takes \"2.0\""},
                {"JSON: encoding", "\"DEFAULT\"", "\"BROTLI\"", "encoding \"BROTLI\" is not"},
                {"JSON: no scale", "\"scale\": [", "\"scalf\": [", "\"scale\" is missing"},
                {"JSON: firstChunkSize", "\"firstChunkSize\": ", "\"firstChunkSize\": -",
                 "firstChunkSize"},
                {"JSON: points", "\"points\": ", "\"points\": 9", "the leaves hold"},
                {"JSON: position type", "\"int32\"", "\"int16\"", "must be \"position\""},
                {"JSON: rgb type",
                 "\"numElements\": 3,\n\t\t\t\"elementSize\": 2,\n\t\t\t\"type\": \"uint16\"",
                 "\"numElements\": 3,\n\t\t\t\"elementSize\": 2,\n\t\t\t\"type\": \"uint8\"",
                 "attribute \"rgb\" must be 3 x uint16"},
                {"JSON: bad number", "\"spacing\": ", "\"spacing\": 01", "malformed JSON"},
                {"JSON: trailing text", "\n}\n", "\n}\n}", "text after the top-level value"},
                {"JSON: control char", "\"DEFAULT\"", "\"DEF\tAULT\"", "control character"},
            };
            for (size_t k = 0; k < sizeof js / sizeof js[0] && meta_s; k++) {
                const char *at = strstr(meta_s, js[k].from);
                char *s;
                size_t fl = strlen(js[k].from), tl = strlen(js[k].to);
                if (!at) {
                    FAIL("%s: '%s' not in metadata.json", js[k].what, js[k].from);
                    continue;
                }
                s = (char *)tu_malloc(mlen + tl + 1);
                memcpy(s, meta_s, (size_t)(at - meta_s));
                memcpy(s + (at - meta_s), js[k].to, tl);
                memcpy(s + (at - meta_s) + tl, at + fl, mlen - (size_t)(at - meta_s) - fl + 1);
                remove_dir(work);
                copy_dir(good, work);
                path_of(p, sizeof p, work, "metadata.json");
                write_all(p, s, strlen(s));
                expect_export(work, GROVE_ERR_BAD_INPUT, js[k].part, js[k].what);
                free(s);
            }
        }
        if (hb && hlen >= 44) {
            const struct {
                const char *what;
                long at, cut;
                int width;
                uint64_t value;
                const char *part;
            } hc[] = {
                {"hierarchy truncated", -1, -3, 0, 0, "is not a whole number of 22-byte records"},
                {"hierarchy one record short", -1, -22, 0, 0, "is not a whole number"},
                {"root type 3", 0, -1, 1, 3, "type 3"},
                {"root mask loses a child", 1, -1, 1, (uint64_t)(hb[1] & (hb[1] - 1)),
                 "child masks announce"},
                {"root type leaf", 0, -1, 1, 1, "type 1 with child mask"},
                {"root byteSize", 14, -1, 8, 1, "do not make its"},
                {"root numPoints", 2, -1, 4, 1000000, "do not make its"},
                {"last record a proxy beyond the file", -2, -1, 1, 2, "is not a whole number"},
                {"byteOffset beyond octree.bin", 22 + 6, -1, 8, (uint64_t)1 << 40, "octree.bin: "},
                {"byteOffset at the end of the range", 22 + 6, -1, 8, UINT64_MAX,
                 "bytes from byte 18446744073709551615"},
            };
            for (size_t k = 0; k < sizeof hc / sizeof hc[0]; k++) {
                unsigned char *b = (unsigned char *)tu_malloc(hlen);
                size_t len = hlen;
                memcpy(b, hb, hlen);
                if (hc[k].cut == -3) len = hlen - 1;
                if (hc[k].cut == -22) len = hlen - 22;
                if (hc[k].at >= 0) {
                    if (hc[k].width == 1) b[hc[k].at] = (unsigned char)hc[k].value;
                    if (hc[k].width == 4) put32(b + hc[k].at, (uint32_t)hc[k].value);
                    if (hc[k].width == 8) put64(b + hc[k].at, hc[k].value);
                }
                if (hc[k].at == -2) { /* the last record (a leaf) a proxy pointing past the end */
                    b[hlen - 22] = 2;
                    put64(b + hlen - 22 + 6, hlen);
                    put64(b + hlen - 22 + 14, 22);
                }
                remove_dir(work);
                copy_dir(good, work);
                path_of(p, sizeof p, work, "hierarchy.bin");
                write_all(p, b, len);
                expect_export(work, GROVE_ERR_BAD_INPUT, hc[k].part, hc[k].what);
                free(b);
            }
        }
        if (obin) {
            remove_dir(work);
            copy_dir(good, work);
            path_of(p, sizeof p, work, "octree.bin");
            write_all(p, obin, olen / 2);
            /* the short file is the one named, with its length, and the node that needs more */
            snprintf(part, sizeof part, "%s: %zu bytes, but node r", p, olen / 2);
            expect_export(work, GROVE_ERR_BAD_INPUT, part, "octree.bin halved");
            expect_export(work, GROVE_ERR_BAD_INPUT, "hierarchy.bin) needs bytes ",
                          "octree.bin halved");
            unlink(p);
            expect_export(work, GROVE_ERR_IO, "cannot open", "octree.bin missing");
            path_of(p, sizeof p, work, "metadata.json");
            unlink(p);
            expect_export(work, GROVE_ERR_IO, "cannot open", "metadata.json missing");
        }
        free(meta_s);
        free(hb);
        free(obin);
    }

    /* ---- arguments and failed writes ---- */
    {
        grove_cloud small = c;
        grove_cloud out;
        small.n = c.n - 1;
        CHECK_STATUS(ctx, grove_octree_write_potree(ctx, t, &small, work), GROVE_ERR_INVALID_ARG);
        CHECK(strstr(grove_ctx_last_error(ctx), "the cloud has 299 points, the tree 300"));
        CHECK_STATUS(ctx, grove_octree_write_potree(ctx, NULL, NULL, work), GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_octree_write_potree(ctx, t, NULL, NULL), GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_octree_export_level(ctx, good, -1, &out), GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_octree_load(ctx, good, NULL), GROVE_ERR_INVALID_ARG);
        /* a directory where a file must go: the write fails and leaves no temporary file */
        remove_dir(work);
        mkdir(work, 0777);
        path_of(p, sizeof p, work, "hierarchy.bin");
        mkdir(p, 0777);
        CHECK_STATUS(ctx, grove_octree_write_potree(ctx, t, &c, work), GROVE_ERR_IO);
        CHECK(strstr(grove_ctx_last_error(ctx), "hierarchy.bin") != NULL);
        CHECK_MSG(count_names(work, "grove-tmp") == 0, "temporary files left after a failure");
        path_of(p, sizeof p, work, "metadata.json");
        CHECK_MSG(access(p, F_OK) != 0, "metadata.json written although the write failed");
        /* the directory is a file */
        remove_dir(work);
        write_all(work, "x", 1);
        CHECK_STATUS(ctx, grove_octree_write_potree(ctx, t, &c, work), GROVE_ERR_IO);
        CHECK(strstr(grove_ctx_last_error(ctx), "not a directory") != NULL);
        unlink(work);
    }
    grove_octree_destroy(t);
    free_cloud(&c);
}

int main(int argc, char **argv)
{
    tu_args args = {"cpu", 0, 20261122, NULL};
    tu_rng r;
    grove_ctx_opts o;
    if (tu_parse_args(argc, argv, &args) != 0) {
        fprintf(stderr, "usage: test_potree [--seed S] [--large N]\n");
        return 2;
    }
    r.s = args.seed;
    grove_ctx_default_opts(&o);
    o.backend = GROVE_BACKEND_CPU;
    if (grove_ctx_create(&o, &ctx) != GROVE_OK) {
        fprintf(stderr, "test_potree: no CPU context\n");
        return 1;
    }
    snprintf(root_dir, sizeof root_dir, "%s/grove-potree-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(root_dir)) {
        fprintf(stderr, "test_potree: cannot create a temporary directory\n");
        return 1;
    }
    if (args.large) {
        round_trip(&r, args.large, 50000, 128, 1);
    } else {
        static const size_t sizes[] = {0, 1, 31, 32, 33, 1000, 20000};
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            round_trip(&r, sizes[k], 32, 4, 1);
            round_trip(&r, sizes[k], 7, 0, 0);
        }
        round_trip(&r, 50000, 500, 128, 1);
        round_trip(&r, 3000, 1, 2, 1); /* every point split to max depth or alone */
        las_scale(&r);
        bad_grove_files(&r);
    }
    remove_dir(root_dir);
    grove_ctx_destroy(ctx);
    return tu_finish("test_potree");
}
