#version 460
// gemm.comp — C[i] = alpha·op(A[i])·op(B[i]) + beta·C[i] over a strided batch (one batch
// matrix per workgroup layer z), row-major with leading dimensions, either operand transposed.
// A BM×BN tile of C per workgroup, staged through shared memory BK steps of K at a time (the
// next step's tile is fetched into registers while the current one is multiplied); each
// invocation keeps a TM×TN block of C in registers and reads its operands from shared memory
// as vec4. A product with few output tiles and a long K (weight gradients: K = every row of the
// batch) is split along K into partial products that elementwise.comp sums in order. Tile
// shape, transposes and whether an operand may be read as aligned vec4 (VA, VB) are
// specialization constants: the host builds one pipeline per combination it uses. beta = 0 never reads C (it may hold NaN), as BLAS. The counterpart of cuBLASLt on cuda.
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = 16) buffer v4_ref { vec4 v[]; };

// The defaults are the tile the host uses: MoltenVK sizes the shared arrays below from them.
layout(constant_id = 2) const uint BM = 64;
layout(constant_id = 3) const uint BN = 64;
layout(constant_id = 4) const uint BK = 16;
layout(constant_id = 5) const uint TM = 4; // a multiple of 4
layout(constant_id = 6) const uint TN = 4; // a multiple of 4
// (BM·BK and BN·BK must be multiples of 4 times the workgroup size (BM/TM)·(BN/TN))
layout(constant_id = 7) const uint TA = 0;
layout(constant_id = 8) const uint TB = 0;
layout(constant_id = 9) const uint VA = 0;  // A's rows along its contiguous dimension are 16-byte aligned
layout(constant_id = 10) const uint VB = 0;

layout(push_constant) uniform pc_t {
    uvec2 a, b, c;
    uvec2 sa, sb, sc; // element strides between the matrices of the batch (64-bit); sc: between
                      // the outputs of layer z (split K: the partial products)
    uint M, N, K, lda, ldb, ldc;
    float alpha, beta;
    uint kchunk, ksplit; // split K: layer z = batch·ksplit + s sums k in [s·kchunk, (s+1)·kchunk)
} pc;

shared vec4 As[BK * BM / 4]; // As[k][m], m contiguous
shared vec4 Bs[BK * BN / 4]; // Bs[k][n], n contiguous

// Each invocation moves LA = BM·BK/WG elements of A and LB of B per step, in vec4 when aligned.
const uint LA = BM * BK / (BM / TM * (BN / TN)), LB = BN * BK / (BM / TM * (BN / TN));

float ld_a(f32_ref A, uint m, uint k) {
    if (m >= pc.M || k >= pc.K) return 0.0;
    return TA == 0u ? A.v[m * pc.lda + k] : A.v[k * pc.lda + m];
}
float ld_b(f32_ref B, uint k, uint n) {
    if (n >= pc.N || k >= pc.K) return 0.0;
    return TB == 0u ? B.v[k * pc.ldb + n] : B.v[n * pc.ldb + k];
}

// Element e of a tile, as (row along the contiguous dimension, column): for A with TA = 0 the
// contiguous dimension is k, else m; likewise n / k for B.
void fetch_a(f32_ref A, uint m0, uint k0, uint tid, inout float ra[LA]) {
    [[unroll]] for (uint q = 0u; q < LA / 4u; q++) {
        uint e4 = tid + q * (BM / TM) * (BN / TN); // which group of 4 contiguous elements
        uint outer, inner, span = TA == 0u ? BK : BM;
        inner = (e4 * 4u) % span;
        outer = (e4 * 4u) / span;
        uint m = TA == 0u ? m0 + outer : m0 + inner, k = TA == 0u ? k0 + inner : k0 + outer;
        bool full = TA == 0u ? (m < pc.M && k + 3u < pc.K) : (k < pc.K && m + 3u < pc.M);
        if (VA != 0u && full) {
            uint idx = TA == 0u ? m * pc.lda + k : k * pc.lda + m;
            vec4 v = v4_ref(A).v[idx / 4u];
            ra[q * 4u] = v.x, ra[q * 4u + 1u] = v.y, ra[q * 4u + 2u] = v.z, ra[q * 4u + 3u] = v.w;
        } else {
            [[unroll]] for (uint j = 0u; j < 4u; j++)
                ra[q * 4u + j] = TA == 0u ? ld_a(A, m, k + j) : ld_a(A, m + j, k);
        }
    }
}

void fetch_b(f32_ref B, uint n0, uint k0, uint tid, inout float rb[LB]) {
    [[unroll]] for (uint q = 0u; q < LB / 4u; q++) {
        uint e4 = tid + q * (BM / TM) * (BN / TN);
        uint span = TB == 0u ? BN : BK;
        uint inner = (e4 * 4u) % span, outer = (e4 * 4u) / span;
        uint n = TB == 0u ? n0 + inner : n0 + outer, k = TB == 0u ? k0 + outer : k0 + inner;
        bool full = TB == 0u ? (k < pc.K && n + 3u < pc.N) : (n < pc.N && k + 3u < pc.K);
        if (VB != 0u && full) {
            uint idx = TB == 0u ? k * pc.ldb + n : n * pc.ldb + k;
            vec4 v = v4_ref(B).v[idx / 4u];
            rb[q * 4u] = v.x, rb[q * 4u + 1u] = v.y, rb[q * 4u + 2u] = v.z, rb[q * 4u + 3u] = v.w;
        } else {
            [[unroll]] for (uint j = 0u; j < 4u; j++)
                rb[q * 4u + j] = TB == 0u ? ld_b(B, k, n + j) : ld_b(B, k + j, n);
        }
    }
}

// Registers → shared memory in the [k][m] / [k][n] layouts.
void store_a(uint tid, float ra[LA]) {
    [[unroll]] for (uint q = 0u; q < LA / 4u; q++) {
        uint e4 = tid + q * (BM / TM) * (BN / TN), span = TA == 0u ? BK : BM;
        uint inner = (e4 * 4u) % span, outer = (e4 * 4u) / span;
        if (TA == 0u) { // four k of one m
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                uint idx = (inner + j) * BM + outer;
                As[idx / 4u][idx % 4u] = ra[q * 4u + j];
            }
        } else { // four m of one k
            As[(outer * BM + inner) / 4u] = vec4(ra[q * 4u], ra[q * 4u + 1u], ra[q * 4u + 2u], ra[q * 4u + 3u]);
        }
    }
}

void store_b(uint tid, float rb[LB]) {
    [[unroll]] for (uint q = 0u; q < LB / 4u; q++) {
        uint e4 = tid + q * (BM / TM) * (BN / TN), span = TB == 0u ? BN : BK;
        uint inner = (e4 * 4u) % span, outer = (e4 * 4u) / span;
        if (TB == 0u) { // four n of one k
            Bs[(outer * BN + inner) / 4u] = vec4(rb[q * 4u], rb[q * 4u + 1u], rb[q * 4u + 2u], rb[q * 4u + 3u]);
        } else { // four k of one n
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                uint idx = (inner + j) * BN + outer;
                Bs[idx / 4u][idx % 4u] = rb[q * 4u + j];
            }
        }
    }
}

void main() {
    const uint RN = BN / TN; // invocations along n
    uint tid = gl_LocalInvocationID.x, tr = tid / RN, tc = tid % RN;
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN, z = gl_WorkGroupID.z;
    uint batch = z / pc.ksplit, kb = (z % pc.ksplit) * pc.kchunk, ke = min(pc.K, kb + pc.kchunk);
    f32_ref A = f32_ref(ptr_add_strided(pc.a, batch, pc.sa));
    f32_ref B = f32_ref(ptr_add_strided(pc.b, batch, pc.sb));
    f32_ref C = f32_ref(ptr_add_strided(pc.c, z, pc.sc));
    float acc[TM * TN];
    [[unroll]] for (uint i = 0u; i < TM * TN; i++) acc[i] = 0.0;
    float ra[LA], rb[LB];
    if (kb < ke) {
        fetch_a(A, m0, kb, tid, ra);
        fetch_b(B, n0, kb, tid, rb);
        store_a(tid, ra);
        store_b(tid, rb);
    }
    barrier();
    for (uint k0 = kb; k0 < ke; k0 += BK) {
        bool more = k0 + BK < ke;
        if (more) { // in flight while this step multiplies
            fetch_a(A, m0, k0 + BK, tid, ra);
            fetch_b(B, n0, k0 + BK, tid, rb);
        }
        [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
            vec4 a4[TM / 4u], b4[TN / 4u];
            [[unroll]] for (uint i = 0u; i < TM / 4u; i++) a4[i] = As[(kk * BM + tr * TM) / 4u + i];
            [[unroll]] for (uint j = 0u; j < TN / 4u; j++) b4[j] = Bs[(kk * BN + tc * TN) / 4u + j];
            [[unroll]] for (uint i = 0u; i < TM; i++)
                [[unroll]] for (uint j = 0u; j < TN; j++)
                    acc[i * TN + j] += a4[i / 4u][i % 4u] * b4[j / 4u][j % 4u];
        }
        barrier();
        if (more) {
            store_a(tid, ra);
            store_b(tid, rb);
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < TM; i++) {
        uint gm = m0 + tr * TM + i;
        if (gm >= pc.M) continue;
        [[unroll]] for (uint j = 0u; j < TN; j++) {
            uint gn = n0 + tc * TN + j;
            if (gn >= pc.N) continue;
            uint idx = gm * pc.ldc + gn;
            float v = pc.alpha * acc[i * TN + j];
            if (pc.beta != 0.0) v += pc.beta * C.v[idx];
            C.v[idx] = v;
        }
    }
}
