/*
 * fuzz_readers.c - libFuzzer entry points for grove's file readers (scripts/fuzz builds and runs
 * them; not part of the CMake build or of `make test`). One reader per build: FUZZ_READER is
 * one of the names below. Each input is written to a file (the readers take paths), read with
 * a CPU context of one thread, and freed: a reader's error status is a correct answer; a crash,
 * a sanitizer report, a leak, a timeout or running out of memory on a small input is a finding.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grove/bezier.h"
#include "grove/grove.h"
#include "grove/io.h"
#include "grove/kdtree.h"
#include "grove/mri.h"

#define FUZZ_SVG 1
#define FUZZ_CURVES_TEXT 2
#define FUZZ_POINTS 3
#define FUZZ_CLOUD 4
#define FUZZ_PARBOIL 5
#define FUZZ_KDTREE 6

#ifndef FUZZ_READER
#error "define FUZZ_READER (scripts/fuzz does)"
#endif

/* Writes d[0..n) to this process's input file and returns its path (extension ext). */
static const char *input_file(const uint8_t *d, size_t n, const char *ext)
{
    static char path[256];
    size_t off = 0;
    int fd;
    if (!path[0]) {
        const char *dir = getenv("GROVE_FUZZ_DIR");
        snprintf(path, sizeof path, "%s/grove_fuzz_%d%s", dir ? dir : "/tmp", (int)getpid(),
                 ext);
    }
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) abort();
    while (off < n) {
        const ssize_t w = write(fd, d + off, n - off);
        if (w <= 0) abort();
        off += (size_t)w;
    }
    close(fd);
    return path;
}

static grove_ctx *cpu_ctx(void)
{
    grove_ctx_opts o;
    grove_ctx *c = NULL;
    grove_ctx_default_opts(&o);
    o.backend = GROVE_BACKEND_CPU;
    o.num_threads = 1;
    if (grove_ctx_create(&o, &c) != GROVE_OK) abort();
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    grove_ctx *c = cpu_ctx();
#if FUZZ_READER == FUZZ_SVG || FUZZ_READER == FUZZ_CURVES_TEXT
    grove_curves cv;
    const int svg = FUZZ_READER == FUZZ_SVG;
    memset(&cv, 0, sizeof cv);
    grove_curves_read(c, input_file(d, n, svg ? ".svg" : ".txt"),
                      svg ? GROVE_CURVES_SVG : GROVE_CURVES_TEXT, &cv);
    grove_curves_free(&cv);
#elif FUZZ_READER == FUZZ_POINTS
    /* no extension: AUTO takes "ply\n" for PLY, else text */
    const char *p = input_file(d, n, "");
    grove_points a;
    grove_points64 b;
    grove_points_read(c, p, GROVE_POINTS_AUTO, 0, &a);
    grove_points_free(&a);
    grove_points_read(c, p, GROVE_POINTS_AUTO, 2, &a);
    grove_points_free(&a);
    grove_points64_read(c, p, GROVE_POINTS_AUTO, 0, &b);
    grove_points64_free(&b);
    grove_points64_read(c, p, GROVE_POINTS_AUTO, 3, &b);
    grove_points64_free(&b);
#elif FUZZ_READER == FUZZ_CLOUD
    /* no extension: AUTO takes LASF for LAS, "ply\n" for PLY, else text */
    grove_cloud cl;
    memset(&cl, 0, sizeof cl);
    grove_cloud_read(c, input_file(d, n, ""), GROVE_CLOUD_AUTO, &cl);
    grove_cloud_free(&cl);
#elif FUZZ_READER == FUZZ_PARBOIL
    const char *p = input_file(d, n, "");
    grove_mri_parboil *o = NULL;
    grove_mri_parboil_read(c, p, 0, &o);
    grove_mri_parboil_free(o);
    o = NULL;
    grove_mri_parboil_read(c, p, 1, &o);
    grove_mri_parboil_free(o);
#elif FUZZ_READER == FUZZ_KDTREE
    grove_kdtree *t = NULL;
    grove_kdtree_load(c, input_file(d, n, ""), &t);
    grove_kdtree_destroy(t);
#else
#error "unknown FUZZ_READER"
#endif
    grove_ctx_destroy(c);
    return 0;
}
