#version 460
// swiglu.comp — SwiGLU on the [gate | up] GEMM output (rows × 2I → rows × I) and its backward,
// in PyTorch's formulas: silu(g)·u; dg = d·u·σ·(1 + g(1 − σ)), du = d·silu(g).
// Counterpart of kernels/cuda/swiglu.cu.
#include "common.glsl"

layout(constant_id = 1) const uint MODE = 0;
const uint FWD = 0, BWD = 1;

layout(push_constant) uniform pc_t {
    uvec2 out_;  // fwd: out (rows × I); bwd: dgu (rows × 2I)
    uvec2 gu;
    uvec2 dout;  // bwd only
    uint rows, I;
    uvec2 act;   // bwd: silu(g)·u written too (may be null)
} pc;

void main() {
    f32_ref o = f32_ref(pc.out_), gu = f32_ref(pc.gu), d = f32_ref(pc.dout), a = f32_ref(pc.act);
    bool has_act = !is_null(pc.act);
    uint I = pc.I;
    FOR_EACH(i, pc.rows * I) {
        uint r = i / I, c = i % I, gi = r * 2u * I + c;
        float g = gu.v[gi], u = gu.v[gi + I];
        float e = 1.0 + exp_f(-g);
        if (MODE == FWD) {
            o.v[i] = g / e * u;
        } else {
            float sig = 1.0 / e, di = d.v[i];
            o.v[gi] = di * u * sig * (1.0 + g * (1.0 - sig));
            o.v[gi + I] = di * (g / e);
            if (has_act) a.v[i] = g / e * u;
        }
    }
}
