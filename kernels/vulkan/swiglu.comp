#version 460
// swiglu.comp — SwiGLU on the [gate | up] GEMM output (rows × 2I → rows × I) and its backward,
// in PyTorch's formulas: silu(g)·u; dg = d·u·σ·(1 + g(1 − σ)), du = d·silu(g).
// Counterpart of kernels/cuda/swiglu.cu.
#include "common.glsl"

layout(constant_id = 1) const uint MODE = 0;
layout(constant_id = 2) const uint VEC = 0; // items are four columns: I % 4 = 0, buffers 16-byte aligned
const uint FWD = 0, BWD = 1;

layout(push_constant) uniform pc_t {
    uvec2 out_;  // fwd: out (rows × I); bwd: dgu (rows × 2I)
    uvec2 gu;
    uvec2 dout;  // bwd only
    uint rows, I;
    uvec2 act;   // bwd: silu(g)·u written too (may be null)
} pc;

// One item (a column, or four with VEC) of row r: gate g and up u to out, or with d the
// gradients of both (and silu(g)·u when the backward keeps it). T: float or vec4.
#define SWIGLU_ITEM(T, o, gu, d, a, n_in, i, gi)                         \
    {                                                                    \
        T g = gu.v[gi], u = gu.v[gi + n_in];                             \
        T e = 1.0 + exp_v(-g);                                           \
        if (MODE == FWD) {                                               \
            o.v[i] = g / e * u;                                          \
        } else {                                                         \
            T sig = 1.0 / e, di = d.v[i];                                \
            o.v[gi] = di * u * sig * (1.0 + g * (1.0 - sig));            \
            o.v[gi + n_in] = di * (g / e);                               \
            if (has_act) a.v[i] = g / e * u;                             \
        }                                                                \
    }
float exp_v(float x) { return exp_f(x); }
vec4 exp_v(vec4 x) { return vec4(exp_f(x.x), exp_f(x.y), exp_f(x.z), exp_f(x.w)); }

void main() {
    bool has_act = !is_null(pc.act);
    if (VEC != 0u) {
        f32x4_ref o = f32x4_ref(pc.out_), gu = f32x4_ref(pc.gu), d = f32x4_ref(pc.dout), a = f32x4_ref(pc.act);
        uint I = pc.I / 4u;
        FOR_EACH(i, pc.rows * I) {
            uint gi = (i / I) * 2u * I + i % I;
            SWIGLU_ITEM(vec4, o, gu, d, a, I, i, gi)
        }
        return;
    }
    f32_ref o = f32_ref(pc.out_), gu = f32_ref(pc.gu), d = f32_ref(pc.dout), a = f32_ref(pc.act);
    uint I = pc.I;
    FOR_EACH(i, pc.rows * I) {
        uint gi = (i / I) * 2u * I + i % I;
        SWIGLU_ITEM(float, o, gu, d, a, I, i, gi)
    }
}
