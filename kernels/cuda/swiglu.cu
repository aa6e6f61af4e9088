/* swiglu.cu — SwiGLU on the [gate | up] GEMM output (rows × 2I → rows × I) and its backward,
 * in PyTorch's formulas (silu(g)·u; dg = d·u·σ·(1 + g(1 − σ)), du = d·silu(g)), on activations
 * of either type with fp32 arithmetic; 16 bytes of each operand per thread where I allows. */
#include "mma.cuh" /* with CUtensorMap where a Hopper pass builds */

__device__ __forceinline__ float silu_f(float g) { return g / (1.f + __expf(-g)); }

template <typename T> __global__ void swiglu_fwd_kernel(T *out, const T *gu, int rows, int I) {
    size_t n = (size_t)rows * I;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / I, c = i % I;
        float g = to_f(gu[r * 2 * I + c]), u = to_f(gu[r * 2 * I + I + c]);
        out[i] = from_f<T>(silu_f(g) * u);
    }
}
/* The 16-byte kernels walk rows by blockIdx.y and a row's vectors by x: no division per vector
 * (a flat index's 64-bit i / I is dozens of instructions a vector, in passes meant to be bound
 * by memory: swiglu_bwd took 377 µs a sudoku_att call with it, 352 without, H200). */
template <typename T> __global__ void swiglu_fwd16_kernel(T *out, const T *gu, int rows, int I) {
    const int N = vn<T>::N;
    int Iv = I / N;
    for (int r = blockIdx.y; r < rows; r += gridDim.y)
        for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < Iv; v += gridDim.x * blockDim.x) {
            size_t o = (size_t)r * 2 * I + (size_t)v * N;
            float g[N], u[N];
            ld16(g, gu + o);
            ld16(u, gu + o + I);
#pragma unroll
            for (int e = 0; e < N; e++) g[e] = silu_f(g[e]) * u[e];
            st16(out + (size_t)r * I + (size_t)v * N, g);
        }
}
/* blocks of the 16-byte kernels over rows × Iv vectors: the block size (32–128) that leaves the
 * fewest threads idle at a row's end; each block row takes every 16384th row (a few rows a
 * block: not a launch per row) */
static void row_grid(int rows, int Iv, dim3 *grid, int *threads) {
    int best = 128;
    for (int b = 128; b >= 32; b /= 2)
        if ((Iv + b - 1) / b * b - Iv < (Iv + best - 1) / best * best - Iv) best = b;
    *threads = best;
    *grid = dim3((unsigned)((Iv + best - 1) / best), (unsigned)(rows < 16384 ? rows : 16384));
}
void k_swiglu_fwd(cudaStream_t st, int dt, void *out, const void *gu, int rows, int I) {
    size_t n = (size_t)rows * I;
    if (!n) return;
    ACT_DISPATCH(dt, {
        const int N = vn<T>::N;
        if (I % N == 0 && aligned16(out) && aligned16(gu)) {
            dim3 grid;
            int threads;
            row_grid(rows, I / N, &grid, &threads);
            swiglu_fwd16_kernel<T><<<grid, threads, 0, st>>>((T *)out, (const T *)gu, rows, I);
        } else
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
template <typename T>
__global__ void swiglu_bwd16_kernel(T *dgu, T *out, const T *dout, const T *gu, int rows, int I) {
    const int N = vn<T>::N;
    int Iv = I / N;
    for (int r = blockIdx.y; r < rows; r += gridDim.y)
        for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < Iv; v += gridDim.x * blockDim.x) {
            size_t o = (size_t)r * 2 * I + (size_t)v * N, oa = (size_t)r * I + (size_t)v * N;
            float d[N], g[N], u[N];
            ld16(d, dout + oa);
            ld16(g, gu + o);
            ld16(u, gu + o + I);
            if (out) {
                float a[N];
#pragma unroll
                for (int e = 0; e < N; e++) a[e] = silu_f(g[e]) * u[e];
                st16(out + oa, a);
            }
#pragma unroll
            for (int e = 0; e < N; e++) swiglu_grad(d[e], g[e], u[e], &g[e], &u[e]);
            st16(dgu + o, g);
            st16(dgu + o + I, u);
        }
}
void k_swiglu_bwd(cudaStream_t st, int dt, void *dgu, void *out, const void *dout, const void *gu, int rows, int I) {
    size_t n = (size_t)rows * I;
    if (!n) return;
    ACT_DISPATCH(dt, {
        const int N = vn<T>::N;
        if (I % N == 0 && aligned16(dgu) && aligned16(dout) && aligned16(gu) && (!out || aligned16(out))) {
            dim3 grid;
            int threads;
            row_grid(rows, I / N, &grid, &threads);
            swiglu_bwd16_kernel<T><<<grid, threads, 0, st>>>((T *)dgu, (T *)out, (const T *)dout, (const T *)gu,
                                                            rows, I);
        } else
            swiglu_bwd_kernel<T><<<grid_for(n, 256), 256, 0, st>>>((T *)dgu, (T *)out, (const T *)dout, (const T *)gu,
                                                                   rows, I);
    });
}

/* ---- gate/up product and SwiGLU in one kernel, for short products (K ≤ 128: mlp_t's token
 * mixer, K = Tp) where Hopper's kernel below does not run -----------------------------------
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

/* ---- the same on Hopper for every K ≤ 512 (the channel MLP, K = hidden; the token mixer) ------
 * A block keeps the weight rows of its 64 output columns (64 gate + 64 up rows × K, 128 KiB at
 * K = 512) in shared memory for its whole life and streams x past them: each of its 4
 * warpgroups runs its own 64-row tiles (m64n128k16 wgmma, both operands from shared memory,
 * the gate sums in columns 0–63 and the up sums in 64–127 of one accumulator, so a thread holds
 * both halves of each SwiGLU pair) through its own 3-stage ring of 64 × 64 x chunks, which TMA
 * copies two chunks ahead, across tile boundaries. The warpgroups are independent (a named
 * barrier each), so one's epilogue overlaps the others' products. The epilogue stages each
 * 64 × 64 output through the stage its last chunk used and writes whole 128-byte rows. Only x
 * moves per product: 1/128 byte a FLOP, read from L2 by the 24 blocks of a row range at about
 * the same time. Maze call (175872 rows, I = 1536, H100, real clocks): 1.03 ms, 1.15 writing gu
 * too, against cuBLASLt's 0.82 + SwiGLU's 0.53. Tried: cp.async copies by every thread instead
 * of TMA (load-bound: ~1.5 ms), the fragments stored straight from registers (4-byte pieces of
 * 32-byte sectors: 0.96 ms, but 2.35 writing gu). It also beats the short kernel above on
 * mlp_t's token mixer (K = 104: sudoku_mlp 142 → 129 ms a step), whose blocks load, multiply
 * and store one tile each without overlapping the three. */
#define GW_WG 4
#define GW_NS 3
#define GW_KMAX 512
#define GW_CHUNK (64 * 64) /* bf16 of a 64-row × 64-column swizzled chunk */
/* the weights' 2 chunks per 64 of K, each warpgroup's ring and its barriers (one a stage, one for
 * the backward's dact tile), the alignment slack */
#define GW_SMEM(K) \
    ((size_t)((K) + 63) / 64 * 2 * GW_CHUNK * 2 + (size_t)GW_WG * GW_NS * (GW_CHUNK * 2 + 8) + GW_WG * 8 + 1024)
/* the backward with a dact tile buffer per warpgroup, for K up to GW_DKMAX */
#define GW_DKMAX 384
#define GW_SMEM_D(K) (GW_SMEM(K) + (size_t)GW_WG * GW_CHUNK * 2)

#if defined(TRM_WGMMA)
/* chunk n of a warpgroup's x stream (KC chunks a tile; its tiles first, first + stride, ...) */
__device__ __forceinline__ void gw_load(bf16 *stage, const CUtensorMap *tm, uint64_t *bar, int n, int KC, int first,
                                        int stride) {
    tma_load_2d(stage, tm, n % KC * 64, (first + n / KC * stride) * 64, bar, GW_CHUNK * 2);
}

/* One 64 × 64 bf16 tile of the epilogue, v[j][hr] holding the thread's two columns 8j + 2t of
 * row g + 8hr of the warp's 16: into the free x stage in the 128-byte swizzle (the 8 rows of a
 * store in 8 different 16-byte columns: no bank conflicts), then whole 128-byte rows to global
 * memory. */
__device__ __forceinline__ void gw_tile_out(bf16 *stage, bf16 *dst, size_t ld, int row0, int rows, int wg,
                                            const uint32_t (&v)[8][2]) {
    int l = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, tid = threadIdx.x & 127;
    unsigned char *st = (unsigned char *)stage;
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        int r = warp * 16 + (l >> 2) + hr * 8;
#pragma unroll
        for (int j = 0; j < 8; j++) *reinterpret_cast<uint32_t *>(st + r * 128 + ((j ^ (r & 7)) << 4) + 4 * (l & 3)) = v[j][hr];
    }
    wg_bar(wg);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int r = i * 16 + (tid >> 3), ch = tid & 7;
        if (row0 + r < rows)
            *reinterpret_cast<uint4 *>(dst + (size_t)(row0 + r) * ld + ch * 8) =
                *reinterpret_cast<const uint4 *>(st + r * 128 + ((ch ^ (r & 7)) << 4));
    }
    fence_async_smem(); /* these stores before the TMA copy that refills the stage */
    wg_bar(wg);
}

/* act (and gu) of one 64-row tile from its sums rounded to bf16 (gate and up as the unfused
 * path stores them), through the stage the tile's last chunk used (the warpgroup's other two
 * hold the next chunks) */
__device__ __forceinline__ void gw_store(bf16 *stage, bf16 *act, bf16 *gu, uint32_t (&gate)[8][2],
                                         uint32_t (&up)[8][2], int row0, int rows, int n0, int I, int wg) {
    uint32_t v[8][2];
    wg_bar(wg); /* every warp's products out of the stage */
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            float2 g = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&gate[j][hr]));
            float2 u = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&up[j][hr]));
            v[j][hr] = pack_bf16(silu_fast(g.x) * u.x, silu_fast(g.y) * u.y);
        }
    gw_tile_out(stage, act + n0, I, row0, rows, wg, v);
    if (!gu) return;
    gw_tile_out(stage, gu + n0, 2 * (size_t)I, row0, rows, wg, gate);
    gw_tile_out(stage, gu + I + n0, 2 * (size_t)I, row0, rows, wg, up);
}

/* The backward's epilogue: the tile's dact (64 × 64 of rows × I) arrives by TMA, in dbuf (copied
 * when the tile began) or else now into the stage; each thread reads the values of its own
 * fragment positions, and the SwiGLU backward on the bf16-rounded gate and up (the values the
 * forward would have kept) gives act (with silu_f, as swiglu_bwd recomputes it), dgate and dup,
 * which leave through the stage like the forward's. */
__device__ __forceinline__ void gw_store_bwd(bf16 *stage, const bf16 *dbuf, const CUtensorMap *tmd, uint64_t *dbar,
                                             int *dphase, bf16 *act, bf16 *dgu, const uint32_t (&gate)[8][2],
                                             const uint32_t (&up)[8][2], int row0, int rows, int n0, int I, int wg) {
    int l = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    wg_bar(wg); /* every warp's products out of the stage */
    if (!dbuf && (threadIdx.x & 127) == 0) tma_load_2d(stage, tmd, n0, row0, dbar, GW_CHUNK * 2);
    mbar_wait(dbar, *dphase);
    *dphase ^= 1;
    const unsigned char *st = (const unsigned char *)(dbuf ? dbuf : stage);
    uint32_t a[8][2], dg[8][2], du[8][2];
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        int r = warp * 16 + (l >> 2) + hr * 8;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            uint32_t dv = *reinterpret_cast<const uint32_t *>(st + r * 128 + ((j ^ (r & 7)) << 4) + 4 * (l & 3));
            float2 d = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&dv));
            float2 g = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&gate[j][hr]));
            float2 u = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&up[j][hr]));
            float g0, u0, g1, u1;
            a[j][hr] = pack_bf16(silu_f(g.x) * u.x, silu_f(g.y) * u.y);
            swiglu_grad(d.x, g.x, u.x, &g0, &u0);
            swiglu_grad(d.y, g.y, u.y, &g1, &u1);
            dg[j][hr] = pack_bf16(g0, g1);
            du[j][hr] = pack_bf16(u0, u1);
        }
    }
    wg_bar(wg); /* every warp's dact read before the stage takes the outputs */
    gw_tile_out(stage, act + n0, I, row0, rows, wg, a);
    gw_tile_out(stage, dgu + n0, 2 * (size_t)I, row0, rows, wg, dg);
    gw_tile_out(stage, dgu + I + n0, 2 * (size_t)I, row0, rows, wg, du);
}

#endif

#if defined(TRM_CUDA_SM90A)
/* blockIdx.x = slice + (I/64)·part: the block's 64 columns, and its share of the 64-row tiles
 * (tile part·4 + warpgroup, then every 4·parts-th). Thread 0 of a warpgroup starts its TMA
 * copies; a chunk's stage is refilled once every warp of the warpgroup is past its products.
 * BWD: the SwiGLU backward's epilogue (gu receives dgu; tmd maps dact), its dact tile copied
 * into the stage at the epilogue (1) or, where shared memory has room (K ≤ GW_DKMAX), into a
 * buffer of the warpgroup's own when the tile begins, so that the copy overlaps its products
 * (2); else (0) the forward's epilogue (tmd unused). */
template <int BWD>
__global__ void __launch_bounds__(128 * GW_WG, 1)
    gate_up_wg_kernel(const __grid_constant__ CUtensorMap tmx, const __grid_constant__ CUtensorMap tmd, bf16 *act,
                      bf16 *gu, const bf16 *w, int ldw, int rows, int I, int K, int parts) {
#if defined(TRM_WGMMA)
    extern __shared__ unsigned char gw_raw[];
    bf16 *sW = (bf16 *)smem_align1024(gw_raw); /* swizzle atoms are 1 KiB */
    int KC = (K + 63) / 64, slices = I / 64, wg = threadIdx.x >> 7, tid = threadIdx.x & 127;
    int n0 = (blockIdx.x % slices) * 64, part = blockIdx.x / slices;
    bf16 *sX = sW + KC * 2 * GW_CHUNK + wg * GW_NS * GW_CHUNK;
    bf16 *sD = sW + KC * 2 * GW_CHUNK + GW_WG * GW_NS * GW_CHUNK; /* BWD == 2: the dact tiles */
    uint64_t *bars = (uint64_t *)(sD + (BWD == 2 ? GW_WG * GW_CHUNK : 0));
    uint64_t *full = bars + wg * GW_NS, *dbar = bars + GW_WG * GW_NS + wg;
    bf16 *dbuf = BWD == 2 ? sD + wg * GW_CHUNK : NULL;
    for (int kc = 0; kc < KC; kc++) { /* gate rows, then up rows, of each 64-column chunk */
        cp_async_swz(sW + kc * 2 * GW_CHUNK, w + (size_t)n0 * ldw, ldw, 0, 64, 64, kc * 64, K, threadIdx.x, blockDim.x);
        cp_async_swz(sW + kc * 2 * GW_CHUNK + GW_CHUNK, w + (size_t)(I + n0) * ldw, ldw, 0, 64, 64, kc * 64, K,
                     threadIdx.x, blockDim.x);
    }
    cp_async_commit();
    if (tid < GW_NS) mbar_init(full + tid, 1);
    if (BWD && tid == GW_NS) mbar_init(dbar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    int mtiles = (rows + 63) / 64, stride = parts * GW_WG, first = part * GW_WG + wg;
    int total = first < mtiles ? ((mtiles - 1 - first) / stride + 1) * KC : 0; /* chunks of this warpgroup */
    cp_async_wait<0>();
    fence_async_smem();
    __syncthreads(); /* the weights and the barriers */
    if (tid == 0)
        for (int c = 0; c < 2 && c < total; c++)
            gw_load(sX + c * GW_CHUNK, &tmx, full + c, c, KC, first, stride);
    float d[16][4];
    int c = 0, slot = 0, phase = 0, dphase = 0;
    /* A tile's chunk kc has its products issued before chunk kc − 1's are waited for, so that a
     * warpgroup's products queue on the tensor cores back to back (waiting for each chunk's
     * before issuing the next left them idle but for the other warpgroups' turns). The k loop
     * touches d through the products alone: anything else there (the epilogue, the zeroing, in
     * the one flat loop over chunks this was) makes ptxas wait out or serialise the products. */
    for (int tile = first; c < total; tile += stride) {
        if (BWD == 2 && tid == 0) /* the previous tile's epilogue is past reading dbuf */
            tma_load_2d(dbuf, &tmd, n0, tile * 64, dbar, GW_CHUNK * 2);
        int slot_last = slot;
        for (int kc = 0; kc < KC; kc++, c++) {
            mbar_wait(full + slot, phase);
            uint64_t da = wg_desc(sX + slot * GW_CHUNK, 16, 1024), db = wg_desc(sW + kc * 2 * GW_CHUNK, 16, 1024);
            wg_fence();
#pragma unroll
            for (int k = 0; k < 4; k++) wg_m64n128k16_ss(d, da + 2 * k, db + 2 * k, kc | k);
            wg_commit();
            wg_wait<1>();
            wg_bar(wg); /* every warp done with chunk c - 1, whose stage takes chunk c + 2 */
            if (tid == 0 && c + 2 < total) {
                int ns = (slot + 2) % GW_NS;
                gw_load(sX + ns * GW_CHUNK, &tmx, full + ns, c + 2, KC, first, stride);
            }
            slot_last = slot;
            if (++slot == GW_NS) slot = 0, phase ^= 1;
        }
        wg_wait<0>();
        wg_fence_f(d);
        uint32_t gate[8][2], up[8][2];
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                gate[j][hr] = pack_bf16(d[j][2 * hr], d[j][2 * hr + 1]);
                up[j][hr] = pack_bf16(d[j + 8][2 * hr], d[j + 8][2 * hr + 1]);
            }
#pragma unroll
        for (int j = 0; j < 16; j++) /* the old sums die here (the next tile's first product ignores d) */
#pragma unroll
            for (int e = 0; e < 4; e++) d[j][e] = 0.f;
        if (BWD)
            gw_store_bwd(sX + slot_last * GW_CHUNK, dbuf, &tmd, dbar, &dphase, act, gu, gate, up, tile * 64, rows, n0,
                         I, wg);
        else
            gw_store(sX + slot_last * GW_CHUNK, act, gu, gate, up, tile * 64, rows, n0, I, wg);
    }
#endif
}
#endif

/* cuTensorMapEncodeTiled from the driver where this build and device run gate_up_wg_kernel
 * (the runtime hands out driver entry points, so nothing links against libcuda), else NULL */
void *k_gate_up_wgmma(void) {
#if defined(TRM_CUDA_SM90A)
    void *fn = NULL;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    /* the shared memory limit once, for the largest K: every launch fits under it */
    if (!device_sm90() || !smem_limit(gate_up_wg_kernel<0>, GW_SMEM(GW_KMAX)) ||
        !smem_limit(gate_up_wg_kernel<1>, GW_SMEM(GW_KMAX)) || !smem_limit(gate_up_wg_kernel<2>, GW_SMEM_D(GW_DKMAX)))
        goto none;
#if CUDART_VERSION >= 12050
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess)
        goto none;
#else
    if (cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &found) != cudaSuccess) goto none;
#endif
    if (found == cudaDriverEntryPointSuccess && fn) return fn;
none:
    cudaGetLastError();
#endif
    return NULL;
}

#if defined(TRM_CUDA_SM90A)
/* parts a column slice is split into: as many blocks as fill whole waves of one block an SM
 * (e.g. 24 slices on 132 SMs: 11 parts, two full waves), at most one part per 4 row tiles */
static int gw_parts(int slices, int mtiles) {
    int sms = device_sms(1);
    int maxp = (mtiles + GW_WG - 1) / GW_WG, best = 1;
    double best_eff = 0;
    for (int waves = 1; waves <= 4; waves++) {
        int p = (waves * sms + slices - 1) / slices;
        if (p > maxp) p = maxp;
        long blocks = (long)p * slices, rounds = (blocks + sms - 1) / sms;
        double eff = (double)blocks / (double)(rounds * sms);
        if (eff > best_eff + 1e-9) best_eff = eff, best = p;
        if (p == maxp) break;
    }
    return best;
}

/* gate_up_wg_kernel<BWD> over rows × I (I a multiple of 64), with the shared memory BWD needs */
template <int BWD>
static void gw_launch(cudaStream_t st, const CUtensorMap &tmx, const CUtensorMap &tmd, void *act, void *gu,
                      const void *w, int ldw, int rows, int I, int K) {
    int slices = I / 64, parts = gw_parts(slices, (rows + 63) / 64);
    gate_up_wg_kernel<BWD><<<slices * parts, 128 * GW_WG, BWD == 2 ? GW_SMEM_D(K) : GW_SMEM(K), st>>>(
        tmx, tmd, (bf16 *)act, (bf16 *)gu, (const bf16 *)w, ldw, rows, I, K, parts);
}
#endif

/* what both fused passes need of their operands: 16-byte rows and pointers, a non-empty shape */
static bool gu_operands_ok(const void *x, int ldx, const void *w, int ldw, const void *act, int rows, int I, int K) {
    return K % 8 == 0 && ldx % 8 == 0 && ldw % 8 == 0 && I % 8 == 0 && aligned16(x) && aligned16(w) && aligned16(act) &&
           rows > 0 && I > 0 && K > 0;
}

int k_gate_up_swiglu(cudaStream_t st, void *tma_encode, void *act, void *gu, const void *x, int ldx, const void *w,
                     int ldw, int rows, int I, int K) {
    if (!gu_operands_ok(x, ldx, w, ldw, act, rows, I, K) || (gu && !aligned16(gu))) return 0;
#if defined(TRM_CUDA_SM90A)
    CUtensorMap tmx;
    if (tma_encode && K <= GW_KMAX && I % 64 == 0 && tma_map_2d(&tmx, tma_encode, x, rows, K, ldx, 64)) {
        gw_launch<0>(st, tmx, tmx, act, gu, w, ldw, rows, I, K);
        return 1;
    }
#else
    (void)tma_encode;
#endif
    if (K > GU_KMAX) return 0;
    size_t smem = (size_t)(GU_BM + 2 * GU_BN) * GU_LD * sizeof(bf16); /* 68 KiB: past the default 48 */
    if (!smem_limit(gate_up_swiglu_kernel, smem)) {
        cudaGetLastError();
        return 0;
    }
    dim3 grid((unsigned)((I + GU_BN - 1) / GU_BN), (unsigned)((rows + GU_BM - 1) / GU_BM));
    gate_up_swiglu_kernel<<<grid, 256, smem, st>>>((bf16 *)act, (bf16 *)gu, (const bf16 *)x, ldx, (const bf16 *)w,
                                                   ldw, rows, I, K);
    return 1;
}

/* The SwiGLU backward with the gate/up product computed again (recompute=gate_up): dgu (rows ×
 * 2I) and act from dact (rows × I) and the forward's x and W, on Hopper only (K ≤ 512, I a
 * multiple of 64); 0 where it does not take the shape (nothing launched) */
int k_gate_up_swiglu_bwd(cudaStream_t st, void *tma_encode, void *dgu, void *act, const void *dact, const void *x,
                         int ldx, const void *w, int ldw, int rows, int I, int K) {
#if defined(TRM_CUDA_SM90A)
    if (!gu_operands_ok(x, ldx, w, ldw, act, rows, I, K) || !aligned16(dgu) || !aligned16(dact) || !tma_encode ||
        K > GW_KMAX || I % 64)
        return 0;
    CUtensorMap tmx, tmd;
    if (!tma_map_2d(&tmx, tma_encode, x, rows, K, ldx, 64) || !tma_map_2d(&tmd, tma_encode, dact, rows, I, I, 64))
        return 0;
    if (K <= GW_DKMAX) /* mlp_t's K = 104: 0.81 ms a sudoku_mlp call, 0.94 with dact copied at the epilogue */
        gw_launch<2>(st, tmx, tmd, act, dgu, w, ldw, rows, I, K);
    else
        gw_launch<1>(st, tmx, tmd, act, dgu, w, ldw, rows, I, K);
    return 1;
#else
    (void)st, (void)tma_encode, (void)dgu, (void)act, (void)dact, (void)x, (void)ldx, (void)w, (void)ldw, (void)rows,
        (void)I, (void)K;
    return 0;
#endif
}
