/*
 * binfile.c - little-endian words for grove's own binary files (the tree files of the quadtree
 * and k-d tree modules): byte order, field encoding, and whole arrays read and written with the
 * byte swap done only on big-endian hosts.
 */
#define _POSIX_C_SOURCE 200809L /* fileno, fstat */

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "core.h"

int grove__host_is_le(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

void grove__swap_words(void *p, size_t count, size_t w)
{
    unsigned char *b = (unsigned char *)p;
    for (size_t i = 0; i < count; i++, b += w)
        for (size_t j = 0; j < w / 2; j++) {
            unsigned char c = b[j];
            b[j] = b[w - 1 - j];
            b[w - 1 - j] = c;
        }
}

void grove__put32(unsigned char *b, uint32_t v)
{
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
}

void grove__put64(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
}

uint32_t grove__get32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

uint64_t grove__get64(const unsigned char *b)
{
    return grove__get32(b) | (uint64_t)grove__get32(b + 4) << 32;
}

int grove__write_words(FILE *f, const void *p, size_t count, size_t w, int le)
{
    unsigned char buf[1 << 14];
    const unsigned char *s = (const unsigned char *)p;
    errno = 0;
    if (count == 0) return 0;
    if (le) return fwrite(p, w, count, f) == count ? 0 : (errno ? errno : EIO);
    while (count > 0) {
        size_t m = sizeof buf / w < count ? sizeof buf / w : count;
        memcpy(buf, s, m * w);
        grove__swap_words(buf, m, w);
        if (fwrite(buf, w, m, f) != m) return errno ? errno : EIO;
        s += m * w;
        count -= m;
    }
    return 0;
}

grove_status grove__read_words(grove_ctx *ctx, const char *path, FILE *f, void *p, size_t count,
                               size_t w, int le)
{
    if (count == 0) return GROVE_OK;
    if (fread(p, w, count, f) != count) {
        if (ferror(f))
            return grove__error(ctx, GROVE_ERR_IO, "%s: read error: %s", path, strerror(errno));
        return grove__error(ctx, GROVE_ERR_BAD_INPUT, "%s: truncated (the file shrank while read)",
                            path);
    }
    if (!le) grove__swap_words(p, count, w);
    return GROVE_OK;
}

grove_status grove__binfile_open(grove_ctx *ctx, const char *path, const char *magic,
                                 const char *kind, uint32_t version, unsigned char *h,
                                 size_t hdr_len, FILE **f, uint64_t *size)
{
    grove_status st = GROVE_OK;
    struct stat sb;
    size_t got;
    FILE *fp = fopen(path, "rb");
    *f = NULL;
    if (!fp) return grove__error(ctx, GROVE_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fileno(fp), &sb) != 0) {
        st = grove__error(ctx, GROVE_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        st = grove__error(ctx, GROVE_ERR_IO, "%s: not a regular file", path);
    } else if ((got = fread(h, 1, hdr_len, fp)) < hdr_len && ferror(fp)) {
        st = grove__error(ctx, GROVE_ERR_IO, "%s: read error: %s", path, strerror(errno));
    } else if (got < 8 || memcmp(h, magic, 8) != 0) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: not a grove %s file (it does not start with \"%s\")", path, kind,
                          magic);
    } else if (got < hdr_len) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: truncated header: %zu bytes, the header has %zu", path, got,
                          hdr_len);
    } else if (grove__get32(h + 8) != version) {
        st = grove__error(ctx, GROVE_ERR_BAD_INPUT,
                          "%s: unsupported %s file version %u (this build reads version %u)", path,
                          kind, grove__get32(h + 8), version);
    }
    if (st != GROVE_OK) {
        fclose(fp);
        return st;
    }
    *f = fp;
    *size = (uint64_t)sb.st_size;
    return GROVE_OK;
}
