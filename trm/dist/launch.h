/* launch.h — the built-in launcher behind `trm pretrain --nproc-per-node N [--nnodes M
 * --node-rank R ...]`: this host's N copies of this binary with the torchrun environment,
 * supervised so that one failure stops them all. */
#ifndef TRM_LAUNCH_H
#define TRM_LAUNCH_H
#include <stddef.h>

#include "util/util.h"

/* Path of the running executable (Linux: /proc/self/exe; macOS: _NSGetExecutablePath; otherwise
 * argv0 resolved through PATH). */
int trm_self_exe(char *buf, size_t n, const char *argv0, trm_err *e);

/* The most ranks a run may have: dist.c reads WORLD_SIZE and RANK up to this. */
#define TRM_LAUNCH_MAX_RANKS 1000000

/* One host's part of a run: nproc workers here, of nnodes hosts in all. Worker i of host
 * node_rank gets RANK = node_rank*nproc + i, LOCAL_RANK = i, WORLD_SIZE = nnodes*nproc and
 * LOCAL_WORLD_SIZE = nproc, so every host must start the same nproc. Rank 0 (on host 0) listens
 * on master_port of every interface; the others connect to master_addr. */
typedef struct {
    int nproc, nnodes, node_rank;
    const char *master_addr; /* NULL: 127.0.0.1 (only meaningful when nnodes == 1) */
    int master_port;         /* 0: a free port of this host, which only works when nnodes == 1 */
} trm_launch_spec;

/* Starts this host's workers running `exe` with argv `args` (args[0] is the program name,
 * NULL-terminated) and, in each, the environment of this process plus RANK, LOCAL_RANK,
 * WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT as trm_launch_spec says and, unless
 * OMP_NUM_THREADS is already set, OMP_NUM_THREADS=max(1, online cpus / nproc).
 * Waits for all. If one exits non-zero or is killed by a signal, prints one line to stderr and
 * sends SIGTERM to the others, then SIGKILL to any still alive after 10 s. SIGINT/SIGTERM sent
 * to the launcher with kill(2) are forwarded to the workers (terminal-generated ones already
 * reach them: they share the launcher's process group). Workers of other hosts are not told:
 * they may wait in a collective until stopped by hand (MPI and NCCL do not reliably fail on a
 * lost peer; see README "Several hosts").
 * Returns the exit status the launcher should exit with: 0 if all succeeded, else the first
 * failing worker's exit status (128+signal for a signal). Returns -1 with e set only when it
 * could not start at all (fork/exec failure, a spec out of range); workers already started are
 * then stopped and reaped. */
int trm_launch(const trm_launch_spec *s, const char *exe, char *const args[], trm_err *e);
/* trm_launch of one host: nproc workers, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT. */
int trm_launch_local(int nproc, const char *exe, char *const args[], trm_err *e);

/* Whether `host` (a name or a numeric address, IPv6 without brackets) is an address of this
 * machine: 1 when a socket can be bound to one of its addresses, 0 when it resolves only to
 * addresses of other machines, -1 with e set when it does not resolve. A bind test: with Linux's
 * net.ipv4.ip_nonlocal_bind (or ipv6.ip_nonlocal_bind) on, every address binds and counts as local. */
int trm_host_is_local(const char *host, trm_err *e);

#endif
