/*
 * test_core.c - version, status and backend names, contexts and device discovery. Passes on
 * machines with and without a GPU and in builds with and without the CUDA backend.
 */
#include "grove/grove.h"
#include "testutil.h"

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

int main(void)
{
    int count = 0;
    test_version();
    test_names();
    test_devices(&count);
    test_contexts(count);
    return tu_finish("test_core");
}
