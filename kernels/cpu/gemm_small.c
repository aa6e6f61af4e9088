/* gemm_small.c — the small products of attention's heads (a few dozen to a few hundred rows,
 * K = a head's width or its keys) without packing: op(A)'s values broadcast from wherever
 * they lie (any row and column stride), B's rows loaded as vectors, C written in place.
 * Through trm_gemm_cpu each of those products packed both operands and set up its work
 * buffers and an OpenMP region of one thread, which took as long as the multiply-adds: on
 * the tiny shapes (85 tokens, heads of 64) attention ran at a third of the big products'
 * rate. The sums are trm_gemm_cpu's: one fused multiply-add chain a block of KC values of k,
 * alpha applied as a block is stored, so the bits are those of the packed path (where neither
 * file's products and sums are contracted into FMAs: the build's -std=c11). */
#include "gemm_cpu.h"

#if defined(__x86_64__) && !defined(TRM_NO_OWN_GEMM)
#include <immintrin.h>

#define KC 256 /* trm_gemm_cpu's K block: the same blocks give the same sums */

/* One tile: rows of C (MR, a constant) × NV vectors of VL floats. Per k, NV vectors of B's
 * row k and MR broadcasts of op(A); then C = (first ? beta·C : C) + alpha·acc as
 * trm_gemm_cpu's tiles store it (beta 0 never reads C). A macro: the archs differ only in the
 * vector type and the intrinsics' names, and each (MR, NV) needs its own fully unrolled body
 * for the accumulators to stay in registers. */
#define PRAGMA_S(x) _Pragma(#x)
#define SMALL_TILE(VEC, VL, MR, NV, LOADU, STOREU, SET1, FMADD, MUL, ADD, SCALE_OLD)              \
    VEC c[MR][NV];                                                                             \
    PRAGMA_S(GCC unroll MR)                                                                    \
    for (int i = 0; i < MR; i++)                                                               \
        PRAGMA_S(GCC unroll NV) for (int v = 0; v < NV; v++) c[i][v] = SET1(0.0f);             \
    for (int k = 0; k < kc; k++) {                                                             \
        const float *ak = A + (size_t)k * sak, *bk = B + (size_t)k * ldb;                      \
        VEC b[NV];                                                                             \
        PRAGMA_S(GCC unroll NV) for (int v = 0; v < NV; v++) b[v] = LOADU(bk + VL * v);        \
        PRAGMA_S(GCC unroll MR)                                                                \
        for (int i = 0; i < MR; i++) {                                                         \
            VEC ai = SET1(ak[(size_t)i * sam]);                                                \
            PRAGMA_S(GCC unroll NV)                                                            \
            for (int v = 0; v < NV; v++) c[i][v] = FMADD(ai, b[v], c[i][v]);                   \
        }                                                                                      \
    }                                                                                          \
    VEC va = SET1(alpha), vb = SET1(beta);                                                     \
    int add_old = !first || beta == 1.0f, no_old = first && beta == 0.0f;                     \
    PRAGMA_S(GCC unroll MR)                                                                    \
    for (int i = 0; i < MR; i++)                                                               \
        PRAGMA_S(GCC unroll NV) for (int v = 0; v < NV; v++) {                                 \
            float *p = C + (size_t)i * ldc + VL * v;                                           \
            VEC r = MUL(va, c[i][v]);                                                          \
            if (add_old)                                                                       \
                r = ADD(LOADU(p), r);                                                          \
            else if (!no_old)                                                                  \
                r = SCALE_OLD(vb, LOADU(p), r);                                                \
            STOREU(p, r);                                                                      \
        }

#define TILE_ARGS                                                                                 \
    int kc, const float *A, size_t sam, size_t sak, const float *B, size_t ldb, float *C, size_t ldc, float alpha, \
        float beta, int first
typedef void (*small_tile)(TILE_ARGS);

/* AVX-512: 4 vectors (64 columns) × 6 rows, or 2 × 12 and 1 × 12 for a narrower rest: 24 or
 * 12 accumulators, enough to cover the multiply-add latency on both FMA ports. beta other than
 * 0 or 1 as store_12x32 (a fused multiply-add of the old value); AVX2 as store_6x16. */
#define FMA_OLD_512(vb, old, r) _mm512_fmadd_ps(vb, old, r)
#define TILE_512(MR, NV)                                                                        \
    __attribute__((target("avx512f,fma"))) static void tile512_##MR##x##NV(TILE_ARGS) {        \
        SMALL_TILE(__m512, 16, MR, NV, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps,      \
                   _mm512_fmadd_ps, _mm512_mul_ps, _mm512_add_ps, FMA_OLD_512)                 \
    }
#define MUL_OLD_256(vb, old, r) _mm256_add_ps(_mm256_mul_ps(vb, old), r)
#define TILE_256(MR, NV)                                                                        \
    __attribute__((target("avx2,fma"))) static void tile256_##MR##x##NV(TILE_ARGS) {           \
        SMALL_TILE(__m256, 8, MR, NV, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps,       \
                   _mm256_fmadd_ps, _mm256_mul_ps, _mm256_add_ps, MUL_OLD_256)                 \
    }

#define ROWS_6(T, NV) T(1, NV) T(2, NV) T(3, NV) T(4, NV) T(5, NV) T(6, NV)
#define ROWS_12(T, NV) ROWS_6(T, NV) T(7, NV) T(8, NV) T(9, NV) T(10, NV) T(11, NV) T(12, NV)
ROWS_6(TILE_512, 4)
ROWS_12(TILE_512, 2)
ROWS_12(TILE_512, 1)
ROWS_6(TILE_256, 2)

#define LIST_6(P, NV) P##1x##NV, P##2x##NV, P##3x##NV, P##4x##NV, P##5x##NV, P##6x##NV
#define LIST_12(P, NV) LIST_6(P, NV), P##7x##NV, P##8x##NV, P##9x##NV, P##10x##NV, P##11x##NV, P##12x##NV

/* The tiles of one width: [r − 1] computes r rows. */
typedef struct {
    const small_tile *rows;
    int mr, cols;
} tile_set;

static const small_tile t512_4[] = {LIST_6(tile512_, 4)}, t512_2[] = {LIST_12(tile512_, 2)},
                        t512_1[] = {LIST_12(tile512_, 1)}, t256_2[] = {LIST_6(tile256_, 2)};

/* The widths of vectors of `lanes` floats, widest first; the last, 16 columns, ends any N that
 * is a multiple of 16. */
static const tile_set sets_512[] = {{t512_4, 6, 64}, {t512_2, 12, 32}, {t512_1, 12, 16}}, sets_256[] = {{t256_2, 6, 16}};

int trm_gemm_small(int lanes, int M, int N, int K, float alpha, const float *A, size_t sam, size_t sak,
                   const float *B, size_t ldb, float beta, float *C, size_t ldc) {
    const tile_set *sets = lanes == 16 ? sets_512 : lanes == 8 ? sets_256 : NULL;
    if (!sets || M < 1 || N < 1 || K < 1 || N % 16) return 0;
    int n0 = 0;
    for (int w = 0; n0 < N; w++)
        for (; N - n0 >= sets[w].cols; n0 += sets[w].cols)
            for (int m0 = 0; m0 < M; m0 += sets[w].mr) {
                int mr = M - m0 < sets[w].mr ? M - m0 : sets[w].mr;
                for (int k0 = 0; k0 < K; k0 += KC)
                    sets[w].rows[mr - 1](K - k0 < KC ? K - k0 : KC, A + (size_t)m0 * sam + (size_t)k0 * sak, sam,
                                         sak, B + (size_t)k0 * ldb + n0, ldb, C + (size_t)m0 * ldc + n0, ldc,
                                         alpha, beta, k0 == 0);
            }
    return 1;
}

#else

int trm_gemm_small(int lanes, int M, int N, int K, float alpha, const float *A, size_t sam, size_t sak,
                   const float *B, size_t ldb, float beta, float *C, size_t ldc) {
    (void)lanes, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)sam, (void)sak, (void)B, (void)ldb, (void)beta;
    (void)C, (void)ldc;
    return 0;
}

#endif
