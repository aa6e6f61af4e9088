/* flash_long.cuh — the attention forward for long heads (T > 128: maze's 916) fed by TMA, and
 * its launch: included by attention.cu after flash_short.cuh (whose qkv_head_map it uses), once
 * the tile macros, fw_* helpers and fw_finish are defined. Kept apart so that attention.cu
 * stays within the tree's file size. */
#ifndef TRM_FLASH_LONG_CUH
#define TRM_FLASH_LONG_CUH

/* ---- the forward for long heads by TMA ----------------------------------------------------
 * As flash_fwd_wg_kernel<2> (each warpgroup 64 queries, 64-key tiles, the same products and
 * softmax), but no thread copies and nothing synchronises the block after the start. Each
 * K/V tile comes as two TMA boxes (128-byte swizzle; rows past T read as zeros) into a ring of
 * FL_NS stages, counted on the stage's mbarrier. The warp that releases a stage last (a counter
 * per stage in shared memory) issues its refill, FL_NS tiles ahead: no warp waits for another,
 * so the warpgroups drift apart and one's softmax runs beside the other's products. In the
 * cp.async kernel every thread issued its rows' copies and the block met at a barrier each
 * tile, keeping both warpgroups' softmax in step on the same exponential units. Tried: 128-key
 * tiles with three warpgroups (192 queries) a block, one block an SM, Q read by descriptor
 * (FlashAttention-3's tiles for head dim 64): 922 µs a maze call against this kernel's 878
 * (Nsight Compute, H200), the same step time. */
#define FL_NS 4
#define FL_WG 2
/* the query tiles, the ring, its FL_NS barriers and the queries', FL_NS counters, the slack */
#define FL_SMEM(WG) ((size_t)((WG) + 2 * FL_NS) * FW_TILE * 2 + (FL_NS + 1) * 8 + FL_NS * 4 + 1024)

#if defined(TRM_CUDA_SM90A)
#if defined(TRM_WGMMA)
/* K and V of key tile i (64 rows of sample b, head h) into its stage, counted on its barrier */
__device__ __forceinline__ void fl_issue(bf16 *sKV, uint64_t *full, const CUtensorMap *tm, int i, int b, int h, int H) {
    int sl = i % FL_NS;
    bf16 *st = sKV + sl * 2 * FW_TILE;
    mbar_expect(full + sl, 2 * FW_TILE * 2);
    tma_load_3d_nb(st, tm, (H + h) * FA_D, i * FA_T, b, full + sl);
    tma_load_3d_nb(st + FW_TILE, tm, (2 * H + h) * FA_D, i * FA_T, b, full + sl);
}
/* A warp done with key tile i (its products waited for): the last of the block's `warps` to
 * say so refills the stage with tile i + FL_NS. The count is acquire-release, so the refill
 * is ordered after every warp's reads, as an mbarrier arrival and wait would order it. It only
 * grows, by `warps` a use of the stage, so the last arrival of use i / FL_NS reads that many
 * times the use's number (a remainder by `warps` cost an integer division a tile: 5% of the
 * kernel's time). */
__device__ __forceinline__ void fl_release(bf16 *sKV, uint64_t *full, unsigned *cnt, const CUtensorMap *tm, int i,
                                           int n, int warps, int b, int h, int H) {
    if ((threadIdx.x & 31) || i + FL_NS >= n) return;
    unsigned old;
    asm volatile("atom.acq_rel.cta.shared::cta.add.u32 %0, [%1], 1;\n"
                 : "=r"(old)
                 : "r"((uint32_t)__cvta_generic_to_shared(cnt + i % FL_NS))
                 : "memory");
    if (old + 1 == (unsigned)(warps * (i / FL_NS + 1))) fl_issue(sKV, full, tm, i + FL_NS, b, h, H);
}
#endif

template <int WG>
__global__ void __launch_bounds__(128 * WG, 2)
    flash_fwd_long_kernel(const __grid_constant__ CUtensorMap tm, bf16 *out, float *lse, int T, int H, float sl2) {
#if defined(TRM_WGMMA)
    extern __shared__ unsigned char fl_raw[];
    bf16 *sQ = (bf16 *)smem_align1024(fl_raw), *sKV = sQ + WG * FW_TILE;
    uint64_t *full = (uint64_t *)(sKV + 2 * FL_NS * FW_TILE), *qbar = full + FL_NS;
    unsigned *cnt = (unsigned *)(qbar + 1);
    int h = blockIdx.y, b = blockIdx.z, wg = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3;
    int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    int q0 = blockIdx.x * 64 * WG, n = (T + FA_T - 1) / FA_T;
    int act = min(WG, (T - q0 + 63) / 64); /* warpgroups with a query below T */
    if (threadIdx.x == 0) {
        for (int i = 0; i < FL_NS; i++) mbar_init(full + i, 1), cnt[i] = 0;
        mbar_init(qbar, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        fence_async_smem(); /* the barriers seen initialised by the TMA copies too */
        mbar_expect(qbar, act * FW_TILE * 2);
        for (int i = 0; i < act; i++) tma_load_3d_nb(sQ + i * FW_TILE, &tm, h * FA_D, q0 + 64 * i, b, qbar);
        for (int i = 0; i < FL_NS && i < n; i++) fl_issue(sKV, full, &tm, i, b, h, H);
    }
    __syncthreads(); /* the barriers and counters initialised */
    if (wg >= act) return;
    float o[8][4], s[8][4], ml[4] = {-INFINITY, -INFINITY, 0.f, 0.f}, c[2];
    uint32_t qa[4][4], p[4][4];
    fa_zero(o);
    mbar_wait(qbar, 0);
    fs_afrag(qa, sQ, wg * 64 + w * 16);
    mbar_wait(full, 0);
    fw_first(s, ml, c, p, qa, sKV, T, sl2);
    for (int it = 1; it < n; it++) {
        mbar_wait(full + it % FL_NS, (it / FL_NS) & 1);
        fw_next(o, s, ml, c, p, qa, sKV + (it % FL_NS) * 2 * FW_TILE,
                sKV + ((it - 1) % FL_NS) * 2 * FW_TILE + FW_TILE, it * FA_T, T, sl2);
        fl_release(sKV, full, cnt, &tm, it - 1, n, 4 * act, b, h, H); /* K and V of it - 1 read */
    }
    fw_last(o, p, sKV + ((n - 1) % FL_NS) * 2 * FW_TILE + FW_TILE);
    fw_finish(out, lse, o, ml, b, h, T, H, q0 + wg * 64 + w * 16, g, t, sl2);
#else
    __trap();
#endif
}

#endif

/* the forward by TMA where it runs (sm_90a, an encoder, T > 128); 0, nothing done, elsewhere */
static int fl_launch(cudaStream_t st, void *tma_encode, bf16 *out, float *lse, const bf16 *qkv, int B, int T, int H,
                     float sl2) {
#if defined(TRM_CUDA_SM90A)
    CUtensorMap tm;
    if (!tma_encode || T <= FS_ROWS || !qkv_head_map(tma_encode, &tm, qkv, B, T, H, FA_T)) return 0;
    dim3 grid((unsigned)((T + 64 * FL_WG - 1) / (64 * FL_WG)), (unsigned)H, (unsigned)B);
    flash_fwd_long_kernel<FL_WG><<<grid, 128 * FL_WG, FL_SMEM(FL_WG), st>>>(tm, out, lse, T, H, sl2);
    return 1;
#else
    (void)st, (void)tma_encode, (void)out, (void)lse, (void)qkv, (void)B, (void)T, (void)H, (void)sl2;
    return 0;
#endif
}

#endif
