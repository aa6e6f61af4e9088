/* exp_wide.c — cpu.h's exp_affine on 16-lane vectors, for CPUs with AVX-512 (exp_affine hands
 * rows of 16 or more here when __builtin_cpu_supports says so). Each lane runs vexp8's
 * operations in vexp8's order, so the results are the same bits; twice the lanes a vector
 * matter where the vector units are 512 bits wide (the device host's Xeon), and the exp is
 * most of the SwiGLU's and softmax's arithmetic. One function with the arithmetic written out:
 * 64-byte vectors passed between functions would change the ABI under -Wpsabi. */
#include "cpu.h"

void exp_affine_8(float *y, const float *x, int n, float a, float b) { exp_affine_narrow(y, x, n, a, b); }

#if TRM_EXP_WIDE
typedef float vf16 __attribute__((vector_size(64)));
typedef int32_t vi16 __attribute__((vector_size(64)));

#define VF16_FROM_BITS(v) ((vf16)(v))
#define SPLAT16(c) {c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c}

__attribute__((target("avx512f"))) void exp_affine_wide(float *y, const float *x, int n, float a, float b) {
    const vf16 lo = SPLAT16(EXP_X_MIN), hi = SPLAT16(EXP_X_MAX);
    const float magic = 12582912.0f; /* 1.5·2²³: adding it rounds to an integer */
    for (int i = 0; i < n; i += 16) {
        int m = n - i < 16 ? n - i : 16;
        vf16 v = {0};
        if (m == 16) /* a fixed size, so a vector load rather than a call */
            memcpy(&v, x + i, sizeof v);
        else
            memcpy(&v, x + i, (size_t)m * sizeof(float));
        v = v * a + b;
        vi16 c = v < lo; /* vf8_clamp's selects */
        v = (vf16)(((vi16)v & ~c) | ((vi16)lo & c));
        c = v > hi;
        vf16 xc = (vf16)(((vi16)v & ~c) | ((vi16)hi & c));
        vf16 t = xc * EXP_LOG2E + magic;
        vi16 e = (vi16)t - 0x4B400000;
        vf16 fx = t - magic;
        vf16 r = EXP_REDUCE(xc, fx);
        vf16 z = r * r;
        vf16 p = EXP_POLY(r, z);
        v = EXP_SCALE(p, e, VF16_FROM_BITS);
        if (m == 16)
            memcpy(y + i, &v, sizeof v);
        else
            memcpy(y + i, &v, (size_t)m * sizeof(float));
    }
}
#endif
