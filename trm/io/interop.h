/* interop.h — PyTorch interop: a trm checkpoint exported as exactly the reference's state_dict
 * (names, order, dtypes), and the reference's files (torch.save or safetensors) taken in:
 * their config from the file, the reference's all_config.yaml beside it or the command line,
 * and the data sizes (seq_len, vocabulary, puzzle ids) their weights imply. */
#ifndef TRM_INTEROP_H
#define TRM_INTEROP_H
#include "config/config.h"
#include "data/data.h"
#include "model/model.h"
#include "safetensors.h"

/* The config for the weights in `path`, in this order: the config a trm file stores; else the
 * reference's run config all_config.yaml in the file's directory, over trm's defaults
 * (cfg_name, default cfg_pretrain) for trm's own keys; else cfg_name alone. The overrides
 * apply last; the result is resolved. *source (malloc'd) says where the config came from. */
cfg_node *trm_weights_config(const char *path, const cfg_search *s, const char *cfg_name, int nov, char *const *ov,
                             char **source, trm_err *e);

/* seq_len, vocab_size and num_puzzle_identifiers of a model holding f's weights: from trm's
 * metadata when f has it, else from the weights' shapes (vocabulary from embed_tokens, ids
 * from the puzzle table, seq_len from learned positions or token-mixing layers), with `data`
 * (may be NULL) and seq_len (> 0: given by the user) for what the weights cannot tell. */
int trm_weights_dims(const st_file *f, const char *path, const trm_model_config *arch, const trm_dataset_meta *data,
                     int64_t seq_len, trm_dataset_meta *out, trm_err *e);

/* A trm checkpoint (`in`) as the reference's state_dict: `prefix` + inner.* names ("model."
 * for the loss head's module, "_orig_mod.model." for a torch.compile'd one, which is what the
 * reference's pretrain.py load_checkpoint= expects), the reference's order, fp32 weights and
 * H_init/L_init in forward_dtype. A .safetensors `out` is written with safetensors, anything
 * else as torch.save would. The EMA weights when the run used EMA, as the reference saves. */
int trm_export_reference(const char *in, const char *out, const char *prefix, trm_err *e);

#endif
