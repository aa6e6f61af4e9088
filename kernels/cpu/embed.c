/* embed.c — the input embedding (token rows, puzzle rows padded to P·D, learned positions,
 * ×scale) and its backward, summed in the same order whatever the thread count. */
#include <string.h>

#include "cpu.h"

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

void cpu_embed_fwd(trm_backend *be, void *outv, const trm_embed_args *a) {
    float *out = outv;
    int T = a->P + a->S, rows = a->B * T;
#pragma omp parallel for schedule(guided) if ((size_t)rows * a->D >= PAR_MIN)
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
#pragma omp parallel for schedule(guided) if (chunks > 1)
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

void cpu_embed_bwd(trm_backend *be, const void *doutv, const trm_embed_args *a,
                   float *d_tok_w, float *d_pos_w, float *d_puz_rows) {
    const float *dout = doutv;
    int D = a->D, T = a->P + a->S;
    if (d_tok_w) embed_bwd_tok(dout, a, d_tok_w);
    if (a->pos_w && d_pos_w) {
#pragma omp parallel for schedule(guided) if ((size_t)a->B * T * D >= PAR_MIN)
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
