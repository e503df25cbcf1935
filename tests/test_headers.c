/*
 * test_headers.c - every public header compiles as pedantic C11 (-Wall -Wextra -Werror
 * -pedantic), alone and together, twice (include guards), and links.
 */
#include "grove/io.h" /* first: it must compile on its own */
#include "grove/quadtree.h"
#include "grove/kdtree.h"
#include "grove/mri.h"
#include "grove/octree.h"
#include "grove/bezier.h"
#include "grove/prim.h"
#include "grove/grove.h"
#include "grove/io.h"
#include "grove/prim.h"

#include <stdio.h>
#include <string.h>

int main(void)
{
    grove_ctx_opts opts;
    grove_ctx *ctx = NULL;
    uint32_t x = 0, y = 0, codes[1];
    int failures = 0;

    grove_ctx_default_opts(&opts);
    opts.backend = GROVE_BACKEND_CPU;
    if (grove_ctx_create(&opts, &ctx) != GROVE_OK) failures++;
    if (strcmp(grove_status_string(GROVE_OK), "ok") != 0) failures++;
    if (grove_dtype_size(GROVE_U64) != 8 || grove_dtype_size(GROVE_F32) != 4) failures++;
    /* The inline helpers and the library agree. */
    codes[0] = grove_morton2(5u, 9u);
    if (grove_morton2_decode(ctx, codes, &x, &y, 1) != GROVE_OK || x != 5u || y != 9u) failures++;
    if (grove_morton3_compact(grove_morton3(7u, 0u, 0u)) != 7u) failures++;
    grove_points_free(NULL); /* accepts NULL */
    grove_quadtree_destroy(NULL);
    grove_kdtree_destroy(NULL);
    grove_octree_destroy(NULL);
    grove_cloud_free(NULL);
    grove_curves_free(NULL);
    grove_polylines_free(NULL);
    grove_ctx_destroy(ctx);
    printf("test_headers: %s (grove %s)\n", failures ? "FAILED" : "ok", grove_version());
    return failures ? 1 : 0;
}
