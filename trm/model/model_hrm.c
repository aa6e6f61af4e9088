/* model_hrm.c — the recursions with a separate H_level Net, each forward beside its backward,
 * as models/recursive_reasoning/hrm.py and transformers_baseline.py write them: HRM (L_level
 * and H_level, only the last update of each with gradient) and its ACT V2 ablation, the
 * transformer baseline (one H_level pass over z_H + x per ACT step). */
#include "model_internal.h"

/* ---- HRM: for each of H_cycles cycles, z_L ← L_net(z_L, z_H + x) L_cycles times, then
 * z_H ← H_net(z_H, z_L); the gradient flows through the very last z_L and z_H updates ---- */

static int hrm_saved(const trm_model_config *c) {
    (void)c;
    return 2;
}

static void hrm_calls(const trm_model_config *c, int level, int *nograd, int *grad) {
    int calls = level == TRM_LEVEL_L ? c->H_cycles * c->L_cycles : c->H_cycles;
    *nograd = calls - 1;
    *grad = 1;
}

static void hrm_forward(trm_model *m, const void *w, void *const *z, int grad) {
    enum { ZH, ZL };
    const void *cur[2] = {z[ZH], z[ZL]};
    void *hx = m->dx_emb;
    for (int h = 0; h < m->cfg.H_cycles; h++) {
        int last_h = h == m->cfg.H_cycles - 1;
        trm_state_add(m, hx, cur[ZH], m->x_emb);
        for (int l = 0; l < m->cfg.L_cycles; l++) {
            int save = grad && last_h && l == m->cfg.L_cycles - 1;
            /* z_L before the last read by the next call alone: no copy */
            trm_state_set(m, z, cur, ZL, trm_net_fwd(m, w, TRM_LEVEL_L, &cur[ZL], 1, hx, trm_saved_call(m, save, 0)),
                          save || l < m->cfg.L_cycles - 1);
        }
        int save = grad && last_h;
        trm_state_set(m, z, cur, ZH, trm_net_fwd(m, w, TRM_LEVEL_H, &cur[ZH], 1, cur[ZL], trm_saved_call(m, save, 1)), save);
    }
    trm_state_flush(m, z, cur);
}

/* dz: through H_net to its input, which is d(z_L last) as the old z_H has no gradient; then
 * through L_net to z_L + z_H + x, whose x part is the embedding's. */
static void hrm_backward(trm_model *m) {
    trm_net_bwd(m, TRM_LEVEL_H, &m->saved[1], m->dz);
    trm_net_bwd(m, TRM_LEVEL_L, &m->saved[0], m->dz);
    trm_state_acc(m, m->dx_emb, m->dz);
}

const trm_arch_ops trm_ops_hrm = {hrm_saved, hrm_calls, hrm_forward, hrm_backward, 0};

/* ---- transformers_baseline (Model_ACTV2): z_H ← H_net(z_H, x) once per ACT step; H_cycles
 * is kept for compatibility and unused, as in the reference ---- */

static int baseline_saved(const trm_model_config *c) {
    (void)c;
    return 1;
}

static void baseline_calls(const trm_model_config *c, int level, int *nograd, int *grad) {
    (void)c;
    *nograd = 0;
    *grad = level == TRM_LEVEL_H;
}

static void baseline_forward(trm_model *m, const void *w, void *const *z, int grad) {
    const void *cur[1] = {z[0]};
    trm_state_set(m, z, cur, 0, trm_net_fwd(m, w, TRM_LEVEL_H, cur, 1, m->x_emb, trm_saved_call(m, grad, 0)), grad);
    trm_state_flush(m, z, cur);
}

static void baseline_backward(trm_model *m) {
    trm_net_bwd(m, TRM_LEVEL_H, &m->saved[0], m->dz);
    trm_state_acc(m, m->dx_emb, m->dz);
}

const trm_arch_ops trm_ops_transformers_baseline = {baseline_saved, baseline_calls, baseline_forward, baseline_backward, 0};
