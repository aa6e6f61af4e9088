#version 460
// elementwise.comp — the plain elementwise ops of backend.h: add, axpy, device copies (whole
// aligned vec4; the host copies the rest with a transfer command), batched transpose, bias and
// its gradient, and the sum of a split-K GEMM's partial products (specialization constant MODE
// picks one). Counterpart of kernels/cuda/elementwise.cu.
#include "common.glsl"
#include "reduce.glsl"

layout(constant_id = 1) const uint MODE = 0;
layout(constant_id = 2) const uint VEC = 0; // add, axpy, copy: n counts vec4 (buffers 16-byte aligned)
const uint ADD = 0, AXPY = 1, TRANSPOSE = 2, BIAS_FWD = 3, BIAS_BWD = 4, SPLITK_SUM = 5, COPY = 6;

layout(push_constant) uniform pc_t {
    uvec2 y;    // add, axpy, bias_fwd, copy: y; transpose: out; bias_bwd: dbias
    uvec2 x1;   // add: x1; axpy, copy: x; transpose: in; bias_fwd: bias; bias_bwd: dy
    uvec2 x2;   // add: x2
    uint n;     // add, axpy, splitk_sum: elements (add, axpy, copy with VEC: vec4); transpose: the input's row stride
    uint rows, cols, ld; // transpose: ld is the output's row stride (≥ rows; zeros past rows)
    float alpha;
    float beta; // splitk_sum: C = alpha·Σ partials + beta·C (C unread when beta = 0)
    uint ksplit;
    uint pad_;
    uvec2 sc;   // splitk_sum: element stride between the batch's C matrices
} pc;

// 32×32 tiles through shared memory (one column of padding against bank conflicts); the
// workgroup is 256 invocations seen as 32×8. The tiles span the output rows' full stride, so
// the ones past `rows` write the pads' zeros.
shared float tile[32 * 33];

void transpose_tile() {
    uint ldi = pc.n, ldo = pc.ld;
    f32_ref src = f32_ref(ptr_add_strided(pc.x1, gl_WorkGroupID.z, uvec2(pc.rows * ldi, 0u)));
    f32_ref dst = f32_ref(ptr_add_strided(pc.y, gl_WorkGroupID.z, uvec2(pc.cols * ldo, 0u)));
    uint tx = gl_LocalInvocationID.x % 32u, ty = gl_LocalInvocationID.x / 32u;
    uint c0 = gl_WorkGroupID.x * 32u, r0 = gl_WorkGroupID.y * 32u;
    for (uint k = ty; k < 32u; k += 8u) {
        uint r = r0 + k, c = c0 + tx;
        if (r < pc.rows && c < pc.cols) tile[k * 33u + tx] = src.v[r * ldi + c];
    }
    barrier();
    for (uint k = ty; k < 32u; k += 8u) {
        uint c = c0 + k, r = r0 + tx;
        if (c < pc.cols && r < ldo) dst.v[c * ldo + r] = r < pc.rows ? tile[tx * 33u + k] : 0.0;
    }
}

void main() {
    if (VEC != 0u) {
        f32x4_ref y = f32x4_ref(pc.y), a = f32x4_ref(pc.x1), b = f32x4_ref(pc.x2);
        if (MODE == ADD) FOR_EACH(i, pc.n) y.v[i] = a.v[i] + b.v[i];
        if (MODE == AXPY) FOR_EACH(i, pc.n) y.v[i] += pc.alpha * a.v[i];
        if (MODE == COPY) FOR_EACH(i, pc.n) y.v[i] = a.v[i];
        return;
    }
    if (MODE == ADD) {
        f32_ref y = f32_ref(pc.y), a = f32_ref(pc.x1), b = f32_ref(pc.x2);
        FOR_EACH(i, pc.n) y.v[i] = a.v[i] + b.v[i];
    } else if (MODE == AXPY) {
        f32_ref y = f32_ref(pc.y), x = f32_ref(pc.x1);
        FOR_EACH(i, pc.n) y.v[i] += pc.alpha * x.v[i];
    } else if (MODE == TRANSPOSE) {
        transpose_tile();
    } else if (MODE == BIAS_FWD) {
        f32_ref y = f32_ref(pc.y), bias = f32_ref(pc.x1);
        FOR_EACH(i, pc.rows * pc.cols) {
            uint r = i / pc.cols, c = i % pc.cols;
            y.v[r * pc.ld + c] += bias.v[c];
        }
    } else if (MODE == SPLITK_SUM) {
        // y: C (rows × cols, row stride ld, batch stride sc); x1: the partials, (batch·ksplit) × rows × cols
        f32_ref w = f32_ref(pc.x1);
        uint mn = pc.rows * pc.cols;
        FOR_EACH(i, pc.n) {
            uint b = i / mn, r = i % mn;
            float s = 0.0;
            for (uint k = 0u; k < pc.ksplit; k++) s += w.v[(b * pc.ksplit + k) * mn + r];
            f32_ref C = f32_ref(ptr_add_strided(pc.y, b, pc.sc));
            uint idx = (r / pc.cols) * pc.ld + r % pc.cols;
            float v = pc.alpha * s;
            if (pc.beta != 0.0) v += pc.beta * C.v[idx];
            C.v[idx] = v;
        }
    } else if (MODE == BIAS_BWD) {
        // one workgroup per column: its rows summed in a fixed order
        f32_ref db = f32_ref(pc.y), dy = f32_ref(pc.x1);
        FOR_EACH_ROW(c, pc.cols) {
            float s = 0.0;
            for (uint r = gl_LocalInvocationID.x; r < pc.rows; r += WG) s += dy.v[r * pc.ld + c];
            s = wg_sum(s);
            if (gl_LocalInvocationID.x == 0u) db.v[c] += s;
        }
    }
}
