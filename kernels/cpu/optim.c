/* optim.c — optimiser updates over the flat fp32 masters: AdamATan2, sparse sign-SGD on the
 * puzzle-embedding rows used this step (grouped by id, summed in batch order) and the EMA
 * shadow. */
#include <math.h>
#include <stdlib.h>

#include "cpu.h"

void cpu_adam_atan2(trm_backend *be, float *p, const float *g, float *m, float *v, size_t n,
                    float lr, float wd, float beta1, float beta2, int64_t t) {
    float bc1 = (float)(1.0 - pow((double)beta1, (double)t));
    float bc2s = (float)sqrt(1.0 - pow((double)beta2, (double)t));
    float decay = (float)(1.0 - (double)lr * wd), w1 = 1.0f - beta1, w2 = 1.0f - beta2;
#pragma omp parallel for schedule(guided) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i], mi = m[i] + w1 * (gi - m[i]), vi = v[i] + w2 * (gi * gi - v[i]);
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - lr * atan2f(mi / bc1, sqrtf(vi) / bc2s);
    }
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* Rows are grouped by id through a sort of (id, position) keys, so each id's gradient sums
 * its rows in batch order (as scatter_add does) and the groups update disjoint rows. */
void cpu_sign_sgd_sparse(trm_backend *be, float *weights, int ndim, const int32_t *ids,
                         const float *grad_rows, int n, float lr, float wd) {
    if (n <= 0 || ndim <= 0) return;
    int64_t *key = xmalloc((size_t)n * sizeof(int64_t));
    int m = 0;
    for (int i = 0; i < n; i++)
        if (ids[i] >= 0) key[m++] = ((int64_t)ids[i] << 32) | (uint32_t)i;
    qsort(key, (size_t)m, sizeof(int64_t), cmp_i64);
    int *start = xmalloc(((size_t)m + 1) * sizeof(int)), ng = 0;
    for (int i = 0; i < m; i++)
        if (i == 0 || (key[i] >> 32) != (key[i - 1] >> 32)) start[ng++] = i;
    start[ng] = m;
    float decay = (float)(1.0 - (double)lr * wd);
#pragma omp parallel for schedule(guided) if ((size_t)m * ndim >= PAR_MIN)
    for (int k = 0; k < ng; k++) {
        float *w = weights + (size_t)(key[start[k]] >> 32) * ndim;
        for (int d = 0; d < ndim; d++) {
            float s = 0.0f;
            for (int i = start[k]; i < start[k + 1]; i++)
                s += grad_rows[(size_t)(key[i] & 0xffffffff) * ndim + d];
            float sg = (float)((s > 0.0f) - (s < 0.0f));
            w[d] = w[d] * decay - lr * sg;
        }
    }
    free(start);
    free(key);
}

void cpu_ema(trm_backend *be, float *shadow, const float *p, size_t n, float rate) {
    float a = (float)(1.0 - (double)rate);
#pragma omp parallel for simd schedule(guided) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) shadow[i] = a * p[i] + rate * shadow[i];
}
