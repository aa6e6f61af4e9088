/* test_device.c — the device policy driven through the capability table, the mps row
 * included (compiled into this binary or not): distributed is refused where a backend cannot
 * all-reduce, compile (auto by default: silent) and bf16 fall back with one warning each when
 * asked for; the compile key's three states; device= parsing with its
 * errors naming the backends this binary has; device=auto never picks a CPU-type Vulkan device. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "backend/device.h"
#include "dist/dist.h"
#include "train/run_config.h"

static int count_lines(FILE *f) {
    rewind(f);
    int n = 0, c;
    while ((c = fgetc(f)) != EOF) n += c == '\n';
    return n;
}

START_TEST(mps_row_is_the_metal_style_policy) {
    const trm_caps *c = trm_known_caps("mps");
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->compile, 0);
    ck_assert_int_eq(c->distributed, 0);
    ck_assert_int_eq(c->bf16, 0);
    ck_assert_int_eq(c->unified_memory, 1);
    ck_assert_ptr_null(trm_known_caps("tpu"));
    /* the registry's cpu row is the table's cpu row */
    const trm_backend_entry *cpu = trm_backend_find("cpu");
    ck_assert_ptr_nonnull(cpu);
    ck_assert(memcmp(&cpu->caps, trm_known_caps("cpu"), sizeof cpu->caps) == 0);
}
END_TEST

/* cpu can train distributed exactly when this binary has MPI; a cpu row without it is refused
 * with the message that says which build is needed, whatever this build is. */
START_TEST(cpu_distributed_follows_the_mpi_build) {
    ck_assert_int_eq(trm_known_caps("cpu")->distributed, trm_dist_have_mpi());
    trm_caps no_mpi = *trm_known_caps("cpu");
    no_mpi.distributed = 0;
    trm_device_request req = {.want_distributed = 1};
    int compile, bf16;
    trm_err e = {{0}};
    ck_assert_int_eq(trm_device_policy("cpu", &no_mpi, &req, &compile, &bf16, NULL, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "needs the MPI build"));
    trm_device_choice dc;
    memset(&e, 0, sizeof e);
    int rc = trm_device_choose("cpu", &req, &dc, NULL, &e);
    if (trm_dist_have_mpi())
        ck_assert_int_eq(rc, 0);
    else
        ck_assert_ptr_nonnull(strstr(e.msg, "needs the MPI build"));
    /* mps is refused before anything else, on any build */
    ck_assert_int_eq(trm_device_policy("mps", trm_known_caps("mps"), &req, &compile, &bf16, NULL, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "not supported on the mps backend"));
}
END_TEST

static int ndev_fake;
static int fake_probe(char *desc, size_t n) {
    if (desc && n) snprintf(desc, n, "fake");
    return ndev_fake;
}

/* GPUs per local rank: base index + local rank, one visible GPU per rank, too few GPUs. */
START_TEST(local_ranks_take_their_gpu) {
    trm_backend_entry fake = {.name = "cuda", .caps = TRM_CAPS_CUDA, .create = NULL, .probe = fake_probe};
    trm_device_choice dc;
    trm_err e = {{0}};
    unsetenv("CUDA_VISIBLE_DEVICES");
    ndev_fake = 4;
    dc = (trm_device_choice){.entry = &fake, .index = -1};
    ck_assert_int_eq(trm_device_pick_local(&dc, 3, &e), 0);
    ck_assert_int_eq(dc.index, 3);
    ck_assert_ptr_nonnull(strstr(dc.why, "local rank 3 uses cuda:3"));
    dc = (trm_device_choice){.entry = &fake, .index = 2};
    ck_assert_int_eq(trm_device_pick_local(&dc, 1, &e), 0);
    ck_assert_int_eq(dc.index, 3);
    dc = (trm_device_choice){.entry = &fake, .index = 2};
    ck_assert_int_eq(trm_device_pick_local(&dc, 2, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "local rank 2 needs cuda device 4, but only 4 are present"));
    ndev_fake = 1; /* one GPU shared by two ranks would be refused by NCCL: say it first */
    dc = (trm_device_choice){.entry = &fake, .index = -1};
    ck_assert_int_eq(trm_device_pick_local(&dc, 1, &e), -1);
    setenv("CUDA_VISIBLE_DEVICES", "5", 1); /* the launcher gave this rank its own GPU */
    dc = (trm_device_choice){.entry = &fake, .index = -1};
    ck_assert_int_eq(trm_device_pick_local(&dc, 1, &e), 0);
    ck_assert_int_eq(dc.index, 0);
    ck_assert_ptr_nonnull(strstr(dc.why, "its one visible cuda device"));
}
END_TEST

/* compile is auto (-1), off or on; auto follows the backend without a word, only an explicit
 * compile=true where the backend has no compile stage is warned about. */
START_TEST(policy_for_every_row_and_request) {
    const char *names[] = {"cpu", "cuda", "mps"};
    for (int b = 0; b < 3; b++) {
        const trm_caps *caps = trm_known_caps(names[b]);
        ck_assert_ptr_nonnull(caps);
        for (int r = 0; r < 12; r++) {
            int want_compile = (r % 3) - 1; /* TRM_COMPILE_AUTO, 0, 1 */
            trm_device_request req = {.want_compile = want_compile, .want_bf16 = (r / 3) & 1,
                                      .want_distributed = (r / 6) & 1};
            FILE *warn = tmpfile();
            ck_assert_ptr_nonnull(warn);
            int compile = -1, bf16 = -1;
            trm_err e = {{0}};
            int rc = trm_device_policy(names[b], caps, &req, &compile, &bf16, warn, &e);
            if (req.want_distributed && !caps->distributed) {
                ck_assert_int_eq(rc, -1);
                if (!strcmp(names[b], "cpu")) { /* a build without MPI */
                    ck_assert_ptr_nonnull(strstr(e.msg, "needs the MPI build"));
                } else {
                    ck_assert_ptr_nonnull(strstr(e.msg, "distributed training is not supported"));
                    ck_assert_ptr_nonnull(strstr(e.msg, names[b]));
                }
                ck_assert_int_eq(count_lines(warn), 0); /* refused before any other work */
            } else {
                ck_assert_int_eq(rc, 0);
                ck_assert_int_eq(compile, want_compile != 0 && caps->compile);
                ck_assert_int_eq(bf16, req.want_bf16 && caps->bf16);
                int expect = (want_compile == 1 && !caps->compile) + (req.want_bf16 && !caps->bf16);
                ck_assert_msg(count_lines(warn) == expect, "%s request %d: %d warnings, expected %d", names[b], r,
                              count_lines(warn), expect);
            }
            fclose(warn);
        }
    }
}
END_TEST

/* The default config asks for nothing (compile: auto); true/false on the command line are
 * explicit, and anything else is refused with the key named. */
START_TEST(compile_key_is_auto_unless_set) {
    cfg_search s = {.use_embedded = 1};
    static const struct {
        const char *ov;
        int want; /* -2: refused */
    } cases[] = {{NULL, TRM_COMPILE_AUTO}, {"compile=true", 1}, {"compile=True", 1}, {"compile=false", 0},
                 {"compile=auto", TRM_COMPILE_AUTO}, {"compile=null", TRM_COMPILE_AUTO}, {"compile=sometimes", -2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *ov[2] = {(char *)"data_paths=[x]", (char *)cases[i].ov};
        trm_err e = {{0}};
        cfg_node *cfg = cfg_compose(&s, "cfg_pretrain", cases[i].ov ? 2 : 1, ov, &e);
        ck_assert_msg(cfg != NULL, "%s", e.msg);
        trm_run_config rc;
        int bad = trm_run_config_read(&rc, cfg, &e);
        if (cases[i].want == -2) {
            ck_assert_int_eq(bad, -1);
            ck_assert_ptr_nonnull(strstr(e.msg, "compile: expected auto, true or false"));
        } else {
            ck_assert_msg(bad == 0, "%s", e.msg);
            ck_assert_int_eq(rc.compile, cases[i].want);
        }
        trm_run_config_free(&rc);
        cfg_free(cfg);
    }
}
END_TEST

START_TEST(device_spec_errors_name_what_exists) {
    trm_device_request req = {0};
    trm_device_choice dc;
    trm_err e = {{0}};
    if (!trm_backend_find("mps")) {
        ck_assert_int_eq(trm_device_choose("mps", &req, &dc, NULL, &e), -1);
        ck_assert_ptr_nonnull(strstr(e.msg, "no 'mps' backend"));
        ck_assert_ptr_nonnull(strstr(e.msg, "cpu"));
    }
    if (!trm_backend_find("cuda")) {
        ck_assert_int_eq(trm_device_choose("cuda:0", &req, &dc, NULL, &e), -1);
        ck_assert_ptr_nonnull(strstr(e.msg, "no 'cuda' backend"));
    }
    ck_assert_int_eq(trm_device_choose("gpu", &req, &dc, NULL, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "expected auto, cpu, cuda, cuda:N, mps or mps:N"));
    ck_assert_int_eq(trm_device_choose("cpu:1", &req, &dc, NULL, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "only cuda and mps take a device index"));
    ck_assert_int_eq(trm_device_choose("mps:-1", &req, &dc, NULL, &e), -1);
    ck_assert_int_eq(trm_device_choose("cuda:x", &req, &dc, NULL, &e), -1);
    ck_assert_int_eq(trm_device_choose("cpu", &req, &dc, NULL, &e), 0);
    ck_assert_str_eq(dc.entry->name, "cpu");
    ck_assert_int_eq(trm_device_choose("auto", &req, &dc, NULL, &e), 0);
    ck_assert_ptr_nonnull(dc.entry);
    ck_assert_ptr_nonnull(strstr(dc.why, "device=auto chose"));
    /* distributed cpu: allowed with MPI, refused by device choice without (see
     * cpu_distributed_follows_the_mpi_build) */
}
END_TEST

/* Where mps is compiled in: auto takes it only for a GPU (lavapipe, a CPU device, would be far
 * slower than cpu), and device=mps still opens a CPU device when that is all there is. */
START_TEST(auto_skips_cpu_type_vulkan_devices) {
    const trm_backend_entry *mps = trm_backend_find("mps");
    if (!mps) return;
    ck_assert_ptr_nonnull(mps->probe_auto);
    char d[1024];
    int all = mps->probe(d, sizeof d), gpus = mps->probe_auto(d, sizeof d);
    ck_assert_int_le(gpus, all);
    trm_device_request req = {0};
    trm_device_choice dc;
    trm_err e = {{0}};
    ck_assert_int_eq(trm_device_choose("auto", &req, &dc, NULL, &e), 0);
    const trm_backend_entry *cuda = trm_backend_find("cuda");
    int have_cuda = cuda && cuda->probe(d, sizeof d) > 0;
    if (gpus == 0) ck_assert_str_ne(dc.entry->name, "mps");
    if (gpus > 0 && !have_cuda) ck_assert_str_eq(dc.entry->name, "mps");
    if (all > 0) {
        ck_assert_int_eq(trm_device_choose("mps", &req, &dc, NULL, &e), 0);
        ck_assert_str_eq(dc.entry->name, "mps");
        char spec[32];
        snprintf(spec, sizeof spec, "mps:%d", all);
        ck_assert_int_eq(trm_device_choose(spec, &req, &dc, NULL, &e), -1);
        ck_assert_ptr_nonnull(strstr(e.msg, "device(s) present"));
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("device");
    TCase *tc = tcase_create("policy");
    tcase_add_test(tc, mps_row_is_the_metal_style_policy);
    tcase_add_test(tc, policy_for_every_row_and_request);
    tcase_add_test(tc, compile_key_is_auto_unless_set);
    tcase_add_test(tc, cpu_distributed_follows_the_mpi_build);
    tcase_add_test(tc, local_ranks_take_their_gpu);
    tcase_add_test(tc, device_spec_errors_name_what_exists);
    tcase_add_test(tc, auto_skips_cpu_type_vulkan_devices);
    suite_add_tcase(s, tc);
    return trm_run_suite(s);
}
