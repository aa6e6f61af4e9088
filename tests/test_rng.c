/* test_rng.c — Philox4x32-10 known answers (Random123 kat_vectors), stream layout,
 * determinism and statistical sanity of uniform / below / normal / permutation. */
#include <check.h>

#include "check_main.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/rng.h"

static void check_block(uint64_t key, uint64_t hi, uint64_t lo, const uint32_t want[4]) {
    uint32_t out[4];
    trm_philox4x32(key, hi, lo, out);
    for (int i = 0; i < 4; i++) ck_assert_msg(out[i] == want[i], "word %d: %08x != %08x", i, out[i], want[i]);
}

START_TEST(test_known_answers) {
    const uint32_t zero[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
    check_block(0, 0, 0, zero);
    const uint32_t ones[4] = {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd};
    check_block(UINT64_MAX, UINT64_MAX, UINT64_MAX, ones);
    /* counter words (243f6a88 85a308d3 13198a2e 03707344), key (a4093822 299f31d0) */
    const uint32_t pi[4] = {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1};
    check_block(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull, pi);
}
END_TEST

START_TEST(test_stream_layout) {
    /* stream goes into the high counter words, the block index into the low ones */
    trm_rng r;
    trm_rng_init(&r, 0x1234567890abcdefull, 77);
    for (uint64_t blk = 0; blk < 3; blk++) {
        uint32_t want[4];
        trm_philox4x32(0x1234567890abcdefull, 77, blk, want);
        for (int i = 0; i < 4; i++) ck_assert_uint_eq(trm_rng_u32(&r), want[i]);
    }
    ck_assert_uint_eq(r.counter, 3);
    trm_rng_init(&r, 5, 6);
    uint32_t w[4];
    trm_philox4x32(5, 6, 0, w);
    ck_assert_uint_eq(trm_rng_u64(&r), (uint64_t)w[0] | (uint64_t)w[1] << 32);
}
END_TEST

START_TEST(test_determinism) {
    trm_rng a, b, c, d;
    trm_rng_init(&a, 42, 3);
    trm_rng_init(&b, 42, 3);
    trm_rng_init(&c, 43, 3);
    trm_rng_init(&d, 42, 4);
    int diff_seed = 0, diff_stream = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = trm_rng_u64(&a);
        ck_assert_uint_eq(x, trm_rng_u64(&b));
        diff_seed += x != trm_rng_u64(&c);
        diff_stream += x != trm_rng_u64(&d);
    }
    ck_assert_int_gt(diff_seed, 990);
    ck_assert_int_gt(diff_stream, 990);
    /* a copied state continues identically (what resumption relies on) */
    trm_rng e = a;
    for (int i = 0; i < 7; i++) trm_rng_u32(&e);
    trm_rng f = e;
    for (int i = 0; i < 100; i++) ck_assert_uint_eq(trm_rng_u32(&e), trm_rng_u32(&f));
}
END_TEST

START_TEST(test_uniform) {
    trm_rng r;
    trm_rng_init(&r, 1, 0);
    double sum = 0, lo = 1, hi = 0;
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        double u = trm_rng_uniform(&r);
        ck_assert(u >= 0.0 && u < 1.0);
        sum += u;
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
    }
    ck_assert_double_eq_tol(sum / n, 0.5, 0.005);
    ck_assert(lo < 1e-4 && hi > 1 - 1e-4);
}
END_TEST

START_TEST(test_below_chi_square) {
    trm_rng r;
    trm_rng_init(&r, 7, 1);
    enum { K = 10, N = 100000 };
    long cnt[K] = {0};
    for (int i = 0; i < N; i++) {
        uint64_t v = trm_rng_below(&r, K);
        ck_assert_uint_lt(v, K);
        cnt[v]++;
    }
    double chi = 0, expect = (double)N / K;
    for (int k = 0; k < K; k++) chi += (cnt[k] - expect) * (cnt[k] - expect) / expect;
    ck_assert_msg(chi < 33.7, "chi-square %g with 9 dof", chi); /* p = 1e-4 */
    ck_assert_uint_eq(trm_rng_below(&r, 1), 0);
    ck_assert_uint_eq(trm_rng_below(&r, 0), 0);
}
END_TEST

START_TEST(test_below_unbiased) {
    /* n = 3*2^30: plain modulo of a 32-bit word would give [0, 2^30) half the mass instead
     * of a third; the same with 64-bit words and n = 3*2^62 */
    trm_rng r;
    trm_rng_init(&r, 9, 2);
    const int N = 100000;
    const uint64_t bounds[2] = {3ull << 30, 3ull << 62};
    for (int k = 0; k < 2; k++) {
        uint64_t n = bounds[k];
        int low = 0;
        for (int i = 0; i < N; i++) {
            uint64_t v = trm_rng_below(&r, n);
            ck_assert_uint_lt(v, n);
            low += v < n / 3;
        }
        ck_assert_double_eq_tol((double)low / N, 1.0 / 3.0, 0.01);
    }
}
END_TEST

START_TEST(test_normal) {
    trm_rng r, r2;
    trm_rng_init(&r, 3, 3);
    trm_rng_init(&r2, 3, 3);
    double s1 = 0, s2 = 0, s4 = 0;
    int tail = 0;
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        double x = trm_rng_normal(&r);
        ck_assert(isfinite(x));
        ck_assert(x == trm_rng_normal(&r2));
        s1 += x;
        s2 += x * x;
        s4 += x * x * x * x;
        tail += fabs(x) > 1.959964;
    }
    ck_assert_double_eq_tol(s1 / n, 0.0, 0.01);
    ck_assert_double_eq_tol(s2 / n, 1.0, 0.02);
    ck_assert_double_eq_tol(s4 / n, 3.0, 0.1);
    ck_assert_double_eq_tol((double)tail / n, 0.05, 0.003);
}
END_TEST

START_TEST(test_permutation) {
    trm_rng r;
    trm_rng_init(&r, 11, 0);
    int64_t n = 1000, *p = malloc(sizeof(int64_t) * n);
    char *seen = calloc(n, 1);
    trm_rng_permutation(&r, p, n);
    int fixed = 0;
    for (int64_t i = 0; i < n; i++) {
        ck_assert(p[i] >= 0 && p[i] < n);
        ck_assert(!seen[p[i]]);
        seen[p[i]] = 1;
        fixed += p[i] == i;
    }
    ck_assert_int_lt(fixed, 10); /* identity would be 1000; expected ~1 */
    trm_rng_permutation(&r, p, 0);
    trm_rng_permutation(&r, p, 1);
    ck_assert_int_eq(p[0], 0);
    /* every value equally likely at position 0 (n = 5) */
    long cnt[5] = {0};
    int64_t q[5];
    for (int t = 0; t < 50000; t++) {
        trm_rng_permutation(&r, q, 5);
        cnt[q[0]]++;
    }
    double chi = 0;
    for (int k = 0; k < 5; k++) chi += (cnt[k] - 10000.0) * (cnt[k] - 10000.0) / 10000.0;
    ck_assert_msg(chi < 23.5, "chi-square %g with 4 dof", chi);
    free(p);
    free(seen);
}
END_TEST

int main(void) {
    Suite *s = suite_create("rng");
    TCase *tc = tcase_create("rng");
    tcase_add_test(tc, test_known_answers);
    tcase_add_test(tc, test_stream_layout);
    tcase_add_test(tc, test_determinism);
    tcase_add_test(tc, test_uniform);
    tcase_add_test(tc, test_below_chi_square);
    tcase_add_test(tc, test_below_unbiased);
    tcase_add_test(tc, test_normal);
    tcase_add_test(tc, test_permutation);
    suite_add_tcase(s, tc);
    return trm_run_suite(s);
}
