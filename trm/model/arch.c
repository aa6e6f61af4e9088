/* arch.c — the table of architectures and the reading of their `arch.*` keys (see arch.h).
 * Required keys and defaults are those of each reference config class (pydantic): a key the
 * class declares without a default must be there; one it does not declare is ignored as
 * pydantic ignores it, unless its value asks for something the architecture cannot do. */
#include "arch.h"

#include <stdio.h>
#include <string.h>

#include "model.h"

#define NAME_TRM "recursive_reasoning.trm@TinyRecursiveReasoningModel_ACTV1"
#define NAME_HRM "recursive_reasoning.hrm@HierarchicalReasoningModel_ACTV1"
#define NAME_SINGLEZ "recursive_reasoning.trm_singlez@TinyRecursiveReasoningModel_ACTV1"
#define NAME_HIER6 "recursive_reasoning.trm_hier6@TinyRecursiveReasoningModel_ACTV1"
#define NAME_BASELINE "recursive_reasoning.transformers_baseline@Model_ACTV2"

static const trm_arch archs[TRM_NARCH] = {
    [TRM_ARCH_TRM] = {.id = TRM_ARCH_TRM, .name = NAME_TRM, .preset = "trm",
                      .nstates = 2, .state = {"z_H", "z_L"}, .init = {"H_init", "L_init"},
                      .has_level = {[TRM_LEVEL_L] = 1},
                      .cfg_puzzle_emb_len = 1, .cfg_no_act_continue = 1, .cfg_mlp_t = 1, .bootstraps_q = 1},
    [TRM_ARCH_HRM] = {.id = TRM_ARCH_HRM, .name = NAME_HRM, .preset = "hrm",
                      .nstates = 2, .state = {"z_H", "z_L"}, .init = {"H_init", "L_init"},
                      .has_level = {[TRM_LEVEL_L] = 1, [TRM_LEVEL_H] = 1},
                      .cfg_mlp_t = 1, .bootstraps_q = 1},
    [TRM_ARCH_TRM_SINGLEZ] = {.id = TRM_ARCH_TRM_SINGLEZ, .name = NAME_SINGLEZ, .preset = "trm_singlez",
                              .nstates = 1, .state = {"z_L"}, .init = {"L_init"},
                              .has_level = {[TRM_LEVEL_L] = 1},
                              .cfg_puzzle_emb_len = 1, .cfg_no_act_continue = 1, .cfg_mlp_t = 1, .bootstraps_q = 1},
    [TRM_ARCH_TRM_HIER6] = {.id = TRM_ARCH_TRM_HIER6, .name = NAME_HIER6, .preset = "trm_hier6",
                            .nstates = 7, .state = {"z_H", "z_L1", "z_L2", "z_L3", "z_L4", "z_L5", "z_L6"},
                            .init = {"H_init", "L1_init", "L2_init", "L3_init", "L4_init", "L5_init", "L6_init"},
                            .has_level = {[TRM_LEVEL_L] = 1},
                            .cfg_puzzle_emb_len = 1, .cfg_no_act_continue = 1, .cfg_mlp_t = 1, .bootstraps_q = 1},
    /* Model_ACTV2 computes a q target only when called with compute_target_q, which the
     * reference's loss head never does */
    [TRM_ARCH_TRANSFORMERS_BASELINE] = {.id = TRM_ARCH_TRANSFORMERS_BASELINE, .name = NAME_BASELINE,
                                        .preset = "transformers_baseline",
                                        .nstates = 1, .state = {"z_H"}, .init = {"H_init"},
                                        .has_level = {[TRM_LEVEL_H] = 1}},
};

const trm_arch *trm_arch_get(trm_arch_id id) {
    return id >= 0 && id < TRM_NARCH ? &archs[id] : NULL;
}

const trm_arch *trm_arch_find(const char *name) {
    for (int i = 0; i < TRM_NARCH; i++)
        if (!strcmp(archs[i].name, name)) return &archs[i];
    return NULL;
}

const char *trm_arch_known_names(void) {
    return NAME_TRM ", " NAME_HRM ", " NAME_SINGLEZ ", " NAME_HIER6 ", " NAME_BASELINE;
}

/* The keys under arch. an architecture reads or checks (read_common, read_specific,
 * run_config's loss class), for the warning about added keys that change nothing. */
int trm_arch_reads(const cfg_node *root, const char *key, const char **near, const char **preset) {
    static const char *const keys[] = {
        "arch.name", "arch.loss", "arch.loss.name", "arch.loss.loss_type", "arch.H_cycles", "arch.H_layers",
        "arch.hidden_size", "arch.num_heads", "arch.expansion", "arch.halt_max_steps", "arch.halt_exploration_prob",
        "arch.pos_encodings", "arch.puzzle_emb_ndim", "arch.forward_dtype", "arch.rms_norm_eps", "arch.rope_theta",
        "arch.mlp_t", "arch.puzzle_emb_len", "arch.no_ACT_continue",
        /* level L */ "arch.L_cycles", "arch.L_layers",
        /* the transformer baseline */ "arch.act_enabled", "arch.act_inference"};
    enum { N_ALL = sizeof keys / sizeof keys[0], N_COMMON = N_ALL - 4 };
    const cfg_node *n = cfg_get(root, "arch.name");
    const trm_arch *ar = n && n->type == CFG_STR ? trm_arch_find(n->s) : &archs[TRM_ARCH_TRM];
    if (!ar) ar = &archs[TRM_ARCH_TRM];
    const char *mine[N_ALL];
    int m = 0;
    for (int i = 0; i < N_ALL; i++) {
        int level_l = i >= N_COMMON && i < N_COMMON + 2, baseline = i >= N_COMMON + 2;
        if ((level_l && !ar->has_level[TRM_LEVEL_L]) || (baseline && ar->id != TRM_ARCH_TRANSFORMERS_BASELINE))
            continue;
        mine[m++] = keys[i];
    }
    *preset = ar->preset;
    *near = NULL;
    for (int i = 0; i < m; i++)
        if (!strcmp(mine[i], key)) return 1;
    *near = trm_nearest(key, mine, (size_t)m);
    return 0;
}

/* ---- reading one architecture's keys ---- */

typedef struct {
    const cfg_node *root;
    const trm_arch *arch;
    trm_err *e;
} reader;

static int has(const reader *r, const char *key) {
    const cfg_node *n = cfg_get(r->root, key);
    return n && n->type != CFG_NULL;
}

static int missing(const reader *r, const char *key) {
    return trm_errf(r->e, "%s: missing config key (arch.name %s needs it; configs/arch/%s.yaml has every key)", key,
                    r->arch->name, r->arch->preset);
}

/* An explicit null where a number belongs is refused as the reference's config class refuses
 * it (cfg_get_int / cfg_get_float say "expected ..., got null"), not taken as absent. */
static int is_null(const reader *r, const char *key) {
    const cfg_node *n = cfg_get(r->root, key);
    return n && n->type == CFG_NULL;
}

/* A non-negative int the architecture needs (required) or may have (default when absent). */
static int read_int(const reader *r, const char *key, int required, int dflt, int *out) {
    int64_t v;
    *out = dflt;
    if (is_null(r, key)) return cfg_get_int(r->root, key, &v, r->e);
    if (!has(r, key)) return required ? missing(r, key) : 0;
    if (cfg_get_int(r->root, key, &v, r->e)) return -1;
    if (v < 0 || v > 1 << 30) return trm_errf(r->e, "%s: %lld is out of range", key, (long long)v);
    *out = (int)v;
    return 0;
}

static int read_float(const reader *r, const char *key, int required, double dflt, double *out) {
    *out = dflt;
    if (is_null(r, key)) return cfg_get_float(r->root, key, out, r->e);
    if (!has(r, key)) return required ? missing(r, key) : 0;
    return cfg_get_float(r->root, key, out, r->e);
}

static int read_bool(const reader *r, const char *key, int dflt, int *out) {
    *out = dflt;
    return has(r, key) ? cfg_get_bool(r->root, key, out, r->e) : 0;
}

static int read_choice(const reader *r, const char *key, int required, const char *dflt, const char *const *names,
                       int n, int *out) {
    const char *s = dflt;
    if (!has(r, key) && required) return missing(r, key);
    if (has(r, key) && cfg_get_str(r->root, key, &s, 0, r->e)) return -1;
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) return *out = i, 0;
    char list[160] = "";
    for (int i = 0, o = 0; i < n; i++) o += snprintf(list + o, sizeof list - (size_t)o, "%s%s", i ? (i == n - 1 ? " or " : ", ") : "", names[i]);
    return trm_errf(r->e, "%s: expected %s, got '%s'", key, list, s);
}

/* What every architecture reads: widths, heads, ACT, positions, dtype, loss, norms. */
static int read_common(const reader *r, trm_model_config *a) {
    static const char *const pos[] = {"none", "rope", "learned"}; /* indices are TRM_POS_* */
    static const char *const dtypes[] = {"float32", "bfloat16"};
    static const char *const losses[] = {"stablemax_cross_entropy", "softmax_cross_entropy"}; /* TRM_LOSS_* */
    if (read_int(r, "arch.H_cycles", 1, 0, &a->H_cycles) || read_int(r, "arch.H_layers", 1, 0, &a->H_layers) ||
        read_int(r, "arch.hidden_size", 1, 0, &a->hidden_size) || read_int(r, "arch.num_heads", 1, 0, &a->num_heads) ||
        read_float(r, "arch.expansion", 1, 0, &a->expansion) ||
        read_int(r, "arch.halt_max_steps", 1, 0, &a->halt_max_steps) ||
        read_float(r, "arch.halt_exploration_prob", 1, 0, &a->halt_exploration_prob) ||
        read_choice(r, "arch.pos_encodings", 1, NULL, pos, 3, &a->pos_encodings) ||
        read_int(r, "arch.puzzle_emb_ndim", 0, 0, &a->puzzle_emb_ndim) ||
        read_choice(r, "arch.forward_dtype", 0, "bfloat16", dtypes, 2, &a->forward_bf16) ||
        read_choice(r, "arch.loss.loss_type", 0, "stablemax_cross_entropy", losses, 2, &a->loss_type) ||
        read_float(r, "arch.rms_norm_eps", 0, 1e-5, &a->rms_norm_eps) ||
        read_float(r, "arch.rope_theta", 0, 10000.0, &a->rope_theta))
        return -1;
    return 0;
}

/* A key the architecture's config class does not declare, whose value would ask for what the
 * architecture does not do: an error rather than pydantic's silence. */
static int refuse_setting(const reader *r, const char *key, const char *why, const char *fine) {
    return trm_errf(r->e, "%s: arch.name %s %s; set %s=%s or remove the key (configs/arch/%s.yaml has none)", key,
                    r->arch->name, why, key, fine, r->arch->preset);
}

/* An int key the architecture does not declare: absent, 0 or `allowed` is fine (the reference
 * ignores it), anything else asks for what the architecture does not do. */
static int ignored_int(const reader *r, const char *key, int allowed, const char *why) {
    int v;
    if (read_int(r, key, 0, 0, &v)) return -1;
    char fine[16];
    snprintf(fine, sizeof fine, "%d", allowed);
    return v && v != allowed ? refuse_setting(r, key, why, fine) : 0;
}

static int ignored_bool(const reader *r, const char *key, const char *why) {
    int v;
    if (read_bool(r, key, 0, &v)) return -1;
    return v ? refuse_setting(r, key, why, "false") : 0;
}

static int read_specific(const reader *r, trm_model_config *a) {
    const trm_arch *ar = r->arch;
    if (ar->has_level[TRM_LEVEL_L] &&
        (read_int(r, "arch.L_cycles", 1, 0, &a->L_cycles) || read_int(r, "arch.L_layers", 1, 0, &a->L_layers)))
        return -1;
    if (ar->cfg_mlp_t ? read_bool(r, "arch.mlp_t", 0, &a->mlp_t)
                      : ignored_bool(r, "arch.mlp_t", "always mixes tokens with attention"))
        return -1;
    if (ar->cfg_puzzle_emb_len) {
        if (read_int(r, "arch.puzzle_emb_len", 0, 16, &a->puzzle_emb_len)) return -1;
    } else {
        int P = a->hidden_size ? (a->puzzle_emb_ndim + a->hidden_size - 1) / a->hidden_size : 0;
        char why[128];
        snprintf(why, sizeof why, "always has ceil(puzzle_emb_ndim / hidden_size) = %d puzzle positions", P);
        if (ignored_int(r, "arch.puzzle_emb_len", P, why)) return -1;
    }
    if (ar->cfg_no_act_continue ? read_bool(r, "arch.no_ACT_continue", 1, &a->no_ACT_continue)
                                : ignored_bool(r, "arch.no_ACT_continue", "halts on q_halt > q_continue, it has no "
                                                                          "halt-only rule"))
        return -1;
    if (ar->id == TRM_ARCH_TRANSFORMERS_BASELINE) {
        int act_enabled, act_inference;
        if (read_bool(r, "arch.act_enabled", 1, &act_enabled) || read_bool(r, "arch.act_inference", 0, &act_inference))
            return -1;
        a->halt_fixed = !act_enabled;
        if (act_inference)
            return trm_errf(r->e, "arch.act_inference: true is not supported: trm evaluates every sequence for exactly "
                                  "halt_max_steps steps, the reference's default (false)");
    }
    return 0;
}

int trm_arch_check(const trm_model_config *c, trm_err *e) {
    const trm_arch *a = trm_arch_get((trm_arch_id)c->arch);
    if (!a) return trm_errf(e, "unknown architecture %d", c->arch);
    static const char *const layer_key[TRM_NLEVELS] = {"arch.L_layers", "arch.H_layers"};
    const int layers[TRM_NLEVELS] = {c->L_layers, c->H_layers};
    for (int lv = 0; lv < TRM_NLEVELS; lv++)
        if (a->has_level[lv] && (layers[lv] < 1 || layers[lv] > TRM_MAX_LAYERS))
            return trm_errf(e, "%s must be in 1..%d for %s (got %d)", layer_key[lv], TRM_MAX_LAYERS, a->name, layers[lv]);
    if (c->H_cycles < 1) return trm_errf(e, "arch.H_cycles must be >= 1 (got %d)", c->H_cycles);
    if (a->has_level[TRM_LEVEL_L] && c->L_cycles < 1)
        return trm_errf(e, "arch.L_cycles must be >= 1 (got %d)", c->L_cycles);
    if (a->id == TRM_ARCH_TRM_HIER6 && c->L_cycles > TRM_MAX_STATES - 1)
        return trm_errf(e, "arch.L_cycles must be <= %d for %s: L cycle i updates z_L(i+1) of its six (got %d)",
                        TRM_MAX_STATES - 1, a->name, c->L_cycles);
    if (c->mlp_t && !a->cfg_mlp_t)
        return trm_errf(e, "arch.mlp_t: %s always mixes tokens with attention", a->name);
    if (a->id == TRM_ARCH_TRANSFORMERS_BASELINE && c->pos_encodings == TRM_POS_NONE)
        return trm_errf(e, "arch.pos_encodings: %s needs rope or learned positions (the reference raises "
                           "NotImplementedError for none)", a->name);
    return 0;
}

int trm_arch_read_config(const cfg_node *root, trm_model_config *a, const char **name, trm_err *e) {
    memset(a, 0, sizeof *a);
    *name = NULL;
    const cfg_node *n = cfg_get(root, "arch.name");
    const trm_arch *ar = &archs[TRM_ARCH_TRM];
    if (n && n->type != CFG_NULL) {
        if (n->type != CFG_STR) return trm_errf(e, "arch.name: expected a string, got %s", cfg_type_name(n->type));
        *name = n->s;
        ar = trm_arch_find(n->s);
        if (!ar) return trm_errf(e, "arch.name: unknown architecture '%s'; trm builds %s", n->s, trm_arch_known_names());
    }
    a->arch = ar->id;
    reader r = {root, ar, e};
    if (read_common(&r, a) || read_specific(&r, a)) return -1;
    return trm_arch_check(a, e);
}
