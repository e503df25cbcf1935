/*
 * cli.c - helpers shared by the subcommands of the `grove` tool.
 */
#define _POSIX_C_SOURCE 200809L

#include "cli.h"
#include "grove/io.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

grove_backend cli_default_backend = GROVE_BACKEND_AUTO;
size_t cli_device_mem_limit = 0;

int cli_exit_code(grove_status s, cli_cause cause)
{
    switch (s) {
    case GROVE_OK: return CLI_EXIT_OK;
    case GROVE_ERR_BAD_INPUT: return CLI_EXIT_BAD_INPUT;
    case GROVE_ERR_IO: return cause == CLI_CAUSE_INPUT ? CLI_EXIT_BAD_INPUT : CLI_EXIT_FAILURE;
    case GROVE_ERR_INVALID_ARG:
        return cause == CLI_CAUSE_OPTIONS ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
    default: return CLI_EXIT_FAILURE;
    }
}

const cli_command *cli_find_command(const cli_command *table, int count, const char *name)
{
    for (int i = 0; i < count; i++)
        if (strcmp(table[i].name, name) == 0) return &table[i];
    return NULL;
}

void cli_print_commands(FILE *f, const cli_command *table, int count)
{
    for (int i = 0; i < count; i++) fprintf(f, "  %-10s %s\n", table[i].name, table[i].summary);
}

void cli_error(const char *what, const char *fmt, ...)
{
    va_list ap;
    if (what)
        fprintf(stderr, "grove: %s: ", what);
    else
        fputs("grove: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ---- option parsing ---- */

void cli_parser_init(cli_parser *p, int argc, char **argv, const char *what, void (*usage)(FILE *f))
{
    memset(p, 0, sizeof *p);
    p->argc = argc;
    p->argv = argv;
    p->i = 1;
    p->what = what;
    p->usage = usage;
}

int cli_next(cli_parser *p)
{
    if (p->exit || p->i >= p->argc) return 0;
    p->arg = p->argv[p->i++];
    p->val = NULL;
    if (!p->dashdash && strcmp(p->arg, "--") == 0) {
        p->dashdash = 1;
        if (p->i >= p->argc) return 0;
        p->arg = p->argv[p->i++];
    }
    p->positional = p->dashdash || p->arg[0] != '-' || strcmp(p->arg, "-") == 0;
    return 1;
}

int cli_help(cli_parser *p)
{
    if (p->positional) return 0;
    if (strcmp(p->arg, "--help") != 0 && strcmp(p->arg, "-h") != 0) return 0;
    if (p->usage) p->usage(stdout);
    return 1;
}

int cli_flag(cli_parser *p, const char *name)
{
    size_t len = strlen(name);
    if (p->positional || strncmp(p->arg, name, len) != 0) return 0;
    if (p->arg[len] == '\0') return 1;
    if (p->arg[len] == '=') {
        cli_error(p->what, "option %s takes no value", name);
        p->exit = CLI_EXIT_USAGE;
        return 1;
    }
    return 0;
}

int cli_value(cli_parser *p, const char *name)
{
    size_t len = strlen(name);
    if (p->positional || strncmp(p->arg, name, len) != 0) return 0;
    if (p->arg[len] == '=') {
        p->val = p->arg + len + 1;
        return 1;
    }
    if (p->arg[len] != '\0') return 0;
    if (p->i >= p->argc) {
        cli_error(p->what, "option %s needs a value (see grove %s%s--help)", name,
                  p->what ? p->what : "", p->what ? " " : "");
        p->exit = CLI_EXIT_USAGE;
        return 1;
    }
    p->val = p->argv[p->i++];
    return 1;
}

int cli_unknown(cli_parser *p)
{
    if (p->positional)
        cli_error(p->what, "unexpected argument '%s'", p->arg);
    else
        cli_error(p->what, "unknown option '%s'", p->arg);
    if (p->usage) p->usage(stderr);
    p->exit = CLI_EXIT_USAGE;
    return CLI_EXIT_USAGE;
}

/* Parses an unsigned decimal number with an optional exponent or suffix; returns 0 if the
 * whole string is valid and fits in size_t. */
static int parse_count(const char *s, size_t *out)
{
    size_t v = 0;
    unsigned exp10 = 0;
    const char *c = s;
    if (!(*c >= '0' && *c <= '9')) return -1;
    for (; *c >= '0' && *c <= '9'; c++) {
        if (v > (SIZE_MAX - (size_t)(*c - '0')) / 10) return -1;
        v = v * 10 + (size_t)(*c - '0');
    }
    if (*c == 'e' || *c == 'E') {
        c++;
        if (!(*c >= '0' && *c <= '9')) return -1;
        for (; *c >= '0' && *c <= '9'; c++) {
            exp10 = exp10 * 10 + (unsigned)(*c - '0');
            if (exp10 > 30) return -1;
        }
    } else if (*c == 'k' || *c == 'K') {
        exp10 = 3;
        c++;
    } else if (*c == 'M') {
        exp10 = 6;
        c++;
    } else if (*c == 'G') {
        exp10 = 9;
        c++;
    }
    if (*c != '\0') return -1;
    for (unsigned k = 0; k < exp10; k++) {
        if (v > SIZE_MAX / 10) return -1;
        v *= 10;
    }
    *out = v;
    return 0;
}

int cli_size(cli_parser *p, size_t lo, size_t hi, size_t *out)
{
    size_t v;
    if (p->exit) return p->exit;
    if (parse_count(p->val, &v) != 0) {
        cli_error(p->what, "%s: '%s' is not a count (examples: 100000, 1e7, 16M)", p->arg, p->val);
        return p->exit = CLI_EXIT_USAGE;
    }
    if (v < lo || v > hi) {
        cli_error(p->what, "%s: %zu is out of range [%zu, %zu]", p->arg, v, lo, hi);
        return p->exit = CLI_EXIT_USAGE;
    }
    *out = v;
    return 0;
}

int cli_int(cli_parser *p, long lo, long hi, long *out)
{
    char *end;
    long v;
    if (p->exit) return p->exit;
    errno = 0;
    v = strtol(p->val, &end, 10);
    if (errno != 0 || end == p->val || *end != '\0') {
        cli_error(p->what, "%s: '%s' is not an integer", p->arg, p->val);
        return p->exit = CLI_EXIT_USAGE;
    }
    if (v < lo || v > hi) {
        cli_error(p->what, "%s: %ld is out of range [%ld, %ld]", p->arg, v, lo, hi);
        return p->exit = CLI_EXIT_USAGE;
    }
    *out = v;
    return 0;
}

/* 1 if s spells an infinity as strtod reads it ("inf", "-Infinity", ...), 0 for a number that
 * is only too large for a double ("1e999"). */
static int spells_infinity(const char *s)
{
    while (*s == '+' || *s == '-') s++;
    return (s[0] == 'i' || s[0] == 'I') && (s[1] == 'n' || s[1] == 'N') &&
           (s[2] == 'f' || s[2] == 'F');
}

/* cli_double() and cli_double_inf(): infinities (spelled inf or infinity) are accepted only
 * when allow_inf, and then within [lo, hi] as any other value. */
static int parse_double(cli_parser *p, double lo, double hi, int allow_inf, double *out)
{
    char *end;
    double v;
    int len = (int)strcspn(p->arg, "="); /* the option's name, also in --name=value */
    if (p->exit) return p->exit;
    v = strtod(p->val, &end);
    if (end == p->val || *end != '\0' || p->val[0] == ' ' || p->val[0] == '\t') {
        cli_error(p->what, "%.*s: '%s' is not a number", len, p->arg, p->val);
        return p->exit = CLI_EXIT_USAGE;
    }
    if (isnan(v)) {
        cli_error(p->what, "%.*s: '%s' is NaN, not a number", len, p->arg, p->val);
        return p->exit = CLI_EXIT_USAGE;
    }
    if (isinf(v) && !spells_infinity(p->val)) {
        cli_error(p->what, "%.*s: '%s' is too large for a double", len, p->arg, p->val);
        return p->exit = CLI_EXIT_USAGE;
    }
    if (isinf(v) && !allow_inf) {
        cli_error(p->what, "%.*s: '%s' is infinite, a finite number is needed", len, p->arg,
                  p->val);
        return p->exit = CLI_EXIT_USAGE;
    }
    if (v < lo || v > hi) {
        if (isinf(hi))
            cli_error(p->what, "%.*s: '%s' is out of range (must be >= %g)", len, p->arg, p->val,
                      lo);
        else if (isinf(lo))
            cli_error(p->what, "%.*s: '%s' is out of range (must be <= %g)", len, p->arg, p->val,
                      hi);
        else
            cli_error(p->what, "%.*s: '%s' is out of range [%g, %g]", len, p->arg, p->val, lo, hi);
        return p->exit = CLI_EXIT_USAGE;
    }
    *out = v;
    return 0;
}

int cli_double(cli_parser *p, double lo, double hi, double *out)
{
    return parse_double(p, lo, hi, 0, out);
}

int cli_double_inf(cli_parser *p, double lo, double hi, double *out)
{
    return parse_double(p, lo, hi, 1, out);
}

int cli_backend(cli_parser *p, grove_backend *out)
{
    if (p->exit) return p->exit;
    if (strcmp(p->val, "auto") == 0)
        *out = GROVE_BACKEND_AUTO;
    else if (strcmp(p->val, "cpu") == 0)
        *out = GROVE_BACKEND_CPU;
    else if (strcmp(p->val, "cuda") == 0)
        *out = GROVE_BACKEND_CUDA;
    else {
        cli_error(p->what, "--backend: '%s' is not one of auto, cpu, cuda", p->val);
        return p->exit = CLI_EXIT_USAGE;
    }
    return 0;
}

/* ---- contexts ---- */

int cli_ctx_create(const char *what, grove_backend b, grove_ctx **out)
{
    grove_ctx_opts o;
    grove_ctx *ctx = NULL;
    grove_status s;
    grove_ctx_default_opts(&o);
    o.backend = b;
    o.device_mem_limit = cli_device_mem_limit;
    *out = NULL;
    s = grove_ctx_create(&o, &ctx);
    if (s == GROVE_OK) {
        *out = ctx;
        return CLI_EXIT_OK;
    }
    if (s == GROVE_ERR_UNSUPPORTED || s == GROVE_ERR_NO_DEVICE)
        cli_error(what, "cannot use the %s backend: %s; use --backend cpu or --backend auto",
                  grove_backend_name(b), ctx ? grove_ctx_last_error(ctx) : grove_status_string(s));
    else
        cli_error(what, "cannot create a %s context: %s: %s", grove_backend_name(b),
                  grove_status_string(s), ctx ? grove_ctx_last_error(ctx) : "");
    grove_ctx_destroy(ctx);
    return cli_exit_code(s, CLI_CAUSE_RUN);
}

void cli_describe_backend(const grove_ctx *ctx, char *buf, size_t size)
{
    grove_device_info info;
    int dev = grove_ctx_device(ctx);
    if (grove_ctx_backend(ctx) != GROVE_BACKEND_CUDA) {
        snprintf(buf, size, "cpu");
        return;
    }
    if (grove_device_query(dev, &info) == GROVE_OK)
        snprintf(buf, size, "cuda (device %d: %s)", dev, info.name);
    else
        snprintf(buf, size, "cuda (device %d)", dev);
}

void cli_report_status(const char *what, const char *step, grove_status s, const grove_ctx *ctx)
{
    const char *msg = ctx ? grove_ctx_last_error(ctx) : "";
    if (msg[0])
        cli_error(what, "%s: %s: %s", step, grove_status_string(s), msg);
    else
        cli_error(what, "%s: %s", step, grove_status_string(s));
}

/* ---- time ---- */

double cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---- JSON ---- */

void cli_json_string(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        switch (*c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            /* Other control characters must be escaped; bytes >= 0x80 pass through (UTF-8). */
            if (*c < 0x20)
                fprintf(f, "\\u%04x", (unsigned)*c);
            else
                fputc(*c, f);
        }
    }
    fputc('"', f);
}

void cli_json_number(FILE *f, double v)
{
    if (!isfinite(v))
        fputs("null", f);
    else if (v == floor(v) && fabs(v) < 9007199254740992.0)
        fprintf(f, "%.0f", v);
    else
        fprintf(f, "%.6g", v);
}

/* ---- output files ---- */

int cli_mkdirs(const char *dir) { return cli_mkdirs_new(dir, NULL); }

/* Appends a copy of the first len bytes of path to made's list. Returns 0 or -1 (no memory). */
static int newdirs_add(cli_newdirs *made, const char *path, size_t len)
{
    char **p = (char **)realloc(made->path, (made->n + 1) * sizeof *p);
    char *s = (char *)malloc(len + 1);
    if (p) made->path = p;
    if (!p || !s) {
        free(s);
        return -1;
    }
    memcpy(s, path, len);
    s[len] = '\0';
    made->path[made->n++] = s;
    return 0;
}

int cli_mkdirs_new(const char *dir, cli_newdirs *out)
{
    cli_newdirs made = {NULL, 0, 0};
    char *buf;
    size_t len;
    struct stat st;
    if (out) memset(out, 0, sizeof *out);
    if (!dir || !dir[0]) {
        errno = ENOENT;
        return -1;
    }
    if (stat(dir, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return 0;
        errno = ENOTDIR;
        return -1;
    }
    len = strlen(dir);
    buf = (char *)malloc(len + 1);
    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(buf, dir, len + 1);
    /* Create each prefix in turn; EEXIST for an existing one is fine, other errors are not.
     * Each directory made is recorded by the very string mkdir made it under, so that taking
     * them back never names another one (a prefix such as "new/.." is an old directory). */
    for (size_t k = 1; k <= len; k++) {
        if (buf[k] != '/' && buf[k] != '\0') continue;
        if (buf[k - 1] == '/') continue;
        char save = buf[k];
        buf[k] = '\0';
        if (mkdir(buf, 0777) == 0) {
            if (newdirs_add(&made, buf, k) != 0) {
                rmdir(buf);
                cli_rmdirs_new(&made);
                free(buf);
                errno = ENOMEM;
                return -1;
            }
            made.whole = 1;
        } else {
            int e = errno;
            if (e != EEXIST || stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
                cli_rmdirs_new(&made);
                free(buf);
                errno = (e == EEXIST) ? ENOTDIR : e;
                return -1;
            }
            made.whole = 0;
        }
        buf[k] = save;
    }
    free(buf);
    if (out)
        *out = made;
    else
        cli_newdirs_free(&made);
    return 0;
}

void cli_rmdirs_new(cli_newdirs *made)
{
    /* the last made first; rmdir removes only an empty directory, so whatever someone else put
     * there stays (and keeps its parents) */
    for (size_t k = made->n; k-- > 0;) rmdir(made->path[k]);
    cli_newdirs_free(made);
}

void cli_newdirs_free(cli_newdirs *made)
{
    for (size_t k = 0; k < made->n; k++) free(made->path[k]);
    free(made->path);
    memset(made, 0, sizeof *made);
}

char *cli_path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    int slash = a > 0 && dir[a - 1] != '/';
    char *p = (char *)malloc(a + (size_t)slash + b + 1);
    if (!p) return NULL;
    memcpy(p, dir, a);
    if (slash) p[a] = '/';
    memcpy(p + a + (size_t)slash, name, b + 1);
    return p;
}

static char *str_dup(const char *s)
{
    size_t len = strlen(s);
    char *d = (char *)malloc(len + 1);
    if (d) memcpy(d, s, len + 1);
    return d;
}

int cli_outfile_open(cli_outfile *o, const char *path, const char *what)
{
    static const char suffix[] = ".tmp.XXXXXX";
    size_t len = strlen(path);
    int fd;
    struct stat sb;
    memset(o, 0, sizeof *o);
    /* the rename at the end would fail, after the work and after any other output was written */
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        cli_error(what, "'%s' is a directory, not a file name", path);
        return -1;
    }
    o->path = str_dup(path);
    o->tmp_path = (char *)malloc(len + sizeof suffix);
    if (!o->path || !o->tmp_path) {
        cli_error(what, "out of host memory");
        cli_outfile_abort(o);
        return -1;
    }
    memcpy(o->tmp_path, path, len);
    memcpy(o->tmp_path + len, suffix, sizeof suffix);
    fd = mkstemp(o->tmp_path);
    if (fd < 0) {
        cli_error(what, "cannot create '%s' (through a temporary file beside it): %s", path,
                  strerror(errno));
        free(o->tmp_path);
        o->tmp_path = NULL;
        cli_outfile_abort(o);
        return -1;
    }
    /* mkstemp makes the file private (0600); results are ordinary files, so use the umask. */
    {
        mode_t mask = umask(0);
        umask(mask);
        fchmod(fd, 0666 & ~mask);
    }
    o->f = fdopen(fd, "w");
    if (!o->f) {
        cli_error(what, "cannot open '%s': %s", o->tmp_path, strerror(errno));
        close(fd);
        cli_outfile_abort(o);
        return -1;
    }
    return 0;
}

int cli_outfile_commit(cli_outfile *o, const char *what)
{
    int err = 0;
    if (fflush(o->f) != 0 || ferror(o->f)) err = errno ? errno : EIO;
    if (fclose(o->f) != 0 && !err) err = errno ? errno : EIO;
    o->f = NULL;
    if (err) {
        cli_error(what, "cannot write '%s': %s", o->tmp_path, strerror(err));
        cli_outfile_abort(o);
        return -1;
    }
    if (rename(o->tmp_path, o->path) != 0) {
        cli_error(what, "cannot rename '%s' to '%s': %s", o->tmp_path, o->path, strerror(errno));
        cli_outfile_abort(o);
        return -1;
    }
    free(o->tmp_path);
    free(o->path);
    o->tmp_path = o->path = NULL;
    return 0;
}

void cli_outfile_abort(cli_outfile *o)
{
    if (o->f) fclose(o->f);
    if (o->tmp_path) remove(o->tmp_path);
    free(o->tmp_path);
    free(o->path);
    memset(o, 0, sizeof *o);
}

/* ---- helpers of the commands that read point files and write result rows ---- */

int cli_file_has_magic(const char *path, const char *magic)
{
    char m[8];
    size_t got;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    got = fread(m, 1, sizeof m, f);
    fclose(f);
    return got == sizeof m && memcmp(m, magic, sizeof m) == 0;
}

int cli_has_extension(const char *path, const char *ext)
{
    size_t len = strlen(path), el = strlen(ext);
    if (len <= el) return 0;
    for (size_t i = 0; i < el; i++) {
        char a = path[len - el + i], b = ext[i];
        if (a >= 'A' && a <= 'Z') a = (char)(a - 'A' + 'a');
        if (a != b) return 0;
    }
    return 1;
}

int cli_probe_output(const char *path, const char *what)
{
    cli_outfile o;
    if (cli_outfile_open(&o, path, what) != 0) return CLI_EXIT_FAILURE;
    cli_outfile_abort(&o);
    return 0;
}

int cli_read_points(grove_ctx *ctx, const char *what, const char *path, int dims, grove_points *pts,
                    double *ms)
{
    double t0 = cli_now_ms();
    grove_status s;
    memset(pts, 0, sizeof *pts);
    if (cli_file_has_magic(path, "GROVE-KD") || cli_file_has_magic(path, "GROVE-QT")) {
        cli_error(what, "%s: is a saved %s, not a point file", path,
                  cli_file_has_magic(path, "GROVE-KD") ? "k-d tree" : "quadtree");
        return CLI_EXIT_BAD_INPUT;
    }
    s = grove_points_read(ctx, path, GROVE_POINTS_AUTO, dims, pts);
    if (ms) *ms = cli_now_ms() - t0;
    if (s == GROVE_OK) return CLI_EXIT_OK;
    if (s == GROVE_ERR_BAD_INPUT || s == GROVE_ERR_IO || s == GROVE_ERR_LIMIT)
        cli_error(what, "%s", grove_ctx_last_error(ctx));
    else
        cli_report_status(what, "reading the points", s, ctx);
    /* an over-long line is malformed input too */
    return s == GROVE_ERR_LIMIT ? CLI_EXIT_BAD_INPUT : cli_exit_code(s, CLI_CAUSE_INPUT);
}

void cli_ob_flush(cli_out_buf *b)
{
    if (b->len) fwrite(b->buf, 1, b->len, b->f);
    b->len = 0;
}

static void ob_reserve(cli_out_buf *b, size_t need)
{
    if (b->len + need > sizeof b->buf) cli_ob_flush(b);
}

void cli_ob_u64(cli_out_buf *b, unsigned long long v)
{
    char tmp[24];
    int k = 0;
    ob_reserve(b, sizeof tmp);
    do {
        tmp[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k) b->buf[b->len++] = tmp[--k];
}

void cli_ob_char(cli_out_buf *b, char c)
{
    ob_reserve(b, 1);
    b->buf[b->len++] = c;
}

void cli_ob_str(cli_out_buf *b, const char *s)
{
    size_t len = strlen(s);
    if (len > sizeof b->buf) {
        cli_ob_flush(b);
        fwrite(s, 1, len, b->f);
        return;
    }
    ob_reserve(b, len);
    memcpy(b->buf + b->len, s, len);
    b->len += len;
}

int cli_dispatch(int argc, char **argv, const char *what, const cli_command *table, int count,
                 void (*usage)(FILE *f), const char *noun)
{
    cli_parser p;
    const cli_command *cmd;
    cli_parser_init(&p, argc, argv, what, usage);
    if (!cli_next(&p)) {
        cli_error(what, "no %s given", noun);
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (cli_help(&p)) return CLI_EXIT_OK;
    if (!p.positional) return cli_unknown(&p);
    cmd = cli_find_command(table, count, p.arg);
    if (!cmd) {
        cli_error(what, "unknown %s '%s'", noun, p.arg);
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    return cmd->run(argc - (p.i - 1), argv + (p.i - 1));
}
