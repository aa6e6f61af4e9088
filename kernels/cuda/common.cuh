/* common.cuh — what every CUDA kernel file shares: launch sizing, warp/block reductions and
 * the C declarations of the launchers each kernels/cuda/<op>.cu file provides to the backend
 * (backend_cuda.cu). One file per op family, forward and backward side by side. */
#ifndef TRM_CUDA_COMMON_CUH
#define TRM_CUDA_COMMON_CUH
#include <cuda_runtime.h>
#include <stdint.h>
#include <stddef.h>

extern "C" {
#include "backend.h"
}

static inline unsigned grid_for(size_t n, int block) {
    size_t g = (n + (size_t)block - 1) / (size_t)block;
    if (g > 65535u * 32u) g = 65535u * 32u; /* kernels use grid-stride loops */
    return (unsigned)(g ? g : 1);
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sum over the block (blockDim a multiple of 32, ≤ 1024) in a fixed order; every thread gets
 * the result. sh: 32 doubles of shared memory. */
__device__ __forceinline__ double block_sum_d(double v, double *sh) {
    v = warp_sum_d(v);
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    double t = 0.0;
    if (threadIdx.x < 32) {
        t = threadIdx.x < blockDim.x / 32 ? sh[threadIdx.x] : 0.0;
        t = warp_sum_d(t);
        if (threadIdx.x == 0) sh[0] = t;
    }
    __syncthreads();
    double r = sh[0];
    __syncthreads();
    return r;
}

/* ---- launchers (all asynchronous on `st`) ---- */
void k_add(cudaStream_t st, float *y, const float *x1, const float *x2, size_t n);
void k_axpy(cudaStream_t st, float *y, const float *x, float alpha, size_t n);
void k_transpose(cudaStream_t st, float *out, const float *in, int batch, int rows, int cols);
void k_bias_fwd(cudaStream_t st, float *y, const float *bias, int rows, int cols, int ld);
void k_bias_bwd(cudaStream_t st, float *dbias, const float *dy, int rows, int cols, int ld);

void k_rmsnorm_fwd(cudaStream_t st, float *y, float *rstd, const float *x, const float *res,
                   int rows, int dim, float eps);
void k_rmsnorm_bwd(cudaStream_t st, float *dx, const float *dy, const float *y, const float *rstd,
                   int rows, int dim);
void k_swiglu_fwd(cudaStream_t st, float *out, const float *gu, int rows, int I);
void k_swiglu_bwd(cudaStream_t st, float *dgu, const float *dout, const float *gu, int rows, int I);
void k_rope(cudaStream_t st, float *qkv, const float *cos, const float *sin, int B, int T, int H,
            int hd, int transpose);

/* attention helpers (the GEMMs are the backend's) */
void k_softmax_lse(cudaStream_t st, float *S, float *lse, int B, int H, int T, int h);
void k_exp_lse(cudaStream_t st, float *S, const float *lse, int B, int H, int T, int h);
void k_att_rowdot(cudaStream_t st, float *dr, const float *dout, const float *out, int B, int T,
                  int H, int hd);
void k_att_ds(cudaStream_t st, float *dP, const float *P, const float *dr, int B, int H, int T, int h);
/* fused attention (bf16 products) for head dim 64 and 16-byte aligned tensors; qkv16 and
 * dout16 are bf16 copies of qkv (B,T,3H,64) and dout (B,T,H,64) */
int k_flash_ok(const void *a, const void *b, int hd);
void k_flash_fwd(cudaStream_t st, float *out, float *lse, const void *qkv16, int B, int T, int H);
void k_flash_bwd(cudaStream_t st, float *dqkv, const void *dout16, const void *qkv16, const float *lse,
                 const float *dr, int B, int T, int H);
void k_to_bf16(cudaStream_t st, void *dst, const float *src, size_t n);

void k_embed_fwd(cudaStream_t st, float *out, const trm_embed_args *a);
/* work: (chunks × V × D) floats, chunks = k_embed_tok_chunks(rows) */
int k_embed_tok_chunks(int rows);
void k_embed_bwd(cudaStream_t st, const float *dout, const trm_embed_args *a, int V,
                 float *d_tok_w, float *d_pos_w, float *d_puz_rows, float *work);

/* work: 4·B doubles + B ints */
void k_loss_head(cudaStream_t st, const trm_loss_args *a, void *work);

void k_act_reset(cudaStream_t st, int B, int T, int D, int S, const uint8_t *halted, float *zH,
                 float *zL, const float *H_init, const float *L_init, int32_t *steps,
                 int32_t *cur_inputs, int32_t *cur_labels, int32_t *cur_pid,
                 const int32_t *new_inputs, const int32_t *new_labels, const int32_t *new_pid);
void k_act_update(cudaStream_t st, int B, int32_t *steps, uint8_t *halted, const float *q,
                  int halt_max_steps, int training, int no_act_continue, float explore_prob,
                  uint64_t seed, uint64_t sample0, const uint64_t *rng_step);
void k_q_target(cudaStream_t st, int B, float *target, const float *q_next, const int32_t *steps,
                int halt_max_steps);

void k_adam_atan2(cudaStream_t st, float *p, const float *g, float *m, float *v, size_t n,
                  float lr, float wd, float beta1, float beta2, int64_t t);
void k_sign_sgd_sparse(cudaStream_t st, float *w, int ndim, const int32_t *ids,
                       const float *grad_rows, int n, float lr, float wd);
void k_ema(cudaStream_t st, float *shadow, const float *p, size_t n, float rate);

/* nccl.cu: collectives of a distributed run (NCCL loaded at run time). */
struct trm_dist;
void *trm_nccl_init(struct trm_dist *d, trm_err *e);
void trm_nccl_allreduce_sum(void *nccl, float *buf, size_t count, cudaStream_t st);
void trm_nccl_allgather(void *nccl, const void *send, void *recv, size_t bytes, cudaStream_t st);
void trm_nccl_destroy(void *nccl);

#endif
