/* exp_wide.h — exp_wide.c's entry points, without cpu.h's vector types (the tests include
 * this where they are not compiled for AVX2): y[i] = exp(a·x[i] + b) on 16-lane vectors, for
 * n ≥ 1 where the CPU has AVX-512, on 8 lanes by AVX2 intrinsics, which exp_affine takes on
 * other x86 CPUs, and through cpu.h's generic 8-lane loop (every other CPU; the tests' reference
 * for the bits). All three give the same bits. */
#ifndef TRM_EXP_WIDE_H
#define TRM_EXP_WIDE_H

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TRM_EXP_WIDE 1
void exp_affine_wide(float *y, const float *x, int n, float a, float b);
void exp_affine_avx2(float *y, const float *x, int n, float a, float b);
#else
#define TRM_EXP_WIDE 0
#endif
void exp_affine_8(float *y, const float *x, int n, float a, float b);

#endif
