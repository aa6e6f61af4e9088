/* cpu_env.c — the two libraries the cpu backend runs on read their settings from the
 * environment in their own constructors, before main(), so trm chooses them in the
 * environment and re-executes itself once (Linux; TRM_CPU_ENV marks the second start):
 *
 * - OpenBLAS picks its kernels from the CPU model. Debian's 0.3.21 does not know recent Intel
 *   models and falls back to the generic "Prescott" kernel, 2.4x slower than its AVX-512 one
 *   on the same machine (measured on a 16-core Xeon: 570 vs 232 ms per tiny_mlp step). When
 *   the user has not chosen a core (OPENBLAS_CORETYPE unset), the kernel is the generic one
 *   and the CPU has AVX2, trm names the right core from the CPU's features.
 * - OpenMP's threads spin at each barrier before they sleep (libgomp: 300000 turns by default).
 *   A step is hundreds of short parallel loops, so with another program on the cores a thread
 *   that spins for a descheduled partner burns the time its partner needs: on 2 cores with
 *   one busy process beside it, 2 threads took 1640 ms a step where 1 thread took 1183. When
 *   the user has set none of OMP_WAIT_POLICY, GOMP_SPINCOUNT (libgomp) or KMP_BLOCKTIME
 *   (LLVM's libomp), trm chooses by the number of threads it will run:
 *   - up to TRM_PASSIVE_THREADS (two cores), waiting threads sleep at once (passive): every
 *     core counts there, and a thread that spins takes one from its partner or from the
 *     user's other programs; the wake-ups cost nothing measurable at this size;
 *   - up to TRM_FEW_THREADS (a laptop's cores), the spin is short, TRM_SPINCOUNT_FEW turns
 *     (each a PAUSE: a waiting thread used 0.16 ms of CPU a gap between loops on the dev
 *     machine's EPYC, against 1.08 ms with 100000 turns and 0.05 with 1000): on the device
 *     host's Xeon pinned to 4 cores, passive waits cost 5-10% of a step against spinning (3
 *     alternating rounds, both configs), while on 2 cores with two busy programs beside trm
 *     10000 turns were as fast as passive waits;
 *   - above it, the spin is bounded to TRM_SPINCOUNT turns, a third of libgomp's: long enough
 *     to bridge the gap between two loops on an idle machine (on the device host's 16 threads,
 *     passive waits cost 12% of a tiny_mlp step and 10000 turns 5%; 100000 as fast as the
 *     default), short enough to give the core back within about a millisecond.
 *   The kernels hand out their loops' work dynamically (schedule(dynamic/guided)), so a thread
 *   that gets less of a core does less of the work.
 * Where the user binds OpenMP's threads (OMP_PROC_BIND other than false, OMP_PLACES or
 * GOMP_CPU_AFFINITY), trm leaves the environment alone and does not re-execute: libgomp binds
 * the initial thread to the first place as it starts, and a process started by exec inherits
 * that one CPU as the whole of its affinity, so every thread of the second start ran on it
 * (OMP_PROC_BIND=true: 2 threads as slow as 1 here, 16 threads 10x slower on the device host). */
#include "backend/backend.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Measured on 2 cores and on the device host's 16, tiny_mlp (bench/cpu.sh shapes): see
 * bench/README.md ("Threads beside other programs"). */
#define TRM_SPINCOUNT "100000"
#define TRM_SPINCOUNT_FEW "10000"
#define TRM_BLOCKTIME "0" /* ms; libomp's unit */
#define TRM_PASSIVE_THREADS 2
#define TRM_FEW_THREADS 4

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

/* 1 when OpenBLAS fell back to its generic kernel and a better one is named now. */
static int choose_blas_core(void) {
    if (getenv("OPENBLAS_CORETYPE")) return 0;
    const char *now = openblas_get_corename();
    if (!now || (strcasecmp(now, "prescott") != 0 && strcasecmp(now, "unknown") != 0)) return 0;
    const char *want = core_for_this_cpu();
    if (!want) return 0;
    setenv("OPENBLAS_CORETYPE", want, 1);
    return 1;
}
#else
static int choose_blas_core(void) { return 0; }
#endif

/* The threads OpenMP will start: OMP_NUM_THREADS's first level, else the CPUs this process
 * may run on (what libgomp and libomp default to). */
static int omp_threads_planned(void) {
    const char *s = getenv("OMP_NUM_THREADS");
    if (s && *s) {
        char *end;
        long n = strtol(s, &end, 10);
        if (end != s && n > 0) return n > 4096 ? 4096 : (int)n;
    }
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* 1 when the OpenMP wait policy was left to trm and is set now. */
static int choose_omp_wait(void) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") || getenv("KMP_BLOCKTIME")) return 0;
    int threads = omp_threads_planned();
    if (threads <= TRM_PASSIVE_THREADS) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
    } else {
        setenv("GOMP_SPINCOUNT", threads <= TRM_FEW_THREADS ? TRM_SPINCOUNT_FEW : TRM_SPINCOUNT, 1);
        setenv("KMP_BLOCKTIME", TRM_BLOCKTIME, 1);
    }
    return 1;
}

/* 1 when the user chose where OpenMP's threads run. */
static int user_binds_threads(void) {
    const char *b = getenv("OMP_PROC_BIND");
    return (b && *b && strcasecmp(b, "false") != 0) || getenv("OMP_PLACES") || getenv("GOMP_CPU_AFFINITY");
}

void trm_cpu_env(char **argv) {
#ifdef __linux__
    if (getenv("TRM_CPU_ENV") || user_binds_threads()) return;
    int blas = choose_blas_core(), omp = choose_omp_wait();
    if (!blas && !omp) return;
    setenv("TRM_CPU_ENV", "1", 1);
    execv("/proc/self/exe", argv); /* on failure, carry on with the libraries' own choices */
    unsetenv("TRM_CPU_ENV");
#else
    (void)argv; /* no re-execution without /proc: the libraries' defaults stay */
#endif
}
