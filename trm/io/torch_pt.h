/* torch_pt.h — PyTorch's torch.save files (a zip of data.pkl + one member per storage) as
 * trm reads and writes them, and the one opener that takes either format: checkpoints,
 * `trm inspect` and `trm convert` accept a safetensors file or a torch.save file alike. */
#ifndef TRM_TORCH_PT_H
#define TRM_TORCH_PT_H
#include "safetensors.h"

/* Reads a torch.save file of a dict of tensors into f (no metadata). Tensors are views into
 * the mapped file where they can be, copies otherwise (deflated members, strided views). */
int pt_open(st_file *f, const char *path, trm_err *e);
/* Opens a safetensors file or a torch.save file, chosen by the file's first bytes. */
int tensor_file_open(st_file *f, const char *path, trm_err *e);
/* Whether path starts like a torch.save file (a zip archive). 0 when unreadable. */
int pt_is_torch_file(const char *path);

/* Writes w's tensors (data borrowed) as torch.save would write a dict of them: an OrderedDict
 * (a state_dict) when ordered, else a plain dict; each tensor has its own storage. Atomic. */
int pt_save(const st_writer *w, const char *path, int ordered, trm_err *e);

#endif
