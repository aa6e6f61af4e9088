#version 460
// gemm.comp — C[i] = alpha·op(A[i])·op(B[i]) + beta·C[i] over a strided batch (one batch
// matrix per workgroup layer z), row-major with leading dimensions, either operand transposed.
// A BM×BN tile of C per workgroup, staged through shared memory BK columns of K at a time;
// each invocation keeps a TM×TN block of C in registers. Tile shape and transposes are
// specialization constants, so the host builds one pipeline per (tile, ta, tb) it uses.
// beta = 0 never reads C (it may hold NaN), as BLAS. The counterpart of cuBLASLt on cuda.
#include "common.glsl"

layout(constant_id = 2) const uint BM = 64;
layout(constant_id = 3) const uint BN = 64;
layout(constant_id = 4) const uint BK = 16;
layout(constant_id = 5) const uint TM = 4;
layout(constant_id = 6) const uint TN = 4;
layout(constant_id = 7) const uint TA = 0;
layout(constant_id = 8) const uint TB = 0;
const uint PAD = 4; // shared rows one bank-group apart

layout(push_constant) uniform pc_t {
    uvec2 a, b, c;
    uvec2 sa, sb, sc; // element strides between the matrices of the batch (64-bit)
    uint M, N, K, lda, ldb, ldc;
    float alpha, beta;
} pc;

shared float As[BK * (BM + PAD)]; // As[k][m]
shared float Bs[BK * (BN + PAD)]; // Bs[k][n]

void main() {
    const uint RM = BM / TM, RN = BN / TN; // invocations along m and n
    uint tid = gl_LocalInvocationID.x, tr = tid / RN, tc = tid % RN;
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN, z = gl_WorkGroupID.z;
    f32_ref A = f32_ref(ptr_add_strided(pc.a, z, pc.sa));
    f32_ref B = f32_ref(ptr_add_strided(pc.b, z, pc.sb));
    f32_ref C = f32_ref(ptr_add_strided(pc.c, z, pc.sc));
    float acc[TM * TN];
    for (uint i = 0u; i < TM * TN; i++) acc[i] = 0.0;
    for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
        // the tiles, read along each operand's contiguous dimension
        for (uint e = tid; e < BM * BK; e += WG) {
            uint mm = TA == 0u ? e / BK : e % BM, kk = TA == 0u ? e % BK : e / BM;
            uint gm = m0 + mm, gk = k0 + kk;
            float val = 0.0;
            if (gm < pc.M && gk < pc.K) val = TA == 0u ? A.v[gm * pc.lda + gk] : A.v[gk * pc.lda + gm];
            As[kk * (BM + PAD) + mm] = val;
        }
        for (uint e = tid; e < BN * BK; e += WG) {
            uint nn = TB == 0u ? e % BN : e / BK, kk = TB == 0u ? e / BN : e % BK;
            uint gn = n0 + nn, gk = k0 + kk;
            float val = 0.0;
            if (gn < pc.N && gk < pc.K) val = TB == 0u ? B.v[gk * pc.ldb + gn] : B.v[gn * pc.ldb + gk];
            Bs[kk * (BN + PAD) + nn] = val;
        }
        barrier();
        for (uint kk = 0u; kk < BK; kk++) {
            float ra[TM], rb[TN];
            for (uint i = 0u; i < TM; i++) ra[i] = As[kk * (BM + PAD) + tr + i * RM];
            for (uint j = 0u; j < TN; j++) rb[j] = Bs[kk * (BN + PAD) + tc + j * RN];
            for (uint i = 0u; i < TM; i++)
                for (uint j = 0u; j < TN; j++) acc[i * TN + j] += ra[i] * rb[j];
        }
        barrier();
    }
    for (uint i = 0u; i < TM; i++) {
        uint gm = m0 + tr + i * RM;
        if (gm >= pc.M) continue;
        for (uint j = 0u; j < TN; j++) {
            uint gn = n0 + tc + j * RN;
            if (gn >= pc.N) continue;
            uint idx = gm * pc.ldc + gn;
            float v = pc.alpha * acc[i * TN + j];
            if (pc.beta != 0.0) v += pc.beta * C.v[idx];
            C.v[idx] = v;
        }
    }
}
