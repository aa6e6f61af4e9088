/* cublaslt_shapes.cu — what cuBLASLt does on the GEMM shapes of a bf16 TRM step, with bf16
 * operands and bf16 (or fp32) outputs as the cuda backend issues them: for each shape the time
 * of the heuristic's first algorithm and of the fastest of its first 16 (the compile stage
 * times them the same way), in TFLOP/s; plus the device-to-device copy bandwidth, the memory
 * ceiling of every elementwise pass. Not a test; built beside trm when CUDA is (bench_cublaslt).
 * usage: bench_cublaslt [B T D I]   (default 768 97 512 1536: sudoku; maze: 192 916 512 1536) */
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                                    \
    do {                                                                                         \
        cudaError_t r_ = (x);                                                                    \
        if (r_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(r_));   \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)
#define CKL(x)                                                                                   \
    do {                                                                                         \
        cublasStatus_t r_ = (x);                                                                 \
        if (r_ != CUBLAS_STATUS_SUCCESS) {                                                       \
            fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, (int)r_);           \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

typedef struct {
    const char *what;
    int ta, tb, M, N, K, lda, ldb, ldc, batch;
    long long sA, sB, sC;
    int c_f32; /* fp32 output accumulated (weight gradients) */
} shape;

__global__ void fill(__nv_bfloat16 *p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
        p[i] = __float2bfloat16(((h & 0xffff) / 65536.0f - 0.5f));
    }
}

static float time_algo(cublasLtHandle_t lt, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                       cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, const void *A, const void *B,
                       void *C, const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsb, float beta) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float alpha = 1.f, t[10];
    for (int r = 0; r < 13; r++) {
        CK(cudaEventRecord(e0));
        if (cublasLtMatmul(lt, op, &alpha, B, la, A, lb, &beta, C, lc, C, lc, algo, ws, wsb, 0) != CUBLAS_STATUS_SUCCESS)
            return -1.f;
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        if (r >= 3) CK(cudaEventElapsedTime(&t[r - 3], e0, e1));
    }
    for (int i = 0; i < 10; i++)
        for (int j = i + 1; j < 10; j++)
            if (t[j] < t[i]) {
                float x = t[i];
                t[i] = t[j], t[j] = x;
            }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return 0.5f * (t[4] + t[5]);
}

int main(int argc, char **argv) {
    int Bt = 768, T = 97, D = 512, I = 1536;
    if (argc > 4) Bt = atoi(argv[1]), T = atoi(argv[2]), D = atoi(argv[3]), I = atoi(argv[4]);
    int R = Bt * T, Tp = (T + 7) / 8 * 8, It = 512;
    shape sh[] = {
        /* row-major C(M×N) = op(A)·op(B) */
        {"qkv fwd", 0, 1, R, 3 * D, D, D, D, 3 * D, 1, 0, 0, 0, 0},
        {"o fwd", 0, 1, R, D, D, D, D, D, 1, 0, 0, 0, 0},
        {"gate_up fwd", 0, 1, R, 2 * I, D, D, D, 2 * I, 1, 0, 0, 0, 0},
        {"down fwd", 0, 1, R, D, I, I, I, D, 1, 0, 0, 0, 0},
        {"gate_up dx", 0, 0, R, D, 2 * I, 2 * I, D, D, 1, 0, 0, 0, 0},
        {"down dx", 0, 0, R, I, D, D, I, I, 1, 0, 0, 0, 0},
        {"gate_up dW f32", 1, 0, 2 * I, D, R, 2 * I, D, D, 1, 0, 0, 0, 1},
        {"down dW f32", 1, 0, D, I, R, D, I, I, 1, 0, 0, 0, 1},
        /* mlp_t, batched over samples (no transposes): gut_b = in_bᵀ·Wᵀ, tmp_b = Wd·actt_bᵀ */
        {"mlp_t gu batched", 1, 1, D, 2 * It, T, D, Tp, 2 * It, Bt, (long long)T * D, 0, (long long)D * 2 * It, 0},
        {"mlp_t down batched", 0, 1, T, D, It, It, It, D, Bt, 0, (long long)D * It, (long long)T * D, 0},
        {"mlp_t dact batched", 1, 0, D, It, T, D, It, It, Bt, (long long)T * D, 0, (long long)D * It, 0},
        {"mlp_t din batched", 1, 1, T, D, 2 * It, Tp, 2 * It, D, Bt, 0, (long long)D * 2 * It, (long long)T * D, 0},
        /* mlp_t flat on transposed (padded) rows, as before */
        {"mlp_t gu flat", 0, 1, Bt * D, 2 * It, T, Tp, Tp, 2 * It, 1, 0, 0, 0, 0},
        {"mlp_t down flat", 0, 1, Bt * D, T, It, It, It, Tp, 1, 0, 0, 0, 0},
        {"mlp_t gu dW f32", 1, 0, 2 * It, T, Bt * D, 2 * It, Tp, T, 1, 0, 0, 0, 1},
        {"mlp_t down dW f32", 1, 0, T, It, Bt * D, Tp, It, It, 1, 0, 0, 0, 1},
        /* padded T (zero pad columns/rows): every T-sized dim a multiple of 8 */
        {"gu flat K=Tp", 0, 1, Bt * D, 2 * It, Tp, Tp, Tp, 2 * It, 1, 0, 0, 0, 0},
        {"gu flat K=128", 0, 1, Bt * D, 2 * It, 128, 128, 128, 2 * It, 1, 0, 0, 0, 0},
        {"gu bat NN K=Tp", 0, 0, 2 * It, D, Tp, Tp, D, D, Bt, 0, (long long)T * D, (long long)2 * It * D, 0},
        {"gu bat NN K=T", 0, 0, 2 * It, D, T, Tp, D, D, Bt, 0, (long long)T * D, (long long)2 * It * D, 0},
        {"down flat N=Tp", 0, 1, Bt * D, Tp, It, It, It, Tp, 1, 0, 0, 0, 0},
        {"down bat NN", 0, 0, T, D, It, It, D, D, Bt, 0, (long long)It * D, (long long)T * D, 0},
        {"dact flat K=Tp", 0, 0, Bt * D, It, Tp, Tp, It, It, 1, 0, 0, 0, 0},
        {"din flat N=Tp", 0, 0, Bt * D, Tp, 2 * It, 2 * It, Tp, Tp, 1, 0, 0, 0, 0},
        {"gu dW N=Tp f32", 1, 0, 2 * It, Tp, Bt * D, 2 * It, Tp, Tp, 1, 0, 0, 0, 1},
        {"down dW M=Tp f32", 1, 0, Tp, It, Bt * D, Tp, It, It, 1, 0, 0, 0, 1},
        {"dact bat TN K=Tp", 1, 0, It, D, Tp, It, D, D, Bt, 0, (long long)T * D, (long long)It * D, 0},
    };
    int ns = sizeof sh / sizeof sh[0];
    size_t big = 0;
    for (int i = 0; i < ns; i++) {
        shape *s = &sh[i];
        size_t a = (size_t)(s->ta ? s->K : s->M) * s->lda + (s->batch > 1 ? (size_t)s->sA * (s->batch - 1) : 0);
        size_t b = (size_t)(s->tb ? s->N : s->K) * s->ldb + (s->batch > 1 ? (size_t)s->sB * (s->batch - 1) : 0);
        size_t c = (size_t)s->M * s->ldc + (s->batch > 1 ? (size_t)s->sC * (s->batch - 1) : 0);
        big = a > big ? a : big, big = b > big ? b : big, big = c * 2 > big ? c * 2 : big;
    }
    __nv_bfloat16 *A, *B;
    void *C, *ws;
    size_t wsb = (size_t)64 << 20;
    CK(cudaMalloc(&A, big * 2));
    CK(cudaMalloc(&B, big * 2));
    CK(cudaMalloc(&C, big * 2));
    CK(cudaMalloc(&ws, wsb));
    fill<<<4096, 256>>>(A, big, 1);
    fill<<<4096, 256>>>(B, big, 2);
    CK(cudaMemset(C, 0, big * 2));
    CK(cudaDeviceSynchronize());
    cublasLtHandle_t lt;
    CKL(cublasLtCreate(&lt));
    printf("# B %d T %d D %d I %d (rows %d)\n", Bt, T, D, I, R);
    printf("%-20s %7s %6s %6s %5s %10s %8s %10s %8s\n", "shape", "M", "N", "K", "batch", "first ms", "TFLOP/s", "best ms",
           "TFLOP/s");
    for (int i = 0; i < ns; i++) {
        shape *s = &sh[i];
        cublasLtMatmulDesc_t op;
        cublasOperation_t opa = s->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = s->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
        CKL(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        CKL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
        CKL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
        cublasLtMatrixLayout_t la, lb, lc;
        cudaDataType_t ct = s->c_f32 ? CUDA_R_32F : CUDA_R_16BF;
        CKL(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s->tb ? s->K : s->N, s->tb ? s->N : s->K, s->ldb));
        CKL(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s->ta ? s->M : s->K, s->ta ? s->K : s->M, s->lda));
        CKL(cublasLtMatrixLayoutCreate(&lc, ct, s->N, s->M, s->ldc));
        if (s->batch > 1) {
            int32_t bc = s->batch;
            cublasLtMatrixLayout_t ls[3] = {la, lb, lc};
            long long st[3] = {s->sB, s->sA, s->sC};
            for (int k = 0; k < 3; k++) {
                int64_t v = st[k];
                CKL(cublasLtMatrixLayoutSetAttribute(ls[k], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
                CKL(cublasLtMatrixLayoutSetAttribute(ls[k], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &v, sizeof v));
            }
        }
        cublasLtMatmulPreference_t pref;
        CKL(cublasLtMatmulPreferenceCreate(&pref));
        CKL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
        cublasLtMatmulHeuristicResult_t res[16];
        int found = 0;
        cublasStatus_t r = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 16, res, &found);
        double fl = 2.0 * s->M * s->N * (double)s->K * s->batch;
        if (r != CUBLAS_STATUS_SUCCESS || !found) {
            printf("%-20s no algorithm (status %d)\n", s->what, (int)r);
            continue;
        }
        float beta = s->c_f32 ? 1.f : 0.f, first = -1, best = 1e30f;
        for (int k = 0; k < found; k++) {
            float t = time_algo(lt, op, la, lb, lc, A, B, C, &res[k].algo, ws, wsb, beta);
            if (k == 0) first = t;
            if (t > 0 && t < best) best = t;
        }
        printf("%-20s %7d %6d %6d %5d %10.3f %8.1f %10.3f %8.1f  (%d algos)\n", s->what, s->M, s->N, s->K, s->batch, first,
               fl / first / 1e9, best, fl / best / 1e9, found);
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(lc);
        cublasLtMatmulDescDestroy(op);
    }
    /* the memory ceiling: a large device-to-device copy, bytes read + written */
    size_t cb = big * 2 / 2;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaMemcpy(C, A, cb, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e0));
    for (int i = 0; i < 10; i++) CK(cudaMemcpy(C, A, cb, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    printf("copy %.2f GB: %.0f GB/s (read + write)\n", cb / 1e9, 2.0 * cb * 10 / (ms / 1e3) / 1e9);
    return 0;
}
