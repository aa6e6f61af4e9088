/* swiglu.c — SwiGLU on the [gate | up] GEMM output (rows × 2I → rows × I) and its backward, in
 * PyTorch's formulas, with the sigmoid's exp from cpu.h's vectorised exp. */
#include "cpu.h"

void cpu_swiglu_fwd(trm_backend *be, void *outv, const void *guv, int rows, int I) {
    float *out = outv;
    const float *gu = guv;
#pragma omp parallel for schedule(guided) if ((size_t)rows * I >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *restrict g = gu + (size_t)r * 2 * I;
        const float *restrict u = g + I;
        float *restrict o = out + (size_t)r * I;
        exp_affine(o, g, I, -1.0f, 0.0f);
        for (int i = 0; i < I; i++) o[i] = (g[i] / (1.0f + o[i])) * u[i];
    }
}

/* PyTorch: du = dout·silu(g); dg = (dout·u)·σ·(1 + g·(1 − σ)). */
void cpu_swiglu_bwd(trm_backend *be, void *dguv, void *outv, const void *doutv, const void *guv,
                    int rows, int I) {
    float *dgu = dguv, *out = outv;
    const float *dout = doutv, *gu = guv;
#pragma omp parallel for schedule(guided) if ((size_t)rows * I >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *restrict g = gu + (size_t)r * 2 * I;
        const float *restrict u = g + I;
        const float *restrict d = dout + (size_t)r * I;
        float *restrict dg = dgu + (size_t)r * 2 * I;
        float *restrict du = dg + I;
        exp_affine(du, g, I, -1.0f, 0.0f);
        if (out) { /* the forward's output as cpu_swiglu_fwd computes it; a loop of its own, so
                    * that both loops stay vectorised */
            float *restrict o = out + (size_t)r * I;
            for (int i = 0; i < I; i++) o[i] = (g[i] / (1.0f + du[i])) * u[i];
        }
        for (int i = 0; i < I; i++) {
            float e = 1.0f + du[i];
            float sig = 1.0f / e;
            du[i] = d[i] * (g[i] / e);
            dg[i] = d[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig));
        }
    }
}
