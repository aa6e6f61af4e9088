// common.glsl — what every mps compute shader shares: device pointers, 64-bit address
// arithmetic without 64-bit integers, grid-stride indexing and the float math the GLSL
// built-ins leave too loose. Included by each kernels/vulkan/<op>.comp.
//
// Memory is reached through buffer device addresses (GL_EXT_buffer_reference): the host
// passes raw addresses in push constants, so a kernel can use any interior pointer of an
// allocation and no descriptor range limit (128 MiB on lavapipe) applies. Addresses travel
// as uvec2 (low, high) so no shader needs the Int64 capability; nothing here uses fp64 or
// float atomics (MoltenVK has no fp64, and sums must be deterministic) and no subgroup
// operation is used, so the subgroup size (8 on lavapipe, 32 on Apple GPUs) never matters.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer f32_ref { float v[]; };
// The same memory four floats at a time, for kernels whose host checked 16-byte alignment
// (specialization constant VEC): fewer memory instructions and index divisions per element.
layout(buffer_reference, std430, buffer_reference_align = 16) buffer f32x4_ref { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer i32_ref { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer u32_ref { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer u64_ref { uvec2 v[]; };

// The workgroup size of every kernel is specialization constant 0 (1-D), so the host picks it
// per device without a second copy of the shader.
layout(local_size_x_id = 0) in;
#define WG gl_WorkGroupSize.x

bool is_null(uvec2 p) { return (p.x | p.y) == 0u; }

// p + bytes, carrying into the high word.
uvec2 ptr_add(uvec2 p, uint bytes) {
    uint lo = p.x + bytes;
    return uvec2(lo, p.y + (lo < p.x ? 1u : 0u));
}

// p + idx·stride·4 bytes for a 64-bit element stride (lo, hi): the start of matrix idx of a
// strided batch, whatever the product's size.
uvec2 ptr_add_strided(uvec2 p, uint idx, uvec2 stride) {
    uint hi, lo;
    umulExtended(idx, stride.x, hi, lo);
    hi += idx * stride.y;
    // ×4 bytes: shift the 64-bit (hi, lo) left by 2
    hi = (hi << 2) | (lo >> 30);
    lo = lo << 2;
    uint nlo = p.x + lo;
    return uvec2(nlo, p.y + hi + (nlo < p.x ? 1u : 0u));
}

// Grid-stride loops over n items, one invocation per item at a time.
#define FOR_EACH(i, n) \
    for (uint i = gl_GlobalInvocationID.x; i < (n); i += gl_NumWorkGroups.x * WG)
// One workgroup per row, rows in steps of the grid.
#define FOR_EACH_ROW(r, rows) \
    for (uint r = gl_WorkGroupID.x; r < (rows); r += gl_NumWorkGroups.x)

// ---- float math with known accuracy -----------------------------------------------------
// Vulkan allows exp/log 3 ULP (more for large |x|) and atan 4096 ULP; the cpu backend and the
// reference use correctly rounded libm. These are Cephes' single-precision algorithms (≈1 ULP),
// written with plain arithmetic so every driver computes them the same way.

// exp: the range reduction, polynomial and scaling are kernels/cpu/exp_poly.h, the text the
// cpu backend's vectorised exp expands too (glslc -I kernels/cpu).
#include "exp_poly.h"

float exp_f(float x) {
    x = clamp(x, EXP_X_MIN, EXP_X_MAX);
    float fx = floor(x * EXP_LOG2E + 0.5);
    float r = EXP_REDUCE(x, fx);
    float z = r * r;
    float y = EXP_POLY(r, z);
    int n = int(fx);
    return EXP_SCALE(y, n, intBitsToFloat);
}

// Natural log for x > 0 (0 → -inf, NaN through).
float log_f(float x) {
    if (!(x > 0.0)) return x == 0.0 ? -1.0 / 0.0 : (x - x) / (x - x);
    if (isinf(x)) return x;
    int e;
    float m = frexp(x, e); // x = m·2^e, m in [0.5, 1)
    if (m < 0.70710678118654752) {
        e -= 1;
        m = m + m - 1.0;
    } else {
        m = m - 1.0;
    }
    float z = m * m;
    float y = 7.0376836292E-2;
    y = y * m - 1.1514610310E-1;
    y = y * m + 1.1676998740E-1;
    y = y * m - 1.2420140846E-1;
    y = y * m + 1.4249322787E-1;
    y = y * m - 1.6668057665E-1;
    y = y * m + 2.0000714765E-1;
    y = y * m - 2.4999993993E-1;
    y = y * m + 3.3333331174E-1;
    y = y * m * z;
    float fe = float(e);
    y += -2.12194440e-4 * fe;
    y += -0.5 * z;
    return m + y + 0.693359375 * fe;
}

// log(1 + u) without the cancellation of log(1 + u) for small u (Goldberg's trick).
float log1p_f(float u) {
    float w = 1.0 + u;
    if (w == 1.0) return u;
    return log_f(w) * (u / (w - 1.0));
}

// atan(x) for x >= 0
float atan_pos(float x) {
    float y0 = 0.0;
    if (x > 2.414213562373095) {
        y0 = 1.5707963267948966;
        x = -1.0 / x;
    } else if (x > 0.4142135623730950) {
        y0 = 0.7853981633974483;
        x = (x - 1.0) / (x + 1.0);
    }
    float z = x * x;
    float p = 8.05374449538e-2;
    p = p * z - 1.38776856032E-1;
    p = p * z + 1.99777106478E-1;
    p = p * z - 3.33329491539E-1;
    return y0 + (p * z * x + x);
}

// atan2(y, x) with C's quadrant and signed-zero rules for finite arguments.
float atan2_f(float y, float x) {
    const float PI = 3.14159265358979323846;
    if (x == 0.0) {
        if (y == 0.0) return (floatBitsToInt(x) < 0) ? (floatBitsToInt(y) < 0 ? -PI : PI) : y;
        return y > 0.0 ? PI / 2.0 : -PI / 2.0;
    }
    float a = atan_pos(abs(y) / abs(x));
    if (x < 0.0) a = PI - a;
    return floatBitsToInt(y) < 0 ? -a : a;
}

float sigmoid_f(float x) { return 1.0 / (1.0 + exp_f(-x)); }
