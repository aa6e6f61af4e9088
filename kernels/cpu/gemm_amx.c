/* gemm_amx.c — the cpu backend's bf16 GEMM on Intel AMX tiles (Sapphire Rapids and later):
 * operands rounded to bf16 while packed (vector conversions, round to nearest even), fp32 sums
 * in the tile registers over the whole K, fp32 C. One AMX instruction (TDPBF16PS) multiplies a
 * 16×32 by a 32×16 bf16 block: 16 times the work of an AVX-512 VDPBF16PS, so the products of a
 * bf16 step stop being the step's bound where the CPU has AMX.
 *
 * Layout: both operands are packed once per call and shared by the threads: op(B) in panels of
 * 32 columns with k in pairs (AMX's "VNNI" layout: a tile row is 16 columns × one pair), op(A)
 * in strips of 32 rows, row by row (a tile row is 32 consecutive k; where all strips would not
 * fit PACK_CAP, each task packs its own). A task computes 32×32 blocks with four accumulator
 * tiles, two A tiles and two B tiles (all eight). K is padded with zeros to a multiple of 32.
 * Each output element is summed over k in one fixed order by one thread, so results do not
 * depend on the thread count; where op(B) would not fit PACK_CAP its K is cut into fixed
 * chunks, each added to C in order.
 *
 * TRM_CPU_GEMM=amx-emulate runs the same packing and blocking with the tile product done in C
 * (tests exercise the layout on machines without AMX); TRM_CPU_AMX=0 keeps AVX512-BF16. */
#include "gemm_cpu.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && !defined(TRM_NO_OWN_GEMM)
#include <immintrin.h>

#include "pack512.h"
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512bf16")))
#define KSTEP 32                    /* k per tile product */
#define PANEL 32                    /* columns of op(B) per packed panel: two B tiles */
#define STRIP 32                    /* rows of op(A) per packed strip: two A tiles */
#define PACK_CAP ((size_t)32 << 20) /* bytes of a packed operand per chunk of K */

typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
    int emulate;
} amx_job;

/* ---- availability ---- */

static void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
    __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}

/* AMX-TILE and AMX-BF16 in CPUID, the OS saving tile state (XCR0 bits 17, 18), and Linux's
 * permission for this process to use it (asked for each time: the call is idempotent). */
static int amx_here(void) {
    unsigned r[4];
    cpuid(0, 0, r);
    if (r[0] < 7) return 0;
    cpuid(7, 0, r);
    if (!(r[3] & (1u << 22)) || !(r[3] & (1u << 24))) return 0;
    cpuid(1, 0, r);
    if (!(r[2] & (1u << 27))) return 0; /* OSXSAVE: xgetbv is allowed */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return 0;
#ifdef __linux__
    /* ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA (Linux 5.16+) */
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return 0;
    return 1;
#else
    return 0;
#endif
}

static int bf16_vectors_here(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
}

/* 0: not used; 1: AMX tiles; 2: emulated tiles (tests) */
static int amx_mode(void) {
    const char *e = getenv("TRM_CPU_GEMM"), *off = getenv("TRM_CPU_AMX");
    if (e && !strcmp(e, "amx-emulate")) return bf16_vectors_here() ? 2 : 0;
    if ((e && *e) || (off && !strcmp(off, "0"))) return 0;
    return bf16_vectors_here() && amx_here() ? 1 : 0;
}

int trm_gemm_amx_available(void) { return amx_mode() != 0; }

/* ---- packing ---- */

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

/* n floats (n ≤ 32) of src as bf16 at dst, zeros up to 32. */
BF16_TARGET static inline void cvt32(uint16_t *dst, const float *src, int n) {
    _mm512_storeu_si512(dst, bf16_run32(src, n));
}

/* Strip of op(A): rows m0 .. m0+32 (zeros past M), k0 .. k0+klen (zeros up to kp), row-major
 * bf16 with rows kp apart. Rows along memory (ta = 0) convert straight; where op(A)'s rows are
 * A's columns (ta = 1, the weight gradients) 16 pairs of A's rows are read along memory, paired
 * and transposed 16 × 16 at a time. */
BF16_TARGET static void pack_a_strip(uint16_t *dst, const amx_job *j, int m0, int k0, int klen, int kp) {
    if (!j->ta) {
        for (int i = 0; i < STRIP; i++) {
            uint16_t *d = dst + (size_t)i * kp;
            if (m0 + i >= j->M) {
                memset(d, 0, (size_t)kp * sizeof *d);
                continue;
            }
            const float *src = j->A + (size_t)(m0 + i) * j->lda + k0;
            for (int k = 0; k < kp; k += KSTEP) cvt32(d + k, src + k, klen - k < 0 ? 0 : klen - k);
        }
        return;
    }
    for (int h = 0; h < STRIP; h += 16) {
        __mmask16 m = lanes(j->M - (m0 + h));
        for (int k = 0; k < kp; k += KSTEP) {
            __m512i r[16];
            for (int p = 0; p < 16; p++) {
                int ka = k + 2 * p;
                const float *a = j->A + (size_t)(k0 + ka) * j->lda + m0 + h;
                __m512 x0 = ka < klen ? _mm512_maskz_loadu_ps(m, a) : _mm512_setzero_ps();
                __m512 x1 = ka + 1 < klen ? _mm512_maskz_loadu_ps(m, a + j->lda) : _mm512_setzero_ps();
                r[p] = bf16_pairs16(x0, x1); /* pair p of 16 rows m */
            }
            transpose16(r); /* r[i]: row m0+h+i, pairs k/2 .. k/2+16 */
            for (int i = 0; i < 16; i++) _mm512_storeu_si512(dst + (size_t)(h + i) * kp + k, r[i]);
        }
    }
}

/* Panel q of op(B) for k0 .. k0+klen: rows of 32 uint32, row p holding the pair (2p, 2p+1) of
 * each column (zeros past N and klen). */
BF16_TARGET static void pack_b_panel(uint32_t *dst, const amx_job *j, int q, int k0, int klen, int kp) {
    int n0 = q * PANEL, cols = j->N - n0 < PANEL ? j->N - n0 : PANEL;
    if (j->tb) { /* op(B) columns are rows of B: a column's pairs are neighbours */
        uint16_t tmp[KSTEP];
        for (int c = 0; c < PANEL; c++)
            for (int k = 0; k < kp; k += KSTEP) {
                if (c < cols)
                    cvt32(tmp, j->B + (size_t)(n0 + c) * j->ldb + k0 + k, klen - k < 0 ? 0 : klen - k);
                else
                    memset(tmp, 0, sizeof tmp);
                for (int p = 0; p < KSTEP / 2; p++)
                    dst[(size_t)(k / 2 + p) * PANEL + c] = (uint32_t)tmp[2 * p] | (uint32_t)tmp[2 * p + 1] << 16;
            }
        return;
    }
    /* op(B) rows along memory: rows 2p and 2p+1 converted together and interleaved */
    for (int p = 0; p < kp / 2; p++) {
        int k = 2 * p;
        for (int h = 0; h < PANEL; h += 16) {
            __mmask16 m = lanes(cols - h);
            __m512 r0 = k < klen ? _mm512_maskz_loadu_ps(m, j->B + (size_t)(k0 + k) * j->ldb + n0 + h)
                                 : _mm512_setzero_ps();
            __m512 r1 = k + 1 < klen ? _mm512_maskz_loadu_ps(m, j->B + (size_t)(k0 + k + 1) * j->ldb + n0 + h)
                                     : _mm512_setzero_ps();
            _mm512_storeu_si512(dst + (size_t)p * PANEL + h, bf16_pairs16(r0, r1));
        }
    }
}

/* ---- the 32×32 block: acc (32 rows of 32 floats) = strip · panel over ksteps ---- */

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

AMX_TARGET static void tiles_configure(void) {
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    /* not _tile_loadconfig: GCC's names an 8-byte operand, so the stores filling the rest of cfg
     * may be dropped before it; this operand is the whole struct */
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
}

AMX_TARGET static void tiles_release(void) { _tile_release(); }

/* tiles 0-3: C, 4-5: the strip's two row halves, 6-7: the panel's two column halves. c: where
 * the accumulators start from and go to (rows ldc floats apart; zeros instead of reading it
 * when !load_c): C itself for whole blocks with alpha 1, else a 32×32 buffer. */
AMX_TARGET static void block_amx(float *c, size_t ldc, int load_c, const uint16_t *a, int kp, const uint32_t *b,
                                 int ksteps) {
    /* the tile loads take their memory as addresses in registers: every store of the packing
     * must be done before them */
    __asm__ volatile("" ::: "memory");
    size_t cs = ldc * sizeof(float), as = (size_t)kp * 2;
    if (load_c) {
        _tile_loadd(0, c, cs);
        _tile_loadd(1, c + 16, cs);
        _tile_loadd(2, c + 16 * ldc, cs);
        _tile_loadd(3, c + 16 * ldc + 16, cs);
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int s = 0; s < ksteps; s++) {
        const uint16_t *ak = a + (size_t)s * KSTEP;
        const uint32_t *bk = b + (size_t)s * (KSTEP / 2) * PANEL;
        _tile_loadd(4, ak, as);
        _tile_loadd(5, ak + (size_t)16 * kp, as);
        _tile_loadd(6, bk, PANEL * 4);
        _tile_loadd(7, bk + 16, PANEL * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c, cs);
    _tile_stored(1, c + 16, cs);
    _tile_stored(2, c + 16 * ldc, cs);
    _tile_stored(3, c + 16 * ldc + 16, cs);
}

static float bf16_value(uint32_t h) {
    uint32_t u = h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The same block in C (each pair's two products added to the sum, as TDPBF16PS does): the
 * packing, blocking and both ways of storing tested where there is no AMX. */
static void block_emulated(float *c, size_t ldc, int load_c, const uint16_t *a, int kp, const uint32_t *b,
                           int ksteps) {
    for (int i = 0; i < STRIP; i++)
        for (int n = 0; n < PANEL; n++) {
            float s = load_c ? c[i * ldc + n] : 0.0f;
            for (int p = 0; p < ksteps * KSTEP / 2; p++) {
                uint32_t w = b[(size_t)p * PANEL + n];
                s += bf16_value(a[(size_t)i * kp + 2 * p]) * bf16_value(w & 0xffff) +
                     bf16_value(a[(size_t)i * kp + 2 * p + 1]) * bf16_value(w >> 16);
            }
            c[i * ldc + n] = s;
        }
}

/* C rows m0.., columns n0.. (mr × nr valid) = first ? alpha·acc + beta·C : C + alpha·acc */
BF16_TARGET static void store_block(const amx_job *j, const float *acc, int m0, int n0, int mr, int nr, int first) {
    __m512 va = _mm512_set1_ps(j->alpha), vb = _mm512_set1_ps(j->beta);
    int read_old = !first || j->beta != 0.0f, scale_old = first && j->beta != 1.0f;
    for (int i = 0; i < mr; i++)
        for (int h = 0; h < 32 && h < nr; h += 16) {
            __mmask16 m = lanes(nr - h);
            float *p = j->C + (size_t)(m0 + i) * j->ldc + n0 + h;
            __m512 r = _mm512_mul_ps(va, _mm512_loadu_ps(acc + i * 32 + h));
            if (read_old) {
                __m512 old = _mm512_maskz_loadu_ps(m, p);
                r = scale_old ? _mm512_fmadd_ps(vb, old, r) : _mm512_add_ps(old, r);
            }
            _mm512_mask_storeu_ps(p, m, r);
        }
}

/* ---- the call ---- */

typedef struct {
    const amx_job *j;
    int kp_full, panels, strips, groups, per_group; /* panels of op(B) per task */
    int kchunk;
    uint32_t *bp;
    uint16_t *ap; /* every strip of op(A), packed once per chunk of K; NULL: each task packs its own */
} amx_plan;

/* Tasks: a 32-row strip × a group of panels, enough of them for every thread to have about
 * four. */
static void plan_tasks(amx_plan *pl, int threads) {
    pl->groups = 1;
    long want = threads > 1 ? 4L * threads : 1;
    while ((long)pl->strips * pl->groups < want && pl->groups < pl->panels) pl->groups++;
    pl->per_group = (pl->panels + pl->groups - 1) / pl->groups;
    pl->groups = (pl->panels + pl->per_group - 1) / pl->per_group;
}

/* One 32×32 block of C: straight into C where the block is whole and alpha is 1 (the model's
 * products: beta 0, or 1 to accumulate), else through acc and the general epilogue. */
static void run_block(const amx_job *j, const uint16_t *a, int kp, const uint32_t *b, int m0, int n0, int first,
                      float *acc) {
    int mr = j->M - m0 < STRIP ? j->M - m0 : STRIP, nr = j->N - n0 < PANEL ? j->N - n0 : PANEL;
    int load_c = !first || j->beta != 0.0f;
    if (mr == STRIP && nr == PANEL && j->alpha == 1.0f && (!first || j->beta == 0.0f || j->beta == 1.0f)) {
        float *c = j->C + (size_t)m0 * j->ldc + n0;
        if (j->emulate)
            block_emulated(c, (size_t)j->ldc, load_c, a, kp, b, kp / KSTEP);
        else
            block_amx(c, (size_t)j->ldc, load_c, a, kp, b, kp / KSTEP);
        return;
    }
    if (j->emulate)
        block_emulated(acc, 32, 0, a, kp, b, kp / KSTEP);
    else
        block_amx(acc, 32, 0, a, kp, b, kp / KSTEP);
    store_block(j, acc, m0, n0, mr, nr, first);
}

static void run_chunk(const amx_plan *pl, int k0, int klen, int first, uint16_t *own, float *acc) {
    const amx_job *j = pl->j;
    int kp = round_up(klen, KSTEP), tasks = pl->strips * pl->groups, shared = pl->ap != NULL;
    int packs = pl->panels + (shared ? pl->strips : 0), own_strip = -1;
#pragma omp for schedule(dynamic)
    for (int t = 0; t < packs; t++)
        if (t < pl->panels)
            pack_b_panel(pl->bp + (size_t)t * (kp / 2) * PANEL, j, t, k0, klen, kp);
        else
            pack_a_strip(pl->ap + (size_t)(t - pl->panels) * STRIP * kp, j, (t - pl->panels) * STRIP, k0, klen, kp);
    /* the barrier above: the packed operands are whole before any block reads them */
#pragma omp for schedule(dynamic)
    for (int t = 0; t < tasks; t++) {
        int s = t / pl->groups, g = t % pl->groups, m0 = s * STRIP;
        const uint16_t *a = own;
        if (shared)
            a = pl->ap + (size_t)s * STRIP * kp;
        else if (own_strip != s) /* a thread given the next group of its strip keeps it */
            pack_a_strip(own, j, m0, k0, klen, kp), own_strip = s;
        int q1 = (g + 1) * pl->per_group < pl->panels ? (g + 1) * pl->per_group : pl->panels;
        for (int q = g * pl->per_group; q < q1; q++)
            run_block(j, a, kp, pl->bp + (size_t)q * (kp / 2) * PANEL, m0, q * PANEL, first, acc);
    }
    /* the barrier above: the next chunk of K packs into the same buffers */
}

int trm_gemm_amx(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc, int threads) {
    int mode = amx_mode();
    if (!mode) return 0;
    amx_job j = {ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C, mode == 2};
    amx_plan pl = {&j, round_up(K, KSTEP), (N + PANEL - 1) / PANEL, (M + STRIP - 1) / STRIP, 1, 1, 0, NULL, NULL};
    size_t b_per_k = (size_t)pl.panels * PANEL * 2, a_per_k = (size_t)pl.strips * STRIP * 2; /* bytes */
    pl.kchunk = pl.kp_full;
    if ((size_t)pl.kchunk * b_per_k > PACK_CAP) pl.kchunk = (int)(PACK_CAP / b_per_k) / KSTEP * KSTEP;
    if (pl.kchunk < KSTEP) pl.kchunk = KSTEP;
    plan_tasks(&pl, threads);
    pl.bp = trm_gemm_buffer((size_t)pl.kchunk * b_per_k);
    if ((size_t)pl.kchunk * a_per_k <= PACK_CAP) pl.ap = trm_gemm_buffer((size_t)pl.kchunk * a_per_k);
    int tasks = pl.strips * pl.groups, nt = threads > tasks ? tasks : threads;
    if (nt < 1) nt = 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        uint16_t *own = pl.ap ? NULL : trm_gemm_buffer((size_t)STRIP * pl.kchunk * 2);
        float *acc = trm_gemm_buffer(32 * 32 * sizeof(float));
        if (!j.emulate) tiles_configure();
        for (int k0 = 0; k0 < K; k0 += pl.kchunk)
            run_chunk(&pl, k0, K - k0 < pl.kchunk ? K - k0 : pl.kchunk, k0 == 0, own, acc);
        if (!j.emulate) tiles_release();
        free(own), free(acc);
    }
    free(pl.bp), free(pl.ap);
    return 1;
}

#else

int trm_gemm_amx(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc, int threads) {
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb;
    (void)beta, (void)C, (void)ldc, (void)threads;
    return 0;
}
int trm_gemm_amx_available(void) { return 0; }

#endif
