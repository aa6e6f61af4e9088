/* opts.h — one parser for the `--name [value]` options of the builder commands: each command
 * declares a table (name, kind, destination, range) instead of its own loop. */
#ifndef TRM_UTIL_OPTS_H
#define TRM_UTIL_OPTS_H
#include <stdint.h>

#include "base.h"

typedef enum {
    TRM_OPT_FLAG, /* int *: set to 1 */
    TRM_OPT_STR,  /* const char **: the next argument */
    TRM_OPT_I64,  /* int64_t * */
    TRM_OPT_INT,  /* int * */
    TRM_OPT_U64,  /* uint64_t * (seeds: any integer, stored as its two's complement) */
    TRM_OPT_LIST, /* const char **: the following arguments up to the next --option; count in *n */
} trm_opt_kind;

typedef struct {
    const char *name;
    trm_opt_kind kind;
    void *dst;
    int64_t min, max; /* TRM_OPT_I64 / TRM_OPT_INT: accepted range (both 0: any) */
    int *n;           /* TRM_OPT_LIST: the count; otherwise, if set, 1 once the option is given */
} trm_opt;

/* A table row: TRM_OPT("--size", TRM_OPT_INT, &o.size, .min = 1, .max = 1000); end with TRM_OPT_END. */
#define TRM_OPT(nm, k, p, ...) {.name = (nm), .kind = (k), .dst = (p), __VA_ARGS__}
#define TRM_OPT_END {.name = NULL}

/* Parses argv against `opts` (terminated by a NULL name). Errors: an unknown argument, a missing
 * or non-integer value, a value outside [min, max]. */
int trm_parse_opts(int argc, char **argv, const trm_opt *opts, trm_err *e);

#endif
