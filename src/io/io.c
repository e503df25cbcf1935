/*
 * io.c - public entry points of the io module (read, free, write), the buffered reader and the
 * number parsing shared by the text and PLY readers (io_text.c, io_ply.c).
 *
 * Numbers with at most 15 significant digits and a small exponent are converted in double
 * arithmetic, correctly rounded (fast_path); the rest go to strtod (double) or strtof (float),
 * which round correctly but read the decimal point of the current LC_NUMERIC locale. Rather
 * than switch locales (process-wide with setlocale, or POSIX-only and per thread with
 * uselocale), the parser checks the grammar itself and hands them a string without a decimal
 * point ("12.5e3" becomes "125e2"), which every locale reads the same. The writer likewise
 * replaces whatever decimal point printf used with '.'.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io_internal.h"

/* ---- buffered reader ---- */

grove_status grove__rd_open(grove__rd *r, grove_ctx *ctx, const char *path)
{
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    r->path = path;
    r->cap = 2 * GROVE__IO_CHUNK + 1;
    r->buf = (char *)malloc(r->cap);
    if (!r->buf)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for a read buffer",
                            path);
    r->f = fopen(path, "rb");
    if (!r->f) {
        int e = errno;
        free(r->buf);
        r->buf = NULL;
        return grove__error(ctx, GROVE_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    return GROVE_OK;
}

void grove__rd_close(grove__rd *r)
{
    if (r->f) fclose(r->f);
    free(r->buf);
    r->f = NULL;
    r->buf = NULL;
}

/* Moves the unread bytes to the front, makes room for at least `room` more (growing the
 * buffer geometrically), and reads as many as fit. Sets eof when the file has no more. */
static grove_status rd_fill(grove__rd *r, size_t room)
{
    size_t got;
    if (r->eof) return GROVE_OK;
    if (r->beg > 0) {
        memmove(r->buf, r->buf + r->beg, r->end - r->beg);
        r->end -= r->beg;
        r->beg = 0;
    }
    if (r->cap - 1 - r->end < room) {
        size_t nc = r->cap * 2;
        char *nb;
        if (nc < r->end + room + 1) nc = r->end + room + 1;
        nb = (char *)realloc(r->buf, nc);
        if (!nb)
            return grove__error(r->ctx, GROVE_ERR_OUT_OF_MEMORY,
                                "%s: out of memory for a %zu-byte read buffer", r->path, nc);
        r->buf = nb;
        r->cap = nc;
    }
    got = fread(r->buf + r->end, 1, r->cap - 1 - r->end, r->f);
    r->end += got;
    if (got == 0) {
        if (ferror(r->f))
            return grove__error(r->ctx, GROVE_ERR_IO, "%s: read error: %s", r->path,
                                strerror(errno));
        r->eof = 1;
    }
    return GROVE_OK;
}

/* The error for a line (the next) over GROVE__IO_MAX_LINE bytes. */
static grove_status long_line(const grove__rd *r)
{
    return grove__error(r->ctx, GROVE_ERR_LIMIT,
                        "%s:%llu: line is longer than %zu bytes (is this a text file with '\\n' "
                        "line ends?)",
                        r->path, (unsigned long long)r->line + 1, (size_t)GROVE__IO_MAX_LINE);
}

grove_status grove__rd_line(grove__rd *r, char **line, size_t *len, int *got)
{
    char *s;
    size_t n;
    for (;;) {
        size_t have = r->end - r->beg;
        char *nl = (char *)memchr(r->buf + r->beg + r->scan, '\n', have - r->scan);
        if (nl) {
            s = r->buf + r->beg;
            n = (size_t)(nl - s);
            r->beg += n + 1;
            break;
        }
        r->scan = have;
        if (have > GROVE__IO_MAX_LINE) return long_line(r);
        if (r->eof) {
            if (have == 0) {
                *got = 0;
                return GROVE_OK;
            }
            s = r->buf + r->beg;
            n = have;
            r->beg = r->end; /* the spare byte at buf[end] takes the NUL */
            break;
        }
        GROVE_TRY(rd_fill(r, GROVE__IO_CHUNK));
    }
    r->scan = 0;
    if (n > 0 && s[n - 1] == '\r') n--;
    s[n] = '\0';
    r->line++;
    *line = s;
    *len = n;
    *got = 1;
    return GROVE_OK;
}

grove_status grove__rd_need(grove__rd *r, size_t n, size_t *avail)
{
    while (r->end - r->beg < n && !r->eof) GROVE_TRY(rd_fill(r, n - (r->end - r->beg)));
    *avail = r->end - r->beg;
    return GROVE_OK;
}

grove_status grove__rd_skip(grove__rd *r, uint64_t n, uint64_t *done)
{
    *done = 0;
    r->scan = 0;
    while (n > 0) {
        size_t have = r->end - r->beg, k;
        if (have == 0) {
            if (r->eof) break;
            GROVE_TRY(rd_fill(r, GROVE__IO_CHUNK));
            continue;
        }
        k = (uint64_t)have < n ? have : (size_t)n;
        r->beg += k;
        n -= k;
        *done += k;
    }
    return GROVE_OK;
}

grove_status grove__rd_skip_bom(grove__rd *r)
{
    size_t avail;
    GROVE_TRY(grove__rd_need(r, 3, &avail));
    if (avail >= 3 && memcmp(r->buf + r->beg, "\xEF\xBB\xBF", 3) == 0) r->beg += 3;
    return GROVE_OK;
}

grove_status grove__rd_pieces(grove__rd *r, int n, char **at, int *np)
{
    size_t avail, look;
    char *b, *cut = NULL;
    *np = 0;
    GROVE_TRY(grove__rd_need(r, GROVE__IO_BLOCK, &avail));
    if (avail == 0) return GROVE_OK;
    b = r->buf + r->beg;
    look = avail < GROVE__IO_BLOCK ? avail : GROVE__IO_BLOCK;
    for (size_t i = look; i-- > 0;)
        if (b[i] == '\n') {
            cut = b + i + 1;
            break;
        }
    if (!cut) {
        if (avail > GROVE__IO_MAX_LINE) return long_line(r);
        cut = b + avail; /* the file's last line, without a '\n' */
    }
    {
        const size_t per = (size_t)(cut - b) / (size_t)n + 1;
        at[0] = b;
        while (at[*np] < cut && *np < n) {
            char *p = at[*np], *e = *np == n - 1 || (size_t)(cut - p) <= per ? cut : p + per;
            if (e < cut) {
                char *q = (char *)memchr(e - 1, '\n', (size_t)(cut - (e - 1)));
                e = q ? q + 1 : cut;
            }
            at[++*np] = e;
        }
    }
    return GROVE_OK;
}

void grove__rd_consume(grove__rd *r, size_t bytes, uint64_t lines)
{
    r->beg += bytes;
    r->line += lines;
    r->scan = 0;
}

/* ---- numbers ---- */

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Case-insensitive s[0..len) == lit (lit lower case). */
static int ieq(const char *s, size_t len, const char *lit)
{
    size_t i;
    for (i = 0; i < len; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (lit[i] == '\0' || c != lit[i]) return 0;
    }
    return lit[i] == '\0';
}

/* NaN or infinity spelled as strtof would accept it, after an optional sign. */
static int special_kind(const char *s, size_t len)
{
    if (len > 0 && (s[0] == '+' || s[0] == '-')) {
        s++;
        len--;
    }
    if (ieq(s, len, "inf") || ieq(s, len, "infinity")) return GROVE__NUM_INF;
    if (ieq(s, len, "nan") || (len >= 5 && ieq(s, 4, "nan(") && s[len - 1] == ')'))
        return GROVE__NUM_NAN;
    return GROVE__NUM_OK;
}

int grove__looks_numeric(const char *s, size_t len)
{
    if (len == 0) return 0;
    if (is_digit(s[0]) || s[0] == '+' || s[0] == '-' || s[0] == '.') return 1;
    return special_kind(s, len) != GROVE__NUM_OK;
}

/* Exact powers of ten in double (10^22 < 2^53 * 2^22 is the last one without rounding). */
static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Clinger's fast path: with m < 10^15 < 2^53 and |e10| <= 22 both operands are exact doubles,
 * so m * 10^e10 (or m / 10^-e10) is the correctly rounded double r of the value, the result
 * for f64. Rounding r again to float is correct too unless r lies exactly halfway between two
 * floats (a double rounding could only go wrong there); the results here are between 1e-22
 * and 1e38, normal as floats, so halfway means the 29 low fraction bits are 1 followed by
 * zeros. @return 1 with *out set, or 0 where strtod / strtof must decide. */
static int fast_path(uint64_t m, long long e10, int neg, int f64, double *out)
{
    double r;
    uint64_t bits;
    if (e10 < -22 || e10 > 22) return 0;
    r = e10 >= 0 ? (double)m * pow10_exact[e10] : (double)m / pow10_exact[-e10];
    if (!f64) {
        memcpy(&bits, &r, 8);
        if ((bits & 0x1FFFFFFFu) == 0x10000000u) return 0;
        r = (double)(float)r;
    }
    *out = neg ? -r : r;
    return 1;
}

/* strtod or strtof of a string in the C grammar that has no decimal point. */
static double c_strto(const char *t, char **end, int f64)
{
    return f64 ? strtod(t, end) : (double)strtof(t, end);
}

int grove__parse_real(char *s, size_t len, int f64, double *out)
{
    size_t i = 0, int0, nint, frac0 = 0, nfrac = 0, nsig = 0;
    int dot = 0, eneg = 0, neg, special;
    long long e = 0, e10;
    uint64_t m = 0;
    char *end;
    double v;

    special = special_kind(s, len);
    if (special != GROVE__NUM_OK) return special;
    neg = len > 0 && s[0] == '-';
    if (i < len && (s[i] == '+' || s[i] == '-')) i++;
    int0 = i;
    /* m gathers the significant digits (leading zeros dropped) while there are at most 15. */
    for (; i < len && is_digit(s[i]); i++)
        if (m || s[i] != '0') {
            if (++nsig <= 15) m = m * 10 + (uint64_t)(s[i] - '0');
        }
    nint = i - int0;
    if (i < len && s[i] == '.') {
        dot = 1;
        frac0 = ++i;
        for (; i < len && is_digit(s[i]); i++)
            if (m || s[i] != '0') {
                if (++nsig <= 15) m = m * 10 + (uint64_t)(s[i] - '0');
            }
        nfrac = i - frac0;
    }
    if (nint + nfrac == 0) return GROVE__NUM_BAD;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
        if (i >= len || !is_digit(s[i])) return GROVE__NUM_BAD;
        /* Saturate: beyond 10^9 every nonzero value over- or underflows anyway. */
        for (; i < len && is_digit(s[i]); i++)
            if (e < 1000000000) e = e * 10 + (s[i] - '0');
    }
    if (i != len) return GROVE__NUM_BAD;
    e10 = (eneg ? -e : e) - (long long)nfrac;

    if (m == 0) { /* all digits zero, whatever the exponent */
        *out = neg ? -0.0 : 0.0;
        return GROVE__NUM_OK;
    }
    if (nsig <= 15 && fast_path(m, e10, neg, f64, out)) return GROVE__NUM_OK;

    if (!dot) {
        char keep = s[len];
        s[len] = '\0';
        v = c_strto(s, &end, f64);
        s[len] = keep;
        if (end != s + len) return GROVE__NUM_BAD;
    } else {
        /* sign, all digits, then the exponent moved by the number of fraction digits. */
        char small[128], *t = small;
        size_t k = 0, need = len + 32;
        if (need > sizeof small) {
            t = (char *)malloc(need);
            if (!t) return GROVE__NUM_NOMEM;
        }
        if (s[0] == '+' || s[0] == '-') t[k++] = s[0];
        memcpy(t + k, s + int0, nint);
        k += nint;
        memcpy(t + k, s + frac0, nfrac);
        k += nfrac;
        snprintf(t + k, need - k, "e%lld", e10);
        v = c_strto(t, &end, f64);
        if (*end != '\0') v = NAN; /* cannot happen: t is digits and an exponent */
        if (t != small) free(t);
        if (isnan(v)) return GROVE__NUM_BAD;
    }
    if (isinf(v)) return GROVE__NUM_RANGE;
    *out = v;
    return GROVE__NUM_OK;
}

int grove__parse_float(char *s, size_t len, float *out)
{
    double v;
    int rc = grove__parse_real(s, len, 0, &v);
    if (rc == GROVE__NUM_OK) *out = (float)v;
    return rc;
}

void grove__quote(char *dst, size_t dst_size, const char *s, size_t len)
{
    size_t i, k = 0, max = 40;
    if (dst_size < max + 4) max = dst_size > 4 ? dst_size - 4 : 0;
    for (i = 0; i < len && k < max; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[k++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (i < len && dst_size >= 4) {
        memcpy(dst + k, "...", 3);
        k += 3;
    }
    if (dst_size) dst[k < dst_size ? k : dst_size - 1] = '\0';
}

grove_status grove__pts_reserve(grove_ctx *ctx, grove__pts *out, size_t *cap, size_t want,
                                size_t limit)
{
    size_t nc = *cap ? *cap : 4096;
    size_t per = (size_t)out->dims * (out->f64 ? sizeof(double) : sizeof(float));
    void *p;
    if (want <= *cap) return GROVE_OK;
    while (nc < want) {
        if (nc > SIZE_MAX / 2) {
            nc = want;
            break;
        }
        nc *= 2;
    }
    if (limit && nc > limit) nc = limit;
    if (nc < want) nc = want;
    if (nc > SIZE_MAX / per)
        return grove__error(ctx, GROVE_ERR_LIMIT, "%zu points do not fit in memory", want);
    p = realloc(out->xyz, nc * per);
    if (!p)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "out of memory for %zu points (%zu bytes)", nc, nc * per);
    out->xyz = p;
    *cap = nc;
    return GROVE_OK;
}

/* ---- public API ---- */

/* Case-insensitive: does the file name (after the last '/') end in "." ext? */
static int has_ext(const char *path, const char *ext)
{
    const char *base = strrchr(path, '/'), *dot;
    base = base ? base + 1 : path;
    dot = strrchr(base, '.');
    return dot && dot != base && ieq(dot + 1, strlen(dot + 1), ext);
}

static grove_point_format format_by_ext(const char *path)
{
    if (has_ext(path, "ply")) return GROVE_POINTS_PLY;
    if (has_ext(path, "csv") || has_ext(path, "txt") || has_ext(path, "xyz"))
        return GROVE_POINTS_TEXT;
    return GROVE_POINTS_AUTO;
}

void grove_points_free(grove_points *p)
{
    if (!p) return;
    free(p->xyz);
    p->xyz = NULL;
    p->n = 0;
    p->dims = 0;
}

void grove_points64_free(grove_points64 *p)
{
    if (!p) return;
    free(p->xyz);
    p->xyz = NULL;
    p->n = 0;
    p->dims = 0;
}

/* The body of grove_points_read (f64 = 0) and grove_points64_read (f64 = 1), fn naming the
 * call in messages. *out is zeroed first, and again on failure; have_out is 0 when the
 * caller's out pointer is NULL. */
static grove_status read_points(grove_ctx *ctx, const char *fn, const char *path,
                                grove_point_format fmt, int dims, int have_out, grove__pts *out)
{
    grove__rd r;
    grove_status st;
    int f64 = out->f64;

    memset(out, 0, sizeof *out);
    out->f64 = f64;
    GROVE_TRY(grove__check_ctx(ctx));
    if (!have_out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    if (!path) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: path is NULL", fn);
    if ((int)fmt < GROVE_POINTS_AUTO || (int)fmt > GROVE_POINTS_PLY)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: fmt must be GROVE_POINTS_AUTO, _TEXT or _PLY, got %d", fn,
                            (int)fmt);
    if (dims != 0 && dims != 2 && dims != 3)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: dims must be 0 (as in the file), 2 or 3, got %d", fn, dims);

    GROVE_TRY(grove__rd_open(&r, ctx, path));
    if (fmt == GROVE_POINTS_AUTO) fmt = format_by_ext(path);
    if (fmt == GROVE_POINTS_AUTO) {
        size_t avail;
        st = grove__rd_need(&r, 5, &avail);
        if (st != GROVE_OK) goto _end;
        fmt = ((avail >= 4 && memcmp(r.buf + r.beg, "ply\n", 4) == 0) ||
               (avail >= 5 && memcmp(r.buf + r.beg, "ply\r\n", 5) == 0))
                  ? GROVE_POINTS_PLY
                  : GROVE_POINTS_TEXT;
    }
    st = fmt == GROVE_POINTS_PLY ? grove__read_ply(&r, dims, out) : grove__read_text(&r, dims, out);
_end:
    grove__rd_close(&r);
    if (st != GROVE_OK) {
        free(out->xyz);
        memset(out, 0, sizeof *out);
        return st;
    }
    if (out->n == 0) {
        free(out->xyz);
        out->xyz = NULL;
    } else {
        /* Give back the unused part of the geometric growth; keep the block if that fails. */
        size_t size = out->f64 ? sizeof(double) : sizeof(float);
        void *p = realloc(out->xyz, out->n * (size_t)out->dims * size);
        if (p) out->xyz = p;
    }
    return GROVE_OK;
}

grove_status grove_points_read(grove_ctx *ctx, const char *path, grove_point_format fmt, int dims,
                               grove_points *out)
{
    grove__pts p = {NULL, 0, 0, 0};
    grove_status st = read_points(ctx, "grove_points_read", path, fmt, dims, out != NULL, &p);
    if (out) {
        out->xyz = (float *)p.xyz;
        out->n = p.n;
        out->dims = p.dims;
    }
    return st;
}

grove_status grove_points64_read(grove_ctx *ctx, const char *path, grove_point_format fmt, int dims,
                                 grove_points64 *out)
{
    grove__pts p = {NULL, 0, 0, 1};
    grove_status st = read_points(ctx, "grove_points64_read", path, fmt, dims, out != NULL, &p);
    if (out) {
        out->xyz = (double *)p.xyz;
        out->n = p.n;
        out->dims = p.dims;
    }
    return st;
}

/* ---- writer ---- */

typedef struct wbuf {
    FILE *f;
    char buf[1 << 16];
    size_t n;
    int err; /* errno of the first failed write, 0 if none */
} wbuf;

static void wb_flush(wbuf *w)
{
    errno = 0;
    if (w->n && !w->err && fwrite(w->buf, 1, w->n, w->f) != w->n) w->err = errno ? errno : EIO;
    w->n = 0;
}

static void wb_put(wbuf *w, const void *p, size_t n)
{
    if (w->n + n > sizeof w->buf) wb_flush(w);
    memcpy(w->buf + w->n, p, n);
    w->n += n;
}

/* 10^q for q in [-31, 54] (q = 8 - k reaches [-30, 53] for floats), each the double nearest to
 * it (the compiler rounds the literals). */
static const double k_pow10[] = {
    1e-31, 1e-30, 1e-29, 1e-28, 1e-27, 1e-26, 1e-25, 1e-24, 1e-23, 1e-22, 1e-21, 1e-20, 1e-19,
    1e-18, 1e-17, 1e-16, 1e-15, 1e-14, 1e-13, 1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5,
    1e-4, 1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
    1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27,
    1e28, 1e29, 1e30, 1e31, 1e32, 1e33, 1e34, 1e35, 1e36, 1e37, 1e38, 1e39, 1e40, 1e41, 1e42,
    1e43, 1e44, 1e45, 1e46, 1e47, 1e48, 1e49, 1e50, 1e51, 1e52, 1e53, 1e54
};
#define POW10(q) k_pow10[(q) + 31]

/* %.9g of a finite float without printf (which took ~20 s of a 30 s CSV write of 1.8 x 10^7
 * vertices), or 0 when the rounding to 9 digits is too close to call and printf must decide.
 * printf's bytes in the default rounding mode (to nearest), the only one the library runs in;
 * under fesetround printf would round the other way, this function does not.
 * The value is exact as a double; s = |v| 10^(8 - k) is computed with two roundings (the power
 * and the product, relative error < 2.3 x 10^-16), so for s in [10^8, 10^9) it is within
 * 2.3 x 10^-7 of the exact scaled value: when its fraction is more than 10^-6 from one half,
 * the nearest integer N is the correctly rounded 9-digit mantissa that printf gives. Near the
 * ends of [10^8, 10^9) either choice of k gives the same digits (a carry to 10^9 becomes 10^8
 * at k + 1). Then the %g layout: exponent form when k < -4 or k >= 9, trailing zeros dropped. */
static size_t format_float_fast(char *dst, float v)
{
    char *p = dst, d[9];
    const double a = fabs((double)v);
    uint64_t bits;
    if (signbit(v)) *p++ = '-';
    if (a == 0.0) {
        *p++ = '0';
        *p = '\0';
        return (size_t)(p - dst);
    }
    memcpy(&bits, &a, sizeof bits);
    /* a in [2^e, 2^(e+1)): floor(log10 a) is k or k + 1 (doubles have no subnormal floats) */
    const int e = (int)((bits >> 52) & 0x7ff) - 1023;
    int k = (int)floor(e * 0.30102999566398120);
    double s = a * POW10(8 - k);
    if (s >= 1e9) s = a * POW10(8 - ++k);
    if (s < 1e8) s = a * POW10(8 - --k);
    const double fl = floor(s), fr = s - fl;
    if (!(s >= 1e8 && s < 1e9) || fabs(fr - 0.5) < 1e-6) return 0;
    uint32_t n = (uint32_t)fl + (fr > 0.5);
    if (n == 1000000000u) n = 100000000u, k++;
    for (int i = 8; i >= 0; i--, n /= 10) d[i] = (char)('0' + n % 10);
    int nd = 9;
    while (nd > 1 && d[nd - 1] == '0') nd--;
    if (k < -4 || k >= 9) {
        *p++ = d[0];
        if (nd > 1) {
            *p++ = '.';
            for (int i = 1; i < nd; i++) *p++ = d[i];
        }
        const int x = k < 0 ? -k : k;
        *p++ = 'e';
        *p++ = k < 0 ? '-' : '+';
        if (x >= 10) *p++ = (char)('0' + x / 10);
        else *p++ = '0';
        *p++ = (char)('0' + x % 10);
    } else if (k >= 0) {
        for (int i = 0; i <= k; i++) *p++ = d[i];
        if (nd > k + 1) {
            *p++ = '.';
            for (int i = k + 1; i < nd; i++) *p++ = d[i];
        }
    } else {
        *p++ = '0';
        *p++ = '.';
        for (int i = 0; i < -k - 1; i++) *p++ = '0';
        for (int i = 0; i < nd; i++) *p++ = d[i];
    }
    *p = '\0';
    return (size_t)(p - dst);
}

/* %.9g (enough digits for any float to read back exactly) with '.' as the decimal point
 * whatever the locale; "nan", "inf" and "-inf" for the values that are not finite (which the
 * writers reject before they write). The fast path above gives printf's bytes for nearly every
 * finite value; otherwise (rounding too close to call) printf does it, and any run of bytes
 * it wrote that is not part of a C-locale number is the locale's decimal point. */
size_t grove__format_float(char *dst, float v)
{
    char t[48];
    size_t k = 0;
    if (!isfinite(v)) {
        const char *w = isnan(v) ? "nan" : v < 0 ? "-inf" : "inf";
        k = strlen(w);
        memcpy(dst, w, k + 1);
        return k;
    }
    if ((k = format_float_fast(dst, v)) != 0) return k;
    int len = snprintf(t, sizeof t, "%.9g", (double)v);
    /* whatever the locale's decimal point is (one or more bytes), it becomes '.' */
    for (int i = 0; i < len && k < 31; i++) {
        char c = t[i];
        if (is_digit(c) || c == '-' || c == '+' || c == 'e' || c == 'E')
            dst[k++] = c;
        else if (k == 0 || dst[k - 1] != '.')
            dst[k++] = '.';
    }
    dst[k] = '\0';
    return k;
}

static void wb_u32le(wbuf *w, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    wb_put(w, b, 4);
}

grove_status grove__rows_init(grove_ctx *ctx, const char *fn, const char *path, grove__rows *w,
                              size_t n, size_t row_max)
{
    int nt = grove__threads(ctx);
    if ((size_t)nt * GROVE__ROWS_BATCH > n) /* no more threads than batches */
        nt = (int)((n + GROVE__ROWS_BATCH - 1) / GROVE__ROWS_BATCH);
    if (nt < 1) nt = 1;
    w->nt = nt;
    w->row_max = row_max;
    w->buf = (char *)malloc((size_t)nt * GROVE__ROWS_BATCH * row_max);
    w->len = (size_t *)malloc((size_t)nt * sizeof(size_t));
    if (!w->buf || !w->len) {
        grove__rows_free(w);
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "%s: %s: out of memory for %d buffers of %d rows", fn, path, nt,
                            GROVE__ROWS_BATCH);
    }
    return GROVE_OK;
}

void grove__rows_write(grove__rows *w, FILE *f, int *err, size_t n, grove__rows_fmt fmt,
                       const void *arg)
{
    const int nt = w->nt;
    const size_t stride = (size_t)GROVE__ROWS_BATCH * w->row_max;
    for (size_t base = 0; base < n && !*err; base += (size_t)nt * GROVE__ROWS_BATCH) {
#pragma omp parallel for num_threads(nt) schedule(static, 1)
        for (int i = 0; i < nt; i++) {
            const size_t i0 = base + (size_t)i * GROVE__ROWS_BATCH;
            const size_t i1 = i0 + GROVE__ROWS_BATCH < n ? i0 + GROVE__ROWS_BATCH : n;
            w->len[i] = i0 < i1 ? fmt(arg, w->buf + (size_t)i * stride, i0, i1) : 0;
        }
        for (int i = 0; i < nt && !*err; i++) {
            errno = 0;
            if (w->len[i] && fwrite(w->buf + (size_t)i * stride, 1, w->len[i], f) != w->len[i])
                *err = errno ? errno : EIO;
        }
    }
}

void grove__rows_free(grove__rows *w)
{
    free(w->buf);
    free(w->len);
    w->buf = NULL;
    w->len = NULL;
}

/* A text row is at most TEXT_ROW bytes: three floats of at most 15 characters, two commas, the
 * newline. */
#define TEXT_ROW 64

/* grove__rows_fmt of a grove_points: rows i0..i1. */
static size_t text_rows(const void *arg, char *dst, size_t i0, size_t i1)
{
    const grove_points *p = (const grove_points *)arg;
    size_t k = 0;
    for (size_t i = i0; i < i1; i++) {
        const float *q = p->xyz + i * (size_t)p->dims;
        for (int d = 0; d < p->dims; d++) {
            if (d) dst[k++] = ',';
            k += grove__format_float(dst + k, q[d]);
        }
        dst[k++] = '\n';
    }
    return k;
}

static void write_ply(wbuf *w, const grove_points *p)
{
    char h[256];
    int len = snprintf(h, sizeof h,
                       "ply\nformat binary_little_endian 1.0\ncomment written by grove %s\n"
                       "element vertex %zu\nproperty float x\nproperty float y\n%s"
                       "end_header\n",
                       grove_version(), p->n, p->dims == 3 ? "property float z\n" : "");
    size_t i, m = p->n * (size_t)p->dims;
    wb_put(w, h, (size_t)len);
    for (i = 0; i < m; i++) {
        uint32_t u;
        memcpy(&u, &p->xyz[i], 4);
        wb_u32le(w, u);
    }
}

grove_status grove_points_write(grove_ctx *ctx, const char *path, grove_point_format fmt,
                                const grove_points *p)
{
    static const char fn[] = "grove_points_write";
    grove_status st = GROVE_OK;
    char *tmp = NULL;
    wbuf *w = NULL;
    size_t i, m;
    grove__rows rows = {NULL, NULL, 0, 1};

    GROVE_TRY(grove__check_ctx(ctx));
    if (!path) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: path is NULL", fn);
    if (!p) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: p is NULL", fn);
    if (p->dims != 2 && p->dims != 3)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: p->dims must be 2 or 3, got %d", fn,
                            p->dims);
    if (p->n > 0 && !p->xyz)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: p->xyz is NULL with p->n = %zu", fn,
                            p->n);
    if ((int)fmt < GROVE_POINTS_AUTO || (int)fmt > GROVE_POINTS_PLY)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: fmt must be GROVE_POINTS_AUTO, _TEXT or _PLY, got %d", fn,
                            (int)fmt);
    if (fmt == GROVE_POINTS_AUTO) fmt = format_by_ext(path);
    if (fmt == GROVE_POINTS_AUTO)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: %s: cannot choose a format from the file name (want .ply, .csv, "
                            ".txt or .xyz); pass GROVE_POINTS_TEXT or GROVE_POINTS_PLY",
                            fn, path);
    if (p->n > SIZE_MAX / 3)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: p->n = %zu is too large", fn, p->n);
    m = p->n * (size_t)p->dims;
    for (i = 0; i < m; i++)
        if (!isfinite(p->xyz[i]))
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: %s: point %zu has %s in coordinate %d; the file could not be "
                                "read back, nothing written",
                                fn, path, i / (size_t)p->dims,
                                isnan(p->xyz[i]) ? "NaN" : "infinity", (int)(i % (size_t)p->dims));

    if (fmt != GROVE_POINTS_PLY) GROVE_TRY(grove__rows_init(ctx, fn, path, &rows, p->n, TEXT_ROW));
    w = (wbuf *)malloc(sizeof *w);
    if (!w) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto _end;
    }
    w->n = 0;
    w->err = 0;
    GROVE_TRY_END(st, grove__wfile_open(ctx, path, &tmp, &w->f));
    if (fmt == GROVE_POINTS_PLY) {
        write_ply(w, p);
        wb_flush(w);
    } else {
        wb_put(w, p->dims == 3 ? "x,y,z\n" : "x,y\n", p->dims == 3 ? 6 : 4);
        wb_flush(w);
        grove__rows_write(&rows, w->f, &w->err, p->n, text_rows, p);
    }
    st = grove__wfile_commit(ctx, path, tmp, w->f, w->err);
    tmp = NULL;
    w->f = NULL;
_end:
    free(tmp);
    free(w);
    grove__rows_free(&rows);
    return st;
}
