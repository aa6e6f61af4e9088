/* elementwise.c — the cpu backend's plain elementwise ops: add and axpy on activations, the
 * batched transpose (strided rows, zero pads), bias and its gradient. */
#include <stddef.h>

#include "cpu.h"

/* Activations are fp32 here (caps.bf16_acts is 0): the void pointers of backend.h are floats. */
void cpu_add(trm_backend *be, void *yv, const void *x1v, const void *x2v, size_t n) {
    float *y = yv;
    const float *x1 = x1v, *x2 = x2v;
#pragma omp parallel for simd schedule(guided) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = x1[i] + x2[i];
}

void cpu_axpy(trm_backend *be, void *yv, const void *xv, float alpha, size_t n) {
    float *y = yv;
    const float *x = xv;
#pragma omp parallel for simd schedule(guided) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

#define TR_TILE 32
void cpu_transpose(trm_backend *be, void *outv, int ldo, const void *inv, int ldi, int batch, int rows,
                   int cols) {
    float *out = outv;
    const float *in = inv;
    size_t mat_in = (size_t)rows * ldi, mat_out = (size_t)cols * ldo;
    int tiles = (rows + TR_TILE - 1) / TR_TILE;
#pragma omp parallel for collapse(2) schedule(guided) if ((size_t)rows * cols * batch >= PAR_MIN)
    for (int b = 0; b < batch; b++)
        for (int ti = 0; ti < tiles; ti++) {
            const float *src = in + b * mat_in;
            float *dst = out + b * mat_out;
            int i0 = ti * TR_TILE, i1 = i0 + TR_TILE < rows ? i0 + TR_TILE : rows;
            for (int j0 = 0; j0 < cols; j0 += TR_TILE) {
                int j1 = j0 + TR_TILE < cols ? j0 + TR_TILE : cols;
                for (int j = j0; j < j1; j++) {
                    for (int i = i0; i < i1; i++) dst[(size_t)j * ldo + i] = src[(size_t)i * ldi + j];
                    if (i1 == rows)
                        for (int i = rows; i < ldo; i++) dst[(size_t)j * ldo + i] = 0.0f;
                }
            }
        }
}

/* ---- bias ------------------------------------------------------------------------------- */

void cpu_bias_fwd(trm_backend *be, float *y, const float *bias, int rows, int cols, int ld) {
#pragma omp parallel for schedule(guided) if ((size_t)rows * cols >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        float *restrict yr = y + (size_t)r * ld;
        for (int c = 0; c < cols; c++) yr[c] += bias[c];
    }
}

/* Column blocks per thread, rows summed in order into double accumulators: no races and
 * the same answer for any thread count. */
#define BIAS_CB 64
void cpu_bias_bwd(trm_backend *be, float *dbias, const float *dy, int rows, int cols, int ld) {
    int nblk = (cols + BIAS_CB - 1) / BIAS_CB;
#pragma omp parallel for schedule(guided) if ((size_t)rows * cols >= PAR_MIN)
    for (int k = 0; k < nblk; k++) {
        int c0 = k * BIAS_CB, n = cols - c0 < BIAS_CB ? cols - c0 : BIAS_CB;
        double acc[BIAS_CB] = {0};
        for (int r = 0; r < rows; r++) {
            const float *yr = dy + (size_t)r * ld + c0;
            for (int c = 0; c < n; c++) acc[c] += yr[c];
        }
        for (int c = 0; c < n; c++) dbias[c0 + c] += (float)acc[c];
    }
}
