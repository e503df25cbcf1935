/*
 * io_cloud.c - point clouds with double coordinates and optional colour and intensity: the
 * public read / write / free calls. LAS goes to io_las.c; PLY and text go through the readers
 * of io_ply.c and io_text.c in double precision, the ones grove_points64_read uses.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"

void grove_cloud_free(grove_cloud *c)
{
    if (!c) return;
    free(c->xyz);
    free(c->rgb);
    free(c->intensity);
    memset(c, 0, sizeof *c);
}

/* 1 if the file name (after the last '/') ends in "." ext, ext lower case, compared without
 * regard to case. */
static int name_ends_in(const char *path, const char *ext)
{
    const char *base = strrchr(path, '/'), *dot;
    size_t i, n = strlen(ext);
    base = base ? base + 1 : path;
    dot = strrchr(base, '.');
    if (!dot || dot == base || strlen(dot + 1) != n) return 0;
    for (i = 0; i < n; i++) {
        char ch = dot[1 + i];
        if (ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
        if (ch != ext[i]) return 0;
    }
    return 1;
}

/* The format a GROVE_CLOUD_AUTO read takes from the file name: as GROVE_POINTS_AUTO does, plus
 * .las (.laz is refused before); GROVE_CLOUD_AUTO when the name does not say. */
static grove_cloud_format format_by_name(const char *path)
{
    if (name_ends_in(path, "las")) return GROVE_CLOUD_LAS;
    if (name_ends_in(path, "ply")) return GROVE_CLOUD_PLY;
    if (name_ends_in(path, "csv") || name_ends_in(path, "txt") || name_ends_in(path, "xyz"))
        return GROVE_CLOUD_TEXT;
    return GROVE_CLOUD_AUTO;
}

/* The format by the first bytes: "LASF" is LAS, "ply" and a line end PLY, the rest text. */
static grove_status sniff(grove__rd *r, grove_cloud_format *fmt)
{
    size_t avail;
    const char *b;
    GROVE_TRY(grove__rd_need(r, 5, &avail));
    b = r->buf + r->beg;
    if (avail >= 4 && memcmp(b, "LASF", 4) == 0)
        *fmt = GROVE_CLOUD_LAS;
    else if ((avail >= 4 && memcmp(b, "ply\n", 4) == 0) ||
             (avail >= 5 && memcmp(b, "ply\r\n", 5) == 0))
        *fmt = GROVE_CLOUD_PLY;
    else
        *fmt = GROVE_CLOUD_TEXT;
    return GROVE_OK;
}

/* Moves the double points of p into c, and the attribute arrays (n values or more, or NULL)
 * with them, giving back what the geometric growth left unused (a block whose shrinking fails
 * is kept as it is). */
static void take(grove__pts *p, uint16_t *rgb, uint16_t *inten, grove_cloud *c)
{
    if (p->n > 0) {
        double *x = (double *)realloc(p->xyz, p->n * 3 * sizeof *x);
        c->xyz = x ? x : (double *)p->xyz;
        if (rgb) {
            uint16_t *q = (uint16_t *)realloc(rgb, p->n * 3 * sizeof *q);
            rgb = q ? q : rgb;
        }
        if (inten) {
            uint16_t *q = (uint16_t *)realloc(inten, p->n * sizeof *q);
            inten = q ? q : inten;
        }
    } else {
        free(p->xyz);
    }
    c->rgb = rgb;
    c->intensity = inten;
    c->n = p->n;
    memset(p, 0, sizeof *p);
}

grove_status grove_cloud_read(grove_ctx *ctx, const char *path, grove_cloud_format fmt,
                              grove_cloud *out)
{
    static const char fn[] = "grove_cloud_read";
    grove_status st = GROVE_OK;
    grove__pts pts = {NULL, 0, 0, 1};
    uint16_t *rgb = NULL, *inten = NULL;
    grove__rd r;
    int rd_open = 0;

    GROVE_TRY(grove__check_ctx(ctx));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    memset(out, 0, sizeof *out);
    if (!path) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: path is NULL", fn);
    if ((int)fmt < GROVE_CLOUD_AUTO || (int)fmt > GROVE_CLOUD_TEXT)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: fmt must be GROVE_CLOUD_AUTO, _LAS, _PLY or _TEXT, got %d", fn,
                            (int)fmt);
    /* A .laz file is compressed whatever its header says (the bit is checked too, for LAZ
     * files under other names). */
    if ((fmt == GROVE_CLOUD_AUTO || fmt == GROVE_CLOUD_LAS) && name_ends_in(path, "laz"))
        return grove__las_laz(ctx, path);
    if (fmt == GROVE_CLOUD_AUTO) fmt = format_by_name(path);
    if (fmt != GROVE_CLOUD_LAS) {
        GROVE_TRY(grove__rd_open(&r, ctx, path));
        rd_open = 1;
        if (fmt == GROVE_CLOUD_AUTO) GROVE_TRY_END(st, sniff(&r, &fmt));
    }
    if (fmt == GROVE_CLOUD_LAS) {
        /* The LAS reader has its own buffer; a sniffed file is opened again. */
        if (rd_open) grove__rd_close(&r);
        rd_open = 0;
        GROVE_TRY_END(st, grove__read_las(ctx, path, out));
    } else {
        if (fmt == GROVE_CLOUD_PLY)
            GROVE_TRY_END(st, grove__read_ply_cloud(&r, &pts, &rgb, &inten));
        else
            GROVE_TRY_END(st, grove__read_text_cloud(&r, &pts, &rgb, &inten));
        grove__rd_close(&r);
        rd_open = 0;
        take(&pts, rgb, inten, out);
    }
_end:
    if (rd_open) grove__rd_close(&r);
    if (st != GROVE_OK) {
        free(pts.xyz);
        grove_cloud_free(out);
    }
    return st;
}

/* ---- writer ---- */

/* Little-endian bytes of one vertex into b; returns the record size. */
static size_t put_vertex(unsigned char *b, const grove_cloud *c, size_t i)
{
    size_t k = 0;
    int d;
    for (d = 0; d < 3; d++) {
        uint64_t u;
        memcpy(&u, &c->xyz[3 * i + d], 8);
        grove__put64(b + k, u);
        k += 8;
    }
    for (d = 0; c->rgb && d < 3; d++) {
        b[k++] = (unsigned char)(c->rgb[3 * i + d] & 0xFF);
        b[k++] = (unsigned char)(c->rgb[3 * i + d] >> 8);
    }
    if (c->intensity) {
        b[k++] = (unsigned char)(c->intensity[i] & 0xFF);
        b[k++] = (unsigned char)(c->intensity[i] >> 8);
    }
    return k;
}

grove_status grove_cloud_write_ply(grove_ctx *ctx, const char *path, const grove_cloud *c)
{
    static const char fn[] = "grove_cloud_write_ply";
    enum { BATCH = 8192, MAX_REC = 3 * 8 + 4 * 2 };
    grove_status st = GROVE_OK;
    char *tmp = NULL;
    FILE *f = NULL;
    unsigned char *buf = NULL;
    size_t i, k = 0;
    int err = 0;

    GROVE_TRY(grove__check_ctx(ctx));
    if (!path) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: path is NULL", fn);
    if (!c) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: c is NULL", fn);
    if (c->n > 0 && !c->xyz)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: c->xyz is NULL with c->n = %zu", fn,
                            c->n);
    if (c->n > SIZE_MAX / 3)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: c->n = %zu is too large", fn, c->n);
    for (i = 0; i < 3 * c->n; i++)
        if (!isfinite(c->xyz[i]))
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: %s: point %zu has %s in coordinate %d; the file could not be "
                                "read back, nothing written",
                                fn, path, i / 3, isnan(c->xyz[i]) ? "NaN" : "infinity",
                                (int)(i % 3));

    buf = (unsigned char *)malloc((size_t)BATCH * MAX_REC);
    if (!buf) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    GROVE_TRY_END(st, grove__wfile_open(ctx, path, &tmp, &f));
    k = (size_t)snprintf((char *)buf, (size_t)BATCH * MAX_REC,
                         "ply\nformat binary_little_endian 1.0\ncomment written by grove %s\n"
                         "element vertex %zu\nproperty double x\nproperty double y\n"
                         "property double z\n%s%send_header\n",
                         grove_version(), c->n,
                         c->rgb ? "property ushort red\nproperty ushort green\n"
                                  "property ushort blue\n"
                                : "",
                         c->intensity ? "property ushort intensity\n" : "");
    for (i = 0; i <= c->n; i++) {
        /* Flush before a record could overflow the buffer, and at the end. */
        if (k + MAX_REC > (size_t)BATCH * MAX_REC || i == c->n) {
            errno = 0;
            if (!err && fwrite(buf, 1, k, f) != k) err = errno ? errno : EIO;
            k = 0;
        }
        if (i < c->n) k += put_vertex(buf + k, c, i);
    }
    st = grove__wfile_commit(ctx, path, tmp, f, err);
    tmp = NULL;
_end:
    free(tmp);
    free(buf);
    return st;
}
