/*
 * test_las.c - point clouds (grove_cloud_read / grove_cloud_write_ply): LAS files of every
 * supported version and point format, built byte by byte here with random coordinates, scales,
 * offsets, a VLR before the points and extra bytes in every record, read back and compared
 * exactly; every bad-file case with its status and message; LAZ; a large file to show that the
 * body streams; PLY with and without colour; text, with colour and intensity columns named by
 * a header; and the PLY writer.
 *
 * Usage: test_las [--large N] [--seed S]   (N points in the large file, default 10^7;
 *                                           --large 0 skips it)
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "grove/io.h"
#include "testutil.h"
#include "tu_files.h"

/* The expected coordinates are computed as the reader must: a product, then a sum. */
#pragma STDC FP_CONTRACT OFF

static grove_ctx *ctx;
static tu_rng rng;

/* ---- files ---- */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- little-endian bytes ---- */

static void w16(unsigned char *b, unsigned v)
{
    b[0] = (unsigned char)v;
    b[1] = (unsigned char)(v >> 8);
}

static void w32(unsigned char *b, uint32_t v)
{
    int i;
    for (i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
}

static void w64(unsigned char *b, uint64_t v)
{
    int i;
    for (i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
}

static void wf64(unsigned char *b, double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    w64(b, u);
}

static void fill_random(unsigned char *b, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) b[i] = (unsigned char)tu_next(&rng);
}

/* ---- LAS files built here ---- */

/* Minimum record length and colour position of the supported formats (LAS 1.4 R15 tables). */
static size_t fmt_len(int f)
{
    static const size_t len[11] = {20, 28, 26, 34, 57, 63, 30, 36, 38, 59, 67};
    return len[f];
}

static size_t fmt_rgb(int f) { return f == 2 ? 20 : f == 3 ? 28 : (f == 7 || f == 8) ? 30 : 0; }

typedef struct las_spec {
    int minor, fmt;
    size_t n, extra;  /* points, extra bytes per record */
    size_t vlr;       /* payload bytes of one VLR between header and points; (size_t)-1: none */
    size_t hdr_extra; /* bytes in the header beyond the version's size */
    int counts;       /* 1.4: 0 both counts, 1 legacy 0, 2 64-bit 0 */
    double scale[3], offset[3];
} las_spec;

/* The points a LAS file holds, and what the reader must return. */
typedef struct las_truth {
    int32_t *X;          /* 3 * n */
    uint16_t *intensity; /* n */
    uint16_t *rgb;       /* 3 * n */
} las_truth;

static void truth_free(las_truth *t)
{
    free(t->X);
    free(t->intensity);
    free(t->rgb);
    memset(t, 0, sizeof *t);
}

static size_t hdr_size(int minor) { return minor == 2 ? 227 : minor == 3 ? 235 : 375; }

/* Header of a file for spec s (point count s->n); returns its length (offset to points). */
static size_t las_header(const las_spec *s, unsigned char *h, size_t cap)
{
    size_t hs = hdr_size(s->minor) + s->hdr_extra, off = hs, reclen = fmt_len(s->fmt) + s->extra;
    int d;
    if (s->vlr != (size_t)-1) off += 54 + s->vlr;
    if (off > cap) {
        fprintf(stderr, "test_las: header buffer too small\n");
        exit(2);
    }
    fill_random(h, off); /* unused fields are random: the reader must not look at them */
    memcpy(h, "LASF", 4);
    h[24] = 1;
    h[25] = (unsigned char)s->minor;
    w16(h + 94, (unsigned)hs);
    w32(h + 96, (uint32_t)off);
    w32(h + 100, s->vlr != (size_t)-1 ? 1u : 0u);
    h[104] = (unsigned char)s->fmt;
    w16(h + 105, (unsigned)reclen);
    w32(h + 107, (uint32_t)s->n);
    for (d = 0; d < 3; d++) {
        wf64(h + 131 + 8 * d, s->scale[d]);
        wf64(h + 155 + 8 * d, s->offset[d]);
    }
    if (s->minor == 4) {
        w64(h + 247, (uint64_t)s->n);
        if (s->counts == 1) w32(h + 107, 0);
        if (s->counts == 2) w64(h + 247, 0);
    }
    if (s->vlr != (size_t)-1) {
        unsigned char *v = h + hs;
        w16(v, 0);
        memcpy(v + 2, "grove_test\0\0\0\0\0\0", 16);
        w16(v + 18, 12345);
        w16(v + 20, (unsigned)s->vlr);
    }
    return off;
}

/* Record i of the truth t into rec (reclen bytes, the rest random). */
static void las_record(const las_spec *s, const las_truth *t, size_t i, unsigned char *rec)
{
    size_t reclen = fmt_len(s->fmt) + s->extra, ra = fmt_rgb(s->fmt);
    int d;
    fill_random(rec, reclen);
    for (d = 0; d < 3; d++) w32(rec + 4 * d, (uint32_t)t->X[3 * i + d]);
    w16(rec + 12, t->intensity[i]);
    if (ra)
        for (d = 0; d < 3; d++) w16(rec + ra + 2 * d, t->rgb[3 * i + d]);
}

static void random_truth(size_t n, las_truth *t)
{
    size_t i;
    t->X = (int32_t *)tu_malloc(3 * n * sizeof(int32_t));
    t->intensity = (uint16_t *)tu_malloc(n * sizeof(uint16_t));
    t->rgb = (uint16_t *)tu_malloc(3 * n * sizeof(uint16_t));
    for (i = 0; i < 3 * n; i++) {
        t->X[i] = (int32_t)tu_u32(&rng);
        t->rgb[i] = (uint16_t)tu_u32(&rng);
    }
    for (i = 0; i < n; i++) t->intensity[i] = (uint16_t)tu_u32(&rng);
    /* The extremes of the integer range, where the first points allow. */
    if (n > 0) t->X[0] = INT32_MIN;
    if (n > 1) t->X[4] = INT32_MAX;
    if (n > 2) t->X[8] = 0;
}

/* The whole file in memory: header, VLR, records. */
static unsigned char *las_bytes(const las_spec *s, const las_truth *t, size_t *len)
{
    unsigned char h[4096];
    size_t off = las_header(s, h, sizeof h), reclen = fmt_len(s->fmt) + s->extra, i;
    unsigned char *b = (unsigned char *)tu_malloc(off + s->n * reclen);
    memcpy(b, h, off);
    for (i = 0; i < s->n; i++) las_record(s, t, i, b + off + i * reclen);
    *len = off + s->n * reclen;
    return b;
}

static double expect(const las_spec *s, int32_t X, int d)
{
    double v = (double)X * s->scale[d];
    return v + s->offset[d];
}

/* Compares a cloud read from the file of spec s with the truth; returns the failures. */
static int compare(const char *what, const las_spec *s, const las_truth *t, const grove_cloud *c)
{
    size_t i;
    int d, bad = 0;
    if (c->n != s->n) {
        FAIL("%s: n = %zu, want %zu", what, c->n, s->n);
        return 1;
    }
    if (!c->has_scale) {
        FAIL("%s: has_scale is 0", what);
        bad++;
    }
    for (d = 0; d < 3; d++)
        if (memcmp(&c->scale[d], &s->scale[d], 8) || memcmp(&c->offset[d], &s->offset[d], 8)) {
            FAIL("%s: scale/offset %d differ", what, d);
            bad++;
        }
    if (s->n > 0 && (!c->xyz || !c->intensity)) {
        FAIL("%s: xyz or intensity is NULL", what);
        return bad + 1;
    }
    if ((fmt_rgb(s->fmt) != 0 && s->n > 0) != (c->rgb != NULL)) {
        FAIL("%s: rgb is %s for format %d", what, c->rgb ? "set" : "NULL", s->fmt);
        bad++;
    }
    if (s->n == 0 && (c->xyz || c->intensity || c->rgb)) {
        FAIL("%s: arrays not NULL for 0 points", what);
        bad++;
    }
    for (i = 0; i < s->n && bad < 10; i++) {
        for (d = 0; d < 3; d++) {
            double e = expect(s, t->X[3 * i + d], d);
            if (memcmp(&c->xyz[3 * i + d], &e, 8) != 0) {
                FAIL("%s: point %zu coordinate %d = %.17g, want %.17g", what, i, d,
                     c->xyz[3 * i + d], e);
                bad++;
            }
        }
        if (c->intensity[i] != t->intensity[i]) {
            FAIL("%s: point %zu intensity %u, want %u", what, i, c->intensity[i], t->intensity[i]);
            bad++;
        }
        if (c->rgb)
            for (d = 0; d < 3; d++)
                if (c->rgb[3 * i + d] != t->rgb[3 * i + d]) {
                    FAIL("%s: point %zu rgb[%d] %u, want %u", what, i, d, c->rgb[3 * i + d],
                         t->rgb[3 * i + d]);
                    bad++;
                }
    }
    return bad;
}

static void random_spec(las_spec *s, int minor, int fmt, size_t n)
{
    int d;
    memset(s, 0, sizeof *s);
    s->minor = minor;
    s->fmt = fmt;
    s->n = n;
    s->extra = tu_u32(&rng) % 3 == 0 ? 0 : 1 + tu_u32(&rng) % 40;
    s->vlr = tu_u32(&rng) % 4 == 0 ? (size_t)-1 : tu_u32(&rng) % 300;
    s->hdr_extra = tu_u32(&rng) % 4 == 0 ? 1 + tu_u32(&rng) % 20 : 0;
    s->counts = (int)(tu_u32(&rng) % 3);
    for (d = 0; d < 3; d++) {
        /* Scales like 0.01 or 0.001 and random ones; offsets large, as in projected data. */
        double sc[4] = {0.01, 0.001, 1e-7, 0};
        sc[3] = tu_f32(&rng, 1e-4f, 10.0f) * (tu_u32(&rng) & 1 ? -1 : 1);
        s->scale[d] = sc[tu_u32(&rng) % 4];
        s->offset[d] = (double)tu_f32(&rng, -1e6f, 1e6f) * 1.000000001;
    }
}

/* Writes spec s to NAME, reads it with fmt, compares. */
static void roundtrip(const char *name, const las_spec *s, grove_cloud_format fmt)
{
    las_truth t;
    grove_cloud c;
    size_t len;
    unsigned char *b;
    char what[256];
    random_truth(s->n, &t);
    b = las_bytes(s, &t, &len);
    put_file(name, b, len);
    snprintf(what, sizeof what, "%s (LAS 1.%d format %d, %zu points, %zu extra bytes)", name,
             s->minor, s->fmt, s->n, s->extra);
    CHECK_OK(ctx, grove_cloud_read(ctx, path_of(name), fmt, &c));
    compare(what, s, &t, &c);
    grove_cloud_free(&c);
    unlink(path_of(name));
    free(b);
    truth_free(&t);
}

static void test_formats(void)
{
    static const int fmts[7] = {0, 1, 2, 3, 6, 7, 8};
    static const size_t sizes[] = {0, 1, 31, 32, 33, 1000, 20000};
    int minor, k;
    size_t si;
    for (minor = 2; minor <= 4; minor++)
        for (k = 0; k < 7; k++) {
            if (fmts[k] >= 6 && minor < 4) continue;
            for (si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
                las_spec s;
                random_spec(&s, minor, fmts[k], sizes[si]);
                /* AUTO by extension, AUTO by the signature, and LAS named. */
                roundtrip(si % 3 == 0   ? "a.las"
                          : si % 3 == 1 ? "a.LAS"
                                        : "a.bin",
                          &s, si % 2 ? GROVE_CLOUD_AUTO : GROVE_CLOUD_LAS);
            }
        }
}

/* Around the reader's 4 MiB body buffer (whole records) and its parallel threshold. */
static void test_chunks(void)
{
    static const int fmts[3] = {0, 3, 8};
    int k, dn;
    for (k = 0; k < 3; k++) {
        las_spec s;
        size_t chunk;
        random_spec(&s, 4, fmts[k], 0);
        chunk = ((size_t)1 << 22) / (fmt_len(s.fmt) + s.extra);
        for (dn = -1; dn <= 1; dn++) {
            s.n = chunk + (size_t)(long)dn;
            roundtrip("chunk.las", &s, GROVE_CLOUD_AUTO);
        }
        s.n = 2 * chunk + 7;
        roundtrip("chunk.las", &s, GROVE_CLOUD_AUTO);
    }
}

/* ---- bad files ---- */

static void expect_fail(const char *name, const void *b, size_t len, grove_cloud_format fmt,
                        grove_status want, const char *part)
{
    grove_cloud c;
    grove_status st;
    put_file(name, b, len);
    memset(&c, 0x5a, sizeof c);
    st = grove_cloud_read(ctx, path_of(name), fmt, &c);
    if (st != want)
        FAIL("%s: status %d (%s), want %d; message: %s", name, (int)st, grove_status_string(st),
             (int)want, grove_ctx_last_error(ctx));
    else {
        const char *m = grove_ctx_last_error(ctx);
        if (!strstr(m, part)) FAIL("%s: message '%s' lacks '%s'", name, m, part);
        if (strncmp(m, path_of(name), strlen(path_of(name))) != 0)
            FAIL("%s: message '%s' does not start with the path", name, m);
    }
    if (c.xyz || c.rgb || c.intensity || c.n || c.has_scale)
        FAIL("%s: *out not zeroed on failure", name);
    unlink(path_of(name));
}

/* A good file of spec s as bytes, to be damaged. */
static unsigned char *good(las_spec *s, int minor, int fmt, size_t n, size_t *len, las_truth *t)
{
    random_spec(s, minor, fmt, n);
    s->vlr = 40;
    s->extra = 0;
    s->hdr_extra = 0;
    s->counts = 0;
    random_truth(n, t);
    return las_bytes(s, t, len);
}

static void test_bad(void)
{
    las_spec s;
    las_truth t;
    size_t len, off;
    unsigned char *b;
    char part[256];
    int v, f;

    b = good(&s, 2, 3, 10, &len, &t);
    off = len - 10 * 34;

    /* Signature. */
    b[0] = 'l';
    expect_fail("sig.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT,
                "not a LAS file (it does not start with 'LASF')");
    b[0] = 'L';
    expect_fail("short.las", b, 3, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT, "not a LAS file");
    expect_fail("empty.las", b, 0, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT, "not a LAS file");
    expect_fail("hdr20.las", b, 20, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT,
                "header: truncated (file ends at byte 20)");
    expect_fail("hdr200.las", b, 200, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT,
                "header: truncated (file ends at byte 200, a LAS 1.2 header has 227 bytes)");

    /* Version. */
    {
        static const int bad_v[][2] = {{1, 0}, {1, 1}, {1, 5}, {2, 2}, {0, 4}, {255, 255}};
        for (v = 0; v < 6; v++) {
            b[24] = (unsigned char)bad_v[v][0];
            b[25] = (unsigned char)bad_v[v][1];
            snprintf(part, sizeof part, "LAS version %d.%d is out of range", bad_v[v][0],
                     bad_v[v][1]);
            expect_fail("version.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT, part);
        }
        b[24] = 1;
        b[25] = 2;
    }

    /* Header size. */
    w16(b + 94, 226);
    expect_fail("hsize.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT,
                "header size 226 is too small (a LAS 1.2 header has 227 bytes)");
    w16(b + 94, 227);

    /* Point record length. */
    w16(b + 105, 33);
    expect_fail("reclen.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT,
                "point record length 33 is smaller than point format 3 needs (34 bytes)");
    w16(b + 105, 34);

    /* Offset to point data. */
    w32(b + 96, 226);
    expect_fail("offset.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT,
                "offset to point data 226 is inside the header (227 bytes)");
    w32(b + 96, (uint32_t)off);

    /* Count against the file's size: one record short, half a record, cut in the VLR. */
    expect_fail("trunc1.las", b, len - 34, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT,
                "point record 9: truncated (file ends at byte");
    snprintf(part, sizeof part, "point record 4: truncated (file ends at byte %zu)",
             off + 4 * 34 + 17);
    expect_fail("trunc2.las", b, off + 4 * 34 + 17, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT, part);
    snprintf(part, sizeof part, "point record 0: truncated (file ends at byte %zu)", off - 5);
    expect_fail("trunc3.las", b, off - 5, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT, part);
    w32(b + 107, 11);
    snprintf(part, sizeof part, "point record 10: truncated (file ends at byte %zu)", len);
    expect_fail("count.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT, part);
    w32(b + 107, 0xFFFFFFFFu);
    expect_fail("count2.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT,
                "point record 10: truncated");
    w32(b + 107, 10);

    /* Scales and offsets, on each axis. */
    for (v = 0; v < 3; v++) {
        static const char ax[3] = {'x', 'y', 'z'};
        double keep_s = s.scale[v], keep_o = s.offset[v];
        wf64(b + 131 + 8 * v, NAN);
        snprintf(part, sizeof part, "%c scale factor is not finite", ax[v]);
        expect_fail("scale.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT, part);
        wf64(b + 131 + 8 * v, -INFINITY);
        expect_fail("scale.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT, part);
        wf64(b + 131 + 8 * v, 0.0);
        snprintf(part, sizeof part, "%c scale factor is 0", ax[v]);
        expect_fail("scale0.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT, part);
        wf64(b + 131 + 8 * v, -0.0);
        expect_fail("scale0.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT, part);
        wf64(b + 131 + 8 * v, 1e300);
        snprintf(part, sizeof part, "%c scale factor 1e+300 and offset", ax[v]);
        expect_fail("scalebig.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT, part);
        wf64(b + 131 + 8 * v, keep_s);
        wf64(b + 155 + 8 * v, NAN);
        snprintf(part, sizeof part, "%c offset is not finite", ax[v]);
        expect_fail("offs.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT, part);
        wf64(b + 155 + 8 * v, keep_o);
    }

    /* Point formats: unknown, waveform, 1.4-only in an older file, compressed. */
    for (f = 4; f <= 255; f++) {
        grove_status want = GROVE_ERR_BAD_INPUT;
        if (f == 6 || f == 7 || f == 8) {
            snprintf(part, sizeof part, "point format %d needs LAS 1.4, the file is LAS 1.2", f);
        } else if (f == 4 || f == 5 || f == 9 || f == 10) {
            want = GROVE_ERR_UNSUPPORTED;
            snprintf(part, sizeof part,
                     "point format %d (with waveform data) is not supported (formats 0-3 and 6-8 "
                     "are)",
                     f);
        } else if (f >= 64) {
            want = GROVE_ERR_UNSUPPORTED;
            snprintf(part, sizeof part,
                     "LAZ (compressed LAS) is not supported; decompress it with laszip first");
        } else {
            snprintf(part, sizeof part, "unknown point format %d (LAS defines 0-10)", f);
        }
        b[104] = (unsigned char)f;
        expect_fail("fmt.las", b, len, GROVE_CLOUD_LAS, want, part);
        if (f == 11) f = 62; /* 12..63 are alike */
        if (f == 66) f = 126;
        if (f == 131) f = 253;
    }
    b[104] = 3;
    /* A good file under a .laz name, named LAS or AUTO. */
    expect_fail("good.laz", b, len, GROVE_CLOUD_AUTO, GROVE_ERR_UNSUPPORTED,
                "LAZ (compressed LAS) is not supported; decompress it with laszip first");
    expect_fail("good.LAZ", b, len, GROVE_CLOUD_LAS, GROVE_ERR_UNSUPPORTED, "LAZ (compressed LAS)");
    /* LAZ under a .las name: the compression bit. */
    b[104] = 0x83;
    expect_fail("lazbit.las", b, len, GROVE_CLOUD_AUTO, GROVE_ERR_UNSUPPORTED,
                "LAZ (compressed LAS) is not supported");
    b[104] = 3;
    /* Still good after all that. */
    put_file("good.las", b, len);
    {
        grove_cloud c;
        CHECK_OK(ctx, grove_cloud_read(ctx, path_of("good.las"), GROVE_CLOUD_AUTO, &c));
        compare("good.las after the damage", &s, &t, &c);
        grove_cloud_free(&c);
        unlink(path_of("good.las"));
    }
    free(b);
    truth_free(&t);

    /* 1.4: header size, the two point counts, a header cut short. */
    b = good(&s, 4, 7, 5, &len, &t);
    w16(b + 94, 374);
    expect_fail("hsize14.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT,
                "header size 374 is too small (a LAS 1.4 header has 375 bytes)");
    w16(b + 94, 375);
    w64(b + 247, 6);
    expect_fail("count14.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT,
                "legacy point count 5 differs from the 64-bit point count 6");
    w32(b + 107, 0);
    snprintf(part, sizeof part, "point record 5: truncated (file ends at byte %zu)", len);
    expect_fail("count14b.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT, part);
    /* Counts far beyond the file: damaged files, not counts too large for memory. */
    w64(b + 247, (uint64_t)1 << 62);
    snprintf(part, sizeof part,
             "point record 5: truncated (file ends at byte %zu), the header counts "
             "4611686018427387904 points of 36 bytes from byte",
             len);
    expect_fail("count14c.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT, part);
    w64(b + 247, UINT64_MAX);
    expect_fail("count14e.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT,
                "the header counts 18446744073709551615 points");
    w64(b + 247, (uint64_t)1 << 40);
    snprintf(part, sizeof part,
             "point record 5: truncated (file ends at byte %zu), the header counts "
             "1099511627776 points",
             len);
    expect_fail("count14d.las", b, len, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT, part);
    expect_fail("hdr300.las", b, 300, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT,
                "header: truncated (file ends at byte 300, a LAS 1.4 header has 375 bytes)");
    free(b);
    truth_free(&t);
    b = good(&s, 3, 1, 5, &len, &t);
    expect_fail("hdr230.las", b, 230, GROVE_CLOUD_LAS, GROVE_ERR_BAD_INPUT,
                "header: truncated (file ends at byte 230, a LAS 1.3 header has 235 bytes)");
    free(b);
    truth_free(&t);

    /* Arguments and missing files. */
    {
        grove_cloud c;
        CHECK_STATUS(ctx, grove_cloud_read(ctx, path_of("missing.las"), GROVE_CLOUD_AUTO, &c),
                     GROVE_ERR_IO);
        CHECK(strstr(grove_ctx_last_error(ctx), "missing.las: cannot open") != NULL);
        CHECK_STATUS(ctx, grove_cloud_read(ctx, path_of("missing.ply"), GROVE_CLOUD_AUTO, &c),
                     GROVE_ERR_IO);
        CHECK_STATUS(ctx, grove_cloud_read(ctx, NULL, GROVE_CLOUD_AUTO, &c), GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_cloud_read(ctx, "x.las", GROVE_CLOUD_AUTO, NULL),
                     GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_cloud_read(ctx, "x.las", (grove_cloud_format)4, &c),
                     GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_cloud_read(ctx, "x.las", (grove_cloud_format)-1, &c),
                     GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(NULL, grove_cloud_read(NULL, "x.las", GROVE_CLOUD_AUTO, &c),
                     GROVE_ERR_INVALID_ARG);
        grove_cloud_free(NULL);
    }
}

/* A LAS file through a FIFO: no file size to check up front, so the arrays grow as records
 * arrive and truncation is found while streaming. */
static void test_fifo(void)
{
    las_spec s;
    las_truth t;
    size_t len, cut;
    unsigned char *b;
    int pass;
    b = good(&s, 4, 8, 150000, &len, &t);
    for (pass = 0; pass < 2; pass++) {
        const char *p = path_of("fifo.las");
        grove_cloud c;
        grove_status st;
        pid_t pid;
        cut = pass == 0 ? len : len - 100;
        unlink(p);
        if (mkfifo(p, 0600) != 0) {
            printf("test_las: mkfifo failed (%s); FIFO case skipped\n", strerror(errno));
            break;
        }
        pid = fork();
        if (pid == 0) {
            FILE *f = fopen(p, "wb");
            size_t w = f ? fwrite(b, 1, cut, f) : 0;
            if (f) fclose(f);
            _exit(w == cut ? 0 : 1);
        }
        st = grove_cloud_read(ctx, p, GROVE_CLOUD_LAS, &c);
        if (pass == 0) {
            CHECK_OK(ctx, st);
            if (st == GROVE_OK) compare("fifo.las", &s, &t, &c);
        } else {
            char part[128];
            size_t reclen = fmt_len(8) + s.extra, off = len - s.n * reclen;
            snprintf(part, sizeof part, "point record %zu: truncated (file ends at byte %zu)",
                     (cut - off) / reclen, cut);
            CHECK_STATUS(ctx, st, GROVE_ERR_BAD_INPUT);
            CHECK_MSG(strstr(grove_ctx_last_error(ctx), part) != NULL, "%s / %s",
                      grove_ctx_last_error(ctx), part);
        }
        grove_cloud_free(&c);
        waitpid(pid, NULL, 0);
        unlink(p);
    }
    free(b);
    truth_free(&t);
}

/* ---- PLY and text ---- */

static void test_ply(void)
{
    grove_cloud c;
    grove_points pts;
    size_t n = 1000, i, k;
    unsigned char *b = (unsigned char *)tu_malloc(256 + n * 64);
    float *xyz = (float *)tu_malloc(3 * n * sizeof(float));
    uint16_t *col = (uint16_t *)tu_malloc(4 * n * sizeof(uint16_t));
    int be, d;
    char text[64 * 1024];

    for (i = 0; i < 3 * n; i++) xyz[i] = tu_f32(&rng, -1e5f, 1e5f);
    for (i = 0; i < 4 * n; i++) col[i] = (uint16_t)tu_u32(&rng);

    /* Binary, both byte orders: x y z float, uchar red green blue, a list property before the
     * colours on the second pass (the record-by-record path), ushort intensity. */
    for (be = 0; be < 2; be++) {
        int list = be;
        size_t hl = (size_t)snprintf(
            (char *)b, 256,
            "ply\nformat %s 1.0\nelement vertex %zu\nproperty float x\nproperty float y\n"
            "property float z\n%sproperty uchar red\nproperty uchar green\nproperty uchar blue\n"
            "property ushort intensity\nend_header\n",
            be ? "binary_big_endian" : "binary_little_endian", n,
            list ? "property list uchar int idx\n" : "");
        k = hl;
        for (i = 0; i < n; i++) {
            for (d = 0; d < 3; d++) {
                uint32_t u;
                int j;
                memcpy(&u, &xyz[3 * i + d], 4);
                for (j = 0; j < 4; j++) b[k++] = (unsigned char)(u >> (be ? 24 - 8 * j : 8 * j));
            }
            if (list) {
                b[k++] = 2;
                fill_random(b + k, 8);
                k += 8;
            }
            for (d = 0; d < 3; d++) b[k++] = (unsigned char)col[4 * i + d];
            b[k++] = (unsigned char)(be ? col[4 * i + 3] >> 8 : col[4 * i + 3]);
            b[k++] = (unsigned char)(be ? col[4 * i + 3] : col[4 * i + 3] >> 8);
        }
        put_file("col.ply", b, k);
        CHECK_OK(ctx, grove_cloud_read(ctx, path_of("col.ply"), GROVE_CLOUD_AUTO, &c));
        CHECK(c.n == n && c.rgb && c.intensity && !c.has_scale);
        for (i = 0; c.n == n && c.rgb && c.intensity && i < n; i++) {
            for (d = 0; d < 3; d++) {
                if (c.xyz[3 * i + d] != (double)xyz[3 * i + d]) {
                    FAIL("col.ply (%s): point %zu coordinate %d", be ? "BE" : "LE", i, d);
                    break;
                }
                if (c.rgb[3 * i + d] != (uint16_t)((col[4 * i + d] & 0xFF) * 257)) {
                    FAIL("col.ply (%s): point %zu colour %d = %u", be ? "BE" : "LE", i, d,
                         c.rgb[3 * i + d]);
                    break;
                }
            }
            if (c.intensity[i] != col[4 * i + 3]) {
                FAIL("col.ply: point %zu intensity %u, want %u", i, c.intensity[i], col[4 * i + 3]);
                break;
            }
        }
        grove_cloud_free(&c);
        /* The float reader gives the same points and ignores the colours, as before. */
        CHECK_OK(ctx, grove_points_read(ctx, path_of("col.ply"), GROVE_POINTS_AUTO, 0, &pts));
        CHECK(pts.n == n && pts.dims == 3 && memcmp(pts.xyz, xyz, 3 * n * sizeof(float)) == 0);
        grove_points_free(&pts);
    }

    /* ASCII: ushort colours (kept as they are), uchar intensity (scaled by 257), an extra
     * property between; then the same without intensity, with two colours only, with float
     * colours, and with none. */
    {
        static const char *const hdr[5] = {
            "property ushort red\nproperty ushort green\nproperty float q\n"
            "property ushort blue\nproperty uchar intensity\n",
            "property ushort red\nproperty ushort green\nproperty ushort blue\n",
            "property ushort red\nproperty ushort green\nproperty ushort q\n"
            "property uchar intensity\n",
            "property float red\nproperty float green\nproperty float blue\n"
            "property float intensity\n",
            ""};
        static const int has_rgb[5] = {1, 1, 0, 0, 0}, has_int[5] = {1, 0, 1, 0, 0};
        int h;
        size_t m = 200;
        for (h = 0; h < 5; h++) {
            size_t o = (size_t)snprintf(text, sizeof text,
                                        "ply\nformat ascii 1.0\ncomment c\nelement vertex %zu\n"
                                        "property float x\nproperty float y\nproperty float z\n"
                                        "%send_header\n",
                                        m, hdr[h]);
            for (i = 0; i < m; i++) {
                o += (size_t)snprintf(text + o, sizeof text - o, "%.9g %.9g %.9g", xyz[3 * i],
                                      xyz[3 * i + 1], xyz[3 * i + 2]);
                if (h == 0)
                    o += (size_t)snprintf(text + o, sizeof text - o, " %u %u 0.5 %u %u", col[4 * i],
                                          col[4 * i + 1], col[4 * i + 2], col[4 * i + 3] & 0xFF);
                else if (h == 1)
                    o += (size_t)snprintf(text + o, sizeof text - o, " %u %u %u", col[4 * i],
                                          col[4 * i + 1], col[4 * i + 2]);
                else if (h == 2)
                    o += (size_t)snprintf(text + o, sizeof text - o, " %u %u 7 %u", col[4 * i],
                                          col[4 * i + 1], col[4 * i + 3] & 0xFF);
                else if (h == 3)
                    o += (size_t)snprintf(text + o, sizeof text - o, " 0.5 0.25 1 0.125");
                text[o++] = '\n';
            }
            put_file("a.ply", text, o);
            CHECK_OK(ctx, grove_cloud_read(ctx, path_of("a.ply"), GROVE_CLOUD_PLY, &c));
            CHECK(c.n == m);
            CHECK_MSG((c.rgb != NULL) == has_rgb[h], "header %d", h);
            CHECK_MSG((c.intensity != NULL) == has_int[h], "header %d", h);
            for (i = 0; c.n == m && i < m; i++) {
                int ok = 1;
                for (d = 0; d < 3; d++) {
                    ok &= c.xyz[3 * i + d] == (double)xyz[3 * i + d];
                    if (c.rgb) ok &= c.rgb[3 * i + d] == col[4 * i + d];
                }
                if (c.intensity) ok &= c.intensity[i] == (col[4 * i + 3] & 0xFF) * 257;
                if (!ok) {
                    FAIL("a.ply header %d: point %zu differs", h, i);
                    break;
                }
            }
            grove_cloud_free(&c);
        }
    }

    /* Bad attribute values and a second 'red' (which the float reader still ignores). */
    {
        const char *dup = "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\n"
                          "property float y\nproperty float z\nproperty uchar red\n"
                          "property uchar red\nend_header\n1 2 3 4 5\n";
        const char *range = "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\n"
                            "property float y\nproperty float z\nproperty uchar red\n"
                            "property uchar green\nproperty uchar blue\nend_header\n"
                            "1 2 3 4 5 6\n1 2 3 4 256 6\n";
        put_file("dup.ply", dup, strlen(dup));
        CHECK_STATUS(ctx, grove_cloud_read(ctx, path_of("dup.ply"), GROVE_CLOUD_AUTO, &c),
                     GROVE_ERR_BAD_INPUT);
        CHECK(strstr(grove_ctx_last_error(ctx), "header line 8: second vertex property 'red'"));
        CHECK_OK(ctx, grove_points_read(ctx, path_of("dup.ply"), GROVE_POINTS_AUTO, 0, &pts));
        CHECK(pts.n == 1 && pts.xyz[2] == 3.0f);
        grove_points_free(&pts);
        put_file("range.ply", range, strlen(range));
        CHECK_STATUS(ctx, grove_cloud_read(ctx, path_of("range.ply"), GROVE_CLOUD_AUTO, &c),
                     GROVE_ERR_BAD_INPUT);
        CHECK(strstr(grove_ctx_last_error(ctx),
                     "range.ply:12: vertex record 1: property green is not a valid uchar: '256'"));
        CHECK(c.n == 0 && !c.xyz && !c.rgb);
        /* 2-D PLY: a cloud is 3-D. */
        {
            const char *flat = "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\n"
                               "property float y\nend_header\n1 2\n";
            put_file("flat.ply", flat, strlen(flat));
        }
    }

    /* Zero vertices with colour properties: nothing allocated. */
    {
        const char *zero = "ply\nformat binary_little_endian 1.0\nelement vertex 0\n"
                           "property double x\nproperty double y\nproperty double z\n"
                           "property uchar red\nproperty uchar green\nproperty uchar blue\n"
                           "end_header\n";
        put_file("zero.ply", zero, strlen(zero));
        CHECK_OK(ctx, grove_cloud_read(ctx, path_of("zero.ply"), GROVE_CLOUD_AUTO, &c));
        CHECK(c.n == 0 && !c.xyz && !c.rgb && !c.intensity);
        grove_cloud_free(&c);
    }

    /* Text: x y z and extra columns, read as 3-D doubles; a 2-D file is bad input. */
    {
        size_t o = (size_t)snprintf(text, sizeof text, "x,y,z,w\n");
        for (i = 0; i < 100; i++)
            o += (size_t)snprintf(text + o, sizeof text - o, "%.9g,%.9g,%.9g,9\n", xyz[3 * i],
                                  xyz[3 * i + 1], xyz[3 * i + 2]);
        put_file("t.csv", text, o);
        CHECK_OK(ctx, grove_cloud_read(ctx, path_of("t.csv"), GROVE_CLOUD_AUTO, &c));
        CHECK(c.n == 100 && !c.rgb && !c.intensity && !c.has_scale);
        for (i = 0; c.n == 100 && i < 300; i++) {
            char v[32];
            snprintf(v, sizeof v, "%.9g", xyz[i]); /* the text in the file, read as a double */
            if (c.xyz[i] != strtod(v, NULL)) {
                FAIL("t.csv value %zu", i);
                break;
            }
        }
        grove_cloud_free(&c);
        /* Named TEXT, and AUTO by sniffing (no known extension). */
        put_file("t.dat", text, o);
        CHECK_OK(ctx, grove_cloud_read(ctx, path_of("t.dat"), GROVE_CLOUD_AUTO, &c));
        CHECK(c.n == 100);
        grove_cloud_free(&c);
        CHECK_OK(ctx, grove_cloud_read(ctx, path_of("t.dat"), GROVE_CLOUD_TEXT, &c));
        CHECK(c.n == 100);
        grove_cloud_free(&c);
        put_file("t2.csv", "1,2\n3,4\n", 8);
        CHECK_STATUS(ctx, grove_cloud_read(ctx, path_of("t2.csv"), GROVE_CLOUD_AUTO, &c),
                     GROVE_ERR_BAD_INPUT);
        CHECK_STATUS(ctx, grove_cloud_read(ctx, path_of("flat.ply"), GROVE_CLOUD_AUTO, &c),
                     GROVE_ERR_BAD_INPUT);
        CHECK(strstr(grove_ctx_last_error(ctx), "vertex element has no property 'z'"));
        /* A PLY file named .ply but not PLY, and a PLY under another name. */
        CHECK_STATUS(ctx, grove_cloud_read(ctx, path_of("t.csv"), GROVE_CLOUD_PLY, &c),
                     GROVE_ERR_BAD_INPUT);
        CHECK(strstr(grove_ctx_last_error(ctx), "not a PLY file"));
    }
    free(b);
    free(xyz);
    free(col);
}

/* ---- the PLY writer ---- */

/* ---- text with colour and intensity, by the header's names ---- */

/* Reads `text` as name (a cloud) and expects status want, and, on failure, the message part. */
static void text_fail(const char *name, const char *text, const char *part)
{
    grove_cloud c;
    grove_status st;
    put_file(name, text, strlen(text));
    memset(&c, 0x5a, sizeof c);
    st = grove_cloud_read(ctx, path_of(name), GROVE_CLOUD_AUTO, &c);
    if (st != GROVE_ERR_BAD_INPUT)
        FAIL("%s: status %s, want bad input; message: %s", name, grove_status_string(st),
             grove_ctx_last_error(ctx));
    else if (!strstr(grove_ctx_last_error(ctx), part) ||
             strncmp(grove_ctx_last_error(ctx), path_of(name), strlen(path_of(name))) != 0)
        FAIL("%s: message '%s' lacks the path or '%s'", name, grove_ctx_last_error(ctx), part);
    if (c.xyz || c.rgb || c.intensity || c.n) FAIL("%s: *out not zeroed on failure", name);
    unlink(path_of(name));
}

static void test_text_attributes(void)
{
    /* 10,000 points (past the readers' first growth steps), columns in a shuffled order with
     * columns that are not read among them, names in mixed case, quoted and not. */
    enum { N = 10000 };
    size_t cap = (size_t)N * 120 + 100, o, i;
    char *text = (char *)tu_malloc(cap);
    double *xyz = (double *)tu_malloc(3 * N * sizeof *xyz);
    unsigned *col = (unsigned *)tu_malloc(4 * N * sizeof *col);
    grove_cloud c;

    for (i = 0; i < N; i++) {
        for (int d = 0; d < 3; d++) xyz[3 * i + d] = (double)(int32_t)tu_u32(&rng) / 1024.0;
        for (int d = 0; d < 3; d++) col[4 * i + d] = tu_u32(&rng) % 256;
        col[4 * i + 3] = tu_u32(&rng) % 65536;
    }
    col[0] = col[1] = col[2] = 255; /* the extremes */
    col[3] = 65535;
    col[4] = col[5] = col[6] = col[7] = 0;
    o = (size_t)snprintf(text, cap, "ID,Intensity,\"z\",label,Blue,G,RED,y,X\n");
    for (i = 0; i < N; i++)
        o += (size_t)snprintf(text + o, cap - o, "%zu,%u,%.17g,p%zu,%u,%u,%u,%.17g,%.17g\n", i,
                              col[4 * i + 3], xyz[3 * i + 2], i, col[4 * i + 2], col[4 * i + 1],
                              col[4 * i], xyz[3 * i + 1], xyz[3 * i]);
    put_file("attr.csv", text, o);
    CHECK_OK(ctx, grove_cloud_read(ctx, path_of("attr.csv"), GROVE_CLOUD_AUTO, &c));
    CHECK(c.n == N && c.rgb && c.intensity && !c.has_scale);
    for (i = 0; c.n == N && c.rgb && c.intensity && i < N; i++) {
        int bad = 0;
        for (int d = 0; d < 3; d++)
            bad |= c.xyz[3 * i + d] != xyz[3 * i + d] ||
                   c.rgb[3 * i + d] != (uint16_t)(col[4 * i + d] * 257u);
        bad |= c.intensity[i] != col[4 * i + 3];
        if (bad) {
            FAIL("attr.csv: point %zu differs", i);
            break;
        }
    }
    CHECK(c.n == N && c.rgb[0] == 65535 && c.intensity[0] == 65535 && c.rgb[3] == 0);
    grove_cloud_free(&c);
    unlink(path_of("attr.csv"));

    /* Whitespace, the one-letter names, 255.0 and 2.55e2 (integers written as reals), a
     * byte order mark and comment lines. */
    {
        const char *t = "\xEF\xBB\xBF# scan 1\nx y z r g b i\n1 2 3 255.0 2.55e2 0 7\n"
                        "# more\n4 5 6 1 2 3 0.0e0\n";
        put_file("attr2.xyz", t, strlen(t));
        CHECK_OK(ctx, grove_cloud_read(ctx, path_of("attr2.xyz"), GROVE_CLOUD_AUTO, &c));
        CHECK(c.n == 2 && c.rgb && c.intensity && c.xyz[3] == 4 && c.rgb[0] == 65535 &&
              c.rgb[1] == 65535 && c.rgb[2] == 0 && c.rgb[3] == 257 && c.rgb[5] == 771 &&
              c.intensity[0] == 7 && c.intensity[1] == 0);
        grove_cloud_free(&c);
    }
    /* Colour only with all three channels; intensity alone. */
    {
        const char *t = "x,y,z,red,green,intensity\n1,2,3,4,5,6\n";
        put_file("attr3.csv", t, strlen(t));
        CHECK_OK(ctx, grove_cloud_read(ctx, path_of("attr3.csv"), GROVE_CLOUD_AUTO, &c));
        CHECK(c.n == 1 && !c.rgb && c.intensity && c.intensity[0] == 6);
        grove_cloud_free(&c);
    }
    /* Without a header, or with one that names none of x, y, z: the first three columns, and
     * nothing else read (no guessing what unnamed columns hold). */
    {
        const char *t[] = {"1 2 3 200 200 200 9\n", "a,b,c,red,green,blue\n1,2,3,4,5,6\n",
                           "lon lat h i\n1 2 3 x\n"};
        for (int k = 0; k < 3; k++) {
            put_file("attr4.csv", t[k], strlen(t[k]));
            CHECK_OK(ctx, grove_cloud_read(ctx, path_of("attr4.csv"), GROVE_CLOUD_AUTO, &c));
            CHECK(c.n == 1 && !c.rgb && !c.intensity && c.xyz[0] == 1 && c.xyz[2] == 3);
            grove_cloud_free(&c);
        }
    }
    /* A header and no rows: nothing allocated. */
    put_file("attr5.csv", "x,y,z,r,g,b,i\n", 14);
    CHECK_OK(ctx, grove_cloud_read(ctx, path_of("attr5.csv"), GROVE_CLOUD_AUTO, &c));
    CHECK(c.n == 0 && !c.xyz && !c.rgb && !c.intensity);
    grove_cloud_free(&c);

    /* Bad values and headers: FILE:LINE, the column's number and name. */
    text_fail("b1.csv", "x,y,z,r,g,b\n1,2,3,1,2,3\n1,2,3,256,0,0\n",
              "b1.csv:3: column 4 (red) is not an integer 0..255: '256'");
    text_fail("b2.csv", "x,y,z,r,g,b\n1,2,3,1,2.5,3\n",
              "b2.csv:2: column 5 (green) is not an integer 0..255: '2.5'");
    text_fail("b3.csv", "x,y,z,r,g,b\n1,2,3,1,2,-1\n",
              "b3.csv:2: column 6 (blue) is not an integer 0..255: '-1'");
    text_fail("b4.csv", "x,y,z,r,g,b\n1,2,3,nan,2,1\n",
              "b4.csv:2: column 4 (red) is not an integer 0..255: 'nan'");
    text_fail("b5.csv", "x,y,z,r,g,b\n1,2,3,abc,2,1\n",
              "b5.csv:2: column 4 (red) is not an integer 0..255: 'abc'");
    text_fail("b6.csv", "x,y,z,intensity\n1,2,3,65536\n",
              "b6.csv:2: column 4 (intensity) is not an integer 0..65535: '65536'");
    text_fail("b7.csv", "x,y,z,i\n1,2,3,1e300\n",
              "b7.csv:2: column 4 (intensity) is not an integer 0..65535: '1e300'");
    text_fail("b8.csv", "x,y,z,r,g,b\n1,2,3,1,,3\n", "b8.csv:2: column 5 (green) is empty");
    text_fail("b9.csv", "x,y,z,r,g,b\n1,2,3,1,2\n", "b9.csv:2: row has 5 columns, need 6");
    text_fail("b10.csv", "i,x,y,z\n1,2,nan,3\n", "b10.csv:2: NaN in column 3 (y)");
    text_fail("b11.csv", "z y x\n1 2 abc\n", "b11.csv:2: column 3 (x) is not a number: 'abc'");
    text_fail("b12.csv", "x,y,elevation,red,green,blue\n1,2,3,4,5,6\n",
              "b12.csv:1: header: no column is named z");
    text_fail("b13.csv", "x,y,z,X\n1,2,3,4\n", "b13.csv:1: header: columns 1 and 4 both name x");
    text_fail("b14.csv", "x,y,z,r,g,b,red\n1,2,3,4,5,6,7\n",
              "b14.csv:1: header: columns 4 and 7 both name red");
    /* without a header the messages are the points readers' */
    text_fail("b15.csv", "1,2\n", "b15.csv:1: row has 2 columns, need 3");
    text_fail("b16.csv", "1,2,inf,9\n", "b16.csv:1: infinity in column 3");

    free(text);
    free(xyz);
    free(col);
}

/* Reads the vertex records of a file written by grove_cloud_write_ply as raw bytes: checks the
 * header text and returns the body (caller frees), *len its length. */
static unsigned char *raw_body(const char *name, const char *want_props, size_t *len)
{
    FILE *f = fopen(path_of(name), "rb");
    unsigned char *all;
    long sz;
    char *end;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    all = (unsigned char *)tu_malloc((size_t)sz + 1);
    if (fread(all, 1, (size_t)sz, f) != (size_t)sz) sz = 0;
    fclose(f);
    all[sz] = 0;
    end = strstr((char *)all, "end_header\n");
    if (!end || !strstr((char *)all, want_props)) {
        FAIL("%s: header lacks '%s'", name, want_props);
        free(all);
        return NULL;
    }
    end += strlen("end_header\n");
    *len = (size_t)sz - (size_t)(end - (char *)all);
    memmove(all, end, *len);
    return all;
}

static void test_write(void)
{
    size_t sizes[] = {0, 1, 33, 10000};
    size_t si, i;
    int variant;
    for (si = 0; si < 4; si++)
        for (variant = 0; variant < 4; variant++) {
            size_t n = sizes[si], rec = 24 + (variant & 1 ? 6 : 0) + (variant & 2 ? 2 : 0), len = 0;
            grove_cloud c, r;
            unsigned char *body;
            memset(&c, 0, sizeof c);
            c.n = n;
            c.xyz = n ? (double *)tu_malloc(3 * n * sizeof(double)) : NULL;
            if (variant & 1) c.rgb = (uint16_t *)tu_malloc(3 * n * sizeof(uint16_t) + 1);
            if (variant & 2) c.intensity = (uint16_t *)tu_malloc(n * sizeof(uint16_t) + 1);
            for (i = 0; i < 3 * n; i++) {
                /* Half the points full doubles (checked in the bytes), half floats (read back). */
                c.xyz[i] = (double)tu_f32(&rng, -1e4f, 1e4f);
                if (i % 2) c.xyz[i] += 1e-9 * (double)(tu_u32(&rng) % 1000);
                if (c.rgb) c.rgb[i] = (uint16_t)tu_u32(&rng);
            }
            for (i = 0; c.intensity && i < n; i++) c.intensity[i] = (uint16_t)tu_u32(&rng);
            CHECK_OK(ctx, grove_cloud_write_ply(ctx, path_of("w.ply"), &c));
            body = raw_body("w.ply",
                            variant == 3   ? "property double z\nproperty ushort red\nproperty "
                                             "ushort green\nproperty ushort blue\nproperty ushort "
                                             "intensity\nend_header"
                            : variant == 1 ? "property double z\nproperty ushort red\nproperty "
                                             "ushort green\nproperty ushort blue\nend_header"
                            : variant == 2 ? "property double z\nproperty ushort intensity\nend_"
                                             "header"
                                           : "property double z\nend_header",
                            &len);
            if (body) {
                CHECK_MSG(len == n * rec, "len %zu, want %zu", len, n * rec);
                for (i = 0; len == n * rec && i < n; i++) {
                    const unsigned char *p = body + i * rec;
                    int d, ok = 1;
                    for (d = 0; d < 3; d++) {
                        uint64_t u = 0;
                        double v;
                        int j;
                        for (j = 7; j >= 0; j--) u = (u << 8) | p[8 * d + j];
                        memcpy(&v, &u, 8);
                        ok &= memcmp(&v, &c.xyz[3 * i + d], 8) == 0;
                        if (c.rgb) ok &= (p[24 + 2 * d] | (p[25 + 2 * d] << 8)) == c.rgb[3 * i + d];
                    }
                    if (c.intensity) ok &= (p[rec - 2] | (p[rec - 1] << 8)) == c.intensity[i];
                    if (!ok) {
                        FAIL("w.ply (variant %d, n %zu): record %zu differs", variant, n, i);
                        break;
                    }
                }
                free(body);
            }
            /* Read back: coordinates (double PLY properties) and attributes exact. */
            CHECK_OK(ctx, grove_cloud_read(ctx, path_of("w.ply"), GROVE_CLOUD_AUTO, &r));
            CHECK(r.n == n && (r.rgb != NULL) == (n && c.rgb) &&
                  (r.intensity != NULL) == (n && c.intensity));
            for (i = 0; r.n == n && i < 3 * n; i++)
                if (r.xyz[i] != c.xyz[i] || (r.rgb && c.rgb[i] != r.rgb[i]) ||
                    (r.intensity && i < n && c.intensity[i] != r.intensity[i])) {
                    FAIL("w.ply read back (variant %d, n %zu): value %zu", variant, n, i);
                    break;
                }
            grove_cloud_free(&r);
            if (n > 0) {
                /* NaN: refused, nothing written, the old file kept. */
                c.xyz[3 * n - 1] = NAN;
                CHECK_STATUS(ctx, grove_cloud_write_ply(ctx, path_of("w.ply"), &c),
                             GROVE_ERR_BAD_INPUT);
                CHECK(strstr(grove_ctx_last_error(ctx), "has NaN in coordinate 2"));
                CHECK_OK(ctx, grove_cloud_read(ctx, path_of("w.ply"), GROVE_CLOUD_AUTO, &r));
                CHECK(r.n == n);
                grove_cloud_free(&r);
            }
            unlink(path_of("w.ply"));
            grove_cloud_free(&c);
        }
    {
        grove_cloud c;
        memset(&c, 0, sizeof c);
        c.n = 3;
        CHECK_STATUS(ctx, grove_cloud_write_ply(ctx, path_of("x.ply"), &c), GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_cloud_write_ply(ctx, path_of("x.ply"), NULL),
                     GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_cloud_write_ply(ctx, NULL, &c), GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_cloud_write_ply(ctx, "/nonexistent-dir/x.ply", &c),
                     GROVE_ERR_INVALID_ARG);
        c.n = 0;
        CHECK_STATUS(ctx, grove_cloud_write_ply(ctx, "/nonexistent-dir/x.ply", &c), GROVE_ERR_IO);
    }
    /* LAS in, PLY out, PLY in: colours and intensity survive. */
    {
        las_spec s;
        las_truth t;
        grove_cloud c, r;
        size_t len;
        unsigned char *b;
        random_spec(&s, 4, 7, 500);
        random_truth(s.n, &t);
        b = las_bytes(&s, &t, &len);
        put_file("lp.las", b, len);
        CHECK_OK(ctx, grove_cloud_read(ctx, path_of("lp.las"), GROVE_CLOUD_AUTO, &c));
        CHECK_OK(ctx, grove_cloud_write_ply(ctx, path_of("lp.ply"), &c));
        CHECK_OK(ctx, grove_cloud_read(ctx, path_of("lp.ply"), GROVE_CLOUD_AUTO, &r));
        CHECK(r.n == c.n && r.rgb && r.intensity && !r.has_scale);
        if (r.n == c.n && r.rgb && r.intensity && c.n == s.n) {
            CHECK(memcmp(r.rgb, c.rgb, 3 * c.n * sizeof(uint16_t)) == 0);
            CHECK(memcmp(r.intensity, c.intensity, c.n * sizeof(uint16_t)) == 0);
        }
        grove_cloud_free(&c);
        grove_cloud_free(&r);
        free(b);
        truth_free(&t);
        unlink(path_of("lp.las"));
        unlink(path_of("lp.ply"));
    }
}

/* ---- a large file, written in pieces, read in one call ---- */

static void test_large(size_t n, const char *tmpdir)
{
    char path[1024];
    las_spec s;
    las_truth t;
    unsigned char h[4096], *chunk;
    size_t off, reclen, i, piece = 100000, done = 0, bad = 0;
    uint64_t seed = tu_next(&rng);
    grove_cloud c;
    FILE *f;
    double t0, t1;
    int d;

    snprintf(path, sizeof path, "%s/grove-test-las-large-%ld.las", tmpdir, (long)getpid());
    random_spec(&s, 4, 7, n);
    s.extra = 3;
    reclen = fmt_len(7) + 3;
    off = las_header(&s, h, sizeof h);
    f = fopen(path, "wb");
    if (!f || fwrite(h, 1, off, f) != off) {
        FAIL("cannot write %s", path);
        if (f) fclose(f);
        return;
    }
    chunk = (unsigned char *)tu_malloc(piece * reclen);
    t0 = now();
    while (done < n) {
        size_t m = n - done < piece ? n - done : piece;
        rng.s = seed + done; /* each piece's truth from its own seed: the check replays it */
        random_truth(m, &t);
        for (i = 0; i < m; i++) las_record(&s, &t, i, chunk + i * reclen);
        truth_free(&t);
        if (fwrite(chunk, 1, m * reclen, f) != m * reclen) {
            FAIL("cannot write %s", path);
            break;
        }
        done += m;
    }
    if (fclose(f) != 0) FAIL("cannot close %s", path);
    t1 = now();
    printf("test_las: large file: %zu points (%.0f MB) written in %.2f s\n", n,
           (double)(off + n * reclen) / 1e6, t1 - t0);
    t0 = now();
    CHECK_OK(ctx, grove_cloud_read(ctx, path, GROVE_CLOUD_AUTO, &c));
    t1 = now();
    printf("test_las: large file read in %.2f s (%.1f ns/point)\n", t1 - t0,
           (t1 - t0) * 1e9 / (double)(n ? n : 1));
    done = 0;
    while (c.n == n && done < n && bad == 0) {
        size_t m = n - done < piece ? n - done : piece;
        rng.s = seed + done;
        random_truth(m, &t);
        for (i = 0; i < m; i++) {
            /* random_truth's extremes apply to the first points of each piece */
            for (d = 0; d < 3; d++) {
                double e = expect(&s, t.X[3 * i + d], d);
                if (memcmp(&c.xyz[3 * (done + i) + d], &e, 8) != 0 ||
                    c.rgb[3 * (done + i) + d] != t.rgb[3 * i + d])
                    bad++;
            }
            if (c.intensity[done + i] != t.intensity[i]) bad++;
        }
        truth_free(&t);
        done += m;
    }
    CHECK_MSG(c.n == n && bad == 0, "large file: n %zu, %zu differences", c.n, bad);
    grove_cloud_free(&c);
    free(chunk);
    unlink(path);
}

int main(int argc, char **argv)
{
    tu_args a = {NULL, 10000000, 20261122, NULL};
    const char *tmp = getenv("TMPDIR");
    if (tu_parse_args(argc, argv, &a) != 0) {
        fprintf(stderr, "usage: test_las [--large N] [--seed S]\n");
        return 2;
    }
    rng.s = a.seed;
    if (!tmp || !*tmp) tmp = "/tmp";
    snprintf(dir, sizeof dir, "%s/grove-test-las-XXXXXX", tmp);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "test_las: cannot create a directory under %s\n", tmp);
        return 2;
    }
    if (grove_ctx_create(NULL, &ctx) != GROVE_OK) {
        fprintf(stderr, "test_las: no context: %s\n", grove_ctx_last_error(ctx));
        return 2;
    }
    test_formats();
    test_chunks();
    test_bad();
    test_fifo();
    test_ply();
    test_text_attributes();
    test_write();
    if (a.large) test_large(a.large, tmp);
    grove_ctx_destroy(ctx);
    remove_dir();
    return tu_finish("test_las");
}
