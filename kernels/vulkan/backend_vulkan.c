/* backend_vulkan.c — the `mps` backend: the table of backend.h on one Vulkan device (Apple GPUs
 * through MoltenVK, any other Vulkan GPU, lavapipe in CI). Every op is a compute kernel of
 * kernels/vulkan/<op>.comp issued in order on one queue; GEMMs are our tiled kernel, attention
 * is per-head batched GEMMs around the softmax kernels (as on cuda). fp32 only, no compile
 * stage and no collectives (the capability row TRM_CAPS_MPS). Loss metrics are summed on the
 * host in double from per-sample fp32 partials, since shaders have no fp64. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "vk.h"

trm_backend *trm_mps_backend_create(int index, trm_err *e);
int trm_mps_probe(char *desc, size_t desc_len);
int trm_mps_probe_auto(char *desc, size_t desc_len);

enum { K_GEMM, K_GEMM_WIDE, K_GEMM_WIDE_K32, K_ELEM, K_RMSNORM, K_SWIGLU, K_ROPE, K_ATT, K_EMBED, K_LOSS, K_ACT, K_OPTIM, K_COUNT };
static const char *const kernel_names[K_COUNT] = {"gemm",    "gemm_wide", "gemm_wide_k32", "elementwise", "rmsnorm", "swiglu", "rope",
                                                  "attention", "embed",   "loss",        "act",     "optim"};

enum { SCR_ATT_S, SCR_ATT_DP, SCR_ATT_DR, SCR_EMBED, SCR_LOSS, SCR_SPLITK, SCR_COUNT };

typedef struct {
    vk_ctx vk;
    int kern[K_COUNT];
    const struct wide_kernel *wide; /* the wide GEMM kernel, or none: see gemm_wide_pick */
    void *scr[SCR_COUNT];
    size_t scr_bytes[SCR_COUNT];
    float *stats_host; /* the loss head's per-sample partials, read back */
    size_t stats_cap;
} mps_ctx;

static mps_ctx *CTX(trm_backend *b) { return (mps_ctx *)b->ctx; }
static uint64_t A(const void *p) { return (uint64_t)(uintptr_t)p; }

/* Kernels index with 32-bit integers (no Int64 capability needed): a larger tensor is refused
 * with a message rather than wrapped around. The limit is 2^31 so that a grid-stride loop's
 * index plus the grid (< 2^24 invocations) cannot wrap past 2^32 either. */
static uint32_t u32(size_t n, const char *what) {
    if (n > (size_t)INT32_MAX) {
        fprintf(stderr, "trm: mps: %s needs %zu elements in one kernel, more than the 2^31 an mps kernel "
                        "indexes; lower global_batch_size\n", what, n);
        exit(1);
    }
    return (uint32_t)n;
}

static void *scratch(trm_backend *b, int which, size_t bytes) {
    mps_ctx *c = CTX(b);
    if (c->scr_bytes[which] >= bytes) return c->scr[which];
    if (c->scr[which]) vk_free(&c->vk, c->scr[which]);
    c->scr[which] = vk_alloc(&c->vk, bytes);
    if (!c->scr[which]) vk_oom_exit(&c->vk, bytes);
    c->scr_bytes[which] = bytes;
    return c->scr[which];
}

/* Declarations of what the next dispatch reads and writes (see vk_reads): every op declares all
 * of both before each dispatch, so that vk_device.c elides the barriers from them alone. rd and wr
 * count 4-byte elements (floats, int32), rd_bytes and wr_bytes bytes (the uint8 halting flags,
 * the uint64 RNG step); a NULL pointer, an optional tensor that is absent, declares nothing. */
static void rd_bytes(trm_backend *b, const void *p, size_t bytes) {
    if (p) vk_reads(&CTX(b)->vk, p, bytes);
}
static void wr_bytes(trm_backend *b, const void *p, size_t bytes) {
    if (p) vk_writes(&CTX(b)->vk, p, bytes);
}
static void rd(trm_backend *b, const void *p, size_t n) { rd_bytes(b, p, n * sizeof(float)); }
static void wr(trm_backend *b, const void *p, size_t n) { wr_bytes(b, p, n * sizeof(float)); }

/* Bytes from p to the end of its allocation: what an op may touch of a table whose length it is
 * not given, rows picked by id (the puzzle embeddings). */
static size_t bytes_to_end(trm_backend *b, const void *p) {
    const vk_mem *m = vk_find(&CTX(b)->vk, p, 1, "a table read by id");
    return (size_t)(m->addr + m->size - A(p));
}

#define WG 256u
#define MAX_GROUPS 65535u

/* A grid-stride kernel over n items. No items, no groups: vk_dispatch then runs nothing and drops
 * the declarations made for it (so that they do not join the next dispatch's). vec: the kernel's
 * specialization constant 2 (VEC: items of four floats where the host checked alignment). */
static void run1d_vec(trm_backend *b, int k, uint32_t mode, uint32_t vec, const void *pc, uint32_t pcb, size_t n) {
    uint32_t spec[VK_SPEC] = {WG, mode, vec};
    size_t g = (n + WG - 1) / WG;
    vk_dispatch(&CTX(b)->vk, CTX(b)->kern[k], spec, pc, pcb, g > MAX_GROUPS ? MAX_GROUPS : (uint32_t)g, 1, 1);
}
static void run1d(trm_backend *b, int k, uint32_t mode, const void *pc, uint32_t pcb, size_t n) {
    run1d_vec(b, k, mode, 0, pc, pcb, n);
}

/* Whether every pointer given is 16-byte aligned (NULL counts as aligned): a kernel may then
 * read and write them as vec4. */
static int al16(const void *p, const void *q, const void *r) {
    return ((uintptr_t)p | (uintptr_t)q | (uintptr_t)r) % 16 == 0;
}

/* One workgroup of `wg` invocations per row (no rows: as run1d with no items). */
static void run_rows_vec(trm_backend *b, int k, uint32_t mode, uint32_t vec, uint32_t wg, const void *pc, uint32_t pcb,
                         size_t rows) {
    uint32_t spec[VK_SPEC] = {wg, mode, vec};
    vk_dispatch(&CTX(b)->vk, CTX(b)->kern[k], spec, pc, pcb, rows > MAX_GROUPS ? MAX_GROUPS : (uint32_t)rows, 1, 1);
}
static void run_rows(trm_backend *b, int k, uint32_t mode, uint32_t wg, const void *pc, uint32_t pcb, size_t rows) {
    run_rows_vec(b, k, mode, 0, wg, pc, pcb, rows);
}

/* ---- memory ---------------------------------------------------------------------------------- */

static void *mps_alloc(trm_backend *b, size_t bytes) { return vk_alloc(&CTX(b)->vk, bytes); }
static void mps_free(trm_backend *b, void *p) { vk_free(&CTX(b)->vk, p); }
static void mps_to_device(trm_backend *b, void *d, const void *s, size_t n) { vk_upload(&CTX(b)->vk, d, s, n); }
static void mps_to_host(trm_backend *b, void *d, const void *s, size_t n) { vk_download(&CTX(b)->vk, d, s, n); }
static void mps_zero(trm_backend *b, void *p, size_t n) { vk_fill_zero(&CTX(b)->vk, p, n); }
static void mps_sync(trm_backend *b) { vk_finish(&CTX(b)->vk); }
static void mps_mem_info(trm_backend *b, size_t *f, size_t *t) { vk_mem_info(&CTX(b)->vk, f, t); }

static void mps_stream_stats(trm_backend *b, trm_stream_stats *o) {
    const vk_stats *s = &CTX(b)->vk.stats;
    *o = (trm_stream_stats){.dispatches = s->dispatches, .barriers = s->barriers, .submits = s->submits,
                            .waits = s->waits, .record_ms = 1e3 * s->record_s, .wait_ms = 1e3 * s->wait_s};
}

enum { EW_ADD, EW_AXPY, EW_TRANSPOSE, EW_BIAS_FWD, EW_BIAS_BWD, EW_SPLITK_SUM, EW_COPY };
typedef struct {
    uint64_t y, x1, x2;
    uint32_t n, rows, cols, ld;
    float alpha, beta;
    uint32_t ksplit, pad;
    uint64_t sc;
} elem_pc;

/* ---- GEMM (gemm.glsl) -------------------------------------------------------------------------- */

typedef struct {
    uint64_t a, b, c, sa, sb, sc;
    uint32_t M, N, K, lda, ldb, ldc;
    float alpha, beta;
    uint32_t kchunk, ksplit;
} gemm_pc;

/* One GEMM source (gemm.glsl), three tiles compiled in: gemm.comp 64×64 (4×4 sums an
 * invocation) for small and batched products (attention's per-head ones), gemm_wide*.comp
 * 128×128 (8×8) for products at least a tile wide both ways. All have 256 invocations and
 * take 16 or 32 steps of K at a time (split K rounds its chunks to whole steps). Measured on an H200
 * through NVIDIA's Vulkan driver: bench/README.md. */
enum { TILE = 64, WIDE = 128, GEMM_WG = 256, TILE_K = 16 };

/* The wide kernels (gemm_wide*.comp) by their steps of K, and the shared memory each takes (two
 * tiles of WIDE rows of bk + 4 floats). */
typedef struct wide_kernel {
    const char *name;
    int kern, bk;
} wide_kernel;
static const wide_kernel wide_kernels[] = {{"wide16", K_GEMM_WIDE, 16}, {"wide32", K_GEMM_WIDE_K32, 32}};
static uint32_t wide_shared(const wide_kernel *w) { return (uint32_t)(2 * WIDE * (w->bk + 4) * 4); }

/* The wide kernel for this device: 32 steps of K a tile where a work group may have the 36 KiB
 * of shared memory they take (NVIDIA: 48 KiB; 5% faster than 16 steps on an H200), else 16 steps
 * (20 KiB; Apple GPUs have 32 KiB), else none. TRM_MPS_GEMM=narrow or a name of wide_kernels
 * forces one, for measuring them against each other (read once, when the backend is made). */
static const wide_kernel *gemm_wide_pick(const vk_ctx *vk) {
    uint32_t shared = vk->props.limits.maxComputeSharedMemorySize;
    const char *g = getenv("TRM_MPS_GEMM");
    if (g && !strcmp(g, "narrow")) return NULL;
    for (size_t i = 0; g && i < sizeof wide_kernels / sizeof *wide_kernels; i++)
        if (!strcmp(g, wide_kernels[i].name) && wide_shared(&wide_kernels[i]) <= shared) return &wide_kernels[i];
    return wide_shared(&wide_kernels[1]) <= shared ? &wide_kernels[1]
           : wide_shared(&wide_kernels[0]) <= shared ? &wide_kernels[0] : NULL;
}

/* The wide kernel where the product fills its tiles. */
static int gemm_wide_ok(const mps_ctx *c, int M, int N) { return c->wide && M >= WIDE && N >= WIDE; }

/* Elements from a matrix's first to one past its last, which gemm.glsl indexes in 32 bits. */
static size_t gemm_span(int trans, int rows, int cols, int ld) {
    return trans ? (size_t)(cols - 1) * (size_t)ld + (size_t)rows : (size_t)(rows - 1) * (size_t)ld + (size_t)cols;
}

/* An operand is read as vec4 when each of its rows starts 16-byte aligned in every matrix. */
static uint32_t vec4_ok(const float *p, int ld, int64_t stride, int batch) {
    return ((uintptr_t)p % 16 == 0) && ld % 4 == 0 && (batch <= 1 || stride % 4 == 0);
}

/* Workgroups a GEMM should have to fill a GPU; fewer output tiles than half this with a long K
 * (a weight gradient sums over every row of the batch) split K into partial products. */
#define GEMM_TARGET_GROUPS 512
#define SPLITK_MIN_K 256
#define SPLITK_MAX 64

static void mps_gemm(trm_backend *b, trm_gemm_dt dt, int ta, int tb, int M, int N, int K, float alpha,
                     const void *Av, int lda, int64_t sA, const void *Bv, int ldb, int64_t sB, float beta, void *Cv,
                     int ldc, int64_t sC, int batch) {
    if (M <= 0 || N <= 0 || batch <= 0) return;
    if (dt.a != TRM_F32 || dt.b != TRM_F32 || dt.c != TRM_F32) { /* caps.bf16_acts is 0 */
        fprintf(stderr, "trm: mps: a bf16 GEMM operand reached the mps backend (internal error)\n");
        exit(1);
    }
    const float *Am = Av, *Bm = Bv;
    float *C = Cv;
    if (K < 0 || alpha == 0.0f) K = 0; /* C = beta·C, A and B unread (BLAS) */
    mps_ctx *c = CTX(b);
    int wide = gemm_wide_ok(c, M, N), tm = wide ? WIDE : TILE, tn = tm;
    uint32_t spec[VK_SPEC] = {GEMM_WG, 0, 0, 0, 0, 0, 0,
                              (uint32_t)!!ta, (uint32_t)!!tb, vec4_ok(Am, lda, sA, batch), vec4_ok(Bm, ldb, sB, batch)};
    uint32_t gx = (uint32_t)((N + tn - 1) / tn), gy = (uint32_t)((M + tm - 1) / tm);
    if (gx > MAX_GROUPS || gy > MAX_GROUPS) {
        fprintf(stderr, "trm: mps: a %dx%d GEMM is larger than one dispatch covers\n", M, N);
        exit(1);
    }
    if (K > 0) {
        u32(gemm_span(ta, M, K, lda), "a GEMM operand A");
        u32(gemm_span(tb, K, N, ldb), "a GEMM operand B");
    }
    u32(gemm_span(0, M, N, ldc), "a GEMM output");
    size_t tiles = (size_t)gx * gy * batch, splits = 1, kchunk = (size_t)(K > 0 ? K : 1);
    if (tiles < GEMM_TARGET_GROUPS / 2 && K >= 2 * SPLITK_MIN_K) {
        splits = (GEMM_TARGET_GROUPS + tiles - 1) / tiles;
        if (splits > (size_t)K / SPLITK_MIN_K) splits = (size_t)K / SPLITK_MIN_K;
        if (splits > SPLITK_MAX) splits = SPLITK_MAX;
        kchunk = ((size_t)K + splits - 1) / splits;
        size_t bk = wide ? (size_t)c->wide->bk : TILE_K; /* whole steps of the kernel's K */
        kchunk = (kchunk + bk - 1) / bk * bk;
        splits = ((size_t)K + kchunk - 1) / kchunk;
    }
    int kern = c->kern[wide ? c->wide->kern : K_GEMM];
    size_t span_a = K > 0 ? gemm_span(ta, M, K, lda) : 0, span_b = K > 0 ? gemm_span(tb, K, N, ldb) : 0;
    size_t span_c = gemm_span(0, M, N, ldc);
    int64_t one = batch > 1;
    size_t mn = (size_t)M * N, per = MAX_GROUPS / splits;
    for (int i0 = 0; i0 < batch; i0 += (int)per) {
        int nb = batch - i0 < (int)per ? batch - i0 : (int)per;
        gemm_pc pc = {A(Am + i0 * sA * one), A(Bm + i0 * sB * one), A(C + i0 * sC * one),
                      (uint64_t)(sA * one), (uint64_t)(sB * one), (uint64_t)(sC * one),
                      (uint32_t)M, (uint32_t)N, (uint32_t)K, (uint32_t)lda, (uint32_t)ldb, (uint32_t)ldc,
                      alpha, beta, (uint32_t)kchunk, (uint32_t)splits};
        const float *a0 = Am + i0 * sA * one, *b0 = Bm + i0 * sB * one;
        float *c0 = C + i0 * sC * one;
        rd(b, a0, K > 0 ? (size_t)(nb - 1) * (size_t)(sA * one) + span_a : 0);
        rd(b, b0, K > 0 ? (size_t)(nb - 1) * (size_t)(sB * one) + span_b : 0);
        if (splits == 1) {
            size_t cs = (size_t)(nb - 1) * (size_t)(sC * one) + span_c;
            if (beta != 0.0f) rd(b, c0, cs);
            wr(b, c0, cs);
            vk_dispatch(&c->vk, kern, spec, &pc, sizeof pc, gx, gy, (uint32_t)nb);
            continue;
        }
        /* partial products of each K chunk, then their sum in chunk order (deterministic) */
        size_t n = u32((size_t)nb * splits * mn, "split-K GEMM");
        float *work = scratch(b, SCR_SPLITK, n * sizeof(float));
        pc.c = A(work), pc.ldc = (uint32_t)N, pc.sc = mn, pc.alpha = 1.0f, pc.beta = 0.0f;
        wr(b, work, n);
        vk_dispatch(&c->vk, kern, spec, &pc, sizeof pc, gx, gy, (uint32_t)(nb * splits));
        elem_pc sum = {.y = A(C + i0 * sC * one), .x1 = A(work), .n = (uint32_t)(nb * mn), .rows = (uint32_t)M,
                       .cols = (uint32_t)N, .ld = (uint32_t)ldc, .alpha = alpha, .beta = beta,
                       .ksplit = (uint32_t)splits, .sc = (uint64_t)(sC * one)};
        size_t cs = (size_t)(nb - 1) * (size_t)(sC * one) + span_c;
        rd(b, work, n);
        if (beta != 0.0f) rd(b, c0, cs);
        wr(b, c0, cs);
        run1d(b, K_ELEM, EW_SPLITK_SUM, &sum, sizeof sum, (size_t)nb * mn);
    }
}

/* ---- elementwise (elementwise.comp) ------------------------------------------------------------ */


/* Activations are fp32 here (caps.bf16_acts is 0): the void pointers of backend.h are floats. */
/* add, axpy and copy in vec4 where n and the pointers allow, else a float at a time */
static void mps_add(trm_backend *b, void *y, const void *x1, const void *x2, size_t n) {
    uint32_t v = n % 4 == 0 && al16(y, x1, x2);
    elem_pc pc = {.y = A(y), .x1 = A(x1), .x2 = A(x2), .n = u32(v ? n / 4 : n, "add")};
    rd(b, x1, n), rd(b, x2, n), wr(b, y, n);
    run1d_vec(b, K_ELEM, EW_ADD, v, &pc, sizeof pc, pc.n);
}

static void mps_axpy(trm_backend *b, void *y, const void *x, float alpha, size_t n) {
    uint32_t v = n % 4 == 0 && al16(y, x, NULL);
    elem_pc pc = {.y = A(y), .x1 = A(x), .n = u32(v ? n / 4 : n, "axpy"), .alpha = alpha};
    rd(b, x, n), rd(b, y, n), wr(b, y, n);
    run1d_vec(b, K_ELEM, EW_AXPY, v, &pc, sizeof pc, pc.n);
}

/* A kernel rather than vkCmdCopyBuffer where the ranges are whole aligned vec4 and apart: on an
 * H200 the transfer command moved ~0.65 TB/s, a kernel moves several times that. */
static void mps_copy(trm_backend *b, void *d, const void *s, size_t bytes) {
    const char *dc = d, *sc = s;
    if (bytes % 16 || !al16(d, s, NULL) || !(dc + bytes <= sc || sc + bytes <= dc) || bytes / 16 > INT32_MAX) {
        vk_copy(&CTX(b)->vk, d, s, bytes);
        return;
    }
    elem_pc pc = {.y = A(d), .x1 = A(s), .n = (uint32_t)(bytes / 16)};
    rd_bytes(b, s, bytes), wr_bytes(b, d, bytes);
    run1d_vec(b, K_ELEM, EW_COPY, 1, &pc, sizeof pc, pc.n);
}

static void mps_transpose(trm_backend *b, void *outv, int ldo, const void *inv, int ldi, int batch, int rows,
                          int cols) {
    if (batch <= 0 || rows <= 0 || cols <= 0) return;
    float *out = outv;
    const float *in = inv;
    size_t mi = (size_t)rows * ldi, mo = (size_t)cols * ldo;
    uint32_t spec[VK_SPEC] = {256, EW_TRANSPOSE};
    for (int i0 = 0; i0 < batch; i0 += (int)MAX_GROUPS) {
        int nb = batch - i0 < (int)MAX_GROUPS ? batch - i0 : (int)MAX_GROUPS;
        elem_pc pc = {.y = A(out + i0 * mo), .x1 = A(in + i0 * mi), .n = (uint32_t)ldi, .rows = (uint32_t)rows,
                      .cols = (uint32_t)cols, .ld = (uint32_t)ldo};
        u32(mi, "transpose"), u32(mo, "transpose");
        if ((cols + 31) / 32 > (int)MAX_GROUPS || (ldo + 31) / 32 > (int)MAX_GROUPS) {
            fprintf(stderr, "trm: mps: a %dx%d transpose is larger than one dispatch covers\n", rows, cols);
            exit(1);
        }
        rd(b, in + i0 * mi, (size_t)nb * mi), wr(b, out + i0 * mo, (size_t)nb * mo);
        vk_dispatch(&CTX(b)->vk, CTX(b)->kern[K_ELEM], spec, &pc, sizeof pc, (uint32_t)(cols + 31) / 32,
                    (uint32_t)(ldo + 31) / 32, (uint32_t)nb);
    }
}

static void mps_bias_fwd(trm_backend *b, float *y, const float *bias, int rows, int cols, int ld) {
    if (rows <= 0 || cols <= 0) return;
    elem_pc pc = {.y = A(y), .x1 = A(bias), .rows = (uint32_t)rows, .cols = (uint32_t)cols, .ld = (uint32_t)ld};
    size_t span = (size_t)(rows - 1) * ld + cols;
    rd(b, bias, (size_t)cols), rd(b, y, span), wr(b, y, span);
    run1d(b, K_ELEM, EW_BIAS_FWD, &pc, sizeof pc, u32((size_t)rows * cols, "bias"));
}

static void mps_bias_bwd(trm_backend *b, float *dbias, const float *dy, int rows, int cols, int ld) {
    if (rows <= 0 || cols <= 0) return;
    elem_pc pc = {.y = A(dbias), .x1 = A(dy), .rows = (uint32_t)rows, .cols = (uint32_t)cols, .ld = (uint32_t)ld};
    rd(b, dy, (size_t)(rows - 1) * ld + cols), rd(b, dbias, (size_t)cols), wr(b, dbias, (size_t)cols);
    run_rows(b, K_ELEM, EW_BIAS_BWD, 256, &pc, sizeof pc, (size_t)cols);
}

/* ---- RMSNorm, SwiGLU, RoPE ------------------------------------------------------------------- */

typedef struct {
    uint64_t out, rstd, a, b;
    uint32_t rows, dim;
    float eps;
    uint32_t ld;
} rms_pc;

static uint32_t row_wg(int dim) { return dim >= 512 ? 128 : 64; }

static void mps_rmsnorm_fwd(trm_backend *b, void *y, float *rstd, const void *x, const void *res, int rows,
                            int dim, int ld, float eps) {
    if (rows <= 0 || dim <= 0) return;
    u32((size_t)rows * ld, "rmsnorm");
    rms_pc pc = {A(y), A(rstd), A(x), A(res), (uint32_t)rows, (uint32_t)dim, eps, (uint32_t)ld};
    size_t n = (size_t)rows * ld;
    rd(b, x, n), wr(b, y, n), wr(b, rstd, (size_t)rows);
    if (res) rd(b, res, n);
    uint32_t v = dim % 4 == 0 && ld % 4 == 0 && al16(y, x, res);
    run_rows_vec(b, K_RMSNORM, 0, v, row_wg(dim), &pc, sizeof pc, (size_t)rows);
}

static void mps_rmsnorm_bwd(trm_backend *b, void *dx, const void *dy, const void *y, const float *rstd, int rows,
                            int dim, int ld) {
    if (rows <= 0 || dim <= 0) return;
    u32((size_t)rows * ld, "rmsnorm");
    rms_pc pc = {A(dx), A(rstd), A(dy), A(y), (uint32_t)rows, (uint32_t)dim, 0, (uint32_t)ld};
    size_t n = (size_t)rows * ld;
    rd(b, dy, n), rd(b, y, n), rd(b, rstd, (size_t)rows), wr(b, dx, n);
    uint32_t v = dim % 4 == 0 && ld % 4 == 0 && al16(dx, dy, y);
    run_rows_vec(b, K_RMSNORM, 1, v, row_wg(dim), &pc, sizeof pc, (size_t)rows);
}

typedef struct {
    uint64_t out, gu, dout;
    uint32_t rows, I;
    uint64_t act;
} swiglu_pc;

static void mps_swiglu_fwd(trm_backend *b, void *out, const void *gu, int rows, int I) {
    if (rows <= 0 || I <= 0) return;
    u32((size_t)rows * 2 * I, "swiglu");
    swiglu_pc pc = {A(out), A(gu), 0, (uint32_t)rows, (uint32_t)I, 0};
    uint32_t v = I % 4 == 0 && al16(out, gu, NULL);
    rd(b, gu, (size_t)rows * 2 * I), wr(b, out, (size_t)rows * I);
    run1d_vec(b, K_SWIGLU, 0, v, &pc, sizeof pc, (size_t)rows * I / (v ? 4 : 1));
}

static void mps_swiglu_bwd(trm_backend *b, void *dgu, void *act, const void *dout, const void *gu, int rows, int I) {
    if (rows <= 0 || I <= 0) return;
    u32((size_t)rows * 2 * I, "swiglu");
    swiglu_pc pc = {A(dgu), A(gu), A(dout), (uint32_t)rows, (uint32_t)I, A(act)};
    uint32_t v = I % 4 == 0 && al16(dgu, gu, dout) && al16(act, NULL, NULL);
    rd(b, gu, (size_t)rows * 2 * I), rd(b, dout, (size_t)rows * I), wr(b, dgu, (size_t)rows * 2 * I);
    if (act) wr(b, act, (size_t)rows * I);
    run1d_vec(b, K_SWIGLU, 1, v, &pc, sizeof pc, (size_t)rows * I / (v ? 4 : 1));
}

typedef struct {
    uint64_t qkv, cos, sin;
    uint32_t B, T, H, hd;
} rope_pc;

static void rope(trm_backend *b, float *qkv, const float *cs, const float *sn, int B, int T, int H, int hd, int bwd) {
    size_t n = (size_t)B * T * 2 * H * (hd / 2);
    if (!n) return;
    u32((size_t)B * T * 3 * H * hd, "rope");
    rope_pc pc = {A(qkv), A(cs), A(sn), (uint32_t)B, (uint32_t)T, (uint32_t)H, (uint32_t)hd};
    size_t all = (size_t)B * T * 3 * H * hd;
    uint32_t v = hd % 8 == 0 && al16(qkv, cs, sn);
    rd(b, qkv, all), wr(b, qkv, all), rd(b, cs, (size_t)T * hd), rd(b, sn, (size_t)T * hd);
    run1d_vec(b, K_ROPE, (uint32_t)bwd, v, &pc, sizeof pc, n / (v ? 4 : 1));
}
static void mps_rope_fwd(trm_backend *b, void *q, const float *c, const float *s, int B, int T, int H, int hd) {
    rope(b, q, c, s, B, T, H, hd, 0);
}
static void mps_rope_bwd(trm_backend *b, void *q, const float *c, const float *s, int B, int T, int H, int hd) {
    rope(b, q, c, s, B, T, H, hd, 1);
}

/* ---- attention: one head at a time, strided-batched over the batch (attention.comp) ------------ */

enum { AT_SOFTMAX_LSE, AT_EXP_LSE, AT_ROWDOT, AT_DS, AT_SOFTMAX_LSE_SHORT };
enum { ATT_SEG = 32, ATT_SHORT_WG = 256 }; /* the short-row softmax: a row's invocations, a group's */
typedef struct {
    uint64_t s, lse, p, o;
    uint32_t B, T, H, h, hd;
} att_pc;

static void att_kernel(trm_backend *b, int mode, float *s, const float *lse, const float *p, const float *o, int B,
                       int T, int H, int h, int hd) {
    att_pc pc = {A(s), A(lse), A(p), A(o), (uint32_t)B, (uint32_t)T, (uint32_t)H, (uint32_t)h, (uint32_t)hd};
    size_t scores = (size_t)B * T * T, stats = (size_t)B * H * T; /* one head's (B, T, T); (B, H, T) */
    if (mode == AT_SOFTMAX_LSE) {
        rd(b, s, scores), wr(b, s, scores), wr(b, lse, stats);
        if (T <= 4 * ATT_SEG) /* ATT_SEG invocations a row (attention.comp's SEG), 4 scores each */
            run_rows(b, K_ATT, AT_SOFTMAX_LSE_SHORT, ATT_SHORT_WG, &pc, sizeof pc,
                     ((size_t)B * T + ATT_SHORT_WG / ATT_SEG - 1) / (ATT_SHORT_WG / ATT_SEG));
        else
            run_rows(b, K_ATT, AT_SOFTMAX_LSE, T >= 512 ? 128 : 64, &pc, sizeof pc, (size_t)B * T);
    } else if (mode == AT_ROWDOT) { /* s: the rowsums; p, o: dO and O, (B, T, H, hd) */
        size_t n = (size_t)B * T * H * hd;
        rd(b, p, n), rd(b, o, n), wr(b, s, stats);
        run1d(b, K_ATT, AT_ROWDOT, &pc, sizeof pc, (size_t)B * T * H);
    } else { /* the scores (or dP) in place, against the lse (or rowsums); DS reads P too */
        rd(b, s, scores), wr(b, s, scores), rd(b, lse, stats), rd(b, p, scores);
        run1d(b, K_ATT, (uint32_t)mode, &pc, sizeof pc, scores);
    }
}

static const trm_gemm_dt F32x3 = {TRM_F32, TRM_F32, TRM_F32};

static void mps_attention_fwd(trm_backend *b, void *outv, float *lse, const void *qkvv, int B, int T, int H, int hd) {
    if (B <= 0 || T <= 0 || H <= 0 || hd <= 0) return;
    float *out = outv;
    const float *qkv = qkvv;
    int64_t TT = (int64_t)T * T;
    u32((size_t)B * TT, "attention scores");
    float *S = scratch(b, SCR_ATT_S, (size_t)B * TT * sizeof(float));
    int ld = 3 * H * hd, ldo = H * hd;
    int64_t sq = (int64_t)T * ld, so = (int64_t)T * ldo;
    float scale = 1.0f / sqrtf((float)hd);
    for (int h = 0; h < H; h++) {
        mps_gemm(b, F32x3, 0, 1, T, T, hd, scale, qkv + h * hd, ld, sq, qkv + (H + h) * hd, ld, sq, 0.0f, S, T, TT, B);
        att_kernel(b, AT_SOFTMAX_LSE, S, lse, NULL, NULL, B, T, H, h, hd);
        mps_gemm(b, F32x3, 0, 0, T, hd, T, 1.0f, S, T, TT, qkv + (2 * H + h) * hd, ld, sq, 0.0f, out + h * hd, ldo, so, B);
    }
}

static void mps_attention_bwd(trm_backend *b, void *dqkvv, const void *doutv, const void *qkvv, const void *outv,
                              const float *lse, int B, int T, int H, int hd) {
    if (B <= 0 || T <= 0 || H <= 0 || hd <= 0) return;
    float *dqkv = dqkvv;
    const float *dout = doutv, *qkv = qkvv, *out = outv;
    int64_t TT = (int64_t)T * T;
    u32((size_t)B * TT, "attention scores");
    float *P = scratch(b, SCR_ATT_S, (size_t)B * TT * sizeof(float));
    float *dP = scratch(b, SCR_ATT_DP, (size_t)B * TT * sizeof(float));
    float *dr = scratch(b, SCR_ATT_DR, (size_t)B * H * T * sizeof(float));
    int ld = 3 * H * hd, ldo = H * hd;
    int64_t sq = (int64_t)T * ld, so = (int64_t)T * ldo;
    float scale = 1.0f / sqrtf((float)hd);
    att_kernel(b, AT_ROWDOT, dr, NULL, dout, out, B, T, H, 0, hd);
    for (int h = 0; h < H; h++) {
        const float *Q = qkv + h * hd, *K = qkv + (H + h) * hd, *V = qkv + (2 * H + h) * hd, *dO = dout + h * hd;
        mps_gemm(b, F32x3, 0, 1, T, T, hd, scale, Q, ld, sq, K, ld, sq, 0.0f, P, T, TT, B);
        att_kernel(b, AT_EXP_LSE, P, lse, NULL, NULL, B, T, H, h, hd);
        /* dV = Pᵀ dO ; dP = dO Vᵀ ; dS = P∘(dP − rowsum) ; dQ = dS K·s ; dK = dSᵀ Q·s */
        mps_gemm(b, F32x3, 1, 0, T, hd, T, 1.0f, P, T, TT, dO, ldo, so, 0.0f, dqkv + (2 * H + h) * hd, ld, sq, B);
        mps_gemm(b, F32x3, 0, 1, T, T, hd, 1.0f, dO, ldo, so, V, ld, sq, 0.0f, dP, T, TT, B);
        att_kernel(b, AT_DS, dP, dr, P, NULL, B, T, H, h, hd);
        mps_gemm(b, F32x3, 0, 0, T, hd, T, scale, dP, T, TT, K, ld, sq, 0.0f, dqkv + h * hd, ld, sq, B);
        mps_gemm(b, F32x3, 1, 0, T, hd, T, scale, dP, T, TT, Q, ld, sq, 0.0f, dqkv + (H + h) * hd, ld, sq, B);
    }
}

/* ---- embeddings (embed.comp) ------------------------------------------------------------------- */

enum { EM_FWD, EM_TOK_PARTIAL, EM_TOK_REDUCE, EM_POS_BWD, EM_PUZ_BWD };
#define TOK_CHUNK 256
typedef struct {
    uint64_t out, dout, tokens, tok_w, pids, puz_w, pos_w;
    uint32_t B, S, P, D, ndim, V, chunk_rows, chunks;
    float scale;
    uint32_t has_pos;
} embed_pc;

static embed_pc embed_args(const trm_embed_args *a) {
    embed_pc pc = {0, 0, A(a->tokens), A(a->tok_w), A(a->puzzle_ids), A(a->puz_w), A(a->pos_w),
                   (uint32_t)a->B, (uint32_t)a->S, (uint32_t)a->P, (uint32_t)a->D, (uint32_t)(a->ndim > 0 ? a->ndim : 0),
                   (uint32_t)a->V, TOK_CHUNK, 0, a->scale, a->pos_w != NULL};
    u32((size_t)a->B * (a->P + a->S) * a->D, "embedding");
    return pc;
}

static void mps_embed_fwd(trm_backend *b, void *out, const trm_embed_args *a) {
    embed_pc pc = embed_args(a);
    pc.out = A(out);
    size_t T = (size_t)(a->P + a->S), D = (size_t)a->D;
    wr(b, out, (size_t)a->B * T * D), rd(b, a->tokens, (size_t)a->B * a->S), rd(b, a->tok_w, (size_t)a->V * D);
    rd(b, a->pos_w, T * D);
    if (a->ndim > 0 && a->puzzle_ids && a->puz_w)
        rd(b, a->puzzle_ids, (size_t)a->B), rd_bytes(b, a->puz_w, bytes_to_end(b, a->puz_w));
    run1d(b, K_EMBED, EM_FWD, &pc, sizeof pc, (size_t)a->B * T * D);
}

static void mps_embed_bwd(trm_backend *b, const void *dout, const trm_embed_args *a, float *d_tok_w,
                          float *d_pos_w, float *d_puz_rows) {
    embed_pc pc = embed_args(a);
    pc.dout = A(dout);
    size_t rows = (size_t)a->B * a->S, D = (size_t)a->D, TD = (size_t)(a->P + a->S) * D, vd = (size_t)a->V * D;
    if (d_tok_w && rows > 0 && a->V > 0) {
        size_t chunks = (rows + TOK_CHUNK - 1) / TOK_CHUNK;
        u32(chunks * vd, "the token-embedding gradient's partial sums");
        float *work = scratch(b, SCR_EMBED, chunks * vd * sizeof(float));
        pc.chunks = u32(chunks, "embedding gradient");
        pc.out = A(work);
        rd(b, a->tokens, rows), rd(b, dout, (size_t)a->B * TD), wr(b, work, chunks * vd);
        run1d(b, K_EMBED, EM_TOK_PARTIAL, &pc, sizeof pc, chunks * D);
        embed_pc r = pc;
        r.out = A(d_tok_w);
        r.dout = A(work);
        rd(b, work, chunks * vd), rd(b, d_tok_w, vd), wr(b, d_tok_w, vd);
        run1d(b, K_EMBED, EM_TOK_REDUCE, &r, sizeof r, vd);
    }
    if (a->pos_w && d_pos_w) {
        pc.out = A(d_pos_w);
        rd(b, dout, (size_t)a->B * TD), rd(b, d_pos_w, TD), wr(b, d_pos_w, TD);
        run1d(b, K_EMBED, EM_POS_BWD, &pc, sizeof pc, TD);
    }
    if (a->ndim > 0 && d_puz_rows) {
        pc.out = A(d_puz_rows);
        rd(b, dout, (size_t)a->B * TD), wr(b, d_puz_rows, (size_t)a->B * a->ndim);
        run1d(b, K_EMBED, EM_PUZ_BWD, &pc, sizeof pc, (size_t)a->B * a->ndim);
    }
}

/* ---- loss head (loss.comp) --------------------------------------------------------------------- */

typedef struct {
    uint64_t logits, labels, q, q_target, halted, steps, dlogits, dq, preds, stats;
    uint32_t B, S, V, P, loss_type;
    float grad_scale;
} loss_pc;

/* The kernel leaves each sample's eight metric contributions in a device buffer; the host adds
 * them up in double, in sample order (deterministic), onto the metrics in device memory. */
static void mps_loss_head(trm_backend *b, const trm_loss_args *a) {
    if (a->B <= 0 || a->S <= 0 || a->V <= 0 || a->P < 0) return;
    mps_ctx *c = CTX(b);
    u32((size_t)a->B * (a->P + a->S) * a->V, "loss head");
    size_t nstats = (size_t)a->B * TRM_NMETRICS;
    float *stats = scratch(b, SCR_LOSS, nstats * sizeof(float));
    loss_pc pc = {A(a->logits), A(a->labels), A(a->q), A(a->q_target), A(a->halted), A(a->steps), A(a->dlogits),
                  A(a->dq), A(a->preds), A(stats), (uint32_t)a->B, (uint32_t)a->S, (uint32_t)a->V, (uint32_t)a->P,
                  (uint32_t)a->loss_type, a->grad_scale};
    size_t logits = (size_t)a->B * (a->P + a->S) * a->V, tokens = (size_t)a->B * a->S, B = (size_t)a->B;
    rd(b, a->logits, logits), rd(b, a->labels, tokens), rd(b, a->q, 2 * B), rd(b, a->q_target, B);
    rd_bytes(b, a->halted, B), rd(b, a->steps, B);
    wr(b, a->dlogits, logits), wr(b, a->dq, 2 * B), wr(b, a->preds, tokens), wr(b, stats, nstats);
    run_rows(b, K_LOSS, 0, 128, &pc, sizeof pc, B);
    if (c->stats_cap < nstats) {
        free(c->stats_host);
        c->stats_host = xmalloc(nstats * sizeof(float));
        c->stats_cap = nstats;
    }
    double m[TRM_NMETRICS];
    void *dst[2] = {c->stats_host, m};
    const void *src[2] = {stats, a->metrics};
    size_t bytes[2] = {nstats * sizeof(float), sizeof m};
    vk_download_many(&c->vk, 2, dst, src, bytes);
    for (int k = 0; k < TRM_NMETRICS; k++) {
        double s = 0.0;
        for (int i = 0; i < a->B; i++) s += c->stats_host[(size_t)i * TRM_NMETRICS + k];
        m[k] += s;
    }
    vk_upload(&c->vk, a->metrics, m, sizeof m);
}

/* ---- ACT (act.comp) ----------------------------------------------------------------------------- */

enum { ACT_RESET_Z, ACT_RESET_ROWS, ACT_UPDATE, ACT_Q_TARGET };
typedef struct {
    uint64_t p[8];
    uint32_t B, T, D, S, training, no_act_continue;
    float explore_prob;
    uint32_t pad;
    uint64_t seed, sample0;
} act_pc;

static void mps_act_reset(trm_backend *b, int B, int T, int D, int S, const uint8_t *halted, void *zH, void *zL,
                          const float *H_init, const float *L_init, int32_t *steps, int32_t *ci, int32_t *cl,
                          int32_t *cp, const int32_t *ni, const int32_t *nl, const int32_t *np) {
    if (B <= 0) return;
    size_t n = (size_t)B * T * D;
    if ((zH || zL) && n) {
        act_pc pc = {.p = {A(zH), A(zL), A(H_init), A(L_init), A(halted)}, .B = (uint32_t)B, .T = (uint32_t)T,
                     .D = (uint32_t)D};
        rd_bytes(b, halted, (size_t)B), rd(b, H_init, (size_t)D), rd(b, L_init, (size_t)D), wr(b, zH, n), wr(b, zL, n);
        run1d(b, K_ACT, ACT_RESET_Z, &pc, sizeof pc, u32(n, "carry"));
    }
    act_pc pc = {.p = {A(halted), A(steps), A(ci), A(cl), A(cp), A(ni), A(nl), A(np)}, .B = (uint32_t)B,
                 .S = (uint32_t)(S > 0 ? S : 0)};
    size_t rows = (size_t)B, tokens = (size_t)B * (S > 0 ? S : 0);
    rd_bytes(b, halted, rows), rd(b, ni, tokens), rd(b, nl, tokens), rd(b, np, rows);
    wr(b, steps, rows), wr(b, ci, tokens), wr(b, cl, tokens), wr(b, cp, rows);
    run1d(b, K_ACT, ACT_RESET_ROWS, &pc, sizeof pc, u32((size_t)B * (S > 0 ? S : 1), "carry"));
}

static void mps_act_update(trm_backend *b, int B, int32_t *steps, uint8_t *halted, const float *q, int hmax,
                           int training, int nac, float ep, uint64_t seed, uint64_t sample0, const uint64_t *rng_step) {
    if (B <= 0) return;
    act_pc pc = {{A(steps), A(halted), A(q), A(rng_step)}, (uint32_t)B, 0, 0, (uint32_t)hmax, (uint32_t)!!training,
                 (uint32_t)!!nac, ep, 0, seed, sample0};
    rd(b, steps, (size_t)B), wr(b, steps, (size_t)B), wr_bytes(b, halted, (size_t)B), rd(b, q, 2 * (size_t)B);
    rd_bytes(b, rng_step, sizeof *rng_step);
    run1d(b, K_ACT, ACT_UPDATE, &pc, sizeof pc, (size_t)B);
}

static void mps_q_target(trm_backend *b, int B, float *t, const float *qn, const int32_t *steps, int hmax) {
    if (B <= 0) return;
    act_pc pc = {.p = {A(t), A(qn), A(steps)}, .B = (uint32_t)B, .S = (uint32_t)hmax};
    wr(b, t, (size_t)B), rd(b, qn, 2 * (size_t)B), rd(b, steps, (size_t)B);
    run1d(b, K_ACT, ACT_Q_TARGET, &pc, sizeof pc, (size_t)B);
}

/* ---- optimisers (optim.comp) ------------------------------------------------------------------- */

enum { OPT_ADAM, OPT_SIGN_SGD, OPT_EMA };
typedef struct {
    uint64_t p, g, m, v;
    uint32_t n, ndim;
    float lr, decay, w1, w2, bc1, bc2s;
} optim_pc;

static void mps_adam_atan2(trm_backend *b, float *p, const float *g, float *m, float *v, size_t n, float lr,
                           float wd, float beta1, float beta2, int64_t t) {
    if (!n) return;
    optim_pc pc = {A(p), A(g), A(m), A(v), u32(n, "adam"), 0, lr, (float)(1.0 - (double)lr * wd), 1.0f - beta1,
                   1.0f - beta2, (float)(1.0 - pow((double)beta1, (double)t)),
                   (float)sqrt(1.0 - pow((double)beta2, (double)t))};
    rd(b, g, n), rd(b, p, n), rd(b, m, n), rd(b, v, n), wr(b, p, n), wr(b, m, n), wr(b, v, n);
    run1d(b, K_OPTIM, OPT_ADAM, &pc, sizeof pc, n);
}

static void mps_sign_sgd_sparse(trm_backend *b, float *w, int ndim, const int32_t *ids, const float *g, int n,
                                float lr, float wd) {
    if (n <= 0 || ndim <= 0) return;
    optim_pc pc = {.p = A(w), .g = A(g), .m = A(ids), .n = (uint32_t)n, .ndim = (uint32_t)ndim, .lr = lr,
                   .decay = (float)(1.0 - (double)lr * wd)};
    size_t table = bytes_to_end(b, w); /* the rows of the ids, wherever they lie in it */
    rd(b, ids, (size_t)n), rd(b, g, (size_t)n * ndim), rd_bytes(b, w, table), wr_bytes(b, w, table);
    run_rows(b, K_OPTIM, OPT_SIGN_SGD, 128, &pc, sizeof pc, (size_t)n);
}

static void mps_ema(trm_backend *b, float *shadow, const float *p, size_t n, float rate) {
    if (!n) return;
    optim_pc pc = {.p = A(shadow), .g = A(p), .n = u32(n, "ema"), .w1 = (float)(1.0 - (double)rate), .w2 = rate};
    rd(b, p, n), rd(b, shadow, n), wr(b, shadow, n);
    run1d(b, K_OPTIM, OPT_EMA, &pc, sizeof pc, n);
}

/* ---- probe, creation, destruction --------------------------------------------------------------- */

static const char *type_name(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU device";
    default: return "other device";
    }
}

/* Lists the Vulkan devices into desc; returns how many there are if any is usable, else 0.
 * *gpus gets the number of usable devices that are not CPU devices. */
static int probe(char *desc, size_t len, int *gpus) {
    vk_ctx c;
    memset(&c, 0, sizeof c);
    trm_err e;
    *gpus = 0;
    if (desc && len) desc[0] = 0;
    if (vk_load(&c.f, &e) || vk_instance_create(&c, &e)) {
        if (desc && len) snprintf(desc, len, "%s", e.msg);
        vk_ctx_destroy(&c);
        return 0;
    }
    vk_device_info *d = NULL;
    int n = vk_list_devices(&c, &d, &e), usable = 0;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        usable += d[i].usable;
        *gpus += d[i].usable && d[i].props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU;
        if (!desc || off >= len) continue;
        off += (size_t)snprintf(desc + off, len - off, "%smps:%d %s (%s, Vulkan %u.%u, %.1f GiB%s%s)", i ? "; " : "", i,
                                d[i].props.deviceName, type_name(d[i].props.deviceType),
                                VK_VERSION_MAJOR(d[i].props.apiVersion), VK_VERSION_MINOR(d[i].props.apiVersion),
                                d[i].mem_gib, d[i].usable ? "" : "; unusable: ", d[i].usable ? "" : d[i].why);
    }
    if (n == 0 && desc && len) snprintf(desc, len, "no Vulkan device found (is a Vulkan driver installed?)");
    if (n < 0 && desc && len) snprintf(desc, len, "%s", e.msg);
    free(d);
    vk_ctx_destroy(&c);
    return usable > 0 ? n : 0;
}

int trm_mps_probe(char *desc, size_t desc_len) {
    int gpus;
    return probe(desc, desc_len, &gpus);
}

/* device=auto takes mps only for a GPU: lavapipe-class CPU devices are far slower than cpu. */
int trm_mps_probe_auto(char *desc, size_t desc_len) {
    int gpus;
    probe(desc, desc_len, &gpus);
    return gpus;
}

static void mps_destroy(trm_backend *b) {
    mps_ctx *c = CTX(b);
    vk_ctx_destroy(&c->vk);
    free(c->stats_host);
    free(c);
    free(b);
}

trm_backend *trm_mps_backend_create(int index, trm_err *e) {
    mps_ctx *c = xcalloc(1, sizeof *c);
    if (vk_load(&c->vk.f, e) || vk_instance_create(&c->vk, e) || vk_device_open(&c->vk, index, e)) {
        char msg[sizeof e->msg], at[24] = "";
        snprintf(msg, sizeof msg, "%s", e->msg);
        if (index >= 0) snprintf(at, sizeof at, ":%d", index);
        trm_errf(e, "device=mps%s: %s", at, msg);
        vk_ctx_destroy(&c->vk);
        free(c);
        return NULL;
    }
    for (int k = 0; k < K_COUNT; k++)
        if ((c->kern[k] = vk_kernel_index(kernel_names[k])) < 0) {
            trm_errf(e, "device=mps: kernel %s is not in this binary (build error)", kernel_names[k]);
            vk_ctx_destroy(&c->vk);
            free(c);
            return NULL;
        }
    c->wide = gemm_wide_pick(&c->vk);
    trm_backend *b = xcalloc(1, sizeof *b);
    b->name = "mps";
    b->caps = (trm_caps)TRM_CAPS_MPS;
    b->caps.unified_memory = c->vk.unified;
    b->max_alloc = c->vk.max_alloc;
    b->ctx = c;
    /* fp32 only, no compile stage, no collectives, no fused passes: those stay NULL */
#define MPS_OP(op) b->op = mps_##op;
    TRM_OPS_REQUIRED(MPS_OP) TRM_OPS_MEM_INFO(MPS_OP) TRM_OPS_STREAM_STATS(MPS_OP)
#undef MPS_OP
    return b;
}
