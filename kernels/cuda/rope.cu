/* rope.cu — rotary embeddings applied in place to the q and k heads of the fused QKV
 * activation (B, T, 3H, hd), and the transpose rotation for the backward; fp32 tables and
 * arithmetic on activations of either type. */
#include "common.cuh"

template <typename T>
__global__ void rope_kernel(T *qkv, const float *cs, const float *sn, int B, int T_, int H, int hd, int transpose) {
    int h2 = hd / 2;
    size_t n = (size_t)B * T_ * 2 * H * h2;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        int j = (int)(i % h2);
        size_t k = i / h2;            /* (row, head) with head < 2H */
        int head = (int)(k % (2 * H));
        size_t row = k / (2 * H);
        int t = (int)(row % T_);
        T *x = qkv + row * 3 * H * hd + (size_t)head * hd;
        const float *c = cs + (size_t)t * hd, *s = sn + (size_t)t * hd;
        float a = to_f(x[j]), b = to_f(x[j + h2]);
        if (transpose) {
            x[j] = from_f<T>(a * c[j] + b * s[j + h2]);
            x[j + h2] = from_f<T>(b * c[j + h2] - a * s[j]);
        } else {
            x[j] = from_f<T>(a * c[j] - b * s[j]);
            x[j + h2] = from_f<T>(b * c[j + h2] + a * s[j + h2]);
        }
    }
}

void k_rope(cudaStream_t st, int dt, void *qkv, const float *cos, const float *sin, int B, int Tn, int H, int hd,
            int transpose) {
    size_t n = (size_t)B * Tn * 2 * H * (hd / 2);
    if (n) ACT_DISPATCH(dt, rope_kernel<T><<<grid_for(n, 256), 256, 0, st>>>((T *)qkv, cos, sin, B, Tn, H, hd, transpose));
}
