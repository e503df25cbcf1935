/*
 * cmd_demo.c - `grove demo`: runs each module's main job on generated data on the chosen
 * backend, checks every result and prints one row per step (optionally DIR/demo.json, and the
 * quadtree part's picture DIR/quadtree.svg).
 *
 * Checks: every step is verified by an independent test of its defining property (scan
 * differences equal the input, a split's destinations follow from counting flags, a sort's
 * output is ordered and a permutation of its input, Morton codes round-trip, ...). On the
 * CUDA backend every result is also compared with the CPU backend's, which must be identical.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quadtree_check.h" /* the structural validator the tests use */
#include "cli.h"
#include "grove/kdtree.h"
#include "grove/prim.h"
#include "grove/quadtree.h"

/* One entry per module. The part runs its steps on d->n generated elements and records a row
 * per step with cli_demo_row(). */
typedef struct demo_part {
    const char *module;
    int (*run)(cli_demo *d);
} demo_part;

static const demo_part parts[] = {
    {"prim", cli_demo_prim},
    {"quadtree", cli_demo_quadtree},
    {"kdtree", cli_demo_kdtree},
    {"mri", cli_demo_mri},
    {"octree", cli_demo_octree},
    {"bezier", cli_demo_bezier},
};
#define NUM_PARTS ((int)(sizeof parts / sizeof parts[0]))

#define DEFAULT_N ((size_t)10000000)
#define DEFAULT_SEED 1ull
/* On CUDA each step first runs once on this many elements, untimed, so that one-time costs
 * (module loading, allocator pools) are not charged to the timed run. */
#define WARMUP_N ((size_t)1000)

static void usage(FILE *f)
{
    fprintf(f, "usage: grove demo [--size N] [--seed S] [--out DIR] [--backend auto|cpu|cuda]\n"
               "\n"
               "Runs each module's main job on generated random data on the chosen backend and\n"
               "checks every result: with an independent check of what the step must produce,\n"
               "and on CUDA also against the CPU backend. Prints one row per step: the step,\n"
               "its size, the backend, the wall-clock time of the call (on CUDA including the\n"
               "copies between host and GPU) and OK or FAILED. Exit 3 if any check fails.\n"
               "\n"
               "options:\n"
               "  --size N      elements per step (100000, 1e7, 16M, ...); default 1e7\n"
               "  --seed S      seed of the generated data (default 1)\n"
               "  --out DIR     also write DIR/demo.json, DIR/quadtree.svg (a picture of the\n"
               "                quadtree part's tree) and DIR/mri-recon.png (the reconstructed\n"
               "                phantom); DIR is created if missing\n"
               "  --backend B   auto (default: CUDA when a usable GPU is found), cpu or cuda\n"
               "  -h, --help    print this help and exit\n");
}

/* ---- rows ---- */

typedef struct demo_row {
    char module[16];
    char step[48];
    char backend[8];
    size_t n;
    double ms;
    const char *check; /* "OK", "FAILED" or "ERROR" */
} demo_row;

static void print_header(void)
{
    printf("%-32s %11s  %-7s %11s  %s\n", "step", "n", "backend", "time (ms)", "check");
}

void cli_demo_row(cli_demo *d, const char *module, const char *step, size_t n, double ms,
                  grove_status s, const grove_ctx *ctx, int ok)
{
    demo_row r;
    if (s != GROVE_OK) {
        cli_report_status("demo", step, s, ctx);
        ok = 0;
    }
    if (!ok) d->failures++;
    if (d->quiet && ok) return;

    memset(&r, 0, sizeof r);
    snprintf(r.module, sizeof r.module, "%s", module);
    if (d->quiet)
        snprintf(r.step, sizeof r.step, "%s (warm-up)", step);
    else
        snprintf(r.step, sizeof r.step, "%s", step);
    snprintf(r.backend, sizeof r.backend, "%s", grove_backend_name(grove_ctx_backend(d->ctx)));
    r.n = n;
    r.ms = ms;
    r.check = s != GROVE_OK ? "ERROR" : ok ? "OK" : "FAILED";
    printf("%-32s %11zu  %-7s %11.3f  %s\n", r.step, r.n, r.backend, r.ms, r.check);
    fflush(stdout);

    if (d->nrows == d->cap) {
        int cap = d->cap ? 2 * d->cap : 32;
        void *p = realloc(d->rows, (size_t)cap * sizeof(demo_row));
        if (!p) {
            /* the row was printed, but demo.json would lack it: count that as a failure */
            cli_error("demo", "out of host memory recording the step '%s'", step);
            d->failures++;
            return;
        }
        d->rows = p;
        d->cap = cap;
    }
    ((demo_row *)d->rows)[d->nrows++] = r;
}

static int write_json(const cli_demo *d, const char *dir)
{
    cli_outfile o;
    grove_device_info info;
    int dev = grove_ctx_device(d->ctx);
    char *path = cli_path_join(dir, "demo.json");
    if (!path) {
        cli_error("demo", "out of host memory");
        return -1;
    }
    if (cli_outfile_open(&o, path, "demo") != 0) {
        free(path);
        return -1;
    }
    fprintf(o.f, "{\n  \"version\": ");
    cli_json_string(o.f, grove_version());
    fprintf(o.f, ",\n  \"backend\": \"%s\",\n  \"device\": ",
            grove_backend_name(grove_ctx_backend(d->ctx)));
    if (dev >= 0 && grove_device_query(dev, &info) == GROVE_OK)
        cli_json_string(o.f, info.name);
    else
        fputs("null", o.f);
    fprintf(o.f, ",\n  \"n\": %zu,\n  \"seed\": %llu,\n  \"ok\": %s,\n  \"failures\": %d,\n", d->n,
            d->seed, d->failures ? "false" : "true", d->failures);
    fprintf(o.f, "  \"rows\": [");
    for (int i = 0; i < d->nrows; i++) {
        const demo_row *r = &((const demo_row *)d->rows)[i];
        fprintf(o.f, "%s\n    {\"module\": ", i ? "," : "");
        cli_json_string(o.f, r->module);
        fprintf(o.f, ", \"step\": ");
        cli_json_string(o.f, r->step);
        fprintf(o.f, ", \"n\": %zu, \"backend\": \"%s\", \"ms\": ", r->n, r->backend);
        cli_json_number(o.f, r->ms);
        fprintf(o.f, ", \"check\": \"%s\"}", r->check);
    }
    fprintf(o.f, "%s]\n}\n", d->nrows ? "\n  " : "");
    free(path);
    return cli_outfile_commit(&o, "demo");
}

/* Fails early, before minutes of work, when the results could not be written. */
static int probe_out_dir(const char *dir)
{
    cli_outfile o;
    char *path;
    if (cli_mkdirs(dir) != 0) {
        cli_error("demo", "cannot create directory '%s': %s", dir, strerror(errno));
        return -1;
    }
    path = cli_path_join(dir, "demo.json");
    if (!path) {
        cli_error("demo", "out of host memory");
        return -1;
    }
    if (cli_outfile_open(&o, path, "demo") != 0) {
        free(path);
        return -1;
    }
    cli_outfile_abort(&o);
    free(path);
    return 0;
}

int cmd_demo(int argc, char **argv)
{
    cli_parser p;
    cli_demo d;
    grove_backend backend = cli_default_backend;
    const char *out_dir = NULL;
    size_t n = DEFAULT_N;
    long seed = (long)DEFAULT_SEED;
    int rc = CLI_EXIT_OK, run_failed = 0;
    char desc[320];
    double t0;

    cli_parser_init(&p, argc, argv, "demo", usage);
    while (cli_next(&p)) {
        if (cli_help(&p))
            return CLI_EXIT_OK;
        else if (cli_value(&p, "--size")) {
            if (cli_size(&p, 0, GROVE_PRIM_MAX_N, &n)) return p.exit;
        } else if (cli_value(&p, "--seed")) {
            if (cli_int(&p, 0, 2147483647L, &seed)) return p.exit;
        } else if (cli_value(&p, "--out")) {
            if (p.exit) return p.exit;
            if (!p.val[0]) {
                cli_error("demo", "--out needs a directory");
                return CLI_EXIT_USAGE;
            }
            out_dir = p.val;
        } else if (cli_value(&p, "--backend")) {
            if (cli_backend(&p, &backend)) return p.exit;
        } else
            return cli_unknown(&p);
    }
    if (p.exit) return p.exit;

    if (out_dir && probe_out_dir(out_dir) != 0) return CLI_EXIT_FAILURE;

    memset(&d, 0, sizeof d);
    d.seed = (unsigned long long)seed;
    d.out_dir = out_dir;
    rc = cli_ctx_create("demo", backend, &d.ctx);
    if (rc != CLI_EXIT_OK) return rc;
    if (grove_ctx_backend(d.ctx) == GROVE_BACKEND_CUDA) {
        rc = cli_ctx_create("demo", GROVE_BACKEND_CPU, &d.ref);
        if (rc != CLI_EXIT_OK) {
            grove_ctx_destroy(d.ctx);
            return rc;
        }
    }
    cli_describe_backend(d.ctx, desc, sizeof desc);
    printf("grove demo: %zu elements, seed %llu, backend %s\n", n, d.seed, desc);
    if (d.ref)
        printf("checks: independent checks, and equality with the CPU backend\n");
    else
        printf("checks: independent checks\n");
    print_header();
    fflush(stdout);

    t0 = cli_now_ms();
    for (int i = 0; i < NUM_PARTS && !run_failed; i++) {
        if (d.ref) {
            d.quiet = 1;
            d.n = n < WARMUP_N ? n : WARMUP_N;
            if (parts[i].run(&d) != 0) run_failed = 1;
            d.quiet = 0;
        }
        d.n = n;
        if (!run_failed && parts[i].run(&d) != 0) run_failed = 1;
    }
    d.n = n;
    if (run_failed) {
        cli_error("demo", "stopped: out of host memory (try a smaller --size)");
        d.failures++;
    }
    if (d.failures)
        printf("%d step(s) FAILED (%.1f s)\n", d.failures, (cli_now_ms() - t0) * 1e-3);
    else
        printf("all %d steps OK (%.1f s)\n", d.nrows, (cli_now_ms() - t0) * 1e-3);
    fflush(stdout);

    rc = d.failures ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
    if (out_dir) {
        if (write_json(&d, out_dir) != 0)
            rc = CLI_EXIT_FAILURE;
        else
            printf("wrote %s/demo.json\n", out_dir);
    }
    free(d.rows);
    grove_ctx_destroy(d.ref);
    grove_ctx_destroy(d.ctx);
    return rc;
}

/* ---- the prim module's part ---- */

/* splitmix64, seeded per step so that each step's data does not depend on the others. */
typedef struct demo_rng {
    uint64_t s;
} demo_rng;

static uint64_t rng_next(demo_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static demo_rng rng_for(const cli_demo *d, uint64_t step)
{
    demo_rng r;
    r.s = d->seed * 0x2545F4914F6CDD1Dull + step * 0x9E3779B97F4A7C15ull;
    rng_next(&r);
    return r;
}

static uint32_t rng_u32(demo_rng *r) { return (uint32_t)(rng_next(r) >> 32); }

/* A flag byte set with probability 1/one_in; true flags carry arbitrary non-zero values, as
 * the API allows. */
static uint8_t rng_flag(demo_rng *r, unsigned one_in)
{
    uint64_t v = rng_next(r);
    if ((v >> 32) % one_in != 0) return 0;
    return (uint8_t)(1 + (v & 0xFF) % 255);
}

/* Allocates `count` buffers of the given sizes; on failure frees them and returns -1. */
static int alloc_all(void **bufs, const size_t *bytes, int count)
{
    for (int i = 0; i < count; i++) {
        bufs[i] = malloc(bytes[i] ? bytes[i] : 1);
        if (!bufs[i]) {
            for (int k = 0; k < i; k++) free(bufs[k]);
            cli_error("demo", "out of host memory (%zu bytes)", bytes[i]);
            return -1;
        }
    }
    return 0;
}

static void free_all(void **bufs, int count)
{
    for (int i = 0; i < count; i++) free(bufs[i]);
}

/* Runs `call`, storing its status in st and its wall-clock time in ms. */
#define TIMED(st, ms, call)                                                                        \
    do {                                                                                           \
        double t0_ = cli_now_ms();                                                                 \
        (st) = (call);                                                                             \
        (ms) = cli_now_ms() - t0_;                                                                 \
    } while (0)

/* 1 if the CPU reference call succeeded, else reports it and returns 0. */
static int ref_ran(const cli_demo *d, const char *step, grove_status rs)
{
    if (rs == GROVE_OK) return 1;
    cli_report_status("demo", step, rs, d->ref);
    return 0;
}

/* 1 if `bytes` of out equal the CPU backend's ref_out, else reports it and returns 0. */
static int same_as_ref(const char *step, const void *out, const void *ref_out, size_t bytes)
{
    if (memcmp(out, ref_out, bytes) == 0) return 1;
    cli_error("demo", "%s: the result differs from the CPU backend's", step);
    return 0;
}

/* Reports a failed check and returns 0 (the new value of `ok`). */
static int check_fail(const char *step, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int check_fail(const char *step, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_error("demo", "%s: check failed: %s", step, msg);
    return 0;
}

static int step_scan(cli_demo *d)
{
    const char *step = "scan (u32 sum, exclusive)";
    size_t n = d->n, sz[3] = {n * 4, n * 4, d->ref ? n * 4 : 1};
    void *b[3];
    uint32_t *in, *out, *ref;
    demo_rng r = rng_for(d, 1);
    grove_status s, rs;
    double ms;
    int ok = 1;
    if (alloc_all(b, sz, 3)) return -1;
    in = b[0], out = b[1], ref = b[2];
    for (size_t i = 0; i < n; i++) in[i] = rng_u32(&r);
    TIMED(s, ms, grove_scan(d->ctx, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, in, out, n));
    if (s == GROVE_OK) {
        if (n && out[0] != 0) ok = check_fail(step, "out[0] is %u, not 0", (unsigned)out[0]);
        for (size_t i = 1; ok && i < n; i++)
            if ((uint32_t)(out[i] - out[i - 1]) != in[i - 1])
                ok = check_fail(step, "out[%zu] - out[%zu] != in[%zu]", i, i - 1, i - 1);
        if (ok && d->ref) {
            rs = grove_scan(d->ref, GROVE_U32, GROVE_OP_SUM, GROVE_SCAN_EXCLUSIVE, in, ref, n);
            ok = ref_ran(d, step, rs) && same_as_ref(step, out, ref, n * 4);
        }
    }
    cli_demo_row(d, "prim", step, n, ms, s, d->ctx, ok);
    free_all(b, 3);
    return 0;
}

/* Head flags: about one segment start in 64 elements. */
static void fill_heads(demo_rng *r, uint8_t *heads, size_t n)
{
    for (size_t i = 0; i < n; i++) heads[i] = rng_flag(r, 64);
}

static int step_segscan(cli_demo *d, grove_scan_dir dir)
{
    int fwd = dir == GROVE_SCAN_FORWARD;
    const char *step = fwd ? "segmented scan (fwd, excl)" : "segmented scan (bwd, incl)";
    grove_scan_kind kind = fwd ? GROVE_SCAN_EXCLUSIVE : GROVE_SCAN_INCLUSIVE;
    size_t n = d->n, sz[4] = {n * 4, n, n * 4, d->ref ? n * 4 : 1};
    void *b[4];
    uint32_t *in, *out, *ref;
    uint8_t *heads;
    demo_rng r = rng_for(d, fwd ? 2 : 3);
    grove_status s, rs;
    double ms;
    int ok = 1;
    if (alloc_all(b, sz, 4)) return -1;
    in = b[0], heads = b[1], out = b[2], ref = b[3];
    for (size_t i = 0; i < n; i++) in[i] = rng_u32(&r);
    fill_heads(&r, heads, n);
    TIMED(s, ms, grove_segscan(d->ctx, GROVE_U32, GROVE_OP_SUM, kind, dir, in, heads, out, n));
    if (s == GROVE_OK) {
        for (size_t i = 0; ok && i < n; i++) {
            if (fwd) {
                /* exclusive: 0 at a segment start, else the previous sum plus in[i-1] */
                int start = i == 0 || heads[i];
                if (start ? out[i] != 0 : (uint32_t)(out[i] - out[i - 1]) != in[i - 1])
                    ok = check_fail(step, "wrong value at index %zu", i);
            } else {
                /* inclusive suffix: in[i] at a segment end, else in[i] plus the next sum */
                int end = i + 1 == n || heads[i + 1];
                if (end ? out[i] != in[i] : (uint32_t)(out[i] - out[i + 1]) != in[i])
                    ok = check_fail(step, "wrong value at index %zu", i);
            }
        }
        if (ok && d->ref) {
            rs = grove_segscan(d->ref, GROVE_U32, GROVE_OP_SUM, kind, dir, in, heads, ref, n);
            ok = ref_ran(d, step, rs) && same_as_ref(step, out, ref, n * 4);
        }
    }
    cli_demo_row(d, "prim", step, n, ms, s, d->ctx, ok);
    free_all(b, 4);
    return 0;
}

static int step_split(cli_demo *d)
{
    const char *step = "split (u32, stable)";
    size_t n = d->n, nf = 0, rnf = 0, count = 0, fa = 0, fb = 0;
    size_t sz[6] = {n * 4, n, n * 4, n * 4, d->ref ? n * 4 : 1, d->ref ? n * 4 : 1};
    void *b[6];
    uint32_t *in, *out, *dest, *ref, *rdest;
    uint8_t *flags;
    demo_rng r = rng_for(d, 4);
    grove_status s, rs;
    double ms;
    int ok = 1;
    if (alloc_all(b, sz, 6)) return -1;
    in = b[0], flags = b[1], out = b[2], dest = b[3], ref = b[4], rdest = b[5];
    for (size_t i = 0; i < n; i++) {
        in[i] = rng_u32(&r);
        flags[i] = rng_flag(&r, 2);
        count += flags[i] != 0;
    }
    TIMED(s, ms, grove_split(d->ctx, 4, in, flags, out, dest, &nf, n));
    if (s == GROVE_OK) {
        if (nf != count) ok = check_fail(step, "num_flagged is not %zu", count);
        /* Stability fixes every destination: flagged ones in order, then the others. */
        for (size_t i = 0; ok && i < n; i++) {
            size_t want = flags[i] ? fa++ : count + fb++;
            if (dest[i] != want || out[want] != in[i])
                ok = check_fail(step, "element %zu is not where a stable split puts it", i);
        }
        if (ok && d->ref) {
            rs = grove_split(d->ref, 4, in, flags, ref, rdest, &rnf, n);
            ok = ref_ran(d, step, rs) && same_as_ref(step, &nf, &rnf, sizeof nf) &&
                 same_as_ref(step, out, ref, n * 4) && same_as_ref(step, dest, rdest, n * 4);
        }
    }
    cli_demo_row(d, "prim", step, n, ms, s, d->ctx, ok);
    free_all(b, 6);
    return 0;
}

static int step_segsplit(cli_demo *d)
{
    const char *step = "segmented split (u64, stable)";
    size_t n = d->n;
    size_t sz[7] = {n * 8, n, n, n * 8, n * 4, d->ref ? n * 8 : 1, d->ref ? n * 4 : 1};
    void *b[7];
    uint64_t *in, *out, *ref;
    uint32_t *dest, *rdest;
    uint8_t *flags, *heads;
    demo_rng r = rng_for(d, 5);
    grove_status s, rs;
    double ms;
    int ok = 1;
    if (alloc_all(b, sz, 7)) return -1;
    in = b[0], flags = b[1], heads = b[2], out = b[3], dest = b[4], ref = b[5], rdest = b[6];
    for (size_t i = 0; i < n; i++) {
        in[i] = rng_next(&r);
        flags[i] = rng_flag(&r, 3);
    }
    fill_heads(&r, heads, n);
    TIMED(s, ms, grove_segsplit(d->ctx, 8, in, flags, heads, out, dest, n));
    if (s == GROVE_OK) {
        /* Segment by segment: count its flags, then every destination is fixed. */
        for (size_t lo = 0; ok && lo < n;) {
            size_t hi = lo + 1, count = 0, fa = 0, fb = 0;
            while (hi < n && !heads[hi]) hi++;
            for (size_t i = lo; i < hi; i++) count += flags[i] != 0;
            for (size_t i = lo; ok && i < hi; i++) {
                size_t want = lo + (flags[i] ? fa++ : count + fb++);
                if (dest[i] != want || out[want] != in[i])
                    ok = check_fail(step, "element %zu is not where a stable split puts it", i);
            }
            lo = hi;
        }
        if (ok && d->ref) {
            rs = grove_segsplit(d->ref, 8, in, flags, heads, ref, rdest, n);
            ok = ref_ran(d, step, rs) && same_as_ref(step, out, ref, n * 8) &&
                 same_as_ref(step, dest, rdest, n * 4);
        }
    }
    cli_demo_row(d, "prim", step, n, ms, s, d->ctx, ok);
    free_all(b, 7);
    return 0;
}

static int step_compact(cli_demo *d)
{
    const char *step = "compact (u32, 1 in 4 kept)";
    size_t n = d->n, nsel = 0, rnsel = 0, k = 0;
    size_t sz[4] = {n * 4, n, n * 4, d->ref ? n * 4 : 1};
    void *b[4];
    uint32_t *in, *out, *ref;
    uint8_t *flags;
    demo_rng r = rng_for(d, 6);
    grove_status s, rs;
    double ms;
    int ok = 1;
    if (alloc_all(b, sz, 4)) return -1;
    in = b[0], flags = b[1], out = b[2], ref = b[3];
    for (size_t i = 0; i < n; i++) {
        in[i] = rng_u32(&r);
        flags[i] = rng_flag(&r, 4);
    }
    TIMED(s, ms, grove_compact(d->ctx, 4, in, flags, out, &nsel, n));
    if (s == GROVE_OK) {
        for (size_t i = 0; ok && i < n; i++) {
            if (!flags[i]) continue;
            if (k >= nsel || out[k] != in[i])
                ok = check_fail(step, "kept element %zu is missing or out of order", i);
            k++;
        }
        if (ok && k != nsel) ok = check_fail(step, "num_selected is not %zu", k);
        if (ok && d->ref) {
            rs = grove_compact(d->ref, 4, in, flags, ref, &rnsel, n);
            ok = ref_ran(d, step, rs) && same_as_ref(step, &nsel, &rnsel, sizeof nsel) &&
                 same_as_ref(step, out, ref, nsel * 4);
        }
    }
    cli_demo_row(d, "prim", step, n, ms, s, d->ctx, ok);
    free_all(b, 4);
    return 0;
}

static int step_reduce(cli_demo *d)
{
    const char *step = "reduce (u32 sum)";
    size_t n = d->n, sz[1] = {n * 4};
    void *b[1];
    uint32_t *in, got = 0, want = 0, rgot = 0;
    demo_rng r = rng_for(d, 7);
    grove_status s, rs;
    double ms;
    int ok = 1;
    if (alloc_all(b, sz, 1)) return -1;
    in = b[0];
    for (size_t i = 0; i < n; i++) {
        in[i] = rng_u32(&r);
        want += in[i]; /* wraps modulo 2^32, as the API specifies */
    }
    TIMED(s, ms, grove_reduce(d->ctx, GROVE_U32, GROVE_OP_SUM, in, &got, n));
    if (s == GROVE_OK) {
        if (got != want)
            ok = check_fail(step, "sum %u, sequential sum %u", (unsigned)got, (unsigned)want);
        if (ok && d->ref) {
            rs = grove_reduce(d->ref, GROVE_U32, GROVE_OP_SUM, in, &rgot, n);
            ok = ref_ran(d, step, rs) && same_as_ref(step, &got, &rgot, sizeof got);
        }
    }
    cli_demo_row(d, "prim", step, n, ms, s, d->ctx, ok);
    free_all(b, 1);
    return 0;
}

static int step_bbox(cli_demo *d)
{
    const char *step = "bbox (3-D, with NaNs)";
    size_t n = d->n, sz[1] = {n * 12};
    void *b[1];
    float *pts, lo[3], hi[3], rlo[3], rhi[3], wlo[3], whi[3];
    demo_rng r = rng_for(d, 8);
    grove_status s, rs;
    double ms;
    int ok = 1;
    if (alloc_all(b, sz, 1)) return -1;
    pts = b[0];
    for (int k = 0; k < 3; k++) {
        wlo[k] = INFINITY;
        whi[k] = -INFINITY;
    }
    for (size_t i = 0; i < 3 * n; i++) {
        uint64_t v = rng_next(&r);
        /* about one coordinate in 1000 is NaN, which the box must ignore */
        pts[i] =
            (v & 1023) == 0 ? NAN : -1000.0f + 2000.0f * (float)((v >> 40) * (1.0 / 16777216.0));
        if (!isnan(pts[i])) {
            wlo[i % 3] = fminf(wlo[i % 3], pts[i]);
            whi[i % 3] = fmaxf(whi[i % 3], pts[i]);
        }
    }
    TIMED(s, ms, grove_bbox(d->ctx, 3, pts, n, lo, hi));
    if (s == GROVE_OK) {
        if (memcmp(lo, wlo, sizeof lo) != 0 || memcmp(hi, whi, sizeof hi) != 0)
            ok = check_fail(step, "box differs from the sequential min/max");
        if (ok && d->ref) {
            rs = grove_bbox(d->ref, 3, pts, n, rlo, rhi);
            ok = ref_ran(d, step, rs) && same_as_ref(step, lo, rlo, sizeof lo) &&
                 same_as_ref(step, hi, rhi, sizeof hi);
        }
    }
    cli_demo_row(d, "prim", step, n, ms, s, d->ctx, ok);
    free_all(b, 1);
    return 0;
}

static int step_sort(cli_demo *d)
{
    const char *step = "sort pairs (u32 keys, u32 values)";
    size_t n = d->n,
           sz[6] = {n * 4, n * 4, n * 4, (n + 7) / 8, d->ref ? n * 4 : 1, d->ref ? n * 4 : 1};
    void *b[6];
    uint32_t *orig, *keys, *vals, *rkeys, *rvals;
    uint8_t *seen;
    demo_rng r = rng_for(d, 9);
    grove_status s, rs;
    double ms;
    int ok = 1;
    if (alloc_all(b, sz, 6)) return -1;
    orig = b[0], keys = b[1], vals = b[2], seen = b[3], rkeys = b[4], rvals = b[5];
    for (size_t i = 0; i < n; i++) {
        orig[i] = keys[i] = rng_u32(&r);
        vals[i] = (uint32_t)i;
    }
    memset(seen, 0, (n + 7) / 8);
    TIMED(s, ms, grove_sort_pairs(d->ctx, GROVE_U32, keys, 4, vals, n, 0, 0));
    if (s == GROVE_OK) {
        /* Ordered, stable (equal keys keep their input order, i.e. rising values), and every
         * output pair is an input pair, each used once: the values are a permutation. */
        for (size_t i = 0; ok && i < n; i++) {
            uint32_t v = vals[i];
            if (v >= n || (seen[v / 8] >> (v % 8)) & 1 || keys[i] != orig[v])
                ok = check_fail(step, "output pair %zu is not an unused input pair", i);
            else if (i && (keys[i] < keys[i - 1] || (keys[i] == keys[i - 1] && v < vals[i - 1])))
                ok = check_fail(step, "output %zu is out of order (or not stable)", i);
            seen[v < n ? v / 8 : 0] |= (uint8_t)(1u << (v % 8));
        }
        if (ok && d->ref) {
            for (size_t i = 0; i < n; i++) {
                rkeys[i] = orig[i];
                rvals[i] = (uint32_t)i;
            }
            rs = grove_sort_pairs(d->ref, GROVE_U32, rkeys, 4, rvals, n, 0, 0);
            ok = ref_ran(d, step, rs) && same_as_ref(step, keys, rkeys, n * 4) &&
                 same_as_ref(step, vals, rvals, n * 4);
        }
    }
    cli_demo_row(d, "prim", step, n, ms, s, d->ctx, ok);
    free_all(b, 6);
    return 0;
}

static int step_morton3(cli_demo *d)
{
    const char *enc = "morton3 encode", *dec = "morton3 decode";
    size_t n = d->n;
    size_t sz[8] = {n * 4, n * 4, n * 4, n * 8, n * 4, n * 4, n * 4, d->ref ? n * 8 : 1};
    void *b[8];
    uint32_t *x, *y, *z, *x2, *y2, *z2;
    uint64_t *codes, *ref;
    demo_rng r = rng_for(d, 10);
    grove_status s, rs;
    double ms;
    int ok = 1;
    if (alloc_all(b, sz, 8)) return -1;
    x = b[0], y = b[1], z = b[2], codes = b[3], x2 = b[4], y2 = b[5], z2 = b[6], ref = b[7];
    for (size_t i = 0; i < n; i++) {
        uint64_t v = rng_next(&r);
        x[i] = (uint32_t)(v & 0x1FFFFF);
        y[i] = (uint32_t)((v >> 21) & 0x1FFFFF);
        z[i] = (uint32_t)((v >> 42) & 0x1FFFFF);
    }
    TIMED(s, ms, grove_morton3_encode(d->ctx, x, y, z, codes, n));
    if (s == GROVE_OK) {
        for (size_t i = 0; ok && i < n; i++)
            if (codes[i] != grove_morton3(x[i], y[i], z[i]))
                ok = check_fail(enc, "code %zu differs from grove_morton3()", i);
        if (ok && d->ref) {
            rs = grove_morton3_encode(d->ref, x, y, z, ref, n);
            ok = ref_ran(d, enc, rs) && same_as_ref(enc, codes, ref, n * 8);
        }
    }
    cli_demo_row(d, "prim", enc, n, ms, s, d->ctx, ok);
    if (s != GROVE_OK) {
        free_all(b, 8);
        return 0;
    }

    ok = 1;
    TIMED(s, ms, grove_morton3_decode(d->ctx, codes, x2, y2, z2, n));
    if (s == GROVE_OK) {
        /* The reference for decode is the round trip itself. */
        for (size_t i = 0; ok && i < n; i++)
            if (x2[i] != x[i] || y2[i] != y[i] || z2[i] != z[i])
                ok = check_fail(dec, "point %zu does not round-trip", i);
        if (ok && d->ref) {
            /* x2, y2, z2 are known equal to x, y, z: decode into those for the comparison */
            rs = grove_morton3_decode(d->ref, codes, x, y, z, n);
            ok = ref_ran(d, dec, rs) && same_as_ref(dec, x2, x, n * 4) &&
                 same_as_ref(dec, y2, y, n * 4) && same_as_ref(dec, z2, z, n * 4);
        }
    }
    cli_demo_row(d, "prim", dec, n, ms, s, d->ctx, ok);
    free_all(b, 8);
    return 0;
}

int cli_demo_prim(cli_demo *d)
{
    if (step_scan(d) || step_segscan(d, GROVE_SCAN_FORWARD) ||
        step_segscan(d, GROVE_SCAN_BACKWARD) || step_split(d) || step_segsplit(d) ||
        step_compact(d) || step_reduce(d) || step_bbox(d) || step_sort(d) || step_morton3(d))
        return -1;
    return 0;
}

/* ---- the quadtree module's part ---- */

/* Clustered points in a 1000 x 600 field: Gaussian clusters of different spreads, a uniform
 * background, and exact duplicates of earlier points (which force leaves down to max_depth
 * when they pile up). */
static void qt_fill_points(demo_rng *r, float *xy, size_t n)
{
    enum { CLUSTERS = 9 };
    double cx[CLUSTERS], cy[CLUSTERS], sd[CLUSTERS];
    for (int c = 0; c < CLUSTERS; c++) {
        cx[c] = 1000.0 * (double)(rng_next(r) >> 11) * 0x1p-53;
        cy[c] = 600.0 * (double)(rng_next(r) >> 11) * 0x1p-53;
        sd[c] = 2.0 + 60.0 * (double)(rng_next(r) >> 11) * 0x1p-53;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t v = rng_next(r);
        double u1 = ((double)(rng_next(r) >> 11) + 0.5) * 0x1p-53;
        double u2 = (double)(rng_next(r) >> 11) * 0x1p-53;
        unsigned kind = (unsigned)(v % 100);
        if (kind < 3 && i > 0) {
            size_t j = (size_t)((v >> 8) % i);
            xy[2 * i] = xy[2 * j];
            xy[2 * i + 1] = xy[2 * j + 1];
        } else if (kind < 13) {
            xy[2 * i] = (float)(1000.0 * u1);
            xy[2 * i + 1] = (float)(600.0 * u2);
        } else {
            /* Box-Muller */
            int c = (int)((v >> 8) % CLUSTERS);
            double rad = sqrt(-2.0 * log(u1)), ang = 6.283185307179586 * u2;
            xy[2 * i] = (float)(cx[c] + sd[c] * rad * cos(ang));
            xy[2 * i + 1] = (float)(cy[c] + sd[c] * rad * sin(ang));
        }
    }
}

static int qt_same_tree(const char *step, const grove_quadtree *a, const grove_quadtree *b,
                        const char *what)
{
    size_t nn = grove_quadtree_num_nodes(a), n = grove_quadtree_num_points(a);
    if (nn != grove_quadtree_num_nodes(b) || n != grove_quadtree_num_points(b) ||
        memcmp(grove_quadtree_nodes(a), grove_quadtree_nodes(b),
               nn * sizeof(grove_quadtree_node)) ||
        (n && (memcmp(grove_quadtree_points(a), grove_quadtree_points(b), 2 * n * sizeof(float)) ||
               memcmp(grove_quadtree_index(a), grove_quadtree_index(b), n * sizeof(uint32_t)))))
        return check_fail(step, "the tree differs from %s", what);
    return 1;
}

/* The structural validator shared with the tests (every point in exactly one leaf, inside its
 * box and its quadrants; leaf sizes; breadth-first layout; input order inside leaves). */
static int qt_valid(const char *step, const grove_quadtree *t, const grove_points *pts,
                    const grove_quadtree_opts *o)
{
    char msg[300];
    if (qt_check(t, pts, o, NULL, msg, sizeof msg) == 0) return 1;
    return check_fail(step, "%s", msg);
}

static int qt_step_build(cli_demo *d, const grove_points *pts, grove_quadtree_method m,
                         const grove_quadtree *other, grove_quadtree **out)
{
    const char *step =
        m == GROVE_QUADTREE_MORTON ? "quadtree build (morton)" : "quadtree build (recursive)";
    grove_quadtree_opts o;
    grove_quadtree *ref = NULL;
    grove_status s, rs;
    double ms;
    int ok = 1;
    grove_quadtree_default_opts(&o);
    o.method = m;
    *out = NULL;
    TIMED(s, ms, grove_quadtree_build(d->ctx, pts, &o, out));
    if (s == GROVE_OK) {
        ok = qt_valid(step, *out, pts, &o);
        if (ok && other) ok = qt_same_tree(step, *out, other, "the morton build's");
        if (ok && d->ref && !other) {
            rs = grove_quadtree_build(d->ref, pts, &o, &ref);
            ok = ref_ran(d, step, rs) && qt_same_tree(step, *out, ref, "the CPU backend's");
            grove_quadtree_destroy(ref);
        }
    }
    cli_demo_row(d, "quadtree", step, pts->n, ms, s, d->ctx, ok);
    return 0;
}

/* Boxes of every size, some with edges exactly on point coordinates (inclusive edges), one
 * covering everything and one inverted (matching nothing). */
static void qt_fill_boxes(demo_rng *r, const grove_points *pts, float *boxes, size_t nq)
{
    for (size_t q = 0; q < nq; q++) {
        float *b = boxes + 4 * q;
        double w = 1000.0 * pow(2.0, -(double)(rng_next(r) % 12));
        double h = 600.0 * pow(2.0, -(double)(rng_next(r) % 12));
        double x = -50.0 + 1100.0 * (double)(rng_next(r) >> 11) * 0x1p-53;
        double y = -50.0 + 700.0 * (double)(rng_next(r) >> 11) * 0x1p-53;
        b[0] = (float)x;
        b[1] = (float)y;
        b[2] = (float)(x + w);
        b[3] = (float)(y + h);
        if (q % 4 == 1 && pts->n) {
            const float *p = pts->xyz + 2 * (rng_next(r) % pts->n);
            b[0] = p[0];
            b[3] = p[1];
            b[2] = b[0] + (float)w;
            b[1] = b[3] - (float)h;
        }
    }
    if (nq > 0) {
        boxes[0] = -INFINITY;
        boxes[1] = -INFINITY;
        boxes[2] = INFINITY;
        boxes[3] = INFINITY;
    }
    if (nq > 2) {
        float t = boxes[8];
        boxes[8] = boxes[10];
        boxes[10] = t;
    }
}

static int qt_step_boxes(cli_demo *d, const grove_points *pts, const grove_quadtree *t)
{
    enum { NQ = 32 };
    const char *step = "quadtree box queries (32 boxes)";
    float boxes[4 * NQ];
    grove_query_result res, rres;
    demo_rng r = rng_for(d, 21);
    grove_status s, rs;
    double ms;
    int ok = 1;
    memset(&res, 0, sizeof res);
    memset(&rres, 0, sizeof rres);
    qt_fill_boxes(&r, pts, boxes, NQ);
    TIMED(s, ms, grove_quadtree_query_boxes(d->ctx, t, boxes, NQ, &res));
    if (s == GROVE_OK) {
        /* brute force: every point against every box, in input order (ascending) */
        for (size_t q = 0; ok && q < NQ; q++) {
            const float *b = boxes + 4 * q;
            uint64_t at = res.offsets[q];
            for (size_t i = 0; ok && i < pts->n; i++) {
                float x = pts->xyz[2 * i], y = pts->xyz[2 * i + 1];
                if (!(x >= b[0] && x <= b[2] && y >= b[1] && y <= b[3])) continue;
                if (at >= res.offsets[q + 1] || res.indices[at] != i)
                    ok = check_fail(step, "box %zu: point %zu is missing or out of order", q, i);
                at++;
            }
            if (ok && at != res.offsets[q + 1])
                ok = check_fail(step, "box %zu: %llu matches, brute force finds %llu", q,
                                (unsigned long long)(res.offsets[q + 1] - res.offsets[q]),
                                (unsigned long long)(at - res.offsets[q]));
        }
        if (ok && d->ref) {
            rs = grove_quadtree_query_boxes(d->ref, t, boxes, NQ, &rres);
            ok = ref_ran(d, step, rs) &&
                 same_as_ref(step, res.offsets, rres.offsets, (NQ + 1) * sizeof(uint64_t)) &&
                 same_as_ref(step, res.indices, rres.indices, res.offsets[NQ] * sizeof(uint32_t));
        }
    }
    cli_demo_row(d, "quadtree", step, pts->n, ms, s, d->ctx, ok);
    grove_query_result_free(&res);
    grove_query_result_free(&rres);
    return 0;
}

static int qt_step_knn(cli_demo *d, const grove_points *pts, const grove_quadtree *t)
{
    enum { NQ = 16, K = 8 };
    const char *step = "quadtree knn (16 points, k=8)";
    float q[2 * NQ];
    uint32_t idx[NQ * K], ridx[NQ * K], bi[K];
    double d2[NQ * K], rd2[NQ * K], bd[K];
    demo_rng r = rng_for(d, 22);
    grove_status s, rs;
    double ms;
    int ok = 1;
    for (int j = 0; j < NQ; j++) {
        if (j % 2 && pts->n) {
            /* on a data point: its duplicates tie at distance 0 */
            const float *p = pts->xyz + 2 * (rng_next(&r) % pts->n);
            q[2 * j] = p[0];
            q[2 * j + 1] = p[1];
        } else {
            q[2 * j] = (float)(-100.0 + 1200.0 * (double)(rng_next(&r) >> 11) * 0x1p-53);
            q[2 * j + 1] = (float)(-100.0 + 800.0 * (double)(rng_next(&r) >> 11) * 0x1p-53);
        }
    }
    TIMED(s, ms, grove_quadtree_knn(d->ctx, t, q, NQ, K, idx, d2));
    if (s == GROVE_OK) {
        for (int j = 0; ok && j < NQ; j++) {
            int have = 0;
            /* brute force, best K by (distance, index): scanning in index order, a candidate
             * goes after the kept ones at the same distance */
            for (size_t i = 0; i < pts->n; i++) {
                double dx = (double)pts->xyz[2 * i] - (double)q[2 * j];
                double dy = (double)pts->xyz[2 * i + 1] - (double)q[2 * j + 1];
                double a = dx * dx;
                double b = dy * dy;
                double dd = a + b;
                int pos;
                if (have == K && !(dd < bd[K - 1])) continue;
                pos = have < K ? have++ : K - 1;
                while (pos > 0 && bd[pos - 1] > dd) {
                    bd[pos] = bd[pos - 1];
                    bi[pos] = bi[pos - 1];
                    pos--;
                }
                bd[pos] = dd;
                bi[pos] = (uint32_t)i;
            }
            for (int m = 0; ok && m < K; m++) {
                uint32_t want_i = m < have ? bi[m] : UINT32_MAX;
                double want_d = m < have ? bd[m] : INFINITY;
                if (idx[j * K + m] != want_i || d2[j * K + m] != want_d)
                    ok = check_fail(step, "query %d, rank %d: index %u, brute force %u", j, m,
                                    (unsigned)idx[j * K + m], (unsigned)want_i);
            }
        }
        if (ok && d->ref) {
            rs = grove_quadtree_knn(d->ref, t, q, NQ, K, ridx, rd2);
            ok = ref_ran(d, step, rs) && same_as_ref(step, idx, ridx, sizeof idx) &&
                 same_as_ref(step, d2, rd2, sizeof d2);
        }
    }
    cli_demo_row(d, "quadtree", step, pts->n, ms, s, d->ctx, ok);
    return 0;
}

static int qt_step_picture(cli_demo *d, const grove_quadtree *t)
{
    const char *step = "quadtree picture (quadtree.svg)";
    char title[96];
    char *path = cli_path_join(d->out_dir, "quadtree.svg");
    double t0;
    int rc;
    if (!path) {
        cli_error("demo", "out of host memory");
        return -1;
    }
    snprintf(title, sizeof title, "grove demo: quadtree of %zu clustered points (seed %llu)",
             grove_quadtree_num_points(t), d->seed);
    t0 = cli_now_ms();
    rc = cli_quadtree_svg(t, path, "demo", title, NULL, NULL, NULL);
    cli_demo_row(d, "quadtree", step, grove_quadtree_num_points(t), cli_now_ms() - t0, GROVE_OK,
                 d->ctx, rc == CLI_EXIT_OK);
    free(path);
    return 0;
}

int cli_demo_quadtree(cli_demo *d)
{
    grove_points pts = {NULL, d->n, 2};
    grove_quadtree *morton = NULL, *rec = NULL;
    demo_rng r = rng_for(d, 20);
    if (d->n > (size_t)UINT32_MAX) {
        /* the build would refuse it (GROVE_ERR_LIMIT): say so in a row rather than allocate */
        cli_error("demo", "quadtree: %zu points exceed the limit of %u", d->n, UINT32_MAX);
        cli_demo_row(d, "quadtree", "quadtree build (morton)", d->n, 0.0, GROVE_OK, d->ctx, 0);
        return 0;
    }
    pts.xyz = (float *)malloc(d->n ? 2 * d->n * sizeof(float) : 1);
    if (!pts.xyz) {
        cli_error("demo", "out of host memory (%zu points)", d->n);
        return -1;
    }
    qt_fill_points(&r, pts.xyz, d->n);
    qt_step_build(d, &pts, GROVE_QUADTREE_MORTON, NULL, &morton);
    qt_step_build(d, &pts, GROVE_QUADTREE_RECURSIVE, morton, &rec);
    grove_quadtree_destroy(rec);
    if (morton) {
        qt_step_boxes(d, &pts, morton);
        qt_step_knn(d, &pts, morton);
        if (d->out_dir && !d->quiet && qt_step_picture(d, morton) != 0) {
            grove_quadtree_destroy(morton);
            free(pts.xyz);
            return -1;
        }
    }
    grove_quadtree_destroy(morton);
    free(pts.xyz);
    return 0;
}

/* ---- the k-d tree module's part ---- */

/* The demo stays quick on a CPU: above this the k-d tree part uses the first KD_MAX_N points. */
#define KD_MAX_N ((size_t)1000000)
#define KD_NQ 10000
#define KD_K 8
/* queries checked against brute force (each one a pass over every point) */
#define KD_NCHECK 200

/* Clustered 3-D points in a 1000 x 600 x 400 box: Gaussian clusters, a uniform background and
 * exact duplicates of earlier points (ties at equal distance, leaves that cannot split). */
static void kd_fill_points(demo_rng *r, float *p, size_t n)
{
    enum { CLUSTERS = 7 };
    static const double ext[3] = {1000.0, 600.0, 400.0};
    double c[CLUSTERS][3], sd[CLUSTERS];
    for (int k = 0; k < CLUSTERS; k++) {
        for (int j = 0; j < 3; j++) c[k][j] = ext[j] * (double)(rng_next(r) >> 11) * 0x1p-53;
        sd[k] = 1.0 + 40.0 * (double)(rng_next(r) >> 11) * 0x1p-53;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t v = rng_next(r);
        unsigned kind = (unsigned)(v % 100);
        if (kind < 4 && i > 0) {
            size_t j = (size_t)((v >> 8) % i);
            memcpy(p + 3 * i, p + 3 * j, 3 * sizeof(float));
        } else if (kind < 20) {
            for (int j = 0; j < 3; j++)
                p[3 * i + j] = (float)(ext[j] * (double)(rng_next(r) >> 11) * 0x1p-53);
        } else {
            int k = (int)((v >> 8) % CLUSTERS);
            for (int j = 0; j < 3; j++) {
                /* Box-Muller, one coordinate per pair of draws */
                double u1 = ((double)(rng_next(r) >> 11) + 0.5) * 0x1p-53;
                double u2 = (double)(rng_next(r) >> 11) * 0x1p-53;
                p[3 * i + j] = (float)(c[k][j] + sd[k] * sqrt(-2.0 * log(u1)) *
                                                     cos(6.283185307179586 * u2));
            }
        }
    }
}

/* The tree's defining properties: preorder links, each child range splitting its parent's, the
 * split rule, tight boxes, leaf sizes, the index a permutation mapping tree points to the
 * input's. Returns 1, or 0 after reporting the first violation. */
static int kd_valid(const char *step, const grove_kdtree *t, const float *pts, size_t n,
                    int leaf_size)
{
    const grove_kdtree_node *nd = grove_kdtree_nodes(t);
    const double *bounds = grove_kdtree_bounds(t);
    const float *tp = (const float *)grove_kdtree_points(t);
    const uint64_t *ix = grove_kdtree_index(t);
    size_t nn = grove_kdtree_num_nodes(t), top = 0, next = 0;
    size_t *stack = NULL;
    unsigned char *seen = NULL;
    int ok = 1;
    if (grove_kdtree_num_points(t) != n || grove_kdtree_dims(t) != 3 ||
        grove_kdtree_coord_type(t) != GROVE_COORD_F32 || nn == 0 || !nd || !bounds)
        return check_fail(step, "wrong point count, dims, type or no nodes");
    stack = (size_t *)malloc(nn * sizeof *stack);
    seen = (unsigned char *)calloc(n ? n : 1, 1);
    if (!stack || !seen) {
        free(stack);
        free(seen);
        return check_fail(step, "out of host memory for the check");
    }
    for (size_t i = 0; ok && i < n; i++) {
        if (ix[i] >= n || seen[ix[i]]++)
            ok = check_fail(step, "index is not a permutation (tree point %zu)", i);
        else if (memcmp(tp + 3 * i, pts + 3 * ix[i], 3 * sizeof(float)) != 0)
            ok = check_fail(step, "tree point %zu is not input point %llu", i,
                            (unsigned long long)ix[i]);
    }
    if (ok && (nd[0].begin != 0 || nd[0].end != n)) ok = check_fail(step, "root range");
    stack[top++] = 0;
    while (ok && top > 0) {
        size_t i = stack[--top];
        const grove_kdtree_node *a = &nd[i];
        const double *lo = bounds + 6 * i, *hi = lo + 3;
        double mn[3] = {INFINITY, INFINITY, INFINITY}, mx[3] = {-INFINITY, -INFINITY, -INFINITY};
        int all_equal = 1;
        if (i != next++) {
            ok = check_fail(step, "node %zu is not in preorder", i);
            break;
        }
        for (uint64_t p = a->begin; p < a->end; p++)
            for (int j = 0; j < 3; j++) {
                double v = (double)tp[3 * p + j];
                if (v < mn[j]) mn[j] = v;
                if (v > mx[j]) mx[j] = v;
                if (v != (double)tp[3 * a->begin + j]) all_equal = 0;
            }
        for (int j = 0; ok && j < 3; j++)
            /* -0 and +0 compare equal: the build stores +0 */
            if (lo[j] != mn[j] || hi[j] != mx[j])
                ok = check_fail(step, "node %zu: box is not the tight box of its points", i);
        if (!ok) break;
        if (a->kind == GROVE_KDTREE_LEAF) {
            if (a->right != 0 || (a->end - a->begin > (uint64_t)leaf_size && !all_equal))
                ok = check_fail(step, "leaf %zu: %llu points, leaf size %d", i,
                                (unsigned long long)(a->end - a->begin), leaf_size);
            continue;
        }
        if (a->axis < 0 || a->axis > 2 || a->right <= i + 1 || a->right >= nn ||
            nd[i + 1].begin != a->begin || nd[i + 1].end != nd[a->right].begin ||
            nd[a->right].end != a->end) {
            ok = check_fail(step, "node %zu: bad axis, links or child ranges", i);
            break;
        }
        for (uint64_t p = a->begin; ok && p < a->end; p++) {
            int left = p < nd[i + 1].end;
            if (((double)tp[3 * p + a->axis] < a->split) != left)
                ok = check_fail(step, "node %zu: point %llu on the wrong side of the split", i,
                                (unsigned long long)p);
        }
        stack[top++] = (size_t)a->right;
        stack[top++] = i + 1;
    }
    if (ok && next != nn) ok = check_fail(step, "%zu of %zu nodes reachable", next, nn);
    free(stack);
    free(seen);
    return ok;
}

static int kd_same_tree(const char *step, const grove_kdtree *a, const grove_kdtree *b)
{
    size_t nn = grove_kdtree_num_nodes(a), n = grove_kdtree_num_points(a);
    if (nn != grove_kdtree_num_nodes(b) || n != grove_kdtree_num_points(b) ||
        memcmp(grove_kdtree_nodes(a), grove_kdtree_nodes(b), nn * sizeof(grove_kdtree_node)) ||
        memcmp(grove_kdtree_bounds(a), grove_kdtree_bounds(b), nn * 6 * sizeof(double)) ||
        (n && (memcmp(grove_kdtree_points(a), grove_kdtree_points(b), 3 * n * sizeof(float)) ||
               memcmp(grove_kdtree_index(a), grove_kdtree_index(b), n * sizeof(uint64_t)))))
        return check_fail(step, "the tree differs from the CPU backend's");
    return 1;
}

static int kd_step_build(cli_demo *d, const grove_coords *pts, grove_kdtree **out)
{
    const char *step = "kdtree build (3-D)";
    grove_kdtree_opts o;
    grove_kdtree *ref = NULL;
    grove_status s, rs;
    double ms;
    int ok = 1;
    grove_kdtree_default_opts(&o);
    *out = NULL;
    TIMED(s, ms, grove_kdtree_build(d->ctx, pts, &o, out));
    if (s == GROVE_OK) {
        ok = kd_valid(step, *out, (const float *)pts->data, pts->n, o.leaf_size);
        if (ok && d->ref) {
            rs = grove_kdtree_build(d->ref, pts, &o, &ref);
            ok = ref_ran(d, step, rs) && kd_same_tree(step, *out, ref);
            grove_kdtree_destroy(ref);
        }
    }
    cli_demo_row(d, "kdtree", step, pts->n, ms, s, d->ctx, ok);
    return 0;
}

/* Brute force for one query: the KD_K best by (squared distance, index), computed the way the
 * API specifies (double differences, squares and sums each rounded on their own, axis order).
 * Scanning in index order, a candidate goes after the kept ones at the same distance. */
static int kd_brute(const float *p, size_t n, const float *q, uint64_t *bi, double *bd)
{
    int have = 0;
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        int pos;
        for (int j = 0; j < 3; j++) {
            double dx = (double)p[3 * i + j] - (double)q[j];
            double a = dx * dx;
            s = s + a;
        }
        if (have == KD_K && !(s < bd[KD_K - 1])) continue;
        pos = have < KD_K ? have++ : KD_K - 1;
        while (pos > 0 && bd[pos - 1] > s) {
            bd[pos] = bd[pos - 1];
            bi[pos] = bi[pos - 1];
            pos--;
        }
        bd[pos] = s;
        bi[pos] = i;
    }
    return have;
}

static int kd_step_knn(cli_demo *d, const grove_coords *pts, const grove_kdtree *t)
{
    const char *step = "kdtree knn (10^4 queries, k=8)";
    const float *p = (const float *)pts->data;
    size_t n = pts->n;
    void *bufs[5];
    const size_t bytes[5] = {3 * KD_NQ * sizeof(float), KD_NQ * KD_K * sizeof(uint64_t),
                             KD_NQ * KD_K * sizeof(double), KD_NQ * KD_K * sizeof(uint64_t),
                             KD_NQ * KD_K * sizeof(double)};
    float *q;
    uint64_t *idx, *ridx;
    double *d2, *rd2;
    grove_coords qc;
    demo_rng r = rng_for(d, 31);
    grove_status s, rs;
    double ms;
    int ok = 1;
    if (alloc_all(bufs, bytes, 5) != 0) return -1;
    q = (float *)bufs[0];
    idx = (uint64_t *)bufs[1];
    d2 = (double *)bufs[2];
    ridx = (uint64_t *)bufs[3];
    rd2 = (double *)bufs[4];
    for (size_t j = 0; j < KD_NQ; j++) {
        if (j % 3 == 1 && n) {
            /* on a data point: it and its duplicates tie at distance 0 */
            memcpy(q + 3 * j, p + 3 * (rng_next(&r) % n), 3 * sizeof(float));
        } else {
            static const double ext[3] = {1000.0, 600.0, 400.0};
            for (int k = 0; k < 3; k++)
                q[3 * j + k] =
                    (float)(ext[k] * (-0.1 + 1.2 * (double)(rng_next(&r) >> 11) * 0x1p-53));
        }
    }
    qc.data = q;
    qc.n = KD_NQ;
    qc.dims = 3;
    qc.type = GROVE_COORD_F32;
    TIMED(s, ms, grove_kdtree_knn(d->ctx, t, &qc, KD_K, idx, d2));
    if (s == GROVE_OK) {
        for (size_t c = 0; ok && c < KD_NCHECK; c++) {
            size_t j = c * KD_NQ / KD_NCHECK + c % 3; /* every kind of query */
            uint64_t bi[KD_K];
            double bd[KD_K];
            int have = kd_brute(p, n, q + 3 * j, bi, bd);
            for (int m = 0; ok && m < KD_K; m++) {
                uint64_t want_i = m < have ? bi[m] : UINT64_MAX;
                double want_d = m < have ? bd[m] : INFINITY;
                if (idx[j * KD_K + m] != want_i || d2[j * KD_K + m] != want_d)
                    ok = check_fail(step, "query %zu, rank %d: index %llu, brute force %llu", j, m,
                                    (unsigned long long)idx[j * KD_K + m],
                                    (unsigned long long)want_i);
            }
        }
        if (ok && d->ref) {
            rs = grove_kdtree_knn(d->ref, t, &qc, KD_K, ridx, rd2);
            ok = ref_ran(d, step, rs) && same_as_ref(step, idx, ridx, bytes[1]) &&
                 same_as_ref(step, d2, rd2, bytes[2]);
        }
    }
    cli_demo_row(d, "kdtree", step, n, ms, s, d->ctx, ok);
    free_all(bufs, 5);
    return 0;
}

int cli_demo_kdtree(cli_demo *d)
{
    grove_coords pts;
    grove_kdtree *t = NULL;
    size_t n = d->n < KD_MAX_N ? d->n : KD_MAX_N;
    demo_rng r = rng_for(d, 30);
    float *p = (float *)malloc(n ? 3 * n * sizeof(float) : 1);
    if (!p) {
        cli_error("demo", "out of host memory (%zu points)", n);
        return -1;
    }
    kd_fill_points(&r, p, n);
    pts.data = p;
    pts.n = n;
    pts.dims = 3;
    pts.type = GROVE_COORD_F32;
    kd_step_build(d, &pts, &t);
    if (t && kd_step_knn(d, &pts, t) != 0) {
        grove_kdtree_destroy(t);
        free(p);
        return -1;
    }
    grove_kdtree_destroy(t);
    free(p);
    return 0;
}
