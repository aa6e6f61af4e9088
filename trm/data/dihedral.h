/* dihedral.h — the eight dihedral transforms of a grid exactly as the reference's
 * dataset/common.py (numpy rot90 is counter-clockwise), and their inverses. Shared by the
 * Maze and ARC builders and the ARC evaluator. */
#ifndef TRM_DIHEDRAL_H
#define TRM_DIHEDRAL_H
#include <stdint.h>

/* tid: 0 identity, 1 rot90, 2 rot180, 3 rot270, 4 fliplr, 5 flipud, 6 transpose,
 * 7 fliplr(rot90) (anti-diagonal). out must not alias in; transposing transforms swap the
 * dimensions (*out_rows, *out_cols may be NULL). */
void trm_dihedral(const uint8_t *in, int rows, int cols, int tid, uint8_t *out, int *out_rows, int *out_cols);
/* The transform that undoes tid. */
int trm_dihedral_inverse(int tid);

#endif
