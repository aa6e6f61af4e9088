/* embed.cu — the input embedding (token rows, puzzle rows padded to P·D, learned positions,
 * ×√D) and its backward. The token-table gradient is summed per chunk of rows in shared
 * memory and the chunks are then added in order: no float atomics, the same result every run. */
#include "common.cuh"

#define EMB_POS_SCALE 0.707106781f
#define TOK_CHUNK 512
#define TOK_COLS 128

template <typename E> __global__ void embed_fwd_kernel(E *out, trm_embed_args a) {
    int T = a.P + a.S, D = a.D;
    size_t n = (size_t)a.B * T * D;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        int d = (int)(i % D);
        size_t bt = i / D;
        int t = (int)(bt % T), b = (int)(bt / T);
        float v;
        if (t < a.P) {
            int k = t * D + d;
            v = (a.ndim > 0 && a.puzzle_ids && k < a.ndim)
                    ? a.puz_w[(size_t)a.puzzle_ids[b] * a.ndim + k] : 0.f;
        } else {
            v = a.tok_w[(size_t)a.tokens[(size_t)b * a.S + (t - a.P)] * D + d];
        }
        if (a.pos_w) v = EMB_POS_SCALE * (v + a.pos_w[(size_t)t * D + d]);
        out[i] = from_f<E>(v * a.scale);
    }
}

void k_embed_fwd(cudaStream_t st, int dt, void *out, const trm_embed_args *a) {
    size_t n = (size_t)a->B * (a->P + a->S) * a->D;
    if (n) ACT_DISPATCH(dt, embed_fwd_kernel<T><<<grid_for(n, 256), 256, 0, st>>>((T *)out, *a));
}

int k_embed_tok_chunks(int rows) { return (rows + TOK_CHUNK - 1) / TOK_CHUNK; }

__device__ __forceinline__ float embed_g(const trm_embed_args &a, float g) {
    g *= a.scale;
    return a.pos_w ? g * EMB_POS_SCALE : g;
}

/* work[chunk][v][d]: the chunk's rows summed per token id. */
template <typename E> __global__ void embed_tok_partial(float *work, const E *dout, trm_embed_args a, int V) {
    extern __shared__ float acc[]; /* V × TOK_COLS */
    int d = blockIdx.x * TOK_COLS + threadIdx.x, chunk = blockIdx.y, T = a.P + a.S;
    for (int v = 0; v < V; v++) acc[v * TOK_COLS + threadIdx.x] = 0.f;
    int r0 = chunk * TOK_CHUNK, r1 = min(r0 + TOK_CHUNK, a.B * a.S);
    if (d < a.D)
        for (int r = r0; r < r1; r++) {
            int b = r / a.S, s = r % a.S, tok = a.tokens[r];
            if (tok >= 0 && tok < V)
                acc[tok * TOK_COLS + threadIdx.x] +=
                    embed_g(a, to_f(dout[((size_t)b * T + a.P + s) * a.D + d]));
        }
    if (d < a.D)
        for (int v = 0; v < V; v++)
            work[((size_t)chunk * V + v) * a.D + d] = acc[v * TOK_COLS + threadIdx.x];
}

__global__ void embed_tok_reduce(float *d_tok_w, const float *work, int chunks, int V, int D) {
    size_t n = (size_t)V * D;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float s = 0.f;
        for (int c = 0; c < chunks; c++) s += work[(size_t)c * n + i];
        d_tok_w[i] += s;
    }
}

template <typename E> __global__ void embed_pos_bwd(float *d_pos_w, const E *dout, trm_embed_args a) {
    int T = a.P + a.S;
    size_t n = (size_t)T * a.D;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float s = 0.f;
        for (int b = 0; b < a.B; b++) s += embed_g(a, to_f(dout[(size_t)b * n + i]));
        d_pos_w[i] += s;
    }
}

template <typename E> __global__ void embed_puz_bwd(float *d_rows, const E *dout, trm_embed_args a) {
    size_t n = (size_t)a.B * a.ndim;
    int lim = a.P * a.D, T = a.P + a.S;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        int k = (int)(i % a.ndim);
        size_t b = i / a.ndim;
        d_rows[i] = k < lim ? embed_g(a, to_f(dout[b * T * a.D + k])) : 0.f;
    }
}

void k_embed_bwd(cudaStream_t st, int dt, const void *dout, const trm_embed_args *a, int V, float *d_tok_w,
                 float *d_pos_w, float *d_puz_rows, float *work) {
    int rows = a->B * a->S, Tn = a->P + a->S;
    ACT_DISPATCH(dt, {
        const T *g = (const T *)dout;
        if (d_tok_w && rows > 0 && V > 0) {
            int chunks = k_embed_tok_chunks(rows);
            dim3 grid((a->D + TOK_COLS - 1) / TOK_COLS, chunks);
            size_t shm = (size_t)V * TOK_COLS * sizeof(float);
            embed_tok_partial<T><<<grid, TOK_COLS, shm, st>>>(work, g, *a, V);
            embed_tok_reduce<<<grid_for((size_t)V * a->D, 256), 256, 0, st>>>(d_tok_w, work, chunks, V, a->D);
        }
        if (a->pos_w && d_pos_w) embed_pos_bwd<T><<<grid_for((size_t)Tn * a->D, 256), 256, 0, st>>>(d_pos_w, g, *a);
        if (a->ndim > 0 && d_puz_rows)
            embed_puz_bwd<T><<<grid_for((size_t)a->B * a->ndim, 256), 256, 0, st>>>(d_puz_rows, g, *a);
    });
}
