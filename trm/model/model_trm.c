/* model_trm.c — the recursions of the TRM family, one L_level Net for every update: TRM
 * (z_H, z_L), trm_singlez (z_L alone) and trm_hier6 (z_H and six z_L), each forward beside
 * its backward, as the reference's models/recursive_reasoning/trm*.py write them. The first
 * H_cycles − 1 cycles run without gradient; the final one saves its Net calls. */
#include "model_internal.h"

static int saved_l_plus_one(const trm_model_config *c) { return c->L_cycles + 1; }

/* Every cycle makes L_cycles + 1 calls of the one L_level Net. */
static void calls_l_plus_one(const trm_model_config *c, int level, int *nograd, int *grad) {
    if (level != TRM_LEVEL_L) return;
    *nograd = (c->H_cycles - 1) * (c->L_cycles + 1);
    *grad = c->L_cycles + 1;
}

/* The backward of a chain of saved calls 0..L where call L's input is the output of call L−1
 * plus a state without gradient, and call l < L's is call l−1's output (or the carry) plus the
 * input embedding: dL/dx_emb collects every call l < L's input gradient. */
static void chain_backward(trm_model *m) {
    int L = m->cfg.L_cycles;
    trm_net_bwd(m, TRM_LEVEL_L, &m->saved[L], m->dz);
    for (int l = L - 1; l >= 0; l--) {
        trm_net_bwd(m, TRM_LEVEL_L, &m->saved[l], m->dz);
        trm_state_acc(m, m->dx_emb, m->dz);
    }
}

/* ---- TRM: z_L ← Net(z_L, z_H + x) L_cycles times, then z_H ← Net(z_H, z_L) ---- */

static void trm_forward(trm_model *m, const void *w, void *const *z, int grad) {
    enum { ZH, ZL };
    const void *cur[2] = {z[ZH], z[ZL]};
    void *hx = m->dx_emb;
    int L = m->cfg.L_cycles;
    for (int h = 0; h < m->cfg.H_cycles; h++) {
        int save = grad && h == m->cfg.H_cycles - 1;
        trm_state_add(m, hx, cur[ZH], m->x_emb);
        for (int l = 0; l < L; l++) /* z_L before the last read by the next call alone: no copy */
            trm_state_set(m, z, cur, ZL, trm_net_fwd(m, w, TRM_LEVEL_L, &cur[ZL], 1, hx, trm_saved_call(m, save, l)),
                          save || l < L - 1);
        trm_state_set(m, z, cur, ZH, trm_net_fwd(m, w, TRM_LEVEL_L, &cur[ZH], 1, cur[ZL], trm_saved_call(m, save, L)), save);
    }
    trm_state_flush(m, z, cur);
}

/* dz: d(z_H's Net input) is d(z_L final) since the old z_H has no gradient. */
const trm_arch_ops trm_ops_trm = {saved_l_plus_one, calls_l_plus_one, trm_forward, chain_backward, 0};

/* ---- trm_singlez: z_L ← Net(z_L + x) L_cycles times, then z_L ← Net(z_L) ---- */

static void singlez_forward(trm_model *m, const void *w, void *const *z, int grad) {
    const void *cur[1] = {z[0]};
    int L = m->cfg.L_cycles;
    for (int h = 0; h < m->cfg.H_cycles; h++) {
        int save = grad && h == m->cfg.H_cycles - 1;
        for (int l = 0; l < L; l++) /* each read by the next call alone: no copy */
            trm_state_set(m, z, cur, 0, trm_net_fwd(m, w, TRM_LEVEL_L, cur, 1, m->x_emb, trm_saved_call(m, save, l)), 1);
        trm_state_set(m, z, cur, 0, trm_net_fwd(m, w, TRM_LEVEL_L, cur, 1, NULL, trm_saved_call(m, save, L)), save);
    }
    trm_state_flush(m, z, cur);
}

const trm_arch_ops trm_ops_trm_singlez = {saved_l_plus_one, calls_l_plus_one, singlez_forward, chain_backward, 0};

/* ---- trm_hier6: with s = z_L1 + … + z_L6, z_L(l+1) ← Net(s, z_H + x) for l < L_cycles,
 * then z_H ← Net(z_H, s) ---- */

enum { HIER_L0 = 1, HIER_NL = TRM_MAX_STATES - 1 }; /* z[HIER_L0 + i] is z_L(i+1) */

static void hier6_forward(trm_model *m, const void *w, void *const *z, int grad) {
    const void *cur[TRM_MAX_STATES];
    for (int k = 0; k < TRM_MAX_STATES; k++) cur[k] = z[k];
    void *hx = m->dx_emb;
    int L = m->cfg.L_cycles;
    for (int h = 0; h < m->cfg.H_cycles; h++) {
        int save = grad && h == m->cfg.H_cycles - 1;
        trm_state_add(m, hx, cur[0], m->x_emb);
        for (int l = 0; l < L; l++) {
            const void *out = trm_net_fwd(m, w, TRM_LEVEL_L, &cur[HIER_L0], HIER_NL, hx, trm_saved_call(m, save, l));
            trm_state_set(m, z, cur, HIER_L0 + l, out, save);
        }
        /* Net(z_H, s) adds z_H to the finished sum s: the same float as s + z_H */
        trm_state_set(m, z, cur, 0, trm_net_fwd(m, w, TRM_LEVEL_L, &cur[HIER_L0], HIER_NL, cur[0], trm_saved_call(m, save, L)),
                      save);
    }
    trm_state_flush(m, z, cur);
}

/* Call l's output z_L(l+1) feeds every later call's sum and z_H's: its gradient is that of z_H's
 * input plus the input gradients of calls l+1..L−1, kept running in m->dacc. */
static void hier6_backward(trm_model *m) {
    int L = m->cfg.L_cycles;
    trm_net_bwd(m, TRM_LEVEL_L, &m->saved[L], m->dz);
    trm_state_copy(m, m->dacc, m->dz);
    for (int l = L - 1; l >= 0; l--) {
        if (l < L - 1) trm_state_copy(m, m->dz, m->dacc);
        trm_net_bwd(m, TRM_LEVEL_L, &m->saved[l], m->dz);
        trm_state_acc(m, m->dx_emb, m->dz);
        if (l > 0) trm_state_acc(m, m->dacc, m->dz);
    }
}

const trm_arch_ops trm_ops_trm_hier6 = {saved_l_plus_one, calls_l_plus_one, hier6_forward, hier6_backward, 1};
