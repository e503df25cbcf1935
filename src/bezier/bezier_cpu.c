/*
 * bezier_cpu.c - the CPU backend of the tessellation (C11 + OpenMP): count every curve, an
 * exclusive scan of the counts, then every curve's vertices written in parallel. The arithmetic
 * is bezier_internal.h's, the same as the kernels', so the bytes equal the GPU's.
 */
#include <stdlib.h>
#include <string.h>

#include "../prim/prim_cpu.h"
#include "bezier_internal.h"

/* The vertex buffer is plain malloc memory (returned to the caller, who frees it with free()).
 * For one session (de7bc79) a large one was aligned to 2 MiB and madvised for transparent huge
 * pages: repeated calls in one process (the bench) ran 25% faster at 10^6
 * curves, but where the kernel had to compact memory to find huge pages the first writing
 * stalled: `grove bezier` on 10^6 curves, one call a process after CSV output had filled the
 * page cache, tessellated in 220-390 ms in 7 runs of 8 against 63-77 ms with 4 KiB pages (a
 * 2-core VM whose THP defrag setting is "madvise", the common default; docs/bezier.md). */

/* The vertices of curves [c0, c1). The vertex sums are fmaf calls: where the CPU has fused
 * multiply-add instructions and AVX2 a clone compiled for them runs instead (the same bytes:
 * fmaf is correctly rounded either way, ISO C mode contracts nothing else, and a vector lane
 * does a vertex's operations in the scalar order), with grove__bz_curve's loops vectorized 8
 * vertices wide: about 5x faster than the library call (2.5x with FMA alone, 2x more with the
 * vectors, 2026-11-29). */
#define GROVE__BZ_WRITE_CURVES                                                                     \
    for (size_t c = c0; c < c1; c++)                                                               \
        grove__bz_curve(in->cp + 8 * c, in->degree[c], (uint32_t)(off[c + 1] - off[c]),           \
                        xy + 2 * off[c]);

static void write_curves(const grove_curves *in, const uint64_t *off, float *xy, size_t c0,
                         size_t c1)
{
    GROVE__BZ_WRITE_CURVES
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define GROVE__BZ_AVX2_CLONE 1
__attribute__((target("avx2,fma"))) static void write_curves_avx2(const grove_curves *in,
                                                              const uint64_t *off, float *xy,
                                                              size_t c0, size_t c1)
{
    GROVE__BZ_WRITE_CURVES
}
#endif

grove_status grove__bz_tessellate_cpu(grove_ctx *ctx, const grove_curves *in,
                                      const grove_bezier_opts *o, grove_polylines *out,
                                      grove_bezier_stats *stats)
{
    const size_t n = in->n;
    const int nt = grove__threads(ctx);
    grove__bz_rule r;
    uint64_t *off = (uint64_t *)malloc((n + 1) * sizeof *off);
    uint64_t capped = 0, total = 0;
    long long c;
    grove__bz_rule_from(o, &r);
    if (!off)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                            "grove_bezier_tessellate: out of memory for %zu offsets", n + 1);
    /* counts first, in off[c + 1], then prim's chunked parallel scan over them in place (the
     * scan was one sequential pass until 2026-11-29, which more threads do not shorten) */
    off[0] = 0;
#pragma omp parallel for num_threads(nt) schedule(static) reduction(+ : capped)
    for (c = 0; c < (long long)n; c++) {
        grove__bz_count k = grove__bz_count_curve(in->cp + 8 * (size_t)c, in->degree[c], &r);
        off[c + 1] = k.m;
        capped += k.capped;
    }
    /* n <= GROVE__BZ_MAX_N < 2^32, prim's bound */
    const grove_status sc =
        grove__cpu_scan(ctx, GROVE_U64, GROVE_OP_SUM, GROVE_SCAN_INCLUSIVE, off + 1, off + 1, n);
    if (sc != GROVE_OK) {
        free(off);
        return sc;
    }
    total = off[n];
    out->n_curves = n;
    out->n_vertices = total;
    out->offsets = off;
    out->xy = NULL;
    if (total > 0) {
        float *xy = (float *)malloc((size_t)total * 2 * sizeof *xy);
        if (!xy)
            return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                                "grove_bezier_tessellate: out of memory for %llu vertices",
                                (unsigned long long)total);
        out->xy = xy;
        int avx2 = 0;
#ifdef GROVE__BZ_AVX2_CLONE
        avx2 = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
#endif
        /* curves have 2..4096 vertices: dynamic chunks keep the threads even */
        const long long chunk = 1024, nchunks = ((long long)n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
        for (c = 0; c < nchunks; c++) {
            const size_t c0 = (size_t)(c * chunk);
            const size_t c1 = c0 + (size_t)chunk < n ? c0 + (size_t)chunk : n;
#ifdef GROVE__BZ_AVX2_CLONE
            if (avx2) {
                write_curves_avx2(in, off, xy, c0, c1);
                continue;
            }
#endif
            write_curves(in, off, xy, c0, c1);
        }
    }
    if (stats) {
        stats->variant = GROVE_BEZIER_FLAT;
        stats->child_launches = 0;
        stats->capped = capped;
    }
    return GROVE_OK;
}
