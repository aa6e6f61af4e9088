#version 460
// rope.comp — rotary embeddings applied in place to the q and k heads of the fused QKV
// activation (B, T, 3H, hd), and the transpose rotation for the backward (v untouched).
// Counterpart of kernels/cuda/rope.cu.
#include "common.glsl"

layout(constant_id = 1) const uint MODE = 0;
const uint FWD = 0, BWD = 1;

layout(push_constant) uniform pc_t {
    uvec2 qkv, cos_, sin_;
    uint B, T, H, hd;
} pc;

void main() {
    f32_ref x = f32_ref(pc.qkv), cs = f32_ref(pc.cos_), sn = f32_ref(pc.sin_);
    uint h2 = pc.hd / 2u, H2 = 2u * pc.H;
    FOR_EACH(i, pc.B * pc.T * H2 * h2) {
        uint j = i % h2, k = i / h2;
        uint head = k % H2, row = k / H2, t = row % pc.T;
        uint base = row * 3u * pc.H * pc.hd + head * pc.hd, tb = t * pc.hd;
        float a = x.v[base + j], b = x.v[base + j + h2];
        if (MODE == FWD) {
            x.v[base + j] = a * cs.v[tb + j] - b * sn.v[tb + j];
            x.v[base + j + h2] = b * cs.v[tb + j + h2] + a * sn.v[tb + j + h2];
        } else {
            x.v[base + j] = a * cs.v[tb + j] + b * sn.v[tb + j + h2];
            x.v[base + j + h2] = b * cs.v[tb + j + h2] - a * sn.v[tb + j];
        }
    }
}
