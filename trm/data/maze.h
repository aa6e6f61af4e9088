/* maze.h — mazes as n×n character grids over "# SGo" ('#' wall, ' ' open, 'S' start,
 * 'G' goal, 'o' a cell of the solution path): breadth-first search with shortest-path
 * counting, the question/answer consistency rule of the Maze-Hard CSV, and a generator of
 * mazes whose shortest S→G path is unique and long. */
#ifndef TRM_MAZE_H
#define TRM_MAZE_H
#include <stdint.h>

#include "util/util.h"

#define TRM_MAZE_CHARSET "# SGo"
#define TRM_MAZE_MIN_SIZE 5
#define TRM_MAZE_MAX_SIZE 255

/* Token of a maze character: index in TRM_MAZE_CHARSET + 1 (PAD is 0); -1 for any other. */
int trm_maze_token(char c);

/* BFS over the non-wall cells of an n×n grid (4-neighbourhood) from cell src. dist[i] is
 * the number of moves to cell i (-1 when unreachable); count[i] the number of distinct
 * shortest paths, saturating at UINT32_MAX. queue is scratch space of n*n ints. */
void trm_maze_bfs(const char *grid, int n, int src, int *dist, uint32_t *count, int *queue);

/* 0 when answer equals question except that some ' ' cells became 'o'; else -1 with the
 * first differing cell (row, column, both characters) in e. len = n*n characters each. */
int trm_maze_check_answer(const char *question, const char *answer, int len, int n, trm_err *e);

/* Default --min-path-len for a size: 110 at 30×30 (Maze-Hard), scaled by (size/30)². */
int trm_maze_default_min_len(int size);

/* Scratch space for the generator (sized for one n). */
typedef struct {
    int n;
    int *dist, *queue, *cells, *stack;
    uint32_t *count;
} trm_maze_work;

void trm_maze_work_init(trm_maze_work *w, int n);
void trm_maze_work_free(trm_maze_work *w);

/* One maze of size n: question and answer (n*n characters each, no terminator) whose
 * shortest S→G path is unique and at least min_len moves long; *path_len is its length.
 * Draws new mazes until one qualifies; fails after `max_tries` draws in a row that do not
 * (min_len too large for n). */
int trm_maze_generate(trm_rng *r, trm_maze_work *w, int min_len, int max_tries, char *question, char *answer,
                      int *path_len, trm_err *e);

#endif
