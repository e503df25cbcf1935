/*
 * bezier_io.h - what the bezier module's two curve readers share (not installed; C only): the
 * growing curve array they append to (bezier_io.c) and the SVG reader (bezier_svg.c) that
 * grove_curves_read() calls.
 */
#ifndef GROVE_BEZIER_IO_H
#define GROVE_BEZIER_IO_H

#include <stddef.h>

#include "../io/io_internal.h"
#include "grove/bezier.h"

/* The curves read so far: out's arrays have room for cap curves (grown geometrically). */
typedef struct grove__bz_sink {
    grove_ctx *ctx;
    grove_curves *out;
    size_t cap;
} grove__bz_sink;

/* Appends one curve of degree deg whose deg + 1 control points are xy[0..2 deg + 1]. */
grove_status grove__bz_sink_push(grove__bz_sink *s, int deg, const float *xy);

/* Reads the whole SVG file behind r (opened by the caller, who closes it) and appends the
 * curves of its <path> elements, transformed, to sink. */
grove_status grove__bz_read_svg(grove__rd *r, grove__bz_sink *sink);

#endif /* GROVE_BEZIER_IO_H */
