/* gate_up.cu — the channel MLP's gate/up product with SwiGLU in its epilogue on Hopper, in
 * 128 × 256 tiles (backend.h: gate_up_swiglu; swiglu.cu's k_gate_up_swiglu calls it first):
 * act = silu(g)·u with [g | u] = x·Wᵀ, and the product itself (gu) where the backward keeps it.
 *
 * swiglu.cu's kernel keeps a block's 128 weight rows in shared memory and streams x past them
 * in four independent warpgroups; on sudoku_att's calls its tensor cores were busy 60% of the
 * time (Nsight Compute), against 75% for cuBLASLt's and linear_norm's 128 × 256 tiles. This one
 * is built as those: a block takes 128 rows × 128 columns of act at a time (persistent: tile b,
 * b + blocks, ..., the column tiles of a row range next to each other so that x's rows are read
 * from L2), which is 128 × 256 of the product: gate columns n0.. and up columns I + n0.. side
 * by side. Two consumer warpgroups of 64 rows run m64n256k16 products fed by one producer
 * thread streaming x's and W's 64-column chunks through a ring of stages by TMA (W's two row
 * ranges as one box of a 3-D map); a thread's sums then hold both halves of each SwiGLU pair.
 * The consumers round the sums to bf16 as the GEMM would, leave them in a buffer and go on to
 * the next tile's products; three storer warps compute act from the rounded g and u (silu_fast,
 * the same bits as swiglu.cu's epilogue) and send it out by TMA, after gu where it is kept.
 * The same kernel with MODE = 1 is the attention's QKV product with RoPE in its epilogue
 * (backend.h: qkv_rope_fwd): its 3H·64 columns taken as I = 3H·32 pairs, so that a tile holds
 * four heads (two from n0, two from I + n0); the storers rotate the q and k heads in place (a
 * row's pair c, c + 32 lies in one box: chunks c / 8 and c / 8 + 4) with the tables' row of
 * its position, as rope_fwd rotates the stored product, and send all four out. Apart, the
 * rotation was a pass of its own over q and k (maze_att, H200: 0.18 ms a call).
 * Hopper only (sm_90a). */
#include "common.cuh"
#include "mma.cuh"

#define GT_BM 128                 /* rows a tile (two warpgroups of 64) */
#define GT_BN 128                 /* act columns a tile: 256 of the product */
#define GT_NS 3                   /* stages in the ring */
#define GT_A (GT_BM * 128)        /* bytes of x's chunk: 128 rows of 64 bf16 */
#define GT_W (2 * GT_BN * 128)    /* bytes of W's chunk: 256 rows of 64 bf16 */
#define GT_STAGE (GT_A + GT_W)
#define GT_BOX (GT_BM * 128)      /* one box of 64 columns × 128 rows */
#define GT_EPI (4 * GT_BOX)       /* g (then act) and u: two boxes each */
#define GT_THREADS 384            /* two consumer warpgroups; the producer's warp, 3 storer warps */
#define GT_STORERS 96
#define GT_SMEM (1024 + GT_NS * GT_STAGE + GT_EPI + 16 * 8)

#if defined(TRM_CUDA_SM90A)
#if defined(TRM_WGMMA)
/* the storers' named barrier (0 is __syncthreads') */
__device__ __forceinline__ void gt_bar_storers() { named_bar<1, GT_STORERS>(); }

/* The storers (thread t of GT_STORERS): each tile, once its sums are in (sready), gu out by TMA
 * where it is kept (and read out before g is overwritten); act in place of g, 8 values a step;
 * act out by TMA, and the buffer the consumers' again (efree). */
__device__ void gt_store(const CUtensorMap *tmo, const CUtensorMap *tma, bool keep, unsigned char *epi,
                         uint64_t *sready, uint64_t *efree, int first, int step, int tiles, int ntiles, int I, int t) {
    uint32_t base = (uint32_t)__cvta_generic_to_shared(epi);
    int it = 0;
    for (int tile = first; tile < tiles; tile += step, it++) {
        int m0 = tile / ntiles * GT_BM, n0 = tile % ntiles * GT_BN;
        mbar_wait(sready, it & 1);
        if (keep) {
            if (t == 0) {
                tma_store_gu<GT_BOX>(tmo, epi, I, n0, m0);
                tma_commit();
                tma_wait_read();
            }
            gt_bar_storers();
        }
#pragma unroll 2
        for (int v = t; v < 2 * GT_BOX / 16; v += GT_STORERS) {
            uint32_t at = base + 16 * v, qg[4], qu[4], q[4];
            lds_v4(at, qg), lds_v4(at + 2 * GT_BOX, qu);
#pragma unroll
            for (int e = 0; e < 4; e++)
                q[e] = pack_bf16(silu_fast(bf16_lo(qg[e])) * bf16_lo(qu[e]), silu_fast(bf16_hi(qg[e])) * bf16_hi(qu[e]));
            sts_v4(at, q);
        }
        storers_send<1, GT_STORERS>(
            [&] {
                for (int b = 0; b < 2; b++) tma_store_2d(tma, epi + b * GT_BOX, n0 + b * 64, m0);
            },
            efree, t);
    }
    if (t == 0) tma_wait();
}
/* One row's 8 pairs (c, c + 32) in each of the four boxes of a tile whose columns are below rot
 * (a q or k head), rotated in place: row r of the buffer at base, chunk p (c = 8p..8p + 7), the
 * tables' values ct, ch (of c + 32), st, sh of its position. */
__device__ __forceinline__ void gt_rope_row(uint32_t base, int r, int p, const float (&ct)[8], const float (&ch)[8],
                                            const float (&st)[8], const float (&sh)[8], int I, int n0, int rot) {
#pragma unroll
    for (int b = 0; b < 4; b++) {
        if ((b >> 1) * I + n0 + (b & 1) * 64 >= rot) continue;
        uint32_t lo = base + b * GT_BOX + r * 128 + ((p ^ (r & 7)) << 4);
        uint32_t hi = base + b * GT_BOX + r * 128 + (((p + 4) ^ (r & 7)) << 4), qa[4], qb[4];
        lds_v4(lo, qa), lds_v4(hi, qb);
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float a0 = bf16_lo(qa[e]), a1 = bf16_hi(qa[e]), b0 = bf16_lo(qb[e]), b1 = bf16_hi(qb[e]);
            rope_pair(a0, b0, ct[2 * e], ch[2 * e], st[2 * e], sh[2 * e], 0);
            rope_pair(a1, b1, ct[2 * e + 1], ch[2 * e + 1], st[2 * e + 1], sh[2 * e + 1], 0);
            qa[e] = pack_bf16(a0, a1), qb[e] = pack_bf16(b0, b1);
        }
        sts_v4(lo, qa), sts_v4(hi, qb);
    }
}
/* MODE 1's storers (thread t of GT_STORERS): each tile, once its sums are in (sready), the q and
 * k heads among its four boxes rotated in place (positions row mod T; rows past `rows` left, the
 * store drops them), then the four boxes out by TMA, and the buffer the consumers' again
 * (efree). A step is one row's 8 pairs in each box (the four share a position: the tables'
 * values are read once for them); a thread's steps GS at a time, their table loads issued
 * together (one at a time, waiting on L2 for each, the storers bounded the kernel). */
#define GT_GS 3
/* the row of step v (its chunk pair: v % 4): a quarter warp's 8 steps take rows r and r + 4,
 * whose 128-byte swizzles put their 4 chunks each in the other's 4 free bank groups (rows r and
 * r + 1 would share two: 2-way conflicts on every load and store) */
__device__ __forceinline__ int gt_rope_r(int v) { return (v >> 5) * 8 + ((v >> 2) & 1) * 4 + ((v >> 3) & 3); }
__device__ void gt_store_rope(const CUtensorMap *tmo, unsigned char *epi, const float *cs, const float *sn,
                              uint64_t *sready, uint64_t *efree, int first, int step, int tiles, int ntiles, int I,
                              int rows, int T, int rot, int t) {
    uint32_t base = (uint32_t)__cvta_generic_to_shared(epi);
    int it = 0;
    for (int tile = first; tile < tiles; tile += step, it++) {
        int m0 = tile / ntiles * GT_BM, n0 = tile % ntiles * GT_BN;
        mbar_wait(sready, it & 1);
        for (int v0 = t; v0 < GT_BM * 4; v0 += GT_GS * GT_STORERS) {
            float ct[GT_GS][8], ch[GT_GS][8], st[GT_GS][8], sh[GT_GS][8];
#pragma unroll
            for (int g = 0; g < GT_GS; g++) {
                int r = gt_rope_r((v0 + g * GT_STORERS) & (GT_BM * 4 - 1));
                size_t at = (size_t)((m0 + r) % T) * 64 + 8 * ((v0 + g * GT_STORERS) & 3);
                ld_f8(ct[g], cs + at), ld_f8(ch[g], cs + at + 32), ld_f8(st[g], sn + at), ld_f8(sh[g], sn + at + 32);
            }
#pragma unroll
            for (int g = 0; g < GT_GS; g++) {
                int v = v0 + g * GT_STORERS, r = gt_rope_r(v & (GT_BM * 4 - 1));
                if (v < GT_BM * 4 && m0 + r < rows) gt_rope_row(base, r, v & 3, ct[g], ch[g], st[g], sh[g], I, n0, rot);
            }
        }
        storers_send<1, GT_STORERS>([&] { tma_store_gu<GT_BOX>(tmo, epi, I, n0, m0); }, efree, t);
    }
    if (t == 0) tma_wait();
}
#endif

/* MODE 0: act (tma) and, with keep, gu (tmo); 1: the rotated product (tmo; cs, sn, T, rot) */
template <int MODE>
__global__ void __launch_bounds__(GT_THREADS, 1)
    gate_up_tile_kernel(const __grid_constant__ CUtensorMap tmx, const __grid_constant__ CUtensorMap tmw,
                        const __grid_constant__ CUtensorMap tmo, const __grid_constant__ CUtensorMap tma, int keep,
                        int rows, int I, int K, const float *cs, const float *sn, int T, int rot) {
#if defined(TRM_WGMMA)
    extern __shared__ unsigned char gt_raw[];
    unsigned char *ring = smem_align1024(gt_raw); /* swizzle atoms */
    unsigned char *epi = ring + GT_NS * GT_STAGE;
    uint64_t *full = (uint64_t *)(epi + GT_EPI), *empty = full + GT_NS, *efree = empty + GT_NS, *sready = efree + 1;
    int ntiles = I / GT_BN, tiles = (rows + GT_BM - 1) / GT_BM * ntiles, KC = (K + 63) / 64;
    if (threadIdx.x == 0) {
        for (int s = 0; s < GT_NS; s++) mbar_init(full + s, 1), mbar_init(empty + s, 8);
        mbar_init(efree, 1), mbar_init(sready, 256);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        fence_async_smem(); /* the barriers seen initialised by the TMA copies too */
    }
    __syncthreads();
    if (threadIdx.x >= 256) { /* warp 8: the producer (its lane 0); warps 9–11: the storers */
        if (threadIdx.x == 256)
            tma_ring_tiles<GT_NS, GT_STAGE, GT_A, 1, GT_BM, GT_BN>(&tmx, &tmw, ring, full, empty, blockIdx.x, gridDim.x,
                                                                 tiles, ntiles, KC);
        else if (threadIdx.x >= 288 && MODE == 1)
            gt_store_rope(&tmo, epi, cs, sn, sready, efree, blockIdx.x, gridDim.x, tiles, ntiles, I, rows, T, rot,
                          threadIdx.x - 288);
        else if (threadIdx.x >= 288)
            gt_store(&tmo, &tma, keep != 0, epi, sready, efree, blockIdx.x, gridDim.x, tiles, ntiles, I,
                     threadIdx.x - 288);
        return;
    }
    int wg = threadIdx.x >> 7, tid = threadIdx.x & 127, lane = tid & 31, warp = tid >> 5;
    float d[32][4];
    wg_consume<GT_NS, GT_STAGE, GT_A>(
        d,
        [&](uint64_t da, uint64_t db, int kc) {
#pragma unroll
            for (int k = 0; k < 4; k++) wg_m64n256k16_ss(d, da + 2 * k, db + 2 * k, kc | k);
        },
        [&](int) { wg_sums_bf16<GT_BOX>(d, epi, wg, lane, warp); },
        ring, full, empty, efree, sready, blockIdx.x, gridDim.x, tiles, KC, wg, lane);
#endif
}
#endif

/* the shared memory limit raised once; 0 where the kernel cannot run (no sm_90a build or
 * device, or the limit refused) */
int k_gate_up_tile_ok(void) {
#if defined(TRM_CUDA_SM90A)
    return sm90_smem_ok(GT_SMEM, gate_up_tile_kernel<0>, gate_up_tile_kernel<1>);
#else
    return 0;
#endif
}

#if defined(TRM_CUDA_SM90A)
/* the maps of x (rows × K), of W as (2, I, K) (gate rows n0.. and up rows I + n0.. in one box
 * of 64 × 128 × 2) and of out (rows × N, N columns apart, N = I or 2I); 0 where one fails */
static int gt_maps(void *enc, CUtensorMap *tmx, CUtensorMap *tmw, CUtensorMap *tmo, const void *x, int ldx,
                   const void *w, int ldw, const void *out, int rows, int I, int K, int N) {
    cuuint64_t dim[3] = {(cuuint64_t)K, (cuuint64_t)I, 2}, stride[2] = {(cuuint64_t)ldw * 2, (cuuint64_t)I * ldw * 2};
    cuuint32_t box[3] = {64, GT_BN, 2};
    return tma_map_2d(tmx, enc, x, rows, K, ldx, GT_BM) && tma_map_bf16(tmw, enc, w, 3, dim, stride, box) &&
           tma_map_2d(tmo, enc, out, rows, N, N, GT_BM);
}
/* persistent blocks over the tiles: one an SM, or one a tile where there are fewer */
static int gt_blocks(int rows, int I) {
    int tiles = (rows + GT_BM - 1) / GT_BM * (I / GT_BN), blocks = device_sms(1);
    return blocks > tiles ? tiles : blocks;
}
#endif

/* what both modes need of their operands: 16-byte rows and pointers, whole tiles of columns */
static bool gt_ok(void *enc, const void *x, int ldx, const void *w, int ldw, const void *out, int rows, int I, int K) {
    return enc && rows >= GT_BM && I >= GT_BN && I % GT_BN == 0 && K >= 64 && K % 8 == 0 && ldx % 8 == 0 &&
           ldw % 8 == 0 && aligned16(x) && aligned16(w) && aligned16(out);
}

int k_gate_up_tile(cudaStream_t st, void *tma_encode, void *act, void *gu, const void *x, int ldx, const void *w,
                   int ldw, int rows, int I, int K) {
#if defined(TRM_CUDA_SM90A)
    if (!gt_ok(tma_encode, x, ldx, w, ldw, act, rows, I, K) || (gu && !aligned16(gu))) return 0;
    CUtensorMap tmx, tmw, tmo, tma;
    if (!gt_maps(tma_encode, &tmx, &tmw, &tma, x, ldx, w, ldw, act, rows, I, K, I) ||
        !tma_map_2d(&tmo, tma_encode, gu ? gu : act, rows, gu ? 2 * I : I, gu ? 2 * I : I, GT_BM))
        return 0;
    gate_up_tile_kernel<0><<<gt_blocks(rows, I), GT_THREADS, GT_SMEM, st>>>(tmx, tmw, tmo, tma, gu != NULL, rows, I, K,
                                                                          nullptr, nullptr, 1, 0);
    return cudaGetLastError() == cudaSuccess;
#else
    (void)st, (void)tma_encode, (void)act, (void)gu, (void)x, (void)ldx, (void)w, (void)ldw, (void)rows, (void)I,
        (void)K;
    return 0;
#endif
}

int k_qkv_rope(cudaStream_t st, void *tma_encode, void *qkv, const void *x, int ldx, const void *w, int ldw,
               const float *cs, const float *sn, int B, int T, int H, int K) {
#if defined(TRM_CUDA_SM90A)
    int rows = B * T, I = 3 * H * 32;
    if (!gt_ok(tma_encode, x, ldx, w, ldw, qkv, rows, I, K) || !aligned16(cs) || !aligned16(sn)) return 0;
    CUtensorMap tmx, tmw, tmo;
    if (!gt_maps(tma_encode, &tmx, &tmw, &tmo, x, ldx, w, ldw, qkv, rows, I, K, 2 * I)) return 0;
    gate_up_tile_kernel<1><<<gt_blocks(rows, I), GT_THREADS, GT_SMEM, st>>>(tmx, tmw, tmo, tmo, 0, rows, I, K, cs, sn,
                                                                          T, 2 * H * 64);
    return cudaGetLastError() == cudaSuccess;
#else
    (void)st, (void)tma_encode, (void)qkv, (void)x, (void)ldx, (void)w, (void)ldw, (void)cs, (void)sn, (void)B,
        (void)T, (void)H, (void)K;
    return 0;
#endif
}
