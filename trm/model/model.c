/* model.c — the parts every architecture shares, through the backend table: parameters (one
 * flat buffer with the reference's state-dict names), the blocks and the Net of a level, the
 * lm/q heads, the ACT step (reset, the architecture's recursion, halting, the bootstrapped q
 * target, loss, backward) and the optimisers. Each block's forward and backward sit next to
 * each other; the recursions are in model_trm.c and model_hrm.c. */
#include "model.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "util/util.h"

#define MAX_LAYERS TRM_MAX_LAYERS

static const trm_arch_ops *const arch_ops[TRM_NARCH] = {
    [TRM_ARCH_TRM] = &trm_ops_trm,
    [TRM_ARCH_HRM] = &trm_ops_hrm,
    [TRM_ARCH_TRM_SINGLEZ] = &trm_ops_trm_singlez,
    [TRM_ARCH_TRM_HIER6] = &trm_ops_trm_hier6,
    [TRM_ARCH_TRANSFORMERS_BASELINE] = &trm_ops_transformers_baseline,
};

static const trm_arch_ops *ops_of(const trm_model *m) { return arch_ops[m->cfg.arch]; }

/* ---------------------------------------------------------------------------------------
 * sizes, parameters, initialisation
 * ------------------------------------------------------------------------------------- */

static int ceil256(int x) { return (x + 255) / 256 * 256; }

/* Python's round(): half to even. */
static int py_round(double x) {
    double r = nearbyint(x); /* default rounding mode is to-nearest-even */
    return (int)r;
}

static int swiglu_inter(double expansion, int width) {
    return ceil256(py_round(expansion * width * 2.0 / 3.0));
}

int trm_model_puzzle_len(const trm_model_config *c) {
    const trm_arch *a = trm_arch_get((trm_arch_id)c->arch);
    if (a && a->cfg_puzzle_emb_len && c->puzzle_emb_len) return c->puzzle_emb_len;
    return c->hidden_size > 0 ? (c->puzzle_emb_ndim + c->hidden_size - 1) / c->hidden_size : 0;
}

int trm_model_config_check(const trm_model_config *c, trm_err *e) {
    /* as the reference's Attention: head_dim = hidden_size // num_heads, and the heads span
     * num_heads·head_dim ≤ hidden_size (the transformer baseline's 512 and 12 heads: 504) */
    if (c->hidden_size <= 0 || c->num_heads <= 0 || c->num_heads > c->hidden_size)
        return trm_errf(e, "arch.num_heads (%d) must be in 1..arch.hidden_size (%d)", c->num_heads, c->hidden_size);
    if ((c->hidden_size / c->num_heads) % 2 && c->pos_encodings == TRM_POS_ROPE)
        return trm_errf(e, "rope needs an even head dimension (hidden_size/num_heads = %d)",
                        c->hidden_size / c->num_heads);
    if (trm_arch_check(c, e)) return -1;
    if (c->halt_max_steps < 1) return trm_errf(e, "arch.halt_max_steps must be >= 1");
    if (c->puzzle_emb_ndim < 0 || c->puzzle_emb_len < 0)
        return trm_errf(e, "arch.puzzle_emb_ndim and arch.puzzle_emb_len must be >= 0");
    int P = trm_model_puzzle_len(c);
    if (c->puzzle_emb_ndim > P * c->hidden_size)
        return trm_errf(e, "arch.puzzle_emb_ndim (%d) exceeds puzzle_emb_len*hidden_size (%d)",
                        c->puzzle_emb_ndim, P * c->hidden_size);
    if (c->seq_len < 1 || c->vocab_size < 2 || c->batch_size < 1)
        return trm_errf(e, "seq_len, vocab_size and batch size must be positive");
    if (c->expansion <= 0) return trm_errf(e, "arch.expansion must be > 0");
    return 0;
}

static int add_param(trm_model *m, const char *name, int64_t rows, int64_t cols) {
    if (m->nparams >= TRM_MAX_PARAMS) abort(); /* unreachable: L_layers is checked first */
    trm_param *p = &m->params[m->nparams];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = cols ? 2 : 1;
    p->shape[0] = rows;
    p->shape[1] = cols;
    p->numel = (size_t)rows * (size_t)(cols ? cols : 1);
    p->offset = m->n_flat;
    m->n_flat += (p->numel + 15) / 16 * 16; /* 64-byte aligned slices */
    return m->nparams++;
}

/* The four weights of layer `j` of a level, whose global index is `l`. */
static void layout_layer(trm_model *m, const char *level, int j, int l) {
    char nm[96];
    if (m->cfg.mlp_t) {
        snprintf(nm, sizeof nm, "inner.%s.layers.%d.mlp_t.gate_up_proj.weight", level, j);
        m->p_layer[l][0] = add_param(m, nm, 2 * m->It, m->T);
        snprintf(nm, sizeof nm, "inner.%s.layers.%d.mlp_t.down_proj.weight", level, j);
        m->p_layer[l][1] = add_param(m, nm, m->T, m->It);
    } else {
        snprintf(nm, sizeof nm, "inner.%s.layers.%d.self_attn.qkv_proj.weight", level, j);
        m->p_layer[l][0] = add_param(m, nm, 3 * m->A, m->D);
        snprintf(nm, sizeof nm, "inner.%s.layers.%d.self_attn.o_proj.weight", level, j);
        m->p_layer[l][1] = add_param(m, nm, m->D, m->A);
    }
    snprintf(nm, sizeof nm, "inner.%s.layers.%d.mlp.gate_up_proj.weight", level, j);
    m->p_layer[l][2] = add_param(m, nm, 2 * m->I, m->D);
    snprintf(nm, sizeof nm, "inner.%s.layers.%d.mlp.down_proj.weight", level, j);
    m->p_layer[l][3] = add_param(m, nm, m->D, m->I);
}

/* L_level before H_level, so that TRM's parameters (and their initialisation streams) are
 * the same as before there were two levels. */
static void layout_params(trm_model *m) {
    static const char *const level_name[TRM_NLEVELS] = {"L_level", "H_level"};
    m->nparams = 0;
    m->n_flat = 0;
    m->p_tok = add_param(m, "inner.embed_tokens.embedding_weight", m->V, m->D);
    m->p_pos = m->cfg.pos_encodings == TRM_POS_LEARNED
                   ? add_param(m, "inner.embed_pos.embedding_weight", m->T, m->D)
                   : -1;
    int l = 0;
    for (int lv = 0; lv < TRM_NLEVELS; lv++) {
        m->level_first[lv] = l;
        for (int j = 0; j < m->level_layers[lv]; j++, l++) layout_layer(m, level_name[lv], j, l);
    }
    m->p_lm = add_param(m, "inner.lm_head.weight", m->V, m->D);
    m->p_qw = add_param(m, "inner.q_head.weight", 2, m->D);
    m->p_qb = add_param(m, "inner.q_head.bias", 2, 0);
}

const trm_param *trm_model_find_param(const trm_model *m, const char *name) {
    for (int i = 0; i < m->nparams; i++)
        if (strcmp(m->params[i].name, name) == 0) return &m->params[i];
    return NULL;
}

/* erfinv in double: Giles' single-precision approximation refined by two Newton steps. */
static double erfinv_d(double x) {
    if (x <= -1) return -INFINITY;
    if (x >= 1) return INFINITY;
    double w = -log((1.0 - x) * (1.0 + x)), p;
    if (w < 5.0) {
        w -= 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w;
        p = -3.5233877e-06 + p * w;
        p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w;
        p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w;
        p = 1.50140941 + p * w;
    } else {
        w = sqrt(w) - 3.0;
        p = -0.000200214257;
        p = 0.000100950558 + p * w;
        p = 0.00134934322 + p * w;
        p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w;
        p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w;
        p = 2.83297682 + p * w;
    }
    double y = p * x;
    for (int k = 0; k < 2; k++) y -= (erf(y) - x) / (2.0 / sqrt(M_PI) * exp(-y * y));
    return y;
}

void trm_trunc_normal(float *out, size_t n, double std, uint64_t seed, uint64_t stream) {
    if (std == 0) {
        memset(out, 0, n * sizeof *out);
        return;
    }
    const double lower = -2.0, upper = 2.0, sqrt2 = sqrt(2.0);
    double a = erf(lower / sqrt2), b = erf(upper / sqrt2), z = (b - a) / 2;
    double c = 1.0 / sqrt(2 * M_PI);
    double pdf_u = c * exp(-0.5 * lower * lower), pdf_l = c * exp(-0.5 * upper * upper);
    double comp_std =
        std / sqrt(1 - (upper * pdf_u - lower * pdf_l) / z - ((pdf_u - pdf_l) / z) * ((pdf_u - pdf_l) / z));
    trm_rng r;
    trm_rng_init(&r, seed, stream);
    for (size_t i = 0; i < n; i++) {
        double u = a + (b - a) * trm_rng_uniform(&r);
        double v = erfinv_d(u) * sqrt2 * comp_std;
        if (v < lower * comp_std) v = lower * comp_std;
        if (v > upper * comp_std) v = upper * comp_std;
        out[i] = (float)v;
    }
}

static void init_weights(trm_model *m, float *hw, uint64_t seed) {
    for (int i = 0; i < m->nparams; i++) {
        trm_param *p = &m->params[i];
        double std;
        if (i == m->p_tok || i == m->p_pos)
            std = 1.0 / sqrt((double)m->D);
        else if (i == m->p_qw || i == m->p_qb)
            std = 0;
        else
            std = 1.0 / sqrt((double)p->shape[1]); /* LeCun: fan_in = in_features */
        trm_trunc_normal(hw + p->offset, p->numel, std, seed, 1000 + (uint64_t)i);
        if (i == m->p_qb)
            for (size_t k = 0; k < p->numel; k++) hw[p->offset + k] = -5.0f;
    }
}

/* ---------------------------------------------------------------------------------------
 * allocation
 * ------------------------------------------------------------------------------------- */

/* The activations are carved from a few large allocations: one where the backend has no limit
 * on a single allocation, else as many as its limit needs (mps: 2 GiB on lavapipe), no tensor
 * split between two. A dry pass sizes the chunks, the second hands out pointers. */
typedef struct {
    trm_model *m;
    size_t limit;                        /* largest chunk, 0: unlimited */
    int n;                               /* chunks begun */
    size_t size[TRM_ARENA_CHUNKS];       /* dry pass: bytes of each chunk */
    char *base[TRM_ARENA_CHUNKS];
    size_t used;                         /* in the current chunk */
    size_t total;
    int dry;
} arena;

static void *arena_take(arena *a, size_t n, size_t esz) {
    size_t bytes = (n * esz + 255) / 256 * 256;
    /* past TRM_ARENA_CHUNKS the last chunk grows beyond the limit, and its allocation says so */
    int fresh = a->n == 0 || (a->limit && a->used > 0 && a->used + bytes > a->limit);
    if (fresh && a->n < TRM_ARENA_CHUNKS) {
        a->n++;
        a->used = 0;
    }
    void *p = a->dry ? NULL : (void *)(a->base[a->n - 1] + a->used);
    a->used += bytes;
    a->total += bytes;
    if (a->dry) a->size[a->n - 1] = a->used;
    return p;
}

/* The SwiGLU outputs (act, actt) live only between their activation and the next GEMM, so every
 * block shares one buffer for each and the backward recomputes them from the saved gate/up
 * values: an elementwise pass instead of (L_cycles + 1)·L_layers stored copies. With
 * recompute=gate_up the gate/up values (gu, gut) are shared the same way: the backward
 * recomputes them from the block's kept inputs just before their one reader. */
typedef struct {
    void *act, *actt, *gu, *gut;
    int share_gu; /* gu, gut are shared (the arena's dry pass hands out NULL pointers) */
} shared_bufs;

/* mlp_t's token-mixer norm with its transposes in one pass (the backend has the pair) */
static int norm_t(const trm_model *m) { return m->be->rmsnorm_t_fwd && m->be->rmsnorm_t_bwd; }

static void carve_block(trm_model *m, arena *a, trm_block_acts *k, const shared_bufs *sh) {
    size_t R = (size_t)m->B * m->T, RT = (size_t)m->B * m->D, e = m->esz, f = sizeof(float);
    if (m->cfg.mlp_t) {
        k->inT = arena_take(a, RT * m->Tp, e);
        k->gut = sh->share_gu ? sh->gut : arena_take(a, RT * 2 * m->It, e);
        k->actt = sh->actt;
        /* with the fused pair the backward reads y1, and y1ᵀ is not kept */
        k->y1T = norm_t(m) ? NULL : arena_take(a, RT * m->Tp, e);
        k->rstd1 = arena_take(a, RT, f);
    } else {
        k->qkv = arena_take(a, R * 3 * m->A, e);
        k->att = arena_take(a, R * m->A, e);
        k->lse = arena_take(a, (size_t)m->B * m->H * m->T, f);
        k->rstd1 = arena_take(a, R, f);
    }
    k->y1 = arena_take(a, R * m->D, e);
    k->gu = sh->share_gu ? sh->gu : arena_take(a, R * 2 * m->I, e);
    k->act = sh->act;
    k->y2 = arena_take(a, R * m->D, e);
    k->rstd2 = arena_take(a, R, f);
}

static void carve_acts(trm_model *m, arena *a) {
    size_t R = (size_t)m->B * m->T, RT = (size_t)m->B * m->D;
    shared_bufs sh = {.act = arena_take(a, R * m->I, m->esz)};
    if (m->cfg.mlp_t) sh.actt = arena_take(a, RT * m->It, m->esz);
    if (m->cfg.recompute == TRM_RECOMPUTE_GATE_UP) {
        sh.share_gu = 1;
        sh.gu = arena_take(a, R * 2 * m->I, m->esz);
        if (m->cfg.mlp_t) sh.gut = arena_take(a, RT * 2 * m->It, m->esz);
    }
    int layers = m->level_layers[0] > m->level_layers[1] ? m->level_layers[0] : m->level_layers[1];
    trm_block_acts shared[TRM_MAX_LAYERS];
    if (m->cfg.recompute == TRM_RECOMPUTE_ALL && m->saved_count)
        for (int l = 0; l < layers; l++) carve_block(m, a, &shared[l], &sh);
    for (int c = 0; c < m->saved_count; c++) {
        m->saved[c].x0 = arena_take(a, R * m->D, m->esz);
        if (m->cfg.recompute == TRM_RECOMPUTE_ALL) {
            m->saved[c].out = arena_take(a, R * m->D, m->esz);
            memcpy(m->saved[c].blk, shared, (size_t)layers * sizeof shared[0]);
            continue;
        }
        for (int l = 0; l < layers; l++) carve_block(m, a, &m->saved[c].blk[l], &sh);
    }
    m->scratch->x0 = arena_take(a, R * m->D, m->esz);
    for (int l = 0; l < 2; l++) carve_block(m, a, &m->scratch->blk[l], &sh);
}

/* The GEMMs' view of the weights (m->wg_off, wg_ld): fp32 weights are read where they are; a
 * bf16 copy has its own slices, 256-byte aligned, with mlp_t's token weights padded to Tp along
 * T (gate/up: columns, down: rows), their pads zero from the allocation and never written. */
static size_t layout_gemm_weights(trm_model *m) {
    size_t n = 0;
    for (int i = 0; i < m->nparams; i++) {
        const trm_param *p = &m->params[i];
        int rows = (int)p->shape[0], cols = (int)(p->ndim == 2 ? p->shape[1] : 1);
        if (m->wdt == TRM_F32) {
            m->wg_off[i] = p->offset;
            m->wg_ld[i] = cols;
            continue;
        }
        int is_gu = 0, is_down = 0, layers = m->level_layers[0] + m->level_layers[1];
        for (int l = 0; l < layers && m->cfg.mlp_t; l++) is_gu |= i == m->p_layer[l][0], is_down |= i == m->p_layer[l][1];
        m->wg_ld[i] = is_gu ? m->Tp : cols;
        m->wg_off[i] = n;
        n += ((size_t)(is_down ? m->Tp : rows) * m->wg_ld[i] + 127) / 128 * 128;
    }
    return n;
}

static size_t max3(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

/* The backward's work area (tmp_big), in activations: big1 (a gate/up or QKV gradient), big2 (a
 * SwiGLU output gradient or the attention output's), and for mlp_t's mixer w1 and w2, (B, D, Tp)
 * rows: w1 only where the norm's transposes are not fused (dy1ᵀ), w2 always. The attention mixer
 * uses neither (they had been sized (B, T, D) all the same: 2 × 76 MB at sudoku_att's shape in
 * bf16). block_bwd carves it in this order. */
static void bwd_work_sizes(const trm_model *m, size_t sz[4]) {
    size_t R = (size_t)m->B * m->T, RT = (size_t)m->B * m->D, rows_t = m->cfg.mlp_t ? RT * m->Tp : 0;
    sz[0] = max3(R * 2 * m->I, RT * 2 * m->It, R * 3 * m->A);
    sz[1] = max3(R * m->I, RT * m->It, R * m->A);
    sz[2] = norm_t(m) ? 0 : rows_t;
    sz[3] = rows_t;
    for (int i = 0; i < 4; i++) sz[i] = (sz[i] + 127) / 128 * 128; /* 256-byte aligned pieces */
}

static size_t bwd_work_elems(const trm_model *m) {
    size_t sz[4];
    bwd_work_sizes(m, sz);
    return sz[0] + sz[1] + sz[2] + sz[3];
}

static int alloc_or_fail(trm_backend *be, void **p, size_t bytes, const char *what, trm_err *e) {
    *p = be->alloc(be, bytes);
    if (*p) return 0;
    size_t fr = 0, tot = 0;
    if (be->mem_info) be->mem_info(be, &fr, &tot);
    char avail[96] = "";
    if (tot) snprintf(avail, sizeof avail, " with %.1f of %.1f GiB free", fr / 1073741824.0, tot / 1073741824.0);
    if (be->max_alloc && bytes > be->max_alloc)
        return trm_errf(e, "%s needs one buffer of %.1f MiB, more than the %s device allows in one allocation "
                           "(%.1f MiB); lower global_batch_size",
                        what, (double)bytes / 1048576.0, be->name, (double)be->max_alloc / 1048576.0);
    return trm_errf(e, "out of %s memory allocating %s (%.1f MiB%s); lower global_batch_size, "
                       "use forward_dtype=bfloat16 or fewer H/L cycles",
                    be->name, what, (double)bytes / 1048576.0, avail);
}

int trm_model_create(trm_model *m, const trm_model_config *c, trm_backend *be, uint64_t seed,
                     int ema_enabled, trm_err *e) {
    memset(m, 0, sizeof *m);
    if (trm_model_config_check(c, e)) return -1;
    m->cfg = *c;
    m->arch = trm_arch_get((trm_arch_id)c->arch);
    m->be = be;
    m->D = c->hidden_size;
    m->H = c->num_heads;
    m->hd = m->D / m->H;
    m->A = m->H * m->hd;
    m->P = trm_model_puzzle_len(c);
    m->S = c->seq_len;
    m->T = m->P + m->S;
    m->V = c->vocab_size;
    m->B = c->batch_size;
    m->I = swiglu_inter(c->expansion, m->D);
    m->It = swiglu_inter(c->expansion, m->T);
    m->act_dt = be->act_dt;
    m->esz = trm_act_size(be);
    m->wdt = m->act_dt == TRM_BF16 && be->convert ? TRM_BF16 : TRM_F32;
    if (m->act_dt == TRM_BF16 && !be->convert) return trm_errf(e, "the %s backend keeps bf16 activations but cannot convert", be->name);
    /* bf16 products want 16-byte aligned rows; fp32 ones keep mlp_t's rows T long (the cpu's
     * GEMM and passes run faster on them) */
    m->Tp = m->wdt == TRM_BF16 ? (m->T + 7) / 8 * 8 : m->T;
    m->level_layers[TRM_LEVEL_L] = m->arch->has_level[TRM_LEVEL_L] ? c->L_layers : 0;
    m->level_layers[TRM_LEVEL_H] = m->arch->has_level[TRM_LEVEL_H] ? c->H_layers : 0;
    m->nstates = m->arch->nstates;
    /* halting on q_halt alone, without a target for q_continue, only where the architecture
     * reads no_ACT_continue; the others learn q_continue unless they never use it */
    if (!m->arch->cfg_no_act_continue) m->cfg.no_ACT_continue = 0;
    m->q_target_on = m->arch->bootstraps_q && !m->cfg.no_ACT_continue && !c->inference_only;
    layout_params(m);
    size_t n_wg = layout_gemm_weights(m);

    size_t R = (size_t)m->B * m->T, fb = sizeof(float), ab = m->esz;
    size_t nw = m->n_flat * fb;
    int train = !c->inference_only;
    void **slots[] = {(void **)&m->w, (void **)&m->g, (void **)&m->m, (void **)&m->v};
    for (int i = 0; i < (train ? 4 : 1); i++)
        if (alloc_or_fail(be, slots[i], nw, "parameters", e)) return -1;
    if (ema_enabled && alloc_or_fail(be, (void **)&m->ema, nw, "EMA weights", e)) return -1;
    if (m->wdt == TRM_BF16 && alloc_or_fail(be, &m->wg, n_wg * 2, "bf16 weights", e)) return -1;
    int ndim = c->puzzle_emb_ndim;
    size_t rows_pid = (size_t)(c->num_puzzle_identifiers > 0 ? c->num_puzzle_identifiers : 1);
    struct {
        void **p;
        size_t bytes;
        const char *what;
    } bufs[] = { /* the first ones are needed for training only */
        {(void **)&m->d_puz_rows, (size_t)m->B * (ndim ? ndim : 1) * fb, "embeddings"},
        {(void **)&m->dlogits, R * m->V * fb, "logits"},
        {(void **)&m->dq, m->B * 2 * fb, "q"},
        {(void **)&m->q_next, m->B * 2 * fb, "q"},
        {(void **)&m->q_target, m->B * fb, "q"},
        {(void **)&m->dz, R * m->D * ab, "gradients"},
        {(void **)&m->dz2, R * m->D * ab, "gradients"},
        {(void **)&m->puz_w, rows_pid * (size_t)(ndim ? ndim : 1) * fb, "puzzle embeddings"},
        {(void **)&m->rope_cos, (size_t)m->T * m->hd * fb, "rope"},
        {(void **)&m->rope_sin, (size_t)m->T * m->hd * fb, "rope"},
        {(void **)&m->steps, m->B * sizeof(int32_t), "carry"},
        {(void **)&m->halted, (size_t)m->B, "carry"},
        {(void **)&m->cur_inputs, (size_t)m->B * m->S * sizeof(int32_t), "carry"},
        {(void **)&m->cur_labels, (size_t)m->B * m->S * sizeof(int32_t), "carry"},
        {(void **)&m->cur_pid, m->B * sizeof(int32_t), "carry"},
        {(void **)&m->steps2, m->B * sizeof(int32_t), "carry"},
        {(void **)&m->halted2, (size_t)m->B, "carry"},
        {(void **)&m->cur_inputs2, (size_t)m->B * m->S * sizeof(int32_t), "carry"},
        {(void **)&m->cur_labels2, (size_t)m->B * m->S * sizeof(int32_t), "carry"},
        {(void **)&m->cur_pid2, m->B * sizeof(int32_t), "carry"},
        {(void **)&m->in_inputs, (size_t)m->B * m->S * sizeof(int32_t), "batch"},
        {(void **)&m->in_labels, (size_t)m->B * m->S * sizeof(int32_t), "batch"},
        {(void **)&m->in_pid, m->B * sizeof(int32_t), "batch"},
        {(void **)&m->x_emb, R * m->D * ab, "embeddings"},
        {(void **)&m->dx_emb, R * m->D * ab, "embeddings"},
        {(void **)&m->logits, R * m->V * fb, "logits"},
        {(void **)&m->q, m->B * 2 * fb, "q"},
        {(void **)&m->preds, (size_t)m->B * m->S * sizeof(int32_t), "predictions"},
        {(void **)&m->metrics, TRM_NMETRICS * sizeof(double), "metrics"},
        {(void **)&m->rng_step, sizeof(uint64_t), "metrics"},
        {(void **)&m->tmp_rows, max3(R * m->D, c->mlp_t ? (size_t)m->B * m->D * m->Tp : 0, 0) * ab, "work"},
    };
    for (size_t i = train ? 0 : 7; i < sizeof bufs / sizeof bufs[0]; i++)
        if (alloc_or_fail(be, bufs[i].p, bufs[i].bytes, bufs[i].what, e)) return -1;
    for (int k = 0; k < m->nstates; k++)
        if (alloc_or_fail(be, (void **)&m->init[k], m->D * fb, m->arch->init[k], e) ||
            alloc_or_fail(be, &m->z[k], R * m->D * ab, "carry", e) ||
            alloc_or_fail(be, &m->z2[k], R * m->D * ab, "carry", e))
            return -1;
    /* the bootstrapped q's inner step runs on copies of the new carry, kept in the backward's
     * work area (free until the backward) */
    size_t big = bwd_work_elems(m), copies = m->q_target_on ? (size_t)m->nstates * R * m->D : 0;
    if (train && alloc_or_fail(be, &m->tmp_big, (big > copies ? big : copies) * ab, "backward work", e))
        return -1;
    if (train && ops_of(m)->needs_dacc && alloc_or_fail(be, &m->dacc, R * m->D * ab, "gradients", e))
        return -1;

    m->saved_count = train ? ops_of(m)->saved_calls(c) : 0;
    m->saved = xcalloc((size_t)m->saved_count, sizeof *m->saved);
    m->scratch = xcalloc(1, sizeof *m->scratch);
    arena a = {.m = m, .limit = be->max_alloc, .dry = 1};
    carve_acts(m, &a);
    m->act_bytes = a.total;
    m->act_chunks = a.n;
    for (int i = 0; i < a.n; i++)
        if (alloc_or_fail(be, &m->act_arena[i], a.size[i], "activations", e)) return -1;
    arena b = {.m = m, .limit = be->max_alloc};
    memcpy(b.base, m->act_arena, sizeof b.base);
    carve_acts(m, &b);

    /* host-side initialisation, then upload */
    float *hw = xcalloc(m->n_flat, sizeof(float));
    init_weights(m, hw, seed);
    be->to_device(be, m->w, hw, nw);
    if (m->ema) be->to_device(be, m->ema, hw, nw);
    free(hw);
    float *init = xmalloc(m->D * fb);
    for (int k = 0; k < m->nstates; k++) {
        trm_trunc_normal(init, (size_t)m->D, 1.0, seed, 1 + (uint64_t)k);
        be->to_device(be, m->init[k], init, m->D * fb);
    }
    free(init);
    /* rope tables: angle(t, j) = t * theta^(-2(j mod hd/2)/hd), computed in float32 as torch */
    float *cs = xmalloc((size_t)m->T * m->hd * fb), *sn = xmalloc((size_t)m->T * m->hd * fb);
    for (int t = 0; t < m->T; t++)
        for (int j = 0; j < m->hd; j++) {
            int i = j % (m->hd / 2 ? m->hd / 2 : 1);
            float expo = (float)(2 * i) / (float)m->hd;
            float inv = 1.0f / powf((float)c->rope_theta, expo);
            float ang = (float)t * inv;
            cs[t * m->hd + j] = cosf(ang);
            sn[t * m->hd + j] = sinf(ang);
        }
    be->to_device(be, m->rope_cos, cs, (size_t)m->T * m->hd * fb);
    be->to_device(be, m->rope_sin, sn, (size_t)m->T * m->hd * fb);
    free(cs);
    free(sn);
    trm_model_reset_carry(m);
    return 0;
}

void trm_model_destroy(trm_model *m) {
    if (!m->be) return;
    trm_backend *be = m->be;
    void *ptrs[] = {m->w, m->g, m->m, m->v, m->ema, m->wg, m->puz_w, m->rope_cos,
                    m->rope_sin, m->steps, m->halted, m->cur_inputs, m->cur_labels,
                    m->cur_pid, m->in_inputs, m->in_labels, m->in_pid, m->x_emb, m->dx_emb,
                    m->d_puz_rows, m->logits, m->dlogits, m->q, m->dq, m->q_next, m->q_target,
                    m->preds, m->metrics, m->rng_step, m->dz, m->dz2, m->dacc, m->tmp_rows, m->tmp_big,
                    m->steps2, m->halted2, m->cur_inputs2, m->cur_labels2, m->cur_pid2,
                    m->all_pid, m->all_preds, m->all_puz_rows, m->all_q, m->gather_stage};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i]) be->free(be, ptrs[i]);
    for (int k = 0; k < TRM_MAX_STATES; k++) {
        void *st[3] = {m->init[k], m->z[k], m->z2[k]};
        for (int i = 0; i < 3; i++)
            if (st[i]) be->free(be, st[i]);
    }
    for (int i = 0; i < m->act_chunks; i++)
        if (m->act_arena[i]) be->free(be, m->act_arena[i]);
    free(m->saved);
    free(m->scratch);
    memset(m, 0, sizeof *m);
}

int trm_model_set_ranks(trm_model *m, int rank, int world, trm_err *e) {
    m->rank = rank;
    m->world = world;
    if (world <= 1) return 0;
    trm_backend *be = m->be;
    if (!be->allreduce_sum || !be->allgather)
        return trm_errf(e, "the %s backend has no collectives; it cannot train distributed", be->name);
    size_t W = (size_t)world, B = (size_t)m->B, nd = (size_t)(m->cfg.puzzle_emb_ndim ? m->cfg.puzzle_emb_ndim : 1);
    if (alloc_or_fail(be, (void **)&m->all_preds, W * B * (size_t)m->S * sizeof(int32_t), "gathered predictions", e) ||
        alloc_or_fail(be, (void **)&m->all_q, W * B * 2 * sizeof(float), "gathered predictions", e) ||
        alloc_or_fail(be, &m->gather_stage, W * TRM_GATHER_CHUNK, "gather staging", e))
        return -1;
    if (m->cfg.inference_only) return 0;
    return alloc_or_fail(be, (void **)&m->all_pid, W * B * sizeof(int32_t), "gathered puzzle ids", e) ||
                   alloc_or_fail(be, (void **)&m->all_puz_rows, W * B * nd * sizeof(float), "gathered puzzle gradients", e)
               ? -1
               : 0;
}

void trm_model_sync_grads(trm_model *m, int dense) {
    if (m->world <= 1) return;
    trm_backend *be = m->be;
    if (dense) be->allreduce_sum(be, m->g, m->n_flat);
    if (m->cfg.puzzle_emb_ndim > 0) {
        be->allgather(be, m->cur_pid, m->all_pid, (size_t)m->B * sizeof(int32_t));
        be->allgather(be, m->d_puz_rows, m->all_puz_rows, (size_t)m->B * m->cfg.puzzle_emb_ndim * sizeof(float));
    }
}

void trm_model_gather_outputs(trm_model *m) {
    if (m->world <= 1) return;
    trm_backend *be = m->be;
    be->allgather(be, m->preds, m->all_preds, (size_t)m->B * m->S * sizeof(int32_t));
    be->allgather(be, m->q, m->all_q, (size_t)m->B * 2 * sizeof(float));
}

/* Every rank's `bytes` at `dev`, concatenated in rank order into `host` (world × bytes) on rank 0
 * (host unused elsewhere), through the staging buffer in chunks. */
static void gather_rows(const trm_model *m, const void *dev, size_t bytes, void *host) {
    trm_backend *be = m->be;
    if (m->world <= 1) {
        be->to_host(be, host, dev, bytes);
        return;
    }
    for (size_t off = 0; off < bytes; off += TRM_GATHER_CHUNK) {
        size_t c = bytes - off < TRM_GATHER_CHUNK ? bytes - off : TRM_GATHER_CHUNK;
        be->allgather(be, (const char *)dev + off, m->gather_stage, c);
        if (m->rank != 0) continue;
        for (int r = 0; r < m->world; r++)
            be->to_host(be, (char *)host + (size_t)r * bytes + off, (const char *)m->gather_stage + (size_t)r * c, c);
    }
}

/* bf16 bits → floats, from the end, so that src may be the start of dst's own memory */
static void widen_bf16(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = n; i-- > 0;) dst[i] = trm_bf16_to_f32(src[i]);
}

void trm_model_carry_to_host(const trm_model *m, trm_carry_host *c) {
    size_t W = (size_t)(m->world > 1 ? m->world : 1), B = (size_t)m->B, TD = (size_t)m->T * m->D, S = (size_t)m->S;
    int root = m->rank == 0;
    memset(c, 0, sizeof *c);
    c->rows = (int64_t)(B * W);
#define GATHER(field, dev, elem_bytes)                                                          \
    c->field = root ? xmalloc(B * W * (elem_bytes)) : NULL;                                     \
    gather_rows(m, dev, B * (elem_bytes), c->field);
    c->nstates = m->nstates;
    for (int k = 0; k < m->nstates; k++) {
        GATHER(z[k], m->z[k], TD * m->esz)
        if (root && m->act_dt == TRM_BF16) { /* widened in place */
            c->z[k] = xrealloc(c->z[k], B * W * TD * sizeof(float));
            widen_bf16(c->z[k], (const uint16_t *)c->z[k], B * W * TD);
        }
    }
    GATHER(steps, m->steps, sizeof(int32_t))
    GATHER(halted, m->halted, 1)
    GATHER(inputs, m->cur_inputs, S * sizeof(int32_t))
    GATHER(labels, m->cur_labels, S * sizeof(int32_t))
    GATHER(pid, m->cur_pid, sizeof(int32_t))
#undef GATHER
}

void trm_model_act_get(const trm_model *m, float *host, const void *dev, size_t n) {
    if (m->act_dt == TRM_F32) {
        m->be->to_host(m->be, host, dev, n * sizeof(float));
        return;
    }
    uint16_t *h = xmalloc((n ? n : 1) * sizeof *h);
    m->be->to_host(m->be, h, dev, n * sizeof *h);
    widen_bf16(host, h, n);
    free(h);
}

void trm_model_act_put(const trm_model *m, void *dev, const float *host, size_t n) {
    if (m->act_dt == TRM_F32) {
        m->be->to_device(m->be, dev, host, n * sizeof(float));
        return;
    }
    uint16_t *h = xmalloc((n ? n : 1) * sizeof *h);
    for (size_t i = 0; i < n; i++) h[i] = trm_f32_to_bf16(host[i]);
    m->be->to_device(m->be, dev, h, n * sizeof *h);
    m->be->sync(m->be); /* h is freed now: the copy must have read it */
    free(h);
}

void trm_carry_host_free(trm_carry_host *c) {
    for (int k = 0; k < TRM_MAX_STATES; k++) free(c->z[k]);
    free(c->steps);
    free(c->halted);
    free(c->inputs);
    free(c->labels);
    free(c->pid);
    memset(c, 0, sizeof *c);
}

void trm_model_set_batch(trm_model *m, const int32_t *inputs, const int32_t *labels,
                         const int32_t *pid) {
    size_t n = (size_t)m->B * m->S * sizeof(int32_t);
    m->be->to_device(m->be, m->in_inputs, inputs, n);
    m->be->to_device(m->be, m->in_labels, labels, n);
    m->be->to_device(m->be, m->in_pid, pid, m->B * sizeof(int32_t));
}

#define SWAP(a, b)              \
    do {                        \
        __typeof__(a) t_ = (a); \
        (a) = (b);              \
        (b) = t_;               \
    } while (0)

void trm_model_swap_carry(trm_model *m) {
    for (int k = 0; k < m->nstates; k++) SWAP(m->z[k], m->z2[k]);
    SWAP(m->steps, m->steps2);
    SWAP(m->halted, m->halted2);
    SWAP(m->cur_inputs, m->cur_inputs2);
    SWAP(m->cur_labels, m->cur_labels2);
    SWAP(m->cur_pid, m->cur_pid2);
}
#undef SWAP

void trm_model_reset_carry(trm_model *m) {
    uint8_t ones[1024];
    memset(ones, 1, sizeof ones);
    for (int b0 = 0; b0 < m->B; b0 += (int)sizeof ones) {
        int n = m->B - b0 < (int)sizeof ones ? m->B - b0 : (int)sizeof ones;
        m->be->to_device(m->be, m->halted + b0, ones, (size_t)n);
    }
    m->be->zero(m->be, m->steps, m->B * sizeof(int32_t));
}

/* ---------------------------------------------------------------------------------------
 * one block: forward and backward side by side
 * ------------------------------------------------------------------------------------- */

/* fp32 parameter slices (embeddings, the q bias, gradients) */
static const float *P_(const trm_model *m, const float *w, int idx) {
    return w + m->params[idx].offset;
}
static float *G_(const trm_model *m, int idx) { return m->g + m->params[idx].offset; }
/* a GEMM weight in the view `w` (m->wdt) and its row stride */
static const void *W_(const trm_model *m, const void *w, int idx) {
    return (const char *)w + m->wg_off[idx] * (m->wdt == TRM_BF16 ? 2 : 4);
}
static int WLD(const trm_model *m, int idx) { return m->wg_ld[idx]; }
/* activation pointer arithmetic */
static void *A_(const trm_model *m, const void *p, size_t elems) { return (char *)p + elems * m->esz; }

/* element types: activation-weight-activation, and the
 * weight gradients' activation-activation-fp32 */
static trm_gemm_dt dt_awa(const trm_model *m) { return (trm_gemm_dt){(uint8_t)m->act_dt, (uint8_t)m->wdt, (uint8_t)m->act_dt}; }
static trm_gemm_dt dt_aaf(const trm_model *m) { return (trm_gemm_dt){(uint8_t)m->act_dt, (uint8_t)m->act_dt, TRM_F32}; }

/* y = x·Wᵀ for x (rows × in) and W (out × in), W weight idx. */
static void linear_fwd(trm_model *m, void *y, const void *x, const void *w, int idx, int rows, int in, int out) {
    m->be->gemm(m->be, dt_awa(m), 0, 1, rows, out, in, 1.0f, x, in, 0, W_(m, w, idx), WLD(m, idx), 0, 0.0f, y, out, 0, 1);
}
/* y = rms(res + x·Wᵀ) over out (rstd saved), the block's residual and norm after the output and
 * down projections: one pass where the backend fuses them, else the product into tmp_rows (which
 * nothing else reads) and rmsnorm_fwd. The fallback passes the block input as x and the product
 * as res, as the two ops always have: the kernels round x + res to the activation type either
 * way, so which is which does not change the bits. */
static void linear_norm_fwd(trm_model *m, void *y, float *rstd, const void *res, const void *x, const void *w, int idx,
                            int rows, int in, int out) {
    trm_backend *be = m->be;
    float eps = (float)m->cfg.rms_norm_eps;
    if (be->linear_norm_fwd &&
        be->linear_norm_fwd(be, y, rstd, res, x, in, W_(m, w, idx), WLD(m, idx), m->wdt, rows, in, out, eps))
        return;
    linear_fwd(m, m->tmp_rows, x, w, idx, rows, in, out);
    be->rmsnorm_fwd(be, y, rstd, res, m->tmp_rows, rows, out, out, eps);
}
/* dW += dyᵀ·x */
static void linear_bwd_w(trm_model *m, int idx, const void *dy, const void *x, int rows, int in, int out) {
    m->be->gemm(m->be, dt_aaf(m), 1, 0, out, in, rows, 1.0f, dy, out, 0, x, in, 0, 1.0f, G_(m, idx), in, 0, 1);
}
/* dx = dy·W (+ dx when accumulate) */
static void linear_bwd_x(trm_model *m, void *dx, int idx, const void *dy, int rows, int in, int out, int accumulate) {
    m->be->gemm(m->be, dt_awa(m), 0, 0, rows, in, out, 1.0f, dy, out, 0, W_(m, m->wcur, idx), WLD(m, idx), 0,
                accumulate ? 1.0f : 0.0f, dx, in, 0, 1);
}
static void linear_bwd(trm_model *m, void *dx, int idx, const void *dy, const void *x, int rows, int in, int out,
                       int accumulate) {
    linear_bwd_w(m, idx, dy, x, rows, in, out);
    linear_bwd_x(m, dx, idx, dy, rows, in, out, accumulate);
}

/* gu = x·Wᵀ for the gate/up weight idx (2I × K), or, where the backend fuses the pair, act =
 * SwiGLU(x·Wᵀ) with gu written only when kept; returns whether act was written */
static int gate_up_product(trm_model *m, void *act, void *gu, int keep, const void *x, int ldx, const void *w,
                           int idx, int rows, int I, int K) {
    trm_backend *be = m->be;
    if (be->gate_up_swiglu &&
        be->gate_up_swiglu(be, act, keep ? gu : NULL, x, ldx, W_(m, w, idx), WLD(m, idx), m->wdt, rows, I, K))
        return 1;
    be->gemm(be, dt_awa(m), 0, 1, rows, 2 * I, K, 1.0f, x, ldx, 0, W_(m, w, idx), WLD(m, idx), 0, 0.0f, gu, 2 * I, 0, 1);
    return 0;
}

/* act = SwiGLU(x·Wᵀ); gu gets x·Wᵀ, which only the backward reads: a backend that fuses the pair
 * skips writing it for an unsaved call. */
static void gate_up_fwd(trm_model *m, void *act, void *gu, int keep, const void *x, int ldx, const void *w, int idx,
                        int rows, int I, int K) {
    if (!gate_up_product(m, act, gu, keep, x, ldx, w, idx, rows, I, K)) m->be->swiglu_fwd(m->be, act, gu, rows, I);
}

/* a saved call's gate/up product is kept for the backward unless recompute=gate_up has the
 * backward compute it again */
static int keep_gu(const trm_model *m, int save) { return save && m->cfg.recompute != TRM_RECOMPUTE_GATE_UP; }

/* dgu and act (the SwiGLU output again, for the down weight's gradient) from dact. With
 * recompute=gate_up the product gu comes again from the kept input x, inside the backend's fused
 * pass where it has one, else by the product the forward ran (the same bits; swiglu_bwd then
 * writes act). */
static void swiglu_bwd_of(trm_model *m, void *dgu, void *act, const void *dact, void *gu, const void *x, int ldx,
                          int idx, int rows, int I, int K) {
    trm_backend *be = m->be;
    if (m->cfg.recompute == TRM_RECOMPUTE_GATE_UP) {
        if (be->gate_up_swiglu_bwd && be->gate_up_swiglu_bwd(be, dgu, act, dact, x, ldx, W_(m, m->wcur, idx),
                                                             WLD(m, idx), m->wdt, rows, I, K))
            return;
        gate_up_product(m, act, gu, 1, x, ldx, m->wcur, idx, rows, I, K);
    }
    be->swiglu_bwd(be, dgu, act, dact, gu, rows, I);
}

/* The down projection's input gradient dact = dy·W (linear_bwd_x's: rows × I into dact, dy rows
 * × Kd, W the down weight dn) and the SwiGLU backward after it (dgu, act; gu, or with
 * recompute=gate_up the product of x, rows × Kg, and the gate/up weight idx), in one pass where
 * the backend fuses them (dact then never written); with recompute=gate_up the SwiGLU backward
 * is the gate/up pass's, so the product runs alone. */
static void down_swiglu_bwd(trm_model *m, void *dgu, void *act, void *dact, const void *dy, int dn, int Kd, void *gu,
                            const void *x, int ldx, int idx, int Kg, int rows, int I) {
    trm_backend *be = m->be;
    if (m->cfg.recompute != TRM_RECOMPUTE_GATE_UP && be->down_swiglu_bwd &&
        be->down_swiglu_bwd(be, dgu, act, dy, Kd, W_(m, m->wcur, dn), WLD(m, dn), m->wdt, gu, rows, I, Kd))
        return;
    linear_bwd_x(m, dact, dn, dy, rows, I, Kd, 0);
    swiglu_bwd_of(m, dgu, act, dact, gu, x, ldx, idx, rows, I, Kg);
}

/* RoPE on q and k, then attention: one pass where the backend fuses them (q and k left rotated
 * where the backward reads them: save) */
static void rope_attention_fwd(trm_model *m, trm_block_acts *k, int save) {
    trm_backend *be = m->be;
    if (m->cfg.pos_encodings == TRM_POS_ROPE) {
        if (be->attention_fwd_rope && be->attention_fwd_rope(be, k->att, k->lse, k->qkv, m->rope_cos, m->rope_sin,
                                                             m->B, m->T, m->H, m->hd, save))
            return;
        be->rope_fwd(be, k->qkv, m->rope_cos, m->rope_sin, m->B, m->T, m->H, m->hd);
    }
    be->attention_fwd(be, k->att, k->lse, k->qkv, m->B, m->T, m->H, m->hd);
}

/* The QKV product, RoPE and attention: the product and the rotation in one pass where the
 * backend fuses them (q and k then rotated in qkv, as the backward reads them), else
 * rope_attention_fwd after the product. */
static void mixer_attn_fwd(trm_model *m, const void *w, int l, trm_block_acts *k, int save) {
    trm_backend *be = m->be;
    int R = m->B * m->T, D = m->D, A = m->A, p = m->p_layer[l][0];
    if (m->cfg.pos_encodings == TRM_POS_ROPE && be->qkv_rope_fwd &&
        be->qkv_rope_fwd(be, k->qkv, k->in, D, W_(m, w, p), WLD(m, p), m->wdt, m->rope_cos, m->rope_sin, m->B, m->T,
                         m->H, m->hd, D))
        be->attention_fwd(be, k->att, k->lse, k->qkv, m->B, m->T, m->H, m->hd);
    else {
        linear_fwd(m, k->qkv, k->in, w, p, R, D, 3 * A);
        rope_attention_fwd(m, k, save);
    }
    linear_norm_fwd(m, k->y1, k->rstd1, k->in, k->att, w, m->p_layer[l][1], R, A, D);
}

/* dy1 (rows×D) → d_in. The norm's gradient goes to d_in first (the residual path) and is the
 * output projection's gradient too; the QKV product then adds its input gradient there. */
static void mixer_attn_bwd(trm_model *m, int l, trm_block_acts *k, const void *dy1, void *d_in, void *big1,
                           void *big2) {
    trm_backend *be = m->be;
    int R = m->B * m->T, D = m->D;
    be->rmsnorm_bwd(be, d_in, dy1, k->y1, k->rstd1, R, D, D); /* dx1 */
    linear_bwd(m, big2, m->p_layer[l][1], d_in, k->att, R, m->A, D, 0);
    if (m->cfg.pos_encodings != TRM_POS_ROPE)
        be->attention_bwd(be, big1, big2, k->qkv, k->att, k->lse, m->B, m->T, m->H, m->hd);
    else if (be->attention_bwd_rope) /* the rotation's transpose in the same pass */
        be->attention_bwd_rope(be, big1, big2, k->qkv, k->att, k->lse, m->rope_cos, m->rope_sin, m->B, m->T, m->H,
                               m->hd);
    else {
        be->attention_bwd(be, big1, big2, k->qkv, k->att, k->lse, m->B, m->T, m->H, m->hd);
        be->rope_bwd(be, big1, m->rope_cos, m->rope_sin, m->B, m->T, m->H, m->hd);
    }
    linear_bwd(m, d_in, m->p_layer[l][0], big1, k->in, R, D, 3 * m->A, 1);
}

/* The token-mixing MLP over T, for every (sample, channel): on the transposed input inT
 * (B·D rows of Tp, the T values then zeros), gut = inT·W_guᵀ, actt = SwiGLU(gut),
 * tmpT = actt·W_downᵀ, y1T = rms(inT + tmpT) over the T values, y1 = y1ᵀ (the last two one
 * pass where the backend has rmsnorm_t_fwd; y1T is then never kept). In bf16, rows of Tp
 * (T rounded up to 8) keep every operand aligned and the products run over Tp, the zero pads of
 * the rows and of the padded weights adding nothing; in fp32, Tp = T. */
static void mixer_mlpt_fwd(trm_model *m, const void *w, int l, trm_block_acts *k, int save) {
    trm_backend *be = m->be;
    int RT = m->B * m->D, T = m->T, Tp = m->Tp, gu = m->p_layer[l][0], dn = m->p_layer[l][1];
    float eps = (float)m->cfg.rms_norm_eps;
    /* a call the backward does not read needs y1 only: one pass where the backend fuses it */
    if (!save && be->token_mlp_fwd &&
        be->token_mlp_fwd(be, k->y1, k->rstd1, k->in, W_(m, w, gu), WLD(m, gu), W_(m, w, dn), WLD(m, dn), m->wdt,
                          m->B, T, Tp, m->D, m->It, eps))
        return;
    be->transpose(be, k->inT, Tp, k->in, m->D, m->B, T, m->D);
    gate_up_fwd(m, k->actt, k->gut, keep_gu(m, save), k->inT, Tp, w, gu, RT, m->It, Tp);
    be->gemm(be, dt_awa(m), 0, 1, RT, Tp, m->It, 1.0f, k->actt, m->It, 0, W_(m, w, dn), WLD(m, dn), 0, 0.0f,
             m->tmp_rows, Tp, 0, 1);
    if (norm_t(m)) {
        be->rmsnorm_t_fwd(be, k->y1, k->rstd1, k->inT, m->tmp_rows, m->B, T, Tp, m->D, eps);
        return;
    }
    be->rmsnorm_fwd(be, k->y1T, k->rstd1, k->inT, m->tmp_rows, RT, T, Tp, eps);
    be->transpose(be, k->y1, m->D, k->y1T, Tp, m->B, m->D, T);
}

static void mixer_mlpt_bwd(trm_model *m, int l, trm_block_acts *k, const void *dy1, void *d_in, void *w1, void *w2,
                           void *big1, void *big2) {
    trm_backend *be = m->be;
    int RT = m->B * m->D, T = m->T, Tp = m->Tp, gu = m->p_layer[l][0], dn = m->p_layer[l][1];
    const void *w = m->wcur;
    /* w2 = d(inT + tmpT), from dy1ᵀ (B, D, Tp) */
    if (norm_t(m))
        be->rmsnorm_t_bwd(be, w2, dy1, k->y1, k->rstd1, m->B, T, Tp, m->D);
    else {
        be->transpose(be, w1, Tp, dy1, m->D, m->B, T, m->D);
        be->rmsnorm_bwd(be, w2, w1, k->y1T, k->rstd1, RT, T, Tp);
    }
    /* down: dactt = w2·W; the SwiGLU gradient recomputes actt (a shared buffer) in its pass;
     * dW += w2ᵀ·actt over the T real columns */
    down_swiglu_bwd(m, big1, k->actt, big2, w2, dn, Tp, k->gut, k->inT, Tp, gu, Tp, RT, m->It);
    be->gemm(be, dt_aaf(m), 1, 0, T, m->It, RT, 1.0f, w2, Tp, 0, k->actt, m->It, 0, 1.0f, G_(m, dn), m->It, 0, 1);
    /* gate/up: dW += dgutᵀ·inT; d(inT) = w2 + dgut·W, built in w2 */
    be->gemm(be, dt_aaf(m), 1, 0, 2 * m->It, T, RT, 1.0f, big1, 2 * m->It, 0, k->inT, Tp, 0, 1.0f, G_(m, gu), T, 0, 1);
    be->gemm(be, dt_awa(m), 0, 0, RT, Tp, 2 * m->It, 1.0f, big1, 2 * m->It, 0, W_(m, w, gu), WLD(m, gu), 0, 1.0f, w2,
             Tp, 0, 1);
    be->transpose(be, d_in, m->D, w2, Tp, m->B, m->D, T);
}

/* save: the call's activations are kept for the backward */
static void block_fwd(trm_model *m, const void *w, int l, trm_block_acts *k, int save) {
    int R = m->B * m->T, D = m->D;
    if (m->cfg.mlp_t)
        mixer_mlpt_fwd(m, w, l, k, save);
    else
        mixer_attn_fwd(m, w, l, k, save);
    gate_up_fwd(m, k->act, k->gu, keep_gu(m, save), k->y1, D, w, m->p_layer[l][2], R, m->I, D);
    linear_norm_fwd(m, k->y2, k->rstd2, k->y1, k->act, w, m->p_layer[l][3], R, m->I, D);
}

/* In place: `d` holds dL/dy2 on entry and dL/d(block input) on exit. */
static void block_bwd(trm_model *m, int l, trm_block_acts *k, void *d) {
    trm_backend *be = m->be;
    int R = m->B * m->T, D = m->D;
    size_t sz[4];
    bwd_work_sizes(m, sz);
    void *big1 = m->tmp_big, *big2 = A_(m, big1, sz[0]), *w1 = A_(m, big2, sz[1]), *w2 = A_(m, w1, sz[2]);
    void *dx2 = m->dz2;
    be->rmsnorm_bwd(be, dx2, d, k->y2, k->rstd2, R, D, D);
    /* down: dact first; the SwiGLU gradient recomputes act (a shared buffer) in its pass, for
     * the weight gradient after it */
    down_swiglu_bwd(m, big1, k->act, big2, dx2, m->p_layer[l][3], D, k->gu, k->y1, D, m->p_layer[l][2], D, R, m->I);
    linear_bwd_w(m, m->p_layer[l][3], dx2, k->act, R, m->I, D);
    /* dy1 = dx2 + dgu·Wgu, built in dx2 */
    linear_bwd(m, dx2, m->p_layer[l][2], big1, k->y1, R, D, 2 * m->I, 1);
    if (m->cfg.mlp_t)
        mixer_mlpt_bwd(m, l, k, dx2, d, w1, w2, big1, big2);
    else
        mixer_attn_bwd(m, l, k, dx2, d, big1, big2);
}

/* ---------------------------------------------------------------------------------------
 * Net = blocks applied to (h + inj); the recursion; heads
 * ------------------------------------------------------------------------------------- */

/* The blocks of Net(level) on a->x0; with save, each block's activations in a->blk[j], else the
 * two scratch sets in turn. Returns the output. */
static const void *net_blocks_fwd(trm_model *m, const void *w, int level, trm_net_acts *a, int save) {
    const void *cur = a->x0;
    for (int j = 0; j < m->level_layers[level]; j++) {
        trm_block_acts *k = save ? &a->blk[j] : &a->blk[j % 2];
        k->in = cur;
        block_fwd(m, w, m->level_first[level] + j, k, save);
        cur = k->y2;
    }
    return cur;
}

const void *trm_net_fwd(trm_model *m, const void *w, int level, const void *const *parts, int nparts,
                        const void *inj, trm_net_acts *save) {
    trm_backend *be = m->be;
    trm_net_acts *a = save ? save : m->scratch;
    size_t n = (size_t)m->B * m->T * m->D;
    const void *second = nparts > 1 ? parts[1] : inj;
    if (second)
        be->add(be, a->x0, parts[0], second, n);
    else
        be->copy(be, a->x0, parts[0], n * m->esz);
    for (int i = 2; i < nparts; i++) be->axpy(be, a->x0, parts[i], 1.0f, n);
    if (inj && nparts > 1) be->axpy(be, a->x0, inj, 1.0f, n);
    const void *cur = net_blocks_fwd(m, w, level, a, save != NULL);
    if (!save || !save->out) return cur;
    trm_state_copy(m, save->out, cur); /* the shared blocks are the next saved call's */
    return save->out;
}

void trm_net_bwd(trm_model *m, int level, trm_net_acts *a, void *d) {
    if (a->out) net_blocks_fwd(m, m->wcur, level, a, 1); /* recompute: the same ops on the same x0, the same bits */
    for (int j = m->level_layers[level] - 1; j >= 0; j--) block_bwd(m, m->level_first[level] + j, &a->blk[j], d);
}

void trm_state_add(trm_model *m, void *y, const void *a, const void *b) {
    m->be->add(m->be, y, a, b, (size_t)m->B * m->T * m->D);
}

void trm_state_acc(trm_model *m, void *y, const void *x) {
    m->be->axpy(m->be, y, x, 1.0f, (size_t)m->B * m->T * m->D);
}

void trm_state_copy(trm_model *m, void *y, const void *x) {
    m->be->copy(m->be, y, x, (size_t)m->B * m->T * m->D * m->esz);
}

void trm_state_set(trm_model *m, void *const *z, const void **cur, int k, const void *out, int in_place) {
    if (in_place) {
        cur[k] = out;
        return;
    }
    trm_state_copy(m, z[k], out);
    cur[k] = z[k];
}

void trm_state_flush(trm_model *m, void *const *z, const void **cur) {
    for (int k = 0; k < m->nstates; k++)
        if (cur[k] != z[k]) trm_state_copy(m, z[k], cur[k]);
}

void trm_model_net_calls(const trm_model_config *c, int level, int *nograd, int *grad) {
    *nograd = *grad = 0;
    if (c->arch >= 0 && c->arch < TRM_NARCH) arch_ops[c->arch]->net_calls(c, level, nograd, grad);
}

/* logits (fp32, may be NULL) and q (fp32) of zH; the GEMM weights `w`, the fp32 bias from wf. */
static void heads_fwd(trm_model *m, const void *w, const float *wf, const void *zH, float *logits, float *q) {
    trm_backend *be = m->be;
    int R = m->B * m->T, D = m->D;
    trm_gemm_dt to_f32 = {(uint8_t)m->act_dt, (uint8_t)m->wdt, TRM_F32};
    if (logits) be->gemm(be, to_f32, 0, 1, R, m->V, D, 1.0f, zH, D, 0, W_(m, w, m->p_lm), WLD(m, m->p_lm), 0, 0.0f, logits, m->V, 0, 1);
    be->gemm(be, to_f32, 0, 1, m->B, 2, D, 1.0f, zH, m->T * D, 0, W_(m, w, m->p_qw), WLD(m, m->p_qw), 0, 0.0f, q, 2, 0, 1);
    be->bias_fwd(be, q, P_(m, wf, m->p_qb), m->B, 2, 2);
}

/* The fp32 output gradients (dlogits, dq) reach the activations and weights; a backend with
 * bf16 GEMMs takes them to bf16 as the reference's cast of the logits does. */
static void heads_bwd(trm_model *m, const void *zH, void *dz) {
    trm_backend *be = m->be;
    int R = m->B * m->T, D = m->D;
    const void *w = m->wcur;
    trm_gemm_dt fa_f = {TRM_F32, (uint8_t)m->act_dt, TRM_F32}, fw_a = {TRM_F32, (uint8_t)m->wdt, (uint8_t)m->act_dt};
    be->gemm(be, fa_f, 1, 0, m->V, D, R, 1.0f, m->dlogits, m->V, 0, zH, D, 0, 1.0f, G_(m, m->p_lm), D, 0, 1);
    be->gemm(be, fw_a, 0, 0, R, D, m->V, 1.0f, m->dlogits, m->V, 0, W_(m, w, m->p_lm), WLD(m, m->p_lm), 0, 0.0f, dz, D, 0, 1);
    be->gemm(be, fa_f, 1, 0, 2, D, m->B, 1.0f, m->dq, 2, 0, zH, m->T * D, 0, 1.0f, G_(m, m->p_qw), D, 0, 1);
    be->gemm(be, fw_a, 0, 0, m->B, D, 2, 1.0f, m->dq, 2, 0, W_(m, w, m->p_qw), WLD(m, m->p_qw), 0, 1.0f, dz, m->T * D, 0, 1);
    be->bias_bwd(be, G_(m, m->p_qb), m->dq, m->B, 2, 2);
}

static trm_embed_args embed_args(const trm_model *m, const float *w) {
    trm_embed_args a = {
        .B = m->B, .S = m->S, .P = m->P, .D = m->D,
        .tokens = m->cur_inputs,
        .tok_w = P_(m, w, m->p_tok),
        .puzzle_ids = m->cfg.puzzle_emb_ndim ? m->cur_pid : NULL,
        .puz_w = m->cfg.puzzle_emb_ndim ? m->puz_w : NULL,
        .ndim = m->cfg.puzzle_emb_ndim,
        .pos_w = m->p_pos >= 0 ? P_(m, w, m->p_pos) : NULL,
        .scale = (float)sqrt((double)m->D),
        .V = m->V,
    };
    return a;
}

void trm_model_step_inputs(trm_model *m, const trm_step_opts *o) {
    m->be->to_device(m->be, m->rng_step, &o->rng_step, sizeof(uint64_t));
}

void trm_model_act_step(trm_model *m, const trm_step_opts *o) {
    trm_model_step_inputs(m, o);
    trm_model_step_body(m, o);
}

/* Where halted: every carry state from its reset vector, steps 0, the row's data from the
 * batch. act_reset resets two states at a time; after the first call the rows are done, and
 * the later calls repeat only the (idempotent) step reset. */
static void reset_halted(trm_model *m) {
    trm_backend *be = m->be;
    for (int k = 0; k < m->nstates; k += 2) {
        int first = k == 0, pair = k + 1 < m->nstates;
        be->act_reset(be, m->B, m->T, m->D, first ? m->S : 0, m->halted, m->z[k], pair ? m->z[k + 1] : NULL,
                      m->init[k], pair ? m->init[k + 1] : NULL, m->steps, first ? m->cur_inputs : NULL,
                      first ? m->cur_labels : NULL, first ? m->cur_pid : NULL, first ? m->in_inputs : NULL,
                      first ? m->in_labels : NULL, first ? m->in_pid : NULL);
    }
}

/* target_q_continue: one more no-grad inner step on the new carry, which must be left
 * untouched, so it runs on copies (in the backward's work area, free until then). */
static const float *bootstrap_q(trm_model *m, const void *w, const float *wf) {
    size_t n = (size_t)m->B * m->T * m->D;
    void *copy[TRM_MAX_STATES];
    for (int k = 0; k < m->nstates; k++) {
        copy[k] = A_(m, m->tmp_big, (size_t)k * n);
        trm_state_copy(m, copy[k], m->z[k]);
    }
    ops_of(m)->forward(m, w, copy, 0);
    heads_fwd(m, w, wf, copy[0], NULL, m->q_next);
    m->be->q_target(m->be, m->B, m->q_target, m->q_next, m->steps, m->cfg.halt_max_steps);
    return m->q_target;
}

/* The weights this step's GEMMs read: the fp32 ones, or their bf16 copy made now (inside the
 * step, so a captured graph refreshes it every replay). */
static const void *gemm_weights(trm_model *m, const float *w) {
    if (m->wdt == TRM_F32) return w;
    for (int i = 0; i < m->nparams; i++) {
        const trm_param *p = &m->params[i];
        if (i == m->p_tok || i == m->p_pos || i == m->p_qb) continue; /* read in fp32 by their ops */
        int cols = (int)(p->ndim == 2 ? p->shape[1] : 1);
        m->be->convert(m->be, (char *)m->wg + m->wg_off[i] * 2, TRM_BF16, m->wg_ld[i], w + p->offset, TRM_F32, cols,
                       (int)p->shape[0], cols);
    }
    return m->wg;
}

void trm_model_step_body(trm_model *m, const trm_step_opts *o) {
    trm_backend *be = m->be;
    const float *wf = o->weights ? o->weights : m->w;
    int grad = o->want_grad && !m->cfg.inference_only;
    const void *w = gemm_weights(m, wf);
    m->wcur = w;

    reset_halted(m);
    trm_embed_args ea = embed_args(m, wf);
    be->embed_fwd(be, m->x_emb, &ea);
    ops_of(m)->forward(m, w, m->z, grad);
    heads_fwd(m, w, wf, m->z[0], m->logits, m->q);
    /* halt_fixed (the baseline without ACT) halts as evaluation does: at halt_max_steps */
    be->act_update(be, m->B, m->steps, m->halted, m->q, m->cfg.halt_max_steps, o->training && !m->cfg.halt_fixed,
                   m->cfg.no_ACT_continue, (float)m->cfg.halt_exploration_prob, o->seed,
                   (uint64_t)m->rank * (uint64_t)m->B, m->rng_step);
    const float *q_target = NULL;
    if (o->training && m->cfg.halt_max_steps > 1 && m->q_target_on && !m->cfg.halt_fixed) q_target = bootstrap_q(m, w, wf);

    trm_loss_args la = {
        .B = m->B, .S = m->S, .V = m->V, .P = m->P,
        .loss_type = m->cfg.loss_type,
        .logits = m->logits, .labels = m->cur_labels, .q = m->q, .q_target = q_target,
        .halted = m->halted, .steps = m->steps,
        .grad_scale = o->grad_scale,
        .dlogits = grad ? m->dlogits : NULL, .dq = grad ? m->dq : NULL,
        .preds = m->preds, .metrics = m->metrics,
    };
    be->loss_head(be, &la);
    if (!grad) return;

    /* ---- backward ---- */
    be->zero(be, m->g, m->n_flat * sizeof(float));
    heads_bwd(m, m->z[0], m->dz);
    be->zero(be, m->dx_emb, (size_t)m->B * m->T * m->D * m->esz);
    ops_of(m)->backward(m);
    be->embed_bwd(be, m->dx_emb, &ea, G_(m, m->p_tok), m->p_pos >= 0 ? G_(m, m->p_pos) : NULL,
                  m->cfg.puzzle_emb_ndim ? m->d_puz_rows : NULL);
}

/* ---------------------------------------------------------------------------------------
 * optimisation
 * ------------------------------------------------------------------------------------- */

double trm_lr_schedule(double base, int64_t t, int64_t warmup, int64_t total, double min_ratio) {
    if (t < warmup) return base * (double)t / (double)(warmup > 1 ? warmup : 1);
    int64_t span = total - warmup > 1 ? total - warmup : 1;
    double progress = (double)(t - warmup) / (double)span;
    double cosv = 0.5 * (1.0 + cos(M_PI * 0.5 * 2.0 * progress));
    double f = (1 - min_ratio) * cosv;
    return base * (min_ratio + (f > 0 ? f : 0));
}

void trm_model_optim_step(trm_model *m, const trm_optim_opts *o) {
    trm_backend *be = m->be;
    int dist = m->world > 1;
    if (m->cfg.puzzle_emb_ndim > 0)
        be->sign_sgd_sparse(be, m->puz_w, m->cfg.puzzle_emb_ndim, dist ? m->all_pid : m->cur_pid,
                            dist ? m->all_puz_rows : m->d_puz_rows, m->B * (dist ? m->world : 1),
                            (float)o->puzzle_emb_lr, (float)o->puzzle_emb_weight_decay);
    if (!o->freeze_weights)
        be->adam_atan2(be, m->w, m->g, m->m, m->v, m->n_flat, (float)o->lr, (float)o->weight_decay,
                       (float)o->beta1, (float)o->beta2, o->t);
    if (o->ema && m->ema) be->ema(be, m->ema, m->w, m->n_flat, (float)o->ema_rate);
}
