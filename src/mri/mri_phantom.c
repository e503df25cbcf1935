/*
 * mri_phantom.c - the Shepp-Logan phantom (Toft's higher-contrast 2-D version and its 3-D
 * extension with ellipsoids) scaled into the unit field of view, its k-space from the closed-form
 * Fourier transforms of ellipses and ellipsoids, radial / spiral / stack-of-stars trajectories
 * with their density weights, and the phantom rasterised onto the reconstruction grid.
 *
 * Scale of the data: the phantom is a function f(x) on [-0.5, 0.5)^dims; its samples are
 * d(k) = N * integral f(x) e^{-i 2 pi k.x} dx with N = size^dims, so that the image the forward
 * model d_m = sum_n rho_n e^{-i 2 pi k_m.x_n} explains has rho_n ~ f(x_n). Weights are the
 * k-space area (volume) each sample stands for, in cells of the Cartesian grid (1 cycle per field
 * of view), divided by N: then F^H W F is about the identity on the band the trajectory covers
 * and lambda is on the scale of 1. docs/mri.md has the formulas.
 */
#define _XOPEN_SOURCE 700 /* j1() */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mri_internal.h"

#define PH_PI 3.14159265358979323846
#define PH_MAX_SAMPLES ((size_t)1 << 31)

/* An ellipse (ellipsoid): value, semi-axes, centre, rotation (degrees). In 2-D c and the last two
 * angles are unused. Coordinates are those of the classic tables ([-1, 1]); they are halved into
 * the unit field of view. */
typedef struct ph_ellipse {
    double val, a, b, c, x0, y0, z0, phi, theta, psi;
} ph_ellipse;

/* Toft's modified Shepp-Logan phantom (values 0..1). */
/* clang-format off */
static const ph_ellipse sl2[] = {
    {1.0, .6900, .9200, 0, 0, 0, 0, 0, 0, 0},
    {-.8, .6624, .8740, 0, 0, -.0184, 0, 0, 0, 0},
    {-.2, .1100, .3100, 0, .22, 0, 0, -18, 0, 0},
    {-.2, .1600, .4100, 0, -.22, 0, 0, 18, 0, 0},
    {.1, .2100, .2500, 0, 0, .35, 0, 0, 0, 0},
    {.1, .0460, .0460, 0, 0, .1, 0, 0, 0, 0},
    {.1, .0460, .0460, 0, 0, -.1, 0, 0, 0, 0},
    {.1, .0460, .0230, 0, -.08, -.605, 0, 0, 0, 0},
    {.1, .0230, .0230, 0, 0, -.606, 0, 0, 0, 0},
    {.1, .0230, .0460, 0, .06, -.605, 0, 0, 0, 0},
};

/* The 3-D extension (the same contrast; the third semi-axis and z centres of the common 3-D
 * table). Rotation: R = Rz(phi) Rx(theta) Rz(psi). */
static const ph_ellipse sl3[] = {
    {1.0, .6900, .920, .810, 0, 0, 0, 0, 0, 0},
    {-.8, .6624, .874, .780, 0, -.0184, 0, 0, 0, 0},
    {-.2, .1100, .310, .220, .22, 0, 0, -18, 0, 10},
    {-.2, .1600, .410, .280, -.22, 0, 0, 18, 0, 10},
    {.1, .2100, .250, .410, 0, .35, -.15, 0, 0, 0},
    {.1, .0460, .046, .050, 0, .1, .25, 0, 0, 0},
    {.1, .0460, .046, .050, 0, -.1, .25, 0, 0, 0},
    {.1, .0460, .023, .050, -.08, -.605, 0, 0, 0, 0},
    {.1, .0230, .023, .020, 0, -.606, 0, 0, 0, 0},
    {.1, .0230, .046, .020, .06, -.605, 0, 0, 0, 0},
};
/* clang-format on */
#define NUM_ELL 10

/* An ellipse prepared for evaluation: x = c + R D u with |u| <= 1 inside, D = diag(ax). */
typedef struct ph_shape {
    double val, vol; /* value, product of the semi-axes */
    double c[3];
    double ax[3];
    double rt[3][3]; /* R^T */
} ph_shape;

static void prepare(int dims, ph_shape *sh)
{
    const ph_ellipse *t = dims == 2 ? sl2 : sl3;
    for (int e = 0; e < NUM_ELL; e++) {
        double f = t[e].phi * PH_PI / 180, th = t[e].theta * PH_PI / 180,
               ps = t[e].psi * PH_PI / 180;
        double rz1[3][3] = {{cos(f), -sin(f), 0}, {sin(f), cos(f), 0}, {0, 0, 1}};
        double rx[3][3] = {{1, 0, 0}, {0, cos(th), -sin(th)}, {0, sin(th), cos(th)}};
        double rz2[3][3] = {{cos(ps), -sin(ps), 0}, {sin(ps), cos(ps), 0}, {0, 0, 1}};
        double t1[3][3];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                t1[i][j] = 0;
                for (int q = 0; q < 3; q++) t1[i][j] += rz1[i][q] * rx[q][j];
            }
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                double r = 0;
                for (int q = 0; q < 3; q++) r += t1[i][q] * rz2[q][j];
                sh[e].rt[j][i] = r;
            }
        sh[e].val = t[e].val;
        sh[e].ax[0] = 0.5 * t[e].a;
        sh[e].ax[1] = 0.5 * t[e].b;
        sh[e].ax[2] = dims == 3 ? 0.5 * t[e].c : 1.0;
        sh[e].vol = sh[e].ax[0] * sh[e].ax[1] * sh[e].ax[2];
        sh[e].c[0] = 0.5 * t[e].x0;
        sh[e].c[1] = 0.5 * t[e].y0;
        sh[e].c[2] = dims == 3 ? 0.5 * t[e].z0 : 0;
    }
}

/* Phantom value at x (the sum of the ellipses containing it). */
static double ph_value(int dims, const ph_shape *sh, const double *x)
{
    double v = 0;
    for (int e = 0; e < NUM_ELL; e++) {
        double q = 0;
        for (int i = 0; i < dims; i++) {
            double u = 0;
            for (int j = 0; j < dims; j++) u += sh[e].rt[i][j] * (x[j] - sh[e].c[j]);
            u /= sh[e].ax[i];
            q += u * u;
        }
        if (q <= 1.0) v += sh[e].val;
    }
    return v;
}

/* J1(2 pi r) / r, the Fourier transform of the unit disc at |k| = r (pi at 0). */
static double disc_ft(double r)
{
    double u = 2 * PH_PI * r;
    if (u < 1e-4) return PH_PI * (1 - u * u / 8);
    return j1(u) / r;
}

/* The Fourier transform of the unit ball at |k| = r: (sin u - u cos u) / (2 pi^2 r^3), u = 2 pi
 * r (4 pi / 3 at 0); the series below u = 0.05 avoids the cancellation. */
static double ball_ft(double r)
{
    double u = 2 * PH_PI * r;
    if (u < 0.05) {
        double u2 = u * u;
        return 4 * PH_PI / 3 * (1 - u2 / 10 + u2 * u2 / 280);
    }
    return (sin(u) - u * cos(u)) / (2 * PH_PI * PH_PI * r * r * r);
}

/* The continuous Fourier transform of the phantom at k: for x = c + R D u,
 * FT(k) = val * |D| * unit(|D R^T k|) * e^{-i 2 pi k.c}. */
static void ph_ft(int dims, const ph_shape *sh, const double *k, double *re, double *im)
{
    double sr = 0, si = 0;
    for (int e = 0; e < NUM_ELL; e++) {
        double q = 0, ph = 0, amp;
        for (int i = 0; i < dims; i++) {
            double t = 0;
            for (int j = 0; j < dims; j++) t += sh[e].rt[i][j] * k[j];
            t *= sh[e].ax[i];
            q += t * t;
            ph += k[i] * sh[e].c[i];
        }
        q = sqrt(q);
        amp = sh[e].val * sh[e].vol * (dims == 2 ? disc_ft(q) : ball_ft(q));
        ph *= -2 * PH_PI;
        sr += amp * cos(ph);
        si += amp * sin(ph);
    }
    *re = sr;
    *im = si;
}

void grove_mri_phantom_default_opts(grove_mri_phantom_opts *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->dims = 2;
    o->size = 128;
    o->traj = GROVE_MRI_TRAJ_RADIAL;
    o->oversampling = 1.0;
}

grove_status grove_mri_phantom_image(int dims, int size, float *img)
{
    ph_shape sh[NUM_ELL];
    size_t n = 1;
    int ss;
    if ((dims != 2 && dims != 3) || size < 1 || size > 1024 || !img) return GROVE_ERR_INVALID_ARG;
    prepare(dims, sh);
    for (int a = 0; a < dims; a++) n *= (size_t)size;
    ss = dims == 2 ? 8 : 4; /* sub-samples per axis and voxel */
#pragma omp parallel for schedule(dynamic, 64)
    for (size_t i = 0; i < n; i++) {
        size_t c[3] = {i % (size_t)size, (i / (size_t)size) % (size_t)size,
                       i / ((size_t)size * (size_t)size)};
        double acc = 0, x[3] = {0, 0, 0};
        int tot = 1;
        for (int a = 0; a < dims; a++) tot *= ss;
        for (int sidx = 0; sidx < tot; sidx++) {
            int r = sidx;
            for (int a = 0; a < dims; a++) {
                int j = r % ss;
                r /= ss;
                x[a] = ((double)c[a] - 0.5 * size + ((j + 0.5) / ss - 0.5)) / size;
            }
            acc += ph_value(dims, sh, x);
        }
        img[i] = (float)(acc / tot);
    }
    return GROVE_OK;
}

/* ---- trajectories ---- */

typedef struct traj_plan {
    int dims, size;
    grove_mri_trajectory traj;
    double ovs;
    size_t spokes, per_spoke; /* radial, stack: full-diameter spokes, samples per spoke */
    size_t partitions;        /* stack (and 3-D spiral): kz planes */
    size_t interleaves;       /* spiral */
    double theta_max, dr;     /* spiral: total angle, ring gap */
    size_t per_interleave;    /* spiral: samples per interleave */
} traj_plan;

/* Archimedean spiral r = A theta, sampled so that consecutive samples are 1 / ovs apart along
 * the curve; returns the number of samples and writes their angles when theta is not NULL. */
static size_t spiral_angles(const traj_plan *t, double *theta)
{
    double a = (0.5 * t->size) / t->theta_max, th = 0, step = 1.0 / t->ovs;
    size_t n = 0;
    while (th <= t->theta_max) {
        if (theta) theta[n] = th;
        n++;
        th += step / (a * sqrt(1 + th * th));
    }
    return n;
}

static grove_status plan_traj(grove_ctx *ctx, const char *fn, const grove_mri_phantom_opts *o,
                              traj_plan *t, size_t *total)
{
    double s = o->size;
    size_t per_plane;
    memset(t, 0, sizeof *t);
    t->dims = o->dims;
    t->size = o->size;
    t->traj = o->traj;
    t->ovs = o->oversampling;
    t->partitions = o->dims == 3 && o->traj != GROVE_MRI_TRAJ_RADIAL ? (size_t)o->size : 1;
    switch (o->traj) {
    case GROVE_MRI_TRAJ_RADIAL:
    case GROVE_MRI_TRAJ_STACK:
        t->per_spoke = (size_t)o->size + 1;
        /* Nyquist: the gap between spokes at the edge |k| = s/2, pi (s/2) / spokes, is one
         * cell; in 3-D the hemisphere's area 2 pi (s/2)^2 over one cell per spoke */
        if (o->dims == 3 && o->traj == GROVE_MRI_TRAJ_RADIAL)
            t->spokes = (size_t)ceil(o->oversampling * PH_PI * s * s / 2);
        else
            t->spokes = (size_t)ceil(o->oversampling * PH_PI * s / 2);
        per_plane = t->spokes * t->per_spoke;
        break;
    case GROVE_MRI_TRAJ_SPIRAL:
        t->interleaves = o->size / 8 < 4 ? 4 : (size_t)(o->size / 8);
        t->dr = 1.0 / o->oversampling;
        /* turns = kmax / (interleaves * dr) */
        t->theta_max = 2 * PH_PI * (0.5 * s) / ((double)t->interleaves * t->dr);
        t->per_interleave = spiral_angles(t, NULL);
        per_plane = t->interleaves * t->per_interleave;
        break;
    default:
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: unknown trajectory %d", fn,
                            (int)o->traj);
    }
    if ((double)per_plane * (double)t->partitions > (double)PH_MAX_SAMPLES)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: %.3g samples for size %d: more than %zu (lower the size or the "
                            "oversampling)",
                            fn, (double)per_plane * (double)t->partitions, o->size, PH_MAX_SAMPLES);
    *total = per_plane * t->partitions;
    return GROVE_OK;
}

/* A spoke direction on the hemisphere z >= 0: a Fibonacci spiral, which spreads the spokes
 * evenly in solid angle (each stands for 2 pi / spokes of the sphere, both of its halves). */
static void kooshball_dir(size_t i, size_t n, double *d)
{
    double z = 1.0 - ((double)i + 0.5) / (double)n; /* (0, 1], even in z: even in area */
    double r = sqrt(1 - z * z), az = (double)i * PH_PI * (3 - sqrt(5.0));
    d[0] = r * cos(az);
    d[1] = r * sin(az);
    d[2] = z;
}

static void fill_traj(const traj_plan *t, grove_mri_acq *a, const double *theta)
{
    size_t s = (size_t)t->size, idx = 0;
    double n_vox = pow((double)t->size, t->dims);
    for (size_t pz = 0; pz < t->partitions; pz++) {
        double kz = t->partitions > 1 ? (double)pz - 0.5 * (double)s : 0.0;
        if (t->traj == GROVE_MRI_TRAJ_SPIRAL) {
            double amp = (0.5 * (double)s) / t->theta_max;
            size_t np = t->per_interleave;
            for (size_t il = 0; il < t->interleaves; il++) {
                double rot = 2 * PH_PI * (double)il / (double)t->interleaves;
                for (size_t j = 0; j < np; j++, idx++) {
                    double th = theta[j], r = amp * th;
                    /* the area a sample stands for: its share of the curve across k, r dtheta
                     * (central difference), times the gap to the neighbouring interleave */
                    double dth = 0.5 * ((j + 1 < np ? theta[j + 1] : th) - (j ? theta[j - 1] : 0));
                    double area = r * dth * (2 * PH_PI * amp / (double)t->interleaves);
                    if (j == 0) /* the disc no interleave's sweep reaches */
                        area = PH_PI * 0.25 * pow(amp * theta[1], 2) / (double)t->interleaves;
                    a->kx[idx] = (float)(r * cos(th + rot));
                    a->ky[idx] = (float)(r * sin(th + rot));
                    if (a->kz) a->kz[idx] = (float)kz;
                    a->w[idx] = (float)(area / n_vox);
                }
            }
        } else {
            for (size_t sp = 0; sp < t->spokes; sp++) {
                double dir[3] = {0, 0, 0};
                if (t->dims == 3 && t->traj == GROVE_MRI_TRAJ_RADIAL) {
                    kooshball_dir(sp, t->spokes, dir);
                } else {
                    double ang = PH_PI * (double)sp / (double)t->spokes;
                    dir[0] = cos(ang);
                    dir[1] = sin(ang);
                }
                for (size_t j = 0; j < t->per_spoke; j++, idx++) {
                    double kr = (double)j - 0.5 * (double)s, ar = fabs(kr), area;
                    if (t->dims == 3 && t->traj == GROVE_MRI_TRAJ_RADIAL)
                        /* the shell from r - 1/2 to r + 1/2, 4 pi (r^2 + 1/12), over the
                         * 2 * spokes half-spokes; the centre ball of radius 1/2 is shared by
                         * all spokes */
                        area = ar > 0 ? (ar * ar + 1.0 / 12) * 2 * PH_PI / (double)t->spokes
                                      : PH_PI / 6 / (double)t->spokes;
                    else
                        /* ramp r dr dtheta, dtheta = pi / spokes; the centre disc of radius
                         * 1/2 is shared by all spokes */
                        area =
                            ar > 0 ? ar * PH_PI / (double)t->spokes : PH_PI / 4 / (double)t->spokes;
                    a->kx[idx] = (float)(kr * dir[0]);
                    a->ky[idx] = (float)(kr * dir[1]);
                    if (a->kz)
                        a->kz[idx] =
                            (float)(t->dims == 3 && t->traj == GROVE_MRI_TRAJ_RADIAL ? kr * dir[2]
                                                                                     : kz);
                    a->w[idx] = (float)(area / n_vox);
                }
            }
        }
    }
}

grove_status grove_mri_phantom(grove_ctx *ctx, const grove_mri_phantom_opts *opts,
                               grove_mri_acq **out)
{
    static const char fn[] = "grove_mri_phantom";
    grove_mri_phantom_opts o;
    traj_plan t;
    grove_mri_acq *a = NULL;
    double *theta = NULL;
    ph_shape sh[NUM_ELL];
    size_t m = 0;
    double n_vox;
    grove_status st = GROVE_OK;

    GROVE_TRY(grove__check_ctx(ctx));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (opts)
        o = *opts;
    else
        grove_mri_phantom_default_opts(&o);
    if (o.dims != 2 && o.dims != 3)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: opts->dims must be 2 or 3, got %d", fn,
                            o.dims);
    if (o.size < 8 || o.size > 1024)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: opts->size must be 8..1024, got %d",
                            fn, o.size);
    if (!(o.oversampling >= 0.25 && o.oversampling <= 16))
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: opts->oversampling must be 0.25..16, got %g", fn, o.oversampling);
    if (o.traj == GROVE_MRI_TRAJ_STACK && o.dims != 3)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG,
                            "%s: the stack-of-stars trajectory is 3-D only (opts->dims = %d)", fn,
                            o.dims);
    GROVE_TRY(plan_traj(ctx, fn, &o, &t, &m));

    a = (grove_mri_acq *)calloc(1, sizeof *a);
    if (!a) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    a->dims = o.dims;
    a->size = o.size;
    a->num_k = m;
    a->kx = (float *)malloc(m * sizeof(float));
    a->ky = (float *)malloc(m * sizeof(float));
    a->kz = o.dims == 3 ? (float *)malloc(m * sizeof(float)) : NULL;
    a->d_r = (float *)malloc(m * sizeof(float));
    a->d_i = (float *)malloc(m * sizeof(float));
    a->w = (float *)malloc(m * sizeof(float));
    if (t.traj == GROVE_MRI_TRAJ_SPIRAL)
        theta = (double *)malloc(t.per_interleave * sizeof(double));
    if (!a->kx || !a->ky || (o.dims == 3 && !a->kz) || !a->d_r || !a->d_i || !a->w ||
        (t.traj == GROVE_MRI_TRAJ_SPIRAL && !theta)) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu samples", fn, m);
        goto _end;
    }
    if (theta) spiral_angles(&t, theta);
    fill_traj(&t, a, theta);

    prepare(o.dims, sh);
    n_vox = pow((double)o.size, o.dims);
#pragma omp parallel for schedule(static) num_threads(grove__threads(ctx))
    for (size_t j = 0; j < m; j++) {
        double k[3] = {a->kx[j], a->ky[j], a->kz ? a->kz[j] : 0}, re, im;
        ph_ft(o.dims, sh, k, &re, &im);
        a->d_r[j] = (float)(n_vox * re);
        a->d_i[j] = (float)(n_vox * im);
    }
    *out = a;
    a = NULL;
_end:
    free(theta);
    grove_mri_acq_free(a);
    return st;
}
