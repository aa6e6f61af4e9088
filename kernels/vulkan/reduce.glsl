// reduce.glsl — sums and maxima over one workgroup, or over each aligned segment of one, for
// the kernels that reduce a row per workgroup (rmsnorm, attention, loss, bias gradient) or
// several short rows per workgroup (attention's short-row softmax). Included after
// common.glsl. A fixed tree in shared memory, so the result is the same on every run and
// device. For workgroups of at most 256 invocations (a power of two); every invocation of the
// workgroup must call these (they contain barriers) and each gets its result.
shared float red[256];

// float NAME(float v, uint G): the values of each aligned segment of G invocations (G a power
// of two dividing the workgroup) folded along the tree, INTO(a, b) folding b into a; every
// segment at once, so several short rows share one tree's barriers. GLSL has no templates, so
// the one tree is a macro that each reduction instantiates.
#define SEG_REDUCE(NAME, INTO)                                         \
    float NAME(float v, uint G) {                                      \
        uint t = gl_LocalInvocationID.x, lane = t % G;                 \
        barrier();                                                     \
        red[t] = v;                                                    \
        barrier();                                                     \
        for (uint s = G / 2u; s > 0u; s >>= 1u) {                      \
            if (lane < s) INTO(red[t], red[t + s]);                    \
            barrier();                                                 \
        }                                                              \
        float r = red[t - lane];                                       \
        barrier();                                                     \
        return r;                                                      \
    }

#define WG_ADD_INTO(a, b) a += b
#define WG_MAX_INTO(a, b) a = max(a, b)
SEG_REDUCE(seg_sum, WG_ADD_INTO)
SEG_REDUCE(seg_max, WG_MAX_INTO)

// The whole workgroup as one segment.
float wg_sum(float v) { return seg_sum(v, WG); }
float wg_max(float v) { return seg_max(v, WG); }
