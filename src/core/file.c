/*
 * file.c - writing a result file so that a failure never leaves a partial one: the data go to a
 * new temporary file beside the destination, which is renamed over it only once everything is
 * written and on disk.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

grove_status grove__wfile_open(grove_ctx *ctx, const char *path, char **tmp_out, FILE **f_out)
{
    static atomic_uint counter;
    size_t len = strlen(path) + 64;
    char *tmp = (char *)malloc(len);
    int fd = -1, tries;
    if (!tmp) return grove__error(ctx, GROVE_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    /* Beside `path`, so that rename() stays within one file system; O_EXCL with a per-process
     * counter, so that concurrent writers never share a temporary file; mode 0666 less the
     * umask, as a plain fopen would create it. */
    for (tries = 0; tries < 100; tries++) {
        snprintf(tmp, len, "%s.grove-tmp.%ld.%u", path, (long)getpid(),
                 atomic_fetch_add(&counter, 1u));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) break;
    }
    if (fd < 0) {
        grove_status s = grove__error(ctx, GROVE_ERR_IO, "%s: cannot create temporary file %s: %s",
                                      path, tmp, strerror(errno));
        free(tmp);
        return s;
    }
    *f_out = fdopen(fd, "wb");
    if (!*f_out) {
        grove_status s = grove__error(ctx, GROVE_ERR_IO, "%s: cannot open temporary file %s: %s",
                                      path, tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return s;
    }
    *tmp_out = tmp;
    return GROVE_OK;
}

grove_status grove__wfile_commit(grove_ctx *ctx, const char *path, char *tmp, FILE *f, int err)
{
    grove_status st = GROVE_OK;
    errno = 0;
    if (!err && fflush(f) != 0) err = errno ? errno : EIO;
    /* The data must be on disk before the rename makes them visible under `path`. */
    if (!err && fsync(fileno(f)) != 0 && errno != EINVAL) err = errno;
    if (fclose(f) != 0 && !err) err = errno ? errno : EIO;
    if (err) {
        st = grove__error(ctx, GROVE_ERR_IO, "%s: write error: %s", path, strerror(err));
        unlink(tmp);
    } else if (rename(tmp, path) != 0) {
        st = grove__error(ctx, GROVE_ERR_IO, "%s: cannot rename %s to it: %s", path, tmp,
                          strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return st;
}
