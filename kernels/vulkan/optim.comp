#version 460
// optim.comp — optimiser updates over the flat fp32 masters: AdamATan2 over every weight in one
// dispatch, sparse sign-SGD on the puzzle rows used this step (rows grouped by id, summed in
// batch order as scatter_add does; the workgroup of an id's first row owns that id), and the
// EMA shadow. Counterpart of kernels/cuda/optim.cu.
#include "common.glsl"

layout(constant_id = 1) const uint MODE = 0;
const uint ADAM = 0, SIGN_SGD = 1, EMA = 2;

layout(push_constant) uniform pc_t {
    uvec2 p;  // adam: weights; sign_sgd: weight table; ema: shadow
    uvec2 g;  // adam: grad; sign_sgd: grad rows; ema: weights
    uvec2 m;  // adam: first moment; sign_sgd: ids
    uvec2 v;  // adam: second moment
    uint n, ndim;
    float lr, decay, w1, w2, bc1, bc2s; // ema: w1 = 1 − rate, w2 = rate
} pc;

shared uint dup;

void main() {
    f32_ref p = f32_ref(pc.p), g = f32_ref(pc.g);
    if (MODE == ADAM) {
        f32_ref m = f32_ref(pc.m), v = f32_ref(pc.v);
        FOR_EACH(i, pc.n) {
            float gi = g.v[i], mi = m.v[i] + pc.w1 * (gi - m.v[i]), vi = v.v[i] + pc.w2 * (gi * gi - v.v[i]);
            m.v[i] = mi;
            v.v[i] = vi;
            p.v[i] = p.v[i] * pc.decay - pc.lr * atan2_f(mi / pc.bc1, sqrt(vi) / pc.bc2s);
        }
    } else if (MODE == SIGN_SGD) {
        i32_ref ids = i32_ref(pc.m);
        uint t = gl_LocalInvocationID.x;
        FOR_EACH_ROW(i, pc.n) {
            int id = ids.v[i];
            if (t == 0u) dup = 0u;
            barrier();
            for (uint j = t; j < i; j += WG)
                if (ids.v[j] == id) atomicOr(dup, 1u);
            barrier();
            bool owner = id >= 0 && dup == 0u;
            barrier();
            if (!owner) continue;
            uint row = uint(id) * pc.ndim;
            for (uint d = t; d < pc.ndim; d += WG) {
                float s = 0.0;
                for (uint j = i; j < pc.n; j++)
                    if (ids.v[j] == id) s += g.v[j * pc.ndim + d];
                float sg = float(s > 0.0) - float(s < 0.0);
                p.v[row + d] = p.v[row + d] * pc.decay - pc.lr * sg;
            }
        }
    } else if (MODE == EMA) {
        FOR_EACH(i, pc.n) p.v[i] = pc.w1 * g.v[i] + pc.w2 * p.v[i];
    }
}
