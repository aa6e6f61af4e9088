/* build_sudoku4.h — the small 4×4 Sudoku dataset builder (`trm data sudoku4`). */
#ifndef TRM_BUILD_SUDOKU4_H
#define TRM_BUILD_SUDOKU4_H
#include <stdint.h>

#include "util/util.h"

typedef struct {
    const char *out;
    int64_t n_train, n_test;
    int min_clues, max_clues;
    uint64_t seed;
    int force;
} trm_sudoku4_opts;

int trm_build_sudoku4(const trm_sudoku4_opts *o, trm_err *e);

#endif
