/* build_sudoku.h — `trm data sudoku` (the reference's build_sudoku_dataset.py: CSV →
 * dataset with shuffle augmentation) and `trm data sudoku-gen` (a CSV of generated puzzles
 * with exactly one solution, in the same source,question,answer,rating format). */
#ifndef TRM_BUILD_SUDOKU_H
#define TRM_BUILD_SUDOKU_H
#include <stdint.h>

#include "util/util.h"

/* Rows of one CSV file, 0 = blank, 1..9 = digit, 81 bytes per grid. */
typedef struct {
    int64_t n;
    uint8_t *q, *a;
    int64_t *rating;
} trm_sudoku_rows;

/* Reads and validates a source,question,answer,rating CSV; keeps rows with
 * rating >= min_difficulty when has_min_difficulty. Errors name FILE:LINE. */
int trm_sudoku_read_csv(const char *path, int has_min_difficulty, int64_t min_difficulty, trm_sudoku_rows *rows,
                        trm_err *e);
void trm_sudoku_rows_free(trm_sudoku_rows *rows);

typedef struct {
    const char *csv_dir, *out;
    int64_t subsample_size; /* < 0: keep all training rows */
    int64_t num_aug;
    int has_min_difficulty;
    int64_t min_difficulty;
    uint64_t seed;
    int force;
    int progress; /* show progress on stderr for long builds */
} trm_sudoku_opts;

int trm_build_sudoku(const trm_sudoku_opts *o, trm_err *e);

typedef struct {
    const char *out;
    int64_t count;
    uint64_t seed;
    int min_clues, max_clues;
    uint64_t min_rating;
    int force;
    int progress;
} trm_sudoku_gen_cli_opts;

int trm_sudoku_gen_csv(const trm_sudoku_gen_cli_opts *o, trm_err *e);

/* The command entries of `trm data sudoku` / `trm data sudoku-gen` (argv after the name). */
int trm_data_sudoku(int argc, char **argv, trm_err *e);
int trm_data_sudoku_gen(int argc, char **argv, trm_err *e);

#endif
