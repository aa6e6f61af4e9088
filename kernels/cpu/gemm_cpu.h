/* gemm_cpu.h — trm's own fp32 GEMM for the cpu backend (x86-64: AVX-512 or AVX2, chosen at run
 * time; elsewhere the BLAS does the products and trm_gemm_cpu_available() says 0). */
#ifndef TRM_GEMM_CPU_H
#define TRM_GEMM_CPU_H

/* C = alpha·op(A)·op(B) + beta·C, row-major, (M×K)(K×N); beta = 0 never reads C. K ≥ 1.
 * `threads` > 1 runs it on that many OpenMP threads (call it with 1 inside a parallel region).
 * Each element's sum has the same order for every thread count. bf16: operands rounded to
 * bf16, fp32 sums, where trm_gemm_cpu_bf16() (else fp32). */
void trm_gemm_cpu(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc, int threads, int bf16);
int trm_gemm_cpu_available(void);
int trm_gemm_cpu_bf16(void); /* the CPU has AVX512-BF16 (and TRM_CPU_GEMM does not say avx2) */

/* kernels/cpu/gemm_amx.c: the bf16 product (arguments as trm_gemm_cpu's) on AMX tiles; returns 0,
 * having done nothing, where the CPU or OS has no AMX (or TRM_CPU_AMX=0). */
int trm_gemm_amx(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc, int threads);
int trm_gemm_amx_available(void);

#endif
