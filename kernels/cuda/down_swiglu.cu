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
 * producer thread streaming dy's and Wᵀ's 64-column chunks through a ring of stages by TMA. The
 * consumers round dact to bf16 as the GEMM would, leave it in one of two buffers and go on to
 * the next tile's products; eight storer warps then read it back with the tile's g and u (from
 * memory, 16 bytes a load: 8 values of a row) and compute act, dg and du, which go straight out
 * by 16-byte stores. The SwiGLU backward's two exps and three divisions an element made it the
 * consumers' longest phase (a first version that ran it there took 640 µs a sudoku_att call
 * against the two passes' 560), so it runs off their path, with approximate reciprocals (bf16
 * outputs: within one bf16 step of swiglu_bwd's). An earlier version brought g and u in by TMA
 * and sent the outputs from shared memory: its one set of buffers (g, u, dact: 96 KiB beside the
 * ring) made each tile's loads wait for the last tile's stores, and the consumers for both
 * (sudoku_att call 412 µs, DRAM 60% busy, H200). Hopper only (sm_90a). */
#include "common.cuh"
#include "mma.cuh"

#define DS_BM 128                       /* rows a tile (two warpgroups of 64) */
#define DS_BN 128                       /* columns of dact a tile */
#define DS_NS 4                         /* stages in the ring */
#define DS_A (DS_BM * 128)              /* bytes of dy's chunk: 128 rows of 64 bf16 */
#define DS_W (DS_BN * 128)              /* bytes of Wᵀ's chunk: 128 rows of 64 bf16 */
#define DS_STAGE (DS_A + DS_W)
#define DS_BOX (DS_BM * 128)            /* 64 columns × 128 rows of dact (128-byte swizzle) */
#define DS_NB 2                         /* dact buffers: a tile's sums land while the last one's are read */
#define DS_EPI (DS_NB * 2 * DS_BOX)
#define DS_THREADS 544                  /* two consumer warpgroups, the producer's warp, 8 storer warps */
#define DS_STORERS 256
#define DS_GS 4                         /* 16-byte steps a storer thread loads at once */
#define DS_SMEM (1024 + DS_NS * DS_STAGE + DS_EPI + 16 * 8)
static_assert(DS_BM * 16 % (DS_GS * DS_STORERS) == 0, "the storers' steps must cover a tile's rows exactly");

#if defined(TRM_CUDA_SM90A)
#if defined(TRM_WGMMA)
/* swiglu_bwd's formulas for one element with approximate reciprocals: act, dg, du from d, g, u */
__device__ __forceinline__ void ds_grad(float d, float g, float u, float &a, float &dg, float &du) {
    float sig = __fdividef(1.f, 1.f + __expf(-g)), silu = g * sig;
    a = silu * u;
    du = d * silu;
    dg = d * u * sig * (1.f + g * (1.f - sig));
}
/* 8 bf16 of a 16-byte word */
__device__ __forceinline__ void ds_unpack(const uint4 &q, float (&f)[8]) {
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int e = 0; e < 4; e++) f[2 * e] = bf16_lo(w[e]), f[2 * e + 1] = bf16_hi(w[e]);
}
/* 8 floats rounded to bf16 in a 16-byte word */
__device__ __forceinline__ uint4 ds_pack(const float (&f)[8]) {
    return {pack_bf16(f[0], f[1]), pack_bf16(f[2], f[3]), pack_bf16(f[4], f[5]), pack_bf16(f[6], f[7])};
}
/* The storers (thread t of DS_STORERS): each tile, once its dact is in buffer it % DS_NB
 * (sready), 8 values of a row a step (a tile's 16 steps of a row on consecutive threads: whole
 * 256-byte runs of g and u), DS_GS steps' loads issued together; act, dg and du out, and the
 * buffer the consumers' again once every storer thread has read it (efree counts them). gu and
 * dgu may be one buffer: each thread reads its g and u before it writes dg and du there. */
__device__ void ds_store(bf16 *dgu, bf16 *act, const bf16 *gu, const unsigned char *epi, uint64_t *sready,
                         uint64_t *efree, int first, int step, int tiles, int ntiles, int rows, int I, int t) {
    uint32_t base = (uint32_t)__cvta_generic_to_shared(epi);
    size_t ld = (size_t)2 * I;
    int it = 0;
    for (int tile = first; tile < tiles; tile += step, it++) {
        int m0 = tile / ntiles * DS_BM, n0 = tile % ntiles * DS_BN, b = it % DS_NB;
        mbar_wait(sready + b, (it / DS_NB) & 1);
        uint32_t buf = base + b * 2 * DS_BOX;
        for (int v0 = t; v0 < DS_BM * 16; v0 += DS_GS * DS_STORERS) {
            uint4 qg[DS_GS], qu[DS_GS];
#pragma unroll
            for (int k = 0; k < DS_GS; k++) {
                int v = v0 + k * DS_STORERS, r = v >> 4, c = v & 15;
                if (m0 + r < rows) {
                    const bf16 *g = gu + (size_t)(m0 + r) * ld + n0 + 8 * c;
                    qg[k] = *reinterpret_cast<const uint4 *>(g), qu[k] = *reinterpret_cast<const uint4 *>(g + I);
                }
            }
#pragma unroll
            for (int k = 0; k < DS_GS; k++) {
                int v = v0 + k * DS_STORERS, r = v >> 4, c = v & 15;
                if (m0 + r >= rows) continue;
                uint32_t q[4];
                lds_v4(buf + (c >> 3) * DS_BOX + r * 128 + (((c & 7) ^ (r & 7)) << 4), q);
                float g[8], u[8], d[8], a[8];
                ds_unpack(qg[k], g), ds_unpack(qu[k], u), ds_unpack(uint4{q[0], q[1], q[2], q[3]}, d);
#pragma unroll
                for (int e = 0; e < 8; e++) ds_grad(d[e], g[e], u[e], a[e], g[e], u[e]);
                bf16 *o = dgu + (size_t)(m0 + r) * ld + n0 + 8 * c;
                *reinterpret_cast<uint4 *>(o) = ds_pack(g), *reinterpret_cast<uint4 *>(o + I) = ds_pack(u);
                if (act) *reinterpret_cast<uint4 *>(act + (size_t)(m0 + r) * I + n0 + 8 * c) = ds_pack(a);
            }
        }
        mbar_arrive(efree + b); /* this thread's reads of the buffer are done */
    }
}
#endif

__global__ void __launch_bounds__(DS_THREADS, 1)
    down_swiglu_kernel(const __grid_constant__ CUtensorMap tmy, const __grid_constant__ CUtensorMap tmw, bf16 *dgu,
                       bf16 *act, const bf16 *gu, int rows, int I, int K) {
#if defined(TRM_WGMMA)
    extern __shared__ unsigned char ds_raw[];
    unsigned char *ring = smem_align1024(ds_raw); /* swizzle atoms */
    unsigned char *epi = ring + DS_NS * DS_STAGE;
    uint64_t *full = (uint64_t *)(epi + DS_EPI), *empty = full + DS_NS, *efree = empty + DS_NS,
             *sready = efree + DS_NB;
    int ntiles = I / DS_BN, tiles = (rows + DS_BM - 1) / DS_BM * ntiles, KC = (K + 63) / 64;
    if (threadIdx.x == 0) {
        for (int s = 0; s < DS_NS; s++) mbar_init(full + s, 1), mbar_init(empty + s, 8);
        for (int b = 0; b < DS_NB; b++) mbar_init(efree + b, DS_STORERS), mbar_init(sready + b, 256);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        fence_async_smem(); /* the barriers seen initialised by the TMA copies too */
    }
    __syncthreads();
    if (threadIdx.x >= 256) { /* warp 8: the producer (its lane 0); warps 9–16: the storers */
        if (threadIdx.x == 256)
            tma_ring_tiles<DS_NS, DS_STAGE, DS_A, 0, DS_BM, DS_BN>(&tmy, &tmw, ring, full, empty, blockIdx.x, gridDim.x,
                                                                 tiles, ntiles, KC);
        else if (threadIdx.x >= 288)
            ds_store(dgu, act, gu, epi, sready, efree, blockIdx.x, gridDim.x, tiles, ntiles, rows, I,
                     threadIdx.x - 288);
        return;
    }
    int wg = threadIdx.x >> 7, tid = threadIdx.x & 127, lane = tid & 31, warp = tid >> 5;
    float d[16][4];
    wg_consume<DS_NS, DS_STAGE, DS_A, DS_NB>(
        d,
        [&](uint64_t da, uint64_t db, int kc) {
#pragma unroll
            for (int k = 0; k < 4; k++) wg_m64n128k16_ss(d, da + 2 * k, db + 2 * k, kc | k);
        },
        [&](int b) { wg_sums_bf16<DS_BOX>(d, epi + b * 2 * DS_BOX, wg, lane, warp); }, /* dact */
        ring, full, empty, efree, sready, blockIdx.x, gridDim.x, tiles, KC, wg, lane);
#endif
}
#endif

/* the shared memory limit raised once; 0 where the kernel cannot run (no sm_90a build or
 * device, or the limit refused) */
int k_down_swiglu_ok(void) {
#if defined(TRM_CUDA_SM90A)
    return sm90_smem_ok(DS_SMEM, down_swiglu_kernel);
#else
    return 0;
#endif
}

int k_down_swiglu_bwd(cudaStream_t st, void *tma_encode, void *dgu, void *act, const void *dy, int ldy, const void *W,
                      int ldw, void *wt, const void *gu, int rows, int I, int K) {
#if defined(TRM_CUDA_SM90A)
    if (!tma_encode || rows < 1 || I < DS_BN || I % DS_BN || K < 8 || K % 8 || ldy % 8 || !aligned16(dy) ||
        !aligned16(wt) || !aligned16(gu) || !aligned16(dgu) || (act && !aligned16(act)))
        return 0;
    CUtensorMap tmy, tmw;
    if (!tma_map_2d(&tmy, tma_encode, dy, rows, K, ldy, DS_BM) || !tma_map_2d(&tmw, tma_encode, wt, I, K, K, DS_BN))
        return 0;
    k_transpose(st, TRM_BF16, wt, K, W, ldw, 1, K, I); /* Wᵀ: the B tiles' rows, K-major */
    int tiles = (rows + DS_BM - 1) / DS_BM * (I / DS_BN), blocks = device_sms(1);
    if (blocks > tiles) blocks = tiles;
    down_swiglu_kernel<<<blocks, DS_THREADS, DS_SMEM, st>>>(tmy, tmw, (bf16 *)dgu, (bf16 *)act, (const bf16 *)gu, rows,
                                                             I, K);
    return cudaGetLastError() == cudaSuccess;
#else
    (void)st, (void)tma_encode, (void)dgu, (void)act, (void)dy, (void)ldy, (void)W, (void)ldw, (void)wt, (void)gu,
        (void)rows, (void)I, (void)K;
    return 0;
#endif
}
