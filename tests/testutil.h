/*
 * testutil.h - small helpers shared by the test programs: a seeded RNG, checks that count
 * failures instead of aborting, and the GPU skip convention (exit 77).
 */
#ifndef GROVE_TESTUTIL_H
#define GROVE_TESTUTIL_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grove/grove.h"

#define TEST_SKIP 77

static int tu_failures = 0;

/* Records a failure with a formatted message. */
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        tu_failures++;                                                                             \
    } while (0)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            tu_failures++;                                                                         \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            tu_failures++;                                                                         \
        }                                                                                          \
    } while (0)

/* Expect an exact status; print the context's message when it differs. */
#define CHECK_STATUS(ctx, expr, want)                                                              \
    do {                                                                                           \
        grove_status got_ = (expr);                                                                \
        if (got_ != (want)) {                                                                      \
            fprintf(stderr, "%s:%d: %s returned %d (%s), want %d (%s); last error: %s\n",          \
                    __FILE__, __LINE__, #expr, (int)got_, grove_status_string(got_), (int)(want),  \
                    grove_status_string(want), (ctx) ? grove_ctx_last_error(ctx) : "");            \
            tu_failures++;                                                                         \
        }                                                                                          \
    } while (0)

#define CHECK_OK(ctx, expr) CHECK_STATUS(ctx, expr, GROVE_OK)

/* splitmix64: small, fast, good enough for test data; every test seeds it explicitly. */
typedef struct tu_rng {
    uint64_t s;
} tu_rng;

static inline uint64_t tu_next(tu_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint32_t tu_u32(tu_rng *r) { return (uint32_t)(tu_next(r) >> 32); }

/* Uniform float in [lo, hi). */
static inline float tu_f32(tu_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)((tu_next(r) >> 40) * (1.0 / 16777216.0));
}

static inline void *tu_malloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "test: out of host memory (%zu bytes)\n", bytes);
        exit(2);
    }
    return p;
}

/* Appends s[0..n) to the text *buf of *len bytes (room for *cap), growing it as needed. */
static inline void tu_append(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        while (*len + n + 1 > *cap) *cap = *cap ? 2 * *cap : 4096;
        *buf = (char *)realloc(*buf, *cap);
        if (!*buf) {
            fprintf(stderr, "test: out of host memory (%zu bytes)\n", *cap);
            exit(2);
        }
    }
    memcpy(*buf + *len, s, n);
    *len += n;
}

/* The options every module's test program takes: --backend cpu|cuda, --large N (run only the
 * large pass at N elements), --seed S. Fields not given keep the caller's defaults. */
typedef struct tu_args {
    const char *backend;
    size_t large;
    uint64_t seed;
    const char *only; /* --only X: a program-specific restriction (NULL: none) */
} tu_args;

/* @return 0, or -1 for an unknown option or a missing value (the caller prints its usage). */
static inline int tu_parse_args(int argc, char **argv, tu_args *a)
{
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) return -1;
        if (!strcmp(argv[i], "--backend"))
            a->backend = argv[++i];
        else if (!strcmp(argv[i], "--large"))
            a->large = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed"))
            a->seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--only"))
            a->only = argv[++i];
        else
            return -1;
    }
    return 0;
}

/* The CUDA context a test program runs against (opts: NULL for the defaults; its backend is
 * overridden). @return 0 with *ctx set, or TEST_SKIP after printing why (no GPU, or none that
 * can be used), with *ctx NULL. */
static inline int tu_cuda_ctx(const char *prog, const grove_ctx_opts *opts, grove_ctx **ctx)
{
    grove_ctx_opts o;
    int count = 0;
    *ctx = NULL;
    if (opts)
        o = *opts;
    else
        grove_ctx_default_opts(&o);
    o.backend = GROVE_BACKEND_CUDA;
    grove_device_count(&count);
    if (count == 0 || !grove_has_cuda()) {
        printf("%s: SKIP: no GPU\n", prog);
        return TEST_SKIP;
    }
    if (grove_ctx_create(&o, ctx) != GROVE_OK) {
        printf("%s: SKIP: no usable GPU (%s)\n", prog, grove_ctx_last_error(*ctx));
        grove_ctx_destroy(*ctx);
        *ctx = NULL;
        return TEST_SKIP;
    }
    return 0;
}

/* Final line and exit code of every test program. */
static inline int tu_finish(const char *name)
{
    if (tu_failures) {
        fprintf(stderr, "%s: %d check(s) FAILED\n", name, tu_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

#endif /* GROVE_TESTUTIL_H */
