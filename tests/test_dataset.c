/* test_dataset.c — dataset directory reading, metadata merging, validation errors, the
 * training sampler's properties (full batches, membership, group walk, rank slicing,
 * determinism, resumption, uniform draws) and the in-order padded test iterator.
 * Fixtures are written here with npy_write; every example's tokens encode its index,
 * so a returned row can be traced back to the example it came from. */
#include <check.h>

#include "check_main.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"

#define S 4       /* seq_len of every fixture */
#define V 1000    /* vocab_size */
#define IGN 0     /* ignore_label_id */

static char root[512];
static int fixture_counter;

static void setup(void) {
    trm_err e;
    snprintf(root, sizeof root, "%s/dataset_%d", TRM_TEST_TMP, (int)getpid());
    ck_assert_msg(trm_mkdirs(root, &e) == 0, "%s", e.msg);
}

/* ---- fixture writing ------------------------------------------------------------------- */

typedef struct {
    int64_t seq_len, vocab_size, pad_id, blank_id, num_ids, total_groups, total_puzzles;
    int ignore_null;
    int64_t ignore_label_id;
    double mean;
    const char *sets; /* JSON list text */
    int omit_total_puzzles;
} fx_meta;

static fx_meta default_meta(void) {
    fx_meta m = {S, V, 0, 0, 1000, 0, 0, 0, IGN, 1.0, "[\"all\"]", 0};
    return m;
}

/* A fresh directory DIR with DIR/<split>/ created; returns DIR. */
static char *new_dir(const char *split) {
    char *dir = xasprintf("%s/fx%d", root, fixture_counter++);
    char *sd = xasprintf("%s/%s", dir, split);
    trm_err e;
    ck_assert_msg(trm_mkdirs(sd, &e) == 0, "%s", e.msg);
    free(sd);
    return dir;
}

static void write_text(const char *path, const char *text) {
    trm_err e;
    ck_assert_msg(trm_write_file_atomic(path, text, strlen(text), &e) == 0, "%s", e.msg);
}

static void write_meta(const char *dir, const char *split, const fx_meta *m) {
    char ign[32] = "null";
    if (!m->ignore_null) snprintf(ign, sizeof ign, "%lld", (long long)m->ignore_label_id);
    char total[64] = "";
    if (!m->omit_total_puzzles)
        snprintf(total, sizeof total, ", \"total_puzzles\": %lld", (long long)m->total_puzzles);
    char *json = xasprintf(
        "{\"pad_id\": %lld, \"ignore_label_id\": %s, \"blank_identifier_id\": %lld, "
        "\"vocab_size\": %lld, \"seq_len\": %lld, \"num_puzzle_identifiers\": %lld, "
        "\"total_groups\": %lld, \"mean_puzzle_examples\": %.17g%s, \"sets\": %s}\n",
        (long long)m->pad_id, ign, (long long)m->blank_id, (long long)m->vocab_size,
        (long long)m->seq_len, (long long)m->num_ids, (long long)m->total_groups, m->mean, total,
        m->sets);
    char *path = xasprintf("%s/%s/dataset.json", dir, split);
    write_text(path, json);
    free(path);
    free(json);
}

static void write_npy(const char *dir, const char *split, const char *set, const char *field,
                      npy_dtype t, int ndim, const int64_t *shape, const void *data) {
    char *path = xasprintf("%s/%s/%s__%s.npy", dir, split, set, field);
    trm_err e;
    ck_assert_msg(npy_write(path, t, ndim, shape, data, &e) == 0, "%s", e.msg);
    free(path);
}

/* What a fixture row holds: tokens [x%1000, x/1000, tag, 7], labels [(3x+1)%V, tag, IGN, x%10]. */
static int32_t input_tok(int64_t x, int tag, int j) {
    const int32_t row[S] = {(int32_t)(x % 1000), (int32_t)(x / 1000), tag, 7};
    return row[j];
}
static int32_t label_raw(int64_t x, int tag, int j) {
    const int32_t row[S] = {(int32_t)((3 * x + 1) % V), tag, IGN, (int32_t)(x % 10)};
    return row[j];
}
static int32_t label_collated(int64_t x, int tag, int j) {
    int32_t v = label_raw(x, tag, j);
    return v == IGN ? TRM_IGNORE_LABEL : v;
}

typedef struct {
    int64_t n_examples, n_puzzles, n_groups;
    int64_t *pi, *gi; /* copies for the checks */
    int tag, id_base;
} fx_set;

static void fx_set_free(fx_set *f) {
    free(f->pi);
    free(f->gi);
}

/* A set with G groups; ppg[g] puzzles in group g; epp[p] examples in puzzle p.
 * Puzzle p gets identifier id_base + p. inputs are uint16, labels int32, indices int32/64. */
static fx_set write_set(const char *dir, const char *split, const char *set, int G,
                        const int *ppg, const int *epp, int tag, int id_base) {
    fx_set f = {0, 0, G, NULL, NULL, tag, id_base};
    for (int g = 0; g < G; g++) f.n_puzzles += ppg[g];
    for (int64_t p = 0; p < f.n_puzzles; p++) f.n_examples += epp[p];
    f.gi = malloc(sizeof(int64_t) * (size_t)(G + 1));
    f.pi = malloc(sizeof(int64_t) * (size_t)(f.n_puzzles + 1));
    f.gi[0] = f.pi[0] = 0;
    for (int g = 0; g < G; g++) f.gi[g + 1] = f.gi[g] + ppg[g];
    for (int64_t p = 0; p < f.n_puzzles; p++) f.pi[p + 1] = f.pi[p] + epp[p];
    int64_t N = f.n_examples;
    uint16_t *in = malloc(sizeof(uint16_t) * (size_t)(N * S + 1));
    int32_t *lab = malloc(sizeof(int32_t) * (size_t)(N * S + 1));
    for (int64_t x = 0; x < N; x++)
        for (int j = 0; j < S; j++) {
            in[x * S + j] = (uint16_t)input_tok(x, tag, j);
            lab[x * S + j] = label_raw(x, tag, j);
        }
    int32_t *pid = malloc(sizeof(int32_t) * (size_t)(f.n_puzzles + 1));
    int32_t *pi32 = malloc(sizeof(int32_t) * (size_t)(f.n_puzzles + 1));
    for (int64_t p = 0; p < f.n_puzzles; p++) pid[p] = (int32_t)(id_base + p);
    for (int64_t p = 0; p <= f.n_puzzles; p++) pi32[p] = (int32_t)f.pi[p];
    int64_t sh2[2] = {N, S}, np = f.n_puzzles, np1 = f.n_puzzles + 1, ng1 = G + 1;
    write_npy(dir, split, set, "inputs", NPY_U16, 2, sh2, in);
    write_npy(dir, split, set, "labels", NPY_I32, 2, sh2, lab);
    write_npy(dir, split, set, "puzzle_identifiers", NPY_I32, 1, &np, pid);
    write_npy(dir, split, set, "puzzle_indices", NPY_I32, 1, &np1, pi32);
    write_npy(dir, split, set, "group_indices", NPY_I64, 1, &ng1, f.gi);
    free(in);
    free(lab);
    free(pid);
    free(pi32);
    return f;
}

/* Uniform layout: G groups x P puzzles x K examples. */
static fx_set write_uniform_set(const char *dir, const char *split, const char *set, int G,
                                int P, int K, int tag) {
    int *ppg = malloc(sizeof(int) * (size_t)G), *epp = malloc(sizeof(int) * (size_t)(G * P));
    for (int g = 0; g < G; g++) ppg[g] = P;
    for (int p = 0; p < G * P; p++) epp[p] = K;
    fx_set f = write_set(dir, split, set, G, ppg, epp, tag, 1);
    free(ppg);
    free(epp);
    return f;
}

static trm_dataset open_one(const char *dir, const char *split) {
    trm_dataset d;
    trm_err e;
    const char *paths[1] = {dir};
    ck_assert_msg(trm_dataset_open(&d, paths, 1, split, &e) == 0, "%s", e.msg);
    return d;
}

/* Opening must fail with a message holding every non-NULL needle. */
static void expect_open_fail(const char *const *paths, int n, const char *split, const char *a,
                             const char *b, const char *c) {
    trm_dataset d;
    trm_err e = {{0}};
    ck_assert_int_eq(trm_dataset_open(&d, paths, n, split, &e), -1);
    const char *needles[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (needles[i]) ck_assert_msg(strstr(e.msg, needles[i]), "'%s' not in: %s", needles[i], e.msg);
    ck_assert_int_eq(d.nsets, 0); /* left closed */
}

/* ---- row checks --------------------------------------------------------------------------- */

static int64_t row_example(const trm_batch *b, int64_t r) {
    return b->inputs[r * S] + 1000 * (int64_t)b->inputs[r * S + 1];
}

/* The row is example x of the fixture (inputs and collated labels), x lies inside the
 * puzzle its identifier names. Returns the puzzle index. */
static int64_t check_row(const trm_batch *b, int64_t r, const fx_set *f) {
    int64_t x = row_example(b, r);
    ck_assert_int_lt(x, f->n_examples);
    for (int j = 0; j < S; j++) {
        ck_assert_int_eq(b->inputs[r * S + j], input_tok(x, f->tag, j));
        ck_assert_int_eq(b->labels[r * S + j], label_collated(x, f->tag, j));
    }
    int64_t p = b->puzzle_identifiers[r] - f->id_base;
    ck_assert_msg(p >= 0 && p < f->n_puzzles, "bad puzzle id %d", b->puzzle_identifiers[r]);
    ck_assert_msg(f->pi[p] <= x && x < f->pi[p + 1], "example %lld not in puzzle %lld",
                  (long long)x, (long long)p);
    return p;
}

static int64_t group_of(const fx_set *f, int64_t p) {
    int64_t g = 0;
    while (f->gi[g + 1] <= p) g++;
    return g;
}

static int batches_equal(const trm_batch *a, const trm_batch *b) {
    return a->batch_size == b->batch_size && a->effective_size == b->effective_size &&
           a->set_index == b->set_index &&
           memcmp(a->inputs, b->inputs, sizeof(int32_t) * (size_t)(a->batch_size * S)) == 0 &&
           memcmp(a->labels, b->labels, sizeof(int32_t) * (size_t)(a->batch_size * S)) == 0 &&
           memcmp(a->puzzle_identifiers, b->puzzle_identifiers,
                  sizeof(int32_t) * (size_t)a->batch_size) == 0;
}

/* ---- metadata ----------------------------------------------------------------------------- */

START_TEST(test_open_single) {
    char *dir = new_dir("train");
    fx_meta m = default_meta();
    m.total_groups = 3;
    m.total_puzzles = 5;
    m.mean = 2.5;
    m.pad_id = 3;
    write_meta(dir, "train", &m);
    const int ppg[3] = {1, 2, 2}, epp[5] = {1, 2, 3, 0, 4};
    fx_set f = write_set(dir, "train", "all", 3, ppg, epp, 5, 1);
    trm_dataset d = open_one(dir, "train");
    ck_assert_str_eq(d.split, "train");
    ck_assert_int_eq(d.meta.seq_len, S);
    ck_assert_int_eq(d.meta.vocab_size, V);
    ck_assert_int_eq(d.meta.pad_id, 3);
    ck_assert(d.meta.has_ignore_label);
    ck_assert_int_eq(d.meta.ignore_label_id, IGN);
    ck_assert_int_eq(d.meta.num_puzzle_identifiers, 1000);
    ck_assert_int_eq(d.meta.total_groups, 3);
    ck_assert_int_eq(d.meta.total_puzzles, 5);
    ck_assert_double_eq(d.meta.mean_puzzle_examples, 2.5);
    ck_assert_int_eq(d.meta.nsets, 1);
    ck_assert_str_eq(d.meta.sets[0], "all");
    ck_assert_int_eq(d.nsets, 1);
    ck_assert_str_eq(d.sets[0].name, "all");
    ck_assert_int_eq(d.sets[0].n_examples, 10);
    ck_assert_int_eq(d.sets[0].n_puzzles, 5);
    ck_assert_int_eq(d.sets[0].n_groups, 3);
    trm_dataset_close(&d);
    ck_assert_int_eq(d.nsets, 0);

    /* null ignore label; total_puzzles missing (HRM-era file) is counted; a compact JSON
     * spelling with an integer mean and an extra field */
    m.ignore_null = 1;
    m.omit_total_puzzles = 1;
    write_meta(dir, "train", &m);
    d = open_one(dir, "train");
    ck_assert(!d.meta.has_ignore_label);
    ck_assert_int_eq(d.meta.total_puzzles, 5);
    trm_dataset_close(&d);
    char *jp = xasprintf("%s/train/dataset.json", dir);
    write_text(jp, "{\"pad_id\":0,\"ignore_label_id\":null,\"blank_identifier_id\":0,\"vocab_size\":1000,"
                   "\"seq_len\":4,\"num_puzzle_identifiers\":9,\"total_groups\":3,"
                   "\"mean_puzzle_examples\":2,\"total_puzzles\":5,\"extra\":{\"a\":[1,2]},"
                   "\"sets\":[\"all\"]}");
    d = open_one(dir, "train");
    ck_assert_double_eq(d.meta.mean_puzzle_examples, 2.0);
    ck_assert_int_eq(d.meta.num_puzzle_identifiers, 9);
    trm_dataset_close(&d);
    free(jp);
    fx_set_free(&f);
    free(dir);
}
END_TEST

START_TEST(test_merge_paths) {
    char *dirs[3];
    fx_meta m = default_meta();
    m.sets = "[\"a\", \"b\"]";
    for (int i = 0; i < 3; i++) {
        dirs[i] = new_dir("train");
        m.num_ids = 100 + i;
        m.total_groups = 2 + i;
        m.total_puzzles = 10 * (i + 1);
        m.mean = 1.0 + i;
        write_meta(dirs[i], "train", &m);
        fx_set a = write_uniform_set(dirs[i], "train", "a", 2 + i, 1, 1, 10 + i);
        fx_set b = write_uniform_set(dirs[i], "train", "b", 1, 1, 3, 20 + i);
        fx_set_free(&a);
        fx_set_free(&b);
    }
    trm_dataset d;
    trm_err e;
    ck_assert_msg(trm_dataset_open(&d, (const char *const *)dirs, 3, "train", &e) == 0, "%s", e.msg);
    ck_assert_int_eq(d.meta.num_puzzle_identifiers, 303);
    ck_assert_int_eq(d.meta.total_groups, 9);
    ck_assert_int_eq(d.meta.total_puzzles, 60);
    /* (1*10 + 2*20 + 3*30) / 60 */
    ck_assert_double_eq_tol(d.meta.mean_puzzle_examples, 140.0 / 60.0, 1e-12);
    ck_assert_int_eq(d.nsets, 6);
    const char *names[6] = {"a", "a1", "a2", "b", "b1", "b2"};
    const int tags[6] = {10, 11, 12, 20, 21, 22};
    for (int i = 0; i < 6; i++) {
        ck_assert_str_eq(d.sets[i].name, names[i]);
        ck_assert_str_eq(d.sets[i].base_name, i < 3 ? "a" : "b");
        /* each set reads its own path's files */
        ck_assert_int_eq(npy_get_i64(&d.sets[i].inputs, 2), tags[i]);
    }
    ck_assert_int_eq(d.sets[2].n_groups, 4);
    ck_assert_int_eq(d.meta.nsets, 2);
    trm_dataset_close(&d);
    for (int i = 0; i < 3; i++) free(dirs[i]);
}
END_TEST

static void disagree_case(void (*tweak)(fx_meta *), const char *field, const char *va,
                          const char *vb) {
    char *dirs[2];
    for (int i = 0; i < 2; i++) {
        dirs[i] = new_dir("train");
        fx_meta m = default_meta();
        if (i == 1) tweak(&m);
        write_meta(dirs[i], "train", &m);
        fx_set f = write_uniform_set(dirs[i], "train", "all", 2, 1, 1, 1);
        fx_set_free(&f);
        if (i == 1 && strcmp(field, "sets") == 0) {
            fx_set g = write_uniform_set(dirs[i], "train", "other", 2, 1, 1, 1);
            fx_set_free(&g);
        }
    }
    char *ja = xasprintf("%s/train/dataset.json", dirs[0]), *jb = xasprintf("%s/train/dataset.json", dirs[1]);
    char *what = xasprintf("disagree on %s: %s in %s but %s in %s", field, va, ja, vb, jb);
    expect_open_fail((const char *const *)dirs, 2, "train", what, NULL, NULL);
    free(what);
    free(ja);
    free(jb);
    free(dirs[0]);
    free(dirs[1]);
}

static void tw_seq(fx_meta *m) { m->seq_len = S + 1; }
static void tw_vocab(fx_meta *m) { m->vocab_size = V + 1; }
static void tw_pad(fx_meta *m) { m->pad_id = 2; }
static void tw_ignore(fx_meta *m) { m->ignore_null = 1; }
static void tw_ignore2(fx_meta *m) { m->ignore_label_id = -100; }
static void tw_blank(fx_meta *m) { m->blank_id = 5; }
static void tw_sets(fx_meta *m) { m->sets = "[\"all\", \"other\"]"; }

START_TEST(test_merge_disagree) {
    disagree_case(tw_seq, "seq_len", "4", "5");
    disagree_case(tw_vocab, "vocab_size", "1000", "1001");
    disagree_case(tw_pad, "pad_id", "0", "2");
    disagree_case(tw_ignore, "ignore_label_id", "0", "null");
    disagree_case(tw_ignore2, "ignore_label_id", "0", "-100");
    disagree_case(tw_blank, "blank_identifier_id", "0", "5");
    disagree_case(tw_sets, "sets", "[all]", "[all, other]");
}
END_TEST

START_TEST(test_meta_errors) {
    char *dir = new_dir("train");
    const char *paths[1] = {dir};
    char *jp = xasprintf("%s/train/dataset.json", dir);
    expect_open_fail(paths, 1, "train", jp, "cannot open", NULL);
    fx_meta m = default_meta();
    write_meta(dir, "train", &m);
    expect_open_fail(paths, 1, "train", "all__inputs.npy", "cannot open", NULL);
    fx_set f = write_uniform_set(dir, "train", "all", 2, 1, 1, 1);
    fx_set_free(&f);
    trm_dataset d = open_one(dir, "train");
    trm_dataset_close(&d);

    struct {
        const char *json, *needle;
    } cases[] = {
        {"[1, 2]", "JSON object"},
        {"{\"pad_id\": 0", "invalid JSON"},
        {"{\"pad_id\": 0}", "missing field 'ignore_label_id'"},
        {"{\"pad_id\": 0, \"ignore_label_id\": 0, \"blank_identifier_id\": 0, \"vocab_size\": 1000, "
         "\"seq_len\": \"4\", \"num_puzzle_identifiers\": 9, \"total_groups\": 2, "
         "\"mean_puzzle_examples\": 1, \"total_puzzles\": 2, \"sets\": [\"all\"]}",
         "field 'seq_len' must be an integer"},
        {"{\"pad_id\": 0, \"ignore_label_id\": 0, \"blank_identifier_id\": 0, \"vocab_size\": 1000, "
         "\"seq_len\": 4, \"num_puzzle_identifiers\": 9, \"total_groups\": 2, "
         "\"mean_puzzle_examples\": 1, \"total_puzzles\": 2, \"sets\": \"all\"}",
         "field 'sets' must be a non-empty list"},
        {"{\"pad_id\": 0, \"ignore_label_id\": 0, \"blank_identifier_id\": 0, \"vocab_size\": 1000, "
         "\"seq_len\": 4, \"num_puzzle_identifiers\": 9, \"total_groups\": 2, "
         "\"mean_puzzle_examples\": \"x\", \"total_puzzles\": 2, \"sets\": [\"all\"]}",
         "field 'mean_puzzle_examples' must be a number"},
        {"{\"pad_id\": 0, \"ignore_label_id\": 0, \"blank_identifier_id\": 0, \"vocab_size\": 1000, "
         "\"seq_len\": 4, \"num_puzzle_identifiers\": 9, \"total_groups\": 2, "
         "\"mean_puzzle_examples\": 1, \"total_puzzles\": 2, \"sets\": [\"../x\"]}",
         "invalid set name '../x'"},
        {"{\"pad_id\": 0, \"ignore_label_id\": 0, \"blank_identifier_id\": 0, \"vocab_size\": 0, "
         "\"seq_len\": 4, \"num_puzzle_identifiers\": 9, \"total_groups\": 2, "
         "\"mean_puzzle_examples\": 1, \"total_puzzles\": 2, \"sets\": [\"all\"]}",
         "vocab_size 0 out of range"},
        {"{\"pad_id\": 1000, \"ignore_label_id\": 0, \"blank_identifier_id\": 0, \"vocab_size\": 1000, "
         "\"seq_len\": 4, \"num_puzzle_identifiers\": 9, \"total_groups\": 2, "
         "\"mean_puzzle_examples\": 1, \"total_puzzles\": 2, \"sets\": [\"all\"]}",
         "pad_id 1000 is not in [0, vocab_size 1000)"},
        {"{\"pad_id\": 0, \"ignore_label_id\": 0, \"blank_identifier_id\": 9, \"vocab_size\": 1000, "
         "\"seq_len\": 4, \"num_puzzle_identifiers\": 9, \"total_groups\": 2, "
         "\"mean_puzzle_examples\": 1, \"total_puzzles\": 2, \"sets\": [\"all\"]}",
         "blank_identifier_id 9"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_text(jp, cases[i].json);
        expect_open_fail(paths, 1, "train", jp, cases[i].needle, NULL);
    }
    /* set-name collision: sets ["all", "all1"] over two paths both give "all1" */
    char *dir2 = new_dir("train");
    fx_meta m2 = default_meta();
    m2.sets = "[\"all\", \"all1\"]";
    const char *two[2] = {dir, dir2};
    for (int i = 0; i < 2; i++) {
        write_meta(two[i], "train", &m2);
        fx_set a = write_uniform_set(two[i], "train", "all", 2, 1, 1, 1);
        fx_set b = write_uniform_set(two[i], "train", "all1", 2, 1, 1, 1);
        fx_set_free(&a);
        fx_set_free(&b);
    }
    expect_open_fail(two, 2, "train", "'all1'", "collides", NULL);
    expect_open_fail(two, 0, "train", "no data paths", NULL, NULL);
    free(jp);
    free(dir);
    free(dir2);
}
END_TEST

/* ---- validation --------------------------------------------------------------------------- */

typedef void (*corrupt_fn)(const char *dir);

static void bad_token(const char *dir) {
    int64_t sh[2] = {4, S};
    uint16_t in[4 * S] = {0};
    in[3 * S + 2] = V + 5;
    write_npy(dir, "train", "all", "inputs", NPY_U16, 2, sh, in);
}
static void neg_token(const char *dir) {
    int64_t sh[2] = {4, S};
    int8_t in[4 * S] = {0};
    in[1 * S + 3] = -2;
    write_npy(dir, "train", "all", "inputs", NPY_I8, 2, sh, in);
}
static void bad_label(const char *dir) {
    int64_t sh[2] = {4, S};
    int64_t lab[4 * S] = {0};
    lab[2 * S + 1] = -100;
    write_npy(dir, "train", "all", "labels", NPY_I64, 2, sh, lab);
}
static void label_shape(const char *dir) {
    int64_t sh[2] = {3, S};
    int32_t lab[3 * S] = {0};
    write_npy(dir, "train", "all", "labels", NPY_I32, 2, sh, lab);
}
static void inputs_1d(const char *dir) {
    int64_t n = 4 * S;
    int32_t in[4 * S] = {0};
    write_npy(dir, "train", "all", "inputs", NPY_I32, 1, &n, in);
}
static void inputs_seq(const char *dir) {
    int64_t sh[2] = {4, S + 1};
    int32_t in[4 * (S + 1)] = {0};
    write_npy(dir, "train", "all", "inputs", NPY_I32, 2, sh, in);
    write_npy(dir, "train", "all", "labels", NPY_I32, 2, sh, in);
}
static void float_inputs(const char *dir) {
    int64_t sh[2] = {4, S};
    float in[4 * S] = {0};
    write_npy(dir, "train", "all", "inputs", NPY_F32, 2, sh, in);
}
static void write_i32(const char *dir, const char *field, int64_t n, const int32_t *v) {
    write_npy(dir, "train", "all", field, NPY_I32, 1, &n, v);
}
static void pi_start(const char *dir) { write_i32(dir, "puzzle_indices", 3, (int32_t[]){1, 2, 4}); }
static void pi_decr(const char *dir) { write_i32(dir, "puzzle_indices", 3, (int32_t[]){0, 3, 2}); }
static void pi_last(const char *dir) { write_i32(dir, "puzzle_indices", 3, (int32_t[]){0, 2, 5}); }
static void pi_empty(const char *dir) { write_i32(dir, "puzzle_indices", 0, (int32_t[]){0}); }
static void pid_len(const char *dir) { write_i32(dir, "puzzle_identifiers", 3, (int32_t[]){1, 2, 3}); }
static void pid_range(const char *dir) { write_i32(dir, "puzzle_identifiers", 2, (int32_t[]){1, 1000}); }
static void pid_neg(const char *dir) { write_i32(dir, "puzzle_identifiers", 2, (int32_t[]){-1, 1}); }
static void gi_start(const char *dir) { write_i32(dir, "group_indices", 2, (int32_t[]){1, 2}); }
static void gi_decr(const char *dir) { write_i32(dir, "group_indices", 3, (int32_t[]){0, 2, 1}); }
static void gi_last(const char *dir) { write_i32(dir, "group_indices", 2, (int32_t[]){0, 3}); }
static void gi_2d(const char *dir) {
    int64_t sh[2] = {1, 2};
    write_npy(dir, "train", "all", "group_indices", NPY_I32, 2, sh, (int32_t[]){0, 2});
}
static void gi_missing(const char *dir) {
    char *p = xasprintf("%s/train/all__group_indices.npy", dir);
    unlink(p);
    free(p);
}

START_TEST(test_validation_errors) {
    struct {
        corrupt_fn fn;
        const char *file, *a, *b;
    } cases[] = {
        {bad_token, "all__inputs.npy", "token 1005 at [3, 2]", "is >= vocab_size 1000"},
        {neg_token, "all__inputs.npy", "token -2 at [1, 3]", "negative"},
        {bad_label, "all__labels.npy", "label -100 at [2, 1]", "not ignore_label_id 0"},
        {label_shape, "all__labels.npy", "(3, 4)", "does not match the inputs' shape (4, 4)"},
        {inputs_1d, "all__inputs.npy", "expected shape (N, seq_len 4)", "(16,)"},
        {inputs_seq, "all__inputs.npy", "expected shape (N, seq_len 4)", "(4, 5)"},
        {float_inputs, "all__inputs.npy", "floating-point", NULL},
        {pi_start, "all__puzzle_indices.npy", "must start at 0", NULL},
        {pi_decr, "all__puzzle_indices.npy", "decreases at [2]: 2 after 3", NULL},
        {pi_last, "all__puzzle_indices.npy", "last value [2] is 5", "number of examples is 4"},
        {pi_empty, "all__puzzle_indices.npy", "non-empty 1-D", NULL},
        {pid_len, "all__puzzle_identifiers.npy", "expected shape (2,)", "(3,)"},
        {pid_range, "all__puzzle_identifiers.npy", "puzzle identifier 1000 at [1]",
         "num_puzzle_identifiers 1000"},
        {pid_neg, "all__puzzle_identifiers.npy", "puzzle identifier -1 at [0]", NULL},
        {gi_start, "all__group_indices.npy", "must start at 0", NULL},
        {gi_decr, "all__group_indices.npy", "decreases at [2]", NULL},
        {gi_last, "all__group_indices.npy", "last value [1] is 3", "number of puzzles is 2"},
        {gi_2d, "all__group_indices.npy", "1-D", NULL},
        {gi_missing, "all__group_indices.npy", "cannot open", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *dir = new_dir("train");
        fx_meta m = default_meta();
        write_meta(dir, "train", &m);
        /* 2 groups x 1 puzzle x 2 examples: N = 4 */
        fx_set f = write_uniform_set(dir, "train", "all", 2, 1, 2, 1);
        fx_set_free(&f);
        trm_dataset d = open_one(dir, "train"); /* valid before the corruption */
        trm_dataset_close(&d);
        cases[i].fn(dir);
        char *file = xasprintf("%s/train/%s", dir, cases[i].file);
        const char *paths[1] = {dir};
        expect_open_fail(paths, 1, "train", file, cases[i].a, cases[i].b);
        free(file);
        free(dir);
    }
}
END_TEST

START_TEST(test_labels_ignore_values) {
    /* labels may hold ignore_label_id even outside [0, vocab) (here -1), inputs may not */
    char *dir = new_dir("train");
    fx_meta m = default_meta();
    m.ignore_label_id = -1;
    write_meta(dir, "train", &m);
    fx_set f = write_uniform_set(dir, "train", "all", 2, 1, 2, 1);
    int64_t sh[2] = {4, S};
    int32_t lab[4 * S];
    for (int i = 0; i < 4 * S; i++) lab[i] = i % 3 ? -1 : 5;
    write_npy(dir, "train", "all", "labels", NPY_I32, 2, sh, lab);
    trm_dataset d = open_one(dir, "train");
    trm_test_iter it;
    trm_test_iter_init(&it, 4, 0, 1);
    trm_batch b = {0};
    ck_assert_int_eq(trm_test_iter_next(&d, &it, &b), 1);
    for (int i = 0; i < 4 * S; i++) ck_assert_int_eq(b.labels[i], i % 3 ? TRM_IGNORE_LABEL : 5);
    trm_batch_free(&b);
    trm_dataset_close(&d);
    /* with a null ignore label nothing is remapped and -100 is out of range */
    m.ignore_null = 1;
    write_meta(dir, "train", &m);
    const char *paths[1] = {dir};
    expect_open_fail(paths, 1, "train", "all__labels.npy", "label -1 at [0, 1] is negative", NULL);
    fx_set_free(&f);
    free(dir);
}
END_TEST

/* ---- training sampler --------------------------------------------------------------------- */

/* Mixed layout: 12 groups of 1-3 puzzles with 1-5 examples (some puzzles empty). */
static fx_set write_mixed(const char *dir, int tag) {
    int ppg[12], epp[64], np = 0;
    for (int g = 0; g < 12; g++) ppg[g] = 1 + (g * 7) % 3;
    for (int g = 0; g < 12; g++)
        for (int k = 0; k < ppg[g]; k++, np++) epp[np] = 1 + (np * 5 + g) % 5;
    epp[4] = 0; /* an empty puzzle contributes nothing when drawn */
    return write_set(dir, "train", "all", 12, ppg, epp, tag, 1);
}

START_TEST(test_sampler_properties) {
    char *dir = new_dir("train");
    fx_meta m = default_meta();
    write_meta(dir, "train", &m);
    fx_set f = write_mixed(dir, 3);
    trm_dataset d = open_one(dir, "train");
    const int64_t B = 8;
    int unsorted_runs = 0;
    for (uint64_t seed = 0; seed < 20; seed++) {
        trm_sampler_state s;
        trm_sampler_init(&s, seed, 1, B, 0, 1);
        trm_batch b = {0};
        int64_t visited_groups[64], nvisits = 0, nbatches = 0;
        int r;
        while ((r = trm_sampler_next(&d, &s, &b)) == 1) {
            nbatches++;
            ck_assert_int_eq(b.batch_size, B);
            ck_assert_int_eq(b.effective_size, B);
            ck_assert_int_eq(b.set_index, 0);
            /* split the batch into runs of one puzzle (one group visit each) */
            int64_t start = 0;
            while (start < B) {
                int64_t p = check_row(&b, start, &f), end = start + 1;
                while (end < B && b.puzzle_identifiers[end] == b.puzzle_identifiers[start]) end++;
                int64_t size = f.pi[p + 1] - f.pi[p], len = end - start;
                /* whole puzzle unless the batch ran out of room */
                if (end < B) ck_assert_int_eq(len, size);
                ck_assert_int_le(len, size);
                int sorted = 1;
                for (int64_t i = start; i < end; i++) {
                    check_row(&b, i, &f);
                    for (int64_t k = start; k < i; k++)
                        ck_assert_msg(row_example(&b, k) != row_example(&b, i), "repeat in draw");
                    if (i > start && row_example(&b, i) < row_example(&b, i - 1)) sorted = 0;
                }
                unsorted_runs += !sorted;
                int64_t g = group_of(&f, p);
                /* epochs_per_iter = 1: a group is visited at most once per chunk */
                for (int64_t k = 0; k < nvisits; k++) ck_assert_int_ne(visited_groups[k], g);
                visited_groups[nvisits++] = g;
                start = end;
            }
        }
        ck_assert_int_eq(r, 0);
        /* N examples over 12 groups: at least a few batches, not more than the data allows */
        ck_assert_int_ge(nbatches, 1);
        ck_assert_int_le(nbatches * B, f.n_examples);
        ck_assert_int_eq(s.set_index, 1);
        ck_assert_int_eq(trm_sampler_next(&d, &s, &b), 0); /* stays exhausted */
        trm_batch_free(&b);
    }
    ck_assert_int_gt(unsorted_runs, 10); /* draws come in random order */
    trm_dataset_close(&d);
    fx_set_free(&f);
    free(dir);
}
END_TEST

/* Draws every batch of chunk 0 for one rank. Returns the count; batches in out[]. */
static int draw_chunk(const trm_dataset *d, uint64_t seed, int64_t E, int64_t B, int rank, int W,
                      trm_batch *out, int max) {
    trm_sampler_state s;
    trm_sampler_init(&s, seed, E, B, rank, W);
    int n = 0;
    while (n < max) {
        memset(&out[n], 0, sizeof out[n]);
        int r = trm_sampler_next(d, &s, &out[n]);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
            trm_batch_free(&out[n]);
            break;
        }
        n++;
    }
    return n;
}

START_TEST(test_sampler_rank_slices) {
    char *dir = new_dir("train");
    fx_meta m = default_meta();
    write_meta(dir, "train", &m);
    fx_set f = write_mixed(dir, 3);
    trm_dataset d = open_one(dir, "train");
    enum { MAXB = 64 };
    const int64_t B = 8;
    static trm_batch full[MAXB], part[4][MAXB];
    int n1 = draw_chunk(&d, 5, 2, B, 0, 1, full, MAXB);
    ck_assert_int_gt(n1, 2);
    for (int W = 2; W <= 4; W *= 2) {
        for (int r = 0; r < W; r++) ck_assert_int_eq(draw_chunk(&d, 5, 2, B, r, W, part[r], MAXB), n1);
        int64_t local = B / W;
        for (int i = 0; i < n1; i++)
            for (int r = 0; r < W; r++) {
                ck_assert_int_eq(part[r][i].batch_size, local);
                ck_assert_int_eq(part[r][i].effective_size, B);
                ck_assert_int_eq(memcmp(part[r][i].inputs, full[i].inputs + r * local * S,
                                        sizeof(int32_t) * (size_t)(local * S)), 0);
                ck_assert_int_eq(memcmp(part[r][i].labels, full[i].labels + r * local * S,
                                        sizeof(int32_t) * (size_t)(local * S)), 0);
                ck_assert_int_eq(memcmp(part[r][i].puzzle_identifiers,
                                        full[i].puzzle_identifiers + r * local,
                                        sizeof(int32_t) * (size_t)local), 0);
            }
        for (int r = 0; r < W; r++)
            for (int i = 0; i < n1; i++) trm_batch_free(&part[r][i]);
    }
    for (int i = 0; i < n1; i++) trm_batch_free(&full[i]);
    trm_dataset_close(&d);
    fx_set_free(&f);
    free(dir);
}
END_TEST

/* 10 groups x 2 puzzles x 2 examples: every visit is exactly 2 rows, so group visits can be
 * counted from the rows, including how many fell into the dropped partial batch. */
START_TEST(test_sampler_group_walk) {
    char *dir = new_dir("train");
    fx_meta m = default_meta();
    write_meta(dir, "train", &m);
    fx_set f = write_uniform_set(dir, "train", "all", 10, 2, 2, 4);
    trm_dataset d = open_one(dir, "train");
    struct {
        int64_t E, B;
        int batches, visits_per_group, seen_groups;
    } cases[] = {
        {1, 4, 5, 1, 10},  /* 2 groups a batch, 10 groups: all visited, nothing dropped */
        {1, 6, 3, 1, 9},   /* 3 groups a batch: 9 seen, the 10th in the dropped batch */
        {3, 4, 15, 3, 10}, /* three permutations back to back */
        {1, 20, 1, 1, 10}, /* one batch holds every group */
        {1, 22, 0, 0, 0},  /* more rows than the chunk has: everything dropped */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (uint64_t seed = 0; seed < 5; seed++) {
            trm_batch bs[32];
            int n = draw_chunk(&d, seed, cases[c].E, cases[c].B, 0, 1, bs, 32);
            ck_assert_int_eq(n, cases[c].batches);
            int visits[10] = {0};
            for (int i = 0; i < n; i++) {
                for (int64_t r = 0; r < cases[c].B; r += 2) {
                    int64_t p = check_row(&bs[i], r, &f);
                    ck_assert_int_eq(check_row(&bs[i], r + 1, &f), p);
                    ck_assert_int_ne(row_example(&bs[i], r), row_example(&bs[i], r + 1));
                    visits[group_of(&f, p)]++;
                }
                trm_batch_free(&bs[i]);
            }
            int seen = 0;
            for (int g = 0; g < 10; g++) {
                ck_assert_int_le(visits[g], cases[c].visits_per_group);
                if (visits[g]) {
                    seen++;
                    if (cases[c].seen_groups == 10) ck_assert_int_eq(visits[g], cases[c].visits_per_group);
                }
            }
            ck_assert_int_eq(seen, cases[c].seen_groups);
        }
    }
    trm_dataset_close(&d);
    fx_set_free(&f);
    free(dir);
}
END_TEST

START_TEST(test_sampler_determinism_and_resume) {
    char *dir = new_dir("train");
    fx_meta m = default_meta();
    m.sets = "[\"all\", \"more\"]";
    write_meta(dir, "train", &m);
    fx_set f = write_mixed(dir, 3);
    fx_set g = write_uniform_set(dir, "train", "more", 9, 2, 3, 6);
    trm_dataset d = open_one(dir, "train");
    const int64_t B = 6;
    trm_sampler_state s1, s2, s3;
    trm_sampler_init(&s1, 17, 2, B, 0, 1);
    trm_sampler_init(&s2, 17, 2, B, 0, 1);
    trm_sampler_init(&s3, 18, 2, B, 0, 1);
    trm_batch a = {0}, b = {0}, c = {0};
    int total = 0, differ = 0, sets_seen[2] = {0, 0};
    trm_sampler_state saved = s1;
    int saved_at = -1;
    /* two chunks; both sets in each */
    for (int chunk = 0; chunk < 2; chunk++) {
        for (;;) {
            int r1 = trm_sampler_next(&d, &s1, &a), r2 = trm_sampler_next(&d, &s2, &b);
            ck_assert_int_eq(r1, r2);
            int r3 = trm_sampler_next(&d, &s3, &c);
            if (r1 == 0) break;
            ck_assert(batches_equal(&a, &b));
            if (r3 == 1) differ += !batches_equal(&a, &c);
            sets_seen[a.set_index]++;
            const fx_set *fs = a.set_index == 0 ? &f : &g;
            for (int64_t r = 0; r < B; r++) check_row(&a, r, fs);
            if (++total == 7) {
                saved = s1; /* mid-chunk snapshot */
                saved_at = total;
            }
        }
        while (trm_sampler_next(&d, &s3, &c) == 1) {
        }
        ck_assert_int_eq(s1.iter, chunk);
        trm_sampler_next_iter(&s1);
        trm_sampler_next_iter(&s2);
        trm_sampler_next_iter(&s3);
        ck_assert_int_eq(s1.iter, chunk + 1);
        ck_assert_int_eq(s1.set_index, 0);
    }
    ck_assert_int_gt(sets_seen[0], 0);
    ck_assert_int_gt(sets_seen[1], 0);
    ck_assert_int_gt(differ, total / 2); /* another seed draws other batches */
    ck_assert_int_gt(saved_at, 0);

    /* resuming from the snapshot (a plain struct copy, as a checkpoint would store it)
     * reproduces everything that followed, across the set change and the next chunk */
    trm_sampler_state re = saved, ref;
    trm_sampler_init(&ref, 17, 2, B, 0, 1);
    trm_batch x = {0}, y = {0};
    for (int k = 0; k < saved_at; k++) ck_assert_int_eq(trm_sampler_next(&d, &ref, &y), 1);
    ck_assert_int_eq(ref.iter, saved.iter);
    ck_assert_int_eq(ref.set_index, saved.set_index);
    ck_assert_int_eq(ref.group_pos, saved.group_pos);
    ck_assert_int_eq(ref.batch_index, saved.batch_index);
    int compared = 0;
    for (int chunk = 0; chunk < 2; chunk++) {
        for (;;) {
            int r1 = trm_sampler_next(&d, &re, &x), r2 = trm_sampler_next(&d, &ref, &y);
            ck_assert_int_eq(r1, r2);
            if (r1 == 0) break;
            ck_assert(batches_equal(&x, &y));
            compared++;
        }
        trm_sampler_next_iter(&re);
        trm_sampler_next_iter(&ref);
    }
    ck_assert_int_gt(compared, 5);

    /* chunk 1 differs from chunk 0 */
    trm_sampler_state c0, c1;
    trm_sampler_init(&c0, 17, 2, B, 0, 1);
    trm_sampler_init(&c1, 17, 2, B, 0, 1);
    trm_sampler_next_iter(&c1);
    ck_assert_int_eq(trm_sampler_next(&d, &c0, &x), 1);
    ck_assert_int_eq(trm_sampler_next(&d, &c1, &y), 1);
    ck_assert(!batches_equal(&x, &y));
    trm_batch_free(&a);
    trm_batch_free(&b);
    trm_batch_free(&c);
    trm_batch_free(&x);
    trm_batch_free(&y);
    trm_dataset_close(&d);
    fx_set_free(&f);
    fx_set_free(&g);
    free(dir);
}
END_TEST

/* One group, one puzzle of n examples, batch of 3: each chunk is one visit drawing 3 of the
 * n examples. Over many chunks every example is equally likely and order is random. */
static void uniform_subset_case(int n) {
    char *dir = new_dir("train");
    fx_meta m = default_meta();
    write_meta(dir, "train", &m);
    const int ppg[1] = {1}, epp[1] = {n};
    fx_set f = write_set(dir, "train", "all", 1, ppg, epp, 2, 1);
    trm_dataset d = open_one(dir, "train");
    trm_sampler_state s;
    trm_sampler_init(&s, 99, 1, 3, 0, 1);
    trm_batch b = {0};
    long *cnt = calloc((size_t)n, sizeof(long));
    int ascending = 0;
    const int chunks = n < 100 ? 3000 : 6000;
    for (int c = 0; c < chunks; c++) {
        ck_assert_int_eq(trm_sampler_next(&d, &s, &b), 1);
        int64_t e0 = row_example(&b, 0), e1 = row_example(&b, 1), e2 = row_example(&b, 2);
        ck_assert(e0 != e1 && e1 != e2 && e0 != e2);
        cnt[e0]++;
        cnt[e1]++;
        cnt[e2]++;
        ascending += e0 < e1 && e1 < e2;
        ck_assert_int_eq(trm_sampler_next(&d, &s, &b), 0);
        trm_sampler_next_iter(&s);
    }
    double expect = 3.0 * chunks / n, chi = 0;
    for (int i = 0; i < n; i++) chi += (cnt[i] - expect) * (cnt[i] - expect) / expect;
    /* dof n-1; generous bound: mean + 5 sd */
    double bound = (n - 1) + 5 * sqrt(2.0 * (n - 1));
    ck_assert_msg(chi < bound, "chi-square %g >= %g (n=%d)", chi, bound, n);
    ck_assert_double_eq_tol((double)ascending / chunks, 1.0 / 6.0, 0.03);
    free(cnt);
    trm_batch_free(&b);
    trm_dataset_close(&d);
    fx_set_free(&f);
    free(dir);
}

START_TEST(test_sampler_uniform_draws) {
    uniform_subset_case(10);  /* partial Fisher–Yates path */
    uniform_subset_case(300); /* rejection path */
    /* puzzles inside a group chosen uniformly: 1 group of 4 one-example puzzles, B=1 */
    char *dir = new_dir("train");
    fx_meta m = default_meta();
    write_meta(dir, "train", &m);
    const int ppg[1] = {4}, epp[4] = {1, 1, 1, 1};
    fx_set f = write_set(dir, "train", "all", 1, ppg, epp, 2, 1);
    trm_dataset d = open_one(dir, "train");
    trm_sampler_state s;
    trm_sampler_init(&s, 1, 1, 1, 0, 1);
    trm_batch b = {0};
    long cnt[4] = {0};
    for (int c = 0; c < 4000; c++) {
        ck_assert_int_eq(trm_sampler_next(&d, &s, &b), 1);
        cnt[check_row(&b, 0, &f)]++;
        trm_sampler_next_iter(&s);
    }
    double chi = 0;
    for (int i = 0; i < 4; i++) chi += (cnt[i] - 1000.0) * (cnt[i] - 1000.0) / 1000.0;
    ck_assert_msg(chi < 21.1, "chi-square %g", chi); /* 3 dof, p = 1e-4 */
    trm_batch_free(&b);
    trm_dataset_close(&d);
    fx_set_free(&f);
    free(dir);
}
END_TEST

START_TEST(test_sampler_invalid_split) {
    char *dir = new_dir("train");
    fx_meta m = default_meta();
    write_meta(dir, "train", &m);
    fx_set f = write_mixed(dir, 3);
    trm_dataset d = open_one(dir, "train");
    trm_sampler_state s;
    trm_err e;
    trm_sampler_init(&s, 0, 1, 6, 0, 4);
    ck_assert_int_eq(trm_sampler_check(&s, &e), -1);
    ck_assert(strstr(e.msg, "global_batch_size 6 must be a multiple of the number of ranks 4"));
    trm_batch b = {0};
    ck_assert_int_eq(trm_sampler_next(&d, &s, &b), -1);
    ck_assert_ptr_null(b.inputs);
    trm_sampler_init(&s, 0, 0, 4, 0, 1);
    ck_assert_int_eq(trm_sampler_check(&s, &e), -1);
    ck_assert(strstr(e.msg, "epochs per iteration"));
    trm_sampler_init(&s, 0, 1, 4, 2, 2);
    ck_assert_int_eq(trm_sampler_check(&s, &e), -1);
    ck_assert(strstr(e.msg, "rank 2"));
    trm_test_iter it;
    trm_test_iter_init(&it, 5, 0, 2);
    ck_assert_int_eq(trm_test_iter_next(&d, &it, &b), -1);
    /* a batch of the wrong shape is reallocated */
    trm_batch_alloc(&b, 3, 2);
    trm_sampler_init(&s, 0, 1, 4, 1, 2);
    ck_assert_int_eq(trm_sampler_check(&s, &e), 0);
    ck_assert_int_eq(trm_sampler_next(&d, &s, &b), 1);
    ck_assert_int_eq(b.batch_size, 2);
    ck_assert_int_eq(b.seq_len, S);
    check_row(&b, 1, &f);
    trm_batch_free(&b);
    trm_dataset_close(&d);
    fx_set_free(&f);
    free(dir);
}
END_TEST

/* ---- test iterator ------------------------------------------------------------------------ */

START_TEST(test_test_iterator) {
    char *dir = new_dir("test");
    fx_meta m = default_meta();
    m.sets = "[\"all\", \"two\"]";
    m.pad_id = 9;
    m.blank_id = 0;
    write_meta(dir, "test", &m);
    /* empty puzzles in the middle and at the end exercise the searchsorted lookup */
    const int ppg1[3] = {2, 3, 2}, epp1[7] = {3, 0, 2, 1, 0, 4, 3};
    const int ppg2[1] = {2}, epp2[2] = {2, 0};
    fx_set f1 = write_set(dir, "test", "all", 3, ppg1, epp1, 11, 1);
    fx_set f2 = write_set(dir, "test", "two", 1, ppg2, epp2, 12, 100);
    const fx_set *fs[2] = {&f1, &f2};
    trm_dataset d = open_one(dir, "test");
    const int64_t B = 6;
    for (int W = 1; W <= 2; W++) {
        int64_t local = B / W;
        trm_test_iter its[2];
        for (int r = 0; r < W; r++) trm_test_iter_init(&its[r], B, r, W);
        int64_t next_expected[2] = {0, 0};
        int nb = 0;
        trm_batch b = {0};
        for (;;) {
            int64_t eff = -1;
            int set = -1, got = 0;
            for (int r = 0; r < W; r++) {
                int rc = trm_test_iter_next(&d, &its[r], &b);
                ck_assert_int_ge(rc, 0);
                if (r == 0) got = rc;
                ck_assert_int_eq(rc, got);
                if (!rc) break;
                if (r == 0) {
                    set = b.set_index;
                    eff = b.effective_size;
                }
                ck_assert_int_eq(b.set_index, set);
                ck_assert_int_eq(b.effective_size, eff);
                ck_assert_int_eq(b.batch_size, local);
                const fx_set *f = fs[set];
                int64_t bstart = its[r].start - B; /* the iterator has moved past it */
                for (int64_t i = 0; i < local; i++) {
                    int64_t x = bstart + r * local + i; /* global example index */
                    if (x < bstart + eff) {
                        ck_assert_int_eq(row_example(&b, i), x);
                        ck_assert_int_eq(row_example(&b, i), next_expected[set]);
                        next_expected[set]++;
                        int64_t p = check_row(&b, i, f);
                        ck_assert(f->pi[p] <= x && x < f->pi[p + 1]);
                    } else {
                        for (int j = 0; j < S; j++) {
                            ck_assert_int_eq(b.inputs[i * S + j], 9);
                            ck_assert_int_eq(b.labels[i * S + j], TRM_IGNORE_LABEL);
                        }
                        ck_assert_int_eq(b.puzzle_identifiers[i], 0);
                    }
                }
            }
            if (!got) break;
            nb++;
            int64_t bs = its[0].start - B;
            int64_t want_eff = fs[set]->n_examples - bs < B ? fs[set]->n_examples - bs : B;
            ck_assert_int_eq(eff, want_eff);
        }
        /* all: 13 examples -> 6, 6, 1; two: 2 examples -> 2 */
        ck_assert_int_eq(nb, 4);
        ck_assert_int_eq(next_expected[0], f1.n_examples);
        ck_assert_int_eq(next_expected[1], f2.n_examples);
        ck_assert_int_eq(trm_test_iter_next(&d, &its[0], &b), 0);
        trm_batch_free(&b);
    }
    trm_dataset_close(&d);
    fx_set_free(&f1);
    fx_set_free(&f2);
    free(dir);
}
END_TEST

START_TEST(test_total_steps) {
    trm_dataset_meta m = {0};
    m.total_groups = 1000;
    m.mean_puzzle_examples = 1.5;
    ck_assert_int_eq(trm_total_steps(&m, 100, 768), 195); /* 150000/768 = 195.3 */
    m.total_groups = 3;
    m.mean_puzzle_examples = 1.0 / 3.0;
    /* 3*(1/3) rounds to 1.0 in double arithmetic, as Python computes it */
    ck_assert_int_eq(trm_total_steps(&m, 1, 1), (int64_t)(3.0 * (1.0 / 3.0)));
    m.total_groups = 960;
    m.mean_puzzle_examples = 1000.7;
    ck_assert_int_eq(trm_total_steps(&m, 100000, 768), (int64_t)(96000000.0 * 1000.7 / 768.0));
    ck_assert_int_eq(trm_total_steps(&m, 0, 768), 0);
    ck_assert_int_eq(trm_total_steps(&m, 10, 0), 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("dataset");
    TCase *tc = tcase_create("dataset");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_open_single);
    tcase_add_test(tc, test_merge_paths);
    tcase_add_test(tc, test_merge_disagree);
    tcase_add_test(tc, test_meta_errors);
    tcase_add_test(tc, test_validation_errors);
    tcase_add_test(tc, test_labels_ignore_values);
    tcase_add_test(tc, test_sampler_properties);
    tcase_add_test(tc, test_sampler_rank_slices);
    tcase_add_test(tc, test_sampler_group_walk);
    tcase_add_test(tc, test_sampler_determinism_and_resume);
    tcase_add_test(tc, test_sampler_uniform_draws);
    tcase_add_test(tc, test_sampler_invalid_split);
    tcase_add_test(tc, test_test_iterator);
    tcase_add_test(tc, test_total_steps);
    suite_add_tcase(s, tc);
    return trm_run_suite(s);
}
