/* cli_data.c — `trm data …`: dataset builders and puzzle generators. */
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "util/util.h"
#include "commands.h"

static int data_sudoku4(int argc, char **argv, trm_err *e) {
    trm_sudoku4_opts o = {.out = NULL, .n_train = 2000, .n_test = 500, .min_clues = 6, .max_clues = 9, .seed = 0};
    const trm_opt opts[] = {
        TRM_OPT("--out", TRM_OPT_STR, &o.out), TRM_OPT("--force", TRM_OPT_FLAG, &o.force),
        TRM_OPT("--train", TRM_OPT_I64, &o.n_train), TRM_OPT("--test", TRM_OPT_I64, &o.n_test),
        TRM_OPT("--min-clues", TRM_OPT_INT, &o.min_clues), TRM_OPT("--max-clues", TRM_OPT_INT, &o.max_clues),
        TRM_OPT("--seed", TRM_OPT_U64, &o.seed), TRM_OPT_END,
    };
    if (trm_parse_opts(argc, argv, opts, e)) return -1;
    if (!o.out) return trm_errf(e, "--out DIR is required");
    if (trm_build_sudoku4(&o, e)) return -1;
    printf("wrote %s: %lld training and %lld test 4x4 puzzles\n", o.out, (long long)o.n_train, (long long)o.n_test);
    return 0;
}

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv, trm_err *e);
    const char *help;
} builder;

#define COMMON_HELP                                                                                    \
    "  OUT is written under a temporary name and renamed when complete; an existing\n"                 \
    "  OUT is kept unless --force is given.\n"

#define HUB_HELP                                                                                       \
    "  They are fetched as the reference's hf_hub_download fetches them, with the\n"                 \
    "  system's curl, into the Hugging Face cache (HF_HUB_CACHE, HF_HOME/hub or\n"                   \
    "  ~/.cache/huggingface/hub), and taken from there when already in it; also\n"                   \
    "  HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE=1. An interrupted download resumes.\n"

/* One entry per builder; builders add themselves here. */
static const builder builders[] = {
    {"sudoku4", data_sudoku4,
     "usage: trm data sudoku4 --out DIR [--train N] [--test N] [--min-clues A]\n"
     "                        [--max-clues B] [--seed S] [--force]\n"
     "  A small 4x4 Sudoku task: puzzles with a unique solution, the test puzzles\n"
     "  unseen in training (defaults: 2000 train, 500 test, 6..9 clues, seed 0).\n"
     "  Trains with cfg=tiny.\n" COMMON_HELP},
    {"sudoku", trm_data_sudoku,
     "usage: trm data sudoku (--csv-dir DIR | --download [--repo ID]) --out OUT\n"
     "                       [--subsample-size N] [--num-aug K] [--min-difficulty R]\n"
     "                       [--seed S] [--force]\n"
     "  Sudoku-Extreme CSVs (DIR/train.csv, DIR/test.csv:\n"
     "  source,question,answer,rating) to the reference's dataset layout: N training\n"
     "  puzzles drawn (default all), each with K augmented copies (digit\n"
     "  permutation, transposition, band/stack shuffles; default 0), puzzles rated\n"
     "  below R left out. The test split is not augmented.\n"
     "  --download: the CSVs of Hub dataset ID (sapientinc/sudoku-extreme).\n" HUB_HELP COMMON_HELP},
    {"sudoku-gen", trm_data_sudoku_gen,
     "usage: trm data sudoku-gen --count N --out FILE.csv [--seed S]\n"
     "                           [--min-clues A --max-clues B] [--min-rating R]\n"
     "                           [--force]\n"
     "  Generates N Sudoku puzzles with exactly one solution (minimal or\n"
     "  near-minimal, 17..30 clues by default) as a Sudoku-Extreme style CSV;\n"
     "  --min-rating keeps harder ones.\n" COMMON_HELP},
    {"maze", trm_data_maze,
     "usage: trm data maze (--csv-dir DIR | --download [--repo ID]) --out OUT\n"
     "                     [--subsample-size N] [--aug] [--seed S] [--force]\n"
     "  Maze-Hard CSVs (DIR/train.csv, DIR/test.csv, 30x30 grids of '# SGo') to the\n"
     "  dataset layout; --aug adds the 8 dihedral copies of each training maze.\n"
     "  --download: the CSVs of Hub dataset ID (sapientinc/maze-30x30-hard-1k).\n" HUB_HELP COMMON_HELP},
    {"maze-gen", trm_data_maze_gen,
     "usage: trm data maze-gen --count N --out FILE.csv [--size 30] [--min-path-len L]\n"
     "                         [--seed S] [--force]\n"
     "  Generates N mazes whose unique shortest S->G path is at least L moves, as a\n"
     "  Maze-Hard style CSV.\n" COMMON_HELP},
    {"arc", trm_data_arc,
     "usage: trm data arc --input-file-prefix P --subsets A B ... --test-set-name NAME\n"
     "                    [--test-set-name2 NAME2] [--num-aug K] [--seed S]\n"
     "                    [--puzzle-identifiers-start I] --out OUT [--force]\n"
     "  Kaggle ARC JSON (P_<subset>_challenges.json and _solutions.json) to the\n"
     "  dataset layout: each puzzle with up to K augmentations (dihedral transform\n"
     "  + colour permutation; default 1000, seed 42); the test pairs of NAME (and\n"
     "  NAME2) go to the test split.\n" COMMON_HELP},
};
#define NBUILDERS (sizeof builders / sizeof builders[0])

static const builder *find_builder(const char *name) {
    for (size_t i = 0; i < NBUILDERS; i++)
        if (!strcmp(name, builders[i].name)) return &builders[i];
    return NULL;
}

/* "trm data: unknown builder 'sudoku5'; did you mean 'sudoku4'? (builders: ...)" */
static void unknown_builder(const char *name) {
    const char *names[NBUILDERS];
    for (size_t i = 0; i < NBUILDERS; i++) names[i] = builders[i].name;
    const char *near = trm_nearest(name, names, NBUILDERS);
    fprintf(stderr, "trm data: unknown builder '%s'", name);
    if (near) fprintf(stderr, "; did you mean '%s'?", near);
    fprintf(stderr, " (builders: ");
    for (size_t i = 0; i < NBUILDERS; i++) fprintf(stderr, "%s%s", i ? ", " : "", builders[i].name);
    fprintf(stderr, ")\n");
}

int trm_data_help(const char *name, FILE *out) {
    const builder *b = find_builder(name);
    if (!b) {
        unknown_builder(name);
        return 2;
    }
    fputs(b->help, out);
    return 0;
}

int cmd_data(int argc, char **argv, const trm_globals *g) {
    (void)g;
    trm_err e = {{0}};
    if (argc < 1) {
        fprintf(stderr, "usage: trm data <builder> [options]   (see trm help data)\n");
        return 2;
    }
    const builder *b = find_builder(argv[0]);
    if (!b) {
        unknown_builder(argv[0]);
        return 2;
    }
    if (trm_wants_help(argc - 1, argv + 1)) return trm_data_help(argv[0], stdout);
    if (b->run(argc - 1, argv + 1, &e)) {
        fprintf(stderr, "trm data %s: %s\n", argv[0], e.msg);
        return 1;
    }
    return 0;
}
