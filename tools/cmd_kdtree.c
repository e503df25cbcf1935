/*
 * cmd_kdtree.c - `grove kdtree build` and `grove knn`: builds a k-d tree from a point file and
 * saves it, and answers batched k-nearest-neighbour and radius queries from a saved tree or
 * straight from a point file.
 *
 * As for the quadtree commands, inputs are told apart by content: a file that starts with the
 * k-d tree magic (docs/FORMATS.md, "k-d tree files") is a saved tree, anything else goes to the
 * point readers of the io module. Output paths are tried before any work, and every result is
 * written through a temporary name, so that a failure never leaves a partial file.
 *
 * Queries run in batches whose result arrays stay around 64 MB, and each batch is printed before
 * the next one runs: memory does not grow with the number of queries times k.
 *
 * --double reads the point files with grove_points64_read and hands the library GROVE_COORD_F64
 * coordinates, for data (UTM, geocentric) whose digits a float would lose.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "grove/io.h"
#include "grove/kdtree.h"

#define KD_MAGIC "GROVE-KD"
#define MAX_K 1000000L
/* neighbours (index + squared distance, 16 bytes) per query batch */
#define BATCH_ENTRIES ((size_t)1 << 22)
/* queries per batch of uncapped radius queries (their result size is not known beforehand) */
#define RADIUS_BATCH ((size_t)1 << 16)

static int kd_build(int argc, char **argv);

static const cli_command verbs[] = {
    {"build", "build a k-d tree from a point file and save it", kd_build},
};
#define NUM_VERBS ((int)(sizeof verbs / sizeof verbs[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: grove kdtree <command> [options]\n"
               "\n"
               "k-d trees of 2-D or 3-D points (docs/kdtree.md). Point files are CSV/text or PLY\n"
               "(docs/FORMATS.md); a point's index is its 0-based record order in the file. Saved\n"
               "trees answer queries with `grove knn TREE QUERIES ...'.\n"
               "\n"
               "commands:\n");
    cli_print_commands(f, verbs, NUM_VERBS);
    fprintf(f, "\n"
               "`grove kdtree <command> --help` describes a command.\n"
               "exit codes: 0 ok, 1 usage error, 2 bad input, 3 runtime or device failure\n");
}

static void usage_build(FILE *f)
{
    fprintf(f, "usage: grove kdtree build POINTS -o TREE [--leaf-size N] [--double] [--json]\n"
               "                          [--backend auto|cpu|cuda]\n"
               "\n"
               "Reads POINTS (.csv .txt .xyz text or .ply; 2-D or 3-D, as the file has), builds\n"
               "the k-d tree, saves it to TREE (docs/FORMATS.md, `k-d tree files') and prints a\n"
               "summary: points, dimensions, coordinate type, nodes, leaves, depth, build time,\n"
               "points/s. The tree keeps float coordinates, or double ones with --double.\n"
               "\n"
               "options:\n"
               "  -o, --output TREE  where to save the tree (through a temporary file)\n"
               "  --leaf-size N   a node with at most N points is a leaf, 1..64 (default 12)\n"
               "  --double        read POINTS in double precision and keep double coordinates\n"
               "                  (for values a float's 24 bits would round, e.g. UTM metres)\n"
               "  --json          print the summary as one JSON object\n"
               "  --backend B     auto (default: CUDA when a usable GPU is found), cpu or cuda\n"
               "  -h, --help      print this help and exit\n");
}

static void usage_knn(FILE *f)
{
    fprintf(f, "usage: grove knn (POINTS | TREE) QUERIES -k K [--radius R] [-o OUT]\n"
               "                 [--leaf-size N] [--double] [--backend auto|cpu|cuda]\n"
               "\n"
               "For every point of the point file QUERIES, finds its K nearest points of POINTS\n"
               "(a point file, from which a k-d tree is built first) or of TREE (a tree saved by\n"
               "`grove kdtree build', recognised by its content). Prints CSV\n"
               "`query,rank,index,distance', one row per neighbour: query and index are 0-based\n"
               "record numbers in their files, rank 0 is the nearest, equal distances are\n"
               "ordered by smaller index, and the distance is Euclidean, computed in double from\n"
               "the float coordinates (double ones with --double; a TREE's points in the type it\n"
               "was built with), printed with 9 significant digits. A query gets fewer than K\n"
               "rows when there are fewer than K points. QUERIES must have the points' dimension.\n"
               "\n"
               "options:\n"
               "  -k, --k K       neighbours per query, 1..1000000 (required without --radius)\n"
               "  --radius R      only the neighbours at distance <= R (R finite, >= 0), at most\n"
               "                  K of them (the nearest); without -k, all of them\n"
               "  -o, --output OUT  write the result to OUT (through a temporary file), not\n"
               "                  stdout\n"
               "  --leaf-size N   leaf size of the tree built from POINTS, 1..64 (default 12;\n"
               "                  ignored for a saved tree)\n"
               "  --double        read POINTS and QUERIES in double precision and search with\n"
               "                  double coordinates (float ones, the default, keep 24 bits:\n"
               "                  about 0.5 m at 4,500,000 m)\n"
               "  --backend B     auto (default: CUDA when a usable GPU is found), cpu or cuda\n"
               "  -h, --help      print this help and exit\n");
}

int cmd_kdtree(int argc, char **argv)
{
    return cli_dispatch(argc, argv, "kdtree", verbs, NUM_VERBS, usage, "command");
}

/* ---- options ---- */

typedef struct kd_args {
    const char *what;
    const char *input;   /* POINTS or TREE */
    const char *queries; /* knn: QUERIES */
    const char *out;
    grove_kdtree_opts opts;
    int leaf_given;
    grove_backend backend;
    int json;
    long k; /* 0: not given */
    int have_radius;
    double radius;
    int f64; /* --double */
} kd_args;

static void args_init(kd_args *a, const char *what)
{
    memset(a, 0, sizeof *a);
    a->what = what;
    a->backend = cli_default_backend;
    grove_kdtree_default_opts(&a->opts);
}

/* The options both commands take. Returns 1 if the current argument was one of them (p->exit
 * is then set if its value was wrong), else 0. */
static int common_option(cli_parser *p, kd_args *a)
{
    long v;
    if (cli_value(p, "--leaf-size")) {
        if (!cli_int(p, 1, GROVE_KDTREE_MAX_LEAF, &v)) a->opts.leaf_size = (int)v;
        a->leaf_given = 1;
    } else if (cli_flag(p, "--double")) {
        a->f64 = 1;
    } else if (cli_value(p, "--backend")) {
        cli_backend(p, &a->backend);
    } else if (cli_value(p, "-o") || cli_value(p, "--output")) {
        if (!p->exit && !p->val[0]) {
            cli_error(p->what, "%s needs a file name", p->arg);
            p->exit = CLI_EXIT_USAGE;
        }
        a->out = p->val;
    } else {
        return 0;
    }
    return 1;
}

/* ---- small helpers ---- */

/* A point file as read: float, or double with --double. */
typedef struct kd_pts {
    grove_points f;
    grove_points64 d;
    int f64;
} kd_pts;

static size_t kd_pts_n(const kd_pts *p) { return p->f64 ? p->d.n : p->f.n; }
static int kd_pts_dims(const kd_pts *p) { return p->f64 ? p->d.dims : p->f.dims; }

/* Points [first, first + m) as coordinates for the library (borrowed from p). */
static grove_coords kd_pts_coords(const kd_pts *p, size_t first, size_t m)
{
    grove_coords c;
    size_t at = first * (size_t)kd_pts_dims(p);
    c.n = m;
    c.dims = kd_pts_dims(p);
    c.type = p->f64 ? GROVE_COORD_F64 : GROVE_COORD_F32;
    if (p->f64)
        c.data = p->d.xyz ? p->d.xyz + at : NULL;
    else
        c.data = p->f.xyz ? p->f.xyz + at : NULL;
    return c;
}

static void kd_pts_free(kd_pts *p)
{
    grove_points_free(&p->f);
    grove_points64_free(&p->d);
}

/* Reads a point file in the precision a->f64 asks for. cli_read_points reads floats only, so
 * the double path repeats its refusal of tree files and its messages and exit codes. */
static int read_pts(grove_ctx *ctx, const kd_args *a, const char *path, kd_pts *p, double *ms)
{
    double t0 = cli_now_ms();
    grove_status s;
    memset(p, 0, sizeof *p);
    p->f64 = a->f64;
    if (!a->f64) return cli_read_points(ctx, a->what, path, 0, &p->f, ms);
    if (cli_file_has_magic(path, KD_MAGIC) || cli_file_has_magic(path, "GROVE-QT")) {
        cli_error(a->what, "%s: is a saved %s, not a point file", path,
                  cli_file_has_magic(path, KD_MAGIC) ? "k-d tree" : "quadtree");
        return CLI_EXIT_BAD_INPUT;
    }
    s = grove_points64_read(ctx, path, GROVE_POINTS_AUTO, 0, &p->d);
    if (ms) *ms = cli_now_ms() - t0;
    if (s == GROVE_OK) return CLI_EXIT_OK;
    if (s == GROVE_ERR_BAD_INPUT || s == GROVE_ERR_IO || s == GROVE_ERR_LIMIT)
        cli_error(a->what, "%s", grove_ctx_last_error(ctx));
    else
        cli_report_status(a->what, "reading the points", s, ctx);
    return s == GROVE_ERR_LIMIT ? CLI_EXIT_BAD_INPUT : cli_exit_code(s, CLI_CAUSE_INPUT);
}

static int build_tree(grove_ctx *ctx, const char *what, const kd_pts *pts,
                      const grove_kdtree_opts *o, grove_kdtree **t, double *ms)
{
    double t0 = cli_now_ms();
    grove_coords c = kd_pts_coords(pts, 0, kd_pts_n(pts));
    grove_status s = grove_kdtree_build(ctx, &c, o, t);
    if (ms) *ms = cli_now_ms() - t0;
    if (s == GROVE_OK) return CLI_EXIT_OK;
    cli_report_status(what, "building the tree", s, ctx);
    /* INVALID_ARG can only come from the options: the reader already rejected bad points */
    return cli_exit_code(s, CLI_CAUSE_OPTIONS);
}

/* Gets the tree the queries run on: loads a tree file, or reads a point file and builds. */
static int obtain_tree(grove_ctx *ctx, const kd_args *a, grove_kdtree **t)
{
    *t = NULL;
    if (cli_file_has_magic(a->input, KD_MAGIC) || cli_has_extension(a->input, ".kdt")) {
        grove_status s;
        if (a->leaf_given)
            cli_error(a->what, "note: --leaf-size is ignored: '%s' is a tree file, already built",
                      a->input);
        s = grove_kdtree_load(ctx, a->input, t);
        if (s == GROVE_OK) return CLI_EXIT_OK;
        if (s == GROVE_ERR_BAD_INPUT || s == GROVE_ERR_IO)
            cli_error(a->what, "%s", grove_ctx_last_error(ctx));
        else
            cli_report_status(a->what, "loading the tree", s, ctx);
        return cli_exit_code(s, CLI_CAUSE_INPUT);
    } else {
        kd_pts pts;
        int rc = read_pts(ctx, a, a->input, &pts, NULL);
        if (rc == CLI_EXIT_OK) rc = build_tree(ctx, a->what, &pts, &a->opts, t, NULL);
        kd_pts_free(&pts);
        return rc;
    }
}

/* One CSV row: query,rank,index,distance (the square root of the API's squared distance). */
static void ob_row(cli_out_buf *b, size_t q, size_t rank, uint64_t index, double dist2)
{
    char num[40];
    cli_ob_u64(b, q);
    cli_ob_char(b, ',');
    cli_ob_u64(b, rank);
    cli_ob_char(b, ',');
    cli_ob_u64(b, index);
    cli_ob_char(b, ',');
    snprintf(num, sizeof num, "%.9g\n", sqrt(dist2));
    cli_ob_str(b, num);
}

/* ---- kdtree build ---- */

typedef struct tree_stats {
    size_t nodes, leaves, empty_leaves, max_leaf;
} tree_stats;

static void tree_stats_of(const grove_kdtree *t, tree_stats *st)
{
    const grove_kdtree_node *nd = grove_kdtree_nodes(t);
    memset(st, 0, sizeof *st);
    st->nodes = grove_kdtree_num_nodes(t);
    for (size_t i = 0; i < st->nodes; i++) {
        size_t cnt = (size_t)(nd[i].end - nd[i].begin);
        if (nd[i].kind != GROVE_KDTREE_LEAF) continue;
        st->leaves++;
        if (cnt == 0) st->empty_leaves++;
        if (cnt > st->max_leaf) st->max_leaf = cnt;
    }
}

static int kd_build(int argc, char **argv)
{
    cli_parser p;
    kd_args a;
    grove_ctx *ctx = NULL;
    kd_pts pts;
    grove_kdtree *t = NULL;
    grove_kdtree_opts built;
    tree_stats st;
    grove_status s;
    double read_ms = 0, build_ms = 0, mean;
    size_t n;
    int rc, dims;
    const char *coords;
    char desc[320];

    args_init(&a, "kdtree build");
    memset(&pts, 0, sizeof pts);
    cli_parser_init(&p, argc, argv, a.what, usage_build);
    while (cli_next(&p)) {
        if (cli_help(&p))
            return CLI_EXIT_OK;
        else if (cli_flag(&p, "--json"))
            a.json = 1;
        else if (common_option(&p, &a))
            continue;
        else if (p.positional && !a.input)
            a.input = p.arg;
        else
            return cli_unknown(&p);
    }
    if (p.exit) return p.exit;
    if (!a.input) {
        cli_error(a.what, "no point file given");
        usage_build(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!a.out) {
        cli_error(a.what, "-o TREE is required");
        usage_build(stderr);
        return CLI_EXIT_USAGE;
    }
    if (cli_probe_output(a.out, a.what)) return CLI_EXIT_FAILURE;

    rc = cli_ctx_create(a.what, a.backend, &ctx);
    if (rc != CLI_EXIT_OK) return rc;
    rc = read_pts(ctx, &a, a.input, &pts, &read_ms);
    if (rc == CLI_EXIT_OK) rc = build_tree(ctx, a.what, &pts, &a.opts, &t, &build_ms);
    kd_pts_free(&pts);
    if (rc != CLI_EXIT_OK) goto done;

    s = grove_kdtree_save(ctx, t, a.out);
    if (s != GROVE_OK) {
        cli_report_status(a.what, "saving the tree", s, ctx);
        rc = cli_exit_code(s, CLI_CAUSE_RUN);
        goto done;
    }

    tree_stats_of(t, &st);
    grove_kdtree_get_opts(t, &built);
    n = grove_kdtree_num_points(t);
    dims = grove_kdtree_dims(t);
    coords = grove_kdtree_coord_type(t) == GROVE_COORD_F64 ? "double" : "float";
    mean = st.leaves > st.empty_leaves ? (double)n / (double)(st.leaves - st.empty_leaves) : 0.0;
    cli_describe_backend(ctx, desc, sizeof desc);
    if (a.json) {
        int dev = grove_ctx_device(ctx);
        grove_device_info info;
        printf("{\n  \"input\": ");
        cli_json_string(stdout, a.input);
        printf(",\n  \"points\": %zu,\n  \"dims\": %d,\n  \"coords\": \"%s\",\n"
               "  \"backend\": \"%s\",\n  \"device\": ",
               n, dims, coords, grove_backend_name(grove_ctx_backend(ctx)));
        if (dev >= 0 && grove_device_query(dev, &info) == GROVE_OK)
            cli_json_string(stdout, info.name);
        else
            printf("null");
        printf(",\n  \"leaf_size\": %d,\n  \"nodes\": %zu,\n  \"leaves\": %zu,\n"
               "  \"empty_leaves\": %zu,\n  \"depth\": %zu,\n  \"max_leaf_points\": %zu,\n"
               "  \"mean_leaf_points\": ",
               built.leaf_size, st.nodes, st.leaves, st.empty_leaves, grove_kdtree_depth(t),
               st.max_leaf);
        cli_json_number(stdout, mean);
        printf(",\n  \"read_ms\": ");
        cli_json_number(stdout, read_ms);
        printf(",\n  \"build_ms\": ");
        cli_json_number(stdout, build_ms);
        printf(",\n  \"points_per_s\": ");
        cli_json_number(stdout, build_ms > 0 ? (double)n / (build_ms * 1e-3) : 0.0);
        printf(",\n  \"output\": ");
        cli_json_string(stdout, a.out);
        printf("\n}\n");
    } else {
        printf("grove kdtree build: %s, %zu points, %d-D, %s, backend %s\n", a.input, n, dims,
               coords, desc);
        printf("options: leaf_size %d\n", built.leaf_size);
        printf("nodes: %zu (%zu leaves, %zu of them empty), depth %zu\n", st.nodes, st.leaves,
               st.empty_leaves, grove_kdtree_depth(t));
        printf("points per leaf: max %zu, mean %.1f over the %zu non-empty leaves\n", st.max_leaf,
               mean, st.leaves - st.empty_leaves);
        printf("build: %.3f ms, %.3f M points/s (reading the file: %.3f ms)\n", build_ms,
               build_ms > 0 ? (double)n / (build_ms * 1e3) : 0.0, read_ms);
        printf("wrote %s\n", a.out);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(a.what, "cannot write to stdout");
        rc = CLI_EXIT_FAILURE;
    }
done:
    grove_kdtree_destroy(t);
    grove_ctx_destroy(ctx);
    return rc;
}

/* ---- knn ---- */

/* Runs the queries in batches and writes the rows to ob. Returns an exit code. */
static int run_queries(grove_ctx *ctx, const kd_args *a, const grove_kdtree *t, const kd_pts *q,
                       cli_out_buf *ob)
{
    size_t n = grove_kdtree_num_points(t), nq = kd_pts_n(q);
    /* k beyond the tree's points would only add empty slots */
    size_t k = a->k > 0 ? ((size_t)a->k < n ? (size_t)a->k : n) : 0;
    size_t batch;
    uint64_t *idx = NULL;
    double *d2 = NULL;
    int rc = CLI_EXIT_OK;

    if (n == 0 || nq == 0) return CLI_EXIT_OK;
    if (a->have_radius)
        batch = k ? (BATCH_ENTRIES / k ? BATCH_ENTRIES / k : 1) : RADIUS_BATCH;
    else
        batch = BATCH_ENTRIES / k ? BATCH_ENTRIES / k : 1;
    if (!a->have_radius) {
        size_t cnt = (batch < nq ? batch : nq) * k;
        idx = (uint64_t *)malloc(cnt * sizeof *idx);
        d2 = (double *)malloc(cnt * sizeof *d2);
        if (!idx || !d2) {
            cli_error(a->what, "out of host memory for %zu x %zu neighbours", cnt / k, k);
            rc = CLI_EXIT_FAILURE;
            goto done;
        }
    }
    for (size_t q0 = 0; q0 < nq; q0 += batch) {
        size_t m = nq - q0 < batch ? nq - q0 : batch;
        grove_coords c = kd_pts_coords(q, q0, m);
        grove_status s;
        if (a->have_radius) {
            grove_kdtree_result res;
            memset(&res, 0, sizeof res);
            s = grove_kdtree_radius(ctx, t, &c, a->radius, k, &res);
            if (s != GROVE_OK) {
                cli_report_status(a->what, "searching", s, ctx);
                rc = cli_exit_code(s, CLI_CAUSE_RUN);
                goto done;
            }
            for (size_t j = 0; j < m; j++)
                for (uint64_t e = res.offsets[j]; e < res.offsets[j + 1]; e++)
                    ob_row(ob, q0 + j, (size_t)(e - res.offsets[j]), res.indices[e], res.dist2[e]);
            grove_kdtree_result_free(&res);
        } else {
            s = grove_kdtree_knn(ctx, t, &c, (int)k, idx, d2);
            if (s != GROVE_OK) {
                cli_report_status(a->what, "searching", s, ctx);
                rc = cli_exit_code(s, CLI_CAUSE_RUN);
                goto done;
            }
            for (size_t j = 0; j < m; j++)
                for (size_t r = 0; r < k && idx[j * k + r] != UINT64_MAX; r++)
                    ob_row(ob, q0 + j, r, idx[j * k + r], d2[j * k + r]);
        }
        if (ferror(ob->f)) break; /* the commit reports it */
    }
done:
    free(idx);
    free(d2);
    return rc;
}

int cmd_knn(int argc, char **argv)
{
    cli_parser p;
    kd_args a;
    grove_ctx *ctx = NULL;
    grove_kdtree *t = NULL;
    kd_pts qpts;
    cli_outfile of;
    int rc, to_file = 0;
    static cli_out_buf ob;

    args_init(&a, "knn");
    memset(&of, 0, sizeof of);
    memset(&qpts, 0, sizeof qpts);
    cli_parser_init(&p, argc, argv, a.what, usage_knn);
    while (cli_next(&p)) {
        if (cli_help(&p))
            return CLI_EXIT_OK;
        else if (cli_value(&p, "-k") || cli_value(&p, "--k"))
            cli_int(&p, 1, MAX_K, &a.k);
        else if (cli_value(&p, "--radius")) {
            if (cli_double(&p, 0, HUGE_VAL, &a.radius) == 0) a.have_radius = 1;
        } else if (common_option(&p, &a))
            continue;
        else if (p.positional && !a.input)
            a.input = p.arg;
        else if (p.positional && !a.queries)
            a.queries = p.arg;
        else
            return cli_unknown(&p);
    }
    if (p.exit) return p.exit;
    if (!a.input || !a.queries) {
        cli_error(a.what, "%s",
                  !a.input ? "no input given (POINTS or TREE, then QUERIES)"
                           : "no query file given (QUERIES)");
        usage_knn(stderr);
        return CLI_EXIT_USAGE;
    }
    if (a.k == 0 && !a.have_radius) {
        cli_error(a.what, "-k K is required (or --radius R)");
        usage_knn(stderr);
        return CLI_EXIT_USAGE;
    }
    if (a.out) {
        if (cli_outfile_open(&of, a.out, a.what) != 0) return CLI_EXIT_FAILURE;
        to_file = 1;
    }
    rc = cli_ctx_create(a.what, a.backend, &ctx);
    /* the queries first: a bad query file fails before a long build */
    if (rc == CLI_EXIT_OK) rc = read_pts(ctx, &a, a.queries, &qpts, NULL);
    if (rc == CLI_EXIT_OK) rc = obtain_tree(ctx, &a, &t);
    if (rc != CLI_EXIT_OK) goto done;
    if (kd_pts_n(&qpts) > 0 && kd_pts_dims(&qpts) != grove_kdtree_dims(t)) {
        cli_error(a.what, "%s: the queries are %d-D but the points of %s are %d-D", a.queries,
                  kd_pts_dims(&qpts), a.input, grove_kdtree_dims(t));
        rc = CLI_EXIT_BAD_INPUT;
        goto done;
    }

    ob.f = to_file ? of.f : stdout;
    ob.len = 0;
    cli_ob_str(&ob, "query,rank,index,distance\n");
    rc = run_queries(ctx, &a, t, &qpts, &ob);
    cli_ob_flush(&ob);
    if (rc != CLI_EXIT_OK) goto done;
    if (to_file) {
        to_file = 0; /* committed or aborted either way */
        if (cli_outfile_commit(&of, a.what) != 0) rc = CLI_EXIT_FAILURE;
    } else if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(a.what, "cannot write to stdout: %s", strerror(errno ? errno : EIO));
        rc = CLI_EXIT_FAILURE;
    }
done:
    if (to_file) cli_outfile_abort(&of);
    kd_pts_free(&qpts);
    grove_kdtree_destroy(t);
    grove_ctx_destroy(ctx);
    return rc;
}
