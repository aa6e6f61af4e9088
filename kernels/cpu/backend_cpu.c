/* backend_cpu.c — the host backend: every op of trm/backend/backend.h on the CPU, GEMMs through
 * CBLAS (OpenBLAS or Accelerate), everything else as OpenMP loops over rows whose inner loops
 * gcc can vectorise. Numerics follow SPEC.md §2–5 (the float32 PyTorch reference): where
 * PyTorch rounds to float we round to float, where it works in double we do too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef TRM_ACCELERATE
#include <Accelerate/Accelerate.h>
#else
/* Keeps <complex.h> (and its macro I, a parameter name here) out of OpenBLAS's headers. */
#define FORCE_OPENBLAS_COMPLEX_STRUCT 1
#include <cblas.h>
#endif
#ifdef I
#undef I
#endif

#include "backend/backend.h"
#include "gemm_cpu.h"
#include "dist/dist.h"

/* Below this many elements a parallel region costs more than the loop itself. */
#define PAR_MIN 32768
/* Query rows per attention block: a block of scores (QB × T) stays in L2 for T ~ 1000. */
#define ATT_QB 64

typedef struct {
    float *scratch; /* per-call workspace, grown on demand; ops are called from one thread */
    size_t scratch_floats;
    trm_dist *dist; /* the run's process group once comm_init ran (MPI data plane) */
} cpu_ctx;

static int max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static float *scratch(trm_backend *be, size_t floats) {
    cpu_ctx *c = be->ctx;
    if (floats > c->scratch_floats) {
        free(c->scratch);
        c->scratch = xmalloc(floats * sizeof(float));
        c->scratch_floats = floats;
    }
    return c->scratch;
}

/* ---- a vectorised exp ------------------------------------------------------------------
 * glibc only offers SIMD expf under -ffast-math, which we refuse (it would break the float32
 * agreement elsewhere), and under -ftrapping-math gcc will not if-convert a scalar expf's
 * clamps, so this is written with GCC/clang vector extensions (8 lanes; narrower targets
 * split them). Cephes range reduction and polynomial, ≈1 ulp on the normal range. NaN falls
 * through the clamps; x ≤ −104 gives 0 (exp(−104) rounds to 0) and x ≥ ln(FLT_MAX) gives
 * ≈FLT_MAX instead of inf, harmless for what it feeds (softmax of x − max ≤ 0, silu,
 * sigmoid). 2^n is applied in two halves so subnormal results are right too. */
typedef float vf8 __attribute__((vector_size(32)));
typedef int32_t vi8 __attribute__((vector_size(32)));

static inline vf8 vf8_clamp(vf8 x, float lo, float hi) {
    vf8 vlo = {lo, lo, lo, lo, lo, lo, lo, lo}, vhi = {hi, hi, hi, hi, hi, hi, hi, hi};
    vi8 m = x < vlo;
    x = (vf8)(((vi8)x & ~m) | ((vi8)vlo & m));
    m = x > vhi;
    return (vf8)(((vi8)x & ~m) | ((vi8)vhi & m));
}

static inline vf8 vexp8(vf8 x) {
    const float magic = 12582912.0f; /* 1.5·2²³: adding it rounds to an integer */
    vf8 xc = vf8_clamp(x, -104.0f, 88.72283f);
    vf8 t = xc * 1.44269504088896341f + magic;
    vi8 n = (vi8)t - 0x4B400000; /* the integer in t's mantissa */
    vf8 fx = t - magic;
    vf8 r = xc - fx * 0.693359375f;
    r = r - fx * -2.12194440e-4f;
    vf8 z = r * r;
    vf8 y = r * 1.9875691500e-4f + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * z + r + 1.0f;
    vi8 n1 = n >> 1, n2 = n - n1;
    return y * (vf8)((n1 + 127) << 23) * (vf8)((n2 + 127) << 23);
}

/* y[i] = exp(a·x[i] + b); y may equal x. */
static void exp_affine(float *y, const float *x, int n, float a, float b) {
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

/* ---- memory -------------------------------------------------------------------------- */

static void *cpu_alloc(trm_backend *be, size_t bytes) {
    size_t n = bytes ? (bytes + 63) / 64 * 64 : 64;
    if (n < bytes) return NULL; /* overflow */
    void *p = NULL;
    if (posix_memalign(&p, 64, n) != 0) return NULL;
    memset(p, 0, n);
    return p;
}

static void cpu_free(trm_backend *be, void *p) {
    free(p);
}

static void cpu_memcpy(trm_backend *be, void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src) memmove(dst, src, bytes);
}

static void cpu_zero(trm_backend *be, void *p, size_t bytes) {
    if (bytes) memset(p, 0, bytes);
}

static void cpu_sync(trm_backend *be) { (void)be; }

static void cpu_destroy(trm_backend *be) {
    if (!be) return;
    cpu_ctx *c = be->ctx;
    if (c) free(c->scratch);
    free(c);
    free(be);
}

/* ---- GEMM ---------------------------------------------------------------------------- */

static void scale_matrix(float *C, int M, int N, int ldc, float beta) {
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        for (int j = 0; j < N; j++) c[j] = beta == 0.0f ? 0.0f : beta * c[j];
    }
}

static int in_parallel(void) {
#ifdef _OPENMP
    return omp_in_parallel();
#else
    return 0;
#endif
}

/* trm's own GEMM (gemm_cpu.c) where it exists; TRM_CPU_GEMM=blas hands every product to the
 * BLAS instead (to compare them: bench/cpu.sh), TRM_CPU_GEMM=avx2 keeps to the AVX2 kernel. */
static int own_gemm(void) {
    const char *e = getenv("TRM_CPU_GEMM");
    return trm_gemm_cpu_available() && !(e && !strcmp(e, "blas"));
}

/* bf16: both operands rounded to bf16, fp32 sums (forward_dtype=bfloat16; the policy only sets
 * it where trm_gemm_cpu_bf16() says the CPU can). Attention's per-head products stay fp32:
 * they are small, and rounding their operands while packing cost more than the bf16 products
 * saved (device host: tiny_att 198 ms with them in bf16 against 156 in fp32). */
static void sgemm1(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc, int bf16) {
    if (K <= 0 || alpha == 0.0f) {
        scale_matrix(C, M, N, ldc, beta);
        return;
    }
    if (own_gemm()) { /* one thread inside a parallel region, all of them outside */
        trm_gemm_cpu(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, in_parallel() ? 1 : max_threads(), bf16);
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void cpu_gemm(trm_backend *be, trm_gemm_dt dt, int ta, int tb, int M, int N, int K, float alpha,
                     const void *Av, int lda, int64_t sA, const void *Bv, int ldb, int64_t sB,
                     float beta, void *Cv, int ldc, int64_t sC, int batch) {
    if (M <= 0 || N <= 0 || batch <= 0) return;
    if (dt.a != TRM_F32 || dt.b != TRM_F32 || dt.c != TRM_F32) {
        fprintf(stderr, "trm: cpu: a bf16 GEMM operand reached the cpu backend (internal error)\n");
        abort();
    }
    const float *A = Av, *B = Bv;
    float *C = Cv;
    /* Many small matrices: one whole GEMM per thread (BLAS then runs single-threaded inside
     * the parallel region). Only when the outputs do not overlap. */
    int disjoint = sC >= (int64_t)(M - 1) * ldc + N;
    double flops = 2.0 * M * N * (K > 0 ? K : 1);
    if (batch > 1 && disjoint && (batch >= max_threads() || flops < 4e6)) {
#pragma omp parallel for schedule(dynamic)
        for (int i = 0; i < batch; i++)
            sgemm1(ta, tb, M, N, K, alpha, A + i * sA, lda, B + i * sB, ldb, beta, C + i * sC,
                   ldc, be->use_bf16);
        return;
    }
    /* Outside any parallel region, so BLAS threads each product itself. */
    for (int i = 0; i < batch; i++)
        sgemm1(ta, tb, M, N, K, alpha, A + i * sA, lda, B + i * sB, ldb, beta, C + i * sC, ldc, be->use_bf16);
}

/* ---- elementwise --------------------------------------------------------------------- */

/* Activations are fp32 here (caps.bf16_acts is 0): the void pointers of backend.h are floats. */
static void cpu_add(trm_backend *be, void *yv, const void *x1v, const void *x2v, size_t n) {
    float *y = yv;
    const float *x1 = x1v, *x2 = x2v;
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = x1[i] + x2[i];
}

static void cpu_axpy(trm_backend *be, void *yv, const void *xv, float alpha, size_t n) {
    float *y = yv;
    const float *x = xv;
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

#define TR_TILE 32
static void cpu_transpose(trm_backend *be, void *outv, int ldo, const void *inv, int ldi, int batch, int rows,
                          int cols) {
    float *out = outv;
    const float *in = inv;
    size_t mat_in = (size_t)rows * ldi, mat_out = (size_t)cols * ldo;
    int tiles = (rows + TR_TILE - 1) / TR_TILE;
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)rows * cols * batch >= PAR_MIN)
    for (int b = 0; b < batch; b++)
        for (int ti = 0; ti < tiles; ti++) {
            const float *src = in + b * mat_in;
            float *dst = out + b * mat_out;
            int i0 = ti * TR_TILE, i1 = i0 + TR_TILE < rows ? i0 + TR_TILE : rows;
            for (int j0 = 0; j0 < cols; j0 += TR_TILE) {
                int j1 = j0 + TR_TILE < cols ? j0 + TR_TILE : cols;
                for (int j = j0; j < j1; j++) {
                    for (int i = i0; i < i1; i++) dst[(size_t)j * ldo + i] = src[(size_t)i * ldi + j];
                    if (i1 == rows)
                        for (int i = rows; i < ldo; i++) dst[(size_t)j * ldo + i] = 0.0f;
                }
            }
        }
}

/* ---- RMS norm -------------------------------------------------------------------------- */

/* PyTorch squares in float and takes the mean with wide accumulation, then adds eps and
 * takes rsqrt in float. y may alias x or res: each element is read before it is written. */
static void rms_row(float *y, float *rstd, const float *x, const float *res, int dim, float eps) {
    double ss = 0.0;
    if (res) {
#pragma omp simd reduction(+ : ss)
        for (int d = 0; d < dim; d++) {
            float v = x[d] + res[d];
            ss += (double)(v * v);
        }
    } else {
#pragma omp simd reduction(+ : ss)
        for (int d = 0; d < dim; d++) ss += (double)(x[d] * x[d]);
    }
    float var = (float)(ss / dim);
    float r = 1.0f / sqrtf(var + eps);
    if (rstd) *rstd = r;
    if (res)
        for (int d = 0; d < dim; d++) y[d] = (x[d] + res[d]) * r;
    else
        for (int d = 0; d < dim; d++) y[d] = x[d] * r;
}

static void cpu_rmsnorm_fwd(trm_backend *be, void *yv, float *rstd, const void *xv,
                            const void *resv, int rows, int dim, int ld, float eps) {
    float *y = yv;
    const float *x = xv, *res = resv;
    if (dim <= 0) return;
#pragma omp parallel for schedule(static) if ((size_t)rows * dim >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        size_t o = (size_t)r * ld;
        rms_row(y + o, rstd ? rstd + r : NULL, x + o, res ? res + o : NULL, dim, eps);
        for (int d = dim; d < ld; d++) y[o + d] = 0.0f;
    }
}

static void cpu_rmsnorm_bwd(trm_backend *be, void *dxv, const void *dyv, const void *yv,
                            const float *rstd, int rows, int dim, int ld) {
    float *dx = dxv;
    const float *dy = dyv, *y = yv;
    if (dim <= 0) return;
#pragma omp parallel for schedule(static) if ((size_t)rows * dim >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        size_t o = (size_t)r * ld;
        const float *dyr = dy + o, *yr = y + o;
        float *dxr = dx + o;
        double dot = 0.0;
#pragma omp simd reduction(+ : dot)
        for (int d = 0; d < dim; d++) dot += (double)dyr[d] * yr[d];
        float mean = (float)(dot / dim), s = rstd[r];
        for (int d = 0; d < dim; d++) dxr[d] = s * (dyr[d] - yr[d] * mean);
        for (int d = dim; d < ld; d++) dxr[d] = 0.0f;
    }
}

/* ---- SwiGLU ---------------------------------------------------------------------------- */

static void cpu_swiglu_fwd(trm_backend *be, void *outv, const void *guv, int rows, int I) {
    float *out = outv;
    const float *gu = guv;
#pragma omp parallel for schedule(static) if ((size_t)rows * I >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *restrict g = gu + (size_t)r * 2 * I;
        const float *restrict u = g + I;
        float *restrict o = out + (size_t)r * I;
        exp_affine(o, g, I, -1.0f, 0.0f);
        for (int i = 0; i < I; i++) o[i] = (g[i] / (1.0f + o[i])) * u[i];
    }
}

/* PyTorch: du = dout·silu(g); dg = (dout·u)·σ·(1 + g·(1 − σ)). */
static void cpu_swiglu_bwd(trm_backend *be, void *dguv, void *outv, const void *doutv, const void *guv,
                           int rows, int I) {
    float *dgu = dguv, *out = outv;
    const float *dout = doutv, *gu = guv;
#pragma omp parallel for schedule(static) if ((size_t)rows * I >= PAR_MIN)
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

/* ---- RoPE ------------------------------------------------------------------------------ */

/* x' = x·cos + rot(x)·sin with rot(x) = [−x₂, x₁]: element pairs (j, j+h) only mix with
 * each other, so the rotation is done in place pair by pair. */
static void rope_head(float *restrict x, const float *restrict c, const float *restrict s,
                      int h) {
    for (int j = 0; j < h; j++) {
        float a = x[j], b = x[j + h];
        x[j] = a * c[j] - b * s[j];
        x[j + h] = b * c[j + h] + a * s[j + h];
    }
}

/* The transpose: dx = dy·cos + rotᵀ(dy·sin), rotᵀ(z) = [z₂, −z₁]. */
static void rope_head_t(float *restrict x, const float *restrict c, const float *restrict s,
                        int h) {
    for (int j = 0; j < h; j++) {
        float a = x[j], b = x[j + h];
        x[j] = a * c[j] + b * s[j + h];
        x[j + h] = b * c[j + h] - a * s[j];
    }
}

static void rope_apply(float *qkv, const float *cos, const float *sin, int B, int T, int H,
                       int hd, int transpose) {
    int rows = B * T;
#pragma omp parallel for schedule(static) if ((size_t)rows * H * hd >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        int t = r % T;
        float *base = qkv + (size_t)r * 3 * H * hd;
        const float *c = cos + (size_t)t * hd, *s = sin + (size_t)t * hd;
        for (int k = 0; k < 2 * H; k++) {
            if (transpose)
                rope_head_t(base + (size_t)k * hd, c, s, hd / 2);
            else
                rope_head(base + (size_t)k * hd, c, s, hd / 2);
        }
    }
}

static void cpu_rope_fwd(trm_backend *be, void *qkv, const float *cos, const float *sin, int B,
                         int T, int H, int hd) {
    rope_apply(qkv, cos, sin, B, T, H, hd, 0);
}

static void cpu_rope_bwd(trm_backend *be, void *dqkv, const float *cos, const float *sin, int B,
                         int T, int H, int hd) {
    rope_apply(dqkv, cos, sin, B, T, H, hd, 1);
}

/* ---- attention --------------------------------------------------------------------------
 * Never materialises the B·H·T·T probabilities: a block of ATT_QB query rows against all T
 * keys at a time, in a per-thread scratch. Forward parallelises over (b, h, query block);
 * backward over (b, h) because dK and dV sum over query blocks. When there are fewer tasks
 * than threads the loop runs serially and BLAS uses the threads instead. */

typedef struct {
    int T, H, hd;
    size_t ld;   /* row stride of qkv / dqkv: 3·H·hd */
    size_t ldo;  /* row stride of out / dout: H·hd */
    float scale; /* 1/√hd */
} att_dims;

static void softmax_rows(float *S, float *lse, int nb, int T) {
    for (int i = 0; i < nb; i++) {
        float *row = S + (size_t)i * T;
        float mx = row[0];
#pragma omp simd reduction(max : mx)
        for (int j = 1; j < T; j++) mx = row[j] > mx ? row[j] : mx;
        exp_affine(row, row, T, 1.0f, -mx);
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < T; j++) sum += row[j];
        float inv = 1.0f / sum;
        for (int j = 0; j < T; j++) row[j] *= inv;
        lse[i] = mx + logf(sum);
    }
}

static void att_fwd_block(const att_dims *d, float *out, float *lse, const float *qkv, int h,
                          int i0, float *S) {
    int T = d->T, hd = d->hd, nb = T - i0 < ATT_QB ? T - i0 : ATT_QB;
    const float *Q = qkv + (size_t)i0 * d->ld + (size_t)h * hd;
    const float *K = qkv + (size_t)(d->H + h) * hd;
    const float *V = qkv + (size_t)(2 * d->H + h) * hd;
    sgemm1(0, 1, nb, T, hd, d->scale, Q, (int)d->ld, K, (int)d->ld, 0.0f, S, T, 0);
    softmax_rows(S, lse + i0, nb, T);
    sgemm1(0, 0, nb, hd, T, 1.0f, S, T, V, (int)d->ld, 0.0f,
           out + (size_t)i0 * d->ldo + (size_t)h * hd, (int)d->ldo, 0);
}

static void att_fwd_task(const att_dims *d, float *out, float *lse, const float *qkv, int k,
                         int nqb, float *S) {
    int T = d->T, H = d->H, b = k / (H * nqb), h = (k / nqb) % H, qb = k % nqb;
    att_fwd_block(d, out + (size_t)b * T * d->ldo, lse + ((size_t)b * H + h) * T,
                  qkv + (size_t)b * T * d->ld, h, qb * ATT_QB, S);
}

static void cpu_attention_fwd(trm_backend *be, void *outv, float *lse, const void *qkvv, int B,
                              int T, int H, int hd) {
    float *out = outv;
    const float *qkv = qkvv;
    if (B <= 0 || T <= 0 || H <= 0 || hd <= 0) return;
    att_dims d = {T, H, hd, (size_t)3 * H * hd, (size_t)H * hd, 1.0f / sqrtf((float)hd)};
    int nqb = (T + ATT_QB - 1) / ATT_QB, tasks = B * H * nqb, nt = max_threads();
    size_t per = (size_t)ATT_QB * T;
    float *S = scratch(be, per * nt);
    if (tasks >= nt && nt > 1) {
#pragma omp parallel for schedule(dynamic)
        for (int k = 0; k < tasks; k++)
            att_fwd_task(&d, out, lse, qkv, k, nqb, S + per * thread_id());
    } else {
        for (int k = 0; k < tasks; k++) att_fwd_task(&d, out, lse, qkv, k, nqb, S);
    }
}

/* One (b, h): recompute P = exp(S − lse) block by block; dV += Pᵀ dO; dP = dO Vᵀ;
 * dS = P ∘ (dP − rowsum(dO ∘ O)); dQ = dS K/√hd; dK += dSᵀ Q/√hd. */
static void att_bwd_head(const att_dims *d, float *dqkv, const float *dout, const float *qkv,
                         const float *out, const float *lse, int h, float *P, float *dP) {
    int T = d->T, hd = d->hd, ld = (int)d->ld, ldo = (int)d->ldo;
    const float *K = qkv + (size_t)(d->H + h) * hd, *V = qkv + (size_t)(2 * d->H + h) * hd;
    float *dK = dqkv + (size_t)(d->H + h) * hd, *dV = dqkv + (size_t)(2 * d->H + h) * hd;
    for (int i0 = 0; i0 < T; i0 += ATT_QB) {
        int nb = T - i0 < ATT_QB ? T - i0 : ATT_QB;
        float beta = i0 ? 1.0f : 0.0f;
        const float *Q = qkv + (size_t)i0 * ld + (size_t)h * hd;
        const float *dO = dout + (size_t)i0 * ldo + (size_t)h * hd;
        const float *O = out + (size_t)i0 * ldo + (size_t)h * hd;
        sgemm1(0, 1, nb, T, hd, d->scale, Q, ld, K, ld, 0.0f, P, T, 0);
        for (int i = 0; i < nb; i++) {
            float *row = P + (size_t)i * T;
            exp_affine(row, row, T, 1.0f, -lse[i0 + i]);
        }
        sgemm1(1, 0, T, hd, nb, 1.0f, P, T, dO, ldo, beta, dV, ld, 0);
        sgemm1(0, 1, nb, T, hd, 1.0f, dO, ldo, V, ld, 0.0f, dP, T, 0);
        for (int i = 0; i < nb; i++) {
            const float *o = O + (size_t)i * ldo, *g = dO + (size_t)i * ldo;
            float dr = 0.0f;
#pragma omp simd reduction(+ : dr)
            for (int c = 0; c < hd; c++) dr += g[c] * o[c];
            float *restrict ds = dP + (size_t)i * T;
            const float *restrict p = P + (size_t)i * T;
            for (int j = 0; j < T; j++) ds[j] = p[j] * (ds[j] - dr);
        }
        float *dQ = dqkv + (size_t)i0 * ld + (size_t)h * hd;
        sgemm1(0, 0, nb, hd, T, d->scale, dP, T, K, ld, 0.0f, dQ, ld, 0);
        sgemm1(1, 0, T, hd, nb, d->scale, dP, T, Q, ld, beta, dK, ld, 0);
    }
}

static void att_bwd_task(const att_dims *d, float *dqkv, const float *dout, const float *qkv,
                         const float *out, const float *lse, int k, float *buf) {
    int T = d->T, H = d->H, b = k / H, h = k % H;
    size_t qo = (size_t)b * T * d->ld, oo = (size_t)b * T * d->ldo;
    att_bwd_head(d, dqkv + qo, dout + oo, qkv + qo, out + oo, lse + ((size_t)b * H + h) * T, h,
                 buf, buf + (size_t)ATT_QB * T);
}

static void cpu_attention_bwd(trm_backend *be, void *dqkvv, const void *doutv, const void *qkvv,
                              const void *outv, const float *lse, int B, int T, int H, int hd) {
    float *dqkv = dqkvv;
    const float *dout = doutv, *qkv = qkvv, *out = outv;
    if (B <= 0 || T <= 0 || H <= 0 || hd <= 0) return;
    att_dims d = {T, H, hd, (size_t)3 * H * hd, (size_t)H * hd, 1.0f / sqrtf((float)hd)};
    int tasks = B * H, nt = max_threads();
    size_t per = (size_t)2 * ATT_QB * T;
    float *buf = scratch(be, per * nt);
    if (tasks >= nt && nt > 1) {
#pragma omp parallel for schedule(dynamic)
        for (int k = 0; k < tasks; k++)
            att_bwd_task(&d, dqkv, dout, qkv, out, lse, k, buf + per * thread_id());
    } else {
        for (int k = 0; k < tasks; k++) att_bwd_task(&d, dqkv, dout, qkv, out, lse, k, buf);
    }
}

/* ---- bias ------------------------------------------------------------------------------- */

static void cpu_bias_fwd(trm_backend *be, float *y, const float *bias, int rows, int cols,
                         int ld) {
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        float *restrict yr = y + (size_t)r * ld;
        for (int c = 0; c < cols; c++) yr[c] += bias[c];
    }
}

/* Column blocks per thread, rows summed in order into double accumulators: no races and
 * the same answer for any thread count. */
#define BIAS_CB 64
static void cpu_bias_bwd(trm_backend *be, float *dbias, const float *dy, int rows, int cols,
                         int ld) {
    int nblk = (cols + BIAS_CB - 1) / BIAS_CB;
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= PAR_MIN)
    for (int k = 0; k < nblk; k++) {
        int c0 = k * BIAS_CB, n = cols - c0 < BIAS_CB ? cols - c0 : BIAS_CB;
        double acc[BIAS_CB] = {0};
        for (int r = 0; r < rows; r++) {
            const float *yr = dy + (size_t)r * ld + c0;
            for (int c = 0; c < n; c++) acc[c] += yr[c];
        }
        for (int c = 0; c < n; c++) dbias[c0 + c] += (float)acc[c];
    }
}

/* ---- embeddings -------------------------------------------------------------------------- */

#define EMB_POS_SCALE 0.707106781f

static void embed_row(float *restrict o, const trm_embed_args *a, int b, int t) {
    int D = a->D;
    if (t < a->P) {
        const float *pw = a->ndim > 0 && a->puzzle_ids
                              ? a->puz_w + (size_t)a->puzzle_ids[b] * a->ndim : NULL;
        for (int d = 0; d < D; d++) {
            int k = t * D + d;
            o[d] = pw && k < a->ndim ? pw[k] : 0.0f;
        }
    } else {
        const float *tw = a->tok_w + (size_t)a->tokens[(size_t)b * a->S + (t - a->P)] * D;
        memcpy(o, tw, (size_t)D * sizeof(float));
    }
    if (a->pos_w) {
        const float *p = a->pos_w + (size_t)t * D;
        for (int d = 0; d < D; d++) o[d] = EMB_POS_SCALE * (o[d] + p[d]);
    }
    for (int d = 0; d < D; d++) o[d] *= a->scale;
}

static void cpu_embed_fwd(trm_backend *be, void *outv, const trm_embed_args *a) {
    float *out = outv;
    int T = a->P + a->S, rows = a->B * T;
#pragma omp parallel for schedule(static) if ((size_t)rows * a->D >= PAR_MIN)
    for (int r = 0; r < rows; r++) embed_row(out + (size_t)r * a->D, a, r / T, r % T);
}

/* The gradient reaching the summed embedding, in PyTorch's order: ·scale, then ·0.7071. */
static inline float embed_g(const trm_embed_args *a, float dout) {
    float g = dout * a->scale;
    return a->pos_w ? g * EMB_POS_SCALE : g;
}

/* Token rows: each thread owns a range of the D columns, so repeated tokens never race and
 * sums happen in (b, s) order whatever the thread count. */
static void embed_bwd_tok(const float *dout, const trm_embed_args *a, float *d_tok_w) {
    int D = a->D, T = a->P + a->S, nt = max_threads();
    int chunks = nt > 1 && (size_t)a->B * a->S * D >= PAR_MIN ? nt : 1;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int k = 0; k < chunks; k++) {
        int d0 = (int)((int64_t)D * k / chunks), d1 = (int)((int64_t)D * (k + 1) / chunks);
        for (int b = 0; b < a->B; b++)
            for (int s = 0; s < a->S; s++) {
                const float *g = dout + ((size_t)b * T + a->P + s) * D;
                float *w = d_tok_w + (size_t)a->tokens[(size_t)b * a->S + s] * D;
                for (int d = d0; d < d1; d++) w[d] += embed_g(a, g[d]);
            }
    }
}

static void cpu_embed_bwd(trm_backend *be, const void *doutv, const trm_embed_args *a,
                          float *d_tok_w, float *d_pos_w, float *d_puz_rows) {
    const float *dout = doutv;
    int D = a->D, T = a->P + a->S;
    if (d_tok_w) embed_bwd_tok(dout, a, d_tok_w);
    if (a->pos_w && d_pos_w) {
#pragma omp parallel for schedule(static) if ((size_t)a->B * T * D >= PAR_MIN)
        for (int t = 0; t < T; t++) {
            float *w = d_pos_w + (size_t)t * D;
            for (int b = 0; b < a->B; b++) {
                const float *g = dout + ((size_t)b * T + t) * D;
                for (int d = 0; d < D; d++) w[d] += embed_g(a, g[d]);
            }
        }
    }
    if (a->ndim > 0 && d_puz_rows) {
        int ndim = a->ndim;
        for (int b = 0; b < a->B; b++) {
            const float *g = dout + (size_t)b * T * D;
            float *o = d_puz_rows + (size_t)b * ndim;
            /* Only the first P·D values of a sample exist; a wider ndim is invalid input. */
            int n = ndim < a->P * D ? ndim : a->P * D;
            for (int k = 0; k < n; k++) o[k] = embed_g(a, g[k]);
            for (int k = n; k < ndim; k++) o[k] = 0.0f;
        }
    }
}

/* ---- loss head --------------------------------------------------------------------------- */

static int argmax_row(const float *x, int V) {
    int best = 0;
    for (int j = 1; j < V; j++)
        if (x[j] > x[best] || (isnan(x[j]) && !isnan(x[best]))) best = j;
    return best;
}

/* Stablemax CE of one row in double; writes gs·dCE/dx into dx when dx != NULL. */
static double stablemax_row(const float *x, int V, int label, float *dx, double gs) {
    double sum = 0.0;
    for (int j = 0; j < V; j++) {
        double v = x[j];
        sum += v < 0 ? 1.0 / (1.0 - v + 1e-30) : v + 1.0;
    }
    double xl = x[label];
    double sl = xl < 0 ? 1.0 / (1.0 - xl + 1e-30) : xl + 1.0;
    if (dx) {
        for (int j = 0; j < V; j++) {
            double v = x[j], q = 1.0 - v + 1e-30;
            double ds = v < 0 ? 1.0 / (q * q) : 1.0;
            double g = ds / sum - (j == label ? ds / sl : 0.0);
            dx[j] = (float)(gs * g);
        }
    }
    return -log(sl / sum);
}

/* Ordinary softmax CE in float32 (PyTorch's log_softmax with max subtraction). */
static double softmax_row(const float *x, int V, int label, float *dx, double gs) {
    float mx = x[0];
    for (int j = 1; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    float sum = 0.0f;
    for (int j = 0; j < V; j++) sum += expf(x[j] - mx);
    float lse = logf(sum);
    if (dx)
        for (int j = 0; j < V; j++) {
            float p = expf(x[j] - mx) / sum;
            dx[j] = (float)(gs * ((double)p - (j == label ? 1.0 : 0.0)));
        }
    return -(double)((x[label] - mx) - lse);
}

static double bce_logits(double x, double t) {
    return (x > 0 ? x : 0.0) - x * t + log1p(exp(-fabs(x)));
}

static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

/* Labels other than IGNORE that fall outside [0, V) are treated as ignored: no crash. */
static inline int label_ok(int32_t l, int V) { return l >= 0 && l < V; }

/* Row r = b·S + s of the labels is row b·(P+S) + P + s of the logits. */
static inline size_t logit_row(const trm_loss_args *a, int r) {
    return ((size_t)(r / a->S) * (a->P + a->S) + a->P + r % a->S) * a->V;
}

static void loss_rows(const trm_loss_args *a, const int *n, double *ce, uint8_t *corr) {
    int V = a->V, rows = a->B * a->S;
#pragma omp parallel for schedule(static) if ((size_t)rows * V >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *x = a->logits + logit_row(a, r);
        int32_t l = a->labels[r];
        int pred = argmax_row(x, V), m = label_ok(l, V);
        float *dx = a->dlogits ? a->dlogits + logit_row(a, r) : NULL;
        if (a->preds) a->preds[r] = pred;
        corr[r] = (uint8_t)(m && pred == l);
        ce[r] = 0.0;
        if (!m) {
            if (dx) memset(dx, 0, (size_t)V * sizeof(float));
            continue;
        }
        int div = n[r / a->S] > 1 ? n[r / a->S] : 1;
        double gs = (double)a->grad_scale / div;
        ce[r] = a->loss_type == TRM_LOSS_SOFTMAX ? softmax_row(x, V, l, dx, gs)
                                                : stablemax_row(x, V, l, dx, gs);
    }
}

static void loss_sample(const trm_loss_args *a, int b, int n, const double *ce,
                        const uint8_t *corr) {
    int div = n > 1 ? n : 1, ncorr = 0;
    double lm = 0.0;
    for (int s = 0; s < a->S; s++) {
        lm += ce[(size_t)b * a->S + s] / div;
        ncorr += corr[(size_t)b * a->S + s];
    }
    int seq_ok = ncorr == n;
    double qh = a->q[b * 2], qc = a->q[b * 2 + 1];
    double *m = a->metrics;
    int valid = a->halted[b] && n > 0;
    m[TRM_M_COUNT] += valid;
    m[TRM_M_ACCURACY] += valid ? (double)ncorr / div : 0.0;
    m[TRM_M_EXACT_ACCURACY] += valid && seq_ok;
    m[TRM_M_Q_HALT_ACCURACY] += valid && ((qh >= 0) == seq_ok);
    m[TRM_M_STEPS] += valid ? a->steps[b] : 0;
    m[TRM_M_LM_LOSS] += lm;
    m[TRM_M_Q_HALT_LOSS] += bce_logits(qh, seq_ok);
    if (a->q_target) m[TRM_M_Q_CONTINUE_LOSS] += bce_logits(qc, a->q_target[b]);
    if (a->dq) {
        a->dq[b * 2] = (float)(a->grad_scale * 0.5 * (sigmoid_d(qh) - seq_ok));
        a->dq[b * 2 + 1] =
            a->q_target ? (float)(a->grad_scale * 0.5 * (sigmoid_d(qc) - a->q_target[b])) : 0.0f;
    }
}

static void cpu_loss_head(trm_backend *be, const trm_loss_args *a) {
    if (a->B <= 0 || a->S <= 0 || a->V <= 0 || a->P < 0) return;
    size_t rows = (size_t)a->B * a->S;
    if (a->dlogits && a->P > 0) /* the puzzle positions get no gradient */
        for (int b = 0; b < a->B; b++)
            memset(a->dlogits + (size_t)b * (a->P + a->S) * a->V, 0,
                   (size_t)a->P * a->V * sizeof(float));
    int *n = xcalloc((size_t)a->B, sizeof(int));
    double *ce = xmalloc(rows * sizeof(double));
    uint8_t *corr = xmalloc(rows);
    for (size_t r = 0; r < rows; r++) n[r / a->S] += label_ok(a->labels[r], a->V);
    loss_rows(a, n, ce, corr);
    for (int b = 0; b < a->B; b++) loss_sample(a, b, n[b], ce, corr);
    free(n);
    free(ce);
    free(corr);
}

/* ---- ACT ---------------------------------------------------------------------------------- */

static void fill_rows(float *z, const float *v, int T, int D) {
    for (int t = 0; t < T; t++) memcpy(z + (size_t)t * D, v, (size_t)D * sizeof(float));
}

static void cpu_act_reset(trm_backend *be, int B, int T, int D, int S, const uint8_t *halted,
                          void *zHv, void *zLv, const float *H_init, const float *L_init,
                          int32_t *steps, int32_t *cur_inputs, int32_t *cur_labels,
                          int32_t *cur_pid, const int32_t *new_inputs, const int32_t *new_labels,
                          const int32_t *new_pid) {
    float *zH = zHv, *zL = zLv;
    size_t TD = (size_t)T * D;
    for (int b = 0; b < B; b++) {
        if (!halted[b]) continue;
        if (zH) fill_rows(zH + b * TD, H_init, T, D);
        if (zL) fill_rows(zL + b * TD, L_init, T, D);
        steps[b] = 0;
        size_t so = (size_t)b * S, sb = (size_t)S * sizeof(int32_t);
        if (cur_inputs && new_inputs) memcpy(cur_inputs + so, new_inputs + so, sb);
        if (cur_labels && new_labels) memcpy(cur_labels + so, new_labels + so, sb);
        if (cur_pid && new_pid) cur_pid[b] = new_pid[b];
    }
}

static void cpu_act_update(trm_backend *be, int B, int32_t *steps, uint8_t *halted,
                           const float *q, int halt_max_steps, int training,
                           int no_act_continue, float explore_prob, uint64_t seed,
                           uint64_t sample0, const uint64_t *rng_step) {
    int need_q = training && halt_max_steps > 1; /* q may be NULL otherwise */
    for (int b = 0; b < B; b++) {
        steps[b] += 1;
        halted[b] = (uint8_t)trm_act_halts(steps[b], halt_max_steps, training, no_act_continue,
                                           need_q ? q[b * 2] : 0.0f, need_q ? q[b * 2 + 1] : 0.0f,
                                           explore_prob, seed, *rng_step, sample0 + (uint64_t)b);
    }
}

/* sigmoid(last ? q_halt' : max(q_halt', q_continue')) in float32, as torch.sigmoid does. */
static void cpu_q_target(trm_backend *be, int B, float *target, const float *q_next,
                         const int32_t *steps, int halt_max_steps) {
    for (int b = 0; b < B; b++) {
        float qh = q_next[b * 2], qc = q_next[b * 2 + 1];
        float x = steps[b] >= halt_max_steps ? qh : (qc > qh || isnan(qc) ? qc : qh);
        target[b] = 1.0f / (1.0f + expf(-x));
    }
}

/* ---- optimisers ---------------------------------------------------------------------------- */

static void cpu_adam_atan2(trm_backend *be, float *p, const float *g, float *m, float *v, size_t n,
                           float lr, float wd, float beta1, float beta2, int64_t t) {
    float bc1 = (float)(1.0 - pow((double)beta1, (double)t));
    float bc2s = (float)sqrt(1.0 - pow((double)beta2, (double)t));
    float decay = (float)(1.0 - (double)lr * wd), w1 = 1.0f - beta1, w2 = 1.0f - beta2;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i], mi = m[i] + w1 * (gi - m[i]), vi = v[i] + w2 * (gi * gi - v[i]);
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - lr * atan2f(mi / bc1, sqrtf(vi) / bc2s);
    }
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* Rows are grouped by id through a sort of (id, position) keys, so each id's gradient sums
 * its rows in batch order (as scatter_add does) and the groups update disjoint rows. */
static void cpu_sign_sgd_sparse(trm_backend *be, float *weights, int ndim, const int32_t *ids,
                                const float *grad_rows, int n, float lr, float wd) {
    if (n <= 0 || ndim <= 0) return;
    int64_t *key = xmalloc((size_t)n * sizeof(int64_t));
    int m = 0;
    for (int i = 0; i < n; i++)
        if (ids[i] >= 0) key[m++] = ((int64_t)ids[i] << 32) | (uint32_t)i;
    qsort(key, (size_t)m, sizeof(int64_t), cmp_i64);
    int *start = xmalloc(((size_t)m + 1) * sizeof(int)), ng = 0;
    for (int i = 0; i < m; i++)
        if (i == 0 || (key[i] >> 32) != (key[i - 1] >> 32)) start[ng++] = i;
    start[ng] = m;
    float decay = (float)(1.0 - (double)lr * wd);
#pragma omp parallel for schedule(static) if ((size_t)m * ndim >= PAR_MIN)
    for (int k = 0; k < ng; k++) {
        float *w = weights + (size_t)(key[start[k]] >> 32) * ndim;
        for (int d = 0; d < ndim; d++) {
            float s = 0.0f;
            for (int i = start[k]; i < start[k + 1]; i++)
                s += grad_rows[(size_t)(key[i] & 0xffffffff) * ndim + d];
            float sg = (float)((s > 0.0f) - (s < 0.0f));
            w[d] = w[d] * decay - lr * sg;
        }
    }
    free(start);
    free(key);
}

static void cpu_ema(trm_backend *be, float *shadow, const float *p, size_t n, float rate) {
    float a = (float)(1.0 - (double)rate);
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) shadow[i] = a * p[i] + rate * shadow[i];
}

/* ---- probe and creation --------------------------------------------------------------------- */

/* CPU model from /proc/cpuinfo (Linux); leaves out empty elsewhere. */
static void cpu_model_name(char *out, size_t len) {
    out[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *c = strchr(line, ':');
        if (!c) break;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        size_t n = strcspn(c, "\r\n");
        if (n >= len) n = len - 1;
        memcpy(out, c, n);
        out[n] = 0;
        break;
    }
    fclose(f);
}

/* Declared for the registry (backend_registry.c), which lists this backend. */
/* Host memory for the out-of-memory report: what is available now, of the machine's total. */
static void cpu_mem_info(trm_backend *be, size_t *free_b, size_t *total_b) {
    (void)be;
    if (free_b) *free_b = (size_t)trm_host_memory_available();
    if (total_b) *total_b = (size_t)trm_host_memory_bytes();
}

/* ---- collectives: MPI on host memory ------------------------------------------------------ */

#ifdef TRM_HAVE_MPI
static int cpu_comm_init(trm_backend *be, trm_dist *d, trm_err *e) {
    if (!d->mpi) return trm_errf(e, "cpu backend: the MPI world is not connected");
    ((cpu_ctx *)be->ctx)->dist = d;
    return 0;
}

static void fatal_collective(const trm_err *e) {
    fprintf(stderr, "trm: %s\n", e->msg);
    exit(1);
}

static void cpu_allreduce_sum(trm_backend *be, float *buf, size_t n) {
    trm_err e;
    if (trm_dist_mpi_allreduce_f32(((cpu_ctx *)be->ctx)->dist, buf, n, &e)) fatal_collective(&e);
}

static void cpu_allgather(trm_backend *be, const void *send, void *recv, size_t bytes) {
    trm_err e;
    if (trm_dist_mpi_allgather(((cpu_ctx *)be->ctx)->dist, send, recv, bytes, &e)) fatal_collective(&e);
}
#endif

void trm_cpu_caps_here(trm_caps *caps) { caps->bf16 = own_gemm() && trm_gemm_cpu_bf16(); }

int trm_cpu_probe(char *desc, size_t desc_len);
int trm_cpu_probe(char *desc, size_t desc_len) {
    if (desc && desc_len) {
        char model[256];
        cpu_model_name(model, sizeof model);
        int nt = max_threads();
        if (model[0])
            snprintf(desc, desc_len, "%s, %d thread%s", model, nt, nt == 1 ? "" : "s");
        else
            snprintf(desc, desc_len, "%d thread%s", nt, nt == 1 ? "" : "s");
    }
    return 1;
}

trm_backend *trm_cpu_backend_create(int index, trm_err *e) {
    if (index > 0) {
        trm_errf(e, "cpu backend: device index %d does not exist (the host is device 0)", index);
        return NULL;
    }
    trm_backend *be = xcalloc(1, sizeof *be);
    be->name = "cpu";
    be->caps = (trm_caps)TRM_CAPS_CPU;
    trm_cpu_caps_here(&be->caps);
    be->ctx = xcalloc(1, sizeof(cpu_ctx));
    be->destroy = cpu_destroy;
    be->alloc = cpu_alloc;
    be->free = cpu_free;
    be->to_device = cpu_memcpy;
    be->to_host = cpu_memcpy;
    be->copy = cpu_memcpy;
    be->zero = cpu_zero;
    be->sync = cpu_sync;
    be->gemm = cpu_gemm;
    be->add = cpu_add;
    be->axpy = cpu_axpy;
    be->transpose = cpu_transpose;
    be->rmsnorm_fwd = cpu_rmsnorm_fwd;
    be->rmsnorm_bwd = cpu_rmsnorm_bwd;
    be->swiglu_fwd = cpu_swiglu_fwd;
    be->swiglu_bwd = cpu_swiglu_bwd;
    be->rope_fwd = cpu_rope_fwd;
    be->rope_bwd = cpu_rope_bwd;
    be->attention_fwd = cpu_attention_fwd;
    be->attention_bwd = cpu_attention_bwd;
    be->bias_fwd = cpu_bias_fwd;
    be->bias_bwd = cpu_bias_bwd;
    be->embed_fwd = cpu_embed_fwd;
    be->embed_bwd = cpu_embed_bwd;
    be->loss_head = cpu_loss_head;
    be->act_reset = cpu_act_reset;
    be->act_update = cpu_act_update;
    be->q_target = cpu_q_target;
    be->adam_atan2 = cpu_adam_atan2;
    be->sign_sgd_sparse = cpu_sign_sgd_sparse;
    be->ema = cpu_ema;
    be->mem_info = cpu_mem_info;
#ifdef TRM_HAVE_MPI
    be->comm_init = cpu_comm_init;
    be->allreduce_sum = cpu_allreduce_sum;
    be->allgather = cpu_allgather;
#endif
    return be;
}
