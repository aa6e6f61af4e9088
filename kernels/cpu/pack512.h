/* pack512.h — what the GEMMs' AVX-512 packing and stores share (gemm_cpu.c, gemm_amx.c): the
 * masks of a vector's first lanes, a 16 × 16 block of 32-bit values transposed in registers
 * (op(B)'s rows into k-major panels; bf16 pairs), and fp32 → bf16 by VCVTNE2PS2BF16 (round to
 * nearest even, NaN stays NaN, a denormal input becomes zero). */
#ifndef TRM_PACK512_H
#define TRM_PACK512_H
#include <immintrin.h>

/* The first n of 16 lanes (none for n ≤ 0, all for n ≥ 16). */
static inline __mmask16 lanes(int n) { return n <= 0 ? 0 : n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1); }

#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

/* src[0 .. 32) as 32 bf16 in order, n of them values (zeros past): as 32-bit lanes, lane x is
 * the pair (src[2x], src[2x + 1]), the lower in the low half. */
BF16_TARGET static inline __m512i bf16_run32(const float *src, int n) {
    __m512 lo = _mm512_maskz_loadu_ps(lanes(n), src), hi = _mm512_maskz_loadu_ps(lanes(n - 16), src + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* Rows r0 (k) and r1 (k + 1) of 16 values as 16 bf16 pairs, r0's in the low half of each. */
BF16_TARGET static inline __m512i bf16_pairs16(__m512 r0, __m512 r1) {
    const __m512i inter = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                           21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(inter, (__m512i)_mm512_cvtne2ps_pbh(r1, r0));
}

/* r[i] (16 lanes of 32 bits) becomes column i: unpacks within 128-bit lanes, then lanes moved. */
__attribute__((target("avx512f"))) static inline void transpose16(__m512i r[16]) {
    __m512i t[16], u[16], v[16];
    for (int i = 0; i < 8; i++)
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]),
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    for (int i = 0; i < 4; i++) {
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        v[i] = _mm512_shuffle_i32x4(u[i], u[i + 4], 0x88);
        v[i + 4] = _mm512_shuffle_i32x4(u[i], u[i + 4], 0xdd);
        v[i + 8] = _mm512_shuffle_i32x4(u[i + 8], u[i + 12], 0x88);
        v[i + 12] = _mm512_shuffle_i32x4(u[i + 8], u[i + 12], 0xdd);
    }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_i32x4(v[i], v[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(v[i], v[i + 8], 0xdd);
    }
}
#endif
