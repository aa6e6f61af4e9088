/* run_dir.h — a run directory belongs to one run. The run takes an exclusive lock on it for
 * its whole life (a second process into the same directory is refused, naming the holder);
 * a new run does not start in a directory that holds another run (resume it, choose another
 * directory, or move the old run aside with overwrite=true); a resumed run's metrics.jsonl is
 * cut back to the step it resumes from, and temporary files a killed run left are removed. */
#ifndef TRM_RUN_DIR_H
#define TRM_RUN_DIR_H
#include <stdint.h>

#include "util/util.h"

typedef struct {
    char *dir;
    int lock_fd; /* -1 when not held */
} trm_run_dir;

/* Locks dir (made if missing) for this process. `resuming`: the run asked for resume=...
 * (continuing what the directory holds is then the point); `overwrite`: move a run the
 * directory holds aside to DIR.prev-N first. Errors: the directory is in use, or holds a run
 * and neither was asked for. */
int trm_run_dir_claim(trm_run_dir *rd, const char *dir, int resuming, int overwrite, trm_err *e);
/* After the resume: metrics.jsonl and the TensorBoard events files keep only records up to
 * `step` (so that re-run steps are not logged twice), and leftover *.tmp.* files are
 * removed. */
int trm_run_dir_tidy(const trm_run_dir *rd, int64_t step, trm_err *e);
/* metrics.jsonl holds a record of `kind` at `step`. */
int trm_run_dir_logged(const trm_run_dir *rd, int64_t step, const char *kind);
void trm_run_dir_release(trm_run_dir *rd);

#endif
