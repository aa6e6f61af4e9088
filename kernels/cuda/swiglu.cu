/* swiglu.cu — SwiGLU on the [gate | up] GEMM output (rows × 2I → rows × I) and its backward,
 * in PyTorch's formulas (silu(g)·u; dg = d·u·σ·(1 + g(1 − σ)), du = d·silu(g)), on activations
 * of either type with fp32 arithmetic; 16 bytes of each operand per thread where I allows. */
#include "mma.cuh"

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

/* ---- gate/up product and SwiGLU in one kernel, for short products (K ≤ 128: mlp_t's token
 * mixer, K = Tp) --------------------------------------------------------------------------
 * act (rows × I) = silu(x·W_gᵀ)·(x·W_uᵀ) with W = [W_g; W_u] (2I × K), bf16 activations and
 * weights, fp32 sums on tensor cores (mma.sync m16n8k16). The (rows × 2I) product never
 * reaches memory unless the backward needs it (keep_gu). A block owns 128 rows and 64 output
 * columns: the x rows and the 64 gate plus 64 up weight rows it needs fit in shared memory
 * whole, so there is no loop over K tiles; 8 warps of 32 rows × 32 columns. The gate and up
 * sums are rounded to bf16 before the SwiGLU, as the unfused path (and the reference) stores
 * them. */
#define GU_BM 128
#define GU_BN 64
#define GU_KMAX 128
#define GU_LD (GU_KMAX + 8) /* padded rows: conflict-free ldmatrix */

__global__ void __launch_bounds__(256) gate_up_swiglu_kernel(bf16 *act, bf16 *gu, const bf16 *x, int ldx,
                                                             const bf16 *w, int ldw, int rows, int I, int K) {
    extern __shared__ __align__(16) bf16 smem[];
    bf16 *sX = smem, *sW = smem + GU_BM * GU_LD; /* sW: 64 gate rows then 64 up rows */
    int n0 = blockIdx.x * GU_BN, r0 = blockIdx.y * GU_BM, k16 = (K + 15) / 16 * 16;
    int nb = min(GU_BN, I - n0);
    cp_async_rows(sX, GU_LD, x, ldx, r0, GU_BM, rows, k16 / 8, K);
    cp_async_rows(sW, GU_LD, w + (size_t)n0 * ldw, ldw, 0, GU_BN, nb, k16 / 8, K);
    cp_async_rows(sW + GU_BN * GU_LD, GU_LD, w + (size_t)(I + n0) * ldw, ldw, 0, GU_BN, nb, k16 / 8, K);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    int warp = threadIdx.x >> 5, l = threadIdx.x & 31, mq = l >> 3;
    int wm = (warp & 3) * 32, wn = (warp >> 2) * 32; /* the warp's rows and columns in the tile */
    float ag[2][4][4], au[2][4][4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) ag[mt][j][e] = au[mt][j][e] = 0.f;
    for (int kk = 0; kk < k16 / 16; kk++) {
        uint32_t a[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
            ldsm4(a[mt], sX + (wm + mt * 16 + (l & 7) + (mq & 1) * 8) * GU_LD + kk * 16 + (mq >> 1) * 8);
#pragma unroll
        for (int half = 0; half < 2; half++) { /* gate rows, then up rows */
            const bf16 *wt = sW + half * GU_BN * GU_LD;
#pragma unroll
            for (int j = 0; j < 4; j += 2) {
                uint32_t b[4];
                ldsm4(b, wt + (wn + (j + (mq >> 1)) * 8 + (l & 7)) * GU_LD + kk * 16 + (mq & 1) * 8);
#pragma unroll
                for (int mt = 0; mt < 2; mt++) {
                    float(*acc)[4] = half ? au[mt] : ag[mt];
                    mma16816(acc[j], a[mt], b[0], b[1]);
                    mma16816(acc[j + 1], a[mt], b[2], b[3]);
                }
            }
        }
    }
    /* the tiles go through shared memory (the operands are no longer needed there) so that
     * every row leaves as 16-byte stores */
    __syncthreads();
    const int LT = GU_BN + 8;
    bf16 *sA = smem, *sG = smem + GU_BM * LT, *sU = smem + 2 * GU_BM * LT;
    int g = l >> 2, t = l & 3;
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) { /* rows g and g + 8 of the 16-row tile */
                int r = wm + mt * 16 + g + hr * 8, c = wn + j * 8 + 2 * t;
                __nv_bfloat162 gv = __floats2bfloat162_rn(ag[mt][j][2 * hr], ag[mt][j][2 * hr + 1]);
                __nv_bfloat162 uv = __floats2bfloat162_rn(au[mt][j][2 * hr], au[mt][j][2 * hr + 1]);
                float2 gf = __bfloat1622float2(gv), uf = __bfloat1622float2(uv);
                *reinterpret_cast<__nv_bfloat162 *>(sA + r * LT + c) =
                    __floats2bfloat162_rn(silu_f(gf.x) * uf.x, silu_f(gf.y) * uf.y);
                *reinterpret_cast<__nv_bfloat162 *>(sG + r * LT + c) = gv;
                *reinterpret_cast<__nv_bfloat162 *>(sU + r * LT + c) = uv;
            }
    __syncthreads();
    for (int v = threadIdx.x; v < GU_BM * GU_BN / 8; v += blockDim.x) {
        int r = v / (GU_BN / 8), c = (v % (GU_BN / 8)) * 8;
        if (r0 + r >= rows || n0 + c >= I) continue;
        size_t row = (size_t)(r0 + r);
        *reinterpret_cast<uint4 *>(act + row * I + n0 + c) = *reinterpret_cast<const uint4 *>(sA + r * LT + c);
        if (gu) {
            *reinterpret_cast<uint4 *>(gu + row * 2 * I + n0 + c) = *reinterpret_cast<const uint4 *>(sG + r * LT + c);
            *reinterpret_cast<uint4 *>(gu + row * 2 * I + I + n0 + c) = *reinterpret_cast<const uint4 *>(sU + r * LT + c);
        }
    }
}

int k_gate_up_swiglu(cudaStream_t st, void *act, void *gu, const void *x, int ldx, const void *w, int ldw, int rows,
                     int I, int K) {
    if (K > GU_KMAX || K % 8 || ldx % 8 || ldw % 8 || I % 8 || !aligned16(x) || !aligned16(w) || !aligned16(act) ||
        (gu && !aligned16(gu)) || rows <= 0 || I <= 0)
        return 0;
    size_t smem = (size_t)(GU_BM + 2 * GU_BN) * GU_LD * sizeof(bf16); /* 68 KiB: past the default 48 */
    if (cudaFuncSetAttribute(gate_up_swiglu_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    dim3 grid((unsigned)((I + GU_BN - 1) / GU_BN), (unsigned)((rows + GU_BM - 1) / GU_BM));
    gate_up_swiglu_kernel<<<grid, 256, smem, st>>>((bf16 *)act, (bf16 *)gu, (const bf16 *)x, ldx, (const bf16 *)w,
                                                   ldw, rows, I, K);
    return 1;
}
