/* run_config.h — the typed view of a resolved training config (cfg_pretrain.yaml + arch),
 * read once from the cfg tree with key-naming errors, so the trainer never touches YAML. */
#ifndef TRM_RUN_CONFIG_H
#define TRM_RUN_CONFIG_H
#include <stdint.h>

#include "config/config.h"
#include "model/model.h"

typedef struct {
    char **data_paths;
    int n_data_paths;
    char **data_paths_test;
    int n_data_paths_test;
    char **evaluators;      /* evaluator names, e.g. "arc@ARC" */
    int n_evaluators;
    int64_t global_batch_size, epochs, eval_interval, min_eval_interval;
    int checkpoint_every_eval;
    double lr, lr_min_ratio;
    int64_t lr_warmup_steps;
    double beta1, beta2, weight_decay, puzzle_emb_weight_decay, puzzle_emb_lr;
    int64_t seed;
    int ema;
    double ema_rate;
    int freeze_weights;
    const char *device;
    int compile;            /* TRM_COMPILE_AUTO, 0 or 1 (asked for explicitly) */
    int64_t log_interval;
    int tensorboard;        /* logger=tensorboard (the default): events.out.tfevents.* too */
    /* optional keys added on the command line (+key=v); NULL when absent */
    const char *project_name, *run_name, *load_checkpoint, *checkpoint_path, *resume;
    int eval_save_outputs;          /* true: trm's step_N_preds.npy and _q_halt.npy */
    unsigned eval_save_list;        /* the reference's list form: TRM_OUT_* bits, saved like its
                                     * torch.save of step_N_all_preds.0 */
    int64_t stop_after_steps; /* 0 = off: stop with a checkpoint once this step is done */
    int overwrite;            /* a run already in checkpoint_path is moved aside, not refused */
    const char *arch_name;
    trm_model_config arch; /* dataset-derived fields (seq_len, vocab, ids, batch) left 0 */
} trm_run_config;

/* What the reference's eval_save_outputs list can name: the batch's tensors and the outputs. */
enum {
    TRM_OUT_INPUTS = 1 << 0,
    TRM_OUT_LABELS = 1 << 1,
    TRM_OUT_PUZZLE_IDS = 1 << 2,
    TRM_OUT_LOGITS = 1 << 3,
    TRM_OUT_Q_HALT = 1 << 4,
    TRM_OUT_Q_CONTINUE = 1 << 5,
    TRM_OUT_PREDS = 1 << 6,
    TRM_NOUTS = 7
};
extern const char *const trm_output_names[TRM_NOUTS]; /* bit i's name: "inputs", ... "preds" */

/* The keys the reference's pydantic models declare float (NULL-terminated): configs give
 * `expansion: 4`, an override may give 2.5 (cfg_search.float_keys). */
extern const char *const trm_run_config_float_keys[];

int trm_run_config_read(trm_run_config *rc, const cfg_node *root, trm_err *e);
void trm_run_config_free(trm_run_config *rc);

#endif
