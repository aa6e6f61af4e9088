/* gemm_cpu.c — trm's own fp32 GEMM for the cpu backend on x86-64: an AVX-512 (12×32) or AVX2
 * (6×16) register-blocked micro-kernel chosen at run time, op(B) packed into panels, op(A) read
 * where it lies in fp32 (A's rows; with AVX-512 also A's columns when transposed), else packed,
 * and OpenMP over blocks of the output. The weight gradients (Aᵀ·B with a long K) run in fixed
 * slices of K (gemm_tn_slices), both operands read in place where B is narrow, else packed.
 * TRM's products are medium-sized (thousands of rows, K of 85..5440) and OpenBLAS threads them
 * poorly (it scaled from 8 to 16 threads by 1.25x on the device host and slows down on two
 * threads for the mlp_t shapes); here every thread owns whole output blocks, packs what it
 * alone needs and never waits for another, and each element is summed in the same order
 * whatever the thread count, so results do not depend on OMP_NUM_THREADS. With bf16
 * (forward_dtype=bfloat16 on a CPU with AVX512-BF16) both operands are rounded to bf16 as they
 * are packed and summed in fp32, as the cuda backend's tensor cores do. trm_gemm_cpu_rows runs
 * A·op(B) by blocks of whole rows and hands each block on, still in cache, to a callback
 * (swiglu.c's fused passes: gate/up + SwiGLU, the down projection's input gradient + the SwiGLU
 * backward). */
#include "gemm_cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *trm_gemm_buffer(size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "trm: out of memory for GEMM work buffers\n");
        exit(1);
    }
    return p;
}

#if defined(__x86_64__) && !defined(TRM_NO_OWN_GEMM)
#include <immintrin.h>

#include "pack512.h"
#ifdef _OPENMP
#include <omp.h>
#endif

#define KC 256 /* K per packed block: a 12×256 A panel and a 256×32 B panel stay in L1/L2 */
#define MR_MAX 12
#define NR_MAX 32

typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
} gemm_job;

/* C[mr×nr] (ldc) = (first ? beta·C : C) + alpha·acc, with beta = 0 never reading C. */
static void store_tile(float *C, int ldc, const float *acc, int ld_acc, int mr, int nr, float alpha, float beta,
                       int first) {
    for (int i = 0; i < mr; i++) {
        float *c = C + (size_t)i * ldc;
        const float *a = acc + i * ld_acc;
        if (!first || beta == 1.0f)
            for (int j = 0; j < nr; j++) c[j] += alpha * a[j];
        else if (beta == 0.0f)
            for (int j = 0; j < nr; j++) c[j] = alpha * a[j];
        else
            for (int j = 0; j < nr; j++) c[j] = beta * c[j] + alpha * a[j];
    }
}

/* ---- micro-kernels: acc[MR][NR] = Ap (k-major, MR per k) · Bp (k-major, NR per k) ---- */

/* Rows r0 .. mr of the tile (C: its row 0). Edge tiles (mr < 12 or nr < 32) by masked vectors,
 * the same arithmetic as whole ones: the scalar loop they took cost attention's 85 × 85 scores
 * a fifth of their time. */
__attribute__((target("avx512f"))) static inline void store_12x32(__m512 c[12][2], float *C, int ldc, int r0, int mr,
                                                                  int nr, float alpha, float beta, int first) {
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    int scale_old = first && beta != 1.0f, read_old = !first || beta != 0.0f;
    __mmask16 mk[2] = {lanes(nr), lanes(nr - 16)};
    for (int i = r0; i < mr; i++)
        for (int h = 0; h < 2; h++) {
            float *p = C + (size_t)i * ldc + 16 * h;
            __m512 r = _mm512_mul_ps(va, c[i][h]);
            if (read_old) {
                __m512 old = _mm512_maskz_loadu_ps(mk[h], p);
                r = scale_old ? _mm512_fmadd_ps(vb, old, r) : _mm512_add_ps(old, r);
            }
            _mm512_mask_storeu_ps(p, mk[h], r);
        }
}

/* The k loop of every fp32 kernel, for c[MR][2] (vectors of NR/2 floats): per k, PER_K (a
 * prefetch, or nothing), two vectors of B's row k (BLD floats after row k − 1's: NR in a packed
 * panel, FMA_K_LOOP; B's ldb where it is read in place), then each of op(A)'s MR values at A_AT
 * (an address in terms of k and i: a packed panel, or A where it lies) broadcast and
 * multiply-added into its row of c. A macro, since the kernels differ only in the vector type,
 * the intrinsics' names and where op(A) is read; the unroll pragma (MR rows) keeps c in
 * registers. BCAST takes an address, as AVX2's broadcast does (BCAST_512 gives AVX-512's set1
 * one). */
#define PRAGMA(x) _Pragma(#x)
#define BCAST_512(p) _mm512_set1_ps(*(p))
#define FMA_K_LOOP_B(VEC, MR, NR, BLD, LOADU, BCAST, FMADD, A_AT, PER_K)                        \
    for (int k = 0; k < kc; k++) {                                                             \
        PER_K;                                                                                 \
        VEC b0 = LOADU(Bp + k * BLD), b1 = LOADU(Bp + k * BLD + NR / 2);                       \
        PRAGMA(GCC unroll MR)                                                                  \
        for (int i = 0; i < MR; i++) {                                                         \
            VEC ai = BCAST(A_AT);                                                              \
            c[i][0] = FMADD(ai, b0, c[i][0]);                                                  \
            c[i][1] = FMADD(ai, b1, c[i][1]);                                                  \
        }                                                                                      \
    }
#define FMA_K_LOOP(VEC, MR, NR, LOADU, BCAST, FMADD, A_AT, PER_K) \
    FMA_K_LOOP_B(VEC, MR, NR, NR, LOADU, BCAST, FMADD, A_AT, PER_K)

__attribute__((target("avx512f,fma"))) static void kernel_avx512(int kc, const float *Ap, const float *Bp, float *C,
                                                                   int ldc, int mr, int nr, float alpha, float beta,
                                                                   int first) {
    __m512 c[12][2];
    for (int i = 0; i < 12; i++) c[i][0] = c[i][1] = _mm512_setzero_ps();
    FMA_K_LOOP(__m512, 12, 32, _mm512_loadu_ps, BCAST_512, _mm512_fmadd_ps, Ap + k * 12 + i, )
    store_12x32(c, C, ldc, 0, mr, nr, alpha, beta, first);
}

/* The packed kernel with op(B) = B read where it lies: a k's 32 columns are a run of B's row k,
 * ldb apart from the next k's (the weight gradients' slices where B is the narrow operand, its
 * rows up to 128 floats: packing them cost each block of C a copy of its slice of B). The same
 * sums in the same order as kernel_avx512 on the packed panel: the same bits. */
__attribute__((target("avx512f,fma"))) static void kernel_avx512_brows(int kc, const float *Ap, const float *Bp,
                                                                         size_t ldb, float *C, int ldc, int mr,
                                                                         float alpha, float beta, int first) {
    __m512 c[12][2];
    for (int i = 0; i < 12; i++) c[i][0] = c[i][1] = _mm512_setzero_ps();
    FMA_K_LOOP_B(__m512, 12, 32, (size_t)ldb, _mm512_loadu_ps, BCAST_512, _mm512_fmadd_ps, Ap + k * 12 + i, )
    store_12x32(c, C, ldc, 0, mr, 32, alpha, beta, first);
}

/* The same k loop with op(A) read where it lies, A not transposed (MR rows, each along its
 * own run of k), for the products whose op(B) is narrow: packing A there cost as much as the
 * multiply-adds it fed (a store per element against 2·N flops). Each group of three rows takes
 * one pointer and the row stride as the index register, so the loop needs no spills; the sums
 * and their order are the packed kernel's, so the bits are too. */
#define A_ROWS (r[i / 3] + (size_t)(i % 3) * lda + k)

__attribute__((target("avx512f,fma"))) static void kernel_avx512_rows(int kc, const float *A, size_t lda,
                                                                        const float *Bp, float *C, int ldc, int r0,
                                                                        int nr, float alpha, float beta, int first) {
    const float *r[4] = {A, A + 3 * lda, A + 6 * lda, A + 9 * lda};
    __m512 c[12][2];
    for (int i = 0; i < 12; i++) c[i][0] = c[i][1] = _mm512_setzero_ps();
    FMA_K_LOOP(__m512, 12, 32, _mm512_loadu_ps, BCAST_512, _mm512_fmadd_ps, A_ROWS, )
    store_12x32(c, C, ldc, r0, 12, nr, alpha, beta, first);
}

/* bf16 operands (pairs of k packed in 32 bits), fp32 sums: VDPBF16PS takes two k a lane. */
__attribute__((target("avx512f,avx512bf16"))) static void kernel_avx512bf16(int kc, const float *Apf, const float *Bpf,
                                                                          float *C, int ldc, int mr, int nr,
                                                                          float alpha, float beta, int first) {
    const uint32_t *Ap = (const uint32_t *)Apf, *Bp = (const uint32_t *)Bpf;
    __m512 c[12][2];
    for (int i = 0; i < 12; i++) c[i][0] = c[i][1] = _mm512_setzero_ps();
    for (int p = 0; p < (kc + 1) / 2; p++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(Bp + p * 32), b1 = (__m512bh)_mm512_loadu_si512(Bp + p * 32 + 16);
        const uint32_t *a = Ap + p * 12;
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) {
            __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);
            c[i][0] = _mm512_dpbf16_ps(c[i][0], ai, b0);
            c[i][1] = _mm512_dpbf16_ps(c[i][1], ai, b1);
        }
    }
    store_12x32(c, C, ldc, 0, mr, nr, alpha, beta, first);
}

/* Rows r0 .. 6 of a whole AVX2 tile (16 columns, from `acc`, 16 apart) into C: store_tile's
 * arithmetic in vectors (-ffp-contract=off: a product and a sum, each rounded, as there; the
 * scalar loop took 5% of a weight gradient's time). The accumulators reach it through `acc`:
 * handed over as registers, GCC kept them in memory again inside the k loop. */
__attribute__((target("avx2"))) static void store_6x16(const float *acc, float *C, int ldc, int r0, float alpha,
                                                        float beta, int first) {
    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    for (int i = r0; i < 6; i++)
        for (int h = 0; h < 16; h += 8) {
            float *p = C + (size_t)i * ldc + h;
            __m256 r = _mm256_mul_ps(va, _mm256_loadu_ps(acc + i * 16 + h));
            if (!first || beta == 1.0f)
                r = _mm256_add_ps(_mm256_loadu_ps(p), r);
            else if (beta != 0.0f)
                r = _mm256_add_ps(_mm256_mul_ps(vb, _mm256_loadu_ps(p)), r);
            _mm256_storeu_ps(p, r);
        }
}

/* The AVX2 kernels' accumulators go to `acc` by an unrolled loop: with a rolled one (an
 * index into c), GCC kept c in memory too and stored all twelve accumulators on every k, and
 * the kernels ran at 40% of the FMA units' rate (this EPYC, TRM_CPU_GEMM=avx2, one thread,
 * 5440 × 1024 × 128: 40 → 89 GFLOP/s; the tiny_mlp step 2167 → 1081 ms). Same bits. */
__attribute__((target("avx2,fma"))) static void kernel_avx2(int kc, const float *Ap, const float *Bp, float *C, int ldc,
                                                              int mr, int nr, float alpha, float beta, int first) {
    __m256 c[6][2];
    for (int i = 0; i < 6; i++) c[i][0] = c[i][1] = _mm256_setzero_ps();
    FMA_K_LOOP(__m256, 6, 16, _mm256_loadu_ps, _mm256_broadcast_ss, _mm256_fmadd_ps, Ap + k * 6 + i, )
    float acc[6 * 16];
#pragma GCC unroll 6
    for (int i = 0; i < 6; i++) _mm256_storeu_ps(acc + i * 16, c[i][0]), _mm256_storeu_ps(acc + i * 16 + 8, c[i][1]);
    if (mr == 6 && nr == 16)
        store_6x16(acc, C, ldc, 0, alpha, beta, first);
    else
        store_tile(C, ldc, acc, 16, mr, nr, alpha, beta, first);
}

/* op(A) = Aᵀ read in place: a k's MR values are contiguous in A's row k (lda apart from the
 * next k's); the row PF_COLS ahead is fetched early, since rows a page apart defeat the
 * hardware's prefetchers. 8 rows (~100 cycles of products) were too few on the device host's
 * Xeon, whose L3 answers later than this EPYC's: there, medians of 3 (ms), 8 → 32 rows, the
 * down weight's gradient 9.5 → 7.2 on 1 thread and 4.1 → 3.4 on 4, gate/up's 6.7 → 5.9 on 4,
 * and the tiny_att step on 4 threads 336 → 304; neutral here. */
#define PF_COLS 32
#define PF_ROW(k) _mm_prefetch((const char *)(A + (size_t)((k) + PF_COLS) * lda), _MM_HINT_T0)
__attribute__((target("avx512f,fma"))) static void kernel_avx512_cols(int kc, const float *A, size_t lda,
                                                                        const float *Bp, float *C, int ldc, int r0,
                                                                        int nr, float alpha, float beta, int first) {
    __m512 c[12][2];
    for (int i = 0; i < 12; i++) c[i][0] = c[i][1] = _mm512_setzero_ps();
    FMA_K_LOOP(__m512, 12, 32, _mm512_loadu_ps, BCAST_512, _mm512_fmadd_ps, A + (size_t)k * lda + i, PF_ROW(k))
    store_12x32(c, C, ldc, r0, 12, nr, alpha, beta, first);
}

/* Both operands where they lie: op(A) = Aᵀ as kernel_avx512_cols reads it (A's row PF_COLS ahead
 * fetched early), B's rows ldb apart as kernel_avx512_brows reads them; rows r0 .. 12 stored.
 * The same sums in the same order as the packed kernel: the same bits. */
__attribute__((target("avx512f,fma"))) static void kernel_avx512_cols_brows(int kc, const float *A, size_t lda,
                                                                              const float *B, size_t ldb, float *C,
                                                                              int ldc, int r0, float alpha, float beta,
                                                                              int first) {
    const float *Bp = B;
    __m512 c[12][2];
    for (int i = 0; i < 12; i++) c[i][0] = c[i][1] = _mm512_setzero_ps();
    FMA_K_LOOP_B(__m512, 12, 32, ldb, _mm512_loadu_ps, BCAST_512, _mm512_fmadd_ps, A + (size_t)k * lda + i,
                 PF_ROW(k))
    store_12x32(c, C, ldc, r0, 12, 32, alpha, beta, first);
}

__attribute__((target("avx2,fma"))) static void kernel_avx2_rows(int kc, const float *A, size_t lda, const float *Bp,
                                                                   float *C, int ldc, int r0, int nr, float alpha,
                                                                   float beta, int first) {
    const float *r[2] = {A, A + 3 * lda};
    __m256 c[6][2];
    for (int i = 0; i < 6; i++) c[i][0] = c[i][1] = _mm256_setzero_ps();
    FMA_K_LOOP(__m256, 6, 16, _mm256_loadu_ps, _mm256_broadcast_ss, _mm256_fmadd_ps, A_ROWS, )
    float acc[6 * 16];
#pragma GCC unroll 6
    for (int i = 0; i < 6; i++) _mm256_storeu_ps(acc + i * 16, c[i][0]), _mm256_storeu_ps(acc + i * 16 + 8, c[i][1]);
    if (nr == 16)
        store_6x16(acc, C, ldc, r0, alpha, beta, first);
    else
        store_tile(C + (size_t)r0 * ldc, ldc, acc + r0 * 16, 16, 6 - r0, nr, alpha, beta, first);
}

typedef void (*ukernel)(int, const float *, const float *, float *, int, int, int, float, float, int);
/* whole MR-row panels of op(A) read in place, rows r0 .. MR stored: (kc, A, lda, Bp, C, ldc, r0, nr,
 * alpha, beta, first) */
typedef void (*ukernel_inplace)(int, const float *, size_t, const float *, float *, int, int, int, float, float, int);

typedef struct {
    ukernel fn, bf16;           /* bf16: NULL where the CPU has no AVX512-BF16 */
    ukernel_inplace rows, cols; /* op(A) = A, op(A) = Aᵀ read in place; cols NULL with AVX2 */
    int mr, nr;
} arch;

/* TRM_CPU_GEMM=avx2 takes the AVX2 kernel on an AVX-512 machine too (tests cover both). */
static arch pick_arch(void) {
    __builtin_cpu_init();
    const char *e = getenv("TRM_CPU_GEMM");
    if (__builtin_cpu_supports("avx512f") && !(e && !strcmp(e, "avx2")))
        return (arch){kernel_avx512, __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") ? kernel_avx512bf16 : NULL,
                      kernel_avx512_rows, kernel_avx512_cols, 12, 32};
    return (arch){kernel_avx2, NULL, kernel_avx2_rows, NULL, 6, 16};
}

/* ---- packing (zero padding past the edges, so kernels never branch on them) ---- */

#define PF_PACK 8 /* rows ahead that pack_at_12 fetches */
/* op(A) = Aᵀ into 12-row panels: a k's values for every panel are one run of A's row k, so each
 * row is read once, along memory (panel by panel, rows lda apart thrashed a few cache sets), and
 * the row PF_PACK ahead is fetched early (the prefetchers stop at each page). */
__attribute__((target("avx512f"))) static void pack_at_12(float *dst, const gemm_job *j, int m0, int mc, int k0,
                                                          int kc) {
    int whole = mc / 12 * 12;
    __mmask16 m12 = lanes(12), rem = lanes(mc - whole);
    for (int k = 0; k < kc; k++) {
        const float *src = j->A + (size_t)(k0 + k) * j->lda + m0;
        if (k + PF_PACK < kc)
            for (int x = 0; x < mc; x += 16)
                _mm_prefetch((const char *)(src + PF_PACK * (size_t)j->lda + x), _MM_HINT_T0);
        for (int p = 0; p < whole; p += 12)
            _mm512_mask_storeu_ps(dst + (size_t)p * kc + k * 12, m12, _mm512_maskz_loadu_ps(m12, src + p));
        if (rem) _mm512_mask_storeu_ps(dst + (size_t)whole * kc + k * 12, m12, _mm512_maskz_loadu_ps(rem, src + whole));
    }
}

/* AVX2's 6-row panels in the same order: along each row of A, a panel's six values a 16-byte
 * and an 8-byte move (copied one float at a time, the pack took a quarter to a third of the
 * weight gradients' time). */
static void pack_at_6(float *dst, const gemm_job *j, int m0, int mc, int k0, int kc) {
    int whole = mc / 6 * 6;
    for (int k = 0; k < kc; k++) {
        const float *src = j->A + (size_t)(k0 + k) * j->lda + m0;
        if (k + PF_PACK < kc)
            for (int x = 0; x < mc; x += 16) _mm_prefetch((const char *)(src + PF_PACK * (size_t)j->lda + x), _MM_HINT_T0);
        float *d = dst + (size_t)k * 6;
        for (int p = 0; p < whole; p += 6, d += (size_t)6 * kc) {
            _mm_storeu_ps(d, _mm_loadu_ps(src + p));
            _mm_storel_pi((__m64 *)(d + 4), _mm_loadl_pi(_mm_setzero_ps(), (const __m64 *)(src + p + 4)));
        }
        if (whole < mc) {
            int i = 0;
            for (; i < mc - whole; i++) d[i] = src[whole + i];
            for (; i < 6; i++) d[i] = 0.0f;
        }
    }
}

/* op(A)[m0 .. m0+mc)[k0 .. k0+kc) into panels of mr rows, k-major within a panel. */
static void pack_a(float *dst, const gemm_job *j, int m0, int mc, int k0, int kc, int mr) {
    if (j->ta) { /* the two archs' panels: AVX-512's 12 rows, AVX2's 6 */
        if (mr == 12)
            pack_at_12(dst, j, m0, mc, k0, kc);
        else
            pack_at_6(dst, j, m0, mc, k0, kc);
        return;
    }
    for (int p = 0; p < mc; p += mr) {
        int rows = mc - p < mr ? mc - p : mr;
        float *d = dst + (size_t)p * kc;
        for (int i = 0; i < rows; i++) {
            const float *src = j->A + (size_t)(m0 + p + i) * j->lda + k0;
            for (int k = 0; k < kc; k++) d[k * mr + i] = src[k];
        }
        for (int i = rows; i < mr; i++)
            for (int k = 0; k < kc; k++) d[k * mr + i] = 0.0f;
    }
}

__attribute__((target("avx2"))) static inline void copy_16_avx2(float *d, const float *src) {
    _mm256_storeu_ps(d, _mm256_loadu_ps(src));
    _mm256_storeu_ps(d + 8, _mm256_loadu_ps(src + 8));
}

__attribute__((target("avx512f"))) static void copy_32_avx512(float *d, const float *src, __mmask16 lo, __mmask16 hi) {
    _mm512_storeu_ps(d, _mm512_maskz_loadu_ps(lo, src));
    _mm512_storeu_ps(d + 16, _mm512_maskz_loadu_ps(hi, src + 16));
}

/* The AVX-512 panel (32 columns) of op(B) = Bᵀ: 16 columns (B's rows) × 16 k at a time read
 * along memory and transposed in registers. One scalar store a value cost as much as the
 * products on attention's heads (85 keys × 64: the scores' op(B) is K, repacked per head). */
__attribute__((target("avx512f"))) static void pack_bt_32(float *dst, const gemm_job *j, int n0, int cols, int k0,
                                                          int kc) {
    for (int c0 = 0; c0 < 32; c0 += 16)
        for (int kb = 0; kb < kc; kb += 16) {
            int kn = kc - kb < 16 ? kc - kb : 16;
            __mmask16 km = lanes(kn);
            __m512i r[16];
            for (int i = 0; i < 16; i++)
                r[i] = c0 + i < cols ? _mm512_castps_si512(_mm512_maskz_loadu_ps(
                                           km, j->B + (size_t)(n0 + c0 + i) * j->ldb + k0 + kb))
                                     : _mm512_setzero_si512();
            transpose16(r); /* r[i]: k = kb + i, the 16 columns */
            for (int i = 0; i < kn; i++) _mm512_storeu_ps(dst + (size_t)(kb + i) * 32 + c0, _mm512_castsi512_ps(r[i]));
        }
}

/* Panel q (columns q·nr ..) of op(B)[k0 .. k0+kc)[all N], k-major within the panel. */
static void pack_b_panel(float *dst, const gemm_job *j, int q, int k0, int kc, int nr) {
    int n0 = q * nr, cols = j->N - n0 < nr ? j->N - n0 : nr;
    if (j->tb && nr == 32) {
        pack_bt_32(dst, j, n0, cols, k0, kc);
    } else if (j->tb) { /* columns of op(B) are rows of B: each column is one contiguous run */
        for (int c = 0; c < cols; c++) {
            const float *src = j->B + (size_t)(n0 + c) * j->ldb + k0;
            for (int k = 0; k < kc; k++) dst[k * nr + c] = src[k];
        }
        for (int c = cols; c < nr; c++)
            for (int k = 0; k < kc; k++) dst[k * nr + c] = 0.0f;
    } else if (nr == 32) { /* a k's 32 columns (the AVX-512 kernel's panel): two masked vectors,
                            * where a memcpy call cost more */
        __mmask16 lo = lanes(cols), hi = lanes(cols - 16);
        for (int k = 0; k < kc; k++)
            copy_32_avx512(dst + (size_t)k * nr, j->B + (size_t)(k0 + k) * j->ldb + n0, lo, hi);
    } else if (nr == 16 && cols == 16) { /* AVX2's whole panel: two vectors a k (a memcpy call
                                          * a k cost 6% of a weight gradient's time) */
        for (int k = 0; k < kc; k++) copy_16_avx2(dst + k * 16, j->B + (size_t)(k0 + k) * j->ldb + n0);
    } else {
        for (int k = 0; k < kc; k++) {
            const float *src = j->B + (size_t)(k0 + k) * j->ldb + n0;
            memcpy(dst + k * nr, src, (size_t)cols * sizeof(float));
            for (int c = cols; c < nr; c++) dst[k * nr + c] = 0.0f;
        }
    }
}

/* ---- bf16 operands: fp32 rounded to nearest even by VCVTNE2PS2BF16 as they are packed
 * (NaN stays NaN; a denormal input becomes zero, as on AMX). k in pairs, 32 bits a pair, the
 * lower k in the low half. The bf16 kernel runs only with AVX-512 (12 × 32). Scalar
 * conversions had made the packs the bf16 products' bound: on this EPYC (AVX512-BF16, one
 * thread) x·Wᵀ 5440 × 1024 × 128 ran at 153 GFLOP/s, where A is packed once, and dy·W at 97
 * and the weight gradients at 63, where every block converts its A: slower than in fp32. */

/* r0[x] (k) and r1[x] (k + 1) paired for x < n (zeros past; r1 NULL: k + 1 past K). */
BF16_TARGET static inline __m512i pairs_rows16(const float *r0, const float *r1, int n) {
    __mmask16 m = lanes(n);
    return bf16_pairs16(_mm512_maskz_loadu_ps(m, r0), r1 ? _mm512_maskz_loadu_ps(m, r1) : _mm512_setzero_ps());
}

/* `lines` runs along k (rows of A, or of B where op(B) = Bᵀ), each `ld` apart, as pairs: pair
 * q of run i goes to d[q·dstride + i], lane `mask` of each pair's row stored (zeros where
 * i ≥ lines). 16 runs × 16 pairs at a time, transposed in registers. */
BF16_TARGET static void pack_runs_bf16(uint32_t *d, size_t dstride, __mmask16 mask, const float *src, size_t ld,
                                       int lines, int kc) {
    int kp = (kc + 1) / 2;
    for (int q0 = 0; q0 < kp; q0 += 16) {
        __m512i r[16];
        for (int i = 0; i < 16; i++)
            r[i] = i < lines ? bf16_run32(src + (size_t)i * ld + 2 * q0, kc - 2 * q0) : _mm512_setzero_si512();
        transpose16(r);
        for (int x = 0; x < 16 && q0 + x < kp; x++) _mm512_mask_storeu_epi32(d + (size_t)(q0 + x) * dstride, mask, r[x]);
    }
}

/* k across rows of memory (`ld` apart): rows 2q and 2q + 1 paired along their `width` values
 * (≤ 32), zeros up to dstride, which is 12 or 32. */
BF16_TARGET static void pack_rows_bf16(uint32_t *d, size_t dstride, const float *src, size_t ld, int kc, int width) {
    __mmask16 m0 = lanes(dstride < 16 ? (int)dstride : 16), m1 = lanes((int)dstride - 16);
    for (int q = 0; q < (kc + 1) / 2; q++) {
        const float *r0 = src + (size_t)(2 * q) * ld, *r1 = 2 * q + 1 < kc ? r0 + ld : NULL;
        uint32_t *o = d + (size_t)q * dstride;
        _mm512_mask_storeu_epi32(o, m0, pairs_rows16(r0, r1, width));
        if (m1) _mm512_mask_storeu_epi32(o + 16, m1, pairs_rows16(r0 + 16, r1 ? r1 + 16 : NULL, width - 16));
    }
}

/* op(A)'s panels of mr = 12 rows, pairs of k-major. */
BF16_TARGET static void pack_a_bf16(uint32_t *dst, const gemm_job *j, int m0, int mc, int k0, int kc, int mr) {
    int kp = (kc + 1) / 2;
    for (int p = 0; p < mc; p += mr) {
        int rows = mc - p < mr ? mc - p : mr;
        uint32_t *d = dst + (size_t)p * kp;
        if (j->ta)
            pack_rows_bf16(d, (size_t)mr, j->A + (size_t)k0 * j->lda + m0 + p, (size_t)j->lda, kc, rows);
        else
            pack_runs_bf16(d, (size_t)mr, lanes(mr), j->A + (size_t)(m0 + p) * j->lda + k0, (size_t)j->lda, rows, kc);
    }
}

/* Panel q of op(B), nr = 32 columns, pairs of k-major. */
BF16_TARGET static void pack_b_panel_bf16(uint32_t *dst, const gemm_job *j, int q, int k0, int kc, int nr) {
    int n0 = q * nr, cols = j->N - n0 < nr ? j->N - n0 : nr;
    if (j->tb)
        for (int c0 = 0; c0 < nr; c0 += 16)
            pack_runs_bf16(dst + c0, (size_t)nr, 0xffff, j->B + (size_t)(n0 + c0) * j->ldb + k0, (size_t)j->ldb,
                           cols - c0, kc);
    else
        pack_rows_bf16(dst, (size_t)nr, j->B + (size_t)k0 * j->ldb + n0, (size_t)j->ldb, kc, cols);
}

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

/* op(B) is packed once per call, in parallel, and shared by every thread (packing it per output
 * block cost up to half the time of the forward products), a chunk of K at a time, PACK_CHUNK
 * floats, so that what was packed is still in cache when the blocks read it: the weight
 * gradients (K of 5440, op(B) 11 MB) went 1.7× faster on the device host's Xeon with 2 MB
 * chunks than packed whole, before gemm_tn_slices took the smaller ones. A chunk ends where a
 * packed block of K does, so each element's sums run in the same order as in one piece. op(A)
 * is read where it lies by the fp32 kernels (run_block_inplace; Aᵀ with AVX-512 only), and
 * elsewhere packed by each block for itself. */
#define PACK_CHUNK ((size_t)512 << 10)
#define BPACK_CAP ((size_t)16 << 20) /* trm_gemm_cpu_rows: op(B) packed whole up to this */

typedef struct {
    const gemm_job *j;
    const arch *a;
    int mc, nc, mb, nb, npad; /* npad: N rounded up to whole panels */
    int bf;                   /* bf16 operands: k in pairs, 32 bits a pair */
    float *bp;
    int pack_a; /* op(A) packed by each block even where a kernel could read it in place */
} plan;

/* Packed words per k of a block of kc, and the offset of the block starting at k0. */
static int kwords(const plan *pl, int kc) { return pl->bf ? (kc + 1) / 2 : kc; }
static size_t kbase(const plan *pl, int k0) { return (size_t)(pl->bf ? k0 / 2 : k0) * pl->npad; }

/* Piece t of op(B)[kc0 .. kc0+klen) into pl->bp: block of K t / panels, panel t % panels.
 * pack_b_chunk shares the pieces among the threads; a slice of gemm_tn_slices packs its own. */
static void pack_b_piece(const plan *pl, int kc0, int klen, int t) {
    int nr = pl->a->nr, panels = pl->npad / nr, kb = t / panels, q = t % panels, k0 = kb * KC;
    int kc = klen - k0 < KC ? klen - k0 : KC;
    float *d = pl->bp + kbase(pl, k0) + (size_t)q * nr * kwords(pl, kc);
    if (pl->bf)
        pack_b_panel_bf16((uint32_t *)d, pl->j, q, kc0 + k0, kc, nr);
    else
        pack_b_panel(d, pl->j, q, kc0 + k0, kc, nr);
}

static int pack_b_pieces(const plan *pl, int klen) { return (klen + KC - 1) / KC * (pl->npad / pl->a->nr); }

static void pack_b_chunk(const plan *pl, int kc0, int klen) {
    int pieces = pack_b_pieces(pl, klen);
#pragma omp for schedule(dynamic)
    for (int t = 0; t < pieces; t++) pack_b_piece(pl, kc0, klen, t);
}

/* fp32 with op(A) read where it lies (fn: the arch's rows kernel, or its cols kernel for Aᵀ):
 * whole panels in place. A last partial panel is a whole one too where the block has MR rows:
 * the panel that ends with the block's last row, whose first rows (another panel's) are
 * computed again and not stored; the same sums, so the same bits as packing the partial
 * panel, which a block of fewer rows still does (packing a row or two cost attention's 85-row
 * products a tenth of their time). A panel of op(A) meets every panel of op(B) in turn: its rows
 * (12 × kc) stay in L1 while op(B)'s panels stream from L2. Column panel by column panel, the
 * block's rows were read again for each (from L2 where they passed L1), and the short-K products
 * ran ~20% slower (this EPYC, one thread: gate/up 5440 × 1024 × 128 79 → 95 GFLOP/s, the token
 * mixer's 8192 × 512 × 85 72 → 88). Each tile's sums are unchanged: the same bits. */
static void run_block_inplace(const plan *pl, ukernel_inplace fn, int m0, int mc, int n0, int nc, int kc0, int klen,
                              float *ap) {
    const gemm_job *j = pl->j;
    const arch *a = pl->a;
    int whole = mc / a->mr * a->mr, rem = mc - whole, overlap = rem && mc >= a->mr;
    size_t lda = (size_t)j->lda, step = j->ta ? 1 : lda; /* from one row of op(A) to the next */
    for (int k0 = 0; k0 < klen; k0 += KC) {
        int kc = klen - k0 < KC ? klen - k0 : KC, first = kc0 + k0 == 0;
        if (rem && !overlap) pack_a(ap, j, m0 + whole, rem, kc0 + k0, kc, a->mr);
        const float *bk = pl->bp + kbase(pl, k0);
        const float *ak = j->A + (j->ta ? (size_t)(kc0 + k0) * lda + m0 : (size_t)m0 * lda + kc0 + k0);
        for (int p = 0; p < mc; p += a->mr) /* each panel of op(A) against every panel of op(B) */
            for (int q = 0; q < nc; q += a->nr) {
                int nr = nc - q < a->nr ? nc - q : a->nr;
                const float *bq = bk + (size_t)(n0 + q) * kc;
                float *cq = j->C + (size_t)m0 * j->ldc + n0 + q;
                if (p < whole)
                    fn(kc, ak + p * step, lda, bq, cq + (size_t)p * j->ldc, j->ldc, 0, nr, j->alpha, j->beta, first);
                else if (overlap)
                    fn(kc, ak + (mc - a->mr) * step, lda, bq, cq + (size_t)(mc - a->mr) * j->ldc, j->ldc, a->mr - rem,
                       nr, j->alpha, j->beta, first);
                else
                    a->fn(kc, ap, bq, cq + (size_t)whole * j->ldc, j->ldc, rem, nr, j->alpha, j->beta, first);
            }
    }
}

static void run_block(const plan *pl, int m0, int mc, int n0, int nc, int kc0, int klen, float *ap) {
    const gemm_job *j = pl->j;
    const arch *a = pl->a;
    ukernel_inplace inplace = pl->bf || pl->pack_a ? NULL : j->ta ? a->cols : a->rows;
    if (inplace) {
        run_block_inplace(pl, inplace, m0, mc, n0, nc, kc0, klen, ap);
        return;
    }
    for (int k0 = 0; k0 < klen; k0 += KC) {
        int kc = klen - k0 < KC ? klen - k0 : KC;
        int kw = kwords(pl, kc);
        if (pl->bf)
            pack_a_bf16((uint32_t *)ap, j, m0, mc, kc0 + k0, kc, a->mr);
        else
            pack_a(ap, j, m0, mc, kc0 + k0, kc, a->mr);
        const float *bk = pl->bp + kbase(pl, k0);
        ukernel fn = pl->bf ? a->bf16 : a->fn;
        for (int p = 0; p < mc; p += a->mr) /* as run_block_inplace: op(A)'s panel stays in L1 */
            for (int q = 0; q < nc; q += a->nr)
                fn(kc, ap + (size_t)p * kw, bk + (size_t)(n0 + q) * kw, j->C + (size_t)(m0 + p) * j->ldc + n0 + q,
                      j->ldc, mc - p < a->mr ? mc - p : a->mr, nc - q < a->nr ? nc - q : a->nr, j->alpha, j->beta,
                      kc0 + k0 == 0);
    }
}

/* Block sizes: rows a multiple of the kernel's, columns of its width, as large as cache allows
 * (mcap × 512 for a block of K), then split until there are `want` blocks (about three a
 * thread), and evened out so no block is a sliver. */
#define MC_MAX 96 /* rows of a block of C */

static void choose_blocks(int M, int N, int mcap, long want, const arch *a, int *mc, int *nc) {
    int m = round_up(M < mcap ? M : mcap, a->mr), n = round_up(N < 512 ? N : 512, a->nr);
    while ((long)((M + m - 1) / m) * ((N + n - 1) / n) < want && (n > a->nr || m > a->mr)) {
        if ((m > 2 * a->mr && m >= n / 4) || n <= a->nr)
            m = round_up(m / 2, a->mr);
        else
            n = round_up(n / 2, a->nr);
    }
    int mb = (M + m - 1) / m, nb = (N + n - 1) / n;
    *mc = round_up((M + mb - 1) / mb, a->mr);
    *nc = round_up((N + nb - 1) / nb, a->nr);
}

/* Rows of a block of C for `threads` threads taking equal tasks (nb column blocks a row block)
 * in turn: the multiple of mr, at most cap and at least 2·mr (cap itself where it is smaller),
 * that gives the busiest thread the fewest rows (each task counted whole, the partial last one
 * too), a smaller block taken only where it saves 1% of them. 96-row blocks split 5440
 * rows into 57 tasks, 15 of which fell to one of 4 threads where 14.2 would be its share (8192
 * rows: 86 tasks, 6 rounds on 16 threads where 5.4 would do); 72-row blocks give 76 tasks, 19
 * rounds on 4 threads. The kernels' loops run each 12-row panel of op(A) against every panel of
 * op(B), so a smaller block costs no extra reads. A block's rows only split the tasks: every
 * element's sum, hence the bits, stays the same. */
static int balanced_rows(int M, int nb, int threads, int mr, int cap) {
    int best = cap;
    long best_rows = -1;
    for (int m = cap; m >= 2 * mr || m == cap; m -= mr) {
        long tasks = (long)((M + m - 1) / m) * nb, rows = (tasks + threads - 1) / threads * m;
        if (best_rows < 0 || rows * 100 < best_rows * 99) best = m, best_rows = rows;
    }
    return best;
}


/* ---- the weight gradients: Aᵀ·B with a long K, in slices of K ----
 * C (M×N, a weight's size) sums K = batch·tokens rows of A and B. Blocks of C that each run
 * down all of K (the general path) were the device host's slowest products: 4 threads reached
 * ~300 GFLOP/s where the others reach 420–480. Here a task is one slice of KS rows for one block
 * of C: it packs its rows of op(A) and of op(B) (each read once, along memory), or, where B is
 * narrow, run_slice_brows reads both where they lie; it writes the slice's partial block; the partials are
 * then summed in slice order. On the device host's Xeon (bench_gemm, medians of 5 alternating
 * rounds) the four weight gradients of tiny_mlp took 11.2 ms against 15.1 on 4 threads and 4.2
 * against 5.9 on 16. Slices of 256 or 1024 rows, blocks of 384 or 1024 rows and pack_at_12
 * fetching 0 or 32 rows ahead were no faster there (3 rounds).
 * KS is fixed, so the sums' order, hence the bits, do not depend on the thread count; they
 * differ from the general path's. */
#define KS 512                       /* rows of K a slice */
#define SPLIT_CAP ((size_t)32 << 20) /* bytes of partials; larger products take the general path */
#define MC_SPLIT 192                 /* rows of a block of C */

/* C = beta·C + alpha·(P_0 + P_1 + … + P_{S-1}) over rows [r0, r1), each sum in slice order. */
static void sum_slices(const gemm_job *j, const float *P, int S, int r0, int r1) {
    size_t mn = (size_t)j->M * j->N;
    for (int i = r0; i < r1; i++) {
        float *c = j->C + (size_t)i * j->ldc, acc[256];
        for (int x0 = 0; x0 < j->N; x0 += 256) {
            int w = j->N - x0 < 256 ? j->N - x0 : 256;
            const float *p = P + (size_t)i * j->N + x0;
            memcpy(acc, p, (size_t)w * sizeof(float));
            for (int s = 1; s < S; s++)
                for (int x = 0; x < w; x++) acc[x] += p[(size_t)s * mn + x];
            if (j->beta == 0.0f)
                for (int x = 0; x < w; x++) c[x0 + x] = j->alpha * acc[x];
            else
                for (int x = 0; x < w; x++) c[x0 + x] = j->beta * c[x0 + x] + j->alpha * acc[x];
        }
    }
}

/* One row of B (N values) into `panels` panels of nr columns, `step` floats apart, zeros past N
 * in the last: AVX-512's panels of 32 (the last by masked moves), AVX2's of 16. */
typedef void (*row_to_panels_fn)(float *o, const float *src, int N, int panels, size_t step);

__attribute__((target("avx512f"))) static void row_to_panels_32(float *o, const float *src, int N, int panels,
                                                                size_t step) {
    int last = (panels - 1) * 32;
    for (int q = 0; q < last; q += 32, o += step)
        _mm512_storeu_ps(o, _mm512_loadu_ps(src + q)), _mm512_storeu_ps(o + 16, _mm512_loadu_ps(src + q + 16));
    copy_32_avx512(o, src + last, lanes(N - last), lanes(N - last - 16));
}

__attribute__((target("avx2"))) static void row_to_panels_16(float *o, const float *src, int N, int panels,
                                                             size_t step) {
    int last = (panels - 1) * 16, c = 0;
    for (int q = 0; q < last; q += 16, o += step) copy_16_avx2(o, src + q);
    for (; c < N - last; c++) o[c] = src[last + c];
    for (; c < 16; c++) o[c] = 0.0f;
}

/* A slice's op(B) = B (fp32; gemm_tn_slices takes no other) into pl->bp, row by row of B: each
 * row is read once along memory and its columns go to every panel. Panel by panel
 * (pack_b_piece), the rows were read one panel's width at a time, ldb apart, for each panel
 * again, and the pack ran at a third of the rate (EPYC, one thread, the down weight's gradient:
 * 16% of its time). Same layout, so the same bits. */
static void pack_b_slice(const plan *pl, int klen) {
    const gemm_job *j = pl->j;
    int nr = pl->a->nr, panels = pl->npad / nr;
    row_to_panels_fn row = nr == 32 ? row_to_panels_32 : row_to_panels_16;
    for (int k0 = 0; k0 < klen; k0 += KC) {
        int kc = klen - k0 < KC ? klen - k0 : KC;
        float *d = pl->bp + kbase(pl, k0);
        for (int k = 0; k < kc; k++) row(d + (size_t)k * nr, j->B + (size_t)(k0 + k) * j->ldb, j->N, panels, (size_t)kc * nr);
    }
}

/* A slice's block with AVX-512 (j: the block as a product of its own, C its partial), both
 * operands read where they lie: op(A) = Aᵀ's 12-column panels (kernel_avx512_cols_brows), B's
 * whole 32-column panels; a last partial panel of B (N not a multiple of 32) is packed into bp
 * (KC × 32 floats) with zeros past N, and read by kernel_avx512_cols. A last partial panel of
 * op(A) is a whole one ending at the block's last row, its first rows (the previous panel's)
 * computed again and not stored; under 12 rows in all, it is packed into ap. Packing op(A) had
 * taken 15% of gate/up's 1024 × 128 gradient (this EPYC, one thread). run_block's loops in
 * run_block's order: the same bits as packing both operands. */
static void run_slice_brows(const gemm_job *j, const arch *a, float *ap, float *bp) {
    int whole = j->N / 32 * 32, rest = j->N - whole, mw = j->M / 12 * 12;
    size_t lda = (size_t)j->lda, ldb = (size_t)j->ldb;
    for (int k0 = 0; k0 < j->K; k0 += KC) {
        int kc = j->K - k0 < KC ? j->K - k0 : KC, first = k0 == 0;
        const float *bk = j->B + (size_t)k0 * ldb, *ak = j->A + (size_t)k0 * lda;
        if (rest)
            for (int k = 0; k < kc; k++)
                copy_32_avx512(bp + (size_t)k * 32, bk + (size_t)k * ldb + whole, lanes(rest), lanes(rest - 16));
        if (j->M < 12) { /* one short panel of op(A), packed */
            pack_a(ap, j, 0, j->M, k0, kc, 12);
            for (int q = 0; q < whole; q += 32)
                kernel_avx512_brows(kc, ap, bk + q, ldb, j->C + q, j->ldc, j->M, j->alpha, j->beta, first);
            if (rest) a->fn(kc, ap, bp, j->C + whole, j->ldc, j->M, rest, j->alpha, j->beta, first);
            continue;
        }
        for (int p = 0; p < j->M; p += 12) { /* op(A)'s panel against every panel of B */
            int c0 = p < mw ? p : j->M - 12, r0 = p - c0; /* the panel's first column of A, rows skipped */
            float *cp = j->C + (size_t)c0 * j->ldc;
            for (int q = 0; q < whole; q += 32)
                kernel_avx512_cols_brows(kc, ak + c0, lda, bk + q, ldb, cp + q, j->ldc, r0, j->alpha, j->beta,
                                         first);
            if (rest) kernel_avx512_cols(kc, ak + c0, lda, bp, cp + whole, j->ldc, r0, rest, j->alpha, j->beta, first);
        }
    }
}

/* Returns 0, having done nothing, where the product is not an Aᵀ·B in fp32 with K past one
 * slice, where its partials would pass SPLIT_CAP, or with TRM_CPU_SLICES=0 (the general path,
 * for A/B timings and for the tests of that path on long K). TRM_CPU_SLICES=packed packs A and
 * B where run_slice_brows would read them in place (the tests compare the two). */
static int gemm_tn_slices(const gemm_job *j, const arch *a, int threads) {
    int M = j->M, N = j->N, K = j->K, S = (K + KS - 1) / KS;
    size_t mn = (size_t)M * N;
    if (!j->ta || j->tb || S < 2 || (size_t)S * mn * sizeof(float) > SPLIT_CAP) return 0;
    const char *off = getenv("TRM_CPU_SLICES");
    if (off && !strcmp(off, "0")) return 0;
    int packed = off && !strcmp(off, "packed"); /* B packed even where it could be read in place */
    /* blocks as large as cache allows, the slices giving the threads their tasks; where they
     * give fewer than two a thread (11 slices of tiny's 5440 rows on 16 threads, five of which
     * had nothing to do), as many more blocks as make up two. Only the tasks change: each
     * element's sum runs over the same slices in the same order. */
    int mc, nc;
    choose_blocks(M, N, MC_SPLIT, (2L * threads + S - 1) / S, a, &mc, &nc);
    int mb = (M + mc - 1) / mc, nb = (N + nc - 1) / nc;
    int blocks = mb * nb, tasks = S * blocks, nt = threads > tasks ? tasks : threads;
    /* AVX-512 and B's rows short and whole vectors apart: read in place (run_slice_brows). On
     * rows 2 KiB apart (the down weight's 512-wide gradient) the kernel's loads missed L1
     * (1 thread: 87 → 74 GFLOP/s), and on mlp_t's 85-float rows they split cache lines. */
    int brows = a->nr == 32 && j->ldb <= 128 && j->ldb % 16 == 0 && !packed;
    float *P = trm_gemm_buffer((size_t)S * mn * sizeof(float));
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *ap = trm_gemm_buffer((size_t)mc * KC * sizeof(float));
        float *bp = trm_gemm_buffer((brows ? (size_t)KC * 32 : (size_t)KS * round_up(nc, a->nr)) * sizeof(float));
#pragma omp for schedule(dynamic)
        for (int t = 0; t < tasks; t++) {
            int s = t / blocks, b = t % blocks, m0 = (b % mb) * mc, n0 = (b / mb) * nc;
            int k0 = s * KS, len = K - k0 < KS ? K - k0 : KS;
            int bm = M - m0 < mc ? M - m0 : mc, bn = N - n0 < nc ? N - n0 : nc;
            /* the slice's block as a product of its own, into its partial */
            gemm_job sub = {1, 0, bm, bn, len, j->lda, j->ldb, N, 1.0f, 0.0f,
                            j->A + (size_t)k0 * j->lda + m0, j->B + (size_t)k0 * j->ldb + n0,
                            P + (size_t)s * mn + (size_t)m0 * N + n0};
            if (brows) {
                run_slice_brows(&sub, a, ap, bp);
                continue;
            }
            plan tp = {&sub, a, bm, bn, 1, 1, round_up(bn, a->nr), 0, bp, 1};
            pack_b_slice(&tp, len);
            run_block(&tp, 0, bm, 0, bn, 0, len, ap);
        }
        free(ap);
        free(bp);
        int rows = (M + nt - 1) / nt; /* the omp for's barrier above: every partial is written */
#pragma omp for schedule(static)
        for (int r0 = 0; r0 < M; r0 += rows) sum_slices(j, P, S, r0, r0 + rows < M ? r0 + rows : M);
    }
    free(P);
    return 1;
}

void trm_gemm_cpu(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc, int threads, int bf16) {
    if (bf16 && trm_gemm_amx(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threads)) return;
    arch arch_here = pick_arch(); /* a feature bit test: cheaper than keeping it anywhere */
    gemm_job j = {ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C};
    if (!bf16 && gemm_tn_slices(&j, &arch_here, threads)) return;
    plan pl = {&j, &arch_here, 0, 0, 0, 0, round_up(N, arch_here.nr), bf16 && arch_here.bf16, NULL, 0};
    choose_blocks(M, N, MC_MAX, threads > 1 ? 3L * threads : 1, &arch_here, &pl.mc, &pl.nc);
    pl.nb = (N + pl.nc - 1) / pl.nc;
    if (threads > 1) pl.mc = balanced_rows(M, pl.nb, threads, arch_here.mr, pl.mc);
    pl.mb = (M + pl.mc - 1) / pl.mc;
    int kchunk = K;
    if ((size_t)K * pl.npad > PACK_CHUNK) {
        kchunk = (int)(PACK_CHUNK / pl.npad) / KC * KC;
        if (kchunk < KC) kchunk = KC;
    }
    pl.bp = trm_gemm_buffer((size_t)kchunk * pl.npad * sizeof(float));
    int tasks = pl.mb * pl.nb, nt = threads > tasks ? tasks : threads;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *ap = trm_gemm_buffer((size_t)pl.mc * KC * sizeof(float)); /* ≤ 96 KiB a thread */
        for (int kc0 = 0; kc0 < K; kc0 += kchunk) {
            int klen = K - kc0 < kchunk ? K - kc0 : kchunk;
            pack_b_chunk(&pl, kc0, klen); /* ends with a barrier: B is whole before use */
#pragma omp for schedule(dynamic)
            for (int t = 0; t < tasks; t++) {
                int m0 = (t % pl.mb) * pl.mc, n0 = (t / pl.mb) * pl.nc;
                run_block(&pl, m0, M - m0 < pl.mc ? M - m0 : pl.mc, n0, N - n0 < pl.nc ? N - n0 : pl.nc, kc0, klen, ap);
            }
        }
        free(ap);
    }
    free(pl.bp);
}

int trm_gemm_cpu_available(void) { return 1; }
int trm_gemm_cpu_bf16(void) { return pick_arch().bf16 != NULL; }
int trm_gemm_cpu_lanes(void) { return pick_arch().nr / 2; } /* two vectors a kernel row */

/* ---- whole rows handed on: trm_gemm_cpu_rows ---- */

/* Floats of C one row block may span: with its packed A it stays in L2 for the callback. */
#define ROWS_CAP ((size_t)128 << 10)

/* Each block is one task of trm_gemm_cpu (run_block over all N columns, from the op(B) packed
 * once and shared), into C's rows or the thread's scratch; an element's sum is the same
 * wherever its block starts, so the bits equal trm_gemm_cpu's with alpha 1 and beta 0. */
int trm_gemm_cpu_rows(int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc,
                      int threads, int bf16, trm_gemm_rows_fn done, void *ctx) {
    arch arch_here = pick_arch();
    gemm_job j = {0, tb != 0, M, N, K, lda, ldb, ldc, 1.0f, 0.0f, A, B, C};
    plan pl = {&j, &arch_here, 0, N, 0, 1, round_up(N, arch_here.nr), bf16 && arch_here.bf16, NULL, 0};
    if (M < 1 || N < 1 || K < 1 || (size_t)K * pl.npad > BPACK_CAP) return 0; /* op(B) packed whole or not at all */
    if (bf16 && trm_gemm_amx_available()) return 0; /* trm_gemm_cpu's bf16 products are AMX's there */
    /* rows as trm_gemm_cpu's blocks (≤ MC_MAX), fewer while a block would pass ROWS_CAP or the
     * threads would have under three blocks each, then evened out */
    int mr = arch_here.mr, m = round_up(M < MC_MAX ? M : MC_MAX, mr);
    while (m > mr && (size_t)m * N > ROWS_CAP) m -= mr;
    long want = threads > 1 ? 3L * threads : 1;
    while (m > mr && (M + m - 1) / m < want) m = round_up(m / 2, mr);
    int mb = (M + m - 1) / m;
    pl.mc = round_up((M + mb - 1) / mb, mr);
    if (threads > 1) pl.mc = balanced_rows(M, 1, threads, mr, pl.mc);
    pl.mb = (M + pl.mc - 1) / pl.mc;
    int sld = round_up(N, 16) + 16; /* scratch rows: 64-byte aligned, not 4 KiB apart */
    pl.bp = trm_gemm_buffer((size_t)K * pl.npad * sizeof(float));
    int nt = threads > pl.mb ? pl.mb : threads;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *ap = trm_gemm_buffer((size_t)pl.mc * KC * sizeof(float));
        float *sc = C ? NULL : trm_gemm_buffer((size_t)pl.mc * sld * sizeof(float));
        pack_b_chunk(&pl, 0, K); /* ends with a barrier */
        gemm_job tj = j; /* this thread's block: A and C from its first row */
        plan tp = pl;
        tp.j = &tj;
#pragma omp for schedule(dynamic)
        for (int t = 0; t < pl.mb; t++) {
            int m0 = t * pl.mc, mc = M - m0 < pl.mc ? M - m0 : pl.mc;
            tj.A = A + (size_t)m0 * lda;
            tj.C = C ? C + (size_t)m0 * ldc : sc;
            tj.ldc = C ? ldc : sld;
            run_block(&tp, 0, mc, 0, N, 0, K, ap);
            done(ctx, m0, mc, tj.C, tj.ldc);
        }
        free(ap);
        free(sc);
    }
    free(pl.bp);
    return 1;
}

#else /* not x86-64: the BLAS does every product */

void trm_gemm_cpu(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc, int threads, int bf16) {
    (void)bf16;
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb, (void)beta;
    (void)C, (void)ldc, (void)threads;
    abort();
}
int trm_gemm_cpu_available(void) { return 0; }
int trm_gemm_cpu_bf16(void) { return 0; }
int trm_gemm_cpu_lanes(void) { return 0; }
int trm_gemm_cpu_rows(int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc,
                      int threads, int bf16, trm_gemm_rows_fn done, void *ctx) {
    (void)tb, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)C, (void)ldc, (void)threads;
    (void)bf16;
    (void)done, (void)ctx;
    return 0;
}

#endif
