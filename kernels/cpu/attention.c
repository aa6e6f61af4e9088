/* attention.c — non-causal attention on the fused QKV activation, its scores computed a block
 * of query rows at a time and normalised with cpu.h's exp; the per-head products by
 * gemm_small.c's unpacked tiles (the GEMM's elsewhere), with K and V laid out as columns once
 * a head; with RoPE's tables, the rotation of a head's q and k (forward) or of its dq and dk
 * (backward) inside the head's own task, while its rows are in cache, where a task holds a
 * whole head. */
#include <math.h>

#include "cpu.h"
#include "gemm_cpu.h"

/* Query rows per attention block: a block of scores (QB × T) stays in L2 for T ~ 1000, and
 * Sudoku's 97 or the tiny shapes' 85 tokens are one block (with 64, a second block of 21 rows
 * repacked K and V for a sliver: attention took 10% less time with one). */
#define ATT_QB 128

/* Never materialises the B·H·T·T probabilities: a block of ATT_QB query rows against all T
 * keys at a time, in a per-thread scratch whose rows are T rounded up to 16 (Tp) long, so that
 * the products' N is whole vectors (the scores past T are computed but never read). Forward
 * parallelises over (b, h, query block); backward over (b, h) because dK and dV sum over query
 * blocks. When there are fewer tasks than threads the loop runs serially and the GEMM uses the
 * threads instead ("wide"). */

typedef struct {
    int T, H, hd;
    size_t ld;             /* row stride of qkv / dqkv: 3·H·hd */
    size_t ldo;            /* row stride of out / dout: H·hd */
    float scale;           /* 1/√hd */
    const float *cos, *sin; /* RoPE's tables (T × hd), or NULL: no rotation in the tasks */
    int Tp;                /* T rounded up to 16: the scores' row stride */
    int lanes;             /* gemm_small's vector width, or 0: the GEMM does the products (no
                            * own GEMM here, or tasks run one at a time on all threads) */
} att_dims;

/* wide: fewer tasks than threads, run one at a time with each product on all threads. */
static att_dims dims_of(int T, int H, int hd, const float *cos, const float *sin, int wide) {
    att_dims d = {T, H, hd, (size_t)3 * H * hd, (size_t)H * hd, 1.0f / sqrtf((float)hd), cos, sin, (T + 15) / 16 * 16,
                  0};
    d.lanes = !wide && cpu_own_gemm_threads() ? trm_gemm_cpu_lanes() : 0;
    return d;
}

/* C = alpha·op(A)·B + beta·C for one head, op(A)'s (m, k) at A[m·sam + k·sak] (sak 1: A's
 * rows; sam 1: its columns) and B's rows ldb apart: gemm_small.c's tiles, else the GEMM, whose
 * sums are the same (its Aᵀ products here have K = a block's ≤ ATT_QB rows, never enough
 * for its slices of 512). */
static void head_mm(const att_dims *d, int M, int N, int K, float alpha, const float *A, size_t sam, size_t sak,
                    const float *B, size_t ldb, float beta, float *C, size_t ldc) {
    if (d->lanes && trm_gemm_small(d->lanes, M, N, K, alpha, A, sam, sak, B, ldb, beta, C, ldc)) return;
    int ta = sak != 1;
    cpu_sgemm(ta, 0, M, N, K, alpha, A, (int)(ta ? sak : sam), B, (int)ldb, beta, C, (int)ldc, 0);
}

/* A head's T rows of X (ld apart, hd wide) as hd rows of Tp (zero past T): K and V as the
 * scores' and dP's B operand. */
static void head_cols(float *xt, const float *X, size_t ld, int T, int Tp, int hd) {
    for (int c = 0; c < hd; c++)
        for (int j = T; j < Tp; j++) xt[(size_t)c * Tp + j] = 0.0f;
    cpu_transpose_block(xt, (size_t)Tp, X, ld, T, hd);
}

/* exp(S − m_i) over nb rows of Tp, m_i given a row: the shift first, then one exp over the
 * whole block. A row's exp alone is six vectors, too few for their dependency chains to
 * overlap: on the tiny shapes (85 tokens) it took 140 cycles a row here, most of the softmax.
 * exp_affine's own shift (x·1 + b) gives the same values as x − m then x·1 + 0 (−0 included:
 * exp(±0) = 1), so the bits are those of a row at a time (but for a NaN's sign where m is
 * NaN). */
static void exp_rows_shifted(float *S, const float *m, int nb, int Tp) {
    for (int i = 0; i < nb; i++) {
        float *row = S + (size_t)i * Tp, mi = m[i];
#pragma omp simd
        for (int j = 0; j < Tp; j++) row[j] -= mi;
    }
    exp_affine(S, S, nb * Tp, 1.0f, 0.0f);
}

/* Rows of T scores, Tp apart; the exp runs over whole vectors (Tp), its values past T unused. */
static void softmax_rows(float *S, float *lse, int nb, int T, int Tp) {
    float mx[ATT_QB] = {0}; /* nb ≤ ATT_QB; zeros only for the compiler */
    for (int i = 0; i < nb; i++) {
        const float *row = S + (size_t)i * Tp;
        float m = row[0];
#pragma omp simd reduction(max : m)
        for (int j = 1; j < T; j++) m = row[j] > m ? row[j] : m;
        mx[i] = m;
    }
    exp_rows_shifted(S, mx, nb, Tp);
    for (int i = 0; i < nb; i++) {
        float *row = S + (size_t)i * Tp, sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < T; j++) sum += row[j];
        float inv = 1.0f / sum;
        for (int j = 0; j < T; j++) row[j] *= inv;
        lse[i] = mx[i] + logf(sum);
    }
}

/* S: the thread's scratch, ATT_QB × Tp scores then K's columns (hd × Tp). */
static void att_fwd_block(const att_dims *d, float *out, float *lse, const float *qkv, int h,
                          int i0, float *S) {
    int T = d->T, Tp = d->Tp, hd = d->hd, nb = T - i0 < ATT_QB ? T - i0 : ATT_QB;
    const float *Q = qkv + (size_t)i0 * d->ld + (size_t)h * hd;
    const float *K = qkv + (size_t)(d->H + h) * hd;
    const float *V = qkv + (size_t)(2 * d->H + h) * hd;
    float *Kt = S + (size_t)ATT_QB * Tp;
    head_cols(Kt, K, d->ld, T, Tp, hd);
    head_mm(d, nb, Tp, hd, d->scale, Q, d->ld, 1, Kt, Tp, 0.0f, S, Tp);
    softmax_rows(S, lse + i0, nb, T, Tp);
    head_mm(d, nb, hd, T, 1.0f, S, Tp, 1, V, d->ld, 0.0f, out + (size_t)i0 * d->ldo + (size_t)h * hd, d->ldo);
}

static void att_fwd_task(const att_dims *d, float *out, float *lse, const float *qkv, int k,
                         int nqb, float *S) {
    int T = d->T, H = d->H, b = k / (H * nqb), h = (k / nqb) % H, qb = k % nqb;
    if (d->cos) { /* one block a head (nqb = 1): this task is the head's only reader; qkv is
                   * attention_fwd_rope's, which the caller hands over writable */
        float *q = (float *)qkv + (size_t)b * T * d->ld + (size_t)h * d->hd;
        cpu_rope_rows(q, d->ld, d->cos, d->sin, 0, T, d->hd, 0);
        cpu_rope_rows(q + (size_t)H * d->hd, d->ld, d->cos, d->sin, 0, T, d->hd, 0);
    }
    att_fwd_block(d, out + (size_t)b * T * d->ldo, lse + ((size_t)b * H + h) * T,
                  qkv + (size_t)b * T * d->ld, h, qb * ATT_QB, S);
}

static void attention_fwd_impl(trm_backend *be, float *out, float *lse, const float *qkv, int B, int T, int H,
                               int hd, const float *cos, const float *sin) {
    if (B <= 0 || T <= 0 || H <= 0 || hd <= 0) return;
    int nqb = (T + ATT_QB - 1) / ATT_QB, tasks = B * H * nqb, nt = max_threads(), wide = tasks < nt && nt > 1;
    att_dims d = dims_of(T, H, hd, cos, sin, wide);
    size_t per = (size_t)(ATT_QB + hd) * d.Tp;
    float *S = cpu_scratch(be, per * nt);
    if (!wide && nt > 1) {
#pragma omp parallel for schedule(dynamic)
        for (int k = 0; k < tasks; k++)
            att_fwd_task(&d, out, lse, qkv, k, nqb, S + per * thread_id());
    } else {
        for (int k = 0; k < tasks; k++) att_fwd_task(&d, out, lse, qkv, k, nqb, S);
    }
}

void cpu_attention_fwd(trm_backend *be, void *out, float *lse, const void *qkv, int B, int T, int H, int hd) {
    attention_fwd_impl(be, out, lse, qkv, B, T, H, hd, NULL, NULL);
}

/* rope_fwd then attention_fwd, the rotation in each head's task; q and k are left rotated as
 * rope_fwd leaves them (keep or not). Declined where a head's queries span blocks (T past
 * ATT_QB: tasks of one head would read k while another rotates it). */
int cpu_attention_fwd_rope(trm_backend *be, void *out, float *lse, void *qkv, const float *cos, const float *sin,
                           int B, int T, int H, int hd, int keep) {
    (void)keep;
    if (T > ATT_QB) return 0;
    attention_fwd_impl(be, out, lse, qkv, B, T, H, hd, cos, sin);
    return 1;
}

/* One (b, h): recompute P = exp(S − lse) block by block; dV += Pᵀ dO; dP = dO Vᵀ;
 * dS = P ∘ (dP − rowsum(dO ∘ O)); dQ = dS K/√hd; dK += dSᵀ Q/√hd. buf: P and dP (ATT_QB × Tp
 * each), then K's and V's columns (hd × Tp each). */
static void att_bwd_head(const att_dims *d, float *dqkv, const float *dout, const float *qkv,
                         const float *out, const float *lse, int h, float *buf) {
    int T = d->T, Tp = d->Tp, hd = d->hd;
    size_t ld = d->ld, ldo = d->ldo;
    const float *K = qkv + (size_t)(d->H + h) * hd, *V = qkv + (size_t)(2 * d->H + h) * hd;
    float *dK = dqkv + (size_t)(d->H + h) * hd, *dV = dqkv + (size_t)(2 * d->H + h) * hd;
    float *P = buf, *dP = P + (size_t)ATT_QB * Tp, *Kt = dP + (size_t)ATT_QB * Tp, *Vt = Kt + (size_t)hd * Tp;
    head_cols(Kt, K, ld, T, Tp, hd);
    head_cols(Vt, V, ld, T, Tp, hd);
    for (int i0 = 0; i0 < T; i0 += ATT_QB) {
        int nb = T - i0 < ATT_QB ? T - i0 : ATT_QB;
        float beta = i0 ? 1.0f : 0.0f;
        const float *Q = qkv + (size_t)i0 * ld + (size_t)h * hd;
        const float *dO = dout + (size_t)i0 * ldo + (size_t)h * hd;
        const float *O = out + (size_t)i0 * ldo + (size_t)h * hd;
        head_mm(d, nb, Tp, hd, d->scale, Q, ld, 1, Kt, Tp, 0.0f, P, Tp);
        exp_rows_shifted(P, lse + i0, nb, Tp);
        head_mm(d, T, hd, nb, 1.0f, P, 1, Tp, dO, ldo, beta, dV, ld);
        head_mm(d, nb, Tp, hd, 1.0f, dO, ldo, 1, Vt, Tp, 0.0f, dP, Tp);
        for (int i = 0; i < nb; i++) {
            const float *o = O + (size_t)i * ldo, *g = dO + (size_t)i * ldo;
            float dr = 0.0f;
#pragma omp simd reduction(+ : dr)
            for (int c = 0; c < hd; c++) dr += g[c] * o[c];
            float *restrict ds = dP + (size_t)i * Tp;
            const float *restrict p = P + (size_t)i * Tp;
            for (int j = 0; j < T; j++) ds[j] = p[j] * (ds[j] - dr);
        }
        float *dQ = dqkv + (size_t)i0 * ld + (size_t)h * hd;
        head_mm(d, nb, hd, T, d->scale, dP, Tp, 1, K, ld, 0.0f, dQ, ld);
        head_mm(d, T, hd, nb, d->scale, dP, 1, Tp, Q, ld, beta, dK, ld);
    }
    if (d->cos) { /* dq and dk whole: their rotation's transpose while the rows are in cache */
        cpu_rope_rows(dqkv + (size_t)h * hd, d->ld, d->cos, d->sin, 0, T, hd, 1);
        cpu_rope_rows(dK, d->ld, d->cos, d->sin, 0, T, hd, 1);
    }
}

static void att_bwd_task(const att_dims *d, float *dqkv, const float *dout, const float *qkv,
                         const float *out, const float *lse, int k, float *buf) {
    int T = d->T, H = d->H, b = k / H, h = k % H;
    size_t qo = (size_t)b * T * d->ld, oo = (size_t)b * T * d->ldo;
    att_bwd_head(d, dqkv + qo, dout + oo, qkv + qo, out + oo, lse + ((size_t)b * H + h) * T, h, buf);
}

static void attention_bwd_impl(trm_backend *be, float *dqkv, const float *dout, const float *qkv, const float *out,
                               const float *lse, int B, int T, int H, int hd, const float *cos, const float *sin) {
    if (B <= 0 || T <= 0 || H <= 0 || hd <= 0) return;
    int tasks = B * H, nt = max_threads(), wide = tasks < nt && nt > 1;
    att_dims d = dims_of(T, H, hd, cos, sin, wide);
    size_t per = (size_t)2 * (ATT_QB + hd) * d.Tp;
    float *buf = cpu_scratch(be, per * nt);
    if (!wide && nt > 1) {
#pragma omp parallel for schedule(dynamic)
        for (int k = 0; k < tasks; k++)
            att_bwd_task(&d, dqkv, dout, qkv, out, lse, k, buf + per * thread_id());
    } else {
        for (int k = 0; k < tasks; k++) att_bwd_task(&d, dqkv, dout, qkv, out, lse, k, buf);
    }
}

void cpu_attention_bwd(trm_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out,
                       const float *lse, int B, int T, int H, int hd) {
    attention_bwd_impl(be, dqkv, dout, qkv, out, lse, B, T, H, hd, NULL, NULL);
}

/* The backward and RoPE's transpose rotation of dq and dk, each head's in its own task (the
 * same steps as rope_bwd after the backward: the same bits). */
void cpu_attention_bwd_rope(trm_backend *be, void *dqkv, const void *dout, const void *qkv,
                            const void *out, const float *lse, const float *cos,
                            const float *sin, int B, int T, int H, int hd) {
    attention_bwd_impl(be, dqkv, dout, qkv, out, lse, B, T, H, hd, cos, sin);
}
