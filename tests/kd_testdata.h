/*
 * kd_testdata.h - the float64 brute force shared by the k-d tree tests (test_kdtree.c,
 * test_kd_query.c): a (squared distance, input position) pair, its order, and the squared
 * distance rounded in the library's order (one rounding per operation, axis by axis).
 */
#ifndef GROVE_KD_TESTDATA_H
#define GROVE_KD_TESTDATA_H

#include <stdint.h>

#pragma STDC FP_CONTRACT OFF

typedef struct pr {
    double d;
    uint64_t i;
} pr;

/* qsort order: smaller squared distance, then smaller input position. */
static int pr_cmp(const void *a, const void *b)
{
    const pr *x = (const pr *)a, *y = (const pr *)b;
    if (x->d != y->d) return x->d < y->d ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static double ref_dist2(const double *p, const double *q, int D)
{
    double s = 0.0;
    for (int d = 0; d < D; d++) {
        double dx = p[d] - q[d];
        double a = dx * dx;
        s = s + a;
    }
    return s;
}

#endif /* GROVE_KD_TESTDATA_H */
