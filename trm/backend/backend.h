/* backend.h — the device interface the model calls without knowing the device (after
 * ggml-backend): memory, GEMM, the elementwise and fused ops with their backwards side by
 * side, attention, the loss head, ACT bookkeeping and optimiser updates. Every pointer an
 * op takes is device memory of that backend; all layouts are row-major and contiguous
 * unless a leading dimension / stride says otherwise. Weights, their gradients, optimiser
 * state and the small per-row tensors (logits, q, norm and softmax statistics) are fp32.
 * Activations — the (B,T,·) tensors of the recursion, the carry states included — are
 * `void *` in the backend's activation type `act_dt`: fp32, or bf16 where a backend keeps
 * them so (caps.bf16_acts) in a bf16 run, which halves their memory and the bytes every pass
 * moves. A backend with bf16 support runs its GEMMs in bf16 when `use_bf16` is set. */
#ifndef TRM_BACKEND_H
#define TRM_BACKEND_H
#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

typedef struct {
    int compile;        /* can plan/capture the step (fusion, arena, graphs) */
    int distributed;    /* can all-reduce across processes */
    int bf16;           /* can run matmuls in bfloat16 */
    int unified_memory; /* host and device share memory */
    int bf16_acts;      /* in bf16 runs, keeps activations in bf16 (act_dt = TRM_BF16) */
} trm_caps;

/* Element types of device tensors. */
typedef enum { TRM_F32 = 0, TRM_BF16 = 1 } trm_dtype;

/* The element types of a GEMM's A, B and C. */
typedef struct {
    uint8_t a, b, c;
} trm_gemm_dt;

/* The capabilities of every backend trm knows, compiled in or not (mps: the Metal-style
 * backend, Vulkan compute; an instance on a discrete GPU says unified_memory 0). The registry
 * and the policy (device.c) both take them from here. */
#ifdef TRM_HAVE_MPI
#define TRM_CPU_DISTRIBUTED 1 /* through MPI */
#else
#define TRM_CPU_DISTRIBUTED 0
#endif
/* cpu: bf16 where the CPU has AVX512-BF16 (trm_cpu_caps_here) */
#define TRM_CAPS_CPU {.compile = 0, .distributed = TRM_CPU_DISTRIBUTED, .bf16 = 0, .unified_memory = 1, .bf16_acts = 0}
#define TRM_CAPS_CUDA {.compile = 1, .distributed = 1, .bf16 = 1, .unified_memory = 0, .bf16_acts = 1}
#define TRM_CAPS_MPS {.compile = 0, .distributed = 0, .bf16 = 0, .unified_memory = 1, .bf16_acts = 0}

/* Metrics accumulated by the loss head, in this order (sums over the batch). */
enum {
    TRM_M_COUNT,
    TRM_M_ACCURACY,
    TRM_M_EXACT_ACCURACY,
    TRM_M_Q_HALT_ACCURACY,
    TRM_M_STEPS,
    TRM_M_LM_LOSS,
    TRM_M_Q_HALT_LOSS,
    TRM_M_Q_CONTINUE_LOSS,
    TRM_NMETRICS
};

enum { TRM_LOSS_STABLEMAX = 0, TRM_LOSS_SOFTMAX = 1 };

typedef struct {
    int B, S, V;
    int P;                    /* leading rows of each sample in logits/dlogits to skip (puzzle
                               * positions): logits and dlogits are (B, P+S, V), dlogits rows
                               * t < P are written as zeros */
    int loss_type;            /* TRM_LOSS_* */
    const float *logits;      /* B*(P+S)*V */
    const int32_t *labels;    /* B*S, -100 = ignore */
    const float *q;           /* B*2: q_halt, q_continue */
    const float *q_target;    /* B target for q_continue (sigmoid already applied) or NULL */
    const uint8_t *halted;    /* B, after this step's halting decision */
    const int32_t *steps;     /* B, after this step's increment */
    float grad_scale;         /* gradient of loss*grad_scale (1/global_batch); unused w/o grads */
    float *dlogits;           /* B*(P+S)*V or NULL (no gradient) */
    float *dq;                /* B*2 or NULL */
    int32_t *preds;           /* B*S argmax, or NULL */
    double *metrics;          /* TRM_NMETRICS, accumulated (+=) */
} trm_loss_args;

typedef struct {
    int B, S, P, D;           /* tokens per row S, puzzle positions P, T = P + S */
    const int32_t *tokens;    /* B*S */
    const float *tok_w;       /* V*D */
    const int32_t *puzzle_ids;/* B (or NULL when ndim == 0) */
    const float *puz_w;       /* num_ids*ndim (forward gathers rows by id) */
    int ndim;                 /* puzzle embedding width (0 = none); padded with zeros to P*D */
    const float *pos_w;       /* T*D learned positions, or NULL */
    float scale;              /* sqrt(D) */
    int V;                    /* rows of tok_w (token ids outside [0, V) get no gradient) */
} trm_embed_args;

/* How a backend drives its device, counted since the instance was made (the optional op
 * stream_stats; mps fills it): kernels launched, pipeline barriers recorded, command batches
 * handed to the queue, host waits on the device (fences), and the host time spent recording
 * commands and blocked in those waits (monotonic clock). A caller takes the difference of two
 * readings; trm bench prints it per step. */
typedef struct {
    uint64_t dispatches, barriers, submits, waits;
    double record_ms, wait_ms;
} trm_stream_stats;

typedef struct trm_backend trm_backend;
struct trm_dist;
struct trm_backend {
    const char *name;
    trm_caps caps;
    int use_bf16; /* set by policy when forward_dtype=bfloat16 and caps.bf16 (trm_backend_set_bf16) */
    int act_dt;   /* trm_dtype of activations: TRM_BF16 when use_bf16 and caps.bf16_acts */
    int tune_gemms; /* the compile stage asks GEMM algorithms to be chosen by timing them */
    size_t max_alloc; /* the largest single allocation the device allows; 0: no limit but memory */
    void *ctx;

    void (*destroy)(trm_backend *b);
    /* ---- memory ---- */
    void *(*alloc)(trm_backend *b, size_t bytes); /* zero-filled; NULL on failure */
    void (*free)(trm_backend *b, void *p);
    void (*to_device)(trm_backend *b, void *dst, const void *src, size_t bytes);
    void (*to_host)(trm_backend *b, void *dst, const void *src, size_t bytes);
    void (*copy)(trm_backend *b, void *dst, const void *src, size_t bytes);
    void (*zero)(trm_backend *b, void *p, size_t bytes);
    void (*sync)(trm_backend *b);

    /* ---- GEMM: C[i] = alpha*op(A[i])*op(B[i]) + beta*C[i] for i < batch, with element strides
     * sA, sB, sC between matrices (0: the same matrix for every i); op(X) = Xᵀ when the t flag
     * is set. (M×K)(K×N) → M×N. dt gives the element types of A, B and C (all TRM_F32 on a
     * backend without bf16_acts); the products are bf16 with fp32 sums when use_bf16. */
    void (*gemm)(trm_backend *b, trm_gemm_dt dt, int ta, int tb, int M, int N, int K, float alpha,
                 const void *A, int lda, int64_t sA, const void *B, int ldb, int64_t sB,
                 float beta, void *C, int ldc, int64_t sC, int batch);

    /* ---- elementwise, on activations (act_dt) ---- */
    void (*add)(trm_backend *b, void *y, const void *x1, const void *x2, size_t n); /* y=x1+x2 */
    void (*axpy)(trm_backend *b, void *y, const void *x, float alpha, size_t n);    /* y+=a*x */
    /* out[b][j][i] = in[b][i][j] for in of shape (batch, rows, cols) with rows ldi apart (and
     * batch·rows·ldi between matrices), out (batch, cols, rows) with rows ldo ≥ rows apart; the
     * ldo − rows elements past each out row are written as zeros. */
    void (*transpose)(trm_backend *b, void *out, int ldo, const void *in, int ldi, int batch, int rows, int cols);
    /* y = rms(x + res) over the first `dim` elements of rows `ld` apart (res may be NULL);
     * rstd[r] (fp32) saved; the ld − dim elements past each row of y are written as zeros. */
    void (*rmsnorm_fwd)(trm_backend *b, void *y, float *rstd, const void *x, const void *res,
                        int rows, int dim, int ld, float eps);
    /* dx = rstd*(dy - y*mean(dy*y)) — the gradient w.r.t. (x + res); layout as the forward. */
    void (*rmsnorm_bwd)(trm_backend *b, void *dx, const void *dy, const void *y,
                        const float *rstd, int rows, int dim, int ld);
    /* gu: rows×2I ([g | u]); out: rows×I = silu(g)*u. */
    void (*swiglu_fwd)(trm_backend *b, void *out, const void *gu, int rows, int I);
    /* dgu from dout; out (may be NULL) gets the forward's silu(g)·u again in the same pass (the
     * backward recomputes it rather than keep it, and the weight gradient after it reads it). */
    void (*swiglu_bwd)(trm_backend *b, void *dgu, void *out, const void *dout, const void *gu, int rows, int I);
    /* Optional (NULL where the backend has none): act (rows × I) = SwiGLU(x·Wᵀ) for x (rows × K,
     * rows ldx apart) and the gate/up weight W (2I × K, rows ldw apart, type wdt) in one pass,
     * writing the product x·Wᵀ to gu (rows × 2I) only when gu is not NULL (the backward's
     * input). Returns 0, having done nothing, where it does not fuse this shape or these types;
     * the caller then runs gemm and swiglu_fwd. */
    int (*gate_up_swiglu)(trm_backend *b, void *act, void *gu, const void *x, int ldx, const void *W, int ldw,
                          int wdt, int rows, int I, int K);
    /* Optional: swiglu_bwd (out = act) with gu computed again as x·Wᵀ inside the pass instead of
     * read (recompute=gate_up); arguments as gate_up_swiglu's. Returns 0, having done nothing,
     * where it does not fuse this shape; the caller then runs gate_up_swiglu (or gemm) with gu and
     * swiglu_bwd. */
    int (*gate_up_swiglu_bwd)(trm_backend *b, void *dgu, void *act, const void *dact, const void *x, int ldx,
                              const void *W, int ldw, int wdt, int rows, int I, int K);
    /* Optional (cpu; cuda on Hopper, bf16): swiglu_bwd on dact = dy·W, the down projection's
     * input gradient, computed in the same pass and never written: dy (rows × K, rows ldy apart), W the down weight (K × I,
     * rows ldw apart, type wdt), gu (rows × 2I) the forward's kept product; dgu and out as
     * swiglu_bwd's. Returns 0, having done nothing, where it does not fuse this shape or these
     * types; the caller then runs gemm and swiglu_bwd. */
    int (*down_swiglu_bwd)(trm_backend *b, void *dgu, void *out, const void *dy, int ldy, const void *W, int ldw,
                           int wdt, const void *gu, int rows, int I, int K);
    /* Optional: attention_bwd, then rope_bwd on its dq and dk, in one pass where the backend can (cuda's
     * flash kernels rotate the gradients on their way out: one pass over dq and dk fewer). */
    void (*attention_bwd_rope)(trm_backend *b, void *dqkv, const void *dout, const void *qkv,
                               const void *out, const float *lse, const float *cos,
                               const float *sin, int B, int T, int H, int hd);
    /* Optional: rope_fwd then attention_fwd in one pass where the backend can (cuda's Hopper flash
     * forward, where one block holds a head's rows, rotates q and k in shared memory; cpu's tasks
     * each rotate their head's while it is in cache). With keep, qkv's q and k are left
     * rotated, as rope_fwd leaves them, for the backward; without, they may be left either way
     * (the caller reads them no more). Returns 0, having done nothing, where it does not take the
     * call; the caller then runs the two ops. */
    int (*attention_fwd_rope)(trm_backend *b, void *out, float *lse, void *qkv, const float *cos, const float *sin,
                              int B, int T, int H, int hd, int keep);
    /* Optional (a Hopper kernel): mlp_t's token mixer for a call whose activations the backward
     * does not read, on (B, T, D) rows with no transposes: y = (rms(xᵀ + SwiGLU(xᵀ·W_guᵀ)·W_dnᵀ))ᵀ
     * over the T positions, rstd (B·D, fp32) saved, where xᵀ is x as (B, D, Tp) rows (zeros past
     * T), W_gu the gate/up weight (2It × Tp, rows ldgu apart) and W_dn the down weight (Tp × It,
     * rows lddn apart), both of type wdt — what transpose, gate_up_swiglu, gemm, rmsnorm_fwd and
     * transpose compute, with the same roundings. Returns 0, having done nothing, where it does
     * not take the shape or types; the caller then runs those ops. */
    int (*token_mlp_fwd)(trm_backend *b, void *y, float *rstd, const void *x, const void *Wgu, int ldgu,
                         const void *Wdn, int lddn, int wdt, int B, int T, int Tp, int D, int It, float eps);
    /* Optional (a Hopper kernel): y = rms(res + x·Wᵀ) over D, rstd saved unless NULL — linear (gemm,
     * product rounded to the activation type) then rmsnorm_fwd(y, rstd, res, product) in one pass,
     * the norm in the product's epilogue; y may be res. x is rows × K (rows ldx apart), W is D × K,
     * rows ldw apart, type wdt; y and res are rows × D, rows D apart. Returns 0, having done
     * nothing, where it does not take the shape or types; the caller then runs gemm and
     * rmsnorm_fwd. */
    int (*linear_norm_fwd)(trm_backend *b, void *y, float *rstd, const void *res, const void *x, int ldx,
                           const void *W, int ldw, int wdt, int rows, int K, int D, float eps);
    /* Optional (a Hopper kernel): qkv = x·Wᵀ (B·T rows × 3H·hd, rows 3H·hd apart), then rope_fwd on
     * its q and k heads (tables cos, sin: T × hd, fp32), the rotation in the product's epilogue:
     * linear (the product rounded to the activation type) then rope_fwd, with the same roundings.
     * x is B·T × K (rows ldx apart), W is 3H·hd × K, rows ldw apart, type wdt. Returns 0, having
     * done nothing, where it does not take the shape or types (cuda: where the attention forward
     * rotates q and k itself, T ≤ 128); the caller then runs the two. */
    int (*qkv_rope_fwd)(trm_backend *b, void *qkv, const void *x, int ldx, const void *W, int ldw, int wdt,
                        const float *cos, const float *sin, int B, int T, int H, int hd, int K);
    /* Optional, a pair (a backend has both or neither): mlp_t's RMSNorm over the T positions of
     * each channel, with the transposes around it in the same pass. The forward takes xT and
     * resT as (B, D, Tp) rows and writes y as (B, T, D): y = (rms(xT + resT))ᵀ over each row's
     * first T values, rstd (B·D, fp32) saved — rmsnorm_fwd on the rows, then transpose, with the
     * same roundings. The backward takes dy and y as (B, T, D) and writes dxT as (B, D, Tp) rows,
     * zeros past T: rmsnorm_bwd on their transposes. With the pair the model keeps y, not yᵀ. */
    void (*rmsnorm_t_fwd)(trm_backend *b, void *y, float *rstd, const void *xT, const void *resT, int B, int T,
                          int Tp, int D, float eps);
    void (*rmsnorm_t_bwd)(trm_backend *b, void *dxT, const void *dy, const void *y, const float *rstd, int B,
                          int T, int Tp, int D);
    /* qkv: (B,T,3H,hd); rotates q and k heads in place with fp32 cos/sin tables (T×hd). */
    void (*rope_fwd)(trm_backend *b, void *qkv, const float *cos, const float *sin, int B, int T,
                     int H, int hd);
    /* The transpose rotation on dq, dk in place (dv untouched). */
    void (*rope_bwd)(trm_backend *b, void *dqkv, const float *cos, const float *sin, int B, int T,
                     int H, int hd);
    /* Non-causal softmax(q·kᵀ/√hd)·v. out: (B,T,H,hd); lse (fp32): (B,H,T) saved for backward. */
    void (*attention_fwd)(trm_backend *b, void *out, float *lse, const void *qkv, int B, int T,
                          int H, int hd);
    /* dqkv fully written (q, k and v parts). */
    void (*attention_bwd)(trm_backend *b, void *dqkv, const void *dout, const void *qkv,
                          const void *out, const float *lse, int B, int T, int H, int hd);
    /* y[r][c] += bias[c] ; dbias[c] += Σ_r dy[r][c]. Row stride ld. */
    void (*bias_fwd)(trm_backend *b, float *y, const float *bias, int rows, int cols, int ld);
    void (*bias_bwd)(trm_backend *b, float *dbias, const float *dy, int rows, int cols, int ld);

    /* ---- embeddings: out (B, T, D), an activation ---- */
    void (*embed_fwd)(trm_backend *b, void *out, const trm_embed_args *a);
    /* dout (B,T,D) → accumulates d_tok_w (V×D) and d_pos_w (T×D, if pos); writes
     * d_puz_rows (B×ndim, the gradient of the gathered puzzle rows) when ndim > 0. */
    void (*embed_bwd)(trm_backend *b, const void *dout, const trm_embed_args *a, float *d_tok_w,
                      float *d_pos_w, float *d_puz_rows);

    /* ---- loss head and ACT ---- */
    void (*loss_head)(trm_backend *b, const trm_loss_args *a);
    /* Where halted: zH←H_init, zL←L_init (activation rows of width TD, broadcast fp32
     * D-vectors over T), steps←0, current data←new batch rows. */
    void (*act_reset)(trm_backend *b, int B, int T, int D, int S, const uint8_t *halted,
                      void *zH, void *zL, const float *H_init, const float *L_init,
                      int32_t *steps, int32_t *cur_inputs, int32_t *cur_labels, int32_t *cur_pid,
                      const int32_t *new_inputs, const int32_t *new_labels, const int32_t *new_pid);
    /* steps += 1; halted = steps ≥ max; in training (max > 1): halted |= q_halt > 0 (or
     * > q_continue); exploration with counter-based RNG keyed by (seed, *rng_step, sample0 + b),
     * sample0 being this rank's first row of the global batch, so W ranks halt the samples one
     * process would. rng_step is device memory read when the op runs, so a captured step
     * replays with the value written before each replay. */
    void (*act_update)(trm_backend *b, int B, int32_t *steps, uint8_t *halted, const float *q,
                       int halt_max_steps, int training, int no_act_continue, float explore_prob,
                       uint64_t seed, uint64_t sample0, const uint64_t *rng_step);

    /* target_q_continue = sigmoid(steps ≥ max ? q_next_halt : max(q_next_halt, q_next_continue)) */
    void (*q_target)(trm_backend *b, int B, float *target, const float *q_next, const int32_t *steps,
                     int halt_max_steps);

    /* ---- optimisers ---- */
    /* AdamATan2 over n contiguous values; t counts from 1. */
    void (*adam_atan2)(trm_backend *b, float *p, const float *g, float *m, float *v, size_t n,
                       float lr, float wd, float beta1, float beta2, int64_t t);
    /* Sparse sign-SGD: sum grad rows per unique id, then for those rows
     * w ← w·(1 − lr·wd) − lr·sign(g). */
    void (*sign_sgd_sparse)(trm_backend *b, float *weights, int ndim, const int32_t *ids,
                            const float *grad_rows, int n, float lr, float wd);
    /* shadow ← (1−rate)·p + rate·shadow */
    void (*ema)(trm_backend *b, float *shadow, const float *p, size_t n, float rate);

    /* ---- element types (NULL where caps.bf16_acts is 0) ----
     * dst (rows × cols, rows ld_dst apart, type dt_dst) ← src (rows ld_src apart, dt_src); to
     * bf16 rounds to nearest even. The bf16 copy of the weights each step's GEMMs read. */
    void (*convert)(trm_backend *b, void *dst, int dt_dst, int ld_dst, const void *src, int dt_src, int ld_src,
                    int rows, int cols);

    /* ---- compile stage (NULL where caps.compile is 0) ----
     * Ops issued between capture_begin and capture_end are recorded, not run, and become one
     * replayable graph (nodes: its op count). Nothing may allocate or copy to/from the host
     * while capturing. */
    int (*capture_begin)(trm_backend *b);
    void *(*capture_end)(trm_backend *b, size_t *nodes);
    void (*graph_launch)(trm_backend *b, void *graph);
    void (*graph_destroy)(trm_backend *b, void *graph);

    /* ---- distributed (NULL where caps.distributed is 0) ----
     * Collectives over the ranks of `d` on device memory, in order with the other ops. Every
     * rank calls comm_init once after trm_dist_connect; a failing collective is fatal (the
     * other ranks could not go on either). */
    int (*comm_init)(trm_backend *b, struct trm_dist *d, trm_err *e);
    void (*allreduce_sum)(trm_backend *b, float *buf, size_t n); /* in place */
    /* recv (world*bytes) gets every rank's send (bytes) in rank order. */
    void (*allgather)(trm_backend *b, const void *send, void *recv, size_t bytes);

    /* ---- memory housekeeping (optional) ---- */
    void (*mem_info)(trm_backend *b, size_t *free_bytes, size_t *total_bytes);

    /* ---- command-stream counters (optional: NULL where the backend keeps none) ---- */
    void (*stream_stats)(trm_backend *b, trm_stream_stats *out);
};

/* The ops of the table by name, each listed once, so that "which ops a backend has" is which of
 * these lists it expands: a backend fills its table with X(op) defined as `b->op = prefix_op;`.
 * Every backend has the required ops; each optional group is left NULL by a backend without it
 * (see the table above for when). */
#define TRM_OPS_REQUIRED(X)                                                                           \
    X(destroy) X(alloc) X(free) X(to_device) X(to_host) X(copy) X(zero) X(sync) X(gemm) X(add) X(axpy) \
    X(transpose) X(rmsnorm_fwd) X(rmsnorm_bwd) X(swiglu_fwd) X(swiglu_bwd) X(rope_fwd) X(rope_bwd)      \
    X(attention_fwd) X(attention_bwd) X(bias_fwd) X(bias_bwd) X(embed_fwd) X(embed_bwd) X(loss_head)   \
    X(act_reset) X(act_update) X(q_target) X(adam_atan2) X(sign_sgd_sparse) X(ema)
/* the fused passes (optional): gate/up + SwiGLU (and its backward, with the gate/up or the down
 * product), attention with RoPE's rotation (forward) or its transpose (backward), mlp_t's norm
 * with its transposes */
#define TRM_OPS_FUSED(X) \
    X(gate_up_swiglu) X(gate_up_swiglu_bwd) X(down_swiglu_bwd) X(attention_fwd_rope) X(attention_bwd_rope)       \
    X(rmsnorm_t_fwd) X(rmsnorm_t_bwd)
/* fused passes only a GPU backend has (optional) */
#define TRM_OPS_FUSED_GPU(X) X(token_mlp_fwd) X(linear_norm_fwd) X(qkv_rope_fwd)
/* with caps.bf16_acts */
#define TRM_OPS_BF16_ACTS(X) X(convert)
/* with caps.compile */
#define TRM_OPS_COMPILE(X) X(capture_begin) X(capture_end) X(graph_launch) X(graph_destroy)
/* with caps.distributed */
#define TRM_OPS_DISTRIBUTED(X) X(comm_init) X(allreduce_sum) X(allgather)
/* memory housekeeping (optional) */
#define TRM_OPS_MEM_INFO(X) X(mem_info)
/* command-stream counters (optional) */
#define TRM_OPS_STREAM_STATS(X) X(stream_stats)

#define TRM_OPS_ALL(X)                                                                        \
    TRM_OPS_REQUIRED(X) TRM_OPS_FUSED(X) TRM_OPS_FUSED_GPU(X) TRM_OPS_BF16_ACTS(X)              \
    TRM_OPS_COMPILE(X) TRM_OPS_DISTRIBUTED(X)                                                                    \
    TRM_OPS_MEM_INFO(X) TRM_OPS_STREAM_STATS(X)

/* The lists name every op of the table: one added to the struct but not to a list fails here. */
#define TRM_OP_ONE_(op) +1
static_assert(sizeof(trm_backend) ==
                  offsetof(trm_backend, destroy) + (0 TRM_OPS_ALL(TRM_OP_ONE_)) * sizeof(void (*)(void)),
              "an op of trm_backend is missing from the TRM_OPS_* lists");
#undef TRM_OP_ONE_

/* ---- registry: the one global table of backends compiled into this binary ---- */
typedef struct {
    const char *name;
    trm_caps caps;
    /* Creates an instance for device index `index` (-1 = default); NULL + e on failure. */
    trm_backend *(*create)(int index, trm_err *e);
    /* Number of devices this backend sees (0 = unusable here); desc gets a one-line summary. */
    int (*probe)(char *desc, size_t desc_len);
    /* device=auto takes this backend only when this is > 0 (NULL: when probe is): mps skips
     * CPU-type Vulkan devices, which are far slower than the cpu backend. */
    int (*probe_auto)(char *desc, size_t desc_len);
    /* The capabilities on this machine where they depend on it (NULL: `caps` as they are): the
     * cpu backend has bf16 only on CPUs with AVX512-BF16. */
    void (*caps_here)(trm_caps *caps);
} trm_backend_entry;

const trm_backend_entry *trm_backend_find(const char *name);
/* Turns bf16 on or off on an instance (before a model is made on it): use_bf16 where the backend
 * can, and bf16 activations where it keeps them (act_dt). */
void trm_backend_set_bf16(trm_backend *b, int on);
/* Bytes of one activation element on this instance. */
static inline size_t trm_act_size(const trm_backend *b) { return b->act_dt == TRM_BF16 ? 2 : 4; }
/* Capabilities of a backend by name (cpu, cuda, mps), compiled in or not; NULL if unknown. */
const trm_caps *trm_known_caps(const char *name);
int trm_backend_count(void);
const trm_backend_entry *trm_backend_at(int i);

trm_backend *trm_cpu_backend_create(int index, trm_err *e);
void trm_cpu_caps_here(trm_caps *caps);
/* kernels/cpu/cpu_env.c: chooses what OpenBLAS and OpenMP read from the environment (the
 * CPU's vector kernels where OpenBLAS's detection fails; a bounded spin at OpenMP barriers).
 * Call first thing in main(); may re-execute the program once (same argv). */
void trm_cpu_env(char **argv);
/* Wraps a backend so that every op is timed; the table is printed on destroy (TRM_PROFILE=1; 2
 * adds the GEMMs by shape). */
trm_backend *trm_profile_wrap(trm_backend *inner);
/* Zeroes the profiler's tables (no-op for any other backend). */
void trm_profile_reset(trm_backend *b);

/* The rest of the face of backend/: device policy and the ACT rule every backend applies. */
#include "device.h"
#include "act_rules.h"

#endif
