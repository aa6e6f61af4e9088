/* token_mlp.cu — mlp_t's token mixer forward in one Hopper kernel, for the calls whose
 * activations the backward never reads (the recursion's no-grad cycles: two of every three
 * forward calls of a sudoku_mlp step). The unfused path moves each (B, T, D) input through
 * memory five times: transposed to (B, D, Tp), the gate/up product and SwiGLU (B·D × It),
 * the down product (B·D × Tp), the norm, transposed back. Here a warpgroup takes 64 channels
 * of one sample (64 rows (b, d) of the transposed problem) and does it all on chip:
 *   x tile     the (Tp × 64) slice of x[b] by TMA, read by the first product as it lies
 *              (an M-major operand: no transpose anywhere)
 *   per 64 of It:  gu (64 × 128) = xᵀ·[W_g; W_u]ᵀ (wgmma, both operands from shared memory),
 *              act = SwiGLU(bf16(gate), bf16(up)) rounded to bf16 in registers, which are
 *              straight away the A operand of out (64 × 128) += act·W_dnᵀ
 *   epilogue   y = rms(x + bf16(out)) over the T positions of each row (a row's values lie in
 *              the 4 lanes of a quad), written over the x tile in its own layout and stored
 *              to (B, T, D) by TMA; rstd per row.
 * A producer warp streams the weights, It/64 chunks a pass, through two rings the block's 2
 * warpgroups share: each chunk's gate and up rows × Tp (32 KiB, 3 stages), freed as soon as both
 * warpgroups' gate/up products are done, and its down rows' 64 columns (16 KiB, 4 stages); a
 * stage is refilled once all 8 consumer warps have arrived on its empty barrier. Blocks are
 * persistent, their warpgroups taking tiles in passes of the same length.
 * The roundings are the unfused path's: gate, up, act and the down product in bf16, the
 * residual sum in bf16, the norm's statistics in fp32; only the order of the fp32 sums differs
 * (cuBLASLt's down product and the norm kernel's tree), so results agree to a bf16 ulp. */
#include "mma.cuh"

#define TM_WG 2                   /* warpgroups a block, 64 rows each */
#define TM_NG 3                   /* stages of the gate/up weights' chunks (32 KiB) */
#define TM_ND 4                   /* stages of the down weights' chunks (16 KiB) */
#define TM_XT (128 * 128)         /* bytes of an x tile: 128 positions × 64 channels */
#define TM_GST (32 * 1024)        /* gate k0, up k0, gate k1, up k1: 8 KiB each */
#define TM_DST (16 * 1024)        /* the down rows' 64 columns */
#define TM_SMEM ((size_t)TM_NG * TM_GST + (size_t)TM_ND * TM_DST + (size_t)TM_WG * 2 * TM_XT + 1024 + 256)
#define TM_TMAX 128               /* Tp: two 64-position chunks of K, N = 128 */

/* 2 warpgroups and the producer warp: 3 warps on a scheduler's share of the registers hold a
 * thread to 168 (the 104-column build fits without spilling) */
#define TM_BOUNDS __launch_bounds__(128 * TM_WG + 32, 1)

#if defined(TRM_CUDA_SM90A)
struct tm_maps {
    CUtensorMap x, y, wgu, wdn;
};
#endif

#if defined(TRM_WGMMA)

/* weight chunk c (of It/64, repeating every pass) into a stage: its gate and up rows (ring 0),
 * or its down rows' columns (ring 1, `bytes` of them) */
__device__ __forceinline__ void tm_load_w(int ring, unsigned char *stage, const tm_maps *mp, uint64_t *bar, int c,
                                          int nch, int It, int bytes) {
    int j = (c % nch) * 64;
    if (ring) {
        mbar_expect(bar, bytes);
        tma_load_2d_nb(stage, &mp->wdn, j, 0, bar);
        return;
    }
    mbar_expect(bar, TM_GST);
    tma_load_2d_nb(stage, &mp->wgu, 0, j, bar);
    tma_load_2d_nb(stage + 8192, &mp->wgu, 0, It + j, bar);
    tma_load_2d_nb(stage + 16384, &mp->wgu, 64, j, bar);
    tma_load_2d_nb(stage + 24576, &mp->wgu, 64, It + j, bar);
}
/* the x tile of row tile `tile` (64 channels of one sample: positions 0–127) */
__device__ __forceinline__ void tm_load_x(unsigned char *xt, const tm_maps *mp, uint64_t *bar, int tile, int dtiles) {
    int b = tile / dtiles, d0 = (tile % dtiles) * 64;
    mbar_expect(bar, TM_XT);
    tma_load_3d_nb(xt, &mp->x, d0, 0, b, bar);
    tma_load_3d_nb(xt + 8192, &mp->x, d0, 64, b, bar);
}
/* byte offset of (position t, channel r) in an x tile: rows of 128 bytes, 16-byte chunks
 * swizzled by the row (TMA's 128-byte swizzle) */
__device__ __forceinline__ int tm_xoff(int t, int r) { return t * 128 + ((((r >> 3) ^ (t & 7))) << 4) + (r & 7) * 2; }
#endif

#if defined(TRM_CUDA_SM90A)
/* NO: the down product's columns (Tp rounded up to 104 or 128) */
template <int NO>
__global__ void TM_BOUNDS
    token_mlp_fwd_kernel(const __grid_constant__ tm_maps mp, float *rstd, int mtiles, int dtiles, int npass, int It,
                         int T, int Tp, float eps) {
#if defined(TRM_WGMMA)
    /* NJ column tiles of the down product; KS k-steps of the first (positions past Tp are zeros
     * in x and in the weights' boxes) */
    constexpr int NJ = NO / 8, KS = (NO + 15) / 16, DBYTES = NO * 128;
    extern __shared__ unsigned char tm_raw[];
    unsigned char *sW = smem_align1024(tm_raw);
    unsigned char *sD = sW + TM_NG * TM_GST, *sX = sD + TM_ND * TM_DST; /* warpgroup w's x tiles: sX + (2w + i)·TM_XT */
    uint64_t *full = (uint64_t *)(sX + TM_WG * 2 * TM_XT), *empty = full + TM_NG + TM_ND;
    uint64_t *xfull = empty + TM_NG + TM_ND;
    /* ring r (0: gate/up, 1: down): its stages and their barriers */
    const int rn[2] = {TM_NG, TM_ND};
    unsigned char *const rbuf[2] = {sW, sD};
    const int rsz[2] = {TM_GST, TM_DST};
    uint64_t *const rfull[2] = {full, full + TM_NG}, *const rempty[2] = {empty, empty + TM_NG};
    int wg = threadIdx.x >> 7, tid = threadIdx.x & 127, nch = It / 64, total = npass * nch;
    if (threadIdx.x == 0) {
        for (int i = 0; i < TM_NG + TM_ND; i++) mbar_init(full + i, 1), mbar_init(empty + i, 4 * TM_WG);
        for (int i = 0; i < TM_WG * 2; i++) mbar_init(xfull + i, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (wg == TM_WG) { /* the producer warp: each ring's chunks in turn, a stage refilled once
                        * every consumer warp has given it back */
        if (tid == 0)
            for (int c = 0; c < total; c++)
                for (int r = 0; r < 2; r++) {
                    int st = c % rn[r];
                    if (c >= rn[r]) mbar_wait(rempty[r] + st, (c / rn[r] - 1) & 1);
                    tm_load_w(r, rbuf[r] + st * rsz[r], &mp, rfull[r] + st, c, nch, It, DBYTES);
                }
        return;
    }
    int tile0 = blockIdx.x * TM_WG + wg;
    if (tid == 0 && tile0 < mtiles) tm_load_x(sX + (2 * wg) * TM_XT, &mp, xfull + 2 * wg, tile0, dtiles);
    int l = threadIdx.x & 31, warp = tid >> 5, g = l >> 2, t4 = l & 3;
    float acc[16][4], out[16][4];
    uint32_t a[4][4];
    /* chunk cg's gate/up stage and chunk cd's down stage (−1: none) back to the producer, by
     * each warp once its share of the products reading them is done (no barrier between the
     * warpgroup's warps) */
    auto release = [&](int cg, int cd) {
        if (l == 0) {
            if (cg >= 0) mbar_arrive(rempty[0] + cg % TM_NG);
            if (cd >= 0) mbar_arrive(rempty[1] + cd % TM_ND);
        }
    };
    auto wait_full = [&](int r, int c) { mbar_wait(rfull[r] + c % rn[r], (c / rn[r]) & 1); };
    /* gu of chunk c (once its stage is full) into acc, issued */
    auto gemm1 = [&](uint64_t dx, int c) {
        unsigned char *st = sW + (c % TM_NG) * TM_GST;
        wait_full(0, c);
        wg_fence_f(acc);
        wg_fence();
#pragma unroll
        for (int k = 0; k < KS; k++)
            wg_m64n128k16_ss_ta(acc, dx + 128 * k, wg_desc(st + (k >> 2) * 16384, 16, 1024) + 2 * (k & 3), k);
    };
    /* chunk c's act = SwiGLU of the bf16 gate (columns 0–63) and up (64–127) sums in acc, packed
     * as the A fragments of its down product (k-step kk: act columns 16kk..), which is issued;
     * the pass's first chunk starts out from zero */
    auto swiglu_down = [&](int c, int first) {
        wait_full(1, c);
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                float2 gg = __bfloat1622float2(__floats2bfloat162_rn(acc[j][2 * hr], acc[j][2 * hr + 1]));
                float2 uu = __bfloat1622float2(__floats2bfloat162_rn(acc[j + 8][2 * hr], acc[j + 8][2 * hr + 1]));
                a[j >> 1][(j & 1) * 2 + hr] = pack_bf16(silu_fast(gg.x) * uu.x, silu_fast(gg.y) * uu.y);
            }
        wg_fence_u(a);
        wg_fence_first<NJ>(out);
        wg_fence();
        uint64_t dd = wg_desc(sD + (c % TM_ND) * TM_DST, 16, 1024);
#pragma unroll
        for (int kk = 0; kk < 4; kk++) wg_m64nk16_rs<NO>(out, a[kk], dd + 2 * kk, !first || kk);
    };
    for (int p = 0; p < npass; p++) {
        int tile = (p * gridDim.x + blockIdx.x) * TM_WG + wg, c0 = p * nch;
        unsigned char *xt = sX + (2 * wg + (p & 1)) * TM_XT;
        if (tid == 0 && p + 1 < npass) { /* the next pass's tile, into the other x tile */
            int nt = tile + gridDim.x * TM_WG;
            if (nt < mtiles) {
                tma_wait_read(); /* the store out of that tile (two passes back) has read it */
                tm_load_x(sX + (2 * wg + ((p + 1) & 1)) * TM_XT, &mp, xfull + 2 * wg + ((p + 1) & 1), nt, dtiles);
            }
        }
        if (tile >= mtiles) { /* idle this pass: give each chunk back once it has arrived */
            for (int jc = 0; jc < nch; jc++) wait_full(0, c0 + jc), wait_full(1, c0 + jc), release(c0 + jc, c0 + jc);
            continue;
        }
        mbar_wait(xfull + 2 * wg + (p & 1), (p >> 1) & 1);
        uint64_t dx = wg_desc(xt, 8192, 1024);
        /* f(element, hr, its x in the tile, position) over this thread's elements of the down
         * product: out[j][2hr + e] is row r = 16·warp + g + 8hr (a channel), position c = 8j +
         * 2·t4 + e, whose x (and then y) lies at tm_xoff(c, r) */
        auto each_out = [&](auto f) {
#pragma unroll
            for (int j = 0; j < NJ; j++)
#pragma unroll
                for (int hr = 0; hr < 2; hr++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        int r = warp * 16 + g + 8 * hr, c = 8 * j + 2 * t4 + e;
                        f(out[j][2 * hr + e], hr, reinterpret_cast<bf16 *>(xt + tm_xoff(c, r)), c);
                    }
        };
        gemm1(dx, c0);
        wg_commit();
        /* chunk jc: its gu arrives with the previous chunk's down product (the wait frees both
         * stages); then its SwiGLU, and its down product and the next chunk's gu issued together */
        for (int jc = 0; jc < nch; jc++) {
            int c = c0 + jc;
            wg_wait<0>();
            wg_fence_f(acc), wg_fence_first<NJ>(out), wg_fence_u(a);
            release(c, jc ? c - 1 : -1);
            swiglu_down(c, jc == 0);
            if (jc + 1 < nch) gemm1(dx, c + 1);
            wg_commit();
        }
        wg_wait<0>();
        wg_fence_f(acc), wg_fence_first<NJ>(out), wg_fence_u(a);
        release(-1, c0 + nch - 1);
        /* y = rms(x + bf16(out)) over the T positions */
        float ss[2] = {0.f, 0.f};
        each_out([&](float &o, int hr, bf16 *xv, int c) {
            float v = __bfloat162float(__float2bfloat16_rn(__bfloat162float(*xv) + __bfloat162float(__float2bfloat16_rn(o))));
            o = v = c < T ? v : 0.f;
            ss[hr] += v * v;
        });
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            ss[hr] += __shfl_xor_sync(0xffffffffu, ss[hr], 1);
            ss[hr] += __shfl_xor_sync(0xffffffffu, ss[hr], 2);
            ss[hr] = rsqrtf(ss[hr] / T + eps);
        }
        if (t4 == 0)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) rstd[(size_t)tile * 64 + warp * 16 + g + 8 * hr] = ss[hr];
        each_out([&](float &o, int hr, bf16 *xv, int) { *xv = __float2bfloat16_rn(o * ss[hr]); });
        fence_async_smem(); /* these stores before the TMA store reads the tile */
        wg_bar(wg);
        if (tid == 0) {
            int b = tile / dtiles, d0 = (tile % dtiles) * 64;
            tma_store_3d(&mp.y, xt, d0, 0, b);
            if (T > 64) tma_store_3d(&mp.y, xt + 8192, d0, 64, b);
            tma_commit();
        }
    }
    if (tid == 0) tma_wait();
#endif
}

/* a (D, T, B) activation as 64 × 64 × 1 boxes (64 channels × 64 positions of one sample) */
static int tm_map_btd(CUtensorMap *tm, void *encode, const void *p, int B, int T, int D) {
    cuuint64_t dim[3] = {(cuuint64_t)D, (cuuint64_t)T, (cuuint64_t)B};
    cuuint64_t stride[2] = {(cuuint64_t)D * 2, (cuuint64_t)T * D * 2};
    cuuint32_t box[3] = {64, 64, 1};
    return tma_map_bf16(tm, encode, p, 3, dim, stride, box);
}
#endif

int k_token_mlp_fwd(cudaStream_t st, void *tma_encode, void *y, float *rstd, const void *x, const void *wgu, int ldgu,
                    const void *wdn, int lddn, int B, int T, int Tp, int D, int It, float eps) {
#if defined(TRM_CUDA_SM90A)
    if (!tma_encode || !rstd || B <= 0 || T <= 0 || Tp < T || Tp > TM_TMAX || Tp % 8 || D <= 0 || D % 64 ||
        It <= 0 || It % 64 || ldgu < Tp || ldgu % 8 || lddn < It || lddn % 8 || !aligned16(y) || !aligned16(x) ||
        !aligned16(wgu) || !aligned16(wdn))
        return 0;
    int no = Tp <= 104 ? 104 : 128;
    /* the shared memory limit for the current device (cheap; a run may drive several) */
    if (!smem_limit(no == 104 ? token_mlp_fwd_kernel<104> : token_mlp_fwd_kernel<128>, TM_SMEM)) {
        cudaGetLastError();
        return 0;
    }
    tm_maps mp;
    if (!tm_map_btd(&mp.x, tma_encode, x, B, T, D) || !tm_map_btd(&mp.y, tma_encode, y, B, T, D) ||
        !tma_map_2d(&mp.wgu, tma_encode, wgu, 2 * It, Tp, ldgu, 64) ||
        !tma_map_2d(&mp.wdn, tma_encode, wdn, Tp, It, lddn, no))
        return 0;
    int sms = device_sms(132);
    int dtiles = D / 64, mtiles = B * dtiles;
    int npass = (mtiles + sms * TM_WG - 1) / (sms * TM_WG);
    int grid = (mtiles + npass * TM_WG - 1) / (npass * TM_WG); /* passes of even length */
    if (no == 104)
        token_mlp_fwd_kernel<104><<<grid, 128 * TM_WG + 32, TM_SMEM, st>>>(mp, rstd, mtiles, dtiles, npass, It, T, Tp, eps);
    else
        token_mlp_fwd_kernel<128><<<grid, 128 * TM_WG + 32, TM_SMEM, st>>>(mp, rstd, mtiles, dtiles, npass, It, T, Tp, eps);
    /* a launch the device refused ran nothing: the caller's unfused ops take the call */
    return cudaGetLastError() == cudaSuccess;
#else
    (void)st, (void)tma_encode, (void)y, (void)rstd, (void)x, (void)wgu, (void)ldgu, (void)wdn, (void)lddn, (void)B,
        (void)T, (void)Tp, (void)D, (void)It, (void)eps;
    return 0;
#endif
}
