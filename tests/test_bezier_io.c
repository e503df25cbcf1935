/*
 * test_bezier_io.c - the bezier module's files: the text and SVG curve readers (every error with
 * its exact status and the words of its message), the SVG path grammar (relative and implicit
 * commands, the reflection rules of S and T, closepath), elliptical arcs (checked against the
 * SVG notes' centre parameterization, evaluated along the cubics), transforms on paths and
 * groups, the XML the scanner must step over, and the CSV and SVG writers (the CSV read back bit
 * for bit; no file left behind by a failure).
 *
 * Polylines are filled by hand here: the tessellation itself is test_bezier.c's subject.
 * Usage: test_bezier_io [--seed S] [--large N] (N curves through the text reader and the CSV
 * writer; default 200000).
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grove/bezier.h"
#include "testutil.h"

static char dir[256];
static grove_ctx *ctx;

static char *path_in(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "test: cannot write %s\n", path);
        exit(2);
    }
}

/* Reads text (written to a file called name) and expects status want and, on failure, a
 * message containing each of the NULL-terminated substrings. */
static void expect_read(int line, const char *name, const char *text, grove_curve_format fmt,
                        grove_status want, const char *m1, const char *m2)
{
    grove_curves c;
    grove_status s;
    const char *msg;
    write_file(path_in(name), text);
    s = grove_curves_read(ctx, path_in(name), fmt, &c);
    msg = grove_ctx_last_error(ctx);
    if (s != want) {
        fprintf(stderr, "%s:%d: %s: status %s, want %s (%s)\n", __FILE__, line, name,
                grove_status_string(s), grove_status_string(want), msg);
        tu_failures++;
    } else if (want != GROVE_OK) {
        if ((m1 && !strstr(msg, m1)) || (m2 && !strstr(msg, m2))) {
            fprintf(stderr, "%s:%d: %s: message '%s' lacks '%s'%s%s%s\n", __FILE__, line, name,
                    msg, m1 ? m1 : "", m2 ? " or '" : "", m2 ? m2 : "", m2 ? "'" : "");
            tu_failures++;
        }
        if (c.n != 0 || c.cp || c.degree) {
            fprintf(stderr, "%s:%d: %s: a failed read left curves behind\n", __FILE__, line, name);
            tu_failures++;
        }
    }
    grove_curves_free(&c);
}
#define BAD(name, text, fmt, st, m1, m2) expect_read(__LINE__, name, text, fmt, st, m1, m2)

/* Reads text and compares with the expected curves (degrees and control points, within a
 * relative tolerance tol: 0 for bit-exact). */
static void expect_curves(int line, const char *name, const char *text, grove_curve_format fmt,
                          size_t n, const int *deg, const double *cp, double tol)
{
    grove_curves c;
    grove_status s;
    write_file(path_in(name), text);
    s = grove_curves_read(ctx, path_in(name), fmt, &c);
    if (s != GROVE_OK) {
        fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, line, name, grove_status_string(s),
                grove_ctx_last_error(ctx));
        tu_failures++;
        return;
    }
    if (c.n != n) {
        fprintf(stderr, "%s:%d: %s: %zu curves, want %zu\n", __FILE__, line, name, c.n, n);
        tu_failures++;
        grove_curves_free(&c);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (c.degree[i] != deg[i]) {
            fprintf(stderr, "%s:%d: %s: curve %zu has degree %d, want %d\n", __FILE__, line, name,
                    i, c.degree[i], deg[i]);
            tu_failures++;
            continue;
        }
        for (int k = 0; k < 2 * (deg[i] + 1); k++) {
            double got = c.cp[8 * i + k], want = cp[8 * i + k];
            int ok = tol == 0 ? c.cp[8 * i + k] == (float)want
                              : fabs(got - want) <= tol * (1 + fabs(want));
            if (!ok) {
                fprintf(stderr, "%s:%d: %s: curve %zu value %d is %.9g, want %.9g\n", __FILE__,
                        line, name, i, k, got, want);
                tu_failures++;
            }
        }
        for (int k = 2 * (deg[i] + 1); k < 8; k++) CHECK(c.cp[8 * i + k] == 0.0f);
    }
    grove_curves_free(&c);
}
#define CURVES(name, text, fmt, n, deg, cp, tol)                                                   \
    expect_curves(__LINE__, name, text, fmt, n, deg, cp, tol)

/* ---- text ---- */

static void test_text(void)
{
    {
        const int deg[] = {1, 2, 3, 1, 2};
        const double cp[] = {0, 0, 1, 1, 0, 0, 0, 0, /* */ 1, 2, 3, 4, 5, 6, 0, 0,
                             1, 2, 3, 4, 5, 6, 7, 8, /* */ -1.5, 2.25, 1e-3, -4e3, 0, 0, 0, 0,
                             0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0, 0};
        CURVES("good.txt",
               "\xEF\xBB\xBF# a comment\n0 0 1 1\n\n   \t\n1,2,3,4,5,6\r\n1 , 2\t,3 4 5 6 7 8 # cubic\n"
               "-1.5 2.25 1e-3 -4E3\n.1 .2 .3 .4 .5 .6",
               GROVE_CURVES_AUTO, 5, deg, cp, 0);
    }
    {
        grove_curves c;
        write_file(path_in("empty.txt"), "");
        CHECK_OK(ctx, grove_curves_read(ctx, path_in("empty.txt"), GROVE_CURVES_TEXT, &c));
        CHECK(c.n == 0 && c.cp == NULL && c.degree == NULL);
        write_file(path_in("comments.txt"), "# nothing\n\n# here\n");
        CHECK_OK(ctx, grove_curves_read(ctx, path_in("comments.txt"), GROVE_CURVES_AUTO, &c));
        CHECK(c.n == 0 && c.cp == NULL);
        grove_curves_free(&c);
        grove_curves_free(NULL);
    }
    BAD("n5.txt", "0 0 1 1\n# c\n1 2 3 4 5\n", GROVE_CURVES_TEXT, GROVE_ERR_BAD_INPUT,
        "n5.txt:3: 5 numbers;", "4 (a line), 6 (a quadratic) or 8 (a cubic)");
    BAD("n1.txt", "7\n", GROVE_CURVES_TEXT, GROVE_ERR_BAD_INPUT, "n1.txt:1: 1 number;", NULL);
    BAD("n10.txt", "1 2 3 4 5 6 7 8 9 10\n", GROVE_CURVES_TEXT, GROVE_ERR_BAD_INPUT,
        ":1: 10 numbers;", NULL);
    BAD("word.txt", "1 2 3 4\n1 2 x3 4\n", GROVE_CURVES_TEXT, GROVE_ERR_BAD_INPUT,
        "word.txt:2: number 3 is not a number: 'x3'", NULL);
    BAD("dcomma.txt", "1 2 3 4\n1 2 3 4\n1,2,,3,4\n", GROVE_CURVES_TEXT, GROVE_ERR_BAD_INPUT,
        "dcomma.txt:3: number 3 is empty", NULL);
    BAD("tcomma.txt", "1,2,3,4,\n", GROVE_CURVES_TEXT, GROVE_ERR_BAD_INPUT,
        "tcomma.txt:1: number 5 is empty", NULL);
    BAD("lcomma.txt", ",1,2,3,4\n", GROVE_CURVES_TEXT, GROVE_ERR_BAD_INPUT,
        "lcomma.txt:1: number 1 is empty", NULL);
    BAD("nan.txt", "1 2 3 4\n1 nan 3 4\n", GROVE_CURVES_TEXT, GROVE_ERR_BAD_INPUT,
        "nan.txt:2: number 2 is NaN", NULL);
    BAD("inf.txt", "1 2 3 -inf\n", GROVE_CURVES_TEXT, GROVE_ERR_BAD_INPUT,
        "inf.txt:1: number 4 is infinite", NULL);
    BAD("range.txt", "1 2 3 4 5 6\n1 2 3 4 5 6 7 1e39\n", GROVE_CURVES_TEXT, GROVE_ERR_BAD_INPUT,
        "range.txt:2: number 8 is out of float range: '1e39'", NULL);
    BAD("big.txt", "1 2 3 4 5 6\n1 2 3 4 5 6 -3.4e38 8\n", GROVE_CURVES_TEXT, GROVE_ERR_BAD_INPUT,
        "big.txt:2: number 7 (-3.39999995e+38) is larger in magnitude than 1e+38, the largest "
        "coordinate accepted",
        NULL);
    BAD("decomma.txt", "1;5 2 3 4\n", GROVE_CURVES_TEXT, GROVE_ERR_BAD_INPUT,
        "number 1 is not a number: '1;5'", NULL);
    BAD("svglike.txt", "<svg><path d=\"M0 0L1 1\"/></svg>\n", GROVE_CURVES_AUTO,
        GROVE_ERR_BAD_INPUT, "svglike.txt:1: this looks like SVG", NULL);
    /* the other way round: text curves, or nothing, in a file read as SVG */
    BAD("textlike.svg", "0 0 1 1 2 0\n", GROVE_CURVES_AUTO, GROVE_ERR_BAD_INPUT,
        "textlike.svg: not an SVG document: no <svg> element", NULL);
    BAD("nosvg.svg", "<?xml version='1.0'?>\n<path d='M0 0 L1 1'/>\n", GROVE_CURVES_AUTO,
        GROVE_ERR_BAD_INPUT, "nosvg.svg: not an SVG document: no <svg> element", NULL);
    BAD("empty.svg", "", GROVE_CURVES_AUTO, GROVE_ERR_BAD_INPUT,
        "empty.svg: not an SVG document: no <svg> element (the file is empty)", NULL);
    CURVES("nopaths.svg", "<svg xmlns='http://www.w3.org/2000/svg'><g/></svg>", GROVE_CURVES_AUTO,
           0, NULL, NULL, 0);
    {
        /* a line over 1 MiB is refused by the reader, whatever it holds */
        size_t n = ((size_t)1 << 20) + 100;
        char *big = (char *)tu_malloc(n + 16);
        for (size_t i = 0; i < n; i++) big[i] = (i % 2) ? ' ' : '1';
        memcpy(big + n, "\n", 2);
        BAD("long.txt", big, GROVE_CURVES_TEXT, GROVE_ERR_LIMIT, "long.txt:1: line is longer",
            NULL);
        free(big);
    }
    {
        grove_curves c;
        CHECK_STATUS(ctx, grove_curves_read(ctx, path_in("does-not-exist.txt"), GROVE_CURVES_AUTO, &c),
                     GROVE_ERR_IO);
        CHECK(strstr(grove_ctx_last_error(ctx), "does-not-exist.txt: cannot open") != NULL);
        CHECK_STATUS(ctx, grove_curves_read(ctx, NULL, GROVE_CURVES_AUTO, &c),
                     GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_curves_read(ctx, path_in("good.txt"), GROVE_CURVES_AUTO, NULL),
                     GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_curves_read(ctx, path_in("good.txt"), (grove_curve_format)7, &c),
                     GROVE_ERR_INVALID_ARG);
        CHECK(strstr(grove_ctx_last_error(ctx), "got 7") != NULL);
        CHECK_STATUS(NULL, grove_curves_read(NULL, path_in("good.txt"), GROVE_CURVES_AUTO, &c),
                     GROVE_ERR_INVALID_ARG);
    }
}

/* Random curves written with 9 significant digits read back bit for bit, among blank lines,
 * comments and CRLF line ends, at a size of several of the reader's blocks (n = --large); then
 * the same text with one curve's line broken (its line number in the message, counted across
 * blocks and threads' pieces), and without the last '\n'. */
static void test_text_random(uint64_t seed, size_t n)
{
    tu_rng r = {seed};
    float *cp = (float *)tu_malloc((n ? n : 1) * 8 * sizeof(float));
    uint8_t *deg = (uint8_t *)tu_malloc(n ? n : 1);
    size_t *at = (size_t *)tu_malloc((n ? n : 1) * sizeof(size_t)); /* curve i's line offset */
    uint64_t *ln = (uint64_t *)tu_malloc((n ? n : 1) * sizeof(uint64_t)); /* and number */
    size_t cap = 1 << 20, len = 0;
    uint64_t line = 0;
    char *text = (char *)tu_malloc(cap);
    grove_curves c;
    for (size_t i = 0; i < n; i++) {
        char row[256];
        size_t k0 = 0;
        const uint32_t extra = tu_u32(&r) % 16;
        if (extra == 0) k0 += (size_t)snprintf(row + k0, sizeof row - k0, "\n"), line++;
        if (extra == 1) k0 += (size_t)snprintf(row + k0, sizeof row - k0, "# a comment\n"), line++;
        at[i] = len + k0;
        ln[i] = ++line;
        deg[i] = (uint8_t)(1 + tu_u32(&r) % 3);
        for (int k = 0; k < 2 * (deg[i] + 1); k++) {
            float v = tu_f32(&r, -1e4f, 1e4f);
            if (tu_u32(&r) % 8 == 0) v = ldexpf(v, (int)(tu_u32(&r) % 200) - 100);
            cp[8 * i + k] = v;
            k0 += (size_t)snprintf(row + k0, sizeof row - k0, "%s%.9g",
                                   k ? (k % 3 ? " " : ",") : "", (double)v);
        }
        k0 += (size_t)snprintf(row + k0, sizeof row - k0, extra == 2 ? "\r\n" : "\n");
        tu_append(&text, &len, &cap, row, k0);
    }
    for (int variant = 0; variant < 3; variant++) {
        /* 0: as written; 1: curve j's line holds 3 numbers; 2: no '\n' after the last line */
        const size_t j = n ? n / 2 + tu_u32(&r) % (n - n / 2) : 0;
        FILE *f = fopen(path_in("random.txt"), "wb");
        size_t wlen = variant == 2 && len && text[len - 1] == '\n' ? len - 1 : len;
        if (variant == 2 && wlen && text[wlen - 1] == '\r') wlen--;
        if (!f) exit(2);
        if (variant == 1 && n) {
            fwrite(text, 1, at[j], f);
            fputs("1 2 3", f);
            fwrite(text + at[j] + strcspn(text + at[j], "\r\n"), 1,
                   len - at[j] - strcspn(text + at[j], "\r\n"), f);
        } else {
            fwrite(text, 1, wlen, f);
        }
        fclose(f);
        if (variant == 1) {
            char want[64];
            if (!n) continue;
            snprintf(want, sizeof want, "random.txt:%llu: 3 numbers", (unsigned long long)ln[j]);
            CHECK_STATUS(ctx, grove_curves_read(ctx, path_in("random.txt"), GROVE_CURVES_TEXT, &c),
                         GROVE_ERR_BAD_INPUT);
            CHECK_MSG(strstr(grove_ctx_last_error(ctx), want) != NULL,
                      "random text n=%zu, curve %zu broken: '%s', want '%s'", n, j,
                      grove_ctx_last_error(ctx), want);
            continue;
        }
        if (grove_curves_read(ctx, path_in("random.txt"), GROVE_CURVES_TEXT, &c) != GROVE_OK) {
            FAIL("random text n=%zu variant %d: %s", n, variant, grove_ctx_last_error(ctx));
        } else {
            size_t bad = 0;
            CHECK(c.n == n);
            for (size_t i = 0; i < n && i < c.n; i++) {
                if (c.degree[i] != deg[i]) bad++;
                for (int k = 0; k < 2 * (deg[i] + 1); k++)
                    if (memcmp(&c.cp[8 * i + k], &cp[8 * i + k], 4) != 0) bad++;
            }
            CHECK_MSG(bad == 0, "random text n=%zu variant %d: %zu values differ", n, variant,
                      bad);
        }
        grove_curves_free(&c);
    }
    free(text);
    free(at);
    free(ln);
    free(cp);
    free(deg);
}

/* ---- SVG ---- */

static const char *svg_wrap(const char *body)
{
    static char buf[1 << 16];
    snprintf(buf, sizeof buf,
             "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg "
             "xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 100 100\">\n%s\n</svg>\n",
             body);
    return buf;
}

static void test_svg_commands(void)
{
    {
        /* absolute and relative lines, H V, closepath back to the start, implicit lineto */
        const int deg[] = {1, 1, 1, 1, 1, 1, 1, 1};
        const double cp[] = {
            10, 20, 30, 20, 0, 0, 0, 0, /* L 30 20 */
            30, 20, 30, 50, 0, 0, 0, 0, /* V 50 */
            30, 50, 10, 20, 0, 0, 0, 0, /* Z */
            5, 5, 6, 5, 0, 0, 0, 0,     /* M5 5 l1 0 */
            6, 5, 6, 7, 0, 0, 0, 0,     /* implicit l 0 2 */
            6, 7, 4, 7, 0, 0, 0, 0,     /* h -2 */
            4, 7, 4, 6, 0, 0, 0, 0,     /* v -1 */
            4, 6, 5, 5, 0, 0, 0, 0,     /* z */
        };
        CURVES("lines.svg", svg_wrap("<path d=\"M10,20 L30 20V50Z\"/>\n"
                                     "<path d=\"M5 5 l1 0 0 2 h-2 v-1 z\"/>"),
               GROVE_CURVES_AUTO, 8, deg, cp, 0);
    }
    {
        /* the first m of a path is absolute; m after z is relative to the subpath start;
         * a command after z starts from the start; z at the start point emits nothing */
        const int deg[] = {1, 1, 1, 1, 1};
        const double cp[] = {
            1, 1, 2, 1, 0, 0, 0, 0, /* m1 1 h1 */
            2, 1, 1, 1, 0, 0, 0, 0, /* z */
            1, 1, 1, 3, 0, 0, 0, 0, /* l 0 2 after z: from the start (1,1) */
            11, 13, 12, 13, 0, 0, 0, 0, /* m 10 10 from (1,3): (11,13), then h1 */
            12, 13, 12, 13, 0, 0, 0, 0, /* l0 0: a segment of length 0 is still a curve */
        };
        CURVES("closing.svg", svg_wrap("<path d='m1 1 h1 z l0 2 m10 10 h1 l0 0'/>"),
               GROVE_CURVES_SVG, 5, deg, cp, 0);
    }
    {
        /* numbers glued together: "-.5.5" is -0.5 then 0.5; exponents; explicit plus signs */
        const int deg[] = {1, 1};
        const double cp[] = {-0.5, 0.5, 0.001, 100, 0, 0, 0, 0, 0.001, 100, 1.5, 0.5, 0, 0, 0, 0};
        CURVES("numbers.svg", svg_wrap("<path d=\"M-.5.5L1e-3+1E2 1.5.5\"/>"), GROVE_CURVES_SVG, 2,
               deg, cp, 0);
    }
    {
        /* Q then T (reflected control), T after T, T after L (control = current point),
         * repeated Q (implicit), relative q and t */
        const int deg[] = {2, 2, 2, 1, 2, 2, 2, 2};
        const double cp[] = {
            0, 0, 10, 10, 20, 0, 0, 0,   /* Q10 10 20 0 */
            20, 0, 30, -10, 40, 0, 0, 0, /* T40 0: control 2*(20,0)-(10,10) */
            40, 0, 50, 10, 60, 0, 0, 0,  /* T60 0 after T: 2*(40,0)-(30,-10) */
            60, 0, 60, 5, 0, 0, 0, 0,    /* L60 5 */
            60, 5, 60, 5, 70, 5, 0, 0,   /* T70 5 after L: control = current point */
            70, 5, 71, 6, 72, 5, 0, 0,   /* q1 1 2 0 */
            72, 5, 73, 6, 74, 5, 0, 0,   /* implicit q 1 1 2 0 */
            74, 5, 75, 4, 76, 5, 0, 0,   /* t2 0: control 2*(74,5)-(73,6) */
        };
        CURVES("quads.svg",
               svg_wrap("<path d=\"M0 0Q10 10 20 0T40 0 60 0L60 5T70 5q1 1 2 0 1 1 2 0t2 0\"/>"),
               GROVE_CURVES_SVG, 8, deg, cp, 0);
    }
    {
        /* C then S (reflected), S after S, S after Q (first control = current point), c/s */
        const int deg[] = {3, 3, 3, 2, 3, 3, 3};
        const double cp[] = {
            0, 0, 1, 2, 3, 2, 4, 0,      /* C1 2 3 2 4 0 */
            4, 0, 5, -2, 7, -2, 8, 0,    /* S7 -2 8 0: 2*(4,0)-(3,2) */
            8, 0, 9, 2, 11, 2, 12, 0,    /* S11 2 12 0: 2*(8,0)-(7,-2) */
            12, 0, 13, 1, 14, 0, 0, 0,   /* Q13 1 14 0 */
            14, 0, 14, 0, 15, 1, 16, 0,  /* S15 1 16 0 after Q: current point */
            16, 0, 17, 1, 18, 1, 19, 0,  /* c1 1 2 1 3 0 */
            19, 0, 20, -1, 21, -1, 22, 0 /* s2 -1 3 0: 2*(19,0)-(18,1) */
        };
        CURVES("cubics.svg",
               svg_wrap("<path d=\"M0,0 C1,2 3,2 4,0 S7-2 8 0 11 2 12 0 Q13 1 14 0 S15 1 16 0 "
                        "c1 1 2 1 3 0s2-1 3 0\"/>"),
               GROVE_CURVES_SVG, 7, deg, cp, 0);
    }
    {
        /* Z then S: the reflection does not carry across a closepath */
        const int deg[] = {3, 1, 3};
        const double cp[] = {0, 0, 1, 1, 2, 1, 3, 0, 3, 0, 0, 0, 0, 0, 0, 0,
                             0, 0, 0, 0, 1, 1, 2, 0};
        CURVES("zs.svg", svg_wrap("<path d=\"M0 0C1 1 2 1 3 0zS1 1 2 0\"/>"), GROVE_CURVES_SVG, 3,
               deg, cp, 0);
    }
    {
        /* empty d, no d, only a moveto: no curves, but they count as paths in messages */
        const int deg[] = {1};
        const double cp[] = {0, 0, 1, 0, 0, 0, 0, 0};
        CURVES("empty.svg", svg_wrap("<path/><path d=''/><path d=' M 3 3 '/><path d='M0 0H1'/>"),
               GROVE_CURVES_SVG, 1, deg, cp, 0);
        BAD("empty-idx.svg",
            svg_wrap("<path/><path d=''/><path d=' M 3 3 '/><path d='M0 0H1'/>"
                     "<path id='fifth' d='M0 0A1 1 0 0 7 2 2'/>"),
            GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
            "path 4 (id \"fifth\"): 'A' sweep-flag must be 0 or 1, not '7'", NULL);
    }
}

static void test_svg_errors(void)
{
    BAD("arc.svg",
        "<svg>\n<path d='M0 0 L1 1'/>\n\n<path id=\"a&amp;b\"\n d='M0 0 L 1 1 a 5 5 0 2 1 2 2'/>"
        "</svg>",
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "arc.svg:5: path 1 (id \"a&b\"): 'a' large-arc-flag must be 0 or 1, not '2'",
        "character 20 of d");
    BAD("unknown.svg", svg_wrap("<path d='M0 0 B 1 1'/>"), GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "path 0: command 'B' is not supported (M L H V Q T C S A Z are, in either case) "
        "(character 6 of d)", NULL);
    BAD("unknownr.svg", svg_wrap("<path d='M0 0 r 1 1'/>"), GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT, "path 0: command 'r' is not supported", NULL);
    BAD("missing.svg", svg_wrap("<path d='M0 0 C 1 1 2 2 3'/>"), GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT, "path 0: 'C' needs 6 numbers, found 5 before the end", NULL);
    BAD("missingh.svg", svg_wrap("<path d='M0 0 H'/>"), GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "path 0: 'H' needs 1 number, found 0 before the end", NULL);
    BAD("missing2.svg", svg_wrap("<path d='M0 0 L 1 Z'/>"), GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "'L' needs 2 numbers, found 1 before 'Z'", "character 10 of d");
    BAD("start.svg", svg_wrap("<path d='L 1 1'/>"), GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "path data must start with M or m, not 'L'", NULL);
    BAD("startnum.svg", svg_wrap("<path d='1 1'/>"), GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "must start with M or m, not a number", NULL);
    BAD("afterz.svg", svg_wrap("<path d='M0 0 L1 1 Z 3 3'/>"), GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT, "a number after 'Z'", NULL);
    BAD("badnum.svg", svg_wrap("<path d='M0 0 L1 --2'/>"), GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "'L' needs 2 numbers, found 1 before '-'", NULL);
    BAD("exp.svg", svg_wrap("<path d='M0 0 L1e 2'/>"), GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "malformed number '1e' (an exponent needs digits)", NULL);
    BAD("exp2.svg", svg_wrap("<path d='M0 0 L1 2E-'/>"), GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "malformed number '2E-' (an exponent needs digits)", NULL);
    BAD("junk.svg", svg_wrap("<path d='M0 0 L1 2 ; 3 4'/>"), GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT, "unexpected ';'", NULL);
    BAD("range.svg", svg_wrap("<path d='M0 0 L1e39 2'/>"), GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "number '1e39' is out of float range", NULL);
    BAD("trange.svg", svg_wrap("<path transform='scale(1e30)' d='M0 0 L1e10 2'/>"),
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "(after the transform) is larger in magnitude than 1e+38, the largest coordinate accepted",
        NULL);
    BAD("big.svg", svg_wrap("<path d='M0 0 l 9e37 9e37 l 9e37 9e37'/>"), GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT,
        "a control point (1.79999996e+38, 1.79999996e+38) is larger in magnitude than 1e+38", NULL);
    BAD("tfn.svg", svg_wrap("<g transform='translate(1) spin(3)'><path d='M0 0 L1 2'/></g>"),
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT, "<g>: unknown transform 'spin'",
        "character 14 of transform");
    BAD("trot.svg", svg_wrap("<path transform='rotate(1, 2)' d='M0 0 L1 2'/>"), GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT, "path 0: rotate takes 1 or 3 numbers, found 2", NULL);
    BAD("tmany.svg", svg_wrap("<path transform='translate(1 2 3)' d='M0 0 L1 2'/>"),
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT, "translate takes at most 2 numbers", NULL);
    BAD("tparen.svg", svg_wrap("<path transform='scale(2' d='M0 0 L1 2'/>"), GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT, "')' missing after scale(", NULL);
    BAD("tmatrix.svg", svg_wrap("<path transform='matrix(1 0 0 1 0)' d='M0 0 L1 2'/>"),
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT, "matrix takes 6 numbers, found 5", NULL);
    BAD("comment.svg", "<svg>\n<!-- never closed <path d='M0 0L1 1'/>\n</svg>\n", GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT, "comment.svg:2: unterminated comment", NULL);
    BAD("cdata.svg", "<svg><![CDATA[ x ", GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "unterminated CDATA section", NULL);
    BAD("unquoted.svg", "<svg>\n<path d=M0/>\n</svg>", GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "unquoted.svg:2: <path>: the value of attribute 'd' is not quoted", NULL);
    BAD("noclose.svg", "<svg><path d='M0 0 L1 1/></svg>", GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "<path>: attribute 'd' has no closing quote", NULL);
    BAD("tag.svg", "<svg><path d='M0 0 L1 1'", GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "unterminated tag", NULL);
    BAD("lt.svg", "<svg>a < b</svg>", GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "'<' that starts no tag", NULL);
    BAD("entity.svg", svg_wrap("<path d='M0&nbsp;0 L1 1'/>"), GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT, "unknown entity '&nbsp;'", NULL);
    BAD("amp.svg", svg_wrap("<path d='M0 & 0'/>"), GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "'&' that starts no entity reference", NULL);
    BAD("charref.svg", svg_wrap("<path d='M0&#xZZ;0'/>"), GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "bad character reference '&#xZZ;'", NULL);
    BAD("attr.svg", "<svg><path d/></svg>", GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "<path>: malformed attribute 'd'", NULL);
    /* an SVG read as text, and a text file read as SVG (no <svg> element) */
    BAD("forced.svg", svg_wrap("<path d='M0 0L1 1'/>"), GROVE_CURVES_TEXT, GROVE_ERR_BAD_INPUT,
        "looks like SVG", NULL);
    BAD("plain.txt", "0 0 1 1\n", GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "plain.txt: not an SVG document: no <svg> element", NULL);
}

/* x' = a x + c y + e, y' = b x + d y + f */
static void apply(const double *m, double x, double y, double *out)
{
    out[0] = m[0] * x + m[2] * y + m[4];
    out[1] = m[1] * x + m[3] * y + m[5];
}

static void mul(const double *m, const double *n, double *r)
{
    double t[6];
    t[0] = m[0] * n[0] + m[2] * n[1];
    t[1] = m[1] * n[0] + m[3] * n[1];
    t[2] = m[0] * n[2] + m[2] * n[3];
    t[3] = m[1] * n[2] + m[3] * n[3];
    t[4] = m[0] * n[4] + m[2] * n[5] + m[4];
    t[5] = m[1] * n[4] + m[3] * n[5] + m[5];
    memcpy(r, t, sizeof t);
}

static void test_svg_transforms(void)
{
    const double pi = 3.14159265358979323846;
    struct {
        const char *tr;
        double m[6];
    } cases[] = {
        {"translate(3)", {1, 0, 0, 1, 3, 0}},
        {"translate(3,-4)", {1, 0, 0, 1, 3, -4}},
        {"scale(2)", {2, 0, 0, 2, 0, 0}},
        {"scale(2 -0.5)", {2, 0, 0, -0.5, 0, 0}},
        {"rotate(90)", {0, 1, -1, 0, 0, 0}},
        {"matrix(1 2 3 4 5 6)", {1, 2, 3, 4, 5, 6}},
        {"skewX(30)", {1, 0, tan(30 * pi / 180), 1, 0, 0}},
        {"skewY(-45)", {1, tan(-45 * pi / 180), 0, 1, 0, 0}},
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        char body[256];
        int deg[1] = {3};
        double cp[8], src[8] = {1, 2, -3, 4, 5.5, -6, 7, 8};
        for (int k = 0; k < 4; k++) apply(cases[t].m, src[2 * k], src[2 * k + 1], cp + 2 * k);
        snprintf(body, sizeof body, "<path transform=\"%s\" d=\"M1 2C-3 4 5.5-6 7 8\"/>",
                 cases[t].tr);
        CURVES("tr.svg", svg_wrap(body), GROVE_CURVES_SVG, 1, deg, cp, 1e-6);
    }
    {
        /* rotate about a centre: the centre stays put; composition order of a list and of
         * nested groups: the outermost applies last */
        double r[6], c1[6], all[6], tmp[6];
        double t1[6] = {1, 0, 0, 1, -10, -20}, t2[6] = {1, 0, 0, 1, 10, 20};
        double rot[6] = {cos(pi / 6), sin(pi / 6), -sin(pi / 6), cos(pi / 6), 0, 0};
        double sc[6] = {2, 0, 0, 3, 0, 0}, tr[6] = {1, 0, 0, 1, 5, 7};
        double sk[6] = {1, 0, tan(10 * pi / 180), 1, 0, 0};
        double mx[6] = {0.5, 0.1, -0.2, 0.9, 1, 2};
        int deg[3] = {1, 2, 1};
        double cp[24] = {0};
        mul(t2, rot, tmp);
        mul(tmp, t1, r); /* rotate(30 10 20) */
        /* <g transform="translate(5 7) scale(2 3)"><g transform="skewX(10)"><path
         * transform="rotate(30 10 20)"/> */
        mul(tr, sc, c1);
        mul(c1, sk, tmp);
        mul(tmp, r, all);
        apply(all, 10, 20, cp);
        apply(all, 11, 21, cp + 2);
        /* second path: sibling group closed, only the outer group and its own matrix */
        mul(c1, mx, tmp);
        apply(tmp, 1, 1, cp + 8);
        apply(tmp, 2, 3, cp + 10);
        apply(tmp, 4, 1, cp + 12);
        /* third: outside all groups */
        cp[16] = 0, cp[17] = 0, cp[18] = 1, cp[19] = 1;
        CURVES("nested.svg",
               svg_wrap("<g transform=\"translate(5 7) scale(2 3)\">\n"
                        "  <g transform='skewX(10)'>\n"
                        "    <path transform=\"rotate(30 10 20)\" d=\"M10 20 L11 21\"/>\n"
                        "  </g>\n  <g transform='scale(100)'/>\n"
                        "  <path transform=\" matrix(0.5,0.1,-0.2,0.9,1,2) \" d='M1 1Q2 3 4 1'/>\n"
                        "</g>\n<path d='M0 0 1 1'/>"),
               GROVE_CURVES_SVG, 3, deg, cp, 1e-6);
    }
}

static void test_svg_xml(void)
{
    /* comments, CDATA, processing instructions and a DOCTYPE hide what they contain; entities
     * and character references are decoded; single quotes; namespace prefixes; elements
     * other than path are stepped over, their transforms kept for their children */
    const int deg[] = {1, 1, 2};
    const double cp[] = {1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8, 0, 0, 0, 0,
                         10, 10, 11, 12, 13, 10, 0, 0};
    CURVES("xml.svg",
           "\xEF\xBB\xBF<?xml version='1.0'?>\n"
           "<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" \"x.dtd\" [\n"
           "  <!ENTITY e \"<path d='M9 9L8 8'/>\">\n]>\n"
           "<svg:svg xmlns:svg='http://www.w3.org/2000/svg'>\n"
           "<!-- <path d='M0 0 L 9 9'/> -->\n"
           "<title>a &lt;path&gt; in text</title>\n"
           "<style><![CDATA[ path { stroke: red } <path d='M7 7 L 6 6'/> ]]></style>\n"
           "<svg:path d=\"M1&#44;2 L&#x33; 4\"/>\n"
           "<?pi <path d='M0 0L5 5'/> ?>\n"
           "<path\n  id='second'\n  d='M5 6 L 7 8'\n  style=\"fill: none\" />\n"
           "<a transform='translate(10,10)'><path d=\"M0 0Q1 2 3 0\"></path></a>\n"
           "<path-like d='M0 0L1 1'/>\n"
           "</svg:svg>\n",
           GROVE_CURVES_AUTO, 3, deg, cp, 0);
    {
        /* the extension decides AUTO in any case */
        const int d1[] = {1};
        const double c1[] = {0, 0, 2, 2, 0, 0, 0, 0};
        CURVES("UPPER.SVG", "<svg><path d='M0 0L2 2'/></svg>", GROVE_CURVES_AUTO, 1, d1, c1, 0);
    }
}

/* Many paths with many random segments, in a file whose d attributes run over a megabyte on
 * one line: the SVG reader has no line limit. Checks against the generator's own curves. */
static void test_svg_random(uint64_t seed, size_t npaths, size_t segs)
{
    tu_rng r = {seed};
    size_t cap = npaths * segs * 120 + 4096, len = 0, n = 0;
    char *text = (char *)tu_malloc(cap);
    double *cp = (double *)tu_malloc(npaths * segs * 8 * sizeof(double));
    int *deg = (int *)tu_malloc(npaths * segs * sizeof(int));
    len += (size_t)snprintf(text + len, cap - len, "<svg>");
    for (size_t p = 0; p < npaths; p++) {
        float x = tu_f32(&r, -100, 100), y = tu_f32(&r, -100, 100);
        len += (size_t)snprintf(text + len, cap - len, "<path d=\"M%.9g %.9g", (double)x,
                                (double)y);
        for (size_t s = 0; s < segs; s++) {
            int d = 1 + (int)(tu_u32(&r) % 3);
            double *c = cp + 8 * n;
            memset(c, 0, 8 * sizeof(double));
            deg[n++] = d;
            c[0] = x, c[1] = y;
            len += (size_t)snprintf(text + len, cap - len, "%c", " LQC"[d]);
            for (int k = 1; k <= d; k++) {
                float u = tu_f32(&r, -100, 100), v = tu_f32(&r, -100, 100);
                c[2 * k] = u, c[2 * k + 1] = v;
                len += (size_t)snprintf(text + len, cap - len, "%.9g,%.9g ", (double)u,
                                        (double)v);
                x = u, y = v;
            }
        }
        len += (size_t)snprintf(text + len, cap - len, "\"/>\n");
    }
    snprintf(text + len, cap - len, "</svg>\n");
    CURVES("random.svg", text, GROVE_CURVES_SVG, n, deg, cp, 0);
    free(text);
    free(cp);
    free(deg);
}

/* ---- SVG arcs ---- */

/* The largest distance from the centre, less the radius, of the cubic with handles
 * (4/3) tan(theta/4) that approximates a 90-degree arc of the unit circle (it is never inside
 * the circle; smaller pieces stay closer). */
#define ARC_MAX_RADIAL 2.726e-4

/* An ellipse's arc in SVG's centre parameterization: the points
 * (cx, cy) + rotate(phi) (rx cos t, ry sin t) for t from th1 to th1 + dth (radians). */
typedef struct arc_ref {
    double cx, cy, rx, ry, phi, th1, dth;
} arc_ref;

/* The oracle: SVG 1.1's endpoint-to-centre conversion (F.6.5, with F.6.6's scaling) written
 * out as the notes give it, angles by acos, independently of the reader's formulation. */
static void arc_oracle(double x1, double y1, double x2, double y2, double rx, double ry,
                       double deg, int fa, int fs, arc_ref *e)
{
    const double pi = 3.14159265358979323846;
    double phi = deg * pi / 180, c = cos(phi), s = sin(phi);
    double xp = c * (x1 - x2) / 2 + s * (y1 - y2) / 2, yp = -s * (x1 - x2) / 2 + c * (y1 - y2) / 2;
    double lam, num, den, k, cxp, cyp, ux, uy, vx, vy, d;
    rx = fabs(rx), ry = fabs(ry);
    lam = xp * xp / (rx * rx) + yp * yp / (ry * ry);
    if (lam > 1) rx *= sqrt(lam), ry *= sqrt(lam);
    num = rx * rx * ry * ry - rx * rx * yp * yp - ry * ry * xp * xp;
    den = rx * rx * yp * yp + ry * ry * xp * xp;
    k = (fa != fs ? 1 : -1) * sqrt(num > 0 ? num / den : 0);
    cxp = k * rx * yp / ry, cyp = -k * ry * xp / rx;
    e->cx = c * cxp - s * cyp + (x1 + x2) / 2;
    e->cy = s * cxp + c * cyp + (y1 + y2) / 2;
    e->rx = rx, e->ry = ry, e->phi = phi;
    ux = (xp - cxp) / rx, uy = (yp - cyp) / ry, vx = (-xp - cxp) / rx, vy = (-yp - cyp) / ry;
    e->th1 = (uy < 0 ? -1 : 1) * acos(fmax(-1, fmin(1, ux / hypot(ux, uy))));
    d = (ux * vx + uy * vy) / (hypot(ux, uy) * hypot(vx, vy));
    e->dth = (ux * vy - uy * vx < 0 ? -1 : 1) * acos(fmax(-1, fmin(1, d)));
    if (!fs && e->dth > 0) e->dth -= 2 * pi;
    if (fs && e->dth < 0) e->dth += 2 * pi;
}

static void bez3(const float *p, double t, double *out)
{
    double u = 1 - t, b0 = u * u * u, b1 = 3 * u * u * t, b2 = 3 * u * t * t, b3 = t * t * t;
    out[0] = b0 * p[0] + b1 * p[2] + b2 * p[4] + b3 * p[6];
    out[1] = b0 * p[1] + b1 * p[3] + b2 * p[5] + b3 * p[7];
}

/* Checks curves c[first .. first+count) as the arc e from (x1, y1) to (x2, y2), drawn through
 * the affine map m (NULL: none; e is then in the same coordinates as the curves): all cubics,
 * at most 90 degrees each, the first starting at the start and the last ending at the end bit
 * for bit (as floats), each starting where the one before ends; sampled at 65 parameters each,
 * every point (mapped back through m) is on the ellipse within the approximation's radial
 * error plus float rounding, the angle moves one way only, starts at th1 and sweeps dth.
 * want_count: the number of cubics, or 0 for "what dth needs". */
static void check_arc(int line, const char *what, const grove_curves *c, size_t first,
                      size_t count, const arc_ref *e, const double *m, double x1, double y1,
                      double x2, double y2, size_t want_count)
{
    const double pi = 3.14159265358979323846;
    double inv[6] = {1, 0, 0, 1, 0, 0}, maxabs = 0, amp = 1, tol, swept = 0, prev = 0;
    double cs = cos(e->phi), sn = sin(e->phi), rmin = 1, rmax = 1;
    float s0[2], s1[2];
    int bad = 0;
    if (m) {
        double det = m[0] * m[3] - m[1] * m[2];
        inv[0] = m[3] / det, inv[1] = -m[1] / det, inv[2] = -m[2] / det, inv[3] = m[0] / det;
        inv[4] = -(inv[0] * m[4] + inv[2] * m[5]), inv[5] = -(inv[1] * m[4] + inv[3] * m[5]);
        amp = sqrt(inv[0] * inv[0] + inv[1] * inv[1] + inv[2] * inv[2] + inv[3] * inv[3]);
    }
    {
        double t0[2] = {x1, y1}, t1[2] = {x2, y2};
        if (m) apply(m, x1, y1, t0), apply(m, x2, y2, t1);
        s0[0] = (float)t0[0], s0[1] = (float)t0[1], s1[0] = (float)t1[0], s1[1] = (float)t1[1];
    }
    if (!want_count) {
        double q = fabs(e->dth) / (pi / 2);
        want_count = (size_t)ceil(q - 1e-9);
        if (want_count < 1) want_count = 1;
        /* an arc within rounding of a whole number of quarter turns may take either count */
        if (fabs(q - floor(q + 0.5)) < 1e-6 && (count == (size_t)floor(q + 0.5) ||
                                                count == (size_t)floor(q + 0.5) + 1))
            want_count = count;
    }
    if (count != want_count || first + count > c->n) {
        fprintf(stderr, "%s:%d: %s: %zu cubics, want %zu\n", __FILE__, line, what, count,
                want_count);
        tu_failures++;
        return;
    }
    for (size_t i = first; i < first + count; i++) {
        if (c->degree[i] != 3) {
            fprintf(stderr, "%s:%d: %s: curve %zu has degree %d\n", __FILE__, line, what, i,
                    c->degree[i]);
            tu_failures++;
            return;
        }
        for (int k = 0; k < 8; k++) maxabs = fmax(maxabs, fabs(c->cp[8 * i + k]));
    }
    tol = 4 * FLT_EPSILON * maxabs * amp / fmin(e->rx, e->ry) + 1e-12;
    if (memcmp(&c->cp[8 * first], s0, sizeof s0) != 0 ||
        memcmp(&c->cp[8 * (first + count - 1) + 6], s1, sizeof s1) != 0) {
        fprintf(stderr, "%s:%d: %s: ends (%.9g, %.9g) .. (%.9g, %.9g), want (%.9g, %.9g) .. "
                "(%.9g, %.9g)\n", __FILE__, line, what, c->cp[8 * first], c->cp[8 * first + 1],
                c->cp[8 * (first + count - 1) + 6], c->cp[8 * (first + count - 1) + 7], s0[0],
                s0[1], s1[0], s1[1]);
        tu_failures++;
    }
    for (size_t i = first; i < first + count; i++) {
        double piece = 0;
        if (i > first && memcmp(&c->cp[8 * i], &c->cp[8 * i - 2], 2 * sizeof(float)) != 0) bad++;
        for (int j = 0; j <= 64; j++) {
            double p[2], q[2], lx, ly, r, ang, d;
            bez3(c->cp + 8 * i, j / 64.0, p);
            if (m) apply(inv, p[0], p[1], q), p[0] = q[0], p[1] = q[1];
            lx = (cs * (p[0] - e->cx) + sn * (p[1] - e->cy)) / e->rx;
            ly = (-sn * (p[0] - e->cx) + cs * (p[1] - e->cy)) / e->ry;
            r = hypot(lx, ly);
            rmin = fmin(rmin, r), rmax = fmax(rmax, r);
            ang = atan2(ly, lx);
            if (i == first && j == 0) {
                if (fabs(remainder(ang - e->th1, 2 * pi)) > 10 * tol + 1e-9) bad++;
            } else {
                d = remainder(ang - prev, 2 * pi);
                if (d * (e->dth < 0 ? -1 : 1) < -10 * tol) bad++; /* backwards */
                swept += d;
                if (j) piece += d;
            }
            prev = ang;
        }
        if (fabs(piece) > pi / 2 + 10 * tol + 1e-9) bad++;
    }
    if (rmin < 1 - tol || rmax > 1 + ARC_MAX_RADIAL + tol) bad++;
    if (fabs(swept - e->dth) > 10 * tol + 1e-9) bad++;
    if (bad) {
        fprintf(stderr, "%s:%d: %s: %d problems: radius %.9g .. %.9g (tolerance %.3g), swept "
                "%.9g, want %.9g from %.9g\n", __FILE__, line, what, bad, rmin, rmax, tol,
                swept, e->dth, e->th1);
        tu_failures++;
    }
}

/* Reads body (inside <svg>) into *c: 0, or -1 after reporting the failure. */
static int read_body(int line, const char *name, const char *body, grove_curves *c)
{
    write_file(path_in(name), svg_wrap(body));
    if (grove_curves_read(ctx, path_in(name), GROVE_CURVES_SVG, c) == GROVE_OK) return 0;
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, line, name, grove_ctx_last_error(ctx));
    tu_failures++;
    return -1;
}

/* Two path bodies that must give the same curves, bit for bit. */
static void expect_same(int line, const char *b1, const char *b2)
{
    grove_curves c1, c2;
    if (read_body(line, "same1.svg", b1, &c1) != 0) return;
    if (read_body(line, "same2.svg", b2, &c2) == 0) {
        int same = c1.n == c2.n && c1.n > 0 && memcmp(c1.degree, c2.degree, c1.n) == 0 &&
                   memcmp(c1.cp, c2.cp, 8 * c1.n * sizeof(float)) == 0;
        if (!same) {
            fprintf(stderr, "%s:%d: %zu and %zu curves, not the same: %s vs %s\n", __FILE__, line,
                    c1.n, c2.n, b1, b2);
            tu_failures++;
        }
        grove_curves_free(&c2);
    }
    grove_curves_free(&c1);
}

/* The point halfway along the arc of c[first .. first+count): the pieces split the angle
 * evenly and each is symmetric, so it is a piece's end or the middle piece at t = 1/2, where
 * the approximation meets the arc. */
static void arc_middle(const grove_curves *c, size_t first, size_t count, double *out)
{
    if (count % 2 == 0) {
        out[0] = c->cp[8 * (first + count / 2)];
        out[1] = c->cp[8 * (first + count / 2) + 1];
    } else {
        bez3(c->cp + 8 * (first + count / 2), 0.5, out);
    }
}

static void test_svg_arcs(void)
{
    const double pi = 3.14159265358979323846, k = 4.0 / 3.0 * tan(pi / 8);
    grove_curves c;
    {
        /* a quarter circle: one cubic with the textbook control points */
        const int deg[] = {3};
        const double cp[] = {10, 0, 10, 10 * k, 10 * k, 10, 0, 10};
        CURVES("quarter.svg", svg_wrap("<path d='M10 0 A10 10 0 0 1 0 10'/>"), GROVE_CURVES_SVG,
               1, deg, cp, 1e-6);
    }
    if (read_body(__LINE__, "quarters.svg",
                  "<path d='M110 50 A10 10 0 0 1 100 60 M110 50 A10 10 0 0 0 100 60'/>",
                  &c) == 0) {
        /* away from the origin; the other sweep turns the other way about the other centre */
        arc_ref a = {100, 50, 10, 10, 0, 0, pi / 2}, b = {110, 60, 10, 10, 0, -pi / 2, -pi / 2};
        CHECK(c.n == 2);
        check_arc(__LINE__, "quarter", &c, 0, 1, &a, NULL, 110, 50, 100, 60, 1);
        check_arc(__LINE__, "quarter, sweep 0", &c, 1, 1, &b, NULL, 110, 50, 100, 60, 1);
        grove_curves_free(&c);
    }
    if (read_body(__LINE__, "half.svg", "<path d='M0 0 A5 5 0 0 1 10 0'/>", &c) == 0) {
        /* sweep 1 is the increasing angle: from 180 degrees through 270, which is y = -5 */
        arc_ref a = {5, 0, 5, 5, 0, pi, pi};
        double mid[2];
        check_arc(__LINE__, "half", &c, 0, c.n, &a, NULL, 0, 0, 10, 0, 2);
        arc_middle(&c, 0, c.n, mid);
        CHECK_MSG(fabs(mid[0] - 5) < 1e-5 && fabs(mid[1] + 5) < 1e-5, "half: middle %g %g", mid[0],
                  mid[1]);
        grove_curves_free(&c);
    }
    /* full circles: two arcs each, both ways round, absolute and relative */
    if (read_body(__LINE__, "full.svg",
                  "<path d='M0 0 A5 5 0 1 1 10 0 A5 5 0 1 1 0 0'/>"
                  "<path d='M0 0 a5 5 0 1 0 10 0 a5 5 0 1 0 -10 0'/>",
                  &c) == 0) {
        arc_ref a1 = {5, 0, 5, 5, 0, pi, pi}, a2 = {5, 0, 5, 5, 0, 0, pi};
        arc_ref b1 = {5, 0, 5, 5, 0, pi, -pi}, b2 = {5, 0, 5, 5, 0, 0, -pi};
        double mid[2];
        CHECK_MSG(c.n == 8, "full: %zu curves", c.n);
        if (c.n == 8) {
            check_arc(__LINE__, "full, first half", &c, 0, 2, &a1, NULL, 0, 0, 10, 0, 2);
            check_arc(__LINE__, "full, second half", &c, 2, 2, &a2, NULL, 10, 0, 0, 0, 2);
            check_arc(__LINE__, "full reversed, first", &c, 4, 2, &b1, NULL, 0, 0, 10, 0, 2);
            check_arc(__LINE__, "full reversed, second", &c, 6, 2, &b2, NULL, 10, 0, 0, 0, 2);
            arc_middle(&c, 4, 2, mid);
            CHECK(fabs(mid[0] - 5) < 1e-5 && fabs(mid[1] - 5) < 1e-5);
        }
        grove_curves_free(&c);
    }
    {
        /* the four arcs of radius 2 from (0,0) to (2,0): the flags choose the centre (1, +-sqrt 3)
         * and the side; the large arcs take four pieces of 75 degrees, the small ones one */
        static const struct {
            int fa, fs;
            double cy, th1, dth, midy;
            size_t n;
        } f[4] = {{0, 1, 1.7320508075688772, -2 * 3.14159265358979323846 / 3,
                   3.14159265358979323846 / 3, 1.7320508075688772 - 2, 1},
                  {1, 0, 1.7320508075688772, -2 * 3.14159265358979323846 / 3,
                   -5 * 3.14159265358979323846 / 3, 1.7320508075688772 + 2, 4},
                  {0, 0, -1.7320508075688772, 2 * 3.14159265358979323846 / 3,
                   -3.14159265358979323846 / 3, 2 - 1.7320508075688772, 1},
                  {1, 1, -1.7320508075688772, 2 * 3.14159265358979323846 / 3,
                   5 * 3.14159265358979323846 / 3, -1.7320508075688772 - 2, 4}};
        for (int i = 0; i < 4; i++) {
            char body[128];
            snprintf(body, sizeof body, "<path d='M0 0 A2 2 0 %d %d 2 0'/>", f[i].fa, f[i].fs);
            if (read_body(__LINE__, "flags.svg", body, &c) == 0) {
                arc_ref a = {1, f[i].cy, 2, 2, 0, f[i].th1, f[i].dth};
                double mid[2];
                check_arc(__LINE__, body, &c, 0, c.n, &a, NULL, 0, 0, 2, 0, f[i].n);
                if (c.n == f[i].n) {
                    arc_middle(&c, 0, c.n, mid);
                    CHECK_MSG(fabs(mid[0] - 1) < 1e-5 && fabs(mid[1] - f[i].midy) < 1e-5,
                              "%s: middle (%.9g, %.9g), want (1, %.9g)", body, mid[0], mid[1],
                              f[i].midy);
                }
                grove_curves_free(&c);
            }
        }
    }
    {
        /* rotated ellipses: rx 20, ry 8 turned 30 degrees about (50, 40), from angle 0.3 through
         * 3.5 radians (large arc, sweep 1) and back the short way; 390 degrees is 30 */
        double cs = cos(pi / 6), sn = sin(pi / 6), p[2][2], t[2] = {0.3, 3.8};
        char body[512];
        for (int j = 0; j < 2; j++) {
            double ex = 20 * cos(t[j]), ey = 8 * sin(t[j]);
            p[j][0] = (float)(50 + cs * ex - sn * ey);
            p[j][1] = (float)(40 + sn * ex + cs * ey);
        }
        snprintf(body, sizeof body,
                 "<path d='M%.9g %.9g A20 8 30 1 1 %.9g %.9g A 20 8 30 0 0 %.9g %.9g'/>"
                 "<path d='M%.9g %.9g A20 8 390 1 1 %.9g %.9g'/>"
                 "<path d='M%.9g %.9g A8 20 120 1 1 %.9g %.9g'/>",
                 p[0][0], p[0][1], p[1][0], p[1][1], p[0][0], p[0][1], p[0][0], p[0][1],
                 p[1][0], p[1][1], p[0][0], p[0][1], p[1][0], p[1][1]);
        if (read_body(__LINE__, "rotated.svg", body, &c) == 0) {
            arc_ref a, b, s;
            arc_oracle(p[0][0], p[0][1], p[1][0], p[1][1], 20, 8, 30, 1, 1, &a);
            arc_oracle(p[1][0], p[1][1], p[0][0], p[0][1], 20, 8, 30, 0, 0, &b);
            arc_oracle(p[0][0], p[0][1], p[1][0], p[1][1], 8, 20, 120, 1, 1, &s);
            CHECK_MSG(fabs(a.cx - 50) < 1e-4 && fabs(a.cy - 40) < 1e-4 && fabs(a.dth - 3.5) < 1e-4,
                      "rotated: oracle centre %g %g sweep %g", a.cx, a.cy, a.dth);
            CHECK_MSG(c.n == 3 + 2 + 3 + 3, "rotated: %zu curves", c.n);
            if (c.n == 11) {
                check_arc(__LINE__, "rotated", &c, 0, 3, &a, NULL, p[0][0], p[0][1], p[1][0],
                          p[1][1], 3);
                check_arc(__LINE__, "rotated back", &c, 3, 2, &b, NULL, p[1][0], p[1][1], p[0][0],
                          p[0][1], 2);
                CHECK(memcmp(c.cp + 8 * 5, c.cp, 3 * 8 * sizeof(float)) == 0); /* 390 = 30 */
                check_arc(__LINE__, "axes swapped", &c, 8, 3, &s, NULL, p[0][0], p[0][1],
                          p[1][0], p[1][1], 3);
            }
            grove_curves_free(&c);
        }
    }
    if (read_body(__LINE__, "small.svg",
                  "<path d='M0 0 A1 1 0 0 1 10 0'/><path d='M0 0 A1 2 0 1 1 10 0'/>"
                  "<path d='M0 0 A2 1 90 0 0 0 10'/>",
                  &c) == 0) {
        /* radii too small grow in proportion until the endpoints fit: half ellipses about the
         * chord's middle, either flag (F.6.6) */
        arc_ref a = {5, 0, 5, 5, 0, pi, pi}, b = {5, 0, 5, 10, 0, pi, pi};
        arc_ref d = {0, 5, 5, 2.5, pi / 2, pi, -pi};
        double mid[2];
        CHECK_MSG(c.n == 6, "small: %zu curves", c.n);
        if (c.n == 6) {
            check_arc(__LINE__, "small radii", &c, 0, 2, &a, NULL, 0, 0, 10, 0, 2);
            check_arc(__LINE__, "small ellipse", &c, 2, 2, &b, NULL, 0, 0, 10, 0, 2);
            arc_middle(&c, 2, 2, mid);
            CHECK(fabs(mid[0] - 5) < 1e-5 && fabs(mid[1] + 10) < 1e-5);
            check_arc(__LINE__, "small, rotated", &c, 4, 2, &d, NULL, 0, 0, 0, 10, 2);
            arc_middle(&c, 4, 2, mid);
            CHECK_MSG(fabs(mid[0] + 2.5) < 1e-5 && fabs(mid[1] - 5) < 1e-5, "small, rotated: "
                      "middle (%.9g, %.9g)", mid[0], mid[1]);
        }
        grove_curves_free(&c);
    }
    {
        /* a zero radius is a line, equal endpoints are no curve (whatever the flags), and
         * neither stops the path; S and T after an arc start from the current point */
        const int deg[] = {1, 1, 1, 1, 3, 2};
        const double cp[] = {1, 2, 7, 9, 0, 0, 0, 0,  7, 9, 8, 10, 0, 0, 0, 0,
                             8, 10, 8, 10, 0, 0, 0, 0, 8, 10, 3, 4, 0, 0, 0, 0,
                             3, 4, 3, 4, 5, 6, 7, 8,   7, 8, 7, 8, 9, 9, 0, 0};
        CURVES("degenerate.svg",
               svg_wrap("<path d='M1 2 A0 5 0 1 1 7 9 a5 0 0 0 0 1 1 a 5 5 0 1 1 0 0 "
                        "A5 5 0 0 0 8 10 l0 0 L3 4 A1 1 0 1 0 3 4 S5 6 7 8 "
                        "m0 0 a0 0 0 0 0 0 0 T9 9'/>"),
               GROVE_CURVES_SVG, 6, deg, cp, 0);
    }
    /* negative radii are their absolute values; relative endpoints; repeated arguments repeat
     * the arc; flags glued to each other and to the next number */
    expect_same(__LINE__, "<path d='M0 0 A-5 -5 0 0 1 10 0'/>", "<path d='M0 0 A5 5 0 0 1 10 0'/>");
    expect_same(__LINE__, "<path d='M0 0 A-5 3 20 1 0 10 1'/>",
                "<path d='M0 0 A5 3 20 1 0 10 1'/>");
    expect_same(__LINE__, "<path d='M10 10 a5 5 0 0 1 10 0 5 5 0 0 1 10 0'/>",
                "<path d='M10 10 A5 5 0 0 1 20 10 A5 5 0 0 1 30 10'/>");
    expect_same(__LINE__, "<path d='M0 0a1 1 0 00 1 1'/>", "<path d='M0 0 a 1 1 0 0 0 1 1'/>");
    expect_same(__LINE__, "<path d='M0 0A5 5 0 1110 0'/>", "<path d='M0 0 A5 5 0 1 1 10 0'/>");
    expect_same(__LINE__, "<path d='M0 0A5 5 0 0 1-10 0'/>", "<path d='M0 0 A5 5 0 0 1 -10 0'/>");
    expect_same(__LINE__, "<path d='M0 0a1,1,0,1,0,2,0'/>", "<path d='M0 0 a1 1 0 1 0 2 0'/>");
    expect_same(__LINE__, "<path d='M0 0A3,2,15,0,1.5,1'/>", "<path d='M0 0 A3 2 15 0 1 .5 1'/>");
    {
        /* transforms apply to the cubics: a scaled and moved circle is a circle, a circle
         * scaled unevenly the ellipse, and under any matrix each control point is the
         * transformed one of the untransformed arc */
        const double m[6] = {1.5, 0.5, -0.3f, 0.8f, 10, -4}; /* as the reader rounds them */
        grove_curves u;
        if (read_body(__LINE__, "tarc.svg",
                      "<g transform='translate(100 50) scale(2)'>"
                      "<path d='M10 0 A10 10 0 0 1 0 10'/></g>"
                      "<path transform='scale(3 1)' d='M10 0 A10 10 0 0 1 -10 0'/>"
                      "<path transform='matrix(1.5 0.5 -0.3 0.8 10 -4)'"
                      " d='M1 2 A7 4 25 1 0 9 -3'/>",
                      &c) == 0) {
            arc_ref a = {100, 50, 20, 20, 0, 0, pi / 2}, b = {0, 0, 30, 10, 0, 0, pi}, o;
            CHECK_MSG(c.n >= 1 + 2 + 1, "tarc: %zu curves", c.n);
            if (c.n >= 4) {
                check_arc(__LINE__, "scaled circle", &c, 0, 1, &a, NULL, 120, 50, 100, 70, 1);
                check_arc(__LINE__, "ellipse by scale", &c, 1, 2, &b, NULL, 30, 0, -30, 0, 2);
                arc_oracle(1, 2, 9, -3, 7, 4, 25, 1, 0, &o);
                check_arc(__LINE__, "matrix", &c, 3, c.n - 3, &o, m, 1, 2, 9, -3, 0);
                if (read_body(__LINE__, "tarc0.svg", "<path d='M1 2 A7 4 25 1 0 9 -3'/>", &u) ==
                    0) {
                    size_t bad = u.n != c.n - 3;
                    for (size_t i = 0; i < u.n && 3 + i < c.n; i++)
                        for (int j = 0; j < 4; j++) {
                            double w[2];
                            apply(m, u.cp[8 * i + 2 * j], u.cp[8 * i + 2 * j + 1], w);
                            bad += fabs(w[0] - c.cp[8 * (3 + i) + 2 * j]) > 1e-6 * (1 + fabs(w[0]));
                            bad += fabs(w[1] - c.cp[8 * (3 + i) + 2 * j + 1]) >
                                   1e-6 * (1 + fabs(w[1]));
                        }
                    CHECK_MSG(bad == 0, "matrix: %zu control points differ", bad);
                    grove_curves_free(&u);
                }
            }
            grove_curves_free(&c);
        }
    }
}

static void test_svg_arc_errors(void)
{
    /* each a path element, the words its message must hold (two pieces at most) */
    static const struct {
        const char *path, *m1, *m2;
    } cases[] = {
        {"<path d='M0 0 A 1 1 0 2 1 5 5'/>",
         "path 0: 'A' large-arc-flag must be 0 or 1, not '2' (character 14 of d)", NULL},
        {"<path id='s' d='M0 0 L1 1 a1 1 0 1 -1 5 5'/>",
         "path 0 (id \"s\"): 'a' sweep-flag must be 0 or 1, not '-1' (character 20 of d)", NULL},
        {"<path d='M0 0 A1 1 0 .5 1 5 5'/>", "'A' large-arc-flag must be 0 or 1, not '.5'", NULL},
        {"<path d='M0 0 A1 1 0 0 +1 5 5'/>", "'A' sweep-flag must be 0 or 1, not '+1'", NULL},
        {"<path d='M0 0 A 1 1 0 1'/>", "path 0: 'A' needs 7 numbers, found 4 before the end", NULL},
        {"<path d='M0 0 A 1 1'/>", "path 0: 'A' needs 7 numbers, found 2 before the end", NULL},
        {"<path d='M0 0 a 1 1 0 Z'/>", "'a' needs 7 numbers, found 3 before 'Z'",
         "character 14 of d"},
        {"<path d='M0 0 A 1 1 0 1 1 5 L 1 1'/>", "'A' needs 7 numbers, found 6 before 'L'", NULL},
        {"<path d='M0 0 a 1 1 0 1 1 5 5 1 1 0 1'/>", "'a' needs 7 numbers, found 4 before the end",
         NULL},
        {"<path d='M0 0 A 1 1 0 1e0 1 5 5'/>", "'A' needs 7 numbers, found 4 before 'e'", NULL},
        {"<path d='M0 0 A 1e39 1 0 0 1 5 5'/>", "path 0: number '1e39' is out of float range",
         NULL},
        /* the large arc of a circle as wide as float's range leaves it */
        {"<path d='M0 0 A 3e38 3e38 0 1 1 1 0'/>", "path 0: a control point (",
         "is larger in magnitude than 1e+38"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "arcbad%zu.svg", i);
        BAD(name, svg_wrap(cases[i].path), GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT, cases[i].m1,
            cases[i].m2);
    }
}

/* Random arcs, chained along paths, each checked against the oracle: absolute and relative,
 * flags glued or apart, radii of every size (small ones scaled up), any rotation, some zero
 * radii and equal endpoints, and half of the paths under a random matrix (reflections too). */
static void test_svg_arcs_random(uint64_t seed, size_t npaths, size_t arcs)
{
    typedef struct {
        double x1, y1, x2, y2, rx, ry, deg;
        int fa, fs;
        size_t path;
    } arc_in;
    tu_rng r = {seed};
    size_t cap = npaths * (arcs * 200 + 300) + 64, len = 0, na = 0, at = 0;
    char *text = (char *)tu_malloc(cap);
    arc_in *in = (arc_in *)tu_malloc(npaths * arcs * sizeof *in);
    double(*mat)[6] = (double(*)[6])tu_malloc(npaths * sizeof *mat);
    int *has_m = (int *)tu_malloc(npaths * sizeof(int));
    grove_curves c;
    len += (size_t)snprintf(text + len, cap - len, "<svg>\n");
    for (size_t p = 0; p < npaths; p++) {
        float x = tu_f32(&r, -100, 100), y = tu_f32(&r, -100, 100);
        double cx = x, cy = y;
        has_m[p] = tu_u32(&r) % 2;
        if (has_m[p]) {
            float v[6] = {tu_f32(&r, 0.5f, 2), tu_f32(&r, -0.4f, 0.4f), tu_f32(&r, -0.4f, 0.4f),
                          tu_f32(&r, 0.5f, 2), tu_f32(&r, -50, 50),     tu_f32(&r, -50, 50)};
            if (tu_u32(&r) % 3 == 0) v[0] = -v[0];
            for (int k = 0; k < 6; k++) mat[p][k] = v[k];
            len += (size_t)snprintf(text + len, cap - len,
                                    "<path transform='matrix(%.9g %.9g %.9g %.9g %.9g %.9g)' ",
                                    (double)v[0], (double)v[1], (double)v[2], (double)v[3],
                                    (double)v[4], (double)v[5]);
        } else {
            len += (size_t)snprintf(text + len, cap - len, "<path ");
        }
        len += (size_t)snprintf(text + len, cap - len, "d='M%.9g %.9g", (double)x, (double)y);
        for (size_t s = 0; s < arcs; s++) {
            arc_in *a = &in[na++];
            uint32_t kind = tu_u32(&r) % 40;
            int rel = tu_u32(&r) % 3 == 0 || kind == 1, glue = tu_u32(&r) % 3 == 0;
            float rx = tu_u32(&r) % 10 == 0 ? tu_f32(&r, 0.01f, 1) : tu_f32(&r, 0.1f, 150);
            float ry = (float)(rx * tu_f32(&r, 0.2f, 5)), rot = tu_f32(&r, -720, 720);
            float ex = tu_f32(&r, -100, 100), ey = tu_f32(&r, -100, 100), ox, oy;
            if (tu_u32(&r) % 10 == 0) rx = -rx;
            if (tu_u32(&r) % 10 == 0) ry = -ry;
            if (kind == 0) {
                if (tu_u32(&r) % 2) rx = 0;
                else ry = 0;
            }
            a->fa = (int)(tu_u32(&r) % 2), a->fs = (int)(tu_u32(&r) % 2);
            a->rx = rx, a->ry = ry, a->deg = rot, a->path = p;
            a->x1 = cx, a->y1 = cy;
            if (kind == 1) { /* equal endpoints: a relative arc to (0, 0) */
                ox = 0, oy = 0;
                a->x2 = cx, a->y2 = cy;
            } else if (rel) {
                ox = (float)(ex - cx), oy = (float)(ey - cy);
                a->x2 = cx + ox, a->y2 = cy + oy;
            } else {
                ox = ex, oy = ey;
                a->x2 = ex, a->y2 = ey;
            }
            len += (size_t)snprintf(text + len, cap - len, " %c%.9g %.9g %.9g %d%s%d %.9g %.9g",
                                    rel ? 'a' : 'A', (double)rx, (double)ry, (double)rot, a->fa,
                                    glue ? "" : " ", a->fs, (double)ox, (double)oy);
            cx = a->x2, cy = a->y2;
        }
        len += (size_t)snprintf(text + len, cap - len, "'/>\n");
    }
    snprintf(text + len, cap - len, "</svg>\n");
    write_file(path_in("arcs.svg"), text);
    if (grove_curves_read(ctx, path_in("arcs.svg"), GROVE_CURVES_SVG, &c) != GROVE_OK) {
        FAIL("random arcs (seed %llu): %s", (unsigned long long)seed, grove_ctx_last_error(ctx));
        c.n = 0, c.cp = NULL, c.degree = NULL;
        na = 0;
    }
    for (size_t i = 0; i < na; i++) {
        const arc_in *a = &in[i];
        const double *m = has_m[a->path] ? mat[a->path] : NULL;
        double e0[2] = {a->x2, a->y2}, s0[2] = {a->x1, a->y1};
        float end[2], start[2];
        size_t n = 0;
        char what[96];
        if (a->x1 == a->x2 && a->y1 == a->y2) continue; /* no curve */
        if (m) apply(m, a->x1, a->y1, s0), apply(m, a->x2, a->y2, e0);
        start[0] = (float)s0[0], start[1] = (float)s0[1], end[0] = (float)e0[0],
        end[1] = (float)e0[1];
        snprintf(what, sizeof what, "random arc %zu (seed %llu)", i, (unsigned long long)seed);
        if (a->rx == 0 || a->ry == 0) {
            if (at >= c.n || c.degree[at] != 1 || memcmp(c.cp + 8 * at, start, 8) != 0 ||
                memcmp(c.cp + 8 * at + 2, end, 8) != 0) {
                FAIL("%s: a zero radius is not the line", what);
                break;
            }
            at++;
            continue;
        }
        while (at + n < c.n && n < 5 &&
               !(c.degree[at + n] == 3 && memcmp(c.cp + 8 * (at + n) + 6, end, 8) == 0))
            n++;
        if (at + n >= c.n || n >= 5) {
            FAIL("%s: no cubic ends at the arc's end", what);
            break;
        }
        {
            arc_ref e;
            arc_oracle(a->x1, a->y1, a->x2, a->y2, a->rx, a->ry, a->deg, a->fa, a->fs, &e);
            check_arc(__LINE__, what, &c, at, n + 1, &e, m, a->x1, a->y1, a->x2, a->y2, 0);
        }
        at += n + 1;
    }
    CHECK_MSG(na == 0 || at == c.n, "random arcs: %zu of %zu curves accounted for", at, c.n);
    grove_curves_free(&c);
    free(text);
    free(in);
    free(mat);
    free(has_m);
}

/* ---- writers ---- */

static int count_tmp_files(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".grove-tmp.")) n++;
    closedir(d);
    return n;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *b;
    long n;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = (char *)tu_malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    b[n] = '\0';
    fclose(f);
    if (len) *len = (size_t)n;
    return b;
}

/* Random polylines: n curves with 0..maxv vertices each (some empty). */
static void make_polylines(tu_rng *r, size_t n, int maxv, grove_polylines *p)
{
    uint64_t v = 0;
    p->n_curves = n;
    p->offsets = (uint64_t *)tu_malloc((n + 1) * sizeof(uint64_t));
    p->offsets[0] = 0;
    for (size_t c = 0; c < n; c++) {
        uint32_t k = tu_u32(r) % 16 == 0 ? 0 : 2 + tu_u32(r) % (uint32_t)(maxv - 1);
        v += k;
        p->offsets[c + 1] = v;
    }
    p->n_vertices = v;
    p->xy = v ? (float *)tu_malloc(2 * v * sizeof(float)) : NULL;
    for (uint64_t i = 0; i < 2 * v; i++) {
        float x = tu_f32(r, -1000, 1000);
        if (tu_u32(r) % 4 == 0) x = ldexpf(x, (int)(tu_u32(r) % 120) - 60);
        p->xy[i] = x;
    }
}

static void free_polylines(grove_polylines *p)
{
    free(p->offsets);
    free(p->xy);
    memset(p, 0, sizeof *p);
}

/* Parses the CSV back and compares every field; floats bit for bit. */
static void check_csv(const char *path, const grove_polylines *p)
{
    size_t len, row = 0, bad = 0;
    char *text = slurp(path, &len), *s, *e;
    if (!text) {
        FAIL("%s: cannot read it back", path);
        return;
    }
    if (strncmp(text, "curve,vertex,x,y\n", 17) != 0) FAIL("%s: header is wrong", path);
    s = text + 17;
    for (size_t c = 0; c < p->n_curves; c++)
        for (uint64_t v = p->offsets[c]; v < p->offsets[c + 1]; v++, row++) {
            unsigned long long cc, vv;
            float x, y;
            cc = strtoull(s, &e, 10);
            if (*e != ',') break;
            vv = strtoull(e + 1, &e, 10);
            if (*e != ',') break;
            x = strtof(e + 1, &e);
            if (*e != ',') break;
            y = strtof(e + 1, &e);
            if (*e != '\n') break;
            s = e + 1;
            if (cc != c || vv != v - p->offsets[c] || memcmp(&x, &p->xy[2 * v], 4) != 0 ||
                memcmp(&y, &p->xy[2 * v + 1], 4) != 0)
                bad++;
        }
    CHECK_MSG(row == p->n_vertices && bad == 0 && *s == '\0',
              "%s: %zu of %llu rows parsed, %zu differ, %zu bytes left", path, row,
              (unsigned long long)p->n_vertices, bad, strlen(s));
    free(text);
}

/* ---- SVG basic shapes ---- */

static void test_svg_shapes(uint64_t seed)
{
    const double pi = 3.14159265358979323846, k = 4.0 / 3.0 * tan(pi / 8);
    {
        /* a rectangle: four lines clockwise on screen from (x, y); a length with px */
        const int deg[] = {1, 1, 1, 1};
        const double cp[] = {10, 20, 60, 20, 0, 0, 0, 0, 60, 20, 60, 50, 0, 0, 0, 0,
                             60, 50, 10, 50, 0, 0, 0, 0, 10, 50, 10, 20, 0, 0, 0, 0};
        CURVES("rect.svg", svg_wrap("<rect x='10' y=' 20px ' width='50' height='30'/>"),
               GROVE_CURVES_SVG, 4, deg, cp, 0);
    }
    {
        /* a circle: four quarter arcs from (cx + r, cy) through (cx, cy + r), each the textbook
         * cubic; the ellipse's missing ry is its rx */
        const int deg[] = {3, 3, 3, 3};
        const double cp[] = {
            12, 1, 12, 1 + 10 * k, 2 + 10 * k, 11, 2, 11,
            2, 11, 2 - 10 * k, 11, -8, 1 + 10 * k, -8, 1,
            -8, 1, -8, 1 - 10 * k, 2 - 10 * k, -9, 2, -9,
            2, -9, 2 + 10 * k, -9, 12, 1 - 10 * k, 12, 1};
        CURVES("circle.svg", svg_wrap("<circle cx='2' cy='1' r='10'/>"), GROVE_CURVES_SVG, 4, deg,
               cp, 1e-6);
        CURVES("ellipse1.svg", svg_wrap("<ellipse cx='2' cy='1' rx='10'/>"), GROVE_CURVES_SVG, 4,
               deg, cp, 1e-6);
        CURVES("ellipse2.svg", svg_wrap("<ellipse cx='2' cy='1' ry='10'/>"), GROVE_CURVES_SVG, 4,
               deg, cp, 1e-6);
    }
    {
        /* line (units: 1in = 96 px, 2.54cm = 1in, 25.4mm = 1in, 72pt = 1in, 1pc = 16 px) */
        const int deg[] = {1, 1, 1};
        const double cp[] = {96, 96, 96, 96, 0, 0, 0, 0,   72, 16, 0, 0, 0, 0, 0, 0,
                             0, 0, 0, 0, 0, 0, 0, 0};
        CURVES("line.svg",
               svg_wrap("<line x1='1in' y1='2.54cm' x2='25.4mm' y2='72pt'/>"
                        "<line x1='54pt' x2='0' y1='1pc'/><line/>"),
               GROVE_CURVES_SVG, 3, deg, cp, 1e-7);
    }
    {
        /* polyline and polygon; a polygon already closed gets no closing line; one point or
         * none draws nothing */
        const int deg[] = {1, 1, 1, 1, 1, 1, 1, 1};
        const double cp[] = {0, 0, 10, 10, 0, 0, 0, 0,  10, 10, 20, 0, 0, 0, 0, 0,
                             0, 0, 10, 10, 0, 0, 0, 0,  10, 10, 20, 0, 0, 0, 0, 0,
                             20, 0, 0, 0, 0, 0, 0, 0,   1, 1, 2, 2, 0, 0, 0, 0,
                             2, 2, 3, 1, 0, 0, 0, 0,    3, 1, 1, 1, 0, 0, 0, 0};
        CURVES("poly.svg",
               svg_wrap("<polyline points='0,0 10,10,20,0'/><polygon points=' 0 0 10 10 20 0 '/>"
                        "<polygon points='1 1 2 2 3 1 1 1'/><polyline points='5 5'/>"
                        "<polygon points=''/><polyline/>"),
               GROVE_CURVES_SVG, 8, deg, cp, 0);
    }
    {
        /* sizes of 0 and missing sizes draw nothing; shapes and paths in document order; the
         * transforms of the shape and its groups apply */
        const int deg[] = {1, 1, 1};
        const double cp[] = {0, 0, 1, 0, 0, 0, 0, 0, 4, 6, 4, 8, 0, 0, 0, 0,
                             5, 5, 6, 5, 0, 0, 0, 0};
        CURVES("zero.svg",
               svg_wrap("<rect width='0' height='5'/><rect width='5'/><circle r='0'/><circle/>"
                        "<ellipse rx='3' ry='0'/><path d='M0 0 H1'/>"
                        "<g transform='translate(4 6)'><line transform='rotate(90)' x2='2'/></g>"
                        "<path d='M5 5 h1'/>"),
               GROVE_CURVES_SVG, 3, deg, cp, 1e-12);
    }
    /* each shape gives the curves of the path SVG 2 says it is equivalent to, bit for bit (the
     * sums are exact in these numbers); rx and ry default to each other and are clamped to half
     * the sides; a radius of 0 on one axis gives square corners */
    expect_same(__LINE__, "<rect x='1' y='2' width='8' height='6' rx='1' ry='2'/>",
                "<path d='M2 2 H8 A1 2 0 0 1 9 4 V6 A1 2 0 0 1 8 8 H2 A1 2 0 0 1 1 6 V4 "
                "A1 2 0 0 1 2 2'/>");
    expect_same(__LINE__, "<rect x='1' y='2' width='8' height='6' rx='1.5'/>",
                "<path d='M2.5 2 H7.5 A1.5 1.5 0 0 1 9 3.5 V6.5 A1.5 1.5 0 0 1 7.5 8 H2.5 "
                "A1.5 1.5 0 0 1 1 6.5 V3.5 A1.5 1.5 0 0 1 2.5 2'/>");
    expect_same(__LINE__, "<rect width='8' height='6' ry='5'/>",
                "<path d='M4 0 A4 3 0 0 1 8 3 A4 3 0 0 1 4 6 A4 3 0 0 1 0 3 A4 3 0 0 1 4 0'/>");
    expect_same(__LINE__, "<rect width='8' height='6' rx='0' ry='2'/>",
                "<path d='M0 0 H8 V6 H0 Z'/>");
    expect_same(__LINE__, "<ellipse cx='3' cy='-2' rx='4' ry='0.5'/>",
                "<path d='M7 -2 A4 .5 0 0 1 3 -1.5 A4 .5 0 0 1 -1 -2 A4 .5 0 0 1 3 -2.5 "
                "A4 .5 0 0 1 7 -2'/>");
    expect_same(__LINE__, "<g transform='skewX(20)'><circle cx='1' r='2' transform='scale(3 1)'/></g>",
                "<path transform='skewX(20) scale(3 1)' d='M3 0 A2 2 0 0 1 1 2 A2 2 0 0 1 -1 0 "
                "A2 2 0 0 1 1 -2 A2 2 0 0 1 3 0'/>");
    expect_same(__LINE__, "<polygon points='1,2,3,4 5-6'/>", "<path d='M1 2 L3 4 5 -6 Z'/>");
    {
        /* random rectangles, circles, ellipses and polygons against their paths, in numbers
         * whose sums and halves are exact (multiples of 1/4 below 2^20) */
        tu_rng st = {seed};
        char *b1 = (char *)malloc(1 << 16), *b2 = (char *)malloc(1 << 16);
        CHECK(b1 && b2);
        for (int it = 0; b1 && b2 && it < 200; it++) {
            double v[6];
            for (int j = 0; j < 6; j++) v[j] = (double)(int)(tu_next(&st) % 4000) / 4 - 400;
            double w = fabs(v[2]) + 0.25, h = fabs(v[3]) + 0.25, rx = fabs(v[4]) / 8,
                   ry = fabs(v[5]) / 8;
            switch (it % 3) {
            case 0:
                if (rx > w / 2) rx = w / 2;
                if (ry > h / 2) ry = h / 2;
                if (rx == 0 || ry == 0) rx = ry = 0.25;
                snprintf(b1, 1 << 16, "<rect x='%.17g' y='%.17g' width='%.17g' height='%.17g' "
                         "rx='%.17g' ry='%.17g'/>", v[0], v[1], w, h, rx, ry);
                snprintf(b2, 1 << 16,
                         "<path d='M%.17g %.17g H%.17g A%.17g %.17g 0 0 1 %.17g %.17g V%.17g "
                         "A%.17g %.17g 0 0 1 %.17g %.17g H%.17g A%.17g %.17g 0 0 1 %.17g %.17g "
                         "V%.17g A%.17g %.17g 0 0 1 %.17g %.17g'/>",
                         v[0] + rx, v[1], v[0] + w - rx, rx, ry, v[0] + w, v[1] + ry,
                         v[1] + h - ry, rx, ry, v[0] + w - rx, v[1] + h, v[0] + rx, rx, ry, v[0],
                         v[1] + h - ry, v[1] + ry, rx, ry, v[0] + rx, v[1]);
                if (w - 2 * rx == 0 || h - 2 * ry == 0) continue; /* the path's H/V of length 0 */
                break;
            case 1:
                snprintf(b1, 1 << 16, "<ellipse cx='%.17g' cy='%.17g' rx='%.17g' ry='%.17g'/>",
                         v[0], v[1], w, h);
                snprintf(b2, 1 << 16,
                         "<path d='M%.17g %.17g A%.17g %.17g 0 0 1 %.17g %.17g A%.17g %.17g 0 0 1 "
                         "%.17g %.17g A%.17g %.17g 0 0 1 %.17g %.17g A%.17g %.17g 0 0 1 %.17g "
                         "%.17g'/>",
                         v[0] + w, v[1], w, h, v[0], v[1] + h, w, h, v[0] - w, v[1], w, h, v[0],
                         v[1] - h, w, h, v[0] + w, v[1]);
                break;
            default: {
                size_t o1 = 0, o2 = 0;
                int npt = 2 + (int)(tu_next(&st) % 40);
                double fx = 0, fy = 0, lx = 0, ly = 0;
                o1 += (size_t)snprintf(b1 + o1, 1024, "<polygon points='");
                o2 += (size_t)snprintf(b2 + o2, 1024, "<path d='");
                for (int j = 0; j < npt; j++) {
                    double px = (double)(int)(tu_next(&st) % 800) / 4,
                           py = (double)(int)(tu_next(&st) % 800) / 4;
                    if (j == 0) fx = px, fy = py;
                    lx = px, ly = py;
                    o1 += (size_t)snprintf(b1 + o1, 1024, "%s%.17g,%.17g", j ? " " : "", px, py);
                    o2 += (size_t)snprintf(b2 + o2, 1024, "%c%.17g %.17g ", j ? 'L' : 'M', px,
                                           py);
                }
                snprintf(b1 + o1, 1024, "'/>");
                snprintf(b2 + o2, 1024, "%s'/>", (lx != fx || ly != fy) ? "Z" : "");
                break;
            }
            }
            expect_same(__LINE__, b1, b2);
        }
        free(b1);
        free(b2);
    }
}

static void test_svg_shape_errors(void)
{
    BAD("negw.svg", svg_wrap("<rect width='-3' height='2'/>"), GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT, "rect 0: width must not be negative (-3) (character 1 of width)",
        NULL);
    BAD("negr.svg", svg_wrap("<circle/><circle id='c' r='-1e-3'/>"), GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT, "circle 1 (id \"c\"): r must not be negative", NULL);
    BAD("unit.svg", svg_wrap("<rect width='3em' height='2'/>"), GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT,
        "rect 0: unit 'em' is not supported (a length is a number, with px, in, cm, mm, pt or pc "
        "or none) (character 2 of width)", NULL);
    BAD("pct.svg", svg_wrap("<circle r='50%'/>"), GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "unit '%' is not supported", NULL);
    BAD("nolen.svg", svg_wrap("<line x1='auto'/>"), GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "line 0: x1 is not a length: 'auto' (character 1 of x1)", NULL);
    BAD("trail.svg", svg_wrap("<ellipse rx='3 4'/>"), GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "ellipse 0: '4' after the length (character 3 of rx)", NULL);
    BAD("odd.svg", svg_wrap("<polyline points='0 0 1 1 2'/>"), GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT,
        "polyline 0: points holds an odd number of numbers (5): the last point has no y", NULL);
    BAD("ptjunk.svg", svg_wrap("<polygon points='0 0; 1 1'/>"), GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT,
        "polygon 0: unexpected ';' (points is a list of numbers) (character 4 of points)", NULL);
    BAD("ptrange.svg", svg_wrap("<polygon points='0 0 1e39 1'/>"), GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT, "polygon 0: number '1e39' is out of float range", NULL);
    BAD("big.svg", "<svg>\n<path d='M0 0H1'/>\n<circle cx='9e37' r='5e37'/></svg>",
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "big.svg:3: circle 0: a control point (1.3999999",
        ", 0) is larger in magnitude than 1e+38, the largest coordinate accepted");
    BAD("bigt.svg", svg_wrap("<rect width='1' height='1' transform='scale(1e38)' x='1'/>"),
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT, "(after the transform) is larger in magnitude",
        NULL);
    BAD("paths.svg", svg_wrap("<path d='M0 0H1'/><rect/><path id='p' d='M0 0 X'/>"),
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT, "path 1 (id \"p\"): command 'X'", NULL);
}

/* ---- SVG <use>, and what is not drawn where it stands ---- */

/* <style> sheets: what is read, CSS's cascade, hostile sheets, the work limit. */
static void test_svg_style_sheets(void)
{
    const int d1[] = {1, 1}, d3[] = {1, 1, 1};
    const double c1[] = {0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0};
    const double c3[] = {0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 5, 5, 0, 0, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0};
    {
        /* wherever they stand (text and CDATA, after the content too): element name, class,
         * id and compound selectors, lists; display and visibility; the cascade: an
         * !important sheet declaration over the style attribute's, the style attribute over
         * the sheets, the sheets over the presentation attributes, specificity, then the
         * later; at-rules and selectors not read (combinators, attributes, pseudo-classes)
         * match nothing; declarations a rule repeats: the last valid one */
        const int deg[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
        const double cp[] = {2, 2, 3, 3, 0, 0, 0, 0,     4, 4, 5, 5, 0, 0, 0, 0,
                             6, 6, 7, 7, 0, 0, 0, 0,     8, 8, 9, 9, 0, 0, 0, 0,
                             10, 10, 11, 11, 0, 0, 0, 0, 12, 12, 13, 13, 0, 0, 0, 0,
                             14, 14, 15, 15, 0, 0, 0, 0, 16, 16, 17, 17, 0, 0, 0, 0,
                             18, 18, 19, 19, 0, 0, 0, 0};
        CURVES("sheet.svg",
               "<svg><style>/* a comment { } */ .hid { display : none } #v{visibility:hidden}\n"
               "path.h2, .other { visibility: hidden; visibility: bogus }\n"
               "@media print { path { display: none } } @import 'x.css';\n"
               "g > path, g path, path:first-child, [id=z] { display: none }\n"
               "rect { display: none !important } .show { display: inline }\n"
               "#v2 { display: inline } .a.b { display: none } *.star { visibility: hidden }"
               "#v3 { display: inline } .hid2 { display: none }"
               "</style>"
               "<path class='hid' d='M0 0 L1 1'/><path class=' x  hid\ty ' d='M0 0 L1 2'/>"
               "<path class='hidden' d='M2 2 L3 3'/><path id='v' d='M0 0 L1 3'/>"
               "<path class='h2' d='M0 0 L1 4'/><line class='h2' x1='4' y1='4' x2='5' y2='5'/>"
               "<g><path id='z' d='M6 6 L7 7'/></g>"
               "<path class='hid' style='display:inline' d='M8 8 L9 9'/>"
               "<rect style='display:inline' width='1' height='1'/>"
               "<path class='show' display='none' d='M10 10 L11 11'/>"
               "<path id='v2' class='hid' d='M12 12 L13 13'/>"
               "<path class='a' d='M14 14 L15 15'/><path class='b a' d='M0 0 L1 6'/>"
               "<path class='star' d='M0 0 L1 7'/><path class='late' d='M0 0 L1 8'/>"
               "<path class='hid' style='display:inline !important' d='M16 16 L17 17'/>"
               "<path id='v3' class='hid2' d='M18 18 L19 19'/>"
               "<style><![CDATA[ .late { display: none } ]]></style></svg>",
               GROVE_CURVES_SVG, 9, deg, cp, 0);
    }
    CURVES("st_eofblock.svg", /* a block left open at the end of the sheet still applies */
           "<svg><path d='M0 0 L1 1'/><path d='M0 0 L2 2'/><path class='a' d='M0 0 L3 3'/>"
           "<style>.a{display:none</style><style>.b{}</style></svg>",
           GROVE_CURVES_SVG, 2, d1, c1, 0);
    CURVES("st_strings.svg", /* braces and comment starts inside strings; a comment left open */
           "<svg><style>.a{content:'}/*'; display:none} [x='{'], .b{display:none} /* .c{</style>"
           "<path d='M0 0 L1 1'/><path class='a' d='M0 0 L5 5'/><path class='b' d='M0 0 L6 6'/>"
           "<path class='c' d='M0 0 L2 2'/></svg>",
           GROVE_CURVES_SVG, 2, d1, c1, 0);
    CURVES("st_defs_ns.svg", /* in <defs>, prefixed, after the content; the later sheet wins */
           "<svg><path class='a' d='M0 0 L1 1'/><path class='b' d='M0 0 L7 7'/>"
           "<path class='c' d='M0 0 L2 2'/><defs><svg:style>.b{display:none}</svg:style></defs>"
           "<style>.c{display:none}</style><style>.c{display:inline}</style></svg>",
           GROVE_CURVES_SVG, 2, d1, c1, 0);
    CURVES("st_case.svg", /* names, classes and ids are case-sensitive; keywords are not */
           "<svg><style>.A, #P, PATH {display:none} .b{DISPLAY:NONE}</style>"
           "<path class='a' d='M0 0 L1 1'/><path id='p' d='M0 0 L2 2'/>"
           "<path class='b' d='M0 0 L8 8'/></svg>",
           GROVE_CURVES_SVG, 2, d1, c1, 0);
    CURVES("st_vis.svg", /* an invalid visibility in a sheet is dropped; inherit beats the
                          * attribute; display other than none beats display='none' */
           "<svg><style>path{visibility:hidden} .a{visibility:bogus} .b{visibility:inherit}"
           ".c{display:block}</style><path class='a' d='M0 0 L9 9'/>"
           "<path class='b' visibility='hidden' d='M0 0 L1 1'/>"
           "<path class='c' display='none' style='visibility:visible' d='M0 0 L2 2'/></svg>",
           GROVE_CURVES_SVG, 2, d1, c1, 0);
    CURVES("st_use.svg", /* a use's class hides the use; the target matched as itself, also
                          * under a display:none group */
           "<svg><style>.u{display:none} .t{display:none} .h{display:none}</style>"
           "<defs><path id='p' d='M0 0 L1 1'/><path id='q' class='t' d='M0 0 L4 4'/></defs>"
           "<use class='u' href='#p'/><use href='#q'/><use href='#p'/>"
           "<g class='h'><path id='r' d='M0 0 L2 2'/></g><use href='#r'/></svg>",
           GROVE_CURVES_SVG, 2, d1, c1, 0);
    CURVES("st_limits.svg", /* compounds of many classes, long names, a comment inside a
                             * compound (.f/ * * /.g is .f.g), one between two names (a/ * * /b
                             * is no selector) */
           "<svg><style>.a.b.c.d.e{display:none}"
           "#xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{display:none}"
           ".f/**/.g{display:none} pa/**/th{display:none}</style><path d='M0 0 L1 1'/>"
           "<path class='e d c b a' d='M0 0 L5 5'/>"
           "<path id='xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' d='M0 0 L6 6'/>"
           "<path class='g f' d='M0 0 L7 7'/><path class='f' d='M0 0 L2 2'/></svg>",
           GROVE_CURVES_SVG, 2, d1, c1, 0);
    CURVES("st_prefix.svg", /* a compound's other classes match whole names only */
           "<svg><style>.a.b{display:none} #q.a{display:none}</style>"
           "<path class='a bx' d='M0 0 L1 1'/><path class='b a' d='M0 0 L3 3'/>"
           "<path id='q' class='ab' d='M0 0 L2 2'/></svg>",
           GROVE_CURVES_SVG, 2, d1, c1, 0);
    CURVES("st_display_valid.svg", /* a display value that is not valid CSS is dropped, in a
                                    * sheet and in a style attribute; multi-keyword values */
           "<svg><style>.a{display:none; display:12px} .b{display:none; display:block flow}"
           "</style><path class='a' d='M0 0 L3 3'/><path class='b' d='M0 0 L1 1'/>"
           "<path style='display:none;display:bogus' d='M0 0 L4 4'/>"
           "<path style='display:none;display:inline flow-root' d='M0 0 L5 5'/>"
           "<path style='display:block;display:none !important;display:inline' d='M0 0 L6 6'/>"
           "<path d='M0 0 L2 2'/></svg>",
           GROVE_CURVES_SVG, 3, d3, c3, 0);
    {
        /* the review's cases (2026-11-29): CSS Nesting's rules and nested at-rules are not the
         * outer rule's declarations; one invalid selector drops the whole list (an empty one, a
         * stray character, a class or id that is no identifier); display's multi-keyword
         * grammar; a string left open ends at its line; <!-- and --> between rules; a sheet is
         * the style element's own text, past a processing instruction or a child element (whose
         * text is not the sheet's); revert is inherit for visibility */
        const int d2[] = {1};
        const double c2[] = {0, 0, 2, 2, 0, 0, 0, 0};
        const double c25[] = {0, 0, 2, 2, 0, 0, 0, 0, 0, 0, 5, 5, 0, 0, 0, 0};
        CURVES("rv_nested.svg",
               "<svg><style>.a{ &:hover{ fill:red; display:none; } }"
               ".b{ @media print { fill:red; display:none; } } .c{ &:x{a:b} display:none }"
               "</style><path class='a' d='M0 0 L1 1'/><path class='b' d='M0 0 L2 2'/>"
               "<path class='c' d='M0 0 L3 3'/></svg>",
               GROVE_CURVES_SVG, 2, d1, c1, 0);
        CURVES("rv_list_invalid.svg",
               "<svg><style>.a,{display:none} .a, .b!{display:none} .a, p > q{visibility:x}"
               ".c, g > p{display:none}</style>"
               "<path class='a' d='M0 0 L1 1'/><path d='M0 0 L2 2'/><path class='c' d='M0 0 L3 3'/>"
               "</svg>",
               GROVE_CURVES_SVG, 2, d1, c1, 0);
        CURVES("rv_ident.svg",
               "<svg><style>.1a{display:none} #1b{display:none} .-1c{display:none}"
               "1path{display:none} .-d{display:none}</style>"
               "<path class='1a -1c' d='M0 0 L1 1'/><path id='1b' d='M0 0 L2 2'/>"
               "<path class='-d' d='M0 0 L3 3'/></svg>",
               GROVE_CURVES_SVG, 2, d1, c1, 0);
        CURVES("rv_display_multi.svg",
               "<svg><style>.a{display:none} .a{display:inline block}"
               ".b{display:none} .b{display:list-item grid} .c{display:none} .c{display:inline "
               "list-item flow-root}</style><path class='a' d='M0 0 L1 1'/>"
               "<path style='display:none; display:block block' d='M0 0 L1 1'/>"
               "<path class='b' d='M0 0 L3 3'/><path d='M0 0 L2 2'/>"
               "<path class='c' style='display:-webkit-box' display='none' d='M0 0 L5 5'/></svg>",
               GROVE_CURVES_SVG, 2, d1, c25, 0);
        CURVES("rv_bad_string.svg",
               "<svg><style>.a{content:'x\n}\n.b{display:none}</style>"
               "<path class='b' d='M0 0 L1 1'/><path d='M0 0 L2 2'/></svg>",
               GROVE_CURVES_SVG, 1, d2, c2, 0);
        CURVES("rv_cdo.svg",
               "<svg><style><![CDATA[<!-- .a{display:none} -->]]></style>"
               "<path class='a' d='M0 0 L1 1'/><path d='M0 0 L2 2'/></svg>",
               GROVE_CURVES_SVG, 1, d2, c2, 0);
        CURVES("rv_child_text.svg",
               "<svg><style><?x y?>.a{display:none}</style><style>.c{}<x>.e{display:none}</x>"
               ".b{display:none}</style><path class='a' d='M0 0 L1 1'/>"
               "<path class='b' d='M0 0 L3 3'/><path class='e' d='M0 0 L2 2'/></svg>",
               GROVE_CURVES_SVG, 1, d2, c2, 0);
        CURVES("rv_vis_revert.svg",
               "<svg><style>.a{visibility:hidden} .a{visibility:revert}</style>"
               "<path class='a' d='M0 0 L1 1'/><path d='M0 0 L2 2'/></svg>",
               GROVE_CURVES_SVG, 2, d1, c1, 0);
        /* an id or class that does not decode counts as absent to the sheets: the errors are
         * those of the file without a sheet */
        BAD("rv_err_class.svg",
            "<svg><style>.x{display:none}</style><path class='&x;' d='M0 0 Q'/></svg>",
            GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT, "path 0: 'Q' needs 4", NULL);
        BAD("rv_err_style.svg",
            "<svg><style>.x{display:none}</style><path style='&x;' id='&y;' d='M0 0 L1 1'/>"
            "</svg>",
            GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT, "'&x;'", NULL);
        CURVES("rv_err_id.svg",
               "<svg><style>.x{display:none}</style><g id='a&b'/><path d='M0 0 L2 2'/></svg>",
               GROVE_CURVES_SVG, 1, d2, c2, 0);
        CURVES("rv_err_meta.svg",
               "<svg><style>.x{display:none}</style><metadata><foo class='&nbsp;'/></metadata>"
               "<path d='M0 0 L2 2'/></svg>",
               GROVE_CURVES_SVG, 1, d2, c2, 0);
        /* the sheets' pass reads tags as the main scan does: an end tag ends at its first '>'
         * (the "<style>" below is inside "</g ...>"); an attribute name may hold a quote */
        CURVES("rv_pre_endtag.svg",
               "<svg><g></g <style>\n.b{display:none}<path class='b' d='M0 0 L1 1'/>"
               "<path d='M0 0 L2 2'/></svg>",
               GROVE_CURVES_SVG, 2, d1, c1, 0);
        CURVES("rv_pre_quote_name.svg",
               "<svg><g a\"b='c'><style>.b{display:none}</style></g>"
               "<path class='b' d='M0 0 L1 1'/><path d='M0 0 L2 2'/></svg>",
               GROVE_CURVES_SVG, 1, d2, c2, 0);
    }
    {
        /* empty sheets (found by fuzzing: the sheets' text was still NULL) */
        const int d[] = {1};
        const double c[] = {0, 0, 1, 1, 0, 0, 0, 0};
        CURVES("st_empty.svg",
               "<svg><style></style><style><!-- --></style><path d='M0 0 L1 1'/></svg>",
               GROVE_CURVES_SVG, 1, d, c, 0);
    }
    /* errors come as without a sheet: the sheets' pass reports nothing ... */
    BAD("st_err_order.svg", "<svg><style/><path d='M0 0 Q'/>\n<path d='M0' x=1/></svg>",
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT, "st_err_order.svg:1: path 0: 'Q' needs 4", NULL);
    BAD("st_err_cdata.svg", "<svg><style><![CDATA[.a{display:none}</style></svg>",
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT, "unterminated CDATA section", NULL);
    {
        /* ... and decodes no id of undrawn content */
        const int d[] = {1};
        const double c[] = {0, 0, 1, 1, 0, 0, 0, 0};
        CURVES("st_err_id.svg", "<svg><style/><g id='a&b'/><path d='M0 0 L1 1'/></svg>",
               GROVE_CURVES_SVG, 1, d, c, 0);
    }
    {
        /* many rules, each element tries only its own: rules for the even classes of 20000,
         * an element of each class; the odd ones are drawn (tried as every rule against
         * every element, this would pass the work limit) */
        const size_t n = 20000;
        char *t = (char *)malloc(n * 64 + 256);
        int *deg = (int *)malloc(n / 2 * sizeof *deg);
        double *cp = (double *)calloc(n / 2 * 8, sizeof *cp);
        size_t len = 0;
        CHECK(t && deg && cp);
        if (t && deg && cp) {
            len += (size_t)sprintf(t + len, "<svg><style>");
            for (size_t k = 0; k < n; k += 2)
                len += (size_t)sprintf(t + len, ".c%zu{display:none}", k);
            len += (size_t)sprintf(t + len, "</style>");
            for (size_t k = 0; k < n; k++)
                len += (size_t)sprintf(t + len, "<path class='c%zu' d='M0 0 L%zu 1'/>", k, k);
            sprintf(t + len, "</svg>");
            for (size_t k = 0; k < n / 2; k++) {
                deg[k] = 1;
                cp[8 * k + 2] = (double)(2 * k + 1);
                cp[8 * k + 3] = 1;
            }
            CURVES("st_many.svg", t, GROVE_CURVES_SVG, n / 2, deg, cp, 0);
        }
        /* many rules under one key, or universal, that all match, with one property: an
         * element stops at the first (counted: walking them all would pass the work limit) */
        if (t) {
            const char *rules[] = {".a{display:inline}", "*{display:inline}"};
            for (int v = 0; v < 2; v++) {
                len = (size_t)sprintf(t, "<svg><style>");
                for (size_t k = 0; k < n; k++) len += (size_t)sprintf(t + len, "%s", rules[v]);
                len += (size_t)sprintf(t + len, "</style>");
                for (size_t k = 0; k < n; k++)
                    len += (size_t)sprintf(t + len, "<path class='a' d='M0 0 L%zu 1'/>", k);
                sprintf(t + len, "</svg>");
                {
                    grove_curves c;
                    write_file(path_in("st_same_key.svg"), t);
                    CHECK(grove_curves_read(ctx, path_in("st_same_key.svg"), GROVE_CURVES_SVG,
                                            &c) == GROVE_OK);
                    CHECK(c.n == n);
                    grove_curves_free(&c);
                }
            }
            /* one element of n classes against ".aK.z" for every K: each class finds its
             * rule, which asks for z: 2n steps */
            len = (size_t)sprintf(t, "<svg><style>");
            for (size_t k = 0; k < n; k++)
                len += (size_t)sprintf(t + len, ".a%zu.z{display:none}", k);
            len += (size_t)sprintf(t + len, "</style><path class='");
            for (size_t k = 0; k < n; k++) len += (size_t)sprintf(t + len, "a%zu a%zu ", k, k);
            sprintf(t + len, "' d='M0 0 L1 1'/></svg>");
            {
                grove_curves c;
                write_file(path_in("st_long_class.svg"), t);
                CHECK(grove_curves_read(ctx, path_in("st_long_class.svg"), GROVE_CURVES_SVG,
                                        &c) == GROVE_OK);
                CHECK(c.n == 1);
                grove_curves_free(&c);
            }
        }
        /* rules that share a class but ask for one the elements lack: the work limit */
        if (t) {
            const size_t m = 12000;
            len = (size_t)sprintf(t, "<svg><style>");
            for (size_t k = 0; k < m; k++)
                len += (size_t)sprintf(t + len, ".a.b%zu{display:none}", k);
            len += (size_t)sprintf(t + len, "</style>\n");
            for (size_t k = 0; k < m; k++)
                len += (size_t)sprintf(t + len, "<path class='a' d='M0 0 L1 1'/>");
            sprintf(t + len, "</svg>");
            BAD("st_work.svg", t, GROVE_CURVES_SVG, GROVE_ERR_LIMIT,
                "st_work.svg:2: matching the <style> rules to the elements took more", NULL);
        }
        free(t);
        free(deg);
        free(cp);
    }
}

static void test_svg_use(void)
{
    const char *head = "<svg xmlns='http://www.w3.org/2000/svg' "
                       "xmlns:xlink='http://www.w3.org/1999/xlink' viewBox='0 0 100 50'>\n";
    char doc[4096];
    {
        /* defs, clipPath and symbol content is drawn only through a use: moved by x y, a
         * symbol's viewBox fitted into the use's width and height or, without them, the root
         * viewport (meet, centred); a group drawn again with its use's transform; a reference
         * to an element later in the file */
        const int deg[] = {1, 1, 1, 1, 1, 1};
        const double cp[] = {5, 7, 15, 7, 0, 0, 0, 0,    0, 0, 20, 20, 0, 0, 0, 0,
                             25, 0, 75, 50, 0, 0, 0, 0,  3, 4, 13, 4, 0, 0, 0, 0,
                             100, 0, 110, 0, 0, 0, 0, 0,  0, 0, 10, 0, 0, 0, 0, 0};
        snprintf(doc, sizeof doc,
                 "%s<defs><path id='p' d='M0 0 L10 0'/><clipPath id='c'><rect width='5' "
                 "height='5'/></clipPath></defs>\n"
                 "<symbol id='s' viewBox='0 0 10 10'><line x2='10' y2='10'/></symbol>\n"
                 "<use href='#p' x='5' y='7'/><use xlink:href='#s' width='20' height='20'/>"
                 "<use href=' #s '/>\n<g id='g'><use href='#later' x='3' y='4'/></g>"
                 "<use href='#g' transform='translate(97 -4)'/>"
                 "<g display='none'><path d='M0 0 L1 1'/></g><use href='#hid'/>"
                 "<path id='hid' display='none' d='M0 0 L2 2'/>"
                 "<mask><path d='M0 0 L3 3'/></mask><marker><rect width='1' height='1'/></marker>"
                 "<pattern><circle r='1'/></pattern><path id='later' d='M0 0 L10 0'/></svg>",
                 head);
        CURVES("use.svg", doc, GROVE_CURVES_SVG, 6, deg, cp, 0);
    }
    {
        /* preserveAspectRatio: none stretches; xMinYMax slice fills and aligns; a width in % of
         * the root viewBox */
        const int deg[] = {1, 1, 1};
        const double cp[] = {0, 0, 40, 20, 0, 0, 0, 0,   0, -30, 50, 20, 0, 0, 0, 0,
                             0, 0, 50, 50, 0, 0, 0, 0};
        snprintf(doc, sizeof doc,
                 "%s<symbol id='a' viewBox='0 0 10 10' preserveAspectRatio='none'>"
                 "<line x2='10' y2='10'/></symbol>"
                 "<symbol id='b' viewBox='0 0 10 10' preserveAspectRatio=' xMinYMax  slice '>"
                 "<line x2='10' y2='10'/></symbol>"
                 "<use href='#a' width='40' height='20'/><use href='#b' width='50' height='20'/>"
                 "<use href='#a' width='50%%' height='100%%'/></svg>",
                 head);
        CURVES("par.svg", doc, GROVE_CURVES_SVG, 3, deg, cp, 0);
    }
    {
        /* nested <svg>: content moved to x y and its viewBox fitted into its width and height
         * (default: the enclosing viewport); a size of 0 draws nothing; % of the viewport */
        const int deg[] = {1, 1, 1, 1, 1};
        const double cp[] = {10, 20, 40, 50, 0, 0, 0, 0,  5, 5, 6, 5, 0, 0, 0, 0,
                             25, 0, 75, 50, 0, 0, 0, 0,   10, 25, 12, 25, 0, 0, 0, 0,
                             10, 20, 13, 23, 0, 0, 0, 0};
        snprintf(doc, sizeof doc,
                 "%s<svg x='10' y='20' width='30' height='30' viewBox='0 0 10 10'>"
                 "<line x2='10' y2='10'/></svg><svg x='5' y='5'><line x2='1'/></svg>"
                 "<svg viewBox='0 0 10 10'><line x2='10' y2='10'/></svg>"
                 "<svg width='0' height='5'><line x2='1'/></svg>"
                 "<svg x='10%%' y='50%%' viewBox='0 0 50 25'><line x2='1'/></svg>"
                 "<svg x='10' y='20' width='30' height='30' viewBox='0 0 10 10'>"
                 "<svg width='1' height='1' viewBox='0 0 1 1'><line x2='1' y2='1'/></svg></svg>"
                 "</svg>",
                 head);
        CURVES("nested.svg", doc, GROVE_CURVES_SVG, 5, deg, cp, 0);
    }
    {
        /* a root size that is a percentage of the page, or does not parse, is no error (it is
         * only needed for percentages); a use of a <clipPath> or <defs> draws nothing (only a
         * <symbol> is drawn through one); content not drawn is not read; href wins over
         * xlink:href; display is the whole keyword none */
        const int deg[] = {1, 1, 1, 1, 1};
        const double cp[] = {0, 0, 1, 1, 0, 0, 0, 0,  5, 5, 6, 6, 0, 0, 0, 0,
                             0, 0, 1, 1, 0, 0, 0, 0,  5, 5, 6, 6, 0, 0, 0, 0,
                             7, 7, 8, 8, 0, 0, 0, 0};
        CURVES("rootpct.svg",
               "<svg width='100%' height='100%' viewBox='0 0 100'><clipPath id='c'><rect "
               "width='9' height='9'/></clipPath><defs id='d'><path d='M0 0 L9 9'/><g "
               "transform='spin(3)'><path d='M0 0 X'/></g></defs><use href='#c'/><use href='#d'/>"
               "<path id='a' d='M0 0 L1 1'/><path id='b' d='M5 5 L6 6'/>"
               "<use href='#b' xlink:href='#a' transform='translate(-5 -5)'/>"
               "<use xlink:href='#a' href='#b'/><path display=' nonesuch ' d='M7 7 L8 8'/>"
               "<path display=' none ' d='M7 7 L9 9'/></svg>",
               GROVE_CURVES_SVG, 5, deg, cp, 0);
    }
    {
        /* a nested <svg> drawn by a use keeps its own x and y; one size of 0 hides an <svg>
         * (in place or through a use) even when the other is not known; display is a keyword
         * in any case */
        const int deg[] = {1, 1};
        const double cp[] = {10, 20, 60, 70, 0, 0, 0, 0,  10, 20, 60, 70, 0, 0, 0, 0};
        CURVES("usesvg.svg",
               "<svg viewBox='0 0 100 100'><defs><svg id='s' x='10' y='20' viewBox='0 0 10 10' "
               "width='50' height='50'><path d='M0 0L10 10'/></svg><svg id='z' width='0' "
               "height='40'><path d='M0 0L1 1'/></svg></defs><use href='#s'/><use href='#z'/>"
               "<svg x='10' y='20' viewBox='0 0 10 10' width='50' height='50'><path "
               "d='M0 0L10 10'/></svg><path display='NONE' d='M0 0 L1 1'/></svg>",
               GROVE_CURVES_SVG, 2, deg, cp, 0);
        CURVES("zerosvg.svg", "<svg><svg width='0'><path d='M0 0 X'/></svg></svg>",
               GROVE_CURVES_SVG, 0, NULL, NULL, 0);
    }
    {
        /* display in the style attribute: it overrides the display attribute; the last
         * declaration wins, an !important one over those without; names and keywords in any
         * case; comments, quotes and parentheses do not split declarations; a declaration
         * without ':' or with another value hides nothing; a hidden element drawn by a use
         * stays hidden */
        const int deg[] = {1, 1, 1, 1, 1, 1, 1};
        const double cp[] = {2, 2, 3, 3, 0, 0, 0, 0,    4, 4, 5, 5, 0, 0, 0, 0,
                             6, 6, 7, 7, 0, 0, 0, 0,    8, 8, 9, 9, 0, 0, 0, 0,
                             10, 10, 11, 11, 0, 0, 0, 0, 12, 12, 13, 13, 0, 0, 0, 0,
                             14, 14, 15, 15, 0, 0, 0, 0};
        CURVES("style.svg",
               "<svg><g style='display:none'><path d='M0 0 L1 1'/></g>"
               "<path style='fill:red; DISPLAY : None ;stroke:blue' d='M0 0 L1 2'/>"
               "<path style='display:none;display:inline' d='M2 2 L3 3'/>"
               "<path style='display:none ! IMPORTANT;display:inline' d='M0 0 L1 3'/>"
               "<path display='none' style='display:inline' d='M4 4 L5 5'/>"
               "<path display='none' style='fill:none' d='M0 0 L1 4'/>"
               "<path style='/* display:none */ fill:none' d='M6 6 L7 7'/>"
               "<path style=\"font-family:'a;display:none'\" d='M8 8 L9 9'/>"
               "<path style='background:url(a;display:none)' d='M10 10 L11 11'/>"
               "<path style='display;display' d='M12 12 L13 13'/>"
               "<path style='display:nonesuch' d='M14 14 L15 15'/>"
               "<path id='h' style='display: none' d='M0 0 L1 5'/><use href='#h'/>"
               "<path style='display:none/*x*/' d='M0 0 L1 6'/></svg>",
               GROVE_CURVES_SVG, 7, deg, cp, 0);
    }
    {
        /* visibility (attribute and style declaration, the declaration winning): hidden and
         * collapse hide a path or shape, which is then not read either (the broken data below
         * gives no error); the content inherits it unless it says visible; inherit and values
         * not known keep the inherited one; !important; a use's content inherits the use's */
        const int deg[] = {1, 1, 1, 1, 1};
        const double cp[] = {2, 2, 3, 3, 0, 0, 0, 0, 4, 4, 5, 5, 0, 0, 0, 0,
                             6, 6, 7, 7, 0, 0, 0, 0, 8, 8, 9, 9, 0, 0, 0, 0,
                             8, 8, 9, 9, 0, 0, 0, 0};
        CURVES("visibility.svg",
               "<svg><path visibility='hidden' d='M0 0 L1 1'/>"
               "<path style='fill:red;visibility:hidden' d='M0 0 L1 2'/>"
               "<path visibility='hidden' style='visibility:visible' d='M2 2 L3 3'/>"
               "<g visibility='hidden'><path d='M0 0 L1 3'/>"
               "<path visibility='visible' d='M4 4 L5 5'/></g>"
               "<g style='visibility:collapse'><g><rect width='1' height='1'/></g></g>"
               "<path visibility=' HIDDEN ' d='M0 0 L1 5'/>"
               "<g visibility='hidden'><path visibility='inherit' d='M0 0 L1 6'/>"
               "<path visibility='bogus' d='M0 0 L1 7'/></g>"
               "<path style='visibility:hidden !important; visibility:visible' d='M0 0 L1 8'/>"
               "<path id='v' d='M6 6 L7 7'/><use href='#v' visibility='hidden'/>"
               "<g id='w' visibility='visible'><path d='M8 8 L9 9'/></g>"
               "<use href='#w' style='visibility:hidden'/>"
               "<path visibility='hidden' d='M0 0 X'/></svg>",
               GROVE_CURVES_SVG, 5, deg, cp, 0);
    }
    {
        /* visibility and <use>: content drawn by a use inherits the use's visibility, not that of
         * its ancestors where it stands (p inside a hidden group, drawn at x=5 by a visible use,
         * not by the use inside the hidden group); a use of a use; a symbol drawn by an
         * invisible use shows only what says visible; a symbol's own visibility */
        const int deg[] = {1, 1, 1, 1, 1, 1};
        const double cp[] = {5, 0, 6, 1, 0, 0, 0, 0, 2, 2, 3, 3, 0, 0, 0, 0,
                             0, 0, 1, 1, 0, 0, 0, 0, 10, 0, 11, 1, 0, 0, 0, 0,
                             0, 0, 1, 1, 0, 0, 0, 0, 20, 0, 21, 1, 0, 0, 0, 0};
        CURVES("visibility-use.svg",
               "<svg><g visibility='hidden'><path id='p' d='M0 0 L1 1'/>"
               "<use href='#p' x='9'/></g><use href='#p' x='5'/>"
               "<symbol id='s'><path d='M0 0 L1 9'/><path visibility='visible' d='M2 2 L3 3'/>"
               "</symbol><use href='#s' style='visibility:hidden'/>"
               "<symbol id='t' visibility='collapse'><path d='M0 0 L1 8'/></symbol>"
               "<use href='#t'/>"
               "<path id='q' d='M0 0 L1 1'/><use id='u' href='#q' x='10'/>"
               "<g visibility='hidden'><use href='#u' x='10'/></g>"
               "<use id='u2' visibility='visible' href='#q'/>"
               "<g visibility='hidden'><use href='#u2' x='20'/></g></svg>",
               GROVE_CURVES_SVG, 6, deg, cp, 0);
    }
    {
        /* display none is not undone by visible; an invisible group's or nested svg's
         * transform and position still move the visible content inside it */
        const int deg[] = {1, 1};
        const double cp[] = {10, 0, 11, 1, 0, 0, 0, 0, 22, 2, 23, 3, 0, 0, 0, 0};
        CURVES("visibility-display.svg",
               "<svg><g display='none'><path visibility='visible' d='M0 0 L1 1'/></g>"
               "<g style='display:none'><g visibility='visible'><rect width='1' height='1'/>"
               "</g></g><path visibility='visible' style='display:none' d='M0 0 L1 2'/>"
               "<g visibility='hidden' transform='translate(10 0)'>"
               "<path visibility='visible' d='M0 0 L1 1'/></g>"
               "<svg visibility='hidden' x='20'><path d='M0 0 L1 3'/>"
               "<path style='visibility:visible' d='M2 2 L3 3'/></svg></svg>",
               GROVE_CURVES_SVG, 2, deg, cp, 0);
    }
    /* paths and shapes are numbered drawn or not: the error names path 1 and rect 1 */
    BAD("visibility-no.svg",
        "<svg><path visibility='hidden' d='M0 0 X'/><path d='M0 0 Y'/></svg>",
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT, "path 1: command 'Y'", NULL);
    BAD("visibility-no2.svg",
        "<svg><rect visibility='hidden' width='x'/><rect width='y' height='1'/></svg>",
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT, "rect 1: width is not a length: 'y'", NULL);
    {
        /* CSS: a declaration with an invalid value is dropped, so the attribute or an earlier
         * declaration stands; initial is visible */
        const int deg[] = {1};
        const double cp[] = {0, 0, 1, 5, 0, 0, 0, 0};
        CURVES("visibility-invalid.svg",
               "<svg><path visibility='hidden' style='visibility:bogus' d='M0 0 L1 1'/>"
               "<path style='visibility:hidden;visibility:bogus' d='M0 0 L1 2'/>"
               "<path visibility='hidden' style='visibility:' d='M0 0 L1 3'/>"
               "<path style='visibility:hidden!important;visibility:x!important' d='M0 0 L1 4'/>"
               "<g visibility='hidden'><path style='visibility:initial' d='M0 0 L1 5'/></g>"
               "</svg>",
               GROVE_CURVES_SVG, 1, deg, cp, 0);
    }
    {
        /* a read that succeeds leaves no error message from the root's unreadable size */
        grove_curves c;
        write_file(path_in("rootmsg.svg"),
                   "<svg viewBox='0 0 1 x' width='10%' height='5'><path d='M0 0L1 1'/></svg>");
        CHECK_OK(ctx, grove_curves_read(ctx, path_in("rootmsg.svg"), GROVE_CURVES_SVG, &c));
        CHECK_MSG(strstr(grove_ctx_last_error(ctx), "rootmsg.svg") == NULL,
                  "a stale message after a good read: %s", grove_ctx_last_error(ctx));
        grove_curves_free(&c);
    }
    {
        /* the work of a use that draws nothing is counted too: a long symbol tag used with a
         * width of 0 by 2^31 uses of uses stops with the limit, not after hours */
        char *big = (char *)malloc(1 << 16);
        size_t o = 0;
        CHECK(big != NULL);
        if (big) {
            o += (size_t)snprintf(big + o, 4096, "<svg viewBox='0 0 10 10'><defs><symbol id='s' "
                                                 "viewBox='0 0 1 1'");
            for (int k = 0; k < 2000; k++) o += (size_t)snprintf(big + o, 64, " a%d=''", k);
            o += (size_t)snprintf(big + o, 4096, "/><g id='g0'><use href='#s' width='0'/>"
                                                 "<use href='#s' width='0'/></g>");
            for (int k = 1; k <= 30; k++)
                o += (size_t)snprintf(big + o, 4096,
                                      "<g id='g%d'><use href='#g%d'/><use href='#g%d'/></g>", k,
                                      k - 1, k - 1);
            snprintf(big + o, 4096, "</defs><use href='#g30'/></svg>");
            BAD("usebomb2.svg", big, GROVE_CURVES_SVG, GROVE_ERR_LIMIT, "draw more than", NULL);
            free(big);
        }
    }
    BAD("useg.svg", svg_wrap("<defs><g id='g' transform='rotate(1 2)'/></defs><use href='#g'/>"),
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "<g>, drawn by use 0: rotate takes 1 or 3 numbers, found 2", NULL);
    BAD("usepar2.svg",
        svg_wrap("<symbol id='s' viewBox='0 0 1 1' preserveAspectRatio='xMidYMid meet junk'/>"
                 "<use href='#s'/>"),
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT, "'junk' after the alignment and meet or slice",
        NULL);
    {
        /* uses of uses multiply what they draw: 31 levels of a group drawing the one below
         * twice would scan 2^31 copies of a small element; the reader stops past a budget */
        size_t o = (size_t)snprintf(doc, sizeof doc, "<svg><defs><g id='g0'/>");
        for (int k = 1; k <= 31; k++)
            o += (size_t)snprintf(doc + o, sizeof doc - o,
                                  "<g id='g%d'><use href='#g%d'/><use href='#g%d'/></g>", k,
                                  k - 1, k - 1);
        snprintf(doc + o, sizeof doc - o, "</defs><use href='#g31'/></svg>");
        BAD("usebomb.svg", doc, GROVE_CURVES_SVG, GROVE_ERR_LIMIT,
            "draw more than", "bytes of the file in all (uses of uses multiply what they draw)");
    }
    BAD("nestedvb.svg", "<svg><svg viewBox='0 0 1 1'><path d='M0 0H1'/></svg></svg>",
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "<svg>: a nested <svg> with a viewBox needs a width and height", NULL);
    /* the same curves as the element written out in place */
    expect_same(__LINE__,
                "<defs><g id='t' transform='rotate(30)'><circle cx='1' r='2'/><polygon "
                "points='0 0 1 1 2 0'/></g></defs><use href='#t' x='3' y='-1' "
                "transform='scale(2 1)'/>",
                "<g transform='scale(2 1) translate(3 -1) rotate(30)'><circle cx='1' r='2'/>"
                "<polygon points='0 0 1 1 2 0'/></g>");
    BAD("usemiss.svg", svg_wrap("<path id='p'/><use href='#p'/><use id='u' href='#nope'/>"), GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT, "use 1 (id \"u\"): no element has the id \"nope\"", NULL);
    BAD("hidnum.svg", svg_wrap("<defs><path d='M0 0 X'/></defs><path id='q' d='M0 0 Y'/>"),
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT, "path 1 (id \"q\"): command 'Y'", NULL);
    BAD("useext.svg", svg_wrap("<use href='other.svg#x'/>"), GROVE_CURVES_SVG,
        GROVE_ERR_BAD_INPUT,
        "use 0: only a reference inside the file ('#id') is read, not 'other.svg#x' "
        "(character 1 of href)", NULL);
    BAD("usecycle.svg", svg_wrap("<g id='a'><path d='M0 0 H1'/><use href='#a'/></g>"),
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "use, drawn by use 0: the element \"a\" holds this <use>: a reference cycle", NULL);
    BAD("usebad.svg",
        svg_wrap("<defs><path id='p' d='M0 0 X'/></defs><use href='#p'/><use href='#p'/>"),
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "path (id \"p\"), drawn by use 0: command 'X' is not supported", NULL);
    BAD("usevb.svg",
        "<svg><symbol id='s' viewBox='0 0 1 1'/><use href='#s' width='3'/></svg>",
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "use 0: \"s\" has a viewBox, and neither the <use> nor it gives a width and height", NULL);
    BAD("usepar.svg",
        svg_wrap("<symbol id='s' viewBox='0 0 1 1' preserveAspectRatio='xMidYMad'/>"
                 "<use href='#s'/>"),
        GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
        "unknown alignment 'xMidYMad' (none or xMinYMin ... xMaxYMax)", NULL);
    {
        /* a chain of uses, each drawing a group that holds the next: 32 deep is drawn, 33 is
         * refused (depth groups and the use that draws the first) */
        for (int depth = 31; depth <= 32; depth++) {
            size_t o = (size_t)snprintf(doc, sizeof doc, "%s<defs>", head);
            for (int k = 0; k < depth; k++)
                o += (size_t)snprintf(doc + o, sizeof doc - o,
                                      "<g id='g%d'><use href='#g%d' x='1'/></g>", k, k + 1);
            o += (size_t)snprintf(doc + o, sizeof doc - o,
                                  "<path id='g%d' d='M0 0 L1 0'/></defs><use href='#g0'/></svg>",
                                  depth);
            if (depth == 31) {
                const int deg[] = {1};
                const double cp[] = {31, 0, 32, 0, 0, 0, 0, 0};
                CURVES("chain.svg", doc, GROVE_CURVES_SVG, 1, deg, cp, 0);
            } else {
                BAD("chain2.svg", doc, GROVE_CURVES_SVG, GROVE_ERR_BAD_INPUT,
                    "references nested more than 32 deep", NULL);
            }
        }
    }
}

static void test_csv(uint64_t seed, size_t large)
{
    const size_t sizes[] = {0, 1, 31, 32, 33, 1000, large};
    tu_rng r = {seed};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        grove_polylines p;
        make_polylines(&r, sizes[i], i == 6 ? 8 : 40, &p);
        CHECK_OK(ctx, grove_polylines_write_csv(ctx, &p, path_in("out.csv")));
        check_csv(path_in("out.csv"), &p);
        free_polylines(&p);
    }
    {
        /* exact text for a small case: 9 significant digits, '.' decimal point */
        uint64_t off[] = {0, 2, 2, 3};
        float xy[] = {0.1f, -2.5f, 1e-20f, 3e30f, 16777216.0f, -0.0f};
        grove_polylines p = {3, 3, off, xy};
        char *t;
        CHECK_OK(ctx, grove_polylines_write_csv(ctx, &p, path_in("small.csv")));
        t = slurp(path_in("small.csv"), NULL);
        CHECK_MSG(t && strcmp(t, "curve,vertex,x,y\n0,0,0.100000001,-2.5\n0,1,9.99999968e-21,"
                                 "2.99999989e+30\n2,0,16777216,-0\n") == 0,
                  "small.csv is:\n%s", t ? t : "(none)");
        free(t);
    }
    {
        /* failures: the status, and the earlier file untouched, no temporary left */
        uint64_t off[] = {0, 2, 4}, bad_off[] = {0, 5, 4}, short_off[] = {0, 1, 3};
        float xy[] = {1, 2, 3, 4, 5, 6, 7, NAN};
        grove_polylines p = {2, 4, off, xy};
        char *before, *after;
        write_file(path_in("keep.csv"), "old contents\n");
        CHECK_STATUS(ctx, grove_polylines_write_csv(ctx, &p, path_in("keep.csv")),
                     GROVE_ERR_BAD_INPUT);
        CHECK(strstr(grove_ctx_last_error(ctx), "curve 1, vertex 1 is not finite") != NULL);
        p.offsets = bad_off;
        CHECK_STATUS(ctx, grove_polylines_write_csv(ctx, &p, path_in("keep.csv")),
                     GROVE_ERR_INVALID_ARG);
        CHECK(strstr(grove_ctx_last_error(ctx), "decreases at curve 1") != NULL);
        p.offsets = short_off;
        CHECK_STATUS(ctx, grove_polylines_write_csv(ctx, &p, path_in("keep.csv")),
                     GROVE_ERR_INVALID_ARG);
        p.offsets = NULL;
        CHECK_STATUS(ctx, grove_polylines_write_csv(ctx, &p, path_in("keep.csv")),
                     GROVE_ERR_INVALID_ARG);
        p.offsets = off;
        p.xy = NULL;
        CHECK_STATUS(ctx, grove_polylines_write_csv(ctx, &p, path_in("keep.csv")),
                     GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_polylines_write_csv(ctx, NULL, path_in("keep.csv")),
                     GROVE_ERR_INVALID_ARG);
        CHECK_STATUS(ctx, grove_polylines_write_csv(ctx, &p, NULL), GROVE_ERR_INVALID_ARG);
        before = slurp(path_in("keep.csv"), NULL);
        CHECK(before && strcmp(before, "old contents\n") == 0);
        free(before);
        p.xy = xy;
        xy[7] = 8;
        CHECK_STATUS(ctx, grove_polylines_write_csv(ctx, &p, path_in("no-such-dir/x.csv")),
                     GROVE_ERR_IO);
        CHECK(access(path_in("no-such-dir"), F_OK) != 0);
        CHECK_OK(ctx, grove_polylines_write_csv(ctx, &p, path_in("keep.csv")));
        after = slurp(path_in("keep.csv"), NULL);
        CHECK(after && strncmp(after, "curve,vertex,x,y\n0,0,1,2\n", 25) == 0);
        free(after);
        CHECK(count_tmp_files() == 0);
    }
}

/* strstr without ASan's interceptor, which measures the whole text at every call and makes
 * repeated searches through a large picture quadratic. */
static const char *find(const char *t, const char *s)
{
    size_t m = strlen(s);
    for (; *t; t++)
        if (*t == *s && strncmp(t, s, m) == 0) return t;
    return NULL;
}

/* Counts occurrences of s in t. */
static size_t count_of(const char *t, const char *s)
{
    size_t n = 0;
    for (const char *p = find(t, s); p; p = find(p + 1, s)) n++;
    return n;
}

/* Every number in points="..." and d="..." attributes lies in the picture. */
static int coords_inside(const char *t, double w, double h)
{
    const char *p = t;
    while ((p = find(p, "points=\"")) != NULL) {
        char *e;
        p += 8;
        while (*p != '"') {
            double x = strtod(p, &e), y;
            if (e == p || *e != ',') return 0;
            y = strtod(e + 1, &e);
            if (x < 0 || x > w || y < 0 || y > h) return 0;
            p = e;
            while (*p == ' ') p++;
        }
    }
    return 1;
}

static void test_svg_writer(uint64_t seed)
{
    tu_rng r = {seed};
    {
        /* one rising line: y up in the data is y down in pixels */
        uint64_t off[] = {0, 3};
        float xy[] = {0, 0, 1, 1, 2, 2};
        float cp[8] = {0, 0, 1, 1, 2, 2, 0, 0};
        uint8_t dg[1] = {2};
        grove_polylines p = {1, 3, off, xy};
        grove_curves c = {cp, dg, 1};
        char *t;
        double x0, y0, x1, y1;
        const char *head = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"300\"";
        CHECK_OK(ctx, grove_polylines_write_svg(ctx, &p, &c, 400, 300, path_in("one.svg")));
        t = slurp(path_in("one.svg"), NULL);
        CHECK(t && strncmp(t, head, strlen(head)) == 0);
        CHECK(t && strstr(t, "</svg>\n") != NULL);
        CHECK(t && count_of(t, "<polyline") == 2); /* the curve and its control polygon */
        CHECK(t && strstr(t, "stroke-dasharray") != NULL);
        CHECK(t && coords_inside(t, 400, 300));
        if (t) {
            const char *pl = strstr(t, "stroke=\"#1d4f91\"");
            pl = pl ? strstr(pl, "points=\"") : NULL;
            CHECK(pl && sscanf(pl, "points=\"%lf,%lf %*f,%*f %lf,%lf", &x0, &y0, &x1, &y1) == 4 &&
                  x1 > x0 && y1 < y0);
        }
        free(t);
        /* the same picture read back as curves: the reader sees no <path> but the dots */
        CHECK_OK(ctx, grove_polylines_write_svg(ctx, &p, NULL, 400, 300, path_in("one.svg")));
        t = slurp(path_in("one.svg"), NULL);
        CHECK(t && count_of(t, "<polyline") == 1 && !strstr(t, "dasharray"));
        free(t);
        CHECK_STATUS(ctx, grove_polylines_write_svg(ctx, &p, NULL, 8, 300, path_in("x.svg")),
                     GROVE_ERR_INVALID_ARG);
        c.n = 2;
        CHECK_STATUS(ctx, grove_polylines_write_svg(ctx, &p, &c, 400, 300, path_in("x.svg")),
                     GROVE_ERR_INVALID_ARG);
        c.n = 1;
        dg[0] = 4;
        CHECK_STATUS(ctx, grove_polylines_write_svg(ctx, &p, &c, 400, 300, path_in("x.svg")),
                     GROVE_ERR_INVALID_ARG);
        dg[0] = 2;
        cp[3] = NAN;
        CHECK_STATUS(ctx, grove_polylines_write_svg(ctx, &p, &c, 400, 300, path_in("x.svg")),
                     GROVE_ERR_BAD_INPUT);
        CHECK(strstr(grove_ctx_last_error(ctx), "curve 0 has a non-finite control point"));
        xy[3] = INFINITY;
        CHECK_STATUS(ctx, grove_polylines_write_svg(ctx, &p, NULL, 400, 300, path_in("x.svg")),
                     GROVE_ERR_BAD_INPUT);
        CHECK(access(path_in("x.svg"), F_OK) != 0);
    }
    {
        /* degenerate: every vertex the same point; no curves at all */
        uint64_t off[] = {0, 2}, off0[] = {0};
        float xy[] = {5, 5, 5, 5};
        grove_polylines p = {1, 2, off, xy}, e = {0, 0, off0, NULL};
        char *t;
        CHECK_OK(ctx, grove_polylines_write_svg(ctx, &p, NULL, 100, 100, path_in("pt.svg")));
        t = slurp(path_in("pt.svg"), NULL);
        CHECK(t && coords_inside(t, 100, 100) && count_of(t, "<polyline") == 1);
        free(t);
        CHECK_OK(ctx, grove_polylines_write_svg(ctx, &e, NULL, 100, 100, path_in("none.svg")));
        t = slurp(path_in("none.svg"), NULL);
        CHECK(t && count_of(t, "<polyline") == 0 && strstr(t, "</svg>"));
        free(t);
    }
    {
        /* past the cap: a deterministic sample, said in a comment */
        grove_polylines p;
        char *t;
        size_t drawn;
        make_polylines(&r, 450000, 3, &p);
        CHECK_OK(ctx, grove_polylines_write_svg(ctx, &p, NULL, 1000, 800, path_in("big.svg")));
        t = slurp(path_in("big.svg"), NULL);
        drawn = 0;
        for (size_t c = 0; c < p.n_curves; c += 3) drawn += p.offsets[c + 1] > p.offsets[c];
        CHECK(t && strstr(t, "<!-- sampled: 1 curve in 3 is drawn (150000 of 450000 curves"));
        CHECK_MSG(t && count_of(t, "<polyline") == drawn, "%zu polylines, want %zu",
                  t ? count_of(t, "<polyline") : 0, drawn);
        CHECK(t && coords_inside(t, 1000, 800));
        free(t);
        free_polylines(&p);
    }
    CHECK(count_tmp_files() == 0);
}

int main(int argc, char **argv)
{
    tu_args a = {NULL, 200000, 7, NULL};
    if (tu_parse_args(argc, argv, &a) != 0) {
        fprintf(stderr, "usage: test_bezier_io [--seed S] [--large N]\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s/grove-bezier-io.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    if (grove_ctx_create(NULL, &ctx) != GROVE_OK) {
        fprintf(stderr, "cannot create a CPU context\n");
        return 2;
    }
    test_text();
    {
        const size_t sizes[] = {1, 31, 32, 33, 4097};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            test_text_random(a.seed + i, sizes[i]);
        test_text_random(a.seed + 99, a.large);
    }
    test_svg_commands();
    test_svg_errors();
    test_svg_transforms();
    test_svg_xml();
    test_svg_random(a.seed, 1, 1);
    test_svg_random(a.seed + 1, 33, 31);
    test_svg_random(a.seed + 2, 2, 40000);
    test_svg_arcs();
    test_svg_arc_errors();
    test_svg_arcs_random(a.seed + 1000, 1, 1);
    test_svg_arcs_random(a.seed + 1001, 1, 33);
    test_svg_arcs_random(a.seed + 1002, 40, 50);
    test_svg_shapes(a.seed + 2000);
    test_svg_shape_errors();
    test_svg_use();
    test_svg_style_sheets();
    test_csv(a.seed, a.large);
    test_svg_writer(a.seed);
    grove_ctx_destroy(ctx);
    if (!tu_failures) {
        /* leave the files for a look when something failed */
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL)
            if (e->d_name[0] != '.') unlink(path_in(e->d_name));
        if (d) closedir(d);
        rmdir(dir);
    } else {
        fprintf(stderr, "files kept in %s\n", dir);
    }
    return tu_finish("test_bezier_io");
}
