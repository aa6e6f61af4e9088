/* data.h — the face of data/: the dataset format (dataset.h: reading and batching,
 * dataset_writer.h, npy.h), the dihedral augmentations, the puzzle generators and builders of
 * `trm data` (Sudoku, 4x4 Sudoku, Maze, ARC), the published CSVs fetched from the Hugging Face
 * Hub (hub.h), ARC's evaluator and the judge of typed puzzles' answers. data/ uses util/ and
 * config/ only. */
#ifndef TRM_DATA_H
#define TRM_DATA_H

#include "npy.h"
#include "dataset.h"
#include "dataset_writer.h"
#include "dihedral.h"
#include "sudoku.h"
#include "maze.h"
#include "arc.h"
#include "arc_eval.h"
#include "judge.h"
#include "build_sudoku.h"
#include "build_sudoku4.h"
#include "build_maze.h"
#include "build_arc.h"
#include "hub.h"

#endif
