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
 * split them): the generic path, taken on CPUs other than x86-64 and the reference for the
 * bits of exp_wide.c's AVX-512 and AVX2 paths, which x86-64 takes. Cephes range reduction and
 * polynomial (exp_poly.h, shared with the mps shaders), ≈1 ulp on the normal range. NaN falls
 * through the clamps; x ≤ −104 gives 0 (exp(−104) rounds to 0) and x ≥ ln(FLT_MAX) gives
 * ≈FLT_MAX instead of inf, harmless for what it feeds (softmax of x − max ≤ 0, silu, sigmoid).
 * 2^n is applied in two halves so subnormal results are right too. */
typedef float vf8 __attribute__((vector_size(32)));
typedef int32_t vi8 __attribute__((vector_size(32)));

/* The loop of exp_affine on vectors of L floats (VF; VI the same-width ints): the generic
 * 8-lane path's (a macro of statements rather than a function, as it was when exp_wide.c
 * expanded it on 64-byte vectors too, which cannot be passed between functions without
 * changing the ABI). Each lane: the clamps as selects, the rounding of x·log2 e through the
 * 1.5·2²³ magic number (t's mantissa then holds the integer n), and exp_poly.h's reduction,
 * polynomial and scaling. */
#define EXP_AFFINE_LOOP(VF, VI, L)                                                              \
    for (int i = 0; i < n; i += L) {                                                           \
        int m_ = n - i < L ? n - i : L;                                                        \
        VF v_ = {0};                                                                           \
        if (m_ == L) /* a fixed size: a vector load rather than a call */                      \
            memcpy(&v_, x + i, sizeof v_);                                                     \
        else                                                                                   \
            memcpy(&v_, x + i, (size_t)m_ * sizeof(float));                                    \
        v_ = v_ * a + b;                                                                       \
        VF lo_ = (VF){0} + EXP_X_MIN, hi_ = (VF){0} + EXP_X_MAX;                               \
        VI c_ = v_ < lo_;                                                                      \
        v_ = (VF)(((VI)v_ & ~c_) | ((VI)lo_ & c_));                                            \
        c_ = v_ > hi_;                                                                         \
        VF xc_ = (VF)(((VI)v_ & ~c_) | ((VI)hi_ & c_));                                        \
        VF t_ = xc_ * EXP_LOG2E + 12582912.0f;                                                 \
        VI e_ = (VI)t_ - 0x4B400000;                                                           \
        VF fx_ = t_ - 12582912.0f;                                                             \
        VF r_ = EXP_REDUCE(xc_, fx_);                                                          \
        VF z_ = r_ * r_;                                                                       \
        VF p_ = EXP_POLY(r_, z_);                                                              \
        v_ = EXP_SCALE(p_, e_, (VF));                                                          \
        if (m_ == L)                                                                           \
            memcpy(y + i, &v_, sizeof v_);                                                     \
        else                                                                                   \
            memcpy(y + i, &v_, (size_t)m_ * sizeof(float));                                    \
    }

/* y[i] = exp(a·x[i] + b) on 8-lane vectors; y may equal x. */
static inline void exp_affine_narrow(float *y, const float *x, int n, float a, float b) {
    EXP_AFFINE_LOOP(vf8, vi8, 8)
}

/* exp_wide.c: the same steps in intrinsics, on 16 lanes where the CPU has AVX-512 and on 8 by
 * AVX2 elsewhere and for rows under 16 (x86-64 GCC or clang). */
#include "exp_wide.h"

/* y[i] = exp(a·x[i] + b); y may equal x. */
static inline void exp_affine(float *y, const float *x, int n, float a, float b) {
#if TRM_EXP_WIDE
    if (n >= 16 && __builtin_cpu_supports("avx512f")) {
        exp_affine_wide(y, x, n, a, b);
        return;
    }
    if (__builtin_cpu_supports("avx2")) {
        exp_affine_avx2(y, x, n, a, b);
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
/* dst (cols × rows) = srcᵀ (rows × cols), each with its own row stride; one thread. */
void cpu_transpose_block(float *dst, size_t ldd, const float *src, size_t lds, int rows, int cols);
void cpu_transpose(trm_backend *be, void *outv, int ldo, const void *inv, int ldi, int batch, int rows,
                   int cols);
void cpu_bias_fwd(trm_backend *be, float *y, const float *bias, int rows, int cols, int ld);
void cpu_bias_bwd(trm_backend *be, float *dbias, const float *dy, int rows, int cols, int ld);

/* rmsnorm.c */
void cpu_rmsnorm_fwd(trm_backend *be, void *yv, float *rstd, const void *xv,
                     const void *resv, int rows, int dim, int ld, float eps);
void cpu_rmsnorm_bwd(trm_backend *be, void *dxv, const void *dyv, const void *yv,
                     const float *rstd, int rows, int dim, int ld);
void cpu_rmsnorm_t_fwd(trm_backend *be, void *yv, float *rstd, const void *xv, const void *resv, int B, int T,
                       int Tp, int D, float eps);
void cpu_rmsnorm_t_bwd(trm_backend *be, void *dxv, const void *dyv, const void *yv, const float *rstd, int B,
                       int T, int Tp, int D);

/* swiglu.c */
void cpu_swiglu_fwd(trm_backend *be, void *outv, const void *guv, int rows, int I);
void cpu_swiglu_bwd(trm_backend *be, void *dguv, void *outv, const void *doutv, const void *guv,
                    int rows, int I);
int cpu_gate_up_swiglu(trm_backend *be, void *act, void *gu, const void *x, int ldx, const void *W, int ldw,
                       int wdt, int rows, int I, int K);
int cpu_gate_up_swiglu_bwd(trm_backend *be, void *dgu, void *act, const void *dact, const void *x, int ldx,
                           const void *W, int ldw, int wdt, int rows, int I, int K);
int cpu_down_swiglu_bwd(trm_backend *be, void *dgu, void *act, const void *dy, int ldy, const void *W, int ldw,
                        int wdt, const void *gu, int rows, int I, int K);

/* rope.c */
void cpu_rope_fwd(trm_backend *be, void *qkv, const float *cos, const float *sin, int B,
                  int T, int H, int hd);
void cpu_rope_bwd(trm_backend *be, void *dqkv, const float *cos, const float *sin, int B,
                  int T, int H, int hd);
void cpu_rope_rows(float *x, size_t ld, const float *cos, const float *sin, int t0, int n, int hd, int transpose);

/* attention.c */
void cpu_attention_fwd(trm_backend *be, void *outv, float *lse, const void *qkvv, int B,
                       int T, int H, int hd);
void cpu_attention_bwd(trm_backend *be, void *dqkvv, const void *doutv, const void *qkvv,
                       const void *outv, const float *lse, int B, int T, int H, int hd);
void cpu_attention_bwd_rope(trm_backend *be, void *dqkv, const void *dout, const void *qkv,
                            const void *out, const float *lse, const float *cos,
                            const float *sin, int B, int T, int H, int hd);
int cpu_attention_fwd_rope(trm_backend *be, void *out, float *lse, void *qkv, const float *cos, const float *sin,
                           int B, int T, int H, int hd, int keep);

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
