/*
 * test_io.c - point-file readers and writer: text (CSV, whitespace) and PLY (ascii, binary LE
 * and BE). Files are written into a fresh directory under $TMPDIR (or /tmp) and read back;
 * every bad-input case checks the exact status and message.
 *
 * Usage: test_io [--large N]   (N points for the large round trips, default 2000000)
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

/* ---- checks ---- */

/* Reads `name` and compares with want[n * dims] bit for bit. */
static void expect_points(const char *name, grove_point_format fmt, int dims_req, int want_dims,
                          const float *want, size_t n, int line)
{
    grove_points p = {NULL, 123, 7};
    grove_status s = grove_points_read(ctx, path_of(name), fmt, dims_req, &p);
    if (s != GROVE_OK) {
        fprintf(stderr, "test_io.c:%d: reading %s: %s: %s\n", line, name, grove_status_string(s),
                grove_ctx_last_error(ctx));
        tu_failures++;
        return;
    }
    CHECK_MSG(p.n == n && p.dims == want_dims, "line %d, %s: n %zu dims %d, want n %zu dims %d",
              line, name, p.n, p.dims, n, want_dims);
    if (p.n == n && p.dims == want_dims) {
        CHECK_MSG((n == 0) == (p.xyz == NULL), "line %d, %s: xyz %p with n %zu", line, name,
                  (void *)p.xyz, n);
        for (size_t i = 0; i < n * (size_t)want_dims; i++)
            if (fbits(p.xyz[i]) != fbits(want[i])) {
                CHECK_MSG(0,
                          "line %d, %s: value %zu (point %zu) is %.9g (0x%08x), want %.9g "
                          "(0x%08x)",
                          line, name, i, i / (size_t)want_dims, (double)p.xyz[i], fbits(p.xyz[i]),
                          (double)want[i], fbits(want[i]));
                break;
            }
    }
    grove_points_free(&p);
    CHECK(p.xyz == NULL && p.n == 0 && p.dims == 0);
}

#define EXPECT(name, fmt, dreq, dims, ...)                                                         \
    do {                                                                                           \
        const float w_[] = {__VA_ARGS__};                                                          \
        expect_points(name, fmt, dreq, dims, w_, sizeof w_ / sizeof w_[0] / (size_t)(dims),        \
                      __LINE__);                                                                   \
    } while (0)

/* Reading `name` fails with status `want` and the message `fmt_msg` with "@" replaced by the
 * file's full path. */
static void expect_error(const char *name, grove_point_format fmt, int dims, grove_status want,
                         const char *msg, int line)
{
    grove_points p = {(float *)&p, 5, 2};
    char full[2048];
    const char *at = strchr(msg, '@');
    grove_status s;
    if (at)
        snprintf(full, sizeof full, "%.*s%s%s", (int)(at - msg), msg, path_of(name), at + 1);
    else
        snprintf(full, sizeof full, "%s", msg);
    grove_ctx_clear_error(ctx);
    s = grove_points_read(ctx, path_of(name), fmt, dims, &p);
    CHECK_MSG(s == want, "line %d, %s: status %d (%s), want %d (%s); message: %s", line, name,
              (int)s, grove_status_string(s), (int)want, grove_status_string(want),
              grove_ctx_last_error(ctx));
    CHECK_MSG(strcmp(grove_ctx_last_error(ctx), full) == 0,
              "line %d, %s:\n    message \"%s\"\n    want    \"%s\"", line, name,
              grove_ctx_last_error(ctx), full);
    CHECK_MSG(p.xyz == NULL && p.n == 0 && p.dims == 0, "line %d: *out not emptied on failure",
              line);
    if (p.xyz != (float *)&p) grove_points_free(&p);
}

#define EXPECT0(name, fmt, dreq, dims) expect_points(name, fmt, dreq, dims, NULL, 0, __LINE__)

#define EXPECT_ERR(name, fmt, dims, st, msg) expect_error(name, fmt, dims, st, msg, __LINE__)
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
    EXPECT_ERR("big.csv", AUTO, 0, BAD, "@:2: column 1 is out of float range: '1e39'");
    put_text("big2.csv", "1,-3.5e38\n");
    EXPECT_ERR("big2.csv", AUTO, 0, BAD, "@:1: column 2 is out of float range: '-3.5e38'");
    put_text("big3.csv", "1,1e99999999999999999999\n");
    EXPECT_ERR("big3.csv", AUTO, 0, BAD,
               "@:1: column 2 is out of float range: '1e99999999999999999999'");
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

/* Appends one value of type t; returns the float the reader must produce for it (ascii values
 * are printed with enough digits, so the expected value is strtof of the printed text). */
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
        return strtof(s, NULL);
    }
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
        for (int j = 0; j < np; j++) {
            if (types[j] < 0) {
                int k = (int)(tu_u32(&r) % 4);
                b_val(&b, U8, k);
                for (int m = 0; m < k; m++) b_val(&b, I32, (int32_t)tu_u32(&r));
            } else if (roles[j] >= 0) {
                v[roles[j]] = b_val(&b, types[j], rand_val(&r, types[j]));
            } else {
                b_val(&b, types[j], rand_val(&r, types[j]));
            }
        }
        b_eol(&b);
        memcpy(want + i * (size_t)(three ? 3 : 2), v, (three ? 3 : 2) * sizeof(float));
    }
    face_body(&b, &r, nf2, fmt == 0 ? U16 : I32, U16);

    snprintf(name, sizeof name, "case%d.ply", fmt);
    put_file(name, b.p, b.n);
    expect_points(name, AUTO, 0, three ? 3 : 2, want, n, __LINE__);
    if (three) {
        /* dims = 2 keeps x and y */
        for (size_t i = 0; i < n; i++) {
            want[2 * i] = want[3 * i];
            want[2 * i + 1] = want[3 * i + 1];
        }
        expect_points(name, PLY, 2, 2, want, n, __LINE__);
    }
    free(b.p);
    free(want);
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
            EXPECT_ERR("nanb.ply", AUTO, 0, BAD, msg);
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

/* ---- large files ---- */

static uint64_t checksum(const float *v, size_t m)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < m; i++) h = (h ^ fbits(v[i])) * 1099511628211ull;
    return h;
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
                          memcmp(q.xyz, v, 3 * n * sizeof(float)) == 0,
                      "%s: points differ", names[k]);
        grove_points_free(&q);
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
    const char *tmp = getenv("TMPDIR");
    grove_ctx_opts o;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--large") == 0 && i + 1 < argc)
            large = (size_t)strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: test_io [--large N]\n");
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
    test_text_ok();
    test_text_extremes();
    test_text_errors();
    test_args_and_io();
    test_ply_ok();
    test_ply_errors();
    test_roundtrip();
    test_write_errors();
    test_locale();
    test_large(large);
    grove_ctx_destroy(ctx);
    remove_dir();
    return tu_finish("test_io");
}
