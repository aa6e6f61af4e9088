/* act_rules.h — the per-sample ACT rule every backend must apply identically: the halting
 * decision with exploration, drawn from Philox (util/philox.h). Header-only and valid as C and
 * as CUDA, so kernels/cpu and kernels/cuda/act.cu compile the same code and halt the same
 * samples. */
#ifndef TRM_ACT_RULES_H
#define TRM_ACT_RULES_H
#include <stdint.h>

#include "util/util.h"

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
