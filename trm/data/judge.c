/* judge.c — see judge.h. The Sudoku rules are checked for any side with square boxes;
 * whether a 9×9 puzzle has a solution is sudoku.c's exact solver's answer, a 4×4 one is
 * searched here (at most 4^16 leaves, pruned by the rules: microseconds). */
#include "judge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "maze.h"
#include "sudoku.h"

const char *trm_verdict_name(trm_verdict v) {
    static const char *const names[] = {NULL, "solved", "contradicts_given", "invalid", "no_solution"};
    return names[v];
}

static int box_side(int n) { return n == 4 ? 2 : n == 9 ? 3 : 0; }

/* The first unit (row, column, box) of g in which a digit repeats; cells 0 are ignored, and
 * with `complete` a blank or out-of-range cell counts as a break too. 0 when none. */
static int first_break(int n, const uint8_t *g, int complete, char *why, size_t len) {
    int b = box_side(n);
    for (int u = 0; u < 3 * n; u++) {
        unsigned seen = 0;
        for (int k = 0; k < n; k++) {
            int i = u < n ? u * n + k : u < 2 * n ? k * n + (u - n)
                    : ((u - 2 * n) / b * b + k / b) * n + (u - 2 * n) % b * b + k % b;
            int v = g[i];
            if (v == 0 && !complete) continue;
            if (v < 1 || v > n) {
                snprintf(why, len, "row %d, column %d is blank", i / n + 1, i % n + 1);
                return 1;
            }
            if (seen >> v & 1u) {
                static const char *const kind[] = {"row", "column", "box"};
                snprintf(why, len, "%s %d holds %d twice", kind[u / n], u % n + 1, v);
                return 1;
            }
            seen |= 1u << v;
        }
    }
    return 0;
}

/* Depth-first: 1 when the blanks of g can be filled by the rules (g is restored). */
static int fillable(int n, uint8_t *g) {
    int at = -1;
    for (int i = 0; i < n * n && at < 0; i++)
        if (!g[i]) at = i;
    if (at < 0) return 1;
    char ignore[64];
    for (int v = 1; v <= n; v++) {
        g[at] = (uint8_t)v;
        if (!first_break(n, g, 0, ignore, sizeof ignore) && fillable(n, g)) {
            g[at] = 0;
            return 1;
        }
    }
    g[at] = 0;
    return 0;
}

static int has_solution(int n, const uint8_t *q) {
    uint8_t g[81];
    memcpy(g, q, (size_t)n * n);
    if (n == 9) return sudoku_count_solutions(g, 1, NULL, NULL) > 0;
    return fillable(n, g);
}

trm_verdict trm_judge_sudoku(int n, const uint8_t *q, const uint8_t *pred, char *why, size_t len) {
    if (!box_side(n)) return TRM_VERDICT_NONE;
    char rule[96];
    if (first_break(n, q, 0, rule, sizeof rule)) {
        snprintf(why, len, "the puzzle has no solution: its %s", rule);
        return TRM_VERDICT_NO_SOLUTION;
    }
    if (!has_solution(n, q)) {
        snprintf(why, len, "the puzzle has no solution: no grid completes its givens");
        return TRM_VERDICT_NO_SOLUTION;
    }
    for (int i = 0; i < n * n; i++)
        if (q[i] && pred[i] != q[i]) {
            snprintf(why, len, "the prediction puts %d at row %d, column %d, where the puzzle gives %d", pred[i],
                     i / n + 1, i % n + 1, q[i]);
            return TRM_VERDICT_CONTRADICTS;
        }
    if (first_break(n, pred, 1, rule, sizeof rule)) {
        snprintf(why, len, "the prediction breaks the rules: %s", rule);
        return TRM_VERDICT_INVALID;
    }
    snprintf(why, len, "every row, column and box holds 1..%d once", n);
    return TRM_VERDICT_SOLVED;
}

static int find_cell(const char *g, int nn, char c) {
    const char *p = memchr(g, c, (size_t)nn);
    return p ? (int)(p - g) : -1;
}

/* BFS from S over the cells `ok` accepts; 1 when G is reached. */
static int joined(int n, const char *g, const char *ok) {
    int nn = n * n, s = find_cell(g, nn, 'S'), goal = find_cell(g, nn, 'G');
    if (s < 0 || goal < 0) return 0;
    char *walk = xmalloc((size_t)nn);
    for (int i = 0; i < nn; i++) walk[i] = strchr(ok, g[i]) ? ' ' : '#';
    int *dist = xmalloc(sizeof(int) * (size_t)nn), *queue = xmalloc(sizeof(int) * (size_t)nn);
    uint32_t *count = xmalloc(sizeof(uint32_t) * (size_t)nn);
    trm_maze_bfs(walk, n, s, dist, count, queue);
    int reached = dist[goal] >= 0;
    free(walk), free(dist), free(queue), free(count);
    return reached;
}

trm_verdict trm_judge_maze(int n, const char *q, const char *pred, char *why, size_t len) {
    int nn = n * n;
    if (find_cell(q, nn, 'S') < 0 || find_cell(q, nn, 'G') < 0 || !joined(n, q, " SGo")) {
        snprintf(why, len, "the puzzle has no solution: no open way joins S and G");
        return TRM_VERDICT_NO_SOLUTION;
    }
    trm_err e;
    if (trm_maze_check_answer(q, pred, nn, n, &e)) {
        snprintf(why, len, "the prediction changes a given: %s", e.msg);
        return TRM_VERDICT_CONTRADICTS;
    }
    if (!joined(n, pred, "SGo")) {
        snprintf(why, len, "the prediction's path (o) does not join S and G");
        return TRM_VERDICT_INVALID;
    }
    snprintf(why, len, "the path joins S and G");
    return TRM_VERDICT_SOLVED;
}
