/* test_gradcheck.c — finite-difference checks of the model's backward for every parameter
 * tensor and the puzzle-embedding rows, on tiny configs covering both block kinds, all
 * three position modes, both losses, heads that span less than hidden_size, and every
 * architecture. H_cycles = 1 (HRM: and L_cycles = 1) so that no no-grad call hides part of the
 * dependence on the weights (the reference truncates the gradient there by design); HRM runs
 * with halt_max_steps = 1, where no q target (itself a no-grad function of the weights) exists. */
#include <check.h>

#include "check_main.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "model/model.h"
#include "util/rng.h"

typedef struct {
    int mlp_t, pos, loss, ndim, plen;
    int arch, heads; /* 0: TRM, 2 heads */
} variant;

static trm_model_config tiny_config(const variant *v) {
    trm_model_config c = {0};
    c.batch_size = 3;
    c.seq_len = 6;
    c.vocab_size = 5;
    c.num_puzzle_identifiers = 4;
    c.arch = v->arch;
    c.H_cycles = 1;
    c.L_cycles = v->arch == TRM_ARCH_HRM ? 1 : 2;
    c.L_layers = 2;
    c.H_layers = 2;
    c.hidden_size = 16;
    c.num_heads = v->heads ? v->heads : 2;
    c.expansion = 2;
    c.puzzle_emb_ndim = v->ndim;
    c.puzzle_emb_len = v->plen;
    c.pos_encodings = v->pos;
    c.mlp_t = v->mlp_t;
    c.halt_max_steps = v->arch == TRM_ARCH_HRM ? 1 : 4;
    c.halt_exploration_prob = 0;
    c.no_ACT_continue = 1;
    c.loss_type = v->loss;
    c.rms_norm_eps = 1e-5;
    c.rope_theta = 10000;
    return c;
}

static double loss_of(trm_model *m) {
    trm_model_reset_carry(m);
    memset(m->metrics, 0, TRM_NMETRICS * sizeof(double));
    trm_step_opts o = {.training = 1, .want_grad = 1, .grad_scale = 1.0f / (float)m->B};
    trm_model_act_step(m, &o);
    return (m->metrics[TRM_M_LM_LOSS] + 0.5 * m->metrics[TRM_M_Q_HALT_LOSS]) / m->B;
}

/* Directional derivative along a random direction u: (L(w+εu) − L(w−εu)) / 2ε vs ⟨g, u⟩. */
static void check_tensor(trm_model *m, float *w, const float *g, size_t n, const char *name, uint64_t stream) {
    float *u = xmalloc(n * sizeof(float)), *w0 = xmalloc(n * sizeof(float));
    trm_rng r;
    trm_rng_init(&r, 99, stream);
    double analytic = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        u[i] = (float)trm_rng_normal(&r);
        analytic += (double)g[i] * u[i];
        scale += fabs((double)g[i] * u[i]);
    }
    memcpy(w0, w, n * sizeof(float));
    const double eps = 1e-3;
    for (size_t i = 0; i < n; i++) w[i] = (float)(w0[i] + eps * u[i]);
    double lp = loss_of(m);
    for (size_t i = 0; i < n; i++) w[i] = (float)(w0[i] - eps * u[i]);
    double lm = loss_of(m);
    memcpy(w, w0, n * sizeof(float));
    double numeric = (lp - lm) / (2 * eps);
    double err = fabs(numeric - analytic) / (fabs(analytic) + 1e-2 * scale + 1e-6);
    ck_assert_msg(err < 2e-2, "%s: analytic %.6g numeric %.6g (rel err %.3g)", name, analytic, numeric, err);
    free(u);
    free(w0);
}

static void run_variant(const variant *v) {
    trm_err e;
    trm_backend *be = trm_cpu_backend_create(-1, &e);
    ck_assert_msg(be != NULL, "%s", e.msg);
    trm_model_config c = tiny_config(v);
    trm_model m;
    ck_assert_msg(trm_model_create(&m, &c, be, 5, 0, &e) == 0, "%s", e.msg);
    /* make the zero-initialised heads and puzzle rows non-trivial */
    trm_rng r;
    trm_rng_init(&r, 3, 3);
    const trm_param *qw = trm_model_find_param(&m, "inner.q_head.weight");
    for (size_t i = 0; i < qw->numel; i++) m.w[qw->offset + i] = 0.3f * (float)trm_rng_normal(&r);
    if (c.puzzle_emb_ndim)
        for (int i = 0; i < c.num_puzzle_identifiers * c.puzzle_emb_ndim; i++) m.puz_w[i] = (float)trm_rng_normal(&r);
    int32_t in[18], lab[18], pid[3] = {1, 3, 1};
    for (int i = 0; i < 18; i++) {
        in[i] = (int32_t)trm_rng_below(&r, 5);
        lab[i] = i % 7 == 3 ? -100 : (int32_t)trm_rng_below(&r, 5);
    }
    trm_model_set_batch(&m, in, lab, pid);
    loss_of(&m);
    float *g = xmalloc(m.n_flat * sizeof(float));
    memcpy(g, m.g, m.n_flat * sizeof(float));
    float *gp = NULL;
    if (c.puzzle_emb_ndim) {
        gp = xmalloc((size_t)m.B * c.puzzle_emb_ndim * sizeof(float));
        memcpy(gp, m.d_puz_rows, (size_t)m.B * c.puzzle_emb_ndim * sizeof(float));
    }
    for (int i = 0; i < m.nparams; i++) {
        const trm_param *p = &m.params[i];
        check_tensor(&m, m.w + p->offset, g + p->offset, p->numel, p->name, (uint64_t)i);
    }
    if (gp) {
        /* rows 0 and 2 share id 1: the table row's gradient is the sum of theirs */
        size_t nd = (size_t)c.puzzle_emb_ndim;
        float *grow = xcalloc(nd, sizeof(float));
        for (size_t k = 0; k < nd; k++) grow[k] = gp[k] + gp[2 * nd + k];
        check_tensor(&m, m.puz_w + nd * 1, grow, nd, "puzzle row 1", 77);
        check_tensor(&m, m.puz_w + nd * 3, gp + nd, nd, "puzzle row 3", 78);
        free(grow);
    }
    free(g);
    free(gp);
    trm_model_destroy(&m);
    be->destroy(be);
}

START_TEST(grad_attention_rope) { variant v = {0, TRM_POS_ROPE, TRM_LOSS_STABLEMAX, 16, 1, 0, 0}; run_variant(&v); }
END_TEST
START_TEST(grad_attention_learned) { variant v = {0, TRM_POS_LEARNED, TRM_LOSS_STABLEMAX, 10, 2, 0, 0}; run_variant(&v); }
END_TEST
START_TEST(grad_attention_none_softmax) { variant v = {0, TRM_POS_NONE, TRM_LOSS_SOFTMAX, 16, 0, 0, 0}; run_variant(&v); }
END_TEST
START_TEST(grad_mlp_t) { variant v = {1, TRM_POS_NONE, TRM_LOSS_STABLEMAX, 16, 2, 0, 0}; run_variant(&v); }
END_TEST
START_TEST(grad_mlp_t_learned_noemb) { variant v = {1, TRM_POS_LEARNED, TRM_LOSS_STABLEMAX, 0, 0, 0, 0}; run_variant(&v); }
END_TEST
/* 3 heads of 16 // 3 = 5: the attention is 15 wide, o_proj 16×15 */
START_TEST(grad_attention_partial_heads) { variant v = {0, TRM_POS_LEARNED, TRM_LOSS_STABLEMAX, 16, 1, 0, 3}; run_variant(&v); }
END_TEST
START_TEST(grad_hrm_rope) { variant v = {0, TRM_POS_ROPE, TRM_LOSS_STABLEMAX, 16, 0, TRM_ARCH_HRM, 0}; run_variant(&v); }
END_TEST
START_TEST(grad_hrm_mlp_t) { variant v = {1, TRM_POS_NONE, TRM_LOSS_STABLEMAX, 20, 0, TRM_ARCH_HRM, 0}; run_variant(&v); }
END_TEST
START_TEST(grad_trm_singlez) { variant v = {0, TRM_POS_ROPE, TRM_LOSS_STABLEMAX, 16, 2, TRM_ARCH_TRM_SINGLEZ, 0}; run_variant(&v); }
END_TEST
START_TEST(grad_trm_singlez_mlp_t) { variant v = {1, TRM_POS_LEARNED, TRM_LOSS_SOFTMAX, 16, 1, TRM_ARCH_TRM_SINGLEZ, 0}; run_variant(&v); }
END_TEST
START_TEST(grad_trm_hier6) { variant v = {0, TRM_POS_ROPE, TRM_LOSS_STABLEMAX, 16, 1, TRM_ARCH_TRM_HIER6, 0}; run_variant(&v); }
END_TEST
START_TEST(grad_trm_hier6_mlp_t) { variant v = {1, TRM_POS_NONE, TRM_LOSS_STABLEMAX, 16, 1, TRM_ARCH_TRM_HIER6, 0}; run_variant(&v); }
END_TEST
START_TEST(grad_transformers_baseline) { variant v = {0, TRM_POS_LEARNED, TRM_LOSS_STABLEMAX, 24, 0, TRM_ARCH_TRANSFORMERS_BASELINE, 3}; run_variant(&v); }
END_TEST

/* no_ACT_continue=false (the reference crashes here): target_q_continue must be
 * sigmoid(last ? q_halt' : max(q_halt', q_continue')) of one extra inner step on the new
 * carry, and q_continue_loss the BCE of q_continue against it. q' is recomputed here by an
 * evaluation step from a copy of the new carry. */
START_TEST(q_continue_target) {
    variant v = {0, TRM_POS_ROPE, TRM_LOSS_STABLEMAX, 16, 1, 0, 0};
    trm_err e;
    trm_backend *be = trm_cpu_backend_create(-1, &e);
    trm_model_config c = tiny_config(&v);
    c.no_ACT_continue = 0;
    c.H_cycles = 2;
    c.halt_max_steps = 2;
    trm_model m;
    ck_assert_msg(trm_model_create(&m, &c, be, 9, 0, &e) == 0, "%s", e.msg);
    trm_rng r;
    trm_rng_init(&r, 4, 4);
    const trm_param *qw = trm_model_find_param(&m, "inner.q_head.weight");
    for (size_t i = 0; i < qw->numel; i++) m.w[qw->offset + i] = 0.5f * (float)trm_rng_normal(&r);
    int32_t in[18], lab[18], pid[3] = {0, 1, 2};
    for (int i = 0; i < 18; i++) in[i] = (int32_t)trm_rng_below(&r, 5), lab[i] = (int32_t)trm_rng_below(&r, 5);
    trm_model_set_batch(&m, in, lab, pid);
    trm_model_reset_carry(&m);
    size_t zb = (size_t)m.B * m.T * m.D * sizeof(float);
    float *zh = xmalloc(zb), *zl = xmalloc(zb);
    int last_seen = 0, mid_seen = 0;
    for (int step = 1; step <= 3; step++) {
        memset(m.metrics, 0, TRM_NMETRICS * sizeof(double));
        trm_step_opts o = {.training = 1, .want_grad = 1, .grad_scale = 1.0f / 3, .rng_step = (uint64_t)step};
        trm_model_act_step(&m, &o);
        float qc[3], target[3];
        int32_t steps[3];
        uint8_t halted[3];
        for (int b = 0; b < 3; b++) qc[b] = m.q[2 * b + 1], target[b] = m.q_target[b], steps[b] = m.steps[b], halted[b] = m.halted[b];
        double loss = 0;
        for (int b = 0; b < 3; b++) {
            double x = qc[b], t = target[b];
            loss += fmax(x, 0) - x * t + log1p(exp(-fabs(x)));
        }
        ck_assert_msg(fabs(loss - m.metrics[TRM_M_Q_CONTINUE_LOSS]) < 1e-5, "q_continue_loss %.9g vs %.9g", m.metrics[TRM_M_Q_CONTINUE_LOSS], loss);
        /* q' from the new carry, without disturbing it */
        memcpy(zh, m.z[0], zb);
        memcpy(zl, m.z[1], zb);
        memset(m.halted, 0, 3);
        trm_step_opts ev = {.training = 0, .want_grad = 0, .grad_scale = 1.0f / 3};
        double keep[TRM_NMETRICS];
        memcpy(keep, m.metrics, sizeof keep);
        trm_model_act_step(&m, &ev);
        for (int b = 0; b < 3; b++) {
            double qh = m.q[2 * b], qn = m.q[2 * b + 1];
            int last = steps[b] >= c.halt_max_steps;
            double want = 1.0 / (1.0 + exp(-(last ? qh : fmax(qh, qn))));
            ck_assert_msg(fabs(want - target[b]) < 1e-5, "step %d row %d: target %.7g, expected %.7g", step, b, target[b], want);
            last_seen |= last;
            mid_seen |= !last;
        }
        memcpy(m.z[0], zh, zb);
        memcpy(m.z[1], zl, zb);
        memcpy(m.steps, steps, sizeof steps);
        memcpy(m.halted, halted, 3);
    }
    ck_assert_msg(last_seen && mid_seen, "both branches of the target must be exercised");
    free(zh);
    free(zl);
    trm_model_destroy(&m);
    be->destroy(be);
}
END_TEST

int main(void) {
    Suite *s = suite_create("gradcheck");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, grad_attention_rope);
    tcase_add_test(tc, grad_attention_learned);
    tcase_add_test(tc, grad_attention_none_softmax);
    tcase_add_test(tc, grad_mlp_t);
    tcase_add_test(tc, grad_mlp_t_learned_noemb);
    tcase_add_test(tc, grad_attention_partial_heads);
    tcase_add_test(tc, grad_hrm_rope);
    tcase_add_test(tc, grad_hrm_mlp_t);
    tcase_add_test(tc, grad_trm_singlez);
    tcase_add_test(tc, grad_trm_singlez_mlp_t);
    tcase_add_test(tc, grad_trm_hier6);
    tcase_add_test(tc, grad_trm_hier6_mlp_t);
    tcase_add_test(tc, grad_transformers_baseline);
    tcase_add_test(tc, q_continue_target);
    suite_add_tcase(s, tc);
    return trm_run_suite(s);
}
