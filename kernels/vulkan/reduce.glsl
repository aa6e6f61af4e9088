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
