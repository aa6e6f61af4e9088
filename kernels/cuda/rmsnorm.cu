/* rmsnorm.cu — RMSNorm with the residual add fused in (y = rms(x + res)), and its backward,
 * over the first `dim` elements of rows `ld` apart (the outputs' pads past dim written as
 * zeros). One warp per row. Rows of up to 128 16-byte vectors (512 fp32 or 1024 bf16 values:
 * D = 512 for the channel norm, Tp ≈ 104 for the mlp_t token norm) are held in registers and
 * read once; longer or unaligned rows are re-read element by element from L1/L2. Sums are
 * fp32; in bf16 the residual sum is rounded to bf16 before the norm, as the reference adds
 * two bf16 tensors. */
#include "common.cuh"

#define RMS_MAXV 4 /* 16-byte vectors per lane held in registers */

template <typename T>
__global__ void rmsnorm_fwd_vec(T *y, float *rstd, const T *x, const T *res, int rows, int dim, int ld, float eps) {
    const int N = vn<T>::N;
    int warps = blockDim.x / 32, lane = threadIdx.x & 31, nv = ld / N;
    for (int r = blockIdx.x * warps + threadIdx.x / 32; r < rows; r += gridDim.x * warps) {
        size_t o = (size_t)r * ld;
        float v[RMS_MAXV][N];
        float ss = 0.f;
#pragma unroll
        for (int k = 0; k < RMS_MAXV; k++) {
            int j = lane + 32 * k;
            if (j >= nv) continue;
            ld16(v[k], x + o + (size_t)j * N);
            if (res) {
                float b[N];
                ld16(b, res + o + (size_t)j * N);
#pragma unroll
                for (int e = 0; e < N; e++) v[k][e] = to_f(from_f<T>(v[k][e] + b[e]));
            }
#pragma unroll
            for (int e = 0; e < N; e++) {
                if (j * N + e >= dim) v[k][e] = 0.f;
                ss += v[k][e] * v[k][e];
            }
        }
        ss = warp_sum(ss);
        float s = rsqrtf(ss / dim + eps);
#pragma unroll
        for (int k = 0; k < RMS_MAXV; k++) {
            int j = lane + 32 * k;
            if (j >= nv) continue;
#pragma unroll
            for (int e = 0; e < N; e++) v[k][e] *= s;
            st16(y + o + (size_t)j * N, v[k]);
        }
        if (rstd && lane == 0) rstd[r] = s;
    }
}

template <typename T>
__global__ void rmsnorm_fwd_any(T *y, float *rstd, const T *x, const T *res, int rows, int dim, int ld, float eps) {
    int warps = blockDim.x / 32, lane = threadIdx.x & 31;
    for (int r = blockIdx.x * warps + threadIdx.x / 32; r < rows; r += gridDim.x * warps) {
        const T *xr = x + (size_t)r * ld;
        const T *rr = res ? res + (size_t)r * ld : nullptr;
        float ss = 0.f;
        for (int d = lane; d < dim; d += 32) {
            float v = rr ? to_f(from_f<T>(to_f(xr[d]) + to_f(rr[d]))) : to_f(xr[d]);
            ss += v * v;
        }
        ss = warp_sum(ss);
        float s = rsqrtf(ss / dim + eps);
        T *yr = y + (size_t)r * ld;
        for (int d = lane; d < ld; d += 32) {
            float v = d >= dim ? 0.f : rr ? to_f(from_f<T>(to_f(xr[d]) + to_f(rr[d]))) : to_f(xr[d]);
            yr[d] = from_f<T>(v * s);
        }
        if (rstd && lane == 0) rstd[r] = s;
    }
}

template <typename T> static bool vec_rows(int ld, const void *a, const void *b, const void *c) {
    const int N = vn<T>::N;
    return ld % N == 0 && ld / N <= 32 * RMS_MAXV && aligned16(a) && aligned16(b) && (!c || aligned16(c));
}

void k_rmsnorm_fwd(cudaStream_t st, int dt, void *y, float *rstd, const void *x, const void *res, int rows, int dim,
                   int ld, float eps) {
    if (rows <= 0 || dim <= 0) return;
    ACT_DISPATCH(dt, {
        if (vec_rows<T>(ld, y, x, res))
            rmsnorm_fwd_vec<T><<<grid_for((size_t)rows, 8), 256, 0, st>>>((T *)y, rstd, (const T *)x, (const T *)res,
                                                                          rows, dim, ld, eps);
        else
            rmsnorm_fwd_any<T><<<grid_for((size_t)rows, 8), 256, 0, st>>>((T *)y, rstd, (const T *)x, (const T *)res,
                                                                          rows, dim, ld, eps);
    });
}

/* dx = rstd·(dy − y·mean(dy·y)) over the dim values; pads zero. */
template <typename T>
__global__ void rmsnorm_bwd_vec(T *dx, const T *dy, const T *y, const float *rstd, int rows, int dim, int ld) {
    const int N = vn<T>::N;
    int warps = blockDim.x / 32, lane = threadIdx.x & 31, nv = ld / N;
    for (int r = blockIdx.x * warps + threadIdx.x / 32; r < rows; r += gridDim.x * warps) {
        size_t o = (size_t)r * ld;
        float g[RMS_MAXV][N], v[RMS_MAXV][N];
        float dot = 0.f;
#pragma unroll
        for (int k = 0; k < RMS_MAXV; k++) {
            int j = lane + 32 * k;
            if (j >= nv) continue;
            ld16(g[k], dy + o + (size_t)j * N);
            ld16(v[k], y + o + (size_t)j * N);
#pragma unroll
            for (int e = 0; e < N; e++) {
                if (j * N + e >= dim) g[k][e] = v[k][e] = 0.f;
                dot += g[k][e] * v[k][e];
            }
        }
        dot = warp_sum(dot);
        float mean = dot / dim, s = rstd[r];
#pragma unroll
        for (int k = 0; k < RMS_MAXV; k++) {
            int j = lane + 32 * k;
            if (j >= nv) continue;
#pragma unroll
            for (int e = 0; e < N; e++) g[k][e] = s * (g[k][e] - v[k][e] * mean);
            st16(dx + o + (size_t)j * N, g[k]);
        }
    }
}

template <typename T>
__global__ void rmsnorm_bwd_any(T *dx, const T *dy, const T *y, const float *rstd, int rows, int dim, int ld) {
    int warps = blockDim.x / 32, lane = threadIdx.x & 31;
    for (int r = blockIdx.x * warps + threadIdx.x / 32; r < rows; r += gridDim.x * warps) {
        const T *dyr = dy + (size_t)r * ld, *yr = y + (size_t)r * ld;
        float dot = 0.f;
        for (int d = lane; d < dim; d += 32) dot += to_f(dyr[d]) * to_f(yr[d]);
        dot = warp_sum(dot);
        float mean = dot / dim, s = rstd[r];
        T *dxr = dx + (size_t)r * ld;
        for (int d = lane; d < ld; d += 32) dxr[d] = from_f<T>(d < dim ? s * (to_f(dyr[d]) - to_f(yr[d]) * mean) : 0.f);
    }
}

void k_rmsnorm_bwd(cudaStream_t st, int dt, void *dx, const void *dy, const void *y, const float *rstd, int rows,
                   int dim, int ld) {
    if (rows <= 0 || dim <= 0) return;
    ACT_DISPATCH(dt, {
        if (vec_rows<T>(ld, dx, dy, y))
            rmsnorm_bwd_vec<T><<<grid_for((size_t)rows, 8), 256, 0, st>>>((T *)dx, (const T *)dy, (const T *)y, rstd,
                                                                          rows, dim, ld);
        else
            rmsnorm_bwd_any<T><<<grid_for((size_t)rows, 8), 256, 0, st>>>((T *)dx, (const T *)dy, (const T *)y, rstd,
                                                                          rows, dim, ld);
    });
}
