/* evaluators.c — see evaluators.h. ARC is the one evaluator so far; the report's puzzle
 * samples are fed the same way. */
#include "evaluators.h"

#include <stdlib.h>
#include <string.h>

#include "data/data.h"

struct trm_evaluators {
    arc_eval *arc;
};

static int is_arc(const char *name) {
    /* the reference names evaluators module@Class: "arc@ARC" */
    return !strcmp(name, "arc@ARC") || !strcmp(name, "arc") || !strcmp(name, "ARC");
}

int trm_evaluators_open(trm_evaluators **out, char *const *names, int n, const char *data_dir, trm_err *e) {
    *out = NULL;
    if (n == 0) return 0;
    trm_evaluators *ev = xcalloc(1, sizeof *ev);
    for (int i = 0; i < n; i++) {
        if (!is_arc(names[i])) {
            trm_evaluators_free(ev);
            return trm_errf(e, "evaluators: unknown evaluator '%s' (known: arc@ARC; use evaluators=[] for none)", names[i]);
        }
        if (ev->arc) continue;
        ev->arc = arc_eval_open(data_dir, e);
        if (!ev->arc) {
            trm_err_prefix(e, "evaluator %s needs an ARC dataset built by `trm data arc` (or use evaluators=[])",
                           names[i]);
            trm_evaluators_free(ev);
            return -1;
        }
    }
    *out = ev;
    return 0;
}

void trm_evaluators_free(trm_evaluators *ev) {
    if (!ev) return;
    if (ev->arc) arc_eval_free(ev->arc);
    free(ev);
}

static int sink_batch(void *ctx, const trm_batch *b, int64_t real, const int32_t *preds, const float *q,
                      const float *logits, trm_err *e) {
    (void)logits;
    trm_evaluators *ev = ctx;
    int64_t S = b->seq_len;
    if (ev->arc && S != 900) return trm_errf(e, "evaluator arc@ARC needs 30x30 ARC sequences (seq_len 900), got %lld", (long long)S);
    for (int64_t r = 0; r < real && ev->arc; r++)
        if (arc_eval_add(ev->arc, b->puzzle_identifiers[r], b->inputs + r * S, preds + r * S, (double)q[2 * r], e))
            return -1;
    return 0;
}

trm_eval_sink trm_evaluators_sink(trm_evaluators *ev) {
    trm_eval_sink s = {sink_batch, ev, 0};
    return s;
}

int trm_evaluators_finish(trm_evaluators *ev, const char *save_dir, const char *tag, trm_eval_metrics *m,
                          trm_err *e) {
    m->n = 0;
    if (!ev || !ev->arc) return 0;
    char *path = NULL;
    if (save_dir) {
        char *dir = xasprintf("%s/evaluator_ARC_%s", save_dir, tag);
        if (trm_mkdirs(dir, e)) {
            free(dir);
            return -1;
        }
        path = trm_path_join(dir, "submission.json");
        free(dir);
    }
    double pass[ARC_EVAL_NK];
    int rc = arc_eval_result(ev->arc, path, pass, e);
    free(path);
    if (rc) return -1;
    for (int i = 0; i < ARC_EVAL_NK && m->n < TRM_EVAL_MAX_METRICS; i++, m->n++) {
        snprintf(m->names[m->n], sizeof m->names[m->n], "ARC/pass@%d", arc_eval_pass_ks[i]);
        m->values[m->n] = pass[i];
    }
    return 0;
}

static int samples_batch(void *ctx, const trm_batch *b, int64_t real, const int32_t *preds, const float *q,
                         const float *logits, trm_err *e) {
    (void)q, (void)logits, (void)e;
    trm_puzzle_samples *s = ctx;
    if (b->set_index != 0 || s->nwant == 0) return 0; /* the first set's examples come first */
    for (int64_t r = 0; r < real && s->n < s->nwant; r++) {
        if (s->seen + r != s->want[s->n]) continue;
        size_t S = (size_t)s->S, o = (size_t)s->n * S;
        memcpy(s->inputs + o, b->inputs + (size_t)r * S, S * sizeof(int32_t));
        memcpy(s->labels + o, b->labels + (size_t)r * S, S * sizeof(int32_t));
        memcpy(s->preds + o, preds + (size_t)r * S, S * sizeof(int32_t));
        s->index[s->n++] = s->seen + r;
    }
    s->seen += real;
    return 0;
}

trm_eval_sink trm_puzzle_samples_sink(trm_puzzle_samples *s) {
    trm_eval_sink k = {samples_batch, s, 0};
    return k;
}
