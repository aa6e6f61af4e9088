/* cli_convert.c — `trm convert IN OUT`: a trm checkpoint to the reference's state_dict
 * (safetensors or torch.save), or the reference's weights (torch.save or safetensors, with
 * all_config.yaml beside them or cfg=/overrides) to a trm checkpoint, checked by loading
 * them into a TRM of that config. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "commands.h"
#include "backend/backend.h"
#include "train/train.h"

static const char convert_usage[] =
    "usage: trm convert IN OUT [--compiled | --prefix P] [--force]\n"
    "       trm convert REFERENCE_FILE OUT.safetensors [cfg=NAME] [overrides] [--data DIR] [--seq-len N] [--force]\n";

typedef struct {
    const char *in, *out, *prefix, *data, *cfg_name;
    int64_t seq_len;
    int force;
    char **overrides;
    int noverrides;
} conv_args;

static int parse_args(int argc, char **argv, conv_args *a, trm_err *e) {
    memset(a, 0, sizeof *a);
    a->overrides = xcalloc((size_t)argc + 1, sizeof *a->overrides);
    for (int i = 0; i < argc; i++) {
        const char *w = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(w, "--compiled")) a->prefix = "_orig_mod.model.";
        else if (!strcmp(w, "--prefix")) {
            if (!next) return trm_errf(e, "--prefix needs a value (e.g. model. or _orig_mod.model.)");
            a->prefix = argv[++i];
        } else if (!strcmp(w, "--data")) {
            if (!next) return trm_errf(e, "--data needs a dataset directory");
            a->data = argv[++i];
        } else if (!strcmp(w, "--seq-len")) {
            if (trm_parse_i64(w, next, &a->seq_len, e)) return -1;
            if (a->seq_len < 1) return trm_errf(e, "--seq-len: expected a positive integer");
            i++;
        } else if (!strcmp(w, "--force")) a->force = 1;
        else if (!strncmp(w, "cfg=", 4)) a->cfg_name = w + 4;
        else if ((w[0] != '-' && strchr(w, '=')) || (w[0] == '~' && w[1])) a->overrides[a->noverrides++] = argv[i];
        else if (w[0] == '-') return trm_errf(e, "unknown option '%s'", w);
        else if (!a->in) a->in = w;
        else if (!a->out) a->out = w;
        else return trm_errf(e, "unexpected argument '%s'", w);
    }
    if (!a->in || !a->out) return trm_errf(e, "IN and OUT are required");
    if (!a->force && trm_file_exists(a->out))
        return trm_errf(e, "%s exists; it is kept (--force replaces it)", a->out);
    if (!trm_file_exists(a->in)) return trm_errf(e, "%s: no such file", a->in);
    return 0;
}

static int export_checkpoint(const conv_args *a, trm_err *e) {
    if (a->cfg_name || a->noverrides || a->data || a->seq_len)
        return trm_errf(e, "%s is a trm checkpoint: its config is stored in it, so cfg=, overrides, --data and "
                           "--seq-len do not apply to an export", a->in);
    const char *prefix = a->prefix ? a->prefix : "model.";
    if (trm_export_reference(a->in, a->out, prefix, e)) return -1;
    fprintf(stderr, "%s: the reference's state_dict (%sinner.*, %s) from %s\n", a->out, prefix,
            pt_is_torch_file(a->out) ? "torch.save" : "safetensors", a->in);
    return 0;
}

/* The dataset the weights were trained on, when it is here: --data, else the config's first
 * data path. Used for what the weights cannot tell (seq_len of a rope model). */
static int open_data_meta(const conv_args *a, const trm_run_config *rc, trm_dataset *d, int *have, trm_err *e) {
    *have = 0;
    const char *dir = a->data ? a->data : rc->n_data_paths ? rc->data_paths[0] : NULL;
    if (!dir || (!a->data && !trm_is_dir(dir))) return 0;
    const char *paths[1] = {dir};
    trm_err ignore;
    for (int s = 0; s < 2; s++)
        if (!trm_dataset_open(d, paths, 1, s ? "test" : "train", s ? e : &ignore)) {
            *have = 1;
            return 0;
        }
    return a->data ? trm_err_prefix(e, "--data %s", dir) : 0;
}

static int import_weights(const conv_args *a, const trm_globals *g, trm_err *e) {
    if (a->prefix) return trm_errf(e, "--compiled/--prefix name the keys of an export; %s is not a trm checkpoint", a->in);
    size_t n = strlen(a->out);
    if (n < 12 || strcmp(a->out + n - 12, ".safetensors"))
        return trm_errf(e, "%s: a trm checkpoint is a .safetensors file; name OUT accordingly", a->out);
    char **ov = trm_normalise_overrides(a->overrides, a->noverrides), *source = NULL;
    cfg_node *cfg = trm_weights_config(a->in, &g->search, a->cfg_name, a->noverrides, ov, &source, e);
    trm_free_strs(ov, a->noverrides);
    if (!cfg) return -1;
    fprintf(stderr, "config: %s\n", source);
    free(source);
    int rc = -1, have_data = 0;
    trm_run_config rcfg;
    trm_dataset d;
    trm_model m;
    trm_backend *be = NULL;
    memset(&m, 0, sizeof m);
    memset(&d, 0, sizeof d);
    if (trm_run_config_read(&rcfg, cfg, e)) goto out;
    if (open_data_meta(a, &rcfg, &d, &have_data, e)) goto out;
    trm_dataset_meta meta;
    st_file f;
    if (tensor_file_open(&f, a->in, e)) goto out;
    int bad = trm_weights_dims(&f, a->in, &rcfg.arch, have_data ? &d.meta : NULL, a->seq_len, &meta, e);
    st_close(&f);
    if (bad) goto out;
    trm_device_request req = {0};
    trm_device_choice dc;
    if (trm_device_choose("cpu", &req, &dc, NULL, e) || !(be = trm_device_open(&dc, e))) goto out;
    trm_model_config mc;
    trm_model_config_for(&mc, &rcfg, &meta, 1);
    mc.inference_only = 1;
    if (trm_model_create(&m, &mc, be, 0, 0, e) || trm_checkpoint_load_weights(&m, a->in, 0, e)) goto out;
    char *yaml = cfg_to_yaml(cfg);
    rc = trm_checkpoint_save_weights(a->out, &m, yaml, a->in, e);
    free(yaml);
    if (!rc)
        fprintf(stderr, "%s: trm weights from %s (seq_len %" PRId64 ", vocab_size %" PRId64 ", %" PRId64 " puzzle ids)\n",
                a->out, a->in, meta.seq_len, meta.vocab_size, meta.num_puzzle_identifiers);
out:
    if (m.be) trm_model_destroy(&m);
    if (be) be->destroy(be);
    if (have_data) trm_dataset_close(&d);
    trm_run_config_free(&rcfg);
    cfg_free(cfg);
    return rc;
}

int cmd_convert(int argc, char **argv, const trm_globals *g) {
    conv_args a;
    trm_err e = {{0}};
    int rc = parse_args(argc, argv, &a, &e);
    if (rc) {
        fprintf(stderr, "trm convert: %s\n%s", e.msg, convert_usage);
        free(a.overrides);
        return 2;
    }
    st_file f;
    int is_trm = 0;
    if (!tensor_file_open(&f, a.in, &e)) {
        is_trm = trm_checkpoint_format(&f) != NULL;
        st_close(&f);
        rc = is_trm ? export_checkpoint(&a, &e) : import_weights(&a, g, &e);
    } else {
        rc = -1;
    }
    if (rc) fprintf(stderr, "trm convert: %s\n", e.msg);
    free(a.overrides);
    return rc ? 1 : 0;
}
