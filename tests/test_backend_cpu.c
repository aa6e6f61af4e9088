/* test_backend_cpu.c — the cpu backend against naive double-precision references written
 * here: every forward op on random inputs of awkward sizes, every backward op against
 * central differences of its reference forward, the fused gate/up + SwiGLU passes against
 * the unfused ops bit for bit, and the loss head, ACT bookkeeping and optimisers against
 * hand-computed values. */
#include <check.h>

#include "check_main.h"
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "kernels/cpu/exp_wide.h"
#include "kernels/cpu/gemm_cpu.h"
#include "dist/dist.h"
#include "util/rng.h"
#include "test_support.h"

/* Under AddressSanitizer an impossible allocation must still come back NULL (as it does in
 * production) rather than abort the test; without ASan this hook is never called. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* ---- helpers ------------------------------------------------------------------------------ */

static double *dcopy(const float *x, size_t n) {
    double *d = malloc((n ? n : 1) * sizeof(double));
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static float *fzeros(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static trm_backend *mk(void) {
    trm_err e = {{0}};
    trm_backend *b = trm_cpu_backend_create(-1, &e);
    ck_assert_msg(b != NULL, "create: %s", e.msg);
    return b;
}

static void expect_close(const char *what, const float *got, const double *want, size_t n,
                         double atol, double rtol) {
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= atol + rtol * fabs(want[i])))
            ck_abort_msg("%s[%zu]: got %.9g, want %.9g (|diff| %.3g)", what, i, got[i], want[i],
                         d);
    }
}

static double dot_wd(const double *w, const double *y, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += w[i] * y[i];
    return s;
}

/* A scalar function of a double vector, for central differences. */
typedef double (*scalar_fn)(const double *x, void *ctx);

/* Compares analytic gradient g (float) with central differences of f at x, every element. */
static void expect_grad(const char *what, scalar_fn f, void *ctx, double *x, size_t n,
                        const float *g, double h, double atol, double rtol) {
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + h;
        double fp = f(x, ctx);
        x[i] = x0 - h;
        double fm = f(x, ctx);
        x[i] = x0;
        double fd = (fp - fm) / (2 * h);
        double d = fabs((double)g[i] - fd);
        if (!(d <= atol + rtol * fabs(fd)))
            ck_abort_msg("%s: d/dx[%zu] analytic %.9g, finite difference %.9g", what, i, g[i],
                         fd);
    }
}

/* ---- registry and memory ----------------------------------------------------------------- */

START_TEST(test_registry) {
    ck_assert_int_ge(trm_backend_count(), 1);
    const trm_backend_entry *c = trm_backend_find("cpu");
    ck_assert_ptr_nonnull(c);
    ck_assert_str_eq(c->name, "cpu");
    ck_assert_ptr_null(trm_backend_find("nope"));
    ck_assert_ptr_null(trm_backend_find(NULL));
    ck_assert_ptr_eq(trm_backend_at(0), c);
    ck_assert_ptr_null(trm_backend_at(-1));
    ck_assert_ptr_null(trm_backend_at(trm_backend_count()));
    ck_assert_int_eq(c->caps.compile, 0);
    ck_assert_int_eq(c->caps.distributed, trm_dist_have_mpi()); /* through MPI */
    ck_assert_int_eq(c->caps.bf16, 0);
    ck_assert_int_eq(c->caps.unified_memory, 1);
    char desc[256] = "";
    ck_assert_int_eq(c->probe(desc, sizeof desc), 1);
    ck_assert_msg(strstr(desc, "thread") != NULL, "probe desc: %s", desc);
    char tiny[4];
    ck_assert_int_eq(c->probe(tiny, sizeof tiny), 1);
    ck_assert_int_lt((int)strlen(tiny), 4);
    trm_err e = {{0}};
    trm_backend *b = c->create(-1, &e);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(b->name, "cpu");
    ck_assert_int_eq(b->caps.unified_memory, 1);
    b->destroy(b);
    b = c->create(0, &e);
    ck_assert_ptr_nonnull(b);
    b->destroy(b);
    ck_assert_ptr_null(c->create(3, &e));
    ck_assert_msg(strstr(e.msg, "index 3") != NULL, "error: %s", e.msg);
}
END_TEST

START_TEST(test_memory) {
    trm_backend *be = mk();
    for (size_t n = 0; n < 300; n += 37) {
        unsigned char *p = be->alloc(be, n);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq((int)((uintptr_t)p % 64), 0);
        for (size_t i = 0; i < n; i++) ck_assert_int_eq(p[i], 0);
        be->free(be, p);
    }
    ck_assert_ptr_null(be->alloc(be, SIZE_MAX - 8));
    ck_assert_ptr_null(be->alloc(be, SIZE_MAX / 2));
    float src[5] = {1, 2, 3, 4, 5}, back[5] = {0};
    float *d = be->alloc(be, sizeof src), *d2 = be->alloc(be, sizeof src);
    be->to_device(be, d, src, sizeof src);
    be->copy(be, d2, d, sizeof src);
    be->zero(be, d, sizeof src);
    be->sync(be);
    be->to_host(be, back, d2, sizeof src);
    for (int i = 0; i < 5; i++) ck_assert_float_eq(back[i], src[i]);
    be->to_host(be, back, d, sizeof src);
    for (int i = 0; i < 5; i++) ck_assert_float_eq(back[i], 0.0f);
    be->free(be, d);
    be->free(be, d2);
    be->free(be, NULL);
    /* a megabyte and more goes in 256 KiB pieces across the threads: a ragged last piece, and
     * an overlapping copy (one memmove) shifted either way */
    size_t big = ((size_t)1 << 20) + 37, span = big + 4096;
    unsigned char *a = be->alloc(be, span), *b = be->alloc(be, span), *want = malloc(span);
    for (size_t i = 0; i < span; i++) a[i] = (unsigned char)(i * 131 + 7), b[i] = 0xAB;
    be->copy(be, b + 3, a + 5, big);
    for (size_t i = 0; i < span; i++) ck_assert_int_eq(b[i], i >= 3 && i < big + 3 ? a[i + 2] : 0xAB);
    memcpy(want, a, span);
    memmove(want + 1000, want + 7, big);
    be->copy(be, a + 1000, a + 7, big);
    ck_assert(memcmp(a, want, span) == 0);
    memcpy(want, a, span);
    memmove(want + 9, want + 2000, big);
    be->copy(be, a + 9, a + 2000, big);
    ck_assert(memcmp(a, want, span) == 0);
    be->zero(be, b + 1, big);
    ck_assert_int_eq(b[0], 0xAB);
    for (size_t i = 1; i < big + 1; i++) ck_assert_int_eq(b[i], 0);
    for (size_t i = big + 3; i < span; i++) ck_assert_int_eq(b[i], 0xAB);
    be->free(be, a);
    be->free(be, b);
    free(want);
    be->destroy(be);
}
END_TEST

/* ---- GEMM ------------------------------------------------------------------------------- */

static void gemm_case(trm_backend *be, tr_rng *r, int ta, int tb, int M, int N, int K, int pad,
                      int batch, float alpha, float beta) {
    int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    int64_t sA = (int64_t)(ta ? K : M) * lda + 3, sB = (int64_t)(tb ? N : K) * ldb + 1,
            sC = (int64_t)M * ldc + 5;
    size_t nA = (size_t)sA * batch, nB = (size_t)sB * batch, nC = (size_t)sC * batch;
    float *A = frand(r, nA, -1, 1), *B = frand(r, nB, -1, 1), *C = frand(r, nC, -1, 1);
    double *want = dcopy(C, nC);
    for (int i = 0; i < batch; i++)
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double s = 0;
                for (int k = 0; k < K; k++) {
                    double a = ta ? A[i * sA + (size_t)k * lda + m] : A[i * sA + (size_t)m * lda + k];
                    double b = tb ? B[i * sB + (size_t)n * ldb + k] : B[i * sB + (size_t)k * ldb + n];
                    s += a * b;
                }
                double *c = &want[i * sC + (size_t)m * ldc + n];
                *c = alpha * s + (beta == 0.0f ? 0.0 : beta * *c);
            }
    be->gemm(be, TR_F32x3, ta, tb, M, N, K, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);
    char what[96];
    snprintf(what, sizeof what, "gemm ta=%d tb=%d %dx%dx%d pad=%d batch=%d", ta, tb, M, N, K, pad,
             batch);
    expect_close(what, C, want, nC, 1e-5 * (K + 1), 1e-5);
    free(A);
    free(B);
    free(C);
    free(want);
}

START_TEST(test_gemm) {
    trm_backend *be = mk();
    tr_rng r = {1};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            gemm_case(be, &r, ta, tb, 7, 13, 5, 0, 1, 1.0f, 0.0f);
            gemm_case(be, &r, ta, tb, 7, 13, 5, 3, 3, 0.5f, 1.0f);
            gemm_case(be, &r, ta, tb, 1, 1, 1, 1, 1, 2.0f, -0.5f);
            gemm_case(be, &r, ta, tb, 9, 4, 11, 2, 17, 1.0f, 0.25f); /* batch-parallel path */
            gemm_case(be, &r, ta, tb, 130, 70, 90, 1, 1, 1.0f, 0.0f); /* threaded */
            /* gemm_cpu.c's edges: K past one packed block (256), whole 12×32 / 6×16 tiles and
             * ragged ones, blocks split among threads */
            gemm_case(be, &r, ta, tb, 37, 70, 600, 1, 1, 0.5f, 0.5f);
            gemm_case(be, &r, ta, tb, 197, 289, 300, 0, 1, 1.0f, 0.0f);
            gemm_case(be, &r, ta, tb, 24, 64, 256, 2, 1, -1.0f, 1.0f);
        }
    /* the weight gradients' Aᵀ·B with K in slices (gemm_tn_slices): a ragged last slice, blocks
     * of C split in both directions, alpha and beta applied once to the slices' sum */
    gemm_case(be, &r, 1, 0, 203, 531, 1300, 1, 1, 0.5f, 0.75f);
    gemm_case(be, &r, 1, 0, 13, 40, 1100, 0, 1, -1.0f, 1.0f);
    gemm_case(be, &r, 0, 0, 6, 5, 0, 0, 2, 1.0f, 0.5f);  /* K = 0: C = beta·C */
    gemm_case(be, &r, 0, 1, 6, 5, 4, 0, 2, 0.0f, 2.0f); /* alpha = 0 */
    /* beta = 0 must overwrite C, NaN included. */
    float A[4] = {1, 2, 3, 4}, B[4] = {1, 0, 0, 1}, C[4] = {NAN, NAN, NAN, NAN};
    be->gemm(be, TR_F32x3, 0, 0, 2, 2, 2, 1.0f, A, 2, 0, B, 2, 0, 0.0f, C, 2, 0, 1);
    for (int i = 0; i < 4; i++) ck_assert_float_eq(C[i], A[i]);
    be->destroy(be);
}
END_TEST

/* exp_affine's 16-lane AVX-512 path and its AVX2 path give the bits of cpu.h's generic 8-lane
 * loop: over exp's whole range (both clamps, subnormal results, NaN), both affine maps the
 * kernels use, and every length across the paths' four-vector turns and masked tails. */
START_TEST(test_exp_wide_bits) {
#if TRM_EXP_WIDE
    enum { N = 40000 };
    float *x = malloc(N * sizeof(float)), *w = malloc(N * sizeof(float)), *n8 = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) x[i] = -120.0f + 220.0f * (float)i / N + 1e-3f * (float)(i % 7);
    x[0] = NAN, x[1] = -0.0f, x[2] = 1e-30f, x[3] = 88.7f, x[4] = -103.9f;
    const float ab[2][2] = {{1.0f, 0.0f}, {-1.0f, 0.0f}};
    for (int path = 0; path < 2; path++) {
        if (!(path ? __builtin_cpu_supports("avx2") : __builtin_cpu_supports("avx512f"))) continue;
        void (*f)(float *, const float *, int, float, float) = path ? exp_affine_avx2 : exp_affine_wide;
        for (int m = 0; m < 2; m++)
            for (int n = path ? 1 : 16; n <= 140; n++)
                for (int i0 = 0; i0 + n <= N; i0 += 1409) {
                    f(w, x + i0, n, ab[m][0], ab[m][1]);
                    exp_affine_8(n8, x + i0, n, ab[m][0], ab[m][1]);
                    ck_assert_msg(memcmp(w, n8, (size_t)n * sizeof(float)) == 0, "path %d: exp at %d (+%d), map %d",
                                  path, i0, n, m);
                }
        f(w, x, N, -2.0f, 0.5f), exp_affine_8(n8, x, N, -2.0f, 0.5f);
        ck_assert_msg(memcmp(w, n8, N * sizeof(float)) == 0, "path %d, whole", path);
    }
    free(x), free(w), free(n8);
#endif
}
END_TEST

/* trm's own GEMM sums each element in the same order whatever the thread count. */
START_TEST(test_gemm_threads_bitwise) {
    if (!trm_gemm_cpu_available()) return;
    tr_rng r = {2};
    int M = 301, N = 517, K = 1100; /* K·N past gemm_cpu.c's PACK_CHUNK: packed in two chunks of K */
    float *A = frand(&r, (size_t)M * K, -1, 1), *B = frand(&r, (size_t)K * N, -1, 1);
    float *C1 = calloc((size_t)M * N, sizeof(float)), *C3 = calloc((size_t)M * N, sizeof(float));
    trm_gemm_cpu(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C1, N, 1, 0);
    trm_gemm_cpu(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C3, N, 3, 0);
    ck_assert_msg(memcmp(C1, C3, (size_t)M * N * sizeof(float)) == 0, "1 and 3 threads differ");
    for (int s = 0; s < 200; s++) { /* right as well as repeatable, across the chunks of K */
        int i = (s * 7919) % M, n = (s * 104729) % N;
        double want = 0.0, mag = 0.0;
        for (int k = 0; k < K; k++) {
            want += (double)A[(size_t)i * K + k] * B[(size_t)n * K + k];
            mag += fabs((double)A[(size_t)i * K + k] * B[(size_t)n * K + k]);
        }
        ck_assert_msg(fabs(C1[(size_t)i * N + n] - want) <= 1e-5 * mag, "C[%d][%d] %g, want %g", i, n,
                      C1[(size_t)i * N + n], want);
    }
    /* A transposed and B not, the weight gradients' layout: with K past one slice (gemm_cpu.c's
     * gemm_tn_slices) the sums run in slices of K, another order than C1's, the same for any
     * thread count; against the same product from A laid out the other way, to fp32 rounding */
    float *At = malloc((size_t)M * K * sizeof(float)), *Bn = malloc((size_t)K * N * sizeof(float));
    float *Ct = calloc((size_t)M * N, sizeof(float));
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) At[(size_t)k * M + i] = A[(size_t)i * K + k];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) Bn[(size_t)k * N + n] = B[(size_t)n * K + k];
    trm_gemm_cpu(1, 0, M, N, K, 1.0f, At, M, Bn, N, 0.0f, Ct, N, 1, 0);
    /* TRM_CPU_SLICES=0: the general path (Aᵀ read in place by the AVX-512 kernel, packed by each
     * block with AVX2; op(B) in two chunks of K) sums as the NT product does, to the bit */
    setenv("TRM_CPU_SLICES", "0", 1);
    for (int t = 1; t <= 3; t += 2) {
        memset(C3, 0, (size_t)M * N * sizeof(float));
        trm_gemm_cpu(1, 0, M, N, K, 1.0f, At, M, Bn, N, 0.0f, C3, N, t, 0);
        ck_assert_msg(memcmp(C1, C3, (size_t)M * N * sizeof(float)) == 0, "general path, transposed, %d threads", t);
    }
    unsetenv("TRM_CPU_SLICES");
    ck_assert_msg(memcmp(Ct, C1, (size_t)M * N * sizeof(float)) != 0, "the slices did not run");
    for (int t = 2; t <= 3; t++) {
        for (size_t i = 0; i < (size_t)M * N; i++) C3[i] = NAN; /* beta = 0: never read */
        trm_gemm_cpu(1, 0, M, N, K, 1.0f, At, M, Bn, N, 0.0f, C3, N, t, 0);
        ck_assert_msg(memcmp(Ct, C3, (size_t)M * N * sizeof(float)) == 0, "transposed operands, %d threads", t);
    }
    for (size_t i = 0; i < (size_t)M * N; i++)
        ck_assert_msg(fabsf(Ct[i] - C1[i]) <= 1e-3f, "transposed operands at %zu: %g, %g", i, Ct[i], C1[i]);
    free(Ct);
    free(A), free(B), free(C1), free(C3), free(At), free(Bn);
}
END_TEST

/* The weight gradients' slices with A and B read in place (gemm_cpu.c's run_slice_brows:
 * AVX-512, B's rows ≤ 128 floats and whole vectors apart; every case below qualifies where
 * trm_gemm_cpu_lanes is 16) give the bits of both packed (TRM_CPU_SLICES=packed): whole panels
 * of B only (N 128), a partial last panel of 16 columns (N 112 and 80, the second with ldb = N),
 * of 4 and 27 (N 100 and 123), and only a partial one (N 20, ldb 32); whole panels of A (M 384),
 * a partial last one read overlapping the one before (M 1030, 13, 100, 25), and fewer than 12
 * rows, packed (M 7, with N 50); whole panels of A only with A's rows longer than M (M 12 and
 * 24, lda M + 5) and a last slice shorter than a block of K (K 600); a ragged last slice, alpha
 * and beta, at 1 and 3 threads; and the product itself against a double one. */
START_TEST(test_gemm_slices_brows) {
    if (!trm_gemm_cpu_available()) return;
    tr_rng r = {31};
    static const int Ms[] = {1030, 13, 384, 100, 25, 13, 7, 12, 24}, Ns[] = {128, 112, 80, 100, 123, 20, 50, 64, 96},
                     lds[] = {128, 128, 80, 128, 128, 32, 64, 64, 96}, pads[] = {0, 0, 0, 0, 0, 0, 0, 5, 5};
    for (int c = 0; c < 9; c++)
        for (int t = 1; t <= 3; t += 2) {
            int M = Ms[c], N = Ns[c], ldb = lds[c], K = pads[c] ? 600 : 1300, lda = M + pads[c], ldc = N + 3;
            float alpha = c == 1 ? 0.5f : 1.0f, beta = c == 1 ? 0.75f : 0.0f;
            float *A = frand(&r, (size_t)K * lda, -1, 1), *B = frand(&r, (size_t)K * ldb, -1, 1);
            float *C0 = frand(&r, (size_t)M * ldc, -1, 1), *C1 = malloc((size_t)M * ldc * sizeof(float));
            float *C2 = malloc((size_t)M * ldc * sizeof(float));
            memcpy(C1, C0, (size_t)M * ldc * sizeof(float));
            memcpy(C2, C0, (size_t)M * ldc * sizeof(float));
            trm_gemm_cpu(1, 0, M, N, K, alpha, A, lda, B, ldb, beta, C1, ldc, t, 0);
            setenv("TRM_CPU_SLICES", "packed", 1);
            trm_gemm_cpu(1, 0, M, N, K, alpha, A, lda, B, ldb, beta, C2, ldc, t, 0);
            unsetenv("TRM_CPU_SLICES");
            ck_assert_msg(memcmp(C1, C2, (size_t)M * ldc * sizeof(float)) == 0, "B in place: %dx%d, %d threads", M,
                          N, t);
            for (int s = 0; s < 64; s++) {
                int i = (s * 7919) % M, n = (s * 104729) % N;
                double want = beta * C0[(size_t)i * ldc + n], mag = fabs(want);
                for (int k = 0; k < K; k++) {
                    double p = (double)A[(size_t)k * lda + i] * B[(size_t)k * ldb + n];
                    want += alpha * p, mag += fabs(p);
                }
                ck_assert_msg(fabs(C1[(size_t)i * ldc + n] - want) <= 1e-5 * mag, "C[%d][%d] %g, want %g", i, n,
                              C1[(size_t)i * ldc + n], want);
            }
            for (int i = 0; i < M; i++) /* the columns past N are left alone */
                for (int n = N; n < ldc; n++)
                    ck_assert_float_eq(C1[(size_t)i * ldc + n], C0[(size_t)i * ldc + n]);
            free(A), free(B), free(C0), free(C1), free(C2);
        }
}
END_TEST

/* gemm_small.c's unpacked tiles: the bits of trm_gemm_cpu on the same product, op(A) read by
 * rows (sak 1) or columns (sam 1), every tile height and width, K across its blocks of 256,
 * beta 0 (C never read), 1 and another; and against a double product. */
START_TEST(test_gemm_small) {
    if (!trm_gemm_cpu_available()) return;
    int lanes = trm_gemm_cpu_lanes(); /* 16, or 8 with TRM_CPU_GEMM=avx2 (test_backend_cpu_avx2) */
    tr_rng r = {12};
    static const int Ms[] = {1, 5, 6, 7, 12, 13, 85}, Ns[] = {16, 32, 48, 64, 96, 112};
    static const int Ks[] = {1, 64, 256, 257, 300, 512};
    static const float betas[] = {0.0f, 1.0f, 0.5f};
    for (int mi = 0; mi < 7; mi++)
        for (int ni = 0; ni < 6; ni++)
            for (int ki = 0; ki < 6; ki++)
                for (int ta = 0; ta < 2; ta++) {
                    int M = Ms[mi], N = Ns[ni], K = Ks[ki], lda = ta ? M + 3 : K + 5, ldb = N + 7, ldc = N + 2;
                    float beta = betas[(mi + ni + ki) % 3], alpha = 0.7f;
                    float *A = frand(&r, (size_t)(ta ? K : M) * lda, -1, 1), *B = frand(&r, (size_t)K * ldb, -1, 1);
                    float *C0 = frand(&r, (size_t)M * ldc, -1, 1), *C1 = malloc((size_t)M * ldc * sizeof(float));
                    float *C2 = malloc((size_t)M * ldc * sizeof(float));
                    memcpy(C1, C0, (size_t)M * ldc * sizeof(float));
                    if (beta == 0.0f)
                        for (int i = 0; i < M; i++) C1[(size_t)i * ldc] = NAN; /* never read */
                    memcpy(C2, C1, (size_t)M * ldc * sizeof(float));
                    size_t sam = ta ? 1 : (size_t)lda, sak = ta ? (size_t)lda : 1;
                    ck_assert(trm_gemm_small(lanes, M, N, K, alpha, A, sam, sak, B, ldb, beta, C1, ldc));
                    trm_gemm_cpu(ta, 0, M, N, K, alpha, A, lda, B, ldb, beta, C2, ldc, 1, 0);
                    ck_assert_msg(memcmp(C1, C2, (size_t)M * ldc * sizeof(float)) == 0, "M %d N %d K %d ta %d", M, N,
                                  K, ta);
                    for (int i = 0; i < M; i++) /* the two columns past N left alone */
                        ck_assert(!memcmp(C1 + (size_t)i * ldc + N, C0 + (size_t)i * ldc + N, 2 * sizeof(float)));
                    for (int i = 0; i < M; i += 4)
                        for (int n = 0; n < N; n += 5) {
                            double want = 0.0, mag = 0.0;
                            for (int k = 0; k < K; k++) {
                                double p = (double)A[i * sam + k * sak] * B[(size_t)k * ldb + n];
                                want += p, mag += fabs(p);
                            }
                            want *= alpha, mag *= alpha;
                            if (beta != 0.0f) want += beta * C0[(size_t)i * ldc + n];
                            ck_assert_msg(fabs(C1[(size_t)i * ldc + n] - want) <= 1e-5 * (mag + 1.0), "C[%d][%d]", i,
                                          n);
                        }
                    free(A), free(B), free(C0), free(C1), free(C2);
                }
    ck_assert(!trm_gemm_small(lanes, 4, 24, 8, 1.0f, NULL, 8, 1, NULL, 24, 0.0f, NULL, 24)); /* N not whole vectors */
    ck_assert(!trm_gemm_small(0, 4, 16, 8, 1.0f, NULL, 8, 1, NULL, 16, 0.0f, NULL, 16));  /* no vectors: the GEMM's */
}
END_TEST

static float round_bf16(float x) { /* nearest even, as the kernels' packing */
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* bf16 products: operands rounded to bf16, sums in fp32 — so against a double-precision product
 * of the rounded operands only fp32 summation error remains, and against the unrounded ones
 * the difference is bf16-sized (the rounding really happens). Odd K pads a pair. */
START_TEST(test_gemm_bf16_products) {
    if (!trm_gemm_cpu_available() || !trm_gemm_cpu_bf16()) return; /* no AVX512-BF16 here */
    tr_rng r = {3};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int M = 29, N = 45, K = 515; /* past two packed blocks of K, odd */
            float *A = frand(&r, (size_t)M * K, -1, 1), *B = frand(&r, (size_t)K * N, -1, 1);
            float *C = calloc((size_t)M * N, sizeof(float));
            int lda = ta ? M : K, ldb = tb ? K : N;
            trm_gemm_cpu(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N, 2, 1);
            double worst_r = 0, worst_u = 0;
            for (int m = 0; m < M; m++)
                for (int n = 0; n < N; n++) {
                    double sr = 0, su = 0;
                    for (int k = 0; k < K; k++) {
                        float a = ta ? A[(size_t)k * lda + m] : A[(size_t)m * lda + k];
                        float b = tb ? B[(size_t)n * ldb + k] : B[(size_t)k * ldb + n];
                        sr += (double)round_bf16(a) * round_bf16(b);
                        su += (double)a * b;
                    }
                    double c = C[(size_t)m * N + n];
                    if (fabs(c - sr) > worst_r) worst_r = fabs(c - sr);
                    if (fabs(c - su) > worst_u) worst_u = fabs(c - su);
                }
            ck_assert_msg(worst_r < 1e-4, "bf16 gemm ta=%d tb=%d: %g from the rounded operands' product", ta, tb, worst_r);
            ck_assert_msg(worst_u > 1e-3, "bf16 gemm ta=%d tb=%d: operands not rounded (%g)", ta, tb, worst_u);
            free(A), free(B), free(C);
        }
}
END_TEST

/* The AMX bf16 path (kernels/cpu/gemm_amx.c) on the tiles where the CPU has them, and always with
 * the tile product emulated (TRM_CPU_GEMM=amx-emulate: the same packing, blocking and epilogue):
 * against the double-precision product of the rounded operands, with edges in every dimension
 * (M, N, K not multiples of the 32-row strips, 32-column panels or 32-k steps), alpha, beta
 * (0, 1 and other: C read and scaled), rows of C wider than N, and 1 and 3 threads bitwise. */
static void amx_case(tr_rng *r, int ta, int tb, int M, int N, int K, float alpha, float beta) {
    int lda = ta ? M + 3 : K + 1, ldb = tb ? K + 2 : N + 5, ldc = N + 7;
    float *A = frand(r, (size_t)(ta ? K : M) * lda, -1, 1), *B = frand(r, (size_t)(tb ? N : K) * ldb, -1, 1);
    float *C0 = frand(r, (size_t)M * ldc, -1, 1), *C1 = malloc((size_t)M * ldc * sizeof(float));
    float *C3 = malloc((size_t)M * ldc * sizeof(float));
    memcpy(C1, C0, (size_t)M * ldc * sizeof(float)), memcpy(C3, C0, (size_t)M * ldc * sizeof(float));
    ck_assert(trm_gemm_amx(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C1, ldc, 1));
    ck_assert(trm_gemm_amx(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C3, ldc, 3));
    ck_assert_msg(memcmp(C1, C3, (size_t)M * ldc * sizeof(float)) == 0, "amx %dx%dx%d: 1 and 3 threads differ", M, N, K);
    double worst = 0;
    for (int m = 0; m < M; m++) {
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) {
                float a = ta ? A[(size_t)k * lda + m] : A[(size_t)m * lda + k];
                float b = tb ? B[(size_t)n * ldb + k] : B[(size_t)k * ldb + n];
                s += (double)round_bf16(a) * round_bf16(b);
            }
            double want = alpha * s + (beta != 0.0f ? beta * (double)C0[(size_t)m * ldc + n] : 0.0);
            double d = fabs(C1[(size_t)m * ldc + n] - want);
            if (d > worst) worst = d;
        }
        for (int n = N; n < ldc; n++) /* past N: untouched */
            ck_assert_msg(C1[(size_t)m * ldc + n] == C0[(size_t)m * ldc + n], "amx wrote past N at row %d", m);
    }
    ck_assert_msg(worst < 2e-6 * K + 1e-5, "amx ta=%d tb=%d %dx%dx%d alpha %g beta %g: %g off", ta, tb, M, N, K,
                  alpha, beta, worst);
    free(A), free(B), free(C0), free(C1), free(C3);
}

static void amx_cases(void) {
    tr_rng r = {9};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            amx_case(&r, ta, tb, 29, 45, 515, 1.0f, 0.0f);   /* odd K, one strip, two panels */
            amx_case(&r, ta, tb, 70, 33, 64, 0.5f, 1.0f);    /* three strips, a 1-column panel */
            amx_case(&r, ta, tb, 1, 1, 1, 1.0f, 0.25f);      /* one element, K padded to 32 */
            amx_case(&r, ta, tb, 96, 96, 130, -2.0f, 0.0f);  /* whole strips and panels */
            amx_case(&r, ta, tb, 64, 64, 96, 1.0f, 0.0f);    /* alpha 1: tiles stored into C */
            amx_case(&r, ta, tb, 70, 64, 100, 1.0f, 1.0f);   /* tiles loaded from C, a partial strip */
        }
}

START_TEST(test_gemm_amx) {
    if (!trm_gemm_cpu_available() || !trm_gemm_cpu_bf16()) return; /* no AVX512-BF16 to pack with */
    if (trm_gemm_amx_available()) amx_cases(); /* the real tiles */
    setenv("TRM_CPU_GEMM", "amx-emulate", 1);
    ck_assert(trm_gemm_amx_available());
    amx_cases();
    unsetenv("TRM_CPU_GEMM");
    setenv("TRM_CPU_AMX", "0", 1); /* the switch that keeps AVX512-BF16 */
    ck_assert(!trm_gemm_amx_available());
    unsetenv("TRM_CPU_AMX");
}
END_TEST

/* ---- elementwise ------------------------------------------------------------------------- */

START_TEST(test_add_axpy_transpose) {
    trm_backend *be = mk();
    tr_rng r = {2};
    size_t sizes[] = {1, 13, 40001};
    for (int k = 0; k < 3; k++) {
        size_t n = sizes[k];
        float *a = frand(&r, n, -3, 3), *b = frand(&r, n, -3, 3), *y = fzeros(n);
        be->add(be, y, a, b, n);
        for (size_t i = 0; i < n; i++) ck_assert_float_eq(y[i], a[i] + b[i]);
        float *y0 = malloc(n * sizeof(float));
        memcpy(y0, y, n * sizeof(float));
        be->axpy(be, y, a, -0.75f, n);
        for (size_t i = 0; i < n; i++) ck_assert_float_eq(y[i], y0[i] + -0.75f * a[i]);
        free(a);
        free(b);
        free(y);
        free(y0);
    }
    /* batch, rows, cols, extra input row stride, extra output row stride (zero pads) */
    int dims[][5] = {{2, 37, 45, 0, 0}, {1, 1, 9, 0, 0}, {3, 64, 33, 0, 0}, {1, 100, 400, 0, 0},
                     {3, 97, 40, 0, 7}, {2, 13, 10, 6, 3}};
    for (int k = 0; k < 6; k++) {
        int B = dims[k][0], R = dims[k][1], C = dims[k][2], ldi = C + dims[k][3], ldo = R + dims[k][4];
        size_t ni = (size_t)B * R * ldi, no = (size_t)B * C * ldo;
        float *in = frand(&r, ni, -1, 1), *out = frand(&r, no, 5, 6); /* pads must become zeros */
        be->transpose(be, out, ldo, in, ldi, B, R, C);
        for (int b = 0; b < B; b++)
            for (int j = 0; j < C; j++)
                for (int i = 0; i < ldo; i++)
                    ck_assert_float_eq(out[(size_t)b * C * ldo + (size_t)j * ldo + i],
                                       i < R ? in[(size_t)b * R * ldi + (size_t)i * ldi + j] : 0.0f);
        free(in);
        free(out);
    }
    be->destroy(be);
}
END_TEST

/* ---- RMS norm ------------------------------------------------------------------------------ */

static void ref_rms(const double *x, const double *res, int rows, int dim, double eps, double *y) {
    for (int r = 0; r < rows; r++) {
        double ss = 0;
        for (int d = 0; d < dim; d++) {
            double v = x[r * dim + d] + (res ? res[r * dim + d] : 0);
            ss += v * v;
        }
        double s = 1 / sqrt(ss / dim + eps);
        for (int d = 0; d < dim; d++) y[r * dim + d] = (x[r * dim + d] + (res ? res[r * dim + d] : 0)) * s;
    }
}

typedef struct {
    int rows, dim;
    const double *other, *w;
    double *y;
} rms_ctx;

static double rms_loss(const double *x, void *p) {
    rms_ctx *c = p;
    ref_rms(x, c->other, c->rows, c->dim, 1e-5, c->y);
    return dot_wd(c->w, c->y, (size_t)c->rows * c->dim);
}

START_TEST(test_rmsnorm) {
    trm_backend *be = mk();
    tr_rng r = {3};
    int shapes[][2] = {{5, 37}, {1, 1}, {3, 8}, {130, 512}};
    for (int k = 0; k < 4; k++)
        for (int use_res = 0; use_res < 2; use_res++) {
            int rows = shapes[k][0], dim = shapes[k][1];
            size_t n = (size_t)rows * dim;
            float *x = frand(&r, n, -2, 2), *res = use_res ? frand(&r, n, -2, 2) : NULL;
            float *y = fzeros(n), *rstd = fzeros(rows);
            double *xd = dcopy(x, n), *rd = res ? dcopy(res, n) : NULL, *yd = malloc(n * sizeof(double));
            ref_rms(xd, rd, rows, dim, 1e-5, yd);
            be->rmsnorm_fwd(be, y, rstd, x, res, rows, dim, dim, 1e-5f);
            expect_close("rmsnorm y", y, yd, n, 1e-6, 2e-6);
            /* In place (y = x) gives the same result. */
            float *xi = malloc(n * sizeof(float));
            memcpy(xi, x, n * sizeof(float));
            be->rmsnorm_fwd(be, xi, NULL, xi, res, rows, dim, dim, 1e-5f);
            for (size_t i = 0; i < n; i++) ck_assert_float_eq(xi[i], y[i]);
            if (rows * dim <= 300) {
                float *w = frand(&r, n, -1, 1), *dx = fzeros(n);
                double *wd = dcopy(w, n);
                be->rmsnorm_bwd(be, dx, w, y, rstd, rows, dim, dim);
                rms_ctx c = {rows, dim, rd, wd, malloc(n * sizeof(double))};
                expect_grad("rmsnorm dx", rms_loss, &c, xd, n, dx, 1e-4, 2e-5, 1e-4);
                if (rd) {
                    c.other = xd;
                    expect_grad("rmsnorm dres", rms_loss, &c, rd, n, dx, 1e-4, 2e-5, 1e-4);
                }
                free(c.y);
                free(w);
                free(wd);
                free(dx);
            }
            free(x);
            free(res);
            free(y);
            free(rstd);
            free(xd);
            free(rd);
            free(yd);
            free(xi);
        }
    /* rows ld apart: the same values over the first dim elements, zeros written past them */
    int rows = 6, dim = 13, ld = 16;
    float *x = frand(&r, (size_t)rows * ld, -2, 2), *res = frand(&r, (size_t)rows * ld, -2, 2);
    float *y = frand(&r, (size_t)rows * ld, 5, 6), *rstd = fzeros(rows), *dy = frand(&r, (size_t)rows * ld, -1, 1);
    float *dx = frand(&r, (size_t)rows * ld, 5, 6);
    float *xc = fzeros((size_t)rows * dim), *rc = fzeros((size_t)rows * dim), *yc = fzeros((size_t)rows * dim);
    float *dyc = fzeros((size_t)rows * dim), *dxc = fzeros((size_t)rows * dim), *rstdc = fzeros(rows);
    for (int i = 0; i < rows; i++)
        for (int d = 0; d < dim; d++) {
            xc[i * dim + d] = x[i * ld + d], rc[i * dim + d] = res[i * ld + d], dyc[i * dim + d] = dy[i * ld + d];
        }
    be->rmsnorm_fwd(be, y, rstd, x, res, rows, dim, ld, 1e-5f);
    be->rmsnorm_fwd(be, yc, rstdc, xc, rc, rows, dim, dim, 1e-5f);
    be->rmsnorm_bwd(be, dx, dy, y, rstd, rows, dim, ld);
    be->rmsnorm_bwd(be, dxc, dyc, yc, rstdc, rows, dim, dim);
    for (int i = 0; i < rows; i++) {
        ck_assert_float_eq(rstd[i], rstdc[i]);
        for (int d = 0; d < ld; d++) {
            ck_assert_float_eq(y[i * ld + d], d < dim ? yc[i * dim + d] : 0.0f);
            ck_assert_float_eq(dx[i * ld + d], d < dim ? dxc[i * dim + d] : 0.0f);
        }
    }
    float *bufs[] = {x, res, y, rstd, dy, dx, xc, rc, yc, dyc, dxc, rstdc};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    be->destroy(be);
}
END_TEST

static void set_threads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

/* mlp_t's norm over T with its transposes: the same bits as rmsnorm on the (B, D, Tp) rows
 * between transposes, pads of dxT zero, with and without the residual, at 1 and 3 threads */
START_TEST(test_rmsnorm_t) {
    trm_backend *be = mk();
    tr_rng r = {43};
    int dims[][4] = {{3, 97, 128, 104}, {2, 5, 7, 9}, {64, 85, 16, 85}};
    for (int k = 0; k < 3; k++)
        for (int use_res = 0; use_res < 2; use_res++) {
            int B = dims[k][0], T = dims[k][1], D = dims[k][2], Tp = dims[k][3], RT = B * D;
            size_t nt = (size_t)RT * Tp, ny = (size_t)B * T * D;
            float *xT = frand(&r, nt, -2, 2), *res = use_res ? frand(&r, nt, -2, 2) : NULL;
            float *dy = frand(&r, ny, -1, 1), *yT = fzeros(nt), *gT = fzeros(nt), *rc = fzeros(RT);
            float *yc = fzeros(ny), *dxc = fzeros(nt);
            be->rmsnorm_fwd(be, yT, rc, xT, res, RT, T, Tp, 1e-5f);
            be->transpose(be, yc, D, yT, Tp, B, D, T);
            be->transpose(be, gT, Tp, dy, D, B, T, D);
            be->rmsnorm_bwd(be, dxc, gT, yT, rc, RT, T, Tp);
            for (int threads = 1; threads <= 3; threads += 2) {
                set_threads(threads);
                float *y = frand(&r, ny, 5, 6), *rs = frand(&r, RT, 5, 6), *dx = frand(&r, nt, 5, 6);
                be->rmsnorm_t_fwd(be, y, rs, xT, res, B, T, Tp, D, 1e-5f);
                be->rmsnorm_t_bwd(be, dx, dy, y, rs, B, T, Tp, D);
                ck_assert_msg(memcmp(y, yc, ny * sizeof(float)) == 0, "rmsnorm_t y, case %d res %d", k, use_res);
                ck_assert_msg(memcmp(rs, rc, RT * sizeof(float)) == 0, "rmsnorm_t rstd, case %d", k);
                ck_assert_msg(memcmp(dx, dxc, nt * sizeof(float)) == 0, "rmsnorm_t dxT, case %d res %d", k, use_res);
                free(y), free(rs), free(dx);
            }
            set_threads(2);
            float *bufs[] = {xT, res, dy, yT, gT, rc, yc, dxc};
            for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
        }
    be->destroy(be);
}
END_TEST

/* ---- SwiGLU ---------------------------------------------------------------------------------- */

static void ref_swiglu(const double *gu, int rows, int I, double *out) {
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < I; i++) {
            double g = gu[(size_t)r * 2 * I + i], u = gu[(size_t)r * 2 * I + I + i];
            out[(size_t)r * I + i] = g / (1 + exp(-g)) * u;
        }
}

typedef struct {
    int rows, I;
    const double *w;
    double *y;
} swiglu_ctx;

static double swiglu_loss(const double *gu, void *p) {
    swiglu_ctx *c = p;
    ref_swiglu(gu, c->rows, c->I, c->y);
    return dot_wd(c->w, c->y, (size_t)c->rows * c->I);
}

START_TEST(test_swiglu) {
    trm_backend *be = mk();
    tr_rng r = {4};
    int shapes[][2] = {{3, 13}, {1, 1}, {2, 8}, {70, 600}};
    for (int k = 0; k < 4; k++) {
        int rows = shapes[k][0], I = shapes[k][1];
        size_t n = (size_t)rows * I;
        float *gu = frand(&r, 2 * n, -6, 6), *out = fzeros(n);
        double *gd = dcopy(gu, 2 * n), *od = malloc(n * sizeof(double));
        ref_swiglu(gd, rows, I, od);
        be->swiglu_fwd(be, out, gu, rows, I);
        expect_close("swiglu out", out, od, n, 1e-7, 2e-6);
        if (n <= 100) {
            float *w = frand(&r, n, -1, 1), *dgu = fzeros(2 * n);
            double *wd = dcopy(w, n);
            be->swiglu_bwd(be, dgu, NULL, w, gu, rows, I);
            swiglu_ctx c = {rows, I, wd, od};
            expect_grad("swiglu dgu", swiglu_loss, &c, gd, 2 * n, dgu, 1e-4, 1e-5, 1e-4);
            free(w);
            free(wd);
            free(dgu);
        }
        free(gu);
        free(out);
        free(gd);
        free(od);
    }
    /* Extremes of the vectorised exp: silu(−200) = −0, silu(200) = 200, NaN stays NaN. */
    float gu[8] = {-200, 200, -90, NAN, 1, 1, 1, 1}, out[4];
    be->swiglu_fwd(be, out, gu, 1, 4);
    ck_assert(fabsf(out[0]) < 1e-30f);
    ck_assert_float_eq(out[1], 200.0f);
    ck_assert(fabsf(out[2]) < 1e-30f);
    ck_assert(isnan(out[3]));
    be->destroy(be);
}
END_TEST

/* ---- the fused gate/up + SwiGLU passes -------------------------------------------------------- */

static float *fnan(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

static void expect_same(const char *what, const float *got, const float *want, size_t n) {
    if (memcmp(got, want, n * sizeof(float)) == 0) return;
    for (size_t i = 0; i < n; i++)
        if (memcmp(got + i, want + i, sizeof(float)))
            ck_abort_msg("%s[%zu]: got %.9g, want %.9g (not the same bits)", what, i, got[i], want[i]);
}

/* One shape: x (rows × K, rows ldx apart, the pads random: only K columns may be read) and W
 * (2I × K, ldw). gate_up_swiglu (gu kept or not), gate_up_swiglu_bwd (act or not) and
 * down_swiglu_bwd (x as its dy) with 1 and 3 threads must give gemm + swiglu_fwd's and gemm +
 * swiglu_bwd's bits, computed beside them with the test's 2 threads. */
static void gate_up_case(trm_backend *be, tr_rng *r, int rows, int I, int K, int ldx, int ldw) {
    size_t nx = (size_t)rows * ldx, nw = (size_t)2 * I * ldw, na = (size_t)rows * I, ng = 2 * na;
    float *x = frand(r, nx, -1, 1), *w = frand(r, nw, -0.5, 0.5), *dact = frand(r, na, -1, 1);
    float *gref = fnan(ng), *aref = fnan(na), *dref = fnan(ng), *bref = fnan(na);
    /* the down weight (K × I, rows I + 3 apart) for down_swiglu_bwd, whose dy is x: its product
     * dy·Wd and swiglu_bwd after it, composed */
    int ldd = I + 3;
    float *wd = frand(r, (size_t)K * ldd, -0.5, 0.5), *dact2 = fnan(na), *dref2 = fnan(ng), *bref2 = fnan(na);
    set_threads(2);
    be->gemm(be, TR_F32x3, 0, 1, rows, 2 * I, K, 1.0f, x, ldx, 0, w, ldw, 0, 0.0f, gref, 2 * I, 0, 1);
    be->swiglu_fwd(be, aref, gref, rows, I);
    be->swiglu_bwd(be, dref, bref, dact, gref, rows, I);
    expect_same("gemm + swiglu_bwd's act", bref, aref, na);
    be->gemm(be, TR_F32x3, 0, 0, rows, I, K, 1.0f, x, ldx, 0, wd, ldd, 0, 0.0f, dact2, I, 0, 1);
    be->swiglu_bwd(be, dref2, bref2, dact2, gref, rows, I);
    char what[128];
    if (be->use_bf16 && trm_gemm_amx_available()) { /* bf16 products are AMX's: left to gemm, nothing written */
        float *act = fnan(na), *dgu = fnan(ng);
        ck_assert(!be->gate_up_swiglu(be, act, dgu, x, ldx, w, ldw, TRM_F32, rows, I, K));
        ck_assert(!be->gate_up_swiglu_bwd(be, dgu, act, dact, x, ldx, w, ldw, TRM_F32, rows, I, K));
        ck_assert(!be->down_swiglu_bwd(be, dgu, act, x, ldx, wd, ldd, TRM_F32, gref, rows, I, K));
        for (size_t i = 0; i < ng; i++) ck_assert(isnan(dgu[i]) && (i >= na || isnan(act[i])));
        free(act), free(dgu);
        free(x), free(w), free(dact), free(gref), free(aref), free(dref), free(bref);
        free(wd), free(dact2), free(dref2), free(bref2);
        return;
    }
    for (int threads = 1; threads <= 3; threads += 2)
        for (int keep = 0; keep < 2; keep++) {
            float *gu = fnan(ng), *act = fnan(na), *dgu = fnan(ng);
            set_threads(threads);
            snprintf(what, sizeof what, "gate_up_swiglu rows=%d I=%d K=%d ldx=%d ldw=%d threads=%d keep=%d%s", rows,
                     I, K, ldx, ldw, threads, keep, be->use_bf16 ? " bf16" : "");
            ck_assert_msg(be->gate_up_swiglu(be, act, keep ? gu : NULL, x, ldx, w, ldw, TRM_F32, rows, I, K),
                          "%s: declined", what);
            expect_same(what, act, aref, na);
            if (keep) expect_same(what, gu, gref, ng);
            for (size_t i = 0; i < ng; i++) ck_assert(isnan(gu[i]) || keep);
            /* the backward: act again where asked for (keep), dgu */
            for (size_t i = 0; i < na; i++) act[i] = NAN;
            snprintf(what, sizeof what, "gate_up_swiglu_bwd rows=%d I=%d K=%d ldx=%d ldw=%d threads=%d act=%d%s",
                     rows, I, K, ldx, ldw, threads, keep, be->use_bf16 ? " bf16" : "");
            ck_assert_msg(be->gate_up_swiglu_bwd(be, dgu, keep ? act : NULL, dact, x, ldx, w, ldw, TRM_F32, rows, I,
                                                 K),
                          "%s: declined", what);
            expect_same(what, dgu, dref, ng);
            if (keep) expect_same(what, act, aref, na);
            /* the down projection's product into the SwiGLU backward */
            for (size_t i = 0; i < ng; i++) dgu[i] = NAN, act[i % na] = NAN;
            snprintf(what, sizeof what, "down_swiglu_bwd rows=%d I=%d K=%d ldy=%d threads=%d%s", rows, I, K, ldx,
                     threads, be->use_bf16 ? " bf16" : "");
            ck_assert_msg(be->down_swiglu_bwd(be, dgu, act, x, ldx, wd, ldd, TRM_F32, gref, rows, I, K),
                          "%s: declined", what);
            expect_same(what, dgu, dref2, ng);
            expect_same(what, act, bref2, na);
            for (size_t i = 0; i < ng; i++) dgu[i] = NAN;
            ck_assert_msg(be->down_swiglu_bwd(be, dgu, NULL, x, ldx, wd, ldd, TRM_F32, gref, rows, I, K),
                          "%s, no act: declined", what);
            expect_same(what, dgu, dref2, ng);
            free(gu), free(act), free(dgu);
        }
    set_threads(2);
    free(x), free(w), free(dact), free(gref), free(aref), free(dref), free(bref);
    free(wd), free(dact2), free(dref2), free(bref2);
}

/* Shapes: rows not a multiple of a block or a kernel tile, odd I and K, one row, strided x and
 * W, K past one packed block (256), mlp_t's K = 85, and 1000 rows of 2·256 × 128 (many blocks,
 * threaded); in fp32 and, where the CPU has AVX512-BF16, with bf16 products (declined where AMX
 * does them: with real tiles, and with TRM_CPU_GEMM=amx-emulate). */
START_TEST(test_gate_up_swiglu) {
    trm_backend *be = mk();
    if (!trm_gemm_cpu_available()) { /* the BLAS does the products: nothing is fused */
        ck_assert_ptr_nonnull(be->gate_up_swiglu);
        ck_assert_ptr_nonnull(be->down_swiglu_bwd);
        float x[4] = {1, 2, 3, 4}, w[8] = {1, 1, 1, 1, 1, 1, 1, 1}, act[2] = {NAN, NAN};
        ck_assert(!be->gate_up_swiglu(be, act, NULL, x, 2, w, 2, TRM_F32, 2, 1, 2));
        be->destroy(be);
        return;
    }
    tr_rng r = {41};
    int cases[][5] = {{100, 37, 29, 29, 29}, {1, 37, 29, 29, 29}, {1000, 256, 128, 128, 128}, {13, 5, 3, 7, 4},
                      {77, 40, 300, 301, 310}, {250, 128, 85, 85, 85}, {3, 1, 1, 1, 1}};
    const char *env = getenv("TRM_CPU_GEMM");
    char *gemm_env = env ? strdup(env) : NULL;
    for (int bf = 0; bf < 3; bf++) { /* fp32, bf16, bf16 with TRM_CPU_GEMM=amx-emulate */
        trm_backend_set_bf16(be, bf > 0);
        if (bf && !be->use_bf16) break; /* no AVX512-BF16 here */
        if (bf == 2) setenv("TRM_CPU_GEMM", "amx-emulate", 1);
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
            gate_up_case(be, &r, cases[k][0], cases[k][1], cases[k][2], cases[k][3], cases[k][4]);
    }
    trm_backend_set_bf16(be, 0);
    /* declined, nothing written: bf16 weights (the cpu backend keeps none), and TRM_CPU_GEMM=blas */
    float *x = frand(&r, 6 * 8, -1, 1), *w = frand(&r, 8 * 8, -1, 1), *act = fnan(6 * 4), *dgu = fnan(6 * 8);
    ck_assert(!be->gate_up_swiglu(be, act, NULL, x, 8, w, 8, TRM_BF16, 6, 4, 8));
    ck_assert(!be->down_swiglu_bwd(be, dgu, act, x, 8, w, 8, TRM_BF16, x, 6, 4, 8));
    setenv("TRM_CPU_GEMM", "blas", 1);
    ck_assert(!be->gate_up_swiglu(be, act, dgu, x, 8, w, 8, TRM_F32, 6, 4, 8));
    ck_assert(!be->gate_up_swiglu_bwd(be, dgu, act, x, x, 8, w, 8, TRM_F32, 6, 4, 8));
    ck_assert(!be->down_swiglu_bwd(be, dgu, act, x, 8, w, 8, TRM_F32, x, 6, 4, 8));
    if (gemm_env)
        setenv("TRM_CPU_GEMM", gemm_env, 1);
    else
        unsetenv("TRM_CPU_GEMM");
    free(gemm_env);
    for (int i = 0; i < 6 * 4; i++) ck_assert(isnan(act[i]));
    for (int i = 0; i < 6 * 8; i++) ck_assert(isnan(dgu[i]));
    free(x), free(w), free(act), free(dgu);
    be->destroy(be);
}
END_TEST

/* ---- RoPE ----------------------------------------------------------------------------------- */

static void rope_tables(int T, int hd, float *cs, float *sn) {
    for (int t = 0; t < T; t++)
        for (int j = 0; j < hd; j++) {
            double inv = pow(10000.0, -2.0 * (j % (hd / 2)) / hd);
            cs[t * hd + j] = (float)cos(t * inv);
            sn[t * hd + j] = (float)sin(t * inv);
        }
}

typedef struct {
    int B, T, H, hd;
    const float *cs, *sn;
    const double *w;
    double *y;
} rope_ctx;

static void ref_rope(const double *x, rope_ctx *c, double *y) {
    int h2 = c->hd / 2;
    size_t n = (size_t)c->B * c->T * 3 * c->H * c->hd;
    memcpy(y, x, n * sizeof(double));
    for (int b = 0; b < c->B; b++)
        for (int t = 0; t < c->T; t++)
            for (int k = 0; k < 2 * c->H; k++) {
                size_t o = (((size_t)b * c->T + t) * 3 * c->H + k) * c->hd;
                for (int j = 0; j < c->hd; j++) {
                    double rot = j < h2 ? -x[o + j + h2] : x[o + j - h2];
                    y[o + j] = x[o + j] * c->cs[t * c->hd + j] + rot * c->sn[t * c->hd + j];
                }
            }
}

static double rope_loss(const double *x, void *p) {
    rope_ctx *c = p;
    ref_rope(x, c, c->y);
    return dot_wd(c->w, c->y, (size_t)c->B * c->T * 3 * c->H * c->hd);
}

START_TEST(test_rope) {
    trm_backend *be = mk();
    tr_rng r = {5};
    int shapes[][4] = {{2, 5, 2, 4}, {1, 1, 1, 2}, {3, 7, 3, 6}, {4, 97, 4, 32}, {2, 3, 2, 4}};
    for (int k = 0; k < 5; k++) {
        int B = shapes[k][0], T = shapes[k][1], H = shapes[k][2], hd = shapes[k][3];
        size_t n = (size_t)B * T * 3 * H * hd;
        float *cs = fzeros((size_t)T * hd), *sn = fzeros((size_t)T * hd);
        rope_tables(T, hd, cs, sn);
        if (k == 4) /* arbitrary tables pin down which table entry each term uses */
            for (int i = 0; i < T * hd; i++) {
                cs[i] = (float)tr_uniform(&r);
                sn[i] = (float)tr_uniform(&r);
            }
        float *x = frand(&r, n, -1, 1), *y = frand(&r, n, -1, 1);
        double *xd = dcopy(x, n), *want = malloc(n * sizeof(double)), *wd = dcopy(y, n);
        rope_ctx c = {B, T, H, hd, cs, sn, wd, malloc(n * sizeof(double))};
        ref_rope(xd, &c, want);
        float *rx = malloc(n * sizeof(float)), *ry = malloc(n * sizeof(float));
        memcpy(rx, x, n * sizeof(float));
        memcpy(ry, y, n * sizeof(float));
        be->rope_fwd(be, rx, cs, sn, B, T, H, hd);
        expect_close("rope", rx, want, n, 1e-7, 1e-6);
        be->rope_bwd(be, ry, cs, sn, B, T, H, hd);
        /* ⟨rope(x), y⟩ = ⟨x, rope_bwd(y)⟩ */
        double lhs = 0, rhs = 0, mag = 0;
        for (size_t i = 0; i < n; i++) {
            lhs += (double)rx[i] * y[i];
            rhs += (double)x[i] * ry[i];
            mag += fabs((double)x[i] * ry[i]);
        }
        ck_assert_msg(fabs(lhs - rhs) <= 1e-6 * mag, "rope adjoint: %.9g vs %.9g", lhs, rhs);
        if (n <= 500) expect_grad("rope_bwd", rope_loss, &c, xd, n, ry, 1e-3, 1e-6, 1e-5);
        free(c.y);
        free(cs);
        free(sn);
        free(x);
        free(y);
        free(xd);
        free(want);
        free(wd);
        free(rx);
        free(ry);
    }
    be->destroy(be);
}
END_TEST

/* ---- attention ------------------------------------------------------------------------------- */

typedef struct {
    int B, T, H, hd;
    const double *w;
    double *out, *lse;
} att_ctx;

static void ref_attention(const double *qkv, att_ctx *c, double *out, double *lse) {
    int B = c->B, T = c->T, H = c->H, hd = c->hd;
    size_t ld = (size_t)3 * H * hd;
    double *s = malloc((size_t)T * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                const double *q = qkv + ((size_t)b * T + i) * ld + (size_t)h * hd;
                double mx = -INFINITY;
                for (int j = 0; j < T; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * ld + (size_t)(H + h) * hd;
                    double d = 0;
                    for (int e = 0; e < hd; e++) d += q[e] * k[e];
                    s[j] = d / sqrt((double)hd);
                    mx = s[j] > mx ? s[j] : mx;
                }
                double sum = 0;
                for (int j = 0; j < T; j++) sum += exp(s[j] - mx);
                double l = mx + log(sum);
                if (lse) lse[((size_t)b * H + h) * T + i] = l;
                double *o = out + ((size_t)b * T + i) * H * hd + (size_t)h * hd;
                for (int e = 0; e < hd; e++) o[e] = 0;
                for (int j = 0; j < T; j++) {
                    const double *v = qkv + ((size_t)b * T + j) * ld + (size_t)(2 * H + h) * hd;
                    double p = exp(s[j] - l);
                    for (int e = 0; e < hd; e++) o[e] += p * v[e];
                }
            }
    free(s);
}

static double att_loss(const double *qkv, void *p) {
    att_ctx *c = p;
    ref_attention(qkv, c, c->out, NULL);
    return dot_wd(c->w, c->out, (size_t)c->B * c->T * c->H * c->hd);
}

static void attention_case(trm_backend *be, tr_rng *r, int B, int T, int H, int hd, int fd) {
    size_t nq = (size_t)B * T * 3 * H * hd, no = (size_t)B * T * H * hd, nl = (size_t)B * H * T;
    float *qkv = frand(r, nq, -1.5, 1.5), *out = fzeros(no), *lse = fzeros(nl);
    double *qd = dcopy(qkv, nq), *od = malloc(no * sizeof(double)), *ld = malloc(nl * sizeof(double));
    att_ctx c = {B, T, H, hd, NULL, malloc(no * sizeof(double)), NULL};
    ref_attention(qd, &c, od, ld);
    be->attention_fwd(be, out, lse, qkv, B, T, H, hd);
    char what[64];
    snprintf(what, sizeof what, "attention B%d T%d H%d hd%d", B, T, H, hd);
    expect_close(what, out, od, no, 2e-6, 1e-5);
    expect_close("attention lse", lse, ld, nl, 2e-6, 2e-6);
    float *w = frand(r, no, -1, 1), *dqkv = frand(r, nq, 5, 6); /* garbage: must be overwritten */
    be->attention_bwd(be, dqkv, w, qkv, out, lse, B, T, H, hd);
    if (fd) {
        double *wd = dcopy(w, no);
        c.w = wd;
        expect_grad(what, att_loss, &c, qd, nq, dqkv, 1e-4, 2e-5, 2e-4);
        free(wd);
    } else {
        /* Large case: dV = Pᵀ dO in double for one (b, h) shows the block accumulation. */
        int b = B - 1, h = H - 1;
        size_t ldq = (size_t)3 * H * hd;
        for (int j = 0; j < T; j += 7)
            for (int e = 0; e < hd; e++) {
                double s = 0;
                for (int i = 0; i < T; i++) {
                    double dot = 0;
                    for (int f = 0; f < hd; f++)
                        dot += qd[((size_t)b * T + i) * ldq + (size_t)h * hd + f] *
                               qd[((size_t)b * T + j) * ldq + (size_t)(H + h) * hd + f];
                    double p = exp(dot / sqrt((double)hd) - ld[((size_t)b * H + h) * T + i]);
                    s += p * w[((size_t)b * T + i) * H * hd + (size_t)h * hd + e];
                }
                float got = dqkv[((size_t)b * T + j) * ldq + (size_t)(2 * H + h) * hd + e];
                ck_assert_msg(fabs(got - s) <= 1e-5 + 1e-4 * fabs(s), "dV[%d][%d]: %g vs %g", j,
                              e, got, s);
            }
    }
    free(c.out);
    free(qkv);
    free(out);
    free(lse);
    free(qd);
    free(od);
    free(ld);
    free(w);
    free(dqkv);
}

/* RoPE inside the attention passes: the forward (each head's q and k rotated in its task, left
 * rotated) and the backward (dq and dk rotated back in the head's task) give the bits of
 * rope_fwd then attention_fwd, and of attention_bwd then rope_bwd; where a head's queries
 * span blocks (T past 128) the forward declines and writes nothing. 1 and 3 threads. */
START_TEST(test_attention_rope_fused) {
    trm_backend *be = mk();
    tr_rng r = {53};
    int dims[][3] = {{3, 85, 2}, {2, 130, 1}, {1, 7, 3}};
    for (int k = 0; k < 3; k++) {
        int B = dims[k][0], T = dims[k][1], H = dims[k][2], hd = 64;
        size_t nq = (size_t)B * T * 3 * H * hd, no = (size_t)B * T * H * hd, nl = (size_t)B * H * T;
        float *qkv = frand(&r, nq, -1, 1), *dout = frand(&r, no, -1, 1);
        float *cs = malloc((size_t)T * hd * sizeof(float)), *sn = malloc((size_t)T * hd * sizeof(float));
        rope_tables(T, hd, cs, sn);
        float *q0 = malloc(nq * sizeof(float)), *o0 = fzeros(no), *l0 = fzeros(nl), *d0 = fzeros(nq);
        memcpy(q0, qkv, nq * sizeof(float));
        be->rope_fwd(be, q0, cs, sn, B, T, H, hd);
        be->attention_fwd(be, o0, l0, q0, B, T, H, hd);
        be->attention_bwd(be, d0, dout, q0, o0, l0, B, T, H, hd);
        be->rope_bwd(be, d0, cs, sn, B, T, H, hd);
        for (int threads = 1; threads <= 3; threads += 2) {
            set_threads(threads);
            float *q1 = malloc(nq * sizeof(float)), *o1 = frand(&r, no, 5, 6), *l1 = frand(&r, nl, 5, 6);
            float *d1 = frand(&r, nq, 5, 6), *o1c = malloc(no * sizeof(float));
            memcpy(q1, qkv, nq * sizeof(float));
            memcpy(o1c, o1, no * sizeof(float));
            int done = be->attention_fwd_rope(be, o1, l1, q1, cs, sn, B, T, H, hd, 1);
            ck_assert_int_eq(done, T <= 128);
            if (done) {
                ck_assert_msg(memcmp(q1, q0, nq * sizeof(float)) == 0, "fused RoPE forward: q, k, T %d", T);
                ck_assert_msg(memcmp(o1, o0, no * sizeof(float)) == 0, "fused RoPE forward: out, T %d", T);
                ck_assert_msg(memcmp(l1, l0, nl * sizeof(float)) == 0, "fused RoPE forward: lse, T %d", T);
            } else {
                ck_assert_msg(memcmp(q1, qkv, nq * sizeof(float)) == 0, "declined, but qkv written");
                ck_assert_msg(memcmp(o1, o1c, no * sizeof(float)) == 0, "declined, but out written");
            }
            be->attention_bwd_rope(be, d1, dout, q0, o0, l0, cs, sn, B, T, H, hd);
            ck_assert_msg(memcmp(d1, d0, nq * sizeof(float)) == 0, "fused RoPE backward, T %d, %d threads", T, threads);
            free(q1), free(o1), free(l1), free(d1), free(o1c);
        }
        set_threads(2);
        free(qkv), free(dout), free(cs), free(sn), free(q0), free(o0), free(l0), free(d0);
    }
    be->destroy(be);
}
END_TEST

START_TEST(test_attention) {
    trm_backend *be = mk();
    tr_rng r = {6};
    attention_case(be, &r, 2, 5, 2, 4, 1);  /* B·H ≥ threads: parallel over heads */
    attention_case(be, &r, 1, 1, 1, 2, 1);  /* T = 1 */
    attention_case(be, &r, 1, 3, 1, 3, 1);  /* one head: serial loop, threaded BLAS */
    attention_case(be, &r, 1, 70, 1, 2, 1); /* one block of 70 query rows */
    attention_case(be, &r, 2, 130, 3, 16, 0); /* crosses the 128-row query block */
    attention_case(be, &r, 1, 300, 1, 8, 0);  /* three blocks, the last partial */
    attention_case(be, &r, 3, 85, 2, 64, 0);  /* the tiny shapes: heads of whole vectors */
    attention_case(be, &r, 1, 270, 2, 32, 0); /* P·V's K past one block of 256 */
    be->destroy(be);
}
END_TEST

/* ---- bias ------------------------------------------------------------------------------------ */

START_TEST(test_bias) {
    trm_backend *be = mk();
    tr_rng r = {7};
    int shapes[][3] = {{4, 3, 5}, {1, 1, 1}, {9, 70, 70}, {300, 130, 131}};
    for (int k = 0; k < 4; k++) {
        int rows = shapes[k][0], cols = shapes[k][1], ld = shapes[k][2];
        size_t n = (size_t)rows * ld;
        float *y = frand(&r, n, -1, 1), *bias = frand(&r, cols, -1, 1), *y0 = malloc(n * sizeof(float));
        memcpy(y0, y, n * sizeof(float));
        be->bias_fwd(be, y, bias, rows, cols, ld);
        for (int i = 0; i < rows; i++)
            for (int c = 0; c < ld; c++) {
                float want = c < cols ? y0[(size_t)i * ld + c] + bias[c] : y0[(size_t)i * ld + c];
                ck_assert_float_eq(y[(size_t)i * ld + c], want);
            }
        /* L = Σ w·(y + bias): dL/dbias[c] = Σ_r w[r][c], accumulated onto what is there. */
        float *db = frand(&r, cols, -1, 1);
        double *want = malloc((size_t)cols * sizeof(double));
        for (int c = 0; c < cols; c++) {
            want[c] = db[c];
            for (int i = 0; i < rows; i++) want[c] += y0[(size_t)i * ld + c];
        }
        be->bias_bwd(be, db, y0, rows, cols, ld);
        expect_close("bias_bwd", db, want, (size_t)cols, 1e-5, 1e-6);
        free(y);
        free(bias);
        free(y0);
        free(db);
        free(want);
    }
    be->destroy(be);
}
END_TEST

/* ---- embeddings --------------------------------------------------------------------------------- */

typedef struct {
    trm_embed_args a;
    int V, nid;
    double *tok, *puz, *pos; /* double copies of the weights, perturbed by the FD */
    const double *w;
    double *out;
    int which; /* 0 tok, 1 pos, 2 puz */
} emb_ctx;

static void ref_embed(const emb_ctx *c, double *out) {
    const trm_embed_args *a = &c->a;
    int T = a->P + a->S, D = a->D;
    for (int b = 0; b < a->B; b++)
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++) {
                double v;
                if (t < a->P) {
                    int k = t * D + d;
                    v = a->ndim > 0 && k < a->ndim ? c->puz[(size_t)a->puzzle_ids[b] * a->ndim + k] : 0;
                } else {
                    v = c->tok[(size_t)a->tokens[b * a->S + t - a->P] * D + d];
                }
                if (a->pos_w) v = 0.707106781 * (v + c->pos[(size_t)t * D + d]);
                out[((size_t)b * T + t) * D + d] = v * a->scale;
            }
}

static double emb_loss(const double *x, void *p) {
    emb_ctx *c = p;
    (void)x; /* x is one of c's weight arrays, perturbed in place */
    ref_embed(c, c->out);
    return dot_wd(c->w, c->out, (size_t)c->a.B * (c->a.P + c->a.S) * c->a.D);
}

static void embed_case(trm_backend *be, tr_rng *r, int B, int S, int P, int D, int ndim,
                       int learned_pos) {
    int V = 6, nid = 4, T = P + S;
    int32_t tokens[64], pids[8];
    for (int i = 0; i < B * S; i++) tokens[i] = (int32_t)(tr_uniform(r) * V);
    tokens[0] = tokens[B * S - 1] = 2; /* a repeated token */
    for (int b = 0; b < B; b++) pids[b] = (b * 3) % nid;
    pids[B - 1] = pids[0]; /* a repeated puzzle id */
    float *tok = frand(r, (size_t)V * D, -1, 1), *puz = frand(r, (size_t)nid * (ndim ? ndim : 1), -1, 1);
    float *pos = learned_pos ? frand(r, (size_t)T * D, -1, 1) : NULL;
    emb_ctx c = {{B, S, P, D, tokens, tok, ndim ? pids : NULL, puz, ndim, pos, sqrtf((float)D), V},
                 V, nid, dcopy(tok, (size_t)V * D), dcopy(puz, (size_t)nid * (ndim ? ndim : 1)),
                 pos ? dcopy(pos, (size_t)T * D) : NULL, NULL, NULL, 0};
    size_t no = (size_t)B * T * D;
    float *out = frand(r, no, 5, 6);
    double *want = malloc(no * sizeof(double));
    ref_embed(&c, want);
    be->embed_fwd(be, out, &c.a);
    expect_close("embed_fwd", out, want, no, 1e-6, 1e-6);
    if (ndim > 0 && ndim < P * D) /* zero padding after the puzzle row */
        for (int b = 0; b < B; b++)
            for (int k = ndim; k < P * D; k++)
                if (!pos) ck_assert_float_eq(out[(size_t)b * T * D + k], 0.0f);

    float *w = frand(r, no, -1, 1);
    double *wd = dcopy(w, no);
    float *dtok = fzeros((size_t)V * D), *dpos = fzeros((size_t)T * D);
    float *drows = frand(r, (size_t)B * (ndim ? ndim : 1), 7, 8);
    for (int i = 0; i < V * D; i++) dtok[i] = 1.0f; /* accumulated, not overwritten */
    be->embed_bwd(be, w, &c.a, dtok, pos ? dpos : NULL, ndim ? drows : NULL);
    for (int i = 0; i < V * D; i++) dtok[i] -= 1.0f;
    c.w = wd;
    c.out = malloc(no * sizeof(double));
    expect_grad("embed d_tok_w", emb_loss, &c, c.tok, (size_t)V * D, dtok, 1e-3, 1e-5, 1e-5);
    if (pos) expect_grad("embed d_pos_w", emb_loss, &c, c.pos, (size_t)T * D, dpos, 1e-3, 1e-5, 1e-5);
    if (ndim) {
        /* The per-sample rows, summed per id, are the gradient of the table. */
        float *dpuz = fzeros((size_t)nid * ndim);
        for (int b = 0; b < B; b++)
            for (int k = 0; k < ndim; k++) dpuz[(size_t)pids[b] * ndim + k] += drows[(size_t)b * ndim + k];
        expect_grad("embed d_puz", emb_loss, &c, c.puz, (size_t)nid * ndim, dpuz, 1e-3, 1e-5, 1e-5);
        free(dpuz);
    }
    free(c.out);
    free(c.tok);
    free(c.puz);
    free(c.pos);
    free(tok);
    free(puz);
    free(pos);
    free(out);
    free(want);
    free(w);
    free(wd);
    free(dtok);
    free(dpos);
    free(drows);
}

START_TEST(test_embed) {
    trm_backend *be = mk();
    tr_rng r = {8};
    embed_case(be, &r, 3, 3, 2, 4, 5, 0);  /* puzzle row padded from 5 to P·D = 8 */
    embed_case(be, &r, 3, 3, 2, 4, 5, 1);  /* ... with learned positions */
    embed_case(be, &r, 2, 4, 0, 3, 0, 0);  /* no puzzle embedding */
    embed_case(be, &r, 2, 4, 2, 3, 0, 1);  /* puzzle_emb_len without ndim: zero rows */
    embed_case(be, &r, 2, 2, 1, 8, 8, 1);  /* ndim = D exactly */
    embed_case(be, &r, 1, 1, 1, 5, 3, 0);  /* B = 1, S = 1 */
    be->destroy(be);
}
END_TEST

/* Many rows with repeated tokens: the column-split token gradient (threads) equals the sums. */
START_TEST(test_embed_bwd_large) {
    trm_backend *be = mk();
    tr_rng r = {9};
    int B = 16, S = 64, P = 2, D = 64, V = 5;
    int T = P + S;
    int32_t *tok = malloc((size_t)B * S * sizeof(int32_t));
    for (int i = 0; i < B * S; i++) tok[i] = (int32_t)(tr_uniform(&r) * V);
    float *tw = frand(&r, (size_t)V * D, -1, 1), *dout = frand(&r, (size_t)B * T * D, -1, 1);
    float *dtok = fzeros((size_t)V * D);
    trm_embed_args a = {B, S, P, D, tok, tw, NULL, NULL, 0, NULL, 8.0f, V};
    be->embed_bwd(be, dout, &a, dtok, NULL, NULL);
    double *want = calloc((size_t)V * D, sizeof(double));
    for (int b = 0; b < B; b++)
        for (int s = 0; s < S; s++)
            for (int d = 0; d < D; d++)
                want[(size_t)tok[b * S + s] * D + d] += 8.0 * dout[((size_t)b * T + P + s) * D + d];
    expect_close("embed d_tok_w (large)", dtok, want, (size_t)V * D, 1e-4, 1e-5);
    free(tok);
    free(tw);
    free(dout);
    free(dtok);
    free(want);
    be->destroy(be);
}
END_TEST

/* ---- loss head ---------------------------------------------------------------------------------- */

static double ref_stablemax_ce(const double *x, int V, int l) {
    double sum = 0, sl = 0;
    for (int j = 0; j < V; j++) {
        double s = x[j] < 0 ? 1 / (1 - x[j] + 1e-30) : x[j] + 1;
        sum += s;
        if (j == l) sl = s;
    }
    return -log(sl / sum);
}

static double ref_softmax_ce(const double *x, int V, int l) {
    double mx = x[0], sum = 0;
    for (int j = 1; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    for (int j = 0; j < V; j++) sum += exp(x[j] - mx);
    return mx + log(sum) - x[l];
}

/* Independent of the backend's formula: −[t·log σ(x) + (1 − t)·log(1 − σ(x))]. */
static double ref_bce(double x, double t) {
    double s = 1 / (1 + exp(-x));
    return -(t * log(s) + (1 - t) * log(1 - s));
}

typedef struct {
    int B, S, V, type;
    const int32_t *labels;
    double gs;
} loss_ctx;

/* grad_scale · Σ_b Σ_s mask·CE/div, the part of the loss that reaches the logits. */
static double lm_loss_ref(const double *x, void *p) {
    loss_ctx *c = p;
    double total = 0;
    for (int b = 0; b < c->B; b++) {
        int n = 0;
        for (int s = 0; s < c->S; s++) n += c->labels[b * c->S + s] != -100;
        int div = n > 1 ? n : 1;
        for (int s = 0; s < c->S; s++) {
            int l = c->labels[b * c->S + s];
            if (l == -100) continue;
            const double *row = x + ((size_t)b * c->S + s) * c->V;
            total += (c->type ? ref_softmax_ce(row, c->V, l) : ref_stablemax_ce(row, c->V, l)) / div;
        }
    }
    return c->gs * total;
}

START_TEST(test_loss_stablemax_hand) {
    trm_backend *be = mk();
    float logits[3] = {0, 1, -1}, dl[3], q[2] = {0, 0}, dq[2];
    int32_t labels[1] = {1}, steps[1] = {1}, preds[1] = {-1};
    uint8_t halted[1] = {1};
    double m[TRM_NMETRICS] = {0};
    trm_loss_args a = {1, 1, 3, 0, TRM_LOSS_STABLEMAX, logits, labels, q, NULL, halted, steps,
                       1.0f, dl, dq, preds, m};
    be->loss_head(be, &a);
    /* s = [1, 2, 0.5], Σs = 3.5: CE = −log(2/3.5); s' = [1, 1, 0.25]. */
    ck_assert_double_eq_tol(m[TRM_M_LM_LOSS], -log(2.0 / 3.5), 1e-12);
    ck_assert_float_eq_tol(dl[0], (float)(1 / 3.5), 1e-7);
    ck_assert_float_eq_tol(dl[1], (float)(1 / 3.5 - 0.5), 1e-7);
    ck_assert_float_eq_tol(dl[2], (float)(0.25 / 3.5), 1e-7);
    ck_assert_int_eq(preds[0], 1);
    ck_assert_double_eq(m[TRM_M_COUNT], 1);
    ck_assert_double_eq(m[TRM_M_EXACT_ACCURACY], 1);
    be->destroy(be);
}
END_TEST

START_TEST(test_loss_softmax_hand) {
    trm_backend *be = mk();
    float logits[6] = {1, 2, 3, 0.5f, 0.5f, -1}, dl[6], q[2] = {0, 0};
    int32_t labels[2] = {0, 0}, steps[1] = {1};
    uint8_t halted[1] = {1};
    double m[TRM_NMETRICS] = {0};
    trm_loss_args a = {1, 2, 3, 0, TRM_LOSS_SOFTMAX, logits, labels, q, NULL, halted, steps,
                       0.5f, dl, NULL, NULL, m};
    be->loss_head(be, &a);
    double lse1 = log(exp(1.0) + exp(2.0) + exp(3.0)), lse2 = log(2 * exp(0.5) + exp(-1.0));
    double ce1 = lse1 - 1, ce2 = lse2 - 0.5;
    ck_assert_double_eq_tol(m[TRM_M_LM_LOSS], (ce1 + ce2) / 2, 1e-6);
    /* softmax − onehot, times grad_scale/div = 0.5/2 */
    ck_assert_float_eq_tol(dl[0], (float)(0.25 * (exp(1 - lse1) - 1)), 1e-7);
    ck_assert_float_eq_tol(dl[2], (float)(0.25 * exp(3 - lse1)), 1e-7);
    ck_assert_float_eq_tol(dl[3], (float)(0.25 * (exp(0.5 - lse2) - 1)), 1e-7);
    ck_assert_float_eq_tol(dl[5], (float)(0.25 * exp(-1 - lse2)), 1e-7);
    ck_assert_double_eq(m[TRM_M_ACCURACY], 0.5); /* row 1: argmax 2 ≠ 0; row 2: tie → 0 */
    be->destroy(be);
}
END_TEST

static void loss_fd_case(trm_backend *be, int type) {
    tr_rng r = {10 + (uint64_t)type};
    int B = 3, S = 4, V = 5;
    size_t n = (size_t)B * S * V;
    float *logits = frand(&r, n, -3, 3), *dl = fzeros(n);
    for (size_t i = 0; i < n; i++) /* keep away from stablemax's seam at 0 */
        if (fabsf(logits[i]) < 0.05f) logits[i] = 0.3f;
    int32_t labels[12] = {1, 4, -100, 0, -100, -100, -100, -100, 2, 3, 3, -100};
    float q[6] = {0.3f, -0.2f, -1.0f, 2.0f, 4.0f, 0.0f}, qt[3] = {0.2f, 0.9f, 0.5f}, dq[6];
    int32_t steps[3] = {1, 2, 3};
    uint8_t halted[3] = {1, 1, 0};
    double m[TRM_NMETRICS] = {0};
    trm_loss_args a = {B, S, V, 0, type, logits, labels, q, qt, halted, steps, 0.125f, dl, dq,
                       NULL, m};
    be->loss_head(be, &a);
    double *xd = dcopy(logits, n);
    loss_ctx c = {B, S, V, type, labels, 0.125};
    ck_assert_double_eq_tol(m[TRM_M_LM_LOSS], lm_loss_ref(xd, &c) / 0.125, 1e-5);
    expect_grad(type ? "softmax dlogits" : "stablemax dlogits", lm_loss_ref, &c, xd, n, dl, 1e-4,
                1e-7, 1e-4);
    for (int s = 0; s < S; s++) /* sample 1 has every label ignored: no gradient */
        for (int j = 0; j < V; j++) ck_assert_float_eq(dl[((size_t)S + s) * V + j], 0.0f);
    /* q: d/dx of 0.5·grad_scale·BCE, by central differences of the reference BCE. */
    for (int b = 0; b < B; b++) {
        int ok = 1;
        for (int s = 0; s < S; s++) {
            int l = labels[b * S + s];
            if (l == -100) continue;
            const float *row = logits + ((size_t)b * S + s) * V;
            int best = 0;
            for (int j = 1; j < V; j++) best = row[j] > row[best] ? j : best;
            ok &= best == l;
        }
        double h = 1e-5, x = q[b * 2];
        double fd = 0.0625 * (ref_bce(x + h, ok) - ref_bce(x - h, ok)) / (2 * h);
        ck_assert_msg(fabs(dq[b * 2] - fd) < 1e-6, "dq_halt[%d] %g vs %g", b, dq[b * 2], fd);
        x = q[b * 2 + 1];
        fd = 0.0625 * (ref_bce(x + h, qt[b]) - ref_bce(x - h, qt[b])) / (2 * h);
        ck_assert_msg(fabs(dq[b * 2 + 1] - fd) < 1e-6, "dq_cont[%d] %g vs %g", b, dq[b * 2 + 1],
                      fd);
    }
    free(logits);
    free(dl);
    free(xd);
}

START_TEST(test_loss_fd_stablemax) {
    trm_backend *be = mk();
    loss_fd_case(be, TRM_LOSS_STABLEMAX);
    be->destroy(be);
}
END_TEST

START_TEST(test_loss_fd_softmax) {
    trm_backend *be = mk();
    loss_fd_case(be, TRM_LOSS_SOFTMAX);
    be->destroy(be);
}
END_TEST

/* Four samples: all correct; one mistake; not halted; every label ignored. */
START_TEST(test_loss_metrics) {
    trm_backend *be = mk();
    enum { B = 4, S = 3, V = 3 };
    int32_t labels[B * S] = {0, 1, 2, 0, 1, 2, 2, 2, -100, -100, -100, -100};
    int32_t pred_of[B * S] = {0, 1, 2, 0, 1, 0, 2, 2, 0, 1, 2, 0};
    float logits[B * S * V];
    for (int r = 0; r < B * S; r++)
        for (int j = 0; j < V; j++)
            logits[r * V + j] = j == pred_of[r] ? 1.5f + 0.1f * r : -0.5f - 0.2f * j;
    logits[8 * V + 1] = logits[8 * V + 0]; /* a tie in an ignored slot: first max wins */
    float q[B * 2] = {1.0f, -1.0f, 0.5f, 0.2f, -2.0f, 0.0f, -0.5f, 0.3f};
    float qt[B] = {0.3f, 0.6f, 0.9f, 0.1f};
    uint8_t halted[B] = {1, 1, 0, 1};
    int32_t steps[B] = {2, 3, 1, 4}, preds[B * S];
    float dl[B * S * V], dq[B * 2];
    double m[TRM_NMETRICS] = {0};
    trm_loss_args a = {B, S, V, 0, TRM_LOSS_STABLEMAX, logits, labels, q, qt, halted, steps,
                       0.25f, dl, dq, preds, m};
    be->loss_head(be, &a);
    for (int r = 0; r < B * S; r++) ck_assert_int_eq(preds[r], pred_of[r]);
    ck_assert_double_eq(m[TRM_M_COUNT], 2);
    ck_assert_double_eq_tol(m[TRM_M_ACCURACY], 1 + 2.0 / 3, 1e-12);
    ck_assert_double_eq(m[TRM_M_EXACT_ACCURACY], 1);
    ck_assert_double_eq(m[TRM_M_Q_HALT_ACCURACY], 1); /* sample 1: q ≥ 0 but wrong */
    ck_assert_double_eq(m[TRM_M_STEPS], 5);
    double lm = 0;
    for (int b = 0; b < B; b++) {
        int n = 0;
        for (int s = 0; s < S; s++) n += labels[b * S + s] != -100;
        for (int s = 0; s < S; s++) {
            int l = labels[b * S + s];
            if (l == -100) continue;
            double row[V];
            for (int j = 0; j < V; j++) row[j] = logits[(b * S + s) * V + j];
            lm += ref_stablemax_ce(row, V, l) / n;
        }
    }
    ck_assert_double_eq_tol(m[TRM_M_LM_LOSS], lm, 1e-12); /* all samples, halted or not */
    int ok[B] = {1, 0, 1, 1};                             /* n = 0 counts as all correct */
    double qh = 0, qc = 0;
    for (int b = 0; b < B; b++) {
        qh += ref_bce(q[b * 2], ok[b]);
        qc += ref_bce(q[b * 2 + 1], qt[b]);
        ck_assert_float_eq_tol(dq[b * 2], (float)(0.25 * 0.5 * (1 / (1 + exp(-q[b * 2])) - ok[b])),
                               1e-8);
    }
    ck_assert_double_eq_tol(m[TRM_M_Q_HALT_LOSS], qh, 1e-6);
    ck_assert_double_eq_tol(m[TRM_M_Q_CONTINUE_LOSS], qc, 1e-6);
    /* Metrics accumulate; without gradients and q_target the rest still works. */
    double m1[TRM_NMETRICS];
    memcpy(m1, m, sizeof m1);
    a.dlogits = NULL;
    a.dq = NULL;
    a.preds = NULL;
    a.q_target = NULL;
    be->loss_head(be, &a);
    for (int k = 0; k < TRM_NMETRICS; k++)
        if (k != TRM_M_Q_CONTINUE_LOSS) ck_assert_double_eq_tol(m[k], 2 * m1[k], 1e-9);
    ck_assert_double_eq(m[TRM_M_Q_CONTINUE_LOSS], m1[TRM_M_Q_CONTINUE_LOSS]);
    /* q_target NULL: dq continue is zero. */
    a.dq = dq;
    dq[1] = 7;
    be->loss_head(be, &a);
    ck_assert_float_eq(dq[1], 0.0f);
    /* A label outside the vocabulary is ignored rather than read out of bounds. */
    labels[0] = 7;
    memset(m, 0, sizeof m);
    a.dlogits = dl;
    be->loss_head(be, &a);
    for (int j = 0; j < V; j++) ck_assert_float_eq(dl[j], 0.0f);
    be->destroy(be);
}
END_TEST

/* With P puzzle rows in front of each sample: same losses as without, those rows' gradient
 * zeroed, preds indexed by label position. */
START_TEST(test_loss_puzzle_rows) {
    trm_backend *be = mk();
    tr_rng r = {12};
    enum { B = 2, S = 3, V = 4, P = 2 };
    int32_t labels[B * S] = {1, -100, 3, 0, 2, 2};
    float *x = frand(&r, B * S * V, -2, 2), *xp = frand(&r, B * (P + S) * V, -2, 2);
    for (int b = 0; b < B; b++)
        memcpy(xp + ((size_t)b * (P + S) + P) * V, x + (size_t)b * S * V, S * V * sizeof(float));
    float q[B * 2] = {0.1f, 0.2f, -0.3f, 0.4f}, dq[B * 2], dq2[B * 2];
    float *dl = fzeros(B * S * V), *dlp = frand(&r, B * (P + S) * V, 3, 4);
    int32_t steps[B] = {1, 1}, pr[B * S], prp[B * S];
    uint8_t halted[B] = {1, 1};
    double m[TRM_NMETRICS] = {0}, mp[TRM_NMETRICS] = {0};
    trm_loss_args a = {B, S, V, 0, TRM_LOSS_STABLEMAX, x, labels, q, NULL, halted, steps,
                       0.5f, dl, dq, pr, m};
    be->loss_head(be, &a);
    trm_loss_args ap = {B, S, V, P, TRM_LOSS_STABLEMAX, xp, labels, q, NULL, halted, steps,
                        0.5f, dlp, dq2, prp, mp};
    be->loss_head(be, &ap);
    for (int k = 0; k < TRM_NMETRICS; k++) ck_assert_double_eq(m[k], mp[k]);
    for (int i = 0; i < B * S; i++) ck_assert_int_eq(pr[i], prp[i]);
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < P * V; i++) ck_assert_float_eq(dlp[(size_t)b * (P + S) * V + i], 0.0f);
        for (int i = 0; i < S * V; i++)
            ck_assert_float_eq(dlp[((size_t)b * (P + S) + P) * V + i], dl[(size_t)b * S * V + i]);
    }
    free(x);
    free(xp);
    free(dl);
    free(dlp);
    be->destroy(be);
}
END_TEST

/* ---- ACT ----------------------------------------------------------------------------------------- */

START_TEST(test_act_reset) {
    trm_backend *be = mk();
    enum { B = 3, T = 2, D = 3, S = 2 };
    uint8_t halted[B] = {1, 0, 1};
    float zH[B * T * D], zL[B * T * D], Hi[D] = {1, 2, 3}, Li[D] = {-1, -2, -3};
    for (int i = 0; i < B * T * D; i++) zH[i] = zL[i] = 100.0f + i;
    int32_t steps[B] = {5, 6, 7}, ci[B * S] = {9, 9, 9, 9, 9, 9}, cl[B * S] = {8, 8, 8, 8, 8, 8};
    int32_t cp[B] = {4, 4, 4}, ni[B * S] = {1, 2, 3, 4, 5, 6}, nl[B * S] = {11, 12, 13, 14, 15, 16};
    int32_t np[B] = {21, 22, 23};
    be->act_reset(be, B, T, D, S, halted, zH, zL, Hi, Li, steps, ci, cl, cp, ni, nl, np);
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++) {
                int i = (b * T + t) * D + d;
                ck_assert_float_eq(zH[i], halted[b] ? Hi[d] : 100.0f + i);
                ck_assert_float_eq(zL[i], halted[b] ? Li[d] : 100.0f + i);
            }
        ck_assert_int_eq(steps[b], halted[b] ? 0 : 6);
        ck_assert_int_eq(cp[b], halted[b] ? np[b] : 4);
        for (int s = 0; s < S; s++) {
            ck_assert_int_eq(ci[b * S + s], halted[b] ? ni[b * S + s] : 9);
            ck_assert_int_eq(cl[b * S + s], halted[b] ? nl[b * S + s] : 8);
        }
    }
    be->destroy(be);
}
END_TEST

START_TEST(test_act_update) {
    trm_backend *be = mk();
    enum { B = 4 };
    float q[B * 2] = {1.0f, 0.0f, -1.0f, -2.0f, 0.5f, 2.0f, -0.5f, 3.0f};
    uint8_t h[B];
    const uint64_t one = 1;
    /* Evaluation: only the step limit halts. */
    int32_t st[B] = {0, 1, 2, 3};
    be->act_update(be, B, st, h, q, 4, 0, 1, 0.0f, 1, 0, &one);
    for (int b = 0; b < B; b++) {
        ck_assert_int_eq(st[b], b + 1);
        ck_assert_int_eq(h[b], b + 1 >= 4);
    }
    /* Training, no exploration, no_ACT_continue: q_halt > 0 or last. */
    int32_t st2[B] = {0, 1, 2, 3};
    be->act_update(be, B, st2, h, q, 4, 1, 1, 0.0f, 1, 0, &one);
    ck_assert_int_eq(h[0], 1);
    ck_assert_int_eq(h[1], 0);
    ck_assert_int_eq(h[2], 1);
    ck_assert_int_eq(h[3], 1); /* last step, q_halt < 0 */
    /* With ACT continue: q_halt > q_continue. */
    int32_t st3[B] = {0, 1, 0, 0};
    be->act_update(be, B, st3, h, q, 4, 1, 0, 0.0f, 1, 0, &one);
    ck_assert_int_eq(h[0], 1);
    ck_assert_int_eq(h[1], 1); /* −1 > −2 */
    ck_assert_int_eq(h[2], 0); /* 0.5 < 2 */
    ck_assert_int_eq(h[3], 0);
    /* Exploration always on: min_halt ∈ [2, max] from Philox(seed, step, sample). */
    enum { NB = 64, MAX = 5 };
    float qpos[NB * 2];
    int32_t st4[NB];
    uint8_t h4[NB];
    for (int b = 0; b < NB; b++) {
        qpos[b * 2] = 1.0f;
        qpos[b * 2 + 1] = 0.0f;
        st4[b] = b % MAX;
    }
    uint64_t seed = 1234, step = 77, step1 = 78;
    be->act_update(be, NB, st4, h4, qpos, MAX, 1, 1, 1.0f, seed, 0, &step);
    int seen[MAX + 2] = {0};
    for (int b = 0; b < NB; b++) {
        uint32_t rr[4];
        trm_philox4x32(seed, step, (uint64_t)b, rr);
        ck_assert_float_lt((float)(rr[0] >> 8) * 0x1.0p-24f, 1.0f);
        int min_halt = 2 + (int)(rr[1] % (MAX - 1));
        seen[min_halt]++;
        ck_assert_int_eq(h4[b], st4[b] >= min_halt);
        if (st4[b] == 1) ck_assert_int_eq(h4[b], 0);   /* below any min_halt */
        if (st4[b] == MAX) ck_assert_int_eq(h4[b], 1); /* the last step always reaches it */
    }
    ck_assert_int_gt(seen[2], 0);
    ck_assert_int_gt(seen[MAX], 0);
    /* A different rng_step draws differently for some sample. */
    int32_t st6[NB];
    uint8_t h6[NB];
    for (int b = 0; b < NB; b++) st6[b] = b % MAX;
    be->act_update(be, NB, st6, h6, qpos, MAX, 1, 1, 1.0f, seed, 0, &step1);
    ck_assert(memcmp(h4, h6, NB) != 0);
    /* A rank holding rows [NB/2, NB) of the global batch (sample0 = NB/2) halts them exactly as
     * one process stepping all NB rows does. */
    int32_t st7[NB / 2];
    uint8_t h7[NB / 2];
    for (int b = 0; b < NB / 2; b++) st7[b] = (b + NB / 2) % MAX;
    be->act_update(be, NB / 2, st7, h7, qpos + NB, MAX, 1, 1, 1.0f, seed, NB / 2, &step);
    ck_assert_mem_eq(h7, h4 + NB / 2, NB / 2);
    be->act_update(be, NB / 2, st7, h7, qpos + NB, MAX, 1, 1, 1.0f, seed, 0, &step); /* wrong offset */
    ck_assert(memcmp(h7, h4 + NB / 2, NB / 2) != 0);
    /* max = 1 in training: every sample halts after one step, q unused. */
    int32_t st5[B] = {0, 0, 0, 0};
    be->act_update(be, B, st5, h, NULL, 1, 1, 1, 1.0f, seed, 0, &step);
    for (int b = 0; b < B; b++) ck_assert_int_eq(h[b], 1);
    be->destroy(be);
}
END_TEST

START_TEST(test_q_target) {
    trm_backend *be = mk();
    enum { B = 4 };
    float qn[B * 2] = {0.5f, 2.0f, 0.5f, 2.0f, -1.0f, -3.0f, 3.0f, 1.0f}, t[B];
    int32_t steps[B] = {1, 4, 2, 5};
    be->q_target(be, B, t, qn, steps, 4);
    double x[B] = {2.0, 0.5, -1.0, 3.0}; /* max unless last, then q_halt' */
    for (int b = 0; b < B; b++) ck_assert_float_eq_tol(t[b], (float)(1 / (1 + exp(-x[b]))), 1e-7);
    be->destroy(be);
}
END_TEST

/* ---- optimisers ---------------------------------------------------------------------------------- */

static void adam_case(trm_backend *be, size_t n) {
    tr_rng r = {20 + n};
    float *p = frand(&r, n, -1, 1), *m = fzeros(n), *v = fzeros(n);
    double *pd = dcopy(p, n), *md = calloc(n, sizeof(double)), *vd = calloc(n, sizeof(double));
    float lr = 1e-2f, wd = 0.1f, b1 = 0.9f, b2 = 0.95f;
    for (int t = 1; t <= 3; t++) {
        float *g = frand(&r, n, -1, 1);
        g[0] = 0.0f;
        be->adam_atan2(be, p, g, m, v, n, lr, wd, b1, b2, t);
        for (size_t i = 0; i < n; i++) {
            pd[i] *= 1 - (double)lr * wd;
            md[i] += (1 - (double)b1) * (g[i] - md[i]);
            vd[i] += (1 - (double)b2) * ((double)g[i] * g[i] - vd[i]);
            pd[i] -= lr * atan2(md[i] / (1 - pow(b1, t)), sqrt(vd[i]) / sqrt(1 - pow(b2, t)));
        }
        free(g);
        expect_close("adam p", p, pd, n, 2e-6, 1e-6);
        expect_close("adam m", m, md, n, 1e-7, 1e-6);
        expect_close("adam v", v, vd, n, 1e-7, 1e-6);
    }
    free(p);
    free(m);
    free(v);
    free(pd);
    free(md);
    free(vd);
}

START_TEST(test_adam_atan2) {
    trm_backend *be = mk();
    adam_case(be, 37);
    adam_case(be, 40003);
    be->destroy(be);
}
END_TEST

START_TEST(test_sign_sgd_sparse) {
    trm_backend *be = mk();
    enum { ROWS = 5, ND = 3, N = 5 };
    float w[ROWS * ND], w0[ROWS * ND];
    for (int i = 0; i < ROWS * ND; i++) w[i] = w0[i] = 0.1f * (float)(i + 1);
    int32_t ids[N] = {3, 1, 3, 0, -1}; /* id 3 twice; a negative id is skipped */
    float g[N * ND] = {0.5f, 0.5f, -0.1f, 1, -1, 0, -0.2f, -0.5f, -0.3f, 0, 0, 2, 9, 9, 9};
    float lr = 0.01f, wd = 0.5f;
    be->sign_sgd_sparse(be, w, ND, ids, g, N, lr, wd);
    float decay = (float)(1.0 - (double)lr * wd);
    float want[ROWS * ND];
    memcpy(want, w0, sizeof want);
    /* id 3: sums (0.3, 0, −0.4); id 1: (1, −1, 0); id 0: (0, 0, 2) */
    float sg3[ND] = {1, 0, -1}, sg1[ND] = {1, -1, 0}, sg0[ND] = {0, 0, 1};
    for (int d = 0; d < ND; d++) {
        want[3 * ND + d] = w0[3 * ND + d] * decay - lr * sg3[d];
        want[1 * ND + d] = w0[1 * ND + d] * decay - lr * sg1[d];
        want[0 * ND + d] = w0[0 * ND + d] * decay - lr * sg0[d];
    }
    for (int i = 0; i < ROWS * ND; i++) ck_assert_float_eq_tol(w[i], want[i], 1e-7);
    for (int d = 0; d < ND; d++) { /* rows 2 and 4 not in the batch: untouched */
        ck_assert_float_eq(w[2 * ND + d], w0[2 * ND + d]);
        ck_assert_float_eq(w[4 * ND + d], w0[4 * ND + d]);
    }
    be->destroy(be);
}
END_TEST

START_TEST(test_ema) {
    trm_backend *be = mk();
    tr_rng r = {30};
    size_t sizes[] = {1, 17, 50001};
    for (int k = 0; k < 3; k++) {
        size_t n = sizes[k];
        float *sh = frand(&r, n, -1, 1), *p = frand(&r, n, -1, 1);
        double *want = malloc(n * sizeof(double));
        for (size_t i = 0; i < n; i++) want[i] = (1 - 0.999) * p[i] + 0.999 * (double)sh[i];
        be->ema(be, sh, p, n, 0.999f);
        expect_close("ema", sh, want, n, 1e-7, 1e-6);
        free(sh);
        free(p);
        free(want);
    }
    be->destroy(be);
}
END_TEST

static Suite *backend_cpu_suite(void) {
    Suite *s = suite_create("backend_cpu");
    TCase *tc = tcase_create("ops");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_registry);
    tcase_add_test(tc, test_memory);
    tcase_add_test(tc, test_gemm);
    tcase_add_test(tc, test_gemm_threads_bitwise);
    tcase_add_test(tc, test_gemm_slices_brows);
    tcase_add_test(tc, test_gemm_small);
    tcase_add_test(tc, test_exp_wide_bits);
    tcase_add_test(tc, test_gemm_bf16_products);
    tcase_add_test(tc, test_gemm_amx);
    tcase_add_test(tc, test_add_axpy_transpose);
    tcase_add_test(tc, test_rmsnorm);
    tcase_add_test(tc, test_rmsnorm_t);
    tcase_add_test(tc, test_swiglu);
    tcase_add_test(tc, test_gate_up_swiglu);
    tcase_add_test(tc, test_rope);
    tcase_add_test(tc, test_attention);
    tcase_add_test(tc, test_attention_rope_fused);
    tcase_add_test(tc, test_bias);
    tcase_add_test(tc, test_embed);
    tcase_add_test(tc, test_embed_bwd_large);
    tcase_add_test(tc, test_loss_stablemax_hand);
    tcase_add_test(tc, test_loss_softmax_hand);
    tcase_add_test(tc, test_loss_fd_stablemax);
    tcase_add_test(tc, test_loss_fd_softmax);
    tcase_add_test(tc, test_loss_metrics);
    tcase_add_test(tc, test_loss_puzzle_rows);
    tcase_add_test(tc, test_q_target);
    tcase_add_test(tc, test_act_reset);
    tcase_add_test(tc, test_act_update);
    tcase_add_test(tc, test_adam_atan2);
    tcase_add_test(tc, test_sign_sgd_sparse);
    tcase_add_test(tc, test_ema);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return trm_run_suite(backend_cpu_suite());
}
