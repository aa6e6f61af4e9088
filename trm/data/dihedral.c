/* dihedral.c — see dihedral.h. Each transform is written as the source index of output
 * cell (i, j), following numpy's definitions. */
#include "dihedral.h"

static int swaps_dims(int tid) { return tid == 1 || tid == 3 || tid == 6 || tid == 7; }

void trm_dihedral(const uint8_t *in, int rows, int cols, int tid, uint8_t *out, int *out_rows, int *out_cols) {
    int orows = swaps_dims(tid) ? cols : rows, ocols = swaps_dims(tid) ? rows : cols;
    for (int i = 0; i < orows; i++)
        for (int j = 0; j < ocols; j++) {
            int r, c;
            switch (tid) {
            case 1: r = j, c = cols - 1 - i; break;               /* rot90 (counter-clockwise) */
            case 2: r = rows - 1 - i, c = cols - 1 - j; break;    /* rot180 */
            case 3: r = rows - 1 - j, c = i; break;               /* rot270 */
            case 4: r = i, c = cols - 1 - j; break;               /* fliplr */
            case 5: r = rows - 1 - i, c = j; break;               /* flipud */
            case 6: r = j, c = i; break;                          /* transpose */
            case 7: r = rows - 1 - j, c = cols - 1 - i; break;    /* fliplr(rot90): anti-diagonal */
            default: r = i, c = j; break;                         /* identity */
            }
            out[i * ocols + j] = in[r * cols + c];
        }
    if (out_rows) *out_rows = orows;
    if (out_cols) *out_cols = ocols;
}

int trm_dihedral_inverse(int tid) {
    static const int inv[8] = {0, 3, 2, 1, 4, 5, 6, 7};
    return tid >= 0 && tid < 8 ? inv[tid] : 0;
}
