/* proc.c — child processes without a shell (see proc.h): fork and execv with pipes for stdin,
 * stdout and stderr, and a close-on-exec pipe that carries an exec failure's errno back, so
 * "cannot run" is told apart from the program's own exit status 127. */
#define _POSIX_C_SOURCE 200809L
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "signals.h"

static int is_program(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

char *trm_which(const char *name) {
    if (strchr(name, '/')) return is_program(name) ? xstrdup(name) : NULL;
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        char *cand = n ? xasprintf("%.*s/%s", (int)n, p, name) : xasprintf("./%s", name);
        if (is_program(cand)) return cand;
        free(cand);
        if (!colon) return NULL;
        p = colon + 1;
    }
}

/* A pipe whose ends do not leak into other children (dup2 clears the flag on the copies the
 * child uses). */
static int cloexec_pipe(int fd[2]) {
    if (pipe(fd) != 0) return -1;
    fcntl(fd[0], F_SETFD, FD_CLOEXEC);
    fcntl(fd[1], F_SETFD, FD_CLOEXEC);
    return 0;
}

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* The child between fork and exec: only async-signal-safe calls. Never returns. */
static void exec_child(char *const argv[], int in, int out, int err, int status, pid_t parent) {
    trm_signals_handle(SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127); /* trm ended before the signal was armed */
#else
    (void)parent;
#endif
    int null = open("/dev/null", O_RDWR);
    dup2(in >= 0 ? in : null, 0);
    dup2(out >= 0 ? out : null, 1);
    if (err >= 0) dup2(err, 2);
    execv(argv[0], argv);
    int code = errno;
    (void)!write(status, &code, sizeof code);
    _exit(127);
}

/* Reads what one of the child's pipes holds into b; closes it at end of file. */
static void drain(int *fd, trm_sbuf *b) {
    char buf[4096];
    ssize_t n = read(*fd, buf, sizeof buf);
    if (n > 0) sb_putn(b, buf, (size_t)n);
    else if (n == 0 || (errno != EINTR && errno != EAGAIN)) close_fd(fd);
}

static int wait_status(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 255; }

/* Collects the child's output until it ends, calling tick on time. */
static int supervise(pid_t pid, int fo, int fe, const trm_run_opts *o) {
    double next = trm_now_seconds() + o->tick_s;
    for (;;) {
        struct pollfd p[2];
        int np = 0, st;
        if (fo >= 0) p[np++] = (struct pollfd){.fd = fo, .events = POLLIN};
        if (fe >= 0) p[np++] = (struct pollfd){.fd = fe, .events = POLLIN};
        if (np) {
            int ms = o->tick ? (int)(o->tick_s * 1000) + 1 : -1;
            if (poll(p, (nfds_t)np, ms) > 0)
                for (int i = 0; i < np; i++) {
                    if (!p[i].revents) continue;
                    if (p[i].fd == fo) drain(&fo, o->out);
                    else drain(&fe, o->err);
                }
        } else {
            pid_t w = waitpid(pid, &st, WNOHANG);
            if (w == pid) return wait_status(st);
            if (w < 0 && errno != EINTR) return 255;
            poll(NULL, 0, 50);
        }
        if (o->tick && trm_now_seconds() >= next) {
            o->tick(o->ctx);
            next = trm_now_seconds() + o->tick_s;
        }
    }
}

int trm_run_program(char *const argv[], const trm_run_opts *o, trm_err *e) {
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, status[2] = {-1, -1};
    int bad = cloexec_pipe(status) || (o->input && cloexec_pipe(in)) || (o->out && cloexec_pipe(out)) ||
              (o->err && cloexec_pipe(err));
    /* the input goes into the pipe before the child exists: it fits, and no SIGPIPE can come */
    if (!bad && o->input) {
        size_t len = strlen(o->input), done = 0;
        while (done < len) {
            ssize_t n = write(in[1], o->input + done, len - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            done += (size_t)n;
        }
        bad = done < len;
        close_fd(&in[1]);
    }
    pid_t parent = getpid(), pid = bad ? -1 : fork();
    if (pid == 0) exec_child(argv, in[0], out[1], err[1], status[1], parent);
    int fork_err = errno;
    close_fd(&in[0]), close_fd(&in[1]), close_fd(&out[1]), close_fd(&err[1]), close_fd(&status[1]);
    if (pid < 0) {
        close_fd(&out[0]), close_fd(&err[0]), close_fd(&status[0]);
        return trm_errf(e, "cannot run %s: %s", argv[0], strerror(fork_err));
    }
    int code = 0;
    ssize_t k;
    while ((k = read(status[0], &code, sizeof code)) < 0 && errno == EINTR) {
    }
    close_fd(&status[0]);
    if (k == (ssize_t)sizeof code) { /* exec failed */
        close_fd(&out[0]), close_fd(&err[0]);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        return trm_errf(e, "cannot run %s: %s", argv[0], strerror(code));
    }
    return supervise(pid, out[0], err[0], o);
}
