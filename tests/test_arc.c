/* test_arc.c — ARC grid helpers (SHA-256, tokens, crop, augmentations and their names),
 * the ARC dataset builder on a tiny hand-made Kaggle JSON pair, and the ARC evaluator's
 * voting on hand-made predictions. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/arc.h"
#include "data/arc_eval.h"
#include "data/build_arc.h"
#include "check_main.h"
#include "config/config.h"
#include "data/dataset.h"
#include "util/base.h"

static void hex(const uint8_t h[32], char out[65]) {
    for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", h[i]);
}

static arc_grid grid_of(int rows, int cols, const int *cells) {
    arc_grid g;
    g.rows = rows, g.cols = cols;
    for (int i = 0; i < rows * cols; i++) g.c[i] = (uint8_t)cells[i];
    return g;
}

static int grid_eq(const arc_grid *a, const arc_grid *b) {
    return a->rows == b->rows && a->cols == b->cols && !memcmp(a->c, b->c, (size_t)(a->rows * a->cols));
}

static void tokens_i32(const arc_grid *g, int pr, int pc, int32_t *out) {
    uint8_t t[ARC_SEQ_LEN];
    arc_tokenize(g, pr, pc, t);
    for (int i = 0; i < ARC_SEQ_LEN; i++) out[i] = t[i];
}

static void write_text(const char *path, const char *text) {
    trm_err e;
    ck_assert_msg(trm_write_file_atomic(path, text, strlen(text), &e) == 0, "%s", e.msg);
}

static char *tmp_path(const char *name) {
    trm_err e;
    ck_assert_msg(trm_mkdirs(TRM_TEST_TMP "/arc", &e) == 0, "%s", e.msg);
    return trm_path_join(TRM_TEST_TMP "/arc", name);
}

/* ---- helpers ------------------------------------------------------------------------------------ */

START_TEST(sha256_vectors) {
    uint8_t h[32];
    char s[65];
    arc_sha256("", 0, h), hex(h, s);
    ck_assert_str_eq(s, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    arc_sha256("abc", 3, h), hex(h, s);
    ck_assert_str_eq(s, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m56 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    arc_sha256(m56, strlen(m56), h), hex(h, s);
    ck_assert_str_eq(s, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char a1000[1000];
    memset(a1000, 'a', sizeof a1000);
    arc_sha256(a1000, sizeof a1000, h), hex(h, s);
    ck_assert_str_eq(s, "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
    /* the reference's grid_hash of [[1,2,3],[4,5,6]] (hashlib over bytes 2,3,1..6) */
    arc_grid g = grid_of(2, 3, (int[]){1, 2, 3, 4, 5, 6});
    arc_grid_hash(&g, h), hex(h, s);
    ck_assert_str_eq(s, "8a85482c8c93e41992c7fef9efca7b25d8e75bcc87bedf3e5f203700a34e9a6a");
}
END_TEST

START_TEST(tokenize_layout) {
    arc_grid g = grid_of(2, 3, (int[]){0, 1, 2, 3, 4, 9});
    uint8_t t[ARC_SEQ_LEN];
    arc_tokenize(&g, 1, 2, t);
    for (int r = 0; r < 30; r++)
        for (int c = 0; c < 30; c++) {
            int want = 0;
            if (r >= 1 && r < 3 && c >= 2 && c < 5) want = g.c[(r - 1) * 3 + c - 2] + 2;
            else if (r == 3 && c >= 2 && c < 5) want = 1; /* EOS row below the grid */
            else if (c == 5 && r >= 1 && r < 3) want = 1; /* EOS column right of it */
            ck_assert_msg(t[r * 30 + c] == want, "(%d,%d): %d want %d", r, c, t[r * 30 + c], want);
        }
    /* A grid touching the bottom-right corner has no EOS row or column. */
    arc_grid big = grid_of(2, 2, (int[]){5, 5, 5, 5});
    arc_tokenize(&big, 28, 28, t);
    int ones = 0;
    for (int i = 0; i < ARC_SEQ_LEN; i++) ones += t[i] == 1;
    ck_assert_int_eq(ones, 0);
    ck_assert_int_eq(t[29 * 30 + 29], 7);
    /* One short of the edge: the EOS row and column are the last ones. */
    arc_tokenize(&big, 27, 27, t);
    ck_assert_int_eq(t[29 * 30 + 27], 1);
    ck_assert_int_eq(t[29 * 30 + 28], 1);
    ck_assert_int_eq(t[27 * 30 + 29], 1);
    ck_assert_int_eq(t[28 * 30 + 29], 1);
    ck_assert_int_eq(t[29 * 30 + 29], 0);
}
END_TEST

START_TEST(crop_recovers_grid) {
    int32_t tok[ARC_SEQ_LEN];
    arc_grid g = grid_of(3, 4, (int[]){1, 0, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1}), back;
    tokens_i32(&g, 0, 0, tok);
    arc_crop(tok, &back);
    ck_assert(grid_eq(&g, &back));
    /* Garbage beyond the EOS markers does not matter. */
    tok[10 * 30 + 10] = 5, tok[3 * 30 + 7] = 9;
    arc_crop(tok, &back);
    ck_assert(grid_eq(&g, &back));
    /* A full 30×30 grid has no EOS at all. */
    arc_grid full;
    full.rows = full.cols = 30;
    for (int i = 0; i < ARC_SEQ_LEN; i++) full.c[i] = (uint8_t)(i * 7 % 10);
    tokens_i32(&full, 0, 0, tok);
    arc_crop(tok, &back);
    ck_assert(grid_eq(&full, &back));
    /* Nothing at the origin: an empty crop. */
    tokens_i32(&g, 1, 0, tok);
    arc_crop(tok, &back);
    ck_assert_int_eq(back.rows * back.cols, 0);
    /* The largest-area rectangle wins over the first row's width (the reference's scan). */
    for (int i = 0; i < ARC_SEQ_LEN; i++) tok[i] = 0;
    for (int c = 0; c < 2; c++) tok[c] = 3;            /* row 0: width 2 */
    for (int r = 1; r < 10; r++) tok[r * 30] = tok[r * 30 + 1] = 4;
    arc_crop(tok, &back);
    ck_assert_int_eq(back.rows, 10);
    ck_assert_int_eq(back.cols, 2);
}
END_TEST

START_TEST(augmentation_inverse_and_names) {
    arc_grid g = grid_of(3, 5, (int[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 1, 0, 2, 7}), x, y;
    const uint8_t perms[3][10] = {
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {0, 9, 8, 7, 6, 5, 4, 3, 2, 1}, {0, 3, 1, 2, 9, 4, 8, 5, 7, 6}};
    for (int t = 0; t < 8; t++)
        for (int p = 0; p < 3; p++) {
            arc_aug a = {.tid = t};
            memcpy(a.perm, perms[p], 10);
            arc_aug_apply(&a, &g, &x);
            arc_aug_invert(&a, &x, &y);
            ck_assert_msg(grid_eq(&g, &y), "t%d perm %d", t, p);
            char *name = arc_aug_name("abc123", &a), *orig;
            arc_aug b;
            int has;
            trm_err e;
            ck_assert_int_eq(arc_aug_parse(name, &orig, &b, &has, &e), 0);
            ck_assert_str_eq(orig, "abc123");
            ck_assert_int_eq(has, 1);
            ck_assert_int_eq(b.tid, t);
            ck_assert_mem_eq(b.perm, a.perm, 10);
            free(name), free(orig);
        }
    /* Colour map first, then the dihedral transform (rot90 counter-clockwise). */
    arc_aug a = {.tid = 1, .perm = {0, 2, 1, 3, 4, 5, 6, 7, 8, 9}};
    arc_grid s = grid_of(2, 3, (int[]){1, 2, 3, 4, 5, 6});
    arc_aug_apply(&a, &s, &x);
    arc_grid want = grid_of(3, 2, (int[]){3, 6, 1, 5, 2, 4});
    ck_assert(grid_eq(&x, &want));
    char *name = arc_aug_name("p", &a);
    ck_assert_str_eq(name, "p|||t1|||0213456789");
    free(name);
    trm_err e;
    char *orig;
    arc_aug b;
    int has;
    ck_assert_int_eq(arc_aug_parse("plain", &orig, &b, &has, &e), 0);
    ck_assert_int_eq(has, 0);
    ck_assert_str_eq(orig, "plain");
    free(orig);
    ck_assert_int_eq(arc_aug_parse("p|||t8|||0123456789", &orig, &b, &has, &e), -1);
    ck_assert_int_eq(arc_aug_parse("p|||t1|||0113456789", &orig, &b, &has, &e), -1);
    ck_assert_int_eq(arc_aug_parse("p|||t1", &orig, &b, &has, &e), -1);
}
END_TEST

START_TEST(grid_validation) {
    trm_err e;
    arc_grid g;
    const char *bad[] = {"[[1,2],[3]]", "[[1,10]]", "[]", "[[-1]]", "[1,2]", "[[1.5]]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cfg_node *n = cfg_parse(bad[i], strlen(bad[i]), "t", &e);
        ck_assert_ptr_nonnull(n);
        ck_assert_msg(arc_grid_from_cfg(n, &g, "X", &e) == -1, "%s accepted", bad[i]);
        ck_assert_msg(strncmp(e.msg, "X:", 2) == 0, "%s", e.msg);
        cfg_free(n);
    }
    json_buf b;
    json_buf_init(&b);
    for (int k = 0; k < 31; k++) json_raw(&b, k ? ",[1]" : "[[1]");
    json_raw(&b, "]");
    cfg_node *n = cfg_parse(b.p, b.len, "t", &e);
    ck_assert_int_eq(arc_grid_from_cfg(n, &g, "X", &e), -1); /* 31 rows */
    cfg_free(n);
    json_buf_free(&b);
}
END_TEST

/* ---- builder ---------------------------------------------------------------------------------------- */

/* Puzzles with distinct non-zero colours in asymmetric places, so that no augmentation
 * other than the identity maps a puzzle onto itself (all 1 + num_aug members exist). */
static const char *TR_CH =
    "{\"A\": {\"train\": [{\"input\": [[1,2,0],[0,0,3]], \"output\": [[3,0],[0,1]]},"
    "                  {\"input\": [[4]], \"output\": [[5,6]]}],"
    "        \"test\": [{\"input\": [[7,8],[9,0],[0,0]]}]},"
    " \"B\": {\"train\": [{\"input\": [[1,0,0,2]], \"output\": [[2],[0],[0],[1]]}],"
    "        \"test\": [{\"input\": [[3,4,5]]}]}}";
static const char *EV_CH =
    "{\"C\": {\"train\": [{\"input\": [[1,2],[3,0]], \"output\": [[0,3],[2,1]]},"
    "                  {\"input\": [[4,5,6]], \"output\": [[6,5,4]]}],"
    "        \"test\": [{\"input\": [[7,0],[0,8]]}, {\"input\": [[9,1,2]]}]}}";
static const char *EV_SOL = "{\"C\": [[[8,0],[0,7]], [[2,1,9]]]}";

static int find_id(char **names, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name)) return i;
    return -1;
}

/* The offset of an example: where its first non-PAD token is. */
static void offset_of(const npy_array *a, int64_t ex, int *pr, int *pc) {
    *pr = *pc = 30;
    for (int i = 0; i < ARC_SEQ_LEN; i++)
        if (npy_get_i64(a, ex * ARC_SEQ_LEN + i)) {
            if (i / 30 < *pr) *pr = i / 30;
            if (i % 30 < *pc) *pc = i % 30;
        }
}

/* Example ex of array a, with its translation undone, checked against tokenising want there. */
static void check_example(const npy_array *a, int64_t ex, int pr, int pc, const arc_grid *want) {
    int32_t tok[ARC_SEQ_LEN];
    tokens_i32(want, pr, pc, tok);
    for (int i = 0; i < ARC_SEQ_LEN; i++)
        ck_assert_msg(npy_get_i64(a, ex * ARC_SEQ_LEN + i) == tok[i], "example %lld token %d", (long long)ex, i);
}

typedef struct {
    const char *name;
    int n_train_part, n_test_part;
    arc_grid in[4], out[4]; /* train-split examples then test-split ones, in file order */
} want_puzzle;

static arc_grid g_parse(const char *json) {
    trm_err e;
    arc_grid g;
    cfg_node *n = cfg_parse(json, strlen(json), "t", &e);
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(arc_grid_from_cfg(n, &g, "t", &e), 0);
    cfg_free(n);
    return g;
}

START_TEST(builder_tiny) {
    char *ptr = tmp_path("tiny_tr_challenges.json"), *pev = tmp_path("tiny_ev_challenges.json"),
         *psol = tmp_path("tiny_ev_solutions.json"), *prefix = tmp_path("tiny"), *out = tmp_path("tiny_out");
    write_text(ptr, TR_CH);
    write_text(pev, EV_CH);
    write_text(psol, EV_SOL);
    const char *subsets[] = {"tr", "ev"};
    trm_arc_opts o = {.input_file_prefix = prefix, .subsets = subsets, .nsubsets = 2, .test_set_name = "ev",
                      .test_set_name2 = "evaluation2", .num_aug = 3, .seed = 7, .puzzle_identifiers_start = 1,
                      .out = out, .force = 1, .quiet = 1};
    trm_err e;
    ck_assert_msg(trm_build_arc(&o, &e) == 0, "%s", e.msg);

    /* identifiers: blank + 3 puzzles × (1 + 3 augmentations) */
    char *idp = trm_path_join(out, "identifiers.json");
    size_t len;
    char *txt = trm_read_file(idp, &len, &e);
    cfg_node *ids = cfg_parse(txt, len, idp, &e);
    ck_assert_ptr_nonnull(ids);
    ck_assert_int_eq(ids->n, 13);
    char *names[13];
    for (int i = 0; i < 13; i++) names[i] = ids->items[i]->s;
    ck_assert_str_eq(names[0], "<blank>");
    for (int i = 1; i < 13; i++) {
        char *orig;
        arc_aug a;
        int has;
        ck_assert_int_eq(arc_aug_parse(names[i], &orig, &a, &has, &e), 0);
        ck_assert(!strcmp(orig, "A") || !strcmp(orig, "B") || !strcmp(orig, "C"));
        ck_assert_int_eq(a.perm[0], 0);
        free(orig);
    }

    want_puzzle wp[3] = {{.name = "A", .n_train_part = 3},
                         {.name = "B", .n_train_part = 2},
                         {.name = "C", .n_train_part = 2, .n_test_part = 2}};
    wp[0].in[0] = g_parse("[[1,2,0],[0,0,3]]"), wp[0].out[0] = g_parse("[[3,0],[0,1]]");
    wp[0].in[1] = g_parse("[[4]]"), wp[0].out[1] = g_parse("[[5,6]]");
    wp[0].in[2] = g_parse("[[7,8],[9,0],[0,0]]"), wp[0].out[2] = g_parse("[[0]]"); /* no solutions: dummy */
    wp[1].in[0] = g_parse("[[1,0,0,2]]"), wp[1].out[0] = g_parse("[[2],[0],[0],[1]]");
    wp[1].in[1] = g_parse("[[3,4,5]]"), wp[1].out[1] = g_parse("[[0]]");
    wp[2].in[0] = g_parse("[[1,2],[3,0]]"), wp[2].out[0] = g_parse("[[0,3],[2,1]]");
    wp[2].in[1] = g_parse("[[4,5,6]]"), wp[2].out[1] = g_parse("[[6,5,4]]");
    wp[2].in[2] = g_parse("[[7,0],[0,8]]"), wp[2].out[2] = g_parse("[[8,0],[0,7]]");
    wp[2].in[3] = g_parse("[[9,1,2]]"), wp[2].out[3] = g_parse("[[2,1,9]]");

    for (int split = 0; split < 2; split++) {
        trm_dataset d;
        const char *paths[1] = {out};
        ck_assert_msg(trm_dataset_open(&d, paths, 1, split ? "test" : "train", &e) == 0, "%s", e.msg);
        ck_assert_int_eq(d.meta.seq_len, 900);
        ck_assert_int_eq(d.meta.vocab_size, 12);
        ck_assert_int_eq(d.meta.num_puzzle_identifiers, 13);
        const trm_dataset_set *s = &d.sets[0];
        ck_assert_str_eq(s->name, "all");
        ck_assert_int_eq(s->inputs.dtype, NPY_U8);
        ck_assert_int_eq(s->n_groups, split ? 1 : 3);
        ck_assert_int_eq(s->n_puzzles, split ? 4 : 12);
        ck_assert_int_eq(s->n_examples, split ? 8 : 28);
        ck_assert_int_eq(d.meta.total_groups, split ? 1 : 3);
        ck_assert_int_eq(d.meta.total_puzzles, split ? 4 : 12);
        ck_assert(fabs(d.meta.mean_puzzle_examples - (split ? 2.0 : 28.0 / 12.0)) < 1e-12);
        int translated = 0, seen_names = 0;
        for (int64_t g = 0; g < s->n_groups; g++) {
            int64_t p0 = npy_get_i64(&s->group_indices, g), p1 = npy_get_i64(&s->group_indices, g + 1);
            ck_assert_int_eq(p1 - p0, 4);
            const want_puzzle *w = NULL;
            for (int64_t p = p0; p < p1; p++) {
                int64_t id = npy_get_i64(&s->puzzle_identifiers, p);
                ck_assert(id >= 1 && id < 13);
                char *orig;
                arc_aug a;
                int has;
                ck_assert_int_eq(arc_aug_parse(names[id], &orig, &a, &has, &e), 0);
                ck_assert_int_eq(has, p != p0); /* the group starts with the puzzle itself */
                for (int k = 0; k < 3; k++)
                    if (!strcmp(wp[k].name, orig)) w = &wp[k];
                free(orig);
                ck_assert_ptr_nonnull(w);
                if (split) ck_assert_str_eq(w->name, "C");
                seen_names++;
                int64_t e0 = npy_get_i64(&s->puzzle_indices, p), e1 = npy_get_i64(&s->puzzle_indices, p + 1);
                int n = split ? w->n_test_part : w->n_train_part, at_origin = 0;
                ck_assert_int_eq(e1 - e0, n);
                for (int64_t x = e0; x < e1; x++) {
                    int k = (int)(x - e0) + (split ? w->n_train_part : 0), pr, pc;
                    arc_grid gi, go;
                    arc_aug_apply(&a, &w->in[k], &gi);
                    arc_aug_apply(&a, &w->out[k], &go);
                    offset_of(&s->inputs, x, &pr, &pc);
                    /* the label is checked at the input's offset: they share it */
                    check_example(&s->inputs, x, pr, pc, &gi);
                    check_example(&s->labels, x, pr, pc, &go);
                    at_origin += pr == 0 && pc == 0;
                    translated += pr || pc;
                }
                ck_assert_msg(at_origin >= 1, "puzzle %lld has no example at offset 0", (long long)p);
                if (split) ck_assert_int_eq(at_origin, n);
            }
        }
        ck_assert_int_eq(seen_names, split ? 4 : 12);
        if (!split) ck_assert_int_gt(translated, 5);
        else ck_assert_int_eq(translated, 0);
        trm_dataset_close(&d);
    }
    /* C's test puzzles carry the same identifiers in both splits. */
    ck_assert_int_ge(find_id(names, 13, "C"), 1);

    char *tpp = trm_path_join(out, "test_puzzles.json");
    char *tt = trm_read_file(tpp, &len, &e);
    cfg_node *tp = cfg_parse(tt, len, tpp, &e);
    ck_assert_ptr_nonnull(tp);
    ck_assert_int_eq(tp->n, 1);
    ck_assert_str_eq(tp->items[0]->key, "C");
    cfg_node *test = cfg_get(tp->items[0], "test"), *train = cfg_get(tp->items[0], "train");
    ck_assert_int_eq(test->n, 2);
    ck_assert_int_eq(train->n, 2);
    arc_grid g;
    ck_assert_int_eq(arc_grid_from_cfg(cfg_get(test->items[1], "output"), &g, "t", &e), 0);
    ck_assert(grid_eq(&g, &wp[2].out[3]));
    ck_assert_int_eq(arc_grid_from_cfg(cfg_get(test->items[0], "input"), &g, "t", &e), 0);
    ck_assert(grid_eq(&g, &wp[2].in[2]));

    /* The evaluator undoes the builder's augmentations: the test labels as predictions
     * pass everything; a wrong cell in one augmented copy only is outvoted. */
    arc_eval *ev = arc_eval_open(out, &e);
    ck_assert_msg(ev != NULL, "%s", e.msg);
    trm_dataset d;
    const char *paths[1] = {out};
    ck_assert_msg(trm_dataset_open(&d, paths, 1, "test", &e) == 0, "%s", e.msg);
    const trm_dataset_set *ts = &d.sets[0];
    for (int64_t p = 0; p < ts->n_puzzles; p++)
        for (int64_t x = npy_get_i64(&ts->puzzle_indices, p); x < npy_get_i64(&ts->puzzle_indices, p + 1); x++) {
            int32_t ti[ARC_SEQ_LEN], tl[ARC_SEQ_LEN];
            npy_copy_i32(&ts->inputs, x * ARC_SEQ_LEN, ARC_SEQ_LEN, ti);
            npy_copy_i32(&ts->labels, x * ARC_SEQ_LEN, ARC_SEQ_LEN, tl);
            if (p == 1) tl[0] = tl[0] == 2 ? 3 : 2;
            ck_assert_int_eq(arc_eval_add(ev, (int32_t)npy_get_i64(&ts->puzzle_identifiers, p), ti, tl, 0.0, &e), 0);
        }
    double pass[ARC_EVAL_NK];
    ck_assert_msg(arc_eval_result(ev, NULL, pass, &e) == 0, "%s", e.msg);
    for (int k = 0; k < ARC_EVAL_NK; k++) ck_assert_double_eq(pass[k], 1.0);
    trm_dataset_close(&d);
    arc_eval_free(ev);

    /* Same seed, same bytes; another seed, other augmentations. */
    char *out2 = tmp_path("tiny_out2");
    o.out = out2;
    ck_assert_msg(trm_build_arc(&o, &e) == 0, "%s", e.msg);
    char *a1 = trm_path_join(out, "train/all__inputs.npy"), *a2 = trm_path_join(out2, "train/all__inputs.npy");
    size_t l1, l2;
    char *d1 = trm_read_file(a1, &l1, &e), *d2 = trm_read_file(a2, &l2, &e);
    ck_assert(l1 == l2 && !memcmp(d1, d2, l1));
    free(d2);
    o.seed = 8;
    ck_assert_msg(trm_build_arc(&o, &e) == 0, "%s", e.msg);
    d2 = trm_read_file(a2, &l2, &e);
    ck_assert(l1 != l2 || memcmp(d1, d2, l1));
    free(d1), free(d2), free(a1), free(a2);

    cfg_free(tp), free(tt), free(tpp);
    cfg_free(ids), free(txt), free(idp);
    free(ptr), free(pev), free(psol), free(prefix), free(out), free(out2);
}
END_TEST

START_TEST(builder_errors) {
    char *prefix = tmp_path("bad"), *p = tmp_path("bad_x_challenges.json"), *out = tmp_path("bad_out");
    const char *subsets[] = {"x"};
    trm_arc_opts o = {.input_file_prefix = prefix, .subsets = subsets, .nsubsets = 1, .test_set_name = "x",
                      .num_aug = 2, .seed = 1, .puzzle_identifiers_start = 1, .out = out, .force = 1, .quiet = 1};
    trm_err e;
    write_text(p, "{\"P1\": {\"train\": [{\"input\": [[1,2],[3]], \"output\": [[1]]}],"
                  " \"test\": [{\"input\": [[1]]}]}}");
    ck_assert_int_eq(trm_build_arc(&o, &e), -1);
    ck_assert_msg(strstr(e.msg, "bad_x_challenges.json") && strstr(e.msg, "P1") && strstr(e.msg, "rectangular"), "%s",
                  e.msg);
    write_text(p, "{\"P2\": {\"train\": [{\"input\": [[1]]}], \"test\": [{\"input\": [[1]]}]}}");
    ck_assert_int_eq(trm_build_arc(&o, &e), -1);
    ck_assert_msg(strstr(e.msg, "P2") && strstr(e.msg, "no output"), "%s", e.msg);
    write_text(p, "{\"P3\": {\"train\": [{\"input\": [[1]], \"output\": [[1]]}], \"test\": []}}");
    ck_assert_int_eq(trm_build_arc(&o, &e), -1);
    ck_assert_msg(strstr(e.msg, "P3") && strstr(e.msg, "no test examples"), "%s", e.msg);
    ck_assert(!trm_file_exists(out));
    free(prefix), free(p), free(out);
}
END_TEST

/* ---- evaluator ---------------------------------------------------------------------------------------- */

static void add_pred(arc_eval *ev, int id, const char *aug_name, const arc_grid *in, const arc_grid *pred, double q) {
    arc_aug a;
    char *orig;
    int has;
    trm_err e;
    ck_assert_int_eq(arc_aug_parse(aug_name, &orig, &a, &has, &e), 0);
    free(orig);
    arc_grid ai, ap;
    arc_aug_apply(&a, in, &ai);
    arc_aug_apply(&a, pred, &ap);
    int32_t ti[ARC_SEQ_LEN], tp[ARC_SEQ_LEN];
    tokens_i32(&ai, 0, 0, ti);
    tokens_i32(&ap, 0, 0, tp);
    ck_assert_msg(arc_eval_add(ev, id, ti, tp, q, &e) == 0, "%s", e.msg);
}

START_TEST(evaluator_voting) {
    char *dir = tmp_path("evald"), *idp, *tpp, *sub;
    trm_err e;
    ck_assert_int_eq(trm_mkdirs(dir, &e), 0);
    idp = trm_path_join(dir, "identifiers.json");
    tpp = trm_path_join(dir, "test_puzzles.json");
    sub = trm_path_join(dir, "submission.json");
    write_text(idp, "[\"<blank>\", \"P\", \"P|||t1|||0213456789\", \"P|||t0|||0987654321\", \"Q\", "
                    "\"Q|||t4|||0123456789\"]");
    write_text(tpp, "{\"P\": {\"train\": [], \"test\": [{\"input\": [[1,2],[3,4]], \"output\": [[5]]},"
                    "                                  {\"input\": [[6,7,8]], \"output\": [[9,9]]}]},"
                    " \"Q\": {\"test\": [{\"input\": [[1,0,0]], \"output\": [[0,0,1]]}]},"
                    " \"R\": {\"test\": [{\"input\": [[2]], \"output\": [[3]]}]}}");
    arc_eval *ev = arc_eval_open(dir, &e);
    ck_assert_msg(ev != NULL, "%s", e.msg);
    arc_grid ip0 = g_parse("[[1,2],[3,4]]"), op0 = g_parse("[[5]]"), ip1 = g_parse("[[6,7,8]]"),
             op1 = g_parse("[[9,9]]"), iq = g_parse("[[1,0,0]]"), oq = g_parse("[[0,0,1]]"),
             wrong_b = g_parse("[[1,2]]"), wrong_c = g_parse("[[3],[4]]"), wrong_d = g_parse("[[9]]"),
             wrong_e = g_parse("[[1,0,0]]");
    /* P test 0: B twice with high q beats the label A (twice, via two augmentations, low q);
     * C once with the highest q comes third: count first, then mean sigmoid(q). */
    add_pred(ev, 1, "P", &ip0, &wrong_b, 3.0);
    add_pred(ev, 2, "P|||t1|||0213456789", &ip0, &op0, 0.0);
    add_pred(ev, 1, "P", &ip0, &wrong_c, 10.0);
    add_pred(ev, 1, "P", &ip0, &wrong_b, 2.0);
    add_pred(ev, 3, "P|||t0|||0987654321", &ip0, &op0, -1.0);
    /* P test 1: an exact tie (count 1, same q): the first seen (the label) ranks first. */
    add_pred(ev, 1, "P", &ip1, &op1, -5.0);
    add_pred(ev, 2, "P|||t1|||0213456789", &ip1, &wrong_d, -5.0);
    /* Q: E twice with low q beats the label once with high q. */
    add_pred(ev, 5, "Q|||t4|||0123456789", &iq, &wrong_e, -3.0);
    add_pred(ev, 4, "Q", &iq, &oq, 5.0);
    add_pred(ev, 5, "Q|||t4|||0123456789", &iq, &wrong_e, -3.0);
    /* Blank rows are skipped; unknown identifiers are errors. */
    int32_t tok[ARC_SEQ_LEN] = {0};
    ck_assert_int_eq(arc_eval_add(ev, 0, tok, tok, 0.0, &e), 0);
    ck_assert_int_eq(arc_eval_add(ev, 6, tok, tok, 0.0, &e), -1);
    ck_assert_int_eq(arc_eval_add(ev, -1, tok, tok, 0.0, &e), -1);

    double pass[ARC_EVAL_NK];
    ck_assert_msg(arc_eval_result(ev, sub, pass, &e) == 0, "%s", e.msg);
    /* P: 1/2 at K=1, 2/2 from K=2; Q: 0 then 1; R: no predictions, 0. */
    ck_assert_double_eq_tol(pass[0], (0.5 + 0 + 0) / 3.0, 1e-12);
    for (int k = 1; k < ARC_EVAL_NK; k++) ck_assert_double_eq_tol(pass[k], 2.0 / 3.0, 1e-12);

    size_t len;
    char *txt = trm_read_file(sub, &len, &e);
    cfg_node *s = cfg_parse(txt, len, sub, &e);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->n, 3);
    cfg_node *p = cfg_get(s, "P"), *q = cfg_get(s, "Q"), *r = cfg_get(s, "R");
    ck_assert_int_eq(p->n, 2);
    ck_assert_int_eq(q->n, 1);
    ck_assert_int_eq(r->n, 0);
    const arc_grid *want[3][2] = {{&wrong_b, &op0}, {&op1, &wrong_d}, {&wrong_e, &oq}};
    const cfg_node *att[3] = {p->items[0], p->items[1], q->items[0]};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++) {
            arc_grid g;
            ck_assert_int_eq(arc_grid_from_cfg(cfg_get(att[i], k ? "attempt_2" : "attempt_1"), &g, "t", &e), 0);
            ck_assert_msg(grid_eq(&g, want[i][k]), "entry %d attempt %d", i, k + 1);
        }
    cfg_free(s);
    free(txt);

    /* After a reset nothing is predicted. */
    arc_eval_reset(ev);
    ck_assert_int_eq(arc_eval_result(ev, NULL, pass, &e), 0);
    for (int k = 0; k < ARC_EVAL_NK; k++) ck_assert_double_eq(pass[k], 0.0);
    /* A single prediction: attempt_2 repeats attempt_1. */
    add_pred(ev, 4, "Q", &iq, &oq, 0.0);
    ck_assert_int_eq(arc_eval_result(ev, sub, pass, &e), 0);
    ck_assert_double_eq_tol(pass[0], 1.0 / 3.0, 1e-12);
    txt = trm_read_file(sub, &len, &e);
    ck_assert_ptr_nonnull(strstr(txt, "\"Q\":[{\"attempt_1\":[[0,0,1]],\"attempt_2\":[[0,0,1]]}]"));
    free(txt);
    arc_eval_free(ev);
    free(dir), free(idp), free(tpp), free(sub);
}
END_TEST

int main(void) {
    Suite *s = suite_create("arc");
    TCase *tc = tcase_create("arc");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, sha256_vectors);
    tcase_add_test(tc, tokenize_layout);
    tcase_add_test(tc, crop_recovers_grid);
    tcase_add_test(tc, augmentation_inverse_and_names);
    tcase_add_test(tc, grid_validation);
    tcase_add_test(tc, builder_tiny);
    tcase_add_test(tc, builder_errors);
    tcase_add_test(tc, evaluator_voting);
    suite_add_tcase(s, tc);
    return trm_run_suite(s);
}
