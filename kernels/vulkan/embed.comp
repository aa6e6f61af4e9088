#version 460
// embed.comp — the input embedding (token rows, puzzle rows padded to P·D, learned positions,
// ×√D) and its backward. The token-table gradient is summed per chunk of rows by invocations
// that each own one column of their chunk, then the chunks are added in order: no float
// atomics, the same result every run. Counterpart of kernels/cuda/embed.cu.
#include "common.glsl"

layout(constant_id = 1) const uint MODE = 0;
const uint FWD = 0, TOK_PARTIAL = 1, TOK_REDUCE = 2, POS_BWD = 3, PUZ_BWD = 4;
const float POS_SCALE = 0.707106781;

layout(push_constant) uniform pc_t {
    uvec2 out_;   // fwd: out; tok_partial: work; tok_reduce: d_tok_w; pos: d_pos_w; puz: d_puz_rows
    uvec2 dout;   // backward modes: dout; tok_reduce: work
    uvec2 tokens;
    uvec2 tok_w;
    uvec2 pids;
    uvec2 puz_w;
    uvec2 pos_w;
    uint B, S, P, D, ndim, V, chunk_rows, chunks;
    float scale;
    uint has_pos; // learned positions present (scales the gradient by 1/√2)
} pc;

float embed_g(float g) {
    g *= pc.scale;
    return pc.has_pos != 0u ? g * POS_SCALE : g;
}

void main() {
    f32_ref o = f32_ref(pc.out_), dout = f32_ref(pc.dout);
    i32_ref tok = i32_ref(pc.tokens);
    uint T = pc.P + pc.S, D = pc.D;
    if (MODE == FWD) {
        f32_ref tw = f32_ref(pc.tok_w), pw = f32_ref(pc.puz_w), pos = f32_ref(pc.pos_w);
        i32_ref pid = i32_ref(pc.pids);
        bool puz = pc.ndim > 0u && !is_null(pc.pids);
        FOR_EACH(i, pc.B * T * D) {
            uint d = i % D, bt = i / D, t = bt % T, b = bt / T;
            float v = 0.0;
            if (t < pc.P) {
                uint k = t * D + d;
                if (puz && k < pc.ndim) v = pw.v[uint(pid.v[b]) * pc.ndim + k];
            } else {
                int id = tok.v[b * pc.S + (t - pc.P)];
                if (id >= 0 && uint(id) < pc.V) v = tw.v[uint(id) * D + d];
            }
            if (pc.has_pos != 0u) v = POS_SCALE * (v + pos.v[t * D + d]);
            o.v[i] = v * pc.scale;
        }
    } else if (MODE == TOK_PARTIAL) {
        // invocation (chunk, d) owns work[chunk][·][d]
        FOR_EACH(i, pc.chunks * D) {
            uint d = i % D, c = i / D, wb = c * pc.V * D + d;
            for (uint v = 0u; v < pc.V; v++) o.v[wb + v * D] = 0.0;
            uint r1 = min((c + 1u) * pc.chunk_rows, pc.B * pc.S);
            for (uint r = c * pc.chunk_rows; r < r1; r++) {
                int id = tok.v[r];
                if (id < 0 || uint(id) >= pc.V) continue;
                uint b = r / pc.S, s = r % pc.S;
                o.v[wb + uint(id) * D] += embed_g(dout.v[(b * T + pc.P + s) * D + d]);
            }
        }
    } else if (MODE == TOK_REDUCE) {
        uint n = pc.V * D;
        FOR_EACH(i, n) {
            float s = 0.0;
            for (uint c = 0u; c < pc.chunks; c++) s += dout.v[c * n + i];
            o.v[i] += s;
        }
    } else if (MODE == POS_BWD) {
        uint n = T * D;
        FOR_EACH(i, n) {
            float s = 0.0;
            for (uint b = 0u; b < pc.B; b++) s += embed_g(dout.v[b * n + i]);
            o.v[i] += s;
        }
    } else if (MODE == PUZ_BWD) {
        uint lim = pc.P * D;
        FOR_EACH(i, pc.B * pc.ndim) {
            uint k = i % pc.ndim, b = i / pc.ndim;
            o.v[i] = k < lim ? embed_g(dout.v[b * T * D + k]) : 0.0;
        }
    }
}
