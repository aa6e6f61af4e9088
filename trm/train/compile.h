/* compile.h — the compile stage: plans a model's ACT step once and replays it. With a backend
 * that can capture (caps.compile), the first step of each kind (training, evaluation with a
 * given weight set and carry) runs eagerly, which sizes every work buffer, the second is
 * captured as one graph, and every later step replays that graph. Without it, steps run op
 * by op. Both give the same numbers: a graph replays exactly the ops the eager path issues. */
#ifndef TRM_COMPILE_H
#define TRM_COMPILE_H
#include <stdio.h>

#include "model/model.h"

#define TRM_PLAN_SLOTS 6

typedef struct {
    int used;
    int training, want_grad;
    const float *weights, *carry;
    float grad_scale;
    uint64_t seed;
    int runs;      /* eager runs so far (1 before capture) */
    void *graph;   /* backend graph handle once captured */
    size_t nodes;
    double capture_ms;
} trm_plan_slot;

typedef struct {
    trm_model *m;
    int enabled;       /* graphs in use */
    trm_plan_slot slot[TRM_PLAN_SLOTS];
    int reported;
} trm_plan;

/* enabled: the policy's compile decision (device.c); it is off anyway where the backend cannot
 * capture, or when DISABLE_COMPILE=1 is set in the environment. */
void trm_plan_init(trm_plan *p, trm_model *m, int enabled);
void trm_plan_free(trm_plan *p);
/* trm_model_act_step through the plan. */
void trm_plan_step(trm_plan *p, const trm_step_opts *o);
/* One paragraph: ops per step, graphs, arena, capture time (once, after the first capture). */
void trm_plan_report(trm_plan *p, FILE *f);

#endif
