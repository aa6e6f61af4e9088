/* exp_poly.h — exp's Cephes range reduction, polynomial and scaling, written once in the
 * common subset of C and GLSL: the cpu backend's generic vectorised exp (cpu.h, on 8-lane
 * vectors) and the mps shaders' exp_f (kernels/vulkan/common.glsl, glslc -I kernels/cpu) expand
 * the same text, so the backends compute exp the same way. exp_wide.c's x86 intrinsics write the
 * same steps and constants out by hand; test_exp_wide_bits holds them to cpu.h's bits. Only the rounding of x·log2 e to an
 * integer fx is each language's own (C adds 1.5·2²³, GLSL takes floor(· + 0.5)): at a halfway
 * point the two may pick neighbouring integers, and the polynomial is accurate for either r.
 * Macros rather than functions: one text has to serve float, vector and GLSL types. It lives
 * here because the cpu files may include only their own folder's headers by name
 * (tests/layout_check.sh); the shaders reach it through glslc's include path. */
#ifndef TRM_EXP_POLY_H
#define TRM_EXP_POLY_H

/* x is clamped to [EXP_X_MIN, EXP_X_MAX] first: exp(−104) rounds to 0 and ln(FLT_MAX) keeps
 * 2^fx finite. */
#define EXP_X_MIN (-104.0f)
#define EXP_X_MAX 88.72283f
#define EXP_LOG2E 1.44269504088896341f

/* r = x − fx·ln 2, ln 2 in two parts (Cody–Waite) so that fx times the first is exact. */
#define EXP_REDUCE(x, fx) ((x) - (fx) * 0.693359375f - (fx) * -2.12194440e-4f)

/* e^r for |r| ≤ ln 2 / 2, given z = r²: r + 1 + z·p(r), Horner from the highest coefficient.
 * z is the caller's so that it is computed before p, as it always was (the same SPIR-V). */
#define EXP_POLY(r, z)                                                                             \
    (((((((r) * 1.9875691500e-4f + 1.3981999507e-3f) * (r) + 8.3334519073e-3f) * (r) +             \
        4.1665795894e-2f) * (r) + 1.6666665459e-1f) * (r) + 5.0000001201e-1f) * (z) + (r) + 1.0f)

/* y·2^n for an integer n, applied in two halves (2^(n>>1) · 2^(n − (n>>1))) so that subnormal
 * results are right too; AS_FLOAT reinterprets the bits of an int as a float. */
#define EXP_SCALE(y, n, AS_FLOAT) \
    ((y) * AS_FLOAT((((n) >> 1) + 127) << 23) * AS_FLOAT((((n) - ((n) >> 1)) + 127) << 23))

#endif
