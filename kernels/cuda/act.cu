/* act.cu — ACT bookkeeping on the device: resetting halted rows of the carry, the halting
 * decision with exploration (trm/backend/act_rules.h, the code the cpu backend runs too, so both halt
 * the same samples) and the Q-continue target. The step counter is read from device memory
 * so that a captured step replays with the current value. */
#include "common.cuh"

extern "C" {
#include "backend/backend.h"
}

template <typename T>
__global__ void act_reset_z(T *zH, T *zL, const float *H_init, const float *L_init, const uint8_t *halted, int B,
                            int TD, int D) {
    size_t n = (size_t)B * TD;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        if (!halted[i / TD]) continue;
        int d = (int)(i % D);
        if (zH) zH[i] = from_f<T>(H_init[d]);
        if (zL) zL[i] = from_f<T>(L_init[d]);
    }
}

__global__ void act_reset_rows(const uint8_t *halted, int B, int S, int32_t *steps,
                               int32_t *cur_inputs, int32_t *cur_labels, int32_t *cur_pid,
                               const int32_t *new_inputs, const int32_t *new_labels,
                               const int32_t *new_pid) {
    size_t n = (size_t)B * S;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t b = i / S;
        if (!halted[b]) continue;
        if (cur_inputs && new_inputs) cur_inputs[i] = new_inputs[i];
        if (cur_labels && new_labels) cur_labels[i] = new_labels[i];
        if (i % S == 0) {
            steps[b] = 0;
            if (cur_pid && new_pid) cur_pid[b] = new_pid[b];
        }
    }
}

void k_act_reset(cudaStream_t st, int dt, int B, int Tn, int D, int S, const uint8_t *halted, void *zH,
                 void *zL, const float *H_init, const float *L_init, int32_t *steps,
                 int32_t *cur_inputs, int32_t *cur_labels, int32_t *cur_pid,
                 const int32_t *new_inputs, const int32_t *new_labels, const int32_t *new_pid) {
    if (B <= 0) return;
    size_t n = (size_t)B * Tn * D;
    if ((zH || zL) && n)
        ACT_DISPATCH(dt, act_reset_z<T><<<grid_for(n, 256), 256, 0, st>>>((T *)zH, (T *)zL, H_init, L_init, halted, B,
                                                                          Tn * D, D));
    size_t m = (size_t)B * (S > 0 ? S : 1);
    act_reset_rows<<<grid_for(m, 256), 256, 0, st>>>(halted, B, S > 0 ? S : 1, steps, cur_inputs,
                                                     cur_labels, cur_pid, new_inputs, new_labels,
                                                     new_pid);
}

__global__ void act_update_kernel(int B, int32_t *steps, uint8_t *halted, const float *q, int hmax,
                                  int training, int no_act_continue, float explore_prob,
                                  uint64_t seed, uint64_t sample0, const uint64_t *rng_step) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    int s = steps[b] + 1, need_q = training && hmax > 1;
    steps[b] = s;
    halted[b] = (uint8_t)trm_act_halts(s, hmax, training, no_act_continue, need_q ? q[b * 2] : 0.0f,
                                       need_q ? q[b * 2 + 1] : 0.0f, explore_prob, seed, *rng_step,
                                       sample0 + (uint64_t)b);
}

void k_act_update(cudaStream_t st, int B, int32_t *steps, uint8_t *halted, const float *q,
                  int halt_max_steps, int training, int no_act_continue, float explore_prob,
                  uint64_t seed, uint64_t sample0, const uint64_t *rng_step) {
    if (B > 0)
        act_update_kernel<<<(B + 255) / 256, 256, 0, st>>>(B, steps, halted, q, halt_max_steps,
                                                           training, no_act_continue, explore_prob,
                                                           seed, sample0, rng_step);
}

__global__ void q_target_kernel(int B, float *target, const float *q_next, const int32_t *steps,
                                int hmax) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    float qh = q_next[b * 2], qc = q_next[b * 2 + 1];
    float x = steps[b] >= hmax ? qh : (qc > qh || isnan(qc) ? qc : qh);
    target[b] = 1.0f / (1.0f + expf(-x));
}

void k_q_target(cudaStream_t st, int B, float *target, const float *q_next, const int32_t *steps,
                int halt_max_steps) {
    if (B > 0) q_target_kernel<<<(B + 255) / 256, 256, 0, st>>>(B, target, q_next, steps, halt_max_steps);
}
