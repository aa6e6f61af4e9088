/* test_judge.c — the verdicts `trm generate --input` gives a prediction (data/judge.c):
 * solved, a changed given, a broken rule, a puzzle with no solution (clues that repeat a
 * digit, and clues that repeat nothing but leave a cell no digit) — on 4×4 and 9×9 Sudoku and
 * on a maze. */
#include <check.h>
#include <string.h>

#include "check_main.h"
#include "data/judge.h"

/* "1.3." style text to cells (0 blank). */
static void cells(const char *s, uint8_t *out, int n) {
    for (int i = 0; i < n * n; i++) out[i] = (uint8_t)(s[i] == '.' ? 0 : s[i] - '0');
}

static trm_verdict sudoku(int n, const char *q, const char *p, char *why) {
    uint8_t a[81], b[81];
    cells(q, a, n);
    cells(p, b, n);
    return trm_judge_sudoku(n, a, b, why, 256);
}

START_TEST(sudoku4) {
    char why[256];
    const char *q = "1.3..4.2.1.3.3.1", *sol = "1234341221434321";
    ck_assert_int_eq(sudoku(4, q, sol, why), TRM_VERDICT_SOLVED);
    ck_assert_int_eq(sudoku(4, q, "2134341221434321", why), TRM_VERDICT_CONTRADICTS);
    ck_assert_msg(strstr(why, "puts 2 at row 1, column 1, where the puzzle gives 1"), "%s", why);
    ck_assert_int_eq(sudoku(4, q, "1234341221434312", why), TRM_VERDICT_CONTRADICTS); /* last given 1 -> 2 */
    ck_assert_int_eq(sudoku(4, q, "1234341221134321", why), TRM_VERDICT_INVALID);     /* row 3: 2 1 1 3 */
    ck_assert_msg(strstr(why, "row 3 holds 1 twice"), "%s", why);
    ck_assert_int_eq(sudoku(4, q, "1234341221.34321", why), TRM_VERDICT_INVALID);
    ck_assert_msg(strstr(why, "row 3, column 3 is blank"), "%s", why);
    ck_assert_int_eq(sudoku(4, "11..............", sol, why), TRM_VERDICT_NO_SOLUTION);
    ck_assert_msg(strstr(why, "row 1 holds 1 twice"), "%s", why);
    /* nothing repeats, yet row 1's last cell can only be 4, which column 4 already holds */
    ck_assert_int_eq(sudoku(4, "123....4........", sol, why), TRM_VERDICT_NO_SOLUTION);
    ck_assert_msg(strstr(why, "no grid completes its givens"), "%s", why);
}
END_TEST

START_TEST(sudoku9) {
    char why[256];
    const char *q = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79";
    const char *sol = "534678912672195348198342567859761423426853791713924856961537284287419635345286179";
    ck_assert_int_eq(sudoku(9, q, sol, why), TRM_VERDICT_SOLVED);
    char bad[82];
    memcpy(bad, sol, 82);
    bad[2] = '2', bad[3] = '6'; /* row 1: 5 3 2 6 ... : 2 and 6 twice, the givens kept */
    ck_assert_int_eq(sudoku(9, q, bad, why), TRM_VERDICT_INVALID);
    char noway[82];
    memcpy(noway, q, 82);
    noway[2] = '5'; /* 5 twice in row 1 */
    ck_assert_int_eq(sudoku(9, noway, sol, why), TRM_VERDICT_NO_SOLUTION);
    uint8_t a[16] = {0}, b[16] = {0};
    ck_assert_int_eq(trm_judge_sudoku(5, a, b, why, sizeof why), TRM_VERDICT_NONE); /* no square boxes */
}
END_TEST

START_TEST(maze) {
    char why[256];
    const char *q = "#####"
                    "#S  #"
                    "### #"
                    "#G  #"
                    "#####";
    const char *path = "#####"
                       "#Soo#"
                       "###o#"
                       "#Goo#"
                       "#####";
    ck_assert_int_eq(trm_judge_maze(5, q, path, why, sizeof why), TRM_VERDICT_SOLVED);
    const char *short_path = "#####"
                             "#Soo#"
                             "### #"
                             "#Goo#"
                             "#####";
    ck_assert_int_eq(trm_judge_maze(5, q, short_path, why, sizeof why), TRM_VERDICT_INVALID);
    const char *through_wall = "#####"
                               "#S  #"
                               "#o# #"
                               "#G  #"
                               "#####";
    ck_assert_int_eq(trm_judge_maze(5, q, through_wall, why, sizeof why), TRM_VERDICT_CONTRADICTS);
    const char *closed = "#####"
                         "#S  #"
                         "#####"
                         "#G  #"
                         "#####";
    ck_assert_int_eq(trm_judge_maze(5, closed, path, why, sizeof why), TRM_VERDICT_NO_SOLUTION);
}
END_TEST

int main(void) {
    Suite *s = suite_create("judge");
    TCase *tc = tcase_create("verdicts");
    tcase_add_test(tc, sudoku4);
    tcase_add_test(tc, sudoku9);
    tcase_add_test(tc, maze);
    suite_add_tcase(s, tc);
    return trm_run_suite(s);
}
