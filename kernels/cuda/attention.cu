/* attention.cu — non-causal attention. bf16 runs with head dim 64 take the fused kernels at the
 * end of this file (flash-attention style, tensor cores, no T×T scores in memory): on Hopper
 * (an sm_90a build on a 9.0 device) the wgmma kernels, elsewhere the mma.sync ones
 * (TRM_FLASH_WGMMA=0 picks mma.sync on Hopper too, to compare). The Hopper backward runs in
 * one pass, dQ summed by reductions in memory where a head's keys span several blocks (the
 * sums' order varies from run to run, as in PyTorch's flash backward) and written by the one
 * block where they fit it (T ≤ 192); with RoPE's tables it rotates dq and dk back on their way
 * out. TRM_DETERMINISTIC=1 and the mma.sync kernels take two passes without atomics, the same
 * bits every run. Otherwise the backend runs batched GEMMs around the row passes of
 * attention_rows.cu. */

#include "mma.cuh"

/* ---- fused attention for bf16 runs (head dim 64) -------------------------------------------
 * Flash-attention style: a block holds a tile of queries (forward, dQ) or keys (dK, dV) and
 * walks the other side in tiles of 64 rows, so no T×T scores ever reach memory. Products run
 * on tensor cores (mma.sync m16n8k16 on the bf16 activations q, k, v and dO, fp32
 * accumulation), as the reference's bf16 attention does; softmax statistics and lse are fp32,
 * the outputs (O, dQ, dK, dV) bf16 activations. Tiles arrive in shared memory by cp.async, the
 * next one while the current one is used, and reach registers by ldmatrix (transposed where a product needs the
 * other orientation, so one copy of each tile serves both). Each warp owns two 16-row tiles,
 * so that every fragment read from shared memory feeds two products; the scores it computes
 * are already in the register layout of the next product's A operand. dQ has its own pass over
 * the keys (recomputing the scores) rather than atomics, so results are the same on every run.
 * Measured on an H100 (bench/README.md): the kernels are latency-bound at 8 warps an SM, the
 * tensor pipe busy 40–47% of the time. */
#define FA_T 64   /* rows of a streamed tile */
#define FA_D 64   /* head dim */
#define FA_LD 72  /* bf16 per padded tile row: 144-byte rows make ldmatrix conflict-free */
#define FA_TILE (FA_T * FA_LD)
#define LOG2E 1.4426950408889634f

/* rows [r0, r0 + nrows) of a bf16 (T, ld) matrix into a padded tile; rows past T zero-filled */
__device__ __forceinline__ void fa_fetch(bf16 *tile, const bf16 *src, size_t ld, int r0, int nrows, int T) {
    cp_async_rows(tile, FA_LD, src, ld, r0, nrows, T, FA_D / 8, FA_D);
}

/* The double-buffered stream of the mma.sync kernels: two (T, ld) matrices (K and V, or Q and
 * dO) walked in FA_T-row tiles, tile it in stage it & 1 of the two-stage buffers sA and sB. */

/* starts the copies of the tiles at row r0 of A and B into a and b (one cp.async group) */
__device__ __forceinline__ void fa_fetch2(bf16 *a, bf16 *b, const bf16 *A, size_t lda, const bf16 *B, size_t ldb,
                                          int r0, int T) {
    fa_fetch(a, A, lda, r0, FA_T, T);
    fa_fetch(b, B, ldb, r0, FA_T, T);
    cp_async_commit();
}
/* waits until tile it of n has landed (tile it + 1 may still be in flight) and the block sees it */
__device__ __forceinline__ void fa_wait_tile(int it, int n) {
    if (it + 1 < n)
        cp_async_wait<1>();
    else
        cp_async_wait<0>();
    __syncthreads();
}
/* At the top of iteration it: starts tile it + 1 into the other stage, then waits for tile it.
 * The caller fetched tile 0 into stage 0 before its loop and ends each iteration with
 * __syncthreads: the stage it read is the one the next iteration refills. */
__device__ __forceinline__ void fa_stream_next(bf16 (*sA)[FA_TILE], bf16 (*sB)[FA_TILE], const bf16 *A, size_t lda,
                                               const bf16 *B, size_t ldb, int it, int n, int T) {
    int sn = (it & 1) ^ 1;
    if (it + 1 < n) fa_fetch2(sA[sn], sB[sn], A, lda, B, ldb, it * FA_T + FA_T, T);
    fa_wait_tile(it, n);
}

/* A fragments of rows row0..row0+15 of a tile, all 64 columns (4 k-steps). */
__device__ __forceinline__ void fa_afrag(uint32_t a[4][4], const bf16 *tile, int row0) {
    int l = threadIdx.x & 31, m = l >> 3;
    for (int kk = 0; kk < 4; kk++) ldsm4(a[kk], tile + (row0 + (l & 7) + (m & 1) * 8) * FA_LD + kk * 16 + (m >> 1) * 8);
}

__device__ __forceinline__ void fa_zero(float acc[8][4]) {
#pragma unroll
    for (int j = 0; j < 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
}

/* 16 rows × 64 of C fragments into a (T, ld) bf16 matrix, row r scaled by s0 (r < 8) or s1;
 * rows past T dropped. */
__device__ __forceinline__ void fa_store(bf16 *dst, size_t ld, int row0, int T, float acc[8][4], float s0, float s1) {
    int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    for (int j = 0; j < 8; j++) {
        if (row0 + g < T)
            *reinterpret_cast<uint32_t *>(dst + (size_t)(row0 + g) * ld + j * 8 + 2 * t) = pack_bf16(acc[j][0] * s0, acc[j][1] * s0);
        if (row0 + g + 8 < T)
            *reinterpret_cast<uint32_t *>(dst + (size_t)(row0 + g + 8) * ld + j * 8 + 2 * t) = pack_bf16(acc[j][2] * s1, acc[j][3] * s1);
    }
}

/* What a backward block of (sample b, head h) reads: q, k, v rows of the bf16 (B, T, 3H, 64)
 * qkv (ld apart), dO rows of the (B, T, H, 64) output gradient (ldo apart), and the (B, H, T)
 * lse and rowsum(dO∘O). */
struct fb_rows {
    size_t ld, ldo;
    const bf16 *Q, *K, *V, *dO;
    const float *L, *D;
};
__device__ __forceinline__ fb_rows fb_head(const bf16 *q16, const bf16 *o16, const float *lse, const float *dr, int T,
                                           int H, int b, int h) {
    size_t ld = (size_t)3 * H * FA_D, ldo = (size_t)H * FA_D;
    const bf16 *Q = q16 + (size_t)b * T * ld + h * FA_D;
    return {ld, ldo, Q, Q + H * FA_D, Q + 2 * H * FA_D, o16 + (size_t)b * T * ldo + h * FA_D,
            lse + ((size_t)b * H + h) * T, dr + ((size_t)b * H + h) * T};
}

/* The forward gives each warp two 16-row query tiles: every K or V fragment read from shared
 * memory feeds two products instead of one, which is what bounded the one-tile version (its
 * ldmatrix traffic, not the tensor cores). 4 warps: 128 queries a block. */
#define FA_FWD_WARPS 4
#define FA_MT 2

__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* acc[mt] (16 × 64) += A[mt](16 × 64) · tileᵀ for both tiles of the warp */
__device__ __forceinline__ void fa_mma_nt2(float acc[FA_MT][8][4], const uint32_t a[FA_MT][4][4], const bf16 *tile) {
    int l = threadIdx.x & 31, m = l >> 3;
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int j = 0; j < 8; j += 2) {
            uint32_t b[4];
            ldsm4(b, tile + ((j + (m >> 1)) * 8 + (l & 7)) * FA_LD + kk * 16 + (m & 1) * 8);
#pragma unroll
            for (int mt = 0; mt < FA_MT; mt++) {
                mma16816(acc[mt][j], a[mt][kk], b[0], b[1]);
                mma16816(acc[mt][j + 1], a[mt][kk], b[2], b[3]);
            }
        }
}

/* acc[mt] (16 × 64) += P[mt] · tile (tile rows = k index, read transposed) */
__device__ __forceinline__ void fa_mma_pn2(float acc[FA_MT][8][4], float p[FA_MT][8][4], const bf16 *tile) {
    int l = threadIdx.x & 31, m = l >> 3;
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        uint32_t a[FA_MT][4];
#pragma unroll
        for (int mt = 0; mt < FA_MT; mt++) {
            a[mt][0] = pack_bf16(p[mt][2 * kk][0], p[mt][2 * kk][1]);
            a[mt][1] = pack_bf16(p[mt][2 * kk][2], p[mt][2 * kk][3]);
            a[mt][2] = pack_bf16(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1]);
            a[mt][3] = pack_bf16(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int j = 0; j < 8; j += 2) {
            uint32_t b[4];
            ldsm4t(b, tile + (kk * 16 + (m & 1) * 8 + (l & 7)) * FA_LD + (j + (m >> 1)) * 8);
#pragma unroll
            for (int mt = 0; mt < FA_MT; mt++) {
                mma16816(acc[mt][j], a[mt], b[0], b[1]);
                mma16816(acc[mt][j + 1], a[mt], b[2], b[3]);
            }
        }
    }
}

/* out, lse of 128 queries over every key tile. q16: bf16 (B, T, 3H, 64). */
__global__ void __launch_bounds__(32 * FA_FWD_WARPS) flash_fwd_kernel(bf16 *out, float *lse, const bf16 *q16, int T, int H, float sl2) {
    __shared__ __align__(16) bf16 sK[2][FA_TILE], sV[2][FA_TILE];
    const int rows = FA_FWD_WARPS * 16 * FA_MT;
    int h = blockIdx.y, b = blockIdx.z, w = threadIdx.x >> 5, q0 = blockIdx.x * rows;
    int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    bool live = q0 + w * 16 * FA_MT < T; /* the last block's warps past T skip the arithmetic */
    size_t ld = (size_t)3 * H * FA_D;
    const bf16 *Q = q16 + (size_t)b * T * ld + h * FA_D, *K = Q + H * FA_D, *V = Q + 2 * H * FA_D;
    bf16 *sQ = &sK[0][0]; /* 128 rows over both K stages, before the stream starts */
    fa_fetch(sQ, Q, ld, q0, rows, T);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    uint32_t qa[FA_MT][4][4];
#pragma unroll
    for (int mt = 0; mt < FA_MT; mt++) fa_afrag(qa[mt], sQ, w * 16 * FA_MT + mt * 16);
    __syncthreads();
    float o[FA_MT][8][4], m[FA_MT][2], l[FA_MT][2];
#pragma unroll
    for (int mt = 0; mt < FA_MT; mt++) {
        fa_zero(o[mt]);
        m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;
    }
    int n = (T + FA_T - 1) / FA_T;
    fa_fetch2(sK[0], sV[0], K, ld, V, ld, 0, T);
    for (int it = 0; it < n; it++) {
        int st = it & 1, k0 = it * FA_T;
        fa_stream_next(sK, sV, K, ld, V, ld, it, n, T);
        if (!live) { /* all its rows past T: it only helps load the tiles */
            __syncthreads();
            continue;
        }
        float s[FA_MT][8][4];
#pragma unroll
        for (int mt = 0; mt < FA_MT; mt++) fa_zero(s[mt]);
        fa_mma_nt2(s, qa, sK[st]);
        /* scores stay unscaled (max taken on them, the scale folded into each exponent's FMA);
         * only the last, ragged tile masks keys past T */
        if (k0 + FA_T > T)
#pragma unroll
            for (int mt = 0; mt < FA_MT; mt++)
#pragma unroll
                for (int j = 0; j < 8; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        if (k0 + j * 8 + 2 * t + (e & 1) >= T) s[mt][j][e] = -INFINITY;
        /* reductions as trees and sums split four ways: short dependency chains, which is what
         * two warps per scheduler need (the kernel is latency-bound, not pipe-bound) */
#pragma unroll
        for (int mt = 0; mt < FA_MT; mt++) {
            float v0[8], v1[8];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                v0[j] = fmaxf(s[mt][j][0], s[mt][j][1]);
                v1[j] = fmaxf(s[mt][j][2], s[mt][j][3]);
            }
#pragma unroll
            for (int w2 = 4; w2 > 0; w2 >>= 1)
#pragma unroll
                for (int j = 0; j < w2; j++) v0[j] = fmaxf(v0[j], v0[j + w2]), v1[j] = fmaxf(v1[j], v1[j + w2]);
            float mx0 = fmaxf(m[mt][0], v0[0]), mx1 = fmaxf(m[mt][1], v1[0]);
            for (int x = 1; x < 4; x <<= 1) {
                mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, x));
                mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, x));
            }
            /* m = -inf before the first tile: the factor is 0 */
            float c0 = ex2((m[mt][0] - mx0) * sl2), c1 = ex2((m[mt][1] - mx1) * sl2);
            m[mt][0] = mx0, m[mt][1] = mx1;
            float b0 = -mx0 * sl2, b1 = -mx1 * sl2;
            float a0[4] = {0.f, 0.f, 0.f, 0.f}, a1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int j = 0; j < 8; j++) {
                s[mt][j][0] = ex2(fmaf(s[mt][j][0], sl2, b0)), s[mt][j][1] = ex2(fmaf(s[mt][j][1], sl2, b0));
                s[mt][j][2] = ex2(fmaf(s[mt][j][2], sl2, b1)), s[mt][j][3] = ex2(fmaf(s[mt][j][3], sl2, b1));
                a0[j & 3] += s[mt][j][0] + s[mt][j][1], a1[j & 3] += s[mt][j][2] + s[mt][j][3];
                o[mt][j][0] *= c0, o[mt][j][1] *= c0, o[mt][j][2] *= c1, o[mt][j][3] *= c1;
            }
            l[mt][0] = l[mt][0] * c0 + ((a0[0] + a0[1]) + (a0[2] + a0[3]));
            l[mt][1] = l[mt][1] * c1 + ((a1[0] + a1[1]) + (a1[2] + a1[3]));
        }
        fa_mma_pn2(o, s, sV[st]);
        __syncthreads(); /* this stage is refilled next iteration */
    }
#pragma unroll
    for (int mt = 0; mt < FA_MT; mt++) {
        float l0 = l[mt][0], l1 = l[mt][1];
        for (int x = 1; x < 4; x <<= 1) {
            l0 += __shfl_xor_sync(0xffffffffu, l0, x);
            l1 += __shfl_xor_sync(0xffffffffu, l1, x);
        }
        int r0 = q0 + w * 16 * FA_MT + mt * 16;
        if (r0 >= T) continue;
        fa_store(out + (size_t)b * T * H * FA_D + h * FA_D, (size_t)H * FA_D, r0, T, o[mt], 1.f / l0, 1.f / l1);
        if (t == 0) {
            float *L = lse + ((size_t)b * H + h) * T;
            if (r0 + g < T) L[r0 + g] = (m[mt][0] * sl2 + log2f(l0)) / LOG2E;
            if (r0 + g + 8 < T) L[r0 + g + 8] = (m[mt][1] * sl2 + log2f(l1)) / LOG2E;
        }
    }
}

/* ---- forward on Hopper (sm_90a): wgmma -------------------------------------------------
 * Each warpgroup owns 64 queries (FW_WG of them a block share the streamed K/V tiles). The
 * products are asynchronous: a tile's S = Q·Kᵀ and the previous tile's O += P·V are issued
 * together, and the softmax of S runs while P·V is still on the tensor cores (FlashAttention-3's
 * intra-warpgroup overlap), which mma.sync with two warps a scheduler could not do. K and V
 * tiles sit in shared memory in the 128-byte-swizzled layout the descriptors name (V read
 * N-major, so one copy of each tile serves); FW_NS stages, each fetched two tiles ahead.
 * Measured in one maze_att step (H100, Nsight Compute): forward 1.47 ms against the mma.sync
 * kernel's 1.88, dQ pass 1.90 against 2.28, dK/dV pass 2.47 against 3.18. */
#define FW_NS 4
/* warpgroups a block in the forward and the dQ pass (the dK/dV pass picks 2 or 3 by T); with
 * 64-row tiles everywhere, maze_att ms/step for fwd, dQ, dK/dV blocks of 1/2/3 warpgroups:
 * 2,2,2 229.8; 3,2,2 229.7; 1,2,2 235.8; 2,1,2 231.2; 2,2,1 232.5; 1,1,1 240.1 */
#define FW_WG 2
#define FW_TILE (FA_T * FA_D) /* bf16 of one swizzled 64 × 64 tile: 8 KiB */
#define FW_SMEM(WG) ((FW_NS * 2 * FW_TILE + (WG) * 64 * FA_LD) * 2 + 1024)

#include "flash_rope.cuh" /* RoPE inside the flash kernels: the forward's rotation, dK's store */

/* rows [r0, r0 + nrows) of a bf16 (T, ld) matrix into a swizzled tile; rows past T zero-filled */
__device__ __forceinline__ void fw_fetch(bf16 *tile, const bf16 *src, size_t ld, int r0, int T, int nrows = FA_T) {
    cp_async_swz(tile, src, ld, r0, nrows, T, 0, FA_D, threadIdx.x, blockDim.x);
}

/* fp32 C fragments (16 rows × 8J) as the bf16 A fragments of the next product (J/2 k-steps) */
template <int J> __device__ __forceinline__ void c_to_a(const float (&c)[J][4], uint32_t (&a)[J / 2][4]) {
#pragma unroll
    for (int j = 0; j < J; j++) {
        a[j >> 1][(j & 1) * 2] = pack_bf16(c[j][0], c[j][1]);
        a[j >> 1][(j & 1) * 2 + 1] = pack_bf16(c[j][2], c[j][3]);
    }
}

/* One tile's online softmax for a warp's 16 rows (two per thread, m/l each): masks keys past T,
 * returns the rescale factors of the running sums and the probabilities in place of the scores
 * (packed to bf16 A fragments by the caller once no product reads the old ones). */
__device__ __forceinline__ void fw_softmax(float s[8][4], float ml[4], float c[2], int k0, int T,
                                           float sl2) {
    int t = threadIdx.x & 3;
    if (k0 + FA_T > T)
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (k0 + j * 8 + 2 * t + (e & 1) >= T) s[j][e] = -INFINITY;
    float v0[8], v1[8];
#pragma unroll
    for (int j = 0; j < 8; j++) v0[j] = fmaxf(s[j][0], s[j][1]), v1[j] = fmaxf(s[j][2], s[j][3]);
#pragma unroll
    for (int w2 = 4; w2 > 0; w2 >>= 1)
#pragma unroll
        for (int j = 0; j < w2; j++) v0[j] = fmaxf(v0[j], v0[j + w2]), v1[j] = fmaxf(v1[j], v1[j + w2]);
    float mx0 = fmaxf(ml[0], v0[0]), mx1 = fmaxf(ml[1], v1[0]);
    for (int x = 1; x < 4; x <<= 1) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, x));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, x));
    }
    c[0] = ex2((ml[0] - mx0) * sl2), c[1] = ex2((ml[1] - mx1) * sl2); /* 0 before the first tile */
    ml[0] = mx0, ml[1] = mx1;
    float b0 = -mx0 * sl2, b1 = -mx1 * sl2;
    float a0[4] = {0.f, 0.f, 0.f, 0.f}, a1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int j = 0; j < 8; j++) {
        s[j][0] = ex2(fmaf(s[j][0], sl2, b0)), s[j][1] = ex2(fmaf(s[j][1], sl2, b0));
        s[j][2] = ex2(fmaf(s[j][2], sl2, b1)), s[j][3] = ex2(fmaf(s[j][3], sl2, b1));
        a0[j & 3] += s[j][0] + s[j][1], a1[j & 3] += s[j][2] + s[j][3];
    }
    ml[2] = ml[2] * c[0] + ((a0[0] + a0[1]) + (a0[2] + a0[3]));
    ml[3] = ml[3] * c[1] + ((a1[0] + a1[1]) + (a1[2] + a1[3]));
}

#if defined(TRM_WGMMA)
/* Tile it of the stream has landed (it + 1 may still be in flight) and is visible to the tensor
 * cores; every warpgroup is done with tile it - 2, whose stage the caller refills next. */
__device__ __forceinline__ void stage_ready() {
    cp_async_wait<1>();
    fence_async_smem();
    __syncthreads();
}
/* Waits for K/V tile it (R rows each, a stage holding K then V), then starts tile it + 2. */
template <int R>
__device__ __forceinline__ void kv_next(bf16 *sKV, const bf16 *K, const bf16 *V, size_t ld, int it, int n, int T) {
    stage_ready();
    if (it + 2 < n) {
        bf16 *st = sKV + ((it + 2) % FW_NS) * 2 * R * FA_D;
        fw_fetch(st, K, ld, (it + 2) * R, T, R);
        fw_fetch(st + R * FA_D, V, ld, (it + 2) * R, T, R);
    }
    cp_async_commit();
}

/* The descriptors of a tile's KS k-steps: read K-major (+32 bytes along d a step) or N-major
 * (+16 rows = 2 KiB a step). */
template <int KS> __device__ __forceinline__ void fw_descs(uint64_t (&d)[KS], const bf16 *tile, int nmajor) {
    uint64_t d0 = nmajor ? wg_desc(tile, 8192, 1024) : wg_desc(tile, 16, 1024);
#pragma unroll
    for (int k = 0; k < KS; k++) d[k] = d0 + (uint64_t)(nmajor ? 128 * k : 2 * k);
}
/* d (64 × 64) = (ACC ? d : 0) + A·B over KS k-steps, A from registers, issued (the caller
 * commits and waits) */
template <int TB, int ACC, int KS>
__device__ __forceinline__ void fw_mma(float d[8][4], const uint32_t (&a)[KS][4], const uint64_t (&desc)[KS]) {
    wg_m64n64k16<TB, ACC>(d, a[0], desc[0]);
#pragma unroll
    for (int k = 1; k < KS; k++) wg_m64n64k16<TB, 1>(d, a[k], desc[k]);
}
/* A warpgroup's first key tile (K at kt): S = Q·Kᵀ, waited for, its softmax, P packed */
__device__ __forceinline__ void fw_first(float (&s)[8][4], float (&ml)[4], float (&c)[2], uint32_t (&p)[4][4],
                                         uint32_t (&qa)[4][4], const bf16 *kt, int T, float sl2) {
    uint64_t dk[4];
    fw_descs(dk, kt, 0);
    wg_fence_u(qa);
    wg_fence();
    fw_mma<0, 0, 4>(s, qa, dk);
    wg_commit();
    wg_wait<0>();
    wg_fence_f(s);
    wg_fence_u(qa);
    fw_softmax(s, ml, c, 0, T, sl2);
    c_to_a(s, p);
}
/* The next key tile (K at kt, its first key k0) with the previous tile's P·V (V at vt): the
 * scores issued with that product, whose accumulation runs on while their softmax is computed;
 * o rescaled, P packed */
__device__ __forceinline__ void fw_next(float (&o)[8][4], float (&s)[8][4], float (&ml)[4], float (&c)[2],
                                        uint32_t (&p)[4][4], uint32_t (&qa)[4][4], const bf16 *kt, const bf16 *vt,
                                        int k0, int T, float sl2) {
    uint64_t dk[4], dv[4];
    fw_descs(dk, kt, 0);
    fw_descs(dv, vt, 1);
    wg_fence_f(o);
    wg_fence_u(p);
    wg_fence();
    fw_mma<0, 0, 4>(s, qa, dk);
    wg_commit();
    fw_mma<1, 1, 4>(o, p, dv);
    wg_commit();
    wg_wait<1>(); /* S; the previous tile's P·V runs on while its softmax is computed */
    wg_fence_f(s);
    fw_softmax(s, ml, c, k0, T, sl2);
    wg_wait<0>();
    wg_fence_f(o);
    wg_fence_u(p);
    /* once the running maxima settle, most tiles leave them unchanged: skip the rescale
     * (exactly 1) when no row of the warp moved */
    if (!__all_sync(0xffffffffu, c[0] == 1.f && c[1] == 1.f))
#pragma unroll
        for (int j = 0; j < 8; j++) o[j][0] *= c[0], o[j][1] *= c[0], o[j][2] *= c[1], o[j][3] *= c[1];
    c_to_a(s, p);
}
/* the last tile's P·V (V at vt), waited for */
__device__ __forceinline__ void fw_last(float (&o)[8][4], uint32_t (&p)[4][4], const bf16 *vt) {
    uint64_t dv[4];
    fw_descs(dv, vt, 1);
    wg_fence_f(o);
    wg_fence_u(p);
    wg_fence();
    fw_mma<1, 1, 4>(o, p, dv);
    wg_commit();
    wg_wait<0>();
    wg_fence_f(o);
    wg_fence_u(p);
}
/* a forward warp's row sums across the quad: l0 of row r0 + g, l1 of row r0 + g + 8 */
__device__ __forceinline__ void fw_rowsums(const float (&ml)[4], float &l0, float &l1) {
    l0 = ml[2], l1 = ml[3];
    for (int x = 1; x < 4; x <<= 1) {
        l0 += __shfl_xor_sync(0xffffffffu, l0, x);
        l1 += __shfl_xor_sync(0xffffffffu, l1, x);
    }
}
/* those rows' log-sum-exp into lse (B, H, T), rows past T dropped */
__device__ __forceinline__ void fw_lse(float *lse, const float (&ml)[4], float l0, float l1, int b, int h, int T,
                                       int H, int r0, int g, int t, float sl2) {
    if (t == 0) {
        float *L = lse + ((size_t)b * H + h) * T;
        if (r0 + g < T) L[r0 + g] = (ml[0] * sl2 + log2f(l0)) / LOG2E;
        if (r0 + g + 8 < T) L[r0 + g + 8] = (ml[1] * sl2 + log2f(l1)) / LOG2E;
    }
}
/* The end of a forward warp's 16 rows from r0: the row sums across the quad, o scaled by them
 * out, and each row's log-sum-exp */
__device__ __forceinline__ void fw_finish(bf16 *out, float *lse, float (&o)[8][4], const float (&ml)[4], int b, int h,
                                          int T, int H, int r0, int g, int t, float sl2) {
    float l0, l1;
    fw_rowsums(ml, l0, l1);
    if (r0 >= T) return;
    fa_store(out + (size_t)b * T * H * FA_D + h * FA_D, (size_t)H * FA_D, r0, T, o, 1.f / l0, 1.f / l1);
    fw_lse(lse, ml, l0, l1, b, h, T, H, r0, g, t, sl2);
}
#endif

/* A warpgroup wholly past T (the last of a block where 1 <= T mod 64·WG <= 64: T = 916) only
 * copies and meets the barriers; one partly past T computes on the zero rows too (a branch
 * around the products would make the compiler serialise every wgmma). */
template <int WG, int ROPE = 0>
__global__ void __launch_bounds__(128 * WG) flash_fwd_wg_kernel(bf16 *out, float *lse, const bf16 *q16, int T, int H,
                                                                   float sl2, const float *cs = nullptr,
                                                                   const float *sn = nullptr) {
#if defined(TRM_WGMMA)
    extern __shared__ unsigned char fw_raw[];
    bf16 *sKV = (bf16 *)smem_align1024(fw_raw); /* swizzle atoms are 1 KiB aligned */
    bf16 *sQ = sKV + FW_NS * 2 * FW_TILE;
    int h = blockIdx.y, b = blockIdx.z, wg = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3;
    int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    int q0 = blockIdx.x * 64 * WG, qw = q0 + wg * 64;
    size_t ld = (size_t)3 * H * FA_D;
    /* written only with ROPE = 2, where this block is the one reader of the head's q and k */
    bf16 *Q = const_cast<bf16 *>(q16) + (size_t)b * T * ld + h * FA_D, *K = Q + H * FA_D, *V = Q + 2 * H * FA_D;
    int n = (T + FA_T - 1) / FA_T;
    fa_fetch(sQ, Q, ld, q0, 64 * WG, T);
    fw_fetch(sKV, K, ld, 0, T);
    fw_fetch(sKV + FW_TILE, V, ld, 0, T);
    cp_async_commit();
    if (n > 1) fw_fetch(sKV + 2 * FW_TILE, K, ld, FA_T, T), fw_fetch(sKV + 3 * FW_TILE, V, ld, FA_T, T);
    cp_async_commit();
    float o[8][4], s[8][4], ml[4] = {-INFINITY, -INFINITY, 0.f, 0.f}, c[2];
    uint32_t qa[4][4], p[4][4];
    fa_zero(o);
    if (qw >= T) {
        for (int it = 0; it < n; it++) {
            kv_next<FA_T>(sKV, K, V, ld, it, n, T);
            if (ROPE && it == 0) fw_rope_stage<WG, ROPE>(sQ, sKV, Q, K, ld, T, cs, sn);
        }
        return;
    }
    kv_next<FA_T>(sKV, K, V, ld, 0, n, T);
    if (ROPE) fw_rope_stage<WG, ROPE>(sQ, sKV, Q, K, ld, T, cs, sn); /* every key tile: none after */
    fa_afrag(qa, sQ, wg * 64 + w * 16);
    fw_first(s, ml, c, p, qa, sKV, T, sl2);
    for (int it = 1; it < n; it++) {
        kv_next<FA_T>(sKV, K, V, ld, it, n, T);
        fw_next(o, s, ml, c, p, qa, sKV + (it % FW_NS) * 2 * FW_TILE, sKV + ((it - 1) % FW_NS) * 2 * FW_TILE + FW_TILE,
                it * FA_T, T, sl2);
    }
    fw_last(o, p, sKV + ((n - 1) % FW_NS) * 2 * FW_TILE + FW_TILE);
    fw_finish(out, lse, o, ml, b, h, T, H, qw + w * 16, g, t, sl2);
#else
    __trap();
#endif
}

#include "flash_short.cuh" /* the short RoPE forward by TMA (T ≤ 128), with its tensor maps */
#include "flash_long.cuh"  /* the forward by TMA for T > 128 */

/* ---- backward on Hopper (sm_90a): by default one pass (the dK/dV kernel with DQ = 1, below);
 * TRM_DETERMINISTIC=1 keeps the two passes without atomics, on wgmma ----------------------
 * dQ: each warpgroup owns 64 queries (Q and dO rows read by descriptor from shared memory) and
 * streams 32-key tiles of K and V: S = Q·Kᵀ and dP = dO·Vᵀ of a tile are issued with the
 * previous tile's dQ += dS·K, whose product runs while this tile's dS is computed. K is read
 * K-major for S and N-major for dQ, one copy serving both. Small tiles and operands in shared
 * memory keep a thread at 98 registers (186 with 64-key tiles and Q, dO in registers: 2.05 ms a
 * maze call against 1.90). */
#define FQ_T 32
#define FQ_TILE (FQ_T * FA_D)
#define FQ_SMEM(WG) ((FW_NS * 2 * FQ_TILE + 2 * (WG) * FW_TILE) * 2 + 1024)

#if defined(TRM_WGMMA)
/* dS = P∘(dP − D) of one tile (fp32, in place of dP); P from the scores and the row's lse·log2e.
 * The bf16 A fragments are packed only after the wait that ends the product reading the old
 * ones: writing fragment registers while a wgmma is in flight made the compiler serialise the
 * products (C7513; measured: the dK/dV pass 4.5 ms against 2.8). */
__device__ __forceinline__ void fq_ds(const float s[4][4], float dp[4][4], const float L[2], const float D[2], int k0,
                                      int T, float sl2) {
    int t = threadIdx.x & 3;
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float pe = ex2(fmaf(s[j][e], sl2, -L[e >> 1]));
            dp[j][e] = (k0 + j * 8 + 2 * t + (e & 1) < T ? pe : 0.f) * (dp[j][e] - D[e >> 1]);
        }
}
/* (64 rows × 32) = A·Bᵀ over the four k-steps of d, A and B by descriptor (K-major), issued */
__device__ __forceinline__ void fk_nt(float d[4][4], const uint64_t da[4], const uint64_t db[4]) {
    wg_m64n32k16_ss<0>(d, da[0], db[0]);
    wg_m64n32k16_ss<1>(d, da[1], db[1]);
    wg_m64n32k16_ss<1>(d, da[2], db[2]);
    wg_m64n32k16_ss<1>(d, da[3], db[3]);
}
/* a tile's scores and dO·Vᵀ products of both backward passes (S, dP in the dQ pass; Sᵀ, dPᵀ in
 * the dK/dV pass), issued as one group */
__device__ __forceinline__ void fk_sdp(float (&s)[4][4], const uint64_t sa[4], const uint64_t sb[4],
                                       float (&dp)[4][4], const uint64_t pa[4], const uint64_t pb[4]) {
    fk_nt(s, sa, sb);
    fk_nt(dp, pa, pb);
    wg_commit();
}
/* the first tile's pair, waited for: nothing else is in flight yet */
__device__ __forceinline__ void fk_sdp_first(float (&s)[4][4], const uint64_t sa[4], const uint64_t sb[4],
                                             float (&dp)[4][4], const uint64_t pa[4], const uint64_t pb[4]) {
    wg_fence();
    fk_sdp(s, sa, sb, dp, pa, pb);
    wg_wait<0>();
    wg_fence_f(s), wg_fence_f(dp);
}
#endif

template <int WG>
__global__ void __launch_bounds__(128 * WG) flash_bwd_q_wg_kernel(bf16 *dqkv, const bf16 *q16, const bf16 *o16,
                                                                  const float *lse, const float *dr, int T, int H,
                                                                  float sl2, float scale) {
#if defined(TRM_WGMMA)
    extern __shared__ unsigned char fw_raw[];
    bf16 *sKV = (bf16 *)smem_align1024(fw_raw);
    bf16 *sQ = sKV + FW_NS * 2 * FQ_TILE, *sO = sQ + WG * FW_TILE; /* swizzled, 64 rows a warpgroup */
    int h = blockIdx.y, b = blockIdx.z, wg = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3;
    int g = (threadIdx.x & 31) >> 2;
    int q0 = blockIdx.x * 64 * WG, r0 = q0 + wg * 64 + w * 16;
    auto [ld, ldo, Q, K, V, dO, Lr, Dr] = fb_head(q16, o16, lse, dr, T, H, b, h);
    int n = (T + FQ_T - 1) / FQ_T;
    fw_fetch(sQ, Q, ld, q0, T, 64 * WG);
    fw_fetch(sO, dO, ldo, q0, T, 64 * WG);
    fw_fetch(sKV, K, ld, 0, T, FQ_T);
    fw_fetch(sKV + FQ_TILE, V, ld, 0, T, FQ_T);
    cp_async_commit();
    if (n > 1) fw_fetch(sKV + 2 * FQ_TILE, K, ld, FQ_T, T, FQ_T), fw_fetch(sKV + 3 * FQ_TILE, V, ld, FQ_T, T, FQ_T);
    cp_async_commit();
    float L[2], D[2];
    L[0] = r0 + g < T ? Lr[r0 + g] * LOG2E : INFINITY, L[1] = r0 + g + 8 < T ? Lr[r0 + g + 8] * LOG2E : INFINITY;
    D[0] = r0 + g < T ? Dr[r0 + g] : 0.f, D[1] = r0 + g + 8 < T ? Dr[r0 + g + 8] : 0.f;
    float s[4][4], dp[4][4], dq[8][4];
    uint32_t ds[2][4];
    uint64_t qd[4], od[4], dk[4], dv[4], dkn[2];
    fa_zero(dq);
    fw_descs(qd, sQ + wg * FW_TILE, 0);
    fw_descs(od, sO + wg * FW_TILE, 0);
    kv_next<FQ_T>(sKV, K, V, ld, 0, n, T);
    fw_descs(dk, sKV, 0);
    fw_descs(dv, sKV + FQ_TILE, 0);
    fk_sdp_first(s, qd, dk, dp, od, dv);
    fq_ds(s, dp, L, D, 0, T, sl2);
    c_to_a(dp, ds);
    for (int it = 1; it < n; it++) {
        kv_next<FQ_T>(sKV, K, V, ld, it, n, T);
        bf16 *st = sKV + (it % FW_NS) * 2 * FQ_TILE, *sp = sKV + ((it - 1) % FW_NS) * 2 * FQ_TILE;
        fw_descs(dk, st, 0);
        fw_descs(dv, st + FQ_TILE, 0);
        fw_descs(dkn, sp, 1);
        wg_fence_f(dq), wg_fence_u(ds);
        wg_fence();
        fk_sdp(s, qd, dk, dp, od, dv);
        fw_mma<1, 1, 2>(dq, ds, dkn);
        wg_commit();
        wg_wait<1>(); /* S and dP; the previous tile's dQ product runs on */
        wg_fence_f(s), wg_fence_f(dp);
        fq_ds(s, dp, L, D, it * FQ_T, T, sl2); /* in fp32: registers no product in flight reads */
        wg_wait<0>();
        wg_fence_f(dq), wg_fence_u(ds);
        c_to_a(dp, ds);
    }
    fw_descs(dkn, sKV + ((n - 1) % FW_NS) * 2 * FQ_TILE, 1);
    wg_fence_f(dq), wg_fence_u(ds);
    wg_fence();
    fw_mma<1, 1, 2>(dq, ds, dkn);
    wg_commit();
    wg_wait<0>();
    wg_fence_f(dq), wg_fence_u(ds);
    if (r0 < T) fa_store(dqkv + (size_t)b * T * ld + h * FA_D, ld, r0, T, dq, scale, scale);
#else
    __trap();
#endif
}

/* dK, dV: each warpgroup owns 64 keys and streams 32-query tiles of Q and dO with their lse and
 * rowsum: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ of a tile are issued with the previous tile's dV += Pᵀ·dO
 * and dK += dSᵀ·Q (Q and dO read K-major, then N-major). K and V are read from shared memory
 * as well (A by descriptor) and the tiles are 32 queries, so that a thread holds few enough
 * registers (138; 166 with DQ = 1) for three warpgroups a block (192 keys: 960 rows for a 916-long maze where
 * 128-key blocks pad to 1024; measured 2.76 → 2.47 ms a call against the 64-query-tile version
 * with K and V in registers, 250 registers, two warpgroups). lse and rowsum arrive by cp.async
 * too, zero past T: those queries' Q and dO rows are zero, so their Pᵀ = 1 meets zero rows in
 * both products.
 * DQ = 1 makes it the whole backward in one pass (dQ by reduction into an fp32 accumulator, so
 * the sums' order varies from run to run): each warpgroup stores its tile's dSᵀ (bf16, by
 * stmatrix) and multiplies dQᵀ (64 × 32) = Kᵀ·dSᵀ over its 64 keys with the next tile's dV/dK
 * products; the warpgroups' fp32 parts meet in shared memory and the sum of the tile before
 * goes out as vector reductions while the next products run. DQ = 2, where the block holds
 * every key of the head, writes that sum as the tile's dQ instead (fk_dq_write). rcs, rsn: RoPE's
 * tables (NULL: none), with which dK and dQ leave rotated by the transpose. */
#define FK_T 32
#define FK_TILE (FK_T * FA_D)
/* queries of the one-pass dQᵀ accumulator's rows: T rounded up to whole tiles */
__host__ __device__ __forceinline__ int fk_tp(int T) { return (T + FK_T - 1) / FK_T * FK_T; }
#define FK_SLD 40 /* floats a row of a staged dQᵀ part: rows 160 bytes apart keep the stores conflict-free */
#define FK_STG (FA_D * FK_SLD)
/* DQ: 0, 1 or 2 (the dQ buffers are the same for 1 and 2) */
#define FK_SMEM(WG, DQ)                                                                                             \
    ((FW_NS * 2 * FK_TILE + 2 * (WG) * FW_TILE + !!(DQ) * (WG) * FK_TILE) * 2 + FW_NS * 2 * FK_T * 4 +              \
     !!(DQ) * 2 * (WG) * FK_STG * 4 + 1024)

#if defined(TRM_WGMMA)
__device__ __forceinline__ void fk_fetch(bf16 *sQO, float *sLD, const bf16 *Q, const bf16 *dO, const float *Lr,
                                         const float *Dr, size_t ld, size_t ldo, int it, int T) {
    int sn = it % FW_NS, q1 = it * FK_T;
    fw_fetch(sQO + sn * 2 * FK_TILE, Q, ld, q1, T, FK_T);
    fw_fetch(sQO + sn * 2 * FK_TILE + FK_TILE, dO, ldo, q1, T, FK_T);
    for (int i = threadIdx.x; i < 2 * FK_T; i += blockDim.x) {
        int q = q1 + (i & (FK_T - 1)), ok = q < T;
        const float *g = (i < FK_T ? Lr : Dr) + (ok ? q : 0);
        uint32_t d = (uint32_t)__cvta_generic_to_shared(sLD + sn * 2 * FK_T + i);
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(g), "r"(ok ? 4 : 0));
    }
}
__device__ __forceinline__ void fk_next(bf16 *sQO, float *sLD, const bf16 *Q, const bf16 *dO, const float *Lr,
                                        const float *Dr, size_t ld, size_t ldo, int it, int n, int T) {
    stage_ready();
    if (it + 2 < n) fk_fetch(sQO, sLD, Q, dO, Lr, Dr, ld, ldo, it + 2, T);
    cp_async_commit();
}
/* Pᵀ and dSᵀ = Pᵀ∘(dPᵀ − D) of one tile (8·J queries) in fp32, in place (rows = keys, columns
 * = queries; J = 4 here, 16 in the short backward) */
template <int J>
__device__ __forceinline__ void fk_pds(float (&st)[J][4], float (&dpt)[J][4], const float *sL, const float *sD,
                                       float sl2) {
    int t = threadIdx.x & 3;
#pragma unroll
    for (int j = 0; j < J; j++) {
        /* the thread's two queries' lse and rowsum: one 8-byte load each */
        float2 l = *reinterpret_cast<const float2 *>(sL + j * 8 + 2 * t);
        float2 r = *reinterpret_cast<const float2 *>(sD + j * 8 + 2 * t);
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float lq = e & 1 ? l.y : l.x, dq = e & 1 ? r.y : r.x;
            st[j][e] = ex2(fmaf(st[j][e], sl2, -lq * LOG2E));
            dpt[j][e] = st[j][e] * (dpt[j][e] - dq);
        }
    }
}
/* dQᵀ (64 × 32) = Kᵀ·dSᵀ over a warpgroup's 64 keys: Kᵀ read M-major from the K tile, dSᵀ as the
 * K-major (32 queries × 64 keys) tile fk_ds_store wrote; issued */
__device__ __forceinline__ void fk_tn(float d[4][4], const uint64_t ka[4], const uint64_t db[4]) {
    wg_m64n32k16_ss<0, 1>(d, ka[0], db[0]);
    wg_m64n32k16_ss<1, 1>(d, ka[1], db[1]);
    wg_m64n32k16_ss<1, 1>(d, ka[2], db[2]);
    wg_m64n32k16_ss<1, 1>(d, ka[3], db[3]);
}
/* A warp's dSᵀ fragments (its 16 keys × 16·KK queries, the packed A operand of dK) into the
 * swizzled (16·KK queries × 64 keys) tile, transposed by stmatrix: 8 keys of a query per 16
 * bytes (KK = 2 here, 8 in the short backward) */
template <int KK> __device__ __forceinline__ void fk_ds_store(bf16 *tile, const uint32_t (&da)[KK][4]) {
    int l = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3, i = l >> 3;
    uint32_t base = (uint32_t)__cvta_generic_to_shared(tile);
#pragma unroll
    for (int kk = 0; kk < KK; kk++) {
        int q = kk * 16 + (i >> 1) * 8 + (l & 7), c = 2 * w + (i & 1);
        stsm4t(base + q * 128 + ((c ^ (q & 7)) << 4), da[kk]);
    }
}
#include "flash_dq.cuh" /* the one-pass backward's dQ: staged, summed, added or written */
#endif

template <int WG, int DQ>
__global__ void __launch_bounds__(128 * WG) flash_bwd_kv_wg_kernel(bf16 *dqkv, float *dqacc, const bf16 *q16,
                                                                   const bf16 *o16, const float *lse, const float *dr,
                                                                   int T, int H, float sl2, float scale,
                                                                   const float *rcs, const float *rsn, int tab) {
#if defined(TRM_WGMMA)
    extern __shared__ unsigned char fw_raw[];
    bf16 *sQO = (bf16 *)smem_align1024(fw_raw);
    bf16 *sK = sQO + FW_NS * 2 * FK_TILE, *sV = sK + WG * FW_TILE; /* swizzled, 64 rows a warpgroup */
    bf16 *sDS = sV + WG * FW_TILE;                                  /* DQ: a warpgroup's dSᵀ tile */
    float *sLD = (float *)(sDS + !!DQ * WG * FK_TILE);
    float *sStg = sLD + FW_NS * 2 * FK_T; /* DQ: two tiles' staged dQ parts, one a warpgroup */
    int h = blockIdx.y, b = blockIdx.z, wg = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3;
    int k0 = blockIdx.x * 64 * WG, r0 = k0 + wg * 64 + w * 16;
    auto [ld, ldo, Q, K, V, dO, Lr, Dr] = fb_head(q16, o16, lse, dr, T, H, b, h);
    int n = (T + FK_T - 1) / FK_T, Tp = fk_tp(T);
    float *acc = DQ == 1 ? dqacc + ((size_t)b * H + h) * FA_D * Tp : nullptr; /* the head's dQᵀ (64 × Tp) */
    bf16 *dq = dqkv + (size_t)b * T * ld + h * FA_D;                            /* DQ = 2: its dQ rows */
    /* tab (DQ = 2, T rows of RoPE's tables fit): both tables into shared memory at once by one
     * bulk copy each, for the dQ and dK stores, which read them from L2 otherwise */
    const float *cs = rcs, *sn = rsn;
    uint64_t *tbar = nullptr;
    if (DQ == 2 && tab) {
        float *sT = sStg + 2 * WG * FK_STG;
        tbar = (uint64_t *)(sT + 2 * T * FA_D);
        if (threadIdx.x == 0) {
            mbar_init(tbar, 1);
            asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
            fence_async_smem();
            mbar_expect(tbar, 2 * T * FA_D * 4);
            bulk_load(sT, rcs, T * FA_D * 4, tbar);
            bulk_load(sT + T * FA_D, rsn, T * FA_D * 4, tbar);
        }
        cs = sT, sn = sT + T * FA_D;
    }
    fw_fetch(sK, K, ld, k0, T, 64 * WG);
    fw_fetch(sV, V, ld, k0, T, 64 * WG);
    fk_fetch(sQO, sLD, Q, dO, Lr, Dr, ld, ldo, 0, T);
    cp_async_commit();
    if (n > 1) fk_fetch(sQO, sLD, Q, dO, Lr, Dr, ld, ldo, 1, T);
    cp_async_commit();
    float st[4][4], dpt[4][4], dk[8][4], dv[8][4], dqt[4][4];
    uint32_t pa[2][4], da[2][4];
    uint64_t kd[4], vd[4], dqd[4], dod[4], qn[2], on[2], kt[4], dsd[4];
    fa_zero(dk), fa_zero(dv);
    fw_descs(kd, sK + wg * FW_TILE, 0);
    fw_descs(vd, sV + wg * FW_TILE, 0);
    fk_next(sQO, sLD, Q, dO, Lr, Dr, ld, ldo, 0, n, T);
    fw_descs(dqd, sQO, 0);
    fw_descs(dod, sQO + FK_TILE, 0);
    fk_sdp_first(st, kd, dqd, dpt, vd, dod);
    fk_pds(st, dpt, sLD, sLD + FK_T, sl2);
    c_to_a(st, pa), c_to_a(dpt, da);
    if constexpr (DQ) fk_ds_store(sDS + wg * FK_TILE, da);
    for (int it = 1; it < n; it++) {
        fk_next(sQO, sLD, Q, dO, Lr, Dr, ld, ldo, it, n, T); /* its barrier publishes dSᵀ(it - 1) too */
        const bf16 *sq = sQO + (it % FW_NS) * 2 * FK_TILE, *sp = sQO + ((it - 1) % FW_NS) * 2 * FK_TILE;
        fw_descs(dqd, sq, 0);
        fw_descs(dod, sq + FK_TILE, 0);
        fw_descs(qn, sp, 1);
        fw_descs(on, sp + FK_TILE, 1);
        fw_descs(kd, opaque(sK + wg * FW_TILE), 0);
        fw_descs(vd, opaque(sV + wg * FW_TILE), 0);
        if constexpr (DQ) fw_descs(kt, opaque(sK + wg * FW_TILE), 1), fw_descs(dsd, opaque(sDS + wg * FK_TILE), 0);
        wg_fence_f(dk), wg_fence_f(dv), wg_fence_u(pa), wg_fence_u(da);
        if constexpr (DQ) wg_fence_f(dqt);
        wg_fence();
        fk_sdp(st, kd, dqd, dpt, vd, dod);
        fw_mma<1, 1, 2>(dv, pa, on), fw_mma<1, 1, 2>(dk, da, qn);
        if constexpr (DQ) fk_tn(dqt, kt, dsd);
        wg_commit();
        if constexpr (DQ)
            if (it >= 2) {
                if (it == 2 && tab) mbar_wait(tbar, 0); /* (the barrier's init seen: fk_next synchronised) */
                fk_dq_out<WG, DQ>(acc, dq, ld, sStg + (it & 1) * WG * FK_STG, it - 2, Tp, T, scale, cs, sn, tab);
            }
        wg_wait<1>(); /* Sᵀ and dPᵀ; the previous tile's dV and dK (and dQ) products run on */
        wg_fence_f(st), wg_fence_f(dpt);
        const float *sl = sLD + (it % FW_NS) * 2 * FK_T;
        fk_pds(st, dpt, sl, sl + FK_T, sl2); /* in fp32: registers no product in flight reads */
        wg_wait<0>();
        wg_fence_f(dk), wg_fence_f(dv), wg_fence_u(pa), wg_fence_u(da);
        if constexpr (DQ) wg_fence_f(dqt), fk_dq_stage(sStg + (((it - 1) & 1) * WG + wg) * FK_STG, dqt);
        c_to_a(st, pa), c_to_a(dpt, da);
        if constexpr (DQ) fk_ds_store(sDS + wg * FK_TILE, da);
    }
    if constexpr (DQ) fence_async_smem(), __syncthreads(); /* dSᵀ(n - 1), the parts of n - 2 */
    if (DQ == 2 && tab) mbar_wait(tbar, 0);
    const bf16 *sp = sQO + ((n - 1) % FW_NS) * 2 * FK_TILE;
    fw_descs(qn, sp, 1);
    fw_descs(on, sp + FK_TILE, 1);
    if constexpr (DQ) fw_descs(kt, opaque(sK + wg * FW_TILE), 1), fw_descs(dsd, opaque(sDS + wg * FK_TILE), 0);
    wg_fence_f(dk), wg_fence_f(dv), wg_fence_u(pa), wg_fence_u(da);
    if constexpr (DQ) wg_fence_f(dqt);
    wg_fence();
    fw_mma<1, 1, 2>(dv, pa, on), fw_mma<1, 1, 2>(dk, da, qn);
    if constexpr (DQ) fk_tn(dqt, kt, dsd);
    wg_commit();
    if constexpr (DQ)
        if (n >= 2) fk_dq_out<WG, DQ>(acc, dq, ld, sStg + (n & 1) * WG * FK_STG, n - 2, Tp, T, scale, cs, sn, tab);
    wg_wait<0>();
    wg_fence_f(dk), wg_fence_f(dv), wg_fence_u(pa), wg_fence_u(da);
    if constexpr (DQ) {
        wg_fence_f(dqt);
        fk_dq_stage(sStg + (((n - 1) & 1) * WG + wg) * FK_STG, dqt);
        __syncthreads();
        fk_dq_out<WG, DQ>(acc, dq, ld, sStg + ((n - 1) & 1) * WG * FK_STG, n - 1, Tp, T, scale, cs, sn, tab);
    }
    if (r0 < T) {
        if (rcs) /* dK rotated back by the rotary embedding's transpose (rcs: its tables, or NULL) */
            fa_store_rope(dqkv + (size_t)b * T * ld + (H + h) * FA_D, ld, r0, T, dk, scale, cs, sn, tab);
        else
            fa_store(dqkv + (size_t)b * T * ld + (H + h) * FA_D, ld, r0, T, dk, scale, scale);
        fa_store(dqkv + (size_t)b * T * ld + (2 * H + h) * FA_D, ld, r0, T, dv, 1.f, 1.f);
    }
#else
    __trap();
#endif
}

/* dQ of the one-pass backward: the fp32 (B, H, 64, Tp) accumulator, scaled and transposed
 * through shared memory, into the bf16 q columns of dqkv (B, T, 3H, 64); 64 queries a block */
__global__ void __launch_bounds__(256) flash_dq_convert_kernel(bf16 *dqkv, const float *acc, int T, int H, float scale,
                                                               const float *rcs, const float *rsn) {
    __shared__ float s[FA_D][65];
    int h = blockIdx.y, b = blockIdx.z, t0 = blockIdx.x * 64, Tp = fk_tp(T);
    const float *src = acc + ((size_t)b * H + h) * FA_D * Tp;
    for (int i = threadIdx.x; i < FA_D * 16; i += blockDim.x) {
        int d = i >> 4, tt = (i & 15) * 4;
        float4 v = t0 + tt < Tp ? *reinterpret_cast<const float4 *>(src + (size_t)d * Tp + t0 + tt) : float4{};
        s[d][tt] = v.x * scale, s[d][tt + 1] = v.y * scale, s[d][tt + 2] = v.z * scale, s[d][tt + 3] = v.w * scale;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 64 * 8; i += blockDim.x) {
        int tt = i >> 3, c = (i & 7) * 8;
        if (t0 + tt >= T) break;
        float v[8];
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = s[c + e][tt];
        if (rcs) { /* rope_pair's transpose, one side of the pair a value: d pairs with d ± 32 */
            float cr[8], sr[8]; /* cos of d, sin of the partner d ± 32 (c + 8 never crosses 32) */
            int pc = c < 32 ? c + 32 : c - 32;
            ld_f8(cr, rcs + (size_t)(t0 + tt) * FA_D + c), ld_f8(sr, rsn + (size_t)(t0 + tt) * FA_D + pc);
#pragma unroll
            for (int e = 0; e < 8; e++)
                v[e] = c < 32 ? v[e] * cr[e] + s[pc + e][tt] * sr[e] : v[e] * cr[e] - s[pc + e][tt] * sr[e];
        }
        uint4 o = {pack_bf16(v[0], v[1]), pack_bf16(v[2], v[3]), pack_bf16(v[4], v[5]), pack_bf16(v[6], v[7])};
        *reinterpret_cast<uint4 *>(dqkv + ((size_t)b * T + t0 + tt) * 3 * H * FA_D + h * FA_D + c) = o;
    }
}

/* ---- backward: two passes without atomics, each warp owning two 16-row tiles (32 keys, or 32
 * queries), the streamed 64-row tiles taken 16 rows at a time: a K/Q/V/dO fragment read from
 * shared memory feeds four products. */
#define FB_ROWS (4 * 16 * FA_MT) /* 128 keys or queries a block of 4 warps */

__device__ __forceinline__ void fb_zero16(float a[FA_MT][2][4]) {
#pragma unroll
    for (int mt = 0; mt < FA_MT; mt++)
#pragma unroll
        for (int j = 0; j < 2; j++) a[mt][j][0] = a[mt][j][1] = a[mt][j][2] = a[mt][j][3] = 0.f;
}

/* acc[mt] (16 × 16) += A[mt] (16 × 64) · tile[row0, row0 + 16)ᵀ */
__device__ __forceinline__ void fb_mma_nt16(float acc[FA_MT][2][4], const uint32_t a[FA_MT][4][4], const bf16 *tile,
                                            int row0) {
    int l = threadIdx.x & 31, m = l >> 3;
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        uint32_t b[4];
        ldsm4(b, tile + (row0 + (m >> 1) * 8 + (l & 7)) * FA_LD + kk * 16 + (m & 1) * 8);
#pragma unroll
        for (int mt = 0; mt < FA_MT; mt++) {
            mma16816(acc[mt][0], a[mt][kk], b[0], b[1]);
            mma16816(acc[mt][1], a[mt][kk], b[2], b[3]);
        }
    }
}

/* acc[mt] (16 × 64) += P[mt] (16 × 16, C fragments) · tile[row0, row0 + 16) (rows = the k index) */
__device__ __forceinline__ void fb_mma_pn16(float acc[FA_MT][8][4], const float p[FA_MT][2][4], const bf16 *tile,
                                            int row0) {
    int l = threadIdx.x & 31, m = l >> 3;
    uint32_t a[FA_MT][4];
#pragma unroll
    for (int mt = 0; mt < FA_MT; mt++) {
        a[mt][0] = pack_bf16(p[mt][0][0], p[mt][0][1]);
        a[mt][1] = pack_bf16(p[mt][0][2], p[mt][0][3]);
        a[mt][2] = pack_bf16(p[mt][1][0], p[mt][1][1]);
        a[mt][3] = pack_bf16(p[mt][1][2], p[mt][1][3]);
    }
#pragma unroll
    for (int j = 0; j < 8; j += 2) {
        uint32_t b[4];
        ldsm4t(b, tile + (row0 + (m & 1) * 8 + (l & 7)) * FA_LD + (j + (m >> 1)) * 8);
#pragma unroll
        for (int mt = 0; mt < FA_MT; mt++) {
            mma16816(acc[mt][j], a[mt], b[0], b[1]);
            mma16816(acc[mt][j + 1], a[mt], b[2], b[3]);
        }
    }
}

/* The block's FB_ROWS rows of A and B from row r0 (zeros past T) into a and b, waited for and
 * seen by the block: the rows whose A fragments each warp keeps (a and b: both stages of the
 * stream's buffers, free until the stream starts after the next barrier). */
__device__ __forceinline__ void fb_stage_rows(bf16 *a, bf16 *b, const bf16 *A, size_t lda, const bf16 *B, size_t ldb,
                                              int r0, int T) {
    fa_fetch(a, A, lda, r0, FB_ROWS, T);
    fa_fetch(b, B, ldb, r0, FB_ROWS, T);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
}

/* s = A·taᵀ and d = B·tbᵀ against the 16 streamed rows from sub: the scores and the dO·Vᵀ
 * products of a backward step (16 × 16 for each of the warp's tiles) */
__device__ __forceinline__ void fb_sdp16(float s[FA_MT][2][4], float d[FA_MT][2][4], const uint32_t a[FA_MT][4][4],
                                         const uint32_t b[FA_MT][4][4], const bf16 *ta, const bf16 *tb, int sub) {
    fb_zero16(s), fb_zero16(d);
    fb_mma_nt16(s, a, ta, sub);
    fb_mma_nt16(d, b, tb, sub);
}

/* for (mt, j, e) over every element of a backward step's 16 × 16 C fragments, in register order:
 * tile mt, 8-column block j, slot e. A macro rather than a function taking a lambda, which made
 * the compiler order the dQ pass otherwise. */
#define FB_EACH16(mt, j, e)                                  \
    _Pragma("unroll") for (int mt = 0; mt < FA_MT; mt++)     \
        _Pragma("unroll") for (int j = 0; j < 2; j++)        \
            _Pragma("unroll") for (int e = 0; e < 4; e++)

/* dK and dV of 128 keys, over every query tile. q16: bf16 qkv; o16: bf16 dO. */
__global__ void __launch_bounds__(128) flash_bwd_kv_kernel(bf16 *dqkv, const bf16 *q16, const bf16 *o16,
                                                           const float *lse, const float *dr, int T, int H,
                                                           float sl2, float scale) {
    __shared__ __align__(16) bf16 sQ[2][FA_TILE], sO[2][FA_TILE];
    __shared__ float sL[2][FA_T], sDr[2][FA_T];
    int h = blockIdx.y, b = blockIdx.z, k0 = blockIdx.x * FB_ROWS, w = threadIdx.x >> 5;
    int t = threadIdx.x & 3;
    bool live = k0 + w * 32 < T; /* the last block's warps past T skip the arithmetic */
    auto [ld, ldo, Q, K, V, dO, Lr, Dr] = fb_head(q16, o16, lse, dr, T, H, b, h);
    /* the block's 128 K rows over both sQ stages, its V rows over both sO stages */
    fb_stage_rows(&sQ[0][0], &sO[0][0], K, ld, V, ld, k0, T);
    uint32_t ka[FA_MT][4][4], va[FA_MT][4][4];
#pragma unroll
    for (int mt = 0; mt < FA_MT; mt++) {
        fa_afrag(ka[mt], &sQ[0][0], w * 32 + mt * 16);
        fa_afrag(va[mt], &sO[0][0], w * 32 + mt * 16);
    }
    __syncthreads();
    float dk[FA_MT][8][4], dv[FA_MT][8][4];
#pragma unroll
    for (int mt = 0; mt < FA_MT; mt++) fa_zero(dk[mt]), fa_zero(dv[mt]);
    int n = (T + FA_T - 1) / FA_T;
    for (int it = -1; it < n; it++) {
        int st = it & 1;
        if (it + 1 < n) { /* fetch the next query tile while this one is used */
            int q1 = (it + 1) * FA_T, sn = (it + 1) & 1;
            fa_fetch2(sQ[sn], sO[sn], Q, ld, dO, ldo, q1, T);
            for (int i = threadIdx.x; i < FA_T; i += blockDim.x) {
                sL[sn][i] = q1 + i < T ? Lr[q1 + i] * LOG2E : INFINITY; /* P = 0 past T */
                sDr[sn][i] = q1 + i < T ? Dr[q1 + i] : 0.f;
            }
        }
        if (it < 0) continue;
        fa_wait_tile(it, n);
#pragma unroll 1
        for (int sub = 0; live && sub < FA_T && it * FA_T + sub < T; sub += 16) {
            float p[FA_MT][2][4], dp[FA_MT][2][4];
            fb_sdp16(p, dp, ka, va, sQ[st], sO[st], sub); /* Sᵀ: keys × 16 queries; dPᵀ = V·dOᵀ */
            FB_EACH16(mt, j, e) {
                int q = sub + j * 8 + 2 * t + (e & 1);
                p[mt][j][e] = ex2(fmaf(p[mt][j][e], sl2, -sL[st][q]));
                dp[mt][j][e] = p[mt][j][e] * (dp[mt][j][e] - sDr[st][q]);
            }
            fb_mma_pn16(dv, p, sO[st], sub);  /* dV += Pᵀ·dO */
            fb_mma_pn16(dk, dp, sQ[st], sub); /* dK += dSᵀ·Q */
        }
        __syncthreads();
    }
#pragma unroll
    for (int mt = 0; mt < FA_MT; mt++) {
        int r0 = k0 + w * 32 + mt * 16;
        if (r0 >= T) continue;
        fa_store(dqkv + (size_t)b * T * ld + (H + h) * FA_D, ld, r0, T, dk[mt], scale, scale);
        fa_store(dqkv + (size_t)b * T * ld + (2 * H + h) * FA_D, ld, r0, T, dv[mt], 1.f, 1.f);
    }
}

/* dQ of 128 queries, over every key tile. */
__global__ void __launch_bounds__(128) flash_bwd_q_kernel(bf16 *dqkv, const bf16 *q16, const bf16 *o16,
                                                          const float *lse, const float *dr, int T, int H,
                                                          float sl2, float scale) {
    __shared__ __align__(16) bf16 sK[2][FA_TILE], sV[2][FA_TILE];
    int h = blockIdx.y, b = blockIdx.z, q0 = blockIdx.x * FB_ROWS, w = threadIdx.x >> 5;
    int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    bool live = q0 + w * 32 < T; /* the last block's warps past T skip the arithmetic */
    auto [ld, ldo, Q, K, V, dO, Lr, Dr] = fb_head(q16, o16, lse, dr, T, H, b, h);
    fb_stage_rows(&sK[0][0], &sV[0][0], Q, ld, dO, ldo, q0, T);
    uint32_t qa[FA_MT][4][4], oa[FA_MT][4][4];
    float Lq[FA_MT][2], Dq[FA_MT][2];
#pragma unroll
    for (int mt = 0; mt < FA_MT; mt++) {
        fa_afrag(qa[mt], &sK[0][0], w * 32 + mt * 16);
        fa_afrag(oa[mt], &sV[0][0], w * 32 + mt * 16);
        int r = q0 + w * 32 + mt * 16 + g;
        Lq[mt][0] = r < T ? Lr[r] * LOG2E : INFINITY, Lq[mt][1] = r + 8 < T ? Lr[r + 8] * LOG2E : INFINITY;
        Dq[mt][0] = r < T ? Dr[r] : 0.f, Dq[mt][1] = r + 8 < T ? Dr[r + 8] : 0.f;
    }
    __syncthreads();
    float dq[FA_MT][8][4];
#pragma unroll
    for (int mt = 0; mt < FA_MT; mt++) fa_zero(dq[mt]);
    int n = (T + FA_T - 1) / FA_T;
    fa_fetch2(sK[0], sV[0], K, ld, V, ld, 0, T);
    for (int it = 0; it < n; it++) {
        int st = it & 1, k0 = it * FA_T;
        fa_stream_next(sK, sV, K, ld, V, ld, it, n, T);
#pragma unroll 1
        for (int sub = 0; live && sub < FA_T && k0 + sub < T; sub += 16) {
            float p[FA_MT][2][4], dp[FA_MT][2][4];
            fb_sdp16(p, dp, qa, oa, sK[st], sV[st], sub); /* S: queries × 16 keys; dP = dO·Vᵀ */
            FB_EACH16(mt, j, e) {
                int key = k0 + sub + j * 8 + 2 * t + (e & 1);
                float pe = key < T ? ex2(fmaf(p[mt][j][e], sl2, -Lq[mt][e >> 1])) : 0.f;
                dp[mt][j][e] = pe * (dp[mt][j][e] - Dq[mt][e >> 1]);
            }
            fb_mma_pn16(dq, dp, sK[st], sub); /* dQ += dS·K */
        }
        __syncthreads();
    }
#pragma unroll
    for (int mt = 0; mt < FA_MT; mt++) {
        int r0 = q0 + w * 32 + mt * 16;
        if (r0 >= T) continue;
        fa_store(dqkv + (size_t)b * T * ld + h * FA_D, ld, r0, T, dq[mt], scale, scale);
    }
}


#include "flash_bwd_short.cuh" /* the persistent backward for short heads (T ≤ 128) */

int k_flash_ok(const void *a, const void *b, int hd) {
    return hd == FA_D && aligned16(a) && aligned16(b);
}

/* blocks of WG warpgroups (64 rows each) over T rows, for every head and sample */
static dim3 wg_grid(int T, int WG, int H, int B) { return dim3((unsigned)((T + 64 * WG - 1) / (64 * WG)), (unsigned)H, (unsigned)B); }
/* three warpgroups (192 keys) a block unless that pads T further than 128-key blocks do (T = 97:
 * 192 against 128 rows; T = 916: 960 against 1024) */
static int fk_wg(int T) { return (T + 191) / 192 * 192 <= (T + 127) / 128 * 128 ? 3 : 2; }
/* the one-pass backward needs no dQ accumulator where one block holds every key (T = 97) */
static int fk_one_block(int T) { return T <= 64 * fk_wg(T); }
/* the shared memory of DQ = 2's copy of RoPE's tables at T rows (and its barrier); taken with two
 * warpgroups (T ≤ 128) */
#define FK_TAB(T) ((size_t)2 * (T) * FA_D * 4 + 16)
template <int DQ>
static void fk_launch(cudaStream_t st, bf16 *dqkv, float *dqacc, const bf16 *q, const bf16 *o, const float *lse,
                      const float *dr, int B, int T, int H, float scale, const float *rcs = nullptr,
                      const float *rsn = nullptr) {
    if (fk_wg(T) == 3) {
        flash_bwd_kv_wg_kernel<3, DQ><<<wg_grid(T, 3, H, B), 128 * 3, FK_SMEM(3, DQ), st>>>(
            dqkv, dqacc, q, o, lse, dr, T, H, scale * LOG2E, scale, rcs, rsn, 0);
        return;
    }
    int tab = DQ == 2 && rcs && T <= 128 && aligned16(rcs) && aligned16(rsn);
    flash_bwd_kv_wg_kernel<2, DQ><<<wg_grid(T, 2, H, B), 128 * 2, FK_SMEM(2, DQ) + (tab ? FK_TAB(T) : 0), st>>>(
        dqkv, dqacc, q, o, lse, dr, T, H, scale * LOG2E, scale, rcs, rsn, tab);
}

size_t k_flash_dq_bytes(int B, int T, int H) {
    return fk_one_block(T) ? 0 : (size_t)B * H * FA_D * fk_tp(T) * sizeof(float);
}

int k_flash_wgmma(void) {
#if defined(TRM_CUDA_SM90A)
    if (!device_sm90()) return 0;
    if (smem_limit(flash_fwd_wg_kernel<FW_WG>, FW_SMEM(FW_WG)) && smem_limit(flash_bwd_q_wg_kernel<FW_WG>, FQ_SMEM(FW_WG)) &&
        smem_limit(flash_bwd_kv_wg_kernel<2, 0>, FK_SMEM(2, 0)) && smem_limit(flash_bwd_kv_wg_kernel<3, 0>, FK_SMEM(3, 0)) &&
        smem_limit(flash_bwd_kv_wg_kernel<2, 1>, FK_SMEM(2, 1)) && smem_limit(flash_bwd_kv_wg_kernel<3, 1>, FK_SMEM(3, 1)) &&
        smem_limit(flash_bwd_kv_wg_kernel<2, 2>, FK_SMEM(2, 2) + FK_TAB(128)) &&
        smem_limit(flash_bwd_kv_wg_kernel<3, 2>, FK_SMEM(3, 2)) &&
        smem_limit(flash_fwd_wg_kernel<FW_WG, 1>, FW_SMEM(FW_WG)) && smem_limit(flash_fwd_wg_kernel<FW_WG, 2>, FW_SMEM(FW_WG)) &&
        smem_limit(flash_fwd_short_kernel<0>, FS_SMEM(FS_ROWS)) && smem_limit(flash_fwd_short_kernel<1>, FS_SMEM(FS_ROWS)) &&
        smem_limit(flash_fwd_long_kernel<FL_WG>, FL_SMEM(FL_WG)))
        return 1;
    cudaGetLastError(); /* fall back to mma.sync without leaving the error queued */
    return 0;
#else
    return 0;
#endif
}

int k_flash_short_bwd_ok(void) {
#if defined(TRM_CUDA_SM90A)
    return sm90_smem_ok(FBS_MAX, flash_bwd_short_kernel);
#else
    return 0;
#endif
}

void k_flash_fwd(cudaStream_t st, int wgmma, void *tma, void *out, float *lse, const void *qkv, int B, int T, int H) {
    float sl2 = LOG2E / sqrtf((float)FA_D);
    if (wgmma && !fl_launch(st, tma, (bf16 *)out, lse, (const bf16 *)qkv, B, T, H, sl2))
        flash_fwd_wg_kernel<FW_WG><<<wg_grid(T, FW_WG, H, B), 128 * FW_WG, FW_SMEM(FW_WG), st>>>(
            (bf16 *)out, lse, (const bf16 *)qkv, T, H, sl2);
    if (wgmma) return;
    int rows = FA_FWD_WARPS * 16 * FA_MT;
    dim3 grid((unsigned)((T + rows - 1) / rows), (unsigned)H, (unsigned)B);
    flash_fwd_kernel<<<grid, 32 * FA_FWD_WARPS, 0, st>>>((bf16 *)out, lse, (const bf16 *)qkv, T, H, sl2);
}

int k_flash_fwd_rope(cudaStream_t st, int wgmma, void *tma_encode, void *out, float *lse, void *qkv, int B, int T,
                     int H, const float *cs, const float *sn, int keep) {
    /* A head over several blocks (maze's T = 916: 8) has each of them rotate all its keys again:
     * H100, maze_att call, 1.75 ms against rope_fwd's 0.27 + the plain forward's 1.13. */
    if (!wgmma || T > 64 * FW_WG) return 0;
    dim3 grid = wg_grid(T, FW_WG, H, B);
    float sl2 = LOG2E / sqrtf((float)FA_D);
#if defined(TRM_CUDA_SM90A)
    CUtensorMap tmq, tmc, tms, tmo;
    if (tma_encode && aligned16(cs) && aligned16(sn) && fs_maps(tma_encode, &tmq, &tmc, &tms, qkv, cs, sn, B, T, H) &&
        head_map(tma_encode, &tmo, out, H * FA_D, B, T, FS_ROWS)) {
        size_t smem = FS_SMEM((T + 7) & ~7);
        /* persistent: two an SM where two fit (T ≤ 120) */
        int heads = B * H, blocks = (smem + 1024 <= 114 * 1024 ? 2 : 1) * device_sms(1);
        if (blocks > heads) blocks = heads;
        if (keep)
            flash_fwd_short_kernel<1><<<blocks, 256, smem, st>>>(tmq, tmc, tms, tmo, lse, (bf16 *)qkv, B, T, H, sl2);
        else
            flash_fwd_short_kernel<0><<<blocks, 256, smem, st>>>(tmq, tmc, tms, tmo, lse, (bf16 *)qkv, B, T, H, sl2);
        return 1;
    }
#else
    (void)tma_encode;
#endif
    if (keep)
        flash_fwd_wg_kernel<FW_WG, 2><<<grid, 128 * FW_WG, FW_SMEM(FW_WG), st>>>((bf16 *)out, lse, (const bf16 *)qkv,
                                                                              T, H, sl2, cs, sn);
    else
        flash_fwd_wg_kernel<FW_WG, 1><<<grid, 128 * FW_WG, FW_SMEM(FW_WG), st>>>((bf16 *)out, lse, (const bf16 *)qkv,
                                                                              T, H, sl2, cs, sn);
    return 1;
}

int k_flash_bwd(cudaStream_t st, int wgmma, void *tma_encode, int one_pass, void *dqkv, float *dqacc,
                const void *dout, const void *qkv, const float *lse, const float *dr, int B, int T, int H,
                const float *rcs, const float *rsn) {
    dim3 grid((unsigned)((T + FB_ROWS - 1) / FB_ROWS), (unsigned)H, (unsigned)B);
    float scale = 1.0f / sqrtf((float)FA_D);
    const bf16 *q = (const bf16 *)qkv, *o = (const bf16 *)dout;
    bf16 *dq = (bf16 *)dqkv;
    if (wgmma) {
#if defined(TRM_CUDA_SM90A)
        if (one_pass && fbs_launch(st, tma_encode, dq, q, o, lse, dr, B, T, H, scale, rcs, rsn))
            return rcs != nullptr;
#else
        (void)tma_encode;
#endif
        if (one_pass && fk_one_block(T)) { /* one pass, dQ written by the block that holds every key */
            fk_launch<2>(st, dq, nullptr, q, o, lse, dr, B, T, H, scale, rcs, rsn);
            return rcs != nullptr;
        }
        if (one_pass) { /* one pass, dQ summed into dqacc (zeroed by the caller), then written out */
            fk_launch<1>(st, dq, dqacc, q, o, lse, dr, B, T, H, scale, rcs, rsn);
            dim3 cg((unsigned)((T + 63) / 64), (unsigned)H, (unsigned)B);
            flash_dq_convert_kernel<<<cg, 256, 0, st>>>(dq, dqacc, T, H, scale, rcs, rsn);
            return rcs != nullptr;
        }
        fk_launch<0>(st, dq, nullptr, q, o, lse, dr, B, T, H, scale);
        /* 98 registers: two blocks of two warpgroups an SM (maze call 1.90 ms; one block of three
         * with less padding, 1.98) */
        flash_bwd_q_wg_kernel<FW_WG><<<wg_grid(T, FW_WG, H, B), 128 * FW_WG, FQ_SMEM(FW_WG), st>>>(
            dq, q, o, lse, dr, T, H, scale * LOG2E, scale);
        return 0;
    }
    flash_bwd_kv_kernel<<<grid, 128, 0, st>>>(dq, q, o, lse, dr, T, H, scale * LOG2E, scale);
    flash_bwd_q_kernel<<<grid, 128, 0, st>>>(dq, q, o, lse, dr, T, H, scale * LOG2E, scale);
    return 0;
}
