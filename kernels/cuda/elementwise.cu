/* elementwise.cu — the plain elementwise ops: add, axpy, batched transpose, bias and its
 * gradient. Grid-stride loops; float4 where the pointers allow it. */
#include "common.cuh"

static bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

__global__ void add_kernel(float *y, const float *a, const float *b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = a[i] + b[i];
}
__global__ void add4_kernel(float4 *y, const float4 *a, const float4 *b, size_t n4) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 u = a[i], v = b[i];
        y[i] = make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w);
    }
}

void k_add(cudaStream_t st, float *y, const float *x1, const float *x2, size_t n) {
    if (!n) return;
    if (n % 4 == 0 && aligned16(y) && aligned16(x1) && aligned16(x2))
        add4_kernel<<<grid_for(n / 4, 256), 256, 0, st>>>((float4 *)y, (const float4 *)x1,
                                                          (const float4 *)x2, n / 4);
    else
        add_kernel<<<grid_for(n, 256), 256, 0, st>>>(y, x1, x2, n);
}

__global__ void axpy_kernel(float *y, const float *x, float a, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] += a * x[i];
}
void k_axpy(cudaStream_t st, float *y, const float *x, float alpha, size_t n) {
    if (n) axpy_kernel<<<grid_for(n, 256), 256, 0, st>>>(y, x, alpha, n);
}

/* 32×32 tiles through shared memory (padded against bank conflicts). */
__global__ void transpose_kernel(float *out, const float *in, int rows, int cols) {
    __shared__ float tile[32][33];
    size_t mat = (size_t)rows * cols;
    const float *src = in + blockIdx.z * mat;
    float *dst = out + blockIdx.z * mat;
    int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    for (int k = threadIdx.y; k < 32; k += blockDim.y) {
        int r = r0 + k, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[k][threadIdx.x] = src[(size_t)r * cols + c];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < 32; k += blockDim.y) {
        int c = c0 + k, r = r0 + threadIdx.x;
        if (r < rows && c < cols) dst[(size_t)c * rows + r] = tile[threadIdx.x][k];
    }
}
void k_transpose(cudaStream_t st, float *out, const float *in, int batch, int rows, int cols) {
    if (batch <= 0 || rows <= 0 || cols <= 0) return;
    dim3 grid((cols + 31) / 32, (rows + 31) / 32, batch), block(32, 8);
    transpose_kernel<<<grid, block, 0, st>>>(out, in, rows, cols);
}

__global__ void bias_fwd_kernel(float *y, const float *bias, int rows, int cols, int ld) {
    size_t n = (size_t)rows * cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / cols, c = i % cols;
        y[r * ld + c] += bias[c];
    }
}
void k_bias_fwd(cudaStream_t st, float *y, const float *bias, int rows, int cols, int ld) {
    size_t n = (size_t)rows * cols;
    if (n) bias_fwd_kernel<<<grid_for(n, 256), 256, 0, st>>>(y, bias, rows, cols, ld);
}

/* One block per column: rows summed in a fixed order (deterministic). */
__global__ void bias_bwd_kernel(float *dbias, const float *dy, int rows, int ld) {
    int c = blockIdx.x;
    double acc = 0.0;
    for (int r = threadIdx.x; r < rows; r += blockDim.x) acc += dy[(size_t)r * ld + c];
    __shared__ double sh[32];
    acc = block_sum_d(acc, sh);
    if (threadIdx.x == 0) dbias[c] += (float)acc;
}
void k_bias_bwd(cudaStream_t st, float *dbias, const float *dy, int rows, int cols, int ld) {
    if (rows > 0 && cols > 0) bias_bwd_kernel<<<cols, 256, 0, st>>>(dbias, dy, rows, ld);
}

/* fp32 → bf16 (round to nearest even) of a contiguous run: a dense GEMM operand in bf16 mode. */
#include <cuda_bf16.h>
__global__ void to_bf16_kernel(__nv_bfloat16 *dst, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16_rn(src[i]);
}
__global__ void to_bf16x4_kernel(__nv_bfloat162 *dst, const float4 *src, size_t n4) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 v = src[i];
        dst[2 * i] = __floats2bfloat162_rn(v.x, v.y);
        dst[2 * i + 1] = __floats2bfloat162_rn(v.z, v.w);
    }
}
void k_to_bf16(cudaStream_t st, void *dst, const float *src, size_t n) {
    if (!n) return;
    if (n % 4 == 0 && aligned16(src) && ((uintptr_t)dst & 7u) == 0) /* 16-byte loads */
        to_bf16x4_kernel<<<grid_for(n / 4, 256), 256, 0, st>>>((__nv_bfloat162 *)dst, (const float4 *)src, n / 4);
    else
        to_bf16_kernel<<<grid_for(n, 256), 256, 0, st>>>((__nv_bfloat16 *)dst, src, n);
}
