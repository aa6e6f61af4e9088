/* dataset_writer.h — writes datasets in the reference's directory layout (SPEC §1): the
 * arrays of each set as .npy, dataset.json, identifiers.json; built under a temporary name
 * and renamed into place, so an existing dataset is never half-overwritten. */
#ifndef TRM_DATASET_WRITER_H
#define TRM_DATASET_WRITER_H
#include <stdint.h>

#include "dataset.h"
#include "util/util.h"

typedef struct {
    const char *name;                 /* set name, e.g. "all" */
    int64_t n_examples;
    const int32_t *inputs, *labels;   /* n_examples × seq_len */
    int64_t n_puzzles;
    const int32_t *puzzle_identifiers;/* n_puzzles */
    const int32_t *puzzle_indices;    /* n_puzzles + 1 */
    int64_t n_groups;
    const int32_t *group_indices;     /* n_groups + 1 */
} trm_dw_set;

/* The arrays of a set with one puzzle per example (identifier 0, the blank) in n_groups groups
 * of `per` consecutive examples — the Sudoku and Maze layout — owned by the builder. Alloc fills
 * every index array; the builder writes inputs and labels (n_examples × seq_len). */
typedef struct {
    int32_t *inputs, *labels, *puzzle_identifiers, *puzzle_indices, *group_indices;
    int64_t n_examples, n_groups;
} trm_dw_grouped;
void trm_dw_grouped_alloc(trm_dw_grouped *g, int64_t n_groups, int64_t per, int64_t seq_len);
void trm_dw_grouped_free(trm_dw_grouped *g);
/* The set "all" viewing g's arrays. */
trm_dw_set trm_dw_grouped_set(const trm_dw_grouped *g);

/* Creates OUT's temporary sibling directory (OUT exists and !force → error). */
int trm_dw_begin(const char *out, int force, char **tmpdir, trm_err *e);
/* Writes one split (train/test) of a dataset into dir. total_groups, total_puzzles and
 * mean_puzzle_examples are computed from the sets unless meta->total_groups > 0, in which
 * case all three are written as given (the reference's Sudoku and Maze builders write
 * total_puzzles = total_groups and mean_puzzle_examples = 1 although each group holds
 * 1 + num_aug puzzles; matching that keeps the files interchangeable). */
int trm_dw_write_split(const char *dir, const char *split, const trm_dataset_meta *meta,
                       const trm_dw_set *sets, int nsets, trm_err *e);
/* split_dir/dataset.json with every field of meta as given (builders that stream their
 * arrays fill the totals themselves). */
int trm_dw_write_metadata(const char *split_dir, const trm_dataset_meta *meta, const char *const *sets, int nsets,
                          trm_err *e);
/* Writes dir/name from a JSON buffer (newline added, atomic) and frees the buffer. */
int trm_dw_write_json(const char *dir, const char *name, json_buf *b, trm_err *e);
/* identifiers.json: a JSON list of names (index = id). */
int trm_dw_write_identifiers(const char *dir, const char *const *names, int n, trm_err *e);
/* Renames tmpdir to OUT (replacing OUT when force). */
int trm_dw_commit(const char *tmpdir, const char *out, int force, trm_err *e);

#endif
