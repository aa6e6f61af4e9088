/* plot.h — learning curves of one or more runs (their metrics.jsonl, see metrics_log.h):
 * lm_loss, accuracy, exact accuracy, q_halt accuracy, mean ACT steps and learning rate against
 * step, train and eval overlaid, ARC pass@K when a run has it; one colour per run and a legend.
 * The same figure is written as SVG text or as a PNG (drawn on canvas.h, encoded by png.h). */
#ifndef TRM_PLOT_H
#define TRM_PLOT_H
#include <stddef.h>

#include "metrics_log.h"

typedef struct {
    int width;         /* pixels; 0: 1200 */
    const char *title; /* NULL: "training curves: <run labels>" */
} trm_plot_opts;

/* An <svg> element (no XML declaration, so it can also sit inside HTML); free() it. */
char *trm_plot_svg(const trm_run_log *runs, int nruns, const trm_plot_opts *o);
int trm_plot_png(const trm_run_log *runs, int nruns, const trm_plot_opts *o, unsigned char **png, size_t *len,
                 trm_err *e);
/* Writes `path` as SVG or PNG, chosen by its extension (.svg, .png). */
int trm_plot_write(const char *path, const trm_run_log *runs, int nruns, const trm_plot_opts *o, trm_err *e);

/* Axis ticks, exposed for tests: up to `max` values inside [lo, hi] at 1-2-5 steps (linear)
 * or at powers of ten and their 2 and 5 multiples (log, lo > 0). Returns the count. */
int trm_plot_ticks(double lo, double hi, int log_scale, double *ticks, int max);
/* A short tick label: "0.25", "0.0008", "1e-05", "1.5k" (si: thousands as k, millions as M). */
void trm_plot_tick_label(double v, int si, char *buf, size_t n);

#endif
