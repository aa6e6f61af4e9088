/* test_config.c — the configuration system: YAML/JSON parsing and scalar typing, error
 * locations, composition (defaults, _self_, groups, user dirs), every override form and
 * error, interpolation, typed getters and the YAML writer's round trip. */
#include <check.h>

#include "check_main.h"
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

#define ASSERT_HAS(s, sub) ck_assert_msg(strstr((s), (sub)) != NULL, "'%s' lacks '%s'", (s), (sub))

static const cfg_search embedded = {NULL, 0, 1, NULL};

static cfg_node *parse(const char *text) {
    trm_err e = {{0}};
    cfg_node *n = cfg_parse(text, strlen(text), "t.yaml", &e);
    ck_assert_msg(n != NULL, "parse failed: %s", e.msg);
    return n;
}

static const char *parse_err(const char *text, trm_err *e) {
    cfg_node *n = cfg_parse(text, strlen(text), "t.yaml", e);
    ck_assert_msg(n == NULL, "expected a parse error for '%s'", text);
    return e->msg;
}

/* NULL-terminated overrides */
static int count(char **ov) {
    int n = 0;
    while (ov && ov[n]) n++;
    return n;
}

static cfg_node *compose(const cfg_search *s, const char *name, char **ov) {
    trm_err e = {{0}};
    cfg_node *n = cfg_compose(s, name, count(ov), ov, &e);
    ck_assert_msg(n != NULL, "compose failed: %s", e.msg);
    return n;
}

static const char *compose_err(const cfg_search *s, const char *name, char **ov, trm_err *e) {
    cfg_node *n = cfg_compose(s, name, count(ov), ov, e);
    ck_assert_msg(n == NULL, "expected compose to fail");
    return e->msg;
}

static int64_t get_int(const cfg_node *root, const char *key) {
    const cfg_node *n = cfg_get(root, key);
    ck_assert_msg(n && n->type == CFG_INT, "%s is not an int", key);
    return n->i;
}

static double get_float(const cfg_node *root, const char *key) {
    const cfg_node *n = cfg_get(root, key);
    ck_assert_msg(n && n->type == CFG_FLOAT, "%s is not a float", key);
    return n->f;
}

static int get_bool(const cfg_node *root, const char *key) {
    const cfg_node *n = cfg_get(root, key);
    ck_assert_msg(n && n->type == CFG_BOOL, "%s is not a bool", key);
    return n->b;
}

static const char *get_str(const cfg_node *root, const char *key) {
    const cfg_node *n = cfg_get(root, key);
    ck_assert_msg(n && n->type == CFG_STR, "%s is not a string", key);
    return n->s;
}

/* A scratch config dir per test: TRM_TEST_TMP/config/NAME. */
static char *scratch(const char *name) {
    char *d = xasprintf("%s/config/%s", TRM_TEST_TMP, name);
    trm_err e = {{0}};
    ck_assert_msg(trm_mkdirs(d, &e) == 0, "%s", e.msg);
    return d;
}

static void wfile(const char *dir, const char *rel, const char *text) {
    char *path = trm_path_join(dir, rel);
    char *slash = strrchr(path, '/');
    trm_err e = {{0}};
    *slash = 0;
    ck_assert_msg(trm_mkdirs(path, &e) == 0, "%s", e.msg);
    *slash = '/';
    ck_assert_msg(trm_write_file_atomic(path, text, strlen(text), &e) == 0, "%s", e.msg);
    free(path);
}

static int key_pos(const cfg_node *m, const char *key) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->items[i]->key, key)) return i;
    return -1;
}

/* ---- parsing ------------------------------------------------------------------------------ */

START_TEST(test_scalar_typing) {
    static const char *nulls[] = {"null", "~", "Null", "NULL", ""};
    for (size_t i = 0; i < sizeof nulls / sizeof *nulls; i++) {
        cfg_node *n = cfg_scalar(nulls[i]);
        ck_assert_msg(n->type == CFG_NULL, "'%s' should be null", nulls[i]);
        cfg_free(n);
    }
    static const struct { const char *t; int v; } bools[] = {
        {"true", 1}, {"True", 1}, {"TRUE", 1}, {"false", 0}, {"False", 0}, {"FALSE", 0}};
    for (size_t i = 0; i < sizeof bools / sizeof *bools; i++) {
        cfg_node *n = cfg_scalar(bools[i].t);
        ck_assert_msg(n->type == CFG_BOOL && n->b == bools[i].v, "'%s' should be a bool", bools[i].t);
        cfg_free(n);
    }
    static const struct { const char *t; int64_t v; } ints[] = {
        {"0", 0}, {"42", 42}, {"-7", -7}, {"+3", 3}, {"9223372036854775807", INT64_MAX},
        {"-9223372036854775808", INT64_MIN}};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        cfg_node *n = cfg_scalar(ints[i].t);
        ck_assert_msg(n->type == CFG_INT && n->i == ints[i].v, "'%s' should be an int", ints[i].t);
        cfg_free(n);
    }
    static const struct { const char *t; double v; } floats[] = {
        {"1e-4", 1e-4}, {"1E5", 1e5}, {".5", 0.5}, {"1.0", 1.0}, {"-1.5", -1.5}, {"1.", 1.0},
        {"2.5e+3", 2500.0}, {"-.5e-2", -0.005}, {".inf", INFINITY}, {"+.inf", INFINITY},
        {"-.inf", -INFINITY}, {".Inf", INFINITY}, {"inf", INFINITY}, {"-INF", -INFINITY},
        {"1e400", INFINITY}};
    for (size_t i = 0; i < sizeof floats / sizeof *floats; i++) {
        cfg_node *n = cfg_scalar(floats[i].t);
        ck_assert_msg(n->type == CFG_FLOAT && n->f == floats[i].v, "'%s' should be %g", floats[i].t,
                      floats[i].v);
        cfg_free(n);
    }
    static const char *nans[] = {".nan", ".NaN", ".NAN", "nan", "NaN"};
    for (size_t i = 0; i < sizeof nans / sizeof *nans; i++) {
        cfg_node *n = cfg_scalar(nans[i]);
        ck_assert_msg(n->type == CFG_FLOAT && isnan(n->f), "'%s' should be nan", nans[i]);
        cfg_free(n);
    }
    static const char *strs[] = {"abc", "yes", "no", "on", "tRUE", "nulls", "1e", "e5", ".", "-",
                                 "1.2.3", "0x10", "1_000", "+nan", "rope", "data/x", "${a}",
                                 "1 2", "none"};
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) {
        cfg_node *n = cfg_scalar(strs[i]);
        ck_assert_msg(n->type == CFG_STR && !strcmp(n->s, strs[i]), "'%s' should be a string", strs[i]);
        cfg_free(n);
    }
}
END_TEST

START_TEST(test_quoted_scalars_are_strings) {
    cfg_node *n = parse("a: '1'\nb: \"true\"\nc: 'null'\nd: 1\ne: !!str 5\nf: |\n  x\ng:\nh: ~\n");
    ck_assert_str_eq(get_str(n, "a"), "1");
    ck_assert_str_eq(get_str(n, "b"), "true");
    ck_assert_str_eq(get_str(n, "c"), "null");
    ck_assert_int_eq(get_int(n, "d"), 1);
    ck_assert_str_eq(get_str(n, "e"), "5");
    ck_assert_str_eq(get_str(n, "f"), "x\n");
    ck_assert(cfg_get(n, "g")->type == CFG_NULL);
    ck_assert(cfg_get(n, "h")->type == CFG_NULL);
    cfg_free(n);
}
END_TEST

START_TEST(test_positions) {
    cfg_node *n = parse("a: 1\nb:\n  c: [1, 2]\n  d:\n    - x\n");
    const cfg_node *b = cfg_get(n, "b"), *c = cfg_get(n, "b.c"), *x = cfg_get(n, "b.d.0");
    ck_assert_str_eq(b->file, "t.yaml");
    ck_assert_int_eq(cfg_get(n, "a")->line, 1);
    ck_assert_int_eq(b->line, 2); /* a map value is where its key is */
    ck_assert_int_eq(b->col, 1);
    ck_assert_int_eq(c->line, 3);
    ck_assert_int_eq(c->col, 3);
    ck_assert_int_eq(x->line, 5);
    ck_assert_int_eq(x->col, 7);
    cfg_free(n);
}
END_TEST

START_TEST(test_yaml_errors_have_locations) {
    trm_err e;
    ck_assert_str_eq(parse_err("a: 1\nb: [1, 2\nc: 3\n", &e),
                     "t.yaml:3:2: did not find expected ',' or ']' (while parsing a flow sequence "
                     "at line 2, column 4)");
    ASSERT_HAS(parse_err("a:\n  b: 1\n c: 2\n", &e), "t.yaml:3:2: did not find expected key");
    ASSERT_HAS(parse_err("a: 1\nb: \"x\n", &e), "t.yaml:3:1: found unexpected end of stream");
    ck_assert_str_eq(parse_err("a: 1\na: 2\n", &e), "t.yaml:2:1: duplicate key 'a'");
    ck_assert_str_eq(parse_err("x: &A 1\ny: *B\n", &e), "t.yaml:2:4: unknown alias");
    ck_assert_str_eq(parse_err("--- 1\n--- 2\n", &e), "t.yaml:2:1: only one YAML document is supported");
    ck_assert_str_eq(parse_err("? [1]\n: 2\n", &e), "t.yaml:1:3: map keys must be scalars");
    ASSERT_HAS(parse_err("a: 1\nb: \xff\n", &e), "t.yaml:2:4: invalid leading UTF-8 octet");
    char deep[2001];
    memset(deep, '[', 2000);
    deep[2000] = 0;
    ASSERT_HAS(parse_err(deep, &e), "t.yaml:1:129: maps and lists nest deeper than 128 levels (the limit)");
    /* exponential alias expansion is refused, not attempted */
    const char *laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                         "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                         "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                         "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n";
    ASSERT_HAS(parse_err(laughs, &e), "(the limit for one value is 1 MiB)");
}
END_TEST

START_TEST(test_json_and_anchors) {
    cfg_node *n = parse("{\"a\":1,\"b\":[1.5,\"x\",true,null,\"1\"],\n\t\"c\": {\"d\": -2e3, \"e\": \"\\u00e9\"}}");
    ck_assert_int_eq(get_int(n, "a"), 1);
    ck_assert(get_float(n, "b.0") == 1.5);
    ck_assert_str_eq(get_str(n, "b.1"), "x");
    ck_assert_int_eq(get_bool(n, "b.2"), 1);
    ck_assert(cfg_get(n, "b.3")->type == CFG_NULL);
    ck_assert_str_eq(get_str(n, "b.4"), "1");
    ck_assert(get_float(n, "c.d") == -2000.0);
    ck_assert_str_eq(get_str(n, "c.e"), "\xc3\xa9");
    cfg_free(n);
    n = parse("x: &A {p: 1, q: [2]}\ny: *A\n");
    ck_assert_int_eq(get_int(n, "y.p"), 1);
    ck_assert_int_eq(get_int(n, "y.q.0"), 2);
    ck_assert_str_eq(cfg_get(n, "y")->key, "y");
    cfg_free(n);
    n = parse("# only a comment\n");
    ck_assert(n->type == CFG_MAP && n->n == 0);
    cfg_free(n);
}
END_TEST

/* ---- output ---------------------------------------------------------------------------------- */

START_TEST(test_float_format) {
    static const struct { double v; const char *t; } cases[] = {
        {0.0001, "0.0001"}, {1e-30, "1.0e-30"}, {1.0, "1.0"}, {0.1, "0.1"}, {-2000.0, "-2000.0"},
        {1e16, "1.0e+16"}, {1e-5, "1.0e-05"}, {0.30000000000000004, "0.30000000000000004"},
        {-0.0, "-0.0"}, {INFINITY, ".inf"}, {-INFINITY, "-.inf"}, {1.7976931348623157e308,
        "1.7976931348623157e+308"}, {5e-324, "5.0e-324"}, {123456789.0, "123456789.0"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char buf[64];
        cfg_format_float(cases[i].v, buf, sizeof buf);
        ck_assert_str_eq(buf, cases[i].t);
        cfg_node *n = cfg_scalar(buf);
        ck_assert_msg(n->type == CFG_FLOAT && n->f == cases[i].v && signbit(n->f) == signbit(cases[i].v),
                      "%s does not read back", buf);
        cfg_free(n);
    }
    char buf[64];
    cfg_format_float(NAN, buf, sizeof buf);
    ck_assert_str_eq(buf, ".nan");
}
END_TEST

START_TEST(test_write_style) {
    char *ov[] = {"arch.L_layers=3", "+run_name=x", NULL};
    cfg_node *n = compose(&embedded, NULL, ov);
    char *y = cfg_to_yaml(n);
    ck_assert_msg(!strncmp(y, "arch:\n  name: recursive_reasoning.trm@", 38), "%s", y);
    ASSERT_HAS(y, "\n  L_layers: 3\n");
    ASSERT_HAS(y, "\n  loss:\n    name: losses@ACTLossHead\n    loss_type: stablemax_cross_entropy\n");
    ASSERT_HAS(y, "\ndata_paths: [data/arc-aug-1000]\ndata_paths_test: []\n");
    ASSERT_HAS(y, "\nevaluators:\n  - name: arc@ARC\n");
    ASSERT_HAS(y, "\nlr: 0.0001\n");
    ASSERT_HAS(y, "\nlr_min_ratio: 1.0\n");
    ASSERT_HAS(y, "\nema: false\n");
    ASSERT_HAS(y, "\n  puzzle_emb_ndim: 512\n");
    ck_assert_msg(strlen(y) > 15 && !strcmp(y + strlen(y) - 12, "run_name: x\n"), "%s", y);
    free(y);
    cfg_free(n);
}
END_TEST

static void add_str(cfg_node *list, cfg_node *map, const char *s) {
    cfg_node *a = cfg_new(CFG_STR), *b = cfg_new(CFG_STR);
    a->s = xstrdup(s);
    b->s = xstrdup(s);
    char *key = xasprintf("k%d", map->n);
    cfg_set(map, key, b);
    free(key);
    cfg_node *wrapper = cfg_new(CFG_MAP);
    cfg_set(wrapper, "x", a);
    list->items = xrealloc(list->items, (size_t)(list->n + 1) * sizeof *list->items);
    list->items[list->n++] = cfg_clone(cfg_get(wrapper, "x"));
    free(list->items[list->n - 1]->key);
    list->items[list->n - 1]->key = NULL;
    cfg_free(wrapper);
}

static void assert_round_trip(const cfg_node *n) {
    char *y = cfg_to_yaml(n);
    trm_err e = {{0}};
    cfg_node *back = cfg_parse(y, strlen(y), "out.yaml", &e);
    ck_assert_msg(back != NULL, "output does not parse: %s\n%s", e.msg, y);
    ck_assert_msg(cfg_equal(n, back), "round trip changed the tree:\n%s", y);
    char *y2 = cfg_to_yaml(back);
    ck_assert_str_eq(y, y2);
    free(y2);
    free(y);
    cfg_free(back);
}

START_TEST(test_round_trip) {
    cfg_node *n = compose(&embedded, "sudoku", NULL);
    assert_round_trip(n);
    cfg_free(n);

    static const char *strs[] = {"", "yes", "No", "on", "1", "-3", "1.5", "1e-4", ".inf", "null", "~",
                                 "true", "False", " lead", "trail ", "a: b", "x #y", "#c", "- d", "-e",
                                 "it's", "\"dq\"", "line\nbreak", "tab\there", "\x01", ("\xc3\xbc" "n\xc3\xaf" "c"),
                                 "[x]", "{y}", "a,b", "a]b", "${a.b}", "*star", "&amp", "!bang", "%pc",
                                 "@at", "`bt", "|pipe", ">gt", "?q", ":colon", "ends:", "a:b", "plain",
                                 "data/x", "---", "...", "back\\slash", "k=v",
                                 "nel\xc2\x85x", "ls\xe2\x80\xa8x", ("\xef\xbb\xbf" "bom"), "cr\rx"};
    cfg_node *root = cfg_new(CFG_MAP), *list = cfg_new(CFG_LIST), *smap = cfg_new(CFG_MAP);
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) add_str(list, smap, strs[i]);
    cfg_set(root, "strings_flow", list);
    cfg_set(root, "strings_block", smap);
    cfg_node *t = parse("floats: [0.0001, 1.0e-30, 1.0, -0.0, .inf, -.inf, .nan, 0.30000000000000004, "
                        "1.7976931348623157e+308, 5.0e-324, 1e22]\n"
                        "ints: [0, -9223372036854775808, 9223372036854775807]\n"
                        "'key: with colon': 1\n'1': one\n'': empty\n"
                        "empty_map: {}\nempty_list: []\n"
                        "maps: [{a: 1, b: [1, {c: [2, {}]}]}, {}, [x, {y: 1}], [[1, 2], [3]]]\n"
                        "deep: [[[{a: 1}]]]\n"
                        "nested: {x: {y: {z: [a, b]}}}\n"
                        "nul: null\nbools: [true, false]\n");
    for (int i = 0; i < t->n; i++) cfg_set(root, t->items[i]->key, cfg_clone(t->items[i]));
    cfg_free(t);
    assert_round_trip(root);
    assert_round_trip(cfg_get(root, "maps"));
    cfg_free(root);
}
END_TEST

/* ---- composition ---------------------------------------------------------------------------- */

START_TEST(test_reference_defaults) {
    cfg_node *n = compose(&embedded, NULL, NULL);
    ck_assert_ptr_null(cfg_get(n, "defaults"));
    ck_assert_ptr_null(cfg_get(n, "hydra"));
    ck_assert_str_eq(n->items[0]->key, "arch"); /* `- arch: trm` precedes _self_ */
    ck_assert_str_eq(n->items[1]->key, "data_paths");
    ck_assert_str_eq(get_str(n, "data_paths.0"), "data/arc-aug-1000");
    ck_assert_int_eq(cfg_get(n, "data_paths_test")->n, 0);
    ck_assert_str_eq(get_str(n, "evaluators.0.name"), "arc@ARC");
    ck_assert_int_eq(get_int(n, "global_batch_size"), 768);
    ck_assert_int_eq(get_int(n, "epochs"), 100000);
    ck_assert_int_eq(get_bool(n, "checkpoint_every_eval"), 1);
    ck_assert(get_float(n, "lr") == 1e-4);
    ck_assert(get_float(n, "lr_min_ratio") == 1.0);
    ck_assert(get_float(n, "puzzle_emb_lr") == 1e-2);
    ck_assert(get_float(n, "beta2") == 0.95);
    ck_assert_int_eq(get_bool(n, "ema"), 0);
    ck_assert(get_float(n, "ema_rate") == 0.999);
    ck_assert_str_eq(get_str(n, "arch.loss.loss_type"), "stablemax_cross_entropy");
    ck_assert(get_float(n, "arch.halt_exploration_prob") == 0.1);
    ck_assert_int_eq(get_int(n, "arch.halt_max_steps"), 16);
    ck_assert_int_eq(get_int(n, "arch.H_cycles"), 3);
    ck_assert_int_eq(get_int(n, "arch.L_cycles"), 6);
    ck_assert_int_eq(get_int(n, "arch.L_layers"), 2);
    ck_assert_int_eq(get_int(n, "arch.hidden_size"), 512);
    ck_assert_int_eq(get_int(n, "arch.puzzle_emb_ndim"), 512);
    ck_assert_str_eq(get_str(n, "arch.pos_encodings"), "rope");
    ck_assert_str_eq(get_str(n, "arch.forward_dtype"), "bfloat16");
    ck_assert_int_eq(get_bool(n, "arch.mlp_t"), 0);
    ck_assert_int_eq(get_bool(n, "arch.no_ACT_continue"), 1);
    ck_assert_str_eq(cfg_get(n, "arch")->file, "configs/arch/trm.yaml");
    ck_assert_str_eq(get_str(n, "recompute"), "none");
    ck_assert_str_eq(n->items[n->n - 1]->key, "recompute"); /* trm's own keys come last */
    cfg_free(n);
}
END_TEST

START_TEST(test_presets) {
    cfg_node *n = compose(&embedded, "sudoku", NULL);
    ck_assert_int_eq(get_bool(n, "arch.mlp_t"), 1);
    ck_assert_str_eq(get_str(n, "arch.pos_encodings"), "none");
    ck_assert_int_eq(get_int(n, "arch.hidden_size"), 512); /* still from arch/trm */
    ck_assert(get_float(n, "weight_decay") == 1.0);
    ck_assert_int_eq(get_bool(n, "ema"), 1);
    ck_assert_int_eq(get_int(n, "epochs"), 50000);
    ck_assert_str_eq(n->items[0]->key, "arch");
    cfg_free(n);
    n = compose(&embedded, "tiny", NULL);
    ck_assert_int_eq(get_int(n, "arch.puzzle_emb_ndim"), 64); /* the interpolation follows */
    cfg_free(n);
    n = compose(&embedded, "arc", NULL);
    ck_assert_int_eq(get_int(n, "arch.L_cycles"), 4);
    cfg_free(n);
    n = compose(&embedded, "maze.yaml", NULL); /* not a file here: the name is looked up */
    ck_assert_int_eq(get_int(n, "arch.L_cycles"), 4);
    cfg_free(n);
}
END_TEST

START_TEST(test_self_placement) {
    char *d = scratch("self");
    wfile(d, "base.yaml", "a: 1\nb: 1\nonly_base: x\nm: {x: 1, y: {z: 1}}\nr: {k: 1}\n");
    wfile(d, "self_first.yaml", "defaults:\n  - _self_\n  - base\na: 2\nown: y\n");
    wfile(d, "self_last.yaml", "defaults: [base, _self_]\na: 2\nm: {y: {w: 2}}\nr: 5\nhydra: {run: x}\n");
    wfile(d, "no_self.yaml", "a: 2\ndefaults: [base]\nown: y\n");
    const char *dirs[] = {d};
    cfg_search s = {dirs, 1, 0, NULL};
    cfg_node *n = compose(&s, "self_first", NULL);
    ck_assert_int_eq(get_int(n, "a"), 1);
    ck_assert_int_eq(key_pos(n, "a"), 0);
    ck_assert_int_eq(key_pos(n, "own"), 1);
    ck_assert_int_eq(key_pos(n, "b"), 2);
    cfg_free(n);
    n = compose(&s, "self_last", NULL);
    ck_assert_int_eq(get_int(n, "a"), 2);
    ck_assert_int_eq(key_pos(n, "a"), 0);
    ck_assert_int_eq(key_pos(n, "only_base"), 2);
    ck_assert_int_eq(get_int(n, "m.x"), 1); /* maps merge recursively */
    ck_assert_int_eq(get_int(n, "m.y.z"), 1);
    ck_assert_int_eq(get_int(n, "m.y.w"), 2);
    ck_assert_int_eq(get_int(n, "r"), 5); /* anything else replaces */
    ck_assert_ptr_null(cfg_get(n, "hydra"));
    ck_assert_ptr_null(cfg_get(n, "defaults"));
    cfg_free(n);
    n = compose(&s, "no_self", NULL); /* own content last */
    ck_assert_int_eq(get_int(n, "a"), 2);
    ck_assert_int_eq(key_pos(n, "a"), 0);
    ck_assert_int_eq(key_pos(n, "own"), 5);
    cfg_free(n);
    free(d);
}
END_TEST

START_TEST(test_user_dir_precedence) {
    char *d = scratch("user");
    wfile(d, "cfg_pretrain.yaml", "defaults:\n  - arch: trm\n  - _self_\nmine: 1\nlr: 0.5\n");
    wfile(d, "arch/trm.yaml", "hidden_size: 32\n");
    wfile(d, "arch/foo.yaml", "hidden_size: 64\nL_cycles: 1\npuzzle_emb_ndim: ${.hidden_size}\n");
    wfile(d, "opt/adam.yaml", "lr: 3\n");
    wfile(d, "arch/derived.yaml", "defaults: [foo, _self_]\nL_cycles: 9\n");
    const char *dirs[] = {d};
    cfg_search s = {dirs, 1, 1, NULL};
    cfg_node *n = compose(&s, NULL, NULL);
    ck_assert_int_eq(get_int(n, "mine"), 1);
    ck_assert(get_float(n, "lr") == 0.5);
    ck_assert_int_eq(get_int(n, "arch.hidden_size"), 32);
    ck_assert_ptr_null(cfg_get(n, "arch.L_cycles"));
    cfg_free(n);

    char *ov1[] = {"arch=foo", "arch.L_cycles=2", NULL};
    char *ov2[] = {"arch.L_cycles=2", "arch=foo", "arch.hidden_size=128", NULL};
    n = compose(&s, NULL, ov1);
    ck_assert_int_eq(get_int(n, "arch.hidden_size"), 64);
    ck_assert_int_eq(get_int(n, "arch.L_cycles"), 2);
    cfg_free(n);
    n = compose(&s, NULL, ov2);
    ck_assert_int_eq(get_int(n, "arch.L_cycles"), 2);
    ck_assert_int_eq(get_int(n, "arch.puzzle_emb_ndim"), 128);
    cfg_free(n);

    /* sudoku is built in, its `- cfg_pretrain` is the user's, and its arch tweaks apply on
     * top of the chosen group option */
    char *ov3[] = {"arch=foo", NULL};
    n = compose(&s, "sudoku", ov3);
    ck_assert_int_eq(get_int(n, "mine"), 1);
    ck_assert_int_eq(get_int(n, "arch.hidden_size"), 64);
    ck_assert_int_eq(get_bool(n, "arch.mlp_t"), 1);
    cfg_free(n);

    /* a group option's own defaults are relative to its group */
    char *ov5[] = {"arch=derived", NULL};
    n = compose(&s, NULL, ov5);
    ck_assert_int_eq(get_int(n, "arch.hidden_size"), 64);
    ck_assert_int_eq(get_int(n, "arch.L_cycles"), 9);
    ck_assert_int_eq(get_int(n, "arch.puzzle_emb_ndim"), 64);
    cfg_free(n);

    /* a group that is only a directory: its option is added */
    char *ov4[] = {"opt=adam", NULL};
    n = compose(&s, NULL, ov4);
    ck_assert_int_eq(get_int(n, "opt.lr"), 3);
    cfg_free(n);
    ck_assert(cfg_is_group(&s, "opt"));
    ck_assert(cfg_is_group(&embedded, "arch"));
    ck_assert(!cfg_is_group(&s, "lr"));

    trm_err e;
    char *bad[] = {"arch.L_cycles=2", "arch=nope", NULL};
    const char *m = compose_err(&s, NULL, bad, &e);
    ASSERT_HAS(m, "arch=nope");
    ASSERT_HAS(m, "available: derived, foo, hrm, transformers_baseline, trm, trm_hier6, trm_singlez");
    char *bad2[] = {"opt=sgd", NULL};
    ASSERT_HAS(compose_err(&s, NULL, bad2, &e), "no option 'sgd' in config group opt (available: adam)");

    cfg_entry *l;
    int nl;
    cfg_list(&s, &l, &nl);
    int seen = 0;
    for (int i = 0; i < nl; i++) {
        if (i) ck_assert(strcmp(l[i - 1].name, l[i].name) < 0);
        if (!strcmp(l[i].name, "cfg_pretrain")) {
            ck_assert_str_eq(l[i].source, d);
            seen |= 1;
        }
        if (!strcmp(l[i].name, "arch/trm")) {
            ck_assert_str_eq(l[i].source, d);
            seen |= 2;
        }
        if (!strcmp(l[i].name, "arch/foo")) seen |= 4;
        if (!strcmp(l[i].name, "sudoku")) {
            ck_assert_str_eq(l[i].source, "embedded");
            seen |= 8;
        }
    }
    ck_assert_int_eq(seen, 15);
    cfg_list_free(l, nl);

    const char *missing[] = {"/nonexistent/trm-configs"};
    cfg_search bad_search = {missing, 1, 1, NULL};
    ASSERT_HAS(compose_err(&bad_search, NULL, NULL, &e), "config dir '/nonexistent/trm-configs'");
    free(d);
}
END_TEST

START_TEST(test_config_given_as_path) {
    char *d = scratch("path");
    wfile(d, "exp/my.yaml", "defaults:\n  - helper\n  - cfg_pretrain\n  - _self_\nz: 1\nlr: 0.25\n");
    wfile(d, "exp/helper.yaml", "w: 2\n");
    char *path = xasprintf("%s/exp/my.yaml", d);
    cfg_node *n = compose(&embedded, path, NULL);
    ck_assert_int_eq(get_int(n, "z"), 1);
    ck_assert_int_eq(get_int(n, "w"), 2);
    ck_assert(get_float(n, "lr") == 0.25);
    ck_assert_int_eq(get_int(n, "arch.hidden_size"), 512);
    cfg_free(n);
    free(path);
    free(d);
}
END_TEST

START_TEST(test_defaults_errors) {
    char *d = scratch("defaults_err");
    wfile(d, "a.yaml", "defaults: [b]\nx: 1\n");
    wfile(d, "b.yaml", "defaults: [a]\ny: 1\n");
    wfile(d, "missing.yaml", "x: 1\ndefaults:\n  - nothere\n");
    wfile(d, "badentry.yaml", "defaults:\n  - [1]\n");
    wfile(d, "twice.yaml", "defaults: [_self_, _self_]\n");
    wfile(d, "notlist.yaml", "defaults: 3\n");
    wfile(d, "toplist.yaml", "- 1\n");
    wfile(d, "badgroup.yaml", "defaults:\n  - arch: nope\n");
    wfile(d, "broken.yaml", "a: [1\n");
    const char *dirs[] = {d};
    cfg_search s = {dirs, 1, 1, NULL};
    trm_err e;
    ASSERT_HAS(compose_err(&s, "a", NULL, &e), "defaults cycle");
    const char *m = compose_err(&s, "missing", NULL, &e);
    ASSERT_HAS(m, "missing.yaml:3:5: no config 'nothere'");
    ASSERT_HAS(compose_err(&s, "badentry", NULL, &e), "badentry.yaml:2:5: bad defaults entry");
    ASSERT_HAS(compose_err(&s, "twice", NULL, &e), "_self_ appears twice");
    ASSERT_HAS(compose_err(&s, "notlist", NULL, &e), "notlist.yaml:1:1: defaults must be a list");
    ASSERT_HAS(compose_err(&s, "toplist", NULL, &e), "the top level must be a map");
    m = compose_err(&s, "badgroup", NULL, &e);
    ASSERT_HAS(m, "badgroup.yaml:2:5: no option 'nope' in config group arch (available: hrm, transformers_baseline, trm, trm_hier6, trm_singlez)");
    ASSERT_HAS(compose_err(&s, "broken", NULL, &e), "broken.yaml:2:1:");
    m = compose_err(&embedded, "nosuchcfg", NULL, &e);
    ASSERT_HAS(m, "cfg=nosuchcfg: no such config (available: arc, cfg_pretrain, maze, sudoku, tiny)");
    free(d);
}
END_TEST

/* ---- overrides ------------------------------------------------------------------------------- */

static cfg_node *with(char **ov) { return compose(&embedded, NULL, ov); }

START_TEST(test_override_forms) {
    char *ov[] = {"arch.L_layers=3", "lr=1e-3", "beta1=1", "ema=True", "freeze_weights=false",
                  "+run_name=x", "++lr_min_ratio=abc", "++new.deep=1", "~ema_rate", "~seed=0",
                  "data_paths=[data/x]", "data_paths_test=[a, 'b c', \"1\", 2]",
                  "+nested=[[1,2],[3]]", "arch.name='a b'", "arch.pos_encodings=\"1\"",
                  "device=1e-4", "arch.forward_dtype=true", "min_eval_interval=null",
                  "+m={a: 1, b: [x, {c: 2}]}", "evaluators=[{name: y}]", "arch.loss={name: z}",
                  "+empty=", "eval_interval=2.0", "+list_empty=[]", "arch.expansion= 8 ",
                  "~compile=auto", "+s=${arch.hidden_size}", "arch.L_cycles=${arch.H_cycles}",
                  "+neg=-5", "+sp=a b", NULL};
    cfg_node *n = with(ov);
    ck_assert_int_eq(get_int(n, "arch.L_layers"), 3);
    ck_assert(get_float(n, "lr") == 1e-3);
    ck_assert(get_float(n, "beta1") == 1.0); /* float keys accept ints, stored as float */
    ck_assert_int_eq(get_bool(n, "ema"), 1);
    ck_assert_int_eq(get_bool(n, "freeze_weights"), 0);
    ck_assert_str_eq(get_str(n, "run_name"), "x");
    ck_assert_str_eq(get_str(n, "lr_min_ratio"), "abc"); /* ++ skips type checks */
    ck_assert_int_eq(get_int(n, "new.deep"), 1);
    ck_assert_ptr_null(cfg_get(n, "ema_rate"));
    ck_assert_ptr_null(cfg_get(n, "seed"));
    ck_assert_int_eq(cfg_get(n, "data_paths")->n, 1);
    ck_assert_str_eq(get_str(n, "data_paths.0"), "data/x");
    ck_assert_str_eq(get_str(n, "data_paths_test.1"), "b c");
    ck_assert_str_eq(get_str(n, "data_paths_test.2"), "1");
    ck_assert_int_eq(get_int(n, "data_paths_test.3"), 2);
    ck_assert_int_eq(get_int(n, "nested.0.1"), 2);
    ck_assert_int_eq(get_int(n, "nested.1.0"), 3);
    ck_assert_int_eq(cfg_get(n, "nested.1")->n, 1);
    ck_assert_str_eq(get_str(n, "arch.name"), "a b");
    ck_assert_str_eq(get_str(n, "arch.pos_encodings"), "1");
    ck_assert_str_eq(get_str(n, "device"), "1e-4"); /* string keys keep the text as given */
    ck_assert_str_eq(get_str(n, "arch.forward_dtype"), "true");
    ck_assert(cfg_get(n, "min_eval_interval")->type == CFG_NULL);
    ck_assert_int_eq(get_int(n, "m.a"), 1);
    ck_assert_int_eq(get_int(n, "m.b.1.c"), 2);
    ck_assert_str_eq(get_str(n, "evaluators.0.name"), "y");
    ck_assert_str_eq(get_str(n, "arch.loss.name"), "z");
    ck_assert_ptr_null(cfg_get(n, "arch.loss.loss_type"));
    ck_assert_str_eq(get_str(n, "empty"), "");
    ck_assert_int_eq(get_int(n, "eval_interval"), 2); /* 2.0 has no fraction */
    ck_assert_int_eq(cfg_get(n, "list_empty")->n, 0);
    ck_assert_int_eq(get_int(n, "arch.expansion"), 8);
    ck_assert_ptr_null(cfg_get(n, "compile"));
    ck_assert_int_eq(get_int(n, "s"), 512);
    ck_assert_int_eq(get_int(n, "arch.L_cycles"), 3);
    ck_assert_int_eq(get_int(n, "neg"), -5);
    ck_assert_str_eq(get_str(n, "sp"), "a b");
    ck_assert_int_eq(key_pos(n, "arch"), 0); /* changed keys keep their place */
    cfg_free(n);

    char *ov2[] = {"global_batch_size=null", "global_batch_size=abc", "++lr=[1]", NULL};
    n = with(ov2); /* a null value accepts anything */
    ck_assert_str_eq(get_str(n, "global_batch_size"), "abc");
    ck_assert_int_eq(get_int(n, "lr.0"), 1);
    cfg_free(n);
}
END_TEST

START_TEST(test_override_errors) {
    trm_err e;
    char *o1[] = {"arch.no_such_key=1", NULL};
    const char *m = compose_err(&embedded, NULL, o1, &e);
    ASSERT_HAS(m, "arch.no_such_key: no such key in configs/arch/trm.yaml; did you mean arch.");
    ASSERT_HAS(m, "? (+arch.no_such_key=... adds it as a new key)");
    char *o2[] = {"arch.hiden_size=1", NULL};
    ck_assert_str_eq(compose_err(&embedded, NULL, o2, &e),
                     "arch.hiden_size: no such key in configs/arch/trm.yaml; did you mean "
                     "arch.hidden_size? (+arch.hiden_size=... adds it as a new key)");
    char *o3[] = {"gloabl_batch_size=1", NULL};
    ASSERT_HAS(compose_err(&embedded, NULL, o3, &e),
               "no such key in configs/cfg_pretrain.yaml; did you mean global_batch_size?");
    char *o4[] = {"nope.x=1", NULL};
    ASSERT_HAS(compose_err(&embedded, NULL, o4, &e), "nope.x: no such key nope in configs/cfg_pretrain.yaml");

    static const struct { const char *ov, *msg; } cases[] = {
        {"arch.hidden_size=abc", "arch.hidden_size: expected an int, got string 'abc'"},
        {"arch.hidden_size=2.5", "arch.hidden_size: expected an int, got float 2.5"},
        {"arch.hidden_size='3'", "arch.hidden_size: expected an int, got string '3'"},
        {"arch.hidden_size=true", "arch.hidden_size: expected an int, got bool true"},
        {"arch.mlp_t=1", "arch.mlp_t: expected a bool, got int 1"},
        {"arch.mlp_t=yes", "arch.mlp_t: expected a bool, got string 'yes'"},
        {"lr=abc", "lr: expected a float, got string 'abc'"},
        {"lr=[1]", "lr: expected a float, got a list"},
        {"data_paths=data/x", "data_paths: expected a list, got string 'data/x'"},
        {"data_paths={a: 1}", "data_paths: expected a list, got a map"},
        {"arch.loss=3", "arch.loss: expected a map, got int 3"},
        {"device=[a]", "device: expected a string, got a list"},
        {"+lr=1", "lr: already exists in configs/cfg_pretrain.yaml; use lr=... to change it or ++lr=... to force"},
        {"~nope", "nope: no such key in configs/cfg_pretrain.yaml"},
        {"~seed=1", "~seed=1: the key holds int 0, so it was not deleted"},
        {"novalue", "override 'novalue' has no '='"},
        {"=3", "override '=3' has no key"},
        {"a..b=1", "override 'a..b=1': empty component in the key"},
        {"a b=1", "bad character ' ' in the key"},
        {"x=[1,2", "x=[1,2: missing ']'"},
        {"x=[1,2]]", "unexpected text after the value"},
        {"x='abc", "unterminated '-quoted string"},
        {"x={a 1}", "expected ':' after a map key"},
        {"x={a: 1, a: 2}", "duplicate key 'a'"},
        {"arch.hidden_size.x=1", "arch.hidden_size.x: arch.hidden_size is an int, not a map"},
        {"+arch.hidden_size.x=1", "arch.hidden_size.x: the parent is an int, not a map"},
        {"data_paths.3=x", "data_paths.3: no item 3 in the list (it has 1)"},
        {"+data_paths.1=x", "list items can only be changed by index"},
        {"arch=../etc", "bad config name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *ov[] = {(char *)cases[i].ov, NULL};
        ASSERT_HAS(compose_err(&embedded, NULL, ov, &e), cases[i].msg);
    }
}
END_TEST

START_TEST(test_apply_override_api) {
    cfg_node *n = parse("a: {b: 1, c: [x]}\nd: 0.5\n");
    trm_err e = {{0}};
    ck_assert_int_eq(cfg_apply_override(n, NULL, "a.b=2", &e), 0);
    ck_assert_int_eq(cfg_apply_override(n, NULL, "a.c.0=y", &e), 0);
    ck_assert_int_eq(cfg_apply_override(n, NULL, "d=3", &e), 0);
    ck_assert_int_eq(get_int(n, "a.b"), 2);
    ck_assert_str_eq(get_str(n, "a.c.0"), "y");
    ck_assert(get_float(n, "d") == 3.0);
    ck_assert_str_eq(cfg_get(n, "a.b")->file, "<command line>");
    ck_assert_int_eq(cfg_apply_override(n, NULL, "a.e=1", &e), -1);
    ck_assert_str_eq(e.msg, "a.e: no such key in t.yaml; did you mean a.b? (+a.e=... adds it as a new key)");
    ck_assert_int_eq(cfg_apply_override(n, NULL, "~a", &e), 0);
    ck_assert_ptr_null(cfg_get(n, "a"));
    ck_assert_int_eq(n->n, 1);
    cfg_free(n);
}
END_TEST

/* ---- interpolation ---------------------------------------------------------------------------- */

START_TEST(test_interpolation) {
    cfg_node *n = parse("a: 1\nb: ${a}\nc: ${b}\ns: x_${a}_${m.f}_${t}\nt: true\n"
                        "m:\n  f: 2.5\n  g: ${.f}\n  h: ${..a}\n  sub:\n    k: ${..f}\n    l: ${...a}\n"
                        "lst: ['${a}', 'z${a}', \"${.0}\"]\nwhole: ${m}\nesc: \\${a}\nref_esc: ${esc}\n"
                        "via: ${whole.sub.k}\nearly: ${late}\nlate: ${a}\n");
    trm_err e = {{0}};
    ck_assert_msg(cfg_resolve(n, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(get_int(n, "b"), 1);
    ck_assert_int_eq(get_int(n, "c"), 1); /* chained */
    ck_assert_str_eq(get_str(n, "s"), "x_1_2.5_true");
    ck_assert(get_float(n, "m.g") == 2.5); /* relative, typed */
    ck_assert_int_eq(get_int(n, "m.h"), 1);
    ck_assert(get_float(n, "m.sub.k") == 2.5);
    ck_assert_int_eq(get_int(n, "m.sub.l"), 1);
    ck_assert_int_eq(get_int(n, "lst.0"), 1);
    ck_assert_str_eq(get_str(n, "lst.1"), "z1");
    ck_assert_int_eq(get_int(n, "lst.2"), 1);
    ck_assert(cfg_get(n, "whole")->type == CFG_MAP);
    ck_assert(get_float(n, "whole.g") == 2.5);
    ck_assert_str_eq(cfg_get(n, "whole")->key, "whole");
    ck_assert_str_eq(get_str(n, "esc"), "${a}"); /* escaped: literal text */
    ck_assert_str_eq(get_str(n, "ref_esc"), "${a}");
    ck_assert(get_float(n, "via") == 2.5);
    ck_assert_int_eq(get_int(n, "early"), 1);
    cfg_free(n);
}
END_TEST

START_TEST(test_interpolation_errors) {
    static const struct { const char *yaml, *msg; } cases[] = {
        {"x: ${y}\ny: ${z}\nz: ${x}\n", "interpolation cycle: x -> y -> z -> x"},
        {"x: ${x}\n", "interpolation cycle: x -> x"},
        {"a:\n  x: ${a}\n", "interpolation cycle: a.x"},
        {"x: ${nope.k}\n", "x: interpolation '${nope.k}' refers to nope.k, which does not exist"},
        {"m:\n  x: ${.nope}\n", "m.x: interpolation '${.nope}' refers to m.nope, which does not exist"},
        {"x: ${...a}\n", "goes above the top"},
        {"x: a${y\n", "unterminated interpolation"},
        {"x: ${oc.env:HOME}\n", "unsupported interpolation"},
        {"x: a_${m}\nm: {k: 1}\n", "x: cannot put a map into the string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cfg_node *n = parse(cases[i].yaml);
        trm_err e = {{0}};
        ck_assert_int_eq(cfg_resolve(n, &e), -1);
        ASSERT_HAS(e.msg, cases[i].msg);
        cfg_free(n);
    }
}
END_TEST

START_TEST(test_interpolation_after_overrides) {
    char *ov[] = {"arch.hidden_size=256", NULL};
    cfg_node *n = with(ov);
    ck_assert_int_eq(get_int(n, "arch.puzzle_emb_ndim"), 256);
    cfg_free(n);
    char *ov2[] = {"+run_name=r${arch.L_cycles}_${lr}", "arch.L_cycles=4", NULL};
    n = with(ov2);
    ck_assert_str_eq(get_str(n, "run_name"), "r4_0.0001");
    cfg_free(n);
    trm_err e;
    char *ov3[] = {"+bad=${nope}", NULL};
    ASSERT_HAS(compose_err(&embedded, NULL, ov3, &e), "bad: interpolation '${nope}' refers to nope");
}
END_TEST

/* ---- getters and setters ---------------------------------------------------------------------- */

/* The reference's hydra configs: a plain value replacing `${.hidden_size}` keeps its own type;
 * schema float keys turn ints into floats once composed (pydantic's coercion), so they take
 * fractions, while int keys still refuse them; a run's saved config merges over the defaults. */
START_TEST(test_reference_override_parity) {
    static const char *const floats[] = {"arch.expansion", "lr", NULL};
    cfg_search s = embedded;
    s.float_keys = floats;
    char *o1[] = {"arch.puzzle_emb_ndim=0", "arch.expansion=2.5", NULL};
    cfg_node *n = compose(&s, NULL, o1);
    ck_assert_int_eq(get_int(n, "arch.puzzle_emb_ndim"), 0);
    ck_assert(get_float(n, "arch.expansion") == 2.5);
    cfg_free(n);
    n = compose(&s, NULL, (char *[]){NULL});
    ck_assert(get_float(n, "arch.expansion") == 4.0); /* the config file's 4, as a float */
    cfg_free(n);
    char *o2[] = {"arch.puzzle_emb_ndim=abc", NULL};
    n = compose(&s, NULL, o2); /* any type replaces an interpolation, as in OmegaConf */
    ck_assert_str_eq(get_str(n, "arch.puzzle_emb_ndim"), "abc");
    cfg_free(n);
    trm_err e;
    char *o3[] = {"arch.expansion=2.5", NULL};
    ASSERT_HAS(compose_err(&embedded, NULL, o3, &e), "arch.expansion: expected an int, got float 2.5");
    char *o4[] = {"arch.hidden_size=2.5", NULL};
    ASSERT_HAS(compose_err(&s, NULL, o4, &e), "arch.hidden_size: expected an int, got float 2.5");

    cfg_node *saved = parse("arch: {hidden_size: 128, expansion: 3.0}\nlr: 0.5\neval_interval: null\nextra_key: 1\n");
    char *o5[] = {"arch.L_cycles=2", NULL};
    n = cfg_compose_over(&s, "cfg_pretrain", saved, 1, o5, &e);
    ck_assert_msg(n != NULL, "%s", e.msg);
    ck_assert_int_eq(get_int(n, "arch.hidden_size"), 128);
    ck_assert_int_eq(get_int(n, "arch.puzzle_emb_ndim"), 128); /* the defaults' interpolation follows */
    ck_assert(get_float(n, "arch.expansion") == 3.0);
    ck_assert_int_eq(get_int(n, "arch.L_cycles"), 2);
    ck_assert_int_eq(get_int(n, "arch.L_layers"), 2); /* kept from the defaults */
    ck_assert(get_float(n, "lr") == 0.5);
    ck_assert(cfg_get(n, "eval_interval")->type == CFG_NULL);
    ck_assert_int_eq(get_int(n, "extra_key"), 1);
    ck_assert_str_eq(get_str(n, "device"), "auto"); /* trm's own keys come from the defaults */
    cfg_free(n);
}
END_TEST

START_TEST(test_getters) {
    cfg_node *n = compose(&embedded, NULL, NULL);
    trm_err e = {{0}};
    int64_t i = 0;
    double f = 0;
    int b = -1;
    const char *s = NULL;
    ck_assert_int_eq(cfg_get_int(n, "arch.hidden_size", &i, &e), 0);
    ck_assert_int_eq(i, 512);
    ck_assert_int_eq(cfg_get_int(n, "lr", &i, &e), -1);
    ck_assert_str_eq(e.msg, "lr: expected an int, got float 0.0001");
    ck_assert_int_eq(cfg_get_int(n, "arch.nope", &i, &e), -1);
    ck_assert_str_eq(e.msg, "arch.nope: missing config key");
    ck_assert_int_eq(cfg_get_float(n, "arch.hidden_size", &f, &e), 0);
    ck_assert(f == 512.0);
    ck_assert_int_eq(cfg_get_float(n, "device", &f, &e), -1);
    ck_assert_str_eq(e.msg, "device: expected a float, got string 'auto'");
    ck_assert_int_eq(cfg_get_bool(n, "ema", &b, &e), 0);
    ck_assert_int_eq(b, 0);
    ck_assert_int_eq(cfg_get_bool(n, "seed", &b, &e), -1);
    ck_assert_str_eq(e.msg, "seed: expected a bool, got int 0");
    ck_assert_int_eq(cfg_get_str(n, "arch.pos_encodings", &s, 0, &e), 0);
    ck_assert_str_eq(s, "rope");
    ck_assert_int_eq(cfg_get_str(n, "data_paths", &s, 0, &e), -1);
    ck_assert_str_eq(e.msg, "data_paths: expected a string, got a list");
    cfg_set(n, "run_name", cfg_new(CFG_NULL));
    ck_assert_int_eq(cfg_get_str(n, "run_name", &s, 1, &e), 0);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(cfg_get_str(n, "run_name", &s, 0, &e), -1);
    ck_assert_str_eq(e.msg, "run_name: expected a string, got null");
    ck_assert_str_eq(cfg_type_name(CFG_FLOAT), "float");
    ck_assert_ptr_null(cfg_get(n, "data_paths.1"));
    ck_assert_ptr_null(cfg_get(n, "a..b"));
    ck_assert_ptr_eq(cfg_get(n, ""), n);
    cfg_free(n);
}
END_TEST

START_TEST(test_set) {
    cfg_node *n = parse("a: 1\nb: {c: 2}\nz: 0\n");
    cfg_node *v = cfg_new(CFG_INT);
    v->i = 7;
    cfg_set(n, "x.y.z", v);
    ck_assert_int_eq(get_int(n, "x.y.z"), 7);
    ck_assert_str_eq(cfg_get(n, "x.y")->key, "y");
    v = cfg_new(CFG_INT);
    v->i = 9;
    cfg_set(n, "b", v); /* replaced in place */
    ck_assert_int_eq(key_pos(n, "b"), 1);
    ck_assert_int_eq(get_int(n, "b"), 9);
    v = cfg_new(CFG_BOOL);
    v->b = 1;
    cfg_set(n, "a.q", v); /* a scalar on the way becomes a map */
    ck_assert_int_eq(get_bool(n, "a.q"), 1);
    cfg_node *c = cfg_clone(n);
    ck_assert(cfg_equal(n, c));
    cfg_set(c, "z", cfg_new(CFG_NULL));
    ck_assert(!cfg_equal(n, c));
    cfg_free(c);
    cfg_free(n);
}
END_TEST

/* Mutated inputs (deterministic LCG) must fail cleanly or parse into trees that round-trip;
 * run under the sanitizer build this is what catches out-of-bounds reads. */
START_TEST(test_mutations_never_crash) {
    size_t len;
    const char *base = cfg_embedded_lookup("cfg_pretrain.yaml", &len);
    ck_assert_ptr_nonnull(base);
    static const char alphabet[] = "{}[]:,-'\"#&*!|>%@ \n\t$.~0123456789eE+aZ\\";
    uint64_t st = 12345;
    char *buf = xmalloc(len + 1);
    int parsed = 0;
    for (int iter = 0; iter < 1500; iter++) {
        memcpy(buf, base, len + 1);
        size_t cut = len;
        for (int k = 0; k < 4; k++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            size_t pos = (size_t)(st >> 33) % len;
            buf[pos] = alphabet[(st >> 20) % (sizeof alphabet - 1)];
        }
        if (iter % 7 == 0) cut = (size_t)(st >> 40) % len; /* truncated input */
        trm_err e = {{0}};
        cfg_node *n = cfg_parse(buf, cut, "m.yaml", &e);
        if (!n) {
            ck_assert_msg(!strncmp(e.msg, "m.yaml", 6), "error without location: %s", e.msg);
            continue;
        }
        parsed++;
        assert_round_trip(n);
        cfg_free(n);
    }
    ck_assert_int_gt(parsed, 100);
    free(buf);

    cfg_node *root = compose(&embedded, NULL, NULL);
    static const char *pieces[] = {"arch", ".", "lr", "=", "+", "~", "[", "]", "{", "}", ",", "'",
                                   "\"", "${", "a", "1", ": ", "null", "hidden_size", "data_paths", "0"};
    for (int iter = 0; iter < 3000; iter++) {
        char ov[64] = "";
        for (int k = 0; k < 6; k++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            strcat(ov, pieces[(st >> 33) % (sizeof pieces / sizeof *pieces)]);
        }
        trm_err e = {{0}};
        cfg_node *c = cfg_clone(root);
        if (cfg_apply_override(c, &embedded, ov, &e) == 0) {
            if (cfg_resolve(c, &e) == 0) assert_round_trip(c);
        } else {
            ck_assert_msg(e.msg[0] != 0, "'%s' failed without a message", ov);
        }
        cfg_free(c);
    }
    cfg_free(root);
}
END_TEST

/* ---- limits: hostile configs cost bounded time and memory (issue 31) ---------------------------- */

static char *resolve_err(const char *text, trm_err *e) {
    cfg_node *n = cfg_parse(text, strlen(text), "t.yaml", e);
    ck_assert_msg(n != NULL, "parse failed: %s", e->msg);
    int rc = cfg_resolve(n, e);
    cfg_free(n);
    ck_assert_msg(rc != 0, "expected resolution to fail");
    return e->msg;
}

START_TEST(test_limits_interpolation) {
    trm_err e;
    trm_sbuf b = {0};
    /* each value twice the one before: refused at the first past 1 MiB, before making it */
    sb_puts(&b, "i0: xxxxxxxx\n");
    for (int i = 1; i < 40; i++) sb_printf(&b, "i%d: ${i%d}${i%d}\n", i, i - 1, i - 1);
    double t0 = trm_now_seconds();
    ck_assert_str_eq(resolve_err(b.p, &e), "t.yaml:19: i18: interpolation makes this value longer than 1 MiB (the limit)");
    ck_assert(trm_now_seconds() - t0 < 1.0);
    free(b.p);
    /* values within 1 MiB each, 100 MiB in all */
    b = (trm_sbuf){0};
    sb_puts(&b, "base: ");
    for (int i = 0; i < 512 * 1024; i++) sb_putc(&b, 'x');
    sb_putc(&b, '\n');
    for (int i = 0; i < 200; i++) sb_printf(&b, "v%d: ${base}\n", i);
    ASSERT_HAS(resolve_err(b.p, &e), "interpolations of the config make more than 64 MiB (the limit)");
    free(b.p);
}
END_TEST

START_TEST(test_limits_aliases) {
    trm_err e;
    trm_sbuf b = {0};
    sb_puts(&b, "a: &a ");
    for (int i = 0; i < 900 * 1024; i++) sb_putc(&b, 'x');
    sb_puts(&b, "\n");
    for (int i = 0; i < 100; i++) sb_printf(&b, "c%d: *a\n", i);
    ASSERT_HAS(parse_err(b.p, &e), "aliases copy more than 200000 nodes or 64 MiB in all (the limits)");
    free(b.p);
}
END_TEST

/* Wide maps and long references: linear, not quadratic (a reference of 50,000 parts once took
 * seconds; 50,000 references to the last of 100,000 keys, minutes). */
START_TEST(test_limits_linear_time) {
    trm_err e;
    trm_sbuf b = {0};
    sb_puts(&b, "a: [1]\nb: ${a");
    for (int i = 0; i < 50000; i++) sb_puts(&b, ".x");
    sb_puts(&b, "}\n");
    double t0 = trm_now_seconds();
    ASSERT_HAS(resolve_err(b.p, &e), "which does not exist");
    ck_assert_msg(trm_now_seconds() - t0 < 2.0, "%.2f s", trm_now_seconds() - t0);
    free(b.p);
    b = (trm_sbuf){0};
    sb_puts(&b, "m:\n");
    for (int i = 0; i < 100000; i++) sb_printf(&b, "  k%d: %d\n", i, i);
    for (int i = 0; i < 50000; i++) sb_printf(&b, "r%d: ${m.k99999}\n", i);
    t0 = trm_now_seconds();
    cfg_node *n = parse(b.p);
    ck_assert_int_eq(cfg_resolve(n, &e), 0);
    ck_assert_int_eq(get_int(n, "r49999"), 99999);
    cfg_free(n);
    ck_assert_msg(trm_now_seconds() - t0 < 10.0, "%.2f s", trm_now_seconds() - t0);
    free(b.p);
    /* 50,000 anchors, then 50,000 aliases of the first */
    b = (trm_sbuf){0};
    for (int i = 0; i < 50000; i++) sb_printf(&b, "a%d: &x%d %d\n", i, i, i);
    for (int i = 0; i < 50000; i++) sb_printf(&b, "b%d: *x0\n", i);
    t0 = trm_now_seconds();
    n = parse(b.p);
    ck_assert_int_eq(get_int(n, "b49999"), 0);
    cfg_free(n);
    ck_assert_msg(trm_now_seconds() - t0 < 10.0, "%.2f s", trm_now_seconds() - t0);
    free(b.p);
    /* a file of 60,000 keys over its defaults' 60,000, half of them the same */
    char *d = scratch("wide");
    b = (trm_sbuf){0};
    for (int i = 0; i < 60000; i++) sb_printf(&b, "k%d: %d\n", i, i);
    wfile(d, "base.yaml", b.p);
    free(b.p);
    b = (trm_sbuf){0};
    sb_puts(&b, "defaults:\n  - base\n  - _self_\n");
    for (int i = 30000; i < 90000; i++) sb_printf(&b, "k%d: %d\n", i, -i);
    wfile(d, "top.yaml", b.p);
    free(b.p);
    const char *dirs[1] = {d};
    cfg_search s = {dirs, 1, 0, NULL};
    t0 = trm_now_seconds();
    n = compose(&s, "top", NULL);
    ck_assert_int_eq(n->n, 90000);
    ck_assert_int_eq(get_int(n, "k29999"), 29999);
    ck_assert_int_eq(get_int(n, "k30000"), -30000);
    ck_assert_int_eq(get_int(n, "k89999"), -89999);
    ck_assert_int_eq(key_pos(n, "k30000"), 30000); /* a replaced key keeps its place */
    cfg_free(n);
    ck_assert_msg(trm_now_seconds() - t0 < 10.0, "%.2f s", trm_now_seconds() - t0);
    free(d);
}
END_TEST

static Suite *config_suite(void) {
    Suite *s = suite_create("config");
    TCase *t = tcase_create("parse");
    tcase_add_test(t, test_scalar_typing);
    tcase_add_test(t, test_quoted_scalars_are_strings);
    tcase_add_test(t, test_positions);
    tcase_add_test(t, test_yaml_errors_have_locations);
    tcase_add_test(t, test_json_and_anchors);
    suite_add_tcase(s, t);
    t = tcase_create("write");
    tcase_add_test(t, test_float_format);
    tcase_add_test(t, test_write_style);
    tcase_add_test(t, test_round_trip);
    suite_add_tcase(s, t);
    t = tcase_create("compose");
    tcase_add_test(t, test_reference_defaults);
    tcase_add_test(t, test_presets);
    tcase_add_test(t, test_self_placement);
    tcase_add_test(t, test_user_dir_precedence);
    tcase_add_test(t, test_config_given_as_path);
    tcase_add_test(t, test_defaults_errors);
    suite_add_tcase(s, t);
    t = tcase_create("overrides");
    tcase_add_test(t, test_override_forms);
    tcase_add_test(t, test_override_errors);
    tcase_add_test(t, test_apply_override_api);
    suite_add_tcase(s, t);
    t = tcase_create("interpolation");
    tcase_add_test(t, test_interpolation);
    tcase_add_test(t, test_interpolation_errors);
    tcase_add_test(t, test_interpolation_after_overrides);
    suite_add_tcase(s, t);
    t = tcase_create("access");
    tcase_add_test(t, test_reference_override_parity);
    tcase_add_test(t, test_getters);
    tcase_add_test(t, test_set);
    suite_add_tcase(s, t);
    t = tcase_create("robustness");
    tcase_add_test(t, test_mutations_never_crash);
    tcase_add_test(t, test_limits_interpolation);
    tcase_add_test(t, test_limits_aliases);
    tcase_add_test(t, test_limits_linear_time);
    tcase_set_timeout(t, 120);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return trm_run_suite(config_suite());
}
