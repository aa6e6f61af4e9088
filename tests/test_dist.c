/* test_dist.c — the process group's launch detection from the environment (torchrun-style
 * variables, mpirun's, their errors) and its host collectives over the TCP rendezvous between
 * two forked ranks. Every test runs in its own forked process (CK_FORK), so setenv stays there. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "test_support.h"
#include "dist/dist.h"

static void clear_launch_env(void) {
    const char *names[] = {"WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                           "TORCHELASTIC_USE_AGENT_STORE", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                           "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_RANK", "PMI_SIZE",
                           "PMI_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unsetenv(names[i]);
}

static void set_env4(const char *world, const char *rank, const char *port) {
    clear_launch_env();
    if (world) setenv("WORLD_SIZE", world, 1);
    if (rank) setenv("RANK", rank, 1);
    if (port) setenv("MASTER_PORT", port, 1);
}

START_TEST(no_environment_is_one_process) {
    clear_launch_env();
    trm_dist d;
    trm_err e = {{0}};
    ck_assert_int_eq(trm_dist_detect(&d, &e), 0);
    ck_assert_int_eq(d.launch, TRM_LAUNCH_SINGLE);
    ck_assert_int_eq(d.world, 1);
    ck_assert_int_eq(d.rank, 0);
    ck_assert_int_eq(d.local_world, 1);
    ck_assert_int_eq(trm_dist_connect(&d, 1, &e), 0); /* nothing to connect */
    double x[2] = {1.5, -2};
    ck_assert_int_eq(trm_dist_allreduce_f64(&d, x, 2, &e), 0);
    ck_assert(x[0] == 1.5 && x[1] == -2);
    ck_assert_int_eq(trm_dist_bcast(&d, x, sizeof x, &e), 0);
    ck_assert_int_eq(trm_dist_barrier(&d, &e), 0);
    float f[3] = {1, 2, 3}, g[3];
    ck_assert_int_eq(trm_dist_mpi_allreduce_f32(&d, f, 3, &e), 0);
    ck_assert_int_eq(trm_dist_mpi_allgather(&d, f, g, sizeof f, &e), 0);
    ck_assert(memcmp(f, g, sizeof f) == 0);
    trm_dist_finalize(&d);
    /* WORLD_SIZE=1 is one process too */
    set_env4("1", "0", NULL);
    ck_assert_int_eq(trm_dist_detect(&d, &e), 0);
    ck_assert_int_eq(d.launch, TRM_LAUNCH_SINGLE);
}
END_TEST

START_TEST(torchrun_environment) {
    set_env4("4", "2", "29500");
    setenv("LOCAL_RANK", "0", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "node7", 1);
    trm_dist d;
    trm_err e = {{0}};
    ck_assert_int_eq(trm_dist_detect(&d, &e), 0);
    ck_assert_int_eq(d.launch, TRM_LAUNCH_ENV);
    ck_assert_int_eq(d.world, 4);
    ck_assert_int_eq(d.rank, 2);
    ck_assert_int_eq(d.local_rank, 0);
    ck_assert_int_eq(d.local_world, 2);
    ck_assert_str_eq(d.master_addr, "node7");
    ck_assert_int_eq(d.master_port, 29500);
    /* torchrun's agent serves its own store on MASTER_PORT: trm meets on the next port */
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
    ck_assert_int_eq(trm_dist_detect(&d, &e), 0);
    ck_assert_int_eq(d.master_port, 29501);
    /* defaults: one host, 127.0.0.1 */
    set_env4("2", "1", "1234");
    ck_assert_int_eq(trm_dist_detect(&d, &e), 0);
    ck_assert_int_eq(d.local_rank, 1);
    ck_assert_int_eq(d.local_world, 2);
    ck_assert_str_eq(d.master_addr, "127.0.0.1");
}
END_TEST

START_TEST(bad_environments_are_named) {
    trm_dist d;
    trm_err e = {{0}};
    struct {
        const char *world, *rank, *port, *msg;
    } cases[] = {
        {"2", NULL, "1234", "RANK is not set"},
        {"2", "2", "1234", "RANK=2 is not below WORLD_SIZE=2"},
        {"2", "x", "1234", "RANK=x: expected a non-negative integer"},
        {"two", "0", "1234", "WORLD_SIZE=two"},
        {"2", "0", NULL, "MASTER_PORT is not set"},
        {"2", "0", "70000", "MASTER_PORT=70000: expected a TCP port"},
        {"0", "0", "1234", "WORLD_SIZE=0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set_env4(cases[i].world, cases[i].rank, cases[i].port);
        memset(&e, 0, sizeof e);
        ck_assert_msg(trm_dist_detect(&d, &e) == -1, "case %zu accepted", i);
        ck_assert_msg(strstr(e.msg, cases[i].msg) != NULL, "case %zu: '%s' lacks '%s'", i, e.msg, cases[i].msg);
    }
    set_env4("2", "1", "1234");
    setenv("LOCAL_RANK", "3", 1);
    ck_assert_int_eq(trm_dist_detect(&d, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "LOCAL_RANK=3 is not below LOCAL_WORLD_SIZE=2"));
}
END_TEST

START_TEST(mpirun_environment) {
    clear_launch_env();
    setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("WORLD_SIZE", "9", 1); /* mpirun wins over a stray torchrun variable */
    trm_dist d;
    trm_err e = {{0}};
    int rc = trm_dist_detect(&d, &e);
    if (trm_dist_have_mpi()) {
        ck_assert_int_eq(rc, 0);
        ck_assert_int_eq(d.launch, TRM_LAUNCH_MPI);
        ck_assert_int_eq(d.world, 3);
        ck_assert_int_eq(d.rank, 1);
    } else {
        ck_assert_int_eq(rc, -1);
        ck_assert_ptr_nonnull(strstr(e.msg, "built without MPI"));
        ck_assert_ptr_nonnull(strstr(e.msg, "--nproc-per-node"));
    }
}
END_TEST

/* One rank of a two-rank run: connects, then bcast + allreduce + barrier; exits 0 if every
 * value is what it should be. */
static int two_rank_body(int rank, int port) {
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    char r[4];
    snprintf(r, sizeof r, "%d", rank);
    set_env4("2", r, p);
    trm_dist d;
    trm_err e = {{0}};
    if (trm_dist_detect(&d, &e) || trm_dist_connect(&d, 0, &e)) {
        fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        return 1;
    }
    char blob[128];
    memset(blob, rank == 0 ? 0x5a : 0, sizeof blob);
    double v[3] = {rank + 1.0, 10.0 * (rank + 1), rank ? 0.25 : 0.5};
    int bad = trm_dist_bcast(&d, blob, sizeof blob, &e) || trm_dist_allreduce_f64(&d, v, 3, &e) ||
              trm_dist_barrier(&d, &e);
    for (size_t i = 0; i < sizeof blob; i++) bad |= blob[i] != 0x5a;
    bad |= v[0] != 3.0 || v[1] != 30.0 || v[2] != 0.75;
    if (bad) fprintf(stderr, "rank %d: %s\n", rank, e.msg);
    trm_dist_finalize(&d);
    return bad;
}

START_TEST(two_ranks_meet_over_tcp) {
    int port = tr_local_port(NULL);
    ck_assert_int_gt(port, 0);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) _exit(two_rank_body(1, port));
    int mine = two_rank_body(0, port), st = 0;
    ck_assert_int_eq(waitpid(child, &st, 0), child);
    ck_assert_int_eq(mine, 0);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("dist");
    TCase *tc = tcase_create("launch");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, no_environment_is_one_process);
    tcase_add_test(tc, torchrun_environment);
    tcase_add_test(tc, bad_environments_are_named);
    tcase_add_test(tc, mpirun_environment);
    tcase_add_test(tc, two_ranks_meet_over_tcp);
    suite_add_tcase(s, tc);
    return trm_run_suite(s);
}
