/* flash_short.cuh — the attention forward with RoPE for short heads (T ≤ 128) by TMA, and the
 * tensor maps its launch builds: included by attention.cu once its tile macros, fw_* helpers
 * (fw_first, fw_next, fw_last, fw_rope8) are defined. Kept apart so that attention.cu stays
 * within the tree's file size. */
#ifndef TRM_FLASH_SHORT_CUH
#define TRM_FLASH_SHORT_CUH

/* ---- the forward with RoPE for short heads (T ≤ 128: Sudoku's 97), by TMA -------------------
 * Persistent blocks of two warpgroups (two an SM where they fit) walk the heads b·H + h =
 * blockIdx.x, + gridDim.x, ...; a head's work is flash_fwd_wg_kernel<2, ROPE>'s where one block
 * holds a head. Its copies are TMA boxes one thread issues: q, k and v (128 rows of the head's
 * 64 columns, 128-byte swizzle; rows past T read as zeros), q and k on one barrier, v on
 * another, and once a block the first T rows of the cos and sin tables (fp32, unswizzled, rows
 * FS_TS floats apart) on a third. The next head's q and k come once every warp is past the last
 * score product; the output goes out through v's tile by a TMA store, and the next v once that
 * store has read it. In the cp.async kernel a third of the stall samples fell before its first
 * product: each thread issued 12 row copies and, after its wait, read its table rows from L2
 * (Nsight Compute source view, sudoku_att, H200). Both tables fit beside the tiles at T ≤ 128:
 * 104 KiB at T = 97, two blocks an SM (from T = 121, 117 KiB: one). */
#define FS_ROWS 128
#define FS_TILE (FS_ROWS * FA_D) /* bf16 of a 128-row swizzled tile */
/* floats a row of RoPE's tables in shared memory: rows 272 bytes apart put the rows that a
 * warp's threads read at once on different banks (256 bytes apart, 8 rows met on the same 8) */
#define FS_TS 68
/* the tiles, the tables' T rows (rounded to 8), three barriers, the alignment slack */
#define FS_SMEM(TR) ((size_t)3 * FS_TILE * 2 + (size_t)2 * (TR) * FS_TS * 4 + 24 + 1024)

#if defined(TRM_WGMMA)
/* 8 fp32 values from shared memory */
__device__ __forceinline__ void lds_f8(float *f, const float *p) {
    float4 a = reinterpret_cast<const float4 *>(p)[0], b = reinterpret_cast<const float4 *>(p)[1];
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}
/* A warp's 16 rows (from r0) × 64 as packed bf16 pairs (o[j][hf]: row g + 8·hf, columns 8j +
 * 2t and the next) into a 128-row swizzled tile, the layout the TMA stores read, by stmatrix */
__device__ __forceinline__ void fs_stage(bf16 *tile, const uint32_t (&o)[8][2], int r0) {
    int l = threadIdx.x & 31, m = l >> 3, row = r0 + (m & 1) * 8 + (l & 7);
    uint32_t base = (uint32_t)__cvta_generic_to_shared(tile) + row * 128;
#pragma unroll
    for (int j = 0; j < 8; j += 2) {
        const uint32_t r[4] = {o[j][0], o[j][1], o[j + 1][0], o[j + 1][1]};
        stsm4(base + (((j + (m >> 1)) ^ (row & 7)) << 4), r);
    }
}
/* A warp's C fragments (16 rows × 64) as packed bf16 pairs for fs_stage, rows g scaled by s0,
 * rows g + 8 by s1 */
__device__ __forceinline__ void fs_pack(uint32_t (&o)[8][2], const float (&acc)[8][4], float s0, float s1) {
#pragma unroll
    for (int j = 0; j < 8; j++)
        o[j][0] = pack_bf16(acc[j][0] * s0, acc[j][1] * s0), o[j][1] = pack_bf16(acc[j][2] * s1, acc[j][3] * s1);
}
/* fw_finish with the output staged: a warp's 16 rows of o scaled by their row sums into tile
 * (rows past T too: the store drops them), each row's log-sum-exp to memory */
__device__ __forceinline__ void fs_finish(bf16 *tile, float *lse, float (&o)[8][4], const float (&ml)[4], int b, int h,
                                          int T, int H, int r0, int g, int t, float sl2) {
    float l0, l1;
    fw_rowsums(ml, l0, l1);
    uint32_t p[8][2];
    fs_pack(p, o, 1.f / l0, 1.f / l1);
    fs_stage(tile, p, r0);
    fw_lse(lse, ml, l0, l1, b, h, T, H, r0, g, t, sl2);
}
/* A fragments (4 k-steps) of rows row0..row0+15 of a 128-byte-swizzled tile */
__device__ __forceinline__ void fs_afrag(uint32_t a[4][4], const bf16 *tile, int row0) {
    int l = threadIdx.x & 31, m = l >> 3, r = row0 + (l & 7) + (m & 1) * 8;
#pragma unroll
    for (int kk = 0; kk < 4; kk++) ldsm4(a[kk], tile + r * FA_D + (((2 * kk + (m >> 1)) ^ (r & 7)) << 3));
}
#endif

#if defined(TRM_WGMMA)
/* head hd's q and k (on bar[0]) or v (on bar[1], once the store of the last head's output
 * from its tile has read it) into their tiles from sQ, by TMA */
__device__ __forceinline__ void fs_fetch_qk(const CUtensorMap *tmq, bf16 *sQ, uint64_t *bar, int hd, int H) {
    int b = hd / H, h = hd - b * H;
    mbar_expect(bar, 2 * FS_TILE * 2);
    tma_load_3d_nb(sQ, tmq, h * FA_D, 0, b, bar);
    tma_load_3d_nb(sQ + FS_TILE, tmq, (H + h) * FA_D, 0, b, bar);
}
__device__ __forceinline__ void fs_fetch_v(const CUtensorMap *tmq, bf16 *sQ, uint64_t *bar, int hd, int H) {
    int b = hd / H, h = hd - b * H;
    tma_wait_read();
    mbar_expect(bar + 1, FS_TILE * 2);
    tma_load_3d_nb(sQ + 2 * FS_TILE, tmq, (2 * H + h) * FA_D, 0, b, bar + 1);
}
#endif

#if defined(TRM_CUDA_SM90A)
template <int KEEP>
__global__ void __launch_bounds__(256, 2)
    flash_fwd_short_kernel(const __grid_constant__ CUtensorMap tmq, const __grid_constant__ CUtensorMap tmc,
                           const __grid_constant__ CUtensorMap tms, const __grid_constant__ CUtensorMap tmo, float *lse,
                           bf16 *q16, int B, int T, int H, float sl2) {
#if defined(TRM_WGMMA)
    extern __shared__ unsigned char fs_raw[];
    bf16 *sQ = (bf16 *)smem_align1024(fs_raw), *sK = sQ + FS_TILE, *sV = sK + FS_TILE;
    int TR = (T + 7) & ~7, heads = B * H;
    float *sC = (float *)(sV + FS_TILE), *sS = sC + TR * FS_TS;
    uint64_t *bar = (uint64_t *)(sS + TR * FS_TS); /* q and k; v; the tables */
    int wg = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3;
    int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3, qw = wg * 64, n = (T + FA_T - 1) / FA_T;
    size_t ld = (size_t)3 * H * FA_D;
    if (threadIdx.x == 0) {
        for (int k = 0; k < 3; k++) mbar_init(bar + k, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        fence_async_smem(); /* the barriers seen initialised by the TMA copies too */
        mbar_expect(bar + 2, 2 * TR * FS_TS * 4);
        tma_load_2d_nb(sC, &tmc, 0, 0, bar + 2);
        tma_load_2d_nb(sS, &tms, 0, 0, bar + 2);
        if ((int)blockIdx.x < heads) fs_fetch_qk(&tmq, sQ, bar, blockIdx.x, H), fs_fetch_v(&tmq, sQ, bar, blockIdx.x, H);
    }
    __syncthreads(); /* the barriers initialised */
    mbar_wait(bar + 2, 0);
    int i = 0;
    for (int hd = blockIdx.x; hd < heads; hd += gridDim.x, i++) {
        int b = hd / H, h = hd - b * H;
        bf16 *Q = q16 + (size_t)b * T * ld + h * FA_D, *K = Q + H * FA_D;
        mbar_wait(bar, i & 1);
        /* each position's pair (c, c + 32) for 8 c at once, in q's row and k's (both swizzled) */
        for (int e = threadIdx.x; e < T * 4; e += 256) {
            int p = e >> 2, j = e & 3, x = p & 7;
            float c[8], ch[8], s[8], sh[8];
            lds_f8(c, sC + p * FS_TS + 8 * j), lds_f8(ch, sC + p * FS_TS + 8 * j + 32);
            lds_f8(s, sS + p * FS_TS + 8 * j), lds_f8(sh, sS + p * FS_TS + 8 * j + 32);
            bf16 *q = sQ + p * FA_D, *k = sK + p * FA_D;
            fw_rope8(q + ((j ^ x) << 3), q + (((j + 4) ^ x) << 3), 8 * j, c, ch, s, sh, KEEP ? Q + p * ld : nullptr);
            fw_rope8(k + ((j ^ x) << 3), k + (((j + 4) ^ x) << 3), 8 * j, c, ch, s, sh, KEEP ? K + p * ld : nullptr);
        }
        fence_async_smem();
        __syncthreads();
        /* a warpgroup wholly past T (T ≤ 64) computes on zero rows (its staged rows the store
         * drops): every thread meets the barriers, and a branch around the products would have
         * ptxas serialise them */
        float o[8][4], s[8][4], ml[4] = {-INFINITY, -INFINITY, 0.f, 0.f}, c[2];
        uint32_t qa[4][4], p[4][4];
        fa_zero(o);
        fs_afrag(qa, sQ, qw + w * 16);
        fw_first(s, ml, c, p, qa, sK, T, sl2);
        mbar_wait(bar + 1, i & 1);
        if (n > 1) fw_next(o, s, ml, c, p, qa, sK + FW_TILE, sV, FA_T, T, sl2);
        __syncthreads(); /* every warp done with the head's q and k: the next head's come */
        bool more = hd + (int)gridDim.x < heads;
        if (threadIdx.x == 0 && more) {
            fence_async_smem(); /* after q's reads by ldmatrix */
            fs_fetch_qk(&tmq, sQ, bar, hd + gridDim.x, H);
        }
        fw_last(o, p, sV + (n - 1) * FW_TILE);
        __syncthreads(); /* every warp done with v */
        fs_finish(sV, lse, o, ml, b, h, T, H, qw + w * 16, g, t, sl2); /* the output through v's tile */
        fence_async_smem();
        __syncthreads();
        if (threadIdx.x == 0) { /* the output out, then the next head's v in */
            tma_store_3d(&tmo, sV, h * FA_D, 0, b);
            tma_commit();
            if (more) fs_fetch_v(&tmq, sQ, bar, hd + gridDim.x, H);
        }
    }
    if (threadIdx.x == 0) tma_wait();
#else
    __trap();
#endif
}
#endif

#if defined(TRM_CUDA_SM90A)
/* a bf16 (B, T, ld) tensor as a tensor map of boxes of 64 columns × R rows of a sample (rows
 * past T read as zeros): a head of qkv (ld = 3H·64) or of dO (H·64) */
static int head_map(void *encode, CUtensorMap *tm, const void *p, int ld, int B, int T, int R) {
    cuuint64_t dim[3] = {(cuuint64_t)ld, (cuuint64_t)T, (cuuint64_t)B};
    cuuint64_t stride[2] = {(cuuint64_t)ld * 2, (cuuint64_t)ld * 2 * (cuuint64_t)T};
    cuuint32_t box[3] = {FA_D, (cuuint32_t)R, 1};
    return tma_map_bf16(tm, encode, p, 3, dim, stride, box);
}
/* qkv (B, T, 3H·64) so: the TMA forwards' operands */
static int qkv_head_map(void *encode, CUtensorMap *tm, const void *qkv, int B, int T, int H, int R) {
    return head_map(encode, tm, qkv, 3 * H * FA_D, B, T, R);
}
/* The short forward's operands as tensor maps: qkv in 128-row boxes, and the (T × 64) fp32
 * tables whole (T rounded up to 8 rows), rows FS_TS floats apart in shared memory (the columns
 * past 64 read as zeros) */
static int fs_maps(void *encode, CUtensorMap *tmq, CUtensorMap *tmc, CUtensorMap *tms, const void *qkv,
                   const float *cs, const float *sn, int B, int T, int H) {
    if (!qkv_head_map(encode, tmq, qkv, B, T, H, FS_ROWS)) return 0;
    cuuint64_t tdim[2] = {FA_D, (cuuint64_t)T}, tstride[1] = {FA_D * 4};
    cuuint32_t tbox[2] = {FS_TS, (cuuint32_t)((T + 7) & ~7)};
    return tma_map(tmc, encode, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, CU_TENSOR_MAP_SWIZZLE_NONE, cs, 2, tdim, tstride, tbox) &&
           tma_map(tms, encode, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, CU_TENSOR_MAP_SWIZZLE_NONE, sn, 2, tdim, tstride, tbox);
}
#endif

#endif
