/* opts.c — the table-driven option parser of opts.h. */
#include "opts.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const trm_opt *find_opt(const trm_opt *opts, const char *w) {
    for (; opts->name; opts++)
        if (!strcmp(opts->name, w)) return opts;
    return NULL;
}

static int check_range(const trm_opt *o, int64_t x, trm_err *e) {
    if (o->kind == TRM_OPT_INT && !o->min && !o->max && (x < INT32_MIN || x > INT32_MAX))
        return trm_errf(e, "%s: %" PRId64 " is out of range", o->name, x);
    if ((o->min || o->max) && (x < o->min || x > o->max)) {
        if (o->max == INT64_MAX) return trm_errf(e, "%s must be >= %" PRId64, o->name, o->min);
        return trm_errf(e, "%s must be in %" PRId64 "..%" PRId64, o->name, o->min, o->max);
    }
    return 0;
}

/* "unexpected argument '--ouput'; did you mean '--out'?" */
static int unexpected(const trm_opt *opts, const char *w, trm_err *e) {
    size_t n = 0;
    while (opts[n].name) n++;
    const char **names = xmalloc((n + 1) * sizeof *names);
    for (size_t i = 0; i < n; i++) names[i] = opts[i].name;
    const char *near = w[0] == '-' ? trm_nearest(w, names, n) : NULL;
    int rc = near ? trm_errf(e, "unexpected argument '%s'; did you mean '%s'?", w, near)
                  : trm_errf(e, "unexpected argument '%s'", w);
    free(names);
    return rc;
}

int trm_parse_opts(int argc, char **argv, const trm_opt *opts, trm_err *e) {
    for (int i = 0; i < argc; i++) {
        const char *w = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const trm_opt *o = find_opt(opts, w);
        if (!o) return unexpected(opts, w, e);
        int64_t x = 0;
        switch (o->kind) {
        case TRM_OPT_FLAG:
            *(int *)o->dst = 1;
            break;
        case TRM_OPT_STR:
            if (!v) return trm_errf(e, "%s needs a value", w);
            *(const char **)o->dst = v, i++;
            break;
        case TRM_OPT_LIST:
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2)) ((const char **)o->dst)[(*o->n)++] = argv[++i];
            continue; /* n is the count, not a given-flag */
        case TRM_OPT_I64:
        case TRM_OPT_INT:
        case TRM_OPT_U64:
            if (trm_parse_i64(w, v, &x, e) || check_range(o, x, e)) return -1;
            i++;
            if (o->kind == TRM_OPT_I64) *(int64_t *)o->dst = x;
            else if (o->kind == TRM_OPT_INT) *(int *)o->dst = (int)x;
            else *(uint64_t *)o->dst = (uint64_t)x;
            break;
        }
        if (o->n) *o->n = 1;
    }
    return 0;
}
