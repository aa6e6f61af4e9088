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

#ifdef __AVX2__
#include <immintrin.h>

/* dst[c][r] = src[r][c] for an 8 × 8 tile, in registers. */
static inline void tr_8x8(float *dst, size_t ldd, const float *src, size_t lds) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * lds);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
        _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
    }
}
#endif

/* dst (cols × rows, rows ldd apart) = srcᵀ (src: rows × cols, rows lds apart): 8 × 8 tiles in
 * registers, the edges element by element. Moved as they were, so the same bits as any
 * transpose. Element by element, strided on one side, the transposes had run at a third of
 * memory's rate (this EPYC, mlp_t's 64 × 85 × 128 activations), and attention's K and V laid
 * out as columns had taken a third of its backward's time outside the products. */
void cpu_transpose_block(float *dst, size_t ldd, const float *src, size_t lds, int rows, int cols) {
    int r8 = 0, c8 = 0;
#ifdef __AVX2__
    r8 = rows / 8 * 8, c8 = cols / 8 * 8;
    for (int i = 0; i < r8; i += 8)
        for (int j = 0; j < c8; j += 8) tr_8x8(dst + (size_t)j * ldd + i, ldd, src + (size_t)i * lds + j, lds);
#endif
    for (int j = 0; j < cols; j++) { /* what the tiles left: the last rows, then the last columns */
        float *d = dst + (size_t)j * ldd;
        for (int i = j < c8 ? r8 : 0; i < rows; i++) d[i] = src[(size_t)i * lds + j];
    }
}

/* A (matrix, block of 32 rows) a task; pads past `rows` zeroed. */
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
            cpu_transpose_block(dst + i0, (size_t)ldo, src + (size_t)i0 * ldi, (size_t)ldi, i1 - i0, cols);
            if (i1 == rows)
                for (int j = 0; j < cols; j++)
                    for (int i = rows; i < ldo; i++) dst[(size_t)j * ldo + i] = 0.0f;
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
