/* test_train.c — end-to-end training through `trm pretrain`'s entry point: a run stopped
 * and resumed gives bit-identical weights, optimiser state, EMA and carry to a straight run;
 * training writes config.yaml, metrics.jsonl and checkpoints; a NaN stops the run. */
#include <check.h>

#include "check_main.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/build_sudoku4.h"
#include "io/checkpoint.h"
#include "util/rng.h"
#include "cli/commands.h"
#include "io/safetensors.h"

static const char *tmp_root(void) {
    mkdir(TRM_TEST_TMP, 0755);
    return TRM_TEST_TMP;
}

static char *data_dir(void) {
    char *d = xasprintf("%s/train_sudoku4", tmp_root());
    if (!trm_is_dir(d)) {
        trm_err e;
        trm_sudoku4_opts o = {.out = d, .n_train = 256, .n_test = 64, .min_clues = 6, .max_clues = 9, .seed = 1, .force = 1};
        ck_assert_msg(trm_build_sudoku4(&o, &e) == 0, "%s", e.msg);
    }
    return d;
}

static int pretrain(const char *run_dir, const char *extra1, const char *extra2) {
    char *data = data_dir();
    char *dp = xasprintf("data_paths=[%s]", data);
    char *cp = xasprintf("checkpoint_path=%s", run_dir);
    char *args[32] = {"cfg=tiny", dp, cp, "epochs=4", "eval_interval=2", "global_batch_size=32",
                      "arch.hidden_size=32", "arch.H_cycles=2", "arch.L_cycles=2", "arch.halt_max_steps=4",
                      "log_interval=5", "ema=True", "lr_warmup_steps=5", "arch.halt_exploration_prob=0.3",
                      "arch.mlp_t=False", "arch.pos_encodings=rope"};
    int n = 16;
    if (extra1) args[n++] = (char *)extra1;
    if (extra2) args[n++] = (char *)extra2;
    trm_globals g = {.search = {.dirs = NULL, .ndirs = 0, .use_embedded = 1}, .argv0 = "trm"};
    int rc = cmd_pretrain(n, args, &g);
    free(dp);
    free(cp);
    free(data);
    return rc;
}

static void assert_same_tensors(const char *a, const char *b) {
    st_file fa, fb;
    trm_err e;
    ck_assert_msg(st_open(&fa, a, &e) == 0, "%s", e.msg);
    ck_assert_msg(st_open(&fb, b, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(fa.ntensors, fb.ntensors);
    ck_assert_int_gt(fa.ntensors, 20);
    for (int i = 0; i < fa.ntensors; i++) {
        const st_tensor *ta = &fa.tensors[i], *tb = st_find(&fb, ta->name);
        ck_assert_msg(tb != NULL, "%s missing in %s", ta->name, b);
        ck_assert_int_eq(ta->nbytes, tb->nbytes);
        ck_assert_msg(memcmp(ta->data, tb->data, ta->nbytes) == 0, "tensor %s differs after resume", ta->name);
    }
    const char *keys[] = {"step", "sampler.iter", "sampler.group_pos", "sampler.batch_index", "sampler.set_index"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        ck_assert_str_eq(st_meta_get(&fa, keys[k]), st_meta_get(&fb, keys[k]));
    st_close(&fa);
    st_close(&fb);
}

START_TEST(resume_is_bit_exact) {
    char *a = xasprintf("%s/run_straight", tmp_root()), *b = xasprintf("%s/run_resumed", tmp_root());
    trm_err e;
    trm_remove_tree(a, &e);
    trm_remove_tree(b, &e);
    ck_assert_int_eq(pretrain(a, NULL, NULL), 0);
    ck_assert_int_eq(pretrain(b, "stop_after_steps=13", NULL), 0); /* mid-chunk: 16 steps per chunk */
    char *mid = xasprintf("%s/step_13.safetensors", b);
    ck_assert_msg(trm_file_exists(mid), "no checkpoint at the stop");
    ck_assert_int_eq(pretrain(b, "resume=auto", NULL), 0);
    char *fa = xasprintf("%s/step_32.safetensors", a), *fb = xasprintf("%s/step_32.safetensors", b);
    assert_same_tensors(fa, fb);
    /* the run directory holds its files */
    char *cy = xasprintf("%s/config.yaml", a), *mj = xasprintf("%s/metrics.jsonl", a);
    ck_assert(trm_file_exists(cy));
    size_t len;
    char *text = trm_read_file(mj, &len, &e);
    ck_assert_msg(text != NULL, "%s", e.msg);
    ck_assert_ptr_nonnull(strstr(text, "\"kind\":\"train\""));
    ck_assert_ptr_nonnull(strstr(text, "\"train/lm_loss\""));
    ck_assert_ptr_nonnull(strstr(text, "\"train/lr\""));
    ck_assert_ptr_nonnull(strstr(text, "\"kind\":\"eval\""));
    ck_assert_ptr_nonnull(strstr(text, "\"all/exact_accuracy\""));
    free(text);
    free(cy); free(mj); free(mid); free(fa); free(fb); free(a); free(b);
}
END_TEST

START_TEST(nan_loss_stops_the_run) {
    char *a = xasprintf("%s/run_nan", tmp_root());
    trm_err e;
    trm_remove_tree(a, &e);
    /* an absurd learning rate blows the weights up within a few steps */
    int rc = pretrain(a, "lr=1e30", "puzzle_emb_lr=1e30");
    ck_assert_int_eq(rc, 1);
    free(a);
}
END_TEST

START_TEST(bad_config_is_refused) {
    char *a = xasprintf("%s/run_bad", tmp_root());
    ck_assert_int_eq(pretrain(a, "arch.num_heads=33", NULL), 1); /* more heads than hidden_size 32 */
    ck_assert_int_eq(pretrain(a, "arch.num_heads=5", "arch.hidden_size=35"), 1); /* rope: odd head_dim 35 // 5 */
    ck_assert_int_eq(pretrain(a, "epochs=3", NULL), 1);          /* not a multiple of eval_interval */
    ck_assert_int_eq(pretrain(a, "data_paths=[/nonexistent/x]", NULL), 1);
    ck_assert_int_eq(pretrain(a, "device=mps:99", NULL), 1); /* not compiled in, or no such device */
    free(a);
}
END_TEST

/* load_checkpoint with a puzzle table of another size: every row becomes the saved mean row
 * (the reference's behaviour); the other weights load unchanged. */
START_TEST(load_checkpoint_resets_puzzle_rows_to_mean) {
    trm_err e;
    trm_backend *be = trm_cpu_backend_create(-1, &e);
    trm_model_config c = {.batch_size = 2, .seq_len = 4, .vocab_size = 5, .num_puzzle_identifiers = 3,
                          .H_cycles = 1, .L_cycles = 1, .L_layers = 1, .hidden_size = 8, .num_heads = 2,
                          .expansion = 2, .puzzle_emb_ndim = 8, .pos_encodings = TRM_POS_ROPE,
                          .halt_max_steps = 2, .no_ACT_continue = 1, .rms_norm_eps = 1e-5, .rope_theta = 1e4};
    trm_model a, b;
    ck_assert_msg(trm_model_create(&a, &c, be, 1, 0, &e) == 0, "%s", e.msg);
    trm_rng r;
    trm_rng_init(&r, 1, 2);
    for (int i = 0; i < 3 * 8; i++) a.puz_w[i] = (float)trm_rng_normal(&r);
    char *path = xasprintf("%s/puzzle_reset.safetensors", tmp_root());
    trm_ckpt_state st = {.step = 1, .total_steps = 1, .world_size = 1};
    ck_assert_msg(trm_checkpoint_save(path, &a, "x: 1\n", &st, &e) == 0, "%s", e.msg);
    c.num_puzzle_identifiers = 7;
    ck_assert_msg(trm_model_create(&b, &c, be, 2, 0, &e) == 0, "%s", e.msg);
    ck_assert_msg(trm_checkpoint_load_weights(&b, path, 1, &e) == 0, "%s", e.msg);
    for (int k = 0; k < 8; k++) {
        float mean = (float)(((double)a.puz_w[k] + a.puz_w[8 + k] + a.puz_w[16 + k]) / 3.0);
        for (int row = 0; row < 7; row++) ck_assert_float_eq_tol(b.puz_w[row * 8 + k], mean, 1e-6f);
    }
    ck_assert(memcmp(a.w, b.w, a.n_flat * sizeof(float)) == 0);
    /* without the reset allowance (resume), the shape mismatch is an error naming the tensor */
    ck_assert_int_eq(trm_checkpoint_load_weights(&b, path, 0, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "inner.puzzle_emb.weights"));
    trm_model_destroy(&a);
    trm_model_destroy(&b);
    be->destroy(be);
    free(path);
}
END_TEST

int main(void) {
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("pretrain");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, resume_is_bit_exact);
    tcase_add_test(tc, nan_loss_stops_the_run);
    tcase_add_test(tc, bad_config_is_refused);
    tcase_add_test(tc, load_checkpoint_resets_puzzle_rows_to_mean);
    suite_add_tcase(s, tc);
    return trm_run_suite(s);
}
