/* progress.c — the builders' progress line on stderr (see progress.h). Rate-limited so that
 * reporting never costs measurable time, and silent when disabled (--quiet, tests). */
#define _POSIX_C_SOURCE 200809L
#include "progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "base.h"

/* A terminal redraws cheaply; a log file gets a line per interval, so fewer of them. */
#define PROGRESS_TTY_INTERVAL 0.25
#define PROGRESS_LOG_INTERVAL 2.0

void trm_progress_start(trm_progress *p, const char *what, int64_t total, int enabled) {
    *p = (trm_progress){.what = what, .total = total, .shown = -1, .t0 = trm_now_seconds(), .enabled = enabled,
                        .tty = enabled && isatty(2)};
    p->last = p->t0;
}

static void print_line(trm_progress *p, double now, int final) {
    double dt = now - p->t0, rate = dt > 0 ? (double)p->done / dt : 0.0;
    double eta = rate > 0 && p->done < p->total ? (double)(p->total - p->done) / rate : 0.0;
    char line[512];
    int n = snprintf(line, sizeof line, "%s: %" PRId64 "/%" PRId64 ", %.0f/s, ETA %.0fs", p->what, p->done, p->total,
                     rate, eta);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    if (p->tty) {
        /* pad over the tail of a longer previous line */
        int pad = p->width > len ? (int)(p->width - len) : 0;
        fprintf(stderr, "\r%s%*s%s", line, pad, "", final ? "\n" : "");
        p->width = final ? 0 : len;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
    p->last = now;
    p->shown = p->done;
}

void trm_progress_update(trm_progress *p, int64_t done) {
    if (!p->enabled) return;
    p->done = done;
    double now = trm_now_seconds();
    if (now - p->last < (p->tty ? PROGRESS_TTY_INTERVAL : PROGRESS_LOG_INTERVAL)) return;
    print_line(p, now, 0);
}

void trm_progress_finish(trm_progress *p) {
    if (!p->enabled) return;
    /* a plain line already showing the final count needs no repeat */
    if (!p->tty && p->shown == p->done) return;
    print_line(p, trm_now_seconds(), 1);
    p->enabled = 0; /* a second finish prints nothing */
}
