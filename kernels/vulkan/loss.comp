#version 460
// loss.comp — the loss head, one workgroup per sample: per token argmax, stablemax or softmax
// cross entropy with its gradient written straight into dlogits, then the sample's Q-halt and
// Q-continue BCE, dq and its eight metric contributions (fp32 partials that the host sums in
// double, in sample order: no fp64 in shaders). Counterpart of kernels/cuda/loss.cu, whose
// stablemax runs in float64; here it runs in float32 with the same formulas.
#extension GL_EXT_shader_8bit_storage : require
#include "common.glsl"
#include "reduce.glsl"

layout(buffer_reference, std430, buffer_reference_align = 1) buffer u8_ref { uint8_t v[]; };

const uint STABLEMAX = 0u, SOFTMAX = 1u;
const uint M_COUNT = 0, M_ACCURACY = 1, M_EXACT = 2, M_Q_HALT_ACC = 3, M_STEPS = 4, M_LM = 5,
           M_Q_HALT_LOSS = 6, M_Q_CONT_LOSS = 7, NMETRICS = 8;

layout(push_constant) uniform pc_t {
    uvec2 logits, labels, q, q_target, halted, steps;
    uvec2 dlogits, dq, preds, stats; // dlogits, dq, preds may be null; stats: B × 8 floats
    uint B, S, V, P, loss_type;
    float grad_scale;
} pc;

float bce_logits(float x, float t) { return max(x, 0.0) - x * t + log1p_f(exp_f(-abs(x))); }

float stable_s(float v) { return v < 0.0 ? 1.0 / (1.0 - v) : v + 1.0; }

void main() {
    f32_ref logits = f32_ref(pc.logits), dl = f32_ref(pc.dlogits), q = f32_ref(pc.q);
    i32_ref lab = i32_ref(pc.labels), preds = i32_ref(pc.preds);
    bool want_dx = !is_null(pc.dlogits), want_pred = !is_null(pc.preds);
    uint t = gl_LocalInvocationID.x, S = pc.S, V = pc.V, Tt = pc.P + S;
    FOR_EACH_ROW(b, pc.B) {
        float cnt = 0.0;
        for (uint s = t; s < S; s += WG) {
            int l = lab.v[b * S + s];
            cnt += (l >= 0 && uint(l) < V) ? 1.0 : 0.0;
        }
        float n = wg_sum(cnt), div = max(n, 1.0);
        float gs = pc.grad_scale / div;
        if (want_dx)
            for (uint k = t; k < pc.P * V; k += WG) dl.v[b * Tt * V + k] = 0.0;
        float lm = 0.0, ncorr = 0.0;
        for (uint s = t; s < S; s += WG) {
            uint off = (b * Tt + pc.P + s) * V;
            uint best = 0u;
            float xb = logits.v[off];
            for (uint j = 1u; j < V; j++) {
                float x = logits.v[off + j];
                if (x > xb || (isnan(x) && !isnan(xb))) {
                    best = j;
                    xb = x;
                }
            }
            if (want_pred) preds.v[b * S + s] = int(best);
            int li = lab.v[b * S + s];
            if (li < 0 || uint(li) >= V) {
                if (want_dx)
                    for (uint j = 0u; j < V; j++) dl.v[off + j] = 0.0;
                continue;
            }
            uint l = uint(li);
            ncorr += best == l ? 1.0 : 0.0;
            float ce;
            if (pc.loss_type == SOFTMAX) {
                float mx = logits.v[off];
                for (uint j = 1u; j < V; j++) mx = max(mx, logits.v[off + j]);
                float sum = 0.0;
                for (uint j = 0u; j < V; j++) sum += exp_f(logits.v[off + j] - mx);
                ce = -((logits.v[off + l] - mx) - log_f(sum));
                if (want_dx)
                    for (uint j = 0u; j < V; j++) {
                        float p = exp_f(logits.v[off + j] - mx) / sum;
                        dl.v[off + j] = gs * (p - (j == l ? 1.0 : 0.0));
                    }
            } else {
                float sum = 0.0;
                for (uint j = 0u; j < V; j++) sum += stable_s(logits.v[off + j]);
                float sl = stable_s(logits.v[off + l]);
                ce = -log_f(sl / sum);
                if (want_dx)
                    for (uint j = 0u; j < V; j++) {
                        float v = logits.v[off + j], qv = 1.0 - v;
                        float ds = v < 0.0 ? 1.0 / (qv * qv) : 1.0;
                        dl.v[off + j] = gs * (ds / sum - (j == l ? ds / sl : 0.0));
                    }
            }
            lm += ce / div;
        }
        lm = wg_sum(lm);
        float nc = wg_sum(ncorr);
        if (t == 0u) {
            bool seq_ok = nc == n;
            float qh = q.v[b * 2u], qc = q.v[b * 2u + 1u];
            bool valid = uint(u8_ref(pc.halted).v[b]) != 0u && n > 0.0;
            f32_ref m = f32_ref(ptr_add(pc.stats, b * NMETRICS * 4u));
            float ok = seq_ok ? 1.0 : 0.0;
            m.v[M_COUNT] = valid ? 1.0 : 0.0;
            m.v[M_ACCURACY] = valid ? nc / div : 0.0;
            m.v[M_EXACT] = valid && seq_ok ? 1.0 : 0.0;
            m.v[M_Q_HALT_ACC] = valid && ((qh >= 0.0) == seq_ok) ? 1.0 : 0.0;
            m.v[M_STEPS] = valid ? float(i32_ref(pc.steps).v[b]) : 0.0;
            m.v[M_LM] = lm;
            m.v[M_Q_HALT_LOSS] = bce_logits(qh, ok);
            bool has_t = !is_null(pc.q_target);
            float qt = has_t ? f32_ref(pc.q_target).v[b] : 0.0;
            m.v[M_Q_CONT_LOSS] = has_t ? bce_logits(qc, qt) : 0.0;
            if (!is_null(pc.dq)) {
                f32_ref dq = f32_ref(pc.dq);
                dq.v[b * 2u] = pc.grad_scale * 0.5 * (sigmoid_f(qh) - ok);
                dq.v[b * 2u + 1u] = has_t ? pc.grad_scale * 0.5 * (sigmoid_f(qc) - qt) : 0.0;
            }
        }
    }
}
