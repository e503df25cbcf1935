/*
 * svg.c - the SVG writer of the `grove` tool (svg.h).
 */
#include "svg.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

/* Dots per line of a path, and per <path> element: some renderers are slow with one huge d
 * attribute, and short lines keep the file readable in an editor. */
#define DOTS_PER_LINE 16
#define DOTS_PER_PATH 8192

void svg_num(FILE *f, double v)
{
    char buf[64];
    int len;
    if (!isfinite(v)) v = 0.0;
    len = snprintf(buf, sizeof buf, "%.2f", v);
    if (len <= 0 || (size_t)len >= sizeof buf) {
        fputs("0", f);
        return;
    }
    /* "%.2f" always has a '.', so trimming stops there at the latest */
    while (buf[len - 1] == '0') buf[--len] = '\0';
    if (buf[len - 1] == '.') buf[--len] = '\0';
    fputs(strcmp(buf, "-0") == 0 ? "0" : buf, f);
}

static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

double svg_px(const svg_writer *w, double x) { return w->ox + (x - w->x0) * w->scale; }

double svg_py(const svg_writer *w, double y) { return w->oy + (w->y1 - y) * w->scale; }

void svg_begin(svg_writer *w, FILE *f, const double box[4], double size, const char *title)
{
    double x0 = box[0], y0 = box[1], x1 = box[2], y1 = box[3];
    double bw, bh, ext, cw, ch, margin, min_side;
    memset(w, 0, sizeof *w);
    w->f = f;
    if (!(size > 0) || !isfinite(size)) size = 1024;
    if (!isfinite(x0) || !isfinite(y0) || !isfinite(x1) || !isfinite(y1) || x1 < x0 || y1 < y0) {
        x0 = y0 = 0.0;
        x1 = y1 = 1.0;
    }
    bw = x1 - x0;
    bh = y1 - y0;
    ext = bw > bh ? bw : bh;
    /* A box of one point (or none) has no scale of its own: any will do. */
    if (!(ext > 0) || !isfinite(ext)) ext = 1.0;
    w->scale = size / ext;
    /* A very thin box (collinear points) still gets a visible strip, centered. */
    min_side = size / 8;
    cw = bw * w->scale > min_side ? bw * w->scale : min_side;
    ch = bh * w->scale > min_side ? bh * w->scale : min_side;
    margin = size * 0.02 > 4 ? size * 0.02 : 4;
    w->x0 = x0;
    w->y1 = y1;
    w->ox = margin + (cw - bw * w->scale) / 2;
    w->oy = margin + (ch - bh * w->scale) / 2;
    w->width = cw + 2 * margin;
    w->height = ch + 2 * margin;

    fputs("<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"", f);
    svg_num(f, w->width);
    fputs("\" height=\"", f);
    svg_num(f, w->height);
    fputs("\" viewBox=\"0 0 ", f);
    svg_num(f, w->width);
    fputc(' ', f);
    svg_num(f, w->height);
    fputs("\">\n", f);
    if (title) {
        fputs("<title>", f);
        put_escaped(f, title);
        fputs("</title>\n", f);
    }
    fputs("<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n", f);
}

void svg_end(svg_writer *w)
{
    if (w->in_dots) svg_dots_end(w);
    fputs("</svg>\n", w->f);
}

void svg_comment(svg_writer *w, const char *fmt, ...)
{
    char buf[1024];
    char prev = ' ';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fputs("<!-- ", w->f);
    for (const char *c = buf; *c; c++) {
        if (*c == '-' && prev == '-') fputc(' ', w->f);
        fputc(*c, w->f);
        prev = *c;
    }
    fputs(" -->\n", w->f);
}

void svg_group_begin(svg_writer *w, const char *attrs)
{
    if (attrs && attrs[0])
        fprintf(w->f, "<g %s>\n", attrs);
    else
        fputs("<g>\n", w->f);
}

void svg_group_end(svg_writer *w) { fputs("</g>\n", w->f); }

static double round2(double v) { return round(v * 100) / 100; }

void svg_rect(svg_writer *w, double xmin, double ymin, double xmax, double ymax)
{
    /* Corners rounded as they are printed, and the size taken from the rounded corners, so
     * that adjacent boxes share their edges exactly. */
    double x = round2(svg_px(w, xmin)), y = round2(svg_py(w, ymax));
    double x2 = round2(svg_px(w, xmax)), y2 = round2(svg_py(w, ymin));
    fputs("<rect x=\"", w->f);
    svg_num(w->f, x);
    fputs("\" y=\"", w->f);
    svg_num(w->f, y);
    fputs("\" width=\"", w->f);
    svg_num(w->f, x2 - x);
    fputs("\" height=\"", w->f);
    svg_num(w->f, y2 - y);
    fputs("\"/>\n", w->f);
}

void svg_circle(svg_writer *w, double x, double y, double r_px)
{
    fputs("<circle cx=\"", w->f);
    svg_num(w->f, svg_px(w, x));
    fputs("\" cy=\"", w->f);
    svg_num(w->f, svg_py(w, y));
    fputs("\" r=\"", w->f);
    svg_num(w->f, r_px);
    fputs("\"/>\n", w->f);
}

void svg_dots_begin(svg_writer *w, double diameter_px, const char *color)
{
    if (w->in_dots) svg_dots_end(w);
    fputs("<g fill=\"none\" stroke=\"", w->f);
    put_escaped(w->f, color ? color : "#000");
    fputs("\" stroke-width=\"", w->f);
    svg_num(w->f, diameter_px);
    fputs("\" stroke-linecap=\"round\">\n", w->f);
    w->in_dots = 1;
    w->dots = 0;
}

void svg_dot(svg_writer *w, double x, double y)
{
    if (w->dots % DOTS_PER_PATH == 0) {
        if (w->dots) fputs("\"/>\n", w->f);
        fputs("<path d=\"", w->f);
    } else if (w->dots % DOTS_PER_LINE == 0) {
        fputc('\n', w->f);
    }
    /* A zero-length subpath with round caps is drawn as a dot (SVG 1.1, 11.4). */
    fputc('M', w->f);
    svg_num(w->f, svg_px(w, x));
    fputc(' ', w->f);
    svg_num(w->f, svg_py(w, y));
    fputs("h0", w->f);
    w->dots++;
}

void svg_dots_end(svg_writer *w)
{
    if (!w->in_dots) return;
    if (w->dots) fputs("\"/>\n", w->f);
    fputs("</g>\n", w->f);
    w->in_dots = 0;
    w->dots = 0;
}

static void polyline_begin(svg_writer *w, const char *attrs)
{
    fputs("<polyline ", w->f);
    fputs(attrs && attrs[0] ? attrs : "fill=\"none\" stroke=\"#000\"", w->f);
    fputs(" points=\"", w->f);
}

static void polyline_point(svg_writer *w, size_t i, double x, double y)
{
    if (i) fputc(i % DOTS_PER_LINE == 0 ? '\n' : ' ', w->f);
    svg_num(w->f, svg_px(w, x));
    fputc(',', w->f);
    svg_num(w->f, svg_py(w, y));
}

void svg_polyline(svg_writer *w, const double *xy, size_t n, size_t stride, const char *attrs)
{
    polyline_begin(w, attrs);
    for (size_t i = 0; i < n; i++) polyline_point(w, i, xy[i * stride], xy[i * stride + 1]);
    fputs("\"/>\n", w->f);
}

void svg_polyline_f(svg_writer *w, const float *xy, size_t n, size_t stride, const char *attrs)
{
    polyline_begin(w, attrs);
    for (size_t i = 0; i < n; i++)
        polyline_point(w, i, (double)xy[i * stride], (double)xy[i * stride + 1]);
    fputs("\"/>\n", w->f);
}

void svg_text(svg_writer *w, double x, double y, double size_px, const char *text)
{
    fputs("<text x=\"", w->f);
    svg_num(w->f, svg_px(w, x));
    fputs("\" y=\"", w->f);
    svg_num(w->f, svg_py(w, y));
    fputs("\" font-family=\"sans-serif\" font-size=\"", w->f);
    svg_num(w->f, size_px);
    fputs("\">", w->f);
    put_escaped(w->f, text ? text : "");
    fputs("</text>\n", w->f);
}
