/* sudoku.h — 9×9 Sudoku: an exact bitset solver (naked + hidden singles, then depth-first
 * search on the cell with fewest candidates), a generator of puzzles with exactly one
 * solution, and the reference's validity-preserving shuffle used for augmentation.
 * Grids are 81 bytes, row-major, 0 = blank, 1..9 = digit. */
#ifndef TRM_SUDOKU_H
#define TRM_SUDOKU_H
#include <stdint.h>

#include "util/util.h"

/* Counts the solutions of grid, stopping at `limit` (>= 1). The first solution found is
 * copied to first_solution (may be NULL); *effort (may be NULL) receives the number of
 * search nodes visited, the puzzle's "rating". A grid whose clues already conflict has 0. */
int sudoku_count_solutions(const uint8_t grid[81], int limit, uint8_t *first_solution, uint64_t *effort);

/* 1 if sol is a completed grid (every row, column and box a permutation of 1..9). */
int sudoku_is_complete_valid(const uint8_t sol[81]);
/* 1 if every clue of q (non-zero) equals the same cell of sol. */
int sudoku_agrees(const uint8_t q[81], const uint8_t sol[81]);

/* A uniformly random-looking completed grid: the solver run on an empty grid trying the
 * digits of each cell in a random order. */
void sudoku_random_full_grid(trm_rng *r, uint8_t out[81]);

typedef struct {
    int min_clues, max_clues; /* stop removing at min_clues; reject puzzles above max_clues */
    uint64_t min_rating;      /* reject puzzles whose rating (search nodes) is lower */
    int max_attempts;         /* give up after this many rejected puzzles (0: 100000) */
} sudoku_gen_opts;

/* One puzzle with exactly one solution. Returns 0, or -1 when max_attempts candidates in a
 * row were rejected (bounds that cannot be met). *attempts (may be NULL) = candidates made. */
int sudoku_generate(trm_rng *r, const sudoku_gen_opts *o, uint8_t q[81], uint8_t sol[81], uint64_t *rating,
                    int *attempts);

/* The rating of a puzzle: search nodes of a fixed deterministic solve to its first solution. */
uint64_t sudoku_rating(const uint8_t q[81]);

/* The reference's shuffle_sudoku: digit relabelling (0 fixed), transpose with p=1/2, band
 * and row-in-band permutation, stack and column-in-stack permutation, applied identically
 * to the question and the answer. Draws from r in the reference's order. */
void sudoku_shuffle(trm_rng *r, const uint8_t q[81], const uint8_t a[81], uint8_t q_out[81], uint8_t a_out[81]);

#endif
