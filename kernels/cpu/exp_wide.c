/* exp_wide.c — cpu.h's exp_affine on 16-lane vectors, for CPUs with AVX-512 (exp_affine hands
 * rows of 16 or more here when __builtin_cpu_supports says so): cpu.h's EXP_AFFINE_LOOP, the
 * 8-lane path's operations lane by lane, so the results are the same bits. Twice the lanes a
 * vector matter where the vector units are 512 bits wide (the device host's Xeon), and the exp
 * is most of the SwiGLU's and softmax's arithmetic. */
#include "cpu.h"

void exp_affine_8(float *y, const float *x, int n, float a, float b) { exp_affine_narrow(y, x, n, a, b); }

#if TRM_EXP_WIDE
typedef float vf16 __attribute__((vector_size(64)));
typedef int32_t vi16 __attribute__((vector_size(64)));

__attribute__((target("avx512f"))) void exp_affine_wide(float *y, const float *x, int n, float a, float b) {
    EXP_AFFINE_LOOP(vf16, vi16, 16)
}
#endif
