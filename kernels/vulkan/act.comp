#version 460
// act.comp — ACT bookkeeping on the device: resetting halted rows of the carry, the halting
// decision with exploration (the rule of trm/backend/act_rules.h and the Philox4x32-10 block
// of trm/util/philox.h, written with 32-bit halves so that every backend halts the same
// samples) and the Q-continue target.
// The step counter is read from device memory. Counterpart of kernels/cuda/act.cu.
#extension GL_EXT_shader_8bit_storage : require
#include "common.glsl"

layout(buffer_reference, std430, buffer_reference_align = 1) buffer u8_ref { uint8_t v[]; };

layout(constant_id = 1) const uint MODE = 0;
const uint RESET_Z = 0, RESET_ROWS = 1, UPDATE = 2, Q_TARGET = 3;

layout(push_constant) uniform pc_t {
    // reset_z: zH, zL, H_init, L_init, halted (zH/zL may be null)
    // reset_rows: halted, steps, cur_inputs, cur_labels, cur_pid, new_inputs, new_labels, new_pid
    // update: steps, halted, q, rng_step; q_target: target, q_next, steps
    uvec2 p0, p1, p2, p3, p4, p5, p6, p7;
    uint B, T, D, S; // update, q_target: S = halt_max_steps
    uint training, no_act_continue;
    float explore_prob;
    uint pad_;
    uvec2 seed, sample0;
} pc;

// out = Philox4x32-10(key; counter = (hi << 64) | lo), as trm_philox_block.
uvec4 philox(uvec2 key, uvec2 hi, uvec2 lo) {
    uint k0 = key.x, k1 = key.y, c0 = lo.x, c1 = lo.y, c2 = hi.x, c3 = hi.y;
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        uint p0h, p0l, p1h, p1l;
        umulExtended(0xD2511F53u, c0, p0h, p0l);
        umulExtended(0xCD9E8D57u, c2, p1h, p1l);
        uint n0 = p1h ^ c1 ^ k0, n2 = p0h ^ c3 ^ k1;
        c0 = n0;
        c1 = p1l;
        c2 = n2;
        c3 = p0l;
    }
    return uvec4(c0, c1, c2, c3);
}

// trm_act_halts of trm/backend/act_rules.h.
bool act_halts(int steps, int hmax, float q_halt, float q_continue, uvec2 rng_step, uint b) {
    bool h = steps >= hmax;
    if (pc.training != 0u && hmax > 1) {
        h = h || (pc.no_act_continue != 0u ? q_halt > 0.0 : q_halt > q_continue);
        uint lo = pc.sample0.x + b;
        uvec2 row = uvec2(lo, pc.sample0.y + (lo < pc.sample0.x ? 1u : 0u));
        uvec4 r = philox(pc.seed, rng_step, row);
        float u = float(r.x >> 8) * (1.0 / 16777216.0);
        int min_halt = u < pc.explore_prob ? 2 + int(r.y % uint(hmax - 1)) : 0;
        h = h && steps >= min_halt;
    }
    return h;
}

void main() {
    if (MODE == RESET_Z) {
        f32_ref zH = f32_ref(pc.p0), zL = f32_ref(pc.p1), Hi = f32_ref(pc.p2), Li = f32_ref(pc.p3);
        u8_ref halted = u8_ref(pc.p4);
        bool h_on = !is_null(pc.p0), l_on = !is_null(pc.p1);
        uint TD = pc.T * pc.D;
        FOR_EACH(i, pc.B * TD) {
            if (uint(halted.v[i / TD]) == 0u) continue;
            uint d = i % pc.D;
            if (h_on) zH.v[i] = Hi.v[d];
            if (l_on) zL.v[i] = Li.v[d];
        }
    } else if (MODE == RESET_ROWS) {
        u8_ref halted = u8_ref(pc.p0);
        i32_ref steps = i32_ref(pc.p1), ci = i32_ref(pc.p2), cl = i32_ref(pc.p3), cp = i32_ref(pc.p4);
        i32_ref ni = i32_ref(pc.p5), nl = i32_ref(pc.p6), np = i32_ref(pc.p7);
        bool inputs = !is_null(pc.p2) && !is_null(pc.p5), labels = !is_null(pc.p3) && !is_null(pc.p6);
        bool pids = !is_null(pc.p4) && !is_null(pc.p7);
        uint S = max(pc.S, 1u);
        FOR_EACH(i, pc.B * S) {
            uint b = i / S;
            if (uint(halted.v[b]) == 0u) continue;
            if (pc.S > 0u) {
                if (inputs) ci.v[i] = ni.v[i];
                if (labels) cl.v[i] = nl.v[i];
            }
            if (i % S == 0u) {
                steps.v[b] = 0;
                if (pids) cp.v[b] = np.v[b];
            }
        }
    } else if (MODE == UPDATE) {
        i32_ref steps = i32_ref(pc.p0);
        u8_ref halted = u8_ref(pc.p1);
        f32_ref q = f32_ref(pc.p2);
        uvec2 rng_step = u64_ref(pc.p3).v[0];
        int hmax = int(pc.S);
        bool need_q = pc.training != 0u && hmax > 1;
        FOR_EACH(b, pc.B) {
            int s = steps.v[b] + 1;
            steps.v[b] = s;
            float qh = need_q ? q.v[b * 2u] : 0.0, qc = need_q ? q.v[b * 2u + 1u] : 0.0;
            halted.v[b] = uint8_t(act_halts(s, hmax, qh, qc, rng_step, b) ? 1u : 0u);
        }
    } else if (MODE == Q_TARGET) {
        f32_ref target = f32_ref(pc.p0), qn = f32_ref(pc.p1);
        i32_ref steps = i32_ref(pc.p2);
        FOR_EACH(b, pc.B) {
            float qh = qn.v[b * 2u], qc = qn.v[b * 2u + 1u];
            float x = steps.v[b] >= int(pc.S) ? qh : ((qc > qh || isnan(qc)) ? qc : qh);
            target.v[b] = 1.0 / (1.0 + exp_f(-x));
        }
    }
}
