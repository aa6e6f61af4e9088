/* loss.cu — the loss head: per token argmax, stablemax (float64, as the reference) or softmax
 * cross entropy with its gradient written straight into dlogits; per sample the Q-halt and
 * Q-continue BCE, dq and the metrics. One block per sample, then one block sums the samples
 * in a fixed order into the double metrics (deterministic, no atomics). */
#include "common.cuh"

#define LOSS_THREADS 128

__device__ __forceinline__ bool label_ok(int32_t l, int V) { return l >= 0 && l < V; }

__device__ double bce_logits(double x, double t) {
    return (x > 0 ? x : 0.0) - x * t + log1p(exp(-fabs(x)));
}

/* Per sample: stats[b*8 + k] = this sample's contribution to metric k. */
__global__ void loss_sample_kernel(trm_loss_args a, double *stats) {
    __shared__ double sh[32];
    int b = blockIdx.x, S = a.S, V = a.V, P = a.P, Tt = P + S;
    const int32_t *lab = a.labels + (size_t)b * S;
    double cnt = 0.0;
    for (int s = threadIdx.x; s < S; s += blockDim.x) cnt += label_ok(lab[s], V);
    int n = (int)block_sum_d(cnt, sh);
    int div = n > 1 ? n : 1;
    double gs = (double)a.grad_scale / div;
    if (a.dlogits)
        for (int k = threadIdx.x; k < P * V; k += blockDim.x)
            a.dlogits[(size_t)b * Tt * V + k] = 0.f;
    double lm = 0.0, ncorr = 0.0;
    for (int s = threadIdx.x; s < S; s += blockDim.x) {
        size_t off = ((size_t)b * Tt + P + s) * V;
        const float *x = a.logits + off;
        float *dx = a.dlogits ? a.dlogits + off : nullptr;
        int best = 0;
        for (int j = 1; j < V; j++)
            if (x[j] > x[best] || (isnan(x[j]) && !isnan(x[best]))) best = j;
        if (a.preds) a.preds[(size_t)b * S + s] = best;
        int32_t l = lab[s];
        if (!label_ok(l, V)) {
            if (dx)
                for (int j = 0; j < V; j++) dx[j] = 0.f;
            continue;
        }
        ncorr += best == l;
        double ce;
        if (a.loss_type == TRM_LOSS_SOFTMAX) {
            float mx = x[0];
            for (int j = 1; j < V; j++) mx = x[j] > mx ? x[j] : mx;
            float sum = 0.f;
            for (int j = 0; j < V; j++) sum += expf(x[j] - mx);
            ce = -(double)((x[l] - mx) - logf(sum));
            if (dx)
                for (int j = 0; j < V; j++) {
                    float p = expf(x[j] - mx) / sum;
                    dx[j] = (float)(gs * ((double)p - (j == l ? 1.0 : 0.0)));
                }
        } else {
            double sum = 0.0;
            for (int j = 0; j < V; j++) {
                double v = x[j];
                sum += v < 0 ? 1.0 / (1.0 - v + 1e-30) : v + 1.0;
            }
            double xl = x[l], sl = xl < 0 ? 1.0 / (1.0 - xl + 1e-30) : xl + 1.0;
            ce = -log(sl / sum);
            if (dx)
                for (int j = 0; j < V; j++) {
                    double v = x[j], q = 1.0 - v + 1e-30;
                    double ds = v < 0 ? 1.0 / (q * q) : 1.0;
                    dx[j] = (float)(gs * (ds / sum - (j == l ? ds / sl : 0.0)));
                }
        }
        lm += ce / div;
    }
    lm = block_sum_d(lm, sh);
    int nc = (int)block_sum_d(ncorr, sh);
    if (threadIdx.x == 0) {
        int seq_ok = nc == n;
        double qh = a.q[b * 2], qc = a.q[b * 2 + 1];
        int valid = a.halted[b] && n > 0;
        double *m = stats + (size_t)b * TRM_NMETRICS;
        m[TRM_M_COUNT] = valid;
        m[TRM_M_ACCURACY] = valid ? (double)nc / div : 0.0;
        m[TRM_M_EXACT_ACCURACY] = valid && seq_ok;
        m[TRM_M_Q_HALT_ACCURACY] = valid && ((qh >= 0) == seq_ok);
        m[TRM_M_STEPS] = valid ? a.steps[b] : 0;
        m[TRM_M_LM_LOSS] = lm;
        m[TRM_M_Q_HALT_LOSS] = bce_logits(qh, seq_ok);
        m[TRM_M_Q_CONTINUE_LOSS] = a.q_target ? bce_logits(qc, a.q_target[b]) : 0.0;
        if (a.dq) {
            a.dq[b * 2] = (float)(a.grad_scale * 0.5 * (1.0 / (1.0 + exp(-qh)) - seq_ok));
            a.dq[b * 2 + 1] = a.q_target
                ? (float)(a.grad_scale * 0.5 * (1.0 / (1.0 + exp(-qc)) - a.q_target[b])) : 0.f;
        }
    }
}

__global__ void loss_reduce_kernel(double *metrics, const double *stats, int B) {
    __shared__ double sh[32];
    for (int k = 0; k < TRM_NMETRICS; k++) {
        double s = 0.0;
        for (int b = threadIdx.x; b < B; b += blockDim.x) s += stats[(size_t)b * TRM_NMETRICS + k];
        s = block_sum_d(s, sh);
        if (threadIdx.x == 0) metrics[k] += s;
    }
}

void k_loss_head(cudaStream_t st, const trm_loss_args *a, void *work) {
    if (a->B <= 0 || a->S <= 0 || a->V <= 0 || a->P < 0) return;
    double *stats = (double *)work;
    loss_sample_kernel<<<a->B, LOSS_THREADS, 0, st>>>(*a, stats);
    loss_reduce_kernel<<<1, 256, 0, st>>>(a->metrics, stats, a->B);
}
