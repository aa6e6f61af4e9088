/* run_config.h — the typed view of a resolved training config (cfg_pretrain.yaml + arch),
 * read once from the cfg tree with key-naming errors, so the trainer never touches YAML. */
#ifndef TRM_RUN_CONFIG_H
#define TRM_RUN_CONFIG_H
#include <stdint.h>

#include "config.h"
#include "model.h"

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
    /* optional keys added on the command line (+key=v); NULL when absent */
    const char *project_name, *run_name, *load_checkpoint, *checkpoint_path, *resume;
    int eval_save_outputs;
    int64_t stop_after_steps; /* 0 = off: stop with a checkpoint once this step is done */
    const char *arch_name;
    trm_model_config arch; /* dataset-derived fields (seq_len, vocab, ids, batch) left 0 */
} trm_run_config;

int trm_run_config_read(trm_run_config *rc, const cfg_node *root, trm_err *e);
void trm_run_config_free(trm_run_config *rc);

#endif
