/* pack512.h — what the GEMMs' AVX-512 packing and stores share (gemm_cpu.c, gemm_amx.c): the
 * masks of a vector's first lanes, and a 16 × 16 block of 32-bit values transposed in
 * registers (gemm_cpu.c: op(B)'s rows into k-major panels; gemm_amx.c: bf16 pairs). */
#ifndef TRM_PACK512_H
#define TRM_PACK512_H
#include <immintrin.h>

/* The first n of 16 lanes (none for n ≤ 0, all for n ≥ 16). */
static inline __mmask16 lanes(int n) { return n <= 0 ? 0 : n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1); }

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
