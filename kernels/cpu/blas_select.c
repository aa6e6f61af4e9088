/* blas_select.c — OpenBLAS picks its kernels from the CPU model in a library constructor,
 * before main(). Debian's 0.3.21 does not know recent Intel models and falls back to the
 * generic "Prescott" kernel, 2.4x slower than its AVX-512 one on the same machine (measured
 * on a 16-core Xeon: 570 vs 232 ms per tiny_mlp step). When the user has not chosen a core
 * (OPENBLAS_CORETYPE unset), the kernel is the generic one and the CPU has AVX2, trm names
 * the right core from the CPU's features and re-executes itself once so OpenBLAS sees it. */
#include "backend/backend.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#if !defined(TRM_ACCELERATE) && (defined(__x86_64__) || defined(__i386__)) && defined(__linux__)
#define FORCE_OPENBLAS_COMPLEX_STRUCT
#include <cblas.h>

static const char *core_for_this_cpu(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    return NULL;
}

void trm_blas_select(char **argv) {
    if (getenv("OPENBLAS_CORETYPE") || getenv("TRM_BLAS_SELECTED")) return;
    const char *now = openblas_get_corename();
    if (!now || (strcasecmp(now, "prescott") != 0 && strcasecmp(now, "unknown") != 0)) return;
    const char *want = core_for_this_cpu();
    if (!want) return;
    setenv("OPENBLAS_CORETYPE", want, 1);
    setenv("TRM_BLAS_SELECTED", want, 1);
    execv("/proc/self/exe", argv); /* on failure, carry on with the generic kernel */
    unsetenv("OPENBLAS_CORETYPE");
}
#else
void trm_blas_select(char **argv) { (void)argv; }
#endif
