/* rmsnorm.c — RMSNorm with the residual add fused in (y = rms(x + res)) and its backward, row
 * by row over the first `dim` elements of rows `ld` apart (pads written as zeros); and mlp_t's
 * norm over T with the transposes around it (rmsnorm_t_fwd/_bwd), row by row the same sums. */
#include <math.h>
#include <stdlib.h>

#include "cpu.h"

/* PyTorch squares in float and takes the mean with wide accumulation, then adds eps and
 * takes rsqrt in float. */
static float rms_scale(const float *x, const float *res, int dim, float eps) {
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
    return 1.0f / sqrtf(var + eps);
}

/* y may alias x or res: each element is read before it is written. */
static void rms_row(float *y, float *rstd, const float *x, const float *res, int dim, float eps) {
    float r = rms_scale(x, res, dim, eps);
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

/* one row of the backward: dim values, then ld − dim zeros */
static void rms_bwd_row(float *dxr, const float *dyr, const float *yr, float s, int dim, int ld) {
    double dot = 0.0;
#pragma omp simd reduction(+ : dot)
    for (int d = 0; d < dim; d++) dot += (double)dyr[d] * yr[d];
    float mean = (float)(dot / dim);
    for (int d = 0; d < dim; d++) dxr[d] = s * (dyr[d] - yr[d] * mean);
    for (int d = dim; d < ld; d++) dxr[d] = 0.0f;
}

void cpu_rmsnorm_bwd(trm_backend *be, void *dxv, const void *dyv, const void *yv,
                     const float *rstd, int rows, int dim, int ld) {
    float *dx = dxv;
    const float *dy = dyv, *y = yv;
    if (dim <= 0) return;
#pragma omp parallel for schedule(guided) if ((size_t)rows * dim >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        size_t o = (size_t)r * ld;
        rms_bwd_row(dx + o, dy + o, y + o, rstd[r], dim, ld);
    }
}

/* A sample a thread: its channel rows are normed into the thread's (D, T) scratch, then
 * transposed into y by cpu_transpose_block's tiles (y had been written a column at a time, D
 * floats apart). Each row's sum and product are rms_row's, so the bits are those of the rows
 * then a transpose. */
void cpu_rmsnorm_t_fwd(trm_backend *be, void *yv, float *rstd, const void *xv, const void *resv, int B, int T,
                       int Tp, int D, float eps) {
    float *y = yv;
    const float *x = xv, *res = resv;
    if (T <= 0) return;
#pragma omp parallel if ((size_t)B * D * T >= PAR_MIN)
    {
        float *z = xmalloc((size_t)D * T * sizeof(float));
#pragma omp for schedule(guided)
        for (int b = 0; b < B; b++) {
            for (int d = 0; d < D; d++) {
                size_t r = (size_t)b * D + d, o = r * Tp;
                rms_row(z + (size_t)d * T, rstd ? rstd + r : NULL, x + o, res ? res + o : NULL, T, eps);
            }
            cpu_transpose_block(y + (size_t)b * T * D, (size_t)D, z, (size_t)T, D, T);
        }
        free(z);
    }
}

/* A sample a thread: its (T, D) blocks of dy and y transposed into channel rows first (tiles, as
 * the forward), so that the sums are rms_bwd_row's on contiguous values: the bits of a
 * transpose then rmsnorm_bwd. */
void cpu_rmsnorm_t_bwd(trm_backend *be, void *dxv, const void *dyv, const void *yv, const float *rstd, int B,
                       int T, int Tp, int D) {
    float *dx = dxv;
    const float *dy = dyv, *y = yv;
    if (T <= 0) return;
#pragma omp parallel if ((size_t)B * D * T >= PAR_MIN)
    {
        float *cols = xmalloc(2 * (size_t)D * T * sizeof(float)), *ycols = cols + (size_t)D * T;
#pragma omp for schedule(guided)
        for (int b = 0; b < B; b++) {
            size_t c = (size_t)b * T * D;
            cpu_transpose_block(cols, (size_t)T, dy + c, (size_t)D, T, D);
            cpu_transpose_block(ycols, (size_t)T, y + c, (size_t)D, T, D);
            for (int d = 0; d < D; d++) {
                size_t r = (size_t)b * D + d;
                rms_bwd_row(dx + r * Tp, cols + (size_t)d * T, ycols + (size_t)d * T, rstd[r], T, Tp);
            }
        }
        free(cols);
    }
}
