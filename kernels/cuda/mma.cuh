/* mma.cuh — the tensor-core and asynchronous-copy primitives the mma.sync kernels share
 * (attention.cu, swiglu.cu's fused gate/up product): bf16 m16n8k16 products with fp32 sums,
 * ldmatrix fragments from shared memory, and cp.async copies of matrix rows into padded
 * shared tiles. */
#ifndef TRM_CUDA_MMA_CUH
#define TRM_CUDA_MMA_CUH
#include "common.cuh"

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

/* c += a·b for one 16×8 tile with k = 16 */
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldsm4(uint32_t r[4], const bf16 *p) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void ldsm4t(uint32_t r[4], const bf16 *p) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

/* Rows [r0, r0 + nrows) of a bf16 matrix (rows ld apart) into a padded shared tile (rows tld
 * apart), asynchronously, `chunks` 16-byte pieces a row; rows at or past `rows` and pieces at
 * or past column `cols` are zero-filled (a source size of 0 reads nothing). */
__device__ __forceinline__ void cp_async_rows(bf16 *tile, int tld, const bf16 *src, size_t ld, int r0, int nrows,
                                              int rows, int chunks, int cols) {
    for (int i = threadIdx.x; i < nrows * chunks; i += blockDim.x) {
        int r = i / chunks, c = (i % chunks) * 8;
        int ok = r0 + r < rows && c < cols;
        const bf16 *g = src + (ok ? (size_t)(r0 + r) * ld + c : 0);
        uint32_t d = (uint32_t)__cvta_generic_to_shared(tile + r * tld + c);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(g), "r"(ok ? 16 : 0));
    }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

#endif
