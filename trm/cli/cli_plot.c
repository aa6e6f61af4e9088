/* cli_plot.c — `trm plot RUN_DIR... [-o FILE.svg|FILE.png]`: learning curves of one or more
 * runs from their metrics.jsonl (plot.h), readable while a run is still writing it. */
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "view/view.h"

int cmd_plot(int argc, char **argv, const trm_globals *g) {
    (void)g;
    trm_err e = {{0}};
    const char *out = "curves.svg", *title = NULL;
    int64_t width = 1200;
    const char **dirs = xcalloc((size_t)argc + 1, sizeof *dirs);
    int ndirs = 0, rc = 0;
    for (int i = 0; i < argc && rc == 0; i++) {
        const char *w = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(w, "-o") || !strcmp(w, "--output") || !strcmp(w, "--title")) {
            if (!v) rc = trm_errf(&e, "%s needs a value", w);
            else if (!strcmp(w, "--title")) title = v, i++;
            else out = v, i++;
        } else if (!strcmp(w, "--width")) {
            if (trm_parse_i64(w, v, &width, &e)) rc = -1;
            else if (width < 320 || width > 8000) rc = trm_errf(&e, "--width must be in 320..8000");
            i++;
        } else if (w[0] == '-' && w[1]) {
            rc = trm_errf(&e, "unexpected option '%s' (see trm help plot)", w);
        } else {
            dirs[ndirs++] = w;
        }
    }
    if (rc == 0 && ndirs == 0) rc = trm_errf(&e, "give one or more run directories (see trm help plot)");
    if (rc) {
        fprintf(stderr, "trm plot: %s\n", e.msg);
        free(dirs);
        return 2;
    }
    trm_run_log *runs = xcalloc((size_t)ndirs, sizeof *runs);
    int nread = 0;
    for (; nread < ndirs; nread++) {
        if (trm_run_log_read(&runs[nread], dirs[nread], &e)) {
            rc = -1;
            break;
        }
        if (runs[nread].records == 0) {
            rc = trm_errf(&e, "%s: no metrics yet (the first line is written after log_interval steps)",
                          runs[nread].path);
            nread++;
            break;
        }
    }
    trm_plot_opts o = {.width = (int)width, .title = title};
    if (rc == 0) rc = trm_plot_write(out, runs, ndirs, &o, &e);
    if (rc == 0) {
        int64_t points = 0;
        for (int r = 0; r < ndirs; r++)
            for (int i = 0; i < runs[r].nseries; i++) points += runs[r].series[i].n;
        printf("wrote %s: %d run%s, %lld points\n", out, ndirs, ndirs == 1 ? "" : "s", (long long)points);
    } else {
        fprintf(stderr, "trm plot: %s\n", e.msg);
    }
    for (int r = 0; r < nread; r++) trm_run_log_free(&runs[r]);
    free(runs);
    free(dirs);
    return rc ? 1 : 0;
}
