/* flash_bwd_short.cuh — the one-pass attention backward for short heads (T ≤ 128: Sudoku's 97),
 * persistent: included by attention.cu once its tile macros, c_to_a, ex2 and flash_short.cuh
 * (fs_stage, head_map, FS_TS) are defined. Kept apart so that attention.cu stays within the
 * tree's file size.
 *
 * flash_bwd_kv_wg_kernel<2, 2> did these heads one block each, streaming 32-query tiles: ten
 * waits a head on one block of 8 warps an SM (232 registers), its loads and its stores in
 * series with the products. Nsight Compute (sudoku_att, H200): 505 µs a call, DRAM 21% busy.
 * Here a block stays on its SM and walks heads b·H + h = blockIdx.x, + gridDim.x, ...; while it
 * works on one head, the next one's q, k, v and dO tiles (128 rows, 128-byte swizzle, rows past T
 * read as zeros) arrive by TMA into the other of two buffers, and its lse and rowsum by cp.async
 * on the same mbarrier. RoPE's tables come once a block (when they fit beside the buffers), rows
 * padded. The outputs go out through the head's q, k and v tiles by TMA stores: by 4-byte stores
 * from registers (and with the tables' rows on the same banks) they cost the kernel 176 of its
 * 305 µs a sudoku_att call (H200; the kernel without them).
 *
 * Each warpgroup owns 64 keys and takes all 128 queries at once:
 *   Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (m64n128, waited for), Pᵀ and dSᵀ = Pᵀ∘(dPᵀ − D) in fp32;
 *   dV = Pᵀ·dO and dK = dSᵀ·Q from registers; dSᵀ to shared memory (transposed by stmatrix);
 *   after one barrier, dQ = dS·K over all 128 keys for the warpgroup's 64 queries.
 * The same per-element steps as the streaming kernel (Pᵀ, dSᵀ and the k-steps of dV and dK in
 * the same order); dQ's sum runs over the 128 keys in one accumulator instead of two warpgroups'
 * halves added. Rows and columns past T: q and dO rows read as zeros and lse, rowsum as 0, so Pᵀ
 * meets zero dO rows and dSᵀ is 0 there; keys past T have zero K and V rows (their dK, dV rows
 * are not stored, their dS meets zero K rows in dQ). */
#ifndef TRM_FLASH_BWD_SHORT_CUH
#define TRM_FLASH_BWD_SHORT_CUH

#define FBS_R 128                                         /* rows of a tile: queries or keys */
#define FBS_TILE (FBS_R * FA_D)                           /* bf16 of a 128 × 64 swizzled tile */
#define FBS_BUF (4 * FBS_TILE * 2 + 2 * FBS_R * 4)        /* a head's q, k, v, dO, lse, rowsum */
#define FBS_MAX (227 * 1024)                              /* a block's shared memory limit */
/* two head buffers, dSᵀ (two key halves), the tables' T rows (0: read from L2), barriers, slack */
#define FBS_SMEM(TT) ((size_t)2 * FBS_BUF + 2 * FBS_TILE * 2 + (size_t)2 * (TT) * FS_TS * 4 + 32 + 1024)

#if defined(TRM_WGMMA)
/* Head hd's operands into buffer buf (lse and rowsum after the four tiles), counted on bar: the
 * tiles' bytes by the first thread's expectation, every thread's copy by its own arrival */
__device__ __forceinline__ void fbs_fetch(const CUtensorMap *tmq, const CUtensorMap *tmo, unsigned char *buf,
                                          uint64_t *bar, const float *lse, const float *dr, int hd, int T, int H) {
    int b = hd / H, h = hd - b * H;
    bf16 *t = (bf16 *)buf;
    if (threadIdx.x == 0) {
        mbar_expect(bar, 4 * FBS_TILE * 2);
        tma_load_3d_nb(t, tmq, h * FA_D, 0, b, bar);
        tma_load_3d_nb(t + FBS_TILE, tmq, (H + h) * FA_D, 0, b, bar);
        tma_load_3d_nb(t + 2 * FBS_TILE, tmq, (2 * H + h) * FA_D, 0, b, bar);
        tma_load_3d_nb(t + 3 * FBS_TILE, tmo, h * FA_D, 0, b, bar);
    }
    int x = threadIdx.x & (FBS_R - 1), ok = x < T; /* threads 0–127: lse; 128–255: rowsum */
    const float *g = (threadIdx.x < FBS_R ? lse : dr) + ((size_t)b * H + h) * T + (ok ? x : 0);
    uint32_t d = (uint32_t)__cvta_generic_to_shared((float *)(t + 4 * FBS_TILE) + threadIdx.x);
    uint32_t m = (uint32_t)__cvta_generic_to_shared(bar);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(g), "r"(ok ? 4 : 0) : "memory");
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(m) : "memory");
}
/* A warp's 16 rows (from r0) × 64 of C fragments of dK and of dQ (the same positions), scaled
 * by s and rounded to bf16 pairs (row g and g + 8 of column pair j), with RoPE's transpose
 * rotation where cs is set (fa_store_rope's steps; a table row read once for both; rows past T
 * read the tables' last row: the store drops them) */
__device__ __forceinline__ void fbs_pack(uint32_t (&ok)[8][2], uint32_t (&oq)[8][2], const float (&dk)[8][4],
                                         const float (&dq)[8][4], float s, int r0, int T, const float *cs,
                                         const float *sn, int ts, bool sh) {
    if (!cs) {
        fs_pack(ok, dk, s, s), fs_pack(oq, dq, s, s);
        return;
    }
    int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
        int r = min(r0 + g + 8 * hf, T - 1);
        const float *c = cs + (size_t)r * ts, *n = sn + (size_t)r * ts;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int k = j * 8 + 2 * t;
            float2 c0 = tab_ld2(c + k, sh), c1 = tab_ld2(c + k + 32, sh);
            float2 n0 = tab_ld2(n + k, sh), n1 = tab_ld2(n + k + 32, sh);
#pragma unroll
            for (int x = 0; x < 2; x++) {
                const float(&acc)[8][4] = x ? dq : dk;
                float a0 = acc[j][2 * hf] * s, a1 = acc[j][2 * hf + 1] * s;
                float b0 = acc[j + 4][2 * hf] * s, b1 = acc[j + 4][2 * hf + 1] * s;
                rope_pair(a0, b0, c0.x, c1.x, n0.x, n1.x, 1);
                rope_pair(a1, b1, c0.y, c1.y, n0.y, n1.y, 1);
                uint32_t(&o)[8][2] = x ? oq : ok;
                o[j][hf] = pack_bf16(a0, a1), o[j + 4][hf] = pack_bf16(b0, b1);
            }
        }
    }
}
#endif

#if defined(TRM_CUDA_SM90A)
__global__ void __launch_bounds__(256, 1)
    flash_bwd_short_kernel(const __grid_constant__ CUtensorMap tmq, const __grid_constant__ CUtensorMap tmo,
                           const __grid_constant__ CUtensorMap tmd, const float *lse, const float *dr, int B, int T, int H, float sl2, float scale,
                           const float *rcs, const float *rsn, int tab) {
#if defined(TRM_WGMMA)
    extern __shared__ unsigned char fbs_raw[];
    unsigned char *bufs = smem_align1024(fbs_raw);
    bf16 *sDS = (bf16 *)(bufs + 2 * FBS_BUF);
    float *sT = (float *)(sDS + 2 * FBS_TILE);
    uint64_t *full = (uint64_t *)(sT + (tab ? 2 * T * FS_TS : 0));
    int wg = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, heads = B * H;
    const float *cs = tab ? sT : rcs, *sn = tab ? sT + T * FS_TS : rsn;
    int ts = tab ? FS_TS : FA_D; /* the tables' row pitch, in shared memory or not */
    if (threadIdx.x == 0) {
        mbar_init(full, 1 + 256), mbar_init(full + 1, 1 + 256);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        fence_async_smem(); /* the barriers seen initialised by the TMA copies too */
    }
    for (int e = threadIdx.x; tab && e < 2 * T * FA_D / 4; e += blockDim.x) { /* the tables, rows padded */
        int x = e / (T * FA_D / 4), r = e / (FA_D / 4) - x * T, c = e & (FA_D / 4 - 1);
        float4 v = reinterpret_cast<const float4 *>(x ? rsn : rcs)[r * (FA_D / 4) + c];
        *reinterpret_cast<float4 *>(sT + (x * T + r) * FS_TS + 4 * c) = v;
    }
    __syncthreads();
    if ((int)blockIdx.x < heads) fbs_fetch(&tmq, &tmo, bufs, full, lse, dr, blockIdx.x, T, H);
    int i = 0;
    for (int hd = blockIdx.x; hd < heads; hd += gridDim.x, i++) {
        int nb = (i + 1) & 1, b = hd / H, h = hd - b * H;
        bf16 *sQ = (bf16 *)(bufs + (i & 1) * FBS_BUF), *sK = sQ + FBS_TILE, *sV = sK + FBS_TILE, *sO = sV + FBS_TILE;
        const float *sL = (const float *)(sO + FBS_TILE), *sD = sL + FBS_R;
        mbar_wait(full + (i & 1), (i >> 1) & 1);
        float st[16][4], dpt[16][4];
        {
            uint64_t ka = wg_desc(sK + wg * 64 * FA_D, 16, 1024), va = wg_desc(sV + wg * 64 * FA_D, 16, 1024);
            uint64_t qb = wg_desc(sQ, 16, 1024), ob = wg_desc(sO, 16, 1024);
            wg_fence();
#pragma unroll
            for (int k = 0; k < 4; k++) wg_m64n128k16_ss(st, ka + 2 * k, qb + 2 * k, k);
#pragma unroll
            for (int k = 0; k < 4; k++) wg_m64n128k16_ss(dpt, va + 2 * k, ob + 2 * k, k);
            wg_commit();
            wg_wait<0>();
            wg_fence_f(st), wg_fence_f(dpt);
        }
        fk_pds(st, dpt, sL, sD, sl2);
        uint32_t pa[8][4], da[8][4];
        c_to_a(st, pa), c_to_a(dpt, da);
        fk_ds_store(sDS + wg * FBS_TILE, da);
        fence_async_smem(); /* dSᵀ, written by stmatrix, read next by the tensor cores */
        float dv[8][4], dk[8][4], dq[8][4];
        wg_fence_u(pa), wg_fence_u(da);
        wg_fence();
        {
            uint64_t od[8], qd[8]; /* dO and Q read N-major: rows = queries, the k index */
            fw_descs(od, sO, 1), fw_descs(qd, sQ, 1);
            fw_mma<1, 0, 8>(dv, pa, od);
            fw_mma<1, 0, 8>(dk, da, qd);
            wg_commit();
        }
        __syncthreads(); /* both warpgroups' dSᵀ halves */
        /* the next head into the other buffer, once the TMA stores of the last one's outputs from
         * there have read it (a wait here rather than at the head's start, where it held up the
         * first warpgroup's products) */
        if (threadIdx.x == 0) tma_wait_read();
        if (hd + (int)gridDim.x < heads)
            fbs_fetch(&tmq, &tmo, bufs + nb * FBS_BUF, full + nb, lse, dr, hd + gridDim.x, T, H);
        wg_fence();
        {
            uint64_t kb = wg_desc(opaque(sK), 8192, 1024);
            uint64_t a0 = wg_desc(opaque(sDS) + wg * 64 * FA_D, 16, 1024);
            uint64_t a1 = wg_desc(opaque(sDS) + FBS_TILE + wg * 64 * FA_D, 16, 1024);
            wg_m64n64k16_ss<0, 1>(dq, a0, kb);
#pragma unroll
            for (int k = 1; k < 4; k++) wg_m64n64k16_ss<1, 1>(dq, a0 + 2 * k, kb + 128 * k);
#pragma unroll
            for (int k = 0; k < 4; k++) wg_m64n64k16_ss<1, 1>(dq, a1 + 2 * k, kb + 128 * (4 + k));
            wg_commit();
        }
        wg_wait<0>();
        wg_fence_f(dv), wg_fence_f(dk), wg_fence_f(dq), wg_fence_u(pa), wg_fence_u(da);
        /* the outputs through this head's q, k and v tiles (every product of both warpgroups
         * done with them) and out by TMA (rows past T dropped); the copies' reads are waited for
         * before the buffer takes the head after next */
        __syncthreads();
        int r0 = wg * 64 + w * 16; /* the warp's keys (dK, dV) and queries (dQ) */
        {
            uint32_t ov[8][2];
            fs_pack(ov, dv, 1.f, 1.f);
            fs_stage(sV, ov, r0);
        }
        {
            uint32_t ok[8][2], oq[8][2];
            fbs_pack(ok, oq, dk, dq, scale, r0, T, rcs ? cs : nullptr, sn, ts, tab);
            fs_stage(sK, ok, r0);
            fs_stage(sQ, oq, r0);
        }
        fence_async_smem();
        __syncthreads();
        if (threadIdx.x == 0) {
            tma_store_3d(&tmd, sQ, h * FA_D, 0, b);
            tma_store_3d(&tmd, sK, (H + h) * FA_D, 0, b);
            tma_store_3d(&tmd, sV, (2 * H + h) * FA_D, 0, b);
            tma_commit();
        }
    }
    if (threadIdx.x == 0) tma_wait();
#else
    __trap();
#endif
}

/* The short backward, where it runs (T ≤ 128, the TMA encoder, 16-byte aligned operands): 1 */
static int fbs_launch(cudaStream_t st, void *encode, bf16 *dqkv, const bf16 *qkv, const bf16 *dout, const float *lse,
                      const float *dr, int B, int T, int H, float scale, const float *rcs, const float *rsn) {
    CUtensorMap tmq, tmo, tmd;
    if (!encode || T > FBS_R || !head_map(encode, &tmq, qkv, 3 * H * FA_D, B, T, FBS_R) ||
        !head_map(encode, &tmo, dout, H * FA_D, B, T, FBS_R) || !head_map(encode, &tmd, dqkv, 3 * H * FA_D, B, T, FBS_R))
        return 0;
    int tab = rcs && aligned16(rcs) && aligned16(rsn) && FBS_SMEM(T) <= FBS_MAX;
    int heads = B * H, blocks = device_sms(1);
    if (blocks > heads) blocks = heads;
    flash_bwd_short_kernel<<<blocks, 256, FBS_SMEM(tab ? T : 0), st>>>(tmq, tmo, tmd, lse, dr, B, T, H,
                                                                      scale * LOG2E, scale, rcs, rsn, tab);
    return 1;
}
#endif

#endif
