/* backend_cuda.cu — the `cuda` backend: the table of backend.h on one GPU. Memory and copies
 * on one stream, GEMMs through cuBLASLt (plans cached per shape and element types; fp32, or
 * bf16 tensor cores with fp32 accumulation when use_bf16, on bf16 activations end to end;
 * with tune_gemms, the compile stage's first eager step times cuBLASLt's candidate algorithms
 * on each bf16 product shape and keeps the fastest), attention fused (attention.cu) on bf16 activations
 * with head dim 64, else as per-head strided-batched GEMMs around the softmax kernels,
 * everything else in kernels/cuda/<op>.cu. The compile stage's graph capture lives here too:
 * ops issued between capture_begin and capture_end become one CUDA graph. No op synchronises
 * with the host except to_host, sync and the GEMM timing of the plan stage. */
#include <cublasLt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.cuh"

extern "C" {
#include "util/util.h"
trm_backend *trm_cuda_backend_create(int index, trm_err *e);
int trm_cuda_probe(char *desc, size_t desc_len);
}

/* Out of device memory inside a step: what was asked (when known), what is free, what to lower. */
static void oom_exit(size_t requested) {
    size_t fr = 0, tot = 0;
    cudaGetLastError(); /* clear the allocation error before asking */
    cudaMemGetInfo(&fr, &tot);
    fprintf(stderr, "trm: the GPU is out of memory");
    if (requested) fprintf(stderr, ": a work buffer of %.2f GiB was requested", requested / 1073741824.0);
    fprintf(stderr, "; %.2f GiB of %.2f GiB are free. Lower global_batch_size, use "
                    "forward_dtype=bfloat16, or lower arch.H_cycles/arch.L_cycles\n",
            fr / 1073741824.0, tot / 1073741824.0);
    exit(1);
}

/* An unexpected CUDA failure inside a step cannot be returned through the void ops: report it
 * with the call and stop (checkpoints are written atomically, so the last one survives). */
#define CK(call) cuda_check((call), #call, __FILE__, __LINE__)
static void cuda_check(cudaError_t r, const char *what, const char *file, int line) {
    if (r == cudaSuccess) return;
    fprintf(stderr, "trm: cuda: %s failed at %s:%d: %s\n", what, file, line, cudaGetErrorString(r));
    if (r == cudaErrorMemoryAllocation) oom_exit(0);
    exit(1);
}
#define CKL(call) cublas_check((call), #call, __FILE__, __LINE__)
static void cublas_check(cublasStatus_t r, const char *what, const char *file, int line) {
    if (r == CUBLAS_STATUS_SUCCESS) return;
    fprintf(stderr, "trm: cublasLt: %s failed at %s:%d: status %d\n", what, file, line, (int)r);
    exit(1);
}

/* ---- GEMM plans ------------------------------------------------------------------------ */

typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc, batch, mode, align; /* mode: GEMM_* */
    int c_bf16;                                              /* C (and D) in bf16 */
    int64_t sA, sB, sC;
} gemm_key;

typedef struct {
    gemm_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
} gemm_plan;

#define PLAN_SLOTS 512
#define WORKSPACE_BYTES ((size_t)64 << 20)

typedef struct {
    void *p;
    size_t bytes;
} scratch_buf;

enum { SCR_ATT_S, SCR_ATT_DP, SCR_ATT_DR, SCR_ATT_DQ, SCR_EMBED, SCR_LOSS, SCR_BF16_A, SCR_BF16_B, SCR_TUNE, SCR_WT, SCR_COUNT };

/* GEMM precision of a plan: fp32; bf16 tensor cores reading fp32 operands; bf16 operands (bf16
 * activations and weights, or fp32 ones converted just before the product). Accumulation is
 * fp32 in all three; the output fp32 or bf16 (c_bf16). */
enum { GEMM_FP32 = 0, GEMM_FAST_BF16 = 1, GEMM_BF16 = 2 };
#define TUNE_CANDIDATES 16

typedef struct {
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void *workspace;
    gemm_plan plans[PLAN_SLOTS];
    int nplans;
    scratch_buf scratch[SCR_COUNT];
    int capturing;
    void *nccl; /* the run's NCCL communicator, once comm_init ran */
    int wgmma;  /* attention on Hopper's warpgroup products (TRM_FLASH_WGMMA=0: the mma.sync kernels) */
    void *gate_up_tma; /* the Hopper gate/up + SwiGLU kernel's TMA encoder; NULL: none, or TRM_GATE_UP_WGMMA=0 (cuBLASLt + SwiGLU) */
    void *flash_tma;   /* the same encoder for the attention forwards by TMA; NULL: TRM_FLASH_TMA=0 */
    void *flash_bwd_tma; /* ... for the short heads' persistent backward; NULL: TRM_FLASH_SHORT_BWD=0 */
    int gate_up_tile;  /* gate/up + SwiGLU in 128 × 256 tiles where it takes the shape (TRM_GATE_UP_TILE=0: not) */
    int qkv_rope;      /* the QKV product with RoPE in its epilogue, by that kernel (TRM_QKV_ROPE=0: not) */
    int deterministic; /* TRM_DETERMINISTIC=1: attention's backward in two passes, no reductions in memory */
    int ln_clusters;   /* clusters the linear + norm kernel runs at once (0: it cannot run here) */
} cuda_ctx;

static cuda_ctx *CTX(trm_backend *b) { return (cuda_ctx *)b->ctx; }
static void *scratch(trm_backend *b, int which, size_t bytes);

/* a yes/no environment switch: 1/true/on/yes or 0/false/off/no in any case; unset or empty
 * gives def */
static int env_flag(const char *name, int def) {
    const char *v = getenv(name);
    if (!v || !*v) return def;
    if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "on") || !strcasecmp(v, "yes")) return 1;
    if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "off") || !strcasecmp(v, "no")) return 0;
    fprintf(stderr, "trm: warning: %s=%s is not one of 1/true/on/yes or 0/false/off/no; using %d\n", name, v, def);
    return def;
}

static int ptr_align(const void *p, int64_t stride_bytes) {
    uintptr_t v = (uintptr_t)p | (uintptr_t)stride_bytes;
    int a = 256;
    while (a > 4 && (v & (uintptr_t)(a - 1))) a >>= 1;
    return a;
}

static void plan_release(gemm_plan *p) {
    cublasLtMatmulDescDestroy(p->op);
    cublasLtMatrixLayoutDestroy(p->a);
    cublasLtMatrixLayoutDestroy(p->b);
    cublasLtMatrixLayoutDestroy(p->c);
}

/* The fastest of the heuristic's candidates on these operands (median of 5 after 2 warm-ups),
 * writing into a scratch copy of C so that nothing the step computes is disturbed. */
static int tune_algo(trm_backend *b, gemm_plan *p, const cublasLtMatmulHeuristicResult_t *res, int found,
                     const void *A, const void *B, size_t c_bytes);

static gemm_plan *plan_for(trm_backend *b, const gemm_key *k, const void *A, const void *B, size_t c_bytes) {
    cuda_ctx *c = CTX(b);
    for (int i = 0; i < c->nplans; i++)
        if (memcmp(&c->plans[i].key, k, sizeof *k) == 0) return &c->plans[i];
    if (c->nplans == PLAN_SLOTS) { /* a new shape beyond the cache: drop the oldest plans */
        for (int i = 0; i < PLAN_SLOTS / 2; i++) plan_release(&c->plans[i]);
        memmove(c->plans, c->plans + PLAN_SLOTS / 2, sizeof(gemm_plan) * (PLAN_SLOTS / 2));
        c->nplans = PLAN_SLOTS / 2;
    }
    gemm_plan *p = &c->plans[c->nplans];
    memset(p, 0, sizeof *p);
    p->key = *k;
    /* Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: B's buffer comes first. */
    cublasOperation_t opa = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasComputeType_t ct = k->mode == GEMM_FAST_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
    cudaDataType_t in_t = k->mode == GEMM_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cudaDataType_t out_t = k->c_bf16 ? CUDA_R_16BF : CUDA_R_32F;
    CKL(cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F));
    CKL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    CKL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    /* first operand (B buffer): op = N → N×K col-major; op = T → K×N */
    CKL(cublasLtMatrixLayoutCreate(&p->a, in_t, k->tb ? k->K : k->N, k->tb ? k->N : k->K, k->ldb));
    CKL(cublasLtMatrixLayoutCreate(&p->b, in_t, k->ta ? k->M : k->K, k->ta ? k->K : k->M, k->lda));
    CKL(cublasLtMatrixLayoutCreate(&p->c, out_t, k->N, k->M, k->ldc));
    if (k->batch > 1) {
        int32_t bc = k->batch;
        cublasLtMatrixLayout_t ls[3] = {p->a, p->b, p->c};
        int64_t st[3] = {k->sB, k->sA, k->sC};
        for (int i = 0; i < 3; i++) {
            CKL(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
            CKL(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                 &st[i], sizeof st[i]));
        }
    }
    cublasLtMatmulPreference_t pref;
    CKL(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = WORKSPACE_BYTES;
    uint32_t al = (uint32_t)k->align;
    CKL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    CKL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al));
    CKL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al));
    CKL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al));
    CKL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al));
    cublasLtMatmulHeuristicResult_t res[TUNE_CANDIDATES];
    /* timed choices for the bf16 products only: another algorithm sums in another order, and
     * fp32 runs keep the library's first choice so that compile on and off stay bit-identical */
    int found = 0, want = b->tune_gemms && !c->capturing && k->mode == GEMM_BF16 ? TUNE_CANDIDATES : 1;
    cublasStatus_t r = cublasLtMatmulAlgoGetHeuristic(c->lt, p->op, p->a, p->b, p->c, p->c, pref, want,
                                                      res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (r != CUBLAS_STATUS_SUCCESS || found == 0) {
        fprintf(stderr, "trm: cublasLt has no algorithm for a %s GEMM %dx%dx%d (ta %d tb %d, lda %d "
                        "ldb %d ldc %d, batch %d)\n", k->mode != GEMM_FP32 ? "bf16" : "fp32", k->M, k->N, k->K,
                k->ta, k->tb, k->lda, k->ldb, k->ldc, k->batch);
        exit(1);
    }
    p->algo = res[found > 1 ? tune_algo(b, p, res, found, A, B, c_bytes) : 0].algo;
    c->nplans++;
    return p;
}

static int tune_algo(trm_backend *b, gemm_plan *p, const cublasLtMatmulHeuristicResult_t *res, int found,
                     const void *A, const void *B, size_t c_bytes) {
    cuda_ctx *c = CTX(b);
    void *C = scratch(b, SCR_TUNE, c_bytes);
    float alpha = 1.0f, beta = 0.0f, best_ms = 0.0f;
    int best = 0;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < found; i++) {
        float t[7];
        int ok = 1;
        for (int r = 0; r < 7 && ok; r++) {
            CK(cudaEventRecord(e0, c->stream));
            ok = cublasLtMatmul(c->lt, p->op, &alpha, B, p->a, A, p->b, &beta, C, p->c, C, p->c, &res[i].algo,
                                c->workspace, WORKSPACE_BYTES, c->stream) == CUBLAS_STATUS_SUCCESS;
            CK(cudaEventRecord(e1, c->stream));
            CK(cudaEventSynchronize(e1));
            CK(cudaEventElapsedTime(&t[r], e0, e1));
        }
        if (!ok) continue;
        for (int x = 2; x < 7; x++) /* median of the last five */
            for (int y = x + 1; y < 7; y++)
                if (t[y] < t[x]) {
                    float v = t[x];
                    t[x] = t[y], t[y] = v;
                }
        /* another algorithm only where it is clearly faster: fewer choices that flip between runs */
        if (i == 0 || t[4] < best_ms * 0.97f) best = i, best_ms = t[4];
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return best;
}

/* Elements from the first to the last one a (rows × cols, ld, batch, stride) operand touches. */
static size_t operand_span(int rows, int cols, int ld, int batch, int64_t stride) {
    size_t one = (size_t)(rows - 1) * ld + cols;
    return batch > 1 && stride ? (size_t)(batch - 1) * stride + one : one;
}

static void cuda_gemm(trm_backend *b, trm_gemm_dt dt, int ta, int tb, int M, int N, int K, float alpha,
                      const void *A, int lda, int64_t sA, const void *B, int ldb, int64_t sB,
                      float beta, void *C, int ldc, int64_t sC, int batch) {
    if (M <= 0 || N <= 0 || batch <= 0) return;
    cuda_ctx *c = CTX(b);
    int csz = dt.c == TRM_BF16 ? 2 : 4;
    if (K <= 0) { /* C = beta·C: no product to take */
        for (int i = 0; i < batch; i++) {
            char *Ci = (char *)C + (size_t)i * sC * csz;
            if (beta == 0.0f)
                CK(cudaMemset2DAsync(Ci, (size_t)ldc * csz, 0, (size_t)N * csz, M, c->stream));
            else
                k_axpy(c->stream, dt.c, Ci, Ci, beta - 1.0f, (size_t)(M - 1) * ldc + N);
        }
        return;
    }
    int mode = GEMM_FP32;
    const void *a_op = A, *b_op = B;
    int esz = 4;
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    size_t na = operand_span(ar, ac, lda, batch, sA), nb = operand_span(br, bc, ldb, batch, sB);
    int to16a = 0, to16b = 0; /* fp32 operands taken to bf16 (every element of their span) first */
    if (dt.a == TRM_BF16 || dt.b == TRM_BF16 || dt.c == TRM_BF16) {
        /* bf16 activations: an fp32 operand beside them (the loss head's gradients) is taken to
         * bf16 first, as the reference's cast does */
        mode = GEMM_BF16, to16a = dt.a == TRM_F32, to16b = dt.b == TRM_F32;
    } else if (b->use_bf16) {
        /* Dense operands are converted to bf16 once, in their own layout (full tensor-core
         * rate); strided views (one attention head of the QKV rows) are read as fp32 and
         * down-converted by cuBLASLt while loading, which costs less than gathering them. */
        size_t ua = (size_t)ar * ac * (batch > 1 && sA ? batch : 1);
        size_t ub = (size_t)br * bc * (batch > 1 && sB ? batch : 1);
        int dense = na <= ua + ua / 4 && nb <= ub + ub / 4;
        mode = dense ? GEMM_BF16 : GEMM_FAST_BF16, to16a = to16b = dense;
    }
    if (to16a) {
        a_op = scratch(b, SCR_BF16_A, na * 2);
        k_to_bf16(c->stream, (void *)a_op, (const float *)A, na);
    }
    if (to16b) {
        b_op = scratch(b, SCR_BF16_B, nb * 2);
        k_to_bf16(c->stream, (void *)b_op, (const float *)B, nb);
    }
    if (mode == GEMM_BF16) esz = 2;
    int al = ptr_align(a_op, sA * esz);
    int al2 = ptr_align(b_op, sB * esz), al3 = ptr_align(C, sC * csz);
    if (al2 < al) al = al2;
    if (al3 < al) al = al3;
    gemm_key k;
    memset(&k, 0, sizeof k);
    k.ta = ta, k.tb = tb, k.M = M, k.N = N, k.K = K, k.lda = lda, k.ldb = ldb, k.ldc = ldc;
    k.batch = batch, k.mode = mode, k.align = al, k.c_bf16 = dt.c == TRM_BF16;
    k.sA = batch > 1 ? sA : 0, k.sB = batch > 1 ? sB : 0, k.sC = batch > 1 ? sC : 0;
    gemm_plan *p = plan_for(b, &k, a_op, b_op, operand_span(M, N, ldc, batch, sC) * csz);
    CKL(cublasLtMatmul(c->lt, p->op, &alpha, b_op, p->a, a_op, p->b, &beta, C, p->c, C, p->c, &p->algo,
                       c->workspace, WORKSPACE_BYTES, c->stream));
}

/* ---- memory ------------------------------------------------------------------------------ */

static void *cuda_alloc(trm_backend *b, size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free allocation error */
        return NULL;
    }
    CK(cudaMemsetAsync(p, 0, bytes, CTX(b)->stream));
    return p;
}
static void cuda_free(trm_backend *b, void *p) {
    if (p) CK(cudaFree(p));
}
static void cuda_to_device(trm_backend *b, void *dst, const void *src, size_t n) {
    if (n) CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, CTX(b)->stream));
}
static void cuda_to_host(trm_backend *b, void *dst, const void *src, size_t n) {
    if (!n) return;
    CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, CTX(b)->stream));
    CK(cudaStreamSynchronize(CTX(b)->stream));
}
static void cuda_copy(trm_backend *b, void *dst, const void *src, size_t n) {
    if (n && dst != src) CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, CTX(b)->stream));
}
static void cuda_zero(trm_backend *b, void *p, size_t n) {
    if (n) CK(cudaMemsetAsync(p, 0, n, CTX(b)->stream));
}
static void cuda_sync(trm_backend *b) {
    CK(cudaStreamSynchronize(CTX(b)->stream));
    CK(cudaGetLastError());
}

/* Work buffers owned by the backend grow on first use; the compile stage runs one step eagerly
 * before capturing, so a graph never needs a larger one. */
static void *scratch(trm_backend *b, int which, size_t bytes) {
    cuda_ctx *c = CTX(b);
    scratch_buf *s = &c->scratch[which];
    if (s->bytes >= bytes) return s->p;
    if (c->capturing) {
        fprintf(stderr, "trm: cuda: a work buffer grew while capturing a graph (internal error)\n");
        exit(1);
    }
    if (s->p) {
        CK(cudaStreamSynchronize(c->stream));
        CK(cudaFree(s->p));
    }
    s->p = NULL;
    if (cudaMalloc(&s->p, bytes) != cudaSuccess) oom_exit(bytes);
    s->bytes = bytes;
    return s->p;
}

/* ---- elementwise and fused ops: thin wrappers over the kernels ------------------------------ */

#define ST(b) (CTX(b)->stream)
#define DT(b) ((b)->act_dt)
static void cuda_add(trm_backend *b, void *y, const void *x1, const void *x2, size_t n) { k_add(ST(b), DT(b), y, x1, x2, n); }
static void cuda_axpy(trm_backend *b, void *y, const void *x, float a, size_t n) { k_axpy(ST(b), DT(b), y, x, a, n); }
static void cuda_transpose(trm_backend *b, void *o, int ldo, const void *i, int ldi, int bt, int r, int c) {
    k_transpose(ST(b), DT(b), o, ldo, i, ldi, bt, r, c);
}
static void cuda_rmsnorm_fwd(trm_backend *b, void *y, float *rstd, const void *x, const void *res, int rows, int dim,
                             int ld, float eps) {
    k_rmsnorm_fwd(ST(b), DT(b), y, rstd, x, res, rows, dim, ld, eps);
}
static void cuda_rmsnorm_bwd(trm_backend *b, void *dx, const void *dy, const void *y, const float *rstd, int rows,
                             int dim, int ld) {
    k_rmsnorm_bwd(ST(b), DT(b), dx, dy, y, rstd, rows, dim, ld);
}
static void cuda_swiglu_fwd(trm_backend *b, void *o, const void *gu, int rows, int I) { k_swiglu_fwd(ST(b), DT(b), o, gu, rows, I); }
static void cuda_swiglu_bwd(trm_backend *b, void *dgu, void *o, const void *d, const void *gu, int rows, int I) {
    k_swiglu_bwd(ST(b), DT(b), dgu, o, d, gu, rows, I);
}
/* fused for bf16 activations and weights: on Hopper K ≤ 512 (the channel MLP's K = hidden and
 * mlp_t's K = Tp), elsewhere the short products (mlp_t's) */
static int cuda_gate_up_swiglu(trm_backend *b, void *act, void *gu, const void *x, int ldx, const void *W, int ldw,
                               int wdt, int rows, int I, int K) {
    if (DT(b) != TRM_BF16 || wdt != TRM_BF16) return 0;
    /* the channel MLP (K = hidden); mlp_t's short products (K = Tp) stay with swiglu.cu's */
    if (CTX(b)->gate_up_tile && K >= 256 && k_gate_up_tile(ST(b), CTX(b)->gate_up_tma, act, gu, x, ldx, W, ldw, rows, I, K))
        return 1;
    return k_gate_up_swiglu(ST(b), CTX(b)->gate_up_tma, act, gu, x, ldx, W, ldw, rows, I, K);
}
static int cuda_gate_up_swiglu_bwd(trm_backend *b, void *dgu, void *act, const void *dact, const void *x, int ldx,
                                   const void *W, int ldw, int wdt, int rows, int I, int K) {
    if (DT(b) != TRM_BF16 || wdt != TRM_BF16) return 0;
    return k_gate_up_swiglu_bwd(ST(b), CTX(b)->gate_up_tma, dgu, act, dact, x, ldx, W, ldw, rows, I, K);
}
/* dact = dy·W and the SwiGLU backward in one Hopper kernel, bf16 activations and weights; W's
 * transpose in a work buffer */
static int cuda_down_swiglu_bwd(trm_backend *b, void *dgu, void *out, const void *dy, int ldy, const void *W, int ldw,
                                int wdt, const void *gu, int rows, int I, int K) {
    if (DT(b) != TRM_BF16 || wdt != TRM_BF16 || rows < 1 || I < 1 || K < 1) return 0;
    void *wt = scratch(b, SCR_WT, (size_t)I * K * 2);
    return k_down_swiglu_bwd(ST(b), CTX(b)->gate_up_tma, dgu, out, dy, ldy, W, ldw, wt, gu, rows, I, K);
}
static void cuda_rmsnorm_t_fwd(trm_backend *b, void *y, float *rstd, const void *xT, const void *resT, int B, int T,
                               int Tp, int D, float eps) {
    k_rmsnorm_t_fwd(ST(b), DT(b), y, rstd, xT, resT, B, T, Tp, D, eps);
}
static void cuda_rmsnorm_t_bwd(trm_backend *b, void *dxT, const void *dy, const void *y, const float *rstd, int B,
                               int T, int Tp, int D) {
    k_rmsnorm_t_bwd(ST(b), DT(b), dxT, dy, y, rstd, B, T, Tp, D);
}
static int cuda_token_mlp_fwd(trm_backend *b, void *y, float *rstd, const void *x, const void *Wgu, int ldgu,
                              const void *Wdn, int lddn, int wdt, int B, int T, int Tp, int D, int It, float eps) {
    if (DT(b) != TRM_BF16 || wdt != TRM_BF16) return 0;
    return k_token_mlp_fwd(ST(b), CTX(b)->gate_up_tma, y, rstd, x, Wgu, ldgu, Wdn, lddn, B, T, Tp, D, It, eps);
}
/* the output and down projections with the residual and norm in their epilogue: bf16
 * activations and weights on Hopper (the kernel declines the rest) */
static int cuda_linear_norm_fwd(trm_backend *b, void *y, float *rstd, const void *res, const void *x, int ldx,
                                const void *W, int ldw, int wdt, int rows, int K, int D, float eps) {
    if (DT(b) != TRM_BF16 || wdt != TRM_BF16) return 0;
    return k_linear_norm_fwd(ST(b), CTX(b)->gate_up_tma, CTX(b)->ln_clusters, y, rstd, res, x, ldx, W, ldw, rows, K,
                             D, eps);
}
/* the QKV product with RoPE in its epilogue: bf16 activations and weights on Hopper, head dim
 * 64, and only where the attention forward does not rotate q and k itself (T > 128: one block
 * holds a head there and rotates them in shared memory; the product would be cuBLASLt's) */
static int cuda_qkv_rope_fwd(trm_backend *b, void *qkv, const void *x, int ldx, const void *W, int ldw, int wdt,
                             const float *cs, const float *sn, int B, int T, int H, int hd, int K) {
    if (DT(b) != TRM_BF16 || wdt != TRM_BF16 || hd != 64 || !CTX(b)->qkv_rope || T <= 128) return 0;
    return k_qkv_rope(ST(b), CTX(b)->gate_up_tma, qkv, x, ldx, W, ldw, cs, sn, B, T, H, K);
}
static void cuda_rope_fwd(trm_backend *b, void *qkv, const float *c, const float *s, int B, int T, int H, int hd) {
    k_rope(ST(b), DT(b), qkv, c, s, B, T, H, hd, 0);
}
static void cuda_rope_bwd(trm_backend *b, void *dqkv, const float *c, const float *s, int B, int T, int H, int hd) {
    k_rope(ST(b), DT(b), dqkv, c, s, B, T, H, hd, 1);
}
static void cuda_bias_fwd(trm_backend *b, float *y, const float *bias, int rows, int cols, int ld) {
    k_bias_fwd(ST(b), y, bias, rows, cols, ld);
}
static void cuda_bias_bwd(trm_backend *b, float *db, const float *dy, int rows, int cols, int ld) {
    k_bias_bwd(ST(b), db, dy, rows, cols, ld);
}
static void cuda_convert(trm_backend *b, void *dst, int dt_dst, int ld_dst, const void *src, int dt_src, int ld_src,
                         int rows, int cols) {
    k_convert(ST(b), dst, dt_dst, ld_dst, src, dt_src, ld_src, rows, cols);
}

/* ---- attention: fused (attention.cu) on bf16 activations with head dim 64; otherwise one head
 * at a time, strided-batched over the batch --------------------------
 * Scores live in a (B, T, T) fp32 buffer for one head, so the work memory is B·T² floats, not H
 * times that; the heads run one after another on the same buffer. */

static void cuda_attention_fwd(trm_backend *b, void *out, float *lse, const void *qkv, int B, int T, int H, int hd) {
    if (B <= 0 || T <= 0 || H <= 0 || hd <= 0) return;
    if (DT(b) == TRM_BF16 && k_flash_ok(qkv, out, hd)) {
        k_flash_fwd(ST(b), CTX(b)->wgmma, CTX(b)->flash_tma, out, lse, qkv, B, T, H);
        return;
    }
    size_t e = trm_act_size(b);
    trm_gemm_dt aaf = {(uint8_t)DT(b), (uint8_t)DT(b), TRM_F32}, faa = {TRM_F32, (uint8_t)DT(b), (uint8_t)DT(b)};
    int64_t TT = (int64_t)T * T;
    float *S = (float *)scratch(b, SCR_ATT_S, (size_t)B * TT * sizeof(float));
    int ld = 3 * H * hd, ldo = H * hd;
    int64_t sq = (int64_t)T * ld, so = (int64_t)T * ldo;
    float scale = 1.0f / sqrtf((float)hd);
    const char *q = (const char *)qkv;
    for (int h = 0; h < H; h++) {
        cuda_gemm(b, aaf, 0, 1, T, T, hd, scale, q + h * hd * e, ld, sq, q + (H + h) * hd * e, ld, sq, 0.0f, S, T, TT, B);
        k_softmax_lse(ST(b), S, lse, B, H, T, h);
        cuda_gemm(b, faa, 0, 0, T, hd, T, 1.0f, S, T, TT, q + (2 * H + h) * hd * e, ld, sq, 0.0f,
                  (char *)out + h * hd * e, ldo, so, B);
    }
}

static int cuda_attention_fwd_rope(trm_backend *b, void *out, float *lse, void *qkv, const float *cs, const float *sn,
                                   int B, int T, int H, int hd, int keep) {
    if (B <= 0 || T <= 0 || H <= 0 || DT(b) != TRM_BF16 || !k_flash_ok(qkv, out, hd)) return 0;
    return k_flash_fwd_rope(ST(b), CTX(b)->wgmma, CTX(b)->flash_tma, out, lse, qkv, B, T, H, cs, sn, keep);
}

/* The attention backward; with rotary tables (rc, rs) the rotation's transpose of dq and dk too,
 * inside the one-pass flash kernels where they run, else by the rope pass after. */
static void attention_bwd_impl(trm_backend *b, void *dqkv, const void *dout, const void *qkv, const void *out,
                               const float *lse, int B, int T, int H, int hd, const float *rc, const float *rs) {
    if (B <= 0 || T <= 0 || H <= 0 || hd <= 0) return;
    float *dr = (float *)scratch(b, SCR_ATT_DR, (size_t)B * H * T * sizeof(float));
    k_att_rowdot(ST(b), DT(b), dr, dout, out, B, T, H, hd);
    if (DT(b) == TRM_BF16 && k_flash_ok(qkv, dout, hd) && k_flash_ok(dqkv, out, hd)) {
        float *dqacc = NULL;
        int one_pass = CTX(b)->wgmma && !CTX(b)->deterministic;
        size_t n = one_pass ? k_flash_dq_bytes(B, T, H) : 0;
        if (n) {
            dqacc = (float *)scratch(b, SCR_ATT_DQ, n);
            CK(cudaMemsetAsync(dqacc, 0, n, ST(b)));
        }
        if (!k_flash_bwd(ST(b), CTX(b)->wgmma, CTX(b)->flash_bwd_tma, one_pass, dqkv, dqacc, dout, qkv, lse, dr, B, T, H, rc, rs) && rc)
            cuda_rope_bwd(b, dqkv, rc, rs, B, T, H, hd);
        return;
    }
    size_t e = trm_act_size(b);
    uint8_t a = (uint8_t)DT(b);
    trm_gemm_dt aaf = {a, a, TRM_F32}, faa = {TRM_F32, a, a};
    int64_t TT = (int64_t)T * T;
    float *P = (float *)scratch(b, SCR_ATT_S, (size_t)B * TT * sizeof(float));
    float *dP = (float *)scratch(b, SCR_ATT_DP, (size_t)B * TT * sizeof(float));
    int ld = 3 * H * hd, ldo = H * hd;
    int64_t sq = (int64_t)T * ld, so = (int64_t)T * ldo;
    float scale = 1.0f / sqrtf((float)hd);
    const char *qc = (const char *)qkv, *dc = (const char *)dout;
    char *dq = (char *)dqkv;
    for (int h = 0; h < H; h++) {
        const char *Q = qc + h * hd * e, *K = qc + (H + h) * hd * e, *V = qc + (2 * H + h) * hd * e;
        const char *dO = dc + h * hd * e;
        cuda_gemm(b, aaf, 0, 1, T, T, hd, scale, Q, ld, sq, K, ld, sq, 0.0f, P, T, TT, B);
        k_exp_lse(ST(b), P, lse, B, H, T, h);
        /* dV = Pᵀ dO ; dP = dO Vᵀ ; dS = P∘(dP − rowsum) ; dQ = dS K·s ; dK = dSᵀ Q·s */
        cuda_gemm(b, faa, 1, 0, T, hd, T, 1.0f, P, T, TT, dO, ldo, so, 0.0f, dq + (2 * H + h) * hd * e, ld, sq, B);
        cuda_gemm(b, aaf, 0, 1, T, T, hd, 1.0f, dO, ldo, so, V, ld, sq, 0.0f, dP, T, TT, B);
        k_att_ds(ST(b), dP, P, dr, B, H, T, h);
        cuda_gemm(b, faa, 0, 0, T, hd, T, scale, dP, T, TT, K, ld, sq, 0.0f, dq + h * hd * e, ld, sq, B);
        cuda_gemm(b, faa, 1, 0, T, hd, T, scale, dP, T, TT, Q, ld, sq, 0.0f, dq + (H + h) * hd * e, ld, sq, B);
    }
    if (rc) cuda_rope_bwd(b, dqkv, rc, rs, B, T, H, hd);
}
static void cuda_attention_bwd(trm_backend *b, void *dqkv, const void *dout, const void *qkv, const void *out,
                               const float *lse, int B, int T, int H, int hd) {
    attention_bwd_impl(b, dqkv, dout, qkv, out, lse, B, T, H, hd, NULL, NULL);
}
static void cuda_attention_bwd_rope(trm_backend *b, void *dqkv, const void *dout, const void *qkv, const void *out,
                                    const float *lse, const float *rc, const float *rs, int B, int T, int H, int hd) {
    attention_bwd_impl(b, dqkv, dout, qkv, out, lse, B, T, H, hd, rc, rs);
}

/* ---- embeddings, loss, ACT, optimisers ---------------------------------------------------- */

static void cuda_embed_fwd(trm_backend *b, void *out, const trm_embed_args *a) { k_embed_fwd(ST(b), DT(b), out, a); }
static void cuda_embed_bwd(trm_backend *b, const void *dout, const trm_embed_args *a, float *d_tok_w,
                           float *d_pos_w, float *d_puz_rows) {
    int chunks = k_embed_tok_chunks(a->B * a->S);
    float *work = d_tok_w ? (float *)scratch(b, SCR_EMBED, (size_t)chunks * a->V * a->D * sizeof(float)) : NULL;
    k_embed_bwd(ST(b), DT(b), dout, a, a->V, d_tok_w, d_pos_w, d_puz_rows, work);
}
static void cuda_loss_head(trm_backend *b, const trm_loss_args *a) {
    void *work = scratch(b, SCR_LOSS, (size_t)(a->B > 0 ? a->B : 1) * TRM_NMETRICS * sizeof(double));
    k_loss_head(ST(b), a, work);
}
static void cuda_act_reset(trm_backend *b, int B, int T, int D, int S, const uint8_t *halted, void *zH,
                           void *zL, const float *H_init, const float *L_init, int32_t *steps,
                           int32_t *ci, int32_t *cl, int32_t *cp, const int32_t *ni,
                           const int32_t *nl, const int32_t *np) {
    k_act_reset(ST(b), DT(b), B, T, D, S, halted, zH, zL, H_init, L_init, steps, ci, cl, cp, ni, nl, np);
}
static void cuda_act_update(trm_backend *b, int B, int32_t *steps, uint8_t *halted, const float *q,
                            int hmax, int training, int nac, float ep, uint64_t seed,
                            uint64_t sample0, const uint64_t *rng_step) {
    k_act_update(ST(b), B, steps, halted, q, hmax, training, nac, ep, seed, sample0, rng_step);
}
static void cuda_q_target(trm_backend *b, int B, float *t, const float *qn, const int32_t *steps, int hmax) {
    k_q_target(ST(b), B, t, qn, steps, hmax);
}
static void cuda_adam_atan2(trm_backend *b, float *p, const float *g, float *m, float *v, size_t n,
                            float lr, float wd, float b1, float b2, int64_t t) {
    k_adam_atan2(ST(b), p, g, m, v, n, lr, wd, b1, b2, t);
}
static void cuda_sign_sgd_sparse(trm_backend *b, float *w, int ndim, const int32_t *ids, const float *g, int n,
                                 float lr, float wd) {
    k_sign_sgd_sparse(ST(b), w, ndim, ids, g, n, lr, wd);
}
static void cuda_ema(trm_backend *b, float *s, const float *p, size_t n, float rate) { k_ema(ST(b), s, p, n, rate); }

/* ---- collectives (NCCL, on the backend's stream) ------------------------------------------ */

static int cuda_comm_init(trm_backend *b, struct trm_dist *d, trm_err *e) {
    if (CTX(b)->nccl) return 0;
    CTX(b)->nccl = trm_nccl_init(d, e);
    return CTX(b)->nccl ? 0 : -1;
}
static void cuda_allreduce_sum(trm_backend *b, float *buf, size_t n) {
    trm_nccl_allreduce_sum(CTX(b)->nccl, buf, n, ST(b));
}
static void cuda_allgather(trm_backend *b, const void *send, void *recv, size_t bytes) {
    trm_nccl_allgather(CTX(b)->nccl, send, recv, bytes, ST(b));
}

/* ---- graphs (the compile stage) ------------------------------------------------------------ */

static int cuda_capture_begin(trm_backend *b) {
    cuda_ctx *c = CTX(b);
    if (c->capturing) return -1;
    scratch_buf *t = &c->scratch[SCR_TUNE]; /* the plan stage's timing is over: give its output back */
    if (t->p) {
        CK(cudaStreamSynchronize(c->stream));
        CK(cudaFree(t->p));
        t->p = NULL, t->bytes = 0;
    }
    CK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
    c->capturing = 1;
    return 0;
}

static void *cuda_capture_end(trm_backend *b, size_t *nodes) {
    cuda_ctx *c = CTX(b);
    cudaGraph_t g = NULL;
    CK(cudaStreamEndCapture(c->stream, &g));
    c->capturing = 0;
    if (nodes) {
        size_t n = 0;
        CK(cudaGraphGetNodes(g, NULL, &n));
        *nodes = n;
    }
    cudaGraphExec_t ex = NULL;
    CK(cudaGraphInstantiate(&ex, g, 0));
    CK(cudaGraphDestroy(g));
    CK(cudaGraphUpload(ex, c->stream));
    return (void *)ex;
}

static void cuda_graph_launch(trm_backend *b, void *g) {
    CK(cudaGraphLaunch((cudaGraphExec_t)g, CTX(b)->stream));
}

static void cuda_graph_destroy(trm_backend *b, void *g) {
    if (g) CK(cudaGraphExecDestroy((cudaGraphExec_t)g));
}

static void cuda_mem_info(trm_backend *b, size_t *free_b, size_t *total_b) {
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess) cudaGetLastError();
    if (free_b) *free_b = f;
    if (total_b) *total_b = t;
}

/* ---- probe, creation, destruction ------------------------------------------------------------ */

static void cuda_destroy(trm_backend *b) {
    cuda_ctx *c = CTX(b);
    cudaStreamSynchronize(c->stream);
    trm_nccl_destroy(c->nccl);
    for (int i = 0; i < c->nplans; i++) plan_release(&c->plans[i]);
    for (int i = 0; i < SCR_COUNT; i++)
        if (c->scratch[i].p) cudaFree(c->scratch[i].p);
    cudaFree(c->workspace);
    cublasLtDestroy(c->lt);
    cudaStreamDestroy(c->stream);
    free(c);
    free(b);
}

int trm_cuda_probe(char *desc, size_t desc_len) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        n = 0;
    }
    if (desc && desc_len) {
        desc[0] = 0;
        size_t off = 0;
        for (int i = 0; i < n && off < desc_len; i++) {
            cudaDeviceProp p;
            if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
            off += (size_t)snprintf(desc + off, desc_len - off, "%scuda:%d %s, %.1f GiB, sm_%d%d, %d SMs",
                                    i ? "; " : "", i, p.name, p.totalGlobalMem / 1073741824.0,
                                    p.major, p.minor, p.multiProcessorCount);
        }
        if (n == 0) snprintf(desc, desc_len, "no CUDA device (or no driver) found");
    }
    return n;
}

trm_backend *trm_cuda_backend_create(int index, trm_err *e) {
    int n = trm_cuda_probe(NULL, 0);
    if (n <= 0) {
        trm_errf(e, "device=cuda: no CUDA device is visible (driver missing or no GPU)");
        return NULL;
    }
    if (index < 0) index = 0;
    if (index >= n) {
        trm_errf(e, "device=cuda:%d: only %d CUDA device%s (cuda:0..cuda:%d)", index, n, n == 1 ? "" : "s", n - 1);
        return NULL;
    }
    cudaError_t r = cudaSetDevice(index);
    if (r != cudaSuccess) {
        trm_errf(e, "device=cuda:%d: %s", index, cudaGetErrorString(r));
        return NULL;
    }
    cuda_ctx *c = (cuda_ctx *)xcalloc(1, sizeof *c);
    if (cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) != cudaSuccess ||
        cublasLtCreate(&c->lt) != CUBLAS_STATUS_SUCCESS ||
        cudaMalloc(&c->workspace, WORKSPACE_BYTES) != cudaSuccess) {
        trm_errf(e, "device=cuda:%d: could not create a stream, the cuBLASLt handle or its workspace", index);
        free(c);
        return NULL;
    }

    trm_backend *b = (trm_backend *)xcalloc(1, sizeof *b);
    trm_caps caps = TRM_CAPS_CUDA;
    b->name = "cuda";
    b->caps = caps;
    b->ctx = c;
    c->wgmma = env_flag("TRM_FLASH_WGMMA", 1) && k_flash_wgmma();
    c->deterministic = env_flag("TRM_DETERMINISTIC", 0);
    void *tma = k_gate_up_wgmma(); /* the TMA encoder, NULL where the Hopper kernels cannot run */
    c->gate_up_tma = env_flag("TRM_GATE_UP_WGMMA", 1) ? tma : NULL;
    /* TRM_FLASH_TMA=0: the attention forwards by cp.async (for measuring) */
    c->flash_tma = c->wgmma && env_flag("TRM_FLASH_TMA", 1) ? tma : NULL;
    /* TRM_FLASH_SHORT_BWD=0: short heads' backward by flash_bwd_kv_wg_kernel (for measuring) */
    c->flash_bwd_tma = c->wgmma && env_flag("TRM_FLASH_SHORT_BWD", 1) && k_flash_short_bwd_ok() ? tma : NULL;
    int tile = c->gate_up_tma && k_gate_up_tile_ok(); /* the tile kernel can run here (its limit raised once) */
    c->gate_up_tile = tile && env_flag("TRM_GATE_UP_TILE", 1);
    c->qkv_rope = tile && env_flag("TRM_QKV_ROPE", 1);
#define CUDA_OP(op) b->op = cuda_##op;
    /* every op, the optional ones included, but the command-stream counters (stream_stats: NULL) */
    TRM_OPS_REQUIRED(CUDA_OP) TRM_OPS_FUSED(CUDA_OP) TRM_OPS_FUSED_GPU(CUDA_OP) TRM_OPS_BF16_ACTS(CUDA_OP) TRM_OPS_COMPILE(CUDA_OP)
    TRM_OPS_DISTRIBUTED(CUDA_OP) TRM_OPS_MEM_INFO(CUDA_OP)
#undef CUDA_OP
    /* TRM_ATT_BWD_ROPE=0: RoPE's backward as its own pass after attention's (for measuring) */
    if (!env_flag("TRM_ATT_BWD_ROPE", 1)) b->attention_bwd_rope = NULL;
    /* TRM_TOKEN_MLP=0: mlp_t's unsaved token mixers through the separate ops (for measuring) */
    if (!env_flag("TRM_TOKEN_MLP", 1)) b->token_mlp_fwd = NULL;
    /* TRM_LINEAR_NORM=0: the output and down projections as a GEMM and rmsnorm_fwd's pass
     * (for measuring) instead of one kernel with the norm in its epilogue */
    if (!env_flag("TRM_LINEAR_NORM", 1)) b->linear_norm_fwd = NULL;
    /* its occupancy query and shared memory limit only where it may run */
    c->ln_clusters = b->linear_norm_fwd && c->gate_up_tma ? k_linear_norm_clusters() : 0;
    /* TRM_DOWN_SWIGLU=0: the down projection's dact by cuBLASLt, then swiglu_bwd's pass (for
     * measuring) */
    if (!env_flag("TRM_DOWN_SWIGLU", 1) || !c->gate_up_tma || !k_down_swiglu_ok()) b->down_swiglu_bwd = NULL;
    /* TRM_ATT_FWD_ROPE=0: RoPE as its own pass before the attention forward (for measuring) */
    if (!env_flag("TRM_ATT_FWD_ROPE", 1)) b->attention_fwd_rope = NULL;
    /* TRM_NORM_T=0: mlp_t's norm over T between two transposes (for measuring) */
    if (!env_flag("TRM_NORM_T", 1)) {
        b->rmsnorm_t_fwd = NULL;
        b->rmsnorm_t_bwd = NULL;
    }
    return b;
}
