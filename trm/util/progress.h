/* progress.h — one progress reporter on stderr for the long-running dataset builders.
 * On a terminal the line is rewritten in place ('\r'); otherwise plain lines are printed,
 * less often, so that logs stay short. */
#ifndef TRM_PROGRESS_H
#define TRM_PROGRESS_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *what;   /* not owned; must outlive trm_progress_finish */
    int64_t total, done;
    int64_t shown;      /* done as last printed, -1 if nothing yet */
    double t0, last;    /* start time and last print time (trm_now_seconds) */
    int enabled, tty;
    size_t width;       /* length of the last '\r' line, to blank its leftovers */
} trm_progress;

void trm_progress_start(trm_progress *p, const char *what, int64_t total, int enabled);
/* Records `done`; prints "what: done/total, rate/s, ETA Ns" at most a few times per second. */
void trm_progress_update(trm_progress *p, int64_t done);
/* Prints the final count and ends the line. */
void trm_progress_finish(trm_progress *p);

#endif
