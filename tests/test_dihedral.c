/* test_dihedral.c — the eight transforms against numpy's results on a 2×3 grid, and every
 * transform composed with its inverse is the identity (also on a non-square grid). */
#include <check.h>

#include "check_main.h"
#include "data/dihedral.h"

/* numpy: a = np.array([[1,2,3],[4,5,6]]); rot90(a) = [[3,6],[2,5],[1,4]] etc. */
START_TEST(matches_numpy) {
    const uint8_t a[6] = {1, 2, 3, 4, 5, 6};
    const uint8_t want[8][6] = {
        {1, 2, 3, 4, 5, 6}, /* identity */
        {3, 6, 2, 5, 1, 4}, /* rot90 */
        {6, 5, 4, 3, 2, 1}, /* rot180 */
        {4, 1, 5, 2, 6, 3}, /* rot270 */
        {3, 2, 1, 6, 5, 4}, /* fliplr */
        {4, 5, 6, 1, 2, 3}, /* flipud */
        {1, 4, 2, 5, 3, 6}, /* transpose */
        {6, 3, 5, 2, 4, 1}, /* fliplr(rot90) */
    };
    const int want_rows[8] = {2, 3, 2, 3, 2, 2, 3, 3};
    for (int t = 0; t < 8; t++) {
        uint8_t out[6];
        int r, c;
        trm_dihedral(a, 2, 3, t, out, &r, &c);
        ck_assert_int_eq(r, want_rows[t]);
        ck_assert_int_eq(r * c, 6);
        for (int k = 0; k < 6; k++) ck_assert_msg(out[k] == want[t][k], "tid %d cell %d: %d vs %d", t, k, out[k], want[t][k]);
    }
}
END_TEST

START_TEST(inverse_is_identity) {
    uint8_t a[35], b[35], c[35];
    for (int k = 0; k < 35; k++) a[k] = (uint8_t)(k * 7 + 3);
    for (int t = 0; t < 8; t++) {
        int r, cc, r2, c2;
        trm_dihedral(a, 5, 7, t, b, &r, &cc);
        trm_dihedral(b, r, cc, trm_dihedral_inverse(t), c, &r2, &c2);
        ck_assert_int_eq(r2, 5);
        ck_assert_int_eq(c2, 7);
        for (int k = 0; k < 35; k++) ck_assert_int_eq(a[k], c[k]);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("dihedral");
    TCase *tc = tcase_create("transforms");
    tcase_add_test(tc, matches_numpy);
    tcase_add_test(tc, inverse_is_identity);
    suite_add_tcase(s, tc);
    return trm_run_suite(s);
}
