/* test_maze.c — the maze generator (checked with this file's own BFS: the marked path is a
 * shortest S→G path, the only one, at least the minimum long) and the `trm data maze`
 * builder (tokens, the 8 dihedral copies per training maze, unaugmented test split,
 * indices and metadata as read back by trm_dataset_open, subsampling, CSV errors naming
 * FILE:LINE, refusal to overwrite). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "data/build_maze.h"
#include "check_main.h"
#include "data/dataset.h"
#include "data/dihedral.h"
#include "data/maze.h"

#define MAXN 64

/* ---- an independent BFS ------------------------------------------------------------ */

/* Distances and shortest-path counts (capped at 1000) from src over non-'#' cells. */
static void bfs(const char *g, int n, int src, int *dist, int *cnt) {
    int q[MAXN * MAXN], h = 0, t = 0;
    for (int i = 0; i < n * n; i++) dist[i] = -1, cnt[i] = 0;
    dist[src] = 0, cnt[src] = 1, q[t++] = src;
    while (h < t) {
        int u = q[h++];
        for (int d = 0; d < 4; d++) {
            int r = u / n + (d == 0) - (d == 1), c = u % n + (d == 2) - (d == 3);
            if (r < 0 || r >= n || c < 0 || c >= n || g[r * n + c] == '#') continue;
            int v = r * n + c;
            if (dist[v] < 0) dist[v] = dist[u] + 1, q[t++] = v;
            if (dist[v] == dist[u] + 1) cnt[v] = cnt[v] + cnt[u] > 1000 ? 1000 : cnt[v] + cnt[u];
        }
    }
}

static int adjacent(int a, int b, int n) {
    int dr = abs(a / n - b / n), dc = abs(a % n - b % n);
    return dr + dc == 1;
}

/* Checks one generated maze; returns the path length. */
static int check_maze(const char *q, const char *a, int n, int min_len) {
    int s = -1, g = -1;
    for (int i = 0; i < n * n; i++) {
        ck_assert_msg(strchr("# SG", q[i]) && q[i], "question cell %d is '%c'", i, q[i]);
        if (q[i] == 'S') {
            ck_assert_int_eq(s, -1);
            s = i;
        }
        if (q[i] == 'G') {
            ck_assert_int_eq(g, -1);
            g = i;
        }
        ck_assert_msg(a[i] == q[i] || (q[i] == ' ' && a[i] == 'o'), "answer cell %d", i);
    }
    ck_assert(s >= 0 && g >= 0);
    static int ds[MAXN * MAXN], dg[MAXN * MAXN], cs[MAXN * MAXN], cg[MAXN * MAXN];
    bfs(q, n, s, ds, cs);
    bfs(q, n, g, dg, cg);
    int D = ds[g];
    ck_assert_int_ge(D, min_len);
    ck_assert_int_eq(cs[g], 1); /* exactly one shortest path */
    int at[MAXN * MAXN], no = 0;
    for (int k = 0; k <= D; k++) at[k] = -1;
    at[0] = s, at[D] = g;
    for (int i = 0; i < n * n; i++) {
        if (a[i] != 'o') continue;
        no++;
        ck_assert_int_eq(ds[i] + dg[i], D); /* on a shortest path */
        ck_assert_int_eq(at[ds[i]], -1);    /* one cell per distance */
        at[ds[i]] = i;
    }
    ck_assert_int_eq(no, D - 1);
    for (int k = 0; k < D; k++) ck_assert_msg(adjacent(at[k], at[k + 1], n), "path breaks at step %d", k);
    return D;
}

START_TEST(generator_paths) {
    const int sizes[4] = {5, 12, 15, 30};
    for (int si = 0; si < 4; si++) {
        int n = sizes[si], min_len = trm_maze_default_min_len(n);
        trm_maze_work w;
        trm_maze_work_init(&w, n);
        char q[MAXN * MAXN], a[MAXN * MAXN];
        for (int i = 0; i < 60; i++) {
            trm_rng r;
            trm_rng_init(&r, 7, (uint64_t)i);
            int len;
            trm_err e;
            ck_assert_msg(trm_maze_generate(&r, &w, min_len, 1000, q, a, &len, &e) == 0, "%s", e.msg);
            ck_assert_int_eq(check_maze(q, a, n, min_len), len);
        }
        trm_maze_work_free(&w);
    }
}
END_TEST

START_TEST(generator_deterministic_and_limits) {
    int n = 15, len1, len2;
    trm_maze_work w;
    trm_maze_work_init(&w, n);
    char q1[225], a1[225], q2[225], a2[225];
    trm_rng r;
    trm_err e;
    trm_rng_init(&r, 3, 9);
    ck_assert_int_eq(trm_maze_generate(&r, &w, 30, 1000, q1, a1, &len1, &e), 0);
    trm_rng_init(&r, 3, 9);
    ck_assert_int_eq(trm_maze_generate(&r, &w, 30, 1000, q2, a2, &len2, &e), 0);
    ck_assert(!memcmp(q1, q2, 225) && !memcmp(a1, a2, 225) && len1 == len2);
    ck_assert_int_ge(len1, 30);
    /* 15 → 7×7 lattice: no path is longer than 2·48 = 96 moves */
    ck_assert_int_eq(trm_maze_generate(&r, &w, 97, 1000, q1, a1, &len1, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "97"));
    trm_maze_work_free(&w);
}
END_TEST

START_TEST(bfs_counts_paths) {
    /* an open 3×3 room: from a corner to the opposite corner there are C(4,2) = 6 paths */
    const char g[9] = {'S', ' ', ' ', ' ', ' ', ' ', ' ', ' ', 'G'};
    int dist[9], queue[9];
    uint32_t count[9];
    trm_maze_bfs(g, 3, 0, dist, count, queue);
    ck_assert_int_eq(dist[8], 4);
    ck_assert_uint_eq(count[8], 6);
    ck_assert_uint_eq(count[4], 2);
}
END_TEST

/* ---- builder ----------------------------------------------------------------------- */

static char *tmp_path(const char *name) {
    trm_err e;
    ck_assert_int_eq(trm_mkdirs(TRM_TEST_TMP, &e), 0);
    char *p = trm_path_join(TRM_TEST_TMP, name);
    trm_remove_tree(p, NULL);
    return p;
}

static void write_text(const char *dir, const char *name, const char *text) {
    trm_err e;
    ck_assert_int_eq(trm_mkdirs(dir, &e), 0);
    char *p = trm_path_join(dir, name);
    ck_assert_msg(trm_write_file_atomic(p, text, strlen(text), &e) == 0, "%s", e.msg);
    free(p);
}

static void gen_csv(const char *dir, const char *name, int64_t count, int n, uint64_t seed) {
    trm_err e;
    ck_assert_int_eq(trm_mkdirs(dir, &e), 0);
    char *p = trm_path_join(dir, name);
    trm_maze_gen_opts o = {.out = p, .count = count, .size = n, .seed = seed};
    ck_assert_msg(trm_maze_gen(&o, &e) == 0, "%s", e.msg);
    free(p);
}

/* The question/answer fields of the CSV's data rows (fields hold no commas or quotes). */
static int load_csv(const char *dir, const char *name, char qs[][MAXN * MAXN], char as[][MAXN * MAXN], int max) {
    trm_err e;
    char *p = trm_path_join(dir, name);
    size_t len;
    char *t = trm_read_file(p, &len, &e);
    ck_assert_ptr_nonnull(t);
    int rows = 0;
    char *line = strchr(t, '\n') + 1;
    while (*line && rows < max) {
        char *c1 = strchr(line, ','), *c2 = strchr(c1 + 1, ','), *c3 = strchr(c2 + 1, ',');
        memcpy(qs[rows], c1 + 1, (size_t)(c2 - c1 - 1));
        memcpy(as[rows], c2 + 1, (size_t)(c3 - c2 - 1));
        rows++;
        line = strchr(line, '\n') + 1;
    }
    free(t);
    free(p);
    return rows;
}

static void open_split(trm_dataset *d, const char *out, const char *split) {
    trm_err e;
    const char *paths[1] = {out};
    ck_assert_msg(trm_dataset_open(d, paths, 1, split, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(d->nsets, 1);
    ck_assert_str_eq(d->sets[0].name, "all");
}

static void check_meta(const trm_dataset *d, int n, int64_t groups) {
    const trm_dataset_meta *m = &d->meta;
    ck_assert_int_eq(m->vocab_size, 6);
    ck_assert_int_eq(m->seq_len, n * n);
    ck_assert_int_eq(m->pad_id, 0);
    ck_assert(m->has_ignore_label && m->ignore_label_id == 0);
    ck_assert_int_eq(m->blank_identifier_id, 0);
    ck_assert_int_eq(m->num_puzzle_identifiers, 1);
    ck_assert_int_eq(m->total_groups, groups);
    ck_assert_int_eq(m->total_puzzles, groups);
    ck_assert(m->mean_puzzle_examples == 1.0);
    ck_assert(m->nsets == 1 && !strcmp(m->sets[0], "all"));
}

/* Example ex decoded to characters (token k → CHARSET[k-1]). */
static void decode(const npy_array *arr, int64_t ex, int nn, char *out) {
    for (int k = 0; k < nn; k++) {
        int64_t tok = npy_get_i64(arr, ex * nn + k);
        ck_assert(tok >= 1 && tok <= 5);
        out[k] = TRM_MAZE_CHARSET[tok - 1];
    }
}

/* Every puzzle of group g (copies naug) is dihedral t of row `row`; indices as built. */
static void check_group(const trm_dataset_set *s, int64_t g, int naug, int n, const char *q, const char *a) {
    int nn = n * n;
    ck_assert_int_eq(npy_get_i64(&s->group_indices, g), g * naug);
    ck_assert_int_eq(npy_get_i64(&s->group_indices, g + 1), (g + 1) * naug);
    for (int t = 0; t < naug; t++) {
        int64_t p = g * naug + t;
        ck_assert_int_eq(npy_get_i64(&s->puzzle_indices, p), p);
        ck_assert_int_eq(npy_get_i64(&s->puzzle_indices, p + 1), p + 1);
        ck_assert_int_eq(npy_get_i64(&s->puzzle_identifiers, p), 0);
        char in[MAXN * MAXN], lab[MAXN * MAXN], back[MAXN * MAXN];
        decode(&s->inputs, p, nn, in);
        decode(&s->labels, p, nn, lab);
        int inv = trm_dihedral_inverse(t);
        trm_dihedral((const uint8_t *)in, n, n, inv, (uint8_t *)back, NULL, NULL);
        ck_assert_msg(!memcmp(back, q, (size_t)nn), "group %lld copy %d: question is not transform %d", (long long)g, t, t);
        trm_dihedral((const uint8_t *)lab, n, n, inv, (uint8_t *)back, NULL, NULL);
        ck_assert_msg(!memcmp(back, a, (size_t)nn), "group %lld copy %d: answer is not transform %d", (long long)g, t, t);
        if (t > 0) ck_assert_msg(memcmp(in, q, (size_t)nn), "copy %d equals the original", t);
    }
}

static char qs[40][MAXN * MAXN], as[40][MAXN * MAXN];

START_TEST(builder_aug) {
    char *dir = tmp_path("maze_aug"), *csv = trm_path_join(dir, "csv"), *out = trm_path_join(dir, "out");
    int n = 13;
    gen_csv(csv, "train.csv", 12, n, 1);
    gen_csv(csv, "test.csv", 5, n, 2);
    trm_maze_build_opts o = {.csv_dir = csv, .out = out, .aug = 1, .seed = 0};
    trm_err e;
    ck_assert_msg(trm_build_maze(&o, &e) == 0, "%s", e.msg);
    trm_dataset d;
    open_split(&d, out, "train");
    check_meta(&d, n, 12);
    const trm_dataset_set *s = &d.sets[0];
    ck_assert(s->n_groups == 12 && s->n_puzzles == 96 && s->n_examples == 96);
    ck_assert_int_eq(load_csv(csv, "train.csv", qs, as, 40), 12);
    for (int g = 0; g < 12; g++) check_group(s, g, 8, n, qs[g], as[g]);
    trm_dataset_close(&d);

    open_split(&d, out, "test");
    check_meta(&d, n, 5);
    s = &d.sets[0];
    ck_assert(s->n_groups == 5 && s->n_puzzles == 5 && s->n_examples == 5);
    ck_assert_int_eq(load_csv(csv, "test.csv", qs, as, 40), 5);
    for (int g = 0; g < 5; g++) check_group(s, g, 1, n, qs[g], as[g]);
    trm_dataset_close(&d);

    o.aug = 0; /* an existing OUT is refused without force, replaced with it */
    ck_assert_int_eq(trm_build_maze(&o, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "already exists"));
    o.force = 1;
    ck_assert_msg(trm_build_maze(&o, &e) == 0, "%s", e.msg);
    open_split(&d, out, "train");
    ck_assert_int_eq(d.sets[0].n_examples, 12);
    trm_dataset_close(&d);
    free(csv);
    free(out);
    free(dir);
}
END_TEST

START_TEST(builder_tokens) {
    char *dir = tmp_path("maze_tok"), *out = trm_path_join(dir, "out");
    write_text(dir, "train.csv", "source,question,answer,rating\r\n\"a, b\",#S  ##G  ,#So ##G  ,2\r\n");
    write_text(dir, "test.csv", "source,question,answer,rating\nx,G S  ####,GoS  ####,1\n");
    trm_maze_build_opts o = {.csv_dir = dir, .out = out};
    trm_err e;
    ck_assert_msg(trm_build_maze(&o, &e) == 0, "%s", e.msg);
    const int want_in[9] = {1, 3, 2, 2, 1, 1, 4, 2, 2}, want_lab[9] = {1, 3, 5, 2, 1, 1, 4, 2, 2};
    trm_dataset d;
    open_split(&d, out, "train");
    for (int k = 0; k < 9; k++) {
        ck_assert_int_eq(npy_get_i64(&d.sets[0].inputs, k), want_in[k]);
        ck_assert_int_eq(npy_get_i64(&d.sets[0].labels, k), want_lab[k]);
    }
    trm_dataset_close(&d);
    free(out);
    free(dir);
}
END_TEST

/* Subsampled rows are distinct CSV rows, reproducible for a seed. */
static void subsample_rows(const char *csv, const char *out, uint64_t seed, int n, int *rows) {
    trm_maze_build_opts o = {.csv_dir = csv, .out = out, .subsample_size = 6, .seed = seed, .force = 1};
    trm_err e;
    ck_assert_msg(trm_build_maze(&o, &e) == 0, "%s", e.msg);
    trm_dataset d;
    open_split(&d, out, "train");
    check_meta(&d, n, 6);
    ck_assert_int_eq(d.sets[0].n_examples, 6);
    for (int g = 0; g < 6; g++) {
        char in[MAXN * MAXN];
        decode(&d.sets[0].inputs, g, n * n, in);
        rows[g] = -1;
        for (int r = 0; r < 20; r++)
            if (!memcmp(in, qs[r], (size_t)(n * n))) rows[g] = r;
        ck_assert_int_ge(rows[g], 0);
        for (int h = 0; h < g; h++) ck_assert_int_ne(rows[h], rows[g]);
    }
    trm_dataset_close(&d);
}

START_TEST(builder_subsample) {
    char *dir = tmp_path("maze_sub"), *csv = trm_path_join(dir, "csv"), *out = trm_path_join(dir, "out");
    int n = 11, a[6], b[6], c[6];
    gen_csv(csv, "train.csv", 20, n, 5);
    gen_csv(csv, "test.csv", 3, n, 6);
    ck_assert_int_eq(load_csv(csv, "train.csv", qs, as, 40), 20);
    subsample_rows(csv, out, 1, n, a);
    subsample_rows(csv, out, 1, n, b);
    subsample_rows(csv, out, 2, n, c);
    ck_assert(!memcmp(a, b, sizeof a));
    ck_assert(memcmp(a, c, sizeof a));
    free(csv);
    free(out);
    free(dir);
}
END_TEST

/* A build from a train.csv (and test.csv) that must fail with `want` in the message. */
static void expect_csv_error(const char *train, const char *test, const char *want) {
    char *dir = tmp_path("maze_bad"), *out = trm_path_join(dir, "out");
    write_text(dir, "train.csv", train);
    write_text(dir, "test.csv", test ? test : "source,question,answer,rating\nx,S G ,SoG ,2\n");
    trm_maze_build_opts o = {.csv_dir = dir, .out = out};
    trm_err e;
    ck_assert_int_eq(trm_build_maze(&o, &e), -1);
    ck_assert_msg(strstr(e.msg, want), "message '%s' lacks '%s'", e.msg, want);
    ck_assert(!trm_file_exists(out));
    free(out);
    free(dir);
}

START_TEST(csv_errors) {
    const char *h = "source,question,answer,rating\n";
    char buf[512];
    expect_csv_error("source,question,answer\nx,S G ,SoG ,2\n", NULL, "train.csv:1: expected the header");
    snprintf(buf, sizeof buf, "%sx,S G ,SoG ,2\nx,S G ,SoG \n", h);
    expect_csv_error(buf, NULL, "train.csv:3: expected 4 fields");
    snprintf(buf, sizeof buf, "%sx,S G ,SoG ,2\n\nx,S G  ,SoG  ,2\n", h);
    expect_csv_error(buf, NULL, "train.csv:4: question has 5 characters, not a square");
    snprintf(buf, sizeof buf, "%sx,S G ,SoG ,2\nx,S G######,SoG######,2\n", h);
    expect_csv_error(buf, NULL, "train.csv:3: question is 3");
    snprintf(buf, sizeof buf, "%sx,S Gx,SoGx,2\n", h);
    expect_csv_error(buf, NULL, "train.csv:2: question: character 'x' at row 2, column 2");
    snprintf(buf, sizeof buf, "%sx,S G ,S#G ,2\n", h);
    expect_csv_error(buf, NULL, "train.csv:2: answer differs from the question at row 1, column 2");
    snprintf(buf, sizeof buf, "%sx,S G ,SoG,2\n", h);
    expect_csv_error(buf, NULL, "train.csv:2: answer has 3 characters");
    snprintf(buf, sizeof buf, "%sx,\"S G ,SoG ,2\n", h);
    expect_csv_error(buf, NULL, "train.csv:2: unbalanced quotes");
    expect_csv_error(h, NULL, "train.csv: no mazes");
    expect_csv_error("", NULL, "train.csv:1: empty file");
    snprintf(buf, sizeof buf, "%sx,S G ,SoG ,2\n", h);
    expect_csv_error(buf, "source,question,answer,rating\nx,S G######,SoG######,2\n",
                     "test.csv:2: question is 3x3 but the training mazes are 2x2");
}
END_TEST

START_TEST(gen_refuses_overwrite) {
    char *dir = tmp_path("maze_gen"), *p = trm_path_join(dir, "m.csv");
    trm_err e;
    ck_assert_int_eq(trm_mkdirs(dir, &e), 0);
    trm_maze_gen_opts o = {.out = p, .count = 3, .size = 9, .seed = 1};
    ck_assert_int_eq(trm_maze_gen(&o, &e), 0);
    ck_assert(o.len_min >= trm_maze_default_min_len(9) && o.len_max >= o.len_min);
    ck_assert_int_eq(trm_maze_gen(&o, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "already exists"));
    o.force = 1;
    ck_assert_int_eq(trm_maze_gen(&o, &e), 0);
    free(p);
    free(dir);
}
END_TEST

int main(void) {
    Suite *s = suite_create("maze");
    TCase *tc = tcase_create("maze");
    tcase_add_test(tc, generator_paths);
    tcase_add_test(tc, generator_deterministic_and_limits);
    tcase_add_test(tc, bfs_counts_paths);
    tcase_add_test(tc, builder_aug);
    tcase_add_test(tc, builder_tokens);
    tcase_add_test(tc, builder_subsample);
    tcase_add_test(tc, csv_errors);
    tcase_add_test(tc, gen_refuses_overwrite);
    suite_add_tcase(s, tc);
    return trm_run_suite(s);
}
