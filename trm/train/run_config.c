/* run_config.c — reads the resolved cfg tree into trm_run_config (see run_config.h). */
#include "run_config.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/backend.h"

static int get_list(const cfg_node *root, const char *key, char ***out, int *n, trm_err *e) {
    *out = NULL;
    *n = 0;
    cfg_node *l = cfg_get(root, key);
    if (!l || l->type == CFG_NULL) return 0;
    if (l->type != CFG_LIST) return trm_errf(e, "%s: expected a list, got %s", key, cfg_type_name(l->type));
    *out = xcalloc((size_t)l->n + 1, sizeof **out);
    for (int i = 0; i < l->n; i++) {
        cfg_node *it = l->items[i];
        if (it->type == CFG_STR)
            (*out)[(*n)++] = xstrdup(it->s);
        else if (it->type == CFG_MAP) { /* evaluators: [{name: arc@ARC}] */
            cfg_node *nm = cfg_get(it, "name");
            if (!nm || nm->type != CFG_STR) return trm_errf(e, "%s[%d]: expected a map with a string 'name'", key, i);
            (*out)[(*n)++] = xstrdup(nm->s);
        } else
            return trm_errf(e, "%s[%d]: expected a string, got %s", key, i, cfg_type_name(it->type));
    }
    return 0;
}

static int opt_str(const cfg_node *root, const char *key, const char **out, trm_err *e) {
    *out = NULL;
    cfg_node *n = cfg_get(root, key);
    if (!n || n->type == CFG_NULL) return 0;
    if (n->type != CFG_STR) return trm_errf(e, "%s: expected a string, got %s", key, cfg_type_name(n->type));
    *out = n->s;
    return 0;
}

/* compile: auto (the default, also null) lets the device policy turn it on where the backend
 * has a compile stage; true or false is the user's explicit choice (and true on a backend
 * without one is warned about). Overrides of the string default arrive as text. */
static int read_compile(const cfg_node *root, int *out, trm_err *e) {
    const cfg_node *n = cfg_get(root, "compile");
    *out = TRM_COMPILE_AUTO;
    if (!n || n->type == CFG_NULL) return 0;
    if (n->type == CFG_BOOL) {
        *out = n->b;
        return 0;
    }
    if (n->type == CFG_STR) {
        if (!strcasecmp(n->s, "auto")) return 0;
        if (!strcasecmp(n->s, "true")) return *out = 1, 0;
        if (!strcasecmp(n->s, "false")) return *out = 0, 0;
    }
    return trm_errf(e, "compile: expected auto, true or false");
}

/* logger: tensorboard (the default, also when the key is absent) or none (also null) */
static int read_logger(const cfg_node *root, int *tensorboard, trm_err *e) {
    const char *v;
    if (opt_str(root, "logger", &v, e)) return -1;
    const cfg_node *n = cfg_get(root, "logger");
    *tensorboard = !n || (v && !strcmp(v, "tensorboard"));
    if (v && strcmp(v, "tensorboard") && strcmp(v, "none"))
        return trm_errf(e, "logger: expected tensorboard or none, got '%s'", v);
    return 0;
}

/* recompute: none, gate_up or all; false and true (the key's first form) mean none and all */
static int read_recompute(const cfg_node *root, int *out, trm_err *e) {
    const cfg_node *n = cfg_get(root, "recompute");
    *out = TRM_RECOMPUTE_NONE;
    if (!n || n->type == CFG_NULL) return 0;
    if (n->type == CFG_BOOL) return *out = n->b ? TRM_RECOMPUTE_ALL : TRM_RECOMPUTE_NONE, 0;
    if (n->type == CFG_STR) {
        if (!strcasecmp(n->s, "none") || !strcasecmp(n->s, "false")) return 0;
        if (!strcasecmp(n->s, "gate_up")) return *out = TRM_RECOMPUTE_GATE_UP, 0;
        if (!strcasecmp(n->s, "all") || !strcasecmp(n->s, "true")) return *out = TRM_RECOMPUTE_ALL, 0;
        return trm_errf(e, "recompute: expected none, gate_up or all (or false / true), got '%s'", n->s);
    }
    return trm_errf(e, "recompute: expected none, gate_up or all (or false / true), got %s", cfg_type_name(n->type));
}

static int opt_bool(const cfg_node *root, const char *key, int *out, trm_err *e) {
    *out = 0;
    if (!cfg_get(root, key) || cfg_get(root, key)->type == CFG_NULL) return 0;
    return cfg_get_bool(root, key, out, e);
}

static int opt_int(const cfg_node *root, const char *key, int64_t *out, int64_t dflt, trm_err *e) {
    *out = dflt;
    if (!cfg_get(root, key) || cfg_get(root, key)->type == CFG_NULL) return 0;
    return cfg_get_int(root, key, out, e);
}

const char *const trm_output_names[TRM_NOUTS] = {"inputs", "labels", "puzzle_identifiers", "logits",
                                                 "q_halt_logits", "q_continue_logits", "preds"};

const char *const trm_run_config_float_keys[] = {
    "lr", "lr_min_ratio", "beta1", "beta2", "weight_decay", "puzzle_emb_weight_decay", "puzzle_emb_lr", "ema_rate",
    "arch.expansion", "arch.halt_exploration_prob", "arch.rms_norm_eps", "arch.rope_theta", NULL};

#define TRM_LOSS_NAME "losses@ACTLossHead"

/* eval_save_outputs: trm's boolean, or the reference's list of names. */
static int read_save_outputs(trm_run_config *rc, const cfg_node *root, trm_err *e) {
    cfg_node *n = cfg_get(root, "eval_save_outputs");
    if (!n || n->type == CFG_NULL) return 0;
    if (n->type == CFG_BOOL) return rc->eval_save_outputs = n->b, 0;
    if (n->type != CFG_LIST)
        return trm_errf(e, "eval_save_outputs: expected a list of output names (or true), got %s", cfg_type_name(n->type));
    for (int i = 0; i < n->n; i++) {
        const cfg_node *it = n->items[i];
        int k = 0;
        while (k < TRM_NOUTS && !(it->type == CFG_STR && !strcmp(it->s, trm_output_names[k]))) k++;
        if (k == TRM_NOUTS)
            return trm_errf(e, "eval_save_outputs[%d]: %s%s%s is not an output; expected some of inputs, labels, "
                               "puzzle_identifiers, logits, q_halt_logits, q_continue_logits, preds", i,
                            it->type == CFG_STR ? "'" : "", it->type == CFG_STR ? it->s : cfg_type_name(it->type),
                            it->type == CFG_STR ? "'" : "");
        rc->eval_save_list |= 1u << k;
    }
    return 0;
}

/* The reference instantiates arch.loss.name by import; trm has that one loss head, so another
 * name is refused rather than silently trained with it (arch.name picks the architecture:
 * arch.c). */
static int check_loss_class(const cfg_node *root, trm_err *e) {
    const cfg_node *loss = cfg_get(root, "arch.loss");
    if (!loss || loss->type == CFG_NULL) return 0;
    if (loss->type != CFG_MAP) return trm_errf(e, "arch.loss: expected a map (name, loss_type), got %s", cfg_type_name(loss->type));
    for (int i = 0; i < loss->n; i++) {
        const cfg_node *k = loss->items[i];
        if (!strcmp(k->key, "name")) {
            if (k->type != CFG_STR) return trm_errf(e, "arch.loss.name: expected a string, got %s", cfg_type_name(k->type));
            if (strcmp(k->s, TRM_LOSS_NAME))
                return trm_errf(e, "arch.loss.name: trm implements the loss head %s, not '%s'", TRM_LOSS_NAME, k->s);
        } else if (strcmp(k->key, "loss_type")) {
            return trm_errf(e, "arch.loss.%s: not an argument of %s (it takes loss_type)", k->key, TRM_LOSS_NAME);
        }
    }
    return 0;
}

int trm_run_config_read(trm_run_config *rc, const cfg_node *root, trm_err *e) {
    memset(rc, 0, sizeof *rc);
    if (get_list(root, "data_paths", &rc->data_paths, &rc->n_data_paths, e)) return -1;
    if (rc->n_data_paths == 0) return trm_errf(e, "data_paths: at least one dataset directory is needed");
    if (get_list(root, "data_paths_test", &rc->data_paths_test, &rc->n_data_paths_test, e)) return -1;
    if (get_list(root, "evaluators", &rc->evaluators, &rc->n_evaluators, e)) return -1;
    if (cfg_get_int(root, "global_batch_size", &rc->global_batch_size, e)) return -1;
    if (cfg_get_int(root, "epochs", &rc->epochs, e)) return -1;
    /* eval_interval: null is the reference's "evaluate once, after all epochs" */
    const cfg_node *ei = cfg_get(root, "eval_interval");
    if (ei && ei->type == CFG_NULL) rc->eval_interval = rc->epochs;
    else if (cfg_get_int(root, "eval_interval", &rc->eval_interval, e)) return -1;
    if (opt_int(root, "min_eval_interval", &rc->min_eval_interval, 0, e)) return -1;
    if (cfg_get_bool(root, "checkpoint_every_eval", &rc->checkpoint_every_eval, e)) return -1;
    if (cfg_get_float(root, "lr", &rc->lr, e)) return -1;
    if (cfg_get_float(root, "lr_min_ratio", &rc->lr_min_ratio, e)) return -1;
    if (cfg_get_int(root, "lr_warmup_steps", &rc->lr_warmup_steps, e)) return -1;
    if (cfg_get_float(root, "beta1", &rc->beta1, e)) return -1;
    if (cfg_get_float(root, "beta2", &rc->beta2, e)) return -1;
    if (cfg_get_float(root, "weight_decay", &rc->weight_decay, e)) return -1;
    if (cfg_get_float(root, "puzzle_emb_weight_decay", &rc->puzzle_emb_weight_decay, e)) return -1;
    if (cfg_get_float(root, "puzzle_emb_lr", &rc->puzzle_emb_lr, e)) return -1;
    if (cfg_get_int(root, "seed", &rc->seed, e)) return -1;
    if (cfg_get_bool(root, "ema", &rc->ema, e)) return -1;
    if (cfg_get_float(root, "ema_rate", &rc->ema_rate, e)) return -1;
    if (cfg_get_bool(root, "freeze_weights", &rc->freeze_weights, e)) return -1;
    rc->device = "auto";
    if (opt_str(root, "device", &rc->device, e)) return -1;
    if (!rc->device) rc->device = "auto";
    if (read_compile(root, &rc->compile, e)) return -1;
    if (opt_int(root, "log_interval", &rc->log_interval, 10, e)) return -1;
    if (read_logger(root, &rc->tensorboard, e)) return -1;
    if (opt_str(root, "project_name", &rc->project_name, e) || opt_str(root, "run_name", &rc->run_name, e) ||
        opt_str(root, "load_checkpoint", &rc->load_checkpoint, e) ||
        opt_str(root, "checkpoint_path", &rc->checkpoint_path, e) || opt_str(root, "resume", &rc->resume, e))
        return -1;
    if (read_save_outputs(rc, root, e)) return -1;
    if (opt_int(root, "stop_after_steps", &rc->stop_after_steps, 0, e)) return -1;
    if (opt_bool(root, "overwrite", &rc->overwrite, e)) return -1;
    if (trm_arch_read_config(root, &rc->arch, &rc->arch_name, e)) return -1;
    /* optional: configs written before the key existed leave it off */
    if (read_recompute(root, &rc->arch.recompute, e)) return -1;
    if (check_loss_class(root, e)) return -1;

    if (rc->global_batch_size < 1) return trm_errf(e, "global_batch_size must be >= 1 (got %lld)", (long long)rc->global_batch_size);
    if (rc->eval_interval < 1) return trm_errf(e, "eval_interval must be >= 1");
    if (rc->epochs < 1 || rc->epochs % rc->eval_interval)
        return trm_errf(e, "epochs (%lld) must be a positive multiple of eval_interval (%lld)",
                        (long long)rc->epochs, (long long)rc->eval_interval);
    if (rc->log_interval < 1) return trm_errf(e, "log_interval must be >= 1");
    if (rc->lr_warmup_steps < 0) return trm_errf(e, "lr_warmup_steps must be >= 0");
    return 0;
}

static void free_list(char **l, int n) {
    for (int i = 0; i < n; i++) free(l[i]);
    free(l);
}

void trm_run_config_free(trm_run_config *rc) {
    free_list(rc->data_paths, rc->n_data_paths);
    free_list(rc->data_paths_test, rc->n_data_paths_test);
    free_list(rc->evaluators, rc->n_evaluators);
    memset(rc, 0, sizeof *rc);
}
