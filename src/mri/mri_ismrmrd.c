/*
 * mri_ismrmrd.c - single-coil non-Cartesian ISMRMRD (HDF5) datasets through libismrmrd's C API:
 * the reader (acquisitions with trajectories, the XML header's encoded matrix and field of view,
 * density weights from the trajectory's extra dimension or estimated) and the writer (one
 * acquisition per readout). docs/mri.md, "ISMRMRD files", gives the conventions:
 *
 *  - the trajectory is in cycles per millimetre (the user parameter trajectoryUnits =
 *    "cycles/mm", the default) or normalised to cycles per sample (trajectoryUnits =
 *    "normalized", |k| <= 0.5); either is rescaled to cycles per field of view;
 *  - trajectory_dimensions is dims (kx, ky[, kz]) or dims + 1, the last being the density
 *    weight, which grove writes;
 *  - the matrix must be square (cubic in 3-D); z = 1 means 2-D.
 *
 * libismrmrd reports errors through a process-wide handler that prints by default; a library
 * must not print, so every entry point here installs a handler that keeps the last message (per
 * thread) for grove's own error message.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mri_internal.h"

#ifdef GROVE_HAVE_ISMRMRD
#include <ismrmrd/dataset.h>
#include <ismrmrd/ismrmrd.h>
#endif

#define ISM_MAX_SIZE_2D 4096
#define ISM_MAX_SIZE_3D 1024
#define ISM_MAX_READOUT 65535 /* number_of_samples is a uint16 */
#define ISM_FOV_MM 256.0      /* the field of view grove writes (in-plane, and z in 3-D) */
#define ISM_SLICE_MM 5.0      /* z of a 2-D encoding */

int grove_mri_has_ismrmrd(void)
{
#ifdef GROVE_HAVE_ISMRMRD
    return 1;
#else
    return 0;
#endif
}

#ifndef GROVE_HAVE_ISMRMRD

grove_status grove_mri_ismrmrd_read(grove_ctx *ctx, const char *path, grove_mri_acq **out)
{
    if (out) *out = NULL;
    return grove__error(ctx, GROVE_ERR_UNSUPPORTED,
                        "grove_mri_ismrmrd_read: %s: this build of grove has no ISMRMRD support "
                        "(libismrmrd was not found)",
                        path ? path : "(null)");
}

grove_status grove_mri_ismrmrd_write(grove_ctx *ctx, const char *path, const grove_mri_acq *acq)
{
    (void)acq;
    return grove__error(ctx, GROVE_ERR_UNSUPPORTED,
                        "grove_mri_ismrmrd_write: %s: this build of grove has no ISMRMRD support "
                        "(libismrmrd was not found)",
                        path ? path : "(null)");
}

#else

/* ---- libismrmrd's error messages ---- */

static _Thread_local char ism_msg[256];

static void ism_on_error(const char *file, int line, const char *function, int code,
                         const char *msg)
{
    (void)file;
    (void)line;
    snprintf(ism_msg, sizeof ism_msg, "%s: %s (%s)", function ? function : "libismrmrd",
             msg ? msg : "", ismrmrd_strerror(code));
}

static void ism_begin(void)
{
    ismrmrd_set_error_handler(ism_on_error);
    ism_msg[0] = '\0';
}

static const char *ism_last(void) { return ism_msg[0] ? ism_msg : "no detail from libismrmrd"; }

/* ---- the XML header: the few fields grove needs ---- */

/* The text between <tag ...> and </tag> inside [s, end), or NULL. Namespace prefixes are not
 * handled (ISMRMRD headers use a default namespace). */
static const char *xml_find(const char *s, const char *end, const char *tag, const char **cend)
{
    size_t tl = strlen(tag);
    const char *p = s;
    while (p && p < end) {
        const char *lt = memchr(p, '<', (size_t)(end - p));
        if (!lt) return NULL;
        if ((size_t)(end - lt) > tl + 1 && !strncmp(lt + 1, tag, tl) &&
            (lt[1 + tl] == '>' || lt[1 + tl] == ' ' || lt[1 + tl] == '/' || lt[1 + tl] == '\t' ||
             lt[1 + tl] == '\n' || lt[1 + tl] == '\r')) {
            const char *gt = memchr(lt, '>', (size_t)(end - lt));
            const char *q;
            if (!gt) return NULL;
            if (gt[-1] == '/') { /* <tag/>: empty */
                *cend = gt + 1;
                return gt + 1;
            }
            /* the matching close tag: nested tags of the same name do not occur in ISMRMRD */
            for (q = gt + 1; q < end; q++) {
                if (*q == '<' && q[1] == '/' && (size_t)(end - q) > tl + 2 &&
                    !strncmp(q + 2, tag, tl) && q[2 + tl] == '>') {
                    *cend = q;
                    return gt + 1;
                }
            }
            return NULL;
        }
        p = lt + 1;
    }
    return NULL;
}

/* A number in <tag> inside [s, end); returns 0, or -1 if absent or not a number. */
static int xml_number(const char *s, const char *end, const char *tag, double *v)
{
    const char *ce, *b = xml_find(s, end, tag, &ce);
    char buf[64], *ep;
    size_t len;
    if (!b) return -1;
    while (b < ce && (*b == ' ' || *b == '\n' || *b == '\r' || *b == '\t')) b++;
    len = (size_t)(ce - b);
    if (len == 0 || len >= sizeof buf) return -1;
    memcpy(buf, b, len);
    buf[len] = '\0';
    *v = strtod(buf, &ep);
    while (*ep == ' ' || *ep == '\n' || *ep == '\r' || *ep == '\t') ep++;
    return *ep == '\0' && ep != buf ? 0 : -1;
}

/* The value of the userParameterString called `name`, copied into buf; 0 or -1 if absent. */
static int xml_user_string(const char *s, const char *end, const char *name, char *buf, size_t size)
{
    const char *ce, *b;
    while ((b = xml_find(s, end, "userParameterString", &ce)) != NULL) {
        const char *ne, *nb = xml_find(b, ce, "name", &ne);
        const char *ve, *vb = xml_find(b, ce, "value", &ve);
        if (nb && vb && (size_t)(ne - nb) == strlen(name) && !strncmp(nb, name, strlen(name))) {
            size_t len = (size_t)(ve - vb) < size - 1 ? (size_t)(ve - vb) : size - 1;
            memcpy(buf, vb, len);
            buf[len] = '\0';
            return 0;
        }
        s = ce;
    }
    return -1;
}

typedef struct ism_header {
    int dims, size;
    double fov[3];
    int normalized; /* trajectory in cycles per sample */
    char traj[32];
} ism_header;

static grove_status parse_header(grove_ctx *ctx, const char *fn, const char *path, const char *xml,
                                 ism_header *h)
{
    const char *end = xml + strlen(xml), *ee, *enc, *se, *sp, *me, *ms, *fe, *fs, *te, *tb;
    double mx, my, mz, f[3];
    char units[64];
    memset(h, 0, sizeof *h);
    enc = xml_find(xml, end, "encoding", &ee);
    if (!enc)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT, "%s: %s: the XML header has no <encoding>",
                            fn, path);
    sp = xml_find(enc, ee, "encodedSpace", &se);
    ms = sp ? xml_find(sp, se, "matrixSize", &me) : NULL;
    fs = sp ? xml_find(sp, se, "fieldOfView_mm", &fe) : NULL;
    if (!ms || !fs)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: %s: the XML header has no encodedSpace/%s", fn, path,
                            ms ? "fieldOfView_mm" : "matrixSize");
    if (xml_number(ms, me, "x", &mx) || xml_number(ms, me, "y", &my) ||
        xml_number(ms, me, "z", &mz))
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: %s: encodedSpace/matrixSize needs numbers x, y and z", fn, path);
    if (xml_number(fs, fe, "x", &f[0]) || xml_number(fs, fe, "y", &f[1]) ||
        xml_number(fs, fe, "z", &f[2]))
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: %s: encodedSpace/fieldOfView_mm needs numbers x, y and z", fn,
                            path);
    if (mx != floor(mx) || my != floor(my) || mz != floor(mz) || mx < 1 || my < 1 || mz < 1 ||
        mx > 1e6 || my > 1e6 || mz > 1e6)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: %s: encodedSpace/matrixSize %g x %g x %g is not a positive "
                            "integer size",
                            fn, path, mx, my, mz);
    h->dims = mz == 1 ? 2 : 3;
    if (mx != my || (h->dims == 3 && mz != mx))
        return grove__error(ctx, GROVE_ERR_UNSUPPORTED,
                            "%s: %s: matrix %g x %g x %g: only square (2-D) or cubic (3-D) "
                            "matrices are supported",
                            fn, path, mx, my, mz);
    if (mx > (h->dims == 2 ? ISM_MAX_SIZE_2D : ISM_MAX_SIZE_3D))
        return grove__error(ctx, GROVE_ERR_UNSUPPORTED,
                            "%s: %s: matrix size %g is above grove's limit of %d for %d-D images",
                            fn, path, mx, h->dims == 2 ? ISM_MAX_SIZE_2D : ISM_MAX_SIZE_3D,
                            h->dims);
    h->size = (int)mx;
    for (int a = 0; a < 3; a++) {
        if (!isfinite(f[a]) || (a < h->dims && !(f[a] > 0)))
            return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                "%s: %s: encodedSpace/fieldOfView_mm %c = %g is not a positive "
                                "length",
                                fn, path, "xyz"[a], f[a]);
        h->fov[a] = f[a];
    }
    tb = xml_find(enc, ee, "trajectory", &te);
    if (tb) {
        size_t len =
            (size_t)(te - tb) < sizeof h->traj - 1 ? (size_t)(te - tb) : sizeof h->traj - 1;
        memcpy(h->traj, tb, len);
    }
    if (xml_user_string(xml, end, "trajectoryUnits", units, sizeof units) == 0) {
        if (!strcmp(units, "normalized"))
            h->normalized = 1;
        else if (strcmp(units, "cycles/mm") != 0)
            return grove__error(ctx, GROVE_ERR_UNSUPPORTED,
                                "%s: %s: trajectoryUnits '%s' is not supported (grove reads "
                                "'cycles/mm' and 'normalized')",
                                fn, path, units);
    }
    return GROVE_OK;
}

/* ---- density weights when the file has none ---- */

/* A trajectory-independent estimate: each sample's share of the k-space area (volume) around it,
 * the area of a disc (ball) of radius one Cartesian cell divided by the number of samples in it,
 * counted through a grid of unit cells; divided by N like the phantom's weights. It needs no
 * knowledge of the trajectory and is exact for uniform densities; at the outer edge of the
 * coverage, where half the disc is empty, it overweights by up to 2 (docs/mri.md). */
static grove_status estimate_weights(grove_ctx *ctx, const char *fn, grove_mri_acq *a)
{
    size_t m = a->num_k, ncell = 1, *start = NULL, *order = NULL;
    int dims = a->dims;
    long half = 0, side;
    double kmax = 0, unit = dims == 2 ? 3.14159265358979323846 : 4.18879020478639098461;
    double n_vox = pow((double)a->size, dims);
    grove_status st = GROVE_OK;
    for (size_t j = 0; j < m; j++) {
        double v = fmax(fabs(a->kx[j]), fabs(a->ky[j]));
        if (dims == 3) v = fmax(v, fabs(a->kz[j]));
        kmax = fmax(kmax, v);
    }
    half = (long)ceil(kmax) + 1;
    side = 2 * half + 1;
    for (int d = 0; d < dims; d++) ncell *= (size_t)side;
    start = (size_t *)calloc(ncell + 1, sizeof(size_t));
    order = (size_t *)malloc((m ? m : 1) * sizeof(size_t));
    if (!start || !order) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                          "%s: out of memory estimating density weights (%zu cells)", fn, ncell);
        goto _end;
    }
#define CELL_OF(j, c)                                                                              \
    do {                                                                                           \
        long cx_ = (long)floor(a->kx[j]) + half, cy_ = (long)floor(a->ky[j]) + half;               \
        long cz_ = dims == 3 ? (long)floor(a->kz[j]) + half : 0;                                   \
        (c) = (size_t)cx_ + (size_t)side * ((size_t)cy_ + (size_t)side * (size_t)cz_);             \
    } while (0)
    for (size_t j = 0; j < m; j++) {
        size_t c;
        CELL_OF(j, c);
        start[c + 1]++;
    }
    for (size_t c = 0; c < ncell; c++) start[c + 1] += start[c];
    {
        size_t *fill = (size_t *)malloc(ncell * sizeof(size_t));
        if (!fill) {
            st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY,
                              "%s: out of memory estimating density weights", fn);
            goto _end;
        }
        memcpy(fill, start, ncell * sizeof(size_t));
        for (size_t j = 0; j < m; j++) {
            size_t c;
            CELL_OF(j, c);
            order[fill[c]++] = j;
        }
        free(fill);
    }
#pragma omp parallel for schedule(dynamic, 256) num_threads(grove__threads(ctx))
    for (size_t j = 0; j < m; j++) {
        long cx = (long)floor(a->kx[j]) + half, cy = (long)floor(a->ky[j]) + half;
        long cz = dims == 3 ? (long)floor(a->kz[j]) + half : 0;
        double kz = dims == 3 ? a->kz[j] : 0;
        size_t count = 0;
        for (long dz = dims == 3 ? -1 : 0; dz <= (dims == 3 ? 1 : 0); dz++)
            for (long dy = -1; dy <= 1; dy++)
                for (long dx = -1; dx <= 1; dx++) {
                    long x = cx + dx, y = cy + dy, z = cz + dz;
                    size_t c;
                    if (x < 0 || y < 0 || z < 0 || x >= side || y >= side || z >= side) continue;
                    c = (size_t)x + (size_t)side * ((size_t)y + (size_t)side * (size_t)z);
                    for (size_t q = start[c]; q < start[c + 1]; q++) {
                        size_t i = order[q];
                        double ex = a->kx[i] - a->kx[j], ey = a->ky[i] - a->ky[j];
                        double ez = dims == 3 ? a->kz[i] - kz : 0;
                        if (ex * ex + ey * ey + ez * ez <= 1.0) count++;
                    }
                }
        a->w[j] = (float)(unit / (double)count / n_vox);
    }
#undef CELL_OF
_end:
    free(start);
    free(order);
    return st;
}

/* ---- reading ---- */

/* The HDF5 signature sits at offset 0 or, after a user block, at 512, 1024, 2048, ... */
static grove_status check_hdf5(grove_ctx *ctx, const char *fn, const char *path)
{
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    unsigned char b[8];
    FILE *f = fopen(path, "rb");
    long off = 0;
    if (!f)
        return grove__error(ctx, GROVE_ERR_IO, "%s: cannot open %s: %s", fn, path, strerror(errno));
    for (;;) {
        if (fseek(f, off, SEEK_SET) != 0 || fread(b, 1, 8, f) != 8) break;
        if (!memcmp(b, sig, 8)) {
            fclose(f);
            return GROVE_OK;
        }
        off = off ? 2 * off : 512;
        if (off > (1L << 30)) break;
    }
    fclose(f);
    return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                        "%s: %s is not an HDF5 file (no HDF5 signature): not an ISMRMRD dataset",
                        fn, path);
}

typedef struct grow_arrays {
    float *kx, *ky, *kz, *dr, *di, *w;
    size_t n, cap;
} grow_arrays;

static int grow(grow_arrays *g, size_t need)
{
    float **arr[6] = {&g->kx, &g->ky, &g->kz, &g->dr, &g->di, &g->w};
    size_t cap = g->cap ? g->cap : 4096;
    if (need <= g->cap) return 0;
    while (cap < need) cap *= 2;
    for (int i = 0; i < 6; i++) {
        float *p = (float *)realloc(*arr[i], cap * sizeof(float));
        if (!p) return -1;
        *arr[i] = p;
    }
    g->cap = cap;
    return 0;
}

static grove_status read_acqs(grove_ctx *ctx, const char *fn, const char *path, ISMRMRD_Dataset *ds,
                              const ism_header *h, grow_arrays *g, int *has_w)
{
    uint32_t na = ismrmrd_get_number_of_acquisitions(ds);
    ISMRMRD_Acquisition acq;
    int tdims = -1, used = 0;
    double scale[3];
    static const unsigned skip_flags[] = {
        ISMRMRD_ACQ_IS_NOISE_MEASUREMENT, ISMRMRD_ACQ_IS_NAVIGATION_DATA,
        ISMRMRD_ACQ_IS_PHASECORR_DATA,    ISMRMRD_ACQ_IS_DUMMYSCAN_DATA,
        ISMRMRD_ACQ_IS_HPFEEDBACK_DATA,   ISMRMRD_ACQ_IS_RTFEEDBACK_DATA};
    if (na == 0)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT, "%s: %s: the dataset has no acquisitions", fn,
                            path);
    for (int a = 0; a < 3; a++) scale[a] = h->normalized ? (double)h->size : h->fov[a];
    for (uint32_t i = 0; i < na; i++) {
        grove_status st = GROVE_OK;
        size_t ns, pre, post, td, nt = 0;
        const float *traj, *data;
        int skip = 0;
        ismrmrd_init_acquisition(&acq);
        if (ismrmrd_read_acquisition(ds, i, &acq) != ISMRMRD_NOERROR) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: %s: acquisition %u cannot be read (damaged file?): %s", fn, path,
                              (unsigned)i, ism_last());
            goto _next;
        }
        for (size_t f = 0; f < sizeof skip_flags / sizeof skip_flags[0]; f++)
            if (ismrmrd_is_flag_set(acq.head.flags, skip_flags[f])) skip = 1;
        if (skip) goto _next;
        ns = acq.head.number_of_samples;
        td = acq.head.trajectory_dimensions;
        pre = acq.head.discard_pre;
        post = acq.head.discard_post;
        if (acq.head.active_channels > 1) {
            st = grove__error(ctx, GROVE_ERR_UNSUPPORTED,
                              "%s: %s: multi-coil data (%u channels) is not supported yet "
                              "(acquisition %u)",
                              fn, path, (unsigned)acq.head.active_channels, (unsigned)i);
            goto _next;
        }
        if (acq.head.active_channels == 0 && ns > 0) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: %s: acquisition %u has %zu samples but no active channel", fn,
                              path, (unsigned)i, ns);
            goto _next;
        }
        if (acq.head.encoding_space_ref != 0) {
            st = grove__error(ctx, GROVE_ERR_UNSUPPORTED,
                              "%s: %s: acquisition %u refers to encoding space %u; only one "
                              "encoding space is supported",
                              fn, path, (unsigned)i, (unsigned)acq.head.encoding_space_ref);
            goto _next;
        }
        if (td == 0) {
            st = grove__error(ctx, GROVE_ERR_UNSUPPORTED,
                              "%s: %s: acquisition %u has no trajectory: Cartesian data without "
                              "trajectories is not supported (grove reconstructs non-Cartesian "
                              "acquisitions)",
                              fn, path, (unsigned)i);
            goto _next;
        }
        if (td != (size_t)h->dims && td != (size_t)h->dims + 1) {
            st = grove__error(ctx, GROVE_ERR_UNSUPPORTED,
                              "%s: %s: acquisition %u has a %zu-dimensional trajectory; a %d-D "
                              "encoding needs %d (k) or %d (k and a density weight)",
                              fn, path, (unsigned)i, td, h->dims, h->dims, h->dims + 1);
            goto _next;
        }
        if (tdims >= 0 && (size_t)tdims != td) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: %s: acquisition %u has a %zu-dimensional trajectory, earlier "
                              "ones %d",
                              fn, path, (unsigned)i, td, tdims);
            goto _next;
        }
        tdims = (int)td;
        if (pre + post > ns) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: %s: acquisition %u discards %zu + %zu of its %zu samples", fn,
                              path, (unsigned)i, pre, post, ns);
            goto _next;
        }
        if (ns > 0 && (!acq.traj || !acq.data)) {
            st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                              "%s: %s: acquisition %u lacks its trajectory or data arrays", fn,
                              path, (unsigned)i);
            goto _next;
        }
        nt = ns - pre - post;
        if (grow(g, g->n + nt) != 0) {
            st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: %s: out of memory at %zu samples",
                              fn, path, g->n + nt);
            goto _next;
        }
        traj = acq.traj;
        data = (const float *)acq.data;
        for (size_t s = pre; s < ns - post; s++) {
            const float *t = traj + s * td;
            float v[8];
            for (size_t d = 0; d < td; d++) v[d] = t[d];
            v[td] = data[2 * s];
            v[td + 1] = data[2 * s + 1];
            for (size_t d = 0; d < td + 2; d++)
                if (!isfinite(v[d])) {
                    st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                      "%s: %s: acquisition %u, sample %zu: %s is not finite (%g)",
                                      fn, path, (unsigned)i, s,
                                      d < td ? "the trajectory" : "the data", (double)v[d]);
                    goto _next;
                }
            if (td == (size_t)h->dims + 1 && v[td - 1] < 0) {
                st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                  "%s: %s: acquisition %u, sample %zu: density weight %g < 0", fn,
                                  path, (unsigned)i, s, (double)v[td - 1]);
                goto _next;
            }
            g->kx[g->n] = (float)(v[0] * scale[0]);
            g->ky[g->n] = (float)(v[1] * scale[1]);
            g->kz[g->n] = h->dims == 3 ? (float)(v[2] * scale[2]) : 0.0f;
            g->w[g->n] = td == (size_t)h->dims + 1 ? v[td - 1] : 0.0f;
            g->dr[g->n] = v[td];
            g->di[g->n] = v[td + 1];
            if (!isfinite(g->kx[g->n]) || !isfinite(g->ky[g->n]) || !isfinite(g->kz[g->n])) {
                st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                                  "%s: %s: acquisition %u, sample %zu: k overflows", fn, path,
                                  (unsigned)i, s);
                goto _next;
            }
            g->n++;
        }
        used++;
    _next:
        ismrmrd_cleanup_acquisition(&acq);
        if (st != GROVE_OK) return st;
    }
    if (used == 0 || g->n == 0)
        return grove__error(ctx, GROVE_ERR_BAD_INPUT,
                            "%s: %s: no imaging samples (every acquisition is empty or a noise, "
                            "navigation or calibration scan)",
                            fn, path);
    *has_w = tdims == h->dims + 1;
    return GROVE_OK;
}

grove_status grove_mri_ismrmrd_read(grove_ctx *ctx, const char *path, grove_mri_acq **out)
{
    static const char fn[] = "grove_mri_ismrmrd_read";
    ISMRMRD_Dataset ds;
    ism_header h;
    grow_arrays g;
    grove_mri_acq *a = NULL;
    char *xml = NULL;
    int open = 0, has_w = 0;
    double kmax = 0;
    grove_status st = GROVE_OK;

    if (ctx) GROVE_TRY(grove__check_ctx(ctx));
    if (!out) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!path) return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: path is NULL", fn);
    memset(&g, 0, sizeof g);
    GROVE_TRY(check_hdf5(ctx, fn, path));
    ism_begin();
    if (ismrmrd_init_dataset(&ds, path, "/dataset") != ISMRMRD_NOERROR)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: %s: %s", fn, path, ism_last());
    open = 1; /* closing also frees what init allocated, even after a failed open */
    if (ismrmrd_open_dataset(&ds, false) != ISMRMRD_NOERROR) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: %s: cannot open as an ISMRMRD dataset (truncated or damaged HDF5 "
                          "file?): %s",
                          fn, path, ism_last());
        goto _end;
    }
    xml = ismrmrd_read_header(&ds);
    if (!xml) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: %s: no XML header (/dataset/xml): not an ISMRMRD dataset, or a "
                          "damaged one",
                          fn, path);
        goto _end;
    }
    GROVE_TRY_END(st, parse_header(ctx, fn, path, xml, &h));
    GROVE_TRY_END(st, read_acqs(ctx, fn, path, &ds, &h, &g, &has_w));
    for (size_t j = 0; j < g.n; j++) {
        kmax = fmax(kmax, fmax(fabs(g.kx[j]), fabs(g.ky[j])));
        kmax = fmax(kmax, fabs(g.kz[j]));
    }
    /* the samples that matter have |k| <= size/2; far beyond that the units must be wrong */
    if (kmax > 4.0 * h.size) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: %s: the trajectory reaches |k| = %g cycles per field of view, far "
                          "beyond the %d-voxel matrix's %g: are the trajectory units %s?",
                          fn, path, kmax, h.size, 0.5 * h.size,
                          h.normalized ? "normalized" : "cycles/mm");
        goto _end;
    }
    a = (grove_mri_acq *)calloc(1, sizeof *a);
    if (!a) {
        st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto _end;
    }
    a->dims = h.dims;
    a->size = h.size;
    a->num_k = g.n;
    a->kx = g.kx;
    a->ky = g.ky;
    a->d_r = g.dr;
    a->d_i = g.di;
    a->w = g.w;
    if (h.dims == 3)
        a->kz = g.kz;
    else
        free(g.kz);
    memset(&g, 0, sizeof g);
    if (!has_w) GROVE_TRY_END(st, estimate_weights(ctx, fn, a));
    *out = a;
    a = NULL;
_end:
    free(xml);
    if (open) ismrmrd_close_dataset(&ds);
    free(g.kx);
    free(g.ky);
    free(g.kz);
    free(g.dr);
    free(g.di);
    free(g.w);
    grove_mri_acq_free(a);
    return st;
}

/* ---- writing ---- */

static grove_status write_dataset(grove_ctx *ctx, const char *fn, const char *path, const char *tmp,
                                  const grove_mri_acq *a)
{
    ISMRMRD_Dataset ds;
    ISMRMRD_Acquisition acq;
    char xml[2048];
    int dims = a->dims, td = a->dims + 1;
    double fov[3] = {ISM_FOV_MM, ISM_FOV_MM, dims == 3 ? ISM_FOV_MM : ISM_SLICE_MM};
    size_t j0 = 0, count = 0;
    grove_status st = GROVE_OK;
    double jump = 0.25 * a->size;

    snprintf(xml, sizeof xml,
             "<?xml version=\"1.0\"?>\n"
             "<ismrmrdHeader xmlns=\"http://www.ismrm.org/ISMRMRD\">\n"
             "  <acquisitionSystemInformation>\n"
             "    <receiverChannels>1</receiverChannels>\n"
             "  </acquisitionSystemInformation>\n"
             "  <encoding>\n"
             "    <encodedSpace>\n"
             "      <matrixSize><x>%d</x><y>%d</y><z>%d</z></matrixSize>\n"
             "      <fieldOfView_mm><x>%g</x><y>%g</y><z>%g</z></fieldOfView_mm>\n"
             "    </encodedSpace>\n"
             "    <reconSpace>\n"
             "      <matrixSize><x>%d</x><y>%d</y><z>%d</z></matrixSize>\n"
             "      <fieldOfView_mm><x>%g</x><y>%g</y><z>%g</z></fieldOfView_mm>\n"
             "    </reconSpace>\n"
             "    <encodingLimits></encodingLimits>\n"
             "    <trajectory>other</trajectory>\n"
             "  </encoding>\n"
             "  <userParameters>\n"
             "    <userParameterString><name>trajectoryUnits</name>"
             "<value>cycles/mm</value></userParameterString>\n"
             "    <userParameterString><name>grove.densityWeights</name>"
             "<value>last trajectory dimension</value></userParameterString>\n"
             "  </userParameters>\n"
             "</ismrmrdHeader>\n",
             a->size, a->size, dims == 3 ? a->size : 1, fov[0], fov[1], fov[2], a->size, a->size,
             dims == 3 ? a->size : 1, fov[0], fov[1], fov[2]);

    ism_begin();
    if (ismrmrd_init_dataset(&ds, tmp, "/dataset") != ISMRMRD_NOERROR)
        return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: %s: %s", fn, path, ism_last());
    if (ismrmrd_open_dataset(&ds, true) != ISMRMRD_NOERROR) {
        st = grove__error(ctx, GROVE_ERR_IO, "%s: %s: cannot create the HDF5 file %s: %s", fn, path,
                          tmp, ism_last());
        ismrmrd_close_dataset(&ds); /* frees what init allocated */
        return st;
    }
    if (ismrmrd_write_header(&ds, xml) != ISMRMRD_NOERROR) {
        st = grove__error(ctx, GROVE_ERR_IO, "%s: %s: cannot write the XML header: %s", fn, path,
                          ism_last());
        goto _end;
    }
    /* one acquisition per readout: a readout moves through k-space in small steps, so a jump of
     * more than a quarter of k-space starts the next one (and 65535 samples, the format's
     * limit, end one) */
    while (j0 < a->num_k) {
        size_t j1 = j0 + 1;
        while (j1 < a->num_k && j1 - j0 < ISM_MAX_READOUT) {
            double dx = a->kx[j1] - a->kx[j1 - 1], dy = a->ky[j1] - a->ky[j1 - 1];
            double dz = dims == 3 ? a->kz[j1] - a->kz[j1 - 1] : 0;
            if (dx * dx + dy * dy + dz * dz > jump * jump) break;
            j1++;
        }
        ismrmrd_init_acquisition(&acq);
        acq.head.number_of_samples = (uint16_t)(j1 - j0);
        acq.head.active_channels = 1;
        acq.head.available_channels = 1;
        acq.head.trajectory_dimensions = (uint16_t)td;
        acq.head.scan_counter = (uint32_t)count;
        acq.head.idx.kspace_encode_step_1 = (uint16_t)(count & 0xffff);
        ismrmrd_set_channel_on(acq.head.channel_mask, 0);
        if (j1 == a->num_k) ismrmrd_set_flag(&acq.head.flags, ISMRMRD_ACQ_LAST_IN_MEASUREMENT);
        if (ismrmrd_make_consistent_acquisition(&acq) != ISMRMRD_NOERROR) {
            ismrmrd_cleanup_acquisition(&acq);
            st = grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: %s: out of memory: %s", fn, path,
                              ism_last());
            goto _end;
        }
        for (size_t j = j0; j < j1; j++) {
            float *t = acq.traj + (j - j0) * (size_t)td;
            float *d = (float *)acq.data + 2 * (j - j0);
            t[0] = (float)(a->kx[j] / fov[0]);
            t[1] = (float)(a->ky[j] / fov[1]);
            if (dims == 3) t[2] = (float)(a->kz[j] / fov[2]);
            t[td - 1] = a->w[j];
            d[0] = a->d_r[j];
            d[1] = a->d_i[j];
        }
        if (ismrmrd_append_acquisition(&ds, &acq) != ISMRMRD_NOERROR) {
            ismrmrd_cleanup_acquisition(&acq);
            st = grove__error(ctx, GROVE_ERR_IO, "%s: %s: cannot write acquisition %zu: %s", fn,
                              path, count, ism_last());
            goto _end;
        }
        ismrmrd_cleanup_acquisition(&acq);
        count++;
        j0 = j1;
    }
_end:
    if (ismrmrd_close_dataset(&ds) != ISMRMRD_NOERROR && st == GROVE_OK)
        st = grove__error(ctx, GROVE_ERR_IO, "%s: %s: cannot close the HDF5 file: %s", fn, path,
                          ism_last());
    return st;
}

grove_status grove_mri_ismrmrd_write(grove_ctx *ctx, const char *path, const grove_mri_acq *a)
{
    static const char fn[] = "grove_mri_ismrmrd_write";
    char *tmp = NULL;
    FILE *f = NULL;
    grove_status st;

    if (ctx) GROVE_TRY(grove__check_ctx(ctx));
    if (!path || !a)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                            path ? "acq" : "path");
    if (a->dims != 2 && a->dims != 3)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: acq->dims must be 2 or 3, got %d", fn,
                            a->dims);
    if (a->size < 1 || a->size > (a->dims == 2 ? ISM_MAX_SIZE_2D : ISM_MAX_SIZE_3D))
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: acq->size must be 1..%d, got %d", fn,
                            a->dims == 2 ? ISM_MAX_SIZE_2D : ISM_MAX_SIZE_3D, a->size);
    if (a->num_k == 0)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: acq has no samples", fn);
    if (!a->kx || !a->ky || (a->dims == 3 && !a->kz) || !a->d_r || !a->d_i || !a->w)
        return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: an array of acq is NULL", fn);
    for (size_t j = 0; j < a->num_k; j++) {
        float v[6] = {a->kx[j],  a->ky[j],  a->dims == 3 ? a->kz[j] : 0,
                      a->d_r[j], a->d_i[j], a->w[j]};
        for (int q = 0; q < 6; q++)
            if (!isfinite(v[q]))
                return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: acq->%s[%zu] is not finite",
                                    fn, (const char *[]){"kx", "ky", "kz", "d_r", "d_i", "w"}[q],
                                    j);
        if (v[5] < 0)
            return grove__error(ctx, GROVE_ERR_INVALID_ARG, "%s: acq->w[%zu] = %g < 0", fn, j,
                                (double)v[5]);
    }
    /* a fresh temporary name beside path; HDF5 creates the file itself, so the placeholder goes */
    GROVE_TRY(grove__wfile_open(ctx, path, &tmp, &f));
    fclose(f);
    unlink(tmp);
    st = write_dataset(ctx, fn, path, tmp, a);
    if (st != GROVE_OK) {
        unlink(tmp);
        free(tmp);
        return st;
    }
    f = fopen(tmp, "rb+");
    if (!f) {
        st =
            grove__error(ctx, GROVE_ERR_IO, "%s: cannot reopen %s: %s", path, tmp, strerror(errno));
        unlink(tmp);
        free(tmp);
        return st;
    }
    return grove__wfile_commit(ctx, path, tmp, f, 0);
}

#endif /* GROVE_HAVE_ISMRMRD */
