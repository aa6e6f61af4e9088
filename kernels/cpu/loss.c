/* loss.c — the loss head: per token argmax, stablemax (double, as the reference) or softmax
 * cross entropy with its gradient written into dlogits; per sample the Q-halt and Q-continue
 * BCE, dq and the metrics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

static int argmax_row(const float *x, int V) {
    int best = 0;
    for (int j = 1; j < V; j++)
        if (x[j] > x[best] || (isnan(x[j]) && !isnan(x[best]))) best = j;
    return best;
}

/* Stablemax CE of one row in double; writes gs·dCE/dx into dx when dx != NULL. */
static double stablemax_row(const float *x, int V, int label, float *dx, double gs) {
    double sum = 0.0;
    for (int j = 0; j < V; j++) {
        double v = x[j];
        sum += v < 0 ? 1.0 / (1.0 - v + 1e-30) : v + 1.0;
    }
    double xl = x[label];
    double sl = xl < 0 ? 1.0 / (1.0 - xl + 1e-30) : xl + 1.0;
    if (dx) {
        for (int j = 0; j < V; j++) {
            double v = x[j], q = 1.0 - v + 1e-30;
            double ds = v < 0 ? 1.0 / (q * q) : 1.0;
            double g = ds / sum - (j == label ? ds / sl : 0.0);
            dx[j] = (float)(gs * g);
        }
    }
    return -log(sl / sum);
}

/* Ordinary softmax CE in float32 (PyTorch's log_softmax with max subtraction). */
static double softmax_row(const float *x, int V, int label, float *dx, double gs) {
    float mx = x[0];
    for (int j = 1; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    float sum = 0.0f;
    for (int j = 0; j < V; j++) sum += expf(x[j] - mx);
    float lse = logf(sum);
    if (dx)
        for (int j = 0; j < V; j++) {
            float p = expf(x[j] - mx) / sum;
            dx[j] = (float)(gs * ((double)p - (j == label ? 1.0 : 0.0)));
        }
    return -(double)((x[label] - mx) - lse);
}

static double bce_logits(double x, double t) {
    return (x > 0 ? x : 0.0) - x * t + log1p(exp(-fabs(x)));
}

static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

/* Labels other than IGNORE that fall outside [0, V) are treated as ignored: no crash. */
static inline int label_ok(int32_t l, int V) { return l >= 0 && l < V; }

/* Row r = b·S + s of the labels is row b·(P+S) + P + s of the logits. */
static inline size_t logit_row(const trm_loss_args *a, int r) {
    return ((size_t)(r / a->S) * (a->P + a->S) + a->P + r % a->S) * a->V;
}

static void loss_rows(const trm_loss_args *a, const int *n, double *ce, uint8_t *corr) {
    int V = a->V, rows = a->B * a->S;
#pragma omp parallel for schedule(guided) if ((size_t)rows * V >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *x = a->logits + logit_row(a, r);
        int32_t l = a->labels[r];
        int pred = argmax_row(x, V), m = label_ok(l, V);
        float *dx = a->dlogits ? a->dlogits + logit_row(a, r) : NULL;
        if (a->preds) a->preds[r] = pred;
        corr[r] = (uint8_t)(m && pred == l);
        ce[r] = 0.0;
        if (!m) {
            if (dx) memset(dx, 0, (size_t)V * sizeof(float));
            continue;
        }
        int div = n[r / a->S] > 1 ? n[r / a->S] : 1;
        double gs = (double)a->grad_scale / div;
        ce[r] = a->loss_type == TRM_LOSS_SOFTMAX ? softmax_row(x, V, l, dx, gs)
                                                : stablemax_row(x, V, l, dx, gs);
    }
}

static void loss_sample(const trm_loss_args *a, int b, int n, const double *ce,
                        const uint8_t *corr) {
    int div = n > 1 ? n : 1, ncorr = 0;
    double lm = 0.0;
    for (int s = 0; s < a->S; s++) {
        lm += ce[(size_t)b * a->S + s] / div;
        ncorr += corr[(size_t)b * a->S + s];
    }
    int seq_ok = ncorr == n;
    double qh = a->q[b * 2], qc = a->q[b * 2 + 1];
    double *m = a->metrics;
    int valid = a->halted[b] && n > 0;
    m[TRM_M_COUNT] += valid;
    m[TRM_M_ACCURACY] += valid ? (double)ncorr / div : 0.0;
    m[TRM_M_EXACT_ACCURACY] += valid && seq_ok;
    m[TRM_M_Q_HALT_ACCURACY] += valid && ((qh >= 0) == seq_ok);
    m[TRM_M_STEPS] += valid ? a->steps[b] : 0;
    m[TRM_M_LM_LOSS] += lm;
    m[TRM_M_Q_HALT_LOSS] += bce_logits(qh, seq_ok);
    if (a->q_target) m[TRM_M_Q_CONTINUE_LOSS] += bce_logits(qc, a->q_target[b]);
    if (a->dq) {
        a->dq[b * 2] = (float)(a->grad_scale * 0.5 * (sigmoid_d(qh) - seq_ok));
        a->dq[b * 2 + 1] =
            a->q_target ? (float)(a->grad_scale * 0.5 * (sigmoid_d(qc) - a->q_target[b])) : 0.0f;
    }
}

void cpu_loss_head(trm_backend *be, const trm_loss_args *a) {
    if (a->B <= 0 || a->S <= 0 || a->V <= 0 || a->P < 0) return;
    size_t rows = (size_t)a->B * a->S;
    if (a->dlogits && a->P > 0) /* the puzzle positions get no gradient */
        for (int b = 0; b < a->B; b++)
            memset(a->dlogits + (size_t)b * (a->P + a->S) * a->V, 0,
                   (size_t)a->P * a->V * sizeof(float));
    int *n = xcalloc((size_t)a->B, sizeof(int));
    double *ce = xmalloc(rows * sizeof(double));
    uint8_t *corr = xmalloc(rows);
    for (size_t r = 0; r < rows; r++) n[r / a->S] += label_ok(a->labels[r], a->V);
    loss_rows(a, n, ce, corr);
    for (int b = 0; b < a->B; b++) loss_sample(a, b, n[b], ce, corr);
    free(n);
    free(ce);
    free(corr);
}
