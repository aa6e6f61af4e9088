/* rmsnorm.cu — RMSNorm with the residual add fused in (y = rms(x + res)), and its backward,
 * over the first `dim` elements of rows `ld` apart (the outputs' pads past dim written as
 * zeros). A row belongs to L lanes of a warp (L = 32, or 16 or 8 for short rows, so that
 * mlp_t's 104-value token rows keep every lane busy). Rows of up to 4·L 16-byte vectors (512
 * fp32 or 1024 bf16 values with L = 32) are held in registers and read once; longer or
 * unaligned rows are re-read element by element from L1/L2 by a whole warp. Sums are fp32; in
 * bf16 the residual sum is rounded to bf16 before the norm, as the reference adds two bf16
 * tensors. */
#include <type_traits>

#include "common.cuh"

#define RMS_MAXV 4 /* 16-byte vectors per lane held in registers */

template <int L> __device__ __forceinline__ float group_sum(float v) {
#pragma unroll
    for (int o = L / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* rows handled by a block of 256 threads, L lanes a row */
template <int L> static unsigned rms_grid(int rows) { return grid_for((size_t)rows, 256 / L); }

/* The row of this thread's group of L lanes among the rows r0.. its block takes in this pass.
 * Every lane of a warp takes part in the shuffles: a group past the last row computes on row 0
 * (live = 0) and writes nothing. */
template <int L> __device__ __forceinline__ int group_row(int r0, int rows, int &live) {
    int r = r0 + threadIdx.x / L;
    live = r < rows;
    return live ? r : 0;
}

/* f(k, j) for each of the row's 16-byte vectors this lane holds in registers: vector j = lane +
 * L·k of the row's nv, the lane's k-th (k < RMS_MAXV). f takes the kernel's pointer parameters by
 * value and the rest by reference, which gives the PTX of the loops written out (a pointer
 * parameter taken by reference made the compiler order the code otherwise). */
template <int L, typename F> __device__ __forceinline__ void for_vecs(int lane, int nv, F f) {
#pragma unroll
    for (int k = 0; k < RMS_MAXV; k++) {
        int j = lane + L * k;
        if (j >= nv) continue;
        f(k, j);
    }
}

/* acc += Σ a[e]·b[e] over the vector's values, those at columns c0 + e ≥ dim (the row's pad)
 * zeroed first in both */
template <int N>
__device__ __forceinline__ void dot_in_row(float (&a)[N], float (&b)[N], int c0, int dim, float &acc) {
#pragma unroll
    for (int e = 0; e < N; e++) {
        if (c0 + e >= dim) a[e] = b[e] = 0.f;
        acc += a[e] * b[e];
    }
}

template <typename T, int L>
__global__ void rmsnorm_fwd_vec(T *y, float *rstd, const T *x, const T *res, int rows, int dim, int ld, float eps) {
    const int N = vn<T>::N;
    int per = blockDim.x / L, lane = threadIdx.x % L, nv = ld / N;
    for (int r0 = blockIdx.x * per; r0 < rows; r0 += gridDim.x * per) {
        int live, r = group_row<L>(r0, rows, live);
        size_t o = (size_t)r * ld;
        float v[RMS_MAXV][N];
        float ss = 0.f;
        for_vecs<L>(lane, nv, [&, x, res](int k, int j) {
            ld16(v[k], x + o + (size_t)j * N);
            if (res) {
                float b[N];
                ld16(b, res + o + (size_t)j * N);
#pragma unroll
                for (int e = 0; e < N; e++) v[k][e] = to_f(from_f<T>(v[k][e] + b[e]));
            }
            dot_in_row(v[k], v[k], j * N, dim, ss);
        });
        ss = group_sum<L>(ss);
        float s = rsqrtf(ss / dim + eps);
        if (!live) continue;
        for_vecs<L>(lane, nv, [&, y](int k, int j) {
#pragma unroll
            for (int e = 0; e < N; e++) v[k][e] *= s;
            st16(y + o + (size_t)j * N, v[k]);
        });
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

/* Lanes per row for the register path (0: the row does not fit it): the fewest of 8, 16, 32
 * that hold the row's vectors one per lane, else 32 lanes with up to RMS_MAXV each. */
template <typename T> static int vec_lanes(int ld, const void *a, const void *b, const void *c) {
    const int N = vn<T>::N;
    if (ld % N || ld / N > 32 * RMS_MAXV || !aligned16(a) || !aligned16(b) || (c && !aligned16(c))) return 0;
    int nv = ld / N;
    return nv <= 8 ? 8 : nv <= 16 ? 16 : 32;
}

/* f(std::integral_constant<int, L>) for the lanes-per-row count L (8, 16 or 32) */
template <typename F> static void with_lanes(int L, F f) {
    if (L == 8)
        f(std::integral_constant<int, 8>());
    else if (L == 16)
        f(std::integral_constant<int, 16>());
    else
        f(std::integral_constant<int, 32>());
}

/* One launch over rows: the register path's kernel vec(lc) for the L lanes a row (lc: L as a
 * std::integral_constant), or the warp-a-row kernel any where L is 0 (the row does not fit). */
template <typename Vec, typename Any, typename... Args>
static void rms_launch(cudaStream_t st, int L, int rows, Vec vec, Any any, Args... args) {
    if (L)
        with_lanes(L, [&](auto lc) {
            auto kernel = vec(lc);
            kernel<<<rms_grid<decltype(lc)::value>(rows), 256, 0, st>>>(args...);
        });
    else
        any<<<grid_for((size_t)rows, 8), 256, 0, st>>>(args...);
}

void k_rmsnorm_fwd(cudaStream_t st, int dt, void *y, float *rstd, const void *x, const void *res, int rows, int dim,
                   int ld, float eps) {
    if (rows <= 0 || dim <= 0) return;
    ACT_DISPATCH(dt, rms_launch(st, vec_lanes<T>(ld, y, x, res), rows,
                                [](auto lc) { return rmsnorm_fwd_vec<T, decltype(lc)::value>; }, rmsnorm_fwd_any<T>,
                                (T *)y, rstd, (const T *)x, (const T *)res, rows, dim, ld, eps));
}

/* dx = rstd·(dy − y·mean(dy·y)) over the dim values; pads zero. */
template <typename T, int L>
__global__ void rmsnorm_bwd_vec(T *dx, const T *dy, const T *y, const float *rstd, int rows, int dim, int ld) {
    const int N = vn<T>::N;
    int per = blockDim.x / L, lane = threadIdx.x % L, nv = ld / N;
    for (int r0 = blockIdx.x * per; r0 < rows; r0 += gridDim.x * per) {
        int live, r = group_row<L>(r0, rows, live);
        size_t o = (size_t)r * ld;
        float g[RMS_MAXV][N], v[RMS_MAXV][N];
        float dot = 0.f;
        for_vecs<L>(lane, nv, [&, dy, y](int k, int j) {
            ld16(g[k], dy + o + (size_t)j * N);
            ld16(v[k], y + o + (size_t)j * N);
            dot_in_row(g[k], v[k], j * N, dim, dot);
        });
        dot = group_sum<L>(dot);
        float mean = dot / dim, s = rstd[r];
        if (!live) continue;
        for_vecs<L>(lane, nv, [&, dx](int k, int j) {
#pragma unroll
            for (int e = 0; e < N; e++) g[k][e] = s * (g[k][e] - v[k][e] * mean);
            st16(dx + o + (size_t)j * N, g[k]);
        });
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
    ACT_DISPATCH(dt, rms_launch(st, vec_lanes<T>(ld, dx, dy, y), rows,
                                [](auto lc) { return rmsnorm_bwd_vec<T, decltype(lc)::value>; }, rmsnorm_bwd_any<T>,
                                (T *)dx, (const T *)dy, (const T *)y, rstd, rows, dim, ld));
}
