/* judge.h — what a model's answer to a typed puzzle is worth (`trm generate --input`):
 * solved, a prediction that overwrites a given, one that breaks the puzzle's rules, or a
 * puzzle that has no solution at all. Sudoku of side 4 or 9 and mazes; other puzzles are not
 * judged. */
#ifndef TRM_JUDGE_H
#define TRM_JUDGE_H
#include <stddef.h>
#include <stdint.h>

typedef enum {
    TRM_VERDICT_NONE,        /* not a puzzle trm knows the rules of */
    TRM_VERDICT_SOLVED,      /* the prediction keeps every given and obeys the rules */
    TRM_VERDICT_CONTRADICTS, /* the prediction changes a given */
    TRM_VERDICT_INVALID,     /* keeps the givens but breaks a rule */
    TRM_VERDICT_NO_SOLUTION, /* the puzzle itself cannot be solved */
} trm_verdict;

/* "solved", "contradicts_given", "invalid", "no_solution" (NULL for TRM_VERDICT_NONE). */
const char *trm_verdict_name(trm_verdict v);

/* An n×n Sudoku (n = 4 or 9), cells 0 = blank, 1..n; why: one sentence. */
trm_verdict trm_judge_sudoku(int n, const uint8_t *q, const uint8_t *pred, char *why, size_t len);
/* An n×n maze over "# SGo": solved when the 'o' cells join S to G through open cells. */
trm_verdict trm_judge_maze(int n, const char *q, const char *pred, char *why, size_t len);

#endif
