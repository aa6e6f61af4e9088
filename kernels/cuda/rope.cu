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
        rope_pair(a, b, c[j], c[j + h2], s[j], s[j + h2], transpose);
        x[j] = from_f<T>(a);
        x[j + h2] = from_f<T>(b);
    }
}

/* 16 bytes of the first half and the matching 16 of the second half of one head per thread:
 * pairs (j, j + hd/2) for j in a run of vn<T>::N. */
template <typename T>
__global__ void rope16_kernel(T *qkv, const float *cs, const float *sn, int B, int T_, int H, int hd, int transpose) {
    const int N = vn<T>::N;
    int h2 = hd / 2, per = h2 / N;
    size_t n = (size_t)B * T_ * 2 * H * per;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int j0 = (int)(i % per) * N;
        size_t k = i / per;
        int head = (int)(k % (2 * H));
        size_t row = k / (2 * H);
        int t = (int)(row % T_);
        T *x = qkv + row * 3 * H * hd + (size_t)head * hd;
        const float *c = cs + (size_t)t * hd, *s = sn + (size_t)t * hd;
        float a[N], b[N];
        ld16(a, x + j0);
        ld16(b, x + j0 + h2);
#pragma unroll
        for (int e = 0; e < N; e++) {
            int j = j0 + e;
            rope_pair(a[e], b[e], c[j], c[j + h2], s[j], s[j + h2], transpose);
        }
        st16(x + j0, a);
        st16(x + j0 + h2, b);
    }
}

void k_rope(cudaStream_t st, int dt, void *qkv, const float *cos, const float *sin, int B, int Tn, int H, int hd,
            int transpose) {
    size_t n = (size_t)B * Tn * 2 * H * (hd / 2);
    if (!n) return;
    ACT_DISPATCH(dt, {
        const int N = vn<T>::N;
        if ((hd / 2) % N == 0 && aligned16(qkv))
            rope16_kernel<T><<<grid_for(n / N, 256), 256, 0, st>>>((T *)qkv, cos, sin, B, Tn, H, hd, transpose);
        else
            rope_kernel<T><<<grid_for(n, 256), 256, 0, st>>>((T *)qkv, cos, sin, B, Tn, H, hd, transpose);
    });
}
