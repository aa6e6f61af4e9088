/* build_maze.h — `trm data maze` (the reference's dataset/build_maze_dataset.py: Maze CSVs
 * → dataset directory, optional 8 dihedral copies per training maze) and `trm data
 * maze-gen` (a CSV of generated mazes in the same format). */
#ifndef TRM_BUILD_MAZE_H
#define TRM_BUILD_MAZE_H
#include <stdint.h>

#include "util/util.h"

typedef struct {
    const char *csv_dir;     /* holds train.csv and test.csv */
    const char *out;
    int64_t subsample_size;  /* train rows to keep (drawn without replacement); <= 0: all */
    int aug;                 /* 8 dihedral copies of each training maze */
    uint64_t seed;
    int force;
    int progress;            /* progress lines on stderr */
} trm_maze_build_opts;

/* Errors in a CSV name FILE:LINE. */
int trm_build_maze(const trm_maze_build_opts *o, trm_err *e);
/* Reads and checks one Maze CSV as trm_build_maze does (its mazes and their side), keeping
 * nothing: the builder's reader on its own, for tests and fuzzing. */
int trm_maze_read_csv(const char *path, int64_t *rows, int *side, trm_err *e);

typedef struct {
    const char *out;         /* CSV file */
    int64_t count;
    int size;
    int min_path_len;        /* <= 0: trm_maze_default_min_len(size) */
    uint64_t seed;
    int force;
    int progress;
    double seconds;          /* out: generation time (throughput = count / seconds) */
    int64_t len_min, len_max;/* out: shortest and longest path length written */
    double len_mean;         /* out */
} trm_maze_gen_opts;

int trm_maze_gen(trm_maze_gen_opts *o, trm_err *e);

/* The `trm data` entry points (argv after the builder name). */
int trm_data_maze(int argc, char **argv, trm_err *e);
int trm_data_maze_gen(int argc, char **argv, trm_err *e);

#endif
