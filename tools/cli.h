/*
 * cli.h - helpers shared by the `grove` command-line tool's subcommands (not part of the
 * library): option parsing, backend selection, error messages, exit codes, JSON output and
 * files written through a temporary name.
 *
 * A subcommand is a function `int cmd_x(int argc, char **argv)` where argv[0] is the command's
 * own name; it returns the process exit code. Adding one is one entry in the table in grove.c.
 */
#ifndef GROVE_CLI_H
#define GROVE_CLI_H

#include <stdio.h>

#include "grove/grove.h"
#include "grove/io.h"

/* Exit codes of the tool. */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_USAGE = 1,     /* unknown command or option, missing or malformed value */
    CLI_EXIT_BAD_INPUT = 2, /* the input data is malformed or cannot be read */
    CLI_EXIT_FAILURE = 3    /* runtime or device failure, a failed check, an unwritable output */
};

/* Where a failing status came from, which decides its exit code (see cli_exit_code). */
typedef enum cli_cause {
    CLI_CAUSE_RUN = 0,     /* the work itself */
    CLI_CAUSE_OPTIONS = 1, /* a value the user gave on the command line */
    CLI_CAUSE_INPUT = 2    /* reading the user's input files */
} cli_cause;

/* BAD_INPUT -> 2; IO -> 2 when reading input, else 3; INVALID_ARG -> 1 when it comes from the
 * user's options, else 3 (grove passed itself a bad argument); anything else -> 3. */
int cli_exit_code(grove_status s, cli_cause cause);

/* ---- helpers of the commands that read point files and write result rows ---- */

/* 1 if the file at path starts with the 8 bytes of magic (a tree file), else 0. */
int cli_file_has_magic(const char *path, const char *magic);

/* 1 if path ends in `ext` (".qt"), upper or lower case. */
int cli_has_extension(const char *path, const char *ext);

/* Tries to create a file beside `path` (and removes it), so that an unwritable output fails
 * before the work. Returns 0 or CLI_EXIT_FAILURE (after the message). */
int cli_probe_output(const char *path, const char *what);

/* Reads a point file with the io module (dims as grove_points_read: 0 takes the file's, 2 reads
 * x and y only); messages are the reader's ("pts.csv:3: ..."). A saved grove tree (GROVE-QT or
 * GROVE-KD magic) is refused with a message saying what it is. *ms (may be NULL) receives the
 * time. Returns an exit code. */
int cli_read_points(grove_ctx *ctx, const char *what, const char *path, int dims, grove_points *pts,
                    double *ms);

/* Buffered output of result rows, several times faster than printf for millions of rows. */
typedef struct cli_out_buf {
    FILE *f;
    size_t len;
    char buf[1 << 16];
} cli_out_buf;
void cli_ob_flush(cli_out_buf *b);
void cli_ob_u64(cli_out_buf *b, unsigned long long v);
void cli_ob_char(cli_out_buf *b, char c);
void cli_ob_str(cli_out_buf *b, const char *s);

/* A subcommand: argv[0] is `name`. */
typedef struct cli_command {
    const char *name;
    const char *summary; /* one line for the parent's usage */
    int (*run)(int argc, char **argv);
} cli_command;

/* Looks `name` up in a table of `count` commands; NULL if absent. */
const cli_command *cli_find_command(const cli_command *table, int count, const char *name);

/* Runs the subcommand of `table` that argv[1] names (argv[0] is `what`, e.g. "quadtree"):
 * --help prints usage; a missing or unknown name ("no <noun> given", "unknown <noun> 'x'") is a
 * usage error. Returns the exit code. */
int cli_dispatch(int argc, char **argv, const char *what, const cli_command *table, int count,
                 void (*usage)(FILE *f), const char *noun);

/* Prints "  name    summary" lines for a command table (inside a usage text). */
void cli_print_commands(FILE *f, const cli_command *table, int count);

/* Prints "grove: <what>: <message>\n" to stderr ("grove: <message>" when what is NULL). */
void cli_error(const char *what, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- option parsing ----
 * Options are long (--name VALUE or --name=VALUE), plus -h for --help. Usage:
 *
 *     cli_parser p;
 *     cli_parser_init(&p, argc, argv, "demo", usage);
 *     while (cli_next(&p)) {
 *         if (cli_help(&p)) return CLI_EXIT_OK;        // usage printed to stdout
 *         else if (cli_flag(&p, "--json")) json = 1;
 *         else if (cli_value(&p, "--size")) { if (cli_size(&p, 1, MAX, &n)) return p.exit; }
 *         else return cli_unknown(&p);                  // message + usage on stderr, exit 1
 *     }
 *     if (p.exit) return p.exit;
 *
 * Value helpers print the message themselves and set p.exit to CLI_EXIT_USAGE on error. */
typedef struct cli_parser {
    int argc;
    char **argv;
    int i;                  /* index of the next argument */
    const char *what;       /* command path for messages ("bench prim"), NULL at the top */
    void (*usage)(FILE *f); /* prints the command's usage */
    const char *arg;        /* the current argument */
    const char *val;        /* the value of the option matched by cli_value() */
    int positional;         /* 1 if the current argument is not an option */
    int dashdash;           /* 1 once a lone "--" was seen */
    int exit;               /* CLI_EXIT_USAGE after an error, else 0 */
} cli_parser;

/* argv[0] is the command itself and is skipped. */
void cli_parser_init(cli_parser *p, int argc, char **argv, const char *what,
                     void (*usage)(FILE *f));

/* Moves to the next argument; returns 0 when there is none (or after an error). Everything
 * after a lone "--" is positional. */
int cli_next(cli_parser *p);

/* 1 if the current argument is --help or -h; prints the usage to stdout. */
int cli_help(cli_parser *p);

/* 1 if the current argument is the flag `name` (a flag given a value is an error). */
int cli_flag(cli_parser *p, const char *name);

/* 1 if the current argument is option `name`; its value is then in p->val. A missing value
 * is reported here (p->exit set, p->val NULL), so callers check p->exit after a match. */
int cli_value(cli_parser *p, const char *name);

/* Reports the current argument as unknown (or unexpected, if positional) with the usage on
 * stderr; returns CLI_EXIT_USAGE. */
int cli_unknown(cli_parser *p);

/* Parses p->val as an element count in [lo, hi]: decimal digits, optionally written as
 * MeK (1e7, 5e6) or with a k/M/G suffix (powers of 10). Returns 0, or CLI_EXIT_USAGE after
 * printing why. */
int cli_size(cli_parser *p, size_t lo, size_t hi, size_t *out);

/* Parses p->val as an integer in [lo, hi]. */
int cli_int(cli_parser *p, long lo, long hi, long *out);

/* Parses p->val as a finite decimal number in [lo, hi]; hi may be HUGE_VAL (no upper bound),
 * lo -HUGE_VAL (no lower bound). NaN, infinities and values too large for a double are
 * refused, each with its own message. Returns 0, or CLI_EXIT_USAGE after printing why. */
int cli_double(cli_parser *p, double lo, double hi, double *out);

/* cli_double() that also takes an infinity spelled as strtod reads it (inf, -inf, Infinity,
 * any case), within [lo, hi] like any value; NaN is still refused. */
int cli_double_inf(cli_parser *p, double lo, double hi, double *out);

/* Parses p->val as auto|cpu|cuda. */
int cli_backend(cli_parser *p, grove_backend *out);

/* The backend chosen with the global `grove --backend B <command>`; AUTO by default.
 * Subcommands start from it and let their own --backend override it. */
extern grove_backend cli_default_backend;
/* grove --device-mem-limit: the contexts' device_mem_limit (0: none). */
extern size_t cli_device_mem_limit;

/* ---- contexts ---- */

/* Creates a context for backend b. On failure prints why, in a way that says what to do
 * (asking for CUDA in a build without it, or on a machine without a usable GPU), destroys
 * the half-made context and returns CLI_EXIT_FAILURE; else CLI_EXIT_OK. */
int cli_ctx_create(const char *what, grove_backend b, grove_ctx **out);

/* Fills buf with "cpu" or "cuda (device 0: NVIDIA H100 ...)" for ctx. */
void cli_describe_backend(const grove_ctx *ctx, char *buf, size_t size);

/* Prints "grove: <what>: <step>: <status name>: <context message>" for a failed call. */
void cli_report_status(const char *what, const char *step, grove_status s, const grove_ctx *ctx);

/* ---- time ---- */

/* Monotonic clock in milliseconds. */
double cli_now_ms(void);

/* ---- JSON ---- */

/* Writes s as a JSON string literal, quotes included. NULL is written as null. */
void cli_json_string(FILE *f, const char *s);

/* Writes a number; NaN and infinities (not representable in JSON) are written as null. */
void cli_json_number(FILE *f, double v);

/* ---- output files ----
 * Results are written to a temporary file beside the target and renamed over it only when
 * complete, so a failure never leaves a partial result behind. */
typedef struct cli_outfile {
    FILE *f;        /* write here */
    char *path;     /* final name */
    char *tmp_path; /* temporary name in the same directory */
} cli_outfile;

/* Creates dir and its missing parents (like mkdir -p). Returns 0, or -1 with errno set (and
 * the directories it made removed again). */
int cli_mkdirs(const char *dir);

/* The directories cli_mkdirs_new() made, each under the path string it was made with, in the
 * order made; whole: the last component of dir was one of them (dir itself is new). */
typedef struct cli_newdirs {
    char **path;
    size_t n;
    int whole;
} cli_newdirs;

/* cli_mkdirs(), and *made (may be NULL) receives the directories it made (none when every one
 * existed); free it with cli_rmdirs_new() or cli_newdirs_free(). On failure *made is empty and
 * the directories it made are removed again (as by cli_mkdirs). */
int cli_mkdirs_new(const char *dir, cli_newdirs *made);

/* Undoes cli_mkdirs_new() after a failure: removes the directories it made, the last made
 * first, each only if it is empty (rmdir), then frees the list. A directory that existed
 * before is never removed, whatever '.' or '..' the path held. */
void cli_rmdirs_new(cli_newdirs *made);

/* Frees the list without removing anything. */
void cli_newdirs_free(cli_newdirs *made);

/* Opens a temporary file for `path`. Returns 0, or -1 after printing why (as `what`). */
int cli_outfile_open(cli_outfile *o, const char *path, const char *what);

/* Closes and renames the file into place. Returns 0, or -1 after printing why and removing
 * the temporary file. */
int cli_outfile_commit(cli_outfile *o, const char *what);

/* Closes and removes the temporary file (after a failure). Accepts an unopened cli_outfile
 * that was zero-initialised. */
void cli_outfile_abort(cli_outfile *o);

/* Joins a directory and a file name; the caller frees the result. NULL if out of memory. */
char *cli_path_join(const char *dir, const char *name);

/* ---- subcommands (one file each) ---- */
int cmd_info(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_quadtree(int argc, char **argv);
int cmd_kdtree(int argc, char **argv); /* cmd_kdtree.c: `grove kdtree build` */
int cmd_knn(int argc, char **argv);    /* cmd_kdtree.c: `grove knn` */
int cmd_mri(int argc, char **argv);    /* cmd_mri.c: `grove mri q|fhd|phantom|recon` */
int cmd_octree(int argc, char **argv); /* cmd_octree.c: `grove octree build|query|export` */
int cmd_bezier(int argc, char **argv); /* cmd_bezier.c: `grove bezier` */
/* cmd_mri_recon.c: `grove mri phantom` and `grove mri recon`, called by cmd_mri (argv[0] is the
 * subcommand's name). */
int cmd_mri_phantom(int argc, char **argv);
int cmd_mri_recon(int argc, char **argv);

/* ---- demo parts ----
 * `grove demo` runs one part per module on generated data; a part runs its steps and records
 * one row per step with cli_demo_row(). Adding a module's demo is one entry in the table in
 * cmd_demo.c. */
typedef struct cli_demo cli_demo;

struct cli_demo {
    grove_ctx *ctx; /* the backend being demonstrated */
    grove_ctx *ref; /* the CPU backend, as a reference, when ctx is CUDA; else NULL */
    size_t n;       /* elements per step */
    unsigned long long seed;
    const char *out_dir; /* --out DIR for parts that write a file there; NULL without it */
    int quiet;           /* warm-up pass: rows are only shown when they fail */
    int failures;        /* steps whose check failed or whose call returned an error */
    void *rows;          /* internal: the recorded rows */
    int nrows, cap;
};

/* Records one step. ok: 1 check passed, 0 check failed; s != GROVE_OK means the call itself
 * failed (its message is taken from ctx and printed). ms is the call's wall-clock time. */
void cli_demo_row(cli_demo *d, const char *module, const char *step, size_t n, double ms,
                  grove_status s, const grove_ctx *ctx, int ok);

/* The prim module's part (cmd_demo.c). Returns 0, or -1 when it could not run at all (out of
 * host memory); failed steps are counted in d->failures, not returned. */
int cli_demo_prim(cli_demo *d);
/* The quadtree part (cmd_demo.c), same contract. */
int cli_demo_quadtree(cli_demo *d);
/* The k-d tree part (cmd_demo.c), same contract. */
int cli_demo_kdtree(cli_demo *d);
/* The mri part (demo_mri.c), same contract. */
int cli_demo_mri(cli_demo *d);
/* The octree part (demo_octree.c), same contract. */
int cli_demo_octree(cli_demo *d);
/* The bezier part (demo_bezier.c), same contract. */
int cli_demo_bezier(cli_demo *d);

/* Draws tree t to an SVG file at path (cmd_quadtree.c): points (a deterministic sample above
 * 100,000) and node boxes (down to the deepest level with at most 50,000 boxes). `what` names
 * the command in messages. Optional outputs: the points and boxes drawn and the deepest box
 * level. Returns 0 or an exit code after printing the error. */
struct grove_quadtree;
int cli_quadtree_svg(const struct grove_quadtree *t, const char *path, const char *what,
                     const char *title, size_t *points_drawn, size_t *boxes_drawn, int *box_level);

#endif /* GROVE_CLI_H */
