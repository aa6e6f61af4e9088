/* philox.h — the Philox4x32-10 block (Random123), header-only and valid as C and as CUDA, so
 * rng.c, the cpu backend and kernels/cuda draw the same numbers from the same counters. */
#ifndef TRM_UTIL_PHILOX_H
#define TRM_UTIL_PHILOX_H
#include <stdint.h>

#ifdef __CUDACC__
#define TRM_HD __host__ __device__
#else
#define TRM_HD
#endif

/* out = Philox4x32-10(key; counter = (hi << 64) | lo). */
TRM_HD static inline void trm_philox_block(uint64_t key, uint64_t hi, uint64_t lo, uint32_t out[4]) {
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    uint32_t c0 = (uint32_t)lo, c1 = (uint32_t)(lo >> 32), c2 = (uint32_t)hi, c3 = (uint32_t)(hi >> 32);
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c0 = n0;
        c1 = (uint32_t)p1;
        c2 = n2;
        c3 = (uint32_t)p0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

#endif
