/*
 * tu_files.h - a scratch directory for the tests that write files (test_io, test_las): the
 * program fills `dir` (mkdtemp) and removes it with remove_dir() at the end.
 */
#ifndef GROVE_TU_FILES_H
#define GROVE_TU_FILES_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[512];

/* dir/name, in one of four rotating buffers (so that a call may take two of them). */
static inline const char *path_of(const char *name)
{
    static char bufs[4][1024];
    static int k;
    char *b = bufs[k++ & 3];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

/* Writes len bytes to dir/name; a failure ends the program (exit 2: the test cannot run). */
static inline void put_file(const char *name, const void *data, size_t len)
{
    FILE *f = fopen(path_of(name), "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
        fprintf(stderr, "cannot write the test file %s\n", path_of(name));
        exit(2);
    }
}

/* Removes the files of dir (not subdirectories) and dir itself. */
static inline void remove_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d) return;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) unlink(path_of(e->d_name));
    closedir(d);
    rmdir(dir);
}

#endif /* GROVE_TU_FILES_H */
