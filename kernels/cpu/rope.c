/* rope.c — rotary embeddings applied in place to the q and k heads of the fused QKV activation
 * (B, T, 3H, hd), and the transpose rotation for the backward. */
#include <stddef.h>

#include "cpu.h"

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

/* One head's slice in n rows ld apart, positions t0.., rotated (or with transpose its
 * transpose): rope_fwd's and rope_bwd's step, and the attention passes' that take RoPE in
 * their tasks. */
void cpu_rope_rows(float *x, size_t ld, const float *cos, const float *sin, int t0, int n, int hd, int transpose) {
    for (int i = 0; i < n; i++) {
        const float *c = cos + (size_t)(t0 + i) * hd, *s = sin + (size_t)(t0 + i) * hd;
        if (transpose)
            rope_head_t(x + (size_t)i * ld, c, s, hd / 2);
        else
            rope_head(x + (size_t)i * ld, c, s, hd / 2);
    }
}

static void rope_apply(float *qkv, const float *cos, const float *sin, int B, int T, int H,
                       int hd, int transpose) {
    int rows = B * T;
#pragma omp parallel for schedule(guided) if ((size_t)rows * H * hd >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        int t = r % T;
        float *base = qkv + (size_t)r * 3 * H * hd;
        for (int k = 0; k < 2 * H; k++) cpu_rope_rows(base + (size_t)k * hd, 0, cos, sin, t, 1, hd, transpose);
    }
}

void cpu_rope_fwd(trm_backend *be, void *qkv, const float *cos, const float *sin, int B,
                  int T, int H, int hd) {
    rope_apply(qkv, cos, sin, B, T, H, hd, 0);
}

void cpu_rope_bwd(trm_backend *be, void *dqkv, const float *cos, const float *sin, int B,
                  int T, int H, int hd) {
    rope_apply(dqkv, cos, sin, B, T, H, hd, 1);
}
