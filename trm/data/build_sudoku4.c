/* build_sudoku4.c — `trm data sudoku4`: a small 4×4 Sudoku task in the reference's dataset
 * layout (Sudoku token convention of SPEC §7: blank 1, digit d → d+1, PAD 0, labels = the
 * solution), for trying trm on a laptop in minutes. Every puzzle has exactly one solution
 * and no test puzzle appears in the training set. */
#include "build_sudoku4.h"

#include <stdlib.h>
#include <string.h>

#include "dataset_writer.h"
#include "util/util.h"

/* Counts solutions of a 4×4 grid (0 = blank), stopping at `limit`. */
static int count_solutions(int *g, int limit) {
    int cell = -1;
    for (int i = 0; i < 16; i++)
        if (!g[i]) {
            cell = i;
            break;
        }
    if (cell < 0) return 1;
    int r = cell / 4, c = cell % 4, br = r / 2 * 2, bc = c / 2 * 2, n = 0;
    for (int d = 1; d <= 4 && n < limit; d++) {
        int ok = 1;
        for (int k = 0; k < 4 && ok; k++)
            ok = g[r * 4 + k] != d && g[k * 4 + c] != d && g[(br + k / 2) * 4 + bc + k % 2] != d;
        if (!ok) continue;
        g[cell] = d;
        n += count_solutions(g, limit - n);
        g[cell] = 0;
    }
    return n;
}

static void swap_rows(int *g, int a, int b) {
    for (int c = 0; c < 4; c++) {
        int t = g[a * 4 + c];
        g[a * 4 + c] = g[b * 4 + c];
        g[b * 4 + c] = t;
    }
}

static void transpose(int *g) {
    for (int r = 0; r < 4; r++)
        for (int c = r + 1; c < 4; c++) {
            int t = g[r * 4 + c];
            g[r * 4 + c] = g[c * 4 + r];
            g[c * 4 + r] = t;
        }
}

/* A uniformly shuffled valid grid: digit permutation, band/row and stack/column shuffles,
 * optional transpose of a base grid. */
static void random_grid(trm_rng *r, int *g) {
    static const int base[16] = {1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1};
    int64_t perm[4];
    trm_rng_permutation(r, perm, 4);
    for (int i = 0; i < 16; i++) g[i] = (int)perm[base[i] - 1] + 1;
    for (int pass = 0; pass < 2; pass++) {
        if (trm_rng_below(r, 2)) swap_rows(g, 0, 2), swap_rows(g, 1, 3);
        if (trm_rng_below(r, 2)) swap_rows(g, 0, 1);
        if (trm_rng_below(r, 2)) swap_rows(g, 2, 3);
        transpose(g);
    }
    if (trm_rng_below(r, 2)) transpose(g);
}

static void make_puzzle(trm_rng *r, const int *sol, int clues, int *q) {
    memcpy(q, sol, 16 * sizeof(int));
    int64_t order[16];
    trm_rng_permutation(r, order, 16);
    int have = 16;
    for (int i = 0; i < 16 && have > clues; i++) {
        int cell = (int)order[i], keep = q[cell];
        q[cell] = 0;
        int tmp[16];
        memcpy(tmp, q, sizeof tmp);
        if (count_solutions(tmp, 2) == 1) have--;
        else q[cell] = keep;
    }
}

static uint64_t key_of(const int *q) {
    uint64_t k = 0;
    for (int i = 0; i < 16; i++) k = k * 5 + (uint64_t)q[i];
    return k;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}


/* Fails when puzzles outside the test set cannot be found (the test set covers nearly every
 * puzzle with that clue range): 10000 draws in a row all taken. */
static int fill_split(trm_rng *r, const trm_sudoku4_opts *o, int64_t n, const uint64_t *avoid, int64_t navoid,
                      trm_dw_grouped *s, uint64_t *keys, trm_err *e) {
    trm_dw_grouped_alloc(s, n, 1, 16);
    for (int64_t i = 0; i < n; i++) {
        int sol[16], q[16];
        uint64_t k;
        int tries = 0;
        do {
            if (++tries > 10000)
                return trm_errf(e, "cannot find training puzzles outside the %lld test puzzles with %d..%d clues; "
                                   "use fewer --test puzzles or a wider clue range", (long long)navoid, o->min_clues,
                                o->max_clues);
            random_grid(r, sol);
            int clues = o->min_clues + (int)trm_rng_below(r, (uint64_t)(o->max_clues - o->min_clues + 1));
            make_puzzle(r, sol, clues, q);
            k = key_of(q);
        } while (navoid && bsearch(&k, avoid, (size_t)navoid, sizeof k, cmp_u64));
        if (keys) keys[i] = k;
        for (int c = 0; c < 16; c++) {
            s->inputs[i * 16 + c] = q[c] + 1;
            s->labels[i * 16 + c] = sol[c] + 1;
        }
    }
    return 0;
}

static int write_split(const char *dir, const char *split, const trm_dw_grouped *s, trm_err *e) {
    trm_dataset_meta meta = {.pad_id = 0, .has_ignore_label = 1, .ignore_label_id = 0,
                             .blank_identifier_id = 0, .vocab_size = 6, .seq_len = 16,
                             .num_puzzle_identifiers = 1};
    trm_dw_set set = trm_dw_grouped_set(s);
    return trm_dw_write_split(dir, split, &meta, &set, 1, e);
}

int trm_build_sudoku4(const trm_sudoku4_opts *o, trm_err *e) {
    if (o->n_train < 1 || o->n_test < 1) return trm_errf(e, "--train and --test must be >= 1");
    if (o->min_clues < 4 || o->max_clues > 15 || o->min_clues > o->max_clues)
        return trm_errf(e, "clue counts must satisfy 4 <= --min-clues <= --max-clues <= 15");
    char *tmp;
    if (trm_dw_begin(o->out, o->force, &tmp, e)) return -1;
    trm_rng r;
    trm_rng_init(&r, o->seed, 44);
    trm_dw_grouped test, train;
    uint64_t *keys = xmalloc(sizeof(uint64_t) * (size_t)o->n_test);
    fill_split(&r, o, o->n_test, NULL, 0, &test, keys, e);
    qsort(keys, (size_t)o->n_test, sizeof *keys, cmp_u64);
    static const char *const ids[1] = {"<blank>"};
    int rc = fill_split(&r, o, o->n_train, keys, o->n_test, &train, NULL, e);
    if (!rc) rc = write_split(tmp, "train", &train, e);
    if (!rc) rc = write_split(tmp, "test", &test, e);
    if (!rc) rc = trm_dw_write_identifiers(tmp, ids, 1, e);
    if (!rc) rc = trm_dw_commit(tmp, o->out, o->force, e);
    if (rc) trm_remove_tree(tmp, NULL);
    trm_dw_grouped_free(&test);
    trm_dw_grouped_free(&train);
    free(keys);
    free(tmp);
    return rc;
}
