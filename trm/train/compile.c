/* compile.c — the compile stage (see compile.h): one graph per kind of step, captured on its
 * second run and replayed after. Only the step's scalars (the exploration counter) cross
 * from the host before each replay; everything else a graph touches is fixed device memory
 * of the model (carry, batch inputs, arena), which is why slots are keyed by the weights and
 * carry pointers. */
#include "compile.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"
#include "view/view.h"

void trm_plan_init(trm_plan *p, trm_model *m, int enabled) {
    memset(p, 0, sizeof *p);
    p->m = m;
    const char *dis = getenv("DISABLE_COMPILE");
    if (dis && *dis && strcmp(dis, "0") != 0) enabled = 0;
    trm_backend *be = m->be;
    p->enabled = enabled && be->capture_begin && be->capture_end && be->graph_launch && be->graph_destroy;
    /* The plan's eager first step also chooses each bf16 GEMM's algorithm by timing the
     * candidates (TRM_GEMM_TUNE=0 keeps the library's first choice: the same algorithms on every
     * run, and bit-identical steps with compile on and off in bf16 too). */
    const char *tune = getenv("TRM_GEMM_TUNE");
    be->tune_gemms = p->enabled && !(tune && !strcmp(tune, "0"));
}

void trm_plan_free(trm_plan *p) {
    if (!p->m) return;
    trm_backend *be = p->m->be;
    for (int i = 0; i < TRM_PLAN_SLOTS; i++)
        if (p->slot[i].graph) be->graph_destroy(be, p->slot[i].graph);
    memset(p, 0, sizeof *p);
}

static trm_plan_slot *find_slot(trm_plan *p, const trm_step_opts *o) {
    const float *w = o->weights ? o->weights : p->m->w;
    int grad = o->want_grad && !p->m->cfg.inference_only;
    for (int i = 0; i < TRM_PLAN_SLOTS; i++) {
        trm_plan_slot *s = &p->slot[i];
        if (s->used && s->training == o->training && s->want_grad == grad && s->weights == w &&
            s->carry == p->m->z[0] && s->grad_scale == o->grad_scale && s->seed == o->seed)
            return s;
    }
    for (int i = 0; i < TRM_PLAN_SLOTS; i++) {
        trm_plan_slot *s = &p->slot[i];
        if (s->used) continue;
        *s = (trm_plan_slot){.used = 1, .training = o->training, .want_grad = grad, .weights = w,
                             .carry = p->m->z[0], .grad_scale = o->grad_scale, .seed = o->seed};
        return s;
    }
    return NULL; /* more kinds of step than slots: run the rest eagerly */
}

void trm_plan_step(trm_plan *p, const trm_step_opts *o) {
    trm_model *m = p->m;
    trm_backend *be = m->be;
    trm_plan_slot *s = p->enabled ? find_slot(p, o) : NULL;
    trm_model_step_inputs(m, o);
    if (!s || s->runs < 1) {
        trm_model_step_body(m, o);
        if (s) s->runs++;
        return;
    }
    if (!s->graph) {
        double t0 = trm_now_seconds();
        be->capture_begin(be);
        trm_model_step_body(m, o);
        s->graph = be->capture_end(be, &s->nodes);
        s->capture_ms = (trm_now_seconds() - t0) * 1e3;
    }
    be->graph_launch(be, s->graph);
}

/* what the recompute key leaves out of the saved recursion passes */
static const char *recompute_note(const trm_model *m) {
    switch (m->cfg.recompute) {
    case TRM_RECOMPUTE_ALL: return ", recompute=all: blocks run again in the backward";
    case TRM_RECOMPUTE_GATE_UP: return ", recompute=gate_up: gate/up products made again in the backward";
    default: return "";
    }
}

void trm_plan_report(trm_plan *p, FILE *f) {
    if (p->reported) return;
    trm_model *m = p->m;
    char *text;
    if (!p->enabled) {
        text = xasprintf("compile: off (%s); activations %.3g GiB in one arena, %d passes kept%s",
                         m->be->capture_begin ? "compile=false or DISABLE_COMPILE=1" : "no step graphs on this device",
                         m->act_bytes / 1073741824.0, m->saved_count, recompute_note(m));
        trm_print_wrapped(f, TRM_LINE_WIDTH, text);
        free(text);
        p->reported = 1;
        return;
    }
    const trm_plan_slot *s = NULL;
    for (int i = 0; i < TRM_PLAN_SLOTS; i++)
        if (p->slot[i].graph) {
            s = &p->slot[i];
            break;
        }
    if (!s) return;
    text = xasprintf("compile: the %s step is one graph of %zu ops (captured in %.1f ms), replayed every step; "
                     "%s activations %.3g GiB in one arena (%d passes kept%s)%s",
                     s->training ? "training" : "evaluation", s->nodes, s->capture_ms,
                     m->act_dt == TRM_BF16 ? "bf16" : "fp32", m->act_bytes / 1073741824.0, m->saved_count,
                     recompute_note(m),
                     m->be->tune_gemms && m->act_dt == TRM_BF16 ? "; GEMM algorithms timed in the first step" : "");
    trm_print_wrapped(f, TRM_LINE_WIDTH, text);
    free(text);
    p->reported = 1;
}
