/* io.h — the face of io/: model files. safetensors (trm's checkpoint format), checkpoints
 * with their run state, the reference's torch.save files (zip + pickle, read safely) and the
 * conversion between the two (interop.h). io/ uses util/, config/, data/ and model/. */
#ifndef TRM_IO_H
#define TRM_IO_H

#include "safetensors.h"
#include "checkpoint.h"
#include "zip.h"
#include "pickle.h"
#include "torch_pt.h"
#include "interop.h"

#endif
