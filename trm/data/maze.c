/* maze.c — see maze.h. The generator carves a perfect maze (iterative recursive
 * backtracker) on the odd-cell lattice of the largest odd square that fits (an even size
 * leaves one all-wall row and column, on a random side), puts S on a random open cell and
 * G on a random open cell at least min_len moves away, then opens extra lattice walls
 * (loops) one at a time, keeping each only if the shortest S→G path stays unique (BFS path
 * count 1) and at least min_len long: the result has alternative routes, but one shortest. */
#include "maze.h"

#include <stdlib.h>
#include <string.h>

int trm_maze_token(char c) {
    const char *p = c ? strchr(TRM_MAZE_CHARSET, c) : NULL;
    return p ? (int)(p - TRM_MAZE_CHARSET) + 1 : -1;
}

static uint32_t sat_add(uint32_t a, uint32_t b) { return a > UINT32_MAX - b ? UINT32_MAX : a + b; }

void trm_maze_bfs(const char *grid, int n, int src, int *dist, uint32_t *count, int *queue) {
    int nn = n * n, head = 0, tail = 0;
    for (int i = 0; i < nn; i++) dist[i] = -1, count[i] = 0;
    dist[src] = 0, count[src] = 1;
    queue[tail++] = src;
    while (head < tail) {
        int u = queue[head++], r = u / n, c = u % n;
        int nb[4] = {r > 0 ? u - n : -1, r < n - 1 ? u + n : -1, c > 0 ? u - 1 : -1, c < n - 1 ? u + 1 : -1};
        for (int k = 0; k < 4; k++) {
            int v = nb[k];
            if (v < 0 || grid[v] == '#') continue;
            if (dist[v] < 0) {
                dist[v] = dist[u] + 1;
                count[v] = count[u];
                queue[tail++] = v;
            } else if (dist[v] == dist[u] + 1) {
                count[v] = sat_add(count[v], count[u]);
            }
        }
    }
}

int trm_maze_check_answer(const char *q, const char *a, int len, int n, trm_err *e) {
    for (int i = 0; i < len; i++) {
        if (a[i] == q[i] || (q[i] == ' ' && a[i] == 'o')) continue;
        return trm_errf(e, "answer differs from the question at row %d, column %d (question '%c', answer '%c'); "
                           "only ' ' cells may become 'o'", i / n + 1, i % n + 1, q[i], a[i]);
    }
    return 0;
}

int trm_maze_default_min_len(int size) { return (110 * size * size + 450) / 900; }

void trm_maze_work_init(trm_maze_work *w, int n) {
    size_t nn = (size_t)n * (size_t)n;
    w->n = n;
    w->dist = xmalloc(nn * sizeof(int));
    w->queue = xmalloc(nn * sizeof(int));
    w->cells = xmalloc(nn * sizeof(int));
    w->stack = xmalloc(nn * sizeof(int));
    w->count = xmalloc(nn * sizeof(uint32_t));
}

void trm_maze_work_free(trm_maze_work *w) {
    free(w->dist);
    free(w->queue);
    free(w->cells);
    free(w->stack);
    free(w->count);
    memset(w, 0, sizeof *w);
}

/* Lattice geometry of one draw: c×c cells at grid (oy + 2i + 1, ox + 2j + 1). */
typedef struct {
    int n, c, oy, ox;
} lattice;

static int cell_at(const lattice *L, int i, int j) { return (L->oy + 2 * i + 1) * L->n + L->ox + 2 * j + 1; }

/* Iterative recursive backtracker from a random cell; opens cells and the walls between. */
static void carve(trm_rng *r, const lattice *L, char *g, int *stack) {
    static const int di[4] = {-1, 1, 0, 0}, dj[4] = {0, 0, -1, 1};
    int c = L->c, top = 0;
    stack[top++] = (int)trm_rng_below(r, (uint64_t)(c * c));
    g[cell_at(L, stack[0] / c, stack[0] % c)] = ' ';
    while (top > 0) {
        int cur = stack[top - 1], i = cur / c, j = cur % c, opts[4], no = 0;
        for (int k = 0; k < 4; k++) {
            int ni = i + di[k], nj = j + dj[k];
            if (ni >= 0 && ni < c && nj >= 0 && nj < c && g[cell_at(L, ni, nj)] == '#') opts[no++] = k;
        }
        if (!no) {
            top--;
            continue;
        }
        int k = opts[trm_rng_below(r, (uint64_t)no)], ni = i + di[k], nj = j + dj[k];
        int a = cell_at(L, i, j), b = cell_at(L, ni, nj);
        g[(a + b) / 2] = ' ';
        g[b] = ' ';
        stack[top++] = ni * c + nj;
    }
}

/* A uniformly chosen open cell (lattice cell or opened wall between two), or -1. With
 * w->dist filled: only cells at least min_len moves from S. */
static int pick_cell(trm_rng *r, trm_maze_work *w, const char *g, int min_len, int use_dist) {
    int nc = 0, nn = w->n * w->n;
    for (int v = 0; v < nn; v++)
        if (g[v] != '#' && (!use_dist || w->dist[v] >= min_len)) w->cells[nc++] = v;
    return nc ? w->cells[trm_rng_below(r, (uint64_t)nc)] : -1;
}

/* Opens a random quarter of the closed walls between lattice cells, each only when the
 * shortest S→G path stays unique and at least min_len long. */
static void add_loops(trm_rng *r, const lattice *L, trm_maze_work *w, char *g, int s, int goal, int min_len) {
    int nw = 0, c = L->c;
    for (int i = 0; i < c; i++)
        for (int j = 0; j < c; j++) {
            int a = cell_at(L, i, j);
            if (j + 1 < c && g[(a + cell_at(L, i, j + 1)) / 2] == '#') w->cells[nw++] = (a + cell_at(L, i, j + 1)) / 2;
            if (i + 1 < c && g[(a + cell_at(L, i + 1, j)) / 2] == '#') w->cells[nw++] = (a + cell_at(L, i + 1, j)) / 2;
        }
    int tries = nw / 4;
    for (int t = 0; t < tries; t++) {
        int k = t + (int)trm_rng_below(r, (uint64_t)(nw - t)), wall = w->cells[k];
        w->cells[k] = w->cells[t];
        w->cells[t] = wall;
        g[wall] = ' ';
        trm_maze_bfs(g, L->n, s, w->dist, w->count, w->queue);
        if (w->count[goal] != 1 || w->dist[goal] < min_len) g[wall] = '#';
    }
}

/* Marks the (unique) shortest path into the answer by walking back from G. */
static void mark_path(const trm_maze_work *w, const char *q, char *a, int goal) {
    int n = w->n, cur = goal;
    memcpy(a, q, (size_t)n * (size_t)n);
    while (w->dist[cur] > 1) {
        int r = cur / n, c = cur % n;
        int nb[4] = {r > 0 ? cur - n : -1, r < n - 1 ? cur + n : -1, c > 0 ? cur - 1 : -1, c < n - 1 ? cur + 1 : -1};
        for (int k = 0; k < 4; k++)
            if (nb[k] >= 0 && q[nb[k]] != '#' && w->dist[nb[k]] == w->dist[cur] - 1) {
                cur = nb[k];
                break;
            }
        a[cur] = 'o';
    }
}

int trm_maze_generate(trm_rng *r, trm_maze_work *w, int min_len, int max_tries, char *q, char *a, int *path_len,
                      trm_err *e) {
    int n = w->n, m = n % 2 ? n : n - 1;
    lattice L = {.n = n, .c = (m - 1) / 2};
    int longest = 2 * (L.c * L.c - 1); /* a path visiting every lattice cell */
    if (n < TRM_MAZE_MIN_SIZE || n > TRM_MAZE_MAX_SIZE)
        return trm_errf(e, "maze size %d is outside %d..%d", n, TRM_MAZE_MIN_SIZE, TRM_MAZE_MAX_SIZE);
    if (min_len < 1 || min_len > longest)
        return trm_errf(e, "minimum path length %d is outside 1..%d for size %d", min_len, longest, n);
    for (int t = 0; t < max_tries; t++) {
        L.oy = (int)trm_rng_below(r, (uint64_t)(n - m + 1));
        L.ox = (int)trm_rng_below(r, (uint64_t)(n - m + 1));
        memset(q, '#', (size_t)n * (size_t)n);
        carve(r, &L, q, w->stack);
        int s = pick_cell(r, w, q, 0, 0);
        trm_maze_bfs(q, n, s, w->dist, w->count, w->queue);
        int goal = pick_cell(r, w, q, min_len, 1);
        if (goal < 0) continue;
        add_loops(r, &L, w, q, s, goal, min_len);
        trm_maze_bfs(q, n, s, w->dist, w->count, w->queue);
        q[s] = 'S';
        q[goal] = 'G';
        mark_path(w, q, a, goal);
        *path_len = w->dist[goal];
        return 0;
    }
    return trm_errf(e, "no maze of size %d with a shortest path of at least %d moves in %d draws; "
                       "lower --min-path-len", n, min_len, max_tries);
}
