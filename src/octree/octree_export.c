/*
 * octree_export.c - grove_octree_export_level(): reads a Potree 2.0 directory back as a viewer
 * would (metadata.json through the reader of octree_json.c, every chunk of hierarchy.bin with
 * its proxies followed) and decodes the points of one level from octree.bin. Messages name
 * nodes as Potree does: "r" and one childIndex digit per level (octree_potree.c explains
 * childIndex). docs/FORMATS.md ("Potree 2.0 output") has the layout.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "octree_files.h"
#include "octree_internal.h"
#include "octree_json.h"

#define PT_NAME 32 /* "r" + one digit per level (depth <= 30) + NUL */
#define JSON_MAX ((size_t)1 << 24)

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
    grove__ot_layout l;
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
    grove__ot_jparser p;
    size_t root, len, at = 0;
    const grove__ot_jval *o, *attrs, *hier;
    const char *s;
    grove_status st;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.path = path;
    GROVE_TRY(slurp(ctx, path, JSON_MAX, &p.s, &len));
    p.len = len;
    GROVE_TRY_END(st, grove__ot_j_value(&p, &root));
    grove__ot_j_ws(&p);
    if (p.pos != p.len) {
        st = grove__ot_j_fail(&p, "text after the top-level value");
        goto _end;
    }
    o = &p.v[root];
    st = GROVE_ERR_BAD_INPUT;
    if (o->type != GROVE__OT_J_OBJ) {
        grove__error(ctx, st, "%s: the top-level value is not an object", path);
        goto _end;
    }
    if (!(s = grove__ot_j_str(&p, o, "version")) || strcmp(s, "2.0") != 0) {
        grove__error(ctx, st, "%s: \"version\" is %s%s%s, this reader takes \"2.0\"", path,
                     s ? "\"" : "", s ? s : "missing or not a string", s ? "\"" : "");
        goto _end;
    }
    if ((s = grove__ot_j_str(&p, o, "encoding")) && strcmp(s, "DEFAULT") != 0) {
        grove__error(ctx, st, "%s: encoding \"%s\" is not supported (only DEFAULT)", path, s);
        goto _end;
    }
    GROVE_TRY_END(st, grove__ot_j_uint(&p, o, "points", 4294967295.0, &r->points));
    hier = grove__ot_j_get(&p, o, "hierarchy");
    GROVE_TRY_END(st, grove__ot_j_uint(&p, hier, "firstChunkSize", 9.0e15, &r->first_chunk));
    if (r->first_chunk == 0 || r->first_chunk % GROVE__OT_PT_RECORD) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: hierarchy.firstChunkSize %llu is not a positive multiple of %u",
                          path, (unsigned long long)r->first_chunk, GROVE__OT_PT_RECORD);
        goto _end;
    }
    GROVE_TRY_END(st, grove__ot_j_vec(&p, o, "scale", 3, r->l.scale));
    GROVE_TRY_END(st, grove__ot_j_vec(&p, o, "offset", 3, r->l.offset));
    for (int a = 0; a < 3; a++)
        if (!(r->l.scale[a] > 0)) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT, "%s: scale[%d] is not positive", path, a);
            goto _end;
        }
    attrs = grove__ot_j_get(&p, o, "attributes");
    if (!attrs || attrs->type != GROVE__OT_J_ARR || attrs->count == 0) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: \"attributes\" is missing or not a non-empty array", path);
        goto _end;
    }
    r->rgb_at = r->intensity_at = -1;
    for (size_t i = 0; i < attrs->count; i++) {
        const grove__ot_jval *a = grove__ot_j_at(&p, attrs, i);
        const char *name = grove__ot_j_str(&p, a, "name"), *type = grove__ot_j_str(&p, a, "type");
        uint64_t size, elems;
        if (!name || !type) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: attribute %zu has no \"name\" or \"type\" string", path, i);
            goto _end;
        }
        GROVE_TRY_END(st, grove__ot_j_uint(&p, a, "size", 1024, &size));
        GROVE_TRY_END(st, grove__ot_j_uint(&p, a, "numElements", 1024, &elems));
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

/* Reads hierarchy.bin (path): every chunk, proxies followed, into r->nodes (breadth-first
 * within each chunk); checks each node's bytes against the record size and the length of
 * octree.bin (obin, named in the message when it is too short). */
static grove_status read_hierarchy(pt_read *r, const char *path, const char *obin,
                                   uint64_t octree_size)
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
    cap = len / GROVE__OT_PT_RECORD + 1;
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
        if (c.size == 0 || c.size % GROVE__OT_PT_RECORD || c.off > len || c.size > len - c.off) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: the chunk of node %s, bytes [%llu, +%llu), is not a whole "
                              "number of %u-byte records within the file's %zu bytes",
                              path, r->nodes[c.node].name, (unsigned long long)c.off,
                              (unsigned long long)c.size, GROVE__OT_PT_RECORD, len);
            goto _end;
        }
        nrec = (size_t)(c.size / GROVE__OT_PT_RECORD);
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
            const unsigned char *b = h + c.off + GROVE__OT_PT_RECORD * i;
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
            if (nd->size != (uint64_t)nd->num * r->l.bpp) {
                st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                  "%s: node %s: %u points of %zu bytes do not make its %llu bytes "
                                  "at %llu",
                                  path, nd->name, nd->num, r->l.bpp, (unsigned long long)nd->size,
                                  (unsigned long long)nd->off);
                goto _end;
            }
            /* The node's own record is consistent: octree.bin is the file too short for it (a
             * truncated octree.bin, or a byteOffset beyond any file grove writes). */
            if (nd->off > octree_size || nd->size > octree_size - nd->off) {
                if (nd->size > 0 && nd->off <= UINT64_MAX - (nd->size - 1))
                    st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                      "%s: %llu bytes, but node %s (%s) needs bytes %llu..%llu",
                                      obin, (unsigned long long)octree_size, nd->name, path,
                                      (unsigned long long)nd->off,
                                      (unsigned long long)(nd->off + (nd->size - 1)));
                else
                    st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                      "%s: %llu bytes, but node %s (%s) needs %llu bytes from "
                                      "byte %llu",
                                      obin, (unsigned long long)octree_size, nd->name, path,
                                      (unsigned long long)nd->size, (unsigned long long)nd->off);
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
        if (!(path[k] = grove__ot_join(dir, names[k]))) {
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
    GROVE_TRY_END(st, read_hierarchy(&r, path[1], path[2], (uint64_t)sb.st_size));
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
