/*
 * core.c - contexts, status strings, error messages, version and device discovery.
 */
#include "core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef GROVE_HAVE_CUDA
#include "core_cuda.h"
#endif

#define GROVE__STR2(x) #x
#define GROVE__STR(x) GROVE__STR2(x)

const char *grove_version(void)
{
    return GROVE__STR(GROVE_VERSION_MAJOR) "." GROVE__STR(GROVE_VERSION_MINOR) "." GROVE__STR(
        GROVE_VERSION_PATCH);
}

int grove_has_cuda(void)
{
#ifdef GROVE_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

const char *grove_status_string(grove_status s)
{
    switch (s) {
    case GROVE_OK: return "ok";
    case GROVE_ERR_INVALID_ARG: return "invalid argument";
    case GROVE_ERR_BAD_INPUT: return "bad input";
    case GROVE_ERR_OUT_OF_MEMORY: return "out of host memory";
    case GROVE_ERR_DEVICE_OUT_OF_MEMORY: return "out of device memory";
    case GROVE_ERR_NO_DEVICE: return "no usable CUDA device";
    case GROVE_ERR_CUDA: return "CUDA error";
    case GROVE_ERR_UNSUPPORTED: return "unsupported";
    case GROVE_ERR_IO: return "I/O error";
    case GROVE_ERR_LIMIT: return "limit exceeded";
    case GROVE_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *grove_backend_name(grove_backend b)
{
    switch (b) {
    case GROVE_BACKEND_AUTO: return "auto";
    case GROVE_BACKEND_CPU: return "cpu";
    case GROVE_BACKEND_CUDA: return "cuda";
    }
    return "unknown";
}

grove_status grove__error(grove_ctx *ctx, grove_status s, const char *fmt, ...)
{
    if (ctx) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
        va_end(ap);
    }
    return s;
}

grove_status grove__check_ctx(grove_ctx *ctx)
{
    if (!ctx) return GROVE_ERR_INVALID_ARG;
    if (ctx->create_failed)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "context was not created successfully; only grove_ctx_last_error "
                            "and grove_ctx_destroy may be called on it");
    return GROVE_OK;
}

int grove__threads(const grove_ctx *ctx)
{
#ifdef _OPENMP
    if (ctx && ctx->num_threads > 0) return ctx->num_threads;
    return omp_get_max_threads();
#else
    (void)ctx;
    return 1;
#endif
}

void grove__prefault(void *p, size_t bytes, int nt)
{
    const size_t chunk = (size_t)1 << 20;
    size_t nchunks = (bytes + chunk - 1) / chunk;
    if (!p) return;
    (void)nt;
#pragma omp parallel for num_threads(nt) schedule(static) if (nchunks > 4)
    for (size_t c = 0; c < nchunks; c++) {
        size_t off = c * chunk, len = bytes - off < chunk ? bytes - off : chunk;
        memset((char *)p + off, 0, len);
    }
}

void grove__copy_parallel(void *dst, const void *src, size_t bytes, int nt)
{
    const size_t chunk = (size_t)256 << 10;
    size_t nchunks = (bytes + chunk - 1) / chunk;
    (void)nt;
#pragma omp parallel for num_threads(nt) schedule(static) if (nchunks > 4)
    for (size_t c = 0; c < nchunks; c++) {
        size_t off = c * chunk, len = bytes - off < chunk ? bytes - off : chunk;
        memcpy((char *)dst + off, (const char *)src + off, len);
    }
}

grove_status grove_device_count(int *count)
{
    if (!count) return GROVE_ERR_INVALID_ARG;
#ifdef GROVE_HAVE_CUDA
    *count = grove__cuda_device_count();
#else
    *count = 0;
#endif
    return GROVE_OK;
}

grove_status grove_device_query(int index, grove_device_info *info)
{
    if (!info || index < 0) return GROVE_ERR_INVALID_ARG;
#ifdef GROVE_HAVE_CUDA
    if (index >= grove__cuda_device_count()) return GROVE_ERR_INVALID_ARG;
    return grove__cuda_device_query(index, info);
#else
    return GROVE_ERR_UNSUPPORTED;
#endif
}

void grove_ctx_default_opts(grove_ctx_opts *opts)
{
    if (!opts) return;
    memset(opts, 0, sizeof *opts);
    opts->backend = GROVE_BACKEND_AUTO;
    opts->device = 0;
    opts->stream = NULL;
    opts->num_threads = 0;
}

/* Resolves the requested backend. Fills ctx->err and returns an error only when CUDA was
 * asked for explicitly and cannot be had. */
static grove_status resolve_backend(grove_ctx *ctx, const grove_ctx_opts *o)
{
    ctx->backend = GROVE_BACKEND_CPU;
    ctx->device = -1;
    if (o->backend == GROVE_BACKEND_CPU) return GROVE_OK;
#ifdef GROVE_HAVE_CUDA
    {
        int n = grove__cuda_device_count();
        if (o->device >= 0 && o->device < n) {
            ctx->device = o->device;
            grove_status s = grove__cuda_ctx_init(ctx, o->stream);
            if (s == GROVE_OK) {
                ctx->backend = GROVE_BACKEND_CUDA;
                return GROVE_OK;
            }
            ctx->device = -1;
            if (o->backend == GROVE_BACKEND_CUDA) return s;
            ctx->err[0] = '\0'; /* AUTO: quietly use the CPU */
            return GROVE_OK;
        }
        if (o->backend == GROVE_BACKEND_CUDA) {
            if (n == 0)
                return grove__error(ctx, GROVE_ERR_NO_DEVICE,
                                    "CUDA backend requested but no usable GPU was found "
                                    "(no device, or the NVIDIA driver is missing or too old)");
            return grove__error(ctx, GROVE_ERR_NO_DEVICE,
                                "CUDA device %d requested but only %d device(s) found", o->device,
                                n);
        }
        return GROVE_OK;
    }
#else
    if (o->backend == GROVE_BACKEND_CUDA)
        return grove__error(ctx, GROVE_ERR_UNSUPPORTED,
                            "CUDA backend requested but this build of grove has no CUDA support");
    return GROVE_OK;
#endif
}

grove_status grove_ctx_create(const grove_ctx_opts *opts, grove_ctx **out)
{
    grove_ctx_opts def;
    grove_ctx *ctx;
    grove_status s;
    if (!out) return GROVE_ERR_INVALID_ARG;
    *out = NULL;
    if (!opts) {
        grove_ctx_default_opts(&def);
        opts = &def;
    }
    ctx = (grove_ctx *)calloc(1, sizeof *ctx);
    if (!ctx) return GROVE_ERR_OUT_OF_MEMORY;
    ctx->device = -1;
    ctx->num_threads = opts->num_threads;
    ctx->dev_limit = opts->device_mem_limit;
    ctx->dev_fail_at = -1;
    *out = ctx;
    if (opts->backend != GROVE_BACKEND_AUTO && opts->backend != GROVE_BACKEND_CPU &&
        opts->backend != GROVE_BACKEND_CUDA)
        s = grove__error(ctx, GROVE_ERR_INVALID_ARG, "unknown backend %d", (int)opts->backend);
    else if (opts->num_threads < 0)
        s = grove__error(ctx, GROVE_ERR_INVALID_ARG, "num_threads must be >= 0, got %d",
                         opts->num_threads);
    else
        s = resolve_backend(ctx, opts);
    if (s != GROVE_OK) ctx->create_failed = 1;
    return s;
}

void grove_ctx_destroy(grove_ctx *ctx)
{
    if (!ctx) return;
#ifdef GROVE_HAVE_CUDA
    if (ctx->backend == GROVE_BACKEND_CUDA) grove__cuda_ctx_fini(ctx);
#endif
    free(ctx);
}

grove_backend grove_ctx_backend(const grove_ctx *ctx)
{
    return ctx ? ctx->backend : GROVE_BACKEND_CPU;
}

int grove_ctx_device(const grove_ctx *ctx)
{
    return (ctx && ctx->backend == GROVE_BACKEND_CUDA) ? ctx->device : -1;
}

void *grove_ctx_stream(const grove_ctx *ctx)
{
    return (ctx && ctx->backend == GROVE_BACKEND_CUDA) ? ctx->stream : NULL;
}

const char *grove_ctx_last_error(const grove_ctx *ctx) { return ctx ? ctx->err : "no context"; }

void grove_ctx_clear_error(grove_ctx *ctx)
{
    if (ctx) ctx->err[0] = '\0';
}

grove_status grove_ctx_synchronize(grove_ctx *ctx)
{
    GROVE_TRY(grove__check_ctx(ctx));
#ifdef GROVE_HAVE_CUDA
    if (ctx->backend == GROVE_BACKEND_CUDA)
        return grove__cuda_sync(ctx, ctx->stream, "grove_ctx_synchronize");
#endif
    return GROVE_OK;
}
