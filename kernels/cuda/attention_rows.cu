/* attention_rows.cu — the row passes of attention outside the fused kernels (attention.cu):
 * for runs the flash kernels do not take, the elementwise parts around the backend's batched
 * GEMMs — row softmax with the log-sum-exp saved, its recomputation from the lse in the
 * backward and dS = P∘(dP − rowsum) — and, for every backward, rowsum(dO∘O). Scores are one
 * head's (B, T, T) at a time (head h of H), so the score buffer is H times smaller; lse and
 * rowsums are (B, H, T). */

#include "mma.cuh"

/* The lse/rowsum index of score row r = b·T + i of head h. */
__device__ __forceinline__ size_t head_row(size_t r, int T, int H, int h) {
    return ((r / T) * H + h) * T + r % T;
}

__global__ void softmax_lse_kernel(float *S, float *lse, size_t rows, int T, int H, int h) {
    int warps = blockDim.x / 32, lane = threadIdx.x & 31;
    for (size_t r = blockIdx.x * (size_t)warps + threadIdx.x / 32; r < rows;
         r += (size_t)gridDim.x * warps) {
        float *row = S + r * T;
        float mx = -INFINITY;
        for (int j = lane; j < T; j += 32) mx = fmaxf(mx, row[j]);
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        float sum = 0.f;
        for (int j = lane; j < T; j += 32) {
            float e = __expf(row[j] - mx);
            row[j] = e;
            sum += e;
        }
        sum = warp_sum(sum);
        float inv = 1.f / sum;
        for (int j = lane; j < T; j += 32) row[j] *= inv;
        if (lane == 0) lse[head_row(r, T, H, h)] = mx + logf(sum);
    }
}
void k_softmax_lse(cudaStream_t st, float *S, float *lse, int B, int H, int T, int h) {
    size_t rows = (size_t)B * T;
    if (rows) softmax_lse_kernel<<<grid_for(rows, 8), 256, 0, st>>>(S, lse, rows, T, H, h);
}

__global__ void exp_lse_kernel(float *S, const float *lse, size_t n, int T, int H, int h) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        S[i] = __expf(S[i] - lse[head_row(i / T, T, H, h)]);
}
void k_exp_lse(cudaStream_t st, float *S, const float *lse, int B, int H, int T, int h) {
    size_t n = (size_t)B * T * T;
    if (n) exp_lse_kernel<<<grid_for(n, 256), 256, 0, st>>>(S, lse, n, T, H, h);
}

/* dr[(b·H + h)·T + i] = Σ_c dO[b,i,h,c]·O[b,i,h,c]: one warp per (b, i, h). */
template <typename E>
__global__ void att_rowdot_kernel(float *dr, const E *dout, const E *out, int B, int T, int H, int hd) {
    int warps = blockDim.x / 32, lane = threadIdx.x & 31;
    size_t rows = (size_t)B * T * H;
    for (size_t r = blockIdx.x * (size_t)warps + threadIdx.x / 32; r < rows;
         r += (size_t)gridDim.x * warps) {
        const E *g = dout + r * hd, *o = out + r * hd;
        float s = 0.f;
        for (int c = lane; c < hd; c += 32) s += to_f(g[c]) * to_f(o[c]);
        s = warp_sum(s);
        if (lane == 0) {
            int h = (int)(r % H);
            size_t bi = r / H;
            int i = (int)(bi % T);
            size_t b = bi / T;
            dr[(b * H + h) * T + i] = s;
        }
    }
}
/* the same with a row of L 16-byte vectors read by L lanes at once (hd = 64: 8 lanes in bf16) */
template <typename E, int L>
__global__ void att_rowdot_vec_kernel(float *dr, const E *dout, const E *out, int B, int T, int H) {
    const int N = vn<E>::N;
    size_t rows = (size_t)B * T * H, per = blockDim.x / L;
    int lane = threadIdx.x % L;
    for (size_t r0 = blockIdx.x * per; r0 < rows; r0 += (size_t)gridDim.x * per) {
        size_t r = r0 + threadIdx.x / L;
        bool live = r < rows;
        size_t o = (live ? r : 0) * L * N + (size_t)lane * N; /* every lane takes part in the shuffles */
        float g[N], v[N], s = 0.f;
        ld16(g, dout + o);
        ld16(v, out + o);
#pragma unroll
        for (int e = 0; e < N; e++) s += g[e] * v[e];
#pragma unroll
        for (int x = L / 2; x > 0; x >>= 1) s += __shfl_xor_sync(0xffffffffu, s, x);
        if (live && lane == 0) {
            size_t bi = r / H;
            dr[((bi / T) * H + r % H) * T + bi % T] = s;
        }
    }
}
template <typename E>
static void rowdot_launch(cudaStream_t st, float *dr, const E *dout, const E *out, int B, int Tn, int H, int hd) {
    size_t rows = (size_t)B * Tn * H;
    int L = hd % vn<E>::N ? 0 : hd / vn<E>::N;
    bool aligned = aligned16(dout) && aligned16(out);
    if (aligned && L == 8)
        att_rowdot_vec_kernel<E, 8><<<grid_for(rows, 256 / 8), 256, 0, st>>>(dr, dout, out, B, Tn, H);
    else if (aligned && L == 16)
        att_rowdot_vec_kernel<E, 16><<<grid_for(rows, 256 / 16), 256, 0, st>>>(dr, dout, out, B, Tn, H);
    else
        att_rowdot_kernel<E><<<grid_for(rows, 8), 256, 0, st>>>(dr, dout, out, B, Tn, H, hd);
}
void k_att_rowdot(cudaStream_t st, int dt, float *dr, const void *dout, const void *out, int B, int Tn, int H, int hd) {
    if (B > 0 && Tn > 0 && H > 0)
        ACT_DISPATCH(dt, rowdot_launch<T>(st, dr, (const T *)dout, (const T *)out, B, Tn, H, hd));
}

__global__ void att_ds_kernel(float *dP, const float *P, const float *dr, size_t n, int T, int H,
                              int h) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dP[i] = P[i] * (dP[i] - dr[head_row(i / T, T, H, h)]);
}
void k_att_ds(cudaStream_t st, float *dP, const float *P, const float *dr, int B, int H, int T, int h) {
    size_t n = (size_t)B * T * T;
    if (n) att_ds_kernel<<<grid_for(n, 256), 256, 0, st>>>(dP, P, dr, n, T, H, h);
}
