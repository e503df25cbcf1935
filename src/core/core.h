/*
 * core.h - internal declarations shared by every module (grove__ prefix, not installed).
 */
#ifndef GROVE_CORE_H
#define GROVE_CORE_H

#include <stdint.h>
#include <stdio.h>

#include "grove/grove.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GROVE__ERR_LEN 1024

/* Device buffers a module keeps in its context from one call to the next (grove__cuda_kept). */
enum { GROVE__KEPT_BEZIER = 0, GROVE__KEPT_SLOTS };

struct grove_ctx {
    grove_backend backend; /* resolved: CPU or CUDA */
    int device;            /* CUDA device index, -1 on the CPU */
    void *stream;          /* cudaStream_t */
    int own_stream;        /* 1 if the context created (and must destroy) the stream */
    void *mempool;         /* cudaMemPool_t: every grove__cuda_alloc comes from it */
    int num_threads;       /* OpenMP threads, 0 = default */
    int create_failed;     /* set when grove_ctx_create returned an error */
    size_t dev_limit;      /* device_mem_limit from the options, 0 = none */
    size_t dev_in_use;     /* bytes held through grove__cuda_alloc */
    size_t dev_peak;       /* most bytes dev_in_use has reached */
    size_t pool_block;     /* largest block grove__cuda_pool_prepare mapped in one piece */
    long dev_fail_at;      /* test hook: grove__cuda_alloc call number dev_fail_at (from 0,
                            * counted in dev_allocs) fails as out of memory; -1: none */
    long dev_allocs;
    void *pinned;          /* page-locked host scratch for grove__cuda_fetch, or NULL */
    size_t pinned_bytes;
    void *pinned_dev;      /* its device address (mapped), or NULL */
    int spin_wait;         /* 1 unless the device was set to block or yield while waiting
                            * (cudaDeviceScheduleBlockingSync, cudaDeviceScheduleYield): a call
                            * may then poll page-locked memory for its kernel's results */
    /* per slot: the kept device buffer, its size, the number of the call using it (from 1),
     * and whether its owner left it ready for the next call without clearing (the owner's
     * flag: cleared when the buffer is made, set and read only by the owner) */
    void *kept[GROVE__KEPT_SLOTS];
    size_t kept_bytes[GROVE__KEPT_SLOTS];
    uint32_t kept_epoch[GROVE__KEPT_SLOTS];
    int kept_clean[GROVE__KEPT_SLOTS];
    void *stage;           /* page-locked staging for big copies (core_cuda.cu), or NULL */
    void *stage_ev[2];     /* cudaEvent_t: the staging halves' last copies */
    char err[GROVE__ERR_LEN];
};

/* Records a formatted message in ctx (if ctx is not NULL) and returns s, so that a failure
 * can be reported in one statement: `return grove__error(ctx, GROVE_ERR_X, "...", ...);`. */
grove_status grove__error(grove_ctx *ctx, grove_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Writing a result file without ever leaving a partial one (file.c). grove__wfile_open creates
 * a new temporary file beside `path` and opens it for writing; the caller writes to *f and then
 * calls grove__wfile_commit with the errno value of its first failed write (0 if none), which
 * flushes, syncs and closes the file and renames it to `path`, or removes it on any failure.
 * commit always closes f and frees tmp. */
grove_status grove__wfile_open(grove_ctx *ctx, const char *path, char **tmp, FILE **f);
grove_status grove__wfile_commit(grove_ctx *ctx, const char *path, char *tmp, FILE *f, int err);

/* Little-endian words of grove's own binary files (binfile.c). put/get encode one field;
 * write_words writes count words of w bytes (4 or 8) from host order and returns 0 or an errno
 * value; read_words reads them into host order, a short read being GROVE_ERR_BAD_INPUT ("path:
 * truncated") and a read error GROVE_ERR_IO. le: grove__host_is_le(). */
int grove__host_is_le(void);
void grove__swap_words(void *p, size_t count, size_t w);
void grove__put32(unsigned char *b, uint32_t v);
void grove__put64(unsigned char *b, uint64_t v);
uint32_t grove__get32(const unsigned char *b);
uint64_t grove__get64(const unsigned char *b);
int grove__write_words(FILE *f, const void *p, size_t count, size_t w, int le);
grove_status grove__read_words(grove_ctx *ctx, const char *path, FILE *f, void *p, size_t count,
                               size_t w, int le);
/* Opens the grove binary file at path and reads its header (hdr_len bytes into h): it must be
 * a regular file starting with the 8-byte magic, at least hdr_len bytes long, with the version
 * word at byte 8 equal to version. kind names the format in messages ("quadtree", ...). On
 * success *f is open at byte hdr_len and *size is the file's size; on failure *f is NULL and
 * the message names the path and what is wrong (GROVE_ERR_IO, GROVE_ERR_BAD_INPUT). */
grove_status grove__binfile_open(grove_ctx *ctx, const char *path, const char *magic,
                                 const char *kind, uint32_t version, unsigned char *h,
                                 size_t hdr_len, FILE **f, uint64_t *size);

/* Checks that ctx is a usable context (not NULL, not a failed create). */
grove_status grove__check_ctx(grove_ctx *ctx);

/* Number of CPU threads to use for this context. */
int grove__threads(const grove_ctx *ctx);

/* Touches bytes of fresh host memory on nt threads (writing zeros). A device-to-host copy into
 * pages that were never touched faults them in one at a time inside the driver, which costs
 * more than the copy itself for large arrays; call this on the destination first. */
void grove__prefault(void *p, size_t bytes, int nt);

/* memcpy on nt threads, for big copies between host buffers (first touches of fresh pages
 * included, which a single thread takes one at a time). */
void grove__copy_parallel(void *dst, const void *src, size_t bytes, int nt);

/* Propagate a failure: evaluate expr, return its status if it is not GROVE_OK. */
#define GROVE_TRY(expr)                                                                            \
    do {                                                                                           \
        grove_status grove__s_ = (expr);                                                           \
        if (grove__s_ != GROVE_OK) return grove__s_;                                               \
    } while (0)

/* Same, but store the status in `st` and jump to the function's `_end:` cleanup label. */
#define GROVE_TRY_END(st, expr)                                                                    \
    do {                                                                                           \
        (st) = (expr);                                                                             \
        if ((st) != GROVE_OK) goto _end;                                                           \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif /* GROVE_CORE_H */
