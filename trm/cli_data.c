/* cli_data.c — `trm data …`: dataset builders and puzzle generators. */
#include <stdlib.h>
#include <string.h>

#include "build_maze.h"
#include "build_sudoku.h"
#include "build_arc.h"
#include "build_sudoku4.h"
#include "cli_opts.h"
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
    int (*run)(int argc, char **argv, trm_err *e); /* NULL: not in this build yet */
} builder;

/* One line per builder; builders add themselves here. */
static const builder builders[] = {
    {"sudoku4", data_sudoku4},
    {"sudoku", trm_data_sudoku},
    {"sudoku-gen", trm_data_sudoku_gen},
    {"maze", trm_data_maze},
    {"maze-gen", trm_data_maze_gen},
    {"arc", trm_data_arc},
};

int cmd_data(int argc, char **argv, const trm_globals *g) {
    (void)g;
    trm_err e = {{0}};
    size_t nb = sizeof builders / sizeof builders[0];
    if (argc < 1) {
        fprintf(stderr, "usage: trm data <builder> [options]   (see trm help data)\n");
        return 2;
    }
    for (size_t i = 0; i < nb; i++) {
        if (strcmp(argv[0], builders[i].name)) continue;
        if (!builders[i].run) {
            fprintf(stderr, "trm data %s: this builder is not part of this build yet (it comes with the "
                            "dataset-builder work); nothing was written\n", argv[0]);
            return 2;
        }
        if (builders[i].run(argc - 1, argv + 1, &e)) {
            fprintf(stderr, "trm data %s: %s\n", argv[0], e.msg);
            return 1;
        }
        return 0;
    }
    fprintf(stderr, "trm data: unknown builder '%s' (", argv[0]);
    for (size_t i = 0; i < nb; i++) fprintf(stderr, "%s%s", i ? ", " : "", builders[i].name);
    fprintf(stderr, ")\n");
    return 2;
}
