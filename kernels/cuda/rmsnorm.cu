/* rmsnorm.cu — RMSNorm with the residual add fused in (y = rms(x + res)), and its backward,
 * over the first `dim` elements of rows `ld` apart (the outputs' pads past dim written as
 * zeros). A row belongs to L lanes of a warp (8, 16 or 32: the fewest that hold its 16-byte
 * vectors, up to 4 a lane). Rows of up to 4·L 16-byte vectors (512
 * fp32 or 1024 bf16 values with L = 32) are held in registers and read once; longer or
 * unaligned rows are re-read element by element from L1/L2 by a whole warp. Sums are fp32; in
 * bf16 the residual sum is rounded to bf16 before the norm, as the reference adds two bf16
 * tensors. At the end, mlp_t's norm over T with the transposes around it in the same pass. */
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
 * that hold the row's vectors, up to RMS_MAXV a lane. More loads in flight a thread and fewer
 * shuffles: a 512-wide bf16 row on 16 lanes, 4 vectors each, took rmsnorm_bwd from 82 to 73.5 µs
 * a sudoku_att call against 32 lanes of 2 (H200, Nsight Compute). */
template <typename T> static int vec_lanes(int ld, const void *a, const void *b, const void *c) {
    const int N = vn<T>::N;
    if (ld % N || ld / N > 32 * RMS_MAXV || !aligned16(a) || !aligned16(b) || (c && !aligned16(c))) return 0;
    int nv = ld / N;
    return nv <= 8 * RMS_MAXV ? 8 : nv <= 16 * RMS_MAXV ? 16 : 32;
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

/* ---- mlp_t's norm over T with its transposes (rmsnorm_t_fwd / rmsnorm_t_bwd) -------------
 * A block takes C channels of one sample. Their (B, D, Tp) rows are one contiguous stretch of
 * memory, and the (B, T, D) side holds C·esz contiguous bytes a position, so both sides move
 * as pairs of elements, a warp's accesses along one contiguous run. The (C × T) tile sits in
 * shared memory as channel rows SP elements apart, SP ≡ 2 (mod 4): the threads of a warp, one
 * channel pair each at one position, meet two to a bank in bf16 (four in fp32, whose pairs'
 * 8-byte stores rule out an odd pitch). Each row's sum is a warp's over the tile (lanes along
 * t). */
#define RT_THREADS 256

/* element pairs: bf16 as one 4-byte word, fp32 as 8 bytes */
__device__ __forceinline__ float2 ld2(const bf16 *p) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p));
}
__device__ __forceinline__ float2 ld2(const float *p) { return *reinterpret_cast<const float2 *>(p); }
__device__ __forceinline__ void st2(bf16 *p, float a, float b) {
    *reinterpret_cast<__nv_bfloat162 *>(p) = __floats2bfloat162_rn(a, b);
}
__device__ __forceinline__ void st2(float *p, float a, float b) { *reinterpret_cast<float2 *>(p) = make_float2(a, b); }

/* the tile's row pitch in elements: even, half of it odd */
static int rt_pitch(int Tp) { return (Tp + 2) / 4 * 4 + 2; }

/* y (B, T, D) = (rms(xT + resT))ᵀ. A: the C rows in, their residual sums rounded to T as the
 * row kernel rounds them; B: a warp a row, its rstd; C: the tile out along D, scaled. */
template <typename T>
__global__ void __launch_bounds__(RT_THREADS) rmsnorm_t_fwd_tile(T *y, float *rstd, const T *x, const T *res, int B,
                                                                 int Tn, int Tp, int D, int C, int SP, float eps) {
    extern __shared__ __align__(16) unsigned char rt_raw[];
    T *sm = (T *)rt_raw;
    float *sc = (float *)(rt_raw + (size_t)C * SP * sizeof(T));
    int c0 = blockIdx.x * C, cn = min(C, D - c0), lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int hp = Tp / 2, half = C / 2;
    for (int b = blockIdx.y; b < B; b += gridDim.y) {
        size_t o = ((size_t)b * D + c0) * Tp;
#pragma unroll 4
        for (int i = threadIdx.x; i < cn * hp; i += RT_THREADS) {
            int c = i / hp, t = 2 * (i - c * hp);
            float2 v = ld2(x + o + (size_t)c * Tp + t);
            if (res) {
                float2 r = ld2(res + o + (size_t)c * Tp + t);
                v.x = to_f(from_f<T>(v.x + r.x)), v.y = to_f(from_f<T>(v.y + r.y));
            }
            st2(sm + c * SP + t, v.x, v.y);
        }
        __syncthreads();
        for (int c = warp; c < cn; c += RT_THREADS / 32) {
            float ss = 0.f;
            for (int t = lane; t < Tn; t += 32) {
                float v = to_f(sm[c * SP + t]);
                ss += v * v;
            }
            float s = rsqrtf(warp_sum(ss) / Tn + eps);
            if (lane == 0) {
                sc[c] = s;
                if (rstd) rstd[(size_t)b * D + c0 + c] = s;
            }
        }
        __syncthreads();
#pragma unroll 4
        for (int i = threadIdx.x; i < Tn * half; i += RT_THREADS) {
            int t = i / half, c = 2 * (i - t * half);
            if (c < cn)
                st2(y + ((size_t)b * Tn + t) * D + c0 + c, to_f(sm[c * SP + t]) * sc[c],
                    to_f(sm[(c + 1) * SP + t]) * sc[c + 1]);
        }
        __syncthreads();
    }
}

/* dxT (B, D, Tp rows) = rstd·(dyᵀ − yᵀ·mean(dyᵀ·yᵀ)). A: the (T × C) stretches of dy and y in
 * along D, into channel rows; B: a warp a row, the dot, then the row out in pairs, zeros past T. */
template <typename T>
__global__ void __launch_bounds__(RT_THREADS) rmsnorm_t_bwd_tile(T *dx, const T *dy, const T *y, const float *rstd,
                                                                 int B, int Tn, int Tp, int D, int C, int SP) {
    extern __shared__ __align__(16) unsigned char rt_raw[];
    T *sg = (T *)rt_raw, *sv = sg + (size_t)C * SP;
    int c0 = blockIdx.x * C, cn = min(C, D - c0), lane = threadIdx.x & 31, warp = threadIdx.x >> 5, half = C / 2;
    for (int b = blockIdx.y; b < B; b += gridDim.y) {
#pragma unroll 4
        for (int i = threadIdx.x; i < Tn * half; i += RT_THREADS) {
            int t = i / half, c = 2 * (i - t * half);
            if (c >= cn) continue;
            size_t o = ((size_t)b * Tn + t) * D + c0 + c;
            float2 g = ld2(dy + o), v = ld2(y + o);
            sg[c * SP + t] = from_f<T>(g.x), sg[(c + 1) * SP + t] = from_f<T>(g.y);
            sv[c * SP + t] = from_f<T>(v.x), sv[(c + 1) * SP + t] = from_f<T>(v.y);
        }
        __syncthreads();
        /* the row goes out in pairs up to Tp: the pads' tile values (never written) are read and
         * dropped by the selects */
        for (int c = warp; c < cn; c += RT_THREADS / 32) {
            float dot = 0.f;
            for (int t = lane; t < Tn; t += 32) dot += to_f(sg[c * SP + t]) * to_f(sv[c * SP + t]);
            size_t r = (size_t)b * D + c0 + c;
            float mean = warp_sum(dot) / Tn, s = rstd[r];
            T *dxr = dx + r * Tp;
            for (int t = 2 * lane; t < Tp; t += 64) {
                float2 g = ld2(sg + c * SP + t), v = ld2(sv + c * SP + t);
                st2(dxr + t, t < Tn ? s * (g.x - v.x * mean) : 0.f, t + 1 < Tn ? s * (g.y - v.y * mean) : 0.f);
            }
        }
        __syncthreads();
    }
}

/* the pair kernels' terms: rows of even length, an even channel count, pairs aligned */
static bool rt_pairs_ok(int Tp, int D, size_t esz, const void *a, const void *b, const void *c) {
    uintptr_t m = 2 * esz - 1;
    return Tp % 2 == 0 && D % 2 == 0 && !((uintptr_t)a & m) && !((uintptr_t)b & m) && !((uintptr_t)c & m);
}

/* channels a block (64 down to 8) whose tiles fit `per_c`·C bytes in 48 KiB; 0 if none */
static int rt_channels(size_t per_c) {
    for (int C = 64; C >= 8; C /= 2)
        if ((size_t)C * per_c <= 48 * 1024) return C;
    return 0;
}

/* Where not even 8 channels' tiles fit in 48 KiB (the backward's from Tp ≈ 1530 in bf16 and 766
 * in fp32, the forward's from ≈ 3060 and 1530) or the pairs do not line up, a warp a channel
 * row straight from memory: the same sums, the (B, T, D) side read or written D apart. */
template <typename T>
__global__ void rmsnorm_t_fwd_any(T *y, float *rstd, const T *x, const T *res, int B, int Tn, int Tp, int D,
                                  float eps) {
    int warps = blockDim.x / 32, lane = threadIdx.x & 31;
    for (size_t r = (size_t)blockIdx.x * warps + threadIdx.x / 32; r < (size_t)B * D; r += (size_t)gridDim.x * warps) {
        size_t b = r / D, d = r % D, o = r * Tp;
        float ss = 0.f;
        for (int t = lane; t < Tn; t += 32) {
            float v = to_f(x[o + t]);
            if (res) v = to_f(from_f<T>(v + to_f(res[o + t])));
            ss += v * v;
        }
        float s = rsqrtf(warp_sum(ss) / Tn + eps);
        for (int t = lane; t < Tn; t += 32) {
            float v = to_f(x[o + t]);
            if (res) v = to_f(from_f<T>(v + to_f(res[o + t])));
            y[(b * Tn + t) * D + d] = from_f<T>(v * s);
        }
        if (rstd && lane == 0) rstd[r] = s;
    }
}

template <typename T>
__global__ void rmsnorm_t_bwd_any(T *dx, const T *dy, const T *y, const float *rstd, int B, int Tn, int Tp, int D) {
    int warps = blockDim.x / 32, lane = threadIdx.x & 31;
    for (size_t r = (size_t)blockIdx.x * warps + threadIdx.x / 32; r < (size_t)B * D; r += (size_t)gridDim.x * warps) {
        size_t b = r / D, d = r % D, c = b * Tn * D + d;
        float dot = 0.f;
        for (int t = lane; t < Tn; t += 32) dot += to_f(dy[c + (size_t)t * D]) * to_f(y[c + (size_t)t * D]);
        float mean = warp_sum(dot) / Tn, s = rstd[r];
        for (int t = lane; t < Tp; t += 32)
            dx[r * Tp + t] =
                from_f<T>(t < Tn ? s * (to_f(dy[c + (size_t)t * D]) - to_f(y[c + (size_t)t * D]) * mean) : 0.f);
    }
}

static dim3 rt_grid(int D, int C, int B) { return dim3((unsigned)((D + C - 1) / C), (unsigned)(B < 65535 ? B : 65535)); }

void k_rmsnorm_t_fwd(cudaStream_t st, int dt, void *y, float *rstd, const void *x, const void *res, int B, int Tn,
                     int Tp, int D, float eps) {
    if (B <= 0 || Tn <= 0 || D <= 0) return;
    ACT_DISPATCH(dt, {
        int SP = rt_pitch(Tp), C = rt_pairs_ok(Tp, D, sizeof(T), y, x, res) ? rt_channels((size_t)SP * sizeof(T) + sizeof(float)) : 0;
        if (C)
            rmsnorm_t_fwd_tile<T><<<rt_grid(D, C, B), RT_THREADS, (size_t)C * (SP * sizeof(T) + sizeof(float)), st>>>(
                (T *)y, rstd, (const T *)x, (const T *)res, B, Tn, Tp, D, C, SP, eps);
        else
            rmsnorm_t_fwd_any<T><<<grid_for((size_t)B * D, 8), 256, 0, st>>>((T *)y, rstd, (const T *)x,
                                                                              (const T *)res, B, Tn, Tp, D, eps);
    });
}

void k_rmsnorm_t_bwd(cudaStream_t st, int dt, void *dx, const void *dy, const void *y, const float *rstd, int B,
                     int Tn, int Tp, int D) {
    if (B <= 0 || Tn <= 0 || D <= 0) return;
    ACT_DISPATCH(dt, {
        int SP = rt_pitch(Tp), C = rt_pairs_ok(Tp, D, sizeof(T), dx, dy, y) ? rt_channels(2 * (size_t)SP * sizeof(T)) : 0;
        if (C)
            rmsnorm_t_bwd_tile<T><<<rt_grid(D, C, B), RT_THREADS, 2 * (size_t)C * SP * sizeof(T), st>>>(
                (T *)dx, (const T *)dy, (const T *)y, rstd, B, Tn, Tp, D, C, SP);
        else
            rmsnorm_t_bwd_any<T><<<grid_for((size_t)B * D, 8), 256, 0, st>>>((T *)dx, (const T *)dy, (const T *)y,
                                                                              rstd, B, Tn, Tp, D);
    });
}
