/*
 * cmd_quadtree.c - `grove quadtree build|query|knn`: builds a quadtree from a point file (and
 * saves it, draws it), and answers box and nearest-neighbour queries from a saved tree or
 * straight from a point file.
 *
 * Inputs are told apart by content, not by name: a file that starts with the quadtree magic
 * (docs/FORMATS.md) is a saved tree, anything else goes to the point readers of the io module.
 * Every result file is written through a temporary name (cli_outfile, grove_quadtree_save), and
 * the output paths are tried before any work, so that a wrong path fails in a second, not after
 * minutes of building.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "grove/io.h"
#include "grove/quadtree.h"
#include "svg.h"

/* The picture: at most this many points (a deterministic sample beyond) and node boxes (the
 * tree cut at a level beyond), so that a browser still opens it (about 1.5 MB of dots). */
#define SVG_MAX_POINTS ((size_t)100000)
#define SVG_MAX_BOXES ((size_t)50000)
#define SVG_SIZE_PX 1024.0

#define QT_MAGIC "GROVE-QT"
#define MAX_K 1000000L

static int qt_build(int argc, char **argv);
static int qt_query(int argc, char **argv);
static int qt_knn(int argc, char **argv);

static const cli_command verbs[] = {
    {"build", "build a tree from a point file, save it, draw it (--svg)", qt_build},
    {"query", "points inside a box, from a tree file or a point file", qt_query},
    {"knn", "k nearest neighbours of a point, from a tree file or a point file", qt_knn},
};
#define NUM_VERBS ((int)(sizeof verbs / sizeof verbs[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: grove quadtree <command> [options]\n"
               "\n"
               "2-D point quadtrees (docs/quadtree.md). Point files are CSV/text or PLY\n"
               "(docs/FORMATS.md); only x and y are used. A point's index is its 0-based record\n"
               "order in the file.\n"
               "\n"
               "commands:\n");
    cli_print_commands(f, verbs, NUM_VERBS);
    fprintf(f, "\n"
               "`grove quadtree <command> --help` describes a command.\n"
               "exit codes: 0 ok, 1 usage error, 2 bad input, 3 runtime or device failure\n");
}

/* The build options every command takes (query and knn build the tree first when given a
 * point file). */
#define BUILD_OPTIONS_HELP                                                                         \
    "  --max-depth D   deepest level, 0..30 (default 16; the root is level 0)\n"                   \
    "  --min-points K  a node with at most K points is a leaf (default 16)\n"                      \
    "  --method M      morton (default) or recursive; both give the identical tree\n"              \
    "  --bbox XMIN YMIN XMAX YMAX\n"                                                               \
    "                  the root box (default: the points' bounding box); every point\n"            \
    "                  must lie inside it. Also --bbox=XMIN,YMIN,XMAX,YMAX\n"                      \
    "  --backend B     auto (default: CUDA when a usable GPU is found), cpu or cuda\n"

static void usage_build(FILE *f)
{
    fprintf(f,
            "usage: grove quadtree build POINTS -o TREE [--svg FILE] [--json]\n"
            "                            [--max-depth D] [--min-points K] [--method M]\n"
            "                            [--bbox XMIN YMIN XMAX YMAX] [--backend auto|cpu|cuda]\n"
            "       grove quadtree build POINTS --svg FILE [...]     (no tree file)\n"
            "\n"
            "Reads POINTS (.csv .txt .xyz text or .ply), builds the quadtree, saves it to TREE\n"
            "(docs/FORMATS.md, `Quadtree files') and prints a summary: points, nodes, leaves,\n"
            "depth reached, points per leaf, build time. -o may be left out only when --svg\n"
            "is given.\n"
            "\n"
            "options:\n"
            "  -o, --output TREE  where to save the tree (through a temporary file)\n"
            "  --svg FILE      also draw the points and the node boxes as an SVG picture;\n"
            "                  above 100000 points a deterministic sample of 100000 is drawn,\n"
            "                  above 50000 leaves the tree is drawn down to a shallower level\n"
            "  --json          print the summary as one JSON object\n" BUILD_OPTIONS_HELP
            "  -h, --help      print this help and exit\n");
}

static void usage_query(FILE *f)
{
    fprintf(f, "usage: grove quadtree query (TREE | POINTS) --box XMIN YMIN XMAX YMAX [-o OUT]\n"
               "       grove quadtree query (TREE | POINTS) --boxes FILE [-o OUT]\n"
               "                            [--max-depth D] [--min-points K] [--method M]\n"
               "                            [--bbox ...] [--backend auto|cpu|cuda]\n"
               "\n"
               "Prints the indices of the points with XMIN <= x <= XMAX and YMIN <= y <= YMAX\n"
               "(edges included), one per line, ascending. The input is a tree saved by\n"
               "`grove quadtree build` (recognised by its content) or a point file, from which\n"
               "the tree is built first with the build options (they are ignored for a tree).\n"
               "Bounds are decimal numbers, rounded to float like the points; inf and -inf are\n"
               "allowed; a box with XMIN > XMAX or YMIN > YMAX matches nothing.\n"
               "\n"
               "options:\n"
               "  --box XMIN YMIN XMAX YMAX  the box (also --box=XMIN,YMIN,XMAX,YMAX)\n"
               "  --boxes FILE    many boxes: 4 numbers a line (commas or blanks between them;\n"
               "                  '#' comment lines, blank lines and one header line allowed);\n"
               "                  prints CSV `query,index', queries numbered from 0\n"
               "  -o, --output OUT  write the result to OUT (through a temporary file), not\n"
               "                  stdout\n" BUILD_OPTIONS_HELP
               "  -h, --help      print this help and exit\n");
}

static void usage_knn(FILE *f)
{
    fprintf(f, "usage: grove quadtree knn (TREE | POINTS) --point X Y [-k K] [-o OUT]\n"
               "       grove quadtree knn (TREE | POINTS) --queries QPOINTS [-k K] [-o OUT]\n"
               "                          [--max-depth D] [--min-points K] [--method M]\n"
               "                          [--bbox ...] [--backend auto|cpu|cuda]\n"
               "\n"
               "Prints the K nearest points of the query point as CSV `rank,index,distance',\n"
               "nearest first (rank 0), equal distances by smaller index; fewer rows when the\n"
               "tree has fewer than K points. Distances are Euclidean, from the float\n"
               "coordinates, printed with 9 significant digits. The input is a saved tree or a\n"
               "point file, as for `grove quadtree query'.\n"
               "\n"
               "options:\n"
               "  --point X Y     the query point (also --point=X,Y)\n"
               "  --queries FILE  many query points, from a point file (CSV/text or PLY);\n"
               "                  prints `query,rank,index,distance', queries numbered from 0\n"
               "  -k, --k K       neighbours per query, 1..1000000 (default 1)\n"
               "  -o, --output OUT  write the result to OUT (through a temporary file), not\n"
               "                  stdout\n" BUILD_OPTIONS_HELP
               "  -h, --help      print this help and exit\n");
}

int cmd_quadtree(int argc, char **argv)
{
    return cli_dispatch(argc, argv, "quadtree", verbs, NUM_VERBS, usage, "command");
}

/* ---- options ---- */

enum { GIVEN_DEPTH = 1, GIVEN_MIN = 2, GIVEN_METHOD = 4, GIVEN_BBOX = 8 };

typedef struct qt_args {
    const char *what;  /* "quadtree build", ... */
    const char *input; /* the positional argument */
    const char *out;   /* -o */
    const char *svg;
    const char *many; /* --boxes or --queries */
    grove_quadtree_opts opts;
    int given; /* GIVEN_* */
    grove_backend backend;
    int json;
    int have_box, have_point;
    float box[4], point[2];
    long k;
} qt_args;

/* Parses a coordinate: a decimal number (strtof, so correctly rounded to float like the point
 * readers do), never NaN; allow_inf admits inf, -inf and values beyond the float range (which
 * round to infinity, a bound that still means what it says). */
static int parse_coord(cli_parser *p, const char *opt, const char *s, int allow_inf, float *out)
{
    char *end;
    float v;
    errno = 0;
    v = strtof(s, &end);
    if (end == s || *end != '\0' || s[0] == ' ' || s[0] == '\t') {
        cli_error(p->what, "%s: '%s' is not a number", opt, s);
        return p->exit = CLI_EXIT_USAGE;
    }
    if (isnan(v)) {
        cli_error(p->what, "%s: NaN is not a coordinate", opt);
        return p->exit = CLI_EXIT_USAGE;
    }
    if (isinf(v) && !allow_inf) {
        cli_error(p->what, "%s: '%s' is not finite or beyond the float range", opt, s);
        return p->exit = CLI_EXIT_USAGE;
    }
    *out = v;
    return 0;
}

/* Reads `count` numbers after an option matched by cli_value(): either the value holds them
 * all, separated by commas (--box=1,2,3,4), or the value is the first and the next count-1
 * arguments are the others (--box 1 2 3 4; they may start with '-'). */
static int parse_coords(cli_parser *p, const char *opt, int count, int allow_inf, float *out)
{
    char buf[512];
    const char *vals[4];
    int have = 0;
    if (p->exit) return p->exit;
    if (strchr(p->val, ',')) {
        char *c;
        if (strlen(p->val) >= sizeof buf) {
            cli_error(p->what, "%s: value too long", opt);
            return p->exit = CLI_EXIT_USAGE;
        }
        memcpy(buf, p->val, strlen(p->val) + 1);
        vals[have++] = buf;
        for (c = buf; *c; c++) {
            if (*c != ',') continue;
            *c = '\0';
            if (have == count) {
                have++;
                break;
            }
            vals[have++] = c + 1;
        }
    } else {
        vals[have++] = p->val;
        while (have < count && p->i < p->argc) vals[have++] = p->argv[p->i++];
    }
    if (have != count) {
        cli_error(p->what, "%s needs %d numbers (see grove %s --help)", opt, count, p->what);
        return p->exit = CLI_EXIT_USAGE;
    }
    for (int j = 0; j < count; j++)
        if (parse_coord(p, opt, vals[j], allow_inf, &out[j])) return p->exit;
    return 0;
}

/* The options every command shares. Returns 1 if the current argument was one of them
 * (p->exit is then set if its value was wrong), else 0. */
static int common_option(cli_parser *p, qt_args *a)
{
    long v;
    if (cli_value(p, "--max-depth")) {
        if (!cli_int(p, 0, GROVE_QUADTREE_MAX_DEPTH, &v)) a->opts.max_depth = (int)v;
        a->given |= GIVEN_DEPTH;
    } else if (cli_value(p, "--min-points")) {
        if (!cli_int(p, 0, INT_MAX, &v)) a->opts.min_points = (int)v;
        a->given |= GIVEN_MIN;
    } else if (cli_value(p, "--method")) {
        a->given |= GIVEN_METHOD;
        if (p->exit) return 1;
        if (strcmp(p->val, "morton") == 0)
            a->opts.method = GROVE_QUADTREE_MORTON;
        else if (strcmp(p->val, "recursive") == 0)
            a->opts.method = GROVE_QUADTREE_RECURSIVE;
        else {
            cli_error(p->what, "--method: '%s' is not one of morton, recursive", p->val);
            p->exit = CLI_EXIT_USAGE;
        }
    } else if (cli_value(p, "--bbox")) {
        a->given |= GIVEN_BBOX;
        if (parse_coords(p, "--bbox", 4, 0, a->opts.bbox) == 0) {
            a->opts.use_bbox = 1;
            if (a->opts.bbox[0] > a->opts.bbox[2] || a->opts.bbox[1] > a->opts.bbox[3]) {
                cli_error(p->what, "--bbox: XMIN > XMAX or YMIN > YMAX");
                p->exit = CLI_EXIT_USAGE;
            }
        }
    } else if (cli_value(p, "--backend")) {
        cli_backend(p, &a->backend);
    } else if (cli_value(p, "-o") || cli_value(p, "--output")) {
        if (!p->exit && !p->val[0]) {
            cli_error(p->what, "%s needs a file name", p->arg);
            p->exit = CLI_EXIT_USAGE;
        }
        a->out = p->val;
    } else if (p->positional) {
        if (a->input) return 0; /* a second one: the caller reports it */
        a->input = p->arg;
    } else {
        return 0;
    }
    return 1;
}

static void args_init(qt_args *a, const char *what)
{
    memset(a, 0, sizeof *a);
    a->what = what;
    a->backend = cli_default_backend;
    a->k = 1;
    grove_quadtree_default_opts(&a->opts);
}

/* The checks after parsing that every command shares. */
static int args_finish(cli_parser *p, qt_args *a)
{
    if (p->exit) return p->exit;
    if (!a->input) {
        cli_error(a->what, "no input file given");
        p->usage(stderr);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* ---- small helpers ---- */

static int build_tree(grove_ctx *ctx, const char *what, const grove_points *pts,
                      const grove_quadtree_opts *o, grove_quadtree **t, double *ms)
{
    double t0 = cli_now_ms();
    grove_status s = grove_quadtree_build(ctx, pts, o, t);
    if (ms) *ms = cli_now_ms() - t0;
    if (s == GROVE_OK) return CLI_EXIT_OK;
    cli_report_status(what, "building the tree", s, ctx);
    /* INVALID_ARG can only come from the options (the points come from a reader that already
     * rejected what the build would), BAD_INPUT from a point outside --bbox */
    return cli_exit_code(s, CLI_CAUSE_OPTIONS);
}

/* Gets the tree a query runs on: loads a tree file, or reads a point file and builds. */
static int obtain_tree(grove_ctx *ctx, const qt_args *a, grove_quadtree **t)
{
    *t = NULL;
    if (cli_file_has_magic(a->input, QT_MAGIC) || cli_has_extension(a->input, ".qt")) {
        grove_status s;
        static const char *const names[] = {"--max-depth", "--min-points", "--method", "--bbox"};
        for (int j = 0; j < 4; j++)
            if (a->given & (1 << j))
                cli_error(a->what, "note: %s is ignored: '%s' is a tree file, already built",
                          names[j], a->input);
        s = grove_quadtree_load(ctx, a->input, t);
        if (s == GROVE_OK) return CLI_EXIT_OK;
        if (s == GROVE_ERR_BAD_INPUT || s == GROVE_ERR_IO)
            cli_error(a->what, "%s", grove_ctx_last_error(ctx));
        else
            cli_report_status(a->what, "loading the tree", s, ctx);
        return cli_exit_code(s, CLI_CAUSE_INPUT);
    } else {
        grove_points pts;
        int rc = cli_read_points(ctx, a->what, a->input, 2, &pts, NULL);
        if (rc != CLI_EXIT_OK) return rc;
        rc = build_tree(ctx, a->what, &pts, &a->opts, t, NULL);
        grove_points_free(&pts);
        return rc;
    }
}

/* Where a query's result goes: stdout, or OUT through a temporary file. */
typedef struct result_out {
    cli_outfile file;
    FILE *f;
    int to_file;
} result_out;

static int result_open(result_out *r, const char *path, const char *what)
{
    memset(r, 0, sizeof *r);
    r->f = stdout;
    if (!path) return 0;
    if (cli_outfile_open(&r->file, path, what) != 0) return CLI_EXIT_FAILURE;
    r->f = r->file.f;
    r->to_file = 1;
    return 0;
}

static int result_commit(result_out *r, const char *what)
{
    if (r->to_file) return cli_outfile_commit(&r->file, what) == 0 ? 0 : CLI_EXIT_FAILURE;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(what, "cannot write to stdout: %s", strerror(errno ? errno : EIO));
        return CLI_EXIT_FAILURE;
    }
    return 0;
}

static void result_abort(result_out *r)
{
    if (r->to_file) cli_outfile_abort(&r->file);
}

/* ---- tree statistics ---- */

typedef struct tree_stats {
    size_t nodes, leaves, empty_leaves, max_leaf;
    int depth; /* deepest level present */
} tree_stats;

static void tree_stats_of(const grove_quadtree *t, tree_stats *st)
{
    const grove_quadtree_node *nd = grove_quadtree_nodes(t);
    memset(st, 0, sizeof *st);
    st->nodes = grove_quadtree_num_nodes(t);
    for (size_t i = 0; i < st->nodes; i++) {
        size_t cnt = (size_t)(nd[i].end - nd[i].begin);
        if (nd[i].level > st->depth) st->depth = nd[i].level;
        if (nd[i].first_child >= 0) continue;
        st->leaves++;
        if (cnt == 0) st->empty_leaves++;
        if (cnt > st->max_leaf) st->max_leaf = cnt;
    }
}

/* ---- the picture ---- */

int cli_quadtree_svg(const grove_quadtree *t, const char *path, const char *what, const char *title,
                     size_t *points_drawn, size_t *boxes_drawn, int *box_level)
{
    const grove_quadtree_node *nd = grove_quadtree_nodes(t);
    const float *pts = grove_quadtree_points(t);
    size_t nn = grove_quadtree_num_nodes(t), n = grove_quadtree_num_points(t);
    size_t leaves_upto[GROVE_QUADTREE_MAX_DEPTH + 1] = {0};
    size_t split_at[GROVE_QUADTREE_MAX_DEPTH + 1] = {0};
    size_t total_leaves = 0, drawn = 0, boxes = 0;
    int depth = 0, cut = 0;
    double box[4];
    grove_quadtree_opts o;
    cli_outfile out;
    svg_writer w;

    if (!nd || nn == 0) {
        cli_error(what, "the tree has no host arrays to draw");
        return CLI_EXIT_FAILURE;
    }
    grove_quadtree_get_opts(t, &o);
    for (size_t i = 0; i < nn; i++) {
        int l = nd[i].level;
        if (l < 0 || l > GROVE_QUADTREE_MAX_DEPTH) continue; /* not in a valid tree */
        if (l > depth) depth = l;
        if (nd[i].first_child < 0) {
            leaves_upto[l]++;
            total_leaves++;
        } else {
            split_at[l]++;
        }
    }
    for (int l = 1; l <= GROVE_QUADTREE_MAX_DEPTH; l++) leaves_upto[l] += leaves_upto[l - 1];
    /* Cut at level L: the leaves down to L, and the nodes of level L drawn whole. Each level
     * replaces a split node by four, so the count grows with L: take the deepest that fits. */
    for (int l = 0; l <= depth; l++)
        if (leaves_upto[l] + split_at[l] <= SVG_MAX_BOXES) cut = l;

    if (cli_outfile_open(&out, path, what) != 0) return CLI_EXIT_FAILURE;
    box[0] = nd[0].xmin;
    box[1] = nd[0].ymin;
    box[2] = nd[0].xmax;
    box[3] = nd[0].ymax;
    svg_begin(&w, out.f, box, SVG_SIZE_PX, title);
    svg_comment(&w,
                "grove %s quadtree: %zu points, %zu nodes, %zu leaves, depth %d "
                "(max_depth %d, min_points %d), root box %.9g %.9g %.9g %.9g",
                grove_version(), n, nn, total_leaves, depth, o.max_depth, o.min_points, box[0],
                box[1], box[2], box[3]);
    if (cut == depth)
        svg_comment(&w, "node boxes: all %zu leaves", total_leaves);
    else
        svg_comment(&w,
                    "node boxes: the tree cut at level %d of %d, to stay within %zu boxes: the "
                    "leaves down to level %d and the %zu nodes of level %d, drawn whole",
                    cut, depth, SVG_MAX_BOXES, cut, split_at[cut], cut);
    if (n > SVG_MAX_POINTS)
        svg_comment(&w,
                    "points: a deterministic sample of %zu of the %zu points (point "
                    "floor(i * %zu / %zu) in tree order for i = 0..%zu: spread over the "
                    "picture in proportion to the density)",
                    SVG_MAX_POINTS, n, n, SVG_MAX_POINTS, SVG_MAX_POINTS - 1);
    else
        svg_comment(&w, "points: all %zu", n);

    svg_group_begin(&w, "fill=\"none\" stroke=\"#7a9cc6\" stroke-width=\"0.5\"");
    for (size_t i = 0; i < nn; i++) {
        if (nd[i].level > cut || (nd[i].first_child >= 0 && nd[i].level != cut)) continue;
        svg_rect(&w, nd[i].xmin, nd[i].ymin, nd[i].xmax, nd[i].ymax);
        boxes++;
    }
    svg_group_end(&w);

    drawn = n > SVG_MAX_POINTS ? SVG_MAX_POINTS : n;
    svg_dots_begin(&w, drawn <= 2000 ? 3.0 : drawn <= 20000 ? 2.0 : 1.0, "#1a1a1a");
    for (size_t i = 0; i < drawn; i++) {
        size_t j = drawn == n ? i : (size_t)((uint64_t)i * n / drawn);
        svg_dot(&w, pts[2 * j], pts[2 * j + 1]);
    }
    svg_dots_end(&w);

    svg_group_begin(&w, "fill=\"none\" stroke=\"#333\" stroke-width=\"1\"");
    svg_rect(&w, box[0], box[1], box[2], box[3]);
    svg_group_end(&w);
    svg_end(&w);
    if (cli_outfile_commit(&out, what) != 0) return CLI_EXIT_FAILURE;
    if (points_drawn) *points_drawn = drawn;
    if (boxes_drawn) *boxes_drawn = boxes;
    if (box_level) *box_level = cut;
    return CLI_EXIT_OK;
}

/* ---- build ---- */

static void json_float(FILE *f, float v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", (double)v);
    else
        fputs("null", f);
}

static int qt_build(int argc, char **argv)
{
    cli_parser p;
    qt_args a;
    grove_ctx *ctx = NULL;
    grove_points pts = {NULL, 0, 0};
    grove_quadtree *t = NULL;
    grove_quadtree_opts built;
    tree_stats st;
    double read_ms = 0, build_ms = 0, mean;
    size_t svg_points = 0, svg_boxes = 0;
    int svg_level = 0, rc;
    char desc[320];

    args_init(&a, "quadtree build");
    cli_parser_init(&p, argc, argv, a.what, usage_build);
    while (cli_next(&p)) {
        if (cli_help(&p))
            return CLI_EXIT_OK;
        else if (cli_flag(&p, "--json"))
            a.json = 1;
        else if (cli_value(&p, "--svg")) {
            if (!p.exit && !p.val[0]) {
                cli_error(a.what, "--svg needs a file name");
                return CLI_EXIT_USAGE;
            }
            a.svg = p.val;
        } else if (!common_option(&p, &a))
            return cli_unknown(&p);
    }
    if ((rc = args_finish(&p, &a)) != CLI_EXIT_OK) return rc;
    if (!a.out && !a.svg) {
        cli_error(a.what, "-o TREE is required (it may be left out only when --svg is given)");
        usage_build(stderr);
        return CLI_EXIT_USAGE;
    }
    if (a.out && a.svg && strcmp(a.out, a.svg) == 0) {
        cli_error(a.what, "-o and --svg name the same file '%s'", a.out);
        return CLI_EXIT_USAGE;
    }
    if ((a.out && cli_probe_output(a.out, a.what)) || (a.svg && cli_probe_output(a.svg, a.what)))
        return CLI_EXIT_FAILURE;

    rc = cli_ctx_create(a.what, a.backend, &ctx);
    if (rc != CLI_EXIT_OK) return rc;
    rc = cli_read_points(ctx, a.what, a.input, 2, &pts, &read_ms);
    if (rc == CLI_EXIT_OK) rc = build_tree(ctx, a.what, &pts, &a.opts, &t, &build_ms);
    grove_points_free(&pts);
    if (rc != CLI_EXIT_OK) goto done;

    if (a.out) {
        grove_status s = grove_quadtree_save(ctx, t, a.out);
        if (s != GROVE_OK) {
            cli_report_status(a.what, "saving the tree", s, ctx);
            rc = cli_exit_code(s, CLI_CAUSE_RUN);
            goto done;
        }
    }
    if (a.svg) {
        char title[512];
        snprintf(title, sizeof title, "quadtree of %s", a.input);
        rc = cli_quadtree_svg(t, a.svg, a.what, title, &svg_points, &svg_boxes, &svg_level);
        if (rc != CLI_EXIT_OK) goto done;
    }

    tree_stats_of(t, &st);
    grove_quadtree_get_opts(t, &built);
    mean = st.leaves > st.empty_leaves
               ? (double)grove_quadtree_num_points(t) / (double)(st.leaves - st.empty_leaves)
               : 0.0;
    cli_describe_backend(ctx, desc, sizeof desc);
    if (a.json) {
        size_t n = grove_quadtree_num_points(t);
        int dev = grove_ctx_device(ctx);
        grove_device_info info;
        printf("{\n  \"input\": ");
        cli_json_string(stdout, a.input);
        printf(",\n  \"points\": %zu,\n  \"backend\": \"%s\",\n  \"device\": ", n,
               grove_backend_name(grove_ctx_backend(ctx)));
        if (dev >= 0 && grove_device_query(dev, &info) == GROVE_OK)
            cli_json_string(stdout, info.name);
        else
            printf("null");
        printf(",\n  \"method\": \"%s\",\n  \"max_depth\": %d,\n  \"min_points\": %d,\n",
               built.method == GROVE_QUADTREE_RECURSIVE ? "recursive" : "morton", built.max_depth,
               built.min_points);
        printf("  \"bbox\": [");
        for (int j = 0; j < 4; j++) {
            if (j) printf(", ");
            json_float(stdout, built.bbox[j]);
        }
        printf("],\n  \"bbox_given\": %s,\n", a.opts.use_bbox ? "true" : "false");
        printf("  \"nodes\": %zu,\n  \"leaves\": %zu,\n  \"empty_leaves\": %zu,\n"
               "  \"depth\": %d,\n  \"max_leaf_points\": %zu,\n  \"mean_leaf_points\": ",
               st.nodes, st.leaves, st.empty_leaves, st.depth, st.max_leaf);
        cli_json_number(stdout, mean);
        printf(",\n  \"read_ms\": ");
        cli_json_number(stdout, read_ms);
        printf(",\n  \"build_ms\": ");
        cli_json_number(stdout, build_ms);
        printf(",\n  \"points_per_s\": ");
        cli_json_number(stdout, build_ms > 0 ? (double)n / (build_ms * 1e-3) : 0.0);
        printf(",\n  \"output\": ");
        cli_json_string(stdout, a.out);
        printf(",\n  \"svg\": ");
        if (a.svg) {
            printf("{\"path\": ");
            cli_json_string(stdout, a.svg);
            printf(", \"points_drawn\": %zu, \"points_sampled\": %s, \"boxes_drawn\": %zu, "
                   "\"box_level\": %d}",
                   svg_points, svg_points < n ? "true" : "false", svg_boxes, svg_level);
        } else {
            printf("null");
        }
        printf("\n}\n");
    } else {
        size_t n = grove_quadtree_num_points(t);
        printf("grove quadtree build: %s, %zu points, backend %s\n", a.input, n, desc);
        printf("options: method %s, max_depth %d, min_points %d, root box %.9g %.9g %.9g %.9g "
               "(%s)\n",
               built.method == GROVE_QUADTREE_RECURSIVE ? "recursive" : "morton", built.max_depth,
               built.min_points, (double)built.bbox[0], (double)built.bbox[1],
               (double)built.bbox[2], (double)built.bbox[3],
               a.opts.use_bbox ? "given" : "the points' bounding box");
        printf("nodes: %zu (%zu leaves, %zu of them empty), depth reached %d\n", st.nodes,
               st.leaves, st.empty_leaves, st.depth);
        printf("points per leaf: max %zu, mean %.1f over the %zu non-empty leaves\n", st.max_leaf,
               mean, st.leaves - st.empty_leaves);
        printf("build: %.3f ms, %.3f M points/s (reading the file: %.3f ms)\n", build_ms,
               build_ms > 0 ? (double)n / (build_ms * 1e3) : 0.0, read_ms);
        if (a.out) printf("wrote %s\n", a.out);
        if (a.svg) {
            printf("wrote %s: ", a.svg);
            if (svg_points < n)
                printf("a sample of %zu of the %zu points", svg_points, n);
            else
                printf("all %zu points", n);
            if (svg_level == st.depth)
                printf(", all %zu leaf boxes\n", svg_boxes);
            else
                printf(", %zu boxes (the tree down to level %d of %d)\n", svg_boxes, svg_level,
                       st.depth);
        }
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(a.what, "cannot write to stdout");
        rc = CLI_EXIT_FAILURE;
    }
done:
    grove_quadtree_destroy(t);
    grove_ctx_destroy(ctx);
    return rc;
}

/* ---- query ---- */

/* One line of a boxes file into box[4]. Returns 1 for a box, 0 for a line to skip, -1 after an
 * error message. *header_ok: a header line is still allowed. */
static int parse_box_line(const char *what, const char *path, size_t lineno, char *line,
                          int *header_ok, float box[4])
{
    char *field[5];
    int nf = 0;
    char *c = line;
    size_t len = strlen(line);
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
    while (*c == ' ' || *c == '\t') c++;
    if (*c == '\0' || *c == '#') return 0;
    /* fields separated by a comma or a run of blanks, blanks around a comma included */
    while (*c && nf < 5) {
        char *end;
        field[nf++] = c;
        end = c;
        while (*end && *end != ',' && *end != ' ' && *end != '\t') end++;
        c = end;
        while (*c == ' ' || *c == '\t') c++;
        if (*c == ',') {
            c++;
            while (*c == ' ' || *c == '\t') c++;
        }
        *end = '\0';
    }
    if (*header_ok) {
        /* Only the first line can be a header: one whose first field is not a number and does
         * not even start like one (so "1.2.3" is reported, not skipped). */
        char *end;
        *header_ok = 0;
        strtof(field[0], &end);
        if (!strchr("0123456789+-.", field[0][0]) && (end == field[0] || *end != '\0')) return 0;
    }
    if (nf != 4 || *c) {
        cli_error(what, "%s:%zu: need 4 numbers (xmin ymin xmax ymax), found %s%d", path, lineno,
                  nf == 5 ? "more than " : "", nf == 5 ? 4 : nf);
        return -1;
    }
    for (int j = 0; j < 4; j++) {
        char *end;
        float v = strtof(field[j], &end);
        if (end == field[j] || *end != '\0') {
            cli_error(what, "%s:%zu: column %d is not a number: '%.40s'", path, lineno, j + 1,
                      field[j]);
            return -1;
        }
        if (isnan(v)) {
            cli_error(what, "%s:%zu: NaN in column %d", path, lineno, j + 1);
            return -1;
        }
        box[j] = v;
    }
    return 1;
}

/* Reads a boxes file. Returns CLI_EXIT_OK with *boxes (malloc'd, 4 floats each) and *nq, or an
 * exit code after the message. */
static int read_boxes(const char *what, const char *path, float **boxes, size_t *nq)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap_line = 0, cap = 0, lineno = 0;
    ssize_t got;
    int header_ok = 1, rc = CLI_EXIT_OK;
    *boxes = NULL;
    *nq = 0;
    if (!f) {
        cli_error(what, "%s: cannot open: %s", path, strerror(errno));
        return CLI_EXIT_BAD_INPUT;
    }
    while ((got = getline(&line, &cap_line, f)) >= 0) {
        float box[4];
        int r;
        lineno++;
        if ((size_t)got != strlen(line)) {
            cli_error(what, "%s:%zu: NUL byte in a text line", path, lineno);
            rc = CLI_EXIT_BAD_INPUT;
            break;
        }
        r = parse_box_line(what, path, lineno, line, &header_ok, box);
        if (r < 0) {
            rc = CLI_EXIT_BAD_INPUT;
            break;
        }
        if (r == 0) continue;
        if (*nq == cap) {
            size_t ncap = cap ? 2 * cap : 64;
            float *nb = (float *)realloc(*boxes, ncap * 4 * sizeof(float));
            if (!nb) {
                cli_error(what, "out of host memory reading %s", path);
                rc = CLI_EXIT_FAILURE;
                break;
            }
            *boxes = nb;
            cap = ncap;
        }
        memcpy(*boxes + 4 * *nq, box, sizeof box);
        (*nq)++;
    }
    if (rc == CLI_EXIT_OK && ferror(f)) {
        cli_error(what, "%s: read error: %s", path, strerror(errno));
        rc = CLI_EXIT_BAD_INPUT;
    }
    free(line);
    fclose(f);
    if (rc != CLI_EXIT_OK) {
        free(*boxes);
        *boxes = NULL;
        *nq = 0;
    }
    return rc;
}

static int qt_query(int argc, char **argv)
{
    cli_parser p;
    qt_args a;
    grove_ctx *ctx = NULL;
    grove_quadtree *t = NULL;
    grove_query_result res;
    result_out ro;
    float *boxes = NULL;
    size_t nq = 1;
    grove_status s;
    int rc;
    static cli_out_buf ob;

    args_init(&a, "quadtree query");
    cli_parser_init(&p, argc, argv, a.what, usage_query);
    while (cli_next(&p)) {
        if (cli_help(&p))
            return CLI_EXIT_OK;
        else if (cli_value(&p, "--box")) {
            if (parse_coords(&p, "--box", 4, 1, a.box) == 0) a.have_box = 1;
        } else if (cli_value(&p, "--boxes")) {
            a.many = p.val;
        } else if (!common_option(&p, &a))
            return cli_unknown(&p);
    }
    if ((rc = args_finish(&p, &a)) != CLI_EXIT_OK) return rc;
    if (a.have_box && a.many) {
        cli_error(a.what, "give --box or --boxes, not both");
        return CLI_EXIT_USAGE;
    }
    if (!a.have_box && !a.many) {
        cli_error(a.what, "no box given (--box XMIN YMIN XMAX YMAX or --boxes FILE)");
        usage_query(stderr);
        return CLI_EXIT_USAGE;
    }
    if (a.many) {
        rc = read_boxes(a.what, a.many, &boxes, &nq);
        if (rc != CLI_EXIT_OK) return rc;
    }
    if (result_open(&ro, a.out, a.what) != 0) {
        free(boxes);
        return CLI_EXIT_FAILURE;
    }
    rc = cli_ctx_create(a.what, a.backend, &ctx);
    if (rc == CLI_EXIT_OK) rc = obtain_tree(ctx, &a, &t);
    if (rc != CLI_EXIT_OK) goto done;

    memset(&res, 0, sizeof res);
    s = grove_quadtree_query_boxes(ctx, t, boxes ? boxes : a.box, nq, &res);
    if (s != GROVE_OK) {
        cli_report_status(a.what, "querying", s, ctx);
        rc = cli_exit_code(s, CLI_CAUSE_RUN);
        goto done;
    }
    ob.f = ro.f;
    ob.len = 0;
    if (a.many) cli_ob_str(&ob, "query,index\n");
    for (size_t q = 0; q < nq; q++) {
        for (uint64_t j = res.offsets[q]; j < res.offsets[q + 1]; j++) {
            if (a.many) {
                cli_ob_u64(&ob, q);
                cli_ob_char(&ob, ',');
            }
            cli_ob_u64(&ob, res.indices[j]);
            cli_ob_char(&ob, '\n');
        }
    }
    cli_ob_flush(&ob);
    grove_query_result_free(&res);
    rc = result_commit(&ro, a.what);
    ro.to_file = 0;
done:
    result_abort(&ro);
    free(boxes);
    grove_quadtree_destroy(t);
    grove_ctx_destroy(ctx);
    return rc;
}

/* ---- knn ---- */

static int qt_knn(int argc, char **argv)
{
    cli_parser p;
    qt_args a;
    grove_ctx *ctx = NULL;
    grove_quadtree *t = NULL;
    grove_points qpts = {NULL, 0, 0};
    result_out ro;
    uint32_t *idx = NULL;
    double *d2 = NULL;
    float *queries;
    size_t nq = 1, n, k;
    grove_status s;
    int rc;
    static cli_out_buf ob;

    args_init(&a, "quadtree knn");
    cli_parser_init(&p, argc, argv, a.what, usage_knn);
    while (cli_next(&p)) {
        if (cli_help(&p))
            return CLI_EXIT_OK;
        else if (cli_value(&p, "--point")) {
            if (parse_coords(&p, "--point", 2, 0, a.point) == 0) a.have_point = 1;
        } else if (cli_value(&p, "--queries")) {
            a.many = p.val;
        } else if (cli_value(&p, "-k") || cli_value(&p, "--k")) {
            cli_int(&p, 1, MAX_K, &a.k);
        } else if (!common_option(&p, &a))
            return cli_unknown(&p);
    }
    if ((rc = args_finish(&p, &a)) != CLI_EXIT_OK) return rc;
    if (a.have_point && a.many) {
        cli_error(a.what, "give --point or --queries, not both");
        return CLI_EXIT_USAGE;
    }
    if (!a.have_point && !a.many) {
        cli_error(a.what, "no query given (--point X Y or --queries FILE)");
        usage_knn(stderr);
        return CLI_EXIT_USAGE;
    }
    if (result_open(&ro, a.out, a.what) != 0) return CLI_EXIT_FAILURE;
    rc = cli_ctx_create(a.what, a.backend, &ctx);
    if (rc == CLI_EXIT_OK && a.many) rc = cli_read_points(ctx, a.what, a.many, 2, &qpts, NULL);
    if (rc == CLI_EXIT_OK) rc = obtain_tree(ctx, &a, &t);
    if (rc != CLI_EXIT_OK) goto done;

    queries = a.many ? qpts.xyz : a.point;
    if (a.many) nq = qpts.n;
    n = grove_quadtree_num_points(t);
    /* The rows beyond the tree's points would be empty: do not ask for them. */
    k = (size_t)a.k < n ? (size_t)a.k : n;
    if (k > 0 && nq > 0) {
        if (nq > SIZE_MAX / k / sizeof(double)) {
            cli_error(a.what, "%zu queries of %zu neighbours do not fit in memory", nq, k);
            rc = CLI_EXIT_FAILURE;
            goto done;
        }
        idx = (uint32_t *)malloc(nq * k * sizeof *idx);
        d2 = (double *)malloc(nq * k * sizeof *d2);
        if (!idx || !d2) {
            cli_error(a.what, "out of host memory for %zu x %zu neighbours", nq, k);
            rc = CLI_EXIT_FAILURE;
            goto done;
        }
        s = grove_quadtree_knn(ctx, t, queries, nq, (int)k, idx, d2);
        if (s != GROVE_OK) {
            cli_report_status(a.what, "searching", s, ctx);
            rc = cli_exit_code(s, CLI_CAUSE_RUN);
            goto done;
        }
    }
    ob.f = ro.f;
    ob.len = 0;
    cli_ob_str(&ob, a.many ? "query,rank,index,distance\n" : "rank,index,distance\n");
    for (size_t q = 0; q < nq && k > 0; q++) {
        for (size_t r = 0; r < k; r++) {
            char num[40];
            if (idx[q * k + r] == UINT32_MAX) break;
            if (a.many) {
                cli_ob_u64(&ob, q);
                cli_ob_char(&ob, ',');
            }
            cli_ob_u64(&ob, r);
            cli_ob_char(&ob, ',');
            cli_ob_u64(&ob, idx[q * k + r]);
            cli_ob_char(&ob, ',');
            snprintf(num, sizeof num, "%.9g\n", sqrt(d2[q * k + r]));
            cli_ob_str(&ob, num);
        }
    }
    cli_ob_flush(&ob);
    rc = result_commit(&ro, a.what);
    ro.to_file = 0;
done:
    result_abort(&ro);
    free(idx);
    free(d2);
    grove_points_free(&qpts);
    grove_quadtree_destroy(t);
    grove_ctx_destroy(ctx);
    return rc;
}
