/*
 * cmd_bezier.c - `grove bezier`: reads curves (a text file or the paths of an SVG file),
 * tessellates them on the chosen backend and writes the polylines as CSV and/or an SVG picture,
 * with a summary of what the vertex-count rule did (docs/bezier.md).
 *
 * Output paths are tried before any work and written through temporary names by the library,
 * so a failure never leaves a partial file.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "grove/bezier.h"

/* The longer side of the --svg picture in pixels; the shorter follows the drawing's shape. */
#define SVG_LONG_SIDE 1024
#define SVG_MIN_SIDE 256

static void usage(FILE *f)
{
    fprintf(f,
            "usage: grove bezier IN [-o OUT.csv] [--svg FILE] [--mode curvature|tolerance]\n"
            "                   [--max-points N] [--min-points N] [--scale S] [--tolerance E]\n"
            "                   [--variant auto|cdp|flat] [--format auto|text|svg]\n"
            "                   [--control-polygons] [--backend auto|cpu|cuda] [--json]\n"
            "\n"
            "Tessellates the 2-D Bezier curves of IN into one polyline per curve and writes\n"
            "them as CSV `curve,vertex,x,y' (curve 0-based in input order; the first and last\n"
            "vertex of a curve are its first and last control points) and/or as an SVG\n"
            "picture, then prints a summary. IN is a text file (one curve per line: 4, 6 or 8\n"
            "numbers for a line, a quadratic or a cubic) or an SVG file (the d attributes of\n"
            "its <path> elements: M L H V Q T C S A Z, arcs as cubics; the outlines of <rect>,\n"
            "<circle>, <ellipse>, <line>, <polyline> and <polygon>; what <use> draws).\n"
            "docs/bezier.md has the formats and the exact vertex-count rules.\n"
            "\n"
            "options:\n"
            "  -o, --output OUT  the CSV file (through a temporary file); may be left out\n"
            "                  when --svg is given\n"
            "  --svg FILE      draw the polylines (and their vertices, when there are few) as\n"
            "                  an SVG picture, y up; at most 200,000 curves are drawn\n"
            "  --control-polygons  also draw the control polygons, faintly, in the picture\n"
            "  --mode M        curvature (default): vertices = floor(c * scale), clamped to\n"
            "                  [min, max], c the largest distance of a control point from the\n"
            "                  chord; tolerance: the fewest vertices that keep the polyline\n"
            "                  within E of the curve, at most max\n"
            "  --max-points N  most vertices per curve, 2..%d (default 32)\n"
            "  --min-points N  curvature mode: fewest vertices per curve, 2..max (default 4,\n"
            "                  or max when max is smaller)\n"
            "  --scale S       curvature mode: vertices per unit of c, > 0 (default 16)\n"
            "  --tolerance E   tolerance mode: the largest distance from the curve, > 0, in\n"
            "                  input units (default 0.01); implies --mode tolerance\n"
            "  --variant V     CUDA: auto (default: the faster for the input size), cdp\n"
            "                  (dynamic parallelism: a child grid per group of curves, and\n"
            "                  one per curve of 1024 vertices or more) or flat\n"
            "  --format F      auto (default: .svg names are SVG, others text), text or svg\n"
            "  --json          print the summary as one JSON object\n"
            "  --backend B     auto (default: CUDA when a usable GPU is found), cpu or cuda\n"
            "  -h, --help      print this help and exit\n"
            "\n"
            "exit codes: 0 ok, 1 usage error, 2 bad input, 3 runtime or device failure\n",
            GROVE_BEZIER_MAX_POINTS);
}

typedef struct bz_args {
    const char *input, *out, *svg;
    grove_bezier_opts opts;
    grove_curve_format format;
    grove_backend backend;
    int json, control;
    int mode_given, min_given, scale_given, tol_given;
} bz_args;

/* Parses a word among names[0..count) into *out (its index). */
static int parse_word(cli_parser *p, const char *const *names, int count, int *out)
{
    if (p->exit) return p->exit;
    for (int i = 0; i < count; i++)
        if (strcmp(p->val, names[i]) == 0) {
            *out = i;
            return 0;
        }
    cli_error(p->what, "%s must be one of %s%s%s%s%s, got '%s'", p->arg, names[0],
              count > 1 ? "|" : "", count > 1 ? names[1] : "", count > 2 ? "|" : "",
              count > 2 ? names[2] : "", p->val);
    p->exit = CLI_EXIT_USAGE;
    return p->exit;
}

/* Parses a finite number > 0 into *out. */
static void parse_positive(cli_parser *p, double *out)
{
    double d;
    if (cli_double(p, 0, HUGE_VAL, &d)) return;
    if (d > 0) {
        *out = d;
        return;
    }
    cli_error(p->what, "%s must be > 0, got '%s'", p->arg, p->val);
    p->exit = CLI_EXIT_USAGE;
}

static int parse_args(int argc, char **argv, bz_args *a)
{
    static const char *const modes[] = {"curvature", "tolerance"};
    static const char *const variants[] = {"auto", "cdp", "flat"};
    static const char *const formats[] = {"auto", "text", "svg"};
    cli_parser p;
    long v;
    int w;

    memset(a, 0, sizeof *a);
    a->backend = cli_default_backend;
    grove_bezier_default_opts(&a->opts);
    cli_parser_init(&p, argc, argv, "bezier", usage);
    while (cli_next(&p)) {
        if (cli_help(&p)) return -1;
        if (cli_flag(&p, "--json")) {
            a->json = 1;
        } else if (cli_flag(&p, "--control-polygons")) {
            a->control = 1;
        } else if (cli_value(&p, "-o") || cli_value(&p, "--output") || cli_value(&p, "--svg")) {
            if (!p.exit && !p.val[0]) {
                cli_error(p.what, "%s needs a file name", p.arg);
                p.exit = CLI_EXIT_USAGE;
            }
            if (strncmp(p.arg, "--svg", 5) == 0)
                a->svg = p.val;
            else
                a->out = p.val;
        } else if (cli_value(&p, "--mode")) {
            if (!parse_word(&p, modes, 2, &w)) a->opts.mode = (grove_bezier_mode)w;
            a->mode_given = 1;
        } else if (cli_value(&p, "--variant")) {
            if (!parse_word(&p, variants, 3, &w)) a->opts.variant = (grove_bezier_variant)w;
        } else if (cli_value(&p, "--format")) {
            if (!parse_word(&p, formats, 3, &w)) a->format = (grove_curve_format)w;
        } else if (cli_value(&p, "--max-points")) {
            if (!cli_int(&p, 2, GROVE_BEZIER_MAX_POINTS, &v)) a->opts.max_points = (int)v;
        } else if (cli_value(&p, "--min-points")) {
            if (!cli_int(&p, 2, GROVE_BEZIER_MAX_POINTS, &v)) a->opts.min_points = (int)v;
            a->min_given = 1;
        } else if (cli_value(&p, "--scale")) {
            parse_positive(&p, &a->opts.curvature_scale);
            a->scale_given = 1;
        } else if (cli_value(&p, "--tolerance")) {
            parse_positive(&p, &a->opts.tolerance);
            a->tol_given = 1;
        } else if (cli_value(&p, "--backend")) {
            cli_backend(&p, &a->backend);
        } else if (p.positional && !a->input) {
            a->input = p.arg;
        } else {
            return cli_unknown(&p);
        }
        if (p.exit) return p.exit;
    }
    if (p.exit) return p.exit;

    if (!a->input) {
        cli_error("bezier", "no input file given");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!a->out && !a->svg) {
        cli_error("bezier", "-o OUT.csv or --svg FILE is required");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (a->out && a->svg && strcmp(a->out, a->svg) == 0) {
        cli_error("bezier", "-o and --svg name the same file '%s'", a->out);
        return CLI_EXIT_USAGE;
    }
    if (a->tol_given && !a->mode_given) a->opts.mode = GROVE_BEZIER_TOLERANCE;
    if (a->opts.mode == GROVE_BEZIER_TOLERANCE && (a->min_given || a->scale_given)) {
        cli_error("bezier", "%s applies to --mode curvature only",
                  a->min_given ? "--min-points" : "--scale");
        return CLI_EXIT_USAGE;
    }
    if (a->opts.mode == GROVE_BEZIER_CURVATURE && a->tol_given) {
        cli_error("bezier", "--tolerance applies to --mode tolerance only");
        return CLI_EXIT_USAGE;
    }
    if (a->opts.mode == GROVE_BEZIER_CURVATURE) {
        if (!a->min_given && a->opts.min_points > a->opts.max_points)
            a->opts.min_points = a->opts.max_points;
        if (a->opts.min_points > a->opts.max_points) {
            cli_error("bezier", "--min-points %d is more than --max-points %d",
                      a->opts.min_points, a->opts.max_points);
            return CLI_EXIT_USAGE;
        }
    }
    return CLI_EXIT_OK;
}

/* The picture's size: the longer side SVG_LONG_SIDE, the other in the drawing's proportion. */
static void picture_size(const grove_polylines *p, int *w, int *h)
{
    float x0 = INFINITY, y0 = INFINITY, x1 = -INFINITY, y1 = -INFINITY;
    double bw, bh, r;
    for (uint64_t v = 0; v < p->n_vertices; v++) {
        x0 = fminf(x0, p->xy[2 * v]);
        x1 = fmaxf(x1, p->xy[2 * v]);
        y0 = fminf(y0, p->xy[2 * v + 1]);
        y1 = fmaxf(y1, p->xy[2 * v + 1]);
    }
    bw = (double)x1 - x0;
    bh = (double)y1 - y0;
    *w = *h = SVG_LONG_SIDE;
    if (!(bw > 0) || !(bh > 0)) return;
    r = bw > bh ? bh / bw : bw / bh;
    if (bw > bh)
        *h = (int)fmax(SVG_MIN_SIDE, floor(SVG_LONG_SIDE * r + 0.5));
    else
        *w = (int)fmax(SVG_MIN_SIDE, floor(SVG_LONG_SIDE * r + 0.5));
}

/* SVG's y axis points down and the picture's up: an SVG input is mirrored so that its picture
 * shows it as a browser does. Done after the CSV, which keeps the file's coordinates. */
static void flip_y(grove_polylines *p, grove_curves *c)
{
    for (uint64_t v = 0; v < p->n_vertices; v++) p->xy[2 * v + 1] = -p->xy[2 * v + 1];
    for (size_t i = 0; i < 4 * c->n; i++) c->cp[2 * i + 1] = -c->cp[2 * i + 1];
}

static const char *variant_name(grove_bezier_variant v)
{
    return v == GROVE_BEZIER_CDP ? "cdp" : v == GROVE_BEZIER_FLAT ? "flat" : "auto";
}

int cmd_bezier(int argc, char **argv)
{
    const char *what = "bezier";
    bz_args a;
    grove_ctx *ctx = NULL;
    grove_curves curves = {NULL, NULL, 0};
    grove_polylines pl;
    grove_bezier_stats st;
    grove_status s;
    double t0, read_ms = 0, tess_ms = 0, write_ms = 0, mean;
    size_t by_degree[4] = {0, 0, 0, 0};
    uint64_t vmin = 0, vmax = 0;
    int rc, width = 0, height = 0;
    char desc[320];

    memset(&pl, 0, sizeof pl);
    rc = parse_args(argc, argv, &a);
    if (rc < 0) return CLI_EXIT_OK; /* --help */
    if (rc != CLI_EXIT_OK) return rc;
    if (a.out && cli_probe_output(a.out, what)) return CLI_EXIT_FAILURE;
    if (a.svg && cli_probe_output(a.svg, what)) return CLI_EXIT_FAILURE;

    rc = cli_ctx_create(what, a.backend, &ctx);
    if (rc != CLI_EXIT_OK) return rc;
    if (grove_ctx_backend(ctx) == GROVE_BACKEND_CPU && a.opts.variant != GROVE_BEZIER_AUTO)
        cli_error(what, "note: --variant %s is for the CUDA backend; the CPU backend ignores it",
                  variant_name(a.opts.variant));

    t0 = cli_now_ms();
    s = grove_curves_read(ctx, a.input, a.format, &curves);
    read_ms = cli_now_ms() - t0;
    if (s != GROVE_OK) {
        if (s == GROVE_ERR_BAD_INPUT || s == GROVE_ERR_IO || s == GROVE_ERR_LIMIT)
            cli_error(what, "%s", grove_ctx_last_error(ctx));
        else
            cli_report_status(what, "reading the curves", s, ctx);
        /* an over-long line is malformed input too */
        rc = s == GROVE_ERR_LIMIT ? CLI_EXIT_BAD_INPUT : cli_exit_code(s, CLI_CAUSE_INPUT);
        goto done;
    }
    for (size_t i = 0; i < curves.n; i++) by_degree[curves.degree[i] & 3]++;

    t0 = cli_now_ms();
    s = grove_bezier_tessellate(ctx, &curves, &a.opts, &pl, &st);
    tess_ms = cli_now_ms() - t0;
    if (s != GROVE_OK) {
        cli_report_status(what, "tessellating", s, ctx);
        rc = cli_exit_code(s, CLI_CAUSE_OPTIONS);
        goto done;
    }
    for (size_t i = 0; i < pl.n_curves; i++) {
        uint64_t m = pl.offsets[i + 1] - pl.offsets[i];
        if (i == 0 || m < vmin) vmin = m;
        if (m > vmax) vmax = m;
    }
    mean = pl.n_curves ? (double)pl.n_vertices / (double)pl.n_curves : 0.0;

    t0 = cli_now_ms();
    if (a.out) {
        s = grove_polylines_write_csv(ctx, &pl, a.out);
        if (s != GROVE_OK) {
            cli_report_status(what, "writing the CSV", s, ctx);
            rc = cli_exit_code(s, CLI_CAUSE_RUN);
            goto done;
        }
    }
    if (a.svg) {
        if (a.format == GROVE_CURVES_SVG ||
            (a.format == GROVE_CURVES_AUTO && cli_has_extension(a.input, ".svg")))
            flip_y(&pl, &curves);
        picture_size(&pl, &width, &height);
        s = grove_polylines_write_svg(ctx, &pl, a.control ? &curves : NULL, width, height, a.svg);
        if (s != GROVE_OK) {
            cli_report_status(what, "writing the picture", s, ctx);
            rc = cli_exit_code(s, CLI_CAUSE_RUN);
            goto done;
        }
    }
    write_ms = cli_now_ms() - t0;

    cli_describe_backend(ctx, desc, sizeof desc);
    if (a.json) {
        printf("{\n  \"input\": ");
        cli_json_string(stdout, a.input);
        printf(",\n  \"curves\": %zu,\n  \"lines\": %zu,\n  \"quadratics\": %zu,\n"
               "  \"cubics\": %zu,\n  \"backend\": \"%s\",\n  \"mode\": \"%s\",\n",
               curves.n, by_degree[1], by_degree[2], by_degree[3],
               grove_backend_name(grove_ctx_backend(ctx)),
               a.opts.mode == GROVE_BEZIER_TOLERANCE ? "tolerance" : "curvature");
        printf("  \"min_points\": %d,\n  \"max_points\": %d,\n  \"scale\": ",
               a.opts.mode == GROVE_BEZIER_TOLERANCE ? 2 : a.opts.min_points, a.opts.max_points);
        cli_json_number(stdout, a.opts.curvature_scale);
        printf(",\n  \"tolerance\": ");
        cli_json_number(stdout, a.opts.tolerance);
        printf(",\n  \"variant_requested\": \"%s\",\n  \"variant\": \"%s\",\n"
               "  \"child_launches\": %llu,\n  \"capped\": %llu,\n  \"vertices\": %llu,\n"
               "  \"vertices_min\": %llu,\n  \"vertices_max\": %llu,\n  \"vertices_mean\": ",
               variant_name(a.opts.variant), variant_name(st.variant),
               (unsigned long long)st.child_launches, (unsigned long long)st.capped,
               (unsigned long long)pl.n_vertices, (unsigned long long)vmin,
               (unsigned long long)vmax);
        cli_json_number(stdout, mean);
        printf(",\n  \"read_ms\": ");
        cli_json_number(stdout, read_ms);
        printf(",\n  \"tessellate_ms\": ");
        cli_json_number(stdout, tess_ms);
        printf(",\n  \"write_ms\": ");
        cli_json_number(stdout, write_ms);
        printf(",\n  \"output\": ");
        cli_json_string(stdout, a.out);
        printf(",\n  \"svg\": ");
        cli_json_string(stdout, a.svg);
        printf("\n}\n");
    } else {
        printf("grove bezier: %s, %zu curves (%zu lines, %zu quadratics, %zu cubics), backend "
               "%s\n",
               a.input, curves.n, by_degree[1], by_degree[2], by_degree[3], desc);
        if (a.opts.mode == GROVE_BEZIER_TOLERANCE)
            printf("rule: tolerance %g, at most %d vertices a curve\n", a.opts.tolerance,
                   a.opts.max_points);
        else
            printf("rule: curvature, scale %g, %d..%d vertices a curve\n",
                   a.opts.curvature_scale, a.opts.min_points, a.opts.max_points);
        printf("vertices: %llu (per curve: min %llu, max %llu, mean %.2f); %llu curve%s "
               "clamped by the %s\n",
               (unsigned long long)pl.n_vertices, (unsigned long long)vmin,
               (unsigned long long)vmax, mean, (unsigned long long)st.capped,
               st.capped == 1 ? "" : "s",
               a.opts.mode == GROVE_BEZIER_TOLERANCE ? "maximum (tolerance not met)"
                                                     : "minimum or maximum");
        printf("variant: %s, %llu child launches\n", variant_name(st.variant),
               (unsigned long long)st.child_launches);
        printf("time: tessellate %.3f ms (%.2f M vertices/s), read %.3f ms, write %.3f ms\n",
               tess_ms, tess_ms > 0 ? (double)pl.n_vertices / (tess_ms * 1e3) : 0.0, read_ms,
               write_ms);
        if (a.out) printf("wrote %s\n", a.out);
        if (a.svg) printf("wrote %s (%d x %d)\n", a.svg, width, height);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(what, "cannot write to stdout");
        rc = CLI_EXIT_FAILURE;
    }
done:
    grove_polylines_free(&pl);
    grove_curves_free(&curves);
    grove_ctx_destroy(ctx);
    return rc;
}
