#version 460
// rope.comp — rotary embeddings applied in place to the q and k heads of the fused QKV
// activation (B, T, 3H, hd), and the transpose rotation for the backward (v untouched).
// Counterpart of kernels/cuda/rope.cu.
#include "common.glsl"

layout(constant_id = 1) const uint MODE = 0;
layout(constant_id = 2) const uint VEC = 0; // items are four pairs: hd % 8 = 0, buffers 16-byte aligned
const uint FWD = 0, BWD = 1;

layout(push_constant) uniform pc_t {
    uvec2 qkv, cos_, sin_;
    uint B, T, H, hd;
} pc;

// Item j (a pair, or four with VEC) of a head's half: x[base + j] and x[base + j + h2] rotated by
// the angle's cos and sin at tb + j (and + h2); indices in units of the item (float or vec4),
// a_ the first element's value before it is overwritten.
#define ROPE_ITEM(x, cs, sn, base, tb, j, h2)                                  \
    {                                                                          \
        uint p0 = base + j, p1 = base + j + h2, c0 = tb + j, c1 = tb + j + h2; \
        if (MODE == FWD) {                                                     \
            x.v[p0] = x.v[p0] * cs.v[c0] - x.v[p1] * sn.v[c0];                 \
            x.v[p1] = x.v[p1] * cs.v[c1] + a_ * sn.v[c1];                      \
        } else {                                                               \
            x.v[p0] = x.v[p0] * cs.v[c0] + x.v[p1] * sn.v[c1];                 \
            x.v[p1] = x.v[p1] * cs.v[c1] - a_ * sn.v[c0];                      \
        }                                                                      \
    }

void main() {
    uint H2 = 2u * pc.H, w = VEC != 0u ? 4u : 1u; // w: floats an item moves
    uint h2 = pc.hd / 2u / w, hd = pc.hd / w, row_len = 3u * pc.H * hd;
    if (VEC != 0u) {
        f32x4_ref x = f32x4_ref(pc.qkv), cs = f32x4_ref(pc.cos_), sn = f32x4_ref(pc.sin_);
        FOR_EACH(i, pc.B * pc.T * H2 * h2) {
            uint j = i % h2, k = i / h2, head = k % H2, row = k / H2;
            uint base = row * row_len + head * hd, tb = (row % pc.T) * hd;
            vec4 a_ = x.v[base + j];
            ROPE_ITEM(x, cs, sn, base, tb, j, h2)
        }
        return;
    }
    f32_ref x = f32_ref(pc.qkv), cs = f32_ref(pc.cos_), sn = f32_ref(pc.sin_);
    FOR_EACH(i, pc.B * pc.T * H2 * h2) {
        uint j = i % h2, k = i / h2, head = k % H2, row = k / H2;
        uint base = row * row_len + head * hd, tb = (row % pc.T) * hd;
        float a_ = x.v[base + j];
        ROPE_ITEM(x, cs, sn, base, tb, j, h2)
    }
}
