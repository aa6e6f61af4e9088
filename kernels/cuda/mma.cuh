/* mma.cuh — the tensor-core and asynchronous-copy primitives the kernels share: bf16
 * m16n8k16 products with fp32 sums, ldmatrix fragments and cp.async row copies (the mma.sync
 * kernels), and on Hopper the warpgroup products (wgmma) with their shared-memory descriptors,
 * TMA copies through tensor maps and the mbarriers that count them. */
#ifndef TRM_CUDA_MMA_CUH
#define TRM_CUDA_MMA_CUH
#include "common.cuh"
/* CUtensorMap: the host side of a 90a-real build and the device side of any sm_90a pass */
#if defined(TRM_CUDA_SM90A) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include <cuda.h>
#include <cudaTypedefs.h>
#endif

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
/* Rows [r0, r0 + nrows) × columns [k0, k0 + 64) of a bf16 matrix (rows ld apart) into a tile in
 * the 128-byte swizzle the wgmma descriptors name (chunk c of row r at ((c ^ (r & 7)) << 4)), by
 * the `nthr` threads numbered `tid`; rows at or past `rows` and columns at or past `cols` are
 * zero-filled. */
__device__ __forceinline__ void cp_async_swz(bf16 *tile, const bf16 *src, size_t ld, int r0, int nrows, int rows,
                                             int k0, int cols, int tid, int nthr) {
    uint32_t base = (uint32_t)__cvta_generic_to_shared(tile);
    for (int i = tid; i < nrows * 8; i += nthr) {
        int r = i >> 3, c = i & 7, ok = r0 + r < rows && k0 + c * 8 < cols;
        const bf16 *g = src + (ok ? (size_t)(r0 + r) * ld + k0 + c * 8 : 0);
        uint32_t d = base + r * 128 + ((c ^ (r & 7)) << 4);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(g), "r"(ok ? 16 : 0));
    }
}
/* Dynamic shared memory from raw on, rounded up to a 1024-byte boundary (the swizzle atoms), by
 * pointer arithmetic on raw itself: a pointer made from an integer is generic, and the loads and
 * stores through it then take the generic path (LD/ST, not LDS/STS). */
__device__ __forceinline__ unsigned char *smem_align1024(unsigned char *raw) {
    return raw + ((1024u - ((uint32_t)__cvta_generic_to_shared(raw) & 1023u)) & 1023u);
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* ---- wgmma (sm_90a): a warpgroup of 4 warps multiplies 64 rows at once, A from registers (the
 * mma.sync A fragment of each warp's 16 rows), B from shared memory described by a matrix
 * descriptor, fp32 sums in registers (the mma.sync C layout per warp, 8 column tiles of 8).
 * Only the sm_90a pass compiles these (TRM_WGMMA); other targets keep the mma.sync kernels. */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TRM_WGMMA 1
/* Descriptor of a tile in the 128-byte-swizzled layout (rows of 64 bf16, chunk c of row r at
 * ((c ^ (r & 7)) << 4), 1024-byte aligned atoms of 8 rows): lbo/sbo in bytes. */
__device__ __forceinline__ uint64_t wg_desc(const void *smem, uint32_t lbo, uint32_t sbo) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
}
/* p, opaque to the compiler: descriptors of loop-invariant tiles built from it inside a loop are
 * rebuilt at their use instead of being hoisted and held in registers across the loop */
template <typename T> __device__ __forceinline__ T *opaque(T *p) {
    asm volatile("" : "+l"(p));
    return p;
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
/* shared memory written by ordinary stores or cp.async, read next by the tensor cores */
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
/* keep the compiler from moving register reads/writes across an issue or a wait, and keep a
 * wgmma's accumulators and A fragments alive (their registers not reused) until the wait that
 * ends it (descriptors are read at issue) */
/* over the first N rows only (wg_fence_first; the rest never reach a product: not held live) */
template <int N, int R, int C> __device__ __forceinline__ void wg_fence_first(float (&d)[R][C]) {
#pragma unroll
    for (int j = 0; j < N; j++)
#pragma unroll
        for (int e = 0; e < C; e++) asm volatile("" : "+f"(d[j][e])::"memory");
}
template <int R, int C> __device__ __forceinline__ void wg_fence_f(float (&d)[R][C]) { wg_fence_first<R>(d); }
template <int R> __device__ __forceinline__ void wg_fence_u(uint32_t (&a)[R][4]) {
#pragma unroll
    for (int k = 0; k < R; k++)
#pragma unroll
        for (int e = 0; e < 4; e++) asm volatile("" : "+r"(a[k][e])::"memory");
}
/* d (64 × 64 over the warpgroup) = (acc ? d : 0) + A (64 × 16, registers) · B (16 × 64, desc);
 * (ACC = 0: d = A·B); TB = 1: B is stored N-major (rows = the k index), 0: K-major (rows = the n index) */
template <int TB, int ACC>
__device__ __forceinline__ void wg_m64n64k16(float d[8][4], const uint32_t a[4], uint64_t desc) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, %37, 1, 1, %38;\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "n"(ACC), "n"(TB));
}
/* d (64 × 32) = (ACC ? d : 0) + A · B with A read from shared memory too (descriptor da; TA = 0:
 * K-major, 1: M-major, the rows of the stored tile being the k index), B K-major */
template <int ACC, int TA = 0>
__device__ __forceinline__ void wg_m64n32k16_ss(float d[4][4], uint64_t da, uint64_t db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, %18, 1, 1, %19, 0;\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
                 : "l"(da), "l"(db), "n"(ACC), "n"(TA));
}
/* d (64 × 64) = (ACC ? d : 0) + A·B, both from shared memory: A K-major, B K-major (TB = 0) or
 * N-major (TB = 1: the stored tile's rows are the k index, as the short backward's K in dQ = dS·K) */
template <int ACC, int TB> __device__ __forceinline__ void wg_m64n64k16_ss(float d[8][4], uint64_t da, uint64_t db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, %34, 1, 1, 0, %35;\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
                 : "l"(da), "l"(db), "n"(ACC), "n"(TB));
}
/* d (64 × 128) = (acc ? d : 0) + A·B, both from shared memory, K-major (a GEMM's tile: rows of A
 * and of B hold the k index contiguously); acc a run-time flag, so one loop issues the first
 * k-step of a tile and the rest */
__device__ __forceinline__ void wg_m64n128k16_ss(float d[16][4], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
                 : "l"(da), "l"(db), "r"(acc));
}
/* d (64 × 256) = (acc ? d : 0) + A·B, both from shared memory, K-major, as wg_m64n128k16_ss
 * (linear_norm.cu: a block's 256-column half of a 512-wide row) */
__device__ __forceinline__ void wg_m64n256k16_ss(float (&d)[32][4], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3]), "+f"(d[16][0]), "+f"(d[16][1]), "+f"(d[16][2]), "+f"(d[16][3]), "+f"(d[17][0]), "+f"(d[17][1]), "+f"(d[17][2]), "+f"(d[17][3]), "+f"(d[18][0]), "+f"(d[18][1]), "+f"(d[18][2]), "+f"(d[18][3]), "+f"(d[19][0]), "+f"(d[19][1]), "+f"(d[19][2]), "+f"(d[19][3]), "+f"(d[20][0]), "+f"(d[20][1]), "+f"(d[20][2]), "+f"(d[20][3]), "+f"(d[21][0]), "+f"(d[21][1]), "+f"(d[21][2]), "+f"(d[21][3]), "+f"(d[22][0]), "+f"(d[22][1]), "+f"(d[22][2]), "+f"(d[22][3]), "+f"(d[23][0]), "+f"(d[23][1]), "+f"(d[23][2]), "+f"(d[23][3]), "+f"(d[24][0]), "+f"(d[24][1]), "+f"(d[24][2]), "+f"(d[24][3]), "+f"(d[25][0]), "+f"(d[25][1]), "+f"(d[25][2]), "+f"(d[25][3]), "+f"(d[26][0]), "+f"(d[26][1]), "+f"(d[26][2]), "+f"(d[26][3]), "+f"(d[27][0]), "+f"(d[27][1]), "+f"(d[27][2]), "+f"(d[27][3]), "+f"(d[28][0]), "+f"(d[28][1]), "+f"(d[28][2]), "+f"(d[28][3]), "+f"(d[29][0]), "+f"(d[29][1]), "+f"(d[29][2]), "+f"(d[29][3]), "+f"(d[30][0]), "+f"(d[30][1]), "+f"(d[30][2]), "+f"(d[30][3]), "+f"(d[31][0]), "+f"(d[31][1]), "+f"(d[31][2]), "+f"(d[31][3])
                 : "l"(da), "l"(db), "r"(acc));
}
/* d (64 × 128) = (acc ? d : 0) + A·B, both from shared memory, A M-major (the stored tile's
 * rows are the k index, 64 m values a row: a transposed operand read as it lies), B K-major */
__device__ __forceinline__ void wg_m64n128k16_ss_ta(float d[16][4], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 1, 0;\n}\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
                 : "l"(da), "l"(db), "r"(acc));
}
/* d (64 × N) = (acc ? d : 0) + A (64 × 16, registers: the mma.sync A fragment of each warp's 16
 * rows) · B (K-major, descriptor), N = 128 or 104 (d's first N/8 column tiles). A first product
 * that zeroes d itself leaves d's registers to the tensor cores alone: zeroing them with moves
 * while another product is in flight makes ptxas serialise every wgmma of the kernel (C7515). */
template <int N> __device__ __forceinline__ void wg_m64nk16_rs(float d[16][4], const uint32_t a[4], uint64_t db, int acc);
template <> __device__ __forceinline__ void wg_m64nk16_rs<128>(float d[16][4], const uint32_t a[4], uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}
template <> __device__ __forceinline__ void wg_m64nk16_rs<104>(float d[16][4], const uint32_t a[4], uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %57, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n104k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51}, {%52, %53, %54, %55}, %56, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}
/* ---- the tensor memory accelerator (TMA) and mbarriers: boxes of a tensor map (128-byte
 * swizzle) into shared tiles, counted on an mbarrier that the waiters poll by phase parity */
__device__ __forceinline__ void mbar_init(uint64_t *bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"((uint32_t)__cvta_generic_to_shared(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_wait(uint64_t *bar, int parity) {
    asm volatile("{\n.reg .pred p;\nWAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra WAIT_%=;\n}\n" ::"r"((uint32_t)__cvta_generic_to_shared(bar)), "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void tma_load_2d(bf16 *dst, const CUtensorMap *tm, int c0, int c1, uint64_t *bar,
                                            int bytes) {
    uint32_t b = (uint32_t)__cvta_generic_to_shared(bar);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(tm), "r"(c0), "r"(c1), "r"(b)
                 : "memory");
}
/* whether bar's phase of that parity has completed (mbar_wait without the wait) */
__device__ __forceinline__ bool mbar_done(uint64_t *bar, int parity) {
    uint32_t ok;
    asm volatile("{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(ok)
                 : "r"((uint32_t)__cvta_generic_to_shared(bar)), "r"(parity)
                 : "memory");
    return ok != 0;
}
__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"((uint32_t)__cvta_generic_to_shared(bar)) : "memory");
}
/* one arrival on bar that also expects `bytes` from the TMA copies issued after it (one
 * arrival for several boxes: tma_load_*_nb) */
__device__ __forceinline__ void mbar_expect(uint64_t *bar, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"((uint32_t)__cvta_generic_to_shared(bar)),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void tma_load_2d_nb(void *dst, const CUtensorMap *tm, int c0, int c1, uint64_t *bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(tm), "r"(c0), "r"(c1),
                 "r"((uint32_t)__cvta_generic_to_shared(bar))
                 : "memory");
}
__device__ __forceinline__ void tma_load_3d_nb(void *dst, const CUtensorMap *tm, int c0, int c1, int c2,
                                               uint64_t *bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                 ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(tm), "r"(c0), "r"(c1), "r"(c2),
                 "r"((uint32_t)__cvta_generic_to_shared(bar))
                 : "memory");
}
/* The producer's side of that ring, one chunk: A's at (chunk kc, row ra) of tma and B's at row
 * rb of tmb (B3: a 3-D map, its box at (kc, rb, 0)) into the next stage once every consumer warp
 * has released it. slot and phase carry across chunks and tiles. */
template <int NS, int STAGE, int A_BYTES, int B3 = 0>
__device__ __forceinline__ void tma_ring_chunk(const CUtensorMap *tma, int ra, const CUtensorMap *tmb, int rb, int kc,
                                               unsigned char *ring, uint64_t *full, uint64_t *empty, int &slot,
                                               int &phase) {
    mbar_wait(empty + slot, phase ^ 1);
    unsigned char *s = ring + slot * STAGE;
    mbar_expect(full + slot, STAGE);
    tma_load_2d_nb(s, tma, kc * 64, ra, full + slot);
    if (B3)
        tma_load_3d_nb(s + A_BYTES, tmb, kc * 64, rb, 0, full + slot);
    else
        tma_load_2d_nb(s + A_BYTES, tmb, kc * 64, rb, full + slot);
    if (++slot == NS) slot = 0, phase ^= 1;
}
/* The producer's whole share of a persistent block (tiles first, first + step, ... below
 * tiles, ntiles column tiles a row range): each tile's KC chunks, A's rows from the tile's row
 * range (BM apart), B's from its column tile (BN apart), by tma_ring_chunk. */
template <int NS, int STAGE, int A_BYTES, int B3, int BM, int BN>
__device__ __forceinline__ void tma_ring_tiles(const CUtensorMap *tma, const CUtensorMap *tmb, unsigned char *ring,
                                               uint64_t *full, uint64_t *empty, int first, int step, int tiles,
                                               int ntiles, int KC) {
    int slot = 0, phase = 0;
    for (int t = first; t < tiles; t += step)
        for (int kc = 0; kc < KC; kc++)
            tma_ring_chunk<NS, STAGE, A_BYTES, B3>(tma, t / ntiles * BM, tmb, t % ntiles * BN, kc, ring, full, empty,
                                                   slot, phase);
}
/* One tile's KC chunks, and beside them the tile's own buffer loaded by side() once the last
 * tile's outputs have left it (sfree, parity sphase ^ 1): tested after each chunk past the
 * first stages, so the chunks never wait for it, and waited for only after the last chunk.
 * sphase carries across tiles. */
template <int NS, int STAGE, int A_BYTES, typename F>
__device__ __forceinline__ void tma_ring_tile(F side, const CUtensorMap *tma, int ra, const CUtensorMap *tmb, int rb,
                                              unsigned char *ring, uint64_t *full, uint64_t *empty, uint64_t *sfree,
                                              int KC, int &slot, int &phase, int &sphase) {
    int at = KC < NS ? KC - 1 : NS - 1;
    bool pending = true;
    for (int kc = 0; kc < KC; kc++) {
        tma_ring_chunk<NS, STAGE, A_BYTES>(tma, ra, tmb, rb, kc, ring, full, empty, slot, phase);
        if (pending && kc >= at && mbar_done(sfree, sphase ^ 1)) side(), pending = false;
    }
    if (pending) {
        mbar_wait(sfree, sphase ^ 1);
        side();
    }
    sphase ^= 1;
}
/* The epilogues' shared-memory accesses, by address. No C++ access touches those buffers, so no
 * memory clobber: being volatile keeps them in order with the other volatile asm (the barrier
 * waits and arrivals, the wgmma fences), which is all the order they need. */
__device__ __forceinline__ uint32_t lds_b32(uint32_t a) {
    uint32_t v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(a));
    return v;
}
__device__ __forceinline__ void sts_b32(uint32_t a, uint32_t v) { asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a), "r"(v)); }
__device__ __forceinline__ void lds_v4(uint32_t a, uint32_t (&q)[4]) {
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(q[0]), "=r"(q[1]), "=r"(q[2]), "=r"(q[3]) : "r"(a));
}
__device__ __forceinline__ void sts_v4(uint32_t a, const uint32_t (&q)[4]) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "r"(q[0]), "r"(q[1]), "r"(q[2]), "r"(q[3]));
}
/* the low and high bf16 of a pair, as floats */
__device__ __forceinline__ float bf16_lo(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }
/* A consumer warpgroup's products over one tile's KC chunks of a TMA ring of NS stages, STAGE
 * bytes each (A's 128 rows of 64 bf16 first, B's rows from A_BYTES on, 128-byte swizzle): mma(da,
 * db, kc) issues the chunk's products for the warpgroup's 64 rows (wg) from the descriptors of
 * its A rows and of B. A chunk's products are issued before the last chunk's are waited for;
 * each warp's lane 0 then releases that stage (empty: one arrival a consumer warp). slot and
 * phase carry across tiles; on return every product has landed. */
template <int NS, int STAGE, int A_BYTES, typename F>
__device__ __forceinline__ void wg_ring_tile(F mma, unsigned char *ring, uint64_t *full, uint64_t *empty, int KC,
                                             int wg, int lane, int &slot, int &phase) {
    int prev = 0;
    for (int kc = 0; kc < KC; kc++) {
        mbar_wait(full + slot, phase);
        unsigned char *s = ring + slot * STAGE;
        uint64_t da = wg_desc(s + wg * 64 * 128, 16, 1024), db = wg_desc(s + A_BYTES, 16, 1024);
        wg_fence();
        mma(da, db, kc);
        wg_commit();
        wg_wait<1>();
        if (kc > 0 && lane == 0) mbar_arrive(empty + prev); /* this warp is past chunk kc − 1 */
        prev = slot;
        if (++slot == NS) slot = 0, phase ^= 1;
    }
    wg_wait<0>();
    if (lane == 0) mbar_arrive(empty + prev);
}
/* A consumer warpgroup's tiles of a persistent block (first, first + step, ... below tiles):
 * each tile's products into d by wg_ring_tile (mma), then, once the storers have read the
 * outputs of the tile NB before out of the epilogue's buffer it % NB (efree[it % NB]), out(it %
 * NB) leaves this one's sums there, and sready[it % NB] counts the consumer threads done with
 * it, each having fenced its stores for the async proxy (the storers may send the sums out by
 * TMA as they are: gate_up.cu's gu). */
template <int NS, int STAGE, int A_BYTES, int NB = 1, int R, typename M, typename O>
__device__ __forceinline__ void wg_consume(float (&d)[R][4], M mma, O out, unsigned char *ring, uint64_t *full,
                                           uint64_t *empty, uint64_t *efree, uint64_t *sready, int first, int step,
                                           int tiles, int KC, int wg, int lane) {
    int slot = 0, phase = 0, it = 0;
    for (int t = first; t < tiles; t += step, it++) {
        wg_ring_tile<NS, STAGE, A_BYTES>(mma, ring, full, empty, KC, wg, lane, slot, phase);
        wg_fence_f(d);
        int b = it % NB;
        mbar_wait(efree + b, ((it / NB) & 1) ^ 1);
        out(b);
        fence_async_smem(); /* the sums' generic stores, which TMA stores may read next */
        mbar_arrive(sready + b);
    }
}
/* The consumers' sums of warpgroup wg's 64 rows rounded to bf16 into an epilogue buffer of
 * BOX-byte boxes of 64 columns × 128 rows (128-byte swizzle), the layout the storers and the TMA
 * stores read. The thread's values are rows r and r + 8 (r = its warp's 16 rows, lane / 4),
 * columns 8j + 2(lane % 4) and the next, j < J: box j / 8, row r, 16-byte chunk (j % 8) ^
 * (r % 8), the lane's 4 bytes in it. */
template <int BOX, int J>
__device__ __forceinline__ void wg_sums_bf16(float (&d)[J][4], unsigned char *buf, int wg, int lane, int warp) {
    int r0 = wg * 64 + warp * 16 + (lane >> 2);
    uint32_t base = (uint32_t)__cvta_generic_to_shared(buf) + r0 * 128 + 4 * (lane & 3);
#pragma unroll
    for (int j = 0; j < J; j++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++)
            sts_b32(base + (j >> 3) * BOX + (((j & 7) ^ (r0 & 7)) << 4) + hr * 1024,
                    pack_bf16(d[j][2 * hr], d[j][2 * hr + 1]));
}
/* `bytes` (a multiple of 16) from global src (16-byte aligned) to shared dst, counted on bar as
 * tma_load_2d's boxes (no tensor map: a contiguous run) */
__device__ __forceinline__ void bulk_load(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src), "r"(bytes),
                 "r"((uint32_t)__cvta_generic_to_shared(bar))
                 : "memory");
}
/* a shared tile out to a box of a tensor map (elements outside the tensor are not written), in
 * the issuing thread's bulk group: tma_commit, then tma_wait_read before the tile is written
 * again (and tma_wait before the block exits) */
__device__ __forceinline__ void tma_store_3d(const CUtensorMap *tm, const void *src, int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n"
                 ::"l"(tm), "r"((uint32_t)__cvta_generic_to_shared(src)), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
/* the same for a 2-D tensor map */
__device__ __forceinline__ void tma_store_2d(const CUtensorMap *tm, const void *src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
                 ::"l"(tm), "r"((uint32_t)__cvta_generic_to_shared(src)), "r"(c0), "r"(c1)
                 : "memory");
}
/* the named barrier of warpgroup wg's 128 threads (id wg + 1; 0 is __syncthreads') */
__device__ __forceinline__ void wg_bar(int wg) { asm volatile("bar.sync %0, 128;\n" ::"r"(wg + 1) : "memory"); }
__device__ __forceinline__ void tma_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void tma_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void tma_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
/* named barrier ID among N threads (0 is __syncthreads', 1.. wg_bar's of the warpgroups that
 * use it) */
template <int ID, int N> __device__ __forceinline__ void named_bar() {
    asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(N) : "memory");
}
/* The storers' end of a tile (thread t of the N meeting at named barrier ID): their generic
 * stores into the tile's buffer fenced for the async proxy, the storers met; then thread 0
 * sends the buffer out by TMA (send()), waits until the copies have read it and hands it back
 * (an arrival on bfree). */
template <int ID, int N, typename S>
__device__ __forceinline__ void storers_send(S send, uint64_t *bfree, int t) {
    fence_async_smem();
    named_bar<ID, N>();
    if (t == 0) {
        send();
        tma_commit();
        tma_wait_read();
        mbar_arrive(bfree);
    }
}
/* A tile's [g | u] pair as four BOX-byte boxes of 64 columns × 128 rows from buf (g's two, then
 * u's) out to columns n0.. and I + n0.. of tm's (rows × 2I) tensor, from row m0 */
template <int BOX>
__device__ __forceinline__ void tma_store_gu(const CUtensorMap *tm, const unsigned char *buf, int I, int n0, int m0) {
#pragma unroll
    for (int b = 0; b < 4; b++) tma_store_2d(tm, buf + b * BOX, (b >> 1) * I + n0 + (b & 1) * 64, m0);
}
/* silu with an approximate reciprocal (a few fp32 ulps, below bf16's rounding of the result):
 * the epilogue's instructions are what the other warpgroups' products must hide. swiglu_bwd
 * recomputes act with silu_f, so the two can differ by one bf16 ulp where silu(g)·u falls
 * within those ulps of a rounding boundary (a few elements in 10⁵). */
__device__ __forceinline__ float silu_fast(float g) { return __fdividef(g, 1.f + __expf(-g)); }

/* four 8 × 8 bf16 matrices (the register r[i] of each thread holding its two elements of matrix
 * i, as in an A fragment) stored transposed: lane 8i + p gives the address of row p of matrix
 * i's transpose (16 bytes) */
__device__ __forceinline__ void stsm4t(uint32_t addr, const uint32_t r[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]),
                 "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}
/* four 8 × 8 bf16 matrices (register r[i] of each thread: its two elements of matrix i, as in a
 * C fragment's packed row) stored as they are: lane 8i + p gives the address of row p of matrix i */
__device__ __forceinline__ void stsm4(uint32_t addr, const uint32_t r[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]),
                 "r"(r[2]), "r"(r[3])
                 : "memory");
}
/* four consecutive floats added to global memory in one reduction (sm_90; the vector form needs
 * PTX ISA 8.1, CUDA 12.1: older compilers add them one by one) */
__device__ __forceinline__ void red_add_v4(float *p, float4 v) {
#if __CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 1)
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
                 : "memory");
#else
    atomicAdd(p, v.x), atomicAdd(p + 1, v.y), atomicAdd(p + 2, v.z), atomicAdd(p + 3, v.w);
#endif
}
#endif

#if defined(TRM_CUDA_SM90A)
/* A tensor map through the driver's encoder (k_gate_up_wgmma() gives it): element type dt,
 * rank dims, innermost first, the byte strides of dims 1.., the box, the swizzle; elements
 * outside the tensor read as zeros and are not written */
static inline int tma_map(CUtensorMap *tm, void *encode, CUtensorMapDataType dt, CUtensorMapSwizzle swz, const void *p,
                          int rank, const cuuint64_t *dim, const cuuint64_t *stride, const cuuint32_t *box) {
    const cuuint32_t one[3] = {1, 1, 1};
    return ((PFN_cuTensorMapEncodeTiled_v12000)encode)(tm, dt, (cuuint32_t)rank, (void *)p, dim, stride, box, one,
                                                        CU_TENSOR_MAP_INTERLEAVE_NONE, swz,
                                                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}
/* a bf16 one in the 128-byte swizzle the wgmma tiles read */
static inline int tma_map_bf16(CUtensorMap *tm, void *encode, const void *p, int rank, const cuuint64_t *dim,
                               const cuuint64_t *stride, const cuuint32_t *box) {
    return tma_map(tm, encode, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, CU_TENSOR_MAP_SWIZZLE_128B, p, rank, dim, stride, box);
}
/* a (rows × cols, ld) bf16 matrix as boxes of 64 columns × box_rows rows */
static inline int tma_map_2d(CUtensorMap *tm, void *encode, const void *p, int rows, int cols, int ld, int box_rows) {
    cuuint64_t dim[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, stride[1] = {(cuuint64_t)ld * 2};
    cuuint32_t box[2] = {64, (cuuint32_t)box_rows};
    return tma_map_bf16(tm, encode, p, 2, dim, stride, box);
}
#endif

#endif
