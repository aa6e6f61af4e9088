/* act.c — ACT bookkeeping: resetting the carry of halted samples, the halting decision
 * (trm_act_halts of backend/act_rules.h, which every backend runs, so all halt the same
 * samples) and the Q-continue target. */
#include <math.h>
#include <string.h>

#include "cpu.h"

static void fill_rows(float *z, const float *v, int T, int D) {
    for (int t = 0; t < T; t++) memcpy(z + (size_t)t * D, v, (size_t)D * sizeof(float));
}

void cpu_act_reset(trm_backend *be, int B, int T, int D, int S, const uint8_t *halted,
                   void *zHv, void *zLv, const float *H_init, const float *L_init,
                   int32_t *steps, int32_t *cur_inputs, int32_t *cur_labels,
                   int32_t *cur_pid, const int32_t *new_inputs, const int32_t *new_labels,
                   const int32_t *new_pid) {
    float *zH = zHv, *zL = zLv;
    size_t TD = (size_t)T * D;
    for (int b = 0; b < B; b++) {
        if (!halted[b]) continue;
        if (zH) fill_rows(zH + b * TD, H_init, T, D);
        if (zL) fill_rows(zL + b * TD, L_init, T, D);
        steps[b] = 0;
        size_t so = (size_t)b * S, sb = (size_t)S * sizeof(int32_t);
        if (cur_inputs && new_inputs) memcpy(cur_inputs + so, new_inputs + so, sb);
        if (cur_labels && new_labels) memcpy(cur_labels + so, new_labels + so, sb);
        if (cur_pid && new_pid) cur_pid[b] = new_pid[b];
    }
}

void cpu_act_update(trm_backend *be, int B, int32_t *steps, uint8_t *halted,
                    const float *q, int halt_max_steps, int training,
                    int no_act_continue, float explore_prob, uint64_t seed,
                    uint64_t sample0, const uint64_t *rng_step) {
    int need_q = training && halt_max_steps > 1; /* q may be NULL otherwise */
    for (int b = 0; b < B; b++) {
        steps[b] += 1;
        halted[b] = (uint8_t)trm_act_halts(steps[b], halt_max_steps, training, no_act_continue,
                                           need_q ? q[b * 2] : 0.0f, need_q ? q[b * 2 + 1] : 0.0f,
                                           explore_prob, seed, *rng_step, sample0 + (uint64_t)b);
    }
}

/* sigmoid(last ? q_halt' : max(q_halt', q_continue')) in float32, as torch.sigmoid does. */
void cpu_q_target(trm_backend *be, int B, float *target, const float *q_next,
                  const int32_t *steps, int halt_max_steps) {
    for (int b = 0; b < B; b++) {
        float qh = q_next[b * 2], qc = q_next[b * 2 + 1];
        float x = steps[b] >= halt_max_steps ? qh : (qc > qh || isnan(qc) ? qc : qh);
        target[b] = 1.0f / (1.0f + expf(-x));
    }
}
