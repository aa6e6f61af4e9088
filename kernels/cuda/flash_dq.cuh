/* flash_dq.cuh — the one-pass attention backward's dQ (flash_bwd_kv_wg_kernel, DQ = 1 or 2):
 * each warpgroup's part staged in shared memory, the parts summed, then added to the fp32
 * accumulator or, where one block holds every key, written as bf16 with RoPE's transpose
 * rotation. Included by attention.cu (inside its TRM_WGMMA section) once the FK_* tile macros
 * are defined; kept apart so that attention.cu stays within the tree's file size. */
#ifndef TRM_FLASH_DQ_CUH
#define TRM_FLASH_DQ_CUH

/* a warpgroup's dQᵀ part (C fragments: rows d, columns queries) into its (64 × 32) fp32 staging */
__device__ __forceinline__ void fk_dq_stage(float *stg, const float (&d)[4][4]) {
    int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3, r = ((threadIdx.x >> 5) & 3) * 16 + g;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        *reinterpret_cast<float2 *>(stg + r * FK_SLD + j * 8 + 2 * t) = make_float2(d[j][0], d[j][1]);
        *reinterpret_cast<float2 *>(stg + (r + 8) * FK_SLD + j * 8 + 2 * t) = make_float2(d[j][2], d[j][3]);
    }
}
/* the WG staged parts of query tile j summed and added to the head's fp32 dQᵀ accumulator
 * (64 × Tp, Tp = T rounded up to tiles: queries past T add zeros) */
template <int WG> __device__ __forceinline__ void fk_dq_reduce(float *acc, const float *stg, int j, int Tp) {
    for (int c = threadIdx.x; c < FA_D * FK_T / 4; c += 128 * WG) {
        int r = c >> 3, c4 = (c & 7) * 4;
        float4 v = *reinterpret_cast<const float4 *>(stg + r * FK_SLD + c4);
#pragma unroll
        for (int x = 1; x < WG; x++) {
            float4 u = *reinterpret_cast<const float4 *>(stg + x * FK_STG + r * FK_SLD + c4);
            v.x += u.x, v.y += u.y, v.z += u.z, v.w += u.w;
        }
        red_add_v4(acc + (size_t)r * Tp + j * FK_T + c4, v);
    }
}
/* DQ = 2, where one block holds every key of the head: the WG staged parts of query tile j are
 * the whole dQᵀ of its queries, so their sum goes out scaled, in bf16, straight into the q
 * columns of dqkv (dq: the head's first row there, ld apart) — no accumulator to zero, no
 * reductions and no conversion pass. The same sum in the same order as DQ = 1's, so the same
 * bits. A lane per query (conflict-free reads down a staged column), 8 d a store. */
template <int WG>
__device__ __forceinline__ void fk_dq_write(bf16 *dq, size_t ld, const float *stg, int j, int T, float scale,
                                            const float *cs, const float *sn, bool sh) {
    for (int i = threadIdx.x; i < FK_T * FA_D / 16; i += 128 * WG) {
        int c = i & (FK_T - 1), d0 = (i / FK_T) * 8, q = j * FK_T + c;
        if (q >= T) continue;
        float v[8], u[8]; /* d0 + e and its rotary partner d0 + 32 + e */
#pragma unroll
        for (int e = 0; e < 8; e++) {
            v[e] = stg[(d0 + e) * FK_SLD + c], u[e] = stg[(d0 + 32 + e) * FK_SLD + c];
#pragma unroll
            for (int x = 1; x < WG; x++)
                v[e] += stg[x * FK_STG + (d0 + e) * FK_SLD + c], u[e] += stg[x * FK_STG + (d0 + 32 + e) * FK_SLD + c];
            v[e] *= scale, u[e] *= scale;
        }
        if (cs) { /* the rotary embedding's transpose rotation, rounded once; the tables' 8
                   * values of d0.. and of d0 + 32.. as float4 loads (scalar ones cost the fused
                   * backward more than the rope pass it replaced) */
            const float *c = cs + (size_t)q * FA_D + d0, *n = sn + (size_t)q * FA_D + d0;
#pragma unroll
            for (int h4 = 0; h4 < 2; h4++) { /* 4 pairs at a time: fewer live registers */
                float4 c0 = tab_ld4(c + 4 * h4, sh), c1 = tab_ld4(c + 32 + 4 * h4, sh);
                float4 n0 = tab_ld4(n + 4 * h4, sh), n1 = tab_ld4(n + 32 + 4 * h4, sh);
                float *a = v + 4 * h4, *b = u + 4 * h4;
                rope_pair(a[0], b[0], c0.x, c1.x, n0.x, n1.x, 1), rope_pair(a[1], b[1], c0.y, c1.y, n0.y, n1.y, 1);
                rope_pair(a[2], b[2], c0.z, c1.z, n0.z, n1.z, 1), rope_pair(a[3], b[3], c0.w, c1.w, n0.w, n1.w, 1);
            }
        }
        uint4 o = {pack_bf16(v[0], v[1]), pack_bf16(v[2], v[3]), pack_bf16(v[4], v[5]), pack_bf16(v[6], v[7])};
        uint4 o2 = {pack_bf16(u[0], u[1]), pack_bf16(u[2], u[3]), pack_bf16(u[4], u[5]), pack_bf16(u[6], u[7])};
        *reinterpret_cast<uint4 *>(dq + (size_t)q * ld + d0) = o;
        *reinterpret_cast<uint4 *>(dq + (size_t)q * ld + d0 + 32) = o2;
    }
}
/* tile j's dQ parts out: summed into the accumulator (DQ = 1) or written (DQ = 2) */
template <int WG, int DQ>
__device__ __forceinline__ void fk_dq_out(float *acc, bf16 *dq, size_t ld, const float *stg, int j, int Tp, int T,
                                          float scale, const float *cs, const float *sn, bool sh) {
    if constexpr (DQ == 2)
        fk_dq_write<WG>(dq, ld, stg, j, T, scale, cs, sn, sh);
    else
        fk_dq_reduce<WG>(acc, stg, j, Tp);
}

#endif
