/* bench_gemm.c — times one backend's GEMM (trm/backend/backend.h) on the shapes a TRM training step
 * issues, so a GEMM kernel can be tuned without a whole step around it: median ms and TFLOP/s
 * per shape. Built beside trm (target bench_gemm); not a test.
 * usage: bench_gemm BACKEND [ROWS [D I T HD]]   (ROWS: batch·tokens, default 768·97, and hidden
 * 512, intermediate 1536, tokens 97, head dim 64 as sudoku_att; bench/cpu.sh's tiny shapes:
 * bench_gemm cpu 5440 128 512 85 64; the tok lines are mlp_t's token mixer) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

typedef struct {
    const char *what;
    int ta, tb, M, N, K, batch;
} shape;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_gemm BACKEND [ROWS]\n");
        return 2;
    }
    int R = argc > 2 ? atoi(argv[2]) : 768 * 97, D = 512, I = 1536, T = 97, hd = 64;
    if (argc > 6) D = atoi(argv[3]), I = atoi(argv[4]), T = atoi(argv[5]), hd = atoi(argv[6]);
    if (R <= 0 || D <= 0 || I <= 0 || T <= 0 || hd <= 0) {
        fprintf(stderr, "bench_gemm: ROWS D I T HD must be positive\n");
        return 2;
    }
    const trm_backend_entry *en = trm_backend_find(argv[1]);
    trm_err e;
    trm_backend *b = en ? en->create(-1, &e) : NULL;
    if (!b) {
        fprintf(stderr, "bench_gemm: %s\n", en ? e.msg : "no such backend in this binary");
        return 1;
    }
    int B = R / T, Rt = B * D, It = (int)lround(4.0 * T * 2 / 3 + 255) / 256 * 256; /* mlp_t's, expansion 4 */
    shape shapes[] = {
        {"qkv fwd x.W^T", 0, 1, R, 3 * D, D, 1},  {"gate_up fwd", 0, 1, R, 2 * I, D, 1},
        {"down fwd", 0, 1, R, D, I, 1},            {"down dx dy.W", 0, 0, R, I, D, 1},
        {"down dW dy^T.x", 1, 0, D, I, R, 1},      {"gate_up dW", 1, 0, 2 * I, D, R, 1},
        {"head q.k^T", 0, 1, T, T, hd, B},         {"head p.v", 0, 0, T, hd, T, B},
        /* mlp_t's token mixer: rows of T per (sample, channel) */
        {"tok gate_up fwd", 0, 1, Rt, 2 * It, T, 1}, {"tok down fwd", 0, 1, Rt, T, It, 1},
        {"tok down dx", 0, 0, Rt, It, T, 1},         {"tok gate_up dx", 0, 0, Rt, T, 2 * It, 1},
        {"tok down dW", 1, 0, T, It, Rt, 1},         {"tok gate_up dW", 1, 0, 2 * It, T, Rt, 1},
    };
    size_t big = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        shape *s = &shapes[i];
        size_t a = (size_t)s->M * s->K * s->batch, bb = (size_t)s->K * s->N * s->batch, c = (size_t)s->M * s->N * s->batch;
        if (a > big) big = a;
        if (bb > big) big = bb;
        if (c > big) big = c;
    }
    float *A = b->alloc(b, big * 4), *Bm = b->alloc(b, big * 4), *C = b->alloc(b, big * 4);
    if (!A || !Bm || !C) {
        fprintf(stderr, "bench_gemm: out of memory for %zu floats per operand\n", big);
        return 1;
    }
    printf("# %s, rows %d, hidden %d, intermediate %d, tokens %d, head dim %d\n", b->name, R, D, I, T, hd);
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        shape *s = &shapes[i];
        int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
        int64_t sA = (int64_t)s->M * s->K, sB = (int64_t)s->K * s->N, sC = (int64_t)s->M * s->N;
        double t[7];
        for (int r = 0; r < 9; r++) {
            b->sync(b);
            double t0 = trm_now_seconds();
            b->gemm(b, (trm_gemm_dt){TRM_F32, TRM_F32, TRM_F32}, s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, sA, Bm, ldb,
                    sB, 0.0f, C, s->N, sC, s->batch);
            b->sync(b);
            if (r >= 2) t[r - 2] = trm_now_seconds() - t0;
        }
        qsort(t, 7, sizeof *t, cmp_double);
        double flops = 2.0 * s->M * s->N * (double)s->K * s->batch;
        printf("%-16s ta=%d tb=%d %6d x %5d x %6d  batch %4d  %9.3f ms  %7.2f TFLOP/s\n", s->what, s->ta, s->tb, s->M,
               s->N, s->K, s->batch, t[3] * 1e3, flops / t[3] / 1e12);
    }
    b->free(b, A);
    b->free(b, Bm);
    b->free(b, C);
    b->destroy(b);
    return 0;
}
