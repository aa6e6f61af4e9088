/* test_sudoku.c — the 9×9 Sudoku solver, generator and shuffle (trm/data/sudoku.c) and the
 * `trm data sudoku` dataset builder (trm/data/build_sudoku.c): known hard puzzles, solution
 * counting, uniqueness and clue bounds of generated puzzles, augmentations that are true
 * Sudoku symmetries, the dataset layout, and CSV errors that name the line. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/build_sudoku.h"
#include "check_main.h"
#include "data/dataset.h"
#include "data/sudoku.h"

#define HARD_CSV TRM_SOURCE_DIR "/tests/data/sudoku_hard.csv"

/* The test's own validity check, independent of the library's. */
static int grid_ok(const uint8_t *s) {
    for (int i = 0; i < 9; i++) {
        int row = 0, col = 0, box = 0;
        for (int k = 0; k < 9; k++) {
            int br = i / 3 * 3 + k / 3, bc = i % 3 * 3 + k % 3;
            if (s[i * 9 + k] < 1 || s[i * 9 + k] > 9) return 0;
            row |= 1 << s[i * 9 + k];
            col |= 1 << s[k * 9 + i];
            box |= 1 << s[br * 9 + bc];
        }
        if (row != 0x3FE || col != 0x3FE || box != 0x3FE) return 0;
    }
    return 1;
}

static int clues_agree(const uint8_t *q, const uint8_t *s) {
    for (int i = 0; i < 81; i++)
        if (q[i] && q[i] != s[i]) return 0;
    return 1;
}

static int count_clues(const uint8_t *q) {
    int n = 0;
    for (int i = 0; i < 81; i++) n += q[i] != 0;
    return n;
}

static char *tmp_path(const char *name) {
    mkdir(TRM_TEST_TMP, 0755);
    return xasprintf("%s/sudoku_%s", TRM_TEST_TMP, name);
}

static void write_text(const char *path, const char *text) {
    trm_err e;
    ck_assert_msg(trm_write_file_atomic(path, text, strlen(text), &e) == 0, "%s", e.msg);
}

START_TEST(test_hard_puzzles) {
    trm_sudoku_rows rows;
    trm_err e;
    ck_assert_msg(trm_sudoku_read_csv(HARD_CSV, 0, 0, &rows, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(rows.n, 5);
    for (int64_t i = 0; i < rows.n; i++) {
        uint8_t sol[81];
        uint64_t effort = 0;
        const uint8_t *q = rows.q + i * 81, *a = rows.a + i * 81;
        ck_assert_int_le(count_clues(q), 25);
        ck_assert_int_eq(sudoku_count_solutions(q, 10, sol, &effort), 1);
        ck_assert(grid_ok(sol));
        ck_assert(clues_agree(q, sol));
        ck_assert_mem_eq(sol, a, 81);
        /* these need guessing: propagation alone does not finish them */
        ck_assert_uint_gt(effort, 1);
        ck_assert_uint_eq(sudoku_rating(q), (uint64_t)rows.rating[i]);
    }
    trm_sudoku_rows_free(&rows);
}
END_TEST

/* Blanks a "deadly rectangle" (a b / b a on two rows and two columns spanning two boxes) of
 * a solved grid: exactly two solutions. */
static int blank_deadly_rectangle(uint8_t *g) {
    for (int r1 = 0; r1 < 9; r1++)
        for (int r2 = r1 + 1; r2 < 9; r2++)
            for (int c1 = 0; c1 < 9; c1++)
                for (int c2 = c1 + 1; c2 < 9; c2++) {
                    int two_boxes = r1 / 3 == r2 / 3 || c1 / 3 == c2 / 3;
                    if (two_boxes && g[r1 * 9 + c1] == g[r2 * 9 + c2] && g[r1 * 9 + c2] == g[r2 * 9 + c1]) {
                        g[r1 * 9 + c1] = g[r2 * 9 + c2] = g[r1 * 9 + c2] = g[r2 * 9 + c1] = 0;
                        return 1;
                    }
                }
    return 0;
}

START_TEST(test_multiple_solutions) {
    uint8_t g[81] = {0}, sol[81];
    ck_assert_int_eq(sudoku_count_solutions(g, 7, sol, NULL), 7);
    ck_assert(grid_ok(sol));
    trm_rng r;
    trm_rng_init(&r, 5, 0);
    int found = 0;
    for (int t = 0; t < 50 && !found; t++) {
        sudoku_random_full_grid(&r, g);
        ck_assert(grid_ok(g));
        uint8_t full[81];
        memcpy(full, g, 81);
        if (!blank_deadly_rectangle(g)) continue;
        found = 1;
        ck_assert_int_eq(sudoku_count_solutions(g, 10, sol, NULL), 2);
        ck_assert(clues_agree(g, sol));
        ck_assert_int_eq(sudoku_count_solutions(full, 10, NULL, NULL), 1);
    }
    ck_assert(found);
    /* conflicting clues: no solution */
    memset(g, 0, 81);
    g[0] = g[8] = 5;
    ck_assert_int_eq(sudoku_count_solutions(g, 2, NULL, NULL), 0);
    g[8] = 0, g[80] = 10;
    ck_assert_int_eq(sudoku_count_solutions(g, 2, NULL, NULL), 0);
}
END_TEST

START_TEST(test_generate) {
    trm_rng r;
    trm_rng_init(&r, 11, 0);
    sudoku_gen_opts o = {.min_clues = 17, .max_clues = 30, .min_rating = 0, .max_attempts = 0};
    for (int i = 0; i < 20; i++) {
        uint8_t q[81], s[81], s2[81];
        uint64_t rating = 0;
        ck_assert_int_eq(sudoku_generate(&r, &o, q, s, &rating, NULL), 0);
        ck_assert(grid_ok(s));
        ck_assert(clues_agree(q, s));
        ck_assert_int_ge(count_clues(q), 17);
        ck_assert_int_le(count_clues(q), 30);
        ck_assert_int_eq(sudoku_count_solutions(q, 2, s2, NULL), 1);
        ck_assert_mem_eq(s, s2, 81);
        ck_assert_uint_eq(rating, sudoku_rating(q));
        if (i < 3) /* minimal: no clue can go */
            for (int c = 0; c < 81; c++) {
                if (!q[c]) continue;
                uint8_t keep = q[c];
                q[c] = 0;
                ck_assert_int_eq(sudoku_count_solutions(q, 2, NULL, NULL), 2);
                q[c] = keep;
            }
    }
    sudoku_gen_opts stop40 = {.min_clues = 40, .max_clues = 40};
    uint8_t q[81], s[81];
    ck_assert_int_eq(sudoku_generate(&r, &stop40, q, s, NULL, NULL), 0);
    ck_assert_int_eq(count_clues(q), 40);
    ck_assert_int_eq(sudoku_count_solutions(q, 2, NULL, NULL), 1);
    sudoku_gen_opts rated = {.min_clues = 17, .max_clues = 30, .min_rating = 20};
    uint64_t rating = 0;
    ck_assert_int_eq(sudoku_generate(&r, &rated, q, s, &rating, NULL), 0);
    ck_assert_uint_ge(rating, 20);
    ck_assert_uint_eq(sudoku_rating(q), rating);
    /* impossible bounds fail instead of looping */
    sudoku_gen_opts impossible = {.min_clues = 17, .max_clues = 17, .min_rating = 0, .max_attempts = 3};
    ck_assert_int_eq(sudoku_generate(&r, &impossible, q, s, NULL, NULL), -1);
}
END_TEST

/* 1 if (q2, a2) = some Sudoku symmetry of (q, a): transpose or not, bands and rows within
 * bands, stacks and columns within stacks, and one consistent relabelling of 1..9 (0 fixed). */
static const int perm3[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

static void block_perm(int code, int out[9]) {
    int outer = code % 6, rest = code / 6;
    for (int b = 0; b < 3; b++, rest /= 6)
        for (int k = 0; k < 3; k++) out[b * 3 + k] = perm3[outer][b] * 3 + perm3[rest % 6][k];
}

static int try_symmetry(const uint8_t *q, const uint8_t *a, const uint8_t *q2, const uint8_t *a2, int t,
                        const int *rp, const int *cp) {
    int map[10] = {0}, used[10] = {0};
    for (int pass = 0; pass < 2; pass++) {
        const uint8_t *src = pass ? q : a, *dst = pass ? q2 : a2;
        for (int i = 0; i < 81; i++) {
            int R = rp[i / 9], C = cp[i % 9], v = t ? src[C * 9 + R] : src[R * 9 + C], w = dst[i];
            if (!v || !w) {
                if (v != w) return 0;
                continue;
            }
            if (!map[v]) {
                if (used[w]) return 0;
                map[v] = w, used[w] = 1;
            } else if (map[v] != w) return 0;
        }
    }
    return 1;
}

static int is_symmetry_of(const uint8_t *q, const uint8_t *a, const uint8_t *q2, const uint8_t *a2) {
    static const int n = 6 * 216;
    int(*perms)[9] = xmalloc(sizeof(int[9]) * n), found = 0;
    for (int i = 0; i < n; i++) block_perm(i, perms[i]);
    for (int t = 0; t < 2 && !found; t++)
        for (int rc = 0; rc < n && !found; rc++)
            for (int cc = 0; cc < n && !found; cc++) found = try_symmetry(q, a, q2, a2, t, perms[rc], perms[cc]);
    free(perms);
    return found;
}

START_TEST(test_shuffle_is_symmetry) {
    trm_sudoku_rows rows;
    trm_err e;
    ck_assert_msg(trm_sudoku_read_csv(HARD_CSV, 0, 0, &rows, &e) == 0, "%s", e.msg);
    trm_rng r;
    trm_rng_init(&r, 3, 0);
    for (int k = 0; k < 4; k++) {
        const uint8_t *q = rows.q + (k % rows.n) * 81, *a = rows.a + (k % rows.n) * 81;
        uint8_t q2[81], a2[81];
        sudoku_shuffle(&r, q, a, q2, a2);
        ck_assert(grid_ok(a2));
        ck_assert(clues_agree(q2, a2));
        ck_assert_int_eq(count_clues(q2), count_clues(q));
        ck_assert_int_eq(sudoku_count_solutions(q2, 2, NULL, NULL), 1);
        ck_assert(is_symmetry_of(q, a, q2, a2));
        /* a quarter turn (transpose + reversed columns) is a symmetry too */
        uint8_t qr[81], ar[81];
        for (int i = 0; i < 81; i++) qr[i] = q2[(8 - i % 9) * 9 + i / 9], ar[i] = a2[(8 - i % 9) * 9 + i / 9];
        ck_assert(is_symmetry_of(q, a, qr, ar));
    }
    /* swapping two rows of different bands is not a symmetry */
    uint8_t q3[81], a3[81];
    memcpy(q3, rows.q, 81), memcpy(a3, rows.a, 81);
    for (int c = 0; c < 9; c++) {
        uint8_t t = q3[c];
        q3[c] = q3[36 + c], q3[36 + c] = t;
        t = a3[c], a3[c] = a3[36 + c], a3[36 + c] = t;
    }
    ck_assert(!is_symmetry_of(rows.q, rows.a, q3, a3));
    trm_sudoku_rows_free(&rows);
}
END_TEST

/* A train.csv of n generated puzzles with CRLF line ends, '0' blanks on odd rows and a
 * quoted source field; ratings are the row numbers 1..n. */
static char *make_train_csv(int n, uint8_t *qs, uint8_t *as) {
    trm_rng r;
    trm_rng_init(&r, 21, 0);
    sudoku_gen_opts o = {.min_clues = 24, .max_clues = 40};
    size_t cap = 64 + (size_t)n * 200, len = 0;
    char *csv = xmalloc(cap);
    len += (size_t)snprintf(csv, cap, "source,question,answer,rating\r\n");
    for (int i = 0; i < n; i++) {
        uint8_t *q = qs + i * 81, *a = as + i * 81;
        ck_assert_int_eq(sudoku_generate(&r, &o, q, a, NULL, NULL), 0);
        char qc[82], ac[82];
        for (int k = 0; k < 81; k++) qc[k] = q[k] ? (char)('0' + q[k]) : (i % 2 ? '0' : '.'), ac[k] = (char)('0' + a[k]);
        qc[81] = ac[81] = 0;
        len += (size_t)snprintf(csv + len, cap - len, "%s,%s,%s,%d\r\n", i == 0 ? "\"gen, \"\"quoted\"\"\"" : "gen", qc,
                                ac, i + 1);
    }
    return csv;
}

static void check_tokens_equal(const npy_array *arr, int64_t row, const uint8_t *grid) {
    for (int k = 0; k < 81; k++) ck_assert_int_eq(npy_get_i64(arr, row * 81 + k), grid[k] + 1);
}

static void read_grid(const npy_array *arr, int64_t row, uint8_t *grid) {
    for (int k = 0; k < 81; k++) {
        int64_t v = npy_get_i64(arr, row * 81 + k);
        ck_assert(v >= 1 && v <= 10);
        grid[k] = (uint8_t)(v - 1);
    }
}

static char *setup_csv_dir(const char *name, int n, uint8_t *qs, uint8_t *as) {
    char *dir = tmp_path(name);
    trm_err e;
    trm_remove_tree(dir, NULL);
    ck_assert_msg(trm_mkdirs(dir, &e) == 0, "%s", e.msg);
    char *train = trm_path_join(dir, "train.csv"), *test = trm_path_join(dir, "test.csv");
    char *csv = make_train_csv(n, qs, as);
    write_text(train, csv);
    size_t len;
    char *hard = trm_read_file(HARD_CSV, &len, &e);
    ck_assert_ptr_nonnull(hard);
    write_text(test, hard);
    free(csv), free(hard), free(train), free(test);
    return dir;
}

START_TEST(test_build_dataset) {
    enum { N = 6, AUG = 3 };
    uint8_t qs[N * 81], as[N * 81];
    char *csv_dir = setup_csv_dir("csv", N, qs, as), *out = tmp_path("ds");
    trm_remove_tree(out, NULL);
    trm_err e;
    trm_sudoku_opts o = {.csv_dir = csv_dir, .out = out, .subsample_size = -1, .num_aug = AUG, .seed = 7};
    ck_assert_msg(trm_build_sudoku(&o, &e) == 0, "%s", e.msg);

    trm_dataset d;
    const char *paths[1] = {out};
    ck_assert_msg(trm_dataset_open(&d, paths, 1, "train", &e) == 0, "%s", e.msg);
    ck_assert_int_eq(d.meta.vocab_size, 11);
    ck_assert_int_eq(d.meta.seq_len, 81);
    ck_assert_int_eq(d.meta.pad_id, 0);
    ck_assert(d.meta.has_ignore_label && d.meta.ignore_label_id == 0);
    ck_assert_int_eq(d.meta.num_puzzle_identifiers, 1);
    ck_assert_int_eq(d.meta.total_groups, N);
    ck_assert_int_eq(d.meta.total_puzzles, N);
    ck_assert(d.meta.mean_puzzle_examples == 1.0);
    ck_assert_int_eq(d.nsets, 1);
    ck_assert_str_eq(d.meta.sets[0], "all");
    trm_dataset_set *s = &d.sets[0];
    ck_assert_int_eq(s->n_groups, N);
    ck_assert_int_eq(s->n_puzzles, N * (1 + AUG));
    ck_assert_int_eq(s->n_examples, N * (1 + AUG));
    for (int64_t g = 0; g <= N; g++) ck_assert_int_eq(npy_get_i64(&s->group_indices, g), g * (1 + AUG));
    for (int64_t p = 0; p <= s->n_puzzles; p++) ck_assert_int_eq(npy_get_i64(&s->puzzle_indices, p), p);
    for (int64_t p = 0; p < s->n_puzzles; p++) ck_assert_int_eq(npy_get_i64(&s->puzzle_identifiers, p), 0);
    int differs = 0;
    for (int g = 0; g < N; g++) {
        check_tokens_equal(&s->inputs, g * (1 + AUG), qs + g * 81);
        check_tokens_equal(&s->labels, g * (1 + AUG), as + g * 81);
        for (int k = 0; k <= AUG; k++) {
            uint8_t q[81], a[81];
            read_grid(&s->inputs, g * (1 + AUG) + k, q);
            read_grid(&s->labels, g * (1 + AUG) + k, a);
            ck_assert(grid_ok(a));
            ck_assert(clues_agree(q, a));
            if (k && g < 2) ck_assert(is_symmetry_of(qs + g * 81, as + g * 81, q, a));
            differs += memcmp(a, as + g * 81, 81) != 0;
        }
    }
    ck_assert_int_ge(differs, N * AUG - 1); /* augmented copies are not the original */
    trm_dataset_close(&d);

    ck_assert_msg(trm_dataset_open(&d, paths, 1, "test", &e) == 0, "%s", e.msg);
    trm_sudoku_rows hard;
    ck_assert_msg(trm_sudoku_read_csv(HARD_CSV, 0, 0, &hard, &e) == 0, "%s", e.msg);
    s = &d.sets[0];
    ck_assert_int_eq(s->n_examples, hard.n);
    ck_assert_int_eq(s->n_groups, hard.n);
    ck_assert_int_eq(d.meta.total_groups, hard.n);
    for (int64_t i = 0; i < hard.n; i++) {
        check_tokens_equal(&s->inputs, i, hard.q + i * 81);
        check_tokens_equal(&s->labels, i, hard.a + i * 81);
    }
    trm_dataset_close(&d);

    char *ids = trm_path_join(out, "identifiers.json");
    size_t len;
    char *txt = trm_read_file(ids, &len, &e);
    ck_assert_ptr_nonnull(txt);
    ck_assert_ptr_nonnull(strstr(txt, "[\"<blank>\"]"));
    free(txt), free(ids);

    /* an existing dataset is refused without force, replaced with it */
    ck_assert_int_eq(trm_build_sudoku(&o, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "already exists"));
    o.force = 1, o.subsample_size = 3, o.num_aug = 0;
    ck_assert_msg(trm_build_sudoku(&o, &e) == 0, "%s", e.msg);
    ck_assert_msg(trm_dataset_open(&d, paths, 1, "train", &e) == 0, "%s", e.msg);
    s = &d.sets[0];
    ck_assert_int_eq(s->n_examples, 3);
    int picked[N] = {0};
    for (int64_t i = 0; i < 3; i++) {
        uint8_t q[81];
        read_grid(&s->inputs, i, q);
        int match = -1;
        for (int g = 0; g < N; g++)
            if (!memcmp(q, qs + g * 81, 81)) match = g;
        ck_assert_int_ge(match, 0);
        ck_assert_int_eq(picked[match]++, 0); /* without replacement */
    }
    trm_dataset_close(&d);

    /* ratings are 1..N: --min-difficulty 4 keeps rows 4..N, in file order */
    o.subsample_size = -1, o.has_min_difficulty = 1, o.min_difficulty = 4;
    ck_assert_msg(trm_build_sudoku(&o, &e) == 0, "%s", e.msg);
    ck_assert_msg(trm_dataset_open(&d, paths, 1, "train", &e) == 0, "%s", e.msg);
    ck_assert_int_eq(d.sets[0].n_examples, N - 3);
    check_tokens_equal(&d.sets[0].inputs, 0, qs + 3 * 81);
    trm_dataset_close(&d);
    trm_sudoku_rows_free(&hard);
    free(csv_dir), free(out);
}
END_TEST

START_TEST(test_same_seed_same_dataset) {
    enum { N = 3 };
    uint8_t qs[N * 81], as[N * 81];
    char *csv_dir = setup_csv_dir("csv_seed", N, qs, as), *out1 = tmp_path("seed1"), *out2 = tmp_path("seed2");
    trm_err e;
    trm_sudoku_opts o = {.csv_dir = csv_dir, .out = out1, .subsample_size = -1, .num_aug = 5, .seed = 9, .force = 1};
    ck_assert_msg(trm_build_sudoku(&o, &e) == 0, "%s", e.msg);
    o.out = out2;
    ck_assert_msg(trm_build_sudoku(&o, &e) == 0, "%s", e.msg);
    char *p1 = xasprintf("%s/train/all__inputs.npy", out1), *p2 = xasprintf("%s/train/all__inputs.npy", out2);
    size_t l1, l2;
    char *b1 = trm_read_file(p1, &l1, &e), *b2 = trm_read_file(p2, &l2, &e);
    ck_assert(b1 && b2 && l1 == l2 && !memcmp(b1, b2, l1));
    free(b1), free(b2), free(p1), free(p2), free(csv_dir), free(out1), free(out2);
}
END_TEST

typedef struct {
    const char *body;   /* rows after the header */
    const char *expect; /* in the message, after "train.csv:" */
} bad_case;

START_TEST(test_csv_errors) {
    trm_sudoku_rows hard;
    trm_err e;
    ck_assert_msg(trm_sudoku_read_csv(HARD_CSV, 0, 0, &hard, &e) == 0, "%s", e.msg);
    char q[82], a[82], a_bad[82], q_other[82];
    for (int k = 0; k < 81; k++) {
        q[k] = hard.q[k] ? (char)('0' + hard.q[k]) : '.';
        a[k] = (char)('0' + hard.a[k]);
        q_other[k] = hard.q[81 + k] ? (char)('0' + hard.q[81 + k]) : '.';
    }
    q[81] = a[81] = q_other[81] = 0;
    memcpy(a_bad, a, 82);
    char t = a_bad[0];
    a_bad[0] = a_bad[1], a_bad[1] = t; /* two cells of a row swapped: columns repeat */
    char *good = xasprintf("s,%s,%s,5\n", q, a);
    char *cases[][2] = {
        {xasprintf("%ss,%s,%s\n", good, q, a), xstrdup(":3: 3 fields")},
        {xasprintf("%ss,%s,%s,5,x\n", good, q, a), xstrdup(":3: 5 fields")},
        {xasprintf("%ss,%.80s,%s,5\n", good, q, a), xstrdup(":3: question has 80 characters")},
        {xasprintf("%s\ns,%sx,%s,5\n", good, q, a), xstrdup(":4: question has 82")},
        {xasprintf("s,x%s,%s,5\n", q + 1, a), xstrdup(":2: question has the character 'x'")},
        {xasprintf("%ss,%s,%s,hard\n", good, q, a), xstrdup(":3: rating 'hard' is not an integer")},
        {xasprintf("%ss,%s,%s,4.5\n", good, q, a), xstrdup(":3: rating '4.5'")},
        {xasprintf("%s%ss,%s,%s,5\n", good, good, q, a_bad), xstrdup(":4: the answer is not a valid completed grid")},
        {xasprintf("%ss,%s,%s,5\n", good, q_other, a), xstrdup(":3: the answer does not solve the question")},
        {xasprintf("%s\"s,%s,%s,5\n", good, q, a), xstrdup(":3: unterminated quoted field")},
    };
    char *path = tmp_path("bad.csv");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = xasprintf("source,question,answer,rating\n%s", cases[i][0]);
        write_text(path, text);
        trm_sudoku_rows rows;
        ck_assert_int_eq(trm_sudoku_read_csv(path, 0, 0, &rows, &e), -1);
        char *want = xasprintf("bad.csv%s", cases[i][1]);
        ck_assert_msg(strstr(e.msg, want) != NULL, "case %zu: '%s' lacks '%s'", i, e.msg, want);
        free(want), free(text), free(cases[i][0]), free(cases[i][1]);
    }
    write_text(path, "source,puzzle,solution,rating\n");
    trm_sudoku_rows rows;
    ck_assert_int_eq(trm_sudoku_read_csv(path, 0, 0, &rows, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "bad.csv:1: expected the header"));
    /* a quoted source field with a comma, CRLF and a trailing blank line are fine */
    char *ok = xasprintf("source,question,answer,rating\r\n\"a,\"\"b\"\"\",%s,%s, 7 \r\n\r\n", q, a);
    write_text(path, ok);
    ck_assert_msg(trm_sudoku_read_csv(path, 0, 0, &rows, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(rows.n, 1);
    ck_assert_int_eq(rows.rating[0], 7);
    ck_assert_mem_eq(rows.q, hard.q, 81);
    trm_sudoku_rows_free(&rows);
    ck_assert_int_eq(trm_sudoku_read_csv(TRM_TEST_TMP "/no_such.csv", 0, 0, &rows, &e), -1);
    free(ok), free(good), free(path);
    trm_sudoku_rows_free(&hard);
}
END_TEST

int main(void) {
    Suite *s = suite_create("sudoku");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_hard_puzzles);
    tcase_add_test(tc, test_multiple_solutions);
    tcase_add_test(tc, test_generate);
    tcase_add_test(tc, test_shuffle_is_symmetry);
    tcase_add_test(tc, test_build_dataset);
    tcase_add_test(tc, test_same_seed_same_dataset);
    tcase_add_test(tc, test_csv_errors);
    suite_add_tcase(s, tc);
    return trm_run_suite(s);
}
