/*
 * svg.h - a small SVG writer for the `grove` tool's pictures (not part of the library).
 *
 * The picture shows a data box (xmin, ymin, xmax, ymax) in data coordinates. The writer maps
 * it to pixels itself, with y flipped so that y grows upward, and writes the pixel coordinates
 * with at most two decimals (trailing zeros and "-0" dropped): renderers hold coordinates in
 * float, so writing data coordinates (which may be 1e30 wide, or 1e-40) into a viewBox would
 * lose the picture; pixels also keep the file small. Styles are SVG attributes given as text,
 * usually once per group:
 *
 *     svg_writer w;
 *     double box[4] = {0, 0, 10, 5};
 *     svg_begin(&w, o.f, box, 1024, "my picture");
 *     svg_comment(&w, "%zu points", n);
 *     svg_group_begin(&w, "fill=\"none\" stroke=\"#888\" stroke-width=\"0.5\"");
 *     svg_rect(&w, 0, 0, 5, 2.5);
 *     svg_group_end(&w);
 *     svg_dots_begin(&w, 2.0, "#c00");
 *     for (i = 0; i < n; i++) svg_dot(&w, x[i], y[i]);
 *     svg_dots_end(&w);
 *     svg_end(&w);
 *
 * Write errors are not reported call by call: check ferror() (cli_outfile_commit does) at
 * the end.
 */
#ifndef GROVE_SVG_H
#define GROVE_SVG_H

#include <stddef.h>
#include <stdio.h>

typedef struct svg_writer {
    FILE *f;
    double x0, y1;        /* data xmin and ymax: the top-left corner */
    double scale;         /* pixels per data unit */
    double ox, oy;        /* pixel offset of (x0, y1): the margin, plus centering */
    double width, height; /* the picture, in pixels */
    size_t dots;          /* dots in the current svg_dots_begin() path */
    int in_dots;
} svg_writer;

/* Starts a picture on f showing box[4] = {xmin, ymin, xmax, ymax} (finite; an empty or
 * degenerate box is widened so that the picture is never zero-sized), with its longer side
 * `size` pixels plus a small margin. Writes <svg> with width, height and viewBox (no XML
 * declaration: the file is UTF-8, the default), a <title> (title may be NULL) and a white
 * background. */
void svg_begin(svg_writer *w, FILE *f, const double box[4], double size, const char *title);

/* Writes </svg>. */
void svg_end(svg_writer *w);

/* Writes an XML comment (printf-style); "--", which a comment may not hold, becomes "- -". */
void svg_comment(svg_writer *w, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* <g ATTRS> ... </g>: attrs is raw attribute text such as "stroke=\"#000\"" (may be NULL). */
void svg_group_begin(svg_writer *w, const char *attrs);
void svg_group_end(svg_writer *w);

/* A rectangle given by its data corners; styled by the enclosing group. */
void svg_rect(svg_writer *w, double xmin, double ymin, double xmax, double ymax);

/* A circle at a data point with a radius in pixels. */
void svg_circle(svg_writer *w, double x, double y, double r_px);

/* Many dots drawn as one path of zero-length round-capped strokes: about 14 bytes a dot instead
 * of about 40 for a <circle>. diameter_px is the dot's size, color any SVG color. */
void svg_dots_begin(svg_writer *w, double diameter_px, const char *color);
void svg_dot(svg_writer *w, double x, double y);
void svg_dots_end(svg_writer *w);

/* A polyline through n data points, styled by attrs (raw attribute text, may be NULL; the
 * default has no fill). xy holds the points at xy[i*stride], xy[i*stride+1]: stride 2 for
 * packed pairs, 3 to draw x, y of x, y, z triples. The _f variant takes floats. */
void svg_polyline(svg_writer *w, const double *xy, size_t n, size_t stride, const char *attrs);
void svg_polyline_f(svg_writer *w, const float *xy, size_t n, size_t stride, const char *attrs);

/* Text at a data point, font size in pixels; &, < and > are escaped. */
void svg_text(svg_writer *w, double x, double y, double size_px, const char *text);

/* The pixel position of a data point (for callers that write their own elements). */
double svg_px(const svg_writer *w, double x);
double svg_py(const svg_writer *w, double y);

/* Writes v with at most two decimals, without trailing zeros; "-0" is written as "0". */
void svg_num(FILE *f, double v);

#endif /* GROVE_SVG_H */
