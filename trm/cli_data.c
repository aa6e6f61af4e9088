/* cli_data.c — `trm data …`: dataset builders and puzzle generators. */
#include <stdlib.h>
#include <string.h>

#include "build_maze.h"
#include "build_sudoku.h"
#include "build_arc.h"
#include "build_sudoku4.h"
#include "commands.h"

static int data_sudoku4(int argc, char **argv, trm_err *e) {
    trm_sudoku4_opts o = {.out = NULL, .n_train = 2000, .n_test = 500, .min_clues = 6, .max_clues = 9, .seed = 0};
    for (int i = 0; i < argc; i++) {
        const char *w = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x = 0;
        if (!strcmp(w, "--out")) {
            if (!v) return trm_errf(e, "--out needs a directory");
            o.out = v, i++;
        } else if (!strcmp(w, "--force")) {
            o.force = 1;
        } else if (!strcmp(w, "--train") || !strcmp(w, "--test") || !strcmp(w, "--min-clues") ||
                   !strcmp(w, "--max-clues") || !strcmp(w, "--seed")) {
            if (trm_parse_i64(w, v, &x, e)) return -1;
            i++;
            if (!strcmp(w, "--train")) o.n_train = x;
            else if (!strcmp(w, "--test")) o.n_test = x;
            else if (!strcmp(w, "--min-clues")) o.min_clues = (int)x;
            else if (!strcmp(w, "--max-clues")) o.max_clues = (int)x;
            else o.seed = (uint64_t)x;
        } else {
            return trm_errf(e, "unexpected argument '%s'", w);
        }
    }
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
