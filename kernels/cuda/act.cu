/* act.cu — ACT bookkeeping on the device: resetting halted rows of the carry, the halting
 * decision with exploration (Philox4x32-10 keyed exactly as trm/rng.c, so cpu and cuda halt
 * the same samples) and the Q-continue target. The step counter is read from device memory
 * so that a captured step replays with the current value. */
#include "common.cuh"

__global__ void act_reset_z(float *zH, float *zL, const float *H_init, const float *L_init,
                            const uint8_t *halted, int B, int TD, int D) {
    size_t n = (size_t)B * TD;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        if (!halted[i / TD]) continue;
        int d = (int)(i % D);
        if (zH) zH[i] = H_init[d];
        if (zL) zL[i] = L_init[d];
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

void k_act_reset(cudaStream_t st, int B, int T, int D, int S, const uint8_t *halted, float *zH,
                 float *zL, const float *H_init, const float *L_init, int32_t *steps,
                 int32_t *cur_inputs, int32_t *cur_labels, int32_t *cur_pid,
                 const int32_t *new_inputs, const int32_t *new_labels, const int32_t *new_pid) {
    if (B <= 0) return;
    size_t n = (size_t)B * T * D;
    if ((zH || zL) && n)
        act_reset_z<<<grid_for(n, 256), 256, 0, st>>>(zH, zL, H_init, L_init, halted, B, T * D, D);
    size_t m = (size_t)B * (S > 0 ? S : 1);
    act_reset_rows<<<grid_for(m, 256), 256, 0, st>>>(halted, B, S > 0 ? S : 1, steps, cur_inputs,
                                                     cur_labels, cur_pid, new_inputs, new_labels,
                                                     new_pid);
}

__device__ void philox4x32(uint64_t key, uint64_t hi, uint64_t lo, uint32_t out[4]) {
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    uint32_t c0 = (uint32_t)lo, c1 = (uint32_t)(lo >> 32), c2 = (uint32_t)hi, c3 = (uint32_t)(hi >> 32);
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        uint32_t lo0 = 0xD2511F53u * c0, hi0 = __umulhi(0xD2511F53u, c0);
        uint32_t lo1 = 0xCD9E8D57u * c2, hi1 = __umulhi(0xCD9E8D57u, c2);
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

__global__ void act_update_kernel(int B, int32_t *steps, uint8_t *halted, const float *q, int hmax,
                                  int training, int no_act_continue, float explore_prob,
                                  uint64_t seed, const uint64_t *rng_step) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    int s = steps[b] + 1;
    steps[b] = s;
    int h = s >= hmax;
    if (training && hmax > 1) {
        float qh = q[b * 2], qc = q[b * 2 + 1];
        h |= no_act_continue ? qh > 0.0f : qh > qc;
        uint32_t r[4];
        philox4x32(seed, *rng_step, (uint64_t)b, r);
        float u = (float)(r[0] >> 8) * (1.0f / 16777216.0f);
        int min_halt = u < explore_prob ? 2 + (int)(r[1] % (uint32_t)(hmax - 1)) : 0;
        h &= s >= min_halt;
    }
    halted[b] = (uint8_t)h;
}

void k_act_update(cudaStream_t st, int B, int32_t *steps, uint8_t *halted, const float *q,
                  int halt_max_steps, int training, int no_act_continue, float explore_prob,
                  uint64_t seed, const uint64_t *rng_step) {
    if (B > 0)
        act_update_kernel<<<(B + 255) / 256, 256, 0, st>>>(B, steps, halted, q, halt_max_steps,
                                                           training, no_act_continue, explore_prob,
                                                           seed, rng_step);
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
