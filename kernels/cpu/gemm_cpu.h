/* gemm_cpu.h — trm's own fp32 GEMM for the cpu backend (x86-64: AVX-512 or AVX2, chosen at run
 * time; elsewhere the BLAS does the products and trm_gemm_cpu_available() says 0), and the same
 * products by blocks of whole rows handed to a callback (trm_gemm_cpu_rows). */
#ifndef TRM_GEMM_CPU_H
#define TRM_GEMM_CPU_H

#include <stddef.h>

/* C = alpha·op(A)·op(B) + beta·C, row-major, (M×K)(K×N); beta = 0 never reads C. K ≥ 1.
 * `threads` > 1 runs it on that many OpenMP threads (call it with 1 inside a parallel region).
 * Each element's sum has the same order for every thread count. bf16: operands rounded to
 * bf16, fp32 sums, where trm_gemm_cpu_bf16() (else fp32). */
void trm_gemm_cpu(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc, int threads, int bf16);
int trm_gemm_cpu_available(void);
int trm_gemm_cpu_bf16(void); /* the CPU has AVX512-BF16 (and TRM_CPU_GEMM does not say avx2) */
/* The floats in a vector of the kernels trm_gemm_cpu runs: 16 (AVX-512), 8 (AVX2, or
 * TRM_CPU_GEMM=avx2), 0 where it has none (not x86-64). */
int trm_gemm_cpu_lanes(void);

/* A 64-byte aligned work buffer of at least `bytes` for the GEMMs' packed operands; out of
 * memory ends the process with one message (nothing else could run either). */
void *trm_gemm_buffer(size_t bytes);

/* kernels/cpu/gemm_amx.c: the bf16 product (arguments as trm_gemm_cpu's) on AMX tiles; returns 0,
 * having done nothing, where the CPU or OS has no AMX (or TRM_CPU_AMX=0). */
int trm_gemm_amx(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc, int threads);
int trm_gemm_amx_available(void);

/* Receives rows r0 .. r0+nrows of C (row i at c + i·ldc), on the thread that computed them. */
typedef void (*trm_gemm_rows_fn)(void *ctx, int r0, int nrows, const float *c, int ldc);
/* C = A·op(B) for A (M×K, lda) and op(B) = Bᵀ with B (N×K, ldb) where tb, else B (K×N, ldb), by
 * blocks of whole rows, each block handed to `done` while in cache: written into C (ldc) or,
 * where C is NULL, into a scratch of the thread that computed it (valid during the call). The
 * same bits as trm_gemm_cpu(0, tb, …, alpha 1, beta 0) for any thread count; `done` runs once
 * per block, concurrently on `threads` OpenMP threads (it must not start parallel regions
 * itself). Returns 0, having done nothing, where it does not run: no own GEMM here, bf16
 * products where AMX takes them (trm_gemm_cpu hands those to trm_gemm_amx, whose sums run in
 * another order), K < 1, or B too large to pack whole. */
int trm_gemm_cpu_rows(int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc,
                      int threads, int bf16, trm_gemm_rows_fn done, void *ctx);

/* kernels/cpu/gemm_small.c: C (M×N, ldc) = alpha·op(A)·B + beta·C with op(A)'s element (m, k) at
 * A[m·sam + k·sak] and B (K×N) row-major (ldb), without packing: for attention's per-head
 * products, on vectors of `lanes` floats (trm_gemm_cpu_lanes(): the caller asks once, not a
 * product). The bits of trm_gemm_cpu on the same product (but for Aᵀ·B with K past 512, which
 * trm_gemm_cpu sums in slices), as the build contracts no product and sum into one FMA
 * (-std=c11: -ffp-contract=off). Returns 0, having done nothing, where lanes is neither 16 nor
 * 8 or N is not a multiple of 16. One thread. */
int trm_gemm_small(int lanes, int M, int N, int K, float alpha, const float *A, size_t sam, size_t sak,
                   const float *B, size_t ldb, float beta, float *C, size_t ldc);

#endif
