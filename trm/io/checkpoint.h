/* checkpoint.h — trm checkpoints as safetensors: fp32 master weights under the reference's
 * state-dict names (EMA weights there when EMA is on, the raw ones under "raw."), optimiser
 * moments, puzzle embeddings, ACT carry, and the step/sampler/config in the metadata, so a
 * run resumes exactly and any device can load what another wrote. */
#ifndef TRM_CHECKPOINT_H
#define TRM_CHECKPOINT_H
#include <stdint.h>

#include "data/data.h"
#include "model/model.h"
#include "safetensors.h"
#include "util/util.h"

typedef struct {
    int64_t step;             /* optimizer updates done */
    int64_t total_steps;
    trm_sampler_state sampler;
    int has_sampler;
    int world_size;
    const trm_carry_host *carry; /* save: the global batch's carry (trm_model_carry_to_host);
                                  * NULL: taken here, from a one-process model */
} trm_ckpt_state;

int trm_checkpoint_save(const char *path, const trm_model *m, const char *config_yaml,
                        const trm_ckpt_state *st, trm_err *e);
/* Weights only (format trm-weights-1: weights, H_init/L_init, puzzle table, config and the
 * model's data sizes): what `trm convert` makes of the reference's files. Loads like a
 * checkpoint for load_checkpoint= and `trm generate`; resume= refuses it. source: where the
 * weights came from (metadata), or NULL. */
int trm_checkpoint_save_weights(const char *path, const trm_model *m, const char *config_yaml, const char *source,
                                trm_err *e);
/* Inference/fine-tune weights from a trm checkpoint, a safetensors file or a torch.save file
 * (`inner.*`, the reference's names, under any of the reference's prefixes; bf16/fp16 tensors
 * become fp32). Like load_state_dict(strict=True), a model tensor of the file that this model
 * lacks is an error. A puzzle table of another shape is reset to the mean row when allowed. */
int trm_checkpoint_load_weights(trm_model *m, const char *path, int allow_puzzle_reset, trm_err *e);
/* Everything for an exact continuation: weights, moments, EMA, carry, step and sampler. In a
 * distributed run (m->world > 1, set before) each rank takes its rows of the saved carry. */
int trm_checkpoint_resume(trm_model *m, const char *path, trm_ckpt_state *st, trm_err *e);
/* The name without the prefixes the reference's wrappers add (`_orig_mod.` from torch.compile,
 * `model.` from the loss head, `module.` from DistributedDataParallel), in any combination:
 * "_orig_mod.model.inner.x" -> "inner.x". trm's own names come back unchanged. */
const char *trm_ckpt_canonical_name(const char *name);
/* The resolved config YAML stored in a checkpoint (malloc'd), or NULL + e. */
char *trm_checkpoint_config(const char *path, trm_err *e);
/* "trm-checkpoint-1" or "trm-weights-1" when f was written by trm, else NULL. */
const char *trm_checkpoint_format(const st_file *f);
/* Newest step_<N>.safetensors in dir (malloc'd path), NULL if none. */
char *trm_checkpoint_latest(const char *dir);

#endif
