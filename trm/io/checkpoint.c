/* checkpoint.c — save/load of trm checkpoints (see checkpoint.h). Device tensors are staged
 * through host buffers so the format is the same whatever backend wrote it. */
#include "checkpoint.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "torch_pt.h"

#define CKPT_FORMAT "trm-checkpoint-1"
#define WEIGHTS_FORMAT "trm-weights-1"

typedef struct {
    st_writer w;
    void *bufs[512];
    int nbufs;
    trm_backend *be;
} saver;

static void add_dev(saver *s, const char *name, st_dtype dt, int ndim, const int64_t *shape,
                    const void *dev, size_t bytes) {
    void *h = xmalloc(bytes ? bytes : 1);
    if (bytes) s->be->to_host(s->be, h, dev, bytes);
    s->bufs[s->nbufs++] = h;
    st_writer_add(&s->w, name, dt, ndim, shape, h);
}

/* Each carry state's reset vector under the reference's buffer name (inner.H_init, ...). */
static void add_inits(saver *s, const trm_model *m) {
    int64_t d1[1] = {m->D};
    for (int k = 0; k < m->nstates; k++) {
        char *nm = xasprintf("inner.%s", m->arch->init[k]);
        add_dev(s, nm, ST_F32, 1, d1, m->init[k], m->D * sizeof(float));
        free(nm);
    }
}

static void add_params(saver *s, const trm_model *m, const char *prefix, const float *base) {
    for (int i = 0; i < m->nparams; i++) {
        const trm_param *p = &m->params[i];
        char *nm = xasprintf("%s%s", prefix, p->name);
        add_dev(s, nm, ST_F32, p->ndim, p->shape, base + p->offset, p->numel * sizeof(float));
        free(nm);
    }
}

int trm_checkpoint_save(const char *path, const trm_model *m, const char *config_yaml,
                        const trm_ckpt_state *st, trm_err *e) {
    saver s = {.nbufs = 0, .be = m->be};
    st_writer_init(&s.w);
    add_params(&s, m, "", m->ema ? m->ema : m->w);
    if (m->ema) add_params(&s, m, "raw.", m->w);
    add_params(&s, m, "optim.exp_avg.", m->m);
    add_params(&s, m, "optim.exp_avg_sq.", m->v);
    add_inits(&s, m);
    if (m->cfg.puzzle_emb_ndim) {
        int64_t sh[2] = {m->cfg.num_puzzle_identifiers, m->cfg.puzzle_emb_ndim};
        add_dev(&s, "inner.puzzle_emb.weights", ST_F32, 2, sh, m->puz_w,
                (size_t)sh[0] * (size_t)sh[1] * sizeof(float));
    }
    trm_carry_host own = {0};
    const trm_carry_host *c = st->carry;
    if (!c) { /* one process: not a collective */
        trm_model_carry_to_host(m, &own);
        c = &own;
    }
    int64_t rows = c->rows;
    int64_t zs[3] = {rows, m->T, m->D}, bs[1] = {rows}, ds[2] = {rows, m->S};
    char *znames[TRM_MAX_STATES] = {0};
    for (int k = 0; k < m->nstates; k++) {
        znames[k] = xasprintf("carry.%s", m->arch->state[k]);
        st_writer_add(&s.w, znames[k], ST_F32, 3, zs, c->z[k]);
    }
    st_writer_add(&s.w, "carry.steps", ST_I32, 1, bs, c->steps);
    st_writer_add(&s.w, "carry.halted", ST_BOOL, 1, bs, c->halted);
    st_writer_add(&s.w, "carry.inputs", ST_I32, 2, ds, c->inputs);
    st_writer_add(&s.w, "carry.labels", ST_I32, 2, ds, c->labels);
    st_writer_add(&s.w, "carry.puzzle_identifiers", ST_I32, 1, bs, c->pid);

    char buf[64];
    st_writer_meta(&s.w, "format", CKPT_FORMAT);
    st_writer_meta(&s.w, "arch", m->arch->name);
    st_writer_meta(&s.w, "trm_version", TRM_VERSION);
    st_writer_meta(&s.w, "config", config_yaml ? config_yaml : "");
    st_writer_meta(&s.w, "ema", m->ema ? "true" : "false");
#define META_I(key, val) (snprintf(buf, sizeof buf, "%" PRId64, (int64_t)(val)), st_writer_meta(&s.w, key, buf))
    META_I("step", st->step);
    META_I("total_steps", st->total_steps);
    META_I("world_size", st->world_size);
    META_I("model.seq_len", m->S);
    META_I("model.vocab_size", m->V);
    META_I("model.num_puzzle_identifiers", m->cfg.num_puzzle_identifiers);
    META_I("model.batch_size", rows);
    if (st->has_sampler) {
        META_I("sampler.seed", st->sampler.seed);
        META_I("sampler.epochs_per_iter", st->sampler.epochs_per_iter);
        META_I("sampler.global_batch_size", st->sampler.global_batch_size);
        META_I("sampler.iter", st->sampler.iter);
        META_I("sampler.set_index", st->sampler.set_index);
        META_I("sampler.group_pos", st->sampler.group_pos);
        META_I("sampler.batch_index", st->sampler.batch_index);
    }
#undef META_I
    int rc = st_writer_save(&s.w, path, e);
    st_writer_free(&s.w);
    for (int i = 0; i < s.nbufs; i++) free(s.bufs[i]);
    for (int k = 0; k < m->nstates; k++) free(znames[k]);
    trm_carry_host_free(&own);
    return rc;
}

int trm_checkpoint_save_weights(const char *path, const trm_model *m, const char *config_yaml, const char *source,
                                trm_err *e) {
    saver s = {.nbufs = 0, .be = m->be};
    st_writer_init(&s.w);
    add_params(&s, m, "", m->w);
    add_inits(&s, m);
    if (m->cfg.puzzle_emb_ndim) {
        int64_t sh[2] = {m->cfg.num_puzzle_identifiers, m->cfg.puzzle_emb_ndim};
        add_dev(&s, "inner.puzzle_emb.weights", ST_F32, 2, sh, m->puz_w, (size_t)sh[0] * (size_t)sh[1] * sizeof(float));
    }
    char buf[64];
    st_writer_meta(&s.w, "format", WEIGHTS_FORMAT);
    st_writer_meta(&s.w, "arch", m->arch->name);
    st_writer_meta(&s.w, "trm_version", TRM_VERSION);
    st_writer_meta(&s.w, "config", config_yaml ? config_yaml : "");
    st_writer_meta(&s.w, "ema", "false");
    if (source) st_writer_meta(&s.w, "source", source);
#define META_I(key, val) (snprintf(buf, sizeof buf, "%" PRId64, (int64_t)(val)), st_writer_meta(&s.w, key, buf))
    META_I("model.seq_len", m->S);
    META_I("model.vocab_size", m->V);
    META_I("model.num_puzzle_identifiers", m->cfg.num_puzzle_identifiers);
#undef META_I
    int rc = st_writer_save(&s.w, path, e);
    st_writer_free(&s.w);
    for (int i = 0; i < s.nbufs; i++) free(s.bufs[i]);
    return rc;
}

const char *trm_checkpoint_format(const st_file *f) {
    const char *fmt = st_meta_get(f, "format");
    if (fmt && (!strcmp(fmt, CKPT_FORMAT) || !strcmp(fmt, WEIGHTS_FORMAT))) return fmt;
    return NULL;
}

/* ---- loading ---- */

const char *trm_ckpt_canonical_name(const char *name) {
    static const char *const wrappers[] = {"_orig_mod.", "module.", "model."};
    for (int hit = 1; hit;) {
        hit = 0;
        for (size_t i = 0; i < sizeof wrappers / sizeof wrappers[0]; i++)
            if (!strncmp(name, wrappers[i], strlen(wrappers[i]))) {
                name += strlen(wrappers[i]);
                hit = 1;
            }
    }
    return name;
}

/* A tensor by trm's name, or under the reference's wrappers' prefixes. */
static const st_tensor *find_any(const st_file *f, const char *name) {
    const st_tensor *t = st_find(f, name);
    for (int i = 0; !t && i < f->ntensors; i++)
        if (!strcmp(trm_ckpt_canonical_name(f->tensors[i].name), name)) t = &f->tensors[i];
    return t;
}

static int expected_weight(const trm_model *m, const char *name) {
    if (trm_model_find_param(m, name)) return 1;
    for (int k = 0; k < m->nstates; k++)
        if (!strncmp(name, "inner.", 6) && !strcmp(name + 6, m->arch->init[k])) return 1;
    return m->cfg.puzzle_emb_ndim && !strcmp(name, "inner.puzzle_emb.weights");
}

static const char *mismatch_hint(const trm_model *m, const char *name) {
    if (strstr(name, "puzzle_emb")) return "the file has a puzzle embedding; arch.puzzle_emb_ndim is 0 here";
    if (strstr(name, "embed_pos")) return "the file has learned positions: arch.pos_encodings=learned";
    if (strstr(name, "mlp_t.") && !m->cfg.mlp_t) return "the file's layers mix tokens with an MLP: arch.mlp_t=true";
    if (strstr(name, "self_attn.") && m->cfg.mlp_t) return "the file's layers use attention: arch.mlp_t=false";
    if (strstr(name, "L_level.layers.")) return "more layers than arch.L_layers?";
    return "saved from another architecture or config?";
}

/* As load_state_dict(strict=True): every model tensor of the file (named inner.* once the
 * wrappers' prefixes are stripped) belongs to this model, and no name comes twice. */
static int check_weight_names(const trm_model *m, const st_file *f, const char *path, trm_err *e) {
    int any = 0;
    for (int i = 0; i < f->ntensors; i++) {
        const char *c = trm_ckpt_canonical_name(f->tensors[i].name);
        if (strncmp(c, "inner.", 6)) continue;
        any = 1;
        if (!expected_weight(m, c))
            return trm_errf(e, "%s: tensor %s is not part of this model (%s)", path, f->tensors[i].name, mismatch_hint(m, c));
        for (int j = 0; j < i; j++)
            if (!strcmp(trm_ckpt_canonical_name(f->tensors[j].name), c))
                return trm_errf(e, "%s: tensors %s and %s are the same weight under two names", path, f->tensors[j].name,
                                f->tensors[i].name);
    }
    if (!any) return trm_errf(e, "%s: no TRM weights in the file (no tensor named inner.*, model.inner.* or _orig_mod.model.inner.*)", path);
    return 0;
}

static int shape_is(const st_tensor *t, int ndim, const int64_t *shape) {
    if (t->ndim != ndim) return 0;
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] != shape[i]) return 0;
    return 1;
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && o < n; i++) o += (size_t)snprintf(buf + o, n - o, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

/* Reads a float tensor of the expected shape into device memory. */
static int load_f32(trm_backend *be, const st_file *f, const char *path, const char *name, int ndim,
                    const int64_t *shape, float *dev, int required, trm_err *e) {
    const st_tensor *t = find_any(f, name);
    if (!t) return required ? trm_errf(e, "%s: tensor %s missing", path, name) : 1;
    if (!shape_is(t, ndim, shape)) {
        char a[96], b[96];
        shape_str(a, sizeof a, t->ndim, t->shape);
        shape_str(b, sizeof b, ndim, shape);
        return trm_errf(e, "%s: tensor %s has shape %s, the model needs %s (does the config match?)",
                        path, name, a, b);
    }
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    float *h = xmalloc(n * sizeof(float) + 1);
    if (st_read_f32(t, h, e)) {
        free(h);
        return trm_err_prefix(e, "%s: %s", path, name);
    }
    be->to_device(be, dev, h, n * sizeof(float));
    free(h);
    return 0;
}

static int load_params(trm_model *m, const st_file *f, const char *path, const char *prefix,
                       float *base, int required, trm_err *e) {
    for (int i = 0; i < m->nparams; i++) {
        const trm_param *p = &m->params[i];
        char *nm = xasprintf("%s%s", prefix, p->name);
        int rc = load_f32(m->be, f, path, nm, p->ndim, p->shape, base + p->offset, required, e);
        free(nm);
        if (rc) return rc;
    }
    return 0;
}

static int load_puzzle(trm_model *m, const st_file *f, const char *path, int allow_reset, trm_err *e) {
    if (!m->cfg.puzzle_emb_ndim) return 0;
    int64_t sh[2] = {m->cfg.num_puzzle_identifiers, m->cfg.puzzle_emb_ndim};
    const st_tensor *t = find_any(f, "inner.puzzle_emb.weights");
    if (!t) return trm_errf(e, "%s: tensor inner.puzzle_emb.weights missing", path);
    if (shape_is(t, 2, sh)) return load_f32(m->be, f, path, "inner.puzzle_emb.weights", 2, sh, m->puz_w, 1, e);
    if (!allow_reset || t->ndim != 2 || t->shape[1] != sh[1])
        return load_f32(m->be, f, path, "inner.puzzle_emb.weights", 2, sh, m->puz_w, 1, e); /* shape error */
    /* the reference resets a table of another size to its mean row */
    size_t rows = (size_t)t->shape[0], cols = (size_t)sh[1];
    float *h = xmalloc(rows * cols * sizeof(float) + 1);
    if (st_read_f32(t, h, e)) {
        free(h);
        return -1;
    }
    float *mean = xcalloc(cols, sizeof(float));
    for (size_t c = 0; c < cols; c++) {
        double acc = 0;
        for (size_t r = 0; r < rows; r++) acc += h[r * cols + c];
        mean[c] = (float)(acc / (double)(rows ? rows : 1));
    }
    float *full = xmalloc((size_t)sh[0] * cols * sizeof(float));
    for (int64_t r = 0; r < sh[0]; r++) memcpy(full + (size_t)r * cols, mean, cols * sizeof(float));
    m->be->to_device(m->be, m->puz_w, full, (size_t)sh[0] * cols * sizeof(float));
    fprintf(stderr, "trm: puzzle embedding table of %zu rows reset to its mean row for %" PRId64 " puzzle ids\n", rows, sh[0]);
    free(h);
    free(mean);
    free(full);
    return 0;
}

static int load_inits(trm_model *m, const st_file *f, const char *path, trm_err *e) {
    int64_t d1[1] = {m->D};
    for (int k = 0; k < m->nstates; k++) {
        char *nm = xasprintf("inner.%s", m->arch->init[k]);
        int rc = load_f32(m->be, f, path, nm, 1, d1, m->init[k], 1, e);
        free(nm);
        if (rc) return -1;
    }
    return 0;
}

/* A trm checkpoint names its architecture (those written before it could be another are TRM's);
 * files from elsewhere carry no such name and are judged by their tensors. */
static int check_arch(const trm_model *m, const st_file *f, const char *path, trm_err *e) {
    const char *fmt = st_meta_get(f, "format"), *name = st_meta_get(f, "arch");
    if (!name && !(fmt && !strncmp(fmt, "trm-", 4))) return 0;
    const trm_arch *a = name ? trm_arch_find(name) : trm_arch_get(TRM_ARCH_TRM);
    if (!a)
        return trm_errf(e, "%s: a checkpoint of architecture '%s', which this trm does not know (it builds %s)", path,
                        name, trm_arch_known_names());
    if (a != m->arch)
        return trm_errf(e, "%s is a checkpoint of %s (arch=%s); this run builds %s (arch=%s). Use the architecture it "
                           "was trained with: drop the arch override, or arch=%s",
                        path, a->name, a->preset, m->arch->name, m->arch->preset, a->preset);
    return 0;
}

int trm_checkpoint_load_weights(trm_model *m, const char *path, int allow_puzzle_reset, trm_err *e) {
    st_file f;
    if (tensor_file_open(&f, path, e)) return -1;
    int rc = check_arch(m, &f, path, e);
    if (!rc) rc = check_weight_names(m, &f, path, e);
    if (!rc) rc = load_params(m, &f, path, "", m->w, 1, e);
    if (!rc) rc = load_inits(m, &f, path, e);
    if (!rc) rc = load_puzzle(m, &f, path, allow_puzzle_reset, e);
    if (!rc && m->ema) m->be->copy(m->be, m->ema, m->w, m->n_flat * sizeof(float));
    st_close(&f);
    return rc ? -1 : 0;
}

static int meta_i64(const st_file *f, const char *path, const char *key, int64_t *out, trm_err *e) {
    const char *v = st_meta_get(f, key);
    char *end;
    if (!v) return trm_errf(e, "%s: metadata '%s' missing (not a trm training checkpoint?)", path, key);
    long long x = strtoll(v, &end, 10);
    if (*end || end == v) return trm_errf(e, "%s: metadata '%s' is not an integer: '%s'", path, key, v);
    *out = x;
    return 0;
}

/* One carry tensor of the global batch (rows = B × world): this rank's rows to the device. A
 * checkpoint written by any number of ranks fits any other with the same global batch. */
static int load_carry(const trm_model *m, const st_file *f, const char *path, const char *name, st_dtype dt,
                      size_t row_elems, void *dev, int is_state, trm_err *e) {
    const st_tensor *t = st_find(f, name);
    if (!t) return trm_errf(e, "%s: tensor %s missing", path, name);
    size_t world = (size_t)(m->world > 1 ? m->world : 1), esz = (size_t)st_dtype_size(dt);
    size_t row_bytes = row_elems * esz, rows = (size_t)m->B * world;
    if (t->dtype != dt || t->ndim < 1 || t->shape[0] != (int64_t)rows || t->nbytes != rows * row_bytes)
        return trm_errf(e, "%s: tensor %s has the wrong dtype or size for global_batch_size %zu", path, name, rows);
    const char *src = (const char *)t->data + (size_t)m->rank * m->B * row_bytes;
    if (is_state) /* the model's activation type (fp32, or bf16 rounded from the saved fp32) */
        trm_model_act_put(m, dev, (const float *)src, (size_t)m->B * row_elems);
    else
        m->be->to_device(m->be, dev, src, (size_t)m->B * row_bytes);
    return 0;
}

int trm_checkpoint_resume(trm_model *m, const char *path, trm_ckpt_state *st, trm_err *e) {
    st_file f;
    if (tensor_file_open(&f, path, e)) return -1;
    int rc = -1;
    memset(st, 0, sizeof *st);
    const char *fmt = st_meta_get(&f, "format");
    if (!fmt || strcmp(fmt, CKPT_FORMAT)) {
        trm_errf(e, "%s: not a trm training checkpoint (format '%s'); use load_checkpoint= for weights only",
                 path, fmt ? fmt : "none");
        goto out;
    }
    if (check_arch(m, &f, path, e)) goto out;
    const char *ema = st_meta_get(&f, "ema");
    int has_raw = ema && !strcmp(ema, "true");
    if (load_params(m, &f, path, has_raw ? "raw." : "", m->w, 1, e)) goto out;
    if (m->ema) {
        if (load_params(m, &f, path, "", m->ema, 1, e)) goto out;
    }
    if (load_params(m, &f, path, "optim.exp_avg.", m->m, 1, e)) goto out;
    if (load_params(m, &f, path, "optim.exp_avg_sq.", m->v, 1, e)) goto out;
    if (load_inits(m, &f, path, e) || load_puzzle(m, &f, path, 0, e)) goto out;
    size_t TD = (size_t)m->T * m->D, S = (size_t)m->S;
    for (int k = 0; k < m->nstates; k++) {
        char *nm = xasprintf("carry.%s", m->arch->state[k]);
        int bad = load_carry(m, &f, path, nm, ST_F32, TD, m->z[k], 1, e);
        free(nm);
        if (bad) goto out;
    }
    if (load_carry(m, &f, path, "carry.steps", ST_I32, 1, m->steps, 0, e) ||
        load_carry(m, &f, path, "carry.halted", ST_BOOL, 1, m->halted, 0, e) ||
        load_carry(m, &f, path, "carry.inputs", ST_I32, S, m->cur_inputs, 0, e) ||
        load_carry(m, &f, path, "carry.labels", ST_I32, S, m->cur_labels, 0, e) ||
        load_carry(m, &f, path, "carry.puzzle_identifiers", ST_I32, 1, m->cur_pid, 0, e))
        goto out;
    int64_t ws = 1, v;
    if (meta_i64(&f, path, "step", &st->step, e) || meta_i64(&f, path, "total_steps", &st->total_steps, e)) goto out;
    if (st_meta_get(&f, "world_size") && meta_i64(&f, path, "world_size", &ws, e)) goto out;
    st->world_size = (int)ws;
    if (st_meta_get(&f, "sampler.iter")) {
        trm_sampler_state *s = &st->sampler;
        if (meta_i64(&f, path, "sampler.seed", &v, e)) goto out;
        s->seed = (uint64_t)v;
        if (meta_i64(&f, path, "sampler.epochs_per_iter", &s->epochs_per_iter, e) ||
            meta_i64(&f, path, "sampler.global_batch_size", &s->global_batch_size, e) ||
            meta_i64(&f, path, "sampler.iter", &s->iter, e) ||
            meta_i64(&f, path, "sampler.group_pos", &s->group_pos, e) ||
            meta_i64(&f, path, "sampler.batch_index", &s->batch_index, e) ||
            meta_i64(&f, path, "sampler.set_index", &v, e))
            goto out;
        s->set_index = (int)v;
        st->has_sampler = 1;
    }
    rc = 0;
out:
    st_close(&f);
    return rc;
}

char *trm_checkpoint_config(const char *path, trm_err *e) {
    st_file f;
    if (tensor_file_open(&f, path, e)) return NULL;
    const char *c = st_meta_get(&f, "config");
    char *out = c && *c ? xstrdup(c) : NULL;
    if (!out) trm_errf(e, "%s: no config stored in the checkpoint metadata", path);
    st_close(&f);
    return out;
}

char *trm_checkpoint_latest(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return NULL;
    struct dirent *de;
    long long best = -1;
    while ((de = readdir(d))) {
        long long stp;
        char tail[32];
        if (sscanf(de->d_name, "step_%lld%31s", &stp, tail) == 2 && !strcmp(tail, ".safetensors") && stp > best)
            best = stp;
    }
    closedir(d);
    if (best < 0) return NULL;
    char *name = xasprintf("step_%lld.safetensors", best);
    char *p = trm_path_join(dir, name);
    free(name);
    return p;
}
