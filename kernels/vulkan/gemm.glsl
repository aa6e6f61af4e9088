// gemm.glsl — C[i] = alpha·op(A[i])·op(B[i]) + beta·C[i] over a strided batch (one batch matrix
// per workgroup layer z), row-major with leading dimensions, either operand transposed; beta = 0
// never reads C (it may hold NaN), as BLAS. The counterpart of cuBLASLt on cuda. A product with
// few output tiles and a long K (weight gradients: K = every row of the batch) is split along K
// into partial products that elementwise.comp sums in order.
//
// GEMM_BM × GEMM_BM tiles of C (128 or 64), GEMM_BK steps of K at a time, GEMM_TM × GEMM_TM sums
// per invocation (8 or 4; 16 × 16 invocations), double-buffered through registers: the next
// step's tile is fetched while this one is multiplied. The tile is compiled in (gemm*.comp
// define it), not a specialization constant: with specialization constants NVIDIA's driver kept
// an 8×8 block's sums in local memory (2 TFLOP/s), and MoltenVK sizes shared arrays from their
// defaults. Transposes and vec4 alignment stay specialization constants.
//
// No operand is transposed on its way into shared memory: a tile is kept in the layout it has
// in memory (A with TA = 0 and B with TB = 1 as rows of K, the others as rows of M or N), so
// every store to shared memory is a whole vec4. The inner loop reads four steps of K at a time:
// a K-major tile gives one vec4 (four k) per row an invocation owns, an M-major tile one vec4
// (four rows) per k. Which rows an invocation owns follows from the layout: rows t, t+16, …
// of a K-major tile (eight invocations of a quarter warp read eight consecutive rows, BK+4
// floats apart: distinct banks), rows 4t..4t+3 (and BM/2+4t.. with 8) of an M-major one
// (consecutive vec4). Measured against other layouts on an H200: bench/README.md.
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = 16) buffer v4_ref { vec4 v[]; };

#if !defined(GEMM_BK) || !defined(GEMM_BM) || !defined(GEMM_TM)
#error "gemm.glsl needs GEMM_BM (tile: 128 or 64), GEMM_TM (sums per invocation: 8 or 4), GEMM_BK (16 or 32)"
#endif
#if GEMM_BM / GEMM_TM != 16
#error "16 x 16 invocations a tile"
#endif
const uint BM = GEMM_BM, BN = GEMM_BM, BK = GEMM_BK, TM = GEMM_TM, TN = GEMM_TM;
const uint GR = TM / 4u; // an M-major tile's groups of 4 rows per invocation, BM/GR apart
const uint NT = (BM / TM) * (BN / TN); // invocations: specialization constant 0 must be 256
const uint KS = BK + 4u;               // row stride of a K-major tile (floats), see above
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

// Either layout fits: BM·KS ≥ BK·BM.
shared vec4 As[BM * KS / 4u];
shared vec4 Bs[BN * KS / 4u];

const uint L4 = BM * BK / 4u / NT; // vec4 of each operand an invocation moves per step (1, 2 or 4)

// Group q of an invocation's share of a tile as (r, k) of its first element; a group is four
// elements along the operand's contiguous dimension (k when kmajor, else r).
uvec2 group_at(uint tid, uint q, bool kmajor, uint rows) {
    uint e4 = tid + q * NT;
    return kmajor ? uvec2(e4 / (BK / 4u), (e4 % (BK / 4u)) * 4u) : uvec2((e4 % (rows / 4u)) * 4u, e4 / (rows / 4u));
}

// Four elements of row `row` of a row-major operand X from column `col` on, zeros outside
// nrow × ncol. (No loops inside ifs, no `continue`, no stores through a dynamic component:
// spirv-opt (glslc -O) then unrolls every loop over registers and keeps acc, fa, fb, ra and rb
// as SSA values. Otherwise the sums lived in memory: 0.5 TFLOP/s on an H100.)
vec4 fetch4(f32_ref X, uint ld, uint row, uint col, uint nrow, uint ncol, bool vec) {
    uint at = row * ld + col;
    bool in_row = row < nrow;
    if (vec && in_row && col + 3u < ncol) return v4_ref(X).v[at / 4u];
    vec4 v = vec4(0.0);
    if (in_row && col < ncol) v.x = X.v[at];
    if (in_row && col + 1u < ncol) v.y = X.v[at + 1u];
    if (in_row && col + 2u < ncol) v.z = X.v[at + 2u];
    if (in_row && col + 3u < ncol) v.w = X.v[at + 3u];
    return v;
}

// A's tile at (m0, k0): TA = 0 stores A as M rows of K (k-major), TA = 1 as K rows of M.
void fetch_a(f32_ref A, uint m0, uint k0, uint ke, uint tid, inout vec4 r[L4]) {
    [[unroll]] for (uint q = 0u; q < L4; q++) {
        uvec2 g = group_at(tid, q, TA == 0u, BM);
        r[q] = TA == 0u ? fetch4(A, pc.lda, m0 + g.x, k0 + g.y, pc.M, ke, VA != 0u)
                        : fetch4(A, pc.lda, k0 + g.y, m0 + g.x, ke, pc.M, VA != 0u);
    }
}
// B's tile at (k0, n0): TB = 1 stores B as N rows of K (k-major), TB = 0 as K rows of N.
void fetch_b(f32_ref B, uint n0, uint k0, uint ke, uint tid, inout vec4 r[L4]) {
    [[unroll]] for (uint q = 0u; q < L4; q++) {
        uvec2 g = group_at(tid, q, TB != 0u, BN);
        r[q] = TB != 0u ? fetch4(B, pc.ldb, n0 + g.x, k0 + g.y, pc.N, ke, VB != 0u)
                        : fetch4(B, pc.ldb, k0 + g.y, n0 + g.x, ke, pc.N, VB != 0u);
    }
}
void store_a(uint tid, vec4 r[L4]) {
    [[unroll]] for (uint q = 0u; q < L4; q++) {
        uvec2 g = group_at(tid, q, TA == 0u, BM);
        As[(TA == 0u ? g.x * KS + g.y : g.y * BM + g.x) / 4u] = r[q];
    }
}
void store_b(uint tid, vec4 r[L4]) {
    [[unroll]] for (uint q = 0u; q < L4; q++) {
        uvec2 g = group_at(tid, q, TB != 0u, BN);
        Bs[(TB != 0u ? g.x * KS + g.y : g.y * BN + g.x) / 4u] = r[q];
    }
}

// The tile row of output row i (0..TM-1) of invocation t: see the header.
uint own(uint t, uint i, bool kmajor) { return kmajor ? t + 16u * i : 4u * t + (i % 4u) + (BM / GR) * (i / 4u); }

// The products of the step of K in shared memory into acc.
void multiply(uint tr, uint tc, inout float acc[TM * TN]) {
    const bool ka = TA == 0u, kb_ = TB != 0u; // k-major tiles
    [[unroll]] for (uint kg = 0u; kg < BK; kg += 4u) {
        // fa[i]: row i's four k (k-major) or, at [GR·q + h], rows 4tr + h·BM/GR.. at k = kg+q
        vec4 fa[TM], fb[TN];
        [[unroll]] for (uint i = 0u; i < TM; i++)
            fa[i] = ka ? As[(own(tr, i, true) * KS + kg) / 4u] : As[((kg + i / GR) * BM + 4u * tr + (BM / GR) * (i % GR)) / 4u];
        [[unroll]] for (uint j = 0u; j < TN; j++)
            fb[j] = kb_ ? Bs[(own(tc, j, true) * KS + kg) / 4u] : Bs[((kg + j / GR) * BN + 4u * tc + (BN / GR) * (j % GR)) / 4u];
        [[unroll]] for (uint q = 0u; q < 4u; q++)
            [[unroll]] for (uint i = 0u; i < TM; i++) {
                float a = ka ? fa[i][q] : fa[GR * q + i / 4u][i % 4u];
                [[unroll]] for (uint j = 0u; j < TN; j++) {
                    float bv = kb_ ? fb[j][q] : fb[GR * q + j / 4u][j % 4u];
                    acc[i * TN + j] += a * bv;
                }
            }
    }
}

void main() {
    // A warp covers 4 rows × 8 columns of invocations (warps 4 × 2 over the 16 × 16): fewer
    // distinct shared-memory addresses per load than 2 × 16.
    uint tid = gl_LocalInvocationID.x, w = tid / 32u, lane = tid % 32u;
    uint tr = (w / 2u) * 4u + lane / 8u, tc = (w % 2u) * 8u + lane % 8u;
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN, z = gl_WorkGroupID.z;
    uint batch = z / pc.ksplit, kb = (z % pc.ksplit) * pc.kchunk, ke = min(pc.K, kb + pc.kchunk);
    f32_ref A = f32_ref(ptr_add_strided(pc.a, batch, pc.sa));
    f32_ref B = f32_ref(ptr_add_strided(pc.b, batch, pc.sb));
    f32_ref C = f32_ref(ptr_add_strided(pc.c, z, pc.sc));
    const bool ka = TA == 0u, kb_ = TB != 0u;
    float acc[TM * TN];
    [[unroll]] for (uint i = 0u; i < TM * TN; i++) acc[i] = 0.0;
    vec4 ra[L4], rb[L4];
    if (kb < ke) {
        fetch_a(A, m0, kb, ke, tid, ra);
        fetch_b(B, n0, kb, ke, tid, rb);
        store_a(tid, ra);
        store_b(tid, rb);
    }
    barrier();
    for (uint k0 = kb; k0 < ke; k0 += BK) {
        bool more = k0 + BK < ke;
        if (more) { // in flight while this step multiplies
            fetch_a(A, m0, k0 + BK, ke, tid, ra);
            fetch_b(B, n0, k0 + BK, ke, tid, rb);
        }
        multiply(tr, tc, acc);
        barrier(); // every read of the tile done before it is refilled
        if (more) {
            store_a(tid, ra);
            store_b(tid, rb);
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < TM; i++)
        [[unroll]] for (uint j = 0u; j < TN; j++) {
            uint gm = m0 + own(tr, i, ka), gn = n0 + own(tc, j, kb_), idx = gm * pc.ldc + gn;
            if (gm < pc.M && gn < pc.N) {
                float v = pc.alpha * acc[i * TN + j];
                if (pc.beta != 0.0) v += pc.beta * C.v[idx];
                C.v[idx] = v;
            }
        }
}
