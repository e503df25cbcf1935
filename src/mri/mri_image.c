/*
 * mri_image.c - images out: NIfTI-1 single files (.nii, float32) and 8-bit grey PNG slices
 * through libpng. Both are written to a temporary name beside the destination and renamed, so a
 * failure never leaves a partial file. ctx may be NULL (then only the status tells).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "mri_internal.h"
#ifdef GROVE_HAVE_PNG
#include <png.h>
#endif

#define NII_HDR 348
#define NII_OFFSET 352 /* the header and the 4-byte extension flag (no extensions) */
#define PNG_MAX_SIZE 16384

static void put16(unsigned char *b, int v)
{
    b[0] = (unsigned char)(v & 0xff);
    b[1] = (unsigned char)((v >> 8) & 0xff);
}

static void putf(unsigned char *b, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    grove__put32(b, u);
}

grove_status grove_mri_write_nifti(grove_ctx *ctx, const char *path, int dims, int size,
                                   const float *img)
{
    static const char fn[] = "grove_mri_write_nifti";
    unsigned char h[NII_OFFSET];
    size_t n = 1;
    float lo = INFINITY, hi = -INFINITY;
    char *tmp = NULL;
    FILE *f = NULL;
    int err = 0;

    if (ctx) GROVE_TRY(grove__check_ctx(ctx));
    if (!path || !img)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                            path ? "img" : "path");
    if (dims != 2 && dims != 3)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: dims must be 2 or 3, got %d", fn,
                            dims);
    if (size < 1 || size > (dims == 2 ? 32767 : 4096))
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: size must be 1..%d, got %d", fn,
                            dims == 2 ? 32767 : 4096, size);
    for (int a = 0; a < dims; a++) n *= (size_t)size;
    for (size_t i = 0; i < n; i++) {
        if (img[i] < lo) lo = img[i];
        if (img[i] > hi) hi = img[i];
    }
    if (lo > hi) lo = hi = 0; /* all NaN */

    memset(h, 0, sizeof h);
    grove__put32(h + 0, NII_HDR);
    h[38] = 'r'; /* regular: an old ANALYZE field that readers still look at */
    put16(h + 40, dims);
    for (int a = 1; a < 8; a++) put16(h + 40 + 2 * a, a <= dims ? size : 1);
    put16(h + 70, 16);  /* DT_FLOAT32 */
    put16(h + 72, 32);  /* bitpix */
    putf(h + 76, 1.0f); /* pixdim[0]: qfac */
    for (int a = 1; a < 8; a++) putf(h + 76 + 4 * a, a <= dims ? 1.0f / (float)size : 1.0f);
    putf(h + 108, (float)NII_OFFSET);
    putf(h + 112, 1.0f); /* scl_slope */
    putf(h + 124, hi);   /* cal_max, cal_min: the display range of viewers */
    putf(h + 128, lo);
    memcpy(h + 148, "grove mri reconstruction (unit field of view)", 45);
    /* sform (code 1, scanner): voxel i at (i - size/2) / size on each axis, as in mri.h */
    put16(h + 254, 1);
    for (int r = 0; r < 3; r++) {
        putf(h + 280 + 16 * r + 4 * r, 1.0f / (float)size);
        putf(h + 280 + 16 * r + 12, r < dims ? -0.5f : 0.0f);
    }
    memcpy(h + 344, "n+1", 4);
    /* bytes 348..351: the extension flag, 0: no extensions */

    GROVE_TRY(grove__wfile_open(ctx, path, &tmp, &f));
    if (fwrite(h, 1, sizeof h, f) != sizeof h) err = errno ? errno : EIO;
    if (!err) err = grove__write_words(f, img, n, 4, grove__host_is_le());
    return grove__wfile_commit(ctx, path, tmp, f, err);
}

int grove_mri_has_png(void)
{
#ifdef GROVE_HAVE_PNG
    return 1;
#else
    return 0;
#endif
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

#ifdef GROVE_HAVE_PNG
typedef struct png_err {
    jmp_buf jb;
    char msg[200];
} png_err;

/* libpng's default handlers print; the library must not. */
static void png_on_error(png_structp png, png_const_charp msg)
{
    png_err *e = (png_err *)png_get_error_ptr(png);
    snprintf(e->msg, sizeof e->msg, "%s", msg);
    longjmp(e->jb, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

/* Everything libpng touches between setjmp and a longjmp lives here, so no local variable of
 * the writer is modified after setjmp. */
typedef struct png_job {
    png_structp png;
    png_infop info;
    unsigned char *pix;
    int size;
} png_job;

static int png_run(png_job *j, png_err *e, FILE *f)
{
    if (setjmp(e->jb)) return -1;
    png_init_io(j->png, f);
    png_set_IHDR(j->png, j->info, (png_uint_32)j->size, (png_uint_32)j->size, 8,
                 PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(j->png, j->info);
    /* image rows go top to bottom: the last y row first, so that +y points up */
    for (int y = j->size - 1; y >= 0; y--)
        png_write_row(j->png, j->pix + (size_t)y * (size_t)j->size);
    png_write_end(j->png, NULL);
    return 0;
}
#endif

grove_status grove_mri_write_png(grove_ctx *ctx, const char *path, int size, const float *slice,
                                 float lo, float hi)
{
    static const char fn[] = "grove_mri_write_png";
    if (ctx) GROVE_TRY(grove__check_ctx(ctx));
    if (!path || !slice)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                            path ? "slice" : "path");
    if (size < 1 || size > PNG_MAX_SIZE)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: size must be 1..%d, got %d", fn,
                            PNG_MAX_SIZE, size);
    if (!isfinite(lo) || !isfinite(hi) || lo > hi)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: the window [%g, %g] must be finite with lo <= hi", fn, (double)lo,
                            (double)hi);
#ifndef GROVE_HAVE_PNG
    return grove__error(ctx, GROVE_ERR_UNSUPPORTED,
                        "%s: %s: this build of grove has no PNG support (libpng was not found)", fn,
                        path);
#else
    {
        size_t n = (size_t)size * (size_t)size;
        png_job j;
        png_err e;
        grove_status st;
        char *tmp = NULL;
        FILE *f = NULL;
        int rc;
        for (size_t i = 0; i < n; i++)
            if (!isfinite(slice[i]))
                return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: slice[%zu] is not finite (%g)",
                                    fn, i, (double)slice[i]);
        memset(&j, 0, sizeof j);
        j.size = size;
        j.pix = (unsigned char *)malloc(n);
        if (!j.pix) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        if (lo == hi) {
            /* the 0.5 and 99.5 percentiles: a few hot voxels do not wash the picture out */
            float *c = (float *)malloc(n * sizeof(float));
            if (!c) {
                free(j.pix);
                return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
            }
            memcpy(c, slice, n * sizeof(float));
            qsort(c, n, sizeof(float), cmp_float);
            lo = c[(size_t)(0.005 * (double)(n - 1) + 0.5)];
            hi = c[(size_t)(0.995 * (double)(n - 1) + 0.5)];
            free(c);
        }
        for (size_t i = 0; i < n; i++) {
            double t = hi > lo ? ((double)slice[i] - lo) / ((double)hi - lo) : 0.0;
            t = t < 0 ? 0 : t > 1 ? 1 : t;
            j.pix[i] = (unsigned char)(t * 255.0 + 0.5);
        }
        e.msg[0] = '\0';
        j.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &e, png_on_error, png_on_warning);
        if (j.png) j.info = png_create_info_struct(j.png);
        if (!j.png || !j.info) {
            png_destroy_write_struct(&j.png, NULL);
            free(j.pix);
            return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory in libpng", fn);
        }
        st = grove__wfile_open(ctx, path, &tmp, &f);
        if (st == GROVE_OK) {
            rc = png_run(&j, &e, f);
            if (rc != 0) {
                grove__wfile_commit(ctx, path, tmp, f, EIO);
                st = grove__error(ctx, GROVE_ERR_IO, "%s: libpng: %s", path, e.msg);
            } else {
                st = grove__wfile_commit(ctx, path, tmp, f, 0);
            }
        }
        png_destroy_write_struct(&j.png, &j.info);
        free(j.pix);
        return st;
    }
#endif
}
