/* model_internal.h — what model.c shares with the files that hold each architecture's
 * recursion (model_trm.c, model_hrm.c): the Net of a level over the backend table, state
 * arithmetic, and the per-architecture entry points model.c dispatches to. Not for callers
 * outside the model. */
#ifndef TRM_MODEL_INTERNAL_H
#define TRM_MODEL_INTERNAL_H
#include "model.h"

/* One block's saved activations (act_dt; rstd and lse fp32). */
struct trm_block_acts {
    const void *in;             /* borrowed: the block's input (B,T,D) */
    void *qkv, *att;            /* attention */
    float *lse;
    void *inT, *gut, *actt, *y1T; /* mlp_t: (B, D, Tp) rows, norm over their first T */
    float *rstd1;
    void *y1;
    void *gu, *act, *y2;
    float *rstd2;
};

struct trm_net_acts {
    void *x0;
    void *out; /* recompute: the call's output, kept (blk[] is one set every saved call shares) */
    trm_block_acts blk[TRM_MAX_LAYERS];
};

/* Net(level): its blocks applied in order to x0 = ((parts[0] + parts[1]) + …) + inj, summed
 * left to right as the reference writes it (inj may be NULL). With `save` the activations stay
 * there for the backward and so does the output; without, the scratch is used and the output
 * is valid until the next call. Returns the output (B,T,D). */
const void *trm_net_fwd(trm_model *m, const void *w, int level, const void *const *parts, int nparts,
                        const void *inj, trm_net_acts *save);
/* In place: d holds dL/d(output) on entry and dL/dx0 on exit. */
void trm_net_bwd(trm_model *m, int level, trm_net_acts *a, void *d);
/* Saved Net call i of the final cycle when a gradient is wanted, else NULL (no-grad). */
static inline trm_net_acts *trm_saved_call(trm_model *m, int grad, int i) { return grad ? &m->saved[i] : NULL; }

/* (B,T,D) state arithmetic through the backend. */
void trm_state_add(trm_model *m, void *y, const void *a, const void *b); /* y = a + b */
void trm_state_acc(trm_model *m, void *y, const void *x);                /* y += x */
void trm_state_copy(trm_model *m, void *y, const void *x);

/* A state's new value. in_place: out stays valid for as long as the state is read there (a
 * saved call's activations, which hold it until the end of the final cycle; or a no-grad output
 * that only the next call reads, which forms its input x0 from its parts before its blocks reuse
 * the scratch). Else out lives in the scratch the next call reuses and is copied into the carry
 * now. cur[k] is where state k's current value is. */
void trm_state_set(trm_model *m, void *const *z, const void **cur, int k, const void *out, int in_place);
/* The final cycle's values into the carry (where they are not there already). */
void trm_state_flush(trm_model *m, void *const *z, const void **cur);

/* One architecture's recursion: `forward` runs the inner step from the carry states z (arch
 * order, reset already) and the input embedding m->x_emb, leaving the new states in z; `w` is
 * the GEMM weights (m->wdt, laid out by m->wg_off/wg_ld); with
 * grad, the final cycle's Net calls are saved in m->saved[0 .. saved_calls). z[0] feeds the
 * heads. It may use m->dx_emb as work space. `backward` takes dL/dz[0] in m->dz and adds
 * dL/dx_emb into m->dx_emb (zeroed by the caller). */
typedef struct {
    int (*saved_calls)(const trm_model_config *c);
    void (*net_calls)(const trm_model_config *c, int level, int *nograd, int *grad);
    void (*forward)(trm_model *m, const void *w, void *const *z, int grad);
    void (*backward)(trm_model *m);
    int needs_dacc; /* backward uses m->dacc */
} trm_arch_ops;

extern const trm_arch_ops trm_ops_trm, trm_ops_trm_singlez, trm_ops_trm_hier6; /* model_trm.c */
extern const trm_arch_ops trm_ops_hrm, trm_ops_transformers_baseline;         /* model_hrm.c */

#endif
