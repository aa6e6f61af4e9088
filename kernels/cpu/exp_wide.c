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

/* EXP_AFFINE_LOOP's steps on one vector, in intrinsics. The loop itself, on 64-byte vectors,
 * went through a stack slot each vector (the memcpy loads and stores) and ran one vector's
 * chain of ~35 dependent operations at a time: 26 cycles a vector on this EPYC, up to 40 on the
 * device host's Xeon, where its 512-bit operations have two ports. The clamps are max and min:
 * max(lo, v) is lo where v < lo and v otherwise, NaN included (VMAXPS returns its second
 * operand where either is NaN), as the selects were; each product and sum is its own
 * instruction, rounded, as the C was: the build's -ffp-contract=off (-std=c11) keeps GCC from
 * contracting them into FMAs, here and there. */
__attribute__((target("avx512f"))) static inline __m512 exp16(__m512 v, __m512 va, __m512 vb) {
    v = _mm512_add_ps(_mm512_mul_ps(v, va), vb);
    v = _mm512_max_ps(_mm512_set1_ps(EXP_X_MIN), v);
    __m512 xc = _mm512_min_ps(_mm512_set1_ps(EXP_X_MAX), v);
    __m512 t = _mm512_add_ps(_mm512_mul_ps(xc, _mm512_set1_ps(EXP_LOG2E)), _mm512_set1_ps(12582912.0f));
    __m512i e = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(0x4B400000));
    __m512 fx = _mm512_sub_ps(t, _mm512_set1_ps(12582912.0f));
    __m512 r = _mm512_sub_ps(_mm512_sub_ps(xc, _mm512_mul_ps(fx, _mm512_set1_ps(0.693359375f))),
                             _mm512_mul_ps(fx, _mm512_set1_ps(-2.12194440e-4f)));
    __m512 z = _mm512_mul_ps(r, r);
    __m512 p = _mm512_add_ps(_mm512_mul_ps(r, _mm512_set1_ps(1.9875691500e-4f)), _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(p, z), r), _mm512_set1_ps(1.0f));
    __m512i h = _mm512_srai_epi32(e, 1), bias = _mm512_set1_epi32(127);
    __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(h, bias), 23));
    __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_sub_epi32(e, h), bias), 23));
    return _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
}

/* The same steps on 8 lanes (AVX2): exp_affine's path where the CPU has no AVX-512, most
 * laptops'. VMAXPS and VMINPS take NaN as the 512-bit forms do. */
__attribute__((target("avx2"))) static inline __m256 exp8(__m256 v, __m256 va, __m256 vb) {
    v = _mm256_add_ps(_mm256_mul_ps(v, va), vb);
    v = _mm256_max_ps(_mm256_set1_ps(EXP_X_MIN), v);
    __m256 xc = _mm256_min_ps(_mm256_set1_ps(EXP_X_MAX), v);
    __m256 t = _mm256_add_ps(_mm256_mul_ps(xc, _mm256_set1_ps(EXP_LOG2E)), _mm256_set1_ps(12582912.0f));
    __m256i e = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B400000));
    __m256 fx = _mm256_sub_ps(t, _mm256_set1_ps(12582912.0f));
    __m256 r = _mm256_sub_ps(_mm256_sub_ps(xc, _mm256_mul_ps(fx, _mm256_set1_ps(0.693359375f))),
                             _mm256_mul_ps(fx, _mm256_set1_ps(-2.12194440e-4f)));
    __m256 z = _mm256_mul_ps(r, r);
    __m256 p = _mm256_add_ps(_mm256_mul_ps(r, _mm256_set1_ps(1.9875691500e-4f)), _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(p, z), r), _mm256_set1_ps(1.0f));
    __m256i h = _mm256_srai_epi32(e, 1), bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(e, h), bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

__attribute__((target("avx2"))) void exp_affine_avx2(float *y, const float *x, int n, float a, float b) {
    __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 v0 = exp8(_mm256_loadu_ps(x + i), va, vb), v1 = exp8(_mm256_loadu_ps(x + i + 8), va, vb);
        __m256 v2 = exp8(_mm256_loadu_ps(x + i + 16), va, vb), v3 = exp8(_mm256_loadu_ps(x + i + 24), va, vb);
        _mm256_storeu_ps(y + i, v0), _mm256_storeu_ps(y + i + 8, v1);
        _mm256_storeu_ps(y + i + 16, v2), _mm256_storeu_ps(y + i + 24, v3);
    }
    for (; i < n; i += 8) {
        if (n - i >= 8) {
            _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i), va, vb));
            continue;
        }
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - i), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(y + i, m, exp8(_mm256_maskload_ps(x + i, m), va, vb));
    }
}

/* Four vectors a turn, so that four chains overlap; then single vectors, the last one masked. */
__attribute__((target("avx512f"))) void exp_affine_wide(float *y, const float *x, int n, float a, float b) {
    __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 v0 = exp16(_mm512_loadu_ps(x + i), va, vb), v1 = exp16(_mm512_loadu_ps(x + i + 16), va, vb);
        __m512 v2 = exp16(_mm512_loadu_ps(x + i + 32), va, vb), v3 = exp16(_mm512_loadu_ps(x + i + 48), va, vb);
        _mm512_storeu_ps(y + i, v0), _mm512_storeu_ps(y + i + 16, v1);
        _mm512_storeu_ps(y + i + 32, v2), _mm512_storeu_ps(y + i + 48, v3);
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, exp16(_mm512_maskz_loadu_ps(m, x + i), va, vb));
    }
}
#endif
