/* act_rules.h — the per-sample ACT rules every backend must apply identically: the Philox4x32-10
 * block (Random123) and the halting decision with exploration. Header-only and valid as C and
 * as CUDA, so the cpu backend, trm/rng.c and kernels/cuda/act.cu compile the same code and halt
 * the same samples. */
#ifndef TRM_ACT_RULES_H
#define TRM_ACT_RULES_H
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

/* Sample b's halting flag after its step counter became `steps`: the step limit always halts;
 * in training (halt_max_steps > 1) q_halt > 0 (or > q_continue) halts too, unless exploration,
 * drawn from Philox(seed; rng_step, b), sets a minimum step count not yet reached. */
TRM_HD static inline int trm_act_halts(int steps, int halt_max_steps, int training, int no_act_continue,
                                       float q_halt, float q_continue, float explore_prob, uint64_t seed,
                                       uint64_t rng_step, uint64_t b) {
    int h = steps >= halt_max_steps;
    if (training && halt_max_steps > 1) {
        h |= no_act_continue ? q_halt > 0.0f : q_halt > q_continue;
        uint32_t r[4];
        trm_philox_block(seed, rng_step, b, r);
        float u = (float)(r[0] >> 8) * (1.0f / 16777216.0f);
        int min_halt = u < explore_prob ? 2 + (int)(r[1] % (uint32_t)(halt_max_steps - 1)) : 0;
        h &= steps >= min_halt;
    }
    return h;
}

#endif
