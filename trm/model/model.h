/* model.h — the models, written once and device-free: parameter table, carry, the recursion
 * of the chosen architecture (arch.h: TRM, HRM, trm_singlez, trm_hier6, the transformer
 * baseline) with activations kept for the final cycle only, heads, ACT step, loss and the
 * backward pass, all through the backend table (backend.h). Activations (carry states
 * included) are in the backend's activation type (act_dt: fp32, or bf16 in a bf16 run on a
 * backend that keeps them so); trm_model_act_get/put move them to and from fp32 host memory. */
#ifndef TRM_MODEL_H
#define TRM_MODEL_H
#include <stdint.h>

#include "arch.h"
#include "backend/backend.h"
#include "util/util.h"

enum { TRM_POS_NONE = 0, TRM_POS_ROPE = 1, TRM_POS_LEARNED = 2 };

#define TRM_MAX_LAYERS 16 /* per level */
#define TRM_ARENA_CHUNKS 64
/* embed_tokens, embed_pos, 4 per layer of each level, lm_head, q_head weight and bias */
#define TRM_MAX_PARAMS (2 + 4 * TRM_NLEVELS * TRM_MAX_LAYERS + 3)

typedef struct trm_model_config {
    int arch;                /* trm_arch_id (0: TRM) */
    int batch_size;          /* local rows per step */
    int seq_len, vocab_size, num_puzzle_identifiers;
    int H_cycles, L_cycles, H_layers, L_layers;
    int hidden_size, num_heads;
    double expansion;
    int puzzle_emb_ndim, puzzle_emb_len; /* puzzle_emb_len: architectures that read it */
    int pos_encodings;       /* TRM_POS_* */
    int mlp_t;
    int halt_max_steps;
    double halt_exploration_prob;
    int no_ACT_continue;     /* architectures that read it (arch.h); the others: 0 */
    int halt_fixed;          /* transformers_baseline act_enabled=False: training halts at halt_max_steps only */
    int forward_bf16;        /* forward_dtype == bfloat16 */
    int loss_type;           /* TRM_LOSS_* */
    double rms_norm_eps, rope_theta;
    int inference_only;      /* allocate nothing for gradients/optimiser/saved activations */
    int recompute;           /* TRM_RECOMPUTE_*: what of the saved Net calls the backward computes again */
} trm_model_config;

/* recompute: none keeps every saved call's activations; gate_up keeps all but the MLPs' gate/up
 * products (2·I wide, most of a block's bytes), which the backward recomputes from the kept
 * inputs (one more gate/up product a saved block); all keeps only each saved call's input and
 * output and runs the call's blocks again (one set of block activations instead of one a call) */
#define TRM_RECOMPUTE_NONE 0
#define TRM_RECOMPUTE_GATE_UP 1
#define TRM_RECOMPUTE_ALL 2

/* One named slice of a flat parameter buffer. */
typedef struct {
    char name[96];
    int ndim;
    int64_t shape[2];
    size_t offset, numel;
} trm_param;

typedef struct trm_block_acts trm_block_acts;
typedef struct trm_net_acts trm_net_acts;

typedef struct {
    trm_model_config cfg;
    const trm_arch *arch;
    trm_backend *be;
    /* derived sizes */
    int P, T, D, H, hd, I, It, S, V, B;
    int Tp;               /* the row length of mlp_t's transposed (B, D, ·) tensors and its products'
                           * T extent: T rounded up to 8 where the GEMMs read bf16 (aligned rows; the
                           * bf16 weights padded with zeros), else T */
    int act_dt;           /* trm_dtype of activations (the backend's act_dt) */
    size_t esz;           /* bytes per activation element */
    int A;                /* attention width num_heads·head_dim (≤ D: head_dim = D // num_heads) */
    /* the blocks of each level (TRM_LEVEL_L, TRM_LEVEL_H): count and first index in p_layer */
    int level_layers[TRM_NLEVELS], level_first[TRM_NLEVELS];
    int q_target_on;      /* training bootstraps q_continue (target_q_continue) */
    /* trained tensors: one flat buffer, named slices (reference state-dict names) */
    int nparams;
    trm_param params[TRM_MAX_PARAMS];
    size_t n_flat;
    float *w, *g, *m, *v, *ema; /* ema NULL unless enabled */
    /* The weights as the GEMMs read them: the fp32 weights themselves, or (act_dt bf16) a bf16
     * copy `wg` made at the start of every step, in slices of their own layout (mlp_t's token
     * weights padded from T to Tp, with zeros, so their products see aligned rows). */
    int wdt;              /* trm_dtype of the GEMM weights */
    void *wg;             /* the bf16 copy (NULL in fp32) */
    size_t wg_off[TRM_MAX_PARAMS]; /* element offset of each parameter's slice */
    int wg_ld[TRM_MAX_PARAMS];     /* and its row stride */
    const void *wcur;     /* the GEMM weights of the step in progress (the backward reads them) */
    /* buffers: each carry state's reset vector (D; arch->init names), puzzle embedding table
     * (num_ids × ndim) */
    float *init[TRM_MAX_STATES], *puz_w;
    float *rope_cos, *rope_sin; /* T × hd */
    /* carry: arch->nstates states (B,T,D), named arch->state; z[0] feeds the heads */
    int nstates;
    void *z[TRM_MAX_STATES];
    int32_t *steps;
    uint8_t *halted;
    int32_t *cur_inputs, *cur_labels, *cur_pid;
    /* a second carry, swapped in while evaluating so training's carry survives */
    void *z2[TRM_MAX_STATES];
    int32_t *steps2, *cur_inputs2, *cur_labels2, *cur_pid2;
    uint8_t *halted2;
    /* step inputs (device copies of the batch) */
    int32_t *in_inputs, *in_labels, *in_pid;
    /* work buffers: x_emb, dx_emb, dz, dz2, tmp_rows, tmp_big and dacc are activations */
    void *x_emb, *dx_emb;
    float *d_puz_rows;
    float *logits, *dlogits, *q, *dq, *q_next, *q_target;
    int32_t *preds;
    double *metrics;      /* TRM_NMETRICS on the device */
    uint64_t *rng_step;   /* the exploration counter, written before each step */
    void *dz, *dz2, *tmp_rows, *tmp_big;
    void *dacc;           /* trm_hier6's backward: the gradient reaching every z_L (else NULL) */
    trm_net_acts *saved;  /* the final cycle's Net calls (how many: the architecture's saved_calls) */
    trm_net_acts *scratch;/* for no-grad calls */
    void *act_arena[TRM_ARENA_CHUNKS]; /* the activations, in as few allocations as the backend allows */
    int act_chunks;
    size_t act_bytes;
    int saved_count;
    /* offsets of parameters used by the forward (indices into params[]) */
    int p_tok, p_pos, p_lm, p_qw, p_qb;
    int p_layer[TRM_NLEVELS * TRM_MAX_LAYERS][4]; /* per layer: attn qkv / mlp_t gate_up, attn o / mlp_t down, mlp gate_up, mlp down */
    /* distributed: this rank's share of the global batch (B rows from row rank*B) and the
     * buffers the other ranks' rows are gathered into (world > 1 only) */
    int rank, world;
    int32_t *all_pid, *all_preds;
    float *all_puz_rows, *all_q;
    void *gather_stage; /* world × TRM_GATHER_CHUNK bytes for trm_model_carry_to_host */
} trm_model;

#define TRM_GATHER_CHUNK ((size_t)4 << 20)

/* Derived sizes check: errors on inconsistent configs (e.g. more heads than hidden_size) and
 * on settings the architecture cannot have, naming it. */
int trm_model_config_check(const trm_model_config *c, trm_err *e);
/* Puzzle positions P: arch.puzzle_emb_len where the architecture reads it and it is non-zero,
 * else ceil(puzzle_emb_ndim / hidden_size). */
int trm_model_puzzle_len(const trm_model_config *c);
/* Net calls of one level (TRM_LEVEL_*) in a training step: in the no-grad cycles and in the
 * final cycle (whose activations are saved); the bootstrapped-q pass is not counted. */
void trm_model_net_calls(const trm_model_config *c, int level, int *nograd, int *grad);
/* Allocates everything on the backend and initialises weights (JAX-style truncated normal
 * from the seed; puzzle rows zero; q_head weight 0, bias −5). ema_enabled allocates EMA. */
int trm_model_create(trm_model *m, const trm_model_config *c, trm_backend *be, uint64_t seed,
                     int ema_enabled, trm_err *e);
void trm_model_destroy(trm_model *m);
const trm_param *trm_model_find_param(const trm_model *m, const char *name);

/* Makes the model one of `world` ranks (before the first step): exploration is keyed by the
 * global row, and the gather buffers are allocated. The backend must have run comm_init. */
int trm_model_set_ranks(trm_model *m, int rank, int world, trm_err *e);
/* After a training step's backward, world > 1: sums the dense gradients over the ranks
 * (unless dense is 0, e.g. frozen weights) and gathers every rank's puzzle-row gradients and
 * ids, in rank order, for the sign-SGD update. */
void trm_model_sync_grads(trm_model *m, int dense);
/* world > 1: the current predictions and q of every rank into all_preds / all_q (rank order). */
void trm_model_gather_outputs(trm_model *m);
/* The ACT carry of the whole global batch in host memory (rank order = the batch's row order). */
typedef struct {
    int64_t rows;
    int nstates;
    float *z[TRM_MAX_STATES]; /* the model's carry states (arch->state names), fp32 */
    int32_t *steps, *inputs, *labels, *pid;
    uint8_t *halted;
} trm_carry_host;
/* Collective when world > 1: every rank's carry rows into rank 0's host memory (the other
 * ranks' *c stays empty); one process: its own carry. Free with trm_carry_host_free. */
void trm_model_carry_to_host(const trm_model *m, trm_carry_host *c);
void trm_carry_host_free(trm_carry_host *c);

/* n activations at `dev` to or from fp32 host memory (bf16 activations converted on the host;
 * rounded to nearest even on the way in). */
void trm_model_act_get(const trm_model *m, float *host, const void *dev, size_t n);
void trm_model_act_put(const trm_model *m, void *dev, const float *host, size_t n);

/* Host batch → the model's step inputs. */
void trm_model_set_batch(trm_model *m, const int32_t *inputs, const int32_t *labels,
                         const int32_t *pid);
/* Exchanges the active carry with the spare one (evaluation runs on the spare). */
void trm_model_swap_carry(trm_model *m);
/* Marks every carry row halted (start of training / a fresh evaluation batch). */
void trm_model_reset_carry(trm_model *m);

typedef struct {
    int training;         /* 1: exploration, q-halting, gradients */
    int want_grad;        /* compute gradients into m->g and m->d_puz_rows */
    float grad_scale;     /* 1 / global_batch_size */
    uint64_t seed;        /* exploration RNG */
    uint64_t rng_step;
    const float *weights; /* NULL = m->w (evaluation may pass m->ema) */
} trm_step_opts;

/* One ACT step on the carried batch: reset halted rows from the step inputs, run the inner
 * model, update halting, compute loss/metrics (accumulated into m->metrics) and, with
 * want_grad, the gradients (m->g zeroed first). */
void trm_model_act_step(trm_model *m, const trm_step_opts *o);
/* The two halves of trm_model_act_step: the host→device writes of the step's scalars, and the
 * device-only body (what the compile stage captures as a graph and replays). */
void trm_model_step_inputs(trm_model *m, const trm_step_opts *o);
void trm_model_step_body(trm_model *m, const trm_step_opts *o);

typedef struct {
    double lr, puzzle_emb_lr;
    double weight_decay, puzzle_emb_weight_decay;
    double beta1, beta2;
    int64_t t;            /* 1-based update count */
    int freeze_weights;
    int ema;
    double ema_rate;
} trm_optim_opts;

/* Sparse sign-SGD on the puzzle rows used this step, AdamATan2 on the flat weights
 * (unless frozen), EMA. */
void trm_model_optim_step(trm_model *m, const trm_optim_opts *o);

/* lr schedule of SPEC §5 (cosine with warmup). */
double trm_lr_schedule(double base, int64_t t, int64_t warmup, int64_t total, double min_ratio);

/* JAX-style truncated normal (SPEC §2) from a counter-based stream. */
void trm_trunc_normal(float *out, size_t n, double std, uint64_t seed, uint64_t stream);

#endif
