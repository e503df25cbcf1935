/*
 * grove.h - context, status codes, version and device discovery.
 *
 * Every grove call that can fail returns a grove_status. A context (grove_ctx) chooses the
 * backend (CPU or CUDA), holds the CUDA device and stream, and keeps the last error message,
 * which says what failed and where. The library never prints, exits or aborts.
 *
 * Threading: a grove_ctx may be used by one thread at a time. Different threads may use
 * different contexts freely.
 */
#ifndef GROVE_GROVE_H
#define GROVE_GROVE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GROVE_VERSION_MAJOR 0
#define GROVE_VERSION_MINOR 1
#define GROVE_VERSION_PATCH 0

/* Status codes. The numbers are part of the ABI and are never reused or renumbered. */
typedef enum grove_status {
    GROVE_OK = 0,
    GROVE_ERR_INVALID_ARG = 1,        /* a NULL pointer, size or option out of range */
    GROVE_ERR_BAD_INPUT = 2,          /* malformed or invalid data (file, NaN, ...) */
    GROVE_ERR_OUT_OF_MEMORY = 3,      /* host allocation failed */
    GROVE_ERR_DEVICE_OUT_OF_MEMORY = 4, /* GPU allocation failed */
    GROVE_ERR_NO_DEVICE = 5,          /* CUDA backend asked for, but no usable GPU */
    GROVE_ERR_CUDA = 6,               /* a CUDA call or kernel failed */
    GROVE_ERR_UNSUPPORTED = 7,        /* valid request this build or backend cannot do */
    GROVE_ERR_IO = 8,                 /* a file could not be opened, read or written */
    GROVE_ERR_LIMIT = 9,              /* an implementation limit was exceeded */
    GROVE_ERR_INTERNAL = 10           /* a bug in grove; please report it */
} grove_status;

/*! grove_status_string() :
 *  @return a static, human-readable name for a status ("invalid argument", ...). Never NULL. */
const char *grove_status_string(grove_status s);

/*! grove_version() :
 *  @return the library version as a static string "MAJOR.MINOR.PATCH". */
const char *grove_version(void);

/*! grove_has_cuda() :
 *  @return 1 if this build of the library contains the CUDA backend, else 0. It says nothing
 *  about whether a GPU is present at run time: use grove_device_count() for that. */
int grove_has_cuda(void);

typedef enum grove_backend {
    GROVE_BACKEND_AUTO = 0, /* CUDA if a usable GPU is found at run time, else CPU */
    GROVE_BACKEND_CPU = 1,
    GROVE_BACKEND_CUDA = 2
} grove_backend;

/*! grove_backend_name() : @return "auto", "cpu" or "cuda" (static string). */
const char *grove_backend_name(grove_backend b);

/* ---- device discovery ---- */

typedef struct grove_device_info {
    int index;
    char name[256];
    int cc_major, cc_minor;  /* compute capability */
    int sm_count;            /* streaming multiprocessors */
    size_t total_mem;        /* bytes of device memory */
    size_t free_mem;         /* bytes free when queried */
    int l2_bytes;            /* L2 cache size */
    int mem_bus_bits;        /* memory bus width in bits */
} grove_device_info;

/*! grove_device_count() :
 *  Writes the number of usable CUDA devices to *count. Without the CUDA backend, without a
 *  driver or without a GPU, *count is 0 and the call still succeeds.
 *  @return GROVE_OK, or GROVE_ERR_INVALID_ARG if count is NULL. */
grove_status grove_device_count(int *count);

/*! grove_device_query() :
 *  Fills *info for device `index` (0-based).
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG for a bad index, GROVE_ERR_UNSUPPORTED without
 *  the CUDA backend, or GROVE_ERR_CUDA. */
grove_status grove_device_query(int index, grove_device_info *info);

/* ---- context ---- */

typedef struct grove_ctx grove_ctx;

typedef struct grove_ctx_opts {
    grove_backend backend; /* default GROVE_BACKEND_AUTO */
    int device;            /* CUDA device index, default 0 */
    void *stream;          /* cudaStream_t to run on, borrowed (it must stay valid until
                              grove_ctx_destroy, which queues frees on it and waits for it);
                              NULL: the context creates its own */
    int num_threads;       /* CPU threads; 0 (default): OpenMP's default */
    size_t device_mem_limit; /* CUDA backend: most bytes of device memory grove itself may hold
                                at once for this context (staging and scratch buffers of the
                                host-pointer calls, and the small scratch some modules keep
                                from one call to the next, such as the Bezier tessellation's:
                                16 bytes a 512 curves); a call that would need more fails with
                                GROVE_ERR_DEVICE_OUT_OF_MEMORY. 0 (default): no limit but the
                                GPU's. Memory the caller passes to _device calls is not counted.
                                Device memory grove frees stays in the context's own pool for
                                the next call and goes back to the driver when the context is
                                destroyed. */
} grove_ctx_opts;

/*! grove_ctx_default_opts() : fills *opts with the defaults listed in grove_ctx_opts. */
void grove_ctx_default_opts(grove_ctx_opts *opts);

/*! grove_ctx_create() :
 *  Creates a context. opts may be NULL for the defaults. With GROVE_BACKEND_AUTO the CUDA
 *  backend is chosen when the library has it and device `opts->device` can be used; any
 *  driver error falls back to the CPU backend (never a failure).
 *  On failure other than GROVE_ERR_OUT_OF_MEMORY, *out still receives a context that can
 *  only be passed to grove_ctx_last_error() and grove_ctx_destroy(), so the caller can read
 *  why (for example GROVE_ERR_NO_DEVICE when CUDA was asked for and no GPU works).
 *  The caller owns *out and frees it with grove_ctx_destroy().
 *  @return GROVE_OK, GROVE_ERR_INVALID_ARG, GROVE_ERR_NO_DEVICE, GROVE_ERR_UNSUPPORTED
 *  (CUDA asked for, not compiled in), GROVE_ERR_CUDA or GROVE_ERR_OUT_OF_MEMORY. */
grove_status grove_ctx_create(const grove_ctx_opts *opts, grove_ctx **out);

/*! grove_ctx_destroy() : frees the context and any stream it created. Accepts NULL. */
void grove_ctx_destroy(grove_ctx *ctx);

/*! grove_ctx_backend() : @return the resolved backend, GROVE_BACKEND_CPU or _CUDA. */
grove_backend grove_ctx_backend(const grove_ctx *ctx);

/*! grove_ctx_device() : @return the CUDA device index, or -1 for the CPU backend. */
int grove_ctx_device(const grove_ctx *ctx);

/*! grove_ctx_stream() : @return the context's cudaStream_t (as void *), NULL on the CPU. */
void *grove_ctx_stream(const grove_ctx *ctx);

/*! grove_ctx_last_error() :
 *  @return the message of the last failed call on this context ("" if none). The string is
 *  owned by the context and valid until the next call on it. */
const char *grove_ctx_last_error(const grove_ctx *ctx);

/*! grove_ctx_clear_error() : forgets the last error message. */
void grove_ctx_clear_error(grove_ctx *ctx);

/*! grove_ctx_synchronize() :
 *  Waits for all work queued on the context's stream (no-op on the CPU backend).
 *  @return GROVE_OK or GROVE_ERR_CUDA (an asynchronous kernel fault surfaces here). */
grove_status grove_ctx_synchronize(grove_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* GROVE_GROVE_H */
