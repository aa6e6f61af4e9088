/* report.h — the run directory's report.html: one self-contained page (inline SVG and CSS, no
 * scripts, nothing fetched from the network) with the run's state, device and speed, the
 * latest metrics, the learning curves (plot.h, from metrics.jsonl), a few test puzzles drawn
 * as grids for Sudoku, Maze and ARC (input, prediction, label, wrong cells marked) and the
 * resolved config. The trainer rewrites it at the start, after each evaluation and at the end;
 * while the run trains the page reloads itself every 30 s. */
#ifndef TRM_REPORT_H
#define TRM_REPORT_H
#include <stdint.h>

#include "metrics_log.h"

typedef enum { TRM_GRID_NONE, TRM_GRID_SUDOKU, TRM_GRID_MAZE, TRM_GRID_ARC } trm_grid_kind;

/* Which puzzle a dataset holds, from its sequence length and vocabulary (SPEC §7): Sudoku of
 * side n (n a square, vocabulary n+2), Maze (vocabulary 6, at least 5x5), ARC (30x30,
 * vocabulary 12); anything else is not drawn. */
trm_grid_kind trm_grid_kind_for(int64_t seq_len, int64_t vocab_size);

#define TRM_REPORT_MAX_PUZZLES 8

/* A few test examples of the first test set with the model's predictions, picked evenly
 * spread over the set so that they differ; fed by an evaluation sink (train/evaluators.h). */
typedef struct {
    trm_grid_kind kind;
    int S, nwant, n;
    int64_t want[TRM_REPORT_MAX_PUZZLES], index[TRM_REPORT_MAX_PUZZLES];
    int64_t seen; /* examples of the first set passed so far */
    int32_t *inputs, *labels, *preds; /* n × S; labels < 0 where the dataset ignores them */
    char set[64];
} trm_puzzle_samples;

/* Plans the picks for a test set of n_examples (none for TRM_GRID_NONE). */
void trm_puzzle_samples_init(trm_puzzle_samples *s, trm_grid_kind kind, int64_t seq_len, int64_t n_examples,
                             const char *set);
/* Empties the picks before the next evaluation. */
void trm_puzzle_samples_reset(trm_puzzle_samples *s);
void trm_puzzle_samples_free(trm_puzzle_samples *s);

typedef struct {
    const char *run_dir;          /* report.html and metrics.jsonl live here */
    const char *run_name, *config_yaml;
    const char *state;            /* "training", "finished", "stopped at step 300 (SIGINT)", ... */
    int live;                     /* still running: the page reloads itself */
    int64_t step, total_steps, global_batch_size;
    const char *device;           /* what was chosen and why */
    int compile;                  /* the compile stage is on */
    int world;                    /* processes */
    double elapsed_s;             /* since this process started training */
    double steps_per_s;           /* training only (evaluations left out); <= 0: not yet */
    double last_eval_s;           /* how long the last evaluation took; <= 0: none yet */
    const trm_puzzle_samples *puzzles; /* may be NULL or empty */
    int64_t puzzles_step;         /* the step whose evaluation gave them */
} trm_report;

/* The page as text (free() it); without `log` (metrics.jsonl could not be read) the page says
 * why in place of the curves: `log_error`. */
char *trm_report_html(const trm_report *r, const trm_run_log *log, const char *log_error);
/* Reads run_dir/metrics.jsonl and writes run_dir/report.html atomically (a browser reloading
 * it never sees half a page). */
int trm_report_write(const trm_report *r, trm_err *e);

#endif
