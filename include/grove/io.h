/*
 * io.h - reading and writing point files: CSV / whitespace text and PLY.
 *
 * Formats (docs/FORMATS.md has the exact rules):
 *   text  .csv .txt .xyz: one point per line, x and y (and z) in the first columns, separated
 *         by commas and/or whitespace; extra columns ignored; '#' comment lines; an optional
 *         header line.
 *   PLY   ascii, binary_little_endian, binary_big_endian 1.0; the `vertex` element's x, y and
 *         optional z properties, of any PLY scalar type; other properties and elements skipped.
 * A point's index is its 0-based record order in the file (comment, blank and header lines do
 * not count). Coordinates are stored as float (grove_points_read) or double
 * (grove_points64_read): every value must be finite and round to a finite value of that type
 * (|v| up to about 3.4e38 for float); NaN, infinity and larger values are bad input.
 *
 * Reading streams through a fixed buffer and grows the result geometrically, so time and
 * memory are linear in the file size. Errors name the file and where: "FILE:LINE: ..." in
 * text (and ASCII PLY bodies), "FILE: vertex record R: ..." in binary PLY bodies (R 0-based,
 * the index the point would have had), "FILE: header line L: ..." in PLY headers.
 *
 * These calls do no device work; any context (CPU or CUDA) can be passed. Number parsing and
 * printing do not depend on the C locale (LC_NUMERIC).
 */
#ifndef GROVE_IO_H
#define GROVE_IO_H

#include "grove/grove.h"

#ifdef __cplusplus
extern "C" {
#endif

/* n points of `dims` (2 or 3) interleaved floats: x0 y0 [z0] x1 y1 [z1] ... */
typedef struct grove_points {
    float *xyz; /* n * dims floats; NULL when n == 0 */
    size_t n;
    int dims;
} grove_points;

typedef enum grove_point_format {
    GROVE_POINTS_AUTO = 0, /* by extension: .ply PLY; .csv .txt .xyz text; else (reading only)
                              PLY if the file starts with "ply" and a newline, else text */
    GROVE_POINTS_TEXT = 1,
    GROVE_POINTS_PLY = 2
} grove_point_format;

/*! grove_points_read() :
 *  Reads the points of the file at `path` into *out. dims: 0 takes the file's dimension (PLY:
 *  3 if the vertex element has a z property; text: see docs/FORMATS.md), 2 reads x and y only
 *  (z is ignored, not even parsed), 3 requires z (a 2-D file is bad input).
 *  *out is always overwritten: on success out->xyz is a new allocation owned by the caller,
 *  freed with grove_points_free() (NULL when the file holds no points); on failure *out is
 *  {NULL, 0, 0}. The context's last error says what failed and where.
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG (NULL ctx/path/out, bad fmt or dims),
 *  GROVE_ERR_BAD_INPUT (malformed file, NaN/infinity, value out of float range, truncated
 *  file), GROVE_ERR_IO (cannot open or read; the message has strerror), GROVE_ERR_LIMIT (a
 *  text line longer than 1 MiB) or GROVE_ERR_OUT_OF_MEMORY. */
grove_status grove_points_read(grove_ctx *ctx, const char *path, grove_point_format fmt, int dims,
                               grove_points *out);

/*! grove_points_free() :
 *  Frees out->xyz of a struct filled by grove_points_read() and zeroes the struct. Accepts
 *  NULL and zeroed structs. Do not pass a struct whose xyz the caller allocated otherwise. */
void grove_points_free(grove_points *p);

/* ---- double precision ---- */

/* n points of `dims` (2 or 3) interleaved doubles: x0 y0 [z0] x1 y1 [z1] ... */
typedef struct grove_points64 {
    double *xyz; /* n * dims doubles; NULL when n == 0 */
    size_t n;
    int dims;
} grove_points64;

/*! grove_points64_read() :
 *  grove_points_read() in double precision, for coordinates that need more than a float's 24
 *  bits (UTM or geocentric metres with centimetres, say). The same formats, dims rule, record
 *  order, statuses and messages, with these differences: text numbers are correctly rounded to
 *  double (as strtod would in the C locale); a value that rounds to infinity in double (|v| of
 *  about 1.8e308 or more) is GROVE_ERR_BAD_INPUT, "... out of double range: '1e309'"; binary
 *  PLY values of any type are kept exactly (float and integer properties widened, double
 *  properties as stored); an ASCII PLY value is rounded to its property's type (a float
 *  property to float, then widened; a double property to double), so it reads as its binary
 *  twin would. *out is always overwritten: on success out->xyz is a new allocation owned by
 *  the caller, freed with grove_points64_free() (NULL when the file holds no points); on
 *  failure *out is {NULL, 0, 0}.
 *  @return as grove_points_read(). */
grove_status grove_points64_read(grove_ctx *ctx, const char *path, grove_point_format fmt, int dims,
                                 grove_points64 *out);

/*! grove_points64_free() :
 *  Frees out->xyz of a struct filled by grove_points64_read() and zeroes the struct. Accepts
 *  NULL and zeroed structs. */
void grove_points64_free(grove_points64 *p);

/*! grove_points_write() :
 *  Writes p (borrowed; p->xyz may be NULL when p->n == 0) to `path`, replacing any file
 *  there. fmt: GROVE_POINTS_TEXT writes CSV (header "x,y[,z]", '\n' line ends, each value with
 *  9 significant digits, so every float reads back bit-exact); GROVE_POINTS_PLY writes
 *  binary_little_endian PLY with float x, y[, z]; GROVE_POINTS_AUTO chooses by the extension
 *  (.ply, or .csv/.txt/.xyz; any other is GROVE_ERR_INVALID_ARG). The data go to a new
 *  temporary file in the same directory, which is flushed to disk and then renamed over
 *  `path`, so a failure never leaves a partial file at `path`.
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG (NULL pointer, dims not 2 or 3, bad fmt or
 *  extension), GROVE_ERR_BAD_INPUT (a NaN or infinite coordinate: such a file could not be
 *  read back; nothing is written), GROVE_ERR_IO or GROVE_ERR_OUT_OF_MEMORY. */
grove_status grove_points_write(grove_ctx *ctx, const char *path, grove_point_format fmt,
                                const grove_points *p);

/* ---- point clouds: double coordinates with optional attributes ---- */

/* n points with double x, y, z and, where the file has them, 16-bit colour and intensity. */
typedef struct grove_cloud {
    double *xyz;         /* 3 * n; NULL when n == 0 */
    uint16_t *rgb;       /* 3 * n (LAS range 0..65535; 8-bit sources are scaled by 257), or NULL */
    uint16_t *intensity; /* n, or NULL */
    size_t n;
    int has_scale; /* 1 for LAS: its scale and offset below (x = X * scale + offset) */
    double scale[3], offset[3];
} grove_cloud;

typedef enum grove_cloud_format {
    GROVE_CLOUD_AUTO = 0, /* by extension: .las LAS, .laz LAZ (not supported), .ply PLY,
                             .csv .txt .xyz text; else by the first bytes: "LASF" LAS, "ply"
                             and a newline PLY, else text (such a file is opened twice, so a
                             pipe carrying LAS needs a .las name or GROVE_CLOUD_LAS) */
    GROVE_CLOUD_LAS = 1,  /* LAS 1.2-1.4, uncompressed, point formats 0-3 and 6-8 */
    GROVE_CLOUD_PLY = 2,  /* PLY vertex x, y, z; red, green, blue and intensity when present */
    GROVE_CLOUD_TEXT = 3  /* text x y z; with a header naming x, y, z: columns by name, and
                             r/red g/green b/blue (0..255) and i/intensity (0..65535) */
} grove_cloud_format;

/*! grove_cloud_read() :
 *  Reads a 3-D point cloud. LAS: the header's scale and offset are applied in double; errors
 *  name the file and the header field or the point record ("FILE: point record R: ...");
 *  compressed LAZ files and other point formats are GROVE_ERR_UNSUPPORTED with a message
 *  saying so. PLY and text go through grove_points64_read()'s readers (dims 3, double
 *  precision, with its rules and messages), so their coordinates keep every digit a double
 *  holds. Text whose header line names x, y and z is read by column name, with the colour
 *  (r/red, g/green, b/blue: integers 0..255, stored times 257) and intensity (i/intensity:
 *  0..65535) columns it names; without such a header, x y z are the first three columns and
 *  nothing else is read (docs/FORMATS.md). *out is overwritten ({0} on failure); free with
 *  grove_cloud_free().
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG, GROVE_ERR_BAD_INPUT, GROVE_ERR_UNSUPPORTED,
 *  GROVE_ERR_IO, GROVE_ERR_LIMIT, GROVE_ERR_OUT_OF_MEMORY. */
grove_status grove_cloud_read(grove_ctx *ctx, const char *path, grove_cloud_format fmt,
                              grove_cloud *out);

/*! grove_cloud_write_ply() :
 *  Writes binary little-endian PLY: double x, y, z, then ushort red, green, blue and
 *  intensity where the cloud has them. Temporary file, then rename.
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG (NULL ctx/path/c, c->xyz NULL with n > 0),
 *  GROVE_ERR_BAD_INPUT (a NaN or infinite coordinate: nothing is written), GROVE_ERR_IO,
 *  GROVE_ERR_OUT_OF_MEMORY. */
grove_status grove_cloud_write_ply(grove_ctx *ctx, const char *path, const grove_cloud *c);

/*! grove_cloud_free() : frees the arrays and zeroes the struct. Accepts NULL. */
void grove_cloud_free(grove_cloud *c);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_IO_H */
