/* swiglu.c — SwiGLU on the [gate | up] GEMM output (rows × 2I → rows × I) and its backward, in
 * PyTorch's formulas, with the sigmoid's exp from cpu.h's vectorised exp; and the optional fused
 * ops gate_up_swiglu / gate_up_swiglu_bwd, which run the same row math on blocks of the gate/up
 * product (gemm_cpu.c's trm_gemm_cpu_rows) while they are in cache, so that the product reaches
 * memory only where it is kept, and down_swiglu_bwd, the backward's row math on blocks of the
 * down projection's input gradient. */
#include "cpu.h"
#include "gemm_cpu.h"

/* One row: o = silu(g)·u. */
static inline void swiglu_fwd_row(float *restrict o, const float *restrict g, const float *restrict u, int I) {
    exp_affine(o, g, I, -1.0f, 0.0f);
    for (int i = 0; i < I; i++) o[i] = (g[i] / (1.0f + o[i])) * u[i];
}

/* One row of the backward (PyTorch): du = dout·silu(g); dg = (dout·u)·σ·(1 + g·(1 − σ)); o (if
 * not NULL) the forward's output as swiglu_fwd_row computes it, silu(g)·u from the same quotient
 * g / (1 + e^−g) as du (one division less an element: the quotients cost a quarter of the row on
 * the device host's Xeon). Two copies of the loop, with and without o, so that each stays
 * vectorised. */
static inline void swiglu_bwd_row(float *restrict dg, float *restrict o, const float *restrict d,
                                  const float *restrict g, int I) {
    const float *restrict u = g + I;
    float *restrict du = dg + I;
    exp_affine(du, g, I, -1.0f, 0.0f);
    if (o)
        for (int i = 0; i < I; i++) {
            float e = 1.0f + du[i], s = g[i] / e, sig = 1.0f / e;
            o[i] = s * u[i];
            du[i] = d[i] * s;
            dg[i] = d[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig));
        }
    else
        for (int i = 0; i < I; i++) {
            float e = 1.0f + du[i], sig = 1.0f / e;
            du[i] = d[i] * (g[i] / e);
            dg[i] = d[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig));
        }
}

void cpu_swiglu_fwd(trm_backend *be, void *outv, const void *guv, int rows, int I) {
    float *out = outv;
    const float *gu = guv;
#pragma omp parallel for schedule(guided) if ((size_t)rows * I >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *g = gu + (size_t)r * 2 * I;
        swiglu_fwd_row(out + (size_t)r * I, g, g + I, I);
    }
}

void cpu_swiglu_bwd(trm_backend *be, void *dguv, void *outv, const void *doutv, const void *guv,
                    int rows, int I) {
    float *dgu = dguv, *out = outv;
    const float *dout = doutv, *gu = guv;
#pragma omp parallel for schedule(guided) if ((size_t)rows * I >= PAR_MIN)
    for (int r = 0; r < rows; r++)
        swiglu_bwd_row(dgu + (size_t)r * 2 * I, out ? out + (size_t)r * I : NULL, dout + (size_t)r * I,
                       gu + (size_t)r * 2 * I, I);
}

/* ---- fused with the gate/up product ------------------------------------------------------ */

typedef struct {
    float *act, *dgu; /* act: the forward's output (the backward's may be NULL); dgu: the backward's */
    const float *dact, *gu; /* down_rows: the product is dact, gu the forward's kept product */
    int I;
} gate_up_rows;

static void fwd_rows(void *ctx, int r0, int nrows, const float *gu, int ld) {
    const gate_up_rows *a = ctx;
    for (int r = 0; r < nrows; r++) {
        const float *g = gu + (size_t)r * ld;
        swiglu_fwd_row(a->act + (size_t)(r0 + r) * a->I, g, g + a->I, a->I);
    }
}

static void bwd_rows(void *ctx, int r0, int nrows, const float *gu, int ld) {
    const gate_up_rows *a = ctx;
    for (int r = 0; r < nrows; r++) {
        size_t row = (size_t)(r0 + r);
        swiglu_bwd_row(a->dgu + row * 2 * a->I, a->act ? a->act + row * a->I : NULL, a->dact + row * a->I,
                       gu + (size_t)r * ld, a->I);
    }
}

/* The down projection's input gradient dact, a block of rows at a time, straight into the
 * SwiGLU backward's rows (dact never reaches memory). */
static void down_rows(void *ctx, int r0, int nrows, const float *dact, int ld) {
    const gate_up_rows *a = ctx;
    for (int r = 0; r < nrows; r++) {
        size_t row = (size_t)(r0 + r);
        swiglu_bwd_row(a->dgu + row * 2 * a->I, a->act ? a->act + row * a->I : NULL, dact + (size_t)r * ld,
                       a->gu + row * 2 * a->I, a->I);
    }
}

/* The threads a fused pass's product runs on, as cpu_gemm's; 0 where the pass declines: weights
 * not fp32 (the cpu backend has no others), or trm's own GEMM not doing the products. */
static int fused_threads(int wdt) { return wdt == TRM_F32 ? cpu_own_gemm_threads() : 0; }

/* The product is the one cpu_gemm would run (fused_threads, bf16 as the backend says), so the
 * bits equal gemm then swiglu_fwd / swiglu_bwd. */
int cpu_gate_up_swiglu(trm_backend *be, void *act, void *gu, const void *x, int ldx, const void *W, int ldw,
                       int wdt, int rows, int I, int K) {
    int threads = fused_threads(wdt);
    if (!threads) return 0;
    gate_up_rows a = {act, NULL, NULL, NULL, I};
    return trm_gemm_cpu_rows(1, rows, 2 * I, K, x, ldx, W, ldw, gu, 2 * I, threads, be->use_bf16, fwd_rows, &a);
}

int cpu_gate_up_swiglu_bwd(trm_backend *be, void *dgu, void *act, const void *dact, const void *x, int ldx,
                           const void *W, int ldw, int wdt, int rows, int I, int K) {
    int threads = fused_threads(wdt);
    if (!threads) return 0;
    gate_up_rows a = {act, dgu, dact, NULL, I};
    return trm_gemm_cpu_rows(1, rows, 2 * I, K, x, ldx, W, ldw, NULL, 0, threads, be->use_bf16, bwd_rows, &a);
}

/* dact = dy·W (the down weight, K × I) as cpu_gemm would run it, then swiglu_bwd on each block of
 * its rows: the same bits as the two ops. Declined (0) as cpu_gate_up_swiglu. */
int cpu_down_swiglu_bwd(trm_backend *be, void *dgu, void *act, const void *dy, int ldy, const void *W, int ldw,
                        int wdt, const void *gu, int rows, int I, int K) {
    int threads = fused_threads(wdt);
    if (!threads) return 0;
    gate_up_rows a = {act, dgu, NULL, gu, I};
    return trm_gemm_cpu_rows(0, rows, I, K, dy, ldy, W, ldw, NULL, 0, threads, be->use_bf16, down_rows, &a);
}
