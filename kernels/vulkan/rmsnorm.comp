#version 460
// rmsnorm.comp — RMSNorm with the residual add fused in (y = rms(x + res), rstd saved) and its
// backward dx = rstd·(dy − y·mean(dy·y)), over the first `dim` elements of rows `ld` apart (the
// outputs' ld − dim pads written as zeros). One workgroup per row; the row is re-read rather
// than held, so any width works (D for the channel norm, T for the mlp_t token norm).
// Counterpart of kernels/cuda/rmsnorm.cu.
#include "common.glsl"
#include "reduce.glsl"

layout(constant_id = 1) const uint MODE = 0;
layout(constant_id = 2) const uint VEC = 0; // dim and ld multiples of 4, buffers 16-byte aligned
const uint FWD = 0, BWD = 1;

layout(push_constant) uniform pc_t {
    uvec2 out_;  // fwd: y; bwd: dx
    uvec2 rstd;  // fwd: written (may be null); bwd: read
    uvec2 a;     // fwd: x; bwd: dy
    uvec2 b;     // fwd: res (may be null); bwd: y
    uint rows, dim;
    float eps;
    uint ld;
} pc;

float sq_sum(float v) { return v * v; }
float sq_sum(vec4 v) { return ((v.x * v.x + v.y * v.y) + v.z * v.z) + v.w * v.w; }
float dot_sum(float a, float b) { return a * b; }
float dot_sum(vec4 a, vec4 b) { return ((a.x * b.x + a.y * b.y) + a.z * b.z) + a.w * b.w; }

// Row r's norm (or its gradient) over n items of type T (float, or vec4 with VEC), from base.
#define RMS_ROW(T, o, a, b, base, n)                                                 \
    if (MODE == FWD) {                                                               \
        float ss = 0.0;                                                              \
        for (uint d = t; d < n; d += WG) {                                           \
            T v = has_b ? a.v[base + d] + b.v[base + d] : a.v[base + d];             \
            ss += sq_sum(v);                                                         \
        }                                                                            \
        ss = wg_sum(ss);                                                             \
        float s = 1.0 / sqrt(ss / float(pc.dim) + pc.eps);                           \
        for (uint d = t; d < n; d += WG) {                                           \
            T v = has_b ? a.v[base + d] + b.v[base + d] : a.v[base + d];             \
            o.v[base + d] = v * s;                                                   \
        }                                                                            \
        if (t == 0u && !is_null(pc.rstd)) rs.v[r] = s;                               \
    } else {                                                                         \
        float dot = 0.0;                                                             \
        for (uint d = t; d < n; d += WG) dot += dot_sum(a.v[base + d], b.v[base + d]); \
        dot = wg_sum(dot);                                                           \
        float mean = dot / float(pc.dim), s = rs.v[r];                               \
        for (uint d = t; d < n; d += WG) o.v[base + d] = s * (a.v[base + d] - b.v[base + d] * mean); \
    }

void main() {
    f32_ref o = f32_ref(pc.out_), a = f32_ref(pc.a), b = f32_ref(pc.b), rs = f32_ref(pc.rstd);
    f32x4_ref o4 = f32x4_ref(pc.out_), a4 = f32x4_ref(pc.a), b4 = f32x4_ref(pc.b);
    bool has_b = !is_null(pc.b);
    uint t = gl_LocalInvocationID.x;
    FOR_EACH_ROW(r, pc.rows) {
        uint base = r * pc.ld;
        for (uint d = pc.dim + t; d < pc.ld; d += WG) o.v[base + d] = 0.0;
        if (VEC != 0u) {
            RMS_ROW(vec4, o4, a4, b4, base / 4u, pc.dim / 4u)
        } else {
            RMS_ROW(float, o, a, b, base, pc.dim)
        }
    }
}
