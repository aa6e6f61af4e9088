/* backend_profile.c — a backend that wraps another and times every op (synchronising after
 * each, so device time is attributed to the op that spent it). Enabled with TRM_PROFILE=1;
 * the table of time per op is printed to stderr when the backend is destroyed (trm bench:
 * of the timed steps only). TRM_PROFILE=2 adds the GEMMs by shape. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#define OPS(X)                                                                                  \
    X(gemm) X(add) X(axpy) X(transpose) X(rmsnorm_fwd) X(rmsnorm_bwd) X(swiglu_fwd)            \
    X(swiglu_bwd) X(gate_up_swiglu) X(gate_up_swiglu_bwd) X(down_swiglu_bwd) X(token_mlp_fwd) X(linear_norm_fwd) X(qkv_rope_fwd) X(rmsnorm_t_fwd) X(rmsnorm_t_bwd) X(rope_fwd) X(rope_bwd) X(attention_fwd) X(attention_fwd_rope) X(attention_bwd) X(attention_bwd_rope) X(bias_fwd)        \
    X(bias_bwd) X(embed_fwd) X(embed_bwd) X(loss_head) X(act_reset) X(act_update) X(q_target)  \
    X(adam_atan2) X(sign_sgd_sparse) X(ema) X(convert) X(copy) X(zero) X(to_device) X(to_host) X(allreduce_sum) X(allgather)

enum {
#define X(n) OP_##n,
    OPS(X)
#undef X
    OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
#define X(n) #n,
    OPS(X)
#undef X
};

/* one GEMM shape's time (TRM_PROFILE=2), types included */
typedef struct {
    trm_gemm_dt dt;
    int ta, tb, M, N, K, batch;
    double seconds;
    long calls;
} gemm_shape;
#define PROFILE_SHAPES 64

typedef struct {
    trm_backend *inner;
    double seconds[OP_COUNT];
    long calls[OP_COUNT];
    double gemm_flops;
    int by_shape, nshapes;
    long untallied; /* calls of shapes past the table's PROFILE_SHAPES */
    gemm_shape shapes[PROFILE_SHAPES];
} profile;

static profile *P(trm_backend *b) { return (profile *)b->ctx; }

static void done(trm_backend *b, int op, double t0) {
    profile *p = P(b);
    p->inner->sync(p->inner);
    p->seconds[op] += trm_now_seconds() - t0;
    p->calls[op]++;
}

#define WRAP(name, params, args)                  \
    static void w_##name params {                 \
        double t0 = trm_now_seconds();            \
        P(b)->inner->name args;                   \
        done(b, OP_##name, t0);                   \
    }

static int same_shape(const gemm_shape *x, const gemm_shape *y) {
    return x->dt.a == y->dt.a && x->dt.b == y->dt.b && x->dt.c == y->dt.c && x->ta == y->ta && x->tb == y->tb &&
           x->M == y->M && x->N == y->N && x->K == y->K && x->batch == y->batch;
}

static void w_gemm(trm_backend *b, trm_gemm_dt dt, int ta, int tb, int M, int N, int K, float alpha, const void *A,
                   int lda, int64_t sA, const void *B, int ldb, int64_t sB, float beta, void *C, int ldc, int64_t sC,
                   int batch) {
    double t0 = trm_now_seconds();
    P(b)->inner->gemm(P(b)->inner, dt, ta, tb, M, N, K, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);
    P(b)->gemm_flops += 2.0 * M * N * (double)K * batch;
    done(b, OP_gemm, t0);
    profile *p = P(b);
    if (!p->by_shape) return;
    int i = 0;
    gemm_shape key = {dt, ta, tb, M, N, K, batch, 0, 0};
    while (i < p->nshapes && !same_shape(&p->shapes[i], &key)) i++;
    if (i == p->nshapes) {
        if (i == PROFILE_SHAPES) {
            p->untallied++;
            return;
        }
        p->shapes[p->nshapes++] = key;
    }
    p->shapes[i].seconds += trm_now_seconds() - t0;
    p->shapes[i].calls++;
}

/* the shapes by time, with each one's rate */
static void print_shapes(profile *p) {
    for (int pass = 0; pass < p->nshapes; pass++) {
        int best = -1;
        for (int i = 0; i < p->nshapes; i++)
            if (p->shapes[i].calls > 0 && (best < 0 || p->shapes[i].seconds > p->shapes[best].seconds)) best = i;
        if (best < 0) break;
        gemm_shape *g = &p->shapes[best];
        double fl = 2.0 * g->M * g->N * (double)g->K * g->batch * g->calls;
        fprintf(stderr, "    %c%c %s %5d x%5d x%5d x%-3d %7.3f s %6ld calls %8.1f GFLOP/s\n", g->ta ? 'T' : 'N',
                g->tb ? 'T' : 'N', g->dt.a == TRM_BF16 || g->dt.b == TRM_BF16 ? "bf16" : "fp32", g->M, g->N, g->K,
                g->batch, g->seconds, g->calls, fl / (g->seconds + 1e-12) / 1e9);
        g->calls = -g->calls;
    }
    if (p->untallied) fprintf(stderr, "    (%ld calls of further shapes not listed)\n", p->untallied);
}
WRAP(add, (trm_backend * b, void *y, const void *x1, const void *x2, size_t n), (P(b)->inner, y, x1, x2, n))
WRAP(axpy, (trm_backend * b, void *y, const void *x, float a, size_t n), (P(b)->inner, y, x, a, n))
WRAP(transpose, (trm_backend * b, void *o, int ldo, const void *i, int ldi, int bt, int r, int c),
     (P(b)->inner, o, ldo, i, ldi, bt, r, c))
WRAP(rmsnorm_fwd,
     (trm_backend * b, void *y, float *rs, const void *x, const void *res, int r, int d, int ld, float eps),
     (P(b)->inner, y, rs, x, res, r, d, ld, eps))
WRAP(rmsnorm_bwd, (trm_backend * b, void *dx, const void *dy, const void *y, const float *rs, int r, int d, int ld),
     (P(b)->inner, dx, dy, y, rs, r, d, ld))
WRAP(swiglu_fwd, (trm_backend * b, void *o, const void *gu, int r, int I), (P(b)->inner, o, gu, r, I))
WRAP(swiglu_bwd, (trm_backend * b, void *dgu, void *o, const void *d, const void *gu, int r, int I),
     (P(b)->inner, dgu, o, d, gu, r, I))
static int w_gate_up_swiglu(trm_backend *b, void *act, void *gu, const void *x, int ldx, const void *W, int ldw,
                            int wdt, int rows, int I, int K) {
    double t0 = trm_now_seconds();
    int done_here = P(b)->inner->gate_up_swiglu(P(b)->inner, act, gu, x, ldx, W, ldw, wdt, rows, I, K);
    if (done_here) done(b, OP_gate_up_swiglu, t0);
    return done_here;
}
static int w_gate_up_swiglu_bwd(trm_backend *b, void *dgu, void *act, const void *dact, const void *x, int ldx,
                                const void *W, int ldw, int wdt, int rows, int I, int K) {
    double t0 = trm_now_seconds();
    int done_here = P(b)->inner->gate_up_swiglu_bwd(P(b)->inner, dgu, act, dact, x, ldx, W, ldw, wdt, rows, I, K);
    if (done_here) done(b, OP_gate_up_swiglu_bwd, t0);
    return done_here;
}
static int w_down_swiglu_bwd(trm_backend *b, void *dgu, void *out, const void *dy, int ldy, const void *W, int ldw,
                             int wdt, const void *gu, int rows, int I, int K) {
    double t0 = trm_now_seconds();
    int done_here = P(b)->inner->down_swiglu_bwd(P(b)->inner, dgu, out, dy, ldy, W, ldw, wdt, gu, rows, I, K);
    if (done_here) done(b, OP_down_swiglu_bwd, t0);
    return done_here;
}
static int w_token_mlp_fwd(trm_backend *b, void *y, float *rstd, const void *x, const void *Wgu, int ldgu,
                           const void *Wdn, int lddn, int wdt, int B, int T, int Tp, int D, int It, float eps) {
    double t0 = trm_now_seconds();
    int done_here = P(b)->inner->token_mlp_fwd(P(b)->inner, y, rstd, x, Wgu, ldgu, Wdn, lddn, wdt, B, T, Tp, D, It, eps);
    if (done_here) done(b, OP_token_mlp_fwd, t0);
    return done_here;
}
static int w_linear_norm_fwd(trm_backend *b, void *y, float *rstd, const void *res, const void *x, int ldx,
                             const void *W, int ldw, int wdt, int rows, int K, int D, float eps) {
    double t0 = trm_now_seconds();
    int done_here = P(b)->inner->linear_norm_fwd(P(b)->inner, y, rstd, res, x, ldx, W, ldw, wdt, rows, K, D, eps);
    if (done_here) done(b, OP_linear_norm_fwd, t0);
    return done_here;
}
static int w_qkv_rope_fwd(trm_backend *b, void *qkv, const void *x, int ldx, const void *W, int ldw, int wdt,
                          const float *cs, const float *sn, int B, int T, int H, int hd, int K) {
    double t0 = trm_now_seconds();
    int done_here = P(b)->inner->qkv_rope_fwd(P(b)->inner, qkv, x, ldx, W, ldw, wdt, cs, sn, B, T, H, hd, K);
    if (done_here) done(b, OP_qkv_rope_fwd, t0);
    return done_here;
}
WRAP(rmsnorm_t_fwd,
     (trm_backend * b, void *y, float *rs, const void *x, const void *res, int B, int T, int Tp, int D, float eps),
     (P(b)->inner, y, rs, x, res, B, T, Tp, D, eps))
WRAP(rmsnorm_t_bwd,
     (trm_backend * b, void *dx, const void *dy, const void *y, const float *rs, int B, int T, int Tp, int D),
     (P(b)->inner, dx, dy, y, rs, B, T, Tp, D))
static int w_attention_fwd_rope(trm_backend *b, void *o, float *l, void *q, const float *c, const float *s, int B,
                                int T, int H, int hd, int keep) {
    double t0 = trm_now_seconds();
    int done_here = P(b)->inner->attention_fwd_rope(P(b)->inner, o, l, q, c, s, B, T, H, hd, keep);
    if (done_here) done(b, OP_attention_fwd_rope, t0);
    return done_here;
}
WRAP(rope_fwd, (trm_backend * b, void *q, const float *c, const float *s, int B, int T, int H, int hd),
     (P(b)->inner, q, c, s, B, T, H, hd))
WRAP(rope_bwd, (trm_backend * b, void *q, const float *c, const float *s, int B, int T, int H, int hd),
     (P(b)->inner, q, c, s, B, T, H, hd))
WRAP(attention_fwd, (trm_backend * b, void *o, float *l, const void *q, int B, int T, int H, int hd),
     (P(b)->inner, o, l, q, B, T, H, hd))
WRAP(attention_bwd,
     (trm_backend * b, void *dq, const void *d, const void *q, const void *o, const float *l, int B, int T, int H,
      int hd),
     (P(b)->inner, dq, d, q, o, l, B, T, H, hd))
WRAP(attention_bwd_rope,
     (trm_backend * b, void *dq, const void *d, const void *q, const void *o, const float *l, const float *c,
      const float *s, int B, int T, int H, int hd),
     (P(b)->inner, dq, d, q, o, l, c, s, B, T, H, hd))
WRAP(bias_fwd, (trm_backend * b, float *y, const float *bias, int r, int c, int ld), (P(b)->inner, y, bias, r, c, ld))
WRAP(bias_bwd, (trm_backend * b, float *db, const float *dy, int r, int c, int ld), (P(b)->inner, db, dy, r, c, ld))
WRAP(embed_fwd, (trm_backend * b, void *o, const trm_embed_args *a), (P(b)->inner, o, a))
WRAP(embed_bwd, (trm_backend * b, const void *d, const trm_embed_args *a, float *dt, float *dp, float *dr),
     (P(b)->inner, d, a, dt, dp, dr))
WRAP(loss_head, (trm_backend * b, const trm_loss_args *a), (P(b)->inner, a))
WRAP(act_reset,
     (trm_backend * b, int B, int T, int D, int S, const uint8_t *h, void *zH, void *zL, const float *Hi,
      const float *Li, int32_t *st, int32_t *ci, int32_t *cl, int32_t *cp, const int32_t *ni, const int32_t *nl,
      const int32_t *np),
     (P(b)->inner, B, T, D, S, h, zH, zL, Hi, Li, st, ci, cl, cp, ni, nl, np))
WRAP(act_update,
     (trm_backend * b, int B, int32_t *st, uint8_t *h, const float *q, int mx, int tr, int nac, float ep, uint64_t sd,
      uint64_t s0, const uint64_t *rs),
     (P(b)->inner, B, st, h, q, mx, tr, nac, ep, sd, s0, rs))
WRAP(q_target, (trm_backend * b, int B, float *t, const float *qn, const int32_t *st, int mx),
     (P(b)->inner, B, t, qn, st, mx))
WRAP(adam_atan2,
     (trm_backend * b, float *p, const float *g, float *m, float *v, size_t n, float lr, float wd, float b1, float b2,
      int64_t t),
     (P(b)->inner, p, g, m, v, n, lr, wd, b1, b2, t))
WRAP(sign_sgd_sparse, (trm_backend * b, float *w, int nd, const int32_t *ids, const float *g, int n, float lr, float wd),
     (P(b)->inner, w, nd, ids, g, n, lr, wd))
WRAP(ema, (trm_backend * b, float *s, const float *p, size_t n, float r), (P(b)->inner, s, p, n, r))
WRAP(convert, (trm_backend * b, void *d, int dd, int ldd, const void *s, int ds, int lds, int r, int c),
     (P(b)->inner, d, dd, ldd, s, ds, lds, r, c))
WRAP(copy, (trm_backend * b, void *d, const void *s, size_t n), (P(b)->inner, d, s, n))
WRAP(zero, (trm_backend * b, void *p, size_t n), (P(b)->inner, p, n))
WRAP(to_device, (trm_backend * b, void *d, const void *s, size_t n), (P(b)->inner, d, s, n))
WRAP(to_host, (trm_backend * b, void *d, const void *s, size_t n), (P(b)->inner, d, s, n))

WRAP(allreduce_sum, (trm_backend * b, float *p, size_t n), (P(b)->inner, p, n))
WRAP(allgather, (trm_backend * b, const void *s, void *r, size_t n), (P(b)->inner, s, r, n))

static int w_comm_init(trm_backend *b, struct trm_dist *d, trm_err *e) { return P(b)->inner->comm_init(P(b)->inner, d, e); }
static void *w_alloc(trm_backend *b, size_t n) { return P(b)->inner->alloc(P(b)->inner, n); }
static void w_free(trm_backend *b, void *p) { P(b)->inner->free(P(b)->inner, p); }
static void w_sync(trm_backend *b) { P(b)->inner->sync(P(b)->inner); }

static void w_mem_info(trm_backend *b, size_t *f, size_t *t) { P(b)->inner->mem_info(P(b)->inner, f, t); }
static void w_stream_stats(trm_backend *b, trm_stream_stats *s) { P(b)->inner->stream_stats(P(b)->inner, s); }

static void w_destroy(trm_backend *b) {
    profile *p = P(b);
    double total = 0;
    for (int i = 0; i < OP_COUNT; i++) total += p->seconds[i];
    fprintf(stderr, "trm profile (%s backend): %.3f s in ops\n", p->inner->name, total);
    for (int pass = 0; pass < OP_COUNT; pass++) {
        int best = -1;
        for (int i = 0; i < OP_COUNT; i++)
            if (p->calls[i] >= 0 && (best < 0 || p->seconds[i] > p->seconds[best])) best = i;
        if (best < 0 || p->calls[best] == 0) break;
        fprintf(stderr, "  %-18s %8.3f s %5.1f%%  %8ld calls", op_names[best], p->seconds[best],
                100.0 * p->seconds[best] / (total > 0 ? total : 1), p->calls[best]);
        if (best == OP_gemm) fprintf(stderr, "  %.1f GFLOP/s", p->gemm_flops / (p->seconds[best] + 1e-12) / 1e9);
        fputc('\n', stderr);
        if (best == OP_gemm && p->by_shape) print_shapes(p);
        p->calls[best] = -1;
    }
    p->inner->destroy(p->inner);
    free(p);
    free(b);
}

/* Forget what was timed so far (bench: the warm-up steps, whose first one also chooses each
 * GEMM's algorithm by timing candidates and would weigh on the GEMMs' share); a backend that is
 * not the profiler is left alone. */
void trm_profile_reset(trm_backend *b) {
    if (!b || b->destroy != w_destroy) return;
    profile *p = P(b);
    memset(p->seconds, 0, sizeof p->seconds);
    memset(p->calls, 0, sizeof p->calls);
    p->gemm_flops = 0;
    p->nshapes = 0;
    p->untallied = 0;
}

trm_backend *trm_profile_wrap(trm_backend *inner) {
    trm_backend *b = xcalloc(1, sizeof *b);
    profile *p = xcalloc(1, sizeof *p);
    *b = *inner;
    p->inner = inner;
    const char *lvl = getenv("TRM_PROFILE");
    p->by_shape = lvl && atoi(lvl) >= 2;
    b->ctx = p;
    b->destroy = w_destroy;
    b->alloc = w_alloc;
    b->free = w_free;
    b->sync = w_sync;
#define X(n) b->n = w_##n;
    OPS(X)
#undef X
    /* Timing each op needs eager execution: no graphs under the profiler. */
    b->capture_begin = NULL;
    b->capture_end = NULL;
    b->graph_launch = NULL;
    b->graph_destroy = NULL;
    b->mem_info = inner->mem_info ? w_mem_info : NULL;
    b->stream_stats = inner->stream_stats ? w_stream_stats : NULL;
    b->comm_init = inner->comm_init ? w_comm_init : NULL;
    if (!inner->allreduce_sum) b->allreduce_sum = NULL;
    if (!inner->allgather) b->allgather = NULL;
    if (!inner->convert) b->convert = NULL;
    if (!inner->gate_up_swiglu) b->gate_up_swiglu = NULL;
    if (!inner->gate_up_swiglu_bwd) b->gate_up_swiglu_bwd = NULL;
    if (!inner->down_swiglu_bwd) b->down_swiglu_bwd = NULL;
    if (!inner->attention_bwd_rope) b->attention_bwd_rope = NULL;
    if (!inner->token_mlp_fwd) b->token_mlp_fwd = NULL;
    if (!inner->linear_norm_fwd) b->linear_norm_fwd = NULL;
    if (!inner->qkv_rope_fwd) b->qkv_rope_fwd = NULL;
    if (!inner->attention_fwd_rope) b->attention_fwd_rope = NULL;
    if (!inner->rmsnorm_t_fwd) b->rmsnorm_t_fwd = NULL;
    if (!inner->rmsnorm_t_bwd) b->rmsnorm_t_bwd = NULL;
    return b;
}
