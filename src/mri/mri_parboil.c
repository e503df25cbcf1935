/*
 * mri_parboil.c - the Parboil benchmark's mri-q and mri-fhd files (docs/FORMATS.md, "Parboil
 * mri-q and mri-fhd files"): reading an input file into one allocation, writing an output file
 * through a temporary name.
 *
 * The file has no magic and no version, so the reader trusts nothing: the two counts must be
 * non-negative and account for the file's length exactly (a file one float short or long is
 * rejected, naming the array that is cut or the bytes left over), and every value must be
 * finite. Arrays are read straight into their final place, in large reads, and byte-swapped
 * only on a big-endian host.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mri_internal.h"

#define MAX_ARRAYS 10

typedef struct pb_array {
    const char *name;
    int per_k; /* 1: numK elements, 0: numX */
} pb_array;

/* The file's order. */
static const pb_array arrays[MAX_ARRAYS] = {
    {"kx", 1}, {"ky", 1},   {"kz", 1},   {"x", 0},  {"y", 0},
    {"z", 0},  {"phiR", 1}, {"phiI", 1}, {"dR", 1}, {"dI", 1},
};

void grove_mri_parboil_free(grove_mri_parboil *p)
{
    if (!p) return;
    free(p->storage);
    free(p);
}

grove_status grove_mri_parboil_read(grove_ctx *ctx, const char *path, int with_data,
                                    grove_mri_parboil **out)
{
    static const char fn[] = "grove_mri_parboil_read";
    const char *kind = with_data ? "mri-fhd" : "mri-q";
    const int narr = with_data ? 10 : 8;
    unsigned char h[8];
    grove_mri_parboil *p = NULL;
    grove_status st = GROVE_OK;
    uint64_t size, want, off, nk, nx, total = 0;
    int32_t num_k, num_x;
    float *a[MAX_ARRAYS];
    struct stat sb;
    FILE *f = NULL;
    size_t got;
    int le = grove__host_is_le();

    if (ctx && ctx->create_failed) GROVE_TRY(grove__check_ctx(ctx));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!path) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: path is NULL", fn);
    if (with_data != 0 && with_data != 1)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: with_data must be 0 or 1, got %d", fn,
                            with_data);
    f = fopen(path, "rb");
    if (!f) return grove__error(ctx, GROVE_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = grove__error(ctx, GROVE_ERR_IO, "%s: not a readable regular file", path);
        goto _end;
    }
    size = (uint64_t)sb.st_size;
    got = fread(h, 1, sizeof h, f);
    if (got < sizeof h) {
        if (ferror(f))
            st = grove__error(ctx, GROVE_ERR_IO, "%s: read error: %s", path, strerror(errno));
        else
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: truncated: expected 8 bytes for the counts numK and numX, file "
                              "has %llu (not a Parboil %s file?)",
                              path, (unsigned long long)size, kind);
        goto _end;
    }
    num_k = (int32_t)grove__get32(h);
    num_x = (int32_t)grove__get32(h + 4);
    if (num_k < 0 || num_x < 0) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: negative count: numK = %ld, numX = %ld (not a Parboil %s file?)",
                          path, (long)num_k, (long)num_x, kind);
        goto _end;
    }
    nk = (uint64_t)num_k;
    nx = (uint64_t)num_x;
    /* counts below 2^31: no sum below can overflow 64 bits */
    off = sizeof h;
    for (int i = 0; i < narr; i++) {
        uint64_t n = arrays[i].per_k ? nk : nx;
        off += 4 * n;
        total += n;
        if (off > size) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: truncated: expected %llu bytes for array %s (numK = %ld, numX "
                              "= %ld), file has %llu",
                              path, (unsigned long long)off, arrays[i].name, (long)num_k,
                              (long)num_x, (unsigned long long)size);
            goto _end;
        }
    }
    want = off;
    if (size != want) {
        uint64_t extra = size - want;
        st = grove__error(
            ctx, GROVE_ERR_BAD_INPUT,
            "%s: %llu bytes after the last array (%s): numK = %ld and numX = %ld make an %s file "
            "of %llu bytes, the file has %llu%s",
            path, (unsigned long long)extra, arrays[narr - 1].name, (long)num_k, (long)num_x, kind,
            (unsigned long long)want, (unsigned long long)size,
            !with_data && extra == 8 * nk ? " (an mri-fhd file, with dR and dI?)" : "");
        goto _end;
    }
    if ((uint64_t)SIZE_MAX / sizeof(float) < total) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: %llu values do not fit in memory",
                          path, (unsigned long long)total);
        goto _end;
    }
    p = (grove_mri_parboil *)calloc(1, sizeof *p);
    if (p) p->storage = (float *)malloc(total ? (size_t)total * sizeof(float) : 1);
    if (!p || !p->storage) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %llu values (%s)",
                          path, (unsigned long long)total, kind);
        goto _end;
    }
    off = 0;
    for (int i = 0; i < narr; i++) {
        size_t n = (size_t)(arrays[i].per_k ? nk : nx);
        a[i] = p->storage + off;
        off += n;
        GROVE_TRY_END(st, grove__read_words(ctx, path, f, a[i], n, 4, le));
        GROVE_TRY_END(st, grove__mri_check_finite(ctx, path, arrays[i].name, a[i], n));
    }
    for (int i = narr; i < MAX_ARRAYS; i++) a[i] = NULL;
    p->k.num_k = (size_t)nk;
    p->k.kx = a[0];
    p->k.ky = a[1];
    p->k.kz = a[2];
    p->v.num_x = (size_t)nx;
    p->v.x = a[3];
    p->v.y = a[4];
    p->v.z = a[5];
    p->k.phi_r = a[6];
    p->k.phi_i = a[7];
    p->k.d_r = a[8];
    p->k.d_i = a[9];
    p->has_data = with_data;
    *out = p;
    p = NULL;
_end:
    if (f) fclose(f);
    grove_mri_parboil_free(p);
    return st;
}

grove_status grove_mri_parboil_write_output(grove_ctx *ctx, const char *path, size_t num_x,
                                            const float *re, const float *im)
{
    static const char fn[] = "grove_mri_parboil_write_output";
    unsigned char h[4];
    char *tmp = NULL;
    FILE *f = NULL;
    int err = 0, le = grove__host_is_le();

    if (ctx && ctx->create_failed) GROVE_TRY(grove__check_ctx(ctx));
    if (!path) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: path is NULL", fn);
    if (num_x > 0 && (!re || !im))
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s is NULL with num_x = %zu", fn,
                            !re ? "re" : "im", num_x);
    if ((uint64_t)num_x > UINT32_MAX)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: num_x = %zu does not fit the file's 32-bit count", fn, num_x);
    grove__put32(h, (uint32_t)num_x);
    GROVE_TRY(grove__wfile_open(ctx, path, &tmp, &f));
    errno = 0;
    if (fwrite(h, 1, sizeof h, f) != sizeof h) err = errno ? errno : EIO;
    if (!err) err = grove__write_words(f, re, num_x, 4, le);
    if (!err) err = grove__write_words(f, im, num_x, 4, le);
    return grove__wfile_commit(ctx, path, tmp, f, err);
}
