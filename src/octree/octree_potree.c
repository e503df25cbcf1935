/*
 * octree_potree.c - the octree's files: grove_octree_write_potree() (a Potree 2.0 directory,
 * metadata.json + hierarchy.bin + octree.bin, plus grove.octree), grove_octree_load() (reads
 * grove.octree back and checks it as thoroughly as a build's output) and
 * grove_octree_export_level() (reads the Potree files back, as a viewer would, for one level).
 * docs/FORMATS.md ("Potree 2.0 output", "grove.octree") has the exact layouts.
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

#include "octree_internal.h"

#define OT_MAGIC "GROVE-OT"
#define OT_VERSION 1u
#define OT_HEADER 128u
#define OT_NODE 48u
#define PT_RECORD 22u /* hierarchy.bin: type, childMask, numPoints, byteOffset, byteSize */
#define PT_NAME 32    /* "r" + one digit per level (depth <= 30) + NUL */
#define JSON_MAX ((size_t)1 << 24)

/* Potree's childIndex of grove octant o, and back (the same swap of bits 0 and 2). */
static unsigned pt_child(unsigned o) { return ((o >> 2) & 1u) | (o & 2u) | ((o & 1u) << 2); }

static int popcount8(unsigned m)
{
    int c = 0;
    for (; m; m &= m - 1) c++;
    return c;
}

/* Index of grove octant o's child among node p's children (consecutive, ascending octant). */
static uint32_t child_of(const grove_octree_node *p, unsigned o)
{
    return p->first_child + (uint32_t)popcount8(p->child_mask & ((1u << o) - 1u));
}

/* ---- paths ---- */

static char *join(const char *dir, const char *name)
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

/* ---- numbers in JSON, whatever the locale ---- */

/* %.17g (every double reads back exactly) with '.' as the decimal point: any byte printf wrote
 * that belongs to no C-locale number is the locale's decimal point. */
static void fmt_double(char *out, size_t size, double v)
{
    char t[64];
    size_t k = 0;
    int len = snprintf(t, sizeof t, "%.17g", v);
    for (int i = 0; i < len && k + 1 < size; i++) {
        char c = t[i];
        if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == 'e' || c == 'E')
            out[k++] = c;
        else if (k == 0 || out[k - 1] != '.')
            out[k++] = '.';
    }
    out[k] = '\0';
}

/* Parses a JSON number at s (grammar checked here), correctly rounded: strtod reads it without a
 * decimal point ("12.5e3" as "125e2"), which no locale reads differently. Returns the bytes
 * used, 0 if s does not start with a JSON number or it is out of the double range. */
static size_t parse_number(const char *s, double *out)
{
    char buf[96];
    size_t i = 0, k = 0, nd = 0;
    long exp10 = 0, fr = 0;
    char *end;
    if (s[i] == '-') buf[k++] = s[i++];
    if (s[i] == '0') {
        i++;
    } else if (s[i] >= '1' && s[i] <= '9') {
        while (s[i] >= '0' && s[i] <= '9') {
            if (nd < 40)
                buf[k++] = s[i], nd++;
            else
                exp10++;
            i++;
        }
    } else {
        return 0;
    }
    if (s[i] == '.') {
        i++;
        if (!(s[i] >= '0' && s[i] <= '9')) return 0;
        while (s[i] >= '0' && s[i] <= '9') {
            if (nd < 40) buf[k++] = s[i], nd++, fr++;
            i++;
        }
    }
    if (s[i] == 'e' || s[i] == 'E') {
        long e = 0;
        int neg = 0;
        i++;
        if (s[i] == '+' || s[i] == '-') neg = s[i++] == '-';
        if (!(s[i] >= '0' && s[i] <= '9')) return 0;
        while (s[i] >= '0' && s[i] <= '9') {
            if (e < 100000) e = 10 * e + (s[i] - '0');
            i++;
        }
        exp10 += neg ? -e : e;
    }
    if (nd == 0) buf[k++] = '0';
    snprintf(buf + k, sizeof buf - k, "e%ld", exp10 - fr);
    errno = 0;
    *out = strtod(buf, &end);
    if (*end != '\0' || !isfinite(*out)) return 0;
    return i;
}

/* ---- a small JSON reader (metadata.json) ----
 * The text is parsed into an array of values; containers link their members through `next`.
 * Strings are unescaped in place (\uXXXX outside ASCII is kept as '?': only our own keys and
 * names are looked at). */
enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

typedef struct jval {
    int type;
    double num;
    const char *str; /* J_STR; the key, for a member of an object */
    const char *key;
    size_t first, next, count; /* children (index + 1; 0: none) */
} jval;

typedef struct jparser {
    grove_ctx *ctx;
    const char *path;
    char *s;
    size_t pos, len;
    jval *v;
    size_t nv, cap;
    int depth;
} jparser;

static grove_status j_fail(jparser *p, const char *what)
{
    size_t line = 1;
    for (size_t i = 0; i < p->pos && i < p->len; i++) line += p->s[i] == '\n';
    return grove__error(p->ctx, GROVE_ERR_BAD_INPUT, "%s: line %zu: malformed JSON: %s", p->path,
                        line, what);
}

static void j_ws(jparser *p)
{
    while (p->pos < p->len && strchr(" \t\r\n", p->s[p->pos]) && p->s[p->pos]) p->pos++;
}

static grove_status j_new(jparser *p, int type, size_t *out)
{
    if (p->nv == p->cap) {
        size_t nc = p->cap ? 2 * p->cap : 64;
        jval *nvv = (jval *)realloc(p->v, nc * sizeof *nvv);
        if (!nvv)
            return grove__error(p->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", p->path);
        p->v = nvv;
        p->cap = nc;
    }
    memset(&p->v[p->nv], 0, sizeof p->v[0]);
    p->v[p->nv].type = type;
    *out = p->nv++;
    return GROVE_OK;
}

/* A string at p->pos (the opening quote); unescapes in place and NUL-terminates. */
static grove_status j_string(jparser *p, const char **out)
{
    char *s = p->s, *w;
    size_t i = ++p->pos;
    w = s + i;
    *out = w;
    for (;;) {
        unsigned char c;
        if (i >= p->len) return j_fail(p, "unterminated string");
        c = (unsigned char)s[i];
        if (c == '"') break;
        if (c < 0x20) {
            p->pos = i;
            return j_fail(p, "control character in a string");
        }
        if (c == '\\') {
            char e = i + 1 < p->len ? s[i + 1] : '\0';
            const char *m = strchr("\"\\/bfnrt", e);
            if (e && m) {
                *w++ = "\"\\/\b\f\n\r\t"[m - "\"\\/bfnrt"];
                i += 2;
                continue;
            }
            if (e == 'u' && i + 5 < p->len) {
                unsigned v = 0;
                for (int k = 2; k < 6; k++) {
                    char h = s[i + (size_t)k];
                    int d = h >= '0' && h <= '9'   ? h - '0'
                            : h >= 'a' && h <= 'f' ? h - 'a' + 10
                            : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                   : -1;
                    if (d < 0) {
                        p->pos = i;
                        return j_fail(p, "bad \\u escape");
                    }
                    v = 16 * v + (unsigned)d;
                }
                *w++ = v > 0 && v < 0x80 ? (char)v : '?';
                i += 6;
                continue;
            }
            p->pos = i;
            return j_fail(p, "bad escape in a string");
        }
        *w++ = (char)c;
        i++;
    }
    *w = '\0';
    p->pos = i + 1;
    return GROVE_OK;
}

static grove_status j_value(jparser *p, size_t *out)
{
    char c;
    j_ws(p);
    if (p->pos >= p->len) return j_fail(p, "unexpected end of file");
    c = p->s[p->pos];
    if (c == '{' || c == '[') {
        int obj = c == '{';
        size_t me, last = 0;
        if (++p->depth > 64) return j_fail(p, "nested too deeply");
        GROVE_TRY(j_new(p, obj ? J_OBJ : J_ARR, &me));
        p->pos++;
        j_ws(p);
        if (p->pos < p->len && p->s[p->pos] == (obj ? '}' : ']')) {
            p->pos++;
            p->depth--;
            *out = me;
            return GROVE_OK;
        }
        for (;;) {
            const char *key = NULL;
            size_t ch;
            j_ws(p);
            if (obj) {
                if (p->pos >= p->len || p->s[p->pos] != '"')
                    return j_fail(p, "expected a member name in quotes");
                GROVE_TRY(j_string(p, &key));
                j_ws(p);
                if (p->pos >= p->len || p->s[p->pos] != ':') return j_fail(p, "expected ':'");
                p->pos++;
            }
            GROVE_TRY(j_value(p, &ch));
            p->v[ch].key = key;
            if (last)
                p->v[last - 1].next = ch + 1;
            else
                p->v[me].first = ch + 1;
            last = ch + 1;
            p->v[me].count++;
            j_ws(p);
            if (p->pos < p->len && p->s[p->pos] == ',') {
                p->pos++;
                continue;
            }
            if (p->pos < p->len && p->s[p->pos] == (obj ? '}' : ']')) {
                p->pos++;
                break;
            }
            return j_fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
        p->depth--;
        *out = me;
        return GROVE_OK;
    }
    if (c == '"') {
        const char *str;
        GROVE_TRY(j_string(p, &str));
        GROVE_TRY(j_new(p, J_STR, out));
        p->v[*out].str = str;
        return GROVE_OK;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        double d;
        size_t used = parse_number(p->s + p->pos, &d);
        if (!used) return j_fail(p, "bad number");
        GROVE_TRY(j_new(p, J_NUM, out));
        p->v[*out].num = d;
        p->pos += used;
        return GROVE_OK;
    }
    {
        static const char *const lit[] = {"true", "false", "null"};
        for (int k = 0; k < 3; k++) {
            size_t l = strlen(lit[k]);
            if (p->len - p->pos >= l && memcmp(p->s + p->pos, lit[k], l) == 0) {
                GROVE_TRY(j_new(p, k < 2 ? J_BOOL : J_NULL, out));
                p->v[*out].num = k == 0;
                p->pos += l;
                return GROVE_OK;
            }
        }
    }
    return j_fail(p, "unexpected character");
}

/* Member `key` of object o, or NULL. */
static const jval *j_get(const jparser *p, const jval *o, const char *key)
{
    if (!o || o->type != J_OBJ) return NULL;
    for (size_t c = o->first; c; c = p->v[c - 1].next)
        if (strcmp(p->v[c - 1].key, key) == 0) return &p->v[c - 1];
    return NULL;
}

static const jval *j_at(const jparser *p, const jval *a, size_t i)
{
    size_t c = a->first;
    while (c && i--) c = p->v[c - 1].next;
    return c ? &p->v[c - 1] : NULL;
}

/* A member that must be a number (integer: whole, 0 <= v <= max) or an array of `count`
 * finite numbers. */
static grove_status j_uint(const jparser *p, const jval *o, const char *key, double max,
                           uint64_t *out)
{
    const jval *v = j_get(p, o, key);
    if (!v || v->type != J_NUM || !(v->num >= 0) || v->num > max || v->num != floor(v->num))
        return grove__error(p->ctx, GROVE_ERR_BAD_INPUT,
                            "%s: \"%s\" is missing or not a whole number in 0..%.0f", p->path, key,
                            max);
    *out = (uint64_t)v->num;
    return GROVE_OK;
}

static grove_status j_vec(const jparser *p, const jval *o, const char *key, int count, double *out)
{
    const jval *v = j_get(p, o, key);
    if (!v || v->type != J_ARR || v->count != (size_t)count)
        return grove__error(p->ctx, GROVE_ERR_BAD_INPUT,
                            "%s: \"%s\" is missing or not an array of %d numbers", p->path, key,
                            count);
    for (int i = 0; i < count; i++) {
        const jval *e = j_at(p, v, (size_t)i);
        if (e->type != J_NUM)
            return grove__error(p->ctx, GROVE_ERR_BAD_INPUT, "%s: \"%s\"[%d] is not a number",
                                p->path, key, i);
        out[i] = e->num;
    }
    return GROVE_OK;
}

static const char *j_str(const jparser *p, const jval *o, const char *key)
{
    const jval *v = j_get(p, o, key);
    return v && v->type == J_STR ? v->str : NULL;
}

/* ---- the Potree layout of a tree ---- */

typedef struct pt_layout {
    double scale[3], offset[3];
    int rgb, intensity;
    size_t bpp; /* bytes per point record in octree.bin */
} pt_layout;

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

static int fits(const grove_octree *t, const pt_layout *l)
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
static void choose_layout(const grove_octree *t, const grove_cloud *c, pt_layout *l)
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
                                     const grove_cloud *c, const pt_layout *l, wbuf *w)
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
                                    const uint32_t *order, const pt_layout *l, wbuf *w)
{
    char *tmp;
    GROVE_TRY(wb_open(ctx, path, &tmp, w));
    for (size_t k = 0; k < t->num_nodes && !w->err; k++) {
        const grove_octree_node *nd = &t->nodes[order[k]];
        unsigned char *b = wb_room(w, PT_RECORD);
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
        fmt_double(b, sizeof b, v[i]);
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
                                   const grove_octree *t, const grove_cloud *c, const pt_layout *l)
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
            grove_version(), t->n, t->num_nodes * PT_RECORD, t->depth + 1, t->depth);
    put_vec(f, l->offset, 3);
    fprintf(f, ",\n\t\"scale\": ");
    put_vec(f, l->scale, 3);
    fmt_double(num, sizeof num, t->side / (t->opts.lod_grid ? t->opts.lod_grid : 128));
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
    memset(b, 0, OT_NODE);
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

static double get_f64(const unsigned char *b)
{
    uint64_t u = grove__get64(b);
    double v;
    memcpy(&v, &u, 8);
    return v;
}

static grove_status write_grove(grove_ctx *ctx, const char *path, const grove_octree *t, wbuf *w)
{
    unsigned char *h;
    char *tmp;
    int le = grove__host_is_le();
    GROVE_TRY(wb_open(ctx, path, &tmp, w));
    h = wb_room(w, OT_HEADER);
    memset(h, 0, OT_HEADER);
    memcpy(h, OT_MAGIC, 8);
    grove__put32(h + 8, OT_VERSION);
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
    for (size_t i = 0; i < t->num_nodes; i++) put_node(wb_room(w, OT_NODE), &t->nodes[i]);
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
    pt_layout l;
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
        if (!(path[k] = join(dir, names[k]))) {
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

/* ---- grove.octree: load ---- */

static void free_tree(grove_octree *t)
{
    if (!t) return;
    free(t->nodes);
    free(t->index);
    free(t->xyz);
    free(t);
}

static grove_status bad(grove_ctx *ctx, const char *path, const char *what, size_t i)
{
    return grove__error(ctx, GROVE_ERR_BAD_INPUT, "%s: node %zu: %s", path, i, what);
}

/* The header's options and cube. */
static grove_status check_header(grove_ctx *ctx, const char *path, const grove_octree *t)
{
    const grove_octree_opts *o = &t->opts;
    int g = 0;
    while (g < 11 && (1 << g) < o->lod_grid) g++;
    if (o->max_points < 1 || o->batch < 1 ||
        (o->lod_grid != 0 && (o->lod_grid < 2 || o->lod_grid > 1024 || (1 << g) != o->lod_grid)) ||
        o->max_depth < 0 || o->max_depth > GROVE_OCTREE_BITS - (o->lod_grid ? g : 0))
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: header: options out of range (max_points %u, batch %zu, "
                            "max_depth %d, lod_grid %d)",
                            path, o->max_points, o->batch, o->max_depth, o->lod_grid);
    for (int a = 0; a < 3; a++)
        if (!isfinite(t->lo[a]))
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: header: the cube's corner is not finite", path);
    if (!(t->side > 0) || !isfinite(t->side) ||
        t->to_grid != (double)(1u << GROVE_OCTREE_BITS) / t->side)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: header: the cube's side %.17g is not finite and positive, or the "
                            "grid scale %.17g is not 2^30 / side",
                            path, t->side, t->to_grid);
    if (t->depth < 0 || t->depth > o->max_depth)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT, "%s: header: depth %d is out of range 0..%d",
                            path, t->depth, o->max_depth);
    return GROVE_OK;
}

/* The nodes: breadth-first layout, children in ascending octant, cells, the split rule, entry
 * ranges concatenated in node order, totals. */
static grove_status check_nodes(grove_ctx *ctx, const char *path, const grove_octree *t)
{
    const grove_octree_node *nd = t->nodes;
    const grove_octree_opts *o = &t->opts;
    size_t nn = t->num_nodes, next = 1;
    int deepest = 0;
    uint64_t leaf_points = 0;
    if (nd[0].depth != 0 || nd[0].octant != 0 || nd[0].cell[0] || nd[0].cell[1] || nd[0].cell[2])
        return bad(ctx, path, "the root must have depth 0, octant 0 and cell (0, 0, 0)", 0);
    if (nd[0].total != t->n)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: node 0 (the root) holds %llu points, the header says %zu", path,
                            (unsigned long long)nd[0].total, t->n);
    for (size_t i = 0; i < nn; i++) {
        const grove_octree_node *p = &nd[i];
        uint64_t want_begin = i ? nd[i - 1].end : 0;
        int split = p->depth < o->max_depth && p->total > o->max_points;
        for (int k = 0; k < 5; k++)
            if (p->pad[k]) return bad(ctx, path, "padding bytes must be 0", i);
        if (i && i >= next) return bad(ctx, path, "it is not the child of any earlier node", i);
        if (p->begin != want_begin || p->end < p->begin || p->end > t->num_entries)
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: node %zu: entries [%llu, %llu) do not follow the previous "
                                "node's (which end at %llu) within the %zu entries",
                                path, i, (unsigned long long)p->begin, (unsigned long long)p->end,
                                (unsigned long long)want_begin, t->num_entries);
        deepest = p->depth > deepest ? p->depth : deepest;
        if (!p->child_mask) {
            if (p->first_child != UINT32_MAX)
                return bad(ctx, path, "a leaf (no child octants) must have first_child UINT32_MAX",
                           i);
            if (split)
                return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                    "%s: node %zu is a leaf with %llu points at depth %d, but "
                                    "max_points %u and max_depth %d require a split",
                                    path, i, (unsigned long long)p->total, p->depth, o->max_points,
                                    o->max_depth);
            if (p->end - p->begin != p->total)
                return bad(ctx, path, "a leaf's total differs from its entry count", i);
            leaf_points += p->total;
            continue;
        }
        if (!split)
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: node %zu is split but holds %llu points at depth %d "
                                "(max_points %u, max_depth %d)",
                                path, i, (unsigned long long)p->total, p->depth, o->max_points,
                                o->max_depth);
        if (p->first_child != next)
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: node %zu: first_child is %u, the breadth-first layout puts "
                                "its children at %zu",
                                path, i, p->first_child, next);
        if ((uint64_t)popcount8(p->child_mask) > nn - next)
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: node %zu: its children lie beyond the %zu nodes", path, i, nn);
        {
            uint64_t sum = 0,
                     cap = o->lod_grid ? (uint64_t)o->lod_grid * o->lod_grid * o->lod_grid : 0;
            if (p->end - p->begin > cap || p->end - p->begin > p->total)
                return bad(ctx, path,
                           "its sample holds more entries than lod_grid^3 voxels or its "
                           "points",
                           i);
            for (unsigned oc = 0; oc < 8; oc++) {
                const grove_octree_node *c;
                if (!(p->child_mask >> oc & 1u)) continue;
                c = &nd[next];
                if (c->depth != p->depth + 1 || c->octant != oc || c->total == 0 ||
                    c->cell[0] != (p->cell[0] << 1 | (oc & 1u)) ||
                    c->cell[1] != (p->cell[1] << 1 | (oc >> 1 & 1u)) ||
                    c->cell[2] != (p->cell[2] << 1 | (oc >> 2 & 1u)))
                    return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                        "%s: node %zu: its depth, octant, cell or total does not "
                                        "make it the non-empty octant %u of node %zu",
                                        path, next, oc, i);
                sum += c->total;
                next++;
            }
            if (sum != p->total)
                return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                    "%s: node %zu: its total %llu is not the sum of its "
                                    "children's, %llu",
                                    path, i, (unsigned long long)p->total, (unsigned long long)sum);
        }
    }
    if (next != nn)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: the header announces %zu nodes, the tree has %zu", path, nn, next);
    if (nd[nn - 1].end != t->num_entries)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: the nodes' entries end at %llu, the header announces %zu", path,
                            (unsigned long long)nd[nn - 1].end, t->num_entries);
    if (deepest != t->depth)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: the deepest node is at depth %d, the header says %d", path,
                            deepest, t->depth);
    (void)leaf_points; /* equal to the root's total by the sums above */
    return GROVE_OK;
}

/* The entries: every point in exactly one leaf, in ascending input order, inside its node's
 * cell; every sample entry a copy of a point of its subtree. */
static grove_status check_entries(grove_ctx *ctx, const char *path, const grove_octree *t)
{
    size_t n = t->n;
    uint64_t *where = (uint64_t *)malloc((n ? n : 1) * sizeof *where);
    grove_status st = GROVE_OK;
    if (!where) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) where[i] = UINT64_MAX;
    for (int pass = 0; pass < 2 && st == GROVE_OK; pass++)
        for (size_t i = 0; i < t->num_nodes && st == GROVE_OK; i++) {
            const grove_octree_node *p = &t->nodes[i];
            int leaf = p->child_mask == 0, sh = GROVE_OCTREE_BITS - p->depth;
            if (leaf != (pass == 0)) continue; /* leaves first: the samples refer to them */
            for (uint64_t e = p->begin; e < p->end; e++) {
                uint32_t v = t->index[e];
                const double *x = t->xyz + 3 * e;
                if (v >= n || (e > p->begin && t->index[e - 1] >= v)) {
                    st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                      "%s: node %zu: entry %llu: input position %u is out of "
                                      "range (%zu points) or not ascending",
                                      path, i, (unsigned long long)e, v, n);
                    break;
                }
                for (int a = 0; a < 3; a++) {
                    uint32_t q = grove__ot_quantize(x[a], t->lo[a], t->to_grid);
                    if (!(x[a] - t->lo[a] >= 0.0 && x[a] - t->lo[a] <= t->side) ||
                        q >> sh != p->cell[a]) {
                        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                          "%s: node %zu: entry %llu (point %u) is not finite or "
                                          "lies outside the node's cube",
                                          path, i, (unsigned long long)e, v);
                        break;
                    }
                }
                if (st != GROVE_OK) break;
                if (leaf) {
                    if (where[v] != UINT64_MAX) {
                        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                          "%s: point %u appears in two leaves (entries %llu and "
                                          "%llu)",
                                          path, v, (unsigned long long)where[v],
                                          (unsigned long long)e);
                        break;
                    }
                    where[v] = e;
                } else if (memcmp(x, t->xyz + 3 * where[v], 3 * sizeof *x) != 0) {
                    st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                      "%s: node %zu: sample entry %llu (point %u) differs from "
                                      "the point's leaf entry",
                                      path, i, (unsigned long long)e, v);
                    break;
                }
            }
        }
    free(where);
    return st;
}

grove_status grove_octree_load(grove_ctx *ctx, const char *dir, grove_octree **out)
{
    static const char fn[] = "grove_octree_load";
    unsigned char h[OT_HEADER];
    grove_status st = GROVE_OK;
    grove_octree *t = NULL;
    unsigned char *nb = NULL;
    uint64_t n, nn, ne, want, size;
    char *path = NULL;
    FILE *f = NULL;
    int le = grove__host_is_le();

    GROVE_TRY(grove__check_ctx(ctx));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!dir) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: dir is NULL", fn);
    if (!(path = join(dir, "grove.octree")))
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    GROVE_TRY_END(st, grove__binfile_open(ctx, path, OT_MAGIC, "octree", OT_VERSION, h, sizeof h,
                                          &f, &size));
    for (size_t k = 104; k <= OT_HEADER; k++)
        if (k == OT_HEADER ? grove__get32(h + 12) != 0 : h[k] != 0) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: header: reserved bytes (12..15 and 104..127) must be 0", path);
            goto _end;
        }
    n = grove__get64(h + 16);
    nn = grove__get64(h + 24);
    ne = grove__get64(h + 32);
    /* entries: the points plus at most 2^30 sample entries per node; 2^58 keeps the size
     * below from overflowing */
    if (n > GROVE_OCTREE_MAX_N || nn < 1 || nn >= UINT32_MAX || ne < n ||
        ne > ((uint64_t)1 << 58)) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: header: counts out of range (%llu points, %llu nodes, %llu "
                          "entries)",
                          path, (unsigned long long)n, (unsigned long long)nn,
                          (unsigned long long)ne);
        goto _end;
    }
    want = OT_HEADER + OT_NODE * nn + 28 * ne;
    if (size != want) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          size < want ? "%s: truncated: %llu bytes, the header announces %llu "
                                        "(%llu nodes, %llu entries)"
                                      : "%s: %llu bytes, the header announces %llu (%llu nodes, "
                                        "%llu entries): trailing data",
                          path, (unsigned long long)size, (unsigned long long)want,
                          (unsigned long long)nn, (unsigned long long)ne);
        goto _end;
    }
    t = (grove_octree *)calloc(1, sizeof *t);
    if (!t) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        goto _end;
    }
    t->n = (size_t)n;
    t->num_nodes = (size_t)nn;
    t->num_entries = (size_t)ne;
    t->depth = (int)(int32_t)grove__get32(h + 40);
    t->opts.max_points = grove__get32(h + 44);
    t->opts.batch = (size_t)grove__get64(h + 48);
    t->opts.max_depth = (int)(int32_t)grove__get32(h + 56);
    t->opts.lod_grid = (int)(int32_t)grove__get32(h + 60);
    for (int a = 0; a < 3; a++) t->lo[a] = get_f64(h + 64 + 8 * a);
    t->side = get_f64(h + 88);
    t->to_grid = get_f64(h + 96);
    GROVE_TRY_END(st, check_header(ctx, path, t));
    t->nodes = (grove_octree_node *)malloc((size_t)nn * sizeof *t->nodes);
    t->index = (uint32_t *)malloc((ne ? (size_t)ne : 1) * sizeof *t->index);
    t->xyz = (double *)malloc((ne ? 3 * (size_t)ne : 1) * sizeof *t->xyz);
    nb = (unsigned char *)malloc((size_t)nn * OT_NODE);
    if (!t->nodes || !t->index || !t->xyz || !nb) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "%s: out of memory for %llu nodes and %llu entries", path,
                          (unsigned long long)nn, (unsigned long long)ne);
        goto _end;
    }
    GROVE_TRY_END(st, grove__read_words(ctx, path, f, nb, (size_t)nn * OT_NODE, 1, 1));
    for (size_t i = 0; i < nn; i++) {
        const unsigned char *b = nb + OT_NODE * i;
        grove_octree_node *p = &t->nodes[i];
        p->begin = grove__get64(b);
        p->end = grove__get64(b + 8);
        p->total = grove__get64(b + 16);
        p->first_child = grove__get32(b + 24);
        for (int a = 0; a < 3; a++) p->cell[a] = grove__get32(b + 28 + 4 * a);
        p->depth = b[40];
        p->child_mask = b[41];
        p->octant = b[42];
        memcpy(p->pad, b + 43, 5);
    }
    GROVE_TRY_END(st, grove__read_words(ctx, path, f, t->index, (size_t)ne, 4, le));
    GROVE_TRY_END(st, grove__read_words(ctx, path, f, t->xyz, 3 * (size_t)ne, 8, le));
    GROVE_TRY_END(st, check_nodes(ctx, path, t));
    GROVE_TRY_END(st, check_entries(ctx, path, t));
    *out = t;
    t = NULL;
_end:
    if (f) fclose(f);
    free(nb);
    free(path);
    free_tree(t);
    return st;
}

/* ---- export: the Potree files read back ---- */

typedef struct pt_node {
    char name[PT_NAME]; /* "r" and the childIndex of each level, for messages */
    int level;
    unsigned type, mask;
    uint32_t num;
    uint64_t off, size;
} pt_node;

typedef struct pt_read {
    grove_ctx *ctx;
    pt_layout l;
    int rgb_at, intensity_at; /* byte offsets in a record, -1: absent */
    uint64_t points;
    uint64_t first_chunk;
    pt_node *nodes;
    size_t num_nodes;
} pt_read;

/* Reads a whole file of at most `max` bytes (NUL-terminated). */
static grove_status slurp(grove_ctx *ctx, const char *path, size_t max, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat sb;
    char *b;
    *out = NULL;
    if (!f) return grove__error(ctx, GROVE_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return grove__error(ctx, GROVE_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > max) {
        fclose(f);
        return grove__error(ctx, GROVE_ERR_BAD_INPUT, "%s: %llu bytes, more than the %zu accepted",
                            path, (unsigned long long)sb.st_size, max);
    }
    *len = (size_t)sb.st_size;
    b = (char *)malloc(*len + 1);
    if (!b) {
        fclose(f);
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    if (fread(b, 1, *len, f) != *len) {
        int e = ferror(f);
        free(b);
        fclose(f);
        return e ? grove__error(ctx, GROVE_ERR_IO, "%s: read error: %s", path, strerror(errno))
                 : grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: truncated (the file shrank while "
                                "read)",
                                path);
    }
    b[*len] = '\0';
    fclose(f);
    *out = b;
    return GROVE_OK;
}

static grove_status read_metadata(pt_read *r, const char *path)
{
    grove_ctx *ctx = r->ctx;
    jparser p;
    size_t root, len, at = 0;
    const jval *o, *attrs, *hier;
    const char *s;
    grove_status st;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.path = path;
    GROVE_TRY(slurp(ctx, path, JSON_MAX, &p.s, &len));
    p.len = len;
    GROVE_TRY_END(st, j_value(&p, &root));
    j_ws(&p);
    if (p.pos != p.len) {
        st = j_fail(&p, "text after the top-level value");
        goto _end;
    }
    o = &p.v[root];
    st = GROVE_ERR_BAD_INPUT;
    if (o->type != J_OBJ) {
        grove__error(ctx, st, "%s: the top-level value is not an object", path);
        goto _end;
    }
    if (!(s = j_str(&p, o, "version")) || strcmp(s, "2.0") != 0) {
        grove__error(ctx, st, "%s: \"version\" is %s%s%s, this reader takes \"2.0\"", path,
                     s ? "\"" : "", s ? s : "missing or not a string", s ? "\"" : "");
        goto _end;
    }
    if ((s = j_str(&p, o, "encoding")) && strcmp(s, "DEFAULT") != 0) {
        grove__error(ctx, st, "%s: encoding \"%s\" is not supported (only DEFAULT)", path, s);
        goto _end;
    }
    GROVE_TRY_END(st, j_uint(&p, o, "points", 4294967295.0, &r->points));
    hier = j_get(&p, o, "hierarchy");
    GROVE_TRY_END(st, j_uint(&p, hier, "firstChunkSize", 9.0e15, &r->first_chunk));
    if (r->first_chunk == 0 || r->first_chunk % PT_RECORD) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: hierarchy.firstChunkSize %llu is not a positive multiple of %u",
                          path, (unsigned long long)r->first_chunk, PT_RECORD);
        goto _end;
    }
    GROVE_TRY_END(st, j_vec(&p, o, "scale", 3, r->l.scale));
    GROVE_TRY_END(st, j_vec(&p, o, "offset", 3, r->l.offset));
    for (int a = 0; a < 3; a++)
        if (!(r->l.scale[a] > 0)) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT, "%s: scale[%d] is not positive", path, a);
            goto _end;
        }
    attrs = j_get(&p, o, "attributes");
    if (!attrs || attrs->type != J_ARR || attrs->count == 0) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: \"attributes\" is missing or not a non-empty array", path);
        goto _end;
    }
    r->rgb_at = r->intensity_at = -1;
    for (size_t i = 0; i < attrs->count; i++) {
        const jval *a = j_at(&p, attrs, i);
        const char *name = j_str(&p, a, "name"), *type = j_str(&p, a, "type");
        uint64_t size, elems;
        if (!name || !type) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: attribute %zu has no \"name\" or \"type\" string", path, i);
            goto _end;
        }
        GROVE_TRY_END(st, j_uint(&p, a, "size", 1024, &size));
        GROVE_TRY_END(st, j_uint(&p, a, "numElements", 1024, &elems));
        if (i == 0 &&
            (strcmp(name, "position") || strcmp(type, "int32") || elems != 3 || size != 12)) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: the first attribute must be \"position\", 3 x int32 (is \"%s\", "
                              "%llu x %s)",
                              path, name, (unsigned long long)elems, type);
            goto _end;
        }
        if (strcmp(name, "rgb") == 0 || strcmp(name, "intensity") == 0) {
            int is_rgb = name[0] == 'r';
            if (strcmp(type, "uint16") || elems != (is_rgb ? 3u : 1u) ||
                size != (is_rgb ? 6u : 2u)) {
                st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                  "%s: attribute \"%s\" must be %s x uint16", path, name,
                                  is_rgb ? "3" : "1");
                goto _end;
            }
            if (is_rgb)
                r->rgb_at = (int)at;
            else
                r->intensity_at = (int)at;
        }
        at += (size_t)size;
    }
    r->l.bpp = at;
    st = GROVE_OK;
_end:
    free(p.s);
    free(p.v);
    return st;
}

/* Reads hierarchy.bin: every chunk, proxies followed, into r->nodes (breadth-first within each
 * chunk); checks each node's bytes against the record size and octree.bin's length. */
static grove_status read_hierarchy(pt_read *r, const char *path, uint64_t octree_size)
{
    grove_ctx *ctx = r->ctx;
    typedef struct pend {
        size_t node;
        uint64_t off, size;
    } pend;
    pend *stack = NULL;
    size_t *queue = NULL, nstack = 0, cap, len, records = 0;
    unsigned char *h = NULL;
    grove_status st = GROVE_OK;
    uint64_t leaf_points = 0;

    GROVE_TRY(slurp(ctx, path, (size_t)1 << 40, (char **)&h, &len));
    cap = len / PT_RECORD + 1;
    r->nodes = (pt_node *)calloc(cap, sizeof *r->nodes);
    stack = (pend *)malloc(cap * sizeof *stack);
    queue = (size_t *)malloc(cap * sizeof *queue);
    if (!r->nodes || !stack || !queue) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        goto _end;
    }
    strcpy(r->nodes[0].name, "r");
    r->nodes[0].type = 2;
    r->num_nodes = 1;
    stack[nstack++] = (pend){0, 0, r->first_chunk};
    while (nstack) {
        pend c = stack[--nstack];
        size_t nrec, nq = 1;
        if (c.size == 0 || c.size % PT_RECORD || c.off > len || c.size > len - c.off) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: the chunk of node %s, bytes [%llu, +%llu), is not a whole "
                              "number of %u-byte records within the file's %zu bytes",
                              path, r->nodes[c.node].name, (unsigned long long)c.off,
                              (unsigned long long)c.size, PT_RECORD, len);
            goto _end;
        }
        nrec = (size_t)(c.size / PT_RECORD);
        if (nrec > cap - 1 - records) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: the chunks overlap or repeat (more records read than the file "
                              "holds)",
                              path);
            goto _end;
        }
        records += nrec;
        queue[0] = c.node;
        for (size_t i = 0; i < nrec; i++) {
            const unsigned char *b = h + c.off + PT_RECORD * i;
            pt_node *nd;
            if (i >= nq) {
                st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                  "%s: the chunk of node %s has %zu records, its child masks "
                                  "announce %zu nodes",
                                  path, r->nodes[c.node].name, nrec, nq);
                goto _end;
            }
            nd = &r->nodes[queue[i]];
            nd->type = b[0];
            nd->mask = b[1];
            nd->num = grove__get32(b + 2);
            nd->off = grove__get64(b + 6);
            nd->size = grove__get64(b + 14);
            if (nd->type > 2 || (nd->type == 2 && i == 0) ||
                (nd->type < 2 && (nd->type == 1) != (nd->mask == 0))) {
                st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                  "%s: node %s: type %u with child mask 0x%02x (0 normal: some "
                                  "children, 1 leaf: none, 2 proxy: not a chunk's first record)",
                                  path, nd->name, nd->type, nd->mask);
                goto _end;
            }
            if (nd->type == 2) {
                stack[nstack++] = (pend){queue[i], nd->off, nd->size};
                continue;
            }
            if (nd->size != (uint64_t)nd->num * r->l.bpp || nd->off > octree_size ||
                nd->size > octree_size - nd->off) {
                st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                  "%s: node %s: %u points of %zu bytes do not make its %llu bytes "
                                  "at %llu, or they lie beyond octree.bin's %llu bytes",
                                  path, nd->name, nd->num, r->l.bpp, (unsigned long long)nd->size,
                                  (unsigned long long)nd->off, (unsigned long long)octree_size);
                goto _end;
            }
            if (nd->type == 1) leaf_points += nd->num;
            for (unsigned pc = 0; pc < 8; pc++) {
                pt_node *ch;
                size_t nl;
                if (!(nd->mask >> pc & 1u)) continue;
                if (nd->level >= GROVE_OCTREE_BITS) {
                    st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                      "%s: node %s: children deeper than level %d", path, nd->name,
                                      GROVE_OCTREE_BITS);
                    goto _end;
                }
                if (r->num_nodes >= cap || nq >= nrec) {
                    st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                      "%s: the chunk of node %s has %zu records, its child masks "
                                      "announce more nodes",
                                      path, r->nodes[c.node].name, nrec);
                    goto _end;
                }
                ch = &r->nodes[r->num_nodes];
                nd = &r->nodes[queue[i]];
                nl = strlen(nd->name);
                memcpy(ch->name, nd->name, nl);
                ch->name[nl] = (char)('0' + pc);
                ch->name[nl + 1] = '\0';
                ch->level = nd->level + 1;
                ch->type = 2; /* until its record is read */
                queue[nq++] = r->num_nodes++;
            }
        }
        if (nq != nrec) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: the chunk of node %s has %zu records, its child masks announce "
                              "%zu nodes",
                              path, r->nodes[c.node].name, nrec, nq);
            goto _end;
        }
    }
    if (leaf_points != r->points)
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: the leaves hold %llu points, metadata.json says %llu", path,
                          (unsigned long long)leaf_points, (unsigned long long)r->points);
_end:
    free(h);
    free(stack);
    free(queue);
    return st;
}

static int by_offset(const void *a, const void *b)
{
    const pt_node *x = *(const pt_node *const *)a, *y = *(const pt_node *const *)b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Decodes the points of the chosen nodes (in octree.bin order) into c. */
static grove_status decode(pt_read *r, const char *path, FILE *f, pt_node **sel, size_t nsel,
                           grove_cloud *c)
{
    const size_t per = 4096;
    unsigned char *buf = (unsigned char *)malloc(per * r->l.bpp);
    size_t at = 0;
    if (!buf) return grove__error(r->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    for (size_t k = 0; k < nsel; k++) {
        const pt_node *nd = sel[k];
        if (fseeko(f, (off_t)nd->off, SEEK_SET) != 0) {
            free(buf);
            return grove__error(r->ctx, GROVE_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
        }
        for (uint32_t done = 0; done < nd->num;) {
            size_t m = nd->num - done < per ? nd->num - done : per;
            grove_status s = grove__read_words(r->ctx, path, f, buf, m * r->l.bpp, 1, 1);
            if (s != GROVE_OK) {
                free(buf);
                return s;
            }
            for (size_t j = 0; j < m; j++, at++) {
                const unsigned char *b = buf + j * r->l.bpp;
                for (int a = 0; a < 3; a++)
                    c->xyz[3 * at + (size_t)a] =
                        (double)(int32_t)grove__get32(b + 4 * a) * r->l.scale[a] + r->l.offset[a];
                if (c->rgb)
                    for (int a = 0; a < 3; a++)
                        c->rgb[3 * at + (size_t)a] =
                            (uint16_t)(b[r->rgb_at + 2 * a] | b[r->rgb_at + 2 * a + 1] << 8);
                if (c->intensity)
                    c->intensity[at] = (uint16_t)(b[r->intensity_at] | b[r->intensity_at + 1] << 8);
            }
            done += (uint32_t)m;
        }
    }
    free(buf);
    return GROVE_OK;
}

grove_status grove_octree_export_level(grove_ctx *ctx, const char *dir, int level, grove_cloud *out)
{
    static const char fn[] = "grove_octree_export_level";
    static const char *const names[3] = {"metadata.json", "hierarchy.bin", "octree.bin"};
    char *path[3] = {NULL, NULL, NULL};
    pt_read r;
    pt_node **sel = NULL;
    size_t nsel = 0;
    uint64_t total = 0;
    FILE *f = NULL;
    struct stat sb;
    grove_cloud c;
    grove_status st = GROVE_OK;

    GROVE_TRY(grove__check_ctx(ctx));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    memset(out, 0, sizeof *out);
    if (!dir) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: dir is NULL", fn);
    if (level < 0) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: level %d < 0", fn, level);
    memset(&r, 0, sizeof r);
    memset(&c, 0, sizeof c);
    r.ctx = ctx;
    for (int k = 0; k < 3; k++)
        if (!(path[k] = join(dir, names[k]))) {
            st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
            goto _end;
        }
    GROVE_TRY_END(st, read_metadata(&r, path[0]));
    f = fopen(path[2], "rb");
    if (!f || fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = grove__error(ctx, GROVE_ERR_IO, "%s: cannot open: %s", path[2],
                          f ? "not a regular file" : strerror(errno));
        goto _end;
    }
    GROVE_TRY_END(st, read_hierarchy(&r, path[1], (uint64_t)sb.st_size));
    sel = (pt_node **)malloc(r.num_nodes * sizeof *sel);
    if (!sel) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto _end;
    }
    for (size_t i = 0; i < r.num_nodes; i++) {
        pt_node *nd = &r.nodes[i];
        if (nd->level == level || (nd->type == 1 && nd->level < level)) {
            sel[nsel++] = nd;
            total += nd->num;
        }
    }
    qsort(sel, nsel, sizeof *sel, by_offset);
    c.n = (size_t)total;
    c.has_scale = 1;
    for (int a = 0; a < 3; a++) c.scale[a] = r.l.scale[a], c.offset[a] = r.l.offset[a];
    if (total) {
        c.xyz = (double *)malloc(3 * c.n * sizeof *c.xyz);
        if (r.rgb_at >= 0) c.rgb = (uint16_t *)malloc(3 * c.n * sizeof *c.rgb);
        if (r.intensity_at >= 0) c.intensity = (uint16_t *)malloc(c.n * sizeof *c.intensity);
        if (!c.xyz || (r.rgb_at >= 0 && !c.rgb) || (r.intensity_at >= 0 && !c.intensity)) {
            st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu points", fn,
                              c.n);
            goto _end;
        }
        GROVE_TRY_END(st, decode(&r, path[2], f, sel, nsel, &c));
    }
    *out = c;
    memset(&c, 0, sizeof c);
_end:
    if (f) fclose(f);
    for (int k = 0; k < 3; k++) free(path[k]);
    free(sel);
    free(r.nodes);
    free(c.xyz);
    free(c.rgb);
    free(c.intensity);
    return st;
}
