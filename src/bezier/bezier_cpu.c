/*
 * bezier_cpu.c - the CPU backend of the tessellation (C11 + OpenMP): count every curve, an
 * exclusive scan of the counts, then every curve's vertices written in parallel. The arithmetic
 * is bezier_internal.h's, the same as the kernels', so the bytes equal the GPU's.
 */
#include <stdlib.h>
#include <string.h>

#include "bezier_internal.h"

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
    /* counts first, in off[c + 1], so the scan below can run in place */
    off[0] = 0;
#pragma omp parallel for num_threads(nt) schedule(static) reduction(+ : capped)
    for (c = 0; c < (long long)n; c++) {
        grove__bz_count k = grove__bz_count_curve(in->cp + 8 * (size_t)c, in->degree[c], &r);
        off[c + 1] = k.m;
        capped += k.capped;
    }
    for (size_t i = 1; i <= n; i++) off[i] += off[i - 1];
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
        /* curves have 2..4096 vertices: dynamic chunks keep the threads even */
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1024)
        for (c = 0; c < (long long)n; c++) {
            const float *cp = in->cp + 8 * (size_t)c;
            const uint64_t b = off[c];
            const uint32_t m = (uint32_t)(off[c + 1] - b);
            for (uint32_t i = 0; i < m; i++)
                grove__bz_vertex(cp, in->degree[c], i, m, xy + 2 * (b + i));
        }
    }
    if (stats) {
        stats->variant = GROVE_BEZIER_FLAT;
        stats->child_launches = 0;
        stats->capped = capped;
    }
    return GROVE_OK;
}
