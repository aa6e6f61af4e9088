/* evaluators.h — the config's `evaluators` list (the reference's `arc@ARC`) turned into
 * objects fed by every evaluation batch, reporting extra metrics ("ARC/pass@1", …) and
 * writing their files (submission.json) after each evaluation. */
#ifndef TRM_EVALUATORS_H
#define TRM_EVALUATORS_H
#include "train.h"
#include "view/view.h"

#define TRM_EVAL_MAX_METRICS 32

typedef struct trm_evaluators trm_evaluators;

typedef struct {
    int n;
    char names[TRM_EVAL_MAX_METRICS][48];
    double values[TRM_EVAL_MAX_METRICS];
} trm_eval_metrics;

/* Opens each named evaluator for the dataset in data_dir (unknown names and missing files
 * are errors). *out stays NULL when the list is empty. */
int trm_evaluators_open(trm_evaluators **out, char *const *names, int n, const char *data_dir, trm_err *e);
void trm_evaluators_free(trm_evaluators *ev);
trm_eval_sink trm_evaluators_sink(trm_evaluators *ev);
/* A sink that keeps the puzzles report.html draws (view/report.h) from the first test set. */
trm_eval_sink trm_puzzle_samples_sink(trm_puzzle_samples *s);
/* Computes the metrics; writes each evaluator's files under save_dir/evaluator_<NAME>_<tag>
 * when save_dir is not NULL (e.g. tag "step_1000"). */
int trm_evaluators_finish(trm_evaluators *ev, const char *save_dir, const char *tag, trm_eval_metrics *m,
                          trm_err *e);

#endif
