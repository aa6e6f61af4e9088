/* launch.c — the launcher (see launch.h): finds this binary, forks this host's N workers with
 * the torchrun environment and supervises them. Supervision exists because a distributed run cannot
 * survive the loss of one rank: the others would wait in a collective until a timeout, so the
 * first failure stops everyone at once. */
#if defined(__APPLE__)
#define _DARWIN_C_SOURCE /* _SC_NPROCESSORS_ONLN is hidden under strict POSIX on macOS */
#endif
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* realpath (XSI) */
#include "launch.h"
#include "rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__APPLE__)
#include <mach-o/dyld.h>
#endif

#define KILL_GRACE_S 10.0 /* SIGTERM to SIGKILL: time for a worker to leave cleanly */
#define STOP_GRACE_S 60.0 /* after a requested stop, a failed worker: time for the rest to save */
#define POLL_S 0.02       /* how often the supervisor looks at its workers */

/* A signal handler can only reach the supervising loop through static storage, so this is the
 * one file-level variable of the module. > 0: a SIGINT/SIGTERM to forward to the workers;
 * < 0: a stop the workers received themselves (not forwarded); 0: nothing new. */
static volatile sig_atomic_t launch_signal;

static void on_launch_signal(int sig, siginfo_t *info, void *ctx) {
    /* A terminal's Ctrl-C already went to the whole foreground process group, workers included;
     * forwarding it would be a second SIGINT, which trm (signals.c) takes as "stop now" instead
     * of "stop after this step". Only a signal sent to the launcher alone (kill) is passed on. */
    int sent = info && (info->si_code == SI_USER || info->si_code == SI_QUEUE);
    launch_signal = sent ? sig : -sig;
}

static void install_handlers(struct sigaction old[2]) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_launch_signal;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    launch_signal = 0;
    sigaction(SIGINT, &sa, &old[0]);
    sigaction(SIGTERM, &sa, &old[1]);
}

static void restore_handlers(const struct sigaction old[2]) {
    sigaction(SIGINT, &old[0], NULL);
    sigaction(SIGTERM, &old[1], NULL);
}

static void sleep_seconds(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- the executable -------------------------------------------------------------------- */

/* 0 on success, -1 with e set. */
static int copy_real_path(char *buf, size_t n, const char *path, trm_err *e) {
    char *real = realpath(path, NULL);
    if (!real) return trm_errf(e, "cannot resolve the trm executable '%s': %s", path, strerror(errno));
    size_t len = strlen(real);
    int rc = 0;
    if (len < n)
        memcpy(buf, real, len + 1);
    else
        rc = trm_errf(e, "the path of the trm executable (%s) is longer than %zu bytes", real, n ? n - 1 : 0);
    free(real);
    return rc;
}

static int exe_from_argv0(char *buf, size_t n, const char *argv0, trm_err *e) {
    if (!argv0 || !*argv0) return trm_errf(e, "cannot find the trm executable: no program name to look up");
    if (strchr(argv0, '/')) return copy_real_path(buf, n, argv0, e);
    const char *path = getenv("PATH");
    for (const char *p = path ? path : "/usr/bin:/bin"; p;) {
        const char *end = strchr(p, ':');
        int len = end ? (int)(end - p) : (int)strlen(p);
        char *cand = len ? xasprintf("%.*s/%s", len, p, argv0) : xasprintf("./%s", argv0); /* "" is the cwd */
        int found = access(cand, X_OK) == 0 && !trm_is_dir(cand);
        int rc = found ? copy_real_path(buf, n, cand, e) : 0;
        free(cand);
        if (found) return rc;
        p = end ? end + 1 : NULL;
    }
    return trm_errf(e, "cannot find the trm executable: '%s' is not in PATH; run trm by its path", argv0);
}

int trm_self_exe(char *buf, size_t n, const char *argv0, trm_err *e) {
#if defined(__linux__)
    ssize_t k = readlink("/proc/self/exe", buf, n);
    if (k > 0 && (size_t)k < n) {
        buf[k] = 0;
        return 0;
    }
#elif defined(__APPLE__)
    uint32_t size = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    if (_NSGetExecutablePath(buf, &size) == 0) return 0;
#endif
    return exe_from_argv0(buf, n, argv0, e); /* no /proc (or too long for buf): the portable way */
}

/* ---- starting workers ------------------------------------------------------------------------ */

typedef struct {
    const char *exe;
    char *const *args;
    int nproc, rank_base, world; /* worker i is rank rank_base + i of world */
    const char *addr;
    int port;
    int omp_threads; /* 0: OMP_NUM_THREADS was set by the user; leave it */
} launch_plan;

/* A port for rank 0's rendezvous when none was given. Picked at random below the usual ephemeral
 * ranges (Linux 32768–60999, macOS 49152–65535): a port the kernel hands out by bind(0) comes
 * from those ranges, where any process's outgoing connections can take it between this probe and
 * rank 0's listen (seen as "MASTER_PORT … is in use" with two launchers starting at once). The
 * probe is rank 0's own listen (trm_rdzv_port_free). */
static int free_port(int *port, trm_err *e) {
    uint32_t s = (uint32_t)getpid() * 2654435761u ^ (uint32_t)time(NULL) ^ ((uint32_t)clock() << 7);
    for (int i = 0; i < 64; i++) {
        s ^= s << 13, s ^= s >> 17, s ^= s << 5;
        int p = 20000 + (int)(s % 12000u);
        if (trm_rdzv_port_free(p)) {
            *port = p;
            return 0;
        }
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0); /* a crowded range: whatever the kernel gives */
    if (fd < 0) return trm_errf(e, "could not pick a MASTER_PORT: socket failed: %s", strerror(errno));
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0;
    int err = errno;
    close(fd);
    if (!ok) return trm_errf(e, "could not pick a free MASTER_PORT on 127.0.0.1: %s", strerror(err));
    *port = ntohs(a.sin_port);
    return 0;
}

static int omp_threads_for(int nproc) {
    if (getenv("OMP_NUM_THREADS")) return 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long t = cpus > 0 ? cpus / nproc : 1;
    return t < 1 ? 1 : (int)t;
}

static int setenv_int(const char *name, int v) {
    char s[16];
    snprintf(s, sizeof s, "%d", v);
    return setenv(name, s, 1);
}

/* A launcher started inside an MPI job (`mpirun -np 1 trm pretrain --nproc-per-node 2`) must not
 * hand that job's identity to its workers: they would each take it for their own and run alone. */
static void drop_mpi_environment(void) {
    extern char **environ;
    static const char *const prefixes[] = {"OMPI_", "PMIX_", "PMI_"};
    for (int again = 1; again;) {
        again = 0;
        for (char **v = environ; v && *v && !again; v++)
            for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
                size_t n = strlen(prefixes[i]);
                const char *eq = strchr(*v, '=');
                if (strncmp(*v, prefixes[i], n) || !eq || (size_t)(eq - *v) >= 256) continue;
                char name[256];
                memcpy(name, *v, (size_t)(eq - *v));
                name[eq - *v] = 0;
                unsetenv(name); /* environ changed: walk it again */
                again = 1;
                break;
            }
    }
}

/* The child between fork and exec; never returns. An exec failure's errno goes up errfd. */
static void exec_worker(const launch_plan *p, int local, const sigset_t *mask, int errfd) {
    trm_signals_handle(SIG_DFL);
    sigprocmask(SIG_SETMASK, mask, NULL); /* a stop that came during the fork now ends the child */
    drop_mpi_environment();
    int ok = setenv_int("RANK", p->rank_base + local) == 0 && setenv_int("LOCAL_RANK", local) == 0 &&
             setenv_int("WORLD_SIZE", p->world) == 0 && setenv_int("LOCAL_WORLD_SIZE", p->nproc) == 0 &&
             setenv("MASTER_ADDR", p->addr, 1) == 0 && setenv_int("MASTER_PORT", p->port) == 0 &&
             (p->omp_threads == 0 || setenv_int("OMP_NUM_THREADS", p->omp_threads) == 0);
    if (ok) execv(p->exe, p->args);
    int err = errno;
    (void)!write(errfd, &err, sizeof err);
    _exit(127);
}

/* Returns the worker's pid, or -1 with e set. Whether exec worked comes back through a
 * close-on-exec pipe: end of file means the new program is running. SIGINT/SIGTERM are held
 * during the fork so that the child never runs the launcher's handler. */
static pid_t spawn_worker(const launch_plan *p, int local, trm_err *e) {
    int rank = p->rank_base + local, fd[2];
    if (pipe(fd) != 0) return trm_errf(e, "could not start worker rank %d: pipe failed: %s", rank, strerror(errno));
    fcntl(fd[0], F_SETFD, FD_CLOEXEC);
    fcntl(fd[1], F_SETFD, FD_CLOEXEC);
    sigset_t stops, old;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    sigprocmask(SIG_BLOCK, &stops, &old);
    pid_t pid = fork();
    if (pid == 0) exec_worker(p, local, &old, fd[1]);
    int fork_err = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(fd[1]);
    if (pid < 0) {
        close(fd[0]);
        return trm_errf(e, "could not start worker rank %d: fork failed: %s", rank, strerror(fork_err));
    }
    int err = 0;
    ssize_t k;
    while ((k = read(fd[0], &err, sizeof err)) < 0 && errno == EINTR) {
    }
    close(fd[0]);
    if (k != (ssize_t)sizeof err) return pid;
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    return trm_errf(e, "could not start worker rank %d: %s: %s", rank, p->exe, strerror(err));
}

/* ---- supervising ----------------------------------------------------------------------------- */

typedef struct {
    pid_t *pids; /* 0 once reaped; pids[i] runs rank rank_base + i */
    int n, alive, rank_base;
    int status;     /* the first failure's exit status, 0 while none */
    int requested;  /* a stop was asked for by a signal: failures are expected, say nothing */
    double kill_at; /* when survivors get SIGKILL; 0: not stopping them */
} crew;

static void signal_alive(const crew *c, int sig) {
    for (int i = 0; i < c->n; i++)
        if (c->pids[i] > 0) kill(c->pids[i], sig);
}

static void stop_crew(crew *c) {
    if (c->kill_at > 0) return;
    signal_alive(c, SIGTERM);
    c->kill_at = trm_now_seconds() + KILL_GRACE_S;
}

static int exit_status(int st) {
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

static void announce_failure(const crew *c, int rank, int st) {
    const char *tail = c->n > 1 ? "; stopping the others" : "";
    if (WIFSIGNALED(st))
        fprintf(stderr, "trm: worker rank %d was killed by signal %d%s\n", rank, WTERMSIG(st), tail);
    else
        fprintf(stderr, "trm: worker rank %d exited with status %d%s\n", rank, WEXITSTATUS(st), tail);
}

static void reap(crew *c) {
    for (int i = 0; i < c->n; i++) {
        int st;
        pid_t k = c->pids[i] > 0 ? waitpid(c->pids[i], &st, WNOHANG) : 0;
        if (k == 0 || (k < 0 && errno == EINTR)) continue;
        c->pids[i] = 0;
        c->alive--;
        if (k < 0 || exit_status(st) == 0 || c->status != 0) continue; /* k < 0: reaped elsewhere */
        c->status = exit_status(st);
        if (c->requested) { /* they are all stopping already; a second SIGTERM would be a hard stop */
            /* but one that died before it could stop cleanly may leave the others waiting for it in
             * a collective: give them time to save, then end them */
            if (c->kill_at == 0 && c->alive > 0) c->kill_at = trm_now_seconds() + STOP_GRACE_S;
            continue;
        }
        announce_failure(c, c->rank_base + i, st);
        stop_crew(c);
    }
}

static int supervise(crew *c) {
    while (c->alive > 0) {
        int sig = launch_signal;
        if (sig != 0) {
            launch_signal = 0;
            c->requested = 1;
            if (sig > 0) signal_alive(c, sig);
        }
        reap(c);
        if (c->kill_at > 0 && trm_now_seconds() >= c->kill_at) {
            signal_alive(c, SIGKILL);
            c->kill_at = trm_now_seconds() + KILL_GRACE_S;
        }
        if (c->alive > 0) sleep_seconds(POLL_S);
    }
    return c->status;
}

/* The spec's numbers as a plan; -1 with e set when they cannot make a run. */
static int plan_for(const trm_launch_spec *s, launch_plan *p, trm_err *e) {
    if (s->nproc < 1) return trm_errf(e, "--nproc-per-node must be >= 1 (got %d)", s->nproc);
    if (s->nnodes < 1) return trm_errf(e, "--nnodes must be >= 1 (got %d)", s->nnodes);
    if (s->node_rank < 0 || s->node_rank >= s->nnodes)
        return trm_errf(e, "--node-rank %d is outside 0..%d (--nnodes %d)", s->node_rank, s->nnodes - 1, s->nnodes);
    if ((long long)s->nnodes * s->nproc > TRM_LAUNCH_MAX_RANKS)
        return trm_errf(e, "%d hosts x %d workers is more ranks than trm supports (%d)", s->nnodes, s->nproc,
                        TRM_LAUNCH_MAX_RANKS);
    if (s->master_port < 0 || s->master_port > 65535)
        return trm_errf(e, "MASTER_PORT %d is not a TCP port (1..65535)", s->master_port);
    /* a port picked here is unknown to the other hosts' launchers */
    if (s->nnodes > 1 && s->master_port == 0)
        return trm_errf(e, "a run over %d hosts needs a MASTER_PORT given to every host's launcher", s->nnodes);
    p->nproc = s->nproc;
    p->rank_base = s->node_rank * s->nproc;
    p->world = s->nnodes * s->nproc;
    p->addr = s->master_addr && *s->master_addr ? s->master_addr : "127.0.0.1";
    p->port = s->master_port;
    p->omp_threads = omp_threads_for(s->nproc);
    return s->master_port == 0 ? free_port(&p->port, e) : 0;
}

int trm_launch(const trm_launch_spec *s, const char *exe, char *const args[], trm_err *e) {
    launch_plan p = {.exe = exe, .args = args};
    if (plan_for(s, &p, e)) return -1;
    if (!exe || !args || !args[0]) return trm_errf(e, "launch: no program to start");
    crew c = {.pids = xcalloc((size_t)p.nproc, sizeof(pid_t)), .n = p.nproc, .rank_base = p.rank_base};
    struct sigaction old[2];
    install_handlers(old);
    fflush(NULL); /* or buffered output would be written again by every child */
    int rc = 0;
    for (int i = 0; i < p.nproc && rc == 0; i++) {
        pid_t pid = spawn_worker(&p, i, e);
        if (pid < 0) {
            rc = -1;
        } else {
            c.pids[i] = pid;
            c.alive++;
        }
    }
    if (rc != 0) { /* workers already started would wait for the missing one until their timeout */
        c.requested = 1;
        stop_crew(&c);
    }
    int status = supervise(&c);
    restore_handlers(old);
    free(c.pids);
    return rc != 0 ? -1 : status;
}

int trm_launch_local(int nproc, const char *exe, char *const args[], trm_err *e) {
    trm_launch_spec s = {.nproc = nproc, .nnodes = 1};
    return trm_launch(&s, exe, args, e);
}

/* ---- addresses ------------------------------------------------------------------------------- */

int trm_host_is_local(const char *host, trm_err *e) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(host, NULL, &hints, &res);
    if (g != 0) return trm_errf(e, "cannot resolve '%s': %s", host, gai_strerror(g));
    int local = 0;
    /* bind succeeds only for an address of one of this machine's interfaces (on Linux also for
     * all of 127/8), unless Linux's ip_nonlocal_bind is on: then any address binds, and every
     * host passes as local; the port stays 0, so nothing is held */
    for (struct addrinfo *ai = res; ai && !local; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd < 0) continue;
        local = bind(fd, ai->ai_addr, ai->ai_addrlen) == 0;
        close(fd);
    }
    freeaddrinfo(res);
    return local;
}
