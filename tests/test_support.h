/* test_support.h — helpers several suites share: a splitmix64 stream for random test inputs,
 * a free local TCP port for rendezvous tests, and probing a backend's devices in a child process (a GPU runtime started in the test
 * process would not survive the fork Check runs each test in). */
#ifndef TRM_TEST_SUPPORT_H
#define TRM_TEST_SUPPORT_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"

typedef struct {
    uint64_t s;
} tr_rng;

/* The element types of an all-fp32 GEMM (activations fp32). */
#define TR_F32x3 ((trm_gemm_dt){TRM_F32, TRM_F32, TRM_F32})

static inline double tr_uniform(tr_rng *r) { /* splitmix64 → [0, 1) */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* n floats uniform in [lo, hi) (caller frees). */
static inline float *frand(tr_rng *r, size_t n, double lo, double hi) {
    float *x = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * tr_uniform(r));
    return x;
}

/* The backend's device count, asked in a child process; desc gets its one-line summary.
 * Returns -1 if the probe itself failed (crashed, or the pipe broke). */
static inline int probe_in_child(const trm_backend_entry *en, char *desc, size_t len) {
    struct {
        int n;
        char desc[256];
    } msg = {0, ""};
    int fd[2];
    fflush(NULL);
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        msg.n = en->probe(msg.desc, sizeof msg.desc);
        _exit(write(fd[1], &msg, sizeof msg) == (ssize_t)sizeof msg ? 0 : 1);
    }
    close(fd[1]);
    size_t got = 0;
    while (pid > 0 && got < sizeof msg) {
        ssize_t k = read(fd[0], (char *)&msg + got, sizeof msg - got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd[0]);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    if (pid <= 0 || got != sizeof msg || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    msg.desc[sizeof msg.desc - 1] = 0;
    snprintf(desc, len, "%s", msg.desc);
    return msg.n > 0 ? msg.n : 0;
}

/* For a suite that needs backend `name`: 0 when it has a device (desc gets its summary);
 * otherwise the exit code main should return — 77 (ctest: skipped) when the backend is not
 * compiled in or sees no device, 1 when probing it failed — after one line saying so. */
static inline int device_gate(const char *suite, const char *name, char *desc, size_t len) {
    const trm_backend_entry *en = trm_backend_find(name);
    int n = en ? probe_in_child(en, desc, len) : 0;
    if (n < 0) { /* a crashing probe is a bug, not a missing device */
        printf("%s: probing %s failed\n", suite, name);
        return 1;
    }
    if (n == 0) {
        printf("%s: no %s device, skipped\n", suite, name);
        return 77;
    }
    return 0;
}

/* A local TCP port nobody listens on (it was free a moment ago), or -1. hold != NULL: keep it
 * bound and listening on all interfaces, its socket in *hold (a port that is in use). */
static inline int tr_local_port(int *hold) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(hold ? INADDR_ANY : INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0 ||
        (hold && listen(fd, 4) != 0)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    if (hold)
        *hold = fd;
    else
        close(fd);
    return ntohs(a.sin_port);
}

#endif
