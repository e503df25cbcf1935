/*
 * bench_bezier.c - `grove bench bezier`: the tessellation's vertex rate and write bandwidth.
 *
 * Curves: n random curves (10^5, 10^6, 10^7, or --size), half quadratic and half cubic: P0
 * uniform in [-1000, 1000)^2, the other control points within +-2 of it, so that the default
 * curvature rule (scale 16, 4..32 points) gives counts spread over 4..32 (about 17 on average),
 * not all clamped to one value. Default options. Then the same size again with every other
 * curve, at random, a line (degree 1), as in a drawing's paths, where L segments are common:
 * the rows of that set end in _lines (copy_1e7_lines, flat_1e7_lines, ...).
 * On a CUDA context (bench_bezier_cuda.cu), rows for each size:
 *   copy                   a device-to-device copy of the output's size (bytes read + written),
 *                          the bandwidth the other rows are compared with (vs_copy);
 *   count_scan_<size>      grove_bezier_count_device alone: the single pass (count, look-back
 *                          scan, offsets) without vertices, which cdp runs before its parent
 *                          grids (n = curves; bytes: the curves read, the offsets written);
 *   flat_<size>            grove_bezier_tessellate_device with the flat variant;
 *   flat_kernel_<size>     the same calls' kernel: CUDA events recorded inside the call just
 *                          before and after flat's kernel launch (the hook), so the kernel and
 *                          its launch's submission, without the wait for the results, the
 *                          host's return and the closing event;
 *   cdp_<size>_launches=N  the same with the cdp variant; N = the child grids launched;
 *   flat_tile_<size>       flat with a block a tile instead of persistent blocks (the hook; the
 *                          scheduling before session 8);
 *   flat_k16_<size>        flat with the tile writer in chunks of 16 vertices a thread instead
 *                          of 64 (the hook; flat's chunks before 2026-11-28);
 *   flat_k32_<size>        the same in chunks of 32 (the hook; flat's chunks from 2026-11-28
 *                          until 2026-11-29);
 *   flat_last_<size>       flat with a block taking its next tile at the start of the current
 *                          one's last chunk instead of after writing it with later tiles'
 *                          curves asked of L2 ahead, in chunks of 32 (the hooks; the default
 *                          until the twentieth session, 2026-11-29);
 *   flat_nopre_<size>      flat with each tile's look-back right after its count, before the
 *                          writer's preparation and first chunk head (the hook; the default
 *                          until the twenty-first session, 2026-11-29);
 *   cdp_tile_<size>_launches=N  cdp with group children of a tile a block instead of 4 (the
 *                          hook; the child before session 8).
 * Variant rows: n = vertices written, so items/s = vertices/s; GB/s counts the bytes that must
 * move: the curves read once (33 bytes each), the offsets written once (8 bytes each) and the
 * vertices written once (8 bytes each). Time: CUDA events around the whole call (flat: the single
 * pass and the read-back of its state; cdp: the same without vertices, then the parent grids),
 * median of --repeats after --warmup; the cdp rows use fewer repeats when one call takes over
 * 200 ms. Every row is checked against the CPU backend's result byte for
 * byte (offsets and vertices) before it is timed: checked = 1 only when identical.
 * On a CPU context, rows cpu_<size>: grove_bezier_tessellate wall time (at most 3 repeats),
 * checked when two runs agree byte for byte and every curve's end points are its control points.
 */
#define _POSIX_C_SOURCE 199309L

#include <stdlib.h>
#include <string.h>

#include "bench_bezier.h"
#include "bench_cuda.h"
#include "core.h"

#ifdef GROVE_HAVE_CUDA
/* bench_bezier_cuda.cu: the GPU rows for the curves `in`, checked against ref. */
grove_status grove__bench_bezier_cuda(grove_ctx *ctx, const grove_curves *in,
                                      const grove_polylines *ref, const char *size_name, int warmup,
                                      int repeats, grove_bench_row *rows, int max_rows, int *nrows);
#endif

void grove_bench_bezier_usage(FILE *f)
{
    fprintf(f,
            "usage: grove bench bezier [--size N] [--repeats R] [--warmup W] [--json] [--out "
            "FILE]\n"
            "                          [--backend auto|cpu|cuda]\n"
            "\n"
            "Tessellates N random quadratic and cubic Bezier curves (default 10^5, 10^6 and\n"
            "10^7) with the default options (curvature rule, 4..32 vertices a curve). On CUDA:\n"
            "the flat and cdp variants of grove_bezier_tessellate_device beside a device copy of\n"
            "the output's size and the count + scan alone; every row is compared byte for byte\n"
            "with the CPU backend.\n"
            "\n"
            "  --size N      curves (one size instead of the three)\n"
            "  --repeats R   timed runs per row, the median is reported (default 10)\n"
            "  --warmup W    untimed runs first (default 2)\n"
            "  --json        print JSON instead of a table\n"
            "  --out FILE    also write the JSON to FILE (through a temporary file)\n"
            "  --backend B   auto (default), cpu or cuda\n"
            "  -h, --help    print this help and exit\n"
            "\n"
            "rows: n = vertices written; G items/s = 1e9 vertices a second; GB/s = (33 bytes a\n"
            "curve read + 8 a curve's offset + 8 a vertex written) / time; %% of copy = that over\n"
            "the copy row's GB/s; cdp rows name the child grids launched (cdp_1e7_launches=N).\n");
}

/* n curves from seed: quadratics and cubics (half each); lines: a line (degree 1) for every
 * other curve instead, at random, as the L segments of a drawing's paths. */
static void gen_curves(grove_curves *c, size_t n, uint64_t seed, int lines)
{
    for (size_t i = 0; i < n; i++) {
        float *p = c->cp + 8 * i;
        const double x0 = grove__bench_unit(grove__bench_hash(seed, 8 * i)) * 2000.0 - 1000.0;
        const double y0 = grove__bench_unit(grove__bench_hash(seed, 8 * i + 1)) * 2000.0 - 1000.0;
        const uint64_t h = grove__bench_hash(seed ^ 0x5bd1e995u, i);
        c->degree[i] = (uint8_t)(lines && (h & 2) ? 1 : 2 + (h & 1));
        p[0] = (float)x0;
        p[1] = (float)y0;
        for (int k = 2; k < 8; k++) {
            const double off =
                grove__bench_unit(grove__bench_hash(seed, 8 * i + (uint64_t)k)) * 4.0;
            p[k] = (float)(((k & 1) ? y0 : x0) + off - 2.0);
        }
    }
}

static void size_name(char *buf, size_t len, size_t n)
{
    size_t p = 1;
    int e = 0;
    while (p < n && e < 19) p *= 10, e++;
    if (p == n)
        snprintf(buf, len, "1e%d", e);
    else
        snprintf(buf, len, "%zu", n);
}

static int cpu_sane(const grove_curves *in, const grove_polylines *a, const grove_polylines *b)
{
    if (a->n_vertices != b->n_vertices ||
        memcmp(a->offsets, b->offsets, (a->n_curves + 1) * sizeof(uint64_t)) ||
        memcmp(a->xy, b->xy, a->n_vertices * 2 * sizeof(float)))
        return 0;
    for (size_t c = 0; c < in->n; c++) {
        const float *p = in->cp + 8 * c, *v = a->xy + 2 * a->offsets[c];
        const uint64_t m = a->offsets[c + 1] - a->offsets[c];
        const int d = in->degree[c];
        if (m < 2 || memcmp(v, p, 8) || memcmp(v + 2 * (m - 1), p + 2 * d, 8)) return 0;
    }
    return 1;
}

grove_status grove_bench_bezier(grove_ctx *ctx, const grove_bench_opts *opts, grove_bench_row *rows,
                                int max_rows, int *nrows)
{
    size_t sizes[3] = {100000, 1000000, 10000000};
    int nsizes = 3;
    grove_ctx *cpu = NULL;
    grove_ctx_opts co;
    grove_status st = GROVE_OK;
    grove_curves in = {NULL, NULL, 0};
    grove_polylines ref = {0, 0, NULL, NULL}, again = {0, 0, NULL, NULL};
    if (!nrows) return GROVE_ERR_INVALID_ARG;
    *nrows = 0;
    GROVE_TRY(grove__check_ctx(ctx));
    if (!opts || !rows || max_rows < 0)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "bench bezier: NULL argument");
    if (opts->n) {
        sizes[0] = opts->n;
        nsizes = 1;
    }
    grove_ctx_default_opts(&co);
    co.backend = GROVE_BACKEND_CPU;
    if (grove_ctx_create(&co, &cpu) != GROVE_OK) {
        grove_ctx_destroy(cpu);
        return grove__error(ctx, GROVE_ERR_INTERNAL, "bench bezier: no CPU context");
    }
    /* each size twice: the curves, then the same with half of them lines (rows _lines) */
    for (int s = 0; s < 2 * nsizes && *nrows < max_rows; s++) {
        const size_t n = sizes[s / 2];
        const int lines = s & 1;
        char name[32];
        size_name(name, sizeof name - 8, n);
        if (lines) strcat(name, "_lines");
        in.n = n;
        in.cp = (float *)malloc(8 * n * sizeof(float));
        in.degree = (uint8_t *)malloc(n ? n : 1);
        if (!in.cp || !in.degree) {
            st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "bench bezier: %zu curves", n);
            goto _end;
        }
        gen_curves(&in, n, 0xb3e21e5ull + n, lines);
        st = grove_bezier_tessellate(cpu, &in, NULL, &ref, NULL);
        if (st != GROVE_OK) {
            st = grove__error(ctx, st, "bench bezier: the CPU reference: %s",
                              grove_ctx_last_error(cpu));
            goto _end;
        }
#ifdef GROVE_HAVE_CUDA
        if (grove_ctx_backend(ctx) == GROVE_BACKEND_CUDA) {
            GROVE_TRY_END(st, grove__bench_bezier_cuda(ctx, &in, &ref, name, opts->warmup,
                                                       opts->repeats, rows, max_rows, nrows));
        } else
#endif
        {
            const int reps = opts->repeats < 3 ? opts->repeats : 3;
            double t[3] = {0, 0, 0};
            int ok;
            char op[48];
            for (int r = 0; r < (reps > 0 ? reps : 1); r++) {
                const double t0 = grove__bench_now_s();
                grove_polylines_free(&again);
                GROVE_TRY_END(st, grove_bezier_tessellate(ctx, &in, NULL, &again, NULL));
                t[r] = (grove__bench_now_s() - t0) * 1e3;
            }
            ok = cpu_sane(&in, &ref, &again);
            snprintf(op, sizeof op, "cpu_%s", name);
            grove__bench_add_row(rows, max_rows, nrows, op, "cpu", (size_t)ref.n_vertices,
                                 grove__bench_median(t, reps > 0 ? reps : 1),
                                 41.0 * (double)n + 8.0 * (double)ref.n_vertices, 0.0, 0.0, ok);
            if (!ok)
                grove__error(ctx, GROVE_ERR_INTERNAL, "bench bezier: %s differs between runs", op);
        }
        grove_polylines_free(&ref);
        grove_polylines_free(&again);
        free(in.cp);
        free(in.degree);
        in.cp = NULL;
        in.degree = NULL;
    }
_end:
    grove_polylines_free(&ref);
    grove_polylines_free(&again);
    free(in.cp);
    free(in.degree);
    grove_ctx_destroy(cpu);
    return st;
}
