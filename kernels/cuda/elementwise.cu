/* elementwise.cu — the plain elementwise ops: add and axpy on activations, batched transpose
 * (strided rows, zero pads), bias and its gradient, and element-type conversion (the bf16
 * copy of the weights, GEMM operands). Grid-stride loops; 16-byte vectors where the pointers
 * and sizes allow them. */
#include "common.cuh"

/* y = p + a·q: add (a = 1, exact as p + q) and axpy (p = y) are this one pass. */
template <typename T> __global__ void pq_kernel(T *y, const T *p, const T *q, float a, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = from_f<T>(to_f(p[i]) + a * to_f(q[i]));
}
template <typename T> __global__ void pq16_kernel(T *y, const T *p, const T *q, float a, size_t nv) {
    const int N = vn<T>::N;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nv; i += (size_t)gridDim.x * blockDim.x) {
        float u[N], v[N];
        ld16(u, p + i * N);
        ld16(v, q + i * N);
#pragma unroll
        for (int k = 0; k < N; k++) u[k] += a * v[k];
        st16(y + i * N, u);
    }
}
static void k_pq(cudaStream_t st, int dt, void *y, const void *p, const void *q, float a, size_t n) {
    if (!n) return;
    ACT_DISPATCH(dt, {
        const int N = vn<T>::N;
        if (n % N == 0 && aligned16(y) && aligned16(p) && aligned16(q))
            pq16_kernel<T><<<grid_for(n / N, 256), 256, 0, st>>>((T *)y, (const T *)p, (const T *)q, a, n / N);
        else
            pq_kernel<T><<<grid_for(n, 256), 256, 0, st>>>((T *)y, (const T *)p, (const T *)q, a, n);
    });
}

void k_add(cudaStream_t st, int dt, void *y, const void *x1, const void *x2, size_t n) { k_pq(st, dt, y, x1, x2, 1.0f, n); }
void k_axpy(cudaStream_t st, int dt, void *y, const void *x, float alpha, size_t n) { k_pq(st, dt, y, y, x, alpha, n); }

/* 32×32 tiles through shared memory (padded against bank conflicts). The tiles cover the
 * output rows' whole stride, so those past `rows` write the pads' zeros. */
template <typename T>
__global__ void transpose_kernel(T *out, int ldo, const T *in, int ldi, int rows, int cols) {
    __shared__ T tile[32][33];
    const T *src = in + blockIdx.z * (size_t)rows * ldi;
    T *dst = out + blockIdx.z * (size_t)cols * ldo;
    int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    for (int k = threadIdx.y; k < 32; k += blockDim.y) {
        int r = r0 + k, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[k][threadIdx.x] = src[(size_t)r * ldi + c];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < 32; k += blockDim.y) {
        int c = c0 + k, r = r0 + threadIdx.x;
        if (c < cols && r < ldo) dst[(size_t)c * ldo + r] = r < rows ? tile[threadIdx.x][k] : from_f<T>(0.f);
    }
}
/* bf16 in 64×64 tiles moved as 16-byte vectors both ways: rows of the input read 8 columns a
 * thread; out, each thread takes two neighbouring columns of 8 rows as 32-bit pairs (a warp's
 * 32 threads read 32 neighbouring words: conflict-free) and splits them into the 8 values of
 * each of its two out rows (half the shared-memory loads of gathering the values one by one).
 * Needs ldi and ldo multiples of 8 and 16-byte aligned matrices; an input row may be read up to
 * its ldi (past cols), never past it. */
#define TR16 64
__global__ void transpose16_kernel(bf16 *out, int ldo, const bf16 *in, int ldi, int rows, int cols) {
    __shared__ __align__(16) bf16 tile[TR16][TR16 + 8];
    const bf16 *src = in + blockIdx.z * (size_t)rows * ldi;
    bf16 *dst = out + blockIdx.z * (size_t)cols * ldo;
    int c0 = blockIdx.x * TR16, r0 = blockIdx.y * TR16;
    for (int v = threadIdx.x; v < TR16 * TR16 / 8; v += blockDim.x) {
        int r = v / (TR16 / 8), c = (v % (TR16 / 8)) * 8;
        if (r0 + r < rows && c0 + c < ldi)
            *reinterpret_cast<uint4 *>(&tile[r][c]) = *reinterpret_cast<const uint4 *>(src + (size_t)(r0 + r) * ldi + c0 + c);
    }
    __syncthreads();
    for (int v = threadIdx.x; v < TR16 * TR16 / 16; v += blockDim.x) {
        int c = (v % (TR16 / 2)) * 2, r = (v / (TR16 / 2)) * 8;
        if (c0 + c >= cols || r0 + r >= ldo) continue;
        uint32_t w[8]; /* columns c, c + 1 of rows r.. (the pads past `rows` zeros) */
#pragma unroll
        for (int e = 0; e < 8; e++) w[e] = r0 + r + e < rows ? *reinterpret_cast<const uint32_t *>(&tile[r + e][c]) : 0u;
        uint4 lo = {__byte_perm(w[0], w[1], 0x5410), __byte_perm(w[2], w[3], 0x5410), __byte_perm(w[4], w[5], 0x5410),
                    __byte_perm(w[6], w[7], 0x5410)};
        *reinterpret_cast<uint4 *>(dst + (size_t)(c0 + c) * ldo + r0 + r) = lo;
        if (c0 + c + 1 < cols) {
            uint4 hi = {__byte_perm(w[0], w[1], 0x7632), __byte_perm(w[2], w[3], 0x7632),
                        __byte_perm(w[4], w[5], 0x7632), __byte_perm(w[6], w[7], 0x7632)};
            *reinterpret_cast<uint4 *>(dst + (size_t)(c0 + c + 1) * ldo + r0 + r) = hi;
        }
    }
}

void k_transpose(cudaStream_t st, int dt, void *out, int ldo, const void *in, int ldi, int batch, int rows, int cols) {
    if (batch <= 0 || rows <= 0 || cols <= 0) return;
    if (dt == TRM_BF16 && ldi % 8 == 0 && ldo % 8 == 0 && aligned16(out) && aligned16(in)) {
        dim3 grid((cols + TR16 - 1) / TR16, (ldo + TR16 - 1) / TR16, batch);
        transpose16_kernel<<<grid, 256, 0, st>>>((bf16 *)out, ldo, (const bf16 *)in, ldi, rows, cols);
        return;
    }
    dim3 grid((cols + 31) / 32, (ldo + 31) / 32, batch), block(32, 8);
    ACT_DISPATCH(dt, transpose_kernel<T><<<grid, block, 0, st>>>((T *)out, ldo, (const T *)in, ldi, rows, cols));
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

/* fp32 → bf16 (round to nearest even) of a contiguous run: a dense fp32 GEMM operand in a bf16
 * product. */
__global__ void to_bf16_kernel(bf16 *dst, const float *src, size_t n) {
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
        to_bf16_kernel<<<grid_for(n, 256), 256, 0, st>>>((bf16 *)dst, src, n);
}

template <typename D, typename S>
__global__ void convert_kernel(D *dst, int ldd, const S *src, int lds, int rows, int cols) {
    size_t n = (size_t)rows * cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / cols, c = i % cols;
        dst[r * ldd + c] = from_f<D>(to_f(src[r * lds + c]));
    }
}
void k_convert(cudaStream_t st, void *dst, int dt_dst, int ld_dst, const void *src, int dt_src, int ld_src, int rows,
               int cols) {
    size_t n = (size_t)rows * cols;
    if (!n) return;
    if (dt_dst == TRM_BF16 && dt_src == TRM_F32 && (rows == 1 || (ld_dst == cols && ld_src == cols))) {
        k_to_bf16(st, dst, (const float *)src, n); /* contiguous: the 16-byte kernel */
        return;
    }
    unsigned g = grid_for(n, 256);
    if (dt_dst == TRM_BF16 && dt_src == TRM_F32)
        convert_kernel<<<g, 256, 0, st>>>((bf16 *)dst, ld_dst, (const float *)src, ld_src, rows, cols);
    else if (dt_dst == TRM_F32 && dt_src == TRM_BF16)
        convert_kernel<<<g, 256, 0, st>>>((float *)dst, ld_dst, (const bf16 *)src, ld_src, rows, cols);
    else if (dt_dst == TRM_BF16)
        convert_kernel<<<g, 256, 0, st>>>((bf16 *)dst, ld_dst, (const bf16 *)src, ld_src, rows, cols);
    else
        convert_kernel<<<g, 256, 0, st>>>((float *)dst, ld_dst, (const float *)src, ld_src, rows, cols);
}
