/* cli_train.c — `trm pretrain` (config composition, resume lookup) and `trm generate`
 * (evaluate a checkpoint on a dataset or on puzzles typed on the command line). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "commands.h"
#include "backend/backend.h"
#include "dist/dist.h"
#include "train/train.h"
#include "util/util.h"
#include "view/view.h"


static char *dirname_of(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? xstrndup(p, (size_t)(s - p) ? (size_t)(s - p) : 1) : xstrdup(".");
}

/* The config of a checkpoint with command-line overrides applied on top. */
static cfg_node *config_from_checkpoint(const char *ckpt, const cfg_search *search, char **ov, int n, trm_err *e) {
    char *yaml = trm_checkpoint_config(ckpt, e);
    if (!yaml) return NULL;
    cfg_node *cfg = cfg_from_stored(ckpt, yaml, search, n, ov, e);
    free(yaml);
    return cfg;
}

static const char *cfg_str_or_null(const cfg_node *cfg, const char *key) {
    cfg_node *n = cfg_get(cfg, key);
    return n && n->type == CFG_STR ? n->s : NULL;
}

/* Finds the checkpoint to resume from (NULL = start fresh); may set checkpoint_path. */
static int find_resume(cfg_node *cfg, char **resume_path, trm_err *e) {
    *resume_path = NULL;
    const char *r = cfg_str_or_null(cfg, "resume");
    if (!r) return 0;
    if (strcmp(r, "auto") != 0) {
        if (!trm_file_exists(r)) return trm_errf(e, "resume=%s: no such checkpoint file", r);
        *resume_path = xstrdup(r);
        return 0;
    }
    const char *dir = cfg_str_or_null(cfg, "checkpoint_path");
    char *owned = NULL;
    if (!dir) {
        trm_run_config rc;
        if (!cfg_str_or_null(cfg, "run_name"))
            return trm_errf(e, "resume=auto needs the run to be named: add +run_name=NAME or checkpoint_path=DIR");
        if (trm_run_config_read(&rc, cfg, e)) return -1;
        cfg_node *tmp = cfg_clone(cfg);
        trm_fill_run_names(tmp, &rc);
        owned = xstrdup(cfg_get(tmp, "checkpoint_path")->s);
        cfg_free(tmp);
        trm_run_config_free(&rc);
        dir = owned;
    }
    *resume_path = trm_checkpoint_latest(dir);
    if (!*resume_path) printf("resume=auto: no checkpoint in %s yet; starting a new run\n", dir);
    free(owned);
    return 0;
}

/* torchrun's launcher flags, as the reference's README passes them (`torchrun --nproc-per-node 4
 * --rdzv_backend=c10d --rdzv_endpoint=localhost:0 --nnodes=1 pretrain.py ...`) and as a run over
 * several hosts passes them (`--nnodes 2 --node-rank R --master-addr HOST --master-port P`);
 * both spellings (- and _), `--flag value` and `--flag=value`. What trm's launcher can do is
 * taken; what it cannot (elastic host counts, restarts) is refused here, before any worker. */
typedef enum { TR_NPROC, TR_NNODES, TR_NODE_RANK, TR_RDZV_BACKEND, TR_RDZV_ENDPOINT, TR_RDZV_ID, TR_STANDALONE,
               TR_MASTER_ADDR, TR_MASTER_PORT, TR_MAX_RESTARTS, TR_MONITOR_INTERVAL } torchrun_flag;

static const struct {
    const char *name; /* with '-' between words */
    torchrun_flag flag;
    int has_value;
} torchrun_flags[] = {
    {"nproc-per-node", TR_NPROC, 1},        {"nnodes", TR_NNODES, 1},           {"node-rank", TR_NODE_RANK, 1},
    {"rdzv-backend", TR_RDZV_BACKEND, 1},   {"rdzv-endpoint", TR_RDZV_ENDPOINT, 1}, {"rdzv-id", TR_RDZV_ID, 1},
    {"standalone", TR_STANDALONE, 0},       {"master-addr", TR_MASTER_ADDR, 1}, {"master-port", TR_MASTER_PORT, 1},
    {"max-restarts", TR_MAX_RESTARTS, 1},   {"monitor-interval", TR_MONITOR_INTERVAL, 1},
};

/* What the launcher flags asked for. */
typedef struct {
    int any;            /* a launcher flag was given: this process launches */
    char first[40];     /* the first launcher flag given (for messages) */
    int nproc;          /* 0: not given */
    int nnodes;         /* 1 unless given */
    int node_rank;      /* -1: not given */
    int standalone;
    char host[256];     /* rank 0's host, IPv6 without brackets; "": not given */
    char host_src[300]; /* the flag that gave it, as typed (for messages) */
    int port;           /* -1: not given; 0: pick a free one */
    char port_src[300];
} launcher_flags;

/* "--rdzv_backend=x" -> the table entry, *value "x" (NULL when the value is the next word). */
static int match_torchrun(const char *w, const char **value) {
    if (strncmp(w, "--", 2)) return -1;
    w += 2;
    for (size_t k = 0; k < sizeof torchrun_flags / sizeof torchrun_flags[0]; k++) {
        const char *n = torchrun_flags[k].name;
        size_t i = 0;
        while (n[i] && (w[i] == n[i] || (n[i] == '-' && w[i] == '_'))) i++;
        if (n[i]) continue;
        if (w[i] == 0) return *value = NULL, (int)k;
        if (w[i] == '=' && torchrun_flags[k].has_value) return *value = w + i + 1, (int)k;
    }
    return -1;
}

static int is_local_host(const char *h) {
    static const char *const local[] = {"localhost", "127.0.0.1", "::1", "0.0.0.0"};
    for (size_t i = 0; i < sizeof local / sizeof local[0]; i++)
        if (!strcmp(h, local[i])) return 1;
    return 0;
}

/* v (a part of what the user typed, src = "--flag=value") as a number in lo..hi; the message
 * quotes src, since v alone ("" of "--nnodes=1:") would not say which flag or what was wrong. */
static int parse_range(const char *src, const char *what, const char *v, int lo, int hi, int *out, trm_err *e) {
    int64_t n;
    trm_err ignore;
    if (trm_parse_i64(src, v, &n, &ignore) || n < lo || n > hi)
        return trm_errf(e, "%s: expected %s in %d..%d", src, what, lo, hi);
    *out = (int)n;
    return 0;
}

/* "N" or torchrun's "MIN:MAX" with MIN == MAX; an elastic range is refused. */
static int parse_nnodes(const char *src, const char *v, int *out, trm_err *e) {
    static const char what[] = "a host count N or torchrun's N:N, N";
    const char *colon = strchr(v, ':');
    if (!colon) return parse_range(src, what, v, 1, 1024, out, e);
    char lo[32];
    int a = 0, b = 0;
    snprintf(lo, sizeof lo, "%.*s", (int)(colon - v < 31 ? colon - v : 31), v);
    if (parse_range(src, what, lo, 1, 1024, &a, e) || parse_range(src, what, colon + 1, 1, 1024, &b, e)) return -1;
    if (a != b)
        return trm_errf(e, "%s: elastic host counts are not supported; trm runs a fixed number of hosts, "
                           "all started from the beginning: give --nnodes N", src);
    *out = a;
    return 0;
}

/* HOST, HOST:PORT, [IPV6] or [IPV6]:PORT; a bare IPv6 address (several ':') has no port.
 * *port stays -1 without one. */
static int split_endpoint(const char *src, const char *v, char *host, size_t n, int *port, trm_err *e) {
    const char *h = v, *end = NULL, *ps = NULL;
    if (v[0] == '[') {
        end = strchr(v, ']');
        if (!end || (end[1] && end[1] != ':'))
            return trm_errf(e, "%s: expected [ADDRESS] or [ADDRESS]:PORT", src);
        h = v + 1;
        ps = end[1] ? end + 2 : NULL;
    } else {
        const char *colon = strchr(v, ':');
        if (colon && colon == strrchr(v, ':')) end = colon, ps = colon + 1;
        else end = v + strlen(v);
    }
    if (end == h || (size_t)(end - h) >= n) return trm_errf(e, "%s: expected HOST or HOST:PORT", src);
    memcpy(host, h, (size_t)(end - h));
    host[end - h] = 0;
    return ps ? parse_range(src, "a port", ps, 0, 65535, port, e) : 0;
}

/* Each of rank 0's host and port may come from --master-addr/--master-port or the endpoint;
 * given twice, the values must agree (which one would win is a guess the user should not need). */
static int set_host(launcher_flags *lf, const char *src, const char *host, trm_err *e) {
    if (lf->host[0] && strcmp(lf->host, host))
        return trm_errf(e, "%s and %s name different hosts for rank 0; give it once", lf->host_src, src);
    snprintf(lf->host, sizeof lf->host, "%s", host);
    snprintf(lf->host_src, sizeof lf->host_src, "%s", src);
    return 0;
}

static int set_port(launcher_flags *lf, const char *src, int port, trm_err *e) {
    if (lf->port >= 0 && lf->port != port)
        return trm_errf(e, "%s and %s give different ports for rank 0; give it once", lf->port_src, src);
    lf->port = port;
    snprintf(lf->port_src, sizeof lf->port_src, "%s", src);
    return 0;
}

static int take_torchrun_value(torchrun_flag f, const char *flag, const char *v, launcher_flags *lf, trm_err *e) {
    char src[300], host[256];
    int port = -1;
    snprintf(src, sizeof src, "%s=%s", flag, v ? v : "");
    switch (f) {
    case TR_NPROC: return parse_range(src, "a worker count", v, 1, 1024, &lf->nproc, e);
    case TR_NNODES: return parse_nnodes(src, v, &lf->nnodes, e);
    case TR_NODE_RANK: return parse_range(src, "a host number", v, 0, 1023, &lf->node_rank, e);
    case TR_RDZV_BACKEND:
        if (strcmp(v, "c10d") && strcmp(v, "static"))
            return trm_errf(e, "%s: expected c10d or static (trm's ranks meet at rank 0 over TCP)", src);
        return 0;
    case TR_RDZV_ENDPOINT:
        if (split_endpoint(src, v, host, sizeof host, &port, e) || set_host(lf, src, host, e)) return -1;
        return port >= 0 ? set_port(lf, src, port, e) : 0;
    case TR_MASTER_ADDR:
        if (split_endpoint(src, v, host, sizeof host, &port, e)) return -1;
        if (port >= 0) return trm_errf(e, "%s: give the port with --master-port", src);
        return set_host(lf, src, host, e);
    case TR_MASTER_PORT:
        return parse_range(src, "a port", v, 0, 65535, &port, e) || set_port(lf, src, port, e) ? -1 : 0;
    case TR_MAX_RESTARTS:
        if (strcmp(v, "0")) return trm_errf(e, "%s: trm's launcher does not restart workers; a failed run resumes "
                                               "with resume=auto", src);
        return 0;
    case TR_STANDALONE: lf->standalone = 1; return 0;
    case TR_RDZV_ID: case TR_MONITOR_INTERVAL: return 0;
    }
    return 0;
}

/* lf->host must be an address of this machine; `why` follows the flag as typed where it is not */
static int require_local_host(const launcher_flags *lf, const char *why, trm_err *e) {
    int local = trm_host_is_local(lf->host, e);
    if (local < 0) return trm_err_prefix(e, "%s", lf->host_src);
    return local ? 0 : trm_errf(e, "%s %s", lf->host_src, why);
}

/* Host 0 runs rank 0, which listens here, and its own workers connect to the address given: it
 * must be one of this machine's, or host 0 was given another host's address (or is not host 0). */
static int check_host_zero(const launcher_flags *lf, trm_err *e) {
    return require_local_host(lf, "is not an address of this machine, but --node-rank 0 is the host of rank 0, which "
                                  "listens there; on host 0 give this machine's address as the other hosts reach it "
                                  "(if this is not host 0, give its own --node-rank)", e);
}

/* The rules that join several flags, once all are read. */
static int check_launcher_flags(launcher_flags *lf, trm_err *e) {
    if (!lf->nproc) lf->nproc = 1; /* torchrun's default */
    if ((long long)lf->nnodes * lf->nproc > TRM_LAUNCH_MAX_RANKS)
        return trm_errf(e, "--nnodes %d x --nproc-per-node %d is %lld ranks, more than trm supports (%d)", lf->nnodes,
                        lf->nproc, (long long)lf->nnodes * lf->nproc, TRM_LAUNCH_MAX_RANKS);
    if (lf->nnodes == 1) {
        if (lf->node_rank < 0) lf->node_rank = 0;
        if (lf->node_rank != 0) return trm_errf(e, "--node-rank %d with --nnodes 1: the only host is 0", lf->node_rank);
        if (!lf->host[0] || is_local_host(lf->host)) return 0;
        return require_local_host(lf, "names another host, but with --nnodes 1 every worker runs on this one; for a "
                                      "run over several hosts give --nnodes N and this host's --node-rank on each", e);
    }
    if (lf->standalone)
        return trm_errf(e, "--standalone runs on one host; it cannot be combined with --nnodes %d", lf->nnodes);
    if (lf->node_rank < 0)
        return trm_errf(e, "--nnodes %d: give this host's --node-rank (0..%d; the host of rank 0 is 0)", lf->nnodes,
                        lf->nnodes - 1);
    if (lf->node_rank >= lf->nnodes)
        return trm_errf(e, "--node-rank %d is outside 0..%d (--nnodes %d)", lf->node_rank, lf->nnodes - 1, lf->nnodes);
    if (!lf->host[0])
        return trm_errf(e, "--nnodes %d: give the host of rank 0 (node rank 0) with --master-addr HOST or "
                           "--rdzv-endpoint HOST:PORT, the same on every host", lf->nnodes);
    if (lf->port <= 0)
        return trm_errf(e, "--nnodes %d: give rank 0's port with --master-port P or --rdzv-endpoint HOST:P (P > 0, "
                           "the same on every host; a free port picked on one host is unknown to the others)",
                        lf->nnodes);
    return lf->node_rank == 0 ? check_host_zero(lf, e) : 0;
}

/* Removes the launcher flags from argv into lf (lf->any: one was given). */
static int take_launcher_flags(int *argc, char **argv, launcher_flags *lf, trm_err *e) {
    memset(lf, 0, sizeof *lf);
    lf->nnodes = 1;
    lf->node_rank = lf->port = -1;
    for (int i = 0; i < *argc; i++) {
        const char *v = NULL;
        int k = match_torchrun(argv[i], &v), used = 1;
        if (k < 0) continue;
        char flag[40];
        snprintf(flag, sizeof flag, "--%s", torchrun_flags[k].name);
        if (torchrun_flags[k].has_value && !v) {
            if (i + 1 >= *argc) return trm_errf(e, "%s needs a value", flag);
            v = argv[i + 1];
            used = 2;
        }
        if (take_torchrun_value(torchrun_flags[k].flag, flag, v, lf, e)) return -1;
        if (!lf->any) snprintf(lf->first, sizeof lf->first, "%s", flag);
        lf->any = 1;
        memmove(argv + i, argv + i + used, (size_t)(*argc - i - used) * sizeof *argv);
        *argc -= used;
        i--;
    }
    return lf->any ? check_launcher_flags(lf, e) : 0;
}

/* A backend named by the run's `device` that cannot train distributed is refused before any worker
 * starts (one message, not one per rank). Only the capability table is read: probing a GPU here
 * would hold its memory for the whole run. Other errors are left to the workers. */
static int refuse_device_early(int argc, char **argv, const trm_globals *g, trm_err *e) {
    const char *cfg_name, *dev = NULL;
    char **raw_ov;
    int n, rc = 0;
    trm_err ignore;
    if (trm_collect_overrides(argc, argv, &cfg_name, &raw_ov, &n, &ignore)) {
        free(raw_ov);
        return 0;
    }
    char **ov = trm_normalise_overrides(raw_ov, n);
    free(raw_ov);
    cfg_node *cfg = cfg_compose(&g->search, cfg_name ? cfg_name : "cfg_pretrain", n, ov, &ignore);
    if (cfg && cfg_get_str(cfg, "device", &dev, 1, &ignore) == 0 && dev) {
        char name[32];
        size_t len = strcspn(dev, ":");
        const trm_caps *caps = NULL;
        if (len < sizeof name) {
            memcpy(name, dev, len);
            name[len] = 0;
            caps = trm_known_caps(name);
        }
        trm_device_request req = {.want_distributed = 1};
        int compile, bf16;
        if (caps && trm_device_policy(name, caps, &req, &compile, &bf16, NULL, e)) rc = -1;
    }
    cfg_free(cfg);
    trm_free_strs(ov, n);
    return rc;
}

/* `trm pretrain --nproc-per-node N ...`: start this host's N workers running `trm pretrain ...`
 * with the torchrun environment and supervise them. */
static int launch_workers(const launcher_flags *lf, int argc, char **argv, const trm_globals *g, trm_err *e) {
    trm_dist d;
    if (trm_dist_detect(&d, e)) return 2;
    /* a stray word or an unknown flag is said once here, not once per worker */
    const char *cfg_name;
    char **ov;
    int nov, bad = trm_collect_overrides(argc, argv, &cfg_name, &ov, &nov, e);
    free(ov);
    if (bad) return 2;
    if (lf->nproc * lf->nnodes > 1 && refuse_device_early(argc, argv, g, e)) return 2;
    if (d.launch != TRM_LAUNCH_SINGLE || (getenv("WORLD_SIZE") && getenv("RANK"))) {
        trm_errf(e, "%s inside an already launched run (%s); use one launcher", lf->first,
                 d.launch == TRM_LAUNCH_MPI ? "started by mpirun" : "WORLD_SIZE and RANK are set");
        return 2;
    }
    char exe[4096];
    if (trm_self_exe(exe, sizeof exe, g->argv0, e)) return 1;
    char **args = xcalloc((size_t)argc + 2 * (size_t)g->search.ndirs + 3, sizeof *args);
    int k = 0;
    args[k++] = (char *)g->argv0;
    for (int i = 0; i < g->search.ndirs; i++) {
        args[k++] = "--config-dir";
        args[k++] = (char *)g->search.dirs[i];
    }
    args[k++] = "pretrain";
    for (int i = 0; i < argc; i++) args[k++] = argv[i];
    args[k] = NULL;
    /* With one host the address given was checked to be this machine's, and rank 0 listens on all
     * of its interfaces, so the workers meet on the loopback (the launcher's default): the user's
     * spelling may not connect (::1 where IPv6 is off, when rank 0 listens on IPv4 only). */
    trm_launch_spec spec = {.nproc = lf->nproc, .nnodes = lf->nnodes, .node_rank = lf->node_rank,
                            .master_addr = lf->nnodes > 1 ? lf->host : NULL,
                            .master_port = lf->port > 0 ? lf->port : 0};
    int rc = trm_launch(&spec, exe, args, e);
    free(args);
    return rc < 0 ? 1 : rc;
}

int cmd_pretrain(int argc, char **argv, const trm_globals *g) {
    const char *cfg_name;
    char **raw_ov;
    int n;
    trm_err e = {{0}};
    launcher_flags lf;
    if (take_launcher_flags(&argc, argv, &lf, &e)) {
        fprintf(stderr, "trm pretrain: %s\n", e.msg);
        return 2;
    }
    if (lf.any) {
        int lrc = launch_workers(&lf, argc, argv, g, &e);
        if (lrc && e.msg[0]) fprintf(stderr, "trm pretrain: %s\n", e.msg);
        return lrc;
    }
    if (trm_collect_overrides(argc, argv, &cfg_name, &raw_ov, &n, &e)) {
        fprintf(stderr, "trm pretrain: %s\n", e.msg);
        free(raw_ov);
        return 2;
    }
    char **ov = trm_normalise_overrides(raw_ov, n);
    free(raw_ov);
    cfg_node *cfg = cfg_compose(&g->search, cfg_name ? cfg_name : "cfg_pretrain", n, ov, &e);
    if (cfg) trm_warn_unread_arch_keys(cfg, ov, n, stderr);
    char *resume_path = NULL;
    int rc = 2;
    if (!cfg || find_resume(cfg, &resume_path, &e)) {
        fprintf(stderr, "trm pretrain: %s\n", e.msg);
        goto out;
    }
    if (resume_path) {
        cfg_node *stored = config_from_checkpoint(resume_path, &g->search, ov, n, &e);
        if (!stored) {
            fprintf(stderr, "trm pretrain: %s\n", e.msg);
            goto out;
        }
        /* resume=FILE continues in FILE's directory (it may have been moved since), unless
         * checkpoint_path= says otherwise; resume=auto found FILE in checkpoint_path already */
        int explicit_dir = 0;
        for (int i = 0; i < n; i++) explicit_dir |= !strncmp(ov[i], "++checkpoint_path=", 18);
        if (!explicit_dir) {
            cfg_node *cp = cfg_new(CFG_STR);
            cp->s = dirname_of(resume_path);
            cfg_set(stored, "checkpoint_path", cp);
        }
        cfg_free(cfg);
        cfg = stored;
    }
    rc = trm_pretrain_main(cfg, resume_path);
out:
    cfg_free(cfg);
    free(resume_path);
    trm_free_strs(ov, n);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * generate
 * ------------------------------------------------------------------------------------- */

typedef struct {
    const char *checkpoint, *data, *split, *output, *cfg_name;
    const char **inputs;
    int ninputs, json;
    int64_t batch_size, seq_len;
    char **overrides;
    int noverrides;
} gen_args;

static int parse_gen_args(int argc, char **argv, gen_args *a, trm_err *e) {
    memset(a, 0, sizeof *a);
    a->split = "test";
    a->inputs = xcalloc((size_t)argc + 1, sizeof *a->inputs);
    a->overrides = xcalloc((size_t)argc + 1, sizeof *a->overrides);
    for (int i = 0; i < argc; i++) {
        const char *w = argv[i];
#define VAL(opt) (i + 1 < argc ? argv[++i] : (trm_errf(e, "%s needs a value", opt), (char *)NULL))
        if (!strcmp(w, "--checkpoint")) { if (!(a->checkpoint = VAL(w))) return -1; }
        else if (!strcmp(w, "--data")) { if (!(a->data = VAL(w))) return -1; }
        else if (!strcmp(w, "--split")) { if (!(a->split = VAL(w))) return -1; }
        else if (!strcmp(w, "--output")) { if (!(a->output = VAL(w))) return -1; }
        else if (!strcmp(w, "--input")) { if (!(a->inputs[a->ninputs++] = VAL(w))) return -1; }
        else if (!strcmp(w, "--batch-size")) {
            const char *v = VAL(w);
            char *end;
            if (!v) return -1;
            a->batch_size = strtoll(v, &end, 10);
            if (*end || a->batch_size < 1) return trm_errf(e, "--batch-size: expected a positive integer, got '%s'", v);
        } else if (!strcmp(w, "--seq-len")) {
            if (trm_parse_i64(w, VAL(w), &a->seq_len, e)) return -1;
            if (a->seq_len < 1) return trm_errf(e, "--seq-len: expected a positive integer");
        } else if (!strcmp(w, "--json")) a->json = 1;
        else if (!strncmp(w, "cfg=", 4)) a->cfg_name = w + 4;
        else if (w[0] != '-' && strchr(w, '=')) a->overrides[a->noverrides++] = argv[i];
        else return trm_errf(e, "unexpected argument '%s' (see trm help generate)", w);
#undef VAL
    }
    if (!a->checkpoint) return trm_errf(e, "--checkpoint FILE is required");
    if (!a->data && !a->ninputs) return trm_errf(e, "give --data DIR or --input TEXT");
    return 0;
}

/* Token conventions of SPEC §7 for typed puzzles, chosen from the text itself:
 * maze text (any of "#SGo": characters "# SGo" → 1..5, newlines separate rows),
 * token ids (the text has commas: "1,10,3"), else Sudoku-style digits ('.'/'0' blank → 1,
 * digit d → d+1; spaces, '|', '-', '+' and newlines are layout). */
enum { MODE_DIGITS, MODE_MAZE, MODE_IDS };

static int input_mode(const char *text) {
    if (strpbrk(text, "#SGo")) return MODE_MAZE;
    if (strchr(text, ',')) return MODE_IDS;
    return MODE_DIGITS;
}

static int next_token(const char **pp, int mode, int *tok) {
    const char *p = *pp;
    for (;; p++) {
        if (!*p) return 0;
        if (*p == '\n' || *p == '\r') continue;
        if (mode != MODE_MAZE && strchr(" ,|-+\t", *p)) continue;
        break;
    }
    if (mode == MODE_MAZE) {
        const char *k = strchr("# SGo", *p);
        *tok = k ? (int)(k - "# SGo") + 1 : -1;
        *pp = p + 1;
    } else if (mode == MODE_IDS) {
        char *end;
        long v = strtol(p, &end, 10);
        *tok = end == p ? -1 : (int)v;
        *pp = end == p ? p + 1 : end;
    } else {
        *tok = *p == '.' ? 1 : (*p >= '0' && *p <= '9') ? *p - '0' + 1 : -1;
        *pp = p + 1;
    }
    return 1;
}

/* What the typed text may contain in `mode` for a model of vocabulary V, for the message that
 * refuses a character. */
static void allowed_chars(int mode, int V, char *buf, size_t n) {
    if (mode == MODE_MAZE)
        snprintf(buf, n, "a maze takes '#' (wall), ' ' (open), 'S' (start), 'G' (goal) and 'o' (path), rows "
                         "separated by line breaks");
    else if (mode == MODE_IDS)
        snprintf(buf, n, "token ids take whole numbers 0..%d separated by commas", V - 1);
    else if (V - 2 >= 1)
        snprintf(buf, n, "this model takes the digits 1-%d for cells and '.' or '0' for blanks%s (spaces, '|', '-', "
                         "'+' and line breaks are layout)", V - 2 > 9 ? 9 : V - 2,
                 V - 2 > 9 ? "; larger tokens as comma-separated ids" : "");
    else
        snprintf(buf, n, "this model's vocabulary (0..%d) has no digit cells; give comma-separated token ids", V - 1);
}

static int parse_puzzles(const char *text, int S, int V, int32_t **out, int *count, trm_err *e) {
    int mode = input_mode(text), cap = 16, n = 0, pos = 0, tok;
    int32_t *toks = xmalloc(sizeof(int32_t) * (size_t)cap * S);
    const char *p = text;
    while (next_token(&p, mode, &tok)) {
        if (tok < 0 || tok >= V) {
            free(toks);
            char allowed[256], shown[16];
            unsigned char c = (unsigned char)p[-1];
            if (mode == MODE_IDS && tok >= V) snprintf(shown, sizeof shown, "%d", tok);
            else if (c >= 32 && c < 127) snprintf(shown, sizeof shown, "%c", c);
            else snprintf(shown, sizeof shown, "\\x%02x", c);
            allowed_chars(mode, V, allowed, sizeof allowed);
            return trm_errf(e, "--input: '%s' at offset %d is not a token of this model: %s", shown,
                            (int)(p - text) - 1, allowed);
        }
        if (n * S + pos >= cap * S) toks = xrealloc(toks, sizeof(int32_t) * (size_t)(cap *= 2) * S);
        toks[n * S + pos++] = tok;
        if (pos == S) n++, pos = 0;
    }
    if (pos != 0 || n == 0) {
        free(toks);
        return trm_errf(e, "--input: %d tokens do not make whole puzzles of seq_len %d", n * S + pos, S);
    }
    *out = toks;
    *count = n;
    return 0;
}

static void print_grid(const int32_t *t, int S, int mode) {
    int side = (int)lround(sqrt((double)S));
    for (int i = 0; i < S; i++) {
        int v = t[i];
        if (mode == MODE_DIGITS) putchar(v >= 2 && v <= 10 ? '0' + v - 1 : '.');
        else if (mode == MODE_MAZE) putchar(v >= 1 && v <= 5 ? "# SGo"[v - 1] : '?');
        else printf("%d%s", v, (i + 1) % side ? "," : "");
        if (side * side == S && (i + 1) % side == 0) putchar('\n');
    }
    if (side * side != S) putchar('\n');
}

/* The puzzle as one line in the notation it was typed in ("1.3.4..2", "# S o G", "1,2,3"). */
static void json_grid(json_buf *jb, const char *key, const int32_t *t, int S, int mode) {
    char *s = xmalloc((size_t)S * 12 + 1);
    size_t o = 0;
    for (int i = 0; i < S; i++) {
        int v = t[i];
        if (mode == MODE_DIGITS) s[o++] = v >= 2 && v <= 10 ? (char)('0' + v - 1) : '.';
        else if (mode == MODE_MAZE) s[o++] = v >= 1 && v <= 5 ? "# SGo"[v - 1] : '?';
        else o += (size_t)sprintf(s + o, "%s%d", i ? "," : "", v);
    }
    s[o] = 0;
    json_kv_str(jb, key, s);
    free(s);
}

static void json_tokens(json_buf *jb, const char *key, const int32_t *t, int S) {
    json_key(jb, key);
    json_arr_begin(jb);
    for (int i = 0; i < S; i++) json_int(jb, t[i]);
    json_arr_end(jb);
}

/* The puzzle's rules applied to the prediction, where trm knows them: Sudoku digits of side 4
 * or 9 (vocabulary side + 2) and mazes. */
static trm_verdict judge_input(const int32_t *in, const int32_t *pred, int S, int V, int mode, char *why,
                               size_t len) {
    int n = (int)lround(sqrt((double)S));
    if (n * n != S) return TRM_VERDICT_NONE;
    if (mode == MODE_DIGITS && V == n + 2 && (n == 4 || n == 9)) {
        uint8_t q[81], p[81]; /* token 1 is a blank, d + 1 the digit d */
        for (int i = 0; i < S; i++) {
            q[i] = (uint8_t)(in[i] >= 2 && in[i] <= n + 1 ? in[i] - 1 : 0);
            p[i] = (uint8_t)(pred[i] >= 2 && pred[i] <= n + 1 ? pred[i] - 1 : 0);
        }
        return trm_judge_sudoku(n, q, p, why, len);
    }
    if (mode == MODE_MAZE) {
        char *q = xmalloc((size_t)S), *p = xmalloc((size_t)S);
        for (int i = 0; i < S; i++) {
            q[i] = in[i] >= 1 && in[i] <= 5 ? "# SGo"[in[i] - 1] : '?';
            p[i] = pred[i] >= 1 && pred[i] <= 5 ? "# SGo"[pred[i] - 1] : '?';
        }
        trm_verdict v = trm_judge_maze(n, q, p, why, len);
        free(q), free(p);
        return v;
    }
    return TRM_VERDICT_NONE;
}

/* One solved puzzle: as text (grids), or appended to the "puzzles" array of jb. */
static void report_input(json_buf *jb, int index, const int32_t *in, const int32_t *pred, int S, int V, int mode,
                         int steps, int first_halt, double confidence) {
    char why[256];
    trm_verdict v = judge_input(in, pred, S, V, mode, why, sizeof why);
    if (!jb) {
        printf("puzzle %d:\n", index);
        print_grid(in, S, mode);
        char when[48];
        if (first_halt) snprintf(when, sizeof when, "q_halt > 0 first at step %d", first_halt);
        else snprintf(when, sizeof when, "q_halt never > 0");
        printf("prediction after %d ACT steps (%s, halting confidence %.3f):\n", steps, when, confidence);
        print_grid(pred, S, mode);
        if (v == TRM_VERDICT_SOLVED) printf("solved: %s\n", why);
        else if (v != TRM_VERDICT_NONE) printf("NOT solved: %s\n", why);
        return;
    }
    json_obj_begin(jb);
    json_kv_int(jb, "puzzle", index);
    json_grid(jb, "input", in, S, mode);
    json_grid(jb, "prediction", pred, S, mode);
    json_tokens(jb, "input_tokens", in, S);
    json_tokens(jb, "prediction_tokens", pred, S);
    json_kv_int(jb, "act_steps", steps);
    json_key(jb, "first_halt_step");
    if (first_halt) json_int(jb, first_halt);
    else json_null(jb);
    json_kv_double(jb, "halting_confidence", confidence);
    json_kv_str(jb, "verdict", trm_verdict_name(v)); /* null where trm does not know the rules */
    json_kv_str(jb, "why", v == TRM_VERDICT_NONE ? NULL : why);
    json_obj_end(jb);
}

/* Solves the --input puzzles; with jb (--json) they become its "puzzles" array. */
static int run_inputs(trm_model *m, const gen_args *a, json_buf *jb, trm_err *e) {
    int32_t *all = NULL;
    int total = 0;
    for (int i = 0; i < a->ninputs; i++) {
        int32_t *t = NULL;
        int c = 0;
        if (parse_puzzles(a->inputs[i], m->S, m->V, &t, &c, e)) {
            free(all);
            return -1;
        }
        all = xrealloc(all, sizeof(int32_t) * (size_t)(total + c) * m->S);
        memcpy(all + (size_t)total * m->S, t, sizeof(int32_t) * (size_t)c * m->S);
        total += c;
        free(t);
    }
    int32_t *in = xcalloc((size_t)m->B * m->S, sizeof(int32_t)), *lab = xmalloc(sizeof(int32_t) * (size_t)m->B * m->S);
    int32_t *pid = xcalloc((size_t)m->B, sizeof(int32_t)), *preds = xmalloc(sizeof(int32_t) * (size_t)m->B * m->S);
    float *q = xmalloc(sizeof(float) * 2 * (size_t)m->B);
    int *first_halt = xmalloc(sizeof(int) * (size_t)m->B);
    int mode = input_mode(a->inputs[0]);
    for (int i = 0; i < m->B * m->S; i++) lab[i] = -100;
    if (jb) {
        json_key(jb, "puzzles");
        json_arr_begin(jb);
    }
    for (int start = 0; start < total; start += m->B) {
        int nb = total - start < m->B ? total - start : m->B;
        memset(in, 0, sizeof(int32_t) * (size_t)m->B * m->S);
        memcpy(in, all + (size_t)start * m->S, sizeof(int32_t) * (size_t)nb * m->S);
        trm_model_set_batch(m, in, lab, pid);
        trm_model_reset_carry(m);
        for (int b = 0; b < m->B; b++) first_halt[b] = 0;
        for (int s = 1; s <= m->cfg.halt_max_steps; s++) {
            trm_step_opts so = {.training = 0, .want_grad = 0, .grad_scale = 1.0f};
            trm_model_act_step(m, &so);
            m->be->to_host(m->be, q, m->q, sizeof(float) * 2 * (size_t)m->B);
            for (int b = 0; b < nb; b++)
                if (!first_halt[b] && q[2 * b] > 0) first_halt[b] = s;
        }
        m->be->to_host(m->be, preds, m->preds, sizeof(int32_t) * (size_t)m->B * m->S);
        for (int b = 0; b < nb; b++)
            report_input(jb, start + b + 1, all + (size_t)(start + b) * m->S, preds + (size_t)b * m->S, m->S, m->V, mode,
                         m->cfg.halt_max_steps, first_halt[b], 1.0 / (1.0 + exp(-q[2 * b])));
    }
    if (jb) json_arr_end(jb);
    free(all); free(in); free(lab); free(pid); free(preds); free(q); free(first_halt);
    return 0;
}

/* The evaluation's progress on stderr (in place on a terminal; a line now and then otherwise). */
typedef struct {
    trm_display disp;
    double t0;
} eval_view;

static void show_eval_progress(void *ctx, int64_t done, int64_t total, const char *set) {
    eval_view *v = ctx;
    if (!trm_display_due(&v->disp)) return;
    char line[512];
    double eta = (trm_now_seconds() - v->t0) / (double)done * (double)(total - done);
    trm_eval_status_format(-1, set, done, total, eta, trm_display_width(&v->disp), line, sizeof line);
    trm_display_progress(&v->disp, line, 1);
}

static int generate(const gen_args *a, const trm_globals *g, trm_err *e) {
    int rc = -1;
    char **ov = trm_normalise_overrides(a->overrides, a->noverrides), *source = NULL;
    cfg_node *cfg = trm_weights_config(a->checkpoint, &g->search, a->cfg_name, a->noverrides, ov, &source, e);
    trm_free_strs(ov, a->noverrides);
    if (!cfg) return -1;
    fprintf(stderr, "config: %s\n", source);
    free(source);
    trm_run_config rc_;
    trm_dataset d;
    int have_data = 0;
    trm_backend *be = NULL;
    trm_model m;
    trm_plan plan;
    memset(&plan, 0, sizeof plan);
    memset(&m, 0, sizeof m);
    memset(&d, 0, sizeof d);
    /* --json: one object, the data's metrics (as metrics.jsonl formats them, so values compare
     * exactly) and the typed puzzles under "puzzles" */
    json_buf jb;
    json_buf_init(&jb);
    json_obj_begin(&jb);
    if (trm_run_config_read(&rc_, cfg, e)) goto out_cfg;
    trm_dataset_meta meta = {0};
    if (a->data) {
        const char *paths[1] = {a->data};
        if (trm_dataset_open(&d, paths, 1, a->split, e)) goto out;
        have_data = 1;
    }
    st_file wf; /* the model's data sizes: trm's metadata, else the weights and the data */
    if (tensor_file_open(&wf, a->checkpoint, e)) goto out;
    int bad_dims = trm_weights_dims(&wf, a->checkpoint, &rc_.arch, have_data ? &d.meta : NULL, a->seq_len, &meta, e);
    st_close(&wf);
    if (bad_dims) goto out;
    if (have_data) {
        char *what = xasprintf("%s (%s split)", a->data, a->split);
        int bad = trm_dataset_check_compatible(&d.meta, &meta, what, e);
        free(what);
        if (bad) goto out;
    }
    trm_device_request req = {.want_compile = rc_.compile, .want_bf16 = rc_.arch.forward_bf16};
    trm_device_choice dc;
    if (trm_device_choose(rc_.device, &req, &dc, stderr, e)) goto out;
    fprintf(stderr, "%s\n", dc.why);
    be = trm_device_open(&dc, e);
    if (!be) goto out;
    int64_t gbs = a->batch_size ? a->batch_size : rc_.global_batch_size;
    trm_model_config mc;
    trm_model_config_for(&mc, &rc_, &meta, (int)gbs);
    mc.inference_only = 1;
    if (trm_model_create(&m, &mc, be, 0, 0, e)) goto out;
    if (trm_checkpoint_load_weights(&m, a->checkpoint, 0, e)) goto out;
    trm_plan_init(&plan, &m, dc.compile);
    if (have_data) {
        trm_eval_result r;
        trm_eval_outputs o = {0};
        trm_evaluators *evals = NULL;
        if (trm_evaluators_open(&evals, rc_.evaluators, rc_.n_evaluators, a->data, e)) goto out;
        trm_eval_sink sinks[2];
        int nsinks = 0;
        if (a->output) sinks[nsinks++] = trm_eval_collect(&o);
        if (evals) sinks[nsinks++] = trm_evaluators_sink(evals);
        trm_eval_metrics em = {0};
        char *ckdir = dirname_of(a->checkpoint), *tag = xasprintf("generate_%s", a->split);
        eval_view view = {.t0 = trm_now_seconds()};
        trm_display_init(&view.disp, stderr, 1, trm_term_is_tty(stderr));
        trm_eval_progress prog = {show_eval_progress, &view};
        int erc = trm_evaluate(&m, &plan, &d, gbs, NULL, &r, sinks, nsinks, NULL, &prog, e);
        trm_display_clear(&view.disp);
        if (!erc) erc = trm_evaluators_finish(evals, ckdir, tag, &em, e);
        if (!erc && evals) fprintf(stderr, "submission: %s/evaluator_ARC_%s/submission.json\n", ckdir, tag);
        free(ckdir);
        free(tag);
        trm_evaluators_free(evals);
        if (erc) {
            free(o.preds);
            free(o.q_halt);
            goto out;
        }
        /* text: each set's metrics wrapped to 80 columns; --json: every one as NAME/metric */
        char head[80], text[TRM_NMETRICS + TRM_EVAL_MAX_METRICS][80];
        const char *fields[TRM_NMETRICS + TRM_EVAL_MAX_METRICS];
        for (int s = 0; s < r.nsets; s++) {
            int nf = 0;
            for (int k = 0; k < TRM_NMETRICS; k++) {
                if (k == TRM_M_Q_CONTINUE_LOSS) continue; /* no target exists in evaluation */
                double val = k == TRM_M_COUNT ? r.sums[s][k] : trm_eval_metric(&r, s, k);
                char key[128];
                snprintf(key, sizeof key, "%s/%s", r.names[s], trm_metric_names[k]);
                json_kv_double(&jb, key, val);
                snprintf(text[nf], sizeof text[nf], "%s %.6g", trm_metric_names[k], val);
                fields[nf] = text[nf], nf++;
            }
            snprintf(head, sizeof head, "[%.64s]", r.names[s]);
            if (!a->json) trm_print_fields(stdout, TRM_LINE_WIDTH, head, fields, nf);
        }
        for (int i = 0; i < em.n; i++) {
            json_kv_double(&jb, em.names[i], em.values[i]);
            snprintf(text[i], sizeof text[i], "%.48s %.6g", em.names[i], em.values[i]);
            fields[i] = text[i];
        }
        if (em.n && !a->json) trm_print_fields(stdout, TRM_LINE_WIDTH, "[evaluators]", fields, em.n);
        trm_eval_result_free(&r);
        int orc = a->output ? trm_save_eval_outputs(a->output, &o, m.S, e) : 0;
        free(o.preds);
        free(o.q_halt);
        if (orc) goto out;
    }
    if (a->ninputs && run_inputs(&m, a, a->json ? &jb : NULL, e)) goto out;
    if (a->json) {
        json_obj_end(&jb);
        printf("%s\n", jb.p);
    }
    rc = 0;
out:
    trm_plan_free(&plan);
    if (m.be) trm_model_destroy(&m);
    if (be) be->destroy(be);
    if (have_data) trm_dataset_close(&d);
    trm_run_config_free(&rc_);
out_cfg:
    json_buf_free(&jb);
    cfg_free(cfg);
    return rc;
}

int cmd_generate(int argc, char **argv, const trm_globals *g) {
    gen_args a;
    trm_err e = {{0}};
    int rc = parse_gen_args(argc, argv, &a, &e) ? 2 : (generate(&a, g, &e) ? 1 : 0);
    if (rc) fprintf(stderr, "trm generate: %s\n", e.msg);
    free(a.inputs);
    free(a.overrides);
    return rc;
}
