/*
 * test_io.c - point-file readers and writer: text (CSV, whitespace) and PLY (ascii, binary LE
 * and BE). Files are written into a fresh directory under $TMPDIR (or /tmp) and read back;
 * every bad-input case checks the exact status and message, with the float reader
 * (grove_points_read) and the double one (grove_points64_read) unless the case is about one
 * precision's range. The double reader's values are checked against strtod in the C locale.
 *
 * Usage: test_io [--large N] [--floats-stride S [--floats-offset O]]
 *   --large N          points for the large round trips (default 2000000)
 *   --floats-stride S  the float formatter is compared with printf on every S-th 32-bit pattern
 *                      (default 4099; 1 checks all 2^32, about half an hour on one core),
 *                      starting at O (default 0; so that several processes can share the work)
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "grove/io.h"
#include "testutil.h"
#include "tu_files.h"

static grove_ctx *ctx;

/* io_internal.h: the text writers' float formatting (%.9g, '.' as the decimal point). */
size_t grove__format_float(char *dst, float v);

/* ---- files ---- */

static void put_text(const char *name, const char *s) { put_file(name, s, strlen(s)); }

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Number of directory entries whose name contains `part`. */
static int count_entries(const char *part)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, part)) n++;
    closedir(d);
    return n;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

/* ---- checks ---- */

/* Reads `name` with the float reader (f64 = 0; want is float[n * dims]) or the double one
 * (f64 = 1; want is double[n * dims]) and compares bit for bit (floats widened exactly). */
static void expect_read(const char *name, grove_point_format fmt, int dims_req, int want_dims,
                        int f64, const void *want, size_t n, int line)
{
    grove_points p = {NULL, 123, 7};
    grove_points64 q = {NULL, 123, 7};
    const char *which = f64 ? "double" : "float";
    grove_status s = f64 ? grove_points64_read(ctx, path_of(name), fmt, dims_req, &q)
                         : grove_points_read(ctx, path_of(name), fmt, dims_req, &p);
    size_t got_n = f64 ? q.n : p.n;
    int got_dims = f64 ? q.dims : p.dims, got_null = f64 ? q.xyz == NULL : p.xyz == NULL;
    if (s != GROVE_OK) {
        fprintf(stderr, "test_io.c:%d: reading %s (%s): %s: %s\n", line, name, which,
                grove_status_string(s), grove_ctx_last_error(ctx));
        tu_failures++;
        return;
    }
    CHECK_MSG(got_n == n && got_dims == want_dims,
              "line %d, %s (%s): n %zu dims %d, want n %zu "
              "dims %d",
              line, name, which, got_n, got_dims, n, want_dims);
    if (got_n == n && got_dims == want_dims) {
        CHECK_MSG((n == 0) == got_null, "line %d, %s (%s): xyz NULL %d with n %zu", line, name,
                  which, got_null, n);
        for (size_t i = 0; i < n * (size_t)want_dims; i++) {
            double g = f64 ? q.xyz[i] : (double)p.xyz[i];
            double w = f64 ? ((const double *)want)[i] : (double)((const float *)want)[i];
            if (dbits(g) != dbits(w)) {
                CHECK_MSG(0,
                          "line %d, %s (%s): value %zu (point %zu) is %.17g (0x%016llx), want "
                          "%.17g (0x%016llx)",
                          line, name, which, i, i / (size_t)want_dims, g,
                          (unsigned long long)dbits(g), w, (unsigned long long)dbits(w));
                break;
            }
        }
    }
    grove_points_free(&p);
    grove_points64_free(&q);
    CHECK(p.xyz == NULL && p.n == 0 && p.dims == 0 && q.xyz == NULL && q.n == 0 && q.dims == 0);
}

static void expect_points(const char *name, grove_point_format fmt, int dims_req, int want_dims,
                          const float *want, size_t n, int line)
{
    expect_read(name, fmt, dims_req, want_dims, 0, want, n, line);
}

static void expect_points64(const char *name, grove_point_format fmt, int dims_req, int want_dims,
                            const double *want, size_t n, int line)
{
    expect_read(name, fmt, dims_req, want_dims, 1, want, n, line);
}

/* Reads with the float (EXPECT) or double (EXPECT64) reader and compares with the values
 * listed, an array literal of that type. */
#define EXPECT_AS(type, f64, name, fmt, dreq, dims, ...)                                           \
    do {                                                                                           \
        const type w_[] = {__VA_ARGS__};                                                           \
        expect_read(name, fmt, dreq, dims, f64, w_, sizeof w_ / sizeof w_[0] / (size_t)(dims),     \
                    __LINE__);                                                                     \
    } while (0)
#define EXPECT(...) EXPECT_AS(float, 0, __VA_ARGS__)
#define EXPECT64(...) EXPECT_AS(double, 1, __VA_ARGS__)

/* Which readers an error case applies to. */
enum { R_FLOAT = 1, R_DOUBLE = 2, R_BOTH = 3 };

/* Reading `name` fails with status `want` and the message `fmt_msg` with "@" replaced by the
 * file's full path, with each reader of `readers`. */
static void expect_error(const char *name, grove_point_format fmt, int dims, grove_status want,
                         const char *msg, int readers, int line)
{
    char full[2048];
    const char *at = strchr(msg, '@');
    if (at)
        snprintf(full, sizeof full, "%.*s%s%s", (int)(at - msg), msg, path_of(name), at + 1);
    else
        snprintf(full, sizeof full, "%s", msg);
    for (int r = R_FLOAT; r <= R_DOUBLE; r *= 2) {
        grove_points p = {(float *)&p, 5, 2};
        grove_points64 q = {(double *)&q, 5, 2};
        const char *which = r == R_FLOAT ? "float" : "double";
        grove_status s;
        int emptied;
        if (!(readers & r)) continue;
        grove_ctx_clear_error(ctx);
        if (r == R_FLOAT)
            s = grove_points_read(ctx, path_of(name), fmt, dims, &p);
        else
            s = grove_points64_read(ctx, path_of(name), fmt, dims, &q);
        CHECK_MSG(s == want, "line %d, %s (%s): status %d (%s), want %d (%s); message: %s", line,
                  name, which, (int)s, grove_status_string(s), (int)want, grove_status_string(want),
                  grove_ctx_last_error(ctx));
        CHECK_MSG(strcmp(grove_ctx_last_error(ctx), full) == 0,
                  "line %d, %s (%s):\n    message \"%s\"\n    want    \"%s\"", line, name, which,
                  grove_ctx_last_error(ctx), full);
        emptied = r == R_FLOAT ? p.xyz == NULL && p.n == 0 && p.dims == 0
                               : q.xyz == NULL && q.n == 0 && q.dims == 0;
        CHECK_MSG(emptied, "line %d (%s): *out not emptied on failure", line, which);
        if (p.xyz != (float *)&p) grove_points_free(&p);
        if (q.xyz != (double *)&q) grove_points64_free(&q);
    }
}

#define EXPECT0(name, fmt, dreq, dims)                                                             \
    do {                                                                                           \
        expect_points(name, fmt, dreq, dims, NULL, 0, __LINE__);                                   \
        expect_points64(name, fmt, dreq, dims, NULL, 0, __LINE__);                                 \
    } while (0)

/* Both readers; _F the float reader only (float range); _64 the double reader only. */
#define EXPECT_ERR(name, fmt, dims, st, msg)                                                       \
    expect_error(name, fmt, dims, st, msg, R_BOTH, __LINE__)
#define EXPECT_ERR_F(name, fmt, dims, st, msg)                                                     \
    expect_error(name, fmt, dims, st, msg, R_FLOAT, __LINE__)
#define EXPECT_ERR64(name, fmt, dims, st, msg)                                                     \
    expect_error(name, fmt, dims, st, msg, R_DOUBLE, __LINE__)
#define TXT GROVE_POINTS_TEXT
#define PLY GROVE_POINTS_PLY
#define AUTO GROVE_POINTS_AUTO

/* ---- text ---- */

static void test_text_ok(void)
{
    put_text("h.csv", "x,y\n1,2\n3.5,-4e2\n");
    EXPECT("h.csv", AUTO, 0, 2, 1, 2, 3.5f, -400);
    put_text("nh.csv", "1,2\n3.5,-4e2\n");
    EXPECT("nh.csv", AUTO, 0, 2, 1, 2, 3.5f, -400);
    /* Header decides dims=0: z named -> 3, any other third name -> 2. */
    put_text("hz.csv", "X,Y,Z\n1,2,3\n4,5,6\n");
    EXPECT("hz.csv", AUTO, 0, 3, 1, 2, 3, 4, 5, 6);
    put_text("hq.csv", "\"x\",\"y\",\"z\"\n1,2,3\n");
    EXPECT("hq.csv", AUTO, 0, 3, 1, 2, 3);
    put_text("hi.csv", "x,y,intensity\n1,2,3\n4,5,6\n");
    EXPECT("hi.csv", AUTO, 0, 2, 1, 2, 4, 5);
    EXPECT("hi.csv", AUTO, 3, 3, 1, 2, 3, 4, 5, 6);
    /* Without a header the first row decides: a numeric third field makes it 3-D. */
    put_text("w.xyz", "1\t2\t3\n  4 5 6  \n\t7  8\t 9\n");
    EXPECT("w.xyz", AUTO, 0, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9);
    EXPECT("w.xyz", AUTO, 2, 2, 1, 2, 4, 5, 7, 8);
    put_text("lab.txt", "1 2 abc\n3 4 def\n");
    EXPECT("lab.txt", AUTO, 0, 2, 1, 2, 3, 4);
    /* Extra columns are ignored, whatever they hold; empty ones too. */
    put_text("extra.csv", "1,2,3,4,5,hello\n6,7,8,,x,\n9,10,11,12\n");
    EXPECT("extra.csv", AUTO, 2, 2, 1, 2, 6, 7, 9, 10);
    EXPECT("extra.csv", AUTO, 0, 3, 1, 2, 3, 6, 7, 8, 9, 10, 11);
    put_text("trail.csv", "1,2,\n3,4,\n");
    EXPECT("trail.csv", AUTO, 0, 2, 1, 2, 3, 4);
    /* Mixed separators and blanks around commas. */
    put_text("mix.txt", "1 , 2\n3,4 5\n 6 ,\t7,8\n");
    EXPECT("mix.txt", AUTO, 0, 2, 1, 2, 3, 4, 6, 7);
    EXPECT("mix.txt", AUTO, 2, 2, 1, 2, 3, 4, 6, 7);
    /* CRLF, and no newline at the end. */
    put_text("crlf.csv", "x,y\r\n1,2\r\n3,4\r\n");
    EXPECT("crlf.csv", AUTO, 0, 2, 1, 2, 3, 4);
    put_text("crlf2.csv", "1 2 3\r\n4 5 6");
    EXPECT("crlf2.csv", AUTO, 0, 3, 1, 2, 3, 4, 5, 6);
    put_text("nonl.csv", "1,2\n3,4");
    EXPECT("nonl.csv", AUTO, 0, 2, 1, 2, 3, 4);
    /* Comments and blank lines anywhere; a '#' line before the header is not the header. */
    put_text("cm.txt", "# x y z\n\n   \n\t\r\nx y\n# 9 9\n1 2\n\n  # 8 8\n3 4\n\n");
    EXPECT("cm.txt", AUTO, 0, 2, 1, 2, 3, 4);
    /* UTF-8 byte order mark before a data row and before a header. */
    put_text("bom.csv", "\xEF\xBB\xBF"
                        "1,2\n3,4\n");
    EXPECT("bom.csv", AUTO, 0, 2, 1, 2, 3, 4);
    put_text("bomh.csv", "\xEF\xBB\xBF"
                         "x,y\n3,4\n");
    EXPECT("bomh.csv", AUTO, 0, 2, 3, 4);
    /* Number syntax. */
    put_text("num.csv", "+1,-.5\n5.,1e3\n1E-3,007\n1.5e+2,-2.5E-1\n00.000,-0\n");
    EXPECT("num.csv", AUTO, 0, 2, 1, -0.5f, 5, 1000, 1e-3f, 7, 150, -0.25f, 0.0f, -0.0f);
    /* Empty and header-only files: no points, not an error. */
    put_text("empty.csv", "");
    EXPECT0("empty.csv", AUTO, 0, 2);
    EXPECT0("empty.csv", AUTO, 3, 3);
    put_text("blank.txt", "\n\n  \n# only a comment\n");
    EXPECT0("blank.txt", AUTO, 0, 2);
    put_text("honly.csv", "x,y,z\n");
    EXPECT0("honly.csv", AUTO, 0, 3);
    put_text("honly2.csv", "x,y");
    EXPECT0("honly2.csv", AUTO, 0, 2);
    /* AUTO on an unknown extension sniffs: text here, PLY further down. */
    put_text("pts.dat", "1 2\n");
    EXPECT("pts.dat", AUTO, 0, 2, 1, 2);
    EXPECT("pts.dat", TXT, 0, 2, 1, 2);
    put_text("PTS.CSV", "1 2\n");
    EXPECT("PTS.CSV", AUTO, 0, 2, 1, 2);
}

/* Values at the edges of float range read exactly as strtof rounds them. */
static void test_text_extremes(void)
{
    static const char *vals[] = {"1e30",
                                 "-1e30",
                                 "1e-30",
                                 "-1e-30",
                                 "3.40282347e38",
                                 "-3.40282347e38",
                                 "3.4028235677973366e38",
                                 "1.17549435e-38",
                                 "1.4e-45",
                                 "7e-46",
                                 "1e-50",
                                 "0.1",
                                 "16777217",
                                 "16777219",
                                 "123456789012",
                                 "0.000000000000000000000000000000000000000000000000001e51",
                                 "100000000000000000000000000000000000000000000000000e-51",
                                 "2.5e-1",
                                 "-0.0"};
    size_t n = sizeof vals / sizeof vals[0], i;
    char text[4096] = "";
    float want[64];
    for (i = 0; i < n; i++) {
        strcat(text, vals[i]);
        strcat(text, i % 2 ? "\n" : ",");
        want[i] = strtof(vals[i], NULL);
    }
    if (n % 2) {
        strcat(text, "0\n");
        want[n++] = 0;
    }
    put_text("ext.csv", text);
    expect_points("ext.csv", AUTO, 2, 2, want, n / 2, __LINE__);
    CHECK(want[0] == 1e30f && want[2] == 1e-30f && want[5] == -FLT_MAX && want[10] == 0.0f);
    CHECK(want[6] == FLT_MAX); /* rounds down to FLT_MAX, so accepted */
}

/* The writers' float formatting gives printf's %.9g bytes (in the C locale) for every value
 * checked, and reads back as the same float: special values, every power of ten with its
 * neighbours, the ends of %g's fixed range, integers, and every stride-th 32-bit pattern. */
static int format_matches(float v, uint64_t *bad)
{
    char got[48], want[48];
    const size_t n = grove__format_float(got, v);
    if (isnan(v))
        strcpy(want, "nan");
    else
        snprintf(want, sizeof want, "%.9g", (double)v);
    if (n == strlen(got) && strcmp(got, want) == 0) return 1;
    if (++*bad <= 5)
        CHECK_MSG(0, "format_float(%a) gave \"%s\" (%zu bytes), printf \"%s\"", (double)v, got,
                  n, want);
    return 0;
}

static void test_format_float(uint64_t stride, uint64_t offset)
{
    uint64_t bad = 0, checked = 0;
    static const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, 0.5f, 1e-4f, 9.99999975e-5f,
                                    1e-5f, 99999999.0f, 1e8f, 999999999.0f, 1e9f, 4294967296.0f,
                                    FLT_MIN, -FLT_MIN, FLT_TRUE_MIN, FLT_MAX, -FLT_MAX,
                                    16777216.0f, 16777217.0f, 3.14159274f, 123456792.0f};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        checked++, format_matches(special[i], &bad);
    checked += 3;
    format_matches(INFINITY, &bad);
    format_matches(-INFINITY, &bad);
    format_matches(NAN, &bad);
    for (int e = -45; e <= 38; e++) {
        char lit[16];
        float p;
        snprintf(lit, sizeof lit, "1e%d", e);
        p = strtof(lit, NULL);
        for (int k = -3; k <= 3; k++) {
            float q = p;
            for (int j = 0; j < (k < 0 ? -k : k); j++) q = nextafterf(q, k < 0 ? 0.0f : FLT_MAX);
            checked += 2;
            format_matches(q, &bad);
            format_matches(-q, &bad);
            checked++, format_matches(q * 5.0f, &bad); /* x.5 ties at 9 digits and beyond */
        }
    }
    for (int i = 0; i <= 200000; i++) checked++, format_matches((float)i * 0.5f, &bad);
    for (uint64_t b = offset; b < ((uint64_t)1 << 32); b += stride) {
        const uint32_t u = (uint32_t)b;
        float v;
        memcpy(&v, &u, sizeof v);
        checked++;
        if (format_matches(v, &bad) && isfinite(v)) {
            char t[48];
            grove__format_float(t, v);
            const float r = strtof(t, NULL);
            if (memcmp(&r, &v, sizeof r) != 0 && ++bad <= 5)
                CHECK_MSG(0, "format_float(%a) = %s reads back as %a", (double)v, t, (double)r);
        }
    }
    CHECK_MSG(bad == 0, "format_float: %llu of %llu values differ from printf",
              (unsigned long long)bad, (unsigned long long)checked);
}

/* Numbers are read and written the same way in a locale whose decimal point is ','. */
static void test_locale(void)
{
    static const char *names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "de_DE", "fr_FR"};
    const char *got = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !got; i++)
        got = setlocale(LC_NUMERIC, names[i]);
    if (!got) {
        printf("test_io: no comma-decimal locale installed; locale check skipped\n");
        return;
    }
    {
        char t[32];
        snprintf(t, sizeof t, "%.1f", 1.5);
        CHECK_MSG(strcmp(t, "1,5") == 0, "locale %s prints 1.5 as %s", got, t);
    }
    /* short numbers (exact double arithmetic) and long ones (strtof) */
    put_text("loc.csv",
             "1.5,-2.25e1\n1.00000000000000000001,-0.1000000000000000055511151231257827\n");
    EXPECT("loc.csv", AUTO, 0, 2, 1.5f, -22.5f, 1.0f, -0.1f);
    EXPECT64("loc.csv", AUTO, 0, 2, 1.5, -22.5, 1.0, -0.1);
    put_text("loc64.csv", "4512345.123,-1.00000000000000011102230246251565404236316680908203126\n");
    EXPECT64("loc64.csv", AUTO, 0, 2, 4512345.123, -1.0000000000000002);
    {
        float xyz[4] = {1.25f, -0.1f, 3e-20f, 7};
        grove_points p = {xyz, 2, 2};
        CHECK_OK(ctx, grove_points_write(ctx, path_of("locw.csv"), AUTO, &p));
        EXPECT("locw.csv", AUTO, 0, 2, 1.25f, -0.1f, 3e-20f, 7);
    }
    setlocale(LC_NUMERIC, "C");
    EXPECT("locw.csv", AUTO, 0, 2, 1.25f, -0.1f, 3e-20f, 7);
}

static void test_text_errors(void)
{
    const grove_status BAD = GROVE_ERR_BAD_INPUT;
    char big[2048] = "x,y\n";
    for (int i = 2; i <= 16; i++) strcat(big, "1.5,2.5\n");
    strcat(big, "1,abc\n2,3\n");
    put_text("pts.csv", big);
    EXPECT_ERR("pts.csv", AUTO, 0, BAD, "@:17: column 2 is not a number: 'abc'");

    put_text("short.csv", "x,y\n1,2\n\n# c\n3,4\n5,6\n\n7,8\n9\n");
    EXPECT_ERR("short.csv", AUTO, 0, BAD, "@:9: row has 1 column, need 2");
    put_text("nan.csv", "1,2\n\n3,4\nnan,5\n");
    EXPECT_ERR("nan.csv", AUTO, 0, BAD, "@:4: NaN in column 1");
    put_text("nan2.csv", "1 2 3\n4 5 -NaN\n");
    EXPECT_ERR("nan2.csv", AUTO, 0, BAD, "@:2: NaN in column 3");
    EXPECT("nan2.csv", AUTO, 2, 2, 1, 2, 4, 5); /* z not read with dims = 2 */
    put_text("nan3.csv", "1,nan(0x7)\n");
    EXPECT_ERR("nan3.csv", AUTO, 0, BAD, "@:1: NaN in column 2");
    /* A first line spelled like NaN is a bad data row, not a header. */
    put_text("nanh.csv", "NAN,1\n2,3\n");
    EXPECT_ERR("nanh.csv", AUTO, 0, BAD, "@:1: NaN in column 1");
    put_text("inf.csv", "1,inf\n");
    EXPECT_ERR("inf.csv", AUTO, 0, BAD, "@:1: infinity in column 2");
    put_text("inf2.csv", "x,y\n-Infinity,1\n");
    EXPECT_ERR("inf2.csv", AUTO, 0, BAD, "@:2: infinity in column 1");
    put_text("big.csv", "1,2\n1e39,2\n");
    EXPECT_ERR_F("big.csv", AUTO, 0, BAD, "@:2: column 1 is out of float range: '1e39'");
    EXPECT64("big.csv", AUTO, 0, 2, 1, 2, 1e39, 2);
    put_text("big2.csv", "1,-3.5e38\n");
    EXPECT_ERR_F("big2.csv", AUTO, 0, BAD, "@:1: column 2 is out of float range: '-3.5e38'");
    EXPECT64("big2.csv", AUTO, 0, 2, 1, -3.5e38);
    put_text("big3.csv", "1,1e99999999999999999999\n");
    EXPECT_ERR_F("big3.csv", AUTO, 0, BAD,
                 "@:1: column 2 is out of float range: '1e99999999999999999999'");
    EXPECT_ERR64("big3.csv", AUTO, 0, BAD,
                 "@:1: column 2 is out of double range: '1e99999999999999999999'");
    put_text("empty2.csv", "1,,2\n");
    EXPECT_ERR("empty2.csv", AUTO, 0, BAD, "@:1: column 2 is empty");
    put_text("empty1.csv", ",1,2\n");
    EXPECT_ERR("empty1.csv", AUTO, 0, BAD, "@:1: column 1 is empty");
    put_text("empty3.csv", "1,\n");
    EXPECT_ERR("empty3.csv", AUTO, 0, BAD, "@:1: column 2 is empty");
    put_text("hex.csv", "1,0x1p3\n");
    EXPECT_ERR("hex.csv", AUTO, 0, BAD, "@:1: column 2 is not a number: '0x1p3'");
    static const char *bad[] = {"1.2.3", "1e",    "1e+", ".",   "+",    "-",   "1x",      "--1",
                                "1e5.5", "1_000", "e5",  "1e-", "0x10", "1d5", "infinite"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[64], msg[128];
        snprintf(text, sizeof text, "1 2\n3 %s\n", bad[i]);
        snprintf(msg, sizeof msg, "@:2: column 2 is not a number: '%s'", bad[i]);
        put_text("badnum.txt", text);
        EXPECT_ERR("badnum.txt", AUTO, 0, BAD, msg);
    }
    /* A decimal-comma file with ';' separators fails instead of being misread. */
    put_text("semi.csv", "1,5;2,5\n");
    EXPECT_ERR("semi.csv", AUTO, 0, BAD, "@:1: column 2 is not a number: '5;2'");
    /* A bad first field after a header. */
    put_text("bad1.csv", "x,y\n1.2.3,4\n");
    EXPECT_ERR("bad1.csv", AUTO, 0, BAD, "@:2: column 1 is not a number: '1.2.3'");
    put_text("bad0.csv", "-x,y\n");
    EXPECT_ERR("bad0.csv", AUTO, 0, BAD, "@:1: column 1 is not a number: '-x'");
    /* dims = 3 on a 2-D file, and 3-D rows that lose their z. */
    put_text("two.csv", "x,y\n1,2\n");
    EXPECT_ERR("two.csv", AUTO, 3, BAD, "@:2: row has 2 columns, need 3");
    put_text("three.csv", "1 2 3\n4 5\n");
    EXPECT_ERR("three.csv", AUTO, 0, BAD, "@:2: row has 2 columns, need 3");
    put_text("hz2.csv", "x,y,z\n1,2\n");
    EXPECT_ERR("hz2.csv", AUTO, 0, BAD, "@:2: row has 2 columns, need 3");
    /* Long and non-printable fields are cut and masked in the message. */
    put_text("long.csv", "1,aaaaaaaaaabbbbbbbbbbccccccccccddddddddddeeeeeeeeee\n");
    EXPECT_ERR("long.csv", AUTO, 0, BAD,
               "@:1: column 2 is not a number: 'aaaaaaaaaabbbbbbbbbbccccccccccdddddddddd...'");
    /* CR-only line ends: one line, and the CR inside it is no separator. */
    put_text("cr.csv", "1 2\r3 4\r");
    EXPECT_ERR("cr.csv", AUTO, 0, BAD, "@:1: column 2 is not a number: '2?3'");
    put_file("nul.csv",
             "1,2\n3,4\0"
             "5\n",
             10);
    EXPECT_ERR("nul.csv", AUTO, 0, BAD, "@:2: column 2 is not a number: '4?5'");
    /* A PLY file read as text. */
    put_text("ply.txt", "ply\nformat ascii 1.0\n");
    EXPECT_ERR("ply.txt", AUTO, 0, BAD, "@:2: column 1 is not a number: 'format'");

    /* A line over 1 MiB is an implementation limit. */
    {
        size_t n = (1u << 20) + 100;
        char *s = (char *)tu_malloc(n + 16);
        memset(s, '1', n);
        memcpy(s, "1 2\n3 ", 6);
        s[n] = '\n';
        put_file("longline.txt", s, n + 1);
        EXPECT_ERR("longline.txt", AUTO, 0, GROVE_ERR_LIMIT,
                   "@:2: line is longer than 1048576 bytes (is this a text file with '\\n' line "
                   "ends?)");
        /* Just under the limit is fine: 7 after a million leading zeros. */
        memset(s, '0', n);
        memcpy(s, "1 2\n3 ", 6);
        s[1000000] = '7';
        s[1000001] = '\n';
        put_file("longok.txt", s, 1000002);
        EXPECT("longok.txt", AUTO, 0, 2, 1, 2, 3, 7);
        free(s);
    }
}

static void test_args_and_io(void)
{
    grove_points p = {NULL, 0, 0};
    char want[2048];
    put_text("ok.csv", "1,2\n");
    CHECK_STATUS(NULL, grove_points_read(NULL, path_of("ok.csv"), AUTO, 0, &p),
                 GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(ctx, grove_points_read(ctx, NULL, AUTO, 0, &p), GROVE_ERR_INVALID_ARG);
    CHECK(strcmp(grove_ctx_last_error(ctx), "grove_points_read: path is NULL") == 0);
    CHECK_STATUS(ctx, grove_points_read(ctx, path_of("ok.csv"), AUTO, 0, NULL),
                 GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(ctx, grove_points_read(ctx, path_of("ok.csv"), (grove_point_format)3, 0, &p),
                 GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(ctx, grove_points_read(ctx, path_of("ok.csv"), (grove_point_format)-1, 0, &p),
                 GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(ctx, grove_points_read(ctx, path_of("ok.csv"), AUTO, 1, &p),
                 GROVE_ERR_INVALID_ARG);
    CHECK(strcmp(grove_ctx_last_error(ctx),
                 "grove_points_read: dims must be 0 (as in the file), 2 or 3, got 1") == 0);
    CHECK_STATUS(ctx, grove_points_read(ctx, path_of("ok.csv"), AUTO, 4, &p),
                 GROVE_ERR_INVALID_ARG);
    snprintf(want, sizeof want, "@: cannot open: %s", strerror(ENOENT));
    EXPECT_ERR("missing.csv", AUTO, 0, GROVE_ERR_IO, want);
    mkdir(path_of("sub.csv"), 0700);
    snprintf(want, sizeof want, "@: read error: %s", strerror(EISDIR));
    EXPECT_ERR("sub.csv", AUTO, 0, GROVE_ERR_IO, want);
    rmdir(path_of("sub.csv"));
    grove_points_free(NULL);
    grove_points_free(&p);
}

/* ---- PLY ---- */

enum { I8, U8, I16, U16, I32, U32, F32, F64, NTYPES };
static const char *const canon[] = {"char", "uchar", "short", "ushort",
                                    "int",  "uint",  "float", "double"};
static const char *const sized[] = {"int8",  "uint8",  "int16",   "uint16",
                                    "int32", "uint32", "float32", "float64"};
static const int tsize[] = {1, 1, 2, 2, 4, 4, 4, 8};

typedef struct buf {
    char *p;
    size_t n, cap;
    int fmt; /* 0 ascii, 1 LE, 2 BE */
    int col; /* values on the current ascii line */
} buf;

static void b_put(buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = 2 * (b->n + n) + 1024;
        b->p = (char *)realloc(b->p, b->cap);
        if (!b->p) exit(2);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void b_str(buf *b, const char *s) { b_put(b, s, strlen(s)); }

/* What the double reader must produce for the last value b_val appended. */
static double b_last64;

/* Appends one value of type t; returns the float the reader must produce for it (ascii values
 * are printed with enough digits, so the expected value is strtof of the printed text) and sets
 * b_last64 (a float property holds a float, so its value is the float's; a double one is
 * strtod of the text or the stored double; an integer is exact). */
static float b_val(buf *b, int t, double v)
{
    if (b->fmt == 0) {
        char s[64];
        if (t == F32)
            snprintf(s, sizeof s, "%.9g", (double)(float)v);
        else if (t == F64)
            snprintf(s, sizeof s, "%.17g", v);
        else
            snprintf(s, sizeof s, "%lld", (long long)v);
        if (b->col++) b_str(b, " ");
        b_str(b, s);
        b_last64 = t == F64 ? strtod(s, NULL) : t == F32 ? (double)strtof(s, NULL) : v;
        return strtof(s, NULL);
    }
    b_last64 = t == F32 ? (double)(float)v : v;
    {
        unsigned char by[8];
        uint64_t u = 0;
        int n = tsize[t];
        if (t == F32) {
            float f = (float)v;
            uint32_t w;
            memcpy(&w, &f, 4);
            u = w;
        } else if (t == F64) {
            memcpy(&u, &v, 8);
        } else {
            u = (uint64_t)(int64_t)v;
        }
        for (int i = 0; i < n; i++) {
            int sh = b->fmt == 1 ? 8 * i : 8 * (n - 1 - i);
            by[i] = (unsigned char)(u >> sh);
        }
        b_put(b, by, (size_t)n);
        return isfinite(v) && fabs(v) > 3.4028235e38 ? 0.0f : (float)v; /* no float for it */
    }
}

static void b_eol(buf *b)
{
    if (b->fmt == 0) b_str(b, "\n");
    b->col = 0;
}

static const char *fmt_line(int fmt)
{
    return fmt == 0   ? "format ascii 1.0\n"
           : fmt == 1 ? "format binary_little_endian 1.0\n"
                      : "format binary_big_endian 1.0\n";
}

/* Empties b and starts a PLY file of format fmt (1 LE, 2 BE) with the header lines `rest`. */
static void b_start(buf *b, int fmt, const char *rest)
{
    b->n = 0;
    b->fmt = fmt;
    b->col = 0;
    b_str(b, "ply\n");
    b_str(b, fmt_line(fmt));
    b_str(b, rest);
}

/* A random value that fits type t; floats sometimes large or tiny. */
static double rand_val(tu_rng *r, int t)
{
    uint32_t u = tu_u32(r);
    switch (t) {
    case I8: return (double)((int)(u & 0xFF) - 128);
    case U8: return (double)(u & 0xFF);
    case I16: return (double)((int)(u & 0xFFFF) - 32768);
    case U16: return (double)(u & 0xFFFF);
    case I32: return (double)(int32_t)u;
    case U32: return (double)u;
    default: {
        int k = (int)(tu_u32(r) % 8);
        double m = (double)tu_f32(r, -1.0f, 1.0f);
        if (k == 0) return m * 1e30;
        if (k == 1) return m * 1e-30;
        if (t == F64 && k == 2) return m * 1e-300; /* underflows to 0 or a subnormal */
        if (t == F64 && k == 3)                    /* UTM-like: needs all 53 bits */
            return 4512345.0 + (double)tu_u32(r) / 4294967296.0;
        return m * 1e4;
    }
    }
}

/* A face-like element: a list property and a scalar one, random counts (0 included). */
static void face_header(buf *b, const char *name, size_t count, int ct, int it)
{
    char h[256];
    snprintf(h, sizeof h,
             "element %s %zu\nproperty list %s %s vertex_indices\nproperty uchar flags\n", name,
             count, canon[ct], sized[it]);
    b_str(b, h);
}

static void face_body(buf *b, tu_rng *r, size_t count, int ct, int it)
{
    for (size_t i = 0; i < count; i++) {
        int k = (int)(tu_u32(r) % 6);
        b_val(b, ct, k);
        for (int j = 0; j < k; j++) b_val(b, it, rand_val(r, it));
        b_val(b, U8, tu_u32(r) & 0xFF);
        b_eol(b);
    }
}

/* Vertex element with x, y, z of the given types in shuffled positions among other
 * properties; with `list`, one list property inside the vertex element too. */
static void test_ply_case(int fmt, int tx, int ty, int tz, int three, int list, size_t n,
                          uint64_t seed)
{
    tu_rng r = {seed};
    buf b = {NULL, 0, 0, fmt, 0};
    int types[8], roles[8], np = 0, order = (int)(seed % 3);
    float *want = (float *)tu_malloc((n ? n : 1) * 3 * sizeof(float));
    double *want64 = (double *)tu_malloc((n ? n : 1) * 3 * sizeof(double));
    char name[64], h[256];
    size_t nf1 = tu_u32(&r) % 7, nf2 = tu_u32(&r) % 7;

    /* properties: red(uchar), then x/y/z in an order that never starts with x */
    types[np] = U8, roles[np++] = -1;
    if (order == 0) {
        types[np] = ty, roles[np++] = 1;
        if (three) types[np] = tz, roles[np++] = 2;
        types[np] = I16, roles[np++] = -1;
        types[np] = tx, roles[np++] = 0;
    } else if (order == 1) {
        if (three) types[np] = tz, roles[np++] = 2;
        types[np] = tx, roles[np++] = 0;
        types[np] = F64, roles[np++] = -1;
        types[np] = ty, roles[np++] = 1;
    } else {
        types[np] = tx, roles[np++] = 0;
        types[np] = ty, roles[np++] = 1;
        if (three) types[np] = tz, roles[np++] = 2;
    }
    if (list) types[np] = -1, roles[np++] = -1; /* list uchar int */
    types[np] = F32, roles[np++] = -1;

    b_str(&b, "ply\n");
    b_str(&b, fmt_line(fmt));
    b_str(&b, "comment made by test_io\nobj_info nothing\n");
    face_header(&b, "face", nf1, U8, I32);
    b_str(&b, "element material 2\nproperty double shininess\nproperty uint8 id\n");
    snprintf(h, sizeof h, "element vertex %zu\n", n);
    b_str(&b, h);
    for (int i = 0; i < np; i++) {
        static const char *nm[] = {"x", "y", "z"};
        if (types[i] < 0) {
            b_str(&b, "property list uchar int neighbours\n");
            continue;
        }
        snprintf(h, sizeof h, "property %s %s\n", (i & 1) ? sized[types[i]] : canon[types[i]],
                 roles[i] >= 0 ? nm[roles[i]]
                 : i == 0      ? "red"
                 : i == np - 1 ? "alpha"
                               : "other");
        b_str(&b, h);
    }
    b_str(&b, "comment between elements\n");
    face_header(&b, "edge", nf2, fmt == 0 ? U16 : I32, U16);
    b_str(&b, "end_header\n");

    face_body(&b, &r, nf1, U8, I32);
    for (int i = 0; i < 2; i++) {
        b_val(&b, F64, rand_val(&r, F64));
        b_val(&b, U8, i);
        b_eol(&b);
    }
    for (size_t i = 0; i < n; i++) {
        float v[3] = {0, 0, 0};
        double v64[3] = {0, 0, 0};
        for (int j = 0; j < np; j++) {
            if (types[j] < 0) {
                int k = (int)(tu_u32(&r) % 4);
                b_val(&b, U8, k);
                for (int m = 0; m < k; m++) b_val(&b, I32, (int32_t)tu_u32(&r));
            } else if (roles[j] >= 0) {
                v[roles[j]] = b_val(&b, types[j], rand_val(&r, types[j]));
                v64[roles[j]] = b_last64;
            } else {
                b_val(&b, types[j], rand_val(&r, types[j]));
            }
        }
        b_eol(&b);
        memcpy(want + i * (size_t)(three ? 3 : 2), v, (three ? 3 : 2) * sizeof(float));
        memcpy(want64 + i * (size_t)(three ? 3 : 2), v64, (three ? 3 : 2) * sizeof(double));
    }
    face_body(&b, &r, nf2, fmt == 0 ? U16 : I32, U16);

    snprintf(name, sizeof name, "case%d.ply", fmt);
    put_file(name, b.p, b.n);
    expect_points(name, AUTO, 0, three ? 3 : 2, want, n, __LINE__);
    expect_points64(name, AUTO, 0, three ? 3 : 2, want64, n, __LINE__);
    if (three) {
        /* dims = 2 keeps x and y */
        for (size_t i = 0; i < n; i++) {
            want[2 * i] = want[3 * i];
            want[2 * i + 1] = want[3 * i + 1];
            want64[2 * i] = want64[3 * i];
            want64[2 * i + 1] = want64[3 * i + 1];
        }
        expect_points(name, PLY, 2, 2, want, n, __LINE__);
        expect_points64(name, PLY, 2, 2, want64, n, __LINE__);
    }
    free(b.p);
    free(want);
    free(want64);
}

static void test_ply_ok(void)
{
    static const size_t sizes[] = {0, 1, 31, 32, 33, 1000};
    uint64_t seed = 1;
    for (int fmt = 0; fmt < 3; fmt++)
        for (int t = 0; t < NTYPES; t++)
            for (int list = 0; list < 2; list++) {
                size_t n = sizes[(size_t)(t + list + fmt) % 6];
                test_ply_case(fmt, t, (t + 3) % NTYPES, (t + 6) % NTYPES, 1, list, n, seed++);
                test_ply_case(fmt, (t + 5) % NTYPES, t, 0, 0, list, 77, seed++);
            }
    /* A CRLF header, blank header lines and AUTO sniffing without the .ply extension. */
    put_text("crlf.dat", "ply\r\nformat ascii 1.0\r\n\r\nelement vertex 2\r\nproperty float x\r\n"
                         "property float y\r\nend_header\r\n1 2\r\n\r\n3 4\r\n");
    EXPECT("crlf.dat", AUTO, 0, 2, 1, 2, 3, 4);
    /* ascii int properties at their limits */
    put_text("ints.ply", "ply\nformat ascii 1.0\nelement vertex 2\nproperty int x\n"
                         "property uint y\nproperty char z\nend_header\n"
                         "-2147483648 4294967295 -128\n2147483647 0 127\n");
    EXPECT("ints.ply", AUTO, 0, 3, -2147483648.0f, 4294967295.0f, -128, 2147483647.0f, 0, 127);
    /* Binary: doubles just above FLT_MAX that round to it are accepted. */
    {
        buf b = {NULL, 0, 0, 2, 0};
        b_str(&b, "ply\nformat binary_big_endian 1.0\nelement vertex 1\nproperty double x\n"
                  "property double y\nend_header\n");
        b_val(&b, F64, 3.4028235e38);
        b_val(&b, F64, -1e-300);
        put_file("edge.ply", b.p, b.n);
        EXPECT("edge.ply", AUTO, 0, 2, FLT_MAX, -0.0f);
        free(b.p);
    }
}

/* A small 2-D PLY with the given header body lines; used by the error tests. */
static void ply_text(const char *name, const char *s) { put_text(name, s); }

static void test_ply_errors(void)
{
    const grove_status BAD = GROVE_ERR_BAD_INPUT;
    buf b = {NULL, 0, 0, 1, 0};
    char msg[256];

    ply_text("magic.ply", "plx\nformat ascii 1.0\n");
    EXPECT_ERR("magic.ply", AUTO, 0, BAD,
               "@: header line 1: not a PLY file (the first line must be 'ply')");
    put_text("empty.ply", "");
    EXPECT_ERR("empty.ply", AUTO, 0, BAD,
               "@: header line 1: not a PLY file (the first line must be 'ply')");
    ply_text("fmt.ply", "ply\nformat binary_middle_endian 1.0\nelement vertex 0\n");
    EXPECT_ERR("fmt.ply", AUTO, 0, BAD,
               "@: header line 2: unsupported format 'binary_middle_endian'");
    ply_text("ver.ply", "ply\nformat ascii 2.0\n");
    EXPECT_ERR("ver.ply", AUTO, 0, BAD,
               "@: header line 2: unsupported format line (want 'format ascii 1.0', 'format "
               "binary_little_endian 1.0' or 'format binary_big_endian 1.0')");
    ply_text("fmt2.ply", "ply\nformat ascii 1.0\ncomment x\nformat ascii 1.0\n");
    EXPECT_ERR("fmt2.ply", AUTO, 0, BAD, "@: header line 4: second format line");
    ply_text("nofmt.ply",
             "ply\nelement vertex 0\nproperty float x\nproperty float y\nend_header\n");
    EXPECT_ERR("nofmt.ply", AUTO, 0, BAD, "@: header line 5: no format line before end_header");
    ply_text("nox.ply", "ply\nformat ascii 1.0\nelement vertex 1\nproperty float y\n"
                        "property float z\nelement face 0\nproperty list uchar int vi\n"
                        "end_header\n1 2\n");
    EXPECT_ERR("nox.ply", AUTO, 0, BAD, "@: header line 3: vertex element has no property 'x'");
    ply_text("noy.ply", "ply\nformat ascii 1.0\ncomment c\nelement vertex 1\nproperty float x\n"
                        "property float yy\nend_header\n1 2\n");
    EXPECT_ERR("noy.ply", AUTO, 0, BAD, "@: header line 4: vertex element has no property 'y'");
    ply_text("noz.ply", "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\n"
                        "property float y\nend_header\n1 2\n");
    EXPECT_ERR("noz.ply", AUTO, 3, BAD,
               "@: header line 3: vertex element has no property 'z' (3 dimensions requested)");
    EXPECT("noz.ply", AUTO, 0, 2, 1, 2);
    ply_text("novert.ply", "ply\nformat ascii 1.0\nelement face 0\nproperty list uchar int vi\n"
                           "end_header\n");
    EXPECT_ERR("novert.ply", AUTO, 0, BAD, "@: header line 5: no vertex element");
    ply_text("eof.ply", "ply\nformat ascii 1.0\nelement vertex 0\nproperty float x\n");
    EXPECT_ERR("eof.ply", AUTO, 0, BAD, "@: header line 5: end of file before end_header");
    ply_text("kw.ply", "ply\nformat ascii 1.0\nelemnt vertex 0\n");
    EXPECT_ERR("kw.ply", AUTO, 0, BAD, "@: header line 3: unknown keyword 'elemnt'");
    ply_text("type.ply", "ply\nformat ascii 1.0\nelement vertex 0\nproperty float x\n"
                         "property int64 y\nend_header\n");
    EXPECT_ERR("type.ply", AUTO, 0, BAD, "@: header line 5: unknown property type 'int64'");
    ply_text("ltype.ply", "ply\nformat ascii 1.0\nelement face 0\nproperty list float int vi\n");
    EXPECT_ERR("ltype.ply", AUTO, 0, BAD,
               "@: header line 4: list count type must be an integer type, got 'float'");
    ply_text("lx.ply", "ply\nformat ascii 1.0\nelement vertex 0\nproperty list uchar float x\n");
    EXPECT_ERR("lx.ply", AUTO, 0, BAD,
               "@: header line 4: vertex property is a list, not a number: 'x'");
    ply_text("dupx.ply", "ply\nformat ascii 1.0\nelement vertex 0\nproperty float x\n"
                         "property double x\n");
    EXPECT_ERR("dupx.ply", AUTO, 0, BAD, "@: header line 5: second vertex property 'x'");
    ply_text("v2.ply", "ply\nformat ascii 1.0\nelement vertex 0\nproperty float x\n"
                       "property float y\nelement vertex 0\n");
    EXPECT_ERR("v2.ply", AUTO, 0, BAD, "@: header line 6: second vertex element");
    ply_text("pre.ply", "ply\nformat ascii 1.0\nproperty float x\n");
    EXPECT_ERR("pre.ply", AUTO, 0, BAD, "@: header line 3: property before any element");
    ply_text("cnt.ply", "ply\nformat ascii 1.0\nelement vertex -1\n");
    EXPECT_ERR("cnt.ply", AUTO, 0, BAD,
               "@: header line 3: element count is not a non-negative integer: '-1'");
    ply_text("el.ply", "ply\nformat ascii 1.0\nelement vertex\n");
    EXPECT_ERR("el.ply", AUTO, 0, BAD,
               "@: header line 3: malformed element line (want 'element NAME COUNT')");
    ply_text("eh.ply", "ply\nformat ascii 1.0\nelement vertex 0\nproperty float x\n"
                       "property float y\nend_header now\n");
    EXPECT_ERR("eh.ply", AUTO, 0, BAD, "@: header line 6: text after end_header");

    /* ascii body */
    static const char *hdr = "ply\nformat ascii 1.0\nelement vertex 3\nproperty uchar x\n"
                             "property float y\nproperty float z\nend_header\n";
    struct {
        const char *body, *msg;
        int dims;
    } ab[] = {
        {"1 2 3\n4 nan 6\n7 8 9\n", "@:9: vertex record 1: NaN in property y", 0},
        {"1 2 3\n4 5 -inf\n7 8 9\n", "@:9: vertex record 1: infinity in property z", 0},
        {"1 2 3\n4 5 -inf\n7 8 9\n", NULL, 2}, /* z not parsed with dims = 2 */
        {"1 2 3\n\n4 5 6\n300 8 9\n",
         "@:11: vertex record 2: property x is not a valid uchar: "
         "'300'",
         0},
        {"1 2 3\n-1 5 6\n", "@:9: vertex record 1: property x is not a valid uchar: '-1'", 0},
        {"1.5 2 3\n", "@:8: vertex record 0: property x is not a valid uchar: '1.5'", 0},
        {"1 2e39 3\n", "@:8: vertex record 0: property y is out of float range: '2e39'", 0},
        {"1 abc 3\n", "@:8: vertex record 0: property y is not a valid float: 'abc'", 0},
        {"1 2 3\n4 5\n", "@:9: vertex record 1: missing value for property z", 0},
        {"1 2 3 4\n", "@:8: vertex record 0: more values than the header's 3 properties", 0},
        {"1 2 3\n4 5 6\n", "@: truncated: expected 3 vertex records, file ends in record 2", 0},
        {"", "@: truncated: expected 3 vertex records, file ends in record 0", 0},
    };
    for (size_t i = 0; i < sizeof ab / sizeof ab[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "%s%s", hdr, ab[i].body);
        put_text("abody.ply", text);
        if (ab[i].msg)
            EXPECT_ERR("abody.ply", AUTO, ab[i].dims, BAD, ab[i].msg);
        else
            EXPECT("abody.ply", AUTO, ab[i].dims, 2, 1, 2, 4, 5, 7, 8);
    }
    ply_text("alist.ply", "ply\nformat ascii 1.0\nelement face 2\nproperty list uchar int vi\n"
                          "element vertex 1\nproperty float x\nproperty float y\nend_header\n"
                          "3 1 2 3\n3 1 2\n1 2\n");
    EXPECT_ERR("alist.ply", AUTO, 0, BAD,
               "@:10: face record 1: list property vi has 2 values, its count says 3");
    ply_text("alist2.ply", "ply\nformat ascii 1.0\nelement face 2\nproperty list uchar int vi\n"
                           "element vertex 1\nproperty float x\nproperty float y\nend_header\n"
                           "3 1 2 3\n256 1 2\n1 2\n");
    EXPECT_ERR("alist2.ply", AUTO, 0, BAD,
               "@:10: face record 1: list count of property vi is not a valid uchar: '256'");
    ply_text("aface.ply", "ply\nformat ascii 1.0\nelement face 3\nproperty list uchar int vi\n"
                          "element vertex 1\nproperty float x\nproperty float y\nend_header\n"
                          "3 1 2 3\n");
    EXPECT_ERR("aface.ply", AUTO, 0, BAD,
               "@: truncated: expected 3 face records, file ends in record 1");

    /* binary body: 10 records of (short x, double y, float z) = 14 bytes */
    for (int fmt = 1; fmt <= 2; fmt++) {
        for (int cut = 0; cut < 3; cut++) {
            b.n = 0;
            b.fmt = fmt;
            b_str(&b, "ply\n");
            b_str(&b, fmt_line(fmt));
            b_str(&b, "element vertex 10\nproperty short x\nproperty double y\nproperty float z\n"
                      "end_header\n");
            for (int i = 0; i < 10; i++) {
                b_val(&b, I16, i);
                b_val(&b, F64, 0.5 * i);
                b_val(&b, F32, -i);
            }
            /* 7 full records, then nothing, part of record 7, or all but the last byte */
            b.n -= cut == 0 ? 3 * 14 : cut == 1 ? 3 * 14 - 5 : 1;
            put_file("trunc.ply", b.p, b.n);
            snprintf(msg, sizeof msg,
                     "@: truncated: expected 10 vertex records, file ends in "
                     "record %d",
                     cut == 2 ? 9 : 7);
            EXPECT_ERR("trunc.ply", AUTO, 0, BAD, msg);
        }
        /* NaN, infinity and out of range at known records */
        for (int k = 0; k < 4; k++) {
            double bad = k == 0 ? NAN : k == 1 ? -INFINITY : k == 2 ? 1e39 : -3.5e38;
            b.n = 0;
            b.fmt = fmt;
            b_str(&b, "ply\n");
            b_str(&b, fmt_line(fmt));
            b_str(&b, "element vertex 5\nproperty float x\nproperty double y\nend_header\n");
            for (int i = 0; i < 5; i++) {
                b_val(&b, F32, k == 0 && i == 3 ? NAN : i);
                b_val(&b, F64, k > 0 && i == 2 ? bad : i);
            }
            put_file("nanb.ply", b.p, b.n);
            if (k == 0)
                snprintf(msg, sizeof msg, "@: vertex record 3: NaN in property x");
            else if (k == 1)
                snprintf(msg, sizeof msg, "@: vertex record 2: infinity in property y");
            else
                snprintf(msg, sizeof msg,
                         "@: vertex record 2: property y is out of float "
                         "range: %.17g",
                         bad);
            if (k < 2) {
                EXPECT_ERR("nanb.ply", AUTO, 0, BAD, msg);
            } else {
                /* beyond float range, but a double property: the double reader keeps it */
                EXPECT_ERR_F("nanb.ply", AUTO, 0, BAD, msg);
                EXPECT64("nanb.ply", AUTO, 0, 2, 0, 0, 1, 1, 2, bad, 3, 3, 4, 4);
            }
        }
        /* Lists: negative count; truncated inside a list, in the vertex and the face element. */
        b.n = 0;
        b.fmt = fmt;
        b_str(&b, "ply\n");
        b_str(&b, fmt_line(fmt));
        b_str(&b, "element face 3\nproperty list char int vi\nelement vertex 1\n"
                  "property float x\nproperty float y\nend_header\n");
        b_val(&b, I8, 1), b_val(&b, I32, 5);
        b_val(&b, I8, -1);
        put_file("neg.ply", b.p, b.n);
        EXPECT_ERR("neg.ply", AUTO, 0, BAD,
                   "@: face record 1: negative list count -1 in property vi");
        b.n = 0;
        b_str(&b, "ply\n");
        b_str(&b, fmt_line(fmt));
        b_str(&b, "element face 3\nproperty list uchar int vi\nelement vertex 1\n"
                  "property float x\nproperty float y\nend_header\n");
        b_val(&b, U8, 1), b_val(&b, I32, 5);
        b_val(&b, U8, 3), b_val(&b, I32, 5);
        put_file("tface.ply", b.p, b.n);
        EXPECT_ERR("tface.ply", AUTO, 0, BAD,
                   "@: truncated: expected 3 face records, file ends in record 1");
        b.n = 0;
        b_str(&b, "ply\n");
        b_str(&b, fmt_line(fmt));
        b_str(&b, "element vertex 4\nproperty float x\nproperty list ushort uint n\n"
                  "property float y\nend_header\n");
        for (int i = 0; i < 3; i++)
            b_val(&b, F32, i), b_val(&b, U16, 1), b_val(&b, U32, 9), b_val(&b, F32, i);
        b_val(&b, F32, 1), b_val(&b, U16, 2), b_val(&b, U32, 9);
        put_file("tlist.ply", b.p, b.n);
        EXPECT_ERR("tlist.ply", AUTO, 0, BAD,
                   "@: truncated: expected 4 vertex records, file ends in record 3");
        /* fixed-size element before the vertex element, truncated */
        b.n = 0;
        b_str(&b, "ply\n");
        b_str(&b, fmt_line(fmt));
        b_str(&b, "element cam 4\nproperty double a\nproperty uchar b\nelement vertex 1\n"
                  "property float x\nproperty float y\nend_header\n");
        for (int i = 0; i < 2; i++) b_val(&b, F64, i), b_val(&b, U8, i);
        b_val(&b, F64, 1);
        put_file("tcam.ply", b.p, b.n);
        EXPECT_ERR("tcam.ply", AUTO, 0, BAD,
                   "@: truncated: expected 4 cam records, file ends in record 2");
    }
    /* Elements after the vertex element are not read: a short face body is not an error. */
    b.n = 0;
    b.fmt = 1;
    b_str(&b, "ply\nformat binary_little_endian 1.0\nelement vertex 1\nproperty float x\n"
              "property float y\nelement face 9\nproperty list uchar int vi\nend_header\n");
    b_val(&b, F32, 1.5), b_val(&b, F32, -2);
    put_file("after.ply", b.p, b.n);
    EXPECT("after.ply", AUTO, 0, 2, 1.5f, -2);
    free(b.p);
}

/* ---- writer ---- */

static void fill_random(tu_rng *r, float *v, size_t m)
{
    for (size_t i = 0; i < m; i++) {
        uint32_t k = tu_u32(r) % 16, u;
        switch (k) {
        case 0: v[i] = tu_f32(r, -1, 1) * 1e30f; break;
        case 1: v[i] = tu_f32(r, -1, 1) * 1e-30f; break;
        case 2: /* any finite bit pattern: subnormals, huge values, -0 */
            do {
                u = tu_u32(r);
                memcpy(&v[i], &u, 4);
            } while (!isfinite(v[i]));
            break;
        case 3: v[i] = (tu_u32(r) & 1) ? FLT_MAX : -FLT_MAX; break;
        case 4: v[i] = -0.0f; break;
        default: v[i] = tu_f32(r, -1000, 1000);
        }
    }
}

static void test_roundtrip(void)
{
    static const size_t sizes[] = {0, 1, 31, 32, 33, 5000};
    static const char *names[] = {"rt.csv", "rt.ply", "rt.xyz", "rt.txt", "rt.bin"};
    tu_rng r = {42};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int dims = 2; dims <= 3; dims++)
            for (int ni = 0; ni < 5; ni++) {
                size_t n = sizes[si];
                float *v = (float *)tu_malloc(n * 3 * sizeof(float) + 4);
                grove_points p = {n ? v : NULL, n, dims};
                grove_point_format f = ni == 4 ? ((si & 1) ? PLY : TXT) : AUTO;
                fill_random(&r, v, n * (size_t)dims);
                CHECK_OK(ctx, grove_points_write(ctx, path_of(names[ni]), f, &p));
                expect_points(names[ni], f, 0, dims, v, n, __LINE__);
                free(v);
            }
    /* The text and PLY outputs look as documented. */
    {
        float v[4] = {0.1f, -2, 1e30f, 3};
        grove_points p = {v, 2, 2};
        char got[512] = "";
        FILE *f;
        CHECK_OK(ctx, grove_points_write(ctx, path_of("look.csv"), AUTO, &p));
        f = fopen(path_of("look.csv"), "rb");
        if (f) {
            got[fread(got, 1, sizeof got - 1, f)] = '\0';
            fclose(f);
        }
        CHECK_MSG(strcmp(got, "x,y\n0.100000001,-2\n1.00000002e+30,3\n") == 0, "csv: %s", got);
        CHECK_OK(ctx, grove_points_write(ctx, path_of("look.ply"), AUTO, &p));
        f = fopen(path_of("look.ply"), "rb");
        memset(got, 0, sizeof got);
        if (f) {
            got[fread(got, 1, sizeof got - 1, f)] = '\0';
            fclose(f);
        }
        snprintf(got + 256, 200,
                 "ply\nformat binary_little_endian 1.0\ncomment written by grove %s\n"
                 "element vertex 2\nproperty float x\nproperty float y\nend_header\n",
                 grove_version());
        CHECK_MSG(strncmp(got, got + 256, strlen(got + 256)) == 0, "ply header: %s", got);
        /* first float, little-endian */
        CHECK((unsigned char)got[strlen(got + 256)] == (fbits(0.1f) & 0xFF));
    }
    CHECK(count_entries("grove-tmp") == 0);
}

static void test_write_errors(void)
{
    float v[6] = {1, 2, 3, 4, NAN, 6};
    grove_points p = {v, 3, 2};
    char want[1024];
    /* Non-finite: nothing is written, an existing file stays as it was. */
    put_text("keep.csv", "9,9\n");
    CHECK_STATUS(ctx, grove_points_write(ctx, path_of("keep.csv"), AUTO, &p), GROVE_ERR_BAD_INPUT);
    snprintf(want, sizeof want,
             "grove_points_write: %s: point 2 has NaN in coordinate 0; the file could not be "
             "read back, nothing written",
             path_of("keep.csv"));
    CHECK_MSG(strcmp(grove_ctx_last_error(ctx), want) == 0, "%s", grove_ctx_last_error(ctx));
    EXPECT("keep.csv", AUTO, 0, 2, 9, 9);
    v[4] = 5;
    v[3] = -INFINITY;
    p.dims = 3;
    p.n = 2;
    CHECK_STATUS(ctx, grove_points_write(ctx, path_of("new.ply"), AUTO, &p), GROVE_ERR_BAD_INPUT);
    CHECK(!file_exists(path_of("new.ply")));
    v[3] = 4;
    /* Replacing an existing file. */
    CHECK_OK(ctx, grove_points_write(ctx, path_of("keep.csv"), AUTO, &p));
    EXPECT("keep.csv", AUTO, 0, 3, 1, 2, 3, 4, 5, 6);
    /* Arguments. */
    CHECK_STATUS(ctx, grove_points_write(ctx, path_of("x.dat"), AUTO, &p), GROVE_ERR_INVALID_ARG);
    CHECK(!file_exists(path_of("x.dat")));
    CHECK_OK(ctx, grove_points_write(ctx, path_of("x.dat"), PLY, &p));
    EXPECT("x.dat", AUTO, 0, 3, 1, 2, 3, 4, 5, 6);
    CHECK_STATUS(NULL, grove_points_write(NULL, path_of("a.csv"), AUTO, &p), GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(ctx, grove_points_write(ctx, NULL, AUTO, &p), GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(ctx, grove_points_write(ctx, path_of("a.csv"), AUTO, NULL), GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(ctx, grove_points_write(ctx, path_of("a.csv"), (grove_point_format)9, &p),
                 GROVE_ERR_INVALID_ARG);
    p.dims = 4;
    CHECK_STATUS(ctx, grove_points_write(ctx, path_of("a.csv"), AUTO, &p), GROVE_ERR_INVALID_ARG);
    p.dims = 2;
    p.xyz = NULL;
    CHECK_STATUS(ctx, grove_points_write(ctx, path_of("a.csv"), AUTO, &p), GROVE_ERR_INVALID_ARG);
    p.n = 0;
    CHECK_OK(ctx, grove_points_write(ctx, path_of("a.csv"), AUTO, &p));
    EXPECT0("a.csv", AUTO, 0, 2);
    /* I/O: a directory that does not exist. */
    CHECK_STATUS(ctx, grove_points_write(ctx, path_of("nodir/a.csv"), AUTO, &p), GROVE_ERR_IO);
    CHECK_MSG(strstr(grove_ctx_last_error(ctx), strerror(ENOENT)) != NULL, "%s",
              grove_ctx_last_error(ctx));
    /* I/O: the target is a directory, so the rename fails and the temporary file goes. */
    mkdir(path_of("isdir.csv"), 0700);
    CHECK_STATUS(ctx, grove_points_write(ctx, path_of("isdir.csv"), AUTO, &p), GROVE_ERR_IO);
    rmdir(path_of("isdir.csv"));
    CHECK(count_entries("grove-tmp") == 0);
}

/* ---- double precision ---- */

/* Appends a random number spelling to t (at most 900 bytes): random doubles printed several
 * ways, random digit strings with random decimal points and exponents, and decimal spellings
 * at, just below and just above the midpoint of two adjacent doubles (printed from a long
 * double, exact where it has the bits). */
static void rand_number(tu_rng *r, char *t, size_t size)
{
    uint32_t kind = tu_u32(r) % 8;
    double d;
    uint64_t u;
    do {
        u = ((uint64_t)tu_u32(r) << 32) | tu_u32(r);
        memcpy(&d, &u, 8);
    } while (!isfinite(d));
    if (kind == 0) {
        static const char *const f[] = {"%.17g", "%.16g", "%.15g", "%.6g", "%.25e", "%.0f"};
        const char *fm = f[tu_u32(r) % 6];
        if (strcmp(fm, "%.0f") == 0 && fabs(d) > 1e300) d = d * 1e-280; /* keep it short */
        snprintf(t, size, fm, d);
    } else if (kind == 1) {
        d = (double)tu_f32(r, -1, 1) * pow(10.0, (double)(int)(tu_u32(r) % 40) - 20);
        snprintf(t, size, "%.*g", 1 + (int)(tu_u32(r) % 17), d);
    } else if (kind <= 5) {
        /* digits, a decimal point somewhere (or none), maybe an exponent */
        size_t nd = 1 + tu_u32(r) % (kind == 5 ? 400 : 30), k = 0, dot = tu_u32(r) % (nd + 2);
        if (tu_u32(r) % 2) t[k++] = tu_u32(r) % 2 ? '-' : '+';
        for (size_t i = 0; i < nd; i++) {
            if (i == dot) t[k++] = '.';
            /* runs of zeros and nines make carries and near-ties */
            uint32_t c = tu_u32(r) % 12;
            t[k++] = c >= 10 ? (c == 10 ? '0' : '9') : (char)('0' + c);
        }
        if (dot == nd) t[k++] = '.', t[k++] = '5';
        if (tu_u32(r) % 4) {
            int e = (int)(tu_u32(r) % 700) - 350;
            k += (size_t)snprintf(t + k, size - k, "%s%d", tu_u32(r) % 2 ? "e" : "E", e);
        }
        t[k] = '\0';
    } else {
#if LDBL_MANT_DIG >= 64
        /* The midpoint of d and its upper neighbour has 54 bits: exact in a long double. */
        double up = nextafter(d, INFINITY);
        long double mid = ((long double)d + (long double)up) / 2;
        int prec = kind == 6 ? 16 + (int)(tu_u32(r) % 30) : 770;
        if (!isfinite(up)) mid = d;
        snprintf(t, size, "%.*Le", prec, mid);
        if (prec == 770) { /* exact: drop the trailing zeros, then nudge the last digit */
            char *e = strchr(t, 'e'), *z = e;
            char ex[16];
            snprintf(ex, sizeof ex, "%s", e);
            while (z[-1] == '0') z--;
            if (z[-1] == '.') z++, z[-1] = '0';
            if (tu_u32(r) % 3 == 1) {
                *z++ = '0', *z++ = '0', *z++ = '1'; /* just above the midpoint */
            } else if (tu_u32(r) % 3 == 2 && z[-1] >= '1' && z[-1] <= '9') {
                z[-1]--; /* just below */
                for (int i = 0; i < 5; i++) *z++ = '9';
            }
            snprintf(z, (size_t)(t + size - z), "%s", ex);
        }
#else
        snprintf(t, size, "%.17g", d);
#endif
    }
}

/* The double reader against strtod (C locale) on random and hard spellings, and the float
 * reader against strtof on the same spellings. */
static void test_double_exact(void)
{
    enum { N = 200000 };
    static const char *const hard[] = {
        "4512345.123",
        "0.1",
        "0.3",
        "1e23",
        "8.98846567431158e307",
        "9007199254740993",
        "9007199254740993.0000000001",
        "9007199254740992.9999999999",
        "2.2250738585072011e-308",
        "2.2250738585072012e-308",
        "2.2250738585072014e-308",
        "4.9406564584124654e-324",
        "2.4703282292062327e-324",
        "2.4703282292062328e-324",
        "1e-324",
        "-1e-400",
        "1.7976931348623157e308",
        "1.7976931348623158e308",
        "1.797693134862315807e308",
        "123456789012345678901234567890",
        "0.000000000000000000000000000000000000001e30",
        "999999999999999999999999999999e-30",
        "1e22",
        "1e-22",
        "123456789012345e22",
        "123456789012345e-22",
        "1234567890123456",
        "7.038531e-26",
        "3.4028235677973366e38",
        "1.00000000000000011102230246251565404236316680908203125",
        "1.00000000000000011102230246251565404236316680908203124",
        "1.00000000000000011102230246251565404236316680908203126",
        "5e-324",
        "-0",
        "0e999999",
        "000000000000000000000000000000000000000000000000000123.5e-2",
        "6378137.0000001",
        "-2694685.473, 4293642.366"};
    tu_rng r = {99};
    size_t nh = sizeof hard / sizeof hard[0], n64 = 0, n32 = 0, k64 = 0, k32 = 0;
    char(*s)[1024] = (char(*)[1024])tu_malloc((size_t)N * sizeof *s);
    char *f64 = (char *)tu_malloc((size_t)N * 1024), *f32 = (char *)tu_malloc((size_t)N * 1024);
    double *w64 = (double *)tu_malloc((size_t)(N + 1) * sizeof(double));
    float *w32 = (float *)tu_malloc((size_t)(N + 1) * sizeof(float));
    for (size_t i = 0; i < N; i++) {
        if (i < nh)
            snprintf(s[i], sizeof s[i], "%s", hard[i]);
        else
            rand_number(&r, s[i], sizeof s[i]);
        if (strchr(s[i], ',')) *strchr(s[i], ',') = '\0';
    }
    /* two values a row; spellings that overflow are left out here (tested below) */
    for (size_t i = 0; i < N; i++) {
        double d = strtod(s[i], NULL);
        float f = strtof(s[i], NULL);
        if (!isinf(d)) {
            k64 += (size_t)sprintf(f64 + k64, "%s%c", s[i], n64 % 2 ? '\n' : ',');
            w64[n64++] = d;
        }
        if (!isinf(f)) {
            k32 += (size_t)sprintf(f32 + k32, "%s%c", s[i], n32 % 2 ? '\n' : ' ');
            w32[n32++] = f;
        }
    }
    if (n64 % 2) k64 += (size_t)sprintf(f64 + k64, "0\n"), w64[n64++] = 0;
    if (n32 % 2) k32 += (size_t)sprintf(f32 + k32, "0\n"), w32[n32++] = 0;
    put_file("exact64.csv", f64, k64);
    put_file("exact32.txt", f32, k32);
    expect_points64("exact64.csv", AUTO, 2, 2, w64, n64 / 2, __LINE__);
    expect_points("exact32.txt", AUTO, 2, 2, w32, n32 / 2, __LINE__);
    CHECK_MSG(n64 > N * 9 / 10 && n32 > N / 2, "%zu and %zu of %d values in range", n64, n32, N);
    CHECK(w64[0] == 4512345.123 && (double)w32[0] != w64[0]); /* where the two differ */
    free(s);
    free(f64);
    free(f32);
    free(w64);
    free(w32);
}

/* The double reader: values a float would round, range, PLY types, arguments, clouds. */
static void test_double(void)
{
    const grove_status BAD = GROVE_ERR_BAD_INPUT;
    grove_points64 p = {NULL, 0, 0};
    buf b = {NULL, 0, 0, 1, 0};

    /* UTM and geocentric coordinates: centimetres survive in double, not in float. */
    put_text("utm.csv", "x,y,z\n4512345.123,5412345.67,101.25\n"
                        "-2694685.473 , 4293642.366,4857878.987\n");
    EXPECT64("utm.csv", AUTO, 0, 3, 4512345.123, 5412345.67, 101.25, -2694685.473, 4293642.366,
             4857878.987);
    EXPECT("utm.csv", AUTO, 0, 3, 4512345.123f, 5412345.67f, 101.25f, -2694685.473f, 4293642.366f,
           4857878.987f);
    CHECK((double)4512345.123f != 4512345.123); /* the file is one where they differ */
    EXPECT64("utm.csv", TXT, 2, 2, 4512345.123, 5412345.67, -2694685.473, 4293642.366);
    /* Range: the largest double, subnormals, underflow to zero (sign kept). */
    put_text("d_ext.txt", "1.7976931348623158e308 -4.9406564584124654e-324\n"
                          "1e-400 -1e-400\n1e39 -3.5e38\n");
    EXPECT64("d_ext.txt", AUTO, 0, 2, DBL_MAX, -4.9406564584124654e-324, 0.0, -0.0, 1e39, -3.5e38);
    put_text("d_big.csv", "1,2\n1.7976931348623159e308,2\n");
    EXPECT_ERR64("d_big.csv", AUTO, 0, BAD,
                 "@:2: column 1 is out of double range: '1.7976931348623159e308'");
    put_text("d_big2.csv", "1 -1e309\n");
    EXPECT_ERR64("d_big2.csv", AUTO, 0, BAD, "@:1: column 2 is out of double range: '-1e309'");
    put_text("d_big3.csv", "1,123456789012345678901234567890123456789012345678901234567890e300\n");
    EXPECT_ERR64("d_big3.csv", AUTO, 0, BAD,
                 "@:1: column 2 is out of double range: "
                 "'1234567890123456789012345678901234567890...'");
    /* ASCII PLY: a double property is parsed to double; a float property holds a float, as its
     * binary twin would; integers are exact; a double out of range names double. */
    put_text("d_a.ply", "ply\nformat ascii 1.0\nelement vertex 2\nproperty double x\n"
                        "property float y\nproperty int z\nend_header\n"
                        "4512345.123 4512345.123 -2147483648\n0.1 0.1 2147483647\n");
    EXPECT64("d_a.ply", AUTO, 0, 3, 4512345.123, (double)4512345.123f, -2147483648.0, 0.1,
             (double)0.1f, 2147483647.0);
    put_text("d_a2.ply", "ply\nformat ascii 1.0\nelement vertex 1\nproperty double x\n"
                         "property float y\nend_header\n1e400 1\n");
    EXPECT_ERR64("d_a2.ply", AUTO, 0, BAD,
                 "@:7: vertex record 0: property x is out of double range: '1e400'");
    EXPECT_ERR_F("d_a2.ply", AUTO, 0, BAD,
                 "@:7: vertex record 0: property x is out of float range: '1e400'");
    put_text("d_a3.ply", "ply\nformat ascii 1.0\nelement vertex 1\nproperty double x\n"
                         "property float y\nend_header\n1e300 1e39\n");
    EXPECT_ERR64("d_a3.ply", AUTO, 0, BAD,
                 "@:7: vertex record 0: property y is out of float range: '1e39'");
    /* Binary PLY, both byte orders: every type read exactly. */
    for (int fmt = 1; fmt <= 2; fmt++) {
        double want[2 * NTYPES];
        b_start(&b, fmt, "element vertex 8\nproperty double x\n");
        for (int t = 0; t < NTYPES; t++) {
            char h[64];
            if (t == F64) continue;
            snprintf(h, sizeof h, "property %s p%d\n", canon[t], t);
            b_str(&b, h);
        }
        b_str(&b, "property float y\nend_header\n");
        /* record t: x a full double, the type-t property skipped, y a float; vertex record t */
        for (int rec = 0; rec < 8; rec++) {
            double x = rec == 7 ? DBL_MAX : 4512345.0 + rec / 3.0;
            b_val(&b, F64, rec == 6 ? 4.9406564584124654e-324 : x);
            want[2 * rec] = b_last64;
            for (int t = 0; t < NTYPES; t++)
                if (t != F64) b_val(&b, t, 1);
            b_val(&b, F32, 5412345.67);
            want[2 * rec + 1] = b_last64;
        }
        put_file("d_b.ply", b.p, b.n);
        expect_points64("d_b.ply", AUTO, 0, 2, want, 8, __LINE__);
        CHECK(want[0] == 4512345.0 && want[1] == (double)5412345.67f && want[14] == DBL_MAX);
        EXPECT_ERR_F("d_b.ply", AUTO, 0, BAD,
                     "@: vertex record 7: property x is out of float range: "
                     "1.7976931348623157e+308");
        /* integer types as coordinates: the extremes of each, exact */
        b_start(&b, fmt,
                "element vertex 3\nproperty uint x\nproperty int y\n"
                "property short z\nend_header\n");
        b_val(&b, U32, 4294967295.0), b_val(&b, I32, -2147483648.0), b_val(&b, I16, -32768);
        b_val(&b, U32, 16777217), b_val(&b, I32, 2147483647), b_val(&b, I16, 32767);
        b_val(&b, U32, 0), b_val(&b, I32, -16777217), b_val(&b, I16, 0);
        put_file("d_i.ply", b.p, b.n);
        EXPECT64("d_i.ply", AUTO, 0, 3, 4294967295.0, -2147483648.0, -32768, 16777217, 2147483647,
                 32767, 0, -16777217, 0);
        EXPECT("d_i.ply", AUTO, 0, 3, 4294967295.0f, -2147483648.0f, -32768, 16777216,
               2147483648.0f, 32767, 0, -16777216, 0);
    }
    free(b.p);

    /* Arguments and the reader's messages name grove_points64_read. */
    put_text("ok.csv", "1,2\n");
    CHECK_STATUS(NULL, grove_points64_read(NULL, path_of("ok.csv"), AUTO, 0, &p),
                 GROVE_ERR_INVALID_ARG);
    CHECK(p.xyz == NULL && p.n == 0 && p.dims == 0);
    CHECK_STATUS(ctx, grove_points64_read(ctx, NULL, AUTO, 0, &p), GROVE_ERR_INVALID_ARG);
    CHECK(strcmp(grove_ctx_last_error(ctx), "grove_points64_read: path is NULL") == 0);
    CHECK_STATUS(ctx, grove_points64_read(ctx, path_of("ok.csv"), AUTO, 0, NULL),
                 GROVE_ERR_INVALID_ARG);
    CHECK(strcmp(grove_ctx_last_error(ctx), "grove_points64_read: out is NULL") == 0);
    CHECK_STATUS(ctx, grove_points64_read(ctx, path_of("ok.csv"), (grove_point_format)3, 0, &p),
                 GROVE_ERR_INVALID_ARG);
    CHECK(strcmp(grove_ctx_last_error(ctx),
                 "grove_points64_read: fmt must be GROVE_POINTS_AUTO, _TEXT or _PLY, got 3") == 0);
    CHECK_STATUS(ctx, grove_points64_read(ctx, path_of("ok.csv"), AUTO, 1, &p),
                 GROVE_ERR_INVALID_ARG);
    CHECK(strcmp(grove_ctx_last_error(ctx),
                 "grove_points64_read: dims must be 0 (as in the file), 2 or 3, got 1") == 0);
    CHECK(p.xyz == NULL && p.n == 0 && p.dims == 0);
    CHECK_OK(ctx, grove_points64_read(ctx, path_of("ok.csv"), AUTO, 0, &p));
    CHECK(p.n == 1 && p.dims == 2 && p.xyz && p.xyz[0] == 1 && p.xyz[1] == 2);
    grove_points64_free(&p);
    CHECK(p.xyz == NULL && p.n == 0 && p.dims == 0);
    grove_points64_free(NULL);
    grove_points64_free(&p);

    /* Clouds read text and PLY in double: the digits survive, and a double cloud written as
     * PLY reads back bit for bit. */
    {
        grove_cloud c, w;
        double xyz[6] = {4512345.123, 5412345.67, 101.25, -2694685.473, 4293642.366, 1e-310};
        CHECK_OK(ctx, grove_cloud_read(ctx, path_of("utm.csv"), GROVE_CLOUD_AUTO, &c));
        CHECK(c.n == 2 && c.xyz && c.xyz[0] == 4512345.123 && c.xyz[4] == 4293642.366 &&
              c.xyz[5] == 4857878.987 && !c.has_scale && !c.rgb);
        grove_cloud_free(&c);
        CHECK_OK(ctx, grove_cloud_read(ctx, path_of("d_a.ply"), GROVE_CLOUD_AUTO, &c));
        CHECK(c.n == 2 && c.xyz && c.xyz[0] == 4512345.123 && c.xyz[1] == (double)4512345.123f);
        grove_cloud_free(&c);
        put_text("d_big.xyz", "1 2 3\n4 5 1e309\n");
        CHECK_STATUS(ctx, grove_cloud_read(ctx, path_of("d_big.xyz"), GROVE_CLOUD_AUTO, &c), BAD);
        CHECK(strstr(grove_ctx_last_error(ctx), "d_big.xyz:2: column 3 is out of double range: "
                                                "'1e309'") != NULL);
        CHECK(c.n == 0 && c.xyz == NULL);
        memset(&w, 0, sizeof w);
        w.xyz = xyz;
        w.n = 2;
        CHECK_OK(ctx, grove_cloud_write_ply(ctx, path_of("d_w.ply"), &w));
        CHECK_OK(ctx, grove_cloud_read(ctx, path_of("d_w.ply"), GROVE_CLOUD_AUTO, &c));
        CHECK(c.n == 2 && c.xyz && memcmp(c.xyz, xyz, sizeof xyz) == 0);
        grove_cloud_free(&c);
        EXPECT64("d_w.ply", AUTO, 0, 3, 4512345.123, 5412345.67, 101.25, -2694685.473, 4293642.366,
                 1e-310);
    }
}

/* ---- large files ---- */

static uint64_t checksum(const float *v, size_t m)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < m; i++) h = (h ^ fbits(v[i])) * 1099511628211ull;
    return h;
}

/* A generated text file of rows among blank lines, comments, leading blanks and CRLF line ends,
 * with each row's offset and line number (to break one). */
typedef struct gen_text {
    char *text;
    size_t len, cap;
    size_t *at;    /* row i's offset, after its leading blanks */
    uint64_t *ln;  /* row i's line number */
    uint64_t line; /* the lines so far */
} gen_text;

static void gen_init(gen_text *g, size_t n, const char *header)
{
    g->cap = (size_t)1 << 20;
    g->text = (char *)tu_malloc(g->cap);
    g->len = strlen(header);
    memcpy(g->text, header, g->len);
    g->at = (size_t *)tu_malloc((n ? n : 1) * sizeof *g->at);
    g->ln = (uint64_t *)tu_malloc((n ? n : 1) * sizeof *g->ln);
    g->line = 1;
}

/* Starts row i in row[] with what `extra` puts before it (0: a blank line, 1: a comment,
 * 5: blanks) and records where the row starts. @return the bytes written. */
static size_t gen_lead(gen_text *g, size_t i, uint32_t extra, char *row)
{
    size_t k = 0;
    if (extra == 0) k = (size_t)sprintf(row, "\n"), g->line++;
    if (extra == 1) k = (size_t)sprintf(row, "  # note, 1,2,3\r\n"), g->line++;
    if (extra == 5) k = (size_t)sprintf(row, " \t ");
    g->at[i] = g->len + k;
    g->ln[i] = ++g->line;
    return k;
}

/* Appends row[0..k) and its line end ("\r\n" where extra is 2). */
static void gen_add(gen_text *g, char *row, size_t k, uint32_t extra)
{
    k += (size_t)sprintf(row + k, extra == 2 ? "\r\n" : "\n");
    tu_append(&g->text, &g->len, &g->cap, row, k);
}

static void gen_free(gen_text *g)
{
    free(g->text);
    free(g->at);
    free(g->ln);
}

/* Writes g's text to dir/name with the nrep lines that start at offsets at[0] < at[1] < ...
 * replaced, up to their line end, by rows[k]; cut_end drops the last line end ("\n" or
 * "\r\n"). */
static void put_rows(const char *name, const gen_text *g, int cut_end, size_t nrep,
                     const size_t *at, const char *const *rows)
{
    FILE *f = fopen(path_of(name), "wb");
    size_t o = 0, len = g->len;
    if (!f) exit(2);
    if (cut_end) len -= len >= 2 && g->text[len - 2] == '\r' ? 2 : 1;
    for (size_t k = 0; k < nrep; k++) {
        fwrite(g->text + o, 1, at[k] - o, f);
        fputs(rows[k], f);
        o = at[k] + strcspn(g->text + at[k], "\r\n");
    }
    fwrite(g->text + o, 1, len - o, f);
    if (fclose(f) != 0) exit(2);
}

/* A text file of several of the reader's blocks: rows among blank lines, comments, leading
 * blanks and CRLF line ends read back exactly; a broken row in the second half is reported with
 * its line number (counted across blocks and threads' pieces); a missing last '\n' changes
 * nothing. */
static void test_text_blocks(size_t n)
{
    tu_rng r = {11};
    float *v = (float *)tu_malloc((n ? n : 1) * 3 * sizeof(float));
    gen_text g;
    gen_init(&g, n, "x y z\n");
    for (size_t i = 0; i < n; i++) {
        char row[160];
        const uint32_t extra = tu_u32(&r) % 16;
        size_t k = gen_lead(&g, i, extra, row);
        for (int d = 0; d < 3; d++) {
            v[3 * i + d] = tu_f32(&r, -1e4f, 1e4f);
            k += (size_t)sprintf(row + k, "%s%.9g", d ? (extra == 3 ? "\t" : ",") : "",
                                 (double)v[3 * i + d]);
        }
        gen_add(&g, row, k, extra);
    }
    for (int variant = 0; variant < 5; variant++) {
        /* 0 as written, 1 no last '\n', 2..4 row j broken: 2 columns, an empty one, a word */
        static const char *broken[] = {"1,2", "1,,3", "1 2 zz"};
        static const char *want[] = {"row has 2 columns, need 3", "column 2 is empty",
                                     "column 3 is not a number: 'zz'"};
        const size_t j = n ? n / 2 + tu_u32(&r) % (n - n / 2) : 0;
        grove_points q = {NULL, 0, 0};
        if (variant >= 2 && !n) continue;
        put_rows("blocks.csv", &g, variant == 1, variant >= 2, &g.at[j],
                 variant >= 2 ? &broken[variant - 2] : NULL);
        if (variant >= 2) {
            char msg[96];
            snprintf(msg, sizeof msg, "blocks.csv:%llu: %s", (unsigned long long)g.ln[j],
                     want[variant - 2]);
            CHECK_STATUS(ctx, grove_points_read(ctx, path_of("blocks.csv"), TXT, 0, &q),
                         GROVE_ERR_BAD_INPUT);
            CHECK_MSG(strstr(grove_ctx_last_error(ctx), msg) != NULL, "blocks: '%s', want '%s'",
                      grove_ctx_last_error(ctx), msg);
        } else {
            CHECK_OK(ctx, grove_points_read(ctx, path_of("blocks.csv"), TXT, 0, &q));
            CHECK_MSG(q.n == n && q.dims == 3 &&
                          (n == 0 || memcmp(q.xyz, v, 3 * n * sizeof(float)) == 0),
                      "blocks variant %d: %zu points of %zu, dims %d", variant, q.n, n, q.dims);
        }
        grove_points_free(&q);
    }
    unlink(path_of("blocks.csv"));
    gen_free(&g);
    free(v);
}

/* The cloud reader's blocks: a header naming the seven columns out of their order, then rows
 * among blank lines, comments, tabs, blanks around commas, leading blanks and CRLF line ends,
 * over several blocks, read back exactly (coordinates written with 17 digits, colour stored
 * times 257); a missing last line end changes nothing; without the header (a comment in its
 * place) x y z are the first three fields and nothing else is read. A row broken in the second
 * half, with another broken after it, is reported with its line number and its column's number
 * and name: the first in file order, counted across blocks and threads' pieces. */
static void test_cloud_blocks(size_t n)
{
    tu_rng r = {13};
    double *v = (double *)tu_malloc((n ? n : 1) * 3 * sizeof(double));
    unsigned *a = (unsigned *)tu_malloc((n ? n : 1) * 4 * sizeof(unsigned)); /* r g b i */
    gen_text g;
    gen_init(&g, n, "intensity,z,red,x,green,y,blue\n");
    for (size_t i = 0; i < n; i++) {
        char row[256];
        const uint32_t extra = tu_u32(&r) % 16;
        const char *s = extra == 3 ? "\t" : extra == 4 ? " , " : ",";
        size_t k = gen_lead(&g, i, extra, row);
        for (int d = 0; d < 3; d++)
            v[3 * i + d] = ((double)(tu_next(&r) >> 11) * 0x1p-53 - 0.5) * 2e6;
        for (int d = 0; d < 4; d++) a[4 * i + d] = tu_u32(&r) % (d < 3 ? 256u : 65536u);
        if (i < 2) /* the extremes */
            for (int d = 0; d < 4; d++) a[4 * i + d] = i ? 0 : d < 3 ? 255 : 65535;
        k += (size_t)sprintf(row + k, "%u%s%.17g%s%u%s%.17g%s%u%s%.17g%s%u", a[4 * i + 3], s,
                             v[3 * i + 2], s, a[4 * i], s, v[3 * i], s, a[4 * i + 1], s,
                             v[3 * i + 1], s, a[4 * i + 2]);
        gen_add(&g, row, k, extra);
    }
    for (int variant = 0; variant < 8; variant++) {
        /* 0 as written, 1 no last line end, 2 no header, 3..7 row j broken (and row j2) */
        static const char *const broken[] = {"1,2,3,zz,4,5,6", "1,2,3,4,,5,6", "1,2,3,4,5,6",
                                             "1,2,256,4,5,6,7", "70000,2,3,4,5,6,7"};
        static const char *const want[] = {
            "column 4 (x) is not a number: 'zz'", "column 5 (green) is empty",
            "row has 6 columns, need 7", "column 3 (red) is not an integer 0..255: '256'",
            "column 1 (intensity) is not an integer 0..65535: '70000'"};
        const size_t j = n ? n / 2 + tu_u32(&r) % (n - n / 2) : 0;
        /* a later row, often in the same piece or the next, broken another way */
        const size_t j2 =
            j + 1 < n ? j + 1 + tu_u32(&r) % (n - j - 1 < 3000 ? n - j - 1 : 3000) : j;
        grove_cloud c;
        memset(&c, 0x5a, sizeof c);
        if (variant >= 3 && !n) continue;
        if (variant >= 3) {
            const size_t at[2] = {g.at[j], g.at[j2]};
            const char *const text[2] = {broken[variant - 3], "1 2 3"};
            char msg[160];
            put_rows("cblocks.csv", &g, 0, j2 > j ? 2 : 1, at, text);
            snprintf(msg, sizeof msg, "%s:%llu: %s", path_of("cblocks.csv"),
                     (unsigned long long)g.ln[j], want[variant - 3]);
            CHECK_STATUS(ctx, grove_cloud_read(ctx, path_of("cblocks.csv"), GROVE_CLOUD_AUTO, &c),
                         GROVE_ERR_BAD_INPUT);
            CHECK_MSG(strcmp(grove_ctx_last_error(ctx), msg) == 0, "cloud blocks: '%s', want '%s'",
                      grove_ctx_last_error(ctx), msg);
            CHECK(c.n == 0 && !c.xyz && !c.rgb && !c.intensity);
        } else {
            size_t bad = 0, first = 0;
            const size_t header = 0;
            const char *const nohead = "# intensity z red x green y blue";
            put_rows("cblocks.csv", &g, variant == 1, variant == 2, &header, &nohead);
            CHECK_OK(ctx, grove_cloud_read(ctx, path_of("cblocks.csv"), GROVE_CLOUD_AUTO, &c));
            CHECK_MSG(c.n == n && (n == 0 || c.xyz) && !c.has_scale &&
                          (variant == 2 || n == 0 ? !c.rgb && !c.intensity : c.rgb && c.intensity),
                      "cloud blocks variant %d: %zu points of %zu, rgb %d, intensity %d", variant,
                      c.n, n, c.rgb != NULL, c.intensity != NULL);
            for (size_t i = 0; c.n == n && i < n && (variant == 2 || (c.rgb && c.intensity)); i++) {
                int diff = 0;
                if (variant == 2) {
                    diff = c.xyz[3 * i] != a[4 * i + 3] || c.xyz[3 * i + 1] != v[3 * i + 2] ||
                           c.xyz[3 * i + 2] != a[4 * i];
                } else {
                    for (int d = 0; d < 3; d++)
                        diff |= c.xyz[3 * i + d] != v[3 * i + d] ||
                                c.rgb[3 * i + d] != (uint16_t)(a[4 * i + d] * 257u);
                    diff |= c.intensity[i] != a[4 * i + 3];
                }
                if (diff && bad++ == 0) first = i;
            }
            CHECK_MSG(bad == 0, "cloud blocks variant %d: %zu points differ, the first %zu",
                      variant, bad, first);
            grove_cloud_free(&c);
        }
    }
    unlink(path_of("cblocks.csv"));
    gen_free(&g);
    free(a);
    free(v);
}

static void test_large(size_t n)
{
    tu_rng r = {7};
    float *v = (float *)tu_malloc(n * 3 * sizeof(float));
    static const char *names[] = {"large.csv", "large.ply"};
    /* Coordinates as scanners and simulations make them, with one value in 64 from the
     * adversarial mix (extreme exponents, subnormals, -0), which the round trips above cover. */
    for (size_t i = 0; i < 3 * n; i++) {
        if (tu_u32(&r) % 64 == 0)
            fill_random(&r, &v[i], 1);
        else
            v[i] = tu_f32(&r, -10000.0f, 10000.0f);
    }
    for (int k = 0; k < 2; k++) {
        grove_points p = {v, n, 3}, q = {NULL, 0, 0};
        double t0 = now(), t1, t2, t3, t4;
        size_t quarter = n / 4;
        CHECK_OK(ctx, grove_points_write(ctx, path_of(names[k]), AUTO, &p));
        t1 = now();
        CHECK_OK(ctx, grove_points_read(ctx, path_of(names[k]), AUTO, 0, &q));
        t2 = now();
        CHECK_MSG(q.n == n && q.dims == 3, "%s: n %zu dims %d", names[k], q.n, q.dims);
        if (q.n == n && q.dims == 3)
            CHECK_MSG(checksum(q.xyz, 3 * n) == checksum(v, 3 * n) &&
                          (n == 0 || memcmp(q.xyz, v, 3 * n * sizeof(float)) == 0),
                      "%s: points differ", names[k]);
        grove_points_free(&q);
        {
            /* The double reader: PLY floats widened exactly; the CSV's 9 digits of each float
             * parsed to double lie well within half a float ulp of it, so they round back. */
            grove_points64 q64 = {NULL, 0, 0};
            size_t bad = 0;
            CHECK_OK(ctx, grove_points64_read(ctx, path_of(names[k]), AUTO, 0, &q64));
            CHECK(q64.n == n && q64.dims == 3);
            for (size_t i = 0; q64.n == n && i < 3 * n; i++)
                bad += k ? dbits(q64.xyz[i]) != dbits((double)v[i])
                         : fbits((float)q64.xyz[i]) != fbits(v[i]) ||
                               fabs(q64.xyz[i] - v[i]) > 1e-8 * fabs(v[i]);
            CHECK_MSG(bad == 0, "%s (double): %zu values differ", names[k], bad);
            grove_points64_free(&q64);
        }
        /* a quarter of the points, to see that the time is linear */
        p.n = quarter;
        CHECK_OK(ctx, grove_points_write(ctx, path_of("quarter.bin"), k ? PLY : TXT, &p));
        t3 = now();
        CHECK_OK(ctx, grove_points_read(ctx, path_of("quarter.bin"), AUTO, 0, &q));
        t4 = now();
        CHECK(q.n == quarter && q.dims == 3 &&
              (quarter == 0 || memcmp(q.xyz, v, 3 * quarter * sizeof(float)) == 0));
        printf("test_io: %s, %zu points: write %.3f s, read %.3f s (%.0f ns/point); "
               "%zu points read in %.3f s (ratio %.2f, 4 if linear)\n",
               names[k], n, t1 - t0, t2 - t1, 1e9 * (t2 - t1) / (double)(n ? n : 1), quarter,
               t4 - t3, (t2 - t1) / (t4 - t3));
        grove_points_free(&q);
        unlink(path_of(names[k]));
        unlink(path_of("quarter.bin"));
    }
    free(v);
}

int main(int argc, char **argv)
{
    size_t large = 2000000;
    uint64_t fstride = 4099, foffset = 0;
    const char *tmp = getenv("TMPDIR");
    grove_ctx_opts o;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--large") == 0 && i + 1 < argc)
            large = (size_t)strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--floats-stride") == 0 && i + 1 < argc)
            fstride = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--floats-offset") == 0 && i + 1 < argc)
            foffset = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr,
                    "usage: test_io [--large N] [--floats-stride S [--floats-offset O]]\n");
            return 2;
        }
    }
    snprintf(dir, sizeof dir, "%s/grove-io-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "test_io: mkdtemp %s: %s\n", dir, strerror(errno));
        return 2;
    }
    grove_ctx_default_opts(&o);
    o.backend = GROVE_BACKEND_CPU;
    if (grove_ctx_create(&o, &ctx) != GROVE_OK) {
        fprintf(stderr, "test_io: cannot create a context\n");
        return 2;
    }
    if (fstride == 0) {
        fprintf(stderr, "test_io: --floats-stride must be at least 1\n");
        return 2;
    }
    test_format_float(fstride, foffset);
    test_text_ok();
    test_text_extremes();
    test_text_errors();
    test_args_and_io();
    test_ply_ok();
    test_ply_errors();
    test_roundtrip();
    test_write_errors();
    test_double_exact();
    test_double();
    test_locale();
    test_text_blocks(large / 8);
    test_cloud_blocks(large / 8);
    test_large(large);
    grove_ctx_destroy(ctx);
    remove_dir();
    return tu_finish("test_io");
}
