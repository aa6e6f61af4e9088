/* flash_rope.cuh — RoPE's parts of the flash attention kernels (attention.cu, which includes
 * this once its tile macros FA_D, FA_T, FA_LD, FW_NS and FW_TILE are defined): the forward's
 * rotation of q and k as they reach shared memory, and dK's store with the transpose rotation.
 * Kept apart so that attention.cu stays within the tree's file size. */
#ifndef TRM_FLASH_ROPE_CUH
#define TRM_FLASH_ROPE_CUH

/* fa_store of a head's gradient (dK) with the rotary embedding's transpose rotation applied
 * on the way (cs, sn: fp32 (T × 64) tables, row = position): columns c and c + 32 are C
 * fragments j and j + 4 of the same thread, so the pair meets in registers and is rounded to
 * bf16 once. sh: the tables are the kernel's copy in shared memory. */
__device__ __forceinline__ void fa_store_rope(bf16 *dst, size_t ld, int row0, int T, float acc[8][4], float s,
                                              const float *cs, const float *sn, bool sh = false) {
    int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
        int r = row0 + g + 8 * hf;
        if (r >= T) continue;
        const float *c = cs + (size_t)r * FA_D, *n = sn + (size_t)r * FA_D;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int k = j * 8 + 2 * t;
            float a0 = acc[j][2 * hf] * s, a1 = acc[j][2 * hf + 1] * s;
            float b0 = acc[j + 4][2 * hf] * s, b1 = acc[j + 4][2 * hf + 1] * s;
            float2 c0 = tab_ld2(c + k, sh), c1 = tab_ld2(c + k + 32, sh);
            float2 n0 = tab_ld2(n + k, sh), n1 = tab_ld2(n + k + 32, sh);
            rope_pair(a0, b0, c0.x, c1.x, n0.x, n1.x, 1);
            rope_pair(a1, b1, c0.y, c1.y, n0.y, n1.y, 1);
            *reinterpret_cast<uint32_t *>(dst + (size_t)r * ld + k) = pack_bf16(a0, a1);
            *reinterpret_cast<uint32_t *>(dst + (size_t)r * ld + k + 32) = pack_bf16(b0, b1);
        }
    }
}

#if defined(TRM_WGMMA)
/* RoPE on the forward's operands as they arrive (ROPE = 1; 2 also writes the rotated q and k
 * back over qkv's, for the backward). A row's pair (c, c + 32) for 8 c at once: two 16-byte
 * chunks of the row in shared memory, rotated as rope_fwd rotates them (the same fp32 steps, one
 * rounding to bf16) with the tables' values c, ch (of c + 32), s, sh, written back in place and,
 * with g (the row in memory), there too. */
__device__ __forceinline__ void fw_rope8(bf16 *lo, bf16 *hi, int c0, const float (&c)[8], const float (&ch)[8],
                                         const float (&s)[8], const float (&sh)[8], bf16 *g) {
    float a[8], b[8];
    ld16(a, lo), ld16(b, hi);
#pragma unroll
    for (int e = 0; e < 8; e++) rope_pair(a[e], b[e], c[e], ch[e], s[e], sh[e], 0);
    st16(lo, a), st16(hi, b);
    if (g) st16(g + c0, a), st16(g + c0 + 32, b);
}
/* The fused forward runs where one block holds a head's rows (T ≤ 64·WG: the query tile from row
 * 0, at most two key tiles, both fetched before the first): at the first tile, once every copy
 * has landed, each position's table row is read once and turns its q row (padded tile) and its k
 * row (swizzled, in the stage of its tile); the k tiles then fenced for the tensor cores and the
 * block synchronised. (Rotating each key tile as it came read every table row twice, from L2:
 * twice the bytes of q, k and v.) Rows past T stay zero. Called once, after the first tile's
 * wait. */
template <int WG, int ROPE>
__device__ __forceinline__ void fw_rope_stage(bf16 *sQ, bf16 *sKV, bf16 *Q, bf16 *K, size_t ld, int T,
                                              const float *cs, const float *sn) {
    cp_async_wait<0>();
    __syncthreads();
    for (int i = threadIdx.x; i < T * 4; i += 128 * WG) {
        int p = i >> 2, j = i & 3, r = p & (FA_T - 1);
        float c[8], ch[8], s[8], sh[8];
        const float *cp = cs + (size_t)p * FA_D + 8 * j, *sp = sn + (size_t)p * FA_D + 8 * j;
        ld_f8(c, cp), ld_f8(ch, cp + 32), ld_f8(s, sp), ld_f8(sh, sp + 32);
        bf16 *q = sQ + p * FA_LD, *k = sKV + (p / FA_T % FW_NS) * 2 * FW_TILE + r * FA_D;
        fw_rope8(q + 8 * j, q + 8 * j + 32, 8 * j, c, ch, s, sh, ROPE == 2 ? Q + p * ld : nullptr);
        fw_rope8(k + ((j ^ (r & 7)) << 3), k + (((j + 4) ^ (r & 7)) << 3), 8 * j, c, ch, s, sh,
                 ROPE == 2 ? K + p * ld : nullptr);
    }
    fence_async_smem();
    __syncthreads();
}
#endif

#endif
