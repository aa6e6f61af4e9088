/* rmsnorm.c — RMSNorm with the residual add fused in (y = rms(x + res)) and its backward, row
 * by row over the first `dim` elements of rows `ld` apart (pads written as zeros). */
#include <math.h>

#include "cpu.h"

/* PyTorch squares in float and takes the mean with wide accumulation, then adds eps and
 * takes rsqrt in float. y may alias x or res: each element is read before it is written. */
static void rms_row(float *y, float *rstd, const float *x, const float *res, int dim, float eps) {
    double ss = 0.0;
    if (res) {
#pragma omp simd reduction(+ : ss)
        for (int d = 0; d < dim; d++) {
            float v = x[d] + res[d];
            ss += (double)(v * v);
        }
    } else {
#pragma omp simd reduction(+ : ss)
        for (int d = 0; d < dim; d++) ss += (double)(x[d] * x[d]);
    }
    float var = (float)(ss / dim);
    float r = 1.0f / sqrtf(var + eps);
    if (rstd) *rstd = r;
    if (res)
        for (int d = 0; d < dim; d++) y[d] = (x[d] + res[d]) * r;
    else
        for (int d = 0; d < dim; d++) y[d] = x[d] * r;
}

void cpu_rmsnorm_fwd(trm_backend *be, void *yv, float *rstd, const void *xv,
                     const void *resv, int rows, int dim, int ld, float eps) {
    float *y = yv;
    const float *x = xv, *res = resv;
    if (dim <= 0) return;
#pragma omp parallel for schedule(guided) if ((size_t)rows * dim >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        size_t o = (size_t)r * ld;
        rms_row(y + o, rstd ? rstd + r : NULL, x + o, res ? res + o : NULL, dim, eps);
        for (int d = dim; d < ld; d++) y[o + d] = 0.0f;
    }
}

void cpu_rmsnorm_bwd(trm_backend *be, void *dxv, const void *dyv, const void *yv,
                     const float *rstd, int rows, int dim, int ld) {
    float *dx = dxv;
    const float *dy = dyv, *y = yv;
    if (dim <= 0) return;
#pragma omp parallel for schedule(guided) if ((size_t)rows * dim >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        size_t o = (size_t)r * ld;
        const float *dyr = dy + o, *yr = y + o;
        float *dxr = dx + o;
        double dot = 0.0;
#pragma omp simd reduction(+ : dot)
        for (int d = 0; d < dim; d++) dot += (double)dyr[d] * yr[d];
        float mean = (float)(dot / dim), s = rstd[r];
        for (int d = 0; d < dim; d++) dxr[d] = s * (dyr[d] - yr[d] * mean);
        for (int d = dim; d < ld; d++) dxr[d] = 0.0f;
    }
}
