/* sudoku.c — 9×9 Sudoku solver, generator and augmentation shuffle (see sudoku.h). The
 * solver keeps one 9-bit mask of used digits per row, column and box, so a cell's
 * candidates are one OR and a complement; propagation (naked and hidden singles) solves
 * most of a puzzle before any guess, which keeps the generator's many uniqueness checks
 * cheap. */
#include "sudoku.h"

#include <string.h>

#define ALL_DIGITS 0x1FFu

typedef struct {
    uint8_t g[81];
    uint16_t row[9], col[9], box[9]; /* bit d-1 set: digit d used */
    int filled;
} sstate;

typedef struct {
    int limit, count;
    uint8_t *first;
    uint64_t effort;
    trm_rng *rng; /* NULL: digits in ascending order (deterministic) */
} sctx;

static int box_of(int cell) { return cell / 27 * 3 + cell % 9 / 3; }

/* The k-th cell of unit u: units 0..8 rows, 9..17 columns, 18..26 boxes. */
static int unit_cell(int u, int k) {
    if (u < 9) return u * 9 + k;
    if (u < 18) return k * 9 + (u - 9);
    int b = u - 18;
    return (b / 3 * 3 + k / 3) * 9 + b % 3 * 3 + k % 3;
}

static uint16_t unit_used(const sstate *s, int u) {
    return u < 9 ? s->row[u] : u < 18 ? s->col[u - 9] : s->box[u - 18];
}

static unsigned candidates(const sstate *s, int cell) {
    return ~(unsigned)(s->row[cell / 9] | s->col[cell % 9] | s->box[box_of(cell)]) & ALL_DIGITS;
}

static void place(sstate *s, int cell, int d) {
    uint16_t bit = (uint16_t)(1u << (d - 1));
    s->g[cell] = (uint8_t)d;
    s->row[cell / 9] |= bit;
    s->col[cell % 9] |= bit;
    s->box[box_of(cell)] |= bit;
    s->filled++;
}

static int digit_of(unsigned bit) { return __builtin_ctz(bit) + 1; }

/* Places every cell with a single candidate. -1: a cell has none. */
static int naked_singles(sstate *s, int *changed) {
    for (int cell = 0; cell < 81; cell++) {
        if (s->g[cell]) continue;
        unsigned c = candidates(s, cell);
        if (!c) return -1;
        if (!(c & (c - 1))) {
            place(s, cell, digit_of(c));
            *changed = 1;
        }
    }
    return 0;
}

/* Places every digit that fits only one cell of a unit. -1: a needed digit fits nowhere. */
static int hidden_singles(sstate *s, int *changed) {
    for (int u = 0; u < 27; u++) {
        unsigned once = 0, twice = 0;
        for (int k = 0; k < 9; k++) {
            int cell = unit_cell(u, k);
            if (s->g[cell]) continue;
            unsigned c = candidates(s, cell);
            twice |= once & c;
            once |= c;
        }
        unsigned need = ~(unsigned)unit_used(s, u) & ALL_DIGITS;
        if (need & ~once) return -1;
        unsigned uniq = need & once & ~twice;
        while (uniq) {
            unsigned bit = uniq & -uniq;
            uniq &= uniq - 1;
            for (int k = 0; k < 9; k++) {
                int cell = unit_cell(u, k);
                /* an earlier placement may have taken the bit away; the next pass sees it */
                if (!s->g[cell] && (candidates(s, cell) & bit)) {
                    place(s, cell, digit_of(bit));
                    *changed = 1;
                    break;
                }
            }
        }
    }
    return 0;
}

static int propagate(sstate *s) {
    for (;;) {
        int changed = 0;
        if (naked_singles(s, &changed)) return -1;
        if (s->filled == 81) return 0;
        if (hidden_singles(s, &changed)) return -1;
        if (!changed) return 0;
    }
}

/* The empty cell with fewest candidates (-1 if some cell has none). */
static int best_cell(const sstate *s, unsigned *cand) {
    int best = -1, best_n = 10;
    for (int cell = 0; cell < 81; cell++) {
        if (s->g[cell]) continue;
        unsigned c = candidates(s, cell);
        int n = __builtin_popcount(c);
        if (n < best_n) {
            best = cell, best_n = n, *cand = c;
            if (n <= 1) break;
        }
    }
    return best_n == 0 ? -1 : best;
}

static int digit_order(unsigned cand, trm_rng *rng, int *digits) {
    int n = 0;
    for (; cand; cand &= cand - 1) digits[n++] = digit_of(cand & -cand);
    if (rng)
        for (int i = n - 1; i > 0; i--) {
            int j = (int)trm_rng_below(rng, (uint64_t)i + 1), t = digits[i];
            digits[i] = digits[j], digits[j] = t;
        }
    return n;
}

static void search(sstate *s, sctx *c) {
    c->effort++;
    if (propagate(s)) return;
    if (s->filled == 81) {
        if (c->count == 0 && c->first) memcpy(c->first, s->g, 81);
        c->count++;
        return;
    }
    unsigned cand = 0;
    int cell = best_cell(s, &cand);
    if (cell < 0) return;
    int digits[9], n = digit_order(cand, c->rng, digits);
    for (int i = 0; i < n && c->count < c->limit; i++) {
        sstate t = *s;
        place(&t, cell, digits[i]);
        search(&t, c);
    }
}

/* Loads the clues; -1 if a clue is out of range or repeats in a row, column or box. */
static int load(sstate *s, const uint8_t grid[81]) {
    memset(s, 0, sizeof *s);
    for (int cell = 0; cell < 81; cell++) {
        int d = grid[cell];
        if (!d) continue;
        if (d > 9) return -1;
        unsigned bit = 1u << (d - 1);
        if ((s->row[cell / 9] | s->col[cell % 9] | s->box[box_of(cell)]) & bit) return -1;
        place(s, cell, d);
    }
    return 0;
}

static int run_solver(const uint8_t grid[81], int limit, uint8_t *first, uint64_t *effort, trm_rng *rng) {
    sstate s;
    sctx c = {.limit = limit < 1 ? 1 : limit, .count = 0, .first = first, .effort = 0, .rng = rng};
    if (load(&s, grid) == 0) search(&s, &c);
    if (effort) *effort = c.effort;
    return c.count;
}

int sudoku_count_solutions(const uint8_t grid[81], int limit, uint8_t *first_solution, uint64_t *effort) {
    return run_solver(grid, limit, first_solution, effort, NULL);
}

uint64_t sudoku_rating(const uint8_t q[81]) {
    uint64_t effort = 0;
    run_solver(q, 1, NULL, &effort, NULL);
    return effort;
}

int sudoku_is_complete_valid(const uint8_t sol[81]) {
    for (int u = 0; u < 27; u++) {
        unsigned seen = 0;
        for (int k = 0; k < 9; k++) {
            int d = sol[unit_cell(u, k)];
            if (d < 1 || d > 9) return 0;
            seen |= 1u << (d - 1);
        }
        if (seen != ALL_DIGITS) return 0;
    }
    return 1;
}

int sudoku_agrees(const uint8_t q[81], const uint8_t sol[81]) {
    for (int i = 0; i < 81; i++)
        if (q[i] && q[i] != sol[i]) return 0;
    return 1;
}

void sudoku_random_full_grid(trm_rng *r, uint8_t out[81]) {
    uint8_t empty[81] = {0};
    run_solver(empty, 1, out, NULL, r);
}

int sudoku_generate(trm_rng *r, const sudoku_gen_opts *o, uint8_t q[81], uint8_t sol[81], uint64_t *rating,
                    int *attempts) {
    int max_attempts = o->max_attempts > 0 ? o->max_attempts : 100000;
    for (int a = 1; a <= max_attempts; a++) {
        if (attempts) *attempts = a;
        sudoku_random_full_grid(r, sol);
        memcpy(q, sol, 81);
        int64_t order[81];
        trm_rng_permutation(r, order, 81);
        int clues = 81;
        /* one pass suffices for minimality: a clue that was needed stays needed once
         * others are removed */
        for (int i = 0; i < 81 && clues > o->min_clues; i++) {
            int cell = (int)order[i];
            uint8_t keep = q[cell];
            q[cell] = 0;
            if (sudoku_count_solutions(q, 2, NULL, NULL) == 1) clues--;
            else q[cell] = keep;
        }
        if (clues > o->max_clues) continue;
        uint64_t rt = sudoku_rating(q);
        if (rt < o->min_rating) continue;
        if (rating) *rating = rt;
        return 0;
    }
    return -1;
}

static void perm3_blocks(trm_rng *r, int out[9]) {
    int64_t blocks[3], inner[3];
    trm_rng_permutation(r, blocks, 3);
    for (int b = 0; b < 3; b++) {
        trm_rng_permutation(r, inner, 3);
        for (int k = 0; k < 3; k++) out[b * 3 + k] = (int)(blocks[b] * 3 + inner[k]);
    }
}

static void apply_shuffle(const uint8_t *x, uint8_t *out, const uint8_t *digit_map, int transpose,
                          const int *row_perm, const int *col_perm) {
    for (int i = 0; i < 81; i++) {
        int r = row_perm[i / 9], c = col_perm[i % 9];
        uint8_t v = transpose ? x[c * 9 + r] : x[r * 9 + c];
        out[i] = v <= 9 ? digit_map[v] : v;
    }
}

void sudoku_shuffle(trm_rng *r, const uint8_t q[81], const uint8_t a[81], uint8_t q_out[81], uint8_t a_out[81]) {
    int64_t perm[9];
    uint8_t digit_map[10] = {0};
    trm_rng_permutation(r, perm, 9);
    for (int i = 0; i < 9; i++) digit_map[i + 1] = (uint8_t)(perm[i] + 1);
    int transpose = trm_rng_uniform(r) < 0.5;
    int row_perm[9], col_perm[9];
    perm3_blocks(r, row_perm);
    perm3_blocks(r, col_perm);
    apply_shuffle(q, q_out, digit_map, transpose, row_perm, col_perm);
    apply_shuffle(a, a_out, digit_map, transpose, row_perm, col_perm);
}
