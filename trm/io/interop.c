/* interop.c — trm checkpoints to and from the reference's files (see interop.h). */
#include "interop.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "torch_pt.h"

static char *dir_of(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? xstrndup(path, s == path ? 1 : (size_t)(s - path)) : xstrdup(".");
}

cfg_node *trm_weights_config(const char *path, const cfg_search *s, const char *cfg_name, int nov, char *const *ov,
                             char **source, trm_err *e) {
    *source = NULL;
    st_file f;
    if (tensor_file_open(&f, path, e)) return NULL;
    const char *stored = st_meta_get(&f, "config");
    if (stored && *stored) {
        cfg_node *cfg = cfg_from_stored(path, stored, s, nov, ov, e);
        st_close(&f);
        if (cfg)
            *source = xasprintf("the config stored in %s%s%s%s", path, cfg_name ? " (cfg=" : "", cfg_name ? cfg_name : "",
                                cfg_name ? " is not used)" : "");
        return cfg;
    }
    st_close(&f);
    const char *base = cfg_name ? cfg_name : "cfg_pretrain";
    char *dir = dir_of(path), *ac = trm_path_join(dir, "all_config.yaml");
    free(dir);
    cfg_node *cfg = NULL;
    if (trm_file_exists(ac)) {
        size_t len;
        char *text = trm_read_file_max(ac, CFG_MAX_FILE_BYTES, &len, e);
        cfg_node *overlay = text ? cfg_parse(text, len, ac, e) : NULL;
        free(text);
        if (overlay && overlay->type != CFG_MAP) {
            trm_errf(e, "%s: expected the reference's run config (a map of keys), got %s", ac, cfg_type_name(overlay->type));
            cfg_free(overlay);
            overlay = NULL;
        }
        if (overlay) cfg = cfg_compose_over(s, cfg_name, overlay, nov, ov, e);
        if (cfg) *source = xasprintf("%s (the reference's run config) over trm's %s", ac, base);
    } else {
        cfg = cfg_compose(s, cfg_name, nov, ov, e);
        if (cfg)
            *source = xasprintf("%s%s (%s stores no config and has no all_config.yaml beside it)", base,
                                nov ? " with the command-line overrides" : "", path);
    }
    free(ac);
    return cfg;
}

static const st_tensor *find_canonical(const st_file *f, const char *name) {
    for (int i = 0; i < f->ntensors; i++)
        if (!strcmp(trm_ckpt_canonical_name(f->tensors[i].name), name)) return &f->tensors[i];
    return NULL;
}

static int meta_dim(const st_file *f, const char *key, int64_t *out) {
    const char *v = st_meta_get(f, key);
    char *end;
    if (!v) return 0;
    long long x = strtoll(v, &end, 10);
    if (*end || end == v || x < 1) return 0;
    *out = x;
    return 1;
}

int trm_weights_dims(const st_file *f, const char *path, const trm_model_config *arch, const trm_dataset_meta *data,
                     int64_t seq_len, trm_dataset_meta *out, trm_err *e) {
    memset(out, 0, sizeof *out);
    if (meta_dim(f, "model.seq_len", &out->seq_len) && meta_dim(f, "model.vocab_size", &out->vocab_size) &&
        meta_dim(f, "model.num_puzzle_identifiers", &out->num_puzzle_identifiers))
        return 0; /* written by trm, which knew its data */
    const st_tensor *emb = find_canonical(f, "inner.embed_tokens.embedding_weight");
    if (!emb || emb->ndim != 2)
        return trm_errf(e, "%s: no inner.embed_tokens.embedding_weight of 2 dimensions: not the weights of a TRM", path);
    out->vocab_size = emb->shape[0];
    const st_tensor *puz = find_canonical(f, "inner.puzzle_emb.weights");
    out->num_puzzle_identifiers = puz && puz->ndim == 2 ? puz->shape[0] : data ? data->num_puzzle_identifiers : 1;
    int D = arch->hidden_size > 0 ? arch->hidden_size : 1;
    int64_t P = arch->puzzle_emb_len ? arch->puzzle_emb_len : (arch->puzzle_emb_ndim + D - 1) / D, T = 0, S = 0;
    const st_tensor *pos = find_canonical(f, "inner.embed_pos.embedding_weight");
    const st_tensor *mix = find_canonical(f, "inner.L_level.layers.0.mlp_t.gate_up_proj.weight");
    if (arch->pos_encodings == TRM_POS_LEARNED && pos && pos->ndim == 2) T = pos->shape[0]; /* T rows */
    else if (arch->mlp_t && mix && mix->ndim == 2) T = mix->shape[1]; /* token mixing over T positions */
    if (T) {
        S = T - P;
        if (S < 1)
            return trm_errf(e, "%s: the weights cover %" PRId64 " positions, not more than the %" PRId64
                               " of the puzzle embedding (arch.puzzle_emb_len / puzzle_emb_ndim differ from the run's?)",
                            path, T, P);
    }
    if (seq_len > 0) {
        if (S && S != seq_len)
            return trm_errf(e, "%s: the weights are for seq_len %" PRId64 ", not %" PRId64, path, S, seq_len);
        S = seq_len;
    }
    if (!S && data) S = data->seq_len;
    if (!S)
        return trm_errf(e, "%s: the weights of an attention model with %s positions do not tell seq_len; give --data DIR "
                           "(the dataset it was trained on) or --seq-len N",
                        path, arch->pos_encodings == TRM_POS_ROPE ? "rope" : "no");
    out->seq_len = S;
    return 0;
}

/* ---- export ------------------------------------------------------------------------------ */

/* A carry state's reset vector (inner.H_init, inner.L_init, inner.L3_init, ...): a buffer the
 * reference holds in forward_dtype. */
static int is_init_buffer(const char *n) {
    size_t len = strlen(n);
    return !strncmp(n, "inner.", 6) && !strchr(n + 6, '.') && len > 11 && !strcmp(n + len - 5, "_init");
}

/* Position in the reference's state_dict: TinyRecursiveReasoningModel_ACTV1_Inner's own
 * buffers first, then its modules in registration order, layers in order. */
static long ref_rank(const char *n) {
    static const char *const head[] = {"inner.H_init", "inner.L_init", "inner.embed_tokens.embedding_weight",
                                       "inner.lm_head.weight", "inner.q_head.weight", "inner.q_head.bias",
                                       "inner.puzzle_emb.weights", "inner.embed_pos.embedding_weight"};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        if (!strcmp(n, head[i])) return (long)i;
    static const char *const layer[] = {"self_attn.qkv_proj.weight", "mlp_t.gate_up_proj.weight", "self_attn.o_proj.weight",
                                        "mlp_t.down_proj.weight", "mlp.gate_up_proj.weight", "mlp.down_proj.weight"};
    static const int sub[] = {0, 0, 1, 1, 2, 3};
    const char *pre = "inner.L_level.layers.";
    if (!strncmp(n, pre, strlen(pre))) {
        char *end;
        long l = strtol(n + strlen(pre), &end, 10);
        for (size_t i = 0; *end == '.' && i < sizeof layer / sizeof layer[0]; i++)
            if (!strcmp(end + 1, layer[i])) return 100 + 4 * l + sub[i];
    }
    return 1L << 30;
}

typedef struct {
    const st_tensor *t;
    long rank;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return strcmp(x->t->name, y->t->name);
}

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

static int stored_bf16(const st_file *f, const char *path, int *bf16, trm_err *e) {
    const char *text = st_meta_get(f, "config");
    *bf16 = 1; /* the reference's default forward_dtype */
    if (!text || !*text) return 0;
    cfg_node *cfg = cfg_parse(text, strlen(text), path, e);
    if (!cfg) return trm_err_prefix(e, "%s: the stored config", path);
    const cfg_node *fd = cfg_get(cfg, "arch.forward_dtype");
    if (fd && fd->type == CFG_STR) *bf16 = strcmp(fd->s, "float32") != 0;
    cfg_free(cfg);
    return 0;
}

int trm_export_reference(const char *in, const char *out, const char *prefix, trm_err *e) {
    st_file f;
    if (tensor_file_open(&f, in, e)) return -1;
    int rc = -1, bf16, n = 0;
    ranked *r = xcalloc((size_t)f.ntensors + 1, sizeof *r);
    void **bufs = xcalloc((size_t)f.ntensors + 1, sizeof *bufs);
    st_writer w;
    st_writer_init(&w);
    if (!trm_checkpoint_format(&f)) {
        trm_errf(e, "%s: not a trm checkpoint; to take the reference's weights into trm, convert the other way "
                    "(trm convert REFERENCE_FILE OUT.safetensors)", in);
        goto out;
    }
    if (stored_bf16(&f, in, &bf16, e)) goto out;
    for (int i = 0; i < f.ntensors; i++)
        if (!strncmp(f.tensors[i].name, "inner.", 6)) r[n++] = (ranked){&f.tensors[i], ref_rank(f.tensors[i].name)};
    qsort(r, (size_t)n, sizeof *r, cmp_ranked);
    for (int i = 0; i < n; i++) {
        const st_tensor *t = r[i].t;
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (size_t)t->shape[d];
        float *x = xmalloc(numel * sizeof(float) + 1);
        bufs[i] = x;
        if (st_read_f32(t, x, e)) {
            trm_err_prefix(e, "%s", in);
            goto out;
        }
        int init = is_init_buffer(t->name);
        const void *data = x;
        st_dtype dt = ST_F32;
        if (init && bf16) { /* nn.Buffer(..., dtype=forward_dtype) in the reference */
            uint16_t *h = xmalloc(numel * sizeof(uint16_t) + 1);
            for (size_t k = 0; k < numel; k++) h[k] = trm_f32_to_bf16(x[k]);
            free(x);
            bufs[i] = h;
            data = h;
            dt = ST_BF16;
        }
        char *name = xasprintf("%s%s", prefix, t->name);
        st_writer_add(&w, name, dt, t->ndim, t->shape, data);
        free(name);
    }
    st_writer_meta(&w, "format", "pt"); /* what safetensors.torch.save_file writes */
    rc = ends_with(out, ".safetensors") ? st_writer_save(&w, out, e) : pt_save(&w, out, 1, e);
out:
    st_writer_free(&w);
    for (int i = 0; i < f.ntensors; i++) free(bufs[i]);
    free(bufs);
    free(r);
    st_close(&f);
    return rc;
}
