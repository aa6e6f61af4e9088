/* proc.h — running another program as a child process, without a shell: found on PATH, given
 * a short text on its stdin, its stdout and stderr collected, a callback while it runs. For
 * the few places where trm hands work to a system tool (curl, for downloads over TLS) instead
 * of linking a library into the static binary. */
#ifndef TRM_PROC_H
#define TRM_PROC_H

#include "base.h"
#include "strbuf.h"

/* The path of the executable `name` on PATH (NULL when there is none); free it. A name with
 * a '/' is taken as it is when it is executable. */
char *trm_which(const char *name);

typedef struct {
    const char *input;        /* written to its stdin (NULL: an empty stdin); a short text,
                               * under the pipe's capacity (64 KiB on Linux) */
    trm_sbuf *out;            /* its stdout is collected here (NULL: discarded) */
    trm_sbuf *err;            /* its stderr is collected here (NULL: it shares trm's) */
    void (*tick)(void *ctx);  /* called about every tick_s seconds while it runs (may be NULL) */
    void *ctx;
    double tick_s;
} trm_run_opts;

/* Runs argv (argv[0] a path, argv NULL-terminated) to its end and returns its exit status:
 * 0..255, or 128+N when signal N ended it. -1 with e set when it could not be started. The
 * child ends with trm (Linux: a parent-death signal), so a killed trm leaves no download
 * running on behind it. */
int trm_run_program(char *const argv[], const trm_run_opts *o, trm_err *e);

#endif
