/* swiglu.cu — SwiGLU on the [gate | up] GEMM output (rows × 2I → rows × I) and its backward,
 * in PyTorch's formulas (silu(g)·u; dg = d·u·σ·(1 + g(1 − σ)), du = d·silu(g)), on activations
 * of either type with fp32 arithmetic; 16 bytes of each operand per thread where I allows. */
#include "common.cuh"

__device__ __forceinline__ float silu_f(float g) { return g / (1.f + __expf(-g)); }

template <typename T> __global__ void swiglu_fwd_kernel(T *out, const T *gu, int rows, int I) {
    size_t n = (size_t)rows * I;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / I, c = i % I;
        float g = to_f(gu[r * 2 * I + c]), u = to_f(gu[r * 2 * I + I + c]);
        out[i] = from_f<T>(silu_f(g) * u);
    }
}
template <typename T> __global__ void swiglu_fwd16_kernel(T *out, const T *gu, int rows, int I) {
    const int N = vn<T>::N;
    int Iv = I / N;
    size_t n = (size_t)rows * Iv;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / Iv, c = (i % Iv) * N;
        float g[N], u[N];
        ld16(g, gu + r * 2 * I + c);
        ld16(u, gu + r * 2 * I + I + c);
#pragma unroll
        for (int e = 0; e < N; e++) g[e] = silu_f(g[e]) * u[e];
        st16(out + r * I + c, g);
    }
}
void k_swiglu_fwd(cudaStream_t st, int dt, void *out, const void *gu, int rows, int I) {
    size_t n = (size_t)rows * I;
    if (!n) return;
    ACT_DISPATCH(dt, {
        const int N = vn<T>::N;
        if (I % N == 0 && aligned16(out) && aligned16(gu))
            swiglu_fwd16_kernel<T><<<grid_for(n / N, 256), 256, 0, st>>>((T *)out, (const T *)gu, rows, I);
        else
            swiglu_fwd_kernel<T><<<grid_for(n, 256), 256, 0, st>>>((T *)out, (const T *)gu, rows, I);
    });
}

__device__ __forceinline__ void swiglu_grad(float d, float g, float u, float *dg, float *du) {
    float e = 1.f + __expf(-g), sig = 1.f / e;
    *dg = d * u * sig * (1.f + g * (1.f - sig));
    *du = d * (g / e);
}

template <typename T> __global__ void swiglu_bwd_kernel(T *dgu, T *out, const T *dout, const T *gu, int rows, int I) {
    size_t n = (size_t)rows * I;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / I, c = i % I;
        float dg, du, g = to_f(gu[r * 2 * I + c]), u = to_f(gu[r * 2 * I + I + c]);
        if (out) out[i] = from_f<T>(silu_f(g) * u);
        swiglu_grad(to_f(dout[i]), g, u, &dg, &du);
        dgu[r * 2 * I + c] = from_f<T>(dg);
        dgu[r * 2 * I + I + c] = from_f<T>(du);
    }
}
template <typename T> __global__ void swiglu_bwd16_kernel(T *dgu, T *out, const T *dout, const T *gu, int rows, int I) {
    const int N = vn<T>::N;
    int Iv = I / N;
    size_t n = (size_t)rows * Iv;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / Iv, c = (i % Iv) * N;
        float d[N], g[N], u[N];
        ld16(d, dout + r * I + c);
        ld16(g, gu + r * 2 * I + c);
        ld16(u, gu + r * 2 * I + I + c);
        if (out) {
            float a[N];
#pragma unroll
            for (int e = 0; e < N; e++) a[e] = silu_f(g[e]) * u[e];
            st16(out + r * I + c, a);
        }
#pragma unroll
        for (int e = 0; e < N; e++) swiglu_grad(d[e], g[e], u[e], &g[e], &u[e]);
        st16(dgu + r * 2 * I + c, g);
        st16(dgu + r * 2 * I + I + c, u);
    }
}
void k_swiglu_bwd(cudaStream_t st, int dt, void *dgu, void *out, const void *dout, const void *gu, int rows, int I) {
    size_t n = (size_t)rows * I;
    if (!n) return;
    ACT_DISPATCH(dt, {
        const int N = vn<T>::N;
        if (I % N == 0 && aligned16(dgu) && aligned16(dout) && aligned16(gu) && (!out || aligned16(out)))
            swiglu_bwd16_kernel<T><<<grid_for(n / N, 256), 256, 0, st>>>((T *)dgu, (T *)out, (const T *)dout,
                                                                         (const T *)gu, rows, I);
        else
            swiglu_bwd_kernel<T><<<grid_for(n, 256), 256, 0, st>>>((T *)dgu, (T *)out, (const T *)dout, (const T *)gu,
                                                                   rows, I);
    });
}
