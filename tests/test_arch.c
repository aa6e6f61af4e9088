/* test_arch.c — choosing the architecture: every configs/arch preset reads as the reference's
 * defaults, an unknown arch.name and a missing required key are one error naming the
 * architecture, settings an architecture cannot have are refused; checkpoints carry each
 * architecture's states under the reference's names, continue bit-exactly after a resume,
 * and refuse to load into another architecture (a checkpoint without a name is TRM's). */
#include <check.h>

#include "check_main.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/checkpoint.h"
#include "util/rng.h"
#include "train/run_config.h"
#include "io/safetensors.h"

static const cfg_search embedded = {.dirs = NULL, .ndirs = 0, .use_embedded = 1};

/* cfg_pretrain with the overrides (NULL-terminated) read into rc; 0 or -1 with e set. rc's
 * strings are borrowed from *tree, which the caller frees. */
static int read_cfg_tree(trm_run_config *rc, char **ov, cfg_node **tree, trm_err *e) {
    int n = 0;
    while (ov && ov[n]) n++;
    memset(rc, 0, sizeof *rc);
    *tree = cfg_compose(&embedded, "cfg_pretrain", n, ov, e);
    return *tree ? trm_run_config_read(rc, *tree, e) : -1;
}

/* The same for the numbers alone (rc's strings are gone); rc is freed on failure. */
static int read_cfg(trm_run_config *rc, char **ov, trm_err *e) {
    cfg_node *tree;
    int r = read_cfg_tree(rc, ov, &tree, e);
    if (r) trm_run_config_free(rc);
    cfg_free(tree);
    return r;
}

/* The error of reading cfg_pretrain with these overrides (which must fail). */
static const char *cfg_error(char **ov, trm_err *e) {
    trm_run_config rc;
    ck_assert_msg(read_cfg(&rc, ov, e) != 0, "%s: expected an error", ov[0]);
    return e->msg;
}

#define ASSERT_HAS(s, sub) ck_assert_msg(strstr((s), (sub)) != NULL, "'%s' not in: %s", (sub), (s))

START_TEST(presets_read_the_reference_defaults) {
    static const struct {
        const char *ov;
        int arch, H_cycles, L_cycles, H_layers, L_layers, heads, plen, no_act_continue;
    } want[] = {
        {"arch=trm", TRM_ARCH_TRM, 3, 6, 0, 2, 8, 16, 1},
        {"arch=hrm", TRM_ARCH_HRM, 2, 2, 4, 4, 8, 0, 0},
        {"arch=trm_singlez", TRM_ARCH_TRM_SINGLEZ, 3, 6, 0, 2, 8, 16, 1},
        {"arch=trm_hier6", TRM_ARCH_TRM_HIER6, 3, 6, 0, 2, 8, 16, 1},
        {"arch=transformers_baseline", TRM_ARCH_TRANSFORMERS_BASELINE, 1, 0, 8, 0, 12, 0, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char *ov[] = {(char *)want[i].ov, NULL};
        trm_run_config rc;
        trm_err e;
        cfg_node *tree;
        ck_assert_msg(read_cfg_tree(&rc, ov, &tree, &e) == 0, "%s: %s", want[i].ov, e.msg);
        const trm_model_config *a = &rc.arch;
        ck_assert_msg(a->arch == want[i].arch, "%s", want[i].ov);
        ck_assert_str_eq(rc.arch_name, trm_arch_get(want[i].arch)->name);
        ck_assert_int_eq(a->H_cycles, want[i].H_cycles);
        ck_assert_int_eq(a->L_cycles, want[i].L_cycles);
        ck_assert_int_eq(a->H_layers, want[i].H_layers);
        ck_assert_int_eq(a->L_layers, want[i].L_layers);
        ck_assert_int_eq(a->num_heads, want[i].heads);
        ck_assert_int_eq(a->puzzle_emb_len, want[i].plen);
        ck_assert_int_eq(a->no_ACT_continue, want[i].no_act_continue);
        ck_assert_int_eq(a->hidden_size, 512);
        ck_assert_int_eq(a->puzzle_emb_ndim, 512);
        ck_assert_int_eq(a->halt_max_steps, 16);
        ck_assert_int_eq(a->pos_encodings, TRM_POS_ROPE);
        ck_assert_int_eq(a->forward_bf16, 1); /* the baseline's yaml has no forward_dtype: pydantic's default */
        ck_assert_int_eq(a->mlp_t, 0);
        ck_assert_int_eq(trm_model_puzzle_len(a), want[i].plen ? 16 : 1); /* else ceil(512 / 512) */
        trm_run_config_free(&rc);
        cfg_free(tree);
    }
}
END_TEST

START_TEST(unknown_name_lists_the_known_ones) {
    trm_err e;
    char *ov[] = {"arch.name=recursive_reasoning.trm_hier7@TinyRecursiveReasoningModel_ACTV1", NULL};
    const char *msg = cfg_error(ov, &e);
    ASSERT_HAS(msg, "arch.name: unknown architecture 'recursive_reasoning.trm_hier7@TinyRecursiveReasoningModel_ACTV1'");
    for (int i = 0; i < TRM_NARCH; i++) ASSERT_HAS(msg, trm_arch_get(i)->name);
    char *ov2[] = {"arch.name=[1]", NULL};
    ASSERT_HAS(cfg_error(ov2, &e), "arch.name: expected a string");
}
END_TEST

START_TEST(missing_keys_name_the_architecture) {
    static const char *const cases[][3] = {
        {"arch=hrm", "~arch.L_cycles", "arch.L_cycles"},
        {"arch=hrm", "~arch.H_layers", "arch.H_layers"},
        {"arch=trm", "~arch.H_layers", "arch.H_layers"}, /* "ignored" by TRM, but its config class requires it */
        {"arch=transformers_baseline", "~arch.H_cycles", "arch.H_cycles"},
        {"arch=trm_hier6", "~arch.halt_exploration_prob", "arch.halt_exploration_prob"},
        {"arch=trm_singlez", "~arch.pos_encodings", "arch.pos_encodings"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        trm_err e;
        char *ov[] = {(char *)cases[i][0], (char *)cases[i][1], NULL};
        const char *msg = cfg_error(ov, &e);
        ASSERT_HAS(msg, cases[i][2]);
        ASSERT_HAS(msg, "missing config key");
        const char *preset = strchr(cases[i][0], '=') + 1;
        char *file = xasprintf("configs/arch/%s.yaml", preset);
        ASSERT_HAS(msg, file);
        free(file);
        int named = 0;
        for (int a = 0; a < TRM_NARCH; a++) named |= !strcmp(trm_arch_get(a)->preset, preset) && strstr(msg, trm_arch_get(a)->name);
        ck_assert_msg(named, "the message names no architecture: %s", msg);
    }
    /* what the config classes default: TRM without puzzle_emb_len, mlp_t, no_ACT_continue,
     * forward_dtype and puzzle_emb_ndim */
    char *ov[] = {"~arch.puzzle_emb_len", "~arch.mlp_t", "~arch.no_ACT_continue", "~arch.forward_dtype",
                  "~arch.puzzle_emb_ndim", NULL};
    trm_run_config rc;
    trm_err e;
    ck_assert_msg(read_cfg(&rc, ov, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(rc.arch.puzzle_emb_len, 16);
    ck_assert_int_eq(rc.arch.mlp_t, 0);
    ck_assert_int_eq(rc.arch.no_ACT_continue, 1);
    ck_assert_int_eq(rc.arch.forward_bf16, 1);
    ck_assert_int_eq(rc.arch.puzzle_emb_ndim, 0);
    trm_run_config_free(&rc);
}
END_TEST

START_TEST(settings_an_architecture_cannot_have) {
    static const char *const cases[][4] = {
        {"arch=transformers_baseline", "+arch.mlp_t=true", NULL, "always mixes tokens with attention"},
        {"arch=transformers_baseline", "arch.pos_encodings=none", NULL, "needs rope or learned positions"},
        {"arch=transformers_baseline", "+arch.act_inference=true", NULL, "arch.act_inference"},
        {"arch=hrm", "+arch.no_ACT_continue=true", NULL, "set arch.no_ACT_continue=false"},
        {"arch=hrm", "+arch.puzzle_emb_len=16", NULL, "ceil(puzzle_emb_ndim / hidden_size) = 1 puzzle positions"},
        {"arch=trm_hier6", "arch.L_cycles=7", NULL, "arch.L_cycles must be <= 6"},
        {"arch=hrm", "arch.L_layers=0", NULL, "arch.L_layers must be in 1..16"},
        {"arch=transformers_baseline", "arch.H_layers=17", NULL, "arch.H_layers must be in 1..16"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        trm_err e;
        char *ov[] = {(char *)cases[i][0], (char *)cases[i][1], NULL};
        ASSERT_HAS(cfg_error(ov, &e), cases[i][3]);
    }
    /* what the architecture would do anyway is accepted, as the reference ignores it */
    char *fine[][4] = {{"arch=hrm", "+arch.puzzle_emb_len=1", "+arch.no_ACT_continue=false", NULL},
                       {"arch=transformers_baseline", "+arch.mlp_t=false", "+arch.L_cycles=3", NULL},
                       {"arch=transformers_baseline", "+arch.act_enabled=false", NULL, NULL}};
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        trm_run_config rc;
        trm_err e;
        ck_assert_msg(read_cfg(&rc, fine[i], &e) == 0, "%s %s: %s", fine[i][0], fine[i][1], e.msg);
        ck_assert_int_eq(rc.arch.halt_fixed, i == 2);
        trm_run_config_free(&rc);
    }
}
END_TEST

/* ---- checkpoints ---- */

static const char *tmp_dir(void) {
    mkdir(TRM_TEST_TMP, 0755);
    return TRM_TEST_TMP;
}

static trm_model_config small_config(int arch) {
    trm_model_config c = {.arch = arch, .batch_size = 3, .seq_len = 5, .vocab_size = 6, .num_puzzle_identifiers = 4,
                          .H_cycles = 2, .L_cycles = 2, .H_layers = 1, .L_layers = 1, .hidden_size = 8,
                          .num_heads = 2, .expansion = 2, .puzzle_emb_ndim = 8, .puzzle_emb_len = 2,
                          .pos_encodings = TRM_POS_ROPE, .halt_max_steps = 3, .halt_exploration_prob = 0.5,
                          .no_ACT_continue = arch == TRM_ARCH_TRM_SINGLEZ ? 0 : 1, .rms_norm_eps = 1e-5,
                          .rope_theta = 1e4};
    return c;
}

/* One training step (ACT step, then both optimisers) on a batch drawn from (seed, step). */
static void train_step(trm_model *m, int64_t t) {
    trm_rng r;
    trm_rng_init(&r, 11, (uint64_t)t);
    int32_t in[15], lab[15], pid[3];
    for (int i = 0; i < 15; i++) in[i] = (int32_t)trm_rng_below(&r, 6), lab[i] = (int32_t)trm_rng_below(&r, 6);
    for (int b = 0; b < 3; b++) pid[b] = (int32_t)trm_rng_below(&r, 4);
    trm_model_set_batch(m, in, lab, pid);
    memset(m->metrics, 0, TRM_NMETRICS * sizeof(double));
    trm_step_opts so = {.training = 1, .want_grad = 1, .grad_scale = 1.0f / 3, .seed = 5, .rng_step = (uint64_t)t};
    trm_model_act_step(m, &so);
    trm_optim_opts oo = {.lr = 1e-2, .puzzle_emb_lr = 1e-2, .weight_decay = 0.1, .puzzle_emb_weight_decay = 0.1,
                         .beta1 = 0.9, .beta2 = 0.95, .t = t};
    trm_model_optim_step(m, &oo);
}

static void assert_same_model(const trm_model *a, const trm_model *b, int64_t t) {
    size_t nw = a->n_flat * sizeof(float), nz = (size_t)a->B * a->T * a->D * sizeof(float);
    ck_assert_msg(!memcmp(a->w, b->w, nw) && !memcmp(a->m, b->m, nw) && !memcmp(a->v, b->v, nw),
                  "%s step %lld: weights or moments differ", a->arch->preset, (long long)t);
    for (int k = 0; k < a->nstates; k++)
        ck_assert_msg(!memcmp(a->z[k], b->z[k], nz), "%s step %lld: carry %s differs", a->arch->preset, (long long)t,
                      a->arch->state[k]);
    ck_assert(!memcmp(a->steps, b->steps, (size_t)a->B * sizeof(int32_t)));
    ck_assert(!memcmp(a->halted, b->halted, (size_t)a->B));
    ck_assert(!memcmp(a->q, b->q, (size_t)a->B * 2 * sizeof(float)));
    ck_assert(!memcmp(a->metrics, b->metrics, TRM_NMETRICS * sizeof(double)));
}

/* Saved after 3 steps and resumed into a fresh model (another seed), both go on for 3 steps
 * with the same bits; the file holds the reference's carry fields and buffers by name. */
static void resume_round_trip(int arch) {
    trm_err e;
    trm_backend *be = trm_cpu_backend_create(-1, &e);
    ck_assert_msg(be != NULL, "%s", e.msg);
    trm_model_config c = small_config(arch);
    trm_model a, b;
    ck_assert_msg(trm_model_create(&a, &c, be, 1, 0, &e) == 0, "%s", e.msg);
    ck_assert_msg(trm_model_create(&b, &c, be, 2, 0, &e) == 0, "%s", e.msg);
    for (int64_t t = 1; t <= 3; t++) train_step(&a, t);
    char *path = xasprintf("%s/arch_%s.safetensors", tmp_dir(), a.arch->preset);
    trm_ckpt_state st = {.step = 3, .total_steps = 6, .world_size = 1};
    ck_assert_msg(trm_checkpoint_save(path, &a, "x: 1\n", &st, &e) == 0, "%s", e.msg);
    st_file f;
    ck_assert_msg(st_open(&f, path, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(st_meta_get(&f, "arch"), a.arch->name);
    for (int k = 0; k < a.nstates; k++) {
        char *z = xasprintf("carry.%s", a.arch->state[k]), *init = xasprintf("inner.%s", a.arch->init[k]);
        ck_assert_msg(st_find(&f, z) && st_find(&f, init), "%s: %s or %s missing", a.arch->preset, z, init);
        free(z);
        free(init);
    }
    /* no state of another architecture */
    ck_assert_int_eq(st_find(&f, "carry.z_H") != NULL, arch != TRM_ARCH_TRM_SINGLEZ);
    ck_assert_int_eq(st_find(&f, "carry.z_L") != NULL, arch == TRM_ARCH_TRM || arch == TRM_ARCH_HRM || arch == TRM_ARCH_TRM_SINGLEZ);
    ck_assert_int_eq(st_find(&f, "inner.H_level.layers.0.mlp.down_proj.weight") != NULL,
                     arch == TRM_ARCH_HRM || arch == TRM_ARCH_TRANSFORMERS_BASELINE);
    st_close(&f);
    trm_ckpt_state got;
    ck_assert_msg(trm_checkpoint_resume(&b, path, &got, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(got.step, 3);
    for (int64_t t = 4; t <= 6; t++) {
        train_step(&a, t);
        train_step(&b, t);
        assert_same_model(&a, &b, t);
    }
    trm_model_destroy(&a);
    trm_model_destroy(&b);
    be->destroy(be);
    free(path);
}

START_TEST(resume_trm) { resume_round_trip(TRM_ARCH_TRM); }
END_TEST
START_TEST(resume_hrm) { resume_round_trip(TRM_ARCH_HRM); }
END_TEST
START_TEST(resume_trm_singlez) { resume_round_trip(TRM_ARCH_TRM_SINGLEZ); }
END_TEST
START_TEST(resume_trm_hier6) { resume_round_trip(TRM_ARCH_TRM_HIER6); }
END_TEST
START_TEST(resume_transformers_baseline) { resume_round_trip(TRM_ARCH_TRANSFORMERS_BASELINE); }
END_TEST

/* A copy of `src` without its "arch" metadata: a checkpoint from before checkpoints named it. */
static void strip_arch(const char *src, const char *dst) {
    st_file f;
    trm_err e;
    ck_assert_msg(st_open(&f, src, &e) == 0, "%s", e.msg);
    st_writer w;
    st_writer_init(&w);
    for (int i = 0; i < f.ntensors; i++)
        st_writer_add(&w, f.tensors[i].name, f.tensors[i].dtype, f.tensors[i].ndim, f.tensors[i].shape, f.tensors[i].data);
    for (int i = 0; i < f.nmeta; i++)
        if (strcmp(f.meta[i].key, "arch") && strncmp(f.meta[i].key, "crc32.", 6)) st_writer_meta(&w, f.meta[i].key, f.meta[i].value);
    ck_assert_msg(st_writer_save(&w, dst, &e) == 0, "%s", e.msg);
    st_writer_free(&w);
    st_close(&f);
}

START_TEST(another_architecture_is_refused) {
    trm_err e;
    trm_backend *be = trm_cpu_backend_create(-1, &e);
    trm_model_config ch = small_config(TRM_ARCH_HRM), ct = small_config(TRM_ARCH_TRM);
    trm_model hrm, trm;
    ck_assert_msg(trm_model_create(&hrm, &ch, be, 1, 0, &e) == 0, "%s", e.msg);
    ck_assert_msg(trm_model_create(&trm, &ct, be, 1, 0, &e) == 0, "%s", e.msg);
    char *ph = xasprintf("%s/refuse_hrm.safetensors", tmp_dir()), *pt = xasprintf("%s/refuse_trm.safetensors", tmp_dir());
    char *old = xasprintf("%s/refuse_unnamed.safetensors", tmp_dir());
    trm_ckpt_state st = {.step = 1, .total_steps = 1, .world_size = 1};
    ck_assert_msg(trm_checkpoint_save(ph, &hrm, "x: 1\n", &st, &e) == 0, "%s", e.msg);
    ck_assert_msg(trm_checkpoint_save(pt, &trm, "x: 1\n", &st, &e) == 0, "%s", e.msg);
    trm_ckpt_state got;
    ck_assert_int_eq(trm_checkpoint_resume(&trm, ph, &got, &e), -1);
    ASSERT_HAS(e.msg, "is a checkpoint of recursive_reasoning.hrm@HierarchicalReasoningModel_ACTV1 (arch=hrm)");
    ASSERT_HAS(e.msg, "this run builds recursive_reasoning.trm@TinyRecursiveReasoningModel_ACTV1 (arch=trm)");
    ck_assert_int_eq(trm_checkpoint_load_weights(&trm, ph, 1, &e), -1);
    ASSERT_HAS(e.msg, "arch=hrm");
    ck_assert_int_eq(trm_checkpoint_load_weights(&hrm, pt, 1, &e), -1);
    ASSERT_HAS(e.msg, "is a checkpoint of recursive_reasoning.trm@TinyRecursiveReasoningModel_ACTV1 (arch=trm)");
    /* a checkpoint that names no architecture was written by a TRM-only trm */
    strip_arch(pt, old);
    ck_assert_msg(trm_checkpoint_load_weights(&trm, old, 0, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(trm_checkpoint_resume(&hrm, old, &got, &e), -1);
    ASSERT_HAS(e.msg, "is a checkpoint of recursive_reasoning.trm@");
    trm_model_destroy(&hrm);
    trm_model_destroy(&trm);
    be->destroy(be);
    free(ph);
    free(pt);
    free(old);
}
END_TEST

int main(void) {
    Suite *s = suite_create("arch");
    TCase *tc = tcase_create("arch");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, presets_read_the_reference_defaults);
    tcase_add_test(tc, unknown_name_lists_the_known_ones);
    tcase_add_test(tc, missing_keys_name_the_architecture);
    tcase_add_test(tc, settings_an_architecture_cannot_have);
    tcase_add_test(tc, resume_trm);
    tcase_add_test(tc, resume_hrm);
    tcase_add_test(tc, resume_trm_singlez);
    tcase_add_test(tc, resume_trm_hier6);
    tcase_add_test(tc, resume_transformers_baseline);
    tcase_add_test(tc, another_architecture_is_refused);
    suite_add_tcase(s, tc);
    return trm_run_suite(s);
}
