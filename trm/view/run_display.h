/* run_display.h — what `trm pretrain` shows while it runs. On a terminal: one status line
 * rewritten in place about once a second (step, bar, steps/s, examples/s, ETA, the last
 * losses; the evaluation's progress while it runs), cut to the terminal's width so that it
 * never wraps. Elsewhere (a log file, a pipe): plain lines only, the trainer's per-log_interval
 * records and, during a long evaluation, a progress line now and then. */
#ifndef TRM_RUN_DISPLAY_H
#define TRM_RUN_DISPLAY_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What the training status line may show; fields without a value are left out. */
typedef struct {
    int64_t step, total_steps;
    double steps_per_s, examples_per_s; /* <= 0: not measured yet */
    double eta_s;                        /* < 0: unknown */
    int have_metrics;                    /* the train metrics of the last log point: */
    double lm_loss, q_halt_loss, accuracy, exact_accuracy, act_steps, lr;
} trm_train_status;

/* The status line for a terminal `width` columns wide: at most width-1 characters (the last
 * column would wrap on some terminals); fields are dropped from the least useful until it
 * fits, and the bar takes the room left. Returns the length. */
size_t trm_train_status_format(const trm_train_status *s, int width, char *out, size_t n);
/* "eval step 250 [all] 12/40 [####......] 30% ETA 3s" (step < 0: "eval [all] ..."), fitted
 * the same way. */
size_t trm_eval_status_format(int64_t step, const char *set, int64_t done, int64_t total, double eta_s, int width,
                              char *out, size_t n);
/* "42s", "5m12s", "3h05m", "2d03h". */
void trm_format_duration(double s, char *out, size_t n);

typedef struct {
    FILE *out;
    int enabled, tty;
    double interval;       /* seconds between redraws on a terminal: 1, or TRM_PROGRESS_INTERVAL */
    double plain_interval; /* seconds between progress lines elsewhere */
    double last;           /* when the last progress was shown */
    size_t shown;          /* length of the live line on screen; 0 when there is none */
} trm_display;

void trm_display_init(trm_display *d, FILE *out, int enabled, int tty);
/* Whether a progress update would be shown now (cheap: call it every step). */
int trm_display_due(const trm_display *d);
/* Shows a progress line: rewritten in place on a terminal; elsewhere printed as a line only
 * when `plain` (and at most every plain_interval). Call when trm_display_due says so. */
void trm_display_progress(trm_display *d, const char *line, int plain);
/* Takes the live line off the screen before a permanent line is printed; on a terminal the
 * next progress update is then due at once. */
void trm_display_clear(trm_display *d);
/* Columns available for the status line. */
int trm_display_width(const trm_display *d);

/* The width of the lines a run prints (what a user reads in a terminal): 80 columns. */
#define TRM_LINE_WIDTH 80
/* head, then the fields ("lm_loss 1.2345": never split), two spaces apart, wrapped to `width`
 * columns; continuation lines start with two spaces. */
void trm_print_fields(FILE *f, int width, const char *head, const char *const *fields, int n);
/* Prose wrapped at spaces to `width` columns; continuation lines start with two spaces. */
void trm_print_wrapped(FILE *f, int width, const char *text);
/* The same with the text's own leading spaces kept and continuation lines indented by
 * `cont` spaces. */
void trm_print_wrapped_indent(FILE *f, int width, int cont, const char *text);

#endif
