/* down_swiglu.cu — the down projection's input gradient with the SwiGLU backward in the
 * product's epilogue (backend.h: down_swiglu_bwd): dact = dy·W (rows × I, K = D), then from
 * the forward's kept gate and up products dgu = SwiGLU'(g, u)·dact and act = silu(g)·u, with
 * dact never leaving the chip. Apart, cuBLASLt writes dact and swiglu_bwd reads it back with g
 * and u: the two passes took 0.21 + 0.35 ms a sudoku_att call (H200), the pass alone being
 * bound by memory, so the product's round trip is what this kernel saves.
 *
 * A block takes 128 rows × 128 columns of dact at a time (persistent: tile b, b + blocks, ...,
 * the 128-column tiles of a row range next to each other so that dy's rows are read from L2):
 * two consumer warpgroups of 64 rows (m64n128k16 products, fp32 sums in registers) fed by one
 * producer thread streaming dy's and Wᵀ's 64-column chunks through a ring of stages by TMA,
 * and the tile's g and u boxes into buffers of their own. The consumers round dact to bf16 as
 * the GEMM would, leave it in a third buffer and go on to the next tile's products; eight
 * storer warps then compute act, dg and du 8 values at a time (in place of dact, g and u: the
 * buffers share one layout, so any 16 bytes at one offset are the same 8 elements of each)
 * and send them out by TMA, which frees the buffers for the next tile. There is one set of
 * buffers: a tile's dact waits for the tile before to have been read out, so storers slower
 * than a tile's products would hold the products up. The SwiGLU backward's
 * two exps and three divisions an element made it the consumers' longest phase (a first
 * version that ran it there took 640 µs a sudoku_att call against the two passes' 560), so it
 * runs off their path, with approximate reciprocals (bf16 outputs: within one bf16 step of
 * swiglu_bwd's). Hopper only (sm_90a). */
#include "common.cuh"
#include "mma.cuh"

#define DS_BM 128                       /* rows a tile (two warpgroups of 64) */
#define DS_BN 128                       /* columns of dact a tile */
#define DS_NS 4                         /* stages in the ring */
#define DS_A (DS_BM * 128)              /* bytes of dy's chunk: 128 rows of 64 bf16 */
#define DS_W (DS_BN * 128)              /* bytes of Wᵀ's chunk: 128 rows of 64 bf16 */
#define DS_STAGE (DS_A + DS_W)
#define DS_BOX (DS_BM * 128)            /* one box of 64 columns × 128 rows */
#define DS_EPI (6 * DS_BOX)             /* g, u (then dg, du) and act: two boxes each */
#define DS_THREADS 544                  /* two consumer warpgroups, the producer's warp, 8 storer warps */
#define DS_STORERS 256
#define DS_SMEM (1024 + DS_NS * DS_STAGE + DS_EPI + 16 * 8)

#if defined(TRM_CUDA_SM90A)
#if defined(TRM_WGMMA)
/* the tile's g and u boxes (columns n0, n0 + 64 and I + those of gu) into the buffers */
__device__ __forceinline__ void ds_load_gu(const CUtensorMap *tmg, unsigned char *epi, uint64_t *gfull, int m0, int n0,
                                           int I) {
    mbar_expect(gfull, 4 * DS_BOX);
#pragma unroll
    for (int b = 0; b < 4; b++) tma_load_2d_nb(epi + b * DS_BOX, tmg, (b >> 1) * I + n0 + (b & 1) * 64, m0, gfull);
}

/* The producer: each tile's K chunks into the ring (a stage refilled once all 8 consumer warps
 * are past it), and its g and u once the storer has sent the last tile's outputs from those
 * buffers; the chunks do not wait for that (as linear_norm's producer). */
__device__ void ds_produce(const CUtensorMap *tmy, const CUtensorMap *tmw, const CUtensorMap *tmg,
                           unsigned char *ring, unsigned char *epi, uint64_t *full, uint64_t *empty, uint64_t *gfull,
                           uint64_t *efree, int first, int step, int tiles, int ntiles, int KC, int I) {
    int slot = 0, phase = 0, ephase = 0;
    for (int t = first; t < tiles; t += step) {
        int m0 = t / ntiles * DS_BM, n0 = t % ntiles * DS_BN;
        tma_ring_tile<DS_NS, DS_STAGE, DS_A>([&] { ds_load_gu(tmg, epi, gfull, m0, n0, I); }, tmy, m0, tmw, n0, ring,
                                             full, empty, efree, KC, slot, phase, ephase);
    }
}

/* swiglu_bwd's formulas for one element with approximate reciprocals: act, dg, du from d, g, u */
__device__ __forceinline__ void ds_grad(float d, float g, float u, float &a, float &dg, float &du) {
    float sig = __fdividef(1.f, 1.f + __expf(-g)), silu = g * sig;
    a = silu * u;
    du = d * silu;
    dg = d * u * sig * (1.f + g * (1.f - sig));
}
/* 8 bf16 of a 16-byte word */
__device__ __forceinline__ void ds_unpack(const uint32_t (&q)[4], float (&f)[8]) {
#pragma unroll
    for (int e = 0; e < 4; e++) f[2 * e] = bf16_lo(q[e]), f[2 * e + 1] = bf16_hi(q[e]);
}
/* 8 floats rounded to bf16 into a 16-byte word of shared memory */
__device__ __forceinline__ void ds_st4(uint32_t a, const float (&f)[8]) {
    const uint32_t q[4] = {pack_bf16(f[0], f[1]), pack_bf16(f[2], f[3]), pack_bf16(f[4], f[5]), pack_bf16(f[6], f[7])};
    sts_v4(a, q);
}
/* The storers (thread t of DS_STORERS): each tile, once its dact (sready) and its g and u (gfull)
 * are in, act, dg and du in place of dact, g and u, 8 values a step; then the three out by TMA
 * and the buffers the producer's and the consumers' again (efree). */
__device__ void ds_store(const CUtensorMap *tmo, const CUtensorMap *tma, bool act, unsigned char *epi,
                         uint64_t *sready, uint64_t *gfull, uint64_t *efree, int first, int step, int tiles,
                         int ntiles, int I, int t) {
    uint32_t base = (uint32_t)__cvta_generic_to_shared(epi);
    int it = 0;
    for (int tile = first; tile < tiles; tile += step, it++) {
        int m0 = tile / ntiles * DS_BM, n0 = tile % ntiles * DS_BN;
        mbar_wait(sready, it & 1);
        mbar_wait(gfull, it & 1);
#pragma unroll 2
        for (int v = t; v < 2 * DS_BOX / 16; v += DS_STORERS) {
            uint32_t at = base + 16 * v, qg[4], qu[4], qd[4];
            lds_v4(at, qg), lds_v4(at + 2 * DS_BOX, qu), lds_v4(at + 4 * DS_BOX, qd);
            float g[8], u[8], d[8], a[8];
            ds_unpack(qg, g), ds_unpack(qu, u), ds_unpack(qd, d);
#pragma unroll
            for (int e = 0; e < 8; e++) ds_grad(d[e], g[e], u[e], a[e], g[e], u[e]);
            ds_st4(at, g), ds_st4(at + 2 * DS_BOX, u), ds_st4(at + 4 * DS_BOX, a);
        }
        storers_send<1, DS_STORERS>(
            [&] {
                tma_store_gu<DS_BOX>(tmo, epi, I, n0, m0);
                if (act)
                    for (int b = 0; b < 2; b++) tma_store_2d(tma, epi + (4 + b) * DS_BOX, n0 + b * 64, m0);
            },
            efree, t);
    }
    if (t == 0) tma_wait();
}
#endif

__global__ void __launch_bounds__(DS_THREADS, 1)
    down_swiglu_kernel(const __grid_constant__ CUtensorMap tmy, const __grid_constant__ CUtensorMap tmw,
                       const __grid_constant__ CUtensorMap tmg, const __grid_constant__ CUtensorMap tmo,
                       const __grid_constant__ CUtensorMap tma, int act, int rows, int I, int K) {
#if defined(TRM_WGMMA)
    extern __shared__ unsigned char ds_raw[];
    unsigned char *ring = smem_align1024(ds_raw); /* swizzle atoms */
    unsigned char *epi = ring + DS_NS * DS_STAGE;
    uint64_t *full = (uint64_t *)(epi + DS_EPI), *empty = full + DS_NS, *gfull = empty + DS_NS, *efree = gfull + 1,
             *sready = efree + 1;
    int ntiles = I / DS_BN, tiles = (rows + DS_BM - 1) / DS_BM * ntiles, KC = (K + 63) / 64;
    if (threadIdx.x == 0) {
        for (int s = 0; s < DS_NS; s++) mbar_init(full + s, 1), mbar_init(empty + s, 8);
        mbar_init(gfull, 1), mbar_init(efree, 1), mbar_init(sready, 256);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        fence_async_smem(); /* the barriers seen initialised by the TMA copies too */
    }
    __syncthreads();
    if (threadIdx.x >= 256) { /* warp 8: the producer (its lane 0); warps 9–16: the storers */
        if (threadIdx.x == 256)
            ds_produce(&tmy, &tmw, &tmg, ring, epi, full, empty, gfull, efree, blockIdx.x, gridDim.x, tiles, ntiles, KC,
                       I);
        else if (threadIdx.x >= 288)
            ds_store(&tmo, &tma, act != 0, epi, sready, gfull, efree, blockIdx.x, gridDim.x, tiles, ntiles, I,
                     threadIdx.x - 288);
        return;
    }
    int wg = threadIdx.x >> 7, tid = threadIdx.x & 127, lane = tid & 31, warp = tid >> 5;
    float d[16][4];
    wg_consume<DS_NS, DS_STAGE, DS_A>(
        d,
        [&](uint64_t da, uint64_t db, int kc) {
#pragma unroll
            for (int k = 0; k < 4; k++) wg_m64n128k16_ss(d, da + 2 * k, db + 2 * k, kc | k);
        },
        [&] { wg_sums_bf16<DS_BOX>(d, epi + 4 * DS_BOX, wg, lane, warp); }, /* dact, in the third buffer */
        ring, full, empty, efree, sready, blockIdx.x, gridDim.x, tiles, KC, wg, lane);
#endif
}
#endif

/* the shared memory limit raised once; 0 where the kernel cannot run (no sm_90a build or
 * device, or the limit refused) */
int k_down_swiglu_ok(void) {
#if defined(TRM_CUDA_SM90A)
    if (device_sm90() && smem_limit(down_swiglu_kernel, DS_SMEM)) return 1;
    cudaGetLastError();
#endif
    return 0;
}

int k_down_swiglu_bwd(cudaStream_t st, void *tma_encode, void *dgu, void *act, const void *dy, int ldy, const void *W,
                      int ldw, void *wt, const void *gu, int rows, int I, int K) {
#if defined(TRM_CUDA_SM90A)
    if (!tma_encode || rows < 1 || I < DS_BN || I % DS_BN || K < 8 || K % 8 || ldy % 8 || !aligned16(dy) ||
        !aligned16(wt) || !aligned16(gu) || !aligned16(dgu) || (act && !aligned16(act)))
        return 0;
    CUtensorMap tmy, tmw, tmg, tmo, tma;
    if (!tma_map_2d(&tmy, tma_encode, dy, rows, K, ldy, DS_BM) || !tma_map_2d(&tmw, tma_encode, wt, I, K, K, DS_BN) ||
        !tma_map_2d(&tmg, tma_encode, gu, rows, 2 * I, 2 * I, DS_BM) ||
        !tma_map_2d(&tmo, tma_encode, dgu, rows, 2 * I, 2 * I, DS_BM) ||
        !tma_map_2d(&tma, tma_encode, act ? act : dgu, rows, I, act ? I : 2 * I, DS_BM))
        return 0;
    k_transpose(st, TRM_BF16, wt, K, W, ldw, 1, K, I); /* Wᵀ: the B tiles' rows, K-major */
    int tiles = (rows + DS_BM - 1) / DS_BM * (I / DS_BN), blocks = device_sms(1);
    if (blocks > tiles) blocks = tiles;
    down_swiglu_kernel<<<blocks, DS_THREADS, DS_SMEM, st>>>(tmy, tmw, tmg, tmo, tma, act != NULL, rows, I, K);
    return cudaGetLastError() == cudaSuccess;
#else
    (void)st, (void)tma_encode, (void)dgu, (void)act, (void)dy, (void)ldy, (void)W, (void)ldw, (void)wt, (void)gu,
        (void)rows, (void)I, (void)K;
    return 0;
#endif
}
