// reduce.glsl — sums and maxima over one workgroup for the kernels that reduce a row per
// workgroup (rmsnorm, attention, loss, bias gradient). Included after common.glsl.
// A fixed tree in shared memory, so the result is the same on every run and device. For
// workgroups of at most 256 invocations (a power of two); every invocation of the workgroup
// must call these (they contain barriers) and each gets the result.
shared float red[256];

float wg_sum(float v) {
    uint t = gl_LocalInvocationID.x;
    barrier();
    red[t] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1u) {
        if (t < s) red[t] += red[t + s];
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

float wg_max(float v) {
    uint t = gl_LocalInvocationID.x;
    barrier();
    red[t] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1u) {
        if (t < s) red[t] = max(red[t], red[t + s]);
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

