/*
 * test_core.c - version, status and backend names, contexts and device discovery. Passes on
 * machines with and without a GPU and in builds with and without the CUDA backend.
 * `test_core --backend cuda` instead checks the host/device copies of the CUDA helpers (the
 * staged path for big pageable copies and the direct one), and exits 77 without a GPU.
 */
#include "grove/grove.h"
#include "testutil.h"

#ifdef GROVE_HAVE_CUDA
#include "core_cuda.h"

/* Round trips of `size` random bytes from and to host addresses that are not 16-byte aligned,
 * into poisoned and into never-touched memory. */
static void copy_round_trip(grove_ctx *ctx, tu_rng *rng, size_t size)
{
    unsigned char *src = (unsigned char *)malloc(size + 1), *dst = (unsigned char *)malloc(size + 3);
    unsigned char *fresh = (unsigned char *)malloc(size + 5);
    void *d = NULL;
    CHECK(src && dst && fresh);
    if (!src || !dst || !fresh) goto done;
    for (size_t i = 0; i < size; i++) src[1 + i] = (unsigned char)tu_u32(rng);
    memset(dst, 0xa5, size + 3);
    CHECK_OK(ctx, grove__cuda_alloc(ctx, &d, size, grove_ctx_stream(ctx), "the copy test"));
    if (size > 0 && !d) goto done;
    CHECK_OK(ctx, grove__cuda_h2d(ctx, d, src + 1, size, grove_ctx_stream(ctx)));
    /* the source may be reused as soon as the upload call returns */
    if (size > 0) src[1] ^= 0xffu;
    CHECK_OK(ctx, grove__cuda_d2h(ctx, dst + 3, d, size, grove_ctx_stream(ctx)));
    CHECK_OK(ctx, grove__cuda_d2h(ctx, fresh + 5, d, size, grove_ctx_stream(ctx)));
    CHECK_OK(ctx, grove_ctx_synchronize(ctx));
    if (size > 0) src[1] ^= 0xffu;
    CHECK_MSG(memcmp(dst + 3, src + 1, size) == 0, "round trip of %zu bytes differs", size);
    CHECK_MSG(memcmp(fresh + 5, src + 1, size) == 0,
              "round trip of %zu bytes into fresh memory differs", size);
    CHECK_MSG(dst[0] == 0xa5 && dst[1] == 0xa5 && dst[2] == 0xa5,
              "the download of %zu bytes wrote before its destination", size);
    grove__cuda_free(ctx, d, size, grove_ctx_stream(ctx));
done:
    free(src);
    free(dst);
    free(fresh);
}

static int test_copies(void)
{
    const size_t mb = (size_t)1 << 20;
    /* around the staging threshold (16 MB) and its 8 MB pieces */
    const size_t sizes[] = {0, 1, 4097, 16 * mb - 1, 16 * mb, 16 * mb + 1, 24 * mb + 7,
                            40 * mb + 12345};
    grove_ctx_opts o;
    grove_ctx *ctx = NULL;
    tu_rng rng = {20261123};
    int count = 0;
    grove_device_count(&count);
    if (count == 0) {
        printf("test_core: SKIP: no GPU\n");
        return 77;
    }
    grove_ctx_default_opts(&o);
    o.backend = GROVE_BACKEND_CUDA;
    CHECK_OK(ctx, grove_ctx_create(&o, &ctx));
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) copy_round_trip(ctx, &rng, sizes[i]);
    grove_ctx_destroy(ctx);
    return tu_finish("test_core --backend cuda");
}
#endif

static void test_version(void)
{
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", GROVE_VERSION_MAJOR, GROVE_VERSION_MINOR,
             GROVE_VERSION_PATCH);
    CHECK(grove_version() != NULL);
    CHECK_MSG(strcmp(grove_version(), want) == 0, "version \"%s\", want \"%s\"", grove_version(),
              want);
    CHECK(grove_has_cuda() == 0 || grove_has_cuda() == 1);
#ifdef GROVE_HAVE_CUDA
    CHECK(grove_has_cuda() == 1);
#else
    CHECK(grove_has_cuda() == 0);
#endif
}

static void test_names(void)
{
    const int last = GROVE_ERR_INTERNAL;
    for (int i = 0; i <= last; i++) {
        const char *s = grove_status_string((grove_status)i);
        CHECK_MSG(s != NULL && s[0] != '\0', "status %d has no name", i);
        for (int j = 0; j < i; j++)
            CHECK_MSG(strcmp(s, grove_status_string((grove_status)j)) != 0,
                      "statuses %d and %d share the name \"%s\"", i, j, s);
    }
    CHECK(grove_status_string((grove_status)99) != NULL);
    CHECK(grove_status_string((grove_status)-1) != NULL);
    /* The numbers are ABI. */
    CHECK(GROVE_OK == 0 && GROVE_ERR_INVALID_ARG == 1 && GROVE_ERR_NO_DEVICE == 5 &&
          GROVE_ERR_UNSUPPORTED == 7 && GROVE_ERR_LIMIT == 9 && GROVE_ERR_INTERNAL == 10);

    CHECK(strcmp(grove_backend_name(GROVE_BACKEND_AUTO), "auto") == 0);
    CHECK(strcmp(grove_backend_name(GROVE_BACKEND_CPU), "cpu") == 0);
    CHECK(strcmp(grove_backend_name(GROVE_BACKEND_CUDA), "cuda") == 0);
    CHECK(grove_backend_name((grove_backend)42) != NULL);
}

static void test_devices(int *count)
{
    grove_device_info info;
    CHECK_STATUS(NULL, grove_device_count(NULL), GROVE_ERR_INVALID_ARG);
    *count = -1;
    CHECK_OK(NULL, grove_device_count(count));
    CHECK(*count >= 0);
    if (!grove_has_cuda()) CHECK(*count == 0);

    CHECK_STATUS(NULL, grove_device_query(-1, &info), GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(NULL, grove_device_query(0, NULL), GROVE_ERR_INVALID_ARG);
    CHECK_STATUS(NULL, grove_device_query(*count, &info),
                 grove_has_cuda() ? GROVE_ERR_INVALID_ARG : GROVE_ERR_UNSUPPORTED);
    CHECK_STATUS(NULL, grove_device_query(1 << 20, &info),
                 grove_has_cuda() ? GROVE_ERR_INVALID_ARG : GROVE_ERR_UNSUPPORTED);
    for (int i = 0; i < *count; i++) {
        memset(&info, 0, sizeof info);
        CHECK_OK(NULL, grove_device_query(i, &info));
        CHECK(info.index == i);
        CHECK(info.name[0] != '\0');
        CHECK(info.cc_major >= 1);
        CHECK(info.sm_count > 0);
        CHECK(info.total_mem > 0 && info.free_mem <= info.total_mem);
        printf("device %d: %s, cc %d.%d, %d SMs, %zu MiB\n", i, info.name, info.cc_major,
               info.cc_minor, info.sm_count, info.total_mem >> 20);
    }
}

/* A context whose creation failed: only last_error and destroy may be used. */
static void check_failed_ctx(grove_ctx *ctx, const char *why)
{
    CHECK_MSG(ctx != NULL, "%s: no context returned to read the error from", why);
    if (!ctx) return;
    CHECK_MSG(grove_ctx_last_error(ctx)[0] != '\0', "%s: empty error message", why);
    CHECK_STATUS(ctx, grove_ctx_synchronize(ctx), GROVE_ERR_INVALID_ARG);
    CHECK_MSG(grove_ctx_last_error(ctx)[0] != '\0', "%s: empty error message", why);
    grove_ctx_destroy(ctx);
}

static void test_contexts(int count)
{
    grove_ctx_opts o;
    grove_ctx *ctx = NULL;
    grove_status s;

    memset(&o, 0x5A, sizeof o);
    grove_ctx_default_opts(&o);
    CHECK(o.backend == GROVE_BACKEND_AUTO && o.device == 0 && o.stream == NULL &&
          o.num_threads == 0);
    grove_ctx_default_opts(NULL);

    CHECK_STATUS(NULL, grove_ctx_create(NULL, NULL), GROVE_ERR_INVALID_ARG);
    grove_ctx_destroy(NULL);

    /* NULL opts: AUTO. Without a GPU it must resolve to the CPU, never fail. */
    CHECK_OK(ctx, grove_ctx_create(NULL, &ctx));
    CHECK(ctx != NULL);
    if (ctx) {
        grove_backend b = grove_ctx_backend(ctx);
        CHECK(b == GROVE_BACKEND_CPU || b == GROVE_BACKEND_CUDA);
        if (count == 0) CHECK(b == GROVE_BACKEND_CPU);
        printf("auto resolves to %s\n", grove_backend_name(b));
        CHECK(grove_ctx_last_error(ctx) != NULL);
        CHECK_OK(ctx, grove_ctx_synchronize(ctx));
        grove_ctx_destroy(ctx);
    }

    o.backend = GROVE_BACKEND_CPU;
    ctx = NULL;
    CHECK_OK(ctx, grove_ctx_create(&o, &ctx));
    if (ctx) {
        CHECK(grove_ctx_backend(ctx) == GROVE_BACKEND_CPU);
        CHECK(grove_ctx_device(ctx) == -1);
        CHECK(grove_ctx_stream(ctx) == NULL);
        CHECK(strcmp(grove_ctx_last_error(ctx), "") == 0);
        CHECK_OK(ctx, grove_ctx_synchronize(ctx));
        grove_ctx_clear_error(ctx);
        CHECK(strcmp(grove_ctx_last_error(ctx), "") == 0);
        grove_ctx_destroy(ctx);
    }

    o.num_threads = 3;
    ctx = NULL;
    CHECK_OK(ctx, grove_ctx_create(&o, &ctx));
    CHECK(ctx && grove_ctx_backend(ctx) == GROVE_BACKEND_CPU);
    grove_ctx_destroy(ctx);

    o.num_threads = -1;
    ctx = NULL;
    CHECK_STATUS(ctx, grove_ctx_create(&o, &ctx), GROVE_ERR_INVALID_ARG);
    check_failed_ctx(ctx, "num_threads = -1");
    o.num_threads = 0;

    o.backend = (grove_backend)7;
    ctx = NULL;
    CHECK_STATUS(ctx, grove_ctx_create(&o, &ctx), GROVE_ERR_INVALID_ARG);
    if (ctx) CHECK(strstr(grove_ctx_last_error(ctx), "backend") != NULL);
    check_failed_ctx(ctx, "backend 7");
    o.backend = (grove_backend)-1;
    ctx = NULL;
    CHECK_STATUS(ctx, grove_ctx_create(&o, &ctx), GROVE_ERR_INVALID_ARG);
    check_failed_ctx(ctx, "backend -1");

    /* CUDA asked for explicitly. */
    o.backend = GROVE_BACKEND_CUDA;
    ctx = NULL;
    s = grove_ctx_create(&o, &ctx);
    if (!grove_has_cuda()) {
        CHECK_STATUS(ctx, s, GROVE_ERR_UNSUPPORTED);
        check_failed_ctx(ctx, "CUDA in a CPU-only build");
    } else if (count == 0) {
        CHECK_STATUS(ctx, s, GROVE_ERR_NO_DEVICE);
        check_failed_ctx(ctx, "CUDA without a GPU");
    } else if (s == GROVE_OK) {
        CHECK(grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA);
        CHECK(grove_ctx_device(ctx) == 0);
        CHECK(grove_ctx_stream(ctx) != NULL);
        CHECK_OK(ctx, grove_ctx_synchronize(ctx));
        grove_ctx_destroy(ctx);
    } else {
        /* A GPU is listed but cannot be used (driver trouble): the failure must be explained. */
        printf("note: CUDA context failed: %s\n", ctx ? grove_ctx_last_error(ctx) : "");
        check_failed_ctx(ctx, "CUDA on an unusable GPU");
    }

    /* A device index that does not exist. */
    o.device = count + 5;
    ctx = NULL;
    s = grove_ctx_create(&o, &ctx);
    CHECK_STATUS(ctx, s, grove_has_cuda() ? GROVE_ERR_NO_DEVICE : GROVE_ERR_UNSUPPORTED);
    check_failed_ctx(ctx, "missing device index");

    /* AUTO with a missing device index falls back to the CPU. */
    o.backend = GROVE_BACKEND_AUTO;
    ctx = NULL;
    CHECK_OK(ctx, grove_ctx_create(&o, &ctx));
    CHECK(ctx && grove_ctx_backend(ctx) == GROVE_BACKEND_CPU);
    grove_ctx_destroy(ctx);

    /* Accessors accept NULL. */
    CHECK(grove_ctx_backend(NULL) == GROVE_BACKEND_CPU);
    CHECK(grove_ctx_device(NULL) == -1);
    CHECK(grove_ctx_stream(NULL) == NULL);
    CHECK(grove_ctx_last_error(NULL) != NULL);
    grove_ctx_clear_error(NULL);
    CHECK_STATUS(NULL, grove_ctx_synchronize(NULL), GROVE_ERR_INVALID_ARG);
}

int main(int argc, char **argv)
{
    int count = 0;
    if (argc == 3 && strcmp(argv[1], "--backend") == 0 && strcmp(argv[2], "cuda") == 0) {
#ifdef GROVE_HAVE_CUDA
        return test_copies();
#else
        printf("test_core: SKIP: built without the CUDA backend\n");
        return 77;
#endif
    }
    if (argc > 1) {
        fprintf(stderr, "usage: test_core [--backend cuda]\n");
        return 2;
    }
    test_version();
    test_names();
    test_devices(&count);
    test_contexts(count);
    return tu_finish("test_core");
}
