/* rendezvous.c — the TCP star of a torchrun-style run (see rendezvous.h). Owns the wire format:
 * a 16-byte hello each way when a rank joins, then frames of (kind, length, payload). The kind
 * and length let a rank that made another call, or passed another size, fail with a message
 * instead of reading the wrong bytes or waiting forever. Sockets are non-blocking and every
 * wait is a poll bounded by the open's timeout, so a stuck or vanished peer ends in an error. */
#if defined(__APPLE__)
#define _DARWIN_C_SOURCE /* SO_NOSIGPIPE is hidden under strict POSIX on macOS */
#endif
#define _POSIX_C_SOURCE 200809L
#include "rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RDZV_MAGIC 0x54524d52u /* "TRMR" */
#define RDZV_VERSION 1u
#define HELLO_LEN 16
#define HEADER_LEN 12

#ifdef MSG_NOSIGNAL
#define SEND_FLAGS MSG_NOSIGNAL
#else
#define SEND_FLAGS 0 /* macOS: SO_NOSIGPIPE on the socket instead */
#endif

enum { HELLO_OK, HELLO_BAD_WORLD, HELLO_BAD_RANK, HELLO_DUP_RANK, HELLO_BAD_VERSION };
enum { FRAME_BCAST = 1, FRAME_ALLGATHER, FRAME_BARRIER, FRAME_ABORT };

static const char *frame_name(uint32_t kind) {
    switch (kind) {
    case FRAME_BCAST: return "bcast";
    case FRAME_ALLGATHER: return "allgather";
    case FRAME_BARRIER: return "barrier";
    default: return "an unknown call";
    }
}

/* ---- byte order (big-endian on the wire) --------------------------------------------- */

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (24 - 8 * i));
}

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_u64(unsigned char *p, uint64_t v) {
    put_u32(p, (uint32_t)(v >> 32));
    put_u32(p + 4, (uint32_t)v);
}

static uint64_t get_u64(const unsigned char *p) { return (uint64_t)get_u32(p) << 32 | get_u32(p + 4); }

/* ---- sockets ----------------------------------------------------------------------- */

static void sleep_seconds(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* 1: ready, 0: the deadline passed, -1: poll failed (errno). */
static int wait_fd(int fd, short events, double deadline) {
    for (;;) {
        double left = deadline - trm_now_seconds();
        if (left <= 0) return 0;
        if (left > 1e6) left = 1e6; /* keeps the millisecond count inside int */
        struct pollfd p = {.fd = fd, .events = events};
        int k = poll(&p, 1, (int)(left * 1000.0) + 1);
        if (k > 0) return 1;
        if (k < 0 && errno != EINTR) return -1;
    }
}

/* Non-blocking so that no send or recv can outlive the timeout; no Nagle delay on the small
 * request/answer frames; no SIGPIPE when a peer has gone. */
/* Non-blocking, and closed on exec: a child such as ompi-server must not inherit MASTER_PORT's
 * listening socket or a connection (it would keep the port, and hide a dead rank's EOF). */
static int setup_socket(int fd) {
    int one = 1, flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return -1;
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) return -1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
#ifdef SO_NOSIGPIPE
    (void)setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
    return 0;
}

static int closed_error(const char *who, trm_err *e) {
    return trm_errf(e, "%s closed the connection (it probably failed; see its output)", who);
}

static int stalled_error(const char *who, double timeout_s, trm_err *e) {
    return trm_errf(e, "timed out after %g s waiting for %s (it is stuck, or slower than the rendezvous timeout)",
                    timeout_s, who);
}

/* After a send/recv returned -1: waits when the socket is merely not ready, else fails. */
static int wait_or_fail(int fd, short events, double deadline, const char *who, double timeout_s, trm_err *e) {
    if (errno == EINTR) return 0;
    if (errno == EPIPE || errno == ECONNRESET) return closed_error(who, e);
    if (errno != EAGAIN && errno != EWOULDBLOCK)
        return trm_errf(e, "%s %s failed: %s", events == POLLOUT ? "sending to" : "receiving from", who,
                        strerror(errno));
    int w = wait_fd(fd, events, deadline);
    if (w == 0) return stalled_error(who, timeout_s, e);
    if (w < 0) return trm_errf(e, "poll on the socket to %s failed: %s", who, strerror(errno));
    return 0;
}

static int send_all(int fd, const void *buf, size_t n, const char *who, double timeout_s, trm_err *e) {
    const char *p = buf;
    double deadline = trm_now_seconds() + timeout_s;
    while (n > 0) {
        ssize_t k = send(fd, p, n, SEND_FLAGS);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
        } else if (wait_or_fail(fd, POLLOUT, deadline, who, timeout_s, e)) {
            return -1;
        }
    }
    return 0;
}

static int recv_all(int fd, void *buf, size_t n, const char *who, double timeout_s, trm_err *e) {
    char *p = buf;
    double deadline = trm_now_seconds() + timeout_s;
    while (n > 0) {
        ssize_t k = recv(fd, p, n, 0);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
        } else if (k == 0) {
            return closed_error(who, e);
        } else if (wait_or_fail(fd, POLLIN, deadline, who, timeout_s, e)) {
            return -1;
        }
    }
    return 0;
}

/* ---- frames ----------------------------------------------------------------------------- */

static int peer_fd(const trm_rdzv *r, int peer) { return r->rank == 0 ? r->fds[peer] : r->fds[0]; }

static int send_frame(const trm_rdzv *r, int peer, uint32_t kind, const void *data, size_t n, trm_err *e) {
    unsigned char h[HEADER_LEN];
    char who[32];
    snprintf(who, sizeof who, "rank %d", peer);
    put_u32(h, kind);
    put_u64(h + 4, n);
    int fd = peer_fd(r, peer);
    if (send_all(fd, h, sizeof h, who, r->timeout_s, e)) return -1;
    return n ? send_all(fd, data, n, who, r->timeout_s, e) : 0;
}

static int recv_abort(const trm_rdzv *r, int fd, uint64_t len, const char *who, trm_err *e) {
    char why[1024];
    size_t n = len < sizeof why - 1 ? (size_t)len : sizeof why - 1;
    if (recv_all(fd, why, n, who, r->timeout_s, e)) return -1;
    why[n] = 0;
    return trm_errf(e, "rank 0 stopped the rendezvous: %s", why);
}

static int recv_frame(const trm_rdzv *r, int peer, uint32_t kind, void *data, size_t n, trm_err *e) {
    unsigned char h[HEADER_LEN];
    char who[32];
    snprintf(who, sizeof who, "rank %d", peer);
    int fd = peer_fd(r, peer);
    if (recv_all(fd, h, sizeof h, who, r->timeout_s, e)) return -1;
    uint32_t got = get_u32(h);
    uint64_t len = get_u64(h + 4);
    if (got == FRAME_ABORT) return recv_abort(r, fd, len, who, e);
    if (got != kind)
        return trm_errf(e, "rank %d is in %s while rank %d is in %s; every rank must make the same rendezvous calls in the same order",
                        peer, frame_name(got), r->rank, frame_name(kind));
    if (len != n)
        return trm_errf(e, "rank %d sent %llu bytes in %s but rank %d expected %zu; every rank must pass the same size",
                        peer, (unsigned long long)len, frame_name(kind), r->rank, n);
    return n ? recv_all(fd, data, n, who, r->timeout_s, e) : 0;
}

/* Rank 0 failed a collective: tells the other ranks why, so they stop with that reason instead
 * of "rank 0 closed the connection". Best effort, one non-blocking send each. half_sent: the
 * peer a send to failed; it is skipped, since it may already hold half a frame (-1: none).
 * Returns -1. */
static int hub_abort(const trm_rdzv *r, int half_sent, trm_err *e) {
    unsigned char msg[HEADER_LEN + sizeof e->msg];
    const char *why = e ? e->msg : "a rendezvous call failed on rank 0";
    size_t n = strnlen(why, sizeof e->msg);
    put_u32(msg, FRAME_ABORT);
    put_u64(msg + 4, n);
    memcpy(msg + HEADER_LEN, why, n);
    for (int p = 1; p < r->world; p++)
        if (p != half_sent) (void)send(r->fds[p], msg, HEADER_LEN + n, SEND_FLAGS);
    return -1;
}

/* ---- rank 0: listen and accept ------------------------------------------------------------ */

/* errno of the failure, 0 on success. Dual-stack IPv6 when the host has it, so MASTER_ADDR may
 * name this host by an IPv4 or an IPv6 address. */
static int bind_listen(int family, int port, int backlog, int *out) {
    int fd = socket(family, SOCK_STREAM, 0);
    if (fd < 0) return errno;
    int one = 1, zero = 0;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_any;
        a->sin6_port = htons((uint16_t)port);
        len = sizeof *a;
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_ANY);
        a->sin_port = htons((uint16_t)port);
        len = sizeof *a;
    }
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, backlog) != 0 || setup_socket(fd) != 0) {
        int err = errno;
        close(fd);
        return err;
    }
    *out = fd;
    return 0;
}

/* all interfaces: IPv6 with IPv4 mapped, else IPv4 alone; errno's value or 0 */
static int listen_all(int port, int backlog, int *out) {
    int err = bind_listen(AF_INET6, port, backlog, out);
    if (err != 0 && err != EADDRINUSE) err = bind_listen(AF_INET, port, backlog, out);
    return err;
}

int trm_rdzv_port_free(int port) {
    int fd;
    if (listen_all(port, 1, &fd) != 0) return 0;
    close(fd);
    return 1;
}

static int listen_any(int port, int backlog, int *out, trm_err *e) {
    int err = listen_all(port, backlog, out);
    if (err == EADDRINUSE)
        return trm_errf(e, "MASTER_PORT %d is in use on this host: %s; pick another MASTER_PORT or stop the process holding it",
                        port, strerror(err));
    if (err != 0) return trm_errf(e, "rank 0 could not listen on MASTER_PORT %d: %s", port, strerror(err));
    return 0;
}

static int missing_error(const trm_rdzv *r, int port, int joined, trm_err *e) {
    char list[256] = "";
    size_t o = 0;
    for (int p = 1; p < r->world && o < sizeof list - 8; p++)
        if (r->fds[p] < 0) o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", o ? ", " : "", p);
    if (o >= sizeof list - 8) snprintf(list + sizeof list - 8, 8, ", ...");
    return trm_errf(e,
                    "rank 0 timed out after %g s on MASTER_PORT %d: %d of %d ranks joined (missing RANK %s); start them with "
                    "MASTER_ADDR naming this host and MASTER_PORT %d",
                    r->timeout_s, port, joined, r->world, list, port);
}

/* Checks a joining peer's hello; the status is what the peer is told. */
static int judge_hello(const trm_rdzv *r, const unsigned char *h, const char *who, int port, uint32_t *status,
                       trm_err *e) {
    uint32_t version = get_u32(h + 4), rank = get_u32(h + 8), world = get_u32(h + 12);
    *status = HELLO_OK;
    if (get_u32(h) != RDZV_MAGIC)
        return trm_errf(e, "%s connected to MASTER_PORT %d but is not a trm rank (bad handshake); is another program using this port?",
                        who, port);
    if (version != RDZV_VERSION) {
        *status = HELLO_BAD_VERSION;
        return trm_errf(e, "%s (rank %u) speaks rendezvous protocol %u, rank 0 speaks %u; run the same trm build on every rank",
                        who, rank, version, RDZV_VERSION);
    }
    if (world != (uint32_t)r->world) {
        *status = HELLO_BAD_WORLD;
        return trm_errf(e, "%s (rank %u) has WORLD_SIZE %u but rank 0 has WORLD_SIZE %d; start every rank with the same WORLD_SIZE",
                        who, rank, world, r->world);
    }
    if (rank < 1 || rank >= world) {
        *status = HELLO_BAD_RANK;
        return trm_errf(e, "%s claims RANK %u, outside 1..%d; every rank needs a distinct RANK in 0..WORLD_SIZE-1", who,
                        rank, r->world - 1);
    }
    if (r->fds[rank] >= 0) {
        *status = HELLO_DUP_RANK;
        return trm_errf(e, "two processes claim RANK %u (the second is %s); every rank needs a distinct RANK", rank, who);
    }
    return (int)rank;
}

/* The hello of a freshly accepted socket: returns the peer's rank, -1 on error, or -2 for a port
 * probe (nc -z, a TCP health check), which connects and closes without a byte: no rank, and no
 * reason to stop the run. */
static int greet_peer(const trm_rdzv *r, int fd, const char *who, int port, trm_err *e) {
    unsigned char h[HELLO_LEN], reply[HELLO_LEN];
    uint32_t status;
    if (wait_fd(fd, POLLIN, trm_now_seconds() + r->timeout_s) <= 0)
        return trm_errf(e, "%s connected to MASTER_PORT %d but sent no handshake within %g s; is another program using this port?",
                        who, port, r->timeout_s);
    ssize_t peek = recv(fd, h, 1, MSG_PEEK);
    if (peek == 0 || (peek < 0 && errno == ECONNRESET)) return -2;
    if (recv_all(fd, h, sizeof h, who, r->timeout_s, e)) return -1;
    int rank = judge_hello(r, h, who, port, &status, e);
    if (rank < 0 && get_u32(h) != RDZV_MAGIC) return -1; /* not trm: nothing it could read */
    put_u32(reply, RDZV_MAGIC);
    put_u32(reply + 4, RDZV_VERSION);
    put_u32(reply + 8, status);
    put_u32(reply + 12, (uint32_t)r->world);
    trm_err ignored;
    /* a rejected peer is told best effort; rank 0's own error is the one that matters */
    if (send_all(fd, reply, sizeof reply, who, r->timeout_s, rank < 0 ? &ignored : e)) return -1;
    return rank;
}

static void describe_peer(const struct sockaddr *sa, socklen_t len, char *who, size_t n) {
    char host[256];
    if (getnameinfo(sa, len, host, sizeof host, NULL, 0, NI_NUMERICHOST) != 0) snprintf(host, sizeof host, "?");
    int mapped = strncmp(host, "::ffff:", 7) == 0 && strchr(host, '.'); /* IPv4 on the dual-stack socket */
    snprintf(who, n, "the process at %s", host + (mapped ? 7 : 0));
}

static int accept_one(trm_rdzv *r, int port, int joined, double deadline, trm_err *e) {
    for (;;) {
        int w = wait_fd(r->listen_fd, POLLIN, deadline);
        if (w == 0) return missing_error(r, port, joined, e);
        if (w < 0) return trm_errf(e, "rank 0 waiting for ranks on MASTER_PORT %d: poll failed: %s", port, strerror(errno));
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept(r->listen_fd, (struct sockaddr *)&ss, &len);
        if (fd < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) continue;
            return trm_errf(e, "rank 0 accepting on MASTER_PORT %d failed: %s", port, strerror(errno));
        }
        char who[300];
        describe_peer((struct sockaddr *)&ss, len, who, sizeof who);
        int rank = setup_socket(fd) == 0 ? greet_peer(r, fd, who, port, e)
                                         : trm_errf(e, "rank 0 could not configure the socket of %s: %s", who, strerror(errno));
        if (rank < 0) close(fd);
        if (rank == -2) continue;
        if (rank < 0) return -1;
        r->fds[rank] = fd;
        return 0;
    }
}

static int open_hub(trm_rdzv *r, int port, trm_err *e) {
    r->fds = xmalloc((size_t)r->world * sizeof *r->fds);
    for (int p = 0; p < r->world; p++) r->fds[p] = -1;
    int backlog = r->world < SOMAXCONN ? r->world : SOMAXCONN;
    if (listen_any(port, backlog, &r->listen_fd, e) == 0) {
        double deadline = trm_now_seconds() + r->timeout_s;
        int joined = 1;
        while (joined < r->world && accept_one(r, port, joined, deadline, e) == 0) joined++;
        if (joined == r->world) { /* everyone is in: free the port for the next run */
            close(r->listen_fd);
            r->listen_fd = -1;
            return 0;
        }
    }
    trm_rdzv_close(r);
    return -1;
}

/* ---- ranks 1..world-1: connect -------------------------------------------------------------- */

/* A local connect to a closed port in the ephemeral range can, rarely, connect the socket to
 * itself (TCP simultaneous open); it would then read its own hello as rank 0's answer. */
static int self_connected(int fd) {
    struct sockaddr_storage a, b;
    socklen_t la = sizeof a, lb = sizeof b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    if (getsockname(fd, (struct sockaddr *)&a, &la) != 0 || getpeername(fd, (struct sockaddr *)&b, &lb) != 0) return 0;
    return la == lb && memcmp(&a, &b, la) == 0;
}

/* 0 when connected, else the errno of the failure. */
static int connect_fd(int fd, const struct addrinfo *ai, double deadline) {
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS && errno != EINTR) return errno;
        int w = wait_fd(fd, POLLOUT, deadline), soerr = 0;
        socklen_t len = sizeof soerr;
        if (w <= 0) return w == 0 ? ETIMEDOUT : errno;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) return errno;
        if (soerr != 0) return soerr;
    }
    return self_connected(fd) ? ECONNREFUSED : 0;
}

/* One attempt on one address: the socket, or -1 with *err set. */
static int connect_addr(const struct addrinfo *ai, double deadline, int *err) {
    int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    *err = setup_socket(fd) == 0 ? connect_fd(fd, ai, deadline) : errno;
    if (*err == 0) return fd;
    close(fd);
    return -1;
}

/* One resolve-and-try-every-address round; why gets the reason of a failure. */
static int connect_round(const char *addr, const char *service, double deadline, char *why, size_t n) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int g = getaddrinfo(addr, service, &hints, &res);
    if (g != 0) {
        snprintf(why, n, "cannot resolve the host name: %s", gai_strerror(g));
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) fd = connect_addr(ai, deadline, &err);
    if (fd < 0) snprintf(why, n, "%s", strerror(err));
    freeaddrinfo(res);
    return fd;
}

static int connect_hub(const trm_rdzv *r, const char *addr, int port, int *out, trm_err *e) {
    char service[16], why[256] = "no attempt was made";
    snprintf(service, sizeof service, "%d", port);
    double deadline = trm_now_seconds() + r->timeout_s;
    for (;;) {
        int fd = connect_round(addr, service, deadline, why, sizeof why);
        if (fd >= 0) {
            *out = fd;
            return 0;
        }
        double left = deadline - trm_now_seconds();
        if (left <= 0) break;
        sleep_seconds(left < 0.1 ? left : 0.1); /* rank 0 may not be listening yet */
    }
    return trm_errf(e,
                    "rank %d could not connect to rank 0 at %s:%d within %g s (last error: %s); check MASTER_ADDR and "
                    "MASTER_PORT, and that rank 0 is running",
                    r->rank, addr, port, r->timeout_s, why);
}

static int check_reply(const trm_rdzv *r, const unsigned char *h, const char *addr, int port, trm_err *e) {
    uint32_t status = get_u32(h + 8), world = get_u32(h + 12);
    if (get_u32(h) != RDZV_MAGIC)
        return trm_errf(e, "%s:%d answered but is not trm rank 0 (bad handshake); is another program using MASTER_PORT?",
                        addr, port);
    switch (status) {
    case HELLO_OK: return 0;
    case HELLO_BAD_WORLD:
        return trm_errf(e, "rank 0 at %s:%d has WORLD_SIZE %u but rank %d has WORLD_SIZE %d; start every rank with the same WORLD_SIZE",
                        addr, port, world, r->rank, r->world);
    case HELLO_DUP_RANK:
        return trm_errf(e, "rank 0 at %s:%d already has a process with RANK %d; every rank needs a distinct RANK", addr,
                        port, r->rank);
    case HELLO_BAD_VERSION:
        return trm_errf(e, "rank 0 at %s:%d speaks rendezvous protocol %u, rank %d speaks %u; run the same trm build on every rank",
                        addr, port, get_u32(h + 4), r->rank, RDZV_VERSION);
    default:
        return trm_errf(e, "rank 0 at %s:%d rejected RANK %d (its WORLD_SIZE is %u)", addr, port, r->rank, world);
    }
}

static int open_spoke(trm_rdzv *r, const char *addr, int port, trm_err *e) {
    if (!addr || !*addr) return trm_errf(e, "rank %d needs MASTER_ADDR (the host of rank 0)", r->rank);
    r->fds = xmalloc(sizeof *r->fds);
    r->fds[0] = -1;
    unsigned char hello[HELLO_LEN], reply[HELLO_LEN];
    put_u32(hello, RDZV_MAGIC);
    put_u32(hello + 4, RDZV_VERSION);
    put_u32(hello + 8, (uint32_t)r->rank);
    put_u32(hello + 12, (uint32_t)r->world);
    if (connect_hub(r, addr, port, &r->fds[0], e) || send_all(r->fds[0], hello, sizeof hello, "rank 0", r->timeout_s, e) ||
        recv_all(r->fds[0], reply, sizeof reply, "rank 0", r->timeout_s, e) || check_reply(r, reply, addr, port, e)) {
        trm_rdzv_close(r);
        return -1;
    }
    return 0;
}

/* ---- the interface ------------------------------------------------------------------------ */

int trm_rdzv_open(trm_rdzv *r, const char *addr, int port, int rank, int world, double timeout_s, trm_err *e) {
    memset(r, 0, sizeof *r);
    r->rank = rank;
    r->world = world;
    r->listen_fd = -1;
    r->timeout_s = timeout_s;
    if (world < 1 || rank < 0 || rank >= world)
        return trm_errf(e, "RANK %d is outside 0..WORLD_SIZE-1 (WORLD_SIZE %d)", rank, world);
    if (world == 1) return 0;
    if (port < 1 || port > 65535) return trm_errf(e, "MASTER_PORT %d is not a TCP port (1..65535)", port);
    if (!(timeout_s > 0)) return trm_errf(e, "the rendezvous timeout must be > 0 s (got %g)", timeout_s);
    return rank == 0 ? open_hub(r, port, e) : open_spoke(r, addr, port, e);
}

int trm_rdzv_bcast(trm_rdzv *r, void *buf, size_t n, trm_err *e) {
    if (r->world == 1) return 0;
    if (r->rank != 0) return recv_frame(r, 0, FRAME_BCAST, buf, n, e);
    for (int p = 1; p < r->world; p++)
        if (send_frame(r, p, FRAME_BCAST, buf, n, e)) return hub_abort(r, p, e);
    return 0;
}

/* Every rank's n bytes to rank 0, then the whole table back to everyone; a barrier is this
 * with n = 0 (no rank leaves before rank 0 has heard from all). */
static int gather_scatter(trm_rdzv *r, uint32_t kind, const void *mine, void *all, size_t n, trm_err *e) {
    if (n > SIZE_MAX / (size_t)r->world)
        return trm_errf(e, "%s of %zu bytes per rank overflows for WORLD_SIZE %d", frame_name(kind), n, r->world);
    size_t total = (size_t)r->world * n;
    if (n) memcpy((char *)all + (size_t)r->rank * n, mine, n);
    if (r->world == 1) return 0;
    if (r->rank != 0)
        return send_frame(r, 0, kind, mine, n, e) || recv_frame(r, 0, kind, all, total, e) ? -1 : 0;
    for (int p = 1; p < r->world; p++)
        if (recv_frame(r, p, kind, n ? (char *)all + (size_t)p * n : NULL, n, e)) return hub_abort(r, -1, e);
    for (int p = 1; p < r->world; p++)
        if (send_frame(r, p, kind, all, total, e)) return hub_abort(r, p, e);
    return 0;
}

int trm_rdzv_allgather(trm_rdzv *r, const void *mine, void *all, size_t n, trm_err *e) {
    return gather_scatter(r, FRAME_ALLGATHER, mine, all, n, e);
}

int trm_rdzv_barrier(trm_rdzv *r, trm_err *e) { return gather_scatter(r, FRAME_BARRIER, NULL, NULL, 0, e); }

void trm_rdzv_close(trm_rdzv *r) {
    if (!r) return;
    if (r->fds) { /* only an open that got this far owns descriptors (a zeroed struct has listen_fd 0) */
        int n = r->rank == 0 ? r->world : 1;
        for (int p = 0; p < n; p++)
            if (r->fds[p] >= 0) close(r->fds[p]);
        free(r->fds);
        if (r->listen_fd >= 0) close(r->listen_fd);
    }
    r->fds = NULL;
    r->listen_fd = -1;
}
