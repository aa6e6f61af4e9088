/* attention.cu — the elementwise parts of non-causal attention around the backend's batched
 * GEMMs: row softmax with the log-sum-exp saved, its recomputation from the lse in the
 * backward, rowsum(dO∘O) and dS = P∘(dP − rowsum). Scores are one head's (B, T, T) at a time
 * (head h of H), so the score buffer is H times smaller; lse and rowsums are (B, H, T). */

/* The lse/rowsum index of score row r = b·T + i of head h. */
__device__ __forceinline__ size_t head_row(size_t r, int T, int H, int h) {
    return ((r / T) * H + h) * T + r % T;
}
#include "common.cuh"

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
__global__ void att_rowdot_kernel(float *dr, const float *dout, const float *out, int B, int T,
                                  int H, int hd) {
    int warps = blockDim.x / 32, lane = threadIdx.x & 31;
    size_t rows = (size_t)B * T * H;
    for (size_t r = blockIdx.x * (size_t)warps + threadIdx.x / 32; r < rows;
         r += (size_t)gridDim.x * warps) {
        const float *g = dout + r * hd, *o = out + r * hd;
        float s = 0.f;
        for (int c = lane; c < hd; c += 32) s += g[c] * o[c];
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
void k_att_rowdot(cudaStream_t st, float *dr, const float *dout, const float *out, int B, int T,
                  int H, int hd) {
    size_t rows = (size_t)B * T * H;
    if (rows) att_rowdot_kernel<<<grid_for(rows, 8), 256, 0, st>>>(dr, dout, out, B, T, H, hd);
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
