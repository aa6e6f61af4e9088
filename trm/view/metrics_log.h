/* metrics_log.h — a run's metrics.jsonl read back as series against step, for `trm plot` and
 * report.html. Tolerates what a live or resumed run leaves: a last line still being written is
 * skipped, and records that go back in step (a run resumed from an earlier checkpoint) replace
 * the points they repeat. */
#ifndef TRM_METRICS_LOG_H
#define TRM_METRICS_LOG_H
#include <stdint.h>

#include "util/util.h"

typedef struct {
    char *key; /* as in the file: "train/lm_loss", "all/exact_accuracy", "ARC/pass@2" */
    int eval;  /* from "kind":"eval" records */
    int64_t n, cap;
    double *step, *value;
} trm_series;

typedef struct {
    char *path;  /* the metrics.jsonl read */
    char *dir;   /* the run directory */
    char *label; /* run_name of the run's config.yaml, else the directory's name */
    trm_series *series;
    int nseries;
    int64_t records;                     /* complete records read */
    int64_t last_train_step, last_eval_step; /* -1 when none */
    int partial;                         /* a last line without its newline was left out */
} trm_run_log;

/* `path` is a run directory or a metrics.jsonl file. Errors name the file and line. */
int trm_run_log_read(trm_run_log *r, const char *path, trm_err *e);
void trm_run_log_free(trm_run_log *r);
const trm_series *trm_run_log_find(const trm_run_log *r, const char *key);

#endif
