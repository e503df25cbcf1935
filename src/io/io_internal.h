/*
 * io_internal.h - declarations shared by the io module's files (not installed): the buffered
 * reader, number parsing, result growth and message helpers.
 */
#ifndef GROVE_IO_INTERNAL_H
#define GROVE_IO_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "core.h"
#include "grove/io.h"

/* Bytes read from the file at a time, and the longest line (text, PLY header, ASCII PLY
 * record) accepted. The cap keeps a binary or CR-only file read as text from growing the line
 * buffer to the size of the file. */
#define GROVE__IO_CHUNK ((size_t)1 << 16)
#define GROVE__IO_MAX_LINE ((size_t)1 << 20)

/* A forward-only buffered reader. Bytes [beg, end) of buf are read but not consumed; buf has
 * one spare byte past `end` so a line can be NUL-terminated in place. */
typedef struct grove__rd {
    grove_ctx *ctx;
    const char *path;
    FILE *f;
    char *buf;
    size_t cap, beg, end;
    size_t scan; /* bytes after beg known to hold no '\n' (keeps long-line search linear) */
    int eof;
    uint64_t line; /* 1-based number of the last line returned by grove__rd_line */
} grove__rd;

grove_status grove__rd_open(grove__rd *r, grove_ctx *ctx, const char *path);
void grove__rd_close(grove__rd *r);

/* Next line without its '\n' (and without one '\r' before it), NUL-terminated, writable,
 * valid until the next call. *got is 0 at end of file. */
grove_status grove__rd_line(grove__rd *r, char **line, size_t *len, int *got);

/* Makes at least n bytes contiguous at buf + beg (fewer only at end of file); *avail receives
 * the number of bytes buffered there, which may exceed n. */
grove_status grove__rd_need(grove__rd *r, size_t n, size_t *avail);

/* Consumes up to n bytes; *done receives how many there were before end of file. */
grove_status grove__rd_skip(grove__rd *r, uint64_t n, uint64_t *done);

/* Text rows formatted on the context's threads, GROVE__ROWS_BATCH rows a thread and round, and
 * written in order (the CSV writers). grove__rows_init sizes the buffers for n rows of at most
 * row_max bytes (before the output file is opened, so that running out of memory leaves none;
 * fn and path name the call and file in that error); grove__rows_write formats rows [0, n) with
 * fmt(arg, dst, i0, i1), which returns the bytes it wrote, and writes them to f, keeping the
 * errno of the first failed write in *err (nothing is written once *err is set);
 * grove__rows_free gives the buffers back. */
#define GROVE__ROWS_BATCH 8192
typedef struct grove__rows {
    char *buf;   /* nt x GROVE__ROWS_BATCH x row_max bytes */
    size_t *len; /* each thread's bytes in a round */
    size_t row_max;
    int nt;
} grove__rows;
typedef size_t (*grove__rows_fmt)(const void *arg, char *dst, size_t i0, size_t i1);
grove_status grove__rows_init(grove_ctx *ctx, const char *fn, const char *path, grove__rows *w,
                              size_t n, size_t row_max);
void grove__rows_write(grove__rows *w, FILE *f, int *err, size_t n, grove__rows_fmt fmt,
                       const void *arg);
void grove__rows_free(grove__rows *w);

/* Skips a UTF-8 byte order mark at the start of the file. */
grove_status grove__rd_skip_bom(grove__rd *r);

/* The most bytes grove__rd_pieces hands out at once. */
#define GROVE__IO_BLOCK (GROVE__IO_MAX_LINE + 1)

/* For readers that parse many lines in parallel: the next block of whole lines, at most
 * GROVE__IO_BLOCK bytes, ending after a '\n' or at the end of the file (whose last line may
 * lack it), cut into *np <= n pieces of whole lines of about equal size: piece i is
 * [at[i], at[i + 1]) (at holds n + 1 pointers). *np is 0 at the end of the file. A line over
 * GROVE__IO_MAX_LINE bytes is refused as grove__rd_line refuses it. The bytes stay writable
 * and valid until grove__rd_consume(r, at[*np] - at[0], lines) moves past them (lines: the
 * block's lines). */
grove_status grove__rd_pieces(grove__rd *r, int n, char **at, int *np);
void grove__rd_consume(grove__rd *r, size_t bytes, uint64_t lines);

/* Result of grove__parse_real and grove__parse_float. */
enum {
    GROVE__NUM_OK = 0,
    GROVE__NUM_BAD,   /* not a decimal number */
    GROVE__NUM_NAN,   /* a NaN spelling: nan, NaN, -nan, nan(...) */
    GROVE__NUM_INF,   /* inf, infinity (any case, any sign) */
    GROVE__NUM_RANGE, /* finite, but rounds to +-infinity as a float */
    GROVE__NUM_NOMEM
};

/* Parses s[0..len) (s[len] must be writable) as a decimal number, correctly rounded to double
 * (f64 = 1) or to float (f64 = 0; *out then holds that float exactly). Grammar: [+-] (digits
 * [. digits*] | . digits) [(e|E) [+-] digits]. Underflow rounds to a subnormal or zero and is
 * accepted; a value that rounds to infinity in the chosen precision is GROVE__NUM_RANGE. */
int grove__parse_real(char *s, size_t len, int f64, double *out);

/* grove__parse_real rounding to float. */
int grove__parse_float(char *s, size_t len, float *out);

/* 1 if s[0..len) is spelled like a number, NaN or infinity (starts with a digit, sign or '.',
 * or is a NaN/infinity spelling): such a field is data, never header text. */
int grove__looks_numeric(const char *s, size_t len);

/* Writes v with 9 significant digits ("%.9g", so it reads back bit-exact) and '.' as the decimal
 * point whatever the locale, NUL-terminated, to dst (32 bytes); returns the length. */
size_t grove__format_float(char *dst, float v);

/* Writes s[0..len) for a message: at most 40 bytes, control bytes as '?', "..." if cut. */
void grove__quote(char *dst, size_t dst_size, const char *s, size_t len);

/* What the text and PLY readers fill: n points of `dims` interleaved coordinates, float or
 * double as f64 says (set by the caller before reading), so that grove_points_read,
 * grove_points64_read and grove_cloud_read share one reader per format. */
typedef struct grove__pts {
    void *xyz; /* float * or double *; NULL when nothing was reserved */
    size_t n;
    int dims;
    int f64;
} grove__pts;

/* Stores coordinate i (point i / dims), v already rounded to p's precision. */
static inline void grove__pts_set(grove__pts *p, size_t i, double v)
{
    if (p->f64)
        ((double *)p->xyz)[i] = v;
    else
        ((float *)p->xyz)[i] = (float)v;
}

/* "double" or "float", for messages about a value out of range. */
static inline const char *grove__prec_name(int f64) { return f64 ? "double" : "float"; }

/* Room for at least `want` points in out (out->dims set), capacity in *cap, growing
 * geometrically; `limit` (0: none) caps the capacity (a PLY vertex count). */
grove_status grove__pts_reserve(grove_ctx *ctx, grove__pts *out, size_t *cap, size_t want,
                                size_t limit);

/* Readers; the reader r is open and the caller closes it. dims is 0, 2 or 3. */
grove_status grove__read_text(grove__rd *r, int dims, grove__pts *out);
grove_status grove__read_ply(grove__rd *r, int dims, grove__pts *out);

/* The PLY reader for grove_cloud_read: 3-D points into out (as grove__read_ply with dims 3),
 * and the vertex element's red, green, blue (all three, uchar scaled by 257 or ushort) and
 * intensity (uchar scaled by 257 or ushort) as new arrays of 3 * out->n and out->n values, or
 * NULL where the element has no such properties of those types (and when out->n is 0 or on
 * failure). The arrays may be longer than out->n; the caller frees them. */
grove_status grove__read_ply_cloud(grove__rd *r, grove__pts *out, uint16_t **rgb,
                                   uint16_t **intensity);

/* The text reader for grove_cloud_read (io_text.c): 3-D double points into out (f64 set), and,
 * where a header line names them, the red, green and blue columns (all three, integers 0..255
 * scaled by 257, as the PLY reader stores uchar colour) and the intensity column (0..65535, as
 * stored) as new arrays of at least 3 * out->n and out->n values, or NULL (also when out->n is
 * 0 and on failure). The caller frees them. docs/FORMATS.md has the rules. */
grove_status grove__read_text_cloud(grove__rd *r, grove__pts *out, uint16_t **rgb,
                                    uint16_t **intensity);

/* The LAS reader (io_las.c): fills *out, which is zeroed; on failure the caller frees it. */
grove_status grove__read_las(grove_ctx *ctx, const char *path, grove_cloud *out);

/* GROVE_ERR_UNSUPPORTED with the message for a compressed (LAZ) file. */
grove_status grove__las_laz(grove_ctx *ctx, const char *path);

#endif /* GROVE_IO_INTERNAL_H */
