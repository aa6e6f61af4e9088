/* cpu.h — what the files of the cpu backend share (internal to kernels/cpu): the context, the
 * OpenMP helpers, the vectorised exp behind softmax and SiLU, the GEMM that attention calls
 * per head, and the op functions the table in backend_cpu.c points to, one file per op
 * family as in kernels/cuda. Ops are OpenMP loops over rows whose inner loops gcc can
 * vectorise. Numerics follow SPEC.md §2–5 (the float32 PyTorch reference): where PyTorch
 * rounds to float we round to float, where it works in double we do too. */
#ifndef TRM_KERNELS_CPU_H
#define TRM_KERNELS_CPU_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend/backend.h"
#include "dist/dist.h"
#include "exp_poly.h"

/* Below this many elements a parallel region costs more than the loop itself. */
#define PAR_MIN 32768

typedef struct {
    float *scratch; /* per-call workspace, grown on demand; ops are called from one thread */
    size_t scratch_floats;
    trm_dist *dist; /* the run's process group once comm_init ran (MPI data plane) */
} cpu_ctx;

static inline int max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static inline int thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* ---- a vectorised exp ------------------------------------------------------------------
 * glibc only offers SIMD expf under -ffast-math, which we refuse (it would break the float32
 * agreement elsewhere), and under -ftrapping-math gcc will not if-convert a scalar expf's
 * clamps, so this is written with GCC/clang vector extensions (8 lanes; narrower targets
 * split them). Cephes range reduction and polynomial (exp_poly.h, shared with the mps
 * shaders), ≈1 ulp on the normal range. NaN falls through the clamps; x ≤ −104 gives 0
 * (exp(−104) rounds to 0) and x ≥ ln(FLT_MAX) gives ≈FLT_MAX instead of inf, harmless for
 * what it feeds (softmax of x − max ≤ 0, silu, sigmoid). 2^n is applied in two halves so
 * subnormal results are right too. */
typedef float vf8 __attribute__((vector_size(32)));
typedef int32_t vi8 __attribute__((vector_size(32)));

static inline vf8 vf8_clamp(vf8 x, float lo, float hi) {
    vf8 vlo = {lo, lo, lo, lo, lo, lo, lo, lo}, vhi = {hi, hi, hi, hi, hi, hi, hi, hi};
    vi8 m = x < vlo;
    x = (vf8)(((vi8)x & ~m) | ((vi8)vlo & m));
    m = x > vhi;
    return (vf8)(((vi8)x & ~m) | ((vi8)vhi & m));
}

/* The bits of 8 ints as 8 floats (EXP_SCALE's reinterpretation). */
#define VF8_FROM_BITS(v) ((vf8)(v))

static inline vf8 vexp8(vf8 x) {
    const float magic = 12582912.0f; /* 1.5·2²³: adding it rounds to an integer */
    vf8 xc = vf8_clamp(x, EXP_X_MIN, EXP_X_MAX);
    vf8 t = xc * EXP_LOG2E + magic;
    vi8 n = (vi8)t - 0x4B400000; /* the integer in t's mantissa */
    vf8 fx = t - magic;
    vf8 r = EXP_REDUCE(xc, fx);
    vf8 z = r * r;
    vf8 y = EXP_POLY(r, z);
    return EXP_SCALE(y, n, VF8_FROM_BITS);
}

/* y[i] = exp(a·x[i] + b) on 8-lane vectors; y may equal x. */
static inline void exp_affine_narrow(float *y, const float *x, int n, float a, float b) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        vf8 v;
        memcpy(&v, x + i, sizeof v);
        v = vexp8(v * a + b);
        memcpy(y + i, &v, sizeof v);
    }
    if (i < n) {
        vf8 v = {0};
        memcpy(&v, x + i, (size_t)(n - i) * sizeof(float));
        v = vexp8(v * a + b);
        memcpy(y + i, &v, (size_t)(n - i) * sizeof(float));
    }
}

/* exp_wide.c: the same on 16-lane vectors, where the CPU has AVX-512 (x86-64 GCC or clang). */
#include "exp_wide.h"

/* y[i] = exp(a·x[i] + b); y may equal x. */
static inline void exp_affine(float *y, const float *x, int n, float a, float b) {
#if TRM_EXP_WIDE
    if (n >= 16 && __builtin_cpu_supports("avx512f")) {
        exp_affine_wide(y, x, n, a, b);
        return;
    }
#endif
    exp_affine_narrow(y, x, n, a, b);
}

/* ---- backend_cpu.c ------------------------------------------------------------------------ */

/* The context's scratch, at least `floats` long (contents not kept). */
float *cpu_scratch(trm_backend *be, size_t floats);

/* One fp32 (or, with bf16, bf16-operand) product, row-major, C = alpha·op(A)·op(B) + beta·C:
 * trm's own GEMM or the BLAS, single-threaded inside a parallel region. */
void cpu_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc, int bf16);

/* The threads trm's own GEMM (gemm_cpu.c) runs a product on from here (1 inside a parallel
 * region), or 0 where it does not do the products (not built, or TRM_CPU_GEMM=blas). */
int cpu_own_gemm_threads(void);

/* ---- the ops of the table (trm/backend/backend.h), by family ------------------------------- */

/* elementwise.c */
void cpu_add(trm_backend *be, void *yv, const void *x1v, const void *x2v, size_t n);
void cpu_axpy(trm_backend *be, void *yv, const void *xv, float alpha, size_t n);
void cpu_transpose(trm_backend *be, void *outv, int ldo, const void *inv, int ldi, int batch, int rows,
                   int cols);
void cpu_bias_fwd(trm_backend *be, float *y, const float *bias, int rows, int cols, int ld);
void cpu_bias_bwd(trm_backend *be, float *dbias, const float *dy, int rows, int cols, int ld);

/* rmsnorm.c */
void cpu_rmsnorm_fwd(trm_backend *be, void *yv, float *rstd, const void *xv,
                     const void *resv, int rows, int dim, int ld, float eps);
void cpu_rmsnorm_bwd(trm_backend *be, void *dxv, const void *dyv, const void *yv,
                     const float *rstd, int rows, int dim, int ld);

/* swiglu.c */
void cpu_swiglu_fwd(trm_backend *be, void *outv, const void *guv, int rows, int I);
void cpu_swiglu_bwd(trm_backend *be, void *dguv, void *outv, const void *doutv, const void *guv,
                    int rows, int I);
int cpu_gate_up_swiglu(trm_backend *be, void *act, void *gu, const void *x, int ldx, const void *W, int ldw,
                       int wdt, int rows, int I, int K);
int cpu_gate_up_swiglu_bwd(trm_backend *be, void *dgu, void *act, const void *dact, const void *x, int ldx,
                           const void *W, int ldw, int wdt, int rows, int I, int K);

/* rope.c */
void cpu_rope_fwd(trm_backend *be, void *qkv, const float *cos, const float *sin, int B,
                  int T, int H, int hd);
void cpu_rope_bwd(trm_backend *be, void *dqkv, const float *cos, const float *sin, int B,
                  int T, int H, int hd);

/* attention.c */
void cpu_attention_fwd(trm_backend *be, void *outv, float *lse, const void *qkvv, int B,
                       int T, int H, int hd);
void cpu_attention_bwd(trm_backend *be, void *dqkvv, const void *doutv, const void *qkvv,
                       const void *outv, const float *lse, int B, int T, int H, int hd);
void cpu_attention_bwd_rope(trm_backend *be, void *dqkv, const void *dout, const void *qkv,
                            const void *out, const float *lse, const float *cos,
                            const float *sin, int B, int T, int H, int hd);

/* embed.c */
void cpu_embed_fwd(trm_backend *be, void *outv, const trm_embed_args *a);
void cpu_embed_bwd(trm_backend *be, const void *doutv, const trm_embed_args *a,
                   float *d_tok_w, float *d_pos_w, float *d_puz_rows);

/* loss.c */
void cpu_loss_head(trm_backend *be, const trm_loss_args *a);

/* act.c */
void cpu_act_reset(trm_backend *be, int B, int T, int D, int S, const uint8_t *halted,
                   void *zHv, void *zLv, const float *H_init, const float *L_init,
                   int32_t *steps, int32_t *cur_inputs, int32_t *cur_labels,
                   int32_t *cur_pid, const int32_t *new_inputs, const int32_t *new_labels,
                   const int32_t *new_pid);
void cpu_act_update(trm_backend *be, int B, int32_t *steps, uint8_t *halted,
                    const float *q, int halt_max_steps, int training,
                    int no_act_continue, float explore_prob, uint64_t seed,
                    uint64_t sample0, const uint64_t *rng_step);
void cpu_q_target(trm_backend *be, int B, float *target, const float *q_next,
                  const int32_t *steps, int halt_max_steps);

/* optim.c */
void cpu_adam_atan2(trm_backend *be, float *p, const float *g, float *m, float *v, size_t n,
                    float lr, float wd, float beta1, float beta2, int64_t t);
void cpu_sign_sgd_sparse(trm_backend *be, float *weights, int ndim, const int32_t *ids,
                         const float *grad_rows, int n, float lr, float wd);
void cpu_ema(trm_backend *be, float *shadow, const float *p, size_t n, float rate);

#endif
