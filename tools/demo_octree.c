/*
 * demo_octree.c - the octree module's part of `grove demo`: a clustered cloud (a quarter of the
 * points uniform, the rest in one dense spot) built with a small max_points so that the tree
 * has several levels; the tree checked by the tests' structural validator, against the CPU
 * backend's tree when the demo runs on CUDA, a box query against brute force, and a Potree
 * directory written and loaded back (into --out DIR/octree when given, else a temporary
 * directory that is removed).
 *
 * The part does not scale with --size: 200,000 points (20,000 in the warm-up) already give a
 * tree of several levels with level-of-detail samples, in well under a second on the CPU.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "grove/octree.h"
#include "octree_check.h" /* the structural validator the tests use */

int cli_demo_octree(cli_demo *d);

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double unit(uint64_t *s) { return (double)(mix(s) >> 11) * 0x1p-53; }

/* Removes the files the Potree writer leaves in dir, then dir. */
static void remove_potree_dir(const char *dir)
{
    static const char *const names[] = {"metadata.json", "hierarchy.bin", "octree.bin",
                                        "grove.octree"};
    for (int k = 0; k < 4; k++) {
        char *p = cli_path_join(dir, names[k]);
        if (p) unlink(p);
        free(p);
    }
    rmdir(dir);
}

int cli_demo_octree(cli_demo *d)
{
    const char *module = "octree";
    size_t n = d->quiet ? 20000 : 200000, hits = 0, want = 0;
    const double box[6] = {0.45, 0.45, 0.45, 0.55, 0.55, 0.55};
    grove_octree_opts o;
    grove_octree *t = NULL, *ref = NULL, *back = NULL;
    grove_query_result res;
    grove_cloud cloud;
    grove_status s;
    uint64_t seed = d->seed;
    char step[80], msg[256], tmpdir[64], *dir = NULL;
    double t0, ms;
    int ok;

    memset(&cloud, 0, sizeof cloud);
    memset(&res, 0, sizeof res);
    cloud.n = n;
    cloud.xyz = (double *)malloc(3 * n * sizeof *cloud.xyz);
    cloud.rgb = (uint16_t *)malloc(3 * n * sizeof *cloud.rgb);
    cloud.intensity = (uint16_t *)malloc(n * sizeof *cloud.intensity);
    if (!cloud.xyz || !cloud.rgb || !cloud.intensity) {
        cli_error("demo", "out of host memory");
        grove_cloud_free(&cloud);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        int dense = i % 4 != 0;
        for (int a = 0; a < 3; a++) {
            double u = unit(&seed);
            cloud.xyz[3 * i + (size_t)a] = dense ? 0.5 + 0.02 * (u - 0.5) : u;
            cloud.rgb[3 * i + (size_t)a] = (uint16_t)(65535.0 * u);
        }
        cloud.intensity[i] = (uint16_t)(mix(&seed) >> 48);
    }

    grove_octree_default_opts(&o);
    o.max_points = d->quiet ? 500 : 2000;
    o.lod_grid = 32;
    o.batch = n / 3 + 1; /* several batches: the tree must not depend on them */
    t0 = cli_now_ms();
    s = grove_octree_build(d->ctx, cloud.xyz, n, &o, &t, NULL);
    ms = cli_now_ms() - t0;
    snprintf(step, sizeof step, "octree build (clustered, cap %u)", o.max_points);
    ok = s == GROVE_OK && oc_check(t, cloud.xyz, n, 0, msg, sizeof msg, NULL) == 0;
    if (s == GROVE_OK && !ok) cli_error("demo", "%s: check failed: %s", step, msg);
    cli_demo_row(d, module, step, n, ms, s, d->ctx, ok);
    if (s != GROVE_OK) goto done;

    if (d->ref) {
        grove_status rs = grove_octree_build(d->ref, cloud.xyz, n, &o, &ref, NULL);
        ok = rs == GROVE_OK && oc_same(t, ref, msg, sizeof msg) == 0;
        if (rs != GROVE_OK)
            cli_report_status("demo", "octree build on the CPU", rs, d->ref);
        else if (!ok)
            cli_error("demo", "octree: the tree differs from the CPU backend's: %s", msg);
        cli_demo_row(d, module, "octree: same tree as the CPU", n, 0.0, GROVE_OK, d->ctx, ok);
    }

    t0 = cli_now_ms();
    s = grove_octree_query_boxes(d->ctx, t, box, 1, &res);
    ms = cli_now_ms() - t0;
    ok = 0;
    if (s == GROVE_OK) {
        size_t j = (size_t)res.offsets[0];
        ok = 1;
        for (size_t i = 0; i < n; i++) {
            const double *x = cloud.xyz + 3 * i;
            if (!(x[0] >= box[0] && x[0] <= box[3] && x[1] >= box[1] && x[1] <= box[4] &&
                  x[2] >= box[2] && x[2] <= box[5]))
                continue;
            want++;
            if (j >= res.offsets[1] || res.indices[j++] != i) ok = 0;
        }
        hits = (size_t)(res.offsets[1] - res.offsets[0]);
        ok = ok && hits == want;
        if (!ok)
            cli_error("demo", "octree box query: %zu points, brute force finds %zu (or others)",
                      hits, want);
    }
    cli_demo_row(d, module, "octree box query (1 box)", n, ms, s, d->ctx, ok);

    if (d->out_dir && !d->quiet) {
        dir = cli_path_join(d->out_dir, "octree");
    } else {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/grove-demo-octree-XXXXXX");
        if (mkdtemp(tmpdir)) dir = tmpdir;
    }
    t0 = cli_now_ms();
    s = dir ? grove_octree_write_potree(d->ctx, t, &cloud, dir) : GROVE_ERR_IO;
    if (!dir) cli_error("demo", "octree: cannot create a temporary directory");
    if (s == GROVE_OK) s = grove_octree_load(d->ctx, dir, &back);
    ms = cli_now_ms() - t0;
    ok = s == GROVE_OK && oc_same(t, back, msg, sizeof msg) == 0;
    if (s == GROVE_OK && !ok) cli_error("demo", "octree: the loaded tree differs: %s", msg);
    cli_demo_row(d, module, "octree Potree write + load", n, ms, s, d->ctx, ok);
    if (dir == tmpdir) remove_potree_dir(dir);

done:
    if (dir != tmpdir) free(dir);
    grove_query_result_free(&res);
    grove_octree_destroy(back);
    grove_octree_destroy(ref);
    grove_octree_destroy(t);
    grove_cloud_free(&cloud);
    return 0;
}
