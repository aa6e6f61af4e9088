#version 460
// gemm.comp — C[i] = alpha·op(A[i])·op(B[i]) + beta·C[i] over a strided batch (one batch
// matrix per workgroup layer z), row-major with leading dimensions, either operand transposed.
// A BM×BN tile of C per workgroup, staged through shared memory BK steps of K at a time (the
// next step's tile is fetched into registers while the current one is multiplied); each of the
// 256 invocations keeps a TM×TN block of C in registers and, per k, reads TM/4 vec4 of A and
// TN/4 vec4 of B from shared memory and adds their outer product. A product with few output
// tiles and a long K (weight gradients: K = every row of the batch) is split along K into
// partial products that elementwise.comp sums in order. beta = 0 never reads C (it may hold
// NaN), as BLAS. The counterpart of cuBLASLt on cuda.
//
// The tile shape is compiled in: CMakeLists.txt builds this file once per shape (glslc -DGEMM_BM=
// ... → gemm_<BM>x<BN>) and backend_vulkan.c picks a module per product. With the shape as
// specialization constants instead, NVIDIA's driver did not unroll the loops over the
// accumulators of an 8×8 block and kept them in local memory (128×128 tiles ran at 2 TFLOP/s),
// and MoltenVK sizes shared arrays from the constants' defaults; compile-time sizes have
// neither problem. What only selects branches stays a specialization constant: the transposes
// and whether an operand may be read or written as aligned vec4 (VA, VB, VC).
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

#if !defined(GEMM_BM) || !defined(GEMM_BN) || !defined(GEMM_BK) || !defined(GEMM_TM) || !defined(GEMM_TN)
#error "gemm.comp is compiled once per tile shape: glslc -DGEMM_BM= -DGEMM_BN= -DGEMM_BK= -DGEMM_TM= -DGEMM_TN="
#endif
#define GEMM_NT ((GEMM_BM / GEMM_TM) * (GEMM_BN / GEMM_TN))
// The host launches GEMM_NT invocations per workgroup (specialization constant 0); each moves
// whole vec4 of both tiles per step, and an invocation's block is whole vec4 along m and n.
#if GEMM_TM % 4 != 0 || GEMM_TN % 4 != 0 || GEMM_BK % 4 != 0
#error "TM, TN and BK must be multiples of 4"
#endif
#if (GEMM_BM * GEMM_BK) % (4 * GEMM_NT) != 0 || (GEMM_BN * GEMM_BK) % (4 * GEMM_NT) != 0
#error "each invocation must move a whole number of vec4 of each tile per step"
#endif

const uint BM = GEMM_BM, BN = GEMM_BN, BK = GEMM_BK, TM = GEMM_TM, TN = GEMM_TN, NT = GEMM_NT;
// An invocation's TM rows are TM/4 groups of 4 consecutive rows, the groups BM/(TM/4) apart
// (likewise its columns): neighbouring invocations then read neighbouring vec4 of shared memory,
// which spreads them over the banks (8 consecutive floats per invocation would not).
const uint GM = TM / 4u, GN = TN / 4u, RN = BN / TN; // RN: invocations along n

layout(constant_id = 2) const uint TA = 0;
layout(constant_id = 3) const uint TB = 0;
layout(constant_id = 4) const uint VA = 0; // A's rows along its contiguous dimension are 16-byte aligned
layout(constant_id = 5) const uint VB = 0;
layout(constant_id = 6) const uint VC = 0; // so are C's rows (and its matrices along z)

layout(buffer_reference, std430, buffer_reference_align = 16) buffer v4_ref { vec4 v[]; };

layout(push_constant) uniform pc_t {
    uvec2 a, b, c;
    uvec2 sa, sb, sc; // element strides between the matrices of the batch (64-bit); sc: between
                      // the outputs of layer z (split K: the partial products)
    uint M, N, K, lda, ldb, ldc;
    float alpha, beta;
    uint kchunk, ksplit; // split K: layer z = batch·ksplit + s sums k in [s·kchunk, (s+1)·kchunk)
} pc;

shared vec4 As[BK * BM / 4u]; // As[k][m], m contiguous: A's tile transposed
shared vec4 Bs[BK * BN / 4u]; // Bs[k][n], n contiguous

// Each invocation moves LA vec4 of A and LB of B per step.
const uint LA = BM * BK / (4u * NT), LB = BN * BK / (4u * NT);

float ld_a(f32_ref A, uint m, uint k) {
    if (m >= pc.M || k >= pc.K) return 0.0;
    return TA == 0u ? A.v[m * pc.lda + k] : A.v[k * pc.lda + m];
}
float ld_b(f32_ref B, uint k, uint n) {
    if (n >= pc.N || k >= pc.K) return 0.0;
    return TB == 0u ? B.v[k * pc.ldb + n] : B.v[n * pc.ldb + k];
}

// vec4 q of an invocation's share of a tile, as (outer, inner): inner runs along the operand's
// contiguous dimension in memory (k for A with TA = 0, else m; n / k for B), in steps of 4.
void fetch_a(f32_ref A, uint m0, uint k0, uint tid, inout vec4 ra[LA]) {
    const uint span = TA == 0u ? BK : BM;
    [[unroll]] for (uint q = 0u; q < LA; q++) {
        uint e = (tid + q * NT) * 4u, inner = e % span, outer = e / span;
        uint m = TA == 0u ? m0 + outer : m0 + inner, k = TA == 0u ? k0 + inner : k0 + outer;
        bool full = TA == 0u ? (m < pc.M && k + 3u < pc.K) : (k < pc.K && m + 3u < pc.M);
        if (VA != 0u && full) {
            ra[q] = v4_ref(A).v[(TA == 0u ? m * pc.lda + k : k * pc.lda + m) / 4u];
        } else if (TA == 0u) {
            ra[q] = vec4(ld_a(A, m, k), ld_a(A, m, k + 1u), ld_a(A, m, k + 2u), ld_a(A, m, k + 3u));
        } else {
            ra[q] = vec4(ld_a(A, m, k), ld_a(A, m + 1u, k), ld_a(A, m + 2u, k), ld_a(A, m + 3u, k));
        }
    }
}

void fetch_b(f32_ref B, uint n0, uint k0, uint tid, inout vec4 rb[LB]) {
    const uint span = TB == 0u ? BN : BK;
    [[unroll]] for (uint q = 0u; q < LB; q++) {
        uint e = (tid + q * NT) * 4u, inner = e % span, outer = e / span;
        uint n = TB == 0u ? n0 + inner : n0 + outer, k = TB == 0u ? k0 + outer : k0 + inner;
        bool full = TB == 0u ? (k < pc.K && n + 3u < pc.N) : (n < pc.N && k + 3u < pc.K);
        if (VB != 0u && full) {
            rb[q] = v4_ref(B).v[(TB == 0u ? k * pc.ldb + n : n * pc.ldb + k) / 4u];
        } else if (TB == 0u) {
            rb[q] = vec4(ld_b(B, k, n), ld_b(B, k, n + 1u), ld_b(B, k, n + 2u), ld_b(B, k, n + 3u));
        } else {
            rb[q] = vec4(ld_b(B, k, n), ld_b(B, k + 1u, n), ld_b(B, k + 2u, n), ld_b(B, k + 3u, n));
        }
    }
}

// Component L of shared S[I] = V, the component chosen by ifs. spirv-opt (glslc -O) does not
// unroll a loop that stores through a dynamic component index, has a switch or a `continue`,
// or holds a loop inside an `if`; the loops here avoid all four, so that every register array
// (acc, ra, rb) ends up as SSA values, not memory.
#define SET_LANE(S, I, L, V)                 \
    {                                        \
        uint i_ = (I), l_ = (L);             \
        if (l_ == 0u) S[i_].x = (V);         \
        else if (l_ == 1u) S[i_].y = (V);    \
        else if (l_ == 2u) S[i_].z = (V);    \
        else S[i_].w = (V);                  \
    }

// Registers → shared memory in the [k][m] / [k][n] layouts: a vec4 along m (A with TA = 1) or n
// (B with TB = 0) goes in whole; one along k is spread over four rows.
void store_a(uint tid, vec4 ra[LA]) {
    const uint span = TA == 0u ? BK : BM;
    [[unroll]] for (uint q = 0u; q < LA; q++) {
        uint e = (tid + q * NT) * 4u, inner = e % span, outer = e / span;
        if (TA == 0u) { // four k of one m
            uint r = (inner * BM + outer) / 4u, l = outer % 4u; // (no loop here: see SET_LANE)
            SET_LANE(As, r, l, ra[q].x) SET_LANE(As, r + BM / 4u, l, ra[q].y)
            SET_LANE(As, r + 2u * BM / 4u, l, ra[q].z) SET_LANE(As, r + 3u * BM / 4u, l, ra[q].w)
        } else { // four m of one k
            As[(outer * BM + inner) / 4u] = ra[q];
        }
    }
}

void store_b(uint tid, vec4 rb[LB]) {
    const uint span = TB == 0u ? BN : BK;
    [[unroll]] for (uint q = 0u; q < LB; q++) {
        uint e = (tid + q * NT) * 4u, inner = e % span, outer = e / span;
        if (TB == 0u) { // four n of one k
            Bs[(outer * BN + inner) / 4u] = rb[q];
        } else { // four k of one n
            uint r = (inner * BN + outer) / 4u, l = outer % 4u;
            SET_LANE(Bs, r, l, rb[q].x) SET_LANE(Bs, r + BN / 4u, l, rb[q].y)
            SET_LANE(Bs, r + 2u * BN / 4u, l, rb[q].z) SET_LANE(Bs, r + 3u * BN / 4u, l, rb[q].w)
        }
    }
}

void main() {
    uint tid = gl_LocalInvocationID.x, tr = tid / RN, tc = tid % RN;
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN, z = gl_WorkGroupID.z;
    uint batch = z / pc.ksplit, kb = (z % pc.ksplit) * pc.kchunk, ke = min(pc.K, kb + pc.kchunk);
    f32_ref A = f32_ref(ptr_add_strided(pc.a, batch, pc.sa));
    f32_ref B = f32_ref(ptr_add_strided(pc.b, batch, pc.sb));
    f32_ref C = f32_ref(ptr_add_strided(pc.c, z, pc.sc));
    // acc[i·GN + p]: row i of the block (group i/4, row i%4 in it), columns group p
    vec4 acc[TM * GN];
    [[unroll]] for (uint i = 0u; i < TM * GN; i++) acc[i] = vec4(0.0);
    vec4 ra[LA], rb[LB];
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
            vec4 a4[GM], b4[GN];
            [[unroll]] for (uint g = 0u; g < GM; g++) a4[g] = As[(kk * BM + g * (BM / GM) + tr * 4u) / 4u];
            [[unroll]] for (uint p = 0u; p < GN; p++) b4[p] = Bs[(kk * BN + p * (BN / GN) + tc * 4u) / 4u];
            [[unroll]] for (uint i = 0u; i < TM; i++)
                [[unroll]] for (uint p = 0u; p < GN; p++) acc[i * GN + p] += a4[i / 4u][i % 4u] * b4[p];
        }
        barrier();
        if (more) {
            store_a(tid, ra);
            store_b(tid, rb);
        }
        barrier();
    }
    // C: a row of the block at a time, in vec4 where C's rows are aligned and the 4 columns exist.
    // (Written without `continue` and with no loop inside an `if`: either kept spirv-opt from
    // unrolling this loop, and then acc went to memory.)
    [[unroll]] for (uint i = 0u; i < TM; i++) {
        uint gm = m0 + (i / 4u) * (BM / GM) + tr * 4u + i % 4u;
        [[unroll]] for (uint p = 0u; p < GN; p++) {
            uint gn = n0 + p * (BN / GN) + tc * 4u, idx = gm * pc.ldc + gn;
            vec4 v = pc.alpha * acc[i * GN + p];
            if (gm >= pc.M) {
                // below the matrix
            } else if (VC != 0u && gn + 3u < pc.N) {
                if (pc.beta != 0.0) v += pc.beta * v4_ref(C).v[idx / 4u];
                v4_ref(C).v[idx / 4u] = v;
            } else {
                if (gn < pc.N) C.v[idx] = pc.beta != 0.0 ? v.x + pc.beta * C.v[idx] : v.x;
                if (gn + 1u < pc.N) C.v[idx + 1u] = pc.beta != 0.0 ? v.y + pc.beta * C.v[idx + 1u] : v.y;
                if (gn + 2u < pc.N) C.v[idx + 2u] = pc.beta != 0.0 ? v.z + pc.beta * C.v[idx + 2u] : v.z;
                if (gn + 3u < pc.N) C.v[idx + 3u] = pc.beta != 0.0 ? v.w + pc.beta * C.v[idx + 3u] : v.w;
            }
        }
    }
}
