/* optim.cu — optimiser updates over the flat fp32 masters: AdamATan2 over every weight in one
 * launch, sparse sign-SGD on the puzzle rows used this step (rows grouped by id, summed in
 * batch order as scatter_add does), and the EMA shadow. */
#include "common.cuh"

__global__ void adam_atan2_kernel(float *p, const float *g, float *m, float *v, size_t n, float lr,
                                  float decay, float w1, float w2, float bc1, float bc2s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i], mi = m[i] + w1 * (gi - m[i]), vi = v[i] + w2 * (gi * gi - v[i]);
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - lr * atan2f(mi / bc1, sqrtf(vi) / bc2s);
    }
}

void k_adam_atan2(cudaStream_t st, float *p, const float *g, float *m, float *v, size_t n,
                  float lr, float wd, float beta1, float beta2, int64_t t) {
    if (!n) return;
    float bc1 = (float)(1.0 - pow((double)beta1, (double)t));
    float bc2s = (float)sqrt(1.0 - pow((double)beta2, (double)t));
    float decay = (float)(1.0 - (double)lr * wd);
    adam_atan2_kernel<<<grid_for(n, 256), 256, 0, st>>>(p, g, m, v, n, lr, decay, 1.0f - beta1,
                                                        1.0f - beta2, bc1, bc2s);
}

/* One block per batch row; the block of an id's first row owns that id. */
__global__ void sign_sgd_kernel(float *w, int ndim, const int32_t *ids, const float *grad, int n,
                                float lr, float decay) {
    extern __shared__ int rows[];
    __shared__ int count, first;
    int i = blockIdx.x, id = ids[i];
    if (threadIdx.x == 0) {
        first = id >= 0;
        for (int j = 0; j < i && first; j++) first = ids[j] != id;
        count = 0;
        if (first)
            for (int j = i; j < n; j++)
                if (ids[j] == id) rows[count++] = j;
    }
    __syncthreads();
    if (!first) return;
    float *wr = w + (size_t)id * ndim;
    for (int d = threadIdx.x; d < ndim; d += blockDim.x) {
        float s = 0.f;
        for (int k = 0; k < count; k++) s += grad[(size_t)rows[k] * ndim + d];
        float sg = (float)((s > 0.f) - (s < 0.f));
        wr[d] = wr[d] * decay - lr * sg;
    }
}

void k_sign_sgd_sparse(cudaStream_t st, float *w, int ndim, const int32_t *ids,
                       const float *grad_rows, int n, float lr, float wd) {
    if (n <= 0 || ndim <= 0) return;
    float decay = (float)(1.0 - (double)lr * wd);
    sign_sgd_kernel<<<n, 128, (size_t)n * sizeof(int), st>>>(w, ndim, ids, grad_rows, n, lr, decay);
}

__global__ void ema_kernel(float *shadow, const float *p, size_t n, float a, float rate) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        shadow[i] = a * p[i] + rate * shadow[i];
}

void k_ema(cudaStream_t st, float *shadow, const float *p, size_t n, float rate) {
    if (n) ema_kernel<<<grid_for(n, 256), 256, 0, st>>>(shadow, p, n, (float)(1.0 - (double)rate), rate);
}
