/* arc_eval.h — the ARC evaluator (the reference's evaluators/arc.py): collects the model's
 * predictions for augmented test puzzles, maps each back to its original puzzle (crop,
 * inverse colour map, inverse dihedral), votes per original test input by (count, mean
 * sigmoid(q_halt)) and reports pass@K plus a Kaggle submission with the top 2 attempts. */
#ifndef TRM_ARC_EVAL_H
#define TRM_ARC_EVAL_H
#include <stdint.h>

#include "util/util.h"

#define ARC_EVAL_NK 6
/* The K of pass@K, in the order of arc_eval_result's pass_at[]. */
extern const int arc_eval_pass_ks[ARC_EVAL_NK]; /* 1, 2, 5, 10, 100, 1000 */

typedef struct arc_eval arc_eval;

/* Loads DIR/identifiers.json, DIR/test_puzzles.json and the blank identifier from
 * DIR/test/dataset.json (0 when that file is absent). NULL + e on failure. */
arc_eval *arc_eval_open(const char *data_dir, trm_err *e);
void arc_eval_free(arc_eval *ev);
/* Forgets all predictions (the reference's begin_eval without aggregated voting). */
void arc_eval_reset(arc_eval *ev);
/* One prediction: 900 input tokens and 900 predicted tokens of a test example of puzzle
 * identifier puzzle_id, with the model's q_halt logit. The blank identifier is skipped.
 * -1 when puzzle_id is not an identifier or its name has a malformed augmentation. */
int arc_eval_add(arc_eval *ev, int32_t puzzle_id, const int32_t *input_tokens, const int32_t *pred_tokens,
                 double q_halt_logit, trm_err *e);
/* Votes and fills pass_at[i] = pass@arc_eval_pass_ks[i] (mean over test puzzles of the
 * fraction of their test inputs whose label is among the top K). Writes the submission
 * JSON to submission_path unless it is NULL. -1 when there are no test puzzles or the
 * file cannot be written. */
int arc_eval_result(arc_eval *ev, const char *submission_path, double pass_at[ARC_EVAL_NK], trm_err *e);

#endif
