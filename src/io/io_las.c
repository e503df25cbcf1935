/*
 * io_las.c - LAS 1.2-1.4 point files, uncompressed, point data record formats 0-3 and 6-8.
 *
 * Header fields are read at the byte offsets of the ASPRS LAS 1.4 specification (R15), table
 * "Public Header Block"; 1.2 headers end at byte 227, 1.3 headers at 235 (start of waveform
 * data), 1.4 headers at 375 (EVLRs and the 64-bit counts). Every field is decoded from
 * little-endian bytes, so the reader works on hosts of either byte order.
 *
 * The body streams through one fixed buffer of whole records; each buffer is decoded by all
 * threads (records are independent). The file's size is checked against the header's point
 * count before anything is allocated, so a lying header costs an error message, not memory.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io_internal.h"

/* x = X * scale + offset must be two roundings, as every LAS reader computes it: a fused
 * multiply-add would give different last bits. The product is also its own statement. */
#pragma STDC FP_CONTRACT OFF

/* Bytes of the body read at a time (rounded down to whole records). */
#define LAS_CHUNK ((size_t)1 << 22)

/* Below this many records in a buffer the decode runs on one thread. */
#define LAS_PAR_MIN 16384

/* Header field offsets (LAS 1.4 R15, Public Header Block). */
enum {
    H_VERSION_MAJOR = 24,
    H_VERSION_MINOR = 25,
    H_HEADER_SIZE = 94,
    H_OFFSET_TO_POINTS = 96,
    H_POINT_FORMAT = 104,
    H_RECORD_LENGTH = 105,
    H_LEGACY_COUNT = 107,
    H_SCALE = 131,   /* x, y, z doubles */
    H_OFFSET = 155,  /* x, y, z doubles */
    H_COUNT64 = 247, /* 1.4 only */
    H_SIZE_12 = 227,
    H_SIZE_13 = 235,
    H_SIZE_14 = 375
};

static uint16_t le16(const unsigned char *b) { return (uint16_t)(b[0] | (b[1] << 8)); }

static int32_t le_i32(const unsigned char *b)
{
    uint32_t u =
        (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
    int32_t v;
    memcpy(&v, &u, 4);
    return v;
}

static double le_f64(const unsigned char *b)
{
    uint64_t u = grove__get64(b);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

/* The layout of a supported point format: its minimum record length and where its colour is
 * (0: none). Intensity is at byte 12 and X, Y, Z at 0, 4, 8 in every format. */
typedef struct las_format {
    size_t min_len, rgb_at;
} las_format;

static int format_info(int f, las_format *fi)
{
    static const las_format tab[9] = {{20, 0}, {28, 0}, {26, 20}, {34, 28}, {0, 0},
                                      {0, 0},  {30, 0}, {36, 30}, {38, 30}};
    if (f < 0 || f > 8 || tab[f].min_len == 0) return 0;
    *fi = tab[f];
    return 1;
}

typedef struct las {
    grove_ctx *ctx;
    const char *path;
    FILE *f;
    unsigned char *buf;
    uint64_t pos; /* bytes of the file consumed so far */
} las;

static grove_status bad(const las *s, const char *what)
{
    return grove__error(s->ctx, GROVE_ERR_BAD_INPUT, "%s: %s", s->path, what);
}

/* Reads up to n bytes to p; *got receives how many there were before end of file. */
static grove_status read_some(las *s, void *p, size_t n, size_t *got)
{
    *got = fread(p, 1, n, s->f);
    s->pos += *got;
    if (*got < n && ferror(s->f))
        return grove__error(s->ctx, GROVE_ERR_IO, "%s: read error: %s", s->path, strerror(errno));
    return GROVE_OK;
}

static grove_status truncated(const las *s, uint64_t rec)
{
    return grove__error(s->ctx, GROVE_ERR_BAD_INPUT,
                        "%s: point record %llu: truncated (file ends at byte %llu)", s->path,
                        (unsigned long long)rec, (unsigned long long)s->pos);
}

/* Grows the cloud's arrays (rgb too when with_rgb) to room for `want` points, geometrically,
 * at most `limit`. */
static grove_status reserve(las *s, grove_cloud *c, int with_rgb, size_t *cap, size_t want,
                            size_t limit)
{
    size_t nc = *cap ? *cap : 65536;
    void *p;
    if (want <= *cap) return GROVE_OK;
    while (nc < want) nc = nc > SIZE_MAX / 2 ? want : nc * 2;
    if (nc > limit) nc = limit;
    if (nc > SIZE_MAX / (3 * sizeof(double)))
        return grove__error(s->ctx, GROVE_ERR_LIMIT, "%s: %zu points do not fit in memory", s->path,
                            nc);
    if (!(p = realloc(c->xyz, nc * 3 * sizeof(double)))) goto _nomem;
    c->xyz = (double *)p;
    if (!(p = realloc(c->intensity, nc * sizeof(uint16_t)))) goto _nomem;
    c->intensity = (uint16_t *)p;
    if (with_rgb) {
        if (!(p = realloc(c->rgb, nc * 3 * sizeof(uint16_t)))) goto _nomem;
        c->rgb = (uint16_t *)p;
    }
    *cap = nc;
    return GROVE_OK;
_nomem:
    return grove__error(s->ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu points",
                        s->path, nc);
}

/* Decodes m records of buf into points [first, first + m). */
static void decode(const las *s, grove_cloud *c, size_t first, size_t m, size_t reclen,
                   const las_format *fi, int with_rgb)
{
    const unsigned char *buf = s->buf;
    const double *sc = c->scale, *of = c->offset;
    long long j, mm = (long long)m;
#pragma omp parallel for schedule(static) if (m >= LAS_PAR_MIN)
    for (j = 0; j < mm; j++) {
        const unsigned char *rec = buf + (size_t)j * reclen;
        size_t i = first + (size_t)j;
        double *p = c->xyz + 3 * i;
        int d;
        for (d = 0; d < 3; d++) {
            double v = (double)le_i32(rec + 4 * d) * sc[d];
            p[d] = v + of[d];
        }
        c->intensity[i] = le16(rec + 12);
        if (with_rgb) {
            c->rgb[3 * i + 0] = le16(rec + fi->rgb_at);
            c->rgb[3 * i + 1] = le16(rec + fi->rgb_at + 2);
            c->rgb[3 * i + 2] = le16(rec + fi->rgb_at + 4);
        }
    }
}

grove_status grove__las_laz(grove_ctx *ctx, const char *path)
{
    return grove__error(
        ctx, GROVE_ERR_UNSUPPORTED,
        "%s: LAZ (compressed LAS) is not supported; decompress it with laszip first", path);
}

/* Checks the header bytes h (got of them read) and fills the cloud's scale and offset,
 * *fi, *reclen, *offset and *count. */
static grove_status check_header(las *s, const unsigned char *h, size_t got, grove_cloud *c,
                                 las_format *fi, size_t *reclen, uint64_t *offset, uint64_t *count)
{
    static const char axis[3] = {'x', 'y', 'z'};
    char msg[256];
    int major, minor, fmt, d;
    size_t need;
    unsigned hsize;
    uint32_t legacy;

    if (got < 4 || memcmp(h, "LASF", 4) != 0)
        return bad(s, "not a LAS file (it does not start with 'LASF')");
    if (got < H_VERSION_MINOR + 1) {
        snprintf(msg, sizeof msg, "header: truncated (file ends at byte %zu)", got);
        return bad(s, msg);
    }
    major = h[H_VERSION_MAJOR];
    minor = h[H_VERSION_MINOR];
    if (major != 1 || minor < 2 || minor > 4) {
        snprintf(msg, sizeof msg,
                 "LAS version %d.%d is out of range (this reader takes 1.2 to 1.4)", major, minor);
        return bad(s, msg);
    }
    need = minor == 2 ? H_SIZE_12 : minor == 3 ? H_SIZE_13 : H_SIZE_14;
    if (got < need) {
        snprintf(msg, sizeof msg,
                 "header: truncated (file ends at byte %zu, a LAS 1.%d header has %zu bytes)", got,
                 minor, need);
        return bad(s, msg);
    }
    hsize = le16(h + H_HEADER_SIZE);
    if (hsize < need) {
        snprintf(msg, sizeof msg, "header size %u is too small (a LAS 1.%d header has %zu bytes)",
                 hsize, minor, need);
        return bad(s, msg);
    }
    fmt = h[H_POINT_FORMAT];
    /* Bit 7 marks LASzip compression; early LASzip versions set bit 6 instead. */
    if (fmt & 0xC0) return grove__las_laz(s->ctx, s->path);
    if (fmt == 4 || fmt == 5 || fmt == 9 || fmt == 10)
        return grove__error(s->ctx, GROVE_ERR_UNSUPPORTED,
                            "%s: point format %d (with waveform data) is not supported (formats "
                            "0-3 and 6-8 are)",
                            s->path, fmt);
    if (!format_info(fmt, fi)) {
        snprintf(msg, sizeof msg, "unknown point format %d (LAS defines 0-10)", fmt);
        return bad(s, msg);
    }
    if (fmt >= 6 && minor < 4) {
        snprintf(msg, sizeof msg, "point format %d needs LAS 1.4, the file is LAS 1.%d", fmt,
                 minor);
        return bad(s, msg);
    }
    *reclen = le16(h + H_RECORD_LENGTH);
    if (*reclen < fi->min_len) {
        snprintf(msg, sizeof msg,
                 "point record length %zu is smaller than point format %d needs (%zu bytes)",
                 *reclen, fmt, fi->min_len);
        return bad(s, msg);
    }
    *offset = grove__get32(h + H_OFFSET_TO_POINTS);
    if (*offset < hsize) {
        snprintf(msg, sizeof msg, "offset to point data %llu is inside the header (%u bytes)",
                 (unsigned long long)*offset, hsize);
        return bad(s, msg);
    }
    for (d = 0; d < 3; d++) {
        double sc = le_f64(h + H_SCALE + 8 * d), of = le_f64(h + H_OFFSET + 8 * d);
        if (!isfinite(sc) || sc == 0.0) {
            snprintf(msg, sizeof msg, "%c scale factor is %s", axis[d],
                     sc == 0.0 ? "0" : "not finite");
            return bad(s, msg);
        }
        if (!isfinite(of)) {
            snprintf(msg, sizeof msg, "%c offset is not finite", axis[d]);
            return bad(s, msg);
        }
        /* |X| <= 2^31, so this bounds every coordinate the file can hold. */
        if (!isfinite(fabs(sc) * 2147483648.0 + fabs(of))) {
            snprintf(msg, sizeof msg,
                     "%c scale factor %g and offset %g give coordinates beyond double range",
                     axis[d], sc, of);
            return bad(s, msg);
        }
        c->scale[d] = sc;
        c->offset[d] = of;
    }
    c->has_scale = 1;
    legacy = grove__get32(h + H_LEGACY_COUNT);
    *count = legacy;
    if (minor == 4) {
        uint64_t c64 = grove__get64(h + H_COUNT64);
        /* The legacy count is 0 where it cannot hold the count (formats 6-10, or more than
         * 2^32 - 1 points); some writers fill only the legacy field. */
        if (legacy == 0)
            *count = c64;
        else if (c64 != 0 && c64 != legacy) {
            snprintf(msg, sizeof msg,
                     "legacy point count %lu differs from the 64-bit point count %llu",
                     (unsigned long)legacy, (unsigned long long)c64);
            return bad(s, msg);
        }
    }
    return GROVE_OK;
}

/* The count against the file's size (a regular file), before the count against memory: a
 * header that claims more records than the file holds is a damaged file, however large the
 * claim. */
static grove_status check_count(las *s, int regular, uint64_t size, uint64_t offset, size_t reclen,
                                uint64_t count)
{
    if (regular) {
        uint64_t fit = size > offset ? (size - offset) / reclen : 0;
        if (count > fit)
            return grove__error(s->ctx, GROVE_ERR_BAD_INPUT,
                                "%s: point record %llu: truncated (file ends at byte %llu), the "
                                "header counts %llu points of %zu bytes from byte %llu",
                                s->path, (unsigned long long)fit, (unsigned long long)size,
                                (unsigned long long)count, reclen, (unsigned long long)offset);
    }
    if (count > SIZE_MAX / (3 * sizeof(double)))
        return grove__error(s->ctx, GROVE_ERR_LIMIT, "%s: %llu points do not fit in memory",
                            s->path, (unsigned long long)count);
    return GROVE_OK;
}

grove_status grove__read_las(grove_ctx *ctx, const char *path, grove_cloud *out)
{
    unsigned char h[H_SIZE_14];
    las s;
    las_format fi;
    grove_status st = GROVE_OK;
    size_t got, reclen = 0, chunk, cap = 0;
    uint64_t offset = 0, count = 0, done = 0;
    struct stat sb;
    int regular, with_rgb;

    memset(&s, 0, sizeof s);
    s.ctx = ctx;
    s.path = path;
    s.f = fopen(path, "rb");
    if (!s.f) return grove__error(ctx, GROVE_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    /* The 1.2 header first: every header is at least that long and no longer than the offset
     * to the points, so nothing read here belongs to the body. */
    GROVE_TRY_END(st, read_some(&s, h, H_SIZE_12, &got));
    if (got == H_SIZE_12 && h[H_VERSION_MINOR] > 2 && h[H_VERSION_MINOR] <= 4) {
        size_t more, rest = h[H_VERSION_MINOR] == 3 ? H_SIZE_13 - H_SIZE_12 : H_SIZE_14 - H_SIZE_12;
        GROVE_TRY_END(st, read_some(&s, h + H_SIZE_12, rest, &more));
        got += more;
    }
    GROVE_TRY_END(st, check_header(&s, h, got, out, &fi, &reclen, &offset, &count));
    with_rgb = fi.rgb_at != 0;

    regular = fstat(fileno(s.f), &sb) == 0 && S_ISREG(sb.st_mode);
    GROVE_TRY_END(
        st, check_count(&s, regular, regular ? (uint64_t)sb.st_size : 0, offset, reclen, count));
    if (regular && count > 0)
        GROVE_TRY_END(st, reserve(&s, out, with_rgb, &cap, (size_t)count, count));

    chunk = LAS_CHUNK / reclen;
    if (chunk == 0) chunk = 1;
    s.buf = (unsigned char *)malloc(chunk * reclen);
    if (!s.buf) {
        st =
            grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for a read buffer", path);
        goto _end;
    }
    while (s.pos < offset) { /* VLRs, and anything else before the points */
        uint64_t k = offset - s.pos;
        size_t want = k < chunk * reclen ? (size_t)k : chunk * reclen;
        GROVE_TRY_END(st, read_some(&s, s.buf, want, &got));
        if (got < want) GROVE_TRY_END(st, truncated(&s, 0));
    }
    while (done < count) {
        size_t m = count - done < chunk ? (size_t)(count - done) : chunk;
        GROVE_TRY_END(st, reserve(&s, out, with_rgb, &cap, (size_t)done + m, count));
        GROVE_TRY_END(st, read_some(&s, s.buf, m * reclen, &got));
        if (got < m * reclen) GROVE_TRY_END(st, truncated(&s, done + got / reclen));
        decode(&s, out, (size_t)done, m, reclen, &fi, with_rgb);
        done += m;
    }
    out->n = (size_t)count;
_end:
    fclose(s.f);
    free(s.buf);
    return st;
}
