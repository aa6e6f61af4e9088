/* train.c — the training loop of `trm pretrain` (the reference's pretrain.py) and the
 * evaluation pass shared with `trm generate`. */
#include "train.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "io/io.h"
#include "compile.h"
#include "data/data.h"
#include "backend/backend.h"
#include "dist/dist.h"
#include "evaluators.h"
#include "run_dir.h"
#include "util/util.h"
#include "view/view.h"

const char *const trm_metric_names[TRM_NMETRICS] = {
    "count", "accuracy", "exact_accuracy", "q_halt_accuracy",
    "steps", "lm_loss",  "q_halt_loss",    "q_continue_loss"};

static int is_loss(int k) { return k >= TRM_M_LM_LOSS; }

void trm_model_config_for(trm_model_config *mc, const trm_run_config *rc, const trm_dataset_meta *meta,
                          int local_batch) {
    *mc = rc->arch;
    mc->batch_size = local_batch;
    mc->seq_len = (int)meta->seq_len;
    mc->vocab_size = (int)meta->vocab_size;
    mc->num_puzzle_identifiers = (int)meta->num_puzzle_identifiers;
}

/* ---------------------------------------------------------------------------------------
 * evaluation
 * ------------------------------------------------------------------------------------- */

int trm_dataset_check_compatible(const trm_dataset_meta *data, const trm_dataset_meta *model, const char *what,
                                 trm_err *e) {
    if (data->seq_len != model->seq_len || data->vocab_size != model->vocab_size)
        return trm_errf(e, "%s has seq_len %" PRId64 " and vocab_size %" PRId64 ", the model %" PRId64 " and %" PRId64,
                        what, data->seq_len, data->vocab_size, model->seq_len, model->vocab_size);
    if (data->num_puzzle_identifiers > model->num_puzzle_identifiers)
        return trm_errf(e, "%s has %" PRId64 " puzzle identifiers, the model's table only %" PRId64, what,
                        data->num_puzzle_identifiers, model->num_puzzle_identifiers);
    return 0;
}

void trm_eval_result_free(trm_eval_result *r) {
    for (int i = 0; i < r->nsets; i++) free(r->names[i]);
    free(r->names);
    free(r->sums);
    memset(r, 0, sizeof *r);
}

double trm_eval_metric(const trm_eval_result *r, int set, int k) {
    double count = r->sums[set][TRM_M_COUNT];
    return r->sums[set][k] / count; /* the reference divides by count, also the losses */
}

static int collect_batch(void *ctx, const trm_batch *b, int64_t real, const int32_t *preds, const float *q,
                         const float *logits, trm_err *e) {
    (void)e;
    (void)logits;
    trm_eval_outputs *o = ctx;
    int64_t S = b->seq_len;
    o->preds = xrealloc(o->preds, (size_t)(o->n + real) * (size_t)S * sizeof(int32_t));
    o->q_halt = xrealloc(o->q_halt, (size_t)(o->n + real) * sizeof(float));
    memcpy(o->preds + o->n * S, preds, (size_t)real * (size_t)S * sizeof(int32_t));
    for (int64_t r = 0; r < real; r++) o->q_halt[o->n + r] = q[2 * r];
    o->n += real;
    return 0;
}

trm_eval_sink trm_eval_collect(trm_eval_outputs *o) {
    trm_eval_sink s = {collect_batch, o, 0};
    return s;
}

struct trm_ref_outputs {
    unsigned which;
    int S, V, P, T, bf16;
    int64_t rows;
    int32_t *inputs, *labels, *pid;
    int64_t *preds;
    float *q_halt, *q_cont;
    void *logits; /* uint16_t (bfloat16) or float */
};

trm_ref_outputs *trm_ref_outputs_new(unsigned which, const trm_model *m) {
    trm_ref_outputs *o = xcalloc(1, sizeof *o);
    o->which = which;
    o->S = m->S;
    o->V = m->V;
    o->P = m->P;
    o->T = m->T;
    o->bf16 = m->cfg.forward_bf16;
    return o;
}

static void *grow(void *p, int64_t rows, size_t row_bytes) { return xrealloc(p, (size_t)rows * row_bytes + 1); }

static int ref_outputs_batch(void *ctx, const trm_batch *b, int64_t real, const int32_t *preds, const float *q,
                             const float *logits, trm_err *e) {
    (void)real; /* the reference saves the padded rows too */
    trm_ref_outputs *o = ctx;
    int64_t n = b->batch_size, r0 = o->rows, S = o->S, V = o->V, all = r0 + n;
    size_t srow = (size_t)S * sizeof(int32_t);
    if (o->which & TRM_OUT_INPUTS) o->inputs = grow(o->inputs, all, srow), memcpy(o->inputs + r0 * S, b->inputs, (size_t)n * srow);
    if (o->which & TRM_OUT_LABELS) o->labels = grow(o->labels, all, srow), memcpy(o->labels + r0 * S, b->labels, (size_t)n * srow);
    if (o->which & TRM_OUT_PUZZLE_IDS)
        o->pid = grow(o->pid, all, sizeof(int32_t)), memcpy(o->pid + r0, b->puzzle_identifiers, (size_t)n * sizeof(int32_t));
    if (o->which & TRM_OUT_PREDS) {
        o->preds = grow(o->preds, all, (size_t)S * sizeof(int64_t));
        for (int64_t i = 0; i < n * S; i++) o->preds[r0 * S + i] = preds[i];
    }
    if (o->which & TRM_OUT_Q_HALT) {
        o->q_halt = grow(o->q_halt, all, sizeof(float));
        for (int64_t i = 0; i < n; i++) o->q_halt[r0 + i] = q[2 * i];
    }
    if (o->which & TRM_OUT_Q_CONTINUE) {
        o->q_cont = grow(o->q_cont, all, sizeof(float));
        for (int64_t i = 0; i < n; i++) o->q_cont[r0 + i] = q[2 * i + 1];
    }
    if ((o->which & TRM_OUT_LOGITS) && !logits) return trm_errf(e, "eval_save_outputs: logits are saved by one process only");
    if (o->which & TRM_OUT_LOGITS) { /* the sequence positions, after the puzzle embedding's */
        size_t es = o->bf16 ? 2 : 4;
        o->logits = grow(o->logits, all, (size_t)S * V * es);
        for (int64_t i = 0; i < n; i++) {
            const float *src = logits + ((size_t)i * o->T + o->P) * V;
            size_t dst = ((size_t)(r0 + i) * S) * V;
            if (o->bf16)
                for (int64_t k = 0; k < S * V; k++) ((uint16_t *)o->logits)[dst + k] = trm_f32_to_bf16(src[k]);
            else
                memcpy((float *)o->logits + dst, src, (size_t)S * V * sizeof(float));
        }
    }
    o->rows = all;
    return 0;
}

trm_eval_sink trm_ref_outputs_sink(trm_ref_outputs *o) {
    trm_eval_sink s = {ref_outputs_batch, o, (o->which & TRM_OUT_LOGITS) != 0};
    return s;
}

void trm_ref_outputs_free(trm_ref_outputs *o) {
    if (!o) return;
    free(o->inputs);
    free(o->labels);
    free(o->pid);
    free(o->preds);
    free(o->q_halt);
    free(o->q_cont);
    free(o->logits);
    free(o);
}

int trm_ref_outputs_save(trm_ref_outputs *o, const char *path, trm_err *e) {
    st_writer w;
    st_writer_init(&w);
    int64_t s2[2] = {o->rows, o->S}, s1[1] = {o->rows}, s3[3] = {o->rows, o->S, o->V};
    /* the reference's order: the batch's tensors, then the model's outputs */
    if (o->which & TRM_OUT_INPUTS) st_writer_add(&w, "inputs", ST_I32, 2, s2, o->inputs);
    if (o->which & TRM_OUT_LABELS) st_writer_add(&w, "labels", ST_I32, 2, s2, o->labels);
    if (o->which & TRM_OUT_PUZZLE_IDS) st_writer_add(&w, "puzzle_identifiers", ST_I32, 1, s1, o->pid);
    if (o->which & TRM_OUT_LOGITS) st_writer_add(&w, "logits", o->bf16 ? ST_BF16 : ST_F32, 3, s3, o->logits);
    if (o->which & TRM_OUT_Q_HALT) st_writer_add(&w, "q_halt_logits", ST_F32, 1, s1, o->q_halt);
    if (o->which & TRM_OUT_Q_CONTINUE) st_writer_add(&w, "q_continue_logits", ST_F32, 1, s1, o->q_cont);
    if (o->which & TRM_OUT_PREDS) st_writer_add(&w, "preds", ST_I64, 2, s2, o->preds);
    int rc = w.ntensors ? pt_save(&w, path, 0, e) : 0;
    if (!rc && w.ntensors) fprintf(stderr, "outputs: %s\n", path);
    st_writer_free(&w);
    return rc;
}

/* In a distributed run each rank steps its share of every test batch; predictions are gathered
 * to every rank and rank 0 alone feeds the sinks, with the whole batch read by a second,
 * one-rank iterator; the metric sums are reduced at the end. */
int trm_evaluate(trm_model *m, trm_plan *plan, const trm_dataset *d, int64_t global_batch_size, const float *weights,
                 trm_eval_result *res, const trm_eval_sink *sinks, int nsinks, trm_dist *dist,
                 const trm_eval_progress *progress, trm_err *e) {
    trm_backend *be = m->be;
    int world = m->world > 1 ? m->world : 1;
    if (m->rank != 0) nsinks = 0;
    memset(res, 0, sizeof *res);
    res->nsets = d->nsets;
    res->names = xcalloc((size_t)d->nsets, sizeof *res->names);
    res->sums = xcalloc((size_t)d->nsets, sizeof *res->sums);
    for (int i = 0; i < d->nsets; i++) res->names[i] = xstrdup(d->sets[i].name);
    trm_test_iter it, whole;
    trm_test_iter_init(&it, global_batch_size, m->rank, world);
    trm_test_iter_init(&whole, global_batch_size, 0, 1);
    trm_batch b, gb = {0};
    trm_batch_alloc(&b, m->B, m->S);
    if (world > 1 && nsinks) trm_batch_alloc(&gb, (int64_t)m->B * world, m->S);
    trm_model_swap_carry(m);
    size_t rows = (size_t)m->B * (size_t)world;
    int32_t *preds = nsinks ? xmalloc(rows * m->S * sizeof(int32_t)) : NULL;
    float *q = nsinks ? xmalloc(rows * 2 * sizeof(float)) : NULL;
    int want_logits = 0; /* one process only: the other ranks' logits are never gathered */
    for (int k = 0; k < nsinks && world == 1; k++) want_logits |= sinks[k].want_logits;
    float *logits = want_logits ? xmalloc(rows * (size_t)m->T * m->V * sizeof(float)) : NULL;
    /* A sink's error (rank 0 only) ends the sinks, not the loop: the other ranks are still
     * stepping their shares and gathering, and rank 0 must meet them in every collective. */
    int got, rc = 0;
    int64_t done = 0, total = 0;
    for (int i = 0; i < d->nsets; i++) total += (d->sets[i].n_examples + global_batch_size - 1) / global_batch_size;
    while ((got = trm_test_iter_next(d, &it, &b)) != 0) {
        if (got < 0) { /* the same on every rank */
            rc = trm_errf(e, "global_batch_size %" PRId64 " cannot be split into batches of %d", global_batch_size, m->B);
            break;
        }
        trm_model_set_batch(m, b.inputs, b.labels, b.puzzle_identifiers);
        trm_model_reset_carry(m);
        for (int s = 0; s < m->cfg.halt_max_steps; s++) {
            be->zero(be, m->metrics, TRM_NMETRICS * sizeof(double));
            trm_step_opts so = {.training = 0, .want_grad = 0, .grad_scale = 1.0f / (float)global_batch_size,
                                .weights = weights};
            trm_plan_step(plan, &so);
        }
        double mt[TRM_NMETRICS];
        be->to_host(be, mt, m->metrics, sizeof mt);
        for (int k = 0; k < TRM_NMETRICS; k++) res->sums[b.set_index][k] += mt[k];
        if (progress) progress->fn(progress->ctx, ++done, total, d->sets[b.set_index].name);
        if (world > 1) trm_model_gather_outputs(m);
        if (!nsinks || rc) continue;
        const trm_batch *sb = &b;
        if (world > 1) {
            if (trm_test_iter_next(d, &whole, &gb) != 1) {
                rc = trm_errf(e, "the test batches of rank 0 and of the whole batch disagree");
                continue;
            }
            sb = &gb;
        }
        int64_t real = sb->effective_size < (int64_t)rows ? sb->effective_size : (int64_t)rows;
        be->to_host(be, preds, world > 1 ? m->all_preds : m->preds, rows * m->S * sizeof(int32_t));
        be->to_host(be, q, world > 1 ? m->all_q : m->q, rows * 2 * sizeof(float));
        if (logits) be->to_host(be, logits, m->logits, rows * (size_t)m->T * m->V * sizeof(float));
        for (int k = 0; k < nsinks && rc == 0; k++) rc = sinks[k].batch(sinks[k].ctx, sb, real, preds, q, logits, e);
    }
    trm_model_swap_carry(m);
    be->zero(be, m->metrics, TRM_NMETRICS * sizeof(double)); /* training accumulates from zero */
    free(preds);
    free(q);
    free(logits);
    trm_batch_free(&b);
    if (gb.inputs) trm_batch_free(&gb);
    /* every rank walked the same batches (rank 0's sink errors surface after the reduce) */
    trm_err re;
    if (world > 1 && dist && d->nsets > 0 && trm_dist_allreduce_f64(dist, &res->sums[0][0], (size_t)d->nsets * TRM_NMETRICS, &re)) {
        if (!rc) *e = re;
        return -1;
    }
    return rc;
}

int trm_save_eval_outputs(const char *path, const trm_eval_outputs *o, int S, trm_err *e) {
    int64_t sh[2] = {o->n, S};
    if (npy_write(path, NPY_I32, 2, sh, o->preds, e)) return -1;
    size_t len = strlen(path);
    char *qp = len > 4 && !strcmp(path + len - 4, ".npy") ? xasprintf("%.*s_q_halt.npy", (int)(len - 4), path)
                                                            : xasprintf("%s_q_halt.npy", path);
    int rc = npy_write(qp, NPY_F32, 1, sh, o->q_halt, e);
    if (!rc) fprintf(stderr, "predictions: %s, halting logits: %s\n", path, qp);
    free(qp);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * run directory naming (as the reference: project from the first data path, run name from
 * the arch class and a random two-word slug)
 * ------------------------------------------------------------------------------------- */

static char *slug2(void) {
    static const char *const adj[] = {"agile", "amber", "bold", "brisk", "calm", "clever", "cosmic",
                                      "crimson", "daring", "eager", "fancy", "gentle", "golden", "happy",
                                      "jolly", "keen", "lively", "lucky", "mellow", "nimble", "quiet",
                                      "rapid", "shiny", "silent", "smart", "swift", "tidy", "vivid",
                                      "witty", "zesty"};
    static const char *const noun[] = {"badger", "beaver", "condor", "dolphin", "falcon", "ferret",
                                       "gecko", "heron", "ibis", "jackal", "koala", "lemur", "lynx",
                                       "marten", "narwhal", "ocelot", "otter", "panda", "puffin", "quail",
                                       "raven", "salmon", "tapir", "toucan", "urchin", "viper", "walrus",
                                       "wombat", "yak", "zebra"};
    trm_rng r;
    trm_rng_init(&r, (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32), 7);
    return xasprintf("%s-%s", adj[trm_rng_below(&r, sizeof adj / sizeof adj[0])],
                     noun[trm_rng_below(&r, sizeof noun / sizeof noun[0])]);
}

static char *basename_of(const char *p) {
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') n--;
    size_t s = n;
    while (s > 0 && p[s - 1] != '/') s--;
    return xstrndup(p + s, n - s);
}

void trm_fill_run_names(cfg_node *cfg, const trm_run_config *rc) {
    if (!rc->project_name) {
        char *b = basename_of(rc->data_paths[0]);
        for (char *c = b; *c; c++) *c = c == b ? (char)toupper((unsigned char)*c) : (char)tolower((unsigned char)*c);
        cfg_node *n = cfg_new(CFG_STR);
        n->s = xasprintf("%s-ACT-torch", b);
        cfg_set(cfg, "project_name", n);
        free(b);
    }
    if (!rc->run_name) {
        const char *an = rc->arch_name ? rc->arch_name : "trm";
        const char *at = strrchr(an, '@');
        char *slug = slug2();
        cfg_node *n = cfg_new(CFG_STR);
        n->s = xasprintf("%s %s", at ? at + 1 : an, slug);
        cfg_set(cfg, "run_name", n);
        free(slug);
    }
    if (!rc->checkpoint_path) {
        cfg_node *n = cfg_new(CFG_STR);
        n->s = xasprintf("checkpoints/%s/%s", cfg_get(cfg, "project_name")->s, cfg_get(cfg, "run_name")->s);
        cfg_set(cfg, "checkpoint_path", n);
    }
}

/* ---------------------------------------------------------------------------------------
 * the trainer
 * ------------------------------------------------------------------------------------- */

typedef struct {
    cfg_node *cfg;
    trm_run_config rc;
    char *config_yaml;
    trm_dataset train, test;
    int have_test;
    trm_backend *be;
    trm_model m;
    trm_sampler_state sampler;
    int64_t step, total_steps, total_iters;
    const char *run_dir;
    trm_run_dir rdir;          /* rank 0: the run directory's lock */
    trm_evaluators *evals;
    FILE *metrics;
    trm_tfevents *tb;          /* logger=tensorboard: the same records as TensorBoard events */
    trm_display disp;          /* rank 0's status line (terminal) or log lines */
    trm_train_status status;   /* what the status line shows */
    double rate_t;             /* the steps/s measurement: time and step of its last sample */
    int64_t rate_step;
    double eval_t0;            /* when the running evaluation started */
    double pause_s;            /* spent in evaluations and checkpoints, left out of the speed */
    double last_eval_s;
    char device_desc[256];     /* what was chosen and why, for report.html */
    int compile_on;
    trm_puzzle_samples samples; /* a few test puzzles of the last evaluation, for report.html */
    int64_t samples_step;
    int report_failed;         /* warned once already */
    double t_start, t_last_log;
    int64_t step_start, step_last_log;
    double acc[TRM_NMETRICS]; /* train metrics since the last log */
    int acc_steps;
    double lr;
    trm_plan plan;
    trm_dist *dist; /* the process group; rank 0 alone writes logs, metrics and checkpoints */
} trainer;

static int is_root(const trainer *t) { return t->dist->rank == 0; }

/* One metrics.jsonl record: {"step": N, "kind": KIND, ...}, and one TensorBoard event with
 * the same values at the same step. */
static void record_begin(trainer *t, json_buf *b, int64_t step, const char *kind) {
    json_buf_init(b);
    json_obj_begin(b);
    json_kv_int(b, "step", step);
    json_kv_str(b, "kind", kind);
    trm_tfevents_begin(t->tb, step);
}

static void record_put(trainer *t, json_buf *b, const char *key, double v) {
    json_kv_double(b, key, v);
    trm_tfevents_scalar(t->tb, key, v);
}

/* An events file that cannot be written is worth one warning, not the run. */
static void record_end(trainer *t, json_buf *b) {
    json_obj_end(b);
    json_raw(b, "\n");
    if (t->metrics) {
        fputs(b->p, t->metrics);
        fflush(t->metrics);
    }
    json_buf_free(b);
    trm_err e = {{0}};
    if (trm_tfevents_end(t->tb, &e)) {
        trm_display_clear(&t->disp);
        fprintf(stderr, "trm: warning: %s; training goes on without TensorBoard events\n", e.msg);
        trm_tfevents_free(t->tb);
        t->tb = NULL;
    }
}

/* The status line, about once a second. steps/s is measured between updates (smoothed), and
 * the measurement restarts after an evaluation or a checkpoint so that those do not count as
 * slow steps; the ETA is the training steps left at that rate. */
static void show_train_status(trainer *t) {
    double now = trm_now_seconds();
    trm_train_status *st = &t->status;
    if (t->rate_t > 0 && now > t->rate_t && t->step > t->rate_step) {
        double r = (double)(t->step - t->rate_step) / (now - t->rate_t);
        st->steps_per_s = st->steps_per_s > 0 ? 0.7 * st->steps_per_s + 0.3 * r : r;
    }
    t->rate_t = now, t->rate_step = t->step;
    st->step = t->step, st->total_steps = t->total_steps;
    st->examples_per_s = st->steps_per_s * (double)t->rc.global_batch_size;
    st->eta_s = st->steps_per_s > 0 ? (double)(t->total_steps - t->step) / st->steps_per_s : -1;
    char line[512];
    trm_train_status_format(st, trm_display_width(&t->disp), line, sizeof line);
    trm_display_progress(&t->disp, line, 0);
}

static void show_eval_progress(void *ctx, int64_t done, int64_t total, const char *set) {
    trainer *t = ctx;
    if (!trm_display_due(&t->disp)) return;
    char line[512];
    double eta = (trm_now_seconds() - t->eval_t0) / (double)done * (double)(total - done);
    trm_eval_status_format(t->step, set, done, total, eta, trm_display_width(&t->disp), line, sizeof line);
    trm_display_progress(&t->disp, line, 1);
}

static void log_train(trainer *t) {
    int64_t gbs = t->rc.global_batch_size;
    double count = t->acc[TRM_M_COUNT] > 1 ? t->acc[TRM_M_COUNT] : 1;
    double v[TRM_NMETRICS];
    for (int k = 0; k < TRM_NMETRICS; k++)
        v[k] = is_loss(k) ? t->acc[k] / ((double)gbs * t->acc_steps) : t->acc[k] / count;
    double now = trm_now_seconds();
    double rate = (double)(t->step - t->step_last_log) * (double)gbs / (now - t->t_last_log + 1e-9);
    json_buf rec;
    record_begin(t, &rec, t->step, "train");
    for (int k = 0; k < TRM_NMETRICS; k++) {
        if (k == TRM_M_COUNT || (k == TRM_M_Q_CONTINUE_LOSS && !t->m.q_target_on)) continue;
        char key[64];
        snprintf(key, sizeof key, "train/%s", trm_metric_names[k]);
        record_put(t, &rec, key, v[k]);
    }
    record_put(t, &rec, "train/lr", t->lr);
    /* a timing: TensorBoard only, so that metrics.jsonl stays the same from run to run */
    trm_tfevents_scalar(t->tb, "train/examples_per_s", rate);
    record_end(t, &rec);

    int64_t done = t->step - t->step_start; /* in this process: a resumed run started later */
    double eta = (double)(t->total_steps - t->step) * (now - t->t_start) / (double)(done > 0 ? done : 1);
    trm_train_status *st = &t->status;
    st->lm_loss = v[TRM_M_LM_LOSS], st->q_halt_loss = v[TRM_M_Q_HALT_LOSS], st->lr = t->lr;
    /* means over halted samples: with none halted since the last log they are 0 by convention,
     * and the status line keeps the last real ones */
    if (t->acc[TRM_M_COUNT] > 0 || !st->have_metrics)
        st->accuracy = v[TRM_M_ACCURACY], st->exact_accuracy = v[TRM_M_EXACT_ACCURACY], st->act_steps = v[TRM_M_STEPS];
    st->have_metrics = 1;
    /* a terminal shows these on the status line; a log gets one line per log point */
    if (!t->disp.tty && t->disp.enabled) { /* 80 columns; every metric is in metrics.jsonl */
        char head[48], f[6][48], d[32];
        snprintf(head, sizeof head, "step %" PRId64 "/%" PRId64, t->step, t->total_steps);
        snprintf(f[0], sizeof f[0], "lm_loss %.4f", v[TRM_M_LM_LOSS]);
        snprintf(f[1], sizeof f[1], "acc %.3f", v[TRM_M_ACCURACY]);
        snprintf(f[2], sizeof f[2], "exact %.3f", v[TRM_M_EXACT_ACCURACY]);
        snprintf(f[3], sizeof f[3], "steps %.1f", v[TRM_M_STEPS]);
        snprintf(f[4], sizeof f[4], "%.0f ex/s", rate);
        trm_format_duration(eta, d, sizeof d);
        snprintf(f[5], sizeof f[5], "ETA %s", d);
        const char *fields[6] = {f[0], f[1], f[2], f[3], f[4], f[5]};
        trm_print_fields(stdout, TRM_LINE_WIDTH, head, fields, 6);
        fflush(stdout);
    }
    memset(t->acc, 0, sizeof t->acc);
    t->acc_steps = 0;
    t->t_last_log = now;
    t->step_last_log = t->step;
}

/* Train metrics accumulate on the device across steps (no per-step synchronisation); they are
 * read back at log points and before evaluations, checkpoints and stops, which is also where
 * a non-finite loss is caught, so no checkpoint is written from a diverged model. In a
 * distributed run they are summed over the ranks here, together with whether any rank was
 * asked to stop (*sig), so that every rank takes the same decisions at the same step. */
static int flush_metrics(trainer *t, int *sig, trm_err *e) {
    trm_backend *be = t->be;
    double mt[TRM_NMETRICS + 1];
    be->to_host(be, mt, t->m.metrics, TRM_NMETRICS * sizeof(double));
    be->zero(be, t->m.metrics, TRM_NMETRICS * sizeof(double));
    mt[TRM_NMETRICS] = sig && *sig ? 1.0 : 0.0;
    if (trm_dist_allreduce_f64(t->dist, mt, TRM_NMETRICS + 1, e)) return -1;
    if (sig && !*sig && mt[TRM_NMETRICS] > 0) *sig = SIGTERM; /* another rank's signal */
    double loss = mt[TRM_M_LM_LOSS] + 0.5 * (mt[TRM_M_Q_HALT_LOSS] + mt[TRM_M_Q_CONTINUE_LOSS]);
    if (!isfinite(loss)) {
        trm_display_clear(&t->disp);
        return trm_errf(e, "the loss became %s by step %" PRId64 "; stopping (the last good checkpoint in %s is kept)",
                        isnan(loss) ? "NaN" : "Inf", t->step, t->run_dir);
    }
    for (int k = 0; k < TRM_NMETRICS; k++) t->acc[k] += mt[k];
    if (!t->plan.reported && t->acc_steps > 0) {
        trm_display_clear(&t->disp);
        trm_plan_report(&t->plan, stdout);
    }
    return 0;
}

/* Collective: -1 on every rank when any rank says !ok; that rank keeps its own message, the
 * others say `what` failed elsewhere. Where only rank 0 can fail (its files), this turns its
 * failure into everyone's stop instead of leaving the others in the next collective. */
static int all_ranks_ok(trainer *t, int ok, const char *what, trm_err *e) {
    if (t->dist->world <= 1) return ok ? 0 : -1;
    double bad = ok ? 0.0 : 1.0;
    trm_err re;
    if (trm_dist_allreduce_f64(t->dist, &bad, 1, &re)) {
        if (ok) *e = re;
        return -1;
    }
    if (bad > 0 && ok) return trm_errf(e, "%s on another rank (see its message); stopping", what);
    return bad > 0 ? -1 : 0;
}

/* Collective in a distributed run (the carry is gathered); rank 0 writes. */
static int write_checkpoint(trainer *t, trm_err *e) {
    trm_carry_host carry;
    trm_model_carry_to_host(&t->m, &carry);
    if (!is_root(t)) return 0;
    char *name = xasprintf("step_%" PRId64 ".safetensors", t->step);
    char *path = trm_path_join(t->run_dir, name);
    trm_ckpt_state st = {.step = t->step, .total_steps = t->total_steps, .sampler = t->sampler,
                         .has_sampler = 1, .world_size = t->dist->world, .carry = &carry};
    int rc = trm_checkpoint_save(path, &t->m, t->config_yaml, &st, e);
    trm_carry_host_free(&carry);
    if (!rc) {
        trm_display_clear(&t->disp);
        printf("checkpoint: %s\n", path);
    }
    free(name);
    free(path);
    return rc;
}

static int save_checkpoint(trainer *t, trm_err *e) {
    double t0 = trm_now_seconds();
    int rc = all_ranks_ok(t, write_checkpoint(t, e) == 0, "writing the checkpoint failed", e);
    t->pause_s += trm_now_seconds() - t0;
    t->rate_t = 0;
    return rc;
}

static int evaluate_and_log(trainer *t, trm_err *e) {
    trm_eval_result r;
    trm_eval_outputs o = {0};
    const float *w = t->rc.ema ? t->m.ema : NULL;
    int save = t->rc.eval_save_outputs && is_root(t), nsinks = 0;
    trm_eval_sink sinks[3];
    if (save) sinks[nsinks++] = trm_eval_collect(&o);
    trm_ref_outputs *ref = t->rc.eval_save_list && is_root(t) ? trm_ref_outputs_new(t->rc.eval_save_list, &t->m) : NULL;
    if (ref) sinks[nsinks++] = trm_ref_outputs_sink(ref);
    if (is_root(t) && t->samples.nwant) {
        trm_puzzle_samples_reset(&t->samples);
        sinks[nsinks++] = trm_puzzle_samples_sink(&t->samples);
    }
    /* The evaluators are not reset between evaluations: the reference's ARC evaluator votes
     * with aggregated_voting=True, over the predictions of every evaluation of the run so far. */
    if (t->evals) sinks[nsinks++] = trm_evaluators_sink(t->evals);
    trm_display_clear(&t->disp);
    t->eval_t0 = trm_now_seconds();
    trm_eval_progress prog = {show_eval_progress, t};
    int erc = trm_evaluate(&t->m, &t->plan, &t->test, t->rc.global_batch_size, w, &r, sinks, nsinks, t->dist, &prog, e);
    trm_display_clear(&t->disp);
    if (erc) {
        free(o.preds);
        free(o.q_halt);
        trm_ref_outputs_free(ref);
        return -1;
    }
    if (ref) { /* named as the reference names it: step_N_all_preds.<rank> */
        char *name = xasprintf("step_%" PRId64 "_all_preds.0", t->step);
        char *path = trm_path_join(t->run_dir, name);
        int bad = trm_ref_outputs_save(ref, path, e);
        trm_ref_outputs_free(ref);
        free(name);
        free(path);
        if (bad) {
            free(o.preds);
            free(o.q_halt);
            trm_eval_result_free(&r);
            return -1;
        }
    }
    trm_eval_metrics em;
    char tag[64];
    snprintf(tag, sizeof tag, "step_%" PRId64, t->step);
    if (trm_evaluators_finish(t->evals, t->run_dir, tag, &em, e)) {
        free(o.preds);
        free(o.q_halt);
        trm_eval_result_free(&r);
        return -1;
    }
    if (save) {
        char *name = xasprintf("step_%" PRId64 "_preds.npy", t->step);
        char *path = trm_path_join(t->run_dir, name);
        int bad = trm_save_eval_outputs(path, &o, t->m.S, e);
        free(name);
        free(path);
        free(o.preds);
        free(o.q_halt);
        if (bad) {
            trm_eval_result_free(&r);
            return -1;
        }
    }
    json_buf rec;
    record_begin(t, &rec, t->step, "eval");
    char head[160], text[TRM_NMETRICS + TRM_EVAL_MAX_METRICS][80];
    const char *fields[TRM_NMETRICS + TRM_EVAL_MAX_METRICS];
    for (int s = 0; s < r.nsets; s++) {
        int nf = 0;
        for (int k = 1; k < TRM_NMETRICS; k++) {
            if (k == TRM_M_Q_CONTINUE_LOSS) continue; /* no target exists in evaluation */
            char key[128];
            snprintf(key, sizeof key, "%s/%s", r.names[s], trm_metric_names[k]);
            double v = trm_eval_metric(&r, s, k);
            record_put(t, &rec, key, v);
            snprintf(text[nf], sizeof text[nf], "%s %.4f", trm_metric_names[k], v);
            fields[nf] = text[nf], nf++;
        }
        char key[128];
        snprintf(key, sizeof key, "%s/count", r.names[s]);
        record_put(t, &rec, key, r.sums[s][TRM_M_COUNT]);
        snprintf(head, sizeof head, "eval step %" PRId64 " [%.64s]", t->step, r.names[s]);
        trm_print_fields(stdout, TRM_LINE_WIDTH, head, fields, nf);
    }
    for (int i = 0; i < em.n; i++) {
        record_put(t, &rec, em.names[i], em.values[i]);
        snprintf(text[i], sizeof text[i], "%.48s %.4f", em.names[i], em.values[i]);
        fields[i] = text[i];
    }
    snprintf(head, sizeof head, "eval step %" PRId64 " [evaluators]", t->step);
    if (em.n) trm_print_fields(stdout, TRM_LINE_WIDTH, head, fields, em.n);
    record_end(t, &rec);
    fflush(stdout);
    trm_eval_result_free(&r);
    return 0;
}

/* report.html with the run's state now (rank 0). A report that cannot be written is worth one
 * warning, not the run. */
static void write_report(trainer *t, const char *state, int live) {
    if (!is_root(t) || !t->run_dir) return;
    double now = trm_now_seconds(), train_s = now - t->t_start - t->pause_s;
    trm_report r = {.run_dir = t->run_dir, .run_name = t->rc.run_name, .config_yaml = t->config_yaml,
                    .state = state, .live = live, .step = t->step, .total_steps = t->total_steps,
                    .global_batch_size = t->rc.global_batch_size, .device = t->device_desc,
                    .compile = t->compile_on, .world = t->dist->world, .elapsed_s = now - t->t_start,
                    .steps_per_s = train_s > 0 && t->step > t->step_start ? (double)(t->step - t->step_start) / train_s : 0,
                    .last_eval_s = t->last_eval_s, .puzzles = &t->samples, .puzzles_step = t->samples_step};
    trm_err e = {{0}};
    if (trm_report_write(&r, &e) && !t->report_failed) {
        t->report_failed = 1;
        trm_display_clear(&t->disp);
        fprintf(stderr, "trm: warning: %s; training goes on without report.html\n", e.msg);
    }
}

static int run_eval(trainer *t, trm_err *e) {
    double t0 = trm_now_seconds();
    int rc = all_ranks_ok(t, evaluate_and_log(t, e) == 0, "the evaluation failed", e);
    t->last_eval_s = trm_now_seconds() - t0;
    t->pause_s += t->last_eval_s;
    t->rate_t = 0; /* the next steps/s sample starts after the evaluation */
    if (rc == 0) {
        t->samples_step = t->step;
        write_report(t, "training", 1);
    }
    return rc;
}

static int open_data(trainer *t, trm_err *e) {
    if (trm_dataset_open(&t->train, (const char *const *)t->rc.data_paths, t->rc.n_data_paths, "train", e))
        return -1;
    char **tp = t->rc.n_data_paths_test ? t->rc.data_paths_test : t->rc.data_paths;
    int ntp = t->rc.n_data_paths_test ? t->rc.n_data_paths_test : t->rc.n_data_paths;
    int have = 1;
    for (int i = 0; i < ntp; i++) {
        char *d = trm_path_join(tp[i], "test");
        int found = trm_is_dir(d);
        free(d);
        /* test data asked for by name must exist: a typo must not train without evaluation */
        if (!found && t->rc.n_data_paths_test)
            return trm_errf(e, "data_paths_test: %s %s", tp[i],
                            trm_is_dir(tp[i]) ? "has no test/ split" : "does not exist");
        have &= found;
    }
    if (have) {
        if (trm_dataset_open(&t->test, (const char *const *)tp, ntp, "test", e)) return -1;
        t->have_test = 1;
        if (trm_dataset_check_compatible(&t->test.meta, &t->train.meta, "the test split", e)) return -1;
    } else {
        fprintf(stderr, "trm: warning: no test split next to the training data; evaluation is skipped\n");
    }
    return 0;
}

static int train_loop(trainer *t, trm_err *e) {
    trm_model *m = &t->m;
    trm_batch b;
    trm_batch_alloc(&b, m->B, m->S);
    int rc = 0, saved_last = 0;
    for (int64_t iter = t->sampler.iter; iter < t->total_iters && rc == 0; iter++) {
        int got;
        while (t->step < t->total_steps && (got = trm_sampler_next(&t->train, &t->sampler, &b)) != 0) {
            if (got < 0) {
                rc = trm_errf(e, "the training sampler's state is invalid (iter %" PRId64 ", position %" PRId64 ")",
                              t->sampler.iter, t->sampler.group_pos);
                break;
            }
            t->step++;
            trm_model_set_batch(m, b.inputs, b.labels, b.puzzle_identifiers);
            trm_step_opts so = {.training = 1, .want_grad = 1, .grad_scale = 1.0f / (float)t->rc.global_batch_size,
                                .seed = (uint64_t)t->rc.seed, .rng_step = (uint64_t)t->step};
            trm_plan_step(&t->plan, &so);
            trm_model_sync_grads(m, !t->rc.freeze_weights);
            t->lr = trm_lr_schedule(t->rc.lr, t->step, t->rc.lr_warmup_steps, t->total_steps, t->rc.lr_min_ratio);
            trm_optim_opts oo = {
                .lr = t->lr,
                .puzzle_emb_lr = trm_lr_schedule(t->rc.puzzle_emb_lr, t->step, t->rc.lr_warmup_steps,
                                                 t->total_steps, t->rc.lr_min_ratio),
                .weight_decay = t->rc.weight_decay, .puzzle_emb_weight_decay = t->rc.puzzle_emb_weight_decay,
                .beta1 = t->rc.beta1, .beta2 = t->rc.beta2, .t = t->step,
                .freeze_weights = t->rc.freeze_weights, .ema = t->rc.ema, .ema_rate = t->rc.ema_rate};
            trm_model_optim_step(m, &oo);
            t->acc_steps++;
            if (trm_display_due(&t->disp)) show_train_status(t);
            int sig = trm_signals_pending(), at_stop = t->step == t->rc.stop_after_steps;
            int log = t->step % t->rc.log_interval == 0 || t->step == t->total_steps;
            /* distributed: signals are looked at where all ranks meet anyway (log points) */
            if (t->dist->world > 1 && !log && !at_stop) sig = 0;
            if ((log || sig || at_stop) && (rc = flush_metrics(t, &sig, e)) != 0) break;
            int stop = sig || at_stop;
            if (log) log_train(t);
            if (stop) {
                trm_display_clear(&t->disp);
                if (sig)
                    fprintf(stderr, "trm: signal %d: stopping after step %" PRId64 "\n", sig, t->step);
                else
                    printf("stop_after_steps=%" PRId64 ": stopping; continue with resume=auto\n", t->step);
                int src = save_checkpoint(t, e);
                trm_batch_free(&b);
                return src ? -1 : sig ? 128 + sig : 0;
            }
        }
        if (rc || (rc = flush_metrics(t, NULL, e)) != 0) break;
        trm_sampler_next_iter(&t->sampler);
        saved_last = 0;
        /* The reference keeps looping over the remaining chunks once total_steps is reached
         * (its train_batch becomes a no-op) and evaluates in the first of them that is at or
         * past min_eval_interval; repeating that evaluation on the same weights adds nothing,
         * so the run evaluates once here and stops. */
        int last = t->step >= t->total_steps || iter == t->total_iters - 1;
        if (iter >= t->rc.min_eval_interval || (last && t->total_iters - 1 >= t->rc.min_eval_interval)) {
            if (t->have_test && run_eval(t, e)) {
                rc = -1;
                break;
            }
            if (t->rc.checkpoint_every_eval || last) {
                if (save_checkpoint(t, e)) {
                    rc = -1;
                    break;
                }
                saved_last = 1;
            }
        }
        if (last) break;
    }
    if (rc == 0 && !saved_last && save_checkpoint(t, e)) rc = -1;
    trm_batch_free(&b);
    return rc;
}

/* Device, process group and collectives: the device policy refuses distributed runs on
 * backends without collectives; GPUs are taken one per local rank. */
static int open_device(trainer *t, trm_device_choice *dc, trm_err *e) {
    trm_dist *d = t->dist;
    trm_device_request req = {.want_compile = t->rc.compile, .want_bf16 = t->rc.arch.forward_bf16,
                              .want_distributed = d->world > 1};
    if (trm_device_choose(t->rc.device, &req, dc, is_root(t) ? stderr : NULL, e)) return -1;
    if (d->world > 1) {
        if (!strcmp(dc->entry->name, "cpu")) trm_device_share_host(d->local_world);
        else if (trm_device_pick_local(dc, d->local_rank, e)) return -1;
        if (trm_dist_connect(d, !strcmp(dc->entry->name, "cpu"), e)) return -1;
    }
    printf("%s\n", dc->why);
    t->be = trm_device_open(dc, e);
    if (!t->be) return -1;
    if (d->world > 1) {
        if (t->be->comm_init(t->be, d, e)) return -1;
        printf("distributed: %d ranks (launched by %s), %d per host; global batch %" PRId64 " = %d x %" PRId64
               " per rank; gradients summed with %s\n",
               d->world, trm_launch_name(d->launch), d->local_world, t->rc.global_batch_size, d->world,
               t->rc.global_batch_size / d->world, strcmp(t->be->name, "cpu") ? "NCCL" : "MPI");
    }
    return 0;
}

/* Rank 0's part of the setup: the run directory, its config.yaml and metrics log, evaluators. */
static int open_run_dir(trainer *t, trm_err *e) {
    if (trm_run_dir_tidy(&t->rdir, t->step, e)) return -1;
    t->config_yaml = cfg_to_yaml(t->cfg);
    char *cpath = trm_path_join(t->run_dir, "config.yaml");
    int rc = trm_write_file_atomic(cpath, t->config_yaml, strlen(t->config_yaml), e);
    free(cpath);
    if (rc) return -1;
    char *mpath = trm_path_join(t->run_dir, "metrics.jsonl");
    t->metrics = fopen(mpath, "a");
    if (!t->metrics) {
        trm_errf(e, "%s: cannot open for appending", mpath);
        free(mpath);
        return -1;
    }
    free(mpath);
    /* START at the first step this session trains: a TensorBoard still showing the steps
     * after the checkpoint, from the session that crashed, drops them */
    if (t->rc.tensorboard) t->tb = trm_tfevents_new(t->run_dir, t->step + 1, t->config_yaml);
    printf("run directory: %s\n", t->run_dir);
    size_t nparams = 0;
    for (int i = 0; i < t->m.nparams; i++) nparams += t->m.params[i].numel;
    char *model = xasprintf("model: %s, %s, %zu parameters; %" PRId64 " steps x %" PRId64 " examples, %" PRId64
                            " chunks",
                            t->m.arch->preset, t->rc.arch.mlp_t ? "mlp_t" : "attention", nparams, t->total_steps,
                            t->rc.global_batch_size, t->total_iters);
    trm_print_wrapped(stdout, TRM_LINE_WIDTH, model);
    free(model);
    if (t->have_test) {
        const char *dir = t->rc.n_data_paths_test ? t->rc.data_paths_test[0] : t->rc.data_paths[0];
        if (trm_evaluators_open(&t->evals, t->rc.evaluators, t->rc.n_evaluators, dir, e)) return -1;
        const trm_dataset_meta *tm = &t->test.meta;
        if (t->test.nsets > 0)
            trm_puzzle_samples_init(&t->samples, trm_grid_kind_for(tm->seq_len, tm->vocab_size), tm->seq_len,
                                    t->test.sets[0].n_examples, t->test.sets[0].name);
    }
    return 0;
}

/* CRC32 of device memory, through the host in slices. */
static uint32_t crc_of_device(trm_backend *be, const void *dev, size_t bytes) {
    const size_t slice = (size_t)64 << 20;
    unsigned char *h = xmalloc(bytes < slice ? (bytes ? bytes : 1) : slice);
    uLong crc = crc32(0L, Z_NULL, 0);
    for (size_t o = 0; o < bytes; o += slice) {
        size_t c = bytes - o < slice ? bytes - o : slice;
        be->to_host(be, h, (const char *)dev + o, c);
        crc = crc32(crc, h, (uInt)c);
    }
    free(h);
    return (uint32_t)crc;
}

/* One CRC32 over every carry state's reset vector (H_init, L_init, ...), in state order. */
static uint32_t crc_of_inits(const trm_model *m) {
    size_t bytes = (size_t)m->D * sizeof(float);
    unsigned char *h = xmalloc(bytes);
    uLong crc = crc32(0L, Z_NULL, 0);
    for (int k = 0; k < m->nstates; k++) {
        m->be->to_host(m->be, h, m->init[k], bytes);
        crc = crc32(crc, h, (uInt)bytes);
    }
    free(h);
    return (uint32_t)crc;
}

/* Every rank must run rank 0's configuration (cfg_crc: its checksum before the run names are
 * drawn; only rank 0's are used) and start from rank 0's exact state: weights, EMA, optimiser
 * moments, puzzle embeddings, the step and the data position. Identical by construction when
 * every rank initialised from the same seed or loaded the same checkpoint; this proves it, and
 * stops a rank that resumed from another file before it trains on a different model. */
static int check_same_state(trainer *t, uint32_t cfg_crc, trm_err *e) {
    if (t->dist->world <= 1) return 0;
    trm_model *m = &t->m;
    trm_backend *be = t->be;
    size_t nw = m->n_flat * sizeof(float);
    size_t npuz = (size_t)(m->cfg.num_puzzle_identifiers > 0 ? m->cfg.num_puzzle_identifiers : 1) *
                  (size_t)(m->cfg.puzzle_emb_ndim ? m->cfg.puzzle_emb_ndim : 1) * sizeof(float);
    enum { NSTATE = 13 };
    int64_t mine[NSTATE] = {cfg_crc, t->step, t->sampler.iter, t->sampler.set_index, t->sampler.group_pos,
                            t->sampler.batch_index, t->have_test, crc_of_device(be, m->w, nw),
                            m->ema ? crc_of_device(be, m->ema, nw) : 0, crc_of_device(be, m->m, nw),
                            crc_of_device(be, m->v, nw), crc_of_device(be, m->puz_w, npuz),
                            crc_of_inits(m)};
    static const char *const what[NSTATE] = {"configuration", "step", "data position", "data position", "data position",
                                             "data position", "test split", "weights", "EMA weights",
                                             "optimiser moments", "optimiser moments", "puzzle embeddings",
                                             "carry reset vectors"};
    int64_t root[NSTATE];
    memcpy(root, mine, sizeof root);
    if (trm_dist_bcast(t->dist, root, sizeof root, e)) return -1;
    int differs = -1;
    for (int i = 0; i < NSTATE && differs < 0; i++)
        if (mine[i] != root[i]) differs = i;
    trm_err local = {{0}};
    if (differs == 0)
        trm_errf(&local, "rank %d's configuration differs from rank 0's; every rank must be started with the same "
                         "command line and config files", t->dist->rank);
    else if (differs > 0)
        trm_errf(&local, "rank %d's %s do not match rank 0's: every rank must start from the same state (the same "
                         "seed, data and checkpoint)", t->dist->rank, what[differs]);
    if (all_ranks_ok(t, differs < 0, "the state check failed", e)) {
        if (differs >= 0) *e = local;
        return -1;
    }
    return 0;
}

static int setup(trainer *t, const char *resume_path, trm_err *e) {
    if (trm_run_config_read(&t->rc, t->cfg, e)) return -1;
    /* overwrite is what this launch does to the directory, not a setting of the run: stored
     * in config.yaml and the checkpoints, a resume would move the run aside again */
    int overwrite = t->rc.overwrite;
    if (overwrite && cfg_apply_override(t->cfg, NULL, "~overwrite", e)) return -1;
    trm_dist *d = t->dist;
    if (trm_check_batch_split(t->rc.global_batch_size, d->rank, d->world, e))
        return -1;
    if ((t->rc.eval_save_list & TRM_OUT_LOGITS) && d->world > 1)
        return trm_errf(e, "eval_save_outputs: logits are saved by a one-process run only (the ranks' logits are "
                           "not gathered); leave logits out or evaluate with trm generate");
    char *yaml = cfg_to_yaml(t->cfg);
    uint32_t cfg_crc = (uint32_t)crc32(0L, (const Bytef *)yaml, (uInt)strlen(yaml));
    free(yaml);
    trm_fill_run_names(t->cfg, &t->rc);
    trm_run_config_free(&t->rc);
    if (trm_run_config_read(&t->rc, t->cfg, e)) return -1;
    t->rc.overwrite = overwrite;
    t->run_dir = t->rc.checkpoint_path;
    if (open_data(t, e)) return -1;

    trm_device_choice dc;
    if (open_device(t, &dc, e)) return -1;
    /* before anything is loaded or written: a second run into the same directory stops here */
    int claimed = is_root(t) ? trm_run_dir_claim(&t->rdir, t->run_dir, t->rc.resume != NULL, t->rc.overwrite, e) : 0;
    if (all_ranks_ok(t, claimed == 0, "claiming the run directory failed", e)) return -1;

    trm_model_config mc;
    int64_t gbs = t->rc.global_batch_size;
    trm_model_config_for(&mc, &t->rc, &t->train.meta, (int)(gbs / d->world));
    if (trm_model_create(&t->m, &mc, t->be, (uint64_t)t->rc.seed, t->rc.ema, e)) return -1;
    if (trm_model_set_ranks(&t->m, d->rank, d->world, e)) return -1;
    trm_plan_init(&t->plan, &t->m, dc.compile);
    snprintf(t->device_desc, sizeof t->device_desc, "%s", dc.why);
    t->compile_on = dc.compile;
    t->total_steps = trm_total_steps(&t->train.meta, t->rc.epochs, gbs);
    t->total_iters = t->rc.epochs / t->rc.eval_interval;
    if (t->total_steps < 1)
        return trm_errf(e, "the run has no training steps: epochs (%" PRId64 ") x examples per epoch is smaller than "
                           "global_batch_size (%" PRId64 ")", t->rc.epochs, gbs);
    trm_sampler_init(&t->sampler, (uint64_t)t->rc.seed, t->rc.eval_interval, gbs, d->rank, d->world);

    if (resume_path) {
        trm_ckpt_state st;
        if (trm_checkpoint_resume(&t->m, resume_path, &st, e)) return -1;
        t->step = st.step;
        if (st.has_sampler) { /* the position; seed, batch and ranks come from this run */
            if (st.sampler.seed != t->sampler.seed || st.sampler.global_batch_size != gbs ||
                st.sampler.epochs_per_iter != t->sampler.epochs_per_iter)
                return trm_errf(e, "%s: seed, global_batch_size or eval_interval differ from the checkpoint's; "
                                   "an exact resume needs the same", resume_path);
            t->sampler.iter = st.sampler.iter;
            t->sampler.set_index = st.sampler.set_index;
            t->sampler.group_pos = st.sampler.group_pos;
            t->sampler.batch_index = st.sampler.batch_index;
        }
        printf("resumed from %s at step %" PRId64 "\n", resume_path, t->step);
    } else if (t->rc.load_checkpoint) {
        if (trm_checkpoint_load_weights(&t->m, t->rc.load_checkpoint, 1, e)) return -1;
        printf("loaded weights from %s\n", t->rc.load_checkpoint);
    }
    int rc = is_root(t) ? open_run_dir(t, e) : 0;
    /* rank 0's own setup failing must stop the others too, not leave them in a collective */
    if (all_ranks_ok(t, rc == 0, "setting up the run directory failed", e) || check_same_state(t, cfg_crc, e)) return -1;
    fflush(stdout);
    return 0;
}

/* The last word of a run: report.html with how it ended, and a summary line. */
static void final_report(trainer *t, int rc, const trm_err *e) {
    char state[2300];
    /* the sampler's last chunk may end a few steps short of total_steps (whole batches per
     * epoch, as the reference), so "stopped" means stop_after_steps ended it */
    int stopped_early = t->rc.stop_after_steps > 0 && t->step == t->rc.stop_after_steps && t->step < t->total_steps;
    if (rc == 0 && !stopped_early)
        snprintf(state, sizeof state, "finished");
    else if (rc == 0)
        snprintf(state, sizeof state, "stopped at step %" PRId64 " (stop_after_steps); continue with resume=auto", t->step);
    else if (rc >= 128)
        snprintf(state, sizeof state, "stopped by signal %d at step %" PRId64 "; continue with resume=auto", rc - 128, t->step);
    else
        snprintf(state, sizeof state, "failed at step %" PRId64 ": %s", t->step, e->msg);
    write_report(t, state, 0);
    if (!is_root(t) || rc != 0) return;
    double now = trm_now_seconds(), train_s = now - t->t_start - t->pause_s;
    char d[32];
    trm_format_duration(now - t->t_start, d, sizeof d);
    trm_display_clear(&t->disp);
    char *line = xasprintf("%s: %" PRId64 " steps in %s (%.3g steps/s while training); report: %s/report.html",
                           state, t->step - t->step_start, d,
                           train_s > 0 ? (double)(t->step - t->step_start) / train_s : 0.0, t->run_dir);
    trm_print_wrapped(stdout, TRM_LINE_WIDTH, line);
    free(line);
}

/* A resume of a run that trained all its steps and logged its last evaluation: training and
 * evaluating again would only log the same step twice. Rank 0 decides for all. */
static int finished_already(trainer *t, trm_err *e) {
    if (t->step < t->total_steps) return 0;
    int64_t done = is_root(t) && (!t->have_test || trm_run_dir_logged(&t->rdir, t->step, "eval"));
    if (t->dist->world > 1 && trm_dist_bcast(t->dist, &done, sizeof done, e)) return 0;
    return (int)done;
}

int trm_pretrain_main(cfg_node *cfg, const char *resume_path) {
    trainer t;
    memset(&t, 0, sizeof t);
    t.cfg = cfg;
    t.rdir.lock_fd = -1;
    trm_err e = {{0}};
    trm_dist dist;
    if (trm_dist_detect(&dist, &e)) {
        fprintf(stderr, "trm pretrain: %s\n", e.msg);
        return 1;
    }
    t.dist = &dist;
    if (dist.world > 1) {
        /* a stop signal during setup must not kill one rank while the others wait for it in a
         * collective: from here on it is a request that all ranks honour together */
        trm_signals_install();
        /* under mpirun the real ranks (and local ranks) come from MPI itself */
        if (dist.launch == TRM_LAUNCH_MPI && trm_dist_connect(&dist, 1, &e)) {
            fprintf(stderr, "trm pretrain: %s\n", e.msg);
            return 1;
        }
    }
    /* the other ranks' stdout would repeat rank 0's; their errors still reach stderr */
    if (dist.rank != 0 && !freopen("/dev/null", "w", stdout)) return 1;
    /* OpenMPI hands its ranks a pseudo-terminal even when mpirun's own output is a file: log
     * lines, not a status line, under mpirun */
    trm_display_init(&t.disp, stdout, dist.rank == 0, trm_term_is_tty(stdout) && dist.launch != TRM_LAUNCH_MPI);
    int rc = setup(&t, resume_path, &e);
    int done = rc == 0 && finished_already(&t, &e);
    if (done)
        printf("%s: the run is finished (step %" PRId64 " of %" PRId64 "); nothing to do\n", t.run_dir, t.step,
               t.total_steps);
    if (rc == 0 && !done) {
        if (dist.world <= 1) trm_signals_install(); /* distributed: installed before setup */
        t.t_start = t.t_last_log = trm_now_seconds();
        t.step_start = t.step_last_log = t.step;
        write_report(&t, "training", 1);
        rc = train_loop(&t, &e);
        final_report(&t, rc, &e);
    }
    if (rc < 0 || (rc > 0 && rc < 128)) {
        if (dist.world > 1)
            fprintf(stderr, "trm pretrain (rank %d): %s\n", dist.rank, e.msg);
        else
            fprintf(stderr, "trm pretrain: %s\n", e.msg);
        rc = 1;
        /* the other ranks may be waiting in a collective: take the whole run down */
        if (dist.world > 1) trm_dist_abort(&dist, rc);
    }
    if (t.metrics) fclose(t.metrics);
    trm_tfevents_free(t.tb);
    trm_puzzle_samples_free(&t.samples);
    trm_evaluators_free(t.evals);
    trm_plan_free(&t.plan);
    if (t.m.be) trm_model_destroy(&t.m);
    if (t.be) t.be->destroy(t.be);
    if (t.have_test) trm_dataset_close(&t.test);
    if (t.train.sets) trm_dataset_close(&t.train);
    free(t.config_yaml);
    trm_run_dir_release(&t.rdir);
    trm_run_config_free(&t.rc);
    trm_dist_finalize(&dist);
    return rc;
}
