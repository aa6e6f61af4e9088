/* backend_cpu.c — the host backend's table: the context and its scratch, memory, the GEMM
 * dispatch (gemm_cpu.c, or CBLAS: OpenBLAS or Accelerate), the probe and the MPI collectives.
 * The ops are in one file per family beside it (cpu.h lists them). */
#include <stdlib.h>
#include <string.h>

#ifdef TRM_ACCELERATE
#include <Accelerate/Accelerate.h>
#else
/* Keeps <complex.h> (and its macro I, a parameter name in cpu.h) out of OpenBLAS's headers. */
#define FORCE_OPENBLAS_COMPLEX_STRUCT 1
#include <cblas.h>
#endif
#ifdef I
#undef I
#endif

#include "cpu.h"
#include "gemm_cpu.h"

float *cpu_scratch(trm_backend *be, size_t floats) {
    cpu_ctx *c = be->ctx;
    if (floats > c->scratch_floats) {
        free(c->scratch);
        c->scratch = xmalloc(floats * sizeof(float));
        c->scratch_floats = floats;
    }
    return c->scratch;
}

/* ---- memory -------------------------------------------------------------------------- */

static void *cpu_alloc(trm_backend *be, size_t bytes) {
    size_t n = bytes ? (bytes + 63) / 64 * 64 : 64;
    if (n < bytes) return NULL; /* overflow */
    void *p = NULL;
    if (posix_memalign(&p, 64, n) != 0) return NULL;
    memset(p, 0, n);
    return p;
}

static void cpu_free(trm_backend *be, void *p) {
    free(p);
}

/* Copies and zeroing of a megabyte and more (the recursion's carried states, a few MB a step)
 * in 256 KiB pieces across the threads: one thread's memmove ran at ~7 GB/s, 0.4 ms a copy
 * on the device host whatever the thread count. Overlapping buffers keep one memmove. */
#define COPY_PIECE ((size_t)256 << 10)
#define COPY_PAR_MIN ((size_t)1 << 20)

/* dst[0 .. bytes) = src's, or zeros where src is NULL, in pieces across the threads. */
static void by_pieces(char *dst, const char *src, size_t bytes) {
    long pieces = (long)((bytes + COPY_PIECE - 1) / COPY_PIECE);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < pieces; i++) {
        size_t o = (size_t)i * COPY_PIECE, n = bytes - o < COPY_PIECE ? bytes - o : COPY_PIECE;
        if (src)
            memcpy(dst + o, src + o, n);
        else
            memset(dst + o, 0, n);
    }
}

static void cpu_copy(trm_backend *be, void *dst, const void *src, size_t bytes) {
    if (!bytes || dst == src) return;
    const char *d = dst, *s = src;
    if (bytes < COPY_PAR_MIN || (d < s + bytes && s < d + bytes))
        memmove(dst, src, bytes);
    else
        by_pieces(dst, src, bytes);
}

/* host memory is the device's: transfers are copies */
static void cpu_to_device(trm_backend *be, void *dst, const void *src, size_t bytes) { cpu_copy(be, dst, src, bytes); }
static void cpu_to_host(trm_backend *be, void *dst, const void *src, size_t bytes) { cpu_copy(be, dst, src, bytes); }

static void cpu_zero(trm_backend *be, void *p, size_t bytes) {
    if (bytes >= COPY_PAR_MIN)
        by_pieces(p, NULL, bytes);
    else if (bytes)
        memset(p, 0, bytes);
}

static void cpu_sync(trm_backend *be) { (void)be; }

static void cpu_destroy(trm_backend *be) {
    if (!be) return;
    cpu_ctx *c = be->ctx;
    if (c) free(c->scratch);
    free(c);
    free(be);
}

/* ---- GEMM ---------------------------------------------------------------------------- */

static void scale_matrix(float *C, int M, int N, int ldc, float beta) {
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        for (int j = 0; j < N; j++) c[j] = beta == 0.0f ? 0.0f : beta * c[j];
    }
}

static int in_parallel(void) {
#ifdef _OPENMP
    return omp_in_parallel();
#else
    return 0;
#endif
}

/* trm's own GEMM (gemm_cpu.c) where it exists; TRM_CPU_GEMM=blas hands every product to the
 * BLAS instead (to compare them: bench/cpu.sh), TRM_CPU_GEMM=avx2 keeps to the AVX2 kernel. */
static int own_gemm(void) {
    const char *e = getenv("TRM_CPU_GEMM");
    return trm_gemm_cpu_available() && !(e && !strcmp(e, "blas"));
}

/* bf16: both operands rounded to bf16, fp32 sums (forward_dtype=bfloat16; the policy only sets
 * it where trm_gemm_cpu_bf16() says the CPU can). Attention's per-head products stay fp32:
 * they are small, and rounding their operands while packing cost more than the bf16 products
 * saved (device host: tiny_att 198 ms with them in bf16 against 156 in fp32). */
void cpu_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc, int bf16) {
    if (K <= 0 || alpha == 0.0f) {
        scale_matrix(C, M, N, ldc, beta);
        return;
    }
    if (own_gemm()) { /* one thread inside a parallel region, all of them outside */
        trm_gemm_cpu(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, in_parallel() ? 1 : max_threads(), bf16);
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

int cpu_own_gemm_threads(void) { return own_gemm() ? (in_parallel() ? 1 : max_threads()) : 0; }

static void cpu_gemm(trm_backend *be, trm_gemm_dt dt, int ta, int tb, int M, int N, int K, float alpha,
                     const void *Av, int lda, int64_t sA, const void *Bv, int ldb, int64_t sB,
                     float beta, void *Cv, int ldc, int64_t sC, int batch) {
    if (M <= 0 || N <= 0 || batch <= 0) return;
    if (dt.a != TRM_F32 || dt.b != TRM_F32 || dt.c != TRM_F32) {
        fprintf(stderr, "trm: cpu: a bf16 GEMM operand reached the cpu backend (internal error)\n");
        abort();
    }
    const float *A = Av, *B = Bv;
    float *C = Cv;
    /* Many small matrices: one whole GEMM per thread (BLAS then runs single-threaded inside
     * the parallel region). Only when the outputs do not overlap. */
    int disjoint = sC >= (int64_t)(M - 1) * ldc + N;
    double flops = 2.0 * M * N * (K > 0 ? K : 1);
    if (batch > 1 && disjoint && (batch >= max_threads() || flops < 4e6)) {
#pragma omp parallel for schedule(dynamic)
        for (int i = 0; i < batch; i++)
            cpu_sgemm(ta, tb, M, N, K, alpha, A + i * sA, lda, B + i * sB, ldb, beta, C + i * sC,
                      ldc, be->use_bf16);
        return;
    }
    /* Outside any parallel region, so BLAS threads each product itself. */
    for (int i = 0; i < batch; i++)
        cpu_sgemm(ta, tb, M, N, K, alpha, A + i * sA, lda, B + i * sB, ldb, beta, C + i * sC, ldc,
                  be->use_bf16);
}

/* ---- probe and creation --------------------------------------------------------------------- */

/* CPU model from /proc/cpuinfo (Linux); leaves out empty elsewhere. */
static void cpu_model_name(char *out, size_t len) {
    out[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *c = strchr(line, ':');
        if (!c) break;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        size_t n = strcspn(c, "\r\n");
        if (n >= len) n = len - 1;
        memcpy(out, c, n);
        out[n] = 0;
        break;
    }
    fclose(f);
}

/* Declared for the registry (backend_registry.c), which lists this backend. */
/* Host memory for the out-of-memory report: what is available now, of the machine's total. */
static void cpu_mem_info(trm_backend *be, size_t *free_b, size_t *total_b) {
    (void)be;
    if (free_b) *free_b = (size_t)trm_host_memory_available();
    if (total_b) *total_b = (size_t)trm_host_memory_bytes();
}

/* ---- collectives: MPI on host memory ------------------------------------------------------ */

#ifdef TRM_HAVE_MPI
static int cpu_comm_init(trm_backend *be, trm_dist *d, trm_err *e) {
    if (!d->mpi) return trm_errf(e, "cpu backend: the MPI world is not connected");
    ((cpu_ctx *)be->ctx)->dist = d;
    return 0;
}

static void fatal_collective(const trm_err *e) {
    fprintf(stderr, "trm: %s\n", e->msg);
    exit(1);
}

static void cpu_allreduce_sum(trm_backend *be, float *buf, size_t n) {
    trm_err e;
    if (trm_dist_mpi_allreduce_f32(((cpu_ctx *)be->ctx)->dist, buf, n, &e)) fatal_collective(&e);
}

static void cpu_allgather(trm_backend *be, const void *send, void *recv, size_t bytes) {
    trm_err e;
    if (trm_dist_mpi_allgather(((cpu_ctx *)be->ctx)->dist, send, recv, bytes, &e)) fatal_collective(&e);
}
#endif

void trm_cpu_caps_here(trm_caps *caps) { caps->bf16 = own_gemm() && trm_gemm_cpu_bf16(); }

int trm_cpu_probe(char *desc, size_t desc_len);
int trm_cpu_probe(char *desc, size_t desc_len) {
    if (desc && desc_len) {
        char model[256];
        cpu_model_name(model, sizeof model);
        int nt = max_threads();
        if (model[0])
            snprintf(desc, desc_len, "%s, %d thread%s", model, nt, nt == 1 ? "" : "s");
        else
            snprintf(desc, desc_len, "%d thread%s", nt, nt == 1 ? "" : "s");
    }
    return 1;
}

trm_backend *trm_cpu_backend_create(int index, trm_err *e) {
    if (index > 0) {
        trm_errf(e, "cpu backend: device index %d does not exist (the host is device 0)", index);
        return NULL;
    }
    trm_backend *be = xcalloc(1, sizeof *be);
    be->name = "cpu";
    be->caps = (trm_caps)TRM_CAPS_CPU;
    trm_cpu_caps_here(&be->caps);
    be->ctx = xcalloc(1, sizeof(cpu_ctx));
    /* the op table from backend.h's lists: the required ops, the fused passes (those with the
     * gate/up or down product decline where trm's own GEMM does not run), memory info, and the
     * collectives where MPI is built in; the bf16-activation and compile groups stay NULL */
#define CPU_OP(op) be->op = cpu_##op;
    TRM_OPS_REQUIRED(CPU_OP) TRM_OPS_FUSED(CPU_OP) TRM_OPS_MEM_INFO(CPU_OP)
#ifdef TRM_HAVE_MPI
    TRM_OPS_DISTRIBUTED(CPU_OP)
#endif
#undef CPU_OP
    return be;
}
