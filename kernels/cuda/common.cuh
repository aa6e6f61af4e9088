/* common.cuh — what every CUDA kernel file shares: launch sizing, warp/block reductions, the
 * activation element types (fp32 or bf16: kernels on activations are templates over both, the
 * launchers take the backend's act_dt) with their 16-byte vector loads, and the C declarations
 * of the launchers each kernels/cuda/<op>.cu file provides to the backend (backend_cuda.cu).
 * One file per op family, forward and backward side by side. */
#ifndef TRM_CUDA_COMMON_CUH
#define TRM_CUDA_COMMON_CUH
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stddef.h>

extern "C" {
#include "backend/backend.h"
}

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(bf16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 from_f<bf16>(float x) { return __float2bfloat16_rn(x); }

/* 16 bytes of activations as floats: VN<T> = 4 floats or 8 bf16 */
template <typename T> struct vn { static const int N = 16 / (int)sizeof(T); };
__device__ __forceinline__ void ld16(float *f, const float *p) {
    float4 v = *reinterpret_cast<const float4 *>(p);
    f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
}
__device__ __forceinline__ void ld16(float *f, const bf16 *p) {
    uint4 v = *reinterpret_cast<const uint4 *>(p);
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 x = __bfloat1622float2(h[i]);
        f[2 * i] = x.x, f[2 * i + 1] = x.y;
    }
}
__device__ __forceinline__ void st16(float *p, const float *f) {
    *reinterpret_cast<float4 *>(p) = make_float4(f[0], f[1], f[2], f[3]);
}
__device__ __forceinline__ void st16(bf16 *p, const float *f) {
    uint4 v;
    __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&v);
#pragma unroll
    for (int i = 0; i < 4; i++) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    *reinterpret_cast<uint4 *>(p) = v;
}
/* RoPE on one pair of a head, (a, b) = (x[j], x[j + hd/2]), with its position's table values
 * c = cos[j], ch = cos[j + hd/2], s = sin[j], sh = sin[j + hd/2]: the rotation, or with
 * transpose its transpose (the backward's). The convention's one statement, for rope.cu and the
 * flash backward's stores (attention.cu). */
__device__ __forceinline__ void rope_pair(float &a, float &b, float c, float ch, float s, float sh, int transpose) {
    /* the products and sums spelled out, so that every kernel rounds them alike (left to the
     * compiler, its contraction into FMAs differed between kernels: one bf16 ulp apart) */
    float u = a, v = b;
    if (transpose)
        a = __fmaf_rn(v, sh, __fmul_rn(u, c)), b = __fmaf_rn(-u, s, __fmul_rn(v, ch));
    else
        a = __fmaf_rn(-v, s, __fmul_rn(u, c)), b = __fmaf_rn(u, sh, __fmul_rn(v, ch));
}
/* 8 floats from a 16-byte aligned address, through the read-only path */
__device__ __forceinline__ void ld_f8(float *f, const float *p) {
    float4 a = __ldg(reinterpret_cast<const float4 *>(p)), b = __ldg(reinterpret_cast<const float4 *>(p) + 1);
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}
/* a rotary table's 4 or 2 floats at p: from shared memory where sh (a copy the kernel made),
 * else through the read-only path */
__device__ __forceinline__ float4 tab_ld4(const float *p, bool sh) {
    if (!sh) return __ldg(reinterpret_cast<const float4 *>(p));
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"((uint32_t)__cvta_generic_to_shared(p)));
    return v;
}
__device__ __forceinline__ float2 tab_ld2(const float *p, bool sh) {
    if (!sh) return __ldg(reinterpret_cast<const float2 *>(p));
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"((uint32_t)__cvta_generic_to_shared(p)));
    return v;
}
static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }
/* the current device is a Hopper (compute capability 9.0, what the sm_90a kernels need) */
static inline bool device_sm90(void) {
    int dev = 0, major = 0, minor = 0;
    return cudaGetDevice(&dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess && major == 9 &&
           minor == 0;
}
/* the current device's multiprocessors, or `fallback` where the runtime cannot say */
static inline int device_sms(int fallback) {
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        sms <= 0)
        return fallback;
    return sms;
}
/* raises a kernel's dynamic shared memory limit (past the default 48 KiB); 0 where it cannot */
template <typename F> static inline int smem_limit(F kernel, size_t bytes) {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) == cudaSuccess;
}
/* whether Hopper kernels can run here: an sm_90 device and every kernel's limit raised to bytes
 * (a refusal not left queued for the next error check) */
template <typename... F> static inline int sm90_smem_ok(size_t bytes, F... kernels) {
    if (device_sm90() && (smem_limit(kernels, bytes) && ...)) return 1;
    cudaGetLastError();
    return 0;
}

/* Runs `launch` with T = float or bf16 as the activation type dt says (a generic lambda). */
#define ACT_DISPATCH(dt, ...)                                                                      \
    do {                                                                                           \
        if ((dt) == TRM_BF16) {                                                                    \
            typedef bf16 T;                                                                        \
            __VA_ARGS__;                                                                           \
        } else {                                                                                   \
            typedef float T;                                                                       \
            __VA_ARGS__;                                                                           \
        }                                                                                          \
    } while (0)

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

/* ---- launchers (all asynchronous on `st`); dt: the activations' trm_dtype ---- */
void k_add(cudaStream_t st, int dt, void *y, const void *x1, const void *x2, size_t n);
void k_axpy(cudaStream_t st, int dt, void *y, const void *x, float alpha, size_t n);
void k_transpose(cudaStream_t st, int dt, void *out, int ldo, const void *in, int ldi, int batch, int rows, int cols);
void k_bias_fwd(cudaStream_t st, float *y, const float *bias, int rows, int cols, int ld);
void k_bias_bwd(cudaStream_t st, float *dbias, const float *dy, int rows, int cols, int ld);
/* dst (rows × cols, ld_dst, dt_dst) ← src (ld_src, dt_src) */
void k_convert(cudaStream_t st, void *dst, int dt_dst, int ld_dst, const void *src, int dt_src, int ld_src, int rows,
               int cols);
void k_to_bf16(cudaStream_t st, void *dst, const float *src, size_t n);

void k_rmsnorm_fwd(cudaStream_t st, int dt, void *y, float *rstd, const void *x, const void *res, int rows, int dim,
                   int ld, float eps);
void k_rmsnorm_bwd(cudaStream_t st, int dt, void *dx, const void *dy, const void *y, const float *rstd, int rows,
                   int dim, int ld);
/* mlp_t's norm over T with its transposes (backend.h: rmsnorm_t_fwd, rmsnorm_t_bwd) */
void k_rmsnorm_t_fwd(cudaStream_t st, int dt, void *y, float *rstd, const void *x, const void *res, int B, int Tn,
                     int Tp, int D, float eps);
void k_rmsnorm_t_bwd(cudaStream_t st, int dt, void *dx, const void *dy, const void *y, const float *rstd, int B,
                     int Tn, int Tp, int D);
void k_swiglu_fwd(cudaStream_t st, int dt, void *out, const void *gu, int rows, int I);
void k_swiglu_bwd(cudaStream_t st, int dt, void *dgu, void *out, const void *dout, const void *gu, int rows, int I);
/* act = SwiGLU(x·Wᵀ) (gu = x·Wᵀ too unless NULL), all bf16: given tma_encode = k_gate_up_wgmma()
 * (NULL where the device or build has no Hopper kernel), K ≤ 512 with I a multiple of 64 on
 * Hopper; otherwise K ≤ 128 (mma.sync); 0 where it does not take the shape (nothing launched) */
void *k_gate_up_wgmma(void);
int k_gate_up_swiglu(cudaStream_t st, void *tma_encode, void *act, void *gu, const void *x, int ldx, const void *w,
                     int ldw, int rows, int I, int K);
/* the same in 128 × 256 tiles on Hopper (gate_up.cu): rows ≥ 128, I a multiple of 128, K ≥ 64;
 * 0 where it does not take the call (nothing launched); k_gate_up_tile_ok() whether it can run
 * here at all */
int k_gate_up_tile_ok(void);
int k_gate_up_tile(cudaStream_t st, void *tma_encode, void *act, void *gu, const void *x, int ldx, const void *w,
                   int ldw, int rows, int I, int K);
/* qkv = x·Wᵀ (B·T rows × 3H·64, x rows × K) with RoPE on its q and k heads in the epilogue, the
 * tables cs, sn (T × 64, fp32) as rope_fwd's, by the same kernel (backend.h: qkv_rope_fwd);
 * 0 where it does not take the call (nothing launched) */
int k_qkv_rope(cudaStream_t st, void *tma_encode, void *qkv, const void *x, int ldx, const void *w, int ldw,
               const float *cs, const float *sn, int B, int T, int H, int K);
/* dgu and act of SwiGLU's backward from dact, the product x·Wᵀ computed again (Hopper only) */
int k_gate_up_swiglu_bwd(cudaStream_t st, void *tma_encode, void *dgu, void *act, const void *dact, const void *x,
                         int ldx, const void *w, int ldw, int rows, int I, int K);
/* the down projection's dact = dy·W (W: K × I, rows ldw apart) and the SwiGLU backward after it
 * on Hopper (down_swiglu.cu): dgu and act (NULL: not written) from dact and gu; wt, a work buffer
 * of I·K bf16 that takes Wᵀ. 0 where it does not take the shape (nothing launched, nothing
 * written); k_down_swiglu_ok() says whether it can run here at all. */
int k_down_swiglu_ok(void);
int k_down_swiglu_bwd(cudaStream_t st, void *tma_encode, void *dgu, void *act, const void *dy, int ldy, const void *W,
                      int ldw, void *wt, const void *gu, int rows, int I, int K);
/* y = rms(res + x·Wᵀ) over D (backend.h: linear_norm_fwd), all bf16, Hopper only: tma_encode =
 * k_gate_up_wgmma() and clusters = k_linear_norm_clusters() (the kernel's shared memory limit
 * raised there, once; 0 where it cannot run); 0 where it does not take the shape (nothing
 * launched) */
int k_linear_norm_clusters(void);
int k_linear_norm_fwd(cudaStream_t st, void *tma_encode, int clusters, void *y, float *rstd, const void *res,
                      const void *x, int ldx, const void *w, int ldw, int rows, int K, int D, float eps);
/* mlp_t's token mixer forward (backend.h: token_mlp_fwd), Hopper only; 0 where not taken */
int k_token_mlp_fwd(cudaStream_t st, void *tma_encode, void *y, float *rstd, const void *x, const void *wgu, int ldgu,
                    const void *wdn, int lddn, int B, int T, int Tp, int D, int It, float eps);
void k_rope(cudaStream_t st, int dt, void *qkv, const float *cos, const float *sin, int B, int T, int H, int hd,
            int transpose);

/* attention helpers (the GEMMs are the backend's); scores S, P, dP are fp32 */
void k_softmax_lse(cudaStream_t st, float *S, float *lse, int B, int H, int T, int h);
void k_exp_lse(cudaStream_t st, float *S, const float *lse, int B, int H, int T, int h);
void k_att_rowdot(cudaStream_t st, int dt, float *dr, const void *dout, const void *out, int B, int T, int H, int hd);
void k_att_ds(cudaStream_t st, float *dP, const float *P, const float *dr, int B, int H, int T, int h);
/* fused attention on bf16 activations, head dim 64, 16-byte aligned tensors: qkv (B,T,3H,64),
 * out and dout (B,T,H,64), dqkv like qkv, all bf16; lse and dr (B,H,T) fp32 */
int k_flash_ok(const void *a, const void *b, int hd);
int k_flash_wgmma(void); /* 1: the device and this build run the sm_90a (wgmma) attention kernels */
/* tma_encode (k_gate_up_wgmma's; NULL: not used): T > 128 by TMA */
void k_flash_fwd(cudaStream_t st, int wgmma, void *tma_encode, void *out, float *lse, const void *qkv, int B, int T,
                 int H);
/* the Hopper forward with RoPE applied to q and k as they arrive (backend.h: attention_fwd_rope);
 * with keep, the rotated q and k written back over qkv's. Only where one block holds a head's
 * rows (T ≤ 128): else each of a head's blocks would rotate all its keys again. 0, nothing done,
 * where it does not run (mma.sync, or a longer T). tma_encode (k_gate_up_wgmma's; NULL: not
 * used): the copies by TMA, tables included. */
int k_flash_fwd_rope(cudaStream_t st, int wgmma, void *tma_encode, void *out, float *lse, void *qkv, int B, int T,
                     int H, const float *cs, const float *sn, int keep);
/* one_pass (wgmma only; else the deterministic two passes): dqacc is a zeroed buffer of
 * k_flash_dq_bytes through which the backward sums dQ, or NULL where that is 0 (one block holds
 * every key of a head and writes its dQ itself) */
size_t k_flash_dq_bytes(int B, int T, int H);
/* rcs, rsn: the rotary embedding's fp32 (T × 64) tables to rotate dq and dk back with on the way
 * out, or NULL; returns 1 where that was done (the one-pass backward), 0 where the caller must.
 * tma_encode (NULL: not used): the one-pass backward of short heads (T ≤ 128) by TMA, persistent */
int k_flash_short_bwd_ok(void); /* the short heads' persistent backward can run (its limit raised) */
int k_flash_bwd(cudaStream_t st, int wgmma, void *tma_encode, int one_pass, void *dqkv, float *dqacc,
                const void *dout, const void *qkv, const float *lse, const float *dr, int B, int T, int H,
                const float *rcs, const float *rsn);

void k_embed_fwd(cudaStream_t st, int dt, void *out, const trm_embed_args *a);
/* work: (chunks × V × D) floats, chunks = k_embed_tok_chunks(rows) */
int k_embed_tok_chunks(int rows);
void k_embed_bwd(cudaStream_t st, int dt, const void *dout, const trm_embed_args *a, int V, float *d_tok_w,
                 float *d_pos_w, float *d_puz_rows, float *work);

/* work: 4·B doubles + B ints */
void k_loss_head(cudaStream_t st, const trm_loss_args *a, void *work);

void k_act_reset(cudaStream_t st, int dt, int B, int T, int D, int S, const uint8_t *halted, void *zH,
                 void *zL, const float *H_init, const float *L_init, int32_t *steps,
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
