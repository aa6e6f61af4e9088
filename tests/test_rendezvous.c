/* test_rendezvous.c — the TCP rendezvous (trm/dist/rendezvous.c) between forked processes on a free
 * local port: the collectives, a client that starts first, world 1, a dying peer, mismatched
 * world sizes, ranks and sizes, the connect timeout, rank 0 reached at another address than
 * 127.0.0.1; and the launcher (trm/dist/launch.c) driving /bin/sh workers: exit statuses, stopping
 * the others, the environment of one host and of one host of several, forwarding. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "dist/launch.h"
#include "dist/rendezvous.h"
#include "test_support.h"

#define HOST "127.0.0.1"
#define HOST2 "127.0.0.2"
#define TIMEOUT 5.0
#define BLOB 128

static int local_port(int *hold) {
    int port = tr_local_port(hold);
    ck_assert_int_gt(port, 0);
    return port;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static int fcntl_ok(int fd) { return fcntl(fd, F_GETFD) != -1; }

static void fill_blob(unsigned char *b) {
    for (int i = 0; i < BLOB; i++) b[i] = (unsigned char)(i * 7 + 3);
}

static uint64_t rank_value(int r) { return 0x1000u + (uint64_t)r * 0x10001u; }

/* One rank of the full exercise, rank 0 reached at host:port. 0 when every byte it saw was
 * right, else the failing step. */
static int run_rank_at(const char *host, int port, int rank, int world, trm_err *e) {
    trm_rdzv r;
    unsigned char blob[BLOB], want[BLOB];
    uint64_t mine = rank_value(rank), all[8];
    fill_blob(want);
    if (rank == 0)
        memcpy(blob, want, BLOB);
    else
        memset(blob, 0, BLOB);
    memset(all, 0, sizeof all);
    if (trm_rdzv_open(&r, host, port, rank, world, TIMEOUT, e)) return 1;
    int rc = 0;
    if (trm_rdzv_bcast(&r, blob, BLOB, e))
        rc = 2;
    else if (memcmp(blob, want, BLOB) != 0)
        rc = 3;
    else if (trm_rdzv_allgather(&r, &mine, all, sizeof mine, e))
        rc = 4;
    for (int q = 0; q < world && rc == 0; q++)
        if (all[q] != rank_value(q)) rc = 5;
    if (rc == 0 && trm_rdzv_barrier(&r, e)) rc = 6;
    trm_rdzv_close(&r);
    return rc;
}

static int run_rank(int port, int rank, int world, trm_err *e) { return run_rank_at(HOST, port, rank, world, e); }

static pid_t fork_rank_at(const char *host, int port, int rank, int world) {
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        trm_err e = {{0}};
        int rc = run_rank_at(host, port, rank, world, &e);
        if (rc) fprintf(stderr, "rank %d failed at step %d: %s\n", rank, rc, e.msg);
        _exit(rc);
    }
    return pid;
}

static pid_t fork_rank(int port, int rank, int world) { return fork_rank_at(HOST, port, rank, world); }

/* A child whose open is expected to fail with a message containing `want` (exit 0), or to
 * succeed and then see its next barrier fail (want NULL; exit 0 too). */
static pid_t fork_failing_rank(int port, int rank, int world, const char *want) {
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        trm_err e = {{0}};
        trm_rdzv r;
        int rc = trm_rdzv_open(&r, HOST, port, rank, world, TIMEOUT, &e);
        if (rc == 0) rc = trm_rdzv_barrier(&r, &e);
        trm_rdzv_close(&r);
        int ok = rc != 0 && (!want || strstr(e.msg, want));
        if (!ok) fprintf(stderr, "rank %d: expected '%s', got rc %d '%s'\n", rank, want ? want : "", rc, e.msg);
        _exit(ok ? 0 : 1);
    }
    return pid;
}

static int child_status(pid_t pid) {
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#define ck_assert_msg_has(e, s) ck_assert_msg(strstr((e).msg, (s)) != NULL, "'%s' does not contain '%s'", (e).msg, (s))

START_TEST(test_three_ranks) {
    int port = local_port(NULL);
    pid_t p1 = fork_rank(port, 1, 3), p2 = fork_rank(port, 2, 3);
    trm_err e = {{0}};
    int rc = run_rank(port, 0, 3, &e);
    ck_assert_msg(rc == 0, "rank 0 failed at step %d: %s", rc, e.msg);
    ck_assert_int_eq(child_status(p1), 0);
    ck_assert_int_eq(child_status(p2), 0);
}
END_TEST

/* Connects (retrying until rank 0 listens) and closes without a byte, like `nc -z`. */
static pid_t fork_probe(int port) {
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t)port);
        for (int i = 0; i < 300; i++) {
            int fd = socket(AF_INET, SOCK_STREAM, 0), ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
            close(fd);
            if (ok) _exit(0);
            sleep_s(0.01);
        }
        _exit(1);
    }
    return pid;
}

/* Rank 1 starts before rank 0 (300 ms) and still joins; a port probe that connects while rank 0
 * waits for the late rank 2 is ignored. */
START_TEST(test_client_before_rank0) {
    int port = local_port(NULL);
    pid_t p1 = fork_rank(port, 1, 3), probe = fork_probe(port);
    fflush(NULL);
    pid_t p2 = fork();
    ck_assert_int_ge(p2, 0);
    if (p2 == 0) {
        sleep_s(0.6);
        trm_err e2 = {{0}};
        _exit(run_rank(port, 2, 3, &e2));
    }
    sleep_s(0.3);
    trm_err e = {{0}};
    int rc = run_rank(port, 0, 3, &e);
    ck_assert_msg(rc == 0, "rank 0 failed at step %d: %s", rc, e.msg);
    ck_assert_int_eq(child_status(p1), 0);
    ck_assert_int_eq(child_status(p2), 0);
    ck_assert_int_eq(child_status(probe), 0);
}
END_TEST

START_TEST(test_world_one_and_port_in_use) {
    int held, port = local_port(&held);
    trm_err e = {{0}};
    trm_rdzv r;
    /* a socket of any kind would fail: the host does not resolve and the port is taken */
    ck_assert_int_eq(trm_rdzv_open(&r, "no-such-host.invalid", port, 0, 1, TIMEOUT, &e), 0);
    ck_assert_int_eq(r.listen_fd, -1);
    ck_assert_ptr_null(r.fds);
    uint64_t mine = 42, all = 0;
    unsigned char blob[BLOB];
    fill_blob(blob);
    ck_assert_int_eq(trm_rdzv_bcast(&r, blob, BLOB, &e), 0);
    ck_assert_int_eq(trm_rdzv_allgather(&r, &mine, &all, sizeof mine, &e), 0);
    ck_assert(all == 42);
    ck_assert_int_eq(trm_rdzv_barrier(&r, &e), 0);
    trm_rdzv_close(&r);

    ck_assert_int_eq(trm_rdzv_open(&r, HOST, port, 0, 2, TIMEOUT, &e), -1);
    char want[64];
    snprintf(want, sizeof want, "MASTER_PORT %d is in use", port);
    ck_assert_msg_has(e, want);
    ck_assert_ptr_null(r.fds);
    trm_rdzv_close(&r); /* after a failed open */
    trm_rdzv zero;
    memset(&zero, 0, sizeof zero);
    int stdin_open = fcntl_ok(0);
    trm_rdzv_close(&zero); /* listen_fd is 0 here: stdin must survive */
    ck_assert_int_eq(fcntl_ok(0), stdin_open);
    close(held);
}
END_TEST

START_TEST(test_peer_dies) {
    int port = local_port(NULL);
    fflush(NULL);
    pid_t p1 = fork();
    if (p1 == 0) { /* joins, takes the bcast, then dies before the allgather */
        trm_rdzv r;
        unsigned char blob[BLOB];
        int ok = trm_rdzv_open(&r, HOST, port, 1, 3, TIMEOUT, NULL) == 0 && trm_rdzv_bcast(&r, blob, BLOB, NULL) == 0;
        _exit(ok ? 0 : 1);
    }
    pid_t p2 = fork();
    if (p2 == 0) {
        trm_rdzv r;
        trm_err e2 = {{0}};
        unsigned char blob[BLOB];
        uint64_t mine = 2, all[3];
        int ok = trm_rdzv_open(&r, HOST, port, 2, 3, TIMEOUT, &e2) == 0 && trm_rdzv_bcast(&r, blob, BLOB, &e2) == 0 &&
                 trm_rdzv_allgather(&r, &mine, all, sizeof mine, &e2) == -1 &&
                 strstr(e2.msg, "rank 0 stopped the rendezvous: rank 1 closed the connection") != NULL;
        if (!ok) fprintf(stderr, "rank 2: %s\n", e2.msg);
        _exit(ok ? 0 : 1);
    }
    trm_rdzv r;
    trm_err e = {{0}};
    unsigned char blob[BLOB];
    uint64_t mine = 0, all[3];
    fill_blob(blob);
    ck_assert_msg(trm_rdzv_open(&r, HOST, port, 0, 3, TIMEOUT, &e) == 0, "%s", e.msg);
    ck_assert_msg(trm_rdzv_bcast(&r, blob, BLOB, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(child_status(p1), 0);
    double t0 = trm_now_seconds();
    ck_assert_int_eq(trm_rdzv_allgather(&r, &mine, all, sizeof mine, &e), -1);
    ck_assert_double_lt(trm_now_seconds() - t0, 2.0); /* noticed, not timed out */
    ck_assert_msg_has(e, "rank 1 closed the connection (it probably failed; see its output)");
    ck_assert_int_eq(child_status(p2), 0); /* before closing: rank 2 reads rank 0's reason first */
    trm_rdzv_close(&r);
}
END_TEST

START_TEST(test_world_mismatch) {
    int port = local_port(NULL);
    pid_t p1 = fork_failing_rank(port, 1, 3, "has WORLD_SIZE 2 but rank 1 has WORLD_SIZE 3");
    trm_err e = {{0}};
    trm_rdzv r;
    ck_assert_int_eq(trm_rdzv_open(&r, HOST, port, 0, 2, TIMEOUT, &e), -1);
    ck_assert_msg_has(e, "(rank 1) has WORLD_SIZE 3 but rank 0 has WORLD_SIZE 2");
    ck_assert_msg_has(e, "the process at 127.0.0.1 (rank 1)");
    ck_assert_int_eq(child_status(p1), 0);
}
END_TEST

START_TEST(test_duplicate_rank) {
    int port = local_port(NULL);
    pid_t p1 = fork_failing_rank(port, 1, 3, NULL), p2 = fork_failing_rank(port, 1, 3, NULL);
    trm_err e = {{0}};
    trm_rdzv r;
    ck_assert_int_eq(trm_rdzv_open(&r, HOST, port, 0, 3, TIMEOUT, &e), -1);
    ck_assert_msg_has(e, "two processes claim RANK 1");
    ck_assert_int_eq(child_status(p1), 0);
    ck_assert_int_eq(child_status(p2), 0);
}
END_TEST

START_TEST(test_size_mismatch) {
    int port = local_port(NULL);
    fflush(NULL);
    pid_t p1 = fork();
    if (p1 == 0) {
        trm_rdzv r;
        trm_err e1 = {{0}};
        uint64_t mine = 1, all[2];
        int ok = trm_rdzv_open(&r, HOST, port, 1, 2, TIMEOUT, &e1) == 0 &&
                 trm_rdzv_allgather(&r, &mine, all, sizeof mine, &e1) == -1 && strstr(e1.msg, "rank 0 stopped") != NULL;
        if (!ok) fprintf(stderr, "rank 1: %s\n", e1.msg);
        _exit(ok ? 0 : 1);
    }
    trm_rdzv r;
    trm_err e = {{0}};
    uint32_t mine = 0, all[2];
    ck_assert_msg(trm_rdzv_open(&r, HOST, port, 0, 2, TIMEOUT, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(trm_rdzv_allgather(&r, &mine, all, sizeof mine, &e), -1);
    ck_assert_msg_has(e, "rank 1 sent 8 bytes in allgather but rank 0 expected 4");
    ck_assert_int_eq(child_status(p1), 0);
    trm_rdzv_close(&r);
}
END_TEST

START_TEST(test_connect_timeout) {
    int port = local_port(NULL);
    trm_err e = {{0}};
    trm_rdzv r;
    double t0 = trm_now_seconds();
    ck_assert_int_eq(trm_rdzv_open(&r, HOST, port, 1, 2, 0.5, &e), -1);
    double dt = trm_now_seconds() - t0;
    ck_assert_msg(dt >= 0.45 && dt < 2.0, "gave up after %.2f s", dt);
    char want[64];
    snprintf(want, sizeof want, "rank 0 at 127.0.0.1:%d", port);
    ck_assert_msg_has(e, want);
    ck_assert_ptr_null(r.fds);
}
END_TEST

/* Whether this machine has 127.0.0.2 (Linux routes all of 127/8 to the loopback; macOS has
 * only 127.0.0.1 unless an alias is added). */
static int have_second_loopback(void) {
    trm_err e = {{0}};
    return trm_host_is_local(HOST2, &e) == 1;
}

/* Rank 0 listens on every interface, so ranks told MASTER_ADDR=127.0.0.2 reach it (as ranks of
 * other hosts reach it at this host's address); a rank that finds nobody there names the
 * address it tried. */
START_TEST(test_other_address) {
    if (!have_second_loopback()) {
        printf("no 127.0.0.2 on this machine: rendezvous at another loopback address not checked\n");
        return;
    }
    int port = local_port(NULL);
    pid_t p1 = fork_rank_at(HOST2, port, 1, 3), p2 = fork_rank_at(HOST2, port, 2, 3);
    trm_err e = {{0}};
    int rc = run_rank_at(HOST2, port, 0, 3, &e);
    ck_assert_msg(rc == 0, "rank 0 failed at step %d: %s", rc, e.msg);
    ck_assert_int_eq(child_status(p1), 0);
    ck_assert_int_eq(child_status(p2), 0);

    port = local_port(NULL);
    trm_rdzv r;
    ck_assert_int_eq(trm_rdzv_open(&r, HOST2, port, 2, 4, 0.3, &e), -1);
    char want[80];
    snprintf(want, sizeof want, "rank 2 could not connect to rank 0 at %s:%d", HOST2, port);
    ck_assert_msg_has(e, want);
}
END_TEST

START_TEST(test_host_is_local) {
    trm_err e = {{0}};
    ck_assert_int_eq(trm_host_is_local("127.0.0.1", &e), 1);
    ck_assert_int_eq(trm_host_is_local("localhost", &e), 1);
    ck_assert_int_eq(trm_host_is_local("192.0.2.1", &e), 0); /* TEST-NET-1: never a host's own */
    ck_assert_int_eq(trm_host_is_local("", &e), -1);
    ck_assert_msg_has(e, "cannot resolve ''");
}
END_TEST

/* ---- the launcher ---------------------------------------------------------------------------- */

static int launch_sh(int nproc, const char *script, trm_err *e) {
    char *args[] = {"sh", "-c", (char *)script, NULL};
    return trm_launch_local(nproc, "/bin/sh", args, e);
}

START_TEST(test_launch_status) {
    trm_err e = {{0}};
    ck_assert_int_eq(launch_sh(1, "exit $RANK", &e), 0);
    ck_assert_int_eq(launch_sh(2, "exit $((RANK * 5))", &e), 5);
    ck_assert_int_eq(launch_sh(0, "exit 0", &e), -1);
    ck_assert_msg_has(e, "--nproc-per-node must be >= 1");
    char *args[] = {"trm", NULL};
    ck_assert_int_eq(trm_launch_local(2, "/nonexistent/trm", args, &e), -1);
    ck_assert_msg_has(e, "could not start worker rank 0: /nonexistent/trm");
    char exe[4096];
    ck_assert_msg(trm_self_exe(exe, sizeof exe, "sh", &e) == 0, "%s", e.msg);
    ck_assert_msg(strstr(exe, "test_rendezvous") != NULL, "self exe is %s", exe);
}
END_TEST

START_TEST(test_launch_failure_stops_others) {
    trm_err e = {{0}};
    double t0 = trm_now_seconds();
    ck_assert_int_eq(launch_sh(2, "if [ \"$RANK\" = 1 ]; then exit 3; fi; exec sleep 30", &e), 3);
    ck_assert_double_lt(trm_now_seconds() - t0, 5.0);
}
END_TEST

START_TEST(test_launch_environment) {
    char dir[] = "/tmp/trm_launch_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    setenv("TRM_TEST_DIR", dir, 1);
    unsetenv("OMP_NUM_THREADS");
    trm_err e = {{0}};
    const char *check = "[ \"$WORLD_SIZE\" = 3 ] && [ \"$LOCAL_WORLD_SIZE\" = 3 ] && [ \"$LOCAL_RANK\" = \"$RANK\" ] && "
                        "[ \"$MASTER_ADDR\" = 127.0.0.1 ] && [ \"$MASTER_PORT\" -gt 0 ] && [ \"$OMP_NUM_THREADS\" -ge 1 ] && "
                        "echo \"$MASTER_PORT\" > \"$TRM_TEST_DIR/rank$RANK\"";
    ck_assert_int_eq(launch_sh(3, check, &e), 0);
    char first[32] = "";
    for (int r = 0; r < 3; r++) { /* three distinct ranks 0..2, one port */
        char path[64], port[32] = "";
        snprintf(path, sizeof path, "%s/rank%d", dir, r);
        FILE *f = fopen(path, "r");
        ck_assert_msg(f != NULL, "no file from rank %d", r);
        ck_assert_ptr_nonnull(fgets(port, sizeof port, f));
        fclose(f);
        if (r == 0) memcpy(first, port, sizeof port);
        ck_assert_str_eq(port, first);
    }
    setenv("OMP_NUM_THREADS", "7", 1);
    ck_assert_int_eq(launch_sh(2, "[ \"$OMP_NUM_THREADS\" = 7 ]", &e), 0);
    ck_assert_int_eq(trm_remove_tree(dir, &e), 0);
}
END_TEST

/* Host 1 of 2 with 2 workers: global ranks 2 and 3, local ranks 0 and 1, the given address and
 * port. And the specs that cannot make a run. */
START_TEST(test_launch_second_host) {
    trm_err e = {{0}};
    char *args[] = {"sh", "-c",
                    "[ \"$RANK\" = $((LOCAL_RANK + 2)) ] && [ \"$WORLD_SIZE\" = 4 ] && [ \"$LOCAL_WORLD_SIZE\" = 2 ] && "
                    "[ \"$LOCAL_RANK\" -lt 2 ] && [ \"$MASTER_ADDR\" = 10.1.2.3 ] && [ \"$MASTER_PORT\" = 29511 ]",
                    NULL};
    trm_launch_spec s = {.nproc = 2, .nnodes = 2, .node_rank = 1, .master_addr = "10.1.2.3", .master_port = 29511};
    ck_assert_int_eq(trm_launch(&s, "/bin/sh", args, &e), 0);
    s.node_rank = 0; /* the same checks fail on host 0 */
    ck_assert_int_eq(trm_launch(&s, "/bin/sh", args, &e), 1);
    s.node_rank = 1;
    s.master_port = 0;
    ck_assert_int_eq(trm_launch(&s, "/bin/sh", args, &e), -1);
    ck_assert_msg_has(e, "a run over 2 hosts needs a MASTER_PORT given to every host's launcher");
    s.master_port = 29511;
    s.node_rank = 2;
    ck_assert_int_eq(trm_launch(&s, "/bin/sh", args, &e), -1);
    ck_assert_msg_has(e, "--node-rank 2 is outside 0..1 (--nnodes 2)");
}
END_TEST

START_TEST(test_launch_forwards_sigterm) {
    fflush(NULL);
    pid_t launcher = fork();
    if (launcher == 0) {
        int rc = launch_sh(2, "exec sleep 30", NULL);
        _exit(rc < 0 ? 255 : rc);
    }
    sleep_s(0.5); /* its handlers are in place */
    double t0 = trm_now_seconds();
    kill(launcher, SIGTERM);
    ck_assert_int_eq(child_status(launcher), 128 + SIGTERM);
    ck_assert_double_lt(trm_now_seconds() - t0, 5.0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("rendezvous");
    TCase *tc = tcase_create("rendezvous");
    tcase_add_test(tc, test_three_ranks);
    tcase_add_test(tc, test_client_before_rank0);
    tcase_add_test(tc, test_world_one_and_port_in_use);
    tcase_add_test(tc, test_peer_dies);
    tcase_add_test(tc, test_world_mismatch);
    tcase_add_test(tc, test_duplicate_rank);
    tcase_add_test(tc, test_size_mismatch);
    tcase_add_test(tc, test_connect_timeout);
    tcase_add_test(tc, test_other_address);
    tcase_add_test(tc, test_host_is_local);
    suite_add_tcase(s, tc);
    TCase *tl = tcase_create("launch");
    tcase_add_test(tl, test_launch_status);
    tcase_add_test(tl, test_launch_failure_stops_others);
    tcase_add_test(tl, test_launch_environment);
    tcase_add_test(tl, test_launch_second_host);
    tcase_add_test(tl, test_launch_forwards_sigterm);
    suite_add_tcase(s, tl);
    return trm_run_suite(s);
}
