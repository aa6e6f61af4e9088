/* exp_wide.c — cpu.h's exp_affine on x86-64 in intrinsics: on 16 lanes for CPUs with AVX-512
 * (exp_affine hands rows of 16 or more here when __builtin_cpu_supports says so) and on 8 by
 * AVX2 (other x86 CPUs, and rows under 16). cpu.h's EXP_AFFINE_LOOP's operations lane by lane,
 * so the results are the generic path's bits (a NaN's payload may differ where a or b is NaN,
 * which no caller passes). Twice the lanes a vector matter where the vector units are 512 bits
 * wide (the device host's Xeon), and the exp is most of the SwiGLU's and softmax's arithmetic. */
#include "cpu.h"

void exp_affine_8(float *y, const float *x, int n, float a, float b) { exp_affine_narrow(y, x, n, a, b); }

#if TRM_EXP_WIDE
#include <immintrin.h>

/* EXP_AFFINE_LOOP's steps on one vector, in intrinsics: exp##L on L lanes of W bits, written
 * once for both widths (the names of AVX-512's and AVX2's intrinsics differ only in W). The
 * loop itself, on 64-byte vectors, went through a stack slot each vector (the memcpy loads and
 * stores) and ran one vector's chain of ~35 dependent operations at a time: 26 cycles a vector
 * on this EPYC, up to 40 on the device host's Xeon, where its 512-bit operations have two
 * ports. The clamps are max and min: max(lo, v) is lo where v < lo and v otherwise, NaN
 * included (VMAXPS returns its second operand where either is NaN, in both widths), as the
 * selects were; each product and sum is its own instruction, rounded, as the C was: the
 * build's -ffp-contract=off (-std=c11) keeps GCC from contracting them into FMAs, here and
 * there. */
#define EXP_STEPS(W, L, TARGET)                                                                         \
    __attribute__((target(TARGET))) static inline __m##W exp##L(__m##W v, __m##W va, __m##W vb) {       \
        v = _mm##W##_add_ps(_mm##W##_mul_ps(v, va), vb);                                              \
        v = _mm##W##_max_ps(_mm##W##_set1_ps(EXP_X_MIN), v);                                          \
        __m##W xc = _mm##W##_min_ps(_mm##W##_set1_ps(EXP_X_MAX), v);                                  \
        __m##W t = _mm##W##_add_ps(_mm##W##_mul_ps(xc, _mm##W##_set1_ps(EXP_LOG2E)),                  \
                                   _mm##W##_set1_ps(12582912.0f));                                     \
        __m##W##i e = _mm##W##_sub_epi32(_mm##W##_castps_si##W(t), _mm##W##_set1_epi32(0x4B400000));   \
        __m##W fx = _mm##W##_sub_ps(t, _mm##W##_set1_ps(12582912.0f));                                \
        __m##W r = _mm##W##_sub_ps(_mm##W##_sub_ps(xc, _mm##W##_mul_ps(fx, _mm##W##_set1_ps(0.693359375f))), \
                                   _mm##W##_mul_ps(fx, _mm##W##_set1_ps(-2.12194440e-4f)));            \
        __m##W z = _mm##W##_mul_ps(r, r);                                                             \
        __m##W p = _mm##W##_add_ps(_mm##W##_mul_ps(r, _mm##W##_set1_ps(1.9875691500e-4f)),            \
                                   _mm##W##_set1_ps(1.3981999507e-3f));                                \
        p = _mm##W##_add_ps(_mm##W##_mul_ps(p, r), _mm##W##_set1_ps(8.3334519073e-3f));               \
        p = _mm##W##_add_ps(_mm##W##_mul_ps(p, r), _mm##W##_set1_ps(4.1665795894e-2f));               \
        p = _mm##W##_add_ps(_mm##W##_mul_ps(p, r), _mm##W##_set1_ps(1.6666665459e-1f));               \
        p = _mm##W##_add_ps(_mm##W##_mul_ps(p, r), _mm##W##_set1_ps(5.0000001201e-1f));               \
        p = _mm##W##_add_ps(_mm##W##_add_ps(_mm##W##_mul_ps(p, z), r), _mm##W##_set1_ps(1.0f));       \
        __m##W##i h = _mm##W##_srai_epi32(e, 1), bias = _mm##W##_set1_epi32(127);                     \
        __m##W s1 = _mm##W##_castsi##W##_ps(_mm##W##_slli_epi32(_mm##W##_add_epi32(h, bias), 23));    \
        __m##W s2 = _mm##W##_castsi##W##_ps(                                                          \
            _mm##W##_slli_epi32(_mm##W##_add_epi32(_mm##W##_sub_epi32(e, h), bias), 23));             \
        return _mm##W##_mul_ps(_mm##W##_mul_ps(p, s1), s2);                                           \
    }
EXP_STEPS(512, 16, "avx512f")
EXP_STEPS(256, 8, "avx2") /* exp_affine's path where the CPU has no AVX-512, most laptops' */

/* Four vectors a turn, so that four chains overlap (i: the loop's index, from 0); the caller
 * then takes single vectors, the last one masked. */
#define EXP_TURNS(W, L)                                                                               \
    for (; i + 4 * L <= n; i += 4 * L) {                                                              \
        __m##W v0 = exp##L(_mm##W##_loadu_ps(x + i), va, vb), v1 = exp##L(_mm##W##_loadu_ps(x + i + L), va, vb); \
        __m##W v2 = exp##L(_mm##W##_loadu_ps(x + i + 2 * L), va, vb);                                 \
        __m##W v3 = exp##L(_mm##W##_loadu_ps(x + i + 3 * L), va, vb);                                 \
        _mm##W##_storeu_ps(y + i, v0), _mm##W##_storeu_ps(y + i + L, v1);                             \
        _mm##W##_storeu_ps(y + i + 2 * L, v2), _mm##W##_storeu_ps(y + i + 3 * L, v3);                 \
    }

__attribute__((target("avx2"))) void exp_affine_avx2(float *y, const float *x, int n, float a, float b) {
    __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    int i = 0;
    EXP_TURNS(256, 8)
    for (; i < n; i += 8) {
        if (n - i >= 8) {
            _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i), va, vb));
            continue;
        }
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - i), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(y + i, m, exp8(_mm256_maskload_ps(x + i, m), va, vb));
    }
}

__attribute__((target("avx512f"))) void exp_affine_wide(float *y, const float *x, int n, float a, float b) {
    __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
    int i = 0;
    EXP_TURNS(512, 16)
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, exp16(_mm512_maskz_loadu_ps(m, x + i), va, vb));
    }
}
#endif
