/* tfevents.h — TensorBoard event files, written by trm itself: TFRecord framing (length, its
 * masked CRC32C, the data, its masked CRC32C) around Event protocol buffers encoded by hand,
 * with scalars as Summary.Value.simple_value and the resolved config as a text summary. That
 * is what `tensorboard --logdir` and `wandb sync --sync-tensorboard` read; no TensorFlow. */
#ifndef TRM_TFEVENTS_H
#define TRM_TFEVENTS_H
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

#define TRM_TFEVENTS_PREFIX "events.out.tfevents."

typedef struct trm_tfevents trm_tfevents;

/* A writer into run directory `dir`. Nothing is written before the first record; then
 * DIR/events.out.tfevents.<seconds>.<host>.<pid>.trm is made (named to sort after the events
 * files already there: TensorBoard reads a run's files in name order) and begins with the
 * file version, a SessionLog START at `first_step` (TensorBoard then drops the points at or
 * after that step it loaded from an earlier session of the run) and `config` (NULL: none) as
 * the text summary "config" at that step. */
trm_tfevents *trm_tfevents_new(const char *dir, int64_t first_step, const char *config);
/* One record: the scalars given between begin and end become one Event at `step`, written
 * and flushed to the file by end. Every call does nothing on a NULL writer. */
void trm_tfevents_begin(trm_tfevents *w, int64_t step);
void trm_tfevents_scalar(trm_tfevents *w, const char *tag, double value);
int trm_tfevents_end(trm_tfevents *w, trm_err *e);
void trm_tfevents_free(trm_tfevents *w);

/* For a run resumed at `step`: every events file in dir keeps only its events up to that
 * step (and loses a last record cut short by a kill), as metrics.jsonl does, so that a
 * reader without TensorBoard's purging (wandb sync, a script) also sees each step once. */
int trm_tfevents_cut(const char *dir, int64_t step, trm_err *e);

/* CRC-32C (Castagnoli) of n bytes, and TFRecord's masked form of a CRC. */
uint32_t trm_crc32c(const void *p, size_t n);
uint32_t trm_crc32c_mask(uint32_t crc);

#endif
