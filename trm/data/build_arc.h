/* build_arc.h — the ARC dataset builder (`trm data arc`), the reference's
 * dataset/build_arc_dataset.py with randomness from our Philox RNG. */
#ifndef TRM_BUILD_ARC_H
#define TRM_BUILD_ARC_H
#include <stdint.h>

#include "util/util.h"

typedef struct {
    const char *input_file_prefix;  /* files are PREFIX_<subset>_{challenges,solutions}.json */
    const char *const *subsets;
    int nsubsets;
    const char *test_set_name;      /* a subset name, or basename(PREFIX)_<subset> */
    const char *test_set_name2;     /* the reference's default is "evaluation2" */
    int64_t num_aug;
    uint64_t seed;
    int64_t puzzle_identifiers_start;
    const char *out;
    int force;
    int quiet;                      /* no progress on stderr */
} trm_arc_opts;

int trm_build_arc(const trm_arc_opts *o, trm_err *e);
/* What trm_build_arc reads, read and checked (every subset's challenges and solutions), and
 * nothing written: the builder's input on its own, for tests and fuzzing. */
int trm_arc_read(const trm_arc_opts *o, trm_err *e);
/* `trm data arc ARGS…` (argv without the builder name). */
int trm_data_arc(int argc, char **argv, trm_err *e);

#endif
