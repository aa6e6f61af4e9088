// reduce.glsl — sums and maxima over one workgroup for the kernels that reduce a row per
// workgroup (rmsnorm, attention, loss, bias gradient). Included after common.glsl.
// A fixed tree in shared memory, so the result is the same on every run and device. For
// workgroups of at most 256 invocations (a power of two); every invocation of the workgroup
// must call these (they contain barriers) and each gets the result.
shared float red[256];

// float NAME(float v): the workgroup's values folded along the tree, INTO(a, b) folding b into a.
// GLSL has no templates, so the one tree is a macro that each reduction instantiates.
#define WG_REDUCE(NAME, INTO)                                          \
    float NAME(float v) {                                              \
        uint t = gl_LocalInvocationID.x;                               \
        barrier();                                                     \
        red[t] = v;                                                    \
        barrier();                                                     \
        for (uint s = WG / 2u; s > 0u; s >>= 1u) {                     \
            if (t < s) INTO(red[t], red[t + s]);                       \
            barrier();                                                 \
        }                                                              \
        float r = red[0];                                              \
        barrier();                                                     \
        return r;                                                      \
    }

#define WG_ADD_INTO(a, b) a += b
#define WG_MAX_INTO(a, b) a = max(a, b)
WG_REDUCE(wg_sum, WG_ADD_INTO)
WG_REDUCE(wg_max, WG_MAX_INTO)

// float NAME(float v, uint G): the same fold within each aligned segment of G invocations (G a
// power of two dividing the workgroup), every segment at once: several short rows per workgroup
// with one tree's barriers between them. Each invocation gets its segment's result.
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
SEG_REDUCE(seg_sum, WG_ADD_INTO)
SEG_REDUCE(seg_max, WG_MAX_INTO)
