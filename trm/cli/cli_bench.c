/* cli_bench.c — `trm bench`: times training steps (ACT step + optimisers) of a config on
 * synthetic data, so speed can be measured without a dataset: median ms/step, examples/s,
 * model TFLOP/s estimate and peak memory, and where the backend counts them (stream_stats:
 * mps) its kernel launches, barriers, submits, host waits and recording time per step. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "backend/backend.h"
#include "util/util.h"
#include "train/train.h"
#include "view/view.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Forward+backward FLOPs of one training step (GEMMs only): 2·rows·in·out per linear, ×3
 * for the final (saved) cycle's Net calls, ×1 for the no-grad ones; attention adds
 * 4·B·H·T²·hd. The Net calls per level come from the architecture. */
static double step_flops(const trm_model *m) {
    double R = (double)m->B * m->T, D = m->D, per_layer;
    if (m->cfg.mlp_t)
        per_layer = 2.0 * m->B * D * m->T * 3.0 * m->It;
    else
        per_layer = 2.0 * R * D * 4.0 * m->A + 4.0 * m->B * (double)m->H * m->T * (double)m->T * m->hd;
    per_layer += 2.0 * R * D * 3.0 * m->I;
    double total = 3.0 * 2.0 * R * D * m->V;
    for (int lv = 0; lv < TRM_NLEVELS; lv++) {
        int nograd, grad;
        trm_model_net_calls(&m->cfg, lv, &nograd, &grad);
        total += per_layer * m->level_layers[lv] * (nograd + 3.0 * grad);
    }
    return total;
}

/* The shape of the data the config trains on: its dataset's metadata when data_paths[0] is
 * there, else the shape trm's own builder makes for a directory of that name (sudoku4,
 * sudoku*, maze*, arc*), else a 9x9 Sudoku's; what was chosen goes to stderr. */
static void data_shape(const trm_run_config *rc, int64_t *seq_len, int64_t *vocab, int64_t *num_ids) {
    const char *dir = rc->n_data_paths ? rc->data_paths[0] : "";
    const char *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    trm_dataset d;
    trm_err ignore;
    const char *paths[1] = {dir};
    if (*dir && trm_dataset_open(&d, paths, 1, "train", &ignore) == 0) {
        *seq_len = d.meta.seq_len, *vocab = d.meta.vocab_size, *num_ids = d.meta.num_puzzle_identifiers;
        trm_dataset_close(&d);
        char *line = xasprintf("trm bench: inputs shaped as %s (%" PRId64 " tokens, vocabulary %" PRId64 ")", dir,
                               *seq_len, *vocab);
        trm_print_wrapped(stderr, TRM_LINE_WIDTH, line);
        free(line);
        return;
    }
    static const struct {
        const char *prefix;
        int64_t seq_len, vocab;
        const char *what;
    } known[] = {{"sudoku4", 16, 6, "4x4 Sudoku"}, {"sudoku", 81, 11, "9x9 Sudoku"},
                 {"maze", 900, 6, "30x30 maze"}, {"arc", 900, 12, "30x30 ARC grid"}};
    size_t i = 0;
    while (i < sizeof known / sizeof known[0] && strncmp(base, known[i].prefix, strlen(known[i].prefix))) i++;
    if (i == sizeof known / sizeof known[0]) i = 1;
    *seq_len = known[i].seq_len, *vocab = known[i].vocab;
    char *line = xasprintf("trm bench: no dataset at %s; inputs shaped as a %s (%" PRId64 " tokens, vocabulary "
                           "%" PRId64 "; --seq-len, --vocab to change)",
                           *dir ? dir : "data_paths", known[i].what, *seq_len, *vocab);
    trm_print_wrapped(stderr, TRM_LINE_WIDTH, line);
    free(line);
}

int cmd_bench(int argc, char **argv, const trm_globals *g) {
    int64_t steps = 30, warmup = 5, seq_len = 0, vocab = 0, num_ids = 0;
    int json = 0;
    char **rest = xcalloc((size_t)argc + 1, sizeof *rest);
    int nrest = 0;
    for (int i = 0; i < argc; i++) {
        int64_t *dst = !strcmp(argv[i], "--steps") ? &steps : !strcmp(argv[i], "--warmup") ? &warmup
                     : !strcmp(argv[i], "--seq-len") ? &seq_len : !strcmp(argv[i], "--vocab") ? &vocab
                     : !strcmp(argv[i], "--num-ids") ? &num_ids : NULL;
        if (dst) {
            char *end;
            if (i + 1 >= argc || (*dst = strtoll(argv[i + 1], &end, 10), *end) || *dst < 1) {
                fprintf(stderr, "trm bench: %s needs a positive integer\n", argv[i]);
                free(rest);
                return 2;
            }
            i++;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else {
            rest[nrest++] = argv[i];
        }
    }
    const char *cfg_name;
    char **ov;
    int n;
    trm_err e = {{0}};
    int rc = 2;
    cfg_node *cfg = NULL;
    trm_run_config rcfg;
    memset(&rcfg, 0, sizeof rcfg);
    trm_backend *be = NULL;
    trm_model m;
    memset(&m, 0, sizeof m);
    trm_plan plan;
    memset(&plan, 0, sizeof plan);
    if (trm_collect_overrides(nrest, rest, &cfg_name, &ov, &n, &e) ||
        !(cfg = cfg_compose(&g->search, cfg_name ? cfg_name : "cfg_pretrain", n, ov, &e)) ||
        trm_run_config_read(&rcfg, cfg, &e))
        goto out;
    trm_warn_unread_arch_keys(cfg, ov, n, stderr);
    if (!seq_len || !vocab) { /* the shape the flags leave open is the config's data's */
        int64_t s, v, ids = 1;
        data_shape(&rcfg, &s, &v, &ids);
        seq_len = seq_len ? seq_len : s, vocab = vocab ? vocab : v, num_ids = num_ids ? num_ids : ids;
    }
    if (!num_ids) num_ids = 1;
    rc = 1;
    trm_device_request req = {.want_compile = rcfg.compile, .want_bf16 = rcfg.arch.forward_bf16};
    trm_device_choice dc;
    if (trm_device_choose(rcfg.device, &req, &dc, stderr, &e) || !(be = trm_device_open(&dc, &e))) goto out;
    trm_dataset_meta meta = {.seq_len = seq_len, .vocab_size = vocab, .num_puzzle_identifiers = num_ids};
    trm_model_config mc;
    trm_model_config_for(&mc, &rcfg, &meta, (int)rcfg.global_batch_size);
    if (trm_model_create(&m, &mc, be, 0, rcfg.ema, &e)) goto out;
    trm_plan_init(&plan, &m, dc.compile);

    size_t BS = (size_t)m.B * m.S;
    int32_t *in = xmalloc(BS * sizeof(int32_t)), *lab = xmalloc(BS * sizeof(int32_t)), *pid = xmalloc((size_t)m.B * sizeof(int32_t));
    trm_rng r;
    trm_rng_init(&r, 1, 1);
    double *ms = xmalloc(sizeof(double) * (size_t)steps);
    trm_stream_stats st0 = {0}, st1 = {0}; /* the timed steps' counters: st1 − st0 */
    for (int64_t s = 0; s < warmup + steps; s++) {
        for (size_t i = 0; i < BS; i++) in[i] = 1 + (int32_t)trm_rng_below(&r, (uint64_t)vocab - 1), lab[i] = in[i];
        for (int b = 0; b < m.B; b++) pid[b] = (int32_t)trm_rng_below(&r, (uint64_t)num_ids);
        if (s == warmup && be->stream_stats) be->stream_stats(be, &st0);
        if (s == warmup) trm_profile_reset(be); /* TRM_PROFILE=1: the timed steps' ops only */
        double t0 = trm_now_seconds();
        trm_model_set_batch(&m, in, lab, pid);
        trm_step_opts so = {.training = 1, .want_grad = 1, .grad_scale = 1.0f / (float)m.B, .rng_step = (uint64_t)s};
        trm_plan_step(&plan, &so);
        trm_optim_opts oo = {.lr = 1e-4, .puzzle_emb_lr = 1e-2, .weight_decay = 0.1, .puzzle_emb_weight_decay = 0.1,
                             .beta1 = 0.9, .beta2 = 0.95, .t = s + 1, .ema = rcfg.ema, .ema_rate = 0.999};
        trm_model_optim_step(&m, &oo);
        be->sync(be);
        if (s >= warmup) ms[s - warmup] = 1e3 * (trm_now_seconds() - t0);
    }
    if (be->stream_stats) be->stream_stats(be, &st1);
    qsort(ms, (size_t)steps, sizeof *ms, cmp_double);
    /* Per step, averaged over the timed steps (the counts are the same every step unless ACT
     * halts differently; the times vary). */
    double ns = (double)steps, disp = (double)(st1.dispatches - st0.dispatches) / ns;
    double bars = (double)(st1.barriers - st0.barriers) / ns, subs = (double)(st1.submits - st0.submits) / ns;
    double waits = (double)(st1.waits - st0.waits) / ns, rec_ms = (st1.record_ms - st0.record_ms) / ns;
    double wait_ms = (st1.wait_ms - st0.wait_ms) / ns;
    char *stream = be->stream_stats
        ? (json ? xasprintf(", \"dispatches_per_step\": %.1f, \"barriers_per_step\": %.1f, \"submits_per_step\": "
                            "%.1f, \"host_waits_per_step\": %.1f, \"record_ms_per_step\": %.3f, "
                            "\"host_wait_ms_per_step\": %.3f",
                            disp, bars, subs, waits, rec_ms, wait_ms)
                : xasprintf("; per step %.0f dispatches, %.0f barriers, %.0f submits, %.0f host waits, %.2f ms "
                            "recording, %.2f ms waiting",
                            disp, bars, subs, waits, rec_ms, wait_ms))
        : xasprintf("%s", "");
    double med = steps % 2 ? ms[steps / 2] : 0.5 * (ms[steps / 2 - 1] + ms[steps / 2]);
    double exs = (double)m.B / (med / 1e3), tflops = step_flops(&m) / (med / 1e3) / 1e12;
    double rss = (double)trm_peak_rss_bytes() / (1024.0 * 1024.0);
    /* Device memory in use after the run (everything is allocated up front, so this is the
     * peak; it includes the runtime's own context). */
    size_t dfree = 0, dtotal = 0;
    if (be->mem_info && !be->caps.unified_memory) be->mem_info(be, &dfree, &dtotal); /* host: peak RSS says it */
    double dev_gib = dtotal ? (double)(dtotal - dfree) / 1073741824.0 : 0.0;
    if (json)
        printf("{\"backend\": \"%s\", \"batch\": %d, \"seq_len\": %d, \"hidden\": %d, \"mlp_t\": %s, \"steps\": %" PRId64
               ", \"ms_per_step_median\": %.3f, \"ms_min\": %.3f, \"ms_max\": %.3f, \"examples_per_s\": %.1f, "
               "\"model_tflops\": %.4f, \"peak_rss_mib\": %.1f, \"device_mem_gib\": %.2f, \"compile\": %s, "
               "\"bf16\": %s%s}\n",
               be->name, m.B, m.S, m.D, m.cfg.mlp_t ? "true" : "false", steps, med, ms[0], ms[steps - 1], exs, tflops, rss,
               dev_gib, plan.enabled ? "true" : "false", be->use_bf16 ? "true" : "false", stream);
    else {
        char *line = xasprintf("%s: %d x %d tokens, hidden %d, %s, compile %s, %s: median %.2f ms/step (min %.2f, "
                               "max %.2f over %" PRId64 " steps), %.0f examples/s, %.3f model TFLOP/s, peak RSS "
                               "%.1f MiB, device memory %.2f GiB%s",
                               be->name, m.B, m.S, m.D, m.cfg.mlp_t ? "mlp_t" : "attention",
                               plan.enabled ? "on" : "off", be->use_bf16 ? "bf16" : "fp32", med, ms[0], ms[steps - 1],
                               steps, exs, tflops, rss, dev_gib, stream);
        trm_print_wrapped(stdout, TRM_LINE_WIDTH, line);
        free(line);
    }
    free(in);
    free(lab);
    free(pid);
    free(ms);
    free(stream);
    rc = 0;
out:
    if (rc) fprintf(stderr, "trm bench: %s\n", e.msg);
    trm_plan_free(&plan);
    if (m.be) trm_model_destroy(&m);
    if (be) be->destroy(be);
    trm_run_config_free(&rcfg);
    cfg_free(cfg);
    free(ov);
    free(rest);
    return rc;
}
