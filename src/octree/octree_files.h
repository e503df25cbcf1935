/*
 * octree_files.h - what the octree's file code shares (not installed; C only): the layout
 * constants of grove.octree (octree_potree.c writes it, octree_load.c reads it) and of
 * hierarchy.bin and octree.bin (octree_potree.c writes them, octree_export.c reads them), and
 * two small helpers defined in octree_potree.c.
 */
#ifndef GROVE_OCTREE_FILES_H
#define GROVE_OCTREE_FILES_H

#include <stddef.h>

#define GROVE__OT_MAGIC "GROVE-OT"
#define GROVE__OT_VERSION 1u
#define GROVE__OT_HEADER 128u
#define GROVE__OT_NODE 48u
/* hierarchy.bin: type, childMask, numPoints, byteOffset, byteSize */
#define GROVE__OT_PT_RECORD 22u

/* How octree.bin stores a point: int32 positions (coordinate = position * scale + offset),
 * then the attributes present; bpp bytes in all. */
typedef struct grove__ot_layout {
    double scale[3], offset[3];
    int rgb, intensity;
    size_t bpp; /* bytes per point record in octree.bin */
} grove__ot_layout;

/* dir and name joined by one '/' (none added when dir ends in one); malloc'd, the caller frees
 * it. NULL when out of memory. */
char *grove__ot_join(const char *dir, const char *name);

/* The number of children in a child mask. */
int grove__ot_popcount8(unsigned m);

#endif /* GROVE_OCTREE_FILES_H */
