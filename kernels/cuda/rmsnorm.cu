/* rmsnorm.cu — RMSNorm with the residual add fused in (y = rms(x + res)), and its backward.
 * One warp per row; the row's values are re-read from L1/L2 rather than held, so any width
 * works (D = 512 for the channel norm, T ≈ 97–916 for the mlp_t token norm). */
#include "common.cuh"

__global__ void rmsnorm_fwd_kernel(float *y, float *rstd, const float *x, const float *res,
                                   int rows, int dim, float eps) {
    int warps = blockDim.x / 32, lane = threadIdx.x & 31;
    for (int r = blockIdx.x * warps + threadIdx.x / 32; r < rows; r += gridDim.x * warps) {
        const float *xr = x + (size_t)r * dim;
        const float *rr = res ? res + (size_t)r * dim : nullptr;
        float ss = 0.f;
        for (int d = lane; d < dim; d += 32) {
            float v = rr ? xr[d] + rr[d] : xr[d];
            ss += v * v;
        }
        ss = warp_sum(ss);
        float s = rsqrtf(ss / dim + eps);
        float *yr = y + (size_t)r * dim;
        for (int d = lane; d < dim; d += 32) {
            float v = rr ? xr[d] + rr[d] : xr[d];
            yr[d] = v * s;
        }
        if (rstd && lane == 0) rstd[r] = s;
    }
}

void k_rmsnorm_fwd(cudaStream_t st, float *y, float *rstd, const float *x, const float *res,
                   int rows, int dim, float eps) {
    if (rows <= 0 || dim <= 0) return;
    rmsnorm_fwd_kernel<<<grid_for((size_t)rows, 8), 256, 0, st>>>(y, rstd, x, res, rows, dim, eps);
}

__global__ void rmsnorm_bwd_kernel(float *dx, const float *dy, const float *y, const float *rstd,
                                   int rows, int dim) {
    int warps = blockDim.x / 32, lane = threadIdx.x & 31;
    for (int r = blockIdx.x * warps + threadIdx.x / 32; r < rows; r += gridDim.x * warps) {
        const float *dyr = dy + (size_t)r * dim, *yr = y + (size_t)r * dim;
        float dot = 0.f;
        for (int d = lane; d < dim; d += 32) dot += dyr[d] * yr[d];
        dot = warp_sum(dot);
        float mean = dot / dim, s = rstd[r];
        float *dxr = dx + (size_t)r * dim;
        for (int d = lane; d < dim; d += 32) dxr[d] = s * (dyr[d] - yr[d] * mean);
    }
}

void k_rmsnorm_bwd(cudaStream_t st, float *dx, const float *dy, const float *y, const float *rstd,
                   int rows, int dim) {
    if (rows <= 0 || dim <= 0) return;
    rmsnorm_bwd_kernel<<<grid_for((size_t)rows, 8), 256, 0, st>>>(dx, dy, y, rstd, rows, dim);
}
