/* test_opts.c — the builders' table-driven option parser (trm/util/opts.c): every kind,
 * range errors, unknown arguments and missing values. */
#include <check.h>

#include "check_main.h"
#include <string.h>

#include "util/opts.h"

typedef struct {
    const char *out;
    int force, size, given, plain;
    int64_t count, diff;
    uint64_t seed;
    const char *list[8];
    int nlist;
} fixture;

static int parse(fixture *f, int argc, const char **argv, trm_err *e) {
    memset(f, 0, sizeof *f);
    const trm_opt opts[] = {
        TRM_OPT("--out", TRM_OPT_STR, &f->out),
        TRM_OPT("--force", TRM_OPT_FLAG, &f->force),
        TRM_OPT("--size", TRM_OPT_INT, &f->size, .min = 1, .max = 100),
        TRM_OPT("--count", TRM_OPT_I64, &f->count, .min = 0, .max = INT64_MAX),
        TRM_OPT("--diff", TRM_OPT_I64, &f->diff, .n = &f->given),
        TRM_OPT("--seed", TRM_OPT_U64, &f->seed),
        TRM_OPT("--plain", TRM_OPT_INT, &f->plain), /* no range given: int's */
        TRM_OPT("--list", TRM_OPT_LIST, f->list, .n = &f->nlist),
        TRM_OPT_END,
    };
    return trm_parse_opts(argc, (char **)argv, opts, e);
}

START_TEST(test_all_kinds) {
    fixture f;
    trm_err e = {{0}};
    const char *argv[] = {"--list", "a", "b", "--out", "dir", "--force", "--size", "7", "--count", "0",
                          "--diff", "-3", "--seed", "-1"};
    ck_assert_int_eq(parse(&f, 14, argv, &e), 0);
    ck_assert_str_eq(f.out, "dir");
    ck_assert_int_eq(f.force, 1);
    ck_assert_int_eq(f.size, 7);
    ck_assert_int_eq(f.count, 0);
    ck_assert_int_eq(f.diff, -3);
    ck_assert_int_eq(f.given, 1);
    ck_assert(f.seed == UINT64_MAX);
    ck_assert_int_eq(f.nlist, 2);
    ck_assert_str_eq(f.list[0], "a");
    ck_assert_str_eq(f.list[1], "b");
    const char *none[] = {"--out", "x"};
    ck_assert_int_eq(parse(&f, 2, none, &e), 0);
    ck_assert_int_eq(f.given, 0); /* --diff not given */
}
END_TEST

static void expect_error(int argc, const char **argv, const char *msg) {
    fixture f;
    trm_err e = {{0}};
    ck_assert_int_eq(parse(&f, argc, argv, &e), -1);
    ck_assert_msg(strstr(e.msg, msg) != NULL, "'%s' does not contain '%s'", e.msg, msg);
}

START_TEST(test_errors) {
    expect_error(2, (const char *[]){"--size", "0"}, "--size must be in 1..100");
    expect_error(2, (const char *[]){"--size", "101"}, "--size must be in 1..100");
    expect_error(2, (const char *[]){"--count", "-1"}, "--count must be >= 0");
    expect_error(2, (const char *[]){"--size", "x7"}, "--size: expected an integer");
    expect_error(2, (const char *[]){"--plain", "4294967296"}, "--plain: 4294967296 is out of range");
    expect_error(1, (const char *[]){"--out"}, "--out needs a value");
    expect_error(1, (const char *[]){"--seed"}, "--seed needs a value");
    expect_error(1, (const char *[]){"--nope"}, "unexpected argument '--nope'");
    expect_error(1, (const char *[]){"stray"}, "unexpected argument 'stray'");
}
END_TEST

int main(void) {
    Suite *s = suite_create("cli_opts");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, test_all_kinds);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return trm_run_suite(s);
}
