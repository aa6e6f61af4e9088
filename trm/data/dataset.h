/* dataset.h — the TRM puzzle dataset directory (SPEC §1): metadata, memory-mapped arrays of
 * one split merged over several data_paths, the training sampler and the test iterator. */
#ifndef TRM_DATASET_H
#define TRM_DATASET_H
#include <stdint.h>

#include "npy.h"
#include "util/util.h"

#define TRM_IGNORE_LABEL (-100)

typedef struct {
    int64_t pad_id;
    int has_ignore_label;      /* ignore_label_id not null */
    int64_t ignore_label_id;
    int64_t blank_identifier_id;
    int64_t vocab_size;
    int64_t seq_len;
    int64_t num_puzzle_identifiers; /* summed over merged paths, as the reference does */
    int64_t total_groups;           /* summed */
    double mean_puzzle_examples;    /* weighted by total_puzzles */
    int64_t total_puzzles;          /* summed */
    int nsets;
    char **sets;                    /* set names of dataset.json */
} trm_dataset_meta;

/* One loaded set (a SET of one data path; path i>0 gets the name SET<i>, as the reference). */
typedef struct {
    char *name;        /* e.g. "all", "all1" */
    char *base_name;   /* the dataset.json set name, e.g. "all" */
    npy_array inputs, labels, puzzle_identifiers, puzzle_indices, group_indices;
    int64_t n_examples, n_puzzles, n_groups;
} trm_dataset_set;

typedef struct {
    char *split;       /* "train" or "test" */
    trm_dataset_meta meta;
    int nsets;
    trm_dataset_set *sets;
} trm_dataset;

/* Opens DIR/<split> for each path, validates (vocab, index ranges, monotone indices, shapes)
 * and merges metadata. Errors name the file and the first bad position / differing field. */
int trm_dataset_open(trm_dataset *d, const char *const *paths, int npaths, const char *split,
                     trm_err *e);
void trm_dataset_close(trm_dataset *d);

/* A batch in host memory, already collated: labels equal to ignore_label_id are -100,
 * padded rows have inputs pad_id, labels -100, puzzle id blank_identifier_id. */
typedef struct {
    int64_t batch_size;  /* local rows (global / world) */
    int64_t seq_len;
    int32_t *inputs;     /* batch_size * seq_len */
    int32_t *labels;
    int32_t *puzzle_identifiers; /* batch_size */
    int64_t effective_size;      /* global rows that are real data (test: before padding) */
    int set_index;               /* which dataset set it came from */
} trm_batch;

void trm_batch_alloc(trm_batch *b, int64_t batch_size, int64_t seq_len);
void trm_batch_free(trm_batch *b);

/* Training sampler state: fully described by these integers, so it is saved in checkpoints
 * and a resumed run draws exactly the batches it would have drawn. */
typedef struct {
    uint64_t seed;
    int64_t epochs_per_iter;
    int64_t global_batch_size;
    int rank, world_size;
    int64_t iter;        /* index of the current eval-interval chunk (0-based) */
    int set_index;       /* set being walked inside the chunk */
    int64_t group_pos;   /* position in the concatenated group order */
    int64_t batch_index; /* batches drawn so far in this (iter, set) — RNG stream */
} trm_sampler_state;

/* The caller validates the split (trm_check_batch_split / trm_sampler_check) before
 * sampling; init itself cannot fail. */
void trm_sampler_init(trm_sampler_state *s, uint64_t seed, int64_t epochs_per_iter,
                      int64_t global_batch_size, int rank, int world_size);
/* global_batch_size > 0, 0 <= rank < world_size, global_batch_size % world_size == 0. */
int trm_check_batch_split(int64_t global_batch_size, int rank, int world_size, trm_err *e);
/* The split plus epochs_per_iter >= 1 and a non-negative position (e.g. from a checkpoint). */
int trm_sampler_check(const trm_sampler_state *s, trm_err *e);
/* Draws the next full training batch of chunk `s->iter`. Returns 1 and fills `out`
 * (rank's rows), or 0 when the chunk is exhausted (then call trm_sampler_next_iter);
 * -1 (nothing changed) when trm_sampler_check would fail. `out` must be zeroed or
 * allocated; one of another shape is reallocated to (global/world, seq_len). */
int trm_sampler_next(const trm_dataset *d, trm_sampler_state *s, trm_batch *out);
void trm_sampler_next_iter(trm_sampler_state *s);

/* Test iterator: walks every set's examples in order, last batch padded. */
typedef struct {
    int64_t global_batch_size;
    int rank, world_size;
    int set_index;
    int64_t start;
} trm_test_iter;

void trm_test_iter_init(trm_test_iter *it, int64_t global_batch_size, int rank, int world_size);
/* 1 with a batch, 0 after the last set, -1 on an invalid split (see trm_check_batch_split).
 * `out` as for trm_sampler_next. */
int trm_test_iter_next(const trm_dataset *d, trm_test_iter *it, trm_batch *out);

/* total_steps = epochs * total_groups * mean_puzzle_examples / global_batch_size (floor). */
int64_t trm_total_steps(const trm_dataset_meta *m, int64_t epochs, int64_t global_batch_size);

#endif
