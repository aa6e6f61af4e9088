/* linear_norm.cu — the output and down projections with the residual add and RMSNorm in the
 * product's epilogue (backend.h: linear_norm_fwd): y = rms(res + x·Wᵀ) over D = 512 values a
 * row. Apart, the product goes out to HBM and rmsnorm_fwd reads it back with the residual and
 * writes y: three row passes where this kernel makes two (res in, y out).
 *
 * A cluster of two blocks holds 128 rows × all 512 columns: each block a 256-column half. Per
 * block: two consumer warpgroups of 64 rows × 256 (m64n256k16 products, fp32 sums in
 * registers); one producer thread streaming x's and W's 64-column chunks through a ring of
 * stages by TMA, and the tile's residual half into a buffer of its own; and three storer warps.
 * The consumers' epilogue rounds the product to bf16 as the GEMM would, adds the residual
 * (rounded as rmsnorm_fwd rounds it), leaves that sum in the buffer in place of the residual,
 * and sends the sum of squares of its half of each row to the other block's shared memory (an
 * mbarrier there counts them); then it goes on to the next tile's products. The storers scale
 * the rows by the two halves' total (the same bits in both blocks) and send y out by TMA, and
 * the buffer takes the next residual. Clusters are persistent: cluster c takes row tiles c, c +
 * clusters, ..., so that the next tile's chunks load during an epilogue. */
#include "common.cuh"
#include "mma.cuh"

#define LN_BM 128                           /* rows a tile (two warpgroups of 64) */
#define LN_BN 256                           /* columns a block: half of D */
#define LN_D 512                            /* the one width taken */
#define LN_NS 3                             /* stages in the ring */
#define LN_A (LN_BM * 128)                  /* bytes of x's chunk: 128 rows of 64 bf16 */
#define LN_W (LN_BN * 128)                  /* bytes of W's chunk: 256 rows of 64 bf16 */
#define LN_STAGE (LN_A + LN_W)
#define LN_RES (LN_BM * LN_BN * 2)          /* the residual (then output) half tile: 4 boxes */
#define LN_BOX (LN_BM * 128)                /* one box of 64 columns × 128 rows */
#define LN_THREADS 384                      /* two consumer warpgroups and the producer's */
#define LN_STORERS 96                       /* warps 9–11: the scaling and the store */
#define LN_SMEM (1024 + LN_NS * LN_STAGE + LN_RES + 5 * LN_BM * 4 + 16 * 8)

#if defined(TRM_CUDA_SM90A)
#if defined(TRM_WGMMA)
__device__ __forceinline__ uint32_t ln_cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
/* every thread of both blocks: what either wrote before is seen by both after */
__device__ __forceinline__ void ln_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/* the shared address of p in block `rank` of the cluster */
__device__ __forceinline__ uint32_t ln_peer(const void *p, uint32_t rank) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p), r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}
__device__ __forceinline__ void ln_st_peer(uint32_t a, float v) {
    asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(a), "f"(v) : "memory");
}
/* one arrival on the other block's mbarrier, releasing this thread's stores there */
__device__ __forceinline__ void ln_arrive_peer(uint32_t bar) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* wait for a phase completed by the other block's arrivals, acquiring what they released */
__device__ __forceinline__ void ln_wait_cluster(uint64_t *bar, int parity) {
    asm volatile("{\n.reg .pred p;\nWAIT_%=:\n"
                 "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra WAIT_%=;\n}\n" ::"r"((uint32_t)__cvta_generic_to_shared(bar)), "r"(parity)
                 : "memory");
}
/* bf16 pairs: a + b rounded once to bf16, as fp32's sum of two bf16 values rounded to bf16 (that
 * sum is exact unless the smaller is far below the larger's last bit, where both round alike) */
__device__ __forceinline__ uint32_t ln_add2(uint32_t a, uint32_t b) {
    uint32_t r;
    asm("add.rn.bf16x2 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

/* the tile's residual half into the buffer: 4 boxes of 64 columns */
__device__ __forceinline__ void ln_load_res(const CUtensorMap *tmr, unsigned char *rbuf, uint64_t *rfull, int n0,
                                            int tile) {
    mbar_expect(rfull, LN_RES);
#pragma unroll
    for (int b = 0; b < LN_BN / 64; b++) tma_load_2d_nb(rbuf + b * LN_BOX, tmr, n0 + 64 * b, tile * LN_BM, rfull);
}

/* The producer: for each of the cluster's tiles, its K chunks into the ring (a stage refilled
 * once all 8 consumer warps are past it) and the tile's residual half, once the storers have
 * sent the last tile's y out of that buffer. The chunks do not wait for that: the residual goes
 * out after the first chunk issued past the first stages that finds the buffer free, or after
 * the tile's last chunk. */
__device__ void ln_produce(const CUtensorMap *tmx, const CUtensorMap *tmw, const CUtensorMap *tmr,
                           unsigned char *ring, unsigned char *rbuf, uint64_t *full, uint64_t *empty,
                           uint64_t *rfull, uint64_t *rempty, int n0, int first, int step, int mtiles, int KC) {
    int slot = 0, phase = 0, rphase = 0;
    for (int tile = first; tile < mtiles; tile += step)
        tma_ring_tile<LN_NS, LN_STAGE, LN_A>([&] { ln_load_res(tmr, rbuf, rfull, n0, tile); }, tmx, tile * LN_BM, tmw,
                                             n0, ring, full, empty, rempty, KC, slot, phase, rphase);
}

/* The consumers' epilogue of warpgroup wg's 64 rows: the sums s = res + bf16(d) in place of the
 * residual, and each row's sum of squares over this block's half, kept (xown) and sent to the
 * other block (xpart there, an arrival on its xbar); the storers do the rest. The thread's
 * values are rows r and r + 8 (r = its warp's 16 rows, lane / 4), columns 8j + 2(lane % 4) and
 * the next, j < 32. In the residual buffer they lie in box j / 8, row r, 16-byte chunk (j % 8)
 * ^ (r % 8) (the 128-byte swizzle; r and r + 8 alike), the lane's 4 bytes in it. The sums are
 * bf16 pairs, one add.bf16x2 each (as the GEMM's bf16 output plus the residual, rounded as
 * rmsnorm_fwd rounds it); only the squares are fp32. */
__device__ __forceinline__ void ln_sums(float (&d)[32][4], unsigned char *rbuf, float *xown, float *xpart,
                                        uint64_t *xbar, int it, uint32_t peer, int wg, int lane, int warp) {
    int r0 = wg * 64 + warp * 16 + (lane >> 2);
    uint32_t base = (uint32_t)__cvta_generic_to_shared(rbuf) + r0 * 128 + 4 * (lane & 3), col[8];
#pragma unroll
    for (int c = 0; c < 8; c++) col[c] = base + ((c ^ (r0 & 7)) << 4);
    float ss[2] = {0.f, 0.f};
#pragma unroll
    for (int j = 0; j < 32; j++) {
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            uint32_t at = col[j & 7] + (j >> 3) * LN_BOX + hr * 1024;
            uint32_t v = ln_add2(pack_bf16(d[j][2 * hr], d[j][2 * hr + 1]), lds_b32(at));
            float a = bf16_lo(v), b = bf16_hi(v);
            ss[hr] += a * a + b * b;
            sts_b32(at, v);
        }
    }
    int buf = it & 1;
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        ss[hr] += __shfl_xor_sync(0xffffffffu, ss[hr], 1);
        ss[hr] += __shfl_xor_sync(0xffffffffu, ss[hr], 2);
    }
    if ((lane & 3) == 0) {
        xown[buf * LN_BM + r0] = ss[0], xown[buf * LN_BM + r0 + 8] = ss[1];
        ln_st_peer(ln_peer(xpart + buf * LN_BM + r0, peer), ss[0]);
        ln_st_peer(ln_peer(xpart + buf * LN_BM + r0 + 8, peer), ss[1]);
        ln_arrive_peer(ln_peer(xbar + buf, peer));
    }
}

/* the storers' named barrier (ids 1 and 2 are the consumer warpgroups') */
__device__ __forceinline__ void ln_bar_storers() { named_bar<3, LN_STORERS>(); }

/* The storers (thread t of LN_STORERS): for each tile, once both consumer warpgroups have left
 * their sums in the buffer (sready) and the other block's half sums of squares have come (xbar),
 * each row's scale (rstd, the same bits in both blocks: the two halves' sum), y = s·scale in
 * place, 16 bytes (8 values of one row) at a time, and the half tile out by TMA; then the buffer
 * is the producer's again (rempty). Meanwhile the consumers run the next tile's products. */
__device__ void ln_store(const CUtensorMap *tmy, unsigned char *rbuf, const float *xown, const float *xpart,
                         float *scs, uint64_t *sready, uint64_t *xbar, uint64_t *rempty, float *rstd, int rows,
                         int n0, int first, int step, int mtiles, float eps, int t) {
    uint32_t base = (uint32_t)__cvta_generic_to_shared(rbuf);
    int it = 0;
    for (int tile = first; tile < mtiles; tile += step, it++) {
        int buf = it & 1, row0 = tile * LN_BM;
        mbar_wait(sready, it & 1);
        ln_wait_cluster(xbar + buf, (it >> 1) & 1);
        for (int r = t; r < LN_BM; r += LN_STORERS) {
            float sc = rsqrtf((xown[buf * LN_BM + r] + xpart[buf * LN_BM + r]) / (float)LN_D + eps);
            scs[r] = sc;
            if (rstd && row0 + r < rows) rstd[row0 + r] = sc;
        }
        ln_bar_storers();
#pragma unroll 2
        for (int v = t; v < LN_RES / 16; v += LN_STORERS) {
            uint32_t at = base + 16 * v, q[4];
            float sc = scs[(v >> 3) & (LN_BM - 1)];
            lds_v4(at, q);
#pragma unroll
            for (int e = 0; e < 4; e++) q[e] = pack_bf16(bf16_lo(q[e]) * sc, bf16_hi(q[e]) * sc);
            sts_v4(at, q);
        }
        storers_send<3, LN_STORERS>(
            [&] {
#pragma unroll
                for (int b = 0; b < LN_BN / 64; b++) tma_store_2d(tmy, rbuf + b * LN_BOX, n0 + 64 * b, row0);
            },
            rempty, t);
    }
    if (t == 0) tma_wait();
}
#endif

/* blockIdx.x / 2 is the cluster, whose rank (0, 1) is the column half n0 = 256·rank */
__global__ void __launch_bounds__(LN_THREADS, 1)
    linear_norm_kernel(const __grid_constant__ CUtensorMap tmx, const __grid_constant__ CUtensorMap tmw,
                       const __grid_constant__ CUtensorMap tmr, const __grid_constant__ CUtensorMap tmy, float *rstd,
                       int rows, int K, float eps) {
#if defined(TRM_WGMMA)
    extern __shared__ unsigned char ln_raw[];
    unsigned char *ring = smem_align1024(ln_raw); /* swizzle atoms */
    unsigned char *rbuf = ring + LN_NS * LN_STAGE;
    float *xpart = (float *)(rbuf + LN_RES); /* [2][128]: the other block's sums, by tile parity */
    float *xown = xpart + 2 * LN_BM, *scs = xown + 2 * LN_BM; /* [2][128] this block's; [128] scales */
    uint64_t *full = (uint64_t *)(scs + LN_BM), *empty = full + LN_NS, *rfull = empty + LN_NS,
             *rempty = rfull + 1, *xbar = rempty + 1, *sready = xbar + 2;
    uint32_t rank = ln_cluster_rank(), peer = rank ^ 1;
    int n0 = (int)rank * LN_BN, first = blockIdx.x >> 1, step = gridDim.x >> 1;
    int mtiles = (rows + LN_BM - 1) / LN_BM, KC = (K + 63) / 64;
    if (threadIdx.x == 0) {
        for (int s = 0; s < LN_NS; s++) mbar_init(full + s, 1), mbar_init(empty + s, 8);
        mbar_init(rfull, 1), mbar_init(rempty, 1), mbar_init(sready, 256);
        mbar_init(xbar, 64), mbar_init(xbar + 1, 64); /* the other block's 64 row-quad leaders */
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    ln_cluster_sync(); /* both blocks' barriers initialised before either arrives on the other's */
    if (threadIdx.x >= 256) {
        /* the producer's warpgroup (one producer thread, three storer warps) hands registers to
         * the consumers' sums (at the launch's 168 a thread the consumers spill; the storers
         * spill below 56) */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n" ::: "memory");
        if (threadIdx.x == 256)
            ln_produce(&tmx, &tmw, &tmr, ring, rbuf, full, empty, rfull, rempty, n0, first, step, mtiles, KC);
        else if (threadIdx.x >= LN_THREADS - LN_STORERS)
            ln_store(&tmy, rbuf, xown, xpart, scs, sready, xbar, rempty, rank == 0 ? rstd : nullptr, rows, n0, first,
                     step, mtiles, eps, threadIdx.x - (LN_THREADS - LN_STORERS));
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
        int wg = threadIdx.x >> 7, tid = threadIdx.x & 127, lane = tid & 31, warp = tid >> 5;
        float d[32][4];
        int slot = 0, phase = 0, rphase = 0, it = 0;
        for (int tile = first; tile < mtiles; tile += step, it++) {
            wg_ring_tile<LN_NS, LN_STAGE, LN_A>(
                [&](uint64_t da, uint64_t db, int kc) {
#pragma unroll
                    for (int k = 0; k < 4; k++) wg_m64n256k16_ss(d, da + 2 * k, db + 2 * k, kc | k);
                },
                ring, full, empty, KC, wg, lane, slot, phase);
            wg_fence_f(d);
            mbar_wait(rfull, rphase);
            rphase ^= 1;
            ln_sums(d, rbuf, xown, xpart, xbar, it, peer, wg, lane, warp);
            mbar_arrive(sready);
        }
    }
    __syncwarp();
    ln_cluster_sync(); /* neither block leaves while the other may still send it sums */
#endif
}

/* the launch of `clusters` clusters of two blocks on st (at: the cluster shape, which cfg points to) */
static cudaLaunchConfig_t ln_config(cudaLaunchAttribute *at, int clusters, cudaStream_t st) {
    cudaLaunchConfig_t cfg = {};
    at->id = cudaLaunchAttributeClusterDimension;
    at->val.clusterDim.x = 2, at->val.clusterDim.y = 1, at->val.clusterDim.z = 1;
    cfg.gridDim = dim3(2 * (unsigned)clusters), cfg.blockDim = dim3(LN_THREADS), cfg.dynamicSmemBytes = LN_SMEM;
    cfg.stream = st, cfg.attrs = at, cfg.numAttrs = 1;
    return cfg;
}
#endif

/* clusters of the kernel that fit on the device at once (one block an SM, two SMs of a GPC
 * each), with its shared memory limit raised; 0 where it cannot run (no sm_90a build or
 * device, or the limit refused) */
int k_linear_norm_clusters(void) {
#if defined(TRM_CUDA_SM90A)
    if (!sm90_smem_ok(LN_SMEM, linear_norm_kernel)) return 0;
    cudaLaunchAttribute at;
    cudaLaunchConfig_t cfg = ln_config(&at, device_sms(2) / 2, 0);
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, linear_norm_kernel, &cfg) != cudaSuccess || n <= 0) {
        cudaGetLastError();
        return 0;
    }
    return n;
#else
    return 0;
#endif
}

int k_linear_norm_fwd(cudaStream_t st, void *tma_encode, int clusters, void *y, float *rstd, const void *res,
                      const void *x, int ldx, const void *w, int ldw, int rows, int K, int D, float eps) {
#if defined(TRM_CUDA_SM90A)
    if (!tma_encode || clusters < 1 || D != LN_D || rows < 1 || K < 8 || K % 8 || ldx % 8 || ldw % 8 || !aligned16(x) ||
        !aligned16(w) || !aligned16(res) || !aligned16(y) || ((uintptr_t)rstd & 3))
        return 0;
    CUtensorMap tmx, tmw, tmr, tmy;
    if (!tma_map_2d(&tmx, tma_encode, x, rows, K, ldx, LN_BM) || !tma_map_2d(&tmw, tma_encode, w, D, K, ldw, LN_BN) ||
        !tma_map_2d(&tmr, tma_encode, res, rows, D, D, LN_BM) || !tma_map_2d(&tmy, tma_encode, y, rows, D, D, LN_BM))
        return 0;
    int mtiles = (rows + LN_BM - 1) / LN_BM;
    if (clusters > mtiles) clusters = mtiles;
    cudaLaunchAttribute at;
    cudaLaunchConfig_t cfg = ln_config(&at, clusters, st);
    return cudaLaunchKernelEx(&cfg, linear_norm_kernel, tmx, tmw, tmr, tmy, rstd, rows, K, eps) == cudaSuccess;
#else
    (void)st, (void)tma_encode, (void)clusters, (void)y, (void)rstd, (void)res, (void)x, (void)ldx, (void)w,
        (void)ldw, (void)rows, (void)K, (void)D, (void)eps;
    return 0;
#endif
}
