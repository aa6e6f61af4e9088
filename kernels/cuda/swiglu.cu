/* swiglu.cu — SwiGLU on the [gate | up] GEMM output (rows × 2I → rows × I) and its backward,
 * in PyTorch's formulas (silu(g)·u; dg = d·u·σ·(1 + g(1 − σ)), du = d·silu(g)). */
#include "common.cuh"

__global__ void swiglu_fwd_kernel(float *out, const float *gu, int rows, int I) {
    size_t n = (size_t)rows * I;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / I, c = i % I;
        float g = gu[r * 2 * I + c], u = gu[r * 2 * I + I + c];
        out[i] = g / (1.f + __expf(-g)) * u;
    }
}
void k_swiglu_fwd(cudaStream_t st, float *out, const float *gu, int rows, int I) {
    size_t n = (size_t)rows * I;
    if (n) swiglu_fwd_kernel<<<grid_for(n, 256), 256, 0, st>>>(out, gu, rows, I);
}

__global__ void swiglu_bwd_kernel(float *dgu, const float *dout, const float *gu, int rows, int I) {
    size_t n = (size_t)rows * I;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / I, c = i % I;
        float g = gu[r * 2 * I + c], u = gu[r * 2 * I + I + c], d = dout[i];
        float e = 1.f + __expf(-g), sig = 1.f / e;
        dgu[r * 2 * I + c] = d * u * sig * (1.f + g * (1.f - sig));
        dgu[r * 2 * I + I + c] = d * (g / e);
    }
}
void k_swiglu_bwd(cudaStream_t st, float *dgu, const float *dout, const float *gu, int rows, int I) {
    size_t n = (size_t)rows * I;
    if (n) swiglu_bwd_kernel<<<grid_for(n, 256), 256, 0, st>>>(dgu, dout, gu, rows, I);
}
