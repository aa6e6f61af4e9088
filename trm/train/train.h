/* train.h — `trm pretrain` and `trm generate` behind the command line: the training loop
 * (chunks of eval_interval epochs, evaluation, checkpoints, metrics.jsonl, progress, signals,
 * resume) and evaluation of a checkpoint. */
#ifndef TRM_TRAIN_H
#define TRM_TRAIN_H
#include "config/config.h"
#include "data/data.h"
#include "compile.h"
#include "model/model.h"
#include "run_config.h"

/* Runs a training given the resolved config tree (owned by the caller; run name, project and
 * checkpoint_path are filled in). resume_path: checkpoint to continue from, or NULL.
 * Returns the process exit status (0, 1 error, 130/143 stopped by a signal). */
int trm_pretrain_main(cfg_node *cfg, const char *resume_path);

/* Per-set evaluation results: sums of the final ACT step's metrics. */
typedef struct {
    int nsets;
    char **names;
    double (*sums)[TRM_NMETRICS];
} trm_eval_result;

typedef struct {
    int32_t *preds;   /* n_examples × S, when collecting */
    float *q_halt;    /* n_examples */
    int64_t n;
} trm_eval_outputs;

/* Receives every evaluation batch after its final ACT step: the batch (host), its number of
 * real rows (the rest is padding), and host copies of the predictions (B×S) and q logits
 * (B×2: q_halt, q_continue), and with want_logits the logits (B×T×V, puzzle positions
 * first; one process only), else NULL. Used to save outputs and to feed evaluators such as
 * ARC's. */
typedef struct {
    int (*batch)(void *ctx, const trm_batch *b, int64_t real, const int32_t *preds, const float *q,
                 const float *logits, trm_err *e);
    void *ctx;
    int want_logits;
} trm_eval_sink;

/* A sink that appends predictions and q_halt to `o`. */
trm_eval_sink trm_eval_collect(trm_eval_outputs *o);

/* The reference's eval_save_outputs: every row of every test batch (padding included, as the
 * reference concatenates its batches), the chosen tensors in the reference's dtypes. */
typedef struct trm_ref_outputs trm_ref_outputs;
trm_ref_outputs *trm_ref_outputs_new(unsigned which, const trm_model *m);
trm_eval_sink trm_ref_outputs_sink(trm_ref_outputs *o);
/* Writes them as the reference's torch.save of a dict (step_N_all_preds.0) and frees o. */
int trm_ref_outputs_save(trm_ref_outputs *o, const char *path, trm_err *e);
void trm_ref_outputs_free(trm_ref_outputs *o);

/* Told after every evaluation batch: batches done and in all (over every set), and the set. */
typedef struct {
    void (*fn)(void *ctx, int64_t done, int64_t total, const char *set);
    void *ctx;
} trm_eval_progress;

struct trm_dist;
/* Evaluates `weights` (NULL = m->w) on every set of `d` through `plan` (trm_plan_init on m);
 * the training carry is preserved. Distributed (m->world > 1): every rank calls it, sinks run
 * on rank 0 with the whole batch, the sums are reduced over `dist`. progress may be NULL. */
int trm_evaluate(trm_model *m, trm_plan *plan, const trm_dataset *d, int64_t global_batch_size, const float *weights,
                 trm_eval_result *res, const trm_eval_sink *sinks, int nsinks, struct trm_dist *dist,
                 const trm_eval_progress *progress, trm_err *e);
void trm_eval_result_free(trm_eval_result *r);
/* Predictions (n × S int32) to `path` and the halting logits to <path without .npy>_q_halt.npy. */
int trm_save_eval_outputs(const char *path, const trm_eval_outputs *o, int S, trm_err *e);
/* "<set>/<metric>" value: losses and the rest divided by count, as the reference. */
double trm_eval_metric(const trm_eval_result *r, int set, int k);
extern const char *const trm_metric_names[TRM_NMETRICS];

/* Fills project_name, run_name and checkpoint_path when absent (as the reference: project
 * from the first data path, run name from the arch class and a random two-word slug). */
void trm_fill_run_names(cfg_node *cfg, const trm_run_config *rc);

/* Evaluation data must fit a model built for `model`: same seq_len and vocab_size, puzzle
 * ids within its table. `what` names the data in the error. */
int trm_dataset_check_compatible(const trm_dataset_meta *data, const trm_dataset_meta *model, const char *what,
                                 trm_err *e);

/* Model config from the run config + dataset metadata (+ local batch). */
void trm_model_config_for(trm_model_config *mc, const trm_run_config *rc, const trm_dataset_meta *meta,
                          int local_batch);

/* The rest of the face of train/: the evaluators a run feeds. */
#include "evaluators.h"

#endif
