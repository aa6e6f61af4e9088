#version 460
// attention.comp — the elementwise parts of non-causal attention around the backend's batched
// GEMMs: row softmax with the log-sum-exp saved (rows of T ≤ 128: 32 invocations a row), its
// recomputation from the lse in the backward, rowsum(dO∘O) and dS = P∘(dP − rowsum). Scores are
// one head's (B, T, T) at a time (head h of H); lse and rowsums are (B, H, T). Counterpart of
// kernels/cuda/attention.cu.
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "reduce.glsl"

layout(constant_id = 1) const uint MODE = 0;
const uint SOFTMAX_LSE = 0, EXP_LSE = 1, ROWDOT = 2, DS = 3, SOFTMAX_LSE_SHORT = 4;
// SOFTMAX_LSE_SHORT: rows of at most 4·SEG scores, SEG invocations a row, WG/SEG rows a group
const uint SEG = 32u;

layout(push_constant) uniform pc_t {
    uvec2 s;    // softmax_lse, exp_lse: scores in place; ds: dP in place; rowdot: dr
    uvec2 lse;  // softmax_lse: written; exp_lse: read; ds: dr
    uvec2 p;    // ds: P; rowdot: dout
    uvec2 o;    // rowdot: out
    uint B, T, H, h, hd;
} pc;

// The lse/rowsum index of score row r = b·T + i of head h.
uint head_row(uint r) { return ((r / pc.T) * pc.H + pc.h) * pc.T + r % pc.T; }

// Softmax with the lse of rows of T ≤ 4·SEG scores: each invocation holds up to four of its row
// in registers, so the scores are read once and written once (SOFTMAX_LSE reads them twice more).
void softmax_short(f32_ref S, f32_ref L, uint T) {
    uint t = gl_LocalInvocationID.x, lane = t % SEG, per = WG / SEG;
    for (uint r0 = gl_WorkGroupID.x * per; r0 < pc.B * T; r0 += gl_NumWorkGroups.x * per) {
        uint r = r0 + t / SEG, base = r * T;
        bool row = r < pc.B * T;
        float x[4], mx = -1.0 / 0.0;
        [[unroll]] for (uint q = 0u; q < 4u; q++) {
            uint j = lane + q * SEG;
            x[q] = -1.0 / 0.0;
            if (row && j < T) x[q] = S.v[base + j];
            mx = max(mx, x[q]);
        }
        mx = seg_max(mx, SEG);
        float sum = 0.0;
        [[unroll]] for (uint q = 0u; q < 4u; q++) {
            x[q] = lane + q * SEG < T ? exp_f(x[q] - mx) : 0.0;
            sum += x[q];
        }
        sum = seg_sum(sum, SEG);
        float inv = 1.0 / sum;
        [[unroll]] for (uint q = 0u; q < 4u; q++)
            if (row && lane + q * SEG < T) S.v[base + lane + q * SEG] = x[q] * inv;
        if (row && lane == 0u) L.v[head_row(r)] = mx + log_f(sum);
    }
}

void main() {
    f32_ref S = f32_ref(pc.s), L = f32_ref(pc.lse);
    uint T = pc.T;
    if (MODE == SOFTMAX_LSE_SHORT) {
        softmax_short(S, L, T);
    } else if (MODE == SOFTMAX_LSE) {
        uint t = gl_LocalInvocationID.x;
        FOR_EACH_ROW(r, pc.B * T) {
            uint base = r * T;
            float mx = -1.0 / 0.0;
            for (uint j = t; j < T; j += WG) mx = max(mx, S.v[base + j]);
            mx = wg_max(mx);
            float sum = 0.0;
            for (uint j = t; j < T; j += WG) {
                float e = exp_f(S.v[base + j] - mx);
                S.v[base + j] = e;
                sum += e;
            }
            sum = wg_sum(sum);
            float inv = 1.0 / sum;
            for (uint j = t; j < T; j += WG) S.v[base + j] *= inv;
            if (t == 0u) L.v[head_row(r)] = mx + log_f(sum);
        }
    } else if (MODE == EXP_LSE) {
        FOR_EACH(i, pc.B * T * T) S.v[i] = exp_f(S.v[i] - L.v[head_row(i / T)]);
    } else if (MODE == ROWDOT) {
        f32_ref g = f32_ref(pc.p), o = f32_ref(pc.o);
        FOR_EACH(r, pc.B * T * pc.H) { // r = (b·T + i)·H + h
            float s = 0.0;
            for (uint c = 0u; c < pc.hd; c++) s += g.v[r * pc.hd + c] * o.v[r * pc.hd + c];
            uint h = r % pc.H, bi = r / pc.H, i = bi % T, b = bi / T;
            S.v[(b * pc.H + h) * T + i] = s;
        }
    } else if (MODE == DS) {
        f32_ref P = f32_ref(pc.p);
        FOR_EACH(i, pc.B * T * T) S.v[i] = P.v[i] * (S.v[i] - L.v[head_row(i / T)]);
    }
}
