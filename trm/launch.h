/* launch.h — the built-in one-host launcher behind `trm pretrain --nproc-per-node N`: N copies
 * of this binary with the torchrun environment, supervised so that one failure stops them all. */
#ifndef TRM_LAUNCH_H
#define TRM_LAUNCH_H
#include <stddef.h>

#include "util.h"

/* Path of the running executable (Linux: /proc/self/exe; macOS: _NSGetExecutablePath; otherwise
 * argv0 resolved through PATH). */
int trm_self_exe(char *buf, size_t n, const char *argv0, trm_err *e);

/* Starts nproc workers running `exe` with argv `args` (args[0] is the program name,
 * NULL-terminated) and, in each, the environment of this process plus RANK=i, LOCAL_RANK=i,
 * WORLD_SIZE=nproc, LOCAL_WORLD_SIZE=nproc, MASTER_ADDR=127.0.0.1, MASTER_PORT=<a free TCP port>
 * and, unless OMP_NUM_THREADS is already set, OMP_NUM_THREADS=max(1, online cpus / nproc).
 * Waits for all. If one exits non-zero or is killed by a signal, prints one line to stderr and
 * sends SIGTERM to the others, then SIGKILL to any still alive after 10 s. SIGINT/SIGTERM sent
 * to the launcher with kill(2) are forwarded to the workers (terminal-generated ones already
 * reach them: they share the launcher's process group).
 * Returns the exit status the launcher should exit with: 0 if all succeeded, else the first
 * failing worker's exit status (128+signal for a signal). Returns -1 with e set only when it
 * could not start at all (fork/exec failure, nproc < 1); workers already started are then
 * stopped and reaped. */
int trm_launch_local(int nproc, const char *exe, char *const args[], trm_err *e);

#endif
